//! UDP (RFC 768) carrying MRC on port 4791, with the mandatory IPv6 checksum.

use super::field::{need, set_u16, u16_at};
use super::{udp_checksum, Error, Header, MRC_UDP_PORT};
use core::net::Ipv6Addr;

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram (header and payload) at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap without checking (see the module's panic contract).
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }
    /// Wrap after checking that the header is present and the Length field matches the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        need(buffer.as_ref(), HEADER_LEN, Header::Udp)?;
        let p = UdpPacket { buffer };
        let actual = p.buffer.as_ref().len();
        if usize::from(p.len()) != actual {
            return Err(Error::LengthMismatch {
                header: Header::Udp,
                announced: p.len().into(),
                actual,
            });
        }
        Ok(p)
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 2)
    }
    /// Length field (header + payload).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 4)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 6)
    }
    /// The payload (the MRC headers and data).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    /// Verify the checksum against the IPv6 pseudo-header of `src`/`dst`.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<(), Error> {
        let found = self.checksum();
        if found == 0 {
            return Err(Error::ZeroChecksum);
        }
        let expected = udp_checksum(src, dst, self.buffer.as_ref());
        if found != expected {
            return Err(Error::BadChecksum { found, expected });
        }
        Ok(())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 0, v);
    }
    /// Set the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 2, v);
    }
    /// Set the length field.
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 4, v);
    }
    /// Compute and store the checksum over the whole buffer.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let c = udp_checksum(src, dst, self.buffer.as_ref());
        set_u16(self.buffer.as_mut(), 6, c);
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The meaning of an MRC UDP header; length and checksum are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UdpRepr {
    /// Source port (carries the EV in the UDP and STEV formats).
    pub src_port: u16,
}

impl UdpRepr {
    /// Parse: destination port 4791 and a correct, non-zero checksum under `src`/`dst`.
    pub fn parse<T: AsRef<[u8]>>(
        p: &UdpPacket<T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<Self, Error> {
        if p.dst_port() != MRC_UDP_PORT {
            return Err(Error::BadUdpPort(p.dst_port()));
        }
        p.verify_checksum(src, dst)?;
        Ok(UdpRepr {
            src_port: p.src_port(),
        })
    }
    /// Write the header for a datagram filling the whole buffer; the payload must already be in
    /// place, since the checksum covers it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut UdpPacket<T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) {
        let len = p.buffer.as_ref().len();
        p.set_src_port(self.src_port);
        p.set_dst_port(MRC_UDP_PORT);
        p.set_len(len as u16);
        p.fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_round_trip_and_detects_flips() {
        let (s, d) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let mut b = [0u8; 13];
        b[8..].copy_from_slice(b"hello");
        UdpRepr { src_port: 0xc123 }.emit(&mut UdpPacket::new_unchecked(&mut b[..]), s, d);
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, s, d), Ok(UdpRepr { src_port: 0xc123 }));
        b[10] ^= 1;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(matches!(
            UdpRepr::parse(&p, s, d),
            Err(Error::BadChecksum { .. })
        ));
        b[6] = 0;
        b[7] = 0;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, s, d), Err(Error::ZeroChecksum));
    }
}
