//! Switch forwarding throughput: packets forwarded per second through one switch (leaf-local
//! permutation, uSID and ECMP) and through a small three-tier fabric (k = 8 fat tree, 128 hosts,
//! permutation, a random uSID path per packet), with the bare event loop handling the same
//! number of events as the baseline in the same run.
//!
//! Run: `cargo bench -p mrc-sim --bench switch_forwarding`. Prints a summary (packets/s,
//! switch hops/s, events/s, and the fabric's cost per event over the bare loop's), then the
//! criterion measurements. `PKTS=n` overrides the packets per run.

use std::hint::black_box;
use std::time::{Duration as WallDuration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use mrc_sim::core::{ComponentId, Duration, Event, Rng, Scheduler, Simulator, Time};
use mrc_sim::fabric::{harness, FabricConfig, Packet, Payload, Route, Shape, TransportKind};

const MTU: u32 = 4150;

#[derive(Clone, Copy)]
enum Load {
    /// Hosts 0..4 of one leaf, each to its neighbour, uSID.
    SwitchUsid,
    /// Same, ECMP-routed.
    SwitchEcmp,
    /// k = 8 fat tree, random permutation, random uSID path per packet.
    FatTree,
}

fn packets() -> u64 {
    std::env::var("PKTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

/// A simulator with `n` packets staged (injection events pending), not yet run.
fn build(load: Load, n: u64) -> Simulator<harness::Harness> {
    let shape = match load {
        Load::FatTree => Shape::FatTree { k: 8 },
        _ => Shape::LeafSpine { hosts: 8, radix: 8 },
    };
    let cfg = FabricConfig::htsim_reference(shape);
    let mut sim = harness::simulator(cfg).unwrap();
    sim.set_trace(false);
    sim.handler_mut().keep = false;
    sim.handler_mut().fabric.reserve_packets(n as usize);
    let hosts = sim.handler().fabric.topology().hosts();
    let senders = match load {
        Load::FatTree => hosts,
        _ => 4,
    };
    // A permutation: host h sends to perm[h].
    let mut rng = Rng::new(42);
    let mut perm: Vec<u32> = (0..senders).collect();
    loop {
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.below(i as u64 + 1) as usize);
        }
        if perm.iter().enumerate().all(|(i, p)| i as u32 != *p) {
            break;
        }
    }
    // Each sender at 90 % of line rate.
    let gap = Duration::from_ps(332_000 * 10 / 9);
    for i in 0..n {
        let src = (i % senders as u64) as u32;
        let dst = perm[src as usize];
        let seq = i / senders as u64;
        let route = match load {
            Load::SwitchEcmp => Route::Ecmp { hash: src as u64 },
            _ => {
                let topo = sim.handler().fabric.topology();
                let path = rng.below(topo.path_count(src, dst) as u64) as u32;
                Route::Usid(topo.usid_route(src, dst, path).unwrap())
            }
        };
        let p = Packet {
            src,
            dst,
            size_bytes: MTU,
            payload: Payload::new(MTU - 64, seq as u32),
            transport_tag: seq,
            route,
            kind: TransportKind::Mrc,
            ..Packet::default()
        };
        let at = Time::ZERO + gap * seq;
        harness::inject_at(&mut sim, at, src, 0, p).unwrap();
    }
    sim
}

/// Runs a built simulator; returns (wall time, events, switch hops).
fn run(mut sim: Simulator<harness::Harness>, n: u64) -> (WallDuration, u64, u64) {
    let t0 = Instant::now();
    sim.run_until_idle();
    let wall = t0.elapsed();
    let f = &sim.handler().fabric;
    let t = f.totals();
    assert_eq!((t.delivered, t.dropped_total()), (n, 0), "{t:?}");
    let topo = f.topology();
    let host_tx: u64 = (0..topo.hosts())
        .map(|h| f.port_counters(topo.host_port(h, 0)).unwrap().tx_packets)
        .sum();
    let hops = f.sum_counters().tx_packets - host_tx;
    (wall, sim.stats().events, hops)
}

/// The bare event loop handling `events` events: each handled event schedules the next one
/// a few hundred ns later, with as many in flight as the fabric run had packets.
fn floor(events: u64, in_flight: u64) -> WallDuration {
    let mut left = events.saturating_sub(in_flight);
    let mut sim = Simulator::new(move |_now: Time, ev: Event, s: &mut Scheduler<'_>| {
        if left > 0 {
            left -= 1;
            let d = 300_000 + (ev.data.wrapping_mul(0x9e37_79b9) % 1_000_000);
            s.after(Duration::from_ps(d), ev.target, 0, black_box(ev.data + 1))
                .unwrap();
        }
    });
    sim.set_trace(false);
    for i in 0..in_flight {
        sim.schedule(Time::from_ps(i * 1000), ComponentId(0), 0, i)
            .unwrap();
    }
    let t0 = Instant::now();
    sim.run_until_idle();
    let wall = t0.elapsed();
    assert_eq!(sim.stats().events, events.max(in_flight));
    wall
}

fn summary() {
    let n = packets();
    println!("switch forwarding, {n} packets of {MTU} B per run, 90 % load, no drops:");
    for (name, load) in [
        ("one switch, uSID ", Load::SwitchUsid),
        ("one switch, ECMP ", Load::SwitchEcmp),
        ("fat tree k=8     ", Load::FatTree),
    ] {
        // Warm up once, measure the second run.
        run(build(load, n / 4), n / 4);
        let (wall, events, hops) = run(build(load, n), n);
        let s = wall.as_secs_f64();
        let base = floor(events, n).as_secs_f64();
        println!(
            "  {name}: {:>6.2} M pkts/s  {:>6.2} M switch hops/s  {:>6.2} M events/s  \
             ({:.0} ns/event; bare loop {:.0} ns/event, fabric/bare {:.2}x)",
            n as f64 / s / 1e6,
            hops as f64 / s / 1e6,
            events as f64 / s / 1e6,
            s * 1e9 / events as f64,
            base * 1e9 / events as f64,
            s / base
        );
    }
}

fn bench(c: &mut Criterion) {
    let n = packets() / 4;
    let mut g = c.benchmark_group("switch_forwarding");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n));
    for (name, load) in [
        ("switch_usid", Load::SwitchUsid),
        ("switch_ecmp", Load::SwitchEcmp),
        ("fat_tree_k8", Load::FatTree),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| run(build(load, n), n).0)
                    .sum::<WallDuration>()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    summary();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
