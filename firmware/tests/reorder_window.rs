//! The reordering window a QP's datapath context gets at RTS (RACK's time rule, the tail loss
//! probe's unit): the engine's, or with `REORDER_NS_BASE_RTT` the base RTT of the QP's CC
//! profile, as the NIC image's loop configures it.

use mrc_abi::device::csr::{CsrEntry, CsrEvent, TxStart};
use mrc_abi::Psn;
use mrc_firmware::engine::cc::NsccParams;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{
    CcProfile, Engine, EngineConfig, EvProfile, QpAttrs, QpState, REORDER_NS_BASE_RTT,
};
use mrc_firmware::testkit::TestKit;

const BASE_RTT_NS: u64 = 7_000;

fn commands(fw: &mut Engine<TestKit>) -> Vec<CsrEvent> {
    let mut buf = vec![CsrEntry::ZERO; 64];
    let mut all = Vec::new();
    loop {
        let n = fw.poll_commands(&mut buf);
        if n == 0 {
            return all;
        }
        all.extend(buf[..n].iter().map(|e| e.decode().unwrap()));
    }
}

/// An engine with `reorder_ns` and one QP taken to RTS with `attrs`.
fn at_rts(reorder_ns: u32, attrs: &QpAttrs) -> Engine<TestKit> {
    let mut fw = Engine::<TestKit>::new(EngineConfig {
        reorder_ns,
        ..EngineConfig::DEFAULT
    })
    .unwrap();
    let q = fw.create_qp().unwrap();
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        fw.modify_qp(q, s, attrs, 0).unwrap();
    }
    fw
}

/// The attributes of the QP the tests connect: 8 EVs over 2 planes, on `cc`.
fn attrs(cc: CcProfile) -> QpAttrs {
    QpAttrs::connect(EvProfile::udp(EvConfig::new(8, 2)), cc, 1)
}

/// An engine with `reorder_ns`, one QP on `cc` taken to RTS: the window its RTS context
/// carries.
fn rts_window(reorder_ns: u32, cc: CcProfile) -> (Engine<TestKit>, u32) {
    let mut fw = at_rts(reorder_ns, &attrs(cc));
    let windows: Vec<u32> = commands(&mut fw)
        .iter()
        .filter_map(|c| match c {
            CsrEvent::QpRts(r) => Some(r.reorder_ns.get()),
            _ => None,
        })
        .collect();
    assert_eq!(windows.len(), 1);
    (fw, windows[0])
}

fn nscc() -> CcProfile {
    CcProfile::Nscc(NsccParams::for_link(100_000_000_000, BASE_RTT_NS, 4_096).unwrap())
}

const FIXED: CcProfile = CcProfile::Fixed {
    cwnd_bytes: 1 << 20,
};

#[test]
fn the_window_is_the_engines_or_the_cc_profiles_base_rtt() {
    assert_eq!(rts_window(0, nscc()).1, 0);
    assert_eq!(rts_window(5_000, nscc()).1, 5_000);
    assert_eq!(rts_window(5_000, FIXED).1, 5_000);
    assert_eq!(
        rts_window(REORDER_NS_BASE_RTT, nscc()).1,
        BASE_RTT_NS as u32
    );
    // A fixed window has no base RTT: the count alone decides.
    assert_eq!(rts_window(REORDER_NS_BASE_RTT, FIXED).1, 0);
}

/// With a window, a QP with PSNs outstanding and nothing heard for two windows orders a tail
/// loss probe; without one, it waits for the ACK timeout.
#[test]
fn the_base_rtt_window_times_the_tail_loss_probe() {
    for (reorder_ns, probe_at) in [(REORDER_NS_BASE_RTT, Some(2 * BASE_RTT_NS)), (0, None)] {
        let (mut fw, _) = rts_window(reorder_ns, nscc());
        let start = [CsrEvent::TxStart(TxStart::new(0, Psn::new(0))).encode()];
        assert_eq!(fw.handle_events(1_000, &start), 1);
        commands(&mut fw);
        let mut probe = None;
        let mut now = 1_000;
        while now < 1_000 + 4 * BASE_RTT_NS {
            now += 100;
            if fw.handle_timeout(now)
                && commands(&mut fw)
                    .iter()
                    .any(|c| matches!(c, CsrEvent::TailProbe(_)))
            {
                probe = Some(now - 1_000);
                break;
            }
        }
        match probe_at {
            // (the timer wheel's tick: within 0.5 us)
            Some(at) => {
                let p = probe.expect("a tail probe");
                assert!(p >= at && p <= at + 500, "{p} ns after the start");
            }
            None => assert_eq!(probe, None),
        }
    }
}

/// An ACK timeout's one retransmission gets a tail probe of its own, two windows after the
/// timeout: when it or its ACK is lost on its path, the oldest PSN leaves again long before the
/// doubled timeout.
#[test]
fn a_timeout_is_followed_by_a_tail_probe_two_windows_later() {
    // ACK timeout 1.024 us * 2^4 = 16.4 us.
    let timeout = QpAttrs {
        timeout: Some(4),
        ..attrs(nscc())
    };
    let mut fw = at_rts(REORDER_NS_BASE_RTT, &timeout);
    commands(&mut fw);
    let start = [CsrEvent::TxStart(TxStart::new(0, Psn::new(0))).encode()];
    assert_eq!(fw.handle_events(0, &start), 1);
    let mut seen = Vec::new();
    let mut now = 0;
    while now < 48_000 {
        now += 100;
        if fw.handle_timeout(now) {
            for c in commands(&mut fw) {
                match c {
                    CsrEvent::TailProbe(_) => seen.push(("probe", now)),
                    CsrEvent::RetransmitUnacked(_) => seen.push(("timeout", now)),
                    _ => {}
                }
            }
        }
    }
    // (the timer wheel's tick: within 0.5 us)
    let near = |t: u64, at: u64| t >= at && t <= at + 500;
    let kinds: Vec<&str> = seen.iter().map(|s| s.0).collect();
    // The first probe two windows after the start, then each timeout (retries 1..=7 at the
    // same interval) followed by a probe two windows later.
    assert_eq!(
        kinds,
        ["probe", "timeout", "probe", "timeout", "probe"],
        "{seen:?}"
    );
    assert!(near(seen[0].1, 2 * BASE_RTT_NS), "{seen:?}");
    assert!(near(seen[1].1, 16_384), "{seen:?}");
    for pair in [(1, 2), (3, 4)] {
        assert!(
            near(seen[pair.1].1, seen[pair.0].1 + 2 * BASE_RTT_NS),
            "{seen:?}"
        );
    }
}
