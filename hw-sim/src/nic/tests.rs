//! NIC model tests: EV routes, shared route knowledge, the first turns, shard widths.

use super::*;
use crate::fabric::Shape;
use crate::run::{run, Scenario};
use mrc_firmware::engine::ev_state::EvState;

#[test]
fn a_plane_s_evs_spread_over_every_path() {
    // As many EVs per plane as paths or more: EV i takes path (i / planes + base) % paths.
    for ev in 0..EVS as u32 {
        assert_eq!(ev_path(ev, 4, 8, 12345), (ev / 4 + 12345) % 8);
        assert_eq!(ev_path(ev, 1, 64, 7), (ev + 7) % 64);
    }
    // 8 planes of 32 EVs, 256 paths: a connection's EVs on a plane take 32 distinct
    // paths, and the connections of a leaf (mixes 0..8) together take all 256.
    let mut all = std::collections::BTreeSet::new();
    for mix in 0..8 {
        let mut one = std::collections::BTreeSet::new();
        for ev in (0..EVS as u32).filter(|e| e % 8 == 3) {
            let p = ev_path(ev, 8, 256, mix);
            assert!(p < 256);
            one.insert(p);
            all.insert(p);
        }
        assert_eq!(one.len(), 32);
    }
    assert_eq!(all.len(), 256);
}

/// A loss on a dead link retires, for every QP of the NIC, the EVs whose routes take that
/// link up to the last switch (most of them never lost a packet of their own), and nothing
/// on the other plane.
#[test]
fn a_loss_is_shared_with_every_qp_whose_route_takes_the_dead_link() {
    let mut sc = Scenario::tiny(Transport::Mrc);
    sc.workload = crate::workload::Workload::AllToAll {
        bytes_per_pair: 256 << 10,
        msg_bytes: 64 << 10,
    };
    let mut sim = crate::run::build(&sc).unwrap();
    while !sim.handler().main_done() && sim.now() < sc.time_limit {
        let next = sim.now().saturating_add(Duration::from_us(10));
        sim.run_until(next);
    }
    let w = sim.handler();
    assert!(w.main_done());
    let topo = w.fabric.topology();
    let nic = &w.nics[0];
    let planes = sc.fabric.planes;
    // Host 0 sits on leaf 0, whose link to spine 0 of plane 0 failed: every route of its
    // that leaves the leaf through spine 0 (path 0) is dead.
    let (mut dead, mut shared, mut other_plane) = (0, 0, 0);
    for q in 0..nic.connections() {
        let peer = nic.peer(q).unwrap();
        let n = topo.path_count(0, peer);
        if n < 2 {
            continue; // same leaf
        }
        let c = nic.conns[q as usize];
        for e in 0..EVS as u16 {
            let st = nic.ev_stats(q, e).unwrap();
            let path = ev_path(u32::from(e), planes, n, c.path_base);
            if u32::from(e) % planes != 0 {
                other_plane += u32::from(st.state != EvState::Good);
            } else if path == 0 {
                assert_eq!(st.state, EvState::AssumedBad, "QP {q} EV {e}");
                dead += 1;
                shared += u32::from(st.lost == 0);
            }
        }
    }
    assert!(dead > 0);
    assert!(
        shared * 2 > dead,
        "{shared} of {dead} retired by a shared loss"
    );
    assert_eq!(other_plane, 0);
}

/// The NICs of an all-to-all begin toward different peers: in the first packets every
/// receiver gets its share. With the QPs placed in QPN order every NIC's shards began on
/// the QPs of the same residue mod [`SHARD_QPS`], i.e. the same few hosts, and the others
/// received nothing.
#[test]
fn an_all_to_all_starts_toward_every_host() {
    let mut sc = Scenario::tiny(Transport::Mrc);
    sc.failure = None;
    sc.workload = crate::workload::Workload::AllToAll {
        bytes_per_pair: 256 << 10,
        msg_bytes: 64 << 10,
    };
    let mut sim = crate::run::build(&sc).unwrap();
    let hosts = sim.handler().nics.len();
    // Data packets sent toward each host, until the NICs sent one per connection each.
    let mut toward = vec![0u64; hosts];
    while toward.iter().sum::<u64>() < (hosts * (hosts - 1)) as u64 {
        let next = sim.now().saturating_add(Duration::from_ns(20));
        sim.run_until(next);
        assert!(sim.now() < Time::from_us(50), "nothing sent");
        toward.fill(0);
        for n in &sim.handler().nics {
            for q in 0..n.connections() {
                let sent = n.qp(q).unwrap().tx;
                toward[n.peer(q).unwrap() as usize] += sent.data_sent;
            }
        }
    }
    let mean = toward.iter().sum::<u64>() / hosts as u64;
    let least = toward.iter().copied().min().unwrap_or(0);
    assert!(
        least * 2 >= mean,
        "data packets toward each host {toward:?}"
    );
}

#[test]
fn eight_plane_nics_with_narrow_shards_complete_a_permutation() {
    let mut sc = Scenario::tiny(Transport::Mrc);
    sc.fabric.planes = 8;
    sc.fabric.shape = Shape::LeafSpine {
        hosts: 16,
        radix: 8,
    };
    let r = run(&sc).unwrap();
    assert_eq!((r.completed, r.hosts), (16, 16));
    // A permutation opens at most 2 QPs per NIC: one narrow shard each.
    let sim = crate::run::build(&sc).unwrap();
    for n in &sim.handler().nics {
        assert_eq!(n.shape(), (1, NARROW_QPS));
    }
    // An all-to-all needs wide shards.
    let sim = crate::run::build(&Scenario::default_for(Transport::Mrc)).unwrap();
    assert_eq!(sim.handler().nics[0].shape(), (16, SHARD_QPS));
}
