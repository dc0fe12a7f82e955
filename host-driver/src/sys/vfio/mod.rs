//! The VFIO backend: a PCI device bound to `vfio-pci`, driven from user space.
//!
//! The bring-up reads top to bottom in [`VfioBackend::open`]; every step is a safe function over
//! the small [`VfioSys`] trait, so the logic (version and IOMMU checks, group viability, region
//! sizes, hugepage fallback, IOVA allocation, unmap on free) is tested with a fake in `tests.rs`.
//! [`LinuxVfio`] implements the trait with rust-vmm's `vfio-ioctls` (`VfioContainer`,
//! `VfioDevice`) plus the few operations that crate does not offer (see its docs).
//!
//! The trait follows `vfio-ioctls`'s object model: [`VfioSys::open_container`] is
//! `VfioContainer::new` and [`VfioSys::open_device`] is `VfioDevice::new`, each several ioctls
//! that succeed or fail as one; an [`OpenFailure`] says which step failed, so the error paths
//! (a group that cannot be opened names the device's driver, a group that is not viable names
//! the devices not on vfio-pci) are the same for the fake and the kernel.
//!
//! Bring-up:
//! 1. resolve the IOMMU group from sysfs (`/sys/bus/pci/devices/<BDF>/iommu_group`);
//! 2. open the container `/dev/vfio/vfio`, check the API version and the TYPE1v2 IOMMU;
//! 3. open `/dev/vfio/<group>`, check it is viable (else name the devices not on vfio-pci),
//!    attach it to the container, set the IOMMU type, get the device fd and its info;
//! 4. check BAR0 (size, mmap-able) and config regions, mmap BAR0;
//! 5. reset the device if it supports it, enable memory decoding and bus mastering;
//! 6. wire MSI-X (or MSI) vectors to eventfds.
//!
//! DMA memory is 2 MiB hugepages (4 KiB pages with a logged warning when none are free), mapped
//! at an IOVA from [`IovaAllocator`] with VFIO_IOMMU_MAP_DMA and unmapped when freed.
//! Application memory ([`Backend::map_user`]) is mapped with VFIO_IOMMU_MAP_DMA of its own
//! pages at IOVA = their address, in reference-counted page chunks so that overlapping
//! registrations never map a page twice (the kernel refuses that); the part of such a range in
//! the allocator's window is reserved so allocations never land on it.

mod linux;
#[cfg(test)]
mod tests;
mod user;

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vfio_bindings::bindings::vfio as b;

pub use linux::LinuxVfio;

use super::mem::{round_up, RawMem, PAGE_SIZE};
use super::user::ChunkMap;
use super::{
    check_config, check_mmio, enable_bus_master, Backend, Bdf, DmaRegion, DmaRelease, Error,
    EventFd, GroupMember, Iova, IovaAllocator, Result, UserRange,
};

/// 2 MiB: the hugepage size used for DMA memory.
pub const HUGE_PAGE_SIZE: usize = 2 << 20;

/// What `VFIO_DEVICE_GET_INFO` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `VFIO_DEVICE_FLAGS_*` (e.g. `RESET`).
    pub flags: u32,
    /// Number of regions.
    pub num_regions: u32,
    /// Number of IRQ indexes.
    pub num_irqs: u32,
}

/// What `VFIO_DEVICE_GET_REGION_INFO` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionInfo {
    /// Region index (`VFIO_PCI_BAR0_REGION_INDEX`, `VFIO_PCI_CONFIG_REGION_INDEX`, ...).
    pub index: u32,
    /// `VFIO_REGION_INFO_FLAG_*`.
    pub flags: u32,
    /// Size in bytes.
    pub size: u64,
    /// Offset of the region within the device fd (for pread/pwrite/mmap).
    pub offset: u64,
}

/// What `VFIO_DEVICE_GET_IRQ_INFO` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqInfo {
    /// IRQ index (`VFIO_PCI_MSIX_IRQ_INDEX`, ...).
    pub index: u32,
    /// `VFIO_IRQ_INFO_*`.
    pub flags: u32,
    /// Number of vectors.
    pub count: u32,
}

/// Page size asked of [`VfioSys::alloc_pages`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSize {
    /// 2 MiB hugepages (`MAP_HUGETLB | MAP_HUGE_2MB`).
    Huge2M,
    /// Ordinary 4 KiB pages.
    Base4K,
}

impl PageSize {
    /// Size in bytes.
    pub fn bytes(self) -> usize {
        match self {
            PageSize::Huge2M => HUGE_PAGE_SIZE,
            PageSize::Base4K => PAGE_SIZE,
        }
    }
}

/// Zeroed host memory that can be mapped for DMA or is a mapped BAR; only raw accesses.
pub struct Pages(pub(crate) RawMem);

impl Pages {
    /// Page-aligned zeroed heap memory (fakes and tests).
    ///
    /// # Errors
    /// Out of memory.
    pub fn heap(len: usize) -> io::Result<Pages> {
        RawMem::heap(len).map(Pages)
    }
    /// Takes ownership of a raw mapping.
    pub fn from_mmap(m: memmap2::MmapRaw) -> Pages {
        Pages(RawMem::Mmap(m))
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True for an empty mapping.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

/// Which bring-up step of [`VfioSys::open_container`] or [`VfioSys::open_device`] failed.
#[derive(Debug)]
pub enum OpenFailure {
    /// Opening `/dev/vfio/vfio` failed.
    Container(io::Error),
    /// VFIO_GET_API_VERSION answered another version (`None`: the backend does not say which).
    ApiVersion(Option<i32>),
    /// VFIO_CHECK_EXTENSION does not offer the TYPE1v2 IOMMU.
    NoType1v2,
    /// Opening `/dev/vfio/<group>` failed.
    OpenGroup(io::Error),
    /// VFIO_GROUP_GET_STATUS failed.
    GroupStatus(io::Error),
    /// The group is not viable: some device in it is bound to another driver.
    GroupNotViable,
    /// A later step failed: `op` names it (`VFIO_GROUP_SET_CONTAINER`, `VFIO_SET_IOMMU`,
    /// `VFIO_GROUP_GET_DEVICE_FD`, `VFIO_DEVICE_GET_INFO`, ...).
    Step {
        /// The failing operation.
        op: &'static str,
        /// Why.
        source: io::Error,
    },
}

impl fmt::Display for OpenFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenFailure::Container(e) => write!(f, "opening /dev/vfio/vfio: {e}"),
            OpenFailure::ApiVersion(Some(v)) => write!(f, "VFIO API version {v}"),
            OpenFailure::ApiVersion(None) => f.write_str("VFIO API version mismatch"),
            OpenFailure::NoType1v2 => f.write_str("no TYPE1v2 IOMMU"),
            OpenFailure::OpenGroup(e) => write!(f, "opening the group: {e}"),
            OpenFailure::GroupStatus(e) => write!(f, "VFIO_GROUP_GET_STATUS: {e}"),
            OpenFailure::GroupNotViable => f.write_str("group not viable"),
            OpenFailure::Step { op, source } => write!(f, "{op}: {source}"),
        }
    }
}

/// The operations of VFIO the backend needs, at the granularity of `vfio-ioctls`.
///
/// Set-up methods take `&mut self` and keep what they open; run-time methods take `&self`.
/// Errors are raw; [`VfioBackend`] adds the context.
pub trait VfioSys: Send + Sync + 'static {
    /// IOMMU group number of `bdf` (sysfs `iommu_group` link).
    fn iommu_group(&self, bdf: Bdf) -> io::Result<u32>;
    /// Devices in `group` and their drivers (sysfs).
    fn group_members(&self, group: u32) -> io::Result<Vec<GroupMember>>;
    /// Driver `bdf` is bound to, `None` if unbound (sysfs).
    fn driver_of(&self, bdf: Bdf) -> io::Result<Option<String>>;
    /// Opens `/dev/vfio/vfio` and checks VFIO_GET_API_VERSION is `VFIO_API_VERSION` and
    /// VFIO_CHECK_EXTENSION offers the TYPE1v2 IOMMU (`VfioContainer::new`).
    fn open_container(&mut self) -> Result<(), OpenFailure>;
    /// Opens the IOMMU group of `bdf` (`group`), checks it is viable, attaches it to the
    /// container (VFIO_GROUP_SET_CONTAINER), sets the TYPE1v2 IOMMU (VFIO_SET_IOMMU), gets the
    /// device fd (VFIO_GROUP_GET_DEVICE_FD) and its VFIO_DEVICE_GET_INFO (`VfioDevice::new`).
    fn open_device(&mut self, bdf: Bdf, group: u32) -> Result<DeviceInfo, OpenFailure>;
    /// VFIO_DEVICE_GET_REGION_INFO of region `index`.
    fn region_info(&self, index: u32) -> io::Result<RegionInfo>;
    /// VFIO_DEVICE_GET_IRQ_INFO of IRQ index `index`.
    fn irq_info(&self, index: u32) -> io::Result<IrqInfo>;
    /// mmap of a whole region of the device fd.
    fn mmap_region(&self, region: &RegionInfo) -> io::Result<Pages>;
    /// pread of a region at `offset`, exactly `buf.len()` bytes.
    fn region_read(&self, region: &RegionInfo, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// pwrite of a region at `offset`, exactly `data.len()` bytes.
    fn region_write(&self, region: &RegionInfo, offset: u64, data: &[u8]) -> io::Result<()>;
    /// VFIO_DEVICE_RESET.
    fn reset(&self) -> io::Result<()>;
    /// VFIO_DEVICE_SET_IRQS: vectors `0..fds.len()` of `index` trigger `fds`.
    fn set_irq_eventfds(&self, index: u32, fds: &[&EventFd]) -> io::Result<()>;
    /// VFIO_DEVICE_SET_IRQS with count 0: disable every vector of `index`.
    fn disable_irqs(&self, index: u32) -> io::Result<()>;
    /// Anonymous zeroed memory of `size` bytes (a multiple of `page`).
    fn alloc_pages(&self, size: usize, page: PageSize) -> io::Result<Pages>;
    /// VFIO_IOMMU_MAP_DMA of all of `pages` at `iova`, read + write.
    ///
    /// # Safety
    /// From now until a successful [`VfioSys::dma_unmap`] of the same range, the device may
    /// write `pages` at any time: the caller must keep them alive (never free them) and access
    /// them only through raw volatile operations.
    unsafe fn dma_map(&self, pages: &Pages, iova: Iova) -> io::Result<()>;
    /// VFIO_IOMMU_MAP_DMA of `size` bytes of this process's memory at `vaddr` at `iova`, read
    /// + write.
    ///
    /// # Safety
    /// From now until a successful [`VfioSys::dma_unmap`] of the same range, the device may
    /// write that memory at any time: the caller keeps it mapped.
    unsafe fn dma_map_user(&self, vaddr: u64, size: usize, iova: Iova) -> io::Result<()>;
    /// VFIO_IOMMU_UNMAP_DMA of exactly `size` bytes at `iova`.
    fn dma_unmap(&self, iova: Iova, size: usize) -> io::Result<()>;
}

/// Options for [`VfioBackend::open`].
#[derive(Clone, Debug)]
pub struct VfioConfig {
    /// Smallest acceptable BAR0 (the register map's extent).
    pub bar0_min_len: u64,
    /// Reset the device during bring-up when it supports VFIO_DEVICE_RESET.
    pub reset: bool,
    /// Interrupt vectors to wire (0 = none); fewer are wired if the device has fewer.
    pub max_vectors: u32,
    /// Try 2 MiB hugepages for DMA memory first.
    pub hugepages: bool,
    /// IOVA window for DMA memory.
    pub iova_base: Iova,
    /// Size of the IOVA window.
    pub iova_span: u64,
}

impl Default for VfioConfig {
    fn default() -> Self {
        VfioConfig {
            bar0_min_len: 0x1000,
            reset: true,
            max_vectors: 1,
            hugepages: true,
            // Above 4 GiB and below 2^39: inside every x86 IOMMU's aperture, clear of MSI windows.
            iova_base: Iova(1 << 32),
            iova_span: 1 << 36,
        }
    }
}

/// Counters of what the backend did that a caller may want to see.
#[derive(Debug, Default)]
pub struct VfioStats {
    /// DMA allocations that fell back from hugepages to 4 KiB pages.
    pub hugepage_fallbacks: AtomicU64,
    /// DMA regions currently mapped.
    pub dma_regions_live: AtomicU64,
}

/// Which MSI flavour was wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqKind {
    /// No interrupts wired.
    None,
    /// MSI-X.
    Msix,
    /// MSI.
    Msi,
}

/// A device opened through VFIO. See the module docs for the bring-up.
pub struct VfioBackend<S: VfioSys = LinuxVfio> {
    bdf: Bdf,
    // Fields drop in order: the BAR0 mapping (which holds the device file open) and the
    // eventfds go before `sys`, so closing the device can release the group from the container.
    bar0: Pages,
    irqs: Vec<EventFd>,
    sys: Arc<S>,
    info: DeviceInfo,
    config: RegionInfo,
    irq_kind: IrqKind,
    hugepages: bool,
    iova: Arc<Mutex<IovaAllocator>>,
    /// Application pages mapped at IOVA = address; each chunk's data is its reservation in the
    /// IOVA window, if any.
    user: Arc<Mutex<UserChunks>>,
    stats: Arc<VfioStats>,
}

use user::UserChunks;

impl VfioBackend<LinuxVfio> {
    /// Opens `bdf` with the real `/dev/vfio` and `/sys`.
    ///
    /// # Errors
    /// Any bring-up step; the error names the step, the device and the OS error.
    pub fn open_device(bdf: Bdf, cfg: &VfioConfig) -> Result<Self> {
        Self::open(LinuxVfio::new(), bdf, cfg)
    }
}

impl<S: VfioSys> VfioBackend<S> {
    /// Brings `bdf` up through `sys` (see the module docs for the steps).
    ///
    /// # Errors
    /// Any bring-up step; the error names the step, the device and the OS error.
    pub fn open(mut sys: S, bdf: Bdf, cfg: &VfioConfig) -> Result<Self> {
        let sys_err = |op| move |source| Error::Sys { bdf, op, source };

        let group = sys
            .iommu_group(bdf)
            .map_err(|source| Error::IommuGroup { bdf, source })?;
        sys.open_container()
            .map_err(|f| open_error(&sys, bdf, group, f))?;
        let info = sys
            .open_device(bdf, group)
            .map_err(|f| open_error(&sys, bdf, group, f))?;

        let bar0 = sys
            .region_info(b::VFIO_PCI_BAR0_REGION_INDEX)
            .map_err(sys_err("VFIO_DEVICE_GET_REGION_INFO(BAR0)"))?;
        require_size(bdf, &bar0, cfg.bar0_min_len)?;
        if bar0.flags & b::VFIO_REGION_INFO_FLAG_MMAP == 0 {
            return Err(Error::RegionNotMappable {
                bdf,
                region: bar0.index,
                flags: bar0.flags,
            });
        }
        let bar0_map = sys.mmap_region(&bar0).map_err(|source| Error::Region {
            bdf,
            op: "mmap",
            region: bar0.index,
            offset: 0,
            size: bar0.size as usize,
            source,
        })?;
        let config = sys
            .region_info(b::VFIO_PCI_CONFIG_REGION_INDEX)
            .map_err(sys_err("VFIO_DEVICE_GET_REGION_INFO(config)"))?;
        // The standard header (64 bytes) holds the command register and BARs.
        require_size(bdf, &config, 64)?;

        let mut dev = VfioBackend {
            bdf,
            sys: Arc::new(sys),
            info,
            bar0: bar0_map,
            config,
            irq_kind: IrqKind::None,
            irqs: Vec::new(),
            hugepages: cfg.hugepages,
            iova: Arc::new(Mutex::new(IovaAllocator::new(cfg.iova_base, cfg.iova_span))),
            user: Arc::new(Mutex::new(ChunkMap::new())),
            stats: Arc::new(VfioStats::default()),
        };
        if cfg.reset {
            dev.reset()?;
        }
        enable_bus_master(&dev)?;
        dev.wire_interrupts(cfg.max_vectors)?;
        Ok(dev)
    }

    /// Resets the device if it supports VFIO_DEVICE_RESET; `Ok(false)` if it does not.
    ///
    /// # Errors
    /// The reset ioctl failed.
    pub fn reset(&self) -> Result<bool> {
        if self.info.flags & b::VFIO_DEVICE_FLAGS_RESET == 0 {
            log::info!(
                "{}: device does not support VFIO_DEVICE_RESET; not reset",
                self.bdf
            );
            return Ok(false);
        }
        self.sys.reset().map_err(|source| Error::Sys {
            bdf: self.bdf,
            op: "VFIO_DEVICE_RESET",
            source,
        })?;
        Ok(true)
    }

    /// What `VFIO_DEVICE_GET_INFO` said.
    pub fn device_info(&self) -> DeviceInfo {
        self.info
    }
    /// Which MSI flavour is wired.
    pub fn irq_kind(&self) -> IrqKind {
        self.irq_kind
    }
    /// Counters.
    pub fn stats(&self) -> &VfioStats {
        &self.stats
    }
    /// The raw-operations object (for tests and diagnostics).
    pub fn sys(&self) -> &S {
        &self.sys
    }

    fn wire_interrupts(&mut self, wanted: u32) -> Result<()> {
        if wanted == 0 {
            return Ok(());
        }
        let bdf = self.bdf;
        // A device without an IRQ index of that kind answers EINVAL: treat it as zero vectors.
        let count = |index| self.sys.irq_info(index).map(|i| i.count).unwrap_or(0);
        let (kind, index, available) = match count(b::VFIO_PCI_MSIX_IRQ_INDEX) {
            0 => (
                IrqKind::Msi,
                b::VFIO_PCI_MSI_IRQ_INDEX,
                count(b::VFIO_PCI_MSI_IRQ_INDEX),
            ),
            n => (IrqKind::Msix, b::VFIO_PCI_MSIX_IRQ_INDEX, n),
        };
        if available == 0 {
            return Err(Error::NoMsi { bdf, wanted });
        }
        let n = wanted.min(available);
        let fds = (0..n)
            .map(|_| EventFd::new())
            .collect::<io::Result<Vec<_>>>()
            .map_err(|source| Error::Sys {
                bdf,
                op: "eventfd",
                source,
            })?;
        let refs: Vec<&EventFd> = fds.iter().collect();
        self.sys
            .set_irq_eventfds(index, &refs)
            .map_err(|source| Error::Sys {
                bdf,
                op: "VFIO_DEVICE_SET_IRQS",
                source,
            })?;
        if n < wanted {
            log::warn!("{bdf}: {wanted} interrupt vectors requested, {n} available");
        }
        self.irqs = fds;
        self.irq_kind = kind;
        Ok(())
    }

    fn vector(&self, vector: u32) -> Result<&EventFd> {
        self.irqs.get(vector as usize).ok_or(Error::NoSuchVector {
            bdf: self.bdf,
            vector,
            count: self.irqs.len() as u32,
        })
    }

    fn alloc_pages(&self, size: usize) -> Result<(Pages, usize)> {
        let bdf = self.bdf;
        let alloc = |page: PageSize| {
            let len = round_up(size, page.bytes())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "DMA size overflows"))?;
            self.sys.alloc_pages(len, page).map(|p| (p, page.bytes()))
        };
        if self.hugepages {
            match alloc(PageSize::Huge2M) {
                Ok(p) => return Ok(p),
                Err(e) => {
                    let n = self
                        .stats
                        .hugepage_fallbacks
                        .fetch_add(1, Ordering::Relaxed);
                    if n == 0 {
                        log::warn!(
                            "{bdf}: no 2 MiB hugepages for {size:#x} bytes of DMA memory ({e}); \
                             falling back to 4 KiB pages (reserve some: \
                             echo 512 > /proc/sys/vm/nr_hugepages)"
                        );
                    }
                }
            }
        }
        alloc(PageSize::Base4K).map_err(|source| Error::DmaAlloc { bdf, size, source })
    }
}

/// The error of a failed [`VfioSys::open_container`] or [`VfioSys::open_device`]: names the
/// device's driver when the group cannot be opened, and the devices in the way when the group
/// is not viable.
fn open_error<S: VfioSys>(sys: &S, bdf: Bdf, group: u32, failure: OpenFailure) -> Error {
    match failure {
        OpenFailure::Container(source) => Error::OpenContainer { source },
        OpenFailure::ApiVersion(found) => Error::ApiVersion {
            found,
            expected: b::VFIO_API_VERSION as i32,
        },
        OpenFailure::NoType1v2 => Error::NoType1Iommu,
        OpenFailure::OpenGroup(source) => {
            let driver = match sys.driver_of(bdf) {
                Ok(Some(d)) => d,
                Ok(None) => "none".to_owned(),
                Err(e) => format!("unknown ({e})"),
            };
            Error::OpenGroup {
                bdf,
                group,
                driver,
                source,
            }
        }
        OpenFailure::GroupStatus(source) => Error::Sys {
            bdf,
            op: "VFIO_GROUP_GET_STATUS",
            source,
        },
        OpenFailure::GroupNotViable => not_viable(sys, group),
        OpenFailure::Step { op, source } => Error::Sys { bdf, op, source },
    }
}

/// The group is not viable: name the devices in it that are not on vfio-pci.
fn not_viable<S: VfioSys>(sys: &S, group: u32) -> Error {
    let members = sys.group_members(group).unwrap_or_else(|e| {
        log::warn!("IOMMU group {group}: cannot list its devices from sysfs: {e}");
        Vec::new()
    });
    let offending: Vec<GroupMember> = members
        .iter()
        .filter(|m| m.driver.as_deref() != Some("vfio-pci"))
        .cloned()
        .collect();
    Error::GroupNotViable {
        group,
        offending: if offending.is_empty() {
            members
        } else {
            offending
        },
    }
}

fn require_size(bdf: Bdf, r: &RegionInfo, need: u64) -> Result<()> {
    if r.size < need {
        return Err(Error::RegionTooSmall {
            bdf,
            region: r.index,
            size: r.size,
            need,
        });
    }
    Ok(())
}

/// Unmaps a DMA region from the IOMMU and returns its IOVA range.
struct VfioRelease<S: VfioSys> {
    bdf: Bdf,
    sys: Arc<S>,
    iova: Arc<Mutex<IovaAllocator>>,
    stats: Arc<VfioStats>,
}

impl<S: VfioSys> DmaRelease for VfioRelease<S> {
    fn release(&self, iova: Iova, len: usize) -> Result<()> {
        self.sys
            .dma_unmap(iova, len)
            .map_err(|source| Error::DmaUnmap {
                bdf: self.bdf,
                iova,
                size: len,
                source,
            })?;
        self.stats.dma_regions_live.fetch_sub(1, Ordering::Relaxed);
        let mut alloc = self.iova.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = alloc.free(iova, len as u64) {
            // Unreachable unless the allocator and the regions disagree; the range stays
            // reserved, which is safe.
            log::error!("{}: {e}", self.bdf);
        }
        Ok(())
    }
}

impl<S: VfioSys> Backend for VfioBackend<S> {
    fn bdf(&self) -> Bdf {
        self.bdf
    }
    fn bar0_len(&self) -> u64 {
        self.bar0.len() as u64
    }
    fn mmio_read32(&self, offset: u64) -> Result<u32> {
        check_mmio(self.bdf, 0, offset, 4, self.bar0_len())?;
        self.bar0
            .0
            .read(offset)
            .map_err(|_| self.mmio_err(offset, 4))
    }
    fn mmio_write32(&self, offset: u64, value: u32) -> Result<()> {
        check_mmio(self.bdf, 0, offset, 4, self.bar0_len())?;
        self.bar0
            .0
            .write(offset, value)
            .map_err(|_| self.mmio_err(offset, 4))
    }
    fn mmio_read64(&self, offset: u64) -> Result<u64> {
        check_mmio(self.bdf, 0, offset, 8, self.bar0_len())?;
        self.bar0
            .0
            .read(offset)
            .map_err(|_| self.mmio_err(offset, 8))
    }
    fn mmio_write64(&self, offset: u64, value: u64) -> Result<()> {
        check_mmio(self.bdf, 0, offset, 8, self.bar0_len())?;
        self.bar0
            .0
            .write(offset, value)
            .map_err(|_| self.mmio_err(offset, 8))
    }

    fn alloc_dma(&self, size: usize) -> Result<DmaRegion> {
        let bdf = self.bdf;
        if size == 0 {
            return Err(Error::DmaZeroSize { bdf });
        }
        let (pages, align) = self.alloc_pages(size)?;
        let len = pages.len();
        let iova = {
            let mut alloc = self.iova.lock().unwrap_or_else(|p| p.into_inner());
            alloc
                .alloc(len as u64, align as u64)
                .ok_or(Error::IovaExhausted {
                    bdf,
                    size: len as u64,
                    base: alloc.base(),
                    span: alloc.span(),
                })?
        };
        // SAFETY: `pages` moves into the `DmaRegion` below, which only accesses it through
        // volatile raw-pointer operations and, when freed, unmaps it (`VfioRelease`) before
        // freeing it, leaking it instead if the unmap fails. On a map error nothing is mapped.
        if let Err(source) = unsafe { self.sys.dma_map(&pages, iova) } {
            let mut alloc = self.iova.lock().unwrap_or_else(|p| p.into_inner());
            // The range was just allocated, so this free cannot be refused.
            let _ = alloc.free(iova, len as u64);
            return Err(Error::DmaMap {
                bdf,
                iova,
                size: len,
                source,
            });
        }
        self.stats.dma_regions_live.fetch_add(1, Ordering::Relaxed);
        let release = VfioRelease {
            bdf,
            sys: self.sys.clone(),
            iova: self.iova.clone(),
            stats: self.stats.clone(),
        };
        Ok(DmaRegion::from_raw(pages.0, iova, Some(Arc::new(release))))
    }

    fn map_user(&self, range: UserRange) -> Result<DmaRegion> {
        self.map_user_pages(range)
    }

    fn interrupt_vectors(&self) -> u32 {
        self.irqs.len() as u32
    }
    fn interrupt_fd(&self, vector: u32) -> Result<BorrowedFd<'_>> {
        Ok(self.vector(vector)?.as_fd())
    }
    fn wait_interrupt(&self, vector: u32, timeout: Duration) -> Result<u64> {
        self.vector(vector)?
            .wait(timeout)
            .map_err(|source| Error::Sys {
                bdf: self.bdf,
                op: "poll(interrupt eventfd)",
                source,
            })
    }

    fn config_len(&self) -> u64 {
        self.config.size
    }
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        check_config(self.bdf, offset, buf.len(), self.config.size)?;
        let size = buf.len();
        self.sys
            .region_read(&self.config, offset, buf)
            .map_err(|source| self.region_err("pread", offset, size, source))
    }
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        check_config(self.bdf, offset, data.len(), self.config.size)?;
        self.sys
            .region_write(&self.config, offset, data)
            .map_err(|source| self.region_err("pwrite", offset, data.len(), source))
    }
}

impl<S: VfioSys> VfioBackend<S> {
    fn mmio_err(&self, offset: u64, size: usize) -> Error {
        Error::MmioMisaligned {
            bdf: self.bdf,
            region: 0,
            offset,
            size,
        }
    }
    fn region_err(&self, op: &'static str, offset: u64, size: usize, source: io::Error) -> Error {
        Error::Region {
            bdf: self.bdf,
            op,
            region: self.config.index,
            offset,
            size,
            source,
        }
    }
}

impl<S: VfioSys> Drop for VfioBackend<S> {
    fn drop(&mut self) {
        let index = match self.irq_kind {
            IrqKind::None => return,
            IrqKind::Msix => b::VFIO_PCI_MSIX_IRQ_INDEX,
            IrqKind::Msi => b::VFIO_PCI_MSI_IRQ_INDEX,
        };
        // Drop cannot return the error; closing the device fd disables the vectors anyway.
        if let Err(e) = self.sys.disable_irqs(index) {
            log::warn!("{}: disabling interrupts failed: {e}", self.bdf);
        }
    }
}
