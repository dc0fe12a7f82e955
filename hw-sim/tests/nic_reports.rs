//! `transports[].nics`: one report per NIC of a run of the MRC NIC model, none for RoCE, and
//! figures that follow what the run did (every NIC that sent rang doorbells and read its
//! payload by DMA; utilisations are fractions).

use mrc_sim::nic::{FirmwareConfig, FirmwareReport, Transport};
use mrc_sim::run::{run, Scenario};
use mrc_sim::scenario::ScenarioSpec;
use mrc_sim::workload::Workload;

#[test]
fn every_mrc_nic_reports_its_hardware() {
    let spec = ScenarioSpec::builtin("ev-srv6").unwrap();
    let sc = spec.scenario(Transport::Mrc);
    let Workload::Permutation { bytes_per_host, .. } = sc.workload else {
        panic!("a permutation");
    };
    let r = run(&sc).unwrap();
    assert_eq!(r.nics.len(), r.hosts as usize);
    for (i, n) in r.nics.iter().enumerate() {
        assert_eq!(n.host, i as u32);
        assert!(n.pcie.doorbells > 0, "host {i} sent, so it rang doorbells");
        // Every payload byte the host sent was read from host memory, retransmissions again.
        assert!(
            n.pcie.dma_bytes >= bytes_per_host,
            "host {i}: {}",
            n.pcie.dma_bytes
        );
        for u in [
            n.firmware.core_utilisation,
            n.pcie.pcie_tx_utilisation,
            n.pcie.pcie_rx_utilisation,
        ] {
            assert!((0.0..=1.0).contains(&u), "host {i}: utilisation {u}");
        }
        assert!(
            n.pcie.pcie_rx_utilisation > 0.0,
            "host {i}: payload reads take time"
        );
        // Firmware time is on by default: every NIC's cores ran the main loop on its reports,
        // and no CSR ring ever held more than its entries.
        assert!(n.firmware.core_utilisation > 0.0, "host {i}: cores busy");
        assert!(n.firmware.core_steps > 0, "host {i}: steps");
        assert!(
            (1..=mrc_nicloop::RING_ENTRIES as u64).contains(&n.firmware.csr_queue_max_depth),
            "host {i}: CSR queue depth {}",
            n.firmware.csr_queue_max_depth
        );
    }
}

/// With firmware time off the cores report nothing; with one slow core its ring fills, the
/// stages hold their reports (counted) and still every byte arrives.
#[test]
fn a_slow_core_fills_its_ring_and_back_pressures_the_stages() {
    let spec = ScenarioSpec::builtin("ev-srv6").unwrap();
    let sc = spec.scenario(Transport::Mrc);
    let off = run(&Scenario {
        firmware: FirmwareConfig::UNTIMED,
        ..sc
    })
    .unwrap();
    for n in &off.nics {
        assert_eq!(n.firmware, FirmwareReport::default(), "host {}", n.host);
    }
    let slow = run(&Scenario {
        firmware: FirmwareConfig {
            cores: 1,
            clock_mhz: 50,
            ..FirmwareConfig::DEFAULT
        },
        ..sc
    })
    .unwrap();
    assert_eq!(slow.completed, slow.flows);
    assert_eq!(slow.acked_bytes, off.acked_bytes);
    let held: u64 = slow.nics.iter().map(|n| n.firmware.csr_backpressure).sum();
    assert!(held > 0, "a full ring holds reports in the stages");
    for n in &slow.nics {
        assert!(n.firmware.csr_queue_max_depth <= mrc_nicloop::RING_ENTRIES as u64);
        assert!(n.firmware.core_utilisation > 0.0, "host {}", n.host);
    }
    let busiest = slow
        .nics
        .iter()
        .map(|n| n.firmware.core_utilisation)
        .fold(0.0, f64::max);
    assert!(
        busiest > 0.5,
        "one slow core is busy most of the run: {busiest}"
    );
    assert!(slow.completion > off.completion);
}

#[test]
fn roce_has_no_mrc_nic_reports() {
    let spec = ScenarioSpec::builtin("ev-srv6").unwrap();
    let r = run(&spec.scenario(Transport::RoceEcmp)).unwrap();
    assert!(r.nics.is_empty());
}
