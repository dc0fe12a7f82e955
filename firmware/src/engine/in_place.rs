//! [`Engine::init_in_place`]: the engine built where it will live (see `crate::in_place`).
#![allow(unsafe_code)]

use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;

use super::fw_qp::{Cmds, QpContext};
use super::timer_wheel::Timers;
use super::{Engine, EngineConfig, EngineCounters, EngineError};
use crate::capacity::{Capacity, Slots};
use crate::in_place::uninit;

impl<C: Capacity> Engine<C> {
    /// Initialise `slot` as [`Engine::new`]`(cfg)` would, in place: each field written where
    /// it lives, the QP table one QP at a time, so no engine-sized value is on the stack (a
    /// NIC core builds its engine at boot in an uninitialised `static`). Returns the engine,
    /// now initialised; whatever `slot` held is overwritten, never dropped (the engine owns
    /// no resources).
    ///
    /// # Errors
    /// As [`Engine::new`] (`slot` is left as it was).
    pub fn init_in_place(
        slot: &mut MaybeUninit<Self>,
        cfg: EngineConfig,
    ) -> Result<&mut Self, EngineError> {
        let tick = Self::check(&cfg)?;
        let p = slot.as_mut_ptr();
        // SAFETY: `p` is valid for writes and aligned for one `Engine` (from `&mut
        // MaybeUninit`), and nothing else refers to it while `slot` is borrowed. Each field is
        // initialised once through a raw place projection (no reference to uninitialised
        // memory but the `MaybeUninit` views of the tables, built in place by `Slots`);
        // `fields_written_in_place` stops compiling when a field is added without being
        // written here. So every field is initialised before `assume_init_mut`.
        unsafe {
            addr_of_mut!((*p).cfg).write(cfg);
            <C::PerQp<C::FwQp> as Slots<C::FwQp>>::init_in_place(
                uninit(addr_of_mut!((*p).qps)),
                |i| C::FwQp::new(i as u32),
            );
            addr_of_mut!((*p).timers).write(C::Timers::with_tick(tick));
            addr_of_mut!((*p).cmds).write(Cmds::EMPTY);
            <C::PerQp<bool> as Slots<bool>>::init_in_place(
                uninit(addr_of_mut!((*p).dirty)),
                |_| false,
            );
            addr_of_mut!((*p).any_dirty).write(false);
            addr_of_mut!((*p).counters).write(EngineCounters::default());
            addr_of_mut!((*p)._c).write(PhantomData);
            Ok(slot.assume_init_mut())
        }
    }

    /// The fields [`Self::init_in_place`] writes, as an exhaustive pattern.
    #[allow(dead_code)]
    fn fields_written_in_place(e: &Self) {
        let Engine {
            cfg: _,
            qps: _,
            timers: _,
            cmds: _,
            dirty: _,
            any_dirty: _,
            counters: _,
            _c: _,
        } = e;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::boxed::Box;
    use std::vec::Vec;

    use super::*;
    use crate::engine::cc::NsccParams;
    use crate::engine::ev_state::EvConfig;
    use crate::engine::{CcProfile, EvProfile, QpAttrs, QpState};
    use mrc_abi::device::csr::CsrEntry;
    use mrc_abi::wire::EvFormat;

    crate::capacity! {
        struct Small {
            qps: 2, evs: 64, planes: 2, window_psns: 128, send_queue: 8, recv_queue: 8,
            regions: 2,
        }
    }

    /// What an engine says after a QP was made and connected, and a plane went down.
    fn transcript(e: &mut Engine<Small>) -> Vec<CsrEntry> {
        let q = e.create_qp().unwrap();
        let cc = CcProfile::Nscc(NsccParams::for_link(100_000_000_000, 10_000, 1024).unwrap());
        let ev = EvProfile {
            table: EvConfig::new(64, 2),
            format: EvFormat::Udp,
            value_base: 7,
        };
        let a = QpAttrs::connect(ev, cc, 1).window(1, 8);
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            e.modify_qp(q, s, &a, 0).unwrap();
        }
        e.handle_plane_down(5, 1);
        let mut out = std::vec![CsrEntry::ZERO; 256];
        let n = e.poll_commands(&mut out);
        out.truncate(n);
        out
    }

    #[test]
    fn built_in_place_over_garbage_is_the_engine_new_builds() {
        let mut by_value = Engine::<Small>::new(EngineConfig::default()).unwrap();
        let mut slot: Box<MaybeUninit<Engine<Small>>> = Box::new(MaybeUninit::uninit());
        // Garbage where the engine goes: nothing of it may survive.
        // SAFETY (test): writing bytes over a `MaybeUninit` is always allowed.
        unsafe { core::ptr::write_bytes(slot.as_mut_ptr(), 0xA5, 1) };
        let in_place = Engine::init_in_place(&mut slot, EngineConfig::default()).unwrap();
        assert_eq!(in_place.counters(), EngineCounters::default());
        assert_eq!(in_place.poll_timeout(), None);
        let want = transcript(&mut by_value);
        assert!(!want.is_empty());
        assert_eq!(transcript(in_place), want);
        assert_eq!(in_place.counters(), by_value.counters());
        let bad = EngineConfig {
            tick_ns: 0,
            ..EngineConfig::default()
        };
        assert_eq!(
            Engine::<Small>::init_in_place(&mut slot, bad).err(),
            Some(EngineError::ZeroTick)
        );
    }
}
