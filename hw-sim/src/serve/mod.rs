//! Simulated NICs served to other processes as vfio-user devices (`mrc-sim serve`).
//!
//! [`Served::start`] puts every NIC of a [`SimHost`] on a unix socket `DIR/nicNN.sock` (NIC
//! `i` of the host, zero-padded so that sorted names are host order) and serves it with
//! rust-vmm's `vfio_user::Server`. A driver in another process opens it with
//! `mrc_driver::api::Context::open_vfio_user` (or through `lib_mrc.so`, which names the sorted
//! sockets `mrc0`, `mrc1`, ...). The server works against the NIC's device side only (its
//! [`mrc_driver::sys::twin::Twin`] and MMIO hooks, in `device.rs`), so it serves whatever model
//! sits behind the twin.
//!
//! - **One client per NIC at a time**, as with a VFIO device. Another process connecting
//!   meanwhile waits (its driver gives up after its handshake timeout with an error saying the
//!   device may be busy); it is served when the first client leaves.
//! - **A client that leaves** (closes the socket, exits, crashes) is cleaned up after: the
//!   NIC's interrupts are unrouted, the NIC is reset (as closing a VFIO device resets it) and the
//!   client's memory is unmapped. The next client finds a fresh NIC.
//! - **Misbehaving clients** never bring the server down: requests the device refuses (a bad
//!   region, size or offset, DMA memory that is not a sealed memfd, overlapping DMA maps,
//!   descriptors that are not eventfds) are answered with an errno, counted
//!   ([`NicStats::refused`]) and logged; a broken message stream ends the session
//!   ([`NicStats::protocol_errors`]); a panic inside the protocol library (it has one on a
//!   VERSION message without its terminating NUL) ends the session and is counted
//!   ([`NicStats::panics`]). Malformed messages the library itself rejects before they reach
//!   the device (unknown commands, region or IRQ indexes out of range) are answered with an
//!   error reply and logged by the library; the device never sees them, so they are not in
//!   these counters.
//!
//! # Virtual time while clients run
//! Requests of every client of the host are applied **one at a time**, in the order the server
//! takes them (the host lock), and virtual time moves **only with device work**: a request that
//! gives the NICs work (a doorbell) runs the simulated fabric in virtual time until it is idle
//! (every packet delivered and acknowledged, every completion and interrupt written) or the
//! step budget of the fabric runs out, before its reply is sent. Time never waits for the wall
//! clock or for a client, and a client waiting for something (a spin on a word of its memory,
//! `poll_cq`, an interrupt) never holds time back, because what its peer's request caused has
//! happened when that request returned. Programs like the OCP benchmark, where one process
//! spins on memory without calling the library while the other waits in `poll_cq`, therefore
//! cannot deadlock; a policy of "time advances when every client blocks in the library" would
//! (the spinning client never blocks).
//!
//! The exception is work that waits for another client: the OCP benchmark's server writes
//! right after its own RTS, and its client may not have reached RTR yet. The server's
//! doorbell then retransmits into a QP that drops the packets until the budget is spent; an
//! admin command (such as the client's RTR) resumes work a doorbell left unfinished, and a
//! step always reaches the next timer, however long the backoff (the budget counts from it).
//! How many retransmissions that costs depends on the budget, not on the wall clock.
//!
//! # What is reproducible
//! For a seed and the same sequence of applied requests, the delivered bytes, the completions
//! (order, status, contents), the interrupts and every simulator counter (NIC, engine, fabric)
//! are the same, bit for bit. [`ServeStats::digest`] folds every state-changing device request
//! (BAR and config writes with their values, resets) in applied order, leaving out addresses
//! and DMA mappings (they follow the clients' address-space layout, which differs from run to
//! run, while nothing simulated depends on them), so two runs with the same digest and seed
//! must report the same counters. A client leaving is a request too
//! (the reset after it), applied when the server sees its socket close. Not reproducible: the
//! interleaving of requests from different clients that are not ordered by causality (two
//! processes posting at the same moment, or one leaving while the other still works) depends
//! on the OS scheduler; the number of reads a
//! polling client makes (reads change nothing, and are not in the digest); wall-clock figures
//! a program prints.

mod device;
pub mod scenario;

use crate::fabric::DropCause;
use std::fmt;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use mrc_driver::sys::twin::Twin;
use mrc_driver::sys::vfio_user::{address_capability, ADDRESS_CAP_OFFSET};
use mrc_driver::sys::{Backend, Bdf};
use vfio_bindings::bindings::vfio as vb;
use vfio_user::{IrqInfo, Server, ServerRegion};

use crate::nic_host::{
    ClosCounters, DatapathCounters, EngineCounters, NicCounters, SimHost, SimNic,
};
use device::NicSession;

/// A state-changing request, as folded into the digest. Addresses and DMA mappings are left
/// out: addresses are the client's virtual addresses (IOVA = address), and how its memory is
/// cut into mappings follows its address-space layout (an allocator may put two buffers on
/// one page, which then share a mapping); both differ between runs of the same program, while
/// nothing the simulator does depends on them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Request<'a> {
    /// BAR0 write; `value` is `None` for an address register (a queue's base).
    Write {
        nic: usize,
        offset: u64,
        size: u8,
        value: Option<u64>,
    },
    /// Config-space write.
    Config {
        nic: usize,
        offset: u64,
        data: &'a [u8],
    },
    /// DMA_MAP of `size` bytes.
    Map { nic: usize, size: u64 },
    /// DMA_UNMAP of `size` bytes (`u64::MAX`: all).
    Unmap { nic: usize, size: u64 },
    /// DEVICE_RESET, or the reset after a client left.
    Reset { nic: usize },
}

/// The device requests applied so far: how many and their FNV-1a digest.
#[derive(Debug)]
pub(crate) struct Applied {
    count: u64,
    digest: u64,
}

impl Applied {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Applied {
        Applied {
            count: 0,
            digest: Self::FNV_OFFSET,
        }
    }

    fn eat(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.digest = (self.digest ^ u64::from(*b)).wrapping_mul(Self::FNV_PRIME);
        }
    }

    /// Folds `r` into the digest (the caller holds the host lock and applies `r` under it).
    pub fn apply(&mut self, r: Request<'_>) {
        log::trace!("request {}: {r:?}", self.count);
        if matches!(r, Request::Map { .. } | Request::Unmap { .. }) {
            return;
        }
        self.count += 1;
        let (kind, nic, a, b): (u8, usize, u64, u64) = match r {
            Request::Write {
                nic,
                offset,
                size,
                value: Some(v),
            } => (b'W' + size, nic, offset, v),
            Request::Write {
                nic, offset, size, ..
            } => (b'A' + size, nic, offset, 0),
            Request::Config { nic, offset, data } => {
                self.eat(data);
                (b'C', nic, offset, data.len() as u64)
            }
            Request::Map { nic, size } => (b'M', nic, 0, size),
            Request::Unmap { nic, size } => (b'U', nic, 0, size),
            Request::Reset { nic } => (b'R', nic, 0, 0),
        };
        self.eat(&[kind]);
        self.eat(&(nic as u64).to_le_bytes());
        self.eat(&a.to_le_bytes());
        self.eat(&b.to_le_bytes());
    }
}

/// What every NIC of a served host shares: the host lock and its request digest.
pub(crate) struct HostCtx {
    applied: Mutex<Applied>,
}

impl HostCtx {
    /// The host lock: every request of every client runs under it.
    pub fn lock(&self) -> MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counters of one served NIC.
#[derive(Debug, Default)]
pub(crate) struct ServeCounters {
    pub sessions: AtomicU64,
    pub disconnects: AtomicU64,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub dma_maps: AtomicU64,
    pub refused: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub panics: AtomicU64,
}

/// One served NIC.
pub(crate) struct NicCtx {
    pub index: usize,
    /// `nicNN` (for logs).
    pub name: String,
    pub path: PathBuf,
    pub bdf: Bdf,
    pub sim: SimNic,
    pub twin: Arc<Twin>,
    pub host: Arc<HostCtx>,
    /// Device counters of the NIC up to its last reset (a reset clears the device's own).
    pub retired: Mutex<NicCounters>,
    /// BAR0 offsets of registers that hold addresses (left out of the digest).
    pub address_regs: Vec<u64>,
    pub counters: ServeCounters,
    /// A client is attached.
    pub active: AtomicBool,
}

impl NicCtx {
    /// The device's counters since serving began.
    pub fn device_counters(&self) -> NicCounters {
        let r = *self.retired.lock().unwrap_or_else(|p| p.into_inner());
        add(r, self.sim.counters())
    }

    /// Keeps the device's counters before a reset clears them (the caller holds the host lock
    /// and resets next).
    pub fn retire_counters(&self) {
        let mut r = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        *r = add(*r, self.sim.counters());
    }
}

fn add(a: NicCounters, b: NicCounters) -> NicCounters {
    NicCounters {
        admin_commands: a.admin_commands + b.admin_commands,
        admin_errors: a.admin_errors + b.admin_errors,
        send_wqes: a.send_wqes + b.send_wqes,
        bytes_placed: a.bytes_placed + b.bytes_placed,
        cqes: a.cqes + b.cqes,
        events: a.events + b.events,
        events_dropped: a.events_dropped + b.events_dropped,
        cqes_dropped: a.cqes_dropped + b.cqes_dropped,
        interrupts: a.interrupts + b.interrupts,
    }
}

/// Counters of one served NIC (a snapshot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Clients that attached (sent a request the device saw).
    pub sessions: u64,
    /// Clients that left cleanly (closed the connection).
    pub disconnects: u64,
    /// BAR0 and config reads.
    pub reads: u64,
    /// BAR0 and config writes.
    pub writes: u64,
    /// DMA_MAPs applied.
    pub dma_maps: u64,
    /// Requests the device refused (answered with an errno).
    pub refused: u64,
    /// Sessions ended by a broken message stream.
    pub protocol_errors: u64,
    /// Sessions ended by a panic in the protocol library.
    pub panics: u64,
}

/// A snapshot of a served host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeStats {
    /// Per NIC: serving counters.
    pub nics: Vec<NicStats>,
    /// Per NIC: the device model's counters, summed over every reset (clients reset the NIC
    /// when they open it, and the server resets it when they leave).
    pub device: Vec<NicCounters>,
    /// Per NIC: the MRC engines' counters (Clos mode).
    pub engine: Vec<Option<EngineCounters>>,
    /// Per NIC: the MRC datapath stages' counters (Clos mode).
    pub datapath: Vec<Option<DatapathCounters>>,
    /// Fabric totals.
    pub fabric: ClosCounters,
    /// State-changing device requests applied (BAR and config writes, resets).
    pub applied: u64,
    /// FNV-1a digest of those requests in applied order, addresses left out.
    pub digest: u64,
    /// Virtual time, ns.
    pub now_ns: u64,
}

impl ServeStats {
    /// Retransmissions the NICs' datapath stages sent.
    pub fn retransmits(&self) -> u64 {
        self.datapath
            .iter()
            .flatten()
            .map(|d| d.retransmits_sent)
            .sum()
    }

    /// The summary as JSON (counters by name; the digest as a hex string).
    pub fn to_json(&self) -> serde_json::Value {
        let nics: Vec<serde_json::Value> = (0..self.nics.len())
            .map(|i| {
                let s = &self.nics[i];
                let d = self.device.get(i).copied().unwrap_or_default();
                let e = self.engine.get(i).copied().flatten();
                let dp = self.datapath.get(i).copied().flatten();
                serde_json::json!({
                    "serve": {
                        "sessions": s.sessions, "disconnects": s.disconnects, "reads": s.reads,
                        "writes": s.writes, "dma_maps": s.dma_maps, "refused": s.refused,
                        "protocol_errors": s.protocol_errors, "panics": s.panics,
                    },
                    "device": {
                        "admin_commands": d.admin_commands, "admin_errors": d.admin_errors,
                        "send_wqes": d.send_wqes, "bytes_placed": d.bytes_placed, "cqes": d.cqes,
                        "events": d.events, "events_dropped": d.events_dropped,
                        "cqes_dropped": d.cqes_dropped, "interrupts": d.interrupts,
                    },
                    "datapath": dp.map(|d| serde_json::json!({
                        "data_sent": d.data_sent, "retransmits_sent": d.retransmits_sent,
                        "placed": d.placed, "acks_sent": d.acks_sent, "nacks_sent": d.nacks_sent,
                        "probes_sent": d.probes_sent, "rx_packets": d.rx_packets,
                        "rx_duplicate": d.rx_duplicate, "events": d.events,
                        "commands": d.commands, "host_writes": d.host_writes,
                    })),
                    "engine": e.map(|e| serde_json::json!({
                        "events": e.events, "events_malformed": e.events_malformed,
                        "commands": e.commands, "timeouts_fired": e.timeouts_fired,
                        "qp_errors": e.qp_errors, "backpressure": e.backpressure,
                    })),
                })
            })
            .collect();
        serde_json::json!({
            "virtual_time_ns": self.now_ns,
            "requests_applied": self.applied,
            "request_digest": format!("{:016x}", self.digest),
            "fabric": {
                "sent": self.fabric.fabric.injected, "delivered": self.fabric.fabric.delivered,
                "dropped": self.fabric.fabric.dropped_total(),
                "dropped_on_links": self.fabric.fabric.dropped(DropCause::RandomLoss),
                "retransmits": self.retransmits(), "ev_events": self.fabric.ev_events,
                "bytes_placed": self.fabric.bytes_placed,
            },
            "nics": nics,
        })
    }
}

impl fmt::Display for ServeStats {
    /// A few lines: time and digest, then per NIC what it served and did.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "virtual time {:.3} ms, {} state-changing requests applied (digest {:016x})",
            self.now_ns as f64 / 1e6,
            self.applied,
            self.digest
        )?;
        let c = &self.fabric;
        writeln!(
            f,
            "fabric: {} packets sent, {} delivered, {} silently dropped on links, {} retransmissions, {} EV events",
            c.fabric.injected, c.fabric.delivered, c.fabric.dropped(DropCause::RandomLoss),
            self.retransmits(), c.ev_events
        )?;
        for (i, s) in self.nics.iter().enumerate() {
            let d = self.device.get(i).copied().unwrap_or_default();
            write!(
                f,
                "nic{i:02}: {} client(s), {} reads, {} writes, {} DMA maps, {} refused, {} protocol errors, {} panics; {} send WQEs, {} CQEs, {} bytes placed",
                s.sessions, s.reads, s.writes, s.dma_maps, s.refused, s.protocol_errors, s.panics,
                d.send_wqes, d.cqes, d.bytes_placed
            )?;
            if let Some(Some(d)) = self.datapath.get(i) {
                write!(
                    f,
                    "; datapath: {} data packets, {} retransmitted, {} placed",
                    d.data_sent, d.retransmits_sent, d.placed
                )?;
            }
            if let Some(Some(e)) = self.engine.get(i) {
                write!(
                    f,
                    "; firmware: {} events, {} commands",
                    e.events, e.commands
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Why serving could not start.
#[derive(Debug)]
pub enum ServeError {
    /// A file system or socket operation failed.
    Io {
        /// The path.
        path: PathBuf,
        /// What was attempted.
        op: &'static str,
        /// Why.
        source: io::Error,
    },
    /// Another server is live on a socket path.
    InUse {
        /// The socket.
        path: PathBuf,
    },
    /// A path that should become a socket exists and is something else.
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// The host has no NICs.
    NoNics,
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Io { path, op, source } => {
                write!(f, "{}: {op}: {source}", path.display())
            }
            ServeError::InUse { path } => write!(
                f,
                "{}: another server is already serving this socket (stop it or pick another --socket-dir)",
                path.display()
            ),
            ServeError::NotASocket { path } => write!(
                f,
                "{}: exists and is not a socket (remove it or pick another --socket-dir)",
                path.display()
            ),
            ServeError::NoNics => f.write_str("the scenario has no NICs to serve"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// How long the serving threads run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Serve client after client until [`Served::shutdown`] (or the process ends).
    Forever,
    /// Serve one client per NIC; [`Served::wait`] returns when each NIC's client has left.
    Once,
}

/// The socket name of NIC `i` of `n`: `nicNN.sock`, zero-padded to at least two digits and to
/// the width of `n - 1`, so that sorted names are host order.
pub fn socket_name(i: usize, n: usize) -> String {
    let width = n.saturating_sub(1).to_string().len().max(2);
    format!("nic{i:0width$}.sock")
}

/// A host whose NICs are being served. See the module docs.
pub struct Served {
    host: SimHost,
    ctx: Arc<HostCtx>,
    nics: Vec<Arc<NicCtx>>,
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Served {
    /// Serves every NIC of `host` on `dir/nicNN.sock` (creating `dir`; replacing sockets left
    /// by a server that exited), one thread per NIC.
    ///
    /// # Errors
    /// The directory or a socket cannot be created, or another server is live on a socket.
    pub fn start(host: SimHost, dir: &Path, lifetime: Lifetime) -> Result<Served, ServeError> {
        let n = host.nics().len();
        if n == 0 {
            return Err(ServeError::NoNics);
        }
        std::fs::create_dir_all(dir).map_err(|source| ServeError::Io {
            path: dir.to_owned(),
            op: "creating the socket directory",
            source,
        })?;
        let ctx = Arc::new(HostCtx {
            applied: Mutex::new(Applied::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let mut nics = Vec::new();
        let mut listeners = Vec::new();
        for (index, nic) in host.nics().iter().enumerate() {
            let path = dir.join(socket_name(index, n));
            let listener = bind(&path)?;
            let twin = nic.twin().clone();
            publish_address(&twin, nic.bdf());
            let address_regs = address_registers(&twin);
            nics.push(Arc::new(NicCtx {
                index,
                name: format!("nic{index:02} ({})", nic.bdf()),
                path,
                bdf: nic.bdf(),
                sim: nic.clone(),
                twin,
                host: ctx.clone(),
                retired: Mutex::new(NicCounters::default()),
                address_regs,
                counters: ServeCounters::default(),
                active: AtomicBool::new(false),
            }));
            listeners.push(listener);
        }
        let mut threads = Vec::new();
        for (nic, listener) in nics.iter().zip(listeners) {
            let server =
                Server::from_owned_fd(listener.into(), true, irqs(&nic.twin), regions(&nic.twin));
            let (nic2, stop2) = (nic.clone(), stop.clone());
            let t = std::thread::Builder::new()
                .name(format!("serve-nic{:02}", nic.index))
                .spawn(move || serve_loop(&nic2, &server, lifetime, &stop2))
                .map_err(|source| ServeError::Io {
                    path: nic.path.clone(),
                    op: "starting its serving thread",
                    source,
                })?;
            threads.push(t);
        }
        Ok(Served {
            host,
            ctx,
            nics,
            threads,
            stop,
        })
    }

    /// The socket of each NIC, in host order.
    pub fn sockets(&self) -> Vec<PathBuf> {
        self.nics.iter().map(|n| n.path.clone()).collect()
    }

    /// The PCI address each NIC reports to its client.
    pub fn addresses(&self) -> Vec<Bdf> {
        self.nics.iter().map(|n| n.bdf).collect()
    }

    /// The simulated host (read its counters through [`Served::stats`], which takes the host
    /// lock; driving it directly would bypass the request order).
    pub fn host(&self) -> &SimHost {
        &self.host
    }

    /// A consistent snapshot (taken under the host lock).
    pub fn stats(&self) -> ServeStats {
        let applied = self.ctx.lock();
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServeStats {
            nics: self
                .nics
                .iter()
                .map(|n| {
                    let k = &n.counters;
                    NicStats {
                        sessions: c(&k.sessions),
                        disconnects: c(&k.disconnects),
                        reads: c(&k.reads),
                        writes: c(&k.writes),
                        dma_maps: c(&k.dma_maps),
                        refused: c(&k.refused),
                        protocol_errors: c(&k.protocol_errors),
                        panics: c(&k.panics),
                    }
                })
                .collect(),
            device: self.nics.iter().map(|n| n.device_counters()).collect(),
            datapath: (0..self.nics.len())
                .map(|i| self.host.datapath_counters(i))
                .collect(),
            engine: (0..self.nics.len())
                .map(|i| self.host.engine_counters(i))
                .collect(),
            fabric: self.host.clos_counters(),
            applied: applied.count,
            digest: applied.digest,
            now_ns: self.host.now_ns(),
        }
    }

    /// Whether a client is attached to NIC `i`.
    pub fn attached(&self, i: usize) -> bool {
        self.nics
            .get(i)
            .is_some_and(|n| n.active.load(Ordering::SeqCst))
    }

    /// [`Lifetime::Once`]: waits until every NIC served its client and that client left, then
    /// removes the sockets. (With [`Lifetime::Forever`] this waits forever.)
    pub fn wait(mut self) -> ServeStats {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.remove_sockets();
        self.stats()
    }

    /// Stops accepting clients and removes the sockets. Threads of NICs with a client attached
    /// keep serving it until it leaves (they are not waited for).
    pub fn shutdown(mut self) -> ServeStats {
        self.stop.store(true, Ordering::SeqCst);
        for (nic, t) in self.nics.iter().zip(self.threads.drain(..)) {
            if nic.active.load(Ordering::SeqCst) {
                continue;
            }
            // Wake the accept; the thread sees `stop` when the empty session ends.
            let _ = UnixStream::connect(&nic.path);
            let _ = t.join();
        }
        self.remove_sockets();
        self.stats()
    }

    fn remove_sockets(&self) {
        for n in &self.nics {
            let _ = std::fs::remove_file(&n.path);
        }
    }
}

/// Binds `path`, replacing a socket nobody listens on.
fn bind(path: &Path) -> Result<UnixListener, ServeError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(ServeError::InUse {
                    path: path.to_owned(),
                })
            }
            Err(_) => {
                log::info!(
                    "{}: replacing a socket left by a server that exited",
                    path.display()
                );
                std::fs::remove_file(path).map_err(|source| ServeError::Io {
                    path: path.to_owned(),
                    op: "removing a stale socket",
                    source,
                })?;
            }
        },
        Ok(_) => {
            return Err(ServeError::NotASocket {
                path: path.to_owned(),
            })
        }
        Err(_) => {}
    }
    UnixListener::bind(path).map_err(|source| ServeError::Io {
        path: path.to_owned(),
        op: "binding the socket",
        source,
    })
}

/// Places the address capability in the NIC's config space (see
/// `mrc_driver::sys::vfio_user::address_capability`): the driver names the NIC by it and
/// derives the NIC address peers send to from it.
fn publish_address(twin: &Twin, bdf: Bdf) {
    const STATUS: u64 = 0x06;
    const CAP_PTR: u64 = 0x34;
    const CAP_LIST: u8 = 1 << 4;
    let mut status = [0u8; 1];
    let r = twin
        .config_write(ADDRESS_CAP_OFFSET, &address_capability(bdf))
        .and_then(|()| twin.config_write(CAP_PTR, &[ADDRESS_CAP_OFFSET as u8]))
        .and_then(|()| twin.config_read(STATUS, &mut status))
        .and_then(|()| twin.config_write(STATUS, &[status[0] | CAP_LIST]));
    if let Err(e) = r {
        log::error!("{bdf}: cannot publish the address capability: {e}");
    }
}

/// The BAR0 offsets of the admin and event queues' base registers (from the register map the
/// NIC publishes), whose values are the client's addresses.
fn address_registers(twin: &Twin) -> Vec<u64> {
    use core::mem::offset_of;
    use mrc_abi::device::regs::{discover, QueueBlock};
    let dev = twin.device();
    let len = u32::try_from(twin.bar0_len()).unwrap_or(u32::MAX);
    let Ok(map) = discover(len, |off| {
        dev.reg_read32(u64::from(off)).unwrap_or(u32::MAX)
    }) else {
        log::warn!(
            "{}: no register map: every written value goes into the digest",
            twin.bdf()
        );
        return Vec::new();
    };
    let fields = [
        offset_of!(QueueBlock, base_lo),
        offset_of!(QueueBlock, base_hi),
        offset_of!(QueueBlock, resp_base_lo),
        offset_of!(QueueBlock, resp_base_hi),
    ];
    [map.admin_queue, map.event_queue]
        .iter()
        .flat_map(|b| fields.iter().map(move |f| u64::from(*b) + *f as u64))
        .collect()
}

/// The regions a served NIC offers: BAR0 and config space, read/write, trapped (no mmap: every
/// doorbell must reach the model).
fn regions(twin: &Twin) -> Vec<ServerRegion> {
    (0..vb::VFIO_PCI_NUM_REGIONS)
        .map(|index| {
            let size = match index {
                vb::VFIO_PCI_BAR0_REGION_INDEX => twin.bar0_len(),
                vb::VFIO_PCI_CONFIG_REGION_INDEX => twin.config_len(),
                _ => 0,
            };
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
        })
        .collect()
}

/// The IRQ indexes: MSI-X with the twin's vectors, no INTx, MSI, ERR or REQ.
fn irqs(twin: &Twin) -> Vec<IrqInfo> {
    (0..vb::VFIO_PCI_NUM_IRQS)
        .map(|index| IrqInfo {
            index,
            flags: vb::VFIO_IRQ_INFO_EVENTFD,
            count: if index == vb::VFIO_PCI_MSIX_IRQ_INDEX {
                twin.interrupt_vectors()
            } else {
                0
            },
        })
        .collect()
}

/// Serves clients of one NIC, one at a time.
fn serve_loop(nic: &Arc<NicCtx>, server: &Server, lifetime: Lifetime, stop: &AtomicBool) {
    loop {
        let mut session = NicSession::new(nic.clone());
        let outcome = catch_unwind(AssertUnwindSafe(|| server.run(&mut session)));
        let started = session.started();
        match outcome {
            Ok(Ok(())) => {
                if started {
                    nic.counters.disconnects.fetch_add(1, Ordering::Relaxed);
                    log::info!("{}: client left", nic.name);
                }
            }
            Ok(Err(vfio_user::Error::SocketAccept(e))) => {
                log::error!("{}: accept: {e}", nic.name);
                // Out of descriptors, most likely: do not spin.
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(Err(e)) => {
                nic.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
                log::warn!("{}: session ended by a protocol error: {e}", nic.name);
            }
            Err(p) => {
                nic.counters.panics.fetch_add(1, Ordering::Relaxed);
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                log::error!(
                    "{}: the vfio-user library panicked on a client's message ({what}); session dropped",
                    nic.name
                );
            }
        }
        session.end();
        if stop.load(Ordering::SeqCst) || (lifetime == Lifetime::Once && started) {
            return;
        }
    }
}
