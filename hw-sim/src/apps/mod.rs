//! Applications on the driver: host and connection setup through `mrc_driver`'s public API
//! ([`hosts`]), and a scenario's workload run by one application per host on the simulator's
//! NIC model ([`workload`]).

pub mod hosts;
pub mod workload;
