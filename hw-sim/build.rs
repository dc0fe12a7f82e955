//! Provenance for reports: the git commit this crate is built from (`unknown` without git).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").args(args).output().ok()?;
    if !o.status.success() {
        return None;
    }
    let s = String::from_utf8(o.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=MRC_SIM_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // Rebuild when HEAD moves: HEAD itself (checkout), and the branch it names (commit), loose
    // or packed. Paths are absolute (git prints them so from a worktree) or relative to here.
    // Only existing files: cargo reruns the script on every build for a missing one.
    let watch = |path: String| {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    };
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch(format!("{dir}/HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        watch(format!("{common}/packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(format!("{common}/{branch}"));
        }
    }
}
