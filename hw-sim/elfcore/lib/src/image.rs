//! The NIC image as a flash programmer sees it: the ELF's loadable segments at their load
//! addresses, checked against the NIC memory map, and the entry point.

use object::elf::{FileHeader32, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

use crate::map::NicMap;
use crate::ElfError;

/// One loadable segment: bytes to place at `addr` (the load address; the runtime copies
/// `.data` from there to its run address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Load (physical) address.
    pub addr: u32,
    /// The file bytes (`p_filesz`; the rest of `p_memsz` is zero, as reset RAM is here).
    pub bytes: Vec<u8>,
}

/// A checked NIC image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicImage {
    /// Where the core starts.
    pub entry: u32,
    /// Loadable segments with file bytes, in file order.
    pub segments: Vec<Segment>,
}

impl NicImage {
    /// Reads an ELF: 32-bit little-endian RISC-V, every loadable segment inside the ITCM or
    /// the DTCM of `map`, the entry point inside the ITCM.
    ///
    /// # Errors
    /// [`ElfError::Elf`] naming what is wrong.
    pub fn parse(elf: &[u8], map: &NicMap) -> Result<NicImage, ElfError> {
        let bad = |why: String| ElfError::Elf(why);
        let hdr = FileHeader32::<Endianness>::parse(elf)
            .map_err(|e| bad(format!("not a 32-bit ELF: {e}")))?;
        let endian = hdr
            .endian()
            .map_err(|e| bad(format!("ELF byte order: {e}")))?;
        if endian != Endianness::Little {
            return Err(bad("big-endian ELF (the core is little-endian)".into()));
        }
        if hdr.e_machine(endian) != object::elf::EM_RISCV {
            return Err(bad(format!(
                "machine {} is not RISC-V ({})",
                hdr.e_machine(endian),
                object::elf::EM_RISCV
            )));
        }
        let entry = hdr.e_entry(endian);
        if !map.itcm.holds(entry, 2) {
            return Err(bad(format!("entry {entry:#x} is outside the ITCM")));
        }
        let phs = hdr
            .program_headers(endian, elf)
            .map_err(|e| bad(format!("program headers: {e}")))?;
        let mut segments = Vec::new();
        for ph in phs {
            if ph.p_type(endian) != PT_LOAD || ph.p_filesz(endian) == 0 {
                continue;
            }
            let addr = ph.p_paddr(endian);
            let bytes = ph
                .data(endian, elf)
                .map_err(|_| bad(format!("segment at {addr:#x} runs past the file")))?;
            let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            if !(map.itcm.holds(addr, len) || map.dtcm.holds(addr, len)) {
                return Err(bad(format!(
                    "segment [{addr:#x}, +{len:#x}) lies outside the ITCM and the DTCM"
                )));
            }
            segments.push(Segment {
                addr,
                bytes: bytes.to_vec(),
            });
        }
        if segments.is_empty() {
            return Err(bad("no loadable segment".into()));
        }
        Ok(NicImage { entry, segments })
    }

    /// A flat image (`body` linked at `load`, starting at `entry`: a flash slot's image as
    /// `mrc-fw-pack` lays it out), checked against the NIC memory as [`NicImage::parse`]
    /// checks an ELF.
    ///
    /// # Errors
    /// The body or the entry lies outside the core's memories.
    pub fn flat(load: u32, entry: u32, body: &[u8], map: &NicMap) -> Result<NicImage, ElfError> {
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        if !(map.itcm.holds(load, len) || map.dtcm.holds(load, len)) {
            return Err(ElfError::Elf(format!(
                "image body [{load:#x}, +{len:#x}) lies outside the ITCM and the DTCM"
            )));
        }
        if !map.itcm.holds(entry, 2) {
            return Err(ElfError::Elf(format!(
                "entry {entry:#x} is outside the ITCM"
            )));
        }
        Ok(NicImage {
            entry,
            segments: vec![Segment {
                addr: load,
                bytes: body.to_vec(),
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_nic_image_is_refused_with_its_reason() {
        let map = NicMap::nic().unwrap();
        let e = NicImage::parse(b"not an elf", &map).unwrap_err();
        assert!(
            matches!(&e, ElfError::Elf(w) if w.starts_with("not a 32-bit ELF")),
            "{e}"
        );
        // A 32-bit little-endian ELF header for x86 (EM_386), no program headers.
        let mut h = vec![0u8; 52];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 1; // ELFCLASS32
        h[5] = 1; // little-endian
        h[6] = 1; // version
        h[18] = 3; // EM_386
        h[20] = 1;
        h[40] = 52; // e_ehsize
        let e = NicImage::parse(&h, &map).unwrap_err();
        assert!(
            matches!(&e, ElfError::Elf(w) if w.contains("not RISC-V")),
            "{e}"
        );
        // RISC-V, entry outside the ITCM.
        h[18] = object::elf::EM_RISCV as u8;
        h[24..28].copy_from_slice(&0x2000_0000u32.to_le_bytes());
        let e = NicImage::parse(&h, &map).unwrap_err();
        assert!(
            matches!(&e, ElfError::Elf(w) if w.contains("outside the ITCM")),
            "{e}"
        );
        // Entry fine, no loadable segment.
        h[24..28].copy_from_slice(&0u32.to_le_bytes());
        let e = NicImage::parse(&h, &map).unwrap_err();
        assert_eq!(e, ElfError::Elf("no loadable segment".into()));
    }
}
