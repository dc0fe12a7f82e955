//! Building large values where they will live: a NIC image keeps its engine in an
//! uninitialised `static` (`.bss`, none of it carried in the code memory) and writes it there at
//! boot, a piece at a time, so no engine-sized value is ever on the core's small stack.
//!
//! This is the crate's one module with `unsafe` (the engine's own field-by-field writer,
//! `engine::in_place`, is the other half and uses only what is here and raw places).
#![allow(unsafe_code)]

use core::mem::MaybeUninit;

/// Write element `i` of the array in `slot` as `f(i)`, one element at a time (no array-sized
/// temporary); returns the array, now initialised. Whatever `slot` held is overwritten, never
/// dropped.
pub(crate) fn init_array<T, const N: usize>(
    slot: &mut MaybeUninit<[T; N]>,
    mut f: impl FnMut(usize) -> T,
) -> &mut [T; N] {
    let base = slot.as_mut_ptr().cast::<T>();
    for i in 0..N {
        // SAFETY: `[T; N]` is `N` contiguous `T`s, so `base.add(i)` for `i < N` is in bounds
        // of `slot` and aligned for `T`; `write` does not read or drop the old bytes.
        unsafe { base.add(i).write(f(i)) };
    }
    // SAFETY: the loop initialised all `N` elements (a panic in `f` would leave before
    // this, with nothing claimed initialised).
    unsafe { slot.assume_init_mut() }
}

/// View the place of a field of type `T` as `MaybeUninit<T>`, to build it in place.
///
/// # Safety
/// `p` must be valid for writes of a `T`, aligned, and not aliased for the returned lifetime.
pub(crate) unsafe fn uninit<'a, T>(p: *mut T) -> &'a mut MaybeUninit<T> {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout; the caller vouches for `p`.
    unsafe { &mut *p.cast::<MaybeUninit<T>>() }
}
