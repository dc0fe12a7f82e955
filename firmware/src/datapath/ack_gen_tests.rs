use super::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::vec::Vec;

extern crate std;

type Gen = AckGen<4>; // 256-PSN window

const CFG: AckGenConfig = AckGenConfig {
    coalesce_pkts: 4,
    coalesce_ns: 1_000,
    ack_on_gap: true,
};

fn data(psn: u32) -> RxPacket {
    RxPacket {
        psn: Psn::new(psn),
        ev_index: 7,
        plane: 1,
        tx_ts_ns: 1000 + psn,
        ..RxPacket::default()
    }
}

fn ack(d: AckDecision) -> AckSummary {
    match d.event {
        Some(AckEvent::Ack(a)) => a,
        other => panic!("expected an ACK, got {other:?}"),
    }
}

fn nack(d: AckDecision) -> NackSummary {
    match d.event {
        Some(AckEvent::Nack(n)) => n,
        other => panic!("expected a NACK, got {other:?}"),
    }
}

#[test]
fn nack_reason_codes_round_trip() {
    for code in 0..=255u8 {
        match NackReason::from_u8(code) {
            Ok(r) => assert_eq!(r as u8, code),
            Err(_) => assert!(code == 0 || code > 8),
        }
    }
    assert_eq!(NackReason::TooManyWimm as u8, 8);
    assert!(NackReason::Length.is_fatal());
    assert!(!NackReason::Trimmed.is_fatal());
}

#[test]
fn acks_every_n_packets() {
    let mut g = Gen::new(0x42, Psn::new(0), CFG);
    for psn in 0..3 {
        let d = g.handle_packet(10, &data(psn));
        assert_eq!((d.outcome, d.place, d.event), (RxOutcome::New, true, None));
    }
    let a = ack(g.handle_packet(20, &data(3)));
    assert_eq!(
        a,
        AckSummary {
            qpn: 0x42,
            cum_psn: Psn::new(4),
            sack_base: Psn::new(4),
            sack_bitmap: 0,
            ev_index: 7,
            plane: 1,
            ecn_plane_mask: 0,
            ce_count: 0,
            pkt_count: 4,
            echo_ts_ns: 1003,
        }
    );
    assert_eq!(g.pending_packets(), 0);
    assert_eq!(g.poll_timeout(), None);
    assert_eq!(g.counters().acks_count, 1);
}

#[test]
fn timer_flushes_the_interval() {
    let mut g = Gen::new(1, Psn::new(0), CFG);
    assert_eq!(g.handle_packet(100, &data(0)).event, None);
    assert_eq!(g.handle_packet(500, &data(1)).event, None);
    assert_eq!(g.poll_timeout(), Some(1_100));
    assert_eq!(g.handle_timeout(1_099), None);
    let a = g.handle_timeout(1_100).unwrap();
    assert_eq!(
        (a.cum_psn, a.pkt_count, a.echo_ts_ns),
        (Psn::new(2), 2, 1001)
    );
    assert_eq!(g.poll_timeout(), None);
    assert_eq!(g.handle_timeout(5_000), None);
    assert_eq!(g.counters().acks_timer, 1);
}

#[test]
fn gap_acks_at_once_but_filling_does_not() {
    let mut g = Gen::new(1, Psn::new(0), CFG);
    assert_eq!(g.handle_packet(0, &data(0)).event, None);
    let a = ack(g.handle_packet(0, &data(2)));
    assert_eq!(
        (a.cum_psn, a.sack_base, a.sack_bitmap, a.pkt_count),
        (Psn::new(1), Psn::new(1), 0b10, 2)
    );
    // Extends the top contiguously: no new hole.
    assert_eq!(g.handle_packet(0, &data(3)).event, None);
    // Fills the hole.
    assert_eq!(g.handle_packet(0, &data(1)).event, None);
    assert_eq!(g.rx().cum_psn(), Psn::new(4));
    // Opens another hole.
    let a = ack(g.handle_packet(0, &data(6)));
    assert_eq!(
        (a.cum_psn, a.sack_bitmap, a.pkt_count),
        (Psn::new(4), 0b100, 3)
    );
    assert_eq!(g.counters().acks_gap, 2);
}

#[test]
fn a_request_answered_with_holes_is_answered_again_when_the_last_hole_fills() {
    let mut g = Gen::new(1, Psn::new(0), CFG);
    assert_eq!(g.handle_packet(0, &data(0)).event, None);
    // The message's last packet, with its ACK request, overtakes 1 and 3: its ACK (counted
    // as a gap) still misses them.
    let req = RxPacket {
        ack_req: true,
        ..data(4)
    };
    let a = ack(g.handle_packet(0, &req));
    assert_eq!((a.cum_psn, a.sack_bitmap), (Psn::new(1), 0b1000));
    // 2 fills nothing at the cumulative PSN, 1 fills the first hole but 3 is still missing.
    assert_eq!(g.handle_packet(0, &data(2)).event, None);
    assert!(!g.is_quiet(&data(1)));
    assert_eq!(g.handle_packet(0, &data(1)).event, None);
    // 3 fills the last hole: the sender hears at once that its request is complete.
    assert!(!g.is_quiet(&data(3)));
    let a = ack(g.handle_packet(0, &data(3)));
    assert_eq!((a.cum_psn, a.sack_bitmap, a.pkt_count), (Psn::new(5), 0, 3));
    assert_eq!(g.counters().acks_filled, 1);
    // Nothing is owed any more: a later hole filled without a request waits (as before).
    let _ = ack(g.handle_packet(0, &data(6)));
    assert!(g.is_quiet(&data(5)));
    assert_eq!(g.handle_packet(0, &data(5)).event, None);
    assert_eq!(g.rx().cum_psn(), Psn::new(7));
    assert_eq!(g.counters().acks_filled, 1);
}

#[test]
fn a_request_answered_in_order_owes_nothing() {
    let mut g = Gen::new(1, Psn::new(0), CFG);
    let req = RxPacket {
        ack_req: true,
        ..data(0)
    };
    let a = ack(g.handle_packet(0, &req));
    assert_eq!(a.cum_psn, Psn::new(1));
    let _ = ack(g.handle_packet(0, &data(2))); // gap
    assert_eq!(g.handle_packet(0, &data(1)).event, None);
    assert_eq!(g.counters().acks_filled, 0);
}

#[test]
fn gap_rule_can_be_disabled() {
    let mut g = Gen::new(
        1,
        Psn::new(0),
        AckGenConfig {
            ack_on_gap: false,
            ..CFG
        },
    );
    assert_eq!(g.handle_packet(0, &data(5)).event, None);
}

#[test]
fn ce_marks_per_plane() {
    let mut g = Gen::new(1, Psn::new(0), CFG);
    let mut p = data(0);
    p.ce = true;
    p.plane = 3;
    g.handle_packet(0, &p);
    p.psn = Psn::new(1);
    p.plane = 1;
    g.handle_packet(0, &p);
    g.handle_packet(0, &data(2));
    p.psn = Psn::new(3);
    p.plane = 9; // no mask bit for plane 9
    let a = ack(g.handle_packet(0, &p));
    assert_eq!(
        (a.ecn_plane_mask, a.ce_count, a.pkt_count, a.plane),
        (0b1010, 3, 4, 9)
    );
    assert_eq!(g.counters().ce_plane_out_of_range, 1);
}

#[test]
fn trimmed_packets_are_nacked_not_received() {
    let mut g = Gen::new(9, Psn::new(10), CFG);
    let mut p = data(12);
    p.trim = TrimMark::TrimmedLastHop;
    p.ev_index = 33;
    p.plane = 2;
    let d = g.handle_packet(0, &p);
    assert!(!d.place);
    assert_eq!(
        nack(d),
        NackSummary {
            qpn: 9,
            reason: NackReason::TrimmedLastHop,
            psn: Psn::new(12),
            cum_psn: Psn::new(10),
            ev_index: 33,
            plane: 2,
        }
    );
    assert!(!g.rx().is_received(Psn::new(12)));
    assert_eq!(g.pending_packets(), 0);
    p.trim = TrimMark::Trimmed;
    assert_eq!(nack(g.handle_packet(0, &p)).reason, NackReason::Trimmed);
    // A trimmed copy of a received PSN is ignored.
    p.psn = Psn::new(5);
    let d = g.handle_packet(0, &p);
    assert_eq!(
        (d.outcome, d.place, d.event),
        (RxOutcome::Duplicate, false, None)
    );
    // A trimmed packet beyond the window gets OUT_OF_WINDOW.
    p.psn = Psn::new(10 + 256);
    assert_eq!(nack(g.handle_packet(0, &p)).reason, NackReason::OutOfWindow);
    let c = g.counters();
    assert_eq!(
        (c.nacks_trimmed, c.trimmed_stale, c.nacks_out_of_window),
        (2, 1, 1)
    );
}

#[test]
fn out_of_window_duplicate_imm_and_ack_req() {
    let mut g = Gen::new(1, Psn::new(0), CFG);
    let n = nack(g.handle_packet(0, &data(300)));
    assert_eq!(
        (n.reason, n.psn, n.cum_psn),
        (NackReason::OutOfWindow, Psn::new(300), Psn::new(0))
    );
    assert_eq!(g.pending_packets(), 0);

    g.handle_packet(0, &data(0));
    let d = g.handle_packet(0, &data(0));
    assert_eq!((d.outcome, d.place), (RxOutcome::Duplicate, false));
    assert_eq!(ack(d).pkt_count, 2);

    let mut p = data(1);
    p.has_imm = true;
    assert_eq!(ack(g.handle_packet(0, &p)).pkt_count, 1);
    let mut p = data(2);
    p.ack_req = true;
    assert_eq!(ack(g.handle_packet(0, &p)).cum_psn, Psn::new(3));
    let c = g.counters();
    assert_eq!((c.acks_duplicate, c.acks_imm, c.acks_ack_req), (1, 1, 1));
}

/// `handle_duplicate` leaves the state, counters and ACK `handle_packet` leaves for a
/// duplicate: before the cumulative PSN and a set bit beyond it, with and without an ACK
/// request, CE-marked or not, with holes below (so the request is owed) and without.
#[test]
fn handle_duplicate_matches_handle_packet() {
    let mut g = Gen::new(1, Psn::new(10), CFG);
    for psn in [10, 11, 14, 15] {
        g.handle_packet(5, &data(psn));
    }
    for (i, (psn, ack_req, ce)) in [
        (9, false, false),
        (14, true, false),
        (11, false, true),
        (15, true, true),
    ]
    .into_iter()
    .enumerate()
    {
        // a fresh packet first, so the interval holds something when the duplicate arrives
        g.handle_packet(20, &data(16 + i as u32));
        let mut p = data(psn);
        (p.ack_req, p.ce) = (ack_req, ce);
        let mut one = g.clone();
        let d = one.handle_packet(30, &p);
        assert_eq!((d.outcome, d.place), (RxOutcome::Duplicate, false));
        assert!(g.rx().is_received(p.psn));
        let a = g.handle_duplicate(30, &p);
        assert_eq!(Some(AckEvent::Ack(a)), d.event);
        assert_eq!(g, one);
    }
    assert_eq!(g.counters().acks_duplicate, 4);
    assert_eq!(g.rx().counters().duplicates, 4);
}

#[test]
fn nack_for_placement_errors_and_reset() {
    let mut g = Gen::new(
        5,
        Psn::new(0),
        AckGenConfig {
            coalesce_pkts: 0,
            ..CFG
        },
    );
    assert_eq!(g.config().coalesce_pkts, 1);
    let n = g.nack_for(&data(0), NackReason::RemoteAccess);
    assert_eq!((n.reason, n.qpn), (NackReason::RemoteAccess, 5));
    assert_eq!(g.counters().nacks_other, 1);
    assert!(g.handle_packet(0, &data(0)).event.is_some());
    g.reset(Psn::new(100));
    assert_eq!(g.rx().cum_psn(), Psn::new(100));
}

#[derive(Debug, Clone)]
struct Arrival {
    offset: i64,
    dt_ns: u64,
    ce: bool,
    trim: u8,
    imm: bool,
    ack_req: bool,
    plane: u8,
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (
        -20i64..280,
        0u64..700,
        any::<bool>(),
        0u8..10,
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.05),
        0u8..4,
    )
        .prop_map(|(offset, dt_ns, ce, trim, imm, ack_req, plane)| Arrival {
            offset,
            dt_ns,
            ce,
            trim,
            imm,
            ack_req,
            plane,
        })
}

proptest! {
    #[test]
    fn intervals_conserve_counts_and_respect_bounds(
        start in prop_oneof![0u32..100, Psn::MASK - 200..=Psn::MASK],
        pkts in 1u16..10,
        gap in any::<bool>(),
        arrivals in proptest::collection::vec(arrival(), 1..400),
    ) {
        let cfg = AckGenConfig { coalesce_pkts: pkts, coalesce_ns: 2_000, ack_on_gap: gap };
        let mut g = Gen::new(3, Psn::new(start), cfg);
        let mut now = 0u64;
        let mut seen: BTreeSet<u32> = BTreeSet::new();
        let (mut counted, mut ce_counted) = (0u64, 0u64);
        let (mut acked, mut ce_acked) = (0u64, 0u64);
        let mut acks: Vec<AckSummary> = Vec::new();
        for a in arrivals {
            now += a.dt_ns;
            // Timer first: a due ACK goes out before the next packet is looked at.
            if let Some(due) = g.poll_timeout() {
                prop_assert!(due <= now + 2_000);
                if due <= now {
                    let ack = g.handle_timeout(now).unwrap();
                    acks.push(ack);
                    prop_assert_eq!(g.poll_timeout(), None);
                }
            }
            let cum = g.rx().cum_psn();
            let psn = Psn::new((i64::from(cum.value()) + a.offset) as u32);
            let trim = match a.trim { 0 => TrimMark::Trimmed, 1 => TrimMark::TrimmedLastHop, _ => TrimMark::None };
            let pkt = RxPacket { psn, ev_index: 1, plane: a.plane, ce: a.ce, trim, has_imm: a.imm, ack_req: a.ack_req, tx_ts_ns: 0 };
            let in_window = a.offset < 256;
            let already = a.offset < 0 || seen.contains(&psn.value());
            let d = g.handle_packet(now, &pkt);
            prop_assert_eq!(d.place, trim == TrimMark::None && in_window && !already);
            if d.place {
                seen.insert(psn.value());
            }
            if trim == TrimMark::None && in_window {
                counted += 1;
                ce_counted += u64::from(a.ce);
            }
            match d.event {
                Some(AckEvent::Ack(ack)) => {
                    prop_assert!(trim == TrimMark::None && in_window);
                    acks.push(ack);
                }
                Some(AckEvent::Nack(n)) => {
                    let want = match (trim, in_window) {
                        (_, false) => NackReason::OutOfWindow,
                        (TrimMark::Trimmed, true) => NackReason::Trimmed,
                        (TrimMark::TrimmedLastHop, true) => NackReason::TrimmedLastHop,
                        (TrimMark::None, true) => { prop_assert!(false, "NACK for a good packet"); unreachable!() }
                    };
                    prop_assert_eq!(n.reason, want);
                    prop_assert_eq!(n.psn, psn);
                }
                None => {}
            }
            prop_assert!(g.pending_packets() < cfg.coalesce_pkts);
            for ack in acks.drain(..) {
                prop_assert_eq!(ack.sack_base, ack.cum_psn);
                prop_assert_eq!(ack.sack_bitmap & 1, 0);
                prop_assert!(ack.pkt_count >= 1);
                prop_assert!(ack.ce_count <= ack.pkt_count);
                prop_assert_eq!(ack.ecn_plane_mask & !0b1111, 0);
                acked += u64::from(ack.pkt_count);
                ce_acked += u64::from(ack.ce_count);
            }
        }
        if let Some(due) = g.poll_timeout() {
            let ack = g.handle_timeout(due).unwrap();
            acked += u64::from(ack.pkt_count);
            ce_acked += u64::from(ack.ce_count);
        }
        prop_assert_eq!(acked, counted);
        prop_assert_eq!(ce_acked, ce_counted);
    }
}

proptest! {
    /// Sprayed packets arrive a few places out of order; some ask for an ACK. Whenever nothing
    /// below the highest PSN is missing, every request so far has been answered by an ACK
    /// that said so (none waits for the coalescing timer).
    #[test]
    fn requests_never_wait_once_nothing_is_missing(
        swaps in proptest::collection::vec((0usize..200, 1usize..4), 0..120),
        requests in proptest::collection::vec(prop::bool::weighted(0.2), 200),
        pkts in 1u16..20,
    ) {
        let cfg = AckGenConfig { coalesce_pkts: pkts, coalesce_ns: 100_000, ack_on_gap: true };
        let mut g = Gen::new(3, Psn::new(0), cfg);
        // PSNs 0..200, each swap moving one a few places later.
        let mut order: Vec<u32> = (0..200).collect();
        for (i, k) in swaps {
            let j = (i + k).min(order.len() - 1);
            order.swap(i, j);
        }
        let mut requested = false;
        for (n, psn) in order.into_iter().enumerate() {
            let pkt = RxPacket {
                psn: Psn::new(psn),
                ack_req: requests[psn as usize],
                tx_ts_ns: n as u32,
                ..RxPacket::default()
            };
            let quiet = g.is_quiet(&pkt);
            let d = g.handle_packet(n as u64, &pkt);
            prop_assert!(!(quiet && d.event.is_some()), "is_quiet on a packet that ACKed");
            requested |= pkt.ack_req;
            let top = g.rx().next_max_psn();
            if matches!(d.event, Some(AckEvent::Ack(a)) if a.cum_psn == top) {
                requested = false;
            }
            prop_assert!(
                !(requested && g.rx().cum_psn() == top),
                "a request waits with nothing missing (after PSN {})", psn
            );
        }
    }
}

proptest! {
    /// `handle_new_at` leaves the state, counters and ACK `handle_packet` leaves for every new
    /// packet inside the window, along random arrival orders (holes, owed requests, gaps,
    /// the coalescing count, immediates, CE marks).
    #[test]
    fn handle_new_at_matches_handle_packet(
        gap in any::<bool>(),
        arrivals in proptest::collection::vec(
            (0u32..40, prop::bool::weighted(0.1), prop::bool::weighted(0.05), any::<bool>()),
            1..300,
        ),
    ) {
        let cfg = AckGenConfig { ack_on_gap: gap, ..CFG };
        let mut g = Gen::new(2, Psn::new(Psn::MASK - 50), cfg);
        let mut now = 0;
        for (k, (off, ack_req, imm, ce)) in arrivals.into_iter().enumerate() {
            now += 100;
            // from 4 PSNs before the cumulative PSN (duplicates) to beyond the highest
            let mut p = data(0);
            let psn = g.rx().cum_psn().sub(4).add(off);
            (p.psn, p.ack_req, p.has_imm, p.ce) = (psn, ack_req, imm, ce);
            let mut one = g.clone();
            let d = one.handle_packet(now, &p);
            let at = p.psn.distance_from(g.rx().cum_psn());
            if at >= 0 && (at as u32) < RxBitmap::<4>::WINDOW && !g.rx().is_received(p.psn) {
                let e = g.handle_new_at(now, &p, at as u32);
                prop_assert!(d.place, "arrival {}", k);
                prop_assert_eq!(e.map(AckEvent::Ack), d.event);
            } else {
                g.handle_packet(now, &p);
            }
            prop_assert_eq!(&g, &one);
        }
    }
}

proptest! {
    /// `handle_acked_run` leaves the state, counters and ACK of its packets one at a time
    /// through `handle_packet` (all quiet but the last, which calls for the ACK), and returns
    /// the deadline `poll_timeout` gave before that ACK.
    #[test]
    fn handle_acked_run_matches_one_at_a_time(
        gap in any::<bool>(),
        prefix in proptest::collection::vec((0u32..40, prop::bool::weighted(0.1)), 0..60),
        start in 0u32..40,
        len in 1u16..6,
        ack_req in any::<bool>(),
    ) {
        let cfg = AckGenConfig { ack_on_gap: gap, ..CFG };
        let mut g = Gen::new(2, Psn::new(Psn::MASK - 20), cfg);
        let mut now = 0;
        for (off, req) in prefix {
            now += 100;
            let mut p = data(0);
            (p.psn, p.ack_req) = (g.rx().cum_psn().sub(4).add(off), req);
            g.handle_packet(now, &p);
        }
        now += 100;
        let first = g.rx().cum_psn().add(start);
        let opens = g.opens_gap(first);
        let n = if opens { 1 } else { len.min(g.quiet_room() + 1) };
        let ack_req = ack_req || (!opens && n <= g.quiet_room());
        let offset = start;
        prop_assume!(!g.may_answer_owed(first) && g.rx().run_is_new(offset, u32::from(n)));
        let pkt = |i: u16| {
            let mut p = data(0);
            p.psn = first.add(u32::from(i));
            p.ack_req = ack_req && i + 1 == n;
            p
        };
        let mut one = g.clone();
        let mut due = None;
        for i in 0..n {
            let d = one.handle_packet(now, &pkt(i));
            prop_assert!(d.place);
            if i + 1 < n {
                prop_assert_eq!(d.event, None);
            } else {
                prop_assert!(d.event.is_some());
                // (the deadline the ACK closed: the interval's first packet's, plus the delay)
                due = Some(g.poll_timeout().unwrap_or(now + cfg.coalesce_ns));
                prop_assert_eq!(
                    g.handle_acked_run(now, first, offset, n, &pkt(n - 1), opens),
                    (due, ack(d))
                );
            }
        }
        prop_assert!(due.is_some());
        prop_assert_eq!(&g, &one);
    }
}
