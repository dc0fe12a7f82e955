//! Routes the controller plans are routes the fabric forwards.
//!
//! The controller's path planner (`mrc_driver::ctl::plan`) is given the fabric's description as
//! a user writes it (leaves, spines, pods, cores, hosts per leaf: the shape's published sizes,
//! not the simulator's own tables), plans an EV for every path index on every plane, and each
//! planned carrier is forwarded by the simulator's fabric: walked hop by hop through the wiring
//! with the switches' own forwarding decision, then injected into the running fabric. Every EV
//! must reach the planned destination on the planned plane with its carrier used up, and
//! distinct path indices must cross distinct ports. A checker that cannot fail is caught too: a
//! planted misroute must be reported.

use std::collections::HashSet;
use std::net::Ipv6Addr;

use mrc_abi::wire::usid;
use mrc_driver::ctl::plan::{self, Clos, PlannedEv};
use mrc_sim::core::Time;
use mrc_sim::fabric::{
    harness, FabricConfig, Packet, Payload, PortId, PortOwner, Route, Shape, Topology, UsidRoute,
};
use proptest::prelude::*;

/// The controller's description of `shape` with `planes` planes, from the shape's sizes.
fn describe(shape: Shape, planes: u32) -> Clos {
    let planes = planes as u8;
    match shape {
        Shape::LeafSpine { hosts, radix } => {
            let half = (radix / 2) as u16;
            let leaves = hosts.div_ceil(radix / 2) as u16;
            Clos::two_tier(planes, leaves, half, half, usid::DEFAULT_BLOCK)
        }
        Shape::FatTree { k } => {
            let h = (k / 2) as u16;
            Clos {
                planes,
                tiers: 3,
                leaves: k as u16 * h,
                spines: h,
                pods: k as u16,
                cores: h * h,
                hosts_per_leaf: h,
                block: usid::DEFAULT_BLOCK,
            }
        }
    }
}

/// The fabric's route for a carrier: its uSIDs, as the NIC writes them.
fn route_of(carrier: Ipv6Addr) -> UsidRoute {
    let usids: Vec<u16> = usid::remaining(carrier).collect();
    UsidRoute::new(&usids).unwrap()
}

/// Walks `ev` from `src` through `topo`'s wiring: the ports it leaves by, or why it went wrong.
fn walk(
    topo: &Topology,
    peer: impl Fn(PortId) -> Option<PortId>,
    src: u32,
    dst: u32,
    ev: &PlannedEv,
) -> Result<Vec<PortId>, String> {
    let plane = u32::from(ev.plane);
    let mut r = route_of(ev.carrier);
    let mut port = topo.host_port(src, plane);
    let mut visited = vec![port];
    for _ in 0..8 {
        let arrived = peer(port).ok_or(format!("port {port:?} has no link"))?;
        match topo.port_owner(arrived) {
            PortOwner::Host { host, plane: p } => {
                if (host, p) != (dst, plane) {
                    return Err(format!("delivered to host {host} plane {p}"));
                }
                if r.active() != 0 {
                    return Err("carrier not used up at the host".into());
                }
                return Ok(visited);
            }
            PortOwner::Switch { switch, .. } => {
                let out = topo
                    .usid_hop(switch, &mut r)
                    .ok_or(format!("switch {switch:?} has no route"))?;
                port = topo.switch_port(switch, out);
                visited.push(port);
            }
        }
    }
    Err("route loops".into())
}

/// Plans every path index on every plane for every host pair of `shape` and checks the
/// fabric forwards each planned EV to its destination (statically and through the running
/// fabric). Returns the EVs checked.
fn check_planned_routes(shape: Shape, planes: u32) -> u64 {
    let cfg = FabricConfig {
        planes,
        ..FabricConfig::htsim_reference(shape)
    };
    let clos = describe(shape, planes);
    let mut sim = harness::simulator(cfg).unwrap();
    let hosts = sim.handler().fabric.topology().hosts();
    let mut injected = 0u64;
    for src in 0..hosts {
        for dst in (0..hosts).filter(|d| *d != src) {
            let paths = plan::paths(&clos, src, dst).unwrap();
            let f = &sim.handler().fabric;
            assert_eq!(
                paths.len() as u32,
                f.topology().path_count(src, dst),
                "{shape:?}: planner and fabric count different paths {src}->{dst}"
            );
            // Every path index on every plane: EV i is plane i % planes, path i / planes.
            let n_evs = (paths.len() as u32 * planes) as u16;
            let evs = plan::plan(&clos, src, dst, n_evs).unwrap();
            let mut seen = HashSet::new();
            for ev in &evs {
                let ports = walk(f.topology(), |p| f.port_peer(p), src, dst, ev)
                    .unwrap_or_else(|e| panic!("{shape:?} {src}->{dst} {ev:?}: {e}"));
                assert!(seen.insert(ports), "{src}->{dst} {ev:?} repeats a path");
            }
            for ev in &evs {
                let pkt = Packet {
                    src,
                    dst,
                    size_bytes: 1000,
                    payload: Payload::new(900, src ^ dst),
                    route: Route::Usid(route_of(ev.carrier)),
                    transport_tag: u64::from(ev.plane),
                    ..Packet::default()
                };
                let at = Time::from_ns(injected * 10);
                harness::inject_at(&mut sim, at, src, u32::from(ev.plane), pkt).unwrap();
                injected += 1;
            }
        }
    }
    sim.run_until_idle();
    let h = sim.handler();
    let t = h.fabric.totals();
    assert_eq!((t.injected, t.delivered), (injected, injected), "{t:?}");
    for d in &h.delivered {
        assert_eq!(d.host, d.packet.dst);
        assert_eq!(u64::from(d.plane), d.packet.transport_tag, "wrong plane");
        assert!(d.packet.payload.verify());
    }
    injected
}

#[test]
fn planned_routes_reach_their_hosts_two_tier() {
    // radix 8: 4 hosts per leaf, 4 spines; 14 hosts leave the last leaf half empty.
    let n = check_planned_routes(
        Shape::LeafSpine {
            hosts: 14,
            radix: 8,
        },
        4,
    );
    assert!(n > 14 * 13 * 4);
}

#[test]
fn planned_routes_reach_their_hosts_three_tier() {
    // k = 4: 16 hosts, 4 paths between pods, 2 within a pod.
    let n = check_planned_routes(Shape::FatTree { k: 4 }, 2);
    assert!(n > 16 * 15 * 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn planned_routes_reach_their_hosts_any_size(
        two_tier in any::<bool>(),
        half in 1u32..=4,
        fill in 0u32..=100,
        planes in 1u32..=4,
    ) {
        let shape = if two_tier {
            let radix = 2 * half;
            // 2..=radix * radix / 2 hosts (at most `radix` leaves).
            let most = radix * half;
            Shape::LeafSpine { hosts: 2 + (most - 2) * fill / 100, radix }
        } else {
            Shape::FatTree { k: 2 * half.min(3) }
        };
        check_planned_routes(shape, planes);
    }
}

/// The checker catches a misroute: a carrier whose destination leaf is wrong, or whose path
/// names a switch off the way, fails the walk.
#[test]
fn a_misrouted_plan_fails_the_check() {
    let shape = Shape::FatTree { k: 4 };
    let cfg = FabricConfig::htsim_reference(shape);
    let sim = harness::simulator(cfg).unwrap();
    let f = &sim.handler().fabric;
    let clos = describe(shape, 1);
    let ev = plan::plan(&clos, 0, 15, 1).unwrap()[0];
    assert!(walk(f.topology(), |p| f.port_peer(p), 0, 15, &ev).is_ok());
    let mut usids: Vec<u16> = usid::remaining(ev.carrier).collect();
    // Leaf 7 -> leaf 6: the packet reaches host 13 instead of 15.
    usids[4] -= 1;
    let wrong_leaf = PlannedEv {
        carrier: usid::carrier(clos.block, &usids).unwrap(),
        ..ev
    };
    let e = walk(f.topology(), |p| f.port_peer(p), 0, 15, &wrong_leaf).unwrap_err();
    assert!(e.contains("delivered to host 13"), "{e}");
    // A core the source pod's aggregation switch is not cabled to.
    usids[4] += 1;
    usids[2] ^= 0x2;
    let wrong_core = PlannedEv {
        carrier: usid::carrier(clos.block, &usids).unwrap(),
        ..ev
    };
    let e = walk(f.topology(), |p| f.port_peer(p), 0, 15, &wrong_core).unwrap_err();
    assert!(e.contains("has no route"), "{e}");
    // A plane the fabric does not have.
    let wrong_plane = PlannedEv { plane: 1, ..ev };
    assert!(walk(f.topology(), |p| f.port_peer(p), 0, 15, &wrong_plane).is_err());
}
