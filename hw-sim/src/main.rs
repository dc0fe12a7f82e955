//! `mrc-sim`: the default run of the project (`cargo run --release` at the root) and the
//! simulator's command line.
//!
//! ```text
//! mrc-sim                                  # = mrc-sim run default
//! mrc-sim run [SCENARIO.toml|NAME] [--seed N] [--json OUT] [--svg DIR] [--nic-svg HOST PATH]
//!             [--pcap OUT [--pcap-filter EXPR]] [--transport NAME...]
//!             [--no-failure] [--reorder-tx N] [--threads N] [--firmware native|elf [--elf PATH]]
//!             [--datapath model|rtl] [--host driver|flows]
//! mrc-sim scenarios                        # the built-in scenarios, one line each
//! mrc-sim serve pair --socket-dir DIR [--seed N] [--once [--json OUT]] [-v]
//!                                          # the scenario's NICs as vfio-user devices
//! mrc-sim bench [--full] [--only NAME...] [--threads N...] [--out target/bench-sim.json]
//!               [--svg target/bench-sim.svg]   # simulator cost at 1K/4K/16K(/128K) hosts
//! ```
//! `--threads N` runs each scenario partitioned over N threads ([`mrc_sim::run::parallel`]):
//! the same report and JSON as one thread (a scenario that cannot be partitioned runs on one
//! thread and says why). `bench --threads 1 2` measures every size at each count.
//! ```text
//! ```
//! Every transport of the scenario runs in turn over the same fabric and workload; the table
//! puts them side by side. A transport the NIC model cannot run shows its error and the others
//! still run. Errors in what was asked (a bad scenario file, an unknown transport, a bad
//! filter, an unwritable output) print one message naming the problem and exit with code 2;
//! exit code 1 means no transport could run.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use mrc_sim::nic::{DatapathLevel, FirmwareLevel, RtlReport, Transport, HEADER_BYTES};
use mrc_sim::output::{self, bench, json, pcap::Filter, svg, Outcome, PcapRequest};
use mrc_sim::run::{format_table, HostModel, Scenario};
use mrc_sim::scenario::{self, ScenarioSpec};
use mrc_sim::serve::{Lifetime, Served};

#[derive(Parser)]
#[command(
    name = "mrc-sim",
    version,
    about = "Cycle-level simulator of MRC NICs and multi-plane fabrics",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario (every transport it lists) and print the side-by-side table.
    Run(RunArgs),
    /// List the built-in scenarios with a one-line description.
    Scenarios,
    /// Measure the simulator's cost at 1K, 4K and 16K hosts (128K with --full): one process
    /// per size, mrc only; writes a JSON of rows and an SVG of cost against size.
    Bench(BenchArgs),
    /// Serve a scenario's NICs as vfio-user devices on unix sockets (DIR/nic00.sock, ...) for
    /// drivers in other processes (`lib_mrc.so`, `Context::open_vfio_user`).
    #[command(long_about = SERVE_HELP)]
    Serve(ServeArgs),
    /// One size of `bench`, in this process; prints its row as one line of JSON.
    #[command(hide = true)]
    BenchOne {
        /// The size (1k, 1k-driver, 4k, 16k, 128k).
        name: String,
        /// Threads to run it on.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

#[derive(Args)]
struct BenchArgs {
    /// Add the 128K-host two-tier fabric of the MRC paper.
    #[arg(long)]
    full: bool,
    /// Run only these sizes (1k, 1k-driver: the same through the driver, 4k, 16k, 128k; 2t-16k, 2t-32k, 2t-64k: the 128K fabric's shape
    /// with fewer hosts).
    #[arg(long, value_name = "NAME", num_args = 1..)]
    only: Vec<String>,
    /// Measure each size on each of these thread counts (a row per size and count).
    #[arg(long, value_name = "N", num_args = 1.., default_values_t = [1usize],
          value_parser = clap::value_parser!(usize))]
    threads: Vec<usize>,
    /// Run each size of at most 5,000 hosts N times and keep the run of median CPU time (a
    /// larger size runs once: its minutes of run average this machine's noise).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=99))]
    repeat: u32,
    /// Where to write the rows.
    #[arg(long, value_name = "OUT", default_value = "target/bench-sim.json")]
    out: PathBuf,
    /// Where to write the plot.
    #[arg(long, value_name = "SVG", default_value = "target/bench-sim.svg")]
    svg: PathBuf,
}

const SERVE_HELP: &str = "\
Serve every NIC of a built-in scenario as a vfio-user device (rust-vmm's vfio_user server) on a
unix socket: NIC i of the scenario at DIR/nicNN.sock (zero-padded, so sorted socket names are
host order; lib_mrc.so names them mrc0, mrc1, ... with MRC_VFIO_USER_DIR=DIR). One client per
NIC at a time; a client that leaves gets its NIC reset and its memory unmapped.

Scenarios:
  pair      two hosts, 4 planes, the MRC engine on each NIC; at 1 ms of virtual time a
            leaf-spine link of plane 0 fails (its EVs are silently dropped) and stays down
  healthy   the two hosts of `pair` on the same fabric, with no failure

Virtual time: requests of all clients are applied one at a time, in the order the server takes
them, and time moves only with device work: a doorbell runs the fabric in virtual time until
it is idle (every packet delivered and acknowledged, every completion written) before its
reply. Time never waits for the wall clock or for a client, so a process spinning on its
memory and a process waiting in poll_cq never deadlock. For a seed and the same sequence of
applied requests, delivered bytes, completions and every counter are the same; the summary's
request digest identifies the sequence. Requests of different processes that are not ordered
by causality (both posting at once) interleave as the OS schedules them.";

#[derive(Args)]
struct ServeArgs {
    /// A built-in serving scenario (pair, healthy).
    scenario: String,
    /// Where the sockets go (created if missing; sockets left by a server that exited are
    /// replaced).
    #[arg(long, value_name = "DIR")]
    socket_dir: PathBuf,
    /// Seed of the fabric's random decisions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Serve one client per NIC, then exit with a summary once every NIC's client has left.
    #[arg(long)]
    once: bool,
    /// With --once: also write the summary as JSON here.
    #[arg(long, value_name = "OUT", requires = "once")]
    json: Option<PathBuf>,
    /// Log every client attaching and leaving (refusals and errors are always logged).
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Args, Default)]
struct RunArgs {
    /// A scenario file (ends in .toml or contains a /) or a built-in name.
    #[arg(default_value = "default")]
    scenario: String,
    /// Seed of every random decision (overrides the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the JSON report here.
    #[arg(long, value_name = "OUT")]
    json: Option<PathBuf>,
    /// Write throughput.svg and fct_cdf.svg into this directory.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
    /// Plot the utilisation over time of host HOST's NIC (its PCIe link's directions and its firmware cores) into
    /// the SVG file PATH, a panel per transport running the MRC NIC model.
    #[arg(long, num_args = 2, value_names = ["HOST", "PATH"])]
    nic_svg: Option<Vec<String>>,
    /// Write a pcap of the selected packets (one file per transport when several run).
    #[arg(long, value_name = "OUT")]
    pcap: Option<PathBuf>,
    /// Which packets go in the pcap: host=N qp=N psn=A..B kind=data|ack|nack|probe|control
    /// time_us=A..B (all must match).
    #[arg(long, value_name = "EXPR", requires = "pcap")]
    pcap_filter: Option<String>,
    /// Run only these transports (mrc, mrc-1ev, roce-ecmp, spray-oblivious).
    #[arg(long = "transport", value_name = "NAME", num_args = 1.., value_parser = parse_transport)]
    transports: Vec<Transport>,
    /// Run without the scenario's link failure (the baseline).
    #[arg(long)]
    no_failure: bool,
    /// The engine's loss-inference reorder threshold (1..=63), overriding the scenario's.
    #[arg(long, value_name = "N")]
    reorder_tx: Option<u32>,
    /// What runs the NICs' datapath blocks: `model` (the Rust models) or `rtl` (the
    /// Verilator-built RTL; needs a build with `--features rtl`), overriding the scenario's
    /// `[nic.datapath] level`.
    #[arg(long, value_name = "LEVEL", value_parser = parse_datapath)]
    datapath: Option<DatapathLevel>,
    /// Run each transport partitioned over N threads (same results as 1; scenarios that
    /// cannot be partitioned run on one thread and say why).
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// Who runs each NIC core's main loop, overriding [nic.firmware] level: native (compiled
    /// in) or elf (the mrc-nic ELF on an emulated core; needs the `elf` cargo feature).
    #[arg(long, value_name = "LEVEL", value_parser = parse_firmware)]
    firmware: Option<FirmwareLevel>,
    /// The mrc-nic ELF the elf level runs (default: the image built from this source tree).
    #[arg(long, value_name = "PATH")]
    elf: Option<PathBuf>,
    /// Who posts the MRC transports' work, overriding [host] model: driver (one application
    /// per host on mrc-driver) or flows (the NIC model's own flow table).
    #[arg(long, value_name = "MODEL", value_parser = parse_host)]
    host: Option<HostModel>,
}

fn parse_host(s: &str) -> Result<HostModel, String> {
    [HostModel::Driver, HostModel::Flows]
        .into_iter()
        .find(|m| m.name() == s)
        .ok_or_else(|| format!("unknown host model `{s}` (one of: driver, flows)"))
}

fn parse_firmware(s: &str) -> Result<FirmwareLevel, String> {
    match s {
        "native" => Ok(FirmwareLevel::Native),
        "elf" => Ok(FirmwareLevel::Elf),
        _ => Err(format!(
            "unknown firmware level `{s}` (one of: native, elf)"
        )),
    }
}

fn parse_datapath(s: &str) -> Result<DatapathLevel, String> {
    [DatapathLevel::Model, DatapathLevel::Rtl]
        .into_iter()
        .find(|l| l.name() == s)
        .ok_or_else(|| format!("unknown datapath level `{s}` (one of: model, rtl)"))
}

fn parse_transport(s: &str) -> Result<Transport, String> {
    Transport::ALL
        .into_iter()
        .find(|t| t.name() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = Transport::ALL.iter().map(|t| t.name()).collect();
            format!("unknown transport `{s}` (one of: {})", names.join(", "))
        })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Some(Cmd::Scenarios) => {
            list_scenarios();
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Run(a)) => run(a),
        Some(Cmd::Bench(a)) => bench(a),
        Some(Cmd::Serve(a)) => serve(a),
        Some(Cmd::BenchOne { name, threads }) => bench_one(&name, threads),
        None => run(cli.run),
    };
    result.unwrap_or_else(|e| {
        eprintln!("mrc-sim: error: {e}");
        ExitCode::from(2)
    })
}

fn bench(a: BenchArgs) -> Result<ExitCode, String> {
    let names: Vec<String> = if a.only.is_empty() {
        bench::names(a.full).into_iter().map(String::from).collect()
    } else {
        a.only.clone()
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut rows = Vec::new();
    let runs: Vec<(&String, usize)> = names
        .iter()
        .flat_map(|n| a.threads.iter().map(move |t| (n, (*t).max(1))))
        .collect();
    for (name, threads) in runs {
        let case = bench::case(name).ok_or_else(|| {
            format!(
                "unknown bench size `{name}` (one of: 1k, 1k-driver, 4k, 16k, 128k, 2t-16k, 2t-32k, 2t-64k)"
            )
        })?;
        eprintln!(
            "bench {name} ({threads} thread(s)): {} hosts: {}",
            case.hosts(),
            case.spec.file.description
        );
        // A process per run: its peak RSS is its own.
        let repeat = if case.hosts() <= bench::REPEAT_HOSTS {
            a.repeat
        } else {
            1
        };
        let runs = (0..repeat)
            .map(|_| {
                let out = std::process::Command::new(&exe)
                    .args(["bench-one", name, "--threads", &threads.to_string()])
                    .stderr(std::process::Stdio::inherit())
                    .output();
                match out {
                    Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .rev()
                        .find_map(|l| serde_json::from_str(l).ok())
                        .and_then(|v| bench::Row::from_json(&v))
                        .unwrap_or_else(|| {
                            bench::Row::failed(&case, "no row in its output".into())
                        }),
                    Ok(o) => bench::Row::failed(&case, format!("its process failed: {}", o.status)),
                    Err(e) => bench::Row::failed(&case, format!("cannot start: {e}")),
                }
            })
            .collect();
        let row = bench::median(runs).unwrap_or_else(|| bench::Row::failed(&case, "no run".into()));
        match &row.error {
            None => eprintln!(
                "  {}: {:.1} s wall, {} CPU, {} events, {} data packets: {} events and {} data packets per CPU-s, peak RSS {} MiB; {} of {} flows completed",
                row.mode,
                row.cost.wall_s,
                row.cost.cpu_s.map_or("?".into(), |c| format!("{c:.2} s")),
                row.cost.events,
                row.cost.data_packets,
                row.cost.events_per_cpu_s().map_or("?".into(), |x| format!("{x:.0}")),
                row.cost.data_packets_per_cpu_s().map_or("?".into(), |x| format!("{x:.0}")),
                row.cost.peak_rss_mb().map_or("?".into(), |x| format!("{x:.0}")),
                row.flows_completed,
                row.hosts,
            ),
            Some(e) => eprintln!("  not run: {e}"),
        }
        if row.cpu_s_runs.len() > 1 {
            let each: Vec<String> = row.cpu_s_runs.iter().map(|c| format!("{c:.2}")).collect();
            eprintln!(
                "  the median of {} runs (CPU s: {})",
                row.cpu_s_runs.len(),
                each.join(", ")
            );
        }
        rows.push(row);
    }
    for p in [&a.out, &a.svg] {
        if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("{}: cannot create: {e}", d.display()))?;
        }
    }
    let text =
        serde_json::to_string_pretty(&bench::document(&rows)).map_err(|e| format!("json: {e}"))?;
    std::fs::write(&a.out, text + "\n")
        .map_err(|e| format!("{}: cannot write: {e}", a.out.display()))?;
    println!("json: {}", a.out.display());
    svg::bench_plot(&a.svg, &rows)?;
    println!("svg: {}", a.svg.display());
    Ok(if rows.iter().all(|r| r.error.is_none()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn serve(a: ServeArgs) -> Result<ExitCode, String> {
    log::set_logger(&STDERR_LOG).ok();
    log::set_max_level(if a.verbose {
        log::LevelFilter::Info
    } else {
        log::LevelFilter::Warn
    });
    let sc = mrc_sim::serve::scenario::find(&a.scenario).ok_or_else(|| {
        let names: Vec<&str> = mrc_sim::serve::scenario::SCENARIOS
            .iter()
            .map(|s| s.name)
            .collect();
        format!(
            "unknown serving scenario `{}` (one of: {})",
            a.scenario,
            names.join(", ")
        )
    })?;
    let host = sc
        .build(a.seed)
        .map_err(|e| format!("scenario {}: {e}", sc.name))?;
    let lifetime = if a.once {
        Lifetime::Once
    } else {
        Lifetime::Forever
    };
    let served = Served::start(host, &a.socket_dir, lifetime).map_err(|e| e.to_string())?;
    println!("mrc-sim serve: scenario `{}`, seed {}", sc.name, a.seed);
    println!("  {}", sc.description);
    for (path, bdf) in served.sockets().iter().zip(served.addresses()) {
        println!("  {} ({bdf})", path.display());
    }
    println!("ready");
    use std::io::Write as _;
    std::io::stdout().flush().ok();
    let stats = served.wait();
    print!("{stats}");
    if let Some(path) = &a.json {
        let text =
            serde_json::to_string_pretty(&stats.to_json()).map_err(|e| format!("json: {e}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        println!("json: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `mrc-sim serve`'s log: one line per record on stderr.
struct StderrLog;
static STDERR_LOG: StderrLog = StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("mrc-sim serve: {}: {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

fn bench_one(name: &str, threads: usize) -> Result<ExitCode, String> {
    let case = bench::case(name).ok_or_else(|| format!("unknown bench size `{name}`"))?;
    let row = bench::run_case(&case, threads.max(1));
    println!("{}", row.to_json());
    Ok(ExitCode::SUCCESS)
}

fn list_scenarios() {
    let all = scenario::list();
    let w = all.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    println!("Built-in scenarios (files in hw-sim/scenarios/, compiled in; `mrc-sim run NAME`):");
    for (name, desc) in all {
        println!("  {name:<w$}  {desc}");
    }
    println!("Any other scenario: `mrc-sim run path/to/file.toml` (copy one of these to start).");
}

/// Loads the scenario and applies the command-line overrides.
fn spec_of(a: &RunArgs) -> Result<ScenarioSpec, String> {
    let mut spec = ScenarioSpec::resolve(&a.scenario).map_err(|e| e.to_string())?;
    if let Some(s) = a.seed {
        spec.file.seed = s;
    }
    if !a.transports.is_empty() {
        spec.file.transports = a.transports.clone();
    }
    if a.no_failure {
        spec.file.failure = None;
    }
    if let Some(r) = a.reorder_tx {
        spec.file.nic.reorder_tx = r;
    }
    if let Some(l) = a.datapath {
        spec.file.nic.datapath.level = l;
    }
    if let Some(m) = a.host {
        spec.file.host.model = m;
    }
    if let Some(level) = a.firmware {
        spec.file.nic.firmware.level = level;
    }
    if spec.file.nic.firmware.level == FirmwareLevel::Elf && !cfg!(feature = "elf") {
        return Err(format!(
            "{}: the elf firmware level needs mrc-sim built with its `elf` cargo feature \
             (cargo run --release --features elf -- run ...; it builds the GPL-2.0 Unicorn \
             engine with cmake)",
            spec.origin
        ));
    }
    if let Some(p) = &a.elf {
        if spec.file.nic.firmware.level != FirmwareLevel::Elf {
            return Err(format!(
                "{}: --elf {} names the image of the elf firmware level, but the firmware \
                 level is {} (add --firmware elf)",
                spec.origin,
                p.display(),
                spec.file.nic.firmware.level.name()
            ));
        }
        // (kept for the rest of the process: every NIC of every run reads it)
        spec.file.nic.firmware.elf = Some(Box::leak(p.clone().into_boxed_path()));
    }
    spec.file.validate().map_err(|(key, why)| {
        format!(
            "{} (with the command-line options): {key}: {why}",
            spec.origin
        )
    })?;
    Ok(spec)
}

fn run(a: RunArgs) -> Result<ExitCode, String> {
    let spec = spec_of(&a)?;
    let filter = match &a.pcap_filter {
        Some(f) => Filter::parse(f)?,
        None => Filter::default(),
    };
    let pcap = a.pcap.as_deref().map(|path| PcapRequest { path, filter });
    let base = spec.scenario(spec.file.transports[0]);
    let nic_svg = match a.nic_svg.as_deref() {
        Some([host, path]) => {
            let hosts = base.fabric.shape.hosts();
            let h: u32 = host.parse().ok().filter(|h| *h < hosts).ok_or_else(|| {
                format!("--nic-svg: host `{host}` is not a host of this fabric (0..{hosts})")
            })?;
            Some((h, PathBuf::from(path)))
        }
        _ => None,
    };
    print_header(&spec, &base);
    let (outcomes, notes) = output::run_all_threads(
        &spec,
        pcap.as_ref(),
        true,
        a.threads.max(1),
        nic_svg.as_ref().map(|n| n.0),
    )?;
    for o in &outcomes {
        match &o.result {
            Ok(r) => eprintln!(
                "  ran {} in {:.1} s wall, {} CPU ({} events, {} data packets{}; {})",
                o.name,
                o.wall_s,
                o.cost.cpu_s.map_or("?".into(), |c| format!("{c:.2} s")),
                r.events,
                o.cost.data_packets,
                o.cost
                    .data_packets_per_cpu_s()
                    .map_or(String::new(), |p| format!(", {:.0} per CPU-s", p)),
                o.mode,
            ),
            Err(e) => eprintln!("  {}: not run: {e}", o.name),
        }
    }
    print_results(&outcomes);
    print_rtl(&outcomes);
    for n in &notes {
        println!("pcap: {n}");
    }
    if let Some(path) = &a.json {
        let doc = json::document(&spec, &outcomes);
        let text = serde_json::to_string_pretty(&doc).map_err(|e| format!("json: {e}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        println!("json: {}", path.display());
    }
    if let Some(dir) = &a.svg {
        let files = svg::write_plots(dir, &spec.name, &outcomes, base.failure.map(|f| f.at))?;
        for f in files {
            println!("svg: {}", f.display());
        }
    }
    if let Some((_, path)) = &nic_svg {
        svg::nic_plot(path, &spec.name, &outcomes)?;
        println!("svg: {}", path.display());
    }
    print_not_modelled();
    Ok(if outcomes.iter().any(|o| o.result.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// At the `rtl` datapath level: what the RTL blocks did, per transport.
fn print_rtl(outcomes: &[Outcome]) {
    for o in outcomes {
        let Ok(r) = &o.result else { continue };
        let mut t = RtlReport::default();
        let mut any = false;
        for n in &r.nics {
            if let Some(x) = &n.rtl {
                t.add(x);
                any = true;
            }
        }
        if !any {
            continue;
        }
        let blocks: Vec<String> = t
            .blocks()
            .iter()
            .map(|(name, b)| {
                format!(
                    "{name} {} transactions over {} clocks in {} instances",
                    b.transactions, b.cycles, b.instances
                )
            })
            .collect();
        println!(
            "rtl {}: {}; {} RTL answers differed from the models{}",
            o.name,
            blocks.join(", "),
            t.differ,
            t.first_difference
                .as_ref()
                .map_or(String::new(), |d| format!(" (first: {d})")),
        );
    }
}

fn print_header(spec: &ScenarioSpec, base: &Scenario) {
    let f = &base.fabric;
    println!(
        "mrc-sim: scenario `{}` ({}), seed {}",
        spec.name, spec.origin, spec.file.seed
    );
    println!("  {}", spec.file.description);
    println!(
        "  {:?}, {} plane(s) x {} Gb/s per host, {} us per link, queues {} B, trimming {:?}, ECN {:?}",
        f.shape,
        f.planes,
        f.host_link_bps / 1_000_000_000,
        f.propagation.as_ps() as f64 / 1e6,
        f.queue.limit_bytes,
        f.queue.trim_bytes,
        f.queue.ecn.map(|e| (e.kmin_bytes, e.kmax_bytes)),
    );
    println!(
        "  workload: {:?}; MTU {} B ({} B payload)",
        base.workload,
        base.mtu_payload + HEADER_BYTES,
        base.mtu_payload
    );
    println!(
        "  engine: 256 EVs, NSCC, loss inferred once {} later transmissions are SACKed and a base RTT passed (or two base RTTs whatever the count), ACK timeout 1.024 us * 2^{}",
        base.reorder_tx, base.timeout_exp
    );
    if base.datapath.level == DatapathLevel::Rtl {
        println!(
            "  datapath: rtl: every EV decision and EV table write by the Verilator-built ev_sprayer, one per QP context{}",
            base.datapath
                .planted_bug
                .map_or(String::new(), |b| format!(" (planted bug: {b:?})"))
        );
    }
    if let Some(fl) = base.failure {
        println!(
            "  failure: T0-T1 link {} of plane 0 goes down at {} us (ECMP reconverges after {} ms; source routes never reroute)",
            fl.t1_link,
            fl.at.as_ps() / 1_000_000,
            f.reconvergence.as_ps() / 1_000_000_000
        );
    }
    println!(
        "  ideal = bytes the busiest NIC moves / its line rate + base RTT ({:.2} us) = {:.1} us\n",
        base.base_rtt().as_ps() as f64 / 1e6,
        base.ideal().as_ps() as f64 / 1e6
    );
}

fn print_results(outcomes: &[Outcome]) {
    let reports: Vec<_> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok().cloned())
        .collect();
    if !reports.is_empty() {
        println!("{}", format_table(&reports));
    }
    for r in &reports {
        if r.completed < r.hosts {
            println!(
                "{}: {} of {} flows had not completed when the run stopped at {} us (the time limit); their QPs were stalled (see longest stall).",
                r.transport,
                r.hosts - r.completed,
                r.hosts,
                r.completion.as_ps() / 1_000_000
            );
        }
    }
    for o in outcomes {
        if let Err(e) = &o.result {
            println!("{}: not run: {e}", o.name);
        }
    }
}

fn print_not_modelled() {
    println!();
    println!("Modelled: the real MRC datapath stage per NIC, its blocks (EV sprayer, header");
    println!("builder, PSN tracker, CSR event queue) clocked at the RTL's latency and initiation");
    println!("interval, and as its firmware the NIC image's main loop and engine, on cores (16 at");
    println!("2 GHz unless [nic.firmware] says otherwise) charged from");
    println!("guest instructions measured on the image under QEMU (mrc, mrc-1ev, spray-oblivious;");
    println!("a core's 32-entry CSR ring back-pressures the datapath when full), behind a PCIe");
    println!("link at TLP granularity (doorbells, WQE fetches, payload reads and writes, CQEs and");
    println!("events; link rate, credits, MPS/MRRS, latency, host memory latency); RoCE RC with");
    println!("go-back-N, DCQCN and PFC (roce-ecmp).");
    println!("Not modelled: the datapath's per-packet work without an RTL block (ACK application,");
    println!("placement), host CPU, host memory bandwidth, the RoCE NIC's host interface and");
    println!("firmware; mrc-1ev pins each QP to one plane and ECMP hash in the NIC model (the");
    println!("stage still sprays over its EVs, which then all name the same path).");
}
