//! `mrc-defmt-dec ELF [STREAM]`: decode the defmt byte stream in STREAM (or stdin) with the
//! defmt table of ELF and print one line per record (`LEVEL message`).
//!
//! Exit status: 0 when the stream decoded cleanly, 2 on a decode error (malformed frame or
//! trailing partial frame), 1 on a usage or I/O error.
#![forbid(unsafe_code)]

use std::io::Read;
use std::process::ExitCode;

use defmt_decoder::{DecodeError, Encoding, Table};

/// Decode `stream` with the table of `elf`: the records as lines, or the first error.
fn decode(elf: &[u8], stream: &[u8]) -> Result<Vec<String>, String> {
    let table = Table::parse(elf)
        .map_err(|e| format!("defmt table: {e}"))?
        .ok_or("the ELF has no defmt table")?;
    // rzcobs ends every frame with a 0 byte: a stream ending otherwise was cut mid-frame (the
    // decoder itself would only report "need more bytes"). Raw streams have no delimiter.
    let cut =
        matches!(table.encoding(), Encoding::Rzcobs) && stream.last().is_some_and(|b| *b != 0);
    let mut dec = table.new_stream_decoder();
    dec.received(stream);
    let mut out = Vec::new();
    loop {
        match dec.decode() {
            Ok(frame) => {
                let level = frame.level().map_or("print", |l| l.as_str());
                out.push(format!(
                    "{} {}",
                    level.to_uppercase(),
                    frame.display_message()
                ));
            }
            Err(DecodeError::UnexpectedEof) if cut => {
                return Err(format!(
                    "the stream ends inside a defmt frame after {} records",
                    out.len()
                ))
            }
            Err(DecodeError::UnexpectedEof) => return Ok(out),
            Err(DecodeError::Malformed) => {
                return Err(format!("malformed defmt frame after {} records", out.len()))
            }
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (elf_path, stream_path) = match args.as_slice() {
        [e] => (e, None),
        [e, s] => (e, Some(s)),
        _ => {
            eprintln!("usage: mrc-defmt-dec ELF [STREAM]   (STREAM defaults to stdin)");
            return ExitCode::from(1);
        }
    };
    let elf = match std::fs::read(elf_path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mrc-defmt-dec: {elf_path}: {e}");
            return ExitCode::from(1);
        }
    };
    let stream = match stream_path {
        Some(p) => std::fs::read(p).map_err(|e| format!("{p}: {e}")),
        None => {
            let mut b = Vec::new();
            std::io::stdin()
                .read_to_end(&mut b)
                .map(|_| b)
                .map_err(|e| format!("stdin: {e}"))
        }
    };
    let stream = match stream {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mrc-defmt-dec: {e}");
            return ExitCode::from(1);
        }
    };
    match decode(&elf, &stream) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mrc-defmt-dec: {e}");
            ExitCode::from(2)
        }
    }
}
