extern crate std;

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::vec;
use std::vec::Vec;

#[test]
fn zero_tick_is_an_error() {
    assert_eq!(TimerWheel::<4>::new(0).err(), Some(TimerError::ZeroTick));
}

#[test]
fn fires_in_deadline_order_with_ties_by_arm_order() {
    let mut w = TimerWheel::<8>::new(100).unwrap();
    w.arm(TimerId(1), 500).unwrap();
    w.arm(TimerId(2), 250).unwrap();
    w.arm(TimerId(3), 500).unwrap();
    w.arm(TimerId(4), 499).unwrap();
    assert_eq!(w.next_deadline(), Some(300));
    assert_eq!(w.poll_expired(299), None, "never early");
    assert_eq!(w.poll_expired(300).map(|e| e.id), Some(TimerId(2)));
    assert_eq!(w.poll_expired(300), None);
    let order: Vec<u32> = core::iter::from_fn(|| w.poll_expired(10_000))
        .map(|e| e.id.0)
        .collect();
    assert_eq!(order, [4, 1, 3]);
    assert!(w.is_empty());
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn stale_handles_are_errors_not_wrong_cancels() {
    let mut w = TimerWheel::<1>::new(1).unwrap();
    let h1 = w.arm(TimerId(1), 10).unwrap();
    assert_eq!(w.cancel(h1), Ok(TimerId(1)));
    assert_eq!(w.cancel(h1), Err(TimerError::StaleHandle));
    let h2 = w.arm(TimerId(2), 10).unwrap();
    assert_eq!(
        w.cancel(h1),
        Err(TimerError::StaleHandle),
        "slot reused, old handle stale"
    );
    assert_eq!(w.deadline_of(h2), Some(10));
    assert_eq!(w.poll_expired(10).map(|e| e.id), Some(TimerId(2)));
    assert_eq!(
        w.cancel(h2),
        Err(TimerError::StaleHandle),
        "fired timer cannot be cancelled"
    );
    assert_eq!(w.counters().stale, 3);
}

#[test]
fn full_is_a_counted_error() {
    let mut w = TimerWheel::<2>::new(1).unwrap();
    w.arm(TimerId(1), 1).unwrap();
    w.arm(TimerId(2), 2).unwrap();
    assert_eq!(w.arm(TimerId(3), 3), Err(TimerError::Full { capacity: 2 }));
    assert_eq!(w.counters().full, 1);
    let mut z = TimerWheel::<0>::new(1).unwrap();
    assert_eq!(z.arm(TimerId(0), 0), Err(TimerError::Full { capacity: 0 }));
}

#[test]
fn far_deadlines_and_huge_jumps() {
    let mut w = TimerWheel::<8>::new(1_000).unwrap();
    w.arm(TimerId(1), u64::MAX).unwrap();
    w.arm(TimerId(2), 1u64 << 50).unwrap();
    w.arm(TimerId(3), 5_000).unwrap();
    w.arm(TimerId(4), (1u64 << 50) + 1).unwrap();
    assert_eq!(w.next_deadline(), Some(5_000));
    assert_eq!(w.poll_expired(1 << 49).map(|e| e.id), Some(TimerId(3)));
    assert_eq!(w.poll_expired(1 << 49), None);
    assert_eq!(
        w.next_deadline(),
        Some(1_125_899_906_843_000),
        "rounded up to the tick"
    );
    assert_eq!(w.poll_expired(u64::MAX - 1).map(|e| e.id), Some(TimerId(2)));
    assert_eq!(w.poll_expired(u64::MAX - 1).map(|e| e.id), Some(TimerId(4)));
    // 1000 does not divide u64::MAX: that deadline's tick ends after the end of time, so it
    // never fires (firing it would be early).
    assert_eq!(w.poll_expired(u64::MAX), None);
    assert_eq!(w.len(), 1);
    assert_eq!(w.next_deadline(), Some(u64::MAX));
    let mut exact = TimerWheel::<2>::new(1).unwrap();
    exact.arm(TimerId(5), u64::MAX).unwrap();
    assert_eq!(exact.poll_expired(u64::MAX).map(|e| e.id), Some(TimerId(5)));
}

#[test]
fn past_deadlines_fire_at_next_poll_and_time_never_goes_back() {
    let mut w = TimerWheel::<4>::new(10).unwrap();
    assert_eq!(w.poll_expired(1_000), None);
    w.arm(TimerId(9), 5).unwrap();
    assert_eq!(w.counters().armed_in_past, 1);
    assert_eq!(
        w.poll_expired(0).map(|e| e.id),
        Some(TimerId(9)),
        "earlier now = previous now"
    );
}

#[derive(Clone, Debug)]
enum Op {
    /// Arm at now + delta (or now - delta when `past`).
    Arm { delta: u64, past: bool },
    /// Cancel the live timer at this position (mod live count).
    Cancel(usize),
    /// Cancel a handle that is known to be stale.
    CancelStale(usize),
    /// Advance time and drain.
    Advance(u64),
    /// Work out the next deadline ahead of time.
    Settle,
}

fn op(tick: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..tick * 80).prop_map(|d| Op::Arm { delta: d, past: false }),
        2 => (0..tick * 5_000).prop_map(|d| Op::Arm { delta: d, past: false }),
        1 => (0..tick << 26).prop_map(|d| Op::Arm { delta: d, past: false }),
        1 => (0..tick * 10).prop_map(|d| Op::Arm { delta: d, past: true }),
        2 => any::<usize>().prop_map(Op::Cancel),
        1 => any::<usize>().prop_map(Op::CancelStale),
        1 => Just(Op::Settle),
        3 => (0..tick * 70).prop_map(Op::Advance),
        1 => (0..tick * 300_000).prop_map(Op::Advance),
        1 => (0..tick << 27).prop_map(Op::Advance),
    ]
}

fn scenario() -> impl Strategy<Value = (u64, Vec<Op>)> {
    prop_oneof![Just(1u64), Just(7), Just(1_000), Just(1_024)]
        .prop_flat_map(|tick| (Just(tick), proptest::collection::vec(op(tick), 1..300)))
}

/// Run `ops` on the wheel and on a BTreeMap model: same expiries in the same order, never
/// early, never later than the first poll at or after the deadline's tick, same next deadline.
fn check_against_model(tick: u64, ops: Vec<Op>, planted_bug: bool) -> Result<(), TestCaseError> {
    const CAP: usize = 64;
    let mut w = TimerWheel::<CAP>::new(tick).unwrap();
    w.planted_tie_bug = planted_bug;
    // (deadline, seq) -> (id, handle)
    let mut model: BTreeMap<(u64, u64), (u32, TimerHandle, u64)> = BTreeMap::new();
    let mut polls = 0u64;
    let mut stale: Vec<TimerHandle> = Vec::new();
    let mut now = 0u64;
    let mut prev_poll = 0u64;
    let mut seq = 0u64;
    let mut next_id = 0u32;
    let due_tick = |d: u64| d / tick + u64::from(!d.is_multiple_of(tick));
    for op in ops {
        match op {
            Op::Arm { delta, past } => {
                let d = if past {
                    now.saturating_sub(delta)
                } else {
                    now.saturating_add(delta)
                };
                let r = w.arm(TimerId(next_id), d);
                if model.len() == CAP {
                    prop_assert_eq!(
                        r,
                        Err(TimerError::Full {
                            capacity: CAP as u32
                        })
                    );
                } else {
                    let h = r.unwrap();
                    model.insert((d, seq), (next_id, h, polls));
                    seq += 1;
                    next_id += 1;
                }
            }
            Op::Cancel(i) => {
                if model.is_empty() {
                    continue;
                }
                let key = *model.keys().nth(i % model.len()).unwrap();
                let (id, h, _) = model.remove(&key).unwrap();
                prop_assert_eq!(w.cancel(h), Ok(TimerId(id)));
                stale.push(h);
            }
            Op::Settle => w.settle(),
            Op::CancelStale(i) => {
                if stale.is_empty() {
                    continue;
                }
                let h = stale[i % stale.len()];
                prop_assert_eq!(w.cancel(h), Err(TimerError::StaleHandle));
            }
            Op::Advance(delta) => {
                now = now.saturating_add(delta);
                let now_tick = now / tick;
                let expect: Vec<(u64, u64)> = model
                    .keys()
                    .copied()
                    .filter(|&(d, _)| due_tick(d) <= now_tick)
                    .collect();
                let mut got = Vec::new();
                while let Some(e) = w.poll_expired(now) {
                    got.push(e);
                    prop_assert!(got.len() <= CAP);
                }
                prop_assert_eq!(got.len(), expect.len());
                for (e, key) in got.iter().zip(expect.iter()) {
                    let (id, h, armed_at_poll) = model.remove(key).unwrap();
                    prop_assert_eq!(e.id, TimerId(id));
                    prop_assert_eq!(e.deadline_ns, key.0);
                    prop_assert!(e.deadline_ns <= now, "early");
                    // Not late: unless it was armed since the previous poll, it was not
                    // due then, so at most one tick (minus 1 ns) separates its deadline
                    // from the first poll that could report it.
                    if armed_at_poll < polls {
                        prop_assert!(due_tick(e.deadline_ns) > prev_poll / tick, "late");
                        prop_assert!(prev_poll < e.deadline_ns.saturating_add(tick));
                    }
                    stale.push(h);
                }
                // Nothing that is a full tick overdue is left.
                if let Some(&(d, _)) = model.keys().next() {
                    prop_assert!(
                        d.saturating_add(tick) > now,
                        "late timer left: {d} now {now}"
                    );
                }
                prev_poll = now;
                polls += 1;
            }
        }
        prop_assert_eq!(w.len(), model.len());
        let expect_next = model
            .keys()
            .next()
            .map(|&(d, _)| due_tick(d).saturating_mul(tick));
        prop_assert_eq!(w.next_deadline(), expect_next);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn matches_btreemap_model((tick, ops) in scenario()) {
        check_against_model(tick, ops, false)?;
    }
}

/// The model check is not vacuous: a wheel that reverses equal-deadline ties is caught.
#[test]
fn model_check_catches_a_planted_tie_bug() {
    let ops = vec![
        Op::Arm {
            delta: 10,
            past: false,
        },
        Op::Arm {
            delta: 10,
            past: false,
        },
        Op::Advance(20),
    ];
    assert!(check_against_model(1, ops.clone(), false).is_ok());
    assert!(check_against_model(1, ops, true).is_err());
}

/// `next_deadline` after a timer armed in the past was polled out of the ready list, with no
/// poll since: the next timer outside it, not the polled one's instant.
#[test]
fn next_deadline_after_a_past_timer_left_the_ready_list() {
    let mut w = TimerWheel::<4>::new(1).unwrap();
    w.arm(TimerId(0), 50).unwrap();
    // (a cancelled earlier timer leaves a stale bound: the poll looks and finds 50 next)
    let h = w.arm(TimerId(9), 8).unwrap();
    w.cancel(h).unwrap();
    assert_eq!(w.poll_expired(10), None);
    assert_eq!(w.next_deadline(), Some(50));
    w.arm(TimerId(1), 5).unwrap();
    assert_eq!(w.next_deadline(), Some(5));
    assert_eq!(w.poll_expired(10).map(|e| e.id), Some(TimerId(1)));
    assert_eq!(w.next_deadline(), Some(50));
    // A cancel leaves the wheel to look again.
    let h = w.arm(TimerId(2), 20).unwrap();
    assert_eq!(w.next_deadline(), Some(20));
    w.cancel(h).unwrap();
    assert_eq!(w.next_deadline(), Some(50));
}
