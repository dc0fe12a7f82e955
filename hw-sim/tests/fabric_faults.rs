//! Faults: link failure (uSID drops forever, ECMP reroutes after reconvergence), flap,
//! blackhole switch, random loss and corruption; conservation over random traffic with faults;
//! determinism.

use mrc_sim::core::{Duration, Time};
use mrc_sim::fabric::{
    harness, DropCause, Fabric, FabricConfig, Fault, LinkId, Packet, Payload, Route, Shape,
    TransportKind,
};
use proptest::prelude::*;

fn cfg(shape: Shape) -> FabricConfig {
    let mut c = FabricConfig::htsim_reference(shape);
    c.reconvergence = Duration::from_us(100);
    c
}

fn pkt(src: u32, dst: u32, tag: u64, route: Route) -> Packet {
    Packet {
        src,
        dst,
        size_bytes: 1500,
        payload: Payload::new(1400, tag as u32),
        transport_tag: tag,
        route,
        ..Packet::default()
    }
}

/// The link between leaf `leaf` and spine `spine` on plane 0.
fn leaf_spine_link(f: &Fabric, leaf: u32, spine: u32) -> LinkId {
    let t = f.topology();
    let hpl = t.switch_info(t.switch(0, 0, 0).unwrap()).ports / 2;
    f.port_link(t.switch_port(t.switch(0, 0, leaf).unwrap(), hpl + spine))
        .unwrap()
}

#[test]
fn link_failure_usid_never_reroutes_ecmp_does_after_reconvergence() {
    // radix 4: 2 spines. Host 0 (leaf 0) -> host 2 (leaf 1). The leaf1-spine0 link fails at 10 us.
    let mut sim = harness::simulator(cfg(Shape::LeafSpine { hosts: 8, radix: 4 })).unwrap();
    let fail_at = Time::from_us(10);
    let link = leaf_spine_link(&sim.handler().fabric, 1, 0);
    harness::fault_at(&mut sim, fail_at, Fault::LinkDown(link)).unwrap();
    let topo = sim.handler().fabric.topology().clone();
    let via0 = Route::Usid(topo.usid_route(0, 2, 0).unwrap());
    let via1 = Route::Usid(topo.usid_route(0, 2, 1).unwrap());
    // Every 1 us for 300 us: one packet on each uSID path and 8 ECMP flows, alternating hosts.
    let mut tag = 0;
    for us in 0..300u64 {
        let at = Time::from_us(us);
        for route in [via0, via1] {
            harness::inject_at(&mut sim, at, 0, 0, pkt(0, 2, tag, route)).unwrap();
            tag += 1;
        }
        for flow in 0..8u64 {
            // 1000 B: after the reroute, 64 + 12 Gb/s share spine 1's link to leaf 1.
            let p = Packet {
                kind: TransportKind::Roce,
                size_bytes: 1000,
                ..pkt(
                    1,
                    3,
                    tag,
                    Route::Ecmp {
                        hash: flow * 0x1234_5678_9abc + 5,
                    },
                )
            };
            harness::inject_at(&mut sim, at, 1, 0, p).unwrap();
            tag += 1;
        }
    }
    sim.run_until_idle();
    let h = sim.handler();
    let t = h.fabric.totals();
    assert!(t.conserved() && t.in_flight == 0);
    // Path 0 packets reaching spine 0 after the failure all die there (source routes never
    // reroute); the ones on the failed wire die as LinkDown. Path 1 is untouched.
    let drops = t.dropped(DropCause::UsidPortDown);
    assert!((285..=292).contains(&drops), "{drops} {t:?}");
    let delivered_usid = h.delivered.iter().filter(|d| d.packet.src == 0).count() as u64;
    assert_eq!(
        delivered_usid + drops + 1,
        600,
        "one path-0 packet was on the failed wire"
    );
    // ECMP: flows hashed via spine 0 are lost only between the failure and reconvergence.
    // Tags are `us * 10 + k`: every ECMP packet sent after reconvergence arrives.
    let ecmp_late = h
        .delivered
        .iter()
        .filter(|d| d.packet.src == 1 && d.packet.transport_tag / 10 >= 110)
        .count();
    assert_eq!(ecmp_late, 8 * 190, "{t:?}");
    let ecmp_delivered = h.delivered.iter().filter(|d| d.packet.src == 1).count() as u64;
    let ecmp_lost = 8 * 300 - ecmp_delivered;
    assert!(ecmp_lost > 0, "no ECMP flow used spine 0? {t:?}");
    assert!(ecmp_lost <= 8 * 102, "{ecmp_lost}");
    assert_eq!(t.dropped(DropCause::LinkDown), ecmp_lost + 1);
    assert_eq!(t.dropped_total(), ecmp_lost + 1 + drops);
    assert!(!h.fabric.link_up(link) && !h.fabric.link_routed_up(link));
}

#[test]
fn flap_restores_usid_paths() {
    let mut sim = harness::simulator(cfg(Shape::LeafSpine { hosts: 8, radix: 4 })).unwrap();
    let link = leaf_spine_link(&sim.handler().fabric, 1, 0);
    harness::fault_at(&mut sim, Time::from_us(20), Fault::LinkDown(link)).unwrap();
    harness::fault_at(&mut sim, Time::from_us(40), Fault::LinkUp(link)).unwrap();
    let route = Route::Usid(sim.handler().fabric.topology().usid_route(0, 2, 0).unwrap());
    for us in 0..100u64 {
        harness::inject_at(&mut sim, Time::from_us(us), 0, 0, pkt(0, 2, us, route)).unwrap();
    }
    sim.run_until_idle();
    let h = sim.handler();
    let t = h.fabric.totals();
    assert_eq!(t.delivered + t.dropped_total(), 100);
    let lost = t.dropped(DropCause::UsidPortDown) + t.dropped(DropCause::LinkDown);
    assert!((19..=22).contains(&lost), "{t:?}");
    // Everything sent well after the link came back arrives.
    let late = h
        .delivered
        .iter()
        .filter(|d| d.packet.transport_tag >= 40)
        .count();
    assert_eq!(late, 60);
    assert!(h.fabric.link_up(link));
}

#[test]
fn blackhole_switch_drops_while_routing_keeps_using_it() {
    let mut sim = harness::simulator(cfg(Shape::FatTree { k: 4 })).unwrap();
    let core0 = sim.handler().fabric.topology().switch(0, 2, 0).unwrap();
    harness::fault_at(&mut sim, Time::from_us(5), Fault::Blackhole(core0)).unwrap();
    harness::fault_at(&mut sim, Time::from_us(500), Fault::Restore(core0)).unwrap();
    let topo = sim.handler().fabric.topology().clone();
    let mut tag = 0;
    for us in (10..400u64).step_by(10) {
        for path in 0..4 {
            let r = Route::Usid(topo.usid_route(0, 15, path).unwrap());
            harness::inject_at(&mut sim, Time::from_us(us), 0, 0, pkt(0, 15, tag, r)).unwrap();
            tag += 1;
        }
        for flow in 0..16u64 {
            let p = pkt(
                1,
                14,
                tag,
                Route::Ecmp {
                    hash: flow * 0x51_7cc1_b727_220a + 3,
                },
            );
            harness::inject_at(&mut sim, Time::from_us(us), 1, 0, p).unwrap();
            tag += 1;
        }
    }
    // After the restore, everything gets through.
    for path in 0..4 {
        let r = Route::Usid(topo.usid_route(0, 15, path).unwrap());
        harness::inject_at(&mut sim, Time::from_us(600), 0, 0, pkt(0, 15, tag, r)).unwrap();
        tag += 1;
    }
    sim.run_until_idle();
    let f = &sim.handler().fabric;
    let t = f.totals();
    // uSID path 0 uses aggregation 0 and core (0, 0): a quarter of the source-routed packets.
    let bh = t.dropped(DropCause::Blackhole);
    let usid_delivered = sim
        .handler()
        .delivered
        .iter()
        .filter(|d| d.packet.src == 0)
        .count();
    assert_eq!(usid_delivered, 39 * 3 + 4);
    assert!(bh > 39, "{t:?}");
    assert!(bh < 39 + 39 * 16, "ECMP flows spread over 4 cores {t:?}");
    assert_eq!(t.delivered + bh, t.injected);
    // Routing never noticed: no other cause.
    assert_eq!(t.dropped_total(), bh);
    let c = f.port_counters(f.topology().switch_port(core0, 0)).unwrap();
    assert_eq!(
        c.tx_packets, 0,
        "a blackholed core forwarded nothing before the restore"
    );
}

#[test]
fn random_loss_and_corruption_are_counted() {
    let mut c = cfg(Shape::LeafSpine { hosts: 8, radix: 4 });
    c.loss_ppm = 100_000;
    c.corrupt_ppm = 50_000;
    let mut sim = harness::simulator(c).unwrap();
    let n = 4000u64;
    for i in 0..n {
        let p = pkt(0, 6, i, Route::Ecmp { hash: i });
        harness::inject_at(&mut sim, Time::from_ns(i * 200), 0, 0, p).unwrap();
    }
    sim.run_until_idle();
    let f = &sim.handler().fabric;
    let t = f.totals();
    assert_eq!(t.delivered + t.dropped_total(), n);
    // Four links: survival (0.9 * 0.95)^4 ~ 0.534.
    let ok = t.delivered as f64 / n as f64;
    assert!((0.49..0.58).contains(&ok), "{ok} {t:?}");
    assert!(t.dropped(DropCause::RandomLoss) > 900);
    assert!(t.dropped(DropCause::Corrupt) > 350);
    // Corrupt frames are counted where they were received; lost frames where they were sent.
    let dst_nic = f.port_counters(f.topology().host_port(6, 0)).unwrap();
    assert_eq!(
        dst_nic.rx_packets,
        t.delivered + dst_nic.dropped(DropCause::Corrupt)
    );
    for d in &sim.handler().delivered {
        assert!(!d.packet.is_corrupt() && d.packet.payload.verify());
    }
}

/// Per link and direction, everything sent arrived or was lost on the wire (counted); at every
/// host port, everything received was delivered or dropped as corrupt.
fn assert_links_conserve(f: &Fabric) {
    let mut wire_lost = 0;
    for l in 0..f.links() {
        let (a, b) = f.link_ends(LinkId(l)).unwrap();
        let (ca, cb) = f.link_counters(LinkId(l)).unwrap();
        for (tx, rx) in [(ca, cb), (cb, ca)] {
            assert_eq!(
                tx.tx_packets,
                rx.rx_packets + tx.wire_lost_packets,
                "link {l} {a:?}-{b:?}"
            );
            assert_eq!(tx.tx_bytes, rx.rx_bytes + tx.wire_lost_bytes, "link {l}");
            wire_lost += tx.wire_lost_packets;
        }
    }
    let t = f.totals();
    assert!(wire_lost >= t.dropped(DropCause::RandomLoss));
    assert!(wire_lost <= t.dropped(DropCause::RandomLoss) + t.dropped(DropCause::LinkDown));
    let topo = f.topology();
    let (mut rx, mut corrupt) = (0, 0);
    for plane in 0..topo.planes() {
        for h in 0..topo.hosts() {
            let c = f.port_counters(topo.host_port(h, plane)).unwrap();
            rx += c.rx_packets;
            corrupt += c.dropped(DropCause::Corrupt);
        }
    }
    assert_eq!(rx, t.delivered + corrupt);
}

/// Random traffic on a 2-plane fat tree with faults everywhere; returns the fabric.
fn chaos(seed: u64, packets: u32, faults: u32) -> (harness::Harness, mrc_sim::core::SimStats) {
    let mut c = FabricConfig::htsim_reference(Shape::FatTree { k: 4 });
    c.planes = 2;
    c.seed = seed;
    c.loss_ppm = 2_000;
    c.corrupt_ppm = 1_000;
    c.queue.limit_bytes = 12_000;
    c.queue.header_limit_bytes = 1_000;
    c.reconvergence = Duration::from_us(30);
    c.propagation = Duration::from_ns(500);
    let mut sim = harness::simulator(c).unwrap();
    let mut r = mrc_sim::core::Rng::new(seed ^ 0xfeed);
    let (hosts, links, switches) = {
        let f = &sim.handler().fabric;
        (f.topology().hosts(), f.links(), f.topology().switches())
    };
    for _ in 0..faults {
        let at = Time::from_ns(r.below(200_000));
        let fault = match r.below(4) {
            0 | 1 => Fault::LinkDown(LinkId(r.below(links as u64) as u32)),
            2 => Fault::LinkUp(LinkId(r.below(links as u64) as u32)),
            _ => Fault::Blackhole(mrc_sim::fabric::SwitchId(r.below(switches as u64) as u32)),
        };
        harness::fault_at(&mut sim, at, fault).unwrap();
    }
    for i in 0..packets {
        let src = r.below(hosts as u64) as u32;
        let dst = (src + 1 + r.below(hosts as u64 - 1) as u32) % hosts;
        let plane = r.below(2) as u32;
        let route = if r.chance(500_000) {
            let path = r.below(64) as u32;
            Route::Usid(
                sim.handler()
                    .fabric
                    .topology()
                    .usid_route(src, dst, path)
                    .unwrap(),
            )
        } else {
            Route::Ecmp { hash: r.u64() }
        };
        let p = Packet {
            kind: if r.chance(500_000) {
                TransportKind::Mrc
            } else {
                TransportKind::Roce
            },
            ecn: mrc_sim::fabric::Ecn::Ect,
            size_bytes: 64 + r.below(4000) as u32,
            ..pkt(src, dst, i as u64, route)
        };
        harness::inject_at(&mut sim, Time::from_ns(r.below(200_000)), src, plane, p).unwrap();
    }
    sim.run_until_idle();
    let stats = sim.stats();
    (sim.into_handler(), stats)
}

#[test]
fn conservation_and_determinism_under_chaos() {
    let (a, sa) = chaos(7, 20_000, 40);
    let t = a.fabric.totals();
    assert!(t.conserved(), "{t:?}");
    assert_eq!(t.in_flight, 0);
    assert_eq!(t.injected, 20_000);
    assert_eq!(t.delivered, a.delivered.len() as u64);
    // Every cause that the chaos can produce shows up, and port counters add up to the totals.
    for cause in [
        DropCause::QueueFull,
        DropCause::LinkDown,
        DropCause::UsidPortDown,
        DropCause::RandomLoss,
        DropCause::Corrupt,
    ] {
        assert!(t.dropped(cause) > 0, "{cause:?} {t:?}");
    }
    assert_eq!(a.fabric.sum_counters().drops, t.drops);
    assert_links_conserve(&a.fabric);
    for d in &a.delivered {
        assert_eq!(d.host, d.packet.dst);
        assert!(d.packet.payload.verify());
    }
    // Same seed: same counters, same event trace.
    let (b, sb) = chaos(7, 20_000, 40);
    assert_eq!(a.fabric.all_port_counters(), b.fabric.all_port_counters());
    assert_eq!(t, b.fabric.totals());
    assert_eq!(sa.trace_hash, sb.trace_hash);
    assert_eq!(a.delivered, b.delivered);
    // Another seed: another run.
    let (c, sc) = chaos(8, 20_000, 40);
    assert_ne!(sa.trace_hash, sc.trace_hash);
    assert_ne!(a.fabric.totals(), c.fabric.totals());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn conservation_holds_for_any_seed(seed in any::<u64>(), faults in 0u32..30) {
        let (h, _) = chaos(seed, 1_500, faults);
        let t = h.fabric.totals();
        prop_assert!(t.conserved(), "{:?}", t);
        prop_assert_eq!(t.in_flight, 0);
        prop_assert_eq!(h.fabric.sum_counters().drops, t.drops);
        prop_assert_eq!(h.fabric.bad_events(), 0);
        assert_links_conserve(&h.fabric);
    }
}
