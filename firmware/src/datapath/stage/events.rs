//! The stage's queues: DP->FW events waiting for the CSR ring (an ACK reports at most
//! `tx::ACK_EVENTS`; the stage checks for room before it takes an input), and control packets
//! waiting for a port.

use crate::csr_queue::CsrQueue;
use crate::ring::Ring;

/// Entries the stage buffers.
pub const EVENT_CAP: usize = 256;

/// The DP->FW event queue.
pub type Events = CsrQueue<EVENT_CAP>;

/// Control packets the stage buffers (ACKs, NACKs, probes, probe replies).
pub const CTRL_CAP: usize = 64;

/// The control packet queue: sent ahead of data; a packet that finds it full is dropped and
/// counted (control packets are repeated by their protocol: the next ACK, the next probe).
pub struct Ctrl {
    ring: Ring<crate::datapath::packet::Packet, CTRL_CAP>,
    /// Control packets dropped because the queue was full.
    pub dropped: u64,
}

impl Ctrl {
    /// An empty queue.
    pub const EMPTY: Ctrl = Ctrl {
        ring: Ring::new(crate::datapath::packet::Packet::FILL),
        dropped: 0,
    };

    /// Queue `p` (or count it dropped).
    #[inline]
    pub fn push(&mut self, p: crate::datapath::packet::Packet) {
        if self.ring.push_back(p).is_err() {
            self.dropped += 1;
        }
    }

    /// Queue the packet `make` returns, made in its slot (or count it dropped).
    #[inline]
    pub fn push_with(&mut self, make: impl FnOnce() -> crate::datapath::packet::Packet) {
        if !self.ring.push_back_with(make) {
            self.dropped += 1;
        }
    }

    /// Queue the packet `fill` writes, written in its slot (or count it dropped; `fill` is
    /// called all the same, on a scratch packet).
    #[inline]
    pub fn push_in(&mut self, fill: impl FnOnce(&mut crate::datapath::packet::Packet)) {
        if !self
            .ring
            .push_back_in(crate::datapath::packet::Packet::FILL, fill)
        {
            self.dropped += 1;
        }
    }

    /// The oldest packet.
    #[inline]
    pub fn pop(&mut self) -> Option<crate::datapath::packet::Packet> {
        self.ring.pop_front()
    }

    /// The oldest packet, moved into `out` (straight from its slot); `false` when none.
    #[inline]
    pub fn pop_into(&mut self, out: &mut crate::datapath::packet::Packet) -> bool {
        match self.ring.front() {
            Some(p) => {
                *out = *p;
                self.ring.drop_front(1);
                true
            }
            None => false,
        }
    }

    /// No packet queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}
