//! The test twin: an in-memory [`Backend`] for unit tests of the layers above and for simple
//! device models.
//!
//! - BAR0 is a zeroed byte array. A *write hook* ([`Twin::on_mmio_write`]) sees every driver
//!   MMIO write after it lands, so a test or model can react to a doorbell; a *read hook*
//!   ([`Twin::on_mmio_read`]) can supply a register's value (e.g. clear-on-read status).
//! - DMA regions are heap memory with fake IOVAs from an [`IovaAllocator`]. The device side
//!   ([`TwinDevice::dma_read`] / [`TwinDevice::dma_write`]) reaches them by IOVA while the
//!   driver holds them and gets [`Error::DmaFault`] after they are freed.
//! - Application memory ([`Backend::map_user`]) is reached directly at IOVA = its address.
//!   Memory another process shares (a vfio-user client's DMA_MAP) joins with
//!   [`TwinDevice::attach_dma`]. A device-side access may span adjacent regions.
//! - Interrupts are real eventfds (epoll works) plus a counter per vector;
//!   [`TwinDevice::raise_interrupt`] fires one. [`TwinDevice::route_interrupt`] sends a vector
//!   to another eventfd instead (a vfio-user client's).
//! - Config space is a byte array with vendor and device ids filled in.
//!
//! Hooks receive the [`TwinDevice`] (not the [`Twin`]), so they can touch registers, DMA memory
//! and interrupts but cannot re-enter the driver-side MMIO path.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::mem::{DmaHandle, RawMem};
use super::{
    check_config, check_mmio, Backend, Bdf, DmaRegion, DmaRelease, Error, EventFd, Iova,
    IovaAllocator, Result, UserRange,
};

/// Shape of a twin device.
#[derive(Clone, Debug)]
pub struct TwinConfig {
    /// PCI address reported in errors.
    pub bdf: Bdf,
    /// BAR0 size in bytes.
    pub bar0_len: u64,
    /// Config space size (256 or 4096).
    pub config_len: u64,
    /// Interrupt vectors.
    pub vectors: u32,
    /// Vendor id at config offset 0 (default [`mrc_abi::device::regs::PCI_VENDOR_ID`]).
    pub vendor_id: u16,
    /// Device id at config offset 2 (default [`mrc_abi::device::regs::PCI_DEVICE_ID`]).
    pub device_id: u16,
    /// Fake IOVA window for DMA regions.
    pub iova_base: Iova,
    /// Size of the window.
    pub iova_span: u64,
}

impl Default for TwinConfig {
    fn default() -> Self {
        TwinConfig {
            bdf: Bdf::new(0, 0, 4, 0).unwrap_or_default(),
            bar0_len: 64 * 1024,
            config_len: 4096,
            vectors: 4,
            vendor_id: mrc_abi::device::regs::PCI_VENDOR_ID,
            device_id: mrc_abi::device::regs::PCI_DEVICE_ID,
            iova_base: Iova(0x1_0000_0000),
            iova_span: 1 << 32,
        }
    }
}

/// One driver MMIO write, as the write hook sees it (after it landed in BAR0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmioWrite {
    /// Byte offset in BAR0.
    pub offset: u64,
    /// 4 or 8.
    pub size: usize,
    /// The value written.
    pub value: u64,
}

/// Reacts to driver MMIO writes.
pub type WriteHook = Box<dyn FnMut(&TwinDevice, MmioWrite) + Send>;
/// Supplies register values on driver MMIO reads: `(device, offset, size)`; `None` reads BAR0.
pub type ReadHook = Box<dyn FnMut(&TwinDevice, u64, usize) -> Option<u64> + Send>;

/// Counters of driver activity.
#[derive(Debug, Default)]
pub struct TwinCounters {
    /// Driver MMIO reads.
    pub mmio_reads: AtomicU64,
    /// Driver MMIO writes.
    pub mmio_writes: AtomicU64,
    /// DMA regions allocated.
    pub dma_allocs: AtomicU64,
    /// DMA regions released.
    pub dma_frees: AtomicU64,
}

/// The device side of a twin: what a device model touches.
pub struct TwinDevice {
    bdf: Bdf,
    bar0: RawMem,
    config: Mutex<Vec<u8>>,
    irqs: Vec<EventFd>,
    /// Per vector: where it goes instead of `irqs` (`route_interrupt`).
    routes: Mutex<Vec<Option<EventFd>>>,
    raised: Vec<AtomicU64>,
    dma: Mutex<Vec<DmaHandle>>,
    counters: TwinCounters,
}

impl fmt::Debug for TwinDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TwinDevice")
            .field("bdf", &self.bdf)
            .field("bar0_len", &self.bar0.len())
            .field("vectors", &self.irqs.len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking hook must not wedge every later test assertion: take the data anyway.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TwinDevice {
    /// The PCI address.
    pub fn bdf(&self) -> Bdf {
        self.bdf
    }
    /// Driver activity counters.
    pub fn counters(&self) -> &TwinCounters {
        &self.counters
    }

    /// Device-side register read (no hooks, no counters).
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    pub fn reg_read32(&self, offset: u64) -> Result<u32> {
        check_mmio(self.bdf, 0, offset, 4, self.bar0.len() as u64)?;
        self.bar0
            .read(offset)
            .map_err(|_| self.misaligned(offset, 4))
    }
    /// Device-side register write (no hooks, no counters).
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    pub fn reg_write32(&self, offset: u64, value: u32) -> Result<()> {
        check_mmio(self.bdf, 0, offset, 4, self.bar0.len() as u64)?;
        self.bar0
            .write(offset, value)
            .map_err(|_| self.misaligned(offset, 4))
    }
    /// Device-side 64-bit register read.
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    pub fn reg_read64(&self, offset: u64) -> Result<u64> {
        check_mmio(self.bdf, 0, offset, 8, self.bar0.len() as u64)?;
        self.bar0
            .read(offset)
            .map_err(|_| self.misaligned(offset, 8))
    }
    /// Device-side 64-bit register write.
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    pub fn reg_write64(&self, offset: u64, value: u64) -> Result<()> {
        check_mmio(self.bdf, 0, offset, 8, self.bar0.len() as u64)?;
        self.bar0
            .write(offset, value)
            .map_err(|_| self.misaligned(offset, 8))
    }

    fn misaligned(&self, offset: u64, size: usize) -> Error {
        Error::MmioMisaligned {
            bdf: self.bdf,
            region: 0,
            offset,
            size,
        }
    }

    /// Runs `f(handle, iova, offset in the access, length)` over the live regions covering
    /// `size` bytes at `iova` in order (an access may span adjacent regions); a gap is a fault
    /// and nothing after it is touched.
    fn each_piece(
        &self,
        iova: Iova,
        size: usize,
        mut f: impl FnMut(&DmaHandle, Iova, usize, usize) -> Result<()>,
    ) -> Result<()> {
        let fault = Error::DmaFault {
            bdf: self.bdf,
            iova,
            size,
        };
        if iova.0.checked_add(size as u64).is_none() {
            return Err(fault);
        }
        let mut done = 0usize;
        loop {
            let at = Iova(iova.0 + done as u64);
            let handle = lock(&self.dma)
                .iter()
                .find(|h| h.is_live() && h.covers(at, 1))
                .cloned();
            let Some(h) = handle else {
                // An empty access still needs its address mapped.
                return Err(fault);
            };
            let room = (h.iova().0 + h.len() as u64 - at.0) as usize;
            let n = room.min(size - done);
            f(&h, at, done, n).map_err(|_| Error::DmaFault {
                bdf: self.bdf,
                iova,
                size,
            })?;
            done += n;
            if done >= size {
                return Ok(());
            }
        }
    }

    /// Whether device-side DMA may reach `size` bytes at `iova` now (every byte in a live
    /// region), without moving any.
    ///
    /// # Errors
    /// [`Error::DmaFault`] naming the range when some byte is in no live region.
    pub fn dma_check(&self, iova: Iova, size: usize) -> Result<()> {
        self.each_piece(iova, size, |_, _, _, _| Ok(()))
    }

    /// Device-side DMA read.
    ///
    /// # Errors
    /// [`Error::DmaFault`] when some byte of the range is in no live region.
    pub fn dma_read(&self, iova: Iova, buf: &mut [u8]) -> Result<()> {
        let bdf = self.bdf;
        self.each_piece(iova, buf.len(), |h, at, off, n| {
            h.read(bdf, at, &mut buf[off..off + n])
        })
    }
    /// Device-side DMA write.
    ///
    /// # Errors
    /// [`Error::DmaFault`] when some byte of the range is in no live region (the bytes before
    /// the gap are written).
    pub fn dma_write(&self, iova: Iova, data: &[u8]) -> Result<()> {
        let bdf = self.bdf;
        self.each_piece(iova, data.len(), |h, at, off, n| {
            h.write(bdf, at, &data[off..off + n])
        })
    }

    /// Makes `region` (memory shared by another process, mapped by the caller) reachable by
    /// device-side DMA at its IOVA while the caller holds it.
    ///
    /// # Errors
    /// [`Error::IovaConflict`] when a live region overlaps it.
    pub fn attach_dma(&self, region: &DmaRegion) -> Result<()> {
        let mut handles = lock(&self.dma);
        handles.retain(DmaHandle::is_live);
        if handles
            .iter()
            .any(|h| h.overlaps(region.iova(), region.len() as u64))
        {
            return Err(Error::IovaConflict {
                bdf: self.bdf,
                iova: region.iova(),
                size: region.len() as u64,
            });
        }
        handles.push(region.device_handle());
        Ok(())
    }

    /// Sends `vector` to `target` instead of the twin's own eventfd (`None`: back to its own).
    ///
    /// # Errors
    /// [`Error::NoSuchVector`].
    pub fn route_interrupt(&self, vector: u32, target: Option<EventFd>) -> Result<()> {
        self.vector(vector)?;
        let mut routes = lock(&self.routes);
        if let Some(r) = routes.get_mut(vector as usize) {
            *r = target;
        }
        Ok(())
    }

    /// Fires interrupt `vector`.
    ///
    /// # Errors
    /// [`Error::NoSuchVector`], or the eventfd write failed.
    pub fn raise_interrupt(&self, vector: u32) -> Result<()> {
        let fd = self.vector(vector)?;
        let routes = lock(&self.routes);
        let fd = routes
            .get(vector as usize)
            .and_then(Option::as_ref)
            .unwrap_or(fd);
        fd.signal(1).map_err(|source| Error::Sys {
            bdf: self.bdf,
            op: "eventfd write",
            source,
        })?;
        self.raised[vector as usize].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    /// How many times `vector` was raised (0 for an unknown vector).
    pub fn interrupts_raised(&self, vector: u32) -> u64 {
        self.raised
            .get(vector as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn vector(&self, vector: u32) -> Result<&EventFd> {
        self.irqs.get(vector as usize).ok_or(Error::NoSuchVector {
            bdf: self.bdf,
            vector,
            count: self.irqs.len() as u32,
        })
    }
}

/// In-memory [`Backend`]. See the module docs.
pub struct Twin {
    dev: Arc<TwinDevice>,
    write_hook: Mutex<Option<WriteHook>>,
    read_hook: Mutex<Option<ReadHook>>,
    iova: Arc<Mutex<IovaAllocator>>,
    fail_unmap: Arc<AtomicBool>,
}

impl fmt::Debug for Twin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Twin").field("dev", &self.dev).finish()
    }
}

impl Twin {
    /// A twin shaped by `cfg`.
    ///
    /// # Errors
    /// Out of memory or out of file descriptors (eventfds).
    pub fn new(cfg: TwinConfig) -> Result<Twin> {
        let bdf = cfg.bdf;
        let sys = |op| move |source| Error::Sys { bdf, op, source };
        let bar0 = RawMem::heap(cfg.bar0_len as usize).map_err(sys("BAR0 allocation"))?;
        let mut config = vec![0u8; cfg.config_len.max(64) as usize];
        config[0..2].copy_from_slice(&cfg.vendor_id.to_le_bytes());
        config[2..4].copy_from_slice(&cfg.device_id.to_le_bytes());
        let irqs = (0..cfg.vectors)
            .map(|_| EventFd::new())
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(sys("eventfd"))?;
        let raised = (0..cfg.vectors).map(|_| AtomicU64::new(0)).collect();
        let routes = Mutex::new((0..cfg.vectors).map(|_| None).collect());
        Ok(Twin {
            dev: Arc::new(TwinDevice {
                bdf,
                bar0,
                config: Mutex::new(config),
                irqs,
                routes,
                raised,
                dma: Mutex::new(Vec::new()),
                counters: TwinCounters::default(),
            }),
            write_hook: Mutex::new(None),
            read_hook: Mutex::new(None),
            iova: Arc::new(Mutex::new(IovaAllocator::new(cfg.iova_base, cfg.iova_span))),
            fail_unmap: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The device side, for models and assertions.
    pub fn device(&self) -> &Arc<TwinDevice> {
        &self.dev
    }
    /// Installs the hook called after every driver MMIO write (replacing any previous one).
    pub fn on_mmio_write(&self, hook: impl FnMut(&TwinDevice, MmioWrite) + Send + 'static) {
        *lock(&self.write_hook) = Some(Box::new(hook));
    }
    /// Installs the hook consulted on every driver MMIO read.
    pub fn on_mmio_read(
        &self,
        hook: impl FnMut(&TwinDevice, u64, usize) -> Option<u64> + Send + 'static,
    ) {
        *lock(&self.read_hook) = Some(Box::new(hook));
    }
    /// Makes every later DMA release fail (to test the leak-on-unmap-failure path).
    pub fn fail_dma_unmap(&self, fail: bool) {
        self.fail_unmap.store(fail, Ordering::Relaxed);
    }

    fn read(&self, offset: u64, size: usize) -> Result<u64> {
        check_mmio(self.dev.bdf, 0, offset, size, self.bar0_len())?;
        self.dev.counters.mmio_reads.fetch_add(1, Ordering::Relaxed);
        if let Some(hook) = lock(&self.read_hook).as_mut() {
            if let Some(v) = hook(&self.dev, offset, size) {
                return Ok(v);
            }
        }
        match size {
            4 => self.dev.reg_read32(offset).map(u64::from),
            _ => self.dev.reg_read64(offset),
        }
    }

    fn write(&self, offset: u64, size: usize, value: u64) -> Result<()> {
        check_mmio(self.dev.bdf, 0, offset, size, self.bar0_len())?;
        match size {
            // Truncation intended: a 4-byte write carries the low 32 bits.
            4 => self.dev.reg_write32(offset, value as u32)?,
            _ => self.dev.reg_write64(offset, value)?,
        }
        self.dev
            .counters
            .mmio_writes
            .fetch_add(1, Ordering::Relaxed);
        if let Some(hook) = lock(&self.write_hook).as_mut() {
            hook(
                &self.dev,
                MmioWrite {
                    offset,
                    size,
                    value,
                },
            );
        }
        Ok(())
    }
}

struct TwinRelease {
    dev: Arc<TwinDevice>,
    iova: Arc<Mutex<IovaAllocator>>,
    fail: Arc<AtomicBool>,
}

impl DmaRelease for TwinRelease {
    fn release(&self, iova: Iova, len: usize) -> Result<()> {
        if self.fail.load(Ordering::Relaxed) {
            return Err(Error::DmaUnmap {
                bdf: self.dev.bdf,
                iova,
                size: len,
                source: std::io::Error::from_raw_os_error(libc::EIO),
            });
        }
        self.dev.counters.dma_frees.fetch_add(1, Ordering::Relaxed);
        lock(&self.iova)
            .free(iova, len as u64)
            .map_err(|e| Error::Sys {
                bdf: self.dev.bdf,
                op: "IOVA free",
                source: std::io::Error::other(e),
            })
    }
}

impl Backend for Twin {
    fn bdf(&self) -> Bdf {
        self.dev.bdf
    }
    fn bar0_len(&self) -> u64 {
        self.dev.bar0.len() as u64
    }
    fn mmio_read32(&self, offset: u64) -> Result<u32> {
        // Truncation intended: a read hook answering a 4-byte read gives the low 32 bits.
        self.read(offset, 4).map(|v| v as u32)
    }
    fn mmio_write32(&self, offset: u64, value: u32) -> Result<()> {
        self.write(offset, 4, value.into())
    }
    fn mmio_read64(&self, offset: u64) -> Result<u64> {
        self.read(offset, 8)
    }
    fn mmio_write64(&self, offset: u64, value: u64) -> Result<()> {
        self.write(offset, 8, value)
    }

    fn alloc_dma(&self, size: usize) -> Result<DmaRegion> {
        let bdf = self.dev.bdf;
        if size == 0 {
            return Err(Error::DmaZeroSize { bdf });
        }
        let len = super::mem::round_up(size, super::mem::PAGE_SIZE).ok_or(Error::DmaAlloc {
            bdf,
            size,
            source: std::io::Error::other("size overflows"),
        })?;
        let iova = {
            let mut a = lock(&self.iova);
            a.alloc(len as u64, super::mem::PAGE_SIZE as u64)
                .ok_or(Error::IovaExhausted {
                    bdf,
                    size: len as u64,
                    base: a.base(),
                    span: a.span(),
                })?
        };
        let release = TwinRelease {
            dev: self.dev.clone(),
            iova: self.iova.clone(),
            fail: self.fail_unmap.clone(),
        };
        let region = match DmaRegion::new_heap(len, iova, Some(Arc::new(release))) {
            Ok(r) => r,
            Err(source) => {
                let _ = lock(&self.iova).free(iova, len as u64);
                return Err(Error::DmaAlloc { bdf, size, source });
            }
        };
        let mut handles = lock(&self.dev.dma);
        handles.retain(DmaHandle::is_live);
        if handles
            .iter()
            .any(|h| h.is_identity() && h.overlaps(iova, len as u64))
        {
            // Application memory lives at these addresses (IOVA = address): the fake window
            // collides with it. The region's release returns the range.
            return Err(Error::IovaConflict {
                bdf,
                iova,
                size: len as u64,
            });
        }
        handles.push(region.device_handle());
        self.dev.counters.dma_allocs.fetch_add(1, Ordering::Relaxed);
        Ok(region)
    }

    fn map_user(&self, range: UserRange) -> Result<DmaRegion> {
        let bdf = self.dev.bdf;
        let mut handles = lock(&self.dev.dma);
        handles.retain(DmaHandle::is_live);
        // Other user regions over the same bytes agree with this one; a region at a fake IOVA
        // in the range would give the IOVA two meanings.
        if let Some(h) = handles
            .iter()
            .find(|h| !h.is_identity() && h.overlaps(Iova(range.addr()), range.len() as u64))
        {
            return Err(Error::IovaConflict {
                bdf,
                iova: h.iova(),
                size: h.len() as u64,
            });
        }
        let region = DmaRegion::user(range, None);
        handles.push(region.device_handle());
        Ok(region)
    }

    fn interrupt_vectors(&self) -> u32 {
        self.dev.irqs.len() as u32
    }
    fn interrupt_fd(&self, vector: u32) -> Result<BorrowedFd<'_>> {
        Ok(self.dev.vector(vector)?.as_fd())
    }
    fn wait_interrupt(&self, vector: u32, timeout: Duration) -> Result<u64> {
        self.dev
            .vector(vector)?
            .wait(timeout)
            .map_err(|source| Error::Sys {
                bdf: self.dev.bdf,
                op: "poll(interrupt eventfd)",
                source,
            })
    }

    fn config_len(&self) -> u64 {
        lock(&self.dev.config).len() as u64
    }
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let cfg = lock(&self.dev.config);
        check_config(self.dev.bdf, offset, buf.len(), cfg.len() as u64)?;
        let off = offset as usize;
        buf.copy_from_slice(&cfg[off..off + buf.len()]);
        Ok(())
    }
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut cfg = lock(&self.dev.config);
        check_config(self.dev.bdf, offset, data.len(), cfg.len() as u64)?;
        let off = offset as usize;
        cfg[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
