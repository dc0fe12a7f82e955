//! Scenario files: any bytes, read as a scenario TOML, parse and validate to a scenario or a
//! `ScenarioError` naming the key. Never a panic. A scenario that validates also converts to
//! the run's configuration for each of its transports, and survives a TOML round trip
//! (serialised and parsed again, it is valid and equal).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc_sim::scenario::ScenarioSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = ScenarioSpec::parse("fuzz.toml", text) else {
        return;
    };
    for t in &spec.file.transports {
        let _ = spec.scenario(*t);
    }
    let again = toml::to_string(&spec.file).expect("a valid scenario serialises");
    let back = ScenarioSpec::parse("fuzz.toml", &again).expect("a serialised scenario parses");
    assert_eq!(back.file, spec.file, "round trip");
});
