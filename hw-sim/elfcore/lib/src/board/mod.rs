//! The NIC board's devices behind the core's buses, for the levels that run the image's (or a
//! flash loader's) own code against them.
//!
//! - [`flash`]: the QSPI NOR flash and its controller (`mrc_abi::device::flash`).
//! - [`host_dma`]: the core's host DMA engine (`mrc_abi::device::host_dma`).
//! - [`i2c`]: the transceiver management I2C controller and a CMIS module in each port's
//!   cage (`mrc_abi::device::i2c`).

pub mod flash;
pub mod host_dma;
pub mod i2c;
