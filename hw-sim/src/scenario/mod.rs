//! Scenarios in TOML: loading, validation, the built-in and shipped ones.
//!
//! A scenario file ([`ScenarioFile`], the schema is in `file.rs` and every shipped file in
//! `hw-sim/scenarios/` is an example) says the fabric, the NICs, the workload, an optional
//! failure, the seed, the transports to run and who posts their work (`[host]`). [`ScenarioSpec::resolve`] takes what a user
//! typed: a path (anything ending in `.toml` or containing a `/`) or the name of a built-in.
//!
//! # Errors
//! Every problem is a [`ScenarioError`] that names the file, the key as a dotted path
//! (`fabric.queue.limit_bytes`) and why, with the line when the TOML parser knows it:
//! - syntax errors, unknown keys, missing keys and values of the wrong type (TOML + serde with
//!   `deny_unknown_fields` on every table);
//! - values out of range (the semantic checks of [`ScenarioFile::validate`], which include
//!   [`crate::fabric::FabricConfig::validate`]);
//! - an empty file, a missing or unreadable file, an unknown built-in name.
//!
//! # Built-ins
//! The scenarios in `hw-sim/scenarios/` are compiled in with `include_str!` (one source: the
//! file). `default` is the default run's scenario; [`crate::run::Scenario::default_for`] is the
//! same thing in code and a test keeps the two equal.
//!
//! ```
//! use mrc_sim::scenario::ScenarioSpec;
//! let spec = ScenarioSpec::resolve("tiny").unwrap();
//! assert_eq!(spec.name, "tiny");
//! let err = ScenarioSpec::parse("x.toml", "seed = 1\nbogus = 2\n").unwrap_err();
//! assert_eq!(err.to_string(), "x.toml: line 2: bogus: unknown key (expected one of \
//!     `description`, `seed`, `transports`, `time_limit_us`, `fabric`, `nic`, `workload`, `failure`, `transceiver`, `background`, `host`)");
//! ```

mod file;
mod validate;

pub use file::{
    ClassPolicyFile, EcnFile, EvFormatFile, FabricFile, FailureFile, HostFile, NicFile, PfcFile,
    PolicyFile, QueueFile, ScenarioFile, ShapeFile, TransceiverFile,
};

use std::path::Path;

use crate::nic::Transport;
use crate::run::Scenario;

/// The scenarios compiled into the binary: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../scenarios/default.toml")),
    (
        "permutation-1024",
        include_str!("../../scenarios/permutation-1024.toml"),
    ),
    ("tiny", include_str!("../../scenarios/tiny.toml")),
    ("ev-srv6", include_str!("../../scenarios/ev-srv6.toml")),
    ("ev-udp", include_str!("../../scenarios/ev-udp.toml")),
    ("ev-stev", include_str!("../../scenarios/ev-stev.toml")),
    ("hil", include_str!("../../scenarios/hil.toml")),
];

/// A scenario, loaded and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioSpec {
    /// Its name: the built-in name or the file stem.
    pub name: String,
    /// Where it came from: `built-in` or the path as given.
    pub origin: String,
    /// The validated contents.
    pub file: ScenarioFile,
}

/// Why a scenario could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file (as given) or `built-in NAME`.
    pub file: String,
    /// 1-based line of the problem, when the parser knows it.
    pub line: Option<usize>,
    /// The key as a dotted path (`fabric.queue.limit_bytes`), when the problem has one.
    pub key: Option<String>,
    /// Why.
    pub why: String,
}

impl core::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(l) = self.line {
            write!(f, "line {l}: ")?;
        }
        if let Some(k) = &self.key {
            write!(f, "{k}: ")?;
        }
        f.write_str(&self.why)
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioSpec {
    /// Parses and validates `text`; `file` names it in errors and gives the scenario its name
    /// (the file stem).
    ///
    /// # Errors
    /// [`ScenarioError`] naming the key and why.
    pub fn parse(file: &str, text: &str) -> Result<ScenarioSpec, ScenarioError> {
        let err = |line, key: Option<String>, why: String| ScenarioError {
            file: file.to_string(),
            line,
            key,
            why,
        };
        let blank = text.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#')
        });
        if blank {
            return Err(err(
                None,
                None,
                "the file is empty (only blanks and comments; a scenario needs at least `description`, `seed`, \
                 `time_limit_us`, [fabric], [nic] and [workload])"
                    .into(),
            ));
        }
        let de = toml::Deserializer::parse(text).map_err(|e| {
            err(
                e.span().map(|s| line_of(text, s.start)),
                None,
                e.message().trim().to_string(),
            )
        })?;
        let parsed: ScenarioFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.inner();
            let line = inner.span().map(|s| line_of(text, s.start));
            let (key, why) = explain(&path, inner.message().trim());
            err(line, key, why)
        })?;
        parsed
            .validate()
            .map_err(|(key, why)| err(None, Some(key), why))?;
        let name = Path::new(file)
            .file_stem()
            .map_or_else(|| file.to_string(), |s| s.to_string_lossy().into_owned());
        Ok(ScenarioSpec {
            name,
            origin: file.to_string(),
            file: parsed,
        })
    }

    /// Reads and validates the scenario file at `path`.
    ///
    /// # Errors
    /// [`ScenarioError`] when the file cannot be read or is not a valid scenario.
    pub fn load(path: &Path) -> Result<ScenarioSpec, ScenarioError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: shown.clone(),
            line: None,
            key: None,
            why: format!("cannot read the file: {e}"),
        })?;
        ScenarioSpec::parse(&shown, &text)
    }

    /// The built-in scenario `name`, if there is one.
    pub fn builtin(name: &str) -> Option<ScenarioSpec> {
        let (n, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        // The built-ins are checked by a test; a broken one is a build bug, reported as None.
        let mut spec = ScenarioSpec::parse(&format!("{n}.toml"), text).ok()?;
        spec.origin = "built-in".into();
        Some(spec)
    }

    /// What a user typed: a path (ends in `.toml` or contains `/`) or a built-in name.
    ///
    /// # Errors
    /// [`ScenarioError`] when the file is bad or the name is unknown.
    pub fn resolve(arg: &str) -> Result<ScenarioSpec, ScenarioError> {
        if arg.ends_with(".toml") || arg.contains('/') || arg.contains('\\') {
            return ScenarioSpec::load(Path::new(arg));
        }
        ScenarioSpec::builtin(arg).ok_or_else(|| ScenarioError {
            file: arg.to_string(),
            line: None,
            key: None,
            why: format!(
                "no such scenario: not a .toml path and not a built-in name ({})",
                BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }

    /// The run's scenario for `transport` ([`ScenarioFile::to_scenario`]).
    pub fn scenario(&self, transport: Transport) -> Scenario {
        self.file.to_scenario(transport)
    }
}

/// Every built-in: (name, one-line description).
pub fn list() -> Vec<(&'static str, String)> {
    BUILTIN
        .iter()
        .map(|(n, _)| {
            let d = ScenarioSpec::builtin(n)
                .map_or_else(|| "(invalid built-in)".into(), |s| s.file.description);
            (*n, d)
        })
        .collect()
}

fn line_of(text: &str, byte: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(byte)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Keys scenario files had that the simulator no longer takes, and what replaced them.
const RETIRED_KEYS: &[(&str, &str)] = &[(
    "nic.firmware.ns_per_event",
    "no longer a key: the firmware cores charge each step of the NIC's main loop from the \
     cost table (guest instructions per event kind measured on the NIC image under QEMU, \
     `mrc_sim::nic::fw_cost`); set `cores`, `clock_mhz` and `cpi` instead, or `timed = false` \
     for firmware in zero time",
)];

/// Turns serde's message at `path` into (dotted key, why).
fn explain(path: &str, msg: &str) -> (Option<String>, String) {
    let join = |leaf: &str| {
        if path == leaf || path.ends_with(&format!(".{leaf}")) {
            path.to_string()
        } else if path == "." || path.is_empty() {
            leaf.to_string()
        } else {
            format!("{path}.{leaf}")
        }
    };
    let quoted = |rest: &str| rest.split('`').nth(1).map(str::to_string);
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        if let Some(k) = quoted(rest) {
            let key = join(&k);
            if let Some((_, why)) = RETIRED_KEYS.iter().find(|(r, _)| *r == key) {
                return (Some(key), (*why).to_string());
            }
            let expected = rest.split_once(", expected ").map(|(_, e)| e);
            let why = match expected {
                Some(e) => format!("unknown key (expected {e})"),
                None => "unknown key".to_string(),
            };
            return (Some(join(&k)), why);
        }
    }
    if let Some(rest) = msg.strip_prefix("missing field ") {
        if let Some(k) = quoted(rest) {
            return (Some(join(&k)), "missing key".to_string());
        }
    }
    let key = (path != "." && !path.is_empty()).then(|| path.to_string());
    (key, msg.to_string())
}
