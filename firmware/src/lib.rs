//! # mrc-firmware: the MRC datapath reference models and engine
//!
//! `no_std`, no allocation: runs unchanged on the NIC's RISC-V cores, inside the simulator and in
//! tests.
#![no_std]
#![deny(unsafe_code)]
