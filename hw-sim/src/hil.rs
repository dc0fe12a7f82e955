//! Hardware-in-the-loop runs: the `hil` scenario (`hw-sim/scenarios/hil.toml`) at each
//! fidelity level of the NIC, for `just hil` (a table and `target/hil.json`) and the
//! differential tests that hold the levels to each other.
//!
//! Every level must deliver the same bytes and give the same completions ([`HilRun::outcome`]);
//! times may differ (a level charges its firmware differently). [`LEVELS`] lists the levels
//! in table order; a level this build cannot run (a cargo feature missing) is reported as
//! unavailable, never silently skipped.
//!
//! ```no_run
//! use mrc_sim::hil::{run_level, LEVELS};
//! let native = run_level(&LEVELS[0], None).unwrap();
//! println!("{} bytes", native.row.delivered_bytes);
//! ```

use std::path::Path;
use std::time::Instant;

use crate::nic::{DatapathLevel, FirmwareLevel, Transport};
use crate::scenario::ScenarioSpec;

/// The scenario the levels run.
pub const SCENARIO: &str = "hil";

/// One fidelity level: who runs the NIC's firmware and what its datapath is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// The firmware level (`[nic.firmware] level`).
    pub firmware: FirmwareLevel,
    /// The datapath level (`[nic.datapath] level`).
    pub datapath: DatapathLevel,
}

/// Every level, in table order.
pub const LEVELS: &[Level] = &[
    Level {
        firmware: FirmwareLevel::Native,
        datapath: DatapathLevel::Model,
    },
    Level {
        firmware: FirmwareLevel::Elf,
        datapath: DatapathLevel::Model,
    },
    Level {
        firmware: FirmwareLevel::Native,
        datapath: DatapathLevel::Rtl,
    },
    Level {
        firmware: FirmwareLevel::Elf,
        datapath: DatapathLevel::Rtl,
    },
];

impl Level {
    /// Why this build cannot run the level, if it cannot.
    pub fn unavailable(&self) -> Option<&'static str> {
        if self.firmware == FirmwareLevel::Elf && !cfg!(feature = "elf") {
            return Some("mrc-sim was built without its `elf` cargo feature");
        }
        if self.datapath == DatapathLevel::Rtl && !cfg!(feature = "rtl") {
            return Some("mrc-sim was built without its `rtl` cargo feature");
        }
        None
    }
}

/// One row of `target/hil.json`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HilRow {
    /// Firmware level.
    pub firmware: &'static str,
    /// Datapath level.
    pub datapath: &'static str,
    /// Bytes the senders saw acknowledged (every flow's).
    pub delivered_bytes: u64,
    /// When the last flow completed, virtual us.
    pub completion_us: f64,
    /// Longest stall of any QP, virtual us.
    pub max_stall_us: f64,
    /// Wall time of the run (NIC setup and the emulated cores' boots included; reading the
    /// ELF not), s.
    pub wall_s: f64,
    /// Instructions the emulated NIC cores retired per second of the run's wall time (`null`
    /// at the native level, whose firmware is not emulated).
    pub guest_instructions_per_s: Option<f64>,
}

/// What became of one flow: what the levels must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowOutcome {
    /// Flow id.
    pub id: u32,
    /// Bytes acknowledged.
    pub acked_bytes: u64,
    /// Its last message completed.
    pub completed: bool,
    /// A message of it completed in error.
    pub failed: bool,
}

/// One level's run.
#[derive(Clone, Debug)]
pub struct HilRun {
    /// Its row.
    pub row: HilRow,
    /// Every flow's outcome, by id.
    pub outcome: Vec<FlowOutcome>,
    /// Payload bytes the receivers placed.
    pub placed_bytes: u64,
    /// Guest instructions the emulated cores retired (`None` at the native level).
    pub guest_instructions: Option<u64>,
    /// With a transceiver event: from the event to the last QP moving again, us
    /// (`RunReport::port_recovery`).
    pub port_recovery_us: Option<f64>,
}

/// Runs [`SCENARIO`] at `level` (`elf`: the ELF at `elf`, or the image built from this tree).
///
/// # Errors
/// The level is unavailable in this build, or the scenario could not run.
pub fn run_level(level: &Level, elf: Option<&'static Path>) -> Result<HilRun, String> {
    run_level_with(level, elf, None)
}

/// [`run_level`] with `transceiver` added to the scenario (a port's module pulled or going
/// dark mid-run).
///
/// # Errors
/// As [`run_level`]; the event is checked with the scenario.
pub fn run_level_with(
    level: &Level,
    elf: Option<&'static Path>,
    transceiver: Option<crate::scenario::TransceiverFile>,
) -> Result<HilRun, String> {
    if let Some(why) = level.unavailable() {
        return Err(format!(
            "{}/{}: {why}",
            level.firmware.name(),
            level.datapath.name()
        ));
    }
    let mut spec = ScenarioSpec::resolve(SCENARIO).map_err(|e| e.to_string())?;
    spec.file.nic.firmware.level = level.firmware;
    spec.file.nic.firmware.elf = elf;
    spec.file.nic.datapath.level = level.datapath;
    spec.file.transceiver = transceiver;
    spec.file
        .validate()
        .map_err(|(key, why)| format!("{SCENARIO}: {key}: {why}"))?;
    let sc = spec.scenario(Transport::Mrc);
    if level.firmware == FirmwareLevel::Elf {
        crate::nic::image::prepare_elf(elf)?;
    }
    let t = Instant::now();
    let r = crate::run::run(&sc).map_err(|e| e.to_string())?;
    let wall_s = t.elapsed().as_secs_f64();
    let guest = r
        .nics
        .iter()
        .filter_map(|n| n.firmware.guest_instructions)
        .reduce(|a, b| a + b);
    let outcome: Vec<FlowOutcome> = r
        .flow_results
        .iter()
        .map(|f| FlowOutcome {
            id: f.flow.id,
            acked_bytes: f.acked_bytes,
            completed: f.done.is_some(),
            failed: f.failed,
        })
        .collect();
    Ok(HilRun {
        row: HilRow {
            firmware: level.firmware.name(),
            datapath: level.datapath.name(),
            delivered_bytes: outcome.iter().map(|f| f.acked_bytes).sum(),
            completion_us: r.completion.as_ps() as f64 / 1e6,
            max_stall_us: r.max_stall.as_ps() as f64 / 1e6,
            wall_s,
            guest_instructions_per_s: guest.map(|g| g as f64 / wall_s.max(1e-9)),
        },
        outcome,
        placed_bytes: r.placed_bytes,
        guest_instructions: guest,
        port_recovery_us: r.port_recovery.map(|d| d.as_ps() as f64 / 1e6),
    })
}

/// Where `got` differs from `want` in delivered bytes or completions, if anywhere.
pub fn differences(want: &HilRun, got: &HilRun) -> Option<String> {
    let name = |r: &HilRun| format!("{}/{}", r.row.firmware, r.row.datapath);
    if want.outcome.len() != got.outcome.len() {
        return Some(format!(
            "{} has {} flows, {} {}",
            name(want),
            want.outcome.len(),
            name(got),
            got.outcome.len()
        ));
    }
    if let Some((a, b)) = want.outcome.iter().zip(&got.outcome).find(|(a, b)| a != b) {
        return Some(format!(
            "flow {}: {} {:?}, {} {:?}",
            a.id,
            name(want),
            a,
            name(got),
            b
        ));
    }
    (want.placed_bytes != got.placed_bytes).then(|| {
        format!(
            "placed bytes: {} {}, {} {}",
            name(want),
            want.placed_bytes,
            name(got),
            got.placed_bytes
        )
    })
}
