//! The `rtl` datapath level against the `model` level (feature `rtl`: `cargo test -p mrc-sim
//! --release --features rtl --test rtl_level`, `just rtl-sim`, and `.ci/run`).
//!
//! The built-in `hil` scenario (8 hosts, 4 planes, all-to-all, a link failure), run with the
//! simulator's own NIC shape (`[nic.firmware] shape = "sim"`, the shape of every other
//! scenario; `just hil` runs the image's shape at every level), must give
//! the same run, report for report (every flow's acknowledged bytes and completion time, every
//! counter, every NIC's hardware figures), whether the Rust models or the Verilator-built RTL
//! blocks (`ev_sprayer`, `rx_psn_tracker`, `hdr_builder`, `csr_event_queue`) decide its packets
//! and reports; and an RTL block with a planted bug (the sprayer's, the tracker's) must make
//! the run differ.
#![cfg(feature = "rtl")]

use mrc_sim::nic::{DatapathLevel, DatapathLevelConfig, NicShape, RtlBlock, RtlReport, Transport};
use mrc_sim::run::{run, RunReport, Scenario};
use mrc_sim::scenario::ScenarioSpec;

fn scenario(datapath: DatapathLevelConfig, loss_ppm: u32) -> Scenario {
    let spec = ScenarioSpec::resolve("hil").expect("the built-in hil");
    let mut sc = spec.scenario(Transport::Mrc);
    sc.firmware.shape = Some(NicShape::Sim);
    sc.datapath = datapath;
    sc.fabric.loss_ppm = loss_ppm;
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
    run_lossy_at(datapath, 0)
}

/// [`run_at`] with random loss of `loss_ppm` on every link.
fn run_lossy_at(datapath: DatapathLevelConfig, loss_ppm: u32) -> Option<(RunReport, RtlReport)> {
    if mrc_rtl_cosim::skip_missing("verilator", mrc_rtl_cosim::HAVE_VERILATOR) {
        return None;
    }
    Some(split(run(&scenario(datapath, loss_ppm)).expect("hil runs")))
}

/// Random loss the planted-bug runs add (1 %): holes at the cumulative PSN in every flow, so
/// a tracker that hides the PSN after such a hole misleads the sender's loss inference many
/// times, whatever the run's timing. On the hil scenario alone (its one link failure) whether
/// the tracker's planted bug changes the run depends on the firmware's timing.
const PLANTED_BUG_LOSS_PPM: u32 = 10_000;

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
    let sent = model.data_sent + model.retransmits;
    assert!(stats.ev_sprayer.transactions > sent + 56 * 256, "{stats:?}");
    assert_eq!(stats.ev_sprayer.instances, 56);
    // Every receiving QP context's tracker: a reset at RTR, a receive per write that reached
    // it, a SACK per ACK or NACK.
    assert_eq!(stats.rx_psn_tracker.instances, 56);
    assert!(
        stats.rx_psn_tracker.transactions > 56 + model.data_sent,
        "{stats:?}"
    );
    // Every packet sent (data, retransmissions, ACKs, NACKs, probes) had its headers built:
    // two beats at least each.
    assert!(stats.hdr_builder.transactions > sent, "{stats:?}");
    assert!(
        stats.hdr_builder.cycles >= 2 * stats.hdr_builder.transactions,
        "{stats:?}"
    );
    // The reports the firmware took came out of the event queue (one per shard): each flow's
    // sender reports at least its start and its end, each pushed and popped.
    assert!(
        stats.csr_event_queue.transactions >= 4 * u64::from(model.flows),
        "{stats:?}"
    );
    assert_eq!(
        stats.csr_event_queue.instances, stats.hdr_builder.instances,
        "{stats:?}"
    );
    assert_eq!(stats.differ, 0, "{:?}", stats.first_difference);
    assert!(
        rtl == model,
        "rtl and model runs differ:\n rtl   {rtl:?}\n model {model:?}"
    );
    let bytes = |r: &RunReport| r.flow_results.iter().map(|f| f.acked_bytes).sum::<u64>();
    println!(
        "hil: {} flows, {} B delivered, completion {:?}, {} data packets, {} retransmits, \
         through the RTL {} ev_sprayer, {} rx_psn_tracker, {} hdr_builder and {} \
         csr_event_queue transactions: identical at model and rtl",
        model.completed,
        bytes(&model),
        model.completion,
        model.data_sent,
        model.retransmits,
        stats.ev_sprayer.transactions,
        stats.rx_psn_tracker.transactions,
        stats.hdr_builder.transactions,
        stats.csr_event_queue.transactions,
    );
}

/// The run with `block` built with its planted bug differs from the model level's where the
/// users look; the block's own differences are counted.
fn a_planted_bug_makes_the_rtl_run_differ(block: RtlBlock, name: &str) {
    let Some((model, _)) = run_lossy_at(
        DatapathLevelConfig::at(DatapathLevel::Model),
        PLANTED_BUG_LOSS_PPM,
    ) else {
        return;
    };
    let Some((bad, stats)) = run_lossy_at(
        DatapathLevelConfig {
            level: DatapathLevel::Rtl,
            planted_bug: Some(block),
        },
        PLANTED_BUG_LOSS_PPM,
    ) else {
        return;
    };
    let own = stats
        .blocks()
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, b)| b.differ);
    assert!(
        own > 0,
        "the planted {name} bug was never exercised: {stats:?}"
    );
    assert!(
        bad != model,
        "a run with a broken {name} is the model's run: the differential is blind"
    );
    // What differs where the users look: completions (their times) or the packets sent.
    let completions = |r: &RunReport| r.flow_results.iter().map(|f| f.done).collect::<Vec<_>>();
    assert!(
        completions(&bad) != completions(&model)
            || bad.data_sent != model.data_sent
            || bad.retransmits != model.retransmits,
        "the broken {name} changed no completion and no packet count"
    );
    println!(
        "planted {name} bug: {own} of its RTL answers differed from the model (first: {}); \
         completion {:?} vs {:?}, retransmits {} vs {}",
        stats.first_difference.unwrap_or_default(),
        bad.completion,
        model.completion,
        bad.retransmits,
        model.retransmits
    );
}

#[test]
fn a_planted_sprayer_bug_makes_the_rtl_run_differ() {
    a_planted_bug_makes_the_rtl_run_differ(RtlBlock::EvSprayer, "ev_sprayer");
}

#[test]
fn a_planted_tracker_bug_makes_the_rtl_run_differ() {
    a_planted_bug_makes_the_rtl_run_differ(RtlBlock::RxPsnTracker, "rx_psn_tracker");
}
