//! The scenario's workload run by applications on the driver ([`mrc_sim::apps::workload`])
//! against the flow hosts on the same NIC model.

use mrc_sim::nic::Transport;
use mrc_sim::scenario::ScenarioSpec;

fn compare(name: &str, t: Transport) {
    let mut sc = ScenarioSpec::resolve(name).unwrap().scenario(t);
    if std::env::var("NOFAIL").is_ok() { sc.failure = None; }
    if std::env::var("CORES").is_ok() { sc.firmware.cores = 32; }
    if std::env::var("A2A").is_ok() { sc.workload = mrc_sim::workload::Workload::AllToAll { bytes_per_pair: 262_144, msg_bytes: 65_536 }; }
    let flows = mrc_sim::run::run(&sc).unwrap();
    let apps = mrc_sim::apps::workload::run(&sc).unwrap();
    let r = &apps.report;
    eprintln!(
        "{name} {t:?}: flows {}/{} completion {:?} max fct {:?} stall {:?}; driver {}/{} completion {:?} max fct {:?} stall {:?} checked {} wrong {}",
        flows.completed, flows.flows, flows.completion, flows.fcts.last(), flows.max_stall,
        r.completed, r.flows, r.completion, r.fcts.last(), r.max_stall, apps.bytes_checked, apps.bytes_wrong
    );
    for (n, x) in [("flows", &flows), ("driver", r)] {
        eprintln!(
            "{n}: stall qp {:?} retx {} data {} losses {} ack_timeouts {} timeouts {} ev_changes {} dups {}",
            x.max_stall_qp, x.retransmits, x.data_sent, x.losses_inferred, x.ack_timeouts, x.timeouts, x.ev_state_changes, x.rx_duplicates
        );
    }
    for (n, x) in [("flows", &flows), ("driver", r)] {
        let mut v: Vec<_> = x.flow_results.iter().map(|f| (f.fct().unwrap().as_ps() / 1_000_000, f.flow.src, f.flow.dst)).collect();
        v.sort();
        eprintln!("{n} slowest {:?}", &v[v.len() - 12..]);
        eprintln!("{n} fastest {:?}", &v[..6]);
    }
    assert_eq!(r.completed, r.flows);
    assert_eq!(apps.bytes_wrong, 0);
}

#[test]
fn tiny_mrc() {
    compare("tiny", Transport::Mrc);
}

#[test]
#[ignore]
fn default_mrc() {
    compare("default", Transport::Mrc);
}
