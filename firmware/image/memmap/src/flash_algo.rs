//! The probe-rs flash algorithm's entry in the chip description, read from the algorithm's ELF
//! (`firmware/flash-algo`) the way probe-rs's `target-gen elf` reads one: the `PrgCode`
//! section's bytes become `instructions`, the `Init`, `UnInit`, `EraseSector` and `ProgramPage`
//! symbols' offsets from its start the `pc_*` fields; the flash geometry comes from
//! `mrc_abi::device::flash`, which the algorithm itself is built from.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use mrc_abi::device::flash::{
    ERASED, FLASH_BASE, FLASH_BYTES, PAGE_BYTES, PAGE_PROGRAM_MAX_US, SECTOR_BYTES,
    SECTOR_ERASE_MAX_US,
};
use object::{Object, ObjectSection, ObjectSymbol};

use crate::FlashAlgorithmPlacement;

/// What the chip description needs of the built algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlashAlgorithm {
    /// The `PrgCode` section: code, read-only data and zero-initialised data, linked at the
    /// placement's load address.
    pub instructions: Vec<u8>,
    /// Offset of `Init` from the start of `instructions`.
    pub pc_init: u64,
    /// Offset of `UnInit`.
    pub pc_uninit: u64,
    /// Offset of `ProgramPage`.
    pub pc_program_page: u64,
    /// Offset of `EraseSector`.
    pub pc_erase_sector: u64,
}

impl FlashAlgorithm {
    /// Reads the algorithm from its ELF, checking it was linked where `placement` says.
    ///
    /// # Errors
    /// Not an ELF, no `PrgCode` section, linked elsewhere, an entry point missing or outside
    /// `PrgCode`, or a source path in the code (a panic location: the bytes would then depend
    /// on where the repository is checked out).
    pub fn from_elf(elf: &[u8], placement: &FlashAlgorithmPlacement) -> Result<Self, String> {
        let file = object::File::parse(elf).map_err(|e| format!("flash algorithm ELF: {e}"))?;
        let code = file
            .section_by_name("PrgCode")
            .ok_or("flash algorithm ELF: no PrgCode section")?;
        if code.address() != placement.load_address {
            return Err(format!(
                "flash algorithm linked at {:#x}, the memory map places it at {:#x}",
                code.address(),
                placement.load_address
            ));
        }
        let instructions = code
            .data()
            .map_err(|e| format!("flash algorithm PrgCode: {e}"))?
            .to_vec();
        if instructions.windows(3).any(|w| w == b".rs") {
            return Err(
                "flash algorithm PrgCode holds a source path (a panic location); \
                        its bytes would depend on the checkout"
                    .into(),
            );
        }
        let end = code.address() + instructions.len() as u64;
        let entry = |name: &str| -> Result<u64, String> {
            let sym = file
                .symbols()
                .find(|s| s.name() == Ok(name))
                .ok_or_else(|| format!("flash algorithm ELF: no `{name}` symbol"))?;
            if !(code.address()..end).contains(&sym.address()) {
                return Err(format!("flash algorithm `{name}` lies outside PrgCode"));
            }
            Ok(sym.address() - code.address())
        };
        Ok(FlashAlgorithm {
            pc_init: entry("Init")?,
            pc_uninit: entry("UnInit")?,
            pc_program_page: entry("ProgramPage")?,
            pc_erase_sector: entry("EraseSector")?,
            instructions,
        })
    }

    /// The `flash_algorithms:` list of the chip description (one algorithm, for `core`).
    pub fn yaml(&self, placement: &FlashAlgorithmPlacement, core: &str) -> String {
        let mut s = String::from("flash_algorithms:\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.instructions);
        write!(
            s,
            "- name: {}\n  description: MRC NIC QSPI NOR flash ({} MiB, {} KiB sectors, {}-byte pages)\n  \
             default: true\n  instructions: {b64}\n  load_address: {:#x}\n  pc_init: {:#x}\n  \
             pc_uninit: {:#x}\n  pc_program_page: {:#x}\n  pc_erase_sector: {:#x}\n  \
             data_section_offset: {:#x}\n  flash_properties:\n    address_range:\n      \
             start: {:#x}\n      end: {:#x}\n    page_size: {:#x}\n    erased_byte_value: {:#x}\n    \
             program_page_timeout: {}\n    erase_sector_timeout: {}\n    sectors:\n    - size: {:#x}\n      \
             address: 0x0\n  cores:\n  - {core}\n  stack_size: {}\n",
            placement.name,
            FLASH_BYTES >> 20,
            SECTOR_BYTES >> 10,
            PAGE_BYTES,
            placement.load_address,
            self.pc_init,
            self.pc_uninit,
            self.pc_program_page,
            self.pc_erase_sector,
            self.instructions.len(),
            FLASH_BASE,
            u64::from(FLASH_BASE) + u64::from(FLASH_BYTES),
            PAGE_BYTES,
            ERASED,
            PAGE_PROGRAM_MAX_US.div_ceil(1000),
            SECTOR_ERASE_MAX_US.div_ceil(1000),
            SECTOR_BYTES,
            placement.stack_size,
        )
        .ok();
        s
    }
}

/// Builds `firmware/flash-algo` (release, riscv32imac) and returns its ELF's path. `firmware`
/// is the repository's `firmware/` directory.
///
/// # Errors
/// Cargo could not run or the build failed (its output is in the message).
pub fn build(firmware: &Path) -> Result<PathBuf, String> {
    let dir = firmware.join("flash-algo");
    let target = dir.join("target");
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(&dir)
        .args(["build", "--release", "--quiet"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .map_err(|e| format!("cargo build in {}: {e}", dir.display()))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build in {} failed:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(target.join("riscv32imac-unknown-none-elf/release/mrc-flash-algo"))
}
