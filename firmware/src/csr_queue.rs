//! [`CsrQueue`]: a bounded FIFO of 32-byte CSR entries, as the datapath stage and the firmware
//! engine hold them before they reach a ring (the stage's reports, the engine's commands).
//!
//! Producers check for room before an input that may produce (each says how many entries an
//! input produces at most), so nothing is lost: a producer short of room stops taking inputs
//! until the queue drains. An entry pushed past the capacity anyway is a bug, counted in
//! `overflow`.

use mrc_abi::device::csr::{CsrEntry, CsrEntryKind, CsrError, CsrEvent};

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
        self.max_depth = self.max_depth.max(self.ring.len());
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

    /// Move the oldest entries into the front of `out`; returns how many.
    pub fn drain_into(&mut self, out: &mut [CsrEntry]) -> usize {
        let mut n = 0;
        while let Some(slot) = out.get_mut(n) {
            let Some(e) = self.ring.pop_front() else {
                break;
            };
            *slot = e;
            n += 1;
        }
        n
    }
}

/// Entry `e`, whose kind byte the caller found to be `T`'s, checked as `CsrEvent::decode`
/// checks it (a consumer's own path for its frequent kinds).
///
/// # Errors
/// See [`CsrError`].
#[inline(always)]
pub(crate) fn read_as<T: CsrEntryKind>(e: &CsrEntry) -> Result<T, CsrError> {
    e.read_as::<T>()
        .unwrap_or(Err(CsrError::UnknownKind(e.kind_code())))
}
