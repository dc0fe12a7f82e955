//! The queues an image shard's main loop sees in one iteration, as the loop's
//! [`mrc_nicloop::Datapath`]: the DP->FW entries waiting on its core's CSR ring, room for a
//! ring's worth of FW->DP entries, and the host interface's admin command and reply rings.

use std::collections::VecDeque;

use mrc_abi::device::admin::AdminReply;
use mrc_abi::device::csr::CsrEntry;
use mrc_nicloop::{Datapath, RING_ENTRIES};

/// One iteration's view of the queues.
pub(crate) struct Rings<'a> {
    /// DP->FW entries on the core's ring, oldest first.
    events: &'a [CsrEntry],
    consumed: usize,
    /// FW->DP entries published in this iteration.
    orders: &'a mut Vec<CsrEntry>,
    /// Entries published so far after each publication.
    groups: &'a mut Vec<u32>,
    /// FW->DP entries written before this iteration (all taken by the datapath: a step's
    /// entries reach their stage before the core's next step).
    written_before: u32,
    admin: &'a mut VecDeque<[u8; 64]>,
    replies: &'a mut Vec<AdminReply>,
}

impl<'a> Rings<'a> {
    pub(crate) fn new(
        events: &'a [CsrEntry],
        orders: &'a mut Vec<CsrEntry>,
        groups: &'a mut Vec<u32>,
        written_before: u32,
        admin: &'a mut VecDeque<[u8; 64]>,
        replies: &'a mut Vec<AdminReply>,
    ) -> Rings<'a> {
        orders.clear();
        groups.clear();
        Rings {
            events,
            consumed: 0,
            orders,
            groups,
            written_before,
            admin,
            replies,
        }
    }

    /// The DP->FW entries the loop consumed, oldest first.
    pub(crate) fn consumed(&self) -> &[CsrEntry] {
        &self.events[..self.consumed]
    }

    /// Entries published so far after each publication.
    pub(crate) fn groups(&self) -> &[u32] {
        self.groups
    }

    /// FW->DP entries written in this iteration.
    pub(crate) fn written_now(&self) -> u32 {
        self.orders.len() as u32
    }
}

impl Datapath for Rings<'_> {
    fn peek_events(&mut self, out: &mut [CsrEntry]) -> usize {
        let src = &self.events[self.consumed..];
        let n = out.len().min(src.len());
        out[..n].copy_from_slice(&src[..n]);
        n
    }

    fn consume_events(&mut self, n: usize) {
        self.consumed = (self.consumed + n).min(self.events.len());
    }

    fn orders_room(&mut self) -> usize {
        RING_ENTRIES.saturating_sub(self.orders.len())
    }

    fn push_orders(&mut self, entries: &[CsrEntry]) -> usize {
        let n = entries.len().min(self.orders_room());
        self.orders.extend_from_slice(&entries[..n]);
        if n > 0 {
            self.groups.push(self.orders.len() as u32);
        }
        n
    }

    fn orders_written(&self) -> u32 {
        self.written_before.wrapping_add(self.orders.len() as u32)
    }

    fn orders_taken(&mut self) -> u32 {
        self.written_before
    }

    fn pop_admin(&mut self) -> Option<[u8; 64]> {
        self.admin.pop_front()
    }

    fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
        self.replies.push(*reply);
        true
    }
}
