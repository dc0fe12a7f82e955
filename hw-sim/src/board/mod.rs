//! The NIC board's peripherals as the firmware core sees them through its MMIO window, for the
//! firmware levels that execute the image's own code against devices (the `elf` level, the
//! probe-rs flash algorithm's test).
//!
//! - [`flash`]: the QSPI NOR flash and its controller (`mrc_abi::device::flash`).

pub mod flash;
