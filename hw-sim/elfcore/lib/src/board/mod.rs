//! The NIC board's devices behind the core's buses, for the levels that run the image's (or a
//! flash loader's) own code against them.
//!
//! - [`flash`]: the QSPI NOR flash and its controller (`mrc_abi::device::flash`).
//! - [`host_dma`]: the core's host DMA engine (`mrc_abi::device::host_dma`).

pub mod flash;
pub mod host_dma;
