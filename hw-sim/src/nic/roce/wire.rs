//! What a RoCE packet carries, packed into the fabric packet's 64-bit `transport_tag` (no side
//! table: the headers a RoCEv2 RC write needs fit in one word).
//!
//! Layout: bits 62..64 the [`Kind`], bit 61 *last packet of its message* (BTH AckReq; data
//! only), bits 32..60 the QPN (28 bits; the QPN is the workload flow id on both ends), bits
//! 0..32 the packet sequence index. On a real wire the PSN is that index mod 2^24; go-back-N
//! keeps far fewer than 2^23 PSNs outstanding, so the mapping is unambiguous and the model
//! keeps the unwrapped index.
//!
//! - `Data { psn }`: an RDMA Write packet.
//! - `Ack { psn }`: AETH ACK, *every PSN below `psn` received* (the responder's expected PSN).
//! - `Nak { psn }`: AETH NAK "PSN sequence error", expected PSN `psn` (implies an ACK of
//!   everything below).
//! - `Cnp`: RoCEv2 congestion notification packet for the QP.

/// Largest QPN the tag holds.
pub const MAX_QPN: u32 = (1 << 28) - 1;

/// Wire bytes of a data packet without payload: Ethernet 14 + IPv6 40 + UDP 8 + BTH 12 +
/// ICRC 4 + FCS 4.
pub const DATA_HEADER_BYTES: u32 = 82;
/// RETH, on the first packet of every RDMA Write message.
pub const RETH_BYTES: u32 = 16;
/// ACK / NAK: the data headers + AETH 4.
pub const ACK_BYTES: u32 = DATA_HEADER_BYTES + 4;
/// CNP: the data headers + 16 reserved bytes.
pub const CNP_BYTES: u32 = DATA_HEADER_BYTES + 16;

/// Packet kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// RDMA Write data.
    Data {
        /// Sequence index.
        psn: u32,
        /// Last packet of its message (the responder ACKs it).
        last: bool,
    },
    /// Cumulative ACK: every PSN below `psn` received.
    Ack {
        /// Expected PSN at the responder.
        psn: u32,
    },
    /// PSN sequence error NAK: `psn` expected, later ones dropped.
    Nak {
        /// Expected PSN at the responder.
        psn: u32,
    },
    /// Congestion notification.
    Cnp,
}

/// A decoded tag: the QP and what the packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    /// Destination QP (the flow id).
    pub qpn: u32,
    /// What it is.
    pub kind: Kind,
}

impl Tag {
    /// The 64-bit tag (`qpn` is masked to 28 bits; callers check [`MAX_QPN`]).
    pub fn encode(self) -> u64 {
        let (k, last, psn) = match self.kind {
            Kind::Data { psn, last } => (0u64, last, psn),
            Kind::Ack { psn } => (1, false, psn),
            Kind::Nak { psn } => (2, false, psn),
            Kind::Cnp => (3, false, 0),
        };
        k << 62 | u64::from(last) << 61 | u64::from(self.qpn & MAX_QPN) << 32 | u64::from(psn)
    }

    /// Decodes a tag. Every 64-bit value decodes (bit 60 is ignored), so a foreign tag is
    /// caught by the QPN lookup, not here.
    pub fn decode(t: u64) -> Tag {
        let psn = t as u32;
        let qpn = (t >> 32) as u32 & MAX_QPN;
        let kind = match t >> 62 {
            0 => Kind::Data {
                psn,
                last: t >> 61 & 1 == 1,
            },
            1 => Kind::Ack { psn },
            2 => Kind::Nak { psn },
            _ => Kind::Cnp,
        };
        Tag { qpn, kind }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(qpn in 0..=MAX_QPN, psn: u32, last: bool, k in 0..4u8) {
            let kind = match k {
                0 => Kind::Data { psn, last },
                1 => Kind::Ack { psn },
                2 => Kind::Nak { psn },
                _ => Kind::Cnp,
            };
            let t = Tag { qpn, kind };
            prop_assert_eq!(Tag::decode(t.encode()), t);
        }
    }

    #[test]
    fn layout_is_fixed() {
        let t = Tag {
            qpn: 5,
            kind: Kind::Data { psn: 7, last: true },
        };
        assert_eq!(t.encode(), 1 << 61 | 5 << 32 | 7);
        assert_eq!(
            Tag::decode(2 << 62 | 9 << 32 | 3),
            Tag {
                qpn: 9,
                kind: Kind::Nak { psn: 3 }
            }
        );
    }
}
