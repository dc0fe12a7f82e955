//! [`RoceNic`]: the QPs of one host joined to the fabric (events, pacing, packets).

use std::collections::VecDeque;

use crate::core::rng::splitmix64;
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::{serialization_time, Duration, Time};
use crate::fabric::{flags, Ecn, Fabric, Packet, Payload, PortId, Route, TransportKind};
use crate::workload::Flow;

use super::dcqcn::Rp;
use super::qp::{pattern, Layout, RecvQp, RxAction, SendQp, SendState};
use super::wire::{self, Kind, Tag};
use super::{
    ev, FlowDone, FlowResult, RoceConfig, RoceCounters, RoceError, MAX_PLANES, PUMP_BACKLOG_PKTS,
};

/// IB: at most 2^23 PSNs outstanding.
const MAX_OUTSTANDING: u64 = 1 << 23;

/// The ECMP flow hash of flow `id`'s data packets (`reverse`: its ACKs, NAKs and CNPs).
pub fn qp_hash(seed: u64, id: u32, reverse: bool) -> u64 {
    let mut h = seed ^ u64::from(id) << 20 ^ 0x526f_4345_0000_0000 ^ u64::from(reverse);
    splitmix64(&mut h)
}

/// One host's RoCE NIC: a requester QP per flow it sends, a responder QP per flow it receives.
pub struct RoceNic {
    host: u32,
    cfg: RoceConfig,
    rto: Duration,
    /// Sorted by flow id.
    send: Vec<SendQp>,
    /// Sorted by flow id.
    recv: Vec<RecvQp>,
    /// Per plane: indices into `send`, and the round-robin cursor.
    by_plane: Vec<Vec<usize>>,
    rr: Vec<usize>,
    timer_armed: Option<Time>,
    pump_armed: Option<Time>,
    done: VecDeque<FlowDone>,
    counters: RoceCounters,
}

impl RoceNic {
    /// `host`'s NIC for the flows in `flows` that start or end at `host` (the others are
    /// ignored, so every NIC can be given the whole list).
    ///
    /// # Errors
    /// [`RoceError`] for a bad configuration or a flow this NIC cannot run (source equal to
    /// destination, zero `msg_bytes`, an id above [`wire::MAX_QPN`], a duplicate id).
    pub fn new(host: u32, flows: &[Flow], cfg: RoceConfig) -> Result<RoceNic, RoceError> {
        cfg.validate()?;
        let mut cfg = cfg;
        cfg.dcqcn.line_bps = cfg.port_bps;
        cfg.dcqcn.min_bps = cfg.dcqcn.min_bps.min(cfg.port_bps);
        let mut send = Vec::new();
        let mut recv = Vec::new();
        for f in flows.iter().filter(|f| f.src == host || f.dst == host) {
            let bad = |why| Err(RoceError::Flow { id: f.id, why });
            if f.src == f.dst {
                return bad("source and destination are the same host");
            }
            if f.msg_bytes == 0 {
                return bad("msg_bytes must be > 0");
            }
            if f.id > wire::MAX_QPN {
                return bad("id above the largest QPN (2^28 - 1)");
            }
            let layout = Layout::new(f.bytes, f.msg_bytes, cfg.mtu_payload);
            if f.src == host {
                let hash = qp_hash(cfg.seed, f.id, false);
                send.push(SendQp {
                    flow: *f,
                    layout,
                    state: SendState::Waiting,
                    after_done: f.after.is_none(),
                    plane: ((hash >> 56) % u64::from(cfg.planes)) as u8,
                    hash,
                    una: 0,
                    nxt: 0,
                    sent: 0,
                    next_tx: Time::ZERO,
                    gap_from: Time::ZERO,
                    gap_bytes: 0,
                    rp: Rp::new(&cfg.dcqcn),
                    timer_from: Time::ZERO,
                    retries: 0,
                    released_at: None,
                    done_at: None,
                    last_progress: Time::ZERO,
                    max_stall: Duration::ZERO,
                    data_sent: 0,
                    retransmits: 0,
                    naks: 0,
                    timeouts: 0,
                });
            } else {
                recv.push(RecvQp {
                    flow: *f,
                    layout,
                    epsn: 0,
                    nak_sent: false,
                    since_ack: 0,
                    np: Default::default(),
                    placed_bytes: 0,
                    duplicates: 0,
                    out_of_sequence: 0,
                });
            }
        }
        send.sort_by_key(|q| q.flow.id);
        recv.sort_by_key(|q| q.flow.id);
        for w in send.windows(2) {
            if w[0].flow.id == w[1].flow.id {
                return Err(RoceError::Flow {
                    id: w[0].flow.id,
                    why: "duplicate flow id",
                });
            }
        }
        for w in recv.windows(2) {
            if w[0].flow.id == w[1].flow.id {
                return Err(RoceError::Flow {
                    id: w[0].flow.id,
                    why: "duplicate flow id",
                });
            }
        }
        let mut by_plane = vec![Vec::new(); usize::from(cfg.planes)];
        for (i, q) in send.iter().enumerate() {
            by_plane[usize::from(q.plane)].push(i);
        }
        Ok(RoceNic {
            host,
            rto: cfg.rto(),
            cfg,
            send,
            recv,
            by_plane,
            rr: vec![0; usize::from(cfg.planes)],
            timer_armed: None,
            pump_armed: None,
            done: VecDeque::new(),
            counters: RoceCounters::default(),
        })
    }

    // ----- queries -----

    /// The host.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// The configuration (with DCQCN's line rate set to the port rate).
    pub fn config(&self) -> &RoceConfig {
        &self.cfg
    }

    /// When the last of this NIC's sending flows completed; `Some(0)` with no flows to send;
    /// `None` while any is unfinished.
    pub fn done_at(&self) -> Option<Time> {
        let mut last = Time::ZERO;
        for q in &self.send {
            last = last.max(q.done_at?);
        }
        Some(last)
    }

    /// True when a sending QP went to error (its flow cannot finish).
    pub fn failed(&self) -> bool {
        self.send.iter().any(|q| q.state == SendState::Error)
    }

    /// Bytes acknowledged over every sending flow.
    pub fn completed_bytes(&self) -> u64 {
        self.send.iter().map(SendQp::acked_bytes).sum()
    }

    /// Longest stall of any sending QP, as recorded at its events (ACKs, NAKs, timer).
    pub fn max_stall(&self) -> Duration {
        self.send
            .iter()
            .map(|q| q.max_stall)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Longest stall of any sending QP including the one still running at `now`.
    pub fn max_stall_at(&self, now: Time) -> Duration {
        self.send
            .iter()
            .map(|q| {
                let running = if q.state == SendState::Active {
                    now.duration_since(q.last_progress)
                } else {
                    Duration::ZERO
                };
                q.max_stall.max(running)
            })
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// The NIC's counters.
    pub fn counters(&self) -> RoceCounters {
        self.counters
    }

    /// Per sending flow figures, in flow id order.
    pub fn flow_results(&self) -> impl Iterator<Item = FlowResult> + '_ {
        self.send.iter().map(|q| FlowResult {
            id: q.flow.id,
            dst: q.flow.dst,
            bytes: q.flow.bytes,
            acked_bytes: q.acked_bytes(),
            released_at: q.released_at,
            done_at: q.done_at,
            failed: q.state == SendState::Error,
            max_stall: q.max_stall,
            plane: q.plane,
            data_sent: q.data_sent,
            retransmits: q.retransmits,
            timeouts: q.timeouts,
            rate_decreases: q.rp.decreases,
            rate_bps: q.rp.rate_bps(),
        })
    }

    /// Bytes placed so far for received flow `id` (None if this NIC does not receive it).
    pub fn received_bytes(&self, id: u32) -> Option<u64> {
        self.recv_index(id).map(|i| self.recv[i].placed_bytes)
    }

    /// PFC pauses this host's ports obeyed (read from the fabric's port counters).
    pub fn pauses_received(&self, fab: &Fabric) -> u64 {
        (0..u32::from(self.cfg.planes))
            .filter_map(|p| fab.port_counters(fab.topology().host_port(self.host, p)))
            .map(|c| c.pauses_received)
            .sum()
    }

    /// The next flow of this NIC that completed, oldest first (the world passes it on to every
    /// NIC with [`RoceNic::flow_completed`]).
    pub fn poll_flow_done(&mut self) -> Option<FlowDone> {
        self.done.pop_front()
    }

    // ----- inputs -----

    /// [`ev::START`]: release the flows due now, arm the timer for later ones, start sending.
    pub fn start(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        for i in 0..self.send.len() {
            self.try_release(i, now, s, me);
        }
        self.pump(now, fab, s, me);
    }

    /// [`ev::PUMP`]: a port or a rate limiter freed up.
    pub fn on_pump(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        if self.pump_armed != Some(now) {
            return; // superseded by an earlier wake-up, which re-armed on firing
        }
        self.pump_armed = None;
        self.pump(now, fab, s, me);
    }

    /// [`ev::TIMER`]: flow releases and transport timer expiries due at `now`.
    pub fn on_timer(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.timer_armed != Some(now) {
            return; // superseded; the earlier firing re-armed
        }
        self.timer_armed = None;
        let mut next: Option<Time> = None;
        for i in 0..self.send.len() {
            let q = &mut self.send[i];
            match q.state {
                SendState::Waiting if q.after_done => {
                    if q.flow.start <= now {
                        self.release(i, now, s, me);
                    } else {
                        next = min_time(next, Some(q.flow.start));
                    }
                }
                SendState::Active => {
                    if let Some(d) = q.deadline(self.rto) {
                        if d <= now {
                            q.on_timeout(now, self.cfg.retry_cnt);
                            self.counters.timeouts += 1;
                            if q.state == SendState::Error {
                                self.counters.qp_errors += 1;
                            }
                        }
                    }
                    next = min_time(next, self.send[i].deadline(self.rto));
                }
                _ => {}
            }
        }
        if let Some(t) = next {
            self.arm_timer(t, s, me);
        }
        self.pump(now, fab, s, me);
    }

    /// Flow `id` completed at its sender (any NIC): release the flows waiting for it.
    pub fn flow_completed(
        &mut self,
        id: u32,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.release_after(id, now, s, me) {
            self.pump(now, fab, s, me);
        }
    }

    /// A fabric delivery for this host.
    pub fn receive(
        &mut self,
        now: Time,
        pkt: &Packet,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        self.counters.rx_packets += 1;
        let tag = Tag::decode(pkt.transport_tag);
        match tag.kind {
            Kind::Data { psn, last } => self.on_data(now, pkt, tag.qpn, psn, last, fab, s),
            Kind::Ack { psn } | Kind::Nak { psn } => {
                let Some(i) = self.send_index(tag.qpn) else {
                    self.counters.unknown_qp += 1;
                    return;
                };
                let q = &mut self.send[i];
                let done = if matches!(tag.kind, Kind::Nak { .. }) {
                    self.counters.naks_received += 1;
                    q.on_nak(now, u64::from(psn))
                } else {
                    q.on_ack(now, u64::from(psn))
                };
                if let Some(d) = q.deadline(self.rto) {
                    self.arm_timer(d, s, me);
                }
                if done {
                    self.done.push_back(FlowDone {
                        id: tag.qpn,
                        at: now,
                    });
                    self.release_after(tag.qpn, now, s, me);
                }
                self.pump(now, fab, s, me);
            }
            Kind::Cnp => {
                let Some(i) = self.send_index(tag.qpn) else {
                    self.counters.unknown_qp += 1;
                    return;
                };
                self.counters.cnps_received += 1;
                if self.cfg.dcqcn_on {
                    self.send[i].rp.on_cnp(&self.cfg.dcqcn, now);
                    self.counters.rate_decreases += 1;
                }
            }
        }
    }

    // ----- internals -----

    fn send_index(&self, id: u32) -> Option<usize> {
        self.send.binary_search_by_key(&id, |q| q.flow.id).ok()
    }

    fn recv_index(&self, id: u32) -> Option<usize> {
        self.recv.binary_search_by_key(&id, |q| q.flow.id).ok()
    }

    /// Releases QP `i` if it is due, or arms the timer for its start.
    fn try_release(&mut self, i: usize, now: Time, s: &mut Scheduler<'_>, me: ComponentId) {
        let q = &self.send[i];
        if q.state != SendState::Waiting || !q.after_done {
            return;
        }
        if q.flow.start <= now {
            self.release(i, now, s, me);
        } else {
            let t = q.flow.start;
            self.arm_timer(t, s, me);
        }
    }

    /// Releases QP `i` now; a zero-byte flow completes at once and releases its dependants.
    fn release(&mut self, i: usize, now: Time, s: &mut Scheduler<'_>, me: ComponentId) {
        let q = &mut self.send[i];
        q.release(now);
        if q.state == SendState::Done {
            let id = q.flow.id;
            self.done.push_back(FlowDone { id, at: now });
            self.release_after(id, now, s, me);
        }
    }

    /// Marks the flows after `id` ready and releases the due ones; true if any changed.
    fn release_after(
        &mut self,
        id: u32,
        now: Time,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) -> bool {
        let mut any = false;
        for i in 0..self.send.len() {
            let q = &mut self.send[i];
            if q.flow.after == Some(id) && q.state == SendState::Waiting {
                q.after_done = true;
                any = true;
                self.try_release(i, now, s, me);
            }
        }
        any
    }

    #[allow(clippy::too_many_arguments)]
    fn on_data(
        &mut self,
        now: Time,
        pkt: &Packet,
        qpn: u32,
        psn: u32,
        last: bool,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
    ) {
        let Some(i) = self
            .recv_index(qpn)
            .filter(|&i| self.recv[i].flow.src == pkt.src)
        else {
            self.counters.unknown_qp += 1;
            return;
        };
        if !pkt.payload.verify() || pkt.is_trimmed() {
            self.counters.bad_payload += 1;
            return;
        }
        let plane = u32::from(pkt.plane);
        let src = pkt.src;
        if pkt.ecn == Ecn::Ce {
            self.counters.ce_received += 1;
            if self.recv[i].np.on_ce(&self.cfg.dcqcn, now) {
                self.counters.cnps_sent += 1;
                self.send_ctl(fab, s, src, qpn, Kind::Cnp, plane);
            }
        }
        let r = &mut self.recv[i];
        let action = r.on_data(
            u64::from(psn),
            last,
            pkt.payload.pattern,
            pkt.payload.len,
            self.cfg.ack_every_pkts,
        );
        let epsn = r.epsn as u32;
        match action {
            RxAction::Accept { ack } => {
                self.counters.placed_bytes += u64::from(pkt.payload.len);
                if ack {
                    self.counters.acks_sent += 1;
                    self.send_ctl(fab, s, src, qpn, Kind::Ack { psn: epsn }, plane);
                }
            }
            RxAction::Duplicate { ack } => {
                self.counters.duplicates += 1;
                if ack {
                    self.counters.acks_sent += 1;
                    self.send_ctl(fab, s, src, qpn, Kind::Ack { psn: epsn }, plane);
                }
            }
            RxAction::OutOfSequence { nak } => {
                self.counters.out_of_sequence += 1;
                if nak {
                    self.counters.naks_sent += 1;
                    self.send_ctl(fab, s, src, qpn, Kind::Nak { psn: epsn }, plane);
                }
            }
            RxAction::BadPattern => self.counters.bad_pattern += 1,
        }
    }

    /// An ACK, NAK or CNP for flow `qpn` to `dst`, on `plane`, in the priority queue.
    fn send_ctl(
        &mut self,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        dst: u32,
        qpn: u32,
        kind: Kind,
        plane: u32,
    ) {
        let size = if kind == Kind::Cnp {
            wire::CNP_BYTES
        } else {
            wire::ACK_BYTES
        };
        let pkt = Packet {
            src: self.host,
            dst,
            size_bytes: size,
            payload: Payload::new(0, 0),
            transport_tag: Tag { qpn, kind }.encode(),
            route: Route::Ecmp {
                hash: qp_hash(self.cfg.seed, qpn, true),
            },
            plane: plane as u8,
            kind: TransportKind::Roce,
            ecn: Ecn::NotEct,
            flags: flags::PRIORITY,
        };
        match fab.inject(s, self.host, plane, pkt) {
            Ok(()) => self.counters.tx_packets += 1,
            Err(_) => self.counters.inject_errors += 1,
        }
    }

    fn full_packet_bytes(&self) -> u64 {
        u64::from(wire::DATA_HEADER_BYTES + wire::RETH_BYTES + self.cfg.mtu_payload)
    }

    /// Sends what the ports and rate limiters allow, then arms the next wake-up.
    fn pump(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        let full = self.full_packet_bytes();
        let limit = PUMP_BACKLOG_PKTS * full;
        let mut wake: Option<Time> = None;
        for plane in 0..usize::from(self.cfg.planes).min(MAX_PLANES) {
            if self.by_plane[plane].is_empty() {
                continue;
            }
            let port = fab.topology().host_port(self.host, plane as u32);
            loop {
                let (d, h) = fab.queue_bytes(port);
                if d + h >= limit {
                    wake = min_time(wake, Some(self.port_wake(fab, port, now, full)));
                    break;
                }
                match self.pick(plane, now) {
                    Pick::Ready(i) => self.send_data(i, now, fab, s, me),
                    Pick::At(t) => {
                        wake = min_time(wake, Some(t));
                        break;
                    }
                    Pick::Idle => break,
                }
            }
        }
        if let Some(t) = wake {
            if self.pump_armed.is_none_or(|a| t < a)
                && s.at(t, me, ev::PUMP, u64::from(self.host)).is_ok()
            {
                self.pump_armed = Some(t);
            }
        }
    }

    /// When a full port is worth looking at again: the end of its current serialization, or
    /// (paused by PFC, or idle) one full packet's time from now.
    fn port_wake(&self, fab: &Fabric, port: PortId, now: Time, full: u64) -> Time {
        let busy = fab.port_busy_until(port);
        if busy > now {
            busy
        } else {
            now.saturating_add(serialization_time(full, self.cfg.port_bps))
        }
    }

    /// The next QP of `plane` to send, round-robin.
    fn pick(&mut self, plane: usize, now: Time) -> Pick {
        let n = self.by_plane[plane].len();
        let start = self.rr[plane];
        let mut earliest: Option<Time> = None;
        for k in 0..n {
            let pos = (start + k) % n;
            let i = self.by_plane[plane][pos];
            let q = &mut self.send[i];
            if !q.has_data() || q.nxt - q.una >= MAX_OUTSTANDING {
                continue;
            }
            if q.next_tx > now && q.rp.limited() {
                // The rate may have risen since the last packet: re-time its gap.
                let p = &self.cfg.dcqcn;
                q.rp.advance(p, now);
                let rate = q.rp.rate_bps().min(p.line_bps);
                q.next_tx = q
                    .gap_from
                    .saturating_add(serialization_time(u64::from(q.gap_bytes), rate));
                earliest = min_time(earliest, q.rp.next_increase());
            }
            if q.next_tx <= now {
                self.rr[plane] = (pos + 1) % n;
                return Pick::Ready(i);
            }
            earliest = min_time(earliest, Some(q.next_tx));
        }
        earliest.map_or(Pick::Idle, Pick::At)
    }

    fn send_data(
        &mut self,
        i: usize,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        let q = &mut self.send[i];
        let psn = q.nxt;
        let seg = q.layout.seg(psn);
        let size = wire::DATA_HEADER_BYTES + if seg.first { wire::RETH_BYTES } else { 0 } + seg.len;
        let pkt = Packet {
            src: self.host,
            dst: q.flow.dst,
            size_bytes: size,
            payload: Payload::new(seg.len, pattern(q.flow.id, seg.offset)),
            transport_tag: Tag {
                qpn: q.flow.id,
                kind: Kind::Data {
                    psn: psn as u32,
                    last: seg.last,
                },
            }
            .encode(),
            route: Route::Ecmp { hash: q.hash },
            plane: q.plane,
            kind: TransportKind::Roce,
            ecn: Ecn::Ect,
            flags: 0,
        };
        if q.on_sent(now) {
            self.counters.retransmits += 1;
        }
        self.counters.data_sent += 1;
        let p = &self.cfg.dcqcn;
        q.rp.on_sent(p, now, u64::from(size));
        let rate = if self.cfg.dcqcn_on {
            q.rp.rate_bps()
        } else {
            p.line_bps
        };
        // Never faster than the port: a dead port (drops at injection) cannot make it burst.
        q.gap_from = q.next_tx.max(now);
        q.gap_bytes = size;
        q.next_tx = q
            .gap_from
            .saturating_add(serialization_time(u64::from(size), rate.min(p.line_bps)));
        let deadline = q.deadline(self.rto);
        let plane = u32::from(q.plane);
        match fab.inject(s, self.host, plane, pkt) {
            Ok(()) => self.counters.tx_packets += 1,
            Err(_) => self.counters.inject_errors += 1,
        }
        if let Some(d) = deadline {
            self.arm_timer(d, s, me);
        }
    }

    fn arm_timer(&mut self, t: Time, s: &mut Scheduler<'_>, me: ComponentId) {
        let t = t.max(s.now());
        if self.timer_armed.is_some_and(|a| a <= t) {
            return;
        }
        if s.at(t, me, ev::TIMER, u64::from(self.host)).is_ok() {
            self.timer_armed = Some(t);
        }
    }
}

enum Pick {
    Ready(usize),
    At(Time),
    Idle,
}

fn min_time(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}
