//! The built-in hosts `mrc-sim serve` can serve.

use crate::nic_host::{FabricConfig, SimError, SimHost, SimNicConfig, WindowKind};

/// A built-in serving scenario.
pub struct ServeScenario {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line for `mrc-sim serve --help` and errors.
    pub description: &'static str,
    build: fn(u64) -> Result<SimHost, SimError>,
}

impl ServeScenario {
    /// The host, seeded.
    ///
    /// # Errors
    /// The NIC parameters do not fit the register map (a bug in the scenario).
    pub fn build(&self, seed: u64) -> Result<SimHost, SimError> {
        (self.build)(seed)
    }
}

/// When the `pair` scenario's leaf-spine link fails, ns of virtual time.
pub const PAIR_FAILURE_NS: u64 = 1_000_000;

/// Every built-in serving scenario.
pub const SCENARIOS: &[ServeScenario] = &[
    ServeScenario {
        name: "pair",
        description: "two hosts (NICs 0000:00:04.0 and 0000:00:05.0), 4 planes, the real MRC \
                      engine on each NIC over seeded multipath channels; at 1 ms of virtual time \
                      the leaf-spine link to spine 1 of 4 on plane 0 fails (its EVs are silently \
                      dropped, nobody is told) and stays down",
        build: pair,
    },
    ServeScenario {
        name: "loopback",
        description: "two hosts, functional in-memory delivery between the NICs (no engine, \
                      no fabric, no time)",
        build: |_| SimHost::loopback_pair(),
    },
];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static ServeScenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// `pair`: until NICs sit on the Clos fabric model, the failing leaf-spine link is the nearest
/// fault the NIC host's fabric has: a switch window that silently drops the EVs routed through
/// one spine of one plane (`WindowKind::SwitchBlackhole`), from [`PAIR_FAILURE_NS`] on.
fn pair(seed: u64) -> Result<SimHost, SimError> {
    let host = SimHost::with_fabric(
        &[SimNicConfig::numbered(4), SimNicConfig::numbered(5)],
        FabricConfig {
            seed,
            ..FabricConfig::default()
        },
    )?;
    host.schedule_window(
        WindowKind::SwitchBlackhole {
            plane: 0,
            spines: 4,
            spine: 1,
        },
        PAIR_FAILURE_NS,
        u64::MAX,
    );
    Ok(host)
}
