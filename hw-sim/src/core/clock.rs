//! Clock domains: cycle counts to picoseconds and back, exactly.
//!
//! A domain's period is the rational `num / den` picoseconds: `from_hz(322_265_625)` has a period
//! of `10^12 / 322_265_625` ps (about 3103.03), which no integer picosecond count represents.
//! Edge `n` sits at `floor(n * num / den)` ps, computed from `n` each time, so no rounding error
//! accumulates however long the run. Domains whose period is a whole number of picoseconds (1 GHz,
//! 250 MHz, ...) take a 64-bit fast path.
//!
//! Components never tick idle cycles: they compute the edge at which their next piece of work
//! starts ([`ClockDomain::next_edge`]) and schedule one event there.

use super::time::{Duration, Time, PS_PER_S};

/// A clock domain: a fixed frequency with edge 0 at time zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockDomain {
    /// Period numerator (ps).
    num: u64,
    /// Period denominator (> 0).
    den: u64,
    /// `Some(p)` when the period is exactly `p` ps.
    period_ps: Option<u64>,
}

/// Why a clock domain could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockError {
    /// Frequency of zero Hz.
    ZeroFrequency,
    /// Frequency above 1 THz: the period would be shorter than one picosecond.
    AboveOneTerahertz(u64),
    /// Period of zero picoseconds.
    ZeroPeriod,
}

impl ClockDomain {
    /// A domain at `hz` (1 Hz to 1 THz).
    ///
    /// ```
    /// use mrc_sim::core::clock::ClockDomain;
    /// use mrc_sim::core::time::Time;
    /// let core = ClockDomain::from_hz(1_000_000_000).unwrap();
    /// assert_eq!(core.period_ps(), 1_000);
    /// assert_eq!(core.next_edge(Time::from_ps(1_001)), Time::from_ps(2_000));
    /// ```
    ///
    /// # Errors
    /// [`ClockError::ZeroFrequency`], [`ClockError::AboveOneTerahertz`].
    pub fn from_hz(hz: u64) -> Result<ClockDomain, ClockError> {
        if hz == 0 {
            return Err(ClockError::ZeroFrequency);
        }
        if hz > PS_PER_S {
            return Err(ClockError::AboveOneTerahertz(hz));
        }
        let g = gcd(PS_PER_S, hz);
        let (num, den) = (PS_PER_S / g, hz / g);
        Ok(ClockDomain {
            num,
            den,
            period_ps: (den == 1).then_some(num),
        })
    }

    /// A domain whose period is exactly `period_ps` picoseconds.
    ///
    /// # Errors
    /// [`ClockError::ZeroPeriod`].
    pub fn from_period_ps(period_ps: u64) -> Result<ClockDomain, ClockError> {
        if period_ps == 0 {
            return Err(ClockError::ZeroPeriod);
        }
        Ok(ClockDomain {
            num: period_ps,
            den: 1,
            period_ps: Some(period_ps),
        })
    }

    /// The period in picoseconds, rounded to nearest (exact when the period is whole).
    pub fn period_ps(&self) -> u64 {
        match self.period_ps {
            Some(p) => p,
            None => ((self.num as u128 + self.den as u128 / 2) / self.den as u128) as u64,
        }
    }

    /// The frequency in Hz, rounded down.
    pub fn hz(&self) -> u64 {
        (PS_PER_S as u128 * self.den as u128 / self.num as u128) as u64
    }

    /// Time of edge `n` (edge 0 is at time zero); saturates at [`Time::MAX`].
    #[inline]
    pub fn edge(&self, n: u64) -> Time {
        if let Some(p) = self.period_ps {
            return Time::from_ps(n.saturating_mul(p));
        }
        let ps = n as u128 * self.num as u128 / self.den as u128;
        Time::from_ps(u64::try_from(ps).unwrap_or(u64::MAX))
    }

    /// Length of `n` cycles, as the span from edge 0 to edge `n`; saturates.
    #[inline]
    pub fn cycles_to_time(&self, n: u64) -> Duration {
        self.edge(n).since_start()
    }

    /// Number of edges after time zero at or before `t` (edge index of the latest edge `<= t`).
    #[inline]
    pub fn time_to_cycles_floor(&self, t: Time) -> u64 {
        if let Some(p) = self.period_ps {
            return t.as_ps() / p;
        }
        // max n with floor(n * num / den) <= t  <=>  n * num < (t + 1) * den.
        let n = ((t.as_ps() as u128 + 1) * self.den as u128 - 1) / self.num as u128;
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// Index of the earliest edge at or after `t`.
    #[inline]
    pub fn time_to_cycles_ceil(&self, t: Time) -> u64 {
        if let Some(p) = self.period_ps {
            return t.as_ps().div_ceil(p);
        }
        // min n with floor(n * num / den) >= t  <=>  n * num >= t * den.
        let n = (t.as_ps() as u128 * self.den as u128).div_ceil(self.num as u128);
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// The earliest edge at or after `t` (`t` itself when `t` is on an edge).
    #[inline]
    pub fn next_edge(&self, t: Time) -> Time {
        self.edge(self.time_to_cycles_ceil(t))
    }

    /// The earliest edge strictly after `t`.
    #[inline]
    pub fn edge_after(&self, t: Time) -> Time {
        self.edge(self.time_to_cycles_floor(t).saturating_add(1))
    }

    /// When work of `cycles` cycles that becomes ready at `t` finishes: it starts at the next
    /// edge and ends `cycles` edges later.
    #[inline]
    pub fn done_at(&self, t: Time, cycles: u64) -> Time {
        self.edge(self.time_to_cycles_ceil(t).saturating_add(cycles))
    }
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integer_periods() {
        let c = ClockDomain::from_hz(250_000_000).unwrap();
        assert_eq!(c.period_ps(), 4_000);
        assert_eq!(c.hz(), 250_000_000);
        assert_eq!(c.cycles_to_time(3), Duration::from_ns(12));
        assert_eq!(c.time_to_cycles_floor(Time::from_ps(7_999)), 1);
        assert_eq!(c.time_to_cycles_ceil(Time::from_ps(7_999)), 2);
        assert_eq!(c.time_to_cycles_ceil(Time::from_ps(8_000)), 2);
        assert_eq!(c.next_edge(Time::from_ps(8_000)), Time::from_ps(8_000));
        assert_eq!(c.edge_after(Time::from_ps(8_000)), Time::from_ps(12_000));
        assert_eq!(c.done_at(Time::from_ps(1), 2), Time::from_ps(12_000));
        assert_eq!(c.edge(u64::MAX), Time::MAX);
    }

    #[test]
    fn fractional_period_does_not_drift() {
        let c = ClockDomain::from_hz(322_265_625).unwrap();
        assert_eq!(c.period_ps(), 3_103);
        assert_eq!(c.hz(), 322_265_625);
        // After exactly one second's worth of cycles we are exactly at one second.
        assert_eq!(c.edge(322_265_625), Time::from_secs(1));
        assert_eq!(c.edge(1), Time::from_ps(3_103));
        assert_eq!(c.time_to_cycles_floor(Time::from_secs(1)), 322_265_625);
        assert_eq!(c.time_to_cycles_ceil(Time::from_secs(1)), 322_265_625);
        let c3 = ClockDomain::from_hz(300_000_000).unwrap(); // 3333.33 ps
        assert_eq!(c3.edge(3), Time::from_ps(10_000));
        assert_eq!(c3.edge(2), Time::from_ps(6_666));
    }

    #[test]
    fn bad_clocks_are_errors() {
        assert_eq!(ClockDomain::from_hz(0), Err(ClockError::ZeroFrequency));
        assert_eq!(
            ClockDomain::from_hz(2_000_000_000_000),
            Err(ClockError::AboveOneTerahertz(2_000_000_000_000))
        );
        assert_eq!(ClockDomain::from_period_ps(0), Err(ClockError::ZeroPeriod));
        assert_eq!(ClockDomain::from_hz(PS_PER_S).unwrap().period_ps(), 1);
    }

    proptest! {
        #[test]
        fn edges_bracket_time(hz in 1_000u64..5_000_000_000, t in 0u64..1u64 << 50) {
            let c = ClockDomain::from_hz(hz).unwrap();
            let t = Time::from_ps(t);
            let lo = c.time_to_cycles_floor(t);
            let hi = c.time_to_cycles_ceil(t);
            prop_assert!(c.edge(lo) <= t);
            prop_assert!(c.edge(lo + 1) > t);
            prop_assert!(c.edge(hi) >= t);
            prop_assert!(hi == 0 || c.edge(hi - 1) < t);
            prop_assert!(c.next_edge(t) >= t && c.edge_after(t) > t);
            prop_assert!(c.edge_after(t) >= c.next_edge(t));
        }
    }
}
