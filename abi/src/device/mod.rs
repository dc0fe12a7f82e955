//! The host <-> NIC contract: register blocks, doorbells, descriptors, admin commands, CSR queues.
//!
//! Every structure the host and the device (or the datapath and the firmware cores) share is a
//! `#[repr(C)]` zerocopy type with little-endian fields (PCIe devices and x86/RISC-V hosts are
//! little-endian) whose size and key offsets are asserted at compile time. Next to each raw
//! structure there is a typed value (`SendRequest`, `Completion`, `Event`, `AdminCommand`,
//! `CsrEvent`, ...) with `encode` and a `decode` that checks every field and returns a small
//! `Copy` error naming what was wrong. Decoding never panics on any bytes.
//!
//! | module | what |
//! |---|---|
//! | [`version`] | ABI and wire version numbers and the handshake rule |
//! | [`regs`] | BAR0 register blocks and the discovery walk |
//! | [`doorbell`] | the 4 KiB doorbell page of a queue |
//! | [`wqe`] | send and receive work queue entries |
//! | [`cqe`] | completion queue entries |
//! | [`event`] | asynchronous event records |
//! | [`admin`] | admin queue commands and responses |
//! | [`csr`] | CSR event queues between the datapath and the firmware cores |
//! | [`datapath_timing`] | the datapath RTL blocks' latency and initiation interval, and their clock |
//! | [`flash`] | the NIC's QSPI flash and its controller (image slots, boot record) |
//! | [`host_dma`] | the NIC core's host DMA engine (reads host memory by IOVA: update chunks) |
//! | [`i2c`] | the transceiver management I2C controller and the module pins |

pub mod admin;
pub mod cqe;
pub mod csr;
pub mod datapath_timing;
pub mod doorbell;
pub mod event;
pub mod flash;
pub mod host_dma;
pub mod i2c;
pub mod regs;
pub mod version;
pub mod wqe;

/// Largest queue pair number plus one: QPNs are 24-bit, as in the BTH.
pub const QPN_LIMIT: u32 = 1 << 24;

/// State of one entropy value (EV) of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum EvState {
    /// Usable.
    Good = 0,
    /// Skipped once by the sprayer, then usable again.
    Skip = 1,
    /// Retired after a loss; a probe may bring it back.
    AssumedBad = 2,
    /// Denied by the controller; never used until allowed again.
    Denied = 3,
}

impl EvState {
    /// Every state, in code order.
    pub const ALL: [EvState; 4] = [Self::Good, Self::Skip, Self::AssumedBad, Self::Denied];

    /// The state with code `v`, if any.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Good),
            1 => Some(Self::Skip),
            2 => Some(Self::AssumedBad),
            3 => Some(Self::Denied),
            _ => None,
        }
    }
}

/// How an EV is carried on the wire: the wire module's type, numbered like the MRH field.
pub use crate::wire::EvFormat;

/// True when every byte of `bytes` is zero (reserved areas must be). The bytes are OR-ed
/// without an early exit, so a fixed-size area is checked a word at a time.
#[inline]
pub(crate) fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().fold(0u8, |acc, b| acc | *b) == 0
}
