//! OCP's own benchmark program (`../shared/ocp-mrc/examples/benchmark`), unchanged, builds with
//! its own makefile against lib_mrc.so. Needs `cc`, `make`, libibverbs-dev and OCP's files
//! (else `SKIPPED`, or a failure under `CI`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Copies OCP's benchmark directory (read-only) into `dir` and builds it there with its own
/// makefile; returns the `mrc_example` binary.
pub fn build_benchmark(ocp: &Path, lib_dir: &Path, dir: &Path) -> PathBuf {
    let src = ocp.join("examples/benchmark");
    let build = dir.join("benchmark");
    std::fs::create_dir_all(&build).expect("benchmark dir");
    for e in std::fs::read_dir(&src).expect("read OCP benchmark") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), build.join(e.file_name())).expect("copy");
    }
    common::run_ok(
        Command::new("make")
            .arg("-C")
            .arg(&build)
            .arg(format!("MRC_H_PATH={}", ocp.display()))
            .arg(format!("MRC_LIB_DIR={}", lib_dir.display())),
    );
    let exe = build.join("mrc_example");
    assert!(exe.is_file(), "make built no mrc_example");
    exe
}

#[test]
fn ocp_benchmark_builds_with_its_makefile() {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    if Command::new("make").arg("--version").output().is_err() {
        common::skip("make not found; apt-get install make");
        return;
    }
    let lib_dir = common::library_dir("ocp-build");
    let exe = build_benchmark(&ocp, &lib_dir, lib_dir.parent().unwrap());
    // Every MRC and verbs call of the program resolves in lib_mrc.so: run it without a device
    // directory and it gets as far as the device list (and says there is none).
    let out = common::c_program(&exe)
        .args(["-d", "mrc0", "-p", "0"])
        .env_remove("MRC_VFIO_USER_DIR")
        .output()
        .expect("run mrc_example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no MRC device directory") && stderr.contains("no IB devs"),
        "{stderr}"
    );
}
