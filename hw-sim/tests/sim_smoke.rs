//! Smoke tests of the whole simulator: tiny scenarios, every transport.

use mrc_sim::nic::Transport;
use mrc_sim::run::{format_table, run, Scenario};

#[test]
fn tiny_runs_complete_with_every_byte_acknowledged() {
    for t in Transport::ALL {
        let sc = Scenario::tiny(t);
        let r = run(&sc).expect("tiny scenario is valid");
        assert_eq!(
            r.completed,
            r.flows,
            "{}: {}",
            t.name(),
            format_table(std::slice::from_ref(&r))
        );
        assert_eq!(r.failed, 0);
        assert_eq!(
            r.acked_bytes,
            sc.workload.busiest_nic_bytes(r.hosts) * u64::from(r.hosts)
        );
        // Every byte placed at least once (duplicates of retransmitted packets are not placed).
        assert!(r.placed_bytes >= r.acked_bytes);
        assert_eq!(r.nic_rx_dropped, 0);
        assert_eq!(r.bad_events, 0);
        assert!(
            r.ratio() >= 1.0,
            "{}: faster than ideal: {}",
            t.name(),
            r.ratio()
        );
    }
}

#[test]
fn same_seed_same_report() {
    for t in Transport::ALL {
        let sc = Scenario::tiny(t);
        let a = run(&sc).unwrap();
        let b = run(&sc).unwrap();
        assert_eq!(a, b);
        assert_eq!(format_table(&[a]), format_table(&[b]));
    }
}

#[test]
fn fabric_conserves_packets() {
    for t in Transport::ALL {
        let r = run(&Scenario::tiny(t)).unwrap();
        assert!(r.conserved, "{:?}", r.totals);
        assert!(r.totals.injected > 0);
    }
}

#[test]
fn the_failure_drops_packets_and_mrc_recovers() {
    let r = run(&Scenario::tiny(Transport::Mrc)).unwrap();
    let lost: u64 = r.drops.iter().sum();
    assert_eq!(r.completed, r.flows);
    // The failure cost packets (data and ACKs); MRC repaired the data by retransmitting.
    assert!(
        lost > 0 && r.retransmits > 0,
        "{lost} lost, {} retransmits",
        r.retransmits
    );
    assert!(r.data_sent >= r.retransmits);
}

#[test]
fn nic_and_fabric_counts_agree_end_to_end() {
    use mrc_sim::core::{Duration, Time};
    let sc = Scenario::tiny(Transport::Mrc);
    let mut sim = mrc_sim::run::build(&sc).unwrap();
    while sim.now() < Time::from_ms(10) && !sim.handler().main_done() {
        let next = sim.now().saturating_add(Duration::from_us(10));
        sim.run_until(next);
    }
    let w = sim.handler();
    let t = w.fabric.totals();
    let tx: u64 = w.nics.iter().map(|n| n.counters().tx_packets).sum();
    let rx: u64 = w.nics.iter().map(|n| n.counters().rx_packets).sum();
    // Every packet a NIC handed over was injected; every delivery reached a NIC.
    assert_eq!(tx, t.injected);
    assert_eq!(rx, t.delivered);
    assert!(t.conserved(), "{t:?}");
}
