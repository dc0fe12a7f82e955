//! Runs: a scenario (fabric + NICs + workload + faults) driven to completion, and its report.
//!
//! A [`Scenario`] says the fabric, the transport, the workload ([`Workload`]: permutation,
//! all-to-all, ring all-reduce, incast), optional background load, the NICs' PCIe timing and an
//! optional T0-T1 link failure on plane 0. [`run`] builds a [`World`] (the fabric as component
//! 0, the NICs as component 1, and the flow list: a flow's completion releases the flows that
//! wait for it, on whichever NIC), runs it until every flow of the workload completed (or
//! failed) or `time_limit`, and returns a [`RunReport`]. Everything is seeded from
//! [`Scenario::seed`]: same scenario, same report, bit for bit. [`parallel`] runs the same world
//! partitioned over several threads, with the same report.
//!
//! Built in: [`Scenario::default_for`] (all-to-all), [`Scenario::permutation_for`],
//! [`Scenario::ring_all_reduce_for`], [`Scenario::tiny`]. The MRC transports (`mrc`, `mrc-1ev`,
//! `spray-oblivious`) run [`Nic`]s; `roce-ecmp` runs [`RoceNic`]s on the scenario's fabric made
//! lossless ([`roce::lossless`]: PFC on). The MRC NICs' datapath blocks run at the RTL's cycle
//! counts (`nic` module docs); not modelled: the datapath's per-packet work without an RTL block
//! (ACK application, placement); for RoCE the host interface (PCIe) and firmware cores.
//!
//! *Ideal* completion = the bytes the busiest NIC must move / the NIC line rate (all planes) +
//! the unloaded base RTT. *Stall* = the longest time a QP with outstanding data saw no new byte
//! acknowledged. FCT = a flow's completion minus its release (its host posting it).

pub mod parallel;
pub mod perf;
mod report;

pub use report::{format_table, RunReport};

use crate::core::sim::{ComponentId, Event, Handler, Msg, Scheduler, Simulator};
use crate::core::time::{Duration, Time, PS_PER_S};
use crate::fabric::{
    ev as fev, ConfigError, Crossing, Fabric, FabricConfig, Fault, LinkId, Owner, Shape,
};
use crate::nic::roce::{self, RoceConfig, RoceError, RoceNic};
use crate::nic::{
    ev as nev, DatapathLevel, DatapathLevelConfig, FirmwareConfig, Nic, NicConfig, NicError,
    PcieConfig, QpPlan, Transport, HEADER_BYTES,
};
use crate::workload::{Background, Flow, FlowResult, Workload, WorkloadError};
use mrc_abi::wire::EvFormat;

/// The fabric's component id in a [`World`].
pub const FABRIC: ComponentId = ComponentId(0);
/// The NICs' component id in a [`World`] (an event's `data` names the host).
pub const NICS: ComponentId = ComponentId(1);

/// A T0-T1 link failure on plane 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFailure {
    /// When the link goes down.
    pub at: Time,
    /// Which T0-T1 link of plane 0 (index in link order among tier-1 links: leaf 0 to spine 0
    /// is 0).
    pub t1_link: u32,
}

/// What happens to a transceiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransceiverEvent {
    /// The module is pulled from its cage.
    Pull,
    /// The module raises loss of signal on its first lane (the fiber went dark).
    Los,
}

/// A transceiver event: port `port` (= plane) of NIC `nic` loses its module or its signal at
/// `at`. The host link of that port goes down in the fabric at the same time; the NIC's
/// firmware learns of it only from its board (the image's port monitor: cage pins, then
/// CMIS over I2C) and takes the port down, retiring the plane's EVs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransceiverFault {
    /// When.
    pub at: Time,
    /// Which NIC (host).
    pub nic: u32,
    /// Which of its ports.
    pub port: u32,
    /// What happens.
    pub event: TransceiverEvent,
}

impl TransceiverFault {
    /// The NIC event's `data`: the host in the low word (the NICs' routing), port and event
    /// above.
    fn encode(self) -> u64 {
        u64::from(self.nic)
            | u64::from(self.port & 0xFF) << 32
            | u64::from(self.event == TransceiverEvent::Pull) << 40
    }
}

/// One run's setup.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// The fabric (its `planes` <= 8, host link rate = one NIC port).
    pub fabric: FabricConfig,
    /// Transport.
    pub transport: Transport,
    /// EV format of the `mrc` transport (default SRv6; see [`NicConfig::mrc_ev_format`]).
    pub mrc_ev_format: EvFormat,
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
    /// Host interface (doorbell, DMA) timing of every NIC.
    pub pcie: PcieConfig,
    /// The firmware cores of every NIC (default: 16 cores at 2 GHz, CPI 1, timed).
    pub firmware: FirmwareConfig,
    /// What runs every MRC NIC's datapath blocks (default: the models).
    pub datapath: DatapathLevelConfig,
    /// Background load running alongside the workload (excluded from its figures), or none.
    pub background: Option<Background>,
    /// A link failure, or none.
    pub failure: Option<LinkFailure>,
    /// A transceiver event, or none (the `mrc` transport with the image's shards only).
    pub transceiver: Option<TransceiverFault>,
    /// Stop here even if flows are unfinished.
    pub time_limit: Time,
    /// Seed of the permutation, the fabric and the NICs.
    pub seed: u64,
    /// Who posts the MRC transports' work (default: applications on the driver).
    pub host: HostModel,
}

/// Who posts an MRC NIC's work and takes its completions. Both run the same NIC model (the
/// datapath stage, the firmware main loop on timed cores, PCIe at TLP granularity) on the
/// same fabric; `roce-ecmp` has its own NIC and always runs its flows itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostModel {
    /// One application per host on the real `mrc-driver` ([`crate::apps::workload`]):
    /// connections and profiles set up through the driver's API and admin queue, writes
    /// posted to its rings and doorbells, completions polled from its CQs, real bytes placed
    /// in registered memory. One thread per run.
    #[default]
    Driver,
    /// The NIC model's own flow table posts the work requests and sees the completions,
    /// no driver, no payload bytes ([`crate::nic`], "Flows"): for fabrics too big for a
    /// device per host (`permutation-1024`), on several threads ([`parallel`]). A
    /// differential test holds it to the driver's figures on the default scenario.
    Flows,
}

impl HostModel {
    /// Its name in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            HostModel::Driver => "driver",
            HostModel::Flows => "flows",
        }
    }

    /// Whether `transport`'s hosts are this model's (`roce-ecmp` always runs its flows).
    pub fn applies(self, transport: Transport) -> HostModel {
        if transport == Transport::RoceEcmp {
            HostModel::Flows
        } else {
            self
        }
    }
}

impl Scenario {
    /// The default run's scenario for `transport`: 64 hosts, 4 planes of 200 Gb/s (800G NICs),
    /// a leaf-spine per plane (radix 16: 8 leaves, 8 spines), 0.5 us links, an all-to-all
    /// (every host writes 256 KiB to every other host, 15.75 MiB per NIC, in 64 KiB
    /// messages), leaf 0 - spine 0 of plane 0 failing at 40 us; the firmware on the default
    /// cores ([`FirmwareConfig::DEFAULT`]: 16 at 2 GHz, timed).
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
            mrc_ev_format: EvFormat::Srv6,
            workload: Workload::AllToAll {
                bytes_per_pair: 256 << 10,
                msg_bytes: 64 << 10,
            },
            mtu_payload: 4096,
            // With the RACK time rule (one base RTT) deciding. 63 QPs share a NIC, so 8 later
            // packets of one QP take ~20 us to be sent: 4 infers a loss sooner, which shortens
            // the longest stall without more retransmissions.
            reorder_tx: 4,
            // 131 us: four hops of full 178 KB queues at 200 Gb/s are ~29 us one way, and an
            // all-to-all's incast fills them; a shorter timeout fires on queueing, not loss.
            timeout_exp: 7,
            retry_cnt: 24,
            pcie: PcieConfig::default(),
            firmware: FirmwareConfig::DEFAULT,
            datapath: DatapathLevelConfig::at(DatapathLevel::Model),
            background: None,
            transceiver: None,
            failure: Some(LinkFailure {
                at: Time::from_us(40),
                t1_link: 0,
            }),
            time_limit: Time::from_secs(4),
            seed: 1,
            host: HostModel::Driver,
        }
    }

    /// The default fabric and failure with a permutation: every host writes 16 MiB to one
    /// partner in 256 KiB messages.
    pub fn permutation_for(transport: Transport) -> Scenario {
        Scenario {
            workload: Workload::Permutation {
                bytes_per_host: 16 << 20,
                msg_bytes: 256 << 10,
            },
            ..Scenario::default_for(transport)
        }
    }

    /// The default fabric and failure with a ring all-reduce of 16 MiB per rank (4 slices per
    /// chunk, 64 KiB messages).
    pub fn ring_all_reduce_for(transport: Transport) -> Scenario {
        Scenario {
            workload: Workload::RingAllReduce {
                bytes: 16 << 20,
                slices: 4,
                msg_bytes: 64 << 10,
            },
            ..Scenario::default_for(transport)
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

    /// The configuration of every MRC NIC of the scenario.
    pub fn nic_config(&self) -> NicConfig {
        NicConfig {
            transport: self.transport,
            mrc_ev_format: self.mrc_ev_format,
            planes: self.fabric.planes.min(255) as u8,
            port_bps: self.fabric.host_link_bps,
            mtu_payload: self.mtu_payload,
            base_rtt: self.base_rtt(),
            reorder_tx: self.reorder_tx,
            timeout_exp: self.timeout_exp,
            retry_cnt: self.retry_cnt,
            seed: self.seed,
            pcie: self.pcie,
            firmware: self.firmware,
            stage_planted_bug: false,
            datapath: self.datapath,
            stall_mark: self.transceiver.map(|t| t.at),
        }
    }

    /// NIC line rate: all planes.
    pub fn nic_bps(&self) -> u64 {
        self.fabric.host_link_bps * u64::from(self.fabric.planes)
    }

    /// Unloaded round trip between hosts on different leaves: a full data packet's payload read
    /// from host memory ([`PcieConfig::packet_delay`]), the packet out over four links (store
    /// and forward) and an ACK back.
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
            .saturating_add(self.pcie.packet_delay(self.mtu_payload))
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// Bad fabric configuration.
    Fabric(ConfigError),
    /// A NIC refused its setup.
    Nic(NicError),
    /// A RoCE NIC refused its setup.
    Roce(RoceError),
    /// The transceiver event names a NIC port the fabric does not have (host, port), or the
    /// run's transport has no such NIC.
    NoSuchPort(u32, u32),
    /// The failure names a link the fabric does not have.
    NoSuchLink(u32),
    /// The workload (or background) description is invalid.
    Workload(WorkloadError),
    /// A thread to build the NICs could not start (the OS's reason).
    Thread(std::io::ErrorKind),
    /// A host application on the driver failed (the step and the driver's error).
    Apps(String),
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RunError::Fabric(e) => write!(f, "{e}"),
            RunError::Nic(e) => write!(f, "{e}"),
            RunError::Roce(e) => write!(f, "roce nic: {e}"),
            RunError::NoSuchLink(l) => write!(f, "failure: no T0-T1 link {l} on plane 0"),
            RunError::NoSuchPort(h, p) => {
                write!(f, "transceiver: no port {p} of an MRC NIC on host {h}")
            }
            RunError::Workload(e) => write!(f, "{e}"),
            RunError::Thread(e) => write!(f, "cannot start a thread to build the NICs: {e}"),
            RunError::Apps(e) => write!(f, "host application: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// A packet an MRC NIC sent, as a run's tap records it ([`Observer::on_tx`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TapRecord {
    time: Time,
    /// Key of the event that sent it (orders records of several partitions).
    key: u64,
    src: u32,
    dst: u32,
    pkt: StagePacket,
}

/// The simulated system: the fabric, every NIC, and the flow bookkeeping that joins them.
///
/// # Event sources
/// Each host (its NIC and NIC ports) and each switch is a source of events
/// ([`Handler::source`]: 0 for what the run schedules itself, `1 + host`, then `1 + hosts +
/// switch`), so the order of events at equal times does not depend on how the world is
/// partitioned ([`parallel`]).
///
/// # MRC headers
/// The fabric's packets carry a tag naming the sender's side-table entry. The world moves the
/// headers out of the sender's side table when the packet enters the fabric (its NIC port) into
/// a table indexed by the packet's fabric slot, so the headers travel with the packet (also
/// from one partition to another) and a delivery finds them there.
pub struct World {
    /// The fabric.
    pub fabric: Fabric,
    /// One MRC NIC per host (`mrc`, `mrc-1ev`, `spray-oblivious`; empty for `roce-ecmp`); in a
    /// partition of a parallel run, the NICs of its hosts only, from host `nic_base` on.
    pub nics: Vec<Nic>,
    /// One RoCE NIC per host (`roce-ecmp` only; empty otherwise).
    pub roce: Vec<RoceNic>,
    /// Events the world could not route.
    pub bad_events: u64,
    /// Every flow, id = index: the workload's first (`0..main_flows`), then the background's.
    pub flows: Vec<Flow>,
    /// The flows' results from applications on the driver ([`World::set_app_results`]).
    app_results: Vec<FlowResult>,
    /// Driver NICs with a report in host memory, noted as events touch them
    /// ([`World::take_due`]); per NIC whether it is in the list (empty: not a driver world).
    due: Vec<u32>,
    due_flag: Vec<bool>,
    /// Flows of the workload proper.
    pub main_flows: u32,
    /// Main flows that completed or failed so far.
    pub main_finished: u32,
    /// Per flow: its index in its sender's flow list.
    local: Vec<u32>,
    /// Per flow: the flows released by its completion (CSR: `dep_start[id]..dep_start[id+1]`).
    dep_start: Vec<u32>,
    dep_list: Vec<u32>,
    /// Hosts whose finished flows are to be collected.
    drain: Vec<u32>,
    /// Scratch: finished flows (id, completed without error) of the host being settled.
    done: Vec<(u32, bool)>,
    /// The host of `nics[0]` (and `roce[0]`).
    nic_base: u32,
    /// Hosts of the whole fabric (the first switch's source is `1 + hosts`).
    all_hosts: u32,
    /// Per fabric slot: the MRC headers of the packet there.
    hdrs: Vec<Option<StagePacket>>,
    /// Which transmissions to record, and the records since they were last collected.
    pub(crate) tap: Tap,
    tapped: Vec<TapRecord>,
    /// Key of the event being handled.
    cur_key: u64,
    /// Events for other partitions (with the packet's headers), since last collected.
    outbox: Vec<(Crossing, Option<StagePacket>)>,
}

impl World {
    /// A world of `nics` on `fabric` (NIC `i` is host `i`, one per host) with no workload:
    /// the NICs' hosts are outside the event loop (the driver's NICs, [`Nic::for_driver`]),
    /// their input goes through [`World::host_input`].
    pub fn for_driver(fabric: Fabric, nics: Vec<Nic>) -> World {
        let all_hosts = fabric.topology().hosts();
        let mut fabric = fabric;
        fabric.track_staging();
        let due_flag = vec![false; nics.len()];
        World {
            fabric,
            nics,
            roce: Vec::new(),
            bad_events: 0,
            flows: Vec::new(),
            app_results: Vec::new(),
            due: Vec::new(),
            due_flag,
            main_flows: 0,
            main_finished: 0,
            local: Vec::new(),
            dep_start: Vec::new(),
            dep_list: Vec::new(),
            drain: Vec::new(),
            done: Vec::new(),
            nic_base: 0,
            all_hosts,
            hdrs: Vec::new(),
            tap: Tap::Off,
            tapped: Vec::new(),
            cur_key: 0,
            outbox: Vec::new(),
        }
    }

    /// The driver's NICs have nothing left to do and no packet is in the fabric
    /// ([`Nic::driver_idle`]).
    pub fn driver_quiet(&self) -> bool {
        self.fabric.totals().in_flight == 0
            && self.fabric.deliveries_pending() == 0
            && self.nics.iter().all(Nic::driver_idle)
    }

    /// Input to host `host`'s NIC from outside the event loop (`s` is the simulator's own
    /// scheduler, [`Simulator::handler_and_scheduler`]): `f` gets the NIC, the fabric, the
    /// scheduler and the NICs' component id; the packets it sent then enter the fabric as an
    /// event's would. `None` when there is no such NIC.
    pub fn host_input<R>(
        &mut self,
        host: u32,
        s: &mut Scheduler<'_>,
        f: impl FnOnce(&mut Nic, &mut Fabric, &mut Scheduler<'_>, ComponentId) -> R,
    ) -> Option<R> {
        let nic = self
            .nics
            .get_mut(host.wrapping_sub(self.nic_base) as usize)?;
        let r = f(nic, &mut self.fabric, s, NICS);
        self.note_due(host.wrapping_sub(self.nic_base) as usize, s.now());
        self.after_event(s.now());
        Some(r)
    }

    /// Notes NIC `hi` (a driver's NIC) when a report of it reached host memory by `now`.
    #[inline]
    fn note_due(&mut self, hi: usize, now: Time) {
        if let (Some(n), Some(f)) = (self.nics.get(hi), self.due_flag.get_mut(hi)) {
            if !*f && n.driver_due(now) {
                *f = true;
                self.due.push(hi as u32);
            }
        }
    }

    /// The driver's NICs (indices into `nics`) noted since the last call with a report in
    /// host memory, in the order they were noted.
    pub(crate) fn take_due(&mut self, out: &mut Vec<u32>) {
        for &i in &self.due {
            if let Some(f) = self.due_flag.get_mut(i as usize) {
                *f = false;
            }
        }
        out.clear();
        out.append(&mut self.due);
    }

    /// True when every flow of the workload proper completed or failed.
    pub fn main_done(&self) -> bool {
        self.main_finished >= self.main_flows
    }

    /// Collects finished flows of the hosts in `drain`: counts them and releases (or fails)
    /// the flows that wait for them, on whichever NIC they live.
    fn settle(&mut self, now: Time, s: &mut Scheduler<'_>) {
        while let Some(h) = self.drain.pop() {
            let mut done = std::mem::take(&mut self.done);
            let hi = h.wrapping_sub(self.nic_base) as usize;
            self.note_due(hi, now);
            if let Some(nic) = self.nics.get_mut(hi) {
                while let Some(x) = nic.poll_finished() {
                    done.push(x);
                }
            } else if let Some(nic) = self.roce.get_mut(hi) {
                // RoCE reports completions only; a QP in error shows in `RoceNic::failed`.
                while let Some(d) = nic.poll_flow_done() {
                    done.push((d.id, true));
                }
            }
            for &(id, ok) in &done {
                if id < self.main_flows {
                    self.main_finished += 1;
                }
                let (a, b) = (
                    self.dep_start.get(id as usize).copied().unwrap_or(0) as usize,
                    self.dep_start.get(id as usize + 1).copied().unwrap_or(0) as usize,
                );
                for k in a..b {
                    let d = self.dep_list[k];
                    let (Some(f), Some(&li)) =
                        (self.flows.get(d as usize), self.local.get(d as usize))
                    else {
                        continue;
                    };
                    let si = f.src.wrapping_sub(self.nic_base) as usize;
                    if let Some(n) = self.nics.get_mut(si) {
                        if ok {
                            n.dependency_done(li, now, &mut self.fabric, s, NICS);
                        } else {
                            n.dependency_failed(li);
                        }
                    } else if let Some(n) = self.roce.get_mut(si) {
                        n.flow_completed(id, now, &mut self.fabric, s, NICS);
                    } else {
                        continue;
                    }
                    self.drain.push(f.src);
                }
            }
            done.clear();
            self.done = done;
        }
    }

    /// [`World::settle`] for host `h`, after an event touched it; skipped when it has
    /// nothing to settle (an MRC NIC with no finished flow to report, in a world without
    /// driver reports to note), which is most events.
    #[inline]
    fn settle_host(&mut self, h: u32, now: Time, s: &mut Scheduler<'_>) {
        let hi = h.wrapping_sub(self.nic_base) as usize;
        let quiet = self.due_flag.is_empty()
            && self.drain.is_empty()
            && self.nics.get(hi).is_some_and(|n| !n.has_finished());
        if !quiet {
            self.drain.push(h);
            self.settle(now, s);
        }
    }

    /// Every flow (main, then background) and what became of it, by id.
    pub fn flow_results(&self) -> Vec<FlowResult> {
        let mut out: Vec<FlowResult> = self.flow_results_unordered().collect();
        out.sort_unstable_by_key(|f| f.flow.id);
        out
    }

    /// Bytes acknowledged to the senders so far, every flow (no allocation: for samplers).
    pub fn acked_bytes(&self) -> u64 {
        self.flow_results_unordered().map(|f| f.acked_bytes).sum()
    }

    /// Every flow's result, NIC by NIC (RoCE results mapped onto the workload's flows).
    fn flow_results_unordered(&self) -> impl Iterator<Item = FlowResult> + '_ {
        let mrc = self
            .nics
            .iter()
            .flat_map(|n| n.flow_results())
            .chain(self.app_results.iter().copied());
        let roce = self
            .roce
            .iter()
            .flat_map(|n| n.flow_results())
            .filter_map(|r| {
                let flow = *self.flows.get(r.id as usize)?;
                Some(FlowResult {
                    flow,
                    background: r.id >= self.main_flows,
                    released: r.released_at,
                    done: r.done_at,
                    acked_bytes: r.acked_bytes,
                    failed: r.failed,
                })
            });
        mrc.chain(roce)
    }

    /// Payload bytes the receivers placed so far (all NICs).
    pub fn placed_bytes(&self) -> u64 {
        let mrc: u64 = self.nics.iter().map(|n| n.counters().placed_bytes).sum();
        let roce: u64 = self.roce.iter().map(|n| n.counters().placed_bytes).sum();
        mrc + roce
    }

    /// The flows' results when applications on the driver ran them ([`crate::apps`]): the
    /// NICs then have no flows of their own.
    pub(crate) fn set_app_results(&mut self, results: Vec<FlowResult>, main_flows: u32) {
        self.main_flows = main_flows;
        self.main_finished = results
            .iter()
            .filter(|r| r.flow.id < main_flows && (r.done.is_some() || r.failed))
            .count() as u32;
        self.app_results = results;
    }

    /// Hosts.
    pub fn hosts(&self) -> u32 {
        (self.nics.len() + self.roce.len()) as u32
    }

    /// After an event that staged packets or crossed partitions: moves the headers of the
    /// packets that entered the fabric out of their senders' side tables (recording them for
    /// the tap), and collects the events for other partitions with their packets' headers.
    /// (Most events do neither: the caller looks first.)
    #[inline(never)]
    fn after_event(&mut self, now: Time) {
        let (nics, hdrs, base) = (&mut self.nics, &mut self.hdrs, self.nic_base);
        let (tap, tapped, key) = (self.tap, &mut self.tapped, self.cur_key);
        self.fabric.drain_staged(|slot, host, tag| {
            let nic = nics.get_mut(host.wrapping_sub(base) as usize);
            let hdr = nic.and_then(|n| {
                let h = n.side_take(tag)?;
                if tap != Tap::Off {
                    if let Some(dst) = n.peer(h.src_qpn) {
                        if tap == Tap::All || tap == Tap::Host(host) || tap == Tap::Host(dst) {
                            tapped.push(TapRecord {
                                time: now,
                                key,
                                src: host,
                                dst,
                                pkt: h,
                            });
                        }
                    }
                }
                Some(h)
            });
            let i = slot as usize;
            if i >= hdrs.len() {
                hdrs.resize(i + 1, None);
            }
            hdrs[i] = hdr;
        });
        if self.fabric.has_crossings() {
            let (hdrs, outbox) = (&mut self.hdrs, &mut self.outbox);
            self.fabric.drain_crossings(|c| {
                let hdr = if c.kind == fev::ARRIVE {
                    hdrs.get_mut(c.from_slot as usize).and_then(Option::take)
                } else {
                    None
                };
                outbox.push((*c, hdr));
            });
        }
    }

    /// Starts loading the state event `m` names directly: its fabric slot and port, and the
    /// NIC it is for (returned, for deeper prefetches).
    #[inline]
    fn prefetch_direct(&self, m: &Msg) -> Option<&Nic> {
        let host = self.host_of(m);
        if m.target == FABRIC {
            self.fabric.prefetch(m.kind, m.data);
            if host.is_some() {
                // A delivery: the packet's headers wait in the slot's entry (`take_hdr`).
                if let Some(h) = self.hdrs.get(m.data as u32 as usize) {
                    crate::core::sys::prefetch(h);
                }
            }
        }
        let n = self.nics.get(host?.wrapping_sub(self.nic_base) as usize)?;
        crate::core::sys::prefetch(n);
        Some(n)
    }

    /// The host whose NIC event `m` is for, when the event alone tells (a NIC event, a
    /// delivery).
    #[inline]
    fn host_of(&self, m: &Msg) -> Option<u32> {
        match m.target {
            FABRIC => self.fabric.delivery_host(m.kind, m.data),
            NICS => Some(m.data as u32),
            _ => None,
        }
    }

    /// The NIC event `m` is for, when the event alone tells ([`World::host_of`]).
    #[inline]
    fn nic_of(&self, m: &Msg) -> Option<&Nic> {
        self.nics
            .get(self.host_of(m)?.wrapping_sub(self.nic_base) as usize)
    }

    /// The headers of the packet delivered from `slot`.
    #[inline]
    fn take_hdr(&mut self, slot: u32) -> Option<StagePacket> {
        self.hdrs.get_mut(slot as usize).and_then(Option::take)
    }
}

/// Worlds of at least this many hosts (some 300 MB of NIC and fabric state) are backed by huge
/// pages once built ([`crate::core::sys::back_with_huge_pages`]); smaller ones miss the TLB
/// too little to pay for faulting and collapsing huge pages (measured on a 2-vCPU VM: the
/// 1,024-host permutation runs ~10 % faster without them, the 4,394-host one ~10 % faster
/// with them).
const HUGE_PAGE_HOSTS: u32 = 2048;

/// Stack of the threads that build the NICs.
const NIC_BUILD_STACK: usize = 64 << 20;

/// Source of the events the run schedules itself (the NICs' first release, faults).
pub(crate) const ROOT_SOURCE: u32 = 0;

impl Handler for World {
    /// The state `next` names directly (fabric slot and port, the NIC), then what the NIC
    /// reaches through pointers (loaded by [`World::prefetch_later`] an event earlier).
    #[inline]
    fn prefetch(&self, next: &Msg) {
        if let Some(n) = self.prefetch_direct(next) {
            n.prefetch_state();
        }
    }

    #[inline]
    fn prefetch_later(&self, later: &Msg) {
        self.prefetch_direct(later);
    }

    /// What `next` names directly is on its way already: only what the NIC reaches.
    #[inline]
    fn prefetch_warmed(&self, next: &Msg) {
        if let Some(n) = self.nic_of(next) {
            n.prefetch_state();
        }
    }

    #[inline]
    fn source(&self, m: &Msg) -> u32 {
        match m.target {
            NICS => 1 + m.data as u32,
            FABRIC => match self.fabric.event_owner(m.kind, m.data) {
                Some(Owner::Host(h)) => 1 + h,
                Some(Owner::Switch(sw)) => 1 + self.all_hosts + sw,
                None => ROOT_SOURCE,
            },
            _ => ROOT_SOURCE,
        }
    }

    fn handle(&mut self, now: Time, ev: Event, s: &mut Scheduler<'_>) {
        self.cur_key = ev.seq;
        self.dispatch(now, ev, s);
        if self.fabric.has_staged() || self.fabric.has_crossings() {
            self.after_event(now);
        }
    }
}

impl World {
    #[inline]
    fn dispatch(&mut self, now: Time, ev: Event, s: &mut Scheduler<'_>) {
        match ev.target {
            FABRIC => {
                self.fabric.handle(ev, s);
                while let Some(d) = self.fabric.poll_delivery() {
                    let hi = d.host.wrapping_sub(self.nic_base) as usize;
                    if let Some(n) = self.roce.get_mut(hi) {
                        n.receive(now, &d.packet, &mut self.fabric, s, NICS);
                    } else {
                        let hdr = self.take_hdr(d.slot);
                        let Some(n) = self.nics.get_mut(hi) else {
                            self.bad_events += 1;
                            continue;
                        };
                        n.receive(now, &d.packet, hdr, &mut self.fabric, s, NICS);
                    }
                    self.settle_host(d.host, now, s);
                }
            }
            NICS => {
                let h = ev.data as u32;
                let hi = h.wrapping_sub(self.nic_base) as usize;
                if let Some(nic) = self.nics.get_mut(hi) {
                    match ev.kind {
                        nev::START => nic.start(now, &mut self.fabric, s, NICS),
                        nev::PUMP => nic.on_pump(now, &mut self.fabric, s, NICS),
                        nev::TIMER => nic.on_timer(now, &mut self.fabric, s, NICS),
                        nev::DMA => nic.on_dma(now, &mut self.fabric, s, NICS),
                        nev::FIRMWARE => nic.on_firmware(now, &mut self.fabric, s, NICS),
                        nev::DATAPATH => nic.on_datapath(now, &mut self.fabric, s, NICS),
                        nev::TRANSCEIVER => {
                            let port = (ev.data >> 32) as u8;
                            let pull = (ev.data >> 40) & 1 == 1;
                            if nic.on_transceiver(now, usize::from(port), pull) == 0 {
                                // (no shard has a board: validation refuses such runs)
                                self.bad_events += 1;
                            }
                        }
                        _ => self.bad_events += 1,
                    }
                } else if let Some(nic) = self.roce.get_mut(hi) {
                    // The RoCE NIC uses the same event kinds (`roce::ev` is `nic::ev`).
                    match ev.kind {
                        nev::START => nic.start(now, &mut self.fabric, s, NICS),
                        nev::PUMP => nic.on_pump(now, &mut self.fabric, s, NICS),
                        nev::TIMER => nic.on_timer(now, &mut self.fabric, s, NICS),
                        _ => self.bad_events += 1,
                    }
                } else {
                    self.bad_events += 1;
                    return;
                }
                self.settle_host(h, now, s);
            }
            _ => self.bad_events += 1,
        }
    }
}

/// A random permutation without fixed points (every host sends to another host).
pub use crate::workload::permutation;

/// The link id of T0-T1 link `index` of plane 0.
pub(crate) fn t1_link(fabric: &Fabric, index: u32) -> Option<LinkId> {
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

/// The flows of `sc` over `hosts` hosts: the workload's (ids `0..main`), then the
/// background's; returns them and `main`.
///
/// # Errors
/// [`RunError::Workload`] when a description is invalid.
pub fn scenario_flows(sc: &Scenario, hosts: u32) -> Result<(Vec<Flow>, u32), RunError> {
    sc.workload.validate(hosts).map_err(RunError::Workload)?;
    let mut flows = sc.workload.flows(hosts, sc.seed);
    let main = flows.len() as u32;
    if let Some(b) = sc.background {
        flows.extend(
            b.flows(hosts, sc.nic_bps(), sc.seed, main)
                .map_err(RunError::Workload)?,
        );
    }
    Ok((flows, main))
}

/// Builds the world for `sc` with its events scheduled.
///
/// # Errors
/// [`RunError`] when the fabric, the workload, a NIC or the failure is invalid.
pub fn build(sc: &Scenario) -> Result<Simulator<World>, RunError> {
    let (world, initial) = build_world(sc, 1)?;
    Ok(start(world, initial))
}

/// The simulator of `world` with its `initial` events scheduled.
fn start(world: World, initial: Vec<(Time, Msg)>) -> Simulator<World> {
    let mut sim = Simulator::new(world);
    // (a run reports nothing from the trace hash: off, it costs nothing per event)
    sim.set_trace(false);
    for m in initial {
        // Times are >= now (0): cannot fail.
        let _ = sim.schedule(m.0, m.1.target, m.1.kind, m.1.data);
    }
    sim
}

/// The world for `sc` and the events the run starts with, in scheduling order (their keys are
/// `event_key(ROOT_SOURCE, index)`); the NICs are built on `threads` threads.
fn build_world(sc: &Scenario, threads: usize) -> Result<(World, Vec<(Time, Msg)>), RunError> {
    let mut fcfg = sc.fabric;
    fcfg.seed = sc.seed;
    let is_roce = sc.transport == Transport::RoceEcmp;
    if is_roce {
        // RoCE runs on a lossless fabric: PFC pauses before any queue overflows.
        fcfg = roce::lossless(fcfg, sc.mtu_payload);
    }
    let fabric = Fabric::new(fcfg, FABRIC).map_err(RunError::Fabric)?;
    let hosts = fabric.topology().hosts();
    if hosts >= HUGE_PAGE_HOSTS {
        // (one arena when the run is sequential: the NICs built on other threads then share
        // the main heap with everything the run allocates)
        crate::core::sys::prepare_heap_for_huge_pages(threads <= 1);
    }
    let (flows, main_flows) = scenario_flows(sc, hosts)?;
    let plan = QpPlan::for_flows(hosts, &flows);
    let ncfg = sc.nic_config();
    // Per host: its flows (in id order) and whether each is background.
    let mut per_host: Vec<(Vec<Flow>, Vec<bool>)> = vec![(Vec::new(), Vec::new()); hosts as usize];
    let mut local = vec![0u32; flows.len()];
    for f in &flows {
        let Some(h) = per_host.get_mut(f.src as usize) else {
            return Err(RunError::Nic(NicError::Config(
                "a flow names a host the fabric lacks",
            )));
        };
        local[f.id as usize] = h.0.len() as u32;
        h.0.push(*f);
        h.1.push(f.id >= main_flows);
    }
    let mut nics = Vec::new();
    let mut roce_nics = Vec::new();
    if is_roce {
        let rcfg = RoceConfig::new(ncfg.planes, ncfg.port_bps, sc.mtu_payload, sc.seed);
        for h in 0..hosts {
            roce_nics.push(RoceNic::new(h, &flows, rcfg).map_err(RunError::Roce)?);
        }
    } else {
        // Host ranges built on `threads` threads (each NIC is built from its own inputs
        // only, so the NICs are the same however many threads build them).
        let build = |lo: usize, hi: usize| -> Result<Vec<Nic>, RunError> {
            (lo..hi)
                .map(|h| {
                    let (hf, bg) = &per_host[h];
                    let h = h as u32;
                    Nic::new(h, ncfg, &plan.peers_of(h), hf, bg).map_err(RunError::Nic)
                })
                .collect()
        };
        let n = hosts as usize;
        let t = threads.clamp(1, n.max(1));
        // Always on threads of their own: a NIC's shards (a stage and an engine each, ~180 KB)
        // are built by value before they are boxed, which an unoptimised build does with
        // several copies on the stack.
        let chunks: Vec<Result<Vec<Nic>, RunError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..t)
                .map(|i| {
                    let build = &build;
                    std::thread::Builder::new()
                        .name("nic-build".into())
                        .stack_size(NIC_BUILD_STACK)
                        .spawn_scoped(scope, move || build(i * n / t, (i + 1) * n / t))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    Err(e) => Err(RunError::Thread(e.kind())),
                })
                .collect()
        });
        nics.reserve(n);
        for c in chunks {
            nics.append(&mut c?);
        }
    }
    // Dependents in CSR form.
    let mut count = vec![0u32; flows.len() + 1];
    for f in &flows {
        if let Some(a) = f.after.filter(|a| (*a as usize) < flows.len()) {
            count[a as usize + 1] += 1;
        }
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut fill = count.clone();
    let mut dep_list = vec![0u32; count.last().copied().unwrap_or(0) as usize];
    for f in &flows {
        if let Some(a) = f.after.filter(|a| (*a as usize) < flows.len()) {
            dep_list[fill[a as usize] as usize] = f.id;
            fill[a as usize] += 1;
        }
    }
    let failure = match sc.failure {
        Some(f) => Some((
            f.at,
            t1_link(&fabric, f.t1_link).ok_or(RunError::NoSuchLink(f.t1_link))?,
        )),
        None => None,
    };
    let transceiver = match sc.transceiver {
        Some(t) => {
            let port = fabric.topology().host_port(t.nic, t.port);
            let link = (t.nic < hosts && t.port < sc.fabric.planes && !is_roce)
                .then(|| fabric.port_link(port))
                .flatten()
                .ok_or(RunError::NoSuchPort(t.nic, t.port))?;
            Some((t, link))
        }
        None => None,
    };
    let mut fabric = fabric;
    if !is_roce {
        fabric.track_staging();
    }
    let world = World {
        fabric,
        nics,
        roce: roce_nics,
        bad_events: 0,
        flows,
        app_results: Vec::new(),
        due: Vec::new(),
        due_flag: Vec::new(),
        main_flows,
        main_finished: 0,
        local,
        dep_start: count,
        dep_list,
        drain: Vec::new(),
        done: Vec::new(),
        nic_base: 0,
        all_hosts: hosts,
        hdrs: Vec::new(),
        tap: Tap::Off,
        tapped: Vec::new(),
        cur_key: 0,
        outbox: Vec::new(),
    };
    if hosts >= HUGE_PAGE_HOSTS {
        // A model this large misses the TLB on most events with 4 KiB pages. (The heap's
        // untouched room is advised too: what the run allocates later gets huge pages.)
        crate::core::sys::back_with_huge_pages();
    }
    // Every NIC starts at t = 0 and re-arms its release event for later flows.
    let mut initial: Vec<(Time, Msg)> = (0..hosts)
        .map(|h| {
            let m = Msg {
                target: NICS,
                kind: nev::START,
                data: u64::from(h),
            };
            (Time::ZERO, m)
        })
        .collect();
    if let Some((at, link)) = failure {
        let m = Msg {
            target: FABRIC,
            kind: fev::FAULT,
            data: Fault::LinkDown(link).encode(),
        };
        initial.push((at, m));
    }
    if let Some((t, link)) = transceiver {
        let m = Msg {
            target: FABRIC,
            kind: fev::FAULT,
            data: Fault::LinkDown(link).encode(),
        };
        initial.push((t.at, m));
        let m = Msg {
            target: NICS,
            kind: nev::TRANSCEIVER,
            data: t.encode(),
        };
        initial.push((t.at, m));
    }
    Ok((world, initial))
}

/// Runs `sc` until every flow completed (or `time_limit`) and reports.
///
/// # Errors
/// [`RunError`] when the scenario is invalid.
pub fn run(sc: &Scenario) -> Result<RunReport, RunError> {
    if sc.host.applies(sc.transport) == HostModel::Driver {
        return Ok(crate::apps::workload::run(sc)?.report);
    }
    let mut sim = build(sc)?;
    let step = Duration::from_us(10);
    loop {
        let next = sim.now().saturating_add(step).min(sc.time_limit);
        sim.run_until(next);
        if sim.handler().main_done() || sim.now() >= sc.time_limit {
            break;
        }
    }
    let now = sim.now();
    for n in &mut sim.handler_mut().nics {
        n.settle(now);
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

/// What an [`Observer`] sees of the world: the whole of it, or every partition of a parallel
/// run ([`parallel`]) together.
pub struct WorldView<'a> {
    parts: &'a [&'a World],
}

impl<'a> WorldView<'a> {
    /// A view of the partitions `parts` (at least one).
    pub(crate) fn new(parts: &'a [&'a World]) -> WorldView<'a> {
        WorldView { parts }
    }

    /// The fabric's wiring and configuration (any partition's: they share them).
    pub fn fabric(&self) -> &Fabric {
        &self.parts[0].fabric
    }

    /// Bytes acknowledged to the senders so far, every flow.
    pub fn acked_bytes(&self) -> u64 {
        self.parts.iter().map(|w| w.acked_bytes()).sum()
    }

    /// Payload bytes the receivers placed so far (all NICs).
    pub fn placed_bytes(&self) -> u64 {
        self.parts.iter().map(|w| w.placed_bytes()).sum()
    }

    /// The partitions (one for a sequential run), in host order.
    pub fn parts(&self) -> &[&World] {
        self.parts
    }
}

/// Watches a run without changing it: periodic samples of the world, and optionally every
/// packet the NICs send (with their MRC headers).
pub trait Observer {
    /// Simulated time between samples (> 0).
    fn sample_every(&self) -> Duration;
    /// A sample at `now` (a multiple of [`Observer::sample_every`], or the end of the run).
    fn on_sample(&mut self, now: Time, world: &WorldView<'_>);
    /// The end of the run at `now` (every flow done or the time limit); by default one last
    /// sample.
    fn on_finish(&mut self, now: Time, world: &WorldView<'_>) {
        self.on_sample(now, world);
    }
    /// Which transmissions to tap (recorded as each packet enters the fabric at its NIC port;
    /// the run's results do not change).
    fn tap(&self) -> Tap {
        Tap::Off
    }
    /// Host `src` sent `pkt` (its MRC headers) to `dst` at `now`: the packet entered the
    /// fabric. Called in the order of the run's events, before the sample that follows them.
    fn on_tx(&mut self, now: Time, world: &WorldView<'_>, src: u32, dst: u32, pkt: &StagePacket) {
        let _ = (now, world, src, dst, pkt);
    }
}

/// Like [`run`], calling `obs` as the run goes; the report is the one [`run`] gives (the run
/// stops at the same 10 us boundary).
///
/// # Errors
/// [`RunError`] when the scenario is invalid.
pub fn run_observed(sc: &Scenario, obs: &mut impl Observer) -> Result<RunReport, RunError> {
    if sc.host.applies(sc.transport) == HostModel::Driver {
        return crate::apps::workload::run_observed(sc, obs).map(|r| r.report);
    }
    Ok(observe(sc, build(sc)?, obs))
}

/// Hands `obs` the packets `w` tapped since the last call ([`Observer::on_tx`]).
pub(crate) fn report_tapped(w: &mut World, obs: &mut impl Observer) {
    let tapped = std::mem::take(&mut w.tapped);
    if !tapped.is_empty() {
        let parts = [&*w];
        let view = WorldView::new(&parts);
        for r in &tapped {
            obs.on_tx(r.time, &view, r.src, r.dst, &r.pkt);
        }
    }
}

/// [`run_observed`] of a built world.
fn observe(sc: &Scenario, mut sim: Simulator<World>, obs: &mut impl Observer) -> RunReport {
    let check = Duration::from_us(10);
    let every = obs.sample_every().max(Duration::from_ps(1));
    sim.handler_mut().tap = obs.tap();
    let mut next_sample = Time::ZERO.saturating_add(every);
    let mut next_check = Time::ZERO.saturating_add(check);
    let mut last_sample = Time::ZERO;
    loop {
        let until = next_sample.min(next_check).min(sc.time_limit);
        sim.run_until(until);
        let now = sim.now();
        report_tapped(sim.handler_mut(), obs);
        if now >= next_sample {
            obs.on_sample(now, &WorldView::new(&[sim.handler()]));
            last_sample = now;
            next_sample = next_sample.saturating_add(every);
        }
        if now >= next_check || now >= sc.time_limit {
            next_check = next_check.saturating_add(check);
            let w = sim.handler();
            if w.main_done() || now >= sc.time_limit {
                break;
            }
        }
    }
    let now = sim.now();
    for n in &mut sim.handler_mut().nics {
        n.settle(now);
    }
    if now > last_sample {
        obs.on_finish(now, &WorldView::new(&[sim.handler()]));
    }
    RunReport::collect(sc, &sim)
}

use crate::nic::StagePacket;
