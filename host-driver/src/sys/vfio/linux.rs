//! [`LinuxVfio`]: the real system calls behind [`VfioSys`].
//!
//! Kernel structures and constants come from `vfio-bindings` (rust-vmm's bindgen of
//! `linux/vfio.h`); ioctl request numbers are derived here with the `_IO` macro's arithmetic,
//! never written as literals.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::{MmapOptions, MmapRaw};
use vfio_bindings::bindings::vfio as b;

use super::{DeviceInfo, IrqInfo, PageSize, Pages, RegionInfo, VfioSys};
use crate::sys::{Bdf, GroupMember, Iova};

// `_IOC` layout (include/uapi/asm-generic/ioctl.h; powerpc, mips and sparc differ).
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = 8;
const IOC_SIZESHIFT: u32 = 16;
#[cfg(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
))]
mod dir {
    pub const IOC_NONE: u32 = 1;
    pub const IOC_DIRSHIFT: u32 = 29;
}
#[cfg(not(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
)))]
mod dir {
    pub const IOC_NONE: u32 = 0;
    pub const IOC_DIRSHIFT: u32 = 30;
}

/// `_IO(type, nr)`: an ioctl with no size-encoded argument (all of VFIO's are).
pub(crate) const fn io(ty: u32, nr: u32) -> u32 {
    (dir::IOC_NONE << dir::IOC_DIRSHIFT)
        | (ty << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | (0 << IOC_SIZESHIFT)
}

const fn vfio_io(n: u32) -> u32 {
    io(b::VFIO_TYPE as u32, b::VFIO_BASE + n)
}

// linux/vfio.h: VFIO_GET_API_VERSION is _IO(VFIO_TYPE, VFIO_BASE + 0), and so on.
pub(crate) const VFIO_GET_API_VERSION: u32 = vfio_io(0);
pub(crate) const VFIO_CHECK_EXTENSION: u32 = vfio_io(1);
pub(crate) const VFIO_SET_IOMMU: u32 = vfio_io(2);
pub(crate) const VFIO_GROUP_GET_STATUS: u32 = vfio_io(3);
pub(crate) const VFIO_GROUP_SET_CONTAINER: u32 = vfio_io(4);
pub(crate) const VFIO_GROUP_GET_DEVICE_FD: u32 = vfio_io(6);
pub(crate) const VFIO_DEVICE_GET_INFO: u32 = vfio_io(7);
pub(crate) const VFIO_DEVICE_GET_REGION_INFO: u32 = vfio_io(8);
pub(crate) const VFIO_DEVICE_GET_IRQ_INFO: u32 = vfio_io(9);
pub(crate) const VFIO_DEVICE_SET_IRQS: u32 = vfio_io(10);
pub(crate) const VFIO_DEVICE_RESET: u32 = vfio_io(11);
pub(crate) const VFIO_IOMMU_MAP_DMA: u32 = vfio_io(13);
pub(crate) const VFIO_IOMMU_UNMAP_DMA: u32 = vfio_io(14);

// `vfio_irq_set` is five u32 header words followed by the data (here: one i32 fd per vector).
const _: () = assert!(size_of::<b::vfio_irq_set>() == 5 * size_of::<u32>());

/// Calls `ioctl(fd, req, arg)`; a negative return is the `errno`.
///
/// # Safety
/// `arg` must be what the kernel expects for `req`: an integer, or a pointer to a live,
/// correctly sized and initialised structure for the whole call.
unsafe fn ioctl(fd: &File, req: u32, arg: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: forwarded to the caller; `fd` is an open descriptor borrowed for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn ptr_arg<T>(p: &mut T) -> libc::c_ulong {
    p as *mut T as libc::c_ulong
}

fn not_open(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        format!("VFIO {what} is not open"),
    )
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// VFIO through `/dev/vfio` and `/sys`.
#[derive(Debug)]
pub struct LinuxVfio {
    sysfs: PathBuf,
    dev_vfio: PathBuf,
    container: Option<File>,
    group: Option<File>,
    device: Option<File>,
}

impl Default for LinuxVfio {
    fn default() -> Self {
        Self::new()
    }
}

impl LinuxVfio {
    /// The real `/sys` and `/dev/vfio`.
    pub fn new() -> LinuxVfio {
        Self::with_roots("/sys", "/dev/vfio")
    }

    /// Other roots (tests use a fake sysfs tree).
    pub fn with_roots(sysfs: impl Into<PathBuf>, dev_vfio: impl Into<PathBuf>) -> LinuxVfio {
        LinuxVfio {
            sysfs: sysfs.into(),
            dev_vfio: dev_vfio.into(),
            container: None,
            group: None,
            device: None,
        }
    }

    fn pci_dev(&self, bdf: Bdf) -> PathBuf {
        self.sysfs.join("bus/pci/devices").join(bdf.to_string())
    }
    fn container(&self) -> io::Result<&File> {
        self.container.as_ref().ok_or_else(|| not_open("container"))
    }
    fn group(&self) -> io::Result<&File> {
        self.group.as_ref().ok_or_else(|| not_open("group"))
    }
    fn device(&self) -> io::Result<&File> {
        self.device.as_ref().ok_or_else(|| not_open("device"))
    }
}

/// Last path component of a symlink target, e.g. `../../kernel/iommu_groups/12` -> `12`.
fn link_name(link: &Path) -> io::Result<String> {
    let target = std::fs::read_link(link)?;
    target
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} points to {}", link.display(), target.display()),
            )
        })
}

impl VfioSys for LinuxVfio {
    fn iommu_group(&self, bdf: Bdf) -> io::Result<u32> {
        let name = link_name(&self.pci_dev(bdf).join("iommu_group"))?;
        name.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("IOMMU group {name:?} is not a number"),
            )
        })
    }

    fn group_members(&self, group: u32) -> io::Result<Vec<GroupMember>> {
        let dir = self
            .sysfs
            .join("kernel/iommu_groups")
            .join(group.to_string())
            .join("devices");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name();
            // Non-PCI members (rare) have no BDF name; they cannot be bound to vfio-pci anyway.
            let Some(bdf) = name.to_str().and_then(|n| n.parse::<Bdf>().ok()) else {
                continue;
            };
            out.push(GroupMember {
                bdf,
                driver: self.driver_of(bdf)?,
            });
        }
        out.sort_by_key(|m| m.bdf);
        Ok(out)
    }

    fn driver_of(&self, bdf: Bdf) -> io::Result<Option<String>> {
        match link_name(&self.pci_dev(bdf).join("driver")) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn open_container(&mut self) -> io::Result<()> {
        self.container = Some(open_rw(&self.dev_vfio.join("vfio"))?);
        Ok(())
    }

    fn api_version(&self) -> io::Result<i32> {
        // SAFETY: VFIO_GET_API_VERSION takes no argument.
        unsafe { ioctl(self.container()?, VFIO_GET_API_VERSION, 0) }
    }

    fn check_extension(&self, ext: u32) -> io::Result<bool> {
        // SAFETY: VFIO_CHECK_EXTENSION takes the extension number by value.
        let r = unsafe { ioctl(self.container()?, VFIO_CHECK_EXTENSION, ext.into()) }?;
        Ok(r > 0)
    }

    fn open_group(&mut self, group: u32) -> io::Result<()> {
        self.group = Some(open_rw(&self.dev_vfio.join(group.to_string()))?);
        Ok(())
    }

    fn group_viable(&self) -> io::Result<bool> {
        let mut status = b::vfio_group_status {
            argsz: size_of::<b::vfio_group_status>() as u32,
            flags: 0,
        };
        // SAFETY: `status` is a live vfio_group_status with argsz set, as the ioctl expects.
        unsafe { ioctl(self.group()?, VFIO_GROUP_GET_STATUS, ptr_arg(&mut status)) }?;
        Ok(status.flags & b::VFIO_GROUP_FLAGS_VIABLE != 0)
    }

    fn set_container(&mut self) -> io::Result<()> {
        let mut fd: libc::c_int = self.container()?.as_raw_fd();
        // SAFETY: the ioctl reads one int (the container fd) through the pointer.
        unsafe { ioctl(self.group()?, VFIO_GROUP_SET_CONTAINER, ptr_arg(&mut fd)) }?;
        Ok(())
    }

    fn set_iommu(&mut self, iommu_type: u32) -> io::Result<()> {
        // SAFETY: VFIO_SET_IOMMU takes the IOMMU type by value.
        unsafe { ioctl(self.container()?, VFIO_SET_IOMMU, iommu_type.into()) }?;
        Ok(())
    }

    fn open_device(&mut self, bdf: Bdf) -> io::Result<DeviceInfo> {
        let name = CString::new(bdf.to_string()).map_err(io::Error::other)?;
        // SAFETY: the ioctl reads a NUL-terminated device name through the pointer.
        let fd = unsafe {
            ioctl(
                self.group()?,
                VFIO_GROUP_GET_DEVICE_FD,
                name.as_ptr() as libc::c_ulong,
            )
        }?;
        // SAFETY: on success the ioctl returned a new descriptor that nothing else owns.
        let device = unsafe { File::from_raw_fd(fd) };
        let mut info = b::vfio_device_info {
            argsz: size_of::<b::vfio_device_info>() as u32,
            ..Default::default()
        };
        // SAFETY: `info` is a live vfio_device_info with argsz set.
        unsafe { ioctl(&device, VFIO_DEVICE_GET_INFO, ptr_arg(&mut info)) }?;
        self.device = Some(device);
        Ok(DeviceInfo {
            flags: info.flags,
            num_regions: info.num_regions,
            num_irqs: info.num_irqs,
        })
    }

    fn region_info(&self, index: u32) -> io::Result<RegionInfo> {
        let mut info = b::vfio_region_info {
            argsz: size_of::<b::vfio_region_info>() as u32,
            index,
            ..Default::default()
        };
        // SAFETY: `info` is a live vfio_region_info with argsz and index set; with argsz equal
        // to the base structure the kernel writes no capability chain past it.
        unsafe {
            ioctl(
                self.device()?,
                VFIO_DEVICE_GET_REGION_INFO,
                ptr_arg(&mut info),
            )
        }?;
        Ok(RegionInfo {
            index,
            flags: info.flags,
            size: info.size,
            offset: info.offset,
        })
    }

    fn irq_info(&self, index: u32) -> io::Result<IrqInfo> {
        let mut info = b::vfio_irq_info {
            argsz: size_of::<b::vfio_irq_info>() as u32,
            index,
            ..Default::default()
        };
        // SAFETY: `info` is a live vfio_irq_info with argsz and index set.
        unsafe { ioctl(self.device()?, VFIO_DEVICE_GET_IRQ_INFO, ptr_arg(&mut info)) }?;
        Ok(IrqInfo {
            index,
            flags: info.flags,
            count: info.count,
        })
    }

    fn mmap_region(&self, region: &RegionInfo) -> io::Result<Pages> {
        let len = usize::try_from(region.size).map_err(io::Error::other)?;
        let map = MmapOptions::new()
            .offset(region.offset)
            .len(len)
            .map_raw(self.device()?)?;
        Ok(Pages::from_mmap(map))
    }

    fn region_read(&self, region: &RegionInfo, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = region
            .offset
            .checked_add(offset)
            .ok_or_else(|| io::Error::other("overflow"))?;
        self.device()?.read_exact_at(buf, at)
    }

    fn region_write(&self, region: &RegionInfo, offset: u64, data: &[u8]) -> io::Result<()> {
        let at = region
            .offset
            .checked_add(offset)
            .ok_or_else(|| io::Error::other("overflow"))?;
        self.device()?.write_all_at(data, at)
    }

    fn reset(&self) -> io::Result<()> {
        // SAFETY: VFIO_DEVICE_RESET takes no argument.
        unsafe { ioctl(self.device()?, VFIO_DEVICE_RESET, 0) }?;
        Ok(())
    }

    fn set_irq_eventfds(&self, index: u32, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let mut words = irq_set_header(
            index,
            b::VFIO_IRQ_SET_DATA_EVENTFD | b::VFIO_IRQ_SET_ACTION_TRIGGER,
            fds.len(),
        )?;
        words.extend(fds.iter().map(|fd| fd.as_raw_fd() as u32));
        // SAFETY: `words` is a vfio_irq_set header (argsz covering the fds) followed by
        // `count` fds, live for the call; the borrowed fds stay open during it.
        unsafe {
            ioctl(
                self.device()?,
                VFIO_DEVICE_SET_IRQS,
                words.as_mut_ptr() as _,
            )
        }?;
        Ok(())
    }

    fn disable_irqs(&self, index: u32) -> io::Result<()> {
        let mut words = irq_set_header(
            index,
            b::VFIO_IRQ_SET_DATA_NONE | b::VFIO_IRQ_SET_ACTION_TRIGGER,
            0,
        )?;
        // SAFETY: a bare vfio_irq_set header with count 0, live for the call.
        unsafe {
            ioctl(
                self.device()?,
                VFIO_DEVICE_SET_IRQS,
                words.as_mut_ptr() as _,
            )
        }?;
        Ok(())
    }

    fn alloc_pages(&self, size: usize, page: PageSize) -> io::Result<Pages> {
        let mut opts = MmapOptions::new();
        opts.len(size).populate();
        if page == PageSize::Huge2M {
            // MAP_HUGETLB | MAP_HUGE_2MB (log2(2 MiB) = 21).
            opts.huge(Some(21));
        }
        let map = opts.map_anon()?;
        Ok(Pages::from_mmap(MmapRaw::from(map)))
    }

    unsafe fn dma_map(&self, pages: &Pages, iova: Iova) -> io::Result<()> {
        let mut map = b::vfio_iommu_type1_dma_map {
            argsz: size_of::<b::vfio_iommu_type1_dma_map>() as u32,
            flags: b::VFIO_DMA_MAP_FLAG_READ | b::VFIO_DMA_MAP_FLAG_WRITE,
            vaddr: pages.0.as_ptr() as u64,
            iova: iova.0,
            size: pages.len() as u64,
        };
        // SAFETY: `map` is a live vfio_iommu_type1_dma_map describing memory `pages` owns; the
        // caller keeps it alive until unmapped (this function's contract).
        unsafe { ioctl(self.container()?, VFIO_IOMMU_MAP_DMA, ptr_arg(&mut map)) }?;
        Ok(())
    }

    fn dma_unmap(&self, iova: Iova, size: usize) -> io::Result<()> {
        let mut unmap = b::vfio_iommu_type1_dma_unmap {
            argsz: size_of::<b::vfio_iommu_type1_dma_unmap>() as u32,
            flags: 0,
            iova: iova.0,
            size: size as u64,
            ..Default::default()
        };
        // SAFETY: `unmap` is a live vfio_iommu_type1_dma_unmap with no bitmap flag, so the
        // kernel reads and writes only the base structure.
        unsafe { ioctl(self.container()?, VFIO_IOMMU_UNMAP_DMA, ptr_arg(&mut unmap)) }?;
        if unmap.size != size as u64 {
            return Err(io::Error::other(format!(
                "unmapped {:#x} of {size:#x} bytes",
                unmap.size
            )));
        }
        Ok(())
    }
}

/// The five header words of a `vfio_irq_set` with room reserved for `count` data words.
fn irq_set_header(index: u32, flags: u32, count: usize) -> io::Result<Vec<u32>> {
    let count32 = u32::try_from(count).map_err(io::Error::other)?;
    let argsz = size_of::<b::vfio_irq_set>() + count * size_of::<u32>();
    let argsz = u32::try_from(argsz).map_err(io::Error::other)?;
    let mut words = Vec::with_capacity(5 + count);
    // argsz, flags, index, start, count
    words.extend([argsz, flags, index, 0, count32]);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[cfg(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    ))]
    #[test]
    fn ioctl_numbers_match_the_kernel_header() {
        // Values from linux/vfio.h as compiled on x86_64/arm64/riscv64.
        assert_eq!(VFIO_GET_API_VERSION, 0x3b64);
        assert_eq!(VFIO_CHECK_EXTENSION, 0x3b65);
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(VFIO_DEVICE_SET_IRQS, 0x3b6e);
        assert_eq!(VFIO_DEVICE_RESET, 0x3b6f);
        assert_eq!(VFIO_IOMMU_MAP_DMA, 0x3b71);
        assert_eq!(VFIO_IOMMU_UNMAP_DMA, 0x3b72);
    }

    #[test]
    fn irq_set_layout() {
        let w = irq_set_header(2, 0x24, 3).unwrap();
        assert_eq!(w, vec![20 + 12, 0x24, 2, 0, 3]);
    }

    /// A throwaway sysfs tree under the temp dir.
    struct FakeSysfs(PathBuf);
    impl FakeSysfs {
        fn new(tag: &str) -> FakeSysfs {
            let root = std::env::temp_dir().join(format!("mrc-sysfs-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
            std::fs::create_dir_all(root.join("bus/pci/drivers/vfio-pci")).unwrap();
            std::fs::create_dir_all(root.join("bus/pci/drivers/e1000e")).unwrap();
            FakeSysfs(root)
        }
        fn device(&self, bdf: &str, group: u32, driver: Option<&str>) {
            let dev = self.0.join("bus/pci/devices").join(bdf);
            std::fs::create_dir_all(&dev).unwrap();
            let g = self.0.join("kernel/iommu_groups").join(group.to_string());
            std::fs::create_dir_all(g.join("devices")).unwrap();
            symlink(&g, dev.join("iommu_group")).unwrap();
            symlink(&dev, g.join("devices").join(bdf)).unwrap();
            if let Some(d) = driver {
                symlink(self.0.join("bus/pci/drivers").join(d), dev.join("driver")).unwrap();
            }
        }
    }
    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn sysfs_group_and_members() {
        let fs = FakeSysfs::new("members");
        fs.device("0000:00:04.0", 12, Some("vfio-pci"));
        fs.device("0000:00:04.1", 12, Some("e1000e"));
        fs.device("0000:00:05.0", 13, None);
        let sys = LinuxVfio::with_roots(&fs.0, fs.0.join("dev-vfio"));
        let bdf: Bdf = "0000:00:04.0".parse().unwrap();
        assert_eq!(sys.iommu_group(bdf).unwrap(), 12);
        let m = sys.group_members(12).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].driver.as_deref(), Some("vfio-pci"));
        assert_eq!(m[1].to_string(), "0000:00:04.1 (driver e1000e)");
        assert_eq!(
            sys.driver_of("0000:00:05.0".parse().unwrap()).unwrap(),
            None
        );
        let missing = sys
            .iommu_group("0000:00:06.0".parse().unwrap())
            .unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn missing_dev_vfio_is_a_clean_error() {
        let mut sys = LinuxVfio::with_roots("/nonexistent-sys", "/nonexistent-dev-vfio");
        assert_eq!(
            sys.open_container().unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            sys.api_version().unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        assert!(sys.reset().is_err());
    }

    #[test]
    fn hugepages_succeed_or_fail_cleanly() {
        // Whether this machine has 2 MiB pages reserved decides which; neither may panic.
        match LinuxVfio::new().alloc_pages(HUGE, PageSize::Huge2M) {
            Ok(p) => {
                assert_eq!(p.len(), HUGE);
                assert_eq!(p.0.read::<u64>(HUGE as u64 - 8), Ok(0));
            }
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        }
    }
    const HUGE: usize = super::super::HUGE_PAGE_SIZE;

    #[test]
    fn anonymous_pages_are_zeroed() {
        let sys = LinuxVfio::new();
        let p = sys.alloc_pages(8192, PageSize::Base4K).unwrap();
        assert_eq!(p.len(), 8192);
        assert_eq!(p.0.read::<u64>(8184), Ok(0));
    }
}
