use super::*;
use proptest::prelude::*;

const MTU: u32 = 4_096;
const BASE: u64 = 10_000;

fn params() -> NsccParams {
    NsccParams::for_link(100_000_000_000, BASE, MTU).unwrap()
}

#[test]
fn defaults_follow_link_rate_and_base_rtt() {
    let p = params();
    assert_eq!(p.init_cwnd_bytes, 125_000, "BDP of 100 Gb/s x 10 us");
    assert_eq!(p.max_cwnd_bytes, 187_500, "1.5 x BDP");
    assert_eq!(p.min_cwnd_bytes, 4_096);
    assert_eq!(p.target_qdelay_ns, 5_000);
    assert_eq!(p.fi_scale_q16, Q16_ONE);
    let p4 = NsccParams::for_link(400_000_000_000, BASE, MTU).unwrap();
    assert_eq!(p4.fi_scale_q16, 4 * Q16_ONE);
    // A tiny link still gets a usable window of one MTU.
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
    let high = BASE + 3 * p.target_qdelay_ns;
    let low = BASE + p.target_qdelay_ns / 2;

    // ECN + low delay: no change.
    let mut n = Nscc::new(p);
    n.on_ack(0, 4_096, true, low);
    assert_eq!(n.cwnd_bytes(), 125_000);
    assert_eq!(n.counters().ecn_low_delay, 1);

    // No ECN + low (not near-empty) delay: proportional increase.
    n.on_ack(1, 4_096, false, low);
    let after_pi = n.cwnd_bytes();
    assert!(
        after_pi > 125_000 && after_pi < 125_000 + 4_096,
        "{after_pi}"
    );

    // No ECN + high delay: fair increase, small.
    let mut f = Nscc::new(p);
    f.on_ack(0, 125_000, false, high);
    // fi = 0.5 MTU per window acked: +2048 for a whole window.
    assert_eq!(f.cwnd_bytes(), 125_000 + 2_048);

    // ECN + high delay: multiplicative decrease, bounded by max_md_jump, then quiet.
    let mut d = Nscc::new(p);
    d.on_ack(0, 4_096, true, BASE + 100 * p.target_qdelay_ns);
    assert_eq!(d.cwnd_bytes(), 62_500, "max_md_jump = 0.5 bounds the cut");
    d.on_ack(1, 4_096, true, high);
    assert_eq!(d.cwnd_bytes(), 62_500, "quiet period");
    assert_eq!(d.counters().decreases_quiet, 1);
    // The quiet period is one RTT as known at the decrease: base + average queuing delay.
    let quiet_ns = BASE + ewma_q16(0, 100 * p.target_qdelay_ns, p.gamma_q16);
    d.on_ack(quiet_ns - 1, 4_096, true, high);
    assert_eq!(d.cwnd_bytes(), 62_500, "still quiet 1 ns before the end");
    d.on_ack(quiet_ns, 4_096, true, high);
    assert!(d.cwnd_bytes() < 62_500);
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
        acked >= 125_000,
        "not before a whole window was acknowledged clean"
    );
    let w = n.cwnd_bytes();
    n.on_ack(0, 4_096, false, BASE);
    assert_eq!(n.cwnd_bytes(), (w + 4_096).min(p.max_cwnd_bytes));
}

#[test]
fn a_burst_of_trims_cuts_at_most_max_md_jump_per_rtt() {
    let p = params();
    let mut n = Nscc::new(p);
    for i in 0..100 {
        n.on_trim(i, 4_096);
    }
    assert_eq!(n.counters().trims, 100);
    assert_eq!(n.cwnd_bytes(), 62_500, "max_md_jump = 0.5 of 125,000");
    // One RTT (base + average queueing delay, 0 here) after the first trim, trims cut again.
    n.on_trim(BASE - 1, 4_096);
    assert_eq!(n.cwnd_bytes(), 62_500);
    n.on_trim(BASE, 4_096);
    assert_eq!(n.cwnd_bytes(), 62_500 - 4_096);
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
    let mut now = 0;
    let mut last = n.cwnd_bytes();
    for round in 0..40 {
        for _ in 0..8 {
            n.on_ack(now, 4_096, true, rtt);
            now += rtt / 8;
        }
        now += rtt;
        let w = n.cwnd_bytes();
        assert!(
            w < last || w == p.min_cwnd_bytes,
            "round {round}: {w} !< {last}"
        );
        last = w;
    }
    assert_eq!(last, p.min_cwnd_bytes);
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
