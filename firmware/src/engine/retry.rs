//! ACK timeout and retry policy of a requester QP.
//!
//! The QP attribute `timeout` is an exponent `t` with `t <= 24`: the ACK timeout is
//! `1.024 us * 2^t` (so 1 024 ns to 17 179 869 184 ns, about 17.2 s). The attribute `retry_cnt`
//! selects the retry policy:
//!
//! | `retry_cnt` | policy |
//! |---|---|
//! | 0..=7 | linear: every retry waits the base timeout; give up after `retry_cnt` retries |
//! | 8..=24 | exponential: retry `k` waits `base * 2^k` (capped at the largest ACK timeout); give up after `retry_cnt` retries |
//! | 25 | forever: exponential backoff as above, never gives up |
//!
//! [`RetryState`] tracks one QP's attempts; time comes in as `now_ns`, never from a clock.

/// Largest ACK timeout exponent.
pub const MAX_TIMEOUT_EXPONENT: u8 = 24;
/// The ACK timeout unit, 1.024 us.
pub const TIMEOUT_UNIT_NS: u64 = 1_024;
/// Largest linear retry count.
pub const MAX_LINEAR_RETRIES: u8 = 7;
/// Largest exponential retry count.
pub const MAX_EXPONENTIAL_RETRIES: u8 = 24;
/// The retry count that means "retry forever".
pub const RETRY_FOREVER: u8 = 25;

/// A bad retry attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RetryError {
    /// The timeout exponent is above [`MAX_TIMEOUT_EXPONENT`].
    TimeoutExponentTooLarge {
        /// The exponent given.
        exponent: u8,
    },
    /// The retry count is above [`RETRY_FOREVER`].
    RetryCountTooLarge {
        /// The count given.
        count: u8,
    },
}

/// An ACK timeout, `1.024 us * 2^exponent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AckTimeout {
    exponent: u8,
}

impl AckTimeout {
    /// The largest timeout (`t = 24`, 17 179 869 184 ns).
    pub const MAX: AckTimeout = AckTimeout {
        exponent: MAX_TIMEOUT_EXPONENT,
    };

    /// The timeout for QP attribute `t`.
    ///
    /// # Errors
    /// [`RetryError::TimeoutExponentTooLarge`] when `t > 24`.
    pub const fn from_exponent(t: u8) -> Result<Self, RetryError> {
        if t > MAX_TIMEOUT_EXPONENT {
            Err(RetryError::TimeoutExponentTooLarge { exponent: t })
        } else {
            Ok(AckTimeout { exponent: t })
        }
    }

    /// The exponent `t`.
    pub const fn exponent(self) -> u8 {
        self.exponent
    }

    /// The timeout in nanoseconds.
    pub const fn ns(self) -> u64 {
        TIMEOUT_UNIT_NS << self.exponent
    }
}

/// What the retry count attribute means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RetryPolicy {
    /// Same timeout for every retry; give up after `max_retries` retries (0..=7).
    Linear {
        /// Retries allowed.
        max_retries: u8,
    },
    /// Timeout doubles each retry (capped at [`AckTimeout::MAX`]); give up after `max_retries`.
    Exponential {
        /// Retries allowed (8..=24).
        max_retries: u8,
    },
    /// Exponential backoff (capped), never give up.
    Forever,
}

impl RetryPolicy {
    /// The policy for QP attribute `retry_cnt`.
    ///
    /// # Errors
    /// [`RetryError::RetryCountTooLarge`] when `count > 25`.
    pub const fn from_count(count: u8) -> Result<Self, RetryError> {
        match count {
            0..=MAX_LINEAR_RETRIES => Ok(RetryPolicy::Linear { max_retries: count }),
            8..=MAX_EXPONENTIAL_RETRIES => Ok(RetryPolicy::Exponential { max_retries: count }),
            RETRY_FOREVER => Ok(RetryPolicy::Forever),
            _ => Err(RetryError::RetryCountTooLarge { count }),
        }
    }

    /// Retries allowed, `None` for forever.
    pub const fn max_retries(self) -> Option<u8> {
        match self {
            RetryPolicy::Linear { max_retries } | RetryPolicy::Exponential { max_retries } => {
                Some(max_retries)
            }
            RetryPolicy::Forever => None,
        }
    }

    /// The wait before giving up on retry number `retry` (1 = first retry; 0 = the original
    /// transmission) with base timeout `base`.
    pub const fn timeout_ns(self, base: AckTimeout, retry: u32) -> u64 {
        match self {
            RetryPolicy::Linear { .. } => base.ns(),
            RetryPolicy::Exponential { .. } | RetryPolicy::Forever => {
                let shift = base.exponent as u32 + retry;
                if shift >= MAX_TIMEOUT_EXPONENT as u32 {
                    AckTimeout::MAX.ns()
                } else {
                    TIMEOUT_UNIT_NS << shift
                }
            }
        }
    }
}

/// The decision after an ACK timeout fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RetryDecision {
    /// Retransmit; wait until `deadline_ns` for progress. `retry` counts from 1.
    Retry {
        /// This retry's number (1 = first retry).
        retry: u32,
        /// When the next timeout fires.
        deadline_ns: u64,
    },
    /// The retry budget is spent: the QP goes to the error state.
    GiveUp {
        /// Retries made before giving up.
        retries: u32,
    },
}

/// Retry bookkeeping of one requester QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RetryState {
    policy: RetryPolicy,
    base: AckTimeout,
    retries: u32,
    deadline_ns: Option<u64>,
    gave_up: bool,
}

impl RetryState {
    /// Idle state (no timer armed) from the QP attributes `timeout` and `retry_cnt`.
    ///
    /// # Errors
    /// A [`RetryError`] naming the attribute that is out of range.
    pub const fn from_attributes(timeout: u8, retry_cnt: u8) -> Result<Self, RetryError> {
        let base = match AckTimeout::from_exponent(timeout) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        let policy = match RetryPolicy::from_count(retry_cnt) {
            Ok(p) => p,
            Err(e) => return Err(e),
        };
        Ok(Self::new(policy, base))
    }

    /// Idle state from an already validated policy and timeout.
    pub const fn new(policy: RetryPolicy, base: AckTimeout) -> Self {
        RetryState {
            policy,
            base,
            retries: 0,
            deadline_ns: None,
            gave_up: false,
        }
    }

    /// The policy.
    pub const fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// Retries made since the last progress.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// When the ACK timer fires, if armed.
    pub const fn deadline_ns(&self) -> Option<u64> {
        self.deadline_ns
    }

    /// Whether the retry budget was spent (sticky until [`RetryState::on_progress`]).
    pub const fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Arm the timer for outstanding data if it is not armed; returns the deadline.
    pub fn arm(&mut self, now_ns: u64) -> u64 {
        match self.deadline_ns {
            Some(d) => d,
            None => {
                let d = now_ns.saturating_add(self.policy.timeout_ns(self.base, self.retries));
                self.deadline_ns = Some(d);
                d
            }
        }
    }

    /// The peer acknowledged new data: retries reset; the timer restarts from `now_ns` when
    /// data is still outstanding, otherwise it stops.
    pub fn on_progress(&mut self, now_ns: u64, still_outstanding: bool) {
        self.retries = 0;
        self.gave_up = false;
        self.deadline_ns = if still_outstanding {
            Some(now_ns.saturating_add(self.base.ns()))
        } else {
            None
        };
    }

    /// The ACK timer fired at `now_ns`: retry (and re-arm) or give up (and disarm).
    pub fn on_timeout(&mut self, now_ns: u64) -> RetryDecision {
        let next = self.retries.saturating_add(1);
        if let Some(max) = self.policy.max_retries() {
            if next > u32::from(max) {
                self.deadline_ns = None;
                self.gave_up = true;
                return RetryDecision::GiveUp {
                    retries: self.retries,
                };
            }
        }
        self.retries = next;
        let deadline_ns = now_ns.saturating_add(self.policy.timeout_ns(self.base, next));
        self.deadline_ns = Some(deadline_ns);
        RetryDecision::Retry {
            retry: next,
            deadline_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_exact_values() {
        assert_eq!(AckTimeout::from_exponent(0).unwrap().ns(), 1_024);
        assert_eq!(AckTimeout::from_exponent(1).unwrap().ns(), 2_048);
        assert_eq!(AckTimeout::from_exponent(14).unwrap().ns(), 16_777_216);
        assert_eq!(AckTimeout::from_exponent(24).unwrap().ns(), 17_179_869_184);
        assert_eq!(
            AckTimeout::from_exponent(25),
            Err(RetryError::TimeoutExponentTooLarge { exponent: 25 })
        );
        assert!(AckTimeout::from_exponent(255).is_err());
    }

    #[test]
    fn policy_ranges() {
        assert_eq!(
            RetryPolicy::from_count(0),
            Ok(RetryPolicy::Linear { max_retries: 0 })
        );
        assert_eq!(
            RetryPolicy::from_count(7),
            Ok(RetryPolicy::Linear { max_retries: 7 })
        );
        assert_eq!(
            RetryPolicy::from_count(8),
            Ok(RetryPolicy::Exponential { max_retries: 8 })
        );
        assert_eq!(
            RetryPolicy::from_count(24),
            Ok(RetryPolicy::Exponential { max_retries: 24 })
        );
        assert_eq!(RetryPolicy::from_count(25), Ok(RetryPolicy::Forever));
        assert_eq!(
            RetryPolicy::from_count(26),
            Err(RetryError::RetryCountTooLarge { count: 26 })
        );
        assert_eq!(
            RetryState::from_attributes(3, 30),
            Err(RetryError::RetryCountTooLarge { count: 30 })
        );
        assert_eq!(
            RetryState::from_attributes(40, 3),
            Err(RetryError::TimeoutExponentTooLarge { exponent: 40 })
        );
    }

    #[test]
    fn linear_keeps_timeout_and_gives_up_after_count() {
        // t = 10: 1 048 576 ns.
        let mut s = RetryState::from_attributes(10, 3).unwrap();
        assert_eq!(s.arm(1_000), 1_000 + 1_048_576);
        assert_eq!(
            s.arm(5_000),
            1_000 + 1_048_576,
            "arm keeps an armed deadline"
        );
        let mut now = 1_049_576;
        for k in 1..=3 {
            let d = s.on_timeout(now);
            assert_eq!(
                d,
                RetryDecision::Retry {
                    retry: k,
                    deadline_ns: now + 1_048_576
                }
            );
            now += 1_048_576;
        }
        assert_eq!(s.on_timeout(now), RetryDecision::GiveUp { retries: 3 });
        assert!(s.gave_up());
        assert_eq!(s.deadline_ns(), None);
    }

    #[test]
    fn zero_retries_gives_up_at_first_timeout() {
        let mut s = RetryState::from_attributes(0, 0).unwrap();
        assert_eq!(s.arm(0), 1_024);
        assert_eq!(s.on_timeout(1_024), RetryDecision::GiveUp { retries: 0 });
    }

    #[test]
    fn exponential_doubles_and_caps() {
        // t = 20: 1 073 741 824 ns; the cap (t = 24) is reached at retry 4.
        let mut s = RetryState::from_attributes(20, 8).unwrap();
        assert_eq!(s.arm(0), 1_073_741_824);
        let expect = [
            2_147_483_648u64,
            4_294_967_296,
            8_589_934_592,
            17_179_869_184,
            17_179_869_184,
            17_179_869_184,
            17_179_869_184,
            17_179_869_184,
        ];
        for (i, wait) in expect.iter().enumerate() {
            let now = 1_000_000 * i as u64;
            assert_eq!(
                s.on_timeout(now),
                RetryDecision::Retry {
                    retry: i as u32 + 1,
                    deadline_ns: now + wait
                }
            );
        }
        assert_eq!(s.on_timeout(9), RetryDecision::GiveUp { retries: 8 });
    }

    #[test]
    fn exponential_small_base_exact() {
        let p = RetryPolicy::from_count(12).unwrap();
        let base = AckTimeout::from_exponent(0).unwrap();
        assert_eq!(p.timeout_ns(base, 0), 1_024);
        assert_eq!(p.timeout_ns(base, 1), 2_048);
        assert_eq!(p.timeout_ns(base, 12), 4_194_304);
        assert_eq!(p.timeout_ns(base, 24), 17_179_869_184);
        assert_eq!(p.timeout_ns(base, u32::MAX), 17_179_869_184);
    }

    #[test]
    fn forever_never_gives_up_and_progress_resets() {
        let mut s = RetryState::from_attributes(24, 25).unwrap();
        s.arm(0);
        for k in 1..=1_000u32 {
            match s.on_timeout(u64::MAX - 1) {
                RetryDecision::Retry { retry, deadline_ns } => {
                    assert_eq!(retry, k);
                    assert_eq!(deadline_ns, u64::MAX, "saturates, never wraps");
                }
                RetryDecision::GiveUp { .. } => panic!("forever gave up"),
            }
        }
        s.on_progress(10, true);
        assert_eq!(s.retries(), 0);
        assert_eq!(s.deadline_ns(), Some(10 + 17_179_869_184));
        s.on_progress(20, false);
        assert_eq!(s.deadline_ns(), None);
    }
}
