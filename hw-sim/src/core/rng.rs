//! Seeded, platform-independent randomness: xoshiro256** seeded through splitmix64.
//!
//! Both algorithms are fixed here bit for bit (Blackman & Vigna, public domain reference code), so
//! a seed gives the same stream on every platform and every build. Decisions use integers only:
//! [`Rng::below`] is unbiased (Lemire's multiply-and-reject) and [`Rng::chance`] takes a
//! probability in parts per million.
//!
//! Streams: [`Rng::fork`] derives a child stream from this generator's *seed* and a stream id,
//! not from its current state, so a component's stream does not change when other components are
//! added, removed or draw more numbers.

/// A deterministic pseudo-random generator (xoshiro256**).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
    seed: u64,
}

/// One step of splitmix64: advances `state` and returns the next output.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Parts per million in a probability of one.
pub const PPM_ONE: u32 = 1_000_000;

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s, seed }
    }

    /// A generator with the raw xoshiro state `s` (for reference vectors). An all-zero state is
    /// replaced by the state of `Rng::new(0)`, since xoshiro would only ever output zero.
    pub fn from_state(s: [u64; 4]) -> Rng {
        if s == [0; 4] {
            return Rng::new(0);
        }
        Rng { s, seed: s[0] }
    }

    /// The seed this stream was made from (what [`Rng::fork`] derives from).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// An independent stream for `stream_id` (e.g. a component id), a pure function of this
    /// generator's seed and `stream_id`. Forks of forks are fine: the child's seed is mixed again.
    pub fn fork(&self, stream_id: u64) -> Rng {
        let mut a = self.seed ^ 0x6a09_e667_f3bc_c908;
        let mut b = stream_id ^ 0xbb67_ae85_84ca_a73b;
        let child = splitmix64(&mut a) ^ splitmix64(&mut b).rotate_left(17);
        let mut c = child;
        Rng::new(splitmix64(&mut c))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// The next 32 random bits (the high half of [`Rng::u64`]).
    #[inline]
    pub fn u32(&mut self) -> u32 {
        (self.u64() >> 32) as u32
    }

    /// Uniform in `0..n`, unbiased; `0` when `n == 0`.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire: take the high word of x * n, rejecting the few x that would bias it.
        let mut m = self.u64() as u128 * n as u128;
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = self.u64() as u128 * n as u128;
            }
        }
        (m >> 64) as u64
    }

    /// Uniform in `lo..=hi` (`lo` when `hi < lo`).
    #[inline]
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.u64(),
        }
    }

    /// True with probability `p_ppm / 1_000_000` (`>= 1_000_000` is always true, 0 never).
    /// Always draws exactly the numbers `below(1_000_000)` draws, whatever `p_ppm` is, so the
    /// stream stays aligned when a probability is changed.
    #[inline]
    pub fn chance(&mut self, p_ppm: u32) -> bool {
        self.below(PPM_ONE as u64) < p_ppm as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference() {
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(splitmix64(&mut s), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn xoshiro_reference() {
        // Reference vector for xoshiro256** from state [1, 2, 3, 4].
        let mut r = Rng::from_state([1, 2, 3, 4]);
        let want = [
            11520u64,
            0,
            1509978240,
            1215971899390074240,
            1216172134540287360,
            607988272756665600,
            16172922978634559625,
            8476171486693032832,
            10595114339597558777,
            2904607092377533576,
        ];
        for w in want {
            assert_eq!(r.u64(), w);
        }
    }

    #[test]
    fn same_seed_same_stream_and_forks_independent() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let va: Vec<u64> = (0..100).map(|_| a.u64()).collect();
        let vb: Vec<u64> = (0..100).map(|_| b.u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(Rng::new(43).u64(), Rng::new(42).u64());

        // Forks depend on the seed, not on how much the parent drew.
        let root = Rng::new(7);
        let mut drawn = Rng::new(7);
        drawn.u64();
        assert_eq!(root.fork(3), drawn.fork(3));
        assert_ne!(root.fork(3).u64(), root.fork(4).u64());
        assert_ne!(root.fork(3).u64(), Rng::new(8).fork(3).u64());
        assert_ne!(root.fork(3).fork(1).u64(), root.fork(1).fork(3).u64());
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = Rng::new(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let v = r.below(10);
            counts[v as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.below(1), 0);
        for _ in 0..1000 {
            assert!(r.below(u64::MAX) < u64::MAX);
            let x = r.range_inclusive(5, 7);
            assert!((5..=7).contains(&x));
        }
        assert_eq!(r.range_inclusive(9, 3), 9);
    }

    #[test]
    fn chance_in_ppm() {
        let mut r = Rng::new(9);
        assert!(!(0..1000).any(|_| r.chance(0)));
        assert!((0..1000).all(|_| r.chance(PPM_ONE)));
        let hits = (0..200_000).filter(|_| r.chance(250_000)).count();
        assert!((48_000..52_000).contains(&hits), "{hits}");
        // Same number of draws whatever the probability.
        let mut x = Rng::new(5);
        let mut y = Rng::new(5);
        x.chance(0);
        y.chance(999_999);
        assert_eq!(x.u64(), y.u64());
    }
}
