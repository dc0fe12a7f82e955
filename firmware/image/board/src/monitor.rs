//! Watching every port's transceiver from the main loop: the cage pins at a fixed period, the
//! module over I2C only when the pins say something may have changed.
//!
//! [`PortMonitor::poll`] is called once per main-loop iteration with the timer's `now`. Before
//! its deadline it returns at once (one comparison). At the deadline, every
//! [`PIN_PERIOD_NS`], it reads the cage pins once ([`ModulePins`]: presence and `IntL` of
//! every port, one register on the NIC) and, per port:
//!
//! - **no module seated**: the link is down for `ModuleLost` at once ([`Transceiver::lost`],
//!   no transfer: the presence pin is authoritative);
//! - **module seated** and any of: its state unknown (first look), just seated, `IntL`
//!   asserted while the link is up or newly asserted (it latched a flag: LOS, LOL, Tx fault),
//!   down and `IntL` just released (the last poll read the latch clear: the condition may be
//!   gone), down and [`DOWN_RETRY_NS`] passed since its last poll (a standing condition
//!   re-latches its flag at each read, so `IntL` stays asserted while it lasts: such a port is
//!   polled at this slower rate, not every period), or [`SWEEP_NS`] passed since its last
//!   poll (a missed interrupt): a full
//!   [`Transceiver::poll`] over I2C, which reads (and so clears) the latched flags;
//! - otherwise nothing.
//!
//! Every link change is handed to the caller as a [`PortEvent`]; the image turns it into the
//! port path of its main loop (`mrc_nicloop::NicLoop::set_port_link`: PORT_DOWN for the host,
//! the plane's EVs retired). [`PortMonitor::next_deadline`] is the loop's wake time for it.

use embedded_hal::delay::DelayNs;
use embedded_hal::i2c::I2c;

use crate::cmis::{PortEvent, Transceiver};

/// Period of the cage pin reads, ns. Detection latency of a pulled module or a flag is at
/// most this plus the poll's I2C time.
pub const PIN_PERIOD_NS: u64 = 10_000;
/// A seated module whose link is down is polled over I2C again after this long, ns (its
/// condition may clear without a new interrupt).
pub const DOWN_RETRY_NS: u64 = 1_000_000;
/// Every seated module is polled over I2C at least this often, ns.
pub const SWEEP_NS: u64 = 100_000_000;

/// The cage pins of every port (bit per port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pins {
    /// A module is seated (`ModPrsL` low).
    pub present: u8,
    /// The module asserts its interrupt (`IntL` low).
    pub interrupt: u8,
}

/// Where the pins are read.
pub trait ModulePins {
    /// The pins now.
    fn pins(&mut self) -> Pins;
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MonitorCounters {
    /// Pin reads (one per period).
    pub pin_reads: u32,
    /// Transceiver polls over I2C.
    pub i2c_polls: u32,
    /// Ports seen without a module (each change to absent).
    pub pulls: u32,
    /// Link changes handed over.
    pub events: u32,
}

/// The transceivers of `N` ports and when each was last looked at.
pub struct PortMonitor<I2C, const N: usize> {
    ports: [Transceiver<I2C>; N],
    present: [Option<bool>; N],
    up: [bool; N],
    /// `IntL` at the last look.
    interrupt: u8,
    polled_at: [u64; N],
    next_ns: u64,
    counters: MonitorCounters,
}

impl<I2C: I2c, const N: usize> PortMonitor<I2C, N> {
    /// Watch `ports` (port `i`'s transceiver at index `i`); the first [`PortMonitor::poll`]
    /// looks at every port.
    pub fn new(ports: [Transceiver<I2C>; N]) -> Self {
        PortMonitor {
            ports,
            present: [None; N],
            up: [false; N],
            interrupt: 0,
            polled_at: [0; N],
            next_ns: 0,
            counters: MonitorCounters::default(),
        }
    }

    /// When [`PortMonitor::poll`] next does something, ns.
    #[inline]
    pub fn next_deadline(&self) -> u64 {
        self.next_ns
    }

    /// Counters.
    pub fn counters(&self) -> MonitorCounters {
        self.counters
    }

    /// Port `i`'s transceiver (its counters).
    pub fn port(&self, i: usize) -> Option<&Transceiver<I2C>> {
        self.ports.get(i)
    }

    /// Look at the ports if the period is due at `now_ns` (see the module docs); each link
    /// change goes to `event`.
    #[inline]
    pub fn poll(
        &mut self,
        now_ns: u64,
        pins: &mut impl ModulePins,
        delay: &mut impl DelayNs,
        event: impl FnMut(PortEvent),
    ) {
        if now_ns < self.next_ns {
            return;
        }
        self.look(now_ns, pins, delay, event);
    }

    #[inline(never)]
    fn look(
        &mut self,
        now_ns: u64,
        pins: &mut impl ModulePins,
        delay: &mut impl DelayNs,
        mut event: impl FnMut(PortEvent),
    ) {
        self.next_ns = now_ns.saturating_add(PIN_PERIOD_NS);
        self.counters.pin_reads = self.counters.pin_reads.wrapping_add(1);
        let p = pins.pins();
        let int_before = core::mem::replace(&mut self.interrupt, p.interrupt);
        for i in 0..N {
            let bit = 1u8 << (i % 8);
            let seated = p.present & bit != 0;
            let was = self.present[i].replace(seated);
            let ev = if !seated {
                if was != Some(false) {
                    self.counters.pulls = self.counters.pulls.wrapping_add(1);
                }
                self.ports[i].lost()
            } else {
                let since = now_ns.saturating_sub(self.polled_at[i]);
                let int_now = p.interrupt & bit != 0;
                let int_was = int_before & bit != 0;
                let due = was != Some(true)
                    || (int_now && (self.up[i] || !int_was))
                    || (!self.up[i] && ((int_was && !int_now) || since >= DOWN_RETRY_NS))
                    || since >= SWEEP_NS;
                if !due {
                    continue;
                }
                self.polled_at[i] = now_ns;
                self.counters.i2c_polls = self.counters.i2c_polls.wrapping_add(1);
                self.ports[i].poll(delay)
            };
            if let Some(e) = ev {
                self.up[i] = matches!(e, PortEvent::Up { .. });
                self.counters.events = self.counters.events.wrapping_add(1);
                event(e);
            }
        }
    }
}

#[cfg(all(test, feature = "model"))]
mod tests {
    extern crate std;
    use core::cell::RefCell;
    use std::vec::Vec;

    use super::*;
    use crate::cmis::DownReason;
    use crate::cmis_model::{CmisModule, ModelPort};
    use embedded_hal_mock::eh1::delay::NoopDelay;

    fn cage() -> RefCell<[CmisModule; 4]> {
        RefCell::new(core::array::from_fn(|i| {
            CmisModule::seated(["A", "B", "C", "D"][i])
        }))
    }

    #[test]
    fn pins_each_period_i2c_only_on_a_change() {
        let cage = cage();
        let c: &RefCell<[CmisModule]> = &cage;
        let mut m = PortMonitor::new(core::array::from_fn(|i| {
            Transceiver::new(ModelPort { cage: c, port: i }, i as u8, 8)
        }));
        let mut pins = ModelPort { cage: c, port: 0 };
        let mut seen = Vec::new();
        let mut at = |m: &mut PortMonitor<_, 4>, now: u64, seen: &mut Vec<PortEvent>| {
            m.poll(now, &mut pins, &mut NoopDelay, |e| seen.push(e));
        };
        // First look: every port polled over I2C, all up.
        at(&mut m, 0, &mut seen);
        assert_eq!(seen.len(), 4);
        assert!(seen.iter().all(|e| matches!(e, PortEvent::Up { .. })));
        assert_eq!(m.counters().i2c_polls, 4);
        // Before the deadline nothing is read; at it, only the pins.
        let transfers = |c: &RefCell<[CmisModule; 4]>| -> u32 {
            c.borrow().iter().map(|m| m.counters().transfers).sum()
        };
        let t0 = transfers(&cage);
        at(&mut m, PIN_PERIOD_NS - 1, &mut seen);
        assert_eq!(m.counters().pin_reads, 1);
        for k in 1..=5 {
            at(&mut m, k * PIN_PERIOD_NS, &mut seen);
        }
        assert_eq!(m.counters().pin_reads, 6);
        assert_eq!(transfers(&cage), t0, "no I2C while nothing changed");
        // LOS on port 2: IntL, one poll over I2C, a down event.
        cage.borrow_mut()[2].set_los(0b1);
        seen.clear();
        at(&mut m, 6 * PIN_PERIOD_NS, &mut seen);
        assert_eq!(
            seen,
            [PortEvent::Down {
                port: 2,
                reason: DownReason::RxLos { lanes: 1 }
            }]
        );
        assert!(transfers(&cage) > t0);
        // Port 1 pulled: down at the next period without a transfer to it.
        let t1 = cage.borrow()[1].counters().transfers;
        cage.borrow_mut()[1].pull();
        seen.clear();
        at(&mut m, 7 * PIN_PERIOD_NS, &mut seen);
        assert_eq!(
            seen,
            [PortEvent::Down {
                port: 1,
                reason: DownReason::ModuleLost
            }]
        );
        assert_eq!(cage.borrow()[1].counters().transfers, t1);
        assert_eq!(cage.borrow()[1].counters().absent_nacks, 0);
        // Port 2 stays dark: its flag re-latches at each read, IntL stays asserted, but a
        // down port is not polled every period for it.
        let dark = cage.borrow()[2].counters().transfers;
        at(&mut m, 8 * PIN_PERIOD_NS, &mut seen);
        assert_eq!(cage.borrow()[2].counters().transfers, dark);
        // Port 1 seated again: polled, up. LOS on port 2 clears: its flag latched at the last
        // read, so the retry poll reads it once more (still down) and clears it; IntL drops,
        // and the next period's poll finds it up.
        cage.borrow_mut()[2].set_los(0);
        cage.borrow_mut()[1].insert();
        seen.clear();
        at(&mut m, 9 * PIN_PERIOD_NS, &mut seen);
        assert_eq!(seen, [PortEvent::Up { port: 1 }]);
        let retry = 6 * PIN_PERIOD_NS + DOWN_RETRY_NS;
        at(&mut m, retry, &mut seen);
        assert_eq!(seen, [PortEvent::Up { port: 1 }]);
        assert!(!cage.borrow()[2].interrupt());
        seen.clear();
        at(&mut m, retry + PIN_PERIOD_NS, &mut seen);
        assert_eq!(seen, [PortEvent::Up { port: 2 }]);
        assert_eq!(m.counters().pulls, 1);
        assert_eq!(m.counters().events, 4 + 4);
        // Quiet again: pins only.
        let t2 = transfers(&cage);
        at(&mut m, retry + 2 * PIN_PERIOD_NS, &mut seen);
        at(&mut m, retry + 3 * PIN_PERIOD_NS, &mut seen);
        assert_eq!(transfers(&cage), t2);
    }
}
