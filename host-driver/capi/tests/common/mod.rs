//! What the C-side tests share: finding OCP's headers, a C compiler and the built library,
//! building OCP's benchmark, and the `SKIPPED` rule (a missing tool skips the test, unless `CI`
//! is set: then it fails). Also included (`#[path]`) by the whole-system tests in `tests/`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (the directory holding the workspace's `Cargo.lock`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|p| p.join("Cargo.lock").is_file())
        .expect("the workspace root")
        .to_path_buf()
}

/// Prints `SKIPPED: why` and returns, or panics when `CI` is set (CI must run every check).
pub fn skip(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and this check cannot run: {why}");
    }
    println!("SKIPPED: {why}");
}

/// OCP's reference headers and benchmark: `$MRC_OCP_DIR`, else `<repo>/../shared/ocp-mrc`.
pub fn ocp_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MRC_OCP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/ocp-mrc"));
    dir.join("mrc.h").is_file().then_some(dir)
}

/// The verbs header of Debian's libibverbs-dev.
pub fn have_verbs_header() -> bool {
    Path::new("/usr/include/infiniband/verbs.h").is_file()
}

/// `cc --version` works.
pub fn have_cc() -> bool {
    Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Everything a C test needs, or why not (already reported through [`skip`]).
pub fn c_toolchain() -> Option<PathBuf> {
    if !have_cc() {
        skip("no C compiler (cc); install gcc");
        return None;
    }
    if !have_verbs_header() {
        skip("infiniband/verbs.h not found; apt-get install libibverbs-dev");
        return None;
    }
    let Some(ocp) = ocp_dir() else {
        skip("OCP MRC headers not found at ../shared/ocp-mrc (or $MRC_OCP_DIR)");
        return None;
    };
    Some(ocp)
}

/// The `lib_mrc.so` cargo built beside this test binary (`target/<profile>/deps`).
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe.with_file_name("lib_mrc.so");
    assert!(lib.is_file(), "{} not built", lib.display());
    lib
}

/// A scratch directory under the target directory, emptied first (per process: two test runs
/// at once do not share it).
pub fn scratch(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .join("capi-tests")
        .join(format!("{name}-{}", std::process::id()));
    // Directories of earlier runs whose process is gone (a failed run's stays until then).
    let parent = dir.parent().expect("capi-tests");
    for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let file = e.file_name();
        let pid = file
            .to_str()
            .and_then(|f| f.strip_prefix(name)?.strip_prefix('-'));
        let digits = pid.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if digits && pid.is_some_and(|p| !Path::new("/proc").join(p).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// A library directory as `just capi` lays it out: `lib_mrc.so` and `libibverbs.so.1`, both
/// naming the one built library (symlinks: the loader maps it once).
pub fn library_dir(name: &str) -> PathBuf {
    let dir = scratch(name).join("lib");
    std::fs::create_dir_all(&dir).expect("lib dir");
    let lib = built_library();
    std::os::unix::fs::symlink(&lib, dir.join("lib_mrc.so")).expect("symlink lib_mrc.so");
    std::os::unix::fs::symlink("lib_mrc.so", dir.join("libibverbs.so.1"))
        .expect("symlink libibverbs.so.1");
    dir
}

/// A command running C program `exe` as a user would: without the library path cargo sets for
/// its tests (the program finds lib_mrc.so through its rpath).
pub fn c_program(exe: &Path) -> Command {
    let mut c = Command::new(exe);
    c.env_remove("LD_LIBRARY_PATH");
    c
}

/// Runs `cmd`, panicking with its output when it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiles `src` (a C file) to an executable `out`, against OCP's headers, linked like OCP's
/// makefile links its benchmark: `lib_mrc.so` by path, `-libverbs` from the system, and the
/// library directory on the rpath.
pub fn compile_c(ocp: &Path, lib_dir: &Path, src: &Path, out: &Path) {
    run_ok(
        Command::new("cc")
            .args(["-O1", "-g", "-Wall", "-Wextra", "-Werror", "-std=gnu11"])
            .arg("-I")
            .arg(ocp)
            .arg("-o")
            .arg(out)
            .arg(src)
            .arg(format!("-L{}", lib_dir.display()))
            .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
            .arg(lib_dir.join("lib_mrc.so"))
            .arg("-libverbs"),
    );
}

/// `make --version` works.
pub fn have_make() -> bool {
    Command::new("make")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Copies OCP's benchmark directory (read-only, never changed) into `dir` and builds it there
/// with its own makefile; returns the `mrc_example` binary.
pub fn build_benchmark(ocp: &Path, lib_dir: &Path, dir: &Path) -> PathBuf {
    let src = ocp.join("examples/benchmark");
    let build = dir.join("benchmark");
    std::fs::create_dir_all(&build).expect("benchmark dir");
    for e in std::fs::read_dir(&src).expect("read OCP benchmark") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), build.join(e.file_name())).expect("copy");
    }
    run_ok(
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
