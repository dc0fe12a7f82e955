//! The firmware cores' cost table (`mrc_sim::nic::fw_cost`) held to the NIC image's
//! measurements: builds the image for QEMU (`cargo build --release --features qemu` in
//! `firmware/image`, into `firmware/image/target/qemu`, the target dir `just qemu` and
//! `just fw-cost` use, so a built image is reused), runs its fw-cost measurement under
//! `qemu-system-riscv32 -icount shift=0` as `just fw-cost` does, and compares every figure the
//! table holds with the measured one: each must be within `fw_cost::TOLERANCE_PERCENT` of the
//! measurement, and every kind the table charges without a measurement must still be absent
//! from the measured stream.
//!
//! Needs `qemu-system-riscv32` and the `riscv32imac-unknown-none-elf` Rust target: without
//! them it prints `SKIPPED: ...` and passes, unless `CI` is set (then it fails).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mrc_sim::nic::fw_cost;
use serde_json::Value;

/// The QEMU run of both fw-cost streams takes seconds; a hang fails well before this.
const QEMU_LIMIT: Duration = Duration::from_secs(600);

fn image_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware/image")
}

/// A command run in the image's directory with its own toolchain file in charge.
fn in_image(program: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(image_dir()).env_remove("RUSTUP_TOOLCHAIN");
    c
}

/// What is missing to run the measurement, if anything.
fn missing_tool() -> Option<String> {
    let qemu = Command::new("qemu-system-riscv32")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !qemu {
        return Some(
            "qemu-system-riscv32 not found (apt-get install qemu-system-misc)".to_string(),
        );
    }
    let sysroot = in_image("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let target =
        sysroot.is_some_and(|s| s.join("lib/rustlib/riscv32imac-unknown-none-elf").is_dir());
    if !target {
        return Some(
            "the riscv32imac-unknown-none-elf target is not installed \
             (rustup target add riscv32imac-unknown-none-elf)"
                .to_string(),
        );
    }
    None
}

/// Builds the QEMU image and returns the fw-cost JSON it writes.
fn measure() -> Value {
    // (the same environment as the QEMU self-test's build in tools/defmt-dec, so the two
    // share one build)
    let build = in_image("cargo")
        .args(["build", "--release", "--features", "qemu"])
        .env("CARGO_TARGET_DIR", "target/qemu")
        .env_remove("RUSTFLAGS")
        .env("DEFMT_LOG", "info")
        .output()
        .expect("cargo runs");
    assert!(
        build.status.success(),
        "building the NIC image for QEMU failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let elf = image_dir().join("target/qemu/riscv32imac-unknown-none-elf/release/mrc-nic");
    let err = std::env::temp_dir().join(format!("mrc-fw-cost-{}.json", std::process::id()));
    let mut qemu = Command::new(image_dir().join("qemu-run"))
        .arg(&elf)
        .arg("fw-cost")
        .stdin(Stdio::null())
        // (the defmt log on stdout is not needed here: `just fw-cost` decodes it)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("temp file"))
        .spawn()
        .expect("qemu starts");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = qemu.try_wait().expect("qemu status") {
            break s;
        }
        if start.elapsed() > QEMU_LIMIT {
            let _ = qemu.kill();
            panic!("fw-cost under QEMU ran longer than {QEMU_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&err).expect("fw-cost output");
    let _ = std::fs::remove_file(&err);
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON from fw-cost (QEMU {status}):\n{text}"));
    let v: Value = serde_json::from_str(line).expect("fw-cost JSON");
    // The stream must have run whole for its figures to mean anything.
    assert_eq!(v["failed"], false, "the fw-cost stream failed: {line}");
    assert!(
        v["delivered_packets"].as_u64().is_some_and(|n| n > 0),
        "{line}"
    );
    v
}

/// `table` within the tolerance of `measured`.
fn within(measured: u64, table: u32) -> bool {
    let table = u64::from(table);
    measured.abs_diff(table) * 100 <= measured * fw_cost::TOLERANCE_PERCENT
}

#[test]
fn the_cost_table_matches_the_images_minstret_measurements() {
    if let Some(why) = missing_tool() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{why}, and CI must run this test"
        );
        println!("SKIPPED: {why}");
        return;
    }
    let v = measure();
    let mut rows: Vec<(String, u64, u32)> = Vec::new();
    let mut bad = Vec::new();
    for e in fw_cost::EVENTS {
        let m = &v["events"][e.name];
        if m.is_null() {
            // (fw-cost does not report this kind at all: charged without a measurement)
            assert!(!e.measured, "fw-cost reports no `{}`", e.name);
            continue;
        }
        let count = m["count"].as_u64().expect("count");
        if !e.measured {
            if count > 0 {
                bad.push(format!(
                    "{}: the stream now has {count} of them ({} instructions each): measured, \
                     so put it in the table",
                    e.name, m["instructions_per_event"]
                ));
            }
            continue;
        }
        assert!(count > 0, "{}: the stream has none to measure", e.name);
        let per = m["instructions_per_event"].as_u64().expect("per event");
        rows.push((format!("event {}", e.name), per, e.instructions));
    }
    let get = |a: &str, b: &str| {
        v[a][b]
            .as_u64()
            .unwrap_or_else(|| panic!("fw-cost JSON lacks {a}.{b}"))
    };
    rows.push((
        "timer fired".into(),
        get("timer", "instructions_per_timer"),
        fw_cost::TIMER_FIRED,
    ));
    rows.push((
        "timer check (idle)".into(),
        get("timer", "instructions_per_idle_call"),
        fw_cost::TIMER_CHECK,
    ));
    rows.push((
        "FW->DP command".into(),
        get("commands", "instructions_per_command"),
        fw_cost::COMMAND,
    ));
    println!(
        "fw cost: measured (guest instructions, minstret under QEMU) vs table, tolerance {} %",
        fw_cost::TOLERANCE_PERCENT
    );
    for (name, measured, table) in &rows {
        let ok = within(*measured, *table);
        println!(
            "  {name:<22} {measured:>6} {table:>6}  {}",
            if ok { "ok" } else { "OUT" }
        );
        if !ok {
            bad.push(format!(
                "{name}: measured {measured}, table {table} (more than {} % apart)",
                fw_cost::TOLERANCE_PERCENT
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "hw-sim/src/nic/fw_cost.rs no longer matches the image (update it from `just \
         fw-cost`):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_tolerance_is_relative_to_the_measurement() {
    assert!(within(100, 110) && within(100, 90));
    assert!(!within(100, 111) && !within(100, 89));
    assert!(within(0, 0) && !within(0, 1));
}
