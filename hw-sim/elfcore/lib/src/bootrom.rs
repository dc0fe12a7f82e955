//! The NIC's boot ROM: what runs at reset before the image, modelled natively.
//!
//! At every reset it reads the boot record from its flash sector (`FLASH_BOOT_CONTROL`; a
//! blank or torn record is replaced by the factory record: slot A confirmed), lets the record
//! pick the slot (`mrc_fw_update::slots::BootControl::select_boot`: a trial image boots at
//! most its allowance of times unconfirmed, then the record rolls back to the confirmed slot),
//! writes the record back through the flash controller before anything runs, checks the
//! chosen slot's image as the update path does (`mrc_fw_update::update::verify_slot`: header,
//! ABI major, length, CRC-32, Ed25519 signature) and copies its body to where it is linked.
//! An image that fails the check is never run: its slot is marked invalid and the record
//! chooses again (the other slot, if it holds a confirmed or trial image).

use mrc_abi::device::flash::FLASH_BASE;
use mrc_fw_update::header::{ImageHeader, HEADER_LEN};
use mrc_fw_update::slots::{BootControl, BootDecision, Slot, CONTROL_LEN};
use mrc_fw_update::update::{verify_slot, SlotStorage, UpdateError, UpdatePolicy};
use mrc_nic_board::flash::Flash;

use crate::board::flash::{ControllerPort, FlashDevice, FlashSlots};
use crate::image::NicImage;
use crate::map::NicMap;

/// What the boot ROM started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Booted {
    /// The slot it booted.
    pub slot: Slot,
    /// Whether the image runs on trial (not yet confirmed).
    pub trial: bool,
    /// Its version.
    pub version: u32,
    /// The image as copied into the core's memories.
    pub image: NicImage,
    /// The record as written back.
    pub record: BootControl,
}

/// Why nothing could be booted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BootError {
    /// Neither slot holds an image the record allows.
    #[error("no bootable image (the boot record allows none)")]
    NoBootableImage,
    /// The last slot the record chose held an image that failed the check (it is now
    /// marked invalid), and no other slot is bootable.
    #[error("slot {slot:?}: {error:?}")]
    BadImage {
        /// The last slot tried.
        slot: Slot,
        /// Why it was refused.
        error: UpdateError,
    },
    /// The last slot the record chose held a checked image that does not fit the core's
    /// memories (it is now marked invalid), and no other slot is bootable.
    #[error("slot {slot:?}: {error}")]
    Layout {
        /// The last slot tried.
        slot: Slot,
        /// Where the image does not fit.
        error: crate::ElfError,
    },
    /// The boot record could not be written back.
    #[error("writing the boot record: {0:?}")]
    Record(mrc_nic_board::flash::Error),
}

/// One reset's boot: the record read, updated and written back, the slot's image checked and
/// laid out. `factory_version` and `max_trial_boots` make the record a blank flash gets.
///
/// # Errors
/// [`BootError`]; the record is written back before an image is checked, so boot counting
/// holds even when the core never starts.
pub fn boot(
    flash: &mut FlashDevice,
    map: &NicMap,
    policy: &UpdatePolicy,
    factory_version: u32,
    max_trial_boots: u8,
) -> Result<Booted, BootError> {
    let record_at = map.boot_control.origin - FLASH_BASE;
    let mut record = flash
        .read(record_at, CONTROL_LEN)
        .and_then(|b| BootControl::from_bytes(b.try_into().ok()?).ok())
        .unwrap_or_else(|| BootControl::factory(factory_version, max_trial_boots));
    // The refusal of the last slot tried, told when nothing else can boot.
    let mut refused: Option<BootError> = None;
    loop {
        let (slot, trial) = match record.select_boot() {
            BootDecision::Boot { slot, trial } => (slot, trial),
            BootDecision::RolledBack { to, .. } => (to, false),
            BootDecision::NoBootableImage => {
                write_record(flash, record_at, &record)?;
                return Err(refused.unwrap_or(BootError::NoBootableImage));
            }
        };
        write_record(flash, record_at, &record)?;
        match load(flash, map, slot, policy) {
            Ok(image) => {
                return Ok(Booted {
                    slot,
                    trial,
                    version: record.slot(slot).image_version,
                    image,
                    record,
                })
            }
            Err(why) => {
                // Never run an image that fails the check; the record stops choosing it.
                record.mark_invalid(slot);
                refused = Some(why);
            }
        }
    }
}

/// The checked image of `slot`, laid out where it is linked; a refusal names the slot.
fn load(
    flash: &mut FlashDevice,
    map: &NicMap,
    slot: Slot,
    policy: &UpdatePolicy,
) -> Result<NicImage, BootError> {
    let bad = |error| BootError::BadImage { slot, error };
    let slots = FlashSlots::new(flash, map);
    let mut hbuf = [0u8; HEADER_LEN];
    slots.read(slot, 0, &mut hbuf).map_err(|e| bad(e.into()))?;
    let len = ImageHeader::parse(&hbuf)
        .map_err(|e| bad(UpdateError::Header(e)))?
        .image_len();
    let header = verify_slot(&slots, slot, len.min(slots.capacity()), policy).map_err(bad)?;
    let mut body = vec![0u8; header.body_len as usize];
    slots
        .read(slot, HEADER_LEN as u32, &mut body)
        .map_err(|e| bad(e.into()))?;
    NicImage::flat(header.load_addr, header.entry, &body, map)
        .map_err(|error| BootError::Layout { slot, error })
}

fn write_record(flash: &mut FlashDevice, at: u32, record: &BootControl) -> Result<(), BootError> {
    let mut f = Flash::new(ControllerPort {
        dev: flash,
        now_ns: 0,
        step_ns: 1,
    });
    f.rewrite(at, &record.to_bytes()).map_err(BootError::Record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::flash::FlashTiming;
    use mrc_fw_update::pack::{pack_image, ImageMeta};
    use mrc_fw_update::test_key;
    use mrc_fw_update::update::Updater;

    const FACTORY: u32 = 0x0100_0000;

    fn policy() -> UpdatePolicy {
        UpdatePolicy {
            abi_major: 1,
            public_key: test_key::PUBLIC_KEY,
        }
    }

    /// A small signed image linked at the ITCM's origin.
    fn image(version: u32) -> Vec<u8> {
        let body: Vec<u8> = (0..3000u32).map(|i| (i * 13 + version) as u8).collect();
        pack_image(&body, &ImageMeta::new(version, 1), &test_key::SEED)
    }

    fn flash_with_a(version: u32) -> FlashDevice {
        let map = NicMap::nic().unwrap();
        let mut flash = FlashDevice::new(FlashTiming::INSTANT);
        let mut slots = FlashSlots::new(&mut flash, &map);
        let img = image(version);
        slots.write(Slot::A, 0, &img).unwrap();
        flash
    }

    #[test]
    fn a_blank_flash_has_nothing_to_boot_and_says_why() {
        let map = NicMap::nic().unwrap();
        let mut flash = FlashDevice::new(FlashTiming::INSTANT);
        let e = boot(&mut flash, &map, &policy(), FACTORY, 2).unwrap_err();
        assert!(
            matches!(
                e,
                BootError::BadImage {
                    slot: Slot::A,
                    error: UpdateError::Header(_)
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn the_factory_slot_boots_and_the_record_is_written_back() {
        let map = NicMap::nic().unwrap();
        let mut flash = flash_with_a(FACTORY);
        let b = boot(&mut flash, &map, &policy(), FACTORY, 2).unwrap();
        assert_eq!((b.slot, b.trial, b.version), (Slot::A, false, FACTORY));
        assert_eq!(b.image.segments[0].addr, map.itcm.origin);
        assert_eq!(b.image.segments[0].bytes, image(FACTORY)[HEADER_LEN..]);
        let at = map.boot_control.origin - FLASH_BASE;
        let stored = flash.read(at, CONTROL_LEN).unwrap().try_into().unwrap();
        assert_eq!(BootControl::from_bytes(stored).unwrap(), b.record);
    }

    #[test]
    fn a_trial_image_boots_its_allowance_then_rolls_back() {
        let map = NicMap::nic().unwrap();
        let mut flash = flash_with_a(FACTORY);
        // Boot once (writes the factory record), then stage version 2 in slot B as the update
        // path does: the record read from flash, the image written and checked, put on trial.
        boot(&mut flash, &map, &policy(), FACTORY, 2).unwrap();
        let at = map.boot_control.origin - FLASH_BASE;
        let bytes = flash.read(at, CONTROL_LEN).unwrap().try_into().unwrap();
        let mut control = BootControl::from_bytes(bytes).unwrap();
        {
            let mut slots = FlashSlots::new(&mut flash, &map);
            let mut up = Updater::new(Slot::A);
            assert_eq!(up.begin(&mut control, &mut slots).unwrap(), Slot::B);
            up.write(&mut slots, 0, &image(0x0200_0000)).unwrap();
            up.finish(&mut control, &slots, &policy()).unwrap();
        }
        write_record(&mut flash, at, &control).unwrap();
        let boots: Vec<(Slot, bool)> = (0..3)
            .map(|_| {
                let b = boot(&mut flash, &map, &policy(), FACTORY, 2).unwrap();
                (b.slot, b.trial)
            })
            .collect();
        assert_eq!(boots, [(Slot::B, true), (Slot::B, true), (Slot::A, false)]);
    }
}
