//! The NIC model: on every host, the real datapath stage
//! ([`mrc_firmware::datapath::stage::Datapath`]) and firmware engine
//! ([`mrc_firmware::engine::Engine`]) joined by their CSR queues, and joined to the fabric.
//!
//! # What it does
//! - **Connections**: a NIC opens one RC QP per peer it exchanges flows with ([`QpPlan`]); the
//!   QP sends its own flows and receives the peer's. QPN `i` is the connection to the host's
//!   `i`-th smallest peer, so both ends are wired before either exists.
//! - **Shards**: a NIC's QPs live in shards of [`SHARD_QPS`] QPs each, a shard being one
//!   datapath stage and the firmware engine that owns its QPs (the QP at position `p` is slot
//!   `p % SHARD_QPS` of shard `p / SHARD_QPS`; positions follow the order the host creates its
//!   QPs, the order its flows first name their peers, then the receive-only QPs by QPN), or in
//!   one shard of [`NARROW_QPS`] QPs when the NIC has at most that many connections (same
//!   slots, under half the memory: [`shard`]), so a NIC's memory grows with the connections its
//!   workload opens rather than with the largest workload's. QPs are independent inside a
//!   shard. The model translates QPNs at the shard boundary (the wire carries the NIC-wide
//!   QPN).
//! - **Stage and firmware**: the stage does every packet's work (segmentation, the EV pick,
//!   ACK generation and application, placement checks); the engine runs on the stage's
//!   coalesced reports (ACK summaries with the sends they retired, losses, NACKs) and steers it
//!   with commands (retransmission orders, completion orders, EV table writes, windows, QP
//!   contexts). Completions and EV state changes reach the NIC model as host writes: the
//!   `Complete` entries the stage writes on the engine's completion orders (the engine's own
//!   for errors and received immediates) and the engine's `EvEvent` entries.
//! - **Flows** (the `flows` host model, [`crate::run::HostModel`]; with the `driver` model the NIC
//!   is [`Nic::for_driver`]'s and its host's application posts the flows,
//!   [`crate::apps::workload`]): the NIC keeps the flows whose source is its host. A flow is
//!   released at its `start`, or once the flow it is `after` completed ([`Nic::dependency_done`],
//!   called by the run when that flow's sender reports it) and `start` passed. A released flow's
//!   messages are posted as signalled RDMA Writes to its connection's QP in the stage, flows of one
//!   connection in release order, the send queue kept full. A flow completes at its last send
//!   completion (its last byte acknowledged); [`Nic::poll_finished`] hands its id to the run.
//! - **Transmit**: packets the stages emit become fabric [`Packet`](crate::fabric::Packet)s with a
//!   virtual payload (length + pattern checksum of the PSN) and their real wire size
//!   ([`wire::wire_bytes`]). For [`Transport::Mrc`] the EV picks the route: plane = the EV's plane,
//!   uSID path = `(ev_index / planes) % path_count(src, dst)` (EV `i` sits on plane `i % planes`,
//!   so this spreads each plane's EVs over every path). For [`Transport::Mrc1Ev`] every packet of a
//!   connection direction is pinned to one plane and one ECMP flow hash, so it follows one path
//!   that switches may reroute only after reconvergence. For [`Transport::SprayOblivious`] every
//!   packet takes a uniformly random plane and uSID path ([`spray`]), whatever its EV.
//! - **Side table**: the MRC headers do not travel in the fabric's `Copy` metadata. The fabric
//!   packet carries a tag (`transport_tag`) naming an entry of the sending NIC's side table
//!   (the stage's [`StagePacket`]s it sent, in order, module `side`); at the end of the event
//!   that sent them the world takes them ([`Nic::side_take`]) into its table by fabric slot,
//!   where the delivery finds them. Headers nobody takes wait only up to [`SIDE_SLOTS`] later
//!   packets: a delivery without its headers is dropped and counted in
//!   [`NicCounters::side_misses`]; it never decodes the wrong headers.
//! - **Shared path knowledge** (`mrc`): the NIC knows the uSID route each EV of each QP
//!   names. An EV retired for an untrimmed loss (an `EvEvent` to ASSUMED_BAD, reason `Loss`)
//!   retires every EV of the NIC (any QP) on that plane whose route has the same hops up to
//!   the destination's last switch, and a probe reply (an `EvEvent` to GOOD, reason
//!   `ProbeReply`) brings those back (`Nic::share_route`; the engine's `handle_shared_loss` /
//!   `handle_shared_recovery`).
//! - **Receive**: deliveries go to the owning shard's stage
//!   ([`mrc_firmware::datapath::stage::Datapath::handle_packets`]) with the trim and CE marks
//!   the fabric left set on the packet; untrimmed payloads have their checksum checked.
//! - **Pacing**: the fabric serializes each NIC port at line rate. The NIC pulls packets from
//!   the shards (a shard with a retransmission waiting first, then in turn over the QP
//!   positions, a turn ending with a data packet) only while its ports hold less than
//!   [`PUMP_BACKLOG_PKTS`] full packets per plane in total, then wakes when the earliest port
//!   finishes.
//! - **Timers**: the earliest deadline of any shard (the stage's ACK coalescing, the engine's
//!   ACK timeout, tail probe and EV probes) is an event; stale timer events are ignored.
//! - **Stall**, per QP: the longest time the QP had data outstanding and its cumulative ACK
//!   point (`una`) did not move ([`Nic::settle`] closes a stall still open when the run ends).
//! - **Host interface** ([`PcieConfig`], module `pcie`): a PCIe link at TLP granularity. The
//!   host rings a doorbell per batch of work requests and the stage sees them once their WQEs
//!   were fetched; a data packet leaves once its payload read's last completion arrived;
//!   placed payloads, CQEs and EV events are posted writes to the host, and the host sees a
//!   completion (and posts again) when its CQE arrived. Link rate, TLP overheads, credits,
//!   MPS/MRRS/RCB, read tags, latency and host memory latency.
//! - **Datapath blocks** (module `dp_clock`): each packet passes the RTL blocks' models in the
//!   datapath clock domain with the RTL's latency and initiation interval
//!   (`mrc_abi::device::datapath_timing`): a sent packet the EV sprayer and the header builder
//!   before its payload read (or its port), a received data packet the PSN tracker before the
//!   stage, a DP->FW report the CSR event queue; a busy block makes its inputs wait.
//! - **Firmware cores** ([`FirmwareConfig`], module `cores`): each shard's firmware is the NIC
//!   image's main loop (`mrc-nicloop`), run on one of N cores (16 at 2 GHz by default); each
//!   step of a loop costs core cycles from the cost table ([`fw_cost`]: guest instructions
//!   measured on the image under QEMU, times a CPI). Reports wait in a core's 32-entry CSR
//!   ring while it is busy (they reach it out of the CSR event queue); a full ring holds them
//!   in the stage, which then stops taking packets and sending.
//!
//! Not modelled (yet): the datapath's per-packet work that has no RTL block (ACK application,
//! placement), the host CPU, host memory bandwidth.

mod blocks;
mod config;
mod cores;
mod dp_clock;
mod driver;
mod flows;
pub mod fw_cost;
pub mod image;
mod pair;
mod pcie;
mod plan;
mod report;
mod service;
mod setup;
pub mod shard;
mod side;
mod tx;
pub mod wire;

pub use blocks::RtlReport;
pub use config::{
    DatapathLevel, DatapathLevelConfig, NicConfig, NicCounters, NicError, RtlBlock, Transport,
};
pub use cores::{Cpi, FirmwareConfig, FirmwareLevel, NicShape, MAX_CORES};
pub use driver::{DriverEngine, DriverEvent, Placement};
pub use pair::HostWrite;
pub use pcie::{FcCredits, PcieConfig};
pub use plan::{Peer, QpPlan};
pub use report::{BlockReport, FirmwareReport, NicReport, PcieReport};
pub use setup::cc_base_rtt;
use setup::{add_datapath, add_engine, add_tx, qp_attrs, shard_configs};
use shard::Shard;
pub use shard::{NarrowShard, WideShard, EVS, MAX_PLANES, NARROW_QPS, SHARD_QPS, WIN};
use side::SideTable;

use mrc_abi::wire::usid::clos::PairPaths;
use mrc_abi::wire::EvFormat;
pub use mrc_firmware::datapath::packet::Packet as StagePacket;
use mrc_firmware::datapath::packet::SendWr;
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::datapath::stage::{DatapathCounters, QpView, TxCounters};
use mrc_firmware::engine::ev_state::EvStats;
use mrc_firmware::engine::{EngineCounters, FwQpView, QpState};

use crate::core::rng::splitmix64;
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::{earliest, Duration, Time, PS_PER_NS};
use crate::fabric::{Fabric, PortId};
use crate::workload::{Flow, FlowResult};
use cores::Core;
use flows::FlowTable;

pub mod roce;
pub mod spray;

/// Link bytes a full data packet adds to its payload with SRv6 EVs (Ethernet, outer and inner
/// IPv6, UDP, BTH, MRH, EVX, TSX, RETH, FCS, preamble and gap): see [`wire`].
pub const HEADER_BYTES: u32 = wire::data_overhead_bytes(EvFormat::Srv6);
/// The responder ACKs after this many data packets of a QP (the engine's default; 8 with
/// 1 us measured worse: more ACKs, more spurious loss inference on the default run)...
pub const ACK_COALESCE_PKTS: u16 = 16;
/// ... or this long after the first unacknowledged one (ns).
pub const ACK_COALESCE_NS: u64 = 4_000;
/// Side-table entries per NIC at most (headers nobody took are dropped, oldest first, beyond).
pub const SIDE_SLOTS: usize = 8192;
/// Send queue entries per QP (the host's ring and the stage's queue).
const SEND_QUEUE: usize = <WideShard as mrc_firmware::capacity::Capacity>::SEND_QUEUE;
const _: () = assert!(<NarrowShard as mrc_firmware::capacity::Capacity>::SEND_QUEUE == SEND_QUEUE);
/// Full packets per plane the NIC keeps queued at its ports (in total over the planes).
pub const PUMP_BACKLOG_PKTS: u64 = 2;

const REGION_VA: u64 = 0x40_0000_0000;
const REGION_LEN: u64 = 1 << 40;
const RKEY: u32 = 0x200;

/// Event kinds of the NIC component (`data` = host in the low 32 bits).
pub mod ev {
    /// Release the flows due now (and start sending).
    pub const START: u32 = 0;
    /// A port finished serializing: pull more from the stages.
    pub const PUMP: u32 = 1;
    /// The shards' earliest timer deadline (checked against the armed time).
    pub const TIMER: u32 = 2;
    /// A DMA read completed (the head packet's payload, or fetched WQEs): send what is
    /// ready, post what was fetched.
    pub const DMA: u32 = 3;
    /// A firmware core's step ended, or an engine timer of an idle core is due.
    pub const FIRMWARE: u32 = 4;
    /// A datapath block's output is due: packets go to their ports or stages.
    pub const DATAPATH: u32 = 5;
    /// A port's transceiver is pulled or goes dark (`data`: host, port << 32, pull << 40).
    pub const TRANSCEIVER: u32 = 6;
}

/// One connection (QP) of a NIC.
#[derive(Clone, Copy, Debug)]
struct Conn {
    peer: u32,
    flow_hash: u64,
    /// `mrc`: the path of EV index 0 on each plane (the QP's EVs name paths from here on), so
    /// the QPs of a NIC, whose sprayers all start at EV 0, do not all begin on one spine.
    path_base: u32,
    /// `mrc` over SRv6: the uSID paths to `peer`, worked out at the first packet sent (the
    /// topology never changes; a connection to a new peer is a new `Conn`).
    paths: Option<PairPaths>,
    /// Remote address of the next posted message.
    next_va: u64,
    last_una: u32,
    last_progress: Time,
    max_stall: Duration,
    /// The longest una stall ending after the run's stall mark (the port event) and when it
    /// ended.
    mark_stall: Option<(Duration, Time)>,
}

impl Conn {
    /// `host`'s connection toward `peer`: its seeded flow hash and path base.
    fn new(cfg: &NicConfig, host: u32, peer: u32) -> Conn {
        let mut h = cfg.seed ^ (u64::from(host) << 32) ^ u64::from(peer);
        // The same for both ends: an ACK, sent on the EV of the packet it answers, takes
        // the spine that packet took.
        let mut pair =
            cfg.seed ^ 0x7061_7468 ^ (u64::from(host.min(peer)) << 32) ^ u64::from(host.max(peer));
        Conn {
            peer,
            flow_hash: splitmix64(&mut h),
            path_base: (splitmix64(&mut pair) >> 32) as u32,
            paths: None,
            next_va: REGION_VA,
            last_una: 0,
            last_progress: Time::ZERO,
            max_stall: Duration::ZERO,
            mark_stall: None,
        }
    }
}

/// One host's NIC.
pub struct Nic {
    host: u32,
    cfg: NicConfig,
    shards: Vec<Shard>,
    /// QPs per shard ([`SHARD_QPS`] or [`NARROW_QPS`]).
    width: usize,
    /// Per QPN: its position (shard `p / width`, slot `p % width`; see `positions`).
    pos_of: Vec<u32>,
    /// Per position: its QPN.
    qpn_at: Vec<u32>,
    conns: Vec<Conn>,
    flows: FlowTable,
    /// The headers of the packets sent, until the world takes them (module `side`).
    side: SideTable,
    next_tag: u64,
    timer_armed: Option<u64>,
    pump_armed: bool,
    release_armed: Option<Time>,
    /// The QP position (QPN) whose shard has the next transmit turn.
    tx_rr: usize,
    /// Per shard: may have a packet to send (cleared when its stage sends nothing, set by any
    /// input to the shard).
    shard_ready: Vec<bool>,
    /// Per shard: may have a retransmission waiting (set when its stage took a command or an
    /// ACK or NACK, cleared when it has none), so the pump asks only those shards.
    retx_maybe: Vec<bool>,
    /// Per shard: the engine's commands its stage had taken at the last look.
    cmds_seen: Vec<u64>,
    /// Per shard: its next timer deadline (stage or engine), as of its last input.
    shard_deadline: Vec<Option<u64>>,
    /// Shards whose deadline may have changed since it was cached.
    deadline_dirty: Vec<usize>,
    /// Shards that had input since the last service (entries to move between stage and
    /// engine, completions and EV events to collect).
    input_shards: Vec<usize>,
    ports: [PortId; MAX_PLANES],
    /// The host interface.
    link: pcie::PcieLink,
    /// Packets waiting for their payload reads.
    dma: pcie::DmaQueue,
    /// Work requests whose WQEs are being fetched.
    hostq: pcie::HostQueues,
    /// The time of the last input (what [`Nic::poll_finished`] goes by).
    now: Time,
    /// Scratch: a batch of work requests being posted.
    wr_buf: Vec<SendWr>,
    /// Payload read bytes in flight the pump does not count as backlog
    /// ([`tx::read_cover_bytes`]).
    read_cover: u64,
    dma_armed: Option<Time>,
    /// The firmware cores (firmware time on; module `cores`).
    cores: Vec<Core>,
    /// The cores whose shards may have work (an input since their last step).
    core_wake: cores::Woken,
    /// Their number (1 with firmware time off).
    cores_len: usize,
    touched: Vec<u32>,
    /// What the engines wrote for the host, not acted on yet (QPNs NIC-wide).
    host_writes: Vec<HostWrite>,
    /// QPs whose stall bookkeeping is due (they sent, heard or got work).
    stall_dirty: Vec<u32>,
    /// Scratch: (QPN, EV, answered) of the losses (`false`) and probe replies (`true`) the last
    /// service saw (`mrc` shares them).
    losses: Vec<(u32, u16, bool)>,
    /// The datapath's RTL blocks in their clock domain.
    dp: dp_clock::DpClock,
    /// `spray-oblivious`: the per-packet random route (None for the other transports).
    spray: Option<spray::SpraySelector>,
    counters: NicCounters,
    /// The rkey of the region every shard registered (its QPs' peers write with it).
    rkey: u32,
    /// Scratch of an image shard's iteration (module `cores`).
    iteration: image::Iteration,
    /// The host is the driver (module `driver`), not the flow table: `None` for a NIC of a
    /// scenario's workload.
    driver: Option<Box<driver::DriverPort>>,
}

fn ns(t: Time) -> u64 {
    t.as_ps() / PS_PER_NS
}

/// The uSID path (below `paths`) of EV `ev` of a QP with [`EVS`] EVs over `planes` planes,
/// from the connection's `base` (the same at both ends, so ACKs take the data's spines). EV
/// `i` is on plane `i % planes`, and each plane's `EVS / planes` EVs are spread over every
/// path: EV `i` takes path `(i / planes + base) % paths` when a plane has at least as many EVs
/// as there are paths; with fewer (8 planes of 32 EVs on the MRC paper's 256-spine planes) its
/// EVs take every `paths / evs`-th path from `base`, so that the connections of a leaf
/// together load every path (all connections on the first 32 spines would load them 8x). A
/// per-connection base also keeps every QP's first packets (all sprayers start at EV 0) off
/// one spine.
#[inline]
fn ev_path(ev: u32, planes: u32, paths: u32, base: u32) -> u32 {
    let planes = planes.max(1);
    let paths = paths.max(1);
    let per_plane = (EVS as u32 / planes).max(1);
    let step = if per_plane >= paths {
        1
    } else {
        paths / per_plane
    };
    ((ev / planes) * step + base % paths) % paths
}

/// The shard and slot of QP position `pos` with `width` QPs per shard.
#[inline]
fn shard_of(pos: u32, width: usize) -> (usize, u32) {
    (pos as usize / width, (pos as usize % width) as u32)
}

/// The QPN in slot `slot` of shard `k` (`u32::MAX` when there is none).
#[inline]
fn qpn_in(qpn_at: &[u32], k: usize, width: usize, slot: u32) -> u32 {
    qpn_at
        .get(k * width + slot as usize)
        .copied()
        .unwrap_or(u32::MAX)
}

/// The shard and slot of QP `qpn` given each QP's position (`pos_of`); a QPN the NIC does not
/// have gets a shard past the last.
#[inline]
fn place(pos_of: &[u32], qpn: u32, width: usize) -> (usize, u32) {
    shard_of(pos_of.get(qpn as usize).copied().unwrap_or(u32::MAX), width)
}

/// The QP positions of a NIC with connections `peers` (QPN order) sending `flows`: the QPs in
/// the order the host creates them, i.e. the order its flows first name their peers (a job
/// opens its connections in the order it will use them), then the receive-only ones in QPN
/// order. Position `p` is slot `p % width` of shard `p / width`. Returns (QPN -> position,
/// position -> QPN).
/// Where the NIC's round of turns over its `positions` QP positions starts: a seeded position
/// per host, so the NICs do not all begin (and stay in step) on the same QP positions, i.e.
/// the same peers.
fn first_turn(cfg: &NicConfig, host: u32, positions: usize) -> usize {
    let mut h = cfg.seed ^ 0x7475_726e ^ u64::from(host);
    (splitmix64(&mut h) % positions.max(1) as u64) as usize
}

fn positions(peers: &[Peer], flows: &[Flow]) -> (Vec<u32>, Vec<u32>) {
    let mut pos_of = vec![u32::MAX; peers.len()];
    let mut qpn_at = Vec::with_capacity(peers.len());
    let firsts = flows
        .iter()
        .filter_map(|f| peers.iter().position(|p| p.host == f.dst));
    for q in firsts.chain(0..peers.len()) {
        if pos_of[q] == u32::MAX {
            pos_of[q] = qpn_at.len() as u32;
            qpn_at.push(q as u32);
        }
    }
    (pos_of, qpn_at)
}

impl Nic {
    /// Builds `host`'s NIC with one connected QP per entry of `peers` (QPN = index, see
    /// [`QpPlan::peers_of`]) and the `flows` it sends (each `src` must be `host` and each `dst`
    /// one of `peers`); `background[i]` marks `flows[i]` as background (missing = main).
    ///
    /// # Errors
    /// [`NicError`] when a value is out of range or the engine refuses the setup.
    pub fn new(
        host: u32,
        cfg: NicConfig,
        peers: &[Peer],
        flows: &[Flow],
        background: &[bool],
    ) -> Result<Nic, NicError> {
        if cfg.planes == 0 || usize::from(cfg.planes) > MAX_PLANES {
            return Err(NicError::Config("planes must be 1..=8"));
        }
        if cfg.firmware.check().is_err() {
            return Err(NicError::Config(
                "firmware: cores must be 1..=64 and clock_mhz 1..=10000",
            ));
        }
        if cfg.transport == Transport::RoceEcmp {
            // RoCE is its own NIC model (`roce::RoceNic`); the run picks it.
            return Err(NicError::Config(
                "roce-ecmp runs on roce::RoceNic, not the MRC NIC",
            ));
        }
        cfg.pcie
            .validate()
            .map_err(|_| NicError::Config("pcie: a value out of range (PcieConfig::validate)"))?;
        let (dcfg, ecfg, mut nscc) = shard_configs(&cfg)?;
        let mut senders: Vec<u32> = flows.iter().map(|f| f.dst).collect();
        senders.sort_unstable();
        senders.dedup();
        setup::share_init(&mut nscc, senders.len());
        let image = cfg.firmware.shape() == NicShape::Image;
        if image {
            image::check(&cfg)?;
        }
        let width = if image {
            image::IMAGE_QPS
        } else if peers.len() <= NARROW_QPS {
            NARROW_QPS
        } else {
            SHARD_QPS
        };
        let mut shards: Vec<Shard> = Vec::new();
        let mut conns = Vec::with_capacity(peers.len());
        // The engines' QPs in creation order: every NIC of an all-to-all whose shards' turns
        // all began on the QPs of the lowest peers sent, round after round, to the same
        // quarter of the hosts (QPNs of one residue mod 4), so at the start most receivers
        // were idle and the rest took an incast for the first ~15 us. Created in the order of
        // the shifted workload, each NIC begins toward its own peers.
        let (pos_of, qpn_at) = positions(peers, flows);
        let mut rkey = RKEY;
        if image {
            (shards, rkey) = image::shards(&cfg, dcfg, peers, &qpn_at)?;
        }
        for (pos, &qpn) in qpn_at.iter().enumerate().filter(|_| !image) {
            let p = &peers[qpn as usize];
            let (shard, slot) = shard_of(pos as u32, width);
            if shard == shards.len() {
                let mut e =
                    Shard::new(width, dcfg, ecfg).map_err(|_| NicError::Engine("engine config"))?;
                e.set_blocks(blocks::SimBlocks::new(&cfg.datapath)?);
                e.register_region(MemRegion {
                    rkey: RKEY,
                    base_va: REGION_VA,
                    length: REGION_LEN,
                    access: Access::REMOTE_WRITE,
                })
                .map_err(|_| NicError::Engine("region"))?;
                shards.push(e);
            }
            let e = &mut shards[shard];
            let got = e.create_qp().map_err(|_| NicError::Engine("QP"))?;
            if got != slot {
                return Err(NicError::Engine("QP numbering"));
            }
            let attrs = qp_attrs(&cfg, nscc, p.remote_qpn);
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                e.modify_qp(slot, s, &attrs, 0)
                    .map_err(|_| NicError::Engine("QP transition"))?;
            }
        }
        // The stages take the QP contexts the engines wrote (setup costs no firmware time).
        let mut writes = Vec::new();
        for e in &mut shards {
            e.pump(0, &mut writes);
        }
        conns.extend(peers.iter().map(|p| Conn::new(&cfg, host, p.host)));
        let shard_count = shards.len();
        // (the setup's reports passed no CSR queue: the datapath clock starts after them)
        let csr_seen = shards.iter().map(|e| e.moved().0).collect();
        let first_turn = first_turn(&cfg, host, conns.len());
        let mut table = FlowTable::new(conns.len());
        for (i, f) in flows.iter().enumerate() {
            if f.src != host || f.bytes == 0 || f.msg_bytes == 0 {
                return Err(NicError::Config("a flow is not this host's or is empty"));
            }
            let Some(c) = conns.iter().position(|c| c.peer == f.dst) else {
                return Err(NicError::Config("a flow's destination has no connection"));
            };
            table.add(*f, c as u32, background.get(i).copied().unwrap_or(false));
        }
        let cores = if image {
            // (one core per shard: each runs the image's loop)
            Core::deal(shard_count, shard_count)
        } else if cfg.firmware.timed {
            Core::deal(usize::from(cfg.firmware.cores), shard_count)
        } else {
            Vec::new()
        };
        Ok(Nic {
            host,
            cfg,
            shards,
            width,
            pos_of,
            qpn_at,
            conns,
            flows: table,
            side: SideTable::default(),
            next_tag: 1,
            timer_armed: None,
            pump_armed: false,
            release_armed: None,
            tx_rr: first_turn,
            shard_ready: vec![true; shard_count],
            retx_maybe: vec![true; shard_count],
            cmds_seen: vec![0; shard_count],
            shard_deadline: vec![None; shard_count],
            deadline_dirty: (0..shard_count).collect(),
            input_shards: (0..shard_count).collect(),
            ports: [PortId(0); MAX_PLANES],
            link: pcie::PcieLink::new(cfg.pcie),
            dma: pcie::DmaQueue::default(),
            hostq: pcie::HostQueues::new(peers.len()),
            now: Time::ZERO,
            wr_buf: Vec::new(),
            read_cover: tx::read_cover_bytes(&cfg),
            dma_armed: None,
            rkey,
            iteration: image::Iteration::default(),
            core_wake: cores::Woken::new(cores.len()),
            cores,
            cores_len: if image {
                shard_count.max(1)
            } else {
                usize::from(cfg.firmware.cores.max(1))
            },
            touched: Vec::new(),
            host_writes: Vec::new(),
            stall_dirty: Vec::new(),
            losses: Vec::new(),
            dp: dp_clock::DpClock::new(csr_seen),
            spray: (cfg.transport == Transport::SprayOblivious)
                .then(|| spray::SpraySelector::new(cfg.seed, host)),
            counters: NicCounters::default(),
            driver: None,
        })
    }

    /// The host.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// Connections (QPs), QPN = index.
    pub fn connections(&self) -> u32 {
        self.conns.len() as u32
    }

    /// The peer host of connection `qpn`.
    pub fn peer(&self, qpn: u32) -> Option<u32> {
        self.conns.get(qpn as usize).map(|c| c.peer)
    }

    /// The datapath's state of QP `qpn` (send and receive progress, window, counters).
    pub fn qp(&self, qpn: u32) -> Option<QpView> {
        let (s, slot) = place(&self.pos_of, qpn, self.width);
        self.shards.get(s)?.qp(slot)
    }

    /// The firmware's state of QP `qpn` (QP state, congestion window, EV table summary).
    pub fn fw_qp(&self, qpn: u32) -> Option<FwQpView> {
        let (s, slot) = place(&self.pos_of, qpn, self.width);
        self.shards.get(s)?.fw_qp(slot)
    }

    /// EV `ev` of QP `qpn` as the firmware keeps it (state, plane, losses, ...).
    pub fn ev_stats(&self, qpn: u32, ev: u16) -> Option<EvStats> {
        let (s, slot) = place(&self.pos_of, qpn, self.width);
        self.shards.get(s)?.ev_stats(slot, ev)
    }

    /// Shards, and QPs per shard ([`SHARD_QPS`], or [`NARROW_QPS`] for a NIC with at most
    /// that many connections).
    pub fn shape(&self) -> (usize, usize) {
        (self.shards.len(), self.width)
    }

    /// The NIC's flows and what became of them, in the order given to [`Nic::new`].
    pub fn flow_results(&self) -> impl Iterator<Item = FlowResult> + '_ {
        self.flows.flows.iter().map(|f| f.result())
    }

    /// The next flow that completed (`(id, true)`) or failed (`(id, false)`) since the last
    /// call (global ids), as of the NIC's last input: the host learns of a completion when its
    /// CQE arrived (an [`ev::DMA`] is due then).
    pub fn poll_finished(&mut self) -> Option<(u32, bool)> {
        self.flows.poll_finished(self.now)
    }

    /// Whether [`Nic::poll_finished`] has a flow to return.
    #[inline]
    pub fn has_finished(&self) -> bool {
        self.flows.has_finished(self.now)
    }

    /// True when a send completed in error.
    pub fn failed(&self) -> bool {
        self.counters.completion_errors > 0
    }

    /// Longest stall of any QP.
    pub fn max_stall(&self) -> Duration {
        self.conns
            .iter()
            .map(|c| c.max_stall)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// When the last of its QPs moved again after the run's port event
    /// ([`NicConfig::stall_mark`]): the latest end, over the QPs, of the longest una stall
    /// ending after the event (QPs with no progress after it are not counted). `None` without
    /// a mark or when no QP advanced after it.
    pub fn recovered_at(&self) -> Option<Time> {
        self.conns
            .iter()
            .filter_map(|c| c.mark_stall.map(|(_, end)| end))
            .max()
    }

    /// Longest stall of QP `qpn`.
    pub fn qp_stall(&self, qpn: u32) -> Option<Duration> {
        self.conns.get(qpn as usize).map(|c| c.max_stall)
    }

    /// The model's counters.
    pub fn counters(&self) -> NicCounters {
        let mut c = self.counters;
        for s in &self.shards {
            let (ev, cmd) = s.moved();
            c.fw_events += ev;
            c.fw_commands += cmd;
            if let Shard::Image(i) = s {
                c.ev_state_changes += i.ev_events;
                c.bad_cqes += i.bad_cqes;
            }
        }
        c
    }

    /// Send queue entries per QP (the shape's).
    fn send_queue(&self) -> usize {
        if self.cfg.firmware.shape() == NicShape::Image {
            image::IMAGE_SEND_QUEUE
        } else {
            SEND_QUEUE
        }
    }

    /// Instructions the NIC's emulated cores retired since power-on (`None` unless its
    /// firmware level is `elf`).
    pub fn guest_instructions(&self) -> Option<u64> {
        let mut sum = None;
        for s in &self.shards {
            if let Shard::Image(i) = s {
                if let Some(n) = i.guest_instructions() {
                    *sum.get_or_insert(0) += n;
                }
            }
        }
        sum
    }

    /// Port `port`'s transceiver is pulled from its cage (`pull`) or raises loss of signal,
    /// at `now`: every firmware core of the NIC sees the module through its board (each
    /// core's port monitor finds it at its next pin read and takes the port down for its
    /// QPs). Only image shards have a board: returns how many shards saw the change.
    pub fn on_transceiver(&mut self, now: Time, port: usize, pull: bool) -> usize {
        self.now = self.now.max(now);
        let mut seen = 0;
        for s in &mut self.shards {
            if let Shard::Image(i) = s {
                seen += usize::from(i.transceiver(port, pull));
            }
        }
        seen
    }

    /// Why a shard's firmware stopped for good, if one did (the `elf` core faulted).
    pub fn firmware_fault(&self) -> Option<String> {
        self.shards.iter().find_map(|s| match s {
            Shard::Image(i) => i.fault.as_ref().map(|f| f.0.clone()),
            _ => None,
        })
    }

    /// The datapath stages' counters, summed over the shards.
    pub fn datapath_counters(&self) -> DatapathCounters {
        let mut t = DatapathCounters::default();
        for s in &self.shards {
            add_datapath(&mut t, &s.counters().0);
        }
        t
    }

    /// What the RTL blocks did, summed over the shards (all zero at the model level).
    pub fn rtl_report(&self) -> RtlReport {
        let mut t = RtlReport::default();
        for s in &self.shards {
            t.add(&s.rtl_report());
        }
        t
    }

    /// QPs the engines moved to ERROR so far (every shard).
    pub fn engine_qp_errors(&self) -> u64 {
        self.shards.iter().map(Shard::qp_errors).sum()
    }

    /// The firmware engines' counters, summed over the shards.
    pub fn engine_counters(&self) -> EngineCounters {
        let mut t = EngineCounters::default();
        for s in &self.shards {
            add_engine(&mut t, &s.counters().1);
        }
        t
    }

    /// The send-side counters of the stage (posts, data, retransmissions, ACKs, inferred
    /// losses, timeouts, NACKs), summed over every QP.
    pub fn tx_counters(&self) -> TxCounters {
        let mut t = TxCounters::default();
        for q in 0..self.connections() {
            if let Some(v) = self.qp(q) {
                add_tx(&mut t, &v.tx);
            }
        }
        t
    }

    /// Starts loading the state an input to this NIC reads first, beyond the `Nic` itself:
    /// the per-shard flags and deadlines, the connections and the first shard's head. Call it
    /// when the `Nic` is already in cache (it reads the buffers' addresses from it). A hint:
    /// changes nothing ([`crate::core::Handler::prefetch`]).
    #[inline]
    pub fn prefetch_state(&self) {
        use crate::core::sys::{prefetch_prefix, prefetch_start};
        prefetch_start(&self.shard_ready);
        prefetch_start(&self.retx_maybe);
        prefetch_start(&self.shard_deadline);
        prefetch_start(&self.cmds_seen);
        prefetch_start(&self.conns);
        prefetch_start(&self.pos_of);
        prefetch_start(&self.qpn_at);
        if let Some(s) = self.shards.first() {
            prefetch_prefix(s, 64);
        }
        // (a service reads the cores' wake bits, the first core, and the PCIe wires' oldest
        // bookings)
        prefetch_start(self.core_wake.words());
        if let Some(c) = self.cores.first() {
            crate::core::sys::prefetch(c);
        }
        self.link.prefetch();
    }

    /// Takes the headers of the packet with `tag` out of the side table, and drops those of
    /// older tags (packets that never entered the fabric). Tags are taken in sending order,
    /// once each (see module `side`).
    #[inline]
    pub fn side_take(&mut self, tag: u64) -> Option<StagePacket> {
        self.side.take(tag)
    }

    /// Slow DMA: host memory answers this NIC's reads (WQE fetches, payload reads) `extra_ns`
    /// later than its PCIe configuration says; 0 restores it.
    pub fn set_host_delay(&mut self, extra_ns: u64) {
        self.link.set_host_delay(extra_ns);
    }

    /// When the first flow is due (the run schedules [`ev::START`] then).
    pub fn first_due(&self) -> Option<Time> {
        self.flows.next_due()
    }

    /// [`ev::START`]: release the flows due now and send.
    pub fn start(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        if self.release_armed.is_some_and(|t| t <= now) {
            self.release_armed = None;
        }
        self.service(now, fab, s, me);
    }

    /// Flow `local` (its index in the list given to [`Nic::new`]) may go: the flow it waits
    /// for completed at `now`.
    pub fn dependency_done(
        &mut self,
        local: u32,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        self.flows.dependency_done(local, now);
        self.service(now, fab, s, me);
    }

    /// Flow `local` will never go: the flow it waits for failed.
    pub fn dependency_failed(&mut self, local: u32) {
        self.flows.dependency_failed(local);
    }

    /// [`ev::PUMP`]: a port freed up.
    pub fn on_pump(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        self.pump_armed = false;
        self.service(now, fab, s, me);
    }

    /// [`ev::DMA`] at `now`: sends the packets whose payload reads completed and posts the
    /// work requests whose WQEs arrived.
    pub fn on_dma(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        if self.dma_armed.is_some_and(|a| a <= now) {
            self.dma_armed = None;
        }
        self.link.prune(now);
        while let Some((shard, tx)) = self.dma.pop_ready(now) {
            self.send(shard, tx, fab, s);
        }
        while let Some((qpn, wr)) = self.hostq.pop_ready(now) {
            self.fetched(now, qpn, wr);
        }
        self.arm_dma(s, me);
        self.service(now, fab, s, me);
    }

    /// Arms [`ev::DMA`] for the earliest read still to complete, or completion the host has
    /// yet to see.
    pub(super) fn arm_dma(&mut self, s: &mut Scheduler<'_>, me: ComponentId) {
        let mut next = earliest(self.dma.next_ready(), self.hostq.next_ready());
        next = earliest(next, self.flows.next_finish());
        if let Some(d) = self.driver.as_ref() {
            next = earliest(next, d.next_due_after(self.now));
        }
        if let Some(t) = next {
            if self.dma_armed.is_none_or(|a| a > t)
                && s.at(t, me, ev::DMA, u64::from(self.host)).is_ok()
            {
                self.dma_armed = Some(t);
            }
        }
    }

    fn arm_release(&mut self, s: &mut Scheduler<'_>, me: ComponentId) {
        let Some(t) = self.flows.next_due() else {
            return;
        };
        let t = t.max(s.now());
        if self.release_armed.is_some_and(|a| a <= t) {
            return;
        }
        if s.at(t, me, ev::START, u64::from(self.host)).is_ok() {
            self.release_armed = Some(t);
        }
    }

    fn arm_timer(&mut self, s: &mut Scheduler<'_>, me: ComponentId) {
        let mut dirty = std::mem::take(&mut self.deadline_dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &k in &dirty {
            if let (Some(e), Some(d)) = (self.shards.get_mut(k), self.shard_deadline.get_mut(k)) {
                // (firmware time on: the loop's timers are its core's, `cores`)
                *d = if self.cfg.firmware.timed {
                    e.dp_deadline()
                } else {
                    e.poll_timeout()
                };
            }
        }
        dirty.clear();
        self.deadline_dirty = dirty;
        let Some(t) = self.shard_deadline.iter().flatten().copied().min() else {
            return;
        };
        let t = t.max(ns(s.now()));
        if self.timer_armed.is_some_and(|a| a <= t) {
            return;
        }
        if s.at(Time::from_ns(t), me, ev::TIMER, u64::from(self.host))
            .is_ok()
        {
            self.timer_armed = Some(t);
        }
    }
}

#[cfg(test)]
mod tests;
