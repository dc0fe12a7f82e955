//! The vfio-user backend: a PCI device served by another process over a unix socket
//! (`mrc-sim serve` serves simulated NICs this way), driven exactly like a VFIO device.
//!
//! | [`Backend`] | vfio-user |
//! |---|---|
//! | BAR0 MMIO, config space | `REGION_READ` / `REGION_WRITE` of region 0 / 7, one reply each |
//! | [`Backend::alloc_dma`] | a sealed memfd mapped here, shared with `DMA_MAP` (the fd rides on the message); IOVA = its address here |
//! | [`Backend::map_user`] | the application's own pages moved onto memfds in place (same addresses, same bytes), shared with `DMA_MAP`; IOVA = address |
//! | interrupts | one eventfd per vector, handed over with `SET_IRQS` (MSI-X) |
//! | surprise removal | the server closing the socket, dying, or not answering within the reply timeout |
//!
//! # Why application memory is remapped, not copied or reached by cross-memory attach
//! Real programs (the OCP benchmark among them) register ordinary `malloc`/`memalign` memory and
//! spin on a word in it until a peer's RDMA write changes it, without calling the library. The
//! write must therefore land in the application's own pages. Moving those pages onto a memfd at
//! the same address (see `shm`) lets the server map them and write them directly, with no
//! copy, no privilege and no system call per access. Cross-memory attach
//! (`process_vm_writev`) would need ptrace rights over the client (refused under Yama's default
//! `ptrace_scope=1` for non-descendants) and a system call for every descriptor, CQE and payload
//! access. The cost of remapping is the contract of [`super::UserRange::new`]: no other thread
//! may write the touched pages while a registration is made or dropped, and after `fork` a
//! child shares registered pages with its parent instead of copying them.
//!
//! # Failure is never a hang
//! Every socket operation has a timeout ([`VfioUserConfig`]). Any failure of the connection (the
//! server closes it, dies, breaks the framing or stops answering) finishes it: the watcher thread
//! notices a hang-up even while nobody is talking to the server, sets the device's gone flag
//! ([`Backend::gone_flag`]) and wakes every interrupt waiter; from then on MMIO reads return all
//! ones (as a surprise-removed PCIe device's do) and everything else fails with
//! [`Error::Disconnected`], which the device layer reports as `DeviceGone`.
//!
//! # The device's PCI address
//! vfio-user does not carry one, but the driver names NICs by it (and derives the NIC address a
//! peer sends to from it). A server may place a vendor-specific capability in config space
//! ([`address_capability`]); without one the device is `0000:00:00.0`.
//!
//! # Why not the `vfio_user` crate's client
//! rust-vmm's `vfio_user` crate serves devices (the simulator uses its `Server`), but its
//! `Client` cannot meet this driver's contract: it sets no timeouts (a busy or stuck server
//! hangs the caller), it does not check a reply's error flag (a refused `DMA_MAP` looks like
//! success; an error reply to a region access desynchronises the stream and blocks), and it
//! panics on some malformed replies. This client speaks the same protocol (version 0.1; the
//! tests run it against the crate's `Server`) and checks every reply against its request.

mod conn;
pub mod proto;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use vfio_bindings::bindings::vfio as vb;
use zerocopy::{FromBytes, IntoBytes};

use super::mem::{round_up, RawMem, PAGE_SIZE};
use super::{
    check_config, check_mmio, shm, Backend, Bdf, DmaRegion, DmaRelease, Error, EventFd, Iova,
    Result, UserRange,
};
use conn::{Conn, ConnError, Watcher};
use proto::Command;

/// Timeouts and interrupt wiring of a vfio-user connection.
#[derive(Clone, Debug)]
pub struct VfioUserConfig {
    /// Longest wait for the connection and the handshake. A server busy with another client
    /// (one client per device, as with VFIO) does not answer: this turns that into an error.
    pub connect_timeout: Duration,
    /// Longest wait for any later reply. A doorbell's reply comes after the simulated fabric
    /// ran the posted work, so this is generous.
    pub reply_timeout: Duration,
    /// Interrupt vectors to wire (fewer if the device has fewer).
    pub max_vectors: u32,
    /// Ask the server to reset the device (`DEVICE_RESET`) after the handshake.
    pub reset: bool,
}

impl Default for VfioUserConfig {
    fn default() -> Self {
        VfioUserConfig {
            connect_timeout: Duration::from_secs(5),
            reply_timeout: Duration::from_secs(60),
            max_vectors: 8,
            reset: true,
        }
    }
}

/// Every socket in `dir` (the sockets `mrc-sim serve --socket-dir` creates), sorted by file
/// name: device `i` of the list is the one a library names `mrc{i}`.
///
/// # Errors
/// [`Error::Socket`] when the directory cannot be read.
pub fn list_devices(dir: &Path) -> Result<Vec<PathBuf>> {
    let err = |source| Error::Socket {
        path: dir.to_owned(),
        op: "listing the socket directory",
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        if entry.file_type().map_err(err)?.is_socket() {
            out.push(entry.path());
        }
    }
    out.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(out)
}

/// Config-space offset where [`address_capability`] goes.
pub const ADDRESS_CAP_OFFSET: u64 = 0x40;
/// PCI capability ID of a vendor-specific capability.
const PCI_CAP_ID_VNDR: u8 = 0x09;
/// Bytes of [`address_capability`].
pub const ADDRESS_CAP_BYTES: usize = 12;
/// Signature of the address capability (after ID, next pointer and length).
const ADDRESS_CAP_MAGIC: [u8; 4] = *b"MRCA";

/// The vendor-specific PCI capability that tells a vfio-user client the device's PCI address:
/// ID 0x09, next pointer 0, length 12, `"MRCA"`, a reserved byte, domain (little-endian), bus,
/// device << 3 | function. A server places it at [`ADDRESS_CAP_OFFSET`], points the
/// capability pointer (0x34) at it and sets the status register's capability-list bit.
pub fn address_capability(bdf: Bdf) -> [u8; ADDRESS_CAP_BYTES] {
    let d = bdf.domain.to_le_bytes();
    let [m0, m1, m2, m3] = ADDRESS_CAP_MAGIC;
    [
        PCI_CAP_ID_VNDR,
        0,
        ADDRESS_CAP_BYTES as u8,
        m0,
        m1,
        m2,
        m3,
        0,
        d[0],
        d[1],
        bdf.bus,
        (bdf.device << 3) | bdf.function,
    ]
}

/// Finds the address capability in a config space (at least its first 256 bytes).
pub fn parse_address_capability(config: &[u8]) -> Option<Bdf> {
    const STATUS: usize = 0x06;
    const CAP_LIST: u8 = 1 << 4;
    const CAP_PTR: usize = 0x34;
    if config.len() < 256 || config[STATUS] & CAP_LIST == 0 {
        return None;
    }
    let mut at = usize::from(config[CAP_PTR] & !3);
    // A capability list has at most 48 entries in 256 bytes; a loop stops here too.
    for _ in 0..48 {
        if at < 0x40 || at + ADDRESS_CAP_BYTES > config.len() {
            return None;
        }
        let cap = &config[at..at + ADDRESS_CAP_BYTES];
        if cap[0] == PCI_CAP_ID_VNDR
            && usize::from(cap[2]) >= ADDRESS_CAP_BYTES
            && cap[3..7] == ADDRESS_CAP_MAGIC
        {
            let domain = u16::from_le_bytes([cap[8], cap[9]]);
            return Bdf::new(domain, cap[10], cap[11] >> 3, cap[11] & 7);
        }
        at = usize::from(cap[1] & !3);
    }
    None
}

/// Per connection: user-memory segments shared with `DMA_MAP`, by start, with their length
/// and the number of registrations on this connection that use them.
type UserMaps = BTreeMap<u64, (u64, u32)>;

/// What every handle of a connection shares (the backend, its DMA regions' release hooks).
struct Shared {
    path: PathBuf,
    bdf: Bdf,
    conn: Mutex<Conn>,
    gone: Arc<AtomicBool>,
    max_xfer: usize,
    user: Mutex<UserMaps>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn disconnected(&self, why: String) -> Error {
        if !self.gone.swap(true, Ordering::SeqCst) {
            log::error!(
                "{}: vfio-user device {} is gone: {why}",
                self.bdf,
                self.path.display()
            );
        }
        Error::Disconnected {
            bdf: self.bdf,
            path: self.path.clone(),
            why,
        }
    }

    /// One request and its checked reply body.
    fn call(&self, command: Command, parts: &[&[u8]], fds: &[RawFd]) -> Result<Vec<u8>> {
        if self.gone.load(Ordering::SeqCst) {
            return Err(Error::Disconnected {
                bdf: self.bdf,
                path: self.path.clone(),
                why: "the connection is closed".into(),
            });
        }
        let r = lock(&self.conn).request(command, parts, fds);
        match r {
            Ok(body) => Ok(body),
            Err(ConnError::Refused(errno)) => Err(Error::Refused {
                path: self.path.clone(),
                command: command.name(),
                source: errno_error(errno),
            }),
            Err(ConnError::Broken(e)) => {
                let why = if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    format!("no answer to {} within the timeout", command.name())
                } else {
                    format!("{}: {e}", command.name())
                };
                Err(self.disconnected(why))
            }
            Err(ConnError::Protocol(what)) => {
                let _ = self.disconnected(format!("protocol error: {what}"));
                Err(Error::Protocol {
                    path: self.path.clone(),
                    what,
                })
            }
        }
    }

    /// A reply body that must be exactly a `T`.
    fn call_fixed<T: FromBytes>(&self, command: Command, parts: &[&[u8]]) -> Result<T> {
        let body = self.call(command, parts, &[])?;
        T::read_from_prefix(&body).map(|(v, _)| v).map_err(|_| {
            self.protocol(format!(
                "{} reply of {} bytes is too short",
                command.name(),
                body.len()
            ))
        })
    }

    fn protocol(&self, what: String) -> Error {
        let _ = self.disconnected(format!("protocol error: {what}"));
        Error::Protocol {
            path: self.path.clone(),
            what,
        }
    }

    fn region_read(&self, region: u32, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut at = offset;
        for chunk in buf.chunks_mut(self.max_xfer) {
            let req = proto::RegionAccess {
                offset: at,
                region,
                count: chunk.len() as u32,
            };
            let body = self.call(Command::RegionRead, &[req.as_bytes()], &[])?;
            let head = proto::RegionAccess::read_from_prefix(&body).map(|(h, _)| h);
            let data = body.get(core::mem::size_of::<proto::RegionAccess>()..);
            match (head, data) {
                (Ok(h), Some(d)) if h == req && d.len() == chunk.len() => chunk.copy_from_slice(d),
                _ => {
                    return Err(self.protocol(format!(
                        "REGION_READ reply ({} bytes) does not answer {req:?}",
                        body.len()
                    )))
                }
            }
            at += chunk.len() as u64;
        }
        Ok(())
    }

    fn region_write(&self, region: u32, offset: u64, data: &[u8]) -> Result<()> {
        let mut at = offset;
        for chunk in data.chunks(self.max_xfer) {
            let req = proto::RegionAccess {
                offset: at,
                region,
                count: chunk.len() as u32,
            };
            self.call(Command::RegionWrite, &[req.as_bytes(), chunk], &[])?;
            at += chunk.len() as u64;
        }
        Ok(())
    }

    /// `DMA_MAP` of `len` bytes at offset 0 of `file` at `iova`.
    fn dma_map(&self, file: &File, iova: u64, len: u64) -> Result<()> {
        let m = proto::DmaMap {
            argsz: core::mem::size_of::<proto::DmaMap>() as u32,
            flags: proto::DMA_READ | proto::DMA_WRITE,
            offset: 0,
            address: iova,
            size: len,
        };
        match self.call(Command::DmaMap, &[m.as_bytes()], &[file.as_raw_fd()]) {
            Ok(_) => Ok(()),
            Err(Error::Refused { source, .. }) => Err(Error::DmaMap {
                bdf: self.bdf,
                iova: Iova(iova),
                size: len as usize,
                source,
            }),
            Err(e) => Err(e),
        }
    }

    /// `DMA_UNMAP`; a connection that is gone took the mapping with it.
    fn dma_unmap(&self, iova: u64, len: u64) -> Result<()> {
        let m = proto::DmaUnmap {
            argsz: core::mem::size_of::<proto::DmaUnmap>() as u32,
            flags: 0,
            address: iova,
            size: len,
        };
        match self.call(Command::DmaUnmap, &[m.as_bytes()], &[]) {
            Ok(_) | Err(Error::Disconnected { .. } | Error::Protocol { .. }) => Ok(()),
            Err(Error::Refused { source, .. }) => Err(Error::DmaUnmap {
                bdf: self.bdf,
                iova: Iova(iova),
                size: len as usize,
                source,
            }),
            Err(e) => Err(e),
        }
    }
}

fn errno_error(errno: u32) -> io::Error {
    match i32::try_from(errno) {
        Ok(e) if e > 0 => io::Error::from_raw_os_error(e),
        _ => io::Error::other("the server gave no errno"),
    }
}

/// Takes a driver-allocated region away from the server, then frees it. The memory is a memfd
/// mapping: freeing it here is safe even if the server still maps it.
struct DmaUnmapRelease(Arc<Shared>);

impl DmaRelease for DmaUnmapRelease {
    fn release(&self, iova: Iova, len: usize) -> Result<()> {
        self.0.dma_unmap(iova.0, len as u64)
    }
}

/// Takes a user registration's segments away from the server when no other registration on
/// this connection uses them, then gives its pages back to private memory (process wide, when
/// no registration at all uses them).
struct UserRelease {
    shared: Arc<Shared>,
    starts: Vec<u64>,
}

impl DmaRelease for UserRelease {
    fn release(&self, _iova: Iova, _len: usize) -> Result<()> {
        let mut first = Ok(());
        let mut maps = lock(&self.shared.user);
        for s in &self.starts {
            let Some((len, refs)) = maps.get_mut(s) else {
                continue;
            };
            *refs -= 1;
            if *refs == 0 {
                let len = *len;
                maps.remove(s);
                if let Err(e) = self.shared.dma_unmap(*s, len) {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        drop(maps);
        // Even after a refused unmap the pages go back to private memory: the server's mapping
        // then holds the memfd's copy, not the application's pages.
        shm::unshare(&self.starts);
        first
    }
}

/// A device behind a vfio-user socket. See the module docs.
pub struct VfioUserBackend {
    shared: Arc<Shared>,
    bar0_len: u64,
    config_len: u64,
    irqs: Vec<EventFd>,
    _watcher: Watcher,
}

impl std::fmt::Debug for VfioUserBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioUserBackend")
            .field("path", &self.shared.path)
            .field("bdf", &self.shared.bdf)
            .field("gone", &self.shared.gone.load(Ordering::Relaxed))
            .finish()
    }
}

impl VfioUserBackend {
    /// Connects to the device served at `path` with the default [`VfioUserConfig`].
    ///
    /// # Errors
    /// As [`VfioUserBackend::connect_with`].
    pub fn connect(path: &Path) -> Result<VfioUserBackend> {
        Self::connect_with(path, &VfioUserConfig::default())
    }

    /// Connects, negotiates the protocol version, reads the device's regions, IRQs and PCI
    /// address, wires interrupt vectors to eventfds and (if asked) resets the device.
    ///
    /// # Errors
    /// [`Error::Socket`] when the socket cannot be reached (the error says whether it is
    /// missing or nobody listens), [`Error::Disconnected`] when the server does not answer
    /// within `connect_timeout` or closes the connection, [`Error::Protocol`] or
    /// [`Error::RegionTooSmall`] for a device this driver cannot use.
    pub fn connect_with(path: &Path, cfg: &VfioUserConfig) -> Result<VfioUserBackend> {
        let stream = UnixStream::connect(path).map_err(|source| Error::Socket {
            path: path.to_owned(),
            op: match source.kind() {
                io::ErrorKind::NotFound => "connect (no such socket: is `mrc-sim serve` running?)",
                io::ErrorKind::ConnectionRefused => {
                    "connect (nobody listens: a socket left by a server that exited?)"
                }
                _ => "connect",
            },
            source,
        })?;
        let sock_err = |op| {
            let path = path.to_owned();
            move |source| Error::Socket { path, op, source }
        };
        let conn = Conn::new(stream);
        conn.set_timeout(cfg.connect_timeout)
            .map_err(sock_err("setting socket timeouts"))?;
        let watch_stream = conn.stream().try_clone().map_err(sock_err("dup"))?;
        let mut shared = Shared {
            path: path.to_owned(),
            bdf: Bdf::default(),
            conn: Mutex::new(conn),
            gone: Arc::new(AtomicBool::new(false)),
            max_xfer: 1 << 20,
            user: Mutex::new(BTreeMap::new()),
        };
        let caps = handshake(&shared).map_err(|e| match e {
            Error::Disconnected { bdf, path, why } => Error::Disconnected {
                bdf,
                path,
                why: format!(
                    "{why} (the server may be busy with another client: one process per device)"
                ),
            },
            e => e,
        })?;
        shared.max_xfer = caps.max_data_xfer_size.clamp(8, 1 << 20) as usize;
        let (bar0_len, config_len) = regions(&shared)?;
        let mut config = vec![0u8; config_len.min(256) as usize];
        shared.region_read(vb::VFIO_PCI_CONFIG_REGION_INDEX, 0, &mut config)?;
        shared.bdf = parse_address_capability(&config).unwrap_or_default();
        let shared = Arc::new(shared);
        let irqs = wire_interrupts(&shared, cfg.max_vectors, caps.max_msg_fds)?;
        if cfg.reset {
            shared.call(Command::DeviceReset, &[], &[])?;
        }
        lock(&shared.conn)
            .set_timeout(cfg.reply_timeout)
            .map_err(sock_err("setting socket timeouts"))?;
        let wake = irqs
            .iter()
            .map(EventFd::try_clone)
            .collect::<io::Result<Vec<_>>>()
            .map_err(sock_err("dup(eventfd)"))?;
        let name = format!("{} ({})", shared.bdf, path.display());
        let watcher = Watcher::start(&watch_stream, shared.gone.clone(), wake, name)
            .map_err(sock_err("starting the watcher thread"))?;
        Ok(VfioUserBackend {
            shared,
            bar0_len,
            config_len,
            irqs,
            _watcher: watcher,
        })
    }

    /// The socket.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// True once the connection is gone.
    pub fn is_gone(&self) -> bool {
        self.shared.gone.load(Ordering::SeqCst)
    }

    fn vector(&self, vector: u32) -> Result<&EventFd> {
        self.irqs.get(vector as usize).ok_or(Error::NoSuchVector {
            bdf: self.shared.bdf,
            vector,
            count: self.irqs.len() as u32,
        })
    }

    fn mmio_read(&self, offset: u64, size: usize) -> Result<u64> {
        check_mmio(self.shared.bdf, 0, offset, size, self.bar0_len)?;
        let mut b = [0u8; 8];
        match self.shared.region_read(0, offset, &mut b[..size]) {
            Ok(()) => Ok(u64::from_le_bytes(b)),
            // A device that is gone reads as all ones, like a PCIe device after surprise
            // removal; the device layer confirms and reports it.
            Err(Error::Disconnected { .. } | Error::Protocol { .. }) => Ok(u64::MAX),
            Err(e) => Err(e),
        }
    }

    fn mmio_write(&self, offset: u64, size: usize, value: u64) -> Result<()> {
        check_mmio(self.shared.bdf, 0, offset, size, self.bar0_len)?;
        self.shared
            .region_write(0, offset, &value.to_le_bytes()[..size])
    }
}

/// VERSION: the server must speak 0.x.
fn handshake(shared: &Shared) -> Result<proto::ServerCaps> {
    let v = proto::Version {
        major: proto::VERSION_MAJOR,
        minor: proto::VERSION_MINOR,
    };
    let mut caps = proto::client_capabilities(16).into_bytes();
    caps.push(0);
    let body = shared.call(Command::Version, &[v.as_bytes(), &caps], &[])?;
    let (server, rest) = proto::Version::read_from_prefix(&body)
        .map_err(|_| shared.protocol("VERSION reply too short".into()))?;
    if server.major != proto::VERSION_MAJOR {
        return Err(shared.protocol(format!(
            "the server speaks vfio-user {}.{}, this client {}.{}",
            server.major,
            server.minor,
            proto::VERSION_MAJOR,
            proto::VERSION_MINOR
        )));
    }
    proto::parse_server_caps(rest).map_err(|what| shared.protocol(what))
}

/// DEVICE_GET_INFO and the BAR0 and config regions: `(BAR0 size, config size)`.
fn regions(shared: &Shared) -> Result<(u64, u64)> {
    let info = proto::DeviceInfo {
        argsz: core::mem::size_of::<proto::DeviceInfo>() as u32,
        ..Default::default()
    };
    let info: proto::DeviceInfo = shared.call_fixed(Command::DeviceGetInfo, &[info.as_bytes()])?;
    if info.flags & vb::VFIO_DEVICE_FLAGS_PCI == 0
        || info.num_regions <= vb::VFIO_PCI_CONFIG_REGION_INDEX
    {
        return Err(shared.protocol(format!(
            "not a PCI device with a config region (flags {:#x}, {} regions)",
            info.flags, info.num_regions
        )));
    }
    let region = |index: u32, need: u64| -> Result<u64> {
        let q = proto::RegionInfo {
            argsz: core::mem::size_of::<proto::RegionInfo>() as u32,
            index,
            ..Default::default()
        };
        let r: proto::RegionInfo =
            shared.call_fixed(Command::DeviceGetRegionInfo, &[q.as_bytes()])?;
        let rw = vb::VFIO_REGION_INFO_FLAG_READ | vb::VFIO_REGION_INFO_FLAG_WRITE;
        if r.index != index || r.flags & rw != rw || r.size < need {
            return Err(Error::RegionTooSmall {
                bdf: shared.bdf,
                region: index,
                size: if r.flags & rw == rw { r.size } else { 0 },
                need,
            });
        }
        Ok(r.size)
    };
    let bar0 = region(vb::VFIO_PCI_BAR0_REGION_INDEX, 0x1000)?;
    let config = region(vb::VFIO_PCI_CONFIG_REGION_INDEX, 256)?;
    Ok((bar0, config))
}

/// Eventfds for up to `max` MSI-X (else MSI) vectors, handed to the server with SET_IRQS, at
/// most `max_fds` per message.
fn wire_interrupts(shared: &Shared, max: u32, max_fds: u32) -> Result<Vec<EventFd>> {
    let count = |index: u32| -> Result<u32> {
        let q = proto::IrqInfo {
            argsz: core::mem::size_of::<proto::IrqInfo>() as u32,
            index,
            ..Default::default()
        };
        match shared.call_fixed::<proto::IrqInfo>(Command::GetIrqInfo, &[q.as_bytes()]) {
            Ok(i) if i.index == index => Ok(i.count),
            Ok(i) => {
                Err(shared.protocol(format!("IRQ info for index {} asked for {index}", i.index)))
            }
            // A device without that IRQ index refuses the question.
            Err(Error::Refused { .. }) => Ok(0),
            Err(e) => Err(e),
        }
    };
    let (index, available) = match count(vb::VFIO_PCI_MSIX_IRQ_INDEX)? {
        0 => (
            vb::VFIO_PCI_MSI_IRQ_INDEX,
            count(vb::VFIO_PCI_MSI_IRQ_INDEX)?,
        ),
        n => (vb::VFIO_PCI_MSIX_IRQ_INDEX, n),
    };
    let n = max.min(available);
    let fds = (0..n)
        .map(|_| EventFd::new())
        .collect::<io::Result<Vec<_>>>()
        .map_err(|source| Error::Sys {
            bdf: shared.bdf,
            op: "eventfd",
            source,
        })?;
    let per = max_fds.clamp(1, 16) as usize;
    for (k, batch) in fds.chunks(per).enumerate() {
        let set = proto::SetIrqs {
            argsz: core::mem::size_of::<proto::SetIrqs>() as u32,
            flags: vb::VFIO_IRQ_SET_DATA_EVENTFD | vb::VFIO_IRQ_SET_ACTION_TRIGGER,
            index,
            start: (k * per) as u32,
            count: batch.len() as u32,
        };
        let raw: Vec<RawFd> = batch.iter().map(AsRawFd::as_raw_fd).collect();
        shared.call(Command::SetIrqs, &[set.as_bytes()], &raw)?;
    }
    if n < max && available < max {
        log::info!("{}: {n} interrupt vectors (asked for {max})", shared.bdf);
    }
    Ok(fds)
}

impl Backend for VfioUserBackend {
    fn bdf(&self) -> Bdf {
        self.shared.bdf
    }
    fn bar0_len(&self) -> u64 {
        self.bar0_len
    }
    fn mmio_read32(&self, offset: u64) -> Result<u32> {
        // Truncation intended: a 4-byte read's value fits; all ones stays all ones.
        self.mmio_read(offset, 4).map(|v| v as u32)
    }
    fn mmio_write32(&self, offset: u64, value: u32) -> Result<()> {
        self.mmio_write(offset, 4, value.into())
    }
    fn mmio_read64(&self, offset: u64) -> Result<u64> {
        self.mmio_read(offset, 8)
    }
    fn mmio_write64(&self, offset: u64, value: u64) -> Result<()> {
        self.mmio_write(offset, 8, value)
    }

    fn alloc_dma(&self, size: usize) -> Result<DmaRegion> {
        let bdf = self.shared.bdf;
        if size == 0 {
            return Err(Error::DmaZeroSize { bdf });
        }
        let alloc = |source| Error::DmaAlloc { bdf, size, source };
        let len =
            round_up(size, PAGE_SIZE).ok_or_else(|| alloc(io::Error::other("size overflows")))?;
        let file = shm::memfd(c"mrc-dma", len as u64).map_err(alloc)?;
        let map = shm::map(&file, 0, len).map_err(alloc)?;
        let iova = map.as_ptr() as u64;
        self.shared.dma_map(&file, iova, len as u64)?;
        let release = DmaUnmapRelease(self.shared.clone());
        Ok(DmaRegion::from_raw(
            RawMem::Mmap(map),
            Iova(iova),
            Some(Arc::new(release)),
        ))
    }

    fn map_user(&self, range: UserRange) -> Result<DmaRegion> {
        if self.is_gone() {
            return Err(Error::Disconnected {
                bdf: self.shared.bdf,
                path: self.shared.path.clone(),
                why: "the connection is closed".into(),
            });
        }
        let pieces = shm::share(&range)?;
        let starts: Vec<u64> = pieces.iter().map(|p| p.start).collect();
        let mut maps = lock(&self.shared.user);
        for (k, p) in pieces.iter().enumerate() {
            let entry = maps.entry(p.start).or_insert((p.len, 0));
            if entry.1 == 0 {
                if let Err(e) = self.shared.dma_map(&p.file, p.start, p.len) {
                    maps.remove(&p.start);
                    drop(maps);
                    // Undo the pieces before this one, then the sharing.
                    let undo = UserRelease {
                        shared: self.shared.clone(),
                        starts: starts[..k].to_vec(),
                    };
                    let _ = undo.release(Iova(0), 0);
                    shm::unshare(&starts[k..]);
                    return Err(e);
                }
            }
            entry.1 += 1;
        }
        drop(maps);
        let release = UserRelease {
            shared: self.shared.clone(),
            starts,
        };
        Ok(DmaRegion::user(range, Some(Arc::new(release))))
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
                bdf: self.shared.bdf,
                op: "poll(interrupt eventfd)",
                source,
            })
    }

    fn config_len(&self) -> u64 {
        self.config_len
    }
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        check_config(self.shared.bdf, offset, buf.len(), self.config_len)?;
        self.shared
            .region_read(vb::VFIO_PCI_CONFIG_REGION_INDEX, offset, buf)
    }
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        check_config(self.shared.bdf, offset, data.len(), self.config_len)?;
        self.shared
            .region_write(vb::VFIO_PCI_CONFIG_REGION_INDEX, offset, data)
    }

    fn gone_flag(&self) -> Option<Arc<AtomicBool>> {
        Some(self.shared.gone.clone())
    }
}
