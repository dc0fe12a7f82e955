//! The NIC's inputs and what follows them: deliveries into the stages, timers, reports on the
//! firmware cores, the entries moved between each shard's stage and engine, and what the
//! engines wrote for the host (completions, EV state changes and the route knowledge the NIC
//! shares from them).

use mrc_abi::wire::EvFormat;
use mrc_firmware::datapath::packet::{PacketBody, RxVerdict};
use mrc_firmware::datapath::TrimMark;
use mrc_firmware::engine::ev_state::{EvReason, EvState};
use mrc_firmware::engine::CompletionKind;

use super::flows::wr_parts;
use super::pair::HostWrite;
use super::{ev_path, ns, pcie, place, qpn_in, Nic, StagePacket, Transport, EVS};
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::Time;
use crate::fabric::{Ecn, Fabric, Packet, Topology};

/// Rounds of moving entries, collecting host writes, posting and sending one input may take
/// (each round's sends report to the firmware, which rarely lets more leave at once; the last
/// round only moves the reports on).
const SERVICE_ROUNDS: usize = 5;

impl Nic {
    /// [`super::ev::TIMER`] at `now`: fires the shards' timers when this is the armed deadline.
    pub fn on_timer(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.timer_armed != Some(ns(now)) {
            return; // superseded by an earlier deadline, which re-armed on firing
        }
        self.timer_armed = None;
        let timed = self.cfg.firmware.timed;
        for k in 0..self.shards.len() {
            if self.shard_deadline[k].is_some_and(|t| t <= ns(now)) {
                if timed {
                    // (the loop's timers run on its core: `cores`)
                    self.shards[k].dp_timeout(ns(now));
                } else {
                    self.with_writes(k, |e, w| e.handle_timeout(ns(now), w));
                }
                self.shard_ready[k] = true;
                self.input_shards.push(k);
                self.deadline_dirty.push(k);
                let first = (k * self.width).min(self.qpn_at.len());
                let last = (first + self.width).min(self.qpn_at.len());
                self.stall_dirty
                    .extend_from_slice(&self.qpn_at[first..last]);
            }
        }
        self.service(now, fab, s, me);
    }

    /// A fabric delivery for this host; `hdr` is the sender's side-table entry for it.
    pub fn receive(
        &mut self,
        now: Time,
        pkt: &Packet,
        hdr: Option<StagePacket>,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += u64::from(pkt.size_bytes);
        let Some(mut p) = hdr else {
            self.counters.side_misses += 1;
            return;
        };
        let trimmed = pkt.is_trimmed();
        if !trimmed && !pkt.payload.verify() {
            self.counters.bad_payload += 1;
            return;
        }
        // (the driver's QPs: the wire carries the device QPN the applications exchanged)
        let qpn = match &self.driver {
            Some(d) => d.nic_qpn(p.dest_qpn),
            None => p.dest_qpn,
        };
        let (k, slot) = place(&self.pos_of, qpn, self.width);
        if k >= self.shards.len() {
            self.counters.unknown_qpn += 1;
            return;
        }
        // The stage's QPN is the slot in its shard (the wire carries the NIC-wide QPN); the
        // fabric's marks travel on the packet.
        p.dest_qpn = slot;
        if trimmed {
            p.trim_to(if pkt.is_trimmed_last_hop() {
                TrimMark::TrimmedLastHop
            } else {
                TrimMark::Trimmed
            });
        } else {
            p.payload_len = pkt.payload.len;
        }
        p.ce = pkt.ecn == Ecn::Ce;
        // A data packet passes the PSN tracker first (`dp_clock`).
        if let Some(at) = self.dp.receive(now, &p) {
            self.hold_rx(at, k, qpn, p, s, me);
            return;
        }
        // A control packet goes to its stage at once, unless the port's RX FIFO is held up
        // (it queues behind what waits) or the stage refuses it (it waits at the FIFO's tail).
        if self.dp.rx_blocked || self.enter_stage(now, k, qpn, &p, s, me).is_none() {
            self.hold_rx(now, k, qpn, p, s, me);
        }
        self.service(now, fab, s, me);
    }

    /// Delivery `p` for QP `qpn` enters shard `k`'s stage (the caller services the NIC).
    /// Returns the stage's verdict (`None`: refused, its event buffer full and its reports
    /// with nowhere to go; the caller holds or drops the packet, and counts a drop).
    pub(super) fn enter_stage(
        &mut self,
        now: Time,
        k: usize,
        qpn: u32,
        p: &StagePacket,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) -> Option<RxVerdict> {
        let verdict = loop {
            if let Some(v) = self.shards[k].receive(ns(now), p) {
                break v;
            }
            // Short of event room: the reports move on (to the engine, or to the firmware
            // cores' queue), then the stage takes the packet.
            if !self.drain_shard(now, k, s, me) {
                return None;
            }
        };
        if let RxVerdict::Place {
            slot, offset, len, ..
        } = verdict
        {
            self.counters.placed_bytes += u64::from(len);
            // Posted writes to host memory (the transport does not wait for them).
            let seen = if self.cfg.pcie.ideal {
                now
            } else {
                self.link.write(now, offset, len)
            };
            if let Some(d) = self.driver.as_mut() {
                let src_host = self.conns.get(qpn as usize).map_or(u32::MAX, |c| c.peer);
                d.placed(seen, qpn, src_host, p, slot, offset, len);
            }
        }
        if matches!(p.body, PacketBody::Ack(_) | PacketBody::Nack(_)) {
            // (an answer from the peer ends the loss window after a timeout)
            self.retx_maybe[k] = true;
        }
        self.shard_ready[k] = true;
        self.input_shards.push(k);
        self.deadline_dirty.push(k);
        self.stall_dirty.push(qpn);
        Some(verdict)
    }

    /// Calls `f` on shard `k` with the host-write list, then names the QPs of what it wrote
    /// by their NIC-wide QPNs.
    pub(super) fn with_writes<R>(
        &mut self,
        k: usize,
        f: impl FnOnce(&mut super::Shard, &mut Vec<HostWrite>) -> R,
    ) -> R {
        let from = self.host_writes.len();
        let r = f(&mut self.shards[k], &mut self.host_writes);
        let (qpn_at, width) = (&self.qpn_at, self.width);
        for w in &mut self.host_writes[from..] {
            match w {
                HostWrite::Completion(c) => c.qpn = qpn_in(qpn_at, k, width, c.qpn),
                HostWrite::EvEvent { qpn, .. } | HostWrite::ProbeResult { qpn, .. } => {
                    *qpn = qpn_in(qpn_at, k, width, *qpn)
                }
            }
        }
        r
    }

    /// Moves entries between shard `k`'s stage and its loop: with firmware time off, both ways
    /// until both are quiet; with firmware time on, the stage's reports onto its core's CSR
    /// ring (the loop's commands come with the core's steps). Returns whether anything moved.
    pub(super) fn drain_shard(
        &mut self,
        now: Time,
        k: usize,
        _s: &mut Scheduler<'_>,
        _me: ComponentId,
    ) -> bool {
        let any = if self.cfg.firmware.timed {
            self.offer_reports(now, k)
        } else {
            let any = self.with_writes(k, |e, w| e.pump(ns(now), w));
            // The reports the engine took passed the CSR event queue (`dp_clock`).
            self.dp.csr_moved(now, k, self.shards[k].moved().0);
            any
        };
        if any {
            // (reports moved on: the stage may take the delivery it refused)
            self.dp.rx_blocked = false;
        }
        // A command (since the last look: timers and firmware cores give some too) is what
        // queues a retransmission; an ACK or NACK lets one go (see `receive`).
        let cmds = self.shards[k].moved().1;
        if self.cmds_seen[k] != cmds {
            self.cmds_seen[k] = cmds;
            self.retx_maybe[k] = true;
        }
        any
    }

    /// Closes the stall of every QP still outstanding at `now` (call when the run ends).
    pub fn settle(&mut self, now: Time) {
        for q in 0..self.conns.len() {
            self.track_stall(q, now);
        }
    }

    /// After any input: entries moved for the shards that had input, completions and EV
    /// events collected, route knowledge shared, releases, posting, transmit, timers, stalls.
    pub(super) fn service(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        self.now = now;
        self.link.prune(now);
        for round in 0..SERVICE_ROUNDS {
            self.drain_inputs(now, fab.topology(), &mut touched, s, me);
            if round == 0 {
                self.flows.release_due(now, &mut touched);
            }
            // The host posts in the order it created its QPs (their positions): its doorbells
            // and WQE fetches follow that order, and so do the QPs' first packets (in QPN
            // order every NIC of an all-to-all began with its lowest peers: an incast).
            let pos_of = &self.pos_of;
            touched.sort_unstable_by_key(|&q| (pos_of.get(q as usize).copied(), q));
            touched.dedup();
            for &q in &touched {
                // An idle QP getting work starts its stall clock now, not at its last ACK.
                self.track_stall(q as usize, now);
                self.post(now, q);
            }
            self.stall_dirty.extend_from_slice(&touched);
            touched.clear();
            // (the last round only moves on what the sends before it reported, so that the
            // timers below see the engines' reaction to them)
            if round + 1 == SERVICE_ROUNDS {
                break;
            }
            self.pump(now, fab, s, me);
            if self.input_shards.is_empty() {
                break;
            }
        }
        self.touched = touched;
        self.settle_dirty(now);
        if self.cfg.firmware.timed {
            self.run_cores(now, s, me);
        }
        self.arm_release(s, me);
        self.arm_timer(s, me);
        self.arm_dma(s, me);
        // (deliveries held behind a refused one go on once reports moved)
        self.arm_datapath(s, me);
    }

    /// Moves the entries of every shard that had input, then acts on what the engines wrote
    /// for the host: completions end messages (their QPs go to `touched`), EV losses and
    /// probe replies are shared (`mrc`), which moves the entries of the shards they changed.
    fn drain_inputs(
        &mut self,
        now: Time,
        topo: &Topology,
        touched: &mut Vec<u32>,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.input_shards.is_empty() && self.host_writes.is_empty() {
            return;
        }
        let mut losses = std::mem::take(&mut self.losses);
        // Twice at most: the shards the shared knowledge changed write only EV events, which
        // are not shared again.
        for _ in 0..2 {
            let mut inputs = std::mem::take(&mut self.input_shards);
            inputs.sort_unstable();
            inputs.dedup();
            for &k in &inputs {
                self.drain_shard(now, k, s, me);
                self.deadline_dirty.push(k);
            }
            inputs.clear();
            self.input_shards = inputs;
            let mut writes = std::mem::take(&mut self.host_writes);
            for w in writes.drain(..) {
                // Each is a record written to host memory: the host sees it when it arrived.
                let seen = self.host_write(now, &w);
                if let Some(d) = self.driver.as_mut() {
                    // The driver's host: the device side writes the CQE or event record.
                    d.wrote(seen, w);
                    if let HostWrite::Completion(c) = w {
                        self.hostq.saw(c.qpn, seen);
                        if c.status.is_err() {
                            self.counters.completion_errors += 1;
                        }
                        continue;
                    }
                }
                match w {
                    HostWrite::EvEvent {
                        qpn,
                        ev,
                        new,
                        reason,
                        ..
                    } => {
                        self.counters.ev_state_changes += 1;
                        if new == EvState::AssumedBad && reason == EvReason::Loss {
                            losses.push((qpn, ev, false));
                        } else if new == EvState::Good && reason == EvReason::ProbeReply {
                            losses.push((qpn, ev, true));
                        }
                    }
                    HostWrite::Completion(c) => {
                        if c.kind != CompletionKind::Send {
                            continue;
                        }
                        let (flow, msg) = wr_parts(c.wr_id);
                        let len = self
                            .flows
                            .flows
                            .get(flow as usize)
                            .map_or(0, |f| f.msg_len(msg));
                        let ok = c.status.is_ok();
                        if !ok {
                            self.counters.completion_errors += 1;
                        }
                        self.hostq.saw(c.qpn, seen);
                        self.flows.on_completion(flow, len, ok, seen);
                        touched.push(c.qpn);
                    }
                    // (only a host's PROBE_EV asks for one: flow hosts never do)
                    HostWrite::ProbeResult { .. } => {}
                }
            }
            self.host_writes = writes;
            if self.cfg.transport == Transport::Mrc {
                for &(qpn, ev, up) in &losses {
                    self.share_route(now, topo, qpn, ev, up);
                }
            }
            losses.clear();
            if self.input_shards.is_empty() {
                break;
            }
        }
        self.losses = losses;
    }

    /// Writes `w` to the host (a CQE or an event record, one posted write); returns when the
    /// host has it.
    fn host_write(&mut self, now: Time, w: &HostWrite) -> Time {
        if self.cfg.pcie.ideal {
            return now;
        }
        let bytes = match w {
            HostWrite::Completion(_) => pcie::CQE_BYTES,
            HostWrite::EvEvent { .. } | HostWrite::ProbeResult { .. } => pcie::EVENT_BYTES,
        };
        self.link.write(now, 0, bytes)
    }

    /// `mrc`: QP `qpn` lost a packet (untrimmed) on EV `ev`, which it retired. The NIC wrote
    /// the route each EV names, so it shares the loss: every QP (this one too) whose EVs on
    /// that plane name a route with the same hops up to the destination's last switch (a loss
    /// on `[leaf 0, spine s, leaf L, host h]` makes `[leaf 0, spine s, leaf L, *]` suspect)
    /// retires those EVs
    /// too (the engine's `handle_shared_loss`). Without this every QP found a dead link by
    /// losing packets of its own on it, one per EV, for as long as its sprayer came back to
    /// those EVs, several times the losses. A loss on the last hop of a one-hop route (hosts
    /// of one leaf) retires nothing elsewhere. Routes are not shared by the common part of two
    /// lost routes (e.g. `[s, L1, *]` and `[s, L2, *]`: the uplink to `s`): a spurious loss on
    /// one route would then retire a whole spine.
    ///
    /// A probe reply on an EV (`up`) is shared the same way: the route answered, so the EVs
    /// that name it come back (the engine's `handle_shared_recovery`); EVs retired by a shared
    /// loss leave the probing of their route to the EV that lost the packet.
    fn share_route(&mut self, now: Time, topo: &Topology, qpn: u32, ev: u16, up: bool) {
        // The image's shape: the knowledge goes into the engines by calls the image has no
        // form for (no CSR entry, no admin command); its QPs learn from their own losses.
        if self.cfg.firmware.shape() == super::NicShape::Image {
            return;
        }
        if self.cfg.ev_format() != EvFormat::Srv6 {
            // ECMP formats: the NIC does not know which path a hashed EV takes.
            return;
        }
        let planes = u32::from(self.cfg.planes).max(1);
        let Some(c) = self.conns.get(qpn as usize) else {
            return;
        };
        let n = topo.path_count(self.host, c.peer);
        let path = ev_path(u32::from(ev), planes, n, c.path_base);
        let Ok(route) = topo.usid_route(self.host, c.peer, path) else {
            return;
        };
        let len = route.hops_left();
        // `[leaf, host]` (hosts of one leaf): the source leaf alone is no shared part.
        if len < 3 {
            return;
        }
        let plane = u32::from(ev) % planes;
        for (q, other) in self.conns.iter().enumerate() {
            // The QP itself too: its other EVs on the plane that name the same path.
            if topo.path_count(self.host, other.peer) != n {
                continue;
            }
            let Ok(r) = topo.usid_route(self.host, other.peer, path) else {
                continue;
            };
            if r.hops_left() != len
                || !r
                    .remaining()
                    .take(len - 1)
                    .eq(route.remaining().take(len - 1))
            {
                continue;
            }
            let (k, slot) = place(&self.pos_of, q as u32, self.width);
            let Some(e) = self.shards.get_mut(k) else {
                continue;
            };
            let mut hit = false;
            for i in (plane..EVS as u32).step_by(planes as usize) {
                if ev_path(i, planes, n, other.path_base) == path {
                    hit |= if up {
                        e.handle_shared_recovery(ns(now), slot, i as u16).is_ok()
                    } else {
                        e.handle_shared_loss(ns(now), slot, i as u16).is_ok()
                    };
                }
            }
            if hit {
                self.shard_ready[k] = true;
                self.input_shards.push(k);
                self.deadline_dirty.push(k);
            }
        }
    }

    fn settle_dirty(&mut self, now: Time) {
        let mut dirty = std::mem::take(&mut self.stall_dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &q in &dirty {
            self.track_stall(q as usize, now);
        }
        dirty.clear();
        self.stall_dirty = dirty;
    }

    fn track_stall(&mut self, qpn: usize, now: Time) {
        let (s, slot) = place(&self.pos_of, qpn as u32, self.width);
        let Some(q) = self.shards.get(s).and_then(|e| e.qp_progress(slot)) else {
            return;
        };
        let una = q.una.value();
        let outstanding = q.inflight_bytes > 0 || q.sq_queued > 0;
        let Some(c) = self.conns.get_mut(qpn) else {
            return;
        };
        if una != c.last_una || !outstanding {
            if self.cfg.stall_mark.is_some_and(|m| now > m) && una != c.last_una {
                let gap = now.duration_since(c.last_progress);
                if c.mark_stall.is_none_or(|(g, _)| gap > g) {
                    c.mark_stall = Some((gap, now));
                }
            }
            c.last_una = una;
            c.last_progress = now;
        } else {
            let st = now.duration_since(c.last_progress);
            if st > c.max_stall {
                c.max_stall = st;
            }
        }
    }
}
