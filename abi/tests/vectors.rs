//! Byte-exact cross-check against vectors built independently with scapy from WIRE.md
//! (`abi/testdata/scapy_vectors.py`): every well-formed vector parses, decodes to the same field
//! values, and re-emits to the same bytes; every malformed one is refused.
#![cfg(feature = "std")]

use mrc_abi::json;
use mrc_abi::wire::Frame;
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/vectors.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    v["vectors"].as_array().expect("vectors array").clone()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Every key of `want` is in `got` with the same value (recursively for objects).
fn assert_subset(name: &str, path: &str, want: &Value, got: &Value) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                let gv = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{name}: decoder has no {p}; got {got}"));
                assert_subset(name, &p, wv, gv);
            }
        }
        _ => assert_eq!(want, got, "{name}: {path} differs"),
    }
}

#[test]
fn well_formed_vectors_decode_and_reemit_byte_exact() {
    let mut checked = 0;
    for v in vectors().iter().filter(|v| v["malformed"] == false) {
        let name = v["name"].as_str().unwrap();
        let bytes = hex(v["hex"].as_str().unwrap());
        let frame = Frame::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let decoded = json::decode(&bytes).unwrap();
        assert_subset(name, "", &v["fields"], &decoded);
        let mut out = vec![0u8; bytes.len() + 64];
        let n = frame.emit(&mut out).unwrap();
        assert_eq!(&out[..n], &bytes[..], "{name}: re-emitted bytes differ");
        checked += 1;
    }
    assert!(checked >= 70, "only {checked} well-formed vectors");
    println!("{checked} scapy vectors matched byte for byte");
}

#[test]
fn malformed_vectors_are_refused_with_a_reason() {
    let mut refused = 0;
    for v in vectors().iter().filter(|v| v["malformed"] == true) {
        let name = v["name"].as_str().unwrap();
        let bytes = hex(v["hex"].as_str().unwrap());
        let line = json::decode_line(7, &bytes);
        assert_eq!(line["index"], 7);
        if v["error"] == "reserved_nonzero" {
            // Reserved bits are ignored on receipt (InfiniBand rule): the frame parses, and
            // re-emitting clears them.
            let f = Frame::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut out = vec![0u8; bytes.len()];
            f.emit(&mut out).unwrap();
            assert_ne!(out, bytes, "{name}: reserved bits survived re-emit");
            continue;
        }
        let err = line["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: decoded: {line}"));
        assert!(!err.is_empty());
        refused += 1;
    }
    assert!(refused >= 8, "only {refused} malformed vectors refused");
}
