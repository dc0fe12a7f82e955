//! Cores running one image share an engine (its translated code) and take turns on it: each
//! core's registers and DTCM are its own, so two cores run in turns compute and count exactly
//! what each computes alone, before and after the one that keeps switching gets an engine of
//! its own; and the shared code is read-only to the guest.
//!
//! Builds the NIC image (`tests/build`): without the riscv32imac target it prints
//! `SKIPPED: ...` and passes, unless `CI` is set.

mod build;

use mrc_elfcore::{CoreConfig, ElfCore, ElfError};

/// Iterations each core runs: past the switches after which a core gets its own engine.
const RUNS: u64 = 1_500;

/// What a core did: instructions and pc after each iteration, and its DTCM at the end.
fn trace(core: &mut ElfCore, period_ns: u64, k: u64, out: &mut Vec<(u64, u32)>) {
    let run = core.run(k * period_ns).unwrap();
    out.push((run.instructions + run.boot, core.pc()));
}

fn dtcm(core: &ElfCore) -> Vec<u8> {
    let m = core.map().clone();
    let mut ram = vec![0u8; (m.dtcm.len + m.noinit.len) as usize];
    core.read_mem(m.dtcm.origin, &mut ram).unwrap();
    ram
}

#[test]
fn cores_taking_turns_on_one_engine_run_as_each_alone() {
    let Some(image) = build::nic_image("cores_taking_turns_on_one_engine") else {
        return;
    };
    // Two cores in turns, at different times: their timers fire in different iterations.
    let mut a = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    let mut b = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    assert!(a.shares_engine_with(&b), "one image: one engine");
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for k in 1..=RUNS {
        trace(&mut a, 1_000, k, &mut ta);
        trace(&mut b, 3_700, k, &mut tb);
    }
    assert!(
        !a.shares_engine_with(&b),
        "after {RUNS} turns each, one of them runs on an engine of its own"
    );
    assert_ne!(ta, tb, "the two cores ran differently");

    // Each alone, one after the other.
    let (mut la, mut lb) = (Vec::new(), Vec::new());
    let mut alone = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    for k in 1..=RUNS {
        trace(&mut alone, 1_000, k, &mut la);
    }
    let (alone_a, alone_a_retired) = (dtcm(&alone), alone.retired());
    drop(alone);
    let mut alone = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    for k in 1..=RUNS {
        trace(&mut alone, 3_700, k, &mut lb);
    }
    assert_eq!(ta, la, "core a in turns = core a alone");
    assert_eq!(tb, lb, "core b in turns = core b alone");
    assert_eq!(dtcm(&a), alone_a, "core a's DTCM");
    assert_eq!(dtcm(&b), dtcm(&alone), "core b's DTCM");
    assert_eq!(a.retired(), alone_a_retired);
    assert_eq!(b.retired(), alone.retired());
}

#[test]
fn a_guest_store_into_the_shared_code_faults_and_leaves_it_alone() {
    let Some(image) = build::nic_image("a_guest_store_into_the_shared_code") else {
        return;
    };
    let mut a = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    let b = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    let mut word = [0u8; 4];
    b.read_mem(0, &mut word).unwrap();
    // `sw zero, 0(zero)` at the top of a's main loop: a store into the ITCM. Planting it
    // gives a code of its own; the store faults.
    let top = a.pc();
    a.write_mem(top, &0x0000_2023u32.to_le_bytes()).unwrap();
    assert!(
        !a.shares_engine_with(&b),
        "planted code runs on its own engine"
    );
    match a.run(1_000) {
        Err(ElfError::Fault { pc, .. }) => assert_eq!(pc, top),
        other => panic!("the store should fault: {other:?}"),
    }
    let mut after = [0u8; 4];
    b.read_mem(0, &mut after).unwrap();
    assert_eq!(after, word, "the shared code is as loaded");
}
