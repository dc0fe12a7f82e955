//! `transports[].nics`: one report per NIC of a run of the MRC NIC model, none for RoCE, and
//! figures that follow what the run did (every NIC that sent rang doorbells and read its
//! payload by DMA; utilisations are fractions).

use mrc_sim::nic::Transport;
use mrc_sim::run::run;
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
    }
}

#[test]
fn roce_has_no_mrc_nic_reports() {
    let spec = ScenarioSpec::builtin("ev-srv6").unwrap();
    let r = run(&spec.scenario(Transport::RoceEcmp)).unwrap();
    assert!(r.nics.is_empty());
}
