//! The datapath stage: every per-packet job of an MRC NIC, in both directions, for all its QPs.
//!
//! This is the one functional model of the NIC's datapath hardware: the simulator clocks it,
//! the NIC image's self-test stands it in for the hardware, and the RTL blocks are checked
//! against the blocks it is built from. It is sans-IO and never reads a clock: every input
//! carries `now_ns`.
//!
//! | side | job |
//! |---|---|
//! | host | send and receive work requests posted ([`Datapath::post_send`], [`Datapath::post_recv`]); the CQEs of the sends the firmware orders completed, written from the send queue, and the completions and events the firmware writes itself, passed on ([`Datapath::poll_host_writes`]) |
//! | transmit | segmentation, the EV pick per packet from the QP's EV table, header fields, the per-PSN send state; retransmissions the firmware orders go first; control packets (ACKs, NACKs, probes, replies) before both ([`Datapath::poll_packets`]) |
//! | receive | header checks, the receive PSN bitmap, rkey and bounds checks and placement by RETH, coalesced SACK / NACK generation; at the sender, ACK and NACK application to the per-PSN state ([`Datapath::handle_packets`]) |
//! | firmware | summaries and reports out ([`Datapath::poll_events`]); EV table, window, QP context, region table, retransmission and completion commands in ([`Datapath::handle_commands`]) |
//!
//! The firmware never sees a data packet: it hears of what packets changed through the
//! `mrc_abi::device::csr` entries the stage reports, and steers the stage with the ones it
//! takes. Every refused input is counted ([`DatapathCounters`]); nothing panics.
//!
//! **Back-pressure.** The stage never drops a report: it takes a received packet or sends a
//! packet only while its event queue has room for what that may report. When it has not,
//! [`Datapath::handle_packets`] and [`Datapath::poll_packets`] return early (counted in
//! `backpressure`) until [`Datapath::poll_events`] makes room, as a hardware pipeline stalls
//! on a full queue.

mod events;
mod qp;
mod rx;
mod tx;

use core::marker::PhantomData;

use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};
use mrc_abi::device::csr::{
    self, Complete, CompleteSends, CsrEntry, CsrEvent, CsrKind, PlaneDown, PostCqe, RegionWrite,
    REGION_ADD, REGION_REMOTE_READ, REGION_REMOTE_WRITE,
};
use mrc_abi::wire::EvFormat;

pub use events::{Ctrl, Events, CTRL_CAP, EVENT_CAP};
pub use qp::{DpQp, DpState, QpContext, QpProgress, QpView, RxShared};
pub use rx::RxCounters;
pub use tx::{PostError, Reorder, Stall, TxCounters, TLP_REORDER_WINDOWS};

use crate::capacity::{Capacity, Slots};
use crate::csr_queue::CsrQueue;
use crate::datapath::ack_gen::AckGenConfig;
use crate::datapath::blocks::{Blocks, ModelBlocks};
use crate::datapath::packet::{DropReason, Packet, PacketBody, RxVerdict, SendWr, VerdictSink};
use crate::datapath::placement::{Access, MemRegion, Regions, RegisterError};

/// Data packets one QP sends in a row before the next QP gets its turn.
pub const TX_BURST_PKTS: u8 = 4;

/// Host-interface writes (completions, events) the stage buffers.
pub const HOST_CAP: usize = 128;

/// The header fields of a QP's packets that come from its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hdr {
    pub qpn: u32,
    pub dest_qpn: u32,
    pub ev_format: EvFormat,
    pub value_base: u32,
}

/// The stage's NIC-wide configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DatapathConfig {
    /// Payload bytes per full packet, `1..=65535`.
    pub mtu_payload: u32,
    /// ACK coalescing of every QP's receive side.
    pub ack: AckGenConfig,
    /// Test only: a TRIMMED_LAST_HOP NACK is taken as the packet's ACK, so the packet is never
    /// resent (the planted bug the test kit's checker must catch).
    #[cfg(feature = "testkit")]
    pub planted_bug: bool,
}

impl DatapathConfig {
    /// The defaults.
    pub const DEFAULT: DatapathConfig = DatapathConfig {
        mtu_payload: 4096,
        ack: AckGenConfig::DEFAULT,
        #[cfg(feature = "testkit")]
        planted_bug: false,
    };

    #[cfg(feature = "testkit")]
    pub(crate) fn planted_bug(&self) -> bool {
        self.planted_bug
    }

    #[cfg(not(feature = "testkit"))]
    pub(crate) fn planted_bug(&self) -> bool {
        false
    }
}

impl Default for DatapathConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Stage counters: every drop has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DatapathCounters {
    pub rx_packets: u64,
    pub rx_unknown_qp: u64,
    pub rx_qp_not_ready: u64,
    pub rx_duplicate: u64,
    pub rx_trimmed: u64,
    pub rx_out_of_window: u64,
    pub rx_remote_access: u64,
    pub rx_length: u64,
    pub rx_no_recv_buffer: u64,
    pub rx_too_many_wimm: u64,
    pub rx_stale: u64,
    pub rx_unexpected: u64,
    pub placed: u64,
    pub data_sent: u64,
    pub retransmits_sent: u64,
    pub acks_sent: u64,
    pub nacks_sent: u64,
    pub probes_sent: u64,
    pub probe_replies_sent: u64,
    /// Control packets dropped because the control queue was full.
    pub ctrl_dropped: u64,
    pub commands: u64,
    /// Command entries that failed `CsrEvent::decode`.
    pub commands_malformed: u64,
    /// DP->FW kinds found among the commands.
    pub commands_wrong_side: u64,
    /// Commands for a QP number the stage does not have.
    pub commands_unknown_qp: u64,
    pub events: u64,
    /// Events pushed with no room (a bug: producers check first).
    pub events_overflow: u64,
    /// Most events held at once.
    pub events_max_depth: u64,
    /// Inputs (received packets, transmit polls) held back for lack of event room.
    pub backpressure: u64,
    /// Host-interface writes passed on.
    pub host_writes: u64,
    pub post_refused: u64,
    pub plane_downs: u64,
    pub timeouts_fired: u64,
}

/// The datapath stage of one NIC with the capacities `C`, its hardware blocks answered by `B`
/// (the models unless a stand-in is given: [`crate::datapath::blocks`]). See the module docs.
pub struct Datapath<C: Capacity, B: Blocks = ModelBlocks> {
    cfg: DatapathConfig,
    qps: C::PerQp<C::DpQp>,
    regions: C::Regions,
    ctrl: Ctrl,
    events: Events,
    host: CsrQueue<HOST_CAP>,
    /// The QP whose turn it is to send data, and how many it sent in a row.
    tx_rr: usize,
    tx_burst: u8,
    /// The earliest coalescing deadline of any QP (possibly stale: early, never late).
    ack_deadline: Option<u64>,
    /// Some QP may have reports waiting outside an input.
    reports: bool,
    /// Runs of packets at once where they give what one packet at a time gives
    /// ([`Self::set_fast_paths`]).
    fast: bool,
    counters: DatapathCounters,
    blocks: B,
    /// The oldest entries of `events` a stand-in's event queue holds already (pushed at the
    /// next poll: see [`Self::offer_events`]).
    events_offered: usize,
    _c: PhantomData<C>,
}

/// What [`Datapath::poll_packets`]'s look for a retransmission found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retx {
    /// One was sent.
    Sent,
    /// None is queued.
    None,
    /// Some QP holds one it could not send now.
    Held,
}

/// Events one data packet may report: TxStart, served skips.
const TX_EVENTS: usize = 1 + 16;
/// Events one received packet may report.
const RX_EVENTS: usize = tx::ACK_EVENTS + 1;

impl<C: Capacity> Datapath<C> {
    /// A stage with no QP context and no region, every block its model.
    pub fn new(cfg: DatapathConfig) -> Self {
        Self::with_blocks(cfg, ModelBlocks)
    }
}

impl<C: Capacity, B: Blocks> Datapath<C, B> {
    /// A stage with no QP context and no region whose blocks `blocks` answers. The fast
    /// paths ([`Self::set_fast_paths`]) are off unless every block is its model.
    pub fn with_blocks(cfg: DatapathConfig, blocks: B) -> Self {
        let fast = blocks.models_only();
        Datapath {
            cfg,
            qps: C::PerQp::<C::DpQp>::build(|i| C::DpQp::new(i as u32)),
            regions: C::Regions::empty(),
            ctrl: Ctrl::EMPTY,
            events: Events::EMPTY,
            host: CsrQueue::EMPTY,
            tx_rr: 0,
            tx_burst: 0,
            ack_deadline: None,
            reports: false,
            fast,
            counters: DatapathCounters::default(),
            blocks,
            events_offered: 0,
            _c: PhantomData,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &DatapathConfig {
        &self.cfg
    }

    /// Turn the fast paths on (the default) or off. The fast paths take runs of packets at
    /// once (a run of new packets of one work request on transmit, a run of in-order writes
    /// on receive) with exactly the packets, verdicts, reports and counters of the one-at-a-
    /// time paths; off, every packet takes the general path. For equivalence tests. They
    /// stay off while a block has a stand-in (a run's picks bypass the block ports).
    pub fn set_fast_paths(&mut self, on: bool) {
        self.fast = on && self.blocks.models_only();
    }

    /// The blocks become `blocks`. Give a stand-in before the first command: it takes the
    /// blocks from their reset state, as the QP contexts' first commands set them up. The
    /// fast paths go off unless every block is its model.
    pub fn set_blocks(&mut self, blocks: B) {
        self.fast = self.fast && blocks.models_only();
        self.blocks = blocks;
        self.events_offered = 0;
    }

    /// The blocks' implementation.
    pub fn blocks(&self) -> &B {
        &self.blocks
    }

    /// The blocks' implementation, to change it (e.g. a stand-in's settings).
    pub fn blocks_mut(&mut self) -> &mut B {
        &mut self.blocks
    }

    /// Counters.
    pub fn counters(&self) -> DatapathCounters {
        let mut c = self.counters;
        c.ctrl_dropped = self.ctrl.dropped;
        c.events_overflow = self.events.overflow;
        c.events_max_depth = self.events.max_depth as u64;
        c
    }

    /// QP `qpn`'s state for reports.
    pub fn qp(&self, qpn: u32) -> Option<QpView> {
        self.qps.as_ref().get(qpn as usize).map(QpContext::view)
    }

    /// QP `qpn`'s progress (state, una, bytes in flight, work requests held): what a host
    /// polls on every input, without copying the counters [`Datapath::qp`] reports.
    pub fn qp_progress(&self, qpn: u32) -> Option<QpProgress> {
        self.qps.as_ref().get(qpn as usize).map(QpContext::progress)
    }

    /// The registered regions.
    pub fn regions(&self) -> &C::Regions {
        &self.regions
    }

    /// Register a memory region remote peers may write (the firmware's MR table write).
    ///
    /// # Errors
    /// [`RegisterError`] (counted by the table).
    pub fn register_region(&mut self, region: MemRegion) -> Result<u16, RegisterError> {
        self.regions.register(region)
    }

    /// Remove a region.
    ///
    /// # Errors
    /// [`RegisterError::UnknownRkey`].
    pub fn deregister_region(&mut self, rkey: u32) -> Result<MemRegion, RegisterError> {
        self.regions.deregister(rkey)
    }

    /// Send work requests QP `qpn`'s send queue has room for (0: no such QP), as a host
    /// driver tracks its queue: a post beyond it is refused (and counted).
    pub fn send_queue_room(&self, qpn: u32) -> usize {
        self.qps
            .as_ref()
            .get(qpn as usize)
            .map_or(0, QpContext::send_queue_room)
    }

    /// A send work request the host posted to QP `qpn` (the WQE the host interface fetched).
    ///
    /// # Errors
    /// [`PostError`] (counted).
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), PostError> {
        let r = match self.qps.as_mut().get_mut(qpn as usize) {
            Some(qp) => qp.post_send(wr),
            None => Err(PostError::NotSending),
        };
        if r.is_err() {
            self.counters.post_refused += 1;
        }
        r
    }

    /// A receive work request the host posted to QP `qpn` (for an incoming
    /// Write-with-Immediate, which consumes the oldest).
    ///
    /// # Errors
    /// [`PostError`] (counted).
    pub fn post_recv(&mut self, qpn: u32, wr_id: u64) -> Result<(), PostError> {
        let r = match self.qps.as_mut().get_mut(qpn as usize) {
            Some(qp) => qp.post_recv(wr_id),
            None => Err(PostError::NotSending),
        };
        if r.is_err() {
            self.counters.post_refused += 1;
        }
        r
    }

    /// Firmware commands (the FW->DP ring's entries), in order. Returns how many were taken:
    /// all of them, unless the host-interface queue filled (then the rest waits).
    pub fn handle_commands(&mut self, now_ns: u64, cmds: &[CsrEntry]) -> usize {
        for (i, e) in cmds.iter().enumerate() {
            // (checked in place; host writes, most of the commands, go on as they are)
            let kind = match e.check() {
                Ok(k) => k,
                Err(_) => {
                    self.counters.commands_malformed += 1;
                    continue;
                }
            };
            if kind.is_event() {
                self.counters.commands_wrong_side += 1;
                continue;
            }
            match kind {
                CsrKind::Complete
                | CsrKind::EvEvent
                | CsrKind::ProbeResult
                | CsrKind::PostCqe
                | CsrKind::PostEvent => {
                    if self.host.room() == 0 {
                        return i;
                    }
                    self.host.push_entry(*e);
                    self.counters.host_writes += 1;
                }
                CsrKind::CompleteSends => {
                    let c = e.view::<CompleteSends>();
                    if self.host.room() < usize::from(c.count.get()) {
                        return i;
                    }
                    self.complete_sends(c);
                }
                CsrKind::PlaneDown => {
                    self.counters.plane_downs += 1;
                    let plane = e.view::<PlaneDown>().plane;
                    for qp in self.qps.as_mut() {
                        qp.plane_down(plane, &mut self.blocks);
                    }
                }
                CsrKind::RegionWrite => self.region_write(e.view()),
                _ => {
                    // (a QP command: the checked entry copied out for the QP's dispatch)
                    let cmd = CsrEvent::copy_checked(e, kind);
                    let qpn = cmd.qpn().unwrap_or(u32::MAX);
                    match self.qps.as_mut().get_mut(qpn as usize) {
                        Some(qp) => {
                            qp.handle_command(
                                now_ns,
                                &cmd,
                                &self.cfg,
                                &mut self.ctrl,
                                &mut self.blocks,
                            );
                            if matches!(cmd, CsrEvent::QpState(_)) {
                                self.reports = true;
                            }
                        }
                        None => self.counters.commands_unknown_qp += 1,
                    }
                }
            }
            self.counters.commands += 1;
        }
        cmds.len()
    }

    /// The firmware's order to complete retired sends: their completions go to the host
    /// queue (room for `count` is the caller's to check).
    fn complete_sends(&mut self, c: &CompleteSends) {
        let (qpn, count) = (c.qpn.get(), c.count.get());
        let Some(qp) = self.qps.as_mut().get_mut(qpn as usize) else {
            self.counters.commands_unknown_qp += 1;
            return;
        };
        let (host, writes) = (&mut self.host, &mut self.counters.host_writes);
        let cq = (c.flags & csr::CS_POST_CQE != 0).then(|| c.cqn.get());
        qp.complete_sends(count, |wr_id| {
            let e = match cq {
                Some(cqn) => CsrEvent::PostCqe(PostCqe::new(
                    CqeStatus::Success as u8,
                    CqeOpcode::Write as u8,
                    cqn,
                    qpn,
                    wr_id as u16,
                    0,
                )),
                None => CsrEvent::Complete(Complete::new(
                    qpn,
                    wr_id,
                    csr::opcode::SEND,
                    csr::status::OK,
                    0,
                    0,
                    0,
                )),
            };
            host.push(e);
            *writes += 1;
        });
    }

    /// A firmware write of the region table (refusals are counted by the table).
    fn region_write(&mut self, r: &RegionWrite) {
        let rkey = r.rkey.get();
        if r.op == REGION_ADD {
            let _ = self.regions.register(MemRegion {
                rkey,
                base_va: r.base_va.get(),
                length: r.length.get(),
                access: Access {
                    remote_write: r.access & REGION_REMOTE_WRITE != 0,
                    remote_read: r.access & REGION_REMOTE_READ != 0,
                },
            });
        } else {
            let _ = self.regions.deregister(rkey);
        }
    }

    /// Received packets, in order, each answered in `verdicts` (placement by the caller
    /// before it delivers later completions; a slice of [`RxVerdict`], or
    /// [`crate::datapath::packet::DiscardVerdicts`] when there is nothing to place). Returns
    /// how many were taken (fewer than `min(pkts.len(), verdicts.capacity())` when the event
    /// queue is short of room).
    pub fn handle_packets<V: VerdictSink + ?Sized>(
        &mut self,
        now_ns: u64,
        pkts: &[Packet],
        verdicts: &mut V,
    ) -> usize {
        let n = pkts.len().min(verdicts.capacity());
        let pkts = pkts.get(..n).unwrap_or_default();
        let mut i = 0;
        while let Some(pkt) = pkts.get(i) {
            if self.events.room() < RX_EVENTS {
                self.counters.backpressure += 1;
                return i;
            }
            if self.fast && matches!(pkt.body, PacketBody::Write { .. }) {
                let k = self.write_run(now_ns, pkts.get(i..).unwrap_or_default(), verdicts, i);
                if k > 0 {
                    i += k;
                    continue;
                }
            }
            self.counters.rx_packets += 1;
            let mut note = None;
            let v = match (self.qps.as_mut().get_mut(pkt.dest_qpn as usize), &pkt.body) {
                // (an ACK touches the send side alone: no shared receive state, no deadline)
                (Some(qp), PacketBody::Ack(a)) if qp.state() != DpState::Reset => {
                    qp.handle_ack(now_ns, pkt, a, &mut self.events)
                }
                (Some(qp), _) if qp.state() != DpState::Reset => {
                    let shared = RxShared {
                        regions: &mut self.regions,
                        ctrl: &mut self.ctrl,
                        stand_in: !self.blocks.models_only(),
                        blocks: &mut self.blocks,
                    };
                    let v = qp.handle_packet(now_ns, pkt, &self.cfg, shared, &mut self.events);
                    // (only a write moves the coalescing deadline or leaves reports: an
                    // ACK, NACK or probe touches the send side and the control queue)
                    if matches!(pkt.body, PacketBody::Write { .. }) {
                        note = qp.ack_deadline_ns();
                        if qp.reports_pending() || qp.state() == DpState::Error {
                            self.reports = true;
                        }
                    }
                    v
                }
                _ => RxVerdict::Dropped(DropReason::UnknownQp),
            };
            if let Some(d) = note {
                self.note_ack_deadline(d);
            }
            verdicts.set(i, v);
            // (an ACK, NACK or probe is consumed: nothing to count)
            if v != RxVerdict::Consumed {
                self.count_verdict(&v);
            }
            i += 1;
        }
        n
    }

    #[inline]
    fn note_ack_deadline(&mut self, d: u64) {
        self.ack_deadline = Some(self.ack_deadline.map_or(d, |a| a.min(d)));
    }

    /// A run of writes at the front of `pkts` to one QP (see `QpContext::handle_write_run`),
    /// with the stage's bookkeeping of as many single packets. Returns how many were taken.
    #[inline]
    fn write_run<V: VerdictSink + ?Sized>(
        &mut self,
        now_ns: u64,
        pkts: &[Packet],
        verdicts: &mut V,
        at: usize,
    ) -> usize {
        let Some(first) = pkts.first() else { return 0 };
        // (a QP that is not receiving, RESET among them, takes no run)
        let Some(qp) = self.qps.as_mut().get_mut(first.dest_qpn as usize) else {
            return 0;
        };
        let (k, deadline) = qp.handle_write_run(
            now_ns,
            pkts,
            verdicts,
            at,
            RxShared {
                regions: &mut self.regions,
                ctrl: &mut self.ctrl,
                stand_in: !self.blocks.models_only(),
                blocks: &mut self.blocks,
            },
        );
        if k == 0 {
            return 0;
        }
        // (a plain write run can make a waiting immediate reportable; it cannot fail the QP)
        if qp.imm_reports_pending() {
            self.reports = true;
        }
        if let Some(d) = deadline {
            self.note_ack_deadline(d);
        }
        self.counters.rx_packets += k as u64;
        self.counters.placed += k as u64;
        k
    }

    fn count_verdict(&mut self, v: &RxVerdict) {
        let c = &mut self.counters;
        match v {
            RxVerdict::Place { .. } => c.placed += 1,
            RxVerdict::Consumed => {}
            RxVerdict::Dropped(r) => {
                let k = match r {
                    DropReason::UnknownQp => &mut c.rx_unknown_qp,
                    DropReason::QpNotReady => &mut c.rx_qp_not_ready,
                    DropReason::Duplicate => &mut c.rx_duplicate,
                    DropReason::Trimmed => &mut c.rx_trimmed,
                    DropReason::OutOfWindow => &mut c.rx_out_of_window,
                    DropReason::RemoteAccess => &mut c.rx_remote_access,
                    DropReason::Length => &mut c.rx_length,
                    DropReason::NoRecvBuffer => &mut c.rx_no_recv_buffer,
                    DropReason::TooManyWimm => &mut c.rx_too_many_wimm,
                    DropReason::Stale => &mut c.rx_stale,
                    DropReason::Unexpected => &mut c.rx_unexpected,
                };
                *k += 1;
            }
        }
    }

    /// Packets to send, into the front of `out`: control packets first, then a retransmission
    /// of any QP, then data of the QPs in turn ([`TX_BURST_PKTS`] in a row each). Returns how
    /// many. The slots after them are scratch: a transmit run lays out its first packet
    /// before it knows the packet can leave. Each packet returned is the header builder's
    /// (a stand-in's, `Blocks::header`, when the blocks have one).
    pub fn poll_packets(&mut self, now_ns: u64, out: &mut [Packet]) -> usize {
        let mut n = 0;
        while let Some(slot) = out.get_mut(n) {
            if self.ctrl.pop_into(slot) {
                Self::count_ctrl(&mut self.counters, slot);
                n += 1;
                continue;
            }
            if self.events.room() < TX_EVENTS {
                self.counters.backpressure += 1;
                break;
            }
            let retx = self.next_retransmit(now_ns, slot);
            if retx == Retx::Sent {
                n += 1;
                continue;
            }
            let mut failed = None;
            // (a retransmission some QP holds is tried before every packet, with its
            // counters: packets one at a time then)
            if self.fast && retx == Retx::None {
                // (no QP has data to send: `next_data` would find none either)
                let Some((k, stall)) =
                    self.next_data_run(now_ns, out.get_mut(n..).unwrap_or_default())
                else {
                    break;
                };
                n += k;
                match stall {
                    // (the run's QP failed its attempt at packet `n`: the others follow,
                    // as in `next_data`)
                    Some(i) => failed = Some(i),
                    None if k > 0 => continue,
                    None => {}
                }
            }
            let Some(slot) = out.get_mut(n) else { break };
            if !self.next_data(now_ns, slot, failed) {
                break;
            }
            n += 1;
        }
        if !self.blocks.models_only() {
            for p in out.iter_mut().take(n) {
                *p = self.blocks.header(p);
            }
        }
        n
    }

    fn count_ctrl(c: &mut DatapathCounters, p: &Packet) {
        use crate::datapath::packet::PacketBody as B;
        match p.body {
            B::Ack(_) => c.acks_sent += 1,
            B::Nack(_) => c.nacks_sent += 1,
            B::Probe(_) => c.probes_sent += 1,
            B::ProbeReply(_) => c.probe_replies_sent += 1,
            B::Write { .. } => {}
        }
    }

    /// A retransmission of the first QP (in turn order) that has one and may send it.
    /// [`Retx::Held`]: none left, but some QP holds one it could not send (it tries again
    /// before every packet).
    fn next_retransmit(&mut self, now_ns: u64, out: &mut Packet) -> Retx {
        let qps = self.qps.as_mut();
        let q = qps.len();
        let mut held = false;
        for k in 0..q {
            let i = (self.tx_rr + k) % q;
            let Some(qp) = qps.get_mut(i) else { continue };
            if !qp.has_retransmit() {
                continue;
            }
            if qp
                .poll_data(now_ns, &mut self.events, out, &mut self.blocks)
                .is_err()
            {
                held = true;
                continue;
            }
            if out.retransmit {
                self.counters.retransmits_sent += 1;
            } else {
                self.counters.data_sent += 1;
            }
            return Retx::Sent;
        }
        if held {
            Retx::Held
        } else {
            Retx::None
        }
    }

    /// A data packet of the QP whose turn it is (the turn moves on after a burst, or to the
    /// next QP that can send). `tried`: a QP whose attempt at this packet failed already.
    fn next_data(&mut self, now_ns: u64, out: &mut Packet, tried: Option<usize>) -> bool {
        let qps = self.qps.as_mut();
        let q = qps.len();
        for k in 0..q {
            let i = (self.tx_rr + k) % q;
            if tried == Some(i) {
                continue;
            }
            let Some(qp) = qps.get_mut(i) else { continue };
            if !qp.wants_to_send()
                || qp
                    .poll_data(now_ns, &mut self.events, out, &mut self.blocks)
                    .is_err()
            {
                continue;
            }
            self.took_turn(i, k == 0, 1);
            if out.retransmit {
                self.counters.retransmits_sent += 1;
            } else {
                self.counters.data_sent += 1;
            }
            return true;
        }
        false
    }

    /// QP `i` sent `n` packets in a row, the first found at the turn (`at_turn`) or after
    /// it: the turn as after `n` single packets when no other QP sends between them.
    #[inline]
    fn took_turn(&mut self, i: usize, at_turn: bool, n: usize) {
        let q = self.qps.as_ref().len();
        let before = if at_turn {
            usize::from(self.tx_burst)
        } else {
            0
        };
        let c = (before + n) % usize::from(TX_BURST_PKTS);
        if c == 0 {
            self.tx_rr = (i + 1) % q;
            self.tx_burst = 0;
        } else {
            self.tx_rr = i;
            // (below TX_BURST_PKTS)
            self.tx_burst = c as u8;
        }
    }

    /// A run of new data packets of the QP whose turn it is, into the front of `out` (see
    /// `QpContext::poll_data_run`): at most what is left of its burst when another QP has
    /// something to send.
    /// Returns the packets sent and, when the run's QP then failed its attempt at the next
    /// packet, that QP (`(0, None)`: nothing changed); `None` when no QP wants to send.
    fn next_data_run(&mut self, now_ns: u64, out: &mut [Packet]) -> Option<(usize, Option<usize>)> {
        let qps = self.qps.as_mut();
        let q = qps.len();
        let mut first = None;
        let mut others = false;
        for k in 0..q {
            let i = (self.tx_rr + k) % q;
            if qps.get(i).is_some_and(QpContext::wants_to_send) {
                if first.is_none() {
                    first = Some((i, k == 0));
                } else {
                    others = true;
                    break;
                }
            }
        }
        let (i, at_turn) = first?;
        let mut limit = out.len();
        if others {
            let before = if at_turn {
                usize::from(self.tx_burst)
            } else {
                0
            };
            limit = limit.min(usize::from(TX_BURST_PKTS) - before);
        }
        let Some(qp) = qps.get_mut(i) else {
            return Some((0, None));
        };
        // (alone, the QP is polled again after its run: the run reports that poll's stall)
        let (k, stall) = qp.poll_data_run(
            now_ns,
            &mut self.events,
            out.get_mut(..limit).unwrap_or_default(),
            TX_EVENTS,
            !others,
        );
        if k > 0 {
            self.took_turn(i, at_turn, k);
            self.counters.data_sent += k as u64;
        }
        Some((k, stall.map(|_| i)))
    }

    /// Whether a retransmission waits (a NIC with several stages polls this one first).
    pub fn has_retransmit(&self) -> bool {
        self.qps.as_ref().iter().any(QpContext::has_retransmit)
    }

    /// Whether anything waits to be sent.
    pub fn wants_to_send(&self) -> bool {
        !self.ctrl.is_empty() || self.qps.as_ref().iter().any(QpContext::wants_to_send)
    }

    /// Reports for the firmware (the DP->FW ring's entries), oldest first, into the front of
    /// `out`: copies of what [`Self::events`] shows, consumed, or a stand-in event queue's
    /// entries (`Blocks::event_pop`) when the blocks have one. Returns how many.
    pub fn poll_events(&mut self, out: &mut [CsrEntry]) -> usize {
        self.queue_reports();
        let stand_in = !self.blocks.models_only();
        if stand_in {
            self.offer_events();
        }
        let n = self.events.drain_into(out);
        if stand_in {
            for e in out.iter_mut().take(n) {
                *e = self.blocks.event_pop(e);
            }
            self.events_offered -= n;
        }
        self.counters.events += n as u64;
        n
    }

    /// The reports queued since the last poll into a stand-in's event queue, in order (all
    /// before any pop: between two polls the stage only pushes).
    fn offer_events(&mut self) {
        let (a, b) = self.events.as_slices();
        for e in a.iter().chain(b).skip(self.events_offered) {
            self.blocks.event_push(e);
        }
        self.events_offered = self.events.len();
    }

    /// The reports waiting for the firmware (the DP->FW ring's entries), oldest first, where
    /// they sit in the ring: two runs, the second empty unless they wrap the ring's end. The
    /// firmware reads them in place and moves the consumer index with
    /// [`Self::consume_events`]; they stay until then. (Reports a QP keeps outside an input,
    /// flushed work requests and placed immediates, are queued first, as room allows.)
    #[inline]
    pub fn events(&mut self) -> (&[CsrEntry], &[CsrEntry]) {
        self.queue_reports();
        self.events.as_slices()
    }

    /// The firmware consumed the `n` oldest reports [`Self::events`] showed (all of them
    /// when fewer wait). A stand-in event queue gives up as many (its entries compared by the
    /// stand-in; the firmware read the model's in place).
    pub fn consume_events(&mut self, n: usize) {
        let n = n.min(self.events.len());
        if !self.blocks.models_only() {
            self.offer_events();
            let (a, b) = self.events.as_slices();
            for e in a.iter().chain(b).take(n) {
                let _ = self.blocks.event_pop(e);
            }
            self.events_offered -= n;
        }
        self.events.consume(n);
        self.counters.events += n as u64;
    }

    /// Reports some QP keeps outside an input into the event queue, as room allows. They are
    /// rare: the look is inline, the queueing out of line.
    #[inline]
    fn queue_reports(&mut self) {
        if self.reports {
            self.queue_kept_reports();
        }
    }

    /// [`Self::queue_reports`] when some QP keeps reports.
    #[inline(never)]
    fn queue_kept_reports(&mut self) {
        let mut left = false;
        for qp in self.qps.as_mut() {
            qp.poll_reports(&mut self.events);
            left |= qp.reports_pending();
        }
        self.reports = left;
    }

    /// Events waiting for the firmware.
    pub fn events_pending(&self) -> usize {
        self.events.len()
    }

    /// Whether [`Self::poll_events`] may return something (events queued, or reports some
    /// QP keeps outside an input).
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty() || self.reports
    }

    /// Whether [`Self::poll_host_writes`] would return something.
    #[inline]
    pub fn has_host_writes(&self) -> bool {
        !self.host.is_empty()
    }

    /// Completions and events the firmware wrote for the host (`Complete`, `EvEvent`,
    /// `PostCqe`, `PostEvent` entries), oldest first, into the front of `out`: copies of what
    /// [`Self::host_writes`] shows, consumed. Returns how many.
    pub fn poll_host_writes(&mut self, out: &mut [CsrEntry]) -> usize {
        self.host.drain_into(out)
    }

    /// The host-interface writes waiting (see [`Self::poll_host_writes`]), oldest first,
    /// where they sit: two runs, the second empty unless they wrap the queue's end. They stay
    /// until [`Self::consume_host_writes`]. Each passed the checks of its kind
    /// (`CsrEntry::check`) when the firmware's command came in.
    pub fn host_writes(&self) -> (&[CsrEntry], &[CsrEntry]) {
        self.host.as_slices()
    }

    /// The `n` oldest host-interface writes were written out (all of them when fewer wait).
    pub fn consume_host_writes(&mut self, n: usize) {
        self.host.consume(n);
    }

    /// When [`Self::handle_timeout`] should next be called (`None`: no ACK is being
    /// coalesced). May be early (a deadline an ACK closed since), never late.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.ack_deadline
    }

    /// The coalescing timers due at `now_ns` fire (their ACKs go to the control queue).
    /// Returns whether any ACK was due.
    #[inline]
    pub fn handle_timeout(&mut self, now_ns: u64) -> bool {
        if self.ack_deadline.is_none_or(|d| d > now_ns) {
            return false;
        }
        self.handle_due_timeouts(now_ns)
    }

    /// [`Self::handle_timeout`] when a deadline passed.
    #[inline(never)]
    fn handle_due_timeouts(&mut self, now_ns: u64) -> bool {
        let mut any = false;
        let mut next: Option<u64> = None;
        for qp in self.qps.as_mut() {
            let mut deadline = qp.ack_deadline_ns();
            if deadline.is_some_and(|d| d <= now_ns) {
                any |= qp.handle_timeout(now_ns, &mut self.ctrl, &mut self.blocks);
                deadline = qp.ack_deadline_ns();
            }
            if let Some(d) = deadline {
                next = Some(next.map_or(d, |a| a.min(d)));
            }
        }
        if any {
            self.counters.timeouts_fired += 1;
        }
        self.ack_deadline = next;
        any
    }
}

#[cfg(test)]
mod tests;
