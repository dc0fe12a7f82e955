//! # mrc-nicloop: the NIC image's main loop
//!
//! The firmware half of an MRC NIC runs on coalesced events, never on packets: the datapath
//! (RTL on the NIC; `mrc_firmware::datapath::stage::Datapath`, its functional model,
//! everywhere else) does every packet's work and reports what changed through the DP->FW CSR
//! ring; the firmware engine ([`mrc_firmware::engine::Engine`]) answers with commands through
//! the FW->DP ring. This crate is the loop around the engine: it moves CSR events and admin
//! commands, nothing per packet.
//!
//! [`NicLoop::step`] takes `now_ns` (the hardware timer, read once by the caller) and a
//! [`Datapath`] (the image's `hal` on the NIC, a model in tests) and does, each bounded by
//! [`BUDGET`]:
//!
//! 1. **Events in.** The oldest DP->FW entries ([`Datapath::peek_events`]) go to
//!    [`Engine::handle_events`], which checks each with `CsrEntry::decode` and counts the
//!    malformed ones. The engine takes fewer when its command queue is short of room: the rest
//!    stay in the ring for a later step ([`Datapath::consume_events`] releases only what it
//!    took; counted in `events_held`). With the admin tables the loop keeps what the
//!    host-facing side needs from the entries it handed over: port link states (`PortEvent`,
//!    for QUERY_PORT), receive drop sums (`RxDrops`), and the length and solicited bit of
//!    each placed Write-with-Immediate (`WimmPlaced`) for its CQE.
//! 2. **Timers.** [`Engine::handle_timeout`] when [`Engine::poll_timeout`] is due.
//! 3. **Commands out.** At most as many FW->DP entries as the ring has room for
//!    ([`Datapath::orders_room`]): first what the loop made itself (host events of admin
//!    commands, region table writes, QP-fatal events), then [`Engine::poll_commands`],
//!    made and published [`PUBLISH_ENTRIES`] at a time. The rest waits in the engine, so no
//!    command is ever dropped for lack of room.
//!
//! [`NicLoop::step_admin`] does the same with the NIC's admin tables ([`NicAdmin`]) and first
//! executes admin commands ([`Datapath::pop_admin`], the 64-byte mrc-abi `AdminCmd`s the host
//! interface fetched) with the shared executor `mrc_firmware::admin`: CQs, PDs, MRs, QPs moved
//! RESET -> INIT -> RTR -> RTS with their attributes checked by the device rules and the
//! engine's OCP rules, EV format / EV / CC profiles, EV deny / replace / query, port admin
//! state. Each reply goes back with [`Datapath::push_admin_reply`].
//!
//! ## With the admin tables: device QPNs and the host interface
//! A device QPN (the doorbell page, what applications exchange and packets carry) is not the
//! engine's QP number. Everything facing the datapath and the host carries the device QPN: the
//! loop translates the QPN of every entry both ways (events naming a QP the tables do not have
//! are dropped and counted in `unknown_qpn`), so the datapath's QP contexts are indexed by
//! device QPN, as a NIC's QP context memory is. The engine's `Complete` entries become
//! `PostCqe`s on the QP's send or receive CQ (a receive CQE carries the message length and
//! solicited bit its `WimmPlaced` reported; `wqe_index` is the low 16 bits of `wr_id`, the
//! host interface posts work requests with `wr_id` = WQE index); a failed work request (not a
//! flush) also moves the device QP to ERROR and posts `QP_FATAL` after its CQE. The engine's
//! `CompleteSends` orders (successful sends, counted from ACK summaries) get the QP's send CQ,
//! and the datapath writes their `PostCqe`s from its send queue. The engine's
//! `EvEvent`s become `EV_STATE_CHANGE` events when the QP's EV profile asks for them
//! (`EVENT_MASK_EV_BAD`, `EVENT_MASK_EV_GOOD`; controller denials are reported by the admin
//! executor itself). Without the tables ([`NicLoop::step`]) entries pass unchanged: device
//! QPN = engine QPN, and the host interface takes `Complete` and `EvEvent` entries as they are.
//!
//! ## Memory regions are datapath state
//! The region table received writes are placed into is datapath hardware. A REG_MR / DEREG_MR
//! of a remotely writable region becomes a FW->DP `RegionWrite` (the firmware and the datapath
//! talk only through the CSR rings), and the command's reply is held until the datapath has
//! taken that entry ([`Datapath::orders_taken`]): once the host has the reply to DEREG_MR, no
//! later packet is placed into the region; once it has the reply to REG_MR, the rkey works.
//! The datapath's table has room for every region the admin tables hold ([`REGIONS`]).
//!
//! ## Work requests never pass through the firmware
//! The host interface fetches WQEs on doorbells and hands them to the datapath, which
//! segments, sends and, at the other end, consumes receives; the firmware hears of them only
//! through the counts of retired sends in ACK summaries, `WimmPlaced` and `Flushed` reports.
//!
//! ## Limits, stated rather than invented
//! - A send CQE's `byte_len` is 0 and its opcode is WRITE (the engine's completion carries
//!   neither the length nor whether it had an immediate).
//! - FW_* admin commands go to the NIC's update service ([`Firmware`], given to
//!   [`NicLoop::step_admin_fw`]; the NIC image's runs `mrc_fw_update::service` over its flash);
//!   without one ([`NicLoop::step_admin`]) they are refused `UNKNOWN_OPCODE`. PROBE_EV is
//!   `BUSY` (the engine probes EVs on its own schedule).
//! - An admin command runs only once the engine's commands have all left (a QP created or
//!   destroyed changes the QPN translation, and the engine's queued commands are translated
//!   with the mapping they were made under).
//!
//! Everything is allocation-free and bounded; nothing here is riscv-only, so the simulator can
//! link the same loop.
#![no_std]
#![deny(unsafe_code)]

mod admin;
mod commands;
mod events;
mod in_place;
mod ports;
mod qpn;
#[cfg(feature = "testkit")]
mod testkit;

use mrc_abi::device::admin::AdminReply;
use mrc_abi::device::csr::{CsrEntry, CsrKind};
use mrc_abi::device::regs::{caps, DeviceParams};
use mrc_firmware::admin::Admin;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::csr_queue::CsrQueue;
use mrc_firmware::engine::{Engine, EngineConfig, EngineError, REORDER_NS_BASE_RTT};

pub use admin::{Firmware, NoFirmware};
use qpn::QpnMap;

mrc_firmware::capacity! {
    /// The NIC core's capacities: 3 QPs, 128 EVs per QP over 4 planes, a 256-PSN window,
    /// 16 send and 16 receive work requests per QP, 8 regions. Sized for the core's DTCM
    /// (`firmware/memory-map.toml`); thousands of QPs need QP context in NIC DRAM behind a
    /// cache, which this engine does not have.
    pub struct NicCapacity {
        qps: 3, evs: 128, planes: 4, window_psns: 256, send_queue: 16, recv_queue: 16,
        regions: 8,
    }
}

/// QPs of the NIC engine.
pub const QPS: usize = NicCapacity::QPS;
/// EVs per QP.
pub const EVS: usize = NicCapacity::EVS;
/// Planes.
pub const PLANES: usize = NicCapacity::PLANES;
/// Registered regions (admin MR table and the datapath's region table).
pub const REGIONS: usize = NicCapacity::REGIONS;

/// The firmware engine at the NIC core's capacities.
pub type NicEngine = Engine<NicCapacity>;

/// The stack the loop may need, in bytes. The deepest paths are building the loop at boot
/// ([`NicLoop::init_in_place`]: a QP's firmware state at a time) and the admin path (creating
/// a QP and moving it through INIT, RTR and RTS). The QEMU self-test measures both and fails
/// when they go deeper than this; the NIC image's build fails when the DTCM cannot hold its
/// data plus this much stack.
pub const STACK_BUDGET: usize = 32 * 1024;

/// Entries of each CSR ring (DP->FW and FW->DP) of a NIC core: 32 entries of 32 bytes, 1 KiB
/// of DTCM per ring. The NIC image's rings have this size, and the simulator's firmware cores
/// give their DP->FW queues this depth (a full ring holds the datapath's reports back).
pub const RING_ENTRIES: usize = 32;

/// CSR entries moved each way per step: a ring's worth.
pub const BUDGET: usize = RING_ENTRIES;

/// FW->DP entries the loop publishes together (moves the ring's producer index once for):
/// step 3 makes its commands this many at a time and publishes each group as soon as it is
/// made, so the datapath starts on the first commands of a long step (a completion, a
/// retransmission order) while the loop still makes the rest. Every engine command is one
/// entry (an EV change's sprayer entry and host event are written in separate passes), so a
/// group of any size holds them; two moves the producer index once per two commands.
pub const PUBLISH_ENTRIES: usize = 2;

/// Admin commands executed per step.
pub const ADMIN_BUDGET: usize = 8;

/// FW->DP entries the loop makes itself (host events, region writes, QP-fatal events) and
/// holds until the ring has room.
pub const LOOP_QUEUE: usize = 32;

/// Room an admin command needs in the loop's queue: a host event per QP (DENY_EV reports on
/// every QP of the profile), one more event and a region write.
pub const ADMIN_ROOM: usize = QPS + 2;

/// `WimmPlaced` reports kept for the receive CQEs they describe.
pub const WIMM_NOTES: usize = 32;

/// The NIC's admin tables (`mrc_firmware::admin`): 8 PDs, [`REGIONS`] MRs, 8 CQs, [`QPS`]
/// QPs, 4 EV format profiles, 4 EV profiles of up to [`EVS`] EVs, 4 CC profiles. All zero when
/// empty, so the image keeps them in `.bss`.
pub type NicAdmin = Admin<8, REGIONS, 8, QPS, 4, 4, EVS, 4>;

/// Ports of the NIC (one per plane).
pub const PORTS: usize = PLANES;

/// Port speed the NIC reports, Mb/s.
pub const PORT_SPEED_MBPS: u32 = 200_000;

/// Device QPNs (and CQNs) are below this (doorbell pages).
pub const DEVICE_QPNS: usize = 16;

/// The NIC's register-visible parameters as the admin executor checks them: QP and CQ
/// numbers share `1..16` (doorbell pages), [`EVS`] EVs per QP, [`PORTS`] ports on
/// [`PLANES`] planes, every capability but firmware update (which the image's update service
/// adds, [`Firmware`]; the executor does not look at it).
pub const NIC_PARAMS: DeviceParams = DeviceParams {
    device_id: mrc_abi::device::regs::PCI_ID,
    capabilities: caps::ALL & !caps::FW_UPDATE,
    num_ports: PORTS as u32,
    num_planes: PLANES as u32,
    max_qps: DEVICE_QPNS as u32,
    max_cqs: DEVICE_QPNS as u32,
    max_evs_per_qp: EVS as u32,
    doorbell_pages: DEVICE_QPNS as u32,
};

/// The firmware image version QUERY_DEVICE reports without an update service (with one: the
/// running image's, from its boot record).
pub const FW_VERSION: u32 = 0x0001_0000;

/// Interrupt vectors of the NIC's host function.
pub const VECTORS: u32 = 4;

/// The datapath as the loop sees it: the two CSR rings of `mrc_abi::device::csr` and the
/// admin command and reply rings of the host interface. The NIC image's `hal` implements it
/// over the rings in DTCM; tests and the simulator over the datapath model.
pub trait Datapath {
    /// Copy the oldest DP->FW entries into the front of `out` without consuming them;
    /// returns how many.
    fn peek_events(&mut self, out: &mut [CsrEntry]) -> usize;
    /// Release the `n` oldest DP->FW entries to the datapath (`n` at most what the last
    /// [`Datapath::peek_events`] returned).
    fn consume_events(&mut self, n: usize);
    /// Free FW->DP slots.
    fn orders_room(&mut self) -> usize;
    /// Append FW->DP entries and publish them; returns how many were written (all of them
    /// when there were at most [`Datapath::orders_room`]; the loop counts any shortfall as
    /// lost).
    fn push_orders(&mut self, entries: &[CsrEntry]) -> usize;
    /// FW->DP entries written so far (the ring's free-running producer index).
    fn orders_written(&self) -> u32;
    /// FW->DP entries the datapath has taken so far (the free-running consumer index).
    fn orders_taken(&mut self) -> u32;
    /// The next admin command (the 64 bytes of an mrc-abi `AdminCmd`) the host interface
    /// fetched, consuming it; `None` also while the reply ring could not take its reply (the
    /// command waits). The default: none (no admin path).
    fn pop_admin(&mut self) -> Option<[u8; 64]> {
        None
    }
    /// The reply to the command [`Datapath::pop_admin`] last returned, for the host's
    /// response ring; `false` when it cannot take it (the loop counts the lost reply).
    fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
        let _ = reply;
        false
    }
}

/// Loop counters: every drop and every wait has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LoopCounters {
    /// Steps.
    pub steps: u64,
    /// DP->FW entries handed to the engine (malformed ones included: the engine counts them).
    pub events: u64,
    /// DP->FW entries offered that the engine could not take yet (its command queue was short
    /// of room); they were offered again later. Counted at every offer.
    pub events_held: u64,
    /// Entries naming a QP the admin tables do not have (dropped).
    pub unknown_qpn: u64,
    /// `WimmPlaced` entries (with the admin tables).
    pub wimm_placed: u64,
    /// `WimmPlaced` reports dropped unmatched ([`WIMM_NOTES`] newer ones came first): their
    /// receive CQE has length 0 and no solicited bit.
    pub wimm_unmatched: u64,
    /// `PortEvent` entries (with the admin tables).
    pub port_events: u64,
    /// Drops the datapath reported in `RxDrops` (sum of its counters, saturating; with the
    /// admin tables).
    pub dp_rx_drops: u64,
    /// Timer runs that acted.
    pub timeouts: u64,
    /// FW->DP entries written.
    pub commands: u64,
    /// FW->DP entries the datapath refused after saying it had room (lost: a datapath bug).
    pub commands_lost: u64,
    /// Steps on which the FW->DP ring filled before every command was out (the rest waited).
    pub commands_held: u64,
    /// `PostCqe` entries made from engine completions.
    pub cqes: u64,
    /// `PostEvent` entries made (admin events, EV state changes, QP-fatal events).
    pub host_events: u64,
    /// Host events lost: the loop's queue was full.
    pub host_events_lost: u64,
    /// EV state changes the QP's EV profile does not report.
    pub ev_events_masked: u64,
    /// Completions with an error that moved their device QP to ERROR.
    pub qp_fatal: u64,
    /// Admin commands executed (including refused ones).
    pub admin_commands: u64,
    /// Admin commands answered with an error status.
    pub admin_errors: u64,
    /// Admin replies the datapath could not take.
    pub admin_replies_lost: u64,
    /// Region table writes (REG_MR / DEREG_MR of remotely writable regions).
    pub region_writes: u64,
    /// Link changes the firmware learned itself ([`NicLoop::set_port_link`]).
    pub link_changes: u64,
    /// [`NicLoop::set_port_link`] calls naming a port the NIC does not have (ignored).
    pub bad_link_ports: u64,
}

/// Operational state of the NIC's ports as the admin commands see it: admin state
/// (SET_PORT_ADMIN_STATE) and link state (the datapath's `PortEvent`s).
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

/// The loop's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopConfig {
    /// The engine's.
    pub engine: EngineConfig,
    /// The datapath's payload bytes per packet (the default CC profile counts in it).
    pub mtu_payload: u32,
}

impl LoopConfig {
    /// The engine's defaults but each QP's reordering window (RACK's time rule, the tail
    /// loss probe's unit) its CC profile's base RTT, which the controller sets for the
    /// fabric; 4096-byte packets.
    pub const DEFAULT: LoopConfig = LoopConfig {
        engine: EngineConfig {
            reorder_ns: REORDER_NS_BASE_RTT,
            ..EngineConfig::DEFAULT
        },
        mtu_payload: 4096,
    };
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A receive CQE's details from its `WimmPlaced` (engine QPN and MSN name the message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WimmNote {
    qpn: u32,
    msn: u16,
    solicited: bool,
    byte_len: u32,
}

impl WimmNote {
    const ZERO: WimmNote = WimmNote {
        qpn: 0,
        msn: 0,
        solicited: false,
        byte_len: 0,
    };
}

/// Everything of the loop but its ring buffer.
struct Fw<C: Capacity> {
    engine: Engine<C>,
    ports: Ports,
    map: QpnMap,
    wimm: mrc_firmware::ring::Ring<WimmNote, WIMM_NOTES>,
    /// FW->DP entries the loop made, waiting for ring room.
    out: CsrQueue<LOOP_QUEUE>,
    /// An admin reply waiting for the datapath to take the region write its command made,
    /// and the FW->DP producer index after that write (once written).
    held: Option<AdminReply>,
    fence: Option<u32>,
    mtu_payload: u32,
    counters: LoopCounters,
}

/// The NIC main loop around the engine `Engine<C>` (the NIC's capacities unless said
/// otherwise). See the crate docs.
pub struct NicLoop<C: Capacity = NicCapacity> {
    fw: Fw<C>,
    /// Entries copied from and to the rings in a step.
    buf: [CsrEntry; BUDGET],
}

impl<C: Capacity> NicLoop<C> {
    /// A loop around a fresh engine with no QP (a value of tens of KiB: a NIC core builds it
    /// where it lives instead, [`NicLoop::init_in_place`]).
    ///
    /// # Errors
    /// The engine refused `cfg.engine`.
    pub fn new(cfg: LoopConfig) -> Result<Self, EngineError> {
        Ok(NicLoop {
            fw: Fw {
                engine: Engine::new(cfg.engine)?,
                ports: Ports::RESET,
                map: QpnMap::EMPTY,
                wimm: mrc_firmware::ring::Ring::new(WimmNote::ZERO),
                out: CsrQueue::EMPTY,
                held: None,
                fence: None,
                mtu_payload: cfg.mtu_payload,
                counters: LoopCounters::default(),
            },
            buf: [CsrEntry::ZERO; BUDGET],
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine<C> {
        &self.fw.engine
    }

    /// The engine, mutably (QPs made without admin tables, tests).
    pub fn engine_mut(&mut self) -> &mut Engine<C> {
        &mut self.fw.engine
    }

    /// Counters.
    pub fn counters(&self) -> LoopCounters {
        self.fw.counters
    }

    /// Port states.
    pub fn ports(&self) -> Ports {
        self.fw.ports
    }

    /// Whether the loop has FW->DP entries to write (its own or the engine's).
    #[inline]
    pub fn commands_pending(&self) -> bool {
        self.fw.commands_pending()
    }

    /// DP->FW entries handed over directly, without admin tables (device QPN = engine QPN):
    /// what step 1 of [`NicLoop::step`] does with the entries it read. Returns how many the
    /// engine took, from the front (the rest must be offered again).
    #[inline]
    pub fn handle_events(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize {
        self.fw.events(now_ns, events)
    }

    /// FW->DP entries into the front of `out`, without admin tables: what step 3 of
    /// [`NicLoop::step`] writes to the ring. Returns how many.
    #[inline]
    pub fn poll_commands(&mut self, out: &mut [CsrEntry]) -> usize {
        self.fw.commands(out, None)
    }

    /// The engine's timers, if one is due at `now_ns`. Returns whether one acted.
    #[inline]
    pub fn handle_timeout(&mut self, now_ns: u64) -> bool {
        self.fw.timeout(now_ns)
    }

    /// When [`NicLoop::handle_timeout`] should next run.
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        self.fw.engine.poll_timeout()
    }

    /// One main-loop iteration at `now_ns` without admin tables (QPs set up through
    /// [`NicLoop::engine_mut`], device QPN = engine QPN). Returns whether anything moved.
    pub fn step<D: Datapath>(&mut self, now_ns: u64, dp: &mut D) -> bool {
        self.run(now_ns, dp, None)
    }

    /// One main-loop iteration at `now_ns` with the NIC's admin tables: admin commands first,
    /// then as [`NicLoop::step`], with device QPNs facing the datapath and the host (see the
    /// crate docs). `admin` must change only through this call. Returns whether anything
    /// moved.
    pub fn step_admin<D: Datapath>(
        &mut self,
        now_ns: u64,
        dp: &mut D,
        admin: &mut NicAdmin,
    ) -> bool {
        self.step_admin_fw(now_ns, dp, admin, &mut NoFirmware)
    }

    /// [`NicLoop::step_admin`] with the NIC's firmware-update service `fw` behind the `FW_*`
    /// admin commands (and QUERY_DEVICE's version): what the NIC image runs.
    pub fn step_admin_fw<D: Datapath>(
        &mut self,
        now_ns: u64,
        dp: &mut D,
        admin: &mut NicAdmin,
        fw: &mut dyn Firmware,
    ) -> bool {
        let moved = self.fw.admin_step(now_ns, dp, admin, fw);
        self.run(now_ns, dp, Some(admin)) || moved
    }

    fn run<D: Datapath>(
        &mut self,
        now_ns: u64,
        dp: &mut D,
        mut admin: Option<&mut NicAdmin>,
    ) -> bool {
        let fw = &mut self.fw;
        fw.counters.steps += 1;
        let mut moved = false;
        // 1. Events in.
        let n = dp.peek_events(&mut self.buf).min(BUDGET);
        if n > 0 {
            // (the planted bug: of several entries, the last is consumed without the engine
            // ever seeing it)
            let offered = if cfg!(feature = "planted-bug") && n > 1 {
                n - 1
            } else {
                n
            };
            let mut taken = match admin.as_deref_mut() {
                Some(a) => fw.events_admin(now_ns, &mut self.buf[..offered], a),
                None => fw.events(now_ns, &self.buf[..offered]),
            };
            if taken == offered {
                taken = n;
            }
            dp.consume_events(taken);
            moved |= taken > 0;
        }
        // 2. Timers.
        moved |= fw.timeout(now_ns);
        // 3. Commands out, published a group at a time as they are made.
        if fw.commands_pending() {
            let mut room = dp.orders_room().min(BUDGET);
            while room > 0 {
                let k = room.min(PUBLISH_ENTRIES);
                let m = fw.commands(&mut self.buf[..k], admin.as_deref_mut());
                if m == 0 {
                    break;
                }
                moved = true;
                room -= m;
                let w = dp.push_orders(&self.buf[..m]).min(m);
                fw.counters.commands += w as u64;
                fw.counters.commands_lost += (m - w) as u64;
                if fw.held.is_some() && fw.fence.is_none() {
                    let region = CsrKind::RegionWrite as u8;
                    if self.buf[..w].iter().any(|e| e.kind_code() == region) {
                        fw.fence = Some(dp.orders_written());
                    }
                }
            }
            if room == 0 && fw.commands_pending() {
                fw.counters.commands_held += 1;
            }
        }
        moved
    }
}

impl<C: Capacity> Fw<C> {
    /// FW->DP entries wait (the loop's or the engine's).
    #[inline]
    fn commands_pending(&self) -> bool {
        !self.out.is_empty() || self.engine.commands_pending()
    }

    /// The engine's timers due at `now_ns` (the engine answers at once when none is).
    /// Returns whether one acted.
    #[inline]
    fn timeout(&mut self, now_ns: u64) -> bool {
        let acted = self.engine.handle_timeout(now_ns);
        self.counters.timeouts += u64::from(acted);
        acted
    }
}
