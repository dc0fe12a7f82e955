//! The event loop.
//!
//! A [`Simulator`] owns the [`EventQueue`], the current time and one [`Handler`]: the owner's
//! dispatcher (typically a `match` on [`Event::target`] into its component tables). Dispatch is
//! monomorphic (`Simulator<H>` is generic, no `dyn`), and an event is four words, copied.
//!
//! The handler gets `now` and a [`Scheduler`] through which it adds future events. An event
//! earlier than `now` is refused with [`ScheduleError::InPast`] and counted in
//! [`SimStats::rejected_past`]; it never silently runs out of order.
//!
//! # Order of events at the same time: the event key
//! Events leave in `(time, key)` order. The key names who scheduled the event: the
//! *source* ([`Handler::source`]) of the event being handled when it was scheduled, and that
//! source's own counter: `key = source << 40 | counter` ([`event_key`]). Events scheduled from
//! outside the loop ([`Simulator::schedule`]) come from source 0. A handler that does not
//! override [`Handler::source`] puts everything on source 0, whose counter is then a global
//! insertion counter: equal times are first in, first out.
//!
//! A model whose state is split into sources (the run: every host and every switch; see
//! [`crate::run`]) gets an order that does not depend on which other sources share its event
//! queue: a source's counter moves only when the source's own events are handled, so each event
//! has the same key whether the model runs in one queue or is partitioned over several
//! ([`crate::run::parallel`]), and the partitions' merged order is the sequential order.
//!
//! ```
//! use mrc_sim::core::{ComponentId, Duration, Event, Scheduler, Simulator, Time};
//! // A ping-pong between two components, 10 ns apart, 5 round trips.
//! let mut sim = Simulator::new(|now: Time, ev: Event, s: &mut Scheduler<'_>| {
//!     if ev.data < 10 {
//!         let peer = ComponentId(1 - ev.target.0);
//!         s.after(Duration::from_ns(10), peer, 0, ev.data + 1).unwrap();
//!     }
//! });
//! sim.schedule(Time::ZERO, ComponentId(0), 0, 0).unwrap();
//! sim.run_until_idle();
//! assert_eq!(sim.now(), Time::from_ns(100));
//! assert_eq!(sim.stats().events, 11);
//! ```

use super::queue::{EventQueue, QueueStats};
use super::time::{Duration, Time};

/// Index of a component in the owner's tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComponentId(pub u32);

/// What the queue stores for an event (16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    /// Who handles it.
    pub target: ComponentId,
    /// What it is, in the target's own numbering.
    pub kind: u32,
    /// Argument (an index into the target's state, a packet handle, a generation count...).
    pub data: u64,
}

/// Bits of an event key that hold the source's counter ([`event_key`]).
pub const KEY_COUNTER_BITS: u32 = 40;
/// Sources a simulator distinguishes (`0..MAX_SOURCES`); a larger [`Handler::source`] shares the
/// last one's counter (keys stay unique, the order stops being partition-independent for them).
pub const MAX_SOURCES: u32 = 1 << (64 - KEY_COUNTER_BITS);

/// The key of the `counter`-th event scheduled by `source` (`source < MAX_SOURCES`, `counter <
/// 2^40`): the tie-break of events at the same time.
#[inline]
pub const fn event_key(source: u32, counter: u64) -> u64 {
    ((source as u64) << KEY_COUNTER_BITS) | counter
}

/// An event handed to the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// When it fires (equals `now` when handled).
    pub time: Time,
    /// Its key (tie-break for equal times, [`event_key`]): unique among the run's events.
    pub seq: u64,
    /// Who handles it.
    pub target: ComponentId,
    /// What it is.
    pub kind: u32,
    /// Argument.
    pub data: u64,
}

/// Why an event could not be scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleError {
    /// The requested time is before the current time.
    InPast {
        /// The current time.
        now: Time,
        /// The requested time.
        at: Time,
    },
    /// `now + delay` does not fit in a [`Time`].
    Overflow {
        /// The current time.
        now: Time,
        /// The requested delay.
        delay: Duration,
    },
}

impl core::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ScheduleError::InPast { now, at } => {
                write!(f, "event scheduled at {at}, before now ({now})")
            }
            ScheduleError::Overflow { now, delay } => {
                write!(f, "event scheduled {delay} after {now} overflows time")
            }
        }
    }
}

impl std::error::Error for ScheduleError {}

/// Counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Events handled.
    pub events: u64,
    /// Events scheduled (handler and owner).
    pub scheduled: u64,
    /// Scheduling requests refused (past or overflowing times).
    pub rejected_past: u64,
    /// Largest number of pending events.
    pub max_pending: usize,
    /// Hash of every handled event `(time, seq, target, kind, data)` in order (0 when tracing is
    /// off). Two runs with equal hashes handled the same events in the same order.
    pub trace_hash: u64,
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// No event is pending.
    Idle,
    /// The next event is after the time limit.
    TimeLimit,
    /// The event budget ran out (events may remain at or before the limit).
    EventLimit,
}

/// The handler's door to the queue: adds future events.
pub struct Scheduler<'a> {
    queue: &'a mut EventQueue<Msg>,
    now: Time,
    stats: &'a mut SimStats,
    /// `event_key(source, 0)` of the event being handled.
    source_key: u64,
    /// That source's counter.
    counter: &'a mut u64,
}

impl Scheduler<'_> {
    /// The current time.
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedules an event at `at` (`>= now`; equal to `now` runs after everything already
    /// pending at `now`). Returns its sequence number.
    ///
    /// # Errors
    /// [`ScheduleError::InPast`] if `at < now` (counted in [`SimStats::rejected_past`]).
    #[inline]
    pub fn at(
        &mut self,
        at: Time,
        target: ComponentId,
        kind: u32,
        data: u64,
    ) -> Result<u64, ScheduleError> {
        if at < self.now {
            self.stats.rejected_past += 1;
            return Err(ScheduleError::InPast { now: self.now, at });
        }
        let key = self.next_key();
        self.stats.scheduled += 1;
        self.queue
            .push_with_seq(at, key, Msg { target, kind, data });
        Ok(key)
    }

    /// Takes the key the next event scheduled now would get, for an event that is handed to
    /// another event queue instead of this one (a partition boundary,
    /// [`Simulator::schedule_keyed`]). Counts as scheduled.
    #[inline]
    pub fn reserve_key(&mut self) -> u64 {
        self.stats.scheduled += 1;
        self.next_key()
    }

    #[inline]
    fn next_key(&mut self) -> u64 {
        let key = self.source_key | *self.counter;
        *self.counter += 1;
        key
    }

    /// Schedules an event `delay` from now.
    ///
    /// # Errors
    /// [`ScheduleError::Overflow`] if `now + delay` overflows (counted).
    #[inline]
    pub fn after(
        &mut self,
        delay: Duration,
        target: ComponentId,
        kind: u32,
        data: u64,
    ) -> Result<u64, ScheduleError> {
        match self.now.checked_add(delay) {
            Some(at) => self.at(at, target, kind, data),
            None => {
                self.stats.rejected_past += 1;
                Err(ScheduleError::Overflow {
                    now: self.now,
                    delay,
                })
            }
        }
    }

    /// Pending events (not counting the one being handled).
    #[inline]
    pub fn pending(&self) -> usize {
        self.queue.len()
    }
}

/// The owner's event dispatcher.
pub trait Handler {
    /// Handles one event at `now` (== `ev.time`); may schedule more through `sched`.
    fn handle(&mut self, now: Time, ev: Event, sched: &mut Scheduler<'_>);

    /// The source the event `msg` is handled by: the events its handler schedules get keys
    /// from this source's counter (module docs). Must depend on `msg` and on state the model
    /// never changes. Default: 0 for every event (first in, first out at equal times).
    #[inline]
    fn source(&self, msg: &Msg) -> u32 {
        let _ = msg;
        0
    }

    /// A hint, given just before an event is handled: `next` is probably the event after it
    /// (not always: the current event may schedule earlier work). The handler may read the
    /// state `next` will need so that those cache misses overlap with the current event's. It
    /// cannot change anything (`&self`) and must not matter to results. Default: nothing.
    #[inline]
    fn prefetch(&self, next: &Msg) {
        let _ = next;
    }

    /// A hint like [`Handler::prefetch`], one event further ahead: `later` is probably the
    /// event after `next`. The handler may start loading what `later` reaches directly (the
    /// state its `data` names), so that by the time `later` is `next`, [`Handler::prefetch`]
    /// can follow pointers out of that state without waiting. Same rules: `&self`, no effect
    /// on results. Default: nothing.
    #[inline]
    fn prefetch_later(&self, later: &Msg) {
        let _ = later;
    }

    /// [`Handler::prefetch`] for a `next` that was the `later` of the previous event's
    /// [`Handler::prefetch_later`]: what that loaded need not be asked for again. Default:
    /// [`Handler::prefetch`].
    #[inline]
    fn prefetch_warmed(&self, next: &Msg) {
        self.prefetch(next);
    }
}

impl<F: FnMut(Time, Event, &mut Scheduler<'_>)> Handler for F {
    #[inline]
    fn handle(&mut self, now: Time, ev: Event, sched: &mut Scheduler<'_>) {
        self(now, ev, sched)
    }
}

/// The discrete-event loop.
pub struct Simulator<H> {
    queue: EventQueue<Msg>,
    now: Time,
    handler: H,
    stats: SimStats,
    trace: bool,
    /// Per source: events it scheduled so far (the low bits of their keys).
    counters: Vec<u64>,
}

impl<H: Handler> Simulator<H> {
    /// A simulator at time zero with no events, tracing on.
    pub fn new(handler: H) -> Self {
        Simulator {
            queue: EventQueue::new(),
            now: Time::ZERO,
            handler,
            stats: SimStats::default(),
            trace: true,
            counters: vec![0],
        }
    }

    /// A simulator at `now` with no events around `handler`, whose counters start at `stats`
    /// (for an owner that ran the model elsewhere, e.g. partitioned, and reports on it here).
    pub fn from_parts(handler: H, now: Time, stats: SimStats) -> Self {
        let mut s = Simulator::new(handler);
        s.now = now;
        s.stats = stats;
        s
    }

    /// The counters of every source seen so far (index = source): where each source's keys
    /// stand. An owner that splits a model over several simulators gives each a copy
    /// ([`Simulator::set_source_counters`]) so that keys continue where they were.
    pub fn source_counters(&self) -> &[u64] {
        &self.counters
    }

    /// Replaces the per-source counters (see [`Simulator::source_counters`]).
    pub fn set_source_counters(&mut self, counters: Vec<u64>) {
        self.counters = counters;
        if self.counters.is_empty() {
            self.counters.push(0);
        }
    }

    /// Turns the trace hash on or off (on by default; off saves a few ns per event).
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on;
    }

    /// The current time: the time of the event being (or last) handled, or the limit of the
    /// last `run_until`.
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }

    /// The handler (the owner's component tables).
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The handler, mutably (e.g. to change configuration between runs).
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// Gives the handler back.
    pub fn into_handler(self) -> H {
        self.handler
    }

    /// Run counters.
    pub fn stats(&self) -> SimStats {
        let mut s = self.stats;
        s.max_pending = self.queue.stats().max_len;
        s
    }

    /// The queue's own work counters.
    pub fn queue_stats(&self) -> QueueStats {
        self.queue.stats()
    }

    /// Pending events.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Time of the next pending event.
    pub fn next_event_time(&self) -> Option<Time> {
        self.queue.peek_time()
    }

    /// Schedules an event from outside the loop (initial events, test stimulus).
    ///
    /// # Errors
    /// [`ScheduleError::InPast`] if `at < now`.
    pub fn schedule(
        &mut self,
        at: Time,
        target: ComponentId,
        kind: u32,
        data: u64,
    ) -> Result<u64, ScheduleError> {
        self.scheduler().at(at, target, kind, data)
    }

    /// Adds an event whose key was reserved elsewhere ([`Scheduler::reserve_key`]): an event
    /// that crossed from another partition. Not counted as scheduled here (its source counted
    /// it).
    ///
    /// # Errors
    /// [`ScheduleError::InPast`] if `at < now` (counted).
    pub fn schedule_keyed(&mut self, at: Time, key: u64, msg: Msg) -> Result<(), ScheduleError> {
        if at < self.now {
            self.stats.rejected_past += 1;
            return Err(ScheduleError::InPast { now: self.now, at });
        }
        self.queue.push_with_seq(at, key, msg);
        Ok(())
    }

    /// A scheduler at the current time, for the owner to seed events through the same API the
    /// handler uses (source 0).
    pub fn scheduler(&mut self) -> Scheduler<'_> {
        self.handler_and_scheduler().1
    }

    /// The handler and a scheduler at the current time (source 0) together, for an owner that
    /// gives the handler input from outside the event loop (a driver ringing a doorbell).
    pub fn handler_and_scheduler(&mut self) -> (&mut H, Scheduler<'_>) {
        (
            &mut self.handler,
            Scheduler {
                queue: &mut self.queue,
                now: self.now,
                stats: &mut self.stats,
                source_key: 0,
                counter: &mut self.counters[0],
            },
        )
    }

    /// Handles events with `time <= limit`, at most `max_events` of them. `now` ends at the last
    /// handled event's time (it is not moved to `limit`).
    pub fn run(&mut self, limit: Time, max_events: u64) -> RunOutcome {
        let mut budget = max_events;
        // The event last handed to `prefetch_later`.
        let mut warmed: Option<Msg> = None;
        loop {
            if budget == 0 {
                return RunOutcome::EventLimit;
            }
            let Some(e) = self.queue.pop_at_or_before(limit) else {
                return if self.queue.is_empty() {
                    RunOutcome::Idle
                } else {
                    RunOutcome::TimeLimit
                };
            };
            budget -= 1;
            self.now = e.time;
            let ev = Event {
                time: e.time,
                seq: e.seq,
                target: e.payload.target,
                kind: e.payload.kind,
                data: e.payload.data,
            };
            self.stats.events += 1;
            if self.trace {
                self.stats.trace_hash = fold_event(self.stats.trace_hash, &ev);
            }
            if let Some(next) = self.queue.peek_front() {
                if warmed == Some(*next) {
                    self.handler.prefetch_warmed(next);
                } else {
                    self.handler.prefetch(next);
                }
            }
            warmed = self.queue.peek_second().copied();
            if let Some(later) = &warmed {
                self.handler.prefetch_later(later);
            }
            let src = self.handler.source(&e.payload).min(MAX_SOURCES - 1);
            if src as usize >= self.counters.len() {
                self.counters.resize(src as usize + 1, 0);
            }
            let mut sched = Scheduler {
                queue: &mut self.queue,
                now: e.time,
                stats: &mut self.stats,
                source_key: event_key(src, 0),
                counter: &mut self.counters[src as usize],
            };
            self.handler.handle(e.time, ev, &mut sched);
        }
    }

    /// Handles every event with `time <= limit`, then sets `now` to `limit` (if later).
    pub fn run_until(&mut self, limit: Time) -> RunOutcome {
        let out = self.run(limit, u64::MAX);
        if self.now < limit {
            self.now = limit;
        }
        out
    }

    /// Handles events until none is pending. A model that never goes idle makes this loop
    /// forever: use [`Simulator::run`] with an event budget when that is possible.
    pub fn run_until_idle(&mut self) -> RunOutcome {
        self.run(Time::MAX, u64::MAX)
    }
}

/// Folds one event into a running 64-bit trace hash (multiply-xorshift; platform independent).
#[inline]
pub fn fold_event(h: u64, ev: &Event) -> u64 {
    let mut h = h;
    for w in [
        ev.time.as_ps(),
        ev.seq,
        ((ev.target.0 as u64) << 32) | ev.kind as u64,
        ev.data,
    ] {
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::ClockDomain;
    use crate::core::rng::Rng;

    /// A random "network": each component, on an event, forwards 0-2 events (1.25 on average) to random
    /// components after random delays (some zero, some equal), until a budget is spent.
    struct Chaos {
        rngs: Vec<Rng>,
        budget: u64,
        log: Vec<(u64, u32, u64)>,
    }

    impl Handler for Chaos {
        fn handle(&mut self, now: Time, ev: Event, s: &mut Scheduler<'_>) {
            assert_eq!(now, ev.time);
            self.log.push((now.as_ps(), ev.target.0, ev.data));
            let n = self.rngs.len() as u64;
            let rng = &mut self.rngs[ev.target.0 as usize];
            let fanout = [0, 1, 2, 2][rng.below(4) as usize];
            for i in 0..fanout {
                if self.budget == 0 {
                    return;
                }
                self.budget -= 1;
                let delay = match rng.below(4) {
                    0 => 0,
                    1 => 1_000,
                    2 => rng.below(5_000),
                    _ => rng.below(10_000_000),
                };
                let to = ComponentId(rng.below(n) as u32);
                s.after(
                    Duration::from_ps(delay),
                    to,
                    1,
                    ev.data.wrapping_mul(3).wrapping_add(i),
                )
                .unwrap();
            }
        }
    }

    fn chaos_run(seed: u64) -> (SimStats, Vec<(u64, u32, u64)>) {
        let root = Rng::new(seed);
        let rngs = (0..64).map(|i| root.fork(i)).collect();
        let mut sim = Simulator::new(Chaos {
            rngs,
            budget: 50_000,
            log: Vec::new(),
        });
        for i in 0..64u32 {
            sim.schedule(Time::ZERO, ComponentId(i), 0, i as u64)
                .unwrap();
        }
        assert_eq!(sim.run_until_idle(), RunOutcome::Idle);
        (sim.stats(), sim.into_handler().log)
    }

    #[test]
    fn same_seed_same_trace() {
        let (a, la) = chaos_run(1234);
        let (b, lb) = chaos_run(1234);
        assert!(a.events > 10_000, "{a:?}");
        assert_eq!(a, b);
        assert_eq!(la, lb);
        let (c, _) = chaos_run(1235);
        assert_ne!(a.trace_hash, c.trace_hash);
        // Handled in time order.
        assert!(la.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn past_events_are_refused_and_counted() {
        let mut sim = Simulator::new(|_now: Time, ev: Event, s: &mut Scheduler<'_>| {
            if ev.kind == 0 {
                let r = s.at(Time::from_ns(1), ev.target, 1, 0);
                assert_eq!(
                    r,
                    Err(ScheduleError::InPast {
                        now: Time::from_ns(5),
                        at: Time::from_ns(1)
                    })
                );
                let r = s.after(Duration::MAX, ev.target, 1, 0);
                assert!(matches!(r, Err(ScheduleError::Overflow { .. })));
            }
        });
        sim.schedule(Time::from_ns(5), ComponentId(0), 0, 0)
            .unwrap();
        sim.run_until_idle();
        assert_eq!(sim.stats().rejected_past, 2);
        assert_eq!(sim.stats().events, 1);
        assert!(sim
            .schedule(Time::from_ns(4), ComponentId(0), 0, 0)
            .is_err());
        assert_eq!(sim.stats().rejected_past, 3);
    }

    #[test]
    fn run_until_and_budget() {
        let mut seen = Vec::new();
        let mut sim = Simulator::new(|now: Time, ev: Event, _s: &mut Scheduler<'_>| {
            seen.push((now.as_ns(), ev.data));
        });
        for (t, d) in [(30, 0), (10, 1), (10, 2), (20, 3), (10, 4)] {
            sim.schedule(Time::from_ns(t), ComponentId(0), 0, d)
                .unwrap();
        }
        assert_eq!(sim.next_event_time(), Some(Time::from_ns(10)));
        assert_eq!(sim.run_until(Time::from_ns(15)), RunOutcome::TimeLimit);
        assert_eq!(sim.now(), Time::from_ns(15));
        assert_eq!(sim.run(Time::MAX, 1), RunOutcome::EventLimit);
        assert_eq!(sim.now(), Time::from_ns(20));
        assert_eq!(sim.pending(), 1);
        assert_eq!(sim.run_until(Time::from_ns(100)), RunOutcome::Idle);
        assert_eq!(sim.now(), Time::from_ns(100));
        let stats = sim.stats();
        assert_eq!(stats.events, 5);
        assert_eq!(stats.max_pending, 5);
        drop(sim);
        // Equal times are FIFO.
        assert_eq!(seen, [(10, 1), (10, 2), (10, 4), (20, 3), (30, 0)]);
    }

    /// Each component is its own source: the order of events at equal times follows who
    /// scheduled them (source, then that source's counter), not when they were pushed.
    #[test]
    fn sources_order_equal_times_by_source_then_counter() {
        struct BySource(Vec<(u32, u64)>);
        impl Handler for BySource {
            fn handle(&mut self, _now: Time, ev: Event, s: &mut Scheduler<'_>) {
                self.0.push((ev.target.0, ev.data));
                if ev.kind == 0 {
                    // Component 2 then component 1 schedule two events each at 10 ns.
                    for i in 0..2 {
                        s.at(Time::from_ns(10), ComponentId(3), 1, ev.data * 10 + i)
                            .unwrap();
                    }
                }
            }
            fn source(&self, m: &Msg) -> u32 {
                m.target.0
            }
        }
        let mut sim = Simulator::new(BySource(Vec::new()));
        sim.schedule(Time::from_ns(1), ComponentId(2), 0, 2)
            .unwrap();
        sim.schedule(Time::from_ns(2), ComponentId(1), 0, 1)
            .unwrap();
        sim.run_until_idle();
        let keys: Vec<u64> = sim.source_counters().to_vec();
        assert_eq!(keys, [2, 2, 2, 0]);
        let got = sim.into_handler().0;
        // Source 1's events first although source 2 scheduled earlier; each source FIFO.
        assert_eq!(got, [(2, 2), (1, 1), (3, 10), (3, 11), (3, 20), (3, 21)]);
        assert_eq!(event_key(1, 5), (1 << KEY_COUNTER_BITS) | 5);
    }

    #[test]
    fn clocked_component_skips_idle_cycles() {
        // A 322 MHz block that gets work at odd times: each job starts at the next edge and
        // takes 7 cycles; only one event per job is ever handled (no idle ticking).
        let clk = ClockDomain::from_hz(322_265_625).unwrap();
        let mut done = Vec::new();
        let mut sim = Simulator::new(|now: Time, ev: Event, s: &mut Scheduler<'_>| {
            if ev.kind == 0 {
                s.at(clk.done_at(now, 7), ev.target, 1, ev.data).unwrap();
            } else {
                done.push(now.as_ps());
            }
        });
        for (i, t) in [1_000u64, 50_000, 1_000_000].into_iter().enumerate() {
            sim.schedule(Time::from_ps(t), ComponentId(0), 0, i as u64)
                .unwrap();
        }
        sim.run_until_idle();
        assert_eq!(sim.stats().events, 6);
        drop(sim);
        for (d, t) in done.iter().zip([1_000u64, 50_000, 1_000_000]) {
            let start = clk.next_edge(Time::from_ps(t));
            assert_eq!(*d, clk.edge(clk.time_to_cycles_ceil(start) + 7).as_ps());
        }
    }
}
