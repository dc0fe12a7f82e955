//! The self-test's check of the engine's building blocks on the core (timer wheel, an EV
//! table, port events), stepped with `now_ns` like the main loop. QEMU build only: the NIC build's
//! main loop runs the full engine through `mrc_nicloop`.

use mrc_firmware::engine::ev_state::{EvConfig, EvTable};
use mrc_firmware::engine::timer_wheel::{TimerId, TimerWheel};
use mrc_nic_board::cmis::PortEvent;

/// Timers the runtime holds.
pub const TIMERS: usize = 64;
/// EVs of the runtime's table.
pub const EVS: usize = 64;
/// Planes (NIC ports).
pub const PLANES: u8 = 4;
const TICK_NS: u64 = 1_024;
/// Timer id of the housekeeping tick.
const HOUSEKEEPING: TimerId = TimerId(0);
const HOUSEKEEPING_NS: u64 = 100_000;

/// Counters.
#[derive(Clone, Copy, Debug, Default, defmt::Format)]
pub struct RuntimeCounters {
    /// Loop iterations.
    pub iterations: u64,
    /// Timers fired.
    pub timers_fired: u64,
    /// Probes requested by the EV table.
    pub probes: u64,
    /// Port events.
    pub port_events: u64,
    /// Calls the engine blocks refused.
    pub refused: u64,
}

/// The loop's state.
pub struct Runtime {
    timers: TimerWheel<TIMERS>,
    evs: EvTable<EVS>,
    counters: RuntimeCounters,
}

impl Runtime {
    /// Fresh state; the housekeeping timer armed at 0.
    pub fn new() -> Self {
        let mut counters = RuntimeCounters::default();
        let mut timers = match TimerWheel::new(TICK_NS) {
            Ok(t) => t,
            Err(_) => unreachable_config(),
        };
        if timers.arm(HOUSEKEEPING, HOUSEKEEPING_NS).is_err() {
            counters.refused += 1;
        }
        let evs = match EvTable::new(EvConfig::new(EVS as u16, PLANES)) {
            Ok(t) => t,
            Err(_) => unreachable_config(),
        };
        Runtime {
            timers,
            evs,
            counters,
        }
    }

    /// Counters.
    pub fn counters(&self) -> RuntimeCounters {
        self.counters
    }

    /// The EV table.
    pub fn evs(&self) -> &EvTable<EVS> {
        &self.evs
    }

    /// One loop iteration at `now_ns`.
    pub fn step(&mut self, now_ns: u64) {
        self.counters.iterations += 1;
        while let Some(t) = self.timers.poll_expired(now_ns) {
            self.counters.timers_fired += 1;
            if t.id == HOUSEKEEPING {
                self.evs.release_skips();
                let next = t.deadline_ns.saturating_add(HOUSEKEEPING_NS).max(now_ns);
                if self.timers.arm(HOUSEKEEPING, next).is_err() {
                    self.counters.refused += 1;
                }
            }
        }
        while let Some(p) = self.evs.poll_probe(now_ns) {
            // A block check: the probe is counted (the NIC build sends probes through the engine).
            let _ = p;
            self.counters.probes += 1;
        }
        while self.evs.poll_event().is_some() {}
    }

    /// A port changed state: a port down retires every EV of its plane.
    pub fn handle_port_event(&mut self, now_ns: u64, ev: PortEvent) {
        self.counters.port_events += 1;
        let r = match ev {
            PortEvent::Down { port, .. } => self.evs.plane_down(port).map(|_| ()),
            PortEvent::Up { port } => self.evs.plane_up(port, now_ns),
        };
        if r.is_err() {
            self.counters.refused += 1;
        }
    }
}

/// The constant configurations above are valid (checked by the self-test); should one ever
/// not be, stop with a crash record rather than run without timers.
fn unreachable_config() -> ! {
    panic!("invalid constant runtime configuration")
}
