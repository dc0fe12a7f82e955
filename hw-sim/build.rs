//! Provenance for reports: the git commit this crate is built from (`unknown` without git).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=MRC_SIM_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves (best effort: the paths exist in a normal checkout or worktree).
    if let Ok(o) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
    {
        if let Ok(dir) = String::from_utf8(o.stdout) {
            let dir = dir.trim();
            if !dir.is_empty() {
                println!("cargo:rerun-if-changed={dir}/HEAD");
                println!("cargo:rerun-if-changed={dir}/refs");
            }
        }
    }
}
