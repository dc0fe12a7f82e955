//! `hdr_builder.sv` against `mrc_abi::wire::Frame::emit`: the header beats must equal the first
//! `hdr_len` bytes of the emitted frame (UDP checksum included).

use crate::{mismatch, Mismatch, Report, Rng, Rtl, Words};
use mrc_abi::wire::ev::stev_encode;
use mrc_abi::wire::{
    AckRepr, Body, BthRepr, Encap, EthernetAddress, EthernetRepr, EvFormat, EvxRepr, Frame,
    Ipv6Repr, MrcRepr, MrhRepr, NackReason, NackRepr, ProbeRepr, RethRepr, Segment, SrhRepr,
    TsxRepr, UdpRepr, IP_PROTO_IPV6,
};
use mrc_abi::Psn;
use std::collections::VecDeque;
use std::net::Ipv6Addr;

/// SRH segments the RTL instance holds (`hdr_builder` parameter SEGS).
pub const SEGS: usize = 4;

/// One packet descriptor: the Rust frame and the fields only the RTL needs.
#[derive(Debug, Clone)]
struct Desc {
    format: EvFormat,
    eth: EthernetRepr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    outer_src: Ipv6Addr,
    outer_dst: Ipv6Addr,
    srh: Option<SrhRepr>,
    tclass: u8,
    flow: u32,
    hop: u8,
    sport: u16,
    mrc: MrcRepr,
    payload: Vec<u8>,
}

fn addr(rng: &mut Rng) -> Ipv6Addr {
    Ipv6Addr::from((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64()))
}

fn psn(rng: &mut Rng) -> Psn {
    Psn::new(rng.next_u64() as u32)
}

/// A random body: every opcode (writes 60%, ACK 15%, NACK 10%, probe and reply 15%), and the
/// payload length that goes with it (control packets carry none).
fn body(rng: &mut Rng) -> (Body, usize) {
    let ev_index = rng.next_u64() as u16;
    let plane = rng.next_u64() as u8;
    match rng.below(100) {
        0..=59 => {
            let imm = rng.next_u64() as u32;
            let segment = match rng.below(6) {
                0 => Segment::First,
                1 => Segment::Middle,
                2 => Segment::Last { imm: None },
                3 => Segment::Last { imm: Some(imm) },
                4 => Segment::Only { imm: None },
                _ => Segment::Only { imm: Some(imm) },
            };
            let len = rng.below(300) as usize;
            let reth = RethRepr {
                va: rng.next_u64(),
                rkey: rng.next_u64() as u32,
                dma_len: len as u32,
            };
            (Body::Write { segment, reth }, len)
        }
        60..=74 => (
            Body::Ack(AckRepr {
                cum_psn: psn(rng),
                sack_base: psn(rng),
                sack_bitmap: rng.next_u64(),
                ev_index,
                plane,
                ecn_plane_mask: rng.next_u64() as u8,
                ce_count: rng.next_u64() as u16,
                pkt_count: rng.next_u64() as u16,
            }),
            0,
        ),
        75..=84 => (
            Body::Nack(NackRepr {
                reason: NackReason::ALL[rng.below(NackReason::ALL.len() as u64) as usize],
                psn: psn(rng),
                cum_psn: psn(rng),
                ev_index,
                plane,
            }),
            0,
        ),
        n => {
            let p = ProbeRepr {
                probe_id: rng.next_u64() as u32,
                ev_index,
                plane,
            };
            (
                if n < 92 {
                    Body::Probe(p)
                } else {
                    Body::ProbeReply(p)
                },
                0,
            )
        }
    }
}

/// A random SRH of 1..=SEGS segments (as `SrhRepr::from_path` builds it, Segments Left anywhere
/// in the list).
fn srh(rng: &mut Rng) -> SrhRepr {
    let n = 1 + rng.below(SEGS as u64) as usize;
    let path: Vec<Ipv6Addr> = (0..n).map(|_| addr(rng)).collect();
    let mut s = SrhRepr::from_path(IP_PROTO_IPV6, &path).expect("1..=SEGS segments");
    s.segments_left = rng.below(n as u64) as u8;
    s
}

fn gen(rng: &mut Rng) -> Desc {
    let format = EvFormat::ALL[rng.below(3) as usize];
    let mac = |rng: &mut Rng| {
        let b = rng.next_u64().to_be_bytes();
        EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    };
    let ev_value = if format == EvFormat::Udp {
        rng.below(1 << 16) as u32
    } else {
        rng.next_u64() as u32
    };
    let (body, len) = body(rng);
    let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    let mrc = MrcRepr {
        bth: BthRepr {
            opcode: body.opcode(),
            se: rng.bit(),
            pkey: rng.next_u64() as u16,
            fecn: rng.bit(),
            becn: rng.bit(),
            dest_qp: rng.below(1 << 24) as u32,
            ack_req: rng.bit(),
            psn: psn(rng),
        },
        mrh: MrhRepr {
            ev_format: format,
            trimmed: rng.chance(10),
            trimmed_last_hop: rng.chance(10),
            retransmit: rng.chance(20),
            msn: rng.next_u64() as u16,
        },
        evx: rng.chance(70).then(|| EvxRepr {
            ev_index: rng.next_u64() as u16,
            plane: rng.next_u64() as u8,
            ev_value,
        }),
        tsx: rng.chance(50).then(|| TsxRepr {
            tx_ts_ns: rng.next_u64() as u32,
            echo_ts_ns: rng.next_u64() as u32,
        }),
        body,
    };
    let srh = (format == EvFormat::Srv6 && rng.chance(50)).then(|| srh(rng));
    let outer_dst = match &srh {
        // The NIC's outer destination is the active segment.
        Some(s) => s.active_segment().expect("segments_left < segment count"),
        None => addr(rng),
    };
    Desc {
        format,
        eth: EthernetRepr {
            dst: mac(rng),
            src: mac(rng),
        },
        src: addr(rng),
        dst: addr(rng),
        outer_src: addr(rng),
        outer_dst,
        srh,
        tclass: rng.next_u64() as u8,
        flow: rng.below(1 << 20) as u32,
        hop: rng.next_u64() as u8,
        sport: rng.next_u64() as u16,
        mrc,
        payload,
    }
}

/// The EV value the RTL maps into the headers (the EVX value, or 0 without EVX).
fn ev_value(d: &Desc) -> u32 {
    d.mrc.evx.map_or(0, |e| e.ev_value)
}

fn frame(d: &Desc) -> Vec<u8> {
    let ip = |src, dst, flow_label| Ipv6Repr {
        src,
        dst,
        next_header: 0,
        hop_limit: d.hop,
        traffic_class: d.tclass,
        flow_label,
    };
    let (encap, sport) = match d.format {
        EvFormat::Udp => (Encap::Plain(ip(d.src, d.dst, d.flow)), ev_value(d) as u16),
        EvFormat::Stev => {
            let (fl, port) = stev_encode(ev_value(d));
            (Encap::Plain(ip(d.src, d.dst, fl)), port)
        }
        EvFormat::Srv6 => (
            Encap::Srv6 {
                outer: ip(d.outer_src, d.outer_dst, d.flow),
                srh: d.srh.clone(),
                inner: ip(d.src, d.dst, d.flow),
            },
            d.sport,
        ),
    };
    let f = Frame {
        eth: d.eth,
        encap,
        udp: UdpRepr { src_port: sport },
        mrc: d.mrc,
        payload: &d.payload,
    };
    let mut buf = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut buf).expect("emit a generated frame");
    buf.truncate(n - d.payload.len());
    buf
}

/// RFC 1071 sum of the payload as big-endian words, folded to 16 bits.
fn payload_sum(p: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for c in p.chunks(2) {
        let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        acc += u32::from(w);
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The RTL's body input fields, from the frame's body (zero where the body has no such field).
#[derive(Debug, Default, Clone, Copy)]
struct BodyFields {
    reth: RethRepr,
    imm: u32,
    cum_psn: u32,
    sack_base: u32,
    sack_bitmap: u64,
    ref_ev_index: u16,
    ref_plane: u8,
    ecn_plane_mask: u8,
    ce_count: u16,
    pkt_count: u16,
    nack_reason: u8,
    nack_psn: u32,
    probe_id: u32,
}

fn body_fields(b: &Body) -> BodyFields {
    let mut f = BodyFields::default();
    match *b {
        Body::Write { segment, reth } => {
            f.reth = reth;
            if let Segment::Last { imm: Some(i) } | Segment::Only { imm: Some(i) } = segment {
                f.imm = i;
            }
        }
        Body::Ack(a) => {
            f.cum_psn = a.cum_psn.value();
            f.sack_base = a.sack_base.value();
            f.sack_bitmap = a.sack_bitmap;
            f.ref_ev_index = a.ev_index;
            f.ref_plane = a.plane;
            f.ecn_plane_mask = a.ecn_plane_mask;
            f.ce_count = a.ce_count;
            f.pkt_count = a.pkt_count;
        }
        Body::Nack(n) => {
            f.nack_reason = n.reason as u8;
            f.nack_psn = n.psn.value();
            f.cum_psn = n.cum_psn.value();
            f.ref_ev_index = n.ev_index;
            f.ref_plane = n.plane;
        }
        Body::Probe(p) | Body::ProbeReply(p) => {
            f.probe_id = p.probe_id;
            f.ref_ev_index = p.ev_index;
            f.ref_plane = p.plane;
        }
    }
    f
}

/// The input words for descriptor `d` (`valid` drives d_valid; the fields are don't-care when low).
fn encode(d: &Desc, valid: bool, m_ready: bool) -> Words {
    let mut w = Words::default();
    let mac = |a: EthernetAddress| a.0.iter().fold(0u64, |v, b| (v << 8) | u64::from(*b));
    let ip = |w: &mut Words, a: Ipv6Addr| {
        let v = u128::from(a);
        for i in 0..4 {
            w.u((v >> (32 * i)) as u32 as u64, 32);
        }
    };
    let b = &d.mrc.bth;
    let h = &d.mrc.mrh;
    let evx = d.mrc.evx.unwrap_or_default();
    let tsx = d.mrc.tsx.unwrap_or_default();
    let f = body_fields(&d.mrc.body);
    w.b(valid)
        .u(d.format as u64, 2)
        .u(mac(d.eth.dst), 48)
        .u(mac(d.eth.src), 48);
    ip(&mut w, d.src);
    ip(&mut w, d.dst);
    ip(&mut w, d.outer_src);
    ip(&mut w, d.outer_dst);
    let segs = d.srh.as_ref().map_or(&[][..], |s| &s.segments[..]);
    w.u(segs.len() as u64, 8)
        .u(d.srh.as_ref().map_or(0, |s| s.segments_left).into(), 8);
    for i in 0..SEGS {
        ip(
            &mut w,
            segs.get(i).copied().unwrap_or(Ipv6Addr::UNSPECIFIED),
        );
    }
    w.u(d.tclass.into(), 8)
        .u(d.flow.into(), 20)
        .u(d.hop.into(), 8)
        .u(d.sport.into(), 16)
        .u(d.mrc.body.opcode() as u64, 8)
        .b(b.se)
        .b(b.fecn)
        .b(b.becn)
        .b(b.ack_req)
        .u(b.pkey.into(), 16)
        .u(b.dest_qp.into(), 24)
        .u(b.psn.value().into(), 24)
        .b(h.trimmed)
        .b(h.trimmed_last_hop)
        .b(h.retransmit)
        .u(h.msn.into(), 16)
        .b(d.mrc.evx.is_some())
        .u(evx.ev_index.into(), 16)
        .u(evx.plane.into(), 8)
        .u(ev_value(d).into(), 32)
        .b(d.mrc.tsx.is_some())
        .u(tsx.tx_ts_ns.into(), 32)
        .u(tsx.echo_ts_ns.into(), 32)
        .u(f.reth.va, 64)
        .u(f.reth.rkey.into(), 32)
        .u(f.reth.dma_len.into(), 32)
        .u(f.imm.into(), 32)
        .u(f.cum_psn.into(), 24)
        .u(f.sack_base.into(), 24)
        .u(f.sack_bitmap, 64)
        .u(f.ref_ev_index.into(), 16)
        .u(f.ref_plane.into(), 8)
        .u(f.ecn_plane_mask.into(), 8)
        .u(f.ce_count.into(), 16)
        .u(f.pkt_count.into(), 16)
        .u(f.nack_reason.into(), 8)
        .u(f.nack_psn.into(), 24)
        .u(f.probe_id.into(), 32)
        .u(d.payload.len() as u64, 16)
        .u(payload_sum(&d.payload).into(), 16)
        .b(m_ready);
    w
}

/// Drive the builder for `cycles` clocks.
pub fn run(mut rtl: Rtl, seed: u64, cycles: u64) -> Result<Report, Mismatch> {
    let mut rng = Rng::new(seed);
    let mut pending: Option<Desc> = None;
    let mut expect: VecDeque<Desc> = VecDeque::new();
    let mut got: Vec<u8> = Vec::new();
    let mut compared = 0u64;
    let idle = gen(&mut Rng::new(0));
    for cycle in 0..cycles {
        if pending.is_none() && rng.chance(90) {
            pending = Some(gen(&mut rng));
        }
        let m_ready = rng.chance(80);
        let mut o = rtl.step(&encode(
            pending.as_ref().unwrap_or(&idle),
            pending.is_some(),
            m_ready,
        ));
        let d_ready = o.b();
        let m_valid = o.b();
        let data = o.bytes_le(512);
        let keep = o.u(64);
        let last = o.b();
        let hdr_len = o.u(16) as usize;
        if m_valid && m_ready {
            for (k, byte) in data.iter().enumerate() {
                if keep >> k & 1 == 1 {
                    got.push(*byte);
                }
            }
            if last {
                let Some(d) = expect.pop_front() else {
                    return Err(mismatch(
                        cycle,
                        compared,
                        "packet without a descriptor".into(),
                    ));
                };
                let want = frame(&d);
                if got != want || hdr_len != want.len() {
                    let at = got.iter().zip(&want).position(|(a, b)| a != b);
                    return Err(mismatch(
                        cycle,
                        compared,
                        format!(
                            "{:?} opcode {:?} srh {:?}: {} header bytes (hdr_len {hdr_len}), model {}; first difference at byte {at:?}\n rtl   {got:02x?}\n model {want:02x?}",
                            d.format, d.mrc.body.opcode(), d.srh.as_ref().map(|s| s.segments.len()), got.len(), want.len()
                        ),
                    ));
                }
                got.clear();
                compared += 1;
            }
        }
        if d_ready && pending.is_some() {
            expect.extend(pending.take());
        }
    }
    Ok(Report {
        cycles,
        transactions: compared,
    })
}
