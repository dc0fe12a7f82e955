//! The Internet checksum (RFC 1071) and the IPv6 pseudo-header (RFC 8200 §8.1).

use core::net::Ipv6Addr;

/// One's-complement sum of `data` as big-endian 16-bit words, folded to 32 bits, starting at
/// `acc`. An odd trailing byte is padded with zero.
pub(crate) fn sum_words(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
        // Fold early so the accumulator never overflows, whatever the length.
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Sum of the IPv6 pseudo-header for an upper-layer packet of `len` bytes with protocol `proto`.
pub fn pseudo_header_sum(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, len: u32) -> u32 {
    let mut acc = sum_words(0, &src.octets());
    acc = sum_words(acc, &dst.octets());
    acc = sum_words(acc, &len.to_be_bytes());
    sum_words(acc, &[0, 0, 0, proto])
}

/// The UDP checksum of `udp` (header with its checksum field zeroed or not: the field's bytes at
/// offset 6..8 are skipped) under the IPv6 pseudo-header of `src`/`dst`. Never returns 0: a
/// computed zero is sent as 0xffff (RFC 768).
pub fn udp_checksum(src: Ipv6Addr, dst: Ipv6Addr, udp: &[u8]) -> u16 {
    let acc = pseudo_header_sum(src, dst, super::IP_PROTO_UDP, udp.len() as u32);
    let head = udp.get(..6).unwrap_or(udp);
    let tail = udp.get(8..).unwrap_or(&[]);
    let acc = sum_words(sum_words(acc, head), tail);
    match !fold(acc) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_words(0, &d)), 0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum_words(0, &[0x12, 0x34, 0x56])), 0x1234 + 0x5600);
    }
}
