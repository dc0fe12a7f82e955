//! A progress bar on stderr (indicatif), only when stderr is a terminal: bytes acknowledged
//! out of the workload's total, the simulated time and the simulation speed (simulated
//! microseconds per wall second). It reads the wall clock for the speed only; nothing it shows
//! reaches the report.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::core::time::Time;

/// The bar of one transport's run.
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    /// A bar for `label` moving `total_bytes`, or `None` when stderr is not a terminal.
    pub fn on_terminal(label: &str, total_bytes: u64) -> Option<Progress> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::new(total_bytes.max(1));
        let style =
            ProgressStyle::with_template("  {prefix:>16} [{bar:30}] {percent:>3}% acked  {msg}")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        Some(Progress {
            bar,
            started: Instant::now(),
        })
    }

    /// Simulated time `now`, `acked` bytes so far.
    pub fn update(&mut self, now: Time, acked: u64) {
        let sim_us = now.as_ps() as f64 / 1e6;
        let wall = self.started.elapsed().as_secs_f64().max(1e-9);
        self.bar.set_position(acked);
        self.bar.set_message(format!(
            "sim {sim_us:>9.1} us  {:>8.1} sim-us/s",
            sim_us / wall
        ));
    }

    /// Removes the bar.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
