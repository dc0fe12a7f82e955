//! ACK and NACK application on the send side: the acknowledged slots credited and freed, the
//! losses a SACK bitmap reveals and the summary reported to the firmware (see the rules in the
//! parent module).

use mrc_abi::device::csr::{self, AckSummary, CsrEvent, EvDeliveries, LossEntry, NackEntry};
use mrc_abi::wire::{AckRepr, NackReason, NackRepr};
use mrc_abi::Psn;

use super::{RtoWindow, TxSide, TxSlot, F_ACKED, F_INFLIGHT, F_LOST};
use crate::datapath::stage::events::Events;

/// The low `n` bits set (`n <= 64`).
#[inline]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The later of two send times kept as the low 32 bits of ns (compared modulo 2^32).
#[inline]
fn later_ns(a: u32, b: u32) -> u32 {
    if (b.wrapping_sub(a) as i32) >= 0 {
        b
    } else {
        a
    }
}

/// What acknowledging slots changes, summed over an ACK and applied once.
#[derive(Clone, Copy, Debug)]
struct AckTally {
    /// The newest transmission acknowledged and its send time. (Send times never decrease
    /// with transmission numbers, so the newest one's is the latest: taken once, not
    /// compared per slot.)
    max_seq: u32,
    max_sent: u32,
    /// Bytes of slots that were in flight (freed and credited).
    freed: u64,
    /// Bytes of the other slots newly acknowledged (reported lost or queued for
    /// retransmission).
    other: u64,
    /// Slots that were in flight.
    credited: u32,
}

impl AckTally {
    /// Bytes newly acknowledged.
    #[inline]
    fn acked(&self) -> u64 {
        self.freed + self.other
    }

    /// Slots credited, as the summary's 16-bit field counts them (saturating).
    #[inline]
    fn credited_u16(&self) -> u16 {
        u16::try_from(self.credited).unwrap_or(u16::MAX)
    }
}

/// Per-EV delivery credits (for the firmware's gray-loss test): counted here per acknowledged
/// PSN, handed over with the EV's next loss or NACK report, or on their own past half range.
pub(crate) struct Credits<'a> {
    pub counts: &'a mut [u16],
    /// At least every counter of `counts` (kept by [`TxSide::handle_ack`]: while an ACK
    /// cannot take it to half range, its slots are credited with no test for a crossing).
    pub bound: &'a mut u16,
    /// Credits lost to a full counter with no room to report it.
    pub saturated: &'a mut u64,
}

impl Credits<'_> {
    /// One delivery for `ev`; `true` when its counter reached [`HALF_CREDITS`] (to report).
    /// Without `CHECK`, the caller knows no counter can reach it (`bound`).
    #[inline(always)]
    fn credit<const CHECK: bool>(&mut self, ev: u16) -> bool {
        if !CHECK {
            if let Some(c) = self.counts.get_mut(usize::from(ev)) {
                // (below half range: no wrap)
                *c = c.wrapping_add(1);
            }
            return false;
        }
        match self.counts.get_mut(usize::from(ev)) {
            // (the common case: well below half range, no crossing and no saturation)
            Some(c) if *c < HALF_CREDITS - 1 => {
                *c += 1;
                false
            }
            _ => self.credit_high(ev),
        }
    }

    /// [`Self::credit`] for a counter at or near half range, or an EV out of range.
    #[cold]
    #[inline(never)]
    fn credit_high(&mut self, ev: u16) -> bool {
        match self.counts.get_mut(usize::from(ev)) {
            Some(c) if *c < u16::MAX => {
                *c += 1;
                *c == HALF_CREDITS
            }
            Some(_) => {
                *self.saturated += 1;
                false
            }
            None => false,
        }
    }

    /// Take the credits of `ev` (for its loss or NACK report).
    #[inline]
    fn take(&mut self, ev: u16) -> u16 {
        self.counts
            .get_mut(usize::from(ev))
            .map_or(0, core::mem::take)
    }
}

/// Most events one ACK may emit: a loss per hole of the SACK bitmap, an [`EvDeliveries`] per
/// credit crossing half range (at most 8 reported per ACK), the summary.
pub(crate) const ACK_EVENTS: usize = 64 + 8 + 1;

/// A counter this full is reported on its own ([`EvDeliveries`]).
const HALF_CREDITS: u16 = 1 << 15;

impl<const WIN: usize, const SQ: usize> TxSide<WIN, SQ> {
    /// The most slots one ACK credits: its cumulative range (at most the window) and its
    /// SACK bits.
    const MOST_TAKEN: usize = WIN + 64;
}

impl<const WIN: usize, const SQ: usize> TxSide<WIN, SQ> {
    /// Slot `s` is acknowledged (nothing when it already was); the caller counted it
    /// credited (`AckTally::credited`), taken back here when it was not in flight. The newest
    /// transmission is tracked here only for a slot whose transmission may be out of PSN order
    /// (one that left again, or is lost or queued to): the transmission numbers of first
    /// transmissions rise with their PSNs, and a PSN resent left after every first
    /// transmission below it, so the caller compares the highest PSN it acknowledges
    /// ([`Self::newest`]) and has the newest of them all.
    #[inline(always)]
    fn take<const CHECK: bool>(
        t: &mut AckTally,
        s: &mut TxSlot,
        credits: &mut Credits<'_>,
        crossed: &mut heapless::Vec<u16, 8>,
    ) {
        let flags = s.flags;
        let len = u64::from(s.len);
        if flags == F_INFLIGHT {
            // (the common case: in flight, sent once, on one compare)
            Self::free::<CHECK>(t, s, len, credits, crossed);
        } else if flags & F_ACKED != 0 {
            t.credited -= 1;
            return;
        } else {
            if flags & F_INFLIGHT != 0 {
                Self::free::<CHECK>(t, s, len, credits, crossed);
            } else {
                t.credited -= 1;
                t.other += len;
            }
            Self::newest(t, s);
        }
        s.flags = F_ACKED;
    }

    /// Slot `s` (in flight, `len` bytes) is freed and its EV credited.
    #[inline(always)]
    fn free<const CHECK: bool>(
        t: &mut AckTally,
        s: &TxSlot,
        len: u64,
        credits: &mut Credits<'_>,
        crossed: &mut heapless::Vec<u16, 8>,
    ) {
        t.freed += len;
        if credits.credit::<CHECK>(s.ev) {
            let _ = crossed.push(s.ev);
        }
    }

    /// The transmission of slot `s` was acknowledged: the newest so far when it is newer.
    /// (A slot acknowledged before left no later than the newest then: comparing it changes
    /// nothing.)
    #[inline(always)]
    fn newest(t: &mut AckTally, s: &TxSlot) {
        if (s.tx_seq.wrapping_sub(t.max_seq) as i32) > 0 {
            t.max_seq = s.tx_seq;
            t.max_sent = s.sent_ns;
        }
    }

    /// A coalesced ACK (`rtt_ns`: the echoed timestamp's round trip, 0 = none): losses it
    /// reveals and its summary into `events` (room for [`ACK_EVENTS`] is the caller's to
    /// check).
    #[inline(always)]
    pub(crate) fn handle_ack(
        &mut self,
        now_ns: u64,
        qpn: u32,
        a: &AckRepr,
        rtt_ns: u32,
        credits: &mut Credits<'_>,
        events: &mut Events,
    ) {
        self.counters.acks += 1;
        let mut t = AckTally {
            max_seq: self.max_acked_seq,
            max_sent: self.max_acked_sent_ns,
            freed: 0,
            other: 0,
            credited: 0,
        };
        let mut crossed = heapless::Vec::<u16, 8>::new();
        // (no counter can reach half range in this ACK: its slots are credited untested)
        let check = usize::from(*credits.bound) + Self::MOST_TAKEN >= usize::from(HALF_CREDITS);
        let start = self.una;
        let mut flags = 0;
        let cum_ok = a.cum_psn.offset_from(self.una) <= self.nxt.offset_from(self.una);
        if cum_ok {
            let n = a.cum_psn.offset_from(self.una).min(WIN as u32) as usize;
            // The PSNs the previous ACK's SACK bits acknowledged are stepped over (nothing
            // left to take there); the rest of `[una, cum)` is taken in order.
            let m = n.min(64);
            let skip = self.sacked_from_una() & low_bits(m);
            if skip == 0 {
                self.take_range_as(check, &mut t, self.una, n, credits, &mut crossed);
            } else {
                let mut todo = !skip & low_bits(m);
                t.credited += todo.count_ones();
                while todo != 0 {
                    let j = todo.trailing_zeros();
                    todo &= todo - 1;
                    if let Some(s) = self.slots.get_mut(self.una.add(j).value() as usize % WIN) {
                        Self::take::<true>(&mut t, s, credits, &mut crossed);
                    }
                }
                let rest = self.una.add(m as u32);
                self.take_range::<true>(&mut t, rest, n - m, credits, &mut crossed);
            }
            // (the highest PSN acknowledged cumulatively: see `take`)
            if let Some(last) = n.checked_sub(1) {
                Self::newest(&mut t, &self.slot(self.una.add(last as u32)));
            }
            self.una = a.cum_psn;
        } else {
            self.counters.acks_stale += 1;
            flags |= csr::ACK_STALE;
        }
        let cum_credited = t.credited_u16();
        // SACK bits, skipping those an earlier ACK already applied. (An ACK with none, as
        // most in-order ones, needs none of the masks: it leaves no bit applied.)
        let in_flight = if a.sack_bitmap == 0 {
            self.sack_done_base = a.sack_base;
            self.sack_done_bits = 0;
            0
        } else {
            let shift = a.sack_base.offset_from(self.sack_done_base);
            let seen = if shift < 64 {
                self.sack_done_bits >> shift
            } else {
                0
            };
            let in_flight = self.in_flight_mask(a.sack_base);
            // (with the base in flight, the bits below `nxt` are the bits in flight)
            let below_nxt = if self.in_flight_range(a.sack_base) {
                in_flight
            } else {
                match self.nxt.distance_from(a.sack_base) {
                    d if d >= 64 => u64::MAX,
                    d if d <= 0 => 0,
                    d => (1u64 << d) - 1,
                }
            };
            self.sack_done_base = a.sack_base;
            self.sack_done_bits = a.sack_bitmap & below_nxt;
            let mut bits = a.sack_bitmap & !seen & in_flight;
            if bits != 0 {
                // (the highest PSN acknowledged by these bits: see `take`)
                let hi = a.sack_base.add(63 - bits.leading_zeros());
                // (a run of set bits at a time: the slots of consecutive PSNs, as a range)
                while bits != 0 {
                    let i = bits.trailing_zeros();
                    // (`1..=64 - i` bits set from `i` on)
                    let run = (!(bits >> i)).trailing_zeros();
                    self.take_range_as(
                        check,
                        &mut t,
                        a.sack_base.add(i),
                        run as usize,
                        credits,
                        &mut crossed,
                    );
                    bits &= !low_bits((i + run) as usize);
                }
                Self::newest(&mut t, &self.slot(hi));
            }
            in_flight
        };
        self.max_acked_seq = t.max_seq;
        self.max_acked_sent_ns = later_ns(self.max_acked_sent_ns, t.max_sent);
        self.inflight_bytes = self.inflight_bytes.saturating_sub(t.freed);
        // The packet that triggered this ACK arrived: its send time is a delivered
        // transmission too, even when its PSN lies beyond the SACK bitmap.
        if rtt_ns > 0 {
            let echoed = (now_ns as u32).wrapping_sub(rtt_ns);
            self.max_acked_sent_ns = later_ns(self.max_acked_sent_ns, echoed);
        }
        // Losses: holes below the highest SACKed PSN, old enough.
        if a.sack_bitmap != 0 {
            let hi = 63 - a.sack_bitmap.leading_zeros();
            let mut holes = !a.sack_bitmap & ((1u64 << hi) - 1) & in_flight;
            while holes != 0 {
                let i = holes.trailing_zeros();
                holes &= holes - 1;
                let psn = a.sack_base.add(i);
                let s = self.slot(psn);
                let age = self.max_acked_seq.wrapping_sub(s.tx_seq) as i32;
                let gap_ns = self.max_acked_sent_ns.wrapping_sub(s.sent_ns) as i32;
                if s.flags & F_INFLIGHT != 0 && self.reorder.lost(age, gap_ns) {
                    self.mark_lost(psn);
                    self.counters.losses_inferred += 1;
                    let delivered = credits.take(s.ev);
                    events.push(CsrEvent::Loss(LossEntry::new(
                        qpn,
                        psn,
                        s.ev,
                        s.plane,
                        s.len,
                        delivered,
                        csr::LOSS_REORDER,
                    )));
                }
            }
        }
        // (every counter grew by at most the slots credited; exact again near half range)
        if check {
            *credits.bound = credits.counts.iter().copied().max().unwrap_or(0);
        } else {
            // (at most `MOST_TAKEN`: below half range)
            *credits.bound += t.credited as u16;
        }
        if !crossed.is_empty() {
            Self::report_crossed(qpn, &crossed, credits, events);
        }
        if self.una != start {
            flags |= csr::ACK_PROGRESS;
        }
        if self.una != self.nxt {
            flags |= csr::ACK_OUTSTANDING;
        }
        if a.ce_count > 0 {
            flags |= csr::ACK_ECN;
            // The ACK carries CE marks per plane only: its own EV gets the sample when its
            // plane saw a mark.
            if a.plane < 8 && (a.ecn_plane_mask >> a.plane) & 1 != 0 {
                flags |= csr::ACK_ECN_EV;
            }
        }
        // (only a cumulative PSN that moved passes another work request's last packet)
        let retired = if self.una != start {
            self.retire_acked()
        } else {
            0
        };
        events.push(CsrEvent::AckSummary(AckSummary::new(
            qpn,
            self.una,
            flags,
            u32::try_from(t.acked()).unwrap_or(u32::MAX),
            rtt_ns,
            t.credited_u16(),
            t.credited_u16() - cum_credited,
            a.ev_index,
            a.plane,
            retired,
        )));
        self.rto = RtoWindow::Open;
    }

    /// The credits of the EVs whose counters reached half range, reported on their own
    /// (rare: out of line).
    #[cold]
    #[inline(never)]
    fn report_crossed(qpn: u32, crossed: &[u16], credits: &mut Credits<'_>, events: &mut Events) {
        for &ev in crossed {
            let n = credits.take(ev);
            if n > 0 {
                events.push(CsrEvent::EvDeliveries(EvDeliveries::new(
                    qpn,
                    ev,
                    u32::from(n),
                )));
            }
        }
    }

    /// [`Self::take_range`] with the crossing test (`check`) or without.
    #[inline(always)]
    fn take_range_as(
        &mut self,
        check: bool,
        t: &mut AckTally,
        from: Psn,
        n: usize,
        credits: &mut Credits<'_>,
        crossed: &mut heapless::Vec<u16, 8>,
    ) {
        if check {
            self.take_range::<true>(t, from, n, credits, crossed);
        } else {
            self.take_range::<false>(t, from, n, credits, crossed);
        }
    }

    /// The slots of the `n` PSNs from `from`, taken in PSN order.
    #[inline(always)]
    fn take_range<const CHECK: bool>(
        &mut self,
        t: &mut AckTally,
        from: Psn,
        n: usize,
        credits: &mut Credits<'_>,
        crossed: &mut heapless::Vec<u16, 8>,
    ) {
        // (each slot counted credited, taken back by `take` when it was not in flight)
        t.credited = t.credited.wrapping_add(n as u32);
        if WIN.is_power_of_two() {
            // (`WIN` divides the PSN space: the slots are the ring from `from`'s slot on, as
            // one or two slices)
            let i = from.value() as usize % WIN;
            let first = n.min(WIN - i);
            let (head, tail) = self.slots.split_at_mut(i);
            // (exact sub-slices: one end test per slot)
            let tail = tail.get_mut(..first).unwrap_or_default();
            let head = head.get_mut(..n - first).unwrap_or_default();
            for s in tail {
                Self::take::<CHECK>(t, s, credits, crossed);
            }
            for s in head {
                Self::take::<CHECK>(t, s, credits, crossed);
            }
        } else {
            let mut psn = from;
            for _ in 0..n {
                if let Some(s) = self.slots.get_mut(psn.value() as usize % WIN) {
                    Self::take::<CHECK>(t, s, credits, crossed);
                }
                psn = psn.add(1);
            }
        }
    }

    /// Bit `i` set when PSN `una + i` was acknowledged by the last ACK's SACK bits (those of
    /// its bits at or above `una`; each names a slot taken then, or a PSN below `una`).
    #[inline]
    fn sacked_from_una(&self) -> u64 {
        // (most ACKs follow one with no SACK bit: nothing to place)
        if self.sack_done_bits == 0 {
            return 0;
        }
        match self.una.distance_from(self.sack_done_base) {
            0 => self.sack_done_bits,
            d @ 1..64 => self.sack_done_bits >> d,
            d @ -63..0 => self.sack_done_bits << -d,
            _ => 0,
        }
    }

    /// Work requests the cumulative PSN passed are retired (they wait for the firmware's
    /// completion order in their slots). Returns how many.
    #[inline]
    fn retire_acked(&mut self) -> u16 {
        let mut n = 0u16;
        while self.retired < self.send_idx {
            let Some(w) = self.sq.get(self.retired) else {
                break;
            };
            if self.una.offset_from(w.start_psn) < w.npkts {
                break;
            }
            if w.wr.imm.is_some() {
                self.wimm_inflight = self.wimm_inflight.saturating_sub(1);
            }
            self.retired += 1;
            n = n.saturating_add(1);
        }
        n
    }

    /// `psn` (in flight) is lost: out of flight, waiting for an order.
    fn mark_lost(&mut self, psn: Psn) {
        if let Some(s) = self.slot_mut(psn) {
            if s.flags & F_INFLIGHT != 0 {
                s.flags = F_LOST;
                let len = u64::from(s.len);
                self.inflight_bytes = self.inflight_bytes.saturating_sub(len);
            }
        }
    }

    /// A NACK from the responder: reported (room for one event is the caller's to check).
    /// With `planted_bug` (tests only) a TRIMMED_LAST_HOP NACK is taken as the packet's ACK
    /// and reported to nobody: the packet is never resent.
    pub(crate) fn handle_nack(
        &mut self,
        qpn: u32,
        n: &NackRepr,
        credits: &mut Credits<'_>,
        planted_bug: bool,
        events: &mut Events,
    ) {
        let s = self.slot(n.psn);
        let in_flight = self.in_flight_range(n.psn) && s.flags & F_INFLIGHT != 0;
        let report = |events: &mut Events, credits: &mut Credits<'_>, flags: u8| {
            let delivered = if flags & csr::NACK_IN_FLIGHT != 0 {
                credits.take(s.ev)
            } else {
                0
            };
            events.push(CsrEvent::Nack(NackEntry::new(
                qpn, n.psn, n.reason, s.ev, s.plane, s.len, delivered, flags,
            )));
        };
        if n.reason.is_fatal() || n.reason == NackReason::InvalidQp {
            self.counters.nacks_fatal += 1;
            report(events, credits, 0);
            return;
        }
        // The peer answered: the loss window after a timeout opens.
        self.rto = RtoWindow::Open;
        if !in_flight {
            self.counters.nacks_stale += 1;
            return;
        }
        match n.reason {
            NackReason::Trimmed | NackReason::TrimmedLastHop => {
                self.counters.nacks_trimmed += 1;
                if planted_bug && n.reason == NackReason::TrimmedLastHop {
                    if let Some(slot) = self.slot_mut(n.psn) {
                        slot.flags = F_ACKED;
                    }
                    self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(s.len));
                    return;
                }
                self.mark_lost(n.psn);
                report(events, credits, csr::NACK_IN_FLIGHT);
            }
            NackReason::OutOfWindow => {
                self.counters.nacks_out_of_window += 1;
                self.mark_lost(n.psn);
                report(events, credits, csr::NACK_IN_FLIGHT);
            }
            _ => {
                // TOO_MANY_WIMM: the firmware's timeout resends it once the responder has room.
                self.counters.nacks_too_many_wimm += 1;
                report(events, credits, csr::NACK_IN_FLIGHT);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_at_its_limit_counts_what_it_cannot_hold() {
        let mut counts = [HALF_CREDITS - 2, u16::MAX - 1, 0];
        let mut lost = 0;
        let mut bound = u16::MAX;
        let mut c = Credits {
            counts: &mut counts,
            bound: &mut bound,
            saturated: &mut lost,
        };
        assert!(!c.credit::<true>(0));
        assert!(c.credit::<true>(0), "half range reached: to report");
        assert!(!c.credit::<true>(1), "the last value a counter holds");
        assert!(!c.credit::<true>(1), "one more: lost, and counted");
        assert!(!c.credit::<true>(1));
        assert!(!c.credit::<true>(9), "an EV the QP does not have: ignored");
        assert_eq!(c.take(0), HALF_CREDITS);
        assert_eq!(c.take(0), 0);
        assert_eq!(c.take(1), u16::MAX);
        assert_eq!(lost, 2);
    }
}
