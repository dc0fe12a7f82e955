//! The twin's MMIO, DMA, interrupt and config-space contract.

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
    // Red Hat's vendor id, first device id of its experimental range (abi/REGISTERS.md).
    assert_eq!(t.config_read_u16(0).unwrap(), 0x1af4);
    assert_eq!(t.config_read_u16(2).unwrap(), 0x10f0);
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
