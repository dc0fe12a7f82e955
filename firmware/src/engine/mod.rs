//! The MRC firmware engine: the slow path the NIC's cores run on the datapath's coalesced
//! events.
//!
//! The engine never handles a data packet. It takes the datapath stage's reports (DP->FW
//! `mrc_abi::device::csr` entries: ACK summaries with the sends they retired, losses, NACKs,
//! placed immediates, probe replies, port events, ...) with [`Engine::handle_events`], runs its
//! timers with [`Engine::handle_timeout`], and answers with commands (FW->DP entries:
//! retransmission orders, EV table writes and plane weights, windows, probes, QP contexts,
//! receive credits, completion orders for retired sends, and error and receive completions and
//! EV events for the host) from [`Engine::poll_commands`]. It is sans-IO and
//! never reads a clock: every input carries `now_ns`. Everything is integer or fixed point (the
//! NIC cores have no FPU), bounded (capacities from a [`Capacity`] profile, no allocation, no
//! recursion) and deterministic (randomness only from [`rng::Rng`] with a seed). No input
//! panics; every refused input is an error value and a counter.
//!
//! What the engine keeps: the QP state machine and the OCP attribute rules ([`qp`]), loss
//! policy (which losses are resent and where), the ACK timeout and retry policy ([`retry`]),
//! the tail loss probe, EV states, probes and the gray-loss test ([`ev_state`], [`sprt`]), plane
//! balance, congestion control ([`cc`]: NSCC in fixed point), completions in posting order
//! ([`completion`]).
//!
//! Building blocks: [`timer_wheel`] (hierarchical, O(1) arm/cancel), [`fixed`] (Q16 EWMA,
//! integer logarithms), [`rng`] (SplitMix64 + xorshift64*).

pub mod cc;
pub mod completion;
pub mod ev_state;
pub mod fixed;
pub mod fw_qp;
pub mod host_probe;
mod in_place;
pub mod qp;
pub mod retry;
pub mod rng;
pub mod sprt;
pub mod timer_wheel;

use core::marker::PhantomData;

use mrc_abi::device::csr::{CsrEntry, CsrEvent, CsrKind, PlaneDown, PortEventEntry};

use crate::capacity::{Capacity, Slots};
use fw_qp::{Cmds, Limits, Out, QpContext, EVENT_CMDS, TIMERS_PER_QP as KINDS, TIMER_CMDS};
use timer_wheel::{TimerId, Timers};

pub use completion::{Completion, CompletionError, CompletionKind};
pub use fw_qp::{FwQpCounters, FwQpView, CMD_CAP, TIMERS_PER_QP};
pub use qp::{Attr, CcProfile, EvProfile, QpAttrs, QpError, QpHint, QpState};

// Every DP->FW kind but `PortEvent` and `RxDrops` names its QP in the QPN word, which
// `handle_events` reads without decoding the entry: a new kind fails here until it does.
const _: () = {
    let mut i = 0;
    while i < CsrKind::ALL.len() {
        let k = CsrKind::ALL[i];
        if k.is_event() && !matches!(k, CsrKind::PortEvent | CsrKind::RxDrops) {
            assert!(CsrKind::has_qpn_word(k as u8));
        }
        i += 1;
    }
};

/// Engine-wide configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EngineConfig {
    /// Timer wheel tick.
    pub tick_ns: u64,
    /// A SACK hole is a loss once this many later transmissions are acknowledged (1..=63,
    /// written to each QP's datapath context at RTS).
    ///
    /// Spraying over many paths reorders by about the packets sent during the paths' delay
    /// skew, so a value for one path (3, 8) retires healthy EVs; 32 found exactly the real
    /// losses of the simulator's default scenario. It must stay below 64: a hole is judged only
    /// while it is inside the ACK's 64-bit SACK bitmap.
    pub reorder_tx: u32,
    /// ... and once the newest acknowledged transmission left at least this many ns after the
    /// hole's (RACK's reordering window, about one unloaded RTT; 0 = the count alone decides;
    /// [`REORDER_NS_BASE_RTT`]: each QP's CC profile's base RTT). A hole two windows older
    /// than the newest acknowledged transmission is lost whatever the count: a short burst
    /// (a few packets per message) never has `reorder_tx` later transmissions, and its holes
    /// would otherwise wait for the ACK timeout. Also the tail loss probe's unit: a probe goes
    /// two windows after the last send or ACK with PSNs outstanding (none without a window).
    pub reorder_ns: u32,
}

/// [`EngineConfig::reorder_ns`]: each QP's reordering window is the base RTT of its CC
/// profile (NSCC's, which the controller sets for the fabric; a fixed window has none: the
/// count alone decides, no tail loss probe), for firmware that cannot know the fabric's RTT
/// when it is built.
pub const REORDER_NS_BASE_RTT: u32 = u32::MAX;

impl Default for EngineConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl EngineConfig {
    /// The defaults.
    pub const DEFAULT: EngineConfig = EngineConfig {
        tick_ns: 256,
        reorder_tx: 32,
        reorder_ns: 0,
    };
}

/// A bad engine configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EngineError {
    /// `tick_ns` is 0.
    ZeroTick,
    /// `reorder_tx` not in `1..=63`.
    ReorderTx(u32),
}

/// Engine counters: every refused input has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EngineCounters {
    pub events: u64,
    /// Event entries that failed `CsrEvent::decode`.
    pub events_malformed: u64,
    /// FW->DP kinds found among the events.
    pub events_wrong_side: u64,
    /// Events for a QP number the engine does not have open.
    pub events_unknown_qp: u64,
    /// Inputs held back for lack of command room.
    pub backpressure: u64,
    pub commands: u64,
    /// Commands pushed with no room (a bug: producers check first).
    pub commands_overflow: u64,
    pub timer_arm_failed: u64,
    pub timeouts_fired: u64,
    pub plane_downs: u64,
    pub plane_ups: u64,
    pub rx_drop_reports: u64,
    pub qp_errors: u64,
}

/// The firmware engine of one NIC with the capacities `C`. See the module docs.
pub struct Engine<C: Capacity> {
    cfg: EngineConfig,
    qps: C::PerQp<C::FwQp>,
    timers: C::Timers,
    cmds: Cmds,
    /// Per QP: lazy commands may be waiting.
    dirty: C::PerQp<bool>,
    any_dirty: bool,
    counters: EngineCounters,
    _c: PhantomData<C>,
}

impl<C: Capacity> Engine<C> {
    /// An engine with no QP.
    ///
    /// # Errors
    /// [`EngineError`] naming the bad field.
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        let tick = Self::check(&cfg)?;
        Ok(Engine {
            cfg,
            qps: C::PerQp::<C::FwQp>::build(|i| C::FwQp::new(i as u32)),
            timers: C::Timers::with_tick(tick),
            cmds: Cmds::EMPTY,
            dirty: C::PerQp::<bool>::build(|_| false),
            any_dirty: false,
            counters: EngineCounters::default(),
            _c: PhantomData,
        })
    }

    /// `cfg` checked; its tick.
    fn check(cfg: &EngineConfig) -> Result<core::num::NonZeroU64, EngineError> {
        let tick = core::num::NonZeroU64::new(cfg.tick_ns).ok_or(EngineError::ZeroTick)?;
        if !(1..=63).contains(&cfg.reorder_tx) {
            return Err(EngineError::ReorderTx(cfg.reorder_tx));
        }
        Ok(tick)
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> EngineCounters {
        let mut c = self.counters;
        c.commands_overflow = self.cmds.overflow;
        c
    }

    fn limits() -> Limits {
        Limits {
            window_psns: C::WINDOW_PSNS,
            send_queue: C::SEND_QUEUE,
            recv_queue: C::RECV_QUEUE,
        }
    }

    fn open_qp(&mut self, qpn: u32) -> Result<&mut C::FwQp, QpError> {
        self.qps
            .as_mut()
            .get_mut(qpn as usize)
            .filter(|q| q.is_open())
            .ok_or(QpError::UnknownQp { qpn })
    }

    /// QP `qpn` changed: marked for the lazy pass (which finds out whether it has lazy
    /// commands to write, once for a batch of events).
    #[inline]
    fn mark(&mut self, qpn: u32) {
        if let Some(d) = self.dirty.as_mut().get_mut(qpn as usize) {
            *d = true;
            self.any_dirty = true;
        }
    }

    /// QP `qpn`'s firmware state, for reports.
    pub fn qp(&self, qpn: u32) -> Option<FwQpView> {
        self.qps
            .as_ref()
            .get(qpn as usize)
            .filter(|q| q.is_open())
            .map(QpContext::view)
    }

    /// The state of QP `qpn`.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qp(qpn).map(|q| q.state)
    }

    /// The state and statistics of EV `ev` of QP `qpn`.
    pub fn ev_stats(&self, qpn: u32, ev: u16) -> Option<ev_state::EvStats> {
        self.qps
            .as_ref()
            .get(qpn as usize)
            .filter(|q| q.is_open())
            .and_then(|q| q.ev_stats(ev))
    }

    /// Create a QP in RESET; returns its number.
    ///
    /// # Errors
    /// [`QpError::TableFull`].
    pub fn create_qp(&mut self) -> Result<u32, QpError> {
        let slot = self
            .qps
            .as_ref()
            .iter()
            .position(|q| !q.is_open())
            .ok_or(QpError::TableFull)?;
        if let Some(q) = self.qps.as_mut().get_mut(slot) {
            q.open()?;
        }
        Ok(slot as u32)
    }

    /// Destroy a QP (its work requests are dropped without completions; the datapath forgets
    /// its context).
    ///
    /// # Errors
    /// [`QpError::UnknownQp`].
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), QpError> {
        self.open_qp(qpn)?;
        self.cancel_timers(qpn);
        if let Some(q) = self.qps.as_mut().get_mut(qpn as usize) {
            q.close();
        }
        self.cmds
            .push(CsrEvent::QpState(mrc_abi::device::csr::QpStateEntry::new(
                qpn,
                mrc_abi::device::csr::QP_RESET,
            )));
        Ok(())
    }

    /// Move QP `qpn` to `to` with `attrs` (see [`qp`] for the rules); the datapath's context
    /// follows through the commands.
    ///
    /// # Errors
    /// [`QpError`] naming what failed; the QP is unchanged.
    pub fn modify_qp(
        &mut self,
        qpn: u32,
        to: QpState,
        attrs: &QpAttrs,
        now_ns: u64,
    ) -> Result<(), QpError> {
        let cfg = self.cfg;
        let limits = Self::limits();
        let qp = self
            .qps
            .as_mut()
            .get_mut(qpn as usize)
            .filter(|q| q.is_open())
            .ok_or(QpError::UnknownQp { qpn })?;
        let was_error = qp.state() == QpState::Error;
        qp.modify(to, attrs, &cfg, &limits, &mut self.cmds)?;
        if to == QpState::Error && !was_error {
            self.counters.qp_errors += 1;
        }
        if to == QpState::Reset {
            self.cancel_timers(qpn);
        }
        self.mark(qpn);
        self.sync_timers(qpn, now_ns);
        Ok(())
    }

    /// Datapath reports (the DP->FW ring's entries), in order. Returns how many were taken
    /// (fewer when the command queue is short of room: the rest waits in the ring).
    pub fn handle_events(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize {
        for (i, e) in events.iter().enumerate() {
            if self.cmds.room() < EVENT_CMDS {
                self.counters.backpressure += 1;
                return i;
            }
            self.counters.events += 1;
            // Checked in place and read through views: no copy of the entry.
            let kind = match e.check() {
                Ok(k) if k.is_event() => k,
                Ok(_) => {
                    self.counters.events_wrong_side += 1;
                    continue;
                }
                Err(_) => {
                    self.counters.events_malformed += 1;
                    continue;
                }
            };
            match kind {
                CsrKind::PortEvent => {
                    let p = e.view::<PortEventEntry>();
                    if p.up == 0 {
                        self.handle_plane_down(now_ns, p.plane);
                    } else {
                        self.handle_plane_up(now_ns, p.plane);
                    }
                }
                CsrKind::RxDrops => self.counters.rx_drop_reports += 1,
                _ => {
                    let qpn = e.qpn_word();
                    let Some(qp) = self
                        .qps
                        .as_mut()
                        .get_mut(qpn as usize)
                        .filter(|q| q.is_open())
                    else {
                        self.counters.events_unknown_qp += 1;
                        continue;
                    };
                    let was_error = qp.state() == QpState::Error;
                    qp.handle_event(now_ns, kind, e, &mut self.cmds);
                    if !was_error && qp.state() == QpState::Error {
                        self.counters.qp_errors += 1;
                    }
                    self.mark(qpn);
                    self.sync_timers(qpn, now_ns);
                }
            }
        }
        events.len()
    }

    /// Commands for the datapath (the FW->DP ring's entries), oldest first, into the front of
    /// `out`. Returns how many. The state the engine keeps in sync lazily (EV table writes,
    /// plane weights, the window, completions) follows the queued commands, as room allows,
    /// so a burst of events costs one write of each.
    #[inline]
    pub fn poll_commands(&mut self, out: &mut [CsrEntry]) -> usize {
        // (the main loop polls far more often than there is something: answered inline)
        if !self.commands_pending() {
            return 0;
        }
        self.poll_commands_some(out)
    }

    /// [`Self::poll_commands`] when commands may wait.
    #[inline(never)]
    fn poll_commands_some(&mut self, out: &mut [CsrEntry]) -> usize {
        let n = self.cmds.drain_into(out);
        let n = if self.any_dirty {
            self.poll_lazy(out, n)
        } else {
            n
        };
        self.counters.commands += n as u64;
        n
    }

    /// The lazy commands of the QPs marked dirty into `out` after its first `n` entries, as
    /// room allows; returns the entries written in all. Three passes over the dirty QPs, most
    /// urgent first: every QP's window and completions (one QP's burst of EV changes would
    /// otherwise hold the completions of the QPs after it for as many polls as it takes),
    /// then every QP's EV table writes and plane weights (a shared loss retires EVs of many
    /// QPs at once: the sprayers leave them all before the host hears of any), then the EV
    /// events for the host. A QP stays marked while it has lazy commands left.
    fn poll_lazy(&mut self, out: &mut [CsrEntry], n: usize) -> usize {
        let mut out = Out::new(out, n);
        // (with room left after a QP's last pass, every pass ran dry for it: room only
        // shrinks, and each pass stops only when dry or out of room)
        let mut left = false;
        let mut ev_work = false;
        for (q, d) in self
            .qps
            .as_mut()
            .iter_mut()
            .zip(self.dirty.as_mut().iter_mut())
        {
            if *d {
                q.poll_urgent(&mut out);
                if q.ev_pending() {
                    ev_work = true;
                } else {
                    *d = out.room() == 0 && q.lazy_pending();
                    left |= *d;
                }
            }
        }
        if ev_work {
            for (q, d) in self.qps.as_mut().iter_mut().zip(self.dirty.as_ref().iter()) {
                if *d {
                    q.poll_sprayer(&mut out);
                }
            }
            left = false;
            for (q, d) in self
                .qps
                .as_mut()
                .iter_mut()
                .zip(self.dirty.as_mut().iter_mut())
            {
                if *d {
                    q.poll_ev_events(&mut out);
                    *d = out.room() == 0 && q.lazy_pending();
                    left |= *d;
                }
            }
        }
        self.any_dirty = left;
        out.written()
    }

    /// Whether commands may wait: [`Self::poll_commands`] would return some, or a QP changed
    /// since the last poll and may have lazy commands (the poll finds out).
    #[inline]
    pub fn commands_pending(&self) -> bool {
        !self.cmds.is_empty() || self.any_dirty
    }

    fn cancel_timers(&mut self, qpn: u32) {
        let Some(qp) = self.qps.as_mut().get_mut(qpn as usize) else {
            return;
        };
        for k in 0..KINDS {
            if let Some((h, _)) = qp.timer(k).take() {
                let _ = self.timers.cancel(h);
            }
        }
    }

    /// Each timer of QP `qpn` armed at its deadline (an earlier armed deadline stands: a
    /// timer that fires early finds nothing due and is re-armed).
    #[inline]
    fn sync_timers(&mut self, qpn: u32, now_ns: u64) {
        let Some(qp) = self.qps.as_mut().get_mut(qpn as usize) else {
            return;
        };
        // (the common case, looked at inline: every timer stands as it is; the two kinds)
        const _: () = assert!(KINDS == 2);
        let stands = |qp: &mut C::FwQp, kind| match (qp.deadline(kind), *qp.timer(kind)) {
            (None, _) => true,
            (Some(d), Some((_, at))) => at <= d,
            (Some(_), None) => false,
        };
        if stands(qp, fw_qp::T_RETRY) && stands(qp, fw_qp::T_PROBE) {
            return;
        }
        self.arm_timers(qpn, now_ns);
    }

    /// [`Self::sync_timers`] when a timer is to be armed.
    #[inline(never)]
    fn arm_timers(&mut self, qpn: u32, _now_ns: u64) {
        for kind in 0..KINDS {
            let Some(qp) = self.qps.as_mut().get_mut(qpn as usize) else {
                return;
            };
            let Some(d) = qp.deadline(kind) else { continue };
            if qp.timer(kind).is_some_and(|(_, at)| at <= d) {
                continue;
            }
            self.rearm(qpn, kind, d);
        }
    }

    /// Arm timer `kind` of QP `qpn` at `d` (cancelling a later one).
    #[inline(never)]
    fn rearm(&mut self, qpn: u32, kind: usize, d: u64) {
        let Some(qp) = self.qps.as_mut().get_mut(qpn as usize) else {
            return;
        };
        if let Some((h, _)) = qp.timer(kind).take() {
            let _ = self.timers.cancel(h);
        }
        let id = TimerId(qpn.wrapping_mul(KINDS as u32).wrapping_add(kind as u32));
        let entry = match self.timers.arm(id, d) {
            Ok(h) => Some((h, d)),
            Err(_) => {
                self.counters.timer_arm_failed += 1;
                None
            }
        };
        *qp.timer(kind) = entry;
    }

    /// When [`Self::handle_timeout`] should next be called (`None`: no timer armed).
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.next_deadline()
    }

    /// Run the timers due at `now_ns` (a bounded number per call: call again while
    /// [`Self::poll_timeout`] says one is due). Returns whether a timer did anything.
    #[inline]
    pub fn handle_timeout(&mut self, now_ns: u64) -> bool {
        // (the main loop asks far more often than a timer is due: answer that inline)
        if self.timers.is_quiet(now_ns) {
            return false;
        }
        self.handle_due_timers(now_ns)
    }

    /// [`Self::handle_timeout`] when a timer may be due.
    #[inline(never)]
    fn handle_due_timers(&mut self, now_ns: u64) -> bool {
        let mut acted = false;
        for _ in 0..C::QPS.saturating_mul(KINDS).max(8) {
            if self.cmds.room() < TIMER_CMDS {
                self.counters.backpressure += 1;
                break;
            }
            let Some(exp) = self.timers.poll_expired(now_ns) else {
                break;
            };
            self.counters.timeouts_fired += 1;
            let qpn = exp.id.0 / KINDS as u32;
            let kind = (exp.id.0 % KINDS as u32) as usize;
            let Some(qp) = self.qps.as_mut().get_mut(qpn as usize) else {
                continue;
            };
            *qp.timer(kind) = None;
            let was_error = qp.state() == QpState::Error;
            acted |= qp.fire(now_ns, kind, &mut self.cmds);
            if !was_error && qp.state() == QpState::Error {
                self.counters.qp_errors += 1;
            }
            self.mark(qpn);
            self.sync_timers(qpn, now_ns);
        }
        // (firings and the re-arms after them left the next deadline unknown: the main
        // loop asks for it often, so work it out once here)
        self.timers.settle();
        acted
    }

    /// Plane (NIC port) `plane` went down: the datapath takes it out of every QP's sprayer at
    /// once and resends what was in flight on it (one `PlaneDown` order, ahead of anything
    /// else this queues), and every QP retires its EVs there (their EV table writes follow,
    /// off the failover's path).
    pub fn handle_plane_down(&mut self, now_ns: u64, plane: u8) {
        self.counters.plane_downs += 1;
        self.cmds.push(CsrEvent::PlaneDown(PlaneDown::new(plane)));
        for i in 0..self.qps.as_ref().len() {
            if let Some(q) = self.qps.as_mut().get_mut(i).filter(|q| q.is_open()) {
                q.plane_down(plane);
                self.mark(i as u32);
                self.sync_timers(i as u32, now_ns);
            }
        }
    }

    /// Plane `plane` came back: its EVs are probed from `now_ns`.
    pub fn handle_plane_up(&mut self, now_ns: u64, plane: u8) {
        self.counters.plane_ups += 1;
        for i in 0..self.qps.as_ref().len() {
            if let Some(q) = self.qps.as_mut().get_mut(i).filter(|q| q.is_open()) {
                q.plane_up(now_ns, plane);
                self.mark(i as u32);
                self.sync_timers(i as u32, now_ns);
            }
        }
    }

    /// The NIC learned that the route EV `ev` of QP `qpn` names lost a packet of another QP
    /// (the firmware above the QPs knows the route each EV names, e.g. the SRv6 uSIDs it
    /// wrote, and shares a loss between the QPs whose routes have the failed part in common):
    /// the EV retires as after a loss of its own.
    ///
    /// # Errors
    /// [`QpError::UnknownQp`], [`QpError::Ev`].
    pub fn handle_shared_loss(&mut self, now_ns: u64, qpn: u32, ev: u16) -> Result<(), QpError> {
        if self.open_qp(qpn)?.shared_loss(now_ns, ev)? {
            self.mark(qpn);
            self.sync_timers(qpn, now_ns);
        }
        Ok(())
    }

    /// The NIC learned that a probe on the route EV `ev` of QP `qpn` names was answered
    /// (another EV's probe): the EV is `Good` again if it was retired.
    ///
    /// # Errors
    /// [`QpError::UnknownQp`], [`QpError::Ev`].
    pub fn handle_shared_recovery(
        &mut self,
        now_ns: u64,
        qpn: u32,
        ev: u16,
    ) -> Result<(), QpError> {
        if self.open_qp(qpn)?.shared_recovery(ev)? {
            self.mark(qpn);
            self.sync_timers(qpn, now_ns);
        }
        Ok(())
    }

    /// The host's probe `probe_id` of EV `ev` of QP `qpn` (admin `PROBE_EV`): the QP sends
    /// it and reports a `ProbeResult` command when the reply arrives or `timeout_ns` after
    /// `now_ns`, whichever is first.
    ///
    /// # Errors
    /// [`QpError::UnknownQp`]; the QP's refusal ([`QpContext::probe_for_host`]).
    pub fn probe_ev(
        &mut self,
        now_ns: u64,
        qpn: u32,
        ev: u16,
        probe_id: u32,
        timeout_ns: u64,
    ) -> Result<(), QpError> {
        self.open_qp(qpn)?
            .probe_for_host(now_ns, ev, probe_id, timeout_ns)?;
        self.mark(qpn);
        self.sync_timers(qpn, now_ns);
        Ok(())
    }

    /// Controller: deny (`allow == false`) or allow EV `ev` of QP `qpn`.
    ///
    /// # Errors
    /// [`QpError::UnknownQp`], [`QpError::Ev`].
    pub fn set_ev_allowed(
        &mut self,
        now_ns: u64,
        qpn: u32,
        ev: u16,
        allow: bool,
    ) -> Result<(), QpError> {
        self.open_qp(qpn)?.set_ev_allowed(now_ns, ev, allow)?;
        self.mark(qpn);
        self.sync_timers(qpn, now_ns);
        Ok(())
    }
}
