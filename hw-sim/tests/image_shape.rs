//! The image's shape of a NIC (`[nic.firmware] shape = "image"`): shards with the NIC image's
//! capacities set up through the admin ring, the image's main loop run natively. The `elf`
//! level runs the same shards with the ELF (`tests/hil_elf.rs`, feature `elf`).

use mrc_sim::hil::{run_level, LEVELS, SCENARIO};
use mrc_sim::nic::{FirmwareLevel, NicShape, Transport};
use mrc_sim::scenario::ScenarioSpec;

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
