//! The MRC engine: the slow path the firmware cores run on coalesced events.

pub mod retry;
pub mod rng;
pub mod timer_wheel;
pub mod cc;
pub mod fixed;
