//! # mrc-firmware: the MRC datapath reference models and engine
//!
//! `no_std`, no allocation: runs unchanged on the NIC's RISC-V cores, inside the simulator and in
//! tests. Capacities are const generics, no input from the wire or the host panics, every drop
//! is counted, and the engine never reads a clock (`now_ns` comes in with every input).
//!
//! - [`datapath`]: per-packet reference models (what the RTL implements).
//! - [`engine`]: the slow path on coalesced events (sans-IO: `handle_*` in, `poll_*` out).
//! - [`admin`]: the admin-command executor (device tables, QP lifecycle onto the engine).
//! - `testkit` (feature `testkit`): two NICs' engines over a seeded lossy multipath channel,
//!   with a checker, for tests, fuzzing, the cost example and the NIC image's self-test.
//!
//! The crate root denies `unsafe_code`; the one module that allows it builds an engine in place
//! in uninitialised memory (`engine::nic::in_place`, each block with `// SAFETY:`), so the NIC
//! image keeps its engine in `.bss` and never holds an engine-sized value on the stack.
#![no_std]
#![deny(unsafe_code)]

pub mod admin;
pub mod datapath;
pub mod engine;
#[cfg(feature = "testkit")]
pub mod testkit;
