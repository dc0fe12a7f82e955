//! The NIC core's memory map, read from `firmware/memory-map.toml` (target `nic`), the file
//! the image's linker script and `hal` constants are generated from.

use mrc_memmap::{Kind, MemoryMap};

use crate::ElfError;

/// The memory map's text, compiled in.
const MAP_TOML: &str = include_str!("../../../../firmware/memory-map.toml");

/// A region: origin and length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First address.
    pub origin: u32,
    /// Length in bytes.
    pub len: u32,
}

impl Span {
    /// Whether `[addr, addr + len)` lies inside.
    pub fn holds(&self, addr: u32, len: u32) -> bool {
        addr >= self.origin
            && u64::from(addr) + u64::from(len) <= u64::from(self.origin) + u64::from(self.len)
    }
}

/// What the emulated core needs of the map: its memories, the CSR window and the offsets of
/// the registers in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicMap {
    /// Code (the core boots at its origin).
    pub itcm: Span,
    /// Data, `.bss` and stack.
    pub dtcm: Span,
    /// RAM kept across reset (crash record, log ring), right after the DTCM.
    pub noinit: Span,
    /// The datapath CSR window.
    pub csr: Span,
    /// Flash image slot A (memory-mapped flash).
    pub slot_a: Span,
    /// Flash image slot B.
    pub slot_b: Span,
    /// The flash sector holding the boot record.
    pub boot_control: Span,
    /// Register offsets in the CSR window.
    pub regs: Regs,
    /// Timer ticks per second.
    pub mtime_hz: u64,
}

/// Register offsets in the CSR window (from the map's `[target.nic.registers]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regs {
    /// `MTIME`: the 64-bit nanosecond timer (low word, high word at +4).
    pub mtime: u32,
    /// `WDT_KICK`: the watchdog key restarts the period.
    pub wdt_kick: u32,
    /// `WDT_TIMEOUT_NS`: the watchdog period.
    pub wdt_timeout_ns: u32,
    /// `RESET_CAUSE`: why the core last reset.
    pub reset_cause: u32,
    /// `SW_RESET`: 1 resets the core.
    pub sw_reset: u32,
    /// `WAKE_AT`: the main loop's next timer deadline (low word, high word at +4).
    pub wake_at: u32,
    /// `EVQ_RX_BASE`: the DP->FW queue registers (`CsrQueueRegs`).
    pub evq_rx: u32,
    /// `EVQ_TX_BASE`: the FW->DP queue registers.
    pub evq_tx: u32,
    /// `I2C_BASE`: the transceiver management I2C controller.
    pub i2c: u32,
    /// `GPIO_BASE`: link LEDs.
    pub gpio: u32,
    /// `ADMIN_CMDQ_BASE`: admin commands in (64-byte entries).
    pub admin_cmdq: u32,
    /// `ADMIN_RESPQ_BASE`: admin replies out (32-byte entries).
    pub admin_respq: u32,
    /// The QSPI flash controller's block (`mrc_abi::device::flash::reg`).
    pub flash_ctrl: u32,
    /// The host DMA engine's block (`mrc_abi::device::host_dma::reg`).
    pub host_dma: u32,
}

impl NicMap {
    /// The `nic` target of the compiled-in memory map.
    ///
    /// # Errors
    /// The map does not parse, or lacks a region or register the core needs.
    pub fn nic() -> Result<NicMap, ElfError> {
        let map = MemoryMap::parse(MAP_TOML).map_err(ElfError::Map)?;
        let t = map.get("nic").map_err(ElfError::Map)?;
        let span = |name: &str, kind: Kind| -> Result<Span, ElfError> {
            let r = t
                .region
                .iter()
                .find(|r| r.name == name && r.kind == kind)
                .ok_or_else(|| ElfError::Map(format!("no {kind:?} region {name}")))?;
            let origin = u32::try_from(r.origin)
                .map_err(|_| ElfError::Map(format!("region {name} above 4 GiB")))?;
            let len = u32::try_from(r.length)
                .map_err(|_| ElfError::Map(format!("region {name} longer than 4 GiB")))?;
            Ok(Span { origin, len })
        };
        let csr = span("CSR", Kind::Device)?;
        let reg = |name: &str| -> Result<u32, ElfError> {
            let r = t
                .registers
                .get(name)
                .ok_or_else(|| ElfError::Map(format!("no register {name}")))?;
            if r.region != "CSR" {
                return Err(ElfError::Map(format!(
                    "register {name} is not in the CSR window"
                )));
            }
            u32::try_from(r.offset).map_err(|_| ElfError::Map(format!("register {name}")))
        };
        let m = NicMap {
            itcm: span("ITCM", Kind::Ram)?,
            dtcm: span("DTCM", Kind::Ram)?,
            noinit: span("NOINIT", Kind::Noinit)?,
            csr,
            slot_a: span("FLASH_SLOT_A", Kind::Nvm)?,
            slot_b: span("FLASH_SLOT_B", Kind::Nvm)?,
            boot_control: span("FLASH_BOOT_CONTROL", Kind::Nvm)?,
            regs: Regs {
                mtime: reg("MTIME")?,
                wdt_kick: reg("WDT_KICK")?,
                wdt_timeout_ns: reg("WDT_TIMEOUT_NS")?,
                reset_cause: reg("RESET_CAUSE")?,
                sw_reset: reg("SW_RESET")?,
                wake_at: reg("WAKE_AT")?,
                evq_rx: reg("EVQ_RX_BASE")?,
                evq_tx: reg("EVQ_TX_BASE")?,
                i2c: reg("I2C_BASE")?,
                gpio: reg("GPIO_BASE")?,
                admin_cmdq: reg("ADMIN_CMDQ_BASE")?,
                admin_respq: reg("ADMIN_RESPQ_BASE")?,
                flash_ctrl: reg("FLASH_CTRL_BASE")?,
                host_dma: reg("HOST_DMA_BASE")?,
            },
            mtime_hz: t.mtime_hz,
        };
        if m.dtcm.origin + m.dtcm.len != m.noinit.origin {
            return Err(ElfError::Map("NOINIT must follow the DTCM".into()));
        }
        if m.mtime_hz != 1_000_000_000 {
            return Err(ElfError::Map("the NIC timer must count nanoseconds".into()));
        }
        Ok(m)
    }
}
