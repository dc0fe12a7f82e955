//! DCQCN congestion control (Zhu et al., "Congestion Control for Large-Scale RDMA
//! Deployments", SIGCOMM 2015), in integer arithmetic.
//!
//! - **NP** (notification point, the receiver): at most one CNP per QP per
//!   [`DcqcnParams::cnp_interval`] when CE-marked packets arrive ([`Np`]).
//! - **RP** (reaction point, the sender, [`Rp`]): a current rate `Rc`, a target rate `Rt` and
//!   `alpha` (Q20, 1.0 = [`ALPHA_ONE`]).
//!   - On a CNP: `Rt = Rc`, `Rc = Rc * (1 - alpha / 2)` (not below `min_bps`),
//!     `alpha = (1 - g) * alpha + g`; the timer, the byte counter and both stage counters
//!     restart.
//!   - Every `alpha_period` without a CNP: `alpha = (1 - g) * alpha`.
//!   - Rate increase events: the timer (every `increase_period` since the last CNP, counter
//!     `T`) and the byte counter (every `byte_counter` bytes sent, counter `BC`). Each event:
//!     *fast recovery* while `max(T, BC) < F`: `Rc = (Rt + Rc) / 2`; *hyper increase* when
//!     `min(T, BC) > F`: `Rt += (min(T, BC) - F) * hai_bps`, `Rc = (Rt + Rc) / 2`; *additive
//!     increase* otherwise: `Rt += ai_bps`, `Rc = (Rt + Rc) / 2`. Rates are capped at the line
//!     rate.
//!   - Once `Rc` and `Rt` are back at line rate the QP leaves rate limiting (no more timer
//!     events) until the next CNP; `alpha` keeps decaying.
//!
//! Time is passed in (never read); timers are evaluated lazily: [`Rp::advance`] applies every
//! period boundary up to `now` in order, so the result is the same as a per-period event.

use crate::core::time::{Duration, Time};

/// `alpha` = 1.0 in Q20.
pub const ALPHA_ONE: u32 = 1 << 20;

/// DCQCN parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcqcnParams {
    /// Line rate of the QP's port (the rate ceiling).
    pub line_bps: u64,
    /// Floor of the current rate.
    pub min_bps: u64,
    /// `g`, the alpha gain, Q20 (1/256 = `ALPHA_ONE / 256`).
    pub g_q20: u32,
    /// `alpha` decays every this long without a CNP (`K`, 55 us).
    pub alpha_period: Duration,
    /// Rate increase timer (`T`, 55 us).
    pub increase_period: Duration,
    /// Rate increase byte counter (`B`, 10 MB).
    pub byte_counter: u64,
    /// Fast-recovery stages (`F`, 5).
    pub fast_recovery_steps: u32,
    /// Additive increase step (`R_AI`, 40 Mb/s).
    pub ai_bps: u64,
    /// Hyper increase step (`R_HAI`).
    pub hai_bps: u64,
    /// NP: least time between two CNPs of one QP (`N`, 50 us).
    pub cnp_interval: Duration,
}

impl DcqcnParams {
    /// The DCQCN paper's parameters for a port of `line_bps`: g = 1/256, K = T = 55 us,
    /// B = 10 MB, F = 5, R_AI = 40 Mb/s, CNP interval 50 us. R_HAI = 10 x R_AI = 400 Mb/s (the
    /// ratio of the Mellanox defaults `rpg_ai_rate` = 5 / `rpg_hai_rate` = 50 Mb/s), and a
    /// 100 Mb/s floor (htsim's and ns-3 HPCC's `MinRate`).
    pub fn paper(line_bps: u64) -> DcqcnParams {
        DcqcnParams {
            line_bps,
            min_bps: 100_000_000,
            g_q20: ALPHA_ONE / 256,
            alpha_period: Duration::from_us(55),
            increase_period: Duration::from_us(55),
            byte_counter: 10_000_000,
            fast_recovery_steps: 5,
            ai_bps: 40_000_000,
            hai_bps: 400_000_000,
            cnp_interval: Duration::from_us(50),
        }
    }

    /// htsim's DCQCN (`dcqcn.cpp`, the reference simulator) at `line_bps`: the paper's
    /// g, K, T, B, F and CNP interval with increase steps scaled to the link, R_AI = line / 20
    /// and R_HAI = line / 10, and a 100 Mb/s floor. Recovers far faster than
    /// [`DcqcnParams::paper`] on fast links (40 Mb/s per 55 us is 0.7 Gb/s per ms).
    pub fn htsim(line_bps: u64) -> DcqcnParams {
        DcqcnParams {
            ai_bps: line_bps / 20,
            hai_bps: line_bps / 10,
            ..DcqcnParams::paper(line_bps)
        }
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// The name of the first bad field.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.line_bps == 0 {
            return Err("dcqcn.line_bps must be > 0");
        }
        if self.min_bps == 0 || self.min_bps > self.line_bps {
            return Err("dcqcn.min_bps must be in 1..=line_bps");
        }
        if self.g_q20 == 0 || self.g_q20 > ALPHA_ONE {
            return Err("dcqcn.g_q20 must be in 1..=2^20");
        }
        if self.alpha_period.is_zero() || self.increase_period.is_zero() {
            return Err("dcqcn periods must be > 0");
        }
        if self.byte_counter == 0 {
            return Err("dcqcn.byte_counter must be > 0");
        }
        Ok(())
    }
}

/// Periods after which alpha is 0 whatever it was (`(1 - 2^-20)^n` of a Q20 value).
const ALPHA_DECAY_LIMIT: u64 = 1 << 22;

/// Reaction point: one sending QP's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rp {
    rc_bps: u64,
    rt_bps: u64,
    alpha_q20: u32,
    /// Rate limiting in force (a CNP since the rates were last at line rate).
    limited: bool,
    next_alpha: Time,
    next_increase: Time,
    t_count: u32,
    bc_count: u32,
    bytes: u64,
    /// CNPs handled.
    pub cnps: u64,
    /// Rate decreases.
    pub decreases: u64,
    /// Rate increase events.
    pub increases: u64,
}

impl Rp {
    /// At line rate, alpha = 1 (the initial value of the paper and of `initial_alpha_value`).
    pub fn new(p: &DcqcnParams) -> Rp {
        Rp {
            rc_bps: p.line_bps,
            rt_bps: p.line_bps,
            alpha_q20: ALPHA_ONE,
            limited: false,
            next_alpha: Time::ZERO.saturating_add(p.alpha_period),
            next_increase: Time::MAX,
            t_count: 0,
            bc_count: 0,
            bytes: 0,
            cnps: 0,
            decreases: 0,
            increases: 0,
        }
    }

    /// Current rate (`Rc`) as of the last [`Rp::advance`].
    pub fn rate_bps(&self) -> u64 {
        self.rc_bps
    }

    /// Target rate (`Rt`).
    pub fn target_bps(&self) -> u64 {
        self.rt_bps
    }

    /// `alpha`, Q20.
    pub fn alpha_q20(&self) -> u32 {
        self.alpha_q20
    }

    /// True while the QP is rate limited (below line rate or recovering).
    pub fn limited(&self) -> bool {
        self.limited
    }

    /// The next rate increase timer event, while limited.
    pub fn next_increase(&self) -> Option<Time> {
        self.limited.then_some(self.next_increase)
    }

    /// Applies every alpha and timer period boundary up to `now`, in time order.
    pub fn advance(&mut self, p: &DcqcnParams, now: Time) {
        loop {
            let alpha_due = self.next_alpha <= now;
            let inc_due = self.limited && self.next_increase <= now;
            if !alpha_due && !inc_due {
                return;
            }
            if alpha_due && (!inc_due || self.next_alpha <= self.next_increase) {
                if !self.limited {
                    // Nothing else happens until `now`: apply the decays in one step.
                    self.decay_alpha_until(p, now);
                    continue;
                }
                self.alpha_q20 = decay(self.alpha_q20, p.g_q20);
                self.next_alpha = self.next_alpha.saturating_add(p.alpha_period);
            } else {
                self.t_count = self.t_count.saturating_add(1);
                self.next_increase = self.next_increase.saturating_add(p.increase_period);
                self.increase(p);
            }
        }
    }

    fn decay_alpha_until(&mut self, p: &DcqcnParams, now: Time) {
        let per = p.alpha_period.as_ps().max(1);
        let n = now.duration_since(self.next_alpha).as_ps() / per + 1;
        if n >= ALPHA_DECAY_LIMIT {
            self.alpha_q20 = 0;
        } else {
            for _ in 0..n {
                if self.alpha_q20 == 0 {
                    break;
                }
                self.alpha_q20 = decay(self.alpha_q20, p.g_q20);
            }
        }
        self.next_alpha = self
            .next_alpha
            .saturating_add(p.alpha_period.saturating_mul(n));
    }

    /// A CNP arrived at `now`: cut the rate.
    pub fn on_cnp(&mut self, p: &DcqcnParams, now: Time) {
        self.advance(p, now);
        self.cnps += 1;
        self.decreases += 1;
        self.rt_bps = self.rc_bps;
        let cut = ((u128::from(self.rc_bps) * u128::from(self.alpha_q20)) >> 21) as u64;
        self.rc_bps = self.rc_bps.saturating_sub(cut).max(p.min_bps);
        let a = u64::from(self.alpha_q20);
        let g = u64::from(p.g_q20);
        let one = u64::from(ALPHA_ONE);
        self.alpha_q20 = ((a * (one - g) + one * g) >> 20).min(one) as u32;
        self.t_count = 0;
        self.bc_count = 0;
        self.bytes = 0;
        self.limited = true;
        self.next_alpha = now.saturating_add(p.alpha_period);
        self.next_increase = now.saturating_add(p.increase_period);
    }

    /// `bytes` left at `now` (feeds the byte counter).
    pub fn on_sent(&mut self, p: &DcqcnParams, now: Time, bytes: u64) {
        self.advance(p, now);
        if !self.limited {
            return;
        }
        self.bytes += bytes;
        while self.limited && self.bytes >= p.byte_counter {
            self.bytes -= p.byte_counter;
            self.bc_count = self.bc_count.saturating_add(1);
            self.increase(p);
        }
    }

    fn increase(&mut self, p: &DcqcnParams) {
        self.increases += 1;
        let f = p.fast_recovery_steps;
        let (hi, lo) = (
            self.t_count.max(self.bc_count),
            self.t_count.min(self.bc_count),
        );
        if hi < f {
            // Fast recovery: Rt unchanged.
        } else if lo > f {
            let i = u64::from(lo - f);
            self.rt_bps = self
                .rt_bps
                .saturating_add(i.saturating_mul(p.hai_bps))
                .min(p.line_bps);
        } else {
            self.rt_bps = self.rt_bps.saturating_add(p.ai_bps).min(p.line_bps);
        }
        self.rc_bps = ((self.rt_bps / 2) + (self.rc_bps / 2) + (self.rt_bps & self.rc_bps & 1))
            .min(p.line_bps);
        // Within 1 b/s of the target at line rate: done limiting.
        if self.rt_bps >= p.line_bps && self.rc_bps + 1 >= p.line_bps {
            self.rc_bps = p.line_bps;
            self.limited = false;
            self.next_increase = Time::MAX;
        }
    }
}

fn decay(alpha: u32, g: u32) -> u32 {
    ((u64::from(alpha) * u64::from(ALPHA_ONE - g)) >> 20) as u32
}

/// Notification point: one receiving QP's CNP pacing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Np {
    last_cnp: Option<Time>,
}

impl Np {
    /// A CE-marked packet arrived at `now`: true when a CNP goes out (and is recorded).
    pub fn on_ce(&mut self, p: &DcqcnParams, now: Time) -> bool {
        let due = self
            .last_cnp
            .is_none_or(|t| now.duration_since(t) >= p.cnp_interval);
        if due {
            self.last_cnp = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 100_000_000_000;

    #[test]
    fn paper_parameters_are_valid() {
        assert_eq!(DcqcnParams::paper(G).validate(), Ok(()));
        let mut p = DcqcnParams::paper(G);
        p.min_bps = 2 * G;
        assert!(p.validate().is_err());
    }

    #[test]
    fn first_cnp_halves_then_alpha_rises() {
        let p = DcqcnParams::paper(G);
        let mut rp = Rp::new(&p);
        rp.on_cnp(&p, Time::from_us(1));
        // alpha = 1: Rc = Rc * (1 - 1/2).
        assert_eq!(rp.rate_bps(), G / 2);
        assert_eq!(rp.target_bps(), G);
        // alpha stays 1 ((1 - g) * 1 + g).
        assert_eq!(rp.alpha_q20(), ALPHA_ONE);
        assert!(rp.limited());
        assert_eq!(rp.next_increase(), Some(Time::from_us(56)));
        rp.on_cnp(&p, Time::from_us(2));
        assert_eq!(rp.rate_bps(), G / 4);
        assert_eq!(rp.decreases, 2);
    }

    #[test]
    fn alpha_decays_by_g_every_period_without_cnp() {
        let p = DcqcnParams::paper(G);
        let mut rp = Rp::new(&p);
        rp.on_cnp(&p, Time::ZERO);
        rp.advance(&p, Time::from_us(55));
        let expect = decay(ALPHA_ONE, p.g_q20);
        assert_eq!(rp.alpha_q20(), expect);
        assert_eq!(expect, ALPHA_ONE - ALPHA_ONE / 256);
        // A CNP with alpha < 1 cuts by alpha / 2.
        let rc = rp.rate_bps();
        rp.on_cnp(&p, Time::from_us(60));
        let cut = ((u128::from(rc) * u128::from(expect)) >> 21) as u64;
        assert_eq!(rp.rate_bps(), rc - cut);
    }

    #[test]
    fn timer_stages_fast_recovery_then_additive() {
        let p = DcqcnParams::paper(G);
        let mut rp = Rp::new(&p);
        rp.on_cnp(&p, Time::ZERO);
        let (rt, mut rc) = (rp.target_bps(), rp.rate_bps());
        // Five fast-recovery steps: Rc halves the gap to Rt each time, Rt fixed.
        for k in 1..=4u64 {
            rp.advance(&p, Time::from_us(55 * k));
            rc = (rt + rc) / 2;
            assert_eq!(rp.rate_bps(), rc, "step {k}");
            assert_eq!(rp.target_bps(), rt);
        }
        // Step 5: T = 5 = F: additive, Rt is capped at line rate (it is there).
        rp.advance(&p, Time::from_us(55 * 5));
        assert_eq!(rp.target_bps(), G);
        assert_eq!(rp.increases, 5);
    }

    #[test]
    fn additive_and_hyper_increase_from_a_low_target() {
        let p = DcqcnParams::paper(G);
        let mut rp = Rp::new(&p);
        for i in 0..6 {
            rp.on_cnp(&p, Time::from_us(i));
        }
        let rt0 = rp.target_bps();
        assert!(rt0 < G / 8);
        let t0 = Time::from_us(5);
        // Timer events 1..=4 fast recovery; 5.. additive (BC = 0 < F).
        rp.advance(&p, t0.saturating_add(Duration::from_us(55 * 7)));
        assert_eq!(rp.target_bps(), rt0 + 3 * p.ai_bps);
        // Byte counter past F as well: hyper increase by (min(T, BC) - F) * R_HAI.
        let before = rp.target_bps();
        let now = t0.saturating_add(Duration::from_us(55 * 7));
        rp.on_sent(&p, now, 6 * p.byte_counter);
        // BC = 1..=5: additive (T = 7 > F, BC <= F); BC = 6: hyper with i = 1.
        assert_eq!(rp.target_bps(), before + 5 * p.ai_bps + p.hai_bps);
    }

    #[test]
    fn recovers_to_line_rate_and_stops_limiting() {
        let p = DcqcnParams::paper(G);
        let mut rp = Rp::new(&p);
        rp.on_cnp(&p, Time::ZERO);
        rp.advance(&p, Time::from_ms(10));
        assert_eq!(rp.rate_bps(), G);
        assert!(!rp.limited());
        assert_eq!(rp.next_increase(), None);
        // Long idle: alpha decays to nothing, lazily, in bounded work.
        rp.advance(&p, Time::from_secs(100));
        assert_eq!(rp.alpha_q20(), 0);
        rp.on_cnp(&p, Time::from_secs(100));
        // alpha = g after the CNP: a tiny cut.
        assert!(rp.rate_bps() > G - G / 256);
    }

    #[test]
    fn rate_never_below_floor() {
        let p = DcqcnParams::paper(G);
        let mut rp = Rp::new(&p);
        for i in 0..100 {
            rp.on_cnp(&p, Time::from_ns(i));
        }
        assert_eq!(rp.rate_bps(), p.min_bps);
    }

    #[test]
    fn np_paces_cnps() {
        let p = DcqcnParams::paper(G);
        let mut np = Np::default();
        assert!(np.on_ce(&p, Time::from_us(10)));
        assert!(!np.on_ce(&p, Time::from_us(59)));
        assert!(np.on_ce(&p, Time::from_us(60)));
        assert!(!np.on_ce(&p, Time::from_us(60)));
    }
}
