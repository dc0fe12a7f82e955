//! # mrc-memmap: one memory map, every artifact generated from it
//!
//! Reads `firmware/memory-map.toml` and renders, for each target (`nic`, `qemu`):
//! - [`linker_script`]: the `memory.x` riscv-rt includes (`MEMORY`, the `REGION_*` aliases and a
//!   `.noinit` section at the fixed `NOINIT` origin, kept across reset);
//! - [`rust_consts`]: the region origins, register addresses and timer rate as Rust consts for
//!   the image's `hal` (included from `OUT_DIR`);
//! - [`chip_yaml`]: the probe-rs chip description (`MRC-NIC`) of the `nic` target, with the
//!   flash algorithm ([`flash_algo`]) built from `firmware/flash-algo`.
//!
//! The image's `build.rs` calls these; the committed copies (`memory-nic.x`, `memory-qemu.x`,
//! `mrc-nic.chip.yaml`) are checked against them by this crate's tests, which rewrite them when
//! `UPDATE_GENERATED=1` is set.
//!
//! ```
//! let map = mrc_memmap::MemoryMap::parse(include_str!("../../../memory-map.toml")).unwrap();
//! let x = mrc_memmap::linker_script(&map, "qemu").unwrap();
//! assert!(x.contains("RAM (rwx) : ORIGIN = 0x80000000"));
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

pub mod flash_algo;
pub use flash_algo::FlashAlgorithm;

/// The whole map.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryMap {
    /// Chip identity for probe-rs.
    pub chip: Chip,
    /// Targets by name.
    pub target: BTreeMap<String, Target>,
}

/// probe-rs chip identity.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chip {
    /// Chip (and family) name, `--chip` on the probe-rs command line.
    pub name: String,
    /// Core name.
    pub core: String,
    /// Hart id of the core.
    pub hart_id: u32,
    /// JTAG TAP index.
    pub jtag_tap: u32,
    /// The probe-rs flash algorithm for the NIC's flash (`firmware/flash-algo`).
    pub flash_algorithm: FlashAlgorithmPlacement,
}

/// Where probe-rs runs the flash algorithm.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashAlgorithmPlacement {
    /// Its name in the chip description.
    pub name: String,
    /// Where its code is linked and loaded (probe-rs puts its 8-byte breakpoint header just
    /// below, so this must lie at least 8 bytes into an executable RAM region).
    pub load_address: u64,
    /// Bytes of stack probe-rs gives it.
    pub stack_size: u32,
}

/// One build target (NIC core or QEMU).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Region for `.text`.
    pub text: String,
    /// Region for `.rodata`.
    pub rodata: String,
    /// Region for `.data`.
    pub data: String,
    /// Region for `.bss`.
    pub bss: String,
    /// Region for the heap (unused: no allocator).
    pub heap: String,
    /// Region for the stack.
    pub stack: String,
    /// Rate of the `MTIME` counter.
    pub mtime_hz: u64,
    /// Regions.
    pub region: Vec<Region>,
    /// Registers by name.
    #[serde(default)]
    pub registers: BTreeMap<String, Register>,
}

/// What a region is.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// RAM or TCM: a linker region and a probe-rs RAM region.
    Ram,
    /// RAM kept across reset, holding only `.noinit`.
    Noinit,
    /// Non-volatile memory (image slots, boot record).
    Nvm,
    /// MMIO.
    Device,
}

/// A memory region.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    /// Name (linker region name, probe-rs region name).
    pub name: String,
    /// Kind.
    pub kind: Kind,
    /// Start address.
    pub origin: u64,
    /// Length in bytes.
    pub length: u64,
    /// The core starts executing here.
    #[serde(default)]
    pub boot: bool,
}

/// A register: a region and an offset in it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The region.
    pub region: String,
    /// Offset from its origin.
    pub offset: u64,
}

impl MemoryMap {
    /// Parse and check the map.
    ///
    /// # Errors
    /// The TOML error, or the first inconsistency found (unknown region, overlap, a register
    /// outside its region, a section alias not naming a RAM region).
    pub fn parse(text: &str) -> Result<Self, String> {
        let map: MemoryMap = toml::from_str(text).map_err(|e| e.to_string())?;
        for (name, t) in &map.target {
            t.check().map_err(|e| format!("target {name}: {e}"))?;
        }
        Ok(map)
    }

    /// The map for a build script whose package sits next to `firmware/memory-map.toml`'s
    /// directory (`firmware/image`, `firmware/flash-algo`): read from `../memory-map.toml`,
    /// with cargo told to rerun the script when the map changes.
    ///
    /// # Panics
    /// The map cannot be read or parsed (the build fails with the file and the reason).
    pub fn for_build_script() -> Self {
        let path = "../memory-map.toml";
        println!("cargo:rerun-if-changed={path}");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        Self::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The target `name`.
    ///
    /// # Errors
    /// When there is none.
    pub fn get(&self, name: &str) -> Result<&Target, String> {
        self.target
            .get(name)
            .ok_or_else(|| format!("no target {name} in the memory map"))
    }
}

impl Target {
    fn region(&self, name: &str) -> Result<&Region, String> {
        self.region
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| format!("unknown region {name}"))
    }

    fn check(&self) -> Result<(), String> {
        for (i, a) in self.region.iter().enumerate() {
            if a.length == 0 || a.origin % 4 != 0 || a.length % 4 != 0 {
                return Err(format!("region {}: empty or not 4-byte aligned", a.name));
            }
            for b in &self.region[i + 1..] {
                if a.origin < b.origin + b.length && b.origin < a.origin + a.length {
                    return Err(format!("regions {} and {} overlap", a.name, b.name));
                }
            }
        }
        for alias in [
            &self.text,
            &self.rodata,
            &self.data,
            &self.bss,
            &self.heap,
            &self.stack,
        ] {
            if self.region(alias)?.kind != Kind::Ram {
                return Err(format!("section region {alias} is not RAM"));
            }
        }
        if self
            .region
            .iter()
            .filter(|r| r.kind == Kind::Noinit)
            .count()
            != 1
        {
            return Err("exactly one noinit region is needed".into());
        }
        for (name, r) in &self.registers {
            let region = self.region(&r.region)?;
            if r.offset >= region.length {
                return Err(format!("register {name} lies outside {}", r.region));
            }
        }
        Ok(())
    }
}

const HEADER: &str = "Generated from firmware/memory-map.toml by mrc-memmap; do not edit.";

/// The `memory.x` of target `name`.
///
/// # Errors
/// An unknown target.
pub fn linker_script(map: &MemoryMap, name: &str) -> Result<String, String> {
    let t = map.get(name)?;
    let mut s = format!("/* {HEADER} Target: {name}. */\nMEMORY\n{{\n");
    for r in t
        .region
        .iter()
        .filter(|r| matches!(r.kind, Kind::Ram | Kind::Noinit))
    {
        let attrs = if r.kind == Kind::Noinit { "rw" } else { "rwx" };
        writeln!(
            s,
            "  {} ({attrs}) : ORIGIN = {:#010x}, LENGTH = {:#x}",
            r.name, r.origin, r.length
        )
        .ok();
    }
    s.push_str("}\n\n");
    for (alias, region) in [
        ("TEXT", &t.text),
        ("RODATA", &t.rodata),
        ("DATA", &t.data),
        ("BSS", &t.bss),
        ("HEAP", &t.heap),
        ("STACK", &t.stack),
    ] {
        writeln!(s, "REGION_ALIAS(\"REGION_{alias}\", {region});").ok();
    }
    s.push_str(
        "\n/* The image aborts on panic and has no unwinder: its unwind tables stay in the ELF for\n   \
         debuggers (non-allocated, like the debug sections) and take no target memory. */\n\
         SECTIONS\n{\n  .eh_frame (INFO) : { KEEP(*(.eh_frame)) }\n  \
         .eh_frame_hdr (INFO) : { *(.eh_frame_hdr) }\n}\nINSERT AFTER .got;\n",
    );
    let noinit = t.region.iter().find(|r| r.kind == Kind::Noinit);
    if let Some(n) = noinit {
        write!(
            s,
            "\n/* RAM kept across reset at a fixed address the host reads: crash record, log ring. */\n\
             SECTIONS\n{{\n  .noinit (NOLOAD) : ALIGN(8)\n  {{\n    __snoinit = .;\n    \
             KEEP(*(.noinit .noinit.*));\n    __enoinit = .;\n  }} > {}\n}}\nINSERT AFTER .uninit;\n\n\
             ASSERT(__snoinit == {:#010x}, \"the noinit block must start at the {} origin\");\n",
            n.name, n.origin, n.name
        )
        .ok();
    }
    Ok(s)
}

/// Rust consts for the image's `hal`: `<REGION>_ORIGIN`, `<REGION>_LEN`, one `u32` address per
/// register, `MTIME_HZ`.
///
/// # Errors
/// An unknown target.
pub fn rust_consts(map: &MemoryMap, name: &str) -> Result<String, String> {
    let t = map.get(name)?;
    let mut s = format!("// {HEADER} Target: {name}.\n");
    for r in &t.region {
        writeln!(s, "/// Origin of {} ({:?}).", r.name, r.kind).ok();
        writeln!(s, "pub const {}_ORIGIN: usize = {:#x};", r.name, r.origin).ok();
        writeln!(s, "/// Length of {}.", r.name).ok();
        writeln!(s, "pub const {}_LEN: usize = {:#x};", r.name, r.length).ok();
    }
    for (n, r) in &t.registers {
        let addr = t.region(&r.region)?.origin + r.offset;
        writeln!(s, "/// Register {n} ({} + {:#x}).", r.region, r.offset).ok();
        writeln!(s, "pub const {n}: usize = {addr:#x};").ok();
    }
    writeln!(
        s,
        "/// Rate of the MTIME counter.\npub const MTIME_HZ: u64 = {};",
        t.mtime_hz
    )
    .ok();
    Ok(s)
}

/// The probe-rs chip description of the `nic` target.
///
/// # Errors
/// No `nic` target.
pub fn chip_yaml(map: &MemoryMap, algo: &FlashAlgorithm) -> Result<String, String> {
    let t = map.get("nic")?;
    let c = &map.chip;
    let mut s = format!(
        "# {HEADER}\n# probe-rs download --chip-description-path firmware/image/mrc-nic.chip.yaml --chip {}\n\
         name: {}\nmanufacturer: null\ngenerated_from_pack: false\npack_file_release: null\n\
         variants:\n- name: {}\n  cores:\n  - name: {}\n    type: riscv\n    core_access_options: !Riscv\n      \
         hart_id: {}\n      jtag_tap: {}\n  memory_map:\n",
        c.name, c.name, c.name, c.core, c.hart_id, c.jtag_tap
    );
    for r in &t.region {
        let (tag, access) = match r.kind {
            Kind::Ram | Kind::Noinit => (
                "Ram",
                format!(
                    "read: true\n      write: true\n      execute: {}\n      boot: {}",
                    r.kind == Kind::Ram,
                    r.boot
                ),
            ),
            Kind::Nvm => (
                "Nvm",
                "read: true\n      write: true\n      execute: false\n      boot: false"
                    .to_string(),
            ),
            Kind::Device => (
                "Generic",
                "read: true\n      write: true\n      execute: false\n      boot: false"
                    .to_string(),
            ),
        };
        write!(
            s,
            "  - !{tag}\n    name: {}\n    range:\n      start: {:#x}\n      end: {:#x}\n    cores:\n    - {}\n    access:\n      {access}\n",
            r.name,
            r.origin,
            r.origin + r.length,
            c.core
        )
        .ok();
    }
    writeln!(s, "  flash_algorithms:\n  - {}", c.flash_algorithm.name).ok();
    s.push_str(&algo.yaml(&c.flash_algorithm, &c.core));
    Ok(s)
}

/// Every generated file committed next to the image: (file name under `firmware/image/`, text).
///
/// # Errors
/// As the generators.
pub fn committed_files(
    map: &MemoryMap,
    algo: &FlashAlgorithm,
) -> Result<Vec<(&'static str, String)>, String> {
    Ok(vec![
        ("memory-nic.x", linker_script(map, "nic")?),
        ("memory-qemu.x", linker_script(map, "qemu")?),
        ("mrc-nic.chip.yaml", chip_yaml(map, algo)?),
    ])
}
