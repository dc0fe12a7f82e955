//! The image's shape of a NIC (`[nic.firmware] shape = "image"`): shards with the NIC image's
//! capacities set up through the admin ring, the image's main loop run natively. The `elf`
//! level runs the same shards with the ELF (`tests/hil_elf.rs`, feature `elf`).

use mrc_sim::hil::{run_level, run_level_with, LEVELS, SCENARIO};
use mrc_sim::nic::{FirmwareLevel, NicShape, Transport};
use mrc_sim::run::TransceiverEvent;
use mrc_sim::scenario::{ScenarioSpec, TransceiverFile};

#[test]
fn the_image_shape_completes_every_flow_through_a_link_failure() {
    let native = LEVELS
        .iter()
        .find(|l| l.firmware == FirmwareLevel::Native)
        .unwrap();
    let r = run_level(native, None).unwrap();
    assert_eq!(r.outcome.len(), 56, "8 hosts, all-to-all");
    assert!(r.outcome.iter().all(|f| f.completed && !f.failed));
    assert_eq!(r.row.delivered_bytes, 56 * 65_536);
    assert_eq!(r.placed_bytes, 56 * 65_536);
    assert_eq!(r.guest_instructions, None, "nothing is emulated at native");
    assert_eq!(r.row.guest_instructions_per_s, None);
}

#[test]
fn the_image_shape_refuses_what_the_image_does_not_have() {
    let mut spec = ScenarioSpec::resolve(SCENARIO).unwrap();
    assert_eq!(spec.file.nic.firmware.shape, Some(NicShape::Image));
    spec.file.fabric.planes = 2;
    let e = mrc_sim::run::run(&spec.scenario(Transport::Mrc)).unwrap_err();
    assert!(e.to_string().contains("planes must be 4"), "{e}");
}

#[test]
fn the_elf_level_and_the_simulators_shape_are_refused_together() {
    let mut spec = ScenarioSpec::resolve(SCENARIO).unwrap();
    spec.file.nic.firmware.level = FirmwareLevel::Elf;
    spec.file.nic.firmware.shape = Some(NicShape::Sim);
    let (key, why) = spec.file.validate().unwrap_err();
    assert!(
        key.contains("shape") && why.contains("image"),
        "{key}: {why}"
    );
}

#[cfg(not(feature = "elf"))]
#[test]
fn the_elf_level_without_its_feature_is_refused_naming_the_feature() {
    let elf = LEVELS
        .iter()
        .find(|l| l.firmware == FirmwareLevel::Elf)
        .unwrap();
    assert!(elf.unavailable().is_some());
    let e = run_level(elf, None).unwrap_err();
    assert!(e.contains("`elf` cargo feature"), "{e}");
    // (a scenario asking for it directly: the NIC's setup names the feature)
    let mut spec = ScenarioSpec::resolve(SCENARIO).unwrap();
    spec.file.nic.firmware.level = FirmwareLevel::Elf;
    let e = mrc_sim::run::run(&spec.scenario(Transport::Mrc)).unwrap_err();
    assert!(e.to_string().contains("`elf` cargo feature"), "{e}");
}

/// A transceiver pulled at the native level: the image's port monitor (the same code as the
/// image's, over the board's CMIS module model) finds the empty cage, the port goes down
/// through the loop's port path; every flow completes and the recovery is reported; a
/// scenario file's `[transceiver]` table parses to the same event.
#[test]
fn a_pulled_transceiver_at_the_native_level_is_survived_and_its_recovery_reported() {
    let native = LEVELS
        .iter()
        .find(|l| l.firmware == FirmwareLevel::Native)
        .unwrap();
    let plain = run_level(native, None).unwrap();
    assert_eq!(plain.port_recovery_us, None, "no event, no figure");
    let t = TransceiverFile {
        at_us: 2,
        nic: 0,
        port: 1,
        event: TransceiverEvent::Pull,
    };
    let r = run_level_with(native, None, Some(t)).unwrap();
    assert!(r.outcome.iter().all(|f| f.completed && !f.failed));
    assert_eq!(r.row.delivered_bytes, 56 * 65_536);
    let rec = r.port_recovery_us.expect("reported");
    assert!(rec > 0.0 && rec < r.row.completion_us, "{rec}");
    assert!(
        r.row.completion_us > plain.row.completion_us,
        "the cut plane cost time"
    );
    let parsed: TransceiverFile =
        toml::from_str("at_us = 2\nnic = 0\nport = 1\nevent = \"pull\"\n").unwrap();
    assert_eq!(parsed, t);
}

#[test]
fn bad_transceiver_events_are_refused_naming_the_key() {
    let ok = TransceiverFile {
        at_us: 2,
        nic: 0,
        port: 1,
        event: TransceiverEvent::Los,
    };
    let cases: [(TransceiverFile, &str, &str); 3] = [
        (
            TransceiverFile { nic: 8, ..ok },
            "transceiver.nic",
            "8 hosts",
        ),
        (
            TransceiverFile { port: 4, ..ok },
            "transceiver.port",
            "one port per plane",
        ),
        (
            TransceiverFile {
                at_us: 4_000_000,
                ..ok
            },
            "transceiver.at_us",
            "before time_limit_us",
        ),
    ];
    for (t, key, why) in cases {
        let mut spec = ScenarioSpec::resolve(SCENARIO).unwrap();
        spec.file.transceiver = Some(t);
        let (k, w) = spec.file.validate().unwrap_err();
        assert_eq!(k, key);
        assert!(w.contains(why), "{k}: {w}");
    }
    // Only the image watches its transceivers.
    let mut spec = ScenarioSpec::resolve(SCENARIO).unwrap();
    spec.file.transceiver = Some(ok);
    spec.file.nic.firmware.shape = Some(NicShape::Sim);
    let (k, w) = spec.file.validate().unwrap_err();
    assert!(
        k == "transceiver" && w.contains("shape = \"image\""),
        "{k}: {w}"
    );
    // An unknown event is a parse error naming the choices.
    let e = toml::from_str::<TransceiverFile>("at_us = 1\nnic = 0\nport = 0\nevent = \"cut\"\n")
        .unwrap_err();
    assert!(
        e.to_string().contains("pull") && e.to_string().contains("los"),
        "{e}"
    );
}
