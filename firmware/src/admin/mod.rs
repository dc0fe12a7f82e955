//! The admin-command executor: what a NIC does with the admin queue's commands, written once
//! for the NIC image's main loop (`firmware/image/nicloop`) and the simulator's NIC
//! (`hw-sim`'s `nic_host`).
//!
//! [`Admin`] holds the device tables (PDs, MRs, CQs, QPs, EV format / EV / CC profiles) in
//! fixed-capacity [`Table`]s (const generics, no allocation, all-zero when empty). A command
//! arrives as the 64 bytes of an [`AdminCmd`]; [`Admin::handle`] decodes and checks it with
//! mrc-abi ([`AdminCmd::decode`]: opcode, reserved bytes, attribute ranges), then
//! [`Admin::execute`] applies it:
//!
//! - the device rules: handles exist (`NOT_FOUND`, syndrome = byte offset of the handle in the
//!   command), objects belong together and are not in use (`IN_USE`), tables have room
//!   (`NO_RESOURCES`), transitions are allowed (`BAD_STATE`), DMA addresses are mapped and
//!   values fit the device (`BAD_ATTRIBUTE`, syndrome = byte offset of the field);
//! - the engine's OCP attribute rules, through [`QpEngine`]: a MODIFY_QP is first applied to
//!   the engine QP behind the device QP (`Engine::modify_qp`, which checks the MPR against its
//!   window, max WIMM against its queues, retry count and timeout, EV and CC profiles), and a
//!   refusal becomes `BAD_ATTRIBUTE` naming the command field; REG_MR / DEREG_MR of remotely
//!   writable regions register / remove the engine's placement region; DENY_EV reaches every
//!   engine QP using the profile; port admin state reaches the engine as plane down / up.
//!
//! A refused command changes nothing: every check runs before the first table or engine
//! change. The reply is [`AdminReply`] (status, syndrome, result words of
//! [`mrc_abi::device::admin::Opcode`]).
//!
//! What differs between a NIC and the simulator is behind two traits: [`AdminEnv`] (IOMMU
//! probe, interrupt vectors, host events, port state, firmware update, EV probes) and
//! [`QpEngine`] (implemented by [`Engine`]; [`NoEngine`], every method a no-op, for tests of
//! the tables alone).
//!
//! QP numbers: a device QPN (the doorbell page, what applications exchange and packets carry)
//! is the lowest number free in `1..min(max_qps, doorbell_pages)` shared with CQ numbers; the
//! engine QP behind it has its own number, [`Qp::engine_qpn`].

pub mod table;

use core::mem::offset_of;

use mrc_abi::device::admin::body::{
    CcProfile as CcBody, CreateCq, CreateQp, EvFormatProfile, EvProfile as EvBody, EvRef, ObjectId,
    PortAdmin, ProbeEv, QpInit, QpReset, QpRtr, QpRts, RegMr, ReplaceEv,
};
use mrc_abi::device::admin::{
    ev_profile_transition_ok, AdminCmd, AdminCommand, AdminReply, AdminStatus, EvProfileKind,
    EvProfileState, QpModify, QpState, ACCESS_REMOTE_WRITE, EVENT_MASK_EV_BAD,
    EVENT_MASK_EV_DENIED, EVENT_MASK_EV_GOOD, FMT_TSX, FMT_USE_SRH,
};
use mrc_abi::device::event::Event;
use mrc_abi::device::regs::{caps, DeviceParams};
use mrc_abi::device::EvState;
use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;
use zerocopy::little_endian::{U16, U32};
use zerocopy::FromBytes;

use crate::datapath::placement::{Access, MemRegion};
use crate::engine::cc::NsccParams;
use crate::engine::ev_state::{EvConfig, EvReason};
use crate::engine::qp::{
    Attr, CcProfile as EngineCc, EvProfile as EngineEv, QpAttrs, QpError, QpHint,
    QpState as EngineState,
};
use crate::engine::retry::RetryError;
use crate::engine::Engine;

pub use table::{FixedVec, Table, Zero};

/// A refused command: status and syndrome.
pub type Fail = (AdminStatus, u32);
/// The result words of a command, or why it was refused.
pub type AdminResult = Result<[u64; 3], Fail>;

/// Offset of the body in a command (syndromes are offsets in the 64-byte command).
const BODY: u32 = 8;
const OK: AdminResult = Ok([0; 3]);

macro_rules! off {
    ($t:ty, $f:ident) => {
        BODY + offset_of!($t, $f) as u32
    };
}

fn not_found(off: u32) -> Fail {
    (AdminStatus::NotFound, off)
}
fn bad_attr(off: u32) -> Fail {
    (AdminStatus::BadAttribute, off)
}
const BAD_STATE: Fail = (AdminStatus::BadState, 0);
const IN_USE: Fail = (AdminStatus::InUse, 0);

/// Remove object `id` (a PD, a CQ, a profile) from `table` unless `used` (something still
/// names it): `NOT_FOUND` at the object id's offset when there is no such object, `IN_USE`
/// when it is named.
fn destroy_unused<V: Zero, const N: usize>(
    table: &mut Table<V, N>,
    id: u32,
    used: bool,
) -> AdminResult {
    if !table.contains_key(&id) {
        Err(not_found(off!(ObjectId, id)))
    } else if used {
        Err(IN_USE)
    } else {
        table.remove(&id);
        OK
    }
}
const NO_RESOURCES: Fail = (AdminStatus::NoResources, 0);

/// Insert `value(id)` under the next id after `made` (ids are never reused) and count it made;
/// `NO_RESOURCES` when the ids or the table run out. The reply carries the id.
fn insert_next<V: Zero, const N: usize>(
    table: &mut Table<V, N>,
    made: &mut u32,
    value: impl FnOnce(u32) -> V,
) -> AdminResult {
    let id = made.checked_add(1).ok_or(NO_RESOURCES)?;
    table.insert(id, value(id)).map_err(|_| NO_RESOURCES)?;
    *made = id;
    Ok([id.into(), 0, 0])
}

/// Replace the entry `id` with `value`; `missing` when there is none.
fn replace_existing<V: Zero, const N: usize>(
    table: &mut Table<V, N>,
    id: u32,
    value: V,
    missing: Fail,
) -> AdminResult {
    *table.get_mut(&id).ok_or(missing)? = value;
    OK
}

/// Bit 31 of an rkey: distinguishes it from the lkey of the same region.
pub const RKEY_BIT: u32 = 1 << 31;
/// The low byte of every lkey (a region's lkey is `n << 8 | LKEY_TAG`).
pub const LKEY_TAG: u32 = 0x5a;
/// EV value of EV 0 of the default EV profile (profile 0: AUTO, UDP source ports).
pub const DEFAULT_EV_BASE: u32 = 0xC000;
/// Link rate the CC profiles are computed for when the environment reports no port speed.
pub const DEFAULT_LINK_BPS: u64 = 200_000_000_000;
/// Base RTT of the default CC profile.
pub const DEFAULT_BASE_RTT_NS: u64 = 10_000;

// ---------------------------------------------------------------------------------------------
// Records.

/// A registered memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mr {
    /// Protection domain.
    pub pd: u32,
    /// `ACCESS_*` bits.
    pub access: u32,
    /// Virtual address SGEs and RETHs name it by.
    pub va: u64,
    /// IOVA the device DMAs to.
    pub iova: u64,
    /// Bytes.
    pub len: u64,
}

impl Zero for Mr {
    const ZERO: Self = Mr {
        pd: 0,
        access: 0,
        va: 0,
        iova: 0,
        len: 0,
    };
}

impl Mr {
    /// IOVA of `len` bytes at virtual address `va`, if inside.
    pub fn translate(&self, va: u64, len: u64) -> Option<u64> {
        let end = va.checked_add(len)?;
        (va >= self.va && end <= self.va.checked_add(self.len)?).then(|| self.iova + (va - self.va))
    }

    /// Remote peers may write it.
    pub fn remote_writable(&self) -> bool {
        self.access & ACCESS_REMOTE_WRITE != 0
    }
}

/// A completion queue: the ring and the device's producer / consumer view of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cq {
    /// Ring IOVA.
    pub base: u64,
    /// log2 entries.
    pub log2: u8,
    /// Interrupt vector.
    pub vector: u32,
    /// Next CQE the device writes.
    pub producer: u32,
    /// What the host consumed (CQ doorbell).
    pub consumer: u32,
    /// Armed (CQ doorbell with ARM): the next completion raises the vector.
    pub armed: bool,
    /// Armed for solicited (and error) completions only.
    pub solicited_only: bool,
}

impl Zero for Cq {
    const ZERO: Self = Cq {
        base: 0,
        log2: 0,
        vector: 0,
        producer: 0,
        consumer: 0,
        armed: false,
        solicited_only: false,
    };
}

/// A device QP: its rings, state, peer and profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Qp {
    /// Protection domain.
    pub pd: u32,
    /// CQ of send completions.
    pub send_cq: u32,
    /// CQ of receive completions.
    pub recv_cq: u32,
    /// Send ring IOVA (64-byte WQEs) and log2 entries.
    pub sq_base: u64,
    pub sq_log2: u8,
    /// Receive ring IOVA (32-byte WQEs) and log2 entries.
    pub rq_base: u64,
    pub rq_log2: u8,
    /// Device QP state (the engine QP behind it is in the same state but for ERROR entered
    /// through a failed work request, which the device records here).
    pub state: QpState,
    /// Send ring producer (host doorbell) and the device's consumer.
    pub sq_prod: u32,
    pub sq_cons: u32,
    /// Receive ring producer and consumer.
    pub rq_prod: u32,
    pub rq_cons: u32,
    /// Peer QPN (RTR).
    pub dest_qpn: u32,
    /// Peer NIC address (RTR).
    pub remote_addr: [u8; 16],
    /// EV and CC profiles (INIT; 0: the device defaults).
    pub ev_profile: u32,
    pub cc_profile: u32,
    /// Send PSN set at RTS (QUERY_QP reports the engine's once it has one:
    /// [`QpEngine::send_psn`]) / next expected PSN (QUERY_QP).
    pub sq_psn: u32,
    pub rq_psn: u32,
    /// Engine QPN + 1 of the engine QP behind this one (0: none).
    pub engine_slot: u32,
}

impl Zero for Qp {
    const ZERO: Self = Qp {
        pd: 0,
        send_cq: 0,
        recv_cq: 0,
        sq_base: 0,
        sq_log2: 0,
        rq_base: 0,
        rq_log2: 0,
        state: QpState::Reset,
        sq_prod: 0,
        sq_cons: 0,
        rq_prod: 0,
        rq_cons: 0,
        dest_qpn: 0,
        remote_addr: [0; 16],
        ev_profile: 0,
        cc_profile: 0,
        sq_psn: 0,
        rq_psn: 0,
        engine_slot: 0,
    };
}

impl Qp {
    /// The engine QP behind this device QP, if any.
    pub fn engine_qpn(&self) -> Option<u32> {
        self.engine_slot.checked_sub(1)
    }
}

/// One EV of an EV profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ev {
    /// UDP / STEV value (0 for SRv6).
    pub value: u32,
    /// SRv6 carrier (zero for UDP / STEV).
    pub carrier: [u8; 16],
    /// Controller view of the EV (DENY_EV).
    pub state: EvState,
    /// Last probe RTT.
    pub rtt_ns: u32,
}

impl Zero for Ev {
    const ZERO: Self = Ev {
        value: 0,
        carrier: [0; 16],
        state: EvState::Good,
        rtt_ns: 0,
    };
}

/// An EV profile of up to `N` EVs.
#[derive(Clone, Copy, Debug)]
pub struct EvProf<const N: usize> {
    /// EV format profile.
    pub format: u32,
    /// How its EVs were made.
    pub kind: EvProfileKind,
    /// INIT -> ONLINE <-> OFFLINE.
    pub state: EvProfileState,
    /// Fewest usable EVs before the QP reports.
    pub min_active: u16,
    /// `EVENT_MASK_*`.
    pub event_mask: u32,
    /// The EVs.
    pub evs: FixedVec<Ev, N>,
}

impl<const N: usize> Zero for EvProf<N> {
    const ZERO: Self = EvProf {
        format: 0,
        kind: EvProfileKind::Auto,
        state: EvProfileState::Init,
        min_active: 0,
        event_mask: 0,
        evs: FixedVec::new(),
    };
}

impl Zero for EvFormatProfile {
    const ZERO: Self = EvFormatProfile {
        id: U32::ZERO,
        encoding: 0,
        flags: 0,
        dscp: 0,
        hop_limit: 0,
        locator_block: U32::ZERO,
        src_port_min: U16::ZERO,
        src_port_max: U16::ZERO,
    };
}

impl Zero for CcBody {
    const ZERO: Self = CcBody {
        id: U32::ZERO,
        eta_q16: U32::ZERO,
        fi_q16: U32::ZERO,
        fi_scale_q16: U32::ZERO,
        gamma_q16: U32::ZERO,
        max_md_jump_q16: U32::ZERO,
        target_qdelay_ns: U32::ZERO,
        base_rtt_ns: U32::ZERO,
    };
}

/// EV values of a new profile: AUTO spreads over the format's port range (SRv6: one uSID per
/// EV), GENERATED draws them from the seed, EXPLICIT starts empty (zero) until REPLACE_EV.
/// At most `N` EVs (the caller checked `n <= N`).
pub fn make_evs<const N: usize>(
    fmt: &EvFormatProfile,
    kind: EvProfileKind,
    n: u16,
    seed: u32,
) -> FixedVec<Ev, N> {
    let lo = u32::from(fmt.src_port_min.get());
    let span = u32::from(fmt.src_port_max.get()).saturating_sub(lo) + 1;
    let mut x = u64::from(seed) | 1;
    let mut out = FixedVec::new();
    for i in 0..n {
        let pick = match kind {
            EvProfileKind::Auto => u32::from(i),
            EvProfileKind::Generated => {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u32
            }
            EvProfileKind::Explicit => 0,
        };
        let mut ev = Ev::ZERO;
        if kind != EvProfileKind::Explicit {
            match fmt.encoding() {
                Some(EvFormat::Srv6) => {
                    let usid = (pick % 0xfffe) as u16 + 1;
                    if let Ok(a) = mrc_abi::wire::usid::carrier(fmt.locator_block.get(), &[usid]) {
                        ev.carrier = a.octets();
                    }
                }
                _ => ev.value = lo + pick % span,
            }
        }
        if out.push(ev).is_err() {
            break;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// What differs between a NIC and a device model.

/// The device services the executor uses.
pub trait AdminEnv {
    /// Interrupt vectors of the function (CREATE_CQ's vector must be below).
    fn vectors(&self) -> u32;
    /// Whether the IOMMU maps `len` bytes at `iova` (a device that cannot tell says `true`
    /// and reports the fault when it first uses the range).
    fn dma_mapped(&mut self, iova: u64, len: u64) -> bool;
    /// Post an event record to the host's event queue (a full queue is the env's drop).
    fn post_event(&mut self, event: Event);
    /// Running firmware image version (QUERY_DEVICE).
    fn fw_version(&self) -> u32;
    /// Ports of the device.
    fn num_ports(&self) -> usize;
    /// Admin state of port `p` (`p < num_ports`).
    fn port_admin(&self, p: usize) -> bool;
    /// Link state of port `p`.
    fn port_link(&self, p: usize) -> bool;
    /// Set the admin state of port `p` (and publish it in the port registers).
    fn set_port_admin(&mut self, p: usize, up: bool);
    /// Plane of port `p`.
    fn port_plane(&self, p: usize) -> u8;
    /// Speed of an operational port, Mb/s.
    fn port_speed_mbps(&self) -> u32;
    /// A firmware update command (FW_*).
    fn firmware(&mut self, cmd: &AdminCommand) -> AdminResult;
}

/// The engine behind the device QPs. Every method has a no-op default ([`NoEngine`]).
pub trait QpEngine {
    /// A new engine QP in RESET: `Ok(Some(engine QPN))`, `Ok(None)` without an engine.
    ///
    /// # Errors
    /// The engine's QP table is full.
    fn create_qp(&mut self) -> Result<Option<u32>, QpError> {
        Ok(None)
    }
    /// Move engine QP `qpn` to `to` with `attrs`.
    ///
    /// # Errors
    /// The engine's refusal; the QP is unchanged.
    fn modify_qp(
        &mut self,
        qpn: u32,
        to: EngineState,
        attrs: &QpAttrs,
        now_ns: u64,
    ) -> Result<(), QpError> {
        let _ = (qpn, to, attrs, now_ns);
        Ok(())
    }
    /// Destroy engine QP `qpn`.
    fn destroy_qp(&mut self, qpn: u32) {
        let _ = qpn;
    }
    /// Register a placement region; `false` when the engine's table is full.
    fn register_region(&mut self, region: MemRegion) -> bool {
        let _ = region;
        true
    }
    /// Remove the placement region of `rkey`.
    fn deregister_region(&mut self, rkey: u32) {
        let _ = rkey;
    }
    /// Deny (`allow == false`) or allow EV `ev` of engine QP `qpn`.
    fn set_ev_allowed(&mut self, now_ns: u64, qpn: u32, ev: u16, allow: bool) {
        let _ = (now_ns, qpn, ev, allow);
    }
    /// A plane's ports became (non-)operational.
    fn plane(&mut self, now_ns: u64, plane: u8, up: bool) {
        let _ = (now_ns, plane, up);
    }
    /// Probe EV `ev` of engine QP `qpn` for the host's probe `probe_id`, timing out
    /// `timeout_ns` from `now_ns`; the outcome reaches the host as an `EV_PROBE_RESULT`
    /// event ([`Admin::probe_result_event`]). `false`: the engine cannot (PROBE_EV answers
    /// `BUSY`).
    fn probe_ev(&mut self, now_ns: u64, qpn: u32, ev: u16, probe_id: u32, timeout_ns: u64) -> bool {
        let _ = (now_ns, qpn, ev, probe_id, timeout_ns);
        false
    }
    /// Payload bytes per packet (the default CC profile counts in it).
    fn mtu_payload(&self) -> u32 {
        4096
    }
    /// What one QP holds: PSN window per direction, send and receive work requests (0: no
    /// limit). The QUERY_LIMITS answer.
    fn qp_limits(&self) -> [u32; 3] {
        [0, 0, 0]
    }
    /// The send PSN of engine QP `qpn` as the firmware knows it: the oldest PSN its ACK
    /// summaries left unacknowledged, the next one to send once everything sent is
    /// acknowledged (QUERY_QP's `sq_psn`; `None`: the device table's, the PSN RTS set).
    fn send_psn(&self, qpn: u32) -> Option<u32> {
        let _ = qpn;
        None
    }
}

/// Port `p`'s operational state (admin state up and link up) was `was` before its admin
/// state (SET_PORT_ADMIN_STATE) or its link (a transceiver's report, the datapath's) changed
/// in `env`: when it is different now, post PORT_UP or PORT_DOWN and give the engine the
/// plane's state (up while any port on it is operational; down retires the plane's EVs). The
/// one path of both changes.
pub fn port_changed<E: AdminEnv + ?Sized, G: QpEngine + ?Sized>(
    env: &mut E,
    engine: &mut G,
    now_ns: u64,
    p: usize,
    was: bool,
) {
    let oper = env.port_admin(p) && env.port_link(p);
    if oper == was {
        return;
    }
    let plane = env.port_plane(p);
    let port = p as u8;
    env.post_event(if oper {
        Event::PortUp {
            port,
            plane,
            speed_mbps: env.port_speed_mbps(),
        }
    } else {
        Event::PortDown { port, plane }
    });
    let plane_up = (0..env.num_ports())
        .any(|k| env.port_plane(k) == plane && env.port_admin(k) && env.port_link(k));
    engine.plane(now_ns, plane, plane_up);
}

/// No engine behind the device tables.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoEngine;

impl QpEngine for NoEngine {}

/// Where a NIC's placement regions live for the executor: the datapath's region table, written
/// directly ([`crate::datapath::stage::Datapath`]) or through a FW->DP `RegionWrite` entry (the
/// NIC image's main loop).
pub trait RegionTable {
    /// Register a placement region; `false` when the table refuses it.
    fn register_region(&mut self, region: MemRegion) -> bool;
    /// Remove the placement region of `rkey`.
    fn deregister_region(&mut self, rkey: u32);
    /// Payload bytes per packet of the datapath.
    fn mtu_payload(&self) -> u32;
}

impl<C: crate::capacity::Capacity, B: crate::datapath::blocks::Blocks> RegionTable
    for crate::datapath::stage::Datapath<C, B>
{
    fn register_region(&mut self, region: MemRegion) -> bool {
        crate::datapath::stage::Datapath::register_region(self, region).is_ok()
    }
    fn deregister_region(&mut self, rkey: u32) {
        let _ = crate::datapath::stage::Datapath::deregister_region(self, rkey);
    }
    fn mtu_payload(&self) -> u32 {
        self.config().mtu_payload
    }
}

/// The firmware engine and the datapath's region table of a NIC, as the executor drives them:
/// QPs on the engine (its capacities are what QUERY_LIMITS reports), placement regions in the
/// region table.
pub struct Core<'a, C: crate::capacity::Capacity, R: RegionTable> {
    /// The firmware engine.
    pub engine: &'a mut Engine<C>,
    /// The datapath's region table.
    pub regions: &'a mut R,
}

impl<C: crate::capacity::Capacity, R: RegionTable> QpEngine for Core<'_, C, R> {
    fn create_qp(&mut self) -> Result<Option<u32>, QpError> {
        self.engine.create_qp().map(Some)
    }
    fn modify_qp(
        &mut self,
        qpn: u32,
        to: EngineState,
        attrs: &QpAttrs,
        now_ns: u64,
    ) -> Result<(), QpError> {
        self.engine.modify_qp(qpn, to, attrs, now_ns)
    }
    fn destroy_qp(&mut self, qpn: u32) {
        let _ = self.engine.destroy_qp(qpn);
    }
    fn register_region(&mut self, region: MemRegion) -> bool {
        self.regions.register_region(region)
    }
    fn deregister_region(&mut self, rkey: u32) {
        self.regions.deregister_region(rkey);
    }
    fn set_ev_allowed(&mut self, now_ns: u64, qpn: u32, ev: u16, allow: bool) {
        // The min-active guard may refuse a denial: the EV stays usable (counted by the
        // engine's EV table); the device table still says denied, as the controller asked.
        let _ = self.engine.set_ev_allowed(now_ns, qpn, ev, allow);
    }
    fn plane(&mut self, now_ns: u64, plane: u8, up: bool) {
        if up {
            self.engine.handle_plane_up(now_ns, plane);
        } else {
            self.engine.handle_plane_down(now_ns, plane);
        }
    }
    fn probe_ev(&mut self, now_ns: u64, qpn: u32, ev: u16, probe_id: u32, timeout_ns: u64) -> bool {
        self.engine
            .probe_ev(now_ns, qpn, ev, probe_id, timeout_ns)
            .is_ok()
    }
    fn mtu_payload(&self) -> u32 {
        self.regions.mtu_payload()
    }
    fn qp_limits(&self) -> [u32; 3] {
        [
            C::WINDOW_PSNS as u32,
            C::SEND_QUEUE as u32,
            C::RECV_QUEUE as u32,
        ]
    }
    fn send_psn(&self, qpn: u32) -> Option<u32> {
        self.engine.qp(qpn).map(|q| q.una.value())
    }
}

/// What a command did besides its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    /// The result words or the refusal.
    pub result: AdminResult,
    /// A QP that entered ERROR: the device flushes its pending work requests (a device whose
    /// engine flushes them itself ignores this).
    pub entered_error: Option<u32>,
}

impl Done {
    /// The reply to command `command_id`.
    pub fn reply(&self, command_id: u16) -> AdminReply {
        match self.result {
            Ok(result) => AdminReply::ok(command_id, result),
            Err((status, syndrome)) => AdminReply {
                command_id,
                status,
                syndrome,
                result: [0; 3],
            },
        }
    }
}

impl From<AdminResult> for Done {
    fn from(result: AdminResult) -> Self {
        Done {
            result,
            entered_error: None,
        }
    }
}

/// The call context of a command: the device's parameters, services, engine and time.
pub struct Ctx<'a, E: AdminEnv, G: QpEngine> {
    /// Register-visible parameters (limits, capabilities, planes).
    pub params: &'a DeviceParams,
    /// Device services.
    pub env: &'a mut E,
    /// The engine.
    pub engine: &'a mut G,
    /// Now (for the engine).
    pub now_ns: u64,
}

/// The admin tables of a device: `PD` PDs, `MR` regions, `CQ` CQs, `QP` QPs, `FMT` EV format
/// profiles, `EVP` EV profiles of at most `EVN` EVs, `CC` CC profiles. All zero when empty.
#[derive(Clone, Copy, Debug)]
pub struct Admin<
    const PD: usize,
    const MR: usize,
    const CQ: usize,
    const QP: usize,
    const FMT: usize,
    const EVP: usize,
    const EVN: usize,
    const CC: usize,
> {
    /// Protection domains.
    pub pds: Table<(), PD>,
    /// Memory regions by lkey.
    pub mrs: Table<Mr, MR>,
    /// CQs by CQN.
    pub cqs: Table<Cq, CQ>,
    /// QPs by device QPN.
    pub qps: Table<Qp, QP>,
    /// EV format profiles, EV profiles and CC profiles by id (one id space).
    pub formats: Table<EvFormatProfile, FMT>,
    pub ev_profiles: Table<EvProf<EVN>, EVP>,
    pub cc_profiles: Table<CcBody, CC>,
    /// PDs, MRs and profiles made so far (ids are never reused).
    pds_made: u32,
    mrs_made: u32,
    profiles_made: u32,
}

impl<
        const PD: usize,
        const MR: usize,
        const CQ: usize,
        const QP: usize,
        const FMT: usize,
        const EVP: usize,
        const EVN: usize,
        const CC: usize,
    > Default for Admin<PD, MR, CQ, QP, FMT, EVP, EVN, CC>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<
        const PD: usize,
        const MR: usize,
        const CQ: usize,
        const QP: usize,
        const FMT: usize,
        const EVP: usize,
        const EVN: usize,
        const CC: usize,
    > Admin<PD, MR, CQ, QP, FMT, EVP, EVN, CC>
{
    /// The `EV_STATE_CHANGE` event a host gets for the engine's EV event on device QP `qpn`
    /// (EV `ev_index` from state code `old` to `new`, reason code `reason`), when the `EVENT_MASK_*`
    /// bits of the QP's EV profile ask for it: an EV retired (`EV_BAD`) or back in use after
    /// being retired (`EV_GOOD`). Skips and their service are per-packet spraying detail;
    /// denials and allows are the controller's own (reported by the executor when it makes
    /// them). `None` for an unknown QP or state code, and for every change the mask leaves out.
    pub fn ev_state_event(
        &self,
        qpn: u32,
        ev_index: u16,
        old: u8,
        new: u8,
        reason: u8,
    ) -> Option<Event> {
        let mask = self
            .qps
            .get(&qpn)
            .and_then(|q| self.ev_profiles.get(&q.ev_profile))
            .map_or(0, |p| p.event_mask);
        let old = EvState::from_u8(old)?;
        let new = EvState::from_u8(new)?;
        let by_controller = [EvReason::ControllerDeny, EvReason::ControllerAllow]
            .iter()
            .any(|r| r.code() == reason);
        let report = !by_controller
            && match new {
                EvState::AssumedBad => mask & EVENT_MASK_EV_BAD != 0,
                EvState::Good => old == EvState::AssumedBad && mask & EVENT_MASK_EV_GOOD != 0,
                _ => false,
            };
        report.then_some(Event::EvStateChange {
            qpn,
            ev_index,
            old,
            new,
        })
    }

    /// The `EV_PROBE_RESULT` event of the host's probe `probe_id` of EV `ev_index` of device
    /// QP `qpn`, which the engine reported with `rtt_ns` (`None`: no reply by its timeout);
    /// a reply's round trip is kept as the EV's last probe RTT (QUERY_EV) when the QP has an
    /// EV profile.
    pub fn probe_result_event(
        &mut self,
        qpn: u32,
        ev_index: u16,
        probe_id: u32,
        rtt_ns: Option<u32>,
    ) -> Event {
        if let Some(rtt) = rtt_ns {
            let pid = self.qps.get(&qpn).map_or(0, |q| q.ev_profile);
            if let Some(ev) = self
                .ev_profiles
                .get_mut(&pid)
                .and_then(|p| p.evs.get_mut(usize::from(ev_index)))
            {
                ev.rtt_ns = rtt;
            }
        }
        Event::EvProbeResult {
            qpn,
            ev_index,
            probe_id,
            rtt_ns: rtt_ns.unwrap_or(0),
            replied: rtt_ns.is_some(),
        }
    }

    /// Empty tables (a device reset).
    pub const fn new() -> Self {
        Admin {
            pds: Table::new(),
            mrs: Table::new(),
            cqs: Table::new(),
            qps: Table::new(),
            formats: Table::new(),
            ev_profiles: Table::new(),
            cc_profiles: Table::new(),
            pds_made: 0,
            mrs_made: 0,
            profiles_made: 0,
        }
    }

    /// The device QP behind engine QP `engine_qpn`.
    pub fn device_qpn(&self, engine_qpn: u32) -> Option<u32> {
        let slot = engine_qpn.checked_add(1)?;
        self.qps
            .iter()
            .find(|(_, q)| q.engine_slot == slot)
            .map(|(k, _)| *k)
    }

    /// Usable (GOOD or SKIP) EVs of a profile (profile 0: the device default,
    /// `max_evs_per_qp`).
    pub fn usable_evs(&self, params: &DeviceParams, profile: u32) -> u32 {
        if profile == 0 {
            return params.max_evs_per_qp;
        }
        self.ev_profiles.get(&profile).map_or(0, |p| {
            p.evs
                .iter()
                .filter(|e| matches!(e.state, EvState::Good | EvState::Skip))
                .count() as u32
        })
    }

    /// Decode, check and execute one 64-byte command. A command that does not decode is
    /// refused with the status and syndrome of its [`mrc_abi::device::admin::AdminError`].
    pub fn handle<E: AdminEnv, G: QpEngine>(
        &mut self,
        raw: &[u8; 64],
        cx: &mut Ctx<'_, E, G>,
    ) -> (AdminReply, Option<u32>) {
        let Ok(cmd) = AdminCmd::read_from_bytes(raw) else {
            return (Done::from(Err((AdminStatus::Internal, 0))).reply(0), None);
        };
        let id = cmd.command_id.get();
        match cmd.decode() {
            Ok(c) => {
                let d = self.execute(c, cx);
                (d.reply(id), d.entered_error)
            }
            Err(e) => (AdminReply::rejected(id, e), None),
        }
    }

    /// Execute a decoded command (see the module docs for the rules).
    pub fn execute<E: AdminEnv, G: QpEngine>(
        &mut self,
        cmd: AdminCommand,
        cx: &mut Ctx<'_, E, G>,
    ) -> Done {
        match cmd {
            AdminCommand::ModifyQp(m) => self.modify_qp(m, cx),
            _ => self.run(cmd, cx).into(),
        }
    }

    /// Every command but MODIFY_QP.
    fn run<E: AdminEnv, G: QpEngine>(
        &mut self,
        cmd: AdminCommand,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        use AdminCommand as C;
        match cmd {
            C::QueryDevice => Ok([
                cx.env.fw_version().into(),
                ((MR as u64) << 32) | PD as u64,
                (1u64 << 24 << 32) | (1 << 16),
            ]),
            C::QueryLimits => {
                let [window, sq, rq] = cx.engine.qp_limits();
                let field = |n: usize| u64::from(u16::try_from(n).unwrap_or(u16::MAX));
                Ok([
                    window.into(),
                    (u64::from(sq) << 32) | u64::from(rq),
                    (field(FMT) << 48) | (field(EVP) << 32) | (field(EVN) << 16) | field(CC),
                ])
            }
            C::AllocPd => self.alloc_pd(),
            C::DeallocPd(b) => self.dealloc_pd(b),
            C::RegMr(b) => self.reg_mr(b, cx),
            C::DeregMr(b) => self.dereg_mr(b, cx),
            C::CreateCq(b) => self.create_cq(b, cx),
            C::DestroyCq(b) => self.destroy_cq(b),
            C::CreateQp(b) => self.create_qp(b, cx),
            // `execute` takes it (it may flush the QP).
            C::ModifyQp(m) => self.modify_qp(m, cx).result,
            C::QueryQp(b) => {
                let q = self
                    .qps
                    .get(&b.id.get())
                    .ok_or(not_found(off!(ObjectId, id)))?;
                let sq_psn = q
                    .engine_qpn()
                    .and_then(|e| cx.engine.send_psn(e))
                    .unwrap_or(q.sq_psn);
                Ok([
                    q.state as u64,
                    (u64::from(sq_psn) << 32) | u64::from(q.rq_psn),
                    self.usable_evs(cx.params, q.ev_profile).into(),
                ])
            }
            C::DestroyQp(b) => self.destroy_qp(b, cx),
            C::SetPortAdminState(b) => self.set_port(b, cx),
            C::QueryPort(b) => {
                let p = b.id.get() as usize;
                if p >= cx.env.num_ports() {
                    return Err(not_found(off!(ObjectId, id)));
                }
                let admin = cx.env.port_admin(p);
                let oper = admin && cx.env.port_link(p);
                Ok([
                    (u64::from(admin) << 32) | u64::from(oper),
                    if oper {
                        cx.env.port_speed_mbps().into()
                    } else {
                        0
                    },
                    cx.env.port_plane(p).into(),
                ])
            }
            C::CreateEvFormatProfile(b) => {
                check_format(cx.params.capabilities, &b).and_then(|()| {
                    insert_next(&mut self.formats, &mut self.profiles_made, |id| {
                        EvFormatProfile { id: id.into(), ..b }
                    })
                })
            }
            C::ModifyEvFormatProfile(b) => {
                check_format(cx.params.capabilities, &b).and_then(|()| {
                    let missing = not_found(off!(EvFormatProfile, id));
                    replace_existing(&mut self.formats, b.id.get(), b, missing)
                })
            }
            C::DestroyEvFormatProfile(b) => {
                let id = b.id.get();
                let used = self.ev_profiles.values().any(|p| p.format == id);
                destroy_unused(&mut self.formats, id, used)
            }
            C::CreateEvProfile(b) => self.create_ev_profile(b, cx),
            C::ModifyEvProfile(b) => self.modify_ev_profile(b),
            C::DestroyEvProfile(b) => {
                let id = b.id.get();
                let used = self.qps.values().any(|q| q.ev_profile == id);
                destroy_unused(&mut self.ev_profiles, id, used)
            }
            C::DenyEv(b) => self.deny_ev(b, cx),
            C::ReplaceEv(b) => self.replace_ev(b),
            C::QueryEv(b) => {
                let p = self
                    .ev_profiles
                    .get(&b.profile.get())
                    .ok_or(not_found(off!(EvRef, profile)))?;
                let ev = p
                    .evs
                    .get(usize::from(b.ev_index.get()))
                    .ok_or(bad_attr(off!(EvRef, ev_index)))?;
                let value = if ev.value != 0 {
                    u64::from(ev.value)
                } else {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(ev.carrier.get(8..16).unwrap_or(&[0; 8]));
                    u64::from_be_bytes(w)
                };
                Ok([ev.state as u64, value, ev.rtt_ns.into()])
            }
            C::ProbeEv(b) => self.probe_ev(b, cx),
            C::CreateCcProfile(b) => {
                insert_next(&mut self.cc_profiles, &mut self.profiles_made, |id| {
                    CcBody { id: id.into(), ..b }
                })
            }
            C::ModifyCcProfile(b) => {
                let missing = not_found(off!(CcBody, id));
                replace_existing(&mut self.cc_profiles, b.id.get(), b, missing)
            }
            C::DestroyCcProfile(b) => {
                let id = b.id.get();
                let used = self.qps.values().any(|q| q.cc_profile == id);
                destroy_unused(&mut self.cc_profiles, id, used)
            }
            C::FwStatus
            | C::FwBegin(_)
            | C::FwChunk(_)
            | C::FwCommit(_)
            | C::FwConfirm
            | C::FwRollback => cx.env.firmware(&cmd),
        }
    }

    fn alloc_pd(&mut self) -> AdminResult {
        insert_next(&mut self.pds, &mut self.pds_made, |_| ())
    }

    fn dealloc_pd(&mut self, b: ObjectId) -> AdminResult {
        let pd = b.id.get();
        let used = self.mrs.values().any(|m| m.pd == pd) || self.qps.values().any(|q| q.pd == pd);
        destroy_unused(&mut self.pds, pd, used)
    }

    fn reg_mr<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: RegMr,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        if !self.pds.contains_key(&b.pd.get()) {
            return Err(not_found(off!(RegMr, pd)));
        }
        // The IOMMU must map the whole range.
        let (iova, len) = (b.iova.get(), b.length.get());
        if !cx.env.dma_mapped(iova, len) {
            return Err(bad_attr(off!(RegMr, iova)));
        }
        let n = self.mrs_made.checked_add(1).filter(|n| *n < 1 << 23);
        let (Some(n), false) = (n, self.mrs.is_full()) else {
            return Err(NO_RESOURCES);
        };
        let lkey = n << 8 | LKEY_TAG;
        let mr = Mr {
            pd: b.pd.get(),
            access: b.access.get(),
            va: b.va.get(),
            iova,
            len,
        };
        if mr.remote_writable()
            && !cx.engine.register_region(MemRegion {
                rkey: lkey | RKEY_BIT,
                base_va: mr.va,
                length: len,
                access: Access::REMOTE_WRITE,
            })
        {
            return Err(NO_RESOURCES);
        }
        self.mrs.insert(lkey, mr).map_err(|_| NO_RESOURCES)?;
        self.mrs_made = n;
        Ok([lkey.into(), (lkey | RKEY_BIT).into(), 0])
    }

    fn dereg_mr<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: ObjectId,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        let lkey = b.id.get();
        let mr = self
            .mrs
            .remove(&lkey)
            .ok_or(not_found(off!(ObjectId, id)))?;
        if mr.remote_writable() {
            cx.engine.deregister_region(lkey | RKEY_BIT);
        }
        OK
    }

    /// Lowest number in `1..limit` used by neither a QP nor a CQ. QPs and CQs share one number
    /// space because doorbell page `n` holds the doorbells of QP `n` and of CQ `n`: with a
    /// number in use by at most one queue, a page reaches exactly one queue, so it can be
    /// mapped into one process without letting it ring another process's queue.
    fn alloc_qcn(&self, limit: u32) -> Option<u32> {
        (1..limit).find(|i| !self.qps.contains_key(i) && !self.cqs.contains_key(i))
    }

    fn create_cq<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: CreateCq,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        let limit = cx.params.max_cqs.min(cx.params.doorbell_pages);
        let cqn = self
            .alloc_qcn(limit)
            .filter(|_| !self.cqs.is_full())
            .ok_or(NO_RESOURCES)?;
        let vector = u32::from(b.irq_vector.get());
        if vector >= cx.env.vectors() {
            return Err(bad_attr(off!(CreateCq, irq_vector)));
        }
        if !cx.env.dma_mapped(b.base.get(), 32) {
            return Err(bad_attr(off!(CreateCq, base)));
        }
        let cq = Cq {
            base: b.base.get(),
            log2: b.log2_entries,
            vector,
            ..Cq::ZERO
        };
        self.cqs.insert(cqn, cq).map_err(|_| NO_RESOURCES)?;
        Ok([cqn.into(), 0, 0])
    }

    fn destroy_cq(&mut self, b: ObjectId) -> AdminResult {
        let cqn = b.id.get();
        let used = self
            .qps
            .values()
            .any(|q| q.send_cq == cqn || q.recv_cq == cqn);
        destroy_unused(&mut self.cqs, cqn, used)
    }

    fn create_qp<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: CreateQp,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        if !self.pds.contains_key(&b.pd.get()) {
            return Err(not_found(off!(CreateQp, pd)));
        }
        if !self.cqs.contains_key(&b.send_cq.get()) {
            return Err(not_found(off!(CreateQp, send_cq)));
        }
        if !self.cqs.contains_key(&b.recv_cq.get()) {
            return Err(not_found(off!(CreateQp, recv_cq)));
        }
        let limit = cx.params.max_qps.min(cx.params.doorbell_pages);
        let qpn = self
            .alloc_qcn(limit)
            .filter(|_| !self.qps.is_full())
            .ok_or(NO_RESOURCES)?;
        let engine_slot = match cx.engine.create_qp() {
            Ok(Some(e)) => e.checked_add(1).ok_or(NO_RESOURCES)?,
            Ok(None) => 0,
            Err(_) => return Err(NO_RESOURCES),
        };
        let q = Qp {
            pd: b.pd.get(),
            send_cq: b.send_cq.get(),
            recv_cq: b.recv_cq.get(),
            sq_base: b.sq_base.get(),
            sq_log2: b.sq_log2,
            rq_base: b.rq_base.get(),
            rq_log2: b.rq_log2,
            engine_slot,
            ..Qp::ZERO
        };
        if self.qps.insert(qpn, q).is_err() {
            if let Some(e) = q.engine_qpn() {
                cx.engine.destroy_qp(e);
            }
            return Err(NO_RESOURCES);
        }
        Ok([qpn.into(), 0, 0])
    }

    fn destroy_qp<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: ObjectId,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        let q = self
            .qps
            .remove(&b.id.get())
            .ok_or(not_found(off!(ObjectId, id)))?;
        if let Some(e) = q.engine_qpn() {
            cx.engine.destroy_qp(e);
        }
        OK
    }

    /// The engine's EV profile for device EV profile `id` (0: the default).
    fn engine_ev(&self, params: &DeviceParams, id: u32) -> EngineEv {
        let planes = params.num_planes.clamp(1, u32::from(u8::MAX)) as u8;
        let prof = self.ev_profiles.get(&id);
        let fmt = prof.and_then(|p| self.formats.get(&p.format));
        let evs = prof.map_or(params.max_evs_per_qp, |p| p.evs.len() as u32);
        let evs = evs.min(u32::from(u16::MAX)) as u16;
        let mut table = EvConfig::new(evs, planes);
        if let Some(p) = prof {
            table.min_active = p.min_active.min(evs);
        }
        let format = fmt
            .and_then(EvFormatProfile::encoding)
            .unwrap_or(EvFormat::Udp);
        let value_base = match fmt {
            Some(f) if format != EvFormat::Srv6 => u32::from(f.src_port_min.get()),
            Some(_) => 0,
            None => DEFAULT_EV_BASE,
        };
        EngineEv {
            table,
            format,
            value_base,
        }
    }

    /// The engine's CC profile for device CC profile `id` (0: NSCC with the default base
    /// RTT). NSCC's windows and the gains the profile does not set follow the NIC's own
    /// bandwidth, `link_bps` (every port: a QP sprays over all of them).
    fn engine_cc(&self, id: u32, mtu: u32, link_bps: u64) -> Result<EngineCc, Fail> {
        let bad = bad_attr(off!(QpInit, cc_profile));
        let Some(b) = self.cc_profiles.get(&id) else {
            return NsccParams::for_link(link_bps, DEFAULT_BASE_RTT_NS, mtu)
                .map(EngineCc::Nscc)
                .map_err(|_| bad);
        };
        let mut p =
            NsccParams::for_link(link_bps, u64::from(b.base_rtt_ns.get()), mtu).map_err(|_| bad)?;
        p.target_qdelay_ns = u64::from(b.target_qdelay_ns.get());
        p.fast_increase_qdelay_ns = p.target_qdelay_ns / 4;
        p.eta_q16 = b.eta_q16.get();
        p.fi_q16 = b.fi_q16.get();
        p.fi_scale_q16 = b.fi_scale_q16.get();
        p.gamma_q16 = b.gamma_q16.get();
        p.max_md_jump_q16 = b.max_md_jump_q16.get();
        Ok(EngineCc::Nscc(p))
    }

    fn modify_qp<E: AdminEnv, G: QpEngine>(&mut self, m: QpModify, cx: &mut Ctx<'_, E, G>) -> Done {
        let qpn = match m {
            QpModify::Init(b) => b.qpn.get(),
            QpModify::Rtr(b) => b.qpn.get(),
            QpModify::Rts(b) => b.qpn.get(),
            QpModify::Reset(b) => b.qpn.get(),
        };
        let Some(q) = self.qps.get(&qpn).copied() else {
            return Err(not_found(off!(QpReset, qpn))).into();
        };
        let r = self.modify_checked(q, m, cx);
        let q2 = match r {
            Ok(q2) => q2,
            Err(e) => return Err(e).into(),
        };
        let _ = self.qps.insert(qpn, q2);
        Done {
            result: OK,
            entered_error: (q2.state == QpState::Error && q.state != QpState::Error).then_some(qpn),
        }
    }

    /// The QP after `m`, with the engine QP moved: every check (device, then engine) before
    /// anything changes.
    fn modify_checked<E: AdminEnv, G: QpEngine>(
        &self,
        q: Qp,
        m: QpModify,
        cx: &mut Ctx<'_, E, G>,
    ) -> Result<Qp, Fail> {
        let mut q2 = q;
        let mut attrs = QpAttrs::default();
        let (to, fields): (EngineState, &[(Attr, u32)]) = match m {
            QpModify::Init(b) => {
                if q.state != QpState::Reset {
                    return Err(BAD_STATE);
                }
                let ev = b.ev_profile.get();
                if ev != 0 {
                    let p = self
                        .ev_profiles
                        .get(&ev)
                        .ok_or(not_found(off!(QpInit, ev_profile)))?;
                    if p.state == EvProfileState::Init {
                        return Err(BAD_STATE);
                    }
                    if p.evs.len() as u32 > cx.params.max_evs_per_qp {
                        return Err(bad_attr(off!(QpInit, ev_profile)));
                    }
                }
                let cc = b.cc_profile.get();
                if cc != 0 && !self.cc_profiles.contains_key(&cc) {
                    return Err(not_found(off!(QpInit, cc_profile)));
                }
                q2.ev_profile = ev;
                q2.cc_profile = cc;
                q2.state = QpState::Init;
                if q.engine_qpn().is_some() {
                    attrs.hint = Some(QpHint {
                        traffic_class: b.dscp,
                        priority: 0,
                    });
                    attrs.ev_profile = Some(self.engine_ev(cx.params, ev));
                    let link_bps = match u64::from(cx.env.port_speed_mbps()) {
                        0 => DEFAULT_LINK_BPS,
                        m => m * 1_000_000 * cx.env.num_ports().max(1) as u64,
                    };
                    attrs.cc_profile =
                        Some(self.engine_cc(cc, cx.engine.mtu_payload(), link_bps)?);
                }
                (
                    EngineState::Init,
                    &[
                        (Attr::EvProfile, off!(QpInit, ev_profile)),
                        (Attr::CcProfile, off!(QpInit, cc_profile)),
                    ],
                )
            }
            QpModify::Rtr(b) => {
                if q.state != QpState::Init {
                    return Err(BAD_STATE);
                }
                if b.flags != 0 && cx.params.capabilities & caps::DYNAMIC_MPR == 0 {
                    return Err(bad_attr(off!(QpRtr, flags)));
                }
                if b.remote_addr == [0; 16] {
                    return Err(bad_attr(off!(QpRtr, remote_addr)));
                }
                q2.dest_qpn = b.dest_qpn.get();
                q2.remote_addr = b.remote_addr;
                q2.rq_psn = b.rq_psn.get();
                q2.state = QpState::Rtr;
                attrs.dest_qpn = Some(b.dest_qpn.get());
                attrs.rq_psn = Some(Psn::new(b.rq_psn.get()));
                attrs.responder_mpr = Some(b.responder_mpr.get());
                attrs.dynamic_mpr = Some(b.flags != 0);
                attrs.responder_max_wimm = Some(b.max_wimm.get());
                (
                    EngineState::Rtr,
                    &[
                        (Attr::ResponderMpr, off!(QpRtr, responder_mpr)),
                        (Attr::ResponderMaxWimm, off!(QpRtr, max_wimm)),
                        (Attr::DestQpn, off!(QpRtr, dest_qpn)),
                        (Attr::RqPsn, off!(QpRtr, rq_psn)),
                    ],
                )
            }
            QpModify::Rts(b) => {
                if q.state != QpState::Rtr {
                    return Err(BAD_STATE);
                }
                q2.sq_psn = b.sq_psn.get();
                q2.state = QpState::Rts;
                attrs.sq_psn = Some(Psn::new(b.sq_psn.get()));
                attrs.requester_mpr = Some(b.requester_mpr.get());
                attrs.requester_max_wimm = Some(b.max_wimm.get());
                attrs.retry_cnt = Some(b.retry_count);
                attrs.timeout = Some(b.ack_timeout_exp);
                (
                    EngineState::Rts,
                    &[
                        (Attr::RequesterMpr, off!(QpRts, requester_mpr)),
                        (Attr::RequesterMaxWimm, off!(QpRts, max_wimm)),
                        (Attr::RetryCnt, off!(QpRts, retry_count)),
                        (Attr::Timeout, off!(QpRts, ack_timeout_exp)),
                        (Attr::SqPsn, off!(QpRts, sq_psn)),
                    ],
                )
            }
            QpModify::Reset(b) => {
                let to = QpState::from_code(b.to_state).ok_or(bad_attr(off!(QpReset, to_state)))?;
                q2.state = to;
                if to == QpState::Reset {
                    // Pending work is dropped; the rings restart where the host is.
                    q2.sq_cons = q.sq_prod;
                    q2.rq_cons = q.rq_prod;
                }
                let to = if to == QpState::Error {
                    EngineState::Error
                } else {
                    EngineState::Reset
                };
                (to, &[])
            }
        };
        if let Some(e) = q.engine_qpn() {
            cx.engine
                .modify_qp(e, to, &attrs, cx.now_ns)
                .map_err(|err| engine_refusal(err, fields))?;
        }
        Ok(q2)
    }

    fn set_port<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: PortAdmin,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        let p = usize::from(b.port);
        if p >= cx.env.num_ports() {
            return Err(not_found(off!(PortAdmin, port)));
        }
        let up = b.up == 1;
        if cx.env.port_admin(p) != up {
            let was = cx.env.port_admin(p) && cx.env.port_link(p);
            cx.env.set_port_admin(p, up);
            port_changed(cx.env, cx.engine, cx.now_ns, p, was);
        }
        OK
    }

    fn create_ev_profile<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: EvBody,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        let fmt = *self
            .formats
            .get(&b.format_profile.get())
            .ok_or(not_found(off!(EvBody, format_profile)))?;
        let num = b.num_evs.get();
        if u32::from(num) > cx.params.max_evs_per_qp || usize::from(num) > EVN {
            return Err(bad_attr(off!(EvBody, num_evs)));
        }
        // Decode validated the kind and state codes.
        let kind = EvProfileKind::from_code(b.kind).ok_or(bad_attr(off!(EvBody, kind)))?;
        // (checked before the EVs are made: the insert would refuse them anyway)
        if self.ev_profiles.is_full() {
            return Err(NO_RESOURCES);
        }
        let p = EvProf {
            format: b.format_profile.get(),
            kind,
            state: EvProfileState::Init,
            min_active: b.min_active_evs.get(),
            event_mask: b.event_mask.get(),
            evs: make_evs(&fmt, kind, num, b.seed.get()),
        };
        insert_next(&mut self.ev_profiles, &mut self.profiles_made, |_| p)
    }

    fn modify_ev_profile(&mut self, b: EvBody) -> AdminResult {
        let p = self
            .ev_profiles
            .get_mut(&b.id.get())
            .ok_or(not_found(off!(EvBody, id)))?;
        if b.kind != p.kind as u8 {
            return Err(bad_attr(off!(EvBody, kind)));
        }
        if usize::from(b.num_evs.get()) != p.evs.len() {
            return Err(bad_attr(off!(EvBody, num_evs)));
        }
        if b.format_profile.get() != p.format {
            return Err(bad_attr(off!(EvBody, format_profile)));
        }
        let to = EvProfileState::from_code(b.state).ok_or(bad_attr(off!(EvBody, state)))?;
        if !ev_profile_transition_ok(p.state, to) {
            return Err(BAD_STATE);
        }
        p.state = to;
        p.min_active = b.min_active_evs.get();
        p.event_mask = b.event_mask.get();
        OK
    }

    fn deny_ev<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: EvRef,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        let pid = b.profile.get();
        let p = self
            .ev_profiles
            .get_mut(&pid)
            .ok_or(not_found(off!(EvRef, profile)))?;
        let idx = b.ev_index.get();
        let ev = p
            .evs
            .get_mut(usize::from(idx))
            .ok_or(bad_attr(off!(EvRef, ev_index)))?;
        let old = ev.state;
        let new = if b.deny == 1 {
            EvState::Denied
        } else if old == EvState::Denied {
            EvState::Good
        } else {
            old
        };
        ev.state = new;
        let report = p.event_mask & EVENT_MASK_EV_DENIED != 0 && old != new;
        for (&qpn, q) in self.qps.iter() {
            if q.ev_profile != pid || q.state == QpState::Reset {
                continue;
            }
            if old != new {
                if let Some(e) = q.engine_qpn() {
                    cx.engine
                        .set_ev_allowed(cx.now_ns, e, idx, new != EvState::Denied);
                }
            }
            if report {
                cx.env.post_event(Event::EvStateChange {
                    qpn,
                    ev_index: idx,
                    old,
                    new,
                });
            }
        }
        OK
    }

    fn replace_ev(&mut self, b: ReplaceEv) -> AdminResult {
        let p = self
            .ev_profiles
            .get(&b.profile.get())
            .ok_or(not_found(off!(ReplaceEv, profile)))?;
        if p.kind != EvProfileKind::Explicit {
            return Err(BAD_STATE);
        }
        let fmt = self.formats.get(&p.format).copied().ok_or(BAD_STATE)?;
        let srv6 = fmt.encoding() == Some(EvFormat::Srv6);
        let carrier_set = b.carrier.iter().any(|x| *x != 0);
        if srv6 != carrier_set {
            return Err(bad_attr(if srv6 {
                off!(ReplaceEv, carrier)
            } else {
                off!(ReplaceEv, value)
            }));
        }
        if srv6 && b.carrier.get(..4) != Some(&fmt.locator_block.get().to_be_bytes()[..]) {
            return Err(bad_attr(off!(ReplaceEv, carrier)));
        }
        if !srv6
            && !(u32::from(fmt.src_port_min.get())..=u32::from(fmt.src_port_max.get()))
                .contains(&b.value.get())
        {
            return Err(bad_attr(off!(ReplaceEv, value)));
        }
        let p = self
            .ev_profiles
            .get_mut(&b.profile.get())
            .ok_or(not_found(off!(ReplaceEv, profile)))?;
        let ev = p
            .evs
            .get_mut(usize::from(b.ev_index.get()))
            .ok_or(bad_attr(off!(ReplaceEv, ev_index)))?;
        ev.value = b.value.get();
        ev.carrier = b.carrier;
        OK
    }

    fn probe_ev<E: AdminEnv, G: QpEngine>(
        &mut self,
        b: ProbeEv,
        cx: &mut Ctx<'_, E, G>,
    ) -> AdminResult {
        let qpn = b.qpn.get();
        let q = self.qps.get(&qpn).ok_or(not_found(off!(ProbeEv, qpn)))?;
        if q.state != QpState::Rts {
            return Err(BAD_STATE);
        }
        let idx = b.ev_index.get();
        let pid = q.ev_profile;
        let engine = q.engine_qpn();
        let probe_id = b.probe_id.get();
        if pid == 0 {
            if u32::from(idx) >= cx.params.max_evs_per_qp {
                return Err(bad_attr(off!(ProbeEv, ev_index)));
            }
        } else {
            let p = self.ev_profiles.get(&pid).ok_or(BAD_STATE)?;
            let ev = p
                .evs
                .get(usize::from(idx))
                .ok_or(bad_attr(off!(ProbeEv, ev_index)))?;
            if ev.state == EvState::Denied {
                // Denied EVs are not sent on, so their probe is lost at once.
                cx.env.post_event(Event::EvProbeResult {
                    qpn,
                    ev_index: idx,
                    probe_id,
                    rtt_ns: 0,
                    replied: false,
                });
                return OK;
            }
        }
        // The engine sends it; the result follows when the reply comes or the timeout passes.
        let timeout_ns = u64::from(b.timeout_us.get()) * 1_000;
        match engine {
            Some(e) if cx.engine.probe_ev(cx.now_ns, e, idx, probe_id, timeout_ns) => OK,
            _ => Err((AdminStatus::Busy, 0)),
        }
    }
}

/// The reply for an engine refusal of a MODIFY_QP: `BAD_ATTRIBUTE` naming the command field
/// the engine's rule is about (`fields` maps engine attributes to their offsets), `BAD_STATE`
/// for a transition the engine does not allow, `NO_RESOURCES` / `INTERNAL` otherwise.
fn engine_refusal(e: QpError, fields: &[(Attr, u32)]) -> Fail {
    let field = |a: Attr| {
        fields
            .iter()
            .find(|f| f.0 == a)
            .map_or((AdminStatus::Internal, 0), |f| bad_attr(f.1))
    };
    let first = |k: usize| {
        fields
            .get(k)
            .map_or((AdminStatus::Internal, 0), |f| bad_attr(f.1))
    };
    match e {
        QpError::BadTransition { .. } | QpError::WrongState { .. } => BAD_STATE,
        QpError::MissingAttr(a) => field(a),
        // The MPR and max-WIMM rules name the first and second field of the step.
        QpError::MprZero | QpError::MprTooLarge { .. } => first(0),
        QpError::MaxWimm { .. } => first(1),
        QpError::Retry(RetryError::RetryCountTooLarge { .. }) => field(Attr::RetryCnt),
        QpError::Retry(_) => field(Attr::Timeout),
        QpError::Ev(_) => field(Attr::EvProfile),
        QpError::Cc(_) | QpError::ZeroWindow => field(Attr::CcProfile),
        QpError::TableFull | QpError::QueueFull => NO_RESOURCES,
        QpError::UnknownQp { .. } | QpError::BadWorkRequest => (AdminStatus::Internal, 0),
    }
}

fn check_format(capabilities: u32, b: &EvFormatProfile) -> Result<(), Fail> {
    let need = match b.encoding() {
        Some(EvFormat::Udp) => caps::EV_UDP,
        Some(EvFormat::Stev) => caps::EV_STEV,
        Some(EvFormat::Srv6) => caps::EV_SRV6,
        None => return Err(bad_attr(off!(EvFormatProfile, encoding))),
    };
    if capabilities & need == 0 {
        return Err(bad_attr(off!(EvFormatProfile, encoding)));
    }
    if b.flags & FMT_USE_SRH != 0 && capabilities & caps::SRH == 0 {
        return Err(bad_attr(off!(EvFormatProfile, flags)));
    }
    if b.flags & FMT_TSX != 0 && capabilities & caps::TSX == 0 {
        return Err(bad_attr(off!(EvFormatProfile, flags)));
    }
    if b.encoding() == Some(EvFormat::Srv6) && b.locator_block.get() == 0 {
        return Err(bad_attr(off!(EvFormatProfile, locator_block)));
    }
    Ok(())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
