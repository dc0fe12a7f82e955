//! Packet metadata as the fabric sees it: a small `Copy` struct, no heap.
//!
//! Payload bytes are virtual: a [`Payload`] is a length, a pattern seed and the checksum of the
//! bytes the pattern stands for (byte `i` is `(pattern + i) mod 256`), computed in O(1), so a
//! receiver can check a payload it never stored. Routing is either a source route of SRv6 uSIDs
//! ([`UsidRoute`]) or an ECMP flow hash ([`Route::Ecmp`]).

use mrc_abi::wire::usid::clos::Carrier;
use mrc_abi::wire::usid::MAX_USIDS;

/// Size of a trimmed packet (headers only) when the configuration does not say otherwise.
pub const DEFAULT_TRIM_BYTES: u32 = 64;

/// Explicit congestion notification codepoint (the two ECN bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// Not ECN-capable: never marked.
    #[default]
    NotEct,
    /// ECN-capable transport: a congested queue may mark it.
    Ect,
    /// Congestion experienced.
    Ce,
}

/// Which transport a packet belongs to; selects the per-transport switch policy
/// ([`crate::fabric::ClassPolicy`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// MRC (and its variants): source-routed, trimmable, no ECN at the last hop by default.
    #[default]
    Mrc = 0,
    /// RoCE-like: ECMP-routed, lossless with PFC, ECN everywhere.
    Roce = 1,
}

impl TransportKind {
    /// Number of kinds (size of the policy table).
    pub const COUNT: usize = 2;

    /// Index into the policy table.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A virtual payload: length and the checksum of the pattern bytes it stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Payload {
    /// Payload bytes.
    pub len: u32,
    /// Pattern seed: byte `i` of the payload is `(pattern + i) mod 256`.
    pub pattern: u32,
    /// Sum of the payload bytes (mod 2^32), as the sender computed it.
    pub checksum: u32,
}

impl Payload {
    /// A payload of `len` bytes with pattern `pattern`, its checksum filled in.
    pub fn new(len: u32, pattern: u32) -> Payload {
        Payload {
            len,
            pattern,
            checksum: pattern_checksum(pattern, len),
        }
    }

    /// True when the checksum matches the pattern and length (what a receiver checks).
    pub fn verify(&self) -> bool {
        self.checksum == pattern_checksum(self.pattern, self.len)
    }
}

/// Sum (mod 2^32) of the bytes `(pattern + i) mod 256` for `i` in `0..len`, in O(1).
pub fn pattern_checksum(pattern: u32, len: u32) -> u32 {
    // The byte sequence is periodic with period 256; a full period sums to 0 + 1 + ... + 255.
    const PERIOD_SUM: u64 = 255 * 256 / 2;
    let start = (pattern & 0xff) as u64;
    let full = len as u64 / 256;
    let rest = len as u64 % 256;
    // Partial period: bytes start, start+1, ... (rest of them), wrapping at 256.
    let sum_range = |a: u64, n: u64| n * a + n * n.saturating_sub(1) / 2;
    let first = rest.min(256 - start);
    let partial = sum_range(start, first) + sum_range(0, rest - first);
    (full * PERIOD_SUM + partial) as u32
}

/// A uSID source route: up to two carriers of six 16-bit uSIDs each (the second one stands for
/// an SRH segment), consumed in travel order.
///
/// Same rules as `mrc_abi::wire::usid`: the active uSID is the next unconsumed one of the current
/// carrier; a node consumes it (the carrier shifts); when the carrier is used up and a second
/// carrier remains, it is loaded. A uSID of 0 ends a carrier. At a switch, uSID `u` means
/// "output port `u - 1`" ([`crate::fabric::Topology::usid_route`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UsidRoute {
    /// The hops in travel order, zero after the last: the outer carrier's six, then the
    /// second carrier's. Both are filled from the front, so the active uSID is simply the
    /// next one, and loading the second carrier is moving on past the first's sixth.
    usids: [u16; 2 * MAX_USIDS],
    /// Index of the active uSID.
    pos: u8,
}
/// Why a uSID route could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsidRouteError {
    /// More than 12 hops (two carriers).
    TooLong {
        /// Hops requested.
        hops: usize,
    },
    /// A uSID of 0 (which would end the carrier early).
    ZeroUsid {
        /// Its position in the route.
        at: usize,
    },
}

impl UsidRoute {
    /// Most hops two carriers hold.
    pub const MAX_HOPS: usize = 2 * MAX_USIDS;

    /// A route through `hops` (uSIDs in travel order, none zero, at most 12; the first six go in
    /// the outer carrier, the rest in the second carrier).
    ///
    /// # Errors
    /// [`UsidRouteError`] when the list is too long or holds a zero.
    pub fn new(hops: &[u16]) -> Result<UsidRoute, UsidRouteError> {
        if hops.len() > Self::MAX_HOPS {
            return Err(UsidRouteError::TooLong { hops: hops.len() });
        }
        if let Some(at) = hops.iter().position(|u| *u == 0) {
            return Err(UsidRouteError::ZeroUsid { at });
        }
        let mut r = UsidRoute::default();
        r.usids[..hops.len()].copy_from_slice(hops);
        Ok(r)
    }

    /// The active uSID; 0 when the route is used up.
    #[inline]
    pub fn active(&self) -> u16 {
        self.usids.get(usize::from(self.pos)).copied().unwrap_or(0)
    }

    /// Consumes the active uSID (shift), loading the second carrier when the first is used up.
    #[inline]
    pub fn advance(&mut self) {
        if self.active() != 0 {
            self.pos += 1;
        }
    }

    /// The uSIDs not yet consumed, in travel order.
    pub fn remaining(&self) -> impl Iterator<Item = u16> + '_ {
        self.usids[usize::from(self.pos).min(self.usids.len())..]
            .iter()
            .copied()
            .take_while(|u| *u != 0)
    }

    /// Hops left.
    pub fn hops_left(&self) -> usize {
        self.remaining().count()
    }

    /// True when a second carrier (an SRH segment) is present or in use.
    pub fn has_second_carrier(&self) -> bool {
        self.usids[MAX_USIDS] != 0
    }

    /// The two carriers as they were built (unconsumed form), for encoding to real headers.
    pub fn carriers(&self) -> [[u16; MAX_USIDS]; 2] {
        let mut c = [[0; MAX_USIDS]; 2];
        c[0].copy_from_slice(&self.usids[..MAX_USIDS]);
        c[1].copy_from_slice(&self.usids[MAX_USIDS..]);
        c
    }
}

impl Carrier for UsidRoute {
    #[inline]
    fn active(&self) -> u16 {
        UsidRoute::active(self)
    }
    #[inline]
    fn consume(&mut self) {
        self.advance();
    }
}

/// How switches forward a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// SRv6 uSID source route: each switch forwards to the neighbour the active uSID names,
    /// consuming its own uSID and its hosts' ones.
    Usid(UsidRoute),
    /// Destination routing, spread by a flow hash (a 5-tuple digest) over the equal-cost ports
    /// the switch's routing view holds up.
    Ecmp {
        /// The flow hash.
        hash: u64,
    },
}

impl Default for Route {
    fn default() -> Route {
        Route::Ecmp { hash: 0 }
    }
}

/// Flags on a packet.
pub mod flags {
    /// Cut to headers by a full queue.
    pub const TRIMMED: u8 = 1 << 0;
    /// Damaged on a link; the receiving node drops it (bad FCS).
    pub const CORRUPT: u8 = 1 << 1;
    /// Goes through the priority (header) queue, like a trimmed header (ACKs, NACKs...).
    pub const PRIORITY: u8 = 1 << 2;
    /// Trimmed by the last hop (the switch port toward the destination host): the MRH's
    /// trimmed-last-hop bit, which tells the receiver the congestion is its own incast.
    pub const TRIMMED_LAST_HOP: u8 = 1 << 3;

    /// Whether a packet with `flags` was damaged on a link.
    #[inline]
    pub fn is_corrupt(flags: u8) -> bool {
        flags & CORRUPT != 0
    }

    /// Whether a packet with `flags` uses the priority (header) queue: marked so, or trimmed.
    #[inline]
    pub fn is_priority(flags: u8) -> bool {
        flags & (PRIORITY | TRIMMED) != 0
    }
}

/// Packet metadata (`Copy`, at most 72 bytes). The fabric keeps each in its slab, split
/// into what every hop reads and what only the ends read; nothing is allocated per packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Packet {
    /// Source host.
    pub src: u32,
    /// Destination host.
    pub dst: u32,
    /// Wire size in bytes (headers + payload); what serialization and queues count.
    pub size_bytes: u32,
    /// The virtual payload (kept as sent when the packet is trimmed; see [`flags::TRIMMED`]).
    pub payload: Payload,
    /// Opaque to the fabric: the transport's own tag (QP number, PSN...).
    pub transport_tag: u64,
    /// Routing.
    pub route: Route,
    /// Plane it travels on (set by [`crate::fabric::Fabric::inject`]).
    pub plane: u8,
    /// Transport (selects the switch policy).
    pub kind: TransportKind,
    /// ECN bits.
    pub ecn: Ecn,
    /// [`flags`] bits.
    pub flags: u8,
}

impl Packet {
    /// True when a full queue cut it to headers.
    #[inline]
    pub fn is_trimmed(&self) -> bool {
        self.flags & flags::TRIMMED != 0
    }

    /// True when the last hop trimmed it ([`flags::TRIMMED_LAST_HOP`]).
    #[inline]
    pub fn is_trimmed_last_hop(&self) -> bool {
        self.flags & flags::TRIMMED_LAST_HOP != 0
    }

    /// True when a link damaged it.
    #[inline]
    pub fn is_corrupt(&self) -> bool {
        flags::is_corrupt(self.flags)
    }

    /// True when it uses the priority (header) queue.
    #[inline]
    pub fn is_priority(&self) -> bool {
        flags::is_priority(self.flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv6Addr;
    use mrc_abi::wire::usid;

    #[test]
    fn checksum_matches_brute_force() {
        for pattern in [0u32, 1, 7, 200, 255, 256, 1000, u32::MAX] {
            for len in [0u32, 1, 2, 55, 56, 255, 256, 257, 511, 4096, 4150] {
                let brute = (0..len)
                    .map(|i| pattern.wrapping_add(i) & 0xff)
                    .fold(0u32, |a, b| a.wrapping_add(b));
                assert_eq!(pattern_checksum(pattern, len), brute, "{pattern} {len}");
            }
        }
        let p = Payload::new(4096, 3);
        assert!(p.verify());
        assert!(!Payload { checksum: 1, ..p }.verify());
    }

    #[test]
    fn route_walks_like_the_abi_carrier() {
        let hops = [5u16, 9, 2, 7, 1, 3, 4, 8];
        let mut r = UsidRoute::new(&hops).unwrap();
        assert!(r.has_second_carrier());
        assert_eq!(r.hops_left(), 8);
        // The ABI's carrier for the first six, then the second.
        let mut c1 = usid::carrier(usid::DEFAULT_BLOCK, &hops[..6]).unwrap();
        let mut c2: Option<Ipv6Addr> =
            Some(usid::carrier(usid::DEFAULT_BLOCK, &hops[6..]).unwrap());
        for _ in 0..hops.len() {
            if usid::is_end_of_carrier(c1) {
                c1 = c2.take().unwrap();
            }
            assert_eq!(r.active(), usid::active(c1));
            c1 = usid::shift(c1);
            r.advance();
        }
        assert_eq!(r.active(), 0);
        assert_eq!(r.hops_left(), 0);
        r.advance();
        assert_eq!(r.active(), 0);
        assert_eq!(
            UsidRoute::new(&[1; 13]),
            Err(UsidRouteError::TooLong { hops: 13 })
        );
        assert_eq!(
            UsidRoute::new(&[1, 0]),
            Err(UsidRouteError::ZeroUsid { at: 1 })
        );
        assert_eq!(UsidRoute::new(&[]).unwrap().active(), 0);
    }

    #[test]
    fn packet_is_small() {
        assert!(
            core::mem::size_of::<Packet>() <= 72,
            "{}",
            core::mem::size_of::<Packet>()
        );
    }
}
