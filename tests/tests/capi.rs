//! lib_mrc.so against served simulated NICs (the `pair` scenario of `mrc-sim serve`), from C
//! programs built against OCP's headers and Debian's libibverbs-dev:
//! - `full_api.c`: every function of `mrc.h` and `mrc_ctl.h` and the verbs calls the library
//!   provides, on two devices in one process (see the program's header comment);
//! - the same program without `CAP_NET_ADMIN`: the controller API refuses (`EPERM`);
//! - `device_gone.c`: the simulator process is killed under a running program; every call
//!   fails with `EIO` and a message, blocked calls come back, nothing hangs or crashes.
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

/// The server process of [`the_simulator_dying_fails_calls_with_eio_and_no_hang`] (this test
/// binary run again with `MRC_TEST_SERVE_DIR`): serves the `pair` host until killed. Without
/// the variable it does nothing.
#[test]
#[ignore]
fn serve_until_killed() {
    let Some(dir) = std::env::var_os("MRC_TEST_SERVE_DIR") else {
        return;
    };
    let host = scenario::find("pair").unwrap().build(7).unwrap();
    let _served = Served::start(host, Path::new(&dir), Lifetime::Forever).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn the_simulator_dying_fails_calls_with_eio_and_no_hang() {
    use std::io::{BufRead, Write};
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    let lib_dir = common::library_dir("device-gone");
    let dir = lib_dir.parent().unwrap().to_path_buf();
    let exe = dir.join("device_gone");
    common::compile_c(&ocp, &lib_dir, &c_src("device_gone.c"), &exe);
    let sock = dir.join("sock");
    let mut server = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["serve_until_killed", "--exact", "--ignored"])
        .env("MRC_TEST_SERVE_DIR", &sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the server process");
    let start = std::time::Instant::now();
    while !(sock.join("nic00.sock").exists() && sock.join("nic01.sock").exists()) {
        assert!(start.elapsed() < Duration::from_secs(60), "no sockets");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut prog = common::c_program(&exe)
        .env("MRC_VFIO_USER_DIR", &sock)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start device_gone");
    let mut lines = std::io::BufReader::new(prog.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = server.kill();
    let _ = server.wait();
    if first == "ready" {
        let mut stdin = prog.stdin.take().unwrap();
        let _ = writeln!(stdin, "go");
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = prog.wait_with_output().expect("device_gone output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = format!("{first}\n{}", rest.join("\n"));
    assert_eq!(first, "ready", "{stdout}\n{stderr}");
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    assert!(
        stderr.contains("is gone"),
        "no message names the dead device:\n{stderr}"
    );
}
