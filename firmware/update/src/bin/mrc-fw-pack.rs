//! `mrc-fw-pack ELF OUT --version N [--abi MAJOR.MINOR]`: flatten an ELF into a signed image.
//!
//! Signs with the **test-only** key of `mrc_fw_update::test_key` unless `--seed-file` names a
//! 32-byte seed file.

use std::process::ExitCode;

use mrc_fw_update::pack::{flatten_elf, pack_image, ImageMeta};

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mrc-fw-pack ELF OUT --version N [--abi MAJOR.MINOR] [--seed-file F]";
    let mut pos = Vec::new();
    let mut version = None;
    let (mut abi_major, mut abi_minor) = (1u16, 0u16);
    let mut seed = mrc_fw_update::test_key::SEED;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--version" => {
                let v = it.next().ok_or(usage)?;
                version = Some(
                    v.parse::<u32>()
                        .map_err(|e| format!("--version {v}: {e}"))?,
                );
            }
            "--abi" => {
                let v = it.next().ok_or(usage)?;
                let (ma, mi) = v.split_once('.').ok_or("--abi wants MAJOR.MINOR")?;
                abi_major = ma.parse().map_err(|e| format!("--abi {v}: {e}"))?;
                abi_minor = mi.parse().map_err(|e| format!("--abi {v}: {e}"))?;
            }
            "--seed-file" => {
                let f = it.next().ok_or(usage)?;
                let b = std::fs::read(f).map_err(|e| format!("{f}: {e}"))?;
                seed = b
                    .try_into()
                    .map_err(|_| format!("{f}: seed must be 32 bytes"))?;
            }
            _ => pos.push(a.clone()),
        }
    }
    let [elf, out] = pos.as_slice() else {
        return Err(usage.into());
    };
    let version = version.ok_or(usage)?;
    let bytes = std::fs::read(elf).map_err(|e| format!("{elf}: {e}"))?;
    let (load_addr, entry, body) = flatten_elf(&bytes).map_err(|e| format!("{elf}: {e}"))?;
    let meta = ImageMeta {
        image_version: version,
        abi_major,
        abi_minor,
        load_addr,
        entry,
    };
    let image = pack_image(&body, &meta, &seed);
    std::fs::write(out, &image).map_err(|e| format!("{out}: {e}"))?;
    if seed == mrc_fw_update::test_key::SEED {
        eprintln!("warning: signed with the TEST-ONLY key");
    }
    println!(
        "{out}: {} bytes, version {version}, ABI {abi_major}.{abi_minor}, load {load_addr:#x}, entry {entry:#x}",
        image.len()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrc-fw-pack: {e}");
            ExitCode::FAILURE
        }
    }
}
