//! The core's resets on the `mrc-nic` ELF: the watchdog biting an iteration longer than its
//! period, and a trap (an instruction the core refuses) taken into the image's own handler,
//! which writes its crash record and resets the core through `SW_RESET`. After either the
//! image boots again with the `NOINIT` block kept, and its main loop runs.
//!
//! Builds the NIC image (`tests/build`): without the riscv32imac target it prints
//! `SKIPPED: ...` and passes, unless `CI` is set.

mod build;

use mrc_elfcore::device::{RESET_CAUSE_POWER_ON, RESET_CAUSE_SOFTWARE, RESET_CAUSE_WATCHDOG};
use mrc_elfcore::{CoreConfig, ElfCore, Stop};
use mrc_nic_board::crash::CrashReason;

#[test]
fn the_watchdog_bites_a_long_iteration_and_the_core_boots_again() {
    let Some(image) = build::nic_image("the_watchdog_bites_a_long_iteration") else {
        return;
    };
    // A core fast enough for the image's 50 ms period: iterations never bite.
    let mut core = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    assert_eq!(core.device().reset_cause, RESET_CAUSE_POWER_ON);
    for k in 1..100 {
        assert_eq!(core.run(k * 1_000).unwrap().stop, Stop::Iteration);
    }
    assert_eq!(core.boots(), 1);

    // A core retiring 1000 instructions a second: the 50 ms period is 50 instructions, less
    // than an empty iteration takes once the boot started the watchdog.
    let slow = CoreConfig {
        instructions_per_s: 1_000,
        ..CoreConfig::DEFAULT
    };
    let mut core = ElfCore::boot(&image, slow).unwrap();
    let before = core.retired();
    let run = core.run(1_000).unwrap();
    assert_eq!(run.stop, Stop::Watchdog);
    // The period runs out before the iteration ends: at most one period (and the translated
    // block it ends in) into the run, wherever in the iteration the loop kicks.
    assert!(
        run.instructions > 0 && run.instructions <= 50 + 16,
        "bit within one period of the iteration: {run:?}"
    );
    assert!(run.boot > 0, "booted again");
    assert_eq!(core.retired(), before + run.instructions + run.boot);
    assert_eq!(core.boots(), 2);
    assert_eq!(core.device().reset_cause, RESET_CAUSE_WATCHDOG);
    // A hardware reset: no crash record.
    assert_eq!(core.crash_record().unwrap(), None);
    // It keeps biting, and keeps coming back.
    assert_eq!(core.run(2_000).unwrap().stop, Stop::Watchdog);
    assert_eq!(core.boots(), 3);
}

#[test]
fn a_trap_runs_the_image_handler_which_records_the_crash_and_resets() {
    let Some(image) = build::nic_image("a_trap_runs_the_image_handler") else {
        return;
    };
    let mut core = ElfCore::boot(&image, CoreConfig::DEFAULT).unwrap();
    assert_eq!(core.run(1_000).unwrap().stop, Stop::Iteration);
    assert_eq!(core.crash_record().unwrap(), None);
    // The core stopped at the top of the main loop: an all-zero halfword there is an
    // illegal instruction.
    let top = core.pc();
    core.write_mem(top, &[0, 0]).unwrap();
    let run = core.run(2_000).unwrap();
    assert_eq!(run.stop, Stop::SoftwareReset, "the handler reset the core");
    assert_eq!(core.traps(), 1);
    assert!(run.boot > 0);
    assert_eq!(core.boots(), 2);
    assert_eq!(core.device().reset_cause, RESET_CAUSE_SOFTWARE);
    // The record survived the reset in NOINIT: an exception, mcause 2 (illegal instruction),
    // at the instruction planted.
    let c = core.crash_record().unwrap().expect("a crash record");
    assert_eq!(c.reason, CrashReason::Exception);
    assert_eq!((c.line_or_cause, c.mepc), (2, top));
    // The reset loaded the image again: the loop runs.
    for k in 3..20 {
        assert_eq!(core.run(k * 1_000).unwrap().stop, Stop::Iteration);
    }
}
