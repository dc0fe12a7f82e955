//! Output queues: ECN thresholds, the last-hop policy, trimming into the priority queue, tail
//! drop, and PFC keeping an incast lossless.

use mrc_sim::core::{Duration, Time};
use mrc_sim::fabric::{
    harness, ClassPolicy, DropCause, Ecn, EcnConfig, FabricConfig, Packet, Payload, PfcConfig,
    Route, Shape, TransportKind,
};

const SIZE: u32 = 1000;

/// Two leaves of four hosts (radix 8), short links, big queues, ECN 5-20 KB.
fn base() -> FabricConfig {
    let mut c = FabricConfig::htsim_reference(Shape::LeafSpine { hosts: 8, radix: 8 });
    c.propagation = Duration::from_ns(100);
    c.queue.limit_bytes = 1 << 20;
    c.queue.ecn = Some(EcnConfig {
        kmin_bytes: 5_000,
        kmax_bytes: 20_000,
    });
    c
}

fn pkt(src: u32, dst: u32, seq: u64, kind: TransportKind, ecn: Ecn) -> Packet {
    Packet {
        src,
        dst,
        size_bytes: SIZE,
        payload: Payload::new(SIZE - 64, seq as u32),
        transport_tag: (src as u64) << 32 | seq,
        route: Route::Ecmp {
            hash: src as u64 * 31 + dst as u64,
        },
        kind,
        ecn,
        ..Packet::default()
    }
}

/// Every sender in `srcs` sends `n` back-to-back packets to `dst` at t = 0.
fn incast(
    cfg: FabricConfig,
    srcs: &[u32],
    dst: u32,
    n: u64,
    kind: TransportKind,
    ecn: Ecn,
) -> mrc_sim::core::Simulator<harness::Harness> {
    let mut sim = harness::simulator(cfg).unwrap();
    for seq in 0..n {
        for &s in srcs {
            harness::inject_at(&mut sim, Time::ZERO, s, 0, pkt(s, dst, seq, kind, ecn)).unwrap();
        }
    }
    sim.run_until_idle();
    let t = sim.handler().fabric.totals();
    assert!(t.conserved() && t.in_flight == 0, "{t:?}");
    sim
}

#[test]
fn ecn_marks_follow_the_thresholds() {
    let sim = incast(base(), &[0, 1, 2], 3, 40, TransportKind::Roce, Ecn::Ect);
    let h = sim.handler();
    assert_eq!(h.delivered.len(), 120);
    let marked: Vec<bool> = h
        .delivered
        .iter()
        .map(|d| d.packet.ecn == Ecn::Ce)
        .collect();
    // The queue grows by ~2 packets per packet time: below kmin for the first few, past kmax
    // after ~30 arrivals, and it drains only after the last arrival.
    assert!(marked[..6].iter().all(|m| !m), "{marked:?}");
    assert!(marked[40..].iter().all(|m| *m), "{marked:?}");
    let n = marked.iter().filter(|m| **m).count() as u64;
    assert!((85..=115).contains(&n), "{n}");
    let f = &h.fabric;
    let last_hop = f
        .topology()
        .switch_port(f.topology().switch(0, 0, 0).unwrap(), 3);
    assert_eq!(f.port_counters(last_hop).unwrap().ecn_marks, n);
    assert_eq!(f.sum_counters().ecn_marks, n);
}

#[test]
fn not_ect_is_never_marked_and_mrc_skips_the_last_hop() {
    let sim = incast(base(), &[0, 1, 2], 3, 40, TransportKind::Roce, Ecn::NotEct);
    assert_eq!(sim.handler().fabric.sum_counters().ecn_marks, 0);

    let mut c = base();
    c.policy[TransportKind::Mrc.index()] = ClassPolicy::MRC;
    let sim = incast(c, &[0, 1, 2], 3, 40, TransportKind::Mrc, Ecn::Ect);
    assert_eq!(sim.handler().fabric.sum_counters().ecn_marks, 0);
    // RoCE in the same config is marked at the last hop.
    let sim = incast(c, &[0, 1, 2], 3, 40, TransportKind::Roce, Ecn::Ect);
    assert!(sim.handler().fabric.sum_counters().ecn_marks > 80);
}

#[test]
fn trimming_cuts_to_headers_and_they_overtake_data() {
    let mut c = base();
    c.queue.limit_bytes = 10_000;
    c.queue.ecn = None;
    let sim = incast(c, &[0, 1, 2], 3, 40, TransportKind::Mrc, Ecn::Ect);
    let h = sim.handler();
    let t = h.fabric.totals();
    assert_eq!(t.dropped_total(), 0, "{t:?}");
    assert_eq!(h.delivered.len(), 120);
    let trimmed: Vec<_> = h
        .delivered
        .iter()
        .filter(|d| d.packet.is_trimmed())
        .collect();
    assert!(trimmed.len() > 40, "{}", trimmed.len());
    assert_eq!(h.fabric.sum_counters().trims, trimmed.len() as u64);
    for d in &trimmed {
        assert_eq!(d.packet.size_bytes, 64);
        assert!(d.packet.payload.verify(), "payload descriptor kept");
    }
    // Some trimmed header from a sender arrives before an earlier data packet of that sender.
    let overtakes = h.delivered.iter().enumerate().any(|(i, d)| {
        d.packet.is_trimmed()
            && h.delivered[i + 1..].iter().any(|e| {
                !e.packet.is_trimmed()
                    && e.packet.src == d.packet.src
                    && e.packet.transport_tag < d.packet.transport_tag
            })
    });
    assert!(overtakes);

    // RoCE is not trimmed: tail drop.
    let sim = incast(c, &[0, 1, 2], 3, 40, TransportKind::Roce, Ecn::Ect);
    let t = sim.handler().fabric.totals();
    assert!(t.dropped(DropCause::QueueFull) > 40, "{t:?}");
    assert_eq!(t.delivered + t.dropped(DropCause::QueueFull), 120);
    assert_eq!(sim.handler().fabric.sum_counters().trims, 0);

    // A tiny header queue overflows too.
    c.queue.header_limit_bytes = 128;
    let sim = incast(c, &[0, 1, 2], 3, 40, TransportKind::Mrc, Ecn::Ect);
    let t = sim.handler().fabric.totals();
    assert!(t.dropped(DropCause::HeaderQueueFull) > 0, "{t:?}");
    assert_eq!(t.dropped(DropCause::QueueFull), 0);
}

fn pfc_cfg(pfc: bool) -> FabricConfig {
    let mut c = base();
    c.queue.limit_bytes = 100_000;
    c.queue.trim_bytes = None;
    c.pfc = pfc.then_some(PfcConfig {
        xoff_bytes: 12_000,
        xon_bytes: 6_000,
    });
    c
}

#[test]
fn pfc_keeps_a_single_switch_incast_lossless() {
    let lossy = incast(
        pfc_cfg(false),
        &[0, 1, 2],
        3,
        60,
        TransportKind::Roce,
        Ecn::NotEct,
    );
    assert!(
        lossy
            .handler()
            .fabric
            .totals()
            .dropped(DropCause::QueueFull)
            > 0
    );

    let sim = incast(
        pfc_cfg(true),
        &[0, 1, 2],
        3,
        60,
        TransportKind::Roce,
        Ecn::NotEct,
    );
    let f = &sim.handler().fabric;
    let t = f.totals();
    assert_eq!(t.dropped_total(), 0, "{t:?}");
    assert_eq!(t.delivered, 180);
    let c = f.sum_counters();
    assert!(
        c.pauses_sent > 0 && c.pauses_received == c.pauses_sent,
        "{c:?}"
    );
    for h in 0..3 {
        let nic = f.port_counters(f.topology().host_port(h, 0)).unwrap();
        assert!(nic.pauses_received > 0, "host {h} never paused");
        assert!(!f.port_paused(f.topology().host_port(h, 0)));
    }
    // Order within each sender is kept (one FIFO path, nothing lost).
    for s in 0..3u32 {
        let tags: Vec<u64> = sim
            .handler()
            .delivered
            .iter()
            .filter(|d| d.packet.src == s)
            .map(|d| d.packet.transport_tag)
            .collect();
        assert!(tags.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn pfc_back_pressure_crosses_the_spine_losslessly() {
    // Four hosts on leaf 1 into host 0 on leaf 0, ECMP over four spines.
    let lossy = incast(
        pfc_cfg(false),
        &[4, 5, 6, 7],
        0,
        60,
        TransportKind::Roce,
        Ecn::NotEct,
    );
    assert!(lossy.handler().fabric.totals().dropped_total() > 0);
    let sim = incast(
        pfc_cfg(true),
        &[4, 5, 6, 7],
        0,
        60,
        TransportKind::Roce,
        Ecn::NotEct,
    );
    let f = &sim.handler().fabric;
    let t = f.totals();
    assert_eq!((t.delivered, t.dropped_total()), (240, 0), "{t:?}");
    // Pauses were sent by leaf 0's spine-facing ingress ports (toward spines).
    let topo = f.topology();
    let leaf0 = topo.switch(0, 0, 0).unwrap();
    let sent: u64 = (4..8)
        .map(|p| {
            f.port_counters(topo.switch_port(leaf0, p))
                .unwrap()
                .pauses_sent
        })
        .sum();
    assert!(sent > 0);
    for p in 0..f.topology().ports() {
        let (d, hq) = f.queue_bytes(mrc_sim::fabric::PortId(p));
        assert_eq!(d + hq, 0);
    }
}

#[test]
fn events_per_hop_are_bounded_and_idle_ports_schedule_nothing() {
    let c = FabricConfig::htsim_reference(Shape::FatTree { k: 4 });
    let mut sim = harness::simulator(c).unwrap();
    let route = sim
        .handler()
        .fabric
        .topology()
        .usid_route(0, 15, 0)
        .unwrap();
    let mut p = pkt(0, 15, 0, TransportKind::Mrc, Ecn::Ect);
    p.route = Route::Usid(route);
    harness::inject_at(&mut sim, Time::ZERO, 0, 0, p).unwrap();
    sim.run_until_idle();
    // One injection, then one arrival per link (6): no transmit-complete on idle ports.
    assert_eq!(sim.stats().events, 1 + 6);
    // A burst of 10 back to back: at most one transmit-complete per packet per hop besides.
    let mut sim = harness::simulator(c).unwrap();
    for seq in 0..10 {
        let mut p = pkt(0, 15, seq, TransportKind::Mrc, Ecn::Ect);
        p.route = Route::Usid(route);
        harness::inject_at(&mut sim, Time::ZERO, 0, 0, p).unwrap();
    }
    sim.run_until_idle();
    let events = sim.stats().events;
    // The NIC port queues 9 behind the first (9 transmit-completes); downstream ports see
    // packets arrive exactly as the previous one leaves, so they never queue.
    assert_eq!(events, 10 * 7 + 9, "{events}");
    assert_eq!(sim.handler().fabric.totals().delivered, 10);
}
