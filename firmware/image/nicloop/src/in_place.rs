//! Building the loop where it will live: [`NicLoop::init_in_place`].
//!
//! The NIC image keeps its loop in an uninitialised (`.bss`) static and builds it at boot with
//! this, so the engine's initial bytes are not `.data` (which the image would have to carry in
//! its code memory) and no engine-sized value is ever on the stack. The engine part is
//! [`mrc_firmware::engine::Engine::init_in_place`]; the rest is a few hundred bytes written
//! whole.
//!
//! This is the crate's one module with `unsafe`.
#![allow(unsafe_code)]

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;

use mrc_firmware::engine::ring::Ring;
use mrc_firmware::engine::CheckedConfig;

use super::{LoopCounters, NicEngine, NicLoop, Ports, HELD_FILL, WIMM_FREE, WIMM_PENDING};

impl NicLoop {
    /// Initialise `slot` as [`NicLoop::from_checked`]`(c)` would, in place (see the module
    /// docs). Returns the loop, now initialised; whatever `slot` held is overwritten, never
    /// dropped (the loop owns no resources).
    pub fn init_in_place(slot: &mut MaybeUninit<Self>, c: CheckedConfig) -> &mut Self {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` is writable and aligned for one `NicLoop` (from `&mut MaybeUninit`).
        // Each field is initialised once through a raw place projection, the engine through
        // its own in-place constructor over the field's memory viewed as `MaybeUninit` (same
        // layout); `fields_written_in_place` stops compiling when a field is added without
        // being written here. So every field is initialised before `assume_init_mut`.
        unsafe {
            let engine = &mut *addr_of_mut!((*p).engine).cast::<MaybeUninit<NicEngine>>();
            NicEngine::init_in_place(engine, c);
            addr_of_mut!((*p).ports).write(Ports::RESET);
            addr_of_mut!((*p).wimm).write([WIMM_FREE; WIMM_PENDING]);
            addr_of_mut!((*p).held).write(Ring::new(HELD_FILL));
            addr_of_mut!((*p).counters).write(LoopCounters::ZERO);
            slot.assume_init_mut()
        }
    }

    /// The fields [`Self::init_in_place`] writes, as an exhaustive pattern.
    #[allow(dead_code)]
    const fn fields_written_in_place(l: &Self) {
        let NicLoop {
            engine: _,
            ports: _,
            wimm: _,
            held: _,
            counters: _,
        } = l;
    }
}
