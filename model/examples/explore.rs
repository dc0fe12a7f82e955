//! Explore one model configuration and print what the checker found.
//!
//! `cargo run --release -p mrc-model --example explore -- PSNS MSG_PSNS WINDOW EVS NET_CAP
//! LOSSES DUPS TRIMS BLACKHOLES` (all small integers; e.g. `4 2 2 2 3 1 1 1 1`).

use mrc_model::{Budget, Protocol};
use stateright::{Checker, Model};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Result<Vec<u8>, _> = std::env::args().skip(1).map(|s| s.parse::<u8>()).collect();
    let a = match args {
        Ok(a) if a.len() == 9 => a,
        _ => {
            eprintln!(
                "usage: explore PSNS MSG_PSNS WINDOW EVS NET_CAP LOSSES DUPS TRIMS BLACKHOLES"
            );
            return ExitCode::from(2);
        }
    };
    let p = Protocol {
        psns: a[0],
        msg_psns: a[1],
        window: a[2],
        evs: a[3],
        min_active: 1,
        reorder: 1,
        retry_cnt: 7,
        net_cap: a[4],
        budget: Budget {
            losses: a[5],
            dups: a[6],
            trims: a[7],
            blackholes: a[8],
        },
        bug: None,
    };
    if !p.is_valid() {
        eprintln!("error: parameters out of range (PSNS <= 8, EVS <= 4, MSG_PSNS divides PSNS)");
        return ExitCode::from(2);
    }
    let t = std::time::Instant::now();
    let c = p.checker().spawn_bfs().join();
    println!(
        "{} unique states, depth {}, {:.1} s",
        c.unique_state_count(),
        c.max_depth(),
        t.elapsed().as_secs_f64()
    );
    let mut broken = false;
    for prop in p.properties() {
        let d = c.discovery(prop.name);
        let verdict = match (prop.expectation, &d) {
            (stateright::Expectation::Sometimes, Some(_)) => "reached",
            (stateright::Expectation::Sometimes, None) => {
                broken = true;
                "NEVER REACHED"
            }
            (_, None) => "holds",
            (_, Some(_)) => {
                broken = true;
                "BROKEN"
            }
        };
        println!("  {verdict:>13}: {}", prop.name);
        if let (Some(path), "BROKEN") = (d, verdict) {
            for (state, action) in path.into_vec() {
                println!(
                    "      una={} nxt={} net={:?} -> {action:?}",
                    state.req.una, state.req.nxt, state.net
                );
            }
        }
    }
    if broken {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
