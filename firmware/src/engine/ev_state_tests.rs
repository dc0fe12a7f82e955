extern crate std;

use super::*;
use crate::engine::rng::Rng;
use proptest::prelude::*;
use std::vec::Vec;

type T = EvTable<16>;

fn table(evs: u16, planes: u8, min_active: u16) -> T {
    EvTable::new(EvConfig {
        min_active,
        ..EvConfig::new(evs, planes)
    })
    .unwrap()
}

fn drain<const N: usize>(t: &mut EvTable<N>) -> Vec<EvEvent> {
    core::iter::from_fn(|| t.poll_event()).collect()
}

#[test]
fn config_validation() {
    let c = EvConfig::new(16, 4);
    let e = |c: EvConfig| T::new(c).err().unwrap();
    assert_eq!(
        e(EvConfig { evs: 17, ..c }),
        EvError::TooManyEvs {
            evs: 17,
            capacity: 16
        }
    );
    assert_eq!(e(EvConfig { planes: 0, ..c }), EvError::PlaneCount(0));
    assert_eq!(e(EvConfig { planes: 9, ..c }), EvError::PlaneCount(9));
    assert_eq!(
        e(EvConfig {
            min_active: 17,
            ..c
        }),
        EvError::MinActive {
            min_active: 17,
            evs: 16
        }
    );
    assert_eq!(
        e(EvConfig {
            probe_base_ns: 10,
            probe_cap_ns: 5,
            ..c
        }),
        EvError::ProbeInterval {
            base_ns: 10,
            cap_ns: 5
        }
    );
    assert_eq!(
        e(EvConfig {
            ecn_gain_q16: 0,
            ..c
        }),
        EvError::Q16Range(0)
    );
    assert!(matches!(
        e(EvConfig {
            sprt: SprtParams {
                alpha_ppm: 0,
                ..c.sprt
            },
            ..c
        }),
        EvError::Sprt(_)
    ));
}

#[test]
fn initial_state_and_planes() {
    let t = table(16, 4, 0);
    assert_eq!(t.usable_mask().count(), 16);
    assert_eq!(t.plane_capacities()[..4], [4, 4, 4, 4]);
    assert_eq!(t.stats(5).unwrap().plane, 1);
    let mut seen = Vec::new();
    t.for_each_usable(|ev, plane| seen.push((ev, plane)));
    assert_eq!(seen.len(), 16);
    assert_eq!(seen[6], (6, 2));
}

/// `EvStats::delivered` counts each delivery once, and nothing else, whenever the pending ones
/// were last fed to the gray-loss test (at 65,535 pending, a trim, a loss, an ACK's batch, the
/// controller's `allow`).
#[test]
fn delivered_counts_each_delivery_once() {
    let mut t = table(16, 4, 0);
    let delivered = |t: &T| t.stats(2).unwrap().delivered;
    for _ in 0..70_000 {
        t.handle_delivery(2).unwrap();
    }
    assert_eq!(delivered(&t), 70_000);
    t.handle_trim(2).unwrap();
    t.handle_delivery(2).unwrap();
    assert_eq!((delivered(&t), t.stats(2).unwrap().trimmed), (70_001, 1));
    t.handle_loss(2, 10).unwrap();
    t.handle_delivery(2).unwrap();
    let fb = AckFeedback {
        delivered: 5,
        ecn_marked: false,
        rtt_ns: 1,
    };
    t.handle_ack(2, 20, fb).unwrap();
    assert_eq!(delivered(&t), 70_007);
    t.deny(2).unwrap();
    t.handle_delivery(2).unwrap();
    t.allow(2, 30).unwrap();
    t.handle_delivery(2).unwrap();
    assert_eq!((delivered(&t), t.stats(2).unwrap().lost), (70_009, 1));
}

/// The datapath's per-EV credits reported in bulk (`credit_deliveries`) are `handle_delivery`
/// once per credit without the QP-wide count, an EV beyond the configured ones a bad index;
/// a loss after them sees the same gray-loss evidence.
#[test]
fn bulk_credits_are_deliveries_without_the_qp_count() {
    let (mut a, mut b) = (table(16, 4, 0), table(16, 4, 0));
    for ev in [3, 3, 15] {
        a.handle_delivery(ev).unwrap();
    }
    for (ev, n) in [(3, 2), (15, 1)] {
        b.credit_deliveries(ev, n).unwrap();
    }
    for ev in [16, 300] {
        assert!(a.handle_delivery(ev).is_err());
        assert!(b.credit_deliveries(ev, 1).is_err());
    }
    b.note_qp_deliveries(3);
    for ev in 0..16 {
        assert_eq!(a.stats(ev), b.stats(ev));
    }
    assert_eq!(b.stats(3).unwrap().delivered, 2);
    assert_eq!(a.counters(), b.counters());
    assert_eq!(b.counters().bad_index, 2);
    assert_eq!((a.qp_outcomes, a.qp_losses), (b.qp_outcomes, b.qp_losses));
    a.handle_loss(3, 10).unwrap();
    b.handle_loss(3, 10).unwrap();
    assert_eq!(a.stats(3), b.stats(3));
}

#[test]
fn untrimmed_loss_retires_at_once_trim_does_not() {
    let mut t = table(16, 4, 0);
    t.handle_trim(3).unwrap();
    assert_eq!(t.state(3), Ok(EvState::Good));
    assert!(drain(&mut t).is_empty());
    t.handle_loss(3, 100).unwrap();
    assert_eq!(t.state(3), Ok(EvState::AssumedBad));
    assert_eq!(
        drain(&mut t),
        [EvEvent {
            ev: 3,
            old: EvState::Good,
            new: EvState::AssumedBad,
            reason: EvReason::Loss
        }]
    );
    assert!(!t.usable_mask().contains(3));
    assert_eq!(t.plane_capacity(3), 3);
    assert_eq!(t.active(), 15);
    // A late loss on a retired EV changes nothing.
    t.handle_loss(3, 200).unwrap();
    assert!(drain(&mut t).is_empty());
    assert_eq!(t.counters().losses_on_retired, 1);
}

#[test]
fn min_active_guard_skips_instead_of_retiring() {
    let mut t = table(4, 1, 3);
    t.handle_loss(0, 0).unwrap();
    assert_eq!(t.state(0), Ok(EvState::AssumedBad));
    t.handle_loss(1, 0).unwrap();
    assert_eq!(t.state(1), Ok(EvState::Skip));
    assert_eq!(t.counters().guard_hits, 1);
    assert_eq!(t.active(), 3);
    let ev = drain(&mut t);
    assert_eq!(ev[1].reason, EvReason::LossGuarded);
    assert!(!t.usable_mask().contains(1), "skipped for the next pass");
    t.release_skips();
    assert_eq!(t.state(1), Ok(EvState::Good));
    assert_eq!(drain(&mut t)[0].reason, EvReason::SkipServed);
}

#[test]
fn persistent_ecn_skips() {
    let mut t = table(4, 1, 0);
    let marked = AckFeedback {
        delivered: 1,
        ecn_marked: true,
        rtt_ns: 5_000,
    };
    let mut skipped_after = None;
    for n in 1..=40 {
        t.handle_ack(2, 0, marked).unwrap();
        if t.state(2) == Ok(EvState::Skip) {
            skipped_after = Some(n);
            break;
        }
    }
    // gain 1/16, threshold 1/2: 1 - (15/16)^n >= 1/2 at n = 11.
    assert_eq!(skipped_after, Some(11));
    assert_eq!(t.counters().ecn_skips, 1);
    assert_eq!(t.stats(2).unwrap().rtt_avg_ns, 5_000);
    t.handle_skip_served(2).unwrap();
    assert_eq!(t.state(2), Ok(EvState::Good));
    t.handle_ack(2, 0, marked).unwrap();
    assert_eq!(t.state(2), Ok(EvState::Skip), "still marked: skipped again");
    for _ in 0..3 {
        t.handle_ack(
            2,
            0,
            AckFeedback {
                delivered: 1,
                ecn_marked: false,
                rtt_ns: 0,
            },
        )
        .unwrap();
    }
    t.release_skips();
    t.handle_ack(
        2,
        0,
        AckFeedback {
            delivered: 1,
            ecn_marked: false,
            rtt_ns: 0,
        },
    )
    .unwrap();
    assert_eq!(
        t.state(2),
        Ok(EvState::Good),
        "marks stopped: average fell below threshold"
    );
}

#[test]
fn probes_back_off_and_reply_restores() {
    let cfg = EvConfig {
        probe_base_ns: 100,
        probe_cap_ns: 400,
        ..EvConfig::new(4, 1)
    };
    let mut t: EvTable<4> = EvTable::new(cfg).unwrap();
    assert_eq!(t.next_probe_deadline(), None);
    t.handle_loss(1, 1_000).unwrap();
    assert_eq!(t.next_probe_deadline(), Some(1_100));
    assert_eq!(t.poll_probe(1_099), None);
    let p0 = t.poll_probe(1_100).unwrap();
    assert_eq!((p0.ev, p0.plane), (1, 0));
    let mut now = 1_100;
    let mut gaps = Vec::new();
    for _ in 0..4 {
        let at = t.next_probe_deadline().unwrap();
        gaps.push(at - now);
        now = at;
        t.poll_probe(now).unwrap();
    }
    assert_eq!(gaps, [200, 400, 400, 400], "doubling, capped");
    let last = t.poll_probe(u64::MAX).unwrap();
    assert_eq!(
        t.handle_probe_reply(1, p0.probe_id, 0),
        Err(EvError::StaleProbe {
            ev: 1,
            probe_id: p0.probe_id
        })
    );
    assert_eq!(t.counters().stale_probe_replies, 1);
    t.handle_probe_reply(1, last.probe_id, 7_000).unwrap();
    assert_eq!(t.state(1), Ok(EvState::Good));
    assert_eq!(t.stats(1).unwrap().rtt_avg_ns, 7_000);
    assert_eq!(drain(&mut t).last().unwrap().reason, EvReason::ProbeReply);
    assert!(
        t.handle_probe_reply(1, last.probe_id, 0).is_err(),
        "already good"
    );
    // Backoff restarts from the base after a reply.
    t.handle_loss(1, 0).unwrap();
    assert_eq!(t.next_probe_deadline(), Some(100));
}

#[test]
fn shared_loss_retires_without_counting_and_shared_recovery_restores() {
    let cfg = EvConfig {
        probe_base_ns: 100,
        probe_cap_ns: 100_000,
        ..EvConfig::new(8, 2)
    };
    let mut t: EvTable<8> = EvTable::new(cfg).unwrap();
    assert_eq!(t.handle_shared_loss(3, 1_000), Ok(true));
    assert_eq!(t.state(3), Ok(EvState::AssumedBad));
    let ev = drain(&mut t);
    assert_eq!((ev.len(), ev[0].reason), (1, EvReason::SharedLoss));
    // The loss was another EV's: nothing counted on this one.
    assert_eq!(t.stats(3).unwrap().lost, 0);
    assert_eq!(t.plane_capacity(1), 3);
    // Its own probing starts late (the EV that lost the packet probes the route).
    assert_eq!(
        t.next_probe_deadline(),
        Some(1_000 + 100 * SHARED_PROBE_FACTOR)
    );
    // Already retired: no change, no event.
    assert_eq!(t.handle_shared_loss(3, 2_000), Ok(false));
    assert!(drain(&mut t).is_empty());
    // The route answered another EV's probe: back, probe backoff reset.
    assert_eq!(t.handle_shared_recovery(3), Ok(true));
    assert_eq!(t.state(3), Ok(EvState::Good));
    assert_eq!(drain(&mut t)[0].reason, EvReason::SharedRecovery);
    assert_eq!(t.handle_shared_recovery(3), Ok(false), "already good");
    assert_eq!(t.next_probe_deadline(), None);
    t.handle_loss(3, 0).unwrap();
    assert_eq!(t.next_probe_deadline(), Some(100));
    // A plane that is down keeps its EVs out; bad indices are errors.
    t.plane_down(1).unwrap();
    assert_eq!(t.handle_shared_recovery(3), Ok(false));
    assert!(t.handle_shared_loss(8, 0).is_err());
    assert!(t.handle_shared_recovery(8).is_err());
}

#[test]
fn shared_loss_respects_min_active() {
    let mut t = table(4, 1, 3);
    assert_eq!(t.handle_shared_loss(0, 0), Ok(true));
    // One more would leave 2 < 3 active: skipped once instead.
    assert_eq!(t.handle_shared_loss(1, 0), Ok(true));
    assert_eq!(t.state(1), Ok(EvState::Skip));
    assert_eq!(t.counters().guard_hits, 1);
    assert_eq!(t.active(), 3);
}

#[test]
fn plane_down_retires_all_in_one_step_and_plane_up_probes() {
    let mut t = table(16, 4, 15);
    t.deny(6).unwrap(); // plane 2, stays denied
    drain(&mut t);
    assert_eq!(t.plane_down(2), Ok(3), "guard does not hold a dead port");
    let ev = drain(&mut t);
    assert_eq!(ev.len(), 3);
    assert!(ev
        .iter()
        .all(|e| e.reason == EvReason::PlaneDown && e.new == EvState::AssumedBad));
    assert_eq!(t.plane_capacity(2), 0);
    assert_eq!(t.state(6), Ok(EvState::Denied));
    assert_eq!(t.next_probe_deadline(), None, "no probes on a down plane");
    assert_eq!(
        t.plane_down(4),
        Err(EvError::BadPlane {
            plane: 4,
            planes: 4
        })
    );
    t.plane_up(2, 5_000).unwrap();
    assert_eq!(t.next_probe_deadline(), Some(5_000));
    let mut probed = Vec::new();
    while let Some(p) = t.poll_probe(5_000) {
        probed.push(p.ev);
        t.handle_probe_reply(p.ev, p.probe_id, 0).unwrap();
    }
    assert_eq!(probed, [2, 10, 14]);
    assert_eq!(t.plane_capacity(2), 3);
}

#[test]
fn denied_changes_only_by_controller() {
    let mut t = table(8, 2, 0);
    t.deny(1).unwrap();
    t.handle_loss(1, 0).unwrap();
    t.handle_ack(
        1,
        0,
        AckFeedback {
            delivered: 5,
            ecn_marked: true,
            rtt_ns: 1,
        },
    )
    .unwrap();
    t.plane_down(1).unwrap();
    t.plane_up(1, 0).unwrap();
    assert_eq!(t.state(1), Ok(EvState::Denied));
    assert!(t.poll_probe(u64::MAX).is_some_and(|p| p.ev != 1));
    t.allow(1, 0).unwrap();
    assert_eq!(t.state(1), Ok(EvState::Good));
    t.plane_down(1).unwrap();
    t.deny(3).unwrap();
    t.allow(3, 0).unwrap();
    assert_eq!(
        t.state(3),
        Ok(EvState::AssumedBad),
        "allowed on a down plane"
    );
}

#[test]
fn bad_indices_are_counted_errors() {
    let mut t = table(8, 2, 0);
    assert_eq!(t.handle_loss(8, 0), Err(EvError::BadEv { ev: 8, evs: 8 }));
    assert!(t.handle_ack(u16::MAX, 0, AckFeedback::default()).is_err());
    assert!(t.handle_trim(100).is_err());
    assert!(t.deny(9).is_err());
    assert!(t.set_plane(0, 2).is_err());
    assert!(t.state(8).is_err());
    assert_eq!(t.counters().bad_index, 5);
    assert_eq!(t.plane_capacity(200), 0);
}

#[test]
fn event_queue_overflow_is_counted() {
    let mut t: EvTable<4> = EvTable::new(EvConfig::new(4, 1)).unwrap();
    for ev in 0..4 {
        t.deny(ev).unwrap();
    }
    for ev in 0..4 {
        t.allow(ev, 0).unwrap();
    }
    assert_eq!(t.counters().events_dropped, 4);
    assert_eq!(drain(&mut t).len(), 4);
}

/// The sprayer's copy of the table (what the engine writes from [`EvTable::poll_update`])
/// ends in the table's state though the event queue dropped changes: after the queued
/// changes, a sweep hands out every EV's current state, once, and is started over by a drop
/// during it.
#[test]
fn dropped_events_still_reach_the_sprayer() {
    let mut t: EvTable<4> = EvTable::new(EvConfig::new(4, 1)).unwrap();
    // What the sprayer holds: every EV usable, as the QP starts.
    let mut sprayer = [EvState::Good; 4];
    let apply = |t: &mut EvTable<4>, sprayer: &mut [EvState; 4]| {
        let mut writes = 0;
        while let Some((ev, state)) = t.poll_update() {
            sprayer[usize::from(ev)] = state;
            writes += 1;
        }
        writes
    };
    for ev in 0..4 {
        t.deny(ev).unwrap();
    }
    for ev in 0..4 {
        t.allow(ev, 0).unwrap();
    }
    assert_eq!(t.counters().events_dropped, 4);
    assert_eq!(t.counters().resyncs, 1);
    assert!(t.has_updates());
    // The 4 queued denials, then the sweep of 4 current states.
    assert_eq!(apply(&mut t, &mut sprayer), 8);
    assert!(!t.has_updates());
    for ev in 0..4 {
        assert_eq!(sprayer[usize::from(ev)], t.state(ev).unwrap(), "EV {ev}");
    }
    assert_eq!(sprayer, [EvState::Good; 4]);
    // The host still hears only what the queue kept.
    assert_eq!(drain(&mut t).len(), 4);

    // A drop in the middle of a sweep starts it over, from EV 0.
    for ev in 0..4 {
        t.deny(ev).unwrap();
    }
    t.allow(1, 0).unwrap(); // dropped: a sweep is due
    assert_eq!(t.counters().resyncs, 2);
    for _ in 0..5 {
        // the 4 queued denials, then the sweep's EV 0 (denied)
        let (ev, s) = t.poll_update().unwrap();
        sprayer[usize::from(ev)] = s;
    }
    // The host takes them: room again.
    assert_eq!(drain(&mut t).len(), 4);
    // EV 0, which the sweep passed, changes 5 times: the last change is dropped.
    for _ in 0..2 {
        t.allow(0, 0).unwrap();
        t.deny(0).unwrap();
    }
    t.allow(0, 0).unwrap();
    assert_eq!(t.counters().events_dropped, 6);
    assert_eq!(t.counters().resyncs, 2); // (started over, not begun)
    assert_eq!(t.state(0).unwrap(), EvState::Good);
    apply(&mut t, &mut sprayer);
    for ev in 0..4 {
        assert_eq!(sprayer[usize::from(ev)], t.state(ev).unwrap(), "EV {ev}");
    }
}

/// A 2% gray EV among healthy ones, with MRC's retire-on-loss and probing: it flaps back on
/// probe replies until the SPRT retires it for long (probe interval at the cap). Healthy EVs
/// (1e-4 loss) are never gray-retired in the same run.
#[test]
fn gray_ev_is_retired_within_bounded_packets() {
    const EVS: u16 = 32;
    for seed in 0..20u64 {
        let mut rng = Rng::new(seed);
        let cfg = EvConfig {
            probe_base_ns: 1_000,
            probe_cap_ns: 1_000_000_000,
            ..EvConfig::new(EVS, 4)
        };
        let mut t: EvTable<32> = EvTable::new(cfg).unwrap();
        let gray = 5u16;
        let mut sent_on_gray = 0u32;
        let mut now = 0u64;
        let mut retired_at = None;
        'run: for _ in 0..100_000 {
            now += 100;
            let mut usable = Vec::new();
            t.for_each_usable(|ev, _| usable.push(ev));
            t.release_skips();
            for ev in usable {
                let loss_ppm = if ev == gray { 20_000 } else { 100 };
                if ev == gray {
                    sent_on_gray += 1;
                }
                if rng.chance_ppm(loss_ppm) {
                    t.handle_loss(ev, now).unwrap();
                } else {
                    t.handle_ack(
                        ev,
                        now,
                        AckFeedback {
                            delivered: 1,
                            ecn_marked: false,
                            rtt_ns: 0,
                        },
                    )
                    .unwrap();
                }
            }
            while let Some(p) = t.poll_probe(now) {
                let loss_ppm = if p.ev == gray { 20_000 } else { 100 };
                if !rng.chance_ppm(loss_ppm) {
                    t.handle_probe_reply(p.ev, p.probe_id, 0).unwrap();
                }
            }
            while let Some(e) = t.poll_event() {
                if e.reason == EvReason::GrayLoss {
                    assert_eq!(e.ev, gray, "seed {seed}: healthy EV gray-retired");
                    retired_at = Some(sent_on_gray);
                    break 'run;
                }
            }
        }
        let n = retired_at.expect("gray EV never retired");
        assert!(n <= 2_000, "seed {seed}: gray EV retired after {n} packets");
        assert_eq!(t.state(gray), Ok(EvState::AssumedBad));
    }
}

/// Spray `rounds` passes over every usable EV of a 256-EV table (MRC retire-on-loss and
/// probing, probes lost like data), EV `gray` losing `gray_ppm` and the others `base_ppm`, with
/// per-PSN delivery credit as the requester gives it; returns the gray retirements per EV.
fn spray_uniform(seed: u64, rounds: u32, base_ppm: u32, gray: u16, gray_ppm: u32) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    let cfg = EvConfig {
        probe_base_ns: 1_000,
        ..EvConfig::new(256, 4)
    };
    let mut t: EvTable<256> = EvTable::new(cfg).unwrap();
    let mut gray_retires = std::vec![0u32; 256];
    let mut now = 0u64;
    let loss = |ev: u16| if ev == gray { gray_ppm } else { base_ppm };
    for _ in 0..rounds {
        now += 100;
        let mut usable = Vec::new();
        t.for_each_usable(|ev, _| usable.push(ev));
        t.release_skips();
        for ev in usable {
            if rng.chance_ppm(loss(ev)) {
                t.handle_loss(ev, now).unwrap();
            } else {
                t.handle_delivery(ev).unwrap();
            }
        }
        while let Some(p) = t.poll_probe(now) {
            if !rng.chance_ppm(loss(p.ev)) {
                t.handle_probe_reply(p.ev, p.probe_id, 0).unwrap();
            }
        }
        for e in drain(&mut t) {
            if e.reason == EvReason::GrayLoss {
                gray_retires[usize::from(e.ev)] += 1;
            }
        }
    }
    gray_retires
}

/// 1 % uniform random loss on every EV (loss the QP sees everywhere, which no EV explains):
/// the gray-loss test, weighed against the QP-wide rate, retires none of them, and MRC's
/// retire-on-loss + probing keeps nearly all EVs in use. (Against a fixed 1e-4 baseline, p1 =
/// 1 % would make every EV "gray".)
#[test]
fn uniform_loss_retires_no_ev_as_gray() {
    for seed in 0..3 {
        // ~3,000 packets per EV, ~7,700 losses in all.
        let g = spray_uniform(seed, 3_000, 10_000, u16::MAX, 0);
        assert_eq!(g.iter().sum::<u32>(), 0, "seed {seed}: {g:?}");
    }
}

/// Among EVs losing 1 % at random, one losing 10 % (10x the QP's rate) is still found gray,
/// and no other EV is.
#[test]
fn gray_ev_stands_out_of_uniform_loss() {
    for seed in 0..3 {
        let g = spray_uniform(seed, 3_000, 10_000, 7, 100_000);
        assert!(g[7] >= 1, "seed {seed}: gray EV never retired");
        let others: u32 = g.iter().sum::<u32>() - g[7];
        assert_eq!(others, 0, "seed {seed}: {g:?}");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Ack(u16, bool, u32),
    Loss(u16),
    Trim(u16),
    ReleaseSkips,
    Probe(u64, bool),
    PlaneDown(u8),
    PlaneUp(u8),
    Deny(u16),
    Allow(u16),
}

fn op() -> impl Strategy<Value = Op> {
    let ev = 0u16..20; // a few out of range on purpose
    let plane = 0u8..5;
    prop_oneof![
        4 => (ev.clone(), any::<bool>(), 0u32..4).prop_map(|(e, m, d)| Op::Ack(e, m, d)),
        4 => ev.clone().prop_map(Op::Loss),
        1 => ev.clone().prop_map(Op::Trim),
        1 => Just(Op::ReleaseSkips),
        3 => (0u64..100_000, any::<bool>()).prop_map(|(dt, r)| Op::Probe(dt, r)),
        1 => plane.clone().prop_map(Op::PlaneDown),
        1 => plane.prop_map(Op::PlaneUp),
        1 => ev.clone().prop_map(Op::Deny),
        1 => ev.prop_map(Op::Allow),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Invariants under any operation sequence: the mask, per-plane capacities and active count
    /// match the states; events replayed on a mirror reproduce the states; losses never push
    /// the active count below `min_active`; `Denied` moves only by deny/allow.
    #[test]
    fn table_invariants(min_active in 0u16..16, ops in proptest::collection::vec(op(), 1..200)) {
        let mut t: EvTable<16> = EvTable::new(EvConfig { min_active, probe_base_ns: 10, probe_cap_ns: 1_000, ..EvConfig::new(16, 4) }).unwrap();
        let mut mirror = [EvState::Good; 16];
        let mut now = 0u64;
        for op in ops {
            let before: Vec<EvState> = (0..16).map(|i| t.state(i).unwrap()).collect();
            let active_before = t.active();
            let mut controller = false;
            let mut plane_op = false;
            match op {
                Op::Ack(e, m, d) => { let _ = t.handle_ack(e, now, AckFeedback { delivered: d, ecn_marked: m, rtt_ns: 1 }); }
                Op::Loss(e) => { let _ = t.handle_loss(e, now); }
                Op::Trim(e) => { let _ = t.handle_trim(e); }
                Op::ReleaseSkips => t.release_skips(),
                Op::Probe(dt, reply) => {
                    now += dt;
                    while let Some(p) = t.poll_probe(now) {
                        prop_assert_eq!(before[usize::from(p.ev)], EvState::AssumedBad);
                        prop_assert!(!t.plane_is_down(p.plane));
                        if reply { t.handle_probe_reply(p.ev, p.probe_id, 1).unwrap(); }
                    }
                }
                Op::PlaneDown(p) => { plane_op = true; let _ = t.plane_down(p); }
                Op::PlaneUp(p) => { let _ = t.plane_up(p, now); }
                Op::Deny(e) => { controller = true; let _ = t.deny(e); }
                Op::Allow(e) => { controller = true; let _ = t.allow(e, now); }
            }
            while let Some(ev) = t.poll_event() {
                let m = &mut mirror[usize::from(ev.ev)];
                prop_assert_eq!(*m, ev.old);
                prop_assert_ne!(ev.old, ev.new);
                if ev.old == EvState::Denied || ev.new == EvState::Denied {
                    prop_assert!(controller, "Denied changed without the controller");
                }
                *m = ev.new;
            }
            prop_assert_eq!(t.counters().events_dropped, 0);
            let mut good = [0u16; MAX_PLANES];
            let mut active = 0;
            for i in 0..16u16 {
                let s = t.state(i).unwrap();
                prop_assert_eq!(s, mirror[usize::from(i)]);
                prop_assert_eq!(t.usable_mask().contains(i), s == EvState::Good);
                if s == EvState::Good { good[usize::from(t.stats(i).unwrap().plane)] += 1; }
                if matches!(s, EvState::Good | EvState::Skip) { active += 1; }
            }
            prop_assert_eq!(t.plane_capacities(), good);
            prop_assert_eq!(t.active(), active);
            if !plane_op && !controller && active < active_before {
                prop_assert!(active >= min_active, "loss dropped active below min_active");
            }
        }
    }
}
