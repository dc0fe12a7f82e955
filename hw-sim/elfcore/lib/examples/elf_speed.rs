//! Speed of the `elf` firmware level: guest instructions the emulated core retires per second
//! of wall time, against the native main loop on the same run.
//!
//! Builds the NIC image, then runs the differential test's two-NIC stream (the datapath
//! model behind each NIC's rings, writes over wires dropping every 7th data packet and every
//! 5th ACK) with `MESSAGES` writes, five times at each level, once with each firmware
//! iterating every round (a polling core: mostly empty iterations) and once only in rounds
//! with work and every 16th (a core woken by work; its timers checked every 16 us), and
//! prints medians:
//! - the whole run's wall time, native and elf, and their ratio;
//! - at the elf level, the wall time inside `ElfCore::step` (the emulated iterations, the
//!   bridge's ring copies included) and the guest instructions per second of it;
//! - an idle core (no traffic): instructions per second of empty main-loop iterations.
//!
//! `cargo run --release -p mrc-elfcore --example elf_speed [idle]` (`idle`: the idle core
//! alone, for profiling the core's fixed cost per iteration).

#[path = "../tests/twonic/mod.rs"]
mod twonic;

use std::time::{Duration, Instant};

use mrc_elfcore::{build, CoreConfig, ElfCore};
use twonic::*;

const MESSAGES: u64 = 2_000;
const ROUNDS: u64 = 120_000;
const REPEATS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if let Some(why) = build::missing_target() {
        eprintln!("{why}");
        std::process::exit(2);
    }
    let path = build::nic_image(None).unwrap_or_else(|e| panic!("{e}"));
    let image = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));

    if std::env::args().nth(1).as_deref() != Some("idle") {
        stream(&image, 1);
        stream(&image, 16);
    }
    idle(&image);
}

fn stream(image: &[u8], poll: u64) {
    let mut native_s = Vec::new();
    let mut elf_s = Vec::new();
    let mut core_s = Vec::new();
    let mut rate = Vec::new();
    let mut per_iter = 0.0;
    for _ in 0..REPEATS {
        let t = Instant::now();
        let (want, _) = run(native(), native(), MESSAGES, ROUNDS, poll);
        native_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let (got, fws) = run(elf(image), elf(image), MESSAGES, ROUNDS, poll);
        elf_s.push(t.elapsed().as_secs_f64());
        assert_eq!(want.log, got.log, "the two levels differ");
        assert_eq!(got.sent_cqes, MESSAGES as usize, "every write completed");
        let instr: u64 = fws.iter().map(|f| f.runs.iter().sum::<u64>()).sum();
        let iters: usize = fws.iter().map(|f| f.runs.len()).sum();
        let wall: Duration = fws.iter().map(|f| f.wall).sum();
        core_s.push(wall.as_secs_f64());
        rate.push(instr as f64 / wall.as_secs_f64());
        per_iter = instr as f64 / iters as f64;
    }
    let (n, e) = (median(native_s), median(elf_s));
    println!(
        "two NICs, {MESSAGES} writes, {ROUNDS} rounds, an iteration in a round with work or \
         every {poll} (medians of {REPEATS}):\n  \
         whole run: native {n:.3} s, elf {e:.3} s ({:.1}x)\n  \
         inside ElfCore::step: {:.3} s, {per_iter:.0} guest instructions per iteration, \
         {:.1} M guest instructions/s",
        e / n,
        median(core_s),
        median(rate) / 1e6
    );
}

fn idle(image: &[u8]) {
    let mut idle = Vec::new();
    for _ in 0..REPEATS {
        let mut core = ElfCore::boot(image, CoreConfig::DEFAULT).expect("boots");
        let before = core.retired();
        let t = Instant::now();
        for k in 0..200_000u64 {
            core.run(k * 1_000).expect("runs");
        }
        idle.push((core.retired() - before) as f64 / t.elapsed().as_secs_f64());
    }
    println!(
        "idle core, 200000 empty iterations (medians of {REPEATS}): {:.1} M guest instructions/s",
        median(idle) / 1e6
    );
}
