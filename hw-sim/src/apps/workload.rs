//! A scenario's workload run by applications on the driver: every host of the fabric is a
//! [`SimNic`](crate::nic_host::SimNic) on the simulator's NIC model
//! ([`SimHost::on_clos`]), and one application per host moves its flows through the driver's
//! public API (`mrc_driver::api`), the way an OCP MRC application would:
//!
//! - **Setup**: the host's controller context installs an NSCC profile for the fabric's
//!   unloaded RTT; the application allocates a PD, one send and one receive CQ, a source MR
//!   (the host's largest flow, filled with a pattern of the host) and a destination MR (every
//!   byte flowing into the host, one range per flow), and one QP per peer it exchanges flows
//!   with (the peers in the order of [`QpPlan::for_flows`], as the flow hosts open them),
//!   connected with the scenario's retry count and ACK timeout. Admin commands take no
//!   virtual time here: the workload starts at t = 0 as it does on the flow hosts.
//! - **Traffic**: a flow is released at its `start`, or when the flow it is `after` completed;
//!   its messages (`msg_bytes` each, the last shorter) are signalled RDMA Writes of the source
//!   MR's bytes from the flow's offset 0 into the flow's range of the peer's destination MR,
//!   queued per QP in release order and posted while the QP's send queue has room, one
//!   doorbell per batch. A flow completes at its last message's send completion, seen when
//!   its CQE reached host memory (the host polls its CQ at that virtual time). A completion
//!   in error fails its flow (and the flows after it).
//! - **Time**: the applications take no virtual time; the fabric runs event by event until the
//!   next completion or release ([`SimHost::run_until_completion`]).
//! - **Report**: the run's [`RunReport`] is the one the flow hosts give (the NIC model's
//!   counters, stalls and blocks, the fabric's counters), with the flows' times from the
//!   applications; [`DriverRun`] adds the destination bytes checked against their sources.
//!
//! What differs from the flow hosts ([`crate::nic`], "Flows"), which remain for runs too big
//! for a full host (see `hw-sim/README.md`, "Host models"): the QPs take the device's
//! defaults where the driver has no attribute for a tuning the flow hosts apply directly (the
//! EV table is the device's default profile: 256 EVs over the planes, first probe after
//! 10 us rather than 20 us; NSCC starts every QP at the bandwidth-delay product of the
//! default link, not the NIC's share per sending QP), and the bytes are real.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use mrc_driver::api::connect::ConnInfo;
use mrc_driver::api::*;
use mrc_driver::ctl::{Controller, NsccParams};
use mrc_driver::device::DeviceConfig;
use mrc_driver::sys::Bdf;
use mrc_firmware::engine::cc::NsccParams as FwNscc;

use super::hosts;
use crate::core::time::{Duration, Time, PS_PER_NS};
use crate::fabric::Fault;
use crate::nic::{QpPlan, Transport};
use crate::nic_host::{ClosConfig, SimHost, SimNicConfig};
use crate::run::{
    report_tapped, scenario_flows, t1_link, Observer, RunError, RunReport, Scenario, Tap, WorldView,
};
use crate::workload::{Flow, FlowResult};

/// Send queue depth of every QP (the NIC model's send queue holds fewer: the rest wait in the
/// ring).
const SQ_DEPTH: u32 = 256;
/// CQ depth of every host (one send CQ for all its QPs).
const CQ_DEPTH: u32 = 1 << 15;
/// Completions taken per poll.
const POLL: usize = 64;

/// A run of a scenario's workload by applications on the driver.
#[derive(Clone, Debug)]
pub struct DriverRun {
    /// The run's report (as [`crate::run::run`] gives for the flow hosts).
    pub report: RunReport,
    /// Destination bytes of completed flows compared with their sources.
    pub bytes_checked: u64,
    /// Of those, bytes that differ.
    pub bytes_wrong: u64,
}

/// One connection of a host: its QP, the peer's data and the messages waiting to be posted.
struct Conn {
    qp: QueuePair,
    peer: ConnInfo,
    /// (flow, message index) in posting order.
    queue: VecDeque<(u32, u32)>,
}

/// One host's application.
struct App {
    ctx: Context,
    _ctl: Controller,
    _pd: ProtectionDomain,
    scq: CompletionQueue,
    _rcq: CompletionQueue,
    src: MemoryRegion,
    dst: MemoryRegion,
    conns: Vec<Conn>,
    /// Peer host -> connection index.
    conn_of: Vec<u32>,
    /// Connections with messages waiting, in the order their first waiting message was
    /// released (the order they ring their doorbells in).
    ready: VecDeque<u32>,
}

/// Per flow: what the applications know of it.
#[derive(Clone, Copy, Default)]
struct FlowState {
    released: Option<Time>,
    done: Option<Time>,
    msgs: u32,
    completed: u32,
    acked: u64,
    failed: bool,
    /// Offset of its range in the destination MR.
    dst_off: u64,
}

/// NIC `i`'s PCI address: bus `i / 32`, device `i % 32` (its GID follows from it).
fn bdf(i: u32) -> Bdf {
    Bdf::new(0, (i / 32) as u8, (i % 32) as u8, 0).unwrap_or_default()
}

/// Bytes of the source pattern written at a time.
const FILL_CHUNK: u64 = 64 << 10;

/// Fills `out` with host `src`'s source MR from byte `from` on: the byte at offset `o` is the
/// top byte of `o * K1 ^ src * K2` (a different stream per host; `o * K1` is kept as a running
/// sum, one addition per byte).
fn fill_pattern(src: u32, from: u64, out: &mut [u8]) {
    const K1: u64 = 0x9E37_79B9_7F4A_7C15;
    let salt = u64::from(src).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let mut x = from.wrapping_mul(K1);
    for b in out {
        *b = ((x ^ salt) >> 56) as u8;
        x = x.wrapping_add(K1);
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> RunError {
    RunError::Apps(format!("{what}: {e}"))
}

/// Watches nothing.
struct Unobserved;

impl Observer for Unobserved {
    fn sample_every(&self) -> Duration {
        Duration::from_secs(1 << 20)
    }
    fn on_sample(&mut self, _: Time, _: &WorldView<'_>) {}
    fn on_finish(&mut self, _: Time, _: &WorldView<'_>) {}
}

/// Runs `sc` (an MRC transport) with one application per host on the driver.
///
/// # Errors
/// [`RunError`] when the scenario is invalid or a driver step failed (named).
pub fn run(sc: &Scenario) -> Result<DriverRun, RunError> {
    run_observed(sc, &mut Unobserved)
}

/// [`run`], calling `obs` as the run goes (samples at its period and at the end, the packets
/// it taps), as [`crate::run::run_observed`] does for the flow hosts.
///
/// # Errors
/// As [`run`].
pub fn run_observed(sc: &Scenario, obs: &mut impl Observer) -> Result<DriverRun, RunError> {
    if sc.transport == Transport::RoceEcmp {
        return Err(RunError::Apps(
            "roce-ecmp has no MRC device for the driver: run it on the flow hosts".into(),
        ));
    }
    let hosts = sc.fabric.shape.hosts();
    let (flows, main_flows) = scenario_flows(sc, hosts)?;
    let plan = QpPlan::for_flows(hosts, &flows);
    let qps = (0..hosts)
        .map(|h| plan.peers_of(h).len())
        .max()
        .unwrap_or(0);
    let cfgs: Vec<SimNicConfig> = (0..hosts)
        .map(|h| {
            let mut c = SimNicConfig::numbered(0);
            c.bdf = bdf(h);
            // QP and CQ numbers share `1..min(max_qps, doorbell_pages)`: the QPs, 2 CQs.
            let room = (qps as u32 + 3).next_multiple_of(4);
            c.params.max_qps = room;
            c.params.doorbell_pages = room;
            c.params.num_ports = u32::from(sc.fabric.planes as u8);
            c.params.num_planes = u32::from(sc.fabric.planes as u8);
            c
        })
        .collect();
    let ccfg = ClosConfig {
        scenario: *sc,
        admin_ns: 0,
        doorbells_run: false,
        ..ClosConfig::default()
    };
    let host = SimHost::on_clos(&cfgs, ccfg).map_err(|e| err("NICs", format!("{e:?}")))?;

    // Flows: ranges in the destination MRs, per-source largest flow.
    let mut state: Vec<FlowState> = vec![FlowState::default(); flows.len()];
    let mut incoming = vec![0u64; hosts as usize];
    let mut largest = vec![0u64; hosts as usize];
    for f in &flows {
        let s = &mut state[f.id as usize];
        s.msgs = f.bytes.div_ceil(u64::from(f.msg_bytes.max(1))) as u32;
        s.dst_off = incoming[f.dst as usize];
        incoming[f.dst as usize] += f.bytes;
        largest[f.src as usize] = largest[f.src as usize].max(f.bytes);
    }

    // Setup: profiles, PD, CQs, MRs, QPs in INIT.
    let nscc = nscc_profile(sc)?;
    let mut apps = Vec::with_capacity(hosts as usize);
    for h in 0..hosts {
        let peers = open_order(h, &plan, &flows);
        apps.push(setup(
            &host,
            h,
            &plan,
            &peers,
            &nscc,
            largest[h as usize],
            incoming[h as usize],
        )?);
    }
    // Connect: each QP with its peer's QP (first PSN 0 both ways, as the flow hosts).
    let infos: Vec<Vec<ConnInfo>> = apps
        .iter()
        .map(|a| {
            a.conns
                .iter()
                .map(|c| ConnInfo {
                    qpn: c.qp.qpn(),
                    psn: 0,
                    rkey: a.dst.rkey(),
                    addr: a.dst.addr(),
                    len: a.dst.len() as u64,
                    gid: a.ctx.gid(),
                })
                .collect()
        })
        .collect();
    for h in 0..hosts as usize {
        for p in plan.peers_of(h as u32) {
            let k = apps[h].conn_of[p.host as usize] as usize;
            let back = apps[p.host as usize].conn_of[h] as usize;
            let info = infos[p.host as usize][back];
            let c = &mut apps[h].conns[k];
            c.peer = info;
            hosts::connect_with(&mut c.qp, 0, &info, sc.retry_cnt, sc.timeout_exp)
                .map_err(|e| err(&format!("host {h} to {}", p.host), e))?;
        }
    }

    // The link failure, on the fabric the NICs run on.
    if let Some(f) = sc.failure {
        host.with_sim(|sim| {
            let (w, mut s) = sim.handler_and_scheduler();
            let link = t1_link(&w.fabric, f.t1_link).ok_or(RunError::NoSuchLink(f.t1_link))?;
            let fab = &w.fabric;
            fab.schedule_fault(&mut s, f.at, Fault::LinkDown(link))
                .map(|_| ())
                .map_err(|e| err("failure", format!("{e:?}")))
        })?;
    }

    // Dependents of each flow.
    let mut after: Vec<Vec<u32>> = vec![Vec::new(); flows.len()];
    // Flows to release, earliest (then lowest id) first.
    let mut pending: BinaryHeap<Reverse<(Time, u32)>> = BinaryHeap::new();
    for f in &flows {
        match f.after {
            Some(a) if (a as usize) < flows.len() => after[a as usize].push(f.id),
            _ => pending.push(Reverse((f.start, f.id))),
        }
    }

    let limit_ns = sc.time_limit.as_ps() / PS_PER_NS;
    let mut finished = 0usize;
    let mut wc = vec![WorkCompletion::default(); POLL];
    let mut now = Time::ZERO;
    let every = obs.sample_every().max(Duration::from_ns(1));
    let mut next_sample = Time::ZERO.saturating_add(every);
    let mut last_sample = Time::ZERO;
    let tap = obs.tap();
    host.with_sim(|sim| sim.handler_mut().tap = tap);
    loop {
        // Release what is due.
        while let Some(&Reverse((t, id))) = pending.peek() {
            if t > now {
                break;
            }
            pending.pop();
            let f = flows[id as usize];
            state[id as usize].released = Some(now.max(t));
            let a = &mut apps[f.src as usize];
            let c = a.conn_of[f.dst as usize];
            let q = &mut a.conns[c as usize].queue;
            if q.is_empty() {
                a.ready.push_back(c);
            }
            q.extend((0..state[id as usize].msgs).map(|m| (id, m)));
        }
        for (h, a) in apps.iter_mut().enumerate() {
            post(a, h, &flows, &state)?;
        }
        if finished == flows.len() {
            break;
        }
        // (rounded up to whole ns: a release at a fraction of a ns is reached, not missed)
        let until = pending
            .peek()
            .map_or(limit_ns, |p| {
                p.0 .0.as_ps().div_ceil(PS_PER_NS).min(limit_ns)
            })
            .min(next_sample.as_ps().div_ceil(PS_PER_NS));
        let got = host.run_until_completion(until);
        now = Time::from_ns(host.now_ns());
        if tap != Tap::Off {
            host.with_sim(|sim| report_tapped(sim.handler_mut(), obs));
        }
        if now >= next_sample {
            let results = flow_results(&flows, &state, main_flows);
            host.with_sim(|sim| {
                sim.handler_mut().set_app_results(results, main_flows);
                obs.on_sample(now, &WorldView::new(&[sim.handler()]));
            });
            last_sample = now;
            while next_sample <= now {
                next_sample = next_sample.saturating_add(every);
            }
        }
        if got {
            for (h, a) in apps.iter_mut().enumerate() {
                loop {
                    let n = a
                        .scq
                        .poll(&mut wc)
                        .map_err(|e| err(&format!("host {h} CQ"), e))?;
                    for w in &wc[..n] {
                        let id = (w.wr_id >> 32) as u32;
                        let Some(s) = state.get_mut(id as usize) else {
                            continue;
                        };
                        if w.status != CqeStatus::Success {
                            if !s.failed && s.done.is_none() {
                                s.failed = true;
                                finished += fail_after(id, &after, &mut state);
                            }
                            continue;
                        }
                        s.completed += 1;
                        s.acked += u64::from(w.byte_len);
                        if s.completed == s.msgs && !s.failed {
                            s.done = Some(now);
                            finished += 1;
                            for &d in &after[id as usize] {
                                let start = flows[d as usize].start.max(now);
                                pending.push(Reverse((start, d)));
                            }
                        }
                    }
                    if n < POLL {
                        break;
                    }
                }
            }
        } else if now.as_ps() / PS_PER_NS >= limit_ns {
            break;
        }
    }

    // The report, from the NIC model and the applications' flow times.
    let results = flow_results(&flows, &state, main_flows);
    let report = host.with_sim(|sim| {
        let now = sim.now();
        for n in &mut sim.handler_mut().nics {
            n.settle(now);
        }
        sim.handler_mut().set_app_results(results, main_flows);
        if now > last_sample {
            obs.on_finish(now, &WorldView::new(&[sim.handler()]));
        }
        RunReport::collect(sc, sim)
    });
    let (bytes_checked, bytes_wrong) = check(&apps, &flows, &state)?;
    Ok(DriverRun {
        report,
        bytes_checked,
        bytes_wrong,
    })
}

/// The order host `h` opens its connections in: the peers its flows name, in flow order,
/// then the peers that only send to it.
fn open_order(h: u32, plan: &QpPlan, flows: &[Flow]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    let mut seen = vec![false; plan.hosts() as usize];
    let named = flows
        .iter()
        .filter(|f| f.src == h && f.dst != h)
        .map(|f| f.dst);
    for p in named.chain(plan.peers_of(h).iter().map(|p| p.host)) {
        if !std::mem::replace(&mut seen[p as usize], true) {
            out.push(p);
        }
    }
    out
}

/// The NSCC profile the controllers install: the reference parameters for the NIC's
/// bandwidth (every port) and the fabric's unloaded RTT.
fn nscc_profile(sc: &Scenario) -> Result<NsccParams, RunError> {
    let cfg = sc.nic_config();
    let rtt_ns = (cfg.base_rtt.as_ps() / PS_PER_NS).max(1);
    let nic_bps = cfg.port_bps.saturating_mul(u64::from(cfg.planes));
    let p = FwNscc::for_link(nic_bps, rtt_ns, cfg.mtu_payload)
        .map_err(|e| err("NSCC parameters", format!("{e:?}")))?;
    let q16 = |v: u32| f64::from(v) / 65_536.0;
    Ok(NsccParams {
        eta: q16(p.eta_q16),
        fi: q16(p.fi_q16),
        fi_scale: q16(p.fi_scale_q16),
        gamma: q16(p.gamma_q16),
        max_md_jump: q16(p.max_md_jump_q16),
        target_qdelay_ns: u32::try_from(p.target_qdelay_ns).unwrap_or(u32::MAX),
        base_rtt_ns: u32::try_from(p.base_rtt_ns).unwrap_or(u32::MAX),
    })
}

/// Every flow's result as the applications know it.
fn flow_results(flows: &[Flow], state: &[FlowState], main_flows: u32) -> Vec<FlowResult> {
    flows
        .iter()
        .map(|f| {
            let s = state[f.id as usize];
            FlowResult {
                flow: *f,
                background: f.id >= main_flows,
                released: s.released,
                done: s.done,
                acked_bytes: s.acked,
                failed: s.failed,
            }
        })
        .collect()
}

/// Host `h`'s application, its QPs in INIT.
fn setup(
    host: &SimHost,
    h: u32,
    plan: &QpPlan,
    peers: &[u32],
    nscc: &NsccParams,
    src_bytes: u64,
    dst_bytes: u64,
) -> Result<App, RunError> {
    let at = |what: &str| format!("host {h}: {what}");
    let nic = host
        .nics()
        .get(h as usize)
        .ok_or_else(|| RunError::Apps(at("no NIC")))?;
    let c = Context::from_backend(nic.backend(), &DeviceConfig::default(), Role::Controller)
        .map_err(|e| err(&at("controller context"), e))?;
    let ctx = Context::from_device(c.device(), Role::Application);
    let ctl = Controller::new(&c).map_err(|e| err(&at("controller"), e))?;
    let cc = ctl
        .create_cc_profile(nscc)
        .map_err(|e| err(&at("CC profile"), e))?;
    let pd = ctx.alloc_pd().map_err(|e| err(&at("PD"), e))?;
    let scq = ctx
        .create_cq(CQ_DEPTH, None)
        .map_err(|e| err(&at("send CQ"), e))?;
    let rcq = ctx
        .create_cq(64, None)
        .map_err(|e| err(&at("receive CQ"), e))?;
    let src = pd
        .reg_mr(src_bytes.max(1) as usize, Access::ALL)
        .map_err(|e| err(&at("source MR"), e))?;
    // (a chunk at a time: a whole source's worth of scratch per host is gigabytes of fresh
    // pages at a thousand hosts)
    let mut chunk = Vec::new();
    for from in (0..src_bytes).step_by(FILL_CHUNK as usize) {
        chunk.resize((src_bytes.min(from + FILL_CHUNK) - from) as usize, 0);
        fill_pattern(h, from, &mut chunk);
        src.write(from, &chunk)
            .map_err(|e| err(&at("source fill"), e))?;
    }
    let dst = pd
        .reg_mr(dst_bytes.max(1) as usize, Access::ALL)
        .map_err(|e| err(&at("destination MR"), e))?;
    let mut conn_of = vec![u32::MAX; plan.hosts() as usize];
    let mut conns = Vec::with_capacity(peers.len());
    for (k, p) in peers.iter().enumerate() {
        let qp = pd
            .create_qp(&QpInitAttr {
                send_cq: &scq,
                recv_cq: &rcq,
                sq_depth: SQ_DEPTH,
                rq_depth: 1,
                hint: QpHint::default(),
            })
            .map_err(|e| err(&at("QP"), e))?;
        conn_of[*p as usize] = k as u32;
        conns.push(Conn {
            qp,
            peer: ConnInfo::default(),
            queue: VecDeque::new(),
        });
    }
    // INIT once every QP exists: the NIC shares a QP's initial window among its open QPs.
    for c in &mut conns {
        c.qp.modify_init(&InitAttr {
            ev_profile: 0,
            cc_profile: cc,
        })
        .map_err(|e| err(&at("INIT"), e))?;
    }
    Ok(App {
        ctx,
        _ctl: ctl,
        _pd: pd,
        scq,
        _rcq: rcq,
        src,
        dst,
        conns,
        conn_of,
        ready: VecDeque::new(),
    })
}

/// Posts the waiting messages of each connection, in release order, while its send queue
/// has room (one doorbell per connection and call).
fn post(a: &mut App, h: usize, flows: &[Flow], state: &[FlowState]) -> Result<(), RunError> {
    for _ in 0..a.ready.len() {
        let Some(k) = a.ready.pop_front() else { break };
        let c = &mut a.conns[k as usize];
        let room = c.qp.sq_free() as usize;
        let n = room.min(c.queue.len());
        if n < c.queue.len() {
            a.ready.push_back(k);
        }
        if n == 0 {
            continue;
        }
        let mut sges = Vec::with_capacity(n);
        let mut meta = Vec::with_capacity(n);
        for &(id, m) in c.queue.iter().take(n) {
            let f = flows[id as usize];
            let off = u64::from(m) * u64::from(f.msg_bytes);
            let len = (f.bytes - off).min(u64::from(f.msg_bytes)) as u32;
            sges.push([a
                .src
                .sge(off, len)
                .map_err(|e| err(&format!("host {h} SGE"), e))?]);
            meta.push((id, m, state[id as usize].dst_off + off));
        }
        let wrs: Vec<SendWr> = sges
            .iter()
            .zip(&meta)
            .map(|(sg, &(id, m, at))| SendWr {
                wr_id: u64::from(id) << 32 | u64::from(m),
                op: WriteOp::Write,
                sg_list: sg,
                remote_addr: c.peer.addr + at,
                rkey: c.peer.rkey,
                signaled: true,
                solicited: false,
                fence: false,
            })
            .collect();
        c.qp.post_send(&wrs)
            .map_err(|e| err(&format!("host {h} post"), e))?;
        c.queue.drain(..n);
    }
    Ok(())
}

/// Flow `id` failed: it and every flow after it, transitively, never complete. Returns how
/// many flows this finished.
fn fail_after(id: u32, after: &[Vec<u32>], state: &mut [FlowState]) -> usize {
    let mut n = 1;
    for &d in &after[id as usize] {
        if !state[d as usize].failed {
            state[d as usize].failed = true;
            n += fail_after(d, after, state);
        }
    }
    n
}

/// Compares every completed flow's destination range with its source (the sender's source
/// MR, read back through the driver).
fn check(apps: &[App], flows: &[Flow], state: &[FlowState]) -> Result<(u64, u64), RunError> {
    let (mut checked, mut wrong) = (0u64, 0u64);
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for f in flows {
        let s = state[f.id as usize];
        if s.done.is_none() {
            continue;
        }
        got.resize(f.bytes as usize, 0);
        want.resize(f.bytes as usize, 0);
        apps[f.dst as usize]
            .dst
            .read(s.dst_off, &mut got)
            .map_err(|e| err(&format!("host {} read", f.dst), e))?;
        apps[f.src as usize]
            .src
            .read(0, &mut want)
            .map_err(|e| err(&format!("host {} read", f.src), e))?;
        checked += f.bytes;
        if got != want {
            wrong += got.iter().zip(&want).filter(|(a, b)| a != b).count() as u64;
        }
    }
    Ok((checked, wrong))
}

#[cfg(test)]
mod tests {
    use super::fill_pattern;

    /// The running sum gives each byte its closed form, whatever chunk it is written in.
    #[test]
    fn pattern_chunks_match_the_closed_form() {
        let byte = |src: u32, o: u64| {
            let x = o.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ u64::from(src).wrapping_mul(0xD6E8_FEB8_6659_FD93);
            (x >> 56) as u8
        };
        let mut whole = vec![0u8; 1000];
        fill_pattern(3, 0, &mut whole);
        let mut parts = vec![0u8; 1000];
        for (i, c) in parts.chunks_mut(333).enumerate() {
            fill_pattern(3, i as u64 * 333, c);
        }
        assert_eq!(whole, parts);
        assert!(whole
            .iter()
            .enumerate()
            .all(|(o, b)| *b == byte(3, o as u64)));
        let mut other = vec![0u8; 1000];
        fill_pattern(4, 0, &mut other);
        assert!(whole.iter().zip(&other).filter(|(a, b)| a != b).count() > 900);
    }
}
