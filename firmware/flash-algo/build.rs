//! Links the algorithm at the load address the chip description gives probe-rs, and makes the
//! flash controller's address from `firmware/memory-map.toml` a Rust const.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    let map = mrc_memmap::MemoryMap::for_build_script();
    let consts = mrc_memmap::rust_consts(&map, "nic").expect("consts");
    std::fs::write(out.join("memmap.rs"), consts).expect("memmap.rs");
    println!(
        "cargo:rustc-link-arg=--defsym=ALGO_PLACEMENT_START_ADDRESS={:#x}",
        map.chip.flash_algorithm.load_address
    );
}
