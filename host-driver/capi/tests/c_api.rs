//! The C library as C programs see it, without a device: the verbs symbols bind to
//! `lib_mrc.so` with rdma-core's versions, the verbs strings match rdma-core's, and bad input
//! to every function of both headers fails as the headers say, with a message, never a crash.
//! Needs `cc`, libibverbs-dev and OCP's headers (else `SKIPPED`, or a failure under `CI`).

mod common;

use std::path::Path;
use std::process::Command;

fn src(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

/// The `ibv_*` symbols and versions the library defines (default versions).
const VERBS_SYMBOLS: &[(&str, &str)] = &[
    ("_ibv_query_gid_ex", "IBVERBS_1.11"),
    ("ibv_alloc_pd", "IBVERBS_1.1"),
    ("ibv_close_device", "IBVERBS_1.1"),
    ("ibv_dealloc_pd", "IBVERBS_1.1"),
    ("ibv_dereg_mr", "IBVERBS_1.1"),
    ("ibv_event_type_str", "IBVERBS_1.1"),
    ("ibv_free_device_list", "IBVERBS_1.1"),
    ("ibv_get_device_guid", "IBVERBS_1.1"),
    ("ibv_get_device_index", "IBVERBS_1.9"),
    ("ibv_get_device_list", "IBVERBS_1.1"),
    ("ibv_get_device_name", "IBVERBS_1.1"),
    ("ibv_node_type_str", "IBVERBS_1.1"),
    ("ibv_open_device", "IBVERBS_1.1"),
    ("ibv_port_state_str", "IBVERBS_1.1"),
    ("ibv_query_device", "IBVERBS_1.1"),
    ("ibv_query_gid", "IBVERBS_1.1"),
    ("ibv_query_pkey", "IBVERBS_1.1"),
    ("ibv_query_port", "IBVERBS_1.1"),
    ("ibv_reg_mr", "IBVERBS_1.1"),
    ("ibv_reg_mr_iova", "IBVERBS_1.7"),
    ("ibv_reg_mr_iova2", "IBVERBS_1.8"),
    ("ibv_wc_status_str", "IBVERBS_1.1"),
];

/// `(symbol, version)` of the dynamic symbols `objdump -T` lists for `file` (defined or
/// undefined per `defined`).
fn dynamic_symbols(file: &Path, defined: bool) -> Vec<(String, String)> {
    let out = common::run_ok(Command::new("objdump").arg("-T").arg(file));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" DF ") || l.contains("*UND*"))
        .filter(|l| l.contains("*UND*") != defined)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (name, ver) = (f.last()?, f.get(f.len().checked_sub(2)?)?);
            Some((
                name.to_string(),
                ver.trim_matches(|c| c == '(' || c == ')').to_string(),
            ))
        })
        .collect()
}

#[test]
fn library_defines_the_verbs_symbols_with_rdma_core_versions() {
    if Command::new("objdump").arg("--version").output().is_err() {
        common::skip("objdump not found; apt-get install binutils");
        return;
    }
    let lib = common::built_library();
    let mut got: Vec<(String, String)> = dynamic_symbols(&lib, true)
        .into_iter()
        .filter(|(n, _)| n.starts_with("ibv_") || n.starts_with("_ibv_"))
        .collect();
    got.sort();
    let want: Vec<(String, String)> = VERBS_SYMBOLS
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(got, want);
    // Every version node of rdma-core 44's public API is defined (a program needing any of
    // them loads; one needing a function not here fails by that function's name).
    let out = common::run_ok(Command::new("objdump").arg("-p").arg(&lib));
    let text = String::from_utf8_lossy(&out.stdout);
    for v in [
        "IBVERBS_1.0",
        "IBVERBS_1.1",
        "IBVERBS_1.5",
        "IBVERBS_1.8",
        "IBVERBS_1.11",
        "IBVERBS_1.14",
    ] {
        assert!(text.contains(v), "version node {v} missing");
    }
    assert!(text.contains("SONAME               lib_mrc.so"), "{text}");
}

/// A program built against Debian's libibverbs-dev, linked as OCP's makefile links, binds
/// every verbs call to lib_mrc.so at run time (shown by the loader's `LD_DEBUG=bindings`), and
/// the verbs strings it prints are rdma-core's.
#[test]
fn verbs_programs_bind_to_lib_mrc_and_match_rdma_core() {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    let lib_dir = common::library_dir("verbs-bind");
    let dir = lib_dir.parent().unwrap().to_path_buf();
    let ours = dir.join("verbs_strings_mrc");
    common::compile_c(&ocp, &lib_dir, &src("verbs_strings.c"), &ours);
    // What the compiled program asks for: the versioned rdma-core names.
    let imports = dynamic_symbols(&ours, false);
    for (n, v) in [
        ("ibv_wc_status_str", "IBVERBS_1.1"),
        ("ibv_get_device_list", "IBVERBS_1.1"),
        ("ibv_get_device_index", "IBVERBS_1.9"),
    ] {
        assert!(
            imports.iter().any(|(a, b)| a == n && b == v),
            "{n}@{v} not imported: {imports:?}"
        );
    }
    let empty = dir.join("no-devices");
    std::fs::create_dir_all(&empty).unwrap();
    let run = common::run_ok(
        common::c_program(&ours)
            .env("LD_DEBUG", "bindings")
            .env("MRC_VFIO_USER_DIR", &empty),
    );
    let loader = String::from_utf8_lossy(&run.stderr);
    let lib_name = lib_dir.join("lib_mrc.so");
    let mut bound = 0;
    for line in loader.lines().filter(|l| l.contains("symbol `ibv_")) {
        assert!(
            line.contains(&*lib_name.to_string_lossy()) && line.contains("[IBVERBS_1."),
            "a verbs call bound elsewhere: {line}"
        );
        bound += 1;
    }
    assert!(
        bound >= 6,
        "expected the program's verbs calls in:\n{loader}"
    );
    let ours_out = String::from_utf8(run.stdout).unwrap();
    assert!(ours_out.contains("devices 0 list non-null"), "{ours_out}");

    // The same source against the system's libibverbs.
    let theirs = dir.join("verbs_strings_rdma_core");
    let out = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&theirs)
        .arg(src("verbs_strings.c"))
        .arg("-libverbs")
        .output()
        .expect("cc");
    if !out.status.success() {
        common::skip("the system libibverbs cannot be linked");
        return;
    }
    let real = common::run_ok(&mut common::c_program(&theirs));
    let strings = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.starts_with("device"))
            .map(str::to_owned)
            .collect()
    };
    let real_out = String::from_utf8(real.stdout).unwrap();
    assert_eq!(strings(&ours_out), strings(&real_out));

    // The rdma-core build, not rebuilt, run with the library directory first on the search
    // path: `libibverbs.so.1` there is lib_mrc.so, and the program binds to it.
    let shim = common::run_ok(
        common::c_program(&theirs)
            .env("LD_LIBRARY_PATH", &lib_dir)
            .env("LD_DEBUG", "bindings")
            .env("MRC_VFIO_USER_DIR", &empty),
    );
    let loader = String::from_utf8_lossy(&shim.stderr);
    let shim_name = lib_dir.join("libibverbs.so.1");
    let lines: Vec<&str> = loader
        .lines()
        .filter(|l| l.contains("symbol `ibv_"))
        .collect();
    assert!(lines.len() >= 6, "{loader}");
    for line in lines {
        assert!(
            line.contains(&*shim_name.to_string_lossy()) && line.contains("[IBVERBS_1."),
            "not bound to the shim: {line}"
        );
    }
    let shim_out = String::from_utf8(shim.stdout).unwrap();
    assert_eq!(strings(&shim_out), strings(&real_out));
    assert!(shim_out.contains("devices 0 list non-null"), "{shim_out}");
}

/// Without a device directory there are no devices, and the library says how to name one.
#[test]
fn no_device_directory_lists_nothing_and_says_why() {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    let lib_dir = common::library_dir("verbs-nodir");
    let exe = lib_dir.parent().unwrap().join("verbs_strings");
    common::compile_c(&ocp, &lib_dir, &src("verbs_strings.c"), &exe);
    let run = common::run_ok(common::c_program(&exe).env_remove("MRC_VFIO_USER_DIR"));
    assert!(String::from_utf8_lossy(&run.stdout).contains("devices 0 list non-null"));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("mrc: ibv_get_device_list: no MRC device directory: set MRC_VFIO_USER_DIR"),
        "{err}"
    );
}

#[test]
fn bad_input_to_every_function_fails_as_the_headers_say() {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    let lib_dir = common::library_dir("bad-input");
    let exe = lib_dir.parent().unwrap().join("bad_input");
    common::compile_c(&ocp, &lib_dir, &src("bad_input.c"), &exe);
    let out = common::c_program(&exe)
        .env_remove("MRC_VFIO_USER_DIR")
        .output()
        .expect("run bad_input");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "status {}:\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    // Messages name the function, the argument and the errno.
    for m in [
        "mrc: ibv_open_device: device is NULL (EINVAL)",
        "mrc: mrc_create_context: vcontext is NULL (EINVAL)",
        "is not a struct mrc_cq handle of this library",
        "mrc: mrc_destroy_qp: qp (0xc2",
    ] {
        assert!(stderr.contains(m), "no {m:?} in:\n{stderr}");
    }
}

/// Sockets that are not a live device: a socket file nobody listens on (a server that exited)
/// and a listener that never answers. Opening either fails with an errno and a message naming
/// the socket, within the driver's connection timeout, never a hang.
#[test]
fn broken_device_sockets_fail_opens_with_a_message() {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    let lib_dir = common::library_dir("broken-sockets");
    let dir = lib_dir.parent().unwrap().to_path_buf();
    let exe = dir.join("open_device");
    common::compile_c(&ocp, &lib_dir, &src("open_device.c"), &exe);
    let sock = dir.join("sock");
    std::fs::create_dir_all(&sock).unwrap();
    // nic00: bound, then closed (the file stays, nobody listens); nic01: listening, silent.
    drop(std::os::unix::net::UnixListener::bind(sock.join("nic00.sock")).unwrap());
    let _silent = std::os::unix::net::UnixListener::bind(sock.join("nic01.sock")).unwrap();
    let start = std::time::Instant::now();
    let out = common::run_ok(common::c_program(&exe).env("MRC_VFIO_USER_DIR", &sock));
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("open mrc0 failed errno") && stdout.contains("open mrc1 failed errno"),
        "{stdout}"
    );
    // ENODEV: nothing serves the device there.
    assert_eq!(stdout.matches("errno 19").count(), 2, "{stdout}");
    for n in ["nic00.sock", "nic01.sock"] {
        assert!(
            stderr.contains("mrc: ibv_open_device: mrc") && stderr.contains(n),
            "no message names {n}:\n{stderr}"
        );
    }
    assert!(took.as_secs() < 30, "opening took {took:?}");
}
