//! # mrc-sim: cycle-level NIC + fabric simulator
//!
//! - [`core`]: the deterministic discrete-event core (integer picoseconds, event queue, clock
//!   domains, seeded RNG).
//! - [`fabric`]: multi-plane Clos fabrics of switches and links (SRv6 uSID and ECMP forwarding,
//!   ECN, trimming, PFC, failures with reconvergence delay), data-oriented for scale.
//! - [`nic_host`]: the simulated NIC's host interface (register map, admin queue, rings) that
//!   `mrc-driver` runs against: a functional loopback between NICs, or (fabric mode) the MRC
//!   datapath stage and firmware engine on every NIC over seeded lossy channels; not yet timed.
//!
//! - [`nic`]: the NIC model running the real MRC datapath stage
//!   (`mrc_firmware::datapath::stage`) and firmware engine (`mrc_firmware::engine`) over the
//!   fabric: EV-to-route mapping, line-rate pulling, both halves' timers as events.
//! - [`run`]: scenarios (permutation workload, a T0-T1 link failure), the world that joins
//!   fabric and NICs, and the per-transport report.
//!
//! Issue 5 is the whole simulator; what is here is its first increment (see `run`'s docs).
#![deny(unsafe_code)]

pub mod core;
pub mod fabric;
pub mod nic;
pub mod nic_host;
pub mod output;
pub mod run;
pub mod scenario;
pub mod workload;
