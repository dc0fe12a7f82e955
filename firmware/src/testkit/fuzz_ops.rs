//! NIC input sequences from raw bytes, for cargo-fuzz and proptest.
//!
//! [`run_ops`] decodes a byte string into [`Op`]s (no extra crates: one tag byte, then the
//! fields, missing bytes read as 0) and applies them to two connected NICs (datapath stage and
//! firmware engine each, through the test kit's [`Nic`]) with a hand-driven wire in between:
//! posts (some with a bad rkey), receive buffers, deliveries, drops, duplicates, trims,
//! reorders, time jumps, plane events, EV deny/allow, QP state changes, arbitrary (garbage)
//! packets, and arbitrary 32-byte CSR entries handed to an engine as datapath events or to a
//! stage as firmware commands. After every op it checks the stated invariants and returns the
//! first [`Violation`]. A panic anywhere is a bug by definition.
//!
//! Invariants:
//! - a sender's window stays within `[una, una + MPR * 128]`;
//! - while a QP has data outstanding in RTS, a firmware timer is armed;
//! - send completions of a QP come in posting order, receive completions in posting order of
//!   the receive buffers, each at most once;
//! - a write with a bad rkey never completes successfully, and nothing is placed outside the
//!   registered region.
//!
//! A forged ACK or NACK, or a forged CSR entry, may acknowledge or complete anything (neither
//! the wire nor a NIC's internal queue is authenticated against itself): after one reaches a
//! NIC, the checks that such an input can break legitimately (bad rkey, completion order, the
//! timer) are off for that NIC; the window and placement checks stay on.

use heapless::Deque;
use mrc_abi::wire::{
    AckRepr, Body, BthRepr, EvFormat, EvxRepr, MrcRepr, MrhRepr, NackReason, NackRepr, ProbeRepr,
    RethRepr, Segment, TsxRepr,
};
use mrc_abi::Psn;

use mrc_abi::device::csr::CsrEntry;

use super::nic::{HostWrite, Nic};
use super::TestKit;
use crate::datapath::ack_gen::TrimMark;
use crate::datapath::packet::{LocalBuf, Packet, RxVerdict, SendWr};
use crate::datapath::placement::{Access, MemRegion};
use crate::datapath::stage::DatapathConfig;
use crate::engine::ev_state::EvConfig;
use crate::engine::qp::{CcProfile, EvProfile, QpAttrs, QpState};
use crate::engine::{CompletionKind, EngineConfig};

const REGION_VA: u64 = 0x1000_0000;
const REGION_LEN: u64 = 64 * 1024;
const GOOD_RKEY: u32 = 0x77;
const WIRE: usize = 256;
const MAX_OPS: usize = 4096;

/// One engine input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Post {
        nic: u8,
        len: u16,
        imm: bool,
        signaled: bool,
        bad_rkey: bool,
    },
    PostRecv {
        nic: u8,
    },
    /// Move everything the engines want to send onto the wire.
    Pump,
    Deliver {
        count: u8,
    },
    Drop,
    Duplicate,
    Trim {
        last_hop: bool,
    },
    Reorder,
    Advance {
        ns: u32,
    },
    PlaneDown {
        plane: u8,
    },
    PlaneUp {
        plane: u8,
    },
    Modify {
        nic: u8,
        state: u8,
    },
    Deny {
        nic: u8,
        ev: u8,
    },
    Allow {
        nic: u8,
        ev: u8,
    },
    Garbage {
        nic: u8,
        repr: MrcRepr,
        payload_len: u16,
        ce: bool,
    },
    /// A raw entry handed to NIC `nic`'s engine as if its stage reported it.
    ForgedEvent {
        nic: u8,
        entry: [u8; 32],
    },
    /// A raw entry handed to NIC `nic`'s stage as if its engine commanded it.
    ForgedCommand {
        nic: u8,
        entry: [u8; 32],
    },
}

/// A broken invariant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    Window { nic: u8, una: u32, nxt: u32 },
    NoTimer { nic: u8 },
    SendOrder { nic: u8, wr_id: u64, last: u64 },
    RecvOrder { nic: u8, wr_id: u64, last: u64 },
    BadRkeySucceeded { nic: u8, wr_id: u64 },
    PlacedOutside { nic: u8, offset: u64, len: u32 },
    Setup,
}

struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn done(&self) -> bool {
        self.at >= self.b.len()
    }
    fn u8(&mut self) -> u8 {
        let v = self.b.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        v
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }
}

fn garbage(r: &mut Bytes<'_>) -> MrcRepr {
    let sel = r.u8();
    let psn = Psn::new(r.u32());
    let imm = (sel & 0x10 != 0).then(|| r.u32());
    let body = match sel % 9 {
        0 => Body::Write {
            segment: Segment::First,
            reth: reth(r),
        },
        1 => Body::Write {
            segment: Segment::Middle,
            reth: reth(r),
        },
        2 => Body::Write {
            segment: Segment::Last { imm },
            reth: reth(r),
        },
        3 => Body::Write {
            segment: Segment::Only { imm },
            reth: reth(r),
        },
        4 => Body::Ack(AckRepr {
            cum_psn: Psn::new(r.u32()),
            sack_base: Psn::new(r.u32()),
            sack_bitmap: r.u64(),
            ev_index: r.u16(),
            plane: r.u8(),
            ecn_plane_mask: r.u8(),
            ce_count: r.u16(),
            pkt_count: r.u16(),
        }),
        5 => Body::Nack(NackRepr {
            reason: NackReason::ALL[usize::from(r.u8() % 8)],
            psn: Psn::new(r.u32()),
            cum_psn: Psn::new(r.u32()),
            ev_index: r.u16(),
            plane: r.u8(),
        }),
        6 => Body::Probe(probe(r)),
        _ => Body::ProbeReply(probe(r)),
    };
    let flags = r.u8();
    MrcRepr {
        bth: BthRepr {
            opcode: body.opcode(),
            se: false,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: u32::from(r.u8() % 4),
            ack_req: flags & 1 != 0,
            psn,
        },
        mrh: MrhRepr {
            ev_format: EvFormat::Udp,
            trimmed: flags & 2 != 0,
            trimmed_last_hop: flags & 4 != 0,
            retransmit: flags & 8 != 0,
            msn: r.u16(),
        },
        evx: (flags & 16 != 0).then(|| EvxRepr {
            ev_index: r.u16(),
            plane: r.u8(),
            ev_value: r.u32(),
        }),
        tsx: (flags & 32 != 0).then(|| TsxRepr {
            tx_ts_ns: r.u32(),
            echo_ts_ns: r.u32(),
        }),
        body,
    }
}

fn reth(r: &mut Bytes<'_>) -> RethRepr {
    RethRepr {
        va: if r.u8() & 1 == 0 {
            REGION_VA + u64::from(r.u16())
        } else {
            r.u64()
        },
        rkey: if r.u8() & 1 == 0 { GOOD_RKEY } else { r.u32() },
        dma_len: u32::from(r.u16()),
    }
}

fn probe(r: &mut Bytes<'_>) -> ProbeRepr {
    ProbeRepr {
        probe_id: r.u32(),
        ev_index: r.u16(),
        plane: r.u8(),
    }
}

impl Op {
    fn decode(r: &mut Bytes<'_>) -> Op {
        let tag = r.u8();
        match tag % 16 {
            0 | 1 => {
                let (nic, len, f) = (r.u8() & 1, r.u16() % 2048, r.u8());
                Op::Post {
                    nic,
                    len,
                    imm: f & 1 != 0,
                    signaled: f & 2 == 0,
                    bad_rkey: f & 0x1c == 0x1c,
                }
            }
            2 => Op::PostRecv { nic: r.u8() & 1 },
            3 => Op::Pump,
            4 | 5 => Op::Deliver { count: r.u8() },
            6 => Op::Drop,
            7 => Op::Duplicate,
            8 => Op::Trim {
                last_hop: r.u8() & 1 != 0,
            },
            9 => Op::Reorder,
            10 => Op::Advance {
                ns: u32::from(r.u16()) << (r.u8() % 16),
            },
            11 => match r.u8() % 4 {
                0 => Op::PlaneDown { plane: r.u8() % 5 },
                1 => Op::PlaneUp { plane: r.u8() % 5 },
                2 => Op::Deny {
                    nic: r.u8() & 1,
                    ev: r.u8(),
                },
                _ => Op::Allow {
                    nic: r.u8() & 1,
                    ev: r.u8(),
                },
            },
            12 => Op::Modify {
                nic: r.u8() & 1,
                state: r.u8(),
            },
            13 => {
                let nic = r.u8();
                let mut entry = [0u8; 32];
                for b in entry.iter_mut() {
                    *b = r.u8();
                }
                // (the kind byte from the known ones most of the time, so the fields are
                // what gets fuzzed)
                if nic & 2 == 0 {
                    entry[0] = 0x01 + entry[0] % 0x0D;
                }
                if nic & 4 != 0 {
                    entry[0] |= 0x80;
                    Op::ForgedCommand {
                        nic: nic & 1,
                        entry,
                    }
                } else {
                    Op::ForgedEvent {
                        nic: nic & 1,
                        entry,
                    }
                }
            }
            _ => Op::Garbage {
                nic: r.u8() & 1,
                repr: garbage(r),
                payload_len: r.u16() % 4096,
                ce: r.u8() & 1 != 0,
            },
        }
    }
}

/// Decode every op of `data` (at most 4096).
pub fn decode_ops(data: &[u8], mut f: impl FnMut(Op)) {
    let mut r = Bytes { b: data, at: 0 };
    for _ in 0..MAX_OPS {
        if r.done() {
            return;
        }
        f(Op::decode(&mut r));
    }
}

#[derive(Clone, Copy)]
struct Wire {
    to: u8,
    pkt: Packet,
}

struct World {
    nics: [Nic<TestKit>; 2],
    qpn: [u32; 2],
    wire: Deque<Wire, WIRE>,
    now: u64,
    next_wr: [u64; 2],
    next_recv: [u64; 2],
    last_send: [Option<u64>; 2],
    last_recv: [Option<u64>; 2],
    /// A forged ACK, NACK or CSR entry reached this NIC (see the module docs).
    forged: [bool; 2],
    /// The sender window bound (MPR * 128).
    mpr_psns: u32,
}

/// Marks the wr_id of a non-empty write with a bad rkey.
const BAD: u64 = 1 << 62;

fn attrs(dest: u32) -> QpAttrs {
    let mut table = EvConfig::new(64, 4);
    table.probe_base_ns = 5_000;
    QpAttrs::connect(
        EvProfile {
            table,
            format: EvFormat::Udp,
            value_base: 0xC000,
        },
        CcProfile::Fixed {
            cwnd_bytes: 64 * 1024,
        },
        dest,
    )
    .psns(Psn::new(0x00ff_fff0), Psn::new(0x00ff_fff0))
    .window(2, 4)
    .retry(3, 4)
}

/// What a NIC wrote for its host during one call.
struct Writes(heapless::Vec<HostWrite, 512>);

impl Writes {
    fn push(&mut self, w: HostWrite) {
        // (a full list stops checking completions, never a crash)
        let _ = self.0.push(w);
    }
}

impl World {
    fn new() -> Option<Self> {
        let dcfg = DatapathConfig {
            mtu_payload: 256,
            ..DatapathConfig::DEFAULT
        };
        let mut nics = [
            Nic::new(dcfg, EngineConfig::default()).ok()?,
            Nic::new(dcfg, EngineConfig::default()).ok()?,
        ];
        let qpn = [nics[0].create_qp().ok()?, nics[1].create_qp().ok()?];
        for n in 0..2 {
            let a = attrs(qpn[1 - n]);
            let e = &mut nics[n];
            e.register_region(MemRegion {
                rkey: GOOD_RKEY,
                base_va: REGION_VA,
                length: REGION_LEN,
                access: Access::REMOTE_WRITE,
            })
            .ok()?;
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                e.modify_qp(qpn[n], s, &a, 0).ok()?;
            }
            e.pump(0, &mut |_| {});
        }
        Some(World {
            nics,
            qpn,
            wire: Deque::new(),
            now: 0,
            next_wr: [0; 2],
            next_recv: [0; 2],
            last_send: [None; 2],
            last_recv: [None; 2],
            forged: [false; 2],
            mpr_psns: 256,
        })
    }

    fn apply(&mut self, op: Op) -> Result<(), Violation> {
        match op {
            Op::Post {
                nic,
                len,
                imm,
                signaled,
                bad_rkey,
            } => {
                let n = usize::from(nic);
                let id = self.next_wr[n] | if bad_rkey && len > 0 { BAD } else { 0 };
                let wr = SendWr {
                    wr_id: id,
                    local: LocalBuf::default(),
                    remote_va: REGION_VA + u64::from(len) * 7,
                    rkey: if bad_rkey { GOOD_RKEY + 1 } else { GOOD_RKEY },
                    len: u32::from(len),
                    imm: imm.then_some(len.into()),
                    signaled,
                };
                if self.nics[n].post_send(self.qpn[n], wr).is_ok() {
                    self.next_wr[n] += 1;
                }
            }
            Op::PostRecv { nic } => {
                let n = usize::from(nic);
                if self.nics[n]
                    .post_recv(self.qpn[n], self.next_recv[n])
                    .is_ok()
                {
                    self.next_recv[n] += 1;
                }
            }
            Op::Pump => {
                let mut out = [Packet::FILL; 32];
                for n in 0..2 {
                    for _ in 0..32 {
                        let mut w = Writes(heapless::Vec::new());
                        let k = self.nics[n].transmit(self.now, &mut out, &mut |x| w.push(x));
                        self.check_writes(n, &w)?;
                        for pkt in &out[..k] {
                            let _ = self.wire.push_back(Wire {
                                to: 1 - n as u8,
                                pkt: *pkt,
                            });
                        }
                        if k < out.len() {
                            break;
                        }
                    }
                }
            }
            Op::Deliver { count } => {
                for _ in 0..count {
                    let Some(w) = self.wire.pop_front() else {
                        break;
                    };
                    self.deliver(w.to, &w.pkt)?;
                }
            }
            Op::Drop => {
                self.wire.pop_front();
            }
            Op::Duplicate => {
                if let Some(w) = self.wire.front().copied() {
                    let _ = self.wire.push_back(w);
                }
            }
            Op::Trim { last_hop } => {
                if let Some(w) = self.wire.front_mut() {
                    w.pkt.trim_to(if last_hop {
                        TrimMark::TrimmedLastHop
                    } else {
                        TrimMark::Trimmed
                    });
                }
            }
            Op::Reorder => {
                if let Some(w) = self.wire.pop_front() {
                    let _ = self.wire.push_back(w);
                }
            }
            Op::Advance { ns } => {
                self.now = self.now.saturating_add(u64::from(ns));
                for e in self.nics.iter_mut() {
                    e.handle_timeout(self.now);
                }
            }
            Op::PlaneDown { plane } => self
                .nics
                .iter_mut()
                .for_each(|e| e.fw.handle_plane_down(self.now, plane)),
            Op::PlaneUp { plane } => self
                .nics
                .iter_mut()
                .for_each(|e| e.fw.handle_plane_up(self.now, plane)),
            Op::Modify { nic, state } => {
                let n = usize::from(nic);
                let to = [
                    QpState::Reset,
                    QpState::Init,
                    QpState::Rtr,
                    QpState::Rts,
                    QpState::Error,
                ][usize::from(state % 5)];
                let a = attrs(self.qpn[1 - n]);
                let _ = self.nics[n].modify_qp(self.qpn[n], to, &a, self.now);
                if to == QpState::Reset {
                    // A reset QP starts a new life: its completion order restarts.
                    self.last_send[n] = None;
                    self.last_recv[n] = None;
                }
            }
            Op::Deny { nic, ev } => {
                let n = usize::from(nic);
                let _ = self.nics[n]
                    .fw
                    .set_ev_allowed(self.now, self.qpn[n], u16::from(ev), false);
            }
            Op::Allow { nic, ev } => {
                let n = usize::from(nic);
                let _ = self.nics[n]
                    .fw
                    .set_ev_allowed(self.now, self.qpn[n], u16::from(ev), true);
            }
            Op::Garbage {
                nic,
                repr,
                payload_len,
                ce,
            } => {
                if matches!(repr.body, Body::Ack(_) | Body::Nack(_)) {
                    self.forged[usize::from(nic)] = true;
                }
                let pkt = Packet::from_repr(&repr, payload_len.into(), ce);
                self.deliver(nic, &pkt)?;
            }
            Op::ForgedEvent { nic, entry } => {
                let n = usize::from(nic);
                self.forged[n] = true;
                let _ = self.nics[n].fw.handle_events(self.now, &[CsrEntry(entry)]);
            }
            Op::ForgedCommand { nic, entry } => {
                let n = usize::from(nic);
                self.forged[n] = true;
                let _ = self.nics[n]
                    .dp
                    .handle_commands(self.now, &[CsrEntry(entry)]);
            }
        }
        self.drain()?;
        self.check()
    }

    fn deliver(&mut self, to: u8, pkt: &Packet) -> Result<(), Violation> {
        let n = usize::from(to);
        let mut v = [RxVerdict::Consumed];
        let mut w = Writes(heapless::Vec::new());
        self.nics[n].receive(self.now, core::slice::from_ref(pkt), &mut v, &mut |x| {
            w.push(x)
        });
        self.check_place(to, v[0])?;
        self.check_writes(n, &w)
    }

    fn check_place(&self, nic: u8, v: RxVerdict) -> Result<(), Violation> {
        match v {
            RxVerdict::Place {
                offset, len, slot, ..
            } if slot != 0 || offset.saturating_add(u64::from(len)) > REGION_LEN => {
                Err(Violation::PlacedOutside { nic, offset, len })
            }
            _ => Ok(()),
        }
    }

    fn drain(&mut self) -> Result<(), Violation> {
        for n in 0..2 {
            let mut w = Writes(heapless::Vec::new());
            self.nics[n].pump(self.now, &mut |x| w.push(x));
            self.check_writes(n, &w)?;
        }
        Ok(())
    }

    fn check_writes(&mut self, n: usize, w: &Writes) -> Result<(), Violation> {
        let nic = n as u8;
        for x in w.0.iter() {
            let HostWrite::Completion(c) = x else {
                continue;
            };

            if self.forged[n] {
                continue;
            }
            let id = c.wr_id & !BAD;
            let send = c.kind == CompletionKind::Send;
            if send && c.status.is_ok() && c.wr_id & BAD != 0 {
                return Err(Violation::BadRkeySucceeded {
                    nic,
                    wr_id: c.wr_id,
                });
            }
            let last = if send {
                &mut self.last_send[n]
            } else {
                &mut self.last_recv[n]
            };
            if let Some(l) = *last {
                if id <= l {
                    return Err(if send {
                        Violation::SendOrder {
                            nic,
                            wr_id: id,
                            last: l,
                        }
                    } else {
                        Violation::RecvOrder {
                            nic,
                            wr_id: id,
                            last: l,
                        }
                    });
                }
            }
            *last = Some(id);
        }
        Ok(())
    }

    fn check(&self) -> Result<(), Violation> {
        for n in 0..2 {
            let Some(qp) = self.nics[n].dp.qp(self.qpn[n]) else {
                continue;
            };
            let d = qp.nxt.distance_from(qp.una);
            if d < 0 || d as u32 > self.mpr_psns {
                return Err(Violation::Window {
                    nic: n as u8,
                    una: qp.una.value(),
                    nxt: qp.nxt.value(),
                });
            }
            let rts = self.nics[n].fw.qp_state(self.qpn[n]) == Some(QpState::Rts);
            if rts && !self.forged[n] && d > 0 && self.nics[n].fw.poll_timeout().is_none() {
                return Err(Violation::NoTimer { nic: n as u8 });
            }
        }
        Ok(())
    }
}

/// Apply the ops decoded from `data` to two connected NICs, checking invariants after each.
///
/// # Errors
/// The first [`Violation`].
pub fn run_ops(data: &[u8]) -> Result<(), Violation> {
    let mut w = World::new().ok_or(Violation::Setup)?;
    let mut result = Ok(());
    decode_ops(data, |op| {
        if result.is_ok() {
            result = w.apply(op);
        }
    });
    result
}
