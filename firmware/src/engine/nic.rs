//! [`Engine`]: every QP of one NIC, the registered regions, the timers and the output queues.
//!
//! Sans-IO: inputs are `handle_*(now_ns, ..)` and host calls (`create_qp`, `modify_qp`,
//! `post_send`, `post_recv`, `register_region`), outputs are polled (`poll_transmit`,
//! `poll_completion`, `poll_ev_event`), and [`Engine::poll_timeout`] says when to call
//! [`Engine::handle_timeout`] next. The engine never reads a clock, never touches payload bytes
//! and never allocates; every refused input is an error value and a counter.
//!
//! Capacities (const generics): `Q` QPs, `EVS` EVs per QP over `P` planes, a PSN window of
//! `WIN = 64 * WORDS` PSNs per direction, `SQ` send and `RQ` receive work requests per QP, `R`
//! registered regions, `TM` timers (3 per QP suffice).

use heapless::Deque;
use mrc_abi::wire::{EvxRepr, ProbeRepr};
use mrc_abi::Psn;

use crate::datapath::ack_gen::AckGenConfig;
use crate::datapath::placement::{MemRegion, PlacementTable, RegisterError};
use crate::engine::conn::{
    Qp, QpEvEvent, CTRL_CAP, EV_EVENT_CAP, TIMER_KINDS, T_ACK, T_PROBE, T_RETRY,
};
use crate::engine::packet::{Completion, CompletionError, SendWr, TxBody, TxPacket};
use crate::engine::qp::{transition_allowed, QpAttrs, QpError, QpState};
use crate::engine::requester::{Reorder, Requester, Stall};
use crate::engine::responder::Responder;
use crate::engine::ring::Ring;
use crate::engine::timer_wheel::{TimerHandle, TimerId, TimerWheel};

mod in_place;
use in_place::QpSlot;

#[path = "nic_rx.rs"]
mod rx;

/// Engine-wide configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EngineConfig {
    /// Payload bytes per full packet, `1..=65535`.
    pub mtu_payload: u32,
    /// ACK coalescing of every responder.
    pub ack: AckGenConfig,
    /// Timer wheel tick.
    pub tick_ns: u64,
    /// A SACK hole is a loss once this many later transmissions are acknowledged.
    ///
    /// Default 32, measured with the simulator's default scenario (64 hosts, 4 planes x
    /// 200 Gb/s, 256 EVs per QP, NSCC, `mrc-sim --reorder-tx N`, seed 1): with no failure,
    /// 8 infers 174 870 spurious losses (163 064 duplicate deliveries, 2.7x the ideal
    /// completion), 20 -> 53 909, 24 -> 7 004, 28 -> 1 812, 32 and above -> 0; with the
    /// link failure, 32..=63 find exactly the 112 real losses. Spraying over many paths
    /// reorders by about the packets sent during the paths' delay skew, so 8 (a value for
    /// one path) retires healthy EVs. Keep it below 64: a hole is judged only while it is
    /// inside the ACK's 64-bit SACK bitmap, so 64 or more never infers a loss (every loss
    /// then waits for the ACK timeout: 987 us instead of 221 us in that scenario).
    pub reorder_tx: u32,
    /// ... and once the newest acknowledged transmission left at least this many ns after the
    /// hole's (RACK's reordering window; 0 = the count alone decides). See
    /// [`Reorder`].
    pub reorder_ns: u32,
    /// Test only: forget to retransmit on `TRIMMED_LAST_HOP` (the planted bug the test kit's
    /// checker must catch).
    #[cfg(feature = "testkit")]
    pub planted_bug: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl EngineConfig {
    /// The defaults (what `Default` gives, usable in `const fn`).
    pub const DEFAULT: EngineConfig = EngineConfig {
        mtu_payload: 4096,
        ack: AckGenConfig::DEFAULT,
        tick_ns: 256,
        reorder_tx: 32,
        reorder_ns: 0,
        #[cfg(feature = "testkit")]
        planted_bug: false,
    };
}

/// An [`EngineConfig`] that [`Engine::check`] accepted (for [`Engine::from_checked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedConfig {
    cfg: EngineConfig,
    tick_ns: core::num::NonZeroU64,
}

impl CheckedConfig {
    /// The configuration.
    pub const fn config(&self) -> &EngineConfig {
        &self.cfg
    }
}

/// A bad engine configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EngineError {
    /// `mtu_payload` not in `1..=65535`.
    Mtu(u32),
    /// `tick_ns` is 0.
    ZeroTick,
}

/// Engine counters: every drop and error has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EngineCounters {
    pub rx_packets: u64,
    pub rx_unknown_qp: u64,
    pub rx_qp_not_ready: u64,
    pub rx_duplicate: u64,
    pub rx_trimmed: u64,
    pub rx_out_of_window: u64,
    pub rx_remote_access: u64,
    pub rx_length: u64,
    pub rx_no_recv_buffer: u64,
    pub rx_too_many_wimm: u64,
    pub rx_stale: u64,
    pub rx_missing_evx: u64,
    pub rx_unexpected: u64,
    pub placed: u64,
    pub data_sent: u64,
    pub retransmits_sent: u64,
    pub acks_sent: u64,
    pub nacks_sent: u64,
    pub probes_sent: u64,
    pub probe_replies_sent: u64,
    pub probe_replies_ok: u64,
    /// Control packets dropped because the control queue was full.
    pub ctrl_dropped: u64,
    pub ev_events_dropped: u64,
    pub ev_events: u64,
    pub timer_arm_failed: u64,
    pub timeouts_fired: u64,
    pub qp_errors: u64,
    pub completions: u64,
    pub plane_downs: u64,
    pub plane_ups: u64,
}

impl EngineCounters {
    /// All zero (what `Default` gives, usable in `const fn`).
    pub const ZERO: EngineCounters = EngineCounters {
        rx_packets: 0,
        rx_unknown_qp: 0,
        rx_qp_not_ready: 0,
        rx_duplicate: 0,
        rx_trimmed: 0,
        rx_out_of_window: 0,
        rx_remote_access: 0,
        rx_length: 0,
        rx_no_recv_buffer: 0,
        rx_too_many_wimm: 0,
        rx_stale: 0,
        rx_missing_evx: 0,
        rx_unexpected: 0,
        placed: 0,
        data_sent: 0,
        retransmits_sent: 0,
        acks_sent: 0,
        nacks_sent: 0,
        probes_sent: 0,
        probe_replies_sent: 0,
        probe_replies_ok: 0,
        ctrl_dropped: 0,
        ev_events_dropped: 0,
        ev_events: 0,
        timer_arm_failed: 0,
        timeouts_fired: 0,
        qp_errors: 0,
        completions: 0,
        plane_downs: 0,
        plane_ups: 0,
    };
}

/// Data packets one QP sends in a row before the next QP of the engine gets its turn.
pub const TX_BURST_PKTS: u8 = 4;

/// The engine of one NIC. See the module docs.
pub struct Engine<
    const Q: usize,
    const EVS: usize,
    const P: usize,
    const WIN: usize,
    const WORDS: usize,
    const SQ: usize,
    const RQ: usize,
    const R: usize,
    const TM: usize,
> {
    cfg: EngineConfig,
    qps: [QpSlot<EVS, P, WIN, WORDS, SQ, RQ>; Q],
    regions: PlacementTable<R>,
    ctrl: Ring<TxPacket, CTRL_CAP>,
    ev_events: Deque<QpEvEvent, EV_EVENT_CAP>,
    timers: TimerWheel<TM>,
    tx_rr: usize,
    /// The slot that sent the last data packet and how many it sent in a row.
    tx_rr_slot: usize,
    tx_burst: u8,
    /// QPs with a retransmission queued, oldest first: they send it ahead of the turn (see
    /// [`Engine::poll_transmit`]); `retx_queued` marks the members.
    retx_q: Ring<u32, Q>,
    retx_queued: [bool; Q],
    cq_rr: usize,
    counters: EngineCounters,
}

impl<
        const Q: usize,
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
        const R: usize,
        const TM: usize,
    > Engine<Q, EVS, P, WIN, WORDS, SQ, RQ, R, TM>
{
    const CAPACITY_OK: () = assert!(
        WIN == 64 * WORDS && Q >= 1 && Q < (1 << 22) && TM >= 1,
        "Engine needs WIN == 64 * WORDS, 1 <= Q < 2^22, TM >= 1"
    );

    /// An engine with no QP and no region. ([`Engine::check`] and [`Engine::from_checked`]
    /// build the same engine in a `const` context.)
    ///
    /// # Errors
    /// [`EngineError`] naming the bad field.
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        Ok(Self::from_checked(Self::check(cfg)?))
    }

    /// Check `cfg` for this engine's capacities.
    ///
    /// # Errors
    /// [`EngineError`] naming the bad field.
    pub const fn check(cfg: EngineConfig) -> Result<CheckedConfig, EngineError> {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        if cfg.mtu_payload == 0 || cfg.mtu_payload > u16::MAX as u32 {
            return Err(EngineError::Mtu(cfg.mtu_payload));
        }
        match core::num::NonZeroU64::new(cfg.tick_ns) {
            Some(tick_ns) => Ok(CheckedConfig { cfg, tick_ns }),
            None => Err(EngineError::ZeroTick),
        }
    }

    /// An engine with no QP and no region, for a checked configuration: infallible and a
    /// `const fn`, so a firmware image can build the engine at compile time into a `static`
    /// and never hold an engine-sized temporary on its stack (the NIC image does). Called at
    /// run time it returns the engine by value like any constructor: `slot.write(..)` is not
    /// built in place (measured on riscv32: a 39,856-byte frame for a 21 KiB engine).
    pub const fn from_checked(c: CheckedConfig) -> Self {
        Engine {
            cfg: c.cfg,
            qps: [const { QpSlot::FREE }; Q],
            regions: PlacementTable::new(),
            ctrl: Ring::new(TxPacket::FILL),
            ev_events: Deque::new(),
            timers: TimerWheel::with_tick(c.tick_ns),
            tx_rr: 0,
            tx_rr_slot: 0,
            tx_burst: 0,
            retx_q: Ring::new(0),
            retx_queued: [false; Q],
            cq_rr: 0,
            counters: EngineCounters::ZERO,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// The registered regions (and their placement counters).
    pub fn regions(&self) -> &PlacementTable<R> {
        &self.regions
    }

    /// The QP `qpn`, for inspection.
    pub fn qp(&self, qpn: u32) -> Option<&Qp<EVS, P, WIN, WORDS, SQ, RQ>> {
        self.qps.get(qpn as usize).and_then(QpSlot::get)
    }

    /// The state of QP `qpn`.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qp(qpn).map(|q| q.state)
    }

    fn qp_mut(&mut self, qpn: u32) -> Result<&mut Qp<EVS, P, WIN, WORDS, SQ, RQ>, QpError> {
        self.qps
            .get_mut(qpn as usize)
            .and_then(QpSlot::get_mut)
            .ok_or(QpError::UnknownQp { qpn })
    }

    /// Register a memory region remote peers may write.
    ///
    /// # Errors
    /// [`RegisterError`] (counted by the table).
    pub fn register_region(&mut self, region: MemRegion) -> Result<u16, RegisterError> {
        self.regions.register(region)
    }

    /// Remove a region.
    ///
    /// # Errors
    /// [`RegisterError::UnknownRkey`].
    pub fn deregister_region(&mut self, rkey: u32) -> Result<MemRegion, RegisterError> {
        self.regions.deregister(rkey)
    }

    /// Create a QP in RESET; returns its number.
    ///
    /// # Errors
    /// [`QpError::TableFull`].
    pub fn create_qp(&mut self) -> Result<u32, QpError> {
        let slot = self
            .qps
            .iter()
            .position(QpSlot::is_free)
            .ok_or(QpError::TableFull)?;
        if let Some(s) = self.qps.get_mut(slot) {
            s.open(slot as u32).map_err(QpError::Ev)?;
        }
        Ok(slot as u32)
    }

    /// Destroy a QP (its work requests are dropped without completions).
    ///
    /// # Errors
    /// [`QpError::UnknownQp`].
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), QpError> {
        self.qp_mut(qpn)?;
        self.cancel_timers(qpn);
        if let Some(s) = self.qps.get_mut(qpn as usize) {
            s.close();
        }
        Ok(())
    }

    fn cancel_timers(&mut self, qpn: u32) {
        let Some(qp) = self.qps.get_mut(qpn as usize).and_then(QpSlot::get_mut) else {
            return;
        };
        for t in qp.timers.iter_mut() {
            if let Some((h, _)) = t.take() {
                let _ = self.timers.cancel(h);
            }
        }
    }

    /// Move QP `qpn` to `to` with `attrs` (see [`crate::engine::qp`] for the rules).
    ///
    /// # Errors
    /// [`QpError`] naming what failed; the QP is unchanged.
    pub fn modify_qp(
        &mut self,
        qpn: u32,
        to: QpState,
        attrs: &QpAttrs,
        _now_ns: u64,
    ) -> Result<(), QpError> {
        let from = self.qp_mut(qpn)?.state;
        if !transition_allowed(from, to) {
            return Err(QpError::BadTransition { from, to });
        }
        match to {
            QpState::Reset => {
                self.cancel_timers(qpn);
                // (`qp_mut` above found the QP: the slot exists)
                if let Some(s) = self.qps.get_mut(qpn as usize) {
                    s.open(qpn).map_err(QpError::Ev)?;
                }
            }
            QpState::Init => {
                let p = attrs.init_params(EVS)?;
                self.qp_mut(qpn)?.apply_init(p)?;
                self.qp_mut(qpn)?.state = QpState::Init;
            }
            QpState::Rtr => {
                let p = attrs.rtr_params(WIN, RQ)?;
                let ack = self.cfg.ack;
                let qp = self.qp_mut(qpn)?;
                qp.dest_qpn = p.dest_qpn;
                qp.resp = Some(Responder::new(qpn, &p, ack));
                qp.state = QpState::Rtr;
            }
            QpState::Rts => {
                let p = attrs.rts_params(WIN, SQ)?;
                let mtu = self.cfg.mtu_payload;
                let reorder = Reorder {
                    tx: self.cfg.reorder_tx,
                    ns: self.cfg.reorder_ns,
                };
                let bug = self.planted_bug();
                let qp = self.qp_mut(qpn)?;
                qp.req = Some(Requester::new(&p, mtu, reorder, bug));
                qp.state = QpState::Rts;
            }
            QpState::Error => {
                count!(self.counters.qp_errors);
                self.qp_mut(qpn)?
                    .fail(CompletionError::Flushed, CompletionError::Flushed);
            }
        }
        Ok(())
    }

    #[cfg(feature = "testkit")]
    fn planted_bug(&self) -> bool {
        self.cfg.planted_bug
    }

    #[cfg(not(feature = "testkit"))]
    fn planted_bug(&self) -> bool {
        false
    }

    /// Post a send work request on an RTS QP.
    ///
    /// # Errors
    /// [`QpError::WrongState`], [`QpError::QueueFull`], [`QpError::BadWorkRequest`].
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), QpError> {
        let qp = self.qp_mut(qpn)?;
        match (qp.state, qp.req.as_mut()) {
            (QpState::Rts, Some(r)) => r.post_send(wr),
            (state, _) => Err(QpError::WrongState { state }),
        }
    }

    /// Post a receive buffer (for an incoming immediate) on an RTR or RTS QP.
    ///
    /// # Errors
    /// [`QpError::WrongState`], [`QpError::QueueFull`].
    pub fn post_recv(&mut self, qpn: u32, wr_id: u64) -> Result<(), QpError> {
        let qp = self.qp_mut(qpn)?;
        match (qp.state, qp.resp.as_mut()) {
            (QpState::Rtr | QpState::Rts, Some(r)) => r.post_recv(wr_id),
            (state, _) => Err(QpError::WrongState { state }),
        }
    }

    // ---- timers ----

    /// Whether [`Self::sync_timer`] to `want` leaves a timer armed as `cur` (handle and
    /// deadline) as it is: nothing wanted, or armed no later than wanted (the earlier
    /// deadline stands).
    #[inline]
    fn timer_stands(cur: Option<(TimerHandle, u64)>, want: Option<u64>) -> bool {
        match (cur, want) {
            (_, None) => true,
            (Some((_, at)), Some(d)) => at <= d,
            (None, Some(_)) => false,
        }
    }

    fn sync_timer(&mut self, slot: usize, kind: usize, want: Option<u64>) {
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return;
        };
        let Some(d) = want else { return };
        let cur = qp.timers.get(kind).copied().flatten();
        if let Some((h, _)) = cur {
            if Self::timer_stands(cur, want) {
                return;
            }
            let _ = self.timers.cancel(h);
        }
        let id = TimerId((slot * TIMER_KINDS + kind) as u32);
        let entry = match self.timers.arm(id, d) {
            Ok(h) => Some((h, d)),
            Err(_) => {
                count!(self.counters.timer_arm_failed);
                None
            }
        };
        if let Some(t) = qp.timers.get_mut(kind) {
            *t = entry;
        }
    }

    fn sync_all_timers(&mut self, slot: usize) {
        let Some(qp) = self.qps.get(slot).and_then(QpSlot::get) else {
            return;
        };
        let retry = qp.req.as_ref().and_then(|r| r.deadline_ns());
        let ack = qp.resp.as_ref().and_then(|r| r.ack_deadline_ns());
        let probe = qp.ev.next_probe_deadline();
        self.sync_timer(slot, T_RETRY, retry);
        self.sync_timer(slot, T_ACK, ack);
        self.sync_timer(slot, T_PROBE, probe);
    }

    /// When [`Engine::handle_timeout`] should next be called (`None`: no timer armed).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.next_deadline()
    }

    /// Run every timer due at `now_ns`. Returns whether a timer acted: `false` when no timer
    /// queued a packet or touched a requester (none was due, or a due ACK timer found its
    /// interval already closed by an ACK, a probe timer no probe due), so polls that found
    /// nothing before still would.
    #[inline]
    pub fn handle_timeout(&mut self, now_ns: u64) -> bool {
        !self.timers.is_quiet(now_ns) && self.handle_due_timers(now_ns)
    }

    /// Fires the timers due at `now_ns` (at most a bounded number per call); returns whether
    /// any acted (see [`Self::handle_timeout`]).
    #[inline(never)]
    fn handle_due_timers(&mut self, now_ns: u64) -> bool {
        let mut acted = false;
        for _ in 0..TM.saturating_mul(2).max(8) {
            let Some(exp) = self.timers.poll_expired(now_ns) else {
                return acted;
            };
            count!(self.counters.timeouts_fired);
            let slot = exp.id.0 as usize / TIMER_KINDS;
            let kind = exp.id.0 as usize % TIMER_KINDS;
            let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
                continue;
            };
            if let Some(t) = qp.timers.get_mut(kind) {
                *t = None;
            }
            match kind {
                T_RETRY => {
                    acted = true;
                    self.fire_retry(slot, now_ns);
                    self.note_retransmit(slot);
                    let d = self
                        .qp(slot as u32)
                        .and_then(|q| q.req.as_ref()?.deadline_ns());
                    self.sync_timer(slot, T_RETRY, d);
                }
                T_ACK => {
                    acted |= self.fire_ack(slot, now_ns);
                    self.sync_timer(slot, T_ACK, self.ack_deadline(slot));
                }
                _ => {
                    acted |= self.fire_probe(slot, now_ns);
                    self.sync_timer(slot, T_PROBE, self.probe_deadline(slot));
                }
            }
        }
        acted
    }

    fn fire_retry(&mut self, slot: usize, now_ns: u64) {
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return;
        };
        let gave_up = match qp.req.as_mut() {
            Some(r) if qp.state == QpState::Rts => r.handle_timeout(now_ns, &mut qp.cc).is_err(),
            _ => false,
        };
        if gave_up {
            qp.fail(CompletionError::RetryExceeded, CompletionError::Flushed);
            count!(self.counters.qp_errors);
        }
    }

    /// The ACK timer of QP `slot`: the coalesced ACK, if one is due. Returns whether one was.
    fn fire_ack(&mut self, slot: usize, now_ns: u64) -> bool {
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return false;
        };
        let Some(ev) = qp.resp.as_mut().and_then(|r| r.handle_timeout(now_ns)) else {
            return false;
        };
        let pkt = qp.ack_packet(now_ns, &ev, 0);
        self.push_ctrl(pkt);
        true
    }

    /// The probe timer of QP `slot`: the probes due. Returns whether there were any.
    fn fire_probe(&mut self, slot: usize, now_ns: u64) -> bool {
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return false;
        };
        if !matches!(qp.state, QpState::Rtr | QpState::Rts) {
            return false;
        }
        // At most 8 probes per firing, each straight into the control queue.
        let mut any = false;
        for _ in 0..8 {
            let Some(p) = qp.ev.poll_probe(now_ns) else {
                break;
            };
            any = true;
            let evx = EvxRepr {
                ev_index: p.ev,
                plane: p.plane,
                ev_value: qp.ev_value(p.ev),
            };
            let body = TxBody::Probe(ProbeRepr {
                probe_id: p.probe_id,
                ev_index: p.ev,
                plane: p.plane,
            });
            count!(self.counters.probes_sent);
            if self
                .ctrl
                .push_back(qp.control(now_ns, Psn::new(0), evx, 0, body))
                .is_err()
            {
                count!(self.counters.ctrl_dropped);
            }
        }
        any
    }

    fn push_ctrl(&mut self, pkt: TxPacket) {
        if self.ctrl.push_back(pkt).is_err() {
            count!(self.counters.ctrl_dropped);
        }
    }

    // ---- outputs ----

    /// The next packet to send: control packets first, then retransmissions (QPs in the order
    /// their losses were found), then data from the QPs in turn.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<TxPacket> {
        let mut p = TxPacket::FILL;
        self.poll_transmit_into(now_ns, &mut p).then_some(p)
    }

    /// [`Self::poll_transmit`] writing the packet into `out` (returns whether there was one;
    /// `out` is unchanged otherwise): the common packet is built in place, e.g. in the slot
    /// of a transmit ring, instead of being returned and copied.
    #[inline]
    pub fn poll_transmit_into(&mut self, now_ns: u64, out: &mut TxPacket) -> bool {
        if self.ctrl.is_empty() && self.retx_q.is_empty() && self.poll_new_data(now_ns, out) {
            return true;
        }
        match self.poll_transmit_general(now_ns) {
            Some(p) => {
                *out = p;
                true
            }
            None => false,
        }
    }

    /// [`Self::poll_transmit_into`] called repeatedly: writes up to `out.len()` packets to the
    /// front of `out`, the same packets in the same order (and with the same effects) as that
    /// many calls, and returns how many. Runs of new data packets from one QP are sent with
    /// the QP looked up and the engine's bookkeeping done once per run (e.g. straight into the
    /// free slots of a transmit ring). The slots after those returned are scratch: one may
    /// have been written (a run's first packet is laid out before its EV pick, which can
    /// fail).
    #[inline]
    pub fn poll_transmit_batch(&mut self, now_ns: u64, out: &mut [TxPacket]) -> usize {
        // The most common poll, inline: nothing queued and no QP can send (the first check
        // of the loop below, which then does not repeat it).
        if out.is_empty()
            || (self.ctrl.is_empty()
                && self.retx_q.is_empty()
                && crate::engine::fast_paths::enabled()
                && self.all_idle_counted())
        {
            return 0;
        }
        self.poll_transmit_batch_loop(now_ns, out)
    }

    /// [`Self::poll_transmit_batch`] past its first idle check (which said a QP may send, or
    /// was not made: a control packet or retransmission waits, or the fast paths are off).
    #[inline(never)]
    fn poll_transmit_batch_loop(&mut self, now_ns: u64, out: &mut [TxPacket]) -> usize {
        let mut n = 0;
        // The idle check is skipped until the fast path's first try: the caller made it in
        // the same state, and after control packets a QP usually can send. Skipping it never
        // changes what happens: when no QP can send, the fast path finds nothing, with no
        // effect, and the check below (before the general pass) ends the batch, counting the
        // stalls once, as here.
        let mut checked = true;
        while let Some(rest) = out.get_mut(n..).filter(|r| !r.is_empty()) {
            if self.ctrl.is_empty() && self.retx_q.is_empty() {
                if !checked && crate::engine::fast_paths::enabled() && self.all_idle_counted() {
                    break;
                }
                checked = false;
                let (k, more) = self.poll_new_batch(now_ns, rest);
                n += k;
                if more {
                    continue;
                }
            }
            // The fast path has nothing (or a control packet waits): one packet the general
            // way; the waiting control packets straight from their queue into the slots.
            let fast = crate::engine::fast_paths::enabled();
            if fast && !self.ctrl.is_empty() {
                while let (Some(slot), Some(p)) = (out.get_mut(n), self.ctrl.front()) {
                    *slot = *p;
                    let _ = self.ctrl.pop_front();
                    self.count_ctrl_sent(&slot.body);
                    n += 1;
                }
                continue;
            }
            let Some(slot) = out.get_mut(n) else { break };
            // (with a retransmission queued the general pass goes to it first and drops the
            // QPs that cannot send it: no shortcut then)
            if fast {
                if self.retx_q.is_empty() {
                    if self.all_idle_counted() {
                        break;
                    }
                } else if let Some(p) = self.poll_retransmit(now_ns) {
                    // (what the general pass sends first: no control packet waits here)
                    *slot = p;
                    n += 1;
                    continue;
                }
            }
            match self.poll_transmit_general(now_ns) {
                Some(p) => {
                    *slot = p;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// With no control packet and no retransmission queued ahead of the turn: when no QP can
    /// send (each is not in RTS, has no requester or reports a stall at once: the common end
    /// of a transmit batch), count the
    /// stalls [`Self::poll_transmit_general`] would count on its way to `None`, and return
    /// `true`; `false`, having changed nothing, otherwise. (Its pass over all QPs in turn would
    /// leave the turn where it was.)
    #[inline(always)]
    fn all_idle_counted(&mut self) -> bool {
        let mut stalls = [Stall::Idle; Q];
        for (s, q) in stalls.iter_mut().zip(self.qps.iter()) {
            if let Some(q) = q.get() {
                match q.idle_stall() {
                    Some(stall) => *s = stall,
                    None => return false,
                }
            }
        }
        // (`Idle` counts nothing: only the other stalls look their QP up again)
        for (s, q) in stalls.iter().zip(self.qps.iter_mut()) {
            if *s != Stall::Idle {
                if let Some(q) = q.get_mut() {
                    q.count_stall(*s);
                }
            }
        }
        true
    }

    /// [`Self::poll_new_data`] repeated on the QP at the round-robin position, into the front
    /// of `out` (not empty): returns how many were sent and whether the run stopped for a
    /// reason other than the fast path having nothing (then it may go on). A run ends after
    /// a packet that served a skip-once flag (the EV states are synced before the next pick,
    /// as per packet) and after the packet that armed the retry timer (so timers are armed in
    /// the same order as per packet).
    #[inline]
    fn poll_new_batch(&mut self, now_ns: u64, out: &mut [TxPacket]) -> (usize, bool) {
        if !crate::engine::fast_paths::enabled() {
            return (0, false);
        }
        let slot = self.tx_rr;
        // A QP that cannot start a run sends nothing (`Qp::poll_new_run` returns `(0, false)`
        // having changed nothing): no call.
        let Some(had_deadline) = self
            .qps
            .get(slot)
            .and_then(QpSlot::get)
            .filter(|q| q.state == QpState::Rts)
            .and_then(|q| q.req.as_ref().filter(|r| r.new_run_may_send(&q.cc)))
            .map(|r| r.deadline_ns().is_some())
        else {
            return (0, false);
        };
        // At most what is left of the QP's burst (see `next_tx_slot`) when another QP waits
        // for its turn (none can start to wait during the run: only this QP sends).
        let burst_cap = if self.other_sender(slot).is_none() {
            usize::MAX
        } else if slot == self.tx_rr_slot {
            usize::from(TX_BURST_PKTS.saturating_sub(self.tx_burst).max(1))
        } else {
            usize::from(TX_BURST_PKTS)
        };
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return (0, false);
        };
        // One packet when it arms the retry timer.
        let cap = if had_deadline { burst_cap } else { 1 };
        let out = out.get_mut(..cap.min(out.len())).unwrap_or_default();
        // A run that ends its work request with room left goes on with the next one's at once
        // (`Requester::send_new_run`): between the two the engine would do nothing (a run
        // queues no control packet or retransmission, the turn stays within the burst `cap`
        // allows, the retry timer is armed, no EV state waits for a sync) but check whether
        // every QP is idle, and a run of an idle QP sends nothing and changes nothing (it
        // returns before its first pick), then ends the fast path as that check would.
        let (k, more) = qp.poll_new_run(now_ns, out);
        if k == 0 {
            return (0, false);
        }
        self.counters.data_sent = self.counters.data_sent.wrapping_add(k as u64);
        let ev_changed = qp.skips_pending()
            && qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
        // (the common run changes neither: no call)
        if ev_changed || !had_deadline {
            self.after_data_sent(slot, ev_changed, had_deadline);
        }
        // The turn advances as it would after `k` single packets, in one step.
        self.tx_rr = self.next_tx_slot_after(slot, k);
        (k, more)
    }

    /// Count a control packet leaving.
    #[inline]
    fn count_ctrl_sent(&mut self, body: &TxBody) {
        match body {
            TxBody::Ack(_) => count!(self.counters.acks_sent),
            TxBody::Nack(_) => count!(self.counters.nacks_sent),
            TxBody::ProbeReply(_) => count!(self.counters.probe_replies_sent),
            _ => {}
        }
    }

    /// The general output path: control packets first, then data from the QPs in turn.
    #[inline(never)]
    fn poll_transmit_general(&mut self, now_ns: u64) -> Option<TxPacket> {
        if let Some(p) = self.ctrl.pop_front() {
            self.count_ctrl_sent(&p.body);
            return Some(p);
        }
        if !self.retx_q.is_empty() {
            if let Some(p) = self.poll_retransmit(now_ns) {
                return Some(p);
            }
        }
        for _ in 0..Q {
            let slot = self.tx_rr;
            self.tx_rr = if slot + 1 >= Q { 0 } else { slot + 1 };
            let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
                continue;
            };
            let had_deadline = qp.req.as_ref().and_then(|r| r.deadline_ns()).is_some();
            if let Some(p) = qp.poll_data(now_ns) {
                if p.retransmit {
                    count!(self.counters.retransmits_sent);
                } else {
                    count!(self.counters.data_sent);
                }
                // Sending changes EV states only through served skip-once flags.
                let ev_changed = qp.skips_pending()
                    && qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
                self.after_data_sent(slot, ev_changed, had_deadline);
                self.tx_rr = self.next_tx_slot(slot);
                return Some(p);
            }
        }
        None
    }

    /// A queued retransmission, ahead of the turn (which it leaves as it is): a packet
    /// inferred lost holds its message's completion, while new data of the QP whose turn it
    /// is can wait. QPs whose retransmissions are gone (acknowledged meanwhile, sent in
    /// turn) or cannot leave now (window) leave the queue.
    #[inline]
    fn poll_retransmit(&mut self, now_ns: u64) -> Option<TxPacket> {
        while let Some(&slot) = self.retx_q.front() {
            let slot = slot as usize;
            if let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) {
                if qp.req.as_ref().is_some_and(|r| r.has_retransmit()) {
                    let had_deadline = qp.req.as_ref().and_then(|r| r.deadline_ns()).is_some();
                    if let Some(p) = qp.poll_retx(now_ns) {
                        if p.retransmit {
                            count!(self.counters.retransmits_sent);
                        } else {
                            count!(self.counters.data_sent);
                        }
                        let more = qp.req.as_ref().is_some_and(|r| r.has_retransmit());
                        let ev_changed = qp.skips_pending()
                            && qp
                                .sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
                        // (the common retransmission changes neither: no call)
                        if ev_changed || !had_deadline {
                            self.after_data_sent(slot, ev_changed, had_deadline);
                        }
                        if !more {
                            self.retx_q.pop_front();
                            if let Some(m) = self.retx_queued.get_mut(slot) {
                                *m = false;
                            }
                        }
                        return Some(p);
                    }
                }
            }
            self.retx_q.pop_front();
            if let Some(m) = self.retx_queued.get_mut(slot) {
                *m = false;
            }
        }
        None
    }

    /// After an input to QP `slot`: queue it for [`Self::poll_retransmit`] when it has a
    /// retransmission waiting.
    pub(super) fn note_retransmit(&mut self, slot: usize) {
        let waiting = self
            .qps
            .get(slot)
            .and_then(QpSlot::get)
            .and_then(|q| q.req.as_ref())
            .is_some_and(|r| r.has_retransmit());
        if let Some(m) = self.retx_queued.get_mut(slot) {
            if waiting && !*m && self.retx_q.push_back(slot as u32).is_ok() {
                *m = true;
            }
        }
    }

    /// Whether a retransmission waits to go ahead of the turn: the NIC polls this engine
    /// before the others (see [`Self::poll_transmit`]).
    #[inline]
    pub fn has_retransmit(&self) -> bool {
        !self.retx_q.is_empty()
    }

    /// The common output: no control packet waits and the QP at the round-robin position
    /// sends its next new packet (the first step of the loop in [`Self::poll_transmit`], which
    /// then stays on that QP), written into `out`. `false`, having changed nothing, otherwise.
    #[inline]
    fn poll_new_data(&mut self, now_ns: u64, out: &mut TxPacket) -> bool {
        if !crate::engine::fast_paths::enabled() {
            return false;
        }
        let slot = self.tx_rr;
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return false;
        };
        if qp.state != QpState::Rts {
            return false;
        }
        let Some(had_deadline) = qp.req.as_ref().map(|r| r.deadline_ns().is_some()) else {
            return false;
        };
        if !qp.poll_new_fast(now_ns, out) {
            return false;
        }
        count!(self.counters.data_sent);
        let ev_changed = qp.skips_pending()
            && qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
        self.after_data_sent(slot, ev_changed, had_deadline);
        self.tx_rr = self.next_tx_slot(slot);
        true
    }

    /// The QP whose turn follows `slot`'s after it sent a data packet: `slot` again until it
    /// sent [`TX_BURST_PKTS`] in a row, then the next slot whose QP has something to send. Without the bound a QP whose window
    /// outgrows its share of the ports sends without end and the other QPs of the engine
    /// starve (measured on the 64-host all-to-all: a QP with an open window and queued work
    /// sent nothing for 80 us).
    #[inline]
    fn next_tx_slot(&mut self, slot: usize) -> usize {
        if slot == self.tx_rr_slot {
            self.tx_burst = self.tx_burst.saturating_add(1);
        } else {
            self.tx_rr_slot = slot;
            self.tx_burst = 1;
        }
        if self.tx_burst < TX_BURST_PKTS {
            return slot;
        }
        self.tx_burst = 0;
        // The next QP with something to send; `slot` again when there is none (a poll of the
        // idle ones in between would change nothing and come back to `slot`).
        self.other_sender(slot).unwrap_or(slot)
    }

    /// [`Self::next_tx_slot`] called `k >= 1` times on `slot` (as after a run of `k` packets),
    /// in one step: the burst count goes round modulo [`TX_BURST_PKTS`] and only the last call's
    /// result counts (the turn moves on when that call ends a burst; the calls before it have
    /// no other effect).
    #[inline(always)]
    fn next_tx_slot_after(&mut self, slot: usize, k: usize) -> usize {
        if k == 0 {
            return self.tx_rr;
        }
        let burst = usize::from(TX_BURST_PKTS.max(1));
        // (a count at or above the burst ends it at the first call, as from burst - 1)
        let before = if slot == self.tx_rr_slot {
            usize::from(self.tx_burst).min(burst - 1)
        } else {
            0
        };
        self.tx_rr_slot = slot;
        // < burst <= u8::MAX
        self.tx_burst = ((before + k % burst) % burst) as u8;
        if self.tx_burst != 0 {
            return slot;
        }
        self.other_sender(slot).unwrap_or(slot)
    }

    /// The first slot after `slot` (in turn order, not `slot` itself) whose QP wants to send.
    #[inline]
    fn other_sender(&self, slot: usize) -> Option<usize> {
        (1..Q).map(|d| (slot + d) % Q).find(|&s| {
            self.qps
                .get(s)
                .and_then(QpSlot::get)
                .is_some_and(|q| q.wants_to_send())
        })
    }

    /// Timer bookkeeping after QP `slot` sent a data packet: the probe timer when its EV states
    /// changed (`ev_changed`), the retry timer only when none was armed before
    /// (`had_deadline`).
    #[inline]
    fn after_data_sent(&mut self, slot: usize, ev_changed: bool, had_deadline: bool) {
        if ev_changed {
            self.sync_timer(slot, T_PROBE, self.probe_deadline(slot));
        }
        if !had_deadline {
            let d = self
                .qp(slot as u32)
                .and_then(|q| q.req.as_ref()?.deadline_ns());
            self.sync_timer(slot, T_RETRY, d);
        }
    }

    fn probe_deadline(&self, slot: usize) -> Option<u64> {
        self.qp(slot as u32)
            .and_then(|q| q.ev.next_probe_deadline())
    }

    /// The next completion (per QP in posting order; QPs in turn).
    #[inline(always)]
    pub fn poll_completion(&mut self) -> Option<Completion> {
        // Most polls find nothing: a look that changes nothing first (the general pass below
        // would come back to the same `cq_rr`).
        let waits = self.qps.iter().filter_map(QpSlot::get).any(|q| {
            q.req.as_ref().is_some_and(|r| r.completion_waits())
                || q.resp.as_ref().is_some_and(|r| r.completion_waits())
        });
        if !waits && crate::engine::fast_paths::enabled() {
            return None;
        }
        // The common completion: the requester of the QP at `cq_rr` has one (what the general
        // pass returns first; when this finds none it changed nothing the general pass would
        // not: a request retired unsignaled is retired there the same way).
        if crate::engine::fast_paths::enabled() {
            if let Some(qp) = self.qps.get_mut(self.cq_rr).and_then(QpSlot::get_mut) {
                let qpn = qp.qpn;
                if let Some(c) = qp.req.as_mut().and_then(|r| r.poll_completion(qpn)) {
                    count!(self.counters.completions);
                    return Some(c);
                }
            }
        }
        self.poll_completion_general()
    }

    /// [`Self::poll_completion`] past its quick look.
    #[inline(never)]
    fn poll_completion_general(&mut self) -> Option<Completion> {
        for _ in 0..Q {
            let slot = self.cq_rr;
            let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
                self.cq_rr = if slot + 1 >= Q { 0 } else { slot + 1 };
                continue;
            };
            let qpn = qp.qpn;
            let c = qp
                .req
                .as_mut()
                .and_then(|r| r.poll_completion(qpn))
                .or_else(|| qp.resp.as_mut().and_then(|r| r.poll_completion(qpn)));
            if let Some(c) = c {
                count!(self.counters.completions);
                return Some(c);
            }
            self.cq_rr = if slot + 1 >= Q { 0 } else { slot + 1 };
        }
        None
    }

    /// The next EV state change of any QP.
    pub fn poll_ev_event(&mut self) -> Option<QpEvEvent> {
        let e = self.ev_events.pop_front()?;
        count!(self.counters.ev_events);
        Some(e)
    }

    // ---- inputs ----

    /// Plane (NIC port) `plane` went down: every QP retires its EVs there in one step and
    /// resends what was in flight on it.
    pub fn handle_plane_down(&mut self, now_ns: u64, plane: u8) {
        let _ = now_ns;
        count!(self.counters.plane_downs);
        for slot in 0..Q {
            let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
                continue;
            };
            if qp.init.is_none() {
                continue;
            }
            let _ = qp.ev.plane_down(plane);
            if let Some(r) = qp.req.as_mut() {
                r.plane_down(plane);
            }
            qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
            self.sync_all_timers(slot);
            self.note_retransmit(slot);
        }
    }

    /// Plane `plane` came back: its EVs are probed from `now_ns`.
    pub fn handle_plane_up(&mut self, now_ns: u64, plane: u8) {
        count!(self.counters.plane_ups);
        for slot in 0..Q {
            let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
                continue;
            };
            if qp.init.is_none() {
                continue;
            }
            let _ = qp.ev.plane_up(plane, now_ns);
            qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
            self.sync_all_timers(slot);
        }
    }

    /// The NIC learned that the route EV `ev` of QP `qpn` names lost a packet of another QP
    /// (the firmware above the QPs knows the route each EV names, e.g. the SRv6 uSIDs it
    /// wrote, and shares a loss between the QPs whose routes have the failed part in common):
    /// the EV retires as after a loss of its own ([`EvTable::handle_shared_loss`]).
    ///
    /// # Errors
    /// [`QpError::UnknownQp`], [`QpError::Ev`].
    ///
    /// [`EvTable::handle_shared_loss`]: crate::engine::ev_state::EvTable::handle_shared_loss
    pub fn handle_shared_loss(&mut self, now_ns: u64, qpn: u32, ev: u16) -> Result<(), QpError> {
        let qp = self
            .qps
            .get_mut(qpn as usize)
            .and_then(QpSlot::get_mut)
            .ok_or(QpError::UnknownQp { qpn })?;
        if !qp.ev.handle_shared_loss(ev, now_ns).map_err(QpError::Ev)? {
            return Ok(());
        }
        qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
        self.sync_all_timers(qpn as usize);
        Ok(())
    }

    /// The NIC learned that a probe on the route EV `ev` of QP `qpn` names was answered
    /// (another EV's probe, of this QP or another): the EV is `Good` again if it was retired
    /// ([`EvTable::handle_shared_recovery`]).
    ///
    /// # Errors
    /// [`QpError::UnknownQp`], [`QpError::Ev`].
    ///
    /// [`EvTable::handle_shared_recovery`]: crate::engine::ev_state::EvTable::handle_shared_recovery
    pub fn handle_shared_recovery(&mut self, qpn: u32, ev: u16) -> Result<(), QpError> {
        let qp = self
            .qps
            .get_mut(qpn as usize)
            .and_then(QpSlot::get_mut)
            .ok_or(QpError::UnknownQp { qpn })?;
        if !qp.ev.handle_shared_recovery(ev).map_err(QpError::Ev)? {
            return Ok(());
        }
        qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
        self.sync_all_timers(qpn as usize);
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
        let qp = self.qp_mut(qpn)?;
        if allow {
            qp.ev.allow(ev, now_ns).map_err(QpError::Ev)?;
        } else {
            qp.ev.deny(ev).map_err(QpError::Ev)?;
        }
        let qp = self.qps.get_mut(qpn as usize).and_then(QpSlot::get_mut);
        if let Some(qp) = qp {
            qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped);
        }
        self.sync_all_timers(qpn as usize);
        Ok(())
    }
}

/// Room each QP needs in the timer wheel.
pub const TIMERS_PER_QP: usize = TIMER_KINDS;
