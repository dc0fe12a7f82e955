//! Build the QEMU self-test image (two NICs' engines exchanging a few thousand checked messages
//! over lossy, reordering planes with a plane failure), run it under
//! `qemu-system-riscv32 -icount shift=0`, decode its defmt output and require: exit status 0, a
//! clean decode, a `self-test passed` record, and the two-NIC counters record.
//!
//! Skips (with a message) when QEMU or the riscv32 target is missing, unless `CI` is set, where
//! a missing tool is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

fn image_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../firmware/image")
}

fn skip_or_fail(why: &str) {
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false") {
        panic!("qemu self-test cannot run in CI: {why}");
    }
    eprintln!("SKIPPED qemu self-test: {why}");
}

#[test]
fn qemu_self_test_passes() {
    if Command::new("qemu-system-riscv32")
        .arg("--version")
        .output()
        .is_err()
    {
        return skip_or_fail("qemu-system-riscv32 not found");
    }
    let targets = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(image_dir())
        .output();
    let has_target = targets
        .as_ref()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("riscv32imac-unknown-none-elf"));
    if !has_target {
        return skip_or_fail("rust target riscv32imac-unknown-none-elf not installed");
    }
    let build = Command::new("cargo")
        .args(["build", "--release", "--features", "qemu"])
        .current_dir(image_dir())
        // The self-test build has its own target dir inside the image workspace (as `just qemu`).
        .env("CARGO_TARGET_DIR", "target/qemu")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTFLAGS")
        .env("DEFMT_LOG", "info")
        .status()
        .expect("cargo build");
    assert!(build.success(), "image build failed");
    let elf = image_dir().join("target/qemu/riscv32imac-unknown-none-elf/release/mrc-nic");
    let out = Command::new("timeout")
        .arg("300")
        .arg(image_dir().join("qemu-run"))
        .arg(&elf)
        .output()
        .expect("run qemu");
    let dec = decode(&elf, &out.stdout);
    let text = String::from_utf8_lossy(&dec.stdout);
    println!("{text}");
    assert!(out.status.success(), "QEMU exited with {:?}", out.status);
    assert!(dec.status.success(), "defmt decode error");
    assert!(
        text.lines().any(|l| l == "INFO self-test passed"),
        "no `self-test passed` record"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("INFO two NICs: ") && l.contains(" messages, ")),
        "no two-NIC counters record"
    );
    // The decode-error check can fire: a stream cut mid-frame and a garbled one are refused.
    let cut = decode(&elf, &out.stdout[..out.stdout.len() - 1]);
    assert!(
        !cut.status.success(),
        "a stream cut mid-frame must not decode"
    );
    let mut garbled = out.stdout.clone();
    for b in garbled.iter_mut().take(64) {
        *b = b.wrapping_add(0x5b) | 1;
    }
    assert!(
        !decode(&elf, &garbled).status.success(),
        "garbage must not decode"
    );
}

fn decode(elf: &Path, stream: &[u8]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mrc-defmt-dec"))
        .arg(elf)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(stream)?;
            child.wait_with_output()
        })
        .expect("run mrc-defmt-dec")
}
