//! The QP's receive PSN tracker behind the stage's block port (`crate::datapath::blocks`): the
//! model's bitmap (the ACK generator's) takes every command first; a stand-in block answers
//! the ACKs and NACKs the QP sends.

use mrc_abi::Psn;

use super::DpQp;
use crate::datapath::ack_gen::{RxPacket, TrimMark};
use crate::datapath::blocks::{Blocks, RxTrackerCmd, RxTrackerPort};
use crate::datapath::packet::{DropReason, Packet, PacketBody};
use crate::datapath::rx_bitmap::RxOutcome;
use crate::datapath::stage::rx::WriteResult;

impl<
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
    > DpQp<EVS, P, WIN, WORDS, SQ, RQ>
{
    fn rx_tracker<'a>(&'a self, blocks: &'a mut dyn Blocks) -> RxTrackerPort<'a, WORDS> {
        RxTrackerPort {
            model: self.rx.ack_gen().rx(),
            blocks,
            qp: self.hdr.qpn,
        }
    }

    /// The receive side started at `rq_psn` (RTR) with a fresh tracker (only with a
    /// stand-in: the models' tracker needs nothing).
    pub(super) fn tracker_started(&self, rq_psn: Psn, blocks: &mut dyn Blocks) {
        if blocks.models_only() {
            return;
        }
        blocks.rx_tracker_reset(self.hdr.qpn);
        let _ = self
            .rx_tracker(blocks)
            .took(RxTrackerCmd::Reset(rq_psn), RxOutcome::New);
    }

    /// The tracker's receive of the write `rxp` when the model marked it (`result`: what
    /// `RxSide::handle_write` made of it). The model's bitmap saw the PSN unless the packet
    /// was trimmed or stopped before the ACK generator (outside the window, a failed
    /// placement check): then it was placed (new) or dropped as a duplicate. (Only with a
    /// stand-in.)
    pub(super) fn tracker_received(
        &self,
        rxp: &RxPacket,
        result: &WriteResult,
        blocks: &mut dyn Blocks,
    ) {
        if rxp.trim != TrimMark::None {
            return;
        }
        let outcome = match result {
            WriteResult::Place(_) => RxOutcome::New,
            WriteResult::Drop(DropReason::Duplicate) => RxOutcome::Duplicate,
            _ => return,
        };
        let _ = self
            .rx_tracker(blocks)
            .took(RxTrackerCmd::Receive(rxp.psn), outcome);
    }

    /// The ACK or NACK `p` as the tracker answers it: an ACK's cumulative PSN (its BTH PSN)
    /// and SACK bitmap from its SACK base, a NACK's cumulative PSN (its BTH PSN), read with a
    /// SACK transaction. (Only with a stand-in: out of line, off the model's path.)
    #[inline(never)]
    pub(super) fn track(&self, p: &mut Packet, blocks: &mut dyn Blocks) {
        let mut port = self.rx_tracker(blocks);
        match &mut p.body {
            PacketBody::Ack(a) => {
                let r = port.took(RxTrackerCmd::Sack(a.sack_base), RxOutcome::New);
                a.cum_psn = r.cum_psn;
                a.sack_bitmap = r.sack_bitmap;
                p.psn = r.cum_psn;
            }
            PacketBody::Nack(n) => {
                let r = port.took(RxTrackerCmd::Sack(n.cum_psn), RxOutcome::New);
                n.cum_psn = r.cum_psn;
                p.psn = r.cum_psn;
            }
            _ => {}
        }
    }
}
