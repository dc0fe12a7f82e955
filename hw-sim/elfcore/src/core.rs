//! The emulated core: the Unicorn engine's RISC-V CPU (QEMU's TCG) in machine mode, with the
//! NIC's ITCM and DTCM as RAM, the CSR window served by [`Device`], and every retired
//! instruction counted.
//!
//! # Counting instructions
//! A block hook sees each translated block as it starts to execute and adds the number of
//! instructions in it (RISC-V instructions are 2 or 4 bytes, told apart by their low two
//! bits; counted over the image's code as loaded). A block the core does not execute because
//! a stop is pending is not counted, so the count is exact at every stop: the guest's
//! register accesses stop the core only between blocks (module `device`).

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
    /// is stopped as hung ([`Stop::InstructionLimit`]).
    pub max_run_instructions: u64,
}

impl CoreConfig {
    /// 50 M instructions a run: a main-loop iteration takes thousands; a 50 ms watchdog
    /// period at 1 GHz and one instruction a cycle is this many.
    pub const DEFAULT: CoreConfig = CoreConfig {
        max_run_instructions: 50_000_000,
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
    /// The running run stops once `retired` would pass this.
    limit: u64,
}

impl State {
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
    pub(crate) map: NicMap,
    cfg: CoreConfig,
    pc: u64,
    /// A run ended the core's life (a reset or a hang): later runs are refused with it.
    dead: Option<Stop>,
    boot_instructions: u64,
    runs: u64,
    /// Entries on their way between the datapath and the guest (module `bridge`).
    pub(crate) scratch: Vec<mrc_abi::device::csr::CsrEntry>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) bridge: crate::bridge::BridgeCounters,
}

impl core::fmt::Debug for ElfCore {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ElfCore")
            .field("pc", &self.pc)
            .field("retired", &self.retired())
            .field("dead", &self.dead)
            .finish_non_exhaustive()
    }
}

fn engine(what: &'static str) -> impl Fn(unicorn_engine::uc_error) -> ElfError {
    move |e| ElfError::Engine(format!("{what}: {e:?}"))
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
        let mut text = vec![0u8; map.itcm.len as usize];
        for s in &image.segments {
            if map.itcm.holds(s.addr, s.bytes.len() as u32) {
                let o = (s.addr - map.itcm.origin) as usize;
                text[o..o + s.bytes.len()].copy_from_slice(&s.bytes);
            }
        }
        let state = State {
            dev: Device::new(map.regs),
            blocks: vec![(u32::MAX, 0); text.len() / 2],
            text,
            text_base: map.itcm.origin,
            retired: 0,
            limit: cfg.max_run_instructions,
        };
        let mut uc = Unicorn::new_with_data(Arch::RISCV, Mode::RISCV32, state)
            .map_err(engine("open the RISC-V engine"))?;
        uc.mem_map(
            u64::from(map.itcm.origin),
            u64::from(map.itcm.len),
            Prot::ALL,
        )
        .map_err(engine("map the ITCM"))?;
        // The DTCM and the NOINIT block after it: one RAM.
        uc.mem_map(
            u64::from(map.dtcm.origin),
            u64::from(map.dtcm.len + map.noinit.len),
            Prot::READ | Prot::WRITE,
        )
        .map_err(engine("map the DTCM"))?;
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
                    let d = &mut uc.get_data_mut().dev;
                    let was = d.stop;
                    d.write(off as u32, size, v as u32);
                    if was.is_none() && d.stop.is_some() {
                        let _ = uc.emu_stop();
                    }
                },
            ),
        )
        .map_err(engine("map the CSR window"))?;
        uc.add_block_hook(1, 0, |uc: &mut Unicorn<'_, State>, addr: u64, size: u32| {
            let s = uc.get_data_mut();
            if s.dev.stop.is_some() {
                return; // (the core stops before this block)
            }
            let n = s.count(addr, size);
            if s.retired + n > s.limit {
                s.dev.stop = Some(Stop::InstructionLimit);
                let _ = uc.emu_stop();
                return;
            }
            s.retired += n;
        })
        .map_err(engine("hook blocks"))?;
        let mut core = ElfCore {
            uc,
            map,
            cfg,
            pc: u64::from(image.entry),
            dead: None,
            boot_instructions: 0,
            runs: 0,
            scratch: Vec::new(),
            bytes: Vec::new(),
            bridge: Default::default(),
        };
        let boot = core.go(0, true)?;
        core.boot_instructions = boot.instructions;
        Ok(core)
    }

    /// One main-loop iteration at `now_ns` (the time the guest reads): the core runs from the
    /// top of the loop to the top of the next iteration.
    ///
    /// # Errors
    /// The core faulted (an access outside its memory, an instruction the engine refused),
    /// reset itself or hung, now or in an earlier run.
    pub fn run(&mut self, now_ns: u64) -> Result<Run, ElfError> {
        self.runs += 1;
        self.go(now_ns, false)
    }

    fn go(&mut self, now_ns: u64, from_boot: bool) -> Result<Run, ElfError> {
        if let Some(stop) = self.dead {
            return Err(ElfError::Dead(stop));
        }
        let before = self.retired();
        {
            let s = self.uc.get_data_mut();
            s.dev.begin_run(now_ns, from_boot);
            s.limit = s.retired.saturating_add(self.cfg.max_run_instructions);
        }
        let r = self.uc.emu_start(self.pc, NO_EXIT, 0, 0);
        self.pc = self
            .uc
            .reg_read(RegisterRISCV::PC)
            .map_err(engine("read the pc"))?;
        let instructions = self.retired() - before;
        if let Err(e) = r {
            self.dead = Some(Stop::InstructionLimit);
            return Err(ElfError::Fault {
                error: format!("{e:?}"),
                pc: self.pc as u32,
            });
        }
        let stop = match self.uc.get_data().dev.stop {
            Some(s) => s,
            None => {
                // The engine returned without a stop we asked for: the guest waits for an
                // interrupt with none enabled (its park after a failed exit).
                self.dead = Some(Stop::SoftwareReset);
                return Err(ElfError::Parked { pc: self.pc as u32 });
            }
        };
        if stop != Stop::Iteration {
            self.dead = Some(stop);
        }
        Ok(Run { instructions, stop })
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

    /// Writes guest RAM.
    ///
    /// # Errors
    /// The range is not mapped RAM.
    pub fn write_mem(&mut self, addr: u32, bytes: &[u8]) -> Result<(), ElfError> {
        self.uc
            .mem_write(u64::from(addr), bytes)
            .map_err(|e| ElfError::Memory {
                addr,
                len: bytes.len(),
                error: format!("{e:?}"),
            })
    }
}
