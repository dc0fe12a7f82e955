//! `just hil`: the `hil` scenario at every fidelity level (`mrc_sim::hil::LEVELS`), a table
//! and a JSON file (`hil [OUT]`, default `target/hil.json`):
//! `{"rows": [{"firmware", "datapath", "delivered_bytes", "completion_us", "max_stall_us",
//! "wall_s", "guest_instructions_per_s"}]}`, one row per level this build can run. A level
//! it cannot run (a cargo feature missing) is named with the reason; a level that gives
//! other delivered bytes or completions than the first fails the run (exit code 1).

use std::process::ExitCode;

use mrc_sim::hil::{differences, run_level, HilRow, LEVELS, SCENARIO};

fn main() -> ExitCode {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/hil.json".into());
    let mut rows: Vec<HilRow> = Vec::new();
    let mut first = None;
    let mut ok = true;
    println!("scenario `{SCENARIO}` at every level:");
    println!(
        "{:<9} {:<9} {:>15} {:>14} {:>13} {:>8} {:>16}",
        "firmware",
        "datapath",
        "delivered bytes",
        "completion us",
        "max stall us",
        "wall s",
        "guest instr/s"
    );
    for level in LEVELS {
        if let Some(why) = level.unavailable() {
            println!(
                "{:<9} {:<9} not run: {why}",
                level.firmware.name(),
                level.datapath.name()
            );
            continue;
        }
        let run = match run_level(level, None) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("hil: {e}");
                return ExitCode::FAILURE;
            }
        };
        let r = &run.row;
        println!(
            "{:<9} {:<9} {:>15} {:>14.1} {:>13.1} {:>8.2} {:>16}",
            r.firmware,
            r.datapath,
            r.delivered_bytes,
            r.completion_us,
            r.max_stall_us,
            r.wall_s,
            r.guest_instructions_per_s
                .map_or("-".to_string(), |g| format!("{:.1} M", g / 1e6))
        );
        match &first {
            None => first = Some(run.clone()),
            Some(want) => {
                if let Some(d) = differences(want, &run) {
                    eprintln!("hil: the levels disagree: {d}");
                    ok = false;
                }
            }
        }
        rows.push(run.row);
    }
    let json = serde_json::json!({ "rows": rows });
    if let Err(e) = std::fs::write(&out, format!("{json:#}\n")) {
        eprintln!("hil: {out}: {e}");
        return ExitCode::FAILURE;
    }
    println!("wrote {out}");
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
