//! The committed generated files are up to date, and the chip description loads in probe-rs.

use std::path::{Path, PathBuf};

fn image_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn map() -> mrc_memmap::MemoryMap {
    let text = std::fs::read_to_string(image_dir().join("../memory-map.toml")).unwrap();
    mrc_memmap::MemoryMap::parse(&text).unwrap()
}

/// The flash algorithm, built from `firmware/flash-algo` (once per test binary).
fn algorithm() -> &'static mrc_memmap::FlashAlgorithm {
    static ALGO: std::sync::OnceLock<mrc_memmap::FlashAlgorithm> = std::sync::OnceLock::new();
    ALGO.get_or_init(|| {
        let elf = mrc_memmap::flash_algo::build(&image_dir().join("..")).unwrap();
        let bytes = std::fs::read(&elf).unwrap();
        mrc_memmap::FlashAlgorithm::from_elf(&bytes, &map().chip.flash_algorithm).unwrap()
    })
}

#[test]
fn committed_files_are_up_to_date() {
    let update = std::env::var_os("UPDATE_GENERATED").is_some();
    let mut stale = Vec::new();
    for (name, text) in mrc_memmap::committed_files(&map(), algorithm()).unwrap() {
        let path = image_dir().join(name);
        if update {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `just fw-gen` (UPDATE_GENERATED=1 cargo test -p mrc-memmap)"
    );
}

#[test]
fn chip_description_loads_in_probe_rs() {
    let text = std::fs::read_to_string(image_dir().join("mrc-nic.chip.yaml")).unwrap();
    let family: probe_rs_target::ChipFamily = yaml_serde::from_str(&text).unwrap();
    family.validate().unwrap();
    assert_eq!(family.name, "MRC-NIC");
    let chip = &family.variants[0];
    assert_eq!(chip.cores[0].core_type, probe_rs_target::CoreType::Riscv);
    let boot: Vec<_> = chip
        .memory_map
        .iter()
        .filter_map(|r| r.as_ram_region())
        .filter(|r| r.access().boot)
        .collect();
    assert_eq!(boot.len(), 1, "exactly one boot region");
    assert_eq!(boot[0].range.start, 0);
    assert!(chip.memory_map.iter().any(|r| r.as_nvm_region().is_some()));
    // The flash algorithm: listed by the variant, covering every NVM region, entry points
    // inside its code, loaded in an executable RAM region past probe-rs's 8-byte header.
    assert_eq!(chip.flash_algorithms, ["mrc-nic-qspi"]);
    let algo = &family.flash_algorithms[0];
    assert_eq!(algo.name, "mrc-nic-qspi");
    assert_eq!(algo.instructions, algorithm().instructions);
    let len = algo.instructions.len() as u64;
    for pc in [
        algo.pc_init.unwrap(),
        algo.pc_uninit.unwrap(),
        algo.pc_program_page,
        algo.pc_erase_sector,
    ] {
        assert!(pc < len, "entry {pc:#x} outside the code");
    }
    let load = algo.load_address.unwrap();
    let ram = chip
        .memory_map
        .iter()
        .filter_map(|r| r.as_ram_region())
        .find(|r| r.range.contains(&(load - 8)) && r.range.contains(&(load + len)))
        .expect("the algorithm's load address lies in one RAM region");
    assert!(ram.access().execute);
    for nvm in chip.memory_map.iter().filter_map(|r| r.as_nvm_region()) {
        let a = &algo.flash_properties.address_range;
        assert!(
            a.start <= nvm.range.start && nvm.range.end <= a.end,
            "{:?} not covered",
            nvm.name
        );
    }
}

#[test]
fn the_algorithm_is_refused_when_linked_elsewhere_or_holding_a_path() {
    let map = map();
    let elf =
        std::fs::read(mrc_memmap::flash_algo::build(&image_dir().join("..")).unwrap()).unwrap();
    let mut moved = mrc_memmap::FlashAlgorithmPlacement {
        ..map.chip.flash_algorithm.clone()
    };
    moved.load_address += 4;
    let e = mrc_memmap::FlashAlgorithm::from_elf(&elf, &moved).unwrap_err();
    assert!(e.contains("linked at"), "{e}");
    assert!(
        mrc_memmap::FlashAlgorithm::from_elf(b"not an elf", &map.chip.flash_algorithm).is_err()
    );
    // A source path planted in the code is caught.
    let code = &algorithm().instructions;
    let at = elf
        .windows(code.len())
        .position(|w| w == &code[..])
        .unwrap();
    let mut planted = elf.clone();
    planted[at + 16..at + 27].copy_from_slice(b"src/main.rs");
    let e = mrc_memmap::FlashAlgorithm::from_elf(&planted, &map.chip.flash_algorithm).unwrap_err();
    assert!(e.contains("source path"), "{e}");
}

#[test]
fn a_broken_description_is_caught() {
    // The check above is only worth something if probe-rs refuses bad files.
    let text = std::fs::read_to_string(image_dir().join("mrc-nic.chip.yaml")).unwrap();
    let broken = text.replace("type: riscv", "type: not-a-core");
    assert!(yaml_serde::from_str::<probe_rs_target::ChipFamily>(&broken).is_err());
    let no_core = text.replace("core_access_options: !Riscv", "core_access_options: !Arm");
    let family: Result<probe_rs_target::ChipFamily, _> = yaml_serde::from_str(&no_core);
    assert!(family.map(|f| f.validate().is_err()).unwrap_or(true));
}

#[test]
fn inconsistent_maps_are_refused() {
    let text = std::fs::read_to_string(image_dir().join("../memory-map.toml")).unwrap();
    let overlap = text.replace("origin = 0x1001_F000", "origin = 0x1001_E000");
    assert_ne!(overlap, text, "the test edits the NOINIT origin");
    assert!(mrc_memmap::MemoryMap::parse(&overlap)
        .unwrap_err()
        .contains("overlap"));
    let bad_alias = text.replacen("text = \"ITCM\"", "text = \"CSR\"", 1);
    assert!(mrc_memmap::MemoryMap::parse(&bad_alias)
        .unwrap_err()
        .contains("not RAM"));
}

#[test]
fn hal_consts_name_the_registers() {
    let nic = mrc_memmap::rust_consts(&map(), "nic").unwrap();
    assert!(
        nic.contains("pub const WDT_KICK: usize = 0x40000010;"),
        "{nic}"
    );
    let qemu = mrc_memmap::rust_consts(&map(), "qemu").unwrap();
    assert!(
        qemu.contains("pub const FINISHER: usize = 0x100000;"),
        "{qemu}"
    );
    assert!(qemu.contains("pub const MTIME_HZ: u64 = 10000000;"));
}

#[test]
fn flash_regions_lie_in_the_flash_device() {
    use mrc_abi::device::flash::{FLASH_BASE, FLASH_BYTES, SECTOR_BYTES};
    let nic = map();
    let nic = nic.get("nic").unwrap();
    let nvm: Vec<_> = nic
        .region
        .iter()
        .filter(|r| r.kind == mrc_memmap::Kind::Nvm)
        .collect();
    assert!(!nvm.is_empty());
    for r in nvm {
        let (start, end) = (
            u64::from(FLASH_BASE),
            u64::from(FLASH_BASE) + u64::from(FLASH_BYTES),
        );
        assert!(
            r.origin >= start && r.origin + r.length <= end,
            "{} outside the flash",
            r.name
        );
        assert_eq!(
            r.origin % u64::from(SECTOR_BYTES),
            0,
            "{} not sector-aligned",
            r.name
        );
        assert_eq!(
            r.length % u64::from(SECTOR_BYTES),
            0,
            "{} not whole sectors",
            r.name
        );
    }
    let ctrl = &nic.registers["FLASH_CTRL_BASE"];
    let csr = nic.region.iter().find(|r| r.name == ctrl.region).unwrap();
    assert!(
        ctrl.offset + u64::from(mrc_abi::device::flash::reg::BLOCK_BYTES) <= csr.length,
        "the flash controller's block must fit its region"
    );
    let next = nic
        .registers
        .values()
        .filter(|r| r.region == ctrl.region && r.offset > ctrl.offset)
        .map(|r| r.offset)
        .min()
        .unwrap();
    assert!(
        ctrl.offset + u64::from(mrc_abi::device::flash::reg::BLOCK_BYTES) <= next,
        "the flash controller's block overlaps the next register"
    );
}
