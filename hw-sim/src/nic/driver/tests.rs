//! The driver's NICs on a Clos fabric, driven as the device side drives them.

use mrc_firmware::admin::QpEngine;
use mrc_firmware::datapath::packet::{LocalBuf, SendWr};
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::engine::{CompletionKind, QpState};

use super::super::setup::{qp_attrs, shard_configs};
use super::*;
use crate::core::sim::Simulator;
use crate::core::time::Duration;
use crate::fabric::Fabric;
use crate::nic::Transport;
use crate::run::{Scenario, World, FABRIC};

const RKEY: u32 = 0x8000_0042;
const BASE_VA: u64 = 0x7000_0000;

/// Hosts 0 and 5 (different leaves of the tiny fabric) each open one QP, bound to device
/// QPNs 7 and 9; host 5 registers a region.
fn setup(sc: &Scenario) -> (Simulator<World>, u32, u32) {
    let mut fcfg = sc.fabric;
    fcfg.seed = sc.seed;
    let fabric = Fabric::new(fcfg, FABRIC).unwrap();
    let cfg = sc.nic_config();
    let nics = (0..fabric.topology().hosts())
        .map(|h| Nic::for_driver(h, cfg, 8).unwrap())
        .collect();
    let mut sim = Simulator::new(World::for_driver(fabric, nics));
    let (_, _, nscc) = shard_configs(&cfg).unwrap();
    let (w, mut s) = sim.handler_and_scheduler();
    let mut open = |host: u32, dev: u32, peer: u32, peer_dev: u32| {
        w.host_input(host, &mut s, |nic, fab, s, me| {
            let mut e = nic.driver_engine();
            let q = e.create_qp().unwrap().unwrap();
            if host == 5 {
                assert!(e.register_region(MemRegion {
                    rkey: RKEY,
                    base_va: BASE_VA,
                    length: 1 << 20,
                    access: Access::REMOTE_WRITE,
                }));
            }
            let attrs = qp_attrs(&cfg, nscc, peer_dev);
            for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
                e.modify_qp(q, st, &attrs, 0).unwrap();
            }
            nic.driver_bind(dev, q, peer);
            nic.driver_settle(s.now(), fab, s, me);
            q
        })
        .unwrap()
    };
    let q0 = open(0, 7, 5, 9);
    let q5 = open(5, 9, 0, 7);
    (sim, q0, q5)
}

/// Runs until every NIC is idle (at most `limit`), collecting every host's reports.
fn run(sim: &mut Simulator<World>, limit: Time) -> Vec<(u32, Time, DriverEvent)> {
    let mut got = Vec::new();
    loop {
        let next = sim.now().saturating_add(Duration::from_us(1));
        sim.run_until(next);
        let now = sim.now();
        for n in &mut sim.handler_mut().nics {
            while let Some(e) = n.driver_poll(now) {
                got.push((n.host(), now, e));
            }
        }
        if sim.handler().driver_quiet() || now >= limit {
            return got;
        }
    }
}

/// Three writes (the last with an immediate) leave host 0 through the doorbell, the WQE
/// fetch and the fabric; host 5's stage places every byte where the RETH says, the
/// immediate's receive completes after its bytes were placed, and host 0's sends complete in
/// order, after a round trip.
#[test]
fn the_driver_s_writes_cross_the_clos_fabric() {
    let mut sc = Scenario::tiny(Transport::Mrc);
    sc.failure = None;
    let (mut sim, q0, q5) = setup(&sc);
    let sizes = [10_000u32, 1, 64 << 10];
    let vas = [BASE_VA, BASE_VA + 0x1_0000, BASE_VA + 0x2_0000];
    let wrs: Vec<SendWr> = (0..3)
        .map(|i| SendWr {
            wr_id: i as u64,
            local: LocalBuf {
                handle: i as u32,
                offset: 0,
            },
            remote_va: vas[i],
            rkey: RKEY,
            len: sizes[i],
            imm: (i == 2).then_some(0xabcd),
            signaled: true,
        })
        .collect();
    let (w, mut s) = sim.handler_and_scheduler();
    w.host_input(5, &mut s, |nic, _, _, _| {
        assert!(nic.driver_post_recv(q5, 1234));
    });
    let went = w
        .host_input(0, &mut s, |nic, fab, s, me| {
            nic.driver_post(s.now(), q0, &wrs, fab, s, me)
        })
        .unwrap();
    assert_eq!(went, 3);
    let got = run(&mut sim, Time::from_us(500));
    // Host 5: every byte of every write placed once, at its RETH address.
    let mut placed = [0u64; 3];
    let mut last_place = Time::ZERO;
    let mut recv = None;
    for &(h, t, e) in &got {
        match e {
            DriverEvent::Placed(Placement {
                qpn,
                src_host,
                local,
                offset,
                len,
                ..
            }) => {
                assert_eq!((h, qpn, src_host), (5, q5, 0));
                let i = local.handle as usize;
                assert_eq!(BASE_VA + offset, vas[i] + local.offset);
                placed[i] += u64::from(len);
                last_place = last_place.max(t);
            }
            DriverEvent::Wrote(HostWrite::Completion(c)) if h == 5 => {
                assert!(
                    matches!(c.kind, CompletionKind::RecvImm { imm: 0xabcd, .. }),
                    "{c:?}"
                );
                recv = Some((t, c));
            }
            _ => {}
        }
    }
    assert_eq!(placed, sizes.map(u64::from));
    let (t, c) = recv.expect("the immediate's receive completion");
    assert_eq!((c.qpn, c.wr_id, c.status), (q5, 1234, Ok(())));
    assert!(
        t >= last_place,
        "the receive completed before its bytes landed"
    );
    // Host 0: the three sends complete, in order, without error.
    let sends: Vec<_> = got
        .iter()
        .filter_map(|&(h, t, e)| match e {
            DriverEvent::Wrote(HostWrite::Completion(c)) if h == 0 => Some((t, c)),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 3);
    for (i, (_, c)) in sends.iter().enumerate() {
        assert_eq!(
            (c.qpn, c.wr_id, c.kind, c.status),
            (q0, i as u64, CompletionKind::Send, Ok(()))
        );
    }
    // A round trip over the fabric at least.
    assert!(sends[0].0 >= Time::ZERO.saturating_add(sc.base_rtt()));
    let w = sim.handler();
    assert!(w.nics[0].counters().tx_packets >= 3 && w.nics[0].counters().doorbells == 1);
    assert!(w.driver_quiet());
}
