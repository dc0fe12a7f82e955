//! Routing: every uSID route for every path index reaches the right host (statically, by walking
//! the wiring, and dynamically, through the running fabric); distinct indices give distinct paths;
//! ECMP spreads flows over the equal-cost ports.

use std::collections::HashSet;

use mrc_sim::core::Time;
use mrc_sim::fabric::{
    harness, FabricConfig, Packet, Payload, PortId, PortOwner, Route, Shape, TransportKind,
};

fn cfg(shape: Shape, planes: u32) -> FabricConfig {
    FabricConfig {
        planes,
        ..FabricConfig::htsim_reference(shape)
    }
}

fn packet(src: u32, dst: u32, route: Route) -> Packet {
    Packet {
        src,
        dst,
        size_bytes: 1000,
        payload: Payload::new(900, src ^ dst),
        route,
        ..Packet::default()
    }
}

/// Walks `src`'s route on `plane` through the wiring: the ports it leaves by, and the host it
/// ends at.
fn walk(
    f: &mrc_sim::fabric::Fabric,
    src: u32,
    dst: u32,
    path: u32,
    plane: u32,
) -> (Vec<PortId>, u32) {
    let topo = f.topology();
    let mut r = topo.usid_route(src, dst, path).unwrap();
    let mut port = topo.host_port(src, plane);
    let mut visited = vec![port];
    for _ in 0..16 {
        let arrived = f.port_peer(port).unwrap();
        match topo.port_owner(arrived) {
            PortOwner::Host { host, plane: p } => {
                assert_eq!(p, plane);
                assert_eq!(r.active(), 0, "route not used up at the host");
                return (visited, host);
            }
            PortOwner::Switch { switch, .. } => {
                let out = topo
                    .usid_hop(switch, &mut r)
                    .expect("the switch has a route");
                port = topo.switch_port(switch, out);
                visited.push(port);
            }
        }
    }
    panic!("route loops");
}

fn check_all_routes(shape: Shape, planes: u32) {
    let mut sim = harness::simulator(cfg(shape, planes)).unwrap();
    let hosts = sim.handler().fabric.topology().hosts();
    let mut injected = 0u64;
    for plane in 0..planes {
        for src in 0..hosts {
            for dst in 0..hosts {
                if src == dst {
                    continue;
                }
                let f = &sim.handler().fabric;
                let n = f.topology().path_count(src, dst);
                assert!(n >= 1 && n <= f.topology().max_paths());
                let mut seen = HashSet::new();
                for path in 0..n {
                    let (ports, host) = walk(f, src, dst, path, plane);
                    assert_eq!(host, dst, "{src}->{dst} path {path}");
                    assert!(
                        seen.insert(ports),
                        "{src}->{dst} path {path} repeats a path"
                    );
                }
                // Indices wrap modulo the path count.
                assert_eq!(
                    f.topology().usid_route(src, dst, n).unwrap(),
                    f.topology().usid_route(src, dst, 0).unwrap()
                );
                for path in 0..n {
                    let route = sim
                        .handler()
                        .fabric
                        .topology()
                        .usid_route(src, dst, path)
                        .unwrap();
                    let at = Time::from_ns(injected * 10);
                    harness::inject_at(
                        &mut sim,
                        at,
                        src,
                        plane,
                        packet(src, dst, Route::Usid(route)),
                    )
                    .unwrap();
                    injected += 1;
                }
            }
        }
    }
    sim.run_until_idle();
    let h = sim.handler();
    let t = h.fabric.totals();
    assert_eq!(t.injected, injected);
    assert_eq!(t.delivered, injected, "{t:?}");
    for d in &h.delivered {
        assert_eq!(d.host, d.packet.dst);
        assert_eq!(d.plane, d.packet.plane as u32);
        assert!(d.packet.payload.verify());
        match d.packet.route {
            Route::Usid(r) => assert_eq!(r.active(), 0),
            Route::Ecmp { .. } => unreachable!(),
        }
    }
}

#[test]
fn usid_routes_leaf_spine_two_planes() {
    // radix 4: 2 hosts per leaf, 2 spines, 4 leaves; 7 hosts leaves the last leaf half empty.
    check_all_routes(Shape::LeafSpine { hosts: 7, radix: 4 }, 2);
    check_all_routes(
        Shape::LeafSpine {
            hosts: 24,
            radix: 8,
        },
        1,
    );
}

#[test]
fn usid_routes_fat_tree() {
    check_all_routes(Shape::FatTree { k: 4 }, 2);
}

#[test]
fn path_counts_match_the_documentation() {
    let t = harness::simulator(cfg(Shape::FatTree { k: 16 }, 1)).unwrap();
    let topo = t.handler().fabric.topology();
    assert_eq!(topo.hosts(), 1024);
    assert_eq!(topo.max_paths(), 64);
    assert_eq!(topo.path_count(0, 1023), 64); // different pods
    assert_eq!(topo.path_count(0, 63), 8); // same pod (64 hosts per pod)
    assert_eq!(topo.path_count(0, 7), 1); // same edge
    assert_eq!(topo.path_count(5, 5), 0);
    assert_eq!(topo.switches_per_plane(), 16 * 8 * 2 + 64);
    let t = harness::simulator(cfg(
        Shape::LeafSpine {
            hosts: 64,
            radix: 16,
        },
        4,
    ))
    .unwrap();
    let topo = t.handler().fabric.topology();
    assert_eq!(topo.max_paths(), 8);
    assert_eq!(topo.switches(), 4 * (8 + 8));
    assert!(topo.usid_route(0, 64, 0).is_err());
    assert!(topo.usid_route(3, 3, 0).is_err());
}

#[test]
fn ids_round_trip() {
    let sim = harness::simulator(cfg(Shape::FatTree { k: 4 }, 3)).unwrap();
    let f = &sim.handler().fabric;
    let topo = f.topology();
    for sw in 0..topo.switches() {
        let sw = mrc_sim::fabric::SwitchId(sw);
        let info = topo.switch_info(sw);
        assert_eq!(topo.switch(info.plane, info.tier, info.index), Some(sw));
        for p in 0..info.ports {
            let port = topo.switch_port(sw, p);
            assert_eq!(
                topo.port_owner(port),
                PortOwner::Switch {
                    switch: sw,
                    port: p
                }
            );
            // Every port of a full fat tree is wired, both ways.
            let peer = f.port_peer(port).unwrap();
            assert_eq!(f.port_peer(peer), Some(port));
        }
    }
    assert_eq!(f.links(), 3 * (16 + 16 + 16));
}

#[test]
fn ecmp_spreads_flows_and_delivers() {
    // Leaf-spine radix 8: 4 spines; 400 flows from leaf 0 to leaf 1.
    let mut sim = harness::simulator(cfg(
        Shape::LeafSpine {
            hosts: 16,
            radix: 8,
        },
        1,
    ))
    .unwrap();
    let flows = 400u64;
    for i in 0..flows {
        let src = (i % 4) as u32;
        let dst = 4 + (i % 4) as u32;
        let hash = i.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0xabc;
        let p = Packet {
            kind: TransportKind::Roce,
            ..packet(src, dst, Route::Ecmp { hash })
        };
        harness::inject_at(&mut sim, Time::from_ns(i * 100), src, 0, p).unwrap();
    }
    sim.run_until_idle();
    let f = &sim.handler().fabric;
    assert_eq!(f.totals().delivered, flows);
    for d in &sim.handler().delivered {
        assert_eq!(d.host, d.packet.dst);
    }
    let topo = f.topology();
    let leaf0 = topo.switch(0, 0, 0).unwrap();
    let per_spine: Vec<u64> = (4..8)
        .map(|p| {
            f.port_counters(topo.switch_port(leaf0, p))
                .unwrap()
                .tx_packets
        })
        .collect();
    assert_eq!(per_spine.iter().sum::<u64>(), flows);
    for n in &per_spine {
        assert!((60..=140).contains(n), "uneven spread {per_spine:?}");
    }
    // The same flow hash always takes the same spine (per-flow ECMP).
    let mut sim = harness::simulator(cfg(
        Shape::LeafSpine {
            hosts: 16,
            radix: 8,
        },
        1,
    ))
    .unwrap();
    for i in 0..50u64 {
        let p = packet(0, 5, Route::Ecmp { hash: 77 });
        harness::inject_at(&mut sim, Time::from_ns(i * 100), 0, 0, p).unwrap();
    }
    sim.run_until_idle();
    let f = &sim.handler().fabric;
    let used = (4..8)
        .filter(|p| f.port_counters(topo_port(f, 0, *p)).unwrap().tx_packets > 0)
        .count();
    assert_eq!(used, 1);
}

fn topo_port(f: &mrc_sim::fabric::Fabric, leaf: u32, port: u32) -> PortId {
    let t = f.topology();
    t.switch_port(t.switch(0, 0, leaf).unwrap(), port)
}

#[test]
fn ecmp_in_fat_tree_uses_every_core() {
    let mut sim = harness::simulator(cfg(Shape::FatTree { k: 4 }, 1)).unwrap();
    let n = 800u64;
    for i in 0..n {
        let src = (i % 4) as u32; // pod 0
        let dst = 12 + (i % 4) as u32; // pod 3
        let p = packet(
            src,
            dst,
            Route::Ecmp {
                hash: i * 0x9e37_79b9 + 1,
            },
        );
        harness::inject_at(&mut sim, Time::from_ns(i * 50), src, 0, p).unwrap();
    }
    sim.run_until_idle();
    let f = &sim.handler().fabric;
    assert_eq!(f.totals().delivered, n);
    let topo = f.topology();
    for core in 0..4 {
        let sw = topo.switch(0, 2, core).unwrap();
        let tx: u64 = (0..4)
            .map(|p| f.port_counters(topo.switch_port(sw, p)).unwrap().tx_packets)
            .sum();
        assert!((120..=280).contains(&tx), "core {core}: {tx}");
    }
}
