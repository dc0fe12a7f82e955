//! The NIC core's host DMA engine, register for register as `mrc_abi::device::host_dma`
//! describes it, reading the host memory a [`HostMemory`] gives (the simulated host's DMA
//! space, or a test's buffer).
//!
//! Behaviour: a read completes within the command's register write (the model is untimed:
//! `BUSY` never reads set); a refused command (unknown, bad length, a read the host refuses:
//! [`ErrCause`]) changes nothing in the buffer, sets `ERROR` and `ERR_CAUSE`, and is counted.
//! Without a host memory attached every read is refused [`ErrCause::Fault`]. An access to an
//! offset that is not a register reads 0, writes nothing, and is counted.

use mrc_abi::device::host_dma::{reg, status, ErrCause, BUF_BYTES};

/// Host memory as the device reaches it by IOVA.
pub trait HostMemory: Send {
    /// Fills `out` from `iova`; `false` when the host refuses (not mapped for the device).
    fn read(&mut self, iova: u64, out: &mut [u8]) -> bool;
}

/// One buffer of host memory mapped at `iova`; anything else is not mapped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MappedBuffer {
    /// Where the buffer is mapped.
    pub iova: u64,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl HostMemory for MappedBuffer {
    fn read(&mut self, iova: u64, out: &mut [u8]) -> bool {
        let Some(at) = iova.checked_sub(self.iova) else {
            return false;
        };
        let Some(end) = (at as usize).checked_add(out.len()) else {
            return false;
        };
        match self.bytes.get(at as usize..end) {
            Some(b) => {
                out.copy_from_slice(b);
                true
            }
            None => false,
        }
    }
}

/// What the engine did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostDmaCounters {
    /// Reads done.
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Commands refused (host faults included).
    pub refused: u64,
    /// Register accesses at offsets that are not registers.
    pub bad_accesses: u64,
}

/// The engine.
#[derive(Default)]
pub struct HostDmaEngine {
    iova: u64,
    len: u32,
    buf: Vec<u8>,
    error: Option<ErrCause>,
    counters: HostDmaCounters,
    /// The host memory reads go to (`None`: every read faults).
    pub host: Option<Box<dyn HostMemory>>,
}

impl HostDmaEngine {
    /// What the engine did so far.
    pub fn counters(&self) -> HostDmaCounters {
        self.counters
    }

    /// Reads the register at `offset`.
    pub fn read_reg(&mut self, offset: u32) -> u32 {
        match offset {
            reg::IOVA_LO => self.iova as u32,
            reg::IOVA_HI => (self.iova >> 32) as u32,
            reg::LEN => self.len,
            reg::CMD => 0,
            reg::STATUS => u32::from(self.error.is_some()) * status::ERROR,
            reg::ERR_CAUSE => self.error.map_or(0, |c| c as u32),
            reg::READS => self.counters.reads as u32,
            o if Self::buf_word(o).is_some() => {
                let i = Self::buf_word(o).unwrap_or(0);
                let b = |k: usize| self.buf.get(i + k).copied().unwrap_or(0);
                u32::from_le_bytes([b(0), b(1), b(2), b(3)])
            }
            _ => {
                self.counters.bad_accesses += 1;
                0
            }
        }
    }

    /// Writes `value` to the register at `offset`.
    pub fn write_reg(&mut self, offset: u32, value: u32) {
        match offset {
            reg::IOVA_LO => self.iova = (self.iova & !0xffff_ffff) | u64::from(value),
            reg::IOVA_HI => self.iova = (self.iova & 0xffff_ffff) | (u64::from(value) << 32),
            reg::LEN => self.len = value,
            reg::CMD => self.command(value),
            reg::STATUS => {
                if value & status::ERROR != 0 {
                    self.error = None;
                }
            }
            _ => self.counters.bad_accesses += 1,
        }
    }

    fn buf_word(o: u32) -> Option<usize> {
        ((reg::BUF..reg::BUF + BUF_BYTES).contains(&o) && o.is_multiple_of(4))
            .then(|| (o - reg::BUF) as usize)
    }

    fn command(&mut self, command: u32) {
        if let Some(c) = ErrCause::check(command, self.len) {
            self.refuse(c);
            return;
        }
        let mut bytes = vec![0u8; self.len as usize];
        let ok = self
            .host
            .as_mut()
            .is_some_and(|h| h.read(self.iova, &mut bytes));
        if !ok {
            self.refuse(ErrCause::Fault);
            return;
        }
        bytes.resize(BUF_BYTES as usize, 0);
        self.buf = bytes;
        self.counters.reads += 1;
        self.counters.bytes += u64::from(self.len);
    }

    fn refuse(&mut self, c: ErrCause) {
        self.error = Some(c);
        self.counters.refused += 1;
    }
}

impl std::fmt::Debug for HostDmaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostDmaEngine")
            .field("error", &self.error)
            .field("counters", &self.counters)
            .field("host", &self.host.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_abi::device::host_dma::cmd;
    use mrc_nic_board::host_dma::{Error, HostDma};

    impl mrc_nic_board::flash::Regs for &mut HostDmaEngine {
        fn read(&mut self, offset: u32) -> u32 {
            self.read_reg(offset)
        }
        fn write(&mut self, offset: u32, value: u32) {
            self.write_reg(offset, value);
        }
    }

    #[test]
    fn the_board_driver_reads_host_memory_and_sees_faults() {
        let mut e = HostDmaEngine::default();
        {
            let mut dma = HostDma::new(&mut e);
            let mut out = [0u8; 8];
            assert_eq!(
                dma.read(0x8000, &mut out),
                Err(Error::Device(ErrCause::Fault)),
                "no host memory attached"
            );
        }
        e.host = Some(Box::new(MappedBuffer {
            iova: 0x8000,
            bytes: (0..2000u32).map(|i| (i * 3) as u8).collect(),
        }));
        let mut dma = HostDma::new(&mut e);
        let mut out = vec![0u8; 700];
        dma.read(0x8000 + 11, &mut out).unwrap();
        assert!(out
            .iter()
            .enumerate()
            .all(|(i, &b)| b == ((i as u32 + 11) * 3) as u8));
        let mut past = [0u8; 4];
        assert_eq!(
            dma.read(0x8000 + 1998, &mut past),
            Err(Error::Device(ErrCause::Fault))
        );
        dma.release();
        let c = e.counters();
        assert_eq!((c.reads, c.bytes, c.refused), (3, 700, 2));
        e.write_reg(reg::LEN, 0);
        e.write_reg(reg::CMD, cmd::READ);
        assert_eq!(e.read_reg(reg::ERR_CAUSE), ErrCause::BadLength as u32);
    }
}
