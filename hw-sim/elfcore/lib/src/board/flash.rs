//! The QSPI NOR flash and its controller, register for register as
//! `mrc_abi::device::flash` describes them.
//!
//! Behaviour (the contract the NIC image and the probe-rs flash algorithm are tested against):
//! - The whole device is erased ([`ERASED`]) when created.
//! - A command starts when [`reg::CMD`] is written and keeps [`status::BUSY`] set for its
//!   duration ([`FlashTiming`]) in the caller's time (`now_ns` on every access). Its effect on
//!   the contents is applied when it starts; a read of the mapped window during a running
//!   command sees the new bytes.
//! - A refused command (busy, unknown, bad operands: [`ErrCause::check`]) changes nothing, sets
//!   [`status::ERROR`] and [`reg::ERR_CAUSE`], and is counted in [`FlashCounters::refused`].
//! - Programming ANDs each byte into the array (NOR: bits only clear); bytes that would have
//!   needed a bit set are counted in [`FlashCounters::unerased_programs`].
//! - An access to an offset that is not a register (or not 4-byte aligned) reads 0, writes
//!   nothing, and is counted in [`FlashCounters::bad_accesses`].

use mrc_fw_update::slots::Slot;
use mrc_fw_update::update::{SlotStorage, StorageError};
use mrc_nic_board::flash::Flash;

use mrc_abi::device::flash::{
    cmd, reg, status, ErrCause, ERASED, FLASH_BYTES, PAGE_BYTES, PAGE_PROGRAM_TYPICAL_US,
    SECTOR_BYTES, SECTOR_ERASE_TYPICAL_US,
};

/// Device time per controller register access (an uncached read or write across the core's
/// bus): BUSY waits are bus reads, so a polling driver sees time pass.
pub const ACCESS_NS: u64 = 100;

/// How long commands keep the controller busy, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashTiming {
    /// One sector erase.
    pub erase_sector_ns: u64,
    /// One page program.
    pub program_page_ns: u64,
}

impl FlashTiming {
    /// The part's typical figures (`mrc_abi::device::flash`).
    pub const TYPICAL: FlashTiming = FlashTiming {
        erase_sector_ns: SECTOR_ERASE_TYPICAL_US as u64 * 1000,
        program_page_ns: PAGE_PROGRAM_TYPICAL_US as u64 * 1000,
    };
    /// Commands complete at once (functional tests).
    pub const INSTANT: FlashTiming = FlashTiming {
        erase_sector_ns: 0,
        program_page_ns: 0,
    };
}

/// What the device did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashCounters {
    /// Sector erases done.
    pub erases: u64,
    /// Page programs done.
    pub programs: u64,
    /// Commands refused.
    pub refused: u64,
    /// Programmed bytes that asked to set a cleared bit (left cleared).
    pub unerased_programs: u64,
    /// Register accesses at offsets that are not registers.
    pub bad_accesses: u64,
}

/// The flash device and its controller.
#[derive(Clone)]
pub struct FlashDevice {
    /// The array, made (erased) at its first use: a device nobody reads past the window's
    /// small accesses or writes costs no memory (the simulator has one per NIC core).
    array: std::cell::OnceCell<Vec<u8>>,
    timing: FlashTiming,
    busy_until_ns: u64,
    addr: u32,
    len: u32,
    buf: [u8; PAGE_BYTES as usize],
    error: Option<ErrCause>,
    counters: FlashCounters,
}

impl FlashDevice {
    /// An erased device with `timing`.
    pub fn new(timing: FlashTiming) -> FlashDevice {
        FlashDevice {
            array: std::cell::OnceCell::new(),
            timing,
            busy_until_ns: 0,
            addr: 0,
            len: 0,
            buf: [ERASED; PAGE_BYTES as usize],
            error: None,
            counters: FlashCounters::default(),
        }
    }

    /// The whole array as the mapped read window shows it (offset 0 = `FLASH_BASE`).
    pub fn contents(&self) -> &[u8] {
        self.array
            .get_or_init(|| vec![ERASED; FLASH_BYTES as usize])
    }

    /// The array, to change.
    fn array_mut(&mut self) -> &mut [u8] {
        self.contents();
        self.array.get_mut().map_or(&mut [], |a| a.as_mut_slice())
    }

    /// `len` bytes of the mapped window at `offset`, or `None` past the device's end.
    pub fn read(&self, offset: u32, len: usize) -> Option<&[u8]> {
        /// What an untouched device answers a small read with.
        static ERASED_BYTES: [u8; 64] = [ERASED; 64];
        let start = offset as usize;
        let end = start.checked_add(len)?;
        if self.array.get().is_none() && len <= ERASED_BYTES.len() {
            return (end <= FLASH_BYTES as usize).then(|| &ERASED_BYTES[..len]);
        }
        self.contents().get(start..end)
    }

    /// What the device did so far.
    pub fn counters(&self) -> FlashCounters {
        self.counters
    }

    /// Whether a command is still running at `now_ns`.
    pub fn busy(&self, now_ns: u64) -> bool {
        now_ns < self.busy_until_ns
    }

    /// Reads the controller register at `offset` at time `now_ns`.
    pub fn read_reg(&mut self, now_ns: u64, offset: u32) -> u32 {
        match offset {
            reg::CMD => 0,
            reg::ADDR => self.addr,
            reg::LEN => self.len,
            reg::STATUS => {
                let mut s = 0;
                if self.busy(now_ns) {
                    s |= status::BUSY;
                }
                if self.error.is_some() {
                    s |= status::ERROR;
                }
                s
            }
            reg::ERR_CAUSE => self.error.map_or(0, |c| c as u32),
            reg::ERASES => self.counters.erases as u32,
            reg::PROGRAMS => self.counters.programs as u32,
            o if Self::buf_word(o).is_some() => {
                let i = Self::buf_word(o).unwrap_or(0);
                u32::from_le_bytes([
                    self.buf[i],
                    self.buf[i + 1],
                    self.buf[i + 2],
                    self.buf[i + 3],
                ])
            }
            _ => {
                self.counters.bad_accesses += 1;
                0
            }
        }
    }

    /// Writes `value` to the controller register at `offset` at time `now_ns`.
    pub fn write_reg(&mut self, now_ns: u64, offset: u32, value: u32) {
        match offset {
            reg::CMD => self.command(now_ns, value),
            reg::ADDR => self.addr = value,
            reg::LEN => self.len = value,
            reg::STATUS => {
                if value & status::ERROR != 0 {
                    self.error = None;
                }
            }
            o => match Self::buf_word(o) {
                Some(i) => self.buf[i..i + 4].copy_from_slice(&value.to_le_bytes()),
                None => self.counters.bad_accesses += 1,
            },
        }
    }

    /// The page-buffer byte index of register offset `o`, if it is a buffer word.
    fn buf_word(o: u32) -> Option<usize> {
        ((reg::BUF..reg::BUF + PAGE_BYTES).contains(&o) && o.is_multiple_of(4))
            .then(|| (o - reg::BUF) as usize)
    }

    fn command(&mut self, now_ns: u64, command: u32) {
        let refused = if self.busy(now_ns) {
            Some(ErrCause::Busy)
        } else {
            ErrCause::check(command, self.addr, self.len)
        };
        if let Some(c) = refused {
            self.error = Some(c);
            self.counters.refused += 1;
            return;
        }
        let at = self.addr as usize;
        match command {
            cmd::ERASE_SECTOR => {
                self.array_mut()[at..at + SECTOR_BYTES as usize].fill(ERASED);
                self.counters.erases += 1;
                self.busy_until_ns = now_ns + self.timing.erase_sector_ns;
            }
            _ => {
                let n = self.len as usize;
                let buf = self.buf;
                let mut unerased = 0;
                for (cell, &b) in self.array_mut()[at..at + n].iter_mut().zip(&buf[..n]) {
                    if b & !*cell != 0 {
                        unerased += 1;
                    }
                    *cell &= b;
                }
                self.counters.unerased_programs += unerased;
                self.counters.programs += 1;
                self.busy_until_ns = now_ns + self.timing.program_page_ns;
            }
        }
    }
}

/// The controller as a driver on the core reaches it: each register access costs `step_ns`
/// of the core's time (which the device's BUSY is measured in).
pub struct ControllerPort<'a> {
    /// The device.
    pub dev: &'a mut FlashDevice,
    /// The core's time now, advanced by each access.
    pub now_ns: u64,
    /// Time per register access.
    pub step_ns: u64,
}

impl mrc_nic_board::flash::Regs for ControllerPort<'_> {
    fn read(&mut self, offset: u32) -> u32 {
        self.now_ns += self.step_ns;
        self.dev.read_reg(self.now_ns, offset)
    }
    fn write(&mut self, offset: u32, value: u32) {
        self.now_ns += self.step_ns;
        self.dev.write_reg(self.now_ns, offset, value);
    }
}

/// The A/B image slots of the flash as `mrc_fw_update`'s storage: reads from the mapped
/// window, erases and writes through the controller with the NIC's own driver (at 1 ns per
/// register access, the device's BUSY waited out).
pub struct FlashSlots<'a> {
    dev: &'a mut FlashDevice,
    /// Flash offsets of slot A and slot B, and the slot size.
    slots: [u32; 2],
    len: u32,
    now_ns: u64,
}

impl<'a> FlashSlots<'a> {
    /// The slots of `map` on `dev`.
    pub fn new(dev: &'a mut FlashDevice, map: &crate::NicMap) -> FlashSlots<'a> {
        let off = |s: crate::map::Span| s.origin - mrc_abi::device::flash::FLASH_BASE;
        FlashSlots {
            dev,
            slots: [off(map.slot_a), off(map.slot_b)],
            len: map.slot_a.len.min(map.slot_b.len),
            now_ns: 0,
        }
    }

    fn span(&self, slot: Slot, offset: u32, len: usize) -> Result<u32, StorageError> {
        let len32 = u32::try_from(len).unwrap_or(u32::MAX);
        if u64::from(offset) + u64::from(len32) > u64::from(self.len) {
            return Err(StorageError::OutOfBounds { offset, len: len32 });
        }
        Ok(self.slots[slot as usize] + offset)
    }

    /// Runs `op` with the NIC's driver on the controller, the device's time carried over.
    fn with_driver<T>(&mut self, op: impl FnOnce(&mut Flash<ControllerPort<'_>>) -> T) -> T {
        let mut f = Flash::new(ControllerPort {
            dev: self.dev,
            now_ns: self.now_ns,
            step_ns: 1,
        });
        let r = op(&mut f);
        self.now_ns = f.release().now_ns;
        r
    }
}

fn device_error(e: mrc_nic_board::flash::Error) -> StorageError {
    StorageError::Device { code: e.code() }
}

impl SlotStorage for FlashSlots<'_> {
    fn capacity(&self) -> u32 {
        self.len
    }
    fn erase(&mut self, slot: Slot) -> Result<(), StorageError> {
        let at = self.span(slot, 0, self.len as usize)?;
        let len = self.len;
        self.with_driver(|f| f.erase_range(at, len))
            .map_err(device_error)
    }
    fn write(&mut self, slot: Slot, offset: u32, data: &[u8]) -> Result<(), StorageError> {
        let at = self.span(slot, offset, data.len())?;
        self.with_driver(|f| f.program(at, data))
            .map_err(device_error)
    }
    fn read(&self, slot: Slot, offset: u32, buf: &mut [u8]) -> Result<(), StorageError> {
        let at = self.span(slot, offset, buf.len())?;
        let src = self
            .dev
            .read(at, buf.len())
            .ok_or(StorageError::OutOfBounds {
                offset,
                len: buf.len() as u32,
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl std::fmt::Debug for FlashDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlashDevice")
            .field("timing", &self.timing)
            .field("busy_until_ns", &self.busy_until_ns)
            .field("error", &self.error)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
