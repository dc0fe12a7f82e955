//! The committed generated files must equal what the generators produce.
#![cfg(feature = "std")]

use std::path::PathBuf;

fn check(path: PathBuf, want: String) {
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale (differs from what mrc-abi generates): run `just regs` \
         (cargo run -p mrc-abi --features std --example regs) and commit the result",
        path.display()
    );
}

#[test]
fn systemverilog_package_is_fresh() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    check(
        root.join("fpga-rtl/generated/mrc_abi_pkg.sv"),
        mrc_abi::gen::systemverilog(),
    );
}

#[test]
fn registers_markdown_is_fresh() {
    let abi = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    check(abi.join("REGISTERS.md"), mrc_abi::gen::registers_markdown());
}
