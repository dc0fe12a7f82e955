//! Congestion control: a sender window per QP, behind the [`Controller`] trait.
//!
//! [`Cc`] dispatches to the configured algorithm by `match` (no `dyn`, no allocation):
//! [`Nscc`] (Ultra Ethernet NSCC, window from ECN + delay) or [`FixedWindow`] (a constant
//! window, for tests and lossless baselines). Every method takes the time as `now_ns`; the
//! window is in bytes and always stays within the algorithm's `[min, max]`.

pub mod nscc;

pub use nscc::{Nscc, NsccCounters, NsccParamError, NsccParams};

/// A sender congestion controller.
pub trait Controller {
    /// `acked_bytes` newly acknowledged by an ACK whose packets saw a CE mark (`ecn_marked`)
    /// and whose round trip measured `rtt_ns` (0 = no sample).
    fn on_ack(&mut self, now_ns: u64, acked_bytes: u64, ecn_marked: bool, rtt_ns: u64);
    /// A packet of `bytes` was reported lost (not trimmed): a path signal in MRC.
    fn on_nack(&mut self, now_ns: u64, bytes: u64);
    /// A packet of `bytes` was trimmed by a switch: a congestion signal.
    fn on_trim(&mut self, now_ns: u64, bytes: u64);
    /// The ACK timer fired.
    fn on_timeout(&mut self, now_ns: u64);
    /// The current window in bytes.
    fn cwnd_bytes(&self) -> u64;
    /// Whether one more packet may leave with `inflight_bytes` outstanding.
    fn can_send(&self, inflight_bytes: u64) -> bool {
        inflight_bytes < self.cwnd_bytes()
    }
}

/// A window that never changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FixedWindow {
    /// The window in bytes.
    pub cwnd_bytes: u64,
}

impl Controller for FixedWindow {
    fn on_ack(&mut self, _now_ns: u64, _acked_bytes: u64, _ecn_marked: bool, _rtt_ns: u64) {}
    fn on_nack(&mut self, _now_ns: u64, _bytes: u64) {}
    fn on_trim(&mut self, _now_ns: u64, _bytes: u64) {}
    fn on_timeout(&mut self, _now_ns: u64) {}
    fn cwnd_bytes(&self) -> u64 {
        self.cwnd_bytes
    }
}

/// The congestion controller of a QP, chosen by its CC profile.
// No boxing without an allocator: every QP holds the NSCC state in place either way.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Cc {
    /// Ultra Ethernet NSCC.
    Nscc(Nscc),
    /// A constant window.
    Fixed(FixedWindow),
}

impl Cc {
    /// The unloaded round trip the profile was made for (NSCC's configured base RTT), `None`
    /// for a fixed window.
    pub fn base_rtt_ns(&self) -> Option<u64> {
        match self {
            Cc::Nscc(c) => Some(c.params().base_rtt_ns),
            Cc::Fixed(_) => None,
        }
    }
}

impl Controller for Cc {
    #[inline]
    fn on_ack(&mut self, now_ns: u64, acked_bytes: u64, ecn_marked: bool, rtt_ns: u64) {
        match self {
            Cc::Nscc(c) => c.on_ack(now_ns, acked_bytes, ecn_marked, rtt_ns),
            Cc::Fixed(c) => c.on_ack(now_ns, acked_bytes, ecn_marked, rtt_ns),
        }
    }
    fn on_nack(&mut self, now_ns: u64, bytes: u64) {
        match self {
            Cc::Nscc(c) => c.on_nack(now_ns, bytes),
            Cc::Fixed(c) => c.on_nack(now_ns, bytes),
        }
    }
    fn on_trim(&mut self, now_ns: u64, bytes: u64) {
        match self {
            Cc::Nscc(c) => c.on_trim(now_ns, bytes),
            Cc::Fixed(c) => c.on_trim(now_ns, bytes),
        }
    }
    fn on_timeout(&mut self, now_ns: u64) {
        match self {
            Cc::Nscc(c) => c.on_timeout(now_ns),
            Cc::Fixed(c) => c.on_timeout(now_ns),
        }
    }
    fn cwnd_bytes(&self) -> u64 {
        match self {
            Cc::Nscc(c) => c.cwnd_bytes(),
            Cc::Fixed(c) => c.cwnd_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_dispatch_reaches_the_algorithm() {
        let mut fixed = Cc::Fixed(FixedWindow { cwnd_bytes: 10_000 });
        fixed.on_ack(0, 4_096, true, 1_000_000);
        fixed.on_timeout(1);
        assert_eq!(fixed.cwnd_bytes(), 10_000);
        assert!(fixed.can_send(9_999));
        assert!(!fixed.can_send(10_000));

        let p = NsccParams::for_link(100_000_000_000, 10_000, 4_096).unwrap();
        let mut n = Cc::Nscc(Nscc::new(p));
        let before = n.cwnd_bytes();
        n.on_timeout(0);
        assert!(n.cwnd_bytes() < before);
    }
}
