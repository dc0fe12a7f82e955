//! Link LEDs: one `OutputPin` per port, on while the port's link is up.

use embedded_hal::digital::OutputPin;

/// LEDs for `P` ports.
pub struct LinkLeds<Pin, const P: usize> {
    pins: [Pin; P],
    failures: u32,
}

impl<Pin: OutputPin, const P: usize> LinkLeds<Pin, P> {
    /// All LEDs off.
    pub fn new(mut pins: [Pin; P]) -> Self {
        let mut failures = 0;
        for p in &mut pins {
            if p.set_low().is_err() {
                failures += 1;
            }
        }
        LinkLeds { pins, failures }
    }

    /// Show `up` on the LED of `port` (a port out of range is ignored and counted).
    pub fn set(&mut self, port: usize, up: bool) {
        let ok = match self.pins.get_mut(port) {
            Some(p) if up => p.set_high().is_ok(),
            Some(p) => p.set_low().is_ok(),
            None => false,
        };
        if !ok {
            self.failures = self.failures.saturating_add(1);
        }
    }

    /// Pin writes that failed or named no LED.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The pins back.
    pub fn release(self) -> [Pin; P] {
        self.pins
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use embedded_hal_mock::eh1::digital::{Mock, State, Transaction};

    #[test]
    fn leds_follow_link_state() {
        let p0 = Mock::new(&[
            Transaction::set(State::Low),
            Transaction::set(State::High),
            Transaction::set(State::Low),
        ]);
        let p1 = Mock::new(&[Transaction::set(State::Low)]);
        let mut leds = LinkLeds::new([p0, p1]);
        leds.set(0, true);
        leds.set(0, false);
        leds.set(5, true);
        assert_eq!(leds.failures(), 1);
        for mut p in leds.release() {
            p.done();
        }
    }
}
