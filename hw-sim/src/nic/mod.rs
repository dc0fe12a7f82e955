//! The NIC model: one real `mrc_firmware` [`Engine`] per host, joined to the fabric.
//!
//! # What it does
//! - **Transmit**: packets the engine emits ([`Engine::poll_transmit`]) become fabric
//!   [`Packet`]s with a virtual payload (length + pattern checksum of the PSN). For
//!   [`Transport::Mrc`] the EV picks the route: plane = the EV's plane, uSID path =
//!   `(ev_index / planes) % path_count(src, dst)` (EV `i` sits on
//!   plane `i % planes`, so this spreads each plane's EVs over every path). For [`Transport::Mrc1Ev`] every packet of a QP is pinned
//!   to one plane and one ECMP flow hash (both from a hash of the QP), so it follows one path
//!   that switches may reroute only after reconvergence.
//! - **Side table**: the MRC headers do not travel in the fabric's `Copy` metadata. The fabric
//!   packet carries a tag (`transport_tag`) naming a slot of the sending NIC's side table (a
//!   bounded ring of [`SIDE_SLOTS`] [`TxPacket`]s). A delivery whose slot was overwritten
//!   (the packet outlived `SIDE_SLOTS` later sends of its NIC) is dropped and counted in
//!   [`NicCounters::side_misses`]; it never decodes the wrong headers.
//! - **Receive**: deliveries go to [`Engine::handle_packet`] with the trim and CE state the
//!   fabric left; untrimmed payloads have their checksum checked ([`NicCounters::bad_payload`]).
//! - **Pacing**: the fabric serializes each NIC port at line rate. The NIC pulls packets from
//!   the engine only while its ports hold less than [`PUMP_BACKLOG_PKTS`] full packets per plane
//!   queued (not counting the one on the wire), then wakes when the earliest port finishes.
//! - **Timers**: the engine's next deadline ([`Engine::poll_timeout`]) is an event; stale timer
//!   events are ignored.
//! - **Workload**: one flow per host: `total_bytes` written to one partner in messages of
//!   `msg_bytes`, the send queue kept full; the flow completes at its last send completion.
//! - **Stall**: the longest time the sending QP had data outstanding and its cumulative ACK
//!   point (`una`) did not move.
//!
//! Not modelled (yet): PCIe/DMA timing, the datapath reference models' cycle counts, firmware
//! core cycle costs, RoCE.

use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::engine::cc::NsccParams;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{
    CcProfile, CompletionKind, Engine, EngineConfig, EngineCounters, EvProfile, LocalBuf, QpAttrs,
    QpHint, QpState, RxMeta, RxVerdict, SendWr, TxBody, TxPacket,
};

use crate::core::rng::splitmix64;
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::{Duration, Time, PS_PER_NS};
use crate::fabric::{flags, Ecn, Fabric, Packet, Payload, Route, TransportKind};

pub mod roce;
pub mod spray;

/// The engine each simulated NIC runs: 2 QPs (one sending, one receiving), 256 EVs over up to
/// 4 planes, a 512-PSN window, 32-entry send and receive queues, 4 regions, 8 timers.
pub type SimEngine = Engine<2, 256, 4, 512, 8, 32, 32, 4, 8>;

/// Wire bytes added to every packet's payload (Ethernet + IPv6 + uSID carrier + UDP + MRC
/// headers), an estimate.
pub const HEADER_BYTES: u32 = 96;
/// Side-table slots per NIC (in-flight packets a NIC can have sent and still decode).
pub const SIDE_SLOTS: usize = 8192;
/// Full packets per plane the NIC keeps queued at its ports.
pub const PUMP_BACKLOG_PKTS: u64 = 2;

const REGION_VA: u64 = 0x40_0000_0000;
const REGION_LEN: u64 = 1 << 40;
const RKEY: u32 = 0x200;

/// Event kinds of the NIC component (`data` = host in the low 32 bits).
pub mod ev {
    /// Post the workload and start sending.
    pub const START: u32 = 0;
    /// A port finished serializing: pull more from the engine.
    pub const PUMP: u32 = 1;
    /// The engine's timer deadline (`data` high 32 bits unused; checked against the armed time).
    pub const TIMER: u32 = 2;
}

/// Which transport the NICs run (serde names = report names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// MRC spraying over 256 EVs on every plane (uSID source routes).
    Mrc,
    /// MRC with every packet of a QP pinned to one plane and one ECMP flow hash.
    #[serde(rename = "mrc-1ev")]
    Mrc1Ev,
    /// RoCE: one path per QP by ECMP hash, go-back-N, DCQCN, PFC lossless. Not built yet: a NIC
    /// refuses it with [`NicError::Config`].
    RoceEcmp,
    /// A random EV per packet and no path feedback. Not built yet: a NIC refuses it with
    /// [`NicError::Config`].
    SprayOblivious,
}

impl Transport {
    /// Every transport, in report order.
    pub const ALL: [Transport; 4] = [
        Transport::Mrc,
        Transport::Mrc1Ev,
        Transport::RoceEcmp,
        Transport::SprayOblivious,
    ];

    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Mrc => "mrc",
            Transport::Mrc1Ev => "mrc-1ev",
            Transport::RoceEcmp => "roce-ecmp",
            Transport::SprayOblivious => "spray-oblivious",
        }
    }
}

/// What a NIC needs to know about the run.
#[derive(Clone, Copy, Debug)]
pub struct NicConfig {
    /// Transport.
    pub transport: Transport,
    /// Planes (ports).
    pub planes: u8,
    /// Rate of one port (bits per second).
    pub port_bps: u64,
    /// Payload bytes per full packet.
    pub mtu_payload: u32,
    /// Unloaded round trip (for congestion control).
    pub base_rtt: Duration,
    /// Bytes the flow writes.
    pub total_bytes: u64,
    /// Bytes per message.
    pub msg_bytes: u32,
    /// Engine loss inference: a SACK hole is a loss after this many later transmissions are
    /// acknowledged ([`EngineConfig::reorder_tx`]).
    pub reorder_tx: u32,
    /// Engine ACK timeout exponent (`1.024 us * 2^t`).
    pub timeout_exp: u8,
    /// Retries before the engine gives up.
    pub retry_cnt: u8,
    /// Seed (mixed into the 1-EV flow hash).
    pub seed: u64,
}

/// Per-NIC counters of the model itself (the engine has its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicCounters {
    /// Packets handed to the fabric.
    pub tx_packets: u64,
    /// Packets received from the fabric.
    pub rx_packets: u64,
    /// Deliveries whose side-table slot had been reused (dropped).
    pub side_misses: u64,
    /// Untrimmed payloads whose checksum failed (dropped).
    pub bad_payload: u64,
    /// Packets the fabric refused (unknown host or plane): a model bug if non-zero.
    pub inject_errors: u64,
    /// Send completions with an error status.
    pub completion_errors: u64,
    /// EV state changes the engine reported (retire, deny, recover...).
    pub ev_state_changes: u64,
    /// Payload bytes the engine told this NIC to place (as a receiver).
    pub placed_bytes: u64,
}

/// Why a NIC could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicError {
    /// The engine refused its configuration, a QP, a region or a QP transition.
    Engine(&'static str),
    /// A configuration value out of range.
    Config(&'static str),
}

impl core::fmt::Display for NicError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NicError::Engine(w) => write!(f, "engine refused {w}"),
            NicError::Config(w) => write!(f, "nic config: {w}"),
        }
    }
}

impl std::error::Error for NicError {}

#[derive(Clone, Copy)]
struct Side {
    tag: u64,
    pkt: Option<TxPacket>,
}

/// One host's NIC.
pub struct Nic {
    host: u32,
    cfg: NicConfig,
    engine: Box<SimEngine>,
    send_qp: u32,
    recv_qp: u32,
    /// Host the send QP writes to.
    send_peer: u32,
    /// Host whose send QP writes to our receive QP.
    recv_peer: u32,
    side: Box<[Side]>,
    next_tag: u64,
    timer_armed: Option<u64>,
    pump_armed: bool,
    flow_hash: u64,
    posted_bytes: u64,
    next_wr: u64,
    completed_bytes: u64,
    done_at: Option<Time>,
    last_una: u32,
    last_progress: Time,
    max_stall: Duration,
    counters: NicCounters,
}

fn ns(t: Time) -> u64 {
    t.as_ps() / PS_PER_NS
}

impl Nic {
    /// Builds `host`'s NIC: engine, the send QP toward `send_peer` and the receive QP for
    /// `recv_peer`, already connected to `qpns` = (peer's receive QPN, recv_peer's send QPN).
    /// Every NIC creates its send QP first and its receive QP second, so QPNs are the same on
    /// every NIC and can be wired before the peers exist.
    ///
    /// # Errors
    /// [`NicError`] when the engine refuses the setup.
    pub fn new(host: u32, send_peer: u32, recv_peer: u32, cfg: NicConfig) -> Result<Nic, NicError> {
        if cfg.planes == 0 || cfg.planes > 4 {
            return Err(NicError::Config("planes must be 1..=4"));
        }
        if matches!(
            cfg.transport,
            Transport::RoceEcmp | Transport::SprayOblivious
        ) {
            return Err(NicError::Config("transport not built yet"));
        }
        if cfg.msg_bytes == 0 {
            return Err(NicError::Config("msg_bytes must be > 0"));
        }
        let ecfg = EngineConfig {
            mtu_payload: cfg.mtu_payload,
            reorder_tx: cfg.reorder_tx,
            ..EngineConfig::default()
        };
        let mut engine =
            Box::new(SimEngine::new(ecfg).map_err(|_| NicError::Engine("engine config"))?);
        let send_qp = engine
            .create_qp()
            .map_err(|_| NicError::Engine("send QP"))?;
        let recv_qp = engine
            .create_qp()
            .map_err(|_| NicError::Engine("recv QP"))?;
        engine
            .register_region(MemRegion {
                rkey: RKEY,
                base_va: REGION_VA,
                length: REGION_LEN,
                access: Access::REMOTE_WRITE,
            })
            .map_err(|_| NicError::Engine("region"))?;
        let nic_bps = cfg.port_bps.saturating_mul(u64::from(cfg.planes));
        let rtt_ns = (cfg.base_rtt.as_ps() / PS_PER_NS).max(1);
        let nscc = NsccParams::for_link(nic_bps, rtt_ns, cfg.mtu_payload)
            .map_err(|_| NicError::Engine("NSCC parameters"))?;
        // Same QPN layout on every NIC: the peer's receive QP is `recv_qp`, its send QP `send_qp`.
        for (qpn, dest) in [(send_qp, recv_qp), (recv_qp, send_qp)] {
            let attrs = qp_attrs(&cfg, nscc, dest);
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                engine
                    .modify_qp(qpn, s, &attrs, 0)
                    .map_err(|_| NicError::Engine("QP transition"))?;
            }
        }
        let mut h = cfg.seed ^ (u64::from(host) << 32) ^ u64::from(send_peer);
        let flow_hash = splitmix64(&mut h);
        Ok(Nic {
            host,
            cfg,
            engine,
            send_qp,
            recv_qp,
            send_peer,
            recv_peer,
            side: vec![Side { tag: 0, pkt: None }; SIDE_SLOTS].into_boxed_slice(),
            next_tag: 1,
            timer_armed: None,
            pump_armed: false,
            flow_hash,
            posted_bytes: 0,
            next_wr: 0,
            completed_bytes: 0,
            done_at: if cfg.total_bytes == 0 {
                Some(Time::ZERO)
            } else {
                None
            },
            last_una: 0,
            last_progress: Time::ZERO,
            max_stall: Duration::ZERO,
            counters: NicCounters::default(),
        })
    }

    /// The host.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// When the flow's last byte was acknowledged (None while running or failed).
    pub fn done_at(&self) -> Option<Time> {
        self.done_at
    }

    /// True when a send completed in error (the flow cannot finish).
    pub fn failed(&self) -> bool {
        self.counters.completion_errors > 0
    }

    /// Bytes of the flow acknowledged so far.
    pub fn completed_bytes(&self) -> u64 {
        self.completed_bytes
    }

    /// Longest stall of the sending QP.
    pub fn max_stall(&self) -> Duration {
        self.max_stall
    }

    /// The model's counters.
    pub fn counters(&self) -> NicCounters {
        self.counters
    }

    /// The sending QP's state: (QP state, `una`, `nxt`, bytes in flight, work requests queued).
    pub fn sender_state(&self) -> Option<(QpState, u32, u32, u64, usize)> {
        let q = self.engine.qp(self.send_qp)?;
        let r = q.requester()?;
        Some((
            self.engine.qp_state(self.send_qp)?,
            r.una().value(),
            r.nxt().value(),
            r.inflight_bytes(),
            r.queued(),
        ))
    }

    /// When the sending QP's cumulative ACK point last moved (or it had nothing outstanding).
    pub fn last_progress(&self) -> Time {
        self.last_progress
    }

    /// Hosts the send QP writes to and the receive QP hears from.
    pub fn peers(&self) -> (u32, u32) {
        (self.send_peer, self.recv_peer)
    }

    /// The sending QP's requester counters (zero if the QP is gone).
    pub fn requester_counters(&self) -> mrc_firmware::engine::RequesterCounters {
        self.engine
            .qp(self.send_qp)
            .and_then(|q| q.requester())
            .map(|r| r.counters())
            .unwrap_or_default()
    }

    /// The engine (read-only: QP, EV table and congestion state for diagnostics).
    pub fn engine(&self) -> &SimEngine {
        &self.engine
    }

    /// The sending QP's number (the same on every NIC).
    pub fn send_qpn(&self) -> u32 {
        self.send_qp
    }

    /// The engine's counters.
    pub fn engine_counters(&self) -> EngineCounters {
        self.engine.counters()
    }

    /// The headers of a packet this NIC sent with `tag`, if its slot still holds it.
    pub fn side_lookup(&self, tag: u64) -> Option<TxPacket> {
        let s = &self.side[(tag % SIDE_SLOTS as u64) as usize];
        if s.tag == tag {
            s.pkt
        } else {
            None
        }
    }

    /// [`ev::START`]: post the workload and start sending.
    pub fn start(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        self.last_progress = now;
        self.service(now, fab, s, me);
    }

    /// [`ev::PUMP`]: a port freed up.
    pub fn on_pump(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        self.pump_armed = false;
        self.service(now, fab, s, me);
    }

    /// [`ev::TIMER`] at `now`: fires the engine's timers when this is the armed deadline.
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
        self.engine.handle_timeout(ns(now));
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
        let Some(tx) = hdr else {
            self.counters.side_misses += 1;
            return;
        };
        let trimmed = pkt.is_trimmed();
        if !trimmed && !pkt.payload.verify() {
            self.counters.bad_payload += 1;
            return;
        }
        let mut repr = tx.to_repr();
        repr.mrh.trimmed = trimmed;
        let meta = RxMeta {
            payload_len: if trimmed { 0 } else { pkt.payload.len },
            ce: pkt.ecn == Ecn::Ce,
        };
        if let RxVerdict::Place { len, .. } = self.engine.handle_packet(ns(now), &repr, meta) {
            self.counters.placed_bytes += u64::from(len);
        }
        self.service(now, fab, s, me);
    }

    /// After any engine input: completions, posting, transmit, timer, stall bookkeeping.
    fn service(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        while self.engine.poll_ev_event().is_some() {
            self.counters.ev_state_changes += 1;
        }
        while let Some(c) = self.engine.poll_completion() {
            if c.qpn != self.send_qp || c.kind != CompletionKind::Send {
                continue;
            }
            if c.status.is_err() {
                self.counters.completion_errors += 1;
                continue;
            }
            self.completed_bytes += u64::from(self.msg_len(c.wr_id));
            if self.completed_bytes >= self.cfg.total_bytes && self.done_at.is_none() {
                self.done_at = Some(now);
            }
        }
        self.post(now);
        self.pump(now, fab, s, me);
        self.track_stall(now);
        self.arm_timer(s, me);
    }

    fn msg_len(&self, wr: u64) -> u32 {
        let off = wr.saturating_mul(u64::from(self.cfg.msg_bytes));
        self.cfg
            .total_bytes
            .saturating_sub(off)
            .min(u64::from(self.cfg.msg_bytes)) as u32
    }

    fn post(&mut self, _now: Time) {
        while self.posted_bytes < self.cfg.total_bytes {
            let len = self.msg_len(self.next_wr);
            let wr = SendWr {
                wr_id: self.next_wr,
                local: LocalBuf::default(),
                remote_va: REGION_VA + self.posted_bytes % (REGION_LEN / 2),
                rkey: RKEY,
                len,
                imm: None,
                signaled: true,
            };
            if self.engine.post_send(self.send_qp, wr).is_err() {
                break; // send queue full: retried after the next completion
            }
            self.posted_bytes += u64::from(len);
            self.next_wr += 1;
        }
    }

    fn pump(&mut self, now: Time, fab: &mut Fabric, s: &mut Scheduler<'_>, me: ComponentId) {
        let planes = u32::from(self.cfg.planes);
        let full = u64::from(self.cfg.mtu_payload + HEADER_BYTES);
        let limit = PUMP_BACKLOG_PKTS * full * u64::from(planes);
        let mut ports = [crate::fabric::PortId(0); 4];
        for (p, port) in ports.iter_mut().enumerate().take(planes as usize) {
            *port = fab.topology().host_port(self.host, p as u32);
        }
        let ports = &ports[..planes as usize];
        loop {
            let backlog: u64 = ports
                .iter()
                .map(|p| {
                    let (d, h) = fab.queue_bytes(*p);
                    d + h
                })
                .sum();
            if backlog >= limit {
                if !self.pump_armed {
                    let wake = ports
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
            let Some(tx) = self.engine.poll_transmit(ns(now)) else {
                return;
            };
            self.send(tx, fab, s);
        }
    }

    fn send(&mut self, tx: TxPacket, fab: &mut Fabric, s: &mut Scheduler<'_>) {
        let dst = if tx.src_qpn == self.send_qp {
            self.send_peer
        } else if tx.src_qpn == self.recv_qp {
            self.recv_peer
        } else {
            self.counters.inject_errors += 1;
            return;
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        self.side[(tag % SIDE_SLOTS as u64) as usize] = Side { tag, pkt: Some(tx) };
        let len = tx.payload_len();
        let (plane, route) = match self.cfg.transport {
            Transport::Mrc => {
                let topo = fab.topology();
                let n = topo.path_count(self.host, dst).max(1);
                // EV `i` is on plane `i % planes`: spread each plane's EVs over every path.
                let path = u32::from(tx.evx.ev_index) / u32::from(self.cfg.planes) % n;
                match topo.usid_route(self.host, dst, path) {
                    Ok(r) => (u32::from(tx.evx.plane), Route::Usid(r)),
                    Err(_) => {
                        self.counters.inject_errors += 1;
                        return;
                    }
                }
            }
            Transport::Mrc1Ev | Transport::RoceEcmp | Transport::SprayOblivious => {
                // One flow hash per direction of the connection.
                let h = self.flow_hash ^ u64::from(tx.src_qpn);
                (
                    (h >> 56) as u32 % u32::from(self.cfg.planes),
                    Route::Ecmp { hash: h },
                )
            }
        };
        let control = !matches!(tx.body, TxBody::Write { .. });
        let pkt = Packet {
            src: self.host,
            dst,
            size_bytes: HEADER_BYTES + len,
            payload: Payload::new(len, tx.psn.value()),
            transport_tag: tag,
            route,
            plane: plane as u8,
            kind: TransportKind::Mrc,
            ecn: Ecn::Ect,
            flags: if control { flags::PRIORITY } else { 0 },
        };
        match fab.inject(s, self.host, plane, pkt) {
            Ok(()) => self.counters.tx_packets += 1,
            Err(_) => self.counters.inject_errors += 1,
        }
    }

    fn track_stall(&mut self, now: Time) {
        let Some(r) = self.engine.qp(self.send_qp).and_then(|q| q.requester()) else {
            return;
        };
        let una = r.una().value();
        let outstanding = r.inflight_bytes() > 0 || r.queued() > 0;
        if una != self.last_una || !outstanding {
            self.last_una = una;
            self.last_progress = now;
        } else {
            let st = now.duration_since(self.last_progress);
            if st > self.max_stall {
                self.max_stall = st;
            }
        }
    }

    fn arm_timer(&mut self, s: &mut Scheduler<'_>, me: ComponentId) {
        let Some(t) = self.engine.poll_timeout() else {
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

fn qp_attrs(cfg: &NicConfig, nscc: NsccParams, dest: u32) -> QpAttrs {
    let mut table = EvConfig::new(256, cfg.planes);
    table.probe_base_ns = 20_000;
    QpAttrs {
        hint: Some(QpHint::default()),
        ev_profile: Some(EvProfile {
            table,
            format: EvFormat::Srv6,
            value_base: 0xC000,
        }),
        cc_profile: Some(CcProfile::Nscc(nscc)),
        dest_qpn: Some(dest),
        rq_psn: Some(Psn::new(0)),
        responder_mpr: Some(4),
        dynamic_mpr: Some(false),
        responder_max_wimm: Some(8),
        sq_psn: Some(Psn::new(0)),
        requester_mpr: Some(4),
        requester_max_wimm: Some(8),
        retry_cnt: Some(cfg.retry_cnt),
        timeout: Some(cfg.timeout_exp),
    }
}
