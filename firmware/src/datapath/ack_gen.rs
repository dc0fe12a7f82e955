//! Coalesced ACK / NACK generator: the receive side's answer to data packets.
//!
//! # Hardware block
//!
//! - **State** (per QP): the QP number, the [`AckGenConfig`], the QP's [`RxBitmap`] (owned
//!   here), and the *pending* ACK interval: data packets and CE-marked packets counted since the
//!   last ACK, the ECN plane mask, the EV index / plane / tx timestamp of the latest counted
//!   packet, and the time the interval's first packet arrived.
//! - **Inputs**: one received data packet per call ([`AckGen::handle_packet`], with the current
//!   time `now_ns`), and timer expiry ([`AckGen::handle_timeout`]). Time is always passed in.
//! - **Outputs**: at most one [`AckEvent`] per call: an [`AckSummary`] (ACK) or a
//!   [`NackSummary`] (NACK); [`AckGen::poll_timeout`] says when the next timer-driven ACK is due.
//! - **Capacity**: the window of the owned [`RxBitmap<WORDS>`]; interval counts saturate at
//!   `u16::MAX` (the ACKX field width).
//!
//! # Rules, in order, for one data packet
//!
//! 1. **Trimmed** (MRH TRIMMED / TRIMMED_LAST_HOP): the payload is gone, so the PSN is *not*
//!    marked received. If it is in the window and not yet received: NACK with reason
//!    `TRIMMED` / `TRIMMED_LAST_HOP`. If already received: nothing (a stale copy; counted). If
//!    beyond the window: NACK `OUT_OF_WINDOW`. Trimmed packets are not counted in the interval.
//! 2. **Out of window**: NACK `OUT_OF_WINDOW`, not counted in the interval.
//! 3. Otherwise the packet is counted in the interval (packet count, CE count and ECN plane mask
//!    bit when CE-marked; the ACK echoes its EV index, plane and tx timestamp), and an ACK is
//!    emitted **now** when any of these holds:
//!    - it is a **duplicate** (the sender retransmitted: re-synchronise it);
//!    - it opens a **gap**: it is new and lies beyond `next_max` (one past the highest PSN
//!      received so far), i.e. it arrives ahead of a hole that was not there before (only with
//!      [`AckGenConfig::ack_on_gap`]); packets that fill holes do not trigger;
//!    - it carries **immediate data** (the sender's completion ordering waits on it);
//!    - its BTH **A** (ack request) bit is set;
//!    - it fills the **last hole** while a request is *owed*: an ACK for a packet with immediate
//!      data or an ACK request (whatever its cause) went out with holes below the highest PSN
//!      received, and this packet (necessarily the cumulative PSN) leaves none. Packets that
//!      fill holes do not trigger otherwise, so reordering costs no extra ACKs; without this
//!      the sender's request would wait for the timer whenever the packet it marked overtook
//!      an earlier one, which with spraying is common;
//!    - the interval holds [`AckGenConfig::coalesce_pkts`] packets.
//!
//!    Otherwise the ACK waits for more packets or for the timer: `coalesce_ns` after the
//!    interval's first packet.
//!
//! The SACK of every ACK starts at the cumulative PSN (`sack_base = cum_psn`, so bit 0 is always
//! clear: the cumulative PSN is by definition missing) and covers the next 64 PSNs.
//!
//! Placement (RETH checks) happens after this block for packets the tracker called new; its
//! failures become NACKs built with [`AckGen::nack_for`].

use mrc_abi::Psn;

use super::rx_bitmap::{RxBitmap, RxOutcome, Sack};

/// NACK reason codes (NACKX byte 0): the one definition lives in the wire codec.
pub use mrc_abi::wire::NackReason;

/// Trim marks from the MRH flags of a received packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TrimMark {
    /// Payload intact.
    #[default]
    None,
    /// MRH TRIMMED set.
    Trimmed,
    /// MRH TRIMMED and TRIMMED_LAST_HOP set.
    TrimmedLastHop,
}

/// The fields of a received data packet the generator looks at (parsed by the wire block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxPacket {
    /// BTH PSN.
    pub psn: Psn,
    /// EVX EV index (0 when the packet has no EVX).
    pub ev_index: u16,
    /// EVX plane, or the port the packet arrived on.
    pub plane: u8,
    /// IPv6 ECN field was CE.
    pub ce: bool,
    /// MRH trim flags.
    pub trim: TrimMark,
    /// The opcode carries immediate data (WRITE_LAST_IMM / WRITE_ONLY_IMM).
    pub has_imm: bool,
    /// BTH A bit.
    pub ack_req: bool,
    /// TSX tx timestamp (0 without TSX), echoed in the ACK.
    pub tx_ts_ns: u32,
}

/// A coalesced ACK: what the wire block encodes as an ACK packet's ACKX (+ TSX echo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AckSummary {
    pub qpn: u32,
    /// Every PSN before it has been received.
    pub cum_psn: Psn,
    /// PSN of bit 0 of `sack_bitmap`.
    pub sack_base: Psn,
    /// Bit `i` = PSN `sack_base + i` received.
    pub sack_bitmap: u64,
    /// EV index of the data packet that triggered this ACK (the latest one counted).
    pub ev_index: u16,
    /// Plane of that packet.
    pub plane: u8,
    /// Bit `p` = a CE mark arrived on plane `p` during the interval.
    pub ecn_plane_mask: u8,
    /// CE-marked data packets in the interval.
    pub ce_count: u16,
    /// Data packets in the interval.
    pub pkt_count: u16,
    /// Tx timestamp of the triggering packet.
    pub echo_ts_ns: u32,
}

/// A NACK: what the wire block encodes as a NACK packet's NACKX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NackSummary {
    pub qpn: u32,
    pub reason: NackReason,
    /// The NACKed PSN.
    pub psn: Psn,
    /// The responder's cumulative PSN.
    pub cum_psn: Psn,
    /// EV index of the NACKed packet.
    pub ev_index: u16,
    /// Plane of the NACKed packet.
    pub plane: u8,
}

/// The generator's decision for one received data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AckDecision {
    /// The tracker's view of the PSN (for a trimmed packet: whether it was already received or
    /// beyond the window; a trimmed packet is never marked received).
    pub outcome: RxOutcome,
    /// Place the payload: the packet is untrimmed and its PSN is new.
    pub place: bool,
    /// The ACK or NACK to send now, if any.
    pub event: Option<AckEvent>,
}

/// The generator's output for one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AckEvent {
    Ack(AckSummary),
    Nack(NackSummary),
}

/// Coalescing policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AckGenConfig {
    /// ACK after this many counted data packets (0 is read as 1: ACK every packet).
    pub coalesce_pkts: u16,
    /// ACK at the latest this long after the interval's first packet.
    pub coalesce_ns: u64,
    /// ACK immediately when a packet opens a new hole.
    pub ack_on_gap: bool,
}

impl Default for AckGenConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl AckGenConfig {
    /// The defaults (what `Default` gives, usable in `const fn`).
    pub const DEFAULT: AckGenConfig = AckGenConfig {
        coalesce_pkts: 16,
        coalesce_ns: 4_000,
        ack_on_gap: true,
    };
}

/// ACK generator counters (free-running, wrapping). Each ACK is counted once, under the first
/// matching cause in the order duplicate, gap, immediate, ack request, last hole filled,
/// count, timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AckGenCounters {
    pub acks_duplicate: u64,
    pub acks_gap: u64,
    pub acks_imm: u64,
    pub acks_ack_req: u64,
    /// ACKs for a packet that filled the last hole while a request was owed.
    pub acks_filled: u64,
    pub acks_count: u64,
    pub acks_timer: u64,
    pub nacks_trimmed: u64,
    pub nacks_out_of_window: u64,
    /// NACKs built by [`AckGen::nack_for`] (placement and other receive errors).
    pub nacks_other: u64,
    /// Trimmed copies of already received PSNs, ignored.
    pub trimmed_stale: u64,
    /// CE marks on a plane `>= 8` (no ECN mask bit; still counted in `ce_count`).
    pub ce_plane_out_of_range: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Interval {
    pkt_count: u16,
    ce_count: u16,
    ecn_plane_mask: u8,
    ev_index: u16,
    plane: u8,
    echo_ts_ns: u32,
    /// Arrival time of the interval's first packet; `None` when the interval is empty.
    since_ns: Option<u64>,
}

#[derive(Clone, Copy)]
enum Cause {
    Duplicate,
    Gap,
    Imm,
    AckReq,
    Filled,
    Count,
    Timer,
}

/// The ACK generator of one QP, owning its receive tracker. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckGen<const WORDS: usize> {
    qpn: u32,
    config: AckGenConfig,
    rx: RxBitmap<WORDS>,
    interval: Interval,
    /// An ACK answering immediate data or an ACK request went out while holes remained; the
    /// packet that fills the last of them is ACKed at once (module docs).
    owed: bool,
    counters: AckGenCounters,
}

impl<const WORDS: usize> AckGen<WORDS> {
    /// A generator for `qpn` expecting `start` as the first PSN.
    pub const fn new(qpn: u32, start: Psn, config: AckGenConfig) -> Self {
        AckGen {
            qpn,
            config: AckGenConfig {
                coalesce_pkts: if config.coalesce_pkts == 0 {
                    1
                } else {
                    config.coalesce_pkts
                },
                ..config
            },
            rx: RxBitmap::new(start),
            interval: Interval {
                pkt_count: 0,
                ce_count: 0,
                ecn_plane_mask: 0,
                ev_index: 0,
                plane: 0,
                echo_ts_ns: 0,
                since_ns: None,
            },
            owed: false,
            counters: AckGenCounters {
                acks_duplicate: 0,
                acks_gap: 0,
                acks_imm: 0,
                acks_ack_req: 0,
                acks_filled: 0,
                acks_count: 0,
                acks_timer: 0,
                nacks_trimmed: 0,
                nacks_out_of_window: 0,
                nacks_other: 0,
                trimmed_stale: 0,
                ce_plane_out_of_range: 0,
            },
        }
    }

    /// A generator for no QP yet (QP 0, PSN 0, the default policy): what a QP context holds
    /// before RTR.
    pub const OFF: Self = Self::new(0, Psn::new(0), AckGenConfig::DEFAULT);

    /// The receive tracker.
    pub fn rx(&self) -> &RxBitmap<WORDS> {
        &self.rx
    }

    /// The counters.
    #[inline]
    pub fn counters(&self) -> AckGenCounters {
        self.counters
    }

    /// The (normalised) configuration.
    pub fn config(&self) -> AckGenConfig {
        self.config
    }

    /// Data packets counted since the last ACK.
    pub fn pending_packets(&self) -> u16 {
        self.interval.pkt_count
    }

    /// Per-packet decision for one received data packet at time `now_ns`.
    #[inline]
    pub fn handle_packet(&mut self, now_ns: u64, pkt: &RxPacket) -> AckDecision {
        let (outcome, event) = match pkt.trim {
            TrimMark::None => self.handle_data(now_ns, pkt),
            TrimMark::Trimmed => self.handle_trimmed(pkt, NackReason::Trimmed),
            TrimMark::TrimmedLastHop => self.handle_trimmed(pkt, NackReason::TrimmedLastHop),
        };
        AckDecision {
            outcome,
            place: outcome == RxOutcome::New && pkt.trim == TrimMark::None,
            event,
        }
    }

    fn handle_trimmed(
        &mut self,
        pkt: &RxPacket,
        reason: NackReason,
    ) -> (RxOutcome, Option<AckEvent>) {
        let cum = self.rx.cum_psn();
        let beyond =
            pkt.psn.distance_from(cum) >= 0 && !pkt.psn.in_window(cum, RxBitmap::<WORDS>::WINDOW);
        if beyond {
            return (
                RxOutcome::OutOfWindow,
                Some(self.nack(pkt, NackReason::OutOfWindow)),
            );
        }
        if self.rx.is_received(pkt.psn) {
            self.counters.trimmed_stale = self.counters.trimmed_stale.wrapping_add(1);
            return (RxOutcome::Duplicate, None);
        }
        (RxOutcome::New, Some(self.nack(pkt, reason)))
    }

    #[inline]
    fn handle_data(&mut self, now_ns: u64, pkt: &RxPacket) -> (RxOutcome, Option<AckEvent>) {
        let next_max_before = self.rx.next_max_psn();
        let outcome = self.rx.receive(pkt.psn);
        let cause = match outcome {
            RxOutcome::OutOfWindow => {
                return (outcome, Some(self.nack(pkt, NackReason::OutOfWindow)));
            }
            RxOutcome::Duplicate => Some(Cause::Duplicate),
            RxOutcome::New if self.config.ack_on_gap && pkt.psn.is_after(next_max_before) => {
                Some(Cause::Gap)
            }
            RxOutcome::New => None,
        };
        self.count(now_ns, pkt);
        let cause = cause.or(if pkt.has_imm {
            Some(Cause::Imm)
        } else if pkt.ack_req {
            Some(Cause::AckReq)
        } else if self.owed && self.rx.cum_psn() == self.rx.next_max_psn() {
            Some(Cause::Filled)
        } else if self.interval.pkt_count >= self.config.coalesce_pkts {
            Some(Cause::Count)
        } else {
            None
        });
        let request = pkt.ack_req || pkt.has_imm;
        (outcome, cause.map(|c| AckEvent::Ack(self.emit(c, request))))
    }

    /// Whether [`Self::handle_packet`] on `pkt` would only count it: an untrimmed packet
    /// without immediate or ACK request, new and inside the window (the caller has checked
    /// that), that neither opens a gap, nor may fill the last hole while an ACK is owed
    /// ([`Self::may_answer_owed`]), nor fills the coalescing count.
    #[inline]
    pub fn is_quiet(&self, pkt: &RxPacket) -> bool {
        pkt.trim == TrimMark::None
            && !pkt.has_imm
            && !pkt.ack_req
            // (`pkt_count + 1 < coalesce_pkts`; `coalesce_pkts >= 1` after normalisation)
            && self.interval.pkt_count < self.config.coalesce_pkts - 1
            && !self.opens_gap(pkt.psn)
            && !self.may_answer_owed(pkt.psn)
    }

    /// Whether a new `psn` may fill the last hole while an ACK is owed (module docs): it is the
    /// cumulative PSN, the only one whose arrival can leave no hole.
    #[inline]
    pub fn may_answer_owed(&self, psn: Psn) -> bool {
        self.owed && psn == self.rx.cum_psn()
    }

    /// [`Self::handle_packet`] for a packet [`Self::is_quiet`] accepted that is new, `offset`
    /// PSNs after the cumulative PSN, inside the window: marks it received and counts it (no
    /// ACK).
    #[inline]
    pub fn handle_quiet(&mut self, now_ns: u64, pkt: &RxPacket, offset: u32) {
        self.rx.receive_new_at(pkt.psn, offset);
        self.count(now_ns, pkt);
    }

    /// [`Self::handle_packet`] for an untrimmed packet the caller found new, `offset` PSNs
    /// after the cumulative PSN, inside the window ([`RxBitmap::is_received_at`] clear): marks
    /// it received, counts it and returns the ACK it calls for, if any, without locating it
    /// again. The same state, counters and ACK.
    #[inline]
    pub fn handle_new_at(
        &mut self,
        now_ns: u64,
        pkt: &RxPacket,
        offset: u32,
    ) -> Option<AckSummary> {
        debug_assert!(pkt.trim == TrimMark::None && !self.rx.is_received(pkt.psn));
        let next_max_before = self.rx.next_max_psn();
        self.rx.receive_new_at(pkt.psn, offset);
        let gap = self.config.ack_on_gap && pkt.psn.is_after(next_max_before);
        self.count(now_ns, pkt);
        // (the order of `handle_data`'s causes)
        let cause = if gap {
            Cause::Gap
        } else if pkt.has_imm {
            Cause::Imm
        } else if pkt.ack_req {
            Cause::AckReq
        } else if self.owed && self.rx.cum_psn() == self.rx.next_max_psn() {
            Cause::Filled
        } else if self.interval.pkt_count >= self.config.coalesce_pkts {
            Cause::Count
        } else {
            return None;
        };
        Some(self.emit(cause, pkt.ack_req || pkt.has_imm))
    }

    /// [`Self::handle_packet`] for an untrimmed `pkt` whose PSN the tracker has received
    /// already ([`RxBitmap::is_received`]; the caller has checked both): counted in the
    /// interval and ACKed at once (cause duplicate). The same state, counters and ACK.
    #[inline]
    pub fn handle_duplicate(&mut self, now_ns: u64, pkt: &RxPacket) -> AckSummary {
        debug_assert!(pkt.trim == TrimMark::None && self.rx.is_received(pkt.psn));
        self.rx.note_duplicate();
        self.count(now_ns, pkt);
        self.emit(Cause::Duplicate, pkt.ack_req || pkt.has_imm)
    }

    /// How many packets in a row [`Self::is_quiet`] can accept on the coalescing count (the
    /// next one after them fills the interval).
    #[inline]
    pub fn quiet_room(&self) -> u16 {
        // (`coalesce_pkts >= 1`, normalised by `new`: the same as
        // `coalesce_pkts.saturating_sub(pkt_count.saturating_add(1))`)
        (self.config.coalesce_pkts - 1).saturating_sub(self.interval.pkt_count)
    }

    /// Whether a new `psn` opens a gap that calls for an ACK (what [`Self::is_quiet`] checks
    /// besides the packet's flags and the count).
    #[inline]
    pub fn opens_gap(&self, psn: Psn) -> bool {
        self.config.ack_on_gap && psn.is_after(self.rx.next_max_psn())
    }

    /// [`Self::handle_quiet`] for `n` consecutive PSNs from `first`, `offset` after the
    /// cumulative PSN, none trimmed or CE-marked, none with immediate or ACK request, `n <=`
    /// [`Self::quiet_room`], `first` not [`Self::opens_gap`] nor [`Self::may_answer_owed`],
    /// and accepted by [`RxBitmap::run_is_new`]; `last` is the run's last packet. The same
    /// state and counters as `n` calls (each of those packets is quiet: the first opens no
    /// gap, the others follow it without one, and the count stays below the coalescing
    /// count).
    #[inline]
    pub fn handle_quiet_run(
        &mut self,
        now_ns: u64,
        first: Psn,
        offset: u32,
        n: u16,
        last: &RxPacket,
    ) {
        debug_assert!(n <= self.quiet_room() && !last.ack_req && !self.opens_gap(first));
        self.take_run(now_ns, first, offset, n, last);
    }

    /// [`Self::handle_quiet_run`] for a run whose last packet `last` calls for the ACK: its
    /// ACK request, or the coalescing count it fills (`n <=` [`Self::quiet_room`] `+ 1`), or
    /// the gap it opens (then it is the run's only packet: `first` may open a gap when
    /// `n == 1`); the others as there. The same state and counters as `n` calls of
    /// [`Self::handle_packet`], the last returning the ACK. Returns when the interval the ACK
    /// closes was due by timer (what [`Self::poll_timeout`] said before the ACK) and the ACK.
    /// `gap`: whether `first` opens a gap ([`Self::opens_gap`], which the caller has asked).
    /// Always inlined, as its bookkeeping: it runs once per receive run, in the run's loop.
    #[inline(always)]
    pub fn handle_acked_run(
        &mut self,
        now_ns: u64,
        first: Psn,
        offset: u32,
        n: u16,
        last: &RxPacket,
        gap: bool,
    ) -> (Option<u64>, AckSummary) {
        debug_assert_eq!(gap, self.opens_gap(first));
        debug_assert!(n <= self.quiet_room().saturating_add(1) && (!gap || n == 1));
        self.mark_run(first, offset, n, last);
        // The interval the run completes, closed at once by the ACK (as `take_run`, then
        // `emit`, without writing it back first).
        let iv = Self::with_run(core::mem::take(&mut self.interval), now_ns, n, last);
        debug_assert!(gap || last.ack_req || iv.pkt_count >= self.config.coalesce_pkts);
        let due = iv
            .since_ns
            .map(|t| t.saturating_add(self.config.coalesce_ns));
        // (the order of `handle_data`'s causes; each counter written directly)
        let c = &mut self.counters;
        if gap {
            c.acks_gap = c.acks_gap.wrapping_add(1);
        } else if last.ack_req {
            c.acks_ack_req = c.acks_ack_req.wrapping_add(1);
        } else {
            c.acks_count = c.acks_count.wrapping_add(1);
        }
        let summary = if offset == 0 {
            // In order, nothing received beyond the cumulative PSN before (`run_is_new`): it
            // stepped over the run, no hole is left and no SACK bit is set.
            let cum = self.rx.cum_psn();
            let sack = Sack {
                cum_psn: cum,
                sack_base: cum,
                bitmap: 0,
            };
            self.close_with(last.ack_req, iv, false, sack)
        } else {
            self.close_counted(last.ack_req, iv)
        };
        (due, summary)
    }

    /// The run of [`Self::handle_quiet_run`] marked received (a word at a time) and counted
    /// (once).
    #[inline(always)]
    fn take_run(&mut self, now_ns: u64, first: Psn, offset: u32, n: u16, last: &RxPacket) {
        self.mark_run(first, offset, n, last);
        self.interval = Self::with_run(self.interval, now_ns, n, last);
    }

    /// The run of [`Self::handle_quiet_run`] / [`Self::handle_acked_run`] marked received in
    /// the tracker, a word at a time.
    #[inline(always)]
    fn mark_run(&mut self, first: Psn, offset: u32, n: u16, last: &RxPacket) {
        debug_assert!(
            n >= 1
                && !self.may_answer_owed(first)
                && !last.ce
                && !last.has_imm
                && last.trim == TrimMark::None
        );
        self.rx.receive_new_run(first, offset, u32::from(n));
    }

    /// Interval `iv` with the `n` packets of a run counted, `last` the run's last.
    #[inline(always)]
    fn with_run(iv: Interval, now_ns: u64, n: u16, last: &RxPacket) -> Interval {
        Interval {
            // (no overflow: `n <= quiet_room() + 1 = coalesce_pkts - pkt_count`)
            pkt_count: iv.pkt_count.wrapping_add(n),
            ev_index: last.ev_index,
            plane: last.plane,
            echo_ts_ns: last.tx_ts_ns,
            since_ns: Some(iv.since_ns.unwrap_or(now_ns)),
            ..iv
        }
    }

    /// When the timer-driven ACK of the pending interval is due (`None` when nothing is
    /// pending).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.interval
            .since_ns
            .map(|t| t.saturating_add(self.config.coalesce_ns))
    }

    /// Timer input: the pending ACK if it is due at `now_ns`.
    pub fn handle_timeout(&mut self, now_ns: u64) -> Option<AckSummary> {
        match self.poll_timeout() {
            Some(due) if due <= now_ns => Some(self.emit(Cause::Timer, false)),
            _ => None,
        }
    }

    /// Build (and count) a NACK for `pkt` from a later receive stage, e.g. a placement error.
    pub fn nack_for(&mut self, pkt: &RxPacket, reason: NackReason) -> NackSummary {
        self.counters.nacks_other = self.counters.nacks_other.wrapping_add(1);
        self.summary_nack(pkt, reason)
    }

    /// Forget all receive state and expect `start` next (QP setup); counters are kept.
    pub fn reset(&mut self, start: Psn) {
        self.rx.reset(start);
        self.interval = Interval::default();
        self.owed = false;
    }

    fn nack(&mut self, pkt: &RxPacket, reason: NackReason) -> AckEvent {
        let c = &mut self.counters;
        match reason {
            NackReason::OutOfWindow => {
                c.nacks_out_of_window = c.nacks_out_of_window.wrapping_add(1)
            }
            NackReason::Trimmed | NackReason::TrimmedLastHop => {
                c.nacks_trimmed = c.nacks_trimmed.wrapping_add(1)
            }
            _ => c.nacks_other = c.nacks_other.wrapping_add(1),
        }
        AckEvent::Nack(self.summary_nack(pkt, reason))
    }

    fn summary_nack(&self, pkt: &RxPacket, reason: NackReason) -> NackSummary {
        NackSummary {
            qpn: self.qpn,
            reason,
            psn: pkt.psn,
            cum_psn: self.rx.cum_psn(),
            ev_index: pkt.ev_index,
            plane: pkt.plane,
        }
    }

    #[inline]
    fn count(&mut self, now_ns: u64, pkt: &RxPacket) {
        let iv = &mut self.interval;
        iv.pkt_count = iv.pkt_count.saturating_add(1);
        if pkt.ce {
            iv.ce_count = iv.ce_count.saturating_add(1);
            match 1u8.checked_shl(u32::from(pkt.plane)) {
                Some(bit) => iv.ecn_plane_mask |= bit,
                None => {
                    self.counters.ce_plane_out_of_range =
                        self.counters.ce_plane_out_of_range.wrapping_add(1)
                }
            }
        }
        iv.ev_index = pkt.ev_index;
        iv.plane = pkt.plane;
        iv.echo_ts_ns = pkt.tx_ts_ns;
        if iv.since_ns.is_none() {
            iv.since_ns = Some(now_ns);
        }
    }

    /// The ACK for `cause`; `request`: the packet that called for it carries immediate data
    /// or an ACK request (whatever the cause it is counted under, e.g. a gap it opened).
    /// Always inlined: it is on every received packet's path.
    #[inline(always)]
    fn emit(&mut self, cause: Cause, request: bool) -> AckSummary {
        let iv = core::mem::take(&mut self.interval);
        self.close(cause, request, iv)
    }

    /// The counter of ACKs for `cause`.
    #[inline(always)]
    fn cause_counter(&mut self, cause: Cause) -> &mut u64 {
        let c = &mut self.counters;
        match cause {
            Cause::Duplicate => &mut c.acks_duplicate,
            Cause::Gap => &mut c.acks_gap,
            Cause::Imm => &mut c.acks_imm,
            Cause::AckReq => &mut c.acks_ack_req,
            Cause::Filled => &mut c.acks_filled,
            Cause::Count => &mut c.acks_count,
            Cause::Timer => &mut c.acks_timer,
        }
    }

    /// [`Self::emit`] for the interval `iv`, already taken out of the generator (left empty).
    #[inline(always)]
    fn close(&mut self, cause: Cause, request: bool, iv: Interval) -> AckSummary {
        let counter = self.cause_counter(cause);
        *counter = counter.wrapping_add(1);
        self.close_counted(request, iv)
    }

    /// [`Self::close`] with the ACK's cause counted already.
    #[inline(always)]
    fn close_counted(&mut self, request: bool, iv: Interval) -> AckSummary {
        let holes = self.rx.cum_psn() != self.rx.next_max_psn();
        let sack = self.rx.sack_at_cum();
        self.close_with(request, iv, holes, sack)
    }

    /// [`Self::close_counted`] given whether holes remain below `next_max` and the SACK from
    /// the cumulative PSN (what the tracker says: debug-asserted).
    #[inline(always)]
    fn close_with(&mut self, request: bool, iv: Interval, holes: bool, sack: Sack) -> AckSummary {
        debug_assert_eq!(holes, self.rx.cum_psn() != self.rx.next_max_psn());
        debug_assert_eq!(sack, self.rx.sack_at_cum());
        self.owed = holes && (self.owed || request);
        AckSummary {
            qpn: self.qpn,
            cum_psn: sack.cum_psn,
            sack_base: sack.sack_base,
            sack_bitmap: sack.bitmap,
            ev_index: iv.ev_index,
            plane: iv.plane,
            ecn_plane_mask: iv.ecn_plane_mask,
            ce_count: iv.ce_count,
            pkt_count: iv.pkt_count,
            echo_ts_ns: iv.echo_ts_ns,
        }
    }
}

#[cfg(test)]
#[path = "ack_gen_tests.rs"]
mod tests;
