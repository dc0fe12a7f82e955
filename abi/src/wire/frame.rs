//! A whole MRC Ethernet frame, parsed and emitted across every layer.

use super::ethernet::{self, EthernetPacket, EthernetRepr};
use super::ipv6::{self, Ipv6Packet, Ipv6Repr};
use super::mrc::{MrcPacket, MrcRepr};
use super::srh::{SrhPacket, SrhRepr};
use super::udp::{self, UdpPacket, UdpRepr};
use super::{Error, EvFormat, Header, IP_PROTO_IPV6, IP_PROTO_ROUTING, IP_PROTO_UDP};
use core::net::Ipv6Addr;

/// The IP layers of a frame: one IPv6 header (UDP and STEV formats), or the SRv6 outer header,
/// optional SRH and inner header.
// No allocator in no_std: the SRH segment list lives inline, bounded by srh::MAX_SEGMENTS.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encap {
    /// Ethernet / IPv6 / UDP.
    Plain(Ipv6Repr),
    /// Ethernet / outer IPv6 / optional SRH / inner IPv6 / UDP.
    Srv6 {
        /// Outer header; its destination is the active uSID carrier.
        outer: Ipv6Repr,
        /// Segment routing header, when the route needs more than one carrier.
        srh: Option<SrhRepr>,
        /// Inner header with the NIC addresses (covered by the UDP checksum).
        inner: Ipv6Repr,
    },
}

impl Encap {
    /// The IPv6 header that carries UDP (whose addresses the checksum covers).
    pub fn transport(&self) -> &Ipv6Repr {
        match self {
            Encap::Plain(ip) => ip,
            Encap::Srv6 { inner, .. } => inner,
        }
    }
    /// The first IPv6 header on the wire.
    pub fn outer(&self) -> &Ipv6Repr {
        match self {
            Encap::Plain(ip) => ip,
            Encap::Srv6 { outer, .. } => outer,
        }
    }
    /// Bytes from the start of the first IPv6 header to the start of UDP.
    pub fn header_len(&self) -> usize {
        match self {
            Encap::Plain(_) => ipv6::HEADER_LEN,
            Encap::Srv6 { srh, .. } => {
                2 * ipv6::HEADER_LEN + srh.as_ref().map_or(0, SrhRepr::buffer_len)
            }
        }
    }
}

/// One MRC frame. `emit` writes the next-header values, lengths and the UDP checksum from the
/// structure; the `next_header` fields of the IPv6 and SRH reprs are ignored when emitting and
/// filled in by `parse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Ethernet II header.
    pub eth: EthernetRepr,
    /// IPv6 layers.
    pub encap: Encap,
    /// UDP header.
    pub udp: UdpRepr,
    /// MRC headers.
    pub mrc: MrcRepr,
    /// Payload after the MRC headers (empty for control and trimmed packets).
    pub payload: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Parse and validate a frame: every length field, next-header chain, the UDP checksum and
    /// the MRC headers. Never panics.
    pub fn parse(buf: &'a [u8]) -> Result<Self, Error> {
        let eth_p = EthernetPacket::new_checked(buf)?;
        let eth = EthernetRepr::parse(&eth_p)?;
        let l3 = &buf[ethernet::HEADER_LEN..];
        let ip_p = Ipv6Packet::new_checked(l3, Header::Ipv6)?;
        let ip = Ipv6Repr::parse(&ip_p, Header::Ipv6)?;
        let after_ip = &l3[ipv6::HEADER_LEN..];
        let (encap, udp_bytes) = match ip.next_header {
            IP_PROTO_UDP => (Encap::Plain(ip), after_ip),
            IP_PROTO_IPV6 => {
                let (inner, rest) = parse_inner(after_ip)?;
                (
                    Encap::Srv6 {
                        outer: ip,
                        srh: None,
                        inner,
                    },
                    rest,
                )
            }
            IP_PROTO_ROUTING => {
                let srh_p = SrhPacket::new_checked(after_ip)?;
                let srh = SrhRepr::parse(&srh_p)?;
                if srh.next_header != IP_PROTO_IPV6 {
                    return Err(Error::BadNextHeader {
                        header: Header::Srh,
                        value: srh.next_header,
                    });
                }
                let (inner, rest) = parse_inner(&after_ip[srh_p.header_len()..])?;
                (
                    Encap::Srv6 {
                        outer: ip,
                        srh: Some(srh),
                        inner,
                    },
                    rest,
                )
            }
            v => {
                return Err(Error::BadNextHeader {
                    header: Header::Ipv6,
                    value: v,
                })
            }
        };
        let t = encap.transport();
        let udp_p = UdpPacket::new_checked(udp_bytes)?;
        let udp = UdpRepr::parse(&udp_p, t.src, t.dst)?;
        let mrc_p = MrcPacket::new_checked(udp_p.payload())?;
        let mrc = MrcRepr::parse(&mrc_p)?;
        if (mrc.mrh.ev_format == EvFormat::Srv6) != matches!(encap, Encap::Srv6 { .. }) {
            return Err(Error::EvFormatMismatch);
        }
        let payload = &udp_bytes[udp::HEADER_LEN + mrc_p.header_len()..];
        Ok(Frame {
            eth,
            encap,
            udp,
            mrc,
            payload,
        })
    }

    /// Total length of the emitted frame.
    pub fn buffer_len(&self) -> usize {
        ethernet::HEADER_LEN + self.encap.header_len() + self.udp_len()
    }

    fn udp_len(&self) -> usize {
        udp::HEADER_LEN + self.mrc.header_len() + self.payload.len()
    }

    /// Write the frame at the start of `buf` and return its length. Errors (never panics) when
    /// `buf` is too small, an SRH has no segment, or the frame exceeds IPv6's 65,535-byte payload.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let total = self.buffer_len();
        if buf.len() < total {
            return Err(Error::BufferTooSmall {
                need: total,
                have: buf.len(),
            });
        }
        let ip_payload = total - ethernet::HEADER_LEN - ipv6::HEADER_LEN;
        if ip_payload > usize::from(u16::MAX) {
            return Err(Error::LengthMismatch {
                header: Header::Ipv6,
                announced: u16::MAX.into(),
                actual: ip_payload,
            });
        }
        if matches!(&self.encap, Encap::Srv6 { srh: Some(s), .. } if s.segments.is_empty()) {
            return Err(Error::SrhEmpty);
        }
        let buf = &mut buf[..total];
        let udp_at = total - self.udp_len();
        {
            let udp_buf = &mut buf[udp_at..];
            let mrc_len = self.mrc.header_len();
            self.mrc.emit(&mut udp_buf[udp::HEADER_LEN..]);
            udp_buf[udp::HEADER_LEN + mrc_len..].copy_from_slice(self.payload);
            let t = self.encap.transport();
            self.udp
                .emit(&mut UdpPacket::new_unchecked(udp_buf), t.src, t.dst);
        }
        let l3 = &mut buf[ethernet::HEADER_LEN..udp_at];
        match &self.encap {
            Encap::Plain(ip) => emit_ip(ip, l3, IP_PROTO_UDP, ip_payload),
            Encap::Srv6 { outer, srh, inner } => {
                let inner_at = l3.len() - ipv6::HEADER_LEN;
                emit_ip(inner, &mut l3[inner_at..], IP_PROTO_UDP, self.udp_len());
                match srh {
                    None => emit_ip(outer, l3, IP_PROTO_IPV6, ip_payload),
                    Some(s) => {
                        let s = SrhRepr {
                            next_header: IP_PROTO_IPV6,
                            ..s.clone()
                        };
                        s.emit(&mut SrhPacket::new_unchecked(
                            &mut l3[ipv6::HEADER_LEN..inner_at],
                        ));
                        emit_ip(outer, l3, IP_PROTO_ROUTING, ip_payload);
                    }
                }
            }
        }
        self.eth.emit(&mut EthernetPacket::new_unchecked(
            &mut buf[..ethernet::HEADER_LEN],
        ));
        Ok(total)
    }
}

fn parse_inner(b: &[u8]) -> Result<(Ipv6Repr, &[u8]), Error> {
    let p = Ipv6Packet::new_checked(b, Header::InnerIpv6)?;
    let inner = Ipv6Repr::parse(&p, Header::InnerIpv6)?;
    if inner.next_header != IP_PROTO_UDP {
        return Err(Error::BadNextHeader {
            header: Header::InnerIpv6,
            value: inner.next_header,
        });
    }
    Ok((inner, &b[ipv6::HEADER_LEN..]))
}

fn emit_ip(ip: &Ipv6Repr, b: &mut [u8], next_header: u8, payload_len: usize) {
    let ip = Ipv6Repr { next_header, ..*ip };
    ip.emit(
        &mut Ipv6Packet::new_unchecked(&mut b[..ipv6::HEADER_LEN]),
        payload_len as u16,
    );
}

/// Convenience for tests and tools: the addresses of the IPv6 header carrying UDP.
pub fn transport_addrs(frame: &Frame<'_>) -> (Ipv6Addr, Ipv6Addr) {
    let t = frame.encap.transport();
    (t.src, t.dst)
}

/// Trim a write packet in place, as a congested switch does: drop its payload, set TRIMMED (and
/// TRIMMED_LAST_HOP when `last_hop`), fix the lengths and the UDP checksum. Returns the new frame
/// length. Errors when `buf` is not a valid MRC write packet.
pub fn trim_in_place(buf: &mut [u8], last_hop: bool) -> Result<usize, Error> {
    let f = Frame::parse(buf)?;
    if !f.mrc.body.opcode().is_write() {
        return Err(Error::UnknownOpcode(f.mrc.body.opcode() as u8));
    }
    let mut mrc = f.mrc;
    mrc.mrh.trimmed = true;
    mrc.mrh.trimmed_last_hop |= last_hop;
    let trimmed = Frame {
        eth: f.eth,
        encap: f.encap,
        udp: f.udp,
        mrc,
        payload: &[],
    };
    trimmed.emit(buf)
}

#[cfg(test)]
mod tests {
    use super::super::samples;
    use super::*;

    #[test]
    fn every_sample_round_trips() {
        let mut buf = [0u8; 1024];
        for (name, f) in samples::all() {
            let n = f.emit(&mut buf).unwrap();
            assert_eq!(n, f.buffer_len(), "{name}");
            let back = Frame::parse(&buf[..n]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(back, f, "{name}");
        }
    }

    #[test]
    fn trim_keeps_headers_and_fixes_checksum() {
        let f = samples::write_only_imm(EvFormat::Srv6, true);
        let mut buf = [0u8; 1024];
        let n = f.emit(&mut buf).unwrap();
        let m = trim_in_place(&mut buf[..n], true).unwrap();
        assert_eq!(n - m, f.payload.len());
        let t = Frame::parse(&buf[..m]).unwrap();
        assert!(t.mrc.mrh.trimmed && t.mrc.mrh.trimmed_last_hop);
        assert_eq!(t.mrc.body, f.mrc.body);
        assert!(t.payload.is_empty());
    }

    #[test]
    fn short_buffer_and_every_truncation_are_errors() {
        let f = samples::write_only_imm(EvFormat::Udp, false);
        let mut buf = [0u8; 1024];
        assert!(matches!(
            f.emit(&mut buf[..10]),
            Err(Error::BufferTooSmall { .. })
        ));
        let n = f.emit(&mut buf).unwrap();
        for cut in 0..n {
            assert!(
                Frame::parse(&buf[..cut]).is_err(),
                "a frame cut at {cut} parsed"
            );
        }
    }

    #[test]
    fn ev_format_must_match_encapsulation() {
        let mut f = samples::write_only_imm(EvFormat::Udp, false);
        f.mrc.mrh.ev_format = EvFormat::Srv6;
        let mut buf = [0u8; 1024];
        let n = f.emit(&mut buf).unwrap();
        assert_eq!(Frame::parse(&buf[..n]), Err(Error::EvFormatMismatch));
    }
}
