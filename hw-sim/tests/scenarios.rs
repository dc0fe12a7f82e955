//! Scenario files: the built-ins, validation errors (exact messages), the default's one source,
//! and the observed run agreeing with the plain one.

use mrc_sim::nic::{DatapathLevel, DatapathLevelConfig, FirmwareConfig, RtlBlock, Transport};
use mrc_sim::output::{self, json};
use mrc_sim::run::{run, run_observed, Scenario};
use mrc_sim::scenario::{ScenarioSpec, BUILTIN};

const DEFAULT: &str = include_str!("../scenarios/default.toml");

fn err(text: &str) -> String {
    ScenarioSpec::parse("s.toml", text).unwrap_err().to_string()
}

#[test]
fn every_builtin_is_valid_and_is_the_shipped_file() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    for (name, text) in BUILTIN {
        let on_disk = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
        assert_eq!(*text, on_disk, "{name}: the compiled-in copy is stale");
        let spec = ScenarioSpec::builtin(name)
            .unwrap_or_else(|| panic!("{name}: {}", ScenarioSpec::parse(name, text).unwrap_err()));
        assert_eq!(spec.name, *name);
        assert_eq!(spec.origin, "built-in");
        assert_eq!(ScenarioSpec::resolve(name).unwrap(), spec);
    }
    // Every shipped file is a built-in.
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(
            BUILTIN.iter().any(|(n, _)| *n == stem),
            "{} is not compiled in",
            p.display()
        );
    }
}

#[test]
fn the_default_file_is_scenario_default_for() {
    let spec = ScenarioSpec::builtin("default").unwrap();
    assert_eq!(spec.file.transports, Transport::ALL.to_vec());
    for t in Transport::ALL {
        assert_eq!(
            format!("{:?}", spec.scenario(t)),
            format!("{:?}", Scenario::default_for(t)),
            "default.toml and Scenario::default_for differ for {}",
            t.name()
        );
    }
    let tiny = ScenarioSpec::builtin("tiny").unwrap();
    assert_eq!(
        format!("{:?}", tiny.scenario(Transport::Mrc)),
        format!("{:?}", Scenario::tiny(Transport::Mrc))
    );
}

#[test]
fn the_fidelity_scenario_is_what_issue_5_fixes() {
    let s = ScenarioSpec::builtin("permutation-1024")
        .unwrap()
        .scenario(Transport::Mrc);
    let f = s.fabric;
    assert_eq!(f.shape.hosts(), 1024);
    assert_eq!(
        (f.planes, f.host_link_bps, f.t1_link_bps, f.t2_link_bps),
        (1, 100e9 as u64, 100e9 as u64, 100e9 as u64)
    );
    assert_eq!(s.mtu_payload + mrc_sim::nic::HEADER_BYTES, 4150);
    assert_eq!(f.propagation.as_ns(), 1_000);
    assert!(f.switching_latency.is_zero());
    assert_eq!(f.queue.limit_bytes, 178_450);
    assert_eq!(f.queue.trim_bytes, Some(64));
    let e = f.queue.ecn.unwrap();
    assert_eq!((e.kmin_bytes, e.kmax_bytes), (37_350, 145_250));
    assert_eq!(s.workload.busiest_nic_bytes(1024), 2_000_000);
    assert!(s.failure.is_none());
    // Unloaded RTT ~14 us.
    assert!((13_000..15_000).contains(&s.base_rtt().as_ns()));
}

#[test]
fn unknown_key() {
    assert_eq!(
        err(&DEFAULT.replace("planes = 4", "planes = 4\nbogus = 1")),
        "s.toml: line 10: fabric.bogus: unknown key (expected one of `planes`, `host_link_bps`, \
         `t1_link_bps`, `t2_link_bps`, `propagation_ns`, `switching_latency_ns`, \
         `host_queue_bytes`, `reconvergence_us`, `loss_ppm`, `corrupt_ppm`, `shape`, `queue`, \
         `pfc`, `policy`)"
    );
    assert_eq!(
        err(&DEFAULT.replace("msg_bytes = 65_536", "msg_bytes = 65_536\nfoo = 1")),
        "s.toml: line 45: workload.foo: unknown key (expected `bytes_per_pair` or `msg_bytes`)"
    );
    assert_eq!(
        err(&DEFAULT.replace("kmin_bytes = 37_350", "kmin_bytes = 37_350, x = 1")),
        "s.toml: line 29: fabric.queue.ecn.x: unknown key (expected `kmin_bytes` or `kmax_bytes`)"
    );
}

/// `[nic.firmware]`: the cores, their clock and CPI; the retired `ns_per_event` says what
/// replaced it.
#[test]
fn firmware_keys() {
    // (the default file has no `[nic.firmware]` table: it is added at the end)
    let with = |body: &str| format!("{DEFAULT}\n[nic.firmware]\n{body}\n");
    let e = err(&with("cores = 2\nns_per_event = 500"));
    assert!(
        e.contains("nic.firmware.ns_per_event: no longer a key")
            && e.contains("cost table")
            && e.contains("`cores`, `clock_mhz` and `cpi`"),
        "{e}"
    );
    assert!(err(&with("cores = 0")).contains("nic.firmware.cores: must be 1..=64"));
    assert!(err(&with("clock_mhz = 0")).contains("nic.firmware.clock_mhz: must be 1..=10000"));
    assert!(err(&with("cpi = 0.1")).contains("cpi 0.1 is out of range 0.25..=16"));
    let spec =
        ScenarioSpec::parse("s.toml", &with("cores = 8\nclock_mhz = 1500\ncpi = 1.5")).unwrap();
    let f = spec.scenario(Transport::Mrc).firmware;
    assert_eq!(
        (f.cores, f.clock_mhz, f.cpi.get(), f.timed),
        (8, 1500, 1.5, true)
    );
    let spec = ScenarioSpec::parse("s.toml", &with("timed = false")).unwrap();
    assert_eq!(
        spec.scenario(Transport::Mrc).firmware,
        FirmwareConfig::UNTIMED
    );
    // Absent (the default run): the default cores, timed.
    assert!(!DEFAULT.contains("[nic.firmware]"));
    let spec = ScenarioSpec::parse("s.toml", DEFAULT).unwrap();
    assert_eq!(
        spec.scenario(Transport::Mrc).firmware,
        FirmwareConfig::DEFAULT
    );
}

/// `[nic.datapath]`: the level, and a planted bug only at the `rtl` level.
#[test]
fn datapath_keys() {
    let with = |body: &str| format!("{DEFAULT}\n[nic.datapath]\n{body}\n");
    let spec = ScenarioSpec::parse("s.toml", &with("level = \"rtl\"")).unwrap();
    assert_eq!(
        spec.scenario(Transport::Mrc).datapath,
        DatapathLevelConfig::at(DatapathLevel::Rtl)
    );
    let spec = ScenarioSpec::parse(
        "s.toml",
        &with("level = \"rtl\"\nplanted_bug = \"ev_sprayer\""),
    )
    .unwrap();
    assert_eq!(
        spec.scenario(Transport::Mrc).datapath.planted_bug,
        Some(RtlBlock::EvSprayer)
    );
    let e = err(&with("planted_bug = \"ev_sprayer\""));
    assert!(
        e.contains("nic.datapath.planted_bug") && e.contains("level = \"rtl\""),
        "{e}"
    );
    assert!(err(&with("level = \"gates\"")).contains("gates"));
    assert!(err(&with("planted_bug = \"hdr\"")).contains("hdr"));
    // Absent: the models.
    let spec = ScenarioSpec::parse("s.toml", DEFAULT).unwrap();
    assert_eq!(
        spec.scenario(Transport::Mrc).datapath,
        DatapathLevelConfig::default()
    );
}

#[test]
fn bad_values() {
    assert_eq!(
        err(&DEFAULT.replace("planes = 4", "planes = \"four\"")),
        "s.toml: line 9: fabric.planes: invalid type: string \"four\", expected u32"
    );
    assert_eq!(
        err(&DEFAULT.replace("planes = 4", "planes = -4")),
        "s.toml: line 9: fabric.planes: invalid value: integer `-4`, expected u32"
    );
    assert_eq!(
        err(&DEFAULT.replace("\"mrc-1ev\"", "\"mrc-2ev\"")),
        "s.toml: line 5: transports[1]: unknown variant `mrc-2ev`, expected one of `mrc`, \
         `mrc-1ev`, `roce-ecmp`, `spray-oblivious`"
    );
    assert_eq!(
        err(&DEFAULT.replace("kind = \"all-to-all\"", "kind = \"ring\"")),
        "s.toml: line 46: workload.kind: unknown variant `ring`, expected one of `permutation`, `all-to-all`, `ring-all-reduce`, `incast`"
    );
    assert_eq!(
        err(&DEFAULT.replace("planes = 4", "")),
        "s.toml: line 8: fabric.planes: missing key"
    );
    assert_eq!(
        err("seed = \n"),
        "s.toml: line 1: string values must be quoted, expected literal string"
    );
}

#[test]
fn out_of_range_values_name_the_key() {
    let cases = [
        ("planes = 4", "planes = 9", "s.toml: fabric.planes: must be 1..=8 (one NIC port per plane)"),
        ("radix = 16", "radix = 15", "s.toml: fabric.shape.radix: must be even, 2..=4096"),
        ("kmin_bytes = 37_350", "kmin_bytes = 245_250", "s.toml: fabric.queue.ecn: kmin_bytes must be below kmax_bytes"),
        ("t1_link = 0 ", "t1_link = 64 ", "s.toml: failure.t1_link: this fabric has 64 T0-T1 links per plane (0..=63)"),
        ("at_us = 40", "at_us = 4_000_000", "s.toml: failure.at_us: must be before time_limit_us"),
        ("mtu_bytes = 4_270", "mtu_bytes = 100", "s.toml: nic.mtu_bytes: must be 256..=9216 (the payload per packet is this minus the 174 B header bytes: headers, FCS, preamble and gap)"),
        ("reorder_tx = 4 ", "reorder_tx = 64 ", "s.toml: nic.reorder_tx: must be 1..=63 (a hole is judged only inside the ACK's 64-bit SACK bitmap)"),
        ("msg_bytes = 65_536", "msg_bytes = 0", "s.toml: workload.msg_bytes: must be > 0"),
        ("\"mrc-1ev\", ", "\"mrc\", ", "s.toml: transports: `mrc` is listed twice"),
        ("hosts = 64", "hosts = 1", "s.toml: fabric.shape: needs at least 2 hosts (every host sends to another)"),
    ];
    for (from, to, want) in cases {
        let text = DEFAULT.replace(from, to);
        assert_ne!(text, DEFAULT, "{from} not found");
        assert_eq!(err(&text), want);
    }
}

#[test]
fn empty_and_missing_files() {
    let empty = "s.toml: the file is empty (only blanks and comments; a scenario needs at least `description`, `seed`, \
                 `time_limit_us`, [fabric], [nic] and [workload])";
    assert_eq!(err(""), empty);
    assert_eq!(err("  \n# only a comment\n"), empty);
    let missing = std::env::temp_dir().join("mrc-sim-no-such-scenario.toml");
    let e = ScenarioSpec::resolve(missing.to_str().unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: cannot read the file: No such file or directory (os error 2)",
            missing.display()
        )
    );
    assert_eq!(
        ScenarioSpec::resolve("nope").unwrap_err().to_string(),
        "nope: no such scenario: not a .toml path and not a built-in name (default, \
         permutation-1024, tiny, ev-srv6, ev-udp, ev-stev, hil)"
    );
}

#[test]
fn an_observed_run_reports_what_run_reports() {
    let sc = ScenarioSpec::builtin("tiny")
        .unwrap()
        .scenario(Transport::Mrc);
    let plain = run(&sc).unwrap();
    let mut rec = output::Recorder::new(mrc_sim::core::time::Duration::from_us(2));
    let observed = run_observed(&sc, &mut rec).unwrap();
    assert_eq!(plain, observed);
    let s = &rec.series.samples;
    assert!(s.len() > 5);
    assert!(s
        .windows(2)
        .all(|w| w[0].at < w[1].at && w[0].placed_bytes <= w[1].placed_bytes));
    assert_eq!(s.last().unwrap().placed_bytes, plain.placed_bytes);
}

#[test]
fn same_seed_same_json() {
    let spec = ScenarioSpec::builtin("tiny").unwrap();
    let doc = || {
        let (outcomes, _) = output::run_all(&spec, None, false).unwrap();
        let mut d = json::document(&spec, &outcomes);
        d.as_object_mut().unwrap().remove("wall_clock");
        serde_json::to_string(&d).unwrap()
    };
    let a = doc();
    assert_eq!(a, doc());
    let mut other = spec.clone();
    other.file.seed = 2;
    let (o, _) = output::run_all(&other, None, false).unwrap();
    let mut d = json::document(&other, &o);
    d.as_object_mut().unwrap().remove("wall_clock");
    assert_ne!(
        a,
        serde_json::to_string(&d).unwrap(),
        "the seed changes nothing"
    );
}

#[test]
fn a_long_series_is_thinned_not_unbounded() {
    use mrc_sim::core::time::Duration;
    let sc = ScenarioSpec::builtin("tiny")
        .unwrap()
        .scenario(Transport::Mrc);
    let every = Duration::from_ns(10);
    let mut rec = output::Recorder::new(every);
    let r = run_observed(&sc, &mut rec).unwrap();
    let s = &rec.series.samples;
    assert!(s.len() <= output::MAX_SAMPLES + 1, "{} samples", s.len());
    assert!(s.len() > output::MAX_SAMPLES / 2);
    // The head at full resolution, then sparser, always in time order.
    let head = output::MAX_SAMPLES / 2;
    for (i, x) in s[..head].iter().enumerate() {
        assert_eq!(x.at.as_ps(), (i as u64 + 1) * every.as_ps());
    }
    assert!(s.windows(2).all(|w| w[0].at < w[1].at));
    // Past the head, the samples kept are more than one period apart (the last is the run's
    // end, wherever that falls).
    let (last, kept) = s.split_last().unwrap();
    let tail = &kept[head..];
    assert!(tail.len() >= 2);
    assert!(
        tail.windows(2)
            .all(|w| w[1].at.duration_since(w[0].at) > every),
        "never thinned"
    );
    assert_eq!(last.placed_bytes, r.placed_bytes);
}
