//! Capacities as one named type: a [`Capacity`] profile says how many QPs a NIC holds and how
//! large each QP's tables are, for the datapath stage and the firmware engine alike.
//!
//! Everything in this crate is bounded and allocation-free, so every table has a size fixed at
//! compile time. A profile is a unit type implementing [`Capacity`], usually declared with
//! [`capacity!`](crate::capacity!):
//!
//! ```
//! mrc_firmware::capacity! {
//!     /// A small NIC: 2 QPs of 64 EVs over 2 planes.
//!     pub struct Small {
//!         qps: 2, evs: 64, planes: 2, window_psns: 128, send_queue: 8, recv_queue: 8,
//!         regions: 4,
//!     }
//! }
//! use mrc_firmware::capacity::Capacity;
//! assert_eq!((Small::QPS, Small::EVS, Small::WINDOW_PSNS), (2, 64, 128));
//! let dp = mrc_firmware::datapath::stage::Datapath::<Small>::new(Default::default());
//! let fw = mrc_firmware::engine::Engine::<Small>::new(Default::default()).unwrap();
//! # let _ = (dp, fw);
//! ```
//!
//! The datapath blocks keep their sizes as const generics (they are hardware blocks with
//! parameters, like the RTL's); the profile picks them once, in the QP context types it names
//! ([`Capacity::DpQp`], [`Capacity::FwQp`]).

use crate::datapath::stage::DpQp;
use crate::engine::fw_qp::FwQp;

/// Fixed-size storage of `T`s: `[T; N]` for any `N`.
pub trait Slots<T>: AsRef<[T]> + AsMut<[T]> + Sized {
    /// Storage with element `i` made by `f(i)`.
    fn build(f: impl FnMut(usize) -> T) -> Self;
    /// [`Slots::build`] where the storage lives (`slot`), one element at a time: no
    /// storage-sized temporary. Returns the storage, now initialised.
    fn init_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
        f: impl FnMut(usize) -> T,
    ) -> &mut Self;
}

impl<T, const N: usize> Slots<T> for [T; N] {
    #[inline]
    fn build(f: impl FnMut(usize) -> T) -> Self {
        core::array::from_fn(f)
    }
    fn init_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
        f: impl FnMut(usize) -> T,
    ) -> &mut Self {
        crate::in_place::init_array(slot, f)
    }
}

/// The capacities of one NIC. See the module docs; implement it with
/// [`capacity!`](crate::capacity!).
pub trait Capacity: 'static + Sized {
    /// QPs.
    const QPS: usize;
    /// EVs per QP.
    const EVS: usize;
    /// Planes (NIC ports) a QP sprays over at most.
    const PLANES: usize;
    /// PSN window per direction of a QP (a multiple of 64).
    const WINDOW_PSNS: usize;
    /// Send work requests per QP.
    const SEND_QUEUE: usize;
    /// Receive work requests per QP.
    const RECV_QUEUE: usize;
    /// Registered memory regions per NIC.
    const REGIONS: usize;
    /// One value per QP.
    type PerQp<T>: Slots<T>;
    /// The datapath's state of one QP at these sizes.
    type DpQp: crate::datapath::stage::QpContext;
    /// The firmware's state of one QP at these sizes.
    type FwQp: crate::engine::fw_qp::QpContext;
    /// The registered regions.
    type Regions: crate::datapath::placement::Regions;
    /// The firmware's timer wheel (room for every QP's timers).
    type Timers: crate::engine::timer_wheel::Timers;
}

/// The datapath QP context of a profile with these sizes (what
/// [`capacity!`](crate::capacity!) names).
pub type DpQpOf<
    const EVS: usize,
    const P: usize,
    const WIN: usize,
    const WORDS: usize,
    const SQ: usize,
    const RQ: usize,
> = DpQp<EVS, P, WIN, WORDS, SQ, RQ>;

/// The firmware QP context of a profile with these sizes (what
/// [`capacity!`](crate::capacity!) names).
pub type FwQpOf<const EVS: usize, const SQ: usize, const RQ: usize> = FwQp<EVS, SQ, RQ>;

/// Declare a [`Capacity`] profile: a unit struct and its implementation.
///
/// Fields, all required, in this order: `qps`, `evs` (at most 256), `planes` (at most 8),
/// `window_psns` (a multiple of 64, at least 64), `send_queue`, `recv_queue`, `regions`.
/// A bad value fails the build where the profile is first used.
#[macro_export]
macro_rules! capacity {
    (
        $(#[$m:meta])*
        $vis:vis struct $name:ident {
            qps: $q:expr, evs: $e:expr, planes: $p:expr, window_psns: $w:expr,
            send_queue: $sq:expr, recv_queue: $rq:expr, regions: $r:expr $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        $vis struct $name;

        impl $crate::capacity::Capacity for $name {
            const QPS: usize = $q;
            const EVS: usize = $e;
            const PLANES: usize = $p;
            const WINDOW_PSNS: usize = $w;
            const SEND_QUEUE: usize = $sq;
            const RECV_QUEUE: usize = $rq;
            const REGIONS: usize = $r;
            type PerQp<T> = [T; $q];
            type DpQp = $crate::capacity::DpQpOf<$e, $p, $w, { $w / 64 }, $sq, $rq>;
            type FwQp = $crate::capacity::FwQpOf<$e, $sq, $rq>;
            type Regions = $crate::datapath::placement::PlacementTable<$r>;
            type Timers = $crate::engine::timer_wheel::TimerWheel<
                { $q * $crate::engine::TIMERS_PER_QP },
            >;
        }
    };
}
