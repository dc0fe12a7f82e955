//! The `mrc-sim` binary: exit codes, error messages, JSON fields, determinism, pcap decoded by
//! tshark with the project's dissector.
//!
//! tshark is required in CI (`CI` set); elsewhere the pcap cross-check prints a skip message and
//! passes without checking (the pattern of `abi/tests/common`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mrc-sim"))
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("mrc-sim-cli-{}-{name}", std::process::id()))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run mrc-sim")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn scenarios_lists_every_builtin() {
    let o = run(&["scenarios"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for name in ["default", "permutation-1024", "tiny"] {
        assert!(
            out.contains(&format!("  {name} ")),
            "{name} missing:\n{out}"
        );
    }
}

#[test]
fn errors_exit_2_with_a_message_and_no_panic() {
    let bad = tmp("bad.toml");
    std::fs::write(
        &bad,
        include_str!("../scenarios/tiny.toml").replace("planes = 2", "planes = 2\nplains = 3"),
    )
    .unwrap();
    let bad_s = bad.to_str().unwrap();
    let missing = tmp("missing.toml");
    let missing_s = missing.to_str().unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["run", "nope"],
            "mrc-sim: error: nope: no such scenario".into(),
        ),
        (
            vec!["run", missing_s],
            format!("mrc-sim: error: {missing_s}: cannot read the file: No such file"),
        ),
        (
            vec!["run", bad_s],
            format!("mrc-sim: error: {bad_s}: line 9: fabric.plains: unknown key"),
        ),
        (
            vec!["run", "tiny", "--transport", "foo"],
            "unknown transport `foo`".into(),
        ),
        (
            vec!["run", "tiny", "--seed", "x"],
            "invalid value 'x' for '--seed".into(),
        ),
        (
            vec!["run", "tiny", "--pcap-filter", "host=1"],
            "--pcap <OUT>".into(),
        ),
        (
            vec![
                "run",
                "tiny",
                "--pcap",
                "/dev/null",
                "--pcap-filter",
                "hots=1",
            ],
            "mrc-sim: error: pcap filter `hots=1`: unknown key `hots`".into(),
        ),
        (
            vec!["run", "tiny", "--reorder-tx", "0"],
            "nic.reorder_tx: must be 1..=63".into(),
        ),
        (
            vec!["run", "hil", "--elf", "/tmp/mrc-nic"],
            "names the image of the elf firmware level, but the firmware level is native \
             (add --firmware elf)"
                .into(),
        ),
        (
            vec!["bogus"],
            "mrc-sim: error: bogus: no such scenario".into(),
        ),
        (vec!["--bogus"], "unexpected argument '--bogus'".into()),
    ];
    for (args, want) in cases {
        let o = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&want), "{args:?}: stderr lacks {want:?}:\n{e}");
        assert!(!e.contains("panicked"), "{args:?} panicked: {e}");
    }
    let _ = std::fs::remove_file(bad);
}

fn json_of(args: &[&str], name: &str) -> Value {
    let out = tmp(name);
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["--json", out.to_str().unwrap()]);
    let o = run(&a);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let _ = std::fs::remove_file(out);
    v
}

#[test]
fn json_has_the_schema_fields_and_is_deterministic() {
    let a = json_of(&["run", "tiny", "--seed", "7"], "a.json");
    let p = &a["provenance"];
    assert_eq!(p["seed"], 7);
    assert_eq!(p["version"], env!("CARGO_PKG_VERSION"));
    assert!(p["git_commit"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(a["scenario"]["name"], "tiny");
    assert_eq!(a["scenario"]["config"]["fabric"]["planes"], 2);
    let ts = a["transports"].as_array().unwrap();
    let names: Vec<&str> = ts.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mrc", "mrc-1ev", "roce-ecmp", "spray-oblivious"]);
    for t in ts {
        assert!(t["error"].is_null(), "{}", t["name"]);
        assert!(t["completion_over_ideal"].as_f64().unwrap() >= 1.0);
        assert!(t["max_stall_us"].as_f64().is_some());
        for q in ["p50", "p99", "max"] {
            assert!(t["fct_us"][q].as_f64().unwrap() > 0.0, "{q}");
        }
        assert_eq!(t["flows_completed"], 8);
        assert!(t["drops"].is_object());
        // One hardware report per NIC of the MRC NIC model; RoCE runs its own model.
        let nics = t["nics"].as_array().unwrap();
        if t["name"] == "roce-ecmp" {
            assert!(nics.is_empty());
        } else {
            assert_eq!(nics.len(), 8, "{}", t["name"]);
            for key in [
                "host",
                "core_utilisation",
                "csr_queue_max_depth",
                "csr_backpressure",
                "rx_refused",
                "core_steps",
                "firmware_level",
                "firmware_faults",
                "pcie_tx_utilisation",
                "pcie_rx_utilisation",
                "doorbells",
                "dma_bytes",
                "datapath",
            ] {
                assert!(!nics[0][key].is_null(), "{}: nics[].{key}", t["name"]);
            }
            // Firmware time is on by default: the cores of every NIC that sent were busy, and
            // no core's CSR ring held more than its 32 entries.
            for n in nics {
                let u = n["core_utilisation"].as_f64().unwrap();
                assert!(u > 0.0 && u <= 1.0, "{}: core_utilisation {u}", t["name"]);
                let depth = n["csr_queue_max_depth"].as_u64().unwrap();
                assert!((1..=32).contains(&depth), "{}: depth {depth}", t["name"]);
            }
        }
    }
    // Same seed, same JSON (the wall clock aside).
    let mut b = json_of(&["run", "tiny", "--seed", "7"], "b.json");
    let mut a = a;
    a.as_object_mut().unwrap().remove("wall_clock");
    b.as_object_mut().unwrap().remove("wall_clock");
    assert_eq!(a, b);
}

#[test]
fn transport_and_svg_options() {
    let dir = tmp("svg");
    let o = run(&[
        "run",
        "tiny",
        "--transport",
        "mrc",
        "--svg",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let header = out
        .lines()
        .find(|l| l.trim_start().starts_with("transport "))
        .unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["transport", "mrc"]
    );
    for f in ["throughput.svg", "fct_cdf.svg"] {
        let s = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(s.starts_with("<svg") && s.contains("<polyline"), "{f}");
    }
    let _ = std::fs::remove_dir_all(dir);
    // The RoCE baseline alone (its own NIC model on a lossless fabric).
    let o = run(&["run", "tiny", "--transport", "roce-ecmp"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("roce-ecmp"));
}

fn tshark_or_skip() -> bool {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "tshark is required in CI but was not found (apt-get install tshark)"
        );
        eprintln!(
            "SKIPPED: tshark not found; install it (apt-get install tshark) to run this check"
        );
    }
    ok
}

fn tshark_fields(pcap: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../abi/wireshark/mrc.lua");
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(pcap)
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .args(["-o", "udp.check_checksum:TRUE", "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "tshark: {}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn pcap_frames_decode_in_tshark() {
    let out = tmp("cap.pcap");
    let o = run(&[
        "run",
        "tiny",
        "--transport",
        "mrc",
        "--pcap",
        out.to_str().unwrap(),
        "--pcap-filter",
        "host=3 psn=0..40",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("frames ->"));
    if !tshark_or_skip() {
        return;
    }
    let rows = tshark_fields(
        &out,
        &[
            "_ws.expert",
            "udp.checksum.status",
            "mrc.bth.psn",
            "mrc.payload_len",
            "ipv6.src",
            "ipv6.dst",
        ],
    );
    assert!(rows.len() > 40, "only {} frames", rows.len());
    let (mut data, mut control) = (0, 0);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r[0], "", "frame {}: expert info {}", i + 1, r[0]);
        assert_eq!(r[1], "1", "frame {}: UDP checksum not good", i + 1);
        let psn: u32 = r[2]
            .parse()
            .unwrap_or_else(|_| panic!("frame {}: no PSN: {r:?}", i + 1));
        let len: u32 = r[3].parse().unwrap();
        if len > 0 {
            data += 1;
            assert!(psn <= 40, "frame {}: PSN {psn} outside the filter", i + 1);
        } else {
            control += 1;
        }
        // Host 3 sends or receives every frame (its NIC address ends in ::3).
        let addrs: Vec<&str> = r[4].split(',').chain(r[5].split(',')).collect();
        assert!(
            addrs
                .iter()
                .any(|a| *a == "fd00::3" || *a == "fd00:0:0:1::3"),
            "frame {}: host 3 neither sends nor receives: {r:?}",
            i + 1
        );
    }
    assert!(data > 0 && control > 0, "data {data}, control {control}");
    let _ = std::fs::remove_file(out);
}
