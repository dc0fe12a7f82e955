//! Receive PSN tracker: which PSNs of a QP have arrived, and the cumulative PSN.
//!
//! # Hardware block
//!
//! - **State** (per QP): the cumulative PSN `cum` (every PSN before it has been received; `cum`
//!   itself has not), a ring of `W = 64 * WORDS` bits for PSNs `cum .. cum + W` with the bit of
//!   `cum` at ring position `head`, and `next_max`, one past the highest PSN received so far
//!   (`== cum` when there is no hole).
//! - **Input**: one received data PSN per call ([`RxBitmap::receive`]).
//! - **Output**: [`RxOutcome`]: `New` (bit was clear, now set), `Duplicate` (already received,
//!   including any PSN before `cum` in 24-bit wrap order), `OutOfWindow` (at or beyond
//!   `cum + W`). When the PSN at `cum` arrives, `cum` advances over every consecutive received
//!   PSN, clearing their bits (hardware: find-first-zero over the ring; here a loop bounded by
//!   `W`).
//! - **Capacity**: `1 <= WORDS` and `W <= 2^22` (a quarter of the PSN space, so "before `cum`"
//!   and "beyond the window" never overlap); checked at compile time. A typical window is
//!   `MPR * 128` PSNs.
//!
//! PSN comparisons use 24-bit wrap-around arithmetic ([`Psn`]): a PSN up to `2^23 - 1` behind
//! `cum` counts as before it.

use mrc_abi::Psn;

/// What the tracker made of one received PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RxOutcome {
    /// First arrival of a PSN inside the window: place the payload.
    New,
    /// Already received (bit set, or before the cumulative PSN): drop the payload, re-ACK.
    Duplicate,
    /// At or beyond `cum + W`: drop, NACK `OUT_OF_WINDOW`.
    OutOfWindow,
}

/// A selective acknowledgement: the contents of an ACK's ACKX PSN fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sack {
    /// Every PSN before it has been received.
    pub cum_psn: Psn,
    /// The PSN of bit 0 of `bitmap`.
    pub sack_base: Psn,
    /// Bit `i` (LSB = 0) set = PSN `sack_base + i` received.
    pub bitmap: u64,
}

/// Receive tracker counters (free-running, wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxCounters {
    /// PSNs received for the first time.
    pub new: u64,
    /// PSNs received again.
    pub duplicates: u64,
    /// PSNs beyond the window, dropped.
    pub out_of_window: u64,
}

/// The receive PSN tracker of one QP with a window of `64 * WORDS` PSNs. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxBitmap<const WORDS: usize> {
    cum: Psn,
    next_max: Psn,
    /// Ring position of `cum`, `< W`.
    head: usize,
    words: [u64; WORDS],
    counters: RxCounters,
}

impl<const WORDS: usize> RxBitmap<WORDS> {
    /// Window size in PSNs.
    pub const WINDOW: u32 = (WORDS as u32).wrapping_mul(64);
    const WINDOW_BITS: usize = WORDS * 64;
    const CAPACITY_OK: () = assert!(
        WORDS >= 1 && WORDS <= (1 << 16),
        "RxBitmap needs 1 <= WORDS <= 2^16 (window <= 2^22 PSNs)"
    );

    /// A tracker expecting `start` next (everything before it counts as received).
    pub const fn new(start: Psn) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        RxBitmap {
            cum: start,
            next_max: start,
            head: 0,
            words: [0; WORDS],
            counters: RxCounters {
                new: 0,
                duplicates: 0,
                out_of_window: 0,
            },
        }
    }

    /// Forget everything and expect `start` next (QP setup); counters are kept.
    pub fn reset(&mut self, start: Psn) {
        self.cum = start;
        self.next_max = start;
        self.head = 0;
        self.words = [0; WORDS];
    }

    /// The cumulative PSN: every PSN before it has been received, it has not.
    pub fn cum_psn(&self) -> Psn {
        self.cum
    }

    /// One past the highest PSN received (in wrap order); equals [`Self::cum_psn`] when no PSN
    /// beyond the cumulative one has arrived.
    pub fn next_max_psn(&self) -> Psn {
        self.next_max
    }

    /// The counters.
    pub fn counters(&self) -> RxCounters {
        self.counters
    }

    /// Per-packet update: record the arrival of `psn`.
    #[inline]
    pub fn receive(&mut self, psn: Psn) -> RxOutcome {
        let outcome = self.classify_and_set(psn);
        let c = &mut self.counters;
        match outcome {
            RxOutcome::New => c.new = c.new.wrapping_add(1),
            RxOutcome::Duplicate => c.duplicates = c.duplicates.wrapping_add(1),
            RxOutcome::OutOfWindow => c.out_of_window = c.out_of_window.wrapping_add(1),
        }
        outcome
    }

    #[inline]
    fn classify_and_set(&mut self, psn: Psn) -> RxOutcome {
        let Some(offset) = self.window_offset(psn) else {
            return if psn.distance_from(self.cum) < 0 {
                RxOutcome::Duplicate
            } else {
                RxOutcome::OutOfWindow
            };
        };
        if self.bit(self.ring_pos(offset)) {
            return RxOutcome::Duplicate;
        }
        self.set_new(psn, offset);
        RxOutcome::New
    }

    /// Whether the PSN `offset` after `cum` (`offset < WINDOW`) has been received: what
    /// [`Self::is_received`] says for it, without locating it again.
    #[inline]
    pub fn is_received_at(&self, offset: u32) -> bool {
        self.bit(self.ring_pos(offset))
    }

    /// [`Self::receive`] of `psn`, which the caller found `offset < WINDOW` after `cum` and
    /// not received ([`Self::is_received_at`]): marks it, counts it new.
    #[inline]
    pub fn receive_new_at(&mut self, psn: Psn, offset: u32) {
        debug_assert!(offset < Self::WINDOW && psn.distance_from(self.cum) == offset as i32);
        self.set_new(psn, offset);
        self.counters.new = self.counters.new.wrapping_add(1);
    }

    /// [`Self::receive`] of a PSN the caller found received already ([`Self::is_received`]):
    /// counts the duplicate (nothing else changes).
    #[inline]
    pub fn note_duplicate(&mut self) {
        self.counters.duplicates = self.counters.duplicates.wrapping_add(1);
    }

    /// Whether [`Self::receive_new_run`] takes the `n` consecutive PSNs `offset ..` after
    /// `cum` (`offset + n <= WINDOW`): all new, and either in order with nothing received
    /// beyond `cum` (then `cum` steps over them) or beyond `cum` (then only their bits are
    /// set). Word-wise (hardware: a masked compare of at most `n / 64 + 2` words).
    #[inline]
    pub fn run_is_new(&self, offset: u32, n: u32) -> bool {
        if offset == 0 {
            return self.next_max == self.cum;
        }
        if self.cum.add(offset).distance_from(self.next_max) >= 0 {
            // From `next_max` on nothing has been received (e.g. a run continuing the
            // highest PSN beyond a hole): no bit to look at.
            return true;
        }
        let mut pos = self.ring_pos(offset);
        let mut left = n as usize;
        while left > 0 {
            let (word, shift) = (pos / 64, pos % 64);
            let take = left.min(64 - shift);
            if self
                .words
                .get(word)
                .is_some_and(|w| w & run_mask(shift, take) != 0)
            {
                return false;
            }
            left -= take;
            pos = (pos + take) % Self::WINDOW_BITS;
        }
        true
    }

    /// [`Self::receive_new_at`] for the `n` consecutive PSNs from `psn`, `offset` after `cum`,
    /// which [`Self::run_is_new`] accepted: the same state and counters as one call per PSN,
    /// a word at a time. Always inlined: it is the receive run's loop.
    #[inline(always)]
    pub fn receive_new_run(&mut self, psn: Psn, offset: u32, n: u32) {
        debug_assert!(self.run_is_new(offset, n) && psn.distance_from(self.cum) == offset as i32);
        if offset == 0 {
            // Every bit is clear (nothing received at or beyond `cum`): `cum` steps over the
            // run and no hole is left.
            self.cum = self.cum.add(n);
            self.head = (self.head + n as usize) % Self::WINDOW_BITS;
            self.next_max = self.cum;
        } else {
            let mut pos = self.ring_pos(offset);
            let mut left = n as usize;
            // (a run inside one word, the common case: one mask; an empty run sets nothing)
            if left != 0 && pos % 64 + left <= 64 {
                if let Some(w) = self.words.get_mut(pos / 64) {
                    *w |= run_mask(pos % 64, left);
                }
                left = 0;
            }
            while left > 0 {
                let (word, shift) = (pos / 64, pos % 64);
                let take = left.min(64 - shift);
                if let Some(w) = self.words.get_mut(word) {
                    *w |= run_mask(shift, take);
                }
                left -= take;
                pos = (pos + take) % Self::WINDOW_BITS;
            }
            if offset + n > self.beyond_cum() {
                self.next_max = psn.add(n);
            }
        }
        self.counters.new = self.counters.new.wrapping_add(u64::from(n));
    }

    /// How far `next_max` lies beyond `cum` (`0 ..= W`): a PSN `offset < W` after `cum` is at
    /// or beyond `next_max` exactly when `offset >= beyond_cum()` (`distance_from` without
    /// the sign extension: both lie in the window).
    #[inline]
    fn beyond_cum(&self) -> u32 {
        self.next_max.offset_from(self.cum)
    }

    #[inline]
    fn set_new(&mut self, psn: Psn, offset: u32) {
        let pos = self.ring_pos(offset);
        if psn.distance_from(self.next_max) >= 0 {
            self.next_max = psn.add(1);
        }
        if offset == 0 {
            // The head PSN (in-order arrival): step `cum` over it without setting its bit,
            // then over the received run behind it, if any.
            self.head = (self.head + 1) % Self::WINDOW_BITS;
            self.cum = self.cum.add(1);
            if self.bit(self.head) {
                self.advance();
            } else if self.next_max.distance_from(self.cum) < 0 {
                self.next_max = self.cum;
            }
        } else {
            self.set_bit(pos, true);
        }
    }

    /// True when `psn` has been received (before `cum`, or its bit is set).
    pub fn is_received(&self, psn: Psn) -> bool {
        match self.window_offset(psn) {
            Some(offset) => self.bit(self.ring_pos(offset)),
            None => psn.distance_from(self.cum) < 0,
        }
    }

    /// The SACK for the 64 PSNs from `base`: bit `i` = PSN `base + i` received. PSNs before
    /// `cum` read as received, PSNs beyond the window as not received.
    pub fn sack(&self, base: Psn) -> Sack {
        let bitmap = match self.window_offset(base) {
            // Fast path (hardware: a 64-bit funnel shift of the ring): `base` inside the window.
            Some(offset) => self.ring_bits(offset),
            None => {
                let mut bitmap = 0u64;
                for i in 0..64u32 {
                    if self.is_received(base.add(i)) {
                        bitmap |= 1 << i;
                    }
                }
                bitmap
            }
        };
        Sack {
            cum_psn: self.cum,
            sack_base: base,
            bitmap,
        }
    }

    /// [`Self::sack`] from the cumulative PSN (the SACK every ACK carries): the 64 ring bits
    /// from `head`, without locating the base.
    #[inline]
    pub fn sack_at_cum(&self) -> Sack {
        Sack {
            cum_psn: self.cum,
            sack_base: self.cum,
            bitmap: self.ring_bits(0),
        }
    }

    /// The 64 tracker bits for PSNs `cum + offset ..`, zero beyond the window (`offset < W`).
    fn ring_bits(&self, offset: u32) -> u64 {
        let pos = self.ring_pos(offset);
        let (word, shift) = (pos / 64, pos % 64);
        let lo = self.words.get(word).copied().unwrap_or(0) >> shift;
        // The next word's low bits above them: `<< (64 - shift)`, none when `shift == 0` (two
        // shifts, each below 64).
        let next = self.words.get((word + 1) % WORDS).copied().unwrap_or(0);
        let hi = (next << (63 - shift)) << 1;
        let in_window = Self::WINDOW - offset;
        let mask = if in_window >= 64 {
            u64::MAX
        } else {
            (1u64 << in_window) - 1
        };
        (lo | hi) & mask
    }

    /// Offset of `psn` from `cum` when it lies in the window.
    #[inline]
    fn window_offset(&self, psn: Psn) -> Option<u32> {
        let d = psn.distance_from(self.cum);
        u32::try_from(d).ok().filter(|&d| d < Self::WINDOW)
    }

    #[inline]
    fn ring_pos(&self, offset: u32) -> usize {
        // offset < W and head < W, so the sum cannot overflow usize.
        (self.head + offset as usize) % Self::WINDOW_BITS
    }

    #[inline]
    fn bit(&self, pos: usize) -> bool {
        self.words
            .get(pos / 64)
            .is_some_and(|w| (w >> (pos % 64)) & 1 == 1)
    }

    #[inline]
    fn set_bit(&mut self, pos: usize, value: bool) {
        if let Some(w) = self.words.get_mut(pos / 64) {
            let mask = 1u64 << (pos % 64);
            if value {
                *w |= mask;
            } else {
                *w &= !mask;
            }
        }
    }

    /// Move `cum` over consecutive received PSNs, clearing their bits, a word at a time.
    fn advance(&mut self) {
        // Each step consumes the run of set bits from `head` to the end of its word or stops;
        // one that goes on has cleared its word from `head` to the end and moves to the next
        // word's start, so the steps end within WORDS + 1 (the last one at the latest back in
        // the first word, clear from the first `head` on).
        let (mut head, mut stepped) = (self.head, 0u32);
        loop {
            let (word, shift) = (head / 64, (head % 64) as u32);
            let Some(w) = self.words.get_mut(word) else {
                break;
            };
            // (the word shifted down has `shift` zeros on top: at most `64 - shift` ones)
            let run = (!(*w >> shift)).trailing_zeros();
            if run == 0 {
                break;
            }
            *w &= !run_mask(shift as usize, run as usize);
            head = (head + run as usize) % Self::WINDOW_BITS;
            stepped += run;
            if shift + run < 64 {
                break;
            }
        }
        self.head = head;
        self.cum = self.cum.add(stepped);
        if self.next_max.distance_from(self.cum) < 0 {
            self.next_max = self.cum;
        }
    }
}

/// `take` bits from bit `shift` on (`shift + take <= 64`, `take >= 1`).
#[inline]
fn run_mask(shift: usize, take: usize) -> u64 {
    debug_assert!(take >= 1 && shift + take <= 64);
    // (`take` ones: a shift by `64 - take` in `0..64`, no case for a whole word)
    (u64::MAX >> (64 - take)) << shift
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    extern crate std;

    type Rx = RxBitmap<4>; // 256 PSNs

    #[test]
    fn in_order_advances() {
        let mut rx = Rx::new(Psn::new(10));
        assert_eq!(rx.receive(Psn::new(10)), RxOutcome::New);
        assert_eq!(rx.receive(Psn::new(11)), RxOutcome::New);
        assert_eq!(rx.cum_psn(), Psn::new(12));
        assert_eq!(rx.next_max_psn(), Psn::new(12));
        assert_eq!(rx.receive(Psn::new(11)), RxOutcome::Duplicate);
        assert_eq!(rx.receive(Psn::new(9)), RxOutcome::Duplicate);
    }

    #[test]
    fn hole_then_fill() {
        let mut rx = Rx::new(Psn::new(0));
        assert_eq!(rx.receive(Psn::new(2)), RxOutcome::New);
        assert_eq!(rx.receive(Psn::new(3)), RxOutcome::New);
        assert_eq!(rx.cum_psn(), Psn::new(0));
        assert_eq!(rx.next_max_psn(), Psn::new(4));
        let s = rx.sack(Psn::new(0));
        assert_eq!(s.bitmap, 0b1100);
        assert_eq!(rx.receive(Psn::new(3)), RxOutcome::Duplicate);
        assert_eq!(rx.receive(Psn::new(0)), RxOutcome::New);
        assert_eq!(rx.cum_psn(), Psn::new(1));
        assert_eq!(rx.receive(Psn::new(1)), RxOutcome::New);
        assert_eq!(rx.cum_psn(), Psn::new(4));
        assert_eq!(
            rx.counters(),
            RxCounters {
                new: 4,
                duplicates: 1,
                out_of_window: 0
            }
        );
    }

    #[test]
    fn window_edge() {
        let mut rx = Rx::new(Psn::new(100));
        assert_eq!(rx.receive(Psn::new(100 + 255)), RxOutcome::New);
        assert_eq!(rx.receive(Psn::new(100 + 256)), RxOutcome::OutOfWindow);
        assert_eq!(rx.counters().out_of_window, 1);
    }

    #[test]
    fn wraps_at_2_pow_24() {
        let top = Psn::MASK;
        let mut rx = Rx::new(Psn::new(top - 1));
        assert_eq!(rx.receive(Psn::new(1)), RxOutcome::New);
        assert_eq!(rx.receive(Psn::new(top - 1)), RxOutcome::New);
        assert_eq!(rx.receive(Psn::new(top)), RxOutcome::New);
        assert_eq!(rx.cum_psn(), Psn::new(0));
        assert_eq!(rx.receive(Psn::new(0)), RxOutcome::New);
        assert_eq!(rx.cum_psn(), Psn::new(2));
        assert_eq!(rx.receive(Psn::new(top)), RxOutcome::Duplicate);
        let s = rx.sack(Psn::new(top - 2));
        // top-2, top-1, top, 0, 1 received (before cum), 2 onwards not.
        assert_eq!(s.bitmap, 0b1_1111);
    }

    #[test]
    fn sack_beyond_window_is_zero() {
        let rx = Rx::new(Psn::new(0));
        assert_eq!(rx.sack(Psn::new(1000)).bitmap, 0);
        assert_eq!(rx.sack(Psn::new(0).sub(64)).bitmap, u64::MAX);
    }

    #[test]
    fn full_window_then_head_fills() {
        let mut rx = Rx::new(Psn::new(5));
        for i in 1..256 {
            assert_eq!(rx.receive(Psn::new(5 + i)), RxOutcome::New);
        }
        assert_eq!(rx.receive(Psn::new(5)), RxOutcome::New);
        assert_eq!(rx.cum_psn(), Psn::new(5 + 256));
        assert_eq!(rx.receive(Psn::new(5 + 256 + 255)), RxOutcome::New);
    }

    /// Reference model: absolute (unwrapped) PSNs in a set.
    struct Model {
        start: u64,
        cum: u64,
        got: BTreeSet<u64>,
    }

    impl Model {
        #[inline]
        fn received(&self, abs: u64) -> bool {
            abs < self.cum || self.got.contains(&abs)
        }
        #[inline]
        fn receive(&mut self, abs: u64, window: u64) -> RxOutcome {
            if self.received(abs) {
                return RxOutcome::Duplicate;
            }
            if abs >= self.cum + window {
                return RxOutcome::OutOfWindow;
            }
            self.got.insert(abs);
            while self.got.remove(&self.cum) {
                self.cum += 1;
            }
            RxOutcome::New
        }
    }

    fn psn(abs: u64) -> Psn {
        Psn::new(abs as u32)
    }

    proptest! {
        #[test]
        fn matches_set_model(
            start in prop_oneof![0u64..1000, (1u64 << 24) - 600..(1u64 << 24)],
            ops in proptest::collection::vec((-40i64..300, -80i64..300), 1..250),
        ) {
            // Absolute PSNs start one modulus up so offsets behind stay positive.
            let start = start + (1 << 24);
            let mut model = Model { start, cum: start, got: BTreeSet::new() };
            let mut rx = Rx::new(psn(start));
            for (k, b) in ops {
                let abs = (model.cum as i64 + k) as u64;
                prop_assert_eq!(rx.receive(psn(abs)), model.receive(abs, 256));
                prop_assert_eq!(rx.cum_psn(), psn(model.cum));
                let max_next = model.got.iter().next_back().map_or(model.cum, |m| m + 1);
                prop_assert_eq!(rx.next_max_psn(), psn(max_next.max(model.cum)));
                let base = (model.cum as i64 + b) as u64;
                let sack = rx.sack(psn(base));
                let mut want = 0u64;
                for i in 0..64 {
                    if model.received(base + i) {
                        want |= 1 << i;
                    }
                }
                prop_assert_eq!(sack, Sack { cum_psn: psn(model.cum), sack_base: psn(base), bitmap: want });
                prop_assert_eq!(rx.sack_at_cum(), rx.sack(rx.cum_psn()));
            }
            prop_assert!(model.cum >= model.start);
        }

        /// A run taken word-wise leaves the tracker (bits, `cum`, `next_max`, counters)
        /// exactly as receiving its PSNs one by one does; a run it refuses with no hole at
        /// its start holds a PSN already received.
        #[test]
        fn run_matches_one_by_one(
            start in prop_oneof![0u64..1000, (1u64 << 24) - 600..(1u64 << 24)],
            ops in proptest::collection::vec((0u32..256, 1u32..140, any::<bool>()), 1..200),
        ) {
            let mut rx = Rx::new(psn(start));
            for (offset, n, single) in ops {
                let n = n.min(Rx::WINDOW - offset);
                let first = rx.cum_psn().add(offset);
                if single {
                    let _ = rx.receive(first);
                    continue;
                }
                let mut one = rx.clone();
                let all_new = (0..n).all(|i| one.receive(first.add(i)) == RxOutcome::New);
                if rx.run_is_new(offset, n) {
                    prop_assert!(all_new);
                    rx.receive_new_run(first, offset, n);
                    prop_assert_eq!(&rx, &one);
                } else {
                    prop_assert!(!all_new || (offset == 0 && rx.next_max_psn() != rx.cum_psn()));
                }
            }
        }
    }
}
