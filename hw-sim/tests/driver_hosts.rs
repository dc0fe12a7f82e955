//! The scenario's workload run by applications on the driver ([`mrc_sim::apps::workload`])
//! against the flow hosts on the same NIC model.

use mrc_sim::nic::Transport;
use mrc_sim::scenario::ScenarioSpec;

fn compare(name: &str, t: Transport) {
    let sc = ScenarioSpec::resolve(name).unwrap().scenario(t);
    let flows = mrc_sim::run::run(&sc).unwrap();
    let apps = mrc_sim::apps::workload::run(&sc).unwrap();
    let r = &apps.report;
    eprintln!(
        "{name} {t:?}: flows {}/{} completion {:?} max fct {:?} stall {:?}; driver {}/{} completion {:?} max fct {:?} stall {:?} checked {} wrong {}",
        flows.completed, flows.flows, flows.completion, flows.fcts.last(), flows.max_stall,
        r.completed, r.flows, r.completion, r.fcts.last(), r.max_stall, apps.bytes_checked, apps.bytes_wrong
    );
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
