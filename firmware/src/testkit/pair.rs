//! [`Pair`]: two NICs (datapath stage and firmware engine each), one connected QP on each, over
//! a [`Channel`], with real payload bytes in small fixed memories, a seeded workload in both
//! directions and a checker.
//!
//! The harness runs the NICs until every posted message completed, jumping virtual time to
//! the next event (a channel delivery, an engine timeout, a plane outage edge) whenever nothing
//! else can happen. It checks **safety** as it goes — send completions in posting order and
//! successful, immediate completions in posting order with the right immediate and with every
//! byte of their message already in place, every destination byte written exactly once — and
//! **liveness** at the end: everything completed before `max_time_ns`. The first violation is
//! returned as a [`Failure`] (with the time), never a panic, so a caller can print the seed.
//!
//! Memory layout of each NIC (`MEM` bytes): the first half is the source area (payload of
//! the messages it sends, seeded bytes), the second half the destination area, registered as one
//! region that the peer writes into.

use heapless::Vec;
use mrc_abi::wire::mrc::MrcPacket;
use mrc_abi::wire::MrcRepr;

use super::channel::{Channel, ChannelConfig, ChannelCounters};
use super::nic::{Firmware, HostWrite, Nic};
use super::TestKit;
use crate::datapath::packet::{LocalBuf, Packet, RxVerdict, SendWr};
use crate::datapath::placement::{Access, MemRegion};
use crate::datapath::stage::{DatapathConfig, DatapathCounters};
use crate::engine::cc::NsccParams;
use crate::engine::ev_state::EvConfig;
use crate::engine::qp::{CcProfile, EvProfile, QpAttrs, QpState};
use crate::engine::rng::Rng;
use crate::engine::{
    Completion, CompletionError, CompletionKind, Engine, EngineConfig, EngineCounters,
};
use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;

/// Bytes of memory per NIC.
pub const MEM: usize = 16 * 1024;
const HALF: usize = MEM / 2;
/// Most messages per direction.
pub const MAX_MSGS: usize = 32;
/// Channel FIFO capacity.
pub const CHANNEL_CAP: usize = 512;
/// Base virtual address of every NIC's destination region.
pub const DST_VA: u64 = 0x10_0000_0000;

/// One run's setup.
#[derive(Clone, Copy, Debug)]
pub struct PairConfig {
    pub seed: u64,
    pub channel: ChannelConfig,
    pub datapath: DatapathConfig,
    pub engine: EngineConfig,
    /// EVs per QP (at most 256) and planes (at most 4).
    pub evs: u16,
    pub planes: u8,
    /// Messages per direction per wave (at most [`MAX_MSGS`]; fewer if the memory runs out).
    pub messages: usize,
    /// Waves: each posts a fresh workload once the previous one completed and was checked.
    pub waves: u32,
    /// Largest message length.
    pub max_len: u32,
    /// Chance a message carries an immediate, ppm.
    pub imm_ppm: u32,
    /// Chance a message is unsignaled, ppm.
    pub unsignaled_ppm: u32,
    /// Encode every packet with `mrc_abi::wire` and parse it back.
    pub wire_bytes: bool,
    /// Give up (liveness failure) after this much virtual time.
    pub max_time_ns: u64,
    pub retry_cnt: u8,
    pub timeout_exp: u8,
    pub mpr: u16,
    pub max_wimm: u16,
    /// Congestion control: NSCC (for a 100 Gb/s link) instead of a fixed 64-packet window.
    pub nscc: bool,
    /// The plane outage (`channel.plane_outage`) starts at the first moment at or after its
    /// configured start when a packet is in flight on that plane, for the configured
    /// duration, so it always catches traffic (a run has idle gaps, waiting on timeouts,
    /// where a fixed start catches nothing). The outage as it happened is in the report.
    pub outage_under_traffic: bool,
}

impl PairConfig {
    /// A lossy, reordering, trimming, duplicating channel with a blackholed EV and a plane
    /// outage, all drawn from `seed`.
    pub fn chaos(seed: u64) -> Self {
        let mut r = Rng::new(seed ^ 0x5eed);
        let planes = 4;
        let outage_start = 2_000 + r.below(30_000);
        PairConfig {
            seed,
            channel: ChannelConfig {
                latency_ns: 1_000 + r.below(3_000),
                loss_ppm: r.below(30_000) as u32,
                dup_ppm: r.below(20_000) as u32,
                trim_ppm: r.below(30_000) as u32,
                trim_last_hop_ppm: 500_000,
                ce_ppm: r.below(50_000) as u32,
                reorder_ppm: r.below(100_000) as u32,
                reorder_extra_ns: 1 + r.below(3_000),
                blackhole_ev: Some(r.below(256) as u16),
                plane_outage: Some((
                    r.below(u64::from(planes)) as u8,
                    outage_start,
                    outage_start + 10_000 + r.below(200_000),
                )),
                path_outage: None,
            },
            datapath: DatapathConfig {
                mtu_payload: 128,
                ..DatapathConfig::DEFAULT
            },
            engine: EngineConfig::default(),
            evs: 256,
            planes,
            messages: 8 + r.below(24) as usize,
            waves: 4 + r.below(12) as u32,
            max_len: 1 + r.below(900) as u32,
            imm_ppm: 400_000,
            unsignaled_ppm: 200_000,
            wire_bytes: true,
            max_time_ns: 2_000_000_000,
            retry_cnt: 25,
            timeout_exp: 7,
            mpr: 4,
            max_wimm: 8,
            nscc: false,
            outage_under_traffic: false,
        }
    }
}

/// What went wrong, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A completion with an error status.
    ErrorCompletion {
        nic: u8,
        now_ns: u64,
        wr_id: u64,
        status: CompletionError,
    },
    /// A send completion out of posting order (or a duplicate).
    SendOrder {
        nic: u8,
        now_ns: u64,
        wr_id: u64,
        expected: Option<u64>,
    },
    /// An immediate completion out of order, duplicated or with the wrong immediate.
    ImmOrder {
        nic: u8,
        now_ns: u64,
        imm: u32,
        expected: Option<u32>,
    },
    /// An immediate completed before every byte of its message was in place.
    ImmBeforeData { nic: u8, now_ns: u64, msg: usize },
    /// A destination byte differs from its source at the end.
    Bytes { nic: u8, offset: usize },
    /// A destination byte was written `count` times (must be exactly once inside a message,
    /// never outside).
    WriteCount { nic: u8, offset: usize, count: u8 },
    /// A packet did not survive the wire codec round trip.
    Wire { now_ns: u64 },
    /// Nothing left to happen, yet not everything completed.
    Stuck { now_ns: u64 },
    /// Not everything completed in time.
    Liveness { now_ns: u64 },
    /// Setup was refused (a bug in the harness or the engine's attribute rules).
    Setup,
}

#[derive(Clone, Copy, Debug)]
struct Msg {
    wr_id: u64,
    src: usize,
    dst: usize,
    len: usize,
    imm: Option<u32>,
    signaled: bool,
}

/// One host: its NIC, memory and per-byte write counts.
pub struct Host<F: Firmware<TestKit> = Engine<TestKit>> {
    pub nic: Nic<TestKit, F>,
    pub mem: [u8; MEM],
    pub writes: [u8; MEM],
    pub qpn: u32,
}

/// Run totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub end_ns: u64,
    pub messages: usize,
    pub completions: u64,
    pub ev_events: u64,
    pub channel: ChannelCounters,
    pub datapaths: [DatapathCounters; 2],
    pub engines: [EngineCounters; 2],
    /// The plane outage `(plane, down_ns, up_ns)` as it happened (see
    /// [`PairConfig::outage_under_traffic`]).
    pub plane_outage: Option<(u8, u64, u64)>,
}

/// Two NICs over a channel. `PB` bytes of payload travel with each packet (`0`: virtual).
/// Each NIC's firmware is the engine unless made otherwise ([`Pair::with_firmware`]).
pub struct Pair<const PB: usize, F: Firmware<TestKit> = Engine<TestKit>> {
    pub cfg: PairConfig,
    pub nics: [Host<F>; 2],
    pub channel: Channel<CHANNEL_CAP, PB>,
    pub now_ns: u64,
    msgs: [Vec<Msg, MAX_MSGS>; 2],
    next_send: [usize; 2],
    next_imm: [usize; 2],
    done_sends: [usize; 2],
    plane_state: u8,
    ev_events: u64,
    completions: u64,
    wave: u32,
    messages_total: usize,
    rng: Rng,
}

fn qp_attrs(cfg: &PairConfig, dest_qpn: u32) -> QpAttrs {
    let mut table = EvConfig::new(cfg.evs, cfg.planes);
    table.probe_base_ns = 20_000;
    table.probe_cap_ns = 2_000_000;
    let ev = EvProfile {
        table,
        format: EvFormat::Udp,
        value_base: 0xC000,
    };
    let cc = match NsccParams::for_link(
        100_000_000_000,
        2 * cfg.channel.latency_ns + 1_000,
        cfg.datapath.mtu_payload,
    ) {
        Ok(p) if cfg.nscc => CcProfile::Nscc(p),
        _ => CcProfile::Fixed {
            cwnd_bytes: 64 * u64::from(cfg.datapath.mtu_payload),
        },
    };
    // PSNs start just below the 24-bit wrap, so every run crosses it.
    let start = Psn::new(0x00ff_ff00);
    QpAttrs::connect(ev, cc, dest_qpn)
        .psns(start, start)
        .window(cfg.mpr, cfg.max_wimm)
        .retry(cfg.retry_cnt, cfg.timeout_exp)
}

impl<const PB: usize> Pair<PB> {
    /// Build both NICs, connect their QPs, generate and post the workload.
    ///
    /// # Errors
    /// [`Failure::Setup`] when the engine refuses the setup.
    pub fn new(cfg: PairConfig) -> Result<Self, Failure> {
        Self::with_firmware(cfg, || Engine::new(cfg.engine).ok())
    }
}

impl<const PB: usize, F: Firmware<TestKit>> Pair<PB, F> {
    /// As [`Pair::new`], with each NIC's firmware made by `firmware` (called once per NIC;
    /// its engine must have no QP and `cfg.engine`'s configuration).
    ///
    /// # Errors
    /// [`Failure::Setup`] when `firmware` gives none or the engine refuses the setup.
    pub fn with_firmware(
        cfg: PairConfig,
        mut firmware: impl FnMut() -> Option<F>,
    ) -> Result<Self, Failure> {
        let mut mk = || -> Result<Host<F>, Failure> {
            let fw = firmware().ok_or(Failure::Setup)?;
            let mut nic = Nic::with_firmware(cfg.datapath, fw);
            let qpn = nic.create_qp().map_err(|_| Failure::Setup)?;
            Ok(Host {
                nic,
                mem: [0; MEM],
                writes: [0; MEM],
                qpn,
            })
        };
        let mut pair = Pair {
            cfg,
            nics: [mk()?, mk()?],
            channel: Channel::new(cfg.channel, cfg.seed.wrapping_mul(0x9e37_79b9)),
            now_ns: 0,
            msgs: [Vec::new(), Vec::new()],
            next_send: [0; 2],
            next_imm: [0; 2],
            done_sends: [0; 2],
            plane_state: 0,
            ev_events: 0,
            completions: 0,
            wave: 0,
            messages_total: 0,
            rng: Rng::new(cfg.seed),
        };
        for n in 0..2 {
            let peer = pair.nics[1 - n].qpn;
            let a = qp_attrs(&cfg, peer);
            let h = &mut pair.nics[n];
            let e = &mut h.nic;
            e.register_region(MemRegion {
                rkey: 0x100,
                base_va: DST_VA,
                length: HALF as u64,
                access: Access::REMOTE_WRITE,
            })
            .map_err(|_| Failure::Setup)?;
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                e.modify_qp(h.qpn, s, &a, 0).map_err(|_| Failure::Setup)?;
            }
            // The stage's QP context follows before anything is posted.
            e.pump(0, &mut |_| {});
        }
        pair.post_wave()?;
        Ok(pair)
    }

    /// Reset the checker and post a fresh workload in both directions.
    fn post_wave(&mut self) -> Result<(), Failure> {
        for nic in self.nics.iter_mut() {
            for b in nic.mem.iter_mut() {
                *b = self.rng.next_u32() as u8;
            }
            nic.writes = [0; MEM];
        }
        self.msgs = [Vec::new(), Vec::new()];
        self.next_send = [0; 2];
        self.next_imm = [0; 2];
        self.done_sends = [0; 2];
        for d in 0..2 {
            let (mut src, mut dst) = (0usize, 0usize);
            for i in 0..self.cfg.messages.min(MAX_MSGS) {
                let len = self.rng.below(u64::from(self.cfg.max_len) + 1) as usize;
                if src + len > HALF || dst + len > HALF {
                    break;
                }
                let m = Msg {
                    wr_id: u64::from(self.wave) << 40 | (d as u64) << 32 | i as u64,
                    src,
                    dst,
                    len,
                    imm: self
                        .rng
                        .chance_ppm(self.cfg.imm_ppm)
                        .then(|| self.rng.next_u32()),
                    signaled: !self.rng.chance_ppm(self.cfg.unsignaled_ppm),
                };
                src += len;
                dst += len;
                let _ = self.msgs[d].push(m);
            }
            for m in self.msgs[d].clone().iter() {
                self.messages_total += 1;
                let (sq, rq) = (d, 1 - d);
                if m.imm.is_some() {
                    let r = &mut self.nics[rq];
                    r.nic
                        .post_recv(r.qpn, m.wr_id)
                        .map_err(|_| Failure::Setup)?;
                }
                let s = &mut self.nics[sq];
                let wr = SendWr {
                    wr_id: m.wr_id,
                    local: LocalBuf {
                        handle: 0,
                        offset: m.src as u64,
                    },
                    remote_va: DST_VA + m.dst as u64,
                    rkey: 0x100,
                    len: m.len as u32,
                    imm: m.imm,
                    signaled: m.signaled,
                };
                s.nic.post_send(s.qpn, wr).map_err(|_| Failure::Setup)?;
            }
        }
        Ok(())
    }

    fn all_done(&self) -> bool {
        (0..2).all(|d| {
            let nic = &self.nics[d];
            // Unsignaled messages complete silently: the send queue must be empty.
            let sq_empty = nic.nic.dp.qp(nic.qpn).is_some_and(|q| q.sq_queued == 0);
            sq_empty
                && self.done_sends[d] == self.msgs[d].iter().filter(|m| m.signaled).count()
                && self.next_imm[1 - d] == self.msgs[d].iter().filter(|m| m.imm.is_some()).count()
        })
    }

    /// Run to completion (or the first failure).
    ///
    /// # Errors
    /// The first [`Failure`].
    pub fn run(&mut self) -> Result<Report, Failure> {
        loop {
            let mut progress = self.transmit_all()?;
            progress |= self.deliver_due()?;
            progress |= self.drain_outputs()?;
            if self.all_done() {
                self.final_check()?;
                self.wave += 1;
                if self.wave >= self.cfg.waves.max(1) {
                    return Ok(self.report());
                }
                self.post_wave()?;
                continue;
            }
            for n in self.nics.iter_mut() {
                n.nic.handle_timeout(self.now_ns);
            }
            // A timeout may have queued retransmissions (and freed window): send them now,
            // as a NIC does, instead of waiting for the next unrelated event.
            progress |= self.drain_outputs()?;
            progress |= self.transmit_all()?;
            if progress {
                continue;
            }
            let next = [
                self.channel.next_due(),
                self.nics[0].nic.poll_timeout(),
                self.nics[1].nic.poll_timeout(),
                self.next_plane_edge(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                None => {
                    return Err(Failure::Stuck {
                        now_ns: self.now_ns,
                    })
                }
                // (a deadline not after now that did nothing is an early one of the stage's
                // coalescing timer, recomputed by the timeout call above)
                Some(t) => self.now_ns = self.now_ns.max(t).max(self.now_ns + 1),
            }
            if self.now_ns > self.cfg.max_time_ns {
                return Err(Failure::Liveness {
                    now_ns: self.now_ns,
                });
            }
            self.plane_edges();
        }
    }

    fn next_plane_edge(&self) -> Option<u64> {
        let (_, down, up) = self.channel.config().plane_outage?;
        match self.plane_state {
            // (waiting for traffic on the plane: the edge comes with the next packet)
            0 if self.cfg.outage_under_traffic && self.now_ns >= down => None,
            0 => Some(down),
            1 => Some(up),
            _ => None,
        }
    }

    fn plane_edges(&mut self) {
        let Some((plane, down, up)) = self.channel.config().plane_outage else {
            return;
        };
        if self.plane_state == 0 && self.now_ns >= down {
            if self.cfg.outage_under_traffic {
                if !self.channel.in_flight_on_plane(plane) {
                    return;
                }
                let up = self.now_ns.saturating_add(up.saturating_sub(down));
                self.channel
                    .set_plane_outage(Some((plane, self.now_ns, up)));
            }
            self.plane_state = 1;
            for n in self.nics.iter_mut() {
                n.nic.fw.engine_mut().handle_plane_down(self.now_ns, plane);
            }
        }
        let up = self.channel.config().plane_outage.map_or(up, |o| o.2);
        if self.plane_state == 1 && self.now_ns >= up {
            self.plane_state = 2;
            for n in self.nics.iter_mut() {
                n.nic.fw.engine_mut().handle_plane_up(self.now_ns, plane);
            }
        }
    }

    fn transmit_all(&mut self) -> Result<bool, Failure> {
        let mut any = false;
        let mut out = [Packet::FILL; 16];
        for n in 0..2 {
            for _ in 0..256 {
                let mut writes = Writes::new();
                let k = self.nics[n]
                    .nic
                    .transmit(self.now_ns, &mut out, &mut |w| writes.push(w));
                self.take_writes(n, &writes)?;
                for p in &out[..k] {
                    any = true;
                    let len = p.dma_len() as usize;
                    let off = p.local().map_or(0, |l| l.offset as usize);
                    let payload = if PB > 0 {
                        self.nics[n].mem.get(off..off + len).unwrap_or(&[])
                    } else {
                        &[]
                    };
                    self.channel.send(self.now_ns, 1 - n as u8, *p, payload);
                }
                if k < out.len() {
                    break;
                }
            }
        }
        Ok(any)
    }

    fn deliver_due(&mut self) -> Result<bool, Failure> {
        let mut any = false;
        for _ in 0..8192 {
            let Some(f) = self.channel.pop_due(self.now_ns) else {
                break;
            };
            any = true;
            let to = usize::from(f.to & 1);
            let payload = f.payload.get(..f.pkt.payload_len as usize).unwrap_or(&[]);
            let pkt = if self.cfg.wire_bytes {
                let repr =
                    wire_round_trip::<PB>(&f.pkt.to_repr(), payload).ok_or(Failure::Wire {
                        now_ns: self.now_ns,
                    })?;
                Packet::from_repr(&repr, f.pkt.payload_len, f.pkt.ce)
            } else {
                f.pkt
            };
            let mut v = [RxVerdict::Consumed];
            let mut writes = Writes::new();
            self.nics[to]
                .nic
                .receive(self.now_ns, core::slice::from_ref(&pkt), &mut v, &mut |w| {
                    writes.push(w)
                });
            let host = &mut self.nics[to];
            if let RxVerdict::Place { offset, len, .. } = v[0] {
                let at = HALF + offset as usize;
                let len = len as usize;
                if PB > 0 {
                    if let (Some(dst), Some(src)) =
                        (host.mem.get_mut(at..at + len), payload.get(..len))
                    {
                        dst.copy_from_slice(src);
                    }
                }
                if let Some(w) = host.writes.get_mut(at..at + len) {
                    for c in w {
                        *c = c.saturating_add(1);
                    }
                }
            }
            self.take_writes(to, &writes)?;
        }
        Ok(any)
    }

    fn drain_outputs(&mut self) -> Result<bool, Failure> {
        let mut any = false;
        for n in 0..2 {
            let mut writes = Writes::new();
            any |= self.nics[n].nic.pump(self.now_ns, &mut |w| writes.push(w));
            self.take_writes(n, &writes)?;
        }
        Ok(any)
    }

    /// Check what NIC `n` wrote for its host.
    fn take_writes(&mut self, n: usize, writes: &Writes) -> Result<(), Failure> {
        if writes.overflow {
            return Err(Failure::Setup);
        }
        for w in writes.list.iter() {
            match w {
                HostWrite::Completion(c) => {
                    self.completions += 1;
                    self.check_completion(n, c)?;
                }
                HostWrite::EvEvent { .. } => self.ev_events += 1,
                HostWrite::Other(_) => {}
            }
        }
        Ok(())
    }

    fn check_completion(&mut self, n: usize, c: &Completion) -> Result<(), Failure> {
        let (nic, now_ns) = (n as u8, self.now_ns);
        if let Err(status) = c.status {
            return Err(Failure::ErrorCompletion {
                nic,
                now_ns,
                wr_id: c.wr_id,
                status,
            });
        }
        match c.kind {
            CompletionKind::Send => {
                // Sends from NIC n are direction n.
                let msgs = &self.msgs[n];
                let mut i = self.next_send[n];
                while msgs.get(i).is_some_and(|m| !m.signaled) {
                    i += 1;
                }
                let expected = msgs.get(i).map(|m| m.wr_id);
                if expected != Some(c.wr_id) {
                    return Err(Failure::SendOrder {
                        nic,
                        now_ns,
                        wr_id: c.wr_id,
                        expected,
                    });
                }
                self.next_send[n] = i + 1;
                self.done_sends[n] += 1;
            }
            CompletionKind::RecvImm { imm, .. } => {
                // Immediates at NIC n come from direction 1 - n.
                let d = 1 - n;
                let imms: Vec<(usize, Msg), MAX_MSGS> = self.msgs[d]
                    .iter()
                    .copied()
                    .enumerate()
                    .filter(|(_, m)| m.imm.is_some())
                    .collect();
                let k = self.next_imm[n];
                let expected = imms.get(k).and_then(|(_, m)| m.imm);
                let Some((idx, m)) = imms.get(k).copied() else {
                    return Err(Failure::ImmOrder {
                        nic,
                        now_ns,
                        imm,
                        expected,
                    });
                };
                if expected != Some(imm) || m.wr_id != c.wr_id {
                    return Err(Failure::ImmOrder {
                        nic,
                        now_ns,
                        imm,
                        expected,
                    });
                }
                if PB > 0 && !self.msg_in_place(d, &m) {
                    return Err(Failure::ImmBeforeData {
                        nic,
                        now_ns,
                        msg: idx,
                    });
                }
                self.next_imm[n] = k + 1;
            }
            CompletionKind::Recv => {
                return Err(Failure::ImmOrder {
                    nic,
                    now_ns,
                    imm: 0,
                    expected: None,
                });
            }
        }
        Ok(())
    }

    fn msg_in_place(&self, d: usize, m: &Msg) -> bool {
        let (src, dst) = (&self.nics[d].mem, &self.nics[1 - d].mem);
        src.get(m.src..m.src + m.len) == dst.get(HALF + m.dst..HALF + m.dst + m.len)
    }

    fn final_check(&self) -> Result<(), Failure> {
        for d in 0..2 {
            let to = 1 - d;
            let mut expect = [0u8; HALF];
            for m in self.msgs[d].iter() {
                if PB > 0 && !self.msg_in_place(d, m) {
                    let offset = (0..m.len)
                        .find(|&i| {
                            self.nics[d].mem.get(m.src + i)
                                != self.nics[to].mem.get(HALF + m.dst + i)
                        })
                        .unwrap_or(0);
                    return Err(Failure::Bytes {
                        nic: to as u8,
                        offset: m.dst + offset,
                    });
                }
                for e in expect.iter_mut().skip(m.dst).take(m.len) {
                    *e = 1;
                }
            }
            for (i, (&want, &got)) in expect
                .iter()
                .zip(self.nics[to].writes.iter().skip(HALF))
                .enumerate()
            {
                if want != got {
                    return Err(Failure::WriteCount {
                        nic: to as u8,
                        offset: i,
                        count: got,
                    });
                }
            }
        }
        Ok(())
    }

    /// Totals so far.
    pub fn report(&self) -> Report {
        Report {
            end_ns: self.now_ns,
            messages: self.messages_total,
            completions: self.completions,
            ev_events: self.ev_events,
            channel: self.channel.counters(),
            datapaths: [
                self.nics[0].nic.dp.counters(),
                self.nics[1].nic.dp.counters(),
            ],
            engines: [
                self.nics[0].nic.fw.engine().counters(),
                self.nics[1].nic.fw.engine().counters(),
            ],
            plane_outage: self.channel.config().plane_outage,
        }
    }
}

/// What a NIC wrote for its host during one call, checked after it.
struct Writes {
    list: Vec<HostWrite, 256>,
    overflow: bool,
}

impl Writes {
    fn new() -> Self {
        Writes {
            list: Vec::new(),
            overflow: false,
        }
    }

    fn push(&mut self, w: HostWrite) {
        if self.list.push(w).is_err() {
            self.overflow = true;
        }
    }
}

/// Emit `repr` + `payload` with the wire codec and parse it back; `None` if anything differs.
fn wire_round_trip<const PB: usize>(repr: &MrcRepr, payload: &[u8]) -> Option<MrcRepr> {
    let mut buf = [0u8; 2048];
    let hl = repr.header_len();
    let total = hl + payload.len();
    let b = buf.get_mut(..total)?;
    repr.emit(b);
    b.get_mut(hl..)?.copy_from_slice(payload);
    let p = MrcPacket::new_checked(&*b).ok()?;
    let back = MrcRepr::parse(&p).ok()?;
    (back == *repr && p.payload() == payload).then_some(back)
}
