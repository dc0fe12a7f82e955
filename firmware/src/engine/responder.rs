//! The responder half of a QP: receive tracking, placement checks, immediate completions.
//!
//! # Rules, in order, for one received write packet
//! 1. Trimmed: the ACK generator NACKs it (`TRIMMED` / `TRIMMED_LAST_HOP`); nothing placed.
//! 2. Already received (before the cumulative PSN or its bit set): re-ACKed, not placed.
//! 3. At or beyond `cum + MPR * 128`: NACK `OUT_OF_WINDOW`, not marked received.
//! 4. The RETH is checked against the registered regions ([`PlacementTable::check_write`]); a
//!    failure is a NACK with its reason and a fatal error for the QP — **never a write**.
//! 5. A Write-with-Immediate's last packet needs room: fewer than `max_wimm` immediates waiting
//!    (else NACK `TOO_MANY_WIMM`, not marked received, the requester resends it later) and a
//!    posted receive buffer not already promised to an earlier immediate (else NACK
//!    `NO_RECV_BUFFER`, fatal).
//! 6. Otherwise the PSN is marked received (the ACK generator may ACK now) and the caller is
//!    told where to place the payload.
//!
//! An immediate completes only when the cumulative PSN has passed its last packet, i.e. every
//! PSN up to it is placed; waiting immediates are kept sorted by PSN, so they complete in
//! posting (MSN) order, each consuming the oldest posted receive buffer.

use heapless::{Deque, Vec};
use mrc_abi::wire::{NackReason, RethRepr};
use mrc_abi::Psn;

use crate::datapath::ack_gen::{AckEvent, AckGen, AckGenConfig, RxPacket, TrimMark};
use crate::datapath::placement::{Placement, PlacementTable};
use crate::datapath::rx_bitmap::RxBitmap;
use crate::engine::packet::{Completion, CompletionError, CompletionKind, DropReason};
use crate::engine::qp::{QpError, RtrParams};

#[derive(Clone, Copy, Debug)]
struct PendingImm {
    last_psn: Psn,
    imm: u32,
    msn: u16,
}

/// Responder counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResponderCounters {
    pub placed: u64,
    pub duplicates: u64,
    pub trimmed: u64,
    pub out_of_window: u64,
    pub access_errors: u64,
    pub no_recv_buffer: u64,
    pub too_many_wimm: u64,
    pub imm_completions: u64,
    pub recv_posted: u64,
    pub recv_refused: u64,
    pub flushed: u64,
    /// Immediates dropped because the QP entered ERROR before they completed.
    pub imms_dropped: u64,
}

/// What became of a received write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteResult {
    Place(Placement),
    Drop(DropReason),
    Fatal(NackReason),
}

/// The responder of one QP: receive window of `64 * WORDS` PSNs, receive queue of `RQ`.
pub struct Responder<const WORDS: usize, const RQ: usize> {
    acks: AckGen<WORDS>,
    rq: Deque<u64, RQ>,
    pending: Vec<PendingImm, RQ>,
    mpr_psns: u32,
    max_wimm: u16,
    in_error: bool,
    error: Option<CompletionError>,
    counters: ResponderCounters,
}

impl<const WORDS: usize, const RQ: usize> Responder<WORDS, RQ> {
    /// A responder for local QP `qpn` from validated RTR attributes.
    pub fn new(qpn: u32, p: &RtrParams, ack: AckGenConfig) -> Self {
        Responder {
            acks: AckGen::new(qpn, p.rq_psn, ack),
            rq: Deque::new(),
            pending: Vec::new(),
            mpr_psns: p.mpr_psns.min(RxBitmap::<WORDS>::WINDOW),
            max_wimm: p.max_wimm,
            in_error: false,
            error: None,
            counters: ResponderCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> ResponderCounters {
        self.counters
    }

    /// The ACK generator (and through it the receive tracker).
    pub fn ack_gen(&self) -> &AckGen<WORDS> {
        &self.acks
    }

    /// Post a receive buffer for an incoming immediate.
    ///
    /// # Errors
    /// [`QpError::QueueFull`] (counted).
    pub fn post_recv(&mut self, wr_id: u64) -> Result<(), QpError> {
        match self.rq.push_back(wr_id) {
            Ok(()) => {
                self.counters.recv_posted += 1;
                Ok(())
            }
            Err(_) => {
                self.counters.recv_refused += 1;
                Err(QpError::QueueFull)
            }
        }
    }

    /// When the coalescing ACK is due.
    pub fn ack_deadline_ns(&self) -> Option<u64> {
        self.acks.poll_timeout()
    }

    /// The coalescing timer fired.
    pub(crate) fn handle_timeout(&mut self, now_ns: u64) -> Option<AckEvent> {
        self.acks.handle_timeout(now_ns).map(AckEvent::Ack)
    }

    /// [`Self::handle_write`] for the common packet: untrimmed, no immediate, new, inside
    /// the window, a RETH that passes. Returns where to place it and the ACK it calls for, if
    /// any; `None`, having changed nothing, for any other packet (the caller then calls
    /// [`Self::handle_write`], which decides the same for these).
    #[inline]
    pub(crate) fn handle_write_fast<const R: usize>(
        &mut self,
        now_ns: u64,
        pkt: &RxPacket,
        reth: &RethRepr,
        payload_len: u32,
        regions: &mut PlacementTable<R>,
    ) -> Option<(Placement, Option<AckEvent>)> {
        if pkt.trim != TrimMark::None || pkt.has_imm {
            return None;
        }
        let rx = self.acks.rx();
        // The offset after the cumulative PSN; one in the back half of the PSN space (before
        // it) is beyond `mpr_psns <= ` the bitmap's window `< Psn::HALF` as well.
        let d = pkt.psn.offset_from(rx.cum_psn());
        if d >= self.mpr_psns || rx.is_received_at(d) {
            return None;
        }
        let placement = regions.check_write_ok(reth.rkey, reth.va, reth.dma_len, payload_len)?;
        let event = if self.acks.is_quiet(pkt) {
            self.acks.handle_quiet(now_ns, pkt, d);
            None
        } else {
            // New and inside the window: the generator marks it received (placed) and
            // may ACK.
            self.acks.handle_new_at(now_ns, pkt, d).map(AckEvent::Ack)
        };
        self.counters.placed += 1;
        Some((placement, event))
    }

    /// [`Self::handle_write`] for an untrimmed write without immediate whose PSN was received
    /// already (rule 2): counted as a duplicate and re-ACKed (the ACK returned). `None`,
    /// having changed nothing, for any other packet.
    #[inline]
    pub(crate) fn handle_duplicate_fast(
        &mut self,
        now_ns: u64,
        pkt: &RxPacket,
    ) -> Option<AckEvent> {
        if pkt.trim != TrimMark::None || pkt.has_imm || !self.acks.rx().is_received(pkt.psn) {
            return None;
        }
        self.counters.duplicates += 1;
        Some(AckEvent::Ack(self.acks.handle_duplicate(now_ns, pkt)))
    }

    /// For a run of `n` consecutive writes from PSN `first` that are each untrimmed, not
    /// CE-marked and without immediate, all but the last without ACK request, and, when
    /// `first` opens a gap (`AckGen::opens_gap`), a run of one with `trigger` (the caller
    /// checks those; the gap debug-asserted): the offset of `first` after the cumulative PSN
    /// when [`Self::handle_write_fast`] would take every one of them as new and inside the
    /// window, the first not answering an owed ACK, and all quiet (no ACK: the coalescing
    /// count not reached) but, when `trigger`, the last (its ACK request, the count it fills,
    /// or the gap it opens, calls for the ACK); placement aside. `None` otherwise (then one
    /// packet at a time).
    #[inline]
    pub(crate) fn write_run_offset(&self, first: Psn, n: u16, trigger: bool) -> Option<u32> {
        let acks = &self.acks;
        debug_assert!(!acks.opens_gap(first) || (n == 1 && trigger));
        // `first.distance_from(cum)` when it is not negative (the same 24-bit arithmetic,
        // without the sign extension).
        let d = first.offset_from(acks.rx().cum_psn());
        if d >= Psn::HALF {
            return None;
        }
        // In order (`d == 0`) every packet is at offset 0 when it arrives. (`span > d` for
        // `n > 0`: inside the window, `d < mpr_psns`, with it.)
        // Only `first == cum` (`d == 0`) may answer an owed ACK.
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

    /// Take the run [`Self::write_run_offset`] accepted (`offset`; its first `n` packets, each
    /// having passed placement, none calling for an ACK); `last` is the last of them. The same
    /// state and counters as `n` calls of [`Self::handle_write_fast`], none of which calls
    /// for an ACK.
    #[inline]
    pub(crate) fn accept_write_run(
        &mut self,
        now_ns: u64,
        first: Psn,
        offset: u32,
        n: u16,
        last: &RxPacket,
    ) {
        self.acks.handle_quiet_run(now_ns, first, offset, n, last);
        self.counters.placed += u64::from(n);
    }

    /// [`Self::accept_write_run`] for a run accepted with `trigger`: its last packet `last`
    /// calls for the ACK (or, alone, opens a gap). The same state and counters as `n` calls of
    /// [`Self::handle_write_fast`], the last returning the ACK. Returns when the ACK's
    /// interval was due by timer (the deadline the packets before the last left) and the ACK.
    /// `gap`: as for [`Self::write_run_offset`].
    #[inline]
    pub(crate) fn accept_write_run_acked(
        &mut self,
        now_ns: u64,
        first: Psn,
        offset: u32,
        n: u16,
        last: &RxPacket,
        gap: bool,
    ) -> (Option<u64>, AckEvent) {
        let (due, ack) = self
            .acks
            .handle_acked_run(now_ns, first, offset, n, last, gap);
        self.counters.placed += u64::from(n);
        (due, AckEvent::Ack(ack))
    }

    /// One received write packet; see the module docs for the rules. The ACK or NACK it
    /// calls for, if any, is written to `event` (left untouched otherwise).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn handle_write<const R: usize>(
        &mut self,
        now_ns: u64,
        pkt: &RxPacket,
        reth: &RethRepr,
        imm: Option<(u32, u16)>,
        payload_len: u32,
        regions: &mut PlacementTable<R>,
        event: &mut Option<AckEvent>,
    ) -> WriteResult {
        let c = &mut self.counters;
        // Trimmed and duplicate packets go through the ACK generator too (it NACKs / re-ACKs
        // them); one call site for all three keeps it inlined.
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
                    let n = self.acks.nack_for(pkt, NackReason::OutOfWindow);
                    *event = Some(AckEvent::Nack(n));
                    return WriteResult::Drop(DropReason::OutOfWindow);
                }
                None
            }
        };
        let mut placement = Placement::Empty;
        if early.is_none() {
            let c = &mut self.counters;
            placement = match regions.check_write(reth.rkey, reth.va, reth.dma_len, payload_len) {
                Ok(p) => p,
                Err(e) => {
                    c.access_errors += 1;
                    let reason = e.nack_reason();
                    let n = self.acks.nack_for(pkt, reason);
                    *event = Some(AckEvent::Nack(n));
                    return WriteResult::Fatal(reason);
                }
            };
            if imm.is_some() {
                if self.pending.len() >= usize::from(self.max_wimm) {
                    c.too_many_wimm += 1;
                    let n = self.acks.nack_for(pkt, NackReason::TooManyWimm);
                    *event = Some(AckEvent::Nack(n));
                    return WriteResult::Drop(DropReason::TooManyWimm);
                }
                if self.rq.len() <= self.pending.len() {
                    c.no_recv_buffer += 1;
                    let n = self.acks.nack_for(pkt, NackReason::NoRecvBuffer);
                    *event = Some(AckEvent::Nack(n));
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

    /// Enter ERROR: waiting immediates are dropped, receive buffers flushed (the first with
    /// `cause`).
    pub(crate) fn enter_error(&mut self, cause: CompletionError) {
        if !self.in_error {
            self.in_error = true;
            self.error = Some(cause);
        }
    }

    /// Whether [`Self::poll_completion`] would do anything: the oldest pending immediate is
    /// complete, or the QP is in ERROR.
    #[inline]
    pub(crate) fn completion_waits(&self) -> bool {
        self.in_error
            || self
                .pending
                .first()
                .is_some_and(|p| p.last_psn.distance_from(self.acks.rx().cum_psn()) < 0)
    }

    /// The next receive completion: a finished immediate, or a flushed buffer in ERROR.
    #[inline]
    pub(crate) fn poll_completion(&mut self, qpn: u32) -> Option<Completion> {
        let cum = self.acks.rx().cum_psn();
        if let Some(p) = self.pending.first().copied() {
            if p.last_psn.distance_from(cum) < 0 {
                self.pending.remove(0);
                let wr_id = self.rq.pop_front()?;
                self.counters.imm_completions += 1;
                return Some(Completion {
                    qpn,
                    wr_id,
                    kind: CompletionKind::RecvImm {
                        imm: p.imm,
                        msn: p.msn,
                    },
                    status: Ok(()),
                });
            }
        }
        if !self.in_error {
            return None;
        }
        self.counters.imms_dropped += self.pending.len() as u64;
        self.pending.clear();
        let wr_id = self.rq.pop_front()?;
        self.counters.flushed += 1;
        Some(Completion {
            qpn,
            wr_id,
            kind: CompletionKind::Recv,
            status: Err(self.error.take().unwrap_or(CompletionError::Flushed)),
        })
    }
}
