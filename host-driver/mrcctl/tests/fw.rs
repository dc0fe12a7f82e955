//! `mrcctl fw` against the simulated NIC: every refusal exits 2 with its reason and the running
//! image unchanged; a good image commits, boots on trial after a reset and stays once confirmed.

use std::path::PathBuf;
mod common;
use common::{json, mrcctl};

use mrc_fw_update::pack::{pack_image, ImageMeta};
use mrc_fw_update::test_key;

const V2: u32 = 0x0200_0000;

/// An image file in the test's own temp dir.
fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mrcctl-fw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn image(abi: u16) -> Vec<u8> {
    let body: Vec<u8> = (0..50_000u32).map(|i| (i * 13 + 5) as u8).collect();
    pack_image(&body, &ImageMeta::new(V2, abi), &test_key::SEED)
}

#[test]
fn status_shows_the_factory_image() {
    let v = json(&mrcctl(&["--sim", "default", "--json", "fw", "status"]));
    assert_eq!(v["running_slot"], "A");
    assert_eq!(v["running_version"], "1.0.0");
    assert_eq!(v["update_state"], "Idle");
    assert!(v["staged_version"].is_null());
}

#[test]
fn bad_images_are_refused_with_a_reason_exit_2_and_the_image_stays() {
    let good = image(1);
    let mut bad_crc = good.clone();
    bad_crc[10_000] ^= 0x40;
    let mut bad_sig = good.clone();
    bad_sig[64] ^= 1;
    let cases = [
        ("bad-crc.img", bad_crc, "bad CRC"),
        ("bad-sig.img", bad_sig, "bad signature"),
        (
            "abi2.img",
            image(2),
            "another ABI version: image ABI 2, device ABI 1",
        ),
        (
            "truncated.img",
            good[..good.len() - 100].to_vec(),
            "truncated image",
        ),
    ];
    for (name, bytes, why) in cases {
        let p = write(name, &bytes);
        let o = mrcctl(&[
            "--sim",
            "default",
            "--json",
            "fw",
            "update",
            p.to_str().unwrap(),
        ]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {e}");
        assert!(
            o.stdout.is_empty(),
            "{name}: --json failure prints nothing on stdout"
        );
        assert!(e.contains("0000:00:04.0: firmware update refused: "), "{e}");
        assert!(e.contains(why), "{name}: {e}");
        assert!(
            e.contains("the running image is unchanged: slot A, version 1.0.0, state Idle"),
            "{name}: {e}"
        );
    }
    let o = mrcctl(&["--sim", "default", "fw", "update", "/nonexistent/mrc.img"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/mrc.img"));
}

#[test]
fn good_image_commits_boots_on_trial_and_is_confirmed() {
    let p = write("good.img", &image(1));
    let path = p.to_str().unwrap();
    let v = json(&mrcctl(&[
        "--sim", "default", "--json", "fw", "update", path,
    ]));
    assert_eq!(v["before"]["running_version"], "1.0.0");
    assert_eq!(v["after"]["update_state"], "Committed");
    assert_eq!(v["after"]["staged_version"], "2.0.0");
    assert_eq!(
        v["after"]["running_slot"], "A",
        "runs the old image until reset"
    );
    let v = json(&mrcctl(&[
        "--sim",
        "default",
        "--json",
        "fw",
        "update",
        path,
        "--reboot",
        "--confirm",
    ]));
    assert_eq!(v["after_reboot"]["running_slot"], "B");
    assert_eq!(v["after_reboot"]["running_version"], "2.0.0");
    assert_eq!(v["after_reboot"]["update_state"], "PendingConfirm");
    assert_eq!(v["after_confirm"]["update_state"], "Idle");
    assert_eq!(v["after_confirm"]["running_version"], "2.0.0");
    // Nothing to confirm or roll back on a fresh device: a clear refusal.
    for cmd in ["confirm", "rollback"] {
        let o = mrcctl(&["--sim", "default", "fw", cmd]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to"));
    }
}
