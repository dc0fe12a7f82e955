//! What a run reports, and the text table.

use crate::core::sim::Simulator;
use crate::core::time::{Duration, Time};
use crate::fabric::{DropCause, FabricTotals};
use crate::nic::NicReport;
use crate::workload::{CollectiveResult, FlowResult};
use mrc_abi::device::datapath_timing::DATAPATH_BLOCKS;

use super::{Scenario, World};

/// The figures of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// Transport name.
    pub transport: &'static str,
    /// Who posted the work ([`super::HostModel::name`]).
    pub host: &'static str,
    /// Workload kind name.
    pub workload: &'static str,
    /// Hosts.
    pub hosts: u32,
    /// Flows of the workload proper (background excluded).
    pub flows: u32,
    /// Of them, those that completed.
    pub completed: u32,
    /// Of them, those that failed (a send completed in error, or a flow they wait for failed).
    pub failed: u32,
    /// When the last main flow completed (or the run stopped, if some did not).
    pub completion: Time,
    /// Ideal completion.
    pub ideal: Duration,
    /// Flow completion times (done - released) of the completed main flows, sorted.
    pub fcts: Vec<Duration>,
    /// Every flow (main then background) and what became of it, by id.
    pub flow_results: Vec<FlowResult>,
    /// Collective figures (ring all-reduce: completion, median and slowest rank, straggler).
    pub collective: Option<CollectiveResult>,
    /// Background flows.
    pub background_flows: u32,
    /// Of them, those that completed before the run ended.
    pub background_completed: u32,
    /// FCTs of the completed background flows, sorted.
    pub background_fcts: Vec<Duration>,
    /// Longest stall over every QP.
    pub max_stall: Duration,
    /// The QP with the longest stall: (host, peer host).
    pub max_stall_qp: Option<(u32, u32)>,
    /// With a `[transceiver]` event: from the event to the last QP moving again (its una
    /// advancing at the end of the longest stall it had after the event; QPs with no progress
    /// after the event are not counted). `None` without an event, or when no QP moved after
    /// it.
    pub port_recovery: Option<Duration>,
    /// Data packets retransmitted (all NICs).
    pub retransmits: u64,
    /// Data packets sent for the first time (all NICs; retransmits are in `retransmits`).
    pub data_sent: u64,
    /// EV state changes (all NICs).
    pub ev_state_changes: u64,
    /// Losses the senders inferred from SACKs (reorder threshold).
    pub losses_inferred: u64,
    /// ACK timeouts of the senders.
    pub ack_timeouts: u64,
    /// Timer expiries (all NICs): the datapath stages' ACK coalescing timers and the firmware
    /// engines' timers (ACK timeout, tail loss probe, EV probes).
    pub timeouts: u64,
    /// Duplicate data packets receivers saw (spurious retransmits show up here).
    pub rx_duplicates: u64,
    /// NACKs receivers sent.
    pub nacks: u64,
    /// Fabric drops by [`DropCause`] index.
    pub drops: [u64; DropCause::COUNT],
    /// Packets trimmed by switches.
    pub trims: u64,
    /// Packets marked CE.
    pub ecn_marks: u64,
    /// Deliveries the NICs could not decode (no side-table headers) or whose payload was bad.
    pub nic_rx_dropped: u64,
    /// Payload bytes the receivers placed.
    pub placed_bytes: u64,
    /// Bytes of main flows acknowledged to the senders.
    pub acked_bytes: u64,
    /// Bytes of background flows acknowledged to the senders.
    pub background_acked_bytes: u64,
    /// Fabric totals at the end.
    pub totals: FabricTotals,
    /// True when the fabric's totals are conserved.
    pub conserved: bool,
    /// Events handled.
    pub events: u64,
    /// Events nobody could handle (a model bug if non-zero).
    pub bad_events: u64,
    /// Per NIC of the MRC NIC model, its hardware over the run (empty for `roce-ecmp`).
    pub nics: Vec<NicReport>,
}

impl RunReport {
    /// Gathers the report of a finished run.
    pub fn collect(sc: &Scenario, sim: &Simulator<World>) -> RunReport {
        let w = sim.handler();
        let flow_results = w.flow_results();
        let (main, bg): (Vec<&FlowResult>, Vec<&FlowResult>) =
            flow_results.iter().partition(|f| !f.background);
        let mut fcts: Vec<Duration> = main.iter().filter_map(|f| f.fct()).collect();
        fcts.sort_unstable();
        let mut background_fcts: Vec<Duration> = bg.iter().filter_map(|f| f.fct()).collect();
        background_fcts.sort_unstable();
        let completed = fcts.len() as u32;
        let flows = main.len() as u32;
        let hosts = w.hosts();
        let completion = if completed == flows {
            main.iter()
                .filter_map(|f| f.done)
                .max()
                .unwrap_or(Time::ZERO)
        } else {
            sim.now()
        };
        let failed = main.iter().filter(|f| f.failed).count() as u32;
        let acked: u64 = main.iter().map(|f| f.acked_bytes).sum();
        let background_acked_bytes: u64 = bg.iter().map(|f| f.acked_bytes).sum();
        let collective = match sc.workload {
            crate::workload::Workload::RingAllReduce { .. } => {
                CollectiveResult::from_flows(hosts, &flow_results)
            }
            _ => None,
        };
        let background_flows = bg.len() as u32;
        let background_completed = background_fcts.len() as u32;
        let mut max_stall = Duration::ZERO;
        let mut max_stall_qp = None;
        for n in &w.nics {
            for q in 0..n.connections() {
                let st = n.qp_stall(q).unwrap_or(Duration::ZERO);
                if st > max_stall {
                    max_stall = st;
                    max_stall_qp = n.peer(q).map(|p| (n.host(), p));
                }
            }
        }
        let sum = w.fabric.sum_counters();
        let (mut retransmits, mut data_sent, mut nic_rx_dropped) = (0, 0, 0);
        let (mut timeouts, mut rx_duplicates, mut nacks): (u64, u64, u64) = (0, 0, 0);
        let (mut losses_inferred, mut ack_timeouts, mut ev_state_changes) = (0, 0, 0);
        for n in &w.nics {
            let d = n.datapath_counters();
            retransmits += d.retransmits_sent;
            data_sent += d.data_sent;
            rx_duplicates += d.rx_duplicate;
            nacks += d.nacks_sent;
            // Timer expiries of both halves: the stages' ACK coalescing, the engines' ACK
            // timeouts, tail and EV probes.
            timeouts += d.timeouts_fired + n.engine_counters().timeouts_fired;
            let tx = n.tx_counters();
            losses_inferred += tx.losses_inferred;
            ack_timeouts += tx.timeouts;
            let c = n.counters();
            nic_rx_dropped += c.side_misses + c.bad_payload + c.unknown_qpn + c.rx_refused;
            ev_state_changes += c.ev_state_changes;
        }
        for n in &w.roce {
            // Go-back-N: no EVs, no loss inferred from SACKs; the transport timer is the ACK
            // timeout.
            let c = n.counters();
            retransmits += c.retransmits;
            data_sent += c.data_sent;
            timeouts += c.timeouts;
            ack_timeouts += c.timeouts;
            rx_duplicates += c.duplicates;
            nacks += c.naks_sent;
            nic_rx_dropped += c.bad_payload + c.bad_pattern + c.unknown_qp;
            let st = n.max_stall_at(sim.now());
            if st > max_stall {
                max_stall = st;
                max_stall_qp = n
                    .flow_results()
                    .max_by_key(|f| f.max_stall)
                    .map(|f| (n.host(), f.dst));
            }
        }
        let port_recovery = sc.transceiver.and_then(|t| {
            let last = w.nics.iter().filter_map(|n| n.recovered_at()).max()?;
            Some(last.duration_since(t.at))
        });
        let placed = w.placed_bytes();
        let totals = w.fabric.totals();
        RunReport {
            transport: sc.transport.name(),
            host: sc.host.applies(sc.transport).name(),
            workload: sc.workload.name(),
            hosts,
            flows,
            completed,
            failed,
            completion,
            ideal: sc.ideal(),
            fcts,
            flow_results,
            collective,
            background_flows,
            background_completed,
            background_fcts,
            max_stall,
            max_stall_qp,
            port_recovery,
            retransmits,
            data_sent,
            ev_state_changes,
            losses_inferred,
            ack_timeouts,
            timeouts,
            rx_duplicates,
            nacks,
            drops: sum.drops,
            trims: sum.trims,
            ecn_marks: sum.ecn_marks,
            nic_rx_dropped,
            placed_bytes: placed,
            acked_bytes: acked,
            background_acked_bytes,
            totals,
            conserved: totals.conserved(),
            events: sim.stats().events,
            bad_events: w.bad_events + w.fabric.bad_events(),
            nics: w.nics.iter().map(|n| n.report(sim.now())).collect(),
        }
    }

    /// Completion over ideal.
    pub fn ratio(&self) -> f64 {
        self.completion.since_start().as_ps() as f64 / self.ideal.as_ps().max(1) as f64
    }

    /// The `q`-th percentile (0..=100, nearest rank) of the completed flows' FCTs.
    pub fn fct_percentile(&self, q: u32) -> Option<Duration> {
        if self.fcts.is_empty() {
            return None;
        }
        let n = self.fcts.len();
        let rank = (u64::from(q.min(100)) * n as u64).div_ceil(100).max(1) as usize;
        self.fcts.get(rank - 1).copied()
    }
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_ps() as f64 / 1e6)
}

fn opt_us(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_string(), us)
}

/// The side-by-side table of `reports` (one column per transport).
pub fn format_table(reports: &[RunReport]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&RunReport) -> String| {
        rows.push((name.to_string(), reports.iter().map(f).collect()));
    };
    row("transport", &|r| r.transport.to_string());
    row("flows completed", &|r| {
        format!("{}/{}", r.completed, r.flows)
    });
    row("flows failed (QP error)", &|r| r.failed.to_string());
    row("completion (us)", &|r| {
        let mark = if r.completed == r.flows {
            ""
        } else {
            " (stopped)"
        };
        format!("{}{mark}", us(r.completion.since_start()))
    });
    row("ideal (us)", &|r| us(r.ideal));
    row("completion / ideal", &|r| format!("{:.3}", r.ratio()));
    row("FCT p50 (us)", &|r| opt_us(r.fct_percentile(50)));
    row("FCT p99 (us)", &|r| opt_us(r.fct_percentile(99)));
    row("FCT max (us)", &|r| opt_us(r.fct_percentile(100)));
    row("longest stall (us)", &|r| us(r.max_stall));
    if reports.iter().any(|r| r.port_recovery.is_some()) {
        row("port event to last QP moving (us)", &|r| {
            opt_us(r.port_recovery)
        });
    }
    row("data packets sent", &|r| r.data_sent.to_string());
    row("retransmits", &|r| r.retransmits.to_string());
    row("EV state changes", &|r| r.ev_state_changes.to_string());
    row("losses inferred (SACK)", &|r| r.losses_inferred.to_string());
    row("ACK timeouts", &|r| r.ack_timeouts.to_string());
    row("timer expiries", &|r| r.timeouts.to_string());
    row("NACKs", &|r| r.nacks.to_string());
    row("duplicates received", &|r| r.rx_duplicates.to_string());
    row("trims", &|r| r.trims.to_string());
    row("ECN marks", &|r| r.ecn_marks.to_string());
    for c in DropCause::ALL {
        let i = c as usize;
        if reports.iter().any(|r| r.drops[i] > 0) {
            row(&format!("drops: {}", c.name()), &|r| r.drops[i].to_string());
        }
    }
    row("NIC rx dropped", &|r| r.nic_rx_dropped.to_string());
    row("fabric conserved", &|r| r.conserved.to_string());
    row("events", &|r| r.events.to_string());
    let busiest = |r: &RunReport, f: &dyn Fn(&NicReport) -> f64| {
        r.nics
            .iter()
            .map(f)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .map_or_else(|| "-".to_string(), |v| format!("{:.1}%", v * 100.0))
    };
    row("NIC cores busy (busiest NIC)", &|r| {
        busiest(r, &|n| n.firmware.core_utilisation)
    });
    row("NIC CSR queue depth (max)", &|r| {
        r.nics
            .iter()
            .map(|n| n.firmware.csr_queue_max_depth)
            .max()
            .map_or_else(|| "-".to_string(), |v| v.to_string())
    });
    row("NIC CSR ring full (reports held)", &|r| {
        if r.nics.is_empty() {
            return "-".to_string();
        }
        let held: u64 = r.nics.iter().map(|n| n.firmware.csr_backpressure).sum();
        held.to_string()
    });
    row("PCIe NIC->host busy (busiest)", &|r| {
        busiest(r, &|n| n.pcie.pcie_tx_utilisation)
    });
    row("PCIe host->NIC busy (busiest)", &|r| {
        busiest(r, &|n| n.pcie.pcie_rx_utilisation)
    });
    for (i, b) in DATAPATH_BLOCKS.iter().enumerate() {
        row(&format!("DP {} busy (busiest)", b.block), &|r| {
            busiest(r, &|n| n.datapath.get(i).map_or(0.0, |d| d.occupancy))
        });
        row(&format!("DP {} wait (cycles, max)", b.block), &|r| {
            r.nics
                .iter()
                .filter_map(|n| n.datapath.get(i).map(|d| d.backpressure_cycles))
                .max()
                .map_or_else(|| "-".to_string(), |v| v.to_string())
        });
    }
    let w0 = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let wc = rows
        .iter()
        .flat_map(|(_, v)| v.iter().map(String::len))
        .max()
        .unwrap_or(0)
        .max(8);
    let mut out = String::new();
    for (name, vals) in rows {
        out.push_str(&format!("  {name:<w0$}"));
        for v in vals {
            out.push_str(&format!("  {v:>wc$}"));
        }
        out.push('\n');
    }
    out
}
