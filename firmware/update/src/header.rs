//! The image header: 128 bytes, little-endian, at offset 0 of an image; the body follows.
//!
//! | offset | size | field | rule |
//! |---|---|---|---|
//! | 0 | 4 | magic | `b"MRCF"` |
//! | 4 | 2 | header_version | 1 |
//! | 6 | 2 | header_len | 128 |
//! | 8 | 4 | image_version | any; shown by `mrcctl fw status` |
//! | 12 | 2 | abi_major | must equal the device's ABI major |
//! | 14 | 2 | abi_minor | informational |
//! | 16 | 4 | body_len | body bytes after the header, `<= slot capacity - 128` |
//! | 20 | 4 | body_crc32 | CRC-32 (IEEE) of the body |
//! | 24 | 4 | load_addr | where the body is linked |
//! | 28 | 4 | entry | entry point |
//! | 32 | 32 | reserved | zero |
//! | 64 | 64 | signature | Ed25519 over `header[0..64] ‖ body` |
//!
//! The signed bytes (`header[0..64]` then the body) are contiguous except for the signature, so
//! a verifier streams them from flash without a copy.

/// `b"MRCF"`.
pub const MAGIC: [u8; 4] = *b"MRCF";
/// The header layout version this crate reads and writes.
pub const HEADER_VERSION: u16 = 1;
/// Header size in bytes.
pub const HEADER_LEN: usize = 128;
/// Bytes of the header covered by the signature.
pub const SIGNED_HEADER_LEN: usize = 64;
/// Ed25519 signature size.
pub const SIGNATURE_LEN: usize = 64;

/// A parsed image header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ImageHeader {
    /// Image version.
    pub image_version: u32,
    /// ABI major version the image implements.
    pub abi_major: u16,
    /// ABI minor version the image implements.
    pub abi_minor: u16,
    /// Body length in bytes.
    pub body_len: u32,
    /// CRC-32 of the body.
    pub body_crc32: u32,
    /// Link address of the body.
    pub load_addr: u32,
    /// Entry point.
    pub entry: u32,
    /// Ed25519 signature over `header[0..64] ‖ body`.
    pub signature: [u8; SIGNATURE_LEN],
}

/// Why a header was refused (before the body is looked at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HeaderError {
    /// Fewer than 128 bytes.
    Short {
        /// Bytes available.
        len: u32,
    },
    /// The first four bytes are not `MRCF`.
    BadMagic {
        /// What was found.
        found: [u8; 4],
    },
    /// A header layout this firmware does not know.
    UnsupportedHeaderVersion {
        /// The version found.
        version: u16,
        /// The header length found.
        header_len: u16,
    },
    /// Reserved bytes are not zero.
    ReservedNonZero,
}

fn u16_at(b: &[u8; HEADER_LEN], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8; HEADER_LEN], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl ImageHeader {
    /// Parse the first 128 bytes of `bytes`.
    ///
    /// # Errors
    /// A [`HeaderError`] naming the first field that is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderError> {
        let Some(b) = bytes.get(..HEADER_LEN) else {
            return Err(HeaderError::Short {
                len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            });
        };
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(b);
        let found = [h[0], h[1], h[2], h[3]];
        if found != MAGIC {
            return Err(HeaderError::BadMagic { found });
        }
        let version = u16_at(&h, 4);
        let header_len = u16_at(&h, 6);
        if version != HEADER_VERSION || usize::from(header_len) != HEADER_LEN {
            return Err(HeaderError::UnsupportedHeaderVersion {
                version,
                header_len,
            });
        }
        if h[32..64].iter().any(|&x| x != 0) {
            return Err(HeaderError::ReservedNonZero);
        }
        let mut signature = [0u8; SIGNATURE_LEN];
        signature.copy_from_slice(&h[64..128]);
        Ok(ImageHeader {
            image_version: u32_at(&h, 8),
            abi_major: u16_at(&h, 12),
            abi_minor: u16_at(&h, 14),
            body_len: u32_at(&h, 16),
            body_crc32: u32_at(&h, 20),
            load_addr: u32_at(&h, 24),
            entry: u32_at(&h, 28),
            signature,
        })
    }

    /// The 128 header bytes.
    pub fn emit(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC);
        h[4..6].copy_from_slice(&HEADER_VERSION.to_le_bytes());
        h[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        h[8..12].copy_from_slice(&self.image_version.to_le_bytes());
        h[12..14].copy_from_slice(&self.abi_major.to_le_bytes());
        h[14..16].copy_from_slice(&self.abi_minor.to_le_bytes());
        h[16..20].copy_from_slice(&self.body_len.to_le_bytes());
        h[20..24].copy_from_slice(&self.body_crc32.to_le_bytes());
        h[24..28].copy_from_slice(&self.load_addr.to_le_bytes());
        h[28..32].copy_from_slice(&self.entry.to_le_bytes());
        h[64..128].copy_from_slice(&self.signature);
        h
    }

    /// Total image length, header included (saturating).
    pub fn image_len(&self) -> u32 {
        self.body_len.saturating_add(HEADER_LEN as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ImageHeader {
        ImageHeader {
            image_version: 0x0102_0304,
            abi_major: 1,
            abi_minor: 2,
            body_len: 1000,
            body_crc32: 0xDEAD_BEEF,
            load_addr: 0x2000_0000,
            entry: 0x2000_0000,
            signature: [7; 64],
        }
    }

    #[test]
    fn round_trip_and_byte_layout() {
        let h = sample();
        let b = h.emit();
        assert_eq!(&b[0..4], b"MRCF");
        assert_eq!(&b[4..8], &[1, 0, 128, 0]);
        assert_eq!(&b[16..20], &1000u32.to_le_bytes());
        assert_eq!(ImageHeader::parse(&b), Ok(h));
    }

    #[test]
    fn each_bad_field_is_named() {
        let b = sample().emit();
        assert_eq!(
            ImageHeader::parse(&b[..100]),
            Err(HeaderError::Short { len: 100 })
        );
        let mut m = b;
        m[0] = b'X';
        assert_eq!(
            ImageHeader::parse(&m),
            Err(HeaderError::BadMagic { found: *b"XRCF" })
        );
        let mut v = b;
        v[4] = 2;
        assert_eq!(
            ImageHeader::parse(&v),
            Err(HeaderError::UnsupportedHeaderVersion {
                version: 2,
                header_len: 128
            })
        );
        let mut r = b;
        r[40] = 1;
        assert_eq!(ImageHeader::parse(&r), Err(HeaderError::ReservedNonZero));
    }
}
