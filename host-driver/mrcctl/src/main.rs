//! mrcctl: inspect and drive MRC NICs, real (`--dev BDF`, through VFIO) or simulated
//! (`--sim default`: two NICs of `mrc_sim::nic_host` on a 4-plane Clos fabric, the simulator's NIC
//! model behind each).
//!
//! Every failure prints one clear line on stderr naming the device and exits with code 2;
//! `--json` prints only JSON on stdout.
#![forbid(unsafe_code)]

mod fw;
mod perf;
mod sysfs;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mrc_driver::api::{Context, Role};
use mrc_driver::ctl::plan::{self, Clos};
use mrc_driver::ctl::{
    self, Controller, EvFormatSpec, EvProfileSpec, NsccParams, ProfileKind, ProfileState,
};
use mrc_driver::device::{Device, DeviceConfig};
use mrc_driver::sys::Bdf;
use mrc_sim::nic_host::SimHost;
use serde_json::{json, Value};

/// A failure to report (exit code 2).
#[derive(Debug)]
pub struct Fail(pub String);

impl<E: std::error::Error> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(e.to_string())
    }
}

#[derive(Parser, Debug)]
#[command(name = "mrcctl", version, about = "Inspect and drive MRC NICs")]
struct Cli {
    /// PCI address of the device (domain:bus:device.function).
    #[arg(long, global = true)]
    dev: Option<String>,
    /// Use a simulated host instead of hardware (scenario: `default`; `elf`: the same with
    /// the NICs' firmware-update path in the NIC image on an emulated core, feature `elf`).
    #[arg(long, global = true)]
    sim: Option<String>,
    /// Print only JSON on stdout.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List devices.
    List,
    /// Bind a device to vfio-pci.
    Bind { bdf: String },
    /// Give a device back to the kernel.
    Unbind { bdf: String },
    /// Device attributes.
    Info,
    /// Counters and port states.
    Stats,
    /// Entropy values.
    Ev {
        #[command(subcommand)]
        cmd: EvCmd,
    },
    /// Create a profile.
    Profile {
        /// nscc, udp, stev or srv6.
        kind: String,
    },
    /// Perftest-style RDMA Write benchmarks.
    Perf {
        #[command(subcommand)]
        test: PerfCmd,
    },
    /// Firmware: status, update, confirm, rollback.
    Fw {
        #[command(subcommand)]
        cmd: FwCmd,
    },
}

#[derive(Subcommand, Debug)]
enum FwCmd {
    /// Running slot and version, update state, staged version.
    Status,
    /// Stream a signed image (from `mrc-fw-pack`) to the device and commit it; the device
    /// verifies it and refuses a bad one with a reason (exit code 2).
    Update {
        /// The image file.
        image: std::path::PathBuf,
        /// With --sim: reset the NIC after the commit so it boots the image on trial.
        #[arg(long)]
        reboot: bool,
        /// With --reboot: confirm the image once it runs.
        #[arg(long, requires = "reboot")]
        confirm: bool,
    },
    /// The running trial image is good: keep it.
    Confirm,
    /// Boot the previous image at the next reset.
    Rollback,
}

#[derive(Subcommand, Debug)]
enum EvCmd {
    /// EVs of a profile.
    Show {
        #[arg(long, default_value_t = 2)]
        profile: u32,
        #[arg(long, default_value_t = 16)]
        count: u16,
    },
    /// Deny an EV.
    Deny {
        #[arg(long, default_value_t = 2)]
        profile: u32,
        #[arg(long)]
        index: u16,
    },
    /// Allow a denied EV.
    Allow {
        #[arg(long, default_value_t = 2)]
        profile: u32,
        #[arg(long)]
        index: u16,
    },
    /// Plan SRv6 uSID EVs for a Clos and optionally install them.
    Generate {
        #[arg(long, default_value_t = 4)]
        planes: u8,
        #[arg(long, default_value_t = 2)]
        tiers: u8,
        #[arg(long, default_value_t = 16)]
        leaves: u16,
        #[arg(long, default_value_t = 32)]
        spines: u16,
        #[arg(long, default_value_t = 0)]
        pods: u16,
        #[arg(long, default_value_t = 0)]
        cores: u16,
        #[arg(long, default_value_t = 8)]
        hosts_per_leaf: u16,
        #[arg(long, default_value_t = 0)]
        src: u32,
        #[arg(long, default_value_t = 1)]
        dst: u32,
        #[arg(long, default_value_t = 128)]
        num: u16,
        /// Install as an EXPLICIT SRv6 profile on the device.
        #[arg(long)]
        install: bool,
    },
}

#[derive(Subcommand, Debug)]
enum PerfCmd {
    /// Bandwidth.
    WriteBw(perf::PerfArgs),
    /// Latency (Write-with-Immediate ping).
    WriteLat(perf::PerfArgs),
}

/// The device(s) a command runs on.
pub struct Target {
    /// Controller context of the first device.
    pub ctl: Context,
    /// Application context of the peer (the second sim NIC, or the same device).
    pub peer: Context,
    /// Keeps the simulated host alive.
    pub sim: Option<SimHost>,
    /// EV profile provisioned for the sim (`None` on hardware).
    pub profile: Option<u32>,
}

fn parse_bdf(s: &str) -> Result<Bdf, Fail> {
    s.parse::<Bdf>().map_err(|e| Fail(e.to_string()))
}

fn open(cli: &Cli) -> Result<Target, Fail> {
    match (&cli.sim, &cli.dev) {
        (Some(_), Some(_)) => Err(Fail("give either --sim or --dev, not both".into())),
        (Some(s), None) if s == "default" || s == "elf" => {
            let host = SimHost::clos_pair()?;
            let host = if s == "elf" {
                elf_firmware(host)?
            } else {
                host
            };
            let a = Context::from_backend(
                host.nics()[0].backend(),
                &DeviceConfig::default(),
                Role::Controller,
            )?;
            let b = Context::from_backend(
                host.nics()[1].backend(),
                &DeviceConfig::default(),
                Role::Application,
            )?;
            // The default scenario: a UDP format profile (1) and a GENERATED profile of 128 EVs (2).
            let c = Controller::new(&a)?;
            let fmt = c.create_ev_format_profile(&EvFormatSpec::udp((49152, 49407)))?;
            let spec = default_ev_spec(fmt);
            let id = c.create_ev_profile(&spec)?;
            c.set_ev_profile_state(id, &spec, ProfileState::Online)?;
            Ok(Target {
                ctl: a,
                peer: b,
                sim: Some(host),
                profile: Some(id),
            })
        }
        (Some(s), None) => Err(Fail(format!(
            "unknown simulation scenario {s:?} (known: default, elf)"
        ))),
        (None, Some(d)) => {
            let bdf = parse_bdf(d)?;
            sysfs::precheck(bdf)?;
            let ctx = Context::open(bdf, Role::Controller)
                .map_err(|e| Fail(format!("cannot open {bdf}: {e}")))?;
            let peer = Context::from_device(ctx.device(), Role::Application);
            Ok(Target {
                ctl: ctx,
                peer,
                sim: None,
                profile: None,
            })
        }
        (None, None) => Err(Fail("no device: give --dev BDF or --sim default".into())),
    }
}

/// `--sim elf`: the NICs' firmware-update commands run in the NIC image on an emulated core.
#[cfg(feature = "elf")]
fn elf_firmware(host: SimHost) -> Result<SimHost, Fail> {
    host.with_elf_firmware(None)
        .map_err(|e| Fail(format!("--sim elf: {e}")))
}

#[cfg(not(feature = "elf"))]
fn elf_firmware(_host: SimHost) -> Result<SimHost, Fail> {
    Err(Fail(
        "--sim elf needs mrcctl built with its `elf` cargo feature \
         (cargo build -p mrcctl --features elf; it builds the Unicorn engine with cmake)"
            .into(),
    ))
}

fn default_ev_spec(fmt: u32) -> EvProfileSpec {
    EvProfileSpec {
        format_profile: fmt,
        kind: ProfileKind::Generated,
        num_evs: 128,
        min_active_evs: 32,
        event_mask: ctl::EVENT_MASK_ALL,
        seed: 1,
    }
}

fn info(dev: &Device) -> Value {
    let a = dev.attrs();
    json!({
        "bdf": a.bdf.to_string(),
        "device_id": format!("{:08x}", a.device_id),
        "abi_version": format!("{}.{}", a.abi_version.major, a.abi_version.minor),
        "wire_version": a.wire_version,
        "capabilities": format!("{:#x}", a.capabilities),
        "ports": a.num_ports, "planes": a.num_planes,
        "max_qps": a.max_qps, "max_cqs": a.max_cqs, "max_evs_per_qp": a.max_evs_per_qp,
        "doorbell_pages": a.doorbell_pages,
        "fw_version": format!("{:#x}", a.limits.fw_version),
        "max_pds": a.limits.max_pds, "max_mrs": a.limits.max_mrs,
        "gid": std::net::Ipv6Addr::from(a.gid).to_string(),
    })
}

fn stats(t: &Target) -> Result<Value, Fail> {
    let dev = t.ctl.device();
    let c = Controller::new(&t.ctl)?;
    let mut ports = Vec::new();
    for p in 0..dev.attrs().num_ports.min(255) as u8 {
        let i = c.query_port(p)?;
        ports.push(
            json!({"port": p, "admin_up": i.admin_up, "oper_up": i.oper_up,
                          "speed_mbps": i.speed_mbps, "plane": i.plane}),
        );
    }
    let k = dev.counters();
    let ld = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let mut v = json!({
        "bdf": dev.bdf().to_string(),
        "liveness": dev.liveness()?,
        "driver": {"admin_commands": ld(&k.admin_commands), "admin_errors": ld(&k.admin_errors),
                   "doorbells": ld(&k.doorbells), "events": ld(&k.events)},
        "ports": ports,
    });
    if let Some(h) = &t.sim {
        let n = h.nics()[0].counters();
        v["device"] = json!({"admin_commands": n.admin_commands, "send_wqes": n.send_wqes,
            "bytes_placed": n.bytes_placed, "cqes": n.cqes, "events": n.events,
            "events_dropped": n.events_dropped, "interrupts": n.interrupts});
    }
    Ok(v)
}

fn ev_rows(c: &Controller, profile: u32, count: u16) -> Result<Value, Fail> {
    let mut rows = Vec::new();
    for i in 0..count {
        match c.query_ev(profile, i) {
            Ok(e) => rows.push(json!({"index": i, "state": format!("{:?}", e.state),
                                      "value": e.value, "last_rtt_ns": e.last_rtt_ns})),
            Err(mrc_driver::Error::Admin { .. }) if i > 0 => break,
            Err(e) => return Err(Fail(format!("EV profile {profile}: {e}"))),
        }
    }
    Ok(json!({"profile": profile, "evs": rows}))
}

fn run(cli: &Cli) -> Result<Value, Fail> {
    match &cli.cmd {
        Cmd::List => {
            if cli.sim.is_some() {
                let t = open(cli)?;
                return Ok(json!({"devices": [info(t.ctl.device()), info(t.peer.device())]}));
            }
            Ok(json!({"devices": sysfs::list()?}))
        }
        Cmd::Bind { bdf } | Cmd::Unbind { bdf } => {
            let b = parse_bdf(bdf)?;
            if cli.sim.is_some() {
                return Ok(
                    json!({"bdf": b.to_string(), "simulated": true, "note": "simulated devices need no binding"}),
                );
            }
            if matches!(cli.cmd, Cmd::Bind { .. }) {
                sysfs::bind(b)
            } else {
                sysfs::unbind(b)
            }
        }
        Cmd::Info => Ok(info(open(cli)?.ctl.device())),
        Cmd::Stats => stats(&open(cli)?),
        Cmd::Ev { cmd } => {
            let t = open(cli)?;
            let c = Controller::new(&t.ctl)?;
            match cmd {
                EvCmd::Show { profile, count } => ev_rows(&c, *profile, *count),
                EvCmd::Deny { profile, index } => {
                    c.deny_ev(*profile, *index)?;
                    ev_rows(&c, *profile, index + 1)
                }
                EvCmd::Allow { profile, index } => {
                    c.allow_ev(*profile, *index)?;
                    ev_rows(&c, *profile, index + 1)
                }
                EvCmd::Generate {
                    planes,
                    tiers,
                    leaves,
                    spines,
                    pods,
                    cores,
                    hosts_per_leaf,
                    src,
                    dst,
                    num,
                    install,
                } => {
                    let clos = Clos {
                        planes: *planes,
                        tiers: *tiers,
                        leaves: *leaves,
                        spines: *spines,
                        pods: *pods,
                        cores: *cores,
                        hosts_per_leaf: *hosts_per_leaf,
                        block: mrc_abi::wire::usid::DEFAULT_BLOCK,
                    };
                    let evs = plan::plan(&clos, *src, *dst, *num)?;
                    let profile = if *install {
                        let fmt = c.create_ev_format_profile(&EvFormatSpec::srv6(clos.block))?;
                        Some(ctl::install_plan(&c, fmt, &evs, (*num / 4).max(1))?)
                    } else {
                        None
                    };
                    let list: Vec<Value> = evs.iter().enumerate()
                        .map(|(i, e)| json!({"index": i, "plane": e.plane, "carrier": e.carrier.to_string()}))
                        .collect();
                    Ok(json!({"profile": profile, "evs": list}))
                }
            }
        }
        Cmd::Profile { kind } => {
            let t = open(cli)?;
            let c = Controller::new(&t.ctl)?;
            let id = match kind.as_str() {
                "nscc" => c.create_cc_profile(&NsccParams::default())?,
                "udp" => c.create_ev_format_profile(&EvFormatSpec::udp((49152, 65535)))?,
                "stev" => c.create_ev_format_profile(&EvFormatSpec::stev((49152, 65535)))?,
                "srv6" => c.create_ev_format_profile(&EvFormatSpec::srv6(
                    mrc_abi::wire::usid::DEFAULT_BLOCK,
                ))?,
                k => {
                    return Err(Fail(format!(
                        "unknown profile kind {k:?} (nscc, udp, stev, srv6)"
                    )))
                }
            };
            Ok(json!({"kind": kind, "id": id}))
        }
        Cmd::Fw { cmd } => fw_cmd(cli, cmd),
        Cmd::Perf { test } => {
            let t = open(cli)?;
            match test {
                PerfCmd::WriteBw(a) => perf::write_bw(&t, a),
                PerfCmd::WriteLat(a) => perf::write_lat(&t, a),
            }
        }
    }
}

fn fw_cmd(cli: &Cli, cmd: &FwCmd) -> Result<Value, Fail> {
    let t = open(cli)?;
    let dev = t.ctl.device();
    match cmd {
        FwCmd::Status => fw::status(dev),
        FwCmd::Confirm => fw::confirm(dev),
        FwCmd::Rollback => fw::rollback(dev),
        FwCmd::Update {
            image,
            reboot,
            confirm,
        } => {
            let bytes = std::fs::read(image)
                .map_err(|e| Fail(format!("cannot read image {}: {e}", image.display())))?;
            let sim = match (&t.sim, reboot) {
                (None, true) => {
                    return Err(Fail(format!(
                        "{}: --reboot needs --sim; reset the device to boot the new image",
                        dev.bdf()
                    )))
                }
                (sim, _) => sim.as_ref().and_then(|h| h.nic(0)),
            };
            let mut v = fw::update(dev, &bytes)?;
            if let (Some(nic), true) = (sim, reboot) {
                let dev = fw::reboot_sim(nic, &DeviceConfig::default())?;
                v["after_reboot"] = fw::status(&dev)?;
                if *confirm {
                    v["after_confirm"] = fw::confirm(&dev)?;
                }
            }
            Ok(v)
        }
    }
}

fn human(v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if x.is_object() || x.is_array() {
                    println!("{pad}{k}:");
                    human(x, indent + 2);
                } else {
                    println!("{pad}{k}: {x}");
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                if x.is_object() {
                    let parts: Vec<String> = x
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, y)| format!("{k}={y}"))
                        .collect();
                    println!("{pad}- {}", parts.join(" "));
                } else {
                    println!("{pad}- {x}");
                }
            }
        }
        other => println!("{pad}{other}"),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(v) => {
            if cli.json {
                println!("{v}");
            } else {
                human(&v, 0);
            }
            ExitCode::SUCCESS
        }
        Err(Fail(msg)) => {
            eprintln!("mrcctl: {msg}");
            ExitCode::from(2)
        }
    }
}
