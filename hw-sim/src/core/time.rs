//! Simulated time: integer picoseconds.
//!
//! [`Time`] is an instant (picoseconds since the start of the run) and [`Duration`] a span, both
//! `u64` newtypes. A `u64` of picoseconds covers about 213 days of simulated time, far beyond any
//! run. No floating point is used anywhere in time arithmetic, so results are identical on every
//! platform.
//!
//! Arithmetic contract: the operators (`+`, `-`, `*`) **saturate**: `Time::MAX` means "never"
//! and stays "never" when a delay is added to it, and a difference never goes below zero. Use
//! the `checked_*` methods where an overflow or a negative span is a bug the caller must see.

use core::fmt;
use core::ops::{Add, AddAssign, Mul, Sub, SubAssign};

/// Picoseconds per nanosecond.
pub const PS_PER_NS: u64 = 1_000;
/// Picoseconds per microsecond.
pub const PS_PER_US: u64 = 1_000_000;
/// Picoseconds per millisecond.
pub const PS_PER_MS: u64 = 1_000_000_000;
/// Picoseconds per second.
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// An instant of simulated time, in picoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

/// A span of simulated time, in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

macro_rules! unit_ctors {
    ($ty:ident) => {
        impl $ty {
            /// Zero.
            pub const ZERO: $ty = $ty(0);
            /// The largest value; for [`Time`] it means "never".
            pub const MAX: $ty = $ty(u64::MAX);

            /// From picoseconds.
            #[inline]
            pub const fn from_ps(ps: u64) -> $ty {
                $ty(ps)
            }
            /// From nanoseconds (saturates at `MAX`).
            #[inline]
            pub const fn from_ns(ns: u64) -> $ty {
                $ty(ns.saturating_mul(PS_PER_NS))
            }
            /// From microseconds (saturates at `MAX`).
            #[inline]
            pub const fn from_us(us: u64) -> $ty {
                $ty(us.saturating_mul(PS_PER_US))
            }
            /// From milliseconds (saturates at `MAX`).
            #[inline]
            pub const fn from_ms(ms: u64) -> $ty {
                $ty(ms.saturating_mul(PS_PER_MS))
            }
            /// From seconds (saturates at `MAX`).
            #[inline]
            pub const fn from_secs(s: u64) -> $ty {
                $ty(s.saturating_mul(PS_PER_S))
            }
            /// In picoseconds (exact).
            #[inline]
            pub const fn as_ps(self) -> u64 {
                self.0
            }
            /// In whole nanoseconds (rounded down).
            #[inline]
            pub const fn as_ns(self) -> u64 {
                self.0 / PS_PER_NS
            }
            /// In whole microseconds (rounded down).
            #[inline]
            pub const fn as_us(self) -> u64 {
                self.0 / PS_PER_US
            }
            /// In whole milliseconds (rounded down).
            #[inline]
            pub const fn as_ms(self) -> u64 {
                self.0 / PS_PER_MS
            }
            /// In seconds, as a float: for reports only, never for decisions.
            #[inline]
            pub fn as_secs_f64(self) -> f64 {
                self.0 as f64 / PS_PER_S as f64
            }
        }

        impl fmt::Display for $ty {
            /// Human units, exact: `250 ps`, `1.5 us`, `3 ms`, `2.000000000001 s`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt_ps(self.0, f)
            }
        }
    };
}

unit_ctors!(Time);
unit_ctors!(Duration);

/// Writes `ps` in the largest unit in which it is at least 1, with an exact decimal fraction
/// (trailing zeros trimmed).
fn fmt_ps(ps: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    const UNITS: [(u64, &str, usize); 4] = [
        (PS_PER_S, "s", 12),
        (PS_PER_MS, "ms", 9),
        (PS_PER_US, "us", 6),
        (PS_PER_NS, "ns", 3),
    ];
    for (scale, name, digits) in UNITS {
        if ps >= scale {
            let whole = ps / scale;
            let frac = ps % scale;
            if frac == 0 {
                return write!(f, "{whole} {name}");
            }
            let mut frac_digits = digits;
            let mut frac = frac;
            while frac.is_multiple_of(10) {
                frac /= 10;
                frac_digits -= 1;
            }
            return write!(f, "{whole}.{frac:0frac_digits$} {name}");
        }
    }
    write!(f, "{ps} ps")
}

/// The earlier of two optional times or deadlines (`None` when both are).
#[inline]
pub(crate) fn earliest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Time {
    /// `self + d`, or `None` on overflow.
    #[inline]
    pub const fn checked_add(self, d: Duration) -> Option<Time> {
        match self.0.checked_add(d.0) {
            Some(v) => Some(Time(v)),
            None => None,
        }
    }
    /// `self + d`, saturating at [`Time::MAX`] ("never").
    #[inline]
    pub const fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }
    /// `self - d`, or `None` if that would be before time zero.
    #[inline]
    pub const fn checked_sub(self, d: Duration) -> Option<Time> {
        match self.0.checked_sub(d.0) {
            Some(v) => Some(Time(v)),
            None => None,
        }
    }
    /// `self - d`, saturating at time zero.
    #[inline]
    pub const fn saturating_sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(d.0))
    }
    /// The span from `earlier` to `self`, or `None` if `earlier` is later than `self`.
    #[inline]
    pub const fn checked_duration_since(self, earlier: Time) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// The span from `earlier` to `self`, zero if `earlier` is later than `self`.
    #[inline]
    pub const fn duration_since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// This instant as a span since time zero.
    #[inline]
    pub const fn since_start(self) -> Duration {
        Duration(self.0)
    }
}

impl Duration {
    /// `self + o`, or `None` on overflow.
    #[inline]
    pub const fn checked_add(self, o: Duration) -> Option<Duration> {
        match self.0.checked_add(o.0) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// `self + o`, saturating at [`Duration::MAX`].
    #[inline]
    pub const fn saturating_add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
    /// `self - o`, or `None` if `o > self`.
    #[inline]
    pub const fn checked_sub(self, o: Duration) -> Option<Duration> {
        match self.0.checked_sub(o.0) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// `self - o`, saturating at zero.
    #[inline]
    pub const fn saturating_sub(self, o: Duration) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
    /// `self * n`, or `None` on overflow.
    #[inline]
    pub const fn checked_mul(self, n: u64) -> Option<Duration> {
        match self.0.checked_mul(n) {
            Some(v) => Some(Duration(v)),
            None => None,
        }
    }
    /// `self * n`, saturating at [`Duration::MAX`].
    #[inline]
    pub const fn saturating_mul(self, n: u64) -> Duration {
        Duration(self.0.saturating_mul(n))
    }
    /// True for a zero-length span.
    #[inline]
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    /// Saturating: `Time::MAX + d == Time::MAX`.
    #[inline]
    fn add(self, d: Duration) -> Time {
        self.saturating_add(d)
    }
}
impl AddAssign<Duration> for Time {
    #[inline]
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}
impl Sub<Duration> for Time {
    type Output = Time;
    /// Saturating at time zero.
    #[inline]
    fn sub(self, d: Duration) -> Time {
        self.saturating_sub(d)
    }
}
impl SubAssign<Duration> for Time {
    #[inline]
    fn sub_assign(&mut self, d: Duration) {
        *self = self.saturating_sub(d);
    }
}
impl Add for Duration {
    type Output = Duration;
    /// Saturating at [`Duration::MAX`].
    #[inline]
    fn add(self, o: Duration) -> Duration {
        self.saturating_add(o)
    }
}
impl AddAssign for Duration {
    #[inline]
    fn add_assign(&mut self, o: Duration) {
        *self = self.saturating_add(o);
    }
}
impl Sub for Duration {
    type Output = Duration;
    /// Saturating at zero.
    #[inline]
    fn sub(self, o: Duration) -> Duration {
        self.saturating_sub(o)
    }
}
impl Mul<u64> for Duration {
    type Output = Duration;
    /// Saturating at [`Duration::MAX`].
    #[inline]
    fn mul(self, n: u64) -> Duration {
        self.saturating_mul(n)
    }
}

/// Time to serialize `bytes` onto a link of `bits_per_second`, rounded **up** to a whole
/// picosecond (a frame is not finished until its last bit is out).
///
/// Exact integer arithmetic (128-bit intermediate). A rate of zero, or a result that does not fit
/// in `u64` picoseconds, gives [`Duration::MAX`] ("never").
///
/// ```
/// use mrc_sim::core::time::{serialization_time, Duration};
/// // 4096 B at 100 Gb/s = 327.68 ns.
/// assert_eq!(serialization_time(4096, 100_000_000_000), Duration::from_ps(327_680));
/// // 1 B at 3 b/s = 8/3 s, rounded up.
/// assert_eq!(serialization_time(1, 3).as_ps(), 2_666_666_666_667);
/// ```
pub const fn serialization_time(bytes: u64, bits_per_second: u64) -> Duration {
    if bits_per_second == 0 {
        return Duration::MAX;
    }
    let num = bytes as u128 * 8 * PS_PER_S as u128;
    let den = bits_per_second as u128;
    let ps = num.div_ceil(den);
    if ps > u64::MAX as u128 {
        Duration::MAX
    } else {
        Duration(ps as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_conversions() {
        assert_eq!(Time::from_ns(3).as_ps(), 3_000);
        assert_eq!(Time::from_us(2).as_ns(), 2_000);
        assert_eq!(Duration::from_ms(5).as_us(), 5_000);
        assert_eq!(Duration::from_secs(1).as_ms(), 1_000);
        assert_eq!(Duration::from_ps(1_999).as_ns(), 1);
        assert_eq!(Time::from_secs(u64::MAX), Time::MAX);
        assert!(Time::from_ns(1) < Time::from_ns(2));
        assert_eq!(Duration::from_us(1_500).as_secs_f64(), 0.0015);
    }

    #[test]
    fn arithmetic_saturates_and_checks() {
        let t = Time::from_us(1);
        assert_eq!(t + Duration::from_ns(5), Time::from_ps(1_005_000));
        assert_eq!(Time::MAX + Duration::from_ns(1), Time::MAX);
        assert_eq!(Time::MAX.checked_add(Duration::from_ps(1)), None);
        assert_eq!(Time::ZERO - Duration::from_ns(1), Time::ZERO);
        assert_eq!(Time::ZERO.checked_sub(Duration::from_ps(1)), None);
        assert_eq!(
            Time::from_ns(10).duration_since(Time::from_ns(4)),
            Duration::from_ns(6)
        );
        assert_eq!(
            Time::from_ns(4).duration_since(Time::from_ns(10)),
            Duration::ZERO
        );
        assert_eq!(
            Time::from_ns(4).checked_duration_since(Time::from_ns(10)),
            None
        );
        assert_eq!(Duration::from_ns(3) * 4, Duration::from_ns(12));
        assert_eq!(Duration::MAX * 2, Duration::MAX);
        assert_eq!(Duration::MAX.checked_mul(2), None);
        assert_eq!(Duration::from_ns(3) - Duration::from_ns(4), Duration::ZERO);
        let mut x = Time::ZERO;
        x += Duration::from_ns(2);
        x -= Duration::from_ns(1);
        assert_eq!(x, Time::from_ns(1));
    }

    #[test]
    fn display_human_units() {
        assert_eq!(Time::ZERO.to_string(), "0 ps");
        assert_eq!(Duration::from_ps(250).to_string(), "250 ps");
        assert_eq!(Duration::from_ps(1_000).to_string(), "1 ns");
        assert_eq!(Duration::from_ps(1_500_000).to_string(), "1.5 us");
        assert_eq!(Duration::from_ps(1_050).to_string(), "1.05 ns");
        assert_eq!(Time::from_ms(3).to_string(), "3 ms");
        assert_eq!(
            Time::from_ps(2 * PS_PER_S + 1).to_string(),
            "2.000000000001 s"
        );
        assert_eq!(Duration::from_ps(327_680).to_string(), "327.68 ns");
    }

    #[test]
    fn serialization_rounds_up_exactly() {
        assert_eq!(
            serialization_time(4096, 100_000_000_000),
            Duration::from_ps(327_680)
        );
        // 64 B at 400 Gb/s = 1.28 ns exactly.
        assert_eq!(serialization_time(64, 400_000_000_000).as_ps(), 1_280);
        // 1 B at 3 Gb/s = 2666.67 ps -> 2667.
        assert_eq!(serialization_time(1, 3_000_000_000).as_ps(), 2_667);
        assert_eq!(serialization_time(0, 100), Duration::ZERO);
        assert_eq!(serialization_time(1, 0), Duration::MAX);
        assert_eq!(serialization_time(u64::MAX, 1), Duration::MAX);
    }
}
