//! Swarm testing of the whole system (TigerBeetle VOPR style): each seed draws a topology, a
//! workload through the driver's public API and a random subset of fault kinds
//! ([`plan::Plan::draw`]), runs it on simulated hosts whose NICs are the simulator's NIC model
//! on a multi-plane leaf-spine (`mrc_sim::nic_host::SimHost::on_clos`), and checks:
//!
//! - **Safety, after every tick and at the end** ([`check`]): every completion succeeds, is
//!   the next one expected in posting order, and arrives once; a completion means the bytes of
//!   its message and of every earlier message of the connection are in place; bytes placed
//!   never exceed the bytes posted (a duplicate placement would); no panic anywhere (driver,
//!   simulator, engine).
//! - **Liveness**: at the end of the fault phase the controller allows the EVs it denied and
//!   every fault stops (`SimHost::stop_faults`); then every expected completion arrives within
//!   [`LIVENESS_BOUND_NS`] of virtual time.
//! - **At the end**: every destination region is byte-exact (messages where they were sent,
//!   zeros elsewhere); every send WQE retired; payload bytes placed equal the bytes posted
//!   (exactly once); the counters add up (the fabric's packets injected equal delivered plus
//!   dropped by cause plus in flight; packets the fabric delivered equal the packets the NIC
//!   models received; bytes placed by the device side equal the NICs' counters).
//!
//! A failing seed is reported with the one command that replays it ([`replay_command`]).

pub mod check;
pub mod cycle;
pub mod harness;
pub mod plan;
pub mod rng;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use mrc_sim::fabric::DropCause;
use mrc_sim::nic_host::{ClosCounters, SimHost, WindowKind};

use check::Progress;
use plan::{Fault, Plan};

/// Virtual time within which everything completes once faults stop, ns.
pub const LIVENESS_BOUND_NS: u64 = 200_000_000;

/// What one passing seed did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub seed: u64,
    /// Fault kinds in the mix.
    pub faults: Vec<&'static str>,
    /// Payload bytes posted, placed and checked.
    pub payload_bytes: u64,
    /// Destination region bytes compared at the end.
    pub region_bytes: u64,
    pub messages: u64,
    pub completions: u64,
    /// Virtual time from the end of faults to the last completion, ns.
    pub liveness_ns: u64,
    /// Retransmissions the NICs' datapath stages sent.
    pub retransmits: u64,
    pub counters: ClosCounters,
}

/// The command that replays `seed`.
pub fn replay_command(seed: u64, planted_bug: bool) -> String {
    format!(
        "SWARM_SEED={seed}{} cargo test -p mrc-tests --release --test swarm -- replay --nocapture",
        if planted_bug {
            " SWARM_PLANTED_BUG=1"
        } else {
            ""
        }
    )
}

/// Runs `plan`, catching panics: `Err` says what failed.
pub fn run(plan: &Plan) -> Result<Report, String> {
    match catch_unwind(AssertUnwindSafe(|| run_inner(plan))) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panic: {}",
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        )),
    }
}

/// Runs seed `seed` (with the planted datapath bug if asked, `DatapathConfig::planted_bug`); `Err` names the seed, what
/// failed, and the replay command.
pub fn run_seed(seed: u64, planted_bug: bool) -> Result<Report, String> {
    let mut plan = Plan::draw(seed);
    plan.planted_bug = planted_bug;
    run(&plan).map_err(|e| {
        format!(
            "swarm seed {seed} failed: {e}\n  faults: {:?}\n  replay: {}",
            plan.faults.iter().map(Fault::kind).collect::<Vec<_>>(),
            replay_command(seed, planted_bug)
        )
    })
}

fn run_inner(plan: &Plan) -> Result<Report, String> {
    let host = SimHost::on_clos(&harness::nic_configs(plan), plan.clos())
        .map_err(|e| format!("host: {e}"))?;
    let apps = (0..plan.hosts)
        .map(|i| harness::host_app(plan, &host, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut conns = plan
        .conns
        .iter()
        .enumerate()
        .map(|(k, c)| harness::open(&apps, k, c, plan.seed))
        .collect::<Result<Vec<_>, _>>()?;
    let mut progress: Vec<Progress> = plan.conns.iter().map(Progress::new).collect();
    let total = plan.bytes();

    // The fault schedule, relative to now.
    let t0 = host.now_ns();
    for f in &plan.faults {
        match f {
            Fault::LinkFlap { nic, port, windows } => {
                for &(a, b) in windows {
                    let k = WindowKind::Port {
                        nic: *nic,
                        port: *port,
                    };
                    host.schedule_window(k, t0 + a, t0 + b);
                }
            }
            Fault::PlaneLost { plane, from, to } => {
                host.schedule_window(WindowKind::Plane(*plane), t0 + from, t0 + to)
            }
            Fault::SwitchBlackhole {
                plane,
                spine,
                from,
                to,
                ..
            } => host.schedule_window(
                WindowKind::SwitchBlackhole {
                    plane: *plane,
                    spine: *spine,
                },
                t0 + from,
                t0 + to,
            ),
            Fault::LinkBlackhole { plane, leaf, spine } => host.schedule_window(
                WindowKind::LinkBlackhole {
                    plane: *plane,
                    leaf: *leaf,
                    spine: *spine,
                },
                t0,
                t0 + plan.fault_phase_ns,
            ),
            Fault::SlowDma { nic, ns } => host.set_dma_delay(*nic, *ns),
            Fault::StalledCore { nic, from, to } => {
                host.schedule_window(WindowKind::Stall { nic: *nic }, t0 + from, t0 + to)
            }
            _ => {}
        }
    }

    // Fault phase: post batches tick by tick, check after every tick.
    let mut posted = vec![0usize; plan.conns.len()];
    let mut completions = 0;
    let mut tick = 0u32;
    loop {
        for (k, c) in plan.conns.iter().enumerate() {
            if tick >= c.start
                && (tick - c.start).is_multiple_of(c.every)
                && posted[k] < c.msgs.len()
            {
                let end = (posted[k] + c.batch).min(c.msgs.len());
                harness::post(&mut conns[k], &c.msgs[posted[k]..end])
                    .map_err(|e| format!("connection {k}: {e}"))?;
                posted[k] = end;
            }
        }
        for f in &plan.faults {
            if let Fault::EvDenial {
                host: h,
                evs,
                at,
                until,
            } = f
            {
                let a = &apps[*h];
                for &ev in evs {
                    if tick == *at {
                        a.ctl
                            .deny_ev(a.ev, ev)
                            .map_err(|e| format!("deny_ev: {e}"))?;
                    }
                    if tick == *until {
                        a.ctl
                            .allow_ev(a.ev, ev)
                            .map_err(|e| format!("allow_ev: {e}"))?;
                    }
                }
            }
        }
        completions += safety(plan, &mut conns, &mut progress, &host, &apps, total)?;
        let all_posted = posted
            .iter()
            .zip(&plan.conns)
            .all(|(p, c)| *p == c.msgs.len());
        let t = t0 + u64::from(tick + 1) * plan.tick_ns;
        if all_posted && t >= t0 + plan.fault_phase_ns {
            break;
        }
        host.advance_to(t);
        tick += 1;
    }

    // Faults stop: denied EVs allowed again, windows end, links become clean.
    for f in &plan.faults {
        if let Fault::EvDenial { host: h, evs, .. } = f {
            let a = &apps[*h];
            for &ev in evs {
                a.ctl
                    .allow_ev(a.ev, ev)
                    .map_err(|e| format!("allow_ev: {e}"))?;
            }
        }
    }
    host.stop_faults();
    let t_stop = host.now_ns();
    let mut t_done = t_stop;
    loop {
        completions += safety(plan, &mut conns, &mut progress, &host, &apps, total)?;
        if progress.iter().all(Progress::done) {
            break;
        }
        let now = host.now_ns();
        if now - t_stop > LIVENESS_BOUND_NS {
            let missing: usize = progress.iter().map(Progress::missing).sum();
            // (which connections wait, host to host: where to look first)
            let stuck: Vec<String> = progress
                .iter()
                .zip(&plan.conns)
                .enumerate()
                .filter(|(_, (p, _))| p.missing() > 0)
                .map(|(k, (p, c))| format!("{k} ({} -> {}): {}", c.from, c.to, p.missing()))
                .collect();
            return Err(format!(
                "liveness: {missing} completions still missing {} ns after faults stopped \
                 (bound {LIVENESS_BOUND_NS} ns), by connection [{}]; {:?}",
                now - t_stop,
                stuck.join(", "),
                host.clos_counters()
            ));
        }
        // Event by event (each run covers at most one tick of virtual time); an idle fabric
        // waiting for nothing moves on a tick.
        host.run();
        if host.now_ns() == now {
            host.advance_to(now + plan.tick_ns);
        }
        t_done = host.now_ns();
    }
    // Let the last ACKs land.
    while !host.idle() {
        if host.now_ns() - t_stop > LIVENESS_BOUND_NS {
            return Err(format!(
                "the fabric is not idle {} ns after faults stopped: {:?}",
                host.now_ns() - t_stop,
                host.clos_counters()
            ));
        }
        host.advance_to(host.now_ns() + plan.tick_ns);
    }
    completions += safety(plan, &mut conns, &mut progress, &host, &apps, total)?;

    // The end: regions exact, exactly-once, counters add up.
    let mut region_bytes = 0;
    for (k, c) in plan.conns.iter().enumerate() {
        region_bytes +=
            check::region_exact(c, &conns[k]).map_err(|e| format!("connection {k}: {e}"))?;
    }
    let counters = host.clos_counters();
    counters_add_up(&host, plan, &counters, total)?;
    let retransmits = (0..plan.hosts)
        .filter_map(|i| host.datapath_counters(i))
        .map(|d| d.retransmits_sent)
        .sum();
    Ok(Report {
        seed: plan.seed,
        faults: plan.faults.iter().map(Fault::kind).collect(),
        payload_bytes: total,
        region_bytes,
        messages: plan.conns.iter().map(|c| c.msgs.len() as u64).sum(),
        completions,
        liveness_ns: t_done - t_stop,
        retransmits,
        counters,
    })
}

/// One safety pass: poll and check every connection, drain the controllers' events, and
/// check bytes placed never exceed bytes posted.
fn safety(
    plan: &Plan,
    conns: &mut [harness::Conn],
    progress: &mut [Progress],
    host: &SimHost,
    apps: &[harness::App],
    total: u64,
) -> Result<u64, String> {
    let mut n = 0;
    for (k, c) in plan.conns.iter().enumerate() {
        n += progress[k]
            .poll(c, &mut conns[k])
            .map_err(|e| format!("connection {k} (host {} -> {}): {e}", c.from, c.to))?;
    }
    for a in apps {
        while let Ok(Some(_)) = a.ctl.poll_event() {}
    }
    let placed = host.clos_counters().bytes_placed;
    if placed > total {
        return Err(format!(
            "{placed} payload bytes placed for {total} posted: something was placed twice"
        ));
    }
    Ok(n)
}

fn counters_add_up(
    host: &SimHost,
    plan: &Plan,
    c: &ClosCounters,
    total: u64,
) -> Result<(), String> {
    let f = &c.fabric;
    if !f.conserved() {
        return Err(format!(
            "fabric counters do not add up: injected {} != delivered {} + dropped {} + in \
             flight {}: {f:?}",
            f.injected,
            f.delivered,
            f.dropped_total(),
            f.in_flight
        ));
    }
    if c.bytes_placed != total || c.place_failed != 0 {
        return Err(format!(
            "{} payload bytes placed for {total} posted (exactly once), {} placements failed",
            c.bytes_placed, c.place_failed
        ));
    }
    let nic_placed: u64 = host.nics().iter().map(|n| n.counters().bytes_placed).sum();
    if nic_placed != c.bytes_placed {
        return Err(format!(
            "NIC counters placed {nic_placed} bytes, the device side {}",
            c.bytes_placed
        ));
    }
    let rx: u64 = (0..plan.hosts)
        .filter_map(|i| host.model_counters(i))
        .map(|n| n.rx_packets)
        .sum();
    if rx != f.delivered {
        return Err(format!(
            "the NIC models received {rx} packets, the fabric delivered {}",
            f.delivered
        ));
    }
    let cqes_dropped: u64 = host.nics().iter().map(|n| n.counters().cqes_dropped).sum();
    if cqes_dropped != 0 {
        return Err(format!("{cqes_dropped} CQEs dropped"));
    }
    Ok(())
}

/// Totals over many seeds.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub seeds: u64,
    pub failed: Vec<u64>,
    pub faults: BTreeMap<&'static str, u64>,
    pub payload_bytes: u64,
    pub region_bytes: u64,
    pub messages: u64,
    pub completions: u64,
    pub max_liveness_ns: u64,
    pub retransmits: u64,
    pub placed: u64,
    pub ev_events: u64,
    pub trims: u64,
    pub last_hop_trims: u64,
    pub fabric: mrc_sim::fabric::FabricTotals,
}

impl Totals {
    pub fn add(&mut self, r: &Report) {
        self.seeds += 1;
        for f in &r.faults {
            *self.faults.entry(f).or_default() += 1;
        }
        self.payload_bytes += r.payload_bytes;
        self.region_bytes += r.region_bytes;
        self.messages += r.messages;
        self.completions += r.completions;
        self.max_liveness_ns = self.max_liveness_ns.max(r.liveness_ns);
        self.retransmits += r.retransmits;
        self.placed += r.counters.bytes_placed;
        self.ev_events += r.counters.ev_events;
        self.trims += r.counters.trims;
        self.last_hop_trims += r.counters.last_hop_trims;
        let (a, b) = (&mut self.fabric, &r.counters.fabric);
        a.injected += b.injected;
        a.delivered += b.delivered;
        a.delivered_bytes += b.delivered_bytes;
        for (x, y) in a.drops.iter_mut().zip(b.drops) {
            *x += y;
        }
        a.in_flight += b.in_flight;
    }

    /// The summary `just swarm` prints.
    pub fn summary(&self, secs: f64) -> String {
        let f = &self.fabric;
        let mut s = format!(
            "swarm: {} seeds, {} failed{}, {:.1} s ({:.1} ms per seed)\n",
            self.seeds,
            self.failed.len(),
            if self.failed.is_empty() {
                String::new()
            } else {
                format!(" {:?}", self.failed)
            },
            secs,
            secs * 1e3 / self.seeds.max(1) as f64
        );
        s += "  seeds with each fault kind:";
        for (k, v) in &self.faults {
            s += &format!(" {k} {v},");
        }
        s.pop();
        s += "\n  fabric drops by cause:";
        for cause in DropCause::ALL {
            s += &format!(" {cause:?} {},", f.dropped(cause));
        }
        s.pop();
        s += &format!(
            "; {} trimmed ({} at the last hop)",
            self.trims, self.last_hop_trims
        );
        s += &format!(
            "\n  checked: {} messages, {} completions, {} payload bytes placed exactly once, {} \
             destination bytes compared; {} packets into the fabric, {} retransmissions, {} EV \
             events; slowest recovery after faults stopped {} us (bound {} ms)",
            self.messages,
            self.completions,
            self.payload_bytes,
            self.region_bytes,
            f.injected,
            self.retransmits,
            self.ev_events,
            self.max_liveness_ns / 1_000,
            LIVENESS_BOUND_NS / 1_000_000
        );
        s
    }
}
