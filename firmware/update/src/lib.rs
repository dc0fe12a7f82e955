//! # mrc-fw-update: signed NIC core images, A/B slots, boot counting and rollback
//!
//! `no_std`, no allocation, no unsafe; the same code runs on the NIC core (verifying what the
//! host streamed into flash) and on the host (building and signing images, `std` feature).
//!
//! - [`header`]: the 128-byte image header (magic, versions, length, CRC-32, Ed25519 signature).
//! - [`update`]: the host-driven update session and the verifier; every refusal is a typed
//!   [`update::UpdateError`] and the running image stays.
//! - [`slots`]: the A/B boot record: trial boots, confirmation, rollback.
//! - [`reason`]: refusal codes carried in the admin response syndrome, and their words.
//! - [`service`]: the FW_* admin commands over the updater and the boot record, as every
//!   device that takes updates runs them (the NIC image, the simulated device).
//! - [`crc32`]: CRC-32 (IEEE).
//! - [`sign`]: sign an image header (host tools and tests; the core only verifies).
//! - [`test_key`]: **a test-only signing key**, public in this repository.
//! - `pack` (`std`): build and sign an image from an ELF or a raw body; `mrc-fw-pack` is its CLI.
//!
//! ## Example
//! ```
//! # #[cfg(feature = "std")] {
//! use mrc_fw_update::{pack, slots::*, test_key, update::*};
//!
//! let image = pack::pack_image(b"new firmware", &pack::ImageMeta::new(2, 1), &test_key::SEED);
//! let mut flash = RamSlots::<4096>::new();
//! let mut control = BootControl::factory(1, 3);
//! let mut up = Updater::new(Slot::A);
//! let slot = up.begin(&mut control, &mut flash).unwrap();
//! up.write(&mut flash, 0, &image).unwrap();
//! let policy = UpdatePolicy { abi_major: 1, public_key: test_key::PUBLIC_KEY };
//! up.finish(&mut control, &flash, &policy).unwrap();
//! assert_eq!(control.select_boot(), BootDecision::Boot { slot, trial: true });
//! # }
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod crc32;
pub mod header;
#[cfg(feature = "std")]
pub mod pack;
pub mod reason;
pub mod service;
pub mod sign;
pub mod slots;
pub mod test_key;
pub mod update;
