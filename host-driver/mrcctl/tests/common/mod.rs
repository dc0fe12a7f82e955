//! Running the `mrcctl` binary from the integration tests.

use std::process::{Command, Output};

/// Runs `mrcctl` with `args` and returns its output.
pub fn mrcctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mrcctl"))
        .args(args)
        .output()
        .expect("run mrcctl")
}

/// The JSON `mrcctl --json` printed; fails (with its stderr) if it did not succeed.
pub fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("stdout is only JSON")
}
