//! The emulated core: the Unicorn engine's RISC-V CPU (QEMU's TCG) in machine mode, with the
//! NIC's ITCM and DTCM as RAM, the CSR window served by [`Device`], and every retired
//! instruction counted.
//!
//! # Counting instructions
//! A block hook sees each translated block as it starts to execute and adds the number of
//! instructions in it (RISC-V instructions are 2 or 4 bytes, told apart by their low two
//! bits; counted over the image's code as loaded). A block the core does not execute because
//! a stop is pending is not counted, so the count is exact at every stop: the guest's
//! register accesses stop the core only between blocks (module `device`). A trap in the middle
//! of a block counts the whole block (the crash path alone). Code the guest itself writes into
//! the ITCM is not counted as written (the image never does); code the simulator writes
//! ([`ElfCore::write_mem`]) is.
//!
//! # Traps
//! Unicorn does not take guest exceptions itself: it hands them to a hook, which takes them as
//! a machine-mode core does (`take_trap`), so the image's trap handler runs. Accesses
//! outside the mapped memories (the flash slots, unmapped addresses) stop the emulation instead
//! ([`ElfError::Fault`]), where a NIC core would trap with an access fault.

use unicorn_engine::{Arch, Mode, Prot, RegisterRISCV, Unicorn};

use crate::device::{Device, Stop};
use crate::image::NicImage;
use crate::map::NicMap;
use crate::ElfError;

/// An address no instruction has (odd): the engine's "run until" never stops a run.
const NO_EXIT: u64 = 1;

/// Limits of the emulated core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreConfig {
    /// Most instructions a run (the boot, or one main-loop iteration) may retire before it
    /// is stopped as hung ([`Stop::InstructionLimit`]) when the watchdog would not bite
    /// first.
    pub max_run_instructions: u64,
    /// Instructions the core retires per second (its clock over its CPI): the watchdog's
    /// period in instructions. More instructions than that from one kick to the next bite
    /// ([`Stop::Watchdog`]): the core resets. (A run that begins with the watchdog running
    /// starts its period afresh; kicks within the run restart it, up to the run's limit.)
    pub instructions_per_s: u64,
}

impl CoreConfig {
    /// 100 M instructions a run, a core retiring 10^9 instructions a second (1 GHz, CPI 1):
    /// the image's 50 ms watchdog bites after 50 M.
    pub const DEFAULT: CoreConfig = CoreConfig {
        max_run_instructions: 100_000_000,
        instructions_per_s: 1_000_000_000,
    };
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What a run did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Instructions retired.
    pub instructions: u64,
    /// Why it ended.
    pub stop: Stop,
    /// Instructions of the boot that followed a reset the run ended in (0: none).
    pub boot: u64,
}

/// A crash record read from `NOINIT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashInfo {
    /// Why the core went down.
    pub reason: mrc_nic_board::crash::CrashReason,
    /// Boot count when it happened.
    pub boot_count: u32,
    /// Panic line, or `mcause` of a trap.
    pub line_or_cause: u32,
    /// `mepc` of a trap.
    pub mepc: u32,
    /// Panic file (the tail of its path).
    pub file: String,
}

/// The state the engine's callbacks reach.
pub(crate) struct State {
    pub(crate) dev: Device,
    /// The image's code as loaded, from `text_base`.
    text: Vec<u8>,
    text_base: u32,
    /// Per halfword of `text`: the size of the block last seen starting there and its
    /// instructions (a block is counted once, then looked up).
    blocks: Vec<(u32, u32)>,
    /// Instructions retired since power-on.
    retired: u64,
    /// The running run stops once `retired` would pass this, for this reason.
    limit: u64,
    limit_stop: Stop,
    /// The watchdog's period in instructions when it was running as the run began (a kick
    /// restarts it), and the run's own limit, which no kick moves.
    wdt_bite: Option<u64>,
    run_cap: u64,
    /// Guest exceptions taken.
    traps: u64,
    /// A trap could not be delivered (the engine refused a register access).
    trap_failed: bool,
}

impl State {
    /// A watchdog kick: its period starts again (within the run's own limit).
    fn kick(&mut self) {
        if let Some(bite) = self.wdt_bite {
            let at = self.retired.saturating_add(bite);
            (self.limit_stop, self.limit) = if at < self.run_cap {
                (Stop::Watchdog, at)
            } else {
                (Stop::InstructionLimit, self.run_cap)
            };
        }
    }

    /// Instructions in the block `[addr, addr + size)`.
    #[inline]
    fn count(&mut self, addr: u64, size: u32) -> u64 {
        let start = addr.wrapping_sub(u64::from(self.text_base)) as usize;
        if let Some(&(sz, n)) = self.blocks.get(start / 2) {
            if sz == size {
                return u64::from(n);
            }
        }
        let end = start.saturating_add(size as usize);
        let Some(code) = self.text.get(start..end) else {
            // (outside the image's code: 4-byte instructions assumed)
            return u64::from(size.div_ceil(4));
        };
        let mut n = 0u32;
        let mut p = 0;
        while p < code.len() {
            p += if code[p] & 3 == 3 { 4 } else { 2 };
            n += 1;
        }
        self.blocks[start / 2] = (size, n);
        u64::from(n)
    }
}

/// The NIC core running the image.
pub struct ElfCore {
    uc: Unicorn<'static, State>,
    image: NicImage,
    pub(crate) map: NicMap,
    cfg: CoreConfig,
    pc: u64,
    /// A run ended the core's life (a fault, a park, a hang with no watchdog): later runs
    /// are refused with it.
    dead: Option<ElfError>,
    boot_instructions: u64,
    boots: u32,
    runs: u64,
    /// A reset the last run ended in, not yet carried out (`ElfCore::step` reads the rings
    /// first).
    pub(crate) pending_reset: Option<Stop>,
    /// Entries on their way between the datapath and the guest (module `bridge`).
    pub(crate) scratch: Vec<mrc_abi::device::csr::CsrEntry>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) bridge: crate::bridge::BridgeCounters,
    /// The datapath's FW->DP count when the guest last reset its indices (module `bridge`).
    pub(crate) orders_base: Option<u32>,
    /// The last [`ElfCore::step`]'s timing (module `bridge`).
    pub(crate) timing: crate::bridge::StepTiming,
    /// The boot ROM the core runs at every reset (`None`: the core reloads its ELF).
    rom: Option<BootRom>,
    /// What the boot ROM last booted.
    rom_boot: Option<RomBoot>,
}

/// The boot ROM's configuration: what it trusts and the record a blank flash gets
/// ([`crate::bootrom::boot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootRom {
    /// The key and ABI major images must match.
    pub policy: mrc_fw_update::update::UpdatePolicy,
    /// The factory record's slot A version.
    pub factory_version: u32,
    /// Trial boots an unconfirmed image gets.
    pub max_trial_boots: u8,
}

/// What the boot ROM booted at the last power-on or reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RomBoot {
    /// The slot.
    pub slot: mrc_fw_update::slots::Slot,
    /// Whether the image runs on trial.
    pub trial: bool,
    /// Its version.
    pub version: u32,
    /// The boot record as written back.
    pub record: mrc_fw_update::slots::BootControl,
}

/// The code of `image` as the ITCM holds it (for counting instructions).
fn code_of(image: &NicImage, map: &NicMap) -> Vec<u8> {
    let mut text = vec![0u8; map.itcm.len as usize];
    for s in &image.segments {
        if map.itcm.holds(s.addr, s.bytes.len() as u32) {
            let o = (s.addr - map.itcm.origin) as usize;
            text[o..o + s.bytes.len()].copy_from_slice(&s.bytes);
        }
    }
    text
}

/// Runs the boot ROM on `flash`: the image it booted, or why none.
fn rom_boot(
    flash: &mut crate::board::flash::FlashDevice,
    map: &NicMap,
    rom: &BootRom,
) -> Result<(NicImage, RomBoot), ElfError> {
    let b = crate::bootrom::boot(
        flash,
        map,
        &rom.policy,
        rom.factory_version,
        rom.max_trial_boots,
    )
    .map_err(|e| ElfError::Boot(e.to_string()))?;
    let info = RomBoot {
        slot: b.slot,
        trial: b.trial,
        version: b.version,
        record: b.record,
    };
    Ok((b.image, info))
}

impl core::fmt::Debug for ElfCore {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ElfCore")
            .field("pc", &self.pc)
            .field("retired", &self.retired())
            .field("boots", &self.boots)
            .field("dead", &self.dead)
            .finish_non_exhaustive()
    }
}

pub(crate) fn engine(what: &'static str) -> impl Fn(unicorn_engine::uc_error) -> ElfError {
    move |e| ElfError::Engine(format!("{what}: {e:?}"))
}

/// A riscv32 engine holding `data` with the core's memories mapped: the ITCM (rwx) and the
/// DTCM with the NOINIT block after it as one RAM, with `dtcm` access.
pub(crate) fn open_engine<D>(
    map: &NicMap,
    data: D,
    dtcm: Prot,
) -> Result<Unicorn<'static, D>, ElfError> {
    let mut uc = Unicorn::new_with_data(Arch::RISCV, Mode::RISCV32, data)
        .map_err(engine("open the RISC-V engine"))?;
    uc.mem_map(
        u64::from(map.itcm.origin),
        u64::from(map.itcm.len),
        Prot::ALL,
    )
    .map_err(engine("map the ITCM"))?;
    uc.mem_map(
        u64::from(map.dtcm.origin),
        u64::from(map.dtcm.len + map.noinit.len),
        dtcm,
    )
    .map_err(engine("map the DTCM"))?;
    Ok(uc)
}

/// A fresh engine: the NIC's memories mapped, `ram` (DTCM + NOINIT, kept across a reset) and
/// the image's segments loaded, the CSR window and the instruction counter hooked.
fn new_engine(
    map: &NicMap,
    image: &NicImage,
    state: State,
    ram: Option<&[u8]>,
) -> Result<Unicorn<'static, State>, ElfError> {
    let mut uc = open_engine(map, state, Prot::READ | Prot::WRITE)?;
    if let Some(ram) = ram {
        uc.mem_write(u64::from(map.dtcm.origin), ram)
            .map_err(engine("restore the RAM"))?;
    }
    for s in &image.segments {
        uc.mem_write(u64::from(s.addr), &s.bytes)
            .map_err(engine("load a segment"))?;
    }
    uc.mmio_map(
        u64::from(map.csr.origin),
        u64::from(map.csr.len),
        Some(|uc: &mut Unicorn<'_, State>, off: u64, size: usize| {
            let d = &mut uc.get_data_mut().dev;
            let was = d.stop;
            let v = d.read(off as u32, size);
            if was.is_none() && d.stop.is_some() {
                let _ = uc.emu_stop();
            }
            u64::from(v)
        }),
        Some(
            |uc: &mut Unicorn<'_, State>, off: u64, size: usize, v: u64| {
                let s = uc.get_data_mut();
                let retired = s.retired;
                let d = &mut s.dev;
                let was = d.stop;
                let kicks = d.counters.kicks;
                d.write_at(off as u32, size, v as u32, retired);
                let (stopped, kicked) =
                    (was.is_none() && d.stop.is_some(), d.counters.kicks != kicks);
                if kicked {
                    s.kick();
                }
                if stopped {
                    let _ = uc.emu_stop();
                }
            },
        ),
    )
    .map_err(engine("map the CSR window"))?;
    // The flash's read window (QSPI memory-mapped reads); writes are not a flash operation:
    // counted and ignored.
    uc.mmio_map(
        u64::from(mrc_abi::device::flash::FLASH_BASE),
        u64::from(mrc_abi::device::flash::FLASH_BYTES),
        Some(|uc: &mut Unicorn<'_, State>, off: u64, size: usize| {
            let d = &mut uc.get_data_mut().dev;
            let mut b = [0u8; 8];
            let n = size.min(8);
            if let Some(src) = d.flash.read(off as u32, n) {
                b[..n].copy_from_slice(src);
            }
            u64::from_le_bytes(b)
        }),
        Some(
            |uc: &mut Unicorn<'_, State>, _off: u64, _size: usize, _v: u64| {
                uc.get_data_mut().dev.counters.unknown_writes += 1;
            },
        ),
    )
    .map_err(engine("map the flash window"))?;
    uc.add_block_hook(1, 0, |uc: &mut Unicorn<'_, State>, addr: u64, size: u32| {
        let s = uc.get_data_mut();
        if s.dev.stop.is_some() {
            return; // (the core stops before this block)
        }
        let n = s.count(addr, size);
        if s.retired + n > s.limit {
            s.dev.stop = Some(s.limit_stop);
            let _ = uc.emu_stop();
            return;
        }
        s.retired += n;
    })
    .map_err(engine("hook blocks"))?;
    // Unicorn hands a guest exception to this hook instead of taking the trap (with the pc
    // already moved 4 bytes on): the hook takes it as the core does in machine mode, so the
    // image's trap handler runs (and writes its crash record).
    uc.add_intr_hook(|uc: &mut Unicorn<'_, State>, cause: u32| {
        if take_trap(uc, cause).is_err() {
            uc.get_data_mut().trap_failed = true;
            let _ = uc.emu_stop();
        }
    })
    .map_err(engine("hook traps"))?;
    Ok(uc)
}

/// `mstatus` bits.
const MSTATUS_MIE: u64 = 1 << 3;
const MSTATUS_MPIE: u64 = 1 << 7;
const MSTATUS_MPP: u64 = 3 << 11;

/// A synchronous exception `cause` taken into machine mode: `mepc` the faulting
/// instruction, `mcause`, `mtval` 0, `mstatus` MPIE = MIE, MIE = 0, MPP = M, pc = `mtvec`'s
/// base (exceptions go there in both of its modes).
fn take_trap(uc: &mut Unicorn<'_, State>, cause: u32) -> Result<(), unicorn_engine::uc_error> {
    let epc = uc.reg_read(RegisterRISCV::PC)?.wrapping_sub(4) & 0xFFFF_FFFF;
    let status = uc.reg_read(RegisterRISCV::MSTATUS)?;
    let mpie = if status & MSTATUS_MIE != 0 {
        MSTATUS_MPIE
    } else {
        0
    };
    let status = (status & !(MSTATUS_MIE | MSTATUS_MPIE)) | mpie | MSTATUS_MPP;
    let tvec = uc.reg_read(RegisterRISCV::MTVEC)? & !3;
    uc.reg_write(RegisterRISCV::MEPC, epc)?;
    uc.reg_write(RegisterRISCV::MCAUSE, u64::from(cause))?;
    uc.reg_write(RegisterRISCV::MTVAL, 0)?;
    uc.reg_write(RegisterRISCV::MSTATUS, status)?;
    uc.reg_write(RegisterRISCV::PC, tvec)?;
    uc.get_data_mut().traps += 1;
    Ok(())
}

impl ElfCore {
    /// Loads `elf` (the `mrc-nic` NIC build) into a fresh core at power-on and runs its boot
    /// up to the main loop's first timer read.
    ///
    /// # Errors
    /// The image does not fit the memory map, the engine refused a setup call, or the boot
    /// faulted, reset or hung.
    pub fn boot(elf: &[u8], cfg: CoreConfig) -> Result<ElfCore, ElfError> {
        let map = NicMap::nic()?;
        let image = NicImage::parse(elf, &map)?;
        Self::boot_image(image, cfg)
    }

    /// Loads an image already laid out in memory (the boot ROM's copy of a flash slot,
    /// [`crate::bootrom`]) into a fresh core at power-on and runs its boot up to the main
    /// loop's first timer read.
    ///
    /// # Errors
    /// As [`ElfCore::boot`].
    pub fn boot_image(image: NicImage, cfg: CoreConfig) -> Result<ElfCore, ElfError> {
        let map = NicMap::nic()?;
        let dev = Device::new(map.regs);
        Self::start(image, dev, cfg, None, None)
    }

    /// Powers the core on with `flash` on its board and the boot ROM `rom` in charge: the ROM
    /// picks a slot by the boot record, checks its image and lays it out ([`crate::bootrom`]),
    /// and does so again at every reset (the watchdog's, `SW_RESET`, [`ElfCore::reset_now`]),
    /// so an update the image wrote boots after the next reset, and an image that fails its
    /// trial boots is rolled back. Runs the boot up to the main loop's first timer read.
    ///
    /// # Errors
    /// The ROM found nothing to boot ([`ElfError::Boot`]), or as [`ElfCore::boot`].
    pub fn power_on(
        mut flash: crate::board::flash::FlashDevice,
        rom: BootRom,
        cfg: CoreConfig,
    ) -> Result<ElfCore, ElfError> {
        let map = NicMap::nic()?;
        let (image, booted) = rom_boot(&mut flash, &map, &rom)?;
        let dev = Device::with_flash(map.regs, flash);
        Self::start(image, dev, cfg, Some(rom), Some(booted))
    }

    fn start(
        image: NicImage,
        dev: Device,
        cfg: CoreConfig,
        rom: Option<BootRom>,
        rom_boot: Option<RomBoot>,
    ) -> Result<ElfCore, ElfError> {
        let map = NicMap::nic()?;
        let text = code_of(&image, &map);
        let state = State {
            dev,
            blocks: vec![(u32::MAX, 0); text.len() / 2],
            text,
            text_base: map.itcm.origin,
            retired: 0,
            limit: cfg.max_run_instructions,
            limit_stop: Stop::InstructionLimit,
            wdt_bite: None,
            run_cap: cfg.max_run_instructions,
            traps: 0,
            trap_failed: false,
        };
        let uc = new_engine(&map, &image, state, None)?;
        let mut core = ElfCore {
            uc,
            pc: u64::from(image.entry),
            image,
            map,
            cfg,
            dead: None,
            boot_instructions: 0,
            boots: 0,
            runs: 0,
            pending_reset: None,
            scratch: Vec::new(),
            bytes: Vec::new(),
            bridge: Default::default(),
            orders_base: None,
            timing: Default::default(),
            rom,
            rom_boot,
        };
        core.boot_run(0)?;
        Ok(core)
    }

    /// The boot after power-on or a reset, at `now_ns`.
    fn boot_run(&mut self, now_ns: u64) -> Result<u64, ElfError> {
        let run = self.go(now_ns, true)?;
        if run.stop != Stop::Iteration {
            let e = ElfError::BootFailed(run.stop);
            self.dead = Some(e.clone());
            return Err(e);
        }
        self.boots += 1;
        self.boot_instructions = run.instructions;
        Ok(run.instructions)
    }

    /// Resets the core for `cause` (the watchdog or `SW_RESET`) at `now_ns`: the image is
    /// loaded again into a fresh CPU, the DTCM and the `NOINIT` block keep their bytes (the
    /// crash record and the log ring survive), `RESET_CAUSE` says why, the CSR window's
    /// queues are cleared, and the boot runs to the main loop. Returns the boot's
    /// instructions.
    fn reset(&mut self, cause: u32, now_ns: u64) -> Result<u64, ElfError> {
        if let Some(e) = &self.dead {
            return Err(e.clone());
        }
        let len = (self.map.dtcm.len + self.map.noinit.len) as usize;
        let mut ram = vec![0u8; len];
        self.read_mem(self.map.dtcm.origin, &mut ram)?;
        let old = self.uc.get_data_mut();
        let mut dev = Device::new(self.map.regs);
        dev.counters = old.dev.counters;
        dev.keep_board(&mut old.dev);
        dev.reset_cause = cause;
        let (mut text, mut blocks) = (
            std::mem::take(&mut old.text),
            std::mem::take(&mut old.blocks),
        );
        if let Some(rom) = self.rom {
            let (image, booted) = match rom_boot(&mut dev.flash, &self.map, &rom) {
                Ok(b) => b,
                Err(e) => {
                    self.dead = Some(e.clone());
                    return Err(e);
                }
            };
            if image != self.image {
                text = code_of(&image, &self.map);
                blocks.fill((u32::MAX, 0));
                self.image = image;
            }
            self.rom_boot = Some(booted);
        }
        let state = State {
            dev,
            text,
            blocks,
            text_base: old.text_base,
            retired: old.retired,
            limit: 0,
            limit_stop: Stop::InstructionLimit,
            wdt_bite: None,
            run_cap: 0,
            traps: old.traps,
            trap_failed: false,
        };
        self.uc = new_engine(&self.map, &self.image, state, Some(&ram))?;
        self.pc = u64::from(self.image.entry);
        self.orders_base = None;
        self.boot_run(now_ns)
    }

    /// One main-loop iteration at `now_ns` (the time the guest reads): the core runs from the
    /// top of the loop to the top of the next iteration. An iteration that ends in a reset
    /// (the watchdog bit, or the guest's `SW_RESET` after a crash) is followed by the boot
    /// ([`Run::boot`]).
    ///
    /// # Errors
    /// The core faulted (an access outside its memory, an instruction the engine refused),
    /// parked, hung with no watchdog running, or failed to boot, now or in an earlier run.
    pub fn run(&mut self, now_ns: u64) -> Result<Run, ElfError> {
        let mut run = self.iterate(now_ns)?;
        run.boot = self.finish_reset(now_ns)?;
        Ok(run)
    }

    /// The iteration alone (a reset it ends in is left pending).
    pub(crate) fn iterate(&mut self, now_ns: u64) -> Result<Run, ElfError> {
        self.runs += 1;
        let run = self.go(now_ns, false)?;
        if matches!(run.stop, Stop::Watchdog | Stop::SoftwareReset) {
            self.pending_reset = Some(run.stop);
        }
        Ok(run)
    }

    /// Carries out a pending reset; the boot's instructions.
    pub(crate) fn finish_reset(&mut self, now_ns: u64) -> Result<u64, ElfError> {
        match self.pending_reset.take() {
            Some(Stop::Watchdog) => self.reset(crate::device::RESET_CAUSE_WATCHDOG, now_ns),
            Some(_) => self.reset(crate::device::RESET_CAUSE_SOFTWARE, now_ns),
            None => Ok(0),
        }
    }

    /// A device reset from the host interface (the driver's `DEVICE.control.RESET`): the core
    /// resets at `now_ns` between iterations (`RESET_CAUSE` host) and boots again, through
    /// the boot ROM when it has one ([`ElfCore::power_on`]). Returns the boot's
    /// instructions.
    ///
    /// # Errors
    /// The core is dead, the ROM found nothing to boot, or the boot failed.
    pub fn reset_now(&mut self, now_ns: u64) -> Result<u64, ElfError> {
        self.pending_reset = None;
        self.reset(crate::device::RESET_CAUSE_HOST, now_ns)
    }

    /// What the boot ROM booted at the last power-on or reset (`None`: the core runs an ELF
    /// loaded without a ROM).
    pub fn rom_boot(&self) -> Option<&RomBoot> {
        self.rom_boot.as_ref()
    }

    fn go(&mut self, now_ns: u64, from_boot: bool) -> Result<Run, ElfError> {
        if let Some(e) = &self.dead {
            return Err(e.clone());
        }
        let before = self.retired();
        {
            let rate = u128::from(self.cfg.instructions_per_s);
            let s = self.uc.get_data_mut();
            s.dev.begin_run(now_ns, from_boot);
            s.dev.run_base = s.retired;
            let wdt = u128::from(s.dev.wdt_timeout_ns);
            // The watchdog's period in instructions at the core's rate (once started).
            let bite = (wdt * rate / 1_000_000_000).min(u128::from(u64::MAX)) as u64;
            s.run_cap = s.retired.saturating_add(self.cfg.max_run_instructions);
            s.wdt_bite = (wdt > 0).then_some(bite);
            (s.limit_stop, s.limit) = if wdt > 0 && bite < self.cfg.max_run_instructions {
                (Stop::Watchdog, s.retired.saturating_add(bite))
            } else {
                (Stop::InstructionLimit, s.run_cap)
            };
        }
        let r = self.uc.emu_start(self.pc, NO_EXIT, 0, 0);
        self.pc = self
            .uc
            .reg_read(RegisterRISCV::PC)
            .map_err(engine("read the pc"))?;
        let instructions = self.retired() - before;
        if self.uc.get_data().trap_failed {
            let e = ElfError::Engine(format!("a trap at pc {:#x} could not be taken", self.pc));
            self.dead = Some(e.clone());
            return Err(e);
        }
        if let Err(e) = r {
            let e = ElfError::Fault {
                error: format!("{e:?}"),
                pc: self.pc as u32,
            };
            self.dead = Some(e.clone());
            return Err(e);
        }
        let stop = match self.uc.get_data().dev.stop {
            Some(s) => s,
            None => {
                // The engine returned without a stop we asked for: the guest waits for an
                // interrupt with none enabled (its park after a failed exit).
                let e = ElfError::Parked { pc: self.pc as u32 };
                self.dead = Some(e.clone());
                return Err(e);
            }
        };
        if stop == Stop::InstructionLimit {
            self.dead = Some(ElfError::Hung {
                instructions: self.cfg.max_run_instructions,
            });
        }
        Ok(Run {
            instructions,
            stop,
            boot: 0,
        })
    }

    /// The crash record the image keeps in `NOINIT` (written by its panic and trap handlers
    /// before they reset the core; the next boot reports and clears it), if one is there.
    ///
    /// # Errors
    /// Reading guest memory failed.
    pub fn crash_record(&self) -> Result<Option<CrashInfo>, ElfError> {
        let mut b = [0u8; 160];
        self.read_mem(self.map.noinit.origin, &mut b)?;
        let rec = mrc_nic_board::crash::CrashRecord::from_bytes(&b);
        Ok(rec.read().map(|c| CrashInfo {
            reason: c.reason,
            boot_count: c.boot_count,
            line_or_cause: c.line_or_cause,
            mepc: c.mepc,
            file: c.file.to_string(),
        }))
    }

    /// Guest exceptions taken (into the image's trap handler) since power-on.
    pub fn traps(&self) -> u64 {
        self.uc.get_data().traps
    }

    /// Boots so far (power-on and every reset).
    pub fn boots(&self) -> u32 {
        self.boots
    }

    /// The pc where the core stopped last (the top of the main loop after an iteration).
    pub fn pc(&self) -> u32 {
        self.pc as u32
    }

    /// Instructions retired since power-on.
    pub fn retired(&self) -> u64 {
        self.uc.get_data().retired
    }

    /// Instructions the boot took (power-on to the first iteration).
    pub fn boot_instructions(&self) -> u64 {
        self.boot_instructions
    }

    /// Main-loop iterations run.
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// The main loop's next timer deadline as the image last told its wake timer
    /// (`WAKE_AT`), in ns; `None` when it has none armed. An idle core needs no iteration
    /// before then unless new work arrives.
    pub fn wake_at_ns(&self) -> Option<u64> {
        let t = self.uc.get_data().dev.wake_at_ns;
        (t != u64::MAX).then_some(t)
    }

    /// The CSR window.
    pub fn device(&self) -> &Device {
        &self.uc.get_data().dev
    }

    /// The CSR window, mutably (the datapath's side of the queues).
    pub fn device_mut(&mut self) -> &mut Device {
        &mut self.uc.get_data_mut().dev
    }

    /// The NIC memory map the core was built from.
    pub fn map(&self) -> &NicMap {
        &self.map
    }

    /// Reads guest RAM.
    ///
    /// # Errors
    /// The range is not mapped RAM.
    pub fn read_mem(&self, addr: u32, out: &mut [u8]) -> Result<(), ElfError> {
        self.uc
            .mem_read(u64::from(addr), out)
            .map_err(|e| ElfError::Memory {
                addr,
                len: out.len(),
                error: format!("{e:?}"),
            })
    }

    /// Writes guest RAM. A write into the ITCM (code) drops what the core translated of the
    /// range and the instruction counts it kept, so the new code runs and is counted.
    ///
    /// # Errors
    /// The range is not mapped RAM.
    pub fn write_mem(&mut self, addr: u32, bytes: &[u8]) -> Result<(), ElfError> {
        let err = |e: unicorn_engine::uc_error| ElfError::Memory {
            addr,
            len: bytes.len(),
            error: format!("{e:?}"),
        };
        self.uc.mem_write(u64::from(addr), bytes).map_err(err)?;
        let len = bytes.len() as u32;
        if self.map.itcm.holds(addr, len) {
            let end = u64::from(addr) + u64::from(len);
            self.uc
                .ctl_remove_cache(u64::from(addr), end)
                .map_err(err)?;
            let s = self.uc.get_data_mut();
            let o = (addr - s.text_base) as usize;
            s.text[o..o + bytes.len()].copy_from_slice(bytes);
            s.blocks.fill((u32::MAX, 0));
        }
        Ok(())
    }
}
