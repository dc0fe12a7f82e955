//! `transports[].nics`: one report per NIC of a run of the MRC NIC model, none for RoCE, and
//! figures that follow what the run did (every NIC that sent rang doorbells, read its payload
//! and wrote what it received by DMA, both PCIe directions busy; utilisations are fractions;
//! every datapath block of the timing table is reported, in pipeline order, busy on every NIC
//! that sent and received); the utilisation over time of one NIC, and its SVG.

use mrc_abi::device::datapath_timing::DATAPATH_BLOCKS;
use mrc_sim::nic::{FirmwareConfig, FirmwareReport, PcieConfig, Transport};
use mrc_sim::output::{self, svg, Recorder};
use mrc_sim::run::{run, run_observed, Scenario};
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
        // A permutation: every payload byte the host sent was read from host memory
        // (retransmissions again), every byte it received written to it.
        assert!(
            n.pcie.dma_bytes >= 2 * bytes_per_host,
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
            "host {i}: read completions take time"
        );
        assert!(
            n.pcie.pcie_tx_utilisation > 0.0,
            "host {i}: read requests and placed payloads take time"
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
    // Reads of every payload sent and writes of every payload placed, plus WQEs and CQEs.
    let moved: u64 = r.nics.iter().map(|n| n.pcie.dma_bytes).sum();
    assert!(
        moved > r.placed_bytes + bytes_per_host * u64::from(r.hosts),
        "{moved}"
    );
}

#[test]
fn an_ideal_host_interface_moves_nothing_and_takes_no_time() {
    let spec = ScenarioSpec::builtin("ev-srv6").unwrap();
    let sc = Scenario {
        pcie: PcieConfig::IDEAL,
        ..spec.scenario(Transport::Mrc)
    };
    let r = run(&sc).unwrap();
    assert_eq!(r.completed, r.flows);
    for n in &r.nics {
        assert!(n.pcie.doorbells > 0);
        assert_eq!(n.pcie.dma_bytes, 0);
        assert_eq!(n.pcie.pcie_tx_utilisation, 0.0);
        assert_eq!(n.pcie.pcie_rx_utilisation, 0.0);
    }
}

#[test]
fn one_nic_over_time_adds_up_to_its_report() {
    let spec = ScenarioSpec::builtin("ev-srv6").unwrap();
    let sc = spec.scenario(Transport::Mrc);
    let mut rec = Recorder::new(output::sample_period(sc.ideal()));
    rec.watch_nic(3);
    let r = run_observed(&sc, &mut rec).unwrap();
    let nic = rec.series.nic.as_ref().expect("watched");
    assert_eq!(nic.host, 3);
    let names: Vec<&str> = nic.names.iter().map(|n| n.0).collect();
    assert_eq!(
        names,
        ["PCIe NIC->host", "PCIe host->NIC", "firmware cores"]
    );
    assert_eq!(nic.samples.len(), rec.series.samples.len());
    let u = nic.utilisation();
    for (name, pts) in &u {
        assert!(pts.iter().all(|p| (0.0..=1.0).contains(&p.1)), "{name}");
        assert!(pts.iter().any(|p| p.1 > 0.0), "{name}: never busy");
    }
    // The last sample's busy time over the run is the report's utilisation.
    let (end, busy) = nic.samples.last().unwrap();
    let rep = &r.nics[3].pcie;
    let whole = end.since_start().as_ps() as f64;
    assert!((busy[0].as_ps() as f64 / whole - rep.pcie_tx_utilisation).abs() < 1e-9);
    assert!((busy[1].as_ps() as f64 / whole - rep.pcie_rx_utilisation).abs() < 1e-9);
    let cores = f64::from(nic.names[2].1);
    let fw = r.nics[3].firmware.core_utilisation;
    assert!(
        (busy[2].as_ps() as f64 / (whole * cores) - fw).abs() < 1e-9,
        "{fw}"
    );
    // And the plot of it.
    let dir = std::env::temp_dir().join(format!("mrc-sim-nic-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nic.svg");
    let o = output::Outcome {
        name: "mrc",
        result: Ok(r),
        series: rec.series.clone(),
        wall_s: 0.0,
        cost: Default::default(),
        mode: mrc_sim::run::parallel::Mode::Sequential { reason: None },
    };
    svg::nic_plot(&path, "ev-srv6", std::slice::from_ref(&o)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("<svg"));
    assert!(
        text.contains("PCIe host-") && text.contains("PCIe NIC-") && text.contains("firmware"),
        "legend"
    );
    let _ = std::fs::remove_dir_all(&dir);
    // A host the run has no MRC NIC for is an error, not an empty plot.
    let none = output::Outcome {
        series: output::Series::default(),
        ..o
    };
    assert!(svg::nic_plot(&path, "x", &[none]).is_err());
}

/// With firmware time off the cores report nothing; with one slow core its ring fills, the
/// stages hold their reports (counted), the ports hold what the stages refuse, and still every
/// byte arrives.
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
    // Deliveries the stages refused meanwhile, ACKs among them, wait in the ports' RX FIFOs:
    // none is dropped (41 ACKs were, when a refused control packet was dropped at once).
    let refused: u64 = slow.nics.iter().map(|n| n.firmware.rx_refused).sum();
    assert_eq!(refused, 0, "back-pressure dropped deliveries");
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
