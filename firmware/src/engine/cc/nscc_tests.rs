use super::*;
use proptest::prelude::*;

const MTU: u32 = 4_096;
const BASE: u64 = 10_000;

/// The defaults of a 100 Gb/s, 10 us link, starting at one BDP (125,000 B) so that the
/// window arithmetic below reads simply.
fn params() -> NsccParams {
    NsccParams {
        init_cwnd_bytes: 125_000,
        ..NsccParams::for_link(100_000_000_000, BASE, MTU).unwrap()
    }
}

#[test]
fn defaults_follow_link_rate_and_base_rtt() {
    let p = NsccParams::for_link(100_000_000_000, BASE, MTU).unwrap();
    assert_eq!(p.max_cwnd_bytes, 187_500, "1.5 x BDP of 100 Gb/s x 10 us");
    // The reference (htsim UecSrc::initNscc with no window given) starts at the largest.
    assert_eq!(p.init_cwnd_bytes, 187_500);
    assert_eq!(p.min_cwnd_bytes, 4_096);
    // The reference (htsim UecSrc::initNsccParams, trimming on): target = 3/4 of the RTT.
    assert_eq!(p.target_qdelay_ns, 7_500);
    assert_eq!(
        p.fast_increase_qdelay_ns, 1_000,
        "fast increase below 1 us of queueing"
    );
    assert_eq!(p.gamma_q16, 52_429, "gamma 0.8");
    assert_eq!(p.delay_gain_q16, 819, "delay average gain 0.0125");
    assert_eq!(p.qa_gate, 3);
    // On the reference network (100 Gb/s x 12 us: a = 1, b = 9 us / 12 us = 0.75) the gains
    // are the reference's: fi 5 MTU, fi_scale 0.25, eta 0.15 MTU, alpha 4ab = 3 MTU per window.
    let r = NsccParams::for_link(100_000_000_000, 12_000, MTU).unwrap();
    assert_eq!(r.fi_q16, 5 * Q16_ONE);
    assert_eq!(r.fi_scale_q16, Q16_ONE / 4);
    assert_eq!(r.eta_q16, 9_830);
    assert_eq!(r.pi_q16, 3 * Q16_ONE);
    // They scale with the BDP (scaling_factor_a): 4x the rate, 4x the gains.
    let r4 = NsccParams::for_link(400_000_000_000, 12_000, MTU).unwrap();
    assert_eq!(r4.fi_q16, 20 * Q16_ONE);
    assert_eq!(r4.fi_scale_q16, Q16_ONE);
    // A tiny link still gets a usable window of one MTU and valid gains.
    let tiny = NsccParams::for_link(1, 1, MTU).unwrap();
    assert_eq!((tiny.min_cwnd_bytes, tiny.max_cwnd_bytes), (4_096, 4_096));
}

#[test]
fn validation_names_the_bad_field() {
    use NsccParamError as E;
    assert_eq!(NsccParams::for_link(0, 1, 1), Err(E::ZeroLinkRate));
    assert_eq!(NsccParams::for_link(1, 0, 1), Err(E::ZeroBaseRtt));
    assert_eq!(NsccParams::for_link(1, 1, 0), Err(E::ZeroMtu));
    assert_eq!(
        NsccParams::for_link(u64::MAX, u64::MAX, 1),
        Err(E::BdpOverflow)
    );
    let ok = params();
    let bad = |f: fn(&mut NsccParams)| {
        let mut p = ok;
        f(&mut p);
        p.validate().unwrap_err()
    };
    assert_eq!(bad(|p| p.gamma_q16 = 0), E::Gamma(0));
    assert_eq!(bad(|p| p.gamma_q16 = Q16_ONE + 1), E::Gamma(Q16_ONE + 1));
    assert_eq!(bad(|p| p.max_md_jump_q16 = Q16_ONE), E::MaxMdJump(Q16_ONE));
    assert_eq!(bad(|p| p.eta_q16 = u32::MAX), E::Eta(u32::MAX));
    assert_eq!(bad(|p| p.fi_q16 = u32::MAX), E::Fi(u32::MAX));
    assert_eq!(bad(|p| p.fi_scale_q16 = 0), E::FiScale(0));
    assert_eq!(bad(|p| p.target_qdelay_ns = 0), E::ZeroTargetQdelay);
    assert_eq!(bad(|p| p.min_cwnd_bytes = 0), E::ZeroMinCwnd);
    assert_eq!(
        bad(|p| p.init_cwnd_bytes = 1),
        E::WindowOrder {
            min: 4_096,
            init: 1,
            max: 187_500
        }
    );
    assert!(Nscc::try_new(ok).is_ok());
}

#[test]
fn quadrants() {
    let p = params();
    let t = p.target_qdelay_ns;
    let high = BASE + 3 * t;
    let low = BASE + t / 2;

    // ECN + low delay: no change.
    let mut n = Nscc::new(p);
    n.on_ack(0, 4_096, true, low);
    assert_eq!(n.cwnd_bytes(), 125_000);
    assert_eq!(n.counters().ecn_low_delay, 1);

    // No ECN + low (above 1 us) delay: proportional increase, alpha * (target - delay) /
    // target MTUs per window: half of pi for a whole window acked at half the target.
    let mut n = Nscc::new(p);
    n.on_ack(0, 125_000, false, low);
    let pi_half = (u64::from(p.pi_q16) / 2 * 4_096) >> 16;
    assert_eq!(n.cwnd_bytes(), 125_000 + pi_half);
    assert_eq!(n.counters().proportional_increases, 1);

    // No ECN + high delay: fair increase, fi = 5a MTU per window acked.
    let mut f = Nscc::new(p);
    f.on_ack(0, 125_000, false, high);
    assert_eq!(
        f.cwnd_bytes(),
        125_000 + ((u64::from(p.fi_q16) * 4_096) >> 16)
    );
    assert_eq!(f.counters().fair_increases, 1);
}

#[test]
fn multiplicative_decrease_follows_the_delay_average_once_per_rtt() {
    let p = params();
    let t = p.target_qdelay_ns;
    // ECN + a high sample, but the average (gain 0.0125) is still below target: the reference
    // decreases on the average, not the sample, so nothing happens.
    let mut d = Nscc::new(p);
    d.on_ack(0, 4_096, true, BASE + 3 * t);
    assert!(d.avg_qdelay_ns() < t);
    assert_eq!(d.cwnd_bytes(), 125_000);
    assert_eq!(
        (d.counters().decreases, d.counters().decreases_quiet),
        (0, 1)
    );

    // An average above target: cwnd *= 1 - gamma * (avg - target) / avg.
    let mut m = Nscc::new(p);
    m.on_ack(0, 4_096, true, BASE + 1_000_000);
    let avg = m.avg_qdelay_ns();
    assert!(avg > t && avg < 2 * t, "{avg}");
    let cut = (avg - t) * u64::from(p.gamma_q16) / avg;
    assert_eq!(m.cwnd_bytes(), 125_000 - ((125_000 * cut) >> 16));
    assert_eq!(m.counters().decreases, 1);

    // A huge average: the cut is bounded by max_md_jump (0.5), then at most once per base RTT.
    let mut d = Nscc::new(p);
    d.on_ack(1, 4_096, true, BASE + 1_000_000_000);
    assert_eq!(d.cwnd_bytes(), 62_500, "max_md_jump = 0.5 bounds the cut");
    d.on_ack(2, 4_096, true, BASE + 3 * t);
    let eta = (4_096 * u64::from(p.eta_q16)) >> 16;
    d.on_ack(BASE, 4_096, true, BASE + 3 * t);
    assert_eq!(
        d.cwnd_bytes(),
        62_500 + eta,
        "once per base RTT: only the additive increase"
    );
    assert_eq!(d.counters().decreases_quiet, 2);
    d.on_ack(1 + BASE, 4_096, true, BASE + 3 * t);
    assert_eq!(d.cwnd_bytes(), 62_500 + eta - (62_500 + eta) / 2);
}

#[test]
fn the_base_rtt_is_the_smallest_sample() {
    let p = params();
    let mut n = Nscc::new(p);
    // A shorter path: 6 us of RTT. Its queueing is measured against 6 us, not 10 us.
    n.on_ack(0, 4_096, false, 6_000);
    assert_eq!(n.base_rtt_ns(), 6_000);
    // 6 us + 9 us is above target (7.5 us) on this path: fair increase, not proportional.
    n.on_ack(1, 4_096, false, 15_000);
    assert_eq!(n.counters().fair_increases, 1);
}

#[test]
fn additive_increase_once_per_base_rtt() {
    let p = params();
    let mut n = Nscc::new(p);
    let eta = (4_096 * u64::from(p.eta_q16)) >> 16;
    // ECN + low delay moves nothing but the additive increase.
    n.on_ack(BASE - 1, 4_096, true, BASE);
    assert_eq!(n.cwnd_bytes(), 125_000);
    n.on_ack(BASE, 4_096, true, BASE);
    assert_eq!(n.cwnd_bytes(), 125_000 + eta);
    n.on_ack(2 * BASE - 1, 4_096, true, BASE);
    assert_eq!(n.cwnd_bytes(), 125_000 + eta);
    n.on_ack(2 * BASE, 4_096, true, BASE);
    assert_eq!(n.cwnd_bytes(), 125_000 + 2 * eta);
}

#[test]
fn fast_increase_after_a_clean_window() {
    let p = params();
    let mut n = Nscc::new(p);
    let mut acked = 0;
    // Proportional increases grow the window meanwhile, so a clean window takes a little
    // more than the initial 125,000 bytes.
    while n.counters().fast_increases == 0 && acked < 1_000_000 {
        n.on_ack(0, 4_096, false, BASE);
        acked += 4_096;
    }
    assert!(n.counters().fast_increases >= 1);
    assert!(
        acked > 125_000,
        "not before more than a whole window was acknowledged below 1 us"
    );
    // Then fi_scale (a/4) of each acked byte, as long as the delay stays below 1 us.
    let w = n.cwnd_bytes();
    n.on_ack(0, 4_096, false, BASE + 999);
    let step = (4_096 * u64::from(p.fi_scale_q16)) >> 16;
    assert_eq!(n.cwnd_bytes(), w + step);
    // 1 us of queueing ends it: proportional again.
    let before = n.counters().fast_increases;
    n.on_ack(0, 4_096, false, BASE + 1_000);
    assert_eq!(n.counters().fast_increases, before);
}

#[test]
fn quick_adapt_sets_the_window_to_what_the_period_delivered() {
    let p = params();
    let t = p.target_qdelay_ns;
    let mut n = Nscc::new(p);
    // The first ACK opens a period of base RTT + target.
    n.on_ack(1, 4_096, true, BASE);
    let w = n.cwnd_bytes();
    // Inside the period a trim takes its bytes off the window.
    n.on_trim(100, 4_096);
    assert_eq!(n.cwnd_bytes(), w - 4_096);
    // 4 packets delivered in the period: below max_cwnd / 8 (23,437).
    for i in 0..4 {
        n.on_ack(200 + i, 4_096, true, BASE);
    }
    // At the end of the period, the trim seen in it sets the window to what it delivered.
    n.on_trim(2 + BASE + t, 4_096);
    assert_eq!(n.counters().quick_adapts, 1);
    assert_eq!(n.cwnd_bytes(), 16_384);
    // Then the marked ACKs of what was in flight are ignored: no decrease on top.
    n.on_ack(3 + BASE + t, 4_096, true, BASE + 1_000_000_000);
    assert_eq!(n.cwnd_bytes(), 16_384);
    assert_eq!(n.counters().ignored, 1);
    assert_eq!(n.counters().decreases, 0);
}

#[test]
fn no_quick_adapt_when_the_period_delivered_enough() {
    let p = params();
    let t = p.target_qdelay_ns;
    let mut n = Nscc::new(p);
    n.on_ack(1, 4_096, true, BASE);
    for i in 0..6 {
        n.on_ack(200 + i, 4_096, true, BASE);
    }
    // 24,576 bytes >= 187,500 / 8: the trim only takes its bytes.
    let w = n.cwnd_bytes();
    n.on_trim(2 + BASE + t, 4_096);
    assert_eq!(n.counters().quick_adapts, 0);
    assert_eq!(n.cwnd_bytes(), w - 4_096);
}

#[test]
fn a_burst_of_trims_removes_every_trimmed_byte_inside_a_period() {
    let p = params();
    let mut n = Nscc::new(p);
    n.on_ack(1, 4_096, false, BASE + p.target_qdelay_ns / 2);
    let w = n.cwnd_bytes();
    // The reference has no per-RTT floor on trims: each trimmed packet leaves the window.
    for i in 0..10 {
        n.on_trim(2 + i, 4_096);
    }
    assert_eq!(n.counters().trims, 10);
    assert_eq!(n.cwnd_bytes(), w - 10 * 4_096);
    for i in 0..100 {
        n.on_trim(20 + i, 4_096);
    }
    assert_eq!(n.cwnd_bytes(), p.min_cwnd_bytes);
}

#[test]
fn trim_nack_timeout() {
    let mut n = Nscc::new(params());
    n.on_trim(0, 4_096);
    assert_eq!(n.cwnd_bytes(), 125_000 - 4_096);
    n.on_nack(0, 4_096);
    assert_eq!(n.cwnd_bytes(), 125_000 - 4_096, "loss is a path signal");
    n.on_timeout(0);
    assert_eq!(n.cwnd_bytes(), (125_000 - 4_096) / 2);
    for _ in 0..100 {
        n.on_timeout(0);
    }
    assert_eq!(n.cwnd_bytes(), 4_096);
}

#[test]
fn sustained_ecn_and_delay_decreases_to_min() {
    let p = params();
    let mut n = Nscc::new(p);
    let rtt = BASE + 4 * p.target_qdelay_ns;
    // The additive increase runs once per base RTT whatever the signals: up to this much per
    // round of 2 RTTs.
    let eta = ((4_096 * u64::from(p.eta_q16)) >> 16) * (2 * rtt / BASE + 1);
    let mut now = 0;
    let mut last = n.cwnd_bytes();
    for round in 0..40 {
        let avg_before = n.avg_qdelay_ns();
        for _ in 0..8 {
            n.on_ack(now, 4_096, true, rtt);
            now += rtt / 8;
        }
        now += rtt;
        let w = n.cwnd_bytes();
        // Once the average is above target, every round decreases (down to the floor, where
        // the additive increase of one round may remain).
        if avg_before > p.target_qdelay_ns {
            assert!(
                w < last || w <= p.min_cwnd_bytes + eta,
                "round {round}: {w} !< {last}"
            );
        } else {
            assert!(w <= last + eta, "round {round}: {w} > {last}");
        }
        last = w;
    }
    assert!(last <= p.min_cwnd_bytes + eta, "{last}");
}

#[test]
fn clean_acks_grow_to_max_and_stay() {
    let p = params();
    let mut n = Nscc::new(NsccParams {
        init_cwnd_bytes: p.min_cwnd_bytes,
        ..p
    });
    let mut last = n.cwnd_bytes();
    for i in 0..10_000u64 {
        n.on_ack(i * 100, 4_096, false, BASE + 100);
        assert!(n.cwnd_bytes() >= last);
        last = n.cwnd_bytes();
    }
    assert_eq!(last, p.max_cwnd_bytes);
}

#[derive(Clone, Debug)]
enum Ev {
    Ack {
        dt: u64,
        bytes: u64,
        ecn: bool,
        rtt: u64,
    },
    Trim(u64),
    Nack(u64),
    Timeout,
}

fn ev() -> impl Strategy<Value = Ev> {
    let bytes = prop_oneof![0..10_000u64, any::<u64>()];
    let rtt = prop_oneof![Just(0u64), 0..100_000u64, any::<u64>()];
    prop_oneof![
        8 => (0..50_000u64, bytes.clone(), any::<bool>(), rtt)
            .prop_map(|(dt, bytes, ecn, rtt)| Ev::Ack { dt, bytes, ecn, rtt }),
        1 => bytes.clone().prop_map(Ev::Trim),
        1 => bytes.prop_map(Ev::Nack),
        1 => Just(Ev::Timeout),
    ]
}

fn any_params() -> impl Strategy<Value = NsccParams> {
    (
        1u64..1_000_000_000_000,
        1u64..10_000_000,
        1u32..10_000,
        1..=Q16_ONE,
        1..Q16_ONE,
        0..=NsccParams::MAX_GAIN_Q16,
    )
        .prop_filter_map("valid", |(rate, rtt, mtu, gamma, md, eta)| {
            let p = NsccParams::for_link(rate, rtt, mtu).ok()?;
            let p = NsccParams {
                gamma_q16: gamma,
                max_md_jump_q16: md,
                eta_q16: eta,
                fi_q16: eta,
                ..p
            };
            p.validate().ok().map(|_| p)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any parameters, any event sequence with extreme values: no overflow, window in bounds.
    #[test]
    fn window_always_within_bounds(p in any_params(), evs in proptest::collection::vec(ev(), 1..200)) {
        let mut cc = crate::engine::cc::Cc::Nscc(Nscc::new(p));
        let mut now = 0u64;
        for e in evs {
            match e {
                Ev::Ack { dt, bytes, ecn, rtt } => {
                    now = now.saturating_add(dt);
                    cc.on_ack(now, bytes, ecn, rtt);
                }
                Ev::Trim(b) => cc.on_trim(now, b),
                Ev::Nack(b) => cc.on_nack(now, b),
                Ev::Timeout => cc.on_timeout(now),
            }
            let w = cc.cwnd_bytes();
            prop_assert!(w >= p.min_cwnd_bytes && w <= p.max_cwnd_bytes, "{} not in [{}, {}]", w, p.min_cwnd_bytes, p.max_cwnd_bytes);
        }
    }

    /// Even repaired invalid parameters keep the window ordered and in bounds.
    #[test]
    fn new_repairs_nonsense(min in any::<u64>(), max in any::<u64>(), init in any::<u64>(), bytes in any::<u64>(), rtt in any::<u64>()) {
        let p = NsccParams { min_cwnd_bytes: min, max_cwnd_bytes: max, init_cwnd_bytes: init, mtu_bytes: 0, target_qdelay_ns: 0, gamma_q16: 0, max_md_jump_q16: u32::MAX, eta_q16: u32::MAX, fi_q16: u32::MAX, fi_scale_q16: u32::MAX, ..params() };
        let mut n = Nscc::new(p);
        for ecn in [false, true, false, true] {
            n.on_ack(rtt, bytes, ecn, rtt);
            let q = n.params();
            prop_assert!(q.min_cwnd_bytes <= n.cwnd_bytes() && n.cwnd_bytes() <= q.max_cwnd_bytes);
        }
    }
}

/// The NIC image's self-test sequence (firmware/image/src/selftest.rs `congestion`), on the
/// host: grows (or stays at the top) without congestion, shrinks under ECN + delay.
#[test]
fn the_image_self_test_sequence_holds() {
    let p = NsccParams::for_link(100_000_000_000, 10_000, 4_096).unwrap();
    let mut cc = Nscc::new(p);
    let init = cc.cwnd_bytes();
    for i in 0..200u64 {
        cc.on_ack(i * 1_000, 4_096, false, 10_000);
    }
    let grown = cc.cwnd_bytes();
    for i in 0..50u64 {
        cc.on_ack(300_000 + i * 1_000, 4_096, true, 60_000);
    }
    let shrunk = cc.cwnd_bytes();
    assert!(grown >= init && grown <= p.max_cwnd_bytes);
    assert!(
        shrunk < grown && shrunk >= p.min_cwnd_bytes,
        "{shrunk} {grown}"
    );
}
