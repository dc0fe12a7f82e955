//! IOVA allocation: first fit over a fixed window, freed ranges coalesce.

use std::collections::BTreeMap;

use super::Iova;

/// Hands out aligned, disjoint IOVA ranges inside `[base, base + span)`.
///
/// Bounded: it never returns a range outside its window, and its free list has at most one entry
/// per allocation plus one.
#[derive(Clone, Debug)]
pub struct IovaAllocator {
    base: u64,
    span: u64,
    /// Free ranges, start -> length; disjoint and never adjacent (adjacent ones are merged).
    free: BTreeMap<u64, u64>,
}

/// Why a free was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("IOVA range {iova} + {size:#x} is not an allocated range of this window")]
pub struct BadFree {
    /// Start of the refused range.
    pub iova: Iova,
    /// Its size.
    pub size: u64,
}

impl IovaAllocator {
    /// A window of `span` bytes at `base`. A window that would wrap past `u64::MAX` is cut.
    pub fn new(base: Iova, span: u64) -> IovaAllocator {
        let span = span.min(u64::MAX - base.0);
        let mut free = BTreeMap::new();
        if span > 0 {
            free.insert(base.0, span);
        }
        IovaAllocator {
            base: base.0,
            span,
            free,
        }
    }

    /// Window start.
    pub fn base(&self) -> Iova {
        Iova(self.base)
    }
    /// Window size.
    pub fn span(&self) -> u64 {
        self.span
    }
    /// Bytes currently free.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    /// Allocates `size` bytes aligned to `align` (a power of two); `None` when no free range
    /// fits or the arguments are invalid (zero size, `align` not a power of two).
    pub fn alloc(&mut self, size: u64, align: u64) -> Option<Iova> {
        if size == 0 || !align.is_power_of_two() {
            return None;
        }
        let (start, len, at) = self.free.iter().find_map(|(&start, &len)| {
            let at = start.checked_add(align - 1)? & !(align - 1);
            let end = at.checked_add(size)?;
            (end <= start + len).then_some((start, len, at))
        })?;
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        let tail = start + len - (at + size);
        if tail > 0 {
            self.free.insert(at + size, tail);
        }
        Some(Iova(at))
    }

    /// Takes the part of `size` bytes at `iova` that lies in the window out of the free list,
    /// for memory mapped at an IOVA the allocator did not choose (user memory at IOVA =
    /// address). Returns that part (to [`IovaAllocator::free`] later), or `None` when the range
    /// misses the window.
    ///
    /// # Errors
    /// Part of the range in the window is already allocated (or reserved).
    pub fn reserve(&mut self, iova: Iova, size: u64) -> Result<Option<(Iova, u64)>, BadFree> {
        let bad = BadFree { iova, size };
        let end = iova.0.checked_add(size).ok_or(bad)?;
        let (lo, hi) = (iova.0.max(self.base), end.min(self.base + self.span));
        if lo >= hi {
            return Ok(None);
        }
        let (start, len) = self
            .free
            .range(..=lo)
            .next_back()
            .map(|(&s, &l)| (s, l))
            .filter(|&(s, l)| s + l >= hi)
            .ok_or(bad)?;
        self.free.remove(&start);
        if lo > start {
            self.free.insert(start, lo - start);
        }
        if start + len > hi {
            self.free.insert(hi, start + len - hi);
        }
        Ok(Some((Iova(lo), hi - lo)))
    }

    /// Returns `size` bytes at `iova` to the window.
    ///
    /// # Errors
    /// The range is outside the window or overlaps a free range (double free).
    pub fn free(&mut self, iova: Iova, size: u64) -> Result<(), BadFree> {
        let bad = BadFree { iova, size };
        let start = iova.0;
        let end = start.checked_add(size).ok_or(bad)?;
        if size == 0 || start < self.base || end > self.base + self.span {
            return Err(bad);
        }
        let prev = self.free.range(..=start).next_back().map(|(&s, &l)| (s, l));
        let next = self.free.range(start..).next().map(|(&s, &l)| (s, l));
        if prev.is_some_and(|(s, l)| s + l > start) || next.is_some_and(|(s, _)| s < end) {
            return Err(bad);
        }
        let (mut new_start, mut new_len) = (start, size);
        if let Some((s, l)) = prev.filter(|&(s, l)| s + l == start) {
            self.free.remove(&s);
            new_start = s;
            new_len += l;
        }
        if let Some((s, l)) = next.filter(|&(s, _)| s == end) {
            self.free.remove(&s);
            new_len += l;
        }
        self.free.insert(new_start, new_len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn aligned_first_fit_and_coalesce() {
        let mut a = IovaAllocator::new(Iova(0x1000), 0x10_0000);
        let x = a.alloc(0x1000, 0x1000).unwrap();
        assert_eq!(x, Iova(0x1000));
        let y = a.alloc(0x1000, 0x20_0000);
        assert_eq!(y, None, "no 2 MiB aligned address in the window");
        let y = a.alloc(0x2000, 0x4000).unwrap();
        assert_eq!(y, Iova(0x4000));
        a.free(x, 0x1000).unwrap();
        assert_eq!(
            a.free(x, 0x1000),
            Err(BadFree {
                iova: x,
                size: 0x1000
            }),
            "double free"
        );
        a.free(y, 0x2000).unwrap();
        assert_eq!(a.free_bytes(), 0x10_0000);
        assert_eq!(a.free.len(), 1, "everything merged back");
        assert!(a.free(Iova(0), 0x1000).is_err(), "outside window");
        assert!(a.free(Iova(u64::MAX - 1), 0x1000).is_err(), "overflow");
        assert_eq!(a.alloc(0, 1), None);
        assert_eq!(a.alloc(1, 3), None);
        assert_eq!(a.alloc(0x10_0001, 1), None, "larger than the window");
    }

    #[test]
    fn reserve_takes_the_window_part_only() {
        let mut a = IovaAllocator::new(Iova(0x10_0000), 0x10_0000);
        assert_eq!(a.reserve(Iova(0), 0x1000), Ok(None), "below the window");
        assert_eq!(
            a.reserve(Iova(0xf_f000), 0x3000),
            Ok(Some((Iova(0x10_0000), 0x2000))),
            "clipped to the window"
        );
        let x = a.alloc(0x1000, 0x1000).unwrap();
        assert_eq!(x, Iova(0x10_2000), "allocation avoids the reserved part");
        assert!(
            a.reserve(Iova(0x10_2000), 0x1000).is_err(),
            "already allocated"
        );
        assert!(
            a.reserve(Iova(0x10_1000), 0x2000).is_err(),
            "overlaps a reservation"
        );
        a.free(Iova(0x10_0000), 0x2000).unwrap();
        a.free(x, 0x1000).unwrap();
        assert_eq!(a.free_bytes(), 0x10_0000);
        assert!(a.reserve(Iova(u64::MAX - 1), 4).is_err(), "overflow");
    }

    proptest! {
        /// Random alloc/free sequences: ranges stay disjoint, aligned and inside the window, and
        /// freeing everything restores one whole free range.
        #[test]
        fn model(ops in proptest::collection::vec((any::<bool>(), 1u64..0x9000, 0u32..4, any::<prop::sample::Index>()), 1..80)) {
            let (base, span) = (0x10_0000u64, 0x4_0000u64);
            let mut a = IovaAllocator::new(Iova(base), span);
            let mut live: Vec<(u64, u64)> = Vec::new();
            for (is_alloc, size, align_pow, pick) in ops {
                if is_alloc || live.is_empty() {
                    let align = 0x1000u64 << align_pow;
                    if let Some(Iova(at)) = a.alloc(size, align) {
                        prop_assert_eq!(at % align, 0);
                        prop_assert!(at >= base && at + size <= base + span);
                        for &(s, l) in &live {
                            prop_assert!(at + size <= s || s + l <= at, "overlap");
                        }
                        live.push((at, size));
                    }
                } else {
                    let (s, l) = live.swap_remove(pick.index(live.len()));
                    prop_assert!(a.free(Iova(s), l).is_ok());
                }
                let used: u64 = live.iter().map(|&(_, l)| l).sum();
                prop_assert_eq!(a.free_bytes() + used, span);
            }
            for (s, l) in live.drain(..) {
                prop_assert!(a.free(Iova(s), l).is_ok());
            }
            prop_assert_eq!(a.free.len(), 1);
        }
    }
}
