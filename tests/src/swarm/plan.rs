//! What one seed draws: a topology, a workload through the driver API and a fault mix.
//!
//! Swarm testing (Groce et al.): each seed enables a random subset of the fault kinds, with
//! random intensities and times, instead of every fault at once, so that runs differ in kind
//! and not only in detail.

use mrc_sim::core::time::Duration;
use mrc_sim::fabric::Shape;
use mrc_sim::nic_host::ClosConfig;

use super::rng::Rng;
pub use crate::hosts::Msg;

/// One connection: host `from` writes `msgs` to host `to` in batches of `batch` WRs (one
/// doorbell each), one batch every `every` ticks from tick `start`.
#[derive(Clone, Debug)]
pub struct ConnPlan {
    pub from: usize,
    pub to: usize,
    pub msgs: Vec<Msg>,
    pub batch: usize,
    pub start: u32,
    pub every: u32,
    /// Source region bytes (the receiver's region is as large).
    pub region: u64,
}

/// One fault of the mix. Times are ns after the workload starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A cable of `nic` pulled and plugged back, once or several times (a flap).
    LinkFlap {
        nic: usize,
        port: u8,
        windows: Vec<(u64, u64)>,
    },
    /// A whole plane lost (every NIC's port on it down, every packet on it dropped).
    PlaneLost { plane: u8, from: u64, to: u64 },
    /// A spine of `plane` that stays up and silently drops the EVs routed through it.
    SwitchBlackhole {
        plane: u8,
        spines: u16,
        spine: u16,
        from: u64,
        to: u64,
    },
    /// The link between leaf `leaf` and spine `spine` of `plane` silently drops everything
    /// for the whole fault phase.
    LinkBlackhole { plane: u8, leaf: u16, spine: u16 },
    /// Gray loss on every link, ppm.
    GrayLoss(u32),
    /// Packets damaged on a link (dropped by the receiving node's FCS check), ppm per link.
    Corruption(u32),
    /// Switch data queues of `bytes` only: congestion trims (and drops headers when the
    /// header queue is full too), at the last hop under incast.
    SmallQueues { bytes: u64 },
    /// Slow DMA on `nic` (host memory answers its reads `ns` later).
    SlowDma { nic: usize, ns: u64 },
    /// `nic`'s firmware cores run nothing in `[from, to)`.
    StalledCore { nic: usize, from: u64, to: u64 },
    /// The controller of host `host` denies `evs` of its EV profile at tick `at` and allows
    /// them again at tick `until`.
    EvDenial {
        host: usize,
        evs: Vec<u16>,
        at: u32,
        until: u32,
    },
}

impl Fault {
    /// Kind name for the summary.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::LinkFlap { windows, .. } if windows.len() > 1 => "link flap",
            Fault::LinkFlap { .. } => "link down/up",
            Fault::PlaneLost { .. } => "plane lost",
            Fault::SwitchBlackhole { .. } => "blackholing switch",
            Fault::LinkBlackhole { .. } => "blackholed link",
            Fault::GrayLoss(_) => "gray loss",
            Fault::Corruption(_) => "corruption",
            Fault::SmallQueues { .. } => "small queues",
            Fault::SlowDma { .. } => "slow DMA",
            Fault::StalledCore { .. } => "stalled core",
            Fault::EvDenial { .. } => "EV denial",
        }
    }
}

/// Everything one seed runs.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    pub hosts: usize,
    pub planes: u8,
    /// EVs per QP (the controller's EV profile).
    pub evs: u16,
    /// Spines per plane of the Clos (each host on its own leaf of `spines` hosts).
    pub spines: u16,
    pub conns: Vec<ConnPlan>,
    /// Virtual time per tick (and the most one doorbell runs the fabric).
    pub tick_ns: u64,
    /// The fault phase: twice the time the workload takes to post, ns after it starts.
    /// Windows start in its first half; whatever is still open at its end is ended then.
    pub fault_phase_ns: u64,
    /// Propagation delay of every link.
    pub latency_ns: u64,
    pub faults: Vec<Fault>,
    pub planted_bug: bool,
}

impl Plan {
    /// The simulated host's fabric: a leaf-spine of `spines` spines per plane whose leaves
    /// have `spines` hosts each, one NIC of the plan per leaf (`SimHost::on_clos` spreads them
    /// evenly), with the link impairments and queue limits of the fault mix.
    pub fn clos(&self) -> ClosConfig {
        let mut c = ClosConfig::default();
        let s = &mut c.scenario;
        s.seed = self.seed;
        let radix = 2 * u32::from(self.spines);
        s.fabric.shape = Shape::LeafSpine {
            hosts: self.hosts as u32 * u32::from(self.spines),
            radix,
        };
        s.fabric.planes = u32::from(self.planes);
        s.fabric.propagation = Duration::from_ns(self.latency_ns);
        for f in &self.faults {
            match *f {
                Fault::GrayLoss(p) => s.fabric.loss_ppm = p,
                Fault::Corruption(p) => s.fabric.corrupt_ppm = p,
                Fault::SmallQueues { bytes } => s.fabric.queue.limit_bytes = bytes,
                _ => {}
            }
        }
        c.step_budget_ns = self.tick_ns;
        c.planted_bug = self.planted_bug;
        c
    }

    /// Payload bytes of the workload.
    pub fn bytes(&self) -> u64 {
        self.conns.iter().flat_map(|c| &c.msgs).map(Msg::len).sum()
    }

    /// Draws the plan of `seed`.
    pub fn draw(seed: u64) -> Plan {
        let mut r = Rng::new(seed);
        let hosts = r.range(2, 6) as usize;
        let planes = r.pick(&[1u8, 2, 2, 4, 4]);
        // (a spine has a port per leaf: at least one spine per two hosts' leaves)
        let spines = r.pick(&[2u16, 4, 8]).max(hosts.div_ceil(2) as u16);
        let evs = r.pick(&[16u16, 32, 64, 128]).max(u16::from(planes) * 4);
        let tick_ns = r.pick(&[2_000u64, 5_000, 10_000, 20_000]);
        let latency_ns = r.range(100, 1_000);
        let nconns = r.range(1, 10) as usize;
        let conns = (0..nconns)
            .map(|k| {
                let from = r.below(hosts as u64) as usize;
                let to = (from + 1 + r.below(hosts as u64 - 1) as usize) % hosts;
                workload(&mut r, k as u64, from, to)
            })
            .collect::<Vec<ConnPlan>>();
        let ticks = conns
            .iter()
            .map(|c| {
                u64::from(c.start) + c.msgs.len().div_ceil(c.batch) as u64 * u64::from(c.every)
            })
            .max()
            .unwrap_or(1);
        let phase = 2 * ticks * tick_ns + 20_000;
        let mut faults = Vec::new();
        // Each kind is in the mix with probability 2/5.
        let on = |r: &mut Rng| r.below(5) < 2;
        let t = |r: &mut Rng| r.below(phase / 2);
        if on(&mut r) {
            for _ in 0..r.range(1, 3) {
                let nic = r.below(hosts as u64) as usize;
                let port = r.below(u64::from(planes)) as u8;
                let flaps = r.pick(&[1u64, 1, 3, 6]);
                let mut at = t(&mut r);
                let windows = (0..flaps)
                    .map(|_| {
                        let down = r.range(1_000, phase / 4);
                        let w = (at, at + down);
                        at += down + r.range(1_000, 50_000);
                        w
                    })
                    .collect();
                faults.push(Fault::LinkFlap { nic, port, windows });
            }
        }
        if on(&mut r) {
            let from = t(&mut r);
            faults.push(Fault::PlaneLost {
                plane: r.below(u64::from(planes)) as u8,
                from,
                to: from + r.range(10_000, phase / 2),
            });
        }
        if on(&mut r) {
            let from = t(&mut r);
            faults.push(Fault::SwitchBlackhole {
                plane: r.below(u64::from(planes)) as u8,
                spines,
                spine: r.below(u64::from(spines)) as u16,
                from,
                to: from + r.range(10_000, phase / 2),
            });
        }
        if on(&mut r) {
            faults.push(Fault::LinkBlackhole {
                plane: r.below(u64::from(planes)) as u8,
                leaf: r.below(hosts as u64) as u16,
                spine: r.below(u64::from(spines)) as u16,
            });
        }
        if on(&mut r) {
            faults.push(Fault::GrayLoss(r.range(300, 12_000) as u32));
        }
        if on(&mut r) {
            faults.push(Fault::Corruption(r.range(300, 5_000) as u32));
        }
        if on(&mut r) {
            faults.push(Fault::SmallQueues {
                bytes: r.pick(&[5_000u64, 6_000, 8_192]),
            });
        }
        if on(&mut r) {
            faults.push(Fault::SlowDma {
                nic: r.below(hosts as u64) as usize,
                ns: r.range(500, 50_000),
            });
        }
        if on(&mut r) {
            let from = t(&mut r);
            faults.push(Fault::StalledCore {
                nic: r.below(hosts as u64) as usize,
                from,
                to: from + r.range(1_000, phase / 4),
            });
        }
        if on(&mut r) {
            let host = r.below(hosts as u64) as usize;
            let n = r.range(1, u64::from(evs / 4)) as usize;
            let mut list: Vec<u16> = (0..n).map(|_| r.below(u64::from(evs)) as u16).collect();
            list.sort_unstable();
            list.dedup();
            let at = r.below(ticks) as u32;
            faults.push(Fault::EvDenial {
                host,
                evs: list,
                at,
                until: at + r.range(1, ticks) as u32,
            });
        }
        Plan {
            seed,
            hosts,
            planes,
            evs,
            spines,
            conns,
            tick_ns,
            fault_phase_ns: phase,
            latency_ns,
            faults,
            planted_bug: false,
        }
    }
}

/// A connection's messages: sizes up to a drawn maximum, a third with two scatter-gather
/// pieces, a drawn share with an immediate, some plain writes unsignaled (the last message is
/// always signaled).
fn workload(r: &mut Rng, tag: u64, from: usize, to: usize) -> ConnPlan {
    let count = r.range(1, 60) as usize;
    let max_len = r.pick(&[64u64, 1_024, 3_000, 9_000, 20_000, 65_536]);
    let imm_in = r.range(1, 4);
    let (mut src, mut dst) = (0u64, 0u64);
    let mut msgs = Vec::new();
    for k in 0..count {
        let len = 1 + r.below(max_len);
        let pieces = if len > 1 && r.one_in(3) {
            let a = 1 + r.below(len - 1);
            // A gap between the pieces: they must still land contiguously.
            vec![(src, a as u32), (src + a + 64, (len - a) as u32)]
        } else {
            vec![(src, len as u32)]
        };
        src += len + 64;
        let imm = r.one_in(imm_in).then(|| r.next_u64() as u32);
        let signaled = imm.is_some() || r.below(5) != 0;
        msgs.push(Msg {
            wr_id: tag << 32 | k as u64,
            pieces,
            remote_off: dst,
            imm,
            signaled,
        });
        // Messages are packed, or a drawn gap apart.
        dst += len + r.pick(&[0u64, 0, 1, 4096]);
    }
    if let Some(m) = msgs.last_mut() {
        m.signaled = true;
    }
    ConnPlan {
        from,
        to,
        msgs,
        batch: r.range(1, 8) as usize,
        start: r.range(0, 10) as u32,
        every: r.range(1, 4) as u32,
        region: src.max(dst).max(64),
    }
}
