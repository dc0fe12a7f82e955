//! Link arguments of `lib_mrc.so`.
//!
//! - `-soname lib_mrc.so`: a program linked against `some/dir/lib_mrc.so` records the soname,
//!   not the path, and finds the library through its rpath at run time.
//! - `--version-script src/ffi/verbs.map`: defines rdma-core's symbol version nodes
//!   (`IBVERBS_1.0` ... `IBVERBS_1.14`). The `ibv_*` entry points are bound to those versions by
//!   `.symver` directives next to their definitions (`src/ffi/verbs.rs`), so a program built
//!   against Debian's libibverbs-dev (which records e.g. `ibv_reg_mr_iova2@IBVERBS_1.8`) binds
//!   to this library when it is loaded as `libibverbs.so.1`.

fn main() {
    let map = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ffi/verbs.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,lib_mrc.so");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
}
