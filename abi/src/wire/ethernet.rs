//! Ethernet II (no VLAN tags; MRC frames carry IPv6 only).

use super::field::{need, u16_at};
use super::{Error, Header, ETHERTYPE_IPV6};
use core::fmt;

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = 14;

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EthernetAddress(pub [u8; 6]);

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A view of an Ethernet II header at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct EthernetPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetPacket<T> {
    /// Wrap without checking the length (see the module's panic contract).
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetPacket { buffer }
    }
    /// Wrap after checking that the header is present.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        need(buffer.as_ref(), HEADER_LEN, Header::Ethernet)?;
        Ok(EthernetPacket { buffer })
    }
    /// Destination MAC.
    pub fn dst(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[0..6]);
        EthernetAddress(a)
    }
    /// Source MAC.
    pub fn src(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[6..12]);
        EthernetAddress(a)
    }
    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 12)
    }
    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetPacket<T> {
    /// Set the destination MAC.
    pub fn set_dst(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[0..6].copy_from_slice(&a.0);
    }
    /// Set the source MAC.
    pub fn set_src(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[6..12].copy_from_slice(&a.0);
    }
    /// Set the EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        super::field::set_u16(self.buffer.as_mut(), 12, t);
    }
}

/// The meaning of an Ethernet II header of an MRC frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EthernetRepr {
    /// Destination MAC.
    pub dst: EthernetAddress,
    /// Source MAC.
    pub src: EthernetAddress,
}

impl EthernetRepr {
    /// Parse; the EtherType must be IPv6.
    pub fn parse<T: AsRef<[u8]>>(p: &EthernetPacket<T>) -> Result<Self, Error> {
        if p.ethertype() != ETHERTYPE_IPV6 {
            return Err(Error::BadEthertype(p.ethertype()));
        }
        Ok(EthernetRepr {
            dst: p.dst(),
            src: p.src(),
        })
    }
    /// Write the header (EtherType IPv6).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut EthernetPacket<T>) {
        p.set_dst(self.dst);
        p.set_src(self.src);
        p.set_ethertype(ETHERTYPE_IPV6);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_byte_literal() {
        let b = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
        let p = EthernetPacket::new_checked(&b[..]).unwrap();
        let r = EthernetRepr::parse(&p).unwrap();
        assert_eq!(r.dst, EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert_eq!(alloc_fmt(r.src), "02:00:00:00:00:02");
        let mut out = [0u8; 14];
        r.emit(&mut EthernetPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn rejects_ipv4_and_short() {
        let b = [0u8; 13];
        assert!(matches!(
            EthernetPacket::new_checked(&b[..]),
            Err(Error::Truncated {
                need: 14,
                have: 13,
                ..
            })
        ));
        let mut b = [0u8; 14];
        b[12] = 0x08;
        let p = EthernetPacket::new_checked(&b[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&p), Err(Error::BadEthertype(0x0800)));
    }

    fn alloc_fmt(a: EthernetAddress) -> heapless::String<17> {
        use core::fmt::Write;
        let mut s = heapless::String::new();
        write!(s, "{a}").unwrap();
        s
    }
}
