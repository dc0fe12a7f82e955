//! Host side: build and sign images.

pub use crate::sign::{sign_header, ImageMeta};

/// Header + body, signed with the key of `seed`.
pub fn pack_image(body: &[u8], meta: &ImageMeta, seed: &[u8; 32]) -> Vec<u8> {
    let mut out = sign_header(body, meta, seed).to_vec();
    out.extend_from_slice(body);
    out
}

/// A flat body from an ELF: the `PT_LOAD` segments laid out from the lowest physical address,
/// gaps filled with `0xFF` (erased flash). Returns (load address, entry, body).
///
/// # Errors
/// The ELF parser's message, or "no loadable segment".
pub fn flatten_elf(elf: &[u8]) -> Result<(u32, u32, Vec<u8>), String> {
    use object::read::elf::{ElfFile32, ProgramHeader};
    use object::Object;
    let file = ElfFile32::<object::Endianness>::parse(elf).map_err(|e| e.to_string())?;
    let endian = file.endian();
    let mut segs = Vec::new();
    for ph in file.elf_program_headers() {
        if ph.p_type(endian) != object::elf::PT_LOAD || ph.p_filesz(endian) == 0 {
            continue;
        }
        let data = ph
            .data(endian, elf)
            .map_err(|()| "segment out of file".to_string())?;
        segs.push((ph.p_paddr(endian), data));
    }
    let base = segs
        .iter()
        .map(|s| s.0)
        .min()
        .ok_or("no loadable segment")?;
    let mut body = Vec::new();
    for (addr, data) in segs {
        let at = (addr - base) as usize;
        if body.len() < at + data.len() {
            body.resize(at + data.len(), 0xFF);
        }
        body[at..at + data.len()].copy_from_slice(data);
    }
    let entry = u32::try_from(file.entry()).map_err(|e| e.to_string())?;
    Ok((base, entry, body))
}
