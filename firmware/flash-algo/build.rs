//! Links the algorithm at the load address the chip description gives probe-rs, and makes the
//! flash controller's address from `firmware/memory-map.toml` a Rust const.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let map_path = "../memory-map.toml";
    println!("cargo:rerun-if-changed={map_path}");
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(map_path).expect("read firmware/memory-map.toml");
    let map = mrc_memmap::MemoryMap::parse(&text).unwrap_or_else(|e| panic!("{map_path}: {e}"));
    let consts = mrc_memmap::rust_consts(&map, "nic").expect("consts");
    std::fs::write(out.join("memmap.rs"), consts).expect("memmap.rs");
    println!(
        "cargo:rustc-link-arg=--defsym=ALGO_PLACEMENT_START_ADDRESS={:#x}",
        map.chip.flash_algorithm.load_address
    );
}
