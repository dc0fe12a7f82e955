//! The [`EvTable`] operations.

use super::*;

/// Feedback carried by one coalesced ACK for one EV.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AckFeedback {
    /// Data packets on this EV the ACK covers.
    pub delivered: u32,
    /// Whether any of them was CE-marked.
    pub ecn_marked: bool,
    /// RTT sample from the echoed timestamp (0 = none).
    pub rtt_ns: u64,
}

impl<const N: usize> EvTable<N> {
    const CAPACITY_OK: () = assert!(N <= MAX_EVS, "EvTable holds at most 256 EVs");

    /// A table with every EV `Good`, EV `i` on plane `i % planes`. (The engine's
    /// `EvTable::reset` makes the same table where one already lives, without a table-sized
    /// temporary.)
    ///
    /// # Errors
    /// [`EvError`] naming the bad configuration field.
    pub fn new(cfg: EvConfig) -> Result<Self, EvError> {
        let sprt = Self::check(&cfg)?;
        let mut t = EvTable {
            cfg,
            sprt,
            evs: [Ev::blank(&cfg); N],
            usable: EvMask::default(),
            bad: EvMask::default(),
            probe_best: None,
            good_per_plane: [0; MAX_PLANES],
            qp_outcomes: 0,
            qp_losses: 0,
            baseline_shift: 0,
            active: cfg.evs,
            planes_down: 0,
            next_probe_id: 0,
            events: Deque::new(),
            updated: 0,
            resync: None,
            counters: EvCounters::default(),
        };
        t.place_evs();
        Ok(t)
    }

    /// What [`Self::new`] refuses, checked before anything is built; the gray-loss test's
    /// configuration.
    pub(in crate::engine) fn check(cfg: &EvConfig) -> Result<SprtConfig, EvError> {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        if usize::from(cfg.evs) > N {
            return Err(EvError::TooManyEvs {
                evs: cfg.evs,
                capacity: N as u16,
            });
        }
        if cfg.planes == 0 || usize::from(cfg.planes) > MAX_PLANES {
            return Err(EvError::PlaneCount(cfg.planes));
        }
        if cfg.min_active > cfg.evs {
            return Err(EvError::MinActive {
                min_active: cfg.min_active,
                evs: cfg.evs,
            });
        }
        if cfg.probe_base_ns == 0 || cfg.probe_cap_ns < cfg.probe_base_ns {
            return Err(EvError::ProbeInterval {
                base_ns: cfg.probe_base_ns,
                cap_ns: cfg.probe_cap_ns,
            });
        }
        for q in [
            cfg.ecn_gain_q16,
            cfg.ecn_skip_threshold_q16,
            cfg.rtt_gain_q16,
        ] {
            if q == 0 || q > Q16_ONE {
                return Err(EvError::Q16Range(q));
            }
        }
        SprtConfig::new(cfg.sprt).map_err(EvError::Sprt)
    }

    /// Forget everything and start over with `cfg`, in place (no table-sized temporary: the
    /// NIC core's stack is small): what [`Self::new`] builds.
    ///
    /// # Errors
    /// [`EvError`] naming the bad configuration field; the table is unchanged.
    pub fn reset(&mut self, cfg: EvConfig) -> Result<(), EvError> {
        let sprt = Self::check(&cfg)?;
        self.cfg = cfg;
        self.sprt = sprt;
        let blank = Ev::blank(&cfg);
        for e in self.evs.iter_mut() {
            *e = blank;
        }
        self.usable = EvMask::default();
        self.bad = EvMask::default();
        self.probe_best = None;
        self.good_per_plane = [0; MAX_PLANES];
        self.qp_outcomes = 0;
        self.qp_losses = 0;
        self.baseline_shift = 0;
        self.active = cfg.evs;
        self.planes_down = 0;
        self.next_probe_id = 0;
        self.events.clear();
        self.updated = 0;
        self.resync = None;
        self.counters = EvCounters::default();
        self.place_evs();
        Ok(())
    }

    /// The last step of building a table whose entries are all blank: EV `i` on plane
    /// `i % planes`, the configured EVs usable and counted per plane.
    pub(in crate::engine) fn place_evs(&mut self) {
        let planes = usize::from(self.cfg.planes.max(1));
        for (i, ev) in self
            .evs
            .iter_mut()
            .enumerate()
            .take(usize::from(self.cfg.evs))
        {
            ev.plane = (i % planes) as u8;
            self.usable.set(i, true);
            if let Some(c) = self.good_per_plane.get_mut(usize::from(ev.plane)) {
                *c += 1;
            }
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EvConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> EvCounters {
        self.counters
    }

    /// `Good` + `Skip` EVs.
    pub fn active(&self) -> u16 {
        self.active
    }

    /// The state of `ev`.
    ///
    /// # Errors
    /// [`EvError::BadEv`].
    pub fn state(&self, ev: u16) -> Result<EvState, EvError> {
        self.stats(ev).map(|s| s.state)
    }

    /// Statistics of `ev`.
    ///
    /// # Errors
    /// [`EvError::BadEv`].
    pub fn stats(&self, ev: u16) -> Result<EvStats, EvError> {
        let e = self.get(ev).ok_or(EvError::BadEv {
            ev,
            evs: self.cfg.evs,
        })?;
        Ok(EvStats {
            state: e.state,
            plane: e.plane,
            ecn_q16: e.ecn_q16,
            rtt_avg_ns: e.rtt_avg_ns,
            delivered: e.delivered.saturating_add(u64::from(e.sprt_pending())),
            lost: e.lost,
            trimmed: e.trimmed,
        })
    }

    /// Whether a state change waits for [`Self::poll_event`].
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next state change, oldest first.
    pub fn poll_event(&mut self) -> Option<EvEvent> {
        self.updated = self.updated.saturating_sub(1);
        self.events.pop_front()
    }

    /// The oldest state change [`Self::poll_update`] handed out, taken off the queue (`None`
    /// when there is none: the changes after it wait for their update first).
    pub fn poll_updated_event(&mut self) -> Option<EvEvent> {
        if self.updated == 0 {
            return None;
        }
        self.poll_event()
    }

    /// The next EV whose state the datapath sprayer's copy of the table is to take, with
    /// that state: the oldest state change not handed out by this call yet (it stays queued
    /// for [`Self::poll_event`], so a burst of changes can all reach the sprayer before any
    /// is reported to the host); then, once every queued change is handed out, if an event
    /// was dropped since the last sweep, every EV in turn with its current state. A dropped
    /// event is a change the queue cannot hand out: without the sweep the sprayer would keep
    /// the EV's old state for good (an EV back to `Good` it never uses again, a QP whose
    /// every EV came back but sends nothing).
    pub fn poll_update(&mut self) -> Option<(u16, EvState)> {
        let i = usize::from(self.updated);
        let (a, b) = self.events.as_slices();
        if let Some(e) = a.get(i).or_else(|| b.get(i - a.len())) {
            let e = (e.ev, e.new);
            self.updated += 1;
            return Some(e);
        }
        let ev = self.resync?;
        let next = ev + 1;
        self.resync = (next < self.cfg.evs).then_some(next);
        let e = self.evs.get(usize::from(ev))?;
        Some((ev, e.state))
    }

    /// Whether an EV waits for [`Self::poll_update`].
    #[inline]
    pub fn has_updates(&self) -> bool {
        usize::from(self.updated) < self.events.len() || self.resync.is_some()
    }

    /// The `Good` EVs: what the datapath sprayer table is written from.
    pub fn usable_mask(&self) -> EvMask {
        self.usable
    }

    /// Call `f(ev, plane)` for every `Good` EV in index order.
    pub fn for_each_usable(&self, mut f: impl FnMut(u16, u8)) {
        for (i, e) in self.evs.iter().enumerate().take(usize::from(self.cfg.evs)) {
            if e.state == EvState::Good {
                f(i as u16, e.plane);
            }
        }
    }

    /// `Good` EVs on `plane` (0 for a plane out of range).
    pub fn plane_capacity(&self, plane: u8) -> u16 {
        self.good_per_plane
            .get(usize::from(plane))
            .copied()
            .unwrap_or(0)
    }

    /// `Good` EVs on every plane.
    pub fn plane_capacities(&self) -> [u16; MAX_PLANES] {
        self.good_per_plane
    }

    /// Whether `plane` is down.
    pub fn plane_is_down(&self, plane: u8) -> bool {
        plane < 8 && self.planes_down & (1 << plane) != 0
    }

    /// Move `ev` to `plane` (when the EV profile maps EVs to planes differently).
    ///
    /// # Errors
    /// [`EvError::BadEv`] or [`EvError::BadPlane`].
    pub fn set_plane(&mut self, ev: u16, plane: u8) -> Result<(), EvError> {
        let i = self.index(ev)?;
        self.check_plane(plane)?;
        let old = self.evs[i].plane;
        if self.evs[i].state == EvState::Good {
            self.bump_plane(old, false);
            self.bump_plane(plane, true);
        }
        self.evs[i].plane = plane;
        self.probe_changed(i);
        Ok(())
    }

    /// A coalesced ACK reported feedback for packets sent on `ev`.
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    #[inline]
    pub fn handle_ack(&mut self, ev: u16, now_ns: u64, fb: AckFeedback) -> Result<(), EvError> {
        let i = self.index(ev)?;
        let e = &mut self.evs[i];
        // (an unmarked ACK leaves a zero average at zero, the average of 0 and 0: no step)
        if fb.ecn_marked || e.ecn_q16 != 0 {
            let sample = if fb.ecn_marked { u64::from(Q16_ONE) } else { 0 };
            e.ecn_q16 = ewma_q16(u64::from(e.ecn_q16), sample, self.cfg.ecn_gain_q16) as u32;
        }
        if fb.rtt_ns != 0 {
            e.rtt_avg_ns = if e.rtt_avg_ns == 0 {
                fb.rtt_ns
            } else {
                // (`check` validated the gain: at most 1.0)
                ewma_q16_unit(e.rtt_avg_ns, fb.rtt_ns, self.cfg.rtt_gain_q16)
            };
        }
        // A batch of 0 counts nothing and changes nothing in the test (its ratio is always
        // strictly between the bounds).
        let verdict = if fb.delivered == 0 {
            SprtVerdict::Continue
        } else {
            let d = u64::from(fb.delivered);
            self.qp_outcomes = self.qp_outcomes.saturating_add(d);
            e.delivered = e.delivered.saturating_add(d);
            e.sync_sprt(&self.sprt);
            e.sprt.observe(&self.sprt, fb.delivered, 0)
        };
        let (state, ecn) = (e.state, e.ecn_q16);
        if verdict == SprtVerdict::Gray {
            self.retire_gray(i, now_ns);
        } else if state == EvState::Good && ecn >= self.cfg.ecn_skip_threshold_q16 {
            self.counters.ecn_skips += 1;
            self.set_state(i, EvState::Skip, EvReason::EcnPersistent);
        }
        Ok(())
    }

    /// One packet last sent on `ev` was acknowledged (cumulatively or by a SACK bit): a
    /// delivery for its own EV's counters and gray-loss test. The requester calls this per
    /// newly acknowledged PSN, since it alone knows which EV each PSN took; a delivery only
    /// lowers the gray-loss evidence, so it never changes the EV's state.
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    #[inline]
    pub fn handle_delivery(&mut self, ev: u16) -> Result<(), EvError> {
        let i = self.index(ev)?;
        self.evs[i].note_sprt_delivery(&self.sprt);
        self.note_qp_deliveries(1);
        Ok(())
    }

    /// `n` packets last sent on `ev` were acknowledged (the datapath counts them per EV and
    /// reports the count with the EV's next loss or NACK, or on its own): deliveries for the
    /// EV's counters and gray-loss test, fed before what comes next. Not counted QP-wide (see
    /// [`Self::note_qp_deliveries`]).
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn credit_deliveries(&mut self, ev: u16, n: u64) -> Result<(), EvError> {
        let i = self.index(ev)?;
        let e = &mut self.evs[i];
        e.sync_sprt(&self.sprt);
        e.sprt.observe_each_delivered(&self.sprt, n);
        e.delivered = e.delivered.saturating_add(n);
        Ok(())
    }

    /// `n` deliveries of the QP (any EV), for the QP-wide loss rate.
    #[inline]
    pub fn note_qp_deliveries(&mut self, n: u64) {
        self.qp_outcomes = self.qp_outcomes.saturating_add(n);
    }

    /// A packet sent on `ev` was trimmed: counted, never retires (and proves the path delivers).
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn handle_trim(&mut self, ev: u16) -> Result<(), EvError> {
        let i = self.index(ev)?;
        self.qp_outcomes = self.qp_outcomes.saturating_add(1);
        let e = &mut self.evs[i];
        e.trimmed = e.trimmed.saturating_add(1);
        // A trimmed header reached the receiver: a delivery for the gray-loss test (fed at
        // once, after the pending ones: the same as one more pending, not counted delivered).
        e.sync_sprt(&self.sprt);
        e.sprt.observe_each_delivered(&self.sprt, 1);
        Ok(())
    }

    /// A packet sent on `ev` was lost without being trimmed.
    ///
    /// The gray-loss test judges the EV against the **QP's own loss rate** `q` (over about the
    /// last [`BASELINE_WINDOW`] outcomes of all its EVs): its H0 is `p0 << k`, the smallest
    /// such rate at or above `q` (at most 1/8), and its H1 `max(p1, 4 * H0)`. While the QP
    /// loses no more than `p0` this is the configured test; when loss is spread over all EVs
    /// (uniform random loss, a lossy shared link) an EV losing at the QP's rate is not gray,
    /// and only one losing about 4x more than the rest is. Without this, 1 % uniform loss
    /// (p1 = 1 %) would gray-retire EV after EV to the probe cap until `min_active` held the
    /// rest. The rate includes
    /// the judged EV: with MRC's 128-256 EVs per QP one gray EV barely moves it. Immediate
    /// retirement on an untrimmed loss (MRC, `immediate_retire`) is unchanged: a dead or
    /// blackholed EV still leaves at its first loss.
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn handle_loss(&mut self, ev: u16, now_ns: u64) -> Result<(), EvError> {
        let i = self.index(ev)?;
        self.qp_outcomes = self.qp_outcomes.saturating_add(1);
        self.qp_losses = self.qp_losses.saturating_add(1);
        self.update_baseline();
        let e = &mut self.evs[i];
        e.lost = e.lost.saturating_add(1);
        e.sync_sprt(&self.sprt);
        let verdict = e.sprt.observe(&self.sprt, 0, 1);
        let state = e.state;
        if !matches!(state, EvState::Good | EvState::Skip) {
            self.counters.losses_on_retired += 1;
            return Ok(());
        }
        if verdict == SprtVerdict::Gray {
            self.retire_gray(i, now_ns);
        } else if self.cfg.immediate_retire {
            self.retire(i, now_ns, EvReason::Loss);
        }
        Ok(())
    }

    /// Another QP lost a packet (untrimmed) on a route `ev` shares: a `Good` or `Skip` EV is
    /// retired as by its own loss (reason [`EvReason::SharedLoss`]; `min_active` guards it, then
    /// it is skipped once), and probed back. Nothing is counted on the EV: the loss was not
    /// its own. Returns whether the state changed.
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn handle_shared_loss(&mut self, ev: u16, now_ns: u64) -> Result<bool, EvError> {
        let i = self.index(ev)?;
        let old = self.evs[i].state;
        if !matches!(old, EvState::Good | EvState::Skip) {
            return Ok(false);
        }
        // Its route is probed by the EV whose loss was shared (a reply there comes back as
        // [`Self::handle_shared_recovery`]): its own probes start later.
        let e = &mut self.evs[i];
        e.probe_interval_ns = self
            .cfg
            .probe_base_ns
            .saturating_mul(SHARED_PROBE_FACTOR)
            .min(self.cfg.probe_cap_ns)
            .max(e.probe_interval_ns);
        self.retire(i, now_ns, EvReason::SharedLoss);
        Ok(self.evs[i].state != old)
    }

    /// A probe on a route `ev` shares was answered (another EV's, of this QP or another): an
    /// `AssumedBad` EV (not on a plane that is down) is `Good` again (reason
    /// [`EvReason::SharedRecovery`]), its probe backoff reset. Returns whether the state
    /// changed.
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn handle_shared_recovery(&mut self, ev: u16) -> Result<bool, EvError> {
        let i = self.index(ev)?;
        let e = self.evs[i];
        if e.state != EvState::AssumedBad || self.plane_is_down(e.plane) {
            return Ok(false);
        }
        let e = &mut self.evs[i];
        e.probe_id = None;
        e.probe_interval_ns = self.cfg.probe_base_ns;
        e.ecn_q16 = 0;
        self.set_state(i, EvState::Good, EvReason::SharedRecovery);
        Ok(true)
    }

    /// The sprayer passed over every `Skip` EV once: they become `Good`.
    pub fn release_skips(&mut self) {
        for i in 0..usize::from(self.cfg.evs).min(N) {
            if self.evs[i].state == EvState::Skip {
                self.set_state(i, EvState::Good, EvReason::SkipServed);
            }
        }
    }

    /// The sprayer passed over `ev` once: `Skip` becomes `Good` (other states unchanged).
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn handle_skip_served(&mut self, ev: u16) -> Result<(), EvError> {
        let i = self.index(ev)?;
        if self.evs[i].state == EvState::Skip {
            self.set_state(i, EvState::Good, EvReason::SkipServed);
        }
        Ok(())
    }

    /// The next probe due at `now_ns`: the `AssumedBad` EV on a live plane whose probe time is
    /// earliest (ties: lowest index). Its next probe is scheduled after a doubled interval.
    pub fn poll_probe(&mut self, now_ns: u64) -> Option<ProbeRequest> {
        let i = self.earliest_probe().filter(|&(_, at)| at <= now_ns)?.0;
        let id = self.next_probe_id;
        // (never with the host probes' bit: their replies are told apart by it)
        self.next_probe_id =
            self.next_probe_id.wrapping_add(1) & !crate::engine::host_probe::HOST_PROBE;
        let e = &mut self.evs[i];
        e.probe_id = Some(id);
        e.probe_interval_ns = e
            .probe_interval_ns
            .saturating_mul(2)
            .min(self.cfg.probe_cap_ns);
        e.next_probe_ns = now_ns.saturating_add(e.probe_interval_ns);
        let plane = e.plane;
        self.probe_changed(i);
        self.counters.probes_sent += 1;
        Some(ProbeRequest {
            ev: i as u16,
            plane,
            probe_id: id,
        })
    }

    /// When [`EvTable::poll_probe`] next returns a probe (`None`: nothing to probe).
    pub fn next_probe_deadline(&self) -> Option<u64> {
        self.earliest_probe().map(|(_, at)| at)
    }

    /// The reply to probe `probe_id` on `ev` arrived: the EV is `Good` again.
    ///
    /// # Errors
    /// [`EvError::BadEv`]; [`EvError::StaleProbe`] (counted) when the EV is not `AssumedBad`,
    /// its plane is down, or the id is not its latest probe.
    pub fn handle_probe_reply(
        &mut self,
        ev: u16,
        probe_id: u32,
        rtt_ns: u64,
    ) -> Result<(), EvError> {
        let i = self.index(ev)?;
        let e = self.evs[i];
        let down = self.plane_is_down(e.plane);
        if e.state != EvState::AssumedBad || down || e.probe_id != Some(probe_id) {
            self.counters.stale_probe_replies += 1;
            return Err(EvError::StaleProbe { ev, probe_id });
        }
        let e = &mut self.evs[i];
        e.probe_id = None;
        e.probe_interval_ns = self.cfg.probe_base_ns;
        e.ecn_q16 = 0;
        if rtt_ns != 0 {
            e.rtt_avg_ns = rtt_ns;
        }
        self.set_state(i, EvState::Good, EvReason::ProbeReply);
        Ok(())
    }

    /// Plane `plane` went down: every EV on it that is not `Denied` is retired at once (no
    /// guard) and not probed until [`EvTable::plane_up`]. Returns how many were retired.
    ///
    /// # Errors
    /// [`EvError::BadPlane`] (counted).
    pub fn plane_down(&mut self, plane: u8) -> Result<u16, EvError> {
        self.check_plane(plane)?;
        self.planes_down |= 1 << plane;
        let mut n = 0;
        for i in 0..usize::from(self.cfg.evs).min(N) {
            let e = &mut self.evs[i];
            if e.plane != plane {
                continue;
            }
            e.probe_id = None;
            if matches!(e.state, EvState::Good | EvState::Skip) {
                self.set_state(i, EvState::AssumedBad, EvReason::PlaneDown);
                n += 1;
            }
        }
        self.probe_best = self.scan_earliest_probe();
        Ok(n)
    }

    /// Plane `plane` came back: its `AssumedBad` EVs are probed from `now_ns`, base interval.
    ///
    /// # Errors
    /// [`EvError::BadPlane`] (counted).
    pub fn plane_up(&mut self, plane: u8, now_ns: u64) -> Result<(), EvError> {
        self.check_plane(plane)?;
        self.planes_down &= !(1 << plane);
        let base = self.cfg.probe_base_ns;
        for e in self.evs.iter_mut().take(usize::from(self.cfg.evs)) {
            if e.plane == plane && e.state == EvState::AssumedBad {
                e.next_probe_ns = now_ns;
                e.probe_interval_ns = base;
                e.probe_id = None;
            }
        }
        self.probe_best = self.scan_earliest_probe();
        Ok(())
    }

    /// The controller denies `ev`: `Denied` until [`EvTable::allow`].
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn deny(&mut self, ev: u16) -> Result<(), EvError> {
        let i = self.index(ev)?;
        self.evs[i].probe_id = None;
        self.set_state(i, EvState::Denied, EvReason::ControllerDeny);
        Ok(())
    }

    /// The controller allows `ev` again: `Good` if its plane is up, else `AssumedBad` (probed
    /// when the plane comes back). No effect on an EV that is not `Denied`.
    ///
    /// # Errors
    /// [`EvError::BadEv`] (counted).
    pub fn allow(&mut self, ev: u16, now_ns: u64) -> Result<(), EvError> {
        let i = self.index(ev)?;
        let down = self.plane_is_down(self.evs[i].plane);
        let e = &mut self.evs[i];
        if e.state != EvState::Denied {
            return Ok(());
        }
        e.sprt.reset();
        e.delivered = e.delivered.saturating_add(u64::from(e.sprt_pending()));
        e.sprt_room = u16::MAX;
        e.ecn_q16 = 0;
        e.probe_interval_ns = self.cfg.probe_base_ns;
        e.next_probe_ns = now_ns;
        let new = if down {
            EvState::AssumedBad
        } else {
            EvState::Good
        };
        self.set_state(i, new, EvReason::ControllerAllow);
        self.probe_changed(i);
        Ok(())
    }

    // ---- internals ----

    /// Re-derive the gray-loss test's H0 from the QP-wide loss rate (see
    /// [`Self::handle_loss`]); on a change every EV's pending deliveries are first fed with
    /// the test they arrived under.
    fn update_baseline(&mut self) {
        while self.qp_outcomes > 2 * BASELINE_WINDOW {
            self.qp_outcomes /= 2;
            self.qp_losses /= 2;
        }
        let p = self.cfg.sprt;
        let mut k = 0u8;
        if self.qp_outcomes >= BASELINE_WINDOW / 4 {
            // q in ppm; outcomes <= 2 * BASELINE_WINDOW, so no overflow.
            let q = self.qp_losses.min(self.qp_outcomes) * u64::from(PPM) / self.qp_outcomes;
            // The shift is the first `k` where `up(k)` fails (p0 < PPM, k <= 20: no overflow).
            // `up` holds below it and fails from it on, so the current shift is checked first
            // (it usually stands) before the search from 0.
            let p0 = u64::from(p.p0_ppm);
            let up = |k: u8| k < 20 && (p0 << k) < q && (p0 << (k + 1)) <= u64::from(PPM / 8);
            let b = self.baseline_shift;
            if !up(b) && (b == 0 || up(b - 1)) {
                return;
            }
            while up(k) {
                k += 1;
            }
        }
        if k == self.baseline_shift {
            return;
        }
        let old = self.sprt;
        for e in self.evs.iter_mut() {
            e.sync_sprt(&old);
        }
        let p0 = p.p0_ppm << k;
        let params = SprtParams {
            p0_ppm: p0,
            p1_ppm: if k == 0 {
                p.p1_ppm
            } else {
                p.p1_ppm.max(4 * p0)
            },
            ..p
        };
        // Valid: 0 < p0 <= PPM / 8 < p1 <= PPM / 2 for k > 0; k == 0 is the configured test.
        if let Ok(c) = SprtConfig::new(params) {
            self.sprt = c;
            self.baseline_shift = k;
        }
    }

    fn get(&self, ev: u16) -> Option<&Ev> {
        if ev < self.cfg.evs {
            self.evs.get(usize::from(ev))
        } else {
            None
        }
    }

    fn index(&mut self, ev: u16) -> Result<usize, EvError> {
        // (two compares, one with a constant: below both bounds is below their minimum)
        if usize::from(ev) < N && ev < self.cfg.evs {
            Ok(usize::from(ev))
        } else {
            self.counters.bad_index += 1;
            Err(EvError::BadEv {
                ev,
                evs: self.cfg.evs,
            })
        }
    }

    fn check_plane(&mut self, plane: u8) -> Result<(), EvError> {
        if plane < self.cfg.planes {
            Ok(())
        } else {
            self.counters.bad_index += 1;
            Err(EvError::BadPlane {
                plane,
                planes: self.cfg.planes,
            })
        }
    }

    fn earliest_probe(&self) -> Option<(usize, u64)> {
        debug_assert_eq!(self.probe_best, self.scan_earliest_probe());
        self.probe_best
    }

    /// EV `i` changed state, plane or probe time: update `probe_best`. Only `i` changed, so
    /// the best stays unless `i` was it (rescan) or now beats it.
    fn probe_changed(&mut self, i: usize) {
        if self.probe_best.is_some_and(|(b, _)| b == i) {
            self.probe_best = self.scan_earliest_probe();
            return;
        }
        let Some(e) = self.evs.get(i) else { return };
        let member = i < usize::from(self.cfg.evs)
            && e.state == EvState::AssumedBad
            && !self.plane_is_down(e.plane);
        let at = e.next_probe_ns;
        let better = match self.probe_best {
            None => true,
            Some((b, b_at)) => at < b_at || (at == b_at && i < b),
        };
        if member && better {
            self.probe_best = Some((i, at));
        }
    }

    /// The `AssumedBad` EV on a live plane with the earliest probe time (ties: lowest index).
    fn scan_earliest_probe(&self) -> Option<(usize, u64)> {
        let (mut best_i, mut best_at) = (usize::MAX, 0u64);
        let evs = usize::from(self.cfg.evs);
        let any_down = self.planes_down != 0;
        // Members of `bad` in increasing index order: exactly the `AssumedBad` EVs (set_state
        // keeps the mask), so ties go to the lowest index.
        for (w, &word) in self.bad.words.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let Some(e) = self.evs.get(i).filter(|_| i < evs) else {
                    break;
                };
                let at = e.next_probe_ns;
                if (best_i == usize::MAX || at < best_at)
                    && !(any_down && self.plane_is_down(e.plane))
                {
                    (best_i, best_at) = (i, at);
                }
            }
        }
        (best_i != usize::MAX).then_some((best_i, best_at))
    }

    /// Retire `i` (Good/Skip) unless `min_active` holds it, in which case it is skipped.
    fn retire(&mut self, i: usize, now_ns: u64, reason: EvReason) {
        if self.active <= self.cfg.min_active {
            self.counters.guard_hits += 1;
            self.set_state(i, EvState::Skip, EvReason::LossGuarded);
            return;
        }
        let e = &mut self.evs[i];
        e.probe_id = None;
        e.next_probe_ns = now_ns.saturating_add(e.probe_interval_ns);
        let old = e.state;
        self.set_state(i, EvState::AssumedBad, reason);
        // (a state change already updated the probe order, with the new probe time)
        if old == EvState::AssumedBad {
            self.probe_changed(i);
        }
    }

    fn retire_gray(&mut self, i: usize, now_ns: u64) {
        if !matches!(self.evs[i].state, EvState::Good | EvState::Skip) {
            return;
        }
        self.counters.gray_retires += 1;
        self.evs[i].probe_interval_ns = self.cfg.probe_cap_ns;
        self.retire(i, now_ns, EvReason::GrayLoss);
    }

    fn bump_plane(&mut self, plane: u8, up: bool) {
        if let Some(c) = self.good_per_plane.get_mut(usize::from(plane)) {
            *c = if up {
                c.saturating_add(1)
            } else {
                c.saturating_sub(1)
            };
        }
    }

    /// The one place a state changes: keeps the mask, counts and event queue in step.
    fn set_state(&mut self, i: usize, new: EvState, reason: EvReason) {
        let Some(e) = self.evs.get_mut(i) else { return };
        let old = e.state;
        if old == new {
            return;
        }
        e.state = new;
        let plane = e.plane;
        let was_active = matches!(old, EvState::Good | EvState::Skip);
        let is_active = matches!(new, EvState::Good | EvState::Skip);
        match (was_active, is_active) {
            (true, false) => self.active = self.active.saturating_sub(1),
            (false, true) => self.active = self.active.saturating_add(1),
            _ => {}
        }
        if old == EvState::Good {
            self.bump_plane(plane, false);
        }
        if new == EvState::Good {
            self.bump_plane(plane, true);
        }
        self.usable.set(i, new == EvState::Good);
        self.bad.set(i, new == EvState::AssumedBad);
        self.probe_changed(i);
        let event = EvEvent {
            ev: i as u16,
            old,
            new,
            reason,
        };
        if self.events.push_back(event).is_err() {
            self.counters.events_dropped += 1;
            // (from the first EV again: a sweep under way may have passed this one)
            if self.resync.replace(0).is_none() {
                self.counters.resyncs += 1;
            }
        }
    }
}

impl Ev {
    /// One delivery, counted and fed to the gray-loss test later with the others (see
    /// `sprt_room`).
    #[inline]
    fn note_sprt_delivery(&mut self, cfg: &SprtConfig) {
        // (the room is at least 1 here: reset to `u16::MAX` whenever it reaches 0; reaching 0
        // is 65,535 pending, as many as the count holds)
        self.sprt_room -= 1;
        if self.sprt_room == 0 {
            // (a copy of the configuration through `black_box`, the identity: a loop of credits
            // then sets up none of this rare sync's arithmetic before it starts; through the
            // reference itself it made the whole run ~24M instructions dearer)
            self.sync_sprt(&core::hint::black_box(*cfg));
        }
    }

    /// Deliveries not yet fed to the gray-loss test nor counted in `delivered`.
    #[inline]
    fn sprt_pending(&self) -> u16 {
        u16::MAX - self.sprt_room
    }

    /// Feed the pending deliveries to the gray-loss test, one at a time (in O(1)), and count
    /// them in `delivered`.
    fn sync_sprt(&mut self, cfg: &SprtConfig) {
        let n = u64::from(self.sprt_pending());
        self.sprt.observe_each_delivered(cfg, n);
        self.delivered = self.delivered.saturating_add(n);
        self.sprt_room = u16::MAX;
    }
}
