//! Time trace of the default `mrc` run (its start-up ramp), one line per `STEP_US`:
//! receivers below a quarter of the mean placed rate and the largest over the mean; idle host
//! ports (empty, not serializing) and how many of them belong to a NIC holding at least 6 full
//! packets at its other ports; queued bytes by tier (host ports, leaf down, leaf up, spine);
//! then the wire and payload rates the NICs injected, the payload rate placed at receivers
//! (Tb/s), flows completed, bytes in flight, QPs with data in flight and with queued work, and
//! the sum of the QPs' windows. At the end: the 12 slowest completed flows with their leaves
//! (the default failure is on leaf 0) and the slowest flow off leaf 0. A diagnostic tool, not a
//! test.
//!
//! `cargo run --release -p mrc-sim --example ramp_trace [SEED] [US] [STEP_US] [no-failure]`
use mrc_sim::core::time::{Duration, Time};
use mrc_sim::nic::Transport;
use mrc_sim::run::{build, Scenario};

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let us: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
    let mut sc = Scenario::default_for(Transport::Mrc);
    sc.seed = seed;
    let step: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    if args.next().as_deref() == Some("no-failure") {
        sc.failure = None;
    }
    let mut sim = build(&sc).unwrap();
    let mut last = 0u64;
    let mut last_pl = 0u64;
    let mut last_pb = 0u64;
    let mut per: Vec<u64> = Vec::new();
    for t in (step..=us).step_by(step as usize) {
        sim.run_until(Time::ZERO.saturating_add(Duration::from_us(t)));
        let w = sim.handler();
        let mut pb = 0u64;
        let (mut tx, mut pl, mut infl, mut cw, mut qi, mut qq) = (0u64, 0u64, 0u64, 0u64, 0, 0);
        for n in &w.nics {
            let c = n.counters();
            tx += c.tx_bytes;
            pl += c.tx_payload_bytes;
            pb += c.placed_bytes;
            for q in 0..n.connections() {
                let qp = n.qp(q).unwrap();
                cw += qp.cwnd_bytes;
                infl += qp.inflight_bytes;
                qi += usize::from(qp.inflight_bytes > 0);
                qq += usize::from(qp.sq_queued > 0);
            }
        }
        if per.is_empty() {
            per = vec![0; w.nics.len()];
        }
        let mut d: Vec<u64> = Vec::new();
        for (i, n) in w.nics.iter().enumerate() {
            let c = n.counters().placed_bytes;
            d.push(c - per[i]);
            per[i] = c;
        }
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64;
        let idle = d.iter().filter(|&&x| (x as f64) < mean * 0.25).count();
        let max = d.iter().copied().max().unwrap_or(0) as f64;
        print!(
            "rx idle<25% {idle:2} max/mean {:4.2} | ",
            if mean > 0.0 { max / mean } else { 0.0 }
        );
        let topo = w.fabric.topology();
        let mut qb = [0u64; 4];
        let mut idle_ports = 0;
        // Idle host ports whose NIC holds at least 6 full packets at its other ports.
        let mut idle_gated = 0;
        let full = u64::from(4096 + mrc_sim::nic::HEADER_BYTES);
        let now = sim.now();
        for p in 0..topo.ports() {
            let port = mrc_sim::fabric::PortId(p);
            let (d, h) = w.fabric.queue_bytes(port);
            let class = match topo.port_owner(port) {
                mrc_sim::fabric::PortOwner::Host { host, .. } => {
                    let idle = d + h == 0 && w.fabric.port_busy_until(port) <= now;
                    idle_ports += usize::from(idle);
                    if idle {
                        let nic: u64 = (0..topo.planes())
                            .map(|pl| {
                                let (a, b) = w.fabric.queue_bytes(topo.host_port(host, pl));
                                a + b
                            })
                            .sum();
                        idle_gated += usize::from(nic >= 6 * full);
                    }
                    0
                }
                mrc_sim::fabric::PortOwner::Switch { switch, port } => {
                    let i = topo.switch_info(switch);
                    if i.tier == 0 && port < i.ports / 2 {
                        1
                    } else if i.tier == 0 {
                        2
                    } else {
                        3
                    }
                }
            };
            qb[class] += d + h;
        }
        print!("idle host ports {idle_ports:3} gated {idle_gated:3} | ");
        print!(
            "q host/leafdn/leafup/spine MB {:6.2} {:6.2} {:6.2} {:6.2} | ",
            qb[0] as f64 / 1e6,
            qb[1] as f64 / 1e6,
            qb[2] as f64 / 1e6,
            qb[3] as f64 / 1e6
        );
        println!(
            "t {t:3} us: tx wire {:6.2} payload {:6.2} placed {:6.2} Tb/s; flows done {:5}; \
             in flight {:6.2} MB on {qi:5} QPs; {qq:5} QPs queued; windows {:7.2} MB",
            (tx - last) as f64 * 8.0 / 1e6 / step as f64,
            (pl - last_pl) as f64 * 8.0 / 1e6 / step as f64,
            (pb - last_pb) as f64 * 8.0 / 1e6 / step as f64,
            w.main_finished,
            infl as f64 / 1e6,
            cw as f64 / 1e6
        );
        last = tx;
        last_pl = pl;
        last_pb = pb;
    }
    // The slowest flows that completed (src, dst, completion), with their leaves (8 hosts a leaf).
    let mut done: Vec<_> = sim
        .handler()
        .nics
        .iter()
        .flat_map(|n| n.flow_results())
        .filter_map(|r| r.done.map(|d| (d, r.flow.src, r.flow.dst)))
        .collect();
    done.sort();
    for (d, src, dst) in done.iter().rev().take(12) {
        println!(
            "slow flow {src:2} (leaf {}) -> {dst:2} (leaf {}): done at {:.1} us",
            src / 8,
            dst / 8,
            d.as_ps() as f64 / 1e6
        );
    }
    if let Some((d, src, dst)) = done.iter().rev().find(|f| f.1 / 8 != 0 && f.2 / 8 != 0) {
        println!(
            "slowest flow off leaf 0: {src} -> {dst}, done at {:.1} us",
            d.as_ps() as f64 / 1e6
        );
    }
}
