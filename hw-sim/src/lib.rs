//! # mrc-sim: cycle-level NIC + fabric simulator
//!
//! A deterministic discrete-event simulator of MRC NICs on multi-plane fabrics. The NICs run the
//! real MRC datapath stage (`mrc_firmware::datapath::stage`) and firmware engine
//! (`mrc_firmware::engine`), and the simulated device runs the NIC image's admin executor, so the code under test is the code that ships. Time is integer picoseconds, each
//! component keeps its own clock, and every random choice comes from the scenario's seed: the
//! same scenario and seed give the same report, JSON and pcap bit for bit, on one thread or
//! several ([`run::parallel`]).
//!
//! - [`core`]: the discrete-event core (integer time, event queue, clock domains, seeded RNG).
//! - [`fabric`]: multi-plane Clos fabrics of switches and links (SRv6 uSID and ECMP forwarding,
//!   ECN, trimming, PFC, loss, corruption, failures with reconvergence delay), data-oriented
//!   for scale.
//! - [`nic`]: the NIC model: per NIC the MRC datapath stage, its blocks clocked at the RTL's
//!   latency and initiation interval, and as its firmware the NIC image's main loop on timed
//!   cores, behind a PCIe link at TLP granularity, over the fabric (EV-to-route mapping, port
//!   pacing, both halves' timers as events); and a RoCE RC model for the `roce-ecmp` baseline.
//! - [`nic_host`]: the simulated device `mrc-driver` runs against (register map, admin queue,
//!   rings, firmware update), on the NIC model on a Clos fabric.
//! - [`apps`]: applications on the driver: host and connection setup through the driver's
//!   public API, and a scenario's workload run by one application per host.
//! - [`serve`]: the NICs of a [`nic_host::SimHost`] served to drivers in other processes as
//!   vfio-user devices (`mrc-sim serve`), with the virtual-time policy that keeps them
//!   reproducible.
//! - [`workload`], [`scenario`], [`run`]: what the hosts move, TOML scenarios, and the world
//!   that joins fabric and NICs and reports each transport.
//! - [`output`]: the JSON report, SVG plots, pcap capture, progress, the `bench` subcommand.
//!
//! ```
//! use mrc_sim::scenario::ScenarioSpec;
//! use mrc_sim::nic::Transport;
//! let spec = ScenarioSpec::resolve("tiny").unwrap();
//! let report = mrc_sim::run::run(&spec.scenario(Transport::Mrc)).unwrap();
//! assert_eq!(report.completed, report.flows);
//! ```
#![deny(unsafe_code)]

pub mod apps;
pub mod core;
pub mod fabric;
pub mod hil;
pub mod nic;
pub mod nic_host;
pub mod output;
pub mod run;
pub mod scenario;
pub mod serve;
pub mod workload;
