//! OCP's own benchmark program (`../shared/ocp-mrc/examples/benchmark`), unchanged, builds with
//! its own makefile against lib_mrc.so. Needs `cc`, `make`, libibverbs-dev and OCP's files
//! (else `SKIPPED`, or a failure under `CI`).

mod common;

#[test]
fn ocp_benchmark_builds_with_its_makefile() {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    if !common::have_make() {
        common::skip("make not found; apt-get install make");
        return;
    }
    let lib_dir = common::library_dir("ocp-build");
    let exe = common::build_benchmark(&ocp, &lib_dir, lib_dir.parent().unwrap());
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
