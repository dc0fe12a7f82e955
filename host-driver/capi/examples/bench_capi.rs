//! The figure of `just bench-capi`: lib_mrc.so's message rate against the Rust API's, in the
//! same run, on the same simulator.
//!
//! Each side is one process writing 64-byte RDMA writes from `mrc0` to `mrc1` (both devices
//! in that process): one request per post, at most 128 outstanding, every 64th signaled,
//! completions polled 16 at a time (the loop of OCP's benchmark). The C side is
//! `benches/rate.c` linked against lib_mrc.so (run as a child process); the Rust side is the
//! same loop on `mrc_driver` here. Every measurement gets a fresh `mrc-sim serve SCENARIO
//! --once` (`pair` by default; same seed: the same fabric, link failure included, for both
//! sides; `healthy` is the same fabric without the failure). After one warmup run
//! of each, the rounds alternate C and Rust; the medians and their ratio are printed. Exits 1
//! when the library's rate is below the Rust API's divided by the allowed factor (1.5).
//!
//! ```text
//! bench_capi --mrc-sim PATH --c-rate PATH --work-dir DIR [--scenario S] [--rounds N]
//!            [--messages N]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use mrc_driver::api::{
    Access, Context, InitAttr, QpInitAttr, Role, RtrAttr, RtsAttr, SendWr, Sge, WorkCompletion,
    WriteOp,
};

const DEPTH: u64 = 128;
const SIGNAL_EVERY: u64 = 64;
const POLL: usize = 16;
const SIZE: u32 = 64;
/// The library's rate must be at least the Rust API's divided by this.
const ALLOWED: f64 = 1.5;
const USAGE: &str =
    "usage: bench_capi --mrc-sim PATH --c-rate PATH --work-dir DIR [--scenario S] [--rounds N] \
     [--messages N]";

/// A page of heap memory, registered as user memory like `ibv_reg_mr` does.
struct Page(std::ptr::NonNull<u8>);

impl Page {
    fn new() -> Page {
        let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
        // SAFETY: a non-zero-sized layout.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        Page(std::ptr::NonNull::new(p).expect("allocation"))
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
        // SAFETY: allocated in `new` with this layout; every region on it was dropped before.
        unsafe { std::alloc::dealloc(self.0.as_ptr(), layout) };
    }
}

fn rust_rate(dir: &Path, messages: u64) -> Result<f64, String> {
    let socks = mrc_driver::sys::vfio_user::list_devices(dir).map_err(|e| e.to_string())?;
    if socks.len() < 2 {
        return Err(format!("{}: need two devices", dir.display()));
    }
    let e = |e: mrc_driver::Error| e.to_string();
    let ctx = [
        Context::open_vfio_user(&socks[0], Role::Application).map_err(e)?,
        Context::open_vfio_user(&socks[1], Role::Application).map_err(e)?,
    ];
    let pages = [Page::new(), Page::new()];
    let mut pds = Vec::new();
    let mut mrs = Vec::new();
    let mut cqs = Vec::new();
    for (c, p) in ctx.iter().zip(&pages) {
        let pd = c.alloc_pd().map_err(e)?;
        // SAFETY: the page is ours, mapped, and outlives the region (dropped first below);
        // only the NIC writes it while registered.
        let mr = unsafe { pd.reg_user_mr(p.0.as_ptr(), 4096, Access::ALL) }.map_err(e)?;
        cqs.push(c.create_cq(256, None).map_err(e)?);
        pds.push(pd);
        mrs.push(mr);
    }
    let mut qps = Vec::new();
    for i in 0..2 {
        qps.push(
            pds[i]
                .create_qp(&QpInitAttr {
                    send_cq: &cqs[i],
                    recv_cq: &cqs[i],
                    sq_depth: DEPTH as u32,
                    rq_depth: 1,
                    hint: Default::default(),
                })
                .map_err(e)?,
        );
    }
    // The attributes lib_mrc.so gives a QP whose program sets none (OCP's example values,
    // capped at the device's limits).
    let l = ctx[0].attrs().table_limits;
    let mpr = 8u32.min(l.max_mpr) as u16;
    let wimm = |m: u32| 128u32.min(m) as u16;
    let qpns = [qps[0].qpn(), qps[1].qpn()];
    for i in 0..2 {
        let q = &mut qps[i];
        q.modify_init(&InitAttr::default()).map_err(e)?;
        q.modify_rtr(&RtrAttr {
            dest_qpn: qpns[1 - i],
            remote_addr: ctx[1 - i].gid(),
            rq_psn: 0,
            responder_mpr: mpr,
            max_wimm: wimm(l.max_wimm_dest),
            dynamic_mpr: false,
        })
        .map_err(e)?;
        q.modify_rts(&RtsAttr {
            sq_psn: 0,
            requester_mpr: mpr,
            max_wimm: wimm(l.max_wimm),
            retry_count: 25,
            ack_timeout_exp: 8,
        })
        .map_err(e)?;
    }
    let sge = [Sge {
        addr: mrs[0].addr(),
        len: SIZE,
        lkey: mrs[0].lkey(),
    }];
    let (remote, rkey) = (mrs[1].addr(), mrs[1].rkey());
    let mut wc = [WorkCompletion::default(); POLL];
    let (mut posted, mut completed) = (0u64, 0u64);
    let start = Instant::now();
    while completed < messages {
        while posted < messages && posted - completed < DEPTH {
            let signaled = posted % SIGNAL_EVERY == SIGNAL_EVERY - 1 || posted == messages - 1;
            qps[0]
                .post_send(&[SendWr {
                    wr_id: posted,
                    op: WriteOp::Write,
                    sg_list: &sge,
                    remote_addr: remote,
                    rkey,
                    signaled,
                    solicited: false,
                    fence: false,
                }])
                .map_err(e)?;
            posted += 1;
        }
        let n = cqs[0].poll(&mut wc).map_err(e)?;
        for w in &wc[..n] {
            if w.status != mrc_driver::api::CqeStatus::Success {
                return Err(format!("completion {:?}", w.status));
            }
            completed = w.wr_id + 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    drop(qps);
    drop(mrs);
    Ok(messages as f64 / secs)
}

fn c_rate(exe: &Path, dir: &Path, messages: u64) -> Result<f64, String> {
    let out = Command::new(exe)
        .arg(messages.to_string())
        .env("MRC_VFIO_USER_DIR", dir)
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} failed: {text}{}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    text.split_whitespace()
        .skip_while(|w| *w != "rate")
        .nth(1)
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| format!("no rate in {text:?}"))
}

/// Runs `f` with the socket directory of a fresh `mrc-sim serve SCENARIO --once`, and waits
/// for the server to leave.
fn served<T>(
    sim: &Path,
    scenario: &str,
    work: &Path,
    f: impl FnOnce(&Path) -> Result<T, String>,
) -> Result<T, String> {
    let dir = work.join("sock");
    let _ = std::fs::remove_dir_all(&dir);
    let mut server = Command::new(sim)
        .args(["serve", scenario, "--once", "--socket-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", sim.display()))?;
    let start = Instant::now();
    while !(dir.join("nic00.sock").exists() && dir.join("nic01.sock").exists()) {
        if start.elapsed().as_secs() > 30 || server.try_wait().ok().flatten().is_some() {
            let _ = server.kill();
            return Err("the simulator did not start serving".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = f(&dir);
    if r.is_err() {
        let _ = server.kill();
    }
    let _ = server.wait();
    r
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() -> ExitCode {
    let mut sim = None;
    let mut work = None;
    let mut c_exe = None;
    let mut scenario = "pair".to_string();
    let mut rounds = 5usize;
    let mut messages = 50_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next();
        match (a.as_str(), v) {
            ("--mrc-sim", Some(v)) => sim = Some(PathBuf::from(v)),
            ("--work-dir", Some(v)) => work = Some(PathBuf::from(v)),
            ("--c-rate", Some(v)) => c_exe = Some(PathBuf::from(v)),
            ("--scenario", Some(v)) => scenario = v,
            ("--rounds", Some(v)) => rounds = v.parse().unwrap_or(rounds),
            ("--messages", Some(v)) => messages = v.parse().unwrap_or(messages),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let (Some(sim), Some(work), Some(c_exe)) = (sim, work, c_exe) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let c_run = |n| served(&sim, &scenario, &work, |d| c_rate(&c_exe, d, n));
    let rust_run = |n| served(&sim, &scenario, &work, |d| rust_rate(d, n));
    let run = || -> Result<(Vec<f64>, Vec<f64>), String> {
        c_run(messages / 4)?;
        rust_run(messages / 4)?;
        let (mut c, mut r) = (Vec::new(), Vec::new());
        for i in 0..rounds {
            c.push(c_run(messages)?);
            r.push(rust_run(messages)?);
            println!(
                "round {i}: lib_mrc.so {:>10.0} msg/s   Rust API {:>10.0} msg/s",
                c[i], r[i]
            );
        }
        Ok((c, r))
    };
    let (mut c, mut r) = match run() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("bench_capi: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mc, mr) = (median(&mut c), median(&mut r));
    let ratio = mr / mc;
    println!(
        "64-byte writes, one process, `{scenario}`, {messages} per round, {rounds} rounds \
         (medians):\n  \
         lib_mrc.so {mc:.0} msg/s, Rust API {mr:.0} msg/s (baseline, same run): Rust / C = \
         {ratio:.3} (allowed {ALLOWED})"
    );
    if ratio > ALLOWED {
        println!("FAIL: lib_mrc.so is more than {ALLOWED}x slower than the Rust API");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
