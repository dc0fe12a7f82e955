//! `mrc-sim bench` (`just bench-sim`): what the simulator costs as the fabric grows.
//!
//! Each size runs in its own process (`mrc-sim bench-one NAME`, so that its peak RSS is its
//! own), the mrc transport only, without an observer. The sizes ([`case`]):
//! - `1k`: the fidelity scenario `permutation-1024` as shipped (three-tier k = 16 fat tree,
//!   1024 hosts, 100G, 2 MB permutation at t = 0; the htsim reference runs it at ~20 K data
//!   packets and ~0.5 M events per CPU second), its work posted by the NIC model's flow
//!   table (`[host] model = "flows"`, as every size but the next);
//! - `1k-driver`: the same run through the full loop: an application per host on
//!   `mrc-driver`, the NIC model's device side, every byte moved through host memory and
//!   checked (`[host] model = "driver"`, the scenario's own setting);
//! - `4k`, `16k`: the same settings on k = 26 (4394 hosts) and k = 40 (16,000 hosts) fat trees,
//!   the nearest three-tier sizes;
//! - `128k` (`--full` only): the MRC paper's two-tier fabric, 131,072 hosts, 8 planes x 100G,
//!   512-port switches, every host sending 1 MiB in a permutation, the fidelity scenario's
//!   queue, ECN, trimming and NIC settings;
//! - `2t-16k`, `2t-32k`, `2t-64k` (by name only): the same two-tier 8-plane fabric and workload
//!   with 16,384, 32,768 and 65,536 hosts (fewer leaves, spines of fewer ports), to see how
//!   the 128K size's cost grows with the hosts.
//!
//! A row is the cost of building and running the scenario: wall and CPU seconds of the child
//! process's run, events and data packets (first transmissions and retransmissions) per CPU
//! second, and the child's peak RSS; with `threads` (`--threads N`, one row per count) and
//! `mode` (how it ran, [`crate::run::parallel::Mode`]). A size of at most [`REPEAT_HOSTS`]
//! hosts runs `--repeat N` times (default 3) and its row is the run of median CPU time, with
//! every run's CPU seconds in `cpu_s_runs`: this machine's noise moves a single 5-second run
//! by 10-20 %. A size that cannot run (its process fails or refuses the
//! scenario) gets a row with its error and null figures.

use serde_json::{json, Value};

use crate::fabric::Shape;
use crate::nic::Transport;
use crate::run::perf::{Meter, RunCost};
use crate::scenario::{ScenarioSpec, ShapeFile};
use crate::workload::Workload;

/// One size of the benchmark.
#[derive(Clone, Debug)]
pub struct Case {
    /// Its name on the command line (`1k`, `4k`, `16k`, `128k`).
    pub name: &'static str,
    /// The scenario (transports: mrc only).
    pub spec: ScenarioSpec,
}

impl Case {
    /// Who posts the work (`driver` or `flows`).
    pub fn host(&self) -> &'static str {
        self.spec.file.host.model.name()
    }

    /// Hosts of the fabric.
    pub fn hosts(&self) -> u32 {
        self.spec.scenario(Transport::Mrc).fabric.shape.hosts()
    }
}

/// The names of the sizes, smallest first; `full` adds `128k`.
pub fn names(full: bool) -> Vec<&'static str> {
    let mut v = vec!["1k", "1k-driver", "4k", "16k"];
    if full {
        v.push("128k");
    }
    v
}

/// The scenario of size `name`, or `None` for an unknown name.
pub fn case(name: &str) -> Option<Case> {
    let mut spec = ScenarioSpec::resolve("permutation-1024").ok()?;
    spec.file.transports = vec![Transport::Mrc];
    // The flow hosts: a device and its driver per host do not scale to these sizes.
    spec.file.host.model = crate::run::HostModel::Flows;
    let f = &mut spec.file;
    let name: &'static str = match name {
        "1k" => "1k",
        "1k-driver" => {
            f.host.model = crate::run::HostModel::Driver;
            "1k-driver"
        }
        "4k" => {
            f.fabric.shape = ShapeFile::FatTree { k: 26 };
            "4k"
        }
        "16k" => {
            f.fabric.shape = ShapeFile::FatTree { k: 40 };
            "16k"
        }
        "128k" | "2t-16k" | "2t-32k" | "2t-64k" => {
            let (name, hosts) = match name {
                "2t-16k" => ("2t-16k", 16_384),
                "2t-32k" => ("2t-32k", 32_768),
                "2t-64k" => ("2t-64k", 65_536),
                _ => ("128k", 131_072),
            };
            f.fabric.shape = ShapeFile::LeafSpine { hosts, radix: 512 };
            f.fabric.planes = 8;
            f.workload = Workload::Permutation {
                bytes_per_host: 1 << 20,
                msg_bytes: 1 << 20,
            };
            name
        }
        _ => return None,
    };
    spec.name = format!("bench-{name}");
    spec.origin = "built-in (mrc-sim bench)".into();
    f.description = match f.fabric.shape {
        ShapeFile::FatTree { k } => format!(
            "bench {name}: fidelity settings on a k={k} fat tree ({} hosts), 2 MB permutation{}",
            Shape::FatTree { k }.hosts(),
            match f.host.model {
                crate::run::HostModel::Driver => ", through the driver",
                crate::run::HostModel::Flows => "",
            }
        ),
        ShapeFile::LeafSpine { hosts, radix } => format!(
            "bench {name}: two-tier, {hosts} hosts, {} planes x 100G, {radix}-port switches, 1 MiB permutation",
            f.fabric.planes
        ),
    };
    Some(Case { name, spec })
}

/// One row of `target/bench-sim.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Size name.
    pub name: String,
    /// Who posted the work (`driver`: the full loop; `flows`: the NIC model's flow table).
    pub host: String,
    /// Hosts.
    pub hosts: u32,
    /// The scenario's one-line description.
    pub description: String,
    /// What the run cost (zeros when it did not run).
    pub cost: RunCost,
    /// Threads the run was given.
    pub threads: usize,
    /// How it ran ([`crate::run::parallel::Mode`], as text).
    pub mode: String,
    /// Flows that completed, of `hosts` (a check that the run did its work).
    pub flows_completed: u32,
    /// Why the size did not run, if it did not.
    pub error: Option<String>,
    /// CPU seconds of each run of the size, in run order (the row is the median one's).
    pub cpu_s_runs: Vec<f64>,
}

/// Sizes of at most this many hosts are run several times ([`median`]); larger ones run
/// once (a run of minutes averages the machine's noise itself).
pub const REPEAT_HOSTS: u32 = 5_000;

/// The row of median CPU time of `runs` (the upper median of an even count), with every run's
/// CPU seconds in `cpu_s_runs`; a failed run's row if any failed. `None` for no runs.
pub fn median(mut runs: Vec<Row>) -> Option<Row> {
    if let Some(i) = runs.iter().position(|r| r.error.is_some()) {
        return Some(runs.swap_remove(i));
    }
    let all: Vec<f64> = runs.iter().filter_map(|r| r.cost.cpu_s).collect();
    runs.sort_by(|a, b| {
        a.cost
            .cpu_s
            .partial_cmp(&b.cost.cpu_s)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mid = runs.len() / 2;
    let mut row = runs.into_iter().nth(mid)?;
    row.cpu_s_runs = all;
    Some(row)
}

impl Row {
    /// The row as JSON (the keys `just bench-sim` promises, plus context).
    pub fn to_json(&self) -> Value {
        let c = &self.cost;
        json!({
            "name": self.name,
            "host": self.host,
            "hosts": self.hosts,
            "description": self.description,
            "error": self.error,
            "wall_s": self.error.is_none().then_some(c.wall_s),
            "cpu_s": c.cpu_s,
            "events": c.events,
            "data_packets": c.data_packets,
            "events_per_cpu_s": c.events_per_cpu_s(),
            "data_packets_per_cpu_s": c.data_packets_per_cpu_s(),
            "peak_rss_mb": c.peak_rss_mb(),
            "flows_completed": self.flows_completed,
            "threads": self.threads,
            "mode": self.mode,
            "cpu_s_runs": self.cpu_s_runs,
        })
    }

    /// Reads back a row written by [`Row::to_json`].
    pub fn from_json(v: &Value) -> Option<Row> {
        let f = |k: &str| v.get(k).and_then(Value::as_f64);
        let u = |k: &str| v.get(k).and_then(Value::as_u64);
        Some(Row {
            name: v.get("name")?.as_str()?.to_string(),
            host: v.get("host")?.as_str()?.to_string(),
            hosts: u32::try_from(u("hosts")?).ok()?,
            description: v.get("description")?.as_str()?.to_string(),
            cost: RunCost {
                events: u("events").unwrap_or(0),
                data_packets: u("data_packets").unwrap_or(0),
                wall_s: f("wall_s").unwrap_or(0.0),
                cpu_s: f("cpu_s"),
                peak_rss_bytes: f("peak_rss_mb").map(|m| (m * 1024.0 * 1024.0) as u64),
            },
            flows_completed: u32::try_from(u("flows_completed").unwrap_or(0)).unwrap_or(0),
            threads: usize::try_from(u("threads").unwrap_or(1)).unwrap_or(1),
            mode: v
                .get("mode")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            error: v.get("error").and_then(Value::as_str).map(str::to_string),
            cpu_s_runs: v
                .get("cpu_s_runs")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default(),
        })
    }

    /// A row for a size that did not run.
    pub fn failed(case: &Case, error: String) -> Row {
        Row {
            name: case.name.to_string(),
            host: case.host().to_string(),
            hosts: case.hosts(),
            description: case.spec.file.description.clone(),
            cost: RunCost::default(),
            threads: 1,
            mode: String::new(),
            flows_completed: 0,
            error: Some(error),
            cpu_s_runs: Vec::new(),
        }
    }
}

/// Peak memory per host to expect on the fat-tree sizes (measured about 270 KiB, with margin).
pub const BYTES_PER_HOST: u64 = 280 << 10;
/// Peak memory per host to expect on the two-tier 8-plane sizes (measured 164 KiB at 16,384
/// hosts with each NIC's datapath stage and engine, with margin).
pub const TWO_TIER_BYTES_PER_HOST: u64 = 172 << 10;

/// Peak memory per host to expect through the driver on the 1K fat tree (measured about 5.6
/// MiB: the application's 2 MB source and destination regions, its rings, the device side,
/// with margin).
pub const DRIVER_BYTES_PER_HOST: u64 = 6 << 20;

/// What a partitioned run ([`crate::run::parallel`]) adds per host and per extra thread: each
/// partition's copy of the fabric's tables (about 24 KiB per host).
pub const PARALLEL_BYTES_PER_HOST: u64 = 24 << 10;

/// The expected peak memory per host of `case` on `threads` threads.
pub fn bytes_per_host(case: &Case, threads: usize) -> u64 {
    let base = match (case.spec.file.host.model, case.spec.file.fabric.shape) {
        (crate::run::HostModel::Driver, _) => DRIVER_BYTES_PER_HOST,
        (_, ShapeFile::LeafSpine { .. }) => TWO_TIER_BYTES_PER_HOST,
        (_, ShapeFile::FatTree { .. }) => BYTES_PER_HOST,
    };
    base + PARALLEL_BYTES_PER_HOST * (threads.max(1) as u64 - 1)
}

/// Runs one size in this process on up to `threads` threads ([`crate::run::parallel`]) and
/// measures it (the `bench-one` subcommand). A size whose expected peak memory
/// ([`bytes_per_host`] per host) exceeds what the system has available is refused with an error
/// row rather than run into the out-of-memory killer.
pub fn run_case(case: &Case, threads: usize) -> Row {
    if let Err((key, why)) = case.spec.file.validate() {
        return Row::failed(case, format!("{key}: {why}"));
    }
    let per_host = bytes_per_host(case, threads);
    let need = u64::from(case.hosts()) * per_host;
    if let Some(avail) = crate::run::perf::available_bytes().filter(|a| *a < need) {
        return Row::failed(
            case,
            format!(
                "expects up to ~{} MiB ({} KiB per host), {} MiB available",
                need >> 20,
                per_host >> 10,
                avail >> 20
            ),
        );
    }
    let sc = case.spec.scenario(Transport::Mrc);
    let meter = Meter::start();
    match crate::run::parallel::run_threads(&sc, threads, 0) {
        Ok((r, mode)) => Row {
            name: case.name.to_string(),
            host: case.host().to_string(),
            hosts: r.hosts,
            description: case.spec.file.description.clone(),
            cost: meter.finish(r.events, r.data_sent + r.retransmits),
            threads,
            mode: mode.to_string(),
            flows_completed: r.completed,
            error: None,
            cpu_s_runs: Vec::new(),
        },
        Err(e) => Row::failed(case, e.to_string()),
    }
}

/// The whole `target/bench-sim.json` document.
pub fn document(rows: &[Row]) -> Value {
    json!({
        "provenance": {
            "crate": env!("CARGO_PKG_NAME"),
            "version": env!("CARGO_PKG_VERSION"),
            "git_commit": super::json::GIT_COMMIT,
        },
        "rows": rows.iter().map(Row::to_json).collect::<Vec<Value>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_have_the_promised_hosts_and_mrc_only() {
        let hosts: Vec<u32> = names(true)
            .iter()
            .map(|n| case(n).unwrap().hosts())
            .collect();
        assert_eq!(hosts, [1024, 1024, 4394, 16_000, 131_072]);
        let two_tier: Vec<u32> = ["2t-16k", "2t-32k", "2t-64k"]
            .iter()
            .map(|n| case(n).unwrap().hosts())
            .collect();
        assert_eq!(two_tier, [16_384, 32_768, 65_536]);
        assert_eq!(case("2t-32k").unwrap().spec.file.fabric.planes, 8);
        assert_eq!(names(false).len(), 4);
        let c = case("1k").unwrap();
        assert_eq!(c.spec.file.transports, [Transport::Mrc]);
        assert_eq!(c.host(), "flows");
        let d = case("1k-driver").unwrap();
        assert_eq!((d.host(), d.hosts()), ("driver", 1024));
        assert_eq!(d.spec.file.fabric, c.spec.file.fabric);
        assert!(d.spec.file.validate().is_ok());
        // The 1k size is the fidelity scenario itself.
        let fidelity = ScenarioSpec::resolve("permutation-1024").unwrap();
        assert_eq!(c.spec.file.fabric, fidelity.file.fabric);
        assert_eq!(c.spec.file.workload, fidelity.file.workload);
        assert!(case("2k").is_none());
    }

    #[test]
    fn repeated_runs_give_the_median_run_with_every_time() {
        let run = |cpu: f64| Row {
            cost: RunCost {
                cpu_s: Some(cpu),
                ..RunCost::default()
            },
            ..Row::failed(&case("1k").unwrap(), String::new())
        };
        let ok = |cpu: f64| Row {
            error: None,
            ..run(cpu)
        };
        let m = median(vec![ok(5.0), ok(4.0), ok(6.5)]).unwrap();
        assert_eq!(m.cost.cpu_s, Some(5.0));
        assert_eq!(m.cpu_s_runs, vec![5.0, 4.0, 6.5]);
        assert_eq!(median(vec![ok(3.0)]).unwrap().cpu_s_runs, vec![3.0]);
        // A failed run is the size's row: a size that fails once is not measured.
        let failed = median(vec![ok(5.0), run(1.0), ok(4.0)]).unwrap();
        assert!(failed.error.is_some());
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn rows_round_trip_through_json() {
        let row = Row {
            name: "4k".into(),
            host: "flows".into(),
            hosts: 4394,
            description: "d".into(),
            cost: RunCost {
                events: 10,
                data_packets: 5,
                wall_s: 2.5,
                cpu_s: Some(2.0),
                peak_rss_bytes: Some(64 << 20),
            },
            threads: 2,
            mode: "parallel".into(),
            flows_completed: 4394,
            error: None,
            cpu_s_runs: vec![2.5, 2.0, 2.25],
        };
        let v = row.to_json();
        assert_eq!(v["data_packets_per_cpu_s"], json!(2.5));
        assert_eq!(v["peak_rss_mb"], json!(64.0));
        assert_eq!(Row::from_json(&v), Some(row.clone()));
        let failed = Row::failed(&case("4k").unwrap(), "no".into());
        let v = failed.to_json();
        assert_eq!(
            (v["wall_s"].is_null(), v["error"].as_str()),
            (true, Some("no"))
        );
        assert_eq!(Row::from_json(&v).unwrap().error.as_deref(), Some("no"));
    }
}
