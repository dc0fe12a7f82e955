//! Deterministic simulation: the real engines of two NICs over a lossy, reordering, trimming,
//! duplicating multipath channel (256 EVs, 4 planes, a blackholed EV, a plane that dies and
//! returns). Every message must arrive exactly once, byte-exact, with completions in order.
//!
//! A failing seed is printed with the command that replays it:
//! `MRC_SEED=<seed> cargo test -p mrc-firmware --test exactly_once replay -- --nocapture`.

use mrc_firmware::testkit::{run_seed, Failure, PairConfig, Report};

/// Run `f` on a thread with a stack big enough for two NICs' worth of engine state.
fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("test thread panicked")
}

fn check_seeds(seeds: std::ops::Range<u64>) -> Vec<(u64, Failure)> {
    big_stack(move || {
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
    let r: Report = big_stack(|| run_seed(PairConfig::chaos(7))).expect("seed 7");
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

/// Replay one seed from `MRC_SEED` (default 0) and print its report.
#[test]
fn replay() {
    let seed: u64 = std::env::var("MRC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cfg = PairConfig::chaos(seed);
    println!("config: {cfg:#?}");
    let r = big_stack(move || run_seed(cfg));
    println!("result: {r:#?}");
    assert!(r.is_ok(), "seed {seed}: {r:?}");
}
