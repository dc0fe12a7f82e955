//! NSCC: the Ultra Ethernet 1.0 Network Signal-based Congestion Control, sender side.
//!
//! The window reacts to two signals carried by every ACK: whether its packets saw a CE mark
//! (ECN) and the queuing delay `qdelay = rtt - base_rtt` compared to `target_qdelay`. ECN is not
//! marked at the last hop in MRC, so a mark without delay is a per-path load signal that the EV
//! table handles; delay without a mark is a shared (last-hop / incast) queue.
//!
//! | ECN | delay | action |
//! |---|---|---|
//! | no | low | *fast increase* (`cwnd += acked`) once a whole window was acked with `qdelay <= fast_increase_qdelay_ns`; otherwise *proportional increase*: `eta * mtu * (1 - qdelay/target)` per window acked |
//! | yes | high | *multiplicative decrease*: `cwnd -= cwnd * min(max_md_jump, (q - target)/q)` with `q = max(avg_qdelay, qdelay)`, at least one MTU; then a quiet period of one RTT (`base_rtt + avg_qdelay`) with no further decrease |
//! | yes | low | no change (the mark is on one path: let EV feedback move traffic off it) |
//! | no | high | *fair increase*: `fi * fi_scale * mtu` per window acked, so competing flows converge |
//!
//! `avg_qdelay` is an EWMA with gain `gamma`. A trim removes the trimmed bytes from the window; a
//! loss (NACK without trim) does not move it (in MRC a loss is a path failure, handled by EV
//! retirement); a timeout halves it. The window always stays within `[min_cwnd, max_cwnd]`.
//!
//! All arithmetic is integer: gains are Q16.16 (`65_536 == 1.0`), products are taken in `u128`
//! and saturate, so no input (u64 byte counts, absurd RTTs) overflows or panics.

use super::Controller;
use crate::engine::fixed::{ewma_q16, mul_q16, Q16_ONE};

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
}

/// NSCC parameters, fixed point. Build with [`NsccParams::for_link`], adjust, then
/// [`NsccParams::validate`] (or let [`Nscc::try_new`] do it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NsccParams {
    /// Packet payload size the increases are counted in.
    pub mtu_bytes: u32,
    /// Round trip without queuing.
    pub base_rtt_ns: u64,
    /// Queuing delay separating "low" from "high".
    pub target_qdelay_ns: u64,
    /// Queuing delay at or below which an ACK counts towards fast increase.
    pub fast_increase_qdelay_ns: u64,
    /// Smallest window.
    pub min_cwnd_bytes: u64,
    /// Largest window (default 1.5 x BDP).
    pub max_cwnd_bytes: u64,
    /// Window at start.
    pub init_cwnd_bytes: u64,
    /// Proportional increase gain, Q16, in MTUs per window acked at zero queuing delay.
    pub eta_q16: u32,
    /// Fair increase, Q16, in MTUs per window acked.
    pub fi_q16: u32,
    /// Multiplier of `fi` (scales it with link rate), Q16.
    pub fi_scale_q16: u32,
    /// EWMA gain of the queuing delay average, Q16 in `(0, 1.0]`.
    pub gamma_q16: u32,
    /// Largest fraction of the window one decrease removes, Q16 in `(0, 1.0)`.
    pub max_md_jump_q16: u32,
}

impl NsccParams {
    /// The largest `eta`, `fi` and `fi_scale` accepted: 1024.0.
    pub const MAX_GAIN_Q16: u32 = 1024 << 16;

    /// Defaults for a link of `link_bps` bits/s, a fabric base RTT and an MTU:
    /// BDP = rate x base RTT; window in `[1 MTU, 1.5 x BDP]` starting at BDP; target queuing
    /// delay half the base RTT; fast increase below a quarter of the target; eta 0.15,
    /// fi 0.5 MTU, fi_scale = rate / 100 Gb/s (at least 1/16), gamma 1/8, max_md_jump 0.5.
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
        let init = (bdp as u64).clamp(min, max);
        let target = (base_rtt_ns / 2).max(1);
        let fi_scale = (u128::from(link_bps) * u128::from(Q16_ONE) / 100_000_000_000)
            .clamp(u128::from(Q16_ONE / 16), u128::from(Self::MAX_GAIN_Q16))
            as u32;
        let p = NsccParams {
            mtu_bytes,
            base_rtt_ns,
            target_qdelay_ns: target,
            fast_increase_qdelay_ns: target / 4,
            min_cwnd_bytes: min,
            max_cwnd_bytes: max,
            init_cwnd_bytes: init,
            // UEC NSCC: 4 MTU per window at zero queueing delay (0.15 left windows that a
            // burst of trims shrank near one MTU for hundreds of RTTs).
            eta_q16: 4 * Q16_ONE,
            fi_q16: Q16_ONE / 2,
            fi_scale_q16: fi_scale,
            gamma_q16: Q16_ONE / 8,
            max_md_jump_q16: Q16_ONE / 2,
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
        if self.fi_q16 > Self::MAX_GAIN_Q16 {
            return Err(E::Fi(self.fi_q16));
        }
        if self.fi_scale_q16 == 0 || self.fi_scale_q16 > Self::MAX_GAIN_Q16 {
            return Err(E::FiScale(self.fi_scale_q16));
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
    /// ECN + high delay ACKs ignored inside the quiet period.
    pub decreases_quiet: u64,
    /// ECN + low delay ACKs (no change).
    pub ecn_low_delay: u64,
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
    avg_qdelay_ns: u64,
    quiet_until_ns: u64,
    /// Bytes acked in a row with a near-empty queue and no mark.
    clean_bytes: u64,
    /// Trims shrink the window by their bytes, but not below this floor until
    /// `trim_until_ns`: at most `max_md_jump` of the window per RTT, however many packets of
    /// one burst were trimmed.
    trim_floor_bytes: u64,
    trim_until_ns: u64,
    counters: NsccCounters,
}

impl Nscc {
    /// NSCC from parameters that are assumed valid; invalid ones are repaired to stay safe
    /// (window bounds ordered, gains clamped). Prefer [`Nscc::try_new`].
    pub fn new(p: NsccParams) -> Self {
        let mut p = p;
        p.mtu_bytes = p.mtu_bytes.max(1);
        p.target_qdelay_ns = p.target_qdelay_ns.max(1);
        p.min_cwnd_bytes = p.min_cwnd_bytes.max(1);
        p.max_cwnd_bytes = p.max_cwnd_bytes.max(p.min_cwnd_bytes);
        p.init_cwnd_bytes = p.init_cwnd_bytes.clamp(p.min_cwnd_bytes, p.max_cwnd_bytes);
        p.gamma_q16 = p.gamma_q16.clamp(1, Q16_ONE);
        p.max_md_jump_q16 = p.max_md_jump_q16.clamp(1, Q16_ONE - 1);
        Nscc {
            cwnd_bytes: p.init_cwnd_bytes,
            p,
            avg_qdelay_ns: 0,
            quiet_until_ns: 0,
            clean_bytes: 0,
            trim_floor_bytes: 0,
            trim_until_ns: 0,
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
        self.avg_qdelay_ns
    }

    /// Counters.
    pub fn counters(&self) -> NsccCounters {
        self.counters
    }

    fn clamp(&mut self, w: u64) {
        self.cwnd_bytes = w.clamp(self.p.min_cwnd_bytes, self.p.max_cwnd_bytes);
    }

    /// `units_q16 * mtu` bytes per window acked, for `acked` bytes: `units*mtu*acked/cwnd`.
    fn per_window_increase(&self, units_q16: u64, acked: u64) -> u64 {
        let num = u128::from(units_q16)
            .saturating_mul(u128::from(self.p.mtu_bytes))
            .saturating_mul(u128::from(acked));
        let inc = (num / u128::from(self.cwnd_bytes.max(1))) >> 16;
        u64::try_from(inc).unwrap_or(u64::MAX)
    }

    fn decrease(&mut self, now_ns: u64, qdelay_ns: u64) {
        if now_ns < self.quiet_until_ns {
            self.counters.decreases_quiet += 1;
            return;
        }
        let q = self.avg_qdelay_ns.max(qdelay_ns).max(1);
        let over = q.saturating_sub(self.p.target_qdelay_ns);
        let frac = ((u128::from(over) << 16) / u128::from(q)) as u32; // < 1.0 since over < q
        let frac = frac.min(self.p.max_md_jump_q16);
        let dec = mul_q16(self.cwnd_bytes, frac).max(u64::from(self.p.mtu_bytes));
        self.clamp(self.cwnd_bytes.saturating_sub(dec));
        self.counters.decreases += 1;
        let rtt = self.p.base_rtt_ns.saturating_add(self.avg_qdelay_ns);
        self.quiet_until_ns = now_ns.saturating_add(rtt);
    }
}

impl Controller for Nscc {
    fn on_ack(&mut self, now_ns: u64, acked_bytes: u64, ecn_marked: bool, rtt_ns: u64) {
        // No RTT sample: judge by the running average.
        let qdelay = if rtt_ns == 0 {
            self.avg_qdelay_ns
        } else {
            let q = rtt_ns.saturating_sub(self.p.base_rtt_ns);
            self.avg_qdelay_ns = ewma_q16(self.avg_qdelay_ns, q, self.p.gamma_q16);
            q
        };
        // One ACK cannot meaningfully acknowledge more than the largest window.
        let acked = acked_bytes.min(self.p.max_cwnd_bytes);
        let high = qdelay > self.p.target_qdelay_ns;
        let w = self.cwnd_bytes;
        match (ecn_marked, high) {
            (false, false) => {
                if qdelay <= self.p.fast_increase_qdelay_ns {
                    self.clean_bytes = self.clean_bytes.saturating_add(acked);
                } else {
                    self.clean_bytes = 0;
                }
                if self.clean_bytes >= w {
                    self.counters.fast_increases += 1;
                    self.clamp(w.saturating_add(acked));
                } else {
                    self.counters.proportional_increases += 1;
                    let room = self.p.target_qdelay_ns - qdelay; // qdelay <= target here
                    let scale = (u128::from(room) << 16) / u128::from(self.p.target_qdelay_ns);
                    let units = mul_q16(u64::from(self.p.eta_q16), scale as u32);
                    let inc = self.per_window_increase(units, acked);
                    self.clamp(w.saturating_add(inc));
                }
            }
            (true, true) => {
                self.clean_bytes = 0;
                self.decrease(now_ns, qdelay);
            }
            (true, false) => {
                self.clean_bytes = 0;
                self.counters.ecn_low_delay += 1;
            }
            (false, true) => {
                self.clean_bytes = 0;
                self.counters.fair_increases += 1;
                let units = mul_q16(u64::from(self.p.fi_q16), self.p.fi_scale_q16);
                let inc = self.per_window_increase(units, acked);
                self.clamp(w.saturating_add(inc));
            }
        }
    }

    fn on_nack(&mut self, _now_ns: u64, _bytes: u64) {
        self.counters.nacks += 1;
        self.clean_bytes = 0;
    }

    fn on_trim(&mut self, now_ns: u64, bytes: u64) {
        self.counters.trims += 1;
        self.clean_bytes = 0;
        if now_ns >= self.trim_until_ns {
            let jump = mul_q16(self.cwnd_bytes, self.p.max_md_jump_q16);
            self.trim_floor_bytes = self.cwnd_bytes.saturating_sub(jump);
            let rtt = self.p.base_rtt_ns.saturating_add(self.avg_qdelay_ns);
            self.trim_until_ns = now_ns.saturating_add(rtt);
        }
        let w = self
            .cwnd_bytes
            .saturating_sub(bytes)
            .max(self.trim_floor_bytes);
        self.clamp(w.min(self.cwnd_bytes));
    }

    fn on_timeout(&mut self, _now_ns: u64) {
        self.counters.timeouts += 1;
        self.clean_bytes = 0;
        self.clamp(self.cwnd_bytes / 2);
    }

    fn cwnd_bytes(&self) -> u64 {
        self.cwnd_bytes
    }
}

#[cfg(test)]
#[path = "nscc_tests.rs"]
mod tests;
