//! A NIC's side table: the MRC headers of the packets it sent, until the world takes them.
//!
//! The fabric's `Copy` packet metadata carries a tag (`transport_tag`, 1, 2, 3... per NIC); the
//! headers wait here, in sending order. At the end of the event that sent them the world takes
//! each packet the fabric staged (`Nic::side_take`), in the same order, into its table by slab
//! slot, where the delivery finds them. So a take finds its tag at the front, behind only the
//! packets that never entered the fabric (an injection error), which it drops. A NIC whose
//! headers nobody takes keeps the last [`SIDE_SLOTS`](super::SIDE_SLOTS) (96 bytes each); an
//! older tag then misses, and its delivery is counted in `side_misses`: it never decodes
//! another packet's headers.

use std::collections::VecDeque;

use mrc_firmware::datapath::packet::Packet;

use super::SIDE_SLOTS;

/// See the module docs.
#[derive(Default)]
pub(crate) struct SideTable {
    /// (tag, headers), tags increasing.
    sent: VecDeque<(u64, Packet)>,
}

impl SideTable {
    /// Takes the headers of the packet with `tag` out (they leave for the world's table),
    /// dropping those of older tags.
    #[inline]
    pub(crate) fn take(&mut self, tag: u64) -> Option<Packet> {
        while let Some(&(t, pkt)) = self.sent.front() {
            if t > tag {
                return None;
            }
            self.sent.pop_front();
            if t == tag {
                return Some(pkt);
            }
        }
        None
    }

    /// Stores the headers of the packet with `tag` (larger than every tag stored before).
    #[inline]
    pub(crate) fn put(&mut self, tag: u64, pkt: Packet) {
        if self.sent.len() >= SIDE_SLOTS {
            self.sent.pop_front();
        }
        self.sent.push_back((tag, pkt));
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
    fn takes_in_sending_order_skip_what_never_left() {
        let mut t = SideTable::default();
        for tag in 1..=10_000u64 {
            t.put(tag, pkt(tag as u32));
            // (every seventh packet never entered the fabric: nobody takes it)
            if tag % 7 != 0 {
                assert_eq!(t.take(tag).map(|p| p.psn.value()), Some(tag as u32));
            }
        }
        assert!(t.sent.is_empty());
        assert!(t.take(10_000).is_none(), "a delivery takes its entry once");
        // A later tag is not taken early.
        t.put(10_001, pkt(1));
        assert!(t.take(9_999).is_none());
        assert_eq!(t.take(10_001).map(|p| p.psn.value()), Some(1));
    }

    #[test]
    fn headers_nobody_takes_are_bounded() {
        let mut t = SideTable::default();
        for tag in 1..=SIDE_SLOTS as u64 {
            t.put(tag, pkt(tag as u32));
        }
        t.put(SIDE_SLOTS as u64 + 1, pkt(0));
        assert_eq!(t.sent.len(), SIDE_SLOTS);
        // The oldest is gone; the next is still there.
        assert!(t.take(1).is_none());
        assert_eq!(t.take(2).map(|p| p.psn.value()), Some(2));
    }
}
