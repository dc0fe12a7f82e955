//! Cross-check against Wireshark: tshark, with `abi/wireshark/mrc.lua` loaded and UDP checksum
//! checking on, must decode our sample frames without any expert info, and every field value it
//! shows must equal what the Rust decoder (`mrc_abi::json`) says.
//!
//! tshark is required in CI (`CI` set): there a missing tshark fails the test. Elsewhere the test
//! prints a skip message and passes without checking.
#![cfg(feature = "std")]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use mrc_abi::pcap::{Reader, Writer};
use mrc_abi::{json, wire};
use serde_json::Value;

const MRC_HEADERS: [&str; 9] = [
    "bth", "mrh", "evx", "tsx", "reth", "immdt", "ack", "nack", "probe",
];

fn tshark_available() -> bool {
    common::tool_or_skip("tshark", &["--version"], "apt-get install tshark")
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn frames_of(pcap: &Path) -> Vec<Vec<u8>> {
    let mut r = Reader::new(std::fs::File::open(pcap).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(f) = r.next_frame() {
        v.push(f.unwrap().1);
    }
    v
}

/// (tshark field, expected text) pairs for one decoded frame.
fn expected_fields(d: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| match v {
        Value::Bool(b) => u8::from(*b).to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = Vec::new();
    for h in MRC_HEADERS {
        if let Some(Value::Object(m)) = d.get(h) {
            for (k, v) in m {
                out.push((format!("mrc.{h}.{k}"), text(v)));
            }
        }
    }
    out.push(("mrc.payload_len".into(), text(&d["payload_len"])));
    out.push(("udp.srcport".into(), text(&d["udp"]["src_port"])));
    out.push(("udp.length".into(), text(&d["udp"]["length"])));
    let mut dsts = vec![text(&d["ipv6"]["dst"])];
    if let Some(inner) = d.get("inner_ipv6") {
        dsts.push(text(&inner["dst"]));
    }
    out.push(("ipv6.dst".into(), dsts.join(",")));
    if let Some(srh) = d.get("srh") {
        let segs: Vec<String> = srh["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(text)
            .collect();
        out.push(("ipv6.routing.srh.addr".into(), segs.join(",")));
        out.push(("ipv6.routing.segleft".into(), text(&srh["segments_left"])));
    }
    out
}

/// Run tshark over `pcap` and compare each frame the Rust decoder accepts. Returns the number of
/// field values compared.
fn cross_check(pcap: &Path, require_clean: bool) -> usize {
    let frames = frames_of(pcap);
    let decoded: Vec<Option<Value>> = frames.iter().map(|f| json::decode(f).ok()).collect();
    let expected: Vec<Option<Vec<(String, String)>>> = decoded
        .iter()
        .map(|d| d.as_ref().map(expected_fields))
        .collect();
    let names: BTreeSet<String> = expected
        .iter()
        .flatten()
        .flatten()
        .map(|(n, _)| n.clone())
        .collect();
    let names: Vec<String> = names.into_iter().collect();
    let lua = manifest().join("wireshark/mrc.lua");
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(pcap)
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()));
    cmd.args([
        "-o",
        "udp.check_checksum:TRUE",
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    cmd.args([
        "-e",
        "frame.number",
        "-e",
        "_ws.expert",
        "-e",
        "udp.checksum.status",
    ]);
    for n in &names {
        cmd.args(["-e", n]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        frames.len(),
        "tshark printed {} lines for {} frames",
        lines.len(),
        frames.len()
    );
    let mut compared = 0;
    for (i, line) in lines.iter().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        let Some(want) = &expected[i] else { continue };
        if require_clean {
            assert_eq!(
                cols[1],
                "",
                "frame {}: tshark expert info: {}",
                i + 1,
                cols[1]
            );
        }
        assert_eq!(
            cols[2],
            "1",
            "frame {}: tshark says the UDP checksum is not good",
            i + 1
        );
        for (name, value) in want {
            let col = 3 + names.iter().position(|n| n == name).unwrap();
            assert_eq!(
                cols[col],
                value,
                "frame {}: {name}: tshark shows {:?}, decoder {:?}",
                i + 1,
                cols[col],
                value
            );
            compared += 1;
        }
    }
    compared
}

#[test]
fn tshark_agrees_with_the_decoder_on_every_sample() {
    if !tshark_available() {
        return;
    }
    let path = std::env::temp_dir().join(format!("mrc-samples-{}.pcap", std::process::id()));
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let mut buf = [0u8; 2048];
    let mut n = 0;
    for (i, (_, f)) in wire::samples::all().enumerate() {
        let len = f.emit(&mut buf).unwrap();
        w.write(std::time::Duration::from_micros(i as u64), &buf[..len])
            .unwrap();
        n += 1;
    }
    drop(w);
    let compared = cross_check(&path, true);
    let _ = std::fs::remove_file(&path);
    assert!(
        compared > 20 * n,
        "only {compared} values compared over {n} frames"
    );
    println!("tshark matched the decoder on {n} sample frames, {compared} field values");
}

#[test]
fn tshark_agrees_with_the_decoder_on_the_scapy_vectors() {
    if !tshark_available() {
        return;
    }
    let compared = cross_check(&manifest().join("testdata/vectors.pcap"), false);
    assert!(compared > 1000, "only {compared} values compared");
    println!("tshark matched the decoder on the scapy vectors, {compared} field values");
}
