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
    /// Vendor id at config offset 0.
    pub vendor_id: u16,
    /// Device id at config offset 2.
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
            vendor_id: 0x1d0f,
            device_id: 0x3c00,
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
mod tests {
    use super::*;
    use crate::sys::{enable_bus_master, PCI_COMMAND, PCI_COMMAND_MASTER};

    fn twin() -> Twin {
        Twin::new(TwinConfig::default()).unwrap()
    }

    #[test]
    fn mmio_round_trip_bounds_and_alignment() {
        let t = twin();
        t.mmio_write64(0x100, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(
            t.mmio_read32(0x100).unwrap(),
            0x0506_0708,
            "little-endian registers"
        );
        assert_eq!(t.mmio_read32(0x104).unwrap(), 0x0102_0304);
        let len = t.bar0_len();
        assert!(matches!(
            t.mmio_read32(len),
            Err(Error::MmioOutOfRange {
                region: 0,
                size: 4,
                ..
            })
        ));
        assert!(matches!(
            t.mmio_write64(len - 4, 0),
            Err(Error::MmioOutOfRange { .. })
        ));
        assert!(matches!(
            t.mmio_read64(u64::MAX - 3),
            Err(Error::MmioOutOfRange { .. })
        ));
        assert!(matches!(
            t.mmio_write32(0x102, 0),
            Err(Error::MmioMisaligned { .. })
        ));
        assert!(matches!(
            t.mmio_read64(0x104),
            Err(Error::MmioMisaligned { .. })
        ));
        let c = t.device().counters();
        assert_eq!(
            c.mmio_writes.load(Ordering::Relaxed),
            1,
            "refused writes are not counted"
        );
        assert_eq!(c.mmio_reads.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn write_hook_models_a_doorbell() {
        // A toy device: writing N to the doorbell at 0x40 copies N bytes from the IOVA in
        // register 0x48 to the IOVA in 0x50, sets status 0x58 = N and raises vector 1.
        let t = twin();
        t.on_mmio_write(|dev, w| {
            if w.offset != 0x40 {
                return;
            }
            let src = Iova(dev.reg_read64(0x48).unwrap());
            let dst = Iova(dev.reg_read64(0x50).unwrap());
            let mut buf = vec![0u8; w.value as usize];
            dev.dma_read(src, &mut buf).unwrap();
            dev.dma_write(dst, &buf).unwrap();
            dev.reg_write32(0x58, w.value as u32).unwrap();
            dev.raise_interrupt(1).unwrap();
        });
        let a = t.alloc_dma(4096).unwrap();
        let b = t.alloc_dma(4096).unwrap();
        assert_ne!(a.iova(), b.iova());
        a.write_slice(0, b"hello, device").unwrap();
        t.mmio_write64(0x48, a.iova().0).unwrap();
        t.mmio_write64(0x50, b.iova_at(100).unwrap().0).unwrap();
        t.mmio_write32(0x40, 13).unwrap();
        assert_eq!(t.wait_interrupt(1, Duration::from_secs(10)).unwrap(), 1);
        assert_eq!(t.wait_interrupt(1, Duration::from_millis(1)).unwrap(), 0);
        let mut out = [0u8; 13];
        b.read_slice(100, &mut out).unwrap();
        assert_eq!(&out, b"hello, device");
        assert_eq!(t.mmio_read32(0x58).unwrap(), 13);
        assert_eq!(t.device().interrupts_raised(1), 1);
    }

    #[test]
    fn read_hook_overrides_registers() {
        let t = twin();
        t.device().reg_write32(0x8, 7).unwrap();
        t.on_mmio_read(|_, off, _| (off == 0x10).then_some(0xabcd));
        assert_eq!(t.mmio_read32(0x10).unwrap(), 0xabcd);
        assert_eq!(t.mmio_read32(0x8).unwrap(), 7, "other registers read BAR0");
    }

    #[test]
    fn device_dma_faults_after_free_and_iova_is_reused() {
        let t = twin();
        let r = t.alloc_dma(100).unwrap();
        assert_eq!(r.len(), 4096);
        let iova = r.iova();
        t.device().dma_write(iova, &[9]).unwrap();
        assert_eq!(r.read_u8(0).unwrap(), 9);
        assert!(matches!(
            t.device().dma_write(Iova(iova.0 + 4095), &[1, 2]),
            Err(Error::DmaFault { .. })
        ));
        r.free().unwrap();
        assert!(matches!(
            t.device().dma_read(iova, &mut [0]),
            Err(Error::DmaFault { .. })
        ));
        let again = t.alloc_dma(4096).unwrap();
        assert_eq!(again.iova(), iova, "freed IOVA range is reused");
        assert_eq!(again.read_u8(0).unwrap(), 0, "new region is zeroed");
        let c = t.device().counters();
        assert_eq!(c.dma_allocs.load(Ordering::Relaxed), 2);
        assert_eq!(c.dma_frees.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn dma_errors() {
        let t = Twin::new(TwinConfig {
            iova_span: 8192,
            ..TwinConfig::default()
        })
        .unwrap();
        assert!(matches!(t.alloc_dma(0), Err(Error::DmaZeroSize { .. })));
        let _a = t.alloc_dma(8192).unwrap();
        assert!(matches!(
            t.alloc_dma(1),
            Err(Error::IovaExhausted { size: 4096, .. })
        ));
        assert!(matches!(
            t.alloc_dma(usize::MAX),
            Err(Error::DmaAlloc { .. })
        ));
        t.fail_dma_unmap(true);
        assert!(matches!(_a.free(), Err(Error::DmaUnmap { .. })));
        // The failed unmap leaked the range rather than reusing it.
        t.fail_dma_unmap(false);
        assert!(matches!(t.alloc_dma(1), Err(Error::IovaExhausted { .. })));
    }

    #[test]
    fn interrupts_and_vectors() {
        let t = twin();
        assert_eq!(t.interrupt_vectors(), 4);
        assert!(matches!(
            t.interrupt_fd(4),
            Err(Error::NoSuchVector {
                vector: 4,
                count: 4,
                ..
            })
        ));
        assert!(matches!(
            t.wait_interrupt(9, Duration::ZERO),
            Err(Error::NoSuchVector { .. })
        ));
        assert!(matches!(
            t.device().raise_interrupt(4),
            Err(Error::NoSuchVector { .. })
        ));
        t.device().raise_interrupt(0).unwrap();
        t.device().raise_interrupt(0).unwrap();
        // The fd is usable with poll/epoll.
        let fd = t.interrupt_fd(0).unwrap();
        let mut pfd = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, count 1, zero timeout.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1);
        assert_eq!(t.wait_interrupt(0, Duration::ZERO).unwrap(), 2);
    }

    #[test]
    fn backends_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Twin>();
        check::<DmaRegion>();
        check::<crate::sys::vfio::VfioBackend>();
    }

    #[test]
    fn device_thread_dma_then_interrupt() {
        // A device model on another thread fills a buffer and raises vector 2; the driver
        // waits for the interrupt and then sees the bytes.
        let t = twin();
        let region = t.alloc_dma(4096).unwrap();
        let iova = region.iova_at(64).unwrap();
        std::thread::scope(|s| {
            let dev = t.device().clone();
            s.spawn(move || {
                for i in 0..16u8 {
                    dev.dma_write(Iova(iova.0 + u64::from(i) * 8), &[i; 8])
                        .unwrap();
                }
                dev.raise_interrupt(2).unwrap();
            });
            assert_eq!(t.wait_interrupt(2, Duration::from_secs(5)).unwrap(), 1);
        });
        for i in 0..16u64 {
            assert_eq!(
                region.read_u64(64 + i * 8).unwrap(),
                u64::from_le_bytes([i as u8; 8])
            );
        }
    }

    #[test]
    fn user_memory_is_reached_in_place_and_conflicts_are_refused() {
        let t = twin();
        let mut buf = vec![0u8; 8192];
        let p = buf.as_mut_ptr().wrapping_add(10);
        // SAFETY: `buf` outlives the regions; it is read after the device's writes.
        let r = t
            .map_user(unsafe { UserRange::new(p, 5000) }.unwrap())
            .unwrap();
        assert_eq!(r.iova().0, p as u64);
        t.device().dma_write(Iova(p as u64 + 4999), &[7]).unwrap();
        assert!(
            t.device().dma_write(Iova(p as u64 + 5000), &[7]).is_err(),
            "past the end"
        );
        // SAFETY: as above; the same bytes registered twice agree.
        let r2 = t
            .map_user(unsafe { UserRange::new(p, 10) }.unwrap())
            .unwrap();
        drop(r);
        t.device().dma_write(Iova(p as u64), &[3]).unwrap();
        drop(r2);
        assert!(
            t.device().dma_write(Iova(p as u64), &[3]).is_err(),
            "gone with the region"
        );
        assert_eq!((buf[10], buf[5009]), (3, 7));

        // A region at a fake IOVA and user memory at the same addresses conflict.
        let heap = t.alloc_dma(4096).unwrap();
        // SAFETY: refused before the device can reach it.
        let e = t
            .map_user(unsafe { UserRange::new(heap.iova().0 as *mut u8, 1) }.unwrap())
            .unwrap_err();
        assert!(matches!(e, Error::IovaConflict { .. }), "{e}");
    }

    #[test]
    fn attached_regions_can_be_spanned_and_interrupts_routed() {
        let t = twin();
        let a = DmaRegion::new_heap(4096, Iova(0x10_0000), None).unwrap();
        let b = DmaRegion::new_heap(4096, Iova(0x10_1000), None).unwrap();
        t.device().attach_dma(&a).unwrap();
        t.device().attach_dma(&b).unwrap();
        let overlap = DmaRegion::new_heap(4096, Iova(0x10_0800), None).unwrap();
        assert!(matches!(
            t.device().attach_dma(&overlap),
            Err(Error::IovaConflict { .. })
        ));
        // One access across the boundary of two adjacent regions.
        t.device()
            .dma_write(Iova(0x10_0ffe), &[1, 2, 3, 4])
            .unwrap();
        assert_eq!((a.read_u8(4094).unwrap(), a.read_u8(4095).unwrap()), (1, 2));
        assert_eq!((b.read_u8(0).unwrap(), b.read_u8(1).unwrap()), (3, 4));
        let mut back = [0u8; 4];
        t.device().dma_read(Iova(0x10_0ffe), &mut back).unwrap();
        assert_eq!(back, [1, 2, 3, 4]);
        assert!(
            t.device().dma_read(Iova(0x10_1ffe), &mut back).is_err(),
            "runs off the end"
        );

        let target = EventFd::new().unwrap();
        t.device()
            .route_interrupt(1, Some(target.try_clone().unwrap()))
            .unwrap();
        t.device().raise_interrupt(1).unwrap();
        assert_eq!(target.take().unwrap(), 1, "routed");
        assert_eq!(
            t.wait_interrupt(1, Duration::ZERO).unwrap(),
            0,
            "not the twin's own"
        );
        t.device().route_interrupt(1, None).unwrap();
        t.device().raise_interrupt(1).unwrap();
        assert_eq!(t.wait_interrupt(1, Duration::ZERO).unwrap(), 1);
        assert!(t.device().route_interrupt(9, None).is_err());
    }

    #[test]
    fn config_space_and_bus_master() {
        let t = twin();
        assert_eq!(t.config_read_u16(0).unwrap(), 0x1d0f);
        assert_eq!(t.config_read_u16(2).unwrap(), 0x3c00);
        enable_bus_master(&t).unwrap();
        assert_ne!(
            t.config_read_u16(PCI_COMMAND).unwrap() & PCI_COMMAND_MASTER,
            0
        );
        assert!(matches!(
            t.config_read_u32(4094),
            Err(Error::ConfigOutOfRange {
                offset: 4094,
                size: 4,
                ..
            })
        ));
        assert!(matches!(
            t.config_write(4096, &[0]),
            Err(Error::ConfigOutOfRange { .. })
        ));
        let dynamic: &dyn Backend = &t;
        assert_eq!(dynamic.config_len(), 4096, "object-safe");
    }
}
