//! Building an engine where it will live: [`Engine::init_in_place`].
//!
//! An engine is mostly QP slots (about 20 KiB each at the NIC's capacities) that start empty.
//! Built as a value ([`Engine::from_checked`]) it is either a compile-time constant, whose
//! bytes a firmware image must then carry as `.data` (96 % zeros, but stored in the code
//! memory and copied at reset), or a run-time temporary about twice its size on the stack.
//! [`Engine::init_in_place`] instead writes each field straight into uninitialised memory (a
//! `.bss` or `.uninit` static): the QP slots get only their empty-slot tag, the control ring
//! its filler one packet at a time, and the small fields (configuration, timer wheel, region
//! table, counters) are written whole. The largest temporary is the timer wheel (about 1 KiB
//! plus 32 bytes per timer).
//!
//! This is the crate's one module with `unsafe`.
#![allow(unsafe_code)]

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;

use heapless::Deque;

use super::{CheckedConfig, Engine, EngineCounters};
use crate::datapath::placement::PlacementTable;
use crate::engine::conn::Qp;
use crate::engine::packet::TxPacket;
use crate::engine::ring::Ring;
use crate::engine::timer_wheel::TimerWheel;

impl<
        const Q: usize,
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
        const R: usize,
        const TM: usize,
    > Engine<Q, EVS, P, WIN, WORDS, SQ, RQ, R, TM>
{
    /// Initialise `slot` as [`Engine::from_checked`]`(c)` would, without an engine-sized
    /// value anywhere: see the module docs. Returns the engine, now initialised; whatever
    /// `slot` held before is overwritten (never dropped: an engine owns no resources).
    pub fn init_in_place(slot: &mut MaybeUninit<Self>, c: CheckedConfig) -> &mut Self {
        let e = slot.as_mut_ptr();
        // SAFETY: `e` points to writable, aligned memory for one `Self` (it comes from a
        // `&mut MaybeUninit<Self>`). Every field of `Self` is written exactly once below
        // through a raw place projection (no reference to uninitialised memory is made), and
        // `fields_written_in_place` fails to compile when a field is added without
        // being listed here, so after the writes every byte that matters is initialised and
        // `assume_init_mut` is sound.
        unsafe {
            addr_of_mut!((*e).cfg).write(c.cfg);
            let qps = addr_of_mut!((*e).qps).cast::<Option<Qp<EVS, P, WIN, WORDS, SQ, RQ>>>();
            for i in 0..Q {
                // Writing `None` stores the slot's tag only (no QP-sized temporary); checked
                // on riscv32 by the image's stack frame sizes.
                qps.add(i).write(None);
            }
            addr_of_mut!((*e).regions).write(PlacementTable::new());
            Ring::init_in_place(addr_of_mut!((*e).ctrl), TxPacket::FILL);
            addr_of_mut!((*e).ev_events).write(Deque::new());
            addr_of_mut!((*e).timers).write(TimerWheel::with_tick(c.tick_ns));
            addr_of_mut!((*e).tx_rr).write(0);
            addr_of_mut!((*e).tx_rr_slot).write(0);
            addr_of_mut!((*e).tx_burst).write(0);
            addr_of_mut!((*e).retx_q).write(Ring::new(0));
            addr_of_mut!((*e).retx_queued).write([false; Q]);
            addr_of_mut!((*e).cq_rr).write(0);
            addr_of_mut!((*e).counters).write(EngineCounters::ZERO);
            slot.assume_init_mut()
        }
    }

    /// The list of fields [`Self::init_in_place`] writes, as an exhaustive pattern: adding a
    /// field to `Engine` breaks this until the field is written there too.
    #[allow(dead_code)]
    const fn fields_written_in_place(e: &Self) {
        let Engine {
            cfg: _,
            qps: _,
            regions: _,
            ctrl: _,
            ev_events: _,
            timers: _,
            tx_rr: _,
            tx_rr_slot: _,
            tx_burst: _,
            retx_q: _,
            retx_queued: _,
            cq_rr: _,
            counters: _,
        } = e;
    }
}

impl<T: Copy, const N: usize> Ring<T, N> {
    /// Initialise the ring at `r` as [`Ring::new`]`(fill)`, one slot at a time.
    ///
    /// # Safety
    /// `r` must be valid for writes of one `Ring<T, N>` and aligned.
    pub(in crate::engine) unsafe fn init_in_place(r: *mut Self, fill: T) {
        // SAFETY: the caller guarantees `r` is writable and aligned; each element and the two
        // indices are written once through raw place projections.
        unsafe {
            let buf = addr_of_mut!((*r).buf).cast::<T>();
            for i in 0..N {
                buf.add(i).write(fill);
            }
            addr_of_mut!((*r).head).write(0);
            addr_of_mut!((*r).len).write(0);
        }
    }
}
