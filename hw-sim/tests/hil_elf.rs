//! The `elf` firmware level held to the `native` one on the `hil` scenario (8 hosts, 4
//! planes, all-to-all, a link failure): the NIC image's main loop compiled natively and the
//! `mrc-nic` ELF on emulated cores, behind the same datapath models and set up through the
//! same admin commands, must deliver the same bytes and give the same completions; a bug
//! planted in the ELF's main loop (the image's `planted-bug` feature: of several DP->FW
//! entries an iteration reads, the last is consumed unseen) must make them differ.
//!
//! Needs the `elf` feature (`just elf-hil-test`); builds the NIC image: without the
//! riscv32imac target it prints `SKIPPED: ...` and passes, unless `CI` is set.
#![cfg(feature = "elf")]

use mrc_sim::hil::{differences, run_level, HilRun, Level, LEVELS};
use mrc_sim::nic::{DatapathLevel, FirmwareLevel};

fn level(firmware: FirmwareLevel) -> &'static Level {
    LEVELS
        .iter()
        .find(|l| l.firmware == firmware && l.datapath == DatapathLevel::Model)
        .expect("the level is listed")
}

/// The image built with `feature` (None: the NIC build), or `None` after `SKIPPED`.
fn image(test: &str, feature: Option<&str>) -> Option<&'static std::path::Path> {
    if let Some(why) = mrc_elfcore::build::missing_target() {
        assert!(std::env::var_os("CI").is_none(), "{test}: {why}");
        println!("SKIPPED: {test}: {why}");
        return None;
    }
    let p = mrc_elfcore::build::nic_image(feature).unwrap_or_else(|e| panic!("{test}: {e}"));
    Some(Box::leak(p.into_boxed_path()))
}

/// The native run, checked to be worth comparing: every flow completed through the link
/// failure, with retransmissions.
fn native() -> HilRun {
    let want = run_level(level(FirmwareLevel::Native), None).expect("native run");
    assert!(
        want.outcome.iter().all(|f| f.completed && !f.failed),
        "every flow completed at the native level"
    );
    assert!(want.row.delivered_bytes > 0);
    want
}

#[test]
fn the_elf_level_delivers_what_the_native_level_delivers() {
    let test = "the_elf_level_delivers_what_the_native_level_delivers";
    let Some(elf) = image(test, None) else { return };
    let want = native();
    let got = run_level(level(FirmwareLevel::Elf), Some(elf)).expect("elf run");
    if let Some(d) = differences(&want, &got) {
        panic!("{d}");
    }
    let guest = got
        .guest_instructions
        .expect("the elf level counts guest instructions");
    assert!(guest > 0);
    assert_eq!(want.guest_instructions, None);
    println!(
        "elf level: {} guest instructions in {:.2} s of wall time: {:.1} M/s (native {:.3} s)",
        guest,
        got.row.wall_s,
        got.row.guest_instructions_per_s.unwrap_or(0.0) / 1e6,
        want.row.wall_s
    );
}

#[test]
fn the_differential_catches_a_bug_planted_in_the_elf_main_loop() {
    let test = "the_differential_catches_a_bug_planted_in_the_elf_main_loop";
    let Some(bad) = image(test, Some("planted-bug")) else {
        return;
    };
    let want = native();
    let got = run_level(level(FirmwareLevel::Elf), Some(bad)).expect("elf run");
    let d = differences(&want, &got);
    assert!(d.is_some(), "the planted bug went unseen");
    println!("the planted bug: {}", d.unwrap_or_default());
}
