//! The NIC's QSPI flash controller (`mrc_abi::device::flash`): erase sectors, program pages,
//! with every refusal the controller reports turned into an [`Error`] naming its cause.
//!
//! The driver reaches the controller through [`Regs`] (32-bit register reads and writes at
//! offsets from the controller's base), so the same code runs in the NIC image (MMIO in its
//! `hal`), in the probe-rs flash algorithm, and on the host against the simulated device.
//! Reads of flash contents go through the memory-mapped window, not this driver.

use mrc_abi::device::flash::{cmd, reg, status, ErrCause, FLASH_BYTES, PAGE_BYTES, SECTOR_BYTES};

/// 32-bit access to the controller's registers.
pub trait Regs {
    /// Reads the register at `offset` from the controller's base.
    fn read(&mut self, offset: u32) -> u32;
    /// Writes `value` to the register at `offset` from the controller's base.
    fn write(&mut self, offset: u32, value: u32);
}

/// Why an operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The driver refused the operands before touching the device (same rules as the device).
    Refused(ErrCause),
    /// The device refused a command.
    Device(ErrCause),
    /// The device reported an error with a cause code this driver does not know.
    UnknownCause(u32),
}

impl Error {
    /// A nonzero code for interfaces that carry one (the flash algorithm's return value):
    /// the cause code, plus 0x100 when the device (not the driver) refused.
    pub fn code(self) -> u32 {
        match self {
            Error::Refused(c) => c as u32,
            Error::Device(c) => 0x100 | c as u32,
            Error::UnknownCause(v) => 0x200 | (v & 0xff),
        }
    }
}

/// The flash controller behind `R`.
pub struct Flash<R: Regs> {
    regs: R,
}

impl<R: Regs> Flash<R> {
    /// The controller behind `regs`; clears an error left by an earlier user.
    pub fn new(mut regs: R) -> Self {
        regs.write(reg::STATUS, status::ERROR);
        Flash { regs }
    }

    /// The register access back.
    pub fn release(self) -> R {
        self.regs
    }

    /// Erases the sector at flash offset `offset` (a multiple of [`SECTOR_BYTES`]).
    ///
    /// # Errors
    /// The cause the operands or the device were refused for.
    pub fn erase_sector(&mut self, offset: u32) -> Result<(), Error> {
        if let Some(c) = ErrCause::check(cmd::ERASE_SECTOR, offset, 0) {
            return Err(Error::Refused(c));
        }
        self.wait_idle();
        self.regs.write(reg::ADDR, offset);
        self.regs.write(reg::CMD, cmd::ERASE_SECTOR);
        self.finish()
    }

    /// Erases the sector holding `offset`, then programs `data` at `offset` (a record that
    /// fits in the rest of its sector: the boot record).
    ///
    /// # Errors
    /// As [`Flash::erase_sector`] and [`Flash::program`].
    pub fn rewrite(&mut self, offset: u32, data: &[u8]) -> Result<(), Error> {
        self.erase_sector(offset - offset % SECTOR_BYTES)?;
        self.program(offset, data)
    }

    /// Erases every sector that `[offset, offset + len)` touches.
    ///
    /// # Errors
    /// As [`Flash::erase_sector`]; the range must lie inside the device.
    pub fn erase_range(&mut self, offset: u32, len: u32) -> Result<(), Error> {
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= FLASH_BYTES)
            .ok_or(Error::Refused(ErrCause::OutOfRange))?;
        let mut s = offset - offset % SECTOR_BYTES;
        while s < end {
            self.erase_sector(s)?;
            s += SECTOR_BYTES;
        }
        Ok(())
    }

    /// Programs `data` at flash offset `offset`, one page command per page it touches (the
    /// target bytes should be erased: programming only clears bits).
    ///
    /// # Errors
    /// The cause the operands or the device were refused for; pages before the failing one
    /// are written.
    pub fn program(&mut self, offset: u32, data: &[u8]) -> Result<(), Error> {
        let len = u32::try_from(data.len()).map_err(|_| Error::Refused(ErrCause::OutOfRange))?;
        if offset.checked_add(len).is_none_or(|e| e > FLASH_BYTES) {
            return Err(Error::Refused(ErrCause::OutOfRange));
        }
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let room = (PAGE_BYTES - at % PAGE_BYTES) as usize;
            let (chunk, tail) = rest.split_at(room.min(rest.len()));
            self.program_page(at, chunk)?;
            at += chunk.len() as u32;
            rest = tail;
        }
        Ok(())
    }

    /// Programs `data` (1..=[`PAGE_BYTES`] bytes, inside one page) at `offset`.
    ///
    /// # Errors
    /// The cause the operands or the device were refused for.
    pub fn program_page(&mut self, offset: u32, data: &[u8]) -> Result<(), Error> {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        if let Some(c) = ErrCause::check(cmd::PROGRAM, offset, len) {
            return Err(Error::Refused(c));
        }
        self.wait_idle();
        for (i, word) in data.chunks(4).enumerate() {
            let mut b = [0xff; 4];
            b[..word.len()].copy_from_slice(word);
            self.regs
                .write(reg::BUF + 4 * i as u32, u32::from_le_bytes(b));
        }
        self.regs.write(reg::ADDR, offset);
        self.regs.write(reg::LEN, len);
        self.regs.write(reg::CMD, cmd::PROGRAM);
        self.finish()
    }

    fn wait_idle(&mut self) -> u32 {
        loop {
            let s = self.regs.read(reg::STATUS);
            if s & status::BUSY == 0 {
                return s;
            }
            core::hint::spin_loop();
        }
    }

    fn finish(&mut self) -> Result<(), Error> {
        if self.wait_idle() & status::ERROR == 0 {
            return Ok(());
        }
        let code = self.regs.read(reg::ERR_CAUSE);
        self.regs.write(reg::STATUS, status::ERROR);
        Err(ErrCause::from_u32(code).map_or(Error::UnknownCause(code), Error::Device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records every access; STATUS reads answer `status` (BUSY for `busy_reads` reads first).
    #[derive(Default)]
    struct Log {
        writes: Vec<(u32, u32)>,
        busy_reads: u32,
        status: u32,
        cause: u32,
    }

    impl Regs for &mut Log {
        fn read(&mut self, offset: u32) -> u32 {
            match offset {
                reg::STATUS if self.busy_reads > 0 => {
                    self.busy_reads -= 1;
                    status::BUSY
                }
                reg::STATUS => self.status,
                reg::ERR_CAUSE => self.cause,
                _ => 0,
            }
        }
        fn write(&mut self, offset: u32, value: u32) {
            self.writes.push((offset, value));
        }
    }

    #[test]
    fn a_page_is_buffer_words_then_addr_len_cmd() {
        let mut log = Log::default();
        let mut f = Flash::new(&mut log);
        f.program_page(0x1_0003, &[1, 2, 3, 4, 5]).unwrap();
        f.release();
        assert_eq!(
            log.writes,
            [
                (reg::STATUS, status::ERROR),
                (reg::BUF, 0x0403_0201),
                (reg::BUF + 4, 0xffff_ff05),
                (reg::ADDR, 0x1_0003),
                (reg::LEN, 5),
                (reg::CMD, cmd::PROGRAM),
            ]
        );
    }

    #[test]
    fn program_splits_at_page_boundaries() {
        let mut log = Log::default();
        let mut f = Flash::new(&mut log);
        let data = [0xa5u8; 600];
        f.program(PAGE_BYTES - 10, &data).unwrap();
        f.release();
        let pages: Vec<(u32, u32)> = log
            .writes
            .windows(2)
            .filter(|w| w[0].0 == reg::ADDR)
            .map(|w| (w[0].1, w[1].1))
            .collect();
        assert_eq!(
            pages,
            [
                (PAGE_BYTES - 10, 10),
                (PAGE_BYTES, 256),
                (2 * PAGE_BYTES, 256),
                (3 * PAGE_BYTES, 78)
            ]
        );
    }

    #[test]
    fn bad_operands_never_reach_the_device() {
        let mut log = Log::default();
        let mut f = Flash::new(&mut log);
        assert_eq!(
            f.erase_sector(100),
            Err(Error::Refused(ErrCause::Unaligned))
        );
        assert_eq!(
            f.program_page(250, &[0; 8]),
            Err(Error::Refused(ErrCause::CrossesPage))
        );
        assert_eq!(
            f.program(FLASH_BYTES - 4, &[0; 8]),
            Err(Error::Refused(ErrCause::OutOfRange))
        );
        assert_eq!(
            f.erase_range(FLASH_BYTES - 4, 8),
            Err(Error::Refused(ErrCause::OutOfRange))
        );
        f.release();
        assert_eq!(log.writes, [(reg::STATUS, status::ERROR)]);
    }

    #[test]
    fn waits_while_busy_and_reports_the_device_cause() {
        let mut log = Log {
            busy_reads: 3,
            status: status::ERROR,
            cause: ErrCause::Busy as u32,
            ..Log::default()
        };
        let mut f = Flash::new(&mut log);
        assert_eq!(f.erase_sector(0), Err(Error::Device(ErrCause::Busy)));
        f.release();
        assert_eq!(log.busy_reads, 0);
        // The error is cleared after it was read.
        assert_eq!(log.writes.last(), Some(&(reg::STATUS, status::ERROR)));
        assert_eq!(Error::Device(ErrCause::Busy).code(), 0x101);
        assert_eq!(Error::Refused(ErrCause::CrossesPage).code(), 6);
    }

    #[test]
    fn erase_range_covers_every_touched_sector() {
        let mut log = Log::default();
        let mut f = Flash::new(&mut log);
        f.erase_range(SECTOR_BYTES - 1, 2).unwrap();
        f.release();
        let sectors: Vec<u32> = log
            .writes
            .iter()
            .filter(|w| w.0 == reg::ADDR)
            .map(|w| w.1)
            .collect();
        assert_eq!(sectors, [0, SECTOR_BYTES]);
    }
}
