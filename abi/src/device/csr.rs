//! CSR event queues between the datapath (RTL, or its reference model) and the firmware cores.
//!
//! Two rings in NIC-local memory, each a power-of-two number of 32-byte entries described by a
//! [`CsrQueueRegs`] block: **DP->FW** (the datapath produces ACK summaries, NACKs, TX-done,
//! Write-with-Immediate placement, probe replies, port events and drop counters) and **FW->DP**
//! (the firmware produces retransmit requests, EV table updates, probe requests, window updates,
//! completions and events to post to the host). Indices are free-running 32-bit counters; the
//! ring is full when `producer - consumer == 2^log2_entries`; a producer that finds it full drops
//! the entry and increments `overflow` (never blocks, never overwrites).
//!
//! Every entry starts with its kind byte; the rest is the kind's struct below. PSN and QPN fields
//! are 24-bit values in 32-bit words whose top byte must be 0 unless documented otherwise.
//! [`CsrEvent::decode`] checks every field; [`CsrEvent::encode`] writes the 32 bytes.

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use super::{all_zero, EvState, QPN_LIMIT};

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

/// Entry kinds. DP->FW kinds are 0x01-0x7F, FW->DP kinds 0x81-0xFF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum CsrKind {
    /// [`AckSummary`].
    AckSummary = 0x01,
    /// [`NackEntry`].
    Nack = 0x02,
    /// [`TxDone`].
    TxDone = 0x03,
    /// [`WimmPlaced`].
    WimmPlaced = 0x04,
    /// [`ProbeReply`].
    ProbeReply = 0x05,
    /// [`PortEventEntry`].
    PortEvent = 0x06,
    /// [`RxDrops`].
    RxDrops = 0x07,
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
}

impl CsrKind {
    /// Every kind.
    pub const ALL: [CsrKind; 13] = [
        Self::AckSummary,
        Self::Nack,
        Self::TxDone,
        Self::WimmPlaced,
        Self::ProbeReply,
        Self::PortEvent,
        Self::RxDrops,
        Self::Retransmit,
        Self::EvUpdate,
        Self::SendProbe,
        Self::WindowUpdate,
        Self::PostCqe,
        Self::PostEvent,
    ];
    /// The kind with code `v`, if any.
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| *k as u8 == v)
    }
}

macro_rules! csr_entry {
    ($(#[doc = $sd:literal])* $name:ident { $($(#[doc = $d:literal])* $f:ident : $t:ty),* $(,)? }) => {
        le_struct! {
            $(#[doc = $sd])*
            pub struct $name {
                /// [`CsrKind`] code.
                pub kind: u8,
                $($(#[doc = $d])* pub $f: $t,)*
            }
        }
        const _: () = assert!(size_of::<$name>() == ENTRY_BYTES);
    };
}

csr_entry!(
    /// DP->FW: coalesced acknowledgement state of one QP (from received ACKs).
    AckSummary {
        /// Plane the triggering ACK arrived on.
        plane: u8,
        /// EV index of the data packet that triggered the ACK.
        ev_index: U16,
        /// QPN (23:0) and ECN plane mask (31:24: bit p = CE seen on plane p).
        qpn_ecn: U32,
        /// Cumulative PSN (every earlier PSN received).
        cum_psn: U32,
        /// SACK base PSN (bitmap bit 0).
        sack_base: U32,
        /// SACK bitmap, bit i = PSN base+i received.
        bitmap: U64,
        /// CE-marked data packets covered.
        ce_count: U16,
        /// Data packets covered.
        pkt_count: U16,
        /// Echoed tx timestamp (ns, low 32 bits).
        echoed_ts: U32,
    }
);
csr_entry!(
    /// DP->FW: a NACK arrived.
    NackEntry {
        /// NACK reason (wire NACKX reason code, 1..=8).
        reason: u8,
        /// EV index of the NACKed packet.
        ev_index: U16,
        /// QPN.
        qpn: U32,
        /// NACKed PSN.
        psn: U32,
        /// Cumulative PSN.
        cum_psn: U32,
        /// Plane of the NACKed packet.
        plane: u8,
        /// Reserved (0).
        rsvd: [u8; 15],
    }
);
csr_entry!(
    /// DP->FW: every packet of a send WQE has been transmitted once.
    TxDone {
        /// Reserved (0).
        rsvd: u8,
        /// Index of the WQE in the send ring.
        wqe_index: U16,
        /// QPN.
        qpn: U32,
        /// PSN of the first packet.
        first_psn: U32,
        /// Packets sent.
        num_packets: U32,
        /// Tx timestamp of the last packet (ns, low 32 bits).
        tx_ts: U32,
        /// Reserved (0).
        rsvd2: [u8; 12],
    }
);
csr_entry!(
    /// DP->FW: the last packet of a Write-with-Immediate has been placed (the firmware completes
    /// it once every earlier PSN is placed, in message order).
    WimmPlaced {
        /// Bit 0: solicited (SE set).
        flags: u8,
        /// Message sequence number.
        msn: U16,
        /// QPN.
        qpn: U32,
        /// PSN of the last packet.
        last_psn: U32,
        /// Immediate data.
        imm: U32,
        /// Message length in bytes.
        byte_len: U32,
        /// Reserved (0).
        rsvd: [u8; 12],
    }
);
csr_entry!(
    /// DP->FW: an EV probe reply arrived.
    ProbeReply {
        /// Plane it arrived on.
        plane: u8,
        /// EV index probed.
        ev_index: U16,
        /// QPN.
        qpn: U32,
        /// Probe id.
        probe_id: U32,
        /// Echoed tx timestamp of the probe (ns, low 32 bits).
        echoed_ts: U32,
        /// Reserved (0).
        rsvd: [u8; 16],
    }
);
csr_entry!(
    /// DP->FW: a port's link changed.
    PortEventEntry {
        /// Port.
        port: u8,
        /// 1 = up, 0 = down.
        up: u8,
        /// Plane of the port.
        plane: u8,
        /// Speed in Mb/s (0 when down).
        speed_mbps: U32,
        /// Reserved (0).
        rsvd: [u8; 24],
    }
);
csr_entry!(
    /// DP->FW: receive drop counters of a port since its last report (saturating).
    RxDrops {
        /// Port.
        port: u8,
        /// Reserved (0).
        rsvd: [u8; 2],
        /// Bad UDP checksum.
        bad_checksum: U32,
        /// Malformed headers.
        bad_header: U32,
        /// Unknown or not-ready QP.
        unknown_qp: U32,
        /// PSN outside the window.
        out_of_window: U32,
        /// No buffer (receive queue empty, resources).
        no_buffer: U32,
        /// Trimmed packets received.
        trimmed: U32,
        /// Anything else.
        other: U32,
    }
);
csr_entry!(
    /// FW->DP: retransmit one PSN of a QP on an EV.
    Retransmit {
        /// Reserved (0).
        rsvd: u8,
        /// EV index to send on.
        ev_index: U16,
        /// QPN.
        qpn: U32,
        /// PSN.
        psn: U32,
        /// Reserved (0).
        rsvd2: [u8; 20],
    }
);
csr_entry!(
    /// FW->DP: update one entry of a QP's EV table.
    EvUpdate {
        /// [`EvState`] code.
        state: u8,
        /// EV index.
        ev_index: U16,
        /// QPN.
        qpn: U32,
        /// Sprayer weight (0 = not usable; a GOOD EV has weight > 0).
        weight: U16,
        /// Reserved (0).
        rsvd: [u8; 22],
    }
);
csr_entry!(
    /// FW->DP: send an EV probe.
    SendProbe {
        /// Reserved (0).
        rsvd: u8,
        /// EV index.
        ev_index: U16,
        /// QPN.
        qpn: U32,
        /// Probe id.
        probe_id: U32,
        /// Reserved (0).
        rsvd2: [u8; 20],
    }
);
csr_entry!(
    /// FW->DP: the sender window and credit of a QP.
    WindowUpdate {
        /// Reserved (0).
        rsvd: [u8; 3],
        /// QPN.
        qpn: U32,
        /// Congestion window in bytes.
        cwnd_bytes: U32,
        /// New data may use PSNs before this one.
        limit_psn: U32,
        /// Pacing gap between packets in ns (0 = none).
        pacing_ns: U32,
        /// Reserved (0).
        rsvd2: [u8; 12],
    }
);
csr_entry!(
    /// FW->DP: write a CQE (the datapath fills `wr_id` from the WQE at `wqe_index`).
    PostCqe {
        /// [`crate::device::cqe::CqeStatus`] code.
        status: u8,
        /// [`crate::device::cqe::CqeOpcode`] code.
        opcode: u8,
        /// Bit 1: solicited (`CQE_SOLICITED`).
        flags: u8,
        /// CQ number.
        cqn: U32,
        /// QPN.
        qpn: U32,
        /// WQE index in its ring.
        wqe_index: U16,
        /// Reserved (0).
        rsvd: U16,
        /// Bytes.
        byte_len: U32,
        /// Immediate data.
        imm: U32,
        /// Error detail.
        syndrome: U32,
        /// Reserved (0).
        rsvd2: [u8; 4],
    }
);
csr_entry!(
    /// FW->DP: write an event record (the datapath adds owner bit and timestamp).
    PostEvent {
        /// [`crate::device::event::EventKind`] code.
        event_kind: u8,
        /// Reserved (0).
        rsvd: [u8; 2],
        /// Event object word.
        object: U32,
        /// Event argument words.
        arg: [U32; 4],
        /// Reserved (0).
        rsvd2: [u8; 8],
    }
);

const _: () = {
    assert!(size_of::<CsrQueueRegs>() == 32);
    assert!(offset_of!(AckSummary, qpn_ecn) == 4);
    assert!(offset_of!(AckSummary, bitmap) == 16);
    assert!(offset_of!(AckSummary, echoed_ts) == 28);
    assert!(offset_of!(NackEntry, plane) == 16);
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
    Nack(NackEntry),
    TxDone(TxDone),
    WimmPlaced(WimmPlaced),
    ProbeReply(ProbeReply),
    PortEvent(PortEventEntry),
    RxDrops(RxDrops),
    Retransmit(Retransmit),
    EvUpdate(EvUpdate),
    SendProbe(SendProbe),
    WindowUpdate(WindowUpdate),
    PostCqe(PostCqe),
    PostEvent(PostEvent),
}

fn check24(v: U32, off: u8) -> Result<(), CsrError> {
    if v.get() < QPN_LIMIT {
        Ok(())
    } else {
        Err(CsrError::BadValue(off))
    }
}

fn zero(b: &[u8]) -> Result<(), CsrError> {
    if all_zero(b) {
        Ok(())
    } else {
        Err(CsrError::ReservedSet)
    }
}

impl CsrEvent {
    /// The 32 bytes of this entry: the struct's bytes with the kind byte set from the variant
    /// ([`CsrEvent::decode`] checks the other fields).
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        let b = match self {
            CsrEvent::AckSummary(e) => e.as_bytes(),
            CsrEvent::Nack(e) => e.as_bytes(),
            CsrEvent::TxDone(e) => e.as_bytes(),
            CsrEvent::WimmPlaced(e) => e.as_bytes(),
            CsrEvent::ProbeReply(e) => e.as_bytes(),
            CsrEvent::PortEvent(e) => e.as_bytes(),
            CsrEvent::RxDrops(e) => e.as_bytes(),
            CsrEvent::Retransmit(e) => e.as_bytes(),
            CsrEvent::EvUpdate(e) => e.as_bytes(),
            CsrEvent::SendProbe(e) => e.as_bytes(),
            CsrEvent::WindowUpdate(e) => e.as_bytes(),
            CsrEvent::PostCqe(e) => e.as_bytes(),
            CsrEvent::PostEvent(e) => e.as_bytes(),
        };
        out.copy_from_slice(b);
        // The variant decides the kind, whatever the struct's `kind` field holds.
        out[0] = self.kind() as u8;
        out
    }

    /// The kind of this entry.
    pub const fn kind(&self) -> CsrKind {
        match self {
            CsrEvent::AckSummary(_) => CsrKind::AckSummary,
            CsrEvent::Nack(_) => CsrKind::Nack,
            CsrEvent::TxDone(_) => CsrKind::TxDone,
            CsrEvent::WimmPlaced(_) => CsrKind::WimmPlaced,
            CsrEvent::ProbeReply(_) => CsrKind::ProbeReply,
            CsrEvent::PortEvent(_) => CsrKind::PortEvent,
            CsrEvent::RxDrops(_) => CsrKind::RxDrops,
            CsrEvent::Retransmit(_) => CsrKind::Retransmit,
            CsrEvent::EvUpdate(_) => CsrKind::EvUpdate,
            CsrEvent::SendProbe(_) => CsrKind::SendProbe,
            CsrEvent::WindowUpdate(_) => CsrKind::WindowUpdate,
            CsrEvent::PostCqe(_) => CsrKind::PostCqe,
            CsrEvent::PostEvent(_) => CsrKind::PostEvent,
        }
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
                check24(e.cum_psn, 8)?;
                check24(e.sack_base, 12)?;
                CsrEvent::AckSummary(e)
            }
            CsrKind::Nack => {
                let e = rd!(NackEntry);
                if !(1..=8).contains(&e.reason) {
                    return Err(CsrError::BadValue(1));
                }
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                check24(e.cum_psn, 12)?;
                zero(&e.rsvd)?;
                CsrEvent::Nack(e)
            }
            CsrKind::TxDone => {
                let e = rd!(TxDone);
                check24(e.qpn, 4)?;
                check24(e.first_psn, 8)?;
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
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
            CsrKind::Retransmit => {
                let e = rd!(Retransmit);
                check24(e.qpn, 4)?;
                check24(e.psn, 8)?;
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
                CsrEvent::Retransmit(e)
            }
            CsrKind::EvUpdate => {
                let e = rd!(EvUpdate);
                let state = EvState::from_u8(e.state).ok_or(CsrError::BadValue(1))?;
                check24(e.qpn, 4)?;
                if state == EvState::Good && e.weight.get() == 0 {
                    return Err(CsrError::BadValue(8));
                }
                zero(&e.rsvd)?;
                CsrEvent::EvUpdate(e)
            }
            CsrKind::SendProbe => {
                let e = rd!(SendProbe);
                check24(e.qpn, 4)?;
                zero(&[e.rsvd])?;
                zero(&e.rsvd2)?;
                CsrEvent::SendProbe(e)
            }
            CsrKind::WindowUpdate => {
                let e = rd!(WindowUpdate);
                check24(e.qpn, 4)?;
                check24(e.limit_psn, 12)?;
                zero(&e.rsvd)?;
                zero(&e.rsvd2)?;
                CsrEvent::WindowUpdate(e)
            }
            CsrKind::PostCqe => {
                let e = rd!(PostCqe);
                let c = super::cqe::Completion {
                    wr_id: 0,
                    status: super::cqe::CqeStatus::from_u8(e.status)
                        .ok_or(CsrError::BadValue(1))?,
                    opcode: super::cqe::CqeOpcode::from_u8(e.opcode)
                        .ok_or(CsrError::BadValue(2))?,
                    byte_len: e.byte_len.get(),
                    imm: None,
                    qpn: e.qpn.get(),
                    wqe_index: 0,
                    solicited: false,
                    syndrome: 0,
                };
                check24(e.qpn, 8)?;
                if c.opcode != super::cqe::CqeOpcode::RecvWriteImm && e.imm.get() != 0 {
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
        })
    }
}

impl PostEvent {
    /// The CSR entry that posts `ev`.
    pub fn new(ev: &super::event::Event) -> Self {
        let (object, arg) = ev.words();
        PostEvent {
            kind: CsrKind::PostEvent as u8,
            event_kind: ev.kind() as u8,
            rsvd: [0; 2],
            object: object.into(),
            arg: arg.map(U32::new),
            rsvd2: [0; 8],
        }
    }

    /// The event to post (already validated by [`CsrEvent::decode`]).
    ///
    /// # Errors
    /// The words do not form an event.
    pub fn event(&self) -> Result<super::event::Event, super::event::EventError> {
        super::event::Event::from_words(
            self.event_kind,
            self.object.get(),
            self.arg.map(|w| w.get()),
        )
    }
}

impl AckSummary {
    /// QPN (bits 23:0 of `qpn_ecn`).
    pub fn qpn(&self) -> u32 {
        self.qpn_ecn.get() & (QPN_LIMIT - 1)
    }
    /// ECN plane mask (bits 31:24 of `qpn_ecn`).
    pub fn ecn_mask(&self) -> u8 {
        (self.qpn_ecn.get() >> 24) as u8
    }
    /// The cumulative PSN.
    pub fn cum_psn(&self) -> crate::Psn {
        crate::Psn::new(self.cum_psn.get())
    }
}

impl NackEntry {
    /// The NACKed PSN.
    pub fn psn(&self) -> crate::Psn {
        crate::Psn::new(self.psn.get())
    }
}

impl Retransmit {
    /// A retransmit request (QPN truncated to 24 bits).
    pub fn new(qpn: u32, psn: crate::Psn, ev_index: u16) -> Self {
        Retransmit {
            kind: CsrKind::Retransmit as u8,
            rsvd: 0,
            ev_index: ev_index.into(),
            qpn: (qpn & (QPN_LIMIT - 1)).into(),
            psn: psn.value().into(),
            rsvd2: [0; 20],
        }
    }
}

impl EvUpdate {
    /// An EV table update (QPN truncated to 24 bits).
    pub fn new(qpn: u32, ev_index: u16, state: EvState, weight: u16) -> Self {
        EvUpdate {
            kind: CsrKind::EvUpdate as u8,
            state: state as u8,
            ev_index: ev_index.into(),
            qpn: (qpn & (QPN_LIMIT - 1)).into(),
            weight: weight.into(),
            rsvd: [0; 22],
        }
    }
}

impl SendProbe {
    /// A probe request (QPN truncated to 24 bits).
    pub fn new(qpn: u32, ev_index: u16, probe_id: u32) -> Self {
        SendProbe {
            kind: CsrKind::SendProbe as u8,
            rsvd: 0,
            ev_index: ev_index.into(),
            qpn: (qpn & (QPN_LIMIT - 1)).into(),
            probe_id: probe_id.into(),
            rsvd2: [0; 20],
        }
    }
}

impl WindowUpdate {
    /// A window update (QPN truncated to 24 bits).
    pub fn new(qpn: u32, cwnd_bytes: u32, limit_psn: crate::Psn, pacing_ns: u32) -> Self {
        WindowUpdate {
            kind: CsrKind::WindowUpdate as u8,
            rsvd: [0; 3],
            qpn: (qpn & (QPN_LIMIT - 1)).into(),
            cwnd_bytes: cwnd_bytes.into(),
            limit_psn: limit_psn.value().into(),
            pacing_ns: pacing_ns.into(),
            rsvd2: [0; 12],
        }
    }
}

#[cfg(test)]
#[path = "csr_tests.rs"]
mod tests;
