//! Runs the mrcctl binary: error cases exit 2 with a message naming the address; the simulator
//! answers every command; `--json` prints only JSON.

mod common;
use common::{json, mrcctl};

#[test]
fn malformed_address_exits_2_naming_it() {
    let o = mrcctl(&["--dev", "0000:zz:04.0", "info"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("0000:zz:04.0") && e.contains("malformed"), "{e}");
    let o = mrcctl(&["bind", "12:34"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("12:34"));
}

#[test]
fn missing_device_exits_2_naming_it() {
    for args in [
        ["--dev", "abcd:ee:1f.7", "info"],
        ["--dev", "abcd:ee:1f.7", "stats"],
    ] {
        let o = mrcctl(&args);
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("abcd:ee:1f.7"), "{e}");
        assert!(o.stdout.is_empty());
    }
    let o = mrcctl(&["unbind", "abcd:ee:1f.7"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no PCI device at abcd:ee:1f.7"));
    let o = mrcctl(&["info"]);
    assert_eq!(o.status.code(), Some(2), "no device given");
    let o = mrcctl(&["--sim", "nosuch", "info"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn sim_perf_json_has_gbps() {
    let v = json(&mrcctl(&[
        "--sim", "default", "--json", "perf", "write-bw", "--size", "512,4096", "--iters", "64",
        "--qps", "2",
    ]));
    // Timed in the simulator's virtual time: the simulated NICs' and fabric's figures, never
    // above the NIC's line rate (4 ports of 200 Gb/s), and the same on every run.
    assert_eq!(v["clock"], "virtual", "{v}");
    let gbps = v["gbps"].as_f64().unwrap();
    assert!(gbps > 0.0 && gbps < 800.0, "{v}");
    assert_eq!(v["results"].as_array().unwrap().len(), 2);
    let again = json(&mrcctl(&[
        "--sim", "default", "--json", "perf", "write-bw", "--size", "512,4096", "--iters", "64",
        "--qps", "2",
    ]));
    assert_eq!(
        v, again,
        "virtual time: the same run gives the same figures"
    );
    let v = json(&mrcctl(&[
        "--sim",
        "default",
        "--json",
        "perf",
        "write-lat",
        "--iters",
        "50",
    ]));
    assert_eq!(v["clock"], "virtual", "{v}");
    assert!(v["gbps"].is_number());
    let p50 = v["results"][0]["lat_us_p50"].as_f64().unwrap();
    // A write and its immediate cross the fabric (two leaves apart: four links of 0.5 us) and
    // both NICs' PCIe links: more than a microsecond of virtual time.
    assert!(p50 > 1.0, "{v}");
    assert!(v["results"][0]["lat_us_p99"].as_f64().unwrap() >= p50);
}

#[test]
fn sim_answers_every_command() {
    let v = json(&mrcctl(&["--sim", "default", "--json", "info"]));
    assert_eq!(v["bdf"], "0000:00:04.0");
    let v = json(&mrcctl(&["--sim", "default", "--json", "list"]));
    assert_eq!(v["devices"].as_array().unwrap().len(), 2);
    let v = json(&mrcctl(&["--sim", "default", "--json", "stats"]));
    assert_eq!(v["ports"].as_array().unwrap().len(), 4);
    let v = json(&mrcctl(&[
        "--sim", "default", "--json", "ev", "show", "--count", "4",
    ]));
    assert_eq!(v["evs"].as_array().unwrap().len(), 4);
    let v = json(&mrcctl(&[
        "--sim", "default", "--json", "ev", "deny", "--index", "3",
    ]));
    assert_eq!(v["evs"][3]["state"], "Denied");
    let v = json(&mrcctl(&[
        "--sim", "default", "--json", "ev", "allow", "--index", "3",
    ]));
    assert_eq!(v["evs"][3]["state"], "Good");
    let v = json(&mrcctl(&[
        "--sim",
        "default",
        "--json",
        "ev",
        "generate",
        "--dst",
        "100",
        "--num",
        "128",
        "--install",
    ]));
    assert_eq!(v["evs"].as_array().unwrap().len(), 128);
    assert!(v["profile"].is_number());
    let v = json(&mrcctl(&["--sim", "default", "--json", "profile", "nscc"]));
    assert!(v["id"].is_number());
    let v = json(&mrcctl(&[
        "--sim",
        "default",
        "--json",
        "bind",
        "0000:00:04.0",
    ]));
    assert_eq!(v["simulated"], true);
}
