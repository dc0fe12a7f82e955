//! The checker must be able to fail: an engine variant that forgets to retransmit on
//! `TRIMMED_LAST_HOP` (it takes the NACK as the packet's acknowledgement) is caught, while the
//! real engine passes the very same seeds.

use mrc_firmware::testkit::{run_seed, Failure, PairConfig};

mod common;
use common::on_pair_stack;

fn trimming(seed: u64, bug: bool) -> PairConfig {
    let mut cfg = PairConfig::chaos(seed);
    cfg.channel.trim_ppm = 50_000;
    cfg.datapath.planted_bug = bug;
    // Liveness bound: the bug shows as a message that never completes.
    cfg.max_time_ns = 500_000_000;
    cfg
}

#[test]
fn forgetting_to_retransmit_on_trimmed_last_hop_is_caught() {
    let (caught, clean) = on_pair_stack(|| {
        let mut caught: Vec<(u64, Failure)> = Vec::new();
        let mut clean = Vec::new();
        for seed in 0..20 {
            if let Err(f) = run_seed(trimming(seed, true)) {
                caught.push((seed, f));
            }
            clean.push((seed, run_seed(trimming(seed, false)).err()));
        }
        (caught, clean)
    });
    assert!(
        caught.len() >= 10,
        "the checker caught the planted bug on only {} of 20 seeds: {caught:?}",
        caught.len()
    );
    assert!(
        caught.iter().all(|(_, f)| matches!(
            f,
            Failure::Liveness { .. } | Failure::ErrorCompletion { .. }
        )),
        "{caught:?}"
    );
    let bad: Vec<_> = clean.iter().filter(|(_, f)| f.is_some()).collect();
    assert!(bad.is_empty(), "the real engine failed: {bad:?}");
}
