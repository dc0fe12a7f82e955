//! The MRC engine: the slow path the firmware cores run on coalesced events.
//!
//! The engine is sans-IO and never reads a clock: every input carries `now_ns: u64`, every
//! output is polled. Everything here is integer or fixed point (the NIC cores have no FPU),
//! bounded (const-generic capacities, no allocation, no recursion) and deterministic
//! (randomness only from [`rng::Rng`] with a seed from the configuration). No input panics;
//! every refused input is an error value and a counter.
//!
//! The engine proper:
//! - [`nic::Engine`]: every QP of a NIC, registered regions, timers, output queues; the
//!   sans-IO surface (`handle_packet`, `handle_timeout`, `handle_plane_down/up`,
//!   `poll_transmit`, `poll_completion`, `poll_ev_event`, `poll_timeout`), plus the
//!   descriptor forms for callers that never need wire headers: `handle_tx_packet` (receive a
//!   `TxPacket` as sent, no `MrcRepr`) and `poll_transmit_into` (build the packet in place).
//!   The common data packet takes a fast path on both sides (`Requester::send_new_fast`,
//!   `Responder::handle_write_fast`), each equivalent to the general path it skips.
//! - [`qp`]: the QP state machine and OCP attribute rules; [`conn::Qp`]: one QP's state.
//! - [`requester`] / [`responder`]: the two halves of a QP.
//! - [`packet`]: packet descriptors, work requests, completions.
//!
//! Building blocks:
//! - [`timer_wheel`]: hierarchical timer wheel, O(1) arm/cancel with generation-checked
//!   handles, expiries in deadline order.
//! - [`cc`]: congestion control behind the [`cc::Controller`] trait, enum-dispatched
//!   ([`cc::Cc`]): NSCC (ECN + delay sender window) and a fixed window.
//! - [`ev_state`]: the per-QP EV table (GOOD / SKIP / ASSUMED_BAD / DENIED), loss retirement
//!   with a `min_active` guard, probes with backoff, plane down/up, ECN/RTT feedback, gray-loss
//!   detection, the usable mask for the datapath sprayer and per-plane capacity.
//! - [`sprt`]: the sequential probability ratio test behind gray-loss detection.
//! - [`retry`]: ACK timeout (`1.024 us * 2^t`) and the linear / exponential / forever retry
//!   policy.
//! - [`fixed`]: fixed-point helpers (Q16 EWMA, integer logarithms).
//! - [`rng`]: a tiny seeded PRNG (SplitMix64 + xorshift64*).
//! - [`ring`]: the bounded FIFO of the per-packet queues.

/// Bump a wrapping event counter (the engine's counters never panic on overflow).
macro_rules! count {
    ($c:expr) => {
        $c = $c.wrapping_add(1)
    };
}

/// Whether the fast paths run. Always in the crate proper; a unit test turns them off on its
/// own thread to check they are equivalent to the general paths they skip.
pub(crate) mod fast_paths {
    #[cfg(test)]
    extern crate std;

    #[cfg(test)]
    std::thread_local! {
        static OFF: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    /// The fast paths are on.
    #[cfg(not(test))]
    #[inline(always)]
    pub(crate) fn enabled() -> bool {
        true
    }

    /// The fast paths are on (this thread).
    #[cfg(test)]
    pub(crate) fn enabled() -> bool {
        !OFF.with(core::cell::Cell::get)
    }

    /// Turn this thread's fast paths off (`true`) or on.
    #[cfg(test)]
    pub(crate) fn set_off(off: bool) {
        OFF.with(|c| c.set(off));
    }
}

pub mod cc;
pub mod conn;
pub mod ev_state;
pub mod fixed;
pub mod nic;
pub mod packet;
pub mod qp;
pub mod requester;
pub mod responder;
pub mod retry;
pub mod ring;
pub mod rng;
pub mod sprt;
pub mod timer_wheel;

pub use conn::{Qp, QpEvEvent, StallCounters};
pub use nic::{
    CheckedConfig, Engine, EngineConfig, EngineCounters, EngineError, TIMERS_PER_QP, TX_BURST_PKTS,
};
pub use packet::{
    Completion, CompletionError, CompletionKind, DropReason, LocalBuf, RxMeta, RxVerdict, SendWr,
    TxBody, TxPacket,
};
pub use qp::{Attr, CcProfile, EvProfile, QpAttrs, QpError, QpHint, QpState};
pub use requester::{Reorder, RequesterCounters};
pub use responder::ResponderCounters;
