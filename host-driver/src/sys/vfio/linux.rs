//! [`LinuxVfio`]: [`VfioSys`] on rust-vmm's `vfio-ioctls` (0.10, built without its KVM and
//! MSHV features: no hypervisor is involved).
//!
//! From `vfio-ioctls`:
//! - the container: `VfioContainer::new` opens `/dev/vfio/vfio` and checks VFIO_GET_API_VERSION
//!   and VFIO_CHECK_EXTENSION(TYPE1v2);
//! - the group and the device: `VfioDevice::new` opens `/dev/vfio/<group>`, checks it is viable
//!   (VFIO_GROUP_GET_STATUS), attaches it (VFIO_GROUP_SET_CONTAINER), sets the TYPE1v2 IOMMU
//!   (VFIO_SET_IOMMU), gets the device fd (VFIO_GROUP_GET_DEVICE_FD) and reads every region's
//!   and IRQ index's info; dropping it detaches the group;
//! - region info (`get_region_flags`, `get_region_size`, `get_region_offset`), IRQ info
//!   (`get_irq_info`), MSI-X/MSI on eventfds (`enable_irq`, `disable_irq`);
//! - DMA: `VfioContainer::vfio_dma_map` and `vfio_dma_unmap` (which also checks the whole
//!   range was unmapped).
//!
//! Done here on the device fd `vfio-ioctls` opened, because the crate does not offer it:
//! - the BAR0 mapping (`memmap2`): the crate maps no regions;
//! - config space `pread`/`pwrite`: `VfioDevice::region_read`/`region_write` return nothing and
//!   only log a failed or out-of-range access, so a failed read would look like zeros;
//! - VFIO_DEVICE_GET_INFO: the crate keeps the flags private, and the backend needs
//!   `VFIO_DEVICE_FLAGS_RESET` to know whether the device can be reset;
//! - VFIO_DEVICE_RESET: `VfioDevice::reset` discards the ioctl's result.
//!
//! The two ioctls use `vmm-sys-util`'s request-number macro and ioctl wrappers (what
//! `vfio-ioctls` uses). What the crate's model changes against raw ioctls: only the TYPE1v2
//! IOMMU is accepted (not the original TYPE1); the errors of VFIO_GROUP_GET_STATUS,
//! VFIO_GROUP_SET_CONTAINER, VFIO_CHECK_EXTENSION and VFIO_DEVICE_SET_IRQS carry no errno (the
//! error names the operation instead); an API version mismatch does not say which version the
//! kernel speaks; the device directory is fixed at `/dev/vfio`.

use std::fmt;
use std::fs::File;
use std::io;
use std::mem::{size_of, ManuallyDrop};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};
use vfio_bindings::bindings::vfio as b;
use vfio_ioctls::{VfioContainer, VfioDevice, VfioError};
use vmm_sys_util::ioctl::{ioctl, ioctl_with_mut_ref};
use vmm_sys_util::ioctl_io_nr;

use super::{DeviceInfo, IrqInfo, OpenFailure, PageSize, Pages, RegionInfo, VfioSys};
use crate::sys::{Bdf, EventFd, GroupMember, Iova};

// linux/vfio.h: VFIO_DEVICE_GET_INFO is _IO(VFIO_TYPE, VFIO_BASE + 7), VFIO_DEVICE_RESET
// _IO(VFIO_TYPE, VFIO_BASE + 11).
ioctl_io_nr!(VFIO_DEVICE_GET_INFO, b::VFIO_TYPE as u32, b::VFIO_BASE + 7);
ioctl_io_nr!(VFIO_DEVICE_RESET, b::VFIO_TYPE as u32, b::VFIO_BASE + 11);

fn not_open(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        format!("VFIO {what} is not open"),
    )
}

/// A `vfio-ioctls` error as an `io::Error`: the errno where the crate kept one, else the
/// crate's own message.
fn vfio_io(e: VfioError) -> io::Error {
    match e {
        VfioError::OpenContainer(e) | VfioError::OpenGroup(e, _) => e,
        VfioError::ContainerSetIOMMU(s)
        | VfioError::GroupGetDeviceFD(s)
        | VfioError::VfioDeviceGetInfo(s)
        | VfioError::VfioDeviceGetRegionInfo(s)
        | VfioError::IommuDmaMap(s)
        | VfioError::IommuDmaUnmap(s) => io::Error::from_raw_os_error(s.errno()),
        other => io::Error::other(other),
    }
}

/// Which bring-up step a `VfioDevice::new` error belongs to.
fn device_failure(e: VfioError) -> OpenFailure {
    let step = |op, e| OpenFailure::Step {
        op,
        source: vfio_io(e),
    };
    match e {
        VfioError::OpenGroup(e, _) => OpenFailure::OpenGroup(e),
        VfioError::GetGroupStatus => OpenFailure::GroupStatus(vfio_io(e)),
        VfioError::GroupViable => OpenFailure::GroupNotViable,
        VfioError::InvalidPath => step("reading the iommu_group link in sysfs", e),
        VfioError::GroupSetContainer => step("VFIO_GROUP_SET_CONTAINER", e),
        VfioError::ContainerSetIOMMU(_) | VfioError::VfioInvalidType => step("VFIO_SET_IOMMU", e),
        VfioError::GroupGetDeviceFD(_) => step("VFIO_GROUP_GET_DEVICE_FD", e),
        VfioError::VfioDeviceGetInfo(_)
        | VfioError::VfioDeviceGetInfoPCI
        | VfioError::VfioDeviceGetInfoOther => step("VFIO_DEVICE_GET_INFO", e),
        VfioError::VfioDeviceGetRegionInfo(_) => step("VFIO_DEVICE_GET_REGION_INFO", e),
        e => step("opening the VFIO device", e),
    }
}

/// VFIO through `vfio-ioctls`, `/dev/vfio` and `/sys`.
pub struct LinuxVfio {
    sysfs: PathBuf,
    /// Set by [`VfioSys::open_device`] with the device's VFIO_DEVICE_GET_INFO.
    device: Option<(VfioDevice, DeviceInfo)>,
    container: Option<Arc<VfioContainer>>,
}

impl fmt::Debug for LinuxVfio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinuxVfio")
            .field("sysfs", &self.sysfs)
            .field("container", &self.container.is_some())
            .field("device", &self.device.as_ref().map(|(_, info)| info))
            .finish()
    }
}

impl Default for LinuxVfio {
    fn default() -> Self {
        Self::new()
    }
}

impl LinuxVfio {
    /// The real `/sys` (and `/dev/vfio`, which `vfio-ioctls` fixes).
    pub fn new() -> LinuxVfio {
        Self::with_sysfs("/sys")
    }

    /// Another sysfs root (tests use a fake sysfs tree).
    pub fn with_sysfs(sysfs: impl Into<PathBuf>) -> LinuxVfio {
        LinuxVfio {
            sysfs: sysfs.into(),
            device: None,
            container: None,
        }
    }

    fn pci_dev(&self, bdf: Bdf) -> PathBuf {
        self.sysfs.join("bus/pci/devices").join(bdf.to_string())
    }
    fn container(&self) -> io::Result<&VfioContainer> {
        self.container
            .as_deref()
            .ok_or_else(|| not_open("container"))
    }
    fn device(&self) -> io::Result<&(VfioDevice, DeviceInfo)> {
        self.device.as_ref().ok_or_else(|| not_open("device"))
    }

    /// Runs `f` on the device fd as a `File` (for `pread`/`pwrite`) without taking it over.
    fn with_device_file<R>(&self, f: impl FnOnce(&File) -> io::Result<R>) -> io::Result<R> {
        let (dev, _) = self.device()?;
        // SAFETY: the descriptor is the open device fd owned by `dev`, which `self` keeps open
        // for this whole call; `ManuallyDrop` keeps this temporary `File` from closing it.
        let file = ManuallyDrop::new(unsafe { File::from_raw_fd(dev.as_raw_fd()) });
        f(&file)
    }
}

impl Drop for LinuxVfio {
    fn drop(&mut self) {
        let Some((dev, _)) = self.device.take() else {
            return;
        };
        // `VfioDevice`'s drop closes the device fd, then re-reads the device's `iommu_group`
        // link from sysfs and unwraps the result to detach the group: a device that vanished
        // (surprise removal) would panic there. Contain it; closing the container and group
        // files (below, and by the kernel on exit) releases the group anyway.
        if catch_unwind(AssertUnwindSafe(move || drop(dev))).is_err() {
            log::error!("VFIO device teardown in vfio-ioctls panicked; group left to the kernel");
        }
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

/// VFIO_DEVICE_GET_INFO of an open device.
fn device_info(dev: &VfioDevice) -> io::Result<DeviceInfo> {
    let mut info = b::vfio_device_info {
        argsz: size_of::<b::vfio_device_info>() as u32,
        ..Default::default()
    };
    // SAFETY: `dev` is an open VFIO device fd and `info` a live vfio_device_info with argsz set
    // to its size, so the kernel writes only within it (no capability chain past it).
    let r = unsafe { ioctl_with_mut_ref(dev, VFIO_DEVICE_GET_INFO(), &mut info) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(DeviceInfo {
        flags: info.flags,
        num_regions: info.num_regions,
        num_irqs: info.num_irqs,
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

    fn open_container(&mut self) -> Result<(), OpenFailure> {
        let container = VfioContainer::new(None).map_err(|e| match e {
            VfioError::OpenContainer(e) => OpenFailure::Container(e),
            VfioError::VfioApiVersion => OpenFailure::ApiVersion(None),
            VfioError::VfioExtension | VfioError::VfioInvalidType => OpenFailure::NoType1v2,
            e => OpenFailure::Step {
                op: "opening the VFIO container",
                source: vfio_io(e),
            },
        })?;
        self.container = Some(Arc::new(container));
        Ok(())
    }

    fn open_device(&mut self, bdf: Bdf, _group: u32) -> Result<DeviceInfo, OpenFailure> {
        let container = self.container.clone().ok_or_else(|| OpenFailure::Step {
            op: "VFIO_GROUP_SET_CONTAINER",
            source: not_open("container"),
        })?;
        // The device's sysfs directory names it (VFIO_GROUP_GET_DEVICE_FD takes its last
        // component) and leads to its group (`iommu_group`).
        let dev = VfioDevice::new(&self.pci_dev(bdf), container, false).map_err(device_failure)?;
        let info = device_info(&dev).map_err(|source| OpenFailure::Step {
            op: "VFIO_DEVICE_GET_INFO",
            source,
        })?;
        self.device = Some((dev, info));
        Ok(info)
    }

    fn region_info(&self, index: u32) -> io::Result<RegionInfo> {
        let (dev, info) = self.device()?;
        // `vfio-ioctls` read every region's info when it opened the device and answers zeros
        // for an index it has none for; the kernel's region count tells those apart.
        if index >= info.num_regions {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(RegionInfo {
            index,
            flags: dev.get_region_flags(index),
            size: dev.get_region_size(index),
            offset: dev.get_region_offset(index),
        })
    }

    fn irq_info(&self, index: u32) -> io::Result<IrqInfo> {
        let (dev, _) = self.device()?;
        let irq = dev
            .get_irq_info(index)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        Ok(IrqInfo {
            index,
            flags: irq.flags,
            count: irq.count,
        })
    }

    fn mmap_region(&self, region: &RegionInfo) -> io::Result<Pages> {
        let (dev, _) = self.device()?;
        let len = usize::try_from(region.size).map_err(io::Error::other)?;
        let map = MmapOptions::new()
            .offset(region.offset)
            .len(len)
            .map_raw(dev)?;
        Ok(Pages::from_mmap(map))
    }

    fn region_read(&self, region: &RegionInfo, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = region
            .offset
            .checked_add(offset)
            .ok_or_else(|| io::Error::other("overflow"))?;
        self.with_device_file(|f| f.read_exact_at(buf, at))
    }

    fn region_write(&self, region: &RegionInfo, offset: u64, data: &[u8]) -> io::Result<()> {
        let at = region
            .offset
            .checked_add(offset)
            .ok_or_else(|| io::Error::other("overflow"))?;
        self.with_device_file(|f| f.write_all_at(data, at))
    }

    fn reset(&self) -> io::Result<()> {
        let (dev, _) = self.device()?;
        // SAFETY: `dev` is an open VFIO device fd; VFIO_DEVICE_RESET takes no argument.
        let r = unsafe { ioctl(dev, VFIO_DEVICE_RESET()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn set_irq_eventfds(&self, index: u32, fds: &[&EventFd]) -> io::Result<()> {
        let (dev, _) = self.device()?;
        dev.enable_irq(index, fds.iter().map(|fd| fd.as_vmm()).collect())
            .map_err(vfio_io)
    }

    fn disable_irqs(&self, index: u32) -> io::Result<()> {
        let (dev, _) = self.device()?;
        dev.disable_irq(index).map_err(vfio_io)
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
        let container = self.container()?;
        // SAFETY: `pages` is memory this process owns for `pages.len()` bytes; the caller
        // keeps it alive and touches it only through raw volatile operations until it is
        // unmapped (this function's contract, which is `vfio_dma_map`'s).
        unsafe { container.vfio_dma_map(iova.0, pages.len(), pages.0.as_ptr()) }.map_err(vfio_io)
    }

    unsafe fn dma_map_user(&self, vaddr: u64, size: usize, iova: Iova) -> io::Result<()> {
        let container = self.container()?;
        // SAFETY: the caller keeps `size` bytes at `vaddr` mapped until they are unmapped
        // (this function's contract, which is `vfio_dma_map`'s).
        unsafe { container.vfio_dma_map(iova.0, size, vaddr as *mut u8) }.map_err(vfio_io)
    }

    fn dma_unmap(&self, iova: Iova, size: usize) -> io::Result<()> {
        self.container()?
            .vfio_dma_unmap(iova.0, size)
            .map_err(vfio_io)
    }
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
        assert_eq!(VFIO_DEVICE_GET_INFO(), 0x3b6b);
        assert_eq!(VFIO_DEVICE_RESET(), 0x3b6f);
    }

    #[test]
    fn vfio_errors_keep_the_errno_where_the_crate_has_one() {
        let e = vfio_io(VfioError::IommuDmaMap(vmm_sys_util::errno::Error::new(
            libc::ENOSPC,
        )));
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        let e = vfio_io(VfioError::VfioDeviceEnableIrq);
        assert_eq!(e.raw_os_error(), None);
        assert!(e.to_string().contains("irq"), "{e}");
        assert!(matches!(
            device_failure(VfioError::GroupViable),
            OpenFailure::GroupNotViable
        ));
        let OpenFailure::OpenGroup(e) = device_failure(VfioError::OpenGroup(
            io::Error::from_raw_os_error(libc::EACCES),
            "12".into(),
        )) else {
            panic!("not OpenGroup");
        };
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let OpenFailure::Step { op, source } = device_failure(VfioError::GroupGetDeviceFD(
            vmm_sys_util::errno::Error::new(libc::EBUSY),
        )) else {
            panic!("not a step");
        };
        assert_eq!(op, "VFIO_GROUP_GET_DEVICE_FD");
        assert_eq!(source.raw_os_error(), Some(libc::EBUSY));
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
        let sys = LinuxVfio::with_sysfs(&fs.0);
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
    fn operations_before_open_are_clean_errors() {
        let sys = LinuxVfio::with_sysfs("/nonexistent-sys");
        assert_eq!(sys.reset().unwrap_err().kind(), io::ErrorKind::NotConnected);
        assert_eq!(
            sys.region_info(0).unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        assert_eq!(
            sys.dma_unmap(Iova(0x1000), 0x1000).unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        let mut sys = sys;
        let bdf: Bdf = "0000:00:04.0".parse().unwrap();
        assert!(matches!(
            sys.open_device(bdf, 12),
            Err(OpenFailure::Step { source, .. }) if source.kind() == io::ErrorKind::NotConnected
        ));
    }

    #[test]
    fn container_opens_or_fails_cleanly() {
        // Whether this machine has /dev/vfio/vfio (and vfio_iommu_type1 loaded) decides which;
        // none may panic.
        let mut sys = LinuxVfio::new();
        match sys.open_container() {
            Ok(()) => assert!(sys.container.is_some()),
            Err(OpenFailure::Container(e)) => assert!(e.raw_os_error().is_some(), "{e}"),
            Err(OpenFailure::NoType1v2) => assert!(sys.container.is_none()),
            Err(f) => panic!("unexpected: {f}"),
        }
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
