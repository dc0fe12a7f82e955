//! The VFIO bring-up and DMA logic against a fake of the raw operations (no `/dev/vfio`).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use vfio_bindings::bindings::vfio as b;

use super::*;
use crate::sys::{
    Backend, Bdf, Error, EventFd, GroupMember, Iova, PCI_COMMAND, PCI_COMMAND_MASTER,
};

#[derive(Clone)]
pub(super) struct Knobs {
    pub(super) group: Option<u32>,
    pub(super) container_ok: bool,
    pub(super) api_version: i32,
    pub(super) type1v2: bool,
    pub(super) group_open_ok: bool,
    pub(super) group_status_ok: bool,
    pub(super) viable: bool,
    /// The `open_device` step (by its ioctl name) that fails with EBUSY.
    pub(super) fail_step: Option<&'static str>,
    pub(super) members: Vec<GroupMember>,
    pub(super) driver: Option<String>,
    pub(super) device_flags: u32,
    pub(super) bar0: RegionInfo,
    pub(super) config: RegionInfo,
    pub(super) msix: u32,
    pub(super) msi: u32,
    pub(super) huge_ok: bool,
    pub(super) map_fail: bool,
    pub(super) unmap_fail: bool,
    pub(super) reset_fail: bool,
    pub(super) config_io_fail: bool,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            group: Some(12),
            container_ok: true,
            api_version: b::VFIO_API_VERSION as i32,
            type1v2: true,
            group_open_ok: true,
            group_status_ok: true,
            viable: true,
            fail_step: None,
            members: vec![member("0000:00:04.0", Some("vfio-pci"))],
            driver: Some("vfio-pci".into()),
            device_flags: b::VFIO_DEVICE_FLAGS_RESET | b::VFIO_DEVICE_FLAGS_PCI,
            bar0: RegionInfo {
                index: b::VFIO_PCI_BAR0_REGION_INDEX,
                flags: b::VFIO_REGION_INFO_FLAG_READ
                    | b::VFIO_REGION_INFO_FLAG_WRITE
                    | b::VFIO_REGION_INFO_FLAG_MMAP,
                size: 0x4000,
                offset: 0,
            },
            config: RegionInfo {
                index: b::VFIO_PCI_CONFIG_REGION_INDEX,
                flags: b::VFIO_REGION_INFO_FLAG_READ | b::VFIO_REGION_INFO_FLAG_WRITE,
                size: 256,
                offset: 7 << 40,
            },
            msix: 8,
            msi: 1,
            huge_ok: true,
            map_fail: false,
            unmap_fail: false,
            reset_fail: false,
            config_io_fail: false,
        }
    }
}

fn member(bdf: &str, driver: Option<&str>) -> GroupMember {
    GroupMember {
        bdf: bdf.parse().unwrap(),
        driver: driver.map(str::to_owned),
    }
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// A fake of the raw operations: answers from `Knobs`, records every call.
pub(super) struct FakeSys {
    k: Knobs,
    log: Mutex<Vec<String>>,
    config_space: Mutex<Vec<u8>>,
    pub(super) mapped: Mutex<Vec<(Iova, usize)>>,
}

impl FakeSys {
    fn new(k: Knobs) -> FakeSys {
        let config_space = vec![0u8; k.config.size as usize];
        FakeSys {
            k,
            log: Mutex::new(Vec::new()),
            config_space: Mutex::new(config_space),
            mapped: Mutex::new(Vec::new()),
        }
    }
    fn note(&self, s: impl Into<String>) {
        self.log.lock().unwrap().push(s.into());
    }
    fn calls(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl VfioSys for FakeSys {
    fn iommu_group(&self, _bdf: Bdf) -> io::Result<u32> {
        self.note("iommu_group");
        self.k.group.ok_or_else(|| errno(libc::ENOENT))
    }
    fn group_members(&self, _group: u32) -> io::Result<Vec<GroupMember>> {
        Ok(self.k.members.clone())
    }
    fn driver_of(&self, _bdf: Bdf) -> io::Result<Option<String>> {
        Ok(self.k.driver.clone())
    }
    fn open_container(&mut self) -> Result<(), OpenFailure> {
        self.note("open_container");
        if !self.k.container_ok {
            return Err(OpenFailure::Container(errno(libc::ENOENT)));
        }
        if self.k.api_version != b::VFIO_API_VERSION as i32 {
            return Err(OpenFailure::ApiVersion(Some(self.k.api_version)));
        }
        if !self.k.type1v2 {
            return Err(OpenFailure::NoType1v2);
        }
        Ok(())
    }
    /// The steps of `VfioDevice::new`, each logged, stopping at the first failure.
    fn open_device(&mut self, bdf: Bdf, group: u32) -> Result<DeviceInfo, OpenFailure> {
        self.note(format!("open_group {group}"));
        if !self.k.group_open_ok {
            return Err(OpenFailure::OpenGroup(errno(libc::ENOENT)));
        }
        if !self.k.group_status_ok {
            return Err(OpenFailure::GroupStatus(errno(libc::EFAULT)));
        }
        if !self.k.viable {
            return Err(OpenFailure::GroupNotViable);
        }
        for (op, call) in [
            ("VFIO_GROUP_SET_CONTAINER", "set_container".to_owned()),
            (
                "VFIO_SET_IOMMU",
                format!("set_iommu {}", b::VFIO_TYPE1v2_IOMMU),
            ),
            ("VFIO_GROUP_GET_DEVICE_FD", format!("open_device {bdf}")),
        ] {
            if self.k.fail_step == Some(op) {
                return Err(OpenFailure::Step {
                    op,
                    source: errno(libc::EBUSY),
                });
            }
            self.note(call);
        }
        Ok(DeviceInfo {
            flags: self.k.device_flags,
            num_regions: 9,
            num_irqs: 5,
        })
    }
    fn region_info(&self, index: u32) -> io::Result<RegionInfo> {
        match index {
            b::VFIO_PCI_BAR0_REGION_INDEX => Ok(self.k.bar0),
            b::VFIO_PCI_CONFIG_REGION_INDEX => Ok(self.k.config),
            _ => Err(errno(libc::EINVAL)),
        }
    }
    fn irq_info(&self, index: u32) -> io::Result<IrqInfo> {
        let count = match index {
            b::VFIO_PCI_MSIX_IRQ_INDEX => self.k.msix,
            b::VFIO_PCI_MSI_IRQ_INDEX => self.k.msi,
            _ => return Err(errno(libc::EINVAL)),
        };
        Ok(IrqInfo {
            index,
            flags: 0,
            count,
        })
    }
    fn mmap_region(&self, region: &RegionInfo) -> io::Result<Pages> {
        self.note(format!("mmap region {}", region.index));
        Pages::heap(region.size as usize)
    }
    fn region_read(&self, region: &RegionInfo, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        assert_eq!(region.index, b::VFIO_PCI_CONFIG_REGION_INDEX);
        if self.k.config_io_fail {
            return Err(errno(libc::EIO));
        }
        let cfg = self.config_space.lock().unwrap();
        let off = offset as usize;
        buf.copy_from_slice(&cfg[off..off + buf.len()]);
        Ok(())
    }
    fn region_write(&self, region: &RegionInfo, offset: u64, data: &[u8]) -> io::Result<()> {
        assert_eq!(region.index, b::VFIO_PCI_CONFIG_REGION_INDEX);
        let mut cfg = self.config_space.lock().unwrap();
        let off = offset as usize;
        cfg[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn reset(&self) -> io::Result<()> {
        self.note("reset");
        if self.k.reset_fail {
            Err(errno(libc::EIO))
        } else {
            Ok(())
        }
    }
    fn set_irq_eventfds(&self, index: u32, fds: &[&EventFd]) -> io::Result<()> {
        self.note(format!("set_irqs {index} x{}", fds.len()));
        Ok(())
    }
    fn disable_irqs(&self, index: u32) -> io::Result<()> {
        self.note(format!("disable_irqs {index}"));
        Ok(())
    }
    fn alloc_pages(&self, size: usize, page: PageSize) -> io::Result<Pages> {
        self.note(format!("alloc_pages {size:#x} {page:?}"));
        assert_eq!(size % page.bytes(), 0, "size is a whole number of pages");
        if page == PageSize::Huge2M && !self.k.huge_ok {
            return Err(errno(libc::ENOMEM));
        }
        Pages::heap(size)
    }
    unsafe fn dma_map(&self, pages: &Pages, iova: Iova) -> io::Result<()> {
        if self.k.map_fail {
            return Err(errno(libc::ENOSPC));
        }
        self.mapped.lock().unwrap().push((iova, pages.len()));
        Ok(())
    }
    unsafe fn dma_map_user(&self, _vaddr: u64, size: usize, iova: Iova) -> io::Result<()> {
        if self.k.map_fail {
            return Err(errno(libc::ENOSPC));
        }
        let mut m = self.mapped.lock().unwrap();
        if m.iter()
            .any(|&(i, s)| i.0 < iova.0 + size as u64 && iova.0 < i.0 + s as u64)
        {
            return Err(errno(libc::EEXIST));
        }
        m.push((iova, size));
        Ok(())
    }
    fn dma_unmap(&self, iova: Iova, size: usize) -> io::Result<()> {
        if self.k.unmap_fail {
            return Err(errno(libc::EINVAL));
        }
        let mut m = self.mapped.lock().unwrap();
        let i = m
            .iter()
            .position(|&e| e == (iova, size))
            .ok_or_else(|| errno(libc::ENOENT))?;
        m.remove(i);
        Ok(())
    }
}

fn bdf() -> Bdf {
    "0000:00:04.0".parse().unwrap()
}

pub(super) fn open(k: Knobs) -> Result<VfioBackend<FakeSys>> {
    open_cfg(
        k,
        &VfioConfig {
            max_vectors: 4,
            ..VfioConfig::default()
        },
    )
}

pub(super) fn open_cfg(k: Knobs, cfg: &VfioConfig) -> Result<VfioBackend<FakeSys>> {
    VfioBackend::open(FakeSys::new(k), bdf(), cfg)
}

#[test]
fn bring_up_runs_the_steps_in_order() {
    let dev = open(Knobs::default()).unwrap();
    let calls = dev.sys().calls();
    assert_eq!(
        calls,
        [
            "iommu_group",
            "open_container",
            "open_group 12",
            "set_container",
            &format!("set_iommu {}", b::VFIO_TYPE1v2_IOMMU),
            "open_device 0000:00:04.0",
            "mmap region 0",
            "reset",
            "set_irqs 2 x4",
        ]
    );
    assert_eq!(dev.irq_kind(), IrqKind::Msix);
    assert_eq!(dev.interrupt_vectors(), 4);
    let cmd = dev.config_read_u16(PCI_COMMAND).unwrap();
    assert_ne!(cmd & PCI_COMMAND_MASTER, 0, "bus mastering enabled");
    assert_eq!(dev.bar0_len(), 0x4000);
}

#[test]
fn missing_iommu_group() {
    let e = open(Knobs {
        group: None,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    assert!(matches!(e, Error::IommuGroup { .. }), "{e}");
    assert!(e.to_string().contains("0000:00:04.0"));
}

#[test]
fn container_errors() {
    let e = open(Knobs {
        container_ok: false,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    assert!(matches!(e, Error::OpenContainer { .. }), "{e}");
    let e = open(Knobs {
        api_version: 1,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            Error::ApiVersion {
                found: Some(1),
                expected: 0
            }
        ),
        "{e}"
    );
    let e = open(Knobs {
        type1v2: false,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    assert!(matches!(e, Error::NoType1Iommu), "{e}");
    assert!(e.to_string().contains("TYPE1v2"), "{e}");
}

#[test]
fn later_open_steps_name_the_failing_operation() {
    for op in [
        "VFIO_GROUP_SET_CONTAINER",
        "VFIO_SET_IOMMU",
        "VFIO_GROUP_GET_DEVICE_FD",
    ] {
        let e = open(Knobs {
            fail_step: Some(op),
            ..Knobs::default()
        })
        .err()
        .unwrap();
        assert!(
            matches!(&e, Error::Sys { op: o, source, .. }
                if *o == op && source.raw_os_error() == Some(libc::EBUSY)),
            "{op}: {e}"
        );
        assert!(e.to_string().contains("0000:00:04.0"), "{e}");
    }
    let e = open(Knobs {
        group_status_ok: false,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            Error::Sys {
                op: "VFIO_GROUP_GET_STATUS",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn group_that_cannot_be_opened_names_the_driver() {
    let k = Knobs {
        group_open_ok: false,
        driver: Some("e1000e".into()),
        ..Knobs::default()
    };
    let e = open(k).err().unwrap();
    assert!(
        matches!(&e, Error::OpenGroup { group: 12, driver, .. } if driver == "e1000e"),
        "{e}"
    );
    assert!(e.to_string().contains("/dev/vfio/12"), "{e}");
}

#[test]
fn group_not_viable_lists_the_devices_in_the_way() {
    let k = Knobs {
        viable: false,
        members: vec![
            member("0000:00:04.0", Some("vfio-pci")),
            member("0000:00:04.1", Some("e1000e")),
            member("0000:00:04.2", None),
        ],
        ..Knobs::default()
    };
    let e = open(k).err().unwrap();
    let Error::GroupNotViable { group, offending } = &e else {
        panic!("{e}");
    };
    assert_eq!(*group, 12);
    assert_eq!(offending.len(), 2);
    let s = e.to_string();
    assert!(s.contains("0000:00:04.1 (driver e1000e)") && s.contains("0000:00:04.2 (no driver)"));
    assert!(
        !s.contains("0000:00:04.0"),
        "the vfio-pci device is not blamed: {s}"
    );
}

#[test]
fn region_checks() {
    let mut k = Knobs::default();
    k.bar0.size = 0x800;
    let e = open(k).err().unwrap();
    assert!(
        matches!(
            e,
            Error::RegionTooSmall {
                region: 0,
                size: 0x800,
                need: 0x1000,
                ..
            }
        ),
        "{e}"
    );

    let mut k = Knobs::default();
    k.bar0.flags &= !b::VFIO_REGION_INFO_FLAG_MMAP;
    let e = open(k).err().unwrap();
    assert!(
        matches!(e, Error::RegionNotMappable { region: 0, .. }),
        "{e}"
    );

    let mut k = Knobs::default();
    k.config.size = 16;
    let e = open(k).err().unwrap();
    assert!(
        matches!(
            e,
            Error::RegionTooSmall {
                region: 7,
                need: 64,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn reset_only_when_supported_and_failures_surface() {
    let dev = open(Knobs {
        device_flags: 0,
        ..Knobs::default()
    })
    .unwrap();
    assert!(!dev.sys().calls().iter().any(|c| c == "reset"));
    assert!(!dev.reset().unwrap());
    let e = open(Knobs {
        reset_fail: true,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            Error::Sys {
                op: "VFIO_DEVICE_RESET",
                ..
            }
        ),
        "{e}"
    );
    let no_reset = VfioConfig {
        reset: false,
        ..VfioConfig::default()
    };
    let dev = open_cfg(Knobs::default(), &no_reset).unwrap();
    assert!(!dev.sys().calls().iter().any(|c| c == "reset"));
}

#[test]
fn interrupt_wiring() {
    // MSI only.
    let dev = open(Knobs {
        msix: 0,
        msi: 1,
        ..Knobs::default()
    })
    .unwrap();
    assert_eq!(dev.irq_kind(), IrqKind::Msi);
    assert_eq!(dev.interrupt_vectors(), 1, "capped at what the device has");
    assert!(matches!(
        dev.interrupt_fd(1),
        Err(Error::NoSuchVector {
            vector: 1,
            count: 1,
            ..
        })
    ));
    assert_eq!(dev.wait_interrupt(0, Duration::from_millis(1)).unwrap(), 0);
    drop(dev);
    // Neither.
    let e = open(Knobs {
        msix: 0,
        msi: 0,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    assert!(matches!(e, Error::NoMsi { wanted: 4, .. }), "{e}");
    // None requested.
    let none = VfioConfig {
        max_vectors: 0,
        ..VfioConfig::default()
    };
    let dev = open_cfg(
        Knobs {
            msix: 0,
            msi: 0,
            ..Knobs::default()
        },
        &none,
    )
    .unwrap();
    assert_eq!(dev.irq_kind(), IrqKind::None);
    assert_eq!(dev.interrupt_vectors(), 0);
}

#[test]
fn drop_disables_interrupts() {
    let dev = open(Knobs::default()).unwrap();
    let sys = std::sync::Arc::clone(&dev.sys);
    drop(dev);
    assert_eq!(
        sys.calls().last().unwrap(),
        &format!("disable_irqs {}", b::VFIO_PCI_MSIX_IRQ_INDEX)
    );
}

#[test]
fn hugepages_are_used_and_aligned() {
    let dev = open(Knobs::default()).unwrap();
    let r = dev.alloc_dma(5000).unwrap();
    assert_eq!(r.len(), HUGE_PAGE_SIZE);
    assert_eq!(r.iova().0 % HUGE_PAGE_SIZE as u64, 0);
    assert_eq!(dev.stats().hugepage_fallbacks.load(Ordering::Relaxed), 0);
    r.write_u64(HUGE_PAGE_SIZE as u64 - 8, 7).unwrap();
    assert!(r.read_u64(HUGE_PAGE_SIZE as u64).is_err());
}

#[test]
fn hugepage_fallback_to_4k_pages() {
    let dev = open(Knobs {
        huge_ok: false,
        ..Knobs::default()
    })
    .unwrap();
    let r = dev.alloc_dma(5000).unwrap();
    assert_eq!(r.len(), 8192, "rounded to 4 KiB pages");
    let r2 = dev.alloc_dma(1).unwrap();
    assert_eq!(dev.stats().hugepage_fallbacks.load(Ordering::Relaxed), 2);
    assert!(dev
        .sys()
        .calls()
        .contains(&"alloc_pages 0x2000 Base4K".to_owned()));
    assert_eq!(dev.sys().mapped.lock().unwrap().len(), 2);
    drop((r, r2));
}

#[test]
fn dma_is_unmapped_on_drop_and_iova_reused() {
    let dev = open(Knobs::default()).unwrap();
    let r = dev.alloc_dma(4096).unwrap();
    let iova = r.iova();
    assert_eq!(
        *dev.sys().mapped.lock().unwrap(),
        vec![(iova, HUGE_PAGE_SIZE)]
    );
    assert_eq!(dev.stats().dma_regions_live.load(Ordering::Relaxed), 1);
    drop(r);
    assert!(dev.sys().mapped.lock().unwrap().is_empty());
    assert_eq!(dev.stats().dma_regions_live.load(Ordering::Relaxed), 0);
    assert_eq!(dev.alloc_dma(1).unwrap().iova(), iova);
}

#[test]
fn dma_region_outlives_the_backend() {
    let dev = open(Knobs::default()).unwrap();
    let r = dev.alloc_dma(64).unwrap();
    let sys = std::sync::Arc::clone(&dev.sys);
    drop(dev);
    r.write_u32(0, 1).unwrap();
    r.free().unwrap();
    assert!(
        sys.mapped.lock().unwrap().is_empty(),
        "unmapped through the shared container"
    );
}

#[test]
fn dma_errors() {
    let dev = open(Knobs {
        map_fail: true,
        ..Knobs::default()
    })
    .unwrap();
    let e = dev.alloc_dma(4096).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DmaMap {
                size: HUGE_PAGE_SIZE,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(dev.alloc_dma(0), Err(Error::DmaZeroSize { .. })));
    assert_eq!(
        dev.iova.lock().unwrap().free_bytes(),
        VfioConfig::default().iova_span,
        "IOVA returned"
    );

    let dev = open(Knobs {
        unmap_fail: true,
        ..Knobs::default()
    })
    .unwrap();
    let r = dev.alloc_dma(1).unwrap();
    let iova = r.iova();
    assert!(matches!(r.free(), Err(Error::DmaUnmap { .. })));
    assert_ne!(
        dev.alloc_dma(1).unwrap().iova(),
        iova,
        "a range that failed to unmap stays reserved"
    );

    let small = VfioConfig {
        iova_span: HUGE_PAGE_SIZE as u64,
        ..VfioConfig::default()
    };
    let dev = open_cfg(Knobs::default(), &small).unwrap();
    let _held = dev.alloc_dma(1).unwrap();
    assert!(matches!(dev.alloc_dma(1), Err(Error::IovaExhausted { .. })));
    assert!(matches!(
        dev.alloc_dma(usize::MAX),
        Err(Error::DmaAlloc { .. })
    ));
}

#[test]
fn mmio_and_config_bounds() {
    let dev = open(Knobs::default()).unwrap();
    dev.mmio_write32(0x3ffc, 0x1234_5678).unwrap();
    assert_eq!(dev.mmio_read32(0x3ffc).unwrap(), 0x1234_5678);
    dev.mmio_write64(0x8, u64::MAX).unwrap();
    assert_eq!(dev.mmio_read64(0x8).unwrap(), u64::MAX);
    assert!(matches!(
        dev.mmio_read32(0x4000),
        Err(Error::MmioOutOfRange { len: 0x4000, .. })
    ));
    assert!(matches!(
        dev.mmio_write64(0x3ffc, 0),
        Err(Error::MmioOutOfRange { .. })
    ));
    assert!(matches!(
        dev.mmio_read64(0x4),
        Err(Error::MmioMisaligned { .. })
    ));
    assert!(matches!(
        dev.config_read_u32(254),
        Err(Error::ConfigOutOfRange { len: 256, .. })
    ));
    assert!(matches!(
        dev.config_write(u64::MAX, &[1]),
        Err(Error::ConfigOutOfRange { .. })
    ));
}

#[test]
fn config_io_failure_has_context() {
    let e = open(Knobs {
        config_io_fail: true,
        ..Knobs::default()
    })
    .err()
    .unwrap();
    let Error::Region {
        op: "pread",
        region: 7,
        offset: 4,
        size: 2,
        ..
    } = &e
    else {
        panic!("{e}");
    };
    assert!(std::error::Error::source(&e).is_some());
}
