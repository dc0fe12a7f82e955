//! A NIC's side table: the MRC headers of the packets it sent that are still in the fabric.
//!
//! The fabric's `Copy` packet metadata carries a tag (`transport_tag`, 1, 2, 3... per NIC);
//! the headers wait here. A delivery takes its entry out ([`SideTable::take`]). Entries live in
//! a dense array (slots reused through a free list) reached through an index ring of
//! `tag % len` (a power of two) that doubles when a new tag's ring slot still holds a packet in
//! flight, up to [`SIDE_SLOTS`](super::SIDE_SLOTS); beyond, the new packet takes the ring slot and the old one's
//! delivery misses. So a packet misses exactly when it is still in flight while
//! [`SIDE_SLOTS`](super::SIDE_SLOTS) later packets are sent, and the memory follows the packets
//! in flight (96 bytes each, plus 4 bytes per ring slot; the array grows 64 entries at a time,
//! not by doubling), not the packets sent.

use mrc_firmware::datapath::packet::Packet;

use super::SIDE_SLOTS;

/// Ring slots a NIC starts with.
const RING_FIRST: usize = 64;
const NIL: u32 = u32::MAX;
/// Entries the dense array grows by when full (6 KiB).
const ENTRIES_STEP: usize = 64;

#[derive(Clone, Copy)]
struct Entry {
    tag: u64,
    pkt: Packet,
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct SideTable {
    /// Per ring slot `tag % ring.len()`: the entry of the packet in flight there, or NIL.
    ring: Vec<u32>,
    entries: Vec<Entry>,
    free: Vec<u32>,
}

impl SideTable {
    #[inline]
    fn slot(&self, tag: u64) -> usize {
        (tag & (self.ring.len() as u64).saturating_sub(1)) as usize
    }

    /// The entry holding `tag`, if it is still here.
    #[inline]
    fn find(&self, tag: u64) -> Option<(usize, u32)> {
        let s = self.slot(tag);
        let e = *self.ring.get(s)?;
        (self.entries.get(e as usize)?.tag == tag).then_some((s, e))
    }

    /// The headers of the packet with `tag`, if still here.
    #[cfg(test)]
    fn get(&self, tag: u64) -> Option<Packet> {
        self.find(tag).map(|(_, e)| self.entries[e as usize].pkt)
    }

    /// Takes the headers of the packet with `tag` out (its delivery).
    pub(crate) fn take(&mut self, tag: u64) -> Option<Packet> {
        let (s, e) = self.find(tag)?;
        self.ring[s] = NIL;
        self.free.push(e);
        Some(self.entries[e as usize].pkt)
    }

    /// Stores the headers of the packet with `tag` (tags grow by one per packet).
    pub(crate) fn put(&mut self, tag: u64, pkt: Packet) {
        if self.ring.is_empty() {
            self.ring = vec![NIL; RING_FIRST];
        }
        loop {
            let s = self.slot(tag);
            let e = self.ring[s];
            if e == NIL {
                let e = match self.free.pop() {
                    Some(e) => {
                        self.entries[e as usize] = Entry { tag, pkt };
                        e
                    }
                    None => {
                        if self.entries.len() == self.entries.capacity() {
                            // Grow by a step, not by doubling: a NIC just past a power of
                            // two would hold twice its packets in flight.
                            self.entries.reserve_exact(ENTRIES_STEP);
                        }
                        self.entries.push(Entry { tag, pkt });
                        (self.entries.len() - 1) as u32
                    }
                };
                self.ring[s] = e;
                return;
            }
            if self.ring.len() >= SIDE_SLOTS {
                // The packet in flight there will miss.
                self.entries[e as usize] = Entry { tag, pkt };
                return;
            }
            // Live tags that differ modulo the length differ modulo twice the length.
            let n = self.ring.len() * 2;
            let mut grown = vec![NIL; n];
            for &e in self.ring.iter().filter(|e| **e != NIL) {
                grown[(self.entries[e as usize].tag % n as u64) as usize] = e;
            }
            self.ring = grown;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(psn: u32) -> Packet {
        Packet {
            psn: mrc_abi::Psn::new(psn),
            ..Packet::FILL
        }
    }

    #[test]
    fn entries_follow_the_packets_in_flight() {
        let mut t = SideTable::default();
        // 10,000 packets, at most 100 in flight: the ring stays small, nothing misses.
        for tag in 1..=10_000u64 {
            t.put(tag, pkt(tag as u32));
            if tag > 100 {
                assert_eq!(
                    t.take(tag - 100).map(|p| p.psn.value()),
                    Some((tag - 100) as u32)
                );
            }
        }
        assert!(
            t.ring.len() <= 256 && t.entries.len() <= 101,
            "{}",
            t.ring.len()
        );
        // One packet left in flight: it decodes until 8192 later ones were sent, then misses.
        let mut t = SideTable::default();
        t.put(1, pkt(1));
        for tag in 2..=8192u64 {
            t.put(tag, pkt(tag as u32));
            assert!(t.take(tag).is_some());
        }
        assert_eq!(t.get(1).map(|p| p.psn.value()), Some(1));
        t.put(8193, pkt(8193));
        assert!(t.get(1).is_none() && t.take(1).is_none());
        assert!(t.take(8193).is_some());
        assert!(t.take(8193).is_none(), "a delivery takes its entry once");
    }
}
