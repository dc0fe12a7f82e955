//! The client against rust-vmm's `vfio_user::Server` (a test device over the twin): the
//! handshake, MMIO and config access, DMA memory the server writes, application memory it
//! writes in place, interrupts, refusals, and servers that vanish.

use std::fs::File;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use vfio_bindings::bindings::vfio as vb;
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

use super::*;
use crate::sys::twin::{Twin, TwinConfig};

/// BAR0 offset whose write makes the test server panic (its thread dies, closing the socket).
const DIE: u64 = 0xff8;
/// BAR0 offset whose write makes the test device write 8 bytes at the IOVA in register 0x10
/// (value = the bytes) and raise vector 1.
const DMA_DOORBELL: u64 = 0x20;

/// A test device: the twin behind rust-vmm's server.
struct TestDevice {
    twin: Arc<Twin>,
    maps: Vec<DmaRegion>,
}

fn io_err(e: crate::sys::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

impl ServerBackend for TestDevice {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        match (region, data.len()) {
            (0, 4) => {
                data.copy_from_slice(&self.twin.mmio_read32(offset).map_err(io_err)?.to_le_bytes())
            }
            (0, 8) => {
                data.copy_from_slice(&self.twin.mmio_read64(offset).map_err(io_err)?.to_le_bytes())
            }
            (7, _) => self.twin.config_read(offset, data).map_err(io_err)?,
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
        Ok(())
    }
    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        match (region, data.len()) {
            (0, _) if offset == DIE => panic!("test server told to die"),
            (0, 8) => {
                let v = u64::from_le_bytes(data.try_into().unwrap_or_default());
                self.twin.mmio_write64(offset, v).map_err(io_err)?;
                if offset == DMA_DOORBELL {
                    let dev = self.twin.device();
                    let at = Iova(dev.reg_read64(0x10).map_err(io_err)?);
                    dev.dma_write(at, &v.to_le_bytes()).map_err(io_err)?;
                    dev.raise_interrupt(1).map_err(io_err)?;
                }
            }
            (0, 4) => {
                let v = u32::from_le_bytes(data.try_into().unwrap_or_default());
                self.twin.mmio_write32(offset, v).map_err(io_err)?;
            }
            (7, _) => self.twin.config_write(offset, data).map_err(io_err)?,
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
        Ok(())
    }
    fn dma_map(
        &mut self,
        _f: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        let fd = fd.ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let r = DmaRegion::map_shared_file(&fd, offset, size as usize, Iova(address))?;
        self.twin.device().attach_dma(&r).map_err(io_err)?;
        self.maps.push(r);
        Ok(())
    }
    fn dma_unmap(&mut self, _f: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        let i = self
            .maps
            .iter()
            .position(|r| r.iova() == Iova(address) && r.len() as u64 == size)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        self.maps.remove(i);
        Ok(())
    }
    fn reset(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn set_irqs(
        &mut self,
        _index: u32,
        _flags: u32,
        start: u32,
        _count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        for (k, f) in fds.into_iter().enumerate() {
            let e = EventFd::adopt(f.into())?;
            self.twin
                .device()
                .route_interrupt(start + k as u32, Some(e))
                .map_err(io_err)?;
        }
        Ok(())
    }
}

fn region(index: u32, size: u64) -> ServerRegion {
    ServerRegion {
        region_info: vb::vfio_region_info {
            argsz: core::mem::size_of::<vb::vfio_region_info>() as u32,
            flags: if size > 0 {
                vb::VFIO_REGION_INFO_FLAG_READ | vb::VFIO_REGION_INFO_FLAG_WRITE
            } else {
                0
            },
            index,
            cap_offset: 0,
            size,
            offset: 0,
        },
        sparse_areas: Vec::new(),
        mmap_fd: None,
    }
}

struct TestServer {
    path: PathBuf,
    twin: Arc<Twin>,
    _dir: TempDir,
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("mrc-vfio-user-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// rust-vmm's server on `dir/nic.sock` with a twin of `vectors` MSI-X vectors whose config
/// space carries the address capability of `bdf`; it serves one client, then stops.
fn serve(tag: &str, vectors: u32, bdf: Bdf) -> TestServer {
    let dir = temp_dir(tag);
    let path = dir.0.join("nic.sock");
    let twin = Arc::new(
        Twin::new(TwinConfig {
            vectors,
            ..TwinConfig::default()
        })
        .unwrap(),
    );
    twin.config_write(ADDRESS_CAP_OFFSET, &address_capability(bdf))
        .unwrap();
    twin.config_write(0x34, &[ADDRESS_CAP_OFFSET as u8])
        .unwrap();
    twin.config_write(0x06, &[1 << 4]).unwrap();
    let mut regions: Vec<ServerRegion> = (0..9).map(|i| region(i, 0)).collect();
    regions[0] = region(0, twin.bar0_len());
    regions[7] = region(7, twin.config_len());
    let irqs = (0..5)
        .map(|index| IrqInfo {
            index,
            flags: vb::VFIO_IRQ_INFO_EVENTFD,
            count: if index == vb::VFIO_PCI_MSIX_IRQ_INDEX {
                vectors
            } else {
                0
            },
        })
        .collect();
    let listener = UnixListener::bind(&path).unwrap();
    let server = Server::from_owned_fd(listener.into(), true, irqs, regions);
    let t = twin.clone();
    thread::spawn(move || {
        let mut dev = TestDevice {
            twin: t,
            maps: Vec::new(),
        };
        let _ = server.run(&mut dev);
    });
    TestServer {
        path,
        twin,
        _dir: dir,
    }
}

fn bdf() -> Bdf {
    "0000:00:07.0".parse().unwrap()
}

#[test]
fn handshake_mmio_config_and_address() {
    let s = serve("basic", 4, bdf());
    let b = VfioUserBackend::connect(&s.path).unwrap();
    assert_eq!(b.bdf(), bdf(), "from the address capability");
    assert_eq!(b.bar0_len(), s.twin.bar0_len());
    assert_eq!(b.config_len(), 4096);
    assert_eq!(b.interrupt_vectors(), 4);
    b.mmio_write32(0x100, 0xdead_beef).unwrap();
    assert_eq!(
        s.twin.device().reg_read32(0x100).unwrap(),
        0xdead_beef,
        "landed in BAR0"
    );
    b.mmio_write64(0x108, 0x0102_0304_0506_0708).unwrap();
    assert_eq!(b.mmio_read64(0x108).unwrap(), 0x0102_0304_0506_0708);
    assert_eq!(b.mmio_read32(0x10c).unwrap(), 0x0102_0304);
    assert!(matches!(
        b.mmio_read32(b.bar0_len()),
        Err(Error::MmioOutOfRange { .. })
    ));
    assert_eq!(
        b.config_read_u16(0).unwrap(),
        mrc_abi::device::regs::PCI_VENDOR_ID,
        "vendor id"
    );
    crate::sys::enable_bus_master(&b).unwrap();
    assert_ne!(
        s.twin.config_read_u16(crate::sys::PCI_COMMAND).unwrap() & crate::sys::PCI_COMMAND_MASTER,
        0
    );
    assert!(b.gone_flag().is_some());
}

#[test]
fn driver_dma_memory_is_shared_with_the_server() {
    let s = serve("dma", 4, bdf());
    let b = VfioUserBackend::connect(&s.path).unwrap();
    let r = b.alloc_dma(100).unwrap();
    assert_eq!(r.len(), 4096);
    assert_eq!(r.iova().0 % 4096, 0);
    r.write_u64(8, 0x1111).unwrap();
    let mut seen = [0u8; 8];
    s.twin
        .device()
        .dma_read(r.iova_at(8).unwrap(), &mut seen)
        .unwrap();
    assert_eq!(
        u64::from_le_bytes(seen),
        0x1111,
        "the server reads what the driver wrote"
    );
    // The device writes it and interrupts: the driver sees both.
    b.mmio_write64(0x10, r.iova_at(16).unwrap().0).unwrap();
    b.mmio_write64(DMA_DOORBELL, 0xfeed_f00d).unwrap();
    assert_eq!(b.wait_interrupt(1, Duration::from_secs(5)).unwrap(), 1);
    assert_eq!(r.read_u64(16).unwrap(), 0xfeed_f00d);
    let iova = r.iova();
    drop(r);
    assert!(
        s.twin.device().dma_read(iova, &mut seen).is_err(),
        "unmapped at the server when freed"
    );
}

#[test]
fn application_memory_is_written_in_place() {
    let s = serve("user", 4, bdf());
    let b = VfioUserBackend::connect(&s.path).unwrap();
    let mut buf = vec![0u8; 3 * 4096];
    let p = buf.as_mut_ptr().wrapping_add(1000);
    // SAFETY: `buf` outlives the region and is read only after the device's write completed
    // (the doorbell's reply and the interrupt).
    let r = b
        .map_user(unsafe { UserRange::new(p, 5000) }.unwrap())
        .unwrap();
    assert_eq!(r.iova().0, p as u64, "IOVA = the application's address");
    b.mmio_write64(0x10, p as u64 + 4000).unwrap();
    b.mmio_write64(DMA_DOORBELL, 0x0807_0605_0403_0201).unwrap();
    assert_eq!(b.wait_interrupt(1, Duration::from_secs(5)).unwrap(), 1);
    // SAFETY: reading our own buffer through a raw pointer after the device wrote it.
    let got = unsafe { std::ptr::read_volatile(p.add(4000).cast::<[u8; 8]>()) };
    assert_eq!(
        got,
        [1, 2, 3, 4, 5, 6, 7, 8],
        "the device wrote the application's bytes"
    );
    // A second registration of overlapping memory shares the mapping.
    // SAFETY: as above.
    let r2 = b
        .map_user(unsafe { UserRange::new(p.wrapping_add(100), 10) }.unwrap())
        .unwrap();
    drop(r);
    s.twin
        .device()
        .dma_write(Iova(p as u64 + 100), &[9])
        .unwrap();
    drop(r2);
    assert_eq!(buf[1100], 9);
    assert_eq!(
        buf[5004], 5,
        "contents kept when the pages went back to private memory"
    );
    assert!(
        s.twin.device().dma_write(Iova(p as u64), &[1]).is_err(),
        "unmapped"
    );
}

#[test]
fn server_panic_is_device_gone_within_a_bounded_time() {
    let s = serve("die", 4, bdf());
    let b = VfioUserBackend::connect(&s.path).unwrap();
    let flag = b.gone_flag().unwrap();
    let t0 = Instant::now();
    let e = b.mmio_write64(DIE, 1).unwrap_err();
    assert!(matches!(e, Error::Disconnected { .. }), "{e}");
    assert!(flag.load(Ordering::SeqCst));
    assert_eq!(
        b.mmio_read32(0).unwrap(),
        u32::MAX,
        "reads as a removed device"
    );
    assert!(matches!(b.alloc_dma(1), Err(Error::Disconnected { .. })));
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn watcher_notices_a_hangup_while_idle_and_wakes_waiters() {
    // Another thread kills the server; this one waits on an interrupt vector. Only the watcher
    // signals interrupt eventfds on a hang-up, so the early wake-up is its doing.
    let s = serve("watch", 4, bdf());
    let b = Arc::new(VfioUserBackend::connect(&s.path).unwrap());
    let flag = b.gone_flag().unwrap();
    let b2 = b.clone();
    let killer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        let _ = b2.mmio_write64(DIE, 1);
    });
    // Waiting on a vector: the hang-up wakes it well before the timeout.
    let t0 = Instant::now();
    let _ = b.wait_interrupt(0, Duration::from_secs(20)).unwrap();
    killer.join().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "woken by the hang-up"
    );
    let until = Instant::now() + Duration::from_secs(5);
    while !flag.load(Ordering::SeqCst) && Instant::now() < until {
        thread::sleep(Duration::from_millis(1));
    }
    assert!(flag.load(Ordering::SeqCst));
}

#[test]
fn connect_errors_say_what_is_wrong() {
    let dir = temp_dir("connect");
    let missing = dir.0.join("none.sock");
    let e = VfioUserBackend::connect(&missing).unwrap_err();
    assert!(e.to_string().contains("no such socket"), "{e}");
    // A socket nobody listens on any more.
    let stale = dir.0.join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let e = VfioUserBackend::connect(&stale).unwrap_err();
    assert!(e.to_string().contains("nobody listens"), "{e}");
    // A server that accepts and never answers (busy with another client, or stuck).
    let silent = dir.0.join("silent.sock");
    let l = UnixListener::bind(&silent).unwrap();
    let cfg = VfioUserConfig {
        connect_timeout: Duration::from_millis(200),
        ..VfioUserConfig::default()
    };
    let t0 = Instant::now();
    let e = VfioUserBackend::connect_with(&silent, &cfg).unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(e.to_string().contains("busy with another client"), "{e}");
    // A server that hangs up at once.
    let closing = dir.0.join("closing.sock");
    let l2 = UnixListener::bind(&closing).unwrap();
    let t = thread::spawn(move || drop(l2.accept()));
    let e = VfioUserBackend::connect(&closing).unwrap_err();
    assert!(matches!(e, Error::Disconnected { .. }), "{e}");
    t.join().unwrap();
    drop(l);
}

#[test]
fn list_devices_sorts_sockets_by_name() {
    let dir = temp_dir("list");
    let _a = UnixListener::bind(dir.0.join("nic01.sock")).unwrap();
    let _b = UnixListener::bind(dir.0.join("nic00.sock")).unwrap();
    let _c = UnixListener::bind(dir.0.join("nic10.sock")).unwrap();
    std::fs::write(dir.0.join("notes.txt"), "not a socket").unwrap();
    let names: Vec<String> = list_devices(&dir.0)
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["nic00.sock", "nic01.sock", "nic10.sock"]);
    let e = list_devices(&dir.0.join("missing")).unwrap_err();
    assert!(
        e.to_string().contains("listing the socket directory"),
        "{e}"
    );
}

#[test]
fn address_capability_round_trips_and_bad_lists_end() {
    let mut cfg = vec![0u8; 256];
    assert_eq!(parse_address_capability(&cfg), None, "no capability list");
    cfg[0x06] = 1 << 4;
    cfg[0x34] = 0x50;
    cfg[0x50] = 0x05; // an MSI capability first
    cfg[0x51] = 0x40;
    cfg[0x40..0x40 + ADDRESS_CAP_BYTES]
        .copy_from_slice(&address_capability("abcd:12:1f.7".parse().unwrap()));
    assert_eq!(
        parse_address_capability(&cfg),
        Some("abcd:12:1f.7".parse().unwrap())
    );
    cfg[0x43] = b'X';
    assert_eq!(parse_address_capability(&cfg), None, "wrong signature");
    cfg[0x51] = 0x50; // a loop
    assert_eq!(parse_address_capability(&cfg), None);
    assert_eq!(parse_address_capability(&cfg[..100]), None, "short");
}
