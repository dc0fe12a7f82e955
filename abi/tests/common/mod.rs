//! Helpers shared by the integration tests that drive external tools.

use std::process::Command;

/// True when `tool` runs (`tool ARGS` exits 0). When it does not: in CI (`CI` set) the calling
/// test fails, elsewhere it prints a skip message naming the tool and returns false, and the
/// caller returns without checking anything.
pub fn tool_or_skip(tool: &str, version_args: &[&str], install_hint: &str) -> bool {
    let ok = Command::new(tool)
        .args(version_args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is required in CI but was not found ({install_hint})"
        );
        eprintln!("SKIPPED: {tool} not found; install it ({install_hint}) to run this check");
    }
    ok
}
