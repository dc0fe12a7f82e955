//! Generates `memory.x` and `memmap.rs` for the selected target (`nic`, or `qemu` with the
//! `qemu` feature) from `firmware/memory-map.toml`, and a signed test image for the self-test.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    let map = mrc_memmap::MemoryMap::for_build_script();
    let target = if std::env::var_os("CARGO_FEATURE_QEMU").is_some() {
        "qemu"
    } else {
        "nic"
    };
    let write = |name: &str, body: String| {
        std::fs::write(out.join(name), body).unwrap_or_else(|e| panic!("{name}: {e}"));
    };
    write(
        "memory.x",
        mrc_memmap::linker_script(&map, target).expect("linker script"),
    );
    write(
        "memmap.rs",
        mrc_memmap::rust_consts(&map, target).expect("consts"),
    );
    println!("cargo:rustc-link-search={}", out.display());

    // A small image signed with the TEST-ONLY key: the self-test verifies it on the core.
    let body: Vec<u8> = (0..1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let meta = mrc_fw_update::sign::ImageMeta::new(2, 1);
    let mut image =
        mrc_fw_update::sign::sign_header(&body, &meta, &mrc_fw_update::test_key::SEED).to_vec();
    image.extend_from_slice(&body);
    std::fs::write(out.join("test-image.bin"), image).expect("test image");
}
