//! A stand-alone driver: the fabric alone in a [`Simulator`], with deliveries collected. Tests,
//! benches and small experiments use it; a full model embeds [`Fabric`] in its own handler and
//! calls [`Fabric::handle`] for events addressed to [`Fabric::component`].

use crate::core::sim::{ComponentId, Event, Handler, ScheduleError, Scheduler, Simulator};
use crate::core::time::Time;

use super::config::{ConfigError, FabricConfig};
use super::engine::{ev, Delivery, Fabric, Fault, InjectError};
use super::packet::Packet;

/// The fabric plus what it delivered.
pub struct Harness {
    /// The fabric.
    pub fabric: Fabric,
    /// Every delivery, in order (when `keep` is on), else only counted.
    pub delivered: Vec<Delivery>,
    /// Keep deliveries in [`Harness::delivered`].
    pub keep: bool,
}

impl Handler for Harness {
    #[inline]
    fn handle(&mut self, _now: Time, ev: Event, s: &mut Scheduler<'_>) {
        self.fabric.handle(ev, s);
        while let Some(d) = self.fabric.poll_delivery() {
            if self.keep {
                self.delivered.push(d);
            }
        }
    }
}

/// Errors of the harness helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HarnessError {
    /// The fabric refused the packet.
    Inject(InjectError),
    /// The time is in the past.
    Schedule(ScheduleError),
}

/// A simulator running only `cfg`'s fabric (component 0), keeping deliveries.
///
/// # Errors
/// [`ConfigError`] for a bad configuration.
pub fn simulator(cfg: FabricConfig) -> Result<Simulator<Harness>, ConfigError> {
    let fabric = Fabric::new(cfg, ComponentId(0))?;
    Ok(Simulator::new(Harness {
        fabric,
        delivered: Vec::new(),
        keep: true,
    }))
}

/// Has host `host` inject `pkt` on `plane` at `at`.
///
/// # Errors
/// [`HarnessError`] when the fabric refuses the packet or `at` is past.
pub fn inject_at(
    sim: &mut Simulator<Harness>,
    at: Time,
    host: u32,
    plane: u32,
    pkt: Packet,
) -> Result<(), HarnessError> {
    let data = sim
        .handler_mut()
        .fabric
        .stage(host, plane, pkt)
        .map_err(HarnessError::Inject)?;
    let me = sim.handler().fabric.component();
    sim.schedule(at, me, ev::INJECT, data)
        .map(|_| ())
        .map_err(HarnessError::Schedule)
}

/// Schedules `fault` at `at`.
///
/// # Errors
/// [`ScheduleError`] when `at` is past.
pub fn fault_at(sim: &mut Simulator<Harness>, at: Time, fault: Fault) -> Result<(), ScheduleError> {
    let me = sim.handler().fabric.component();
    sim.schedule(at, me, ev::FAULT, fault.encode()).map(|_| ())
}
