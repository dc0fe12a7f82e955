//! The IPv6 fixed header (RFC 8200), outer or inner.

use super::field::{addr_at, need, set_addr, set_u16, u16_at, u32_at};
use super::{Error, Header};
use core::net::Ipv6Addr;

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 header at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap without checking the length (see the module's panic contract).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }
    /// Wrap after checking that the fixed header is present. `header` names it in errors
    /// ([`Header::Ipv6`] or [`Header::InnerIpv6`]).
    pub fn new_checked(buffer: T, header: Header) -> Result<Self, Error> {
        need(buffer.as_ref(), HEADER_LEN, header)?;
        Ok(Ipv6Packet { buffer })
    }
    /// Version nibble.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        ((u16_at(self.buffer.as_ref(), 0) >> 4) & 0xff) as u8
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        u32_at(self.buffer.as_ref(), 0) & 0x000f_ffff
    }
    /// Payload length.
    pub fn payload_len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), 4)
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[6]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }
    /// Source address.
    pub fn src(&self) -> Ipv6Addr {
        addr_at(self.buffer.as_ref(), 8)
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv6Addr {
        addr_at(self.buffer.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Set version 6, traffic class and flow label.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[0..4].copy_from_slice(&w.to_be_bytes());
    }
    /// Set the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), 4, len);
    }
    /// Set the next header.
    pub fn set_next_header(&mut self, nh: u8) {
        self.buffer.as_mut()[6] = nh;
    }
    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[7] = h;
    }
    /// Set the source address.
    pub fn set_src(&mut self, a: Ipv6Addr) {
        set_addr(self.buffer.as_mut(), 8, a);
    }
    /// Set the destination address (what a uSID switch rewrites).
    pub fn set_dst(&mut self, a: Ipv6Addr) {
        set_addr(self.buffer.as_mut(), 24, a);
    }
    /// Set the ECN bits of the traffic class (what a marking switch does).
    pub fn set_ecn(&mut self, ecn: u8) {
        let tc = (self.traffic_class() & !0b11) | (ecn & 0b11);
        let fl = self.flow_label();
        self.set_version_tc_flow(tc, fl);
    }
}

/// The meaning of an IPv6 header; the payload length is derived when emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ipv6Repr {
    /// Source address.
    #[cfg_attr(feature = "defmt", defmt(Debug2Format))]
    pub src: Ipv6Addr,
    /// Destination address.
    #[cfg_attr(feature = "defmt", defmt(Debug2Format))]
    pub dst: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits; higher bits are ignored on emit).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parse; the version must be 6 and the payload length must equal the bytes that follow.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>, header: Header) -> Result<Self, Error> {
        if p.version() != 6 {
            return Err(Error::BadIpVersion {
                header,
                version: p.version(),
            });
        }
        let actual = p.buffer.as_ref().len() - HEADER_LEN;
        if usize::from(p.payload_len()) != actual {
            return Err(Error::LengthMismatch {
                header,
                announced: p.payload_len().into(),
                actual,
            });
        }
        Ok(Ipv6Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }
    /// Write the header with the given payload length.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv6Packet<T>, payload_len: u16) {
        p.set_version_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src(self.src);
        p.set_dst(self.dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: [u8; 40] = [
        0x60, 0xa1, 0x23, 0x45, 0x00, 0x00, 17, 64, //
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
    ];

    #[test]
    fn byte_literal_round_trip() {
        let p = Ipv6Packet::new_checked(&HDR[..], Header::Ipv6).unwrap();
        let r = Ipv6Repr::parse(&p, Header::Ipv6).unwrap();
        assert_eq!(r.traffic_class, 0x0a);
        assert_eq!(r.flow_label, 0x12345);
        assert_eq!(r.src, "fd00::1".parse::<Ipv6Addr>().unwrap());
        let mut out = [0u8; 40];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]), 0);
        assert_eq!(out, HDR);
    }

    #[test]
    fn payload_length_must_match() {
        let mut b = [0u8; 44];
        b[..40].copy_from_slice(&HDR);
        let p = Ipv6Packet::new_checked(&b[..], Header::Ipv6).unwrap();
        assert_eq!(
            Ipv6Repr::parse(&p, Header::Ipv6),
            Err(Error::LengthMismatch {
                header: Header::Ipv6,
                announced: 0,
                actual: 4
            })
        );
    }

    #[test]
    fn set_ecn_keeps_dscp_and_flow() {
        let mut b = HDR;
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_ecn(0b11);
        assert_eq!(p.traffic_class(), 0x0b);
        assert_eq!(p.flow_label(), 0x12345);
    }
}
