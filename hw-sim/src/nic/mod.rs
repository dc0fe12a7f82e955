//! The NIC model: the real `mrc_firmware` engine ([`mrc_firmware::engine::Engine`]) on every
//! host, joined to the fabric.
//!
//! # What it does
//! - **Connections**: a NIC opens one RC QP per peer it exchanges flows with ([`QpPlan`]); the
//!   QP sends its own flows and receives the peer's. QPN `i` is the connection to the host's
//!   `i`-th smallest peer, so both ends are wired before either exists.
//! - **Engine shards**: a NIC's QPs live in engines of [`SHARD_QPS`] QPs each (the QP at
//!   position `p` is slot `p % SHARD_QPS` of shard `p / SHARD_QPS`; positions follow the order
//!   the host creates its QPs, the order its flows first name their peers, then the
//!   receive-only QPs by QPN), or in one engine of [`NARROW_QPS`] QPs when the
//!   NIC has at most that many connections (same slots, under half the memory: [`shard`]), so a NIC's
//!   memory grows with the connections its workload opens (about 32 KB per QP) rather than
//!   with the largest workload's. QPs are
//!   independent inside an engine; the shards stand for firmware cores each owning a share of
//!   the QPs. The model translates QPNs at the shard boundary (the wire carries the NIC-wide
//!   QPN).
//! - **Flows**: the NIC keeps the flows whose source is its host. A flow is released at its
//!   `start`, or once the flow it is `after` completed ([`Nic::dependency_done`], called by the
//!   run when that flow's sender reports it) and `start` passed. A released flow's messages are
//!   posted as signalled RDMA Writes on its connection's QP, flows of one connection in release
//!   order, the send queue kept full. A flow completes at its last send completion (its last
//!   byte acknowledged); [`Nic::poll_finished`] hands its id to the run.
//! - **Transmit**: packets the engines emit become fabric [`Packet`]s with a virtual payload
//!   (length + pattern checksum of the PSN) and their real wire size ([`wire::wire_bytes`]). For
//!   [`Transport::Mrc`] the EV picks the route: plane = the EV's plane, uSID path =
//!   `(ev_index / planes) % path_count(src, dst)` (EV `i` sits on plane `i % planes`, so this
//!   spreads each plane's EVs over every path). For [`Transport::Mrc1Ev`] every packet of a
//!   connection direction is pinned to one plane and one ECMP flow hash, so it follows one path
//!   that switches may reroute only after reconvergence. For [`Transport::SprayOblivious`]
//!   every packet takes a uniformly random plane and uSID path ([`spray`]), whatever its EV.
//! - **Side table**: the MRC headers do not travel in the fabric's `Copy` metadata. The fabric
//!   packet carries a tag (`transport_tag`) naming an entry of the sending NIC's side table
//!   (the [`TxPacket`]s in flight, module `side`); a delivery takes its entry out. A packet still
//!   in flight when [`SIDE_SLOTS`] later ones were sent loses its entry: its delivery is
//!   dropped and counted in [`NicCounters::side_misses`]; it never decodes the wrong headers.
//! - **Shared path knowledge** (`mrc`): the NIC knows the uSID route each EV of each QP
//!   names. An EV retired for an untrimmed loss retires every EV of the NIC (any QP) on that
//!   plane whose route has the same hops up to the destination's last switch, and a probe
//!   reply brings those back (`Nic::share_route`; the engine's `handle_shared_loss` /
//!   `handle_shared_recovery`).
//! - **Receive**: deliveries go to the owning shard's [`mrc_firmware::engine::Engine::handle_tx_packet`] with the trim
//!   and CE state the fabric left; untrimmed payloads have their checksum checked.
//! - **Pacing**: the fabric serializes each NIC port at line rate. The NIC pulls packets from
//!   the shards (a shard with a retransmission waiting first, then in turn over the QP
//!   positions, a turn ending with a data packet) only while its ports hold less than [`PUMP_BACKLOG_PKTS`] full
//!   packets per plane in total, then wakes when the earliest port finishes.
//! - **Timers**: the earliest deadline of any shard ([`mrc_firmware::engine::Engine::poll_timeout`]) is an event;
//!   stale timer events are ignored.
//! - **Stall**, per QP: the longest time the QP had data outstanding and its cumulative ACK
//!   point (`una`) did not move ([`Nic::settle`] closes a stall still open when the run ends).
//!
//! - **Host interface** ([`PcieConfig`]): a released flow's work requests reach the engine
//!   after the doorbell and WQE fetch; a data packet leaves only once its payload read
//!   completed (latency, bandwidth).
//! - **Firmware cores** ([`FirmwareCost`], off by default): each received packet's engine call
//!   occupies one of N cores for a fixed time; its effects appear when the call ends.
//!
//! Not modelled (yet): the datapath reference models' cycle counts, host CPU and memory.

mod config;
mod flows;
mod pcie;
mod plan;
mod setup;
pub mod shard;
mod side;
pub mod wire;

pub use config::{FirmwareCost, NicConfig, NicCounters, NicError, Transport};
pub use pcie::PcieConfig;
pub use plan::{Peer, QpPlan};
pub use setup::cc_base_rtt;
use setup::{add_engine, add_requester, qp_attrs};
use shard::Shard;
pub use shard::{NarrowEngine, SimEngine, NARROW_QPS, SHARD_QPS};
use side::SideTable;

use mrc_abi::wire::EvFormat;
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::datapath::{AckGenConfig, TrimMark};
use mrc_firmware::engine::cc::NsccParams;
use mrc_firmware::engine::{
    CompletionKind, EngineConfig, EngineCounters, LocalBuf, Qp, QpState, RequesterCounters, RxMeta,
    RxVerdict, SendWr, TxBody, TxPacket,
};

use mrc_firmware::engine::ev_state::{EvReason, EvState};

use crate::core::rng::splitmix64;
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::{Duration, Time, PS_PER_NS, PS_PER_S};
use crate::fabric::{flags, Ecn, Fabric, Packet, Payload, PortId, Route, Topology, TransportKind};
use crate::workload::{Flow, FlowResult};
use flows::{wr_id, wr_parts, FlowTable};
use std::collections::VecDeque;

pub mod roce;
pub mod spray;

/// EVs per QP.
pub const EVS: usize = 256;
/// Most planes (NIC ports) a NIC has: the MRC paper's fabric has 8.
pub const MAX_PLANES: usize = 8;
/// PSN window of a QP.
pub const WIN: usize = 512;
/// One QP of a [`SimEngine`] or [`NarrowEngine`]: 256 EVs over up to [`MAX_PLANES`] planes, a
/// 512-PSN window, 32-entry send and receive queues.
pub type SimQp = Qp<EVS, MAX_PLANES, WIN, 8, 32, 32>;

/// Link bytes a full data packet adds to its payload with SRv6 EVs (Ethernet, outer and inner
/// IPv6, UDP, BTH, MRH, EVX, TSX, RETH, FCS, preamble and gap): see [`wire`].
pub const HEADER_BYTES: u32 = wire::data_overhead_bytes(EvFormat::Srv6);
/// The responder ACKs after this many data packets of a QP (the engine's default; 8 with
/// 1 us measured worse: more ACKs, more spurious loss inference on the default run)...
pub const ACK_COALESCE_PKTS: u16 = 16;
/// ... or this long after the first unacknowledged one (ns).
pub const ACK_COALESCE_NS: u64 = 4_000;
/// Side-table slots per NIC at most (a packet still decodes unless 8192 later ones were sent
/// while it was in flight).
pub const SIDE_SLOTS: usize = 8192;
/// A sending QP's initial window, in equal shares of the NIC's loaded bandwidth-delay product.
const INIT_SHARES: u64 = 8;
/// Full packets per plane the NIC keeps queued at its ports (in total over the planes).
pub const PUMP_BACKLOG_PKTS: u64 = 2;

const REGION_VA: u64 = 0x40_0000_0000;
const REGION_LEN: u64 = 1 << 40;
const RKEY: u32 = 0x200;

/// Event kinds of the NIC component (`data` = host in the low 32 bits).
pub mod ev {
    /// Release the flows due now (and start sending).
    pub const START: u32 = 0;
    /// A port finished serializing: pull more from the engine.
    pub const PUMP: u32 = 1;
    /// The engine's timer deadline (checked against the armed time).
    pub const TIMER: u32 = 2;
    /// The head packet's payload read completed: send what is ready.
    pub const DMA: u32 = 3;
    /// A firmware core finished an engine call: its effects take place.
    pub const FIRMWARE: u32 = 4;
}

/// One connection (QP) of a NIC.
#[derive(Clone, Copy, Debug)]
struct Conn {
    peer: u32,
    flow_hash: u64,
    /// `mrc`: the path of EV index 0 on each plane (the QP's EVs name paths from here on), so
    /// the QPs of a NIC, whose sprayers all start at EV 0, do not all begin on one spine.
    path_base: u32,
    /// Remote address of the next posted message.
    next_va: u64,
    last_una: u32,
    last_progress: Time,
    max_stall: Duration,
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
    /// The headers of the packets in flight (module `side`).
    side: SideTable,
    next_tag: u64,
    timer_armed: Option<u64>,
    pump_armed: bool,
    release_armed: Option<Time>,
    /// The QP position (QPN) whose shard has the next transmit turn.
    tx_rr: usize,
    /// Per shard: may have a packet to send (cleared when `poll_transmit` says no, set by any
    /// input to the shard).
    shard_ready: Vec<bool>,
    /// Per shard: its engine's next timer deadline, as of its last input.
    shard_deadline: Vec<Option<u64>>,
    /// Shards whose deadline may have changed since it was cached.
    deadline_dirty: Vec<usize>,
    /// Shards that had input since the last service (completions and EV events to collect).
    input_shards: Vec<usize>,
    ports: [PortId; MAX_PLANES],
    dma: pcie::DmaQueue,
    dma_armed: Option<Time>,
    /// Per firmware core: busy until.
    fw_free: Vec<Time>,
    /// Engine calls in progress: (done, headers, trimmed, payload length, CE).
    fw_q: VecDeque<(Time, TxPacket, bool, u32, bool)>,
    fw_armed: Option<Time>,
    touched: Vec<u32>,
    /// QPs whose stall bookkeeping is due (they sent, heard or got work).
    stall_dirty: Vec<u32>,
    /// Scratch: (QPN, EV, answered) of the losses (`false`) and probe replies (`true`) the last
    /// service saw (`mrc` shares them).
    losses: Vec<(u32, u16, bool)>,
    /// `spray-oblivious`: the per-packet random route (None for the other transports).
    spray: Option<spray::SpraySelector>,
    counters: NicCounters,
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
        if cfg.transport == Transport::RoceEcmp {
            // RoCE is its own NIC model (`roce::RoceNic`); the run picks it.
            return Err(NicError::Config(
                "roce-ecmp runs on roce::RoceNic, not the MRC NIC",
            ));
        }
        let ecfg = EngineConfig {
            mtu_payload: cfg.mtu_payload,
            reorder_tx: cfg.reorder_tx,
            // RACK's window: a hole is lost once a packet sent one unloaded fabric RTT after
            // it arrived. Spraying's reordering is the paths' queueing skew (measured on the
            // default run: 2-3 us at 4.7 us RTT; 1 us windows infer 78k spurious losses).
            reorder_ns: u32::try_from(cfg.base_rtt.as_ps() / PS_PER_NS).unwrap_or(u32::MAX),
            ack: AckGenConfig {
                coalesce_pkts: ACK_COALESCE_PKTS,
                coalesce_ns: ACK_COALESCE_NS,
                ack_on_gap: true,
            },
            ..EngineConfig::default()
        };
        let nic_bps = cfg.port_bps.saturating_mul(u64::from(cfg.planes));
        // NSCC's base RTT is the fabric's unloaded RTT: its queueing delay is the samples'
        // excess over it. See `cc_base_rtt`.
        let rtt_ns = (cfg.base_rtt.as_ps() / PS_PER_NS).max(1);
        let mut nscc = NsccParams::for_link(nic_bps, rtt_ns, cfg.mtu_payload)
            .map_err(|_| NicError::Engine("NSCC parameters"))?;
        // Each sending QP starts with its share of the NIC's bandwidth-delay product (it may
        // grow to the whole): 63 QPs of an all-to-all each starting at the full BDP put 63
        // BDPs into the fabric at once (measured: 2.5x -> 2.0x of ideal on a 64-host
        // all-to-all; a permutation, one sending QP, is unchanged).
        // The window must cover what an ACK really takes on an idle fabric (coalescing and the
        // NIC's port backlog on top of the fabric RTT, `cc_base_rtt`), or a lone QP cannot
        // fill its link (measured: p50 FCT 203 -> 192 us on the default permutation without
        // the failure); NSCC's delay target stays on the fabric RTT.
        let loaded_bdp = u64::try_from(
            u128::from(nic_bps) * u128::from(cc_base_rtt(&cfg).as_ps()) / 8 / u128::from(PS_PER_S),
        )
        .unwrap_or(u64::MAX);
        nscc.init_cwnd_bytes = nscc.init_cwnd_bytes.max(loaded_bdp);
        nscc.max_cwnd_bytes = nscc.max_cwnd_bytes.max(loaded_bdp.saturating_mul(3) / 2);
        let mut senders: Vec<u32> = flows.iter().map(|f| f.dst).collect();
        senders.sort_unstable();
        senders.dedup();
        // [`INIT_SHARES`] equal shares (never more than the whole): the first round trips of
        // an all-to-all ran at ~2.6 MTU per QP and one equal share left the NICs below line
        // rate for ~15 us (measured on the default run, seed 1: 1 share 1.34x of ideal, 2
        // shares 1.31x, 4 1.28x, 8 1.285x with the longest stall 45-50 us throughout; seeds 2
        // and 3 at 8 shares: 1.285x and 1.282x, stalls 48 and 49 us).
        nscc.init_cwnd_bytes = (nscc.init_cwnd_bytes.saturating_mul(INIT_SHARES)
            / senders.len().max(1) as u64)
            .min(nscc.init_cwnd_bytes)
            .max(nscc.min_cwnd_bytes);
        let width = if peers.len() <= NARROW_QPS {
            NARROW_QPS
        } else {
            SHARD_QPS
        };
        let mut shards: Vec<Shard> = Vec::new();
        let mut conns = Vec::with_capacity(peers.len());
        // The engines' QPs in creation order: every NIC of an all-to-all whose shards' turns
        // all began on the QPs of the lowest peers sent, round after round, to the same
        // quarter of the hosts (QPNs of one residue mod 4), so at the start most receivers
        // were idle and the rest took an incast (measured on the default run, seed 1: 48 of
        // 64 receivers below a quarter of the mean rate at 4 us, 24 at 7 us, none only at 15
        // us). Created in the order of the shifted workload, each NIC begins toward its own
        // peers.
        let (pos_of, qpn_at) = positions(peers, flows);
        for (pos, &qpn) in qpn_at.iter().enumerate() {
            let p = &peers[qpn as usize];
            let (shard, slot) = shard_of(pos as u32, width);
            if shard == shards.len() {
                let mut e =
                    Shard::new(width, ecfg).map_err(|_| NicError::Engine("engine config"))?;
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
        for p in peers {
            let mut h = cfg.seed ^ (u64::from(host) << 32) ^ u64::from(p.host);
            // The same for both ends: an ACK, sent on the EV of the packet it answers, takes
            // the spine that packet took.
            let mut pair = cfg.seed
                ^ 0x7061_7468
                ^ (u64::from(host.min(p.host)) << 32)
                ^ u64::from(host.max(p.host));
            conns.push(Conn {
                peer: p.host,
                flow_hash: splitmix64(&mut h),
                path_base: (splitmix64(&mut pair) >> 32) as u32,
                next_va: REGION_VA,
                last_una: 0,
                last_progress: Time::ZERO,
                max_stall: Duration::ZERO,
            });
        }
        let shard_count = shards.len();
        // Where the NIC's round of turns starts: a seeded position per host, so the NICs do
        // not all begin (and stay in step) on the same QP positions, i.e. the same peers.
        let first_turn = {
            let mut h = cfg.seed ^ 0x7475_726e ^ u64::from(host);
            (splitmix64(&mut h) % conns.len().max(1) as u64) as usize
        };
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
            shard_deadline: vec![None; shard_count],
            deadline_dirty: (0..shard_count).collect(),
            input_shards: (0..shard_count).collect(),
            ports: [PortId(0); MAX_PLANES],
            dma: pcie::DmaQueue::default(),
            dma_armed: None,
            fw_free: vec![Time::ZERO; usize::from(cfg.firmware.cores.max(1))],
            fw_q: VecDeque::new(),
            fw_armed: None,
            touched: Vec::new(),
            stall_dirty: Vec::new(),
            losses: Vec::new(),
            spray: (cfg.transport == Transport::SprayOblivious)
                .then(|| spray::SpraySelector::new(cfg.seed, host)),
            counters: NicCounters::default(),
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

    /// The QP `qpn` (read-only: requester, EV table and congestion state for diagnostics).
    pub fn qp(&self, qpn: u32) -> Option<&SimQp> {
        let (s, slot) = place(&self.pos_of, qpn, self.width);
        self.shards.get(s)?.qp(slot)
    }

    /// Engine shards, and QPs per shard ([`SHARD_QPS`], or [`NARROW_QPS`] for a NIC with at
    /// most that many connections).
    pub fn shape(&self) -> (usize, usize) {
        (self.shards.len(), self.width)
    }

    /// The NIC's flows and what became of them, in the order given to [`Nic::new`].
    pub fn flow_results(&self) -> impl Iterator<Item = FlowResult> + '_ {
        self.flows.flows.iter().map(|f| f.result())
    }

    /// The next flow that completed (`(id, true)`) or failed (`(id, false)`) since the last
    /// call (global ids).
    pub fn poll_finished(&mut self) -> Option<(u32, bool)> {
        self.flows.finished.pop_front()
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

    /// Longest stall of QP `qpn`.
    pub fn qp_stall(&self, qpn: u32) -> Option<Duration> {
        self.conns.get(qpn as usize).map(|c| c.max_stall)
    }

    /// The model's counters.
    pub fn counters(&self) -> NicCounters {
        self.counters
    }

    /// The engine counters summed over the shards.
    pub fn engine_counters(&self) -> EngineCounters {
        let mut t = EngineCounters::default();
        for e in &self.shards {
            add_engine(&mut t, &e.counters());
        }
        t
    }

    /// The requester counters summed over every QP.
    pub fn requester_counters(&self) -> RequesterCounters {
        let mut t = RequesterCounters::default();
        for q in 0..self.connections() {
            if let Some(r) = self.qp(q).and_then(|q| q.requester()) {
                add_requester(&mut t, &r.counters());
            }
        }
        t
    }

    /// The headers of a packet this NIC sent with `tag`, if its slot still holds it.
    pub fn side_lookup(&self, tag: u64) -> Option<TxPacket> {
        self.side.get(tag)
    }

    /// Takes the headers of the packet with `tag` out of the side table (its delivery: the
    /// fabric delivers a packet at most once).
    pub fn side_take(&mut self, tag: u64) -> Option<TxPacket> {
        self.side.take(tag)
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
        self.pump(now, fab, s, me);
        self.settle_dirty(now);
        self.arm_timer(s, me);
    }

    /// [`ev::DMA`] at `now`: sends the packets whose payload reads completed.
    pub fn on_dma(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        if self.dma_armed.is_some_and(|a| a <= now) {
            self.dma_armed = None;
        }
        while let Some((shard, tx)) = self.dma.pop_ready(now) {
            self.send(shard, tx, fab, s);
        }
        if let Some(t) = self.dma.next_ready() {
            if self.dma_armed.is_none_or(|a| a > t)
                && s.at(t, me, ev::DMA, u64::from(self.host)).is_ok()
            {
                self.dma_armed = Some(t);
            }
        }
        self.pump(now, fab, s, me);
        self.settle_dirty(now);
        self.arm_timer(s, me);
    }

    /// [`ev::TIMER`] at `now`: fires the engines' timers when this is the armed deadline.
    pub fn on_timer(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.timer_armed != Some(ns(now)) {
            return; // superseded by an earlier deadline, which re-armed on firing
        }
        self.timer_armed = None;
        for (k, e) in self.shards.iter_mut().enumerate() {
            if self.shard_deadline[k].is_some_and(|t| t <= ns(now)) {
                e.handle_timeout(ns(now));
                self.shard_ready[k] = true;
                self.input_shards.push(k);
                self.deadline_dirty.push(k);
                let first = (k * self.width).min(self.qpn_at.len());
                let last = (first + self.width).min(self.qpn_at.len());
                self.stall_dirty
                    .extend_from_slice(&self.qpn_at[first..last]);
            }
        }
        self.service(now, fab, s, me);
    }

    /// A fabric delivery for this host; `hdr` is the sender's side-table entry for it.
    pub fn receive(
        &mut self,
        now: Time,
        pkt: &Packet,
        hdr: Option<TxPacket>,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += u64::from(pkt.size_bytes);
        let Some(tx) = hdr else {
            self.counters.side_misses += 1;
            return;
        };
        let trimmed = pkt.is_trimmed();
        if !trimmed && !pkt.payload.verify() {
            self.counters.bad_payload += 1;
            return;
        }
        let (shard, _) = place(&self.pos_of, tx.dest_qpn, self.width);
        if shard >= self.shards.len() {
            self.counters.unknown_qpn += 1;
            return;
        }
        let payload_len = if trimmed { 0 } else { pkt.payload.len };
        let ce = pkt.ecn == Ecn::Ce;
        if self.cfg.firmware.ns_per_call == 0 {
            self.handle_rx(now, tx, trimmed, payload_len, ce);
            self.service(now, fab, s, me);
            return;
        }
        // The engine call occupies the earliest free core; its effects appear when it ends.
        let cost = Duration::from_ns(self.cfg.firmware.ns_per_call);
        let Some(core) = self.fw_free.iter_mut().min() else {
            return;
        };
        let done = (*core).max(now).saturating_add(cost);
        *core = done;
        self.fw_q.push_back((done, tx, trimmed, payload_len, ce));
        if self.fw_armed.is_none_or(|a| a > done)
            && s.at(done, me, ev::FIRMWARE, u64::from(self.host)).is_ok()
        {
            self.fw_armed = Some(done);
        }
    }

    /// [`ev::FIRMWARE`] at `now`: the engine calls whose core time ended now take effect.
    pub fn on_firmware(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.fw_armed.is_some_and(|a| a <= now) {
            self.fw_armed = None;
        }
        while let Some(&(done, tx, trimmed, len, ce)) = self.fw_q.front() {
            if done > now {
                if self.fw_armed.is_none_or(|a| a > done)
                    && s.at(done, me, ev::FIRMWARE, u64::from(self.host)).is_ok()
                {
                    self.fw_armed = Some(done);
                }
                break;
            }
            self.fw_q.pop_front();
            self.handle_rx(now, tx, trimmed, len, ce);
        }
        self.service(now, fab, s, me);
    }

    fn handle_rx(&mut self, now: Time, tx: TxPacket, trimmed: bool, payload_len: u32, ce: bool) {
        let (shard, slot) = place(&self.pos_of, tx.dest_qpn, self.width);
        let Some(e) = self.shards.get_mut(shard) else {
            self.counters.unknown_qpn += 1;
            return;
        };
        // The engine's QPN is the slot in its shard (the wire carries the NIC-wide QPN).
        let mut pkt = tx;
        pkt.dest_qpn = slot;
        let trim = if trimmed {
            TrimMark::Trimmed
        } else {
            TrimMark::None
        };
        let meta = RxMeta { payload_len, ce };
        if let RxVerdict::Place { len, .. } = e.handle_tx_packet(ns(now), &pkt, trim, meta) {
            self.counters.placed_bytes += u64::from(len);
        }
        self.shard_ready[shard] = true;
        self.input_shards.push(shard);
        self.deadline_dirty.push(shard);
        self.stall_dirty.push(tx.dest_qpn);
    }

    /// Closes the stall of every QP still outstanding at `now` (call when the run ends).
    pub fn settle(&mut self, now: Time) {
        for q in 0..self.conns.len() {
            self.track_stall(q, now);
        }
    }

    /// After any engine input: completions and EV events of the `shards` that had input,
    /// releases, posting, transmit, timers, stalls.
    fn service(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        let mut inputs = std::mem::take(&mut self.input_shards);
        let mut losses = std::mem::take(&mut self.losses);
        inputs.sort_unstable();
        inputs.dedup();
        for &k in &inputs {
            let Some(e) = self.shards.get_mut(k) else {
                continue;
            };
            while let Some(x) = e.poll_ev_event() {
                self.counters.ev_state_changes += 1;
                let qpn = qpn_in(&self.qpn_at, k, self.width, x.qpn);
                if x.event.new == EvState::AssumedBad && x.event.reason == EvReason::Loss {
                    losses.push((qpn, x.event.ev, false));
                } else if x.event.new == EvState::Good && x.event.reason == EvReason::ProbeReply {
                    losses.push((qpn, x.event.ev, true));
                }
            }
            while let Some(c) = e.poll_completion() {
                if c.kind != CompletionKind::Send {
                    continue;
                }
                let (flow, msg) = wr_parts(c.wr_id);
                let len = self
                    .flows
                    .flows
                    .get(flow as usize)
                    .map_or(0, |f| f.msg_len(msg));
                let ok = c.status.is_ok();
                if !ok {
                    self.counters.completion_errors += 1;
                }
                self.flows.on_completion(flow, len, ok, now);
                touched.push(qpn_in(&self.qpn_at, k, self.width, c.qpn));
            }
        }
        inputs.clear();
        self.input_shards = inputs;
        if self.cfg.transport == Transport::Mrc {
            for &(qpn, ev, up) in &losses {
                self.share_route(now, fab.topology(), qpn, ev, up);
            }
        }
        losses.clear();
        self.losses = losses;
        self.flows
            .release_due(now, self.cfg.pcie.post_delay(), &mut touched);
        touched.sort_unstable();
        touched.dedup();
        for &q in &touched {
            // An idle QP getting work starts its stall clock now, not at its last ACK.
            self.track_stall(q as usize, now);
            self.post(q);
        }
        self.pump(now, fab, s, me);
        self.stall_dirty.extend_from_slice(&touched);
        self.touched = touched;
        self.settle_dirty(now);
        self.arm_release(s, me);
        self.arm_timer(s, me);
    }

    /// `mrc`: QP `qpn` lost a packet (untrimmed) on EV `ev`, which it retired. The NIC wrote
    /// the route each EV names, so it shares the loss: every QP (this one too) whose EVs on
    /// that plane name a route with the same hops up to the destination's last switch (a loss
    /// on `[spine s, leaf L, host h]` makes `[spine s, leaf L, *]` suspect) retires those EVs
    /// too (the engine's `handle_shared_loss`). Without this every QP found a dead link by
    /// losing packets of its own on it, one per EV, for as long as its sprayer came back to
    /// those EVs (measured on the default run: losses 1,401 -> 358 on seed 1, completion
    /// 1.28x -> 1.18-1.22x of ideal on seeds 1-3). A loss on the last hop of a one-hop route
    /// (hosts of one leaf) retires nothing elsewhere. Sharing by the common part of two lost
    /// routes (e.g. `[s, L1, *]` and `[s, L2, *]`: the uplink to `s`) was tried and measured
    /// worse (a spurious loss on one route then retired a whole spine).
    ///
    /// A probe reply on an EV (`up`) is shared the same way: the route answered, so the EVs
    /// that name it come back (the engine's `handle_shared_recovery`); EVs retired by a shared
    /// loss leave the probing of their route to the EV that lost the packet.
    fn share_route(&mut self, now: Time, topo: &Topology, qpn: u32, ev: u16, up: bool) {
        let planes = u32::from(self.cfg.planes).max(1);
        let Some(c) = self.conns.get(qpn as usize) else {
            return;
        };
        let n = topo.path_count(self.host, c.peer);
        let path = ev_path(u32::from(ev), planes, n, c.path_base);
        let Ok(route) = topo.usid_route(self.host, c.peer, path) else {
            return;
        };
        let len = route.hops_left();
        if len < 2 {
            return;
        }
        let plane = u32::from(ev) % planes;
        for (q, other) in self.conns.iter().enumerate() {
            // The QP itself too: its other EVs on the plane that name the same path.
            if topo.path_count(self.host, other.peer) != n {
                continue;
            }
            let Ok(r) = topo.usid_route(self.host, other.peer, path) else {
                continue;
            };
            if r.hops_left() != len
                || !r
                    .remaining()
                    .take(len - 1)
                    .eq(route.remaining().take(len - 1))
            {
                continue;
            }
            let (k, slot) = place(&self.pos_of, q as u32, self.width);
            let Some(e) = self.shards.get_mut(k) else {
                continue;
            };
            let mut hit = false;
            for i in (plane..EVS as u32).step_by(planes as usize) {
                if ev_path(i, planes, n, other.path_base) == path {
                    hit |= if up {
                        e.handle_shared_recovery(slot, i as u16).is_ok()
                    } else {
                        e.handle_shared_loss(ns(now), slot, i as u16).is_ok()
                    };
                }
            }
            if hit {
                self.shard_ready[k] = true;
                self.input_shards.push(k);
                self.deadline_dirty.push(k);
            }
        }
    }

    fn settle_dirty(&mut self, now: Time) {
        let mut dirty = std::mem::take(&mut self.stall_dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &q in &dirty {
            self.track_stall(q as usize, now);
        }
        dirty.clear();
        self.stall_dirty = dirty;
    }

    fn post(&mut self, qpn: u32) {
        let (shard, slot) = place(&self.pos_of, qpn, self.width);
        let (Some(e), Some(conn), Some(queue)) = (
            self.shards.get_mut(shard),
            self.conns.get_mut(qpn as usize),
            self.flows.queues.get_mut(qpn as usize),
        ) else {
            return;
        };
        if e.qp_state(slot) != Some(QpState::Rts) {
            // The QP is in error: its queued flows can never be posted.
            let dead: Vec<u32> = queue.drain(..).collect();
            for fi in dead {
                self.flows.on_completion(fi, 0, false, Time::ZERO);
            }
            return;
        }
        while let Some(&fi) = queue.front() {
            let Some(f) = self.flows.flows.get_mut(fi as usize) else {
                queue.pop_front();
                continue;
            };
            if f.posted >= f.flow.bytes || f.failed {
                queue.pop_front();
                continue;
            }
            let len = f.msg_len(f.next_msg);
            let wr = SendWr {
                wr_id: wr_id(fi, f.next_msg),
                local: LocalBuf::default(),
                remote_va: conn.next_va,
                rkey: RKEY,
                len,
                imm: None,
                signaled: true,
            };
            if e.post_send(slot, wr).is_err() {
                return; // send queue full: retried after the next completion
            }
            if let Some(r) = self.shard_ready.get_mut(shard) {
                *r = true;
            }
            self.deadline_dirty.push(shard);
            f.posted += u64::from(len);
            f.next_msg += 1;
            let off = conn.next_va - REGION_VA + u64::from(len);
            conn.next_va = REGION_VA + off % (REGION_LEN / 2);
        }
    }

    fn pump(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        let planes = usize::from(self.cfg.planes);
        let full = u64::from(self.cfg.mtu_payload + HEADER_BYTES);
        // Reads in flight count as backlog beyond what covers the read latency at line rate.
        let nic_bps = self.cfg.port_bps.saturating_mul(planes as u64);
        let read_cover = if self.cfg.pcie.is_ideal() {
            0
        } else {
            let bytes = u128::from(nic_bps) * u128::from(self.cfg.pcie.dma_read_ns) / 8_000_000_000;
            (bytes as u64).div_ceil(full).saturating_add(1) * full
        };
        let limit = PUMP_BACKLOG_PKTS * full * planes as u64;
        for (p, port) in self.ports.iter_mut().enumerate().take(planes) {
            *port = fab.topology().host_port(self.host, p as u32);
        }
        let n = self.shards.len();
        'pull: loop {
            // A total, not per plane: the engine picks each packet's plane, and a deep queue on
            // one plane delays its packets behind the others' (reordering the engine would
            // read as loss).
            let total: u64 = self.ports[..planes]
                .iter()
                .map(|p| {
                    let (d, h) = fab.queue_bytes(*p);
                    d + h
                })
                .sum();
            if self.dma.bytes > read_cover {
                return; // the next read completion (ev::DMA) pulls again
            }
            // Reads in flight are packets on their way to the ports: the ports and the read
            // pipeline together hold at most the backlog plus what covers the read latency
            // (gating on the ports alone starves them for a read latency whenever they fill).
            if total.saturating_add(self.dma.bytes) >= limit.saturating_add(read_cover) {
                if !self.pump_armed {
                    let wake = self.ports[..planes]
                        .iter()
                        .map(|p| fab.port_busy_until(*p))
                        .filter(|t| *t > now)
                        .min()
                        .unwrap_or(now.saturating_add(Duration::from_ns(1)));
                    if s.at(wake, me, ev::PUMP, u64::from(self.host)).is_ok() {
                        self.pump_armed = true;
                    }
                }
                return;
            }
            // A shard with a retransmission waiting goes first, outside the turns (the engine
            // sends it ahead of its own turn too): a lost packet holds its message's
            // completion, new data can wait (measured on the default run: a marked loss waited
            // ~11 us for its QP's next burst; mean of seeds 1-6 1.205x -> 1.191x of ideal,
            // longest stall 50.9 -> 47.0 us).
            if let Some(k) =
                (0..n).find(|&k| self.shard_ready[k] && self.shards[k].has_retransmit())
            {
                if let Some(tx) = self.shards[k].poll_transmit(ns(now)) {
                    self.deadline_dirty.push(k);
                    self.dispatch(now, k, tx, fab, s, me);
                    continue 'pull;
                }
            }
            // Turns go round the QP positions, not the shards: a shard gets one turn per QP it
            // holds (a last shard of 3 QPs got as many turns as a full one of 4, so its QPs
            // sent 4/3 of the others' share and their receivers saw an incast).
            let m = self.conns.len().max(1);
            for i in 0..m {
                let pos = (self.tx_rr + i) % m;
                let k = pos / SHARD_QPS;
                if k >= n || !self.shard_ready[k] {
                    continue;
                }
                if let Some(tx) = self.shards[k].poll_transmit(ns(now)) {
                    // Turns count data packets: a control packet (ACK, NACK, probe) leaves
                    // the turn where it is (a shard whose QPs answered more, e.g. the
                    // receivers of flows with holes, sent less data: on the default run the
                    // flows into the failed link's leaf sent 7-10 % slower than the others).
                    self.tx_rr = if matches!(tx.body, TxBody::Write { .. }) {
                        (pos + 1) % m
                    } else {
                        pos
                    };
                    self.deadline_dirty.push(k);
                    self.dispatch(now, k, tx, fab, s, me);
                    continue 'pull;
                }
                self.shard_ready[k] = false;
            }
            return;
        }
    }

    /// A packet shard `k` gave: to the DMA read queue when it has a payload to read, else out.
    fn dispatch(
        &mut self,
        now: Time,
        k: usize,
        tx: TxPacket,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if tx.payload_len() > 0 && !self.cfg.pcie.is_ideal() {
            let ready = self.dma.push(&self.cfg.pcie, now, k, tx);
            if self.dma_armed.is_none_or(|a| a > ready)
                && s.at(ready, me, ev::DMA, u64::from(self.host)).is_ok()
            {
                self.dma_armed = Some(ready);
            }
        } else {
            self.send(k, tx, fab, s);
        }
    }

    fn send(&mut self, shard: usize, mut tx: TxPacket, fab: &mut Fabric, s: &mut Scheduler<'_>) {
        let qpn = qpn_in(&self.qpn_at, shard, self.width, tx.src_qpn);
        let Some(conn) = self.conns.get(qpn as usize) else {
            self.counters.inject_errors += 1;
            return;
        };
        let dst = conn.peer;
        tx.src_qpn = qpn;
        let len = tx.payload_len();
        let (plane, route) = match self.cfg.transport {
            Transport::Mrc => {
                let topo = fab.topology();
                let n = topo.path_count(self.host, dst).max(1);
                let path = ev_path(
                    u32::from(tx.evx.ev_index),
                    u32::from(self.cfg.planes),
                    n,
                    conn.path_base,
                );
                match topo.usid_route(self.host, dst, path) {
                    Ok(r) => (u32::from(tx.evx.plane), Route::Usid(r)),
                    Err(_) => {
                        self.counters.inject_errors += 1;
                        return;
                    }
                }
            }
            Transport::SprayOblivious => {
                let pick = match self.spray.as_mut() {
                    Some(sel) => {
                        sel.pick_within(fab.topology(), self.host, dst, u32::from(self.cfg.planes))
                    }
                    None => {
                        self.counters.inject_errors += 1;
                        return;
                    }
                };
                match pick {
                    Ok(p) => (p.plane, p.route),
                    Err(_) => {
                        self.counters.inject_errors += 1;
                        return;
                    }
                }
            }
            Transport::Mrc1Ev | Transport::RoceEcmp => {
                // One flow hash per direction of the connection.
                let h = conn.flow_hash;
                (
                    (h >> 56) as u32 % u32::from(self.cfg.planes),
                    Route::Ecmp { hash: h },
                )
            }
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        self.side.put(tag, tx);
        let size = wire::wire_bytes(&tx);
        let control = !matches!(tx.body, TxBody::Write { .. });
        let pkt = Packet {
            src: self.host,
            dst,
            size_bytes: size,
            payload: Payload::new(len, tx.psn.value()),
            transport_tag: tag,
            route,
            plane: plane as u8,
            kind: TransportKind::Mrc,
            ecn: Ecn::Ect,
            flags: if control { flags::PRIORITY } else { 0 },
        };
        match fab.inject(s, self.host, plane, pkt) {
            Ok(()) => {
                if !control {
                    self.stall_dirty.push(qpn);
                }
                self.counters.tx_packets += 1;
                self.counters.tx_bytes += u64::from(size);
                self.counters.tx_payload_bytes += u64::from(len);
            }
            Err(_) => self.counters.inject_errors += 1,
        }
    }

    fn track_stall(&mut self, qpn: usize, now: Time) {
        let Some(r) = self.qp(qpn as u32).and_then(|q| q.requester()) else {
            return;
        };
        let una = r.una().value();
        let outstanding = r.inflight_bytes() > 0 || r.queued() > 0;
        let Some(c) = self.conns.get_mut(qpn) else {
            return;
        };
        if una != c.last_una || !outstanding {
            c.last_una = una;
            c.last_progress = now;
        } else {
            let st = now.duration_since(c.last_progress);
            if st > c.max_stall {
                c.max_stall = st;
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
            if let (Some(e), Some(d)) = (self.shards.get(k), self.shard_deadline.get_mut(k)) {
                *d = e.poll_timeout();
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
mod tests {
    use super::*;
    use crate::fabric::Shape;
    use crate::run::{run, Scenario};

    #[test]
    fn a_plane_s_evs_spread_over_every_path() {
        // As many EVs per plane as paths or more: EV i takes path (i / planes + base) % paths.
        for ev in 0..EVS as u32 {
            assert_eq!(ev_path(ev, 4, 8, 12345), (ev / 4 + 12345) % 8);
            assert_eq!(ev_path(ev, 1, 64, 7), (ev + 7) % 64);
        }
        // 8 planes of 32 EVs, 256 paths: a connection's EVs on a plane take 32 distinct
        // paths, and the connections of a leaf (mixes 0..8) together take all 256.
        let mut all = std::collections::BTreeSet::new();
        for mix in 0..8 {
            let mut one = std::collections::BTreeSet::new();
            for ev in (0..EVS as u32).filter(|e| e % 8 == 3) {
                let p = ev_path(ev, 8, 256, mix);
                assert!(p < 256);
                one.insert(p);
                all.insert(p);
            }
            assert_eq!(one.len(), 32);
        }
        assert_eq!(all.len(), 256);
    }

    /// A loss on a dead link retires, for every QP of the NIC, the EVs whose routes take that
    /// link up to the last switch (most of them never lost a packet of their own), and nothing
    /// on the other plane.
    #[test]
    fn a_loss_is_shared_with_every_qp_whose_route_takes_the_dead_link() {
        let mut sc = Scenario::tiny(Transport::Mrc);
        sc.workload = crate::workload::Workload::AllToAll {
            bytes_per_pair: 256 << 10,
            msg_bytes: 64 << 10,
        };
        let mut sim = crate::run::build(&sc).unwrap();
        while !sim.handler().main_done() && sim.now() < sc.time_limit {
            let next = sim.now().saturating_add(Duration::from_us(10));
            sim.run_until(next);
        }
        let w = sim.handler();
        assert!(w.main_done());
        let topo = w.fabric.topology();
        let nic = &w.nics[0];
        let planes = sc.fabric.planes;
        // Host 0 sits on leaf 0, whose link to spine 0 of plane 0 failed: every route of its
        // that leaves the leaf through spine 0 (path 0) is dead.
        let (mut dead, mut shared, mut other_plane) = (0, 0, 0);
        for q in 0..nic.connections() {
            let peer = nic.peer(q).unwrap();
            let n = topo.path_count(0, peer);
            if n < 2 {
                continue; // same leaf
            }
            let c = nic.conns[q as usize];
            let table = nic.qp(q).unwrap().ev_table();
            for e in 0..EVS as u16 {
                let st = table.stats(e).unwrap();
                let path = ev_path(u32::from(e), planes, n, c.path_base);
                if u32::from(e) % planes != 0 {
                    other_plane += u32::from(st.state != EvState::Good);
                } else if path == 0 {
                    assert_eq!(st.state, EvState::AssumedBad, "QP {q} EV {e}");
                    dead += 1;
                    shared += u32::from(st.lost == 0);
                }
            }
        }
        assert!(dead > 0);
        assert!(
            shared * 2 > dead,
            "{shared} of {dead} retired by a shared loss"
        );
        assert_eq!(other_plane, 0);
    }

    /// The NICs of an all-to-all begin toward different peers: in the first packets every
    /// receiver gets its share. With the QPs placed in QPN order every NIC's shards began on
    /// the QPs of the same residue mod [`SHARD_QPS`], i.e. the same few hosts, and the others
    /// received nothing.
    #[test]
    fn an_all_to_all_starts_toward_every_host() {
        let mut sc = Scenario::tiny(Transport::Mrc);
        sc.failure = None;
        sc.workload = crate::workload::Workload::AllToAll {
            bytes_per_pair: 256 << 10,
            msg_bytes: 64 << 10,
        };
        let mut sim = crate::run::build(&sc).unwrap();
        let hosts = sim.handler().nics.len();
        // Data packets sent toward each host, until the NICs sent one per connection each.
        let mut toward = vec![0u64; hosts];
        while toward.iter().sum::<u64>() < (hosts * (hosts - 1)) as u64 {
            let next = sim.now().saturating_add(Duration::from_ns(20));
            sim.run_until(next);
            assert!(sim.now() < Time::from_us(50), "nothing sent");
            toward.fill(0);
            for n in &sim.handler().nics {
                for q in 0..n.connections() {
                    let sent = n.qp(q).and_then(|q| q.requester()).unwrap().counters();
                    toward[n.peer(q).unwrap() as usize] += sent.data_sent;
                }
            }
        }
        let mean = toward.iter().sum::<u64>() / hosts as u64;
        let least = toward.iter().copied().min().unwrap_or(0);
        assert!(
            least * 2 >= mean,
            "data packets toward each host {toward:?}"
        );
    }

    #[test]
    fn eight_plane_nics_with_narrow_shards_complete_a_permutation() {
        let mut sc = Scenario::tiny(Transport::Mrc);
        sc.fabric.planes = 8;
        sc.fabric.shape = Shape::LeafSpine {
            hosts: 16,
            radix: 8,
        };
        let r = run(&sc).unwrap();
        assert_eq!((r.completed, r.hosts), (16, 16));
        // A permutation opens at most 2 QPs per NIC: one narrow shard each.
        let sim = crate::run::build(&sc).unwrap();
        for n in &sim.handler().nics {
            assert_eq!(n.shape(), (1, NARROW_QPS));
        }
        // An all-to-all needs wide shards.
        let sim = crate::run::build(&Scenario::default_for(Transport::Mrc)).unwrap();
        assert_eq!(sim.handler().nics[0].shape(), (16, SHARD_QPS));
    }
}
