//! OCP's own benchmark (`../shared/ocp-mrc/examples/benchmark/mrc_example`), unchanged and built
//! with its own makefile against lib_mrc.so, runs as two processes on one served fabric: the
//! `pair` scenario of `mrc-sim serve` (two NICs, four planes, the MRC engine on each NIC, a
//! leaf-spine link of plane 0 that fails silently at 1 ms of virtual time). The server process
//! (`-d mrc1`) and the client (`-d mrc0 127.0.0.1`) keep every option at its default except the
//! port, the sizes and the iterations.
//!
//! Checked: the sweep completes in both processes, the client prints one row per message size
//! with the iterations asked for, the server finds every message's bytes (no validation
//! error), the link failure happened during the run (packets dropped, retransmissions), and
//! the simulator placed exactly the bytes the programs wrote, on each NIC.
//!
//! Needs `cc`, `make`, libibverbs-dev and OCP's files (else `SKIPPED`, or a failure under `CI`).

#[path = "../../host-driver/capi/tests/common/mod.rs"]
mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use mrc_sim::serve::{scenario, Lifetime, Served};

/// Iterations per size (`-n`); the benchmark's default warmup (100) stays.
const ITERS: u64 = 32;
/// Largest message (`-s`); the sweep starts at the default 1 byte and doubles.
const MAX_SIZE: u64 = 128 * 1024;
/// `DEF_WARMUP_ITERS` of `mrc_example.c` (the program's default, left unchanged).
const WARMUP: u64 = 100;
/// Longest a benchmark process may take.
const DEADLINE: Duration = Duration::from_secs(600);

/// A TCP port free right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Whether some socket listens on `port` (from `/proc/net/tcp`: the benchmark's server
/// accepts one connection, so it cannot be probed by connecting).
fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
        })
    })
}

/// Waits for `child` at most until `deadline`; kills it after. Returns (success, stdout,
/// stderr).
fn finish(mut child: Child, deadline: Instant, what: &str) -> (bool, String, String) {
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let mut err = String::new();
    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    child.stderr.take().map(|mut s| s.read_to_string(&mut err));
    if status.is_none() {
        err.push_str(&format!("\n[{what} killed after {DEADLINE:?}]"));
    }
    (status.is_some_and(|s| s.success()), out, err)
}

fn benchmark(exe: &Path, sock: &Path, port: u16, role: &[&str]) -> Child {
    common::c_program(exe)
        .args(["-p", &port.to_string(), "-n", &ITERS.to_string()])
        .args(["-s", &MAX_SIZE.to_string()])
        .args(role)
        .env("MRC_VFIO_USER_DIR", sock)
        .env_remove("MRC_LOG_LEVEL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mrc_example")
}

#[test]
fn ocp_benchmark_runs_across_two_processes_through_a_link_failure() {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    if !common::have_make() {
        common::skip("make not found; apt-get install make");
        return;
    }
    let lib_dir = common::library_dir("ocp-two-process");
    let dir = lib_dir.parent().unwrap().to_path_buf();
    let exe = common::build_benchmark(&ocp, &lib_dir, &dir);
    let sock = dir.join("sock");
    let host = scenario::find("pair")
        .expect("the pair scenario")
        .build(1)
        .expect("build the pair host");
    let served = Served::start(host, &sock, Lifetime::Forever).expect("serve the NICs");

    let port = free_port();
    let deadline = Instant::now() + DEADLINE;
    let server = benchmark(&exe, &sock, port, &["-d", "mrc1"]);
    while !listening(port) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let client = benchmark(&exe, &sock, port, &["-d", "mrc0", "127.0.0.1"]);
    let (client_ok, client_out, client_err) = finish(client, deadline, "client");
    let (server_ok, server_out, server_err) = finish(server, deadline, "server");
    let stats = served.shutdown();
    let report = format!(
        "client:\n{client_out}\n{client_err}\nserver:\n{server_out}\n{server_err}\nsimulator:\n{stats}"
    );
    assert!(
        client_ok && server_ok,
        "a benchmark process failed\n{report}"
    );
    for out in [&client_out, &server_out] {
        assert!(
            out.contains("MRC example completed successfully"),
            "{report}"
        );
    }
    for err in [&client_err, &server_err] {
        assert!(!err.contains("[MRC ERROR]"), "{report}");
        assert!(
            !err.contains("mrc: "),
            "the library reported an error\n{report}"
        );
    }

    // One row per size: MsgSize, TotalOps, BW_avg(Gbps), MsgRate(Mpps).
    let sizes: Vec<u64> = std::iter::successors(Some(1u64), |s| Some(s * 2))
        .take_while(|s| *s <= MAX_SIZE)
        .collect();
    let rows: Vec<Vec<f64>> = client_out
        .lines()
        .map(str::split_whitespace)
        .map(|f| f.map(|x| x.parse::<f64>()).collect::<Result<Vec<_>, _>>())
        .filter_map(Result::ok)
        .filter(|r| r.len() == 4)
        .collect();
    assert_eq!(rows.len(), sizes.len(), "one row per size\n{report}");
    for (r, s) in rows.iter().zip(&sizes) {
        assert_eq!(r[0] as u64, *s, "{report}");
        assert_eq!(r[1] as u64, ITERS, "{report}");
        assert!(r[2] >= 0.0 && r[3] > 0.0, "row {r:?}\n{report}");
    }

    // The failure happened while the benchmark ran, and the transport recovered from it.
    let fabric = stats.fabric;
    assert!(
        fabric
            .fabric
            .dropped(mrc_sim::fabric::DropCause::RandomLoss)
            > 0,
        "the link never failed\n{report}"
    );
    assert!(stats.retransmits() > 0, "{report}");
    for e in stats.engine.iter().flatten() {
        assert_eq!(e.qp_errors, 0, "{report}");
    }

    // Bytes placed = bytes written. The client (NIC 0) writes, per size, the warmup and the
    // timed writes of that size and an 8-byte write-with-immediate; the server (NIC 1) one
    // 8-byte write per size (the sync word).
    let client_bytes: u64 = sizes.iter().map(|s| (WARMUP + ITERS) * s + 8).sum();
    let server_bytes = 8 * sizes.len() as u64;
    assert_eq!(stats.device[1].bytes_placed, client_bytes, "{report}");
    assert_eq!(stats.device[0].bytes_placed, server_bytes, "{report}");
    assert_eq!(fabric.bytes_placed, client_bytes + server_bytes, "{report}");
    println!("{stats}");
}
