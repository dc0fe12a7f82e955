//! Fabric mode: every simulated NIC runs the real MRC datapath stage
//! (`mrc_firmware::datapath::stage::Datapath`) and firmware engine
//! (`mrc_firmware::engine::Engine`), joined by their CSR queues, and packets travel between
//! NICs through the firmware test kit's multipath channel (`mrc_firmware::testkit::Channel`:
//! seeded loss, duplication, trimming, CE marks, bounded reordering, a blackholed EV) plus
//! scheduled plane outages, with real payload bytes.
//!
//! How the host interface maps onto the stage and the engine (the contract the whole-system
//! tests rely on):
//!
//! - QPs and MRs are mirrored lazily: before every step, each QP of the device tables in INIT,
//!   RTR or RTS gets an engine QP moved to the same state (the stage's QP context follows
//!   through the engine's commands), and each MR with remote-write access is registered with
//!   the stage under its rkey. A QP reset or destroyed loses its engine QP.
//! - A send doorbell hands the new WQEs to the stage in ring order (as many as its send queue
//!   takes; the rest wait in the ring). The local bytes are gathered (lkey, range and DMA checks
//!   as in loopback mode) into a staging buffer the stage's packets read their payload from.
//!   Every WQE is posted signaled; the CQE of an unsignaled one is suppressed.
//! - A receive doorbell posts the new receive WQEs to the stage.
//! - The host then runs ([`World::pump`]): transmit, deliver due packets (payload placed by
//!   RETH through the MR's translation), move entries between each stage and its engine (no
//!   firmware time), turn the engine's `Complete` host writes into CQEs, fire timers, and jump
//!   virtual time to the next event, until no packet is in flight and no send is outstanding,
//!   or the step's time budget runs out.
//! - Engine QPN `e` and device QPN `q` differ: packets carry the peer's device QPN (the one the
//!   application exchanged) and are translated to the engine QPN on delivery.
//! - A plane outage takes the port of that plane down on every NIC (PORT_DOWN events; the engine
//!   retires the plane's EVs) and drops every packet on the plane until it ends.
//! - Controller EV denials (and re-allowances) of a QP's EV profile are told to its engine QP
//!   once each (`Engine::set_ev_allowed`; one the min-active guard refuses is not retried).
//! - A received packet is dropped and counted unless its source address is the destination
//!   QP's peer (`rx`).
//! - More faults (cable-pull and plane windows, blackholing switches, stalled firmware cores,
//!   slow DMA, bit corruption checked by the receiver's parse, raw frames injected from
//!   outside) are in the `faults` module; `Fabric::stop_faults` ends every fault at once.
//!
//! Known simplifications: the RTR/RTS window, WIMM, retry and timeout attributes use the fixed
//! values in [`FabricConfig`] (the device tables do not record them); the EV count comes from
//! the QP's EV profile but the format on this channel is always the UDP source port; congestion
//! control is a fixed window; the byte length of a received Write-with-Immediate is reported
//! as 0 (the engine's completion does not carry it).

use std::collections::{BTreeMap, BTreeSet};

use mrc_abi::device::admin::QpState as DevQpState;
use mrc_abi::device::cqe::{Completion as Cqe, CqeOpcode, CqeStatus};
use mrc_abi::device::wqe::RecvWqe;
use mrc_abi::wire::{Frame, NackReason};
use mrc_driver::sys::Iova;
use mrc_driver::zerocopy::FromBytes;
use mrc_firmware::datapath::packet::PacketBody;
use mrc_firmware::datapath::stage::{DatapathConfig, DatapathCounters};
use mrc_firmware::engine::{CompletionError, CompletionKind, EngineConfig, EngineCounters};
use mrc_firmware::testkit::{Channel, ChannelConfig, ChannelCounters};

mod ring;
mod rx;
mod sync;

use super::faults::{Faults, WindowKind};
use super::state::NicState;
use super::World;
use crate::nic::{HostWrite, Pair};

/// Payload bytes per packet (the datapath MTU in fabric mode).
pub const FABRIC_MTU: usize = 1024;
/// Packets in flight per NIC pair.
const CHANNEL_CAP: usize = 256;

mrc_firmware::capacity! {
    /// The capacities of a simulated NIC in fabric mode (its datapath stage and firmware
    /// engine): 16 QPs, 256 EVs over 4 planes, a 512-PSN window, 64-entry send and receive
    /// queues, 16 regions.
    pub struct HostProfile {
        qps: 16, evs: 256, planes: 4, window_psns: 512, send_queue: 64, recv_queue: 64,
        regions: 16,
    }
}
type Link = Channel<CHANNEL_CAP, FABRIC_MTU>;

/// Fabric-mode settings of a [`super::SimHost`].
#[derive(Clone, Copy, Debug)]
pub struct FabricConfig {
    /// Seeds every channel (same seed, same run).
    pub seed: u64,
    /// Loss, reordering, trimming, ... of every NIC-to-NIC channel (its `plane_outage` is
    /// ignored: use [`super::SimHost::schedule_plane_outage`]).
    pub channel: ChannelConfig,
    /// Responder and requester window, units of 128 PSNs (at most 4).
    pub mpr: u16,
    /// Write-with-Immediate in flight.
    pub max_wimm: u16,
    /// Retries (25 = forever).
    pub retry_cnt: u8,
    /// ACK timeout exponent: 1.024 us * 2^t.
    pub timeout_exp: u8,
    /// Fixed congestion window.
    pub cwnd_bytes: u64,
    /// Most virtual time one doorbell may run the fabric before returning, counted from the
    /// first timer due when that is further away (see `World::pump`).
    pub step_budget_ns: u64,
    /// Test only: datapath stages with the test kit's planted bug (a `TRIMMED_LAST_HOP` NACK
    /// taken as the packet's ACK), so a whole-system checker can be shown to catch it.
    pub planted_bug: bool,
    /// One random bit of a frame flipped on the wire, ppm of packets (see the `faults`
    /// module: the receiver's parse drops what the checksum catches).
    pub corrupt_ppm: u32,
}

impl Default for FabricConfig {
    fn default() -> Self {
        FabricConfig {
            seed: 1,
            channel: ChannelConfig::default(),
            mpr: 4,
            max_wimm: 8,
            retry_cnt: 25,
            timeout_exp: 7,
            cwnd_bytes: 64 * FABRIC_MTU as u64,
            step_budget_ns: 2_000_000_000,
            planted_bug: false,
            corrupt_ppm: 0,
        }
    }
}

/// Fabric totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricCounters {
    /// Summed over every channel.
    pub channel: ChannelCounters,
    /// Packets dropped by a plane outage or a port that is down.
    pub plane_dropped: u64,
    /// Packets to an address no NIC has.
    pub unroutable: u64,
    /// Packets for a QP the destination does not know.
    pub unknown_qp: u64,
    /// Retransmissions the stages sent, all NICs.
    pub retransmits: u64,
    /// EV state events the engines wrote for the host, all NICs.
    pub ev_events: u64,
    /// Packets silently dropped by a blackholing switch window.
    pub switch_blackholed: u64,
    /// Packets whose bit flip the receiver's parse caught (dropped).
    pub corrupt_dropped: u64,
    /// Packets with a bit flip in a field no checksum covers (delivered).
    pub corrupt_undetected: u64,
    /// Packets that waited in a stalled core's receive backlog.
    pub stall_backlogged: u64,
    /// Packets dropped because a stalled core's backlog was full.
    pub stall_backlog_dropped: u64,
    /// Received frames that failed to parse (injected frames).
    pub malformed: u64,
    /// Frames not addressed to the NIC that received them.
    pub misaddressed: u64,
    /// Frames whose source address is not the destination QP's peer.
    pub spoofed: u64,
    /// Packets handed to a datapath stage.
    pub to_engine: u64,
    /// Packets a stage would not take even after its reports moved on (a model bug if
    /// non-zero).
    pub rx_refused: u64,
    /// Payload bytes written into registered memory.
    pub bytes_placed: u64,
    /// Controller EV denials (and re-allowances) mirrored into engines.
    pub ev_denials: u64,
}

/// A send handed to the stage (its device QPN, the driver's `wr_id`, its ring index, the CQE
/// it completes with, and its gathered bytes).
pub(super) struct Pending {
    pub(super) qpn: u32,
    pub(super) wr_id: u64,
    pub(super) index: u32,
    pub(super) opcode: CqeOpcode,
    pub(super) byte_len: u32,
    pub(super) signaled: bool,
    pub(super) data: Vec<u8>,
}

/// The stage and engine of one NIC.
pub(crate) struct NicEngine {
    nic: Box<Pair<HostProfile>>,
    /// What the engine wrote for the host since it was last collected.
    writes: Vec<HostWrite>,
    /// Device QPN -> engine QPN.
    qps: BTreeMap<u32, u32>,
    /// Engine QPN -> device QPN.
    dev_qpn: BTreeMap<u32, u32>,
    /// Registered rkeys.
    rkeys: Vec<u32>,
    /// Sends in the stage by handle.
    sends: BTreeMap<u32, Pending>,
    next_handle: u32,
    /// QPs whose engine QP failed this step (their ring backlog is flushed after draining).
    failed: Vec<u32>,
    /// `(device QPN, EV index)` the engine was told are denied.
    denied: BTreeSet<(u32, u16)>,
    /// Bytes placed per (engine QPN, message sequence number): the length a
    /// Write-with-Immediate's receive completion reports. Entries of a QP up to a completed
    /// message are dropped with it; at most [`MSG_BYTES_CAP`] entries (oldest dropped first).
    msg_bytes: BTreeMap<(u32, u16), u32>,
}

impl NicEngine {
    /// The firmware engine's counters.
    pub(crate) fn engine_counters(&self) -> EngineCounters {
        self.nic.fw().counters()
    }

    /// The datapath stage's counters.
    pub(crate) fn datapath_counters(&self) -> DatapathCounters {
        self.nic.dp.counters()
    }

    /// Moves entries between the stage and the engine until both are quiet. Returns whether
    /// any moved.
    pub(super) fn pump(&mut self, now_ns: u64) -> bool {
        self.nic.pump(now_ns, &mut self.writes)
    }
}

/// Bound of [`NicEngine::msg_bytes`].
pub(super) const MSG_BYTES_CAP: usize = 4096;

/// The fabric of a host: NICs (stage + engine), channels, outages.
pub(crate) struct Fabric {
    cfg: FabricConfig,
    pub engines: Vec<NicEngine>,
    /// Channel of NIC pair `(a, b)`, `a <= b`; `to` 0 is `a`, 1 is `b`.
    links: BTreeMap<(usize, usize), Box<Link>>,
    /// Scheduled windows, slow DMA, corruption.
    pub(crate) faults: Faults,
    counters: FabricCounters,
    /// After [`Fabric::stop_faults`]: the fault-free channel every link is replaced by once
    /// it is empty.
    quiet: Option<ChannelConfig>,
    /// Counters of replaced channels.
    retired: ChannelCounters,
}

impl Fabric {
    pub fn new(cfg: FabricConfig, nics: usize) -> Fabric {
        let dcfg = DatapathConfig {
            mtu_payload: FABRIC_MTU as u32,
            planted_bug: cfg.planted_bug,
            ..DatapathConfig::default()
        };
        let ecfg = EngineConfig::default();
        let engines = (0..nics)
            .map(|_| NicEngine {
                // Cannot fail: the engine's configuration is the default.
                nic: on_big_stack(move || {
                    Box::new(Pair::new(dcfg, ecfg).unwrap_or_else(|_| unreachable!()))
                }),
                writes: Vec::new(),
                qps: BTreeMap::new(),
                dev_qpn: BTreeMap::new(),
                rkeys: Vec::new(),
                sends: BTreeMap::new(),
                next_handle: 0,
                failed: Vec::new(),
                denied: BTreeSet::new(),
                msg_bytes: BTreeMap::new(),
            })
            .collect();
        Fabric {
            cfg,
            engines,
            links: BTreeMap::new(),
            faults: Faults::new(nics, cfg.seed, cfg.corrupt_ppm),
            quiet: None,
            retired: ChannelCounters::default(),
            counters: FabricCounters::default(),
        }
    }

    pub fn schedule_outage(&mut self, plane: u8, down_ns: u64, up_ns: u64) {
        self.faults
            .schedule(WindowKind::Plane(plane), down_ns, up_ns);
    }

    /// Every fault stops at `now_ns`: windows end (pending ones never start), DMA is fast
    /// again, no more corruption, and each channel is replaced by a fault-free one (same
    /// latency) as soon as it holds no packet.
    pub fn stop_faults(&mut self, now_ns: u64) {
        for w in self.faults.windows.iter_mut() {
            match w.state {
                0 => w.state = 2,
                1 => w.to_ns = w.to_ns.min(now_ns),
                _ => {}
            }
        }
        self.faults.dma_delay_ns.iter_mut().for_each(|d| *d = 0);
        self.faults.corrupt_ppm = 0;
        self.quiet = Some(ChannelConfig {
            latency_ns: self.cfg.channel.latency_ns,
            trim_last_hop_ppm: 0,
            ..ChannelConfig::default()
        });
    }

    /// Replaces empty faulty channels after [`Fabric::stop_faults`].
    fn quiet_links(&mut self) {
        let Some(q) = self.quiet else { return };
        let seed = self.cfg.seed;
        for (key, l) in self.links.iter_mut() {
            if l.in_flight() == 0 && *l.config() != q {
                add(&mut self.retired, l.counters());
                let s = seed ^ 0x51 ^ ((key.0 as u64) << 32 | key.1 as u64);
                *l = on_big_stack(move || Box::new(Channel::new(q, s)));
            }
        }
    }

    pub fn counters(&self) -> FabricCounters {
        let mut c = self.counters;
        add(&mut c.channel, self.retired);
        for l in self.links.values() {
            add(&mut c.channel, l.counters());
        }
        for e in &self.engines {
            c.retransmits += e.nic.dp.counters().retransmits_sent;
        }
        c
    }

    fn link(&mut self, a: usize, b: usize) -> &mut Link {
        let key = (a.min(b), a.max(b));
        let seed = self.cfg.seed ^ ((key.0 as u64) << 32 | key.1 as u64).wrapping_mul(0x9e37_79b9);
        let mut cfg = self.quiet.unwrap_or(self.cfg.channel);
        cfg.plane_outage = None;
        self.links
            .entry(key)
            .or_insert_with(|| on_big_stack(move || Box::new(Channel::new(cfg, seed))))
    }
}

fn add(s: &mut ChannelCounters, k: ChannelCounters) {
    s.sent += k.sent;
    s.delivered += k.delivered;
    s.lost += k.lost;
    s.duplicated += k.duplicated;
    s.trimmed += k.trimmed;
    s.reordered += k.reordered;
    s.ce_marked += k.ce_marked;
    s.blackholed += k.blackholed;
    s.plane_dropped += k.plane_dropped;
    s.overflow += k.overflow;
}

/// Runs `f` on a thread with a large stack: the stage and engine and a channel (~320 KB) are
/// built by value before they are boxed, which an unoptimised build does with several copies on
/// the stack of whatever thread rang the doorbell.
fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match std::thread::Builder::new()
        .name("nic-host-build".into())
        .stack_size(64 << 20)
        .spawn(f)
    {
        Ok(h) => match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(e) => panic!("cannot start a thread to build the NIC model: {e}"),
    }
}

pub(super) fn status_of(e: CompletionError) -> (CqeStatus, u32) {
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

impl World {
    fn fabric_cfg(&self) -> Option<FabricConfig> {
        self.fabric.as_ref().map(|f| f.cfg)
    }

    /// Moves every packet NIC `i`'s stage wants sent onto its channel. True if any.
    fn transmit(&mut self, i: usize) -> bool {
        let now = self.now_ns;
        let mut any = false;
        if self.stalled(i) {
            return false;
        }
        for _ in 0..4096 {
            let Some(fab) = self.fabric.as_mut() else {
                return any;
            };
            let ne = &mut fab.engines[i];
            let mut next = ne.nic.transmit(now);
            // Short of event room: the reports move on, then the stage sends.
            if next.is_none() && ne.nic.dp.events_pending() > 0 && ne.pump(now) {
                next = ne.nic.transmit(now);
            }
            let Some(pkt) = next else {
                return any;
            };
            any = true;
            let ne = &fab.engines[i];
            // Where it goes: the sending QP's peer address.
            let dest = ne
                .dev_qpn
                .get(&pkt.src_qpn)
                .and_then(|q| self.nics[i].t.qps.get(q))
                .and_then(|q| self.nics.iter().position(|n| n.gid == q.remote_addr));
            let Some(d) = dest else {
                fab.counters.unroutable += 1;
                continue;
            };
            let plane = pkt.evx.plane;
            if !port_up(&self.nics, i, plane)
                || !port_up(&self.nics, d, plane)
                || fab.faults.plane_dead(plane)
            {
                fab.counters.plane_dropped += 1;
                continue;
            }
            let planes = self.nics[i].params.num_planes.clamp(1, 4) as u16;
            if fab.faults.switch_drops(plane, pkt.evx.ev_index, planes) {
                fab.counters.switch_blackholed += 1;
                continue;
            }
            let payload: &[u8] = match pkt.body {
                PacketBody::Write { local, .. } => {
                    let len = pkt.payload_len as usize;
                    let off = local.offset as usize;
                    ne.sends
                        .get(&local.handle)
                        .and_then(|p| p.data.get(off..off + len))
                        .unwrap_or(&[])
                }
                _ => &[],
            };
            let mut buf = [0u8; FABRIC_MTU];
            let n = payload.len().min(FABRIC_MTU);
            buf[..n].copy_from_slice(&payload[..n]);
            // The link of pair (min, max): `to` 1 is the larger index (and a NIC talking to
            // itself), 0 the smaller.
            let to = u8::from(d >= i);
            fab.link(i, d).send(now, to, pkt, &buf[..n]);
        }
        any
    }

    /// Moves NIC `i`'s entries between stage and engine and turns the engine's completions
    /// into CQEs. True if any.
    fn drain(&mut self, i: usize) -> bool {
        let now = self.now_ns;
        let mut any = false;
        if self.stalled(i) {
            return false;
        }
        // Completions start their DMA to the CQ now (slow DMA: they land later).
        if let Some(fab) = self.fabric.as_mut() {
            let delay = fab.faults.dma_delay_ns.get(i).copied().unwrap_or(0);
            let ne = &mut fab.engines[i];
            any |= ne.pump(now);
            for w in ne.writes.drain(..) {
                match w {
                    HostWrite::Completion(c) => fab.faults.cqe_q[i].push_back((now + delay, c)),
                    HostWrite::EvEvent { .. } => fab.counters.ev_events += 1,
                }
            }
        }
        loop {
            let Some(fab) = self.fabric.as_mut() else {
                return any;
            };
            let q = &mut fab.faults.cqe_q[i];
            let Some(c) = q.front().filter(|c| c.0 <= now).map(|c| c.1) else {
                break;
            };
            q.pop_front();
            let ne = &mut fab.engines[i];
            any = true;
            let Some(&qpn) = ne.dev_qpn.get(&c.qpn) else {
                continue;
            };
            let Some(q) = self.nics[i].t.qps.get(&qpn).copied() else {
                continue;
            };
            match c.kind {
                CompletionKind::Send => {
                    let Some(p) = ne.sends.remove(&(c.wr_id as u32)) else {
                        continue;
                    };
                    let n = &mut self.nics[i];
                    match c.status {
                        Ok(()) if !p.signaled => {}
                        Ok(()) => {
                            let e = cqe(
                                p.wr_id,
                                CqeStatus::Success,
                                p.opcode,
                                p.byte_len,
                                qpn,
                                p.index,
                            );
                            n.post_cqe(q.send_cq, &e, now);
                        }
                        Err(err) => {
                            let (status, syndrome) = status_of(err);
                            let mut e = cqe(p.wr_id, status, p.opcode, p.byte_len, qpn, p.index);
                            e.syndrome = syndrome;
                            n.post_cqe(q.send_cq, &e, now);
                            if status != CqeStatus::WrFlushed {
                                self.enter_error(i, qpn, status, syndrome, now);
                            }
                        }
                    }
                }
                CompletionKind::RecvImm { .. } | CompletionKind::Recv => {
                    let (imm, byte_len) = match c.kind {
                        CompletionKind::RecvImm { imm, msn } => {
                            let len = ne.msg_bytes.remove(&(c.qpn, msn)).unwrap_or(0);
                            // Earlier messages of this QP are complete too.
                            ne.msg_bytes
                                .retain(|k, _| k.0 != c.qpn || (msn.wrapping_sub(k.1) as i16) < 0);
                            (imm, len)
                        }
                        _ => (0, 0),
                    };
                    let index = c.wr_id as u32;
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
                    let (status, syndrome) = match c.status {
                        Ok(()) => (CqeStatus::Success, 0),
                        Err(e) => status_of(e),
                    };
                    let mut e = cqe(wr_id, status, CqeOpcode::RecvWriteImm, byte_len, qpn, index);
                    e.imm = Some(imm);
                    e.syndrome = syndrome;
                    n.post_cqe(q.recv_cq, &e, now);
                    if let Some(p) = n.t.qps.get_mut(&qpn) {
                        p.rq_psn = (p.rq_psn + 1) & 0xFF_FFFF;
                    }
                    if status != CqeStatus::Success && status != CqeStatus::WrFlushed {
                        self.enter_error(i, qpn, status, syndrome, now);
                    }
                }
            }
        }
        // Ring entries the engine never saw complete as flushed, after the engine's own.
        let failed = match self.fabric.as_mut() {
            Some(f) => std::mem::take(&mut f.engines[i].failed),
            None => Vec::new(),
        };
        for qpn in failed {
            self.flush(i, qpn, now);
        }
        any
    }

    /// Nothing in flight and no send outstanding.
    pub(crate) fn fabric_idle(&self) -> bool {
        let Some(fab) = self.fabric.as_ref() else {
            return true;
        };
        fab.links.values().all(|l| l.in_flight() == 0)
            && fab.faults.idle()
            && fab.engines.iter().enumerate().all(|(i, ne)| {
                ne.sends.is_empty()
                    && self.nics[i]
                        .t
                        .qps
                        .values()
                        .all(|q| q.state != DevQpState::Rts || q.sq_cons == q.sq_prod)
            })
    }

    /// Runs the fabric until it is idle or the step budget ran out. A first timer further away
    /// than the budget (a retransmission backoff can be) moves the budget's end past it, so
    /// every call reaches the next timer; far window edges alone do not.
    pub(crate) fn pump(&mut self) {
        let Some(cfg) = self.fabric_cfg() else { return };
        let mut deadline: Option<u64> = None;
        self.outage_edges();
        loop {
            if let Some(f) = self.fabric.as_mut() {
                f.quiet_links();
            }
            let mut progress = false;
            for i in 0..self.nics.len() {
                self.sync_engine(i);
                progress |= self.feed(i);
            }
            for i in 0..self.nics.len() {
                progress |= self.transmit(i);
            }
            progress |= self.deliver();
            for i in 0..self.nics.len() {
                progress |= self.drain(i);
            }
            let now = self.now_ns;
            if let Some(f) = self.fabric.as_mut() {
                for (k, ne) in f.engines.iter_mut().enumerate() {
                    if !f.faults.stalled(k) {
                        ne.nic.handle_timeout(now, &mut ne.writes);
                    }
                }
            }
            for i in 0..self.nics.len() {
                progress |= self.drain(i);
            }
            if progress {
                continue;
            }
            if self.fabric_idle() {
                return;
            }
            let Some(f) = self.fabric.as_ref() else {
                return;
            };
            let now = self.now_ns;
            let timer = f
                .links
                .values()
                .filter_map(|l| l.next_due())
                .chain(
                    f.engines
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| !f.faults.stalled(*k))
                        .filter_map(|(_, e)| e.nic.next_deadline()),
                )
                .chain(f.faults.next_due())
                .filter(|&t| t > now)
                .min();
            // Something due now that made no progress waits for a stalled core: the stall's
            // end is an edge.
            let next = timer
                .into_iter()
                .chain(f.faults.next_edge().filter(|&t| t > now))
                .min();
            let end = *deadline.get_or_insert_with(|| {
                let budget = cfg.step_budget_ns;
                let d = now.saturating_add(budget);
                timer.map_or(d, |t| d.max(t.saturating_add(budget)))
            });
            match next {
                Some(t) if t <= end => self.now_ns = t,
                _ => return,
            }
            self.outage_edges();
        }
    }

    /// Applies window edges that are due: a plane's ports go down (or up) on every NIC, a
    /// cable is pulled (or plugged back); switch and stall windows only change what
    /// [`Faults`] answers.
    fn outage_edges(&mut self) {
        let now = self.now_ns;
        let edges = match self.fabric.as_mut() {
            Some(f) => f.faults.take_edges(now),
            None => return,
        };
        for (kind, starts) in edges {
            match kind {
                WindowKind::Plane(plane) => {
                    for i in 0..self.nics.len() {
                        for p in 0..self.nics[i].port_link.len() {
                            if self.nics[i].port_plane(p) == plane {
                                self.set_link(i, p as u8, !starts);
                            }
                        }
                    }
                }
                WindowKind::Port { nic, port } if nic < self.nics.len() => {
                    self.set_link(nic, port, !starts);
                }
                _ => {}
            }
        }
    }

    /// The engine of NIC `i` learns that its port on `plane` changed operational state (its
    /// commands reach the stage at the next step).
    pub(crate) fn engine_plane(&mut self, i: usize, plane: u8, up: bool) {
        let now = self.now_ns;
        if let Some(f) = self.fabric.as_mut() {
            let e = f.engines[i].nic.fw_mut();
            if up {
                e.handle_plane_up(now, plane);
            } else {
                e.handle_plane_down(now, plane);
            }
        }
    }
}

/// NIC `i` has an operational port on `plane`.
fn port_up(nics: &[NicState], i: usize, plane: u8) -> bool {
    let n = &nics[i];
    (0..n.port_link.len())
        .filter(|&p| n.port_plane(p) == plane)
        .any(|p| n.port_link[p] && n.port_admin[p])
}

pub(super) fn cqe(
    wr_id: u64,
    status: CqeStatus,
    opcode: CqeOpcode,
    len: u32,
    qpn: u32,
    index: u32,
) -> Cqe {
    Cqe {
        wr_id,
        status,
        opcode,
        byte_len: len,
        imm: None,
        qpn,
        wqe_index: index as u16,
        solicited: false,
        syndrome: 0,
    }
}
