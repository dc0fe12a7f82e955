//! `transports[].nics`: one report per NIC of a run of the MRC NIC model, none for RoCE, and
//! figures that follow what the run did (every NIC that sent rang doorbells and read its
//! payload by DMA; utilisations are fractions; every datapath block of the timing table is
//! reported, in pipeline order, busy on every NIC that sent and received).

use mrc_abi::device::datapath_timing::DATAPATH_BLOCKS;
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
        let names: Vec<&str> = n.datapath.iter().map(|b| b.block).collect();
        let table: Vec<&str> = DATAPATH_BLOCKS.iter().map(|b| b.block).collect();
        assert_eq!(names, table, "host {i}: every block, in pipeline order");
        for b in &n.datapath {
            assert!(
                b.occupancy > 0.0 && b.occupancy <= 1.0,
                "host {i}: {} occupancy {} (it sent, received and reported)",
                b.block,
                b.occupancy
            );
        }
        // One 64-byte beat per clock: the header builder is busy at least twice as long as the
        // sprayer (every header is 2..4 beats; the sprayer takes one clock per packet).
        assert!(
            n.datapath[1].occupancy >= 2.0 * n.datapath[0].occupancy * 0.999,
            "host {i}: {:?}",
            n.datapath
        );
    }
    // Packets leave the sprayer back to back whenever a NIC sends several at once: some wait
    // for the header builder.
    assert!(
        r.nics.iter().any(|n| n.datapath[1].backpressure_cycles > 0),
        "no NIC's header builder ever made a packet wait"
    );
}

#[test]
fn roce_has_no_mrc_nic_reports() {
    let spec = ScenarioSpec::builtin("ev-srv6").unwrap();
    let r = run(&spec.scenario(Transport::RoceEcmp)).unwrap();
    assert!(r.nics.is_empty());
}
