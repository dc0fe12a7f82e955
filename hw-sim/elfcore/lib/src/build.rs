//! Building the NIC image from this source tree: `cargo build --release` in `firmware/image`
//! (its own workspace and toolchain file), as `just firmware` does, into
//! `firmware/image/target` (a feature build into `target/<feature>`), so a built image is
//! reused.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The image's directory in this source tree.
pub fn image_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../firmware/image")
}

/// A command run in the image's directory with its own toolchain file in charge.
fn in_image(program: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(image_dir()).env_remove("RUSTUP_TOOLCHAIN");
    c
}

/// What is missing to build the image, if anything (the riscv32 Rust target).
pub fn missing_target() -> Option<String> {
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

/// Builds the image (with `feature` of the image crate, if given) and returns the ELF's path.
///
/// # Errors
/// Cargo could not run or the build failed (its stderr).
pub fn nic_image(feature: Option<&str>) -> Result<PathBuf, String> {
    let dir = match feature {
        None => "target".to_string(),
        Some(f) => format!("target/{f}"),
    };
    let mut cmd = in_image("cargo");
    cmd.args(["build", "--release"]);
    if let Some(f) = feature {
        cmd.args(["--features", f]);
    }
    let out = cmd
        .env("CARGO_TARGET_DIR", &dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the NIC image failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(image_dir()
        .join(dir)
        .join("riscv32imac-unknown-none-elf/release/mrc-nic"))
}
