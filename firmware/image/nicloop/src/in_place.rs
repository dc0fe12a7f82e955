//! Building the loop where it will live: [`NicLoop::init_in_place`].
//!
//! The NIC image keeps its loop in an uninitialised (`.bss`) static and builds it at boot with
//! this, so the engine's initial bytes are not carried in the code memory and no engine-sized
//! value is ever on the core's stack (a by-value `NicLoop::new` may take twice the loop's size
//! in stack, more than the DTCM has left). The engine part is
//! `mrc_firmware::engine::Engine::init_in_place`; the rest is a few KiB written whole.
//!
//! This is the crate's one module with `unsafe`.
#![allow(unsafe_code)]

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;

use mrc_abi::device::csr::CsrEntry;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::csr_queue::CsrQueue;
use mrc_firmware::engine::{Engine, EngineError};
use mrc_firmware::ring::Ring;

use crate::qpn::QpnMap;
use crate::{Fw, LoopConfig, LoopCounters, NicLoop, Ports, WimmNote, BUDGET};

impl<C: Capacity> NicLoop<C> {
    /// Initialise `slot` as [`NicLoop::new`]`(cfg)` would, in place (see the module docs).
    /// Returns the loop, now initialised; whatever `slot` held is overwritten, never dropped
    /// (the loop owns no resources).
    ///
    /// # Errors
    /// The engine refused `cfg.engine` (`slot` is left as it was).
    pub fn init_in_place(
        slot: &mut MaybeUninit<Self>,
        cfg: LoopConfig,
    ) -> Result<&mut Self, EngineError> {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` is valid for writes and aligned for one `NicLoop` (from `&mut
        // MaybeUninit`), and nothing else refers to it while `slot` is borrowed. Each field is
        // initialised once through a raw place projection, the engine through its own
        // in-place constructor over the field's memory viewed as `MaybeUninit` (same layout),
        // which either initialises it or returns the error before anything is claimed
        // initialised; `fields_written_in_place` stops compiling when a field is added
        // without being written here. So every field is initialised before
        // `assume_init_mut`.
        unsafe {
            let fw = addr_of_mut!((*p).fw);
            let engine = &mut *addr_of_mut!((*fw).engine).cast::<MaybeUninit<Engine<C>>>();
            Engine::init_in_place(engine, cfg.engine)?;
            addr_of_mut!((*fw).ports).write(Ports::RESET);
            addr_of_mut!((*fw).map).write(QpnMap::EMPTY);
            addr_of_mut!((*fw).wimm).write(Ring::new(WimmNote::ZERO));
            addr_of_mut!((*fw).out).write(CsrQueue::EMPTY);
            addr_of_mut!((*fw).held).write(None);
            addr_of_mut!((*fw).fence).write(None);
            addr_of_mut!((*fw).mtu_payload).write(cfg.mtu_payload);
            addr_of_mut!((*fw).counters).write(LoopCounters::default());
            addr_of_mut!((*p).buf).write([CsrEntry::ZERO; BUDGET]);
            Ok(slot.assume_init_mut())
        }
    }

    /// The fields [`Self::init_in_place`] writes, as an exhaustive pattern.
    #[allow(dead_code)]
    fn fields_written_in_place(l: &Self) {
        let NicLoop { fw, buf: _ } = l;
        let Fw {
            engine: _,
            ports: _,
            map: _,
            wimm: _,
            out: _,
            held: _,
            fence: _,
            mtu_payload: _,
            counters: _,
        } = fw;
    }
}
