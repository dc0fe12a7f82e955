extern crate std;
use super::*;
use crate::device::event::tests::event;
use crate::wire::{EvFormat, NackReason};
use crate::Psn;
use proptest::prelude::*;
use std::vec;

#[test]
fn byte_literal_ack_summary() {
    let e = AckSummary::new(
        7,
        Psn::new(0x10),
        ACK_PROGRESS | ACK_ECN,
        0x0102_0304,
        0xAABB_CCDD,
        9,
        3,
        0x0304,
        2,
        0x0506,
    );
    let b = CsrEvent::AckSummary(e).encode();
    assert_eq!(
        b.0,
        [
            1, 0x09, 4, 3, 7, 0, 0, 0, 0x10, 0, 0, 0, 4, 3, 2, 1, 0xDD, 0xCC, 0xBB, 0xAA, 9, 0, 3,
            0, 2, 6, 5, 0, 0, 0, 0, 0
        ]
    );
    assert_eq!(b.decode(), Ok(CsrEvent::AckSummary(e)));
    assert_eq!(e.una(), Psn::new(0x10));
    assert!(e.has(ACK_PROGRESS) && !e.has(ACK_OUTSTANDING));
    let mut bad = b;
    bad.0[11] = 1;
    assert_eq!(bad.decode(), Err(CsrError::BadValue(8)));
    let mut bad = b;
    bad.0[1] = 0x80;
    assert_eq!(bad.decode(), Err(CsrError::ReservedSet));
    let mut bad = b;
    bad.0[31] = 1;
    assert_eq!(bad.decode(), Err(CsrError::ReservedSet));
    bad.0[0] = 0x42;
    assert_eq!(bad.decode(), Err(CsrError::UnknownKind(0x42)));
    assert_eq!(CsrEvent::decode(&b.0[..31]), Err(CsrError::Truncated));
}

#[test]
fn field_checks_name_the_field() {
    let r = Retransmit::new(5, Psn::new(9), EV_ANY, RETX_AVOID_LAST);
    assert_eq!(
        CsrEvent::Retransmit(r).encode().decode(),
        Ok(CsrEvent::Retransmit(r))
    );
    let mut bad = CsrEvent::Retransmit(r).encode();
    bad.0[1] = 2;
    assert_eq!(bad.decode(), Err(CsrError::ReservedSet));
    let w = PlaneWeight::new(1, 2, 0);
    assert_eq!(
        CsrEvent::PlaneWeight(w).encode().decode(),
        Err(CsrError::BadValue(2))
    );
    let rts = QpRtsCtx::new(1, Psn::new(0), 512, 1, 0, 0);
    assert_eq!(
        CsrEvent::QpRts(rts).encode().decode(),
        Err(CsrError::BadValue(1))
    );
    let fatal = RxFatal::new(1, Psn::new(0), NackReason::Trimmed);
    assert_eq!(
        CsrEvent::RxFatal(fatal).encode().decode(),
        Err(CsrError::BadValue(1))
    );
    let ok = Complete::new(3, 77, opcode::SEND, status::OK, 4, 0, 0);
    assert_eq!(
        CsrEvent::Complete(ok).encode().decode(),
        Err(CsrError::ReservedSet)
    );
    let nack = Complete::new(3, 77, opcode::SEND, status::REMOTE_NACK, 9, 0, 0);
    assert_eq!(
        CsrEvent::Complete(nack).encode().decode(),
        Err(CsrError::BadValue(3))
    );
    let init = QpInitCtx::new(1, 256, 0, EvFormat::Srv6, 0);
    assert_eq!(
        CsrEvent::QpInit(init).encode().decode(),
        Err(CsrError::BadValue(1))
    );
}

#[test]
fn byte_literal_region_write() {
    let e = RegionWrite::add(0x8000_015a, 0x40_0000_0000, 0x10_0000, REGION_REMOTE_WRITE);
    let b = CsrEvent::RegionWrite(e).encode();
    assert_eq!(
        b.0,
        [
            0x91, 1, 1, 0, 0x5a, 0x01, 0, 0x80, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0
        ]
    );
    assert_eq!(b.decode(), Ok(CsrEvent::RegionWrite(e)));
    let rm = CsrEvent::RegionWrite(RegionWrite::remove(7)).encode();
    assert_eq!(rm.0[..8], [0x91, 0, 0, 0, 7, 0, 0, 0]);
    assert!(rm.decode().is_ok());
    // A region past the end of the address space, an unknown op, an unknown access bit, a
    // removal with an address.
    let wraps = RegionWrite::add(1, u64::MAX - 4, 5, REGION_REMOTE_WRITE);
    assert_eq!(
        CsrEvent::RegionWrite(wraps).encode().decode(),
        Err(CsrError::BadValue(16))
    );
    let mut bad = b;
    bad.0[1] = 2;
    assert_eq!(bad.decode(), Err(CsrError::BadValue(1)));
    let mut bad = b;
    bad.0[2] = 4;
    assert_eq!(bad.decode(), Err(CsrError::ReservedSet));
    let mut bad = rm;
    bad.0[9] = 1;
    assert_eq!(bad.decode(), Err(CsrError::ReservedSet));
}

#[test]
fn probe_result_flags_and_round_trip() {
    let r = ProbeResult::new(0x12_3456, 9, 0xdead_beef, Some(2_500));
    let e = CsrEvent::ProbeResult(r).encode();
    assert_eq!(e.0[0], 0x92);
    assert_eq!(e.0[1], 1, "replied");
    assert_eq!(e.qpn_word(), 0x12_3456);
    assert_eq!(e.decode(), Ok(CsrEvent::ProbeResult(r)));
    let lost = CsrEvent::ProbeResult(ProbeResult::new(1, 2, 3, None)).encode();
    assert_eq!((lost.0[1], &lost.0[12..16]), (0, &[0u8; 4][..]));
    assert!(lost.check().is_ok());
    let mut bad = e;
    bad.0[1] = 2;
    assert_eq!(bad.check(), Err(CsrError::BadValue(1)), "replied is 0 or 1");
    let mut bad = e;
    bad.0[1] = 0;
    assert_eq!(
        bad.check(),
        Err(CsrError::BadValue(1)),
        "a timeout has no RTT"
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

#[test]
fn every_kind_is_either_an_event_or_a_command() {
    for k in CsrKind::ALL {
        assert_eq!(k.is_event(), (k as u8) < 0x80, "{k:?}");
        assert_eq!(CsrKind::from_u8(k as u8), Some(k));
    }
}

fn p24() -> impl Strategy<Value = u32> {
    0..QPN_LIMIT
}

fn psn() -> impl Strategy<Value = Psn> {
    p24().prop_map(Psn::new)
}

fn state() -> impl Strategy<Value = EvState> {
    proptest::sample::select(EvState::ALL.to_vec())
}

fn reason() -> impl Strategy<Value = NackReason> {
    proptest::sample::select(NackReason::ALL.to_vec())
}

fn fatal() -> impl Strategy<Value = NackReason> {
    reason().prop_filter("fatal", |r| r.is_fatal())
}

fn format() -> impl Strategy<Value = EvFormat> {
    proptest::sample::select(EvFormat::ALL.to_vec())
}

fn dp_event() -> impl Strategy<Value = CsrEvent> {
    prop_oneof![
        (
            p24(),
            psn(),
            0..=ACK_FLAGS,
            any::<u32>(),
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            any::<u16>()
        )
            .prop_map(|(q, u, f, b, r, d, s, e, p, n)| CsrEvent::AckSummary(
                AckSummary::new(q, u, f, b, r, d, s, e, p, n)
            )),
        (
            p24(),
            psn(),
            any::<u16>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            1u8..=1
        )
            .prop_map(|(q, s, e, p, l, d, c)| CsrEvent::Loss(LossEntry::new(q, s, e, p, l, d, c))),
        (
            p24(),
            psn(),
            reason(),
            any::<u16>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            0u8..=1
        )
            .prop_map(|(q, s, r, e, p, l, d, f)| CsrEvent::Nack(NackEntry::new(
                q, s, r, e, p, l, d, f
            ))),
        (p24(), psn()).prop_map(|(q, s)| CsrEvent::TxStart(TxStart::new(q, s))),
        (
            p24(),
            any::<u16>(),
            psn(),
            any::<u32>(),
            any::<u32>(),
            any::<bool>(),
            any::<u64>()
        )
            .prop_map(
                |(q, m, l, i, b, s, w)| CsrEvent::WimmPlaced(WimmPlaced::new(q, m, l, i, b, s, w))
            ),
        (p24(), any::<u16>(), any::<u8>(), any::<u32>(), any::<u32>())
            .prop_map(|(q, e, p, id, r)| CsrEvent::ProbeReply(ProbeReply::new(q, e, p, id, r))),
        (any::<u8>(), any::<u8>(), any::<bool>(), any::<u32>())
            .prop_map(|(port, p, up, s)| CsrEvent::PortEvent(PortEventEntry::new(port, p, up, s))),
        (any::<u8>(), proptest::array::uniform7(any::<u32>())).prop_map(|(port, c)| {
            CsrEvent::RxDrops(RxDrops {
                kind: CsrKind::RxDrops as u8,
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
        (p24(), psn(), fatal()).prop_map(|(q, s, r)| CsrEvent::RxFatal(RxFatal::new(q, s, r))),
        (p24(), any::<u64>(), 0u8..=3)
            .prop_map(|(q, w, f)| CsrEvent::Flushed(Flushed::new(q, w, f))),
        (p24(), any::<u16>(), any::<u32>())
            .prop_map(|(q, e, c)| CsrEvent::EvDeliveries(EvDeliveries::new(q, e, c))),
        (p24(), any::<u16>()).prop_map(|(q, e)| CsrEvent::SkipServed(SkipServed::new(q, e))),
    ]
}

fn fw_command() -> impl Strategy<Value = CsrEvent> {
    prop_oneof![
        (p24(), psn(), any::<u16>(), 0u8..=1)
            .prop_map(|(q, s, e, f)| CsrEvent::Retransmit(Retransmit::new(q, s, e, f))),
        (p24(), any::<u16>(), state(), any::<u8>())
            .prop_map(|(q, e, s, p)| CsrEvent::EvUpdate(EvUpdate::new(q, e, s, p))),
        (p24(), any::<u8>(), 1u8..=15)
            .prop_map(|(q, p, w)| CsrEvent::PlaneWeight(PlaneWeight::new(q, p, w))),
        (p24(), any::<u16>(), any::<u8>(), any::<u32>())
            .prop_map(|(q, e, p, id)| CsrEvent::SendProbe(SendProbe::new(q, e, p, id))),
        (p24(), any::<u64>()).prop_map(|(q, w)| CsrEvent::WindowUpdate(WindowUpdate::new(q, w))),
        (
            p24(),
            1..=COMPLETE_SENDS_MAX,
            proptest::option::of(any::<u32>())
        )
            .prop_map(|(q, n, cq)| {
                let c = CompleteSends::new(q, n);
                CsrEvent::CompleteSends(cq.map_or(c, |cq| c.with_cq(cq)))
            }),
        (
            0u8..13,
            1u8..=3,
            any::<bool>(),
            any::<u32>(),
            p24(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(status, opcode, sol, cqn, qpn, wqe_index, byte_len, imm, syndrome)| {
                    CsrEvent::PostCqe(PostCqe {
                        kind: CsrKind::PostCqe as u8,
                        status,
                        opcode,
                        flags: if sol { 2 } else { 0 },
                        cqn: cqn.into(),
                        qpn: qpn.into(),
                        wqe_index: wqe_index.into(),
                        rsvd: 0.into(),
                        byte_len: byte_len.into(),
                        imm: if opcode == 3 { imm.into() } else { 0.into() },
                        syndrome: syndrome.into(),
                        rsvd2: [0; 4],
                    })
                }
            ),
        event().prop_map(|e| CsrEvent::PostEvent(PostEvent::new(&e))),
        (
            p24(),
            any::<u64>(),
            0..=status::FLUSHED,
            reason(),
            any::<u32>(),
            any::<u16>()
        )
            .prop_map(|(q, w, s, r, imm, msn)| {
                let reason = if matches!(s, status::REMOTE_NACK | status::LOCAL_QP_ERROR) {
                    r as u8
                } else {
                    0
                };
                let (op, imm, msn) = match s {
                    status::OK => (opcode::RECV_IMM, imm, msn),
                    status::FLUSHED => (opcode::RECV, 0, 0),
                    _ => (opcode::SEND, 0, 0),
                };
                CsrEvent::Complete(Complete::new(q, w, op, s, reason, imm, msn))
            }),
        (p24(), any::<u16>(), state(), state(), any::<u8>())
            .prop_map(|(q, e, o, n, r)| CsrEvent::EvEvent(EvEventEntry::new(q, e, o, n, r))),
        p24().prop_map(|q| CsrEvent::RetransmitUnacked(RetransmitUnacked::new(q))),
        p24().prop_map(|q| CsrEvent::TailProbe(TailProbe::new(q))),
        any::<u8>().prop_map(|p| CsrEvent::PlaneDown(PlaneDown::new(p))),
        (p24(), any::<u16>(), 1u8.., format(), any::<u32>())
            .prop_map(|(q, e, p, f, v)| CsrEvent::QpInit(QpInitCtx::new(q, e, p, f, v))),
        (p24(), psn(), any::<u32>(), any::<u16>(), p24())
            .prop_map(|(q, s, m, w, d)| CsrEvent::QpRtr(QpRtrCtx::new(q, s, m, w, d))),
        (
            p24(),
            psn(),
            any::<u32>(),
            any::<u16>(),
            1u8..=63,
            any::<u32>()
        )
            .prop_map(|(q, s, m, w, t, n)| CsrEvent::QpRts(QpRtsCtx::new(q, s, m, w, t, n))),
        (p24(), 0..=QP_ERROR).prop_map(|(q, s)| CsrEvent::QpState(QpStateEntry::new(q, s))),
        (any::<u32>(), any::<u64>(), any::<u64>(), 0u8..4).prop_map(|(k, va, len, a)| {
            CsrEvent::RegionWrite(RegionWrite::add(k, va, len.min(u64::MAX - va), a))
        }),
        any::<u32>().prop_map(|k| CsrEvent::RegionWrite(RegionWrite::remove(k))),
        (
            p24(),
            any::<u16>(),
            any::<u32>(),
            proptest::option::of(any::<u32>())
        )
            .prop_map(|(q, e, id, r)| CsrEvent::ProbeResult(ProbeResult::new(q, e, id, r))),
    ]
}

fn csr_event() -> impl Strategy<Value = CsrEvent> {
    prop_oneof![dp_event(), fw_command()]
}

proptest! {
    #[test]
    fn round_trip(e in csr_event()) {
        prop_assert_eq!(e.encode().decode(), Ok(e));
    }

    #[test]
    fn random_bytes_never_panic(b in proptest::array::uniform32(any::<u8>())) {
        if let Ok(e) = CsrEvent::decode(&b) {
            prop_assert_eq!(e.encode().0, b);
        }
    }

    /// The in-place check and view agree with the copying decode, on valid entries and on
    /// entries with one byte changed.
    #[test]
    fn check_and_view_agree_with_decode(
        e in csr_event(),
        at in 0usize..32,
        x in any::<u8>(),
        flip in any::<bool>(),
    ) {
        let mut b = e.encode();
        if flip {
            b.0[at] ^= x;
        }
        let decoded = b.decode();
        prop_assert_eq!(b.check(), decoded.map(|d| d.kind()));
        if let Ok(CsrEvent::AckSummary(a)) = decoded {
            prop_assert_eq!(*b.view::<AckSummary>(), a);
        }
        if let Ok(CsrEvent::CompleteSends(c)) = decoded {
            prop_assert_eq!(*b.view::<CompleteSends>(), c);
        }
    }

    #[test]
    fn kind_byte_follows_the_variant(e in csr_event()) {
        let b = e.encode();
        prop_assert_eq!(b.kind_code(), e.kind() as u8);
        prop_assert_eq!(CsrKind::from_u8(b.kind_code()), Some(e.kind()));
    }

    #[test]
    fn events_and_commands_are_on_their_side(e in dp_event(), c in fw_command()) {
        prop_assert!(e.kind().is_event());
        prop_assert!(!c.kind().is_event());
    }

    #[test]
    fn post_event_round_trip(e in event()) {
        prop_assert_eq!(PostEvent::new(&e).event(), Ok(e));
    }

    #[test]
    fn check_agrees_with_decode_on_any_kind(
        e in csr_event(),
        at in 1usize..32,
        byte in any::<u8>(),
        b in proptest::array::uniform32(any::<u8>()),
        kind in proptest::sample::select(CsrKind::ALL.to_vec()),
    ) {
        // A valid entry, the same with one byte changed, and random bytes of a known kind.
        let valid = e.encode();
        let mut changed = valid;
        changed.0[at] = byte;
        let mut random = CsrEntry(b);
        random.0[0] = kind as u8;
        for x in [valid, changed, random] {
            prop_assert_eq!(x.check(), x.decode().map(|d| d.kind()));
        }
    }
}

#[test]
fn reserved_masks_cover_the_rsvd_fields() {
    // Flushed: rsvd (U16) at 2..4, rsvd2 ([u8; 8]) at 8..16, rsvd3 ([u8; 8]) at 24..32.
    assert_eq!(
        Flushed::RESERVED,
        [
            0xFFFF_0000,
            0,
            0xFFFF_FFFF,
            0xFFFF_FFFF,
            0,
            0,
            0xFFFF_FFFF,
            0xFFFF_FFFF
        ]
    );
    // CompleteSends: rsvd ([u8; 20]) at 12..32.
    assert_eq!(CompleteSends::RESERVED, [0, 0, 0, !0, !0, !0, !0, !0]);
    // PlaneDown: everything after the kind and the plane.
    assert_eq!(
        PlaneDown::RESERVED,
        [0xFFFF_0000, !0, !0, !0, !0, !0, !0, !0]
    );
    // Every reserved byte of a valid entry of every kind is checked.
    let samples = [
        CsrEvent::Flushed(Flushed::new(3, 9, FLUSH_SIGNALED)),
        CsrEvent::CompleteSends(CompleteSends::new(3, COMPLETE_SENDS_MAX)),
        CsrEvent::PlaneDown(PlaneDown::new(1)),
        CsrEvent::RegionWrite(RegionWrite::add(1, 2, 3, REGION_REMOTE_WRITE)),
        CsrEvent::QpRts(QpRtsCtx::new(1, Psn::new(0), 512, 1, 8, 0)),
    ];
    for s in samples {
        let e = s.encode();
        assert!(e.check().is_ok());
        let mask = match s {
            CsrEvent::Flushed(_) => Flushed::RESERVED,
            CsrEvent::CompleteSends(_) => CompleteSends::RESERVED,
            CsrEvent::PlaneDown(_) => PlaneDown::RESERVED,
            CsrEvent::RegionWrite(_) => RegionWrite::RESERVED,
            _ => QpRtsCtx::RESERVED,
        };
        for b in 0..32 {
            if mask[b / 4] >> ((b % 4) * 8) & 0xFF == 0 {
                continue;
            }
            let mut bad = e;
            bad.0[b] = 0x10;
            assert_eq!(bad.check(), Err(CsrError::ReservedSet), "{s:?} byte {b}");
        }
    }
}

/// `has_qpn_word` names exactly the kinds whose decoded entry has a QPN, other than `PostCqe`,
/// and `qpn_word` reads that QPN.
#[test]
fn the_qpn_word_is_the_decoded_qpn() {
    let samples = [
        CsrEvent::TxStart(TxStart::new(5, crate::Psn::new(1))),
        CsrEvent::PortEvent(PortEventEntry::new(1, 1, true, 1)),
        CsrEvent::PlaneDown(PlaneDown::new(2)),
        CsrEvent::TailProbe(TailProbe::new(5)),
        CsrEvent::RegionWrite(RegionWrite::remove(5)),
        CsrEvent::QpState(QpStateEntry::new(5, QP_RESET)),
    ];
    for s in samples {
        let mut e = s.encode();
        assert_eq!(
            CsrKind::has_qpn_word(e.kind_code()),
            s.qpn().is_some(),
            "{s:?}"
        );
        if let Some(q) = s.qpn() {
            assert_eq!(e.qpn_word(), q);
            e.set_qpn_word(q + 1);
            assert_eq!(e.decode().unwrap().qpn(), Some(q + 1));
        }
    }
    for k in CsrKind::ALL {
        assert_eq!(
            CsrKind::has_qpn_word(k as u8),
            CsrKind::WITH_QPN_WORD.contains(&k),
            "{k:?}"
        );
    }
    assert!(!CsrKind::has_qpn_word(CsrKind::PostCqe as u8));
    assert!(!CsrKind::has_qpn_word(0x41) && !CsrKind::has_qpn_word(0xC1));
}
