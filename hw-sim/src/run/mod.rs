//! Runs: a scenario (fabric + NICs + workload + faults) driven to completion, and its report.
//!
//! A [`Scenario`] says the fabric, the transport, the permutation workload (every host writes
//! `bytes_per_host` to one partner, all starting at t = 0) and an optional T0-T1 link failure
//! on plane 0. [`run`] builds a [`World`] (the fabric as component 0, the NICs as component 1),
//! runs it until every flow completed or `time_limit`, and returns a [`RunReport`]. Everything
//! is seeded from [`Scenario::seed`]: same scenario, same report, bit for bit.
//!
//! This is the first increment of issue 5: two transports (`mrc`, `mrc-1ev`), one workload
//! (permutation), one fault (a T0-T1 link down), built-in scenarios only ([`Scenario::default_for`],
//! [`Scenario::tiny`]). Not modelled: RoCE / spray-oblivious, PCIe/DMA and host timing, firmware
//! core cycle costs, the datapath models' cycle counts.
//!
//! *Ideal* completion = `bytes_per_host` / the NIC line rate (all planes) + the unloaded base
//! RTT. *Stall* = the longest time a sending QP with outstanding data saw no new byte
//! acknowledged.

mod report;

pub use report::{format_table, RunReport};

use crate::core::rng::Rng;
use crate::core::sim::{ComponentId, Event, Handler, Scheduler, Simulator};
use crate::core::time::{Duration, Time, PS_PER_S};
use crate::fabric::{ev as fev, ConfigError, Fabric, FabricConfig, Fault, LinkId, Shape};
use crate::nic::{ev as nev, Nic, NicConfig, NicError, Transport, HEADER_BYTES};
use crate::workload::Workload;

const FABRIC: ComponentId = ComponentId(0);
const NICS: ComponentId = ComponentId(1);

/// A T0-T1 link failure on plane 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFailure {
    /// When the link goes down.
    pub at: Time,
    /// Which T0-T1 link of plane 0 (index in link order among tier-1 links: leaf 0 to spine 0
    /// is 0).
    pub t1_link: u32,
}

/// One run's setup.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// The fabric (its `planes` <= 4, host link rate = one NIC port).
    pub fabric: FabricConfig,
    /// Transport.
    pub transport: Transport,
    /// What the hosts move.
    pub workload: Workload,
    /// Payload bytes per full packet.
    pub mtu_payload: u32,
    /// Engine loss inference threshold (later transmissions acknowledged before a SACK hole
    /// counts as lost). Spraying over many paths reorders: keep it near the window in packets.
    pub reorder_tx: u32,
    /// Engine ACK timeout exponent.
    pub timeout_exp: u8,
    /// Engine retry count.
    pub retry_cnt: u8,
    /// A link failure, or none.
    pub failure: Option<LinkFailure>,
    /// Stop here even if flows are unfinished.
    pub time_limit: Time,
    /// Seed of the permutation, the fabric and the NICs.
    pub seed: u64,
}

impl Scenario {
    /// The default run's scenario for `transport`: 64 hosts, 4 planes of 200 Gb/s (800G NICs),
    /// a leaf-spine per plane (radix 16: 8 leaves, 8 spines), 1 us links, 16 MiB per host in a
    /// permutation, leaf 0 - spine 0 of plane 0 failing at 40 us.
    pub fn default_for(transport: Transport) -> Scenario {
        let mut fabric = FabricConfig::htsim_reference(Shape::LeafSpine {
            hosts: 64,
            radix: 16,
        });
        fabric.planes = 4;
        fabric.host_link_bps = 200_000_000_000;
        fabric.t1_link_bps = 200_000_000_000;
        fabric.t2_link_bps = 200_000_000_000;
        fabric.propagation = Duration::from_ns(500);
        fabric.policy[0].ecn_last_hop = false;
        Scenario {
            fabric,
            transport,
            workload: Workload::Permutation {
                bytes_per_host: 16 << 20,
                msg_bytes: 256 << 10,
            },
            mtu_payload: 4096,
            reorder_tx: 32,
            timeout_exp: 5,
            retry_cnt: 24,
            failure: Some(LinkFailure {
                at: Time::from_us(40),
                t1_link: 0,
            }),
            time_limit: Time::from_secs(4),
            seed: 1,
        }
    }

    /// A tiny scenario for tests: 8 hosts, 2 planes, radix 4 leaf-spine, 256 KiB per host.
    pub fn tiny(transport: Transport) -> Scenario {
        let mut s = Scenario::default_for(transport);
        s.fabric.shape = Shape::LeafSpine { hosts: 8, radix: 4 };
        s.fabric.planes = 2;
        s.workload = Workload::Permutation {
            bytes_per_host: 256 << 10,
            msg_bytes: 64 << 10,
        };
        s.failure = Some(LinkFailure {
            at: Time::from_us(5),
            t1_link: 0,
        });
        s
    }

    /// NIC line rate: all planes.
    pub fn nic_bps(&self) -> u64 {
        self.fabric.host_link_bps * u64::from(self.fabric.planes)
    }

    /// Unloaded round trip between hosts on different leaves: a full data packet out over four
    /// links (store and forward) and an ACK back.
    pub fn base_rtt(&self) -> Duration {
        let hops = match self.fabric.shape {
            Shape::LeafSpine { .. } => 4,
            Shape::FatTree { .. } => 6,
        };
        let ser = |bytes: u64| Duration::from_ps(bytes * 8 * PS_PER_S / self.fabric.host_link_bps);
        let one_way = self
            .fabric
            .propagation
            .saturating_add(self.fabric.switching_latency);
        one_way
            .saturating_mul(2 * hops)
            .saturating_add(ser(u64::from(self.mtu_payload + HEADER_BYTES)).saturating_mul(hops))
            .saturating_add(ser(u64::from(HEADER_BYTES)).saturating_mul(hops))
    }

    /// Ideal completion: the bytes the busiest NIC must send at NIC line rate plus the base
    /// RTT.
    pub fn ideal(&self) -> Duration {
        let hosts = self.fabric.shape.hosts();
        // Payload bytes at line rate (headers are overhead the transport pays).
        Duration::from_ps(
            (u128::from(self.workload.busiest_nic_bytes(hosts)) * 8 * u128::from(PS_PER_S)
                / u128::from(self.nic_bps())) as u64,
        )
        .saturating_add(self.base_rtt())
    }
}

/// Why a run could not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    /// Bad fabric configuration.
    Fabric(ConfigError),
    /// A NIC refused its setup.
    Nic(NicError),
    /// The failure names a link the fabric does not have.
    NoSuchLink(u32),
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RunError::Fabric(e) => write!(f, "{e}"),
            RunError::Nic(e) => write!(f, "{e}"),
            RunError::NoSuchLink(l) => write!(f, "failure: no T0-T1 link {l} on plane 0"),
        }
    }
}

impl std::error::Error for RunError {}

/// The simulated system: the fabric and every NIC.
pub struct World {
    /// The fabric.
    pub fabric: Fabric,
    /// One NIC per host.
    pub nics: Vec<Nic>,
    /// Events the world could not route.
    pub bad_events: u64,
}

impl Handler for World {
    fn handle(&mut self, now: Time, ev: Event, s: &mut Scheduler<'_>) {
        match ev.target {
            FABRIC => {
                self.fabric.handle(ev, s);
                while let Some(d) = self.fabric.poll_delivery() {
                    let hdr = self
                        .nics
                        .get(d.packet.src as usize)
                        .and_then(|n| n.side_lookup(d.packet.transport_tag));
                    match self.nics.get_mut(d.host as usize) {
                        Some(n) => n.receive(now, &d.packet, hdr, &mut self.fabric, s, NICS),
                        None => self.bad_events += 1,
                    }
                }
            }
            NICS => {
                let Some(nic) = self.nics.get_mut(ev.data as u32 as usize) else {
                    self.bad_events += 1;
                    return;
                };
                match ev.kind {
                    nev::START => nic.start(now, &mut self.fabric, s, NICS),
                    nev::PUMP => nic.on_pump(now, &mut self.fabric, s, NICS),
                    nev::TIMER => nic.on_timer(now, &mut self.fabric, s, NICS),
                    _ => self.bad_events += 1,
                }
            }
            _ => self.bad_events += 1,
        }
    }
}

/// A random permutation without fixed points (every host sends to another host).
pub fn permutation(hosts: u32, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed ^ 0x7065_726d);
    loop {
        let mut p: Vec<u32> = (0..hosts).collect();
        for i in (1..p.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        if hosts < 2 || p.iter().enumerate().all(|(i, d)| i as u32 != *d) {
            return p;
        }
    }
}

/// The link id of T0-T1 link `index` of plane 0.
fn t1_link(fabric: &Fabric, index: u32) -> Option<LinkId> {
    let mut n = 0u32;
    let mut id = 0u32;
    let mut found = None;
    fabric.topology().for_each_link(|l| {
        // Plane 0's links come first in link order.
        if found.is_none() && l.tier == 1 {
            if n == index {
                found = Some(LinkId(id));
            }
            n += 1;
        }
        id += 1;
    });
    found
}

/// Builds the world for `sc` with its events scheduled.
///
/// # Errors
/// [`RunError`] when the fabric, a NIC or the failure is invalid.
pub fn build(sc: &Scenario) -> Result<Simulator<World>, RunError> {
    let mut fcfg = sc.fabric;
    fcfg.seed = sc.seed;
    let fabric = Fabric::new(fcfg, FABRIC).map_err(RunError::Fabric)?;
    let hosts = fabric.topology().hosts();
    let Workload::Permutation {
        bytes_per_host,
        msg_bytes,
    } = sc.workload;
    let perm = permutation(hosts, sc.seed);
    let mut inv = vec![0u32; hosts as usize];
    for (i, d) in perm.iter().enumerate() {
        inv[*d as usize] = i as u32;
    }
    let ncfg = NicConfig {
        transport: sc.transport,
        planes: sc.fabric.planes.min(255) as u8,
        port_bps: sc.fabric.host_link_bps,
        mtu_payload: sc.mtu_payload,
        base_rtt: sc.base_rtt(),
        total_bytes: bytes_per_host,
        msg_bytes,
        reorder_tx: sc.reorder_tx,
        timeout_exp: sc.timeout_exp,
        retry_cnt: sc.retry_cnt,
        seed: sc.seed,
    };
    let mut nics = Vec::with_capacity(hosts as usize);
    for h in 0..hosts {
        nics.push(Nic::new(h, perm[h as usize], inv[h as usize], ncfg).map_err(RunError::Nic)?);
    }
    let failure = match sc.failure {
        Some(f) => Some((
            f.at,
            t1_link(&fabric, f.t1_link).ok_or(RunError::NoSuchLink(f.t1_link))?,
        )),
        None => None,
    };
    let mut sim = Simulator::new(World {
        fabric,
        nics,
        bad_events: 0,
    });
    for h in 0..hosts {
        // Times are >= now (0): cannot fail.
        let _ = sim.schedule(Time::ZERO, NICS, nev::START, u64::from(h));
    }
    if let Some((at, link)) = failure {
        let _ = sim.schedule(at, FABRIC, fev::FAULT, Fault::LinkDown(link).encode());
    }
    Ok(sim)
}

/// Runs `sc` until every flow completed (or `time_limit`) and reports.
///
/// # Errors
/// [`RunError`] when the scenario is invalid.
pub fn run(sc: &Scenario) -> Result<RunReport, RunError> {
    let mut sim = build(sc)?;
    let step = Duration::from_us(10);
    loop {
        let next = sim.now().saturating_add(step).min(sc.time_limit);
        sim.run_until(next);
        let w = sim.handler();
        if w.nics.iter().all(|n| n.done_at().is_some() || n.failed()) || sim.now() >= sc.time_limit
        {
            break;
        }
    }
    Ok(RunReport::collect(sc, &sim))
}

/// Which transmissions a run's [`Observer`] sees through [`Observer::on_tx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tap {
    /// None (the run goes at full speed).
    Off,
    /// Every packet every NIC sends.
    All,
    /// Packets this host sends or that are sent to it.
    Host(u32),
}

/// Watches a run without changing it: periodic samples of the world, and optionally every
/// packet the NICs send (with the headers from their side tables).
pub trait Observer {
    /// Simulated time between samples (> 0).
    fn sample_every(&self) -> Duration;
    /// A sample at `now` (a multiple of [`Observer::sample_every`], or the end of the run).
    fn on_sample(&mut self, now: Time, world: &World);
    /// The end of the run at `now` (every flow done or the time limit); by default one last
    /// sample.
    fn on_finish(&mut self, now: Time, world: &World) {
        self.on_sample(now, world);
    }
    /// Which transmissions to tap. Tapping runs the simulator one event at a time and looks at
    /// the senders' side tables after each: slower, same results.
    fn tap(&self) -> Tap {
        Tap::Off
    }
    /// Host `src` sent `pkt` (its MRC headers) to `dst` at `now`.
    fn on_tx(&mut self, now: Time, world: &World, src: u32, dst: u32, pkt: &TxPacket) {
        let _ = (now, world, src, dst, pkt);
    }
}

/// Like [`run`], calling `obs` as the run goes; the report is the one [`run`] gives (the run
/// stops at the same 10 us boundary).
///
/// # Errors
/// [`RunError`] when the scenario is invalid.
pub fn run_observed(sc: &Scenario, obs: &mut impl Observer) -> Result<RunReport, RunError> {
    let mut sim = build(sc)?;
    let check = Duration::from_us(10);
    let every = obs.sample_every().max(Duration::from_ps(1));
    let tap = obs.tap();
    let senders: Vec<u32> = {
        let w = sim.handler();
        match tap {
            Tap::Off => Vec::new(),
            Tap::All => (0..w.nics.len() as u32).collect(),
            Tap::Host(h) => w
                .nics
                .iter()
                .filter(|n| {
                    let (to, from) = n.peers();
                    n.host() == h || to == h || from == h
                })
                .map(Nic::host)
                .collect(),
        }
    };
    // Next side-table tag to look for, per tapped sender (tags start at 1).
    let mut next_tag = vec![1u64; senders.len()];
    let mut next_sample = Time::ZERO.saturating_add(every);
    let mut next_check = Time::ZERO.saturating_add(check);
    let mut last_sample = Time::ZERO;
    loop {
        let until = next_sample.min(next_check).min(sc.time_limit);
        if senders.is_empty() {
            sim.run_until(until);
        } else {
            while sim.next_event_time().is_some_and(|t| t <= until) {
                sim.run(until, 1);
                let now = sim.now();
                let w = sim.handler();
                for (i, h) in senders.iter().enumerate() {
                    let Some(nic) = w.nics.get(*h as usize) else {
                        continue;
                    };
                    while let Some(p) = nic.side_lookup(next_tag[i]) {
                        next_tag[i] += 1;
                        let (to, from) = nic.peers();
                        let dst = if p.src_qpn == nic.send_qpn() {
                            to
                        } else {
                            from
                        };
                        if let Tap::Host(x) = tap {
                            if *h != x && dst != x {
                                continue;
                            }
                        }
                        obs.on_tx(now, w, *h, dst, &p);
                    }
                }
            }
            sim.run_until(until);
        }
        let now = sim.now();
        if now >= next_sample {
            obs.on_sample(now, sim.handler());
            last_sample = now;
            next_sample = next_sample.saturating_add(every);
        }
        if now >= next_check || now >= sc.time_limit {
            next_check = next_check.saturating_add(check);
            let w = sim.handler();
            if w.nics.iter().all(|n| n.done_at().is_some() || n.failed()) || now >= sc.time_limit {
                break;
            }
        }
    }
    if sim.now() > last_sample {
        obs.on_finish(sim.now(), sim.handler());
    }
    Ok(RunReport::collect(sc, &sim))
}

use mrc_firmware::engine::TxPacket;
