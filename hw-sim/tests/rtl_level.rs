//! The `rtl` datapath level against the `model` level (feature `rtl`: `cargo test -p mrc-sim
//! --release --features rtl --test rtl_level`, `just rtl-sim`, and `.ci/run`).
//!
//! The built-in `hil` scenario (8 hosts, 4 planes, all-to-all, a link failure), run with the
//! simulator's own NIC shape (`[nic.firmware] shape = "sim"`, the shape of every other
//! scenario; `just hil` runs the image's shape at every level), must give
//! the same run, report for report (every flow's acknowledged bytes and completion time, every
//! counter, every NIC's hardware figures), whether the Rust models or the Verilator-built RTL
//! decide its packets; and an RTL block with a planted bug must make the run differ.
#![cfg(feature = "rtl")]

use mrc_sim::nic::{DatapathLevel, DatapathLevelConfig, NicShape, RtlBlock, RtlReport, Transport};
use mrc_sim::run::{run, RunReport, Scenario};
use mrc_sim::scenario::ScenarioSpec;

fn scenario(datapath: DatapathLevelConfig) -> Scenario {
    let spec = ScenarioSpec::resolve("hil").expect("the built-in hil");
    let mut sc = spec.scenario(Transport::Mrc);
    sc.firmware.shape = Some(NicShape::Sim);
    sc.datapath = datapath;
    sc
}

/// The run's report without the RTL figures (which only the `rtl` level has), and those
/// figures summed over the NICs.
fn split(mut r: RunReport) -> (RunReport, RtlReport) {
    let mut t = RtlReport::default();
    for n in &mut r.nics {
        if let Some(x) = n.rtl.take() {
            t.add(&x);
        }
    }
    (r, t)
}

/// The run at `datapath`; `None` (after `SKIPPED: verilator not found`) when this build has no
/// RTL, which fails instead when `CI` is set.
fn run_at(datapath: DatapathLevelConfig) -> Option<(RunReport, RtlReport)> {
    if mrc_rtl_cosim::skip_missing("verilator", mrc_rtl_cosim::HAVE_VERILATOR) {
        return None;
    }
    Some(split(run(&scenario(datapath)).expect("hil runs")))
}

#[test]
fn hil_is_the_same_run_at_the_model_and_rtl_levels() {
    let Some((model, none)) = run_at(DatapathLevelConfig::at(DatapathLevel::Model)) else {
        return;
    };
    let Some((rtl, stats)) = run_at(DatapathLevelConfig::at(DatapathLevel::Rtl)) else {
        return;
    };
    assert_eq!(none, RtlReport::default(), "the model level ran RTL");
    // The run did the work it is meant to check: every flow, through a link failure.
    assert_eq!(model.completed, model.flows);
    assert_eq!(model.flows, 56);
    assert!(model.retransmits > 0, "the link failure cost no packet");
    // Every EV decision went through the RTL: one transaction per data packet at least, and
    // the EV table writes (256 EVs per QP).
    assert!(
        stats.sprayer_transactions > model.data_sent + model.retransmits + 56 * 256,
        "{stats:?}"
    );
    assert_eq!(stats.sprayer_instances, 56);
    assert_eq!(stats.differ, 0, "{:?}", stats.first_difference);
    assert!(
        rtl == model,
        "rtl and model runs differ:\n rtl   {rtl:?}\n model {model:?}"
    );
    let bytes = |r: &RunReport| r.flow_results.iter().map(|f| f.acked_bytes).sum::<u64>();
    println!(
        "hil: {} flows, {} B delivered, completion {:?}, {} data packets, {} retransmits, \
         {} sprayer transactions through the RTL: identical at model and rtl",
        model.completed,
        bytes(&model),
        model.completion,
        model.data_sent,
        model.retransmits,
        stats.sprayer_transactions
    );
}

#[test]
fn a_planted_sprayer_bug_makes_the_rtl_run_differ() {
    let Some((model, _)) = run_at(DatapathLevelConfig::at(DatapathLevel::Model)) else {
        return;
    };
    let Some((bad, stats)) = run_at(DatapathLevelConfig {
        level: DatapathLevel::Rtl,
        planted_bug: Some(RtlBlock::EvSprayer),
    }) else {
        return;
    };
    assert!(stats.differ > 0, "the planted bug was never exercised");
    assert!(
        bad != model,
        "a run with a broken ev_sprayer is the model's run: the differential is blind"
    );
    // What differs where the users look: completions (their times) or the packets sent.
    let completions = |r: &RunReport| r.flow_results.iter().map(|f| f.done).collect::<Vec<_>>();
    assert!(
        completions(&bad) != completions(&model)
            || bad.data_sent != model.data_sent
            || bad.retransmits != model.retransmits,
        "the broken ev_sprayer changed no completion and no packet count"
    );
    println!(
        "planted ev_sprayer bug: {} RTL answers differed from the model (first: {}); \
         completion {:?} vs {:?}, retransmits {} vs {}",
        stats.differ,
        stats.first_difference.unwrap_or_default(),
        bad.completion,
        model.completion,
        bad.retransmits,
        model.retransmits
    );
}
