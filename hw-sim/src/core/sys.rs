//! The simulator's only `unsafe`: a cache prefetch hint.
//!
//! A prefetch asks the CPU to start loading a cache line without waiting for it: it reads
//! nothing architecturally and cannot fault, so no value and no result ever depends on it. The
//! event loop uses it to start the cache misses of the next event while the current one runs
//! ([`crate::core::Handler::prefetch`]).
#![allow(unsafe_code)]

/// Cache line size assumed for [`prefetch`].
const LINE: usize = 64;

/// Starts loading every cache line of `*r` (a hint: no effect on any value; nothing on
/// targets without a prefetch instruction).
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    let first = (r as *const T).cast::<u8>();
    let size = core::mem::size_of::<T>().max(1);
    let lines = ((first as usize % LINE) + size).div_ceil(LINE);
    for i in 0..lines {
        line(first.wrapping_add(i * LINE));
    }
}

#[inline(always)]
fn line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` only hints the cache: it does not access memory architecturally
    // and never faults, whatever the address (here one inside or just past a live
    // reference). SSE, which provides it, is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
