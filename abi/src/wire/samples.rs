//! Sample frames: one of every kind in every EV format, with fixed field values. Used by the
//! `pcap samples` example, the Wireshark cross-check and the tests.

use super::bth::{BthRepr, Opcode, DEFAULT_PKEY};
use super::ethernet::{EthernetAddress, EthernetRepr};
use super::ev::{stev_encode, EvFormat};
use super::frame::{Encap, Frame};
use super::ipv6::Ipv6Repr;
use super::mrc::{
    AckRepr, Body, EvxRepr, MrcRepr, MrhRepr, NackReason, NackRepr, ProbeRepr, RethRepr, Segment,
    TsxRepr,
};
use super::srh::SrhRepr;
use super::udp::UdpRepr;
use super::usid::{carrier, DEFAULT_BLOCK};
use super::{IP_PROTO_IPV6, IP_PROTO_ROUTING, IP_PROTO_UDP};
use crate::Psn;
use core::net::Ipv6Addr;

/// The payload of sample write packets: 256 bytes of a counting pattern.
pub static PAYLOAD: [u8; 256] = {
    let mut p = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        p[i] = (i as u8).wrapping_mul(7).wrapping_add(1);
        i += 1;
    }
    p
};

/// An EV value used by the samples.
pub const SAMPLE_EV_VALUE: u32 = 0x1234_5678;
const SRC_NIC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 1);
const DST_NIC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 2, 0, 0, 0, 2);

/// The EV value samples carry in their EVX: the UDP source port, the STEV value, or the index of
/// the SRv6 route in the EV profile.
pub const fn sample_ev_value(format: EvFormat) -> u32 {
    match format {
        EvFormat::Udp => SAMPLE_UDP_PORT as u32,
        EvFormat::Stev => SAMPLE_EV_VALUE,
        EvFormat::Srv6 => 7,
    }
}

const SAMPLE_UDP_PORT: u16 = 0xd00d;

/// The encapsulations the samples cover: the three EV formats, SRv6 with and without an SRH.
pub const ENCAPS: [(EvFormat, bool); 4] = [
    (EvFormat::Udp, false),
    (EvFormat::Stev, false),
    (EvFormat::Srv6, false),
    (EvFormat::Srv6, true),
];

fn ip(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, flow_label: u32) -> Ipv6Repr {
    Ipv6Repr {
        src,
        dst,
        next_header,
        hop_limit: 64,
        traffic_class: 0x02,
        flow_label,
    }
}

/// Headers for a packet in `format` (with an SRH when `with_srh` and the format is SRv6).
fn encap(format: EvFormat, with_srh: bool) -> (Encap, UdpRepr) {
    match format {
        EvFormat::Udp => (
            Encap::Plain(ip(SRC_NIC, DST_NIC, IP_PROTO_UDP, 0)),
            UdpRepr {
                src_port: SAMPLE_UDP_PORT,
            },
        ),
        EvFormat::Stev => {
            let (fl, port) = stev_encode(SAMPLE_EV_VALUE);
            (
                Encap::Plain(ip(SRC_NIC, DST_NIC, IP_PROTO_UDP, fl)),
                UdpRepr { src_port: port },
            )
        }
        EvFormat::Srv6 => {
            // Both carriers are valid by construction: non-zero uSIDs, at most six.
            let c1 =
                carrier(DEFAULT_BLOCK, &[0x0101, 0x0201, 0x0302]).unwrap_or(Ipv6Addr::UNSPECIFIED);
            let c2 = carrier(DEFAULT_BLOCK, &[0x0402, 0x0503]).unwrap_or(Ipv6Addr::UNSPECIFIED);
            let srh = with_srh
                .then(|| SrhRepr::from_path(IP_PROTO_IPV6, &[c1, c2]).ok())
                .flatten();
            let nh = if srh.is_some() {
                IP_PROTO_ROUTING
            } else {
                IP_PROTO_IPV6
            };
            let outer = ip(Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 0xff), c1, nh, 0);
            let inner = ip(SRC_NIC, DST_NIC, IP_PROTO_UDP, 0);
            (
                Encap::Srv6 { outer, srh, inner },
                UdpRepr {
                    src_port: SAMPLE_UDP_PORT,
                },
            )
        }
    }
}

/// A frame with the given body in the given format; write bodies carry `payload`.
pub fn frame(
    format: EvFormat,
    with_srh: bool,
    body: Body,
    payload: &'static [u8],
) -> Frame<'static> {
    let (encap, udp) = encap(format, with_srh);
    let control = !body.opcode().is_write();
    Frame {
        eth: EthernetRepr {
            dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src: EthernetAddress([2, 0, 0, 0, 0, 1]),
        },
        encap,
        udp,
        mrc: MrcRepr {
            bth: BthRepr {
                opcode: body.opcode(),
                se: body.opcode().has_imm(),
                pkey: DEFAULT_PKEY,
                fecn: false,
                becn: false,
                dest_qp: 0x12,
                ack_req: !control,
                psn: Psn::new(100),
            },
            mrh: MrhRepr {
                ev_format: format,
                trimmed: false,
                trimmed_last_hop: false,
                retransmit: false,
                msn: 7,
            },
            evx: Some(EvxRepr {
                ev_index: 42,
                plane: 3,
                ev_value: sample_ev_value(format),
            }),
            tsx: Some(TsxRepr {
                tx_ts_ns: 1_000_000,
                echo_ts_ns: if control { 999_000 } else { 0 },
            }),
            body,
        },
        payload: if control { &[] } else { payload },
    }
}

/// The body of a sample packet with opcode `op`.
pub fn body(op: Opcode) -> Body {
    let write = |segment| Body::Write {
        segment,
        reth: RethRepr {
            va: 0x7f00_0000_1000,
            rkey: 0xabcd,
            dma_len: PAYLOAD.len() as u32,
        },
    };
    let probe = ProbeRepr {
        probe_id: 9,
        ev_index: 42,
        plane: 3,
    };
    match op {
        Opcode::WriteFirst => write(Segment::First),
        Opcode::WriteMiddle => write(Segment::Middle),
        Opcode::WriteLast => write(Segment::Last { imm: None }),
        Opcode::WriteLastImm => write(Segment::Last {
            imm: Some(0xfeed_beef),
        }),
        Opcode::WriteOnly => write(Segment::Only { imm: None }),
        Opcode::WriteOnlyImm => write(Segment::Only {
            imm: Some(0xfeed_beef),
        }),
        Opcode::Ack => Body::Ack(AckRepr {
            cum_psn: Psn::new(96),
            sack_base: Psn::new(96),
            sack_bitmap: 0b1011_0000,
            ev_index: 42,
            plane: 3,
            ecn_plane_mask: 0b1000,
            ce_count: 1,
            pkt_count: 4,
        }),
        Opcode::Nack => Body::Nack(sample_nack()),
        Opcode::EvProbe => Body::Probe(probe),
        Opcode::EvProbeReply => Body::ProbeReply(probe),
    }
}

fn sample_nack() -> NackRepr {
    NackRepr {
        reason: NackReason::Trimmed,
        psn: Psn::new(97),
        cum_psn: Psn::new(96),
        ev_index: 42,
        plane: 3,
    }
}

/// A Write-with-Immediate sample (used by the crate's doc example).
pub fn write_only_imm(format: EvFormat, with_srh: bool) -> Frame<'static> {
    frame(format, with_srh, body(Opcode::WriteOnlyImm), &PAYLOAD)
}

/// A name like `srv6-srh/WRITE_ONLY_IMM`.
pub type Name = heapless::String<48>;

fn name(format: EvFormat, with_srh: bool, what: &str) -> Name {
    let mut n = Name::new();
    let _ = n.push_str(format.name());
    if with_srh {
        let _ = n.push_str("-srh");
    }
    let _ = n.push('/');
    let _ = n.push_str(what);
    n
}

/// One frame of every opcode in every encapsulation of [`ENCAPS`], then one NACK of every
/// reason and a trimmed write per encapsulation.
pub fn all() -> impl Iterator<Item = (Name, Frame<'static>)> {
    let by_opcode = ENCAPS.into_iter().flat_map(|(f, s)| {
        Opcode::ALL
            .into_iter()
            .map(move |op| (name(f, s, op.name()), frame(f, s, body(op), &PAYLOAD)))
    });
    let nacks = NackReason::ALL.into_iter().map(|reason| {
        let mut nm = name(EvFormat::Srv6, false, "NACK_");
        let _ = nm.push_str(reason.name());
        (
            nm,
            frame(
                EvFormat::Srv6,
                false,
                Body::Nack(NackRepr {
                    reason,
                    ..sample_nack()
                }),
                &[],
            ),
        )
    });
    let trimmed = ENCAPS.into_iter().map(|(f, s)| {
        let mut fr = frame(f, s, body(Opcode::WriteMiddle), &[]);
        fr.mrc.mrh.trimmed = true;
        fr.mrc.mrh.retransmit = true;
        (name(f, s, "WRITE_MIDDLE_TRIMMED"), fr)
    });
    by_opcode.chain(nacks).chain(trimmed)
}
