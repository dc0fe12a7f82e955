//! # mrc-firmware: the MRC datapath stage and firmware engine
//!
//! `no_std`, no allocation: runs unchanged on the NIC's RISC-V cores, inside the simulator and in
//! tests. No input from the wire or the host panics, every drop is counted, and nothing reads a
//! clock (`now_ns` comes in with every input). The two halves of a NIC, split as the hardware
//! splits them:
//!
//! - [`datapath`]: every per-packet job, as the functional model of the NIC's datapath
//!   hardware ([`datapath::stage::Datapath`]) built from per-block reference models (what the
//!   RTL implements).
//! - [`engine`]: the firmware on coalesced events ([`engine::Engine`]): it never sees a data
//!   packet, only the datapath's reports, and steers the datapath with commands.
//!
//! They meet only through the `mrc_abi::device::csr` queue entries: the datapath's
//! [`datapath::stage::Datapath::poll_events`] feeds the engine's
//! [`engine::Engine::handle_events`], the engine's [`engine::Engine::poll_commands`] feeds the
//! datapath's [`datapath::stage::Datapath::handle_commands`]. Both are sized by one
//! [`capacity::Capacity`] profile.
//!
//! - [`admin`]: the admin-command executor (device tables, QP lifecycle onto the engine).
//! - `testkit` (feature `testkit`): two NICs (stage + engine each) over a seeded lossy
//!   multipath channel, with a checker, for tests, fuzzing, the cost example and the NIC
//!   image's self-test.
//!
//! The crate root denies `unsafe_code`; only `in_place` and `engine::in_place` (building the
//! engine where it lives, in uninitialised memory) allow it, each block with its `// SAFETY:`.
#![no_std]
#![deny(unsafe_code)]

pub mod admin;
pub mod capacity;
pub mod csr_queue;
pub mod datapath;
pub mod engine;
mod in_place;
pub mod ring;
#[cfg(feature = "testkit")]
pub mod testkit;
