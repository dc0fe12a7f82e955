//! One QP's datapath context: its header fields, EV table (the sprayer), per-EV delivery
//! credits, send side and receive side, and the QP-targeted firmware commands it takes.

use heapless::Vec;
use mrc_abi::device::csr::{self, CsrEvent, ProbeReply as ProbeReplyEntry, RxFatal, SkipServed};
use mrc_abi::device::EvState;
use mrc_abi::wire::{AckRepr, EvFormat, EvxRepr, NackReason, NackRepr, ProbeRepr, Segment};
use mrc_abi::Psn;

use super::events::{Ctrl, Events};
use super::rx::{RxCounters, RxSide, WriteResult};
use super::tx::{Credits, PostError, Reorder, Stall, TxCounters, TxSide};
use super::{DatapathConfig, Hdr};
use crate::datapath::ack_gen::{AckEvent, AckSummary, RxPacket, TrimMark};
use crate::datapath::blocks::{Blocks, SprayerCmd, SprayerPort};
use crate::datapath::packet::{DropReason, Packet, PacketBody, RxVerdict, SendWr, VerdictSink};
use crate::datapath::placement::{Placement, Regions};
use crate::datapath::sprayer::{EvSlot, Sprayer, SprayerCounters};

mod rx_run;
mod tracker;

/// The QP state as the datapath knows it (from the firmware's context writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DpState {
    /// No context: packets to it are dropped.
    Reset,
    /// EV table written; no traffic.
    Init,
    /// Receiving.
    Rtr,
    /// Receiving and sending.
    Rts,
    /// Failed: writes to it are NACKed INVALID_QP, nothing more is sent.
    Error,
}

/// What a report about one QP shows (for inspection and the simulator's reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpView {
    pub state: DpState,
    /// Oldest unacknowledged and next PSN of the send side.
    pub una: Psn,
    pub nxt: Psn,
    pub inflight_bytes: u64,
    pub cwnd_bytes: u64,
    /// Send work requests held (not yet acknowledged).
    pub sq_queued: usize,
    /// The receive side's cumulative PSN.
    pub rx_cum: Psn,
    pub tx: TxCounters,
    pub rx: RxCounters,
    pub sprayer: SprayerCounters,
}

/// The fields of [`QpView`] a host polls on every input (its stall watch, its send-queue room):
/// a few loads, where a view copies every counter of the QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpProgress {
    pub state: DpState,
    /// Oldest unacknowledged PSN of the send side.
    pub una: Psn,
    pub inflight_bytes: u64,
    /// Send work requests held (not yet acknowledged).
    pub sq_queued: usize,
}

/// Served skips one look reports at most (a poll's event room counts them: 2 + this); more
/// wait for the next look.
const SKIP_REPORTS: usize = 16;

/// The datapath's state of one QP; sizes as in [`crate::capacity::Capacity`].
pub struct DpQp<
    const EVS: usize,
    const P: usize,
    const WIN: usize,
    const WORDS: usize,
    const SQ: usize,
    const RQ: usize,
> {
    state: DpState,
    hdr: Hdr,
    sprayer: Sprayer<EVS, P>,
    skips_seen: u64,
    /// EVs whose skip flag firmware set, each at most once (so the list never overflows):
    /// the first `skips_served` in the order the sprayer served them (awaiting their
    /// report), the rest still marked, in marking order.
    skip_marks: Vec<u16, EVS>,
    skips_served: usize,
    credits: [u16; EVS],
    /// At least every counter of `credits` (see `Credits::bound`).
    credits_bound: u16,
    tx: TxSide<WIN, SQ>,
    rx: RxSide<WORDS, RQ>,
}

/// The NIC-wide parts a received packet may touch beside its QP: the region table, the control
/// packet queue and the block ports.
pub struct RxShared<'a, R> {
    pub regions: &'a mut R,
    pub ctrl: &'a mut Ctrl,
    pub blocks: &'a mut dyn Blocks,
    /// A block has a stand-in (`!blocks.models_only()`, known to the stage without a call).
    pub stand_in: bool,
}

/// What the stage does with one QP context, at any size (implemented by [`DpQp`]). The
/// methods take the shared NIC resources they need (configuration, regions, control queue,
/// event queue) as arguments.
pub trait QpContext {
    /// A context with no QP (RESET) for QP number `qpn`.
    fn new(qpn: u32) -> Self;
    /// The state.
    fn state(&self) -> DpState;
    /// For reports.
    fn view(&self) -> QpView;
    /// The part of [`QpContext::view`] a host polls often.
    fn progress(&self) -> QpProgress;
    /// Post a send work request (RTS only).
    ///
    /// # Errors
    /// [`PostError`].
    fn post_send(&mut self, wr: SendWr) -> Result<(), PostError>;
    /// Send work requests the send queue has room for (a post may still be refused for
    /// another reason: the QP not sending, a bad work request).
    fn send_queue_room(&self) -> usize;
    /// A receive work request was posted (RTR or RTS).
    ///
    /// # Errors
    /// [`PostError::NotSending`] before RTR or in ERROR, [`PostError::QueueFull`].
    fn post_recv(&mut self, wr_id: u64) -> Result<(), PostError>;
    /// The firmware's `CompleteSends` order: the `count` oldest retired send work requests
    /// complete (their slots freed); `signaled` gets the id of each that asked for a
    /// completion, in posting order.
    fn complete_sends(&mut self, count: u16, signaled: impl FnMut(u64));
    /// One firmware command addressed to this QP (see the module docs of `stage`).
    fn handle_command(
        &mut self,
        now_ns: u64,
        cmd: &CsrEvent,
        cfg: &DatapathConfig,
        ctrl: &mut Ctrl,
        blocks: &mut dyn Blocks,
    );
    /// A received ACK addressed to this QP (what [`Self::handle_packet`] does with one: it
    /// touches the send side alone). Room for `tx::ACK_EVENTS` events is the caller's to
    /// check.
    fn handle_ack(
        &mut self,
        now_ns: u64,
        pkt: &Packet,
        a: &AckRepr,
        events: &mut Events,
    ) -> RxVerdict;
    /// One received packet addressed to this QP. Room for `tx::ACK_EVENTS` events is
    /// the caller's to check.
    fn handle_packet<R: Regions>(
        &mut self,
        now_ns: u64,
        pkt: &Packet,
        cfg: &DatapathConfig,
        shared: RxShared<'_, R>,
        events: &mut Events,
    ) -> RxVerdict;
    /// A run of received writes at the front of `pkts` taken at once, each answered in
    /// `verdicts` (from index `at` on): the verdicts, state, counters, control packets and
    /// reports of as many [`Self::handle_packet`] calls (the run takes only writes that report
    /// no event).
    /// Returns how many were taken and the coalescing deadline they leave for the caller to
    /// note, as it notes one after each packet (`None`: nothing to note); `(0, None)`:
    /// nothing changed, take the first packet with [`Self::handle_packet`]. A context without
    /// runs takes none, and so does one that is not receiving (RESET among the states: the
    /// stage does not look first).
    fn handle_write_run<R: Regions, V: VerdictSink + ?Sized>(
        &mut self,
        now_ns: u64,
        pkts: &[Packet],
        verdicts: &mut V,
        at: usize,
        shared: RxShared<'_, R>,
    ) -> (usize, Option<u64>) {
        let _ = (now_ns, pkts, verdicts, at, shared);
        (0, None)
    }
    /// The next data packet into `out` (room for 2 + `SKIP_REPORTS` events is the caller's).
    ///
    /// # Errors
    /// Why none can leave now.
    fn poll_data(
        &mut self,
        now_ns: u64,
        events: &mut Events,
        out: &mut Packet,
        blocks: &mut dyn Blocks,
    ) -> Result<(), Stall>;
    /// New data packets in a run, into the front of `out`: the packets and effects of as many
    /// [`Self::poll_data`] calls, each of which would have sent a new packet (see
    /// `TxSide::poll_new_run` for where a run ends). `(0, None)`: nothing changed, poll one
    /// packet with [`Self::poll_data`]; `(k, Some(stall))`: `k` packets (possibly none), then
    /// the attempt at the next failed as [`Self::poll_data`] would have (counted). `min_room`:
    /// the event room a poll needs (2 + `SKIP_REPORTS`); the caller checked it before the first
    /// packet, the run keeps it before each. `stall_after`: the caller would poll this QP
    /// again after the run (see `TxSide::poll_new_run`): the run reports that poll's stall.
    /// A context without runs sends none.
    fn poll_data_run(
        &mut self,
        now_ns: u64,
        events: &mut Events,
        out: &mut [Packet],
        min_room: usize,
        stall_after: bool,
    ) -> (usize, Option<Stall>) {
        let _ = (now_ns, events, out, min_room, stall_after);
        (0, None)
    }
    /// Something waits to be sent.
    fn wants_to_send(&self) -> bool;
    /// A retransmission waits (it goes ahead of other QPs' new data).
    fn has_retransmit(&self) -> bool;
    /// When the coalesced ACK is due.
    fn ack_deadline_ns(&self) -> Option<u64>;
    /// The coalescing timer fired: the ACK, if one is due, into `ctrl`.
    fn handle_timeout(&mut self, now_ns: u64, ctrl: &mut Ctrl, blocks: &mut dyn Blocks) -> bool;
    /// Plane `plane` went down: its weight 0 in the sprayer (past RESET), what was in flight
    /// on it queued again (in RTS).
    fn plane_down(&mut self, plane: u8, blocks: &mut dyn Blocks);
    /// Reports waiting outside any input (flushed work requests, placed immediates) while
    /// `events` has room.
    fn poll_reports(&mut self, events: &mut Events);
    /// Whether [`Self::poll_reports`] has something to report.
    fn reports_pending(&self) -> bool;
    /// After a run of plain writes this QP took (so receiving), the part of
    /// [`Self::reports_pending`] the run can change: a placed immediate now ready to report
    /// (a flush was pending, and noted by the stage, before).
    fn imm_reports_pending(&self) -> bool {
        self.reports_pending()
    }
}

impl<
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
    > DpQp<EVS, P, WIN, WORDS, SQ, RQ>
{
    /// The EV an ACK or NACK travels on: the QP's sprayer picks it like a data packet's, so
    /// acknowledgements share the planes as data does (on the acknowledged packet's own EV,
    /// every ACK of a message-sized burst would take the plane of its last packet). The
    /// acknowledged packet's EV (echoed in the body for the sender's per-EV feedback) is the
    /// fallback when no EV is usable.
    fn ack_travel_ev(&mut self, ev: u16, plane: u8, blocks: &mut dyn Blocks) -> EvxRepr {
        let mut port = self.sprayer_port(blocks);
        let pick = port.has_usable().then(|| port.next_ev()).flatten();
        self.ack_evx(pick.map_or((ev, plane), |p| (p.index, p.plane)))
    }

    /// [`Self::ack_travel_ev`] with every block its model (the receive run's: a stage with
    /// a stand-in takes no runs), the sprayer asked directly rather than through the port.
    /// The fallback `(ev, plane)` is read only when no EV is usable.
    #[inline(always)]
    fn ack_travel_ev_model(&mut self, fallback: impl FnOnce() -> (u16, u8)) -> EvxRepr {
        let pick = self
            .sprayer
            .has_usable()
            .then(|| self.sprayer.next_ev())
            .flatten();
        let pick = pick.map(|p| (p.index, p.plane)).unwrap_or_else(fallback);
        self.ack_evx(pick)
    }

    /// The EVX of an ACK or NACK on EV `ev_index` of `plane` (the pick, or the fallback).
    #[inline(always)]
    fn ack_evx(&mut self, (ev_index, plane): (u16, u8)) -> EvxRepr {
        self.note_served();
        EvxRepr {
            ev_index,
            plane,
            ev_value: self.hdr.value_base.wrapping_add(u32::from(ev_index)),
        }
    }

    /// A control packet to the peer QP on `evx`.
    fn control(&self, now_ns: u64, psn: Psn, evx: EvxRepr, echo: u32, body: PacketBody) -> Packet {
        Packet {
            src_qpn: self.hdr.qpn,
            dest_qpn: self.hdr.dest_qpn,
            psn,
            msn: 0,
            ev_format: self.hdr.ev_format,
            evx,
            tx_ts_ns: now_ns as u32,
            echo_ts_ns: echo,
            retransmit: false,
            ack_req: false,
            trim: TrimMark::None,
            ce: false,
            payload_len: 0,
            body,
        }
    }

    /// The packet for an ACK generator output, travelling on `evx`.
    fn ack_packet_on(&self, now_ns: u64, e: &AckEvent, echo: u32, evx: EvxRepr) -> Packet {
        match e {
            AckEvent::Ack(a) => self.ack_on(now_ns, a, evx),
            AckEvent::Nack(n) => {
                let body = PacketBody::Nack(NackRepr {
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

    /// The packet for ACK `a`, travelling on `evx` (it echoes the triggering packet's send
    /// time).
    #[inline(always)]
    fn ack_on(&self, now_ns: u64, a: &AckSummary, evx: EvxRepr) -> Packet {
        let body = PacketBody::Ack(AckRepr {
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

    /// The packet for an ACK generator output on an EV of its own (with a stand-in tracker,
    /// the caller then gives it the tracker's answer: `Self::track`).
    fn ack_packet(
        &mut self,
        now_ns: u64,
        e: &AckEvent,
        echo: u32,
        blocks: &mut dyn Blocks,
    ) -> Packet {
        let (ev, plane) = match e {
            AckEvent::Ack(a) => (a.ev_index, a.plane),
            AckEvent::Nack(n) => (n.ev_index, n.plane),
        };
        let evx = self.ack_travel_ev(ev, plane, blocks);
        self.ack_packet_on(now_ns, e, echo, evx)
    }

    /// [`Self::ack_packet`] of ACK `a` with every block its model (see
    /// [`Self::ack_travel_ev_model`]), written to `out`.
    pub(super) fn ack_packet_model(&mut self, now_ns: u64, a: &AckSummary, out: &mut Packet) {
        let evx = self.ack_travel_ev_model(|| (a.ev_index, a.plane));
        *out = self.ack_on(now_ns, a, evx);
    }

    /// RESET: a fresh context (and the blocks' state of the QP). Out of line: the context
    /// is built whole on the stack, which no other command needs room for.
    #[cold]
    #[inline(never)]
    fn reset(&mut self, blocks: &mut dyn Blocks) {
        *self = Self::new(self.hdr.qpn);
        blocks.sprayer_reset(self.hdr.qpn);
        blocks.rx_tracker_reset(self.hdr.qpn);
    }

    /// This QP's sprayer behind the stage's block port.
    fn sprayer_port<'a>(&'a mut self, blocks: &'a mut dyn Blocks) -> SprayerPort<'a, EVS, P> {
        SprayerPort {
            model: &mut self.sprayer,
            blocks,
            qp: self.hdr.qpn,
        }
    }

    /// A fresh EV table: `evs` EVs, EV `i` usable on plane `i % planes`.
    fn init_evs(&mut self, evs: u16, planes: u8, blocks: &mut dyn Blocks) {
        let evs = evs.min(EVS as u16);
        let planes = planes.clamp(1, P as u8);
        let mut port = self.sprayer_port(blocks);
        port.reset();
        for i in 0..evs {
            let _ = port.write(SprayerCmd::SetEv(
                i,
                EvSlot {
                    usable: true,
                    weight: 1,
                    plane: (i % u16::from(planes)) as u8,
                    skip_once: false,
                },
            ));
        }
        self.skips_seen = 0;
        self.skip_marks.clear();
        self.skips_served = 0;
        self.credits = [0; EVS];
        self.credits_bound = 0;
    }

    /// The firmware wrote EV `ev`'s state and plane.
    fn write_ev(&mut self, ev: u16, state: EvState, plane: u8, blocks: &mut dyn Blocks) {
        let usable = matches!(state, EvState::Good | EvState::Skip);
        let mut port = self.sprayer_port(blocks);
        let same_plane = port.ev(ev).is_some_and(|s| s.plane == plane);
        if same_plane {
            let _ = port.write(SprayerCmd::SetUsable(ev, usable));
        } else {
            let _ = port.write(SprayerCmd::SetEv(
                ev,
                EvSlot {
                    usable,
                    weight: 1,
                    plane,
                    skip_once: false,
                },
            ));
            if state != EvState::Skip {
                // (the new slot has no skip flag: a mark still waiting is gone, unserved)
                self.unmark(ev);
            }
        }
        if state == EvState::Skip
            && self
                .sprayer_port(blocks)
                .write(SprayerCmd::MarkSkip(ev))
                .is_ok()
        {
            self.note_mark(ev);
        }
    }

    /// Firmware set `ev`'s skip flag (`ev` is below `EVS`: the sprayer took it). An EV
    /// already in `skip_marks` keeps its place: still marked, the flag is the one mark the
    /// sprayer serves once; served and awaiting its report, the report goes out as it is and
    /// the EV is marked again then if its flag is still set (see
    /// [`Self::report_skips_now`]; a flag served again before then shares that report, which
    /// the firmware reads after its last mark either way). Each EV is in the list at most
    /// once, so it never overflows.
    fn note_mark(&mut self, ev: u16) {
        if !self.skip_marks.contains(&ev) {
            // (fits: at most `EVS` distinct EVs)
            let _ = self.skip_marks.push(ev);
        }
    }

    /// `ev`'s skip flag was cleared without being served: it leaves the marked part of
    /// `skip_marks` (nothing is reported for it).
    fn unmark(&mut self, ev: u16) {
        let marked = self.skip_marks.get(self.skips_served..).unwrap_or_default();
        if let Some(k) = marked.iter().position(|&i| i == ev) {
            let _ = self.skip_marks.remove(self.skips_served + k);
        }
    }

    /// Skip flags the sprayer served since the last look move to the served part of
    /// `skip_marks`, in the order served (run after every pick that is not reported at once,
    /// so the reports keep that order however picks and reports interleave; flags one pick
    /// serves are in marking order).
    fn note_served(&mut self) {
        let skips = self.sprayer.counters().skips;
        if skips == self.skips_seen {
            return;
        }
        self.skips_seen = skips;
        let mut j = self.skips_served;
        while let Some(&i) = self.skip_marks.get(j) {
            if !self.sprayer.ev(i).is_some_and(|s| s.skip_once) {
                if let Some(run) = self.skip_marks.get_mut(self.skips_served..=j) {
                    run.rotate_right(1);
                }
                self.skips_served += 1;
            }
            j += 1;
        }
    }

    /// Report each EV whose skip flag the sprayer served, in the order served: at most
    /// [`SKIP_REPORTS`] and the room in `events`; the rest wait for the next look.
    #[inline(always)]
    fn report_skips(&mut self, events: &mut Events) {
        // (the common case, looked at inline: no skip served since the last look, none
        // waiting)
        if self.sprayer.counters().skips == self.skips_seen && self.skips_served == 0 {
            return;
        }
        self.report_skips_now(events);
    }

    /// [`Self::report_skips`] past its quick answer.
    #[inline(never)]
    fn report_skips_now(&mut self, events: &mut Events) {
        self.note_served();
        let n = self.skips_served.min(SKIP_REPORTS).min(events.room());
        if n == 0 {
            return;
        }
        let qpn = self.hdr.qpn;
        for &i in self.skip_marks.iter().take(n) {
            events.push(CsrEvent::SkipServed(SkipServed::new(qpn, i)));
        }
        self.skips_served -= n;
        // The reported EVs move to the end, where an EV marked again while its report
        // waited stays, marked, when its flag is still set (the others leave).
        self.skip_marks.rotate_left(n);
        let len = self.skip_marks.len();
        let mut keep = len - n;
        for k in len - n..len {
            let Some(&i) = self.skip_marks.get(k) else {
                break;
            };
            if self.sprayer.ev(i).is_some_and(|s| s.skip_once) {
                if let Some(slot) = self.skip_marks.get_mut(keep) {
                    *slot = i;
                }
                keep += 1;
            }
        }
        self.skip_marks.truncate(keep);
    }

    fn rx_live(&self) -> bool {
        matches!(self.state, DpState::Rtr | DpState::Rts)
    }

    /// A fatal error found on receive: NACKed already; the QP stops here at once and the
    /// firmware hears of it.
    fn fail_rx(&mut self, psn: Psn, reason: NackReason, events: &mut Events) {
        self.state = DpState::Error;
        self.tx.enter_error();
        self.rx.stop();
        events.push(CsrEvent::RxFatal(RxFatal::new(self.hdr.qpn, psn, reason)));
    }

    fn rx_write<R: Regions>(
        &mut self,
        now_ns: u64,
        pkt: &Packet,
        cfg: &DatapathConfig,
        shared: RxShared<'_, R>,
        events: &mut Events,
    ) -> RxVerdict {
        let RxShared {
            regions,
            ctrl,
            blocks,
            stand_in,
        } = shared;
        let PacketBody::Write { segment, reth, .. } = &pkt.body else {
            return RxVerdict::Dropped(DropReason::Unexpected);
        };
        let imm = match segment {
            Segment::Last { imm: Some(i) } | Segment::Only { imm: Some(i) } => Some((*i, pkt.msn)),
            _ => None,
        };
        let rxp = RxPacket {
            psn: pkt.psn,
            ev_index: pkt.evx.ev_index,
            plane: pkt.evx.plane,
            ce: pkt.ce,
            trim: pkt.trim,
            has_imm: imm.is_some(),
            ack_req: pkt.ack_req,
            tx_ts_ns: pkt.tx_ts_ns,
        };
        if !self.rx_live() {
            if self.state == DpState::Error {
                // Back on the packet's own EV: the packet is not the QP's traffic.
                let n = self.rx.nack(&rxp, NackReason::InvalidQp);
                let evx = EvxRepr {
                    ev_value: self
                        .hdr
                        .value_base
                        .wrapping_add(u32::from(pkt.evx.ev_index)),
                    ..pkt.evx
                };
                let mut p = self.ack_packet_on(now_ns, &n, pkt.tx_ts_ns, evx);
                if stand_in {
                    self.track(&mut p, blocks);
                }
                ctrl.push(p);
            }
            return RxVerdict::Dropped(DropReason::QpNotReady);
        }
        let _ = cfg;
        let mut event = None;
        let result = self.rx.handle_write(
            now_ns,
            &rxp,
            reth,
            imm,
            pkt.payload_len,
            regions,
            &mut event,
        );
        if stand_in {
            self.tracker_received(&rxp, &result, blocks);
        }
        if let Some(e) = event {
            ctrl.push_with(|| {
                let mut p = self.ack_packet(now_ns, &e, pkt.tx_ts_ns, blocks);
                if stand_in {
                    self.track(&mut p, blocks);
                }
                p
            });
        }
        match result {
            WriteResult::Place(Placement::Write { slot, offset, len }) => RxVerdict::Place {
                qpn: self.hdr.qpn,
                slot,
                offset,
                len,
            },
            WriteResult::Place(Placement::Empty) => RxVerdict::Consumed,
            WriteResult::Drop(r) => RxVerdict::Dropped(r),
            WriteResult::Fatal(reason) => {
                self.fail_rx(pkt.psn, reason, events);
                RxVerdict::Dropped(match reason {
                    NackReason::Length => DropReason::Length,
                    NackReason::NoRecvBuffer => DropReason::NoRecvBuffer,
                    _ => DropReason::RemoteAccess,
                })
            }
        }
    }
}

impl<
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
    > QpContext for DpQp<EVS, P, WIN, WORDS, SQ, RQ>
{
    fn new(qpn: u32) -> Self {
        DpQp {
            state: DpState::Reset,
            hdr: Hdr {
                qpn,
                dest_qpn: 0,
                ev_format: EvFormat::Udp,
                value_base: 0,
            },
            sprayer: Sprayer::new(),
            skips_seen: 0,
            skip_marks: Vec::new(),
            skips_served: 0,
            credits: [0; EVS],
            credits_bound: 0,
            tx: TxSide::OFF,
            rx: RxSide::OFF,
        }
    }

    fn state(&self) -> DpState {
        self.state
    }

    fn progress(&self) -> QpProgress {
        QpProgress {
            state: self.state,
            una: self.tx.una(),
            inflight_bytes: self.tx.inflight_bytes(),
            sq_queued: self.tx.queued(),
        }
    }

    fn view(&self) -> QpView {
        QpView {
            state: self.state,
            una: self.tx.una(),
            nxt: self.tx.nxt(),
            inflight_bytes: self.tx.inflight_bytes(),
            cwnd_bytes: self.tx.cwnd_bytes(),
            sq_queued: self.tx.queued(),
            rx_cum: self.rx.ack_gen().rx().cum_psn(),
            tx: self.tx.counters(),
            rx: self.rx.counters(),
            sprayer: self.sprayer.counters(),
        }
    }

    fn post_send(&mut self, wr: SendWr) -> Result<(), PostError> {
        self.tx.post_send(wr)
    }

    fn send_queue_room(&self) -> usize {
        self.tx.queue_room()
    }

    fn post_recv(&mut self, wr_id: u64) -> Result<(), PostError> {
        self.rx.post_recv(wr_id)
    }

    fn complete_sends(&mut self, count: u16, signaled: impl FnMut(u64)) {
        self.tx.complete_sends(count, signaled);
    }

    fn handle_command(
        &mut self,
        now_ns: u64,
        cmd: &CsrEvent,
        cfg: &DatapathConfig,
        ctrl: &mut Ctrl,
        blocks: &mut dyn Blocks,
    ) {
        match cmd {
            CsrEvent::QpInit(c) => {
                self.hdr.ev_format = EvFormat::from_code(c.ev_format).unwrap_or(EvFormat::Udp);
                self.hdr.value_base = c.value_base.get();
                self.init_evs(c.evs.get(), c.planes, blocks);
                self.tx.reset();
                self.rx.reset();
                self.state = DpState::Init;
            }
            CsrEvent::QpRtr(c) => {
                if self.state != DpState::Init {
                    return;
                }
                self.hdr.dest_qpn = c.dest_qpn.get();
                self.rx.start(
                    self.hdr.qpn,
                    Psn::new(c.rq_psn.get()),
                    c.mpr_psns.get(),
                    c.max_wimm.get(),
                    cfg.ack,
                );
                self.tracker_started(Psn::new(c.rq_psn.get()), blocks);
                self.state = DpState::Rtr;
            }
            CsrEvent::QpRts(c) => {
                if self.state != DpState::Rtr {
                    return;
                }
                let reorder = Reorder {
                    tx: u32::from(c.reorder_tx),
                    ns: c.reorder_ns.get(),
                };
                self.tx.start(
                    Psn::new(c.sq_psn.get()),
                    c.mpr_psns.get(),
                    c.max_wimm.get(),
                    reorder,
                    cfg.mtu_payload,
                );
                self.state = DpState::Rts;
            }
            CsrEvent::QpState(c) => match c.state {
                csr::QP_RESET => self.reset(blocks),
                _ => {
                    self.state = DpState::Error;
                    self.tx.enter_error();
                    self.rx.stop();
                }
            },
            CsrEvent::EvUpdate(c) => {
                let state = EvState::from_u8(c.state).unwrap_or(EvState::Denied);
                self.write_ev(c.ev.get(), state, c.plane, blocks);
            }
            CsrEvent::PlaneWeight(c) => {
                let _ = self
                    .sprayer_port(blocks)
                    .write(SprayerCmd::PlaneWeight(c.plane, c.weight));
            }
            CsrEvent::WindowUpdate(c) => self.tx.set_cwnd(u64::from(c.cwnd_bytes.get())),
            CsrEvent::Retransmit(c) => {
                self.tx
                    .order_retransmit(c.psn(), c.ev.get(), c.flags & csr::RETX_AVOID_LAST != 0)
            }
            CsrEvent::RetransmitUnacked(_) => self.tx.requeue_unacked(),
            CsrEvent::TailProbe(_) => self.tx.tail_probe(now_ns),
            CsrEvent::SendProbe(c) if self.rx_live() => {
                let ev = c.ev.get();
                let evx = EvxRepr {
                    ev_index: ev,
                    plane: c.plane,
                    ev_value: self.hdr.value_base.wrapping_add(u32::from(ev)),
                };
                let body = PacketBody::Probe(ProbeRepr {
                    probe_id: c.probe_id.get(),
                    ev_index: ev,
                    plane: c.plane,
                });
                let p = self.control(now_ns, Psn::new(0), evx, 0, body);
                ctrl.push(p);
            }
            // (NIC-wide and host-interface commands are not a QP's)
            _ => {}
        }
    }

    #[inline(always)]
    fn handle_ack(
        &mut self,
        now_ns: u64,
        pkt: &Packet,
        a: &AckRepr,
        events: &mut Events,
    ) -> RxVerdict {
        if self.state != DpState::Rts {
            return RxVerdict::Dropped(DropReason::QpNotReady);
        }
        let rtt = if pkt.echo_ts_ns != 0 {
            (now_ns as u32).wrapping_sub(pkt.echo_ts_ns)
        } else {
            0
        };
        let mut saturated = 0;
        let mut credits = Credits {
            counts: &mut self.credits,
            bound: &mut self.credits_bound,
            saturated: &mut saturated,
        };
        self.tx
            .handle_ack(now_ns, self.hdr.qpn, a, rtt, &mut credits, events);
        self.tx.credits_lost(saturated);
        RxVerdict::Consumed
    }

    #[inline(always)]
    fn handle_packet<R: Regions>(
        &mut self,
        now_ns: u64,
        pkt: &Packet,
        cfg: &DatapathConfig,
        shared: RxShared<'_, R>,
        events: &mut Events,
    ) -> RxVerdict {
        match &pkt.body {
            PacketBody::Write { .. } => self.rx_write(now_ns, pkt, cfg, shared, events),
            PacketBody::Ack(a) => self.handle_ack(now_ns, pkt, a, events),
            PacketBody::Nack(n) => {
                if self.state != DpState::Rts {
                    return RxVerdict::Dropped(DropReason::QpNotReady);
                }
                let mut saturated = 0;
                let mut credits = Credits {
                    counts: &mut self.credits,
                    bound: &mut self.credits_bound,
                    saturated: &mut saturated,
                };
                self.tx
                    .handle_nack(self.hdr.qpn, n, &mut credits, cfg.planted_bug(), events);
                self.tx.credits_lost(saturated);
                RxVerdict::Consumed
            }
            PacketBody::Probe(p) => {
                if !self.rx_live() {
                    return RxVerdict::Dropped(DropReason::QpNotReady);
                }
                shared.ctrl.push_with(|| {
                    self.control(
                        now_ns,
                        Psn::new(0),
                        pkt.evx,
                        pkt.tx_ts_ns,
                        PacketBody::ProbeReply(*p),
                    )
                });
                RxVerdict::Consumed
            }
            PacketBody::ProbeReply(p) => {
                if !self.rx_live() {
                    return RxVerdict::Dropped(DropReason::QpNotReady);
                }
                let rtt = if pkt.echo_ts_ns != 0 {
                    (now_ns as u32).wrapping_sub(pkt.echo_ts_ns)
                } else {
                    0
                };
                events.push(CsrEvent::ProbeReply(ProbeReplyEntry::new(
                    self.hdr.qpn,
                    p.ev_index,
                    pkt.evx.plane,
                    p.probe_id,
                    rtt,
                )));
                RxVerdict::Consumed
            }
        }
    }

    fn poll_data(
        &mut self,
        now_ns: u64,
        events: &mut Events,
        out: &mut Packet,
        blocks: &mut dyn Blocks,
    ) -> Result<(), Stall> {
        if self.state != DpState::Rts {
            return Err(Stall::Idle);
        }
        let mut port = SprayerPort {
            model: &mut self.sprayer,
            blocks,
            qp: self.hdr.qpn,
        };
        let r = self.tx.poll(now_ns, &self.hdr, &mut port, events, out);
        self.report_skips(events);
        r
    }

    fn handle_write_run<R: Regions, V: VerdictSink + ?Sized>(
        &mut self,
        now_ns: u64,
        pkts: &[Packet],
        verdicts: &mut V,
        at: usize,
        shared: RxShared<'_, R>,
    ) -> (usize, Option<u64>) {
        self.write_run(now_ns, pkts, verdicts, at, shared)
    }

    fn poll_data_run(
        &mut self,
        now_ns: u64,
        events: &mut Events,
        out: &mut [Packet],
        min_room: usize,
        stall_after: bool,
    ) -> (usize, Option<Stall>) {
        if self.state != DpState::Rts {
            return (0, Some(Stall::Idle));
        }
        let r = self.tx.poll_new_run(
            now_ns,
            &self.hdr,
            &mut self.sprayer,
            events,
            out,
            min_room,
            stall_after,
        );
        // (as after every poll: skip flags served meanwhile, e.g. by an ACK's pick, are
        // reported now)
        self.report_skips(events);
        r
    }

    fn wants_to_send(&self) -> bool {
        self.state == DpState::Rts && self.tx.wants_to_send()
    }

    fn has_retransmit(&self) -> bool {
        self.state == DpState::Rts && self.tx.has_retransmit()
    }

    fn ack_deadline_ns(&self) -> Option<u64> {
        if self.rx_live() {
            self.rx.ack_deadline_ns()
        } else {
            None
        }
    }

    fn handle_timeout(&mut self, now_ns: u64, ctrl: &mut Ctrl, blocks: &mut dyn Blocks) -> bool {
        if !self.rx_live() {
            return false;
        }
        match self.rx.handle_timeout(now_ns) {
            Some(e) => {
                let mut p = self.ack_packet(now_ns, &e, 0, blocks);
                if !blocks.models_only() {
                    self.track(&mut p, blocks);
                }
                ctrl.push(p);
                true
            }
            None => false,
        }
    }

    fn plane_down(&mut self, plane: u8, blocks: &mut dyn Blocks) {
        if self.state == DpState::Reset {
            return;
        }
        // (the plane leaves the sprayer now, not as the firmware's EV table writes arrive: a
        // QP may have hundreds of EVs on it; the firmware counts the weight 0 too, and writes
        // it again once the plane is back)
        let _ = self
            .sprayer_port(blocks)
            .write(SprayerCmd::PlaneWeight(plane, 0));
        if self.state == DpState::Rts {
            self.tx.plane_down(plane);
        }
    }

    fn poll_reports(&mut self, events: &mut Events) {
        let qpn = self.hdr.qpn;
        if !self.tx.poll_flush(qpn, events) || !self.rx.poll_flush(qpn, events) {
            return;
        }
        if self.rx_live() {
            self.rx.poll_imms(qpn, events);
        }
    }

    fn reports_pending(&self) -> bool {
        self.tx.flush_pending()
            || self.rx.flush_pending()
            || (self.rx_live() && self.rx.imm_ready())
    }

    fn imm_reports_pending(&self) -> bool {
        // (receiving: the run's own test)
        self.rx.imm_ready()
    }
}
