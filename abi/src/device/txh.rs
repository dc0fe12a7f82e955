//! The per-packet transmit header queue (TXH) between the firmware cores and the datapath.
//!
//! The mirror of [`super::rxh`]: for every packet the firmware's engine wants sent (new data,
//! retransmissions, ACKs, NACKs, EV probes and probe replies) the firmware writes one 64-byte
//! entry: a 32-byte [`TxhHeader`] (BTH, MRH, EVX and TSX fields, and the sending QP) followed
//! at [`TXH_BODY_OFFSET`] by a 32-byte body chosen by the opcode: [`TxhWrite`] (RETH,
//! immediate, and where the payload is in local memory), [`TxhAck`], [`TxhNack`] or
//! [`TxhProbe`] (probe and probe reply). The datapath builds the packet's headers from the
//! entry, reads `dma_len` payload bytes of a write from buffer `buf_handle` at `buf_offset`,
//! and sends it on plane `plane`.
//!
//! Ring: one [`super::csr::CsrQueueRegs`] block with [`TXH_ENTRY_BYTES`]-byte entries
//! ([`TxhRing`]). The firmware produces; it writes an entry only into a slot the datapath has
//! consumed (it checks the ring has room before it takes a packet from its engine, so a full
//! ring leaves the packet in the engine rather than losing it). The datapath consumes; it drops an entry
//! that fails [`Txh::decode`] and counts it in `overflow` (the firmware never overflows this
//! ring, so on it the register counts malformed entries).
//!
//! Fields follow [`super::csr`]: 24-bit QPNs and PSNs in 32-bit words whose top byte is 0,
//! little-endian; reserved bytes are 0. [`Txh::decode`] checks every field.

use crate::layout::le_struct;
use core::mem::size_of;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use super::QPN_LIMIT;
use crate::wire::{EvFormat, NackReason, Opcode};

/// Size of one TXH entry.
pub const TXH_ENTRY_BYTES: usize = 64;
/// Byte offset of the body in an entry.
pub const TXH_BODY_OFFSET: usize = 32;
/// Size of the body.
pub const TXH_BODY_BYTES: usize = 32;

/// Bits of [`TxhHeader::flags`].
pub mod flags {
    /// BTH A: ask the receiver for an ACK.
    pub const ACK_REQ: u8 = 1 << 0;
    /// MRH RETRANSMIT.
    pub const RETRANSMIT: u8 = 1 << 1;
    /// Every defined bit.
    pub const ALL: u8 = ACK_REQ | RETRANSMIT;
}

le_struct! {
/// FW->DP: the headers of one packet to send (entry bytes 0-31).
pub struct TxhHeader {
    /// BTH opcode: a write opcode, ACK, NACK, EV_PROBE or EV_PROBE_REPLY; selects the body.
    pub opcode: u8,
    /// [`flags`] bits.
    pub flags: u8,
    /// MRH EV format code.
    pub ev_format: u8,
    /// EVX plane: the NIC port to send on.
    pub plane: u8,
    /// The local QP sending it.
    pub src_qpn: U32,
    /// BTH destination QPN.
    pub dest_qpn: U32,
    /// BTH PSN (data: the packet's PSN; ACK / NACK: the cumulative PSN; probes: 0).
    pub psn: U32,
    /// MRH message sequence number.
    pub msn: U16,
    /// EVX EV index.
    pub ev_index: U16,
    /// EVX EV value (the entropy the datapath puts in the outer header).
    pub ev_value: U32,
    /// TSX tx timestamp (ns, low 32 bits).
    pub tx_ts: U32,
    /// TSX echoed timestamp (ACK / NACK / probe reply; 0 otherwise).
    pub echo_ts: U32,
}
}

le_struct! {
/// FW->DP body of a write packet (entry bytes 32-63).
pub struct TxhWrite {
    /// RETH virtual address.
    pub remote_va: U64,
    /// RETH R_Key.
    pub rkey: U32,
    /// RETH DMA length: the payload bytes of this packet.
    pub dma_len: U32,
    /// ImmDt (WRITE_LAST_IMM / WRITE_ONLY_IMM; 0 otherwise).
    pub imm: U32,
    /// Local buffer handle the payload is read from (a registered DMA region).
    pub buf_handle: U32,
    /// Byte offset of the payload in the local buffer.
    pub buf_offset: U64,
}
}

le_struct! {
/// FW->DP body of an ACK (entry bytes 32-63).
pub struct TxhAck {
    /// Cumulative PSN.
    pub cum_psn: U32,
    /// PSN of bit 0 of `sack_bitmap`.
    pub sack_base: U32,
    /// Selective ACK bitmap.
    pub sack_bitmap: U64,
    /// EV index the ACK reports on.
    pub ev_index: U16,
    /// Plane the ACK reports on.
    pub plane: u8,
    /// Planes that saw CE.
    pub ecn_plane_mask: u8,
    /// CE-marked packets covered.
    pub ce_count: U16,
    /// Packets covered.
    pub pkt_count: U16,
    /// Reserved (0).
    pub rsvd: [u8; 8],
}
}

le_struct! {
/// FW->DP body of a NACK (entry bytes 32-63).
pub struct TxhNack {
    /// NACK reason code.
    pub reason: u8,
    /// Plane of the NACKed packet.
    pub plane: u8,
    /// EV index of the NACKed packet.
    pub ev_index: U16,
    /// NACKed PSN.
    pub psn: U32,
    /// Cumulative PSN.
    pub cum_psn: U32,
    /// Reserved (0).
    pub rsvd: [u8; 20],
}
}

le_struct! {
/// FW->DP body of an EV probe or probe reply (entry bytes 32-63).
pub struct TxhProbe {
    /// Probe id.
    pub probe_id: U32,
    /// Probed EV index.
    pub ev_index: U16,
    /// Probed plane.
    pub plane: u8,
    /// Reserved (0).
    pub rsvd0: u8,
    /// Reserved (0).
    pub rsvd: [u8; 24],
}
}

const _: () = {
    assert!(size_of::<TxhHeader>() == TXH_BODY_OFFSET);
    assert!(size_of::<TxhWrite>() == TXH_BODY_BYTES);
    assert!(size_of::<TxhAck>() == TXH_BODY_BYTES);
    assert!(size_of::<TxhNack>() == TXH_BODY_BYTES);
    assert!(size_of::<TxhProbe>() == TXH_BODY_BYTES);
    assert!(TXH_BODY_OFFSET + TXH_BODY_BYTES == TXH_ENTRY_BYTES);
};

/// The body of an entry, by opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxhBody {
    /// A write opcode.
    Write(TxhWrite),
    /// ACK.
    Ack(TxhAck),
    /// NACK.
    Nack(TxhNack),
    /// EV_PROBE.
    Probe(TxhProbe),
    /// EV_PROBE_REPLY.
    ProbeReply(TxhProbe),
}

/// One checked TXH entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Txh {
    /// Entry bytes 0-31.
    pub hdr: TxhHeader,
    /// Entry bytes 32-63.
    pub body: TxhBody,
}

/// Why a TXH entry is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TxhError {
    /// Fewer than [`TXH_ENTRY_BYTES`] bytes.
    Truncated,
    /// Not an MRC opcode (the opcode byte).
    Opcode(u8),
    /// A field is out of range (the field's byte offset in the entry).
    BadValue(u8),
    /// Undefined flag bits, an immediate on an opcode without one, or reserved bytes not 0.
    ReservedSet,
}

fn psn_ok(v: U32, offset: u8) -> Result<(), TxhError> {
    if v.get() < QPN_LIMIT {
        Ok(())
    } else {
        Err(TxhError::BadValue(offset))
    }
}

impl Txh {
    /// Checks and decodes the entry at the start of `bytes`: every header field, then the body
    /// the opcode selects (24-bit PSNs, a known NACK reason, the immediate only on the
    /// opcodes that carry one, reserved bytes 0). Never panics.
    ///
    /// # Errors
    /// See [`TxhError`].
    pub fn decode(bytes: &[u8]) -> Result<Self, TxhError> {
        let b = bytes.get(..TXH_ENTRY_BYTES).ok_or(TxhError::Truncated)?;
        let (h, body) = b.split_at(TXH_BODY_OFFSET);
        let hdr = TxhHeader::read_from_bytes(h).map_err(|_| TxhError::Truncated)?;
        let op = Opcode::from_u8(hdr.opcode).map_err(|_| TxhError::Opcode(hdr.opcode))?;
        if hdr.flags & !flags::ALL != 0 {
            return Err(TxhError::ReservedSet);
        }
        if EvFormat::from_code(hdr.ev_format).is_err() {
            return Err(TxhError::BadValue(2));
        }
        psn_ok(hdr.src_qpn, 4)?;
        psn_ok(hdr.dest_qpn, 8)?;
        psn_ok(hdr.psn, 12)?;
        let off = TXH_BODY_OFFSET as u8;
        let body = match op {
            Opcode::WriteFirst
            | Opcode::WriteMiddle
            | Opcode::WriteLast
            | Opcode::WriteOnly
            | Opcode::WriteLastImm
            | Opcode::WriteOnlyImm => {
                let w = TxhWrite::read_from_bytes(body).map_err(|_| TxhError::Truncated)?;
                let has_imm = matches!(op, Opcode::WriteLastImm | Opcode::WriteOnlyImm);
                if !has_imm && w.imm.get() != 0 {
                    return Err(TxhError::ReservedSet);
                }
                TxhBody::Write(w)
            }
            Opcode::Ack => {
                let a = TxhAck::read_from_bytes(body).map_err(|_| TxhError::Truncated)?;
                psn_ok(a.cum_psn, off)?;
                psn_ok(a.sack_base, off + 4)?;
                if !super::all_zero(&a.rsvd) {
                    return Err(TxhError::ReservedSet);
                }
                TxhBody::Ack(a)
            }
            Opcode::Nack => {
                let n = TxhNack::read_from_bytes(body).map_err(|_| TxhError::Truncated)?;
                if NackReason::from_u8(n.reason).is_err() {
                    return Err(TxhError::BadValue(off));
                }
                psn_ok(n.psn, off + 4)?;
                psn_ok(n.cum_psn, off + 8)?;
                if !super::all_zero(&n.rsvd) {
                    return Err(TxhError::ReservedSet);
                }
                TxhBody::Nack(n)
            }
            Opcode::EvProbe | Opcode::EvProbeReply => {
                let p = TxhProbe::read_from_bytes(body).map_err(|_| TxhError::Truncated)?;
                if p.rsvd0 != 0 || !super::all_zero(&p.rsvd) {
                    return Err(TxhError::ReservedSet);
                }
                if op == Opcode::EvProbe {
                    TxhBody::Probe(p)
                } else {
                    TxhBody::ProbeReply(p)
                }
            }
        };
        Ok(Txh { hdr, body })
    }

    /// The entry's bytes (the header's opcode should match the body; [`Txh::decode`] of
    /// an entry whose opcode and body disagree reads the body as the opcode's).
    pub fn encode(&self) -> [u8; TXH_ENTRY_BYTES] {
        let mut out = [0u8; TXH_ENTRY_BYTES];
        let (h, b) = out.split_at_mut(TXH_BODY_OFFSET);
        h.copy_from_slice(self.hdr.as_bytes());
        b.copy_from_slice(match &self.body {
            TxhBody::Write(w) => w.as_bytes(),
            TxhBody::Ack(a) => a.as_bytes(),
            TxhBody::Nack(n) => n.as_bytes(),
            TxhBody::Probe(p) | TxhBody::ProbeReply(p) => p.as_bytes(),
        });
        out
    }

    /// The BTH opcode (valid after [`Txh::decode`]).
    pub fn opcode(&self) -> Result<Opcode, crate::wire::Error> {
        Opcode::from_u8(self.hdr.opcode)
    }

    /// True when `bit` (a [`flags`] constant) is set.
    pub const fn has(&self, bit: u8) -> bool {
        self.hdr.flags & bit != 0
    }
}

/// Ring arithmetic of the TXH ring (the same free-running indices as [`super::csr::CsrRing`],
/// with [`TXH_ENTRY_BYTES`]-byte entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxhRing(pub super::csr::CsrRing);

impl TxhRing {
    /// A ring of `2^log2_entries` entries, if `log2_entries <= CsrRing::MAX_LOG2`.
    pub const fn new(log2_entries: u8) -> Option<Self> {
        match super::csr::CsrRing::new(log2_entries) {
            Some(r) => Some(TxhRing(r)),
            None => None,
        }
    }
    /// Byte offset of a free-running index from the ring base.
    pub const fn byte_offset(self, index: u32) -> u32 {
        self.0.slot(index) * TXH_ENTRY_BYTES as u32
    }
    /// Free slots the producer may fill, for its `producer` and the consumer's `consumer` (0
    /// if the indices are inconsistent).
    pub const fn free(self, producer: u32, consumer: u32) -> u32 {
        self.0.entries() - self.0.len(producer, consumer)
    }
}

#[cfg(test)]
#[path = "txh_tests.rs"]
mod tests;
