//! What the guest DMAs through the QEMU `edu` device and how it is hashed: one source for the
//! guest test binary (`examples/vfio_edu.rs`) and the host test (`tests/vfio_qemu.rs`), both of
//! which include this file with `#[path]`.
//!
//! The pattern is a splitmix64 stream seeded by the host's nonce, so a guest that echoes the
//! nonce without moving the data cannot produce the expected hash. The hash is FNV-1a 64: a
//! checksum both sides compute, not a cryptographic claim.

/// Bytes moved each way: the whole of edu's DMA buffer.
pub const EDU_DMA_BYTES: usize = 4096;

/// splitmix64: the next state and output.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The [`EDU_DMA_BYTES`]-byte pattern for `nonce`.
pub fn pattern(nonce: u64) -> Vec<u8> {
    let mut state = nonce;
    let mut out = Vec::with_capacity(EDU_DMA_BYTES);
    while out.len() < EDU_DMA_BYTES {
        out.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    out.truncate(EDU_DMA_BYTES);
    out
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The line the guest prints on success; the host looks for exactly this.
pub fn result_line(nonce: u64, hash: u64) -> String {
    format!("NONCE={nonce:016x} HASH={hash:016x}")
}
