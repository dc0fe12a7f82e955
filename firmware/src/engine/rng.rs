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

/// Thresholds in a [`LossGaps`] table: gaps up to this many packets take one draw.
const GAP_TABLE: usize = 64;

/// Independent per-packet losses at `ppm`, drawn as the *gaps* between losses instead of one
/// draw per packet: the number of packets passed before the next loss is geometric,
/// `P(gap >= k) = (1 - ppm / 10^6)^k`, sampled by inverse transform from one 64-bit draw
/// against a table of `(1 - p)^k` (`k = 1..=64`, in 0.64 fixed point, no floating point);
/// a draw beyond the table adds 64 and draws again (the distribution is memoryless). The
/// loss pattern is that of a fair coin per packet (to within the table's rounding, a few
/// parts in 2^58), at about one draw per loss instead of one per packet.
///
/// `ppm == 0` never loses and `ppm >= 10^6` loses every packet. Deterministic: the same
/// `(ppm, seed)` gives the same pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LossGaps {
    rng: Rng,
    /// `table[j] = floor((1 - p)^(j + 1) * 2^64)`, decreasing.
    table: [u64; GAP_TABLE],
    /// Packets still to pass before the next loss.
    pass: u64,
    never: bool,
}

impl LossGaps {
    /// Losses at `ppm` from a generator seeded with `seed`.
    pub fn new(ppm: u32, seed: u64) -> Self {
        // q = 1 - p in 0.64 fixed point (0 when every packet is lost).
        let q = ((u128::from(1_000_000u32.saturating_sub(ppm)) << 64) / 1_000_000)
            .min(u128::from(u64::MAX));
        let mut table = [0u64; GAP_TABLE];
        let mut t = q;
        for e in table.iter_mut() {
            // t <= q < 2^64, so t * q < 2^128.
            *e = t as u64;
            t = (t * q) >> 64;
        }
        let mut g = LossGaps {
            rng: Rng::new(seed),
            table,
            pass: 0,
            never: ppm == 0,
        };
        g.pass = g.draw_gap();
        g
    }

    /// A geometric gap: packets passed before the next loss.
    fn draw_gap(&mut self) -> u64 {
        if self.never {
            return u64::MAX;
        }
        let mut gap = 0u64;
        loop {
            let u = self.rng.next_u64();
            // gap >= k exactly when u < table[k - 1]; the table decreases.
            let k = self.table.partition_point(|&t| u < t);
            if k < GAP_TABLE {
                return gap.saturating_add(k as u64);
            }
            gap = gap.saturating_add(GAP_TABLE as u64);
        }
    }

    /// Whether the next packet is lost.
    #[inline]
    pub fn lost(&mut self) -> bool {
        if self.pass > 0 {
            // (`never` keeps `pass` at its maximum)
            self.pass -= u64::from(!self.never);
            return false;
        }
        self.pass = self.draw_gap();
        !self.never
    }

    /// For the next `n` packets: `Some(off)` when the one at `off < n` is the first lost
    /// (the packets through it are consumed), `None` when none of the `n` is lost (all
    /// consumed). The same pattern as `n` calls of [`Self::lost`].
    #[inline]
    pub fn first_lost_of(&mut self, n: usize) -> Option<usize> {
        let n64 = n as u64;
        if self.pass >= n64 {
            self.pass -= if self.never { 0 } else { n64 };
            return None;
        }
        // pass < n: the packet at `pass` is lost.
        let off = self.pass as usize;
        self.pass = self.draw_gap();
        Some(off)
    }
}

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

    /// Loss rate and gap distribution match a fair per-packet coin; the batch and
    /// one-by-one forms give the same pattern; the edges lose never or always.
    #[test]
    fn loss_gaps_are_geometric() {
        for ppm in [10_000u32, 1_000, 300_000] {
            let p = f64::from(ppm) / 1e6;
            let mut g = LossGaps::new(ppm, 5);
            let n = 2_000_000u64;
            let (mut lost, mut run, mut runs_ge_3, mut gaps) = (0u64, 0u64, 0u64, 0u64);
            for _ in 0..n {
                if g.lost() {
                    lost += 1;
                    gaps += 1;
                    runs_ge_3 += u64::from(run >= 3);
                    run = 0;
                } else {
                    run += 1;
                }
            }
            let rate = lost as f64 / n as f64;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!((rate - p).abs() < 5.0 * sd, "ppm {ppm}: rate {rate}");
            // P(gap >= 3) = (1 - p)^3.
            let share = runs_ge_3 as f64 / gaps as f64;
            let want = (1.0 - p).powi(3);
            let sd = (want * (1.0 - want) / gaps as f64).sqrt();
            assert!(
                (share - want).abs() < 5.0 * sd,
                "ppm {ppm}: {share} vs {want}"
            );
        }
        // Batches of any size see exactly the one-by-one pattern.
        let (mut a, mut b) = (LossGaps::new(20_000, 9), LossGaps::new(20_000, 9));
        let mut sizes = Rng::new(3);
        for _ in 0..20_000 {
            let n = 1 + sizes.below(40) as usize;
            let mut k = 0;
            while k < n {
                match b.first_lost_of(n - k) {
                    Some(off) => {
                        for _ in 0..off {
                            assert!(!a.lost());
                        }
                        assert!(a.lost());
                        k += off + 1;
                    }
                    None => {
                        for _ in k..n {
                            assert!(!a.lost());
                        }
                        k = n;
                    }
                }
            }
        }
        let mut never = LossGaps::new(0, 1);
        assert!((0..10_000).all(|_| !never.lost()));
        assert_eq!(never.first_lost_of(usize::MAX), None);
        let mut always = LossGaps::new(1_000_000, 1);
        assert!((0..1_000).all(|_| always.lost()));
        assert_eq!(always.first_lost_of(5), Some(0));
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
