//! A debug probe on the emulated core, for flash loaders: a probe-rs flash algorithm (the one
//! the chip description lists, `firmware/flash-algo`) run against the board's flash the way
//! probe-rs runs it.
//!
//! What probe-rs does, and this module does the same (probe-rs `FlashAlgorithm::
//! assemble_from_raw` and its flasher, RISC-V):
//! - the algorithm's code is written at its load address, preceded by an 8-byte header of two
//!   `ebreak`s; its data follows the code (two page buffers when the RAM holds them), then the
//!   stack;
//! - each entry point is called with its arguments in `a0..a3`, `sp` at the stack's top, `ra`
//!   at the header: the core runs until the function returns there (a breakpoint), and `a0`
//!   is the result;
//! - an erase is `Init(address, 0, 1)`, `EraseSector` per sector, `UnInit(1)`; a program is
//!   `Init(address, 0, 2)`, per page the page copied into a buffer and `ProgramPage(address,
//!   page_size, buffer)`, `UnInit(2)`.
//!
//! The core sees the ITCM, the DTCM (where the algorithm runs) and the CSR window as the
//! running image sees it ([`Device`], with the [`FlashDevice`] behind its controller: each
//! controller access takes `ACCESS_NS` of the flash's time, so BUSY waits see time pass); an
//! access to a register other than the flash controller's is counted
//! ([`FlashLoader::stray_accesses`]).

use unicorn_engine::{Prot, RegisterRISCV, Unicorn};

use crate::board::flash::{FlashDevice, FlashTiming};
use crate::device::Device;
use crate::engine::{engine, open_engine};
use crate::map::NicMap;
use crate::ElfError;

/// The probe-rs header before the code: two `ebreak`s.
const EBREAK: u32 = 0x0010_0073;
/// Instructions one call may run before it counts as hung.
const CALL_LIMIT: usize = 50_000_000;

/// A flash algorithm as the chip description gives it (probe-rs's `RawFlashAlgorithm`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlashAlgorithm {
    /// Its code (the `PrgCode` section).
    pub instructions: Vec<u8>,
    /// Where the code goes.
    pub load_address: u32,
    /// Entry points, offsets from the code's start.
    pub pc_init: u32,
    /// `UnInit`.
    pub pc_uninit: u32,
    /// `ProgramPage`.
    pub pc_program_page: u32,
    /// `EraseSector`.
    pub pc_erase_sector: u32,
    /// Stack bytes.
    pub stack_size: u32,
    /// Bytes per `ProgramPage` call.
    pub page_size: u32,
    /// Bytes per `EraseSector` call.
    pub sector_size: u32,
}

/// Why a call failed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The algorithm returned a nonzero code.
    #[error("{function} returned {code:#x}")]
    Failed {
        /// The entry point.
        function: &'static str,
        /// Its return value.
        code: u32,
    },
    /// The core did not return to the breakpoint.
    #[error("{function}: {error}")]
    Core {
        /// The entry point.
        function: &'static str,
        /// What happened.
        error: ElfError,
    },
}

struct State {
    dev: Device,
    trapped: Option<u32>,
}

/// The probe with the algorithm loaded.
pub struct FlashLoader {
    uc: Unicorn<'static, State>,
    algo: FlashAlgorithm,
    header: u64,
    buffer: u64,
    stack_top: u64,
}

impl FlashLoader {
    /// Loads `algo` into a halted core of the NIC described by `map`, with `flash` behind its
    /// controller.
    ///
    /// # Errors
    /// The algorithm does not fit the DTCM at its load address, or the engine refused a setup
    /// call.
    pub fn new(algo: FlashAlgorithm, flash: FlashDevice, map: &NicMap) -> Result<Self, ElfError> {
        let header = u64::from(algo.load_address)
            .checked_sub(8)
            .ok_or_else(|| ElfError::Map("load address below the header".into()))?;
        // (probe-rs counts the header words in the code's size: the buffers start 8 bytes
        // later than the code's end)
        let code_end =
            u64::from(algo.load_address) + 8 + algo.instructions.len().next_multiple_of(4) as u64;
        let buffer = code_end;
        let stack_top = buffer + 2 * u64::from(algo.page_size) + u64::from(algo.stack_size);
        let (start, end) = (
            u64::from(map.dtcm.origin),
            u64::from(map.dtcm.origin) + u64::from(map.dtcm.len),
        );
        // (the algorithm, its buffers and stack stay in the DTCM, as probe-rs places them in
        // the RAM region holding the load address; the NOINIT block after it is left alone)
        if header < start || stack_top > end {
            return Err(ElfError::Map(format!(
                "the algorithm, its buffers and stack [{header:#x}, {stack_top:#x}) do not fit the DTCM"
            )));
        }
        let state = State {
            dev: Device::with_flash(map.regs, flash),
            trapped: None,
        };
        let mut uc = open_engine(map, state, Prot::ALL, Prot::ALL)?;
        uc.mmio_map(
            u64::from(map.csr.origin),
            u64::from(map.csr.len),
            Some(|uc: &mut Unicorn<'_, State>, off: u64, size: usize| {
                u64::from(uc.get_data_mut().dev.read(off as u32, size))
            }),
            Some(
                |uc: &mut Unicorn<'_, State>, off: u64, size: usize, v: u64| {
                    uc.get_data_mut().dev.write(off as u32, size, v as u32);
                },
            ),
        )
        .map_err(engine("map the CSR window"))?;
        uc.add_intr_hook(|uc: &mut Unicorn<'_, State>, cause: u32| {
            uc.get_data_mut().trapped = Some(cause);
            let _ = uc.emu_stop();
        })
        .map_err(engine("hook traps"))?;
        let mut code = Vec::with_capacity(8 + algo.instructions.len());
        code.extend_from_slice(&EBREAK.to_le_bytes());
        code.extend_from_slice(&EBREAK.to_le_bytes());
        code.extend_from_slice(&algo.instructions);
        uc.mem_write(header, &code)
            .map_err(engine("load the algorithm"))?;
        Ok(FlashLoader {
            uc,
            algo,
            header,
            buffer,
            stack_top,
        })
    }

    /// Calls the entry point at code offset `pc` with `args`; returns `a0`.
    fn call(&mut self, function: &'static str, pc: u32, args: &[u32]) -> Result<u32, ProbeError> {
        let fail = |error| ProbeError::Core { function, error };
        let regs = [
            RegisterRISCV::A0,
            RegisterRISCV::A1,
            RegisterRISCV::A2,
            RegisterRISCV::A3,
        ];
        for (r, v) in regs.iter().zip(args) {
            self.uc
                .reg_write(*r, u64::from(*v))
                .map_err(|e| fail(engine("set an argument")(e)))?;
        }
        self.uc
            .reg_write(RegisterRISCV::SP, self.stack_top)
            .and_then(|()| self.uc.reg_write(RegisterRISCV::RA, self.header))
            .map_err(|e| fail(engine("set sp and ra")(e)))?;
        let entry = u64::from(self.algo.load_address) + u64::from(pc);
        let ran = self.uc.emu_start(entry, self.header, 0, CALL_LIMIT);
        let at = self.uc.pc_read().unwrap_or(0) as u32;
        if let Some(cause) = self.uc.get_data_mut().trapped.take() {
            return Err(fail(ElfError::Fault {
                error: format!("trap cause {cause}"),
                pc: at,
            }));
        }
        if let Err(e) = ran {
            return Err(fail(ElfError::Fault {
                error: format!("{e:?}"),
                pc: at,
            }));
        }
        if u64::from(at) != self.header {
            return Err(fail(ElfError::Fault {
                error: format!("did not return within {CALL_LIMIT} instructions"),
                pc: at,
            }));
        }
        let a0 = self
            .uc
            .reg_read(RegisterRISCV::A0)
            .map_err(|e| fail(engine("read a0")(e)))?;
        Ok(a0 as u32)
    }

    fn checked(&mut self, function: &'static str, pc: u32, args: &[u32]) -> Result<(), ProbeError> {
        match self.call(function, pc, args)? {
            0 => Ok(()),
            code => Err(ProbeError::Failed { function, code }),
        }
    }

    /// Erases every sector `[address, address + len)` touches, as probe-rs's eraser does.
    ///
    /// # Errors
    /// The first call that failed.
    pub fn erase(&mut self, address: u32, len: u32) -> Result<(), ProbeError> {
        self.checked("Init", self.algo.pc_init, &[address, 0, 1])?;
        let first = address - address % self.algo.sector_size;
        let mut s = first;
        while s < address.saturating_add(len) {
            self.checked("EraseSector", self.algo.pc_erase_sector, &[s])?;
            s += self.algo.sector_size;
        }
        self.checked("UnInit", self.algo.pc_uninit, &[1])
    }

    /// Programs `data` at `address` (page-aligned), page by page through the buffer in RAM, as
    /// probe-rs's flasher does (the last page padded with the erased value).
    ///
    /// # Errors
    /// The first call that failed.
    pub fn program(&mut self, address: u32, data: &[u8]) -> Result<(), ProbeError> {
        self.checked("Init", self.algo.pc_init, &[address, 0, 2])?;
        for (i, page) in data.chunks(self.algo.page_size as usize).enumerate() {
            let mut buf = vec![mrc_abi::device::flash::ERASED; self.algo.page_size as usize];
            buf[..page.len()].copy_from_slice(page);
            self.uc
                .mem_write(self.buffer, &buf)
                .map_err(|e| ProbeError::Core {
                    function: "ProgramPage",
                    error: engine("fill the page buffer")(e),
                })?;
            let at = address + (i as u32) * self.algo.page_size;
            self.checked(
                "ProgramPage",
                self.algo.pc_program_page,
                &[at, self.algo.page_size, self.buffer as u32],
            )?;
        }
        self.checked("UnInit", self.algo.pc_uninit, &[2])
    }

    /// Calls `EraseSector` alone (after `Init` for erasing), for callers probing the
    /// algorithm's refusals. Returns its code.
    ///
    /// # Errors
    /// `Init` failed or the core did not return.
    pub fn erase_sector_raw(&mut self, address: u32) -> Result<u32, ProbeError> {
        self.checked("Init", self.algo.pc_init, &[address, 0, 1])?;
        let code = self.call("EraseSector", self.algo.pc_erase_sector, &[address])?;
        self.checked("UnInit", self.algo.pc_uninit, &[1])?;
        Ok(code)
    }

    /// The flash behind the controller.
    pub fn flash(&self) -> &FlashDevice {
        &self.uc.get_data().dev.flash
    }

    /// Takes the flash out (the board, after flashing).
    pub fn into_flash(mut self) -> FlashDevice {
        std::mem::replace(
            &mut self.uc.get_data_mut().dev.flash,
            FlashDevice::new(FlashTiming::INSTANT),
        )
    }

    /// Accesses to CSR registers other than the flash controller's.
    pub fn stray_accesses(&self) -> u64 {
        let c = &self.uc.get_data().dev.counters;
        c.unknown_reads + c.unknown_writes
    }

    /// The flash's time the calls so far took, in ns.
    pub fn device_time_ns(&self) -> u64 {
        self.uc.get_data().dev.flash_time_ns()
    }
}
