//! Engine input sequences: arbitrary bytes decoded into engine operations (posts, packets in,
//! timeouts, plane events, QP transitions) never panic and never break the stated invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(v) = mrc_firmware::testkit::fuzz_ops::run_ops(data) {
        panic!("engine invariant broken: {v:?}");
    }
});
