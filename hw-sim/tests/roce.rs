//! roce-ecmp over a real fabric, driven by a small world of its own (the fabric as component
//! 0, the RoCE NICs as component 1, the same event kinds as the MRC NIC): no failure, a T0-T1
//! link failure with reconvergence, incast with DCQCN, flow dependencies, determinism.

use mrc_sim::core::{ComponentId, Duration, Event, Handler, Scheduler, Simulator, Time};
use mrc_sim::fabric::{
    DropCause, Ecn, Fabric, FabricConfig, Fault, LinkId, Packet, Payload, Route, Shape,
    TransportKind,
};
use mrc_sim::nic::roce::{self, ev, FlowResult, RoceConfig, RoceCounters, RoceNic};
use mrc_sim::workload::Flow;
use proptest::prelude::*;

const FABRIC: ComponentId = ComponentId(0);
const NICS: ComponentId = ComponentId(1);
/// Test hook: event `data` = index into [`World::forged`], delivered to its host as is.
const FORGE: ComponentId = ComponentId(2);
const MTU: u32 = 4096;
const GBPS100: u64 = 100_000_000_000;

struct World {
    fabric: Fabric,
    nics: Vec<RoceNic>,
    bad_events: u64,
    /// Packets to hand to a NIC as if the fabric delivered them (host, packet).
    forged: Vec<(u32, Packet)>,
}

impl Handler for World {
    fn handle(&mut self, now: Time, e: Event, s: &mut Scheduler<'_>) {
        match e.target {
            FABRIC => {
                self.fabric.handle(e, s);
                while let Some(d) = self.fabric.poll_delivery() {
                    match self.nics.get_mut(d.host as usize) {
                        Some(n) => n.receive(now, &d.packet, &mut self.fabric, s, NICS),
                        None => self.bad_events += 1,
                    }
                }
            }
            NICS => {
                let Some(n) = self.nics.get_mut(e.data as u32 as usize) else {
                    self.bad_events += 1;
                    return;
                };
                match e.kind {
                    ev::START => n.start(now, &mut self.fabric, s, NICS),
                    ev::PUMP => n.on_pump(now, &mut self.fabric, s, NICS),
                    ev::TIMER => n.on_timer(now, &mut self.fabric, s, NICS),
                    _ => self.bad_events += 1,
                }
            }
            FORGE => match self.forged.get(e.data as usize).copied() {
                Some((h, p)) => self.nics[h as usize].receive(now, &p, &mut self.fabric, s, NICS),
                None => self.bad_events += 1,
            },
            _ => self.bad_events += 1,
        }
        // Pass completed flows on to every NIC (flows that run after them).
        for i in 0..self.nics.len() {
            while let Some(d) = self.nics[i].poll_flow_done() {
                for n in &mut self.nics {
                    n.flow_completed(d.id, now, &mut self.fabric, s, NICS);
                }
            }
        }
    }
}

fn fabric_cfg(hosts: u32, radix: u32, reconvergence: Duration) -> FabricConfig {
    let mut c = FabricConfig::htsim_reference(Shape::LeafSpine { hosts, radix });
    c.reconvergence = reconvergence;
    c.seed = 5;
    roce::lossless(c, MTU)
}

fn build(fcfg: FabricConfig, flows: &[Flow], rcfg: RoceConfig) -> Simulator<World> {
    let fabric = Fabric::new(fcfg, FABRIC).unwrap();
    let hosts = fabric.topology().hosts();
    let nics = (0..hosts)
        .map(|h| RoceNic::new(h, flows, rcfg).unwrap())
        .collect();
    let mut sim = Simulator::new(World {
        fabric,
        nics,
        bad_events: 0,
        forged: Vec::new(),
    });
    for h in 0..hosts {
        sim.schedule(Time::ZERO, NICS, ev::START, u64::from(h))
            .unwrap();
    }
    sim
}

/// Runs until every NIC is done or failed, or `limit`.
fn run(sim: &mut Simulator<World>, limit: Time) {
    loop {
        let next = sim.now().saturating_add(Duration::from_us(20)).min(limit);
        sim.run_until(next);
        let w = sim.handler();
        if w.nics.iter().all(|n| n.done_at().is_some() || n.failed()) || sim.now() >= limit {
            return;
        }
    }
}

fn permutation_flows(hosts: u32, bytes: u64, seed: u64) -> Vec<Flow> {
    mrc_sim::run::permutation(hosts, seed)
        .iter()
        .enumerate()
        .map(|(src, dst)| Flow {
            id: src as u32,
            src: src as u32,
            dst: *dst,
            bytes,
            msg_bytes: 256 << 10,
            start: Time::ZERO,
            after: None,
        })
        .collect()
}

fn results(sim: &Simulator<World>) -> Vec<FlowResult> {
    sim.handler()
        .nics
        .iter()
        .flat_map(|n| n.flow_results())
        .collect()
}

fn totals(sim: &Simulator<World>) -> RoceCounters {
    let mut t = RoceCounters::default();
    for n in &sim.handler().nics {
        let c = n.counters();
        t.data_sent += c.data_sent;
        t.retransmits += c.retransmits;
        t.naks_sent += c.naks_sent;
        t.cnps_sent += c.cnps_sent;
        t.cnps_received += c.cnps_received;
        t.rate_decreases += c.rate_decreases;
        t.timeouts += c.timeouts;
        t.qp_errors += c.qp_errors;
        t.duplicates += c.duplicates;
        t.out_of_sequence += c.out_of_sequence;
        t.bad_payload += c.bad_payload;
        t.bad_pattern += c.bad_pattern;
        t.unknown_qp += c.unknown_qp;
        t.inject_errors += c.inject_errors;
        t.placed_bytes += c.placed_bytes;
    }
    t
}

/// Every flow completed, and its receiver placed exactly its bytes (in order: the responder
/// accepts only the expected PSN with the pattern of that PSN).
fn assert_exactly_once(sim: &Simulator<World>, flows: &[Flow]) {
    let w = sim.handler();
    for f in flows {
        let r = w.nics[f.src as usize]
            .flow_results()
            .find(|r| r.id == f.id)
            .unwrap();
        assert!(r.done_at.is_some() && !r.failed, "flow {} {r:?}", f.id);
        assert_eq!(r.acked_bytes, f.bytes);
        assert_eq!(
            w.nics[f.dst as usize].received_bytes(f.id),
            Some(f.bytes),
            "flow {}",
            f.id
        );
    }
    let t = totals(sim);
    assert_eq!(t.placed_bytes, flows.iter().map(|f| f.bytes).sum::<u64>());
    assert_eq!(
        (t.bad_payload, t.bad_pattern, t.unknown_qp, t.inject_errors),
        (0, 0, 0, 0)
    );
    assert_eq!(w.bad_events + w.fabric.bad_events(), 0);
    assert!(w.fabric.totals().conserved());
}

fn us(d: Duration) -> f64 {
    d.as_ps() as f64 / 1e6
}

#[test]
fn permutation_without_failure_is_lossless_near_line_rate() {
    let fcfg = fabric_cfg(8, 4, Duration::from_ms(150));
    let bytes = 2 << 20;
    let flows = permutation_flows(8, bytes, 3);
    let mut sim = build(fcfg, &flows, RoceConfig::new(1, GBPS100, MTU, 3));
    run(&mut sim, Time::from_ms(20));
    assert_exactly_once(&sim, &flows);
    let t = totals(&sim);
    let fab = &sim.handler().fabric;
    // PFC: nothing dropped anywhere, so nothing retransmitted.
    assert_eq!(fab.totals().dropped_total(), 0);
    assert_eq!((t.retransmits, t.timeouts, t.naks_sent), (0, 0, 0));
    // Line rate for one flow: bytes at 100 Gb/s plus headers (2%) and a round trip.
    let line = Duration::from_ps(bytes * 8 * 10); // 100 Gb/s = 10 ps per bit
    let fcts: Vec<Duration> = results(&sim).iter().filter_map(|r| r.fct()).collect();
    let best = *fcts.iter().min().unwrap();
    let worst = *fcts.iter().max().unwrap();
    eprintln!(
        "line {:.1} us, FCT best {:.1} worst {:.1} us, CNPs {}, pauses {}",
        us(line),
        us(best),
        us(worst),
        t.cnps_sent,
        sim.handler()
            .nics
            .iter()
            .map(|n| n.pauses_received(fab))
            .sum::<u64>()
    );
    // A flow alone on its path runs at line rate; ECMP collisions (two QPs hashed onto one
    // uplink) at most halve a flow's share here.
    assert!(
        best <= Duration::from_ps(line.as_ps() * 11 / 10) + Duration::from_us(10),
        "{best}"
    );
    assert!(
        worst <= line.saturating_mul(2) + Duration::from_us(200),
        "{worst}"
    );
}

/// The T0-T1 link from leaf `leaf` to spine `spine` on plane 0.
fn leaf_spine_link(f: &Fabric, leaf: u32, spine: u32) -> LinkId {
    let t = f.topology();
    let hpl = t.switch_info(t.switch(0, 0, 0).unwrap()).ports / 2;
    f.port_link(t.switch_port(t.switch(0, 0, leaf).unwrap(), hpl + spine))
        .unwrap()
}

fn failure_run(seed: u64) -> Simulator<World> {
    let reconv = Duration::from_ms(2);
    let fcfg = fabric_cfg(8, 4, reconv);
    let flows = permutation_flows(8, 4 << 20, seed);
    let mut rcfg = RoceConfig::new(1, GBPS100, MTU, seed);
    rcfg.timeout_exp = 8; // 1.05 ms
    let mut sim = build(fcfg, &flows, rcfg);
    sim.set_trace(true);
    let link = leaf_spine_link(&sim.handler().fabric, 0, 0);
    sim.schedule(
        Time::from_us(50),
        FABRIC,
        mrc_sim::fabric::ev::FAULT,
        Fault::LinkDown(link).encode(),
    )
    .unwrap();
    run(&mut sim, Time::from_ms(50));
    sim
}

#[test]
fn link_failure_stalls_ecmp_qps_until_reconvergence_then_go_back_n_recovers() {
    let sim = failure_run(11);
    let flows = permutation_flows(8, 4 << 20, 11);
    assert_exactly_once(&sim, &flows);
    let rs = results(&sim);
    let t = totals(&sim);
    let fab = &sim.handler().fabric;
    for r in &rs {
        eprintln!(
            "flow {} -> {}: fct {:.1} us, stall {:.1} us, retx {}, timeouts {}, rate cuts {}",
            r.id,
            r.dst,
            us(r.fct().unwrap()),
            us(r.max_stall),
            r.retransmits,
            r.timeouts,
            r.rate_decreases
        );
    }
    // Packets hashed onto the dead link died until routing moved them (2 ms after 50 us).
    assert!(fab.totals().dropped(DropCause::LinkDown) > 0);
    assert_eq!(fab.totals().dropped(DropCause::QueueFull), 0);
    // Some QP crossed it and stalled for the whole reconvergence: from its last ACK before
    // 50 us to the first transport timer expiry after 2.05 ms.
    let stalled: Vec<&FlowResult> = rs
        .iter()
        .filter(|r| r.max_stall >= Duration::from_ms(2))
        .collect();
    assert!(!stalled.is_empty(), "no QP stalled");
    for r in &stalled {
        assert!(r.timeouts >= 1 && r.retransmits > 0, "{r:?}");
        // Recovered within two timer periods of reconvergence.
        assert!(r.max_stall < Duration::from_ms(2) + Duration::from_us(2 * 1_050 + 100));
        assert!(r.done_at.unwrap() > Time::from_ms(2));
    }
    // QPs whose path survived did not stall.
    assert!(rs.iter().any(|r| r.max_stall < Duration::from_us(100)));
    assert!(t.retransmits > 0 && t.timeouts > 0);
    assert_eq!(t.qp_errors, 0);
}

#[test]
fn same_seed_same_run() {
    let (a, b) = (failure_run(11), failure_run(11));
    assert_eq!(a.stats().trace_hash, b.stats().trace_hash);
    assert_eq!(results(&a), results(&b));
    assert_eq!(totals(&a), totals(&b));
    assert_eq!(a.handler().fabric.totals(), b.handler().fabric.totals());
}

fn incast_flows(bytes: u64) -> Vec<Flow> {
    (1..8u32)
        .map(|src| Flow {
            id: src,
            src,
            dst: 0,
            bytes,
            msg_bytes: 64 << 10,
            start: Time::ZERO,
            after: None,
        })
        .collect()
}

fn incast_run(rcfg: RoceConfig, bytes: u64) -> Simulator<World> {
    let fcfg = fabric_cfg(8, 4, Duration::from_ms(150));
    let mut sim = build(fcfg, &incast_flows(bytes), rcfg);
    run(&mut sim, Time::from_ms(50));
    sim
}

fn last_done(sim: &Simulator<World>) -> Time {
    results(sim).iter().filter_map(|r| r.done_at).max().unwrap()
}

#[test]
fn incast_dcqcn_cuts_rates_on_cnps_and_pfc_keeps_it_lossless() {
    let bytes = 1 << 20;
    let flows = incast_flows(bytes);
    let sim = incast_run(RoceConfig::new(1, GBPS100, MTU, 1), bytes);
    assert_exactly_once(&sim, &flows);
    let t = totals(&sim);
    let fab = &sim.handler().fabric;
    let pauses: u64 = sim
        .handler()
        .nics
        .iter()
        .map(|n| n.pauses_received(fab))
        .sum();
    let rs = results(&sim);
    let end = rs.iter().filter_map(|r| r.done_at).max().unwrap();
    eprintln!(
        "incast: CNPs {} sent / {} received, rate decreases {}, host pauses {}, done {:.1} us",
        t.cnps_sent,
        t.cnps_received,
        t.rate_decreases,
        pauses,
        us(end.since_start())
    );
    assert!(t.cnps_sent > 0);
    assert_eq!(t.cnps_sent, t.cnps_received);
    assert_eq!(t.rate_decreases, t.cnps_received);
    assert!(rs.iter().all(|r| r.rate_decreases > 0), "{rs:?}");
    // The NP sends at most one CNP per QP per 50 us.
    for r in &rs {
        let window = r.done_at.unwrap().duration_since(Time::ZERO);
        assert!(r.rate_decreases <= window.as_ps() / Duration::from_us(50).as_ps() + 1);
    }
    assert_eq!(fab.totals().dropped_total(), 0);
    assert_eq!((t.retransmits, t.timeouts), (0, 0));
    // Seven flows share host 0's 100 Gb/s link: at least their bytes at line rate.
    let floor = Duration::from_ps(7 * bytes * 8 * 10);
    assert!(end.since_start() >= floor);
    assert!(end.since_start() <= floor.saturating_mul(5), "{end}");
}

#[test]
fn dcqcn_off_sends_no_rate_cut_but_counts_cnps() {
    let fcfg = fabric_cfg(8, 4, Duration::from_ms(150));
    let flows: Vec<Flow> = (1..4u32)
        .map(|src| Flow {
            id: src,
            src,
            dst: 0,
            bytes: 512 << 10,
            msg_bytes: 64 << 10,
            start: Time::ZERO,
            after: None,
        })
        .collect();
    let mut rcfg = RoceConfig::new(1, GBPS100, MTU, 1);
    rcfg.dcqcn_on = false;
    let mut sim = build(fcfg, &flows, rcfg);
    run(&mut sim, Time::from_ms(50));
    assert_exactly_once(&sim, &flows);
    let t = totals(&sim);
    assert!(t.cnps_received > 0);
    assert_eq!(t.rate_decreases, 0);
    assert!(results(&sim).iter().all(|r| r.rate_bps == GBPS100));
}

#[test]
fn flows_wait_for_start_and_for_the_flow_they_follow() {
    let fcfg = fabric_cfg(8, 4, Duration::from_ms(150));
    let flow = |id, src, dst, start_us, after| Flow {
        id,
        src,
        dst,
        bytes: 256 << 10,
        msg_bytes: 64 << 10,
        start: Time::from_us(start_us),
        after,
    };
    // 0 -> 5 at t = 0; 5 -> 2 after it (another NIC); 2 -> 7 after that and not before 300 us;
    // a zero-byte flow 6 -> 1 at 10 us; 1 -> 3 after the zero-byte one.
    let mut flows = vec![
        flow(0, 0, 5, 0, None),
        flow(1, 5, 2, 0, Some(0)),
        flow(2, 2, 7, 300, Some(1)),
        flow(3, 6, 1, 10, None),
        flow(4, 1, 3, 0, Some(3)),
    ];
    flows[3].bytes = 0;
    let mut sim = build(fcfg, &flows, RoceConfig::new(1, GBPS100, MTU, 2));
    run(&mut sim, Time::from_ms(20));
    assert_exactly_once(&sim, &flows);
    let rs = results(&sim);
    let get = |id: u32| *rs.iter().find(|r| r.id == id).unwrap();
    assert_eq!(get(0).released_at, Some(Time::ZERO));
    assert_eq!(get(1).released_at, get(0).done_at);
    let r2 = get(2).released_at.unwrap();
    assert_eq!(r2, get(1).done_at.unwrap().max(Time::from_us(300)));
    assert_eq!(get(3).done_at, Some(Time::from_us(10)));
    assert_eq!(get(4).released_at, Some(Time::from_us(10)));
}

#[test]
fn bad_setups_are_refused() {
    let cfg = RoceConfig::new(1, GBPS100, MTU, 1);
    let f = Flow {
        id: 0,
        src: 0,
        dst: 0,
        bytes: 1,
        msg_bytes: 1,
        start: Time::ZERO,
        after: None,
    };
    assert!(RoceNic::new(0, &[f], cfg).is_err());
    assert!(RoceNic::new(
        0,
        &[Flow {
            dst: 1,
            msg_bytes: 0,
            ..f
        }],
        cfg
    )
    .is_err());
    assert!(RoceNic::new(
        0,
        &[Flow {
            dst: 1,
            id: 1 << 28,
            ..f
        }],
        cfg
    )
    .is_err());
    let g = Flow { dst: 1, ..f };
    assert!(RoceNic::new(0, &[g, g], cfg).is_err());
    // Flows of other hosts are ignored.
    assert!(RoceNic::new(5, &[g, g], cfg).is_ok());
    let mut bad = cfg;
    bad.timeout_exp = 0;
    assert!(RoceNic::new(0, &[g], bad).is_err());
    bad = cfg;
    bad.retry_cnt = 8;
    assert!(RoceNic::new(0, &[g], bad).is_err());
    assert_eq!(cfg.rto(), Duration::from_ps(4_096_000 << 14));
}

#[test]
fn dcqcn_recovery_speed_follows_the_increase_steps() {
    // Same incast; htsim's link-scaled R_AI recovers from the cuts far sooner than the
    // paper's 40 Mb/s.
    let bytes = 1 << 20;
    let paper = incast_run(RoceConfig::new(1, GBPS100, MTU, 1), bytes);
    let mut cfg = RoceConfig::new(1, GBPS100, MTU, 1);
    cfg.dcqcn = roce::DcqcnParams::htsim(GBPS100);
    let fast = incast_run(cfg, bytes);
    assert_exactly_once(&fast, &incast_flows(bytes));
    let (a, b) = (last_done(&paper), last_done(&fast));
    eprintln!("incast done: paper {a}, htsim {b}");
    assert!(b < a, "{b} vs {a}");
    assert!(totals(&fast).rate_decreases > 0);
}

/// The default run's shape (64 hosts, 4 x 200 Gb/s planes, radix 16, 16 MiB permutation, a
/// T0-T1 link of plane 0 failing at 40 us, 150 ms reconvergence, t = 14): prints what
/// roce-ecmp does there and how long it takes. `cargo test --release -p mrc-sim --test roce
/// -- --ignored --nocapture`.
#[test]
#[ignore]
fn default_scale_failure() {
    let mut c = FabricConfig::htsim_reference(Shape::LeafSpine {
        hosts: 64,
        radix: 16,
    });
    c.planes = 4;
    c.host_link_bps = 200_000_000_000;
    c.t1_link_bps = 200_000_000_000;
    c.propagation = Duration::from_ns(500);
    let c = roce::lossless(c, MTU);
    let bytes = 16 << 20;
    let flows = permutation_flows(64, bytes, 1);
    let mut sim = build(c, &flows, RoceConfig::new(4, 200_000_000_000, MTU, 1));
    let link = leaf_spine_link(&sim.handler().fabric, 0, 0);
    sim.schedule(
        Time::from_us(40),
        FABRIC,
        mrc_sim::fabric::ev::FAULT,
        Fault::LinkDown(link).encode(),
    )
    .unwrap();
    let wall = std::time::Instant::now();
    run(&mut sim, Time::from_secs(2));
    let t = totals(&sim);
    let rs = results(&sim);
    let done = rs.iter().filter(|r| r.done_at.is_some()).count();
    let mut fcts: Vec<Duration> = rs.iter().filter_map(|r| r.fct()).collect();
    fcts.sort_unstable();
    let stall = rs.iter().map(|r| r.max_stall).max().unwrap();
    eprintln!(
        "{done}/64 done, FCT p50 {} max {}, longest stall {stall}, retx {}, timeouts {}, \
         CNPs {}, events {}, wall {:?}",
        fcts[fcts.len() / 2],
        fcts[fcts.len() - 1],
        t.retransmits,
        t.timeouts,
        t.cnps_sent,
        sim.stats().events,
        wall.elapsed()
    );
    assert_exactly_once(&sim, &flows);
}

#[test]
fn foreign_damaged_and_misplaced_packets_are_dropped_and_counted() {
    // Flow 0: host 0 -> host 3. Forged deliveries to host 3 before the real data arrives.
    let flows = [Flow {
        id: 0,
        src: 0,
        dst: 3,
        bytes: 64 << 10,
        msg_bytes: 64 << 10,
        start: Time::from_us(100),
        after: None,
    }];
    let mut sim = build(
        fabric_cfg(8, 4, Duration::from_ms(150)),
        &flows,
        RoceConfig::new(1, GBPS100, MTU, 1),
    );
    let data = |qpn: u32, psn: u32, payload: Payload| Packet {
        src: 0,
        dst: 3,
        size_bytes: 4194,
        payload,
        transport_tag: roce::wire::Tag {
            qpn,
            kind: roce::wire::Kind::Data { psn, last: false },
        }
        .encode(),
        route: Route::Ecmp { hash: 0 },
        plane: 0,
        kind: TransportKind::Roce,
        ecn: Ecn::Ect,
        flags: 0,
    };
    let good = Payload::new(4096, roce::qp::pattern(0, 0));
    let forged = vec![
        // The expected PSN with another flow's pattern (a misplaced packet).
        (3, data(0, 0, Payload::new(4096, roce::qp::pattern(9, 0)))),
        // A damaged payload.
        (
            3,
            data(
                0,
                0,
                Payload {
                    checksum: 1,
                    ..good
                },
            ),
        ),
        // A QP host 3 does not have.
        (3, data(7, 0, good)),
        // The right QP from the wrong host.
        (
            3,
            Packet {
                src: 1,
                ..data(0, 0, good)
            },
        ),
    ];
    let n = forged.len();
    sim.handler_mut().forged = forged;
    for i in 0..n {
        sim.schedule(Time::from_us(1), FORGE, 0, i as u64).unwrap();
    }
    run(&mut sim, Time::from_ms(5));
    let c = sim.handler().nics[3].counters();
    assert_eq!((c.bad_pattern, c.bad_payload, c.unknown_qp), (1, 1, 2));
    // None of them was placed; the real flow still arrives exactly once.
    assert_exactly_once_except_forged(&sim, &flows);
}

fn assert_exactly_once_except_forged(sim: &Simulator<World>, flows: &[Flow]) {
    let w = sim.handler();
    for f in flows {
        assert_eq!(w.nics[f.dst as usize].received_bytes(f.id), Some(f.bytes));
        assert!(w.nics[f.src as usize].done_at().is_some());
    }
}

#[test]
fn many_qps_per_nic_over_two_planes() {
    let mut fcfg = fabric_cfg(8, 4, Duration::from_ms(150));
    fcfg.planes = 2;
    let mut flows = Vec::new();
    for src in 0..8u32 {
        for dst in (0..8u32).filter(|d| *d != src) {
            flows.push(Flow {
                id: flows.len() as u32,
                src,
                dst,
                bytes: 96 << 10,
                msg_bytes: 32 << 10,
                start: Time::ZERO,
                after: None,
            });
        }
    }
    let mut sim = build(fcfg, &flows, RoceConfig::new(2, GBPS100, MTU, 4));
    run(&mut sim, Time::from_ms(50));
    assert_exactly_once(&sim, &flows);
    let rs = results(&sim);
    assert_eq!(rs.len(), 56);
    // QPs spread over both planes; PFC kept it lossless.
    assert!(rs.iter().any(|r| r.plane == 0) && rs.iter().any(|r| r.plane == 1));
    assert_eq!(sim.handler().fabric.totals().dropped_total(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Random loss and corruption on every link (which PFC cannot prevent): go-back-N still
    /// delivers every byte exactly once, in order, and every flow completes.
    #[test]
    fn random_loss_go_back_n_is_exactly_once(
        seed in 0u64..1_000,
        loss_ppm in 1_000u32..15_000,
        corrupt_ppm in 0u32..5_000,
    ) {
        let mut fcfg = fabric_cfg(8, 4, Duration::from_ms(150));
        fcfg.loss_ppm = loss_ppm;
        fcfg.corrupt_ppm = corrupt_ppm;
        fcfg.seed = seed;
        let flows = permutation_flows(8, 256 << 10, seed);
        let mut rcfg = RoceConfig::new(1, GBPS100, MTU, seed);
        rcfg.timeout_exp = 6; // 262 us
        let mut sim = build(fcfg, &flows, rcfg);
        run(&mut sim, Time::from_ms(200));
        assert_exactly_once(&sim, &flows);
        let t = totals(&sim);
        let lost = sim.handler().fabric.totals().dropped_total();
        prop_assert!(lost > 0);
        prop_assert!(t.retransmits > 0);
        prop_assert!(t.naks_sent > 0 || t.timeouts > 0);
    }
}
