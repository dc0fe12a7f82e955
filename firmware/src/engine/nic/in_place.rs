//! Building an engine where it will live: [`Engine::init_in_place`].
//!
//! An engine is mostly QP slots (about 20 KiB each at the NIC's capacities) that start empty.
//! Built as a value ([`Engine::from_checked`]) it is either a compile-time constant, whose
//! bytes a firmware image must then carry as `.data` (96 % zeros, but stored in the code
//! memory and copied at reset), or a run-time temporary about twice its size on the stack.
//! [`Engine::init_in_place`] instead writes each field straight into uninitialised memory (a
//! `.bss` or `.uninit` static): the QP slots get only their free flag, the control ring
//! its filler one packet at a time, and the small fields (configuration, timer wheel, region
//! table, counters) are written whole. The largest temporary is the timer wheel (about 1 KiB
//! plus 32 bytes per timer).
//!
//! QPs are built where they live too: a QP slot ([`QpSlot`]) holds a flag and uninitialised
//! room for one QP, and creating or resetting a QP ([`QpSlot::open`]) writes its fields there,
//! the EV table's entries one at a time ([`EvTable::reset`]). Built as values, a QP (about
//! 20 KiB) and its EV table (about 11 KiB) were copied through `Result` and `Option`
//! temporaries: the admin path that creates and configures a QP took 81 KiB of stack on the
//! NIC core.
//!
//! This is the crate's one module with `unsafe`.
#![allow(unsafe_code)]

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;

use heapless::Deque;

use mrc_abi::wire::EvFormat;

use super::{CheckedConfig, Engine, EngineCounters};
use crate::datapath::placement::PlacementTable;
use crate::datapath::Sprayer;
use crate::engine::cc::{Cc, FixedWindow};
use crate::engine::conn::{Qp, StallCounters, TIMER_KINDS};
use crate::engine::ev_state::{Ev, EvConfig, EvCounters, EvError, EvMask, EvTable, MAX_PLANES};
use crate::engine::packet::TxPacket;
use crate::engine::qp::QpState;
use crate::engine::ring::Ring;
use crate::engine::sprt::SprtConfig;
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
            let qps = addr_of_mut!((*e).qps).cast::<QpSlot<EVS, P, WIN, WORDS, SQ, RQ>>();
            for i in 0..Q {
                // Only the flag: a free slot's QP room stays uninitialised.
                addr_of_mut!((*qps.add(i)).used).write(false);
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

/// One QP slot of an engine: a QP, or room for one (see the module docs). The slot is the
/// only owner of the QP's memory; a free slot's room is uninitialised.
pub(crate) struct QpSlot<
    const EVS: usize,
    const P: usize,
    const WIN: usize,
    const WORDS: usize,
    const SQ: usize,
    const RQ: usize,
> {
    /// The room holds a QP (written by [`QpSlot::open`]).
    used: bool,
    qp: MaybeUninit<Qp<EVS, P, WIN, WORDS, SQ, RQ>>,
}

impl<
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
    > QpSlot<EVS, P, WIN, WORDS, SQ, RQ>
{
    /// A free slot.
    pub(crate) const FREE: Self = QpSlot {
        used: false,
        qp: MaybeUninit::uninit(),
    };

    /// The QP, if the slot holds one.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Qp<EVS, P, WIN, WORDS, SQ, RQ>> {
        if self.used {
            // SAFETY: `used` is set only by `open`, after every field of the QP was written.
            Some(unsafe { self.qp.assume_init_ref() })
        } else {
            None
        }
    }

    /// The QP, if the slot holds one.
    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut Qp<EVS, P, WIN, WORDS, SQ, RQ>> {
        if self.used {
            // SAFETY: as in `get`.
            Some(unsafe { self.qp.assume_init_mut() })
        } else {
            None
        }
    }

    /// Whether the slot holds no QP.
    pub(crate) fn is_free(&self) -> bool {
        !self.used
    }

    /// Make the slot hold a fresh QP `qpn` in RESET (what [`Qp::new`] returns), written in
    /// place over whatever it held. On an error nothing changed.
    pub(crate) fn open(
        &mut self,
        qpn: u32,
    ) -> Result<&mut Qp<EVS, P, WIN, WORDS, SQ, RQ>, EvError> {
        let q = self.qp.as_mut_ptr();
        // SAFETY: `q` points to writable, aligned room for one QP (a `MaybeUninit` we own
        // exclusively); `write_fresh` writes every field or, on an error, none. A QP held
        // before is overwritten without being dropped: it owns nothing that needs a drop (its
        // containers hold `Copy` items).
        unsafe { Qp::write_fresh(q, qpn)? };
        self.used = true;
        // SAFETY: just written in full.
        Ok(unsafe { self.qp.assume_init_mut() })
    }

    /// Free the slot (the QP is forgotten; it owns nothing that needs a drop).
    pub(crate) fn close(&mut self) {
        self.used = false;
    }
}

impl<
        const EVS: usize,
        const P: usize,
        const WIN: usize,
        const WORDS: usize,
        const SQ: usize,
        const RQ: usize,
    > Qp<EVS, P, WIN, WORDS, SQ, RQ>
{
    /// A QP in RESET (its EV table empty until INIT), as a value (tests; the engine builds
    /// its QPs in place with [`QpSlot::open`]).
    #[cfg(test)]
    pub(crate) fn new(qpn: u32) -> Result<Self, EvError> {
        let mut q = MaybeUninit::<Self>::uninit();
        // SAFETY: `q` is writable and aligned; `write_fresh` writes every field (or none and
        // fails), so after `Ok` the value is initialised.
        unsafe {
            Self::write_fresh(q.as_mut_ptr(), qpn)?;
            Ok(q.assume_init())
        }
    }

    /// Write a fresh QP `qpn` in RESET at `q`, field by field (the EV table entry by entry):
    /// no QP- or table-sized temporary. Fails, having written nothing, when the empty EV
    /// table's configuration is refused (it never is).
    ///
    /// # Safety
    /// `q` must be valid for writes of one QP and aligned; it may be uninitialised.
    unsafe fn write_fresh(q: *mut Self, qpn: u32) -> Result<(), EvError> {
        let ev_cfg = EvConfig::new(0, 1);
        let sprt = EvTable::<EVS>::check(&ev_cfg)?;
        // SAFETY: the caller guarantees `q` is writable and aligned; every field is written
        // once through a raw place projection (`fields_written_fresh` lists them all), and
        // the EV table is complete before the one reference to it is made.
        unsafe {
            addr_of_mut!((*q).qpn).write(qpn);
            addr_of_mut!((*q).state).write(QpState::Reset);
            addr_of_mut!((*q).init).write(None);
            addr_of_mut!((*q).dest_qpn).write(0);
            let ev = addr_of_mut!((*q).ev);
            EvTable::write_blank(ev, ev_cfg, sprt);
            (*ev).place_evs();
            addr_of_mut!((*q).sprayer).write(Sprayer::new());
            addr_of_mut!((*q).cc).write(Cc::Fixed(FixedWindow { cwnd_bytes: 1 }));
            addr_of_mut!((*q).req).write(None);
            addr_of_mut!((*q).resp).write(None);
            addr_of_mut!((*q).timers).write([None; TIMER_KINDS]);
            addr_of_mut!((*q).stalls).write(StallCounters::default());
            addr_of_mut!((*q).ev_format).write(EvFormat::Udp);
            addr_of_mut!((*q).value_base).write(0);
            addr_of_mut!((*q).skips_seen).write(0);
            addr_of_mut!((*q).skip_marks).write(heapless::Vec::new());
            addr_of_mut!((*q).skip_overflow).write(false);
        }
        Ok(())
    }

    /// The fields [`Self::write_fresh`] writes, as an exhaustive pattern: adding a field to
    /// `Qp` breaks this until the field is written there too.
    #[allow(dead_code)]
    const fn fields_written_fresh(q: &Self) {
        let Qp {
            qpn: _,
            state: _,
            init: _,
            dest_qpn: _,
            ev: _,
            sprayer: _,
            cc: _,
            req: _,
            resp: _,
            timers: _,
            stalls: _,
            ev_format: _,
            value_base: _,
            skips_seen: _,
            skip_marks: _,
            skip_overflow: _,
        } = q;
    }
}

impl<const N: usize> EvTable<N> {
    /// Make this table what [`EvTable::new`]`(cfg)` builds, in place (entry by entry, no
    /// table-sized temporary). On an error (`cfg` refused) the table is unchanged.
    ///
    /// # Errors
    /// As [`EvTable::new`].
    pub(in crate::engine) fn reset(&mut self, cfg: EvConfig) -> Result<(), EvError> {
        let sprt = Self::check(&cfg)?;
        // SAFETY: `self` is a valid table we hold exclusively; `write_blank` overwrites every
        // field (the old values are plain data and containers of `Copy` items: nothing to
        // drop).
        unsafe { Self::write_blank(self, cfg, sprt) };
        self.place_evs();
        Ok(())
    }

    /// Write every field at `t` as [`EvTable::new`] does before [`EvTable::place_evs`].
    ///
    /// # Safety
    /// `t` must be valid for writes of one table and aligned; it may be uninitialised.
    unsafe fn write_blank(t: *mut Self, cfg: EvConfig, sprt: SprtConfig) {
        // SAFETY: the caller guarantees `t` is writable and aligned; every field is written
        // once through a raw place projection (`fields_written_blank` lists them all).
        unsafe {
            addr_of_mut!((*t).cfg).write(cfg);
            addr_of_mut!((*t).sprt).write(sprt);
            let evs = addr_of_mut!((*t).evs).cast::<Ev>();
            let blank = Ev::blank(&cfg);
            for i in 0..N {
                evs.add(i).write(blank);
            }
            addr_of_mut!((*t).usable).write(EvMask::default());
            addr_of_mut!((*t).bad).write(EvMask::default());
            addr_of_mut!((*t).probe_best).write(None);
            addr_of_mut!((*t).good_per_plane).write([0; MAX_PLANES]);
            addr_of_mut!((*t).qp_outcomes).write(0);
            addr_of_mut!((*t).qp_losses).write(0);
            addr_of_mut!((*t).baseline_shift).write(0);
            addr_of_mut!((*t).active).write(cfg.evs);
            addr_of_mut!((*t).planes_down).write(0);
            addr_of_mut!((*t).next_probe_id).write(0);
            addr_of_mut!((*t).events).write(Deque::new());
            addr_of_mut!((*t).counters).write(EvCounters::default());
        }
    }

    /// The fields [`Self::write_blank`] writes, as an exhaustive pattern.
    #[allow(dead_code)]
    const fn fields_written_blank(t: &Self) {
        let EvTable {
            cfg: _,
            sprt: _,
            evs: _,
            usable: _,
            bad: _,
            probe_best: _,
            good_per_plane: _,
            qp_outcomes: _,
            qp_losses: _,
            baseline_shift: _,
            active: _,
            planes_down: _,
            next_probe_id: _,
            events: _,
            counters: _,
        } = t;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::format;

    use super::*;
    use crate::engine::ev_state::EvConfig;

    type TestSlot = QpSlot<256, 4, 512, 8, 32, 32>;
    type TestQp = Qp<256, 4, 512, 8, 32, 32>;

    /// Every field of two tables, the entries by their debug form (they have no `PartialEq`).
    fn assert_same_table<const N: usize>(a: &EvTable<N>, b: &EvTable<N>) {
        assert_eq!(a.cfg, b.cfg);
        assert_eq!(a.sprt, b.sprt);
        for (x, y) in a.evs.iter().zip(b.evs.iter()) {
            assert_eq!(format!("{x:?}"), format!("{y:?}"));
        }
        assert_eq!(
            (a.usable, a.bad, a.probe_best),
            (b.usable, b.bad, b.probe_best)
        );
        assert_eq!(a.good_per_plane, b.good_per_plane);
        assert_eq!((a.qp_outcomes, a.qp_losses), (b.qp_outcomes, b.qp_losses));
        assert_eq!(
            (a.baseline_shift, a.active, a.planes_down, a.next_probe_id),
            (b.baseline_shift, b.active, b.planes_down, b.next_probe_id)
        );
        assert_eq!(a.events.len(), b.events.len());
        assert_eq!(a.counters, b.counters);
    }

    #[test]
    fn a_qp_opened_over_garbage_is_a_fresh_qp() {
        let fresh = TestQp::new(7).unwrap();
        let mut slot = std::boxed::Box::new(TestSlot::FREE);
        // SAFETY: any bytes may be written into the slot's uninitialised room.
        unsafe {
            slot.qp
                .as_mut_ptr()
                .cast::<u8>()
                .write_bytes(0xA5, core::mem::size_of::<TestQp>());
        }
        assert!(slot.is_free() && slot.get().is_none());
        let q = slot.open(7).unwrap();
        assert_eq!(
            (q.qpn, q.state, q.init, q.dest_qpn),
            (7, QpState::Reset, None, 0)
        );
        assert_same_table(&q.ev, &fresh.ev);
        assert!(q.sprayer == fresh.sprayer);
        assert_eq!(format!("{:?}", q.cc), format!("{:?}", fresh.cc));
        assert!(q.req.is_none() && q.resp.is_none());
        assert_eq!(q.timers, [None; TIMER_KINDS]);
        assert_eq!(q.stalls, StallCounters::default());
        assert_eq!((q.ev_format, q.value_base), (EvFormat::Udp, 0));
        assert_eq!((q.skips_seen, q.skip_overflow), (0, false));
        assert!(q.skip_marks.is_empty());
        slot.close();
        assert!(slot.is_free());
    }

    #[test]
    fn a_reset_table_is_a_new_one_and_a_refused_reset_changes_nothing() {
        let cfg = EvConfig::new(64, 4);
        let mut t = std::boxed::Box::new(EvTable::<256>::new(EvConfig::new(256, 8)).unwrap());
        t.handle_loss(3, 1_000).unwrap();
        t.handle_loss(9, 2_000).unwrap();
        t.reset(cfg).unwrap();
        assert_same_table(&t, &EvTable::<256>::new(cfg).unwrap());
        let before = format!("{:?}", t.evs[0]);
        assert!(t.reset(EvConfig::new(300, 4)).is_err());
        assert_same_table(&t, &EvTable::<256>::new(cfg).unwrap());
        assert_eq!(before, format!("{:?}", t.evs[0]));
    }
}
