//! The Segment Routing Header (RFC 8754): IPv6 routing header type 4.
//!
//! The segment list is stored in reverse: `List[0]` is the final segment and
//! `List[Last Entry]` the first; the active segment is `List[Segments Left]`. TLVs after the
//! list are skipped by their length (Pad1 is a single zero byte). Any IPv6 addresses decode,
//! uSID carriers or not.

use super::field::{addr_at, need, set_addr, set_u16, u16_at};
use super::{Error, Header};
use core::net::Ipv6Addr;

/// Length of the SRH before the segment list.
pub const FIXED_LEN: usize = 8;
/// Routing type of the SRH.
pub const ROUTING_TYPE_SRH: u8 = 4;
/// Bytes of one segment-list entry (an IPv6 address).
pub const SEGMENT_LEN: usize = 16;
/// Most segments an [`SrhRepr`] holds.
pub const MAX_SEGMENTS: usize = 16;
/// Most TLV bytes an [`SrhRepr`] holds.
pub const MAX_TLV_BYTES: usize = 64;
/// TLV type of Pad1 (a single byte, no length).
pub const TLV_PAD1: u8 = 0;
/// TLV type of PadN.
pub const TLV_PADN: u8 = 4;

/// A view of an SRH at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct SrhPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SrhPacket<T> {
    /// Wrap without checking (see the module's panic contract).
    pub const fn new_unchecked(buffer: T) -> Self {
        SrhPacket { buffer }
    }
    /// Wrap after checking that the whole header its Hdr Ext Len announces is present and that
    /// the segment list fits inside it.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        need(b, FIXED_LEN, Header::Srh)?;
        let p = SrhPacket { buffer };
        need(p.buffer.as_ref(), p.header_len(), Header::Srh)?;
        if FIXED_LEN + SEGMENT_LEN * p.segment_count() > p.header_len() {
            return Err(Error::SrhSegmentListOverrun {
                last_entry: p.last_entry(),
                hdr_ext_len: p.hdr_ext_len(),
            });
        }
        Ok(p)
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }
    /// Hdr Ext Len, in 8-octet units not counting the first 8 octets.
    pub fn hdr_ext_len(&self) -> u8 {
        self.buffer.as_ref()[1]
    }
    /// Total header length in bytes.
    pub fn header_len(&self) -> usize {
        FIXED_LEN + 8 * usize::from(self.hdr_ext_len())
    }
    /// Routing type (4 for an SRH).
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }
    /// Segments Left.
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }
    /// Last Entry: index of the first segment of the path.
    pub fn last_entry(&self) -> u8 {
        self.buffer.as_ref()[4]
    }
    /// Number of entries in the segment list.
    pub fn segment_count(&self) -> usize {
        usize::from(self.last_entry()) + 1
    }
    /// Flags.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[5]
    }
    /// Tag.
    pub fn tag(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 6)
    }
    /// `List[i]` in wire order (`List[0]` is the final segment); `None` past Last Entry.
    pub fn segment(&self, i: usize) -> Option<Ipv6Addr> {
        (i < self.segment_count())
            .then(|| addr_at(self.buffer.as_ref(), FIXED_LEN + SEGMENT_LEN * i))
    }
    /// The TLV bytes after the segment list.
    pub fn tlvs(&self) -> &[u8] {
        &self.buffer.as_ref()[FIXED_LEN + SEGMENT_LEN * self.segment_count()..self.header_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SrhPacket<T> {
    /// Set Segments Left (what a segment endpoint decrements).
    pub fn set_segments_left(&mut self, sl: u8) {
        self.buffer.as_mut()[3] = sl;
    }
}

/// Check that `tlvs` is a well-formed TLV sequence (Pad1 single bytes, others skipped by
/// length) that ends exactly at its end. `base` is the offset of `tlvs` in the SRH, for errors.
fn check_tlvs(tlvs: &[u8], base: usize) -> Result<(), Error> {
    let mut off = 0;
    while off < tlvs.len() {
        if tlvs[off] == TLV_PAD1 {
            off += 1;
            continue;
        }
        let Some(&len) = tlvs.get(off + 1) else {
            return Err(Error::SrhBadTlv { offset: base + off });
        };
        let end = off + 2 + usize::from(len);
        if end > tlvs.len() {
            return Err(Error::SrhBadTlv { offset: base + off });
        }
        off = end;
    }
    Ok(())
}

/// The meaning of an SRH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrhRepr {
    /// Next header after the SRH (41 for MRC).
    pub next_header: u8,
    /// Segments Left.
    pub segments_left: u8,
    /// Flags.
    pub flags: u8,
    /// Tag.
    pub tag: u16,
    /// The segment list in wire order (`segments[0]` is the final segment).
    pub segments: heapless::Vec<Ipv6Addr, MAX_SEGMENTS>,
    /// Raw TLV bytes after the segment list, well formed. `emit` pads them to a multiple of 8
    /// bytes with Pad1/PadN.
    pub tlvs: heapless::Vec<u8, MAX_TLV_BYTES>,
}

impl SrhRepr {
    /// An SRH for a path given in travel order (`path[0]` is visited first). Segments Left is
    /// set to point at the first segment. Errors when the path is empty or too long.
    pub fn from_path(next_header: u8, path: &[Ipv6Addr]) -> Result<Self, Error> {
        if path.is_empty() || path.len() > MAX_SEGMENTS {
            return Err(Error::SrhTooLarge {
                segments: path.len(),
                tlv_bytes: 0,
            });
        }
        let mut segments = heapless::Vec::new();
        for a in path.iter().rev() {
            // Cannot fail: the length was checked above.
            let _ = segments.push(*a);
        }
        Ok(SrhRepr {
            next_header,
            segments_left: (path.len() - 1) as u8,
            flags: 0,
            tag: 0,
            segments,
            tlvs: heapless::Vec::new(),
        })
    }

    /// Parse and validate: routing type 4, Segments Left <= Last Entry, TLVs well formed, and
    /// within this implementation's capacities.
    pub fn parse<T: AsRef<[u8]>>(p: &SrhPacket<T>) -> Result<Self, Error> {
        if p.routing_type() != ROUTING_TYPE_SRH {
            return Err(Error::BadRoutingType(p.routing_type()));
        }
        if p.segments_left() > p.last_entry() {
            return Err(Error::SrhSegmentsLeft {
                segments_left: p.segments_left(),
                last_entry: p.last_entry(),
            });
        }
        let tlvs = p.tlvs();
        check_tlvs(tlvs, FIXED_LEN + SEGMENT_LEN * p.segment_count())?;
        let too_large = Error::SrhTooLarge {
            segments: p.segment_count(),
            tlv_bytes: tlvs.len(),
        };
        let mut segments = heapless::Vec::new();
        for i in 0..p.segment_count() {
            segments
                .push(p.segment(i).ok_or(too_large)?)
                .map_err(|_| too_large)?;
        }
        Ok(SrhRepr {
            next_header: p.next_header(),
            segments_left: p.segments_left(),
            flags: p.flags(),
            tag: p.tag(),
            segments,
            tlvs: heapless::Vec::from_slice(tlvs).map_err(|_| too_large)?,
        })
    }

    /// The active segment, `List[Segments Left]`.
    pub fn active_segment(&self) -> Option<Ipv6Addr> {
        self.segments.get(usize::from(self.segments_left)).copied()
    }

    /// Bytes of TLV padding `emit` appends.
    fn pad_len(&self) -> usize {
        (8 - self.tlvs.len() % 8) % 8
    }

    /// Length of the emitted header.
    pub fn buffer_len(&self) -> usize {
        FIXED_LEN + SEGMENT_LEN * self.segments.len() + self.tlvs.len() + self.pad_len()
    }

    /// Write the header. Panics if the buffer is shorter than [`Self::buffer_len`] or the segment
    /// list is empty (an empty list has no Last Entry).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SrhPacket<T>) {
        assert!(
            !self.segments.is_empty(),
            "an SRH needs at least one segment"
        );
        let len = self.buffer_len();
        let b = &mut p.buffer.as_mut()[..len];
        b[0] = self.next_header;
        b[1] = ((len - FIXED_LEN) / 8) as u8;
        b[2] = ROUTING_TYPE_SRH;
        b[3] = self.segments_left;
        b[4] = (self.segments.len() - 1) as u8;
        b[5] = self.flags;
        set_u16(b, 6, self.tag);
        for (i, a) in self.segments.iter().enumerate() {
            set_addr(b, FIXED_LEN + SEGMENT_LEN * i, *a);
        }
        let t = FIXED_LEN + SEGMENT_LEN * self.segments.len();
        b[t..t + self.tlvs.len()].copy_from_slice(&self.tlvs);
        let pad = &mut b[t + self.tlvs.len()..];
        pad.fill(0);
        if pad.len() >= 2 {
            pad[0] = TLV_PADN;
            pad[1] = (pad.len() - 2) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn from_path_reverses_and_points_at_first_hop() {
        let r = SrhRepr::from_path(41, &[a("fc00::1"), a("fc00::2"), a("fc00::3")]).unwrap();
        assert_eq!(r.segments[0], a("fc00::3"));
        assert_eq!(r.segments_left, 2);
        assert_eq!(r.active_segment(), Some(a("fc00::1")));
        let mut buf = [0u8; 56];
        r.emit(&mut SrhPacket::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..8], &[41, 6, 4, 2, 2, 0, 0, 0]);
        assert_eq!(buf[8 + 15], 3);
        let back = SrhRepr::parse(&SrhPacket::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn tlvs_are_skipped_and_padded() {
        let mut r = SrhRepr::from_path(41, &[a("fc00::1")]).unwrap();
        // An unknown TLV (type 7, 3 bytes of value) then Pad1: 6 bytes, padded to 8 with PadN(0).
        r.tlvs = heapless::Vec::from_slice(&[7, 3, 1, 2, 3, 0]).unwrap();
        assert_eq!(r.buffer_len(), 8 + 16 + 8);
        let mut buf = [0xffu8; 32];
        r.emit(&mut SrhPacket::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[24..], &[7, 3, 1, 2, 3, 0, TLV_PADN, 0]);
        let back = SrhRepr::parse(&SrhPacket::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(&back.tlvs[..], &[7, 3, 1, 2, 3, 0, TLV_PADN, 0]);
    }

    #[test]
    fn rejects_bad_headers() {
        let mut buf = [0u8; 24];
        buf[..8].copy_from_slice(&[41, 2, 4, 1, 0, 0, 0, 0]);
        let p = SrhPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(
            SrhRepr::parse(&p),
            Err(Error::SrhSegmentsLeft {
                segments_left: 1,
                last_entry: 0
            })
        );
        buf[2] = 3;
        let p = SrhPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(SrhRepr::parse(&p), Err(Error::BadRoutingType(3)));
        // Last Entry 1 needs 32 bytes of list, Hdr Ext Len 2 gives 16.
        buf[2] = 4;
        buf[4] = 1;
        assert_eq!(
            SrhPacket::new_checked(&buf[..]).err(),
            Some(Error::SrhSegmentListOverrun {
                last_entry: 1,
                hdr_ext_len: 2
            })
        );
        // A TLV whose length runs past the header.
        let mut buf = [0u8; 32];
        buf[..8].copy_from_slice(&[41, 3, 4, 0, 0, 0, 0, 0]);
        buf[24] = 9;
        buf[25] = 10;
        let p = SrhPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(SrhRepr::parse(&p), Err(Error::SrhBadTlv { offset: 24 }));
        // Truncated: header announces 32 bytes, 24 present.
        assert!(matches!(
            SrhPacket::new_checked(&buf[..24]),
            Err(Error::Truncated {
                need: 32,
                have: 24,
                ..
            })
        ));
    }
}
