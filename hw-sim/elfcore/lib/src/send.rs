//! The crate's one unsafe item: an [`ElfCore`] may move to another thread (the simulator
//! builds its NICs on worker threads and runs them on another).

#![allow(unsafe_code)]

use crate::ElfCore;

// SAFETY: `ElfCore` is `!Send` only because the Unicorn handle it owns (`Unicorn<'static,
// State>`) keeps its engine behind an `Rc`, and the engine's hooks keep `Weak`s to it that
// they upgrade for the length of a callback. Every one of those reference counts belongs to
// the one `ElfCore`: it never clones the handle or hands it out (`ElfCore` has no method
// returning it), and the hooks run only inside `emu_start`, on the thread calling it, which
// holds `&mut ElfCore`. So all the counts move with the value and are only ever touched by
// the thread that owns it; no two threads can reach them at once. The state the hooks
// reach (`State`) is plain owned data (`Send`). Unicorn keeps no per-thread state of an
// engine between `emu_start` calls (it sets QEMU's current CPU on entry).
unsafe impl Send for ElfCore {}

const _: () = {
    const fn state_is_send<T: Send>() {}
    state_is_send::<crate::core::State>();
};
