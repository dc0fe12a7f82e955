//! Write sample MRC frames to a pcap file, or decode a pcap file to JSON lines.
//!
//! ```text
//! cargo run -p mrc-abi --features std --example pcap -- samples OUT.pcap
//! cargo run -p mrc-abi --features std --example pcap -- decode IN.pcap
//! ```
//! `decode` prints one JSON object per packet: `index` and every decoded field, or `index` and
//! an `error` naming what is wrong; it goes on after a malformed packet.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

use mrc_abi::pcap::{Reader, Writer};
use mrc_abi::{json, wire};

const USAGE: &str = "usage: pcap samples OUT.pcap | pcap decode IN.pcap";

fn samples(path: &str) -> Result<(), String> {
    let file = File::create(path).map_err(|e| format!("cannot create {path}: {e}"))?;
    let mut w = Writer::new(BufWriter::new(file)).map_err(|e| format!("{path}: {e}"))?;
    let mut buf = [0u8; 2048];
    let mut n = 0;
    for (i, (name, frame)) in wire::samples::all().enumerate() {
        let len = frame
            .emit(&mut buf)
            .map_err(|e| format!("sample {name}: {e}"))?;
        w.write(Duration::from_micros(i as u64), &buf[..len])
            .map_err(|e| format!("{path}: {e}"))?;
        n += 1;
    }
    w.into_inner().flush().map_err(|e| format!("{path}: {e}"))?;
    eprintln!("wrote {n} frames to {path}");
    Ok(())
}

fn decode(path: &str) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    let mut r = Reader::new(BufReader::new(file)).map_err(|e| format!("{path}: {e}"))?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut index = 0;
    while let Some(item) = r.next_frame() {
        let (_, data) = item.map_err(|e| format!("{path}: packet {index}: {e}"))?;
        writeln!(out, "{}", json::decode_line(index, &data)).map_err(|e| format!("stdout: {e}"))?;
        index += 1;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [cmd, path] if cmd == "samples" => samples(path),
        [cmd, path] if cmd == "decode" => decode(path),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
