//! Property tests: every `Repr` survives emit -> parse unchanged, and no input makes a parser
//! panic.

use mrc_abi::wire::bth::{BthPacket, BthRepr, Opcode, HEADER_LEN as BTH_LEN};
use mrc_abi::wire::ethernet::{EthernetAddress, EthernetPacket, EthernetRepr};
use mrc_abi::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use mrc_abi::wire::mrc::{MrcPacket, MrcRepr};
use mrc_abi::wire::srh::{SrhPacket, SrhRepr};
use mrc_abi::wire::{
    samples, usid, AckRepr, Body, Encap, EvFormat, EvxRepr, Frame, Header, MrhRepr, NackReason,
    NackRepr, ProbeRepr, RethRepr, Segment, TsxRepr, UdpRepr, IP_PROTO_IPV6, IP_PROTO_ROUTING,
    IP_PROTO_UDP,
};
use mrc_abi::Psn;
use proptest::prelude::*;
use std::net::Ipv6Addr;

fn addr() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

fn psn() -> impl Strategy<Value = Psn> {
    (0u32..Psn::MODULUS).prop_map(Psn::new)
}

fn ipv6(next_header: u8) -> impl Strategy<Value = Ipv6Repr> {
    (addr(), addr(), any::<u8>(), any::<u8>(), 0u32..(1 << 20)).prop_map(
        move |(src, dst, hop_limit, traffic_class, flow_label)| Ipv6Repr {
            src,
            dst,
            next_header,
            hop_limit,
            traffic_class,
            flow_label,
        },
    )
}

fn srh() -> impl Strategy<Value = SrhRepr> {
    (
        prop::collection::vec(addr(), 1..=16),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        0usize..8,
    )
        .prop_map(|(segs, sl, flags, tag, pad_tlv)| {
            let mut r = SrhRepr::from_path(IP_PROTO_IPV6, &segs).unwrap();
            r.segments_left = sl % segs.len() as u8;
            r.flags = flags;
            r.tag = tag;
            // A well-formed TLV area that is already a multiple of 8 bytes: one PadN.
            if pad_tlv > 0 {
                let mut t = vec![4u8, 8 * pad_tlv as u8 - 2];
                t.resize(8 * pad_tlv, 0);
                r.tlvs = heapless::Vec::from_slice(&t).unwrap();
            }
            r
        })
}

fn segment() -> impl Strategy<Value = Segment> {
    prop_oneof![
        Just(Segment::First),
        Just(Segment::Middle),
        any::<Option<u32>>().prop_map(|imm| Segment::Last { imm }),
        any::<Option<u32>>().prop_map(|imm| Segment::Only { imm }),
    ]
}

fn body() -> impl Strategy<Value = Body> {
    let reth = (any::<u64>(), any::<u32>(), any::<u32>())
        .prop_map(|(va, rkey, dma_len)| RethRepr { va, rkey, dma_len });
    let ack = (
        psn(),
        psn(),
        any::<u64>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(
            |(
                cum_psn,
                sack_base,
                sack_bitmap,
                ev_index,
                plane,
                ecn_plane_mask,
                ce_count,
                pkt_count,
            )| AckRepr {
                cum_psn,
                sack_base,
                sack_bitmap,
                ev_index,
                plane,
                ecn_plane_mask,
                ce_count,
                pkt_count,
            },
        );
    let nack = (
        prop::sample::select(NackReason::ALL.to_vec()),
        psn(),
        psn(),
        any::<u16>(),
        any::<u8>(),
    )
        .prop_map(|(reason, psn, cum_psn, ev_index, plane)| NackRepr {
            reason,
            psn,
            cum_psn,
            ev_index,
            plane,
        });
    let probe =
        (any::<u32>(), any::<u16>(), any::<u8>()).prop_map(|(probe_id, ev_index, plane)| {
            ProbeRepr {
                probe_id,
                ev_index,
                plane,
            }
        });
    prop_oneof![
        (segment(), reth).prop_map(|(segment, reth)| Body::Write { segment, reth }),
        ack.prop_map(Body::Ack),
        nack.prop_map(Body::Nack),
        probe.clone().prop_map(Body::Probe),
        probe.prop_map(Body::ProbeReply),
    ]
}

fn mrc(format: EvFormat) -> impl Strategy<Value = MrcRepr> {
    (
        body(),
        any::<(bool, u16, bool, bool, u32, bool)>(),
        any::<(bool, bool, bool, u16)>(),
        any::<Option<(u16, u8, u32)>>(),
        any::<Option<(u32, u32)>>(),
    )
        .prop_map(
            move |(
                body,
                (se, pkey, fecn, becn, qp, ack_req),
                (trimmed, tlh, retransmit, msn),
                evx,
                tsx,
            )| {
                MrcRepr {
                    bth: BthRepr {
                        opcode: body.opcode(),
                        se,
                        pkey,
                        fecn,
                        becn,
                        dest_qp: qp & 0xff_ffff,
                        ack_req,
                        psn: Psn::new(qp),
                    },
                    mrh: MrhRepr {
                        ev_format: format,
                        trimmed,
                        trimmed_last_hop: tlh,
                        retransmit,
                        msn,
                    },
                    evx: evx.map(|(ev_index, plane, ev_value)| EvxRepr {
                        ev_index,
                        plane,
                        ev_value,
                    }),
                    tsx: tsx.map(|(tx_ts_ns, echo_ts_ns)| TsxRepr {
                        tx_ts_ns,
                        echo_ts_ns,
                    }),
                    body,
                }
            },
        )
}

fn frame() -> impl Strategy<Value = Frame<'static>> {
    let format = prop::sample::select(EvFormat::ALL.to_vec());
    (
        format,
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        any::<u16>(),
        0usize..=256,
    )
        .prop_flat_map(|(format, d, s, port, plen)| {
            let encap = match format {
                EvFormat::Srv6 => (
                    ipv6(IP_PROTO_IPV6),
                    prop::option::of(srh()),
                    ipv6(IP_PROTO_UDP),
                )
                    .prop_map(|(mut outer, srh, inner)| {
                        if srh.is_some() {
                            outer.next_header = IP_PROTO_ROUTING;
                        }
                        Encap::Srv6 { outer, srh, inner }
                    })
                    .boxed(),
                _ => ipv6(IP_PROTO_UDP).prop_map(Encap::Plain).boxed(),
            };
            (encap, mrc(format)).prop_map(move |(encap, mut mrc)| {
                // Keep the frame consistent with the rules parse enforces: payload only on
                // untrimmed writes, and RETH DMA length equal to it.
                let payload: &'static [u8] = match &mut mrc.body {
                    Body::Write { reth, .. } if !mrc.mrh.trimmed => {
                        reth.dma_len = plen as u32;
                        &samples::PAYLOAD[..plen]
                    }
                    _ => &[],
                };
                Frame {
                    eth: EthernetRepr {
                        dst: EthernetAddress(d),
                        src: EthernetAddress(s),
                    },
                    encap,
                    udp: UdpRepr { src_port: port },
                    mrc,
                    payload,
                }
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ethernet_round_trip(d in any::<[u8; 6]>(), s in any::<[u8; 6]>()) {
        let r = EthernetRepr { dst: EthernetAddress(d), src: EthernetAddress(s) };
        let mut b = [0u8; 14];
        r.emit(&mut EthernetPacket::new_unchecked(&mut b[..]));
        prop_assert_eq!(EthernetRepr::parse(&EthernetPacket::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn ipv6_round_trip(r in ipv6(IP_PROTO_UDP), extra in 0usize..64) {
        let mut b = vec![0u8; 40 + extra];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]), extra as u16);
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..], Header::Ipv6).unwrap(), Header::Ipv6), Ok(r));
    }

    #[test]
    fn srh_round_trip(r in srh()) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut SrhPacket::new_unchecked(&mut b[..]));
        let p = SrhPacket::new_checked(&b[..]).unwrap();
        prop_assert_eq!(p.header_len(), r.buffer_len());
        prop_assert_eq!(SrhRepr::parse(&p), Ok(r));
    }

    #[test]
    fn bth_round_trip(op in prop::sample::select(Opcode::ALL.to_vec()), qp in 0u32..(1 << 24), p in psn(), f in any::<(bool, bool, bool, bool, u16)>()) {
        let r = BthRepr { opcode: op, se: f.0, pkey: f.4, fecn: f.1, becn: f.2, dest_qp: qp, ack_req: f.3, psn: p };
        let mut b = [0u8; BTH_LEN];
        r.emit(&mut BthPacket::new_unchecked(&mut b[..]));
        prop_assert_eq!(BthRepr::parse(&BthPacket::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn mrc_headers_round_trip(r in mrc(EvFormat::Udp)) {
        let mut b = vec![0u8; r.header_len()];
        r.emit(&mut b);
        let mut r2 = r;
        if let Body::Write { reth, .. } = &mut r2.body {
            // Without payload, parse demands DMA length 0 unless the packet is trimmed.
            if !r.mrh.trimmed && reth.dma_len != 0 {
                reth.dma_len = 0;
                r2.emit(&mut b);
            }
        }
        prop_assert_eq!(MrcRepr::parse(&MrcPacket::new_checked(&b[..]).unwrap()), Ok(r2));
    }

    #[test]
    fn frame_round_trip(f in frame()) {
        let mut b = vec![0u8; f.buffer_len()];
        let n = f.emit(&mut b).unwrap();
        prop_assert_eq!(n, b.len());
        prop_assert_eq!(Frame::parse(&b), Ok(f));
    }

    #[test]
    fn usid_shift_consumes_in_order(usids in prop::collection::vec(1u16.., 0..=6)) {
        let mut c = usid::carrier(usid::DEFAULT_BLOCK, &usids).unwrap();
        for u in &usids {
            prop_assert_eq!(usid::active(c), *u);
            c = usid::shift(c);
            prop_assert_eq!(usid::block(c), usid::DEFAULT_BLOCK);
        }
        prop_assert!(usid::is_end_of_carrier(c));
    }

    #[test]
    fn parse_never_panics_on_random_bytes(b in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = Frame::parse(&b);
    }

    #[test]
    fn parse_never_panics_on_mutated_frames(f in frame(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
        let mut b = vec![0u8; f.buffer_len()];
        f.emit(&mut b).unwrap();
        for (i, v) in flips {
            let i = i.index(b.len());
            b[i] = v;
        }
        let end = cut.index(b.len() + 1);
        let _ = Frame::parse(&b[..end]);
        let _ = Frame::parse(&b);
    }
}
