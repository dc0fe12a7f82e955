//! What a run produces besides the table: JSON ([`json`]), SVG plots ([`svg`]), pcap of
//! selected packets ([`pcap`]) and a progress bar on a terminal ([`progress`]).
//!
//! [`Recorder`] is the [`Observer`] the CLI runs each transport with: it keeps the time series
//! the plots need, feeds the pcap writer and the progress bar. None of them changes the run:
//! the report is the one [`crate::run::run`] gives.

pub mod bench;
pub mod json;
pub mod pcap;
pub mod progress;
pub mod svg;

use crate::core::time::{Duration, Time};
use crate::run::parallel::Mode;
use crate::run::{Observer, RunReport, Tap, WorldView};

use crate::nic::StagePacket;

/// One sample of a run's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When.
    pub at: Time,
    /// Bytes acknowledged to the senders so far (all NICs).
    pub acked_bytes: u64,
    /// Payload bytes the receivers placed so far (all NICs).
    pub placed_bytes: u64,
}

/// The time series of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Series {
    /// Sampling period (of the first [`MAX_SAMPLES`] / 2 samples; later ones are sparser).
    pub every: Duration,
    /// Samples in time order.
    pub samples: Vec<Sample>,
    /// One NIC's hardware over time, when asked for ([`Recorder::watch_nic`]): one entry per
    /// sample.
    pub nic: Option<NicSeries>,
}

/// What one NIC's parts were busy with over a run, sampled with the run's [`Series`]: named
/// series (the PCIe link's two directions; any part the NIC reports through
/// [`crate::nic::Nic::busy_series`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicSeries {
    /// The host.
    pub host: u32,
    /// The series' names, and units each (a utilisation is busy / (units x time)).
    pub names: Vec<(&'static str, u32)>,
    /// Per sample: its time and each series' busy time from time zero.
    pub samples: Vec<(Time, Vec<Duration>)>,
}

impl NicSeries {
    /// Per series (in [`NicSeries::names`] order): its name and (mid-interval time in us,
    /// busy fraction 0..=1) between consecutive samples.
    pub fn utilisation(&self) -> Vec<(&'static str, Vec<(f64, f64)>)> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, &(name, units))| {
                let mut prev = (Time::ZERO, Duration::ZERO);
                let mut pts = Vec::with_capacity(self.samples.len());
                for (at, busy) in &self.samples {
                    let b = busy.get(i).copied().unwrap_or(Duration::ZERO);
                    let dt = at.duration_since(prev.0).as_ps();
                    if dt > 0 {
                        let used = b.saturating_sub(prev.1).as_ps() as f64;
                        let mid_us = (prev.0.as_ps() + dt / 2) as f64 / 1e6;
                        let whole = dt as f64 * f64::from(units.max(1));
                        pts.push((mid_us, (used / whole).min(1.0)));
                    }
                    prev = (*at, b);
                }
                (name, pts)
            })
            .collect()
    }
}

impl Series {
    /// Goodput between consecutive samples: (mid-interval time in us, Gb/s of placed bytes).
    pub fn goodput_gbps(&self) -> Vec<(f64, f64)> {
        let mut prev = Sample {
            at: Time::ZERO,
            acked_bytes: 0,
            placed_bytes: 0,
        };
        let mut out = Vec::with_capacity(self.samples.len());
        for s in &self.samples {
            let dt_ps = s.at.duration_since(prev.at).as_ps();
            if dt_ps > 0 {
                let bits = (s.placed_bytes.saturating_sub(prev.placed_bytes) * 8) as f64;
                let mid_us = (prev.at.as_ps() + dt_ps / 2) as f64 / 1e6;
                // bits per ps * 1e12 = bits/s; / 1e9 = Gb/s.
                out.push((mid_us, bits / dt_ps as f64 * 1e3));
            }
            prev = *s;
        }
        out
    }
}

/// The outcome of one transport's run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Transport name.
    pub name: &'static str,
    /// The report, or why the run could not start.
    pub result: Result<RunReport, String>,
    /// Progress over time (empty when the run did not start).
    pub series: Series,
    /// Wall-clock seconds the run took (not deterministic; kept out of the JSON's
    /// deterministic part).
    pub wall_s: f64,
    /// What the run cost: events, data packets, wall and CPU time, peak RSS (not
    /// deterministic either).
    pub cost: crate::run::perf::RunCost,
    /// How it ran: sequentially (and why, when threads were asked for) or partitioned.
    pub mode: Mode,
}

/// The CLI's observer: series, optional pcap tap, optional progress bar.
pub struct Recorder<'a> {
    /// The series being recorded.
    pub series: Series,
    /// Packet capture, if asked for.
    pub pcap: Option<&'a mut pcap::Capture>,
    /// Progress bar, if stderr is a terminal.
    pub progress: Option<&'a mut progress::Progress>,
    /// Samples seen; every `stride`-th is kept.
    ticks: u64,
    stride: u64,
}

/// The NIC of `host`, if the world has one of the MRC NIC model.
fn nic_of<'w>(world: &'w WorldView<'_>, host: u32) -> Option<&'w crate::nic::Nic> {
    world
        .parts()
        .iter()
        .find_map(|w| w.nics.iter().find(|n| n.host() == host))
}

/// Most samples a [`Series`] keeps. The first half are at the full sampling period; past
/// that, every other sample of the rest is dropped (and the stride doubles) whenever the
/// series is full, so a run that hits a long time limit keeps its start in detail and a
/// bounded, coarser tail.
pub const MAX_SAMPLES: usize = 4096;

impl<'a> Recorder<'a> {
    /// A recorder sampling every `every`.
    pub fn new(every: Duration) -> Recorder<'a> {
        Recorder {
            series: Series {
                every,
                samples: Vec::new(),
                nic: None,
            },
            pcap: None,
            progress: None,
            ticks: 0,
            stride: 1,
        }
    }

    /// Also records the utilisation of `host`'s NIC over time ([`Series::nic`]).
    pub fn watch_nic(&mut self, host: u32) {
        self.series.nic = Some(NicSeries {
            host,
            ..NicSeries::default()
        });
    }

    /// Samples the watched NIC at `now` (one entry per kept sample).
    fn sample_nic(&mut self, now: Time, world: &WorldView<'_>) {
        let Some(ns) = self.series.nic.as_mut() else {
            return;
        };
        let busy = nic_of(world, ns.host).map(|n| n.busy_series(now));
        if ns.names.is_empty() {
            if let Some(b) = &busy {
                ns.names = b.iter().map(|&(name, _, units)| (name, units)).collect();
            }
        }
        let v = busy.map_or_else(Vec::new, |b| b.into_iter().map(|(_, d, _)| d).collect());
        ns.samples.push((now, v));
    }
}

fn sample(now: Time, world: &WorldView<'_>) -> Sample {
    Sample {
        at: now,
        acked_bytes: world.acked_bytes(),
        placed_bytes: world.placed_bytes(),
    }
}

impl Recorder<'_> {
    /// True when `at` is an even multiple of the current stride of sampling periods.
    fn is_even_stride(&self, at: Time) -> bool {
        let step = self
            .series
            .every
            .as_ps()
            .max(1)
            .saturating_mul(self.stride * 2);
        at.as_ps().is_multiple_of(step)
    }
}

/// A sampling period giving about 400 samples over `ideal` (at least 1 us, a whole number of
/// microseconds).
pub fn sample_period(ideal: Duration) -> Duration {
    Duration::from_us((ideal.as_ps() / 400 / 1_000_000).max(1))
}

impl Observer for Recorder<'_> {
    fn sample_every(&self) -> Duration {
        self.series.every
    }

    fn on_sample(&mut self, now: Time, world: &WorldView<'_>) {
        self.ticks += 1;
        let keep = self.ticks.is_multiple_of(self.stride);
        if !keep && self.progress.is_none() {
            return;
        }
        let s = sample(now, world);
        if let Some(p) = self.progress.as_deref_mut() {
            p.update(now, s.acked_bytes);
        }
        if !keep {
            return;
        }
        let head = MAX_SAMPLES / 2;
        if self.series.samples.len() >= MAX_SAMPLES {
            // Thin the tail (past the full-resolution head): keep the samples at even
            // multiples of the stride.
            let tail = self.series.samples.split_off(head);
            let phase = tail
                .iter()
                .position(|x| self.is_even_stride(x.at))
                .unwrap_or(0);
            self.series
                .samples
                .extend(tail.into_iter().skip(phase).step_by(2));
            if let Some(ns) = self.series.nic.as_mut() {
                // (one entry per sample: the same ones go)
                let tail = ns.samples.split_off(head.min(ns.samples.len()));
                ns.samples.extend(tail.into_iter().skip(phase).step_by(2));
            }
            self.stride *= 2;
            if !self.ticks.is_multiple_of(self.stride) {
                return;
            }
        }
        self.series.samples.push(s);
        self.sample_nic(now, world);
    }

    fn on_finish(&mut self, now: Time, world: &WorldView<'_>) {
        let s = sample(now, world);
        if let Some(p) = self.progress.as_deref_mut() {
            p.update(now, s.acked_bytes);
        }
        self.series.samples.push(s);
        self.sample_nic(now, world);
    }

    fn tap(&self) -> Tap {
        self.pcap.as_ref().map_or(Tap::Off, |c| c.filter.tap())
    }

    fn on_tx(&mut self, now: Time, world: &WorldView<'_>, src: u32, dst: u32, pkt: &StagePacket) {
        if let Some(c) = self.pcap.as_deref_mut() {
            c.on_tx(now, world, src, dst, pkt);
        }
    }
}

/// Where to write packets, for [`run_all`].
pub struct PcapRequest<'a> {
    /// The file (one transport) or the stem of one file per transport
    /// (`OUT.pcap` -> `OUT-mrc.pcap`, `OUT-mrc-1ev.pcap`, ...).
    pub path: &'a std::path::Path,
    /// Which packets.
    pub filter: pcap::Filter,
}

/// The pcap file of `transport` when `count` transports run.
pub fn pcap_path(base: &std::path::Path, transport: &str, count: usize) -> std::path::PathBuf {
    if count <= 1 {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map_or_else(|| "capture".into(), |s| s.to_string_lossy().into_owned());
    let ext = base
        .extension()
        .map_or_else(|| "pcap".into(), |s| s.to_string_lossy().into_owned());
    base.with_file_name(format!("{stem}-{transport}.{ext}"))
}

/// Runs every transport of `spec` in order. A transport whose run cannot start (e.g. one the
/// NIC model refuses) gets its error in its [`Outcome`]; the others still run.
/// `progress` shows a bar per run when stderr is a terminal. Returns the outcomes and one line
/// per pcap file written.
///
/// # Errors
/// A pcap file that cannot be created or written (naming it).
pub fn run_all(
    spec: &crate::scenario::ScenarioSpec,
    pcap: Option<&PcapRequest<'_>>,
    progress: bool,
) -> Result<(Vec<Outcome>, Vec<String>), String> {
    run_all_threads(spec, pcap, progress, 1, None)
}

/// [`run_all`] with each run on up to `threads` threads ([`crate::run::parallel`]): the same
/// outcomes (a scenario the partitioning cannot take runs sequentially; [`Outcome::mode`]
/// says so). With `nic = Some(host)`, each series records that host's NIC
/// ([`Series::nic`]).
///
/// # Errors
/// A pcap file that cannot be created or written (naming it).
pub fn run_all_threads(
    spec: &crate::scenario::ScenarioSpec,
    pcap: Option<&PcapRequest<'_>>,
    progress: bool,
    threads: usize,
    nic: Option<u32>,
) -> Result<(Vec<Outcome>, Vec<String>), String> {
    let mut outcomes = Vec::new();
    let mut notes = Vec::new();
    let n = spec.file.transports.len();
    for &t in &spec.file.transports {
        let sc = spec.scenario(t);
        let mut rec = Recorder::new(sample_period(sc.ideal()));
        if let Some(h) = nic {
            rec.watch_nic(h);
        }
        let file = pcap.map(|p| pcap_path(p.path, t.name(), n));
        let mut cap = match (pcap, &file) {
            (Some(p), Some(f)) => Some(pcap::Capture::create(f, p.filter, t)?),
            _ => None,
        };
        let total = sc.workload.busiest_nic_bytes(sc.fabric.shape.hosts())
            * u64::from(sc.fabric.shape.hosts());
        let mut bar = if progress {
            progress::Progress::on_terminal(t.name(), total)
        } else {
            None
        };
        rec.pcap = cap.as_mut();
        rec.progress = bar.as_mut();
        let meter = crate::run::perf::Meter::start();
        let (result, mode) =
            match crate::run::parallel::run_observed_threads(&sc, &mut rec, threads, 0) {
                Ok((r, m)) => (Ok(r), m),
                Err(e) => (Err(e.to_string()), Mode::Sequential { reason: None }),
            };
        let cost = match &result {
            Ok(r) => meter.finish(r.events, r.data_sent + r.retransmits),
            Err(_) => meter.finish(0, 0),
        };
        let wall_s = cost.wall_s;
        let series = rec.series;
        if let Some(b) = bar {
            b.finish();
        }
        if let (Some(c), Some(f)) = (cap, file) {
            let over = c.over_limit;
            let written = c.finish()?;
            if result.is_err() {
                // Nothing ran: leave no empty capture behind.
                let _ = std::fs::remove_file(&f);
                outcomes.push(Outcome {
                    name: t.name(),
                    result,
                    series,
                    wall_s,
                    cost,
                    mode,
                });
                continue;
            }
            let mut line = format!("{}: {written} frames -> {}", t.name(), f.display());
            if over > 0 {
                line.push_str(&format!(" ({over} more matched past the frame limit)"));
            }
            notes.push(line);
        }
        outcomes.push(Outcome {
            name: t.name(),
            result,
            series,
            wall_s,
            cost,
            mode,
        });
    }
    Ok((outcomes, notes))
}
