//! `mrcctl fw update` end to end against the `elf` level (`--sim elf`, cargo feature `elf`):
//! the simulated NIC's `FW_*` commands run in the `mrc-nic` ELF on an emulated core, which
//! fetches the chunks `mrcctl` put in DMA memory with its host DMA engine, writes flash slot B,
//! verifies it and puts it on trial; `--reboot` resets the device and the core's boot ROM boots
//! the new image, which `--confirm` makes permanent. A bad image is refused with its reason by
//! the image's own verifier.
//!
//! The image is built from this tree (`cargo build --release` in `firmware/image`); without the
//! riscv32imac target the test prints `SKIPPED: ...` and passes, unless `CI` is set.
#![cfg(feature = "elf")]

mod common;

use std::path::{Path, PathBuf};

use common::{json, mrcctl};
use mrc_fw_update::pack::{flatten_elf, pack_image, ImageMeta};
use mrc_fw_update::test_key;

/// The NIC ELF `--sim elf` built, or `None` (after printing `SKIPPED`) without the target.
fn nic_elf() -> Option<Vec<u8>> {
    let o = mrcctl(&["--sim", "elf", "--json", "fw", "status"]);
    let e = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && e.contains("riscv32imac-unknown-none-elf") {
        assert!(std::env::var_os("CI").is_none(), "{e}");
        println!("SKIPPED: mrcctl fw update against the elf level: {e}");
        return None;
    }
    let v = json(&o);
    assert_eq!(v["running_slot"], "A");
    assert_eq!(v["running_version"], "1.0.0");
    let elf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../firmware/image/target/riscv32imac-unknown-none-elf/release/mrc-nic");
    Some(std::fs::read(&elf).unwrap_or_else(|e| panic!("{}: {e}", elf.display())))
}

/// `elf` packed as `mrc-fw-pack` packs it, in the test's temp dir.
fn packed(elf: &[u8], version: u32, name: &str, spoil: Option<usize>) -> PathBuf {
    let (load, entry, body) = flatten_elf(elf).unwrap();
    let mut meta = ImageMeta::new(version, 1);
    meta.load_addr = load;
    meta.entry = entry;
    let mut img = pack_image(&body, &meta, &test_key::SEED);
    if let Some(at) = spoil {
        img[at] ^= 1;
    }
    let dir = std::env::temp_dir().join(format!("mrcctl-fw-elf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, img).unwrap();
    p
}

#[test]
fn fw_update_reboot_confirm_runs_the_new_image_on_the_elf_level() {
    let Some(elf) = nic_elf() else {
        return;
    };
    let good = packed(&elf, 0x0200_0000, "v2.img", None);
    let v = json(&mrcctl(&[
        "--sim",
        "elf",
        "--json",
        "fw",
        "update",
        good.to_str().unwrap(),
        "--reboot",
        "--confirm",
    ]));
    assert_eq!(v["before"]["running_version"], "1.0.0");
    assert_eq!(v["after"]["update_state"], "Committed");
    assert_eq!(v["after"]["staged_version"], "2.0.0");
    assert_eq!(v["after_reboot"]["running_slot"], "B");
    assert_eq!(v["after_reboot"]["running_version"], "2.0.0");
    assert_eq!(v["after_reboot"]["update_state"], "PendingConfirm");
    assert_eq!(v["after_confirm"]["update_state"], "Idle");
    assert_eq!(v["after_confirm"]["running_slot"], "B");

    // One signature byte flipped: the image's verifier refuses it; slot A keeps running.
    let bad = packed(&elf, 0x0200_0000, "bad-sig.img", Some(100));
    let o = mrcctl(&["--sim", "elf", "fw", "update", bad.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("firmware update refused: bad signature"), "{e}");
    assert!(
        e.contains("the running image is unchanged: slot A, version 1.0.0, state Idle"),
        "{e}"
    );
}
