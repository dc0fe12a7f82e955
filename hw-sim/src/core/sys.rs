//! The simulator's only `unsafe`: hints to the CPU and the kernel about memory.
//!
//! - A cache prefetch asks the CPU to start loading a cache line without waiting for it: it
//!   reads nothing architecturally and cannot fault, so no value and no result ever depends on
//!   it. The event loop uses it to start the cache misses of the next event while the current
//!   one runs ([`crate::core::Handler::prefetch`]).
//! - [`back_with_huge_pages`] asks Linux to back the process's heap with transparent huge
//!   pages: a large model (a thousand NICs is a few hundred MB of state, touched in no
//!   particular order) otherwise spends much of its time in TLB misses. Advice about backing
//!   pages changes no byte of memory, so no result depends on it either.
#![allow(unsafe_code)]

/// Cache line size assumed for [`prefetch`].
const LINE: usize = 64;

/// Starts loading every cache line of `*r` (a hint: no effect on any value; nothing on
/// targets without a prefetch instruction).
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    prefetch_lines::<T>(r, core::mem::size_of::<T>());
}

/// Starts loading the cache lines of the first `bytes` bytes of `*r` (at most its size): for
/// a large value whose hot fields come first. A hint, like [`prefetch`].
#[inline(always)]
pub fn prefetch_prefix<T>(r: &T, bytes: usize) {
    prefetch_lines::<T>(r, core::mem::size_of::<T>().min(bytes));
}

/// Prefetches the lines of the first `size` bytes at `r`. The count of lines does not depend
/// on where `r` lies within its line, so that it is a constant for a constant `size` and the
/// loop unrolls into bare prefetches: `size` bytes span at most `(size + LINE - 2) / LINE + 1`
/// lines (one more than they fill when they straddle a boundary; the last prefetch may then
/// name the line just past `*r`, which is harmless: see `line`), exactly `size / LINE` when `T`
/// is line-aligned and `size` a multiple of the line.
#[inline(always)]
fn prefetch_lines<T>(r: &T, size: usize) {
    let first = (r as *const T).cast::<u8>();
    let size = size.max(1);
    let lines = if core::mem::align_of::<T>().is_multiple_of(LINE) {
        size.div_ceil(LINE)
    } else {
        (size + LINE - 2) / LINE + 1
    };
    for i in 0..lines {
        line(first.wrapping_add(i * LINE));
    }
}

/// Starts loading the cache line where `slice` begins (nothing for an empty slice): the start
/// of a buffer a handler is about to read. A hint, like [`prefetch`].
#[inline(always)]
pub fn prefetch_start<T>(slice: &[T]) {
    prefetch_head(slice.first());
}

/// Starts loading the cache line where `*x` begins (nothing for `None`): the head of a queue
/// a handler is about to read (`VecDeque::front`, cheaper than its `as_slices`). A hint, like
/// [`prefetch`].
#[inline(always)]
pub fn prefetch_head<T>(x: Option<&T>) {
    if let Some(x) = x {
        line((x as *const T).cast::<u8>());
    }
}

#[inline(always)]
fn line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` only hints the cache: it does not access memory architecturally
    // and never faults, whatever the address (here one inside a live reference, or in the
    // line just past it). SSE, which provides it, is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Size of a transparent huge page (x86_64 and aarch64 with 4 KiB pages).
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// `MADV_COLLAPSE` (Linux 6.1): collapse the range into huge pages now (the kernel's uapi value;
/// older kernels refuse it with `EINVAL`, which leaves the pages as they were).
#[cfg(target_os = "linux")]
const MADV_COLLAPSE: libc::c_int = 25;

/// Heap the C allocator adds beyond each request when it grows its heap (glibc's `M_TOP_PAD`):
/// room that [`back_with_huge_pages`] advises before it is touched, so what a run allocates
/// later faults in as huge pages too.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TOP_PAD: libc::c_int = 256 << 20;
/// Requests below this come from the heap rather than a mapping of their own (glibc's
/// `M_MMAP_THRESHOLD`, at its largest): large vectors then grow inside the advised heap.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// The heap's free top beyond which the C allocator gives memory back (glibc's
/// `M_TRIM_THRESHOLD`): large, so that advised room is not returned and mapped again without
/// the advice.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 1 << 30;

/// Tunes the C allocator (glibc) so that what a large model allocates from now on lands where
/// [`back_with_huge_pages`] reaches, then advises the room it made: the main heap (one arena
/// for every thread when `one_arena`; each thread's arena otherwise) grows in large steps and
/// keeps what it frees, no request below 32 MiB is mapped on its own, and the heap is grown and
/// advised now, before anything is built in it, so that what follows faults in as huge pages
/// instead of being copied into them later. Process-wide and permanent; nothing elsewhere, and
/// no result depends on it.
pub fn prepare_heap_for_huge_pages(one_arena: bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only sets allocator parameters (it takes the allocator's lock);
        // an out-of-range value is refused with 0 and changes nothing. Allocations already
        // made are not affected.
        unsafe {
            if one_arena {
                libc::mallopt(libc::M_ARENA_MAX, 1);
            }
            libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        }
        // A request just below the mapping threshold comes from this thread's heap, which
        // grows by it plus the top pad; freed, it stays as room (never touched: no memory).
        drop(Vec::<u8>::with_capacity(
            MMAP_THRESHOLD as usize - (1 << 20),
        ));
        advise(false);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = one_arena;
}

/// Asks Linux to back the process's anonymous read-write memory (the heap and the allocator's
/// arenas, as `/proc/self/maps` lists them now) with transparent huge pages: each whole 2 MiB
/// extent is marked `MADV_HUGEPAGE` (later faults there get huge pages) and collapsed into huge
/// pages at once (`MADV_COLLAPSE`). Call it after building a large model, before running it.
/// Returns the bytes the kernel accepted the advice for (0 where it refused, e.g. huge pages off
/// or an older kernel, and on other systems): an optimisation only, results never depend on it.
pub fn back_with_huge_pages() -> usize {
    advise(true)
}

/// Marks every whole 2 MiB extent of the anonymous read-write mappings `MADV_HUGEPAGE` and,
/// with `collapse`, collapses it into huge pages now. Returns the bytes marked.
fn advise(collapse: bool) -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return 0;
        };
        anonymous_extents(&maps)
            .map(|(start, len)| {
                // SAFETY: `madvise` with MADV_HUGEPAGE or MADV_COLLAPSE changes how the pages
                // of a mapped range are backed, never their contents (a collapse copies them
                // into a huge page under the kernel's locks; an extent with no page present is
                // left alone), and fails harmlessly on a range that is not (or no longer)
                // mapped. The range is 2 MiB aligned and lies in an anonymous private mapping
                // the kernel listed for this process.
                let advised =
                    unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) }
                        == 0;
                if advised && collapse {
                    // SAFETY: as above.
                    unsafe {
                        libc::madvise(start as *mut libc::c_void, len, MADV_COLLAPSE);
                    }
                }
                if advised {
                    len
                } else {
                    0
                }
            })
            .sum()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = collapse;
        0
    }
}

/// The whole 2 MiB extents `(start, len)` of the anonymous private read-write mappings in the
/// text of a `/proc/PID/maps` file (the heap and unnamed mappings; not stacks or files).
#[cfg(target_os = "linux")]
fn anonymous_extents(maps: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    maps.lines().filter_map(|l| {
        let mut f = l.split_ascii_whitespace();
        let (range, perms, inode) = (f.next()?, f.next()?, f.nth(2)?);
        let name = f.next();
        if perms != "rw-p" || inode != "0" || !matches!(name, None | Some("[heap]")) {
            return None;
        }
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        let start = a.checked_next_multiple_of(HUGE_PAGE)?;
        let end = b / HUGE_PAGE * HUGE_PAGE;
        let len = end.checked_sub(start).filter(|l| *l > 0)?;
        Some((start, len))
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn picks_whole_huge_pages_of_anonymous_mappings() {
        let maps = "\
55d0c8a00000-55d0c8a21000 r--p 00000000 08:01 123 /usr/bin/mrc-sim
55d0c9000000-55d0d1300000 rw-p 00000000 00:00 0 [heap]
7f0000100000-7f0000700000 rw-p 00000000 00:00 0
7f0000800000-7f0000900000 rw-p 00000000 00:00 0
7f0001000000-7f0001400000 rw-p 00000000 08:01 77 /tmp/file
7ffd00000000-7ffd00400000 rw-p 00000000 00:00 0 [stack]
";
        let got: Vec<(usize, usize)> = anonymous_extents(maps).collect();
        assert_eq!(
            got,
            [
                // The heap: 0x55d0c9000000 is aligned; its end rounds down.
                (0x55d0_c900_0000, 0x55d0_d120_0000 - 0x55d0_c900_0000),
                // 1 MiB .. 7 MiB: the extents 2..6 MiB.
                (0x7f00_0020_0000, 0x40_0000),
            ]
        );
        // Advising the live process's own memory works or is refused, never harms: a value
        // written before is still there after.
        let v = vec![0x5au8; 8 << 20];
        back_with_huge_pages();
        assert!(v.iter().all(|b| *b == 0x5a));
    }
}
