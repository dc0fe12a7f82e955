//! A hierarchical timer wheel with O(1) arm and cancel.
//!
//! Time is in nanoseconds and comes in from the caller; the wheel counts in ticks of `tick_ns`.
//! A timer with deadline `d` belongs to tick `ceil(d / tick_ns)` and is due once
//! `floor(now_ns / tick_ns)` reaches that tick, so it is **never early** (`d <= now_ns`) and at
//! most **one tick minus 1 ns late** relative to the first poll at which it is due. (Hence a
//! deadline inside the last, partial tick before `u64::MAX` never fires: it is "never".)
//!
//! Layout: a slab of `N` timer slots; four levels of 64 buckets (level `l` buckets span `64^l`
//! ticks, 2^24 ticks in all) plus an overflow list for deadlines further out; every bucket is an
//! intrusive doubly-linked list through the slab, with a 64-bit occupancy map per level so empty
//! stretches of time are skipped in one step. Due timers move to a ready list kept sorted by
//! `(deadline_ns, arm order)`, so [`TimerWheel::poll_expired`] yields them in deadline order with
//! ties broken by arm order.
//!
//! Handles carry a generation: cancelling a timer that already fired or was cancelled is a
//! [`TimerError::StaleHandle`], never the cancellation of whichever timer reuses the slot.
//! A full slab is [`TimerError::Full`] and counted. No allocation, no recursion, no panics.

const LEVELS: usize = 4;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
/// Ticks the wheel levels cover; later deadlines wait in the overflow list.
const WHEEL_SPAN_BITS: u32 = SLOT_BITS * LEVELS as u32;
const NIL: u32 = u32::MAX;
/// [`TimerWheel::tick_shift`] of a tick that is not a power of two.
const NOT_POW2: u32 = u32::MAX;

/// The caller's name for a timer, returned when it expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TimerId(pub u32);

/// A handle to an armed timer: slab index plus generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TimerHandle {
    index: u32,
    generation: u32,
}

/// A timer that fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Expired {
    /// The id given at arm time.
    pub id: TimerId,
    /// The deadline given at arm time.
    pub deadline_ns: u64,
}

/// What went wrong with a timer operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TimerError {
    /// All `N` slots hold armed timers.
    Full {
        /// The slab capacity.
        capacity: u32,
    },
    /// The handle's timer already fired or was cancelled (or the handle is from another wheel).
    StaleHandle,
    /// `tick_ns` was 0.
    ZeroTick,
}

/// Counters; every refused operation is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TimerCounters {
    /// Timers armed.
    pub armed: u64,
    /// Timers cancelled.
    pub cancelled: u64,
    /// Timers returned by `poll_expired`.
    pub expired: u64,
    /// Arms refused because the slab was full.
    pub full: u64,
    /// Cancels refused because the handle was stale.
    pub stale: u64,
    /// Timers armed with a deadline already due.
    pub armed_in_past: u64,
}

impl TimerCounters {
    /// All zero (what `Default` gives, usable in `const fn`).
    pub const ZERO: TimerCounters = TimerCounters {
        armed: 0,
        cancelled: 0,
        expired: 0,
        full: 0,
        stale: 0,
        armed_in_past: 0,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Free,
    Bucket { level: u8, slot: u8 },
    Overflow,
    Ready,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    deadline_ns: u64,
    seq: u64,
    id: TimerId,
    generation: u32,
    next: u32,
    prev: u32,
    loc: Loc,
}

impl Slot {
    const EMPTY: Slot = Slot {
        deadline_ns: 0,
        seq: 0,
        id: TimerId(0),
        generation: 0,
        next: NIL,
        prev: NIL,
        loc: Loc::Free,
    };
}

/// Where the next wheel event is.
#[derive(Clone, Copy)]
enum NextEvent {
    Bucket { level: usize, slot: usize },
    Overflow,
}

/// What [`TimerWheel::advance_one`] did.
#[derive(Clone, Copy)]
enum Advance {
    /// Nothing is due by the target tick.
    Nothing,
    /// A list was redistributed (maybe into the ready list).
    Moved,
    /// The one timer of a due level-0 bucket, out of every list.
    Lone(u32),
}

/// A hierarchical timer wheel holding at most `N` timers (`N < 2^32 - 1`).
pub struct TimerWheel<const N: usize> {
    slots: [Slot; N],
    free_head: u32,
    buckets: [[u32; SLOTS]; LEVELS],
    occupied: [u64; LEVELS],
    overflow_head: u32,
    /// Lower bound of the smallest deadline tick in the overflow list.
    overflow_min_tick: u64,
    ready_head: u32,
    ready_tail: u32,
    /// Every timer of tick <= `cur_tick` is in the ready list.
    cur_tick: u64,
    /// No timer outside the ready list is due before this instant (the start of a tick, in
    /// ns, saturated at `u64::MAX`; a lower bound, kept by `arm` and by a poll that found
    /// nothing due): a poll before it returns at once, with no division.
    quiet_until_ns: u64,
    /// `quiet_until_ns` is exactly when the first timer outside the ready list fires (set by a
    /// poll that found nothing due and by `arm` of a timer before the bound, cleared by
    /// `cancel` of a timer that may have been the first, by `arm` into the ready list and by a
    /// poll that moved time to a list): [`Self::next_deadline`] then answers without a look.
    quiet_exact: bool,
    /// The latest time polled, in ns (time never goes backwards); its tick is the wheel's
    /// "now".
    latest_ns: u64,
    /// (non-zero: the divisions by it need no zero check)
    tick_ns: core::num::NonZeroU64,
    /// `log2(tick_ns)` when the tick is a power of two (the divisions by it are shifts: the
    /// NIC core has no 64-bit divide), else [`NOT_POW2`].
    tick_shift: u32,
    next_seq: u64,
    len: u32,
    counters: TimerCounters,
    /// Test only: break tie ordering, to show the model check catches it.
    #[cfg(test)]
    planted_tie_bug: bool,
}

/// What the firmware engine needs of a timer wheel, whatever its capacity (implemented by
/// [`TimerWheel`]).
pub trait Timers {
    /// An empty wheel with a tick of `tick_ns`.
    fn with_tick(tick_ns: core::num::NonZeroU64) -> Self;
    /// See [`TimerWheel::arm`].
    ///
    /// # Errors
    /// As there.
    fn arm(&mut self, id: TimerId, deadline_ns: u64) -> Result<TimerHandle, TimerError>;
    /// See [`TimerWheel::cancel`].
    ///
    /// # Errors
    /// As there.
    fn cancel(&mut self, handle: TimerHandle) -> Result<TimerId, TimerError>;
    /// See [`TimerWheel::next_deadline`].
    fn next_deadline(&self) -> Option<u64>;
    /// See [`TimerWheel::is_quiet`].
    fn is_quiet(&mut self, now_ns: u64) -> bool;
    /// See [`TimerWheel::settle`].
    fn settle(&mut self);
    /// See [`TimerWheel::poll_expired`].
    fn poll_expired(&mut self, now_ns: u64) -> Option<Expired>;
    /// See [`TimerWheel::counters`].
    fn counters(&self) -> TimerCounters;
    /// The slab capacity.
    fn capacity(&self) -> usize;
}

impl<const N: usize> Timers for TimerWheel<N> {
    fn with_tick(tick_ns: core::num::NonZeroU64) -> Self {
        TimerWheel::with_tick(tick_ns)
    }
    #[inline]
    fn arm(&mut self, id: TimerId, deadline_ns: u64) -> Result<TimerHandle, TimerError> {
        TimerWheel::arm(self, id, deadline_ns)
    }
    #[inline]
    fn cancel(&mut self, handle: TimerHandle) -> Result<TimerId, TimerError> {
        TimerWheel::cancel(self, handle)
    }
    #[inline]
    fn next_deadline(&self) -> Option<u64> {
        TimerWheel::next_deadline(self)
    }
    #[inline]
    fn is_quiet(&mut self, now_ns: u64) -> bool {
        TimerWheel::is_quiet(self, now_ns)
    }
    fn settle(&mut self) {
        TimerWheel::settle(self)
    }
    #[inline]
    fn poll_expired(&mut self, now_ns: u64) -> Option<Expired> {
        TimerWheel::poll_expired(self, now_ns)
    }
    fn counters(&self) -> TimerCounters {
        TimerWheel::counters(self)
    }
    fn capacity(&self) -> usize {
        N
    }
}

impl<const N: usize> TimerWheel<N> {
    const CAPACITY_OK: () = assert!(N < NIL as usize, "TimerWheel capacity must be < 2^32 - 1");

    /// An empty wheel whose tick is `tick_ns`, starting at time 0.
    ///
    /// # Errors
    /// [`TimerError::ZeroTick`] when `tick_ns == 0`.
    pub const fn new(tick_ns: u64) -> Result<Self, TimerError> {
        match core::num::NonZeroU64::new(tick_ns) {
            Some(t) => Ok(Self::with_tick(t)),
            None => Err(TimerError::ZeroTick),
        }
    }

    /// An empty wheel whose tick is `tick_ns`, starting at time 0 (infallible [`Self::new`]).
    pub const fn with_tick(tick_ns: core::num::NonZeroU64) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        let mut slots = [Slot::EMPTY; N];
        // Free list threads through `next`.
        let mut i = 0;
        while i < N {
            slots[i].next = if i + 1 < N { (i + 1) as u32 } else { NIL };
            i += 1;
        }
        TimerWheel {
            slots,
            free_head: if N == 0 { NIL } else { 0 },
            buckets: [[NIL; SLOTS]; LEVELS],
            occupied: [0; LEVELS],
            overflow_head: NIL,
            overflow_min_tick: u64::MAX,
            ready_head: NIL,
            ready_tail: NIL,
            cur_tick: 0,
            quiet_until_ns: u64::MAX,
            quiet_exact: false,
            latest_ns: 0,
            tick_ns,
            tick_shift: if tick_ns.get().is_power_of_two() {
                tick_ns.get().trailing_zeros()
            } else {
                NOT_POW2
            },
            next_seq: 0,
            len: 0,
            counters: TimerCounters::ZERO,
            #[cfg(test)]
            planted_tie_bug: false,
        }
    }

    /// The tick length in ns.
    pub fn tick_ns(&self) -> u64 {
        self.tick_ns.get()
    }

    /// Armed timers.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// No armed timer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slab capacity `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Counters.
    pub fn counters(&self) -> TimerCounters {
        self.counters
    }

    /// Arm a timer named `id` that fires at `deadline_ns` (a deadline already due fires at the
    /// next poll).
    ///
    /// # Errors
    /// [`TimerError::Full`] (counted) when `N` timers are armed.
    pub fn arm(&mut self, id: TimerId, deadline_ns: u64) -> Result<TimerHandle, TimerError> {
        let idx = self.free_head;
        let Some(slot) = self.slots.get_mut(idx as usize) else {
            self.counters.full += 1;
            return Err(TimerError::Full { capacity: N as u32 });
        };
        self.free_head = slot.next;
        slot.deadline_ns = deadline_ns;
        slot.seq = self.next_seq;
        slot.id = id;
        slot.next = NIL;
        slot.prev = NIL;
        let generation = slot.generation;
        self.next_seq += 1;
        self.len += 1;
        self.counters.armed += 1;
        let tick = self.tick_of(deadline_ns);
        // When it fires: the start of its tick (`None`: past `u64::MAX`).
        let fire_ns = tick.checked_mul(self.tick_ns.get());
        // Due at the wheel's time or at the caller's (`tick <= latest_ns / tick_ns`).
        if tick <= self.cur_tick || fire_ns.is_some_and(|f| f <= self.latest_ns) {
            self.counters.armed_in_past += 1;
        }
        let fire = fire_ns.unwrap_or(u64::MAX);
        if tick <= self.cur_tick {
            // It goes to the ready list: the bound may now be below every timer outside it.
            self.quiet_until_ns = self.quiet_until_ns.min(fire);
            self.quiet_exact = false;
        } else if fire < self.quiet_until_ns {
            // Before the bound on every other timer outside the ready list: the first.
            self.quiet_until_ns = fire;
            self.quiet_exact = true;
        }
        self.place(idx, tick);
        Ok(TimerHandle {
            index: idx,
            generation,
        })
    }

    /// Cancel an armed timer; returns its id.
    ///
    /// # Errors
    /// [`TimerError::StaleHandle`] (counted) when the timer already fired or was cancelled.
    pub fn cancel(&mut self, handle: TimerHandle) -> Result<TimerId, TimerError> {
        let live = match self.slots.get(handle.index as usize) {
            Some(s) => s.generation == handle.generation && s.loc != Loc::Free,
            None => false,
        };
        if !live {
            self.counters.stale += 1;
            return Err(TimerError::StaleHandle);
        }
        let fire = self
            .slots
            .get(handle.index as usize)
            .map_or(0, |s| self.fire_ns(s.deadline_ns));
        self.unlink(handle.index);
        let id = self.release(handle.index);
        self.counters.cancelled += 1;
        // (a timer firing at the exact first instant may have been the first)
        if fire <= self.quiet_until_ns {
            self.quiet_exact = false;
        }
        Ok(id)
    }

    /// The deadline of an armed timer, `None` if the handle is stale.
    pub fn deadline_of(&self, handle: TimerHandle) -> Option<u64> {
        let s = self.slots.get(handle.index as usize)?;
        (s.generation == handle.generation && s.loc != Loc::Free).then_some(s.deadline_ns)
    }

    /// The earliest instant at which [`TimerWheel::poll_expired`] returns a timer: the first
    /// deadline rounded up to its tick (`None` when no timer is armed). Polling at this instant
    /// yields at least one timer unless it is cancelled first.
    #[inline]
    pub fn next_deadline(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        if self.ready_head == NIL && self.quiet_exact {
            return Some(self.quiet_until_ns);
        }
        self.next_deadline_look()
    }

    /// Work out now what [`Self::next_deadline`] would have to look for, so that it answers at
    /// once until the timers change (a firing and the timers re-armed after it leave the
    /// first deadline unknown; the owner settles after such a batch of changes).
    pub fn settle(&mut self) {
        if self.ready_head != NIL || self.quiet_exact {
            return;
        }
        if let Some(ev) = self.next_event() {
            self.quiet_until_ns = self.first_fire_ns(ev);
            self.quiet_exact = true;
        }
    }

    /// [`Self::next_deadline`] past its quick answer (the ready list's head, or a look when
    /// `quiet_until_ns` is not exact).
    #[inline(never)]
    fn next_deadline_look(&self) -> Option<u64> {
        if let Some(s) = self.slots.get(self.ready_head as usize) {
            return Some(self.fire_ns(s.deadline_ns));
        }
        self.next_event().map(|ev| self.first_fire_ns(ev))
    }

    /// When the first timer of the list `ev` fires: the earliest timer outside the ready list
    /// lives in that one list (levels cover disjoint, ordered ranges of ticks).
    fn first_fire_ns(&self, ev: NextEvent) -> u64 {
        let head = match ev {
            // A level-0 bucket holds the timers of one tick, the bucket's own.
            NextEvent::Bucket { level: 0, .. } => {
                return self.event_tick(ev).saturating_mul(self.tick_ns.get());
            }
            NextEvent::Bucket { level, slot } => self.buckets[level][slot],
            NextEvent::Overflow => self.overflow_head,
        };
        let mut min = u64::MAX;
        let mut i = head;
        while let Some(s) = self.slots.get(i as usize) {
            min = min.min(s.deadline_ns);
            i = s.next;
        }
        self.fire_ns(min)
    }

    /// The first step of [`Self::poll_expired`]: `true` (and the caller's time noted) when
    /// nothing can be due at `now_ns`, so a poll would return `None`; `false`, having changed
    /// nothing, when a poll is needed.
    #[inline]
    pub fn is_quiet(&mut self, now_ns: u64) -> bool {
        let now = now_ns.max(self.latest_ns);
        if self.ready_head == NIL && now < self.quiet_until_ns {
            self.latest_ns = now;
            return true;
        }
        false
    }

    /// The next due timer at `now_ns`: the one with the smallest `(deadline, arm order)`, or
    /// `None` when nothing is due. Call until `None`. Time never goes backwards: a `now_ns`
    /// earlier than a previous one is treated as the previous one.
    pub fn poll_expired(&mut self, now_ns: u64) -> Option<Expired> {
        if self.is_quiet(now_ns) {
            // Nothing can be due yet. The wheel's own time (`cur_tick`) stays put: moving it
            // without redistributing could pass a bucket's start; `latest_ns` remembers how
            // far the caller's time went.
            return None;
        }
        let now = now_ns.max(self.latest_ns);
        self.latest_ns = now;
        let target = self.ticks(now);
        let mut idx = self.ready_head;
        while idx == NIL {
            match self.advance_one(target) {
                Advance::Nothing => break,
                Advance::Moved => idx = self.ready_head,
                // (already out of every list)
                Advance::Lone(i) => {
                    let s = *self.slots.get(i as usize)?;
                    self.release(i);
                    self.counters.expired += 1;
                    return Some(Expired {
                        id: s.id,
                        deadline_ns: s.deadline_ns,
                    });
                }
            }
        }
        let s = *self.slots.get(idx as usize)?;
        self.unlink(idx);
        self.release(idx);
        self.counters.expired += 1;
        Some(Expired {
            id: s.id,
            deadline_ns: s.deadline_ns,
        })
    }

    /// Whole ticks in `ns` (rounded down).
    #[inline]
    fn ticks(&self, ns: u64) -> u64 {
        if self.tick_shift == NOT_POW2 {
            ns / self.tick_ns
        } else {
            ns >> self.tick_shift
        }
    }

    /// The tick a deadline belongs to: `ceil(deadline_ns / tick_ns)`.
    #[inline]
    fn tick_of(&self, deadline_ns: u64) -> u64 {
        let whole = self.ticks(deadline_ns);
        let rest = if self.tick_shift == NOT_POW2 {
            deadline_ns % self.tick_ns
        } else {
            deadline_ns & ((1 << self.tick_shift) - 1)
        };
        whole + u64::from(rest != 0)
    }

    fn fire_ns(&self, deadline_ns: u64) -> u64 {
        self.tick_of(deadline_ns).saturating_mul(self.tick_ns.get())
    }

    /// The first non-empty list ahead of `cur_tick`, lowest level first (levels hold disjoint,
    /// increasing ranges of ticks, the overflow list the furthest).
    fn next_event(&self) -> Option<NextEvent> {
        for level in 0..LEVELS {
            let group = (self.cur_tick >> (SLOT_BITS * level as u32)) & (SLOTS as u64 - 1);
            // The slots after `group` (none after the last): `!0 << (group + 1)` with no
            // shift past 63.
            let ahead = !1u64 << group;
            let hits = self.occupied[level] & ahead;
            if hits != 0 {
                return Some(NextEvent::Bucket {
                    level,
                    slot: hits.trailing_zeros() as usize,
                });
            }
        }
        (self.overflow_head != NIL).then_some(NextEvent::Overflow)
    }

    fn event_tick(&self, ev: NextEvent) -> u64 {
        match ev {
            NextEvent::Bucket { level, slot } => {
                let shift = SLOT_BITS * level as u32;
                let upper = (self.cur_tick >> (shift + SLOT_BITS)) << (shift + SLOT_BITS);
                upper | ((slot as u64) << shift)
            }
            NextEvent::Overflow => {
                let start = (self.overflow_min_tick >> WHEEL_SPAN_BITS) << WHEEL_SPAN_BITS;
                start.max(self.cur_tick)
            }
        }
    }

    /// Move time toward `target` up to the next non-empty list and redistribute it.
    /// [`Advance::Nothing`] when nothing lies at or before `target` (time is then at
    /// `target`); [`Advance::Lone`] when that list was a level-0 bucket holding one timer (the
    /// next to fire, unlinked instead of going through the ready list, which stays empty).
    fn advance_one(&mut self, target: u64) -> Advance {
        let Some(ev) = self.next_event() else {
            self.cur_tick = self.cur_tick.max(target);
            self.quiet_until_ns = u64::MAX;
            self.quiet_exact = false;
            return Advance::Nothing;
        };
        let at = self.event_tick(ev);
        if at > target {
            self.cur_tick = self.cur_tick.max(target);
            // Levels hold disjoint, increasing tick ranges: the first timer to fire is in this
            // list (a level-0 bucket's are all at `at`), so polls before it answer at once and
            // so does `next_deadline`.
            self.quiet_until_ns = self.first_fire_ns(ev);
            self.quiet_exact = true;
            return Advance::Nothing;
        }
        self.cur_tick = at;
        self.quiet_exact = false;
        let mut i = match ev {
            NextEvent::Bucket { level, slot } => {
                let head = self.buckets[level][slot];
                self.buckets[level][slot] = NIL;
                self.occupied[level] &= !(1u64 << slot);
                // A level-0 bucket's timers are all of its tick, `at`: a lone one is due.
                // (a list head has no `prev`)
                if level == 0 && self.slots.get(head as usize).is_some_and(|s| s.next == NIL) {
                    return Advance::Lone(head);
                }
                head
            }
            NextEvent::Overflow => {
                let head = self.overflow_head;
                self.overflow_head = NIL;
                self.overflow_min_tick = u64::MAX;
                head
            }
        };
        while let Some(s) = self.slots.get(i as usize) {
            let (next, tick) = (s.next, self.tick_of(s.deadline_ns));
            self.place(i, tick);
            i = next;
        }
        Advance::Moved
    }

    /// Put slot `idx` (unlinked) into the list its deadline (of tick `tick`, see
    /// [`Self::tick_of`]) belongs to, relative to `cur_tick`.
    fn place(&mut self, idx: u32, tick: u64) {
        let Some(s) = self.slots.get(idx as usize) else {
            return;
        };
        let (deadline_ns, seq) = (s.deadline_ns, s.seq);
        if tick <= self.cur_tick {
            self.insert_ready(idx, deadline_ns, seq);
            return;
        }
        let diff = tick ^ self.cur_tick;
        let level = ((63 - diff.leading_zeros()) / SLOT_BITS) as usize;
        if level >= LEVELS {
            self.overflow_min_tick = self.overflow_min_tick.min(tick);
            let head = self.overflow_head;
            self.push_front(idx, head, Loc::Overflow);
            self.overflow_head = idx;
            return;
        }
        let slot = ((tick >> (SLOT_BITS * level as u32)) & (SLOTS as u64 - 1)) as usize;
        let head = self.buckets[level][slot];
        self.push_front(
            idx,
            head,
            Loc::Bucket {
                level: level as u8,
                slot: slot as u8,
            },
        );
        self.buckets[level][slot] = idx;
        self.occupied[level] |= 1u64 << slot;
    }

    fn push_front(&mut self, idx: u32, head: u32, loc: Loc) {
        if let Some(h) = self.slots.get_mut(head as usize) {
            h.prev = idx;
        }
        if let Some(s) = self.slots.get_mut(idx as usize) {
            s.next = head;
            s.prev = NIL;
            s.loc = loc;
        }
    }

    /// Sorted insert into the ready list, walking from the tail (arms mostly come in order).
    fn insert_ready(&mut self, idx: u32, deadline_ns: u64, seq: u64) {
        let key = (deadline_ns, seq);
        let mut after = self.ready_tail;
        while let Some(s) = self.slots.get(after as usize) {
            // The planted bug ignores arm order among equal deadlines.
            #[cfg(test)]
            if self.planted_tie_bug && s.deadline_ns == deadline_ns {
                break;
            }
            if (s.deadline_ns, s.seq) <= key {
                break;
            }
            after = s.prev;
        }
        let before = match self.slots.get(after as usize) {
            Some(s) => s.next,
            None => self.ready_head,
        };
        if let Some(s) = self.slots.get_mut(idx as usize) {
            s.prev = after;
            s.next = before;
            s.loc = Loc::Ready;
        }
        match self.slots.get_mut(after as usize) {
            Some(a) => a.next = idx,
            None => self.ready_head = idx,
        }
        match self.slots.get_mut(before as usize) {
            Some(b) => b.prev = idx,
            None => self.ready_tail = idx,
        }
    }

    /// Remove slot `idx` from whatever list holds it.
    fn unlink(&mut self, idx: u32) {
        let Some(s) = self.slots.get(idx as usize) else {
            return;
        };
        let (prev, next, loc) = (s.prev, s.next, s.loc);
        if let Some(n) = self.slots.get_mut(next as usize) {
            n.prev = prev;
        }
        match self.slots.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => match loc {
                Loc::Bucket { level, slot } => {
                    let (l, sl) = (level as usize % LEVELS, slot as usize % SLOTS);
                    self.buckets[l][sl] = next;
                    if next == NIL {
                        self.occupied[l] &= !(1u64 << sl);
                    }
                }
                Loc::Overflow => self.overflow_head = next,
                Loc::Ready => self.ready_head = next,
                Loc::Free => {}
            },
        }
        if loc == Loc::Ready && self.ready_tail == idx {
            self.ready_tail = prev;
        }
        if let Some(s) = self.slots.get_mut(idx as usize) {
            s.next = NIL;
            s.prev = NIL;
        }
    }

    /// Return an unlinked slot to the free list, bumping its generation.
    fn release(&mut self, idx: u32) -> TimerId {
        let free_head = self.free_head;
        let Some(s) = self.slots.get_mut(idx as usize) else {
            return TimerId(0);
        };
        s.loc = Loc::Free;
        s.generation = s.generation.wrapping_add(1);
        s.next = free_head;
        self.free_head = idx;
        self.len -= 1;
        s.id
    }
}

#[cfg(test)]
#[path = "timer_wheel_tests.rs"]
mod tests;
