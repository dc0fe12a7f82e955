//! Protection domains and memory regions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use mrc_abi::device::admin::body::RegMr;
use mrc_abi::device::admin::{ACCESS_LOCAL_WRITE, ACCESS_REMOTE_WRITE};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::sys::{DmaRegion, UserRange};

/// MR access rights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Access {
    /// The local device may write it.
    pub local_write: bool,
    /// Remote peers may RDMA-write it.
    pub remote_write: bool,
}

impl Access {
    /// Local and remote write.
    pub const ALL: Access = Access {
        local_write: true,
        remote_write: true,
    };
    fn bits(self) -> u32 {
        (if self.local_write {
            ACCESS_LOCAL_WRITE
        } else {
            0
        }) | if self.remote_write {
            ACCESS_REMOTE_WRITE
        } else {
            0
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct MrEntry {
    pub lkey: u32,
    pub addr: u64,
    pub len: u64,
}

#[derive(Debug)]
pub(crate) struct PdInner {
    pub dev: Arc<Device>,
    pub pdn: u32,
    pub mrs: RwLock<Vec<MrEntry>>,
    /// Bumped (under the `mrs` write lock) on every registration and deregistration, so a
    /// QP's cached [`MrEntry`] is known current with one atomic load.
    pub generation: AtomicU64,
}

/// A QP's one-entry cache of the MR its last SGE used, valid while the PD's generation is
/// unchanged: posting to the same MR again takes no lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MrCache {
    entry: Option<(u64, MrEntry)>,
}

impl MrEntry {
    fn covers(&self, lkey: u32, addr: u64, len: u32) -> bool {
        self.lkey == lkey
            && addr >= self.addr
            && addr
                .checked_add(u64::from(len))
                .is_some_and(|e| e <= self.addr + self.len)
    }
}

impl PdInner {
    /// `len` bytes at `addr` lie in the MR `lkey` of this PD. One atomic load when they fall
    /// in the MR `cache` holds and no MR was registered or deregistered since; otherwise a scan
    /// under the read lock, which refills the cache.
    #[inline]
    pub fn covers_cached(&self, cache: &mut MrCache, lkey: u32, addr: u64, len: u32) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((g, m)) = cache.entry {
            if g == generation && m.covers(lkey, addr, len) {
                return true;
            }
        }
        let mrs = self.mrs.read().unwrap_or_else(|p| p.into_inner());
        // Read under the lock: writers bump it while holding the write lock.
        let generation = self.generation.load(Ordering::Acquire);
        match mrs.iter().find(|m| m.covers(lkey, addr, len)) {
            Some(m) => {
                cache.entry = Some((generation, *m));
                true
            }
            None => false,
        }
    }
}

impl Drop for PdInner {
    fn drop(&mut self) {
        if !self.dev.is_gone() {
            if let Err(e) = self.dev.dealloc_pd(self.pdn) {
                log::warn!("dealloc PD {}: {e}", self.pdn);
            }
        }
    }
}

/// A protection domain: MRs and QPs of one PD may work together.
#[derive(Clone, Debug)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

impl ProtectionDomain {
    pub(crate) fn new(dev: &Arc<Device>) -> Result<ProtectionDomain> {
        let pdn = dev.alloc_pd()?;
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                dev: dev.clone(),
                pdn,
                mrs: RwLock::new(Vec::new()),
                generation: AtomicU64::new(0),
            }),
        })
    }

    /// The PD number.
    pub fn pdn(&self) -> u32 {
        self.inner.pdn
    }

    /// Allocates `len` bytes of DMA memory and registers it. The region's virtual address is
    /// its IOVA ([`MemoryRegion::addr`]).
    ///
    /// # Errors
    /// Zero length, DMA allocation, device errors.
    pub fn reg_mr(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        if len == 0 {
            return Err(Error::InvalidAttribute {
                object: format!("MR in PD {}", self.inner.pdn),
                field: "length",
                value: 0,
                rule: "> 0",
            });
        }
        let mem = self.inner.dev.alloc_dma(len)?;
        self.register(mem, len, access)
    }

    /// Registers `len` bytes of the application's own memory at `addr` (what `ibv_reg_mr`
    /// does): [`MemoryRegion::addr`] is `addr`, local sends read these bytes and remote writes
    /// land in them, with no copy. The backend maps the pages at IOVA = address
    /// ([`crate::sys::Backend::map_user`]): VFIO maps them in the IOMMU, vfio-user moves them
    /// onto shared memory in place (see [`crate::sys::vfio_user`]), the test twin reaches them
    /// directly. The same memory may be registered more than once.
    ///
    /// # Safety
    /// The contract of [`UserRange::new`], until the returned region is dropped: the range
    /// stays mapped and is not unmapped, remapped, `mprotect`ed or freed; bytes the NIC may
    /// write are read through raw pointers (volatile, or after a completion), never under a
    /// live Rust reference; no other thread writes the touched pages while this call runs and
    /// while the region is dropped.
    ///
    /// # Errors
    /// [`Error::Sys`] with [`crate::sys::Error::UserMemory`] (a null, empty, unmapped, shared
    /// or unreadable range), [`crate::sys::Error::UserMemoryUnsupported`] or
    /// [`crate::sys::Error::IovaConflict`]; [`Error::DeviceGone`]; device errors.
    #[allow(unsafe_code)]
    pub unsafe fn reg_user_mr(
        &self,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion> {
        self.inner.dev.check()?;
        // SAFETY: this function's contract is `UserRange::new`'s, passed on unchanged.
        let range = unsafe { UserRange::new(addr, len) }?;
        let mem = self.inner.dev.backend().map_user(range)?;
        self.register(mem, len, access)
    }

    /// Registers `len` bytes of `mem` (at its IOVA, which is also the region's address).
    fn register(&self, mem: DmaRegion, len: usize, access: Access) -> Result<MemoryRegion> {
        let dev = &self.inner.dev;
        let addr = mem.iova().0;
        let (lkey, rkey) = dev.reg_mr(RegMr {
            pd: self.inner.pdn.into(),
            access: access.bits().into(),
            va: addr.into(),
            iova: addr.into(),
            length: (len as u64).into(),
        })?;
        let mut mrs = self.inner.mrs.write().unwrap_or_else(|p| p.into_inner());
        mrs.push(MrEntry {
            lkey,
            addr,
            len: len as u64,
        });
        self.inner.generation.fetch_add(1, Ordering::Release);
        drop(mrs);
        Ok(MemoryRegion {
            pd: self.inner.clone(),
            mem,
            len,
            lkey,
            rkey,
        })
    }
}

/// Registered memory: a DMA buffer the NIC reads (local) or writes (remote), driver-allocated
/// ([`ProtectionDomain::reg_mr`]) or the application's own ([`ProtectionDomain::reg_user_mr`]).
#[derive(Debug)]
pub struct MemoryRegion {
    pd: Arc<PdInner>,
    mem: DmaRegion,
    len: usize,
    lkey: u32,
    rkey: u32,
}

impl MemoryRegion {
    /// Local key (SGEs).
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// Remote key (peers' RETHs).
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// Virtual address of byte 0.
    pub fn addr(&self) -> u64 {
        self.mem.iova().0
    }
    /// Registered length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false: MRs are never empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The owning PD number.
    pub fn pdn(&self) -> u32 {
        self.pd.pdn
    }

    fn range(&self, offset: u64, len: usize) -> Result<()> {
        if offset
            .checked_add(len as u64)
            .is_none_or(|e| e > self.len as u64)
        {
            return Err(Error::MrRange {
                lkey: self.lkey,
                offset,
                len,
                size: self.len,
            });
        }
        self.pd.dev.check()
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// # Errors
    /// [`Error::MrRange`], [`Error::DeviceGone`].
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.range(offset, data.len())?;
        Ok(self.mem.write_slice(offset, data)?)
    }
    /// Copies bytes at `offset` into `buf`.
    ///
    /// # Errors
    /// [`Error::MrRange`], [`Error::DeviceGone`].
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.range(offset, buf.len())?;
        Ok(self.mem.read_slice(offset, buf)?)
    }
    /// A scatter-gather entry for `len` bytes at `offset`.
    ///
    /// # Errors
    /// [`Error::MrRange`].
    pub fn sge(&self, offset: u64, len: u32) -> Result<super::Sge> {
        self.range(offset, len as usize)?;
        Ok(super::Sge {
            addr: self.addr() + offset,
            len,
            lkey: self.lkey,
        })
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        let mut mrs = self.pd.mrs.write().unwrap_or_else(|p| p.into_inner());
        mrs.retain(|m| m.lkey != self.lkey);
        self.pd.generation.fetch_add(1, Ordering::Release);
        drop(mrs);
        if !self.pd.dev.is_gone() {
            if let Err(e) = self.pd.dev.dereg_mr(self.lkey) {
                log::warn!("dereg MR {:#x}: {e}", self.lkey);
            }
        }
    }
}
