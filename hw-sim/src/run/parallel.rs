//! The parallel run: the world cut into partitions that run on several threads, with conservative
//! synchronization, giving the sequential run's report bit for bit.
//!
//! # Partitions
//! With `K` partitions, partition `i` owns a contiguous range of hosts (their NICs and NIC
//! ports) and a contiguous range of planes (every switch of those planes, with all their ports).
//! So every interaction between two partitions crosses a link from a NIC port to a T0 switch or
//! back: a packet's arrival or a PFC frame, at least one propagation delay after the event that
//! sends it. That delay (the scenario's link latency, [`crate::fabric::FabricConfig::propagation`])
//! is the lookahead `L`.
//!
//! Each partition has its own event queue and its own copy of the fabric's tables (it drives
//! only its own ports, [`crate::fabric`]'s `PartMap`). The run proceeds in windows: with `G` the
//! earliest pending event of any partition, every partition handles its events up to
//! `min(G + L - 1 ps, next boundary)`, where the boundaries are the sequential run's own stops
//! (every 10 us to check whether the workload finished, the observer's sampling times, the time
//! limit). An event for another partition cannot fall inside the window that sends it; it
//! waits in a mailbox and joins its partition's queue, with the key it would have had
//! sequentially, before the next window.
//!
//! # Why the result is the sequential one
//! Events are ordered by `(time, key)`, and a key names the host or switch whose event scheduled
//! it and that source's own counter ([`crate::core::sim`]), so every event has the same key in
//! both runs. A partition handles its events in key order, every event it handles touches only
//! its own hosts and switches (the checks below refuse the scenarios where one would not), and
//! every event from another partition is in its queue before the window that needs it. So
//! each host and switch sees the same events in the same order as in the sequential run, and
//! the merged counters, flows and NICs give the same report. MRC headers travel with their
//! packets ([`super::World`]).
//!
//! # When a scenario runs sequentially instead
//! The layout refuses (and the run falls back to one thread, saying why) when the links have no
//! latency (no lookahead), for `roce-ecmp` (its NICs are not partitioned), with random loss or
//! corruption (a link's random stream is shared by its two ends), when a flow waits for a flow
//! of a host in another partition (a completion releases it at once, with no latency), when
//! the scheduled failure's link would cross partitions, or when there is only one plane or
//! host to split.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::nic::StagePacket;

use super::{build_world, Observer, RunError, RunReport, Scenario, TapRecord, World, WorldView};
use super::{FABRIC, NICS, ROOT_SOURCE};
use crate::core::sim::{event_key, Msg, SimStats, Simulator};
use crate::core::time::{Duration, Time};
use crate::fabric::topology::Dims;
use crate::fabric::{Crossing, Owner, PartMap, SwitchId};
use crate::nic::Transport;

/// How a run was carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One thread, one event queue; `reason` says why when more threads were asked for.
    Sequential {
        /// Why the run did not go parallel (None: one thread was asked for).
        reason: Option<String>,
    },
    /// Partitioned.
    Parallel {
        /// Partitions.
        partitions: usize,
        /// Threads they ran on.
        threads: usize,
        /// The lookahead (the links' latency).
        lookahead: Duration,
        /// Synchronization windows.
        windows: u64,
        /// Sum over the windows of the largest number of events one thread handled in it: with
        /// events of equal cost, the run takes at least this long in events, so `events /
        /// critical_events` bounds the speedup its load balance allows (machine-independent).
        critical_events: u64,
        /// Events handled.
        events: u64,
    },
}

impl core::fmt::Display for Mode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Mode::Sequential { reason: None } => write!(f, "sequential"),
            Mode::Sequential { reason: Some(r) } => write!(f, "sequential ({r})"),
            Mode::Parallel {
                partitions,
                threads,
                lookahead,
                windows,
                critical_events,
                events,
            } => write!(
                f,
                "parallel: {partitions} partitions on {threads} threads, lookahead {lookahead}, \
                 {windows} windows, load balance allows {:.2}x",
                *events as f64 / (*critical_events).max(1) as f64
            ),
        }
    }
}

/// Which partition owns what.
#[derive(Clone, Debug)]
pub struct Layout {
    parts: usize,
    /// Per host: its partition (non-decreasing in the host id).
    host_part: Vec<u16>,
    /// Per switch (global id): its partition.
    switch_part: Vec<u16>,
    lookahead: Duration,
}

impl Layout {
    /// The partition of host `h`.
    #[inline]
    fn host_part(&self, h: u32) -> usize {
        self.host_part.get(h as usize).copied().unwrap_or(0) as usize
    }
    /// The first host of partition `i` (the hosts of `i` are `host_lo(i)..host_lo(i + 1)`).
    fn host_lo(&self, i: usize) -> u32 {
        self.host_part.partition_point(|p| (*p as usize) < i) as u32
    }
    fn owner_part(&self, o: Owner) -> usize {
        match o {
            Owner::Host(h) => self.host_part(h),
            Owner::Switch(sw) => self.switch_part.get(sw as usize).copied().unwrap_or(0) as usize,
        }
    }
    /// The partition that handles event `m` (0 for one nobody owns: the fabric counts it bad).
    fn msg_part(&self, w: &World, m: &Msg) -> usize {
        match m.target {
            NICS => self.host_part(m.data as u32),
            FABRIC => w
                .fabric
                .event_owner(m.kind, m.data)
                .map_or(0, |o| self.owner_part(o)),
            _ => 0,
        }
    }
}

/// `i * parts / n` (the share of `0..n` that `i` falls in).
fn share(i: u32, n: u32, parts: usize) -> u16 {
    (u64::from(i) * parts as u64 / u64::from(n.max(1))) as u16
}

/// The partitions of `sc`'s world into (at most) `partitions`, or why it must run
/// sequentially. Several planes: host ranges and plane ranges. One plane: groups of hosts with
/// the switches that serve only them (a leaf, or a fat tree's pod with its aggregation
/// switches), and the top tier split by index.
fn layout(sc: &Scenario, w: &World, partitions: usize) -> Result<Layout, String> {
    let cfg = w.fabric.config();
    if sc.transport == Transport::RoceEcmp {
        return Err("roce-ecmp is not partitioned".into());
    }
    let lookahead = cfg.propagation;
    if lookahead == Duration::ZERO {
        return Err("the links have zero latency: no lookahead".into());
    }
    if cfg.loss_ppm != 0 || cfg.corrupt_ppm != 0 {
        return Err("random loss or corruption (one random stream per link, both ends)".into());
    }
    let topo = w.fabric.topology();
    let (hosts, planes) = (topo.hosts(), topo.planes());
    let spp = topo.switches_per_plane();
    let (parts, host_part, switch_part): (usize, Vec<u16>, Vec<u16>) = if planes >= 2 {
        let parts = partitions.min(planes as usize).min(hosts as usize);
        let hp = (0..hosts).map(|h| share(h, hosts, parts)).collect();
        let sp = (0..topo.switches())
            .map(|sw| share(sw / spp.max(1), planes, parts))
            .collect();
        (parts, hp, sp)
    } else {
        if sc.transport == Transport::Mrc1Ev && sc.failure.is_some() {
            return Err(
                "one plane with ECMP and a failure: the routing view spans partitions".into(),
            );
        }
        // Groups: (hosts per group, groups, top-tier switches).
        let (per_group, groups, tops, group_tiers) = match topo.dims {
            Dims::LeafSpine {
                hpl,
                leaves,
                spines,
            } => (hpl, leaves, spines, 1u8),
            Dims::FatTree { k, h } => (h * h, k, h * h, 2u8),
        };
        let parts = partitions.min(groups as usize).min(tops as usize);
        let hp = (0..hosts)
            .map(|h| share(h / per_group.max(1), groups, parts))
            .collect();
        let sp = (0..topo.switches())
            .map(|sw| {
                let info = topo.switch_info(SwitchId(sw));
                if info.tier < group_tiers {
                    // A leaf or edge switch (index = group * (switches per group) + x), or an
                    // aggregation switch, numbered the same way.
                    let per = match topo.dims {
                        Dims::LeafSpine { .. } => 1,
                        Dims::FatTree { h, .. } => h,
                    };
                    share(info.index / per.max(1), groups, parts)
                } else {
                    share(info.index, tops, parts)
                }
            })
            .collect();
        (parts, hp, sp)
    };
    if parts < 2 {
        return Err("one plane, group or host: nothing to partition".into());
    }
    let l = Layout {
        parts,
        host_part,
        switch_part,
        lookahead,
    };
    for f in &w.flows {
        if let Some(a) = f.after.and_then(|a| w.flows.get(a as usize)) {
            if l.host_part(a.src) != l.host_part(f.src) {
                return Err(
                    "a flow waits for a flow of a host in another partition (no latency)".into(),
                );
            }
        }
    }
    if let Some(f) = sc.failure {
        if let Some((a, b)) =
            super::t1_link(&w.fabric, f.t1_link).and_then(|link| w.fabric.link_ends(link))
        {
            let pa = w.fabric.port_owner(a.0).map(|o| l.owner_part(o));
            let pb = w.fabric.port_owner(b.0).map(|o| l.owner_part(o));
            if pa != pb {
                return Err("the failing link joins two partitions".into());
            }
        }
    }
    Ok(l)
}

/// Runs `sc` on up to `threads` threads over `partitions` partitions (0: as many as threads)
/// and reports, calling `obs` as [`super::run_observed`] does. The report (and everything `obs`
/// sees) is the sequential run's, bit for bit. A scenario the partitioning cannot take runs
/// sequentially; the returned [`Mode`] says which happened and why.
///
/// # Errors
/// [`RunError`] when the scenario is invalid.
pub fn run_observed_threads(
    sc: &Scenario,
    obs: &mut impl Observer,
    threads: usize,
    partitions: usize,
) -> Result<(RunReport, Mode), RunError> {
    run_tuned(sc, obs, threads, partitions, SOLO_EVENTS)
}

/// [`run_observed_threads`] with thread 0 running alone after windows of fewer than
/// `solo_events` events (0: never).
fn run_tuned(
    sc: &Scenario,
    obs: &mut impl Observer,
    threads: usize,
    partitions: usize,
    solo_events: u64,
) -> Result<(RunReport, Mode), RunError> {
    let threads = threads.max(1);
    let partitions = if partitions == 0 { threads } else { partitions };
    if sc.host.applies(sc.transport) == super::HostModel::Driver {
        let reason = (threads > 1 || partitions > 1)
            .then(|| "applications on the driver run on one thread".to_string());
        return Ok((super::run_observed(sc, obs)?, Mode::Sequential { reason }));
    }
    if threads == 1 && partitions <= 1 {
        return Ok((
            super::run_observed(sc, obs)?,
            Mode::Sequential { reason: None },
        ));
    }
    let (world, initial) = build_world(sc, threads)?;
    let l = match layout(sc, &world, partitions) {
        Ok(l) => l,
        Err(reason) => {
            let r = super::observe(sc, super::start(world, initial), obs);
            return Ok((
                r,
                Mode::Sequential {
                    reason: Some(reason),
                },
            ));
        }
    };
    let threads = threads.min(l.parts);
    let (report, windows, critical_events) =
        drive(sc, obs, world, initial, &l, threads, solo_events);
    let mode = Mode::Parallel {
        partitions: l.parts,
        threads,
        lookahead: l.lookahead,
        windows,
        critical_events,
        events: report.events,
    };
    Ok((report, mode))
}

/// Like [`run_observed_threads`] without an observer (the report of [`super::run`]).
///
/// # Errors
/// [`RunError`] when the scenario is invalid.
pub fn run_threads(
    sc: &Scenario,
    threads: usize,
    partitions: usize,
) -> Result<(RunReport, Mode), RunError> {
    run_observed_threads(sc, &mut Quiet, threads, partitions)
}

/// An observer that looks at nothing.
struct Quiet;

impl Observer for Quiet {
    fn sample_every(&self) -> Duration {
        Duration::MAX
    }
    fn on_sample(&mut self, _now: Time, _world: &WorldView<'_>) {}
    fn on_finish(&mut self, _now: Time, _world: &WorldView<'_>) {}
}

type Mail = Vec<(Crossing, Option<StagePacket>)>;

/// What the threads share.
struct Shared {
    parts: Vec<Mutex<Simulator<World>>>,
    /// `mail[src * K + dst]`: events from partition `src` for `dst`, sent in the last window.
    mail: Vec<Mutex<Mail>>,
    /// Per partition: its earliest pending event (ps; `u64::MAX` when none).
    next: Vec<AtomicU64>,
    /// Per partition: main flows finished.
    finished: Vec<AtomicU32>,
    /// Per thread: events its partitions handled in the last window.
    load: Vec<AtomicU64>,
    /// Where thread 0 left a stretch of windows it ran alone.
    solo: Mutex<Option<Progress>>,
    /// [`SOLO_EVENTS`] (or what the caller chose).
    solo_events: u64,
    barrier: SpinBarrier,
}

/// A barrier for the window loop: a thread spins briefly before it sleeps, so that the many
/// short windows of a run's idle stretches do not each pay a sleep and a wake-up, while a
/// thread that waits long (its partitions finished their window early) does not burn CPU.
struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
}

/// Spins before sleeping (a few microseconds).
const SPINS: u32 = 2000;

impl SpinBarrier {
    fn new(n: usize) -> SpinBarrier {
        SpinBarrier {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Waits until all `n` threads called `wait` (for this generation). Everything a thread
    /// wrote before `wait` is visible to every thread after it.
    fn wait(&self) {
        let gen = self.generation.load(Ordering::SeqCst);
        if self.arrived.fetch_add(1, Ordering::SeqCst) + 1 == self.n {
            self.arrived.store(0, Ordering::SeqCst);
            // Under the lock: a sleeper checks the generation under it, so none misses this.
            let _g = lock(&self.sleep);
            self.generation.fetch_add(1, Ordering::SeqCst);
            self.wake.notify_all();
            return;
        }
        for _ in 0..SPINS {
            if self.generation.load(Ordering::SeqCst) != gen {
                return;
            }
            std::hint::spin_loop();
        }
        let mut g = lock(&self.sleep);
        while self.generation.load(Ordering::SeqCst) == gen {
            g = self.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked poisons nothing we rely on: the run is lost anyway.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where the run stops next (the sequential run's boundaries).
#[derive(Clone, Copy)]
struct Clock {
    check: Duration,
    every: Duration,
    limit: Time,
    next_sample: Time,
    next_check: Time,
}

impl Clock {
    fn boundary(&self) -> Time {
        self.next_sample.min(self.next_check).min(self.limit)
    }
}

/// Splits the world, runs the windows on `threads` threads, merges the partitions and reports
/// (with the windows and the critical path in events, [`Mode::Parallel`]).
fn drive(
    sc: &Scenario,
    obs: &mut impl Observer,
    world: World,
    initial: Vec<(Time, Msg)>,
    l: &Layout,
    threads: usize,
    solo_events: u64,
) -> (RunReport, u64, u64) {
    let k = l.parts;
    let tap = obs.tap();
    // Route the initial events before the world is split.
    let routed: Vec<(usize, Time, u64, Msg)> = initial
        .iter()
        .enumerate()
        .map(|(i, (t, m))| {
            (
                l.msg_part(&world, m),
                *t,
                event_key(ROOT_SOURCE, i as u64),
                *m,
            )
        })
        .collect();
    let n_initial = initial.len() as u64;
    let worlds = split(world, l, tap);
    let mut sims: Vec<Simulator<World>> = worlds
        .into_iter()
        .map(|w| {
            let mut s = Simulator::new(w);
            s.set_trace(false);
            s.set_source_counters(vec![n_initial]);
            s
        })
        .collect();
    for (p, t, key, m) in routed {
        let _ = sims[p].schedule_keyed(t, key, m);
    }
    let sh = Shared {
        parts: sims.into_iter().map(Mutex::new).collect(),
        mail: (0..k * k).map(|_| Mutex::new(Vec::new())).collect(),
        next: (0..k).map(|_| AtomicU64::new(0)).collect(),
        finished: (0..k).map(|_| AtomicU32::new(0)).collect(),
        load: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        solo: Mutex::new(None),
        solo_events,
        barrier: SpinBarrier::new(threads),
    };
    let every = obs.sample_every().max(Duration::from_ps(1));
    let mk_clock = |every: Duration| Clock {
        check: Duration::from_us(10),
        every,
        limit: sc.time_limit,
        next_sample: Time::ZERO.saturating_add(every),
        next_check: Time::ZERO.saturating_add(Duration::from_us(10)),
    };
    let main_flows = lock(&sh.parts[0]).handler().main_flows;
    let p = std::thread::scope(|scope| {
        for t in 1..threads {
            let (sh, clock) = (&sh, mk_clock(every));
            scope.spawn(move || window_loop(t, threads, sh, l, clock, main_flows, None));
        }
        window_loop(0, threads, &sh, l, mk_clock(every), main_flows, Some(obs))
    });
    // Merge: partition 0 takes in the others' NICs, counters and totals.
    let mut stats = SimStats::default();
    let mut merged: Option<World> = None;
    for m in sh.parts {
        let sim = m.into_inner().unwrap_or_else(PoisonError::into_inner);
        let s = sim.stats();
        stats.events += s.events;
        stats.scheduled += s.scheduled;
        stats.rejected_past += s.rejected_past;
        stats.max_pending = stats.max_pending.max(s.max_pending);
        let mut w = sim.into_handler();
        match &mut merged {
            None => {
                w.nic_base = 0;
                merged = Some(w);
            }
            Some(base) => {
                base.fabric.absorb(&w.fabric);
                base.nics.append(&mut w.nics);
                base.bad_events += w.bad_events;
                base.main_finished += w.main_finished;
            }
        }
    }
    let Some(merged) = merged else {
        unreachable!("a layout has at least two partitions")
    };
    let sim = Simulator::from_parts(merged, p.now, stats);
    if p.now > p.last_sample {
        obs.on_finish(p.now, &WorldView::new(&[sim.handler()]));
    }
    (RunReport::collect(sc, &sim), p.windows, p.critical)
}

/// Cuts the world into the layout's partitions (NICs by host range, a fabric copy each).
fn split(mut world: World, l: &Layout, tap: super::Tap) -> Vec<World> {
    let k = l.parts;
    let mut out = Vec::with_capacity(k);
    let topo_ports = world.fabric.topology().ports();
    let owner: Vec<u16> = (0..topo_ports)
        .map(|p| {
            world
                .fabric
                .port_owner(p)
                .map_or(0, |o| l.owner_part(o) as u16)
        })
        .collect();
    world.tap = tap;
    // Highest partition first, so that the NICs split off the end.
    for i in (1..k).rev() {
        let lo = l.host_lo(i);
        let nics = world.nics.split_off((lo as usize).min(world.nics.len()));
        let mut fabric = world.fabric.clone();
        fabric.set_partition(PartMap::new(i as u16, owner.clone()));
        out.push(World {
            fabric,
            nics,
            roce: Vec::new(),
            bad_events: 0,
            flows: world.flows.clone(),
            app_results: Vec::new(),
            due: Vec::new(),
            due_flag: Vec::new(),
            main_flows: world.main_flows,
            main_finished: 0,
            local: world.local.clone(),
            dep_start: world.dep_start.clone(),
            dep_list: world.dep_list.clone(),
            drain: Vec::new(),
            done: Vec::new(),
            nic_base: lo,
            all_hosts: world.all_hosts,
            hdrs: Vec::new(),
            tap,
            tapped: Vec::new(),
            cur_key: 0,
            outbox: Vec::new(),
        });
    }
    world.fabric.set_partition(PartMap::new(0, owner));
    world.nic_base = 0;
    out.push(world);
    out.reverse();
    out
}

/// A window in which all partitions together handle fewer events than this is cheaper on one
/// thread than two barriers: after such a window, thread 0 runs the windows alone (the others
/// sleep) until one is busy again.
const SOLO_EVENTS: u64 = 1024;

/// Where a thread's window loop stands.
#[derive(Clone, Copy)]
struct Progress {
    now: Time,
    last_sample: Time,
    windows: u64,
    critical: u64,
    clock: Clock,
    stop: bool,
}

/// Takes in the events other partitions sent to `parts` and publishes their next event times.
fn import_phase(sh: &Shared, k: usize, parts: &[usize]) {
    for &i in parts {
        let mut sim = lock(&sh.parts[i]);
        import_mail(sh, k, i, &mut sim);
        let next = sim.next_event_time().map_or(u64::MAX, Time::as_ps);
        sh.next[i].store(next, Ordering::Relaxed);
    }
}

/// The end of the next window: one lookahead after the earliest pending event (exclusive), at
/// most the next boundary.
fn window_end(sh: &Shared, l: &Layout, clock: &Clock) -> Time {
    let g = sh
        .next
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .min()
        .unwrap_or(u64::MAX);
    Time::from_ps(
        g.saturating_add(l.lookahead.as_ps())
            .saturating_sub(1)
            .min(clock.boundary().as_ps()),
    )
}

/// Runs `parts` up to `end`, posts what they sent to other partitions and their finished flows;
/// returns the events they handled.
fn run_phase(sh: &Shared, k: usize, parts: &[usize], end: Time, outs: &mut [Mail]) -> u64 {
    let mut load = 0;
    for &i in parts {
        let mut sim = lock(&sh.parts[i]);
        let before = sim.stats().events;
        sim.run_until(end);
        load += sim.stats().events - before;
        let w = sim.handler_mut();
        for (c, h) in w.outbox.drain(..) {
            outs[c.to as usize].push((c, h));
        }
        for (dst, out) in outs.iter_mut().enumerate() {
            if !out.is_empty() {
                lock(&sh.mail[i * k + dst]).append(out);
            }
        }
        sh.finished[i].store(w.main_finished, Ordering::Relaxed);
    }
    load
}

/// After a window ending at `end` (every partition got there): feeds the observer (thread 0),
/// moves the boundaries, decides whether the run is over.
fn after_window(
    sh: &Shared,
    p: &mut Progress,
    end: Time,
    critical: u64,
    main_flows: u32,
    tap: super::Tap,
    obs: &mut Option<&mut dyn Observer>,
) {
    p.now = end;
    p.windows += 1;
    p.critical += critical;
    let clock = &mut p.clock;
    let tapping = !matches!(tap, super::Tap::Off);
    if let Some(o) = obs
        .as_deref_mut()
        .filter(|_| tapping || end >= clock.next_sample)
    {
        let mut guards: Vec<MutexGuard<'_, Simulator<World>>> =
            sh.parts.iter().map(|p| lock(p)).collect();
        let mut tapped: Vec<TapRecord> = Vec::new();
        for g in &mut guards {
            tapped.append(&mut g.handler_mut().tapped);
        }
        let worlds: Vec<&World> = guards.iter().map(|g| g.handler()).collect();
        let view = WorldView::new(&worlds);
        // The sequential order: by event, and within an event as recorded.
        tapped.sort_by_key(|r| (r.time, r.key));
        for r in &tapped {
            o.on_tx(r.time, &view, r.src, r.dst, &r.pkt);
        }
        if end >= clock.next_sample {
            o.on_sample(end, &view);
            p.last_sample = end;
        }
    }
    if end >= clock.next_sample {
        clock.next_sample = clock.next_sample.saturating_add(clock.every);
    }
    if end >= clock.next_check || end >= clock.limit {
        clock.next_check = clock.next_check.saturating_add(clock.check);
        let done: u32 = sh.finished.iter().map(|f| f.load(Ordering::Relaxed)).sum();
        p.stop = done >= main_flows || end >= clock.limit;
    }
}

/// One thread's life: import, window, exchange, until the workload finished or time ran out.
/// Thread 0 also feeds the observer, and runs the quiet stretches alone ([`SOLO_EVENTS`]).
fn window_loop(
    t: usize,
    threads: usize,
    sh: &Shared,
    l: &Layout,
    clock: Clock,
    main_flows: u32,
    mut obs: Option<&mut dyn Observer>,
) -> Progress {
    let k = l.parts;
    let tap = lock(&sh.parts[0]).handler().tap;
    let mine: Vec<usize> = (t..k).step_by(threads).collect();
    let all: Vec<usize> = (0..k).collect();
    let mut outs: Vec<Mail> = (0..k).map(|_| Vec::new()).collect();
    let mut p = Progress {
        now: Time::ZERO,
        last_sample: Time::ZERO,
        windows: 0,
        critical: 0,
        clock,
        stop: false,
    };
    let mut solo = false;
    while !p.stop {
        if solo {
            // Every thread has read the last window's figures before thread 0 changes them.
            sh.barrier.wait();
            if t == 0 {
                loop {
                    import_phase(sh, k, &all);
                    let end = window_end(sh, l, &p.clock);
                    let load = run_phase(sh, k, &all, end, &mut outs);
                    after_window(sh, &mut p, end, load, main_flows, tap, &mut obs);
                    if p.stop || load >= sh.solo_events {
                        break;
                    }
                }
                *lock(&sh.solo) = Some(p);
            }
            sh.barrier.wait();
            if t != 0 {
                if let Some(q) = *lock(&sh.solo) {
                    p = q;
                }
            }
            solo = false;
            // Nobody writes `solo` again before everyone read it: thread 0 writes it only
            // after the next window's barriers.
            continue;
        }
        import_phase(sh, k, &mine);
        sh.barrier.wait();
        let end = window_end(sh, l, &p.clock);
        let load = run_phase(sh, k, &mine, end, &mut outs);
        sh.load[t].store(load, Ordering::Relaxed);
        sh.barrier.wait();
        let loads = sh.load.iter().map(|x| x.load(Ordering::Relaxed));
        let (total, critical) = loads.fold((0, 0), |(s, m), x| (s + x, m.max(x)));
        after_window(sh, &mut p, end, critical, main_flows, tap, &mut obs);
        solo = total < sh.solo_events;
    }
    // Events still in the mailboxes are packets in flight: into their queues, then the NICs
    // close their stalls at the end time.
    for &i in &mine {
        let mut sim = lock(&sh.parts[i]);
        import_mail(sh, k, i, &mut sim);
        for n in &mut sim.handler_mut().nics {
            n.settle(p.now);
        }
    }
    sh.barrier.wait();
    p
}

/// Moves the events other partitions sent to partition `i` into its queue (in sender order).
fn import_mail(sh: &Shared, k: usize, i: usize, sim: &mut Simulator<World>) {
    for src in 0..k {
        let mut mail = lock(&sh.mail[src * k + i]);
        for (c, hdr) in mail.drain(..) {
            let w = sim.handler_mut();
            let (kind, data, slot) = w.fabric.import(&c);
            if let Some(s) = slot {
                let s = s as usize;
                if s >= w.hdrs.len() {
                    w.hdrs.resize(s + 1, None);
                }
                w.hdrs[s] = hdr;
            }
            let msg = Msg {
                target: FABRIC,
                kind,
                data,
            };
            // Crossing events are at least one lookahead after the window that sent them.
            let _ = sim.schedule_keyed(c.time, c.key, msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::Shape;
    use crate::run::run;

    /// A small scenario with 4 planes (so up to 4 partitions) and its link failure, on the
    /// flow hosts (the ones a run partitions).
    fn small() -> Scenario {
        let mut sc = Scenario::tiny(Transport::Mrc);
        sc.host = crate::run::HostModel::Flows;
        sc.fabric.planes = 4;
        sc.fabric.shape = Shape::LeafSpine {
            hosts: 16,
            radix: 8,
        };
        sc
    }

    #[test]
    fn partitions_give_the_sequential_report() {
        let sc = small();
        let seq = run(&sc).unwrap();
        assert_eq!(seq.completed, 16);
        // Thread 0 alone in the quiet windows (the default), and never alone.
        for solo in [SOLO_EVENTS, 0] {
            for (threads, parts) in [(1, 2), (2, 2), (2, 4), (3, 4)] {
                let (r, mode) = run_tuned(&sc, &mut Quiet, threads, parts, solo).unwrap();
                assert!(
                    matches!(mode, Mode::Parallel { partitions, .. } if partitions == parts),
                    "{mode}"
                );
                assert_eq!(r, seq, "{threads} threads, {parts} partitions, solo {solo}");
            }
        }
        // One plane: cut by leaf (with its hosts) and spine.
        let mut sc = small();
        sc.fabric.planes = 1;
        let seq = run(&sc).unwrap();
        let (r, mode) = run_threads(&sc, 2, 4).unwrap();
        assert!(
            matches!(mode, Mode::Parallel { partitions: 4, .. }),
            "{mode}"
        );
        assert_eq!(r, seq);
    }

    #[test]
    fn unpartitionable_scenarios_run_sequentially_and_say_why() {
        let mut sc = small();
        sc.fabric.propagation = Duration::ZERO;
        let (r, mode) = run_threads(&sc, 2, 2).unwrap();
        assert!(
            matches!(&mode, Mode::Sequential { reason: Some(m) } if m.contains("zero latency")),
            "{mode}"
        );
        assert_eq!(r, run(&sc).unwrap());
        // A ring all-reduce: each chunk waits for the one its host received from the previous
        // rank, which a host of another partition sent.
        let mut sc = small();
        sc.workload = crate::workload::Workload::RingAllReduce {
            bytes: 256 << 10,
            slices: 2,
            msg_bytes: 64 << 10,
        };
        let (_, mode) = run_threads(&sc, 2, 2).unwrap();
        assert!(
            matches!(&mode, Mode::Sequential { reason: Some(m) } if m.contains("waits for")),
            "{mode}"
        );
        let mut sc = small();
        sc.fabric.planes = 1;
        sc.transport = Transport::Mrc1Ev;
        let (_, mode) = run_threads(&sc, 2, 2).unwrap();
        assert!(
            matches!(&mode, Mode::Sequential { reason: Some(m) } if m.contains("routing view")),
            "{mode}"
        );
    }
}
