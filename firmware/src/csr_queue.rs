//! [`CsrQueue`]: a bounded FIFO of 32-byte CSR entries, as the datapath stage and the firmware
//! engine hold them before they reach a ring (the stage's reports, the engine's commands).
//!
//! Producers check for room before an input that may produce (each says how many entries an
//! input produces at most), so nothing is lost: a producer short of room stops taking inputs
//! until the queue drains. An entry pushed past the capacity anyway is a bug, counted in
//! `overflow`.

use mrc_abi::device::csr::{CsrEntry, CsrEvent};

use crate::ring::Ring;

/// A FIFO of at most `N` CSR entries. See the module docs.
pub struct CsrQueue<const N: usize> {
    ring: Ring<CsrEntry, N>,
    /// Entries pushed with no room (never expected: producers check first).
    pub overflow: u64,
    /// Most entries held at once.
    pub max_depth: usize,
}

impl<const N: usize> CsrQueue<N> {
    /// An empty queue.
    pub const EMPTY: Self = CsrQueue {
        ring: Ring::new(CsrEntry::ZERO),
        overflow: 0,
        max_depth: 0,
    };

    /// Queue `e`, encoded.
    #[inline]
    pub fn push(&mut self, e: CsrEvent) {
        self.push_entry(e.encode());
    }

    /// Queue an encoded entry.
    #[inline]
    pub fn push_entry(&mut self, e: CsrEntry) {
        if self.ring.push_back(e).is_err() {
            self.overflow += 1;
        }
        // (a new maximum is rare: a compare, not a store per push)
        if self.ring.len() > self.max_depth {
            self.max_depth = self.ring.len();
        }
    }

    /// Room left.
    #[inline]
    pub fn room(&self) -> usize {
        self.ring.room()
    }

    /// Entries held.
    #[inline]
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// No entry held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// The oldest entry.
    #[inline]
    pub fn pop(&mut self) -> Option<CsrEntry> {
        self.ring.pop_front()
    }

    /// The entries held, oldest first, where they sit: the run from the oldest to the end of
    /// the ring's array, then the run that wrapped to its start (empty unless they wrap). A
    /// consumer reads them in place and moves the consumer index with [`Self::consume`], as
    /// firmware reads a CSR ring in NIC memory.
    #[inline]
    pub fn as_slices(&self) -> (&[CsrEntry], &[CsrEntry]) {
        self.ring.as_slices()
    }

    /// The `n` oldest entries were consumed (all of them when fewer are held).
    #[inline]
    pub fn consume(&mut self, n: usize) {
        self.ring.drop_front(n);
    }

    /// Move the oldest entries into the front of `out` (copies of what [`Self::as_slices`]
    /// shows, then [`Self::consume`]); returns how many.
    pub fn drain_into(&mut self, out: &mut [CsrEntry]) -> usize {
        let (a, b) = self.ring.as_slices();
        let n = copy_front(a, b, out);
        self.ring.drop_front(n);
        n
    }
}

/// Copy the entries of `a` then `b` into the front of `out`, as many as fit; returns how many.
pub fn copy_front(a: &[CsrEntry], b: &[CsrEntry], out: &mut [CsrEntry]) -> usize {
    let na = a.len().min(out.len());
    let nb = b.len().min(out.len() - na);
    let (oa, ob) = out.split_at_mut(na);
    // (often nothing waits in the queue itself: no call then either)
    if na > 0 {
        oa.copy_from_slice(a.get(..na).unwrap_or_default());
    }
    // (the second run is empty unless the entries wrap the ring's end: no call then)
    if nb > 0 {
        if let (Some(dst), Some(src)) = (ob.get_mut(..nb), b.get(..nb)) {
            dst.copy_from_slice(src);
        }
    }
    na + nb
}
