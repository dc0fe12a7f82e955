//! Every simulated NIC's device side (this module's [`super::SimNic`]: register
//! map, admin executor, rings, event queue) sits on the simulator's one NIC model
//! ([`crate::nic::Nic::for_driver`]: the datapath stage and the NIC image's main loop in
//! shards, the PCIe link at TLP granularity, the datapath clock, the firmware cores) on a
//! multi-plane Clos fabric ([`crate::fabric`]), in the simulator's virtual time. The contract
//! between the two halves is in [`crate::nic`]'s `driver` module docs; what this side does:
//!
//! - **Admin**: commands run the executor with the NIC's engines behind it
//!   ([`crate::nic::DriverEngine`]): QP attributes, EV and CC profiles, regions, EV denials
//!   and port state reach the engines as the driver set them. After each command every device
//!   QP with an engine QP is bound to it and to the host of its remote address.
//! - **Doorbells**: a send doorbell reads the new WQEs, checks their local SGEs against the
//!   MRs and the IOMMU (a fault completes the WQE in error and moves the QP to ERROR), keeps
//!   where the bytes are under a handle (the placement reads them from the sender's memory)
//!   and posts the work requests, as many as the NIC's send
//!   queue takes; a receive doorbell posts the receive WQEs. Then the fabric runs
//!   ([`World::clos_pump`]) event by event until every NIC is idle and the fabric empty, or
//!   the step budget of virtual time ran out; work left in the rings is posted as
//!   completions make room.
//! - **Reports**: a completion becomes a CQE when its write reached host memory (an
//!   unsignalled send's is suppressed; an error status moves the QP to ERROR with a QP_FATAL
//!   event and flushes what the NIC was not given); a placement copies the sender's bytes into
//!   the region's memory through the MR's translation; a Write-with-Immediate's receive CQE
//!   reports the bytes its message placed.
//!
//! NIC `i` of the host sits on fabric host `i * (hosts / nics)`, so two NICs are on different
//! leaves and their packets cross the spines.

use std::collections::BTreeMap;

use mrc_abi::device::admin::QpState as DevQpState;
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};
use mrc_abi::device::wqe::{RecvWqe, SEND_SIGNALED};
use mrc_abi::wire::NackReason;
use mrc_driver::sys::Iova;
use mrc_driver::zerocopy::FromBytes;

use mrc_firmware::admin::QpEngine;
use mrc_firmware::datapath::packet::{LocalBuf, SendWr};
use mrc_firmware::engine::{CompletionError, CompletionKind, QpAttrs, QpState as EngineState};

use super::datapath::completion;
use super::faults::{InjectCounters, Windows, INJECTED};
use super::state::{GatherList, RKEY_BIT};
use super::World;
use crate::core::sim::Simulator;
use crate::core::time::{Time, PS_PER_NS};
use crate::fabric::{Fabric, FabricTotals, Fault};
use crate::nic::{DriverEngine, DriverEvent, HostWrite, Nic, Placement, Transport, SHARD_QPS};
use crate::run::{Scenario, World as Net, FABRIC};

/// The fabric and timing settings of a [`super::SimHost`].
#[derive(Clone, Copy, Debug)]
pub struct ClosConfig {
    /// The fabric, the NICs' PCIe and firmware timing and the seed (its workload, failure and
    /// time limit are not used).
    pub scenario: Scenario,
    /// Most virtual time one doorbell may run the fabric before returning.
    pub step_budget_ns: u64,
    /// Test only: the NICs' datapath stages carry the planted bug
    /// ([`crate::nic::NicConfig::stage_planted_bug`]).
    pub planted_bug: bool,
    /// Virtual time one admin command takes (the NICs and the fabric run meanwhile).
    pub admin_ns: u64,
    /// Who moves virtual time. `true` (tests, `mrcctl --sim`): each doorbell and admin command
    /// runs the fabric until it is quiet (or [`ClosConfig::step_budget_ns`] ran out), so a
    /// program that only spins on its CQ sees its work done. `false` (applications inside a
    /// run, [`crate::apps`]): a doorbell hands its work requests to the NIC at the current
    /// virtual time and returns; the caller moves time with
    /// [`super::SimHost::run_until_completion`].
    pub doorbells_run: bool,
}

impl Default for ClosConfig {
    /// The tiny leaf-spine (8 hosts, radix 4) with 4 planes of 200 Gb/s, as the simulated NIC
    /// has 4 ports on 4 planes; no failure.
    fn default() -> Self {
        let mut scenario = Scenario::tiny(Transport::Mrc);
        scenario.failure = None;
        scenario.fabric.planes = 4;
        ClosConfig {
            scenario,
            step_budget_ns: 2_000_000_000,
            planted_bug: false,
            admin_ns: 1_000,
            doorbells_run: true,
        }
    }
}

/// The fabric's and the device sides' totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClosCounters {
    /// Payload bytes written into registered memory.
    pub bytes_placed: u64,
    /// Placements whose bytes could not be written (region or MR gone, DMA refused, the
    /// sender's bytes gone).
    pub place_failed: u64,
    /// EV state events the engines wrote for the host.
    pub ev_events: u64,
    /// Send WQEs handed to the NICs.
    pub posted: u64,
    /// Frames injected from outside ([`super::SimHost::inject_frame`]), by fate.
    pub injected: InjectCounters,
    /// Packets the switches trimmed (their payload cut, the headers forwarded).
    pub trims: u64,
    /// Of those, trimmed at the last hop (a leaf's port toward a host).
    pub last_hop_trims: u64,
    /// The fabric's totals (packets injected, delivered, dropped by cause, in flight).
    pub fabric: FabricTotals,
}

/// A send handed to the NIC (its device QPN, the driver's `wr_id`, its ring index, the CQE
/// it completes with, and where its bytes are in host memory).
struct Pending {
    wr_id: u64,
    index: u32,
    opcode: CqeOpcode,
    byte_len: u32,
    signaled: bool,
    gather: GatherList,
}

/// Bound of [`Clos::msg_bytes`] per NIC.
const MSG_BYTES_CAP: usize = 4096;

/// The NICs on their fabric.
pub(crate) struct Clos {
    cfg: ClosConfig,
    pub(super) sim: Simulator<Net>,
    /// Per NIC: its fabric host.
    pub(super) hosts: Vec<u32>,
    /// Per NIC: sends on the NIC by handle.
    sends: Vec<BTreeMap<u32, Pending>>,
    next_handle: Vec<u32>,
    /// Per NIC: bytes placed per (NIC QPN, message sequence number) of Writes with Immediate
    /// (and injected frames): a receive completion's length (at most [`MSG_BYTES_CAP`]
    /// entries, oldest dropped first).
    msg_bytes: Vec<BTreeMap<(u32, u16), u32>>,
    pub counters: ClosCounters,
    /// Scheduled fault windows (module `faults`).
    pub(super) windows: Windows,
    /// Random loss and corruption (ppm) of every link now.
    pub(super) impairment: (u32, u32),
    /// Payloads of injected frames by handle ([`INJECTED`] set).
    pub(super) injected: BTreeMap<u32, Vec<u8>>,
    pub(super) next_injected: u32,
    /// Scratch for the bytes of one placement.
    place_buf: Vec<u8>,
    pub(super) injected_counters: InjectCounters,
    /// Per fabric host: its NIC index (`u32::MAX`: none).
    nic_of: Vec<u32>,
    /// Scratch: device QPs of the NIC being drained that got a send completion.
    completed: Vec<u32>,
    /// Per NIC: its engines' QP errors when its QPs were last looked at.
    seen_errors: Vec<u64>,
    /// Scratch: fabric hosts with reports due.
    due: Vec<u32>,
}

impl Clos {
    /// `nics` NICs of room for `qps` QPs each on the fabric of `cfg`.
    pub fn new(cfg: ClosConfig, nics: usize, qps: usize) -> Result<Clos, String> {
        let sc = cfg.scenario;
        let mut fcfg = sc.fabric;
        fcfg.seed = sc.seed;
        let fabric = Fabric::new(fcfg, FABRIC).map_err(|e| format!("fabric: {e:?}"))?;
        let all = fabric.topology().hosts();
        if nics == 0 || nics > all as usize {
            return Err(format!("{nics} NICs on a fabric of {all} hosts"));
        }
        let stride = all / nics as u32;
        let hosts: Vec<u32> = (0..nics as u32).map(|i| i * stride).collect();
        let mut ncfg = sc.nic_config();
        ncfg.stage_planted_bug = cfg.planted_bug;
        let mut net = Vec::with_capacity(all as usize);
        let nic_of: Vec<u32> = (0..all)
            .map(|h| {
                if h % stride == 0 {
                    h / stride
                } else {
                    u32::MAX
                }
            })
            .map(|i| if (i as usize) < nics { i } else { u32::MAX })
            .collect();
        for h in 0..all {
            let room = if nic_of[h as usize] != u32::MAX {
                qps
            } else {
                SHARD_QPS
            };
            net.push(Nic::for_driver(h, ncfg, room).map_err(|e| format!("NIC {h}: {e:?}"))?);
        }
        Ok(Clos {
            cfg,
            sim: Simulator::new(Net::for_driver(fabric, net)),
            sends: (0..nics).map(|_| BTreeMap::new()).collect(),
            next_handle: vec![0; nics],
            msg_bytes: (0..nics).map(|_| BTreeMap::new()).collect(),
            counters: ClosCounters::default(),
            windows: Windows::default(),
            impairment: (fcfg.loss_ppm, fcfg.corrupt_ppm),
            injected: BTreeMap::new(),
            next_injected: 0,
            place_buf: Vec::new(),
            injected_counters: InjectCounters::default(),
            nic_of,
            hosts,
            due: Vec::new(),
            completed: Vec::new(),
            seen_errors: vec![0; nics],
        })
    }

    /// The NIC index of fabric host `h` (`None`: a host without a device side).
    fn nic_of(&self, h: u32) -> Option<usize> {
        match self.nic_of.get(h as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// The next thing due: the earliest of the next event and the next window edge (applied
    /// at its exact time), and that edge.
    fn next_due(&self) -> (Option<Time>, Option<Time>) {
        let edge = self.windows.next_edge().map(Time::from_ns);
        let next = crate::core::time::earliest(self.sim.next_event_time(), edge);
        (next, edge)
    }

    /// Virtual time one admin command takes.
    pub fn admin_ns(&self) -> u64 {
        self.cfg.admin_ns
    }

    /// Virtual time, ns.
    pub fn now_ns(&self) -> u64 {
        self.sim.now().as_ps() / PS_PER_NS
    }

    fn nic(&mut self, i: usize) -> &mut Nic {
        let h = self.hosts[i] as usize;
        &mut self.sim.handler_mut().nics[h]
    }

    /// NIC `i`'s engines, for the admin executor.
    pub fn engine(&mut self, i: usize) -> DriverEngine<'_> {
        self.nic(i).driver_engine()
    }

    /// NIC `i` takes what the admin executor changed.
    pub fn settle(&mut self, i: usize) {
        let h = self.hosts[i];
        let (w, mut s) = self.sim.handler_and_scheduler();
        w.host_input(h, &mut s, |nic, fab, s, me| {
            nic.driver_settle(s.now(), fab, s, me)
        });
    }

    /// The totals, the fabric's as of now.
    pub fn counters(&self) -> ClosCounters {
        let fab = &self.sim.handler().fabric;
        let topo = fab.topology();
        let last_hop_trims = (0..topo.hosts())
            .flat_map(|h| (0..topo.planes()).map(move |p| (h, p)))
            .filter_map(|(h, p)| fab.port_link(topo.host_port(h, p)))
            .filter_map(|l| fab.link_counters(l))
            .map(|(_, leaf)| leaf.trims)
            .sum();
        ClosCounters {
            fabric: fab.totals(),
            injected: self.injected_counters,
            trims: fab.sum_counters().trims,
            last_hop_trims,
            ..self.counters
        }
    }

    /// NIC `i`'s model (its datapath, engine and PCIe counters).
    pub fn nic_ref(&self, i: usize) -> &Nic {
        &self.sim.handler().nics[self.hosts[i] as usize]
    }

    /// Slow DMA on NIC `i` ([`Nic::set_host_delay`]).
    pub fn set_host_delay(&mut self, i: usize, extra_ns: u64) {
        if i < self.hosts.len() {
            self.nic(i).set_host_delay(extra_ns);
        }
    }

    /// A cable event: NIC `i`'s link to `plane` goes down (queued and in-flight packets are
    /// lost) or comes back, now.
    pub fn cable(&mut self, i: usize, plane: u8, up: bool) {
        if let Some(&h) = self.hosts.get(i) {
            self.cable_host(h, plane, up);
        }
    }

    /// Fabric host `h`'s link to `plane` goes down or comes back, now.
    pub(super) fn cable_host(&mut self, h: u32, plane: u8, up: bool) {
        let (w, mut s) = self.sim.handler_and_scheduler();
        let fab = &w.fabric;
        if u32::from(plane) >= fab.topology().planes() {
            return;
        }
        let port = fab.topology().host_port(h, u32::from(plane));
        if let Some(l) = fab.port_link(port) {
            let f = if up {
                Fault::LinkUp(l)
            } else {
                Fault::LinkDown(l)
            };
            let now = s.now();
            let _ = fab.schedule_fault(&mut s, now, f);
        }
    }

    /// The NICs are idle and the fabric empty.
    pub fn quiet(&self) -> bool {
        self.sim.handler().driver_quiet()
    }
}

/// The NIC QPN behind a device QP (its engine slot, 0 = none).
fn engine_qpn(q: &super::state::Qp) -> Option<u32> {
    q.engine_slot.checked_sub(1)
}

/// The device QP of `nic` in front of NIC QPN `qpn`.
fn dev_qpn(nic: &super::state::NicState, qpn: u32) -> Option<u32> {
    nic.t
        .qps
        .iter()
        .find(|(_, q)| engine_qpn(q) == Some(qpn))
        .map(|(&d, _)| d)
}

impl World {
    /// Binds every device QP of NIC `i` that has an engine QP to it and to its peer's host.
    pub(crate) fn clos_bind(&mut self, i: usize) {
        let c = &mut *self.clos;
        let binds: Vec<(u32, u32, u32)> = self.nics[i]
            .t
            .qps
            .iter()
            .filter_map(|(&dev, q)| {
                let peer = self
                    .nics
                    .iter()
                    .position(|n| n.gid == q.remote_addr)
                    .map_or(u32::MAX, |d| c.hosts[d]);
                Some((dev, engine_qpn(q)?, peer))
            })
            .collect();
        let nic = c.nic(i);
        for (dev, q, peer) in binds {
            nic.driver_bind(dev, q, peer);
        }
    }

    /// Posts the ring entries of every NIC, runs the fabric until it is quiet (or the step
    /// budget ran out), turning the NICs' reports into CQEs and placed bytes as they arrive.
    ///
    /// The budget counts from the first thing due when that is later than now (a
    /// retransmission whose exponential backoff is longer than one budget is still reached).
    pub(crate) fn clos_pump(&mut self) {
        let c = &*self.clos;
        let first = c
            .sim
            .next_event_time()
            .map_or(0, |t| t.as_ps() / PS_PER_NS)
            .max(c.now_ns());
        let end = first.saturating_add(c.cfg.step_budget_ns);
        self.clos_run(end, true);
    }

    /// A doorbell of device QP `qpn` (`None`: an admin command) of NIC `i`: with
    /// [`ClosConfig::doorbells_run`] the fabric runs ([`World::clos_pump`]); otherwise NIC
    /// `i` takes the QP's (every QP's) new ring entries now.
    pub(crate) fn clos_doorbell(&mut self, i: usize, qpn: Option<u32>) {
        match qpn {
            _ if self.clos.cfg.doorbells_run => self.clos_pump(),
            Some(q) => {
                self.clos_feed_qp(i, q);
            }
            None => {
                self.clos_feed(i);
            }
        }
    }

    /// Hands device QP `qpn` of NIC `i`'s new ring entries to the NIC model.
    fn clos_feed_qp(&mut self, i: usize, qpn: u32) -> bool {
        if self.nics[i].hold_doorbells {
            return false;
        }
        self.clos_feed_recvs(i, qpn) | self.clos_feed_sends(i, qpn)
    }

    /// Runs the fabric event time by event time until a completion reached some NIC's host
    /// memory as a CQE (true; the NICs that got completions took the ring entries that then
    /// fit) or virtual time reached `end_ns` (false). What reached host memory meanwhile
    /// (placed payloads, EV events) is handled as it arrives.
    pub(crate) fn clos_until_completion(&mut self, end_ns: u64) -> bool {
        let end = Time::from_ns(end_ns);
        loop {
            let c = &mut *self.clos;
            let (next, edge) = c.next_due();
            let t = match next.filter(|t| *t <= end) {
                Some(t) => t,
                None => {
                    c.sim.run_until(end);
                    self.now_ns = self.now_ns.max(c.now_ns());
                    return self.clos_drain_due();
                }
            };
            c.sim.run_until(t);
            self.now_ns = self.now_ns.max(c.now_ns());
            let done = self.clos_drain_due();
            if edge == Some(t) {
                self.apply_edges(t.as_ps() / PS_PER_NS);
            }
            if done {
                return true;
            }
        }
    }

    /// Drains the NICs with a report in host memory by now (those the fabric's events noted,
    /// [`crate::run::World::take_due`]); those that got a completion take the ring entries
    /// that now fit. True if any completion was handled.
    fn clos_drain_due(&mut self) -> bool {
        let c = &mut *self.clos;
        let mut due = std::mem::take(&mut c.due);
        c.sim.handler_mut().take_due(&mut due);
        // (host order, as a scan over the NICs would take them)
        due.sort_unstable();
        let mut any = false;
        for &h in &due {
            let Some(i) = self.clos.nic_of(h) else {
                continue;
            };
            if self.clos_drain(i) {
                any = true;
                // (only a completed QP has room it did not have)
                let done = std::mem::take(&mut self.clos.completed);
                for &q in &done {
                    self.clos_feed_qp(i, q);
                }
                self.clos.completed = done;
                self.clos.completed.clear();
            }
        }
        self.clos.due = due;
        any
    }

    /// Like [`World::clos_pump`], but runs to `t_ns` whether or not the fabric is quiet.
    pub(crate) fn clos_advance(&mut self, t_ns: u64) {
        self.clos_run(t_ns, false);
    }

    fn clos_run(&mut self, end_ns: u64, until_quiet: bool) {
        let end = Time::from_ns(end_ns);
        loop {
            let mut fed = false;
            for i in 0..self.nics.len() {
                fed |= self.clos_feed(i);
            }
            let c = &mut *self.clos;
            if until_quiet && !fed && c.quiet() {
                break;
            }
            let (next, edge) = c.next_due();
            let Some(t) = next.filter(|t| *t <= end) else {
                if !until_quiet {
                    c.sim.run_until(end);
                }
                break;
            };
            c.sim.run_until(t);
            self.now_ns = self.now_ns.max(c.now_ns());
            for i in 0..self.nics.len() {
                self.clos_drain(i);
            }
            if edge == Some(t) {
                self.apply_edges(t.as_ps() / PS_PER_NS);
            }
        }
        self.now_ns = self.now_ns.max(self.clos.now_ns());
        for i in 0..self.nics.len() {
            self.clos_drain(i);
        }
    }

    /// Hands NIC `i`'s new ring entries to its NIC model. True if any went.
    fn clos_feed(&mut self, i: usize) -> bool {
        if self.nics[i].hold_doorbells {
            return false;
        }
        let mut any = false;
        let qpns: Vec<u32> = self.nics[i].t.qps.keys().copied().collect();
        for qpn in qpns {
            any |= self.clos_feed_recvs(i, qpn);
            any |= self.clos_feed_sends(i, qpn);
        }
        any
    }

    fn clos_feed_recvs(&mut self, i: usize, qpn: u32) -> bool {
        let mut any = false;
        loop {
            let Some(q) = self.nics[i].t.qps.get(&qpn).copied() else {
                return any;
            };
            let Some(e) = engine_qpn(&q) else { return any };
            if !matches!(q.state, DevQpState::Rtr | DevQpState::Rts) || q.rq_cons == q.rq_prod {
                return any;
            }
            let c = &mut *self.clos;
            if !c.nic(i).driver_post_recv(e, u64::from(q.rq_cons)) {
                return any;
            }
            if let Some(p) = self.nics[i].t.qps.get_mut(&qpn) {
                p.rq_cons = p.rq_cons.wrapping_add(1);
            }
            any = true;
        }
    }

    fn clos_feed_sends(&mut self, i: usize, qpn: u32) -> bool {
        let Some(q) = self.nics[i].t.qps.get(&qpn).copied() else {
            return false;
        };
        let Some(e) = engine_qpn(&q) else {
            return false;
        };
        if q.state != DevQpState::Rts || q.sq_cons == q.sq_prod {
            return false;
        }
        let room = self.clos.nic(i).driver_room(e);
        let now = self.now_ns;
        let mut batch = Vec::new();
        let mut index = q.sq_cons;
        while index != q.sq_prod && batch.len() < room {
            let (wr_id, req) = self.nics[i].read_send_wqe(&q, index);
            let gathered = match &req {
                Some(r) => self.nics[i].gather_list(&q, r),
                None => Err((CqeStatus::LocalQpOperation, 0)),
            };
            self.nics[i].counters.send_wqes += 1;
            let (r, data) = match (req, gathered) {
                (Some(r), Ok(d)) => (r, d),
                (_, res) => {
                    let (status, syndrome) = res.err().unwrap_or((CqeStatus::LocalQpOperation, 0));
                    if let Some(p) = self.nics[i].t.qps.get_mut(&qpn) {
                        p.sq_cons = index.wrapping_add(1);
                    }
                    self.clos_post(i, e, &batch);
                    let mut c = completion(wr_id, status, CqeOpcode::Write, 0, qpn, index);
                    c.syndrome = syndrome;
                    self.nics[i].post_cqe(q.send_cq, &c, now);
                    self.clos_error(i, qpn, status, syndrome);
                    return true;
                }
            };
            let c = &mut *self.clos;
            let handle = c.next_handle[i] & !INJECTED;
            c.next_handle[i] = handle.wrapping_add(1);
            batch.push(SendWr {
                wr_id: u64::from(handle),
                local: LocalBuf { handle, offset: 0 },
                remote_va: r.remote_va,
                rkey: r.rkey,
                len: data.len(),
                imm: r.imm,
                signaled: true,
            });
            c.sends[i].insert(
                handle,
                Pending {
                    wr_id,
                    index,
                    opcode: if r.imm.is_some() {
                        CqeOpcode::WriteImm
                    } else {
                        CqeOpcode::Write
                    },
                    byte_len: data.len(),
                    signaled: r.flags & SEND_SIGNALED != 0,
                    gather: data,
                },
            );
            index = index.wrapping_add(1);
        }
        if let Some(p) = self.nics[i].t.qps.get_mut(&qpn) {
            p.sq_cons = index;
        }
        self.clos_post(i, e, &batch);
        !batch.is_empty()
    }

    /// One doorbell's work requests of NIC QP `e` on NIC `i`.
    fn clos_post(&mut self, i: usize, e: u32, batch: &[SendWr]) {
        let c = &mut *self.clos;
        if batch.is_empty() {
            return;
        }
        c.counters.posted += batch.len() as u64;
        let h = c.hosts[i];
        let (w, mut s) = c.sim.handler_and_scheduler();
        w.host_input(h, &mut s, |nic, fab, s, me| {
            nic.driver_post(s.now(), e, batch, fab, s, me)
        });
    }

    /// Acts on what reached NIC `i`'s host memory by now; then a QP whose engine QP failed on
    /// its own (a responder's fatal error: bad rkey, range, missing receive) enters ERROR.
    /// True if a completion was handled.
    fn clos_drain(&mut self, i: usize) -> bool {
        let done = self.clos_reports(i);
        let c = &mut *self.clos;
        let nic = c.nic(i);
        if nic.driver_reports() > 0 {
            // (an error completion on its way names the cause first)
            return done;
        }
        // Only when an engine QP entered ERROR since the last look.
        let errors = nic.engine_qp_errors();
        if c.seen_errors.get(i) == Some(&errors) {
            return done;
        }
        if let Some(e) = c.seen_errors.get_mut(i) {
            *e = errors;
        }
        let nic = c.nic(i);
        let failed: Vec<u32> = self.nics[i]
            .t
            .qps
            .iter()
            .filter(|(_, q)| !matches!(q.state, DevQpState::Error | DevQpState::Reset))
            .filter(|(_, q)| {
                engine_qpn(q).and_then(|e| nic.fw_qp(e)).map(|v| v.state)
                    == Some(EngineState::Error)
            })
            .map(|(&d, _)| d)
            .collect();
        for dev in failed {
            self.clos_error(i, dev, CqeStatus::LocalQpOperation, 0);
        }
        done
    }

    /// Handles NIC `i`'s reports that reached host memory by now. True if any was a
    /// completion.
    fn clos_reports(&mut self, i: usize) -> bool {
        let now = self.now_ns;
        let mut done_any = false;
        loop {
            let c = &mut *self.clos;
            let at = c.sim.now();
            let Some(e) = c.nic(i).driver_poll(at) else {
                return done_any;
            };
            match e {
                DriverEvent::Wrote(HostWrite::ProbeResult {
                    qpn,
                    ev,
                    probe_id,
                    rtt_ns,
                }) => {
                    let n = &mut self.nics[i];
                    if let Some(d) = dev_qpn(n, qpn) {
                        let event = n.t.probe_result_event(d, ev, probe_id, rtt_ns);
                        n.post_event(event, now);
                    }
                }
                DriverEvent::Wrote(HostWrite::EvEvent {
                    qpn,
                    ev,
                    old,
                    new,
                    reason,
                }) => {
                    c.counters.ev_events += 1;
                    // The event record the image's loop writes for it (the same rule: the
                    // QP's EV profile's event mask), on the device QPN the host knows.
                    let n = &mut self.nics[i];
                    if let Some(event) = dev_qpn(n, qpn).and_then(|d| {
                        n.t.ev_state_event(d, ev, old as u8, new as u8, reason.code())
                    }) {
                        n.post_event(event, now);
                    }
                }
                DriverEvent::Placed(p) => self.clos_place(i, p),
                DriverEvent::Wrote(HostWrite::Completion(done)) => {
                    done_any = true;
                    let Some(dev) = dev_qpn(&self.nics[i], done.qpn) else {
                        continue;
                    };
                    let Some(q) = self.nics[i].t.qps.get(&dev).copied() else {
                        continue;
                    };
                    let status = match done.status {
                        Ok(()) => (CqeStatus::Success, 0),
                        Err(err) => status_of(err),
                    };
                    match done.kind {
                        CompletionKind::Send => {
                            let c = &mut *self.clos;
                            let Some(p) = c.sends[i].remove(&(done.wr_id as u32)) else {
                                continue;
                            };
                            if !c.cfg.doorbells_run && c.completed.last() != Some(&dev) {
                                c.completed.push(dev);
                            }
                            if status.0 == CqeStatus::Success && !p.signaled {
                                continue;
                            }
                            let mut e =
                                completion(p.wr_id, status.0, p.opcode, p.byte_len, dev, p.index);
                            e.syndrome = status.1;
                            self.nics[i].post_cqe(q.send_cq, &e, now);
                        }
                        CompletionKind::RecvImm { .. } | CompletionKind::Recv => {
                            let (imm, byte_len) = match done.kind {
                                CompletionKind::RecvImm { imm, msn } => {
                                    let c = &mut *self.clos;
                                    let m = &mut c.msg_bytes[i];
                                    let len = m.remove(&(done.qpn, msn)).unwrap_or(0);
                                    // Earlier messages of this QP are complete too.
                                    m.retain(|k, _| {
                                        k.0 != done.qpn || (msn.wrapping_sub(k.1) as i16) < 0
                                    });
                                    (imm, len)
                                }
                                _ => (0, 0),
                            };
                            let index = done.wr_id as u32;
                            let slot = u64::from(index & ((1 << q.rq_log2) - 1));
                            let n = &mut self.nics[i];
                            let mut raw = [0u8; 32];
                            let wr_id = n
                                .dev
                                .dma_read(Iova(q.rq_base + slot * 32), &mut raw)
                                .ok()
                                .and_then(|()| RecvWqe::read_from_bytes(&raw).ok())
                                .and_then(|w| w.decode().ok())
                                .unwrap_or(0);
                            let mut e = completion(
                                wr_id,
                                status.0,
                                CqeOpcode::RecvWriteImm,
                                byte_len,
                                dev,
                                index,
                            );
                            e.imm = Some(imm);
                            e.syndrome = status.1;
                            n.post_cqe(q.recv_cq, &e, now);
                            if let Some(p) = n.t.qps.get_mut(&dev) {
                                p.rq_psn = (p.rq_psn + 1) & 0xFF_FFFF;
                            }
                        }
                    }
                    if status.0 != CqeStatus::Success && status.0 != CqeStatus::WrFlushed {
                        self.clos_error(i, dev, status.0, status.1);
                    }
                }
            }
        }
    }

    /// Writes the bytes a placement at NIC `i` names into the region's memory.
    fn clos_place(&mut self, i: usize, p: Placement) {
        let Placement {
            qpn,
            src_host,
            local,
            msn,
            slot,
            offset,
            len,
        } = p;
        let c = &mut *self.clos;
        let region = c.nic(i).driver_region(qpn, slot);
        // The bytes: an injected frame's payload, or the sender's memory read by DMA now (the
        // application leaves a send's buffer alone until it completes).
        let mut buf = std::mem::take(&mut c.place_buf);
        buf.clear();
        let (ok, with_imm) = if local.handle & INJECTED != 0 {
            let bytes = c.injected.get(&local.handle).and_then(|d| {
                let from = usize::try_from(local.offset).ok()?;
                d.get(from..from.checked_add(len as usize)?)
            });
            (bytes.map(|b| buf.extend_from_slice(b)).is_some(), true)
        } else {
            let src = c.nic_of(src_host);
            buf.resize(len as usize, 0);
            match src.and_then(|s| Some((s, c.sends[s].get(&local.handle)?))) {
                Some((s, p)) => (
                    p.gather.read(&self.nics[s].dev, local.offset, &mut buf),
                    p.opcode == CqeOpcode::WriteImm,
                ),
                None => (false, false),
            }
        };
        // A receive completion's length: only a Write with Immediate ends in one.
        if with_imm {
            let m = &mut c.msg_bytes[i];
            *m.entry((qpn, msn)).or_default() += len;
            if m.len() > MSG_BYTES_CAP {
                m.pop_first();
            }
        }
        let n = &mut self.nics[i];
        let target = region.and_then(|r| {
            n.t.mrs
                .get(&(r.rkey & !RKEY_BIT))
                .and_then(|mr| mr.translate(r.base_va.wrapping_add(offset), u64::from(len)))
        });
        match target {
            Some(iova) if ok && n.dev.dma_write(Iova(iova), &buf).is_ok() => {
                n.counters.bytes_placed += u64::from(len);
                c.counters.bytes_placed += u64::from(len);
            }
            _ => c.counters.place_failed += 1,
        }
        c.place_buf = buf;
    }

    /// Device QP `qpn` of NIC `i` enters ERROR: a QP_FATAL event, its engine QP to ERROR (the
    /// NIC flushes what it holds), and the ring entries the NIC was not given flushed.
    pub(crate) fn clos_error(&mut self, i: usize, qpn: u32, status: CqeStatus, syndrome: u32) {
        let now = self.now_ns;
        let n = &mut self.nics[i];
        let e = n.t.qps.get(&qpn).and_then(engine_qpn);
        if !n.enter_error(qpn, status, syndrome, now) {
            return;
        }
        if let Some(e) = e {
            let c = &mut *self.clos;
            let _ = c
                .engine(i)
                .modify_qp(e, EngineState::Error, &QpAttrs::default(), now);
            c.settle(i);
        }
        self.flush(i, qpn, now);
    }

    /// A cable of NIC `i` to `plane` was pulled (`up == false`) or plugged back.
    pub(crate) fn clos_cable(&mut self, i: usize, plane: u8, up: bool) {
        self.clos.cable(i, plane, up);
    }

    /// NIC `i`'s port on `plane` became (non-)operational: its engines learn it.
    pub(crate) fn clos_plane(&mut self, i: usize, plane: u8, up: bool) {
        let now = self.now_ns;
        self.clos.engine(i).plane(now, plane, up);
        self.clos.settle(i);
    }
}

/// The CQE status and syndrome of an engine completion error.
fn status_of(e: CompletionError) -> (CqeStatus, u32) {
    match e {
        CompletionError::RetryExceeded => (CqeStatus::RetryExceeded, 0),
        CompletionError::Flushed => (CqeStatus::WrFlushed, 0),
        CompletionError::LocalQpError(r) => (CqeStatus::LocalQpOperation, r as u32),
        CompletionError::RemoteNack(r) => (
            match r {
                NackReason::RemoteAccess => CqeStatus::RemoteAccess,
                NackReason::Length => CqeStatus::RemoteLength,
                NackReason::NoRecvBuffer => CqeStatus::RemoteNoRecvBuffer,
                _ => CqeStatus::RemoteInvalidRequest,
            },
            r as u32,
        ),
    }
}
