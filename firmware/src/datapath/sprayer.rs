//! EV sprayer: picks the entropy value (EV, hence path and plane) of every outgoing packet.
//!
//! # Hardware block
//!
//! - **State** (per QP): a table of `N` EV slots, each [`EvSlot`] `{usable, weight 1..=15, plane
//!   0..P-1, skip_once}`, written by firmware; `P` per-plane weights `0..=15` (default 1, 0 =
//!   the plane takes no traffic); the scheduler position: a plane cursor and round, and per plane
//!   an EV cursor and round. Derived per-plane summaries (usable EVs per weight, the set of
//!   usable weights, a chain linking each plane's usable slots in index order, and its first
//!   slot) are updated on every firmware write (the chain by a walk to the written slot's
//!   neighbours on its plane), never on the packet path, so a pick steps over retired EVs at
//!   no cost. Also derived, for the common pick: per slot the weight it may be picked with
//!   (0 when unusable or flagged skip-once), per plane the usable slot after its last pick
//!   (one load each per pick).
//! - **Input**: one request per packet ([`Sprayer::next_ev`]).
//! - **Output**: the chosen [`EvPick`] `{index, plane}`, or `None` when no EV is usable (counted
//!   in [`SprayerCounters::no_usable`]).
//! - **Capacity**: `1 <= N <= 65536` EVs, `1 <= P <= 8` planes (the ACK's ECN plane mask is 8
//!   bits); checked at compile time.
//!
//! # Algorithm
//!
//! Two levels of *interleaved* weighted round robin (IWRR), which spreads each EV's share evenly
//! in time instead of sending `weight` packets back to back:
//!
//! 1. **Plane**: scan planes in index order in rounds `r = 1, 2, ...`; a plane is eligible in
//!    round `r` when its plane weight is `>= r` and it has at least one usable EV. After the last
//!    plane the round advances, and wraps to 1 after the largest eligible plane weight. With all
//!    plane weights equal this is plain round robin, so plane pick counts never differ by more
//!    than one while the usable set is unchanged.
//! 2. **EV within the plane**: the same scan over the slot table, restricted to usable EVs of
//!    that plane, with the EV weights. Over one full cycle (`sum of weights` picks of that plane)
//!    each usable EV is picked exactly `weight` times.
//!
//! **Skip-once**: when the scan reaches an otherwise eligible EV whose `skip_once` flag is set,
//! the flag clears, the EV is passed over (counted in [`SprayerCounters::skips`]) and the scan
//! continues. The pick sequence is therefore the unskipped sequence with that EV's next pick
//! removed. A flag on an unusable EV waits until the EV is usable and reached.
//!
//! Every scan is bounded: at most `(WEIGHT_MAX + 3)` passes over the table (proof: a failing pass
//! clears every skip flag it met, and the round returns to 1, where every usable EV is eligible,
//! within `WEIGHT_MAX + 1` passes).

/// Largest EV or plane weight.
pub const WEIGHT_MAX: u8 = 15;

/// One EV slot of a QP's EV table, as firmware writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvSlot {
    /// The EV may carry traffic (firmware clears it for failed or retired paths).
    pub usable: bool,
    /// Relative share within its plane, `1..=WEIGHT_MAX`.
    pub weight: u8,
    /// Plane (NIC port) the EV's packets leave on, `0..P`.
    pub plane: u8,
    /// Pass over this EV once, then clear the flag.
    pub skip_once: bool,
}

/// One EV slot as the sprayer keeps it: the firmware's [`EvSlot`] plus the weight the common
/// pick compares with the plane's round (one load and one compare per pick).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Slot {
    /// Derived: `weight` when the slot is usable and has no skip-once flag, else 0 (below
    /// every round, so the common pick passes it over to the general pick).
    pick_weight: u8,
    weight: u8,
    plane: u8,
    /// [`USABLE`] and [`SKIP_ONCE`].
    flags: u8,
}

const USABLE: u8 = 1;
const SKIP_ONCE: u8 = 2;

impl Slot {
    fn new(ev: EvSlot) -> Self {
        let mut s = Slot {
            pick_weight: 0,
            weight: ev.weight,
            plane: ev.plane,
            flags: (u8::from(ev.usable) * USABLE) | (u8::from(ev.skip_once) * SKIP_ONCE),
        };
        s.derive();
        s
    }

    fn ev(self) -> EvSlot {
        EvSlot {
            usable: self.usable(),
            weight: self.weight,
            plane: self.plane,
            skip_once: self.skip_once(),
        }
    }

    #[inline]
    fn usable(self) -> bool {
        self.flags & USABLE != 0
    }

    #[inline]
    fn skip_once(self) -> bool {
        self.flags & SKIP_ONCE != 0
    }

    /// Set or clear a flag and re-derive `pick_weight`.
    #[inline]
    fn set_flag(&mut self, flag: u8, on: bool) {
        self.flags = if on {
            self.flags | flag
        } else {
            self.flags & !flag
        };
        self.derive();
    }

    #[inline]
    fn derive(&mut self) {
        self.pick_weight = if self.flags == USABLE { self.weight } else { 0 };
    }
}

/// The sprayer's decision for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvPick {
    /// Index of the EV in the QP's EV table.
    pub index: u16,
    /// Plane the packet leaves on.
    pub plane: u8,
}

/// A firmware write the sprayer refused (the table is unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SprayerError {
    /// The EV index is not below the table size `N`.
    IndexOutOfRange { index: u16 },
    /// An EV weight outside `1..=WEIGHT_MAX`, or a plane weight above `WEIGHT_MAX`.
    BadWeight { weight: u8 },
    /// The plane is not below `P`.
    BadPlane { plane: u8 },
}

/// Sprayer counters (free-running, wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SprayerCounters {
    /// Packets given an EV.
    pub picks: u64,
    /// Requests with no usable EV on any eligible plane (the packet waits; firmware is told).
    pub no_usable: u64,
    /// EVs passed over because of their skip-once flag.
    pub skips: u64,
    /// Firmware writes refused with a [`SprayerError`].
    pub bad_writes: u64,
}

/// The EV sprayer of one QP: `N` EV slots over `P` planes. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sprayer<const N: usize, const P: usize> {
    slots: [Slot; N],
    /// Derived: for each usable slot, the next usable slot index on the same plane (0 when
    /// none: a next index is always > 0; 0 for unusable slots). The per-packet scan walks
    /// only the plane's usable slots, however many are retired.
    next_on_plane: [u16; N],
    /// Derived: per plane, the first usable slot of the plane (the head of its chain; any
    /// index when the plane has none, so a reader checks the slot).
    plane_head: [u16; P],
    /// Derived: usable slots per plane and weight, so a write updates the plane's set of
    /// usable weights (hence its largest) without rescanning the table.
    plane_hist: [[u32; WEIGHT_MAX as usize + 1]; P],
    plane_weight: [u8; P],
    /// Derived: per plane, bit `w` set when some usable EV has weight `w` (the highest set
    /// bit is the plane's largest usable weight).
    plane_weights: [u16; P],
    /// Derived: per plane, its weight when some EV on it is usable, else 0 (what the plane
    /// scan compares with its round: one load per pick).
    plane_eligible: [u8; P],
    /// Per plane: the slot before the next slot index to examine, i.e. the EV cursor
    /// (`1..=N`) minus 1 (after a pick, the picked slot: the common pick stores its index as
    /// it is). The cursor is never 0: a new sprayer's position "cursor 0, round 1" is kept
    /// as "cursor N, round WEIGHT_MAX", where the next step wraps to cursor 0 and round 1
    /// whatever the plane's largest weight.
    ev_last: [u16; P],
    /// Derived: per plane, the common pick's candidate: the successor in the plane's chain of
    /// the slot before the plane's cursor (the plane's last pick) when that slot is a usable
    /// slot of the plane, else 0 (none: a successor is always > 0). It is the first usable
    /// slot of the plane at or after the cursor; kept on every pick and on every write to
    /// the plane's slots.
    ev_next: [u16; P],
    /// Per plane: the current IWRR round (`1..=WEIGHT_MAX`).
    ev_round: [u8; P],
    /// Derived: largest eligible plane weight (0 when no plane can take traffic).
    max_plane_weight: u8,
    plane_cursor: usize,
    plane_round: u8,
    counters: SprayerCounters,
}

impl<const N: usize, const P: usize> Default for Sprayer<N, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const P: usize> Sprayer<N, P> {
    const CAPACITY_OK: () = assert!(
        N >= 1 && N <= 65536 && P >= 1 && P <= 8,
        "Sprayer needs 1 <= N <= 65536 EVs and 1 <= P <= 8 planes"
    );

    /// An empty table (no usable EV), all plane weights 1.
    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        Sprayer {
            slots: [Slot::default(); N],
            next_on_plane: [0; N],
            plane_head: [0; P],
            plane_hist: [[0; WEIGHT_MAX as usize + 1]; P],
            plane_weight: [1; P],
            plane_weights: [0; P],
            plane_eligible: [0; P],
            // (N >= 1; N - 1 < 65536)
            ev_last: [(N - 1) as u16; P],
            ev_next: [0; P],
            ev_round: [WEIGHT_MAX; P],
            max_plane_weight: 0,
            plane_cursor: 0,
            plane_round: 1,
            counters: SprayerCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> SprayerCounters {
        self.counters
    }

    /// The slot at `index`, if `index < N`.
    pub fn ev(&self, index: u16) -> Option<EvSlot> {
        self.slots.get(usize::from(index)).map(|s| s.ev())
    }

    /// The weight of `plane`, if `plane < P`.
    pub fn plane_weight(&self, plane: u8) -> Option<u8> {
        self.plane_weight.get(usize::from(plane)).copied()
    }

    /// Number of usable EVs on `plane` (0 for a plane `>= P`).
    pub fn usable_on_plane(&self, plane: u8) -> u32 {
        self.plane_hist
            .get(usize::from(plane))
            .map_or(0, |h| h.iter().fold(0u32, |n, &c| n.saturating_add(c)))
    }

    /// Firmware write: replace the slot at `index`.
    ///
    /// # Errors
    /// [`SprayerError::IndexOutOfRange`], [`SprayerError::BadWeight`] (weight not in
    /// `1..=WEIGHT_MAX`, checked even for an unusable slot), [`SprayerError::BadPlane`].
    pub fn set_ev(&mut self, index: u16, slot: EvSlot) -> Result<(), SprayerError> {
        let result = self.try_set_ev(index, slot);
        if result.is_err() {
            self.counters.bad_writes = self.counters.bad_writes.wrapping_add(1);
        }
        result
    }

    fn try_set_ev(&mut self, index: u16, slot: EvSlot) -> Result<(), SprayerError> {
        if slot.weight == 0 || slot.weight > WEIGHT_MAX {
            return Err(SprayerError::BadWeight {
                weight: slot.weight,
            });
        }
        if usize::from(slot.plane) >= P {
            return Err(SprayerError::BadPlane { plane: slot.plane });
        }
        let entry = self
            .slots
            .get_mut(usize::from(index))
            .ok_or(SprayerError::IndexOutOfRange { index })?;
        let old = entry.ev();
        *entry = Slot::new(slot);
        let emptied = self.hist_update(old, false);
        let filled = self.hist_update(slot, true);
        let i = usize::from(index);
        if old.usable && !(slot.usable && slot.plane == old.plane) {
            self.link_usable_change(i, old.plane, false);
            self.derive_next(usize::from(old.plane));
        }
        if slot.usable && !(old.usable && slot.plane == old.plane) {
            self.link_usable_change(i, slot.plane, true);
            self.derive_next(usize::from(slot.plane));
        }
        if emptied || filled {
            self.recompute_max_plane_weight();
        }
        Ok(())
    }

    /// Firmware write: set or clear the usable bit of the slot at `index`.
    ///
    /// # Errors
    /// [`SprayerError::IndexOutOfRange`]; [`SprayerError::BadWeight`] when making usable a slot
    /// that was never given a weight.
    pub fn set_usable(&mut self, index: u16, usable: bool) -> Result<(), SprayerError> {
        let Some(slot) = self.ev(index) else {
            self.counters.bad_writes = self.counters.bad_writes.wrapping_add(1);
            return Err(SprayerError::IndexOutOfRange { index });
        };
        if slot.usable == usable {
            // Nothing changes (a usable slot was written with a valid weight and plane).
            return Ok(());
        }
        let i = usize::from(index);
        if usable {
            // `set_ev` with the slot made usable: its checks, then the slot joins its plane.
            let err = if slot.weight == 0 || slot.weight > WEIGHT_MAX {
                Some(SprayerError::BadWeight {
                    weight: slot.weight,
                })
            } else if usize::from(slot.plane) >= P {
                Some(SprayerError::BadPlane { plane: slot.plane })
            } else {
                None
            };
            if let Some(err) = err {
                self.counters.bad_writes = self.counters.bad_writes.wrapping_add(1);
                return Err(err);
            }
            if let Some(entry) = self.slots.get_mut(i) {
                entry.set_flag(USABLE, true);
            }
            let filled = self.hist_update(EvSlot { usable, ..slot }, true);
            self.link_usable_change(i, slot.plane, true);
            if filled {
                self.recompute_max_plane_weight();
            }
        } else {
            // Clearing never needs a valid weight (the slot may never have been written).
            if let Some(entry) = self.slots.get_mut(i) {
                entry.set_flag(USABLE, false);
            }
            self.link_usable_change(i, slot.plane, false);
            if self.hist_update(slot, false) {
                self.recompute_max_plane_weight();
            }
        }
        self.derive_next(usize::from(slot.plane));
        Ok(())
    }

    /// Firmware write: set the skip-once flag of the slot at `index`.
    ///
    /// # Errors
    /// [`SprayerError::IndexOutOfRange`].
    pub fn mark_skip(&mut self, index: u16) -> Result<(), SprayerError> {
        match self.slots.get_mut(usize::from(index)) {
            Some(slot) => {
                slot.set_flag(SKIP_ONCE, true);
                Ok(())
            }
            None => {
                self.counters.bad_writes = self.counters.bad_writes.wrapping_add(1);
                Err(SprayerError::IndexOutOfRange { index })
            }
        }
    }

    /// Firmware write: set the weight of `plane` (`0..=WEIGHT_MAX`; 0 stops traffic on it).
    ///
    /// # Errors
    /// [`SprayerError::BadPlane`], [`SprayerError::BadWeight`].
    pub fn set_plane_weight(&mut self, plane: u8, weight: u8) -> Result<(), SprayerError> {
        let result = if weight > WEIGHT_MAX {
            Err(SprayerError::BadWeight { weight })
        } else {
            match self.plane_weight.get_mut(usize::from(plane)) {
                Some(w) => {
                    *w = weight;
                    Ok(())
                }
                None => Err(SprayerError::BadPlane { plane }),
            }
        };
        self.recompute_max_plane_weight();
        if result.is_err() {
            self.counters.bad_writes = self.counters.bad_writes.wrapping_add(1);
        }
        result
    }

    /// Whether some EV is usable on an eligible plane, i.e. whether [`Self::next_ev`] picks.
    #[inline]
    pub fn has_usable(&self) -> bool {
        self.max_plane_weight != 0
    }

    /// Per-packet decision: the EV for the next packet, or `None` when no EV is usable on any
    /// plane with a non-zero weight.
    #[inline]
    pub fn next_ev(&mut self) -> Option<EvPick> {
        if self.has_usable() {
            if let Some(p) = self.next_ev_fast() {
                return Some(p);
            }
        }
        self.next_ev_slow()
    }

    /// The common pick: the plane at the cursor (after at most one wrap of the plane scan)
    /// is eligible in its round, and the successor of the plane's last pick in its chain of
    /// usable slots (after the chain's last slot, the plane's first slot in the next EV
    /// round) is eligible and has no skip flag. Never serves a skip-once flag (the `skips`
    /// counter is unchanged).
    ///
    /// Contract: call it only while [`Self::has_usable`], and when it returns `None` call
    /// [`Self::next_ev_slow`] next, before any firmware write. It then changed nothing but
    /// possibly the plane scan's wrap to plane 0 and the next round, the general pick's own
    /// first step from that state (with the same largest plane weight: no write between),
    /// so the general pick makes the pick it would have made.
    #[inline(always)]
    pub(crate) fn next_ev_fast(&mut self) -> Option<EvPick> {
        debug_assert!(self.has_usable(), "next_ev_fast without a usable EV");
        let mut plane = self.plane_cursor;
        if plane >= P {
            // (one pick in P: a branch, not a select computing the next round every time;
            // the wrap is stored here, so a pick that does not wrap leaves the round alone)
            core::hint::cold_path();
            plane = 0;
            self.plane_cursor = 0;
            // (`next_round` as a branch: the round goes back to 1 in one wrap in the largest
            // plane weight)
            self.plane_round = if self.plane_round >= self.max_plane_weight {
                core::hint::cold_path();
                1
            } else {
                self.plane_round + 1
            };
        }
        let plane_round = self.plane_round;
        if self.plane_eligible_weight(plane) < plane_round {
            return None;
        }
        debug_assert_eq!(
            self.ev_next.get(plane).copied(),
            Some(self.derived_next(plane)),
            "stale common-pick candidate"
        );
        // The first usable slot of the plane at or after its cursor (0: not known; always
        // below N, so `wrap` changes nothing but drops the bounds checks).
        let index = wrap::<N>(usize::from(self.ev_next.get(plane).copied()?));
        let round = self.ev_round.get(plane).copied()?;
        let s = self.slots.get(index)?;
        if index == 0 {
            return self.chain_wrap_pick(plane);
        }
        if s.pick_weight < round {
            return None;
        }
        self.plane_cursor = plane + 1;
        self.picked_on(plane, index, None);
        self.counters.picks = self.counters.picks.wrapping_add(1);
        Some(EvPick {
            // index < N <= 65536
            index: index as u16,
            plane: plane as u8,
        })
    }

    /// The common pick on `plane` (the plane at the cursor, eligible in the plane round)
    /// when it has no candidate, after the last slot of the plane's chain: its last pick is
    /// still a usable slot of the plane and has no successor (so its scan finds nothing
    /// before it wraps), and the plane's first usable slot is eligible in the plane's next EV
    /// round and has no skip flag. `None` (nothing changed) when any of that does not hold.
    #[cold]
    #[inline(never)]
    fn chain_wrap_pick(&mut self, plane: usize) -> Option<EvPick> {
        // (plane < P: `wrap` changes nothing)
        let plane = wrap::<P>(plane);
        // (`ev_last` and `plane_head` hold indices below N: `wrap` changes nothing)
        let last = wrap::<N>(usize::from(self.ev_last.get(plane).copied()?));
        let s = self.slots.get(last)?;
        // plane < P <= 8
        if usize::from(s.plane) != plane || !s.usable() || self.next_on_plane.get(last) != Some(&0)
        {
            return None;
        }
        let round = self.ev_round.get(plane).copied()?;
        // `next_round` with the plane's largest EV weight: the next round when some usable
        // EV of the plane is heavier than this round, else 1 (a branch: with equal EV
        // weights the round stays 1).
        let weights = self.plane_weights.get(plane).copied()?;
        let round = if weights.checked_shr(u32::from(round) + 1).unwrap_or(0) != 0 {
            core::hint::cold_path();
            round + 1
        } else {
            1
        };
        let index = wrap::<N>(usize::from(self.plane_head.get(plane).copied()?));
        let head = self.slots.get(index)?;
        // (a usable slot of another plane may have a pick weight: the head is checked)
        if usize::from(head.plane) != plane || head.pick_weight < round {
            return None;
        }
        self.picked_on(plane, index, Some(round));
        self.plane_cursor = plane + 1;
        self.counters.picks = self.counters.picks.wrapping_add(1);
        Some(EvPick {
            // index < N <= 65536, plane < P <= 8
            index: index as u16,
            plane: plane as u8,
        })
    }

    /// The general pick (plane and EV scans with wraps, rounds and skip flags): the pick of
    /// [`Self::next_ev`] when [`Self::next_ev_fast`] returned `None`.
    #[inline(never)]
    pub(crate) fn next_ev_slow(&mut self) -> Option<EvPick> {
        let picked = self
            .pick_plane()
            .and_then(|plane| self.pick_ev_on(plane).map(|index| (index, plane)));
        match picked {
            Some((index, plane)) => {
                self.counters.picks = self.counters.picks.wrapping_add(1);
                Some(EvPick {
                    // Both fit: index < N <= 65536 and plane < P <= 8.
                    index: u16::try_from(index).unwrap_or(u16::MAX),
                    plane: u8::try_from(plane).unwrap_or(u8::MAX),
                })
            }
            None => {
                self.counters.no_usable = self.counters.no_usable.wrapping_add(1);
                None
            }
        }
    }

    /// The weight of `plane` in the plane scan: 0 when no EV on it is usable.
    #[inline]
    fn plane_eligible_weight(&self, plane: usize) -> u8 {
        self.plane_eligible.get(plane).copied().unwrap_or(0)
    }

    #[inline]
    fn pick_plane(&mut self) -> Option<usize> {
        let max_weight = self.max_plane_weight;
        if max_weight == 0 {
            return None;
        }
        // Fast path: the first step of the loop below when it picks (no wrap).
        let plane = self.plane_cursor;
        if plane < P && self.plane_eligible_weight(plane) >= self.plane_round {
            self.plane_cursor += 1;
            return Some(plane);
        }
        let limit = P * (usize::from(WEIGHT_MAX) + 3);
        for _ in 0..limit {
            if self.plane_cursor >= P {
                self.plane_cursor = 0;
                self.plane_round = next_round(self.plane_round, max_weight);
            }
            let plane = self.plane_cursor;
            self.plane_cursor += 1;
            if self.plane_eligible_weight(plane) >= self.plane_round {
                return Some(plane);
            }
        }
        None
    }

    #[inline]
    fn pick_ev_on(&mut self, plane: usize) -> Option<usize> {
        // The common pick's EV step (the plane scan may have passed over other planes).
        let index = wrap::<N>(usize::from(self.ev_next.get(plane).copied().unwrap_or(0)));
        if index != 0 {
            let round = self.ev_round.get(plane).copied().unwrap_or(1);
            if self
                .slots
                .get(index)
                .is_some_and(|s| s.pick_weight >= round)
            {
                self.picked_on(plane, index, None);
                return Some(index);
            }
        }
        let max_weight = self.plane_max_ev_weight(plane);
        if max_weight == 0 {
            // (not reached: `pick_plane` picks a plane with a usable EV)
            return None;
        }
        let mut cursor = self.ev_cursor(plane);
        let mut round = self.ev_round.get(plane).copied().unwrap_or(1);
        let plane_u8 = u8::try_from(plane).unwrap_or(u8::MAX);
        // Each step ends a pass, clears one skip flag or picks: at most WEIGHT_MAX + 3
        // failing passes (module docs) plus N flags plus the pick.
        let limit = usize::from(WEIGHT_MAX) + 3 + N + 1;
        for _ in 0..limit {
            if cursor >= N {
                cursor = 0;
                round = next_round(round, max_weight);
            }
            let Some(index) = self.find_on_plane(cursor, plane_u8, round) else {
                cursor = N;
                continue;
            };
            cursor = index + 1;
            if let Some(slot) = self.slots.get_mut(index) {
                if slot.skip_once() {
                    slot.set_flag(SKIP_ONCE, false);
                    self.counters.skips = self.counters.skips.wrapping_add(1);
                    continue;
                }
            }
            self.picked_on(plane, index, Some(round));
            return Some(index);
        }
        // (every step leaves the cursor at 1 or more: at a slot's successor or at N)
        self.set_ev_cursor(plane, cursor);
        if let Some(r) = self.ev_round.get_mut(plane) {
            *r = round;
        }
        None
    }

    /// `plane` picked its usable slot `index` (below N), in EV round `round` when that
    /// changed: the plane's last pick, and its common-pick candidate the slot's chain link.
    #[inline(always)]
    fn picked_on(&mut self, plane: usize, index: usize, round: Option<u8>) {
        let next = self.next_on_plane.get(index).copied().unwrap_or(0);
        if let (Some(l), Some(n)) = (self.ev_last.get_mut(plane), self.ev_next.get_mut(plane)) {
            // index < N <= 65536
            *l = index as u16;
            *n = next;
        }
        if let (Some(round), Some(r)) = (round, self.ev_round.get_mut(plane)) {
            *r = round;
        }
    }

    /// The EV cursor of `plane` (`1..=N`): the next slot index its scan examines.
    #[inline]
    fn ev_cursor(&self, plane: usize) -> usize {
        self.ev_last.get(plane).map_or(N, |&l| usize::from(l) + 1)
    }

    /// Move `plane`'s cursor to `cursor` (`1..=N`) and derive its common-pick candidate.
    #[inline]
    fn set_ev_cursor(&mut self, plane: usize, cursor: usize) {
        if let Some(l) = self.ev_last.get_mut(plane) {
            // 1 <= cursor <= N <= 65536
            *l = cursor.wrapping_sub(1) as u16;
        }
        self.derive_next(plane);
    }

    /// Derive `ev_next` of `plane` from its cursor, the slots and their chain links.
    fn derive_next(&mut self, plane: usize) {
        let next = self.derived_next(plane);
        if let Some(n) = self.ev_next.get_mut(plane) {
            *n = next;
        }
    }

    /// What `ev_next` of `plane` is (see the field), from its cursor, the slots and their
    /// chain links (what [`Self::derive_next`] stores; the common pick's debug check).
    fn derived_next(&self, plane: usize) -> u16 {
        let last = self.ev_cursor(plane).wrapping_sub(1);
        match self.slots.get(last) {
            Some(s) if usize::from(s.plane) == plane && s.usable() => {
                self.next_on_plane.get(last).copied().unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// The first slot at or after `cursor` that is usable, on `plane` and of weight `>= round`
    /// (the linear scan of the module docs, walking the plane's chain of usable slots).
    #[inline]
    fn find_on_plane(&self, cursor: usize, plane: u8, round: u8) -> Option<usize> {
        let next = |i: usize| match self.next_on_plane.get(i) {
            Some(&n) if n != 0 => Some(usize::from(n)),
            _ => None,
        };
        // The first slot of the plane at or after `cursor`: usually `cursor` itself, the
        // successor of the slot just before it (the last pick) or, at 0, the plane's first;
        // otherwise a plain scan.
        let mut at = match self.slots.get(cursor) {
            None => return None,
            Some(s) if s.plane == plane && s.usable() => Some(cursor),
            Some(_) => match cursor
                .checked_sub(1)
                .and_then(|c| self.slots.get(c).map(|s| (c, s)))
            {
                Some((c, s)) if s.plane == plane && s.usable() => next(c),
                Some(_) => self.scan_on_plane(cursor, plane),
                None => self.plane_head(plane),
            },
        };
        while let Some(i) = at {
            match self.slots.get(i) {
                Some(s) if s.usable() && s.weight >= round => return Some(i),
                Some(_) => at = next(i),
                None => return None,
            }
        }
        None
    }

    /// The first usable slot of `plane` at or after `cursor`, by a plain scan (the chain
    /// cannot say: the slot before `cursor` is not a usable slot of the plane).
    #[cold]
    #[inline(never)]
    fn scan_on_plane(&self, cursor: usize, plane: u8) -> Option<usize> {
        self.slots
            .get(cursor..)
            .and_then(|rest| rest.iter().position(|s| s.plane == plane && s.usable()))
            .map(|off| cursor + off)
    }

    /// The first usable slot of `plane`, if any.
    #[inline]
    fn plane_head(&self, plane: u8) -> Option<usize> {
        let head = usize::from(self.plane_head.get(usize::from(plane)).copied()?);
        self.slots
            .get(head)
            .is_some_and(|s| s.plane == plane && s.usable())
            .then_some(head)
    }

    /// Slot `i` became a usable slot of `plane` (`usable`) or stopped being one: link it into
    /// or out of the plane's chain of usable slots (and its head). Walks back to its
    /// predecessor on the plane (and, for a new first slot, forward to its successor):
    /// firmware writes only. The other slots are as they were when the chain was last right.
    fn link_usable_change(&mut self, i: usize, plane: u8, usable: bool) {
        // (the plane first: most slots are another plane's)
        let on_plane = |s: &Slot| s.plane == plane && s.usable();
        let pred = self
            .slots
            .get(..i)
            .and_then(|head| head.iter().rposition(on_plane));
        let own = self.next_on_plane.get(i).copied().unwrap_or(0);
        let succ = if usable {
            match pred {
                Some(j) => self.next_on_plane.get(j).copied().unwrap_or(0),
                None => self
                    .slots
                    .get(i + 1..)
                    .and_then(|tail| tail.iter().position(on_plane))
                    // i + 1 + off < N <= 65536
                    .map_or(0, |off| (i + 1 + off) as u16),
            }
        } else {
            own
        };
        if let Some(link) = self.next_on_plane.get_mut(i) {
            *link = if usable { succ } else { 0 };
        }
        // i < N <= 65536
        let link = if usable { i as u16 } else { succ };
        let prev = match pred {
            Some(j) => self.next_on_plane.get_mut(j),
            None => self.plane_head.get_mut(usize::from(plane)),
        };
        if let Some(prev) = prev {
            *prev = link;
        }
    }

    /// Count a usable slot into (`add`) or out of its plane's weight histogram, and its
    /// plane's set of usable weights with it. Returns whether the plane went from no usable
    /// EV to some or back (only then may the planes' eligible weights change).
    #[must_use]
    fn hist_update(&mut self, slot: EvSlot, add: bool) -> bool {
        if !slot.usable {
            return false;
        }
        let plane = usize::from(slot.plane);
        let (Some(hist), Some(weights)) = (
            self.plane_hist.get_mut(plane),
            self.plane_weights.get_mut(plane),
        ) else {
            return false;
        };
        let Some(c) = hist.get_mut(usize::from(slot.weight)) else {
            return false;
        };
        let was_empty = *weights == 0;
        *c = if add {
            c.saturating_add(1)
        } else {
            c.saturating_sub(1)
        };
        // weight <= WEIGHT_MAX < 16
        let bit = 1u16 << slot.weight;
        *weights = if *c > 0 {
            *weights | bit
        } else {
            *weights & !bit
        };
        was_empty != (*weights == 0)
    }

    /// The largest weight among the usable EVs of `plane` (0 when none).
    fn plane_max_ev_weight(&self, plane: usize) -> u8 {
        let weights = self.plane_weights.get(plane).copied().unwrap_or(0);
        // the highest set bit, a weight <= WEIGHT_MAX (0 when none)
        (u16::BITS - weights.leading_zeros()).saturating_sub(1) as u8
    }

    /// The planes' eligible weights and their largest, after any write.
    fn recompute_max_plane_weight(&mut self) {
        let mut max = 0;
        for ((e, &w), &weights) in self
            .plane_eligible
            .iter_mut()
            .zip(&self.plane_weight)
            .zip(&self.plane_weights)
        {
            // (some usable EV on the plane: some weight has one)
            *e = if weights == 0 { 0 } else { w };
            max = max.max(*e);
        }
        self.max_plane_weight = max;
    }
}

/// `i` when `N` is not a power of two, else `i mod N`: for an index known to be below `N`, the
/// same index, and a bounds check the compiler drops.
#[inline(always)]
fn wrap<const N: usize>(i: usize) -> usize {
    if N.is_power_of_two() {
        i & (N - 1)
    } else {
        i
    }
}

/// The IWRR round after `round`: wraps to 1 after `max_weight`.
fn next_round(round: u8, max_weight: u8) -> u8 {
    if round >= max_weight {
        1
    } else {
        round + 1
    }
}

#[cfg(test)]
#[path = "sprayer_tests.rs"]
mod tests;
