//! The parallel run (`mrc-sim run --threads N`) gives the sequential run's JSON and pcap, byte
//! for byte.

use mrc_sim::nic::Transport;
use mrc_sim::output::{self, json, pcap::Filter, PcapRequest};
use mrc_sim::run::HostModel;
use mrc_sim::scenario::ScenarioSpec;

/// The JSON without its wall-clock part, and the pcap bytes, of `spec` on `threads` threads.
fn outputs(spec: &ScenarioSpec, threads: usize, tag: &str) -> (String, Vec<u8>, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("mrc-sim-parallel-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cap.pcap");
    let req = PcapRequest {
        path: &path,
        filter: Filter::default(),
    };
    let (outcomes, _) = output::run_all_threads(spec, Some(&req), false, threads, None).unwrap();
    let modes = outcomes.iter().map(|o| o.mode.to_string()).collect();
    let mut d = json::document(spec, &outcomes);
    d.as_object_mut().unwrap().remove("wall_clock");
    let mut pcap = Vec::new();
    for o in &outcomes {
        let f = output::pcap_path(&path, o.name, outcomes.len());
        pcap.extend(std::fs::read(&f).unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
    (serde_json::to_string(&d).unwrap(), pcap, modes)
}

#[test]
fn two_threads_give_the_same_json_and_pcap() {
    // 8 hosts, 2 planes, a link failure at 5 us; mrc, and roce-ecmp (which runs sequentially).
    let mut spec = ScenarioSpec::builtin("tiny").unwrap();
    spec.file.transports = vec![Transport::Mrc, Transport::RoceEcmp];
    // (the flow hosts: the runs a run partitions; the driver's run on one thread)
    spec.file.host.model = HostModel::Flows;
    let (json1, pcap1, modes1) = outputs(&spec, 1, "one");
    let (json2, pcap2, modes2) = outputs(&spec, 2, "two");
    assert!(modes1.iter().all(|m| m == "sequential"), "{modes1:?}");
    assert!(
        modes2[0].starts_with("parallel: 2 partitions"),
        "{modes2:?}"
    );
    assert!(modes2
        .iter()
        .any(|m| m.contains("roce-ecmp is not partitioned")));
    assert!(pcap1.len() > 100_000, "{} pcap bytes", pcap1.len());
    assert_eq!(json1, json2);
    assert!(pcap1 == pcap2, "the pcaps differ");
}
