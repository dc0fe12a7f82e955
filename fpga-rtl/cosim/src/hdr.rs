//! `hdr_builder.sv` against `mrc_abi::wire::Frame::emit`: the header beats must equal the first
//! `hdr_len` bytes of the emitted frame (UDP checksum included).

use crate::Rng;
#[cfg(not(no_verilator))]
use crate::{mismatch, Mismatch, Report, Rtl, Words};
use mrc_abi::wire::ev::stev_encode;
use mrc_abi::wire::{
    AckRepr, Body, BthRepr, Encap, EthernetAddress, EthernetRepr, EvFormat, EvxRepr, Frame,
    Ipv6Repr, MrcRepr, MrhRepr, NackReason, NackRepr, ProbeRepr, RethRepr, Segment, SrhRepr,
    TsxRepr, UdpRepr, IP_PROTO_IPV6,
};
use mrc_abi::Psn;
#[cfg(not(no_verilator))]
use mrc_firmware::datapath::packet::Packet;
#[cfg(not(no_verilator))]
use std::collections::VecDeque;
use std::net::Ipv6Addr;

/// SRH segments the RTL instance holds (`hdr_builder` parameter SEGS).
pub const SEGS: usize = 4;

/// One packet descriptor: the Rust frame and the fields only the RTL needs.
#[derive(Debug, Clone)]
pub(crate) struct Desc {
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
    /// Read by the co-simulation's coverage check only.
    #[cfg_attr(no_verilator, allow(dead_code))]
    shape: Shape,
}

fn addr(rng: &mut Rng) -> Ipv6Addr {
    Ipv6Addr::from((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64()))
}

fn psn(rng: &mut Rng) -> Psn {
    Psn::new(rng.next_u64() as u32)
}

/// Body kinds: the six write segments, ACK, NACK, EV probe, EV probe reply.
pub const BODY_KINDS: usize = 10;

/// A random body of `kind` (`0..BODY_KINDS`), and the payload length that goes with it (control
/// packets carry none).
fn body(rng: &mut Rng, kind: usize) -> (Body, usize) {
    let ev_index = rng.next_u64() as u16;
    let plane = rng.next_u64() as u8;
    match kind {
        0..=5 => {
            let imm = rng.next_u64() as u32;
            let segment = match kind {
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
        6 => (
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
        7 => (
            Body::Nack(NackRepr {
                reason: NackReason::ALL[rng.below(NackReason::ALL.len() as u64) as usize],
                psn: psn(rng),
                cum_psn: psn(rng),
                ev_index,
                plane,
            }),
            0,
        ),
        _ => {
            let p = ProbeRepr {
                probe_id: rng.next_u64() as u32,
                ev_index,
                plane,
            };
            (
                if kind == 8 {
                    Body::Probe(p)
                } else {
                    Body::ProbeReply(p)
                },
                0,
            )
        }
    }
}

/// What a descriptor looks like: the header stack and which optional headers it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// EV format.
    pub format: EvFormat,
    /// SRH segments (SRv6 only; 0 = no SRH).
    pub segs: usize,
    /// Body kind, `0..BODY_KINDS`.
    pub kind: usize,
    /// EVX present.
    pub evx: bool,
    /// TSX present.
    pub tsx: bool,
}

impl Shape {
    /// A random shape: writes 60%, ACK 15%, NACK 10%, probes 15%; SRH on half the SRv6 packets.
    fn random(rng: &mut Rng) -> Shape {
        let format = EvFormat::ALL[rng.below(3) as usize];
        let kind = match rng.below(100) {
            0..=59 => rng.below(6) as usize,
            60..=74 => 6,
            75..=84 => 7,
            n => 8 + usize::from(n >= 92),
        };
        let segs = if format == EvFormat::Srv6 && rng.chance(50) {
            1 + rng.below(SEGS as u64) as usize
        } else {
            0
        };
        Shape {
            format,
            segs,
            kind,
            evx: rng.chance(70),
            tsx: rng.chance(50),
        }
    }

    /// Every (format, SRH segment count, body kind) once, with EVX/TSX cycling.
    pub fn all() -> Vec<Shape> {
        let mut v = Vec::new();
        for format in EvFormat::ALL {
            let max_segs = if format == EvFormat::Srv6 { SEGS } else { 0 };
            for segs in 0..=max_segs {
                for kind in 0..BODY_KINDS {
                    let n = v.len();
                    v.push(Shape {
                        format,
                        segs,
                        kind,
                        evx: n & 1 == 0,
                        tsx: n & 2 == 0,
                    });
                }
            }
        }
        v
    }
}

/// A random SRH of `n` segments (as `SrhRepr::from_path` builds it, Segments Left anywhere in
/// the list).
fn srh(rng: &mut Rng, n: usize) -> SrhRepr {
    let path: Vec<Ipv6Addr> = (0..n).map(|_| addr(rng)).collect();
    let mut s = SrhRepr::from_path(IP_PROTO_IPV6, &path).expect("1..=SEGS segments");
    s.segments_left = rng.below(n as u64) as u8;
    s
}

fn gen(rng: &mut Rng) -> Desc {
    let shape = Shape::random(rng);
    gen_shape(rng, shape)
}

fn gen_shape(rng: &mut Rng, shape: Shape) -> Desc {
    let format = shape.format;
    let mac = |rng: &mut Rng| {
        let b = rng.next_u64().to_be_bytes();
        EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    };
    let ev_value = if format == EvFormat::Udp {
        rng.below(1 << 16) as u32
    } else {
        rng.next_u64() as u32
    };
    let (body, len) = body(rng, shape.kind);
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
        evx: shape.evx.then(|| EvxRepr {
            ev_index: rng.next_u64() as u16,
            plane: rng.next_u64() as u8,
            ev_value,
        }),
        tsx: shape.tsx.then(|| TsxRepr {
            tx_ts_ns: rng.next_u64() as u32,
            echo_ts_ns: rng.next_u64() as u32,
        }),
        body,
    };
    let srh = (format == EvFormat::Srv6 && shape.segs > 0).then(|| srh(rng, shape.segs));
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
        shape,
    }
}

/// The body kind (`0..BODY_KINDS`) of `b`.
#[cfg(not(no_verilator))]
fn kind(b: &Body) -> usize {
    match b {
        Body::Write { segment, .. } => match segment {
            Segment::First => 0,
            Segment::Middle => 1,
            Segment::Last { imm: None } => 2,
            Segment::Last { imm: Some(_) } => 3,
            Segment::Only { imm: None } => 4,
            Segment::Only { imm: Some(_) } => 5,
        },
        Body::Ack(_) => 6,
        Body::Nack(_) => 7,
        Body::Probe(_) => 8,
        Body::ProbeReply(_) => 9,
    }
}

/// The address of QP `qpn`'s port on `plane` in the simulator's descriptors.
#[cfg(not(no_verilator))]
fn sim_addr(qpn: u32, plane: u8) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd00,
        0,
        0,
        plane.into(),
        0,
        0,
        (qpn >> 16) as u16,
        qpn as u16,
    )
}

/// The MAC of QP `qpn`'s port on `plane` in the simulator's descriptors.
#[cfg(not(no_verilator))]
fn sim_mac(qpn: u32, plane: u8) -> EthernetAddress {
    let q = qpn.to_be_bytes();
    EthernetAddress([0x02, 0, plane, q[1], q[2], q[3]])
}

/// The descriptor of a packet leaving the simulator's datapath stage (`crate::sim`): its MRC
/// headers, EV value and payload length are the packet's. The stage's packets carry no
/// addresses (the simulated fabric routes by host), so the addresses are made from the QP
/// numbers and the plane, an SRv6 packet has its outer destination and no SRH, and the
/// payload is zeros (its checksum sum 0): the parts the receiving stage reads back are all
/// the packet's own.
#[cfg(not(no_verilator))]
pub(crate) fn packet_desc(p: &Packet) -> Desc {
    let mrc = p.to_repr();
    let plane = p.evx.plane;
    let (src, dst) = (sim_addr(p.src_qpn, plane), sim_addr(p.dest_qpn, plane));
    Desc {
        format: p.ev_format,
        eth: EthernetRepr {
            dst: sim_mac(p.dest_qpn, plane),
            src: sim_mac(p.src_qpn, plane),
        },
        src,
        dst,
        outer_src: src,
        outer_dst: dst,
        srh: None,
        // ECT(0), as the simulator's pcap frames.
        tclass: 0x02,
        flow: 0,
        hop: 64,
        sport: 0xc000 | (p.evx.ev_index & 0x3fff),
        shape: Shape {
            format: p.ev_format,
            segs: 0,
            kind: kind(&mrc.body),
            evx: mrc.evx.is_some(),
            tsx: mrc.tsx.is_some(),
        },
        mrc,
        payload: vec![0; p.payload_len as usize],
    }
}

/// The EV value the RTL maps into the headers (the EVX value, or 0 without EVX).
fn ev_value(d: &Desc) -> u32 {
    d.mrc.evx.map_or(0, |e| e.ev_value)
}

/// The header bytes `Frame::emit` writes for `d` (the builder's model).
pub(crate) fn frame(d: &Desc) -> Vec<u8> {
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

/// One descriptor input port: up to 64 bits, or a wide port as 128-bit chunks (least
/// significant first).
#[derive(Debug, Clone)]
enum Field {
    N(u64, u32),
    W(Vec<u128>),
}

/// The descriptor ports of `d` in port order (`d_format` .. `d_payload_sum`).
fn fields(d: &Desc) -> Vec<Field> {
    use Field::{N, W};
    let mac = |a: EthernetAddress| a.0.iter().fold(0u64, |v, b| (v << 8) | u64::from(*b));
    let ip = |a: Ipv6Addr| W(vec![u128::from(a)]);
    let b = &d.mrc.bth;
    let h = &d.mrc.mrh;
    let evx = d.mrc.evx.unwrap_or_default();
    let tsx = d.mrc.tsx.unwrap_or_default();
    let f = body_fields(&d.mrc.body);
    let segs = d.srh.as_ref().map_or(&[][..], |s| &s.segments[..]);
    let list = (0..SEGS)
        .map(|i| segs.get(i).map_or(0, |a| u128::from(*a)))
        .collect();
    vec![
        N(d.format as u64, 2),
        N(mac(d.eth.dst), 48),
        N(mac(d.eth.src), 48),
        ip(d.src),
        ip(d.dst),
        ip(d.outer_src),
        ip(d.outer_dst),
        N(segs.len() as u64, 8),
        N(d.srh.as_ref().map_or(0, |s| s.segments_left).into(), 8),
        W(list),
        N(d.tclass.into(), 8),
        N(d.flow.into(), 20),
        N(d.hop.into(), 8),
        N(d.sport.into(), 16),
        N(d.mrc.body.opcode() as u64, 8),
        N(b.se.into(), 1),
        N(b.fecn.into(), 1),
        N(b.becn.into(), 1),
        N(b.ack_req.into(), 1),
        N(b.pkey.into(), 16),
        N(b.dest_qp.into(), 24),
        N(b.psn.value().into(), 24),
        N(h.trimmed.into(), 1),
        N(h.trimmed_last_hop.into(), 1),
        N(h.retransmit.into(), 1),
        N(h.msn.into(), 16),
        N(d.mrc.evx.is_some().into(), 1),
        N(evx.ev_index.into(), 16),
        N(evx.plane.into(), 8),
        N(ev_value(d).into(), 32),
        N(d.mrc.tsx.is_some().into(), 1),
        N(tsx.tx_ts_ns.into(), 32),
        N(tsx.echo_ts_ns.into(), 32),
        N(f.reth.va, 64),
        N(f.reth.rkey.into(), 32),
        N(f.reth.dma_len.into(), 32),
        N(f.imm.into(), 32),
        N(f.cum_psn.into(), 24),
        N(f.sack_base.into(), 24),
        N(f.sack_bitmap, 64),
        N(f.ref_ev_index.into(), 16),
        N(f.ref_plane.into(), 8),
        N(f.ecn_plane_mask.into(), 8),
        N(f.ce_count.into(), 16),
        N(f.pkt_count.into(), 16),
        N(f.nack_reason.into(), 8),
        N(f.nack_psn.into(), 24),
        N(f.probe_id.into(), 32),
        N(d.payload.len() as u64, 16),
        N(payload_sum(&d.payload).into(), 16),
    ]
}

/// The input words for descriptor `d` (`valid` drives d_valid; the fields are don't-care when low).
#[cfg(not(no_verilator))]
pub(crate) fn encode(d: &Desc, valid: bool, m_ready: bool) -> Words {
    let mut w = Words::default();
    w.b(valid);
    for f in fields(d) {
        match f {
            Field::N(v, bits) => {
                w.u(v, bits);
            }
            Field::W(chunks) => {
                for c in chunks {
                    for i in 0..4 {
                        w.u(u64::from((c >> (32 * i)) as u32), 32);
                    }
                }
            }
        }
    }
    w.b(m_ready);
    w
}

/// Bits of one descriptor in `tb/vectors/hdr_builder_desc.hex` (the concatenation of the
/// descriptor ports, `d_format` in the top bits; `tb_hdr_builder.sv` splits it the same way).
pub const DESC_BITS: usize = 1839;

/// Big-endian bit string builder for the vector files.
struct Bits(Vec<bool>);

impl Bits {
    fn push(&mut self, v: u128, bits: u32) {
        for i in (0..bits).rev() {
            self.0.push(v >> i & 1 == 1);
        }
    }
    fn hex(&self) -> String {
        let pad = (4 - self.0.len() % 4) % 4;
        let bits: Vec<bool> = std::iter::repeat_n(false, pad)
            .chain(self.0.iter().copied())
            .collect();
        bits.chunks(4)
            .map(|c| {
                let n = c.iter().fold(0u32, |v, b| (v << 1) | u32::from(*b));
                char::from_digit(n, 16).unwrap_or('0')
            })
            .collect()
    }
}

/// The Icarus bench's vector files for `tb_hdr_builder.sv`: every [`Shape::all`] shape once, then
/// `random` random descriptors, all from `seed`. Returns (descriptors, expected): the first has
/// one line per descriptor, [`DESC_BITS`] bits in hex; the second one line per packet with the
/// header length (two bytes, big-endian) then the header bytes (Frame::emit's), each in hex.
pub fn vectors(seed: u64, random: usize) -> (String, String) {
    let mut rng = Rng::new(seed);
    let mut descs: Vec<Desc> = Shape::all()
        .into_iter()
        .map(|s| gen_shape(&mut rng, s))
        .collect();
    descs.extend((0..random).map(|_| gen(&mut rng)));
    let (mut din, mut dout) = (String::new(), String::new());
    for d in &descs {
        let mut b = Bits(Vec::new());
        for f in fields(d) {
            match f {
                Field::N(v, bits) => b.push(v.into(), bits),
                Field::W(chunks) => {
                    for c in chunks.iter().rev() {
                        b.push(*c, 128);
                    }
                }
            }
        }
        assert_eq!(b.0.len(), DESC_BITS, "descriptor width");
        din.push_str(&b.hex());
        din.push('\n');
        let hdr = frame(d);
        dout.push_str(&format!("{:02x} {:02x}", hdr.len() >> 8, hdr.len() & 0xff));
        for byte in hdr {
            dout.push_str(&format!(" {byte:02x}"));
        }
        dout.push('\n');
    }
    (din, dout)
}

/// Descriptors of `shape` for the timing measurement (`crate::timing`), from `seed`; returns
/// the input words of descriptor `i` (the output always ready) and the header length of each.
#[cfg(not(no_verilator))]
pub(crate) fn timing_inputs(seed: u64, shape: Shape, n: usize) -> Vec<(Words, Words, usize)> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let d = gen_shape(&mut rng, shape);
            (
                encode(&d, true, true),
                encode(&d, false, true),
                frame(&d).len(),
            )
        })
        .collect()
}

/// One clock of the builder's outputs, in the shim's port order.
#[cfg(not(no_verilator))]
pub(crate) struct Beat {
    /// `d_ready`: the descriptor offered this clock is taken.
    pub d_ready: bool,
    /// `m_valid`: a header beat is on the output.
    pub m_valid: bool,
    /// `m_data`, byte 0 = bits 7:0.
    pub data: Vec<u8>,
    /// `m_keep`: which bytes of `data` belong to the header.
    pub keep: u64,
    /// `m_last`: the header's last beat.
    pub last: bool,
    /// `m_hdr_len`: the header's length in bytes.
    pub hdr_len: usize,
}

#[cfg(not(no_verilator))]
impl Beat {
    /// Reads the builder's output ports from `o`.
    pub(crate) fn read(o: &mut crate::Out) -> Beat {
        Beat {
            d_ready: o.b(),
            m_valid: o.b(),
            data: o.bytes_le(512),
            keep: o.u(64),
            last: o.b(),
            hdr_len: o.u(16) as usize,
        }
    }

    /// Appends the beat's kept bytes to `to`.
    pub(crate) fn keep_into(&self, to: &mut Vec<u8>) {
        let kept = self.data.iter().enumerate();
        to.extend(
            kept.filter(|(k, _)| self.keep >> k & 1 == 1)
                .map(|(_, b)| *b),
        );
    }
}

/// Drive the builder for `cycles` clocks.
#[cfg(not(no_verilator))]
pub fn run(mut rtl: Rtl, seed: u64, cycles: u64) -> Result<Report, Mismatch> {
    let mut rng = Rng::new(seed);
    let mut pending: Option<Desc> = None;
    let mut expect: VecDeque<Desc> = VecDeque::new();
    let mut got: Vec<u8> = Vec::new();
    let mut compared = 0u64;
    // (format, SRH segments, body kind) shapes compared at least once.
    let all = Shape::all();
    let mut seen = vec![false; all.len()];
    let idle = gen(&mut Rng::new(0));
    for cycle in 0..cycles {
        if pending.is_none() && rng.chance(90) {
            pending = Some(gen(&mut rng));
        }
        let m_ready = rng.chance(80);
        let beat = Beat::read(&mut rtl.step(&encode(
            pending.as_ref().unwrap_or(&idle),
            pending.is_some(),
            m_ready,
        )));
        let (d_ready, hdr_len) = (beat.d_ready, beat.hdr_len);
        if beat.m_valid && m_ready {
            beat.keep_into(&mut got);
            if beat.last {
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
                let key = |s: &Shape| (s.format, s.segs, s.kind);
                if let Some(i) = all.iter().position(|s| key(s) == key(&d.shape)) {
                    seen[i] = true;
                }
            }
        }
        if d_ready && pending.is_some() {
            expect.extend(pending.take());
        }
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        return Err(mismatch(
            cycles,
            compared,
            format!("coverage: no packet of shape {:?} compared", all[i]),
        ));
    }
    Ok(Report {
        cycles,
        transactions: compared,
    })
}
