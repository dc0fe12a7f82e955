//! The plain SystemVerilog benches of `fpga-rtl/tb/` under Icarus Verilog: each compiles with
//! `iverilog -g2012`, runs with `vvp` and must print its `PASS` line; each must also fail against
//! the block's planted-bug variant (`-DPLANTED_BUG`), so a bench that checks nothing cannot pass.
//! Without Icarus the tests print `SKIPPED: iverilog not found` (and fail when `CI` is set).
//! `hdr_vectors_are_fresh` checks `tb/vectors/` against the Rust model (no Icarus needed);
//! `MRC_BLESS=1` rewrites them.

use mrc_rtl_cosim::{hdr, skip_missing};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Seed and random-descriptor count of `tb/vectors/hdr_builder_*.hex`.
const VECTOR_SEED: u64 = 0x4d52_4331;
const VECTOR_RANDOM: usize = 130;

fn rtl_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fpga-rtl")
        .to_path_buf()
}

fn have_icarus() -> bool {
    ["iverilog", "vvp"].iter().all(|t| {
        Command::new(t)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Compile and run bench `tb` with RTL block `block`: (passed, output).
fn run_bench(tb: &str, block: &str, bug: bool) -> (bool, String) {
    let root = rtl_root();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("icarus");
    std::fs::create_dir_all(&out).expect("tmp dir");
    let vvp = out.join(format!("{tb}{}.vvp", if bug { "_bug" } else { "" }));
    let mut cc = Command::new("iverilog");
    cc.arg("-g2012")
        .arg(format!("-I{}", root.join("rtl").display()))
        .arg("-o")
        .arg(&vvp);
    if bug {
        cc.arg("-DPLANTED_BUG");
    }
    cc.arg(root.join("generated/mrc_abi_pkg.sv"))
        .arg(root.join(format!("rtl/{block}.sv")))
        .arg(root.join(format!("tb/{tb}.sv")));
    let c = cc.output().expect("run iverilog");
    assert!(
        c.status.success(),
        "iverilog failed on {tb}:\n{}",
        String::from_utf8_lossy(&c.stderr)
    );
    let r = Command::new("vvp")
        .arg("-n")
        .arg(&vvp)
        .arg(format!("+vectors={}", root.join("tb/vectors").display()))
        .output()
        .expect("run vvp");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    let pass = text.lines().any(|l| l.starts_with(&format!("PASS {tb}")));
    (r.status.success() && pass, text)
}

fn bench(tb: &str, block: &str) {
    if skip_missing("iverilog", have_icarus()) {
        return;
    }
    let (ok, text) = run_bench(tb, block, false);
    assert!(ok, "{tb} did not pass:\n{text}");
    for l in text.lines().filter(|l| l.starts_with("PASS")) {
        println!("{l}");
    }
    let (bug_ok, bug_text) = run_bench(tb, block, true);
    assert!(!bug_ok, "{tb} passed against the planted bug:\n{bug_text}");
    let why = bug_text
        .lines()
        .find(|l| l.contains("FATAL") || l.contains("FAIL"))
        .unwrap_or("no PASS line");
    println!("{tb} planted bug caught: {why}");
}

#[test]
fn tb_ev_sprayer_passes() {
    bench("tb_ev_sprayer", "ev_sprayer");
}
#[test]
fn tb_hdr_builder_passes() {
    bench("tb_hdr_builder", "hdr_builder");
}
#[test]
fn tb_csr_event_queue_passes() {
    bench("tb_csr_event_queue", "csr_event_queue");
}
#[test]
fn tb_rx_psn_tracker_passes() {
    bench("tb_rx_psn_tracker", "rx_psn_tracker");
}

#[test]
fn hdr_vectors_are_fresh() {
    let dir = rtl_root().join("tb/vectors");
    let (desc, hdr) = hdr::vectors(VECTOR_SEED, VECTOR_RANDOM);
    let files = [
        (dir.join("hdr_builder_desc.hex"), desc),
        (dir.join("hdr_builder_hdr.hex"), hdr),
    ];
    if std::env::var_os("MRC_BLESS").is_some() {
        std::fs::create_dir_all(&dir).expect("vectors dir");
        for (path, text) in &files {
            std::fs::write(path, text).expect("write vectors");
        }
    }
    for (path, text) in &files {
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == *text,
            "{} is stale: regenerate with MRC_BLESS=1 cargo test -p mrc-rtl-cosim --test icarus",
            path.display()
        );
    }
}
