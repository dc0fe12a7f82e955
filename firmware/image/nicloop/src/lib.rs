//! # mrc-nicloop: one iteration of the NIC image's main loop
//!
//! [`NicLoop::step`] takes `now_ns` (the hardware timer, read once by the caller) and a
//! [`Datapath`] (the image's `hal` on the NIC, fake in-memory queues in tests) and moves events
//! between the datapath and [`mrc_firmware::engine::Engine`]:
//!
//! 0. Admin commands ([`Datapath::pop_admin`]: the 64-byte mrc-abi `AdminCmd`s the host
//!    interface fetched from the host's admin queue), executed by the shared executor
//!    `mrc_firmware::admin` on the NIC's tables ([`NicAdmin`]) and the engine: CQs, PDs, MRs
//!    (remotely writable ones become engine placement regions), QPs created, moved through
//!    RESET -> INIT -> RTR -> RTS with their attributes checked by the device rules and the
//!    engine's OCP rules, destroyed; EV format / EV / CC profiles, EV deny / replace / query,
//!    port admin state. Each reply (status, syndrome, result words) goes back with
//!    [`Datapath::push_admin_reply`]; the events a command raises (port down, EV state
//!    changes) go out as FW->DP `PostEvent`. Only [`NicLoop::step_admin`] runs this step.
//! 1. DP->FW CSR ring (mrc-abi `device::csr`): every entry is checked with
//!    [`CsrEvent::decode`]; `AckSummary`, `Nack` and `ProbeReply` become the ACK / NACK / probe
//!    reply the engine takes in [`Engine::handle_packet`]; `PortEvent` becomes
//!    `handle_plane_down/up`; `RxDrops` is added to the loop's counters; `TxDone` advances the
//!    QP's send PSN that QUERY_QP reports; `WimmPlaced` records the message's length and
//!    solicited bit for its receive CQE (below); malformed entries and FW->DP kinds found on
//!    this ring are counted and dropped.
//! 2. The per-packet receive header queue (mrc-abi `device::rxh`, [`Datapath::pop_rx`]): every
//!    64-byte entry is checked with [`RxhEntry::decode`], turned into the packet the engine
//!    takes ([`rx_packet`]) and handed to [`Engine::handle_tx_packet`]; the verdict (place the
//!    payload at region slot + offset, consumed, dropped with a reason) is written back into
//!    the entry with [`Datapath::rx_done`]. A malformed entry is answered `Dropped(Malformed)`
//!    and counted (`rxh_bad`).
//! 3. [`Engine::handle_timeout`] when [`Engine::poll_timeout`] is due.
//! 4. Engine transmit side into the per-packet transmit header queue (mrc-abi `device::txh`):
//!    the loop asks the datapath how many entries fit ([`Datapath::tx_room`]) and takes at most
//!    that many packets (and at most [`BUDGET`]) from [`Engine::poll_transmit_into`], each
//!    written as one 64-byte entry ([`txh_entry`]) with [`Datapath::push_tx`]. New data,
//!    retransmissions, ACKs, NACKs, probes and probe replies all leave this way. A full queue
//!    leaves the packets in the engine for a later step (counted in `tx_full`), so none is
//!    lost; a datapath that refuses an entry it said had room breaks the contract and the
//!    packet is counted in `tx_refused`.
//! 5. Completions to FW->DP `PostCqe`; EV state changes to FW->DP `EvUpdate`. A full queue
//!    drops the output and counts it. With the admin tables ([`NicLoop::step_admin`]) a
//!    completion's CQ is its QP's send or receive CQ, a receive CQE carries the length and
//!    solicited bit its `WimmPlaced` reported, and a completion with an error other than a
//!    flush moves the device QP to ERROR and posts a `QpFatal` event, as a host driver
//!    expects.
//!
//! Each queue is moved at most [`BUDGET`] entries per step, so one busy queue cannot
//! starve the timer or the other queues (the watchdog is kicked between steps).
//!
//! ## QP numbers
//! With the admin tables, everything facing the datapath and the host carries the device QPN
//! (what applications exchange, what packets carry): receive headers, ACK / NACK / probe-reply
//! entries, transmit headers, CQEs, EV updates and events; the loop translates to and from
//! the engine QP behind it. Without them ([`NicLoop::step`], QPs made with
//! [`NicLoop::engine_mut`]) the two are the same.
//!
//! ## Gaps, stated rather than invented
//! - **WQE indices and lengths.** `wqe_index` of a CQE is the low 16 bits of `wr_id` (work
//!   requests are posted with `wr_id` = WQE index, [`NicLoop::post_send`]); a send CQE's
//!   `byte_len` is 0 (the engine's completion does not carry it).
//! - **TxDone is not a completion.** A reliable write completes when it is acknowledged, which
//!   the engine reports; "every packet was sent once" only moves the send PSN.
//! - **Host doorbells.** Posting work requests needs the WQE rings in host memory (DMA),
//!   which the image's `hal` does not reach: callers post with [`NicLoop::post_send`] /
//!   [`NicLoop::post_recv`] (device QPNs).
//! - **Firmware update and EV probes on request.** FW_* admin commands are refused
//!   (`UNKNOWN_OPCODE`: the image's update path is not on the admin ring) and PROBE_EV is
//!   `BUSY` (the engine probes EVs on its own schedule, not on request).
#![no_std]
#![deny(unsafe_code)]

mod in_place;

use mrc_abi::device::admin::{AdminCommand, AdminReply, AdminStatus, QpState};
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus, CQE_SOLICITED};
use mrc_abi::device::csr::{
    AckSummary, CsrEvent, EvUpdate, NackEntry, PostCqe, PostEvent, ProbeReply, Retransmit,
    SendProbe, TxDone, WimmPlaced, ENTRY_BYTES,
};
use mrc_abi::device::event::Event;
use mrc_abi::device::regs::{caps, DeviceParams};
use mrc_abi::device::rxh::{
    flags as rxh_flags, RxhDropReason, RxhEntry, RxhVerdict, RXH_ENTRY_BYTES, RXH_VERDICT_BYTES,
};
use mrc_abi::device::txh::{
    flags as txh_flags, Txh, TxhAck, TxhBody, TxhHeader, TxhNack, TxhProbe, TxhWrite,
    TXH_ENTRY_BYTES,
};
use mrc_abi::device::EvState as AbiEvState;
use mrc_abi::wire::{
    AckRepr, Body, BthRepr, EvFormat, EvxRepr, MrcRepr, MrhRepr, NackReason, NackRepr, Opcode,
    ProbeRepr, RethRepr, Segment, TsxRepr,
};
use mrc_abi::Psn;
use mrc_firmware::admin::{Admin, AdminEnv, AdminResult, Ctx, ProbeOutcome};
use mrc_firmware::datapath::ack_gen::TrimMark;
use mrc_firmware::engine::ev_state::EvState;
use mrc_firmware::engine::ring::Ring;
use mrc_firmware::engine::{
    CheckedConfig, Completion, CompletionError, CompletionKind, DropReason, Engine, EngineConfig,
    EngineError, LocalBuf, QpError, QpEvEvent, RxMeta, RxVerdict, SendWr, TxBody, TxPacket,
    TIMERS_PER_QP,
};

/// QPs of the NIC engine.
pub const QPS: usize = 3;
/// EVs per QP (the engine issue asks for 128 to 256).
pub const EVS: usize = 128;
/// Planes.
pub const PLANES: usize = 4;
/// PSN window per direction (`64 * WIN_WORDS`): two MPR units of 128 PSNs.
pub const WIN: usize = 256;
/// 64-bit words of the PSN window bitmaps.
pub const WIN_WORDS: usize = 4;
/// Send work requests per QP.
pub const SQ: usize = 16;
/// Receive work requests per QP.
pub const RQ: usize = 16;
/// Registered regions.
pub const REGIONS: usize = 8;
/// Engine timers.
pub const TIMERS: usize = QPS * TIMERS_PER_QP;

/// The engine at the NIC core's capacities: 3 QPs, 128 EVs per QP over 4 planes, a 256-PSN
/// window, 16 send + 16 receive work requests per QP, 8 regions, `TIMERS_PER_QP` timers per QP.
///
/// Sized for the NIC core's memories (`firmware/memory-map.toml`). The image builds the
/// engine in place at boot ([`NicLoop::init_in_place`]) in an uninitialised static, so it is
/// `.bss` (nothing of it in the ITCM's image) and nothing engine-sized is built on the stack.
/// A QP at these capacities is about 19.6 KiB (EV table and sprayer for 128 EVs, the window's
/// per-PSN send records and bitmaps, the work-request rings), the engine's fixed part
/// (control queue, timer wheel, EV event queue) about 8 KiB. Creating a QP and moving it to
/// INIT write its fields in place ([`STACK_BUDGET`]). Thousands of QPs need QP context in NIC
/// DRAM behind a cache, which this engine does not have.
pub type NicEngine = Engine<QPS, EVS, PLANES, WIN, WIN_WORDS, SQ, RQ, REGIONS, TIMERS>;

/// The stack the loop may need, in bytes. The deepest path is the admin one: creating a QP
/// and moving it through INIT, RTR and RTS. The QP and its EV table are written in place
/// (`Engine::create_qp`, `EvTable::reset`); the sprayer, responder and requester (the largest,
/// about 5 KiB with its per-PSN send records) are still built as values. The QEMU self-test
/// measures that path (16,548 bytes; 81,172 when the QP and its table were values too) and
/// fails when it goes deeper than this; the NIC image's build fails when the DTCM cannot hold
/// its data plus this much stack.
pub const STACK_BUDGET: usize = 32 * 1024;

/// Entries moved through each queue per step.
pub const BUDGET: usize = 64;

/// Admin commands executed per step.
pub const ADMIN_BUDGET: usize = 8;

/// The NIC's admin tables (`mrc_firmware::admin`): 8 PDs, [`REGIONS`] MRs, 8 CQs, [`QPS`] QPs,
/// 4 EV format profiles, 4 EV profiles of up to [`EVS`] EVs, 4 CC profiles. All zero when
/// empty, so the image keeps them in `.bss` (15,400 bytes of DTCM), not in the initialised
/// data the ITCM also holds.
pub type NicAdmin = Admin<8, REGIONS, 8, QPS, 4, 4, EVS, 4>;

/// Ports of the NIC (one per plane).
pub const PORTS: usize = PLANES;

/// Port speed the NIC reports, Mb/s.
pub const PORT_SPEED_MBPS: u32 = 200_000;

/// The NIC's register-visible parameters as the admin executor checks them: QP and CQ
/// numbers share `1..16` (doorbell pages), [`EVS`] EVs per QP, [`PORTS`] ports on
/// [`PLANES`] planes, every capability but firmware update over the admin ring.
pub const NIC_PARAMS: DeviceParams = DeviceParams {
    device_id: mrc_abi::device::regs::PCI_ID,
    capabilities: caps::ALL & !caps::FW_UPDATE,
    num_ports: PORTS as u32,
    num_planes: PLANES as u32,
    max_qps: 16,
    max_cqs: 16,
    max_evs_per_qp: EVS as u32,
    doorbell_pages: 16,
};

/// The firmware image version QUERY_DEVICE reports.
pub const FW_VERSION: u32 = 0x0001_0000;

/// Interrupt vectors of the NIC's host function.
pub const VECTORS: u32 = 4;

/// Write-with-Immediate placements ([`WimmPlaced`]) waiting for their receive completion.
pub const WIMM_PENDING: usize = 16;

/// The datapath as the loop sees it: the two CSR rings and the receive and transmit header
/// queues of mrc-abi.
pub trait Datapath {
    /// The next DP->FW CSR entry (32 bytes), consuming it.
    fn pop_event(&mut self) -> Option<[u8; ENTRY_BYTES]>;
    /// Append a FW->DP CSR entry; `false` when the ring is full (the loop counts the drop).
    fn push_order(&mut self, entry: &[u8; ENTRY_BYTES]) -> bool;
    /// The oldest unanswered receive header entry (mrc-abi `RxhEntry` bytes), without
    /// consuming it: [`Datapath::rx_done`] answers it next.
    fn pop_rx(&mut self) -> Option<[u8; RXH_ENTRY_BYTES]>;
    /// Write `verdict` over the verdict bytes of the entry [`Datapath::pop_rx`] last returned
    /// and release it to the datapath (advance the consumer index).
    fn rx_done(&mut self, verdict: &[u8; RXH_VERDICT_BYTES]);
    /// Free entries of the transmit header queue: the loop writes at most this many with
    /// [`Datapath::push_tx`] before it asks again.
    fn tx_room(&mut self) -> usize;
    /// Append a transmit header entry (mrc-abi `Txh` bytes); `false` when there is no room,
    /// which [`Datapath::tx_room`] promised there was (the loop counts the lost packet).
    fn push_tx(&mut self, entry: &[u8; TXH_ENTRY_BYTES]) -> bool;
    /// The next admin command (the 64 bytes of an mrc-abi `AdminCmd`) the host interface
    /// fetched from the host's admin queue, consuming it; `None` also while the reply ring
    /// could not take its reply (the command waits). The default: none (a datapath without an
    /// admin path).
    fn pop_admin(&mut self) -> Option<[u8; 64]> {
        None
    }
    /// The reply to the command [`Datapath::pop_admin`] last returned, for the host's response
    /// ring (the host interface sets the owner bit of the ring slot when it writes it);
    /// `false` when it cannot take it (the loop counts the lost reply).
    fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
        let _ = reply;
        false
    }
    /// Whether the datapath reports every placed Write-with-Immediate with a DP->FW
    /// `WimmPlaced` entry. If so (and with the admin tables) a receive completion waits for
    /// that report, so its CQE follows the placement of the bytes and carries the message
    /// length and solicited bit. The default: no (the engine's completion is posted at once,
    /// length 0).
    fn reports_wimm_placed(&self) -> bool {
        false
    }
}

/// Loop counters: every drop has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LoopCounters {
    /// Steps.
    pub steps: u64,
    /// DP->FW entries taken.
    pub csr_events: u64,
    /// DP->FW entries that failed [`CsrEvent::decode`] or had a FW->DP kind.
    pub csr_bad: u64,
    /// `TxDone` entries.
    pub tx_done: u64,
    /// `WimmPlaced` entries.
    pub wimm_placed: u64,
    /// `WimmPlaced` entries dropped: [`WIMM_PENDING`] already waited for their completion.
    pub wimm_overflow: u64,
    /// Admin commands executed (including refused ones).
    pub admin_commands: u64,
    /// Admin commands answered with an error status.
    pub admin_errors: u64,
    /// Admin replies the datapath could not take.
    pub admin_replies_lost: u64,
    /// Events posted to the host (`PostEvent` orders written).
    pub events: u64,
    /// Completions with an error that moved their device QP to ERROR.
    pub qp_fatal: u64,
    /// Entries naming a QP the admin tables do not know (dropped).
    pub unknown_qpn: u64,
    /// Receive header entries taken (including malformed ones).
    pub rx_headers: u64,
    /// Receive header entries that failed [`RxhEntry::decode`] (answered `Dropped(Malformed)`).
    pub rxh_bad: u64,
    /// Payloads the engine asked the datapath to place.
    pub rx_placed: u64,
    /// Drops the datapath reported in `RxDrops` (sum of its counters, saturating).
    pub dp_rx_drops: u64,
    /// Port events.
    pub port_events: u64,
    /// `handle_timeout` calls.
    pub timeouts: u64,
    /// Packets written to the transmit header queue.
    pub tx_packets: u64,
    /// Steps on which the transmit header queue had no room left before [`BUDGET`] packets
    /// were taken: the engine's remaining packets wait in the engine (nothing is lost).
    pub tx_full: u64,
    /// Packets lost: the datapath refused an entry after [`Datapath::tx_room`] said it fit.
    pub tx_refused: u64,
    /// `PostCqe` / `EvUpdate` entries written.
    pub orders: u64,
    /// FW->DP entries dropped: the ring was full.
    pub orders_dropped: u64,
}

impl LoopCounters {
    /// All zero (usable in `const fn`).
    pub const ZERO: LoopCounters = LoopCounters {
        steps: 0,
        csr_events: 0,
        csr_bad: 0,
        tx_done: 0,
        wimm_placed: 0,
        wimm_overflow: 0,
        admin_commands: 0,
        admin_errors: 0,
        admin_replies_lost: 0,
        events: 0,
        qp_fatal: 0,
        unknown_qpn: 0,
        rx_headers: 0,
        rxh_bad: 0,
        rx_placed: 0,
        dp_rx_drops: 0,
        port_events: 0,
        timeouts: 0,
        tx_packets: 0,
        tx_full: 0,
        tx_refused: 0,
        orders: 0,
        orders_dropped: 0,
    };
}

/// Operational state of the NIC's ports as the admin commands see it: admin state (SET_PORT_
/// ADMIN_STATE) and link state (the datapath's `PortEvent`s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// Admin state per port (up at reset).
    pub admin: [bool; PORTS],
    /// Link state per port (up at reset; `PortEvent` entries change it).
    pub link: [bool; PORTS],
}

impl Ports {
    /// Every port administratively up with its link up.
    pub const RESET: Ports = Ports {
        admin: [true; PORTS],
        link: [true; PORTS],
    };
}

/// A `WimmPlaced` report waiting for the engine's receive completion of its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WimmSlot {
    used: bool,
    qpn: u32,
    msn: u16,
    byte_len: u32,
    solicited: bool,
}

const HELD_FILL: Completion = Completion {
    qpn: 0,
    wr_id: 0,
    kind: CompletionKind::Send,
    status: Ok(()),
};

const WIMM_FREE: WimmSlot = WimmSlot {
    used: false,
    qpn: 0,
    msn: 0,
    byte_len: 0,
    solicited: false,
};

/// The loop's state: the engine, the port states, the pending WIMM placements and the
/// counters. (The admin tables are the caller's, [`NicAdmin`]: passed to
/// [`NicLoop::step_admin`], so a NIC image can keep them in `.bss`.)
pub struct NicLoop {
    engine: NicEngine,
    ports: Ports,
    wimm: [WimmSlot; WIMM_PENDING],
    /// Receive completions waiting for their `WimmPlaced` (and those behind them, in order).
    held: Ring<Completion, WIMM_PENDING>,
    counters: LoopCounters,
}

/// The NIC's device services for the admin executor: events leave as FW->DP `PostEvent`.
struct LoopEnv<'a, D: Datapath> {
    dp: &'a mut D,
    ports: &'a mut Ports,
    counters: &'a mut LoopCounters,
}

impl<D: Datapath> AdminEnv for LoopEnv<'_, D> {
    fn vectors(&self) -> u32 {
        VECTORS
    }
    fn dma_mapped(&mut self, _iova: u64, _len: u64) -> bool {
        // The core cannot reach the IOMMU: a bad IOVA faults when the datapath first uses it.
        true
    }
    fn post_event(&mut self, event: Event) {
        let e = CsrEvent::PostEvent(PostEvent::new(&event)).encode();
        if self.dp.push_order(&e) {
            self.counters.orders += 1;
            self.counters.events += 1;
        } else {
            self.counters.orders_dropped += 1;
        }
    }
    fn fw_version(&self) -> u32 {
        FW_VERSION
    }
    fn num_ports(&self) -> usize {
        PORTS
    }
    fn port_admin(&self, p: usize) -> bool {
        self.ports.admin.get(p).copied().unwrap_or(false)
    }
    fn port_link(&self, p: usize) -> bool {
        self.ports.link.get(p).copied().unwrap_or(false)
    }
    fn set_port_admin(&mut self, p: usize, up: bool) {
        if let Some(a) = self.ports.admin.get_mut(p) {
            *a = up;
        }
    }
    fn port_plane(&self, p: usize) -> u8 {
        (p % PLANES) as u8
    }
    fn port_speed_mbps(&self) -> u32 {
        PORT_SPEED_MBPS
    }
    fn firmware(&mut self, cmd: &AdminCommand) -> AdminResult {
        Err((AdminStatus::UnknownOpcode, cmd.opcode() as u32))
    }
    fn probe(&mut self, _qpn: u32, _ev_index: u16) -> ProbeOutcome {
        ProbeOutcome::Unsupported
    }
}

impl NicLoop {
    /// A loop around a fresh engine.
    ///
    /// # Errors
    /// The engine refused `cfg`.
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        Ok(Self::from_checked(NicEngine::check(cfg)?))
    }

    /// A loop around a fresh engine for a checked configuration: a `const fn`, so the NIC
    /// image builds it at compile time into its `static` (no engine-sized stack temporary).
    pub const fn from_checked(c: CheckedConfig) -> Self {
        NicLoop {
            engine: NicEngine::from_checked(c),
            ports: Ports::RESET,
            wimm: [WIMM_FREE; WIMM_PENDING],
            held: Ring::new(HELD_FILL),
            counters: LoopCounters::ZERO,
        }
    }

    /// The engine (QP setup, posting work requests, counters).
    pub fn engine(&self) -> &NicEngine {
        &self.engine
    }

    /// The engine, mutably.
    pub fn engine_mut(&mut self) -> &mut NicEngine {
        &mut self.engine
    }

    /// Counters.
    pub fn counters(&self) -> LoopCounters {
        self.counters
    }

    /// Port states.
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// Post a send work request on device QP `qpn` of `admin` (`wr.wr_id` is its WQE index).
    ///
    /// # Errors
    /// [`QpError::UnknownQp`] for a QPN the tables do not know, else the engine's refusal.
    pub fn post_send(&mut self, admin: &NicAdmin, qpn: u32, wr: SendWr) -> Result<(), QpError> {
        let e = engine_qpn(admin, qpn).ok_or(QpError::UnknownQp { qpn })?;
        self.engine.post_send(e, wr)
    }

    /// Post a receive work request (`wr_id`: its WQE index) on device QP `qpn` of `admin`.
    ///
    /// # Errors
    /// As [`NicLoop::post_send`].
    pub fn post_recv(&mut self, admin: &NicAdmin, qpn: u32, wr_id: u64) -> Result<(), QpError> {
        let e = engine_qpn(admin, qpn).ok_or(QpError::UnknownQp { qpn })?;
        self.engine.post_recv(e, wr_id)
    }

    /// One main-loop iteration at `now_ns` without admin tables (QPs set up with
    /// [`NicLoop::engine_mut`], device QPN = engine QPN). Returns whether anything moved.
    pub fn step<D: Datapath>(&mut self, now_ns: u64, dp: &mut D) -> bool {
        self.run(now_ns, dp, None)
    }

    /// One main-loop iteration at `now_ns` with the NIC's admin tables: admin commands first,
    /// then as [`NicLoop::step`], with device QPNs facing the datapath and the host (see the
    /// crate docs). Returns whether anything moved.
    pub fn step_admin<D: Datapath>(
        &mut self,
        now_ns: u64,
        dp: &mut D,
        admin: &mut NicAdmin,
    ) -> bool {
        let mut moved = false;
        for _ in 0..ADMIN_BUDGET {
            let Some(raw) = dp.pop_admin() else { break };
            moved = true;
            let reply = self.admin_command(now_ns, dp, admin, &raw);
            self.counters.admin_commands += 1;
            if reply.status != AdminStatus::Ok {
                self.counters.admin_errors += 1;
            }
            if !dp.push_admin_reply(&reply) {
                self.counters.admin_replies_lost += 1;
            }
        }
        self.run(now_ns, dp, Some(admin)) || moved
    }

    fn admin_command<D: Datapath>(
        &mut self,
        now_ns: u64,
        dp: &mut D,
        admin: &mut NicAdmin,
        raw: &[u8; 64],
    ) -> AdminReply {
        let mut env = LoopEnv {
            dp,
            ports: &mut self.ports,
            counters: &mut self.counters,
        };
        let mut cx = Ctx {
            params: &NIC_PARAMS,
            env: &mut env,
            engine: &mut self.engine,
            now_ns,
        };
        // A QP entering ERROR: the engine flushes its work requests with completions itself.
        admin.handle(raw, &mut cx).0
    }

    fn run<D: Datapath>(
        &mut self,
        now_ns: u64,
        dp: &mut D,
        mut admin: Option<&mut NicAdmin>,
    ) -> bool {
        self.counters.steps += 1;
        let mut moved = false;
        for _ in 0..BUDGET {
            let Some(entry) = dp.pop_event() else { break };
            moved = true;
            self.counters.csr_events += 1;
            self.csr_event(now_ns, &entry, admin.as_deref_mut());
        }
        if let Some(a) = admin.as_deref_mut() {
            moved |= self.release_held(dp, a);
        }
        for _ in 0..BUDGET {
            let Some(entry) = dp.pop_rx() else { break };
            moved = true;
            self.counters.rx_headers += 1;
            let verdict = match RxhEntry::decode(&entry) {
                Ok(e) => {
                    let (mut pkt, trim, meta) = rx_packet(&e);
                    match to_engine(admin.as_deref(), pkt.dest_qpn) {
                        Some(q) => {
                            pkt.dest_qpn = q;
                            let v = self.engine.handle_tx_packet(now_ns, &pkt, trim, meta);
                            if matches!(v, RxVerdict::Place { .. }) {
                                self.counters.rx_placed += 1;
                            }
                            rxh_verdict(&v)
                        }
                        None => {
                            self.counters.unknown_qpn += 1;
                            RxhVerdict::dropped(RxhDropReason::UnknownQp)
                        }
                    }
                }
                Err(_) => {
                    self.counters.rxh_bad += 1;
                    RxhVerdict::dropped(RxhDropReason::Malformed)
                }
            };
            dp.rx_done(&verdict.encode());
        }
        if self.engine.poll_timeout().is_some_and(|t| t <= now_ns) {
            self.counters.timeouts += 1;
            self.engine.handle_timeout(now_ns);
        }
        let room = dp.tx_room();
        let mut pkt = TxPacket::FILL;
        let mut taken = 0;
        while taken < room.min(BUDGET) {
            if !self.engine.poll_transmit_into(now_ns, &mut pkt) {
                break;
            }
            taken += 1;
            if let Some(a) = admin.as_deref() {
                pkt.src_qpn = a.device_qpn(pkt.src_qpn).unwrap_or(pkt.src_qpn);
            }
            if dp.push_tx(&txh_entry(&pkt).encode()) {
                self.counters.tx_packets += 1;
            } else {
                self.counters.tx_refused += 1;
            }
        }
        moved |= taken > 0;
        if taken == room && room < BUDGET {
            self.counters.tx_full += 1;
        }
        while let Some(c) = self.engine.poll_completion() {
            moved = true;
            self.completion(dp, admin.as_deref_mut(), &c);
        }
        while let Some(mut ev) = self.engine.poll_ev_event() {
            moved = true;
            if let Some(a) = admin.as_deref() {
                ev.qpn = a.device_qpn(ev.qpn).unwrap_or(ev.qpn);
            }
            let e = CsrEvent::EvUpdate(ev_update(&ev)).encode();
            self.order(dp, &e);
        }
        moved
    }

    /// An engine completion to the host: without admin tables [`post_cqe`] as is; with them
    /// receive completions wait behind one that waits for its `WimmPlaced`
    /// ([`Datapath::reports_wimm_placed`]), and [`Self::emit`] posts the rest.
    fn completion<D: Datapath>(
        &mut self,
        dp: &mut D,
        admin: Option<&mut NicAdmin>,
        c: &Completion,
    ) {
        let Some(admin) = admin else {
            let e = CsrEvent::PostCqe(post_cqe(c)).encode();
            self.order(dp, &e);
            return;
        };
        let recv = !matches!(c.kind, CompletionKind::Send);
        if recv && (!self.held.is_empty() || dp.reports_wimm_placed() && self.unreported(admin, c))
        {
            if self.held.push_back(*c).is_ok() {
                return;
            }
            // Full: post it without its report rather than lose it.
            self.counters.wimm_overflow += 1;
        }
        self.emit(dp, admin, c);
    }

    /// A successful Write-with-Immediate receive completion whose `WimmPlaced` has not come.
    fn unreported(&self, admin: &NicAdmin, c: &Completion) -> bool {
        let CompletionKind::RecvImm { msn, .. } = c.kind else {
            return false;
        };
        let qpn = admin.device_qpn(c.qpn).unwrap_or(u32::MAX);
        c.status.is_ok()
            && !self
                .wimm
                .iter()
                .any(|w| w.used && w.qpn == qpn && w.msn == msn)
    }

    /// Post the held completions whose reports arrived, in order. Returns whether any.
    fn release_held<D: Datapath>(&mut self, dp: &mut D, admin: &mut NicAdmin) -> bool {
        let mut any = false;
        while let Some(c) = self.held.front().copied() {
            if self.unreported(admin, &c) {
                break;
            }
            self.held.pop_front();
            self.emit(dp, admin, &c);
            any = true;
        }
        any
    }

    /// Post completion `c` with the device QPN, its QP's CQ, the WIMM length and solicited
    /// bit; a failed work request (not a flush) moves the device QP to ERROR and posts
    /// `QpFatal` after the CQE.
    fn emit<D: Datapath>(&mut self, dp: &mut D, admin: &mut NicAdmin, c: &Completion) {
        let Some(qpn) = admin.device_qpn(c.qpn) else {
            self.counters.unknown_qpn += 1;
            return;
        };
        let mut cqe = post_cqe(c);
        cqe.qpn = qpn.into();
        let recv = !matches!(c.kind, CompletionKind::Send);
        if let CompletionKind::RecvImm { msn, .. } = c.kind {
            if let Some(w) = self
                .wimm
                .iter_mut()
                .find(|w| w.used && w.qpn == qpn && w.msn == msn)
            {
                cqe.byte_len = w.byte_len.into();
                if w.solicited {
                    cqe.flags |= CQE_SOLICITED;
                }
                *w = WIMM_FREE;
            }
        }
        let fatal = matches!(c.status, Err(e) if e != CompletionError::Flushed);
        if let Some(q) = admin.qps.get_mut(&qpn) {
            cqe.cqn = if recv { q.recv_cq } else { q.send_cq }.into();
            if fatal && q.state != QpState::Error {
                q.state = QpState::Error;
                self.counters.qp_fatal += 1;
                let status = cqe.status;
                let e = CsrEvent::PostEvent(PostEvent::new(&Event::QpFatal {
                    qpn,
                    status,
                    syndrome: 0,
                }))
                .encode();
                let e2 = CsrEvent::PostCqe(cqe).encode();
                self.order(dp, &e2);
                if self.order(dp, &e) {
                    self.counters.events += 1;
                }
                return;
            }
        }
        let e = CsrEvent::PostCqe(cqe).encode();
        self.order(dp, &e);
    }

    fn order<D: Datapath>(&mut self, dp: &mut D, e: &[u8; ENTRY_BYTES]) -> bool {
        if dp.push_order(e) {
            self.counters.orders += 1;
            true
        } else {
            self.counters.orders_dropped += 1;
            false
        }
    }

    fn csr_event(&mut self, now_ns: u64, entry: &[u8; ENTRY_BYTES], admin: Option<&mut NicAdmin>) {
        let c = &mut self.counters;
        let ev = match CsrEvent::decode(entry) {
            Ok(e) => e,
            Err(_) => {
                c.csr_bad += 1;
                return;
            }
        };
        // The engine QP an ACK / NACK / probe reply is for.
        let engine_qpn = |q: u32, c: &mut LoopCounters| {
            let e = to_engine(admin.as_deref(), q);
            if e.is_none() {
                c.unknown_qpn += 1;
            }
            e
        };
        match ev {
            CsrEvent::AckSummary(a) => {
                if let Some(q) = engine_qpn(a.qpn(), c) {
                    let mut r = ack_repr(&a);
                    r.bth.dest_qp = q;
                    let _ = self.engine.handle_packet(now_ns, &r, RxMeta::default());
                }
            }
            CsrEvent::Nack(n) => match (nack_repr(&n), engine_qpn(n.qpn.get(), c)) {
                (Some(mut r), Some(q)) => {
                    r.bth.dest_qp = q;
                    let _ = self.engine.handle_packet(now_ns, &r, RxMeta::default());
                }
                (None, _) => c.csr_bad += 1,
                (_, None) => {}
            },
            CsrEvent::ProbeReply(p) => {
                if let Some(q) = engine_qpn(p.qpn.get(), c) {
                    let mut r = probe_reply_repr(&p);
                    r.bth.dest_qp = q;
                    let _ = self.engine.handle_packet(now_ns, &r, RxMeta::default());
                }
            }
            CsrEvent::PortEvent(p) => {
                c.port_events += 1;
                if let Some(l) = self.ports.link.get_mut(usize::from(p.port)) {
                    *l = p.up == 1;
                }
                if p.up == 1 {
                    self.engine.handle_plane_up(now_ns, p.plane);
                } else {
                    self.engine.handle_plane_down(now_ns, p.plane);
                }
            }
            CsrEvent::RxDrops(d) => {
                let sum = [
                    d.bad_checksum,
                    d.bad_header,
                    d.unknown_qp,
                    d.out_of_window,
                    d.no_buffer,
                    d.trimmed,
                    d.other,
                ]
                .iter()
                .fold(0u64, |s, v| s.saturating_add(u64::from(v.get())));
                c.dp_rx_drops = c.dp_rx_drops.saturating_add(sum);
            }
            CsrEvent::TxDone(t) => {
                c.tx_done += 1;
                tx_done(admin, &t);
            }
            CsrEvent::WimmPlaced(w) => {
                c.wimm_placed += 1;
                self.wimm_placed(&w);
            }
            _ => c.csr_bad += 1,
        }
    }

    /// Keep a `WimmPlaced` report for its message's receive completion (an older report of
    /// the same message is replaced).
    fn wimm_placed(&mut self, w: &WimmPlaced) {
        let (qpn, msn) = (w.qpn.get(), w.msn.get());
        let slot = self
            .wimm
            .iter()
            .position(|s| s.used && s.qpn == qpn && s.msn == msn)
            .or_else(|| self.wimm.iter().position(|s| !s.used));
        match slot.and_then(|i| self.wimm.get_mut(i)) {
            Some(s) => {
                *s = WimmSlot {
                    used: true,
                    qpn,
                    msn,
                    byte_len: w.byte_len.get(),
                    solicited: w.flags & 1 != 0,
                }
            }
            None => self.counters.wimm_overflow += 1,
        }
    }
}

/// The engine QP behind device QP `qpn` of `admin`.
fn engine_qpn(admin: &NicAdmin, qpn: u32) -> Option<u32> {
    admin.qps.get(&qpn).and_then(|q| q.engine_qpn())
}

/// The engine QPN for a QPN from the datapath: the same without admin tables.
fn to_engine(admin: Option<&NicAdmin>, qpn: u32) -> Option<u32> {
    match admin {
        None => Some(qpn),
        Some(a) => engine_qpn(a, qpn),
    }
}

/// Every packet of a send WQE left: the QP's next send PSN (QUERY_QP) follows it.
fn tx_done(admin: Option<&mut NicAdmin>, t: &TxDone) {
    if let Some(q) = admin.and_then(|a| a.qps.get_mut(&t.qpn.get())) {
        let next = Psn::new(t.first_psn.get()).add(t.num_packets.get());
        q.sq_psn = next.value();
    }
}

/// The packet the engine takes for a checked receive header entry: the sender's descriptor as
/// far as the headers carry it (`src_qpn` 0 and `ev_value` 0: the receive path uses neither;
/// BTH SE is not an engine input), the trim mark, the payload length and CE.
pub fn rx_packet(e: &RxhEntry) -> (TxPacket, TrimMark, RxMeta) {
    let imm = e.imm.get();
    let ev_index = e.ev_index.get();
    let body = match e.opcode() {
        Ok(Opcode::EvProbe) => TxBody::Probe(ProbeRepr {
            probe_id: e.rkey.get(),
            ev_index,
            plane: e.plane,
        }),
        op => {
            // `RxhEntry::decode` admitted only the write opcodes besides EV_PROBE.
            let segment = op
                .ok()
                .and_then(|op| Segment::of_write(op, imm))
                .unwrap_or(Segment::Only { imm: None });
            TxBody::Write {
                segment,
                reth: RethRepr {
                    va: e.remote_va.get(),
                    rkey: e.rkey.get(),
                    dma_len: e.dma_len.get(),
                },
                local: LocalBuf::default(),
            }
        }
    };
    let pkt = TxPacket {
        src_qpn: 0,
        dest_qpn: e.dest_qpn.get(),
        psn: Psn::new(e.psn.get()),
        msn: e.msn.get(),
        ev_format: EvFormat::from_code(e.ev_format).unwrap_or(EvFormat::Udp),
        evx: EvxRepr {
            ev_index,
            plane: e.plane,
            ev_value: 0,
        },
        tx_ts_ns: e.tx_ts.get(),
        echo_ts_ns: e.echo_ts.get(),
        retransmit: e.has(rxh_flags::RETRANSMIT),
        ack_req: e.has(rxh_flags::ACK_REQ),
        body,
    };
    let trim = if e.has(rxh_flags::TRIMMED_LAST_HOP) {
        TrimMark::TrimmedLastHop
    } else if e.has(rxh_flags::TRIMMED) {
        TrimMark::Trimmed
    } else {
        TrimMark::None
    };
    let meta = RxMeta {
        payload_len: e.payload_len.get(),
        ce: e.has(rxh_flags::CE),
    };
    (pkt, trim, meta)
}

/// The receive header entry a datapath's header parser writes for a data packet or probe `p`
/// (the inverse of [`rx_packet`]; `None` for ACKs, NACKs and probe replies, which go through
/// the DP->FW CSR ring). For tests and datapath models.
pub fn rxh_entry(p: &TxPacket, trim: TrimMark, meta: RxMeta) -> Option<RxhEntry> {
    let mut flags = 0;
    for (on, bit) in [
        (p.ack_req, rxh_flags::ACK_REQ),
        (p.retransmit, rxh_flags::RETRANSMIT),
        (trim != TrimMark::None, rxh_flags::TRIMMED),
        (
            trim == TrimMark::TrimmedLastHop,
            rxh_flags::TRIMMED_LAST_HOP,
        ),
        (meta.ce, rxh_flags::CE),
    ] {
        if on {
            flags |= bit;
        }
    }
    let (va, rkey, dma_len, imm) = match p.body {
        TxBody::Write { segment, reth, .. } => {
            let imm = match segment {
                Segment::Last { imm: Some(i) } | Segment::Only { imm: Some(i) } => i,
                _ => 0,
            };
            (reth.va, reth.rkey, reth.dma_len, imm)
        }
        TxBody::Probe(pr) => (0, pr.probe_id, 0, 0),
        _ => return None,
    };
    Some(RxhEntry {
        opcode: p.opcode() as u8,
        flags,
        ev_format: p.ev_format as u8,
        plane: p.evx.plane,
        dest_qpn: (p.dest_qpn & (mrc_abi::device::QPN_LIMIT - 1)).into(),
        psn: p.psn.value().into(),
        msn: p.msn.into(),
        ev_index: p.evx.ev_index.into(),
        tx_ts: p.tx_ts_ns.into(),
        echo_ts: p.echo_ts_ns.into(),
        remote_va: va.into(),
        rkey: rkey.into(),
        dma_len: dma_len.into(),
        imm: imm.into(),
        payload_len: meta.payload_len.into(),
        verdict: 0,
        drop_reason: 0,
        slot: 0.into(),
        place_len: 0.into(),
        place_offset: 0.into(),
    })
}

/// The transmit header entry for the engine's packet `p` (QPNs masked to 24 bits; the engine's
/// QPNs are small, and its PSNs are 24-bit).
pub fn txh_entry(p: &TxPacket) -> Txh {
    let mut flags = 0;
    if p.ack_req {
        flags |= txh_flags::ACK_REQ;
    }
    if p.retransmit {
        flags |= txh_flags::RETRANSMIT;
    }
    let q = mrc_abi::device::QPN_LIMIT - 1;
    let hdr = TxhHeader {
        opcode: p.opcode() as u8,
        flags,
        ev_format: p.ev_format as u8,
        plane: p.evx.plane,
        src_qpn: (p.src_qpn & q).into(),
        dest_qpn: (p.dest_qpn & q).into(),
        psn: p.psn.value().into(),
        msn: p.msn.into(),
        ev_index: p.evx.ev_index.into(),
        ev_value: p.evx.ev_value.into(),
        tx_ts: p.tx_ts_ns.into(),
        echo_ts: p.echo_ts_ns.into(),
    };
    let probe = |r: &ProbeRepr| TxhProbe {
        probe_id: r.probe_id.into(),
        ev_index: r.ev_index.into(),
        plane: r.plane,
        rsvd0: 0,
        rsvd: [0; 24],
    };
    let body = match &p.body {
        TxBody::Write {
            segment,
            reth,
            local,
        } => TxhBody::Write(TxhWrite {
            remote_va: reth.va.into(),
            rkey: reth.rkey.into(),
            dma_len: reth.dma_len.into(),
            imm: match segment {
                Segment::Last { imm: Some(i) } | Segment::Only { imm: Some(i) } => *i,
                _ => 0,
            }
            .into(),
            buf_handle: local.handle.into(),
            buf_offset: local.offset.into(),
        }),
        TxBody::Ack(a) => TxhBody::Ack(TxhAck {
            cum_psn: a.cum_psn.value().into(),
            sack_base: a.sack_base.value().into(),
            sack_bitmap: a.sack_bitmap.into(),
            ev_index: a.ev_index.into(),
            plane: a.plane,
            ecn_plane_mask: a.ecn_plane_mask,
            ce_count: a.ce_count.into(),
            pkt_count: a.pkt_count.into(),
            rsvd: [0; 8],
        }),
        TxBody::Nack(n) => TxhBody::Nack(TxhNack {
            reason: n.reason as u8,
            plane: n.plane,
            ev_index: n.ev_index.into(),
            psn: n.psn.value().into(),
            cum_psn: n.cum_psn.value().into(),
            rsvd: [0; 20],
        }),
        TxBody::Probe(r) => TxhBody::Probe(probe(r)),
        TxBody::ProbeReply(r) => TxhBody::ProbeReply(probe(r)),
    };
    Txh { hdr, body }
}

/// The engine's packet for a checked transmit header entry (the inverse of [`txh_entry`]):
/// what a datapath model builds the packet from. For tests and datapath models.
pub fn tx_packet(t: &Txh) -> TxPacket {
    let h = &t.hdr;
    let probe = |p: &TxhProbe| ProbeRepr {
        probe_id: p.probe_id.get(),
        ev_index: p.ev_index.get(),
        plane: p.plane,
    };
    let body = match &t.body {
        TxhBody::Write(w) => {
            let imm = w.imm.get();
            // `Txh::decode` admitted only the write opcodes with a write body.
            let segment = t
                .opcode()
                .ok()
                .and_then(|op| Segment::of_write(op, imm))
                .unwrap_or(Segment::Only { imm: None });
            TxBody::Write {
                segment,
                reth: RethRepr {
                    va: w.remote_va.get(),
                    rkey: w.rkey.get(),
                    dma_len: w.dma_len.get(),
                },
                local: LocalBuf {
                    handle: w.buf_handle.get(),
                    offset: w.buf_offset.get(),
                },
            }
        }
        TxhBody::Ack(a) => TxBody::Ack(AckRepr {
            cum_psn: Psn::new(a.cum_psn.get()),
            sack_base: Psn::new(a.sack_base.get()),
            sack_bitmap: a.sack_bitmap.get(),
            ev_index: a.ev_index.get(),
            plane: a.plane,
            ecn_plane_mask: a.ecn_plane_mask,
            ce_count: a.ce_count.get(),
            pkt_count: a.pkt_count.get(),
        }),
        TxhBody::Nack(n) => TxBody::Nack(NackRepr {
            // `Txh::decode` checked the reason.
            reason: NackReason::from_u8(n.reason).unwrap_or(NackReason::Trimmed),
            psn: Psn::new(n.psn.get()),
            cum_psn: Psn::new(n.cum_psn.get()),
            ev_index: n.ev_index.get(),
            plane: n.plane,
        }),
        TxhBody::Probe(p) => TxBody::Probe(probe(p)),
        TxhBody::ProbeReply(p) => TxBody::ProbeReply(probe(p)),
    };
    TxPacket {
        src_qpn: h.src_qpn.get(),
        dest_qpn: h.dest_qpn.get(),
        psn: Psn::new(h.psn.get()),
        msn: h.msn.get(),
        ev_format: EvFormat::from_code(h.ev_format).unwrap_or(EvFormat::Udp),
        evx: EvxRepr {
            ev_index: h.ev_index.get(),
            plane: h.plane,
            ev_value: h.ev_value.get(),
        },
        tx_ts_ns: h.tx_ts.get(),
        echo_ts_ns: h.echo_ts.get(),
        retransmit: t.has(txh_flags::RETRANSMIT),
        ack_req: t.has(txh_flags::ACK_REQ),
        body,
    }
}

/// The verdict written back into a receive header entry for the engine's `v`.
pub fn rxh_verdict(v: &RxVerdict) -> RxhVerdict {
    match *v {
        RxVerdict::Place {
            slot, offset, len, ..
        } => RxhVerdict::place(slot, offset, len),
        RxVerdict::Consumed => RxhVerdict::consumed(),
        RxVerdict::Dropped(r) => RxhVerdict::dropped(match r {
            DropReason::UnknownQp => RxhDropReason::UnknownQp,
            DropReason::QpNotReady => RxhDropReason::QpNotReady,
            DropReason::Duplicate => RxhDropReason::Duplicate,
            DropReason::Trimmed => RxhDropReason::Trimmed,
            DropReason::OutOfWindow => RxhDropReason::OutOfWindow,
            DropReason::RemoteAccess => RxhDropReason::RemoteAccess,
            DropReason::Length => RxhDropReason::Length,
            DropReason::NoRecvBuffer => RxhDropReason::NoRecvBuffer,
            DropReason::TooManyWimm => RxhDropReason::TooManyWimm,
            DropReason::Stale => RxhDropReason::Stale,
            // Every RXH entry carries EVX: only a datapath bug loses it.
            DropReason::MissingEvx => RxhDropReason::Malformed,
            DropReason::Unexpected => RxhDropReason::Unexpected,
        }),
    }
}

fn repr(qpn: u32, psn: Psn, ev_index: u16, plane: u8, echo_ts: u32, body: Body) -> MrcRepr {
    MrcRepr {
        bth: BthRepr {
            opcode: body.opcode(),
            se: false,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: qpn,
            ack_req: false,
            psn,
        },
        mrh: MrhRepr {
            ev_format: EvFormat::Udp,
            trimmed: false,
            trimmed_last_hop: false,
            retransmit: false,
            msn: 0,
        },
        evx: Some(EvxRepr {
            ev_index,
            plane,
            ev_value: 0,
        }),
        tsx: Some(TsxRepr {
            tx_ts_ns: 0,
            echo_ts_ns: echo_ts,
        }),
        body,
    }
}

/// The ACK the engine takes for a DP->FW `AckSummary`.
pub fn ack_repr(a: &AckSummary) -> MrcRepr {
    let body = Body::Ack(AckRepr {
        cum_psn: a.cum_psn(),
        sack_base: Psn::new(a.sack_base.get()),
        sack_bitmap: a.bitmap.get(),
        ev_index: a.ev_index.get(),
        plane: a.plane,
        ecn_plane_mask: a.ecn_mask(),
        ce_count: a.ce_count.get(),
        pkt_count: a.pkt_count.get(),
    });
    repr(
        a.qpn(),
        a.cum_psn(),
        a.ev_index.get(),
        a.plane,
        a.echoed_ts.get(),
        body,
    )
}

/// The NACK the engine takes for a DP->FW `Nack` (`None`: reason code unknown, which
/// [`CsrEvent::decode`] already refuses).
pub fn nack_repr(n: &NackEntry) -> Option<MrcRepr> {
    let reason = NackReason::from_u8(n.reason).ok()?;
    let body = Body::Nack(NackRepr {
        reason,
        psn: n.psn(),
        cum_psn: Psn::new(n.cum_psn.get()),
        ev_index: n.ev_index.get(),
        plane: n.plane,
    });
    Some(repr(
        n.qpn.get(),
        Psn::new(n.cum_psn.get()),
        n.ev_index.get(),
        n.plane,
        0,
        body,
    ))
}

/// The probe reply the engine takes for a DP->FW `ProbeReply`.
pub fn probe_reply_repr(p: &ProbeReply) -> MrcRepr {
    let body = Body::ProbeReply(ProbeRepr {
        probe_id: p.probe_id.get(),
        ev_index: p.ev_index.get(),
        plane: p.plane,
    });
    repr(
        p.qpn.get(),
        Psn::new(0),
        p.ev_index.get(),
        p.plane,
        p.echoed_ts.get(),
        body,
    )
}

fn cqe_status(s: Result<(), CompletionError>) -> CqeStatus {
    match s {
        Ok(()) => CqeStatus::Success,
        Err(CompletionError::RetryExceeded) => CqeStatus::RetryExceeded,
        Err(CompletionError::Flushed) => CqeStatus::WrFlushed,
        Err(CompletionError::RemoteNack(r)) => match r {
            NackReason::RemoteAccess => CqeStatus::RemoteAccess,
            NackReason::Length => CqeStatus::RemoteLength,
            NackReason::NoRecvBuffer => CqeStatus::RemoteNoRecvBuffer,
            _ => CqeStatus::RemoteInvalidRequest,
        },
        Err(CompletionError::LocalQpError(r)) => match r {
            NackReason::Length => CqeStatus::LocalLength,
            NackReason::RemoteAccess => CqeStatus::LocalProtection,
            _ => CqeStatus::LocalQpOperation,
        },
    }
}

/// The FW->DP `PostCqe` for an engine completion (see the crate docs for `cqn`, `wqe_index`
/// and `byte_len`).
pub fn post_cqe(c: &Completion) -> PostCqe {
    let (opcode, imm) = match c.kind {
        CompletionKind::Send => (CqeOpcode::Write, 0),
        CompletionKind::RecvImm { imm, .. } => (CqeOpcode::RecvWriteImm, imm),
        CompletionKind::Recv => (CqeOpcode::RecvWriteImm, 0),
    };
    let qpn = c.qpn & (mrc_abi::device::QPN_LIMIT - 1);
    PostCqe {
        kind: 0,
        status: cqe_status(c.status) as u8,
        opcode: opcode as u8,
        // The engine's completion does not carry the solicited bit.
        flags: 0,
        cqn: qpn.into(),
        qpn: qpn.into(),
        wqe_index: (c.wr_id as u16).into(),
        rsvd: 0.into(),
        byte_len: 0.into(),
        imm: imm.into(),
        syndrome: 0.into(),
        rsvd2: [0; 4],
    }
}

/// The FW->DP `EvUpdate` for an engine EV state change (weight 1 for a usable EV).
pub fn ev_update(e: &QpEvEvent) -> EvUpdate {
    let (state, weight) = match e.event.new {
        EvState::Good => (AbiEvState::Good, 1),
        EvState::Skip => (AbiEvState::Skip, 0),
        EvState::AssumedBad => (AbiEvState::AssumedBad, 0),
        EvState::Denied => (AbiEvState::Denied, 0),
    };
    EvUpdate::new(e.qpn, e.event.ev, state, weight)
}

/// The FW->DP CSR order that asks the datapath to send `p`, for a datapath that rebuilds
/// packets from its send WQEs instead of taking transmit header entries ([`txh_entry`]): a
/// retransmitted write becomes `Retransmit` (the datapath rebuilds the packet from its send
/// WQE), a probe becomes `SendProbe`, both for the sending QP (`src_qpn`). New data, ACKs,
/// NACKs and probe replies have none: in the mrc-abi model the datapath sends new data from
/// WQEs and generates ACKs / NACKs / probe replies itself.
pub fn abi_order(p: &TxPacket) -> Option<CsrEvent> {
    match p.body {
        TxBody::Write { .. } if p.retransmit => Some(CsrEvent::Retransmit(Retransmit::new(
            p.src_qpn,
            p.psn,
            p.evx.ev_index,
        ))),
        TxBody::Probe(pr) => Some(CsrEvent::SendProbe(SendProbe::new(
            p.src_qpn,
            pr.ev_index,
            pr.probe_id,
        ))),
        _ => None,
    }
}

/// Whether `p` is a packet the datapath's receive side reports through the DP->FW CSR ring
/// (ACK, NACK, probe reply) rather than through the receive header queue.
pub fn is_csr_reported(p: &TxPacket) -> bool {
    matches!(
        p.body,
        TxBody::Ack(_) | TxBody::Nack(_) | TxBody::ProbeReply(_)
    )
}
