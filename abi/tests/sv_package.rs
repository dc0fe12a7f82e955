//! The generated SystemVerilog package is accepted by the three tools the RTL must satisfy:
//! Verilator (lint, -Wall), Icarus (-g2012) and Yosys (read_verilog -sv). Each tool is required
//! in CI and skipped with a message elsewhere.
#![cfg(feature = "std")]

mod common;

use std::path::PathBuf;
use std::process::Command;

/// A module that uses the package the way the RTL does: explicit `mrc_abi_pkg::` names (Yosys
/// 0.23 rejects `import pkg::*`).
const USER: &str = r#"
module pkg_user (
    input  logic        clk,
    input  logic [7:0]  opcode,
    output logic        is_ack
);
    always_ff @(posedge clk) is_ack <= (opcode == mrc_abi_pkg::BTH_OPCODE_ACK);
endmodule
"#;

/// Writes the package and the user module into a directory of the calling test's own: the tests
/// run in parallel, and a shared directory let one test rewrite a file another tool was reading.
fn files(test: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("mrc-sv-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pkg = dir.join("mrc_abi_pkg.sv");
    std::fs::write(&pkg, mrc_abi::gen::systemverilog()).unwrap();
    let user = dir.join("pkg_user.sv");
    std::fs::write(&user, USER).unwrap();
    (pkg, user)
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn verilator_lints_the_package_clean() {
    if !common::tool_or_skip("verilator", &["--version"], "apt-get install verilator") {
        return;
    }
    let (pkg, user) = files("verilator");
    run(Command::new("verilator")
        .args(["--lint-only", "-Wall", "--top-module", "pkg_user"])
        .arg(&pkg)
        .arg(&user));
}

#[test]
fn icarus_compiles_the_package() {
    if !common::tool_or_skip("iverilog", &["-V"], "apt-get install iverilog") {
        return;
    }
    let (pkg, user) = files("icarus");
    let out = pkg.with_extension("vvp");
    run(Command::new("iverilog")
        .args(["-g2012", "-o"])
        .arg(&out)
        .arg(&pkg)
        .arg(&user));
}

#[test]
fn yosys_reads_the_package() {
    if !common::tool_or_skip("yosys", &["-V"], "apt-get install yosys") {
        return;
    }
    let (pkg, user) = files("yosys");
    let script = format!(
        "read_verilog -sv {} {}; hierarchy -top pkg_user; proc",
        pkg.display(),
        user.display()
    );
    run(Command::new("yosys").args(["-q", "-p", &script]));
}
