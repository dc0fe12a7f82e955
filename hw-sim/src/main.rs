//! `mrc-sim`: the default run of the project (`cargo run --release` at the root).
//!
//! Runs the built-in default scenario ([`Scenario::default_for`]) once per transport, side by
//! side: 64 hosts with 800G NICs (4 planes x 200 Gb/s), a leaf-spine per plane, every host
//! writing 16 MiB to a partner in a permutation, and a T0-T1 link of plane 0 failing mid-run.
//! Every NIC runs the real MRC engine (`mrc_firmware::engine`). `--seed N` changes the seed;
//! `--reorder-tx N` the engine's loss-inference reorder threshold; `--no-failure` runs without
//! the link failure (the baseline).

use mrc_sim::nic::Transport;
use mrc_sim::run::{format_table, run, Scenario};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut seed = 1u64;
    let mut reorder_tx = None;
    let mut no_failure = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--no-failure" {
            no_failure = true;
            continue;
        }
        match (a.as_str(), args.next().map(|v| v.parse::<u64>())) {
            ("--seed", Some(Ok(v))) => seed = v,
            ("--reorder-tx", Some(Ok(v))) if v > 0 && v <= 512 => reorder_tx = Some(v as u32),
            _ => {
                eprintln!("usage: mrc-sim [--seed N] [--reorder-tx 1..=512] [--no-failure]");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut base = Scenario {
        seed,
        ..Scenario::default_for(Transport::Mrc)
    };
    if no_failure {
        base.failure = None;
    }
    if let Some(r) = reorder_tx {
        base.reorder_tx = r;
    }
    println!("mrc-sim: default scenario (first increment of issue 5), seed {seed}");
    println!(
        "  {:?}, {} planes x {} Gb/s per host, {} us per link, queues {} B, trimming {:?}",
        base.fabric.shape,
        base.fabric.planes,
        base.fabric.host_link_bps / 1_000_000_000,
        base.fabric.propagation.as_ps() as f64 / 1e6,
        base.fabric.queue.limit_bytes,
        base.fabric.queue.trim_bytes,
    );
    println!("  {}, MTU {} B", base.workload.describe(), base.mtu_payload);
    println!(
        "  engine: 256 EVs, NSCC, loss inferred after {} later transmissions are SACKed, ACK timeout 1.024 us * 2^{}",
        base.reorder_tx, base.timeout_exp
    );
    if let Some(f) = base.failure {
        println!(
            "  failure: T0-T1 link {} of plane 0 goes down at {} us (ECMP reconverges after {} ms; source routes never reroute)",
            f.t1_link,
            f.at.as_ps() / 1_000_000,
            base.fabric.reconvergence.as_ps() / 1_000_000_000
        );
    }
    println!(
        "  ideal = bytes per host / NIC line rate + base RTT ({:.2} us)\n",
        base.base_rtt().as_ps() as f64 / 1e6
    );
    let mut reports = Vec::new();
    for t in [Transport::Mrc, Transport::Mrc1Ev] {
        let sc = Scenario {
            transport: t,
            ..base
        };
        let wall = std::time::Instant::now();
        match run(&sc) {
            Ok(r) => {
                eprintln!(
                    "  ran {} in {:.1} s wall ({} events)",
                    t.name(),
                    wall.elapsed().as_secs_f64(),
                    r.events
                );
                reports.push(r);
            }
            Err(e) => {
                eprintln!("error: {}: {e}", t.name());
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{}", format_table(&reports));
    for r in &reports {
        if r.completed < r.flows {
            println!(
                "{}: {} of {} flows had not completed when the run stopped at {} ms (the time limit); their QPs were stalled (see longest stall).",
                r.transport,
                r.flows - r.completed,
                r.flows,
                r.completion.as_ps() / 1_000_000_000
            );
        }
    }
    println!();
    println!("Not modelled yet (so these figures are the transport and fabric only):");
    println!(
        "  - roce-ecmp and spray-oblivious transports (RoCE go-back-N, DCQCN, PFC) are not built;"
    );
    println!(
        "  - host memory and CPU time (PCIe is modelled: doorbell {} ns, reads {} ns at {} GB/s);",
        base.pcie.doorbell_ns,
        base.pcie.dma_read_ns,
        base.pcie.dma_bytes_per_s / 1_000_000_000
    );
    println!("  - firmware core cycle costs and the datapath models' cycle counts: the engine runs in zero time;");
    println!("  - mrc-1ev pins each QP to one plane and one ECMP hash in the NIC model (the engine still");
    println!(
        "    thinks it sprays over 256 EVs); a full data packet costs {} B of link time beyond its payload;",
        mrc_sim::nic::HEADER_BYTES
    );
    println!("  - no TOML scenarios, JSON, plots or pcap yet.");
    ExitCode::SUCCESS
}
