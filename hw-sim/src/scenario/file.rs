//! The TOML form of a scenario: serde mirror structs (every table `deny_unknown_fields`) and the
//! one function, [`ScenarioFile::to_scenario`], that turns them into a run's [`Scenario`].
//!
//! Units are last in every key (`_bytes`, `_bps`, `_ns`, `_us`, `_ppm`). Optional tables and
//! keys (`transports`, `fabric.queue.ecn`, `fabric.queue.trim_bytes`, `fabric.pfc`, `failure`,
//! `transceiver`)
//! mean "off" (or "every transport") when absent; every other key is required, so a scenario
//! file says everything it runs.

use mrc_abi::wire::EvFormat;
use serde::{Deserialize, Serialize};

use crate::core::time::{Duration, Time};
use crate::fabric::{
    ClassPolicy, EcnConfig, FabricConfig, PfcConfig, QueueConfig, Shape, TransportKind,
};
use crate::nic::{DatapathLevelConfig, FirmwareConfig, PcieConfig, Transport, HEADER_BYTES};
use crate::run::{HostModel, LinkFailure, Scenario, TransceiverEvent, TransceiverFault};
use crate::workload::{Background, Workload};

/// A whole scenario file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// One line saying what the scenario shows (`mrc-sim scenarios` prints it).
    pub description: String,
    /// Seed of every random decision (the permutation, ECMP hashes, loss).
    pub seed: u64,
    /// Transports to run, in order; absent = all four.
    #[serde(default = "all_transports")]
    pub transports: Vec<Transport>,
    /// Stop here even if flows are unfinished (microseconds of simulated time).
    pub time_limit_us: u64,
    /// The fabric.
    pub fabric: FabricFile,
    /// The NICs.
    pub nic: NicFile,
    /// What the hosts move.
    pub workload: Workload,
    /// A link failure, or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureFile>,
    /// A transceiver pulled or going dark, or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transceiver: Option<TransceiverFile>,
    /// Background load alongside the workload, or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<Background>,
    /// Who posts the MRC transports' work (`[host] model = "driver"`, the default, or
    /// `"flows"`; see [`HostModel`]).
    #[serde(default, skip_serializing_if = "HostFile::is_default")]
    pub host: HostFile,
}

/// `[host]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFile {
    /// `"driver"` or `"flows"`.
    pub model: HostModel,
}

impl HostFile {
    fn is_default(&self) -> bool {
        *self == HostFile::default()
    }
}

fn all_transports() -> Vec<Transport> {
    Transport::ALL.to_vec()
}

/// `[fabric]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricFile {
    /// Planes (each host has one NIC port per plane).
    pub planes: u32,
    /// Host <-> T0 link rate.
    pub host_link_bps: u64,
    /// T0 <-> T1 link rate.
    pub t1_link_bps: u64,
    /// T1 <-> T2 link rate (used by fat trees only).
    pub t2_link_bps: u64,
    /// Propagation delay of every link.
    pub propagation_ns: u64,
    /// Added at every switch.
    pub switching_latency_ns: u64,
    /// Host NIC port output queue limit.
    pub host_queue_bytes: u64,
    /// Delay before ECMP routing follows a link state change.
    pub reconvergence_us: u64,
    /// Random loss on every link.
    pub loss_ppm: u32,
    /// Random corruption on every link.
    pub corrupt_ppm: u32,
    /// Shape of each plane.
    pub shape: ShapeFile,
    /// Switch output queues.
    pub queue: QueueFile,
    /// PFC; absent = lossy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<PfcFile>,
    /// What switches do per transport class.
    pub policy: PolicyFile,
}

/// `[fabric.shape]`, tagged by `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ShapeFile {
    /// Two tiers.
    LeafSpine {
        /// Hosts.
        hosts: u32,
        /// Switch radix.
        radix: u32,
    },
    /// Three tiers, a k-ary fat tree (`k^3 / 4` hosts).
    FatTree {
        /// Switch radix.
        k: u32,
    },
}

/// `[fabric.queue]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueFile {
    /// Data queue limit.
    pub limit_bytes: u64,
    /// Priority (header) queue limit.
    pub header_limit_bytes: u64,
    /// Trim to this many bytes when full; absent = never trim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim_bytes: Option<u32>,
    /// ECN marking; absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<EcnFile>,
}

/// `[fabric.queue.ecn]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnFile {
    /// Marking starts here.
    pub kmin_bytes: u64,
    /// Every ECN-capable packet is marked from here.
    pub kmax_bytes: u64,
}

/// `[fabric.pfc]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcFile {
    /// Pause threshold.
    pub xoff_bytes: u64,
    /// Resume threshold.
    pub xon_bytes: u64,
}

/// `[fabric.policy]`: one table per transport class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// MRC and its variants.
    pub mrc: ClassPolicyFile,
    /// RoCE-like transports.
    pub roce: ClassPolicyFile,
}

/// `[fabric.policy.mrc]` / `[fabric.policy.roce]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassPolicyFile {
    /// Mark ECN on the last hop.
    pub ecn_last_hop: bool,
    /// Trim instead of dropping when a queue is full.
    pub trim: bool,
}

/// `[nic]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicFile {
    /// Largest packet on the wire; the payload per packet is this minus the model's header
    /// estimate ([`HEADER_BYTES`]).
    pub mtu_bytes: u32,
    /// Engine loss inference threshold (later transmissions SACKed before a hole is a loss).
    pub reorder_tx: u32,
    /// Engine ACK timeout exponent (`1.024 us * 2^n`).
    pub timeout_exp: u8,
    /// Engine retries before a QP fails.
    pub retry_cnt: u8,
    /// The host interface, a PCIe link (`[nic.pcie]`: `preset` and overrides, see
    /// [`PcieConfig`]; absent = PCIe Gen6 x16).
    #[serde(default)]
    pub pcie: PcieConfig,
    /// The firmware cores (`[nic.firmware]`: `cores`, `clock_mhz`, `cpi`, `timed`, `level`
    /// (`"native"` or `"elf"`), `shape` (`"sim"` or `"image"`); absent = 16 cores at 2 GHz,
    /// CPI 1, timed, native, the simulator's shape).
    #[serde(default)]
    pub firmware: FirmwareConfig,
    /// What runs the datapath blocks (`[nic.datapath]`: `level = "model"` (the default) or
    /// `"rtl"`, the Verilator-built RTL; see `nic::DatapathLevelConfig`).
    #[serde(default, skip_serializing_if = "is_default_datapath")]
    pub datapath: DatapathLevelConfig,
    /// EV format of the `mrc` transport: `"srv6"` (uSID source routes, the default), `"udp"`
    /// (EV in the UDP source port) or `"stev"` (flow label + source port); the last two are
    /// hashed by the switches (ECMP).
    #[serde(default, skip_serializing_if = "EvFormatFile::is_default")]
    pub ev_format: EvFormatFile,
}

fn is_default_datapath(d: &DatapathLevelConfig) -> bool {
    *d == DatapathLevelConfig::default()
}

/// `nic.ev_format`: an EV format by its name ([`EvFormat::name`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvFormatFile {
    /// SRv6 uSID carriers.
    #[default]
    Srv6,
    /// UDP source port.
    Udp,
    /// Structured EV (flow label + UDP source port).
    Stev,
}

impl EvFormatFile {
    /// The wire format.
    pub fn format(self) -> EvFormat {
        match self {
            EvFormatFile::Srv6 => EvFormat::Srv6,
            EvFormatFile::Udp => EvFormat::Udp,
            EvFormatFile::Stev => EvFormat::Stev,
        }
    }

    fn is_default(&self) -> bool {
        *self == EvFormatFile::Srv6
    }
}

/// `[failure]`: a T0-T1 link of plane 0 goes down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureFile {
    /// When (microseconds of simulated time).
    pub at_us: u64,
    /// Which T0-T1 link of plane 0 (0 = leaf 0 to its first uplink).
    pub t1_link: u32,
}

/// `[transceiver]`: a port's module is pulled, or raises loss of signal. The port's host link
/// goes down at that time; the NIC's firmware finds out through its board (the NIC image's
/// port monitor: cage pins, CMIS over I2C), so the `mrc` transport with
/// `[nic.firmware] shape = "image"` only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransceiverFile {
    /// When (microseconds of simulated time).
    pub at_us: u64,
    /// Which NIC (host index).
    pub nic: u32,
    /// Which of its ports (= plane).
    pub port: u32,
    /// `"pull"` (the module leaves its cage) or `"los"` (loss of signal on its first lane).
    pub event: TransceiverEvent,
}

impl ShapeFile {
    pub(crate) fn to_shape(self) -> Shape {
        match self {
            ShapeFile::LeafSpine { hosts, radix } => Shape::LeafSpine { hosts, radix },
            ShapeFile::FatTree { k } => Shape::FatTree { k },
        }
    }
}

impl ClassPolicyFile {
    fn to_policy(self) -> ClassPolicy {
        ClassPolicy {
            ecn_last_hop: self.ecn_last_hop,
            trim: self.trim,
        }
    }
}

impl FabricFile {
    /// The fabric configuration (its seed is set by the run from the scenario's).
    pub fn to_config(&self, seed: u64) -> FabricConfig {
        let mut policy = [ClassPolicy::MRC; TransportKind::COUNT];
        policy[TransportKind::Mrc.index()] = self.policy.mrc.to_policy();
        policy[TransportKind::Roce.index()] = self.policy.roce.to_policy();
        FabricConfig {
            shape: self.shape.to_shape(),
            planes: self.planes,
            host_link_bps: self.host_link_bps,
            t1_link_bps: self.t1_link_bps,
            t2_link_bps: self.t2_link_bps,
            propagation: Duration::from_ns(self.propagation_ns),
            switching_latency: Duration::from_ns(self.switching_latency_ns),
            queue: QueueConfig {
                limit_bytes: self.queue.limit_bytes,
                header_limit_bytes: self.queue.header_limit_bytes,
                ecn: self.queue.ecn.map(|e| EcnConfig {
                    kmin_bytes: e.kmin_bytes,
                    kmax_bytes: e.kmax_bytes,
                }),
                trim_bytes: self.queue.trim_bytes,
            },
            host_queue_bytes: self.host_queue_bytes,
            pfc: self.pfc.map(|p| PfcConfig {
                xoff_bytes: p.xoff_bytes,
                xon_bytes: p.xon_bytes,
            }),
            policy,
            reconvergence: Duration::from_us(self.reconvergence_us),
            loss_ppm: self.loss_ppm,
            corrupt_ppm: self.corrupt_ppm,
            seed,
        }
    }
}

impl ScenarioFile {
    /// The run's [`Scenario`] for `transport`: the one place that maps file fields to run
    /// fields. Call after validation (values are used as they are; the MTU saturates at the
    /// header size).
    pub fn to_scenario(&self, transport: Transport) -> Scenario {
        Scenario {
            fabric: self.fabric.to_config(self.seed),
            transport,
            mrc_ev_format: self.nic.ev_format.format(),
            workload: self.workload,
            mtu_payload: self.nic.mtu_bytes.saturating_sub(HEADER_BYTES),
            reorder_tx: self.nic.reorder_tx,
            timeout_exp: self.nic.timeout_exp,
            retry_cnt: self.nic.retry_cnt,
            failure: self.failure.map(|f| LinkFailure {
                at: Time::from_us(f.at_us),
                t1_link: f.t1_link,
            }),
            transceiver: self.transceiver.map(|t| TransceiverFault {
                at: Time::from_us(t.at_us),
                nic: t.nic,
                port: t.port,
                event: t.event,
            }),
            time_limit: Time::from_us(self.time_limit_us),
            seed: self.seed,
            pcie: self.nic.pcie,
            firmware: self.nic.firmware,
            datapath: self.nic.datapath,
            background: self.background,
            host: self.host.model,
        }
    }
}
