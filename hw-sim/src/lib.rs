//! # mrc-sim: cycle-level NIC + fabric simulator
//!
//! - [`core`]: the deterministic discrete-event core (integer picoseconds, event queue, clock
//!   domains, seeded RNG).
//! - [`fabric`]: multi-plane Clos fabrics of switches and links (SRv6 uSID and ECMP forwarding,
//!   ECN, trimming, PFC, failures with reconvergence delay), data-oriented for scale.
//! - [`nic_host`]: the simulated NIC's host interface (register map, admin queue, rings) that
//!   `mrc-driver` runs against; today a functional loopback between NICs, not yet timed and not
//!   yet running the MRC engine over the fabric.
//!
//! The simulator that joins them (NIC model running the MRC engine, transports, workloads,
//! scenarios, reports) is issue 5.
#![deny(unsafe_code)]

pub mod core;
pub mod fabric;
pub mod nic_host;
