//! # mrc-sim: cycle-level NIC + fabric simulator
#![deny(unsafe_code)]

pub mod core;
pub mod fabric;
