//! SRv6 uSID carriers (RFC 9800, as DESIGN.md states it).
//!
//! A carrier is an IPv6 destination: a 32-bit locator block, then up to six 16-bit uSIDs. The
//! active uSID is bits 32..48. A node consumes it by keeping the block and shifting the
//! remaining 80 bits left by 16, filling with zeros. An active uSID of 0 is the end of the
//! carrier.
//!
//! What a uSID names in a Clos fabric, and the paths between hosts, are in [`clos`]: the
//! controller's path planner and the simulator's switches both follow it.

pub mod clos;

use super::srh::SrhPacket;
use super::{Error, Ipv6Packet};
use core::net::Ipv6Addr;

/// Most uSIDs one carrier holds (128 - 32 bits of block, 16 bits each).
pub const MAX_USIDS: usize = 6;
/// The default locator block, `fcbb:bb00::/32`.
pub const DEFAULT_BLOCK: u32 = 0xfcbb_bb00;

/// Build a carrier from a block and the uSIDs in travel order. Errors when there are more than
/// six uSIDs or one of them is 0 (0 marks the end of the carrier).
pub fn carrier(block: u32, usids: &[u16]) -> Result<Ipv6Addr, Error> {
    if usids.len() > MAX_USIDS || usids.contains(&0) {
        return Err(Error::BadUsidCarrier);
    }
    let mut o = [0u8; 16];
    o[..4].copy_from_slice(&block.to_be_bytes());
    for (i, u) in usids.iter().enumerate() {
        o[4 + 2 * i..6 + 2 * i].copy_from_slice(&u.to_be_bytes());
    }
    Ok(Ipv6Addr::from(o))
}

/// The locator block of a carrier.
pub fn block(addr: Ipv6Addr) -> u32 {
    let o = addr.octets();
    u32::from_be_bytes([o[0], o[1], o[2], o[3]])
}

/// The active uSID (bits 32..48); 0 at the end of the carrier.
pub fn active(addr: Ipv6Addr) -> u16 {
    let o = addr.octets();
    u16::from_be_bytes([o[4], o[5]])
}

/// True when the carrier has no uSID left.
pub fn is_end_of_carrier(addr: Ipv6Addr) -> bool {
    active(addr) == 0
}

/// The carrier after consuming the active uSID: block kept, the rest shifted left by 16.
pub fn shift(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    let mut n = [0u8; 16];
    n[..4].copy_from_slice(&o[..4]);
    n[4..14].copy_from_slice(&o[6..16]);
    Ipv6Addr::from(n)
}

/// The uSIDs still to be consumed, in travel order (stops at the first 0).
pub fn remaining(addr: Ipv6Addr) -> impl Iterator<Item = u16> {
    let o = addr.octets();
    (0..MAX_USIDS)
        .map(move |i| u16::from_be_bytes([o[4 + 2 * i], o[5 + 2 * i]]))
        .take_while(|u| *u != 0)
}

/// What a uSID switch does with a packet, decided by [`advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Step {
    /// Forward by this uSID (looked up in the switch's table; see [`clos::Clos::forward`]).
    Hop(u16),
    /// The route is used up: deliver by the inner destination.
    Deliver,
}

/// Process the outer IPv6 header (and SRH, when `srh` is given) of a packet at a uSID node, in
/// place: take the active uSID, shift the carrier, and when the carrier is used up and the SRH
/// has segments left, decrement Segments Left and load `List[Segments Left]`.
///
/// The inner IPv6 header and the UDP checksum are untouched: they do not cover the outer
/// destination. Returns the step to take; never panics on a checked packet.
pub fn advance<T, S>(outer: &mut Ipv6Packet<T>, mut srh: Option<&mut SrhPacket<S>>) -> Step
where
    T: AsRef<[u8]> + AsMut<[u8]>,
    S: AsRef<[u8]> + AsMut<[u8]>,
{
    // At most one reload per segment: bounded by Last Entry + 1 iterations.
    for _ in 0..=256 {
        let dst = outer.dst();
        let u = active(dst);
        if u != 0 {
            outer.set_dst(shift(dst));
            reload_if_exhausted(outer, srh.as_deref_mut());
            return Step::Hop(u);
        }
        if !reload_if_exhausted(outer, srh.as_deref_mut()) {
            return Step::Deliver;
        }
    }
    Step::Deliver
}

/// When the carrier in `outer` is used up and the SRH has segments left, load the next segment.
/// Returns true when a segment was loaded.
fn reload_if_exhausted<T, S>(outer: &mut Ipv6Packet<T>, srh: Option<&mut SrhPacket<S>>) -> bool
where
    T: AsRef<[u8]> + AsMut<[u8]>,
    S: AsRef<[u8]> + AsMut<[u8]>,
{
    let Some(srh) = srh else { return false };
    if !is_end_of_carrier(outer.dst()) || srh.segments_left() == 0 {
        return false;
    }
    let sl = srh.segments_left() - 1;
    match srh.segment(usize::from(sl)) {
        Some(next) => {
            srh.set_segments_left(sl);
            outer.set_dst(next);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::srh::SrhRepr;

    #[test]
    fn shift_keeps_block_and_fills_zero() {
        let c = carrier(DEFAULT_BLOCK, &[0x0102, 0x0203, 0x0304]).unwrap();
        assert_eq!(c, "fcbb:bb00:102:203:304::".parse::<Ipv6Addr>().unwrap());
        let s = shift(c);
        assert_eq!(s, "fcbb:bb00:203:304::".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            remaining(s).collect::<heapless::Vec<u16, 6>>(),
            [0x0203, 0x0304]
        );
        assert!(is_end_of_carrier(shift(shift(s))));
        assert_eq!(
            carrier(DEFAULT_BLOCK, &[1, 2, 3, 4, 5, 6, 7]),
            Err(Error::BadUsidCarrier)
        );
        assert_eq!(
            carrier(DEFAULT_BLOCK, &[1, 0, 3]),
            Err(Error::BadUsidCarrier)
        );
    }

    #[test]
    fn advance_walks_carrier_then_srh() {
        let c1 = carrier(DEFAULT_BLOCK, &[11, 12]).unwrap();
        let c2 = carrier(DEFAULT_BLOCK, &[21]).unwrap();
        let srh = SrhRepr::from_path(41, &[c1, c2]).unwrap();
        let mut sbuf = [0u8; 40];
        srh.emit(&mut SrhPacket::new_unchecked(&mut sbuf[..]));
        let mut ibuf = [0u8; 40];
        let mut ip = Ipv6Packet::new_unchecked(&mut ibuf[..]);
        ip.set_dst(c1);
        let mut s = SrhPacket::new_checked(&mut sbuf[..]).unwrap();
        let mut steps = heapless::Vec::<Step, 8>::new();
        for _ in 0..4 {
            steps.push(advance(&mut ip, Some(&mut s))).unwrap();
        }
        assert_eq!(
            steps,
            [Step::Hop(11), Step::Hop(12), Step::Hop(21), Step::Deliver]
        );
        assert_eq!(s.segments_left(), 0);
    }
}
