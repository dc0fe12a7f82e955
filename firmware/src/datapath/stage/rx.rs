//! The receive side of one QP in the datapath: receive tracking and coalesced ACKs (the
//! [`AckGen`]), placement checks, and Write-with-Immediate ordering.
//!
//! # Rules, in order, for one received write packet
//! 1. Trimmed: the ACK generator NACKs it (`TRIMMED` / `TRIMMED_LAST_HOP`); nothing placed.
//! 2. Already received (before the cumulative PSN or its bit set): re-ACKed, not placed.
//! 3. At or beyond `cum + MPR * 128`: NACK `OUT_OF_WINDOW`, not marked received.
//! 4. The RETH is checked against the registered regions; a failure is a NACK with its reason
//!    and a fatal error for the QP — **never a write**.
//! 5. A Write-with-Immediate's last packet needs room: fewer than `max_wimm` immediates waiting
//!    (else NACK `TOO_MANY_WIMM`, not marked received, the requester resends it later) and a
//!    posted receive (`Datapath::post_recv`) not already promised to an earlier immediate
//!    (else NACK `NO_RECV_BUFFER`, fatal).
//! 6. Otherwise the PSN is marked received (the ACK generator may ACK now) and the caller is
//!    told where to place the payload.
//!
//! An immediate is reported to the firmware ([`WimmPlaced`], with the receive it consumes)
//! only when the cumulative PSN has passed its last packet, i.e. every PSN up to it is placed;
//! waiting immediates are kept sorted by PSN, so they are reported in posting (MSN) order,
//! each consuming the oldest posted receive. In ERROR the receives left are reported
//! [`Flushed`].
//!
//! [`WimmPlaced`]: mrc_abi::device::csr::WimmPlaced
//! [`Flushed`]: mrc_abi::device::csr::Flushed

use heapless::Vec;
use mrc_abi::device::csr::{self, CsrEvent, Flushed, WimmPlaced};
use mrc_abi::wire::{NackReason, RethRepr};
use mrc_abi::Psn;

use super::events::Events;
use crate::datapath::ack_gen::{AckEvent, AckGen, AckGenConfig, AckSummary, RxPacket, TrimMark};
use crate::datapath::packet::DropReason;
use crate::datapath::placement::{Placement, Regions};
use crate::datapath::rx_bitmap::RxBitmap;
use crate::ring::Ring;

#[derive(Clone, Copy, Debug)]
struct PendingImm {
    last_psn: Psn,
    imm: u32,
    msn: u16,
}

/// Receive-side counters of one QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxCounters {
    pub placed: u64,
    pub duplicates: u64,
    pub trimmed: u64,
    pub out_of_window: u64,
    pub access_errors: u64,
    pub no_recv_buffer: u64,
    pub too_many_wimm: u64,
    /// Write-with-Immediate messages reported placed.
    pub imms_placed: u64,
    /// Immediates dropped because the QP entered ERROR before they were placed in order.
    pub imms_dropped: u64,
    pub recv_posted: u64,
    pub recv_refused: u64,
    pub recv_flushed: u64,
}

/// What became of a received write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteResult {
    Place(Placement),
    Drop(DropReason),
    Fatal(NackReason),
}

/// The receive side of one QP: a window of `64 * WORDS` PSNs, `RQ` immediates waiting at most.
pub(crate) struct RxSide<const WORDS: usize, const RQ: usize> {
    acks: AckGen<WORDS>,
    pending: Vec<PendingImm, RQ>,
    /// Posted receives not yet consumed by a reported immediate, oldest first.
    rq: Ring<u64, RQ>,
    mpr_psns: u32,
    max_wimm: u16,
    live: bool,
    /// ERROR: the receives left are to be reported flushed.
    flushing: bool,
    counters: RxCounters,
}

impl<const WORDS: usize, const RQ: usize> RxSide<WORDS, RQ> {
    pub(crate) const OFF: Self = RxSide {
        acks: AckGen::OFF,
        pending: Vec::new(),
        rq: Ring::new(0),
        mpr_psns: 0,
        max_wimm: 0,
        live: false,
        flushing: false,
        counters: RxCounters {
            placed: 0,
            duplicates: 0,
            trimmed: 0,
            out_of_window: 0,
            access_errors: 0,
            no_recv_buffer: 0,
            too_many_wimm: 0,
            imms_placed: 0,
            imms_dropped: 0,
            recv_posted: 0,
            recv_refused: 0,
            recv_flushed: 0,
        },
    };

    /// Back to before RTR.
    pub(crate) fn reset(&mut self) {
        self.pending.clear();
        self.rq.clear();
        self.live = false;
        self.flushing = false;
        self.counters = RxCounters::default();
    }

    /// RTR: receiving for local QP `qpn` from `rq_psn`.
    pub(crate) fn start(
        &mut self,
        qpn: u32,
        rq_psn: Psn,
        mpr_psns: u32,
        max_wimm: u16,
        ack: AckGenConfig,
    ) {
        self.acks = AckGen::new(qpn, rq_psn, ack);
        self.pending.clear();
        self.mpr_psns = mpr_psns.min(RxBitmap::<WORDS>::WINDOW);
        self.max_wimm = max_wimm.min(RQ as u16);
        self.live = true;
    }

    /// ERROR: nothing more is placed; waiting immediates are dropped, the receives left are
    /// reported flushed ([`Self::poll_flush`]).
    pub(crate) fn stop(&mut self) {
        if self.live {
            self.flushing = true;
        }
        self.live = false;
        self.counters.imms_dropped += self.pending.len() as u64;
        self.pending.clear();
    }

    /// Reports flushed receives while `events` has room; `true` when none is left.
    pub(crate) fn poll_flush(&mut self, qpn: u32, events: &mut Events) -> bool {
        if !self.flushing {
            return true;
        }
        while let Some(&wr_id) = self.rq.front() {
            if events.room() == 0 {
                return false;
            }
            events.push(CsrEvent::Flushed(Flushed::new(qpn, wr_id, csr::FLUSH_RECV)));
            self.counters.recv_flushed += 1;
            self.rq.pop_front();
        }
        self.flushing = false;
        true
    }

    /// Whether flushed receives wait to be reported.
    pub(crate) fn flush_pending(&self) -> bool {
        self.flushing
    }

    pub(crate) fn counters(&self) -> RxCounters {
        self.counters
    }

    pub(crate) fn ack_gen(&self) -> &AckGen<WORDS> {
        &self.acks
    }

    /// A receive work request was posted (RTR or RTS).
    pub(crate) fn post_recv(&mut self, wr_id: u64) -> Result<(), super::tx::PostError> {
        let r = if !self.live {
            Err(super::tx::PostError::NotSending)
        } else {
            self.rq
                .push_back(wr_id)
                .map_err(|_| super::tx::PostError::QueueFull)
        };
        match r {
            Ok(()) => self.counters.recv_posted += 1,
            Err(_) => self.counters.recv_refused += 1,
        }
        r
    }

    /// When the coalescing ACK is due.
    pub(crate) fn ack_deadline_ns(&self) -> Option<u64> {
        if self.live {
            self.acks.poll_timeout()
        } else {
            None
        }
    }

    /// The coalescing timer fired.
    pub(crate) fn handle_timeout(&mut self, now_ns: u64) -> Option<AckEvent> {
        self.acks.handle_timeout(now_ns).map(AckEvent::Ack)
    }

    /// A NACK for `pkt` with `reason` (answered without touching the receive state).
    pub(crate) fn nack(&mut self, pkt: &RxPacket, reason: NackReason) -> AckEvent {
        AckEvent::Nack(self.acks.nack_for(pkt, reason))
    }

    /// One received write packet; see the module docs. The ACK or NACK it calls for, if any,
    /// is written to `event`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn handle_write<R: Regions>(
        &mut self,
        now_ns: u64,
        pkt: &RxPacket,
        reth: &RethRepr,
        imm: Option<(u32, u16)>,
        payload_len: u32,
        regions: &mut R,
        event: &mut Option<AckEvent>,
    ) -> WriteResult {
        let c = &mut self.counters;
        let early = if pkt.trim != TrimMark::None {
            c.trimmed += 1;
            Some(DropReason::Trimmed)
        } else {
            let rx = self.acks.rx();
            let d = pkt.psn.distance_from(rx.cum_psn());
            if d < 0 || rx.is_received(pkt.psn) {
                c.duplicates += 1;
                Some(DropReason::Duplicate)
            } else {
                if d as u32 >= self.mpr_psns {
                    c.out_of_window += 1;
                    *event = Some(AckEvent::Nack(
                        self.acks.nack_for(pkt, NackReason::OutOfWindow),
                    ));
                    return WriteResult::Drop(DropReason::OutOfWindow);
                }
                None
            }
        };
        let mut placement = Placement::Empty;
        if early.is_none() {
            placement = match regions.check_write(reth.rkey, reth.va, reth.dma_len, payload_len) {
                Ok(p) => p,
                Err(e) => {
                    self.counters.access_errors += 1;
                    let reason = e.nack_reason();
                    *event = Some(AckEvent::Nack(self.acks.nack_for(pkt, reason)));
                    return WriteResult::Fatal(reason);
                }
            };
            if imm.is_some() {
                if self.pending.len() >= usize::from(self.max_wimm) {
                    self.counters.too_many_wimm += 1;
                    *event = Some(AckEvent::Nack(
                        self.acks.nack_for(pkt, NackReason::TooManyWimm),
                    ));
                    return WriteResult::Drop(DropReason::TooManyWimm);
                }
                if self.rq.len() <= self.pending.len() {
                    self.counters.no_recv_buffer += 1;
                    *event = Some(AckEvent::Nack(
                        self.acks.nack_for(pkt, NackReason::NoRecvBuffer),
                    ));
                    return WriteResult::Fatal(NackReason::NoRecvBuffer);
                }
            }
        }
        let decision = self.acks.handle_packet(now_ns, pkt);
        if let Some(e) = decision.event {
            *event = Some(e);
        }
        if let Some(reason) = early {
            return WriteResult::Drop(reason);
        }
        if !decision.place {
            // Unreachable given the checks above; counted as a duplicate to stay safe.
            self.counters.duplicates += 1;
            return WriteResult::Drop(DropReason::Duplicate);
        }
        if let Some((imm, msn)) = imm {
            let cum = self.acks.rx().cum_psn();
            let key = pkt.psn.distance_from(cum);
            let at = self
                .pending
                .iter()
                .position(|p| p.last_psn.distance_from(cum) > key)
                .unwrap_or(self.pending.len());
            // Room was checked above (pending < max_wimm <= RQ).
            let _ = self.pending.insert(
                at,
                PendingImm {
                    last_psn: pkt.psn,
                    imm,
                    msn,
                },
            );
        }
        self.counters.placed += 1;
        WriteResult::Place(placement)
    }

    /// For a run of `n` consecutive writes from PSN `first`, each untrimmed, not CE-marked,
    /// without immediate, all but the last without ACK request, and, when `first` opens a gap
    /// (`AckGen::opens_gap`), a run of one with `trigger`: the offset of `first` after the
    /// cumulative PSN when [`Self::handle_write`] would take every one of them as new and
    /// inside the window, the first not answering an owed ACK, and all quiet (no ACK) but,
    /// when `trigger`, the last (its ACK request, the coalescing count it fills, or the gap it
    /// opens); placement aside. `None` otherwise (then one packet at a time).
    #[inline]
    pub(crate) fn write_run_offset(&self, first: Psn, n: u16, trigger: bool) -> Option<u32> {
        let acks = &self.acks;
        debug_assert!(!acks.opens_gap(first) || (n == 1 && trigger));
        // `first.distance_from(cum)` when it is not negative.
        let d = first.offset_from(acks.rx().cum_psn());
        if d >= Psn::HALF {
            return None;
        }
        // In order (`d == 0`) every packet is at offset 0 when it arrives; only then may the
        // first answer an owed ACK.
        let span = if d == 0 {
            if acks.may_answer_owed(first) {
                return None;
            }
            1
        } else {
            d.saturating_add(u32::from(n))
        };
        if n == 0
            || span > self.mpr_psns
            || n - u16::from(trigger) > acks.quiet_room()
            || !acks.rx().run_is_new(d, u32::from(n))
        {
            return None;
        }
        Some(d)
    }

    /// Take the run [`Self::write_run_offset`] accepted (`offset`; `n` packets from `first`,
    /// each having passed placement); `last` is the last of them. With `trigger` (as given
    /// there) the last calls for the ACK, returned with the deadline the packets before it
    /// left (`gap`: `first` opens a gap); without, none does and the deadline is the
    /// interval's. The same state and counters as `n` calls of [`Self::handle_write`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn accept_write_run(
        &mut self,
        now_ns: u64,
        first: Psn,
        offset: u32,
        n: u16,
        last: &RxPacket,
        trigger: bool,
        gap: bool,
    ) -> (Option<u64>, Option<AckSummary>) {
        self.counters.placed += u64::from(n);
        if trigger {
            let (due, ack) = self
                .acks
                .handle_acked_run(now_ns, first, offset, n, last, gap);
            (due, Some(ack))
        } else {
            self.acks.handle_quiet_run(now_ns, first, offset, n, last);
            (self.acks.poll_timeout(), None)
        }
    }

    /// Whether an immediate is ready to report.
    #[inline]
    pub(crate) fn imm_ready(&self) -> bool {
        self.pending
            .first()
            .is_some_and(|p| p.last_psn.distance_from(self.acks.rx().cum_psn()) < 0)
    }

    /// Reports the immediates every PSN up to which is placed, while `events` has room.
    pub(crate) fn poll_imms(&mut self, qpn: u32, events: &mut Events) {
        while self.imm_ready() && events.room() > 0 {
            let p = self.pending.remove(0);
            // (room was checked when the immediate was accepted: a receive is there)
            let Some(wr_id) = self.rq.pop_front() else {
                self.counters.imms_dropped += 1;
                continue;
            };
            self.counters.imms_placed += 1;
            events.push(CsrEvent::WimmPlaced(WimmPlaced::new(
                qpn, p.msn, p.last_psn, p.imm, 0, false, wr_id,
            )));
        }
    }
}
