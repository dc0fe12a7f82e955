//! The NIC image for the tests: `cargo build --release` in `firmware/image` (the NIC build,
//! `just firmware`'s, into `firmware/image/target`, so a built image is reused).
//!
//! Needs the `riscv32imac-unknown-none-elf` Rust target: without it a test prints
//! `SKIPPED: ...` and passes, unless `CI` is set (then it fails).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn image_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../firmware/image")
}

/// A command run in the image's directory with its own toolchain file in charge.
fn in_image(program: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(image_dir()).env_remove("RUSTUP_TOOLCHAIN");
    c
}

fn missing_target() -> Option<String> {
    let sysroot = in_image("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let ok = sysroot.is_some_and(|s| s.join("lib/rustlib/riscv32imac-unknown-none-elf").is_dir());
    (!ok).then(|| {
        "the riscv32imac-unknown-none-elf target is not installed \
         (rustup target add riscv32imac-unknown-none-elf)"
            .to_string()
    })
}

/// The NIC image's bytes, built now; `None` (after printing `SKIPPED`) when the target is
/// missing and `CI` is unset.
pub fn nic_image(test: &str) -> Option<Vec<u8>> {
    if let Some(why) = missing_target() {
        assert!(std::env::var_os("CI").is_none(), "{test}: {why}");
        println!("SKIPPED: {test}: {why}");
        return None;
    }
    let build = in_image("cargo")
        .args(["build", "--release"])
        .env("CARGO_TARGET_DIR", "target")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        build.status.success(),
        "building the NIC image failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let path = image_dir().join("target/riscv32imac-unknown-none-elf/release/mrc-nic");
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}
