//! Simulated NICs served over vfio-user (`mrc_sim::serve`) and driven by `mrc-driver`'s
//! vfio-user backend: the handshake and register discovery, admin commands, writes and
//! writes-with-immediate landing in the application's own memory, interrupts, clients that
//! leave, servers that die, malformed messages, and reproducibility.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mrc_driver::api::connect::ConnInfo;
use mrc_driver::api::*;
use mrc_driver::sys::vfio_user::{list_devices, proto};
use mrc_driver::zerocopy::{FromBytes, IntoBytes};
use mrc_driver::Error;
use mrc_sim::serve::{scenario, Lifetime, ServeStats, Served};

const T: Duration = Duration::from_secs(20);

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("mrc-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    TempDir(d)
}

fn serve(name: &str, seed: u64, tag: &str) -> (Served, TempDir) {
    let dir = temp_dir(tag);
    let host = scenario::find(name)
        .expect("scenario")
        .build(seed)
        .expect("host");
    let served = Served::start(host, &dir.0, Lifetime::Forever).expect("serve");
    (served, dir)
}

/// An application on one served NIC: its own buffer registered with `reg_user_mr`, a QP with
/// send and receive CQs, the receive CQ on a completion channel.
struct App {
    ctx: Context,
    buf: Vec<u8>,
    /// Where the MR starts in `buf`.
    at: usize,
    mr: MemoryRegion,
    chan: CompletionChannel,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    qp: QueuePair,
    _pd: ProtectionDomain,
}

fn app(path: &Path, len: usize) -> App {
    let ctx = Context::open_vfio_user(path, Role::Application).expect("open");
    let pd = ctx.alloc_pd().expect("pd");
    // Unaligned on purpose (registrations cover whole pages around it), by the same 100 bytes
    // past a page boundary in every run: the NIC's DMA timing depends on where in a page the
    // bytes are (TLPs split at boundaries), and a heap address would differ from run to run.
    let mut buf = vec![0u8; len + 4096 + 100];
    let at = buf.as_ptr().align_offset(4096) + 100;
    let p = buf.as_mut_ptr().wrapping_add(at);
    // SAFETY: `buf` lives in the `App` beside `mr` (dropped after it, field order) and is only
    // read after completions say the NIC's writes are done.
    let mr = unsafe { pd.reg_user_mr(p, len, Access::ALL) }.expect("reg_user_mr");
    assert_eq!(mr.addr(), p as u64, "the MR's address is the application's");
    let chan = ctx.create_comp_channel().expect("channel");
    let scq = ctx.create_cq(64, None).expect("cq");
    let rcq = ctx.create_cq(64, Some(&chan)).expect("cq");
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &scq,
            recv_cq: &rcq,
            sq_depth: 64,
            rq_depth: 64,
            hint: QpHint::default(),
        })
        .expect("qp");
    qp.modify_init(&InitAttr {
        ev_profile: 0,
        cc_profile: 0,
    })
    .expect("init");
    App {
        ctx,
        buf,
        at,
        mr,
        chan,
        scq,
        rcq,
        qp,
        _pd: pd,
    }
}

impl App {
    fn info(&self) -> ConnInfo {
        ConnInfo {
            qpn: self.qp.qpn(),
            psn: 100,
            rkey: self.mr.rkey(),
            addr: self.mr.addr(),
            len: self.mr.len() as u64,
            gid: self.ctx.gid(),
        }
    }
    fn connect(&mut self, peer: &ConnInfo) {
        self.qp
            .modify_rtr(&RtrAttr {
                dest_qpn: peer.qpn,
                remote_addr: peer.gid,
                rq_psn: peer.psn,
                responder_mpr: 4,
                max_wimm: 8,
                dynamic_mpr: false,
            })
            .expect("rtr");
        self.qp
            .modify_rts(&RtsAttr {
                sq_psn: 100,
                requester_mpr: 4,
                max_wimm: 8,
                retry_count: 25,
                ack_timeout_exp: 7,
            })
            .expect("rts");
    }
    /// The registered bytes (after a completion).
    fn bytes(&self) -> &[u8] {
        &self.buf[self.at..self.at + self.mr.len()]
    }
    fn fill(&mut self, seed: u8) {
        let n = self.mr.len();
        for (i, b) in self.buf[self.at..self.at + n].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
    }
}

fn pair(a: &mut App, b: &mut App) {
    let (ia, ib) = (a.info(), b.info());
    a.connect(&ib);
    b.connect(&ia);
}

fn poll(cq: &mut CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut buf = [WorkCompletion::default(); 16];
    let start = Instant::now();
    while out.len() < n && start.elapsed() < T {
        let k = cq.poll(&mut buf).expect("poll");
        out.extend_from_slice(&buf[..k]);
    }
    out
}

/// `len` bytes at `off` of `a`'s buffer to `off` of `b`'s, in `chunk`-byte writes, the last a
/// Write-with-Immediate carrying `imm`; both sides' completions are checked.
fn transfer(a: &mut App, b: &mut App, off: u64, len: u64, chunk: u64, imm: u32) {
    let peer = b.info();
    b.qp.post_recv(&[RecvWr { wr_id: 7 }]).expect("post_recv");
    let mut posted = 0;
    let mut at = off;
    while at < off + len {
        let n = chunk.min(off + len - at);
        let sg = [a.mr.sge(at, n as u32).expect("sge")];
        let last = at + n == off + len;
        let wr = SendWr {
            wr_id: at,
            op: if last {
                WriteOp::WriteImm(imm)
            } else {
                WriteOp::Write
            },
            sg_list: &sg,
            remote_addr: peer.addr + at,
            rkey: peer.rkey,
            signaled: true,
            solicited: false,
            fence: false,
        };
        a.qp.post_send(&[wr]).expect("post_send");
        posted += 1;
        let c = poll(&mut a.scq, 1);
        assert_eq!(c.len(), 1, "send completion {posted}");
        assert_eq!(c[0].status, CqeStatus::Success, "{c:?}");
        at += n;
    }
    let r = poll(&mut b.rcq, 1);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].opcode, CqeOpcode::RecvWriteImm);
    assert_eq!((r[0].wr_id, r[0].imm), (7, Some(imm)));
}

#[test]
fn writes_land_in_the_peers_own_memory_with_interrupts() {
    let (served, _dir) = serve("pair", 1, "writes");
    let socks = list_devices(served.sockets()[0].parent().unwrap()).unwrap();
    assert_eq!(socks, served.sockets(), "sorted names are host order");
    let mut a = app(&socks[0], 256 * 1024);
    let mut b = app(&socks[1], 256 * 1024);
    // Discovery and the handshake: the driver names the NICs by the addresses the server
    // published, and derives their NIC addresses from them.
    assert_eq!(a.ctx.attrs().bdf, served.addresses()[0]);
    assert_eq!(b.ctx.attrs().bdf, served.addresses()[1]);
    assert_eq!(a.ctx.attrs().num_planes, 4);
    pair(&mut a, &mut b);
    a.fill(3);
    b.rcq.req_notify(false).expect("arm");
    transfer(&mut a, &mut b, 0, 200_000, 65_536, 0xfeed);
    assert!(
        b.chan.wait(Duration::from_secs(5)).expect("wait"),
        "interrupt for the receive"
    );
    assert_eq!(
        &b.bytes()[..200_000],
        &a.bytes()[..200_000],
        "in B's own buffer"
    );
    assert!(
        b.bytes()[200_000..].iter().all(|&x| x == 0),
        "nothing beyond"
    );
    let s = served.stats();
    for n in &s.nics {
        assert_eq!(
            (n.sessions, n.refused, n.protocol_errors, n.panics),
            (1, 0, 0, 0),
            "{n:?}"
        );
        assert!(n.dma_maps >= 3, "rings and the user buffer: {n:?}");
    }
    assert!(
        s.device[0].admin_commands >= 5,
        "PD, MR, CQs, QP: {:?}",
        s.device[0]
    );
    assert_eq!(s.device[1].bytes_placed, 200_000, "into B's memory");
    assert!(s.fabric.bytes_placed >= 200_000);
    drop((a, b));
}

#[test]
fn a_client_that_leaves_gets_its_nic_reset_and_the_next_one_works() {
    let (served, _dir) = serve("healthy", 1, "leave");
    let path = served.sockets()[0].clone();
    {
        let a = app(&path, 8192);
        assert!(served.attached(0));
        drop(a);
    }
    let start = Instant::now();
    while served.attached(0) && start.elapsed() < T {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!served.attached(0), "the session ended");
    let s = served.stats();
    assert_eq!((s.nics[0].sessions, s.nics[0].disconnects), (1, 1));
    // A second client on the same NIC starts from a reset device.
    let mut a = app(&path, 8192);
    let mut b = app(&served.sockets()[1], 8192);
    pair(&mut a, &mut b);
    a.fill(9);
    transfer(&mut a, &mut b, 0, 8192, 4096, 1);
    assert_eq!(b.bytes(), a.bytes());
    assert_eq!(served.stats().nics[0].sessions, 2);
    let stats = served.shutdown();
    assert_eq!(stats.nics[0].refused, 0);
}

/// A raw vfio-user client for malformed messages.
struct Raw {
    s: UnixStream,
    id: u16,
}

impl Raw {
    fn connect(path: &Path) -> Raw {
        let s = UnixStream::connect(path).expect("connect");
        s.set_read_timeout(Some(T)).unwrap();
        Raw { s, id: 0 }
    }
    fn send(&mut self, cmd: u16, body: &[u8], fds: &[i32]) -> u16 {
        use vmm_sys_util::sock_ctrl_msg::ScmSocket;
        self.id += 1;
        let h = proto::Header {
            msg_id: self.id,
            command: cmd,
            msg_size: (proto::HEADER_BYTES + body.len()) as u32,
            flags: proto::FLAG_COMMAND,
            error: 0,
        };
        let mut m = h.as_bytes().to_vec();
        m.extend_from_slice(body);
        if fds.is_empty() {
            self.s.write_all(&m).unwrap();
        } else {
            let n = self.s.send_with_fds(&[&m[..]], fds).unwrap();
            self.s.write_all(&m[n..]).unwrap();
        }
        self.id
    }
    /// The reply: header and body.
    fn reply(&mut self) -> (proto::Header, Vec<u8>) {
        let mut h = [0u8; proto::HEADER_BYTES];
        self.s.read_exact(&mut h).expect("reply header");
        let h = proto::Header::read_from_bytes(&h[..]).unwrap();
        let mut body = vec![0u8; h.msg_size as usize - proto::HEADER_BYTES];
        self.s.read_exact(&mut body).expect("reply body");
        (h, body)
    }
    fn call(&mut self, cmd: u16, body: &[u8], fds: &[i32]) -> (proto::Header, Vec<u8>) {
        let id = self.send(cmd, body, fds);
        let r = self.reply();
        assert_eq!(r.0.msg_id, id);
        r
    }
    fn refused(&mut self, cmd: u16, body: &[u8], fds: &[i32]) -> bool {
        self.call(cmd, body, fds).0.flags & proto::FLAG_ERROR != 0
    }
    fn version(&mut self, nul: bool) {
        let v = proto::Version { major: 0, minor: 1 };
        let mut body = v.as_bytes().to_vec();
        body.extend_from_slice(b"{\"capabilities\":{}}");
        if nul {
            body.push(0);
        }
        self.send(proto::Command::Version as u16, &body, &[]);
    }
}

fn access(region: u32, offset: u64, count: u32) -> Vec<u8> {
    proto::RegionAccess {
        offset,
        region,
        count,
    }
    .as_bytes()
    .to_vec()
}

fn refused_total(s: &ServeStats) -> u64 {
    s.nics.iter().map(|n| n.refused).sum()
}

#[test]
fn malformed_messages_are_refused_and_counted() {
    let (served, _dir) = serve("healthy", 1, "malformed");
    let path = served.sockets()[1].clone();
    let mut raw = Raw::connect(&path);
    raw.version(true);
    let (h, _) = raw.reply();
    assert_eq!(h.flags & proto::FLAG_ERROR, 0, "valid VERSION answered");
    let read = proto::Command::RegionRead as u16;
    let write = proto::Command::RegionWrite as u16;
    let map = proto::Command::DmaMap as u16;
    let (pipe_r, _pipe_w) = {
        let mut fds = [0i32; 2];
        // SAFETY: pipe(2) fills the two-element array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        (fds[0], fds[1])
    };
    let dma = |size: u64| {
        proto::DmaMap {
            argsz: 32,
            flags: proto::DMA_READ | proto::DMA_WRITE,
            offset: 0,
            address: 0x10_0000,
            size,
        }
        .as_bytes()
        .to_vec()
    };
    let irqs = proto::SetIrqs {
        argsz: 20,
        flags: vfio_bindings::bindings::vfio::VFIO_IRQ_SET_DATA_EVENTFD
            | vfio_bindings::bindings::vfio::VFIO_IRQ_SET_ACTION_TRIGGER,
        index: 2,
        start: 0,
        count: 1,
    };
    let unmap = proto::DmaUnmap {
        argsz: 24,
        flags: 0,
        address: 0x10_0000,
        size: 4096,
    };
    let bad: Vec<(&str, u16, Vec<u8>, Vec<i32>)> = vec![
        ("3-byte BAR read", read, access(0, 0, 3), vec![]),
        ("BAR read past the end", read, access(0, 1 << 40, 4), vec![]),
        (
            "misaligned BAR write",
            write,
            [access(0, 2, 4), vec![0; 4]].concat(),
            vec![],
        ),
        (
            "write to an empty BAR",
            write,
            [access(5, 0, 4), vec![0; 4]].concat(),
            vec![],
        ),
        ("DMA_MAP without a descriptor", map, dma(4096), vec![]),
        ("DMA_MAP of a pipe", map, dma(4096), vec![pipe_r]),
        ("DMA_MAP of zero bytes", map, dma(0), vec![pipe_r]),
        (
            "SET_IRQS with a pipe",
            proto::Command::SetIrqs as u16,
            irqs.as_bytes().to_vec(),
            vec![pipe_r],
        ),
        (
            "DMA_UNMAP of nothing",
            proto::Command::DmaUnmap as u16,
            unmap.as_bytes().to_vec(),
            vec![],
        ),
    ];
    for (k, (what, cmd, body, fds)) in bad.iter().enumerate() {
        assert!(raw.refused(*cmd, body, fds), "{what} was accepted");
        assert_eq!(
            refused_total(&served.stats()),
            k as u64 + 1,
            "{what} counted"
        );
    }
    // The protocol library refuses an unknown command itself (not counted: the device never
    // sees it), and the session goes on.
    assert!(raw.refused(99, &[], &[]));
    let (h, body) = raw.call(read, &access(0, 8, 4), &[]);
    assert_eq!(h.flags & proto::FLAG_ERROR, 0);
    assert_eq!(&body[16..], b"MRC1", "the device magic after all that");
    drop(raw);

    // A message cut short ends the session as a protocol error.
    let mut cut = Raw::connect(&path);
    cut.version(true);
    let _ = cut.reply();
    let h = proto::Header {
        msg_id: 9,
        command: write,
        msg_size: 100,
        flags: 0,
        error: 0,
    };
    cut.s.write_all(h.as_bytes()).unwrap();
    cut.s.write_all(&[0; 10]).unwrap();
    drop(cut);
    // A VERSION without its NUL panics inside the library: the session is dropped, counted.
    let mut nul = Raw::connect(&path);
    nul.version(false);
    let mut rest = Vec::new();
    let _ = nul.s.read_to_end(&mut rest);
    drop(nul);
    let start = Instant::now();
    while served.stats().nics[1].panics == 0 && start.elapsed() < T {
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = served.stats();
    assert_eq!(
        (s.nics[1].protocol_errors, s.nics[1].panics),
        (1, 1),
        "{:?}",
        s.nics[1]
    );
    // The server still serves.
    let a = app(&path, 4096);
    assert_eq!(a.ctx.attrs().bdf, served.addresses()[1]);
    // SAFETY: closing our own pipe descriptors.
    unsafe {
        libc::close(pipe_r);
        libc::close(_pipe_w);
    }
}

/// The simulator as a child process, killed while a client waits on a CQ: the client's next
/// poll says the device is gone, within a bounded time, without a request in flight.
#[test]
fn a_server_that_dies_is_device_gone() {
    let dir = temp_dir("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mrc-sim"))
        .args(["serve", "healthy", "--socket-dir"])
        .arg(&dir.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mrc-sim serve");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let start = Instant::now();
    while !line.starts_with("ready") && start.elapsed() < T {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
    }
    assert!(line.starts_with("ready"), "the server did not come up");
    let path = dir.0.join("nic00.sock");
    let mut a = app(&path, 4096);
    child.kill().expect("kill");
    let _ = child.wait();
    let start = Instant::now();
    let mut buf = [WorkCompletion::default(); 4];
    let e = loop {
        match a.rcq.poll(&mut buf) {
            Ok(_) if start.elapsed() < Duration::from_secs(10) => std::thread::yield_now(),
            Ok(_) => panic!("still polling 10 s after the server died"),
            Err(e) => break e,
        }
    };
    assert!(matches!(e, Error::DeviceGone { .. }), "{e}");
    assert!(matches!(a.ctx.alloc_pd(), Err(Error::DeviceGone { .. })));
    assert!(a.chan.fd().is_err(), "every object of the device is dead");
    assert!(matches!(
        a.scq.poll(&mut buf),
        Err(Error::DeviceGone { .. })
    ));
    assert!(matches!(a.mr.write(0, &[1]), Err(Error::DeviceGone { .. })));
    // Dropping everything on a dead device is quiet and quick.
    drop(a);
}

/// One deterministic run of `pair` (both clients driven from this thread): enough traffic to
/// run past the link failure at 1 ms of virtual time.
fn pair_run(seed: u64, tag: &str) -> (ServeStats, Vec<u8>) {
    let (served, _dir) = serve("pair", seed, tag);
    let len = 1 << 20;
    let mut a = app(&served.sockets()[0], len);
    let mut b = app(&served.sockets()[1], len);
    pair(&mut a, &mut b);
    let mut round = 0u32;
    while served.stats().now_ns < 2 * scenario::PAIR_FAILURE_NS {
        round += 1;
        assert!(round < 200, "virtual time does not advance");
        a.fill(round as u8);
        transfer(&mut a, &mut b, 0, len as u64, 256 * 1024, round);
        assert_eq!(b.bytes(), a.bytes(), "round {round}");
    }
    let bytes = b.bytes().to_vec();
    // One client leaves, then the other: the reset that follows a client's leaving is a
    // request too, and must not race with the other client's teardown for the digest to
    // match.
    for (i, side) in [(0, a), (1, b)] {
        drop(side);
        let start = Instant::now();
        while served.attached(i) && start.elapsed() < T {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    (served.shutdown(), bytes)
}

#[test]
fn same_seed_and_requests_same_results_across_the_link_failure() {
    let (s1, b1) = pair_run(5, "repro1");
    let (s2, b2) = pair_run(5, "repro2");
    let f = s1.fabric;
    assert!(
        f.fabric.dropped(mrc_sim::fabric::DropCause::RandomLoss) > 0,
        "the failed link dropped packets: {f:?}"
    );
    assert!(
        s1.retransmits() > 0,
        "and the engines recovered them: {f:?}"
    );
    assert_eq!(b1, b2);
    assert_eq!(s1.digest, s2.digest, "same request sequence");
    assert_eq!(s1.applied, s2.applied);
    assert_eq!(s1.now_ns, s2.now_ns);
    assert_eq!(s1.fabric, s2.fabric);
    assert_eq!(s1.device, s2.device);
    assert_eq!(s1.engine, s2.engine);
}
