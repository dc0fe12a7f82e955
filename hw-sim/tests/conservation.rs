//! Conservation: every byte a NIC sends is delivered or counted dropped, per link and end to
//! end, for every workload.

use mrc_sim::core::{Duration, Time};
use mrc_sim::fabric::LinkId;
use mrc_sim::nic::Transport;
use mrc_sim::run::{build, Scenario, World};
use mrc_sim::workload::Workload;

fn workloads() -> Vec<Workload> {
    vec![
        Workload::Permutation {
            bytes_per_host: 96 << 10,
            msg_bytes: 32 << 10,
        },
        Workload::AllToAll {
            bytes_per_pair: 16 << 10,
            msg_bytes: 8 << 10,
        },
        Workload::RingAllReduce {
            bytes: 128 << 10,
            slices: 2,
            msg_bytes: 8 << 10,
        },
        Workload::Incast {
            senders: 5,
            receiver: 6,
            bytes_per_sender: 48 << 10,
            msg_bytes: 16 << 10,
        },
    ]
}

/// Per link direction `tx(a) - rx(b) - wire_lost(a)` in packets and bytes (what is on the wire).
fn on_wire(w: &World) -> Vec<(i128, i128)> {
    let f = &w.fabric;
    let mut out = Vec::new();
    for l in 0..f.links() {
        let (a, b) = f.link_counters(LinkId(l)).expect("link");
        for (x, y) in [(a, b), (b, a)] {
            out.push((
                i128::from(x.tx_packets)
                    - i128::from(y.rx_packets)
                    - i128::from(x.wire_lost_packets),
                i128::from(x.tx_bytes) - i128::from(y.rx_bytes) - i128::from(x.wire_lost_bytes),
            ));
        }
    }
    out
}

fn end_to_end(w: &World, what: &str) {
    let t = w.fabric.totals();
    let tx: u64 = w.nics.iter().map(|n| n.counters().tx_packets).sum();
    let rx: u64 = w.nics.iter().map(|n| n.counters().rx_packets).sum();
    let rx_bytes: u64 = w.nics.iter().map(|n| n.counters().rx_bytes).sum();
    assert_eq!(
        tx, t.injected,
        "{what}: every packet handed over was injected"
    );
    assert_eq!(rx, t.delivered, "{what}: every delivery reached a NIC");
    assert_eq!(rx_bytes, t.delivered_bytes, "{what}");
    assert!(t.conserved(), "{what}: {t:?}");
    // Host ports: what the NICs sent is what their ports serialized (or dropped there).
    let mut port_tx = 0u64;
    for n in &w.nics {
        for p in 0..w.fabric.topology().planes() {
            let c = w
                .fabric
                .port_counters(w.fabric.topology().host_port(n.host(), p))
                .expect("host port");
            port_tx += c.tx_bytes;
        }
    }
    let nic_tx: u64 = w.nics.iter().map(|n| n.counters().tx_bytes).sum();
    assert!(port_tx <= nic_tx, "{what}: ports sent more than NICs gave");
}

#[test]
fn without_faults_every_byte_arrives_once_per_link_and_end_to_end() {
    for t in [Transport::Mrc, Transport::Mrc1Ev] {
        for wl in workloads() {
            let what = format!("{} / {}", t.name(), wl.name());
            let sc = Scenario {
                workload: wl,
                failure: None,
                ..Scenario::tiny(t)
            };
            let mut sim = build(&sc).unwrap();
            // Without faults nothing is left to probe: the run goes idle with empty wires.
            sim.run(Time::from_ms(50), 20_000_000);
            assert_eq!(sim.pending(), 0, "{what}: did not go idle");
            let w = sim.handler();
            assert!(w.main_done(), "{what}");
            for (i, (p, b)) in on_wire(w).into_iter().enumerate() {
                assert_eq!((p, b), (0, 0), "{what}: link direction {i}");
            }
            let t = w.fabric.totals();
            assert_eq!(t.in_flight, 0);
            assert_eq!(t.dropped_total(), 0, "{what}: {t:?}");
            end_to_end(w, &what);
            // End to end in payload bytes: every byte placed exactly once and acknowledged.
            let placed: u64 = w.nics.iter().map(|n| n.counters().placed_bytes).sum();
            let acked: u64 = w
                .nics
                .iter()
                .flat_map(|n| n.flow_results())
                .map(|f| f.acked_bytes)
                .sum();
            assert_eq!(acked, wl.total_bytes(8), "{what}");
            let retx: u64 = w
                .nics
                .iter()
                .map(|n| n.datapath_counters().retransmits_sent)
                .sum();
            if retx == 0 {
                assert_eq!(placed, acked, "{what}");
            } else {
                assert!(placed >= acked, "{what}");
            }
        }
    }
}

#[test]
fn with_a_link_failure_every_loss_is_counted() {
    for wl in workloads() {
        let what = wl.name();
        let sc = Scenario {
            workload: wl,
            ..Scenario::tiny(Transport::Mrc)
        };
        let mut sim = build(&sc).unwrap();
        while !sim.handler().main_done() && sim.now() < Time::from_ms(20) {
            let next = sim.now().saturating_add(Duration::from_us(10));
            sim.run_until(next);
        }
        let w = sim.handler();
        assert!(w.main_done(), "{what}");
        let t = w.fabric.totals();
        let mut wire_total = 0i128;
        for (i, (p, b)) in on_wire(w).into_iter().enumerate() {
            assert!(
                p >= 0 && b >= 0,
                "{what}: link direction {i} lost count ({p}, {b})"
            );
            wire_total += p;
        }
        assert!(
            wire_total <= i128::from(t.in_flight),
            "{what}: {wire_total} on wires, {} in flight",
            t.in_flight
        );
        end_to_end(w, what);
    }
}
