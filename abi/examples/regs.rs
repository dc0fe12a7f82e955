//! Writes the generated artifacts of mrc-abi at their repository paths:
//! `fpga-rtl/generated/mrc_abi_pkg.sv` and `abi/REGISTERS.md` (this is what `just regs` runs).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let abi = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = abi.parent().expect("abi/ has a parent").to_path_buf();
    let sv = root.join("fpga-rtl/generated/mrc_abi_pkg.sv");
    std::fs::create_dir_all(sv.parent().expect("has a parent"))?;
    std::fs::write(&sv, mrc_abi::gen::systemverilog())?;
    let md = abi.join("REGISTERS.md");
    std::fs::write(&md, mrc_abi::gen::registers_markdown())?;
    println!("wrote {}\nwrote {}", sv.display(), md.display());
    Ok(())
}
