//! The per-packet receive header queue (RXH) between the datapath and the firmware cores.
//!
//! The CSR rings of [`super::csr`] carry the coalesced slow path. The RXH ring carries what
//! the firmware must see packet by packet: for every received MRC **data packet** (the write
//! opcodes) and **EV probe**, the datapath's header parser writes one 64-byte [`RxhEntry`]
//! (the parsed BTH, MRH, EVX, TSX, RETH and ImmDt fields, the trim marks, CE and the payload
//! length it measured) and keeps the payload in its staging buffer. ACKs, NACKs and probe
//! replies keep going through the DP->FW CSR ring as before.
//!
//! Ring: one [`super::csr::CsrQueueRegs`] block (base, log2 entries, free-running producer and
//! consumer, overflow), with [`RXH_ENTRY_BYTES`]-byte entries ([`RxhRing`] does the
//! arithmetic). The datapath produces; a datapath that finds the ring full drops the packet
//! and counts it in `overflow` (and in its `RxDrops.no_buffer`).
//!
//! **Verdict write-back.** The firmware answers each entry in place: it writes the last
//! [`RXH_VERDICT_BYTES`] bytes ([`RxhVerdict`]: place the payload at `place_offset` of
//! registered region `slot`, consumed, or dropped with a reason), then advances `consumer`
//! past it. The datapath reads the verdict of every entry between its previous view of
//! `consumer` and the new one, places or frees the staged payload, and only then reuses the
//! slot. A verdict can therefore never be lost to a full queue, and verdicts come back in
//! arrival order. The datapath writes the verdict bytes as 0 ([`RxhVerdictCode::Pending`]).
//!
//! Fields follow [`super::csr`]: 24-bit QPNs and PSNs in 32-bit words whose top byte is 0,
//! little-endian. [`RxhEntry::decode`] checks every field the datapath wrote.

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use super::QPN_LIMIT;
use crate::wire::{EvFormat, Opcode};

/// Size of one RXH entry.
pub const RXH_ENTRY_BYTES: usize = 64;
/// Byte offset of the firmware's verdict in an entry.
pub const RXH_VERDICT_OFFSET: usize = 48;
/// Size of the verdict.
pub const RXH_VERDICT_BYTES: usize = 16;

/// Bits of [`RxhEntry::flags`].
pub mod flags {
    /// BTH A: the sender asks for an ACK.
    pub const ACK_REQ: u8 = 1 << 0;
    /// MRH RETRANSMIT.
    pub const RETRANSMIT: u8 = 1 << 1;
    /// MRH TRIMMED: the fabric cut the payload.
    pub const TRIMMED: u8 = 1 << 2;
    /// MRH TRIMMED_LAST_HOP (only with [`TRIMMED`]).
    pub const TRIMMED_LAST_HOP: u8 = 1 << 3;
    /// The IPv6 ECN field was CE.
    pub const CE: u8 = 1 << 4;
    /// BTH SE (solicited event).
    pub const SE: u8 = 1 << 5;
    /// Every defined bit.
    pub const ALL: u8 = ACK_REQ | RETRANSMIT | TRIMMED | TRIMMED_LAST_HOP | CE | SE;
}

le_struct! {
/// DP->FW: the parsed headers of one received data packet or EV probe (64 bytes). Bytes 0-47
/// are written by the datapath; bytes 48-63 are the firmware's verdict ([`RxhVerdict`]),
/// written as 0 by the datapath.
pub struct RxhEntry {
    /// BTH opcode: a write opcode or EV_PROBE.
    pub opcode: u8,
    /// [`flags`] bits.
    pub flags: u8,
    /// MRH EV format code.
    pub ev_format: u8,
    /// EVX plane (the NIC port it arrived on).
    pub plane: u8,
    /// BTH destination QPN (this NIC's QP).
    pub dest_qpn: U32,
    /// BTH PSN (probes: 0).
    pub psn: U32,
    /// MRH message sequence number.
    pub msn: U16,
    /// EVX EV index.
    pub ev_index: U16,
    /// TSX tx timestamp (ns, low 32 bits).
    pub tx_ts: U32,
    /// TSX echoed timestamp.
    pub echo_ts: U32,
    /// RETH virtual address (probes: 0).
    pub remote_va: U64,
    /// RETH R_Key; for EV_PROBE the probe id.
    pub rkey: U32,
    /// RETH DMA length (probes: 0).
    pub dma_len: U32,
    /// ImmDt (WRITE_LAST_IMM / WRITE_ONLY_IMM; 0 otherwise).
    pub imm: U32,
    /// Payload bytes the datapath received after the MRC headers (0 when trimmed).
    pub payload_len: U32,
    /// Firmware: [`RxhVerdictCode`] (0 = pending, as the datapath writes it).
    pub verdict: u8,
    /// Firmware: [`RxhDropReason`] when dropped, else 0.
    pub drop_reason: u8,
    /// Firmware: registered-region slot to place into.
    pub slot: U16,
    /// Firmware: bytes to place.
    pub place_len: U32,
    /// Firmware: byte offset in the region.
    pub place_offset: U64,
}
}

le_struct! {
/// FW->DP: the firmware's verdict on one RXH entry, written over its last 16 bytes
/// ([`RXH_VERDICT_OFFSET`]) before the consumer index moves past it.
pub struct RxhVerdict {
    /// [`RxhVerdictCode`].
    pub verdict: u8,
    /// [`RxhDropReason`] when dropped, else 0.
    pub drop_reason: u8,
    /// Registered-region slot to place into (place only).
    pub slot: U16,
    /// Bytes to place (place only).
    pub place_len: U32,
    /// Byte offset in the region (place only).
    pub place_offset: U64,
}
}

const _: () = {
    assert!(size_of::<RxhEntry>() == RXH_ENTRY_BYTES);
    assert!(size_of::<RxhVerdict>() == RXH_VERDICT_BYTES);
    assert!(offset_of!(RxhEntry, verdict) == RXH_VERDICT_OFFSET);
    assert!(
        offset_of!(RxhEntry, place_offset) - RXH_VERDICT_OFFSET
            == offset_of!(RxhVerdict, place_offset)
    );
    assert!(
        offset_of!(RxhEntry, place_len) - RXH_VERDICT_OFFSET == offset_of!(RxhVerdict, place_len)
    );
    assert!(offset_of!(RxhEntry, remote_va) == 24);
};

/// What the firmware decided about an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum RxhVerdictCode {
    /// Not answered yet (what the datapath writes).
    Pending = 0,
    /// Write `place_len` payload bytes at `place_offset` of region `slot`.
    Place = 1,
    /// Taken, nothing to place (a probe, a zero-length write): free the payload.
    Consumed = 2,
    /// Dropped (`drop_reason`): free the payload.
    Dropped = 3,
}

impl RxhVerdictCode {
    /// Every code.
    pub const ALL: [RxhVerdictCode; 4] =
        [Self::Pending, Self::Place, Self::Consumed, Self::Dropped];
    /// The code `v`, if any.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Pending),
            1 => Some(Self::Place),
            2 => Some(Self::Consumed),
            3 => Some(Self::Dropped),
            _ => None,
        }
    }
}

/// Why the firmware dropped an entry's packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum RxhDropReason {
    /// The entry failed [`RxhEntry::decode`].
    Malformed = 1,
    /// Destination QP unknown.
    UnknownQp = 2,
    /// The QP is not in a state that takes this packet.
    QpNotReady = 3,
    /// Already received (re-acknowledged).
    Duplicate = 4,
    /// Trimmed (NACKed for retransmission).
    Trimmed = 5,
    /// Outside the receive window (NACKed).
    OutOfWindow = 6,
    /// RETH failed the region check (NACKed, QP to ERROR).
    RemoteAccess = 7,
    /// RETH length differs from the payload (NACKed, QP to ERROR).
    Length = 8,
    /// Write-with-Immediate without a receive buffer (NACKed, QP to ERROR).
    NoRecvBuffer = 9,
    /// Too many Write-with-Immediate in flight (NACKed).
    TooManyWimm = 10,
    /// Matched nothing outstanding.
    Stale = 11,
    /// Not a packet the QP takes.
    Unexpected = 12,
}

impl RxhDropReason {
    /// Every reason.
    pub const ALL: [RxhDropReason; 12] = [
        Self::Malformed,
        Self::UnknownQp,
        Self::QpNotReady,
        Self::Duplicate,
        Self::Trimmed,
        Self::OutOfWindow,
        Self::RemoteAccess,
        Self::Length,
        Self::NoRecvBuffer,
        Self::TooManyWimm,
        Self::Stale,
        Self::Unexpected,
    ];
    /// The reason with code `v`, if any.
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|r| *r as u8 == v)
    }
}

/// Why an RXH entry is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RxhError {
    /// Fewer than [`RXH_ENTRY_BYTES`] bytes.
    Truncated,
    /// Not a write opcode nor EV_PROBE (the opcode byte).
    Opcode(u8),
    /// A field is out of range (the field's byte offset in the entry).
    BadValue(u8),
    /// Undefined flag bits, TRIMMED_LAST_HOP without TRIMMED, an immediate on an opcode
    /// without one, or RETH fields on a probe.
    ReservedSet,
    /// The verdict bytes are not 0 (the datapath must hand entries over pending).
    NotPending,
}

impl RxhEntry {
    /// Checks and decodes the entry at the start of `bytes`: every field the datapath writes,
    /// and that the verdict is still pending. Never panics.
    ///
    /// # Errors
    /// See [`RxhError`].
    pub fn decode(bytes: &[u8]) -> Result<Self, RxhError> {
        let b = bytes.get(..RXH_ENTRY_BYTES).ok_or(RxhError::Truncated)?;
        let e = RxhEntry::read_from_bytes(b).map_err(|_| RxhError::Truncated)?;
        let op = Opcode::from_u8(e.opcode).map_err(|_| RxhError::Opcode(e.opcode))?;
        let (write, has_imm) = match op {
            Opcode::WriteFirst | Opcode::WriteMiddle | Opcode::WriteLast | Opcode::WriteOnly => {
                (true, false)
            }
            Opcode::WriteLastImm | Opcode::WriteOnlyImm => (true, true),
            Opcode::EvProbe => (false, false),
            _ => return Err(RxhError::Opcode(e.opcode)),
        };
        if e.flags & !flags::ALL != 0
            || (e.flags & flags::TRIMMED_LAST_HOP != 0 && e.flags & flags::TRIMMED == 0)
            || (!has_imm && e.imm.get() != 0)
            || (!write && (e.remote_va.get() != 0 || e.dma_len.get() != 0))
        {
            return Err(RxhError::ReservedSet);
        }
        if EvFormat::from_code(e.ev_format).is_err() {
            return Err(RxhError::BadValue(2));
        }
        if e.dest_qpn.get() >= QPN_LIMIT {
            return Err(RxhError::BadValue(4));
        }
        if e.psn.get() >= QPN_LIMIT {
            return Err(RxhError::BadValue(8));
        }
        if !super::all_zero(&b[RXH_VERDICT_OFFSET..]) {
            return Err(RxhError::NotPending);
        }
        Ok(e)
    }

    /// The entry's bytes.
    pub fn encode(&self) -> [u8; RXH_ENTRY_BYTES] {
        let mut out = [0u8; RXH_ENTRY_BYTES];
        out.copy_from_slice(self.as_bytes());
        out
    }

    /// The BTH opcode (valid after [`RxhEntry::decode`]).
    pub fn opcode(&self) -> Result<Opcode, crate::wire::Error> {
        Opcode::from_u8(self.opcode)
    }

    /// True when `bit` (a [`flags`] constant) is set.
    pub const fn has(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }
}

impl RxhVerdict {
    /// Place `place_len` bytes at `place_offset` of region `slot`.
    pub fn place(slot: u16, place_offset: u64, place_len: u32) -> Self {
        RxhVerdict {
            verdict: RxhVerdictCode::Place as u8,
            drop_reason: 0,
            slot: slot.into(),
            place_len: place_len.into(),
            place_offset: place_offset.into(),
        }
    }

    /// Taken, nothing to place.
    pub fn consumed() -> Self {
        Self::code(RxhVerdictCode::Consumed, 0)
    }

    /// Dropped for `reason`.
    pub fn dropped(reason: RxhDropReason) -> Self {
        Self::code(RxhVerdictCode::Dropped, reason as u8)
    }

    fn code(c: RxhVerdictCode, reason: u8) -> Self {
        RxhVerdict {
            verdict: c as u8,
            drop_reason: reason,
            slot: 0.into(),
            place_len: 0.into(),
            place_offset: 0.into(),
        }
    }

    /// The verdict's bytes (entry bytes 48-63).
    pub fn encode(&self) -> [u8; RXH_VERDICT_BYTES] {
        let mut out = [0u8; RXH_VERDICT_BYTES];
        out.copy_from_slice(self.as_bytes());
        out
    }

    /// The datapath's reading of a verdict: the code (`None`: unknown code, which the datapath
    /// treats as a drop and counts).
    pub fn decode(bytes: &[u8; RXH_VERDICT_BYTES]) -> (Option<RxhVerdictCode>, Self) {
        // 16 plain bytes always read.
        let v = RxhVerdict::read_from_bytes(bytes).unwrap_or_else(|_| Self::consumed());
        (RxhVerdictCode::from_u8(v.verdict), v)
    }
}

/// Ring arithmetic of the RXH ring (the same free-running indices as [`super::csr::CsrRing`],
/// with [`RXH_ENTRY_BYTES`]-byte entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxhRing(pub super::csr::CsrRing);

impl RxhRing {
    /// A ring of `2^log2_entries` entries, if `log2_entries <= CsrRing::MAX_LOG2`.
    pub const fn new(log2_entries: u8) -> Option<Self> {
        match super::csr::CsrRing::new(log2_entries) {
            Some(r) => Some(RxhRing(r)),
            None => None,
        }
    }
    /// Byte offset of a free-running index from the ring base.
    pub const fn byte_offset(self, index: u32) -> u32 {
        self.0.slot(index) * RXH_ENTRY_BYTES as u32
    }
}

#[cfg(test)]
#[path = "rxh_tests.rs"]
mod tests;
