//! # mrc-nicloop: one iteration of the NIC image's main loop
//!
//! [`NicLoop::step`] takes `now_ns` (the hardware timer, read once by the caller) and a
//! [`Datapath`] (the image's `hal` on the NIC, fake in-memory queues in tests) and moves events
//! between the datapath and [`mrc_firmware::engine::Engine`]:
//!
//! 1. DP->FW CSR ring (mrc-abi `device::csr`): every entry is checked with
//!    [`CsrEvent::decode`]; `AckSummary`, `Nack` and `ProbeReply` become the ACK / NACK / probe
//!    reply the engine takes in [`Engine::handle_packet`]; `PortEvent` becomes
//!    `handle_plane_down/up`; `RxDrops` is added to the loop's counters; `TxDone` and
//!    `WimmPlaced` are counted only (see the gaps below); malformed entries and FW->DP kinds
//!    found on this ring are counted and dropped.
//! 2. Received packet headers ([`Datapath::pop_rx`]) go to [`Engine::handle_tx_packet`]; the
//!    verdict (place the payload, consumed, dropped) goes back with [`Datapath::rx_verdict`].
//! 3. [`Engine::handle_timeout`] when [`Engine::poll_timeout`] is due.
//! 4. Engine output: packets to [`Datapath::push_tx`]; completions to FW->DP `PostCqe`; EV state
//!    changes to FW->DP `EvUpdate`. A full queue drops the output and counts it.
//!
//! Each input queue is drained at most [`BUDGET`] entries per step, so one busy queue cannot
//! starve the timer or the other queues (the watchdog is kicked between steps).
//!
//! ## Gaps in mrc-abi, stated rather than invented
//! - **Per-packet header queues.** The CSR rings carry the coalesced slow path only. The engine
//!   as written is a per-packet engine: it sees every data packet and probe ([`Datapath::pop_rx`])
//!   and builds every packet it wants sent ([`Datapath::push_tx`], a full [`TxPacket`]
//!   descriptor, more than a 32-byte CSR entry holds). mrc-abi defines no queue for either. On
//!   the NIC the `hal` receives no headers, and sends what mrc-abi can express ([`abi_order`]:
//!   a retransmission as FW->DP `Retransmit`, a probe as `SendProbe`, the datapath rebuilding
//!   the packet); every other packet (new data, ACK, NACK, probe reply: the datapath's own
//!   work in the mrc-abi model) is refused and counted as `tx_no_queue`.
//! - **CQ numbers and WQE indices.** The engine has no CQ: `PostCqe.cqn` is the QPN (one CQ per
//!   QP until admin commands create CQs); `wqe_index` is the low 16 bits of `wr_id` (the caller
//!   posts work requests with `wr_id` = WQE index); `byte_len` is 0 for sends (the engine's
//!   completion does not carry it).
//! - **TxDone / WimmPlaced / WindowUpdate.** The engine has no input taking "a WQE was sent" or
//!   "a Write-with-Immediate was placed by the datapath" (its responder places writes itself)
//!   and no output for the sender window; they are counted, not acted on.
//! - **Host doorbells and admin commands.** Posting work requests needs the WQE rings in host
//!   memory (DMA), which the image's `hal` does not reach yet; callers post with
//!   [`NicLoop::engine_mut`].
#![no_std]
#![forbid(unsafe_code)]

use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};
use mrc_abi::device::csr::{
    AckSummary, CsrEvent, EvUpdate, NackEntry, PostCqe, ProbeReply, Retransmit, SendProbe,
    ENTRY_BYTES,
};
use mrc_abi::device::EvState as AbiEvState;
use mrc_abi::wire::{
    AckRepr, Body, BthRepr, EvFormat, EvxRepr, MrcRepr, MrhRepr, NackReason, NackRepr, ProbeRepr,
    TsxRepr,
};
use mrc_abi::Psn;
use mrc_firmware::datapath::ack_gen::TrimMark;
use mrc_firmware::engine::ev_state::EvState;
use mrc_firmware::engine::{
    Completion, CompletionError, CompletionKind, Engine, EngineConfig, EngineError, QpEvEvent,
    RxMeta, RxVerdict, TxBody, TxPacket, TIMERS_PER_QP,
};

/// QPs of the NIC engine.
pub const QPS: usize = 2;
/// EVs per QP.
pub const EVS: usize = 16;
/// Planes.
pub const PLANES: usize = 4;
/// PSN window per direction (`64 * WIN_WORDS`).
pub const WIN: usize = 128;
/// 64-bit words of the PSN window bitmaps.
pub const WIN_WORDS: usize = 2;
/// Send work requests per QP.
pub const SQ: usize = 8;
/// Receive work requests per QP.
pub const RQ: usize = 8;
/// Registered regions.
pub const REGIONS: usize = 4;
/// Engine timers.
pub const TIMERS: usize = QPS * TIMERS_PER_QP;

/// The engine at the NIC core's capacities: 2 QPs, 16 EVs per QP over 4 planes, a 128-PSN
/// window, 8 send + 8 receive work requests per QP, 4 regions, 6 timers.
///
/// Sized for the NIC core's 60 KiB DTCM (`firmware/memory-map.toml`), which holds `.data`,
/// `.bss` and the stack. The engine lives in `.bss` (21,144 bytes on riscv32), but
/// `Engine::new` returns it by value, so boot builds it on the stack and copies it into place:
/// the image's `init_loop` frame is 32,512 bytes, 1.54 engines, on top of the one in `.bss`.
/// That boot-time copy, not the running loop (under 3 KiB of stack), is what limits the
/// capacities: 32 EVs per QP already leave the boot stack 256 bytes short, and the image's
/// `hal` asserts the fit at compile time. An in-place constructor in the engine would about
/// double what fits.
pub type NicEngine = Engine<QPS, EVS, PLANES, WIN, WIN_WORDS, SQ, RQ, REGIONS, TIMERS>;

/// Entries taken from each input queue per step.
pub const BUDGET: usize = 64;

/// A received packet as the datapath's header parser hands it over (not in mrc-abi; see the
/// crate docs): the sender's descriptor, the trim mark the fabric set, what the wire block
/// measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxHeader {
    /// The packet's headers.
    pub pkt: TxPacket,
    /// Trim mark.
    pub trim: TrimMark,
    /// Payload length and CE.
    pub meta: RxMeta,
}

/// The datapath as the loop sees it: the two CSR rings of mrc-abi and the per-packet header
/// queues mrc-abi does not define yet.
pub trait Datapath {
    /// The next DP->FW CSR entry (32 bytes), consuming it.
    fn pop_event(&mut self) -> Option<[u8; ENTRY_BYTES]>;
    /// Append a FW->DP CSR entry; `false` when the ring is full (the loop counts the drop).
    fn push_order(&mut self, entry: &[u8; ENTRY_BYTES]) -> bool;
    /// The next received data packet or probe header.
    fn pop_rx(&mut self) -> Option<RxHeader>;
    /// What the engine made of the header last returned by [`Datapath::pop_rx`].
    fn rx_verdict(&mut self, hdr: &RxHeader, verdict: RxVerdict);
    /// Transmit `pkt`; `false` when there is no room (the loop counts the drop).
    fn push_tx(&mut self, pkt: &TxPacket) -> bool;
}

/// Loop counters: every drop has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LoopCounters {
    /// Steps.
    pub steps: u64,
    /// DP->FW entries taken.
    pub csr_events: u64,
    /// DP->FW entries that failed [`CsrEvent::decode`] or had a FW->DP kind.
    pub csr_bad: u64,
    /// `TxDone` / `WimmPlaced` entries (no engine input for them yet).
    pub csr_not_wired: u64,
    /// Received headers handed to the engine.
    pub rx_headers: u64,
    /// Payloads the engine asked the datapath to place.
    pub rx_placed: u64,
    /// Drops the datapath reported in `RxDrops` (sum of its counters, saturating).
    pub dp_rx_drops: u64,
    /// Port events.
    pub port_events: u64,
    /// `handle_timeout` calls.
    pub timeouts: u64,
    /// Packets handed to the datapath.
    pub tx_packets: u64,
    /// Packets not sent: the transmit queue was full, or (NIC) mrc-abi has no order for them.
    pub tx_no_queue: u64,
    /// `PostCqe` / `EvUpdate` entries written.
    pub orders: u64,
    /// FW->DP entries dropped: the ring was full.
    pub orders_dropped: u64,
}

/// The loop's state: the engine and the counters.
pub struct NicLoop {
    engine: NicEngine,
    counters: LoopCounters,
}

impl NicLoop {
    /// A loop around a fresh engine.
    ///
    /// # Errors
    /// The engine refused `cfg`.
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        Ok(NicLoop {
            engine: NicEngine::new(cfg)?,
            counters: LoopCounters::default(),
        })
    }

    /// The engine (QP setup, posting work requests, counters).
    pub fn engine(&self) -> &NicEngine {
        &self.engine
    }

    /// The engine, mutably.
    pub fn engine_mut(&mut self) -> &mut NicEngine {
        &mut self.engine
    }

    /// Counters.
    pub fn counters(&self) -> LoopCounters {
        self.counters
    }

    /// One main-loop iteration at `now_ns`. Returns whether anything moved.
    pub fn step<D: Datapath>(&mut self, now_ns: u64, dp: &mut D) -> bool {
        self.counters.steps += 1;
        let mut moved = false;
        for _ in 0..BUDGET {
            let Some(entry) = dp.pop_event() else { break };
            moved = true;
            self.counters.csr_events += 1;
            self.csr_event(now_ns, &entry);
        }
        for _ in 0..BUDGET {
            let Some(hdr) = dp.pop_rx() else { break };
            moved = true;
            self.counters.rx_headers += 1;
            let v = self
                .engine
                .handle_tx_packet(now_ns, &hdr.pkt, hdr.trim, hdr.meta);
            if matches!(v, RxVerdict::Place { .. }) {
                self.counters.rx_placed += 1;
            }
            dp.rx_verdict(&hdr, v);
        }
        if self.engine.poll_timeout().is_some_and(|t| t <= now_ns) {
            self.counters.timeouts += 1;
            self.engine.handle_timeout(now_ns);
        }
        while let Some(p) = self.engine.poll_transmit(now_ns) {
            moved = true;
            if dp.push_tx(&p) {
                self.counters.tx_packets += 1;
            } else {
                self.counters.tx_no_queue += 1;
            }
        }
        while let Some(c) = self.engine.poll_completion() {
            moved = true;
            let e = CsrEvent::PostCqe(post_cqe(&c)).encode();
            self.order(dp, &e);
        }
        while let Some(ev) = self.engine.poll_ev_event() {
            moved = true;
            let e = CsrEvent::EvUpdate(ev_update(&ev)).encode();
            self.order(dp, &e);
        }
        moved
    }

    fn order<D: Datapath>(&mut self, dp: &mut D, e: &[u8; ENTRY_BYTES]) {
        if dp.push_order(e) {
            self.counters.orders += 1;
        } else {
            self.counters.orders_dropped += 1;
        }
    }

    fn csr_event(&mut self, now_ns: u64, entry: &[u8; ENTRY_BYTES]) {
        let c = &mut self.counters;
        match CsrEvent::decode(entry) {
            Ok(CsrEvent::AckSummary(a)) => {
                let _ = self
                    .engine
                    .handle_packet(now_ns, &ack_repr(&a), RxMeta::default());
            }
            Ok(CsrEvent::Nack(n)) => match nack_repr(&n) {
                Some(r) => {
                    let _ = self.engine.handle_packet(now_ns, &r, RxMeta::default());
                }
                None => c.csr_bad += 1,
            },
            Ok(CsrEvent::ProbeReply(p)) => {
                let _ = self
                    .engine
                    .handle_packet(now_ns, &probe_reply_repr(&p), RxMeta::default());
            }
            Ok(CsrEvent::PortEvent(p)) => {
                c.port_events += 1;
                if p.up == 1 {
                    self.engine.handle_plane_up(now_ns, p.plane);
                } else {
                    self.engine.handle_plane_down(now_ns, p.plane);
                }
            }
            Ok(CsrEvent::RxDrops(d)) => {
                let sum = [
                    d.bad_checksum,
                    d.bad_header,
                    d.unknown_qp,
                    d.out_of_window,
                    d.no_buffer,
                    d.trimmed,
                    d.other,
                ]
                .iter()
                .fold(0u64, |s, v| s.saturating_add(u64::from(v.get())));
                c.dp_rx_drops = c.dp_rx_drops.saturating_add(sum);
            }
            Ok(CsrEvent::TxDone(_) | CsrEvent::WimmPlaced(_)) => c.csr_not_wired += 1,
            Ok(_) | Err(_) => c.csr_bad += 1,
        }
    }
}

fn repr(qpn: u32, psn: Psn, ev_index: u16, plane: u8, echo_ts: u32, body: Body) -> MrcRepr {
    MrcRepr {
        bth: BthRepr {
            opcode: body.opcode(),
            se: false,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: qpn,
            ack_req: false,
            psn,
        },
        mrh: MrhRepr {
            ev_format: EvFormat::Udp,
            trimmed: false,
            trimmed_last_hop: false,
            retransmit: false,
            msn: 0,
        },
        evx: Some(EvxRepr {
            ev_index,
            plane,
            ev_value: 0,
        }),
        tsx: Some(TsxRepr {
            tx_ts_ns: 0,
            echo_ts_ns: echo_ts,
        }),
        body,
    }
}

/// The ACK the engine takes for a DP->FW `AckSummary`.
pub fn ack_repr(a: &AckSummary) -> MrcRepr {
    let body = Body::Ack(AckRepr {
        cum_psn: a.cum_psn(),
        sack_base: Psn::new(a.sack_base.get()),
        sack_bitmap: a.bitmap.get(),
        ev_index: a.ev_index.get(),
        plane: a.plane,
        ecn_plane_mask: a.ecn_mask(),
        ce_count: a.ce_count.get(),
        pkt_count: a.pkt_count.get(),
    });
    repr(
        a.qpn(),
        a.cum_psn(),
        a.ev_index.get(),
        a.plane,
        a.echoed_ts.get(),
        body,
    )
}

/// The NACK the engine takes for a DP->FW `Nack` (`None`: reason code unknown, which
/// [`CsrEvent::decode`] already refuses).
pub fn nack_repr(n: &NackEntry) -> Option<MrcRepr> {
    let reason = NackReason::from_u8(n.reason).ok()?;
    let body = Body::Nack(NackRepr {
        reason,
        psn: n.psn(),
        cum_psn: Psn::new(n.cum_psn.get()),
        ev_index: n.ev_index.get(),
        plane: n.plane,
    });
    Some(repr(
        n.qpn.get(),
        Psn::new(n.cum_psn.get()),
        n.ev_index.get(),
        n.plane,
        0,
        body,
    ))
}

/// The probe reply the engine takes for a DP->FW `ProbeReply`.
pub fn probe_reply_repr(p: &ProbeReply) -> MrcRepr {
    let body = Body::ProbeReply(ProbeRepr {
        probe_id: p.probe_id.get(),
        ev_index: p.ev_index.get(),
        plane: p.plane,
    });
    repr(
        p.qpn.get(),
        Psn::new(0),
        p.ev_index.get(),
        p.plane,
        p.echoed_ts.get(),
        body,
    )
}

fn cqe_status(s: Result<(), CompletionError>) -> CqeStatus {
    match s {
        Ok(()) => CqeStatus::Success,
        Err(CompletionError::RetryExceeded) => CqeStatus::RetryExceeded,
        Err(CompletionError::Flushed) => CqeStatus::WrFlushed,
        Err(CompletionError::RemoteNack(r)) => match r {
            NackReason::RemoteAccess => CqeStatus::RemoteAccess,
            NackReason::Length => CqeStatus::RemoteLength,
            NackReason::NoRecvBuffer => CqeStatus::RemoteNoRecvBuffer,
            _ => CqeStatus::RemoteInvalidRequest,
        },
        Err(CompletionError::LocalQpError(r)) => match r {
            NackReason::Length => CqeStatus::LocalLength,
            NackReason::RemoteAccess => CqeStatus::LocalProtection,
            _ => CqeStatus::LocalQpOperation,
        },
    }
}

/// The FW->DP `PostCqe` for an engine completion (see the crate docs for `cqn`, `wqe_index`
/// and `byte_len`).
pub fn post_cqe(c: &Completion) -> PostCqe {
    let (opcode, imm) = match c.kind {
        CompletionKind::Send => (CqeOpcode::Write, 0),
        CompletionKind::RecvImm { imm, .. } => (CqeOpcode::RecvWriteImm, imm),
        CompletionKind::Recv => (CqeOpcode::RecvWriteImm, 0),
    };
    let qpn = c.qpn & (mrc_abi::device::QPN_LIMIT - 1);
    PostCqe {
        kind: 0,
        status: cqe_status(c.status) as u8,
        opcode: opcode as u8,
        // The engine's completion does not carry the solicited bit.
        flags: 0,
        cqn: qpn.into(),
        qpn: qpn.into(),
        wqe_index: (c.wr_id as u16).into(),
        rsvd: 0.into(),
        byte_len: 0.into(),
        imm: imm.into(),
        syndrome: 0.into(),
        rsvd2: [0; 4],
    }
}

/// The FW->DP `EvUpdate` for an engine EV state change (weight 1 for a usable EV).
pub fn ev_update(e: &QpEvEvent) -> EvUpdate {
    let (state, weight) = match e.event.new {
        EvState::Good => (AbiEvState::Good, 1),
        EvState::Skip => (AbiEvState::Skip, 0),
        EvState::AssumedBad => (AbiEvState::AssumedBad, 0),
        EvState::Denied => (AbiEvState::Denied, 0),
    };
    EvUpdate::new(e.qpn, e.event.ev, state, weight)
}

/// The FW->DP CSR order that asks the datapath to send `p`, where mrc-abi has one: a
/// retransmitted write becomes `Retransmit` (the datapath rebuilds the packet from its send
/// WQE), a probe becomes `SendProbe`, both for the sending QP (`src_qpn`). New data, ACKs,
/// NACKs and probe replies have none: in the mrc-abi model the datapath sends new data from
/// WQEs and generates ACKs / NACKs / probe replies itself.
pub fn abi_order(p: &TxPacket) -> Option<CsrEvent> {
    match p.body {
        TxBody::Write { .. } if p.retransmit => Some(CsrEvent::Retransmit(Retransmit::new(
            p.src_qpn,
            p.psn,
            p.evx.ev_index,
        ))),
        TxBody::Probe(pr) => Some(CsrEvent::SendProbe(SendProbe::new(
            p.src_qpn,
            pr.ev_index,
            pr.probe_id,
        ))),
        _ => None,
    }
}

/// Whether `p` is a packet the datapath's receive side reports through the DP->FW CSR ring
/// (ACK, NACK, probe reply) rather than through the header queue.
pub fn is_csr_reported(p: &TxPacket) -> bool {
    matches!(
        p.body,
        TxBody::Ack(_) | TxBody::Nack(_) | TxBody::ProbeReply(_)
    )
}
