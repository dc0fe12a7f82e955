//! The receive run: consecutive writes to one QP taken at once, with the effects of as many
//! single-packet receives (`QpContext::handle_packet`).

use mrc_abi::wire::Segment;

use super::{DpQp, RxShared};
use crate::datapath::ack_gen::{RxPacket, TrimMark};
use crate::datapath::packet::{Packet, PacketBody, VerdictSink};
use crate::datapath::placement::{Placement, Regions};

// (the run's test for a trim mark reads the mark as its discriminant)
const _: () = assert!(TrimMark::None as u8 == 0);

impl<
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
    > DpQp<EVS, P, WIN, WORDS, SQ, RQ>
{
    /// See `QpContext::handle_write_run` (the verdicts from index `at` of `verdicts`; the
    /// caller gives no more packets than it has verdicts for): the run at the front of `pkts`
    /// is consecutive PSNs to this QP (receiving), each a write without immediate, untrimmed,
    /// not CE-marked, its
    /// payload its RETH length and not empty, the payloads one span of one rkey; all but the
    /// last quiet (no ACK request, the coalescing count not reached, no gap), the last
    /// possibly the one that calls for the ACK (its ACK request, the count, or, alone, the
    /// gap it opens); each new and inside the window; the span placed by one check. The
    /// same verdicts, state, counters and ACK as one `handle_packet` per packet.
    pub(super) fn write_run<R: Regions, V: VerdictSink + ?Sized>(
        &mut self,
        now_ns: u64,
        pkts: &[Packet],
        verdicts: &mut V,
        at: usize,
        shared: RxShared<'_, R>,
    ) -> (usize, Option<u64>) {
        let RxShared {
            regions,
            ctrl,
            // (a stage with a stand-in takes no runs, `Datapath::set_fast_paths`: the blocks
            // are the models, asked directly)
            blocks: _,
            stand_in: _,
        } = shared;
        if !self.rx_live() {
            return (0, None);
        }
        let Some(first) = pkts.first() else {
            return (0, None);
        };
        let PacketBody::Write { reth: reth0, .. } = &first.body else {
            return (0, None);
        };
        let acks = self.rx.ack_gen();
        let room = acks.quiet_room();
        // A first packet that opens a gap calls for the ACK at once: a run of one.
        let gap = acks.opens_gap(first.psn);
        let limit = if gap { 1 } else { usize::from(room) + 1 };
        let scan = pkts.get(..limit).unwrap_or(pkts);
        let (mut i, mut trigger) = (0usize, false);
        // (the PSN packet `i` must carry: `first`'s plus `i`)
        let mut psn_i = first.psn.value();
        let (rkey0, va0) = (reth0.rkey, reth0.va);
        let mut end = va0;
        while let Some(p) = scan.get(i) {
            let PacketBody::Write { segment, reth, .. } = &p.body else {
                break;
            };
            let plain = matches!(
                segment,
                Segment::First
                    | Segment::Middle
                    | Segment::Last { imm: None }
                    | Segment::Only { imm: None }
            );
            // (the run ends at the PSN space's wrap: PSNs compared without it)
            // (`TrimMark::None` is 0: a mark or a CE bit makes the byte or non-zero)
            if !plain
                || (p.trim as u8 | u8::from(p.ce)) != 0
                || p.dest_qpn != first.dest_qpn
                || p.psn.value() != psn_i
                || reth.rkey != rkey0
                || reth.va != end
                || reth.dma_len == 0
                || p.payload_len != reth.dma_len
            {
                break;
            }
            end = end.wrapping_add(u64::from(reth.dma_len));
            psn_i = psn_i.wrapping_add(1);
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
            return (0, None);
        };
        let Some(offset) = self.rx.write_run_offset(first.psn, n, trigger) else {
            return (0, None);
        };
        // The span at once. (Its total is below 2^64, so it wrapped the address space, which
        // the per-packet checks refuse, exactly when `end < va0`.)
        let span = match u32::try_from(end.wrapping_sub(va0)) {
            Ok(len) if end >= va0 => regions.check_span(rkey0, va0, len, u64::from(n)),
            _ => None,
        };
        let Some(Placement::Write {
            slot,
            offset: place_at,
            ..
        }) = span
        else {
            return (0, None);
        };
        let run = pkts.get(..usize::from(n)).unwrap_or_default();
        verdicts.set_placed_run(at, self.hdr.qpn, slot, place_at, run);
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
        let (deadline, ack) = self
            .rx
            .accept_write_run(now_ns, first.psn, offset, n, &last_rx, trigger, gap);
        if let Some(e) = ack {
            ctrl.push_in(|p| self.ack_packet_model(now_ns, &e, p));
        }
        // The deadline the quiet packets leave (the trigger's ACK closes it: none after).
        let quiet = n - u16::from(trigger);
        (usize::from(n), deadline.filter(|_| quiet > 0))
    }
}
