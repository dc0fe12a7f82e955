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
//! of a block counts the whole block (the crash path alone). The ITCM is read-only to the
//! guest (the cores running one image share its translated code, module `engine`): a store
//! into it faults. Code the simulator writes there ([`ElfCore::write_mem`]) runs and is
//! counted.
//!
//! # Traps
//! Unicorn does not take guest exceptions itself: it hands them to a hook, which takes them as
//! a machine-mode core does (`take_trap`), so the image's trap handler runs. Accesses
//! outside the mapped memories (the flash slots, unmapped addresses) stop the emulation instead
//! ([`ElfError::Fault`]), where a NIC core would trap with an access fault.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use unicorn_engine::RegisterRISCV;

use crate::device::{Device, Stop};
use crate::engine::{engine, lock, Cpu, Engine, SHARED_SWITCHES};
use crate::image::NicImage;
use crate::map::NicMap;
use crate::ElfError;

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

/// A core's own state, which the engine's hooks reach while it runs.
pub(crate) struct State {
    pub(crate) dev: Device,
    /// Instructions retired since power-on.
    pub(crate) retired: u64,
    /// The running run stops once `retired` would pass this, for this reason.
    pub(crate) limit: u64,
    pub(crate) limit_stop: Stop,
    /// The watchdog's period in instructions when it was running as the run began (a kick
    /// restarts it), and the run's own limit, which no kick moves.
    wdt_bite: Option<u64>,
    run_cap: u64,
    /// Guest exceptions taken.
    pub(crate) traps: u64,
    /// A trap could not be delivered (the engine refused a register access).
    pub(crate) trap_failed: bool,
}

impl State {
    pub(crate) fn new(dev: Device) -> State {
        State {
            dev,
            retired: 0,
            limit: 0,
            limit_stop: Stop::InstructionLimit,
            wdt_bite: None,
            run_cap: 0,
            traps: 0,
            trap_failed: false,
        }
    }

    /// A watchdog kick: its period starts again (within the run's own limit).
    pub(crate) fn kick(&mut self) {
        if let Some(bite) = self.wdt_bite {
            let at = self.retired.saturating_add(bite);
            (self.limit_stop, self.limit) = if at < self.run_cap {
                (Stop::Watchdog, at)
            } else {
                (Stop::InstructionLimit, self.run_cap)
            };
        }
    }
}

/// Names the cores on the engines.
static NEXT_CORE: AtomicU64 = AtomicU64::new(0);

/// The NIC core running the image.
pub struct ElfCore {
    /// The engine it runs on (shared with the cores running the same code, module
    /// `engine`), its name there, its registers and state between runs.
    engine: Arc<Mutex<Engine>>,
    id: u64,
    cpu: Cpu,
    state: Box<State>,
    /// Runs that found another core's DTCM in the engine.
    switches: u32,
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

/// The DTCM and NOINIT of a core booting `image`: `ram` (zero at power-on) with the image's
/// segments there written over it.
fn ram_of(image: &NicImage, map: &NicMap, ram: Option<Box<[u8]>>) -> Box<[u8]> {
    let len = (map.dtcm.len + map.noinit.len) as usize;
    let mut ram = ram.unwrap_or_else(|| vec![0; len].into_boxed_slice());
    for s in &image.segments {
        if let Some(o) = s.addr.checked_sub(map.dtcm.origin) {
            if let Some(dst) = ram.get_mut(o as usize..o as usize + s.bytes.len()) {
                dst.copy_from_slice(&s.bytes);
            }
        }
    }
    ram
}

impl Drop for ElfCore {
    fn drop(&mut self) {
        lock(&self.engine).forget(self.id);
    }
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
        let engine = Engine::for_code(&map, code_of(&image, &map))?;
        let id = NEXT_CORE.fetch_add(1, Ordering::Relaxed);
        let cpu = {
            let mut e = lock(&engine);
            e.join(id, ram_of(&image, &map, None));
            e.fresh_cpu()?
        };
        let mut core = ElfCore {
            engine,
            id,
            cpu,
            state: Box::new(State::new(dev)),
            switches: 0,
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
        let old = &mut self.state;
        let mut dev = Device::new(self.map.regs);
        dev.counters = old.dev.counters;
        dev.keep_board(&mut old.dev);
        dev.reset_cause = cause;
        if let Some(rom) = self.rom {
            let (image, booted) = match rom_boot(&mut dev.flash, &self.map, &rom) {
                Ok(b) => b,
                Err(e) => {
                    self.dead = Some(e.clone());
                    return Err(e);
                }
            };
            self.image = image;
            self.rom_boot = Some(booted);
        }
        let mut state = State::new(dev);
        (state.retired, state.traps) = (old.retired, old.traps);
        *self.state = state;
        // (the image's code as loaded: the ROM's image, or code the simulator wrote undone)
        let text = code_of(&self.image, &self.map);
        let (ram, same) = {
            let mut e = lock(&self.engine);
            (e.leave(self.id)?, **e.text() == *text)
        };
        if !same {
            self.engine = Engine::for_code(&self.map, text)?;
        }
        let mut e = lock(&self.engine);
        e.join(self.id, ram_of(&self.image, &self.map, Some(ram)));
        self.cpu = e.fresh_cpu()?;
        drop(e);
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
            let s = &mut self.state;
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
        let (r, pc, switched) = {
            let mut e = lock(&self.engine);
            let switched = e.enter(self.id, &self.cpu, &mut self.state)?;
            let r = e.run(self.pc);
            let pc = e.uc.reg_read(RegisterRISCV::PC);
            e.exit(&mut self.cpu, &mut self.state)?;
            (r, pc.map_err(engine("read the pc"))?, switched)
        };
        self.pc = pc;
        if switched {
            self.switches += 1;
            if self.switches == SHARED_SWITCHES {
                self.move_to(None)?;
            }
        }
        let instructions = self.retired() - before;
        if self.state.trap_failed {
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
        let stop = match self.state.dev.stop {
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
        self.state.traps
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
        self.state.retired
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
        let t = self.state.dev.wake_at_ns;
        (t != u64::MAX).then_some(t)
    }

    /// Whether this core and `other` take turns on one engine (the cores running the same
    /// code share one and its translations until a core that keeps taking turns in short runs
    /// gets its own, module `engine`). It changes nothing the cores compute or count.
    pub fn shares_engine_with(&self, other: &ElfCore) -> bool {
        Arc::ptr_eq(&self.engine, &other.engine)
    }

    /// The CSR window.
    pub fn device(&self) -> &Device {
        &self.state.dev
    }

    /// The CSR window, mutably (the datapath's side of the queues).
    pub fn device_mut(&mut self) -> &mut Device {
        &mut self.state.dev
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
        lock(&self.engine)
            .read(self.id, addr, out)
            .map_err(|error| ElfError::Memory {
                addr,
                len: out.len(),
                error,
            })
    }

    /// Writes guest RAM. A write into the ITCM (code) gives the core code of its own: it
    /// moves to the engine running that code (a new one), so the new code runs and is
    /// counted.
    ///
    /// # Errors
    /// The range is not mapped RAM.
    pub fn write_mem(&mut self, addr: u32, bytes: &[u8]) -> Result<(), ElfError> {
        let err = |error: String| ElfError::Memory {
            addr,
            len: bytes.len(),
            error,
        };
        if self.map.itcm.holds(addr, bytes.len() as u32) {
            let mut text = lock(&self.engine).text().to_vec();
            let o = (addr - self.map.itcm.origin) as usize;
            text[o..o + bytes.len()].copy_from_slice(bytes);
            return self.move_to(Some(text));
        }
        lock(&self.engine).write(self.id, addr, bytes).map_err(err)
    }

    /// Moves the core to the engine running `text` (`None`: to an engine of its own, with its
    /// code).
    fn move_to(&mut self, text: Option<Vec<u8>>) -> Result<(), ElfError> {
        let (ram, own) = {
            let mut e = lock(&self.engine);
            (e.leave(self.id)?, e.text().clone())
        };
        self.engine = match text {
            Some(text) => Engine::for_code(&self.map, text)?,
            None => Engine::private(&self.map, own)?,
        };
        lock(&self.engine).join(self.id, ram);
        Ok(())
    }
}
