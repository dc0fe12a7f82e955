//! Wire decode: any bytes either parse into a frame that re-emits to the same length and parses
//! back equal, or are refused with an error. Never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc_abi::wire::Frame;

fuzz_target!(|data: &[u8]| {
    let _ = mrc_abi::json::decode_line(0, data);
    if let Ok(frame) = Frame::parse(data) {
        let mut out = vec![0u8; frame.buffer_len()];
        let n = frame.emit(&mut out).expect("a parsed frame must emit");
        assert_eq!(n, data.len(), "re-emitted length differs");
        assert_eq!(Frame::parse(&out[..n]).as_ref(), Ok(&frame), "re-parse differs");
    }
});
