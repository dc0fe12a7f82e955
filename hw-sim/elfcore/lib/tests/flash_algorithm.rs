//! The chip description's probe-rs flash algorithm (`firmware/flash-algo`, listed in
//! `firmware/image/mrc-nic.chip.yaml`) executed on the emulated core against the board's flash
//! as probe-rs executes it: it writes the NIC image, packed into a signed slot image as `just
//! flash` packs it, into slot A; the boot ROM then checks that slot and the core boots the
//! image it wrote to the main loop, exactly as the ELF boots. Its refusals come back as codes
//! naming their cause, and a slot image spoiled after flashing is refused at boot.
//!
//! Builds the NIC image (`tests/build`): without the riscv32imac target it prints
//! `SKIPPED: ...` and passes, unless `CI` is set.

mod build;

use std::path::Path;

use mrc_abi::device::flash::{ErrCause, FLASH_BASE, PAGE_BYTES, SECTOR_BYTES};
use mrc_elfcore::board::flash::{FlashDevice, FlashTiming};
use mrc_elfcore::bootrom::{self, BootError};
use mrc_elfcore::probe::{FlashAlgorithm, FlashLoader};
use mrc_elfcore::{CoreConfig, ElfCore, NicMap};
use mrc_fw_update::pack::{flatten_elf, pack_image, ImageMeta};
use mrc_fw_update::slots::Slot;
use mrc_fw_update::test_key;
use mrc_fw_update::update::{UpdateError, UpdatePolicy};
use mrc_nic_board::flash::Error;

/// A fast part: commands still keep BUSY long enough that the algorithm polls for them.
const TIMING: FlashTiming = FlashTiming {
    erase_sector_ns: 200_000,
    program_page_ns: 20_000,
};

/// The algorithm as the committed chip description lists it, read with probe-rs's own types.
fn chip_algorithm() -> FlashAlgorithm {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../firmware/image/mrc-nic.chip.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let family: probe_rs_target::ChipFamily = yaml_serde::from_str(&text).unwrap();
    let name = &family.variants[0].flash_algorithms[0];
    let raw = family
        .flash_algorithms
        .iter()
        .find(|a| &a.name == name)
        .expect("the variant's algorithm is described");
    let p = &raw.flash_properties;
    FlashAlgorithm {
        instructions: raw.instructions.clone(),
        load_address: raw.load_address.expect("linked at a fixed address") as u32,
        pc_init: raw.pc_init.unwrap() as u32,
        pc_uninit: raw.pc_uninit.unwrap() as u32,
        pc_program_page: raw.pc_program_page as u32,
        pc_erase_sector: raw.pc_erase_sector as u32,
        stack_size: raw.stack_size.unwrap(),
        page_size: p.page_size,
        sector_size: p.sectors[0].size as u32,
    }
}

/// The NIC image as `just flash` packs it: flattened, signed with the test key.
fn slot_image(elf: &[u8]) -> Vec<u8> {
    let (load, entry, body) = flatten_elf(elf).unwrap();
    let mut meta = ImageMeta::new(0x0200_0000, 1);
    meta.load_addr = load;
    meta.entry = entry;
    pack_image(&body, &meta, &test_key::SEED)
}

fn policy() -> UpdatePolicy {
    UpdatePolicy {
        abi_major: 1,
        public_key: test_key::PUBLIC_KEY,
    }
}

#[test]
fn the_flash_algorithm_writes_the_image_and_the_core_boots_it() {
    let Some(elf) = build::nic_image("the_flash_algorithm_writes_the_image") else {
        return;
    };
    let map = NicMap::nic().unwrap();
    let slot_image = slot_image(&elf);
    let algo = chip_algorithm();
    assert_eq!(algo.page_size, PAGE_BYTES);
    assert_eq!(algo.sector_size, SECTOR_BYTES);

    let mut probe = FlashLoader::new(algo, FlashDevice::new(TIMING), &map).unwrap();
    let slot_a = map.slot_a.origin;
    probe.erase(slot_a, slot_image.len() as u32).unwrap();
    probe.program(slot_a, &slot_image).unwrap();
    let off = slot_a - FLASH_BASE;
    assert_eq!(
        probe.flash().read(off, slot_image.len()).unwrap(),
        &slot_image[..]
    );
    let c = probe.flash().counters();
    let sectors = (slot_image.len() as u64).div_ceil(u64::from(SECTOR_BYTES));
    let pages = (slot_image.len() as u64).div_ceil(u64::from(PAGE_BYTES));
    assert_eq!((c.erases, c.programs), (sectors, pages));
    assert_eq!((c.refused, c.unerased_programs, c.bad_accesses), (0, 0, 0));
    assert_eq!(probe.stray_accesses(), 0);
    // The algorithm waited for every command (the device's time is its register accesses).
    let busy = sectors * TIMING.erase_sector_ns + pages * TIMING.program_page_ns;
    assert!(probe.device_time_ns() >= busy);

    // The algorithm's refusals come back as the driver's codes.
    let e = probe.erase_sector_raw(FLASH_BASE + 100).unwrap();
    assert_eq!(e, Error::Refused(ErrCause::Unaligned).code());
    let e = probe.erase_sector_raw(FLASH_BASE - SECTOR_BYTES).unwrap();
    assert_eq!(e, Error::Refused(ErrCause::OutOfRange).code());

    // Reset: the boot ROM checks slot A and lays the image out; the core boots it.
    let mut flash = probe.into_flash();
    let booted = bootrom::boot(&mut flash, &map, &policy(), 0x0100_0000, 2).unwrap();
    assert_eq!((booted.slot, booted.trial), (Slot::A, false));
    let from_flash = ElfCore::boot_image(booted.image, CoreConfig::DEFAULT).unwrap();
    let from_elf = ElfCore::boot(&elf, CoreConfig::DEFAULT).unwrap();
    assert!(from_flash.boot_instructions() > 0);
    assert_eq!(from_flash.boot_instructions(), from_elf.boot_instructions());
    assert_eq!(from_flash.pc(), from_elf.pc());
}

#[test]
fn a_slot_image_spoiled_after_flashing_is_refused_at_boot() {
    let Some(elf) = build::nic_image("a_slot_image_spoiled_after_flashing") else {
        return;
    };
    let map = NicMap::nic().unwrap();
    let slot_image = slot_image(&elf);
    let mut probe = FlashLoader::new(chip_algorithm(), FlashDevice::new(TIMING), &map).unwrap();
    probe
        .erase(map.slot_a.origin, slot_image.len() as u32)
        .unwrap();
    probe.program(map.slot_a.origin, &slot_image).unwrap();
    // One body byte cleared by a later program (NOR programs only clear bits).
    let at = map.slot_a.origin + 128 + 4096;
    let page = at - at % PAGE_BYTES;
    let mut spoiled = probe
        .flash()
        .read(page - FLASH_BASE, PAGE_BYTES as usize)
        .unwrap()
        .to_vec();
    spoiled[(at - page) as usize] = 0;
    probe.program(page, &spoiled).unwrap();
    let mut flash = probe.into_flash();
    let e = bootrom::boot(&mut flash, &map, &policy(), 0x0100_0000, 2).unwrap_err();
    // Slot A refused for its CRC, slot B never written: nothing boots.
    assert!(
        matches!(
            e,
            BootError::BadImage {
                slot: Slot::A,
                error: UpdateError::BadCrc { .. }
            }
        ),
        "{e:?}"
    );
    let again = bootrom::boot(&mut flash, &map, &policy(), 0x0100_0000, 2).unwrap_err();
    assert_eq!(
        again,
        BootError::NoBootableImage,
        "slot A stays marked invalid"
    );
}
