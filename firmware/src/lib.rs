//! # mrc-firmware: the MRC datapath reference models and engine
//!
//! `no_std`, no allocation: runs unchanged on the NIC's RISC-V cores, inside the simulator and in
//! tests.
//!
//! - [`datapath`]: per-packet reference models (what the RTL implements).
//! - [`engine`]: the slow path on coalesced events (sans-IO: `handle_*` in, `poll_*` out).
//! - [`admin`]: the admin-command executor (device tables, QP lifecycle onto the engine).
#![no_std]
#![deny(unsafe_code)]

pub mod admin;
pub mod datapath;
pub mod engine;
#[cfg(feature = "testkit")]
pub mod testkit;
