//! NSCC: the Ultra Ethernet 1.0 Network Signal-based Congestion Control, sender side.
//!
//! The window reacts to two signals carried by every ACK: whether its packets saw a CE mark
//! (ECN) and the queuing delay of the ACK's own sample, `delay = rtt - base_rtt`, compared to
//! `target_qdelay`. It follows the reference implementation (htsim's `UecSrc`, the UEC NSCC
//! model) quadrant by quadrant:
//!
//! | ECN | delay | action |
//! |---|---|---|
//! | no | `< target` | *fast increase* (`cwnd += fi_scale * acked`) once more than a whole window was acked with `delay < fast_increase_qdelay` (and for as long as it stays there); otherwise *proportional increase*: `pi * mtu * (target - delay) / target` per window acked |
//! | yes | `>= target` | *multiplicative decrease* when the delay **average** is above target: `cwnd *= max(1 - gamma * (avg - target) / avg, 1 - max_md_jump)`, at most once per base RTT |
//! | yes | `< target` | no change (the mark is on one path: let EV feedback move traffic off it) |
//! | no | `>= target` | *fair increase*: `fi * mtu` per window acked, so competing flows converge |
//!
//! On top, every base RTT the window grows by `eta * mtu` (the additive increase), and
//! *quick adapt*: once per period of `base_rtt + target`, if the period saw a trim or a delay
//! above `4 x target` and delivered less than `max_cwnd >> qa_gate`, the window becomes what the
//! period delivered; the ECN-marked ACKs of what was in flight then are ignored.
//!
//! The delay average is an EWMA with gain `delay_gain` (0.0125); an unmarked sample above target
//! (a queue this flow did not cause) enters it as `base_rtt / 4`, a trim as one base RTT of
//! queuing. The base RTT is the smallest RTT seen (starting from the configured one), so paths
//! shorter than the configured RTT measure their own queueing. A trim removes the trimmed bytes
//! from the window (unless quick adapt just set it); a loss (NACK without trim) does not move
//! it (in MRC a loss is a path failure, handled by EV retirement); a timeout halves it. The
//! window always stays within `[min_cwnd, max_cwnd]`.
//!
//! All arithmetic is integer: gains are Q16.16 (`65_536 == 1.0`), products are taken in `u128`
//! and saturate, so no input (u64 byte counts, absurd RTTs) overflows or panics.

use super::Controller;
use crate::engine::fixed::{div_u64, ewma_q16_unit_int, mul_q16, Q16_ONE};

/// The reference network NSCC's gains are stated for: 100 Gb/s x 12 us = 150,000 bytes. The
/// gains scale with `bdp / REFERENCE_BDP` (the spec's `scaling_factor_a`).
pub const REFERENCE_BDP_BYTES: u64 = 150_000;
/// The reference RTT (12 us) the proportional gain's `scaling_factor_b = target / 12 us` uses.
pub const REFERENCE_RTT_NS: u64 = 12_000;

/// A bad NSCC parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NsccParamError {
    /// `mtu_bytes` is 0.
    ZeroMtu,
    /// `base_rtt_ns` is 0.
    ZeroBaseRtt,
    /// `target_qdelay_ns` is 0.
    ZeroTargetQdelay,
    /// The link rate is 0.
    ZeroLinkRate,
    /// The bandwidth-delay product does not fit in a u64.
    BdpOverflow,
    /// `min_cwnd_bytes` is 0.
    ZeroMinCwnd,
    /// Not `min_cwnd <= init_cwnd <= max_cwnd`.
    WindowOrder {
        /// Minimum window.
        min: u64,
        /// Initial window.
        init: u64,
        /// Maximum window.
        max: u64,
    },
    /// `gamma` is not in `(0, 1.0]`.
    Gamma(u32),
    /// `max_md_jump` is not in `(0, 1.0)`.
    MaxMdJump(u32),
    /// `eta` is above [`NsccParams::MAX_GAIN_Q16`].
    Eta(u32),
    /// `fi` is above [`NsccParams::MAX_GAIN_Q16`].
    Fi(u32),
    /// `fi_scale` is 0 or above [`NsccParams::MAX_GAIN_Q16`].
    FiScale(u32),
    /// `pi` is above [`NsccParams::MAX_GAIN_Q16`].
    Pi(u32),
    /// `delay_gain` is not in `(0, 1.0]`.
    DelayGain(u32),
    /// `qa_gate` is above 63.
    QaGate(u8),
}

/// NSCC parameters, fixed point. Build with [`NsccParams::for_link`], adjust, then
/// [`NsccParams::validate`] (or let [`Nscc::try_new`] do it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NsccParams {
    /// Packet payload size the increases are counted in.
    pub mtu_bytes: u32,
    /// Round trip without queuing (the initial base RTT, and the additive-increase period).
    pub base_rtt_ns: u64,
    /// Queuing delay separating "low" from "high".
    pub target_qdelay_ns: u64,
    /// Queuing delay below which an ACK counts towards fast increase.
    pub fast_increase_qdelay_ns: u64,
    /// Smallest window.
    pub min_cwnd_bytes: u64,
    /// Largest window (default 1.5 x BDP).
    pub max_cwnd_bytes: u64,
    /// Window at start.
    pub init_cwnd_bytes: u64,
    /// Additive increase, Q16, in MTUs per base RTT (the spec's `eta`).
    pub eta_q16: u32,
    /// Proportional increase gain, Q16, in MTUs per window acked at zero queuing delay (the
    /// spec's `alpha x target`).
    pub pi_q16: u32,
    /// Fair increase, Q16, in MTUs per window acked (the spec's `fi`).
    pub fi_q16: u32,
    /// Fast increase, Q16: window bytes added per byte acked (the spec's `fi_scale`).
    pub fi_scale_q16: u32,
    /// Multiplicative decrease gain, Q16 in `(0, 1.0]` (the spec's `gamma`).
    pub gamma_q16: u32,
    /// Largest fraction of the window one decrease removes, Q16 in `(0, 1.0)`.
    pub max_md_jump_q16: u32,
    /// EWMA gain of the queuing delay average, Q16 in `(0, 1.0]`.
    pub delay_gain_q16: u32,
    /// Quick adapt acts only when a period delivered less than `max_cwnd >> qa_gate`.
    pub qa_gate: u8,
}

/// `x * y` for two Q16 values, saturating.
fn q16_mul(x: u64, y: u64) -> u64 {
    (x.saturating_mul(y)) >> 16
}

impl NsccParams {
    /// The largest `eta`, `pi`, `fi` and `fi_scale` accepted: 1024.0.
    pub const MAX_GAIN_Q16: u32 = 1024 << 16;

    /// The reference defaults for a link of `link_bps` bits/s, a fabric base RTT and an MTU:
    /// BDP = rate x base RTT; window in `[1 MTU, 1.5 x BDP]` starting at 1.5 x BDP; target queuing
    /// delay 3/4 of the base RTT (the reference's choice with trimming); fast increase below
    /// 1 us of queuing. With `a = BDP / 150,000 B` and `b = target / 12 us`: `pi = 4ab`,
    /// `fi = 5a`, `fi_scale = a/4`, `eta = 0.15a` (each at least 2^-16); `gamma = 0.8`,
    /// `max_md_jump = 0.5`, delay average gain 0.0125, quick adapt gate 3 (1/8 of the largest
    /// window).
    ///
    /// # Errors
    /// [`NsccParamError`] for a zero input or a BDP that overflows.
    pub fn for_link(
        link_bps: u64,
        base_rtt_ns: u64,
        mtu_bytes: u32,
    ) -> Result<Self, NsccParamError> {
        if link_bps == 0 {
            return Err(NsccParamError::ZeroLinkRate);
        }
        if base_rtt_ns == 0 {
            return Err(NsccParamError::ZeroBaseRtt);
        }
        if mtu_bytes == 0 {
            return Err(NsccParamError::ZeroMtu);
        }
        let bdp = u128::from(link_bps) * u128::from(base_rtt_ns) / 8 / 1_000_000_000;
        let max = bdp * 3 / 2;
        if max > u128::from(u64::MAX) {
            return Err(NsccParamError::BdpOverflow);
        }
        let min = u64::from(mtu_bytes);
        let max = (max as u64).max(min);
        // The reference starts at the largest window (htsim `initNscc` with no window given).
        let init = max;
        let target = (base_rtt_ns * 3 / 4).max(1);
        let cap = u64::from(Self::MAX_GAIN_Q16);
        let a = (bdp * u128::from(Q16_ONE) / u128::from(REFERENCE_BDP_BYTES)).min(u128::from(cap))
            as u64;
        let b = (u128::from(target) * u128::from(Q16_ONE) / u128::from(REFERENCE_RTT_NS))
            .min(u128::from(cap)) as u64;
        let gain = |g: u64| g.clamp(1, cap) as u32;
        let p = NsccParams {
            mtu_bytes,
            base_rtt_ns,
            target_qdelay_ns: target,
            fast_increase_qdelay_ns: 1_000,
            min_cwnd_bytes: min,
            max_cwnd_bytes: max,
            init_cwnd_bytes: init,
            eta_q16: gain(q16_mul(a, 9_830)), // 0.15 a
            pi_q16: gain(4 * q16_mul(a, b)),
            fi_q16: gain(5 * a),
            fi_scale_q16: gain(a / 4),
            gamma_q16: 52_429, // 0.8
            max_md_jump_q16: Q16_ONE / 2,
            delay_gain_q16: 819, // 0.0125
            qa_gate: 3,
        };
        p.validate()?;
        Ok(p)
    }

    /// Check every field.
    ///
    /// # Errors
    /// The first [`NsccParamError`] found.
    pub fn validate(&self) -> Result<(), NsccParamError> {
        use NsccParamError as E;
        if self.mtu_bytes == 0 {
            return Err(E::ZeroMtu);
        }
        if self.base_rtt_ns == 0 {
            return Err(E::ZeroBaseRtt);
        }
        if self.target_qdelay_ns == 0 {
            return Err(E::ZeroTargetQdelay);
        }
        if self.min_cwnd_bytes == 0 {
            return Err(E::ZeroMinCwnd);
        }
        let (min, init, max) = (
            self.min_cwnd_bytes,
            self.init_cwnd_bytes,
            self.max_cwnd_bytes,
        );
        if !(min <= init && init <= max) {
            return Err(E::WindowOrder { min, init, max });
        }
        if self.gamma_q16 == 0 || self.gamma_q16 > Q16_ONE {
            return Err(E::Gamma(self.gamma_q16));
        }
        if self.max_md_jump_q16 == 0 || self.max_md_jump_q16 >= Q16_ONE {
            return Err(E::MaxMdJump(self.max_md_jump_q16));
        }
        if self.eta_q16 > Self::MAX_GAIN_Q16 {
            return Err(E::Eta(self.eta_q16));
        }
        if self.pi_q16 > Self::MAX_GAIN_Q16 {
            return Err(E::Pi(self.pi_q16));
        }
        if self.fi_q16 > Self::MAX_GAIN_Q16 {
            return Err(E::Fi(self.fi_q16));
        }
        if self.fi_scale_q16 == 0 || self.fi_scale_q16 > Self::MAX_GAIN_Q16 {
            return Err(E::FiScale(self.fi_scale_q16));
        }
        if self.delay_gain_q16 == 0 || self.delay_gain_q16 > Q16_ONE {
            return Err(E::DelayGain(self.delay_gain_q16));
        }
        if self.qa_gate > 63 {
            return Err(E::QaGate(self.qa_gate));
        }
        Ok(())
    }
}

/// What NSCC did, by quadrant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NsccCounters {
    /// ACKs that grew the window in fast increase.
    pub fast_increases: u64,
    /// ACKs that grew it proportionally.
    pub proportional_increases: u64,
    /// ACKs that grew it by fair increase.
    pub fair_increases: u64,
    /// Multiplicative decreases applied.
    pub decreases: u64,
    /// ECN + high delay ACKs that did not decrease: inside the once-per-RTT guard, or with the
    /// delay average at or below target.
    pub decreases_quiet: u64,
    /// ECN + low delay ACKs (no change).
    pub ecn_low_delay: u64,
    /// Quick adapts (window set to what the last period delivered).
    pub quick_adapts: u64,
    /// ECN-marked ACKs ignored after a quick adapt.
    pub ignored: u64,
    /// Trims.
    pub trims: u64,
    /// Losses (NACK without trim).
    pub nacks: u64,
    /// Timeouts.
    pub timeouts: u64,
}

/// The NSCC state of one QP.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Nscc {
    p: NsccParams,
    cwnd_bytes: u64,
    /// The delay average in 1/65,536 ns.
    avg_qdelay_q16: u64,
    /// The smallest RTT seen (the configured base RTT at start).
    base_rtt_ns: u64,
    /// No multiplicative decrease before this time.
    next_dec_ns: u64,
    /// The last additive increase.
    last_adjust_ns: u64,
    /// Bytes acked in a row with `delay < fast_increase_qdelay`.
    fi_count: u64,
    /// In fast increase.
    fast: bool,
    /// End of the quick adapt period (0: none started).
    qa_end_ns: u64,
    /// Bytes delivered in the current quick adapt period.
    achieved_bytes: u64,
    /// A trim asked for a quick adapt check.
    qa_trigger: bool,
    /// After a quick adapt: ECN-marked ACKs are ignored until this many bytes were acked or
    /// trimmed (what was in flight then).
    bytes_to_ignore: u64,
    bytes_ignored: u64,
    counters: NsccCounters,
}

impl Nscc {
    /// NSCC from parameters that are assumed valid; invalid ones are repaired to stay safe
    /// (window bounds ordered, gains clamped). Prefer [`Nscc::try_new`].
    pub fn new(p: NsccParams) -> Self {
        let mut p = p;
        p.mtu_bytes = p.mtu_bytes.max(1);
        p.base_rtt_ns = p.base_rtt_ns.max(1);
        p.target_qdelay_ns = p.target_qdelay_ns.max(1);
        p.min_cwnd_bytes = p.min_cwnd_bytes.max(1);
        p.max_cwnd_bytes = p.max_cwnd_bytes.max(p.min_cwnd_bytes);
        p.init_cwnd_bytes = p.init_cwnd_bytes.clamp(p.min_cwnd_bytes, p.max_cwnd_bytes);
        p.gamma_q16 = p.gamma_q16.clamp(1, Q16_ONE);
        p.max_md_jump_q16 = p.max_md_jump_q16.clamp(1, Q16_ONE - 1);
        p.delay_gain_q16 = p.delay_gain_q16.clamp(1, Q16_ONE);
        p.qa_gate = p.qa_gate.min(63);
        Nscc {
            cwnd_bytes: p.init_cwnd_bytes,
            avg_qdelay_q16: 0,
            base_rtt_ns: p.base_rtt_ns,
            next_dec_ns: 0,
            last_adjust_ns: 0,
            fi_count: 0,
            fast: false,
            qa_end_ns: 0,
            achieved_bytes: 0,
            qa_trigger: false,
            bytes_to_ignore: 0,
            bytes_ignored: 0,
            p,
            counters: NsccCounters::default(),
        }
    }

    /// NSCC from validated parameters.
    ///
    /// # Errors
    /// The [`NsccParamError`] of the first bad field.
    pub fn try_new(p: NsccParams) -> Result<Self, NsccParamError> {
        p.validate()?;
        Ok(Self::new(p))
    }

    /// The parameters in use.
    pub fn params(&self) -> &NsccParams {
        &self.p
    }

    /// The queuing delay average.
    pub fn avg_qdelay_ns(&self) -> u64 {
        self.avg_qdelay_q16 >> 16
    }

    /// The base RTT in use: the smallest RTT sample seen, at most the configured one.
    pub fn base_rtt_ns(&self) -> u64 {
        self.base_rtt_ns
    }

    /// Counters.
    pub fn counters(&self) -> NsccCounters {
        self.counters
    }

    /// The window `w` within `[min_cwnd, max_cwnd]` (`new` made `min <= max`; written as
    /// `max` then `min`, not `u64::clamp`: no assertion of that on every step).
    fn clamp(&mut self, w: u64) {
        self.cwnd_bytes = w.max(self.p.min_cwnd_bytes).min(self.p.max_cwnd_bytes);
    }

    /// One step of the delay average towards `sample_ns`.
    fn average(&mut self, sample_ns: u64) {
        // (the average of `sample << 16`; `new` clamped the gain to 1.0)
        let s = sample_ns.min(u64::MAX >> 16);
        self.avg_qdelay_q16 = ewma_q16_unit_int(self.avg_qdelay_q16, s, self.p.delay_gain_q16);
    }

    /// `units_q16 * mtu * acked / cwnd`, at most `u64::MAX`.
    fn per_window_increase(&self, units_q16: u64, acked: u64) -> u64 {
        let cwnd = self.cwnd_bytes.max(1);
        // The common case in 64 bits (not a 128-bit library call), the shift first:
        // `(num / cwnd) >> 16 == (num >> 16) / cwnd`, which then usually fits the 32-bit
        // divide.
        if let Some(num) = units_q16
            .checked_mul(u64::from(self.p.mtu_bytes))
            .and_then(|x| x.checked_mul(acked))
        {
            return div_u64(num >> 16, cwnd);
        }
        let num = u128::from(units_q16)
            .saturating_mul(u128::from(self.p.mtu_bytes))
            .saturating_mul(u128::from(acked));
        let inc = (num / u128::from(cwnd)) >> 16;
        u64::try_from(inc).unwrap_or(u64::MAX)
    }

    /// Quick adapt; true if this signal must not move the window further.
    #[inline]
    fn quick_adapt(&mut self, now_ns: u64, is_loss: bool, marked: bool, delay_ns: u64) -> bool {
        if marked && self.bytes_ignored < self.bytes_to_ignore {
            self.counters.ignored += 1;
            return true;
        }
        if now_ns <= self.qa_end_ns {
            return false;
        }
        self.quick_adapt_period_end(now_ns, is_loss, delay_ns)
    }

    /// The end of a quick adapt period: adapt if it asked for it, start the next.
    #[inline(never)]
    fn quick_adapt_period_end(&mut self, now_ns: u64, is_loss: bool, delay_ns: u64) -> bool {
        let mut done = false;
        let qa_threshold = self.p.target_qdelay_ns.saturating_mul(4);
        if self.qa_end_ns != 0
            && (self.qa_trigger || is_loss || delay_ns > qa_threshold)
            && self.achieved_bytes < self.p.max_cwnd_bytes >> self.p.qa_gate
        {
            // What was in flight: at most the window before the cut.
            self.bytes_to_ignore = self.cwnd_bytes;
            self.bytes_ignored = 0;
            self.clamp(self.achieved_bytes);
            self.qa_trigger = false;
            self.fi_count = 0;
            self.fast = false;
            self.counters.quick_adapts += 1;
            done = true;
        }
        self.achieved_bytes = 0;
        self.qa_end_ns = now_ns
            .saturating_add(self.base_rtt_ns)
            .saturating_add(self.p.target_qdelay_ns);
        done
    }

    fn decrease(&mut self, now_ns: u64) {
        self.fast = false;
        self.fi_count = 0;
        let avg = self.avg_qdelay_ns();
        let target = self.p.target_qdelay_ns;
        if avg <= target || now_ns < self.next_dec_ns {
            self.counters.decreases_quiet += 1;
            return;
        }
        // 1 - gamma * (avg - target) / avg, at least 1 - max_md_jump. The cut is below 1.0:
        // avg - target < avg and gamma <= 1.0.
        let cut =
            (u128::from(avg - target) * u128::from(self.p.gamma_q16) / u128::from(avg)) as u32;
        let cut = cut.min(self.p.max_md_jump_q16);
        let dec = mul_q16(self.cwnd_bytes, cut);
        self.clamp(self.cwnd_bytes.saturating_sub(dec));
        self.counters.decreases += 1;
        self.next_dec_ns = now_ns.saturating_add(self.base_rtt_ns);
    }
}

impl Controller for Nscc {
    #[inline]
    fn on_ack(&mut self, now_ns: u64, acked_bytes: u64, ecn_marked: bool, rtt_ns: u64) {
        // One ACK cannot meaningfully acknowledge more than the largest window.
        let acked = acked_bytes.min(self.p.max_cwnd_bytes);
        self.achieved_bytes = self.achieved_bytes.saturating_add(acked);
        self.bytes_ignored = self.bytes_ignored.saturating_add(acked);
        let target = self.p.target_qdelay_ns;
        // No RTT sample: judge by the running average.
        let delay = if rtt_ns == 0 {
            self.avg_qdelay_ns()
        } else {
            self.base_rtt_ns = self.base_rtt_ns.min(rtt_ns);
            let d = rtt_ns - self.base_rtt_ns;
            if !ecn_marked && d > target {
                // A queue this flow's packets did not get marked in: weigh it lightly.
                self.average(self.base_rtt_ns / 4);
            } else {
                self.average(d);
            }
            d
        };
        if self.quick_adapt(now_ns, false, ecn_marked, delay) {
            return;
        }
        let w = self.cwnd_bytes;
        match (ecn_marked, delay >= target) {
            (false, false) => {
                if delay < self.p.fast_increase_qdelay_ns {
                    self.fi_count = self.fi_count.saturating_add(acked);
                    if self.fi_count > w || self.fast {
                        self.fast = true;
                        self.counters.fast_increases += 1;
                        self.clamp(w.saturating_add(mul_q16(acked, self.p.fi_scale_q16)));
                    }
                } else {
                    self.fi_count = 0;
                    self.fast = false;
                }
                if !self.fast {
                    self.counters.proportional_increases += 1;
                    let room = target - delay; // delay < target here
                    let scale = match room.checked_shl(16) {
                        Some(r) if r >> 16 == room => div_u64(r, target),
                        _ => ((u128::from(room) << 16) / u128::from(target)) as u64,
                    }; // < 1.0: room < target
                    let units = mul_q16(u64::from(self.p.pi_q16), scale as u32);
                    let inc = self.per_window_increase(units, acked);
                    self.clamp(w.saturating_add(inc));
                }
            }
            (true, true) => self.decrease(now_ns),
            (true, false) => self.counters.ecn_low_delay += 1,
            (false, true) => {
                self.counters.fair_increases += 1;
                let inc = self.per_window_increase(u64::from(self.p.fi_q16), acked);
                self.clamp(w.saturating_add(inc));
            }
        }
        // The additive increase, once per base RTT.
        if now_ns.saturating_sub(self.last_adjust_ns) >= self.p.base_rtt_ns {
            let eta = mul_q16(u64::from(self.p.mtu_bytes), self.p.eta_q16);
            self.clamp(self.cwnd_bytes.saturating_add(eta));
            self.last_adjust_ns = now_ns;
        }
    }

    fn on_nack(&mut self, _now_ns: u64, _bytes: u64) {
        self.counters.nacks += 1;
        self.fi_count = 0;
        self.fast = false;
    }

    fn on_trim(&mut self, now_ns: u64, bytes: u64) {
        self.counters.trims += 1;
        self.fi_count = 0;
        self.fast = false;
        self.bytes_ignored = self.bytes_ignored.saturating_add(bytes);
        // A trim says a queue reached its limit: about one base RTT of queuing.
        self.average(self.p.base_rtt_ns);
        self.qa_trigger = true;
        if !self.quick_adapt(now_ns, true, true, 0) {
            self.clamp(self.cwnd_bytes.saturating_sub(bytes));
        }
    }

    fn on_timeout(&mut self, _now_ns: u64) {
        self.counters.timeouts += 1;
        self.fi_count = 0;
        self.fast = false;
        self.clamp(self.cwnd_bytes / 2);
    }

    fn cwnd_bytes(&self) -> u64 {
        self.cwnd_bytes
    }
}

#[cfg(test)]
#[path = "nscc_tests.rs"]
mod tests;
