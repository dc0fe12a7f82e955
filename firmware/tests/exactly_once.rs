//! Deterministic simulation: the real engines of two NICs over a lossy, reordering, trimming,
//! duplicating multipath channel (256 EVs, 4 planes, a blackholed EV, a plane that dies and
//! returns). Every message must arrive exactly once, byte-exact, with completions in order.
//!
//! A failing seed is printed with the command that replays it:
//! `MRC_SEED=<seed> cargo test -p mrc-firmware --test exactly_once replay -- --nocapture`.

use mrc_firmware::datapath::stage::QpView;
use mrc_firmware::engine::FwQpView;
use mrc_firmware::testkit::{run_seed, Failure, Pair, PairConfig, Report, CHECKED_PAYLOAD};

mod common;
use common::on_pair_stack;

fn check_seeds(seeds: std::ops::Range<u64>) -> Vec<(u64, Failure)> {
    on_pair_stack(move || {
        let mut failures = Vec::new();
        for seed in seeds {
            if let Err(f) = run_seed(PairConfig::chaos(seed)) {
                eprintln!(
                    "seed {seed} failed: {f:?}\n  reproduce: MRC_SEED={seed} cargo test -p mrc-firmware --test exactly_once replay -- --nocapture"
                );
                failures.push((seed, f));
            }
        }
        failures
    })
}

#[test]
fn one_seed_delivers_everything() {
    let r: Report = on_pair_stack(|| run_seed(PairConfig::chaos(7))).expect("seed 7");
    assert!(r.messages > 0);
    assert!(r.completions > 0);
}

#[test]
fn few_hundred_seeds_exactly_once_in_order() {
    let failures = check_seeds(0..300);
    assert!(
        failures.is_empty(),
        "{} failing seeds: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
#[ignore = "long campaign: cargo test -p mrc-firmware --release --test exactly_once -- --ignored"]
fn thousands_of_seeds() {
    let failures = check_seeds(1_000..11_000);
    assert!(
        failures.is_empty(),
        "{} failing seeds: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

/// What a chaos run leaves: its result and each NIC's QP as its stage and engine see it.
type Outcome = (
    Result<Report, Failure>,
    [Option<QpView>; 2],
    [Option<FwQpView>; 2],
);

fn run_with_fast_paths(seed: u64, fast: bool) -> Outcome {
    let mut pair = match Pair::<CHECKED_PAYLOAD>::new(PairConfig::chaos(seed)) {
        Ok(p) => p,
        Err(f) => return (Err(f), [None; 2], [None; 2]),
    };
    for h in pair.nics.iter_mut() {
        h.nic.dp.set_fast_paths(fast);
    }
    let r = pair.run();
    let dp = [0, 1].map(|i| pair.nics[i].nic.dp.qp(pair.nics[i].qpn));
    let fw = [0, 1].map(|i| pair.nics[i].nic.fw.qp(pair.nics[i].qpn));
    (r, dp, fw)
}

/// The datapath stages' fast paths (transmit and receive runs) change nothing: each chaos
/// seed (immediates, trims, CE marks, duplicates, reordering, a blackholed EV, a plane
/// outage) runs the same with them off, every counter of the NICs, their QPs and the
/// channel equal.
#[test]
fn fast_paths_match_the_general_paths() {
    on_pair_stack(|| {
        for seed in 0..40 {
            let fast = run_with_fast_paths(seed, true);
            let general = run_with_fast_paths(seed, false);
            assert!(fast.0.is_ok(), "seed {seed}: {:?}", fast.0);
            assert_eq!(fast, general, "seed {seed}");
        }
    });
}

/// Replay one seed from `MRC_SEED` (default 0) and print its report.
#[test]
fn replay() {
    let seed: u64 = std::env::var("MRC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cfg = PairConfig::chaos(seed);
    println!("config: {cfg:#?}");
    let r = on_pair_stack(move || run_seed(cfg));
    println!("result: {r:#?}");
    assert!(r.is_ok(), "seed {seed}: {r:?}");
}
