//! Two application processes on two served NICs, doing what the OCP benchmark
//! (`examples/benchmark/mrc_example.c`) does: each registers a page-aligned buffer of its own
//! memory, they swap connection info over TCP, the receiver pre-posts a receive and RDMA-writes
//! a sync word into the sender's buffer, the sender spins on that word **without calling the
//! library**, then streams writes (every 64th signaled) and a Write-with-Immediate while the
//! receiver waits in `poll_cq`. Under the server's virtual-time policy this cannot deadlock.
//!
//! The children are this test binary run again with `MRC_VFIO_USER_CHILD` set.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mrc_driver::api::connect::{exchange_client, exchange_server, ConnInfo};
use mrc_driver::api::*;
use mrc_sim::serve::{scenario, Lifetime, Served};

const MSG: usize = 128 * 1024;
const ITERS: u64 = 96;
const CQ_MOD: u64 = 64;
const T: Duration = Duration::from_secs(60);

#[test]
fn two_processes_spin_and_poll_like_the_ocp_benchmark() {
    let dir = std::env::temp_dir().join(format!("mrc-serve-procs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let host = scenario::find("pair").unwrap().build(3).unwrap();
    let served = Served::start(host, &dir, Lifetime::Once).expect("serve");
    let exe = std::env::current_exe().unwrap();
    let child = |role: &str| {
        Command::new(&exe)
            .args([
                "--exact",
                "vfio_user_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MRC_VFIO_USER_CHILD", role)
            .env("MRC_VFIO_USER_DIR", &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("child")
    };
    let mut receiver = child("receiver");
    let mut sender = child("sender");
    let start = Instant::now();
    let mut done = [None, None];
    while done.iter().any(Option::is_none) && start.elapsed() < 2 * T {
        for (k, c) in [&mut receiver, &mut sender].into_iter().enumerate() {
            if done[k].is_none() {
                done[k] = c.try_wait().expect("wait");
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = receiver.kill();
    let _ = sender.kill();
    for (name, c) in [("receiver", receiver), ("sender", sender)] {
        let out = c.wait_with_output().expect("output");
        assert!(
            out.status.success(),
            "{name} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stats = served.wait();
    let _ = std::fs::remove_dir_all(&dir);
    for n in &stats.nics {
        assert_eq!((n.sessions, n.disconnects, n.refused), (1, 1, 0), "{n:?}");
    }
    let warmup_and_sync = 8 + 4 * MSG as u64;
    assert!(
        stats.device[1].bytes_placed >= ITERS * MSG as u64 + warmup_and_sync,
        "{:?}",
        stats.device[1]
    );
    assert!(stats.now_ns > 0);
}

/// A page-aligned zeroed buffer, as `memalign` gives the benchmark.
struct Buffer {
    ptr: *mut u8,
    layout: Layout,
}

impl Buffer {
    fn new(len: usize) -> Buffer {
        let layout = Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Buffer { ptr, layout }
    }
    /// Volatile read of the u64 at `off` (the NIC may write it at any time).
    fn read_u64(&self, off: usize) -> u64 {
        // SAFETY: in bounds and 8-aligned; a raw volatile read, no reference.
        unsafe { std::ptr::read_volatile(self.ptr.add(off).cast::<u64>()) }
    }
    fn write_u64(&self, off: usize, v: u64) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.ptr.add(off).cast::<u64>(), v) }
    }
    fn byte(&self, off: usize) -> u8 {
        // SAFETY: in bounds; read after the completion that ended the NIC's writes.
        unsafe { std::ptr::read_volatile(self.ptr.add(off)) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the MR was dropped before.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

struct Side {
    qp: QueuePair,
    cq: CompletionQueue,
    rcq: CompletionQueue,
    mr: MemoryRegion,
    buf: Buffer,
    _pd: ProtectionDomain,
    ctx: Context,
}

fn side(path: &Path) -> Side {
    let ctx = Context::open_vfio_user(path, Role::Application).expect("open");
    let pd = ctx.alloc_pd().expect("pd");
    let cq = ctx.create_cq(256, None).expect("cq");
    let rcq = ctx.create_cq(256, None).expect("cq");
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &cq,
            recv_cq: &rcq,
            sq_depth: 128,
            rq_depth: 4,
            hint: QpHint::default(),
        })
        .expect("qp");
    let len = 2 * MSG + 16;
    let buf = Buffer::new(len);
    // SAFETY: `buf` outlives `mr` (field order: `mr` drops first); the NIC's bytes are read
    // with volatile reads or after completions.
    let mr = unsafe { pd.reg_user_mr(buf.ptr, len, Access::ALL) }.expect("reg_user_mr");
    qp.modify_init(&InitAttr::default()).expect("init");
    Side {
        qp,
        cq,
        rcq,
        mr,
        buf,
        _pd: pd,
        ctx,
    }
}

fn connect(s: &mut Side, peer: &ConnInfo) {
    s.qp.modify_rtr(&RtrAttr {
        dest_qpn: peer.qpn,
        remote_addr: peer.gid,
        rq_psn: peer.psn,
        responder_mpr: 4,
        max_wimm: 8,
        dynamic_mpr: false,
    })
    .expect("rtr");
    s.qp.modify_rts(&RtsAttr {
        sq_psn: 1,
        requester_mpr: 4,
        max_wimm: 8,
        retry_count: 25,
        ack_timeout_exp: 7,
    })
    .expect("rts");
}

fn info(s: &Side) -> ConnInfo {
    ConnInfo {
        qpn: s.qp.qpn(),
        psn: 1,
        rkey: s.mr.rkey(),
        addr: s.mr.addr(),
        len: s.mr.len() as u64,
        gid: s.ctx.gid(),
    }
}

/// Posts `len` bytes at `off` to `roff` of the peer; `signaled` carries the work request id.
fn write(
    s: &mut Side,
    off: usize,
    len: usize,
    peer: &ConnInfo,
    roff: usize,
    op: WriteOp,
    signaled: Option<u64>,
) {
    let sg = [s.mr.sge(off as u64, len as u32).expect("sge")];
    s.qp.post_send(&[SendWr {
        wr_id: signaled.unwrap_or(0),
        op,
        sg_list: &sg,
        remote_addr: peer.addr + roff as u64,
        rkey: peer.rkey,
        signaled: signaled.is_some(),
        solicited: false,
        fence: false,
    }])
    .expect("post_send");
}

/// Polls until one completion comes (the benchmark's `do { n = mrc_poll_cq(...) } while (n == 0)`).
fn wait_one(cq: &mut CompletionQueue) -> WorkCompletion {
    let mut wc = [WorkCompletion::default(); 1];
    let start = Instant::now();
    loop {
        if cq.poll(&mut wc).expect("poll_cq") == 1 {
            assert_eq!(wc[0].status, CqeStatus::Success, "{:?}", wc[0]);
            return wc[0];
        }
        assert!(start.elapsed() < T, "no completion within {T:?}");
    }
}

#[test]
#[ignore = "a child process of two_processes_spin_and_poll_like_the_ocp_benchmark"]
fn vfio_user_child() {
    let (Some(role), Some(dir)) = (
        std::env::var_os("MRC_VFIO_USER_CHILD"),
        std::env::var_os("MRC_VFIO_USER_DIR").map(PathBuf::from),
    ) else {
        println!("SKIPPED: vfio_user_child only runs as a child of two_processes_spin_and_poll_like_the_ocp_benchmark");
        return;
    };
    let socks = mrc_driver::sys::vfio_user::list_devices(&dir).expect("list");
    let port_file = dir.join("port");
    let signal = 2 * MSG;
    if role == "receiver" {
        let mut s = side(&socks[1]);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tmp = dir.join("port.tmp");
        std::fs::write(&tmp, l.local_addr().unwrap().to_string()).unwrap();
        std::fs::rename(&tmp, &port_file).unwrap();
        let peer = exchange_server(&l, &info(&s), T).expect("exchange");
        connect(&mut s, &peer);
        // RECV before the sync point, then the sync word into the sender's memory, unsignaled.
        s.qp.post_recv(&[RecvWr { wr_id: 0x1000 }])
            .expect("post_recv");
        s.buf.write_u64(signal, 1);
        write(&mut s, signal, 8, &peer, signal, WriteOp::Write, None);
        let wc = wait_one(&mut s.rcq);
        assert_eq!(
            (wc.opcode, wc.imm),
            (CqeOpcode::RecvWriteImm, Some(MSG as u32))
        );
        for i in 0..MSG {
            assert_eq!(
                s.buf.byte(MSG + i),
                i as u8,
                "byte {i} of the received message"
            );
        }
        assert_eq!(s.buf.read_u64(signal + 8), 1, "the signal word");
    } else {
        let mut s = side(&socks[0]);
        let start = Instant::now();
        let addr: SocketAddr = loop {
            if let Ok(t) = std::fs::read_to_string(&port_file) {
                break t.parse().unwrap();
            }
            assert!(start.elapsed() < T, "no receiver");
            std::thread::sleep(Duration::from_millis(5));
        };
        let peer = exchange_client(addr, &info(&s), T).expect("exchange");
        connect(&mut s, &peer);
        for i in 0..MSG {
            // SAFETY: in bounds; the NIC only reads this half.
            unsafe { s.buf.ptr.add(i).write_volatile(i as u8) };
        }
        // The sync point: spin on our own memory, no library call, until the peer's write lands.
        let start = Instant::now();
        let mut spins = 0u64;
        while s.buf.read_u64(signal) != 1 {
            spins += 1;
            assert!(
                start.elapsed() < T,
                "the sync word never came ({spins} spins)"
            );
            std::hint::spin_loop();
        }
        for i in 0..4 {
            write(&mut s, 0, MSG, &peer, MSG, WriteOp::Write, Some(i));
            wait_one(&mut s.cq);
        }
        let (mut posted, mut completed) = (0u64, 0u64);
        let mut wc = [WorkCompletion::default(); 16];
        while posted < ITERS || completed < ITERS {
            while posted < ITERS && posted < 128 + completed {
                let signaled = posted % CQ_MOD == CQ_MOD - 1 || posted == ITERS - 1;
                write(
                    &mut s,
                    0,
                    MSG,
                    &peer,
                    MSG,
                    WriteOp::Write,
                    signaled.then_some(posted),
                );
                posted += 1;
            }
            let n = s.cq.poll(&mut wc).expect("poll_cq");
            for c in &wc[..n] {
                assert_eq!(c.status, CqeStatus::Success, "{c:?}");
                completed = (completed + CQ_MOD).min(ITERS);
            }
        }
        s.buf.write_u64(signal + 8, 1);
        write(
            &mut s,
            signal + 8,
            8,
            &peer,
            signal + 8,
            WriteOp::WriteImm(MSG as u32),
            Some(0xffff_ffff),
        );
        wait_one(&mut s.cq);
    }
}
