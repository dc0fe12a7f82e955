//! The second swarm lane: the cycle-level fabric (`mrc_sim::run`, the model `mrc-sim run`
//! uses): multi-plane two-tier leaf-spine or three-tier fat-tree Clos, a NIC per host running
//! the engine over it, a workload of flows. Each seed draws the shape, sizes, planes, a
//! workload, random loss and corruption, and scheduled link down/up windows, flaps and
//! blackholing switches (up but dropping everything), and gray links that lose or corrupt a
//! share of their packets. Checks: packets are conserved at every moment (every packet injected is delivered, dropped with a cause, or in flight; no link
//! direction delivers more than it sent), every NIC's packets reach the fabric and every
//! delivery reaches a NIC, and once the windows have ended every flow completes within
//! [`CYCLE_LIVENESS_BOUND`] of the end of the fault phase (when the gray links heal) with
//! every byte acknowledged.

use mrc_sim::core::{Duration, Time};
use mrc_sim::fabric::{ev, Fault, LinkId, Shape, SwitchId};
use mrc_sim::nic::Transport;
use mrc_sim::run::{build, Scenario, World};
use mrc_sim::workload::Workload;

use super::rng::Rng;

/// Simulated time within which every flow completes after the last window ends.
pub const CYCLE_LIVENESS_BOUND: Duration = Duration::from_us(50_000);
/// Every window ends by then.
const FAULT_PHASE: Duration = Duration::from_us(400);

/// What one seed of the lane draws.
#[derive(Clone, Debug)]
pub struct CyclePlan {
    pub seed: u64,
    pub scenario: Scenario,
    /// `(at, fault)`, ends of windows included.
    pub faults: Vec<(Time, Fault)>,
    /// Gray links during the fault phase: `(link index, loss ppm, corruption ppm)`.
    pub impaired: Vec<(u32, u32, u32)>,
    /// Fault kinds in the mix.
    pub kinds: Vec<&'static str>,
}

/// Totals of one passing seed.
#[derive(Clone, Copy, Debug, Default)]
pub struct CycleReport {
    pub hosts: u32,
    pub injected: u64,
    pub dropped: u64,
    pub acked_bytes: u64,
    pub faults: u64,
}

impl CyclePlan {
    /// Draws seed `seed`.
    pub fn draw(seed: u64) -> CyclePlan {
        let mut r = Rng::new(seed ^ 0xc7c1e);
        let mut sc = Scenario::tiny(Transport::Mrc);
        sc.seed = seed;
        sc.failure = None;
        sc.fabric.seed = seed;
        sc.fabric.planes = r.pick(&[1u32, 2, 4]);
        sc.fabric.shape = if r.one_in(3) {
            Shape::FatTree { k: 4 }
        } else {
            // At most `radix` leaves of `radix / 2` hosts.
            let radix = r.pick(&[4u32, 8]);
            Shape::LeafSpine {
                hosts: r.range(3, u64::from(radix * radix / 2)) as u32,
                radix,
            }
        };
        let hosts = sc.fabric.shape.hosts();
        let msg = r.pick(&[4u64 << 10, 16 << 10, 64 << 10]);
        sc.workload = match r.below(4) {
            0 => Workload::Permutation {
                bytes_per_host: msg * r.range(1, 4),
                msg_bytes: msg as u32,
            },
            1 => Workload::AllToAll {
                bytes_per_pair: msg,
                msg_bytes: msg as u32,
            },
            2 => Workload::RingAllReduce {
                bytes: msg * 2 * u64::from(hosts),
                slices: 2,
                msg_bytes: msg as u32,
            },
            _ => Workload::Incast {
                senders: (hosts - 1).min(r.range(2, 8) as u32),
                receiver: r.below(u64::from(hosts)) as u32,
                bytes_per_sender: msg * 2,
                msg_bytes: msg as u32,
            },
        };
        let mut kinds = Vec::new();
        // Gray links: a few links lose (and corrupt) a share of their packets during the
        // fault phase.
        let mut impaired = Vec::new();
        let (lossy, corrupt) = (r.one_in(2), r.one_in(3));
        if lossy || corrupt {
            for _ in 0..r.range(1, 8) {
                impaired.push((
                    r.next_u64() as u32,
                    if lossy {
                        r.range(1_000, 50_000) as u32
                    } else {
                        0
                    },
                    if corrupt {
                        r.range(1_000, 20_000) as u32
                    } else {
                        0
                    },
                ));
            }
        }
        if lossy {
            kinds.push("gray loss");
        }
        if corrupt {
            kinds.push("corruption");
        }
        let mut faults = Vec::new();
        let phase = FAULT_PHASE.as_ps() / 1_000;
        // Links and switches are numbered once the fabric is built; the plan keeps indices
        // and [`run`] maps them into range.
        if r.one_in(2) {
            for _ in 0..r.range(1, 4) {
                let l = LinkId(r.next_u64() as u32);
                let mut at = r.below(phase / 2);
                let flaps = r.pick(&[1u64, 1, 4]);
                for _ in 0..flaps {
                    let down = r.range(1_000, phase / 8);
                    faults.push((Time::from_ns(at), Fault::LinkDown(l)));
                    faults.push((Time::from_ns((at + down).min(phase)), Fault::LinkUp(l)));
                    at = (at + down + r.range(500, 20_000)).min(phase);
                }
                kinds.push(if flaps > 1 {
                    "link flap"
                } else {
                    "link down/up"
                });
            }
        }
        if r.one_in(2) {
            let s = SwitchId(r.next_u64() as u32);
            let at = r.below(phase / 2);
            faults.push((Time::from_ns(at), Fault::Blackhole(s)));
            faults.push((
                Time::from_ns(at + r.range(1_000, phase / 2)),
                Fault::Restore(s),
            ));
            kinds.push("blackholing switch");
        }
        CyclePlan {
            seed,
            scenario: sc,
            faults,
            impaired,
            kinds,
        }
    }
}

fn map_fault(f: Fault, links: u32, switches: u32) -> Fault {
    match f {
        Fault::LinkDown(l) => Fault::LinkDown(LinkId(l.0 % links.max(1))),
        Fault::LinkUp(l) => Fault::LinkUp(LinkId(l.0 % links.max(1))),
        Fault::Blackhole(s) => Fault::Blackhole(SwitchId(s.0 % switches.max(1))),
        Fault::Restore(s) => Fault::Restore(SwitchId(s.0 % switches.max(1))),
    }
}

/// Conservation at this moment.
fn conserved(w: &World) -> Result<(), String> {
    let t = w.fabric.totals();
    if !t.conserved() {
        return Err(format!("packets not conserved: {t:?}"));
    }
    for l in 0..w.fabric.links() {
        let Some((a, b)) = w.fabric.link_counters(LinkId(l)) else {
            return Err(format!("link {l} has no counters"));
        };
        for (x, y) in [(a, b), (b, a)] {
            if y.rx_packets + x.wire_lost_packets > x.tx_packets {
                return Err(format!(
                    "link {l}: received {} + lost on the wire {} > sent {}",
                    y.rx_packets, x.wire_lost_packets, x.tx_packets
                ));
            }
        }
    }
    let tx: u64 = w.nics.iter().map(|n| n.counters().tx_packets).sum();
    let rx: u64 = w.nics.iter().map(|n| n.counters().rx_packets).sum();
    if tx != t.injected || rx != t.delivered {
        return Err(format!(
            "NICs sent {tx} / received {rx}, the fabric injected {} / delivered {}",
            t.injected, t.delivered
        ));
    }
    Ok(())
}

/// Runs `plan`: `Err` says what failed.
pub fn run(plan: &CyclePlan) -> Result<CycleReport, String> {
    let sc = &plan.scenario;
    let mut sim = build(sc).map_err(|e| format!("build: {e}"))?;
    let (links, switches, comp) = {
        let f = &sim.handler().fabric;
        (f.links(), f.topology().switches(), f.component())
    };
    for &(at, f) in &plan.faults {
        sim.schedule(at, comp, ev::FAULT, map_fault(f, links, switches).encode())
            .map_err(|e| format!("schedule: {e:?}"))?;
    }
    for &(l, loss, corrupt) in &plan.impaired {
        sim.handler_mut()
            .fabric
            .set_link_impairment(LinkId(l % links.max(1)), loss, corrupt);
    }
    let mut gray = !plan.impaired.is_empty();
    let step = Duration::from_us(10);
    let bound = std::env::var("SWARM_CYCLE_BOUND_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(CYCLE_LIVENESS_BOUND, Duration::from_us);
    let end = Time::ZERO.saturating_add(FAULT_PHASE).saturating_add(bound);
    while !sim.handler().main_done() {
        if sim.now() >= end {
            let w = sim.handler();
            return Err(format!(
                "liveness: {} of {} flows unfinished at {:?} ({:?})",
                w.main_flows - w.main_finished,
                w.main_flows,
                sim.now(),
                w.fabric.totals()
            ));
        }
        if gray && sim.now() >= Time::ZERO.saturating_add(FAULT_PHASE) {
            // Faults stop: the gray links heal.
            for l in 0..links {
                sim.handler_mut()
                    .fabric
                    .set_link_impairment(LinkId(l), 0, 0);
            }
            gray = false;
        }
        let next = sim.now().saturating_add(step);
        sim.run_until(next);
        conserved(sim.handler())?;
    }
    let w = sim.handler();
    conserved(w)?;
    if std::env::var("SWARM_VERBOSE").is_ok() {
        eprintln!("done at {:?}: {:?}", sim.now(), w.fabric.totals());
    }
    let hosts = sc.fabric.shape.hosts();
    let mut acked = 0;
    for n in &w.nics {
        for f in n.flow_results().filter(|f| !f.background) {
            if f.failed {
                return Err(format!("flow {:?} failed", f.flow));
            }
            acked += f.acked_bytes;
        }
    }
    let want = sc.workload.total_bytes(hosts);
    if acked != want {
        return Err(format!(
            "{acked} bytes acknowledged, the workload has {want}"
        ));
    }
    let t = w.fabric.totals();
    Ok(CycleReport {
        hosts,
        injected: t.injected,
        dropped: t.dropped_total(),
        acked_bytes: acked,
        faults: plan.faults.len() as u64,
    })
}

/// Runs seed `seed`; `Err` names it and the replay command.
pub fn run_cycle_seed(seed: u64) -> Result<CycleReport, String> {
    let plan = CyclePlan::draw(seed);
    run(&plan).map_err(|e| {
        format!(
            "cycle-level swarm seed {seed} failed: {e}\n  faults: {:?}\n  replay: \
             SWARM_SEED={seed} cargo test -p mrc-tests --release --test swarm -- cycle_replay \
             --nocapture",
            plan.kinds
        )
    })
}
