//! The NIC core's host DMA engine (`mrc_abi::device::host_dma`): reads host memory by IOVA,
//! a buffer's worth at a time, with every refusal the engine reports turned into an [`Error`]
//! naming its cause. Same register access as the flash driver ([`crate::flash::Regs`]).

use mrc_abi::device::host_dma::{cmd, reg, status, ErrCause, BUF_BYTES};

use crate::flash::Regs;

/// Why a read failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The driver refused the operands before touching the engine.
    Refused(ErrCause),
    /// The engine refused a command (a host fault among them).
    Device(ErrCause),
    /// The engine reported an error with a cause code this driver does not know.
    UnknownCause(u32),
}

/// The host DMA engine behind `R`.
pub struct HostDma<R: Regs> {
    regs: R,
}

impl<R: Regs> HostDma<R> {
    /// The engine behind `regs`; clears an error left by an earlier user.
    pub fn new(mut regs: R) -> Self {
        regs.write(reg::STATUS, status::ERROR);
        HostDma { regs }
    }

    /// The register access back.
    pub fn release(self) -> R {
        self.regs
    }

    /// Fills `out` from host memory at `iova`, [`BUF_BYTES`] at a time.
    ///
    /// # Errors
    /// The cause the engine refused a read for; `out` is then partly filled.
    pub fn read(&mut self, iova: u64, out: &mut [u8]) -> Result<(), Error> {
        for (k, piece) in out.chunks_mut(BUF_BYTES as usize).enumerate() {
            let at = iova.wrapping_add((k * BUF_BYTES as usize) as u64);
            self.read_piece(at, piece)?;
        }
        Ok(())
    }

    fn read_piece(&mut self, iova: u64, out: &mut [u8]) -> Result<(), Error> {
        let len = out.len() as u32;
        if let Some(c) = ErrCause::check(cmd::READ, len) {
            return Err(Error::Refused(c));
        }
        self.wait_idle();
        self.regs.write(reg::IOVA_LO, iova as u32);
        self.regs.write(reg::IOVA_HI, (iova >> 32) as u32);
        self.regs.write(reg::LEN, len);
        self.regs.write(reg::CMD, cmd::READ);
        if self.wait_idle() & status::ERROR != 0 {
            let code = self.regs.read(reg::ERR_CAUSE);
            self.regs.write(reg::STATUS, status::ERROR);
            return Err(ErrCause::from_u32(code).map_or(Error::UnknownCause(code), Error::Device));
        }
        for (i, word) in out.chunks_mut(4).enumerate() {
            let w = self.regs.read(reg::BUF + 4 * i as u32).to_le_bytes();
            word.copy_from_slice(&w[..word.len()]);
        }
        Ok(())
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine over a host memory of `host` bytes at IOVA 0x1000 (reads elsewhere fault).
    struct Engine {
        host: Vec<u8>,
        iova: u64,
        len: u32,
        buf: [u8; BUF_BYTES as usize],
        cause: u32,
        reads: u32,
    }

    impl Regs for &mut Engine {
        fn read(&mut self, offset: u32) -> u32 {
            match offset {
                reg::STATUS => u32::from(self.cause != 0) * status::ERROR,
                reg::ERR_CAUSE => self.cause,
                o if o >= reg::BUF => {
                    let i = (o - reg::BUF) as usize;
                    u32::from_le_bytes(self.buf[i..i + 4].try_into().unwrap())
                }
                _ => 0,
            }
        }
        fn write(&mut self, offset: u32, value: u32) {
            match offset {
                reg::IOVA_LO => self.iova = (self.iova & !0xffff_ffff) | u64::from(value),
                reg::IOVA_HI => self.iova = (self.iova & 0xffff_ffff) | u64::from(value) << 32,
                reg::LEN => self.len = value,
                reg::STATUS => self.cause = 0,
                reg::CMD => {
                    self.reads += 1;
                    let at = self.iova.wrapping_sub(0x1000) as usize;
                    match self.host.get(at..at + self.len as usize) {
                        Some(b) => self.buf[..b.len()].copy_from_slice(b),
                        None => self.cause = ErrCause::Fault as u32,
                    }
                }
                _ => {}
            }
        }
    }

    #[test]
    fn reads_in_buffer_pieces_and_reports_a_host_fault() {
        let mut e = Engine {
            host: (0..1000u32).map(|i| i as u8).collect(),
            iova: 0,
            len: 0,
            buf: [0; BUF_BYTES as usize],
            cause: 0,
            reads: 0,
        };
        let mut dma = HostDma::new(&mut e);
        let mut out = [0u8; 600];
        dma.read(0x1000 + 7, &mut out).unwrap();
        assert!(out.iter().enumerate().all(|(i, &b)| b == (i + 7) as u8));
        let mut more = [0u8; 10];
        assert_eq!(
            dma.read(0x1000 + 995, &mut more),
            Err(Error::Device(ErrCause::Fault))
        );
        dma.release();
        assert_eq!(e.reads, 4);
        assert_eq!(e.cause, 0, "the error was cleared after it was read");
    }
}
