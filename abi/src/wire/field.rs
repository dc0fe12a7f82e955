//! Big-endian field access on byte slices. Callers index only after a length check.

#[inline]
pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}
#[inline]
pub(crate) fn u24_at(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([0, b[off], b[off + 1], b[off + 2]])
}
#[inline]
pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
#[inline]
pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}
#[inline]
pub(crate) fn addr_at(b: &[u8], off: usize) -> core::net::Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[off..off + 16]);
    core::net::Ipv6Addr::from(a)
}
#[inline]
pub(crate) fn set_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn set_u24(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}
#[inline]
pub(crate) fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn set_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn set_addr(b: &mut [u8], off: usize, a: core::net::Ipv6Addr) {
    b[off..off + 16].copy_from_slice(&a.octets());
}

/// `Ok(())` when `buf` holds at least `need` bytes, else a truncation error naming `header`.
#[inline]
pub(crate) fn need(buf: &[u8], need: usize, header: super::Header) -> Result<(), super::Error> {
    if buf.len() < need {
        Err(super::Error::Truncated {
            header,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}
