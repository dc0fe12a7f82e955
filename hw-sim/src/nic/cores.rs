//! The NIC's firmware cores: the NIC image's main loop (`mrc-nicloop`, one loop per shard)
//! on N embedded cores, each step charged in core cycles from the cost table
//! ([`fw_cost`](super::fw_cost)).
//!
//! # The model
//! - **Cores and shards.** Shard `k` runs on core `k % cores`, as a NIC partitions its QPs over
//!   its cores; a core runs the loops of all its shards, one step at a time.
//! - **CSR queues.** Each core has one DP->FW ring of [`mrc_nicloop::RING_ENTRIES`] entries.
//!   The stages of its shards put their reports there, oldest first; when it is full a stage
//!   keeps its reports (its own 256-entry buffer), and a stage whose buffer fills stops taking
//!   packets and stops sending, as the hardware pipeline stalls: deliveries wait in the
//!   port's RX FIFO (`dp_clock::RX_FIFO_PKTS`), in order, until reports move on. Every
//!   report held back is counted once ([`NicCounters::csr_held`](super::NicCounters::csr_held)),
//!   as is every delivery dropped because the FIFO was full
//!   ([`NicCounters::rx_refused`](super::NicCounters::rx_refused)).
//! - **A step** at time `t` (the loop reads the timer once) does what `NicLoop::step` does:
//!   1. up to a ring's worth of entries off the ring into their shards' loops (an engine short
//!      of command room takes fewer: the rest wait, in order, for the next step);
//!   2. the timers of its engines due at `t`;
//!   3. the loops' commands, up to the FW->DP ring's [`mrc_nicloop::RING_ENTRIES`] (the rest
//!      wait in the loop).
//!
//!   The step costs the table's instructions for each entry taken (by kind), each timer fired,
//!   each command written and each engine's timer check, times the CPI, in cycles of the core
//!   clock, charged in that order: its entries leave the ring when the events phase ends (the
//!   loop consumes them then), and its commands reach their stages (with the completions and
//!   EV events for the host) [`mrc_nicloop::PUBLISH_ENTRIES`] at a time, each group when the
//!   loop has made it, as the loop publishes them. The next step follows at once when the
//!   step ends if there is work (entries waiting, commands left over, a timer due), else the
//!   core idles until a report comes or a timer is due. An idle core's polling is not busy
//!   time.
//! - **Not charged**: the NIC's setup calls into the engines (QPs created and connected) and
//!   the route knowledge the NIC shares between its QPs (`Nic::share_route`); their commands
//!   leave with the next step, charged as commands.
//!
//! [`FirmwareConfig::timed`] `= false` runs the loops in zero time instead (reports and
//! commands move at once, no cores): a study of the transport alone.

use mrc_abi::device::csr::CsrEntry;
use mrc_nicloop::{BUDGET, PUBLISH_ENTRIES, RING_ENTRIES};
use std::collections::VecDeque;

use super::{fw_cost, ns, Nic};
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::{Duration, Time, PS_PER_US};

/// Most firmware cores a NIC may have.
pub const MAX_CORES: u8 = 64;

/// Cycles per instruction, in thousandths (a TOML number such as `1.25`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Cpi(u32);

impl Cpi {
    /// Accepted range.
    pub const RANGE: core::ops::RangeInclusive<f64> = 0.25..=16.0;

    /// `cpi` cycles per instruction, if in [`Cpi::RANGE`] (kept to thousandths).
    pub fn new(cpi: f64) -> Option<Cpi> {
        Cpi::RANGE
            .contains(&cpi)
            .then(|| Cpi((cpi * 1000.0).round() as u32))
    }

    /// Cycles per instruction.
    pub fn get(self) -> f64 {
        f64::from(self.0) / 1000.0
    }

    /// Core cycles of `instructions` (rounded up).
    pub fn cycles(self, instructions: u64) -> u64 {
        instructions
            .saturating_mul(u64::from(self.0))
            .div_ceil(1000)
    }
}

impl TryFrom<f64> for Cpi {
    type Error = String;
    fn try_from(v: f64) -> Result<Cpi, String> {
        Cpi::new(v).ok_or_else(|| {
            format!(
                "cpi {v} is out of range {}..={}",
                Cpi::RANGE.start(),
                Cpi::RANGE.end()
            )
        })
    }
}

impl From<Cpi> for f64 {
    fn from(c: Cpi) -> f64 {
        c.get()
    }
}

/// Who executes each NIC core's main loop (`[nic.firmware] level`, `mrc-sim run --firmware`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FirmwareLevel {
    /// The image's main loop compiled into the simulator, each step charged from the cost
    /// table.
    #[default]
    Native,
    /// The `mrc-nic` ELF on an emulated riscv32imac core (cargo feature `elf`), each
    /// iteration charged its retired instructions times the CPI. Runs the image's shape.
    Elf,
}

impl FirmwareLevel {
    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            FirmwareLevel::Native => "native",
            FirmwareLevel::Elf => "elf",
        }
    }
}

/// What a NIC's shards are (`[nic.firmware] shape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NicShape {
    /// The simulator's shards ([`super::SHARD_QPS`] QPs of 256 EVs on up to 8 planes each),
    /// set up by calls into their engines, sharing route knowledge between QPs; shard `k`
    /// runs on core `k % cores`.
    Sim,
    /// The NIC image's: each shard is what one core running the image owns (its
    /// [`mrc_nicloop::QPS`] QPs, capacities and 4 ports), set up through its admin ring, one
    /// core per shard (`cores` is not used). See module `image` for its limits.
    Image,
}

/// The firmware cores of every NIC (`[nic.firmware]` in a scenario file).
///
/// The default is a DPU-class core complex: 16 cores at 2 GHz with one cycle per instruction
/// (the cost table's figures are already upper bounds: each includes a call's overhead, so
/// the default adds no pipeline stalls on top; a scenario sets `cpi` for a core it knows).
/// That is what the default all-to-all needs: each NIC's 63 QPs make an ACK summary about
/// every two data packets (coalescing ends at 16 packets or 4 us, whichever comes first, and
/// a QP of an all-to-all receives a few packets per 4 us), and the firmware's per-event costs
/// add up to ~14 G instructions per second per NIC at line rate. An embedded cluster of one
/// 1 GHz core per 200G plane (`cores = 4`, `clock_mhz = 1000`) falls behind: its CSR rings
/// fill, the datapath holds its reports, and the default run takes ~4.4x its ideal time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FirmwareConfig {
    /// Cores per NIC (`1..=64`); shard `k` runs on core `k % cores`.
    pub cores: u8,
    /// Core clock, MHz.
    pub clock_mhz: u32,
    /// Cycles per guest instruction.
    pub cpi: Cpi,
    /// `false`: the firmware runs in zero time (no cores, no CSR queue limits).
    pub timed: bool,
    /// Who executes the main loop.
    pub level: FirmwareLevel,
    /// The shards' shape; absent: `image` at the `elf` level, else `sim`.
    pub shape: Option<NicShape>,
    /// The `mrc-nic` ELF the `elf` level runs (absent: the image built from this source
    /// tree, `just firmware`; `mrc-sim run --elf`).
    #[serde(skip)]
    pub elf: Option<&'static std::path::Path>,
}

impl FirmwareConfig {
    /// 16 cores at 2 GHz, CPI 1, timed.
    pub const DEFAULT: FirmwareConfig = FirmwareConfig {
        cores: 16,
        clock_mhz: 2000,
        cpi: Cpi(1000),
        timed: true,
        level: FirmwareLevel::Native,
        shape: None,
        elf: None,
    };

    /// The firmware in zero time.
    pub const UNTIMED: FirmwareConfig = FirmwareConfig {
        timed: false,
        ..FirmwareConfig::DEFAULT
    };

    /// Checks the values; the error names the key (under `nic.firmware`) and why.
    ///
    /// # Errors
    /// The first value out of range.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.cores == 0 || self.cores > MAX_CORES {
            return Err(("cores", format!("must be 1..={MAX_CORES}")));
        }
        if !(1..=10_000).contains(&self.clock_mhz) {
            return Err(("clock_mhz", "must be 1..=10000".into()));
        }
        if self.level == FirmwareLevel::Elf && self.shape == Some(NicShape::Sim) {
            return Err((
                "shape",
                "the elf level runs the NIC image, which has the image's shape (\"image\")".into(),
            ));
        }
        if self.shape() == NicShape::Image && !self.timed {
            return Err((
                "timed",
                "the image's shape runs its main loop on timed cores (timed = true)".into(),
            ));
        }
        Ok(())
    }

    /// The shards' shape (see [`FirmwareConfig::shape`]).
    pub fn shape(&self) -> NicShape {
        self.shape.unwrap_or(match self.level {
            FirmwareLevel::Elf => NicShape::Image,
            FirmwareLevel::Native => NicShape::Sim,
        })
    }

    /// Instructions a core retires per second (its clock over its CPI).
    pub fn instructions_per_s(&self) -> u64 {
        u64::from(self.clock_mhz) * 1_000_000_000 / u64::from(self.cpi.0.max(1))
    }

    /// Core time of `cycles`.
    pub fn time_of(&self, cycles: u64) -> Duration {
        let ps = u128::from(cycles) * u128::from(PS_PER_US) / u128::from(self.clock_mhz.max(1));
        Duration::from_ps(u64::try_from(ps).unwrap_or(u64::MAX))
    }
}

impl Default for FirmwareConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One firmware core.
#[derive(Debug, Default)]
pub(crate) struct Core {
    /// The DP->FW ring, oldest first: (shard, entry). The running step's entries stay at the
    /// front until it ends.
    ring: VecDeque<(u32, CsrEntry)>,
    /// Entries at the ring's front the running step took.
    taken: usize,
    /// When they leave the ring: the end of the step's events phase (`None`: none taken, or
    /// gone).
    consumed_at: Option<Time>,
    /// When the newest entry in the ring came out of the CSR event queue (a step starts no
    /// earlier).
    ring_ready: Time,
    /// When the running step ends (`None`: idle).
    pub(crate) busy_until: Option<Time>,
    /// The running step's commands, each published at its group's point in the step: (when,
    /// shard, entry), in the order the loop made them.
    out: Vec<(Time, u32, CsrEntry)>,
    /// Commands of `out` written so far.
    sent: usize,
    /// Scratch: entries on their way (a ring's worth).
    scratch: Vec<CsrEntry>,
    /// Per shard of this core (shard `k` at `k / cores`): reports its stage held at the last
    /// offer.
    held: Vec<usize>,
    /// The time of the latest wake-up asked of the scheduler.
    armed: Option<Time>,
    /// Busy cycles over the run.
    pub(crate) busy_cycles: u64,
    /// Steps run.
    pub(crate) steps: u64,
    /// Most entries in the ring at once.
    pub(crate) ring_max: usize,
    /// The core runs nothing (a hung or halted core, fault injection) while `now` is before
    /// this: its ring fills and back-pressures the stages as when it is busy.
    stalled_until: Time,
}

impl Core {
    /// The running step's next point: its entries leave the ring, its next command is
    /// written, or it ends.
    fn next_point(&self) -> Option<Time> {
        let busy = self.busy_until?;
        let next = self.out.get(self.sent).map_or(busy, |o| o.0);
        Some(self.consumed_at.map_or(next, |t| t.min(next)))
    }

    /// `cores` idle cores with shards `0..shards` dealt round-robin.
    pub(crate) fn deal(cores: usize, shards: usize) -> Vec<Core> {
        let n = cores.max(1);
        let mut v: Vec<Core> = (0..n)
            .map(|_| Core {
                scratch: vec![CsrEntry::ZERO; RING_ENTRIES],
                ..Core::default()
            })
            .collect();
        for k in 0..shards {
            v[k % n].held.push(0);
        }
        v
    }
}

/// The cores a service looks at: a bit per core whose shards may have work (an input since its
/// last step). Kept apart from the cores (216 bytes each), a bit per core: a service that
/// wakes one core reads one word, not a flag in every core.
#[derive(Debug)]
pub(crate) struct Woken {
    bits: Vec<u64>,
    cores: usize,
}

impl Woken {
    /// None of `cores` woken.
    pub(crate) fn new(cores: usize) -> Woken {
        Woken {
            bits: vec![0; cores.div_ceil(64)],
            cores,
        }
    }

    /// Core `c` has something to look at (ignored for a core there is not).
    #[inline]
    pub(crate) fn set(&mut self, c: usize) {
        if c < self.cores {
            self.bits[c >> 6] |= 1 << (c & 63);
        }
    }

    /// Every core.
    pub(crate) fn set_all(&mut self) {
        for c in 0..self.cores {
            self.set(c);
        }
    }

    /// Clears and returns the lowest woken core at or above `from`.
    #[inline]
    pub(crate) fn take_from(&mut self, from: usize) -> Option<usize> {
        let mut i = from >> 6;
        let mut mask = u64::MAX << (from & 63);
        while let Some(w) = self.bits.get_mut(i) {
            let bits = *w & mask;
            if bits != 0 {
                let b = bits.trailing_zeros() as usize;
                *w &= !(1 << b);
                return Some((i << 6) | b);
            }
            i += 1;
            mask = u64::MAX;
        }
        None
    }

    /// The words (for prefetching).
    #[inline]
    pub(crate) fn words(&self) -> &[u64] {
        &self.bits
    }
}

impl Nic {
    /// The shards core `c` runs, those [`Nic::core_of`] maps to it: `c`, `c + cores`, ...
    /// (dealt round-robin, [`Core::deal`]; computed, not read from the core, as a service
    /// reads them for every core).
    #[inline]
    fn core_shards(&self, c: usize) -> core::iter::StepBy<core::ops::Range<usize>> {
        (c..self.shards.len()).step_by(self.cores_len)
    }

    /// The core shard `k` runs on.
    #[inline]
    fn core_of(&self, k: usize) -> usize {
        k % self.cores_len
    }

    /// Whether shard `k`'s core is in the middle of a step (it may hold commands of the
    /// shard's engine it has not published yet); if so the core is told to look at its shards
    /// again when the step ends. False when the firmware runs in zero time.
    pub(super) fn core_mid_step(&mut self, k: usize) -> bool {
        if self.cores.is_empty() {
            return false;
        }
        let c = self.core_of(k);
        if self.cores[c].busy_until.is_some() {
            self.core_wake.set(c);
            return true;
        }
        false
    }

    /// Firmware time on: shard `k`'s reports onto its core's ring, as far as it has room (the
    /// rest stay in the stage, counted), and the core woken. Returns whether any moved.
    pub(super) fn offer_reports(&mut self, now: Time, k: usize) -> bool {
        let c = self.core_of(k);
        self.core_wake.set(c);
        let core = &mut self.cores[c];
        let shard = &mut self.shards[k];
        if !shard.has_reports() {
            return false;
        }
        let room = RING_ENTRIES.saturating_sub(core.ring.len());
        let before = shard.events_pending();
        let n = if room > 0 {
            shard.take_events(&mut core.scratch[..room])
        } else {
            0
        };
        core.ring
            .extend(core.scratch[..n].iter().map(|e| (k as u32, *e)));
        core.ring_max = core.ring_max.max(core.ring.len());
        // They reach the core out of the datapath's CSR event queue (`dp_clock`).
        if n > 0 {
            let at = self.dp.csr_push(now, n as u64);
            let core = &mut self.cores[c];
            core.ring_ready = core.ring_ready.max(at);
        }
        let core = &mut self.cores[c];
        // Each report held back is counted once: the stage's queue is first in, first out, so
        // the ones still there that were not held at the last offer are new.
        let after = shard.events_pending();
        let prev = &mut core.held[k / self.cores_len];
        let new_held = after.min(before.saturating_sub(*prev));
        *prev = after;
        self.counters.csr_held += new_held as u64;
        n > 0
    }

    /// Fault injection: every firmware core stops (`stalled`: it finishes the step it is in
    /// and starts no other) or runs again, now. A NIC whose firmware runs in zero time has no
    /// core to stall.
    pub fn stall_firmware(
        &mut self,
        stalled: bool,
        now: Time,
        fab: &mut crate::fabric::Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        for core in &mut self.cores {
            core.stalled_until = if stalled { Time::MAX } else { now };
        }
        self.core_wake.set_all();
        self.service(now, fab, s, me);
    }

    /// [`super::ev::FIRMWARE`] at `now`: the steps whose core time ended write their commands,
    /// then the NIC services what follows (the cores run again at its end).
    pub fn on_firmware(
        &mut self,
        now: Time,
        fab: &mut crate::fabric::Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        // Only the cores that run a shard: one without (a NIC of fewer shards than cores) never
        // starts a step or asks to be woken, so it has nothing due, and reading its 216 bytes
        // at every firmware event would cost the default NIC's 16 cores four cache lines each.
        for c in 0..self.cores.len().min(self.shards.len()) {
            let core = &mut self.cores[c];
            if core.armed.is_some_and(|a| a <= now) {
                core.armed = None;
            }
            if core.consumed_at.is_some_and(|t| t <= now) {
                self.release_taken(c);
            }
            self.write_due(c, now);
            let core = &mut self.cores[c];
            if core.busy_until.is_some_and(|t| t <= now) {
                // (every command was due by then)
                core.busy_until = None;
            }
            // (an engine timer may be due)
            self.core_wake.set(c);
        }
        self.service(now, fab, s, me);
    }

    /// After a service: every idle core with work starts a step; every core asks to be woken
    /// when its step ends or its next timer is due.
    pub(super) fn run_cores(&mut self, now: Time, s: &mut Scheduler<'_>, me: ComponentId) {
        // (the woken cores in increasing order, as a scan of every core's flag would find them)
        let mut next = 0;
        while let Some(c) = self.core_wake.take_from(next) {
            next = c + 1;
            let mut at = None;
            let stalled = now < self.cores[c].stalled_until;
            if stalled && self.cores[c].busy_until.is_none() {
                at = Some(self.cores[c].stalled_until).filter(|t| *t != Time::MAX);
            } else if self.cores[c].busy_until.is_none() && !self.start_step(c, now) {
                // Nothing to do now: wake at the earliest timer (after now: a deadline may be
                // early, and one that found nothing due is not asked for again at once).
                let floor = Time::from_ps(now.as_ps() + 1);
                at = self.core_deadline(c).map(|t| t.max(floor));
            }
            if let Some(t) = self.cores[c].next_point() {
                at = Some(t);
            }
            let Some(t) = at else { continue };
            let core = &mut self.cores[c];
            if core.armed.is_some_and(|a| a <= t) {
                continue;
            }
            if s.at(t, me, super::ev::FIRMWARE, u64::from(self.host))
                .is_ok()
            {
                core.armed = Some(t);
            }
        }
    }

    /// The earliest engine timer of core `c`'s shards.
    fn core_deadline(&mut self, c: usize) -> Option<Time> {
        let mut t: Option<u64> = None;
        for k in self.core_shards(c) {
            if let Some(d) = self.shards[k].poll_fw_deadline() {
                t = Some(t.map_or(d, |x| x.min(d)));
            }
        }
        t.map(Time::from_ns)
    }

    /// A step of idle core `c` at `now` (see the module docs). Returns whether it did
    /// anything (and so occupies the core).
    fn start_step(&mut self, c: usize, now: Time) -> bool {
        if let Some(k) = self.core_shards(c).next() {
            if matches!(self.shards[k], super::Shard::Image(_)) {
                return self.start_image_step(c, now);
            }
        }
        let t = ns(now);
        let fw = self.cfg.firmware;
        let begin = now.max(self.cores[c].ring_ready);
        // The time the step reaches after `instr` instructions.
        let at = |instr: u64| begin.saturating_add(fw.time_of(fw.cpi.cycles(instr)));
        let mut instr: u64 = 0;
        let mut buf = std::mem::take(&mut self.cores[c].scratch);
        // 1. Events in, a run of one shard's entries at a time.
        let n = self.cores[c].ring.len().min(BUDGET);
        let mut taken = 0;
        while taken < n {
            let k = self.cores[c].ring[taken].0;
            let mut run = 0;
            while taken + run < n && self.cores[c].ring[taken + run].0 == k {
                buf[run] = self.cores[c].ring[taken + run].1;
                run += 1;
            }
            let took = self.shards[k as usize].fw_take(t, &buf[..run]);
            instr += buf[..took]
                .iter()
                .map(|e| u64::from(fw_cost::event(e.kind_code())))
                .sum::<u64>();
            taken += took;
            if took < run {
                break; // (short of command room: the rest, in order, next step)
            }
        }
        let consumed = at(instr);
        // 2. Timers and 3. commands out, engine by engine.
        let mut fired = 0;
        let mut out = std::mem::take(&mut self.cores[c].out);
        for k in self.core_shards(c) {
            let shard = &mut self.shards[k];
            instr += u64::from(fw_cost::TIMER_CHECK);
            let f = shard.fw_timers(t);
            fired += f;
            instr += f * u64::from(fw_cost::TIMER_FIRED);
            // (made and published a group at a time, as the loop does)
            while out.len() < RING_ENTRIES {
                let room = (RING_ENTRIES - out.len()).min(PUBLISH_ENTRIES);
                let m = shard.fw_commands(&mut buf[..room]);
                if m == 0 {
                    break;
                }
                instr += m as u64 * u64::from(fw_cost::COMMAND);
                let when = at(instr);
                out.extend(buf[..m].iter().map(|e| (when, k as u32, *e)));
            }
        }
        let core = &mut self.cores[c];
        core.out = out;
        core.sent = 0;
        core.scratch = buf;
        if taken == 0 && fired == 0 && core.out.is_empty() {
            return false;
        }
        let cycles = fw.cpi.cycles(instr);
        core.taken = taken;
        core.consumed_at = (taken > 0).then_some(consumed);
        core.busy_cycles += cycles;
        core.steps += 1;
        core.busy_until = Some(at(instr));
        true
    }

    /// A main-loop iteration of idle core `c`, whose one shard is an image shard (module
    /// `image`), at `now`, if it has work: entries on its ring, its loop's timer due, or
    /// commands the last iteration had no ring room for. The iteration runs whole at its
    /// start; what it did lands at its points in core time: its entries leave the ring when
    /// it had consumed them, each publication's FW->DP entries reach the stage when it
    /// published them, the core is busy until its last instruction (cycles = instructions x
    /// CPI). Returns whether it ran.
    fn start_image_step(&mut self, c: usize, now: Time) -> bool {
        let t = ns(now);
        let fw = self.cfg.firmware;
        let k = c;
        let begin = now.max(self.cores[c].ring_ready);
        let at = |instr: u64| begin.saturating_add(fw.time_of(fw.cpi.cycles(instr)));
        let core = &mut self.cores[c];
        let n = core.ring.len().min(BUDGET);
        let mut buf = std::mem::take(&mut core.scratch);
        for (b, e) in buf.iter_mut().zip(core.ring.iter().take(n)) {
            *b = e.1;
        }
        let super::Shard::Image(img) = &mut self.shards[k] else {
            self.cores[c].scratch = buf;
            return false;
        };
        let due = img.fw_deadline().is_some_and(|d| d <= t);
        if img.fault.is_some() || (n == 0 && !due && !img.more) {
            self.cores[c].scratch = buf;
            return false;
        }
        let mut it = std::mem::take(&mut self.iteration);
        let r = img.iterate(t, &buf[..n], &mut it);
        let core = &mut self.cores[c];
        core.scratch = buf;
        let Ok(consumed) = r else {
            // (the shard's firmware is dead: its QPs stall, the run reports it)
            self.counters.fw_faults += 1;
            self.iteration = it;
            return false;
        };
        let orders = img.orders();
        core.out.clear();
        core.sent = 0;
        let mut g = 0;
        for (i, e) in orders.iter().enumerate() {
            while g + 1 < it.published.len() && it.published[g].0 as usize <= i {
                g += 1;
            }
            let when = it.published.get(g).map_or(it.instructions, |p| p.1);
            core.out.push((at(when), k as u32, *e));
        }
        let instructions = it.instructions;
        let consumed_at = it.consumed_at;
        self.iteration = it;
        if instructions == 0 && consumed == 0 && core.out.is_empty() {
            return false;
        }
        core.taken = consumed;
        core.consumed_at = (consumed > 0).then(|| at(consumed_at));
        core.busy_cycles += fw.cpi.cycles(instructions);
        core.steps += 1;
        core.busy_until = Some(at(instructions));
        true
    }

    /// The running step of core `c` has taken its entries: they leave the ring, and the
    /// reports the stages held move up (the service that follows moves the entries of its
    /// input shards).
    fn release_taken(&mut self, c: usize) {
        let core = &mut self.cores[c];
        core.ring.drain(..core.taken);
        core.taken = 0;
        core.consumed_at = None;
        self.core_wake.set(c);
        for k in self.core_shards(c) {
            if self.shards[k].events_pending() > 0 {
                self.shard_ready[k] = true;
                self.input_shards.push(k);
            }
        }
    }

    /// The running step's commands due by `now` reach their stages (with the completions and
    /// EV events for the host), in order.
    fn write_due(&mut self, c: usize, now: Time) {
        let core = &mut self.cores[c];
        let from = core.sent;
        let upto = from + core.out[from..].iter().take_while(|o| o.0 <= now).count();
        if upto == from {
            return;
        }
        core.sent = upto;
        self.core_wake.set(c);
        let out = std::mem::take(&mut core.out);
        let mut cmds = std::mem::take(&mut core.scratch);
        let mut i = from;
        while i < upto {
            let k = out[i].1;
            let mut run = 0;
            while i + run < upto && out[i + run].1 == k {
                cmds[run] = out[i + run].2;
                run += 1;
            }
            i += run;
            let k = k as usize;
            self.with_writes(k, |e, w| e.dp_commands(ns(now), &cmds[..run], w));
            // (a command is what queues a retransmission)
            self.retx_maybe[k] = true;
            self.shard_ready[k] = true;
            self.input_shards.push(k);
            self.deadline_dirty.push(k);
        }
        let core = &mut self.cores[c];
        core.out = out;
        core.scratch = cmds;
        if core.sent == core.out.len() {
            core.out.clear();
            core.sent = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Woken;

    #[test]
    fn woken_cores_come_out_lowest_first_once_each() {
        let mut w = Woken::new(130);
        for c in [129, 3, 64, 0, 63, 3] {
            w.set(c);
        }
        w.set(130); // (no such core: ignored)
        let mut seen = Vec::new();
        let mut next = 0;
        while let Some(c) = w.take_from(next) {
            seen.push(c);
            next = c + 1;
        }
        assert_eq!(seen, [0, 3, 63, 64, 129]);
        assert_eq!(w.take_from(0), None);
        // A core woken below the cursor waits for the next pass.
        w.set(5);
        w.set(70);
        assert_eq!(w.take_from(6), Some(70));
        assert_eq!(w.take_from(71), None);
        assert_eq!(w.take_from(0), Some(5));
        w.set_all();
        assert_eq!(std::iter::from_fn(|| w.take_from(0)).count(), 130);
    }
}
