//! Verilates every RTL block twice (as is, and with `-DPLANTED_BUG`) and links the generated C++
//! with the shim in `csrc/shim.cpp`. Without Verilator the build still succeeds and sets
//! `cfg(no_verilator)`: the tests then report a skip (or fail when `CI` is set).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The blocks at their co-simulation parameters (class prefix `V<block>`).
const BLOCKS: [&str; 4] = [
    "ev_sprayer",
    "rx_psn_tracker",
    "csr_event_queue",
    "hdr_builder",
];

/// The blocks again at the simulator's parameters (`mrc_rtl_cosim::sim`: the NIC of `mrc-sim`
/// has 8 planes, a 512-PSN receive window, a 256-entry event queue): (top module, class
/// prefix tag `V<block>_<tag>`, parameter override, the define of the planted-bug variant if
/// it has one). (`hdr_builder` runs at its co-simulation parameters.)
const SIM_BLOCKS: [(&str, &str, &str, Option<&str>); 3] = [
    ("ev_sprayer", "p8", "P=8", Some("PLANTED_BUG_PLANE")),
    ("rx_psn_tracker", "w8", "WORDS=8", Some("PLANTED_BUG_SACK")),
    ("csr_event_queue", "e256", "LOG2_ENTRIES=8", None),
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_verilator)");
    println!("cargo:rerun-if-env-changed=VERILATOR");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let rtl_root = manifest.parent().expect("fpga-rtl").to_path_buf();
    let rtl = rtl_root.join("rtl");
    let pkg = rtl_root.join("generated").join("mrc_abi_pkg.sv");
    println!("cargo:rerun-if-changed={}", rtl.display());
    println!("cargo:rerun-if-changed={}", pkg.display());
    println!("cargo:rerun-if-changed=csrc/shim.cpp");
    let verilator = env::var("VERILATOR").unwrap_or_else(|_| "verilator".into());
    let root = Command::new(&verilator)
        .arg("--getenv")
        .arg("VERILATOR_ROOT")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let Some(root) = root else {
        println!("cargo:warning=verilator not found: the RTL co-simulation is skipped");
        println!("cargo:rustc-cfg=no_verilator");
        return;
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("out dir"));
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .opt_level(1)
        .debug(false)
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-unused-variable")
        .flag_if_supported("-Wno-sign-compare")
        .flag_if_supported("-Wno-shadow")
        .define("VM_TRACE", "1")
        .define("VM_COVERAGE", "0")
        .define("VM_SC", "0")
        .include(root.join("include"))
        .include(root.join("include").join("vltstd"));
    let cosim = BLOCKS
        .iter()
        .map(|b| (*b, String::new(), None, Some("PLANTED_BUG")));
    let sim = SIM_BLOCKS
        .iter()
        .map(|(b, tag, param, bug)| (*b, format!("_{tag}"), Some(*param), *bug));
    for (block, tag, param, bug_define) in cosim.chain(sim) {
        let variants: &[Option<&str>] = match bug_define {
            Some(d) => &[None, Some(d)],
            None => &[None],
        };
        for &bug in variants {
            let prefix = format!("V{block}{tag}{}", if bug.is_some() { "_bug" } else { "" });
            let mdir = out.join(&prefix);
            verilate(&verilator, &pkg, &rtl, block, &prefix, &mdir, bug, param);
            build.include(&mdir);
            for entry in std::fs::read_dir(&mdir).expect("verilator output") {
                let path = entry.expect("dir entry").path();
                if path.extension().is_some_and(|e| e == "cpp") {
                    build.file(path);
                }
            }
        }
    }
    for f in [
        "verilated.cpp",
        "verilated_vcd_c.cpp",
        "verilated_threads.cpp",
    ] {
        build.file(root.join("include").join(f));
    }
    build.file(manifest.join("csrc").join("shim.cpp"));
    build.compile("mrc_rtl_models");
    println!("cargo:rustc-link-lib=pthread");
}

#[allow(clippy::too_many_arguments)]
fn verilate(
    verilator: &str,
    pkg: &Path,
    rtl: &Path,
    top: &str,
    prefix: &str,
    mdir: &Path,
    bug: Option<&str>,
    param: Option<&str>,
) {
    let _ = std::fs::remove_dir_all(mdir);
    let mut cmd = Command::new(verilator);
    cmd.args([
        "--cc",
        "--trace",
        "-O1",
        "-Wno-fatal",
        "--top-module",
        top,
        "--prefix",
        prefix,
    ])
    .arg("-Mdir")
    .arg(mdir)
    .arg(format!("-I{}", rtl.display()))
    .arg(pkg)
    .arg(rtl.join(format!("{top}.sv")));
    if let Some(define) = bug {
        cmd.arg(format!("-D{define}"));
    }
    if let Some(p) = param {
        cmd.arg(format!("-G{p}"));
    }
    let status = cmd.status().expect("run verilator");
    assert!(status.success(), "verilator failed on {top} ({prefix})");
}
