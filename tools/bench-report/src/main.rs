//! `mrc-bench-report`: runs every benchmark of the project (`just bench`) and writes
//! `BENCHMARKS.json`, `BENCHMARKS.md` and the figures table of `README.md` (all three are
//! committed: a clone has the sections a partial run keeps).
//!
//! ```text
//! mrc-bench-report run [--only STEP...] [--skip STEP...]   # measure, then write all three
//!                      [--drop-others]                      # (see below)
//! mrc-bench-report render                                 # rewrite the Markdown from the JSON
//! mrc-bench-report list                                   # the steps and their commands
//! ```
//! Each step ([`steps::STEPS`]) runs the commands a user would type, from the repository root,
//! with their output shown and kept in `target/bench/STEP.log`. A step whose command fails, or
//! whose output cannot be read, is reported as failed with the reason; the other steps still
//! run. With `--only`/`--skip`, the steps not run keep their section from the previous
//! `BENCHMARKS.json` when it was measured on the same machine (each section says when and at
//! which commit it was measured); a step not run without such a section makes the run refuse
//! before measuring (its section would vanish from BENCHMARKS.md), unless `--drop-others`.
//!
//! Exit code: 0 when every step gave its figures, 1 when some failed (the files are written
//! either way), 2 for a usage or file error.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::{Parser, Subcommand};

mod machine;
mod report;
mod steps;

use report::{Report, Section};
use steps::{Outputs, Step, STEPS};

#[derive(Parser)]
#[command(
    name = "mrc-bench-report",
    version,
    about = "Run the project's benchmarks and write BENCHMARKS.md"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// The repository root (default: the workspace this tool was built in).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the steps, then write BENCHMARKS.json, BENCHMARKS.md and the README's table.
    Run {
        /// Run only these steps (the others keep their previous section, if any).
        #[arg(long, value_name = "STEP", num_args = 1..)]
        only: Vec<String>,
        /// Run every step but these.
        #[arg(long, value_name = "STEP", num_args = 1..)]
        skip: Vec<String>,
        /// With --only/--skip: drop the sections of the steps not run that have no previous
        /// section from this machine (without it, the run refuses before measuring).
        #[arg(long)]
        drop_others: bool,
    },
    /// Write BENCHMARKS.md and the README's table from BENCHMARKS.json.
    Render,
    /// List the steps and their commands.
    List,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = cli.root.unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .unwrap_or_else(|_| PathBuf::from("."))
    });
    let result = match cli.cmd {
        Cmd::List => {
            for s in STEPS {
                println!("{:<14} {}", s.name, s.title);
                for c in s.commands {
                    println!("{:<14}   {c}", "");
                }
            }
            Ok(true)
        }
        Cmd::Render => read_report(&root).and_then(|r| write_outputs(&root, &r).map(|()| true)),
        Cmd::Run {
            only,
            skip,
            drop_others,
        } => run(&root, &only, &skip, drop_others),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("mrc-bench-report: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn json_path(root: &Path) -> PathBuf {
    root.join("BENCHMARKS.json")
}

fn read_report(root: &Path) -> Result<Report, String> {
    let p = json_path(root);
    let text =
        std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a report: {e}", p.display()))
}

fn write_outputs(root: &Path, report: &Report) -> Result<(), String> {
    let write = |p: PathBuf, text: String| {
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    write(json_path(root), json + "\n")?;
    write(root.join("BENCHMARKS.md"), report::markdown(report) + "\n")?;
    let readme = root.join("README.md");
    let text = std::fs::read_to_string(&readme)
        .map_err(|e| format!("cannot read {}: {e}", readme.display()))?;
    let text = report::splice(&text, &report::headline_table(report))
        .map_err(|e| format!("{}: {e}", readme.display()))?;
    write(readme, text)?;
    eprintln!("wrote BENCHMARKS.json, BENCHMARKS.md and the figures table of README.md");
    Ok(())
}

fn run(root: &Path, only: &[String], skip: &[String], drop_others: bool) -> Result<bool, String> {
    for name in only.iter().chain(skip) {
        if steps::find(name).is_none() {
            let names: Vec<&str> = STEPS.iter().map(|s| s.name).collect();
            return Err(format!(
                "unknown step `{name}` (one of: {})",
                names.join(", ")
            ));
        }
    }
    let machine = machine::machine();
    let previous = read_report(root)
        .ok()
        .filter(|r| r.machine.cpu_model == machine.cpu_model && r.machine.cores == machine.cores);
    let wanted = |step: &Step| {
        (only.is_empty() || only.iter().any(|n| n == step.name))
            && !skip.iter().any(|n| n == step.name)
    };
    let kept = |step: &Step| {
        previous
            .as_ref()
            .is_some_and(|r| r.sections.iter().any(|s| s.step == step.name))
    };
    let lost: Vec<&str> = STEPS
        .iter()
        .filter(|s| !wanted(s) && !kept(s))
        .map(|s| s.name)
        .collect();
    if !lost.is_empty() && !drop_others {
        return Err(format!(
            "{} has no section from this machine for {}: BENCHMARKS.md and the README's table \
             would lose them. Run every step (`just bench`), put back the BENCHMARKS.json \
             they were written from, or pass --drop-others",
            json_path(root).display(),
            lost.join(", ")
        ));
    }
    std::fs::create_dir_all(root.join("target/bench")).map_err(|e| e.to_string())?;
    let mut sections = Vec::new();
    let mut ok = true;
    for step in STEPS {
        if !wanted(step) {
            let kept = previous
                .as_ref()
                .and_then(|r| r.sections.iter().find(|s| s.step == step.name));
            if let Some(s) = kept {
                sections.push(s.clone());
            }
            continue;
        }
        let s = run_step(root, step, machine.memory_gib * 1024.0);
        match &s.error {
            None => eprintln!("== {}: {} figure(s)", step.name, s.rows.len()),
            Some(e) => {
                ok = false;
                eprintln!("== {}: FAILED: {e}", step.name);
            }
        }
        sections.push(s);
    }
    let report = Report { machine, sections };
    write_outputs(root, &report)?;
    Ok(ok)
}

/// Runs one step's commands (output shown and kept in `target/bench/STEP.log`) and reads its
/// figures.
fn run_step(root: &Path, step: &Step, memory_mib: f64) -> Section {
    let started = machine::now_utc();
    let load_at_start = machine::load_average();
    let commit = machine::commit(root);
    let clock = Instant::now();
    let log_path = root.join(format!("target/bench/{}.log", step.name));
    let _ = std::fs::write(&log_path, "");
    let mut error = None;
    for cmd in step.commands {
        eprintln!("== {}: {cmd}", step.name);
        // The command's output goes to the terminal and, through tee, to the step's log.
        let script = format!(
            "set -o pipefail; ( {cmd} ) 2>&1 | tee -a {}",
            shell_quote(&log_path.to_string_lossy())
        );
        let status = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(root)
            .env("CARGO_TERM_COLOR", "never")
            .status();
        let failure = match status {
            Ok(s) if s.success() => None,
            Ok(s) => Some(format!("`{cmd}` failed ({s})")),
            Err(e) => Some(format!("cannot start bash for `{cmd}`: {e}")),
        };
        if let Some(f) = failure {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            error = Some(format!("{f}; last output: {}", tail.join(" / ")));
            break;
        }
    }
    let rows = match error {
        Some(_) => Vec::new(),
        None => {
            let out = Outputs {
                root: root.to_owned(),
                target: std::env::var_os("CARGO_TARGET_DIR")
                    .map_or_else(|| root.join("target"), |t| root.join(t)),
                log: std::fs::read_to_string(&log_path).unwrap_or_default(),
                memory_mib,
            };
            match (step.collect)(&out) {
                Ok(rows) if rows.is_empty() => {
                    error = Some("the output gave no figures".into());
                    rows
                }
                Ok(rows) => rows,
                Err(e) => {
                    error = Some(format!("reading the figures: {e}"));
                    Vec::new()
                }
            }
        }
    };
    Section {
        step: step.name.into(),
        title: step.title.into(),
        commands: step.commands.iter().map(|c| (*c).into()).collect(),
        started,
        commit,
        seconds: clock.elapsed().as_secs_f64(),
        load_at_start,
        error,
        rows,
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed BENCHMARKS.md and the README's figures table are what `render` writes
    /// from the committed BENCHMARKS.json: neither was edited by hand, nor is the JSON behind.
    #[test]
    fn the_committed_report_is_rendered_from_the_committed_json() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let report = read_report(&root).unwrap();
        let md = std::fs::read_to_string(root.join("BENCHMARKS.md")).unwrap();
        assert!(
            md == report::markdown(&report) + "\n",
            "BENCHMARKS.md differs from what BENCHMARKS.json renders \
             (cargo run -q -p mrc-bench-report -- render)"
        );
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let table = report::headline_table(&report);
        assert_eq!(report::splice(&readme, &table).unwrap(), readme);
    }

    /// A partial run with no previous report refuses before measuring anything, naming the
    /// sections it would drop; an unknown step is refused first.
    #[test]
    fn a_partial_run_does_not_drop_sections_silently() {
        let root = std::env::temp_dir().join(format!("mrc-bench-partial-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let e = run(&root, &["engine-cost".into()], &[], false).unwrap_err();
        assert!(
            e.contains("sim-default") && e.contains("--drop-others"),
            "{e}"
        );
        assert!(!e.contains("engine-cost,"), "{e}");
        assert!(
            !root.join("target/bench").exists(),
            "nothing ran, nothing was written"
        );
        let e = run(&root, &["no-such-step".into()], &[], true).unwrap_err();
        assert!(e.contains("unknown step `no-such-step`"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
