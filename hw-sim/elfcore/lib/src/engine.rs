//! The Unicorn engines the cores run on, shared by the cores running the same code.
//!
//! Most of what an emulated core costs the first time it runs a piece of code is QEMU's
//! translation of it (a translated block is translated once per engine, then run from the
//! engine's cache). The cores of one simulation run one image: the boot, the admin commands
//! that set the NIC up and the first packets run the same cold code on every core. So the
//! cores whose ITCM holds the same code share one engine ([`Engine::for_code`]) and take turns
//! on it: the CPU registers and the DTCM (with NOINIT) are each core's own, the ITCM is the
//! shared code, read-only to the guest (a store into it faults, [`crate::ElfError::Fault`]).
//!
//! - A core's run enters the engine ([`Engine::enter`]): when another core ran there last, that
//!   core's DTCM is copied out and this core's copied in (a *switch*); the core's registers are
//!   restored and its [`State`] (the device, the instruction counter) is moved in for the
//!   engine's hooks. The run leaves with the registers saved and the state moved out.
//! - Between runs a core's DTCM is in the engine's RAM while it was the last to run there,
//!   else in the engine's copy of it (`parked`).
//! - A switch costs two copies of the DTCM; translating a core's code again costs an engine of
//!   its own. A core that has switched [`SHARED_SWITCHES`] times (one that keeps taking turns
//!   with others in short runs) moves to an engine of its own, whose translation cost is about
//!   that of the switches it has already paid: it spends at most about twice what the cheaper
//!   of the two would have cost, without knowing its future runs.
//!
//! Which engine a core runs on does not change what it computes or counts: a translated block
//! covers the same instructions in every engine (it ends where the code's control flow, a
//! page or QEMU's block limit ends it, never where another block began), so the instruction
//! counts at every stop are the same.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use unicorn_engine::{Arch, Context, Mode, Prot, RegisterRISCV, Unicorn};

use crate::core::State;
use crate::map::NicMap;
use crate::ElfError;

/// Switches after which a core moves to an engine of its own: about as many as cost what an
/// engine translating a core's code anew costs. A switch copies the DTCM twice (some 7 us on
/// a 2020s x86 core); a fresh engine translates the boot and the main loop's paths again
/// (some 7 ms for the boot and idle iterations, twice that with the admin and datapath
/// paths of a NIC being set up).
pub(crate) const SHARED_SWITCHES: u32 = 1024;

pub(crate) fn engine(what: &'static str) -> impl Fn(unicorn_engine::uc_error) -> ElfError {
    move |e| ElfError::Engine(format!("{what}: {e:?}"))
}

/// A riscv32 engine holding `data` with the core's memories mapped: the ITCM with `itcm`
/// access, and the DTCM with the NOINIT block after it as one RAM, with `dtcm` access.
pub(crate) fn open_engine<D>(
    map: &NicMap,
    data: D,
    itcm: Prot,
    dtcm: Prot,
) -> Result<Unicorn<'static, D>, ElfError> {
    let mut uc = Unicorn::new_with_data(Arch::RISCV, Mode::RISCV32, data)
        .map_err(engine("open the RISC-V engine"))?;
    uc.mem_map(u64::from(map.itcm.origin), u64::from(map.itcm.len), itcm)
        .map_err(engine("map the ITCM"))?;
    uc.mem_map(
        u64::from(map.dtcm.origin),
        u64::from(map.dtcm.len + map.noinit.len),
        dtcm,
    )
    .map_err(engine("map the DTCM"))?;
    Ok(uc)
}

/// The code an engine runs: the ITCM's bytes, and what the instruction counter learnt of it.
pub(crate) struct Code {
    text: Arc<[u8]>,
    base: u32,
    /// Per halfword of `text`: the size of the block last seen starting there and its
    /// instructions (a block is counted once, then looked up).
    blocks: Vec<(u32, u32)>,
}

impl Code {
    /// Instructions in the block `[addr, addr + size)`.
    #[inline]
    fn count(&mut self, addr: u64, size: u32) -> u64 {
        let start = addr.wrapping_sub(u64::from(self.base)) as usize;
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

/// What the engine's hooks reach: the running core's state and the code.
pub(crate) struct Slot {
    pub(crate) core: Box<State>,
    code: Code,
}

/// A core's CPU registers between its runs.
pub(crate) struct Cpu(pub(crate) Context);

/// An engine and the cores taking turns on it.
pub(crate) struct Engine {
    pub(crate) uc: Unicorn<'static, Slot>,
    /// Where the DTCM (and NOINIT) is, and its bytes.
    ram_base: u32,
    ram_len: usize,
    /// The core whose DTCM is in the engine's RAM.
    resident: Option<u64>,
    /// The DTCM of the other cores on the engine.
    parked: HashMap<u64, Box<[u8]>>,
    /// A buffer for the next switch.
    spare: Box<[u8]>,
    /// The CPU as the engine created it (power-on, a reset).
    fresh: Cpu,
}

/// The engines cores can share, by their code.
type ByCode = Vec<(Arc<[u8]>, Weak<Mutex<Engine>>)>;
static SHARED: Mutex<ByCode> = Mutex::new(Vec::new());

/// An engine, locked (a core that panicked inside a run leaves nothing the next run relies
/// on: each run restores its own registers, RAM and state).
pub(crate) fn lock(e: &Mutex<Engine>) -> MutexGuard<'_, Engine> {
    e.lock().unwrap_or_else(|p| p.into_inner())
}

impl Engine {
    /// The engine the cores with `text` in their ITCM share (a new one if none has it).
    pub(crate) fn for_code(map: &NicMap, text: Vec<u8>) -> Result<Arc<Mutex<Engine>>, ElfError> {
        let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        shared.retain(|(_, e)| e.strong_count() > 0);
        if let Some(e) = shared
            .iter()
            .filter(|(t, _)| **t == *text)
            .find_map(|(_, e)| e.upgrade())
        {
            return Ok(e);
        }
        let text: Arc<[u8]> = text.into();
        let e = Arc::new(Mutex::new(Engine::new(map, text.clone())?));
        shared.push((text, Arc::downgrade(&e)));
        Ok(e)
    }

    /// An engine of its own for a core running `text` (not shared).
    pub(crate) fn private(map: &NicMap, text: Arc<[u8]>) -> Result<Arc<Mutex<Engine>>, ElfError> {
        Ok(Arc::new(Mutex::new(Engine::new(map, text)?)))
    }

    /// A fresh engine: the NIC's memories mapped, `text` in the ITCM, the CSR window, the
    /// flash window and the instruction counter hooked.
    fn new(map: &NicMap, text: Arc<[u8]>) -> Result<Engine, ElfError> {
        let slot = Slot {
            core: Box::new(State::new(crate::device::Device::new(map.regs))),
            code: Code {
                blocks: vec![(u32::MAX, 0); text.len() / 2],
                text: text.clone(),
                base: map.itcm.origin,
            },
        };
        let mut uc = open_engine(map, slot, Prot::READ | Prot::EXEC, Prot::READ | Prot::WRITE)?;
        uc.mem_write(u64::from(map.itcm.origin), &text)
            .map_err(engine("load the code"))?;
        hook(&mut uc, map)?;
        // No address ends a run (see `Engine::run`).
        uc.ctl_exits_enable().map_err(engine("run without exits"))?;
        let fresh = Cpu(uc.context_init().map_err(engine("save the CPU"))?);
        let ram_len = (map.dtcm.len + map.noinit.len) as usize;
        Ok(Engine {
            uc,
            ram_base: map.dtcm.origin,
            ram_len,
            resident: None,
            parked: HashMap::new(),
            spare: vec![0; ram_len].into_boxed_slice(),
            fresh,
        })
    }

    /// The code in the ITCM.
    pub(crate) fn text(&self) -> &Arc<[u8]> {
        &self.uc.get_data().code.text
    }

    /// A CPU at power-on.
    pub(crate) fn fresh_cpu(&mut self) -> Result<Cpu, ElfError> {
        self.uc
            .context_restore(&self.fresh.0)
            .map_err(engine("restore the CPU"))?;
        Ok(Cpu(self
            .uc
            .context_init()
            .map_err(engine("save the CPU"))?))
    }

    /// Core `id` joins with `ram` as its DTCM.
    pub(crate) fn join(&mut self, id: u64, ram: Box<[u8]>) {
        self.parked.insert(id, ram);
    }

    /// Core `id` leaves: its DTCM.
    pub(crate) fn leave(&mut self, id: u64) -> Result<Box<[u8]>, ElfError> {
        if self.resident == Some(id) {
            self.resident = None;
            let mut ram = vec![0; self.ram_len].into_boxed_slice();
            self.uc
                .mem_read(u64::from(self.ram_base), &mut ram)
                .map_err(engine("read the RAM"))?;
            return Ok(ram);
        }
        self.parked.remove(&id).ok_or_else(|| not_here(id))
    }

    /// Core `id` is gone: its DTCM with it.
    pub(crate) fn forget(&mut self, id: u64) {
        if self.resident == Some(id) {
            self.resident = None;
        }
        self.parked.remove(&id);
    }

    /// Core `id`'s run begins with `cpu` and `state`: its DTCM in the RAM (`true`: it was
    /// switched in), its registers, its state in the hooks' reach.
    pub(crate) fn enter(
        &mut self,
        id: u64,
        cpu: &Cpu,
        state: &mut Box<State>,
    ) -> Result<bool, ElfError> {
        let switched = self.resident != Some(id);
        if switched {
            let mine = self.parked.remove(&id).ok_or_else(|| not_here(id))?;
            let base = u64::from(self.ram_base);
            if let Some(r) = self.resident.take() {
                let mut out = std::mem::take(&mut self.spare);
                self.uc
                    .mem_read(base, &mut out)
                    .map_err(engine("park the RAM"))?;
                self.parked.insert(r, out);
            }
            self.uc
                .mem_write(base, &mine)
                .map_err(engine("switch the RAM"))?;
            self.spare = mine;
            self.resident = Some(id);
        }
        self.uc
            .context_restore(&cpu.0)
            .map_err(engine("restore the CPU"))?;
        std::mem::swap(&mut self.uc.get_data_mut().core, state);
        Ok(switched)
    }

    /// Runs the core that entered from `pc` until a hook stops it or the guest parks. No
    /// address ends a run: the engine is in Unicorn's exits mode with no exit listed, as
    /// Unicorn drops the translations of the page holding a run's `until` address after every
    /// run (any address would be some page's: the ITCM's first page was).
    pub(crate) fn run(&mut self, pc: u64) -> Result<(), unicorn_engine::uc_error> {
        self.uc.emu_start(pc, 0, 0, 0)
    }

    /// The run [`Engine::enter`] began ends: the registers saved into `cpu`, the state moved
    /// back into `state`.
    pub(crate) fn exit(&mut self, cpu: &mut Cpu, state: &mut Box<State>) -> Result<(), ElfError> {
        std::mem::swap(&mut self.uc.get_data_mut().core, state);
        self.uc
            .context_save(&mut cpu.0)
            .map_err(engine("save the CPU"))
    }

    /// Where `[addr, addr + len)` is in the DTCM (`None`: outside it).
    fn ram_offset(&self, addr: u32, len: usize) -> Result<Option<usize>, String> {
        let (a, base) = (u64::from(addr), u64::from(self.ram_base));
        let end = a + len as u64;
        if end <= base || a >= base + self.ram_len as u64 {
            return Ok(None);
        }
        if a < base || end > base + self.ram_len as u64 {
            return Err("the range crosses an edge of the DTCM".into());
        }
        Ok(Some((a - base) as usize))
    }

    /// Core `id`'s parked DTCM (`None`: it is the resident, its DTCM is the engine's RAM).
    fn parked(&mut self, id: u64) -> Result<Option<&mut [u8]>, String> {
        if self.resident == Some(id) {
            return Ok(None);
        }
        match self.parked.get_mut(&id) {
            Some(r) => Ok(Some(r)),
            None => Err(format!("core {id} is not on this engine")),
        }
    }

    /// Reads core `id`'s memory.
    pub(crate) fn read(&mut self, id: u64, addr: u32, out: &mut [u8]) -> Result<(), String> {
        if let Some(o) = self.ram_offset(addr, out.len())? {
            if let Some(ram) = self.parked(id)? {
                out.copy_from_slice(&ram[o..o + out.len()]);
                return Ok(());
            }
        }
        self.uc
            .mem_read(u64::from(addr), out)
            .map_err(|e| format!("{e:?}"))
    }

    /// Writes core `id`'s DTCM (the ITCM is the engine's code: [`crate::ElfCore::write_mem`]
    /// moves a core whose code changes to another engine).
    pub(crate) fn write(&mut self, id: u64, addr: u32, bytes: &[u8]) -> Result<(), String> {
        if let Some(o) = self.ram_offset(addr, bytes.len())? {
            if let Some(ram) = self.parked(id)? {
                ram[o..o + bytes.len()].copy_from_slice(bytes);
                return Ok(());
            }
        }
        self.uc
            .mem_write(u64::from(addr), bytes)
            .map_err(|e| format!("{e:?}"))
    }
}

fn not_here(id: u64) -> ElfError {
    ElfError::Engine(format!("core {id} is not on this engine"))
}

/// The engine's hooks: the CSR window and the flash window served by the running core's
/// device, every block counted, guest exceptions taken.
fn hook(uc: &mut Unicorn<'static, Slot>, map: &NicMap) -> Result<(), ElfError> {
    uc.mmio_map(
        u64::from(map.csr.origin),
        u64::from(map.csr.len),
        Some(|uc: &mut Unicorn<'_, Slot>, off: u64, size: usize| {
            let d = &mut uc.get_data_mut().core.dev;
            let was = d.stop;
            let v = d.read(off as u32, size);
            if was.is_none() && d.stop.is_some() {
                let _ = uc.emu_stop();
            }
            u64::from(v)
        }),
        Some(
            |uc: &mut Unicorn<'_, Slot>, off: u64, size: usize, v: u64| {
                let s = &mut uc.get_data_mut().core;
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
        Some(|uc: &mut Unicorn<'_, Slot>, off: u64, size: usize| {
            let d = &mut uc.get_data_mut().core.dev;
            let mut b = [0u8; 8];
            let n = size.min(8);
            if let Some(src) = d.flash.read(off as u32, n) {
                b[..n].copy_from_slice(src);
            }
            u64::from_le_bytes(b)
        }),
        Some(
            |uc: &mut Unicorn<'_, Slot>, _off: u64, _size: usize, _v: u64| {
                uc.get_data_mut().core.dev.counters.unknown_writes += 1;
            },
        ),
    )
    .map_err(engine("map the flash window"))?;
    uc.add_block_hook(1, 0, |uc: &mut Unicorn<'_, Slot>, addr: u64, size: u32| {
        let Slot { core: s, code } = uc.get_data_mut();
        if s.dev.stop.is_some() {
            return; // (the core stops before this block)
        }
        let n = code.count(addr, size);
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
    uc.add_intr_hook(|uc: &mut Unicorn<'_, Slot>, cause: u32| {
        if take_trap(uc, cause).is_err() {
            uc.get_data_mut().core.trap_failed = true;
            let _ = uc.emu_stop();
        }
    })
    .map_err(engine("hook traps"))?;
    Ok(())
}

/// `mstatus` bits.
const MSTATUS_MIE: u64 = 1 << 3;
const MSTATUS_MPIE: u64 = 1 << 7;
const MSTATUS_MPP: u64 = 3 << 11;

/// A synchronous exception `cause` taken into machine mode: `mepc` the faulting
/// instruction, `mcause`, `mtval` 0, `mstatus` MPIE = MIE, MIE = 0, MPP = M, pc = `mtvec`'s
/// base (exceptions go there in both of its modes).
fn take_trap(uc: &mut Unicorn<'_, Slot>, cause: u32) -> Result<(), unicorn_engine::uc_error> {
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
    uc.get_data_mut().core.traps += 1;
    Ok(())
}
