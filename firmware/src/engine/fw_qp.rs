//! One QP's firmware state: the QP state machine, its EV table and congestion controller, the
//! ACK timeout and tail loss probe, the work requests waiting for completion, the receive queue.
//!
//! It runs on the datapath's reports (`mrc_abi::device::csr` DP->FW entries) and answers with
//! commands: at once for what an event decides (a retransmission order, a state change), and
//! lazily for state it keeps in sync ([`QpContext::poll_urgent`]: the congestion window and
//! completions; [`QpContext::poll_sprayer`]: EV table writes and plane weights;
//! [`QpContext::poll_ev_events`]: EV events for the host), so a burst of events costs one write
//! of each.

use mrc_abi::device::csr::{
    self, CompleteSends, CsrEntry, CsrEvent, CsrKind, EvEventEntry, EvUpdate, PlaneWeight,
    ProbeResult, QpInitCtx, QpRtrCtx, QpRtsCtx, QpStateEntry, Retransmit, RetransmitUnacked,
    SendProbe, TailProbe, WindowUpdate, EV_ANY,
};
use mrc_abi::wire::NackReason;
use mrc_abi::Psn;

use crate::csr_queue::CsrQueue;
use crate::datapath::sprayer::WEIGHT_MAX;
use crate::engine::cc::{Cc, Controller, FixedWindow};
use crate::engine::completion::{Completion, CompletionError, CompletionKind};
use crate::engine::ev_state::{AckFeedback, EvConfig, EvState, EvStats, EvTable, MAX_PLANES};
use crate::engine::host_probe::{HostProbes, Outcome, HOST_PROBE};
use crate::engine::qp::{transition_allowed, InitParams, QpAttrs, QpError, QpState};
use crate::engine::retry::{AckTimeout, RetryDecision, RetryPolicy, RetryState};
use crate::engine::timer_wheel::TimerHandle;
use crate::engine::{EngineConfig, REORDER_NS_BASE_RTT};
use crate::ring::Ring;

/// Timer kinds per QP: the ACK timeout with the tail loss probe, and EV probes (the EV
/// table's and the host's).
pub(crate) const T_RETRY: usize = 0;
pub(crate) const T_PROBE: usize = 1;
/// Timers each QP needs in the wheel.
pub const TIMERS_PER_QP: usize = 2;

/// Commands the engine buffers.
pub const CMD_CAP: usize = 128;
/// The engine's command queue.
pub(crate) type Cmds = CsrQueue<CMD_CAP>;
/// Commands one event may queue at once (the rest is lazy).
pub(crate) const EVENT_CMDS: usize = 2;

/// The front of a caller's command buffer the lazy commands are written to, entry by entry
/// (no queue between: they go where the caller reads them).
pub struct Out<'a> {
    buf: &'a mut [CsrEntry],
    n: usize,
}

impl<'a> Out<'a> {
    /// Writes from `buf[n..]` on.
    #[inline]
    pub(crate) fn new(buf: &'a mut [CsrEntry], n: usize) -> Self {
        Out { buf, n }
    }

    /// Entries written (from the front of the buffer).
    #[inline]
    pub(crate) fn written(&self) -> usize {
        self.n
    }

    /// Room left.
    #[inline]
    pub fn room(&self) -> usize {
        self.buf.len().saturating_sub(self.n)
    }

    /// Write `e` (nothing when there is no room: callers look at [`Self::room`] first).
    #[inline]
    pub fn push(&mut self, e: CsrEvent) {
        self.push_entry(e.encode());
    }

    /// Write an encoded entry (as [`Self::push`]).
    #[inline]
    pub fn push_entry(&mut self, e: CsrEntry) {
        if let Some(slot) = self.buf.get_mut(self.n) {
            *slot = e;
            self.n += 1;
        }
    }
}
/// Commands one timer may queue at once.
pub(crate) const TIMER_CMDS: usize = 8;

/// Firmware counters of one QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FwQpCounters {
    pub ack_summaries: u64,
    pub losses: u64,
    pub nacks_trimmed: u64,
    pub nacks_out_of_window: u64,
    pub nacks_too_many_wimm: u64,
    pub nacks_fatal: u64,
    pub retransmits_ordered: u64,
    pub timeouts: u64,
    pub give_ups: u64,
    pub tail_probes: u64,
    pub probes_sent: u64,
    pub probe_replies_ok: u64,
    pub probe_replies_stale: u64,
    /// `Complete` entries the firmware wrote (errors and received immediates).
    pub completions: u64,
    /// Send work requests whose completion the firmware ordered (`CompleteSends`, signaled or
    /// not).
    pub sends_completed: u64,
    pub flushed: u64,
    pub imm_completions: u64,
    /// Reports for a QP in a state that does not take them (late after ERROR or RESET).
    pub events_ignored: u64,
    /// Flushed work requests with no room to wait for their error completion (a datapath
    /// bug: it flushes at most the queue it holds).
    pub awaiting_overflow: u64,
}

/// What a report about one QP shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwQpView {
    pub qpn: u32,
    pub state: QpState,
    pub cwnd_bytes: u64,
    /// Oldest unacknowledged PSN as the last ACK summary said.
    pub una: Psn,
    /// Send work requests waiting for the firmware's completion: retired by ACKs and not
    /// ordered completed yet, or flushed in ERROR.
    pub awaiting: usize,
    /// EVs `Good` or `Skip`.
    pub active_evs: u16,
    pub ev_counters: crate::engine::ev_state::EvCounters,
    pub counters: FwQpCounters,
}

/// The capacities a QP's attributes are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub window_psns: usize,
    pub send_queue: usize,
    pub recv_queue: usize,
}

/// The firmware's state of one QP; sizes as in [`crate::capacity::Capacity`].
pub struct FwQp<const EVS: usize, const SQ: usize, const RQ: usize> {
    qpn: u32,
    open: bool,
    state: QpState,
    init: Option<InitParams>,
    ev: EvTable<EVS>,
    cc: Cc,
    /// The plane weights last written to the sprayer.
    weights: [u8; MAX_PLANES],
    /// A plane weight changed and is not written yet (the command buffer filled first).
    weights_pending: bool,
    retry: RetryState,
    reorder_ns: u32,
    tlp_deadline_ns: Option<u64>,
    tlp_out: bool,
    /// The datapath has PSNs outstanding (its last word: a TxStart or an ACK summary).
    outstanding: bool,
    una: Psn,
    /// Send work requests ACK summaries retired whose completion is not ordered yet.
    sends_retired: u32,
    /// Sends the datapath reported flushed, to complete in order.
    send_flushed: Ring<u64, SQ>,
    send_cause: Option<CompletionError>,
    /// Receives the datapath reported flushed, to complete in order.
    recv_flushed: Ring<u64, RQ>,
    recv_cause: Option<CompletionError>,
    /// The congestion window last written (`u64::MAX`: none yet).
    cwnd_sent: u64,
    pub(crate) timers: [Option<(TimerHandle, u64)>; TIMERS_PER_QP],
    /// Probes the host asked for.
    host_probes: HostProbes,
    counters: FwQpCounters,
}

/// What the engine does with one QP's firmware state, at any size (implemented by [`FwQp`]).
pub trait QpContext {
    /// A free slot for QP number `qpn`.
    fn new(qpn: u32) -> Self;
    /// Whether the slot holds a QP.
    fn is_open(&self) -> bool;
    /// A fresh QP in RESET in this slot.
    ///
    /// # Errors
    /// The default EV table's configuration (never, for a valid capacity).
    fn open(&mut self) -> Result<(), QpError>;
    /// Free the slot.
    fn close(&mut self);
    /// The state.
    fn state(&self) -> QpState;
    /// Move to `to` with `attrs`; the datapath's context writes go to `cmds`.
    ///
    /// # Errors
    /// [`QpError`] naming what failed; the QP is unchanged.
    fn modify(
        &mut self,
        to: QpState,
        attrs: &QpAttrs,
        cfg: &EngineConfig,
        limits: &Limits,
        cmds: &mut Cmds,
    ) -> Result<(), QpError>;
    /// One datapath report about this QP, checked, of kind `kind` (room for `EVENT_CMDS`
    /// commands is the caller's).
    fn handle_event(&mut self, now_ns: u64, kind: CsrKind, e: &CsrEntry, cmds: &mut Cmds);
    /// The deadline of timer `kind`.
    fn deadline(&self, kind: usize) -> Option<u64>;
    /// The wheel entry of timer `kind`.
    fn timer(&mut self, kind: usize) -> &mut Option<(TimerHandle, u64)>;
    /// Timer `kind` fired at `now_ns` (room for `TIMER_CMDS` commands is the caller's).
    /// Returns whether it did anything.
    fn fire(&mut self, now_ns: u64, kind: usize, cmds: &mut Cmds) -> bool;
    /// The lazy commands the host and the datapath wait on, the window and the completions
    /// due, into `out` as its room allows.
    fn poll_urgent(&mut self, out: &mut Out<'_>);
    /// The lazy commands for the sprayer, the EV table entries that changed and then the
    /// plane weights, into `out` as its room allows.
    fn poll_sprayer(&mut self, out: &mut Out<'_>);
    /// The EV state changes [`Self::poll_sprayer`] wrote, as events for the host, into `out`
    /// as its room allows.
    fn poll_ev_events(&mut self, out: &mut Out<'_>);
    /// Whether [`Self::poll_sprayer`] or [`Self::poll_ev_events`] has something to write.
    fn ev_pending(&self) -> bool;
    /// Whether lazy commands wait: [`Self::poll_urgent`], [`Self::poll_sprayer`] or
    /// [`Self::poll_ev_events`] has something to write.
    fn lazy_pending(&self) -> bool;
    /// Plane `plane` went down (every EV on it retires).
    fn plane_down(&mut self, plane: u8);
    /// Plane `plane` came back (its EVs are probed from `now_ns`).
    fn plane_up(&mut self, now_ns: u64, plane: u8);
    /// A loss on a route EV `ev` shares (see `EvTable::handle_shared_loss`).
    ///
    /// # Errors
    /// [`QpError::Ev`].
    fn shared_loss(&mut self, now_ns: u64, ev: u16) -> Result<bool, QpError>;
    /// A probe answered on a route EV `ev` shares (see `EvTable::handle_shared_recovery`).
    ///
    /// # Errors
    /// [`QpError::Ev`].
    fn shared_recovery(&mut self, ev: u16) -> Result<bool, QpError>;
    /// Controller: deny (`allow == false`) or allow EV `ev`.
    ///
    /// # Errors
    /// [`QpError::Ev`].
    fn set_ev_allowed(&mut self, now_ns: u64, ev: u16, allow: bool) -> Result<(), QpError>;
    /// The host's probe `probe_id` of EV `ev` (admin `PROBE_EV`), timing out `timeout_ns`
    /// after `now_ns`: its `SendProbe` is a lazy command ([`Self::poll_urgent`]), its outcome
    /// a `ProbeResult` command.
    ///
    /// # Errors
    /// [`QpError::WrongState`] outside RTS, [`QpError::Ev`] for an EV the table does not
    /// have, [`QpError::QueueFull`] when the QP has as many host probes outstanding as it
    /// keeps.
    fn probe_for_host(
        &mut self,
        now_ns: u64,
        ev: u16,
        probe_id: u32,
        timeout_ns: u64,
    ) -> Result<(), QpError>;
    /// For reports.
    fn view(&self) -> FwQpView;
    /// The state and statistics of EV `ev`.
    fn ev_stats(&self, ev: u16) -> Option<EvStats>;
}

impl<const EVS: usize, const SQ: usize, const RQ: usize> FwQp<EVS, SQ, RQ> {
    fn fresh(&mut self) -> Result<(), QpError> {
        self.ev
            .reset(EvConfig::new(EVS.min(256) as u16, 1))
            .map_err(QpError::Ev)?;
        self.state = QpState::Reset;
        self.init = None;
        self.cc = Cc::Fixed(FixedWindow { cwnd_bytes: 0 });
        self.weights = [1; MAX_PLANES];
        self.weights_pending = false;
        self.retry = RetryState::new(RetryPolicy::Forever, AckTimeout::MAX);
        self.reorder_ns = 0;
        self.tlp_deadline_ns = None;
        self.tlp_out = false;
        self.outstanding = false;
        self.una = Psn::new(0);
        self.sends_retired = 0;
        self.send_flushed.clear();
        self.send_cause = None;
        self.recv_flushed.clear();
        self.recv_cause = None;
        self.cwnd_sent = u64::MAX;
        self.host_probes.clear();
        self.counters = FwQpCounters::default();
        Ok(())
    }

    /// The `ProbeResult` command of a host probe's outcome.
    fn probe_result(&self, (ev, host_id, rtt_ns): Outcome) -> CsrEvent {
        CsrEvent::ProbeResult(ProbeResult::new(self.qpn, ev, host_id, rtt_ns))
    }

    /// Move to ERROR with a cause for each half (the first error's causes stand).
    fn fail(&mut self, send_cause: CompletionError, recv_cause: CompletionError, cmds: &mut Cmds) {
        if self.state == QpState::Error {
            return;
        }
        self.state = QpState::Error;
        // (the datapath flushes every send not completed, these too)
        self.sends_retired = 0;
        self.send_cause = Some(send_cause);
        self.recv_cause = Some(recv_cause);
        self.tlp_deadline_ns = None;
        self.outstanding = false;
        self.retry.on_progress(0, false);
        cmds.push(CsrEvent::QpState(QpStateEntry::new(
            self.qpn,
            csr::QP_ERROR,
        )));
    }

    /// The tail loss probe's deadline: two time-rule windows (about two unloaded RTTs) after
    /// the last send or ACK, while PSNs are outstanding and no probe is out.
    fn arm_tlp(&mut self, now_ns: u64) {
        let windows = u64::from(crate::datapath::stage::TLP_REORDER_WINDOWS);
        self.tlp_deadline_ns = (self.reorder_ns != 0 && !self.tlp_out && self.outstanding)
            .then(|| now_ns.saturating_add(windows * u64::from(self.reorder_ns)));
    }

    fn order_retransmit(&mut self, psn: Psn, avoid: bool, cmds: &mut Cmds) {
        self.counters.retransmits_ordered += 1;
        let flags = if avoid { csr::RETX_AVOID_LAST } else { 0 };
        cmds.push(CsrEvent::Retransmit(Retransmit::new(
            self.qpn, psn, EV_ANY, flags,
        )));
    }

    /// Capacity-weighted plane balance: plane weight proportional to its `Good` EVs, rounded
    /// to the nearest of `1..=WEIGHT_MAX` (rounding up would give a plane with 56 of 64 EVs
    /// 14/15 of the others' weight, 0.933, where its capacity is 0.875; 13/15 is 0.867); 0
    /// for a plane that is down (the datapath's `PlaneDown` set it so).
    fn plane_weights(&self) -> [u8; MAX_PLANES] {
        let caps = self.ev.plane_capacities();
        let max = caps.iter().copied().max().unwrap_or(0);
        let mut w = self.weights;
        if max == 0 {
            return w;
        }
        let planes = usize::from(self.ev.config().planes);
        for (p, &cap) in caps.iter().enumerate().take(planes) {
            let (cap, max) = (u32::from(cap), u32::from(max));
            let x = (2 * u32::from(WEIGHT_MAX) * cap + max) / (2 * max);
            if let Some(slot) = w.get_mut(p) {
                *slot = if self.ev.plane_is_down(p as u8) {
                    0
                } else {
                    x.clamp(1, u32::from(WEIGHT_MAX)) as u8
                };
            }
        }
        w
    }

    /// Whether a completion waits: an order for retired sends, or in ERROR a flushed work
    /// request's error completion.
    fn completions_waiting(&self) -> bool {
        self.sends_retired > 0 || !self.send_flushed.is_empty() || !self.recv_flushed.is_empty()
    }

    /// The next completion order or error completion into `cmds` (room for one is the
    /// caller's); `false` when none waits.
    fn push_completion(&mut self, cmds: &mut Out<'_>) -> bool {
        if self.sends_retired > 0 {
            let n = self.sends_retired.min(u32::from(csr::COMPLETE_SENDS_MAX));
            self.sends_retired -= n;
            self.counters.sends_completed += u64::from(n);
            cmds.push(CsrEvent::CompleteSends(CompleteSends::new(
                self.qpn, n as u16,
            )));
            return true;
        }
        let c = if let Some(wr_id) = self.send_flushed.pop_front() {
            Completion {
                qpn: self.qpn,
                wr_id,
                kind: CompletionKind::Send,
                status: Err(self.send_cause.take().unwrap_or(CompletionError::Flushed)),
            }
        } else if let Some(wr_id) = self.recv_flushed.pop_front() {
            Completion {
                qpn: self.qpn,
                wr_id,
                kind: CompletionKind::Recv,
                status: Err(self.recv_cause.take().unwrap_or(CompletionError::Flushed)),
            }
        } else {
            return false;
        };
        let e = self.complete(c);
        cmds.push_entry(e);
        true
    }

    fn complete(&mut self, c: Completion) -> mrc_abi::device::csr::CsrEntry {
        self.counters.completions += 1;
        if c.status.is_err() {
            self.counters.flushed += 1;
        }
        c.to_entry()
    }

    fn handle_ack(&mut self, now_ns: u64, a: &csr::AckSummary) {
        self.counters.ack_summaries += 1;
        self.ev.note_qp_deliveries(u64::from(a.delivered.get()));
        let rtt = u64::from(a.rtt_ns.get());
        let fb = AckFeedback {
            delivered: 0,
            ecn_marked: a.has(csr::ACK_ECN_EV),
            rtt_ns: rtt,
        };
        let _ = self.ev.handle_ack(a.ack_ev.get(), now_ns, fb);
        self.cc.on_ack(
            now_ns,
            u64::from(a.acked_bytes.get()),
            a.has(csr::ACK_ECN),
            rtt,
        );
        self.outstanding = a.has(csr::ACK_OUTSTANDING);
        // (the datapath holds at most `SQ` work requests: a larger count is malformed)
        self.sends_retired = self
            .sends_retired
            .saturating_add(u32::from(a.retired.get()))
            .min(SQ as u32);
        if a.has(csr::ACK_PROGRESS) {
            self.una = a.una();
            self.retry.on_progress(now_ns, self.outstanding);
        }
        self.tlp_out = false;
        self.arm_tlp(now_ns);
    }

    fn handle_nack(&mut self, now_ns: u64, n: &csr::NackEntry, cmds: &mut Cmds) {
        let Some(reason) = n.reason() else { return };
        if reason.is_fatal() || reason == NackReason::InvalidQp {
            self.counters.nacks_fatal += 1;
            self.fail(
                CompletionError::RemoteNack(reason),
                CompletionError::Flushed,
                cmds,
            );
            return;
        }
        let ev = n.ev.get();
        if n.flags & csr::NACK_IN_FLIGHT != 0 {
            let _ = self
                .ev
                .credit_deliveries(ev, u64::from(n.ev_delivered.get()));
        }
        match reason {
            NackReason::Trimmed | NackReason::TrimmedLastHop => {
                self.counters.nacks_trimmed += 1;
                let _ = self.ev.handle_trim(ev);
                self.cc.on_trim(now_ns, u64::from(n.len.get()));
                self.order_retransmit(n.psn(), false, cmds);
            }
            NackReason::OutOfWindow => {
                self.counters.nacks_out_of_window += 1;
                self.order_retransmit(n.psn(), false, cmds);
            }
            _ => {
                // TOO_MANY_WIMM: the ACK timeout resends it once the responder has room.
                self.counters.nacks_too_many_wimm += 1;
            }
        }
    }
}

impl<const EVS: usize, const SQ: usize, const RQ: usize> QpContext for FwQp<EVS, SQ, RQ> {
    fn new(qpn: u32) -> Self {
        let ev = match EvTable::new(EvConfig::new(EVS.min(256) as u16, 1)) {
            Ok(t) => t,
            // (the default configuration of a table of this capacity is valid; a capacity
            // the table refuses fails the build)
            Err(_) => unreachable_table(),
        };
        FwQp {
            qpn,
            open: false,
            state: QpState::Reset,
            init: None,
            ev,
            cc: Cc::Fixed(FixedWindow { cwnd_bytes: 0 }),
            weights: [1; MAX_PLANES],
            weights_pending: false,
            retry: RetryState::new(RetryPolicy::Forever, AckTimeout::MAX),
            reorder_ns: 0,
            tlp_deadline_ns: None,
            tlp_out: false,
            outstanding: false,
            una: Psn::new(0),
            sends_retired: 0,
            send_flushed: Ring::new(0),
            send_cause: None,
            recv_flushed: Ring::new(0),
            recv_cause: None,
            cwnd_sent: u64::MAX,
            timers: [None; TIMERS_PER_QP],
            host_probes: HostProbes::new(),
            counters: FwQpCounters::default(),
        }
    }

    fn is_open(&self) -> bool {
        self.open
    }

    fn open(&mut self) -> Result<(), QpError> {
        self.fresh()?;
        self.open = true;
        Ok(())
    }

    fn close(&mut self) {
        self.open = false;
        self.state = QpState::Reset;
    }

    fn state(&self) -> QpState {
        self.state
    }

    fn modify(
        &mut self,
        to: QpState,
        attrs: &QpAttrs,
        cfg: &EngineConfig,
        limits: &Limits,
        cmds: &mut Cmds,
    ) -> Result<(), QpError> {
        let from = self.state;
        if !transition_allowed(from, to) {
            return Err(QpError::BadTransition { from, to });
        }
        match to {
            QpState::Reset => {
                self.fresh()?;
                cmds.push(CsrEvent::QpState(QpStateEntry::new(
                    self.qpn,
                    csr::QP_RESET,
                )));
            }
            QpState::Init => {
                let p = attrs.init_params(EVS)?;
                let mut table = p.ev_profile.table;
                table.planes = table.planes.clamp(1, MAX_PLANES as u8);
                EvTable::<EVS>::check(&table).map_err(QpError::Ev)?;
                let cc = p.cc_profile.build()?;
                self.ev.reset(table).map_err(QpError::Ev)?;
                self.cc = cc;
                self.weights = [1; MAX_PLANES];
                self.init = Some(p);
                self.state = QpState::Init;
                cmds.push(CsrEvent::QpInit(QpInitCtx::new(
                    self.qpn,
                    table.evs,
                    table.planes,
                    p.ev_profile.format,
                    p.ev_profile.value_base,
                )));
            }
            QpState::Rtr => {
                let p = attrs.rtr_params(limits.window_psns, limits.recv_queue)?;
                self.state = QpState::Rtr;
                cmds.push(CsrEvent::QpRtr(QpRtrCtx::new(
                    self.qpn, p.rq_psn, p.mpr_psns, p.max_wimm, p.dest_qpn,
                )));
            }
            QpState::Rts => {
                let p = attrs.rts_params(limits.window_psns, limits.send_queue)?;
                self.retry = p.retry;
                // (a base RTT past 4.29 s, absurd, is capped short of the sentinel)
                self.reorder_ns = match cfg.reorder_ns {
                    REORDER_NS_BASE_RTT => self
                        .cc
                        .base_rtt_ns()
                        .map_or(0, |r| u32::try_from(r).unwrap_or(u32::MAX - 1)),
                    ns => ns,
                };
                self.una = p.sq_psn;
                self.cwnd_sent = u64::MAX;
                self.state = QpState::Rts;
                let reorder_tx = cfg.reorder_tx.clamp(1, 63) as u8;
                cmds.push(CsrEvent::QpRts(QpRtsCtx::new(
                    self.qpn,
                    p.sq_psn,
                    p.mpr_psns,
                    p.max_wimm,
                    reorder_tx,
                    self.reorder_ns,
                )));
            }
            QpState::Error => {
                self.fail(CompletionError::Flushed, CompletionError::Flushed, cmds);
            }
        }
        Ok(())
    }

    fn handle_event(&mut self, now_ns: u64, kind: CsrKind, e: &CsrEntry, cmds: &mut Cmds) {
        let live = matches!(self.state, QpState::Rtr | QpState::Rts);
        let rts = self.state == QpState::Rts;
        match kind {
            CsrKind::AckSummary if rts => self.handle_ack(now_ns, e.view()),
            CsrKind::Loss if rts => {
                let l = e.view::<csr::LossEntry>();
                self.counters.losses += 1;
                let ev = l.ev.get();
                let _ = self
                    .ev
                    .credit_deliveries(ev, u64::from(l.ev_delivered.get()));
                let _ = self.ev.handle_loss(ev, now_ns);
                self.cc.on_nack(now_ns, u64::from(l.len.get()));
                self.order_retransmit(l.psn(), true, cmds);
            }
            CsrKind::Nack if rts => self.handle_nack(now_ns, e.view(), cmds),
            CsrKind::TxStart if rts => {
                self.retry.arm(now_ns);
                self.outstanding = true;
                self.arm_tlp(now_ns);
            }
            CsrKind::WimmPlaced if live => {
                let w = e.view::<csr::WimmPlaced>();
                self.counters.imm_completions += 1;
                let c = self.complete(Completion {
                    qpn: self.qpn,
                    wr_id: w.wr_id.get(),
                    kind: CompletionKind::RecvImm {
                        imm: w.imm.get(),
                        msn: w.msn.get(),
                    },
                    status: Ok(()),
                });
                cmds.push_entry(c);
            }
            CsrKind::ProbeReply if e.view::<csr::ProbeReply>().probe_id.get() & HOST_PROBE != 0 => {
                let p = e.view::<csr::ProbeReply>();
                match self.host_probes.reply(p.probe_id.get(), p.rtt_ns.get()) {
                    Some(o) => cmds.push(self.probe_result(o)),
                    None => self.counters.probe_replies_stale += 1,
                }
            }
            CsrKind::ProbeReply if live => {
                let p = e.view::<csr::ProbeReply>();
                match self.ev.handle_probe_reply(
                    p.ev_index.get(),
                    p.probe_id.get(),
                    u64::from(p.rtt_ns.get()),
                ) {
                    Ok(()) => self.counters.probe_replies_ok += 1,
                    Err(_) => self.counters.probe_replies_stale += 1,
                }
            }
            CsrKind::RxFatal => {
                let f = e.view::<csr::RxFatal>();
                let reason = NackReason::from_u8(f.reason).unwrap_or(NackReason::RemoteAccess);
                self.fail(
                    CompletionError::Flushed,
                    CompletionError::LocalQpError(reason),
                    cmds,
                );
            }
            CsrKind::Flushed if self.state == QpState::Error => {
                let f = e.view::<csr::Flushed>();
                if f.flags & csr::FLUSH_RECV != 0 {
                    if self.recv_flushed.push_back(f.wr_id.get()).is_err() {
                        self.counters.awaiting_overflow += 1;
                    }
                } else if self.send_flushed.push_back(f.wr_id.get()).is_err() {
                    self.counters.awaiting_overflow += 1;
                }
            }
            CsrKind::EvDeliveries => {
                let d = e.view::<csr::EvDeliveries>();
                let _ = self
                    .ev
                    .credit_deliveries(d.ev.get(), u64::from(d.count.get()));
            }
            CsrKind::SkipServed => {
                let _ = self
                    .ev
                    .handle_skip_served(e.view::<csr::SkipServed>().ev.get());
            }
            _ => self.counters.events_ignored += 1,
        }
    }

    fn deadline(&self, kind: usize) -> Option<u64> {
        match kind {
            T_RETRY if self.state == QpState::Rts => {
                match (self.retry.deadline_ns(), self.tlp_deadline_ns) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            T_PROBE => {
                let ev = matches!(self.state, QpState::Rtr | QpState::Rts)
                    .then(|| self.ev.next_probe_deadline())
                    .flatten();
                match (ev, self.host_probes.next_deadline()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            _ => None,
        }
    }

    fn timer(&mut self, kind: usize) -> &mut Option<(TimerHandle, u64)> {
        let k = kind.min(TIMERS_PER_QP - 1);
        &mut self.timers[k]
    }

    fn fire(&mut self, now_ns: u64, kind: usize, cmds: &mut Cmds) -> bool {
        if kind == T_PROBE {
            let mut any = false;
            let mut room = TIMER_CMDS;
            while room > 0 {
                let Some(o) = self.host_probes.poll_expired(now_ns) else {
                    break;
                };
                room -= 1;
                any = true;
                cmds.push(self.probe_result(o));
            }
            if !matches!(self.state, QpState::Rtr | QpState::Rts) {
                return any;
            }
            for _ in 0..room {
                let Some(p) = self.ev.poll_probe(now_ns) else {
                    break;
                };
                any = true;
                self.counters.probes_sent += 1;
                cmds.push(CsrEvent::SendProbe(SendProbe::new(
                    self.qpn, p.ev, p.plane, p.probe_id,
                )));
            }
            return any;
        }
        if self.state != QpState::Rts {
            return false;
        }
        let mut acted = false;
        if self.tlp_deadline_ns.is_some_and(|d| d <= now_ns) {
            self.tlp_deadline_ns = None;
            if self.outstanding && !self.tlp_out {
                self.tlp_out = true;
                self.counters.tail_probes += 1;
                cmds.push(CsrEvent::TailProbe(TailProbe::new(self.qpn)));
                acted = true;
            }
        }
        match self.retry.deadline_ns() {
            Some(d) if d <= now_ns => {}
            _ => return acted,
        }
        if !self.outstanding {
            self.retry.on_progress(now_ns, false);
            return acted;
        }
        self.counters.timeouts += 1;
        match self.retry.on_timeout(now_ns) {
            RetryDecision::Retry { .. } => {
                self.cc.on_timeout(now_ns);
                cmds.push(CsrEvent::RetransmitUnacked(RetransmitUnacked::new(
                    self.qpn,
                )));
                // The timeout's one retransmission gets a tail probe of its own: when it or
                // its ACK is lost on its path, `una` leaves again on another plane two
                // windows later, not after the doubled timeout.
                self.tlp_out = false;
                self.arm_tlp(now_ns);
            }
            RetryDecision::GiveUp { .. } => {
                self.counters.give_ups += 1;
                self.fail(
                    CompletionError::RetryExceeded,
                    CompletionError::Flushed,
                    cmds,
                );
            }
        }
        true
    }

    fn poll_urgent(&mut self, cmds: &mut Out<'_>) {
        if self.state == QpState::Rts && self.cc.cwnd_bytes() != self.cwnd_sent && cmds.room() > 0 {
            self.cwnd_sent = self.cc.cwnd_bytes();
            cmds.push(CsrEvent::WindowUpdate(WindowUpdate::new(
                self.qpn,
                self.cwnd_sent,
            )));
        }
        while cmds.room() > 0 && self.push_completion(cmds) {}
        while cmds.room() > 0 {
            let Some((ev, id)) = self.host_probes.poll_send() else {
                break;
            };
            let plane = self.ev.stats(ev).map_or(0, |s| s.plane);
            cmds.push(CsrEvent::SendProbe(SendProbe::new(self.qpn, ev, plane, id)));
        }
    }

    fn poll_sprayer(&mut self, cmds: &mut Out<'_>) {
        let qpn = self.qpn;
        // The EV table entries first, for every change before any is reported to the host:
        // a shared loss retires dozens of EVs at once, and the sprayer should leave them all
        // as soon as it can.
        let mut changed = false;
        while cmds.room() > 0 {
            let Some((ev, state)) = self.ev.poll_update() else {
                break;
            };
            changed = true;
            let plane = self.ev.stats(ev).map_or(0, |s| s.plane);
            cmds.push(CsrEvent::EvUpdate(EvUpdate::new(qpn, ev, state, plane)));
        }
        if changed || self.ev.has_updates() || self.weights_pending {
            let w = self.plane_weights();
            self.weights_pending = false;
            for (p, (&new, old)) in w.iter().zip(self.weights.iter_mut()).enumerate() {
                if new == *old {
                    continue;
                }
                if cmds.room() > 0 {
                    *old = new;
                    cmds.push(CsrEvent::PlaneWeight(PlaneWeight::new(qpn, p as u8, new)));
                } else {
                    // (no room: written at the next poll, not at the next EV change)
                    self.weights_pending = true;
                }
            }
        }
    }

    fn poll_ev_events(&mut self, cmds: &mut Out<'_>) {
        while cmds.room() > 0 {
            let Some(e) = self.ev.poll_updated_event() else {
                break;
            };
            cmds.push(CsrEvent::EvEvent(EvEventEntry::new(
                self.qpn,
                e.ev,
                e.old,
                e.new,
                e.reason.code(),
            )));
        }
    }

    #[inline]
    fn ev_pending(&self) -> bool {
        self.ev.has_events() || self.ev.has_updates() || self.weights_pending
    }

    fn lazy_pending(&self) -> bool {
        self.ev.has_events()
            || self.ev.has_updates()
            || self.weights_pending
            || (self.state == QpState::Rts && self.cc.cwnd_bytes() != self.cwnd_sent)
            || self.completions_waiting()
            || self.host_probes.has_unsent()
    }

    fn plane_down(&mut self, plane: u8) {
        if self.init.is_some() && self.ev.plane_down(plane).is_ok() {
            // (the datapath's `PlaneDown`, queued ahead of this QP's commands, sets the
            // weight 0 in its sprayer)
            if let Some(w) = self.weights.get_mut(usize::from(plane)) {
                *w = 0;
            }
        }
    }

    fn plane_up(&mut self, now_ns: u64, plane: u8) {
        if self.init.is_some() && self.ev.plane_up(plane, now_ns).is_ok() {
            // (its weight is written again after the EV table writes of its retirement: its
            // EVs are retired in the sprayer before it is sprayed on again)
            self.weights_pending = true;
        }
    }

    fn shared_loss(&mut self, now_ns: u64, ev: u16) -> Result<bool, QpError> {
        self.ev.handle_shared_loss(ev, now_ns).map_err(QpError::Ev)
    }

    fn shared_recovery(&mut self, ev: u16) -> Result<bool, QpError> {
        self.ev.handle_shared_recovery(ev).map_err(QpError::Ev)
    }

    fn set_ev_allowed(&mut self, now_ns: u64, ev: u16, allow: bool) -> Result<(), QpError> {
        if allow {
            self.ev.allow(ev, now_ns).map_err(QpError::Ev)
        } else {
            self.ev.deny(ev).map_err(QpError::Ev)
        }
    }

    fn probe_for_host(
        &mut self,
        now_ns: u64,
        ev: u16,
        probe_id: u32,
        timeout_ns: u64,
    ) -> Result<(), QpError> {
        if self.state != QpState::Rts {
            return Err(QpError::WrongState { state: self.state });
        }
        self.ev.stats(ev).map_err(QpError::Ev)?;
        self.host_probes.start(now_ns, ev, probe_id, timeout_ns)
    }

    fn view(&self) -> FwQpView {
        FwQpView {
            qpn: self.qpn,
            state: self.state,
            cwnd_bytes: self.cc.cwnd_bytes(),
            una: self.una,
            awaiting: self.sends_retired as usize + self.send_flushed.len(),
            active_evs: self.ev.active(),
            ev_counters: self.ev.counters(),
            counters: self.counters,
        }
    }

    fn ev_stats(&self, ev: u16) -> Option<EvStats> {
        self.ev.stats(ev).ok()
    }
}

/// Unreachable: a table of this capacity refused its default configuration.
#[cold]
fn unreachable_table() -> ! {
    panic!("EV table capacity refuses its default configuration")
}

/// Keep the `EvState` import for the docs of `poll_sprayer`.
const _: Option<EvState> = None;
