//! perftest-style RDMA Write benchmarks: `write-bw` (Gb/s, Mmsg/s) and `write-lat`
//! (Write-with-Immediate ping-pong percentiles). On hardware they are timed by the wall clock.
//! On the simulator (`--sim`) they are timed in its virtual time: what the simulated NICs (the
//! datapath stage, the firmware main loop on timed cores, PCIe at TLP granularity) and the Clos
//! fabric between them took, not how fast this machine simulated it; the host's own CPU time
//! is not modelled (the application takes none). The JSON says which (`clock`).

use std::time::{Duration, Instant};

use clap::Args;
use mrc_driver::api::*;
use serde_json::{json, Value};

use crate::{Fail, Target};

/// Benchmark knobs.
#[derive(Args, Debug, Clone)]
pub struct PerfArgs {
    /// Message sizes in bytes (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "4096")]
    pub size: Vec<u32>,
    /// Queue pairs.
    #[arg(long, default_value_t = 1)]
    pub qps: u32,
    /// Messages per QP and size.
    #[arg(long, default_value_t = 1000)]
    pub iters: u32,
}

struct Side {
    _pd: ProtectionDomain,
    mr: MemoryRegion,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    qps: Vec<QueuePair>,
}

const DEPTH: u32 = 128;
const T: Duration = Duration::from_secs(10);

fn side(ctx: &Context, qps: u32, buf: usize) -> Result<Side, Fail> {
    let pd = ctx.alloc_pd()?;
    let mr = pd.reg_mr(buf, Access::ALL)?;
    let scq = ctx.create_cq(DEPTH * qps.max(1), None)?;
    let rcq = ctx.create_cq(DEPTH * qps.max(1), None)?;
    let mut list = Vec::new();
    for _ in 0..qps {
        let mut qp = pd.create_qp(&QpInitAttr {
            send_cq: &scq,
            recv_cq: &rcq,
            sq_depth: DEPTH,
            rq_depth: DEPTH,
            hint: QpHint {
                bulk: true,
                ..QpHint::default()
            },
        })?;
        qp.modify_init(&InitAttr::default())?;
        list.push(qp);
    }
    Ok(Side {
        _pd: pd,
        mr,
        scq,
        rcq,
        qps: list,
    })
}

/// Window (units of 128 PSNs) and Write-with-Immediate depth the QPs ask for, within what both
/// devices hold (QUERY_LIMITS).
const MPR: u32 = 8;
const MAX_WIMM: u32 = 64;

fn connect(
    a: &mut Side,
    b: &mut Side,
    (ga, gb): ([u8; 16], [u8; 16]),
    limits: [&mrc_driver::device::Limits; 2],
) -> Result<(), Fail> {
    let mpr = limits.iter().fold(MPR, |m, l| m.min(l.max_mpr)).max(1) as u16;
    let wimm = limits
        .iter()
        .fold(MAX_WIMM, |m, l| m.min(l.max_wimm).min(l.max_wimm_dest))
        .max(1) as u16;
    for (qa, qb) in a.qps.iter_mut().zip(b.qps.iter_mut()) {
        let (na, nb) = (qa.qpn(), qb.qpn());
        for (q, peer, gid) in [(&mut *qa, nb, gb), (&mut *qb, na, ga)] {
            q.modify_rtr(&RtrAttr {
                dest_qpn: peer,
                remote_addr: gid,
                rq_psn: 0,
                responder_mpr: mpr,
                max_wimm: wimm,
                dynamic_mpr: false,
            })?;
            q.modify_rts(&RtsAttr {
                sq_psn: 0,
                requester_mpr: mpr,
                max_wimm: wimm,
                retry_count: 7,
                ack_timeout_exp: 14,
            })?;
        }
    }
    Ok(())
}

/// The benchmark's clock: virtual time on the simulator, the wall clock on hardware.
struct Clock<'a> {
    sim: Option<&'a mrc_sim::nic_host::SimHost>,
    wall: Instant,
}

impl<'a> Clock<'a> {
    fn of(t: &'a Target) -> Clock<'a> {
        Clock {
            sim: t.sim.as_ref(),
            wall: Instant::now(),
        }
    }

    /// Seconds since the clock was made.
    fn now(&self) -> f64 {
        match self.sim {
            Some(s) => s.now_ns() as f64 / 1e9,
            None => self.wall.elapsed().as_secs_f64(),
        }
    }

    fn name(&self) -> &'static str {
        if self.sim.is_some() {
            "virtual"
        } else {
            "wall"
        }
    }
}

fn setup(t: &Target, args: &PerfArgs) -> Result<(Side, Side, usize), Fail> {
    if args.qps == 0 || args.qps > 16 || args.iters == 0 || args.size.is_empty() {
        return Err(Fail(
            "perf: need 1..=16 QPs, >= 1 iteration and at least one size".into(),
        ));
    }
    let max = *args.size.iter().max().unwrap_or(&0) as usize;
    if max == 0 || max > 1 << 24 {
        return Err(Fail("perf: sizes must be in 1..=16777216 bytes".into()));
    }
    let app_a = Context::from_device(t.ctl.device(), Role::Application);
    let mut a = side(&app_a, args.qps, max)?;
    let mut b = side(&t.peer, args.qps, max)?;
    connect(
        &mut a,
        &mut b,
        (app_a.gid(), t.peer.gid()),
        [&app_a.attrs().table_limits, &t.peer.attrs().table_limits],
    )?;
    Ok((a, b, max))
}

fn drain(cq: &mut CompletionQueue, want: usize, wcs: &mut [WorkCompletion]) -> Result<(), Fail> {
    let start = Instant::now();
    let mut got = 0;
    while got < want {
        let n = cq.poll(wcs)?;
        for w in &wcs[..n] {
            if w.status != CqeStatus::Success {
                return Err(Fail(format!(
                    "perf: completion {} failed: {:?}",
                    w.wr_id, w.status
                )));
            }
        }
        got += n;
        if n == 0 && start.elapsed() > T {
            return Err(Fail(format!(
                "perf: only {got} of {want} completions within {T:?}"
            )));
        }
    }
    Ok(())
}

/// Bandwidth: every QP keeps its send ring full of Writes, one signaled per batch.
pub fn write_bw(t: &Target, args: &PerfArgs) -> Result<Value, Fail> {
    let (mut a, b, _) = setup(t, args)?;
    let mut results = Vec::new();
    let mut wcs = [WorkCompletion::default(); 64];
    const BATCH: u32 = 16;
    let clock = Clock::of(t);
    for &size in &args.size {
        let sg = [a.mr.sge(0, size)?];
        let start = clock.now();
        let mut sent = 0u64;
        for qi in 0..a.qps.len() {
            let mut left = args.iters;
            while left > 0 {
                let n = left.min(BATCH);
                let wrs: Vec<SendWr> = (0..n)
                    .map(|i| SendWr {
                        wr_id: u64::from(i),
                        op: WriteOp::Write,
                        sg_list: &sg,
                        remote_addr: b.mr.addr(),
                        rkey: b.mr.rkey(),
                        signaled: i == n - 1,
                        solicited: false,
                        fence: false,
                    })
                    .collect();
                a.qps[qi].post_send(&wrs)?;
                drain(&mut a.scq, 1, &mut wcs)?;
                left -= n;
                sent += u64::from(n);
            }
        }
        let secs = (clock.now() - start).max(1e-9);
        let bytes = sent * u64::from(size);
        results.push(json!({"size": size, "messages": sent, "seconds": secs,
            "gbps": bytes as f64 * 8.0 / secs / 1e9, "mmsg_per_s": sent as f64 / secs / 1e6}));
    }
    let gbps = results
        .last()
        .and_then(|r| r["gbps"].as_f64())
        .unwrap_or(0.0);
    Ok(
        json!({"test": "write-bw", "clock": clock.name(), "qps": args.qps, "iters": args.iters, "gbps": gbps, "results": results}),
    )
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Latency: one Write-with-Immediate at a time; the time until the peer's receive completes.
pub fn write_lat(t: &Target, args: &PerfArgs) -> Result<Value, Fail> {
    let (mut a, mut b, _) = setup(t, args)?;
    let mut wcs = [WorkCompletion::default(); 8];
    let mut results = Vec::new();
    let clock = Clock::of(t);
    for &size in &args.size {
        let sg = [a.mr.sge(0, size)?];
        let mut lat_us = Vec::with_capacity(args.iters as usize);
        let total = clock.now();
        for i in 0..args.iters {
            let q = (i % args.qps) as usize;
            b.qps[q].post_recv(&[RecvWr {
                wr_id: u64::from(i),
            }])?;
            let start = clock.now();
            a.qps[q].post_send(&[SendWr {
                wr_id: u64::from(i),
                op: WriteOp::WriteImm(i),
                sg_list: &sg,
                remote_addr: b.mr.addr(),
                rkey: b.mr.rkey(),
                signaled: true,
                solicited: false,
                fence: false,
            }])?;
            drain(&mut b.rcq, 1, &mut wcs)?;
            lat_us.push((clock.now() - start) * 1e6);
            drain(&mut a.scq, 1, &mut wcs)?;
        }
        let secs = (clock.now() - total).max(1e-9);
        lat_us.sort_by(f64::total_cmp);
        let n = lat_us.len() as u64;
        results.push(json!({"size": size, "messages": n,
            "lat_us_p50": pct(&lat_us, 0.5), "lat_us_p99": pct(&lat_us, 0.99),
            "lat_us_p999": pct(&lat_us, 0.999), "lat_us_max": pct(&lat_us, 1.0),
            "gbps": (n * u64::from(size)) as f64 * 8.0 / secs / 1e9,
            "mmsg_per_s": n as f64 / secs / 1e6}));
    }
    let gbps = results
        .last()
        .and_then(|r| r["gbps"].as_f64())
        .unwrap_or(0.0);
    Ok(
        json!({"test": "write-lat", "clock": clock.name(), "qps": args.qps, "iters": args.iters, "gbps": gbps, "results": results}),
    )
}
