//! The benchmark steps: each runs its commands from the repository root and turns what they
//! printed and wrote into rows.
//!
//! To add figures, add a [`Step`] to [`STEPS`] (or rows to an existing step's `collect`): a
//! name, a heading, the commands a user would type, and a function from their output to rows.
//! A command that exits non-zero, or output the function cannot read, fails that step only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::report::Row;

mod firmware;
mod hardware;
mod sim;

/// What a step's commands left behind.
pub struct Outputs {
    /// The repository root (commands run there).
    pub root: PathBuf,
    /// Cargo's target directory.
    pub target: PathBuf,
    /// Everything the commands printed (stdout and stderr, in order).
    pub log: String,
    /// Memory of the machine, MiB (a capacity baseline).
    pub memory_mib: f64,
}

impl Outputs {
    /// Outputs of commands run at `root` (target directory `root/target`) that printed `log`,
    /// for the steps' tests.
    #[cfg(test)]
    pub fn for_test(root: &Path, log: &str, memory_mib: f64) -> Outputs {
        Outputs {
            root: root.to_path_buf(),
            target: root.join("target"),
            log: log.into(),
            memory_mib,
        }
    }

    /// A file under the root, read as JSON.
    ///
    /// # Errors
    /// The file is missing or not JSON.
    pub fn json(&self, rel: impl AsRef<Path>) -> Result<Value, String> {
        let p = self.root.join(rel.as_ref());
        let text =
            std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", p.display()))
    }

    /// The median time of a criterion benchmark (`GROUP/NAME`), nanoseconds per iteration.
    ///
    /// # Errors
    /// Its `estimates.json` is missing or has no median.
    pub fn criterion_median_ns(&self, id: &str) -> Result<f64, String> {
        let p = self
            .target
            .join("criterion")
            .join(id)
            .join("new/estimates.json");
        let text = std::fs::read_to_string(&p)
            .map_err(|e| format!("no criterion estimate for {id} ({}: {e})", p.display()))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        v["median"]["point_estimate"]
            .as_f64()
            .ok_or_else(|| format!("{}: no median.point_estimate", p.display()))
    }
}

/// One step of `just bench`.
pub struct Step {
    /// Its name (`--only NAME`).
    pub name: &'static str,
    /// Its heading in BENCHMARKS.md.
    pub title: &'static str,
    /// Shell commands run in order from the repository root; the first failure ends the step.
    pub commands: &'static [&'static str],
    /// Reads the figures.
    pub collect: fn(&Outputs) -> Result<Vec<Row>, String>,
}

/// Every step, in report order (cheap and most-read first).
pub const STEPS: &[Step] = &[
    sim::DEFAULT,
    sim::FIDELITY,
    firmware::ENGINE_COST,
    firmware::IMAGE,
    firmware::FW_COST,
    hardware::DRIVER,
    sim::SPEED,
    hardware::RTL,
];

/// The step called `name`.
pub fn find(name: &str) -> Option<&'static Step> {
    STEPS.iter().find(|s| s.name == name)
}

/// `n` from the JSON value `v`, or an error naming `what`.
fn num(v: &Value, what: &str) -> Result<f64, String> {
    v.as_f64()
        .ok_or_else(|| format!("{what} is missing or not a number"))
}

/// The first unsigned integer in `text` after `marker`, skipping spaces.
fn int_after(text: &str, marker: &str) -> Option<u64> {
    let at = text.find(marker)? + marker.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// The integer just before `marker` on the first line that contains `marker` and `line_has`.
fn int_before(text: &str, line_has: &str, marker: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.contains(line_has) && l.contains(marker))?;
    let head = &line[..line.find(marker)?];
    let digits: String = head
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// Sizes of `size -A` lines (`.text  95508  0`) in `text`.
fn section_sizes(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?;
            let size = w.next()?.parse().ok()?;
            let addr = w.next()?;
            (name.starts_with('.') && w.next().is_none() && addr.parse::<u64>().is_ok())
                .then(|| (name.to_owned(), size))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_are_unique() {
        let mut names: Vec<&str> = STEPS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), STEPS.len());
        assert!(find("engine-cost").is_some());
        assert!(find("nope").is_none());
    }

    #[test]
    fn text_scanners() {
        let log = "INFO admin: 9 commands through the main loop, 16005 instr per command\n";
        assert_eq!(int_after(log, "admin:"), Some(9));
        assert_eq!(int_before(log, "admin:", "instr per command"), Some(16_005));
        assert_eq!(int_before(log, "stream:", "instr per command"), None);
        let sizes = section_sizes(".text     95508   0\n.bss 89600 268435456\nsection size addr\n");
        assert_eq!(sizes.get(".text"), Some(&95_508));
        assert_eq!(sizes.get(".bss"), Some(&89_600));
        assert_eq!(sizes.len(), 2);
    }
}
