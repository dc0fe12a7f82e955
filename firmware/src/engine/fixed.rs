//! Fixed-point helpers: the NIC cores have no FPU.
//!
//! Conventions: `Q16` values are `u32`/`i64` scaled by 2^16 (`1.0 == 65_536`); `Q20` log values
//! are `i64` scaled by 2^20. Every function is total: no overflow, no panic, for any input.

/// 1.0 in Q16.
pub const Q16_ONE: u32 = 1 << 16;
/// Fractional bits of the log values.
pub const LOG_FRAC_BITS: u32 = 20;
/// ln(2) in Q20 (0.693147... * 2^20, rounded).
const LN2_Q20: i64 = 726_817;

/// `n / d` for `d > 0`, by the 32-bit hardware divide when both fit in 32 bits: the NIC core
/// has no 64-bit divide, and the library routine costs tens of instructions even for small
/// values. The same value as `n / d`.
#[inline]
pub fn div_u64(n: u64, d: u64) -> u64 {
    if (n | d) >> 32 == 0 {
        u64::from(n as u32 / d as u32)
    } else {
        n / d
    }
}

/// `n.div_ceil(d)` for `d > 0`, as [`div_u64`].
#[inline]
pub fn div_ceil_u64(n: u64, d: u64) -> u64 {
    let q = div_u64(n, d);
    q + u64::from(q * d != n)
}

/// `x * q / 2^16` for a Q16 factor, saturating at `u64::MAX`.
pub const fn mul_q16(x: u64, q: u32) -> u64 {
    let p = (x as u128 * q as u128) >> 16;
    if p > u64::MAX as u128 {
        u64::MAX
    } else {
        p as u64
    }
}

/// `old + gain * (sample - old)` with a Q16 `gain` in `0..=1.0`: an exponentially weighted
/// moving average step. Never overflows; a gain above 1.0 is treated as 1.0.
pub const fn ewma_q16(old: u64, sample: u64, gain: u32) -> u64 {
    let g = if gain > Q16_ONE { Q16_ONE } else { gain } as u128;
    let v = (old as u128 * (Q16_ONE as u128 - g) + sample as u128 * g) >> 16;
    // A convex combination of two u64 values is a u64.
    v as u64
}

/// [`ewma_q16`] for a `gain` known to be at most 1.0 (a validated or clamped configuration):
/// the same value without the clamp. Callers guarantee `gain <= Q16_ONE` (debug-asserted);
/// a larger gain still neither overflows nor panics (its complement wraps, the result is
/// unspecified).
#[inline]
pub const fn ewma_q16_unit(old: u64, sample: u64, gain: u32) -> u64 {
    debug_assert!(gain <= Q16_ONE);
    if (old | sample) >> 48 == 0 {
        // Both below 2^48: the sum is below 2^48 * 2^16, in 64 bits.
        let keep = Q16_ONE.wrapping_sub(gain) as u64;
        return old
            .wrapping_mul(keep)
            .wrapping_add(sample.wrapping_mul(gain as u64))
            >> 16;
    }
    let g = gain as u128;
    let v = (old as u128 * Q16_ONE.wrapping_sub(gain) as u128 + sample as u128 * g) >> 16;
    v as u64
}

/// [`ewma_q16_unit`] towards a Q16 sample given as its integer part: `ewma_q16_unit(old,
/// sample << 16, gain)` for `sample < 2^48`, exactly. The sample's 16 zero low bits leave the
/// sum's: `(old * (1 - g) + (sample << 16) * g) >> 16 == ((old * (1 - g)) >> 16) + sample * g`,
/// and `sample * g < 2^64`; the result is the same convex combination, a u64. One 128-bit
/// product instead of two. Callers guarantee `gain <= Q16_ONE` and `sample < 2^48`
/// (debug-asserted); otherwise the result is unspecified (no panic).
#[inline]
pub const fn ewma_q16_unit_int(old: u64, sample: u64, gain: u32) -> u64 {
    debug_assert!(gain <= Q16_ONE && sample < 1 << 48);
    let keep = ((old as u128 * Q16_ONE.wrapping_sub(gain) as u128) >> 16) as u64;
    keep.wrapping_add(sample.wrapping_mul(gain as u64))
}

/// log2(x) in Q20 for `x >= 1` (0 gives 0). Error below 2^-19.
pub const fn log2_q20(x: u64) -> i64 {
    if x == 0 {
        return 0;
    }
    let int = 63 - x.leading_zeros();
    // Mantissa in Q62: [1, 2).
    let mut m: u128 = ((x as u128) << (63 - int)) >> 1;
    let mut frac: i64 = 0;
    let mut bit = 0;
    while bit < LOG_FRAC_BITS {
        m = (m * m) >> 62;
        frac <<= 1;
        if m >= (2u128 << 62) {
            m >>= 1;
            frac |= 1;
        }
        bit += 1;
    }
    ((int as i64) << LOG_FRAC_BITS) | frac
}

/// ln(num / den) in Q20; 0 when either is 0.
pub const fn ln_ratio_q20(num: u64, den: u64) -> i64 {
    if num == 0 || den == 0 {
        return 0;
    }
    let l2 = log2_q20(num) - log2_q20(den);
    ((l2 as i128 * LN2_Q20 as i128) >> LOG_FRAC_BITS) as i64
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn to_f(x: i64) -> f64 {
        x as f64 / f64::from(1u32 << LOG_FRAC_BITS)
    }

    #[test]
    fn log2_matches_float() {
        for x in [1u64, 2, 3, 10, 1_000, 999_900, 1_000_000, u64::MAX] {
            let got = to_f(log2_q20(x));
            let want = (x as f64).log2();
            assert!((got - want).abs() < 1e-5, "{x}: {got} vs {want}");
        }
    }

    #[test]
    fn ln_ratio_matches_float() {
        for (n, d) in [
            (10_000u64, 100u64),
            (990_000, 999_900),
            (1, 1_000),
            (999, 1_000),
        ] {
            let got = to_f(ln_ratio_q20(n, d));
            let want = (n as f64 / d as f64).ln();
            assert!((got - want).abs() < 1e-5, "{n}/{d}: {got} vs {want}");
        }
        assert_eq!(ln_ratio_q20(0, 5), 0);
    }

    #[test]
    fn ewma_and_mul_are_total() {
        assert_eq!(ewma_q16(100, 200, Q16_ONE / 2), 150);
        assert_eq!(ewma_q16(u64::MAX, u64::MAX, Q16_ONE), u64::MAX);
        assert_eq!(ewma_q16(0, u64::MAX, u32::MAX), u64::MAX);
        assert_eq!(mul_q16(u64::MAX, u32::MAX), u64::MAX);
        assert_eq!(mul_q16(1_000, Q16_ONE / 4), 250);
    }

    #[test]
    fn ewma_unit_int_is_ewma_of_the_shifted_sample() {
        let mut r = crate::engine::rng::Rng::new(11);
        let edge = [
            0,
            1,
            1 << 16,
            (1 << 47) + 3,
            (1 << 48) - 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for i in 0..20_000u32 {
            let old = if i.is_multiple_of(3) {
                edge[(r.next_u32() as usize) % edge.len()]
            } else {
                r.next_u64() >> (r.next_u32() % 64)
            };
            let sample = match i % 4 {
                0 => (1 << 48) - 1,
                1 => 0,
                _ => (r.next_u64() >> 16) >> (r.next_u32() % 48),
            };
            let gain = match i % 5 {
                0 => 0,
                1 => Q16_ONE,
                _ => r.next_u32() % (Q16_ONE + 1),
            };
            assert_eq!(
                ewma_q16_unit_int(old, sample, gain),
                ewma_q16(old, sample << 16, gain),
                "{old} {sample} {gain}"
            );
        }
    }

    #[test]
    fn ewma_unit_is_ewma_for_gains_up_to_one() {
        let mut r = crate::engine::rng::Rng::new(7);
        let edge = [
            0,
            1,
            1 << 16,
            (1 << 48) - 1,
            u64::MAX / 3,
            u64::MAX - 1,
            u64::MAX,
        ];
        for i in 0..20_000u32 {
            let pick = |r: &mut crate::engine::rng::Rng, k: u32| {
                if k.is_multiple_of(3) {
                    edge[(r.next_u32() as usize) % edge.len()]
                } else {
                    r.next_u64() >> (r.next_u32() % 64)
                }
            };
            let old = pick(&mut r, i);
            let sample = pick(&mut r, i / 3);
            let gain = match i % 4 {
                0 => 0,
                1 => Q16_ONE,
                _ => r.next_u32() % (Q16_ONE + 1),
            };
            assert_eq!(
                ewma_q16_unit(old, sample, gain),
                ewma_q16(old, sample, gain),
                "{old} {sample} {gain}"
            );
        }
    }

    proptest::proptest! {
        /// The 32-bit fast path gives the 64-bit division's value, on both sides of 2^32.
        #[test]
        fn div_u64_is_division(
            n in proptest::prop_oneof![0u64..1 << 32, proptest::num::u64::ANY],
            d in proptest::prop_oneof![1u64..1 << 32, 1u64..=u64::MAX],
        ) {
            proptest::prop_assert_eq!(div_u64(n, d), n / d);
            proptest::prop_assert_eq!(div_ceil_u64(n, d), n.div_ceil(d));
        }
    }
}
