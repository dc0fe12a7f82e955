//! Every RTL block lints clean under `verilator --lint-only -Wall`, parses in Yosys
//! (`read_verilog -sv`, as `scripts/synth.sh` reads it) and compiles, with every bench, under
//! `iverilog -g2012`. A missing tool prints `SKIPPED: <tool> not found` (fails when `CI` is set).

use mrc_rtl_cosim::skip_missing;
use std::path::{Path, PathBuf};
use std::process::Command;

const BLOCKS: [&str; 4] = [
    "ev_sprayer",
    "rx_psn_tracker",
    "csr_event_queue",
    "hdr_builder",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fpga-rtl")
        .to_path_buf()
}

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn check(cmd: &mut Command, what: &str) {
    let o = cmd.output().expect("run tool");
    assert!(
        o.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn verilator_lints_every_block_clean() {
    if skip_missing("verilator", have("verilator", "--version")) {
        return;
    }
    let r = root();
    for b in BLOCKS {
        check(
            Command::new("verilator")
                .args(["--lint-only", "-Wall"])
                .arg(format!("-I{}", r.join("rtl").display()))
                .arg(r.join("generated/mrc_abi_pkg.sv"))
                .arg(r.join(format!("rtl/{b}.sv"))),
            &format!("verilator --lint-only -Wall {b}"),
        );
    }
}

#[test]
fn yosys_reads_every_block() {
    if skip_missing("yosys", have("yosys", "-V")) {
        return;
    }
    let r = root();
    for b in BLOCKS {
        let script = format!(
            "read_verilog -sv -I{rtl} {pkg} {rtl}/{b}.sv; hierarchy -top {b}",
            rtl = r.join("rtl").display(),
            pkg = r.join("generated/mrc_abi_pkg.sv").display()
        );
        check(
            Command::new("yosys").args(["-q", "-p", &script]),
            &format!("yosys read_verilog {b}"),
        );
    }
}

#[test]
fn iverilog_compiles_every_block_and_bench() {
    if skip_missing("iverilog", have("iverilog", "-V")) {
        return;
    }
    let r = root();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lint.vvp");
    let mut cmd = Command::new("iverilog");
    cmd.arg("-g2012")
        .arg(format!("-I{}", r.join("rtl").display()))
        .arg("-o")
        .arg(&out)
        .arg(r.join("generated/mrc_abi_pkg.sv"));
    for b in BLOCKS {
        cmd.arg(r.join(format!("rtl/{b}.sv")));
        cmd.arg(r.join(format!("tb/tb_{b}.sv")));
    }
    check(&mut cmd, "iverilog -g2012 (all blocks and benches)");
}
