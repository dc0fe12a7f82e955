//! The `elf` firmware level held to the native one: two NICs, each the datapath model behind
//! its rings with the image's main loop as firmware, run once with `NicLoop::step_admin`
//! compiled natively and once with the `mrc-nic` ELF on the emulated core (`ElfCore::step`),
//! from the same admin commands (CQs, PDs, QPs through RESET -> INIT -> RTR -> RTS, a
//! remotely writable region) and the same traffic (64 writes over a wire that drops data
//! packets and ACKs). Every FW->DP entry each firmware wrote and the round it was written
//! in, every host write the datapath passed on, every admin reply and every placed payload
//! must be equal; each emulated iteration must retire instructions. The same comparison must
//! catch a bug planted in the ELF's main loop (the image's `planted-bug` feature).
//!
//! Builds the NIC image (`tests/build`): without the riscv32imac target it prints
//! `SKIPPED: ...` and passes, unless `CI` is set.

mod build;
mod twonic;

use mrc_abi::device::csr::{CsrEntry, CsrKind};
use twonic::*;

/// The first entry where two logs differ, decoded, for the failure message.
fn first_difference(what: &str, native: &[CsrEntry], elf: &[CsrEntry]) -> Option<String> {
    let i = native.iter().zip(elf).position(|(a, b)| a != b);
    match i {
        Some(i) => Some(format!(
            "{what}: entry {i} differs: native {:?}, elf {:?}",
            native[i].decode(),
            elf[i].decode()
        )),
        None if native.len() != elf.len() => Some(format!(
            "{what}: native wrote {} entries, elf {}",
            native.len(),
            elf.len()
        )),
        None => None,
    }
}

/// Where the ELF's run differs from the native one's, if anywhere.
fn differences(want: &Outcome, got: &Outcome) -> Option<String> {
    for (i, name) in ["A", "B"].iter().enumerate() {
        let fw = format!("NIC {name} FW->DP");
        if let Some(d) = first_difference(&fw, &want.log[i], &got.log[i]) {
            return Some(d);
        }
        if let Some(r) = (0..want.marks[i].len()).find(|&r| want.marks[i][r] != got.marks[i][r]) {
            return Some(format!(
                "NIC {name} FW->DP: by round {r} native wrote {} entries, elf {}",
                want.marks[i][r], got.marks[i][r]
            ));
        }
        let host = format!("NIC {name} host writes");
        if let Some(d) = first_difference(&host, &want.host[i], &got.host[i]) {
            return Some(d);
        }
        if want.replies[i] != got.replies[i] {
            return Some(format!("NIC {name} admin replies differ"));
        }
    }
    (want.placed != got.placed).then(|| "payload placed at B differs".to_string())
}

/// The native run, checked to be worth comparing: every write completed through losses,
/// retransmissions and timeouts, with CQEs on the host side.
fn native_run() -> Outcome {
    let (want, _) = run(native(), native(), MESSAGES, ROUNDS, 1);
    assert_eq!(want.sent_cqes, MESSAGES as usize, "every write completed");
    let kinds =
        |log: &[CsrEntry], k: CsrKind| log.iter().filter(|e| e.kind_code() == k as u8).count();
    let resent =
        kinds(&want.log[0], CsrKind::Retransmit) + kinds(&want.log[0], CsrKind::RetransmitUnacked);
    assert!(resent > 0, "losses were repaired");
    assert!(
        kinds(&want.log[0], CsrKind::WindowUpdate) > 0,
        "congestion control ran"
    );
    want
}

#[test]
fn the_elf_main_loop_writes_what_the_native_one_writes() {
    let Some(image) = build::nic_image("the_elf_main_loop_writes_what_the_native_one_writes")
    else {
        return;
    };
    let want = native_run();
    let t = std::time::Instant::now();
    let (got, fws) = run(elf(&image), elf(&image), MESSAGES, ROUNDS, 1);
    let wall = t.elapsed();
    if let Some(d) = differences(&want, &got) {
        panic!("{d}");
    }

    // Every iteration retired instructions; the counts add up to the core's.
    let mut total = 0;
    for f in &fws {
        assert!(
            f.runs.iter().all(|&n| n > 0),
            "an iteration retired nothing"
        );
        assert!(f.core.boot_instructions() > 0);
        let sum: u64 = f.runs.iter().sum();
        assert_eq!(f.core.retired(), f.core.boot_instructions() + sum);
        assert_eq!(f.core.runs(), f.runs.len() as u64);
        assert_eq!(f.core.bridge_counters(), Default::default());
        let d = f.core.device().counters;
        assert_eq!((d.unknown_reads, d.unknown_writes, d.bad_kicks), (0, 0, 0));
        // (the boot's `watchdog_start` kicks once)
        assert_eq!(
            d.kicks,
            f.runs.len() as u64 + 1,
            "a watchdog kick per iteration"
        );
        assert_eq!(
            f.core.device().wdt_timeout_ns,
            50_000_000,
            "the image's period"
        );
        total += f.core.retired();
    }
    println!(
        "elf level: {} iterations, {total} guest instructions in {:.3} s of wall time \
         (with the datapath models): {:.1} M instructions/s",
        fws[0].runs.len() + fws[1].runs.len(),
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64() / 1e6
    );
}

#[test]
fn the_differential_catches_a_bug_planted_in_the_elf_main_loop() {
    let Some(image) =
        build::planted_bug_image("the_differential_catches_a_bug_planted_in_the_elf_main_loop")
    else {
        return;
    };
    let want = native_run();
    let (got, _) = run(elf(&image), elf(&image), MESSAGES, ROUNDS, 1);
    let d = differences(&want, &got);
    assert!(d.is_some(), "the planted bug went unseen");
    println!("the planted bug: {}", d.unwrap_or_default());
}
