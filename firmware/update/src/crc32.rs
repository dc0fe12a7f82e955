//! CRC-32 (IEEE 802.3, reflected, polynomial `0xEDB8_8320`, init and final XOR `0xFFFF_FFFF`),
//! the checksum of zlib, PNG and Ethernet: `crc32(b"123456789") == 0xCBF4_3926`.
//!
//! A 16-entry nibble table keeps the code small on the NIC core (64 bytes of table).

const TABLE: [u32; 16] = {
    let mut t = [0u32; 16];
    let mut i = 0;
    while i < 16 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 4 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// A running CRC-32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crc32 {
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A CRC over no bytes yet.
    pub const fn new() -> Self {
        Crc32 { state: 0xFFFF_FFFF }
    }

    /// Add `data`.
    pub fn update(&mut self, data: &[u8]) {
        let mut c = self.state;
        for &b in data {
            c ^= u32::from(b);
            c = (c >> 4) ^ TABLE[(c & 0xF) as usize];
            c = (c >> 4) ^ TABLE[(c & 0xF) as usize];
        }
        self.state = c;
    }

    /// The CRC of everything added so far.
    pub const fn finish(&self) -> u32 {
        self.state ^ 0xFFFF_FFFF
    }
}

/// The CRC-32 of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn chunking_does_not_matter() {
        let data: [u8; 300] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let mut c = Crc32::new();
        for part in data.chunks(17) {
            c.update(part);
        }
        assert_eq!(c.finish(), crc32(&data));
    }
}
