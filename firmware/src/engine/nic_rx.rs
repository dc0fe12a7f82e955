//! [`Engine::handle_packet`]: the receive side of the engine (writes to the responder, ACK /
//! NACK to the requester, probes and probe replies to the EV table).

use mrc_abi::wire::{Body, EvxRepr, MrcRepr, NackReason, ProbeRepr, Segment, TsxRepr};
use mrc_abi::Psn;

use super::{Engine, QpSlot};
use crate::datapath::ack_gen::{AckEvent, RxPacket, TrimMark};
use crate::datapath::placement::Placement;
use crate::engine::conn::{Qp, T_ACK, T_PROBE, T_RETRY};
use crate::engine::packet::{CompletionError, DropReason, RxMeta, RxVerdict, TxBody, TxPacket};
use crate::engine::qp::QpState;
use crate::engine::requester::NackEffect;
use crate::engine::responder::WriteResult;

/// The header fields the receive path uses, from either a parsed [`MrcRepr`] or a
/// [`TxPacket`] descriptor.
pub(super) struct RxHdr {
    dest_qp: u32,
    psn: Psn,
    msn: u16,
    ack_req: bool,
    trim: TrimMark,
    evx: Option<EvxRepr>,
    tsx: Option<TsxRepr>,
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
    pub(super) fn drop_rx(&mut self, reason: DropReason) -> RxVerdict {
        let c = &mut self.counters;
        match reason {
            DropReason::UnknownQp => count!(c.rx_unknown_qp),
            DropReason::QpNotReady => count!(c.rx_qp_not_ready),
            DropReason::Duplicate => count!(c.rx_duplicate),
            DropReason::Trimmed => count!(c.rx_trimmed),
            DropReason::OutOfWindow => count!(c.rx_out_of_window),
            DropReason::RemoteAccess => count!(c.rx_remote_access),
            DropReason::Length => count!(c.rx_length),
            DropReason::NoRecvBuffer => count!(c.rx_no_recv_buffer),
            DropReason::TooManyWimm => count!(c.rx_too_many_wimm),
            DropReason::Stale => count!(c.rx_stale),
            DropReason::MissingEvx => count!(c.rx_missing_evx),
            DropReason::Unexpected => count!(c.rx_unexpected),
        }
        RxVerdict::Dropped(reason)
    }

    /// A received packet: its parsed MRC headers and what the wire block measured.
    pub fn handle_packet(&mut self, now_ns: u64, repr: &MrcRepr, meta: RxMeta) -> RxVerdict {
        count!(self.counters.rx_packets);
        let h = RxHdr {
            dest_qp: repr.bth.dest_qp,
            psn: repr.bth.psn,
            msn: repr.mrh.msn,
            ack_req: repr.bth.ack_req,
            trim: match (repr.mrh.trimmed, repr.mrh.trimmed_last_hop) {
                (false, _) => TrimMark::None,
                (true, false) => TrimMark::Trimmed,
                (true, true) => TrimMark::TrimmedLastHop,
            },
            evx: repr.evx,
            tsx: repr.tsx,
        };
        let slot = h.dest_qp as usize;
        let Some(state) = self.qps.get(slot).and_then(QpSlot::get).map(|q| q.state) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let v = match &repr.body {
            Body::Write { segment, reth } => {
                return self.rx_write(now_ns, slot, state, &h, segment, reth, meta, true);
            }
            Body::Ack(a) => self.rx_ack(now_ns, slot, state, h.tsx, a),
            Body::Nack(n) => self.rx_nack(now_ns, slot, state, n),
            Body::Probe(p) => self.rx_probe(now_ns, slot, state, &h, p),
            Body::ProbeReply(p) => self.rx_probe_reply(now_ns, slot, state, &h, p),
        };
        self.rx_sync_ev(slot);
        v
    }

    /// A received packet given as the sender's descriptor, with the trim mark the fabric set
    /// and what the wire block measured: the same as [`Self::handle_packet`] on
    /// [`TxPacket::to_repr`] with that trim mark, without building the header representation.
    #[inline]
    pub fn handle_tx_packet(
        &mut self,
        now_ns: u64,
        pkt: &TxPacket,
        trim: TrimMark,
        meta: RxMeta,
    ) -> RxVerdict {
        count!(self.counters.rx_packets);
        if let TxBody::Ack(a) = &pkt.body {
            return self.handle_tx_ack(now_ns, pkt, a);
        }
        if let TxBody::Write { segment, reth, .. } = &pkt.body {
            let imm = matches!(
                segment,
                Segment::Last { imm: Some(_) } | Segment::Only { imm: Some(_) }
            );
            if !imm && trim == TrimMark::None {
                let rx = RxPacket {
                    psn: pkt.psn,
                    ev_index: pkt.evx.ev_index,
                    plane: pkt.evx.plane,
                    ce: meta.ce,
                    trim,
                    has_imm: false,
                    ack_req: pkt.ack_req,
                    tx_ts_ns: pkt.tx_ts_ns,
                };
                let slot = pkt.dest_qpn as usize;
                if let Some(v) = self.rx_write_fast(now_ns, slot, &rx, reth, meta.payload_len) {
                    return v;
                }
            }
        }
        self.handle_tx_packet_general(now_ns, pkt, trim, meta)
    }

    /// [`Self::handle_tx_packet`] for each of `pkts` in order, none trimmed or CE-marked (a
    /// receive ring's run of plain packets), the payload lengths their descriptors give.
    /// Returns how many were placed ([`RxVerdict::Place`]). One call per run keeps the
    /// common write's fast path inline in the loop.
    pub fn handle_tx_batch(&mut self, now_ns: u64, pkts: &[TxPacket]) -> usize {
        let mut placed = 0;
        let mut rest = pkts;
        while let Some(p) = rest.first() {
            // A run of writes to one QP at once, else one packet.
            let taken = self.rx_write_run(now_ns, rest);
            if taken > 0 {
                placed += taken;
                rest = rest.get(taken..).unwrap_or_default();
                continue;
            }
            let meta = RxMeta {
                payload_len: p.payload_len(),
                ce: false,
            };
            if let RxVerdict::Place { .. } = self.handle_tx_packet(now_ns, p, TrimMark::None, meta)
            {
                placed += 1;
            }
            rest = rest.get(1..).unwrap_or_default();
        }
        placed
    }

    /// The run of writes at the front of `pkts` (none trimmed or CE-marked) taken at once:
    /// consecutive PSNs to one QP, none with immediate, each new, inside the window and
    /// placed; all but the last quiet (no ACK: no ACK request, the coalescing count not
    /// reached, no gap), the last possibly the one that calls for the ACK (its ACK request,
    /// the count, or, alone, the gap it opens; see `Responder::write_run_offset`); their
    /// payloads one span of one rkey (each non-empty, starting where the one before ended),
    /// placed by one check of the span. The RX bitmap a word at a time, the ACK generator's
    /// count once, the ACK timer synced once. The same effects, in the same order, as one
    /// [`Self::handle_tx_packet`] per packet. Returns the packets taken, each placed
    /// ([`RxVerdict::Place`]); 0: the first goes one at a time (e.g. an empty payload, or a
    /// span that fails placement).
    #[inline]
    fn rx_write_run(&mut self, now_ns: u64, pkts: &[TxPacket]) -> usize {
        if !crate::engine::fast_paths::enabled() {
            return 0;
        }
        let Some(first) = pkts.first() else {
            return 0;
        };
        let TxBody::Write { reth: reth0, .. } = &first.body else {
            return 0;
        };
        let slot = first.dest_qpn as usize;
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return 0;
        };
        if !matches!(qp.state, QpState::Rtr | QpState::Rts) {
            return 0;
        }
        // The ACK timer as it stands (nothing below changes it before the sync at the end).
        let ack_timer = qp.timers.get(T_ACK).copied().flatten();
        let timer_missing = ack_timer.is_none();
        let Some(resp) = qp.resp.as_mut() else {
            return 0;
        };
        let opens = resp.ack_gen().pending_packets() == 0;
        if timer_missing && !opens {
            // (an interval without its timer, after a failed arm: one at a time, each packet
            // retrying the arm)
            return 0;
        }
        let room = resp.ack_gen().quiet_room();
        // A first packet that opens a gap calls for the ACK at once: a run of one.
        let gap = resp.ack_gen().opens_gap(first.psn);
        // `n` packets of the first `room + 1` (the last of those fills the coalescing count),
        // the last of them the ACK's trigger when `trigger`; consecutive PSNs from `psn0` (the
        // run ends at the PSN space's wrap, compared without it); their payloads the span
        // `[va0, end)` of rkey `rkey0` (the run ends before a packet that does not continue
        // it: placement checks each packet of a span exactly when it checks the span).
        let limit = if gap { 1 } else { usize::from(room) + 1 };
        let scan = pkts.get(..limit).unwrap_or(pkts);
        let (mut i, mut trigger) = (0usize, false);
        let psn0 = first.psn.value();
        let (rkey0, va0) = (reth0.rkey, reth0.va);
        let mut end = va0;
        while let Some(p) = scan.get(i) {
            let TxBody::Write { segment, reth, .. } = &p.body else {
                break;
            };
            let plain = matches!(
                segment,
                Segment::First
                    | Segment::Middle
                    | Segment::Last { imm: None }
                    | Segment::Only { imm: None }
            );
            if !plain
                || p.dest_qpn != first.dest_qpn
                || p.psn.value() != psn0.wrapping_add(i as u32)
            {
                break;
            }
            if reth.rkey != rkey0 || reth.va != end || reth.dma_len == 0 {
                break;
            }
            end = end.wrapping_add(u64::from(reth.dma_len));
            i += 1;
            if p.ack_req {
                trigger = true;
                break;
            }
        }
        // (at most `room + 1 <= u16::MAX` packets)
        let n = i as u16;
        let trigger = trigger || gap || n > room;
        let Some(last) = usize::from(n).checked_sub(1).and_then(|i| pkts.get(i)) else {
            return 0;
        };
        let Some(offset) = resp.write_run_offset(first.psn, n, trigger) else {
            return 0;
        };
        // Placement: the span at once. (The total is below 2^64, so the span wrapped the
        // address space, which the per-packet checks refuse, exactly when `end < va0`.)
        let placed = match u32::try_from(end.wrapping_sub(va0)) {
            Ok(len) if end >= va0 => matches!(
                self.regions.write_ok_uncounted(rkey0, va0, len),
                Some(Placement::Write { .. })
            ),
            _ => false,
        };
        if !placed {
            return 0;
        }
        self.regions.count_placed(u64::from(n));
        let quiet = n - u16::from(trigger);
        let last_rx = RxPacket {
            psn: last.psn,
            ev_index: last.evx.ev_index,
            plane: last.evx.plane,
            ce: false,
            trim: TrimMark::None,
            has_imm: false,
            ack_req: last.ack_req,
            tx_ts_ns: last.tx_ts_ns,
        };
        // The ACK deadline the quiet packets leave; the trigger's ACK, queued as it is built.
        let deadline = if trigger {
            let (due, e) = resp.accept_write_run_acked(now_ns, first.psn, offset, n, &last_rx, gap);
            let a = qp.ack_packet(now_ns, &e, last.tx_ts_ns);
            self.push_ctrl(a);
            due
        } else {
            resp.accept_write_run(now_ns, first.psn, offset, n, &last_rx);
            resp.ack_deadline_ns()
        };
        let n64 = u64::from(n);
        self.counters.rx_packets = self.counters.rx_packets.wrapping_add(n64);
        self.counters.placed = self.counters.placed.wrapping_add(n64);
        // The ACK deadline moves only when the quiet packets opened a coalescing interval (as
        // after the first of them one at a time), or the timer is missing after a failed arm:
        // to the deadline they left (one at a time, the timer armed then stays after the
        // trigger's ACK). A timer armed no later stands: an inline look first, the sync
        // itself out of line.
        if quiet > 0 && (opens || timer_missing) && !Self::timer_stands(ack_timer, deadline) {
            self.sync_timer(slot, T_ACK, deadline);
            let failed = self
                .qps
                .get(slot)
                .and_then(QpSlot::get)
                .is_some_and(|q| q.timers.get(T_ACK).is_some_and(Option::is_none));
            if failed {
                // One at a time, each later quiet packet retries the arm (the wheel is
                // unchanged in between, so each fails again).
                self.counters.timer_arm_failed = self
                    .counters
                    .timer_arm_failed
                    .wrapping_add(u64::from(quiet) - 1);
            }
        }
        usize::from(n)
    }

    /// [`Self::handle_tx_packet`] for an ACK (`rx_packets` already counted): the general
    /// path's effects without building its header representation.
    #[inline(never)]
    fn handle_tx_ack(
        &mut self,
        now_ns: u64,
        pkt: &TxPacket,
        a: &mrc_abi::wire::AckRepr,
    ) -> RxVerdict {
        let slot = pkt.dest_qpn as usize;
        let Some(state) = self.qps.get(slot).and_then(QpSlot::get).map(|q| q.state) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let tsx = TsxRepr {
            tx_ts_ns: pkt.tx_ts_ns,
            echo_ts_ns: pkt.echo_ts_ns,
        };
        let v = self.rx_ack(now_ns, slot, state, Some(tsx), a);
        self.rx_sync_ev(slot);
        v
    }

    /// [`Self::handle_tx_packet`] past its fast path (`rx_packets` already counted).
    #[inline(never)]
    fn handle_tx_packet_general(
        &mut self,
        now_ns: u64,
        pkt: &TxPacket,
        trim: TrimMark,
        meta: RxMeta,
    ) -> RxVerdict {
        // (the header representation built in each arm that uses it: none is kept across the
        // dispatch)
        let h = || RxHdr {
            dest_qp: pkt.dest_qpn,
            psn: pkt.psn,
            msn: pkt.msn,
            ack_req: pkt.ack_req,
            trim,
            evx: Some(pkt.evx),
            tsx: Some(TsxRepr {
                tx_ts_ns: pkt.tx_ts_ns,
                echo_ts_ns: pkt.echo_ts_ns,
            }),
        };
        let slot = pkt.dest_qpn as usize;
        let Some(state) = self.qps.get(slot).and_then(QpSlot::get).map(|q| q.state) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let v = match &pkt.body {
            // (not tried again: `handle_tx_packet`, the only caller, tried the fast path on
            // every write it can take, untrimmed with no immediate, and found `None`)
            TxBody::Write { segment, reth, .. } => {
                return self.rx_write(now_ns, slot, state, &h(), segment, reth, meta, false);
            }
            // (not reached: `handle_tx_packet` takes ACKs first)
            TxBody::Ack(a) => return self.handle_tx_ack(now_ns, pkt, a),
            TxBody::Nack(n) => self.rx_nack(now_ns, slot, state, n),
            TxBody::Probe(p) => self.rx_probe(now_ns, slot, state, &h(), p),
            TxBody::ProbeReply(p) => self.rx_probe_reply(now_ns, slot, state, &h(), p),
        };
        self.rx_sync_ev(slot);
        v
    }

    /// After a requester-side packet: pass EV state changes on (the responder path never
    /// touches the EV table). Most packets change no EV state: an inline check, the work out
    /// of line.
    #[inline]
    fn rx_sync_ev(&mut self, slot: usize) {
        let pending = self
            .qps
            .get(slot)
            .and_then(QpSlot::get)
            .is_some_and(Qp::ev_sync_pending);
        if pending {
            self.rx_sync_ev_pending(slot);
        }
    }

    /// [`Self::rx_sync_ev`] when the QP's EV state has something to pass on.
    #[inline(never)]
    fn rx_sync_ev_pending(&mut self, slot: usize) {
        if let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) {
            if qp.sync_ev(&mut self.ev_events, &mut self.counters.ev_events_dropped) {
                self.sync_timer(slot, T_PROBE, self.probe_deadline(slot));
            }
        }
    }

    /// A write: the fast path ([`Self::rx_write_fast`]) first when `try_fast` (`false` when
    /// the caller tried it on this packet already), else the responder's general path.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rx_write(
        &mut self,
        now_ns: u64,
        slot: usize,
        state: QpState,
        h: &RxHdr,
        segment: &Segment,
        reth: &mrc_abi::wire::RethRepr,
        meta: RxMeta,
        try_fast: bool,
    ) -> RxVerdict {
        let evx = h.evx.unwrap_or_default();
        let tx_ts = h.tsx.map_or(0, |t| t.tx_ts_ns);
        if !matches!(state, QpState::Rtr | QpState::Rts) {
            if state == QpState::Error {
                self.nack_invalid_qp(now_ns, slot, h, evx, tx_ts);
            }
            return self.drop_rx(DropReason::QpNotReady);
        }
        match self.qps.get(slot).and_then(QpSlot::get) {
            None => return self.drop_rx(DropReason::UnknownQp),
            Some(qp) if qp.resp.is_none() => return self.drop_rx(DropReason::QpNotReady),
            Some(_) => {}
        }
        let trim = h.trim;
        let imm = match segment {
            Segment::Last { imm: Some(i) } | Segment::Only { imm: Some(i) } => Some((*i, h.msn)),
            _ => None,
        };
        let pkt = RxPacket {
            psn: h.psn,
            ev_index: evx.ev_index,
            plane: evx.plane,
            ce: meta.ce,
            trim,
            has_imm: imm.is_some(),
            ack_req: h.ack_req,
            tx_ts_ns: tx_ts,
        };
        if try_fast && imm.is_none() {
            if let Some(v) = self.rx_write_fast(now_ns, slot, &pkt, reth, meta.payload_len) {
                return v;
            }
        }
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let Some(resp) = qp.resp.as_mut() else {
            return self.drop_rx(DropReason::QpNotReady);
        };
        let mut event = None;
        let result = resp.handle_write(
            now_ns,
            &pkt,
            reth,
            imm,
            meta.payload_len,
            &mut self.regions,
            &mut event,
        );
        // The ACK deadline moves only when this packet opened a coalescing interval (an
        // emitted ACK closes it: no deadline, nothing to arm); re-arm as well when the timer
        // is missing (a failed arm).
        let ack_timer_stale = resp.ack_gen().pending_packets() == 1
            || qp.timers.get(T_ACK).is_some_and(Option::is_none);
        if let Some(e) = event {
            let p = qp.ack_packet(now_ns, &e, tx_ts);
            self.push_ctrl(p);
        }
        let verdict = match result {
            WriteResult::Place(Placement::Write {
                slot: s,
                offset,
                len,
            }) => {
                count!(self.counters.placed);
                RxVerdict::Place {
                    qpn: slot as u32,
                    slot: s,
                    offset,
                    len,
                }
            }
            WriteResult::Place(Placement::Empty) => {
                count!(self.counters.placed);
                RxVerdict::Consumed
            }
            WriteResult::Drop(r) => self.drop_rx(r),
            WriteResult::Fatal(reason) => {
                if let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) {
                    qp.fail(
                        CompletionError::Flushed,
                        CompletionError::LocalQpError(reason),
                    );
                }
                count!(self.counters.qp_errors);
                self.drop_rx(match reason {
                    NackReason::Length => DropReason::Length,
                    NackReason::NoRecvBuffer => DropReason::NoRecvBuffer,
                    _ => DropReason::RemoteAccess,
                })
            }
        };
        if ack_timer_stale {
            self.sync_timer(slot, T_ACK, self.ack_deadline(slot));
        }
        verdict
    }

    /// The common write ([`crate::engine::responder::Responder::handle_write_fast`]): placed,
    /// with the ACK it calls for queued; or a duplicate
    /// ([`crate::engine::responder::Responder::handle_duplicate_fast`]): re-ACKed and
    /// dropped. `None`, having changed nothing, for any other packet or an unready QP.
    #[inline]
    fn rx_write_fast(
        &mut self,
        now_ns: u64,
        slot: usize,
        pkt: &RxPacket,
        reth: &mrc_abi::wire::RethRepr,
        payload_len: u32,
    ) -> Option<RxVerdict> {
        if !crate::engine::fast_paths::enabled() {
            return None;
        }
        let qp = self.qps.get_mut(slot).and_then(QpSlot::get_mut)?;
        if !matches!(qp.state, QpState::Rtr | QpState::Rts) {
            return None;
        }
        let resp = qp.resp.as_mut()?;
        let Some((placement, event)) =
            resp.handle_write_fast(now_ns, pkt, reth, payload_len, &mut self.regions)
        else {
            // A duplicate: re-ACKed and dropped, as `rx_write` would (the ACK closes the
            // interval: the timer moves only when it is missing after a failed arm).
            let e = resp.handle_duplicate_fast(now_ns, pkt)?;
            let timer_missing = qp.timers.get(T_ACK).is_some_and(Option::is_none);
            let p = qp.ack_packet(now_ns, &e, pkt.tx_ts_ns);
            self.push_ctrl(p);
            let v = self.drop_rx(DropReason::Duplicate);
            if timer_missing {
                self.sync_timer(slot, T_ACK, self.ack_deadline(slot));
            }
            return Some(v);
        };
        // The ACK deadline moves only when this packet opened a coalescing interval (an
        // emitted ACK closes it: no deadline, nothing to arm), or the timer is missing after
        // a failed arm.
        let ack_timer_stale = resp.ack_gen().pending_packets() == 1
            || qp.timers.get(T_ACK).is_some_and(Option::is_none);
        count!(self.counters.placed);
        if let Some(e) = event {
            let p = qp.ack_packet(now_ns, &e, pkt.tx_ts_ns);
            self.push_ctrl(p);
        }
        if ack_timer_stale {
            self.sync_timer(slot, T_ACK, self.ack_deadline(slot));
        }
        Some(match placement {
            Placement::Write {
                slot: s,
                offset,
                len,
            } => RxVerdict::Place {
                qpn: slot as u32,
                slot: s,
                offset,
                len,
            },
            Placement::Empty => RxVerdict::Consumed,
        })
    }

    pub(super) fn ack_deadline(&self, slot: usize) -> Option<u64> {
        self.qp(slot as u32)
            .and_then(|q| q.resp.as_ref()?.ack_deadline_ns())
    }

    pub(super) fn nack_invalid_qp(
        &mut self,
        now_ns: u64,
        slot: usize,
        h: &RxHdr,
        evx: EvxRepr,
        echo: u32,
    ) {
        let Some(qp) = self.qp(slot as u32) else {
            return;
        };
        let n = crate::datapath::ack_gen::NackSummary {
            qpn: slot as u32,
            reason: NackReason::InvalidQp,
            psn: h.psn,
            cum_psn: h.psn,
            ev_index: evx.ev_index,
            plane: evx.plane,
        };
        // Back on the packet's own EV: the packet is not the QP's traffic.
        let evx = EvxRepr {
            ev_value: qp.ev_value(evx.ev_index),
            ..evx
        };
        let p = qp.ack_packet_on(now_ns, &AckEvent::Nack(n), echo, evx);
        self.push_ctrl(p);
    }

    /// An ACK for the QP in `slot` (in `state`): the requester takes it, then its retry
    /// timer and retransmission turn follow. Always inlined into its two callers (measured:
    /// the QP's lookups and checks merge with theirs).
    #[inline(always)]
    pub(super) fn rx_ack(
        &mut self,
        now_ns: u64,
        slot: usize,
        state: QpState,
        tsx: Option<TsxRepr>,
        a: &mrc_abi::wire::AckRepr,
    ) -> RxVerdict {
        if state != QpState::Rts {
            return self.drop_rx(DropReason::QpNotReady);
        }
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let rtt = Qp::<EVS, P, WIN, WORDS, SQ, RQ>::rtt_ns(now_ns, tsx);
        let Some(req) = qp.req.as_mut() else {
            return self.drop_rx(DropReason::QpNotReady);
        };
        req.handle_ack(now_ns, a, rtt, &mut qp.ev, &mut qp.cc);
        let d = req.deadline_ns();
        self.sync_timer(slot, T_RETRY, d);
        self.note_retransmit(slot);
        RxVerdict::Consumed
    }

    pub(super) fn rx_nack(
        &mut self,
        now_ns: u64,
        slot: usize,
        state: QpState,
        n: &mrc_abi::wire::NackRepr,
    ) -> RxVerdict {
        if state != QpState::Rts {
            return self.drop_rx(DropReason::QpNotReady);
        }
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let Some(req) = qp.req.as_mut() else {
            return self.drop_rx(DropReason::QpNotReady);
        };
        match req.handle_nack(now_ns, n, &mut qp.ev, &mut qp.cc) {
            NackEffect::Fatal(reason) => {
                qp.fail(
                    CompletionError::RemoteNack(reason),
                    CompletionError::Flushed,
                );
                count!(self.counters.qp_errors);
            }
            NackEffect::None => {}
        }
        self.note_retransmit(slot);
        RxVerdict::Consumed
    }

    pub(super) fn rx_probe(
        &mut self,
        now_ns: u64,
        slot: usize,
        state: QpState,
        h: &RxHdr,
        p: &ProbeRepr,
    ) -> RxVerdict {
        if !matches!(state, QpState::Rtr | QpState::Rts) {
            return self.drop_rx(DropReason::QpNotReady);
        }
        let Some(qp) = self.qp(slot as u32) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let evx = h.evx.unwrap_or(EvxRepr {
            ev_index: p.ev_index,
            plane: p.plane,
            ev_value: 0,
        });
        let echo = h.tsx.map_or(0, |t| t.tx_ts_ns);
        let pkt = qp.control(now_ns, Psn::new(0), evx, echo, TxBody::ProbeReply(*p));
        self.push_ctrl(pkt);
        RxVerdict::Consumed
    }

    pub(super) fn rx_probe_reply(
        &mut self,
        now_ns: u64,
        slot: usize,
        state: QpState,
        h: &RxHdr,
        p: &ProbeRepr,
    ) -> RxVerdict {
        if !matches!(state, QpState::Rtr | QpState::Rts) {
            return self.drop_rx(DropReason::QpNotReady);
        }
        let Some(qp) = self.qps.get_mut(slot).and_then(QpSlot::get_mut) else {
            return self.drop_rx(DropReason::UnknownQp);
        };
        let rtt = Qp::<EVS, P, WIN, WORDS, SQ, RQ>::rtt_ns(now_ns, h.tsx);
        match qp.ev.handle_probe_reply(p.ev_index, p.probe_id, rtt) {
            Ok(()) => {
                count!(self.counters.probe_replies_ok);
                RxVerdict::Consumed
            }
            Err(_) => self.drop_rx(DropReason::Stale),
        }
    }
}
