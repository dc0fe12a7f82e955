//! The crate's unsafe items: an engine and a core's saved registers may move to another
//! thread, so an [`crate::ElfCore`] may (the simulator builds its NICs on worker threads and
//! runs them on another), and the cores on different threads may share an engine.

#![allow(unsafe_code)]

use crate::engine::{Cpu, Engine};

// SAFETY: `Engine` is `!Send` only because the Unicorn handle it owns (`Unicorn<'static,
// Slot>`) keeps its engine behind an `Rc`, and the engine's hooks keep `Weak`s to it that
// they upgrade for the length of a callback. Every one of those reference counts belongs to
// the one `Engine`: it never clones the handle or hands it out, and the hooks run only inside
// `emu_start`, on the thread calling it through `&mut Engine`. An `Engine` is only ever built
// into an `Arc<Mutex<Engine>>` (`Engine::for_code`, `Engine::private`) and reached through
// that mutex, so the counts are touched by one thread at a time, with the mutex ordering
// them. The state the hooks reach (`Slot`: a core's `State`, the code) is plain owned data
// (`Send`). Unicorn keeps no per-thread state of an engine between `emu_start` calls (it
// sets QEMU's current CPU on entry).
unsafe impl Send for Engine {}

// SAFETY: a `Cpu` is a Unicorn context holding CPU registers only (the engines keep the
// default context mode, registers without memory): a heap block the `Cpu` owns alone, which
// `uc_context_save` / `uc_context_restore` copy to and from an engine under that engine's
// lock and `uc_context_free` frees without reaching any engine. Nothing ties it to a thread.
unsafe impl Send for Cpu {}

const _: () = {
    const fn is_send<T: Send>() {}
    is_send::<crate::core::State>();
    is_send::<crate::ElfCore>();
};
