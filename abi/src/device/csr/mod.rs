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
mod qpn_word;
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
    // (0x05 was `TxDone`, a send work request sent once; completions now follow
    // `AckSummary::retired`)
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
    /// [`ProbeResult`].
    ProbeResult = 0x92,
    /// [`CompleteSends`].
    CompleteSends = 0x93,
}

impl CsrKind {
    /// Every kind.
    pub const ALL: [CsrKind; 31] = [
        Self::AckSummary,
        Self::Loss,
        Self::Nack,
        Self::TxStart,
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
        Self::ProbeResult,
        Self::CompleteSends,
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
    assert!(offset_of!(CompleteSends, qpn) == 4);
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
    ProbeResult(ProbeResult),
    CompleteSends(CompleteSends),
}

/// `$m!(Variant)` for every variant (one list for encode and kind).
macro_rules! each_variant {
    ($self:expr, $e:ident => $body:expr) => {
        match $self {
            CsrEvent::AckSummary($e) => $body,
            CsrEvent::Loss($e) => $body,
            CsrEvent::Nack($e) => $body,
            CsrEvent::TxStart($e) => $body,
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
            CsrEvent::ProbeResult($e) => $body,
            CsrEvent::CompleteSends($e) => $body,
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

/// The reserved bytes of an entry (`mask`: its kind's [`CsrStruct::RESERVED`]) are zero: one
/// AND per word (inlined: the mask is a constant, so only its nonzero words are read).
#[inline(always)]
fn reserved(e: &CsrEntry, mask: &[u32; ENTRY_BYTES / 4]) -> Result<(), CsrError> {
    let words: &[U32; ENTRY_BYTES / 4] = zerocopy::transmute_ref!(e);
    let mut set = 0;
    for (w, m) in words.iter().zip(mask) {
        set |= w.get() & m;
    }
    if set == 0 {
        Ok(())
    } else {
        Err(CsrError::ReservedSet)
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
        let mut out: CsrEntry = each_variant!(self, e => CsrEntry(zerocopy::transmute!(*e)));
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
            CsrEvent::ProbeResult(_) => CsrKind::ProbeResult,
            CsrEvent::CompleteSends(_) => CsrKind::CompleteSends,
        }
    }

    /// The QP an entry is about, for the kinds that name one.
    pub fn qpn(&self) -> Option<u32> {
        let q = match self {
            CsrEvent::AckSummary(e) => e.qpn,
            CsrEvent::Loss(e) => e.qpn,
            CsrEvent::Nack(e) => e.qpn,
            CsrEvent::TxStart(e) => e.qpn,
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
            CsrEvent::ProbeResult(e) => e.qpn,
            CsrEvent::CompleteSends(e) => e.qpn,
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

    /// [`Self::decode`] of an entry in its ring slot: checked in place, then copied out.
    fn decode_entry(e: &CsrEntry) -> Result<Self, CsrError> {
        Ok(Self::copy_checked(e, e.check()?))
    }

    /// Entry `e`, checked already, copied out as the variant of `kind` (what
    /// [`CsrEntry::check`] returned for it), with no second check. For another `kind` the
    /// bytes are read under that kind's names, unchecked.
    #[inline]
    pub fn copy_checked(e: &CsrEntry, kind: CsrKind) -> Self {
        fn v<T: CsrStruct>(e: &CsrEntry) -> T {
            *T::of(e)
        }
        use CsrEvent as E;
        use CsrKind as K;
        match kind {
            K::AckSummary => E::AckSummary(v(e)),
            K::Loss => E::Loss(v(e)),
            K::Nack => E::Nack(v(e)),
            K::TxStart => E::TxStart(v(e)),
            K::WimmPlaced => E::WimmPlaced(v(e)),
            K::ProbeReply => E::ProbeReply(v(e)),
            K::PortEvent => E::PortEvent(v(e)),
            K::RxDrops => E::RxDrops(v(e)),
            K::RxFatal => E::RxFatal(v(e)),
            K::Flushed => E::Flushed(v(e)),
            K::EvDeliveries => E::EvDeliveries(v(e)),
            K::SkipServed => E::SkipServed(v(e)),
            K::Retransmit => E::Retransmit(v(e)),
            K::EvUpdate => E::EvUpdate(v(e)),
            K::PlaneWeight => E::PlaneWeight(v(e)),
            K::SendProbe => E::SendProbe(v(e)),
            K::WindowUpdate => E::WindowUpdate(v(e)),
            K::PostCqe => E::PostCqe(v(e)),
            K::PostEvent => E::PostEvent(v(e)),
            K::Complete => E::Complete(v(e)),
            K::EvEvent => E::EvEvent(v(e)),
            K::RetransmitUnacked => E::RetransmitUnacked(v(e)),
            K::TailProbe => E::TailProbe(v(e)),
            K::PlaneDown => E::PlaneDown(v(e)),
            K::QpInit => E::QpInit(v(e)),
            K::QpRtr => E::QpRtr(v(e)),
            K::QpRts => E::QpRts(v(e)),
            K::QpState => E::QpState(v(e)),
            K::RegionWrite => E::RegionWrite(v(e)),
            K::ProbeResult => E::ProbeResult(v(e)),
            K::CompleteSends => E::CompleteSends(v(e)),
        }
    }
}

impl CsrEntry {
    /// Check this entry as [`CsrEntry::decode`] does, in place: its kind when every field is
    /// valid. The fields are then read where they are, through the kind's struct
    /// ([`CsrEntry::view`]), with no copy (the firmware checks every entry it takes).
    ///
    /// # Errors
    /// See [`CsrError`].
    // (Inlined into each caller on hosts, the simulator's and the test kit's NICs, where
    // the call and its packed `Result` cost more than the check. The NIC core's image
    // leaves it to the compiler: there the inlined copies cost more guest instructions per
    // entry than the call, as `just fw-cost` shows.)
    #[cfg_attr(not(target_arch = "riscv32"), inline(always))]
    #[cfg_attr(target_arch = "riscv32", inline)]
    pub fn check(&self) -> Result<CsrKind, CsrError> {
        let entry = self;
        let b = &self.0;
        let kind = CsrKind::from_u8(b[0]).ok_or(CsrError::UnknownKind(b[0]))?;
        Ok(match kind {
            CsrKind::AckSummary => {
                let e = AckSummary::of(entry);
                zero(&[e.flags & !ACK_FLAGS])?;
                check24(e.qpn, 4)?;
                check24(e.una, 8)?;
                reserved(entry, &AckSummary::RESERVED)?;
                CsrKind::AckSummary
            }
            CsrKind::Loss => {
                let e = LossEntry::of(entry);
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                if e.cause != LOSS_REORDER {
                    return Err(CsrError::BadValue(16));
                }
                reserved(entry, &LossEntry::RESERVED)?;
                CsrKind::Loss
            }
            CsrKind::Nack => {
                let e = NackEntry::of(entry);
                nack_reason(e.reason, 1)?;
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                zero(&[e.flags & !NACK_IN_FLIGHT])?;
                reserved(entry, &NackEntry::RESERVED)?;
                CsrKind::Nack
            }
            CsrKind::TxStart => {
                let e = TxStart::of(entry);
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                reserved(entry, &TxStart::RESERVED)?;
                CsrKind::TxStart
            }
            CsrKind::WimmPlaced => {
                let e = WimmPlaced::of(entry);
                check24(e.qpn, 4)?;
                check24(e.last_psn, 8)?;
                zero(&[e.flags & !1])?;
                reserved(entry, &WimmPlaced::RESERVED)?;
                CsrKind::WimmPlaced
            }
            CsrKind::ProbeReply => {
                let e = ProbeReply::of(entry);
                check24(e.qpn, 4)?;
                reserved(entry, &ProbeReply::RESERVED)?;
                CsrKind::ProbeReply
            }
            CsrKind::PortEvent => {
                let e = PortEventEntry::of(entry);
                if e.up > 1 {
                    return Err(CsrError::BadValue(2));
                }
                reserved(entry, &PortEventEntry::RESERVED)?;
                CsrKind::PortEvent
            }
            CsrKind::RxDrops => {
                reserved(entry, &RxDrops::RESERVED)?;
                CsrKind::RxDrops
            }
            CsrKind::RxFatal => {
                let e = RxFatal::of(entry);
                let r = nack_reason(e.reason, 1)?;
                if !r.is_fatal() {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                reserved(entry, &RxFatal::RESERVED)?;
                CsrKind::RxFatal
            }
            CsrKind::Flushed => {
                let e = Flushed::of(entry);
                zero(&[e.flags & !(FLUSH_SIGNALED | FLUSH_RECV)])?;
                check24(e.qpn, 4)?;
                reserved(entry, &Flushed::RESERVED)?;
                CsrKind::Flushed
            }
            CsrKind::EvDeliveries => {
                let e = EvDeliveries::of(entry);
                check24(e.qpn, 4)?;
                reserved(entry, &EvDeliveries::RESERVED)?;
                CsrKind::EvDeliveries
            }
            CsrKind::SkipServed => {
                let e = SkipServed::of(entry);
                check24(e.qpn, 4)?;
                reserved(entry, &SkipServed::RESERVED)?;
                CsrKind::SkipServed
            }
            CsrKind::Retransmit => {
                let e = Retransmit::of(entry);
                zero(&[e.flags & !RETX_AVOID_LAST])?;
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                reserved(entry, &Retransmit::RESERVED)?;
                CsrKind::Retransmit
            }
            CsrKind::EvUpdate => {
                let e = EvUpdate::of(entry);
                ev_state(e.state, 1)?;
                check24(e.qpn, 4)?;
                reserved(entry, &EvUpdate::RESERVED)?;
                CsrKind::EvUpdate
            }
            CsrKind::PlaneWeight => {
                let e = PlaneWeight::of(entry);
                if !(1..=15).contains(&e.weight) {
                    return Err(CsrError::BadValue(2));
                }
                check24(e.qpn, 4)?;
                reserved(entry, &PlaneWeight::RESERVED)?;
                CsrKind::PlaneWeight
            }
            CsrKind::SendProbe => {
                let e = SendProbe::of(entry);
                check24(e.qpn, 4)?;
                reserved(entry, &SendProbe::RESERVED)?;
                CsrKind::SendProbe
            }
            CsrKind::WindowUpdate => {
                let e = WindowUpdate::of(entry);
                check24(e.qpn, 4)?;
                reserved(entry, &WindowUpdate::RESERVED)?;
                CsrKind::WindowUpdate
            }
            CsrKind::PostCqe => {
                let e = PostCqe::of(entry);
                super::cqe::CqeStatus::from_u8(e.status).ok_or(CsrError::BadValue(1))?;
                let op = super::cqe::CqeOpcode::from_u8(e.opcode).ok_or(CsrError::BadValue(2))?;
                check24(e.qpn, 8)?;
                if op != super::cqe::CqeOpcode::RecvWriteImm && e.imm.get() != 0 {
                    return Err(CsrError::ReservedSet);
                }
                zero(&[e.flags & !super::cqe::CQE_SOLICITED])?;
                reserved(entry, &PostCqe::RESERVED)?;
                CsrKind::PostCqe
            }
            CsrKind::PostEvent => {
                let e = PostEvent::of(entry);
                reserved(entry, &PostEvent::RESERVED)?;
                super::event::Event::from_words(
                    e.event_kind,
                    e.object.get(),
                    e.arg.map(|w| w.get()),
                )
                .map_err(|_| CsrError::BadValue(1))?;
                CsrKind::PostEvent
            }
            CsrKind::Complete => {
                let e = Complete::of(entry);
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
                reserved(entry, &Complete::RESERVED)?;
                CsrKind::Complete
            }
            CsrKind::CompleteSends => {
                let e = CompleteSends::of(entry);
                zero(&[e.flags & !CS_POST_CQE])?;
                if !(1..=COMPLETE_SENDS_MAX).contains(&e.count.get()) {
                    return Err(CsrError::BadValue(2));
                }
                check24(e.qpn, 4)?;
                if e.flags & CS_POST_CQE == 0 && e.cqn.get() != 0 {
                    return Err(CsrError::ReservedSet);
                }
                reserved(entry, &CompleteSends::RESERVED)?;
                CsrKind::CompleteSends
            }
            CsrKind::ProbeResult => {
                let e = ProbeResult::of(entry);
                if e.replied > 1 || (e.replied == 0 && e.rtt_ns.get() != 0) {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                reserved(entry, &ProbeResult::RESERVED)?;
                CsrKind::ProbeResult
            }
            CsrKind::EvEvent => {
                let e = EvEventEntry::of(entry);
                ev_state(e.old, 1)?;
                ev_state(e.new, 8)?;
                check24(e.qpn, 4)?;
                reserved(entry, &EvEventEntry::RESERVED)?;
                CsrKind::EvEvent
            }
            CsrKind::RetransmitUnacked => {
                let e = RetransmitUnacked::of(entry);
                check24(e.qpn, 4)?;
                reserved(entry, &RetransmitUnacked::RESERVED)?;
                CsrKind::RetransmitUnacked
            }
            CsrKind::TailProbe => {
                let e = TailProbe::of(entry);
                check24(e.qpn, 4)?;
                reserved(entry, &TailProbe::RESERVED)?;
                CsrKind::TailProbe
            }
            CsrKind::PlaneDown => {
                reserved(entry, &PlaneDown::RESERVED)?;
                CsrKind::PlaneDown
            }
            CsrKind::QpInit => {
                let e = QpInitCtx::of(entry);
                if e.planes == 0 {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                crate::wire::EvFormat::from_code(e.ev_format)
                    .map_err(|_| CsrError::BadValue(12))?;
                reserved(entry, &QpInitCtx::RESERVED)?;
                CsrKind::QpInit
            }
            CsrKind::QpRtr => {
                let e = QpRtrCtx::of(entry);
                check24(e.qpn, 4)?;
                check24(e.rq_psn, 8)?;
                check24(e.dest_qpn, 16)?;
                reserved(entry, &QpRtrCtx::RESERVED)?;
                CsrKind::QpRtr
            }
            CsrKind::QpRts => {
                let e = QpRtsCtx::of(entry);
                if !(1..=63).contains(&e.reorder_tx) {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                check24(e.sq_psn, 8)?;
                reserved(entry, &QpRtsCtx::RESERVED)?;
                CsrKind::QpRts
            }
            CsrKind::QpState => {
                let e = QpStateEntry::of(entry);
                if e.state > QP_ERROR {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                reserved(entry, &QpStateEntry::RESERVED)?;
                CsrKind::QpState
            }
            CsrKind::RegionWrite => {
                let e = RegionWrite::of(entry);
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
                reserved(entry, &RegionWrite::RESERVED)?;
                CsrKind::RegionWrite
            }
        })
    }

    /// This entry as the struct of kind `T`, in place. No check: a checked entry
    /// ([`CsrEntry::check`]) of `T`'s kind has valid fields; another kind's bytes read under
    /// `T`'s names.
    #[inline]
    pub fn view<T: CsrStruct>(&self) -> &T {
        T::of(self)
    }
}

#[cfg(test)]
mod tests;
