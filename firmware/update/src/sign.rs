//! Signing an image (no_std: the host tools and tests use it; the NIC core only verifies).

use ed25519_compact::{KeyPair, Noise, Seed};

use crate::crc32::crc32;
use crate::header::{ImageHeader, HEADER_LEN, SIGNED_HEADER_LEN};

/// Header fields chosen by the builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageMeta {
    /// Image version.
    pub image_version: u32,
    /// ABI major.
    pub abi_major: u16,
    /// ABI minor.
    pub abi_minor: u16,
    /// Link address of the body.
    pub load_addr: u32,
    /// Entry point.
    pub entry: u32,
}

impl ImageMeta {
    /// Version `image_version` for ABI `abi_major.0`, load address and entry 0.
    pub const fn new(image_version: u32, abi_major: u16) -> Self {
        ImageMeta {
            image_version,
            abi_major,
            abi_minor: 0,
            load_addr: 0,
            entry: 0,
        }
    }
}

/// The signed header for `body`, with the key of `seed` (deterministic: same input, same bytes).
/// Bodies of 4 GiB or more get `body_len = u32::MAX` and so never verify.
pub fn sign_header(body: &[u8], meta: &ImageMeta, seed: &[u8; 32]) -> [u8; HEADER_LEN] {
    let mut header = ImageHeader {
        image_version: meta.image_version,
        abi_major: meta.abi_major,
        abi_minor: meta.abi_minor,
        body_len: u32::try_from(body.len()).unwrap_or(u32::MAX),
        body_crc32: crc32(body),
        load_addr: meta.load_addr,
        entry: meta.entry,
        signature: [0; 64],
    };
    let kp = KeyPair::from_seed(Seed::new(*seed));
    let unsigned = header.emit();
    let mut st = kp.sk.sign_incremental(
        Noise::new([0; Noise::BYTES]), /* deterministic: same input, same image */
    );
    st.absorb(&unsigned[..SIGNED_HEADER_LEN]);
    st.absorb(body);
    header.signature = *st.sign();
    header.emit()
}
