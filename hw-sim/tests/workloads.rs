//! Every workload on a tiny fabric: completes, every byte acknowledged, deterministic.

use mrc_sim::core::Time;
use mrc_sim::nic::Transport;
use mrc_sim::run::{format_table, run, RunError, Scenario};
use mrc_sim::workload::{Background, Workload};

fn tiny(t: Transport, w: Workload) -> Scenario {
    Scenario {
        workload: w,
        ..Scenario::tiny(t)
    }
}

fn workloads() -> Vec<Workload> {
    vec![
        Workload::Permutation {
            bytes_per_host: 128 << 10,
            msg_bytes: 32 << 10,
        },
        Workload::AllToAll {
            bytes_per_pair: 24 << 10,
            msg_bytes: 16 << 10,
        },
        Workload::RingAllReduce {
            bytes: 256 << 10,
            slices: 2,
            msg_bytes: 8 << 10,
        },
        Workload::Incast {
            senders: 7,
            receiver: 3,
            bytes_per_sender: 64 << 10,
            msg_bytes: 16 << 10,
        },
    ]
}

#[test]
fn every_workload_completes_with_every_byte_acknowledged() {
    for t in [Transport::Mrc, Transport::Mrc1Ev] {
        for w in workloads() {
            let sc = tiny(t, w);
            let r = run(&sc).expect("valid");
            let what = format!("{} / {}", t.name(), w.name());
            assert_eq!(
                r.completed,
                r.flows,
                "{what}\n{}",
                format_table(std::slice::from_ref(&r))
            );
            assert_eq!(r.workload, w.name());
            assert_eq!(r.failed, 0, "{what}");
            assert_eq!(r.acked_bytes, w.total_bytes(r.hosts), "{what}");
            assert!(r.placed_bytes >= r.acked_bytes, "{what}");
            assert_eq!(r.nic_rx_dropped, 0, "{what}");
            assert_eq!(r.bad_events, 0, "{what}");
            assert!(r.conserved, "{what}");
            // Never faster than the busiest NIC's bytes at line rate (the RTT term of ideal
            // assumes a cross-leaf path; incast partners may share a leaf).
            let wire_time = r.ideal.saturating_sub(sc.base_rtt());
            assert!(
                r.completion.since_start() >= wire_time,
                "{what}: faster than line rate: {}",
                r.ratio()
            );
            assert_eq!(r.fcts.len() as u32, r.flows);
            assert_eq!(r.flow_results.len() as u32, r.flows);
            // Every flow finished after it was released, and no later than the completion.
            for f in &r.flow_results {
                let (rel, done) = (f.released.unwrap(), f.done.unwrap());
                assert!(rel <= done && done <= r.completion, "{what}: {f:?}");
                assert!(rel >= f.flow.start);
                if let Some(a) = f.flow.after {
                    let dep = r.flow_results[a as usize].done.unwrap();
                    assert!(rel >= dep, "{what}: released before its dependency");
                }
            }
        }
    }
}

#[test]
fn ring_all_reduce_reports_the_collective_and_its_straggler() {
    let w = workloads()[2];
    let r = run(&tiny(Transport::Mrc, w)).unwrap();
    let c = r.collective.expect("ring reports a collective");
    assert_eq!(c.completion, Some(r.completion));
    assert!(c.median_rank <= c.slowest_rank);
    assert_eq!(
        c.straggler_lag,
        c.slowest_rank.duration_since(c.median_rank)
    );
    assert!(c.slowest_host < r.hosts);
    // Other workloads report none.
    let r = run(&tiny(Transport::Mrc, workloads()[0])).unwrap();
    assert!(r.collective.is_none());
}

#[test]
fn background_runs_alongside_and_stays_out_of_the_main_figures() {
    let w = workloads()[0];
    let mut sc = tiny(Transport::Mrc, w);
    sc.background = Some(Background {
        load_percent: 20,
        msg_bytes: 8 << 10,
        until_us: 20,
    });
    let r = run(&sc).unwrap();
    let plain = run(&tiny(Transport::Mrc, w)).unwrap();
    assert_eq!(r.completed, r.flows);
    assert_eq!(r.flows, plain.flows, "background flows are not main flows");
    assert_eq!(r.fcts.len(), plain.fcts.len());
    assert_eq!(r.acked_bytes, w.total_bytes(r.hosts));
    assert!(r.background_flows > 0);
    assert!(r.background_completed > 0);
    assert!(r.background_acked_bytes > 0);
    assert_eq!(r.flow_results.len() as u32, r.flows + r.background_flows);
    assert!(r
        .flow_results
        .iter()
        .skip(r.flows as usize)
        .all(|f| f.background));
}

#[test]
fn same_seed_same_report_for_every_workload() {
    for w in workloads() {
        let sc = tiny(Transport::Mrc, w);
        let a = run(&sc).unwrap();
        let b = run(&sc).unwrap();
        assert_eq!(a, b, "{}", w.name());
        let other = run(&Scenario { seed: 2, ..sc }).unwrap();
        assert_eq!(other.acked_bytes, a.acked_bytes);
    }
}

#[test]
fn invalid_workloads_are_refused_naming_the_field() {
    let bad = Workload::Incast {
        senders: 8,
        receiver: 0,
        bytes_per_sender: 1,
        msg_bytes: 1,
    };
    match run(&tiny(Transport::Mrc, bad)) {
        Err(RunError::Workload(e)) => {
            assert_eq!(e.field, "senders");
            assert!(e.to_string().contains("incast"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let mut sc = tiny(Transport::Mrc, workloads()[0]);
    sc.background = Some(Background {
        load_percent: 0,
        msg_bytes: 1,
        until_us: 1,
    });
    match run(&sc) {
        Err(RunError::Workload(e)) => assert_eq!(e.field, "load_percent"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_flow_waits_for_its_start_time() {
    // The background's first messages start inside the first interval, not at zero.
    let mut sc = tiny(Transport::Mrc, workloads()[0]);
    sc.background = Some(Background {
        load_percent: 5,
        msg_bytes: 4 << 10,
        until_us: 30,
    });
    let r = run(&sc).unwrap();
    for f in r.flow_results.iter().filter(|f| f.background) {
        if let Some(rel) = f.released {
            assert!(rel >= f.flow.start);
            assert!(f.flow.start < Time::from_us(30));
        }
    }
}

/// Exploration of the default run (release, by hand):
/// `WL=a2a|ring|perm BYTES=N SLICES=N MSG=N NOFAIL=1 cargo test --release --test workloads -- --ignored --nocapture`.
#[test]
#[ignore]
fn explore_default_run() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let msg = env("MSG", 256 << 10) as u32;
    let wl = match std::env::var("WL").as_deref() {
        Ok("ring") => Workload::RingAllReduce {
            bytes: env("BYTES", 64 << 20),
            slices: env("SLICES", 4) as u32,
            msg_bytes: msg,
        },
        Ok("perm") => Workload::Permutation {
            bytes_per_host: env("BYTES", 16 << 20),
            msg_bytes: msg,
        },
        _ => Workload::AllToAll {
            bytes_per_pair: env("BYTES", 256 << 10),
            msg_bytes: msg,
        },
    };
    let mut reports = Vec::new();
    for t in [Transport::Mrc, Transport::Mrc1Ev] {
        let mut sc = Scenario::default_for(t);
        sc.workload = wl;
        sc.time_limit = Time::from_ms(env("LIMIT_MS", 20));
        sc.reorder_tx = env("REORDER", u64::from(sc.reorder_tx)) as u32;
        sc.timeout_exp = env("TEXP", u64::from(sc.timeout_exp)) as u8;
        if env("NOFAIL", 0) == 1 {
            sc.failure = None;
        }
        if let Some(at) = std::env::var("FAIL_US").ok().and_then(|v| v.parse().ok()) {
            if let Some(f) = sc.failure.as_mut() {
                f.at = Time::from_us(at);
            }
        }
        let wall = std::time::Instant::now();
        let r = run(&sc).unwrap();
        println!(
            "{} {}: {:.1} s wall, {} events, stall qp {:?}, collective {:?}",
            t.name(),
            wl.name(),
            wall.elapsed().as_secs_f64(),
            r.events,
            r.max_stall_qp,
            r.collective
        );
        reports.push(r);
    }
    println!("{}", format_table(&reports));
}

/// Diagnostics of the default permutation (release, by hand): NIC 0's window and ports.
#[test]
#[ignore]
fn diag_default_sender() {
    use mrc_sim::core::Duration;
    let mut sc = Scenario::default_for(Transport::Mrc);
    sc.failure = None;
    sc.workload = Workload::Permutation {
        bytes_per_host: 16 << 20,
        msg_bytes: 256 << 10,
    };
    let mut sim = mrc_sim::run::build(&sc).unwrap();
    let mut last_tx = 0;
    for _ in 0..40 {
        let next = sim.now().saturating_add(Duration::from_us(5));
        sim.run_until(next);
        let w = sim.handler();
        let hh: u32 = std::env::var("H")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let n = &w.nics[hh as usize];
        let q = (0..n.connections())
            .find(|c| n.peer(*c) == Some(mrc_sim::run::permutation(64, 1)[hh as usize]))
            .and_then(|c| n.qp(c))
            .unwrap();
        let ports: Vec<u64> = (0..4)
            .map(|p| w.fabric.queue_bytes(w.fabric.topology().host_port(hh, p)).0)
            .collect();
        let tx = n.counters().tx_bytes;
        println!(
            "t={:>6.1}us cwnd={} inflight={} queued={} stalls(window, cc, wimm, no EV)={:?} ports={:?} gbps={:.0}",
            sim.now().as_ps() as f64 / 1e6,
            q.cwnd_bytes,
            q.inflight_bytes,
            q.sq_queued,
            (q.tx.stall_window, q.tx.stall_cc, q.tx.stall_wimm, q.tx.stall_no_ev),
            ports,
            (tx - last_tx) as f64 * 8.0 / 5e3
        );
        last_tx = tx;
    }
    let w = sim.handler();
    let mut done: Vec<(u64, u32, u32)> = w
        .nics
        .iter()
        .flat_map(|n| n.flow_results())
        .map(|f| {
            (
                f.done.map_or(u64::MAX, |t| t.as_ps() / 1_000_000),
                f.flow.src,
                f.flow.dst,
            )
        })
        .collect();
    done.sort_unstable();
    println!("done (us, src, dst): {:?}", &done);
    let slow = done.last().unwrap().1;
    for h in [0u32, 1, 2, slow] {
        let v: Vec<(u64, u64)> = (0..4)
            .map(|p| {
                let c = w
                    .fabric
                    .port_counters(w.fabric.topology().host_port(h, p))
                    .unwrap();
                (c.tx_packets, c.tx_bytes)
            })
            .collect();
        println!("host {h} port tx (packets, bytes) per plane: {v:?}");
    }
}

/// Diagnostics of the default all-to-all (release, by hand): stage and engine drop counters.
#[test]
#[ignore]
fn diag_all_to_all_counters() {
    let mut sc = Scenario::default_for(Transport::Mrc);
    sc.workload = Workload::AllToAll {
        bytes_per_pair: 256 << 10,
        msg_bytes: 64 << 10,
    };
    let mut sim = mrc_sim::run::build(&sc).unwrap();
    while !sim.handler().main_done() && sim.now() < Time::from_ms(2) {
        let next = sim
            .now()
            .saturating_add(mrc_sim::core::Duration::from_us(10));
        sim.run_until(next);
    }
    let w = sim.handler();
    let mut d = mrc_firmware::datapath::stage::DatapathCounters::default();
    let mut t = mrc_firmware::engine::EngineCounters::default();
    let mut rq = mrc_firmware::datapath::stage::TxCounters::default();
    for n in &w.nics {
        let c = n.datapath_counters();
        d.ctrl_dropped += c.ctrl_dropped;
        d.acks_sent += c.acks_sent;
        d.nacks_sent += c.nacks_sent;
        d.rx_trimmed += c.rx_trimmed;
        d.rx_out_of_window += c.rx_out_of_window;
        d.backpressure += c.backpressure;
        let e = n.engine_counters();
        t.timer_arm_failed += e.timer_arm_failed;
        t.commands_overflow += e.commands_overflow;
        t.backpressure += e.backpressure;
        let r = n.tx_counters();
        rq.nacks_trimmed += r.nacks_trimmed;
        rq.nacks_stale += r.nacks_stale;
        rq.timeouts += r.timeouts;
        rq.acks_stale += r.acks_stale;
        rq.nacks_out_of_window += r.nacks_out_of_window;
    }
    println!("datapath {d:?}\nengine {t:?}\nsend side {rq:?}");
}

#[test]
fn pcie_link_rate_caps_the_nic_and_latency_adds_to_fcts() {
    use mrc_sim::core::Duration;
    use mrc_sim::nic::PcieConfig;
    let w = workloads()[0]; // permutation, 128 KiB per host
    let ideal_io = run(&Scenario {
        pcie: PcieConfig::IDEAL,
        ..tiny(Transport::Mrc, w)
    })
    .unwrap();
    // Tiny NICs are 2 x 200 Gb/s = 50 GB/s; a Gen6 x1 link carries 7.4 GB/s of TLP bytes.
    let slow = PcieConfig {
        lanes: 1,
        ..PcieConfig::GEN6_X16
    };
    let r = run(&Scenario {
        pcie: slow,
        ..tiny(Transport::Mrc, w)
    })
    .unwrap();
    assert_eq!(r.completed, r.flows);
    let floor = Duration::from_ps(128 * 1024 * 1_000_000_000_000 / slow.tlp_bytes_per_s());
    assert!(r.fcts[0] >= floor, "{:?} < {floor:?}", r.fcts[0]);
    assert!(r.fcts[0] > ideal_io.fcts[0]);
    // Latency alone (default Gen6 x16: rate above line rate) still lengthens every flow.
    let lat = run(&tiny(Transport::Mrc, w)).unwrap();
    assert!(lat.fcts[0] > ideal_io.fcts[0]);
    assert!(lat.fcts[0] < r.fcts[0]);
}

#[test]
fn firmware_core_time_delays_the_firmware_and_loses_nothing() {
    use mrc_sim::nic::FirmwareConfig;
    let w = workloads()[0];
    let free = run(&Scenario {
        firmware: FirmwareConfig::UNTIMED,
        ..tiny(Transport::Mrc, w)
    })
    .unwrap();
    // One slow core (100 MHz): every report costs microseconds of core time.
    let slow = FirmwareConfig {
        cores: 1,
        clock_mhz: 100,
        ..FirmwareConfig::DEFAULT
    };
    let busy = run(&Scenario {
        firmware: slow,
        ..tiny(Transport::Mrc, w)
    })
    .unwrap();
    assert_eq!(busy.completed, busy.flows);
    assert_eq!(busy.acked_bytes, free.acked_bytes);
    assert!(busy.conserved);
    // Reports queue for the core, and the windows, retransmission orders and completions they
    // lead to come later.
    assert!(
        busy.completion > free.completion,
        "{:?} <= {:?}",
        busy.completion,
        free.completion
    );
    let util = |r: &mrc_sim::run::RunReport| {
        r.nics
            .iter()
            .map(|n| n.firmware.core_utilisation)
            .fold(0.0, f64::max)
    };
    assert_eq!(util(&free), 0.0, "no cores with firmware time off");
    assert!(util(&busy) > 0.0);
    // Four cores at 1 GHz (the default) keep up better: less delay, less busy.
    let four = run(&tiny(Transport::Mrc, w)).unwrap();
    assert!(
        four.completion < busy.completion,
        "free {:?}, one slow core {:?}, four {:?}",
        free.completion,
        busy.completion,
        four.completion
    );
    assert!(util(&four) > 0.0 && util(&four) < util(&busy));
}
