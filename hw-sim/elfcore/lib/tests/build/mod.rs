//! The NIC image for the tests (`mrc_elfcore::build`): without the riscv32imac target a test
//! prints `SKIPPED: ...` and passes, unless `CI` is set (then it fails).
#![allow(dead_code)]

use mrc_elfcore::build;

fn image(test: &str, feature: Option<&str>) -> Option<Vec<u8>> {
    if let Some(why) = build::missing_target() {
        assert!(std::env::var_os("CI").is_none(), "{test}: {why}");
        println!("SKIPPED: {test}: {why}");
        return None;
    }
    let path = build::nic_image(feature).unwrap_or_else(|e| panic!("{test}: {e}"));
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// The NIC image's bytes, built now; `None` (after printing `SKIPPED`) when the target is
/// missing and `CI` is unset.
pub fn nic_image(test: &str) -> Option<Vec<u8>> {
    image(test, None)
}

/// The NIC image with its main loop's planted bug (`--features planted-bug`); `None` as
/// [`nic_image`].
pub fn planted_bug_image(test: &str) -> Option<Vec<u8>> {
    image(test, Some("planted-bug"))
}

/// The NIC image that hangs after boot (`--features planted-hang`); `None` as [`nic_image`].
pub fn hang_image(test: &str) -> Option<Vec<u8>> {
    image(test, Some("planted-hang"))
}
