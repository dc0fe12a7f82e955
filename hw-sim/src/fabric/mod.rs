//! The fabric: multi-plane two-tier (leaf-spine) and three-tier (fat tree) Clos networks of
//! switches and links, driven by the [`crate::core`] event loop.
//!
//! # What it models
//! - **Switches** forward SRv6 uSID source routes (the active uSID is the output port, then the
//!   carrier shifts; see [`Topology`] for the numbering) and ECMP-hashed packets (destination
//!   routing over the equal-cost ports its routing view holds up, resilient hashing). Per output
//!   port: a data FIFO with a byte limit, RED-style ECN marking (`kmin`/`kmax`, linear integer
//!   ppm, optionally off at the last hop per transport), trimming to a header into a priority
//!   queue instead of dropping (per transport), tail drop otherwise, and optional PFC
//!   (per-ingress XOFF/XON pausing the upstream port).
//! - **Links**: rate (serialization at line rate, store and forward), propagation, random loss
//!   and corruption (ppm), failure and flap at scheduled times ([`Fault`]); a switch can
//!   [blackhole](Fault::Blackhole) while routing still uses it. ECMP routing follows a link
//!   change after [`FabricConfig::reconvergence`] (default 150 ms in
//!   [`FabricConfig::htsim_reference`]); uSID source routes never reroute: a packet whose uSID
//!   port is down is dropped ([`DropCause::UsidPortDown`]).
//! - **NIC ports**: one per plane per host; [`Fabric::inject`] queues a packet there, and
//!   [`Fabric::poll_delivery`] hands out packets that reached a host.
//!
//! # Contract
//! - Conservation: every injected packet is delivered, dropped with a [`DropCause`] (counted at
//!   the port where it happened), or still in flight ([`FabricTotals::conserved`]).
//! - Determinism: all randomness comes from [`FabricConfig::seed`] through per-link and per-port
//!   forked streams; same seed, same events, same counters.
//! - Cost: flat tables indexed by `u32` ids; packets are `Copy` metadata in a slab with a free
//!   list (no allocation per packet once the slab has grown); at most one arrival and one
//!   transmit-complete event per packet per hop; idle ports schedule nothing.
//!
//! ```
//! use mrc_sim::core::Time;
//! use mrc_sim::fabric::{harness, FabricConfig, Packet, Payload, Route, Shape};
//! let cfg = FabricConfig::htsim_reference(Shape::FatTree { k: 4 });
//! let mut sim = harness::simulator(cfg).unwrap();
//! let route = sim.handler().fabric.topology().usid_route(0, 15, 3).unwrap();
//! let pkt = Packet {
//!     src: 0,
//!     dst: 15,
//!     size_bytes: 4150,
//!     payload: Payload::new(4096, 7),
//!     route: Route::Usid(route),
//!     ..Packet::default()
//! };
//! harness::inject_at(&mut sim, Time::ZERO, 0, 0, pkt).unwrap();
//! sim.run_until_idle();
//! let d = sim.handler().delivered[0];
//! assert_eq!((d.host, d.packet.payload.verify()), (15, true));
//! // 6 links of 1 us, 6 serializations of 4150 B at 100 Gb/s (332 ns each).
//! assert_eq!(d.time, Time::from_ns(6 * 1_000 + 6 * 332));
//! ```

mod config;
mod counters;
mod engine;
pub mod harness;
mod packet;
mod route;
pub(crate) mod topology;

pub use config::{
    ClassPolicy, ConfigError, EcnConfig, FabricConfig, PfcConfig, QueueConfig, Shape,
};
pub use counters::{DropCause, FabricTotals, PortCounters};
pub use engine::{ev, Delivery, Fabric, Fault, InjectError};
pub(crate) use engine::{Crossing, Owner, PartMap};
pub use packet::{
    flags, pattern_checksum, Ecn, Packet, Payload, Route, TransportKind, UsidRoute, UsidRouteError,
    DEFAULT_TRIM_BYTES,
};
pub use topology::{
    usid_route_of, LinkId, LinkSpec, PortId, PortOwner, RouteError, SwitchId, SwitchInfo, Topology,
};
