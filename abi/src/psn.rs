//! 24-bit packet sequence numbers with wrap-around comparison.

use core::cmp::Ordering;
use core::fmt;

/// A 24-bit packet sequence number.
///
/// PSNs wrap at 2^24. Two PSNs are compared by their signed distance modulo 2^24, so a PSN is
/// "after" another when it lies less than 2^23 ahead of it. The value is always < 2^24.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "std", derive(serde::Serialize))]
#[cfg_attr(feature = "std", serde(transparent))]
pub struct Psn(u32);

impl Psn {
    /// Number of distinct PSNs.
    pub const MODULUS: u32 = 1 << 24;
    /// Mask of the 24 PSN bits.
    pub const MASK: u32 = Self::MODULUS - 1;
    /// Half the PSN space: the largest unambiguous distance.
    pub const HALF: u32 = 1 << 23;

    /// A PSN from the low 24 bits of `value` (higher bits are dropped).
    pub const fn new(value: u32) -> Self {
        Psn(value & Self::MASK)
    }

    /// The PSN as a number in `0..2^24`.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// This PSN advanced by `n` (wrapping).
    #[allow(clippy::should_implement_trait)]
    pub const fn add(self, n: u32) -> Self {
        Psn::new(self.0.wrapping_add(n))
    }

    /// This PSN moved back by `n` (wrapping).
    pub const fn sub(self, n: u32) -> Self {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// How many PSNs `self` lies after `base`, going forward with wrap-around: `0..2^24`. The
    /// same as [`Self::distance_from`] when `self` is not before `base` (without the sign).
    #[inline]
    pub const fn offset_from(self, base: Psn) -> u32 {
        self.0.wrapping_sub(base.0) & Self::MASK
    }

    /// Signed distance from `other` to `self`: positive when `self` is after `other`.
    /// The result is in `-2^23..2^23`.
    pub const fn distance_from(self, other: Psn) -> i32 {
        let d = self.offset_from(other);
        if d >= Self::HALF {
            d as i32 - Self::MODULUS as i32
        } else {
            d as i32
        }
    }

    /// True when `self` is strictly after `other` in wrap-around order.
    pub const fn is_after(self, other: Psn) -> bool {
        self.distance_from(other) > 0
    }

    /// True when `self` lies in the half-open window `[start, start + len)`.
    pub const fn in_window(self, start: Psn, len: u32) -> bool {
        self.offset_from(start) < len
    }
}

impl PartialOrd for Psn {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.distance_from(*other).cmp(&0))
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Psn {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "{=u32}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_24_bits() {
        let top = Psn::new(Psn::MASK);
        assert_eq!(top.add(1), Psn::new(0));
        assert!(Psn::new(0).is_after(top));
        assert_eq!(Psn::new(0).distance_from(top), 1);
        assert_eq!(Psn::new(0x0100_0005).value(), 5);
    }

    proptest! {
        #[test]
        fn add_then_distance(a in 0u32..Psn::MODULUS, n in 0u32..Psn::HALF) {
            let p = Psn::new(a);
            prop_assert_eq!(p.add(n).distance_from(p), n as i32);
            prop_assert_eq!(p.add(n).sub(n), p);
            prop_assert!(p.add(n).in_window(p, n + 1));
            prop_assert!(!p.add(n).in_window(p, n));
        }

        #[test]
        fn order_is_antisymmetric(a in 0u32..Psn::MODULUS, b in 0u32..Psn::MODULUS) {
            let (x, y) = (Psn::new(a), Psn::new(b));
            if x.distance_from(y) != -(1 << 23) {
                prop_assert_eq!(x.distance_from(y), -y.distance_from(x));
            }
        }
    }
}
