//! One QP's full state: the state machine, its EV table and sprayer, its CC, its requester and
//! responder halves, and the glue between them. [`super::Engine`] owns a table of these.

use heapless::Deque;
use mrc_abi::wire::{AckRepr, EvFormat, EvxRepr, NackRepr, RethRepr, TsxRepr};
use mrc_abi::Psn;

use crate::datapath::ack_gen::AckEvent;
use crate::datapath::sprayer::{EvSlot, Sprayer, WEIGHT_MAX};
use crate::engine::cc::{Cc, Controller};
use crate::engine::ev_state::{EvEvent, EvState, EvTable, MAX_PLANES};
use crate::engine::packet::{CompletionError, TxBody, TxPacket};
use crate::engine::qp::{InitParams, QpState};
use crate::engine::requester::{DataHdr, FastTx, NewTx, Requester, RetxTx, Stall};
use crate::engine::responder::Responder;
use crate::engine::timer_wheel::TimerHandle;

/// An EV state change, tagged with its QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QpEvEvent {
    pub qpn: u32,
    pub event: EvEvent,
}

/// Capacity of the engine's EV event queue.
pub const EV_EVENT_CAP: usize = 64;
/// Capacity of the engine's control packet queue (ACK, NACK, probes, probe replies).
pub const CTRL_CAP: usize = 64;

/// Timer kinds per QP.
pub(crate) const T_RETRY: usize = 0;
pub(crate) const T_ACK: usize = 1;
pub(crate) const T_PROBE: usize = 2;
pub(crate) const TIMER_KINDS: usize = 3;

/// Transmit-side stall counters of one QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StallCounters {
    pub window: u64,
    pub cc: u64,
    pub wimm: u64,
    /// No usable EV on any plane: the packet waits.
    pub no_ev: u64,
}

/// One QP. See the module docs.
pub struct Qp<
    const EVS: usize,
    const P: usize,
    const WIN: usize,
    const WORDS: usize,
    const SQ: usize,
    const RQ: usize,
> {
    pub(crate) qpn: u32,
    pub(crate) state: QpState,
    pub(crate) init: Option<InitParams>,
    pub(crate) dest_qpn: u32,
    pub(crate) ev: EvTable<EVS>,
    pub(crate) sprayer: Sprayer<EVS, P>,
    pub(crate) cc: Cc,
    pub(crate) req: Option<Requester<WIN, SQ>>,
    pub(crate) resp: Option<Responder<WORDS, RQ>>,
    pub(crate) timers: [Option<(TimerHandle, u64)>; TIMER_KINDS],
    pub(crate) stalls: StallCounters,
    pub(crate) ev_format: EvFormat,
    pub(crate) value_base: u32,
    pub(crate) skips_seen: u64,
    /// EVs whose sprayer skip-once flag was set and not yet seen served (so serving a skip
    /// looks at these, not at all `EVS`); `skip_overflow` when more were marked than fit.
    pub(crate) skip_marks: heapless::Vec<u16, SKIP_MARKS>,
    pub(crate) skip_overflow: bool,
}

/// Skip-once flags tracked individually; beyond that a served skip scans the whole table.
const SKIP_MARKS: usize = 16;

impl<
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
    > Qp<EVS, P, WIN, WORDS, SQ, RQ>
{
    /// Bind the INIT profiles: a fresh EV table, sprayer table and controller.
    pub(crate) fn apply_init(&mut self, p: InitParams) -> Result<(), crate::engine::qp::QpError> {
        use crate::engine::qp::QpError;
        let mut table = p.ev_profile.table;
        // The sprayer holds at most P planes.
        table.planes = table.planes.min(P.min(MAX_PLANES) as u8).max(1);
        // Checked before anything changes; the EV table is then rebuilt in place (no
        // table-sized temporary on the NIC core's stack).
        EvTable::<EVS>::check(&table).map_err(QpError::Ev)?;
        let cc = p.cc_profile.build()?;
        self.ev.reset(table).map_err(QpError::Ev)?;
        self.cc = cc;
        let mut sprayer = Sprayer::new();
        self.ev.for_each_usable(|i, plane| {
            let _ = sprayer.set_ev(
                i,
                EvSlot {
                    usable: true,
                    weight: 1,
                    plane,
                    skip_once: false,
                },
            );
        });
        self.sprayer = sprayer;
        self.skips_seen = 0;
        self.skip_marks.clear();
        self.skip_overflow = false;
        self.ev_format = p.ev_profile.format;
        self.value_base = p.ev_profile.value_base;
        self.init = Some(p);
        Ok(())
    }

    pub(crate) fn ev_value(&self, index: u16) -> u32 {
        self.value_base.wrapping_add(u32::from(index))
    }

    /// Move to ERROR with a cause for each half.
    pub(crate) fn fail(&mut self, req_cause: CompletionError, resp_cause: CompletionError) {
        self.state = QpState::Error;
        if let Some(r) = self.req.as_mut() {
            r.enter_error(req_cause);
        }
        if let Some(r) = self.resp.as_mut() {
            r.enter_error(resp_cause);
        }
    }

    /// Whether a transmit poll could give a data packet of this QP: in RTS with send work
    /// (see `Requester::has_send_work`). When not, polling it changes nothing.
    #[inline]
    pub(crate) fn wants_to_send(&self) -> bool {
        self.state == QpState::Rts && self.req.as_ref().is_some_and(|r| r.has_send_work())
    }

    /// The sprayer served skip-once flags since the last [`Self::sync_ev`].
    pub(crate) fn skips_pending(&self) -> bool {
        self.sprayer.counters().skips != self.skips_seen
    }

    /// Whether [`Self::sync_ev`] has anything to do (served skips or queued EV events); when
    /// not, it would return `false` having changed nothing.
    #[inline]
    pub(crate) fn ev_sync_pending(&self) -> bool {
        self.skips_pending() || self.ev.has_events()
    }

    /// Apply queued EV state changes to the sprayer, pass them on, rebalance planes.
    #[inline(never)]
    pub(crate) fn sync_ev(
        &mut self,
        out: &mut Deque<QpEvEvent, EV_EVENT_CAP>,
        dropped: &mut u64,
    ) -> bool {
        let skips = self.sprayer.counters().skips;
        if skips != self.skips_seen {
            self.skips_seen = skips;
            self.serve_skips();
        }
        let mut changed = false;
        while let Some(e) = self.ev.poll_event() {
            changed = true;
            let _ = match e.new {
                EvState::Good => self.sprayer.set_usable(e.ev, true),
                EvState::Skip => {
                    if self.skip_marks.push(e.ev).is_err() {
                        self.skip_overflow = true;
                    }
                    self.sprayer
                        .set_usable(e.ev, true)
                        .and_then(|()| self.sprayer.mark_skip(e.ev))
                }
                EvState::AssumedBad | EvState::Denied => self.sprayer.set_usable(e.ev, false),
            };
            let ev = QpEvEvent {
                qpn: self.qpn,
                event: e,
            };
            if out.push_back(ev).is_err() {
                *dropped += 1;
            }
        }
        if changed {
            self.rebalance_planes();
        }
        changed
    }

    /// The sprayer served skip-once flags: every `Skip` EV whose flag is now clear becomes
    /// `Good`. Looks only at the EVs marked since (all of them after an overflow).
    #[inline(never)]
    fn serve_skips(&mut self) {
        let served = |ev: &EvTable<EVS>, sp: &Sprayer<EVS, P>, i: u16| {
            ev.state(i) == Ok(EvState::Skip) && sp.ev(i).is_some_and(|s| !s.skip_once)
        };
        if self.skip_overflow {
            self.skip_overflow = false;
            self.skip_marks.clear();
            for i in 0..self.ev.config().evs {
                if served(&self.ev, &self.sprayer, i) {
                    let _ = self.ev.handle_skip_served(i);
                } else if self.sprayer.ev(i).is_some_and(|s| s.skip_once)
                    && self.skip_marks.push(i).is_err()
                {
                    self.skip_overflow = true;
                }
            }
            return;
        }
        let mut k = 0;
        while let Some(&i) = self.skip_marks.get(k) {
            if self.sprayer.ev(i).is_some_and(|s| s.skip_once) {
                k += 1; // not served yet
                continue;
            }
            if served(&self.ev, &self.sprayer, i) {
                let _ = self.ev.handle_skip_served(i);
            }
            self.skip_marks.swap_remove(k);
        }
    }

    /// Capacity-weighted plane balance: plane weight proportional to its `Good` EVs, rounded
    /// to the nearest of `1..=WEIGHT_MAX` (rounding up gave a plane with 56 of 64 EVs 14/15 of
    /// the others' weight, 0.933, where its capacity is 0.875; 13/15 is 0.867).
    fn rebalance_planes(&mut self) {
        let caps = self.ev.plane_capacities();
        let max = caps.iter().copied().max().unwrap_or(0);
        if max == 0 {
            return;
        }
        for (p, &cap) in caps.iter().enumerate().take(P) {
            let (cap, max) = (u32::from(cap), u32::from(max));
            let w = (2 * u32::from(WEIGHT_MAX) * cap + max) / (2 * max);
            let w = w.clamp(1, u32::from(WEIGHT_MAX)) as u8;
            // (rewriting a plane's weight would change nothing: every write to the sprayer
            // keeps what it derives from the weights current)
            if self.sprayer.plane_weight(p as u8) != Some(w) {
                let _ = self.sprayer.set_plane_weight(p as u8, w);
            }
        }
    }

    /// A new data packet the requester's fast path sent, the datapath's descriptor.
    #[inline]
    fn new_packet(&self, now_ns: u64, t: &NewTx) -> TxPacket {
        TxPacket {
            src_qpn: self.qpn,
            dest_qpn: self.dest_qpn,
            psn: t.psn,
            msn: t.msn,
            ev_format: self.ev_format,
            evx: EvxRepr {
                ev_index: t.ev.index,
                plane: t.ev.plane,
                ev_value: self.value_base.wrapping_add(u32::from(t.ev.index)),
            },
            tx_ts_ns: now_ns as u32,
            echo_ts_ns: 0,
            retransmit: false,
            ack_req: t.ack_req,
            body: TxBody::Write {
                segment: t.segment,
                reth: RethRepr {
                    va: t.remote_va,
                    rkey: t.rkey,
                    dma_len: t.payload_len,
                },
                local: t.local,
            },
        }
    }

    /// [`Self::poll_data`] for the common packet (the requester's next new packet, see
    /// `Requester::send_new_fast`), written into `out`; `false`, having changed nothing,
    /// otherwise.
    #[inline(always)]
    pub(crate) fn poll_new_fast(&mut self, now_ns: u64, out: &mut TxPacket) -> bool {
        // (a pick that fails is counted by the sprayer: leave that to `poll_data`)
        if !self.sprayer.has_usable() {
            return false;
        }
        let Some(req) = self.req.as_mut() else {
            return false;
        };
        let sprayer = &mut self.sprayer;
        match req.send_new_fast(&self.cc, now_ns, || sprayer.next_ev()) {
            FastTx::Sent(t) => {
                *out = self.new_packet(now_ns, &t);
                true
            }
            FastTx::NoEv | FastTx::Fallback => false,
        }
    }

    /// [`Self::poll_new_fast`] repeated into `out` (see `Requester::send_new_run`): runs of
    /// new packets, one per work request, ending after a packet that served a sprayer
    /// skip-once flag (the caller syncs the EV states before the next pick, as per packet).
    /// Returns the packets sent and whether another call may follow (the slot after them is
    /// scratch: it may have been written).
    #[inline(never)]
    pub(crate) fn poll_new_run(&mut self, now_ns: u64, out: &mut [TxPacket]) -> (usize, bool) {
        if !self.sprayer.has_usable() {
            return (0, false);
        }
        let Some(req) = self.req.as_mut() else {
            return (0, false);
        };
        let hdr = DataHdr {
            src_qpn: self.qpn,
            dest_qpn: self.dest_qpn,
            ev_format: self.ev_format,
            value_base: self.value_base,
        };
        req.send_new_run(
            &self.cc,
            now_ns,
            &hdr,
            out,
            &mut self.sprayer,
            self.skips_seen,
        )
    }

    /// When [`Self::poll_data`] would return `None` at once, the stall it counts (`Idle`:
    /// none): the QP is not in RTS, has no requester, or its requester reports a stall
    /// (`Requester::idle_stall`). `None` when it would look further.
    #[inline]
    pub(crate) fn idle_stall(&self) -> Option<Stall> {
        if self.state != QpState::Rts {
            return Some(Stall::Idle);
        }
        match &self.req {
            Some(req) => req.idle_stall(&self.cc),
            None => Some(Stall::Idle),
        }
    }

    /// Count a stall [`Self::idle_stall`] reported.
    #[inline]
    pub(crate) fn count_stall(&mut self, stall: Stall) {
        match stall {
            Stall::Cc => self.stalls.cc += 1,
            Stall::Window => self.stalls.window += 1,
            Stall::Wimm => self.stalls.wimm += 1,
            Stall::Idle => {}
        }
    }

    /// [`Self::poll_data`] for a QP whose requester has a retransmission that may leave
    /// (`Requester::has_retransmit`, as the engine's retransmission queue asks first): the
    /// same packet, stalls and effects, with only the check left that can fail for it (the
    /// CC window). Anything else goes the general way.
    #[inline]
    pub(crate) fn poll_retx(&mut self, now_ns: u64) -> Option<TxPacket> {
        if !crate::engine::fast_paths::enabled() {
            return self.poll_data(now_ns);
        }
        if self.state != QpState::Rts {
            return None;
        }
        let req = self.req.as_mut()?;
        if !req.has_retransmit() {
            return self.poll_data(now_ns);
        }
        // (not in ERROR, something queued, the loss window open: `idle_stall` says `Cc` or
        // nothing)
        if !self.cc.can_send(req.inflight_bytes()) {
            self.count_stall(Stall::Cc);
            return None;
        }
        let sprayer = &mut self.sprayer;
        match req.send_retx(now_ns, || sprayer.next_ev()) {
            RetxTx::Sent(t) => {
                let mut p = self.new_packet(now_ns, &t);
                p.retransmit = true;
                Some(p)
            }
            RetxTx::NoEv => {
                self.stalls.no_ev += 1;
                None
            }
            // (every entry was acknowledged: new data, as `peek` goes on)
            RetxTx::Drained => self.poll_data(now_ns),
        }
    }

    /// The next data packet (retransmission first), if the window, CC and EVs allow.
    #[inline]
    pub(crate) fn poll_data(&mut self, now_ns: u64) -> Option<TxPacket> {
        if self.state != QpState::Rts {
            return None;
        }
        // The CC window closed (the common "nothing to send"): what `peek` reports, at once.
        if let Some(stall) = self
            .idle_stall()
            .filter(|_| crate::engine::fast_paths::enabled())
        {
            self.count_stall(stall);
            return None;
        }
        let req = self.req.as_mut()?;
        let sprayer = &mut self.sprayer;
        // A retransmission (what `peek` would return first: the checks above are its own).
        if req.retx_queued() && crate::engine::fast_paths::enabled() {
            match req.send_retx(now_ns, || sprayer.next_ev()) {
                RetxTx::Sent(t) => {
                    let mut p = self.new_packet(now_ns, &t);
                    p.retransmit = true;
                    return Some(p);
                }
                RetxTx::NoEv => {
                    self.stalls.no_ev += 1;
                    return None;
                }
                RetxTx::Drained => {}
            }
        }
        let sprayer = &mut self.sprayer;
        match req.send_new_fast(&self.cc, now_ns, || sprayer.next_ev()) {
            FastTx::Sent(t) => {
                return Some(self.new_packet(now_ns, &t));
            }
            FastTx::NoEv => {
                self.stalls.no_ev += 1;
                return None;
            }
            FastTx::Fallback => {}
        }
        // (the candidate read where `peek` wrote it, not moved out first)
        let peeked = req.peek(&self.cc);
        let c = match &peeked {
            Ok(c) => c,
            Err(stall) => {
                self.count_stall(*stall);
                return None;
            }
        };
        let Some(mut pick) = self.sprayer.next_ev() else {
            self.stalls.no_ev += 1;
            return None;
        };
        if c.avoid_ev == Some(pick.index) {
            if let Some(p2) = self.sprayer.next_ev() {
                pick = p2;
            }
        }
        req.commit(c, pick.index, pick.plane, now_ns);
        Some(TxPacket {
            src_qpn: self.qpn,
            dest_qpn: self.dest_qpn,
            psn: c.desc.psn,
            msn: c.msn,
            ev_format: self.ev_format,
            evx: EvxRepr {
                ev_index: pick.index,
                plane: pick.plane,
                ev_value: self.ev_value(pick.index),
            },
            tx_ts_ns: now_ns as u32,
            echo_ts_ns: 0,
            retransmit: c.retransmit,
            ack_req: c.ack_req,
            body: TxBody::Write {
                segment: c.segment,
                reth: RethRepr {
                    va: c.desc.remote_va,
                    rkey: c.desc.rkey,
                    dma_len: c.desc.payload_len,
                },
                local: c.local,
            },
        })
    }

    /// A control packet to the peer QP on EV `evx`.
    pub(crate) fn control(
        &self,
        now_ns: u64,
        psn: Psn,
        evx: EvxRepr,
        echo: u32,
        body: TxBody,
    ) -> TxPacket {
        TxPacket {
            src_qpn: self.qpn,
            dest_qpn: self.dest_qpn,
            psn,
            msn: 0,
            ev_format: self.ev_format,
            evx,
            tx_ts_ns: now_ns as u32,
            echo_ts_ns: echo,
            retransmit: false,
            ack_req: false,
            body,
        }
    }

    /// The EV an ACK or NACK travels on: the QP's sprayer picks it like a data packet's, so
    /// acknowledgements share the planes as data does. The packet it acknowledges (`ev`,
    /// `plane`, echoed in the body for the sender's per-EV feedback) is the fallback when no
    /// EV is usable. Going back on the acknowledged packet's own EV put every ACK of the
    /// default run on one plane: a message's last packet asks for the ACK, and with 16
    /// packets a message and 4 planes that packet always took the same plane, whose port
    /// then carried ~2 % more bytes than the others and, as the NIC's bottleneck, left the
    /// other three idle 2-3 % of the time. Always inlined, as [`Self::ack_packet`].
    #[inline(always)]
    fn ack_travel_ev(&mut self, ev: u16, plane: u8) -> EvxRepr {
        let (ev_index, plane) = match self.sprayer.has_usable().then(|| self.sprayer.next_ev()) {
            Some(Some(pick)) => (pick.index, pick.plane),
            _ => (ev, plane),
        };
        EvxRepr {
            ev_index,
            plane,
            ev_value: self.ev_value(ev_index),
        }
    }

    /// The packet for an ACK generator output: it acknowledges the data packet's EV and plane
    /// (in the body) and travels on an EV of its own ([`Self::ack_travel_ev`]). Always inlined
    /// (once per ACK into the receive paths: measured cheaper than the call).
    #[inline(always)]
    pub(crate) fn ack_packet(&mut self, now_ns: u64, e: &AckEvent, echo: u32) -> TxPacket {
        let (ev, plane) = match e {
            AckEvent::Ack(a) => (a.ev_index, a.plane),
            AckEvent::Nack(n) => (n.ev_index, n.plane),
        };
        let evx = self.ack_travel_ev(ev, plane);
        self.ack_packet_on(now_ns, e, echo, evx)
    }

    /// The packet for an ACK generator output, travelling on `evx`. Always inlined, as
    /// [`Self::ack_packet`] (the packet then built straight into the control queue's slot).
    #[inline(always)]
    pub(crate) fn ack_packet_on(
        &self,
        now_ns: u64,
        e: &AckEvent,
        echo: u32,
        evx: EvxRepr,
    ) -> TxPacket {
        match e {
            AckEvent::Ack(a) => {
                let body = TxBody::Ack(AckRepr {
                    cum_psn: a.cum_psn,
                    sack_base: a.sack_base,
                    sack_bitmap: a.sack_bitmap,
                    ev_index: a.ev_index,
                    plane: a.plane,
                    ecn_plane_mask: a.ecn_plane_mask,
                    ce_count: a.ce_count,
                    pkt_count: a.pkt_count,
                });
                self.control(now_ns, a.cum_psn, evx, a.echo_ts_ns, body)
            }
            AckEvent::Nack(n) => {
                let body = TxBody::Nack(NackRepr {
                    reason: n.reason,
                    psn: n.psn,
                    cum_psn: n.cum_psn,
                    ev_index: n.ev_index,
                    plane: n.plane,
                });
                self.control(now_ns, n.cum_psn, evx, echo, body)
            }
        }
    }

    /// The RTT sample of a packet echoing `tsx` (0 = none).
    pub(crate) fn rtt_ns(now_ns: u64, tsx: Option<TsxRepr>) -> u64 {
        match tsx {
            Some(t) if t.echo_ts_ns != 0 => u64::from((now_ns as u32).wrapping_sub(t.echo_ts_ns)),
            _ => 0,
        }
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The requester half (from RTS).
    pub fn requester(&self) -> Option<&Requester<WIN, SQ>> {
        self.req.as_ref()
    }

    /// The responder half (from RTR).
    pub fn responder(&self) -> Option<&Responder<WORDS, RQ>> {
        self.resp.as_ref()
    }

    /// The EV table.
    pub fn ev_table(&self) -> &EvTable<EVS> {
        &self.ev
    }

    /// Transmit stalls.
    pub fn stalls(&self) -> StallCounters {
        self.stalls
    }

    /// Controller window (for reports).
    pub fn cwnd_bytes(&self) -> u64 {
        self.cc.cwnd_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ev_state::EvConfig;
    use crate::engine::qp::{CcProfile, EvProfile, InitParams, QpHint};

    type TestQp = Qp<256, 4, 64, 4, 4, 4>;

    /// A QP past INIT with 256 EVs over 4 planes (EV `i` on plane `i % 4`).
    fn initialised() -> TestQp {
        let mut qp: TestQp = Qp::new(0).unwrap();
        qp.apply_init(InitParams {
            hint: QpHint {
                traffic_class: 0,
                priority: 0,
            },
            ev_profile: EvProfile {
                table: EvConfig::new(256, 4),
                format: EvFormat::Udp,
                value_base: 0,
            },
            cc_profile: CcProfile::Fixed { cwnd_bytes: 1 },
        })
        .unwrap();
        qp
    }

    /// An ACK for a data packet that came on EV 3 (plane 3).
    fn ack_of_ev3() -> AckEvent {
        AckEvent::Ack(crate::datapath::ack_gen::AckSummary {
            qpn: 0,
            cum_psn: Psn::new(16),
            sack_base: Psn::new(16),
            sack_bitmap: 0,
            ev_index: 3,
            plane: 3,
            ecn_plane_mask: 0,
            ce_count: 0,
            pkt_count: 16,
            echo_ts_ns: 0,
        })
    }

    #[test]
    fn acks_travel_on_the_sprayers_evs_and_name_the_acked_one() {
        let mut qp = initialised();
        let mut per_plane = [0u32; 4];
        for _ in 0..64 {
            let p = qp.ack_packet(0, &ack_of_ev3(), 0);
            let TxBody::Ack(a) = p.body else {
                panic!("not an ACK: {p:?}");
            };
            // The body names the acknowledged packet's EV for the sender's feedback ...
            assert_eq!((a.ev_index, a.plane), (3, 3));
            // ... the header carries the EV the ACK travels on, the sprayer's pick.
            assert_eq!(p.evx.plane, (p.evx.ev_index % 4) as u8);
            per_plane[usize::from(p.evx.plane)] += 1;
        }
        // Spread like data (on the acknowledged EV, all 64 took plane 3).
        assert_eq!(per_plane, [16; 4]);
        // Retired EVs carry no ACK: plane 0's EVs all go.
        let (mut out, mut dropped) = (Deque::new(), 0);
        for k in 0..64u16 {
            let _ = qp.ev.handle_shared_loss(4 * k, 0);
        }
        assert!(qp.sync_ev(&mut out, &mut dropped));
        for _ in 0..64 {
            let p = qp.ack_packet(0, &ack_of_ev3(), 0);
            assert_ne!(p.evx.plane, 0, "an ACK took a retired EV: {:?}", p.evx);
        }
    }

    #[test]
    fn acks_of_a_qp_with_no_usable_ev_go_back_on_the_acked_ev() {
        // Before INIT the sprayer has no EV.
        let mut qp: TestQp = Qp::new(0).unwrap();
        let p = qp.ack_packet(0, &ack_of_ev3(), 0);
        assert_eq!((p.evx.ev_index, p.evx.plane), (3, 3));
        assert_eq!(qp.sprayer.counters().no_usable, 0);
    }

    #[test]
    fn plane_weights_round_to_the_nearest_capacity_share() {
        let mut qp = initialised();
        let (mut out, mut dropped) = (Deque::new(), 0);
        // EV i is on plane i % 4. 4 of plane 0's 64 EVs retire: 15 x 60/64 = 14.06, so 14
        // (rounding up kept 15: the plane took a full share on 94 % of its routes).
        for k in 0..4u16 {
            assert!(qp.ev.handle_shared_loss(4 * k, 0).unwrap());
        }
        assert!(qp.sync_ev(&mut out, &mut dropped));
        assert_eq!(qp.sprayer.plane_weight(0), Some(14));
        // 8 retired: 15 x 0.875 = 13.1: 13 (0.867), not 14 (0.933: over-asked by 7 %).
        for k in 4..8u16 {
            assert!(qp.ev.handle_shared_loss(4 * k, 0).unwrap());
        }
        assert!(qp.sync_ev(&mut out, &mut dropped));
        assert_eq!(qp.sprayer.plane_weight(0), Some(13));
        assert_eq!(qp.sprayer.plane_weight(1), Some(15));
    }
}
