//! # mrc-nic-board: what the NIC image needs from its board, host-testable
//!
//! `no_std`, no unsafe, no allocation; built for the NIC core by the image and for the host by
//! `cargo test` (with `embedded-hal-mock` standing in for the I2C bus, pins and delays).
//!
//! - [`cmis`]: transceiver management over I2C per CMIS 5 (module identity, module state,
//!   per-lane flags); a lost module or link is a [`cmis::PortEvent::Down`].
//! - [`monitor`]: every port's transceiver watched from the main loop: the cage pins at a
//!   fixed period, I2C only when they say something changed.
//! - `cmis_model` (feature `model`): a CMIS module as an I2C target with its cage pins, for
//!   simulators and host tests.
//! - [`leds`]: one link LED per port through `embedded_hal::digital::OutputPin`.
//! - [`flash`]: the QSPI flash controller (erase sectors, program pages) behind a register
//!   trait, for the image's firmware updates and the probe-rs flash algorithm.
//! - [`host_dma`]: the core's host DMA engine (reads host memory by IOVA: update chunks).
//! - [`slots`]: the A/B image slots and the boot record on the flash, as the update service
//!   (`mrc_fw_update::service`) stores them.
//! - [`crash`]: the crash record kept across reset (panic location, reason, last events).
//! - [`logring`]: the byte ring the host reads logs from.
//!
//! The crash record and the log ring are `#[repr(C)]` with fixed layouts (documented on each
//! type) so the host can read them from the `NOINIT` region of `firmware/memory-map.toml`.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cmis;
#[cfg(feature = "model")]
pub mod cmis_model;
pub mod crash;
pub mod flash;
pub mod host_dma;
pub mod leds;
pub mod logring;
pub mod monitor;
pub mod slots;

/// The block at the origin of the `NOINIT` region: crash record, then log ring.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Noinit {
    /// The crash record (offset 0).
    pub crash: crash::CrashRecord,
    /// The log ring (offset `size_of::<CrashRecord>()` = 160).
    pub log: logring::LogRing<{ logring::LOG_RING_BYTES }>,
}

impl Noinit {
    /// A zeroed block (crash record invalid, log ring empty).
    pub const fn new() -> Self {
        Noinit {
            crash: crash::CrashRecord::EMPTY,
            log: logring::LogRing::new(),
        }
    }
}

impl Default for Noinit {
    fn default() -> Self {
        Self::new()
    }
}

const _: () = assert!(core::mem::size_of::<crash::CrashRecord>() == 160);
const _: () = assert!(
    core::mem::size_of::<Noinit>() <= 4096,
    "NOINIT region is 4 KiB"
);
