//! # mrc-elfcore: the NIC image on an emulated core
//!
//! The `elf` firmware level of the simulator: the `mrc-nic` ELF (the NIC build of
//! `firmware/image`, riscv32imac) runs on an emulated RISC-V core whose memory map is the
//! NIC's (`firmware/memory-map.toml`, target `nic`: ITCM, DTCM + NOINIT, the CSR window) and
//! whose MMIO the simulated NIC serves:
//!
//! - the timer (`MTIME`, in ns: each main-loop iteration reads the time the simulator runs it
//!   at), the watchdog (an iteration longer than its period at the core's instruction rate
//!   bites), `RESET_CAUSE` and `SW_RESET` ([`device`]); a reset reloads the image into a
//!   fresh CPU with the RAM kept (the `NOINIT` crash record and log ring survive,
//!   [`ElfCore::crash_record`]) and boots it again;
//! - the four queues of the image's `hal`: DP->FW events and FW->DP commands (the mrc-abi CSR
//!   entries the native firmware level passes), admin commands and replies, bridged to any
//!   [`mrc_nicloop::Datapath`] ([`ElfCore::step`], module `bridge`).
//!
//! [`ElfCore::boot`] loads the image and runs its boot to the main loop; each
//! [`ElfCore::step`] (or [`ElfCore::run`]) runs one iteration of the loop and returns the
//! instructions it retired: core cycles are those times a CPI (the simulator's `Cpi`).
//!
//! The CPU is the Unicorn engine's (QEMU's TCG, only its RISC-V target built). Unicorn is
//! GPL-2.0: a binary linking this crate is distributed under the GPL-2.0.
//!
//! The board around the core: the QSPI flash and its controller ([`board::flash`]), the boot
//! ROM that picks a slot by the boot record and checks its image before the core runs it
//! ([`bootrom`], [`ElfCore::boot_image`]), and a debug probe running the chip description's
//! flash algorithm as probe-rs does ([`probe`]).
//!
//! The running image sees the flash too: its read window and its controller in the CSR window
//! ([`device::Device::flash`], kept across core resets), a host DMA engine that reads the
//! host memory the simulator attaches ([`device::Device::host_dma`]: update chunks), and the
//! transceivers: the I2C controller with a CMIS module in each port's cage ([`board::i2c`],
//! [`device::Device::i2c`]), which the simulator pulls, seats again or gives loss of signal.
//! [`ElfCore::power_on`] boots through the boot ROM, at power-on and at every reset. Not
//! served yet: the GPIO LEDs (register accesses in the CSR window that name no register are
//! answered 0 and counted, [`device::DeviceCounters`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod admin_port;
pub mod board;
pub mod bootrom;
mod bridge;
pub mod build;
mod core;
pub mod device;
mod engine;
pub mod image;
pub mod map;
pub mod probe;
mod send;

pub use crate::core::{BootRom, CoreConfig, CrashInfo, ElfCore, RomBoot, Run};
pub use admin_port::{AdminPort, NoReply};
pub use bridge::{BridgeCounters, StepTiming};
pub use device::{Queue, Stop};
pub use image::NicImage;
pub use map::NicMap;

/// Why the core could not be built or run.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ElfError {
    /// The compiled-in memory map lacks what the core needs.
    #[error("NIC memory map: {0}")]
    Map(String),
    /// The ELF is not a NIC image.
    #[error("NIC image: {0}")]
    Elf(String),
    /// The emulation engine refused a setup call.
    #[error("emulator: {0}")]
    Engine(String),
    /// The guest faulted: an access outside its memory or an instruction the core refused.
    #[error("the NIC core faulted at pc {pc:#010x}: {error}")]
    Fault {
        /// The engine's error.
        error: String,
        /// Where.
        pc: u32,
    },
    /// The guest stopped for good (waiting for an interrupt with none enabled).
    #[error("the NIC core parked at pc {pc:#010x}")]
    Parked {
        /// Where.
        pc: u32,
    },
    /// A run hit the instruction limit with no watchdog running.
    #[error("the NIC core hung: {instructions} instructions without reaching the next iteration")]
    Hung {
        /// The limit.
        instructions: u64,
    },
    /// The boot ROM found no image it may boot (its reason).
    #[error("the boot ROM booted nothing: {0}")]
    Boot(String),
    /// The boot after power-on or a reset did not reach the main loop.
    #[error("the NIC core's boot ended in {0:?} before the main loop")]
    BootFailed(Stop),
    /// The guest set a queue up so that the device cannot serve it.
    #[error("queue {queue:?}: {why}")]
    Ring {
        /// Which.
        queue: Queue,
        /// What is wrong.
        why: String,
    },
    /// Guest memory the device reached for is not RAM.
    #[error("guest memory [{addr:#x}, +{len}): {error}")]
    Memory {
        /// Address.
        addr: u32,
        /// Bytes.
        len: usize,
        /// The engine's error.
        error: String,
    },
}
