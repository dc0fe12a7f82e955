//! The deterministic discrete-event core: picosecond time, event queue, clock domains, seeded
//! randomness and the event loop.
//!
//! # Time units
//! All simulated time is an integer number of **picoseconds** ([`Time`], [`Duration`], `u64`).
//! Clock domains ([`ClockDomain`]) turn cycle counts into picoseconds exactly (rational period,
//! no drift), and link serialization ([`serialization_time`]) rounds up to the next picosecond.
//! Floating point never takes part in a decision; it appears only in reports.
//!
//! # Determinism contract
//! Same seed, same events, same order, bit for bit:
//! - the [`Simulator`] orders events by `(time, key)`, the key naming the source that
//!   scheduled the event and that source's own counter ([`sim::event_key`]; with the default
//!   single source, events at the same picosecond are handled first in, first out); the
//!   [`EventQueue`]'s internal layout (which re-tunes itself) never changes that order;
//! - every random decision draws from a [`Rng`] derived from the run's seed ([`Rng::fork`] gives
//!   each component its own stream, independent of how many other streams exist or in which
//!   order they were made), and the generator is specified bit for bit (xoshiro256**, seeded
//!   through splitmix64), so it is the same on every platform;
//! - the [`Simulator`] runs one event at a time, hands the handler `now`, and refuses events in
//!   the past (an error and a counter, never a silent reorder); no wall clock, thread, hash-map
//!   iteration order or address is consulted.
//!
//! [`SimStats::trace_hash`] folds every processed event into a 64-bit hash so two runs can be
//! compared cheaply.
//!
//! # Components never tick idle cycles
//! A component that has nothing to do schedules no event. When it has work, it asks its
//! [`ClockDomain`] for the next edge ([`ClockDomain::next_edge`]) and schedules its wake-up
//! there, plus the cycles its work costs ([`ClockDomain::cycles_to_time`]).

pub mod clock;
pub mod queue;
pub mod rng;
pub mod sim;
pub mod sys;
pub mod time;

pub use clock::ClockDomain;
pub use queue::{EventQueue, QueueStats, Scheduled};
pub use rng::Rng;
pub use sim::{
    event_key, ComponentId, Event, Handler, Msg, RunOutcome, ScheduleError, Scheduler, SimStats,
    Simulator,
};
pub use time::{serialization_time, Duration, Time};
