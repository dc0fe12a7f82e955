//! The report: what one `just bench` measured, as JSON (`BENCHMARKS.json`) and as Markdown
//! (`BENCHMARKS.md`, and the figures table of the README).
//!
//! Every row is a figure, its baseline and their ratio (`value / baseline`). A baseline is
//! either measured in the same run (`same run`) or a fixed limit the figure is held to (`budget`,
//! `capacity`); the Markdown says which. A step whose command failed keeps its section, with the
//! reason and no rows, so one broken tool never hides the rest of the report.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// The machine the figures were measured on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model (`model name` of `/proc/cpuinfo`).
    pub cpu_model: String,
    /// Logical CPUs the process may use.
    pub cores: usize,
    /// Memory (`MemTotal` of `/proc/meminfo`), GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
}

/// What a baseline is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineKind {
    /// Measured (or computed from the scenario) in the same run as the figure.
    SameRun,
    /// A limit the project holds the figure to.
    Budget,
    /// The size of the resource the figure uses (memory, a device).
    Capacity,
}

impl BaselineKind {
    fn label(self) -> &'static str {
        match self {
            BaselineKind::SameRun => "same run",
            BaselineKind::Budget => "budget",
            BaselineKind::Capacity => "capacity",
        }
    }
}

/// The figure a row is compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// What it is, in a few words.
    pub what: String,
    /// Its value, in the row's unit.
    pub value: f64,
    /// Measured in the same run, or a limit.
    pub kind: BaselineKind,
}

/// One figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What is measured.
    pub figure: String,
    /// The figure.
    pub value: f64,
    /// Its unit (`us`, `M WR/s`, `bytes`, ...).
    pub unit: String,
    /// What it is compared with.
    pub baseline: Baseline,
    /// `value / baseline.value` (`None` when the baseline is zero).
    pub ratio: Option<f64>,
    /// Context: the other figures of the same measurement.
    pub note: String,
    /// The row also goes into the README's figures table.
    pub headline: bool,
}

impl Row {
    /// A row with its ratio computed.
    pub fn new(figure: impl Into<String>, value: f64, unit: &str, baseline: Baseline) -> Row {
        let ratio = (baseline.value != 0.0).then(|| value / baseline.value);
        Row {
            figure: figure.into(),
            value,
            unit: unit.into(),
            baseline,
            ratio,
            note: String::new(),
            headline: false,
        }
    }

    /// The same row with a note.
    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }

    /// The same row, marked for the README.
    pub fn headline(mut self) -> Row {
        self.headline = true;
        self
    }
}

/// A baseline measured in the same run.
pub fn same_run(what: impl Into<String>, value: f64) -> Baseline {
    Baseline {
        what: what.into(),
        value,
        kind: BaselineKind::SameRun,
    }
}

/// A budget.
pub fn budget(what: impl Into<String>, value: f64) -> Baseline {
    Baseline {
        what: what.into(),
        value,
        kind: BaselineKind::Budget,
    }
}

/// A capacity.
pub fn capacity(what: impl Into<String>, value: f64) -> Baseline {
    Baseline {
        what: what.into(),
        value,
        kind: BaselineKind::Capacity,
    }
}

/// What one step measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// The step's name (`mrc-bench-report run --only NAME`).
    pub step: String,
    /// Its heading.
    pub title: String,
    /// The commands it ran, in order.
    pub commands: Vec<String>,
    /// When it started (UTC, `YYYY-MM-DD HH:MM`).
    pub started: String,
    /// The git commit measured.
    pub commit: String,
    /// Wall-clock seconds the step took (builds included).
    pub seconds: f64,
    /// 1-minute load average when it started (other work on the machine).
    pub load_at_start: f64,
    /// Why the step gave no figures, if it did not.
    pub error: Option<String>,
    /// Its figures.
    pub rows: Vec<Row>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Where it was measured.
    pub machine: Machine,
    /// One section per step, in step order.
    pub sections: Vec<Section>,
}

/// `v` with thousands separators and `decimals` decimals.
pub fn number(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(i, f)| (i, f));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 && out.chars().any(|c| c != '0' && c != ',' && c != '.') {
        out.insert(0, '-');
    }
    out
}

/// A figure in a readable precision: integers above 1,000, one decimal above 10, else three
/// significant digits.
pub fn figure(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || (a >= 10.0 && v.fract() == 0.0) {
        number(v, 0)
    } else if a >= 10.0 {
        number(v, 1)
    } else if a >= 1.0 {
        number(v, 2)
    } else if a == 0.0 {
        "0".into()
    } else {
        let digits = (2 - a.log10().floor() as i32).clamp(0, 9) as usize;
        number(v, digits)
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{}x", figure(r)))
}

fn with_unit(v: f64, unit: &str) -> String {
    if unit.is_empty() {
        figure(v)
    } else {
        format!("{} {unit}", figure(v))
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn baseline_cell(r: &Row) -> String {
    format!(
        "{} ({}; {})",
        with_unit(r.baseline.value, &r.unit),
        cell(&r.baseline.what),
        r.baseline.kind.label()
    )
}

/// `BENCHMARKS.md`.
pub fn markdown(report: &Report) -> String {
    let m = &report.machine;
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Written by `just bench` (`tools/bench-report`); do not edit. Every figure the project\n\
         states, each next to a baseline and their ratio (figure / baseline). A baseline marked\n\
         *same run* was measured (or computed from the same scenario) in the same run as its\n\
         figure; *budget* and *capacity* are the fixed limits a figure is held to. The machine-\n\
         readable form is `BENCHMARKS.json`.\n"
    );
    let _ = writeln!(
        out,
        "Machine: {}, {} logical CPUs, {} GiB RAM, Linux {}.\n\
         Wall-clock figures depend on what else the machine ran; each section gives its 1-minute\n\
         load average at the start.\n",
        m.cpu_model,
        m.cores,
        number(m.memory_gib, 1),
        m.kernel
    );
    let _ = writeln!(out, "| section | step | started (UTC) | commit | result |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for s in &report.sections {
        let result = match &s.error {
            None if s.rows.len() == 1 => "1 figure".into(),
            None => format!("{} figures", s.rows.len()),
            Some(_) => "**failed**".into(),
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | `{}` | {} |",
            cell(&s.title),
            s.step,
            s.started,
            s.commit,
            result
        );
    }
    out.push('\n');
    for s in &report.sections {
        section(&mut out, s);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

fn section(out: &mut String, s: &Section) {
    let _ = writeln!(out, "## {}\n", s.title);
    let commands: Vec<String> = s.commands.iter().map(|c| format!("`{c}`")).collect();
    let _ = writeln!(
        out,
        "Command: {}. Took {} s, load average {} at the start, commit `{}`.\n",
        commands.join(", then "),
        number(s.seconds, 0),
        number(s.load_at_start, 2),
        s.commit
    );
    if let Some(e) = &s.error {
        let _ = writeln!(out, "**Failed:** {}\n", cell(e));
        return;
    }
    let _ = writeln!(out, "| figure | value | baseline | ratio | note |");
    let _ = writeln!(out, "|---|---:|---|---:|---|");
    for r in &s.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&r.figure),
            with_unit(r.value, &r.unit),
            baseline_cell(r),
            ratio(r.ratio),
            cell(&r.note)
        );
    }
    out.push('\n');
}

/// The anchor GitHub gives the heading `title` (lowercase, punctuation dropped, spaces to `-`).
pub fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The README's figures table: the headline rows, each linking to its section of
/// `BENCHMARKS.md`.
pub fn headline_table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| figure | value | baseline | ratio |");
    let _ = writeln!(out, "|---|---:|---|---:|");
    for s in &report.sections {
        let link = |text: &str| format!("[{}](BENCHMARKS.md#{})", cell(text), anchor(&s.title));
        if let Some(e) = &s.error {
            let _ = writeln!(
                out,
                "| {} | failed: {} | | |",
                link(&s.title),
                cell(e.lines().next().unwrap_or(""))
            );
            continue;
        }
        for r in s.rows.iter().filter(|r| r.headline) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                link(&r.figure),
                with_unit(r.value, &r.unit),
                baseline_cell(r),
                ratio(r.ratio)
            );
        }
    }
    out
}

/// The marker lines around the generated table in the README.
pub const BEGIN: &str = "<!-- bench:begin (written by `just bench`; do not edit) -->";
/// See [`BEGIN`].
pub const END: &str = "<!-- bench:end -->";

/// `text` with what lies between [`BEGIN`] and [`END`] replaced by `table`.
///
/// # Errors
/// The markers are missing or out of order.
pub fn splice(text: &str, table: &str) -> Result<String, String> {
    let b = text
        .find(BEGIN)
        .ok_or_else(|| format!("no `{BEGIN}` line"))?;
    let e = text.find(END).ok_or_else(|| format!("no `{END}` line"))?;
    if e < b {
        return Err(format!("`{END}` comes before `{BEGIN}`"));
    }
    let head = &text[..b + BEGIN.len()];
    Ok(format!("{head}\n{table}{}", &text[e..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            machine: Machine {
                cpu_model: "Test CPU @ 2.0GHz".into(),
                cores: 2,
                memory_gib: 23.5,
                kernel: "6.1.0".into(),
            },
            sections: vec![
                Section {
                    step: "sim-default".into(),
                    title: "Default simulation".into(),
                    commands: vec!["cargo run --release".into()],
                    started: "2030-01-02 03:04".into(),
                    commit: "abc1234".into(),
                    seconds: 21.4,
                    load_at_start: 1.5,
                    error: None,
                    rows: vec![
                        Row::new(
                            "mrc completion",
                            192.4,
                            "us",
                            same_run("ideal completion", 170.9),
                        )
                        .note("seed 1")
                        .headline(),
                        Row::new(
                            "image .text",
                            95_508.0,
                            "bytes",
                            budget("ITCM | code", 131_072.0),
                        ),
                    ],
                },
                Section {
                    step: "rtl".into(),
                    title: "RTL synthesis".into(),
                    commands: vec!["fpga-rtl/scripts/synth.sh".into()],
                    started: "2030-01-02 03:05".into(),
                    commit: "abc1234".into(),
                    seconds: 3.0,
                    load_at_start: 0.5,
                    error: Some("yosys not found (exit 127)\nmore".into()),
                    rows: vec![],
                },
            ],
        }
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(1_234_567.0, 0), "1,234,567");
        assert_eq!(number(-1234.5, 1), "-1,234.5");
        assert_eq!(number(999.0, 0), "999");
        assert_eq!(figure(192.44), "192.4");
        assert_eq!(figure(1.1258), "1.13");
        assert_eq!(figure(0.01234), "0.0123");
        assert_eq!(figure(95_508.0), "95,508");
        assert_eq!(figure(300.0), "300");
        assert_eq!(figure(0.0), "0");
    }

    #[test]
    fn markdown_has_rows_baselines_ratios_and_failures() {
        let md = markdown(&report());
        assert!(md.starts_with("# Benchmarks\n"));
        assert!(
            md.contains("Machine: Test CPU @ 2.0GHz, 2 logical CPUs, 23.5 GiB RAM, Linux 6.1.0.\n")
        );
        assert!(md.contains(
            "| mrc completion | 192.4 us | 170.9 us (ideal completion; same run) | 1.13x | seed 1 |"
        ));
        // A pipe in a cell is escaped, and a budget says so.
        assert!(md.contains("131,072 bytes (ITCM \\| code; budget) | 0.729x"));
        assert!(md.contains("Command: `cargo run --release`. Took 21 s, load average 1.50"));
        assert!(md.contains("**Failed:** yosys not found (exit 127) more"));
        assert!(
            md.contains("| RTL synthesis | `rtl` | 2030-01-02 03:05 | `abc1234` | **failed** |")
        );
        assert!(!md.ends_with("\n\n"));
    }

    #[test]
    fn headline_table_takes_marked_rows_and_failed_steps() {
        let t = headline_table(&report());
        assert!(t.contains("| [mrc completion](BENCHMARKS.md#default-simulation) | 192.4 us |"));
        assert!(!t.contains("image .text"));
        assert!(t.contains(
            "| [RTL synthesis](BENCHMARKS.md#rtl-synthesis) | failed: yosys not found (exit 127) | | |"
        ));
        assert_eq!(
            anchor("Simulator: the fidelity scenario (permutation-1024)"),
            "simulator-the-fidelity-scenario-permutation-1024"
        );
    }

    #[test]
    fn splice_replaces_between_markers_only() {
        let readme = format!("intro\n{BEGIN}\nold table\n{END}\nrest\n");
        let out = splice(&readme, "| new |\n").unwrap();
        assert_eq!(out, format!("intro\n{BEGIN}\n| new |\n{END}\nrest\n"));
        assert!(splice("no markers", "x").is_err());
        assert!(splice(&format!("{END}\n{BEGIN}\n"), "x").is_err());
    }

    #[test]
    fn json_round_trips() {
        let r = report();
        let v = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&v).unwrap();
        assert_eq!(back, r);
        assert!(v.contains("\"kind\":\"same_run\""));
    }

    #[test]
    fn zero_baseline_has_no_ratio() {
        let r = Row::new("x", 5.0, "", same_run("nothing", 0.0));
        assert_eq!(r.ratio, None);
    }
}
