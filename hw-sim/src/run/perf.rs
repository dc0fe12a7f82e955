//! What a run cost the machine: CPU time and peak resident memory of this process, read from
//! Linux's `/proc` (no `unsafe`, no extra dependency). Elsewhere the readers return `None` and
//! the figures are reported as unknown. Nothing here feeds back into a simulation.

/// Clock ticks per second of `/proc/self/stat`'s `utime` and `stime` (`USER_HZ`, 100 on every
/// Linux architecture Rust supports).
const USER_HZ: f64 = 100.0;

/// CPU seconds (user + system, every thread, exited ones included) this process used so far,
/// with a resolution of 10 ms. `None` when `/proc/self/stat` cannot be read or parsed.
pub fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat_cpu(&text)
}

/// `utime + stime` in seconds from the text of a `/proc/PID/stat` file.
fn parse_stat_cpu(text: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    // `rest` starts at field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// Peak resident set size of this process so far (`VmHWM`), in bytes. `None` when
/// `/proc/self/status` cannot be read or has no `VmHWM` line.
pub fn peak_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kb(&text, "VmHWM:").map(|kb| kb * 1024)
}

/// Memory the system can still give processes (`MemAvailable` of `/proc/meminfo`), in bytes.
/// `None` when it cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_status_kb(&text, "MemAvailable:").map(|kb| kb * 1024)
}

fn parse_status_kb(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The cost of one run: the counters that measure its work and what it took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunCost {
    /// Events handled.
    pub events: u64,
    /// Data packets the NICs sent (first transmissions and retransmissions).
    pub data_packets: u64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// CPU seconds of the process during the run (`None` when unknown).
    pub cpu_s: Option<f64>,
    /// Peak resident memory of the process at the end of the run, in bytes (`None` when
    /// unknown). A process-wide high-water mark: it includes earlier runs of the same process.
    pub peak_rss_bytes: Option<u64>,
}

impl RunCost {
    /// Events per CPU second (`None` when the CPU time is unknown or zero).
    pub fn events_per_cpu_s(&self) -> Option<f64> {
        self.cpu_s
            .filter(|c| *c > 0.0)
            .map(|c| self.events as f64 / c)
    }
    /// Data packets per CPU second (`None` when the CPU time is unknown or zero).
    pub fn data_packets_per_cpu_s(&self) -> Option<f64> {
        self.cpu_s
            .filter(|c| *c > 0.0)
            .map(|c| self.data_packets as f64 / c)
    }
    /// Peak resident memory in MiB.
    pub fn peak_rss_mb(&self) -> Option<f64> {
        self.peak_rss_bytes.map(|b| b as f64 / (1024.0 * 1024.0))
    }
}

/// Measures a closure: wall and CPU time around it, and the peak RSS after it.
pub struct Meter {
    wall: std::time::Instant,
    cpu: Option<f64>,
}

impl Meter {
    /// Starts measuring now.
    pub fn start() -> Meter {
        Meter {
            wall: std::time::Instant::now(),
            cpu: cpu_seconds(),
        }
    }

    /// The cost since [`Meter::start`], for a run that handled `events` and sent
    /// `data_packets`.
    pub fn finish(&self, events: u64, data_packets: u64) -> RunCost {
        let wall_s = self.wall.elapsed().as_secs_f64();
        let cpu_s = match (self.cpu, cpu_seconds()) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        };
        RunCost {
            events,
            data_packets,
            wall_s,
            cpu_s,
            peak_rss_bytes: peak_rss_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_skips_a_command_with_spaces() {
        // Fields 1..=17 of a real stat line, command name with a space and a parenthesis.
        let line = "4242 (my (sim) x) R 1 4242 4242 0 -1 4194304 100 0 0 0 250 37 0 0 20";
        assert_eq!(parse_stat_cpu(line), Some(2.87));
        assert_eq!(parse_stat_cpu("4242 (x) R 1 2"), None);
        assert_eq!(parse_stat_cpu("no parenthesis"), None);
    }

    #[test]
    fn status_parsing_reads_vmhwm() {
        let text = "Name:\tmrc-sim\nVmPeak:\t  200 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_status_kb(text, "VmHWM:"), Some(123_456));
        assert_eq!(parse_status_kb("VmRSS: 1 kB", "VmHWM:"), None);
    }

    #[test]
    fn rates_need_a_cpu_time() {
        let mut c = RunCost {
            events: 1000,
            data_packets: 10,
            wall_s: 1.0,
            cpu_s: Some(2.0),
            peak_rss_bytes: Some(3 << 20),
        };
        assert_eq!(c.events_per_cpu_s(), Some(500.0));
        assert_eq!(c.data_packets_per_cpu_s(), Some(5.0));
        assert_eq!(c.peak_rss_mb(), Some(3.0));
        c.cpu_s = Some(0.0);
        assert_eq!(c.events_per_cpu_s(), None);
        c.cpu_s = None;
        assert_eq!(c.data_packets_per_cpu_s(), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_peak_rss_and_cpu_time() {
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        assert!(cpu_seconds().is_some());
    }
}
