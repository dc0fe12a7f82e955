//! Every path of a QP silently dead for a long time, then restored (what `mrc-1ev` sees in the
//! simulator when a fabric link under its one ECMP path fails and routing reconverges 150 ms
//! later): no SACK arrives, only ACK timeouts with exponential backoff run. Once the paths are
//! back, the next retry must repair the oldest PSN and the messages must complete exactly once,
//! byte-exact, in order — promptly, not after the backoff has grown past the run.

use mrc_firmware::testkit::{run_seed, ChannelConfig, PairConfig, Report};

mod common;
use common::on_pair_stack;

/// The outage starts at 5 us, when the NSCC window has grown past 100 PSNs in flight (the
/// whole two-wave workload would be done by 8 us). An engine whose ACK-timeout backoff kept
/// doubling through the outage would stall until ~2.1 s (a 2^31 ns backoff) although the
/// paths are back at 40 ms; the test bounds the recovery well below that.
///
/// A clean channel with one silent outage of every path from `down` to `up`, large messages
/// (far more PSNs in flight than one 64-bit SACK bitmap covers) and NSCC, whose window halves
/// at every timeout.
fn outage(seed: u64, down: u64, up: u64, nscc: bool) -> PairConfig {
    let mut cfg = PairConfig::chaos(seed);
    cfg.channel = ChannelConfig {
        latency_ns: 2_000,
        path_outage: Some((down, up)),
        ..ChannelConfig::default()
    };
    // 32-byte packets: the 8 KiB each direction writes per wave is 256 PSNs, four SACK
    // bitmaps' worth.
    cfg.datapath.mtu_payload = 32;
    cfg.messages = 32;
    cfg.waves = 2;
    cfg.max_len = 4_000;
    cfg.timeout_exp = 5; // 32.8 us, as in the simulator
    cfg.retry_cnt = 25;
    cfg.nscc = nscc;
    cfg
}

fn check(cfg: PairConfig) -> Report {
    let (down, up) = cfg.channel.path_outage.expect("outage");
    let outage = up - down;
    let r = on_pair_stack(move || run_seed(cfg)).unwrap_or_else(|f| panic!("{cfg:?}: {f:?}"));
    // Recovery after the paths return takes at most one backoff period (which is at most
    // about the outage itself, since the backoff doubles from the base timeout) plus a few
    // round trips per message: bound it by 2.5 outages.
    assert!(
        r.end_ns < up + outage * 5 / 2,
        "seed {}: done at {} ns, paths back at {up} ns (outage {outage} ns)",
        cfg.seed,
        r.end_ns
    );
    r
}

#[test]
fn all_paths_dead_then_back_nscc() {
    for seed in 0..8 {
        let r = check(outage(seed, 5_000, 40_000_000, true));
        assert!(r.channel.plane_dropped > 0, "the outage must hit traffic");
    }
}

#[test]
fn all_paths_dead_then_back_fixed_window() {
    for seed in 0..8 {
        check(outage(seed, 5_000, 40_000_000, false));
    }
}

#[test]
fn long_outage_nscc() {
    check(outage(3, 5_000, 150_000_000, true));
}
