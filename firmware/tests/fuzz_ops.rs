//! Stateful fuzzing of two NICs (stage + engine each) with proptest: arbitrary byte strings
//! decode into NIC input sequences (`mrc_firmware::testkit::fuzz_ops`), which must never panic nor break an invariant.
//! cargo-fuzz drives the same `run_ops` with its own inputs.

use mrc_firmware::testkit::fuzz_ops::{decode_ops, run_ops, Op};
use proptest::prelude::*;

mod common;
use common::on_pair_stack;

#[test]
fn a_plain_exchange_keeps_the_invariants() {
    // Post a few writes both ways, pump and deliver repeatedly, advance time.
    let mut data = Vec::new();
    for nic in 0..2u8 {
        data.extend_from_slice(&[2, nic]); // post a receive buffer
        for len in [100u16, 700, 0, 1500] {
            data.extend_from_slice(&[0, nic, (len >> 8) as u8, len as u8, 1]);
        }
    }
    for _ in 0..30 {
        data.extend_from_slice(&[3, 4, 200, 10, 0, 10, 2]);
    }
    let mut ops = 0;
    decode_ops(&data, |_| ops += 1);
    assert!(ops > 60);
    on_pair_stack(move || run_ops(&data)).expect("invariants hold");
}

#[test]
fn decoding_is_total() {
    let mut seen = [false; 16];
    for (tag, sub) in (0..=255u8).flat_map(|t| (0..8u8).map(move |s| (t, s))) {
        decode_ops(&[tag, sub, 0xff, 0xff], |op| {
            let i = match op {
                Op::Post { .. } => 0,
                Op::PostRecv { .. } => 1,
                Op::Pump => 2,
                Op::Deliver { .. } => 3,
                Op::Drop => 4,
                Op::Duplicate => 5,
                Op::Trim { .. } => 6,
                Op::Reorder => 7,
                Op::Advance { .. } => 8,
                Op::PlaneDown { .. } => 9,
                Op::PlaneUp { .. } => 10,
                Op::Modify { .. } => 11,
                Op::Deny { .. } | Op::Allow { .. } => 12,
                Op::Garbage { .. } => 13,
                Op::ForgedEvent { .. } => 14,
                Op::ForgedCommand { .. } => 15,
            };
            seen[i] = true;
        });
    }
    assert!(seen.iter().all(|&s| s), "{seen:?}");
}

#[test]
fn arbitrary_op_sequences_never_panic_or_break_invariants() {
    on_pair_stack(|| {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 96,
            ..ProptestConfig::default()
        });
        // Bias towards pump/deliver so traffic actually flows between the garbage.
        let op_bytes = prop_oneof![
            3 => proptest::collection::vec(any::<u8>(), 1..8),
            2 => Just(vec![3u8, 4, 64]),
            1 => Just(vec![10u8, 0x10, 0, 4]),
        ];
        let strategy = proptest::collection::vec(op_bytes, 0..300).prop_map(|v| v.concat());
        runner
            .run(&strategy, |data| {
                prop_assert_eq!(run_ops(&data), Ok(()));
                Ok(())
            })
            .unwrap();
    });
}

/// Inputs cargo-fuzz found breaking an invariant, replayed for good (one file each in
/// `tests/fuzz_regressions/`).
#[test]
fn fuzz_regressions_keep_the_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("regression directory") {
        let path = e.expect("entry").path();
        let data = std::fs::read(&path).expect("regression input");
        let name = path.display().to_string();
        let r = on_pair_stack(move || run_ops(&data));
        assert_eq!(r, Ok(()), "{name}");
        n += 1;
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}
