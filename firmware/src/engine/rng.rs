//! A tiny seeded PRNG for the engine (probe jitter, tie breaking) and for tests.
//!
//! SplitMix64 turns the seed into a non-zero state, then xorshift64* produces the stream. Not
//! cryptographic; chosen because it is a handful of integer operations on a 32-bit core and is
//! fully deterministic: the same seed always yields the same sequence.

/// Seeded xorshift64* generator (state seeded through SplitMix64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

/// One SplitMix64 step: a good 64-bit mix of `x`.
pub const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator from `seed`. Every seed (0 included) gives a valid, distinct stream.
    pub const fn new(seed: u64) -> Self {
        let s = splitmix64(seed);
        // xorshift must never hold 0; splitmix64 maps exactly one input to 0.
        Rng {
            state: if s == 0 { 0x2545_F491_4F6C_DD1D } else { s },
        }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Next 32 random bits (the high half, which is the better half of xorshift64*).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A value in `0..bound` (multiply-high reduction; `bound == 0` gives 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// `true` with probability `ppm / 1_000_000` (values above one million count as certain).
    pub fn chance_ppm(&mut self, ppm: u32) -> bool {
        self.below(1_000_000) < u64::from(ppm)
    }

    /// [`Self::chance_ppm`] with its threshold precomputed by [`ppm_threshold`]: the same
    /// result and the same draw, one multiplication less.
    #[inline]
    pub fn chance_threshold(&mut self, t: PpmThreshold) -> bool {
        let x = self.next_u64();
        match t {
            PpmThreshold::Below(t) => x < t,
            PpmThreshold::Always => true,
        }
    }
}

/// A precomputed [`Rng::chance_ppm`] test (see [`ppm_threshold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PpmThreshold {
    /// `true` when the 64 random bits are below this.
    Below(u64),
    /// `ppm >= 1_000_000`: always `true`.
    Always,
}

/// The test equal to `chance_ppm(ppm)`: `below(10^6) = floor(x 10^6 / 2^64) < ppm` exactly
/// when `x < ceil(ppm 2^64 / 10^6)`.
pub fn ppm_threshold(ppm: u32) -> PpmThreshold {
    if ppm >= 1_000_000 {
        return PpmThreshold::Always;
    }
    let t = (u128::from(ppm) << 64).div_ceil(1_000_000);
    // ppm < 10^6: t < 2^64.
    PpmThreshold::Below(t as u64)
}

impl Rng {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_matches_chance_ppm() {
        for ppm in [
            0,
            1,
            7,
            100,
            9_999,
            10_000,
            123_457,
            500_000,
            999_999,
            1_000_000,
            u32::MAX,
        ] {
            let (mut a, mut b) = (Rng::new(ppm.into()), Rng::new(ppm.into()));
            let t = ppm_threshold(ppm);
            for _ in 0..20_000 {
                assert_eq!(a.chance_ppm(ppm), b.chance_threshold(t), "ppm {ppm}");
            }
        }
        // At the edges of the threshold itself.
        for ppm in [1u32, 10_000, 999_999] {
            let PpmThreshold::Below(t) = ppm_threshold(ppm) else {
                panic!()
            };
            let below = |x: u64| ((u128::from(x) * 1_000_000) >> 64) as u64;
            assert!(below(t - 1) < u64::from(ppm));
            assert!(below(t) >= u64::from(ppm));
        }
    }

    #[test]
    fn same_seed_same_stream_and_seeds_differ() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let mut differ = false;
        for _ in 0..100 {
            let x = a.next_u64();
            assert_eq!(x, b.next_u64());
            differ |= x != c.next_u64();
        }
        assert!(differ);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = Rng::new(1);
        let mut hist = [0u32; 10];
        for _ in 0..10_000 {
            let v = r.below(10);
            assert!(v < 10);
            hist[v as usize] += 1;
        }
        for h in hist {
            assert!((800..1200).contains(&h), "{hist:?}");
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn chance_ppm_matches_rate() {
        let mut r = Rng::new(3);
        let hits = (0..100_000).filter(|_| r.chance_ppm(20_000)).count();
        assert!((1_700..2_300).contains(&hits), "{hits}");
        assert!(!Rng::new(0).chance_ppm(0));
    }
}
