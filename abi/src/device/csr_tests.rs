extern crate std;
use super::*;
use crate::device::event::tests::event;
use proptest::prelude::*;
use std::vec;

#[test]
fn byte_literal_ack_summary() {
    let e = AckSummary {
        kind: 1,
        plane: 2,
        ev_index: 0x0304.into(),
        qpn_ecn: (0x0500_0007).into(),
        cum_psn: 0x10.into(),
        sack_base: 0x11.into(),
        bitmap: 0x8000_0000_0000_0001.into(),
        ce_count: 1.into(),
        pkt_count: 9.into(),
        echoed_ts: 0xAABB_CCDD.into(),
    };
    let b = CsrEvent::AckSummary(e).encode();
    assert_eq!(
        b,
        [
            1, 2, 4, 3, 7, 0, 0, 5, 0x10, 0, 0, 0, 0x11, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x80, 1, 0,
            9, 0, 0xDD, 0xCC, 0xBB, 0xAA
        ]
    );
    assert_eq!(CsrEvent::decode(&b), Ok(CsrEvent::AckSummary(e)));
    assert_eq!((e.qpn(), e.ecn_mask()), (7, 5));
    let mut bad = b;
    bad[11] = 1;
    assert_eq!(CsrEvent::decode(&bad), Err(CsrError::BadValue(8)));
    bad[0] = 0x42;
    assert_eq!(CsrEvent::decode(&bad), Err(CsrError::UnknownKind(0x42)));
    assert_eq!(CsrEvent::decode(&b[..31]), Err(CsrError::Truncated));
}

#[test]
fn constructors_decode() {
    use crate::Psn;
    let r = Retransmit::new(5, Psn::new(0xFF_FFFF), 3);
    assert_eq!(
        CsrEvent::decode(&CsrEvent::Retransmit(r).encode()),
        Ok(CsrEvent::Retransmit(r))
    );
    let u = EvUpdate::new(5, 7, EvState::Good, 1);
    assert_eq!(
        CsrEvent::decode(&CsrEvent::EvUpdate(u).encode()),
        Ok(CsrEvent::EvUpdate(u))
    );
    let bad = EvUpdate::new(5, 7, EvState::Good, 0);
    assert_eq!(
        CsrEvent::decode(&CsrEvent::EvUpdate(bad).encode()),
        Err(CsrError::BadValue(8))
    );
    let p = SendProbe::new(5, 7, 99);
    assert_eq!(
        CsrEvent::decode(&CsrEvent::SendProbe(p).encode()),
        Ok(CsrEvent::SendProbe(p))
    );
    let w = WindowUpdate::new(5, 65536, Psn::new(1000), 0);
    assert_eq!(
        CsrEvent::decode(&CsrEvent::WindowUpdate(w).encode()),
        Ok(CsrEvent::WindowUpdate(w))
    );
}

#[test]
fn ring_arithmetic() {
    let r = CsrRing::new(3).unwrap();
    assert_eq!(r.entries(), 8);
    assert_eq!(r.byte_offset(9), 32);
    assert!(r.is_full(u32::MAX.wrapping_add(8), u32::MAX));
    assert!(!r.is_full(7, 0));
    assert!(r.is_empty(5, 5));
    assert!(CsrRing::new(17).is_none());
}

fn psn() -> impl Strategy<Value = U32> {
    (0..QPN_LIMIT).prop_map(U32::new)
}

fn u32le() -> impl Strategy<Value = U32> {
    any::<u32>().prop_map(U32::new)
}

fn u16le() -> impl Strategy<Value = U16> {
    any::<u16>().prop_map(U16::new)
}

fn csr_event() -> impl Strategy<Value = CsrEvent> {
    prop_oneof![
        (
            any::<u8>(),
            u16le(),
            u32le(),
            psn(),
            psn(),
            any::<u64>(),
            u16le(),
            u16le(),
            u32le()
        )
            .prop_map(
                |(
                    plane,
                    ev_index,
                    qpn_ecn,
                    cum_psn,
                    sack_base,
                    bm,
                    ce_count,
                    pkt_count,
                    echoed_ts,
                )| {
                    CsrEvent::AckSummary(AckSummary {
                        kind: 1,
                        plane,
                        ev_index,
                        qpn_ecn,
                        cum_psn,
                        sack_base,
                        bitmap: bm.into(),
                        ce_count,
                        pkt_count,
                        echoed_ts,
                    })
                }
            ),
        (1u8..=8, u16le(), psn(), psn(), psn(), any::<u8>()).prop_map(
            |(reason, ev_index, qpn, psn, cum_psn, plane)| {
                CsrEvent::Nack(NackEntry {
                    kind: 2,
                    reason,
                    ev_index,
                    qpn,
                    psn,
                    cum_psn,
                    plane,
                    rsvd: [0; 15],
                })
            }
        ),
        (u16le(), psn(), psn(), u32le(), u32le()).prop_map(
            |(wqe_index, qpn, first_psn, num_packets, tx_ts)| {
                CsrEvent::TxDone(TxDone {
                    kind: 3,
                    rsvd: 0,
                    wqe_index,
                    qpn,
                    first_psn,
                    num_packets,
                    tx_ts,
                    rsvd2: [0; 12],
                })
            }
        ),
        (0u8..=1, u16le(), psn(), psn(), u32le(), u32le()).prop_map(
            |(flags, msn, qpn, last_psn, imm, byte_len)| {
                CsrEvent::WimmPlaced(WimmPlaced {
                    kind: 4,
                    flags,
                    msn,
                    qpn,
                    last_psn,
                    imm,
                    byte_len,
                    rsvd: [0; 12],
                })
            }
        ),
        (any::<u8>(), u16le(), psn(), u32le(), u32le()).prop_map(
            |(plane, ev_index, qpn, probe_id, echoed_ts)| {
                CsrEvent::ProbeReply(ProbeReply {
                    kind: 5,
                    plane,
                    ev_index,
                    qpn,
                    probe_id,
                    echoed_ts,
                    rsvd: [0; 16],
                })
            }
        ),
        (any::<u8>(), 0u8..=1, any::<u8>(), u32le()).prop_map(|(port, up, plane, speed_mbps)| {
            CsrEvent::PortEvent(PortEventEntry {
                kind: 6,
                port,
                up,
                plane,
                speed_mbps,
                rsvd: [0; 24],
            })
        }),
        (any::<u8>(), proptest::array::uniform7(any::<u32>())).prop_map(|(port, c)| {
            CsrEvent::RxDrops(RxDrops {
                kind: 7,
                port,
                rsvd: [0; 2],
                bad_checksum: c[0].into(),
                bad_header: c[1].into(),
                unknown_qp: c[2].into(),
                out_of_window: c[3].into(),
                no_buffer: c[4].into(),
                trimmed: c[5].into(),
                other: c[6].into(),
            })
        }),
        (u16le(), psn(), psn()).prop_map(|(ev_index, qpn, psn)| {
            CsrEvent::Retransmit(Retransmit {
                kind: 0x81,
                rsvd: 0,
                ev_index,
                qpn,
                psn,
                rsvd2: [0; 20],
            })
        }),
        (0u8..4, u16le(), psn(), 1u16..).prop_map(|(state, ev_index, qpn, w)| {
            CsrEvent::EvUpdate(EvUpdate {
                kind: 0x82,
                state,
                ev_index,
                qpn,
                weight: w.into(),
                rsvd: [0; 22],
            })
        }),
        (u16le(), psn(), u32le()).prop_map(|(ev_index, qpn, probe_id)| {
            CsrEvent::SendProbe(SendProbe {
                kind: 0x83,
                rsvd: 0,
                ev_index,
                qpn,
                probe_id,
                rsvd2: [0; 20],
            })
        }),
        (psn(), u32le(), psn(), u32le()).prop_map(|(qpn, cwnd_bytes, limit_psn, pacing_ns)| {
            CsrEvent::WindowUpdate(WindowUpdate {
                kind: 0x84,
                rsvd: [0; 3],
                qpn,
                cwnd_bytes,
                limit_psn,
                pacing_ns,
                rsvd2: [0; 12],
            })
        }),
        (
            0u8..13,
            1u8..=3,
            any::<bool>(),
            u32le(),
            psn(),
            u16le(),
            u32le(),
            u32le(),
            u32le()
        )
            .prop_map(
                |(status, opcode, sol, cqn, qpn, wqe_index, byte_len, imm, syndrome)| {
                    CsrEvent::PostCqe(PostCqe {
                        kind: 0x85,
                        status,
                        opcode,
                        flags: if sol { 2 } else { 0 },
                        cqn,
                        qpn,
                        wqe_index,
                        rsvd: 0.into(),
                        byte_len,
                        imm: if opcode == 3 { imm } else { 0.into() },
                        syndrome,
                        rsvd2: [0; 4],
                    })
                }
            ),
        event().prop_map(|e| CsrEvent::PostEvent(PostEvent::new(&e))),
    ]
}

proptest! {
    #[test]
    fn round_trip(e in csr_event()) {
        prop_assert_eq!(CsrEvent::decode(&e.encode()), Ok(e));
    }

    #[test]
    fn random_bytes_never_panic(b in proptest::array::uniform32(any::<u8>())) {
        if let Ok(e) = CsrEvent::decode(&b) {
            prop_assert_eq!(e.encode(), b);
        }
    }

    #[test]
    fn kind_byte_follows_the_variant(e in csr_event()) {
        let b = e.encode();
        prop_assert_eq!(b[0], e.kind() as u8);
        prop_assert_eq!(CsrKind::from_u8(b[0]), Some(e.kind()));
    }

    #[test]
    fn post_event_round_trip(e in event()) {
        prop_assert_eq!(PostEvent::new(&e).event(), Ok(e));
    }
}
