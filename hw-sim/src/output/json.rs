//! The JSON report: provenance, the full scenario, and one object per transport.
//!
//! Deterministic: same scenario and seed, same bytes (keys sorted, no wall-clock value) except
//! the top-level `wall_clock` object, which holds the wall time and the cost of each run
//! (`perf`: events, data packets (first transmissions and retransmissions), wall and CPU
//! seconds, their rates per CPU second, the process's peak RSS so far; null where unknown) and
//! is the only part that changes between identical runs.
//!
//! ```text
//! { "provenance": { "crate": "mrc-sim", "version", "git_commit", "seed" },
//!   "scenario": { "name", "origin", "config": <the scenario file as JSON> },
//!   "transports": [ { "name", "host" ("driver" | "flows"), "error" | null, "completion_us", "ideal_us",
//!                     "completion_over_ideal", "flows", "flows_completed", "flows_failed",
//!                     "fct_us": { "p50", "p99", "max" }, "max_stall_us",
//!                     "port_recovery_us" (null without a [transceiver] event), "retransmits",
//!                     "data_packets_sent", "ev_state_changes", "drops": { cause: n },
//!                     "trims", "ecn_marks", ...,
//!                     "nics": [ { "host", "core_utilisation", "csr_queue_max_depth",
//!                                 "csr_backpressure", "rx_refused", "core_steps",
//!                                 "firmware_level", "guest_instructions" (null at native),
//!                                 "firmware_faults", "pcie_tx_utilisation", "pcie_rx_utilisation", "doorbells",
//!                                 "dma_bytes", "datapath": [ { "block", "occupancy",
//!                                 "backpressure_cycles" } ] } ] (one per MRC NIC),
//!                     "fcts_us": [sorted FCTs of the completed flows],
//!                     "goodput_gbps": { "sample_us", "points": [[t_us, Gb/s], ...] } } ],
//!   "wall_clock": { "seconds": { transport: s },
//!                   "perf": { transport: { "events", "data_packets", "wall_s", "cpu_s",
//!                             "events_per_cpu_s", "data_packets_per_cpu_s",
//!                             "peak_rss_mb", "mode" } } } }
//! ```
//! A transport that could not run has `error` set and null figures.

use serde_json::{json, Map, Value};

use crate::core::time::Duration;
use crate::fabric::DropCause;
use crate::run::perf::RunCost;
use crate::run::RunReport;
use crate::scenario::ScenarioSpec;

use super::Outcome;

/// The git commit the binary was built from (`unknown` outside a git checkout).
pub const GIT_COMMIT: &str = env!("MRC_SIM_GIT_COMMIT");

fn us(d: Duration) -> f64 {
    d.as_ps() as f64 / 1e6
}

fn report(r: &RunReport) -> Value {
    let mut drops = Map::new();
    for c in DropCause::ALL {
        drops.insert(c.name().to_string(), json!(r.drops[c as usize]));
    }
    let p = |q| r.fct_percentile(q).map(us);
    json!({
        "name": r.transport,
        "host": r.host,
        "error": null,
        "flows": r.flows,
        "flows_completed": r.completed,
        "flows_failed": r.failed,
        "completion_us": us(r.completion.since_start()),
        "ideal_us": us(r.ideal),
        "completion_over_ideal": r.ratio(),
        "fct_us": { "p50": p(50), "p99": p(99), "max": p(100) },
        "max_stall_us": us(r.max_stall),
        "port_recovery_us": r.port_recovery.map(us),
        "data_packets_sent": r.data_sent,
        "retransmits": r.retransmits,
        "ev_state_changes": r.ev_state_changes,
        "losses_inferred": r.losses_inferred,
        "ack_timeouts": r.ack_timeouts,
        "timer_expiries": r.timeouts,
        "nacks": r.nacks,
        "rx_duplicates": r.rx_duplicates,
        "drops": drops,
        "trims": r.trims,
        "ecn_marks": r.ecn_marks,
        "nic_rx_dropped": r.nic_rx_dropped,
        "placed_bytes": r.placed_bytes,
        "acked_bytes": r.acked_bytes,
        "fabric_conserved": r.conserved,
        "events": r.events,
        "bad_events": r.bad_events,
        "nics": serde_json::to_value(&r.nics).unwrap_or(Value::Null),
    })
}

/// The `perf` object of one run.
pub fn cost(c: &RunCost) -> Value {
    json!({
        "events": c.events,
        "data_packets": c.data_packets,
        "wall_s": c.wall_s,
        "cpu_s": c.cpu_s,
        "events_per_cpu_s": c.events_per_cpu_s(),
        "data_packets_per_cpu_s": c.data_packets_per_cpu_s(),
        "peak_rss_mb": c.peak_rss_mb(),
    })
}

/// The whole JSON document.
pub fn document(spec: &ScenarioSpec, outcomes: &[Outcome]) -> Value {
    let transports: Vec<Value> = outcomes
        .iter()
        .map(|o| match &o.result {
            Ok(r) => {
                let mut v = report(r);
                v["fcts_us"] = json!(r.fcts.iter().map(|d| us(*d)).collect::<Vec<f64>>());
                v["goodput_gbps"] = json!({
                    "sample_us": us(o.series.every),
                    "points": o.series.goodput_gbps()
                        .iter()
                        .map(|(t, g)| [*t, *g])
                        .collect::<Vec<[f64; 2]>>(),
                });
                v
            }
            Err(e) => json!({
                "name": o.name,
                "error": e,
                "completion_over_ideal": null,
                "max_stall_us": null,
                "port_recovery_us": null,
                "fct_us": { "p50": null, "p99": null, "max": null },
            }),
        })
        .collect();
    let wall: Map<String, Value> = outcomes
        .iter()
        .map(|o| (o.name.to_string(), json!(o.wall_s)))
        .collect();
    let perf: Map<String, Value> = outcomes
        .iter()
        .map(|o| {
            let mut v = cost(&o.cost);
            v["mode"] = json!(o.mode.to_string());
            (o.name.to_string(), v)
        })
        .collect();
    json!({
        "provenance": {
            "crate": env!("CARGO_PKG_NAME"),
            "version": env!("CARGO_PKG_VERSION"),
            "git_commit": GIT_COMMIT,
            "seed": spec.file.seed,
        },
        "scenario": {
            "name": spec.name,
            "origin": spec.origin,
            "config": serde_json::to_value(&spec.file).unwrap_or(Value::Null),
        },
        "transports": transports,
        "wall_clock": { "seconds": wall, "perf": perf },
    })
}
