//! The pending-event queue: a self-tuning timing wheel with a heap for far events.
//!
//! # Order
//! Events leave in increasing `(time, seq)` order, where `seq` is the queue's insertion counter
//! ([`EventQueue::push`]: events at the same picosecond leave in the order they were pushed,
//! FIFO) or a key the caller chose ([`EventQueue::push_with_seq`]). Nothing else (no
//! address, no hash, no tuning state) influences the order, so the same pushes give the same
//! pops, bit for bit, whatever the internal bucket layout is.
//!
//! # Structure
//! Time is cut into ticks of `2^shift` ps. With `cur` the current tick:
//! - the front, every event whose tick is `< cur`: `run`, the bucket being consumed (tens to
//!   thousands of events, in cache), sorted once when it is loaded and popped from the front
//!   (a cursor, `run_next`), plus `late`, a binary heap of what was pushed into the past or the
//!   present since;
//! - `buckets`: a ring of `nb` unsorted vectors, bucket `t % nb` holding the events of tick `t`
//!   for `cur <= t < cur + nb`, and a bitmap of the non-empty ones;
//! - `overflow`: a binary heap of the events at ticks `>= cur + nb`.
//!
//! `pop` takes the earlier of `run`'s next and `late`'s top; when both are empty the next
//! non-empty bucket (found through the bitmap) is sorted into `run` in place (the two vectors
//! swap allocations), `cur` moves past it, and overflow events that came into the horizon
//! migrate into the ring. Every event is therefore touched O(1) times plus its share of one
//! sort among its in-cache bucket neighbours (a sort, done once per bucket, costs several
//! times less than a heap pop per event: no sift per pop, predictable branches).
//!
//! The tick width and ring size are re-chosen (`rebuild`, O(len)) when the population doubles or
//! quarters, or when the observed bucket loads or overflow migrations say the layout is off;
//! rebuilds are amortized over at least `len` operations. The ring reaches the 99th percentile
//! of pending times with about 16 pending events per bucket, and its ticks are narrowed (the
//! ring growing to keep its reach, up to `MAX_RING_GROWTH` times) until at most
//! `POPS_PER_TICK` events are *popped* per tick: a simulation's pending events bunch near the
//! present (packets in flight) with a thin tail far ahead (timers), so buckets sized by the
//! pending population alone each held ~100 events of the present, and their sorts cost more
//! than the rest of the queue.
//!
//! A loaded bucket's allocation goes to a small pool of spares (`MAX_SPARES` vectors of at
//! most `KEEP_CAPACITY` events) from which the next bucket to be filled takes one: the idle
//! capacity stays a few times the events pending instead of every bucket keeping its
//! high-water mark (which, at 16,384 hosts of the two-tier bench, would be 1.7 GB of idle
//! capacity for ~1 M pending events). A larger allocation (a burst's bucket) goes to a pool
//! of `MAX_BIG_SPARES`, from which a bucket that outgrows `KEEP_CAPACITY` takes one at once
//! instead of doubling through a reallocation and copy per step. Otherwise, in steady state no
//! operation allocates.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::time::Time;

/// An event as it leaves the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled<P> {
    /// When it fires.
    pub time: Time,
    /// Insertion sequence number: the tie-break for equal times (unique per queue).
    pub seq: u64,
    /// What the owner stored.
    pub payload: P,
}

#[derive(Clone, Copy)]
struct Entry<P> {
    time: u64,
    seq: u64,
    payload: P,
}

impl<P> Entry<P> {
    /// `(time, seq)` as one integer (time in the high half): the same order as the pair, with
    /// one wide comparison instead of a tuple's branches (sorts and heap sifts compare often).
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.time) << 64) | u128::from(self.seq)
    }
}
impl<P> PartialEq for Entry<P> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<P> Eq for Entry<P> {}
impl<P> PartialOrd for Entry<P> {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
    #[inline]
    fn lt(&self, o: &Self) -> bool {
        o.key() < self.key()
    }
    #[inline]
    fn le(&self, o: &Self) -> bool {
        o.key() <= self.key()
    }
    #[inline]
    fn gt(&self, o: &Self) -> bool {
        o.key() > self.key()
    }
    #[inline]
    fn ge(&self, o: &Self) -> bool {
        o.key() >= self.key()
    }
}
impl<P> Ord for Entry<P> {
    /// Reversed so that `BinaryHeap` (a max-heap) yields the smallest `(time, seq)` first.
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

/// Counters describing the queue's work (for reports and tuning, not for decisions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Events pushed.
    pub pushes: u64,
    /// Events popped.
    pub pops: u64,
    /// Largest number of pending events seen.
    pub max_len: usize,
    /// Ring buckets moved into the front.
    pub bucket_loads: u64,
    /// Events moved from the overflow heap into the ring.
    pub migrations: u64,
    /// Full re-layouts of the queue.
    pub rebuilds: u64,
}

/// Smallest ring (one bitmap word).
const MIN_BUCKETS: usize = 64;
/// Largest ring: 4 Mi buckets.
const MAX_BUCKETS: usize = 1 << 22;
/// Events per bucket on average over the horizon. Large on purpose: a bucket is appended to
/// sequentially and heapified once, in cache, so a few dozen to a few thousand events per bucket
/// cost less than one cache miss per event on a big ring (measured with `benches/event_queue.rs`:
/// 16 per bucket beat 2 by about 3x at 1 M pending).
const TARGET_PER_BUCKET: usize = 16;
/// Share of the pending events (per mille) the ring's horizon is sized to cover; the rest wait in
/// the overflow heap.
const HORIZON_COVER_PERMILLE: usize = 990;
/// A bucket larger than this (about 100 KiB) means the ticks are too wide for the workload.
const MAX_EVENTS_PER_LOAD: u64 = 4096;
/// Population below which the queue never rebuilds for shrinking.
const MIN_REBUILD_LEN: usize = 1024;
/// Events popped per tick the ticks narrow to (when the pending population alone would make
/// them wider): few enough that a loaded bucket is sorted by insertion, in a few moves per
/// event, where a bucket of a hundred costs a sort's many comparisons per event.
const POPS_PER_TICK: usize = 8;
/// A spare bucket allocation holds at most this many events (four times the target load).
const KEEP_CAPACITY: usize = 4 * TARGET_PER_BUCKET;
/// Spare bucket allocations kept for buckets about to be filled.
const MAX_SPARES: usize = 64;
/// Spare allocations of more than `KEEP_CAPACITY` events kept for buckets that outgrow theirs
/// (bursts of events at one time), each of at most `BIG_CAPACITY` events (2 MiB).
const MAX_BIG_SPARES: usize = 4;
/// Largest allocation kept among the big spares (events).
const BIG_CAPACITY: usize = 1 << 16;
/// The ring narrowed to the pop rate grows to at most this many times the buckets the pending
/// population alone asks for.
const MAX_RING_GROWTH: usize = 16;

/// A priority queue of `(time, payload)` ordered by time then insertion order.
///
/// ```
/// use mrc_sim::core::queue::EventQueue;
/// use mrc_sim::core::time::Time;
/// let mut q = EventQueue::new();
/// q.push(Time::from_ns(5), 'b');
/// q.push(Time::from_ns(1), 'a');
/// q.push(Time::from_ns(5), 'c');
/// let order: Vec<char> = std::iter::from_fn(|| q.pop()).map(|e| e.payload).collect();
/// assert_eq!(order, ['a', 'b', 'c']);
/// ```
pub struct EventQueue<P: Copy> {
    /// The loaded bucket, sorted by increasing `(time, seq)`; those before `run_next` are
    /// popped already.
    run: Vec<Entry<P>>,
    /// Index in `run` of the next event.
    run_next: usize,
    /// Events pushed at a tick `< cur` since the bucket was loaded.
    late: BinaryHeap<Entry<P>>,
    buckets: Vec<Vec<Entry<P>>>,
    occupied: Vec<u64>,
    overflow: BinaryHeap<Entry<P>>,
    shift: u32,
    cur: u64,
    wheel_len: usize,
    len: usize,
    next_seq: u64,
    grow_at: usize,
    shrink_at: usize,
    // Tuning counters since the last rebuild or check.
    pops_since: u64,
    loads_since: u64,
    migrations_since: u64,
    check_every: u64,
    /// Time of the last event popped, and of the last one popped when tuning was last checked
    /// (ps): how much time the pops since covered.
    last_pop_ps: u64,
    tuned_from_ps: u64,
    /// Time in which about `POPS_PER_TICK` events were popped, as last observed (ps).
    pop_width_ps: Option<u64>,
    /// Allocations of loaded buckets, for the next buckets to be filled.
    spares: Vec<Vec<Entry<P>>>,
    /// Larger allocations of loaded buckets, for buckets that outgrow theirs.
    big_spares: Vec<Vec<Entry<P>>>,
    /// Room for a rebuild's events, and the other half of a bucket's merge sort.
    scratch: Vec<Entry<P>>,
    /// Where the ascending runs of the bucket being sorted end.
    run_ends: Vec<usize>,
    stats: QueueStats,
}

impl<P: Copy> Default for EventQueue<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Copy> EventQueue<P> {
    /// An empty queue with 1 ns ticks (re-tuned automatically as it fills).
    pub fn new() -> Self {
        Self::with_layout(10, MIN_BUCKETS)
    }

    /// An empty queue with ticks of `2^shift` ps and a ring of `buckets` (rounded to a power of
    /// two in `64..=4Mi`). Only a starting point: the queue re-tunes itself.
    pub fn with_layout(shift: u32, buckets: usize) -> Self {
        let nb = buckets.clamp(MIN_BUCKETS, MAX_BUCKETS).next_power_of_two();
        let mut q = EventQueue {
            run: Vec::new(),
            run_next: 0,
            late: BinaryHeap::new(),
            buckets: Vec::new(),
            occupied: Vec::new(),
            overflow: BinaryHeap::new(),
            shift: shift.min(63),
            cur: 0,
            wheel_len: 0,
            len: 0,
            next_seq: 0,
            grow_at: MIN_REBUILD_LEN,
            shrink_at: 0,
            pops_since: 0,
            loads_since: 0,
            migrations_since: 0,
            check_every: MIN_REBUILD_LEN as u64,
            last_pop_ps: 0,
            tuned_from_ps: 0,
            pop_width_ps: None,
            spares: Vec::new(),
            big_spares: Vec::new(),
            scratch: Vec::new(),
            run_ends: Vec::new(),
            stats: QueueStats::default(),
        };
        q.set_ring(nb);
        q
    }

    /// Pending events.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Work counters.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// The sequence number the next `push` will get.
    #[inline]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Adds an event; returns its sequence number. Any time is accepted (even one earlier than
    /// events already popped: the queue is a plain priority queue; the simulator enforces
    /// causality).
    #[inline]
    pub fn push(&mut self, time: Time, payload: P) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.push_with_seq(time, seq, payload);
        seq
    }

    /// Adds an event with a caller-chosen tie-break `seq` (the caller keeps the keys unique:
    /// two events with equal `(time, seq)` leave in an unspecified order). Does not move
    /// [`EventQueue::next_seq`]. The simulator orders its events this way by a key that does
    /// not depend on how the model is partitioned ([`crate::core::sim`]).
    #[inline]
    pub fn push_with_seq(&mut self, time: Time, seq: u64, payload: P) {
        self.place(Entry {
            time: time.as_ps(),
            seq,
            payload,
        });
        self.len += 1;
        self.stats.pushes += 1;
        if self.len > self.stats.max_len {
            self.stats.max_len = self.len;
        }
        if self.len > self.grow_at {
            self.rebuild();
        }
    }

    /// Removes and returns the earliest event (smallest `(time, seq)`).
    #[inline]
    pub fn pop(&mut self) -> Option<Scheduled<P>> {
        self.pop_at_or_before(Time::MAX)
    }

    /// Removes and returns the earliest event if its time is `<= limit`.
    #[inline]
    pub fn pop_at_or_before(&mut self, limit: Time) -> Option<Scheduled<P>> {
        if self.front_is_empty() && !self.refill() {
            return None;
        }
        // The front's earliest: `run`'s next, unless `late` holds an earlier one.
        let from_late = match (self.run.get(self.run_next), self.late.peek()) {
            (Some(r), Some(l)) => l.key() < r.key(),
            (r, _) => r.is_none(),
        };
        let e = if from_late {
            let e = self.late.peek()?;
            if e.time > limit.as_ps() {
                return None;
            }
            self.late.pop()?
        } else {
            let e = *self.run.get(self.run_next)?;
            if e.time > limit.as_ps() {
                return None;
            }
            self.run_next += 1;
            e
        };
        self.last_pop_ps = e.time;
        self.after_pop();
        Some(Scheduled {
            time: Time::from_ps(e.time),
            seq: e.seq,
            payload: e.payload,
        })
    }

    /// The payload of the event [`EventQueue::pop`] would return next, when that is known
    /// without work (the front holds it); `None` otherwise. For prefetching, not for
    /// decisions: it costs one comparison.
    #[inline]
    pub fn peek_front(&self) -> Option<&P> {
        self.front().map(|e| &e.payload)
    }

    /// The payload of the event after the one [`EventQueue::peek_front`] names, when that is
    /// known without work (the loaded bucket holds both and nothing was pushed in front of
    /// them); `None` otherwise. For prefetching, not for decisions.
    #[inline]
    pub fn peek_second(&self) -> Option<&P> {
        if !self.late.is_empty() {
            return None;
        }
        self.run.get(self.run_next + 1).map(|e| &e.payload)
    }

    #[inline]
    fn front_is_empty(&self) -> bool {
        self.run_next == self.run.len() && self.late.is_empty()
    }

    /// The earliest event of the front (`run`'s next or `late`'s top).
    #[inline]
    fn front(&self) -> Option<&Entry<P>> {
        match (self.run.get(self.run_next), self.late.peek()) {
            (Some(r), Some(l)) => Some(if l.key() < r.key() { l } else { r }),
            (r, l) => r.or(l),
        }
    }

    /// Time of the earliest pending event, without removing it. Read-only, so when the front
    /// heap is empty it scans the next bucket (O(bucket)); loops should use
    /// [`EventQueue::pop_at_or_before`] instead.
    pub fn peek_time(&self) -> Option<Time> {
        if let Some(e) = self.front() {
            return Some(Time::from_ps(e.time));
        }
        if self.wheel_len > 0 {
            let idx = self.find_occupied((self.cur & self.mask()) as usize);
            return self.buckets[idx]
                .iter()
                .map(|e| Time::from_ps(e.time))
                .min();
        }
        self.overflow.peek().map(|e| Time::from_ps(e.time))
    }

    #[inline]
    fn mask(&self) -> u64 {
        self.buckets.len() as u64 - 1
    }

    /// Puts `e` where the layout invariant wants it (does not touch `len`).
    #[inline(always)]
    fn place(&mut self, e: Entry<P>) {
        let tick = e.time >> self.shift;
        if tick < self.cur {
            self.late.push(e);
        } else if tick - self.cur < self.buckets.len() as u64 {
            self.put_in_ring(tick, e);
        } else {
            self.overflow.push(e);
        }
    }

    #[inline(always)]
    fn put_in_ring(&mut self, tick: u64, e: Entry<P>) {
        let i = (tick & self.mask()) as usize;
        let b = &self.buckets[i];
        if b.len() == b.capacity() {
            self.make_room(i);
        }
        self.buckets[i].push(e);
        self.occupied[i >> 6] |= 1u64 << (i & 63);
        self.wheel_len += 1;
    }

    /// Bucket `i` is full (or has no allocation): gives it room for one more event. An empty
    /// bucket takes a spare allocation, or one for a bucket's usual load at once, instead of
    /// growing one through 4, 8 and 16 (each step a reallocation and a copy); a bucket that
    /// outgrows `KEEP_CAPACITY` moves into a big spare if one has room; else it doubles.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, i: usize) {
        let b = &mut self.buckets[i];
        if b.capacity() == 0 {
            *b = self
                .spares
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(TARGET_PER_BUCKET));
            return;
        }
        if b.capacity() >= KEEP_CAPACITY {
            if let Some(mut big) = self.big_spares.pop() {
                if big.capacity() > b.len() {
                    big.extend_from_slice(b);
                    let small = std::mem::replace(b, big);
                    self.keep_spare(small);
                    return;
                }
                self.big_spares.push(big);
            }
        }
        b.reserve(1);
    }

    /// Keeps a loaded bucket's allocation `v` (emptied) for a bucket to be filled, if the pool
    /// of its size has room; frees it otherwise.
    fn keep_spare(&mut self, mut v: Vec<Entry<P>>) {
        v.clear();
        let c = v.capacity();
        if c == 0 {
            return;
        }
        if c <= KEEP_CAPACITY {
            if self.spares.len() < MAX_SPARES {
                self.spares.push(v);
            }
        } else if c <= BIG_CAPACITY && self.big_spares.len() < MAX_BIG_SPARES {
            self.big_spares.push(v);
        }
    }

    #[inline]
    fn after_pop(&mut self) {
        self.len -= 1;
        self.stats.pops += 1;
        self.pops_since += 1;
        if self.pops_since >= self.check_every {
            self.check_tuning();
        }
    }

    /// First occupied bucket at or after `start`, circularly. Requires `wheel_len > 0`.
    fn find_occupied(&self, start: usize) -> usize {
        let words = self.occupied.len();
        let w0 = start >> 6;
        let first = self.occupied[w0] & (!0u64 << (start & 63));
        if first != 0 {
            return (w0 << 6) | first.trailing_zeros() as usize;
        }
        for k in 1..=words {
            let w = (w0 + k) & (words - 1);
            let bits = self.occupied[w];
            if bits != 0 {
                return (w << 6) | bits.trailing_zeros() as usize;
            }
        }
        debug_assert!(false, "find_occupied on an empty ring");
        start
    }

    /// Loads the next non-empty bucket into the (empty) front. False if nothing is pending.
    fn refill(&mut self) -> bool {
        if self.wheel_len == 0 {
            let Some(top) = self.overflow.peek() else {
                return false;
            };
            self.cur = top.time >> self.shift;
            self.migrate();
        }
        let mask = self.mask();
        let start = (self.cur & mask) as usize;
        let idx = self.find_occupied(start);
        let tick = self.cur + ((idx as u64).wrapping_sub(start as u64) & mask);
        let spare = std::mem::take(&mut self.run);
        self.keep_spare(spare);
        let mut bucket = std::mem::take(&mut self.buckets[idx]);
        self.occupied[idx >> 6] &= !(1u64 << (idx & 63));
        self.wheel_len -= bucket.len();
        sort_bucket(&mut bucket, &mut self.scratch, &mut self.run_ends);
        self.run = bucket;
        self.run_next = 0;
        // Saturates only for the very last tick of time, whose events are then all in front
        // or (pushed later, so with larger seq) in the ring: the order stays right.
        self.cur = tick.saturating_add(1);
        self.migrate();
        self.stats.bucket_loads += 1;
        self.loads_since += 1;
        true
    }

    /// Moves overflow events whose tick entered the horizon into the ring.
    #[inline]
    fn migrate(&mut self) {
        let nb = self.buckets.len() as u64;
        while let Some(top) = self.overflow.peek() {
            let tick = top.time >> self.shift;
            // Overflow ticks are >= cur (layout invariant), so this cannot wrap.
            if tick - self.cur >= nb {
                break;
            }
            if let Some(e) = self.overflow.pop() {
                self.put_in_ring(tick, e);
                self.stats.migrations += 1;
                self.migrations_since += 1;
            }
        }
    }

    /// Every `check_every` pops: re-lay the queue if buckets are too full or too many events
    /// travel through the overflow heap; back off when a rebuild would not help.
    fn check_tuning(&mut self) {
        let pops = self.pops_since.max(1);
        let per_load = pops / self.loads_since.max(1);
        let covered_ps = self.last_pop_ps.saturating_sub(self.tuned_from_ps);
        if covered_ps > 0 {
            let w = covered_ps.saturating_mul(POPS_PER_TICK as u64) / pops;
            self.pop_width_ps = Some(w.max(1));
        }
        let too_wide = per_load > MAX_EVENTS_PER_LOAD;
        let bunched = per_load > 4 * POPS_PER_TICK as u64
            && self
                .pop_width_ps
                .is_some_and(|w| w < (1u64 << self.shift) / 2);
        let too_short = self.migrations_since * 2 > pops;
        let sparse = self.len < self.shrink_at;
        if too_wide || bunched || too_short || sparse {
            let before = (self.shift, self.buckets.len());
            self.rebuild();
            if (self.shift, self.buckets.len()) == before {
                // Same layout again: this workload simply looks like this. Check less often.
                self.check_every = self.check_every.saturating_mul(4);
            }
        } else {
            self.reset_tuning();
        }
    }

    fn reset_tuning(&mut self) {
        self.tuned_from_ps = self.last_pop_ps;
        self.pops_since = 0;
        self.loads_since = 0;
        self.migrations_since = 0;
        self.check_every = self.check_every.max(self.len.max(MIN_REBUILD_LEN) as u64);
    }

    fn set_ring(&mut self, nb: usize) {
        self.buckets.truncate(nb);
        self.buckets.resize_with(nb, Vec::new);
        self.occupied.clear();
        self.occupied.resize(nb / 64, 0);
    }

    /// Re-chooses tick width and ring size from the pending events and re-places them all.
    fn rebuild(&mut self) {
        self.stats.rebuilds += 1;
        let mut all = std::mem::take(&mut self.scratch);
        all.clear();
        all.extend_from_slice(&self.run[self.run_next..]);
        self.run.clear();
        self.run_next = 0;
        all.extend(self.late.drain());
        let mut w = 0;
        while w < self.occupied.len() {
            let mut bits = self.occupied[w];
            while bits != 0 {
                let i = (w << 6) | bits.trailing_zeros() as usize;
                bits &= bits - 1;
                all.append(&mut self.buckets[i]);
                if self.buckets[i].capacity() > KEEP_CAPACITY {
                    self.buckets[i] = Vec::new();
                }
            }
            self.occupied[w] = 0;
            w += 1;
        }
        all.extend(self.overflow.drain());
        self.wheel_len = 0;

        let n = all.len();
        let min_t = all.iter().map(|e| e.time).min().unwrap_or(0);
        let (shift, nb) = choose_layout(&all, min_t, self.pop_width_ps);
        self.shift = shift;
        self.set_ring(nb);
        self.cur = min_t >> self.shift;
        for e in all.drain(..) {
            self.place(e);
        }
        self.scratch = all;
        self.grow_at = (2 * n).max(MIN_REBUILD_LEN);
        self.shrink_at = if n >= 4 * MIN_REBUILD_LEN { n / 4 } else { 0 };
        self.check_every = n.max(MIN_REBUILD_LEN) as u64;
        self.reset_tuning();
    }
}

/// Buckets of at most this many events are sorted by insertion (the standard library's stable
/// sort at this size); larger ones by merging their runs.
const INSERTION_SORT_MAX: usize = 20;

/// Sorts a loaded bucket `v` into `run`'s order: increasing `(time, seq)`.
/// `buf` and `ends` are scratch space (`v` and `buf` may swap allocations).
///
/// A bucket of a symmetric workload holds bursts of events at one picosecond (up to a few
/// thousand) pushed as a few dozen ascending runs: the events one handler scheduled come in
/// key order, and handlers run in key order. The runs are found in one pass and merged
/// pairwise, about `n log2(runs)` comparisons, where a general sort does `n log2(n)` (runs of a
/// dozen events are too short for the standard library's sorts to keep). Keys are unique, so
/// any correct sort gives the one order.
fn sort_bucket<P: Copy>(v: &mut Vec<Entry<P>>, buf: &mut Vec<Entry<P>>, ends: &mut Vec<usize>) {
    let n = v.len();
    if n <= INSERTION_SORT_MAX {
        // (by key: `Entry`'s own order is reversed, for the heaps)
        v.sort_by_key(Entry::key);
        return;
    }
    ends.clear();
    for i in 1..n {
        if v[i].key() < v[i - 1].key() {
            ends.push(i);
        }
    }
    ends.push(n);
    buf.clear();
    buf.extend_from_slice(v);
    // Whether the latest pass wrote into `buf`.
    let mut in_buf = false;
    while ends.len() > 1 {
        let (src, dst) = if in_buf {
            (&buf[..], &mut v[..])
        } else {
            (&v[..], &mut buf[..])
        };
        let (mut start, mut kept, mut i) = (0, 0, 0);
        while i < ends.len() {
            let mid = ends[i];
            let end = ends.get(i + 1).copied().unwrap_or(mid);
            merge(&src[start..mid], &src[mid..end], &mut dst[start..end]);
            ends[kept] = end;
            kept += 1;
            start = end;
            i += 2;
        }
        ends.truncate(kept);
        in_buf = !in_buf;
    }
    if in_buf {
        std::mem::swap(v, buf);
    }
}

/// Merges the ascending runs `a` and `b` into `out` (`a.len() + b.len()` long), ascending.
#[inline]
fn merge<P: Copy>(a: &[Entry<P>], b: &[Entry<P>], out: &mut [Entry<P>]) {
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        if b[j].key() < a[i].key() {
            out[k] = b[j];
            j += 1;
        } else {
            out[k] = a[i];
            i += 1;
        }
        k += 1;
    }
    let rest_a = a.len() - i;
    out[k..k + rest_a].copy_from_slice(&a[i..]);
    out[k + rest_a..].copy_from_slice(&b[j..]);
}

/// Tick width (log2 ps) and ring size (buckets) for the pending events `all` (earliest at
/// `min_t`), when about `POPS_PER_TICK` events were popped per `pop_width_ps` of late.
///
/// The ring has a bucket per `TARGET_PER_BUCKET` pending events, its ticks wide enough that it
/// reaches the `HORIZON_COVER_PERMILLE` quantile of the pending times (few events travel
/// through the overflow heap). When the pops say that is too wide, the ticks narrow to the pop
/// width and the ring grows to keep its reach, by at most `MAX_RING_GROWTH` times.
/// Deterministic: a strided sample, no randomness.
fn choose_layout<P>(all: &[Entry<P>], min_t: u64, pop_width_ps: Option<u64>) -> (u32, usize) {
    let n = all.len();
    let nb = (n / TARGET_PER_BUCKET)
        .clamp(MIN_BUCKETS, MAX_BUCKETS)
        .next_power_of_two();
    if n < 2 {
        return (10, nb);
    }
    let k = n.min(1024);
    let stride = n / k;
    let mut sample: Vec<u64> = (0..k).map(|i| all[i * stride].time - min_t).collect();
    sample.sort_unstable();
    let reach = sample[(k * HORIZON_COVER_PERMILLE / 1000).min(k - 1)];
    let width = reach.div_ceil(nb as u64).max(1);
    match pop_width_ps {
        Some(w) if w < width => {
            // (rounded down: at most POPS_PER_TICK popped per tick)
            let shift = w.max(1).ilog2();
            let ticks = (reach >> shift).saturating_add(1);
            let most = (nb * MAX_RING_GROWTH).min(MAX_BUCKETS);
            let grown = usize::try_from(ticks).unwrap_or(most).min(most);
            (shift, grown.next_power_of_two().max(nb))
        }
        _ => (ceil_log2(width), nb),
    }
}

/// The smallest `s` (at most 63) with `2^s >= w`.
fn ceil_log2(w: u64) -> u32 {
    if w <= 1 {
        0
    } else {
        (64 - (w - 1).leading_zeros()).min(63)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;

    fn drain<P: Copy>(q: &mut EventQueue<P>) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| q.pop())
            .map(|e| (e.time.as_ps(), e.seq))
            .collect()
    }

    /// Event capacity held by the ring's buckets.
    fn ring_capacity<P: Copy>(q: &EventQueue<P>) -> usize {
        q.buckets.iter().map(Vec::capacity).sum()
    }

    #[test]
    fn emptied_buckets_do_not_keep_their_high_water_capacity() {
        let mut q = EventQueue::<u32>::new();
        // Bursts of 3000 events in one tick each, 64 ticks apart: each burst's bucket, once
        // loaded, passes its allocation around; the ring must not keep them all.
        for burst in 0..40u64 {
            for i in 0..3000u32 {
                q.push(Time::from_ps((burst * 64) << 10), i);
            }
            for _ in 0..3000 {
                assert!(q.pop().is_some());
            }
        }
        assert!(q.is_empty());
        let cap = ring_capacity(&q);
        assert!(
            cap <= q.buckets.len() * KEEP_CAPACITY,
            "{cap} events of idle capacity in {} buckets",
            q.buckets.len()
        );
        // The bursts' allocations wait in the big spares (the next burst's bucket moves into
        // one instead of doubling), a bounded few.
        assert!(!q.big_spares.is_empty());
        assert!(q.big_spares.len() <= MAX_BIG_SPARES);
        assert!(q
            .big_spares
            .iter()
            .all(|v| v.is_empty() && v.capacity() <= BIG_CAPACITY));
        assert!(q.spares.iter().all(|v| v.capacity() <= KEEP_CAPACITY));
        // And the order is untouched: a mixed population still leaves sorted.
        for i in 0..5000u64 {
            q.push(Time::from_ps((i * 7919) % 100_000), 0);
        }
        let got = drain(&mut q);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert!(ring_capacity(&q) <= q.buckets.len() * KEEP_CAPACITY);
    }

    #[test]
    fn fifo_for_equal_times() {
        let mut q = EventQueue::new();
        for i in 0..10u32 {
            q.push(Time::from_ns(7), i);
        }
        q.push(Time::from_ns(3), 99);
        let got: Vec<u32> = std::iter::from_fn(|| q.pop()).map(|e| e.payload).collect();
        assert_eq!(got, [99, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn far_future_and_never() {
        let mut q = EventQueue::with_layout(0, 64);
        q.push(Time::MAX, 3u8);
        q.push(Time::from_secs(100), 2);
        q.push(Time::from_ps(5), 1);
        q.push(Time::MAX, 4);
        assert_eq!(q.peek_time(), Some(Time::from_ps(5)));
        let got: Vec<u8> = std::iter::from_fn(|| q.pop()).map(|e| e.payload).collect();
        assert_eq!(got, [1, 2, 3, 4]);
    }

    #[test]
    fn peek_front_names_the_next_pop_when_it_knows_it() {
        let mut q = EventQueue::with_layout(0, 64);
        assert_eq!(q.peek_front(), None);
        // Times spread over many buckets and the overflow, pushed out of order.
        let mut x = 12345u64;
        for i in 0..5000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            q.push(Time::from_ps(x >> 44), i);
        }
        let (mut known, mut n) = (0, 0);
        let mut second: Option<u32> = None;
        while !q.is_empty() {
            let hint = q.peek_front().copied();
            if let Some(h) = hint {
                // The second of the last look, when nothing came in front since, is this front.
                if let Some(s) = second {
                    assert_eq!(s, h, "peek_second named the event after the next");
                }
            }
            second = q.peek_second().copied();
            let e = q.pop().unwrap();
            if let Some(h) = hint {
                assert_eq!(h, e.payload);
                known += 1;
            }
            n += 1;
        }
        assert_eq!(n, 5000);
        // Mostly known: only the first pop of each bucket needs a refill.
        assert!(known > 4000, "{known}");
    }

    #[test]
    fn a_bunched_present_gets_narrow_ticks() {
        // A simulation's shape: 20,000 events pending, most within 2 ns of the present
        // (packets in flight), one in 20 a millisecond ahead (timers). Sized by the pending
        // population alone, the ring's ticks would hold hundreds of the present's events each.
        let mut q = EventQueue::new();
        let mut h = BinaryHeap::new();
        let mut x: u64 = 99;
        let mut delay = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (x >> 60) == 0 {
                1_000_000_000 + (x >> 40) % 1_000_000
            } else {
                (x >> 33) % 2_000
            }
        };
        for _ in 0..20_000 {
            let t = delay();
            let s = q.push(Time::from_ps(t), ());
            h.push(Reverse((t, s)));
        }
        let mut loads_before = 0;
        for i in 0..400_000 {
            if i == 200_000 {
                loads_before = q.stats().bucket_loads;
            }
            let e = q.pop().unwrap();
            assert_eq!(h.pop(), Some(Reverse((e.time.as_ps(), e.seq))));
            let t = e.time.as_ps() + delay();
            let s = q.push(Time::from_ps(t), ());
            h.push(Reverse((t, s)));
        }
        let per_load = 200_000 / (q.stats().bucket_loads - loads_before);
        assert!(
            per_load <= 4 * POPS_PER_TICK as u64,
            "{per_load} events per bucket load"
        );
    }

    #[test]
    fn pop_at_or_before_respects_limit() {
        let mut q = EventQueue::new();
        q.push(Time::from_ns(10), ());
        q.push(Time::from_ns(20), ());
        assert!(q.pop_at_or_before(Time::from_ns(9)).is_none());
        assert_eq!(
            q.pop_at_or_before(Time::from_ns(10)).map(|e| e.time),
            Some(Time::from_ns(10))
        );
        assert!(q.pop_at_or_before(Time::from_ns(19)).is_none());
        assert_eq!(q.len(), 1);
        assert_eq!(q.peek_time(), Some(Time::from_ns(20)));
    }

    #[test]
    fn hold_model_matches_heap_and_rebuilds() {
        // Grow to 8k pending, then hold; with a simple LCG for increments.
        let mut q = EventQueue::new();
        let mut h = BinaryHeap::new();
        let mut x: u64 = 12345;
        let mut now = 0u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % 50_000
        };
        for _ in 0..8_000 {
            let t = now + next();
            let s = q.push(Time::from_ps(t), ());
            h.push(Reverse((t, s)));
        }
        for i in 0..40_000 {
            let a = q.pop().map(|e| (e.time.as_ps(), e.seq));
            let b = h.pop().map(|Reverse(k)| k);
            assert_eq!(a, b, "pop {i}");
            now = a.unwrap().0;
            let t = now + next() * if i % 97 == 0 { 1000 } else { 1 };
            let s = q.push(Time::from_ps(t), ());
            h.push(Reverse((t, s)));
        }
        assert!(q.stats().rebuilds > 0);
        let rest = drain(&mut q);
        let want: Vec<_> = std::iter::from_fn(|| h.pop()).map(|Reverse(k)| k).collect();
        assert_eq!(rest, want);
    }

    #[test]
    fn retunes_across_scale_changes_and_keeps_order() {
        // Phases whose gaps differ by up to 10^7, and a population that grows then shrinks: the
        // layout is re-chosen several times; the order must match the heap throughout.
        let mut q = EventQueue::new();
        let mut h = BinaryHeap::new();
        let mut x: u64 = 99;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut now = 0u64;
        for (scale, target_len, steps) in [
            (1u64, 4_000usize, 12_000),
            (10_000_000, 4_000, 12_000),
            (100, 12_000, 12_000),
            (1_000_000, 300, 12_000),
        ] {
            for _ in 0..steps {
                if q.len() < target_len || rnd(2) == 0 {
                    let t = now + rnd(scale) * rnd(4);
                    let s = q.push(Time::from_ps(t), ());
                    h.push(Reverse((t, s)));
                }
                if q.len() > target_len || rnd(2) == 0 {
                    let a = q.pop().map(|e| (e.time.as_ps(), e.seq));
                    assert_eq!(a, h.pop().map(|Reverse(k)| k));
                    now = a.map_or(now, |k| k.0);
                }
            }
        }
        assert!(q.stats().rebuilds >= 4, "{:?}", q.stats());
        let want: Vec<_> = std::iter::from_fn(|| h.pop()).map(|Reverse(k)| k).collect();
        assert_eq!(drain(&mut q), want);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Push at `now + delta` (delta drawn from a mix of scales).
        Push(u64),
        /// Push at an absolute time (may be in the past).
        PushAbs(u64),
        Pop,
        PopUntil(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..4).prop_map(Op::Push),
            3 => (0u64..5_000).prop_map(Op::Push),
            2 => (0u64..10_000_000).prop_map(Op::Push),
            1 => prop_oneof![Just(u64::MAX), 0u64..u64::MAX].prop_map(Op::PushAbs),
            4 => Just(Op::Pop),
            1 => (0u64..20_000).prop_map(Op::PopUntil),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// `sort_bucket` orders like a sort of the keys, for buckets of any length made of
        /// ascending runs of any length (unique keys: a time and a distinct seq each).
        #[test]
        fn sort_bucket_orders_by_increasing_key(
            runs in proptest::collection::vec(
                proptest::collection::vec((0u64..4, 0u64..1_000), 0..40),
                0..60,
            ),
        ) {
            let mut v: Vec<Entry<u32>> = Vec::new();
            for run in &runs {
                let mut r: Vec<(u64, u64)> = run.clone();
                r.sort_unstable();
                for (time, s) in r {
                    let seq = (s << 16) | v.len() as u64;
                    v.push(Entry { time, seq, payload: v.len() as u32 });
                }
            }
            let mut want: Vec<(u64, u64, u32)> =
                v.iter().map(|e| (e.time, e.seq, e.payload)).collect();
            want.sort_unstable();
            let (mut buf, mut ends) = (Vec::new(), Vec::new());
            sort_bucket(&mut v, &mut buf, &mut ends);
            let got: Vec<(u64, u64, u32)> = v.iter().map(|e| (e.time, e.seq, e.payload)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn same_order_as_binary_heap(
            shift in 0u32..20,
            nb in 64usize..300,
            ops in proptest::collection::vec(op(), 0..2000),
        ) {
            let mut q = EventQueue::with_layout(shift, nb);
            let mut h: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
            let mut now = 0u64;
            for op in ops {
                match op {
                    Op::Push(d) | Op::PushAbs(d) => {
                        let t = if let Op::Push(_) = op { now.saturating_add(d) } else { d };
                        let s = q.push(Time::from_ps(t), t ^ 0x55);
                        h.push(Reverse((t, s)));
                    }
                    Op::Pop => {
                        let a = q.pop();
                        let b = h.pop().map(|Reverse(k)| k);
                        prop_assert_eq!(a.map(|e| (e.time.as_ps(), e.seq)), b);
                        if let Some(e) = a {
                            prop_assert_eq!(e.payload, e.time.as_ps() ^ 0x55);
                            now = now.max(e.time.as_ps());
                        }
                    }
                    Op::PopUntil(d) => {
                        let limit = now.saturating_add(d);
                        loop {
                            let a = q.pop_at_or_before(Time::from_ps(limit));
                            let b = match h.peek() {
                                Some(Reverse(k)) if k.0 <= limit => h.pop().map(|Reverse(k)| k),
                                _ => None,
                            };
                            prop_assert_eq!(a.map(|e| (e.time.as_ps(), e.seq)), b);
                            match a {
                                Some(e) => now = now.max(e.time.as_ps()),
                                None => break,
                            }
                        }
                    }
                }
                prop_assert_eq!(q.len(), h.len());
                prop_assert_eq!(q.peek_time().map(|t| t.as_ps()), h.peek().map(|Reverse(k)| k.0));
            }
            let want: Vec<_> = std::iter::from_fn(|| h.pop()).map(|Reverse(k)| k).collect();
            prop_assert_eq!(drain(&mut q), want);
        }
    }
}
