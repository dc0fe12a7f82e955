//! The simulator: the default run, the fidelity scenario, and what the simulator costs.

use serde_json::Value;

use super::{num, Outputs, Step};
use crate::report::{capacity, figure, number, same_run, Row};

const IDEAL: &str = "ideal: the busiest NIC's bytes at line rate + base RTT";

/// `cargo run --release` with its JSON, and the same scenario without the link failure.
pub const DEFAULT: Step = Step {
    name: "sim-default",
    title: "Simulator: the default run",
    commands: &[
        "cargo run -q --release -- --json target/bench/default.json",
        "cargo run -q --release -- --no-failure --transport mrc --json target/bench/default-no-failure.json",
    ],
    collect: default_rows,
};

/// The fidelity scenario, `permutation-1024`.
pub const FIDELITY: Step = Step {
    name: "sim-fidelity",
    title: "Simulator: the fidelity scenario (permutation-1024)",
    commands: &["cargo run -q --release -- run permutation-1024 --json target/bench/fidelity.json"],
    collect: fidelity_rows,
};

/// The event queue against a binary heap, then `just bench-sim` (1K, 4K, 16K hosts on the flow
/// hosts, and 1K through the driver: the full loop).
pub const SPEED: Step = Step {
    name: "sim-speed",
    title: "Simulator: speed and memory by fabric size",
    commands: &[
        "cargo bench -q -p mrc-sim --bench event_queue -- hold_1M",
        "just bench-sim",
    ],
    collect: speed_rows,
};

/// The transports of a `mrc-sim --json` report by name.
fn transport<'a>(doc: &'a Value, name: &str) -> Result<&'a Value, String> {
    let t = doc["transports"]
        .as_array()
        .ok_or("the report has no `transports` array")?
        .iter()
        .find(|t| t["name"] == name)
        .ok_or_else(|| format!("the report has no transport `{name}`"))?;
    match t["error"].as_str() {
        Some(e) => Err(format!("transport {name} did not run: {e}")),
        None => Ok(t),
    }
}

fn completion_row(t: &Value, figure_name: String) -> Result<Row, String> {
    let done = num(&t["completion_us"], "completion_us")?;
    let ideal = num(&t["ideal_us"], "ideal_us")?;
    Ok(
        Row::new(figure_name, done, "us", same_run(IDEAL, ideal)).note(format!(
            "p99 FCT {} us; retransmissions {}; flows completed {}, failed {}",
            figure(num(&t["fct_us"]["p99"], "fct_us.p99")?),
            number(num(&t["retransmits"], "retransmits")?, 0),
            number(num(&t["flows_completed"], "flows_completed")?, 0),
            number(num(&t["flows_failed"], "flows_failed")?, 0),
        )),
    )
}

fn default_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let doc = o.json("target/bench/default.json")?;
    let mut rows = Vec::new();
    for name in ["mrc", "mrc-1ev", "roce-ecmp", "spray-oblivious"] {
        let t = transport(&doc, name)?;
        let row = completion_row(t, format!("completion, {name}"))?;
        rows.push(if name == "mrc" { row.headline() } else { row });
    }
    let stall = |name| -> Result<f64, String> {
        num(&transport(&doc, name)?["max_stall_us"], "max_stall_us")
    };
    rows.push(
        Row::new(
            "longest stall of a flow, mrc",
            stall("mrc")?,
            "us",
            same_run("roce-ecmp's longest stall", stall("roce-ecmp")?),
        )
        .note("the link fails at 40 us; ECMP reroutes after 150 ms, source routes never")
        .headline(),
    );
    let calm = o.json("target/bench/default-no-failure.json")?;
    rows.push(completion_row(
        transport(&calm, "mrc")?,
        "completion, mrc, no link failure".into(),
    )?);
    Ok(rows)
}

fn fidelity_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let doc = o.json("target/bench/fidelity.json")?;
    let mut rows = Vec::new();
    for (name, target) in [
        (
            "mrc",
            "target <= 200 us (htsim's NSCC reference, 128 paths: ~200 us)",
        ),
        ("mrc-1ev", "target 500..1300 us (htsim, one path: ~756 us)"),
    ] {
        let t = transport(&doc, name)?;
        let p99 = num(&t["fct_us"]["p99"], "fct_us.p99")?;
        let ideal = num(&t["ideal_us"], "ideal_us")?;
        let row = Row::new(
            format!("p99 flow completion time, {name}"),
            p99,
            "us",
            same_run(IDEAL, ideal),
        )
        .note(target);
        rows.push(if name == "mrc" { row.headline() } else { row });
    }
    Ok(rows)
}

fn speed_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let wheel_ns = o.criterion_median_ns("hold_1M/event_queue")?;
    let heap_ns = o.criterion_median_ns("hold_1M/binary_heap")?;
    // One hold step pops one event and pushes one: the cost of one event to the queue alone.
    let queue_meps = 1e3 / wheel_ns;
    let mut rows = vec![Row::new(
        "event queue, hold model at 1 M pending events",
        queue_meps,
        "M events/s",
        same_run("std BinaryHeap, same increments", 1e3 / heap_ns),
    )
    .note(format!(
        "criterion medians: {} ns and {} ns per event",
        figure(wheel_ns),
        figure(heap_ns)
    ))];
    let doc = o.json("target/bench-sim.json")?;
    let sizes = doc["rows"]
        .as_array()
        .ok_or("target/bench-sim.json has no `rows`")?;
    for r in sizes {
        let name = r["name"].as_str().unwrap_or("?");
        if let Some(e) = r["error"].as_str() {
            return Err(format!("bench-sim size {name} did not run: {e}"));
        }
    }
    // The full loop (through the driver) against the flow hosts' run of the same size.
    let (driver, flows): (Vec<&Value>, Vec<&Value>) =
        sizes.iter().partition(|r| r["host"] == "driver");
    for r in &driver {
        let hosts = num(&r["hosts"], "hosts")?;
        let same = flows
            .iter()
            .find(|f| f["hosts"] == r["hosts"])
            .ok_or("bench-sim ran the full loop without the flow hosts' run of its size")?;
        let pkts = |v: &Value| num(&v["data_packets_per_cpu_s"], "data_packets_per_cpu_s");
        rows.push(
            Row::new(
                format!(
                    "full loop data packets per CPU-second, {} hosts (application -> driver -> NIC -> fabric)",
                    number(hosts, 0)
                ),
                pkts(r)? / 1e3,
                "K/s",
                same_run("the NIC model's flow hosts, same scenario", pkts(same)? / 1e3),
            )
            .note(format!(
                "target >= 100 K; {}; {} s wall, {} CPU s{}, peak {} MiB ({} KiB per host)",
                r["description"].as_str().unwrap_or(""),
                figure(num(&r["wall_s"], "wall_s")?),
                figure(num(&r["cpu_s"], "cpu_s")?),
                runs_note(r),
                figure(num(&r["peak_rss_mb"], "peak_rss_mb")?),
                figure(num(&r["peak_rss_mb"], "peak_rss_mb")? * 1024.0 / hosts),
            ))
            .headline(),
        );
    }
    let sizes = flows;
    let mut first: Option<(f64, f64)> = None;
    for &r in &sizes {
        let hosts = num(&r["hosts"], "hosts")?;
        let events = num(&r["events_per_cpu_s"], "events_per_cpu_s")?;
        let rss = num(&r["peak_rss_mb"], "peak_rss_mb")?;
        let last = std::ptr::eq(r, *sizes.last().unwrap_or(&r));
        let speed = Row::new(
            format!(
                "simulator events per CPU-second, {} hosts",
                number(hosts, 0)
            ),
            events / 1e6,
            "M/s",
            same_run(
                "the bare event queue, hold model at 1 M pending",
                queue_meps,
            ),
        )
        .note(format!(
            "{}; {} K data packets per CPU-s; {} s wall, {} CPU s{}",
            r["description"].as_str().unwrap_or(""),
            figure(num(&r["data_packets_per_cpu_s"], "data_packets_per_cpu_s")? / 1e3),
            figure(num(&r["wall_s"], "wall_s")?),
            figure(num(&r["cpu_s"], "cpu_s")?),
            runs_note(r),
        ));
        let memory_baseline = match first {
            None => capacity("the machine's memory", o.memory_mib),
            Some((h0, m0)) => same_run(
                format!("the {}-host run's peak scaled by hosts", number(h0, 0)),
                m0 * hosts / h0,
            ),
        };
        let memory = Row::new(
            format!("simulator peak memory, {} hosts", number(hosts, 0)),
            rss,
            "MiB",
            memory_baseline,
        )
        .note(format!("{} KiB per host", figure(rss * 1024.0 / hosts)));
        first.get_or_insert((hosts, rss));
        if last {
            rows.push(speed.headline());
            rows.push(memory.headline());
        } else {
            rows.push(speed);
            rows.push(memory);
        }
    }
    Ok(rows)
}

/// ", the median of N runs (CPU s: a, b, c)" for a size `mrc-sim bench` ran several times;
/// nothing for one run.
fn runs_note(r: &Value) -> String {
    let runs: Vec<f64> = r["cpu_s_runs"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if runs.len() < 2 {
        return String::new();
    }
    let each: Vec<String> = runs.iter().map(|c| figure(*c)).collect();
    format!(
        ", the median of {} runs (CPU s: {})",
        runs.len(),
        each.join(", ")
    )
}
