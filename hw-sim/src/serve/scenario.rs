//! The built-in hosts `mrc-sim serve` can serve.

use crate::nic_host::{ClosConfig, SimError, SimHost, SimNicConfig, WindowKind};

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
        description: "two hosts (NICs 0000:00:04.0 and 0000:00:05.0) on two leaves of a \
                      4-plane leaf-spine, each NIC the simulator's full NIC model; at 1 ms of \
                      virtual time the link from the first NIC's leaf to spine 1 on plane 0 \
                      starts dropping every packet (nobody is told) and stays that way",
        build: pair,
    },
    ServeScenario {
        name: "healthy",
        description: "the two hosts of `pair` on the same fabric, with no failure",
        build: healthy,
    },
];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static ServeScenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// `healthy`: [`SimHost::on_clos`] with the default Clos seeded.
fn healthy(seed: u64) -> Result<SimHost, SimError> {
    let mut cfg = ClosConfig::default();
    cfg.scenario.seed = seed;
    SimHost::on_clos(&[SimNicConfig::numbered(4), SimNicConfig::numbered(5)], cfg)
}

/// `pair`: [`SimHost::on_clos`] with the default Clos ([`ClosConfig::default`]) seeded, and a
/// [`WindowKind::LinkBlackhole`] on plane 0 between leaf 0 and spine 1 from
/// [`PAIR_FAILURE_NS`] on.
fn pair(seed: u64) -> Result<SimHost, SimError> {
    let mut cfg = ClosConfig::default();
    cfg.scenario.seed = seed;
    let host = SimHost::on_clos(&[SimNicConfig::numbered(4), SimNicConfig::numbered(5)], cfg)?;
    host.schedule_window(
        WindowKind::LinkBlackhole {
            plane: 0,
            leaf: 0,
            spine: 1,
        },
        PAIR_FAILURE_NS,
        u64::MAX,
    );
    Ok(host)
}
