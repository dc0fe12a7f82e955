//! Per-QP entropy value (EV) table: the state of every path a QP sprays over.
//!
//! States ([`EvState`]): `Good` (sprayed), `Skip` (left out once, then `Good` again),
//! `AssumedBad` (retired, probed back), `Denied` (by the controller; only the controller moves
//! an EV in or out of it). Rules:
//!
//! - A lost packet that was **not trimmed** retires its EV at once (`AssumedBad`), unless that
//!   would leave fewer than `min_active` active (`Good` or `Skip`) EVs: then the EV is marked
//!   `Skip` and a guard hit is counted. With `immediate_retire = false` only the gray-loss test
//!   retires on loss.
//! - A **trim** never retires (it is congestion, and it proves the path delivers headers).
//! - Per-EV ECN and RTT feedback is averaged (EWMA, Q16); an EV whose ECN average reaches
//!   `ecn_skip_threshold` is marked `Skip` whenever it is `Good`.
//! - `AssumedBad` EVs are **probed** with exponential backoff: the first probe goes
//!   `probe_base_ns` after retirement, then the gap doubles up to `probe_cap_ns`; the reply to
//!   the latest probe brings the EV back to `Good` and resets the backoff.
//! - [`EvTable::plane_down`] retires every EV of the plane in one step (no guard: the port is
//!   gone) and stops probing them; [`EvTable::plane_up`] starts probing them at once.
//! - A **shared loss** ([`EvTable::handle_shared_loss`]): the NIC, which knows the route each
//!   EV names, saw a packet (of this QP on another EV, or of another QP) lost untrimmed on a
//!   route this EV shares up to the destination's last switch: the EV retires as after a loss
//!   of its own (guard applies), but no loss is counted on it. The route is probed by the EV
//!   that lost the packet; a reply there brings the EV back ([`EvTable::handle_shared_recovery`]),
//!   and its own probes start only at [`SHARED_PROBE_FACTOR`] times the base interval (so a
//!   wrong inference, e.g. a loss on one host's last hop, is still undone).
//! - **Gray loss** (beyond MRC): every EV runs the SPRT of [`crate::engine::sprt`] over its
//!   delivered/lost counts; crossing the upper bound retires it (reason `GrayLoss`, guard
//!   applies) and its probing restarts at the capped interval, so a path that passes probes but
//!   loses data stays out. See that module for the false-retire bound `alpha`. The test's
//!   baseline follows the QP-wide loss rate (see [`EvTable::handle_loss`]): loss spread over
//!   every EV is not any one EV's fault and retires none as gray.
//!
//! Every state change queues an [`EvEvent`] for [`EvTable::poll_event`]; a full queue drops the
//! event and counts it. [`EvTable::poll_update`] hands out the same changes ahead of it, each
//! once, for a consumer that acts on a change (the sprayer's entry) before it reports it. [`EvTable::usable_mask`] / [`EvTable::for_each_usable`] give what the
//! datapath sprayer table is written from; [`EvTable::plane_capacity`] counts `Good` EVs per
//! plane for capacity-weighted plane balance. Bad indices are errors and counted, never panics.

use heapless::Deque;

use crate::engine::fixed::{ewma_q16, ewma_q16_unit, Q16_ONE};
use crate::engine::sprt::{Sprt, SprtConfig, SprtError, SprtParams, SprtVerdict, PPM};

/// Outcomes over which the QP-wide loss rate is estimated (see [`EvTable::handle_loss`]);
/// no estimate below a quarter of it.
pub const BASELINE_WINDOW: u64 = 1 << 14;

/// An EV retired by a shared loss first probes at this many times `probe_base_ns` (the EV
/// whose loss was shared probes the route from the base interval: 16 with 10 us probes is
/// 160 us, by when that EV probed four times).
pub const SHARED_PROBE_FACTOR: u64 = 16;

/// Planes (NIC ports) an EV table can spread over.
pub const MAX_PLANES: usize = 8;
/// Largest EV table: the usable mask is 256 bits.
pub const MAX_EVS: usize = 256;

/// The state of one EV (the device ABI's codes, as the datapath's EV table takes them).
pub use mrc_abi::device::EvState;

/// Why an EV changed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum EvReason {
    /// A packet on it was lost (not trimmed).
    Loss,
    /// A loss would have retired it but `min_active` holds it (skipped instead).
    LossGuarded,
    /// Its ECN average crossed the skip threshold.
    EcnPersistent,
    /// The sprayer passed over it once.
    SkipServed,
    /// A probe reply arrived.
    ProbeReply,
    /// Its plane went down.
    PlaneDown,
    /// The gray-loss test decided it loses too much.
    GrayLoss,
    /// A packet was lost on a route this EV shares (see [`EvTable::handle_shared_loss`]).
    SharedLoss,
    /// A probe on a route this EV shares was answered (see
    /// [`EvTable::handle_shared_recovery`]).
    SharedRecovery,
    /// The controller denied it.
    ControllerDeny,
    /// The controller allowed it again.
    ControllerAllow,
}

impl EvReason {
    /// Every reason, in code order (the code is the index).
    pub const ALL: [EvReason; 11] = [
        EvReason::Loss,
        EvReason::LossGuarded,
        EvReason::EcnPersistent,
        EvReason::SkipServed,
        EvReason::ProbeReply,
        EvReason::PlaneDown,
        EvReason::GrayLoss,
        EvReason::SharedLoss,
        EvReason::SharedRecovery,
        EvReason::ControllerDeny,
        EvReason::ControllerAllow,
    ];

    /// The code carried in an `EvEventEntry`.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The reason with code `c`.
    pub fn from_code(c: u8) -> Option<Self> {
        Self::ALL.get(usize::from(c)).copied()
    }
}

/// One state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvEvent {
    /// EV index in the QP's table.
    pub ev: u16,
    /// State before.
    pub old: EvState,
    /// State after.
    pub new: EvState,
    /// Why.
    pub reason: EvReason,
}

/// A probe the engine should send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ProbeRequest {
    /// EV to probe.
    pub ev: u16,
    /// Its plane.
    pub plane: u8,
    /// The id to put in PRBX; only the reply carrying it restores the EV.
    pub probe_id: u32,
}

/// Something wrong with an EV table call or its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EvError {
    /// EV index not below the number of active EVs.
    BadEv {
        /// Index given.
        ev: u16,
        /// EVs in the table.
        evs: u16,
    },
    /// Plane not below the number of planes.
    BadPlane {
        /// Plane given.
        plane: u8,
        /// Planes configured.
        planes: u8,
    },
    /// More EVs than the table holds (`N`, at most 256).
    TooManyEvs {
        /// Requested.
        evs: u16,
        /// Capacity.
        capacity: u16,
    },
    /// Planes not in `1..=8`.
    PlaneCount(u8),
    /// `min_active` above the number of EVs.
    MinActive {
        /// Requested.
        min_active: u16,
        /// EVs in the table.
        evs: u16,
    },
    /// Probe intervals not `0 < base <= cap`.
    ProbeInterval {
        /// Base.
        base_ns: u64,
        /// Cap.
        cap_ns: u64,
    },
    /// A Q16 gain or threshold not in `(0, 1.0]`.
    Q16Range(u32),
    /// The gray-loss test parameters.
    Sprt(SprtError),
    /// A probe reply that is not for the latest probe of an `AssumedBad` EV.
    StaleProbe {
        /// EV.
        ev: u16,
        /// Id in the reply.
        probe_id: u32,
    },
}

/// EV table configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvConfig {
    /// EVs in use (at most the table capacity `N`).
    pub evs: u16,
    /// Planes; EV `i` starts on plane `i % planes`.
    pub planes: u8,
    /// Fewest active EVs a loss may leave.
    pub min_active: u16,
    /// Retire on the first untrimmed loss (MRC behaviour).
    pub immediate_retire: bool,
    /// First probe interval.
    pub probe_base_ns: u64,
    /// Largest probe interval.
    pub probe_cap_ns: u64,
    /// EWMA gain of the per-EV ECN mark average, Q16.
    pub ecn_gain_q16: u32,
    /// ECN average at which a `Good` EV is skipped, Q16.
    pub ecn_skip_threshold_q16: u32,
    /// EWMA gain of the per-EV RTT average, Q16.
    pub rtt_gain_q16: u32,
    /// Gray-loss test.
    pub sprt: SprtParams,
}

impl EvConfig {
    /// Defaults for `evs` EVs over `planes` planes: `min_active = evs / 4`, immediate retire,
    /// probes 10 us doubling to 10 ms, ECN gain 1/16 and skip at 1/2, RTT gain 1/8, default SPRT.
    pub fn new(evs: u16, planes: u8) -> Self {
        EvConfig {
            evs,
            planes,
            min_active: evs / 4,
            immediate_retire: true,
            probe_base_ns: 10_000,
            probe_cap_ns: 10_000_000,
            ecn_gain_q16: Q16_ONE / 16,
            ecn_skip_threshold_q16: Q16_ONE / 2,
            rtt_gain_q16: Q16_ONE / 8,
            sprt: SprtParams::default(),
        }
    }
}

/// Per-EV statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvStats {
    /// State.
    pub state: EvState,
    /// Plane.
    pub plane: u8,
    /// ECN mark average, Q16 (1.0 = every ACK marked).
    pub ecn_q16: u32,
    /// RTT average (0 = no sample yet).
    pub rtt_avg_ns: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Packets lost (untrimmed).
    pub lost: u64,
    /// Trimmed packets.
    pub trimmed: u64,
}

/// Table-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvCounters {
    /// Losses that would have retired an EV but were held by `min_active`.
    pub guard_hits: u64,
    /// Events dropped because the event queue was full (the host misses those changes; the
    /// sprayer does not: see `resyncs`).
    pub events_dropped: u64,
    /// Sweeps of the whole table to the sprayer begun because events were dropped
    /// ([`EvTable::poll_update`]; a drop during a sweep starts it over, not counted again).
    pub resyncs: u64,
    /// Calls with an EV index or plane out of range.
    pub bad_index: u64,
    /// Probe replies not matching the latest probe.
    pub stale_probe_replies: u64,
    /// Probes requested.
    pub probes_sent: u64,
    /// EVs retired by the gray-loss test.
    pub gray_retires: u64,
    /// EVs skipped for persistent ECN.
    pub ecn_skips: u64,
    /// Losses reported on EVs already retired or denied.
    pub losses_on_retired: u64,
}

#[derive(Clone, Copy, Debug)]
pub(in crate::engine) struct Ev {
    state: EvState,
    plane: u8,
    /// `u16::MAX` less the deliveries not yet fed to `sprt` nor counted in `delivered`
    /// (`Ev::sprt_pending`): they only lower the test's ratio, so they are fed in one step
    /// ([`Sprt::observe_each_delivered`]) before the next loss, batch or trim is, and added to
    /// `delivered` then, or when this room runs out (`u16`: it fits beside `plane`, the entry
    /// stays 72 bytes; one delivery is one decrement of it alone, whose zero flag says the
    /// room ran out).
    sprt_room: u16,
    ecn_q16: u32,
    rtt_avg_ns: u64,
    sprt: Sprt,
    /// Deliveries, without the pending ones (`Ev::sprt_pending`; saturating;
    /// [`EvStats::delivered`] is the sum).
    delivered: u64,
    lost: u64,
    trimmed: u64,
    probe_interval_ns: u64,
    next_probe_ns: u64,
    /// Id of the latest probe sent, if one is outstanding.
    probe_id: Option<u32>,
}

impl Ev {
    /// A `Good` EV that has seen nothing yet, on plane 0 ([`EvTable::place_evs`] sets the
    /// plane).
    pub(in crate::engine) fn blank(cfg: &EvConfig) -> Self {
        Ev {
            state: EvState::Good,
            plane: 0,
            ecn_q16: 0,
            rtt_avg_ns: 0,
            sprt: Sprt::default(),
            sprt_room: u16::MAX,
            delivered: 0,
            lost: 0,
            trimmed: 0,
            probe_interval_ns: cfg.probe_base_ns,
            next_probe_ns: 0,
            probe_id: None,
        }
    }
}

/// A set of EV indices (up to 256).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvMask {
    words: [u64; MAX_EVS / 64],
}

impl EvMask {
    /// Whether `ev` is in the set.
    pub fn contains(&self, ev: u16) -> bool {
        let i = usize::from(ev);
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Members.
    pub fn count(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// The raw bitmap, bit `i % 64` of word `i / 64` for EV `i`.
    pub fn words(&self) -> [u64; MAX_EVS / 64] {
        self.words
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..MAX_EVS as u16).filter(|&ev| self.contains(ev))
    }

    fn set(&mut self, ev: usize, on: bool) {
        if let Some(w) = self.words.get_mut(ev / 64) {
            if on {
                *w |= 1 << (ev % 64);
            } else {
                *w &= !(1 << (ev % 64));
            }
        }
    }
}

/// The EV table of one QP, holding up to `N` (at most 256) EVs.
/// (The fields are visible to the engine only for `EvTable::reset`'s in-place writes.)
pub struct EvTable<const N: usize> {
    pub(in crate::engine) cfg: EvConfig,
    pub(in crate::engine) sprt: SprtConfig,
    pub(in crate::engine) evs: [Ev; N],
    pub(in crate::engine) usable: EvMask,
    /// Derived: the `AssumedBad` EVs (the only ones probed), so finding the next probe walks
    /// them instead of the whole table.
    pub(in crate::engine) bad: EvMask,
    /// Derived: the next EV to probe and when (what a scan of `bad` would find), kept up to
    /// date by every write to an EV's state, plane or probe time.
    pub(in crate::engine) probe_best: Option<(usize, u64)>,
    pub(in crate::engine) good_per_plane: [u16; MAX_PLANES],
    /// Outcomes (deliveries, trims, losses) and losses of the whole QP, halved whenever the
    /// outcomes pass twice [`BASELINE_WINDOW`]: the QP-wide loss rate the gray-loss test
    /// weighs each EV against.
    pub(in crate::engine) qp_outcomes: u64,
    pub(in crate::engine) qp_losses: u64,
    /// The gray-loss test's H0 is `p0 << baseline_shift` (see [`EvTable::handle_loss`]).
    pub(in crate::engine) baseline_shift: u8,
    pub(in crate::engine) active: u16,
    pub(in crate::engine) planes_down: u8,
    pub(in crate::engine) next_probe_id: u32,
    pub(in crate::engine) events: Deque<EvEvent, N>,
    /// Events at the front of `events` that [`EvTable::poll_update`] has handed out.
    pub(in crate::engine) updated: u16,
    /// Since an event was dropped: the next EV whose current state [`EvTable::poll_update`]
    /// hands out again (the sweep that brings the sprayer's copy back in line).
    pub(in crate::engine) resync: Option<u16>,
    pub(in crate::engine) counters: EvCounters,
}

#[cfg(test)]
#[path = "ev_state_tests.rs"]
mod tests;

mod table;
pub use table::AckFeedback;
