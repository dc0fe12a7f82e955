//! The MRC headers after UDP: BTH, MRH, the optional EVX and TSX extensions, and the opcode's
//! body (RETH and ImmDt for writes, ACKX, NACKX or PRBX for control packets).

use super::bth::{self, BthPacket, BthRepr, Opcode};
use super::field::{need, set_u16, set_u24, set_u32, set_u64, u16_at, u24_at, u32_at, u64_at};
use super::{Error, EvFormat, Header, MRC_VERSION};
use crate::Psn;

/// Length of the MRH.
pub const MRH_LEN: usize = 4;
/// Length of the EV extension.
pub const EVX_LEN: usize = 8;
/// Length of the timestamp extension.
pub const TSX_LEN: usize = 8;
/// Length of the RETH.
pub const RETH_LEN: usize = 16;
/// Length of ImmDt.
pub const IMMDT_LEN: usize = 4;
/// Length of the ACK extension.
pub const ACKX_LEN: usize = 24;
/// Length of the NACK extension.
pub const NACKX_LEN: usize = 16;
/// Length of the probe extension.
pub const PRBX_LEN: usize = 8;

/// MRH flag bits (byte 1).
pub mod flags {
    /// EVX follows the MRH.
    pub const EVX: u8 = 0x80;
    /// TSX follows the MRH (after EVX when both are present).
    pub const TSX: u8 = 0x40;
    /// A switch cut the payload off.
    pub const TRIMMED: u8 = 0x20;
    /// The trimming switch was the last hop.
    pub const TRIMMED_LAST_HOP: u8 = 0x10;
    /// The packet is a retransmission.
    pub const RETRANSMIT: u8 = 0x08;
}

/// The MRC header's meaning (EVX/TSX presence is carried by [`MrcRepr`]'s options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MrhRepr {
    /// How the EV is carried.
    pub ev_format: EvFormat,
    /// Payload trimmed by a switch.
    pub trimmed: bool,
    /// Trimmed by the last-hop switch.
    pub trimmed_last_hop: bool,
    /// A retransmission.
    pub retransmit: bool,
    /// Message sequence number.
    pub msn: u16,
}

/// EV extension: which EV and plane a packet took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvxRepr {
    /// EV index in the sender's per-QP table.
    pub ev_index: u16,
    /// Plane (NIC port).
    pub plane: u8,
    /// EV value (UDP port / STEV value / SRv6 route index).
    pub ev_value: u32,
}

/// Timestamp extension for RTT measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TsxRepr {
    /// Sender clock at transmission, ns, low 32 bits.
    pub tx_ts_ns: u32,
    /// The tx timestamp of the packet this one answers; 0 on data packets.
    pub echo_ts_ns: u32,
}

/// RDMA extended transport header: where this packet's payload goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RethRepr {
    /// Remote virtual address of this packet's first payload byte.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// This packet's payload length.
    pub dma_len: u32,
}

/// Which packet of a message a write packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Segment {
    /// First of several.
    First,
    /// Neither first nor last.
    Middle,
    /// Last of several, with optional immediate data.
    Last {
        /// Immediate data (Write-with-Immediate).
        imm: Option<u32>,
    },
    /// The only packet, with optional immediate data.
    Only {
        /// Immediate data (Write-with-Immediate).
        imm: Option<u32>,
    },
}

impl Segment {
    /// The segment a write opcode names, with `imm` as the immediate of the opcodes that carry
    /// one; `None` for an opcode that is not a write (the inverse of [`Body::opcode`]).
    pub const fn of_write(op: Opcode, imm: u32) -> Option<Segment> {
        Some(match op {
            Opcode::WriteFirst => Segment::First,
            Opcode::WriteMiddle => Segment::Middle,
            Opcode::WriteLast => Segment::Last { imm: None },
            Opcode::WriteLastImm => Segment::Last { imm: Some(imm) },
            Opcode::WriteOnly => Segment::Only { imm: None },
            Opcode::WriteOnlyImm => Segment::Only { imm: Some(imm) },
            _ => return None,
        })
    }
}

/// Selective acknowledgement with ECN and plane feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AckRepr {
    /// Every PSN before this one has been received.
    pub cum_psn: Psn,
    /// PSN of bitmap bit 0.
    pub sack_base: Psn,
    /// Bit i set: PSN `sack_base + i` received.
    pub sack_bitmap: u64,
    /// EV index of the packet that triggered the ACK.
    pub ev_index: u16,
    /// Plane of that packet.
    pub plane: u8,
    /// Bit p: a CE mark arrived on plane p since the last ACK.
    pub ecn_plane_mask: u8,
    /// CE-marked data packets covered.
    pub ce_count: u16,
    /// Data packets covered.
    pub pkt_count: u16,
}

/// Why a packet was NACKed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum NackReason {
    /// Trimmed in the fabric (congestion): retransmit, keep the EV.
    Trimmed = 1,
    /// Trimmed at the last hop (incast): retransmit, keep the EV.
    TrimmedLastHop = 2,
    /// PSN outside the responder's window.
    OutOfWindow = 3,
    /// Bad rkey or access outside a registered region (fatal).
    RemoteAccess = 4,
    /// RETH length does not match the payload (fatal).
    Length = 5,
    /// Write-with-Immediate without a posted receive (fatal).
    NoRecvBuffer = 6,
    /// QP unknown or not in RTR/RTS.
    InvalidQp = 7,
    /// More Write-with-Immediate in flight than negotiated.
    TooManyWimm = 8,
}

impl NackReason {
    /// Every reason, in code order.
    pub const ALL: [NackReason; 8] = [
        NackReason::Trimmed,
        NackReason::TrimmedLastHop,
        NackReason::OutOfWindow,
        NackReason::RemoteAccess,
        NackReason::Length,
        NackReason::NoRecvBuffer,
        NackReason::InvalidQp,
        NackReason::TooManyWimm,
    ];
    /// Decode a reason byte.
    pub fn from_u8(v: u8) -> Result<Self, Error> {
        NackReason::ALL
            .iter()
            .copied()
            .find(|r| *r as u8 == v)
            .ok_or(Error::UnknownNackReason(v))
    }
    /// True when the QP cannot continue after this NACK.
    pub const fn is_fatal(self) -> bool {
        matches!(
            self,
            NackReason::RemoteAccess | NackReason::Length | NackReason::NoRecvBuffer
        )
    }
    /// Upper-case name as WIRE.md spells it.
    pub const fn name(self) -> &'static str {
        match self {
            NackReason::Trimmed => "TRIMMED",
            NackReason::TrimmedLastHop => "TRIMMED_LAST_HOP",
            NackReason::OutOfWindow => "OUT_OF_WINDOW",
            NackReason::RemoteAccess => "REMOTE_ACCESS",
            NackReason::Length => "LENGTH",
            NackReason::NoRecvBuffer => "NO_RECV_BUFFER",
            NackReason::InvalidQp => "INVALID_QP",
            NackReason::TooManyWimm => "TOO_MANY_WIMM",
        }
    }
}

/// Negative acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NackRepr {
    /// Why.
    pub reason: NackReason,
    /// The NACKed PSN.
    pub psn: Psn,
    /// Cumulative PSN at the responder.
    pub cum_psn: Psn,
    /// EV index of the NACKed packet.
    pub ev_index: u16,
    /// Plane of the NACKed packet.
    pub plane: u8,
}

/// EV probe or probe reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ProbeRepr {
    /// Probe id, echoed in the reply.
    pub probe_id: u32,
    /// EV index probed.
    pub ev_index: u16,
    /// Plane.
    pub plane: u8,
}

/// What follows the MRH and its extensions; it determines the opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Body {
    /// A write packet.
    Write {
        /// Position in the message (and immediate data).
        segment: Segment,
        /// Placement.
        reth: RethRepr,
    },
    /// ACK.
    Ack(AckRepr),
    /// NACK.
    Nack(NackRepr),
    /// EV probe.
    Probe(ProbeRepr),
    /// EV probe reply.
    ProbeReply(ProbeRepr),
}

impl Body {
    /// The opcode this body is sent with.
    pub const fn opcode(&self) -> Opcode {
        match self {
            Body::Write { segment, .. } => match segment {
                Segment::First => Opcode::WriteFirst,
                Segment::Middle => Opcode::WriteMiddle,
                Segment::Last { imm: None } => Opcode::WriteLast,
                Segment::Last { imm: Some(_) } => Opcode::WriteLastImm,
                Segment::Only { imm: None } => Opcode::WriteOnly,
                Segment::Only { imm: Some(_) } => Opcode::WriteOnlyImm,
            },
            Body::Ack(_) => Opcode::Ack,
            Body::Nack(_) => Opcode::Nack,
            Body::Probe(_) => Opcode::EvProbe,
            Body::ProbeReply(_) => Opcode::EvProbeReply,
        }
    }

    /// Length of the body's headers.
    pub const fn header_len(&self) -> usize {
        match self {
            Body::Write {
                segment: Segment::Last { imm: Some(_) } | Segment::Only { imm: Some(_) },
                ..
            } => RETH_LEN + IMMDT_LEN,
            Body::Write { .. } => RETH_LEN,
            Body::Ack(_) => ACKX_LEN,
            Body::Nack(_) => NACKX_LEN,
            Body::Probe(_) | Body::ProbeReply(_) => PRBX_LEN,
        }
    }
}

const fn body_len(op: Opcode) -> usize {
    match op {
        Opcode::WriteLastImm | Opcode::WriteOnlyImm => RETH_LEN + IMMDT_LEN,
        Opcode::WriteFirst | Opcode::WriteMiddle | Opcode::WriteLast | Opcode::WriteOnly => {
            RETH_LEN
        }
        Opcode::Ack => ACKX_LEN,
        Opcode::Nack => NACKX_LEN,
        Opcode::EvProbe | Opcode::EvProbeReply => PRBX_LEN,
    }
}

/// Every MRC header of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MrcRepr {
    /// Base transport header. Its `opcode` must equal `body.opcode()` when emitting.
    pub bth: BthRepr,
    /// MRC header.
    pub mrh: MrhRepr,
    /// EV extension, when present.
    pub evx: Option<EvxRepr>,
    /// Timestamp extension, when present.
    pub tsx: Option<TsxRepr>,
    /// The opcode's body.
    pub body: Body,
}

/// A view of the MRC headers (the UDP payload): where each part starts.
#[derive(Debug, Clone, Copy)]
pub struct MrcPacket<T: AsRef<[u8]>> {
    buffer: T,
    evx_at: Option<usize>,
    tsx_at: Option<usize>,
    body_at: usize,
    payload_at: usize,
}

impl<T: AsRef<[u8]>> MrcPacket<T> {
    /// Check that the BTH, MRH, announced extensions and the opcode's body are all present.
    /// After this, the slice accessors never panic.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        let bth = BthPacket::new_checked(b)?;
        let op = Opcode::from_u8(bth.opcode())?;
        let mut at = bth::HEADER_LEN;
        need(b, at + MRH_LEN, Header::Mrh)?;
        let fl = b[at + 1];
        at += MRH_LEN;
        let evx_at = (fl & flags::EVX != 0).then_some(at);
        if evx_at.is_some() {
            need(b, at + EVX_LEN, Header::Evx)?;
            at += EVX_LEN;
        }
        let tsx_at = (fl & flags::TSX != 0).then_some(at);
        if tsx_at.is_some() {
            need(b, at + TSX_LEN, Header::Tsx)?;
            at += TSX_LEN;
        }
        let body_header = match op {
            Opcode::Ack => Header::Ack,
            Opcode::Nack => Header::Nack,
            Opcode::EvProbe | Opcode::EvProbeReply => Header::Probe,
            _ => Header::Reth,
        };
        if op.is_write() {
            need(b, at + RETH_LEN, Header::Reth)?;
        }
        need(
            b,
            at + body_len(op),
            if op.has_imm() {
                Header::ImmDt
            } else {
                body_header
            },
        )?;
        let payload_at = at + body_len(op);
        Ok(MrcPacket {
            buffer,
            evx_at,
            tsx_at,
            body_at: at,
            payload_at,
        })
    }
    /// The BTH.
    pub fn bth(&self) -> BthPacket<&[u8]> {
        BthPacket::new_unchecked(&self.buffer.as_ref()[..bth::HEADER_LEN])
    }
    /// The MRH bytes.
    pub fn mrh(&self) -> &[u8] {
        &self.buffer.as_ref()[bth::HEADER_LEN..bth::HEADER_LEN + MRH_LEN]
    }
    /// The EVX bytes, when present.
    pub fn evx(&self) -> Option<&[u8]> {
        self.evx_at.map(|a| &self.buffer.as_ref()[a..a + EVX_LEN])
    }
    /// The TSX bytes, when present.
    pub fn tsx(&self) -> Option<&[u8]> {
        self.tsx_at.map(|a| &self.buffer.as_ref()[a..a + TSX_LEN])
    }
    /// The body headers (RETH [+ ImmDt], ACKX, NACKX or PRBX).
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[self.body_at..self.payload_at]
    }
    /// Offset of the payload from the start of the MRC headers.
    pub fn header_len(&self) -> usize {
        self.payload_at
    }
    /// The data after all headers.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_at..]
    }
}

impl MrhRepr {
    fn parse(b: &[u8]) -> Result<Self, Error> {
        let v = b[0] >> 4;
        if v != MRC_VERSION {
            return Err(Error::BadMrcVersion(v));
        }
        Ok(MrhRepr {
            ev_format: EvFormat::from_code((b[0] >> 2) & 0x3)?,
            trimmed: b[1] & flags::TRIMMED != 0,
            trimmed_last_hop: b[1] & flags::TRIMMED_LAST_HOP != 0,
            retransmit: b[1] & flags::RETRANSMIT != 0,
            msn: u16_at(b, 2),
        })
    }
    fn emit(&self, b: &mut [u8], evx: bool, tsx: bool) {
        b[0] = (MRC_VERSION << 4) | ((self.ev_format as u8) << 2);
        let mut f = 0;
        for (on, bit) in [
            (evx, flags::EVX),
            (tsx, flags::TSX),
            (self.trimmed, flags::TRIMMED),
            (self.trimmed_last_hop, flags::TRIMMED_LAST_HOP),
            (self.retransmit, flags::RETRANSMIT),
        ] {
            if on {
                f |= bit;
            }
        }
        b[1] = f;
        set_u16(b, 2, self.msn);
    }
}

fn psn_at(b: &[u8], off: usize) -> Psn {
    Psn::new(u24_at(b, off))
}

fn put_psn(b: &mut [u8], off: usize, p: Psn) {
    b[off - 1] = 0;
    set_u24(b, off, p.value());
}

impl MrcRepr {
    /// Parse the MRC headers of a UDP payload; returns them and the payload after them.
    pub fn parse<T: AsRef<[u8]>>(p: &MrcPacket<T>) -> Result<Self, Error> {
        let bth = BthRepr::parse(&p.bth())?;
        let mrh = MrhRepr::parse(p.mrh())?;
        let evx = p.evx().map(|e| EvxRepr {
            ev_index: u16_at(e, 0),
            plane: e[2],
            ev_value: u32_at(e, 4),
        });
        let tsx = p.tsx().map(|t| TsxRepr {
            tx_ts_ns: u32_at(t, 0),
            echo_ts_ns: u32_at(t, 4),
        });
        let b = p.body();
        let write = |segment| {
            let reth = RethRepr {
                va: u64_at(b, 0),
                rkey: u32_at(b, 8),
                dma_len: u32_at(b, 12),
            };
            Body::Write { segment, reth }
        };
        let imm = || Some(u32_at(b, RETH_LEN));
        let probe = || ProbeRepr {
            probe_id: u32_at(b, 0),
            ev_index: u16_at(b, 4),
            plane: b[6],
        };
        let body = match bth.opcode {
            Opcode::WriteFirst => write(Segment::First),
            Opcode::WriteMiddle => write(Segment::Middle),
            Opcode::WriteLast => write(Segment::Last { imm: None }),
            Opcode::WriteLastImm => write(Segment::Last { imm: imm() }),
            Opcode::WriteOnly => write(Segment::Only { imm: None }),
            Opcode::WriteOnlyImm => write(Segment::Only { imm: imm() }),
            Opcode::Ack => Body::Ack(AckRepr {
                cum_psn: psn_at(b, 1),
                sack_base: psn_at(b, 5),
                sack_bitmap: u64_at(b, 8),
                ev_index: u16_at(b, 16),
                plane: b[18],
                ecn_plane_mask: b[19],
                ce_count: u16_at(b, 20),
                pkt_count: u16_at(b, 22),
            }),
            Opcode::Nack => Body::Nack(NackRepr {
                reason: NackReason::from_u8(b[0])?,
                psn: psn_at(b, 1),
                cum_psn: psn_at(b, 5),
                ev_index: u16_at(b, 8),
                plane: b[10],
            }),
            Opcode::EvProbe => Body::Probe(probe()),
            Opcode::EvProbeReply => Body::ProbeReply(probe()),
        };
        let payload = p.payload().len();
        match body {
            Body::Write { reth, .. } if !mrh.trimmed && reth.dma_len as usize != payload => {
                return Err(Error::DmaLengthMismatch {
                    dma_len: reth.dma_len,
                    payload,
                })
            }
            Body::Write { .. } if mrh.trimmed && payload != 0 => {
                return Err(Error::UnexpectedPayload(payload))
            }
            Body::Ack(_) | Body::Nack(_) | Body::Probe(_) | Body::ProbeReply(_) if payload != 0 => {
                return Err(Error::UnexpectedPayload(payload))
            }
            _ => {}
        }
        Ok(MrcRepr {
            bth,
            mrh,
            evx,
            tsx,
            body,
        })
    }

    /// Length of the headers `emit` writes.
    pub const fn header_len(&self) -> usize {
        bth::HEADER_LEN
            + MRH_LEN
            + if self.evx.is_some() { EVX_LEN } else { 0 }
            + if self.tsx.is_some() { TSX_LEN } else { 0 }
            + self.body.header_len()
    }

    /// Write the headers at the start of `b`; panics when `b` is shorter than
    /// [`Self::header_len`]. The BTH opcode written is `body.opcode()`.
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..self.header_len()];
        let bth = BthRepr {
            opcode: self.body.opcode(),
            ..self.bth
        };
        bth.emit(&mut BthPacket::new_unchecked(&mut b[..bth::HEADER_LEN]));
        let mut at = bth::HEADER_LEN;
        self.mrh.emit(
            &mut b[at..at + MRH_LEN],
            self.evx.is_some(),
            self.tsx.is_some(),
        );
        at += MRH_LEN;
        if let Some(e) = self.evx {
            set_u16(b, at, e.ev_index);
            b[at + 2] = e.plane;
            b[at + 3] = 0;
            set_u32(b, at + 4, e.ev_value);
            at += EVX_LEN;
        }
        if let Some(t) = self.tsx {
            set_u32(b, at, t.tx_ts_ns);
            set_u32(b, at + 4, t.echo_ts_ns);
            at += TSX_LEN;
        }
        let body = &mut b[at..];
        body.fill(0);
        match self.body {
            Body::Write { segment, reth } => {
                set_u64(body, 0, reth.va);
                set_u32(body, 8, reth.rkey);
                set_u32(body, 12, reth.dma_len);
                if let Segment::Last { imm: Some(i) } | Segment::Only { imm: Some(i) } = segment {
                    set_u32(body, RETH_LEN, i);
                }
            }
            Body::Ack(a) => {
                put_psn(body, 1, a.cum_psn);
                put_psn(body, 5, a.sack_base);
                set_u64(body, 8, a.sack_bitmap);
                set_u16(body, 16, a.ev_index);
                body[18] = a.plane;
                body[19] = a.ecn_plane_mask;
                set_u16(body, 20, a.ce_count);
                set_u16(body, 22, a.pkt_count);
            }
            Body::Nack(n) => {
                put_psn(body, 1, n.psn);
                body[0] = n.reason as u8;
                put_psn(body, 5, n.cum_psn);
                set_u16(body, 8, n.ev_index);
                body[10] = n.plane;
            }
            Body::Probe(p) | Body::ProbeReply(p) => {
                set_u32(body, 0, p.probe_id);
                set_u16(body, 4, p.ev_index);
                body[6] = p.plane;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_write_inverts_the_write_opcodes() {
        let segments = [
            Segment::First,
            Segment::Middle,
            Segment::Last { imm: None },
            Segment::Last { imm: Some(0xabcd) },
            Segment::Only { imm: None },
            Segment::Only { imm: Some(0xabcd) },
        ];
        for segment in segments {
            let body = Body::Write {
                segment,
                reth: RethRepr::default(),
            };
            assert_eq!(Segment::of_write(body.opcode(), 0xabcd), Some(segment));
        }
        for op in [
            Opcode::Ack,
            Opcode::Nack,
            Opcode::EvProbe,
            Opcode::EvProbeReply,
        ] {
            assert_eq!(Segment::of_write(op, 0xabcd), None);
        }
    }

    #[test]
    fn ack_byte_literal() {
        #[rustfmt::skip]
        let b: [u8; 48] = [
            0xd0, 0, 0xff, 0xff, 0, 0, 0, 7, 0, 0, 0, 9,      // BTH: ACK to QP 7, PSN 9
            0x10, 0x80, 0x00, 0x05,                           // MRH: v1, udp, EVX, msn 5
            0x00, 0x03, 0x01, 0x00, 0x00, 0x00, 0xc0, 0x03,   // EVX: ev 3, plane 1, value 0xc003
            0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x60,   // ACKX: cum 100, base 96
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0f,   //   bitmap: 96..=99
            0x00, 0x03, 0x01, 0x02, 0x00, 0x02, 0x00, 0x04,   //   ev 3, plane 1, mask 0b10, ce 2, pkts 4
        ];
        let p = MrcPacket::new_checked(&b[..]).unwrap();
        let r = MrcRepr::parse(&p).unwrap();
        let Body::Ack(a) = r.body else {
            panic!("not an ack: {r:?}")
        };
        assert_eq!(
            (a.cum_psn.value(), a.sack_base.value(), a.sack_bitmap),
            (100, 96, 0xf)
        );
        assert_eq!(
            (
                a.ev_index,
                a.plane,
                a.ecn_plane_mask,
                a.ce_count,
                a.pkt_count
            ),
            (3, 1, 2, 2, 4)
        );
        assert_eq!(
            r.evx,
            Some(EvxRepr {
                ev_index: 3,
                plane: 1,
                ev_value: 0xc003
            })
        );
        let mut out = [0u8; 48];
        r.emit(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn write_checks_dma_length_and_trim() {
        let r = MrcRepr {
            bth: BthRepr {
                opcode: Opcode::WriteOnly,
                se: false,
                pkey: 0xffff,
                fecn: false,
                becn: false,
                dest_qp: 1,
                ack_req: true,
                psn: Psn::new(1),
            },
            mrh: MrhRepr {
                ev_format: EvFormat::Udp,
                trimmed: false,
                trimmed_last_hop: false,
                retransmit: false,
                msn: 0,
            },
            evx: None,
            tsx: None,
            body: Body::Write {
                segment: Segment::Only { imm: None },
                reth: RethRepr {
                    va: 0,
                    rkey: 1,
                    dma_len: 4,
                },
            },
        };
        let mut b = [0u8; 36];
        r.emit(&mut b);
        assert_eq!(
            MrcRepr::parse(&MrcPacket::new_checked(&b[..]).unwrap()),
            Ok(r)
        );
        assert_eq!(
            MrcRepr::parse(&MrcPacket::new_checked(&b[..35]).unwrap()),
            Err(Error::DmaLengthMismatch {
                dma_len: 4,
                payload: 3
            })
        );
        b[13] |= flags::TRIMMED;
        assert_eq!(
            MrcRepr::parse(&MrcPacket::new_checked(&b[..]).unwrap()),
            Err(Error::UnexpectedPayload(4))
        );
        assert!(
            MrcRepr::parse(&MrcPacket::new_checked(&b[..32]).unwrap())
                .unwrap()
                .mrh
                .trimmed
        );
        assert!(matches!(
            MrcPacket::new_checked(&b[..31]),
            Err(Error::Truncated {
                header: Header::Reth,
                ..
            })
        ));
    }
}
