//! lib_mrc.so against served simulated NICs (the `pair` scenario of `mrc-sim serve`), from C
//! programs built against OCP's headers and Debian's libibverbs-dev:
//! - `full_api.c`: every function of `mrc.h` and `mrc_ctl.h` and the verbs calls the library
//!   provides, on two devices in one process (see the program's header comment);
//! - the same program without `CAP_NET_ADMIN`: the controller API refuses (`EPERM`).
//!
//! Needs `cc`, libibverbs-dev and OCP's headers (else `SKIPPED`, or a failure under `CI`).

#[path = "../../host-driver/capi/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use mrc_sim::serve::{scenario, Lifetime, Served};

fn c_src(name: &str) -> PathBuf {
    common::repo_root()
        .join("host-driver/capi/tests/c")
        .join(name)
}

/// Builds `name` against the library; returns it and a served `pair` host (sockets in the
/// scratch directory).
fn setup(test: &str, name: &str) -> Option<(PathBuf, Served, PathBuf)> {
    let ocp = common::c_toolchain()?;
    let lib_dir = common::library_dir(test);
    let dir = lib_dir.parent().unwrap().to_path_buf();
    let exe = dir.join(name.trim_end_matches(".c"));
    common::compile_c(&ocp, &lib_dir, &c_src(name), &exe);
    let sock = dir.join("sock");
    let host = scenario::find("pair")
        .expect("the pair scenario")
        .build(7)
        .expect("build the pair host");
    let served = Served::start(host, &sock, Lifetime::Forever).expect("serve the NICs");
    Some((exe, served, sock))
}

/// Runs `exe args` with the devices of `sock`, at most `limit`; returns (status ok, stdout,
/// stderr).
fn run(exe: &Path, args: &[&str], sock: &Path, limit: Duration) -> (bool, String, String) {
    let mut child = common::c_program(exe)
        .args(args)
        .env("MRC_VFIO_USER_DIR", sock)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the C program");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    (
        status.is_some_and(|s| s.success()),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_function_of_both_headers_on_served_devices() {
    let Some((exe, served, sock)) = setup("full-api", "full_api.c") else {
        return;
    };
    let (ok, out, err) = run(&exe, &[], &sock, Duration::from_secs(300));
    let stats = served.shutdown();
    assert!(ok, "full_api failed:\n{out}\n{err}\n{stats}");
    assert!(out.contains(" 0 failed"), "{out}");
    let n: u32 = out
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(0);
    assert!(n >= 150, "only {n} checks ran:\n{out}");
}

#[test]
fn controller_api_needs_cap_net_admin() {
    let Some((exe, served, sock)) = setup("full-api-nopriv", "full_api.c") else {
        return;
    };
    let (ok, out, err) = run(&exe, &["nopriv"], &sock, Duration::from_secs(120));
    served.shutdown();
    assert!(ok, "full_api nopriv failed:\n{out}\n{err}");
    assert!(
        err.contains("the controller API needs CAP_NET_ADMIN"),
        "{err}"
    );
}
