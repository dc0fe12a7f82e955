//! `roce-ecmp`: a RoCEv2 RC NIC model, the baseline MRC is compared against.
//!
//! # What it models
//! - **One QP per flow**, pinned to one path: the QP's ECMP flow hash (a digest of the seed
//!   and the QPN, standing for the UDP source port RoCEv2 derives from the QP) picks the plane
//!   (`(hash >> 56) % planes`) and every switch hashes it over its equal-cost ports
//!   ([`crate::fabric::Route::Ecmp`]). After a link failure the fabric drops what was hashed
//!   onto it until routing reconverges ([`FabricConfig::reconvergence`]); the QP stalls until
//!   then.
//! - **Go-back-N** ([`qp`]): the responder accepts only the expected PSN, NAKs the first
//!   out-of-sequence PSN (PSN sequence error) and drops later ones; the requester rewinds to
//!   the NAK'd PSN. The transport timer (`4.096 us * 2^timeout_exp`, default `t = 14`, about
//!   67 ms, as on ConnectX) rewinds to the oldest unacknowledged PSN; more than `retry_cnt`
//!   (default 7) expiries in a row without progress put the QP in error.
//! - **DCQCN** ([`dcqcn`]): the receiver sends at most one CNP per QP per 50 us when CE-marked
//!   packets arrive; the sender cuts its rate, updates alpha, and recovers (fast recovery,
//!   additive, hyper increase). Parameters: [`DcqcnParams::paper`].
//! - **Lossless fabric**: PFC and ECN are the fabric's ([`crate::fabric::PfcConfig`],
//!   [`crate::fabric::ClassPolicy::ROCE`]: ECN on every hop including the last, never
//!   trimmed). [`lossless`] turns a fabric configuration into one where PFC pauses before any
//!   queue overflows. Every packet is [`crate::fabric::TransportKind::Roce`].
//! - **Headers in the tag**: a RoCE packet's BTH/AETH essentials fit in the fabric packet's
//!   `transport_tag` ([`wire`]); there is no side table. Payloads are virtual
//!   ([`crate::fabric::Payload`]): the responder checks the checksum and that the pattern is
//!   the one the flow uses at that PSN ([`qp::pattern`]), so data arrives exactly once, in
//!   order, or the counters say otherwise.
//! - **Pacing**: each QP is rate limited by DCQCN (none at line rate); the NIC pulls packets
//!   round-robin over the QPs of each plane while that port holds fewer than
//!   [`PUMP_BACKLOG_PKTS`] full packets (a PFC-paused port fills up and stops the NIC).
//!   ACKs, NAKs and CNPs go out at once, in the switches' priority queue.
//! - **Flows** ([`crate::workload::Flow`]): the NIC sends the flows whose `src` is its host and
//!   answers those whose `dst` is. A flow is released at `start`, once the flow named by
//!   `after` has completed (told through [`RoceNic::flow_completed`], or seen locally).
//!
//! Not modelled: PCIe/DMA and host timing, read/atomic/send verbs, PFC priorities (a pause
//! stops the whole port, ACKs and CNPs included), DCQCN's rate-reduce monitor period and
//! `clamp_tgt_rate` variants, receive buffers (RC writes only).
//!
//! # Wiring it into a world (same events and calls as [`crate::nic::Nic`])
//! `tests/roce.rs` holds a complete world (fabric + RoCE NICs) that runs every scenario of
//! the tests; a world holding both models needs only this:
//!
//! 1. **Fabric**: for a `roce-ecmp` run pass the scenario's fabric through
//!    [`lossless`]`(fabric, mtu_payload)` (PFC on, queues deep enough not to drop; ECN kept).
//! 2. **Build**: `RoceNic::new(host, &all_flows, RoceConfig::new(planes, port_bps, mtu, seed))`
//!    for every host (each NIC keeps the flows that start or end at it). An enum
//!    `enum AnyNic { Mrc(Nic), Roce(RoceNic) }` can forward every call below.
//! 3. **Events**: the same kinds ([`ev`] is the MRC NIC's module), `data` = host:
//!    `START -> start`, `PUMP -> on_pump`, `TIMER -> on_timer`, each
//!    `(now, &mut fabric, scheduler, NICS)`. Schedule `START` at t = 0 for every host; later
//!    `start` times are the NIC's own timer.
//! 4. **Deliveries**: `nics[d.host].receive(now, &d.packet, &mut fabric, s, NICS)`: no side
//!    table header (a RoCE NIC keeps none: the MRC NIC's `side_take` has nothing to give).
//! 5. **Flow dependencies**: after a NIC call, drain `poll_flow_done()` and call
//!    `flow_completed(id, now, ...)` on every NIC (or on the NIC of the dependent flow).
//! 6. **Stop** when every NIC has `done_at().is_some() || failed()`.
//! 7. **Report**: [`RoceNic::done_at`], [`RoceNic::failed`], [`RoceNic::completed_bytes`],
//!    [`RoceNic::max_stall`] (or [`RoceNic::max_stall_at`] for a run stopped early),
//!    [`RoceNic::flow_results`] (per-flow FCT, stall, retransmits, rate), [`RoceNic::counters`]
//!    (retransmits, timeouts, NAKs, duplicates, CNPs, rate decreases) and
//!    [`RoceNic::pauses_received`]. RoCE has no EVs (0 EV state changes) and infers no loss
//!    from SACKs (go-back-N: NAKs and timeouts only).
//!
//! A QP uses one plane: on a NIC of `P` planes a single flow gets `1/P` of the NIC's line
//! rate, which is what single-path RoCE on a multi-plane NIC really gets.
//!
//! ```
//! use mrc_sim::core::Time;
//! use mrc_sim::fabric::{FabricConfig, Shape};
//! use mrc_sim::nic::roce::{self, RoceConfig, RoceNic};
//! use mrc_sim::workload::Flow;
//!
//! let fabric = roce::lossless(
//!     FabricConfig::htsim_reference(Shape::LeafSpine { hosts: 4, radix: 4 }),
//!     4096,
//! );
//! assert!(fabric.pfc.is_some());
//! let flows = [Flow { id: 0, src: 0, dst: 3, bytes: 1 << 20, msg_bytes: 1 << 16,
//!                     start: Time::ZERO, after: None }];
//! let cfg = RoceConfig::new(1, fabric.host_link_bps, 4096, 7);
//! let nics: Vec<RoceNic> = (0..4).map(|h| RoceNic::new(h, &flows, cfg).unwrap()).collect();
//! assert_eq!(nics[0].flow_results().count(), 1); // host 0 sends flow 0
//! assert_eq!(nics[3].received_bytes(0), Some(0)); // host 3 receives it
//! assert_eq!(nics[1].done_at(), Some(Time::ZERO)); // nothing to send
//! ```

pub mod dcqcn;
mod nic;
pub mod qp;
pub mod wire;

pub use crate::nic::ev;
pub use dcqcn::DcqcnParams;
pub use nic::RoceNic;

use crate::core::time::{Duration, Time, PS_PER_S};
use crate::fabric::{FabricConfig, PfcConfig, Shape};

/// Full packets per plane the NIC keeps queued at its ports.
pub const PUMP_BACKLOG_PKTS: u64 = 2;

/// The IB transport timer unit: 4.096 us.
pub const TIMER_UNIT_PS: u64 = 4_096_000;

/// What a RoCE NIC needs to know about the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceConfig {
    /// Planes (ports); each QP uses one.
    pub planes: u8,
    /// Rate of one port (bits per second); DCQCN's ceiling.
    pub port_bps: u64,
    /// Payload bytes per full packet (the path MTU's payload).
    pub mtu_payload: u32,
    /// Transport timer exponent `t`: `4.096 us * 2^t` (1..=31; ConnectX default 14).
    pub timeout_exp: u8,
    /// Timer expiries in a row without progress before the QP errors (IB: 0..=7).
    pub retry_cnt: u8,
    /// The responder ACKs every this many packets (and the last of each message).
    pub ack_every_pkts: u32,
    /// DCQCN on (`false`: every QP at line rate, CNPs counted but ignored).
    pub dcqcn_on: bool,
    /// DCQCN parameters (its `line_bps` is set to `port_bps` by [`RoceConfig::new`]).
    pub dcqcn: DcqcnParams,
    /// Seed of the ECMP flow hashes.
    pub seed: u64,
}

impl RoceConfig {
    /// Defaults: `t = 14` (~67 ms), 7 retries, an ACK every 4 packets, DCQCN on with the
    /// paper's parameters at `port_bps`.
    pub fn new(planes: u8, port_bps: u64, mtu_payload: u32, seed: u64) -> RoceConfig {
        RoceConfig {
            planes,
            port_bps,
            mtu_payload,
            timeout_exp: 14,
            retry_cnt: 7,
            ack_every_pkts: 4,
            dcqcn_on: true,
            dcqcn: DcqcnParams::paper(port_bps),
            seed,
        }
    }

    /// The transport timeout, `4.096 us * 2^timeout_exp`.
    pub fn rto(&self) -> Duration {
        Duration::from_ps(TIMER_UNIT_PS << self.timeout_exp.min(40))
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`RoceError::Config`] naming the first bad field.
    pub fn validate(&self) -> Result<(), RoceError> {
        let bad = |w| Err(RoceError::Config(w));
        if self.planes == 0 || usize::from(self.planes) > MAX_PLANES {
            return bad("planes must be 1..=8");
        }
        if self.port_bps == 0 {
            return bad("port_bps must be > 0");
        }
        if self.mtu_payload == 0 {
            return bad("mtu_payload must be > 0");
        }
        if !(1..=31).contains(&self.timeout_exp) {
            return bad("timeout_exp must be 1..=31");
        }
        if self.retry_cnt > 7 {
            return bad("retry_cnt must be 0..=7");
        }
        if self.ack_every_pkts == 0 {
            return bad("ack_every_pkts must be > 0");
        }
        self.dcqcn.validate().map_err(RoceError::Config)
    }
}

/// Most planes a RoCE NIC drives.
pub const MAX_PLANES: usize = 8;

/// Why a RoCE NIC could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoceError {
    /// A configuration value out of range.
    Config(&'static str),
    /// A flow the NIC cannot run.
    Flow {
        /// The flow id.
        id: u32,
        /// Why.
        why: &'static str,
    },
}

impl core::fmt::Display for RoceError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RoceError::Config(w) => write!(f, "roce config: {w}"),
            RoceError::Flow { id, why } => write!(f, "roce flow {id}: {why}"),
        }
    }
}

impl std::error::Error for RoceError {}

/// Per-NIC counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoceCounters {
    /// Packets handed to the fabric (all kinds).
    pub tx_packets: u64,
    /// Packets received from the fabric.
    pub rx_packets: u64,
    /// Data packets sent (retransmissions included).
    pub data_sent: u64,
    /// Data packets sent again (go-back-N).
    pub retransmits: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// NAKs sent (PSN sequence error).
    pub naks_sent: u64,
    /// NAKs received.
    pub naks_received: u64,
    /// CNPs sent (as notification point).
    pub cnps_sent: u64,
    /// CNPs received (as reaction point).
    pub cnps_received: u64,
    /// DCQCN rate decreases.
    pub rate_decreases: u64,
    /// Transport timer expiries.
    pub timeouts: u64,
    /// QPs that went to error (retries exhausted).
    pub qp_errors: u64,
    /// CE-marked data packets received.
    pub ce_received: u64,
    /// Duplicate data packets dropped by the responder.
    pub duplicates: u64,
    /// Out-of-sequence data packets dropped by the responder.
    pub out_of_sequence: u64,
    /// Payloads whose checksum failed (dropped).
    pub bad_payload: u64,
    /// Expected-PSN packets whose payload pattern or length was wrong (dropped): a model bug.
    pub bad_pattern: u64,
    /// Packets for a QP this NIC does not have (dropped).
    pub unknown_qp: u64,
    /// Packets the fabric refused (unknown host or plane).
    pub inject_errors: u64,
    /// Payload bytes placed exactly once, in order (as responder).
    pub placed_bytes: u64,
}

/// A completed flow (for the world to pass on to flows that run after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowDone {
    /// Flow id.
    pub id: u32,
    /// When its last byte was acknowledged.
    pub at: Time,
}

/// One sending flow's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowResult {
    /// Flow id.
    pub id: u32,
    /// Destination host.
    pub dst: u32,
    /// Bytes of the flow.
    pub bytes: u64,
    /// Bytes acknowledged.
    pub acked_bytes: u64,
    /// When it was released.
    pub released_at: Option<Time>,
    /// When its last byte was acknowledged.
    pub done_at: Option<Time>,
    /// True when its QP went to error.
    pub failed: bool,
    /// Longest stall of its QP (data outstanding, `una` not moving).
    pub max_stall: Duration,
    /// Plane the QP is pinned to.
    pub plane: u8,
    /// Data packets sent, retransmissions included.
    pub data_sent: u64,
    /// Retransmitted data packets.
    pub retransmits: u64,
    /// Transport timer expiries.
    pub timeouts: u64,
    /// DCQCN rate decreases.
    pub rate_decreases: u64,
    /// DCQCN current rate now.
    pub rate_bps: u64,
}

impl FlowResult {
    /// Flow completion time (from release), if completed.
    pub fn fct(&self) -> Option<Duration> {
        Some(self.done_at?.duration_since(self.released_at?))
    }
}

/// `cfg` made lossless for RoCE: PFC on every switch ingress with XOFF at the ECN `kmax`
/// (or half the queue without ECN, at least four packets) and XON two packets lower, and
/// switch output queues deep enough that every ingress of a switch can fill to XOFF plus the
/// headroom a pause needs (two propagation delays at the fastest rate plus two full packets)
/// without a drop. ECN and trimming settings are kept (RoCE's policy never trims).
pub fn lossless(mut cfg: FabricConfig, mtu_payload: u32) -> FabricConfig {
    let wire = u64::from(wire::DATA_HEADER_BYTES + wire::RETH_BYTES + mtu_payload);
    let rate = cfg.host_link_bps.max(cfg.t1_link_bps).max(cfg.t2_link_bps);
    let delay = cfg
        .propagation
        .saturating_add(cfg.switching_latency)
        .as_ps();
    let in_flight = (u128::from(delay) * u128::from(rate) / u128::from(8 * PS_PER_S)) as u64;
    let headroom = 2 * in_flight + 2 * wire;
    let xoff = match cfg.queue.ecn {
        Some(e) => e.kmax_bytes,
        None => cfg.queue.limit_bytes / 2,
    }
    .max(4 * wire);
    let radix = u64::from(match cfg.shape {
        Shape::LeafSpine { radix, .. } => radix,
        Shape::FatTree { k } => k,
    });
    cfg.pfc = Some(PfcConfig {
        xoff_bytes: xoff,
        xon_bytes: xoff - 2 * wire,
    });
    cfg.queue.limit_bytes = cfg
        .queue
        .limit_bytes
        .max(radix.saturating_mul(xoff + headroom));
    cfg
}
