//! Facts about the machine and the checkout: CPU, memory, load, date, commit.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::report::Machine;

/// The machine this process runs on (unknown fields are empty or zero).
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    Machine {
        cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown CPU".into()),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_gib: mem_total_kib(&meminfo).map_or(0.0, |k| k as f64 / (1024.0 * 1024.0)),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
    }
}

/// `model name` of the first CPU in `/proc/cpuinfo` text.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_owned())
    })
}

/// `MemTotal` of `/proc/meminfo` text, KiB.
pub fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The 1-minute load average (0 when unknown).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The short commit hash of `root`'s checkout, `-dirty` when files differ from it.
pub fn commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(hash) = git(&["rev-parse", "--short=10", "HEAD"]) else {
        return "unknown".into();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(s) if !s.is_empty() => format!("{hash}-dirty"),
        _ => hash,
    }
}

/// Now, UTC, as `YYYY-MM-DD HH:MM`.
pub fn now_utc() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// `secs` after the Unix epoch as `YYYY-MM-DD HH:MM` (UTC).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (H. Hinnant's algorithm, proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let cpu = "processor\t: 0\nvendor_id\t: X\nmodel name\t: Some CPU @ 3.00GHz\n";
        assert_eq!(cpu_model(cpu).as_deref(), Some("Some CPU @ 3.00GHz"));
        assert_eq!(cpu_model("processor : 0\n"), None);
        let mem = "MemFree:  100 kB\nMemTotal:       24576000 kB\n";
        assert_eq!(mem_total_kib(mem), Some(24_576_000));
    }

    #[test]
    fn civil_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00");
        // 2000-02-29 12:34 UTC: a leap day of a century leap year.
        assert_eq!(utc(951_827_640), "2000-02-29 12:34");
        assert_eq!(utc(4_102_444_799), "2099-12-31 23:59");
    }
}
