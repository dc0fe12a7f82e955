//! Swarm testing (see `mrc_tests::swarm`): random topologies, workloads and fault mixes on
//! simulated hosts running the real engine, driven through the driver's public API.
//!
//! - `ci_fixed_seeds`: the fixed set CI runs (seeds 0..200, debug build), and
//!   `found_seeds_stay_fixed`: the seeds a longer run once failed.
//! - `replay`: one seed, `SWARM_SEED=N cargo test -p mrc-tests --release --test swarm --
//!   replay --nocapture` (what a failure prints; `SWARM_PLANTED_BUG=1` adds the planted bug).
//! - `many` (ignored): `SWARM_SEEDS=N [SWARM_FIRST=F]` seeds with a summary; `just swarm N`.
//! - `planted_datapath_bug_is_caught_by_the_swarm`: the checker is not vacuous.
//! - `cycle_*`: the second lane, on the cycle-level fabric (`mrc_tests::swarm::cycle`).

use std::time::Instant;

use mrc_tests::swarm::cycle::{run_cycle_seed, CycleReport};
use mrc_tests::swarm::{run_seed, Totals};

/// Seeds CI runs.
const CI_SEEDS: u64 = 200;
/// Seeds beyond the fixed set that once failed, run by CI too: each names what it found.
const FOUND_SEEDS: [(u64, &str); 1] = [(
    4536,
    "EV state changes dropped from a full event queue never reached the sprayer: a QP \
     whose EVs all came back sent nothing",
)];
/// The swarm must find the planted datapath bug within this many seeds.
const PLANTED_BUG_BOUND: u64 = 40;

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn seeds(first: u64, n: u64) -> Totals {
    let mut t = Totals::default();
    for seed in first..first + n {
        match run_seed(seed, false) {
            Ok(r) => t.add(&r),
            Err(e) => {
                eprintln!("{e}");
                t.seeds += 1;
                t.failed.push(seed);
            }
        }
    }
    t
}

#[test]
fn ci_fixed_seeds() {
    let start = Instant::now();
    let t = seeds(0, CI_SEEDS);
    eprintln!("{}", t.summary(start.elapsed().as_secs_f64()));
    assert!(t.failed.is_empty(), "failing seeds: {:?}", t.failed);
    // Every fault kind was drawn at least once in the fixed set.
    assert_eq!(t.faults.len(), 11, "fault kinds drawn: {:?}", t.faults);
}

#[test]
fn found_seeds_stay_fixed() {
    for (seed, what) in FOUND_SEEDS {
        if let Err(e) = run_seed(seed, false) {
            panic!("seed {seed} ({what}) fails again: {e}");
        }
    }
}

#[test]
fn replay() {
    let seed = env("SWARM_SEED").unwrap_or(0);
    let planted = env("SWARM_PLANTED_BUG").is_some_and(|v| v != 0);
    match run_seed(seed, planted) {
        Ok(r) => eprintln!("swarm seed {seed} passed: {r:#?}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
#[ignore = "long: just swarm N"]
fn many() {
    let n = env("SWARM_SEEDS").unwrap_or(100);
    let first = env("SWARM_FIRST").unwrap_or(0);
    let start = Instant::now();
    let t = seeds(first, n);
    println!("{}", t.summary(start.elapsed().as_secs_f64()));
    assert!(t.failed.is_empty(), "failing seeds: {:?}", t.failed);
}

/// With the datapath's planted bug (a last-hop trim NACK taken as the packet's ACK) the swarm
/// fails within a bounded number of seeds, and the seed that caught it passes without the bug.
#[test]
fn planted_datapath_bug_is_caught_by_the_swarm() {
    let caught = (0..PLANTED_BUG_BOUND).find_map(|s| run_seed(s, true).err().map(|e| (s, e)));
    let Some((seed, why)) = caught else {
        panic!("the planted datapath bug survived {PLANTED_BUG_BOUND} swarm seeds");
    };
    eprintln!("planted bug caught by seed {seed}: {why}");
    run_seed(seed, false).expect("the same seed passes without the bug");
}

/// Seeds of the cycle-level lane CI runs.
const CI_CYCLE_SEEDS: u64 = 50;

fn cycle_seeds(first: u64, n: u64) -> (u64, Vec<u64>, CycleReport) {
    let mut total = CycleReport::default();
    let mut failed = Vec::new();
    for seed in first..first + n {
        match run_cycle_seed(seed) {
            Ok(r) => {
                total.injected += r.injected;
                total.dropped += r.dropped;
                total.acked_bytes += r.acked_bytes;
                total.faults += r.faults;
            }
            Err(e) => {
                eprintln!("{e}");
                failed.push(seed);
            }
        }
    }
    (n, failed, total)
}

#[test]
fn cycle_ci_fixed_seeds() {
    let (n, failed, t) = cycle_seeds(0, CI_CYCLE_SEEDS);
    eprintln!("cycle-level lane: {n} seeds, failed {failed:?}, {t:?}");
    assert!(failed.is_empty(), "failing cycle-level seeds: {failed:?}");
}

#[test]
fn cycle_replay() {
    let seed = env("SWARM_SEED").unwrap_or(0);
    match run_cycle_seed(seed) {
        Ok(r) => eprintln!("cycle-level seed {seed} passed: {r:?}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
#[ignore = "long: just swarm-cycle N"]
fn cycle_many() {
    let n = env("SWARM_SEEDS").unwrap_or(100);
    let first = env("SWARM_FIRST").unwrap_or(0);
    let start = Instant::now();
    let (n, failed, t) = cycle_seeds(first, n);
    println!(
        "cycle-level lane: {n} seeds, {} failed {failed:?}, {:.1} s; {} packets injected, {} \
         dropped (every one counted), {} bytes acknowledged, {} fault edges",
        failed.len(),
        start.elapsed().as_secs_f64(),
        t.injected,
        t.dropped,
        t.acked_bytes,
        t.faults
    );
    assert!(failed.is_empty(), "failing cycle-level seeds: {failed:?}");
}

/// Same seed, same run: completions, bytes and every fabric counter equal.
#[test]
fn same_seed_same_run() {
    for seed in [3, 17] {
        let a = run_seed(seed, false).expect("first run");
        let b = run_seed(seed, false).expect("second run");
        assert_eq!(
            (a.completions, a.payload_bytes, a.liveness_ns, a.counters),
            (b.completions, b.payload_bytes, b.liveness_ns, b.counters),
            "seed {seed}"
        );
    }
    let (a, b) = (run_seed(3, false).unwrap(), run_seed(4, false).unwrap());
    assert_ne!(a.counters, b.counters, "another seed, another run");
}
