//! The application's own memory made device-visible: [`UserRange`] (the unsafe promise about a
//! range of it) and [`ChunkMap`] (reference-counted page chunks, so overlapping registrations
//! share mappings instead of mapping a page twice).
//!
//! Every backend maps user memory at **IOVA = virtual address** (what real VFIO users such as
//! DPDK and SPDK call IOVA-as-VA): the address the application passes to the NIC in an SGE or
//! hands a peer for RDMA writes is the address of its own bytes.

use std::collections::BTreeMap;
use std::ptr::NonNull;

use super::mem::{RawMem, PAGE_SIZE};
use super::{Error, Result};

/// A range of this process's memory that the caller promises stays usable for DMA.
///
/// Made only by the unsafe [`UserRange::new`]; a backend turns it into a
/// [`super::DmaRegion`] at IOVA = `addr` with [`super::Backend::map_user`].
#[derive(Debug)]
pub struct UserRange {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `UserRange` is an address range, not a reference; the memory is only ever accessed
// through `RawMem`'s volatile raw-pointer operations (see `RawMem`'s `Send`/`Sync`).
unsafe impl Send for UserRange {}
// SAFETY: as for `Send`.
unsafe impl Sync for UserRange {}

impl UserRange {
    /// Describes `len` bytes of this process's memory at `addr`.
    ///
    /// # Safety
    /// Until the [`super::DmaRegion`] made from this range is dropped (the memory region is
    /// deregistered):
    /// - every byte of `addr..addr + len` is mapped, readable memory of this process, and the
    ///   caller does not unmap, remap, `mprotect` or free it;
    /// - the device may write it at any time: the caller reads what the device writes only
    ///   through raw pointers (volatile reads, or after a completion says the write is done),
    ///   never while holding a Rust reference to those bytes;
    /// - while the registration is made and while it is dropped, no other thread writes the
    ///   pages the range touches (whole 4 KiB pages, so bytes of other objects on the first and
    ///   last page count): the vfio-user backend copies those pages to shared memory then.
    ///
    /// # Errors
    /// [`Error::UserMemory`] for a null address, a zero length or a range that wraps around.
    pub unsafe fn new(addr: *mut u8, len: usize) -> Result<UserRange> {
        let bad = |what: &str| Error::UserMemory {
            addr: addr as u64,
            len,
            what: what.to_owned(),
            source: None,
        };
        let ptr = NonNull::new(addr).ok_or_else(|| bad("null address"))?;
        if len == 0 {
            return Err(bad("zero length"));
        }
        if (addr as usize).checked_add(len).is_none() {
            return Err(bad("the range wraps around the address space"));
        }
        Ok(UserRange { ptr, len })
    }

    /// First byte's virtual address (and IOVA).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false: a zero length is refused by [`UserRange::new`].
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The whole pages the range touches: `(first page address, end address)`.
    pub fn pages(&self) -> (u64, u64) {
        let page = PAGE_SIZE as u64;
        let start = self.addr() & !(page - 1);
        // Cannot overflow: `new` checked `addr + len` fits, and the last page ends at or
        // below the top of the address space, which is page aligned.
        let end = (self.addr() + self.len as u64).div_ceil(page) * page;
        (start, end)
    }

    /// The borrowed memory, for a `DmaRegion` (crate-internal).
    pub(crate) fn into_raw(self) -> RawMem {
        RawMem::Borrowed {
            ptr: self.ptr,
            len: self.len,
        }
    }
}

/// Page-aligned chunks of address space with reference counts: a registration *acquires* the
/// chunks covering its pages (creating chunks for the pages no chunk covers yet) and *releases*
/// them when it goes; a chunk is undone when its count reaches zero.
///
/// Chunks never overlap and are never split, so each one can be mapped (and later unmapped) as
/// one unit, which VFIO type1 and vfio-user DMA_UNMAP require.
#[derive(Debug)]
pub(crate) struct ChunkMap<T> {
    chunks: BTreeMap<u64, Chunk<T>>,
}

#[derive(Debug)]
struct Chunk<T> {
    len: u64,
    refs: u32,
    data: T,
}

/// A chunk whose last reference went: `(start, len, data)`, for the caller to undo.
pub(crate) type Released<T> = (u64, u64, T);

impl<T> ChunkMap<T> {
    /// An empty map.
    pub const fn new() -> ChunkMap<T> {
        ChunkMap {
            chunks: BTreeMap::new(),
        }
    }

    /// The chunk starting at `start`: its length and data.
    pub fn get(&self, start: u64) -> Option<(u64, &T)> {
        self.chunks.get(&start).map(|c| (c.len, &c.data))
    }

    /// Number of chunks.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    /// The existing chunks overlapping `start..end` and the gaps between them, in address
    /// order: `Ok(chunk start)` or `Err((gap start, gap end))`.
    fn cover(&self, start: u64, end: u64) -> Vec<std::result::Result<u64, (u64, u64)>> {
        let mut out = Vec::new();
        let mut at = start;
        // A chunk that starts below `start` may still reach into the range.
        let first = self
            .chunks
            .range(..start)
            .next_back()
            .filter(|(s, c)| *s + c.len > start)
            .map(|(s, _)| *s);
        for (&s, c) in first
            .iter()
            .filter_map(|s| self.chunks.get_key_value(s))
            .chain(self.chunks.range(start..end))
        {
            if s > at {
                out.push(Err((at, s)));
            }
            out.push(Ok(s));
            at = at.max(s + c.len);
        }
        if at < end {
            out.push(Err((at, end)));
        }
        out
    }

    /// Takes a reference on every chunk overlapping `start..end`, making a chunk with `make`
    /// for each gap. Returns the starts of the chunks referenced (each once).
    ///
    /// # Errors
    /// `make`'s error, with the starts referenced before it failed: the caller releases them.
    #[allow(clippy::type_complexity)]
    pub fn acquire<E>(
        &mut self,
        start: u64,
        end: u64,
        mut make: impl FnMut(u64, u64) -> std::result::Result<T, E>,
    ) -> std::result::Result<Vec<u64>, (E, Vec<u64>)> {
        let mut taken = Vec::new();
        for piece in self.cover(start, end) {
            match piece {
                Ok(s) => {
                    if let Some(c) = self.chunks.get_mut(&s) {
                        c.refs += 1;
                        taken.push(s);
                    }
                }
                Err((g0, g1)) => match make(g0, g1 - g0) {
                    Ok(data) => {
                        self.chunks.insert(
                            g0,
                            Chunk {
                                len: g1 - g0,
                                refs: 1,
                                data,
                            },
                        );
                        taken.push(g0);
                    }
                    Err(e) => return Err((e, taken)),
                },
            }
        }
        Ok(taken)
    }

    /// Drops one reference on each chunk in `starts`; returns the chunks that lost their last.
    pub fn release(&mut self, starts: &[u64]) -> Vec<Released<T>> {
        let mut gone = Vec::new();
        for s in starts {
            let Some(c) = self.chunks.get_mut(s) else {
                continue;
            };
            c.refs -= 1;
            if c.refs == 0 {
                if let Some(c) = self.chunks.remove(s) {
                    gone.push((*s, c.len, c.data));
                }
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn user_range_checks_and_pages() {
        let mut buf = vec![0u8; 10_000];
        let p = buf.as_mut_ptr();
        // SAFETY: test: the range is never mapped to a device.
        let r = unsafe { UserRange::new(p.wrapping_add(100), 5000) }.unwrap();
        let (s, e) = r.pages();
        assert_eq!(s % 4096, 0);
        assert!(s <= r.addr() && e >= r.addr() + 5000 && e % 4096 == 0);
        assert!(e - s <= 5000 + 2 * 4096);
        // SAFETY: refused before anything is done.
        let null = unsafe { UserRange::new(std::ptr::null_mut(), 1) }.unwrap_err();
        assert!(null.to_string().contains("null address"), "{null}");
        // SAFETY: as above.
        let zero = unsafe { UserRange::new(p, 0) }.unwrap_err();
        assert!(zero.to_string().contains("zero length"), "{zero}");
        // SAFETY: as above.
        let wrap = unsafe { UserRange::new(usize::MAX as *mut u8, 2) }.unwrap_err();
        assert!(wrap.to_string().contains("wraps"), "{wrap}");
    }

    #[test]
    fn overlapping_acquires_share_chunks() {
        let mut m: ChunkMap<u32> = ChunkMap::new();
        let mut made = Vec::new();
        let mut mk = |s, l| {
            made.push((s, l));
            Ok::<u32, ()>(7)
        };
        let a = m.acquire(0x1000, 0x4000, &mut mk).unwrap();
        assert_eq!(a, vec![0x1000]);
        // Overlaps the first chunk's tail and extends past it: one new chunk for the gap.
        let b = m.acquire(0x3000, 0x6000, &mut mk).unwrap();
        assert_eq!(b, vec![0x1000, 0x4000]);
        // Spans both plus gaps on either side.
        let c = m.acquire(0x0000, 0x8000, &mut mk).unwrap();
        assert_eq!(c, vec![0x0000, 0x1000, 0x4000, 0x6000]);
        assert_eq!(
            made,
            vec![
                (0x1000, 0x3000),
                (0x4000, 0x2000),
                (0x0000, 0x1000),
                (0x6000, 0x2000)
            ]
        );
        assert!(m.release(&a).is_empty(), "still referenced by b and c");
        assert!(m.release(&b).is_empty());
        let gone = m.release(&c);
        assert_eq!(gone.len(), 4);
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn failed_make_reports_what_was_taken() {
        let mut m: ChunkMap<()> = ChunkMap::new();
        let first = m
            .acquire(0x2000, 0x3000, |_, _| Ok::<(), &str>(()))
            .unwrap();
        let (e, taken) = m
            .acquire(0x0, 0x4000, |s, _| if s == 0 { Ok(()) } else { Err("no") })
            .unwrap_err();
        assert_eq!(e, "no");
        assert_eq!(taken, vec![0x0, 0x2000]);
        let gone = m.release(&taken);
        assert_eq!(gone.len(), 1, "the new chunk goes, the shared one stays");
        assert_eq!(m.release(&first).len(), 1);
    }

    proptest! {
        /// Random acquire/release sequences against a per-page model: chunks stay disjoint,
        /// every page of a live registration is covered, and a chunk goes exactly when no live
        /// registration touches it.
        #[test]
        fn model(ops in proptest::collection::vec((any::<bool>(), 0u64..24, 1u64..8, any::<prop::sample::Index>()), 1..60)) {
            let mut m: ChunkMap<()> = ChunkMap::new();
            let mut live: Vec<(u64, u64, Vec<u64>)> = Vec::new();
            for (acq, page, pages, pick) in ops {
                if acq || live.is_empty() {
                    let (s, e) = (page * 4096, (page + pages) * 4096);
                    let taken = m.acquire(s, e, |_, _| Ok::<(), ()>(())).unwrap();
                    live.push((s, e, taken));
                } else {
                    let (_, _, taken) = live.swap_remove(pick.index(live.len()));
                    for (s, l, ()) in m.release(&taken) {
                        for (ls, le, _) in &live {
                            prop_assert!(s + l <= *ls || *le <= s, "a chunk in use was undone");
                        }
                    }
                }
                let chunks: Vec<(u64, u64)> = m.chunks.iter().map(|(s, c)| (*s, c.len)).collect();
                for w in chunks.windows(2) {
                    prop_assert!(w[0].0 + w[0].1 <= w[1].0, "chunks overlap");
                }
                for (s, e, _) in &live {
                    let mut p = *s;
                    while p < *e {
                        prop_assert!(chunks.iter().any(|(cs, cl)| *cs <= p && p < cs + cl), "page {p:#x} uncovered");
                        p += 4096;
                    }
                }
            }
        }
    }
}
