//! CSR event queues between the datapath (RTL, or its reference model) and the firmware cores.
//!
//! The datapath does every packet's work; the firmware runs on the coalesced events it reports
//! and answers with commands. Two rings in NIC-local memory carry them, each a power-of-two
//! number of 32-byte entries described by a [`CsrQueueRegs`] block:
//!
//! - **DP->FW** (kinds `0x01..=0x7F`): ACK summaries (what an ACK's cumulative PSN and SACK bits
//!   changed), inferred losses, NACKs, the first packet of a send burst, send work requests sent
//!   once, Write-with-Immediate placed, probe replies, port events, receive drop counters, fatal
//!   receive errors, flushed work requests, per-EV delivery counts.
//! - **FW->DP** (kinds `0x81..=0xFF`): retransmission orders, EV table and plane weight writes,
//!   probe orders, congestion windows, QP context writes (INIT, RTR, RTS, RESET/ERROR), and what
//!   the host interface writes to host memory (completions, CQEs, events).
//!
//! Indices are free-running 32-bit counters; the ring is full when `producer - consumer ==
//! 2^log2_entries`; a producer that finds it full drops the entry and increments `overflow`
//! (never blocks, never overwrites). Producers that must not lose entries check for room first.
//!
//! Every entry starts with its kind byte; the rest is the kind's struct (module `entries`).
//! PSN and QPN fields are 24-bit values in 32-bit words whose top byte must be 0.
//! [`CsrEvent::decode`] checks every field and never panics; [`CsrEvent::encode`] writes the
//! 32 bytes ([`CsrEntry`]).

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::{all_zero, EvState, QPN_LIMIT};

mod entries;
pub use entries::*;

/// Size of one CSR entry.
pub const ENTRY_BYTES: usize = 32;

le_struct! {
/// Ring registers of one CSR queue, 32 bytes.
pub struct CsrQueueRegs {
    /// NIC-local address of entry 0.
    pub base: U32,
    /// log2 of the number of entries.
    pub log2_entries: U32,
    /// Free-running producer index (written by the producer).
    pub producer: U32,
    /// Free-running consumer index (written by the consumer).
    pub consumer: U32,
    /// Entries dropped because the ring was full (written by the producer).
    pub overflow: U32,
    /// Reserved (0).
    pub rsvd: [U32; 3],
}
}

/// Ring arithmetic shared by producers and consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsrRing {
    /// log2 of the number of entries (at most [`CsrRing::MAX_LOG2`]).
    pub log2_entries: u8,
}

impl CsrRing {
    /// Largest ring: 2^16 entries.
    pub const MAX_LOG2: u8 = 16;

    /// A ring of `2^log2_entries` entries, if `log2_entries <= MAX_LOG2`.
    pub const fn new(log2_entries: u8) -> Option<Self> {
        if log2_entries <= Self::MAX_LOG2 {
            Some(CsrRing { log2_entries })
        } else {
            None
        }
    }
    /// Number of entries.
    pub const fn entries(self) -> u32 {
        1 << self.log2_entries
    }
    /// Slot of a free-running index.
    pub const fn slot(self, index: u32) -> u32 {
        index & (self.entries() - 1)
    }
    /// Byte offset of a free-running index from the ring base.
    pub const fn byte_offset(self, index: u32) -> u32 {
        self.slot(index) * ENTRY_BYTES as u32
    }
    /// Occupied entries (saturating at `entries()` if the indices are inconsistent).
    pub const fn len(self, producer: u32, consumer: u32) -> u32 {
        let n = producer.wrapping_sub(consumer);
        if n > self.entries() {
            self.entries()
        } else {
            n
        }
    }
    /// True when no entry is pending.
    pub const fn is_empty(self, producer: u32, consumer: u32) -> bool {
        producer == consumer
    }
    /// True when the producer must drop (and count) its next entry.
    pub const fn is_full(self, producer: u32, consumer: u32) -> bool {
        self.len(producer, consumer) >= self.entries()
    }
}

/// One 32-byte CSR entry as it sits in a ring (its first byte is its [`CsrKind`] code).
#[derive(Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(8))]
pub struct CsrEntry(pub [u8; ENTRY_BYTES]);

impl CsrEntry {
    /// All zero (kind 0: no kind; decodes to [`CsrError::UnknownKind`]).
    pub const ZERO: CsrEntry = CsrEntry([0; ENTRY_BYTES]);

    /// The kind byte.
    #[inline]
    pub const fn kind_code(&self) -> u8 {
        self.0[0]
    }

    /// Checks and decodes this entry ([`CsrEvent::decode`]).
    ///
    /// # Errors
    /// See [`CsrError`].
    #[inline]
    pub fn decode(&self) -> Result<CsrEvent, CsrError> {
        CsrEvent::decode_entry(self)
    }
}

impl core::fmt::Debug for CsrEntry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.decode() {
            Ok(e) => e.fmt(f),
            Err(_) => write!(f, "CsrEntry({:02x?})", self.0),
        }
    }
}

impl Default for CsrEntry {
    fn default() -> Self {
        Self::ZERO
    }
}

/// Entry kinds. DP->FW kinds are 0x01-0x7F, FW->DP kinds 0x81-0xFF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum CsrKind {
    /// [`AckSummary`].
    AckSummary = 0x01,
    /// [`LossEntry`].
    Loss = 0x02,
    /// [`NackEntry`].
    Nack = 0x03,
    /// [`TxStart`].
    TxStart = 0x04,
    /// [`TxDone`].
    TxDone = 0x05,
    /// [`WimmPlaced`].
    WimmPlaced = 0x06,
    /// [`ProbeReply`].
    ProbeReply = 0x07,
    /// [`PortEventEntry`].
    PortEvent = 0x08,
    /// [`RxDrops`].
    RxDrops = 0x09,
    /// [`RxFatal`].
    RxFatal = 0x0A,
    /// [`Flushed`].
    Flushed = 0x0B,
    /// [`EvDeliveries`].
    EvDeliveries = 0x0C,
    /// [`SkipServed`].
    SkipServed = 0x0D,
    /// [`Retransmit`].
    Retransmit = 0x81,
    /// [`EvUpdate`].
    EvUpdate = 0x82,
    /// [`SendProbe`].
    SendProbe = 0x83,
    /// [`WindowUpdate`].
    WindowUpdate = 0x84,
    /// [`PostCqe`].
    PostCqe = 0x85,
    /// [`PostEvent`].
    PostEvent = 0x86,
    /// [`Complete`].
    Complete = 0x87,
    /// [`EvEventEntry`].
    EvEvent = 0x88,
    /// [`PlaneWeight`].
    PlaneWeight = 0x89,
    /// [`RetransmitUnacked`].
    RetransmitUnacked = 0x8A,
    /// [`TailProbe`].
    TailProbe = 0x8B,
    /// [`PlaneDown`].
    PlaneDown = 0x8C,
    /// [`QpInitCtx`].
    QpInit = 0x8D,
    /// [`QpRtrCtx`].
    QpRtr = 0x8E,
    /// [`QpRtsCtx`].
    QpRts = 0x8F,
    /// [`QpStateEntry`].
    QpState = 0x90,
    /// [`RegionWrite`].
    RegionWrite = 0x91,
}

impl CsrKind {
    /// Every kind.
    pub const ALL: [CsrKind; 30] = [
        Self::AckSummary,
        Self::Loss,
        Self::Nack,
        Self::TxStart,
        Self::TxDone,
        Self::WimmPlaced,
        Self::ProbeReply,
        Self::PortEvent,
        Self::RxDrops,
        Self::RxFatal,
        Self::Flushed,
        Self::EvDeliveries,
        Self::SkipServed,
        Self::Retransmit,
        Self::EvUpdate,
        Self::SendProbe,
        Self::WindowUpdate,
        Self::PostCqe,
        Self::PostEvent,
        Self::Complete,
        Self::EvEvent,
        Self::PlaneWeight,
        Self::RetransmitUnacked,
        Self::TailProbe,
        Self::PlaneDown,
        Self::QpInit,
        Self::QpRtr,
        Self::QpRts,
        Self::QpState,
        Self::RegionWrite,
    ];
    /// The kind with code `v`, if any.
    #[inline]
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::BY_CODE[usize::from(v)]
    }

    /// [`Self::ALL`] by code: one load per lookup (the firmware decodes every entry).
    const BY_CODE: [Option<CsrKind>; 256] = {
        let mut t = [None; 256];
        let mut i = 0;
        while i < Self::ALL.len() {
            t[Self::ALL[i] as usize] = Some(Self::ALL[i]);
            i += 1;
        }
        t
    };
    /// A DP->FW kind (else FW->DP).
    pub const fn is_event(self) -> bool {
        (self as u8) < 0x80
    }
}

const _: () = {
    assert!(size_of::<CsrQueueRegs>() == 32);
    assert!(size_of::<CsrEntry>() == 32);
    assert!(offset_of!(AckSummary, qpn) == 4);
    assert!(offset_of!(AckSummary, una) == 8);
    assert!(offset_of!(TxDone, wr_id) == 16);
    assert!(offset_of!(Complete, wr_id) == 16);
    assert!(offset_of!(PostCqe, cqn) == 4);
    assert!(offset_of!(PostCqe, syndrome) == 24);
    assert!(offset_of!(PostEvent, arg) == 8);
};

/// Why a CSR entry is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CsrError {
    /// Unknown kind byte.
    UnknownKind(u8),
    /// A field is out of range (the field's byte offset in the entry).
    BadValue(u8),
    /// A reserved field is not 0.
    ReservedSet,
    /// Fewer than 32 bytes.
    Truncated,
}

/// A validated CSR entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum CsrEvent {
    AckSummary(AckSummary),
    Loss(LossEntry),
    Nack(NackEntry),
    TxStart(TxStart),
    TxDone(TxDone),
    WimmPlaced(WimmPlaced),
    ProbeReply(ProbeReply),
    PortEvent(PortEventEntry),
    RxDrops(RxDrops),
    RxFatal(RxFatal),
    Flushed(Flushed),
    EvDeliveries(EvDeliveries),
    SkipServed(SkipServed),
    Retransmit(Retransmit),
    EvUpdate(EvUpdate),
    SendProbe(SendProbe),
    WindowUpdate(WindowUpdate),
    PostCqe(PostCqe),
    PostEvent(PostEvent),
    Complete(Complete),
    EvEvent(EvEventEntry),
    PlaneWeight(PlaneWeight),
    RetransmitUnacked(RetransmitUnacked),
    TailProbe(TailProbe),
    PlaneDown(PlaneDown),
    QpInit(QpInitCtx),
    QpRtr(QpRtrCtx),
    QpRts(QpRtsCtx),
    QpState(QpStateEntry),
    RegionWrite(RegionWrite),
}

/// `$m!(Variant)` for every variant (one list for encode and kind).
macro_rules! each_variant {
    ($self:expr, $e:ident => $body:expr) => {
        match $self {
            CsrEvent::AckSummary($e) => $body,
            CsrEvent::Loss($e) => $body,
            CsrEvent::Nack($e) => $body,
            CsrEvent::TxStart($e) => $body,
            CsrEvent::TxDone($e) => $body,
            CsrEvent::WimmPlaced($e) => $body,
            CsrEvent::ProbeReply($e) => $body,
            CsrEvent::PortEvent($e) => $body,
            CsrEvent::RxDrops($e) => $body,
            CsrEvent::RxFatal($e) => $body,
            CsrEvent::Flushed($e) => $body,
            CsrEvent::EvDeliveries($e) => $body,
            CsrEvent::SkipServed($e) => $body,
            CsrEvent::Retransmit($e) => $body,
            CsrEvent::EvUpdate($e) => $body,
            CsrEvent::SendProbe($e) => $body,
            CsrEvent::WindowUpdate($e) => $body,
            CsrEvent::PostCqe($e) => $body,
            CsrEvent::PostEvent($e) => $body,
            CsrEvent::Complete($e) => $body,
            CsrEvent::EvEvent($e) => $body,
            CsrEvent::PlaneWeight($e) => $body,
            CsrEvent::RetransmitUnacked($e) => $body,
            CsrEvent::TailProbe($e) => $body,
            CsrEvent::PlaneDown($e) => $body,
            CsrEvent::QpInit($e) => $body,
            CsrEvent::QpRtr($e) => $body,
            CsrEvent::QpRts($e) => $body,
            CsrEvent::QpState($e) => $body,
            CsrEvent::RegionWrite($e) => $body,
        }
    };
}

fn check24(v: U32, off: u8) -> Result<(), CsrError> {
    if v.get() < QPN_LIMIT {
        Ok(())
    } else {
        Err(CsrError::BadValue(off))
    }
}

#[inline]
fn zero(b: &[u8]) -> Result<(), CsrError> {
    if all_zero(b) {
        Ok(())
    } else {
        Err(CsrError::ReservedSet)
    }
}

fn ev_state(v: u8, off: u8) -> Result<EvState, CsrError> {
    EvState::from_u8(v).ok_or(CsrError::BadValue(off))
}

fn nack_reason(v: u8, off: u8) -> Result<crate::wire::NackReason, CsrError> {
    crate::wire::NackReason::from_u8(v).map_err(|_| CsrError::BadValue(off))
}

impl CsrEvent {
    /// The 32 bytes of this entry: the struct's bytes with the kind byte set from the variant
    /// ([`CsrEvent::decode`] checks the other fields).
    #[inline]
    pub fn encode(&self) -> CsrEntry {
        let mut out = CsrEntry::ZERO;
        each_variant!(self, e => out.0.copy_from_slice(e.as_bytes()));
        // The variant decides the kind, whatever the struct's `kind` field holds.
        out.0[0] = self.kind() as u8;
        out
    }

    /// The kind of this entry.
    pub const fn kind(&self) -> CsrKind {
        match self {
            CsrEvent::AckSummary(_) => CsrKind::AckSummary,
            CsrEvent::Loss(_) => CsrKind::Loss,
            CsrEvent::Nack(_) => CsrKind::Nack,
            CsrEvent::TxStart(_) => CsrKind::TxStart,
            CsrEvent::TxDone(_) => CsrKind::TxDone,
            CsrEvent::WimmPlaced(_) => CsrKind::WimmPlaced,
            CsrEvent::ProbeReply(_) => CsrKind::ProbeReply,
            CsrEvent::PortEvent(_) => CsrKind::PortEvent,
            CsrEvent::RxDrops(_) => CsrKind::RxDrops,
            CsrEvent::RxFatal(_) => CsrKind::RxFatal,
            CsrEvent::Flushed(_) => CsrKind::Flushed,
            CsrEvent::EvDeliveries(_) => CsrKind::EvDeliveries,
            CsrEvent::SkipServed(_) => CsrKind::SkipServed,
            CsrEvent::Retransmit(_) => CsrKind::Retransmit,
            CsrEvent::EvUpdate(_) => CsrKind::EvUpdate,
            CsrEvent::SendProbe(_) => CsrKind::SendProbe,
            CsrEvent::WindowUpdate(_) => CsrKind::WindowUpdate,
            CsrEvent::PostCqe(_) => CsrKind::PostCqe,
            CsrEvent::PostEvent(_) => CsrKind::PostEvent,
            CsrEvent::Complete(_) => CsrKind::Complete,
            CsrEvent::EvEvent(_) => CsrKind::EvEvent,
            CsrEvent::PlaneWeight(_) => CsrKind::PlaneWeight,
            CsrEvent::RetransmitUnacked(_) => CsrKind::RetransmitUnacked,
            CsrEvent::TailProbe(_) => CsrKind::TailProbe,
            CsrEvent::PlaneDown(_) => CsrKind::PlaneDown,
            CsrEvent::QpInit(_) => CsrKind::QpInit,
            CsrEvent::QpRtr(_) => CsrKind::QpRtr,
            CsrEvent::QpRts(_) => CsrKind::QpRts,
            CsrEvent::QpState(_) => CsrKind::QpState,
            CsrEvent::RegionWrite(_) => CsrKind::RegionWrite,
        }
    }

    /// The QP an entry is about, for the kinds that name one.
    pub fn qpn(&self) -> Option<u32> {
        let q = match self {
            CsrEvent::AckSummary(e) => e.qpn,
            CsrEvent::Loss(e) => e.qpn,
            CsrEvent::Nack(e) => e.qpn,
            CsrEvent::TxStart(e) => e.qpn,
            CsrEvent::TxDone(e) => e.qpn,
            CsrEvent::WimmPlaced(e) => e.qpn,
            CsrEvent::ProbeReply(e) => e.qpn,
            CsrEvent::RxFatal(e) => e.qpn,
            CsrEvent::Flushed(e) => e.qpn,
            CsrEvent::EvDeliveries(e) => e.qpn,
            CsrEvent::SkipServed(e) => e.qpn,
            CsrEvent::Retransmit(e) => e.qpn,
            CsrEvent::EvUpdate(e) => e.qpn,
            CsrEvent::SendProbe(e) => e.qpn,
            CsrEvent::WindowUpdate(e) => e.qpn,
            CsrEvent::PostCqe(e) => e.qpn,
            CsrEvent::Complete(e) => e.qpn,
            CsrEvent::EvEvent(e) => e.qpn,
            CsrEvent::PlaneWeight(e) => e.qpn,
            CsrEvent::RetransmitUnacked(e) => e.qpn,
            CsrEvent::TailProbe(e) => e.qpn,
            CsrEvent::QpInit(e) => e.qpn,
            CsrEvent::QpRtr(e) => e.qpn,
            CsrEvent::QpRts(e) => e.qpn,
            CsrEvent::QpState(e) => e.qpn,
            CsrEvent::PortEvent(_)
            | CsrEvent::RxDrops(_)
            | CsrEvent::PostEvent(_)
            | CsrEvent::PlaneDown(_)
            | CsrEvent::RegionWrite(_) => return None,
        };
        Some(q.get())
    }

    /// Checks and decodes the entry at the start of `bytes`.
    ///
    /// # Errors
    /// See [`CsrError`].
    pub fn decode(bytes: &[u8]) -> Result<Self, CsrError> {
        let b: &[u8; ENTRY_BYTES] = bytes
            .get(..ENTRY_BYTES)
            .and_then(|s| s.try_into().ok())
            .ok_or(CsrError::Truncated)?;
        Self::decode_entry(&CsrEntry(*b))
    }

    /// [`Self::decode`] of an entry in its ring slot (aligned: its fields are read a word at a
    /// time).
    fn decode_entry(e: &CsrEntry) -> Result<Self, CsrError> {
        let b = &e.0;
        let kind = CsrKind::from_u8(b[0]).ok_or(CsrError::UnknownKind(b[0]))?;
        // The reads cannot fail: every entry struct is exactly 32 bytes of plain integers.
        macro_rules! rd {
            ($t:ty) => {
                <$t>::read_from_bytes(b).map_err(|_| CsrError::Truncated)?
            };
        }
        Ok(match kind {
            CsrKind::AckSummary => {
                let e = rd!(AckSummary);
                zero(&[e.flags & !ACK_FLAGS])?;
                check24(e.qpn, 4)?;
                check24(e.una, 8)?;
                zero(&e.rsvd)?;
                CsrEvent::AckSummary(e)
            }
            CsrKind::Loss => {
                let e = rd!(LossEntry);
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                if e.cause != LOSS_REORDER {
                    return Err(CsrError::BadValue(16));
                }
                zero(&e.rsvd)?;
                CsrEvent::Loss(e)
            }
            CsrKind::Nack => {
                let e = rd!(NackEntry);
                nack_reason(e.reason, 1)?;
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                zero(&[e.flags & !NACK_IN_FLIGHT])?;
                zero(&e.rsvd)?;
                CsrEvent::Nack(e)
            }
            CsrKind::TxStart => {
                let e = rd!(TxStart);
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                zero(&e.rsvd)?;
                zero(&e.rsvd2)?;
                CsrEvent::TxStart(e)
            }
            CsrKind::TxDone => {
                let e = rd!(TxDone);
                zero(&[e.flags & !(TXD_SIGNALED | TXD_IMM)])?;
                check24(e.qpn, 4)?;
                check24(e.end_psn, 8)?;
                zero(e.rsvd.as_bytes())?;
                zero(e.rsvd2.as_bytes())?;
                zero(&e.rsvd3)?;
                CsrEvent::TxDone(e)
            }
            CsrKind::WimmPlaced => {
                let e = rd!(WimmPlaced);
                check24(e.qpn, 4)?;
                check24(e.last_psn, 8)?;
                zero(&[e.flags & !1])?;
                zero(&e.rsvd)?;
                CsrEvent::WimmPlaced(e)
            }
            CsrKind::ProbeReply => {
                let e = rd!(ProbeReply);
                check24(e.qpn, 4)?;
                zero(&e.rsvd)?;
                CsrEvent::ProbeReply(e)
            }
            CsrKind::PortEvent => {
                let e = rd!(PortEventEntry);
                if e.up > 1 {
                    return Err(CsrError::BadValue(2));
                }
                zero(&e.rsvd)?;
                CsrEvent::PortEvent(e)
            }
            CsrKind::RxDrops => {
                let e = rd!(RxDrops);
                zero(&e.rsvd)?;
                CsrEvent::RxDrops(e)
            }
            CsrKind::RxFatal => {
                let e = rd!(RxFatal);
                let r = nack_reason(e.reason, 1)?;
                if !r.is_fatal() {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                zero(e.rsvd.as_bytes())?;
                zero(&e.rsvd2)?;
                CsrEvent::RxFatal(e)
            }
            CsrKind::Flushed => {
                let e = rd!(Flushed);
                zero(&[e.flags & !(FLUSH_SIGNALED | FLUSH_RECV)])?;
                check24(e.qpn, 4)?;
                zero(e.rsvd.as_bytes())?;
                zero(&e.rsvd2)?;
                zero(&e.rsvd3)?;
                CsrEvent::Flushed(e)
            }
            CsrKind::EvDeliveries => {
                let e = rd!(EvDeliveries);
                check24(e.qpn, 4)?;
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
                CsrEvent::EvDeliveries(e)
            }
            CsrKind::SkipServed => {
                let e = rd!(SkipServed);
                check24(e.qpn, 4)?;
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
                CsrEvent::SkipServed(e)
            }
            CsrKind::Retransmit => {
                let e = rd!(Retransmit);
                zero(&[e.flags & !RETX_AVOID_LAST])?;
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                zero(&e.rsvd)?;
                CsrEvent::Retransmit(e)
            }
            CsrKind::EvUpdate => {
                let e = rd!(EvUpdate);
                ev_state(e.state, 1)?;
                check24(e.qpn, 4)?;
                zero(&e.rsvd)?;
                CsrEvent::EvUpdate(e)
            }
            CsrKind::PlaneWeight => {
                let e = rd!(PlaneWeight);
                if !(1..=15).contains(&e.weight) {
                    return Err(CsrError::BadValue(2));
                }
                check24(e.qpn, 4)?;
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
                CsrEvent::PlaneWeight(e)
            }
            CsrKind::SendProbe => {
                let e = rd!(SendProbe);
                check24(e.qpn, 4)?;
                zero(&e.rsvd)?;
                CsrEvent::SendProbe(e)
            }
            CsrKind::WindowUpdate => {
                let e = rd!(WindowUpdate);
                check24(e.qpn, 4)?;
                zero(&e.rsvd)?;
                zero(&e.rsvd2)?;
                CsrEvent::WindowUpdate(e)
            }
            CsrKind::PostCqe => {
                let e = rd!(PostCqe);
                super::cqe::CqeStatus::from_u8(e.status).ok_or(CsrError::BadValue(1))?;
                let op = super::cqe::CqeOpcode::from_u8(e.opcode).ok_or(CsrError::BadValue(2))?;
                check24(e.qpn, 8)?;
                if op != super::cqe::CqeOpcode::RecvWriteImm && e.imm.get() != 0 {
                    return Err(CsrError::ReservedSet);
                }
                zero(&[e.flags & !super::cqe::CQE_SOLICITED])?;
                zero(e.rsvd.as_bytes())?;
                zero(&e.rsvd2)?;
                CsrEvent::PostCqe(e)
            }
            CsrKind::PostEvent => {
                let e = rd!(PostEvent);
                zero(&e.rsvd)?;
                zero(&e.rsvd2)?;
                super::event::Event::from_words(
                    e.event_kind,
                    e.object.get(),
                    e.arg.map(|w| w.get()),
                )
                .map_err(|_| CsrError::BadValue(1))?;
                CsrEvent::PostEvent(e)
            }
            CsrKind::Complete => {
                let e = rd!(Complete);
                if e.status > status::FLUSHED {
                    return Err(CsrError::BadValue(1));
                }
                if e.opcode > opcode::RECV {
                    return Err(CsrError::BadValue(2));
                }
                let with_reason = matches!(e.status, status::REMOTE_NACK | status::LOCAL_QP_ERROR);
                if with_reason {
                    nack_reason(e.reason, 3)?;
                } else if e.reason != 0 {
                    return Err(CsrError::ReservedSet);
                }
                check24(e.qpn, 4)?;
                if e.opcode != opcode::RECV_IMM && (e.imm.get() != 0 || e.msn.get() != 0) {
                    return Err(CsrError::ReservedSet);
                }
                zero(e.rsvd.as_bytes())?;
                zero(&e.rsvd2)?;
                CsrEvent::Complete(e)
            }
            CsrKind::EvEvent => {
                let e = rd!(EvEventEntry);
                ev_state(e.old, 1)?;
                ev_state(e.new, 8)?;
                check24(e.qpn, 4)?;
                zero(&e.rsvd)?;
                CsrEvent::EvEvent(e)
            }
            CsrKind::RetransmitUnacked => {
                let e = rd!(RetransmitUnacked);
                check24(e.qpn, 4)?;
                zero(&e.rsvd)?;
                zero(&e.rsvd2)?;
                CsrEvent::RetransmitUnacked(e)
            }
            CsrKind::TailProbe => {
                let e = rd!(TailProbe);
                check24(e.qpn, 4)?;
                zero(&e.rsvd)?;
                zero(&e.rsvd2)?;
                CsrEvent::TailProbe(e)
            }
            CsrKind::PlaneDown => {
                let e = rd!(PlaneDown);
                zero(&e.rsvd)?;
                CsrEvent::PlaneDown(e)
            }
            CsrKind::QpInit => {
                let e = rd!(QpInitCtx);
                if e.planes == 0 {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                crate::wire::EvFormat::from_code(e.ev_format)
                    .map_err(|_| CsrError::BadValue(12))?;
                zero(&e.rsvd)?;
                CsrEvent::QpInit(e)
            }
            CsrKind::QpRtr => {
                let e = rd!(QpRtrCtx);
                check24(e.qpn, 4)?;
                check24(e.rq_psn, 8)?;
                check24(e.dest_qpn, 16)?;
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
                CsrEvent::QpRtr(e)
            }
            CsrKind::QpRts => {
                let e = rd!(QpRtsCtx);
                if !(1..=63).contains(&e.reorder_tx) {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                check24(e.sq_psn, 8)?;
                zero(&e.rsvd)?;
                CsrEvent::QpRts(e)
            }
            CsrKind::QpState => {
                let e = rd!(QpStateEntry);
                if e.state > QP_ERROR {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                zero(e.rsvd.as_bytes())?;
                zero(&e.rsvd2)?;
                CsrEvent::QpState(e)
            }
            CsrKind::RegionWrite => {
                let e = rd!(RegionWrite);
                match e.op {
                    REGION_ADD => {
                        zero(&[e.access & !(REGION_REMOTE_WRITE | REGION_REMOTE_READ)])?;
                        if e.base_va.get().checked_add(e.length.get()).is_none() {
                            return Err(CsrError::BadValue(16));
                        }
                    }
                    REGION_REMOVE => {
                        zero(&[e.access])?;
                        zero(e.base_va.as_bytes())?;
                        zero(e.length.as_bytes())?;
                    }
                    _ => return Err(CsrError::BadValue(1)),
                }
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
                CsrEvent::RegionWrite(e)
            }
        })
    }
}

#[cfg(test)]
mod tests;
