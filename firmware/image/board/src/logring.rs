//! The log ring: bytes (defmt frames) the core appends and the host reads without stopping it.
//!
//! Layout (`#[repr(C)]`, little-endian, right after the crash record in `NOINIT`):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"MRCL"` |
//! | 4 | 4 | capacity `N` (a power of two) |
//! | 8 | 4 | `written`: bytes appended since the ring was created (wraps at 2^32) |
//! | 12 | N | data: byte `i` of the stream is at `data[i % N]` |
//!
//! The host keeps its own read position `r`: bytes `r..written` are available when
//! `written - r <= N`; otherwise the oldest `written - r - N` were overwritten and are reported
//! as lost ([`LogRing::read_from`]). The core only ever writes `data` before `written`.

/// Bytes in the image's ring.
pub const LOG_RING_BYTES: usize = 2048;
const MAGIC: u32 = u32::from_le_bytes(*b"MRCL");

/// A ring of `N` bytes (`N` a power of two).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct LogRing<const N: usize> {
    magic: u32,
    capacity: u32,
    written: u32,
    data: [u8; N],
}

/// What a read returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResult {
    /// Bytes copied into the buffer.
    pub copied: usize,
    /// Bytes overwritten before they could be read.
    pub lost: u32,
    /// The reader's next position.
    pub next: u32,
}

impl<const N: usize> Default for LogRing<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LogRing<N> {
    const POW2: () = assert!(N.is_power_of_two() && N <= 1 << 30);

    /// An empty ring.
    pub const fn new() -> Self {
        let () = Self::POW2;
        LogRing {
            magic: MAGIC,
            capacity: N as u32,
            written: 0,
            data: [0; N],
        }
    }

    /// Whether the header is intact (RAM after power-on holds garbage).
    pub fn is_valid(&self) -> bool {
        self.magic == MAGIC && self.capacity == N as u32
    }

    /// Keep the contents if the header is intact, else start empty. Call once at boot.
    pub fn recover(&mut self) {
        if !self.is_valid() {
            *self = Self::new();
        }
    }

    /// Bytes appended so far (mod 2^32).
    pub fn written(&self) -> u32 {
        self.written
    }

    /// Append `bytes`, overwriting the oldest.
    pub fn append(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.data[self.written as usize & (N - 1)] = b;
            self.written = self.written.wrapping_add(1);
        }
    }

    /// Copy the bytes from stream position `from` into `out` (the host side).
    pub fn read_from(&self, from: u32, out: &mut [u8]) -> ReadResult {
        let avail = self.written.wrapping_sub(from);
        let (start, lost) = if avail > N as u32 {
            (self.written.wrapping_sub(N as u32), avail - N as u32)
        } else {
            (from, 0)
        };
        let n = (self.written.wrapping_sub(start) as usize).min(out.len());
        for (i, o) in out.iter_mut().take(n).enumerate() {
            *o = self.data[start.wrapping_add(i as u32) as usize & (N - 1)];
        }
        ReadResult {
            copied: n,
            lost,
            next: start.wrapping_add(n as u32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_sees_everything_then_only_the_loss() {
        let mut r = LogRing::<8>::new();
        r.append(b"abc");
        let mut out = [0u8; 16];
        let x = r.read_from(0, &mut out);
        assert_eq!((&out[..x.copied], x.lost, x.next), (&b"abc"[..], 0, 3));
        r.append(b"defghijklm"); // 13 written, ring holds the last 8
        let x = r.read_from(3, &mut out);
        assert_eq!(
            (&out[..x.copied], x.lost, x.next),
            (&b"fghijklm"[..], 2, 13)
        );
        let x = r.read_from(13, &mut out);
        assert_eq!((x.copied, x.lost), (0, 0));
    }

    #[test]
    fn recover_keeps_an_intact_ring_and_resets_garbage() {
        let mut r = LogRing::<8>::new();
        r.append(b"xy");
        r.recover();
        assert_eq!(r.written(), 2);
        r.magic = 0xDEAD;
        r.recover();
        assert!(r.is_valid());
        assert_eq!(r.written(), 0);
    }

    #[test]
    fn writer_position_wraps() {
        let mut r = LogRing::<4>::new();
        r.written = u32::MAX - 1;
        r.append(b"abcd");
        let mut out = [0u8; 4];
        let x = r.read_from(u32::MAX - 1, &mut out);
        assert_eq!((&out[..], x.lost, x.next), (&b"abcd"[..], 0, 2));
    }
}
