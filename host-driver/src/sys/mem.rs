//! Device-visible memory: owned blocks accessed only through volatile raw-pointer operations.
//!
//! [`RawMem`] owns either an mmap (BAR0, hugepage DMA memory, shared memory) or a zeroed
//! page-aligned heap block (test twin, simulator), or borrows the application's own memory (user
//! memory registration, [`super::UserRange`]). It never creates `&`/`&mut` to its bytes: the device (or a simulated
//! device on another thread) may change them at any time, and a Rust reference to memory that
//! changes under it is undefined behaviour. Every access is bounds- and alignment-checked first.
//!
//! [`DmaRegion`] is the driver's handle on DMA memory; [`DmaHandle`] is the device side's weak
//! view of it (used by the twin and simulators to emulate DMA by IOVA).

use std::alloc::{self, Layout};
use std::fmt;
use std::io;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use memmap2::MmapRaw;

use super::{in_bounds, Bdf, Error, Iova, Result};

/// Page size used for heap-backed regions (and the minimum DMA granule).
pub(crate) const PAGE_SIZE: usize = 4096;

/// Why a raw access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    OutOfRange,
    Misaligned,
}

/// Plain integer types the volatile accessors move, little-endian on the device side.
pub(crate) trait Word: Copy {
    fn le(self) -> Self;
}
macro_rules! word {
    ($($t:ty),*) => {$(impl Word for $t { fn le(self) -> Self { <$t>::from_le(self) } })*};
}
word!(u8, u16, u32, u64);

/// Copies of at least this many bytes (payload, never a descriptor, CQE or doorbell record)
/// are one plain `copy_nonoverlapping` instead of volatile words, as `vm-memory` copies guest
/// memory: a payload copy promises no word-level atomicity (neither does a device's DMA), and
/// the bulk copy is several times faster. Still no reference to the bytes is ever made.
const BULK_MIN: usize = 256;

/// Zeroed blocks of at least this many bytes are anonymous mappings rather than heap blocks.
const ANON_MIN: usize = 64 << 10;

/// A transparent huge page (x86-64, arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// Memory accessed only through raw pointers.
pub(crate) enum RawMem {
    /// A mapping made by `memmap2` (BAR0 of a device fd, a shared file).
    Mmap(MmapRaw),
    /// A zeroed block of `len` bytes (at least [`ANON_MIN`]): the start of an anonymous
    /// mapping, which may be longer (whole huge pages).
    Anon { map: MmapRaw, len: usize },
    /// A zeroed, page-aligned heap block of `layout.size()` bytes.
    Heap { ptr: NonNull<u8>, layout: Layout },
    /// `len` bytes of the application's memory at `ptr`, never freed here: made only from a
    /// [`super::UserRange`], whose constructor's contract keeps it mapped while this lives.
    Borrowed { ptr: NonNull<u8>, len: usize },
}

// SAFETY: `RawMem` uniquely owns its block (heap) or mapping (mmap), or borrows memory its
// `UserRange` contract keeps mapped for its whole life (borrowed); the bytes are only touched
// through volatile raw-pointer accesses, never through references, so moving or sharing the
// owner between threads creates no aliasing `&mut`. Concurrent accesses to the same bytes are
// the device protocol's business, exactly as with a real device doing DMA (vm-memory makes the
// same choice for guest memory).
unsafe impl Send for RawMem {}
// SAFETY: see `Send` above: `&RawMem` only allows volatile raw-pointer accesses.
unsafe impl Sync for RawMem {}

impl RawMem {
    /// A zeroed heap block of `len` bytes rounded up to whole pages, page aligned.
    pub(crate) fn heap(len: usize) -> io::Result<RawMem> {
        let size = round_up(len.max(1), PAGE_SIZE).ok_or_else(|| too_big(len))?;
        if size >= ANON_MIN {
            // An anonymous mapping: the kernel zero-fills each page as it is first touched (a
            // zeroed heap block of page alignment is written whole at once). A block within an
            // eighth of a whole number of huge pages is mapped as those and advised to be
            // backed by transparent huge pages: a fault per 2 MiB instead of one per 4 KiB,
            // and fewer TLB misses on the copies through it.
            let whole = round_up(size, HUGE_PAGE).ok_or_else(|| too_big(len))?;
            let huge = whole - size <= size / 8;
            let m = memmap2::MmapOptions::new()
                .len(if huge { whole } else { size })
                .map_anon()?;
            if huge {
                // Only a hint: a kernel without transparent huge pages refuses it, and the
                // block is then made of small pages, as it would be without the advice.
                m.advise(memmap2::Advice::HugePage).ok();
            }
            return Ok(RawMem::Anon {
                map: MmapRaw::from(m),
                len: size,
            });
        }
        let layout = Layout::from_size_align(size, PAGE_SIZE).map_err(|_| too_big(len))?;
        // SAFETY: `layout` has a non-zero size (at least one page).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(RawMem::Heap { ptr, layout })
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            RawMem::Mmap(m) => m.len(),
            RawMem::Anon { len, .. } => *len,
            RawMem::Heap { layout, .. } => layout.size(),
            RawMem::Borrowed { len, .. } => *len,
        }
    }

    /// Start of the block. Only used to form pointers for volatile accesses and syscalls.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match self {
            RawMem::Mmap(m) | RawMem::Anon { map: m, .. } => m.as_mut_ptr(),
            RawMem::Heap { ptr, .. } | RawMem::Borrowed { ptr, .. } => ptr.as_ptr(),
        }
    }

    /// Checks `size` bytes at `offset` with `align`, returning the offset as `usize`.
    fn check(&self, offset: u64, size: usize, align: usize) -> Result<usize, Access> {
        if !in_bounds(offset, size, self.len() as u64) {
            return Err(Access::OutOfRange);
        }
        // In bounds of a `usize`-sized block, so it fits a `usize`.
        let off = offset as usize;
        if !(self.as_ptr() as usize + off).is_multiple_of(align) {
            return Err(Access::Misaligned);
        }
        Ok(off)
    }

    /// Reads one naturally aligned word, converting from little-endian.
    pub(crate) fn read<T: Word>(&self, offset: u64) -> Result<T, Access> {
        let off = self.check(offset, size_of::<T>(), size_of::<T>())?;
        // SAFETY: `check` proved `off..off+size_of::<T>()` lies inside the live block and that
        // the address is aligned for `T`; `T` is a plain integer valid for any bits.
        let v = unsafe { std::ptr::read_volatile(self.as_ptr().add(off).cast::<T>()) };
        Ok(v.le())
    }

    /// Writes one naturally aligned word in little-endian.
    pub(crate) fn write<T: Word>(&self, offset: u64, value: T) -> Result<(), Access> {
        let off = self.check(offset, size_of::<T>(), size_of::<T>())?;
        // SAFETY: as in `read`: in bounds and aligned; no reference to the block exists.
        unsafe { std::ptr::write_volatile(self.as_ptr().add(off).cast::<T>(), value.le()) };
        Ok(())
    }

    /// Copies bytes out: volatile reads (8 bytes at a time where aligned) for descriptor-sized
    /// copies, one plain bulk copy from [`BULK_MIN`] bytes up.
    pub(crate) fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<(), Access> {
        let off = self.check(offset, buf.len(), 1)?;
        let base = self.as_ptr();
        if buf.len() >= BULK_MIN {
            // SAFETY: `base + off .. + buf.len()` is inside the checked block; `buf` is the
            // caller's own memory, so the two cannot overlap; only raw pointers touch the block.
            unsafe {
                std::ptr::copy_nonoverlapping(base.wrapping_add(off), buf.as_mut_ptr(), buf.len())
            };
            return Ok(());
        }
        if buf.len().is_multiple_of(8) && (base.wrapping_add(off) as usize).is_multiple_of(8) {
            // Fast path (descriptors, CQEs): whole aligned words, no per-word checks.
            for (k, chunk) in buf.chunks_exact_mut(8).enumerate() {
                let p = base.wrapping_add(off + 8 * k);
                // SAFETY: `p..p+8` is inside the checked block (`8 * k + 8 <= buf.len()`) and
                // 8-aligned (base + off is, and so is every multiple of 8 after it); no
                // reference to the block exists.
                let w = unsafe { std::ptr::read_volatile(p.cast::<u64>()) };
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
            return Ok(());
        }
        let mut i = 0;
        while i < buf.len() {
            // In bounds: `off + i < off + buf.len()`, inside the block checked above.
            let p = base.wrapping_add(off + i);
            if buf.len() - i >= 8 && (p as usize).is_multiple_of(8) {
                // SAFETY: `p..p+8` is inside the checked block (`i + 8 <= buf.len()`) and
                // 8-aligned; no reference to the block exists.
                let w = unsafe { std::ptr::read_volatile(p.cast::<u64>()) };
                buf[i..i + 8].copy_from_slice(&w.to_ne_bytes());
                i += 8;
            } else {
                // SAFETY: `p` is inside the checked block; no reference to the block exists.
                buf[i] = unsafe { std::ptr::read_volatile(p) };
                i += 1;
            }
        }
        Ok(())
    }

    /// Copies bytes in: volatile writes (8 bytes at a time where aligned) for descriptor-sized
    /// copies, one plain bulk copy from [`BULK_MIN`] bytes up.
    pub(crate) fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<(), Access> {
        let off = self.check(offset, data.len(), 1)?;
        let base = self.as_ptr();
        if data.len() >= BULK_MIN {
            // SAFETY: `base + off .. + data.len()` is inside the checked block; `data` is the
            // caller's own memory, so the two cannot overlap; only raw pointers touch the block.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), base.wrapping_add(off), data.len())
            };
            return Ok(());
        }
        if data.len().is_multiple_of(8) && (base.wrapping_add(off) as usize).is_multiple_of(8) {
            // Fast path (descriptors, CQEs): whole aligned words, no per-word checks.
            for (k, chunk) in data.chunks_exact(8).enumerate() {
                let p = base.wrapping_add(off + 8 * k);
                let mut w = [0u8; 8];
                w.copy_from_slice(chunk);
                // SAFETY: `p..p+8` is inside the checked block (`8 * k + 8 <= data.len()`) and
                // 8-aligned (base + off is, and so is every multiple of 8 after it); no
                // reference to the block exists.
                unsafe { std::ptr::write_volatile(p.cast::<u64>(), u64::from_ne_bytes(w)) };
            }
            return Ok(());
        }
        let mut i = 0;
        while i < data.len() {
            // In bounds: `off + i < off + data.len()`, inside the block checked above.
            let p = base.wrapping_add(off + i);
            if data.len() - i >= 8 && (p as usize).is_multiple_of(8) {
                let mut w = [0u8; 8];
                w.copy_from_slice(&data[i..i + 8]);
                // SAFETY: `p..p+8` is inside the checked block (`i + 8 <= data.len()`) and
                // 8-aligned; no reference to the block exists.
                unsafe { std::ptr::write_volatile(p.cast::<u64>(), u64::from_ne_bytes(w)) };
                i += 8;
            } else {
                // SAFETY: `p` is inside the checked block; no reference to the block exists.
                unsafe { std::ptr::write_volatile(p, data[i]) };
                i += 1;
            }
        }
        Ok(())
    }
}

impl Drop for RawMem {
    fn drop(&mut self) {
        if let RawMem::Heap { ptr, layout } = self {
            // SAFETY: `ptr` came from `alloc_zeroed(layout)` in `heap` and is freed only here.
            unsafe { alloc::dealloc(ptr.as_ptr(), *layout) };
        }
        // `MmapRaw` unmaps itself; borrowed memory belongs to the application.
    }
}

fn too_big(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{len} bytes is too large"),
    )
}

/// `v` rounded up to a multiple of the power of two `to`.
pub(crate) fn round_up(v: usize, to: usize) -> Option<usize> {
    debug_assert!(to.is_power_of_two());
    v.checked_add(to - 1).map(|x| x & !(to - 1))
}

/// Takes a DMA region's IOVA range away from the device when the region is freed.
///
/// The VFIO backend unmaps it from the IOMMU (VFIO_IOMMU_UNMAP_DMA) and returns the range to its
/// allocator; the twin returns the range. Called exactly once, before the memory is freed. If it
/// fails, the memory is leaked rather than freed under a device that may still write it.
pub trait DmaRelease: Send + Sync {
    /// Removes the device's access to `len` bytes at `iova`.
    ///
    /// # Errors
    /// The unmap failed; the caller then leaks the pages.
    fn release(&self, iova: Iova, len: usize) -> Result<()>;
}

pub(crate) struct DmaInner {
    mem: Option<RawMem>,
    iova: Iova,
    len: usize,
    release: Option<Arc<dyn DmaRelease>>,
}

impl DmaInner {
    fn mem(&self) -> &RawMem {
        self.mem
            .as_ref()
            .expect("DmaInner::mem is taken only by free/drop")
    }

    /// Runs the release hook and frees the memory, or leaks it when the release failed.
    fn finish(&mut self) -> Result<()> {
        let Some(mem) = self.mem.take() else {
            return Ok(());
        };
        let res = match &self.release {
            Some(r) => r.release(self.iova, self.len),
            None => Ok(()),
        };
        match res {
            Ok(()) => {
                drop(mem);
                Ok(())
            }
            Err(e) => {
                // The device may still reach these pages: never hand them back to the allocator.
                std::mem::forget(mem);
                Err(e)
            }
        }
    }
}

impl Drop for DmaInner {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            log::error!(
                "DMA region at {} ({:#x} bytes) leaked: {e}",
                self.iova,
                self.len
            );
        }
    }
}

/// Owned device-visible memory with an IOVA. Accessed only by volatile reads and writes at
/// checked offsets; multi-byte values are little-endian (the device's byte order).
///
/// Dropping it releases the IOVA (IOMMU unmap) before freeing the memory; use
/// [`DmaRegion::free`] to see an unmap error instead of having it logged.
pub struct DmaRegion {
    inner: Arc<DmaInner>,
}

impl fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaRegion")
            .field("iova", &self.inner.iova)
            .field("len", &self.inner.len)
            .finish()
    }
}

impl DmaRegion {
    /// Wraps memory that is already mapped at `iova` (crate-internal: VFIO and twin).
    pub(crate) fn from_raw(mem: RawMem, iova: Iova, release: Option<Arc<dyn DmaRelease>>) -> Self {
        let len = mem.len();
        DmaRegion {
            inner: Arc::new(DmaInner {
                mem: Some(mem),
                iova,
                len,
                release,
            }),
        }
    }

    /// Zeroed memory (a heap block, or an anonymous mapping when large) presented as DMA
    /// memory at `iova`: for simulators implementing [`super::Backend`]. The length is `size`
    /// rounded up to 4 KiB; `release` runs on free.
    ///
    /// # Errors
    /// Out of memory or a size that overflows.
    pub fn new_heap(
        size: usize,
        iova: Iova,
        release: Option<Arc<dyn DmaRelease>>,
    ) -> io::Result<Self> {
        Ok(Self::from_raw(RawMem::heap(size)?, iova, release))
    }

    /// Maps `len` bytes at `offset` of a file another process shares with this one (a
    /// vfio-user client's DMA_MAP) as DMA memory at `iova`, for device models in servers.
    ///
    /// The file must be a memfd sealed against shrinking (`F_SEAL_SHRINK`) that holds the whole
    /// range: a file that could shrink under the mapping would kill this process with SIGBUS.
    ///
    /// # Errors
    /// `InvalidInput` naming the broken rule, or `mmap` failed.
    pub fn map_shared_file(
        file: &std::fs::File,
        offset: u64,
        len: usize,
        iova: Iova,
    ) -> io::Result<DmaRegion> {
        super::shm::check_shareable(file, offset, len as u64)?;
        let map = super::shm::map(file, offset, len)?;
        Ok(Self::from_raw(RawMem::Mmap(map), iova, None))
    }

    /// The application's memory `range` as a region at IOVA = its address (crate-internal:
    /// backends' `map_user`).
    pub(crate) fn user(range: super::UserRange, release: Option<Arc<dyn DmaRelease>>) -> Self {
        let iova = Iova(range.addr());
        Self::from_raw(range.into_raw(), iova, release)
    }

    /// The address the device uses for byte 0.
    pub fn iova(&self) -> Iova {
        self.inner.iova
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }
    /// Always false: regions are never empty (allocations are at least one page, user
    /// ranges at least one byte).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }
    /// IOVA of byte `offset`, if `offset <= len`.
    pub fn iova_at(&self, offset: u64) -> Option<Iova> {
        (offset <= self.inner.len as u64).then(|| Iova(self.inner.iova.0 + offset))
    }

    /// A weak device-side view, for simulated DMA by IOVA.
    pub fn device_handle(&self) -> DmaHandle {
        DmaHandle {
            inner: Arc::downgrade(&self.inner),
            iova: self.inner.iova,
            len: self.inner.len,
            identity: self.inner.mem().as_ptr() as u64 == self.inner.iova.0,
        }
    }

    fn err(&self, a: Access, offset: u64, size: usize) -> Error {
        match a {
            Access::OutOfRange => Error::DmaOutOfRange {
                iova: self.inner.iova,
                offset,
                size,
                len: self.inner.len,
            },
            Access::Misaligned => Error::DmaMisaligned {
                iova: self.inner.iova,
                offset,
                size,
            },
        }
    }

    /// Reads the byte at `offset`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`].
    pub fn read_u8(&self, offset: u64) -> Result<u8> {
        self.inner
            .mem()
            .read(offset)
            .map_err(|a| self.err(a, offset, 1))
    }
    /// Writes the byte at `offset`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`].
    pub fn write_u8(&self, offset: u64, v: u8) -> Result<()> {
        self.inner
            .mem()
            .write(offset, v)
            .map_err(|a| self.err(a, offset, 1))
    }
    /// Reads a little-endian u32 at a 4-aligned `offset`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`], [`Error::DmaMisaligned`].
    pub fn read_u32(&self, offset: u64) -> Result<u32> {
        self.inner
            .mem()
            .read(offset)
            .map_err(|a| self.err(a, offset, 4))
    }
    /// Writes a little-endian u32 at a 4-aligned `offset`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`], [`Error::DmaMisaligned`].
    pub fn write_u32(&self, offset: u64, v: u32) -> Result<()> {
        self.inner
            .mem()
            .write(offset, v)
            .map_err(|a| self.err(a, offset, 4))
    }
    /// Reads a little-endian u64 at an 8-aligned `offset`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`], [`Error::DmaMisaligned`].
    pub fn read_u64(&self, offset: u64) -> Result<u64> {
        self.inner
            .mem()
            .read(offset)
            .map_err(|a| self.err(a, offset, 8))
    }
    /// Writes a little-endian u64 at an 8-aligned `offset`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`], [`Error::DmaMisaligned`].
    pub fn write_u64(&self, offset: u64, v: u64) -> Result<()> {
        self.inner
            .mem()
            .write(offset, v)
            .map_err(|a| self.err(a, offset, 8))
    }
    /// Copies `buf.len()` bytes at `offset` into `buf`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`] (nothing is copied).
    pub fn read_slice(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let n = buf.len();
        self.inner
            .mem()
            .read_bytes(offset, buf)
            .map_err(|a| self.err(a, offset, n))
    }
    /// Copies `data` to `offset`.
    ///
    /// # Errors
    /// [`Error::DmaOutOfRange`] (nothing is written).
    pub fn write_slice(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner
            .mem()
            .write_bytes(offset, data)
            .map_err(|a| self.err(a, offset, data.len()))
    }

    /// Releases the IOVA range and frees the memory, reporting a failed unmap (the pages are then
    /// leaked, never freed under the device). Dropping does the same but can only log.
    ///
    /// # Errors
    /// The release hook (IOMMU unmap) failed.
    pub fn free(self) -> Result<()> {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => inner.finish(),
            // A device-side access holds the region for the moment: the last reference runs the
            // release in `Drop`, which logs a failure.
            Err(_shared) => Ok(()),
        }
    }
}

/// The device side's view of a [`DmaRegion`]: access by IOVA while the region lives, a
/// [`Error::DmaFault`] after the driver freed it (like an IOMMU fault).
#[derive(Clone, Debug)]
pub struct DmaHandle {
    inner: Weak<DmaInner>,
    iova: Iova,
    len: usize,
    identity: bool,
}

impl DmaHandle {
    /// First IOVA of the region.
    pub fn iova(&self) -> Iova {
        self.iova
    }
    /// Length of the region.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false: regions are never empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Whether the region's IOVA is its address in this process (user memory, IOVA-as-VA):
    /// two such regions that overlap describe the same bytes.
    pub fn is_identity(&self) -> bool {
        self.identity
    }
    /// Whether any of `len` bytes at `iova` lie in this region.
    pub fn overlaps(&self, iova: Iova, len: u64) -> bool {
        let end = self.iova.0.saturating_add(self.len as u64);
        iova.0 < end && iova.0.saturating_add(len) > self.iova.0
    }
    /// Whether the driver still holds the region.
    pub fn is_live(&self) -> bool {
        self.inner.strong_count() > 0
    }
    /// Whether `size` bytes at `iova` lie inside this region.
    pub fn covers(&self, iova: Iova, size: usize) -> bool {
        iova.0
            .checked_sub(self.iova.0)
            .is_some_and(|off| in_bounds(off, size, self.len as u64))
    }

    fn with<T>(
        &self,
        bdf: Bdf,
        iova: Iova,
        size: usize,
        f: impl FnOnce(&RawMem, u64) -> Result<T, Access>,
    ) -> Result<T> {
        let fault = Error::DmaFault { bdf, iova, size };
        if !self.covers(iova, size) {
            return Err(fault);
        }
        let inner = self
            .inner
            .upgrade()
            .ok_or(Error::DmaFault { bdf, iova, size })?;
        let Some(mem) = inner.mem.as_ref() else {
            return Err(fault);
        };
        f(mem, iova.0 - self.iova.0).map_err(|_| fault)
    }

    /// Device-side read of `buf.len()` bytes at `iova` (`bdf` names the device in errors).
    ///
    /// # Errors
    /// [`Error::DmaFault`] when the range is outside the region or the region was freed.
    pub fn read(&self, bdf: Bdf, iova: Iova, buf: &mut [u8]) -> Result<()> {
        self.with(bdf, iova, buf.len(), |m, off| m.read_bytes(off, buf))
    }
    /// Device-side write of `data` at `iova`.
    ///
    /// # Errors
    /// [`Error::DmaFault`] when the range is outside the region or the region was freed.
    pub fn write(&self, bdf: Bdf, iova: Iova, data: &[u8]) -> Result<()> {
        self.with(bdf, iova, data.len(), |m, off| m.write_bytes(off, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<(Iova, usize)>>,
        fail: bool,
    }
    impl DmaRelease for Recorder {
        fn release(&self, iova: Iova, len: usize) -> Result<()> {
            self.calls.lock().unwrap().push((iova, len));
            if self.fail {
                return Err(Error::DmaUnmap {
                    bdf: Bdf::default(),
                    iova,
                    size: len,
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                });
            }
            Ok(())
        }
    }

    #[test]
    fn heap_region_is_zeroed_page_rounded_and_little_endian() {
        let r = DmaRegion::new_heap(100, Iova(0x10000), None).unwrap();
        assert_eq!(r.len(), 4096);
        assert_eq!(r.read_u64(4088).unwrap(), 0);
        r.write_u32(4, 0x0102_0304).unwrap();
        assert_eq!(r.read_u8(4).unwrap(), 0x04, "little-endian in memory");
        assert_eq!(r.read_u8(7).unwrap(), 0x01);
        r.write_u64(8, 0x1122_3344_5566_7788).unwrap();
        assert_eq!(r.read_u32(8).unwrap(), 0x5566_7788);
        assert_eq!(r.iova_at(8), Some(Iova(0x10008)));
        assert_eq!(r.iova_at(4097), None);
    }

    #[test]
    fn out_of_range_and_misaligned_are_errors() {
        let r = DmaRegion::new_heap(4096, Iova(0x2000), None).unwrap();
        assert!(matches!(
            r.read_u8(4096),
            Err(Error::DmaOutOfRange {
                offset: 4096,
                size: 1,
                len: 4096,
                ..
            })
        ));
        assert!(matches!(
            r.write_u64(4092, 1),
            Err(Error::DmaOutOfRange { .. })
        ));
        assert!(matches!(
            r.read_u64(u64::MAX),
            Err(Error::DmaOutOfRange { .. })
        ));
        assert!(matches!(
            r.read_u32(2),
            Err(Error::DmaMisaligned {
                offset: 2,
                size: 4,
                ..
            })
        ));
        assert!(matches!(
            r.write_u64(4, 0),
            Err(Error::DmaMisaligned { .. })
        ));
        let mut big = vec![0u8; 10];
        assert!(matches!(
            r.read_slice(4090, &mut big),
            Err(Error::DmaOutOfRange { size: 10, .. })
        ));
        assert!(r.write_slice(4090, &big).is_err());
        // A refused write changed nothing.
        assert_eq!(r.read_u64(4088).unwrap(), 0);
    }

    #[test]
    fn slices_round_trip_at_odd_offsets() {
        let r = DmaRegion::new_heap(4096, Iova(0), None).unwrap();
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for off in [0u64, 1, 3, 7, 8, 13, 3096] {
            r.write_slice(off, &data).unwrap();
            let mut back = vec![0u8; data.len()];
            r.read_slice(off, &mut back).unwrap();
            assert_eq!(back, data, "offset {off}");
        }
        r.write_slice(4096, &[]).unwrap();
    }

    #[test]
    fn bulk_and_word_copies_land_exactly_in_an_anonymous_block() {
        // 128 KiB: an anonymous mapping; payload-sized copies take the bulk path, short ones
        // the volatile words, and both must touch exactly their bytes.
        let r = DmaRegion::new_heap(128 << 10, Iova(0), None).unwrap();
        for (off, len) in [(5u64, BULK_MIN), (4093, 9000), (64, BULK_MIN - 1), (8, 64)] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            r.write_slice(off, &data).unwrap();
            let mut back = vec![0u8; len];
            r.read_slice(off, &mut back).unwrap();
            assert_eq!(back, data, "{len} bytes at {off}");
            assert_eq!(r.read_u8(off - 1).unwrap(), 0, "byte before {off}");
            assert_eq!(
                r.read_u8(off + len as u64).unwrap(),
                0,
                "byte after {len} at {off}"
            );
            r.write_slice(off, &vec![0u8; len]).unwrap();
        }
        let big = vec![1u8; 4096];
        assert!(matches!(
            r.write_slice((128 << 10) - 4095, &big),
            Err(Error::DmaOutOfRange { size: 4096, .. })
        ));
        let mut back = vec![0u8; 4096];
        assert!(r.read_slice(u64::MAX - 10, &mut back).is_err());
        assert_eq!(
            r.read_u8((128 << 10) - 1).unwrap(),
            0,
            "a refused bulk write wrote"
        );
    }

    #[test]
    fn a_block_mapped_as_whole_huge_pages_keeps_its_own_length() {
        // 2,000,000 bytes: mapped as one 2 MiB huge page, but the region is its size rounded
        // to 4 KiB, and nothing past that is reachable.
        let size = 2_000_000;
        let r = DmaRegion::new_heap(size, Iova(0x20_0000), None).unwrap();
        let len = round_up(size, PAGE_SIZE).unwrap();
        assert_eq!(r.len(), len);
        r.write_u64(len as u64 - 8, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(r.read_u64(len as u64 - 8).unwrap(), 0x0102_0304_0506_0708);
        assert!(matches!(
            r.write_u8(len as u64, 1),
            Err(Error::DmaOutOfRange { .. })
        ));
        let mut back = vec![0u8; 16];
        assert!(r.read_slice(len as u64 - 8, &mut back).is_err());
        // A block far from a whole number of huge pages is mapped at its own length.
        let r = DmaRegion::new_heap(3 << 20, Iova(0), None).unwrap();
        assert_eq!(r.len(), 3 << 20);
        assert!(r.write_u8(3 << 20, 1).is_err());
    }

    #[test]
    fn release_runs_once_and_failure_is_reported_by_free() {
        let rec = Arc::new(Recorder::default());
        let r = DmaRegion::new_heap(8192, Iova(0x4000), Some(rec.clone())).unwrap();
        r.free().unwrap();
        assert_eq!(*rec.calls.lock().unwrap(), vec![(Iova(0x4000), 8192)]);

        let r = DmaRegion::new_heap(1, Iova(0x8000), Some(rec.clone())).unwrap();
        drop(r);
        assert_eq!(rec.calls.lock().unwrap().len(), 2);

        let failing = Arc::new(Recorder {
            fail: true,
            ..Default::default()
        });
        let r = DmaRegion::new_heap(1, Iova(0x9000), Some(failing.clone())).unwrap();
        assert!(matches!(r.free(), Err(Error::DmaUnmap { .. })));
        assert_eq!(failing.calls.lock().unwrap().len(), 1);
    }

    #[test]
    fn device_handle_faults_outside_and_after_free() {
        let bdf = Bdf::default();
        let r = DmaRegion::new_heap(4096, Iova(0x10_0000), None).unwrap();
        let h = r.device_handle();
        h.write(bdf, Iova(0x10_0010), &[1, 2, 3]).unwrap();
        assert_eq!(r.read_u8(0x11).unwrap(), 2);
        let mut b = [0u8; 2];
        assert!(matches!(
            h.read(bdf, Iova(0x10_0fff), &mut b),
            Err(Error::DmaFault { .. })
        ));
        assert!(matches!(
            h.read(bdf, Iova(0xf_ffff), &mut b),
            Err(Error::DmaFault { .. })
        ));
        drop(r);
        assert!(!h.is_live());
        assert!(matches!(
            h.read(bdf, Iova(0x10_0010), &mut b),
            Err(Error::DmaFault { .. })
        ));
    }
}
