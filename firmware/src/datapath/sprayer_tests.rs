use super::*;
use proptest::prelude::*;
use std::vec::Vec;

extern crate std;

type S = Sprayer<16, 4>;

fn ev(weight: u8, plane: u8) -> EvSlot {
    EvSlot {
        usable: true,
        weight,
        plane,
        skip_once: false,
    }
}

fn picks<const N: usize, const P: usize>(s: &mut Sprayer<N, P>, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| s.next_ev().map(|p| p.index).unwrap_or(u16::MAX))
        .collect()
}

#[test]
fn empty_table_gives_none_and_counts() {
    let mut s = S::new();
    assert_eq!(s.next_ev(), None);
    assert_eq!(s.next_ev(), None);
    assert_eq!(s.counters().no_usable, 2);
    assert_eq!(s.counters().picks, 0);
}

#[test]
fn interleaved_weights_on_one_plane() {
    let mut s = S::new();
    s.set_ev(0, ev(1, 0)).unwrap();
    s.set_ev(1, ev(2, 0)).unwrap();
    s.set_ev(2, ev(3, 0)).unwrap();
    assert_eq!(picks(&mut s, 12), [0, 1, 2, 1, 2, 2, 0, 1, 2, 1, 2, 2]);
}

#[test]
fn planes_alternate_and_report_plane() {
    let mut s = S::new();
    s.set_ev(0, ev(1, 0)).unwrap();
    s.set_ev(1, ev(1, 0)).unwrap();
    s.set_ev(5, ev(1, 2)).unwrap();
    let got: Vec<(u16, u8)> = (0..6)
        .map(|_| s.next_ev().map(|p| (p.index, p.plane)).unwrap())
        .collect();
    assert_eq!(got, [(0, 0), (5, 2), (1, 0), (5, 2), (0, 0), (5, 2)]);
}

#[test]
fn plane_weights_share_capacity() {
    let mut s = S::new();
    s.set_ev(0, ev(1, 0)).unwrap();
    s.set_ev(1, ev(1, 1)).unwrap();
    s.set_plane_weight(0, 3).unwrap();
    let got = picks(&mut s, 8);
    assert_eq!(got, [0, 1, 0, 0, 0, 1, 0, 0]);
    s.set_plane_weight(0, 0).unwrap();
    assert_eq!(picks(&mut s, 3), [1, 1, 1]);
}

#[test]
fn skip_once_passes_over_once() {
    let mut s = S::new();
    s.set_ev(0, ev(1, 0)).unwrap();
    s.set_ev(1, ev(1, 0)).unwrap();
    s.mark_skip(0).unwrap();
    assert_eq!(picks(&mut s, 4), [1, 0, 1, 0]);
    assert_eq!(s.counters().skips, 1);
    assert!(!s.ev(0).unwrap().skip_once);
}

#[test]
fn skip_on_only_ev_still_picks_it() {
    let mut s = S::new();
    s.set_ev(3, ev(2, 1)).unwrap();
    s.mark_skip(3).unwrap();
    assert_eq!(picks(&mut s, 3), [3, 3, 3]);
    assert_eq!(s.counters().skips, 1);
}

#[test]
fn bad_writes_are_refused_and_counted() {
    let mut s = S::new();
    assert_eq!(
        s.set_ev(16, ev(1, 0)),
        Err(SprayerError::IndexOutOfRange { index: 16 })
    );
    assert_eq!(
        s.set_ev(0, ev(0, 0)),
        Err(SprayerError::BadWeight { weight: 0 })
    );
    assert_eq!(
        s.set_ev(0, ev(16, 0)),
        Err(SprayerError::BadWeight { weight: 16 })
    );
    assert_eq!(
        s.set_ev(0, ev(1, 4)),
        Err(SprayerError::BadPlane { plane: 4 })
    );
    assert_eq!(
        s.set_plane_weight(4, 1),
        Err(SprayerError::BadPlane { plane: 4 })
    );
    assert_eq!(
        s.set_plane_weight(0, 16),
        Err(SprayerError::BadWeight { weight: 16 })
    );
    assert_eq!(
        s.mark_skip(99),
        Err(SprayerError::IndexOutOfRange { index: 99 })
    );
    assert_eq!(
        s.set_usable(0, true),
        Err(SprayerError::BadWeight { weight: 0 })
    );
    assert_eq!(s.set_usable(0, false), Ok(()));
    assert_eq!(s.counters().bad_writes, 8);
    assert_eq!(s.ev(0), Some(EvSlot::default()));
}

#[test]
fn unusable_then_usable_again() {
    let mut s = S::new();
    s.set_ev(0, ev(1, 0)).unwrap();
    s.set_ev(1, ev(1, 0)).unwrap();
    s.set_usable(0, false).unwrap();
    assert_eq!(s.usable_on_plane(0), 1);
    assert_eq!(picks(&mut s, 3), [1, 1, 1]);
    s.set_usable(0, true).unwrap();
    assert_eq!(s.usable_on_plane(0), 2);
    let got = picks(&mut s, 4);
    assert_eq!(got.iter().filter(|&&i| i == 0).count(), 2);
}

#[test]
fn moving_an_ev_between_planes_updates_both() {
    let mut s = S::new();
    s.set_ev(0, ev(1, 0)).unwrap();
    s.set_ev(0, ev(1, 3)).unwrap();
    assert_eq!(s.usable_on_plane(0), 0);
    assert_eq!(s.usable_on_plane(3), 1);
    assert_eq!(s.next_ev(), Some(EvPick { index: 0, plane: 3 }));
}

#[test]
fn full_size_table_works() {
    let mut s: Sprayer<256, 8> = Sprayer::new();
    for i in 0..256u16 {
        s.set_ev(i, ev((i % 15) as u8 + 1, (i % 8) as u8)).unwrap();
    }
    let got = picks(&mut s, 10_000);
    assert!(got.iter().all(|&i| i < 256));
}

#[derive(Debug, Clone)]
enum Op {
    Set(u16, EvSlot),
    Usable(u16, bool),
    Skip(u16),
    PlaneWeight(u8, u8),
    Pick,
}

fn slot_strategy() -> impl Strategy<Value = EvSlot> {
    (any::<bool>(), 1u8..=15, 0u8..4, any::<bool>()).prop_map(|(usable, weight, plane, skip)| {
        EvSlot {
            usable,
            weight,
            plane,
            skip_once: skip,
        }
    })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0u16..18, slot_strategy()).prop_map(|(i, s)| Op::Set(i, s)),
        1 => (0u16..18, any::<bool>()).prop_map(|(i, u)| Op::Usable(i, u)),
        1 => (0u16..18).prop_map(Op::Skip),
        1 => (0u8..5, 0u8..17).prop_map(|(p, w)| Op::PlaneWeight(p, w)),
        8 => Just(Op::Pick),
    ]
}

/// Ops on a table of 3 slots over 2 planes (one index and one plane out of range for the
/// tiny sizes below).
fn tiny_op_strategy() -> impl Strategy<Value = Op> {
    let slot = (any::<bool>(), 1u8..=3, 0u8..2, any::<bool>()).prop_map(
        |(usable, weight, plane, skip_once)| EvSlot {
            usable,
            weight,
            plane,
            skip_once,
        },
    );
    prop_oneof![
        1 => (0u16..3, slot).prop_map(|(i, s)| Op::Set(i, s)),
        1 => (0u16..3, any::<bool>()).prop_map(|(i, u)| Op::Usable(i, u)),
        1 => (0u16..3).prop_map(Op::Skip),
        1 => (0u8..3, 0u8..4).prop_map(|(p, w)| Op::PlaneWeight(p, w)),
        6 => Just(Op::Pick),
    ]
}

proptest! {
    #[test]
    fn shares_follow_weights_and_planes_balance(
        table in proptest::collection::vec(slot_strategy(), 16),
        rounds in 50usize..200,
    ) {
        let mut s = S::new();
        for (i, slot) in table.iter().enumerate() {
            s.set_ev(i as u16, EvSlot { skip_once: false, ..*slot }).unwrap();
        }
        let n = rounds * 4;
        let mut per_ev = [0u64; 16];
        let mut per_plane = [0u64; 4];
        for _ in 0..n {
            match s.next_ev() {
                Some(pick) => {
                    let slot = table[pick.index as usize];
                    prop_assert!(slot.usable, "unusable EV {} picked", pick.index);
                    prop_assert_eq!(slot.plane, pick.plane);
                    per_ev[pick.index as usize] += 1;
                    per_plane[pick.plane as usize] += 1;
                }
                None => prop_assert!(table.iter().all(|s| !s.usable)),
            }
        }
        // Planes with a usable EV differ by at most one pick; the others get none.
        let active: Vec<u64> = (0..4u8)
            .filter(|&p| table.iter().any(|s| s.usable && s.plane == p))
            .map(|p| per_plane[p as usize])
            .collect();
        if let (Some(min), Some(max)) = (active.iter().min(), active.iter().max()) {
            prop_assert!(max - min <= 1, "plane counts {:?}", per_plane);
        }
        // Within a plane, each EV's share is its weight's share, within one IWRR cycle.
        for p in 0..4u8 {
            let total_w: u64 = table.iter().filter(|s| s.usable && s.plane == p)
                .map(|s| u64::from(s.weight)).sum();
            for (i, slot) in table.iter().enumerate() {
                if slot.plane != p {
                    continue;
                }
                if !slot.usable {
                    prop_assert_eq!(per_ev[i], 0);
                    continue;
                }
                let expect = per_plane[p as usize] * u64::from(slot.weight);
                let got = per_ev[i] * total_w;
                prop_assert!(got.abs_diff(expect) <= total_w * u64::from(slot.weight),
                    "ev {} got {} of {} on plane {}", i, per_ev[i], per_plane[p as usize], p);
            }
        }
    }

    #[test]
    fn plane_weights_give_proportional_shares(
        weights in proptest::collection::vec(0u8..=15, 4),
        cycles in 5u64..40,
    ) {
        let mut s = S::new();
        for p in 0..4u8 {
            s.set_ev(u16::from(p), ev(1, p)).unwrap();
            s.set_plane_weight(p, weights[p as usize]).unwrap();
        }
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut per_plane = [0u64; 4];
        for _ in 0..(cycles * total.max(1)) {
            match s.next_ev() {
                Some(pick) => per_plane[pick.plane as usize] += 1,
                None => prop_assert_eq!(total, 0),
            }
        }
        for p in 0..4 {
            // Whole IWRR cycles: exact shares.
            prop_assert_eq!(per_plane[p], cycles * u64::from(weights[p]));
        }
    }

    #[test]
    fn skip_once_removes_exactly_one_pick(
        table in proptest::collection::vec(slot_strategy(), 16),
        victim in 0u16..16,
        warmup in 0usize..40,
    ) {
        let mut a = S::new();
        for (i, slot) in table.iter().enumerate() {
            a.set_ev(i as u16, EvSlot { skip_once: false, ..*slot }).unwrap();
        }
        let mut b = a.clone();
        let warm_a = picks(&mut a, warmup);
        let warm_b = picks(&mut b, warmup);
        prop_assert_eq!(warm_a, warm_b);
        b.mark_skip(victim).unwrap();
        // Enough for a full IWRR cycle (<= 16 * 15 picks) on every plane (>= n / 4 picks each).
        let n = 1100;
        let plain: Vec<EvPick> = (0..n).filter_map(|_| a.next_ev()).collect();
        let skipped: Vec<EvPick> = (0..n).filter_map(|_| b.next_ev()).collect();
        let slot = table[victim as usize];
        // The plane sequence is unchanged, and on each plane the skipped run equals the plain
        // run with the victim's first pick removed.
        for p in 0..4u8 {
            let mut pa: Vec<u16> = plain.iter().filter(|x| x.plane == p).map(|x| x.index).collect();
            let pb: Vec<u16> = skipped.iter().filter(|x| x.plane == p).map(|x| x.index).collect();
            prop_assert_eq!(pa.len(), pb.len());
            if slot.usable && slot.plane == p {
                let first = pa.iter().position(|&i| i == victim).unwrap();
                pa.remove(first);
                prop_assert_eq!(&pa[..], &pb[..pa.len()]);
            } else {
                prop_assert_eq!(pa, pb);
            }
        }
        if slot.usable {
            prop_assert_eq!(b.counters().skips, 1);
            prop_assert!(!b.ev(victim).unwrap().skip_once);
        } else {
            prop_assert_eq!(b.counters().skips, 0);
            prop_assert!(b.ev(victim).unwrap().skip_once);
        }
    }

    #[test]
    fn random_ops_never_pick_unusable_and_are_deterministic(
        ops in proptest::collection::vec(op_strategy(), 1..300),
    ) {
        let run = |ops: &[Op]| {
            let mut s = S::new();
            let mut out = Vec::new();
            for op in ops {
                match *op {
                    Op::Set(i, slot) => { let _ = s.set_ev(i, slot); }
                    Op::Usable(i, u) => { let _ = s.set_usable(i, u); }
                    Op::Skip(i) => { let _ = s.mark_skip(i); }
                    Op::PlaneWeight(p, w) => { let _ = s.set_plane_weight(p, w); }
                    Op::Pick => {
                        let any_eligible = (0..4u8).any(|p| {
                            s.usable_on_plane(p) > 0 && s.plane_weight(p).unwrap() > 0
                        });
                        let pick = s.next_ev();
                        assert_eq!(pick.is_some(), any_eligible);
                        if let Some(pick) = pick {
                            let slot = s.ev(pick.index).unwrap();
                            assert!(slot.usable);
                            assert_eq!(slot.plane, pick.plane);
                            assert!(s.plane_weight(pick.plane).unwrap() > 0);
                        }
                        out.push(pick);
                    }
                }
            }
            (out, s.counters())
        };
        prop_assert_eq!(run(&ops), run(&ops));
    }
}

/// The module docs' algorithm written as plain scans over the slot table (no chains, no fast
/// path): the sprayer must make exactly its picks.
struct Reference<const N: usize, const P: usize> {
    slots: [EvSlot; N],
    plane_weight: [u8; P],
    plane_cursor: usize,
    plane_round: u8,
    ev_cursor: [usize; P],
    ev_round: [u8; P],
}

impl<const N: usize, const P: usize> Reference<N, P> {
    fn new() -> Self {
        Reference {
            slots: [EvSlot::default(); N],
            plane_weight: [1; P],
            plane_cursor: 0,
            plane_round: 1,
            ev_cursor: [0; P],
            ev_round: [1; P],
        }
    }

    fn set_ev(&mut self, i: u16, slot: EvSlot) {
        if (1..=WEIGHT_MAX).contains(&slot.weight) && usize::from(slot.plane) < P {
            if let Some(s) = self.slots.get_mut(usize::from(i)) {
                *s = slot;
            }
        }
    }

    fn set_usable(&mut self, i: u16, usable: bool) {
        let Some(s) = self.slots.get(usize::from(i)).copied() else {
            return;
        };
        if usable {
            self.set_ev(i, EvSlot { usable, ..s });
        } else if let Some(s) = self.slots.get_mut(usize::from(i)) {
            s.usable = false;
        }
    }

    fn eligible(&self, p: usize) -> u8 {
        let any = self
            .slots
            .iter()
            .any(|s| s.usable && usize::from(s.plane) == p);
        if any {
            self.plane_weight[p]
        } else {
            0
        }
    }

    fn next(&mut self) -> Option<EvPick> {
        let max = (0..P).map(|p| self.eligible(p)).max().unwrap_or(0);
        if max == 0 {
            return None;
        }
        let plane = loop {
            if self.plane_cursor >= P {
                self.plane_cursor = 0;
                self.plane_round = next_round(self.plane_round, max);
            }
            let p = self.plane_cursor;
            self.plane_cursor += 1;
            if self.eligible(p) >= self.plane_round {
                break p;
            }
        };
        let max_ev = self
            .slots
            .iter()
            .filter(|s| s.usable && usize::from(s.plane) == plane)
            .map(|s| s.weight)
            .max()
            .unwrap_or(0);
        loop {
            if self.ev_cursor[plane] >= N {
                self.ev_cursor[plane] = 0;
                self.ev_round[plane] = next_round(self.ev_round[plane], max_ev);
            }
            let round = self.ev_round[plane];
            let found = (self.ev_cursor[plane]..N).find(|&i| {
                let s = self.slots[i];
                s.usable && usize::from(s.plane) == plane && s.weight >= round
            });
            let Some(i) = found else {
                self.ev_cursor[plane] = N;
                continue;
            };
            self.ev_cursor[plane] = i + 1;
            if self.slots[i].skip_once {
                self.slots[i].skip_once = false;
                continue;
            }
            return Some(EvPick {
                index: i as u16,
                plane: plane as u8,
            });
        }
    }
}

/// Runs `ops` on a sprayer and on the [`Reference`]: the same picks, and the same slots as
/// firmware reads them back after every step.
fn check_against_reference<const N: usize, const P: usize>(
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut s = Sprayer::<N, P>::new();
    let mut r = Reference::<N, P>::new();
    for op in ops.iter().cloned() {
        match op {
            Op::Set(i, slot) => {
                let _ = s.set_ev(i, slot);
                r.set_ev(i, slot);
            }
            Op::Usable(i, u) => {
                let _ = s.set_usable(i, u);
                r.set_usable(i, u);
            }
            Op::Skip(i) => {
                let _ = s.mark_skip(i);
                if let Some(slot) = r.slots.get_mut(usize::from(i)) {
                    slot.skip_once = true;
                }
            }
            Op::PlaneWeight(p, w) => {
                let _ = s.set_plane_weight(p, w);
                if w <= WEIGHT_MAX {
                    if let Some(pw) = r.plane_weight.get_mut(usize::from(p)) {
                        *pw = w;
                    }
                }
            }
            Op::Pick => prop_assert_eq!(s.next_ev(), r.next()),
        }
        for (i, slot) in r.slots.iter().enumerate() {
            prop_assert_eq!(s.ev(i as u16), Some(*slot));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn picks_match_the_plain_scan_reference(
        ops in proptest::collection::vec(op_strategy(), 1..400),
    ) {
        check_against_reference::<16, 4>(&ops)?;
    }

    /// A table size that is not a power of two (no index masking) and a plane the ops cannot
    /// use (plane 3 is refused).
    #[test]
    fn picks_match_the_plain_scan_reference_odd_sizes(
        ops in proptest::collection::vec(op_strategy(), 1..400),
    ) {
        check_against_reference::<13, 3>(&ops)?;
    }

    /// The smallest tables (one slot: every pick wraps its plane's chain).
    #[test]
    fn picks_match_the_plain_scan_reference_tiny_sizes(
        ops in proptest::collection::vec(tiny_op_strategy(), 1..200),
    ) {
        check_against_reference::<1, 1>(&ops)?;
        check_against_reference::<2, 2>(&ops)?;
    }
}
