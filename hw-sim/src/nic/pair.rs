//! One datapath stage and its firmware, the NIC image's main loop ([`NicLoop`], crate
//! `mrc-nicloop`: the same code the image links) around the engine, joined by their CSR
//! queues: what a simulated NIC (or one shard of it) is built from.
//!
//! Entries move between the two halves only here:
//!
//! - [`Pair::pump`] moves them until both halves are quiet, in zero time (firmware time off):
//!   the stage's reports into the loop, the loop's commands into the stage, and the
//!   completions and EV events the engine wrote for the host out to the caller.
//! - With firmware time on (module `cores`), a core runs the loop's steps: it takes the
//!   stage's reports off its CSR queue ([`Pair::take_events`] put them there), hands them to
//!   the loop ([`Pair::fw_take`]), runs the loop's due timers ([`Pair::fw_timers`]) and
//!   collects its commands ([`Pair::fw_commands`]), all at the step's start; the commands
//!   reach the stage when the step's core time ends ([`Pair::dp_commands`]).

use mrc_abi::device::csr::{CsrEntry, CsrEvent};
use mrc_firmware::capacity::Capacity;
use mrc_firmware::datapath::packet::{Packet, RxVerdict};
use mrc_firmware::datapath::stage::{Datapath, DatapathConfig};

use super::blocks::SimBlocks;
use mrc_firmware::engine::ev_state::{EvReason, EvState};
use mrc_firmware::engine::{Completion, Engine, EngineConfig, EngineError};
use mrc_nicloop::{LoopConfig, NicLoop};

/// What the engine wrote for the host that a NIC model acts on (QPNs are the engine's
/// inside a shard, the NIC's once the NIC hands them on: [`super::DriverEvent::Wrote`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostWrite {
    /// A work request completed (a send's `wr_id` is the handle it was posted with, a
    /// receive's the `wr_id` of [`super::Nic::driver_post_recv`]).
    Completion(Completion),
    /// EV `ev` of QP `qpn` moved from state `old` to `new` for `reason`.
    EvEvent {
        /// QPN.
        qpn: u32,
        /// EV index.
        ev: u16,
        /// Previous state.
        old: EvState,
        /// New state.
        new: EvState,
        /// Why.
        reason: EvReason,
    },
    /// The host's probe `probe_id` of EV `ev` of QP `qpn` finished: answered after `rtt_ns`,
    /// or `None` when it timed out.
    ProbeResult {
        /// QPN.
        qpn: u32,
        /// EV index.
        ev: u16,
        /// The host's probe id.
        probe_id: u32,
        /// Round trip, ns.
        rtt_ns: Option<u32>,
    },
}

/// Entries moved per step.
const BATCH: usize = 16;
/// Engine timer calls per [`Pair::handle_timeout`] at most.
const TIMER_CALLS: usize = 64;

/// One datapath stage and its firmware main loop.
pub(crate) struct Pair<C: Capacity> {
    pub(crate) dp: Box<Datapath<C, SimBlocks>>,
    /// The main loop around the engine (changed only through [`Pair::fw_mut`] and the methods
    /// here, which keep `fw_deadline` current).
    fw: Box<NicLoop<C>>,
    /// The engine's next deadline, unless `fw_stale` (its timer wheel is looked at only after
    /// the engine took an input).
    fw_deadline: Option<u64>,
    fw_stale: bool,
    /// The loop has no FW->DP entries waiting, as last seen after its last input (only an
    /// input makes commands: [`Pair::fw_input`] clears this). Spares the look at the loop's
    /// queues, tens of KiB into it and seldom in cache, that most core steps and pumps would
    /// make for nothing.
    fw_quiet: bool,
    /// Reports the engine has not taken yet (it was short of command room), oldest first.
    carry: [CsrEntry; BATCH],
    /// Scratch for commands and host writes on their way.
    cmd_buf: [CsrEntry; BATCH],
    host_buf: [CsrEntry; BATCH],
    carry_len: usize,
    /// Entries moved each way.
    pub(crate) events_moved: u64,
    pub(crate) commands_moved: u64,
}

impl<C: Capacity> Pair<C> {
    /// A stage with no QP context and an engine with no QP.
    ///
    /// # Errors
    /// The engine's configuration.
    pub(crate) fn new(dp: DatapathConfig, fw: EngineConfig) -> Result<Self, EngineError> {
        let lcfg = LoopConfig {
            engine: fw,
            mtu_payload: dp.mtu_payload,
        };
        Ok(Pair {
            // (each boxed on its own: a stage and a loop are built by value, and every
            // struct around them would be another copy on the way to the heap)
            dp: Box::new(Datapath::with_blocks(dp, SimBlocks::Model)),
            fw: Box::new(NicLoop::new(lcfg)?),
            fw_deadline: None,
            fw_stale: true,
            fw_quiet: false,
            carry: [CsrEntry::ZERO; BATCH],
            carry_len: 0,
            cmd_buf: [CsrEntry::ZERO; BATCH],
            host_buf: [CsrEntry::ZERO; BATCH],
            events_moved: 0,
            commands_moved: 0,
        })
    }

    /// The engine, to read.
    pub(crate) fn fw(&self) -> &Engine<C> {
        self.fw.engine()
    }

    /// The engine, for an input (its next deadline is looked up again).
    pub(crate) fn fw_mut(&mut self) -> &mut Engine<C> {
        self.fw_input();
        self.fw.engine_mut()
    }

    /// The loop is about to take an input: its next deadline is looked up again, and it may
    /// have commands.
    #[inline]
    fn fw_input(&mut self) {
        self.fw_stale = true;
        self.fw_quiet = false;
    }

    /// Whether the loop may have commands (false: it has none).
    #[inline]
    fn fw_may_command(&mut self) -> bool {
        if self.fw_quiet {
            return false;
        }
        let pending = self.fw.commands_pending();
        self.fw_quiet = !pending;
        pending
    }

    /// Moves the engine's commands into the stage; host writes go to `host`. Returns whether
    /// any moved.
    fn flush_commands(&mut self, now_ns: u64, host: &mut Vec<HostWrite>) -> bool {
        let mut any = false;
        if !self.fw_may_command() {
            return false;
        }
        loop {
            let n = self.fw.poll_commands(&mut self.cmd_buf);
            if n == 0 {
                self.fw_quiet = !self.fw.commands_pending();
                return any;
            }
            any = true;
            self.commands_moved += n as u64;
            let mut done = 0;
            while done < n {
                done += self.dp.handle_commands(now_ns, &self.cmd_buf[done..n]);
                drain_host(&mut self.dp, &mut self.host_buf, host);
            }
        }
    }

    /// Commands a core step wrote into the stage (they reach it when the step ends); host
    /// writes go to `host`.
    pub(crate) fn dp_commands(
        &mut self,
        now_ns: u64,
        cmds: &[CsrEntry],
        host: &mut Vec<HostWrite>,
    ) {
        let mut done = 0;
        while done < cmds.len() {
            done += self.dp.handle_commands(now_ns, &cmds[done..]);
            drain_host(&mut self.dp, &mut self.host_buf, host);
        }
    }

    /// Step 1 of a core step: `events` into the loop. Returns how many it took from the
    /// front (fewer when the engine is short of command room: the rest wait for the next
    /// step, after this one's commands left).
    pub(crate) fn fw_take(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize {
        self.fw_input();
        let k = self.fw.handle_events(now_ns, events);
        self.events_moved += k as u64;
        k
    }

    /// Step 2 of a core step: the loop's timers due at `now_ns`, as many as its command room
    /// lets run. Returns how many fired.
    pub(crate) fn fw_timers(&mut self, now_ns: u64) -> u64 {
        if self.poll_fw_deadline().is_none_or(|t| t > now_ns) {
            return 0;
        }
        self.fw_input();
        let fired = self.fw.engine().counters().timeouts_fired;
        self.fw.handle_timeout(now_ns);
        self.fw.engine().counters().timeouts_fired - fired
    }

    /// Step 3 of a core step: the loop's commands into the front of `out`. Returns how many.
    pub(crate) fn fw_commands(&mut self, out: &mut [CsrEntry]) -> usize {
        if out.is_empty() || !self.fw_may_command() {
            return 0;
        }
        let n = self.fw.poll_commands(out);
        if n < out.len() {
            self.fw_quiet = !self.fw.commands_pending();
        }
        self.commands_moved += n as u64;
        n
    }

    /// The loop's next timer deadline (cached while the engine took no input).
    pub(crate) fn poll_fw_deadline(&mut self) -> Option<u64> {
        if self.fw_stale {
            self.fw_deadline = self.fw.poll_timeout();
            self.fw_stale = false;
        }
        self.fw_deadline
    }

    /// The stage's timers due at `now_ns` (the datapath's alone: with firmware time on, the
    /// loop's timers run on its core).
    pub(crate) fn dp_timeout(&mut self, now_ns: u64) {
        self.dp.handle_timeout(now_ns);
    }

    /// Moves entries both ways until both halves are quiet (engine to stage first: that makes
    /// command room); host writes go to `host`. Returns whether anything moved.
    pub(crate) fn pump(&mut self, now_ns: u64, host: &mut Vec<HostWrite>) -> bool {
        let mut any = false;
        loop {
            let mut moved = self.flush_commands(now_ns, host);
            if self.carry_len == 0 {
                self.carry_len = self.dp.poll_events(&mut self.carry);
            }
            if self.carry_len > 0 {
                let c = self.carry_len;
                let k = self.fw.handle_events(now_ns, &self.carry[..c]);
                if k > 0 {
                    moved = true;
                    self.fw_input();
                    self.events_moved += k as u64;
                    self.carry.copy_within(k..c, 0);
                    self.carry_len = c - k;
                }
            }
            if !moved {
                return any;
            }
            any = true;
        }
    }

    /// Whether the stage has reports for the firmware (a pump's carried ones included, and
    /// those a QP keeps until they are polled: an immediate whose every PSN was placed).
    #[inline]
    pub(crate) fn has_reports(&self) -> bool {
        self.carry_len > 0 || self.dp.has_events()
    }

    /// The stage's reports, oldest first, into the front of `out` (for a firmware core's CSR
    /// ring). Returns how many.
    pub(crate) fn take_events(&mut self, out: &mut [CsrEntry]) -> usize {
        // Reports a pump left carried go first.
        let c = self.carry_len.min(out.len());
        if c > 0 {
            out[..c].copy_from_slice(&self.carry[..c]);
            self.carry.copy_within(c..self.carry_len, 0);
            self.carry_len -= c;
            return c;
        }
        self.dp.poll_events(out)
    }

    /// A received packet into the stage; `None` when the stage's event queue is short of room
    /// (move its reports on, then try again).
    pub(crate) fn receive(&mut self, now_ns: u64, pkt: &Packet) -> Option<RxVerdict> {
        let mut v = [RxVerdict::Consumed];
        (self
            .dp
            .handle_packets(now_ns, core::slice::from_ref(pkt), &mut v)
            == 1)
            .then_some(v[0])
    }

    /// The next packet the stage sends; `None` when nothing can leave, or the stage's event
    /// queue is short of room (its reports waiting: `dp.events_pending()`).
    pub(crate) fn transmit(&mut self, now_ns: u64) -> Option<Packet> {
        let mut out = [Packet::FILL];
        (self.dp.poll_packets(now_ns, &mut out) == 1).then_some(out[0])
    }

    /// Both halves' timers due at `now_ns`; the engine's commands reach the stage, host
    /// writes go to `host`.
    pub(crate) fn handle_timeout(&mut self, now_ns: u64, host: &mut Vec<HostWrite>) {
        self.dp.handle_timeout(now_ns);
        // The engine runs a bounded number of timers per call (its command queue bounds
        // them): call again while timers fire and more are due (a bounded number of times:
        // a timer re-armed at `now_ns` waits for the next call).
        for _ in 0..TIMER_CALLS {
            let fired = self.fw.engine().counters().timeouts_fired;
            self.fw_input();
            self.fw.handle_timeout(now_ns);
            self.flush_commands(now_ns, host);
            if self.fw.engine().counters().timeouts_fired == fired
                || self.fw.poll_timeout().is_none_or(|t| t > now_ns)
            {
                return;
            }
        }
    }

    /// The earlier of both halves' next deadlines (may be early, never late).
    pub(crate) fn poll_timeout(&mut self) -> Option<u64> {
        let dp = self.dp.poll_timeout();
        crate::core::time::earliest(dp, self.poll_fw_deadline())
    }
}

/// What the engine wrote for the host, out of the stage into `host` (through `buf`).
fn drain_host<C: Capacity>(
    dp: &mut Datapath<C, SimBlocks>,
    buf: &mut [CsrEntry],
    host: &mut Vec<HostWrite>,
) {
    loop {
        let n = dp.poll_host_writes(buf);
        if n == 0 {
            return;
        }
        for e in &buf[..n] {
            match e.decode() {
                Ok(CsrEvent::Complete(c)) => {
                    if let Some(c) = Completion::from_complete(&c) {
                        host.push(HostWrite::Completion(c));
                    }
                }
                Ok(CsrEvent::EvEvent(v)) => {
                    if let (Some(old), Some(new), Some(reason)) = (
                        EvState::from_u8(v.old),
                        EvState::from_u8(v.new),
                        EvReason::from_code(v.reason),
                    ) {
                        host.push(HostWrite::EvEvent {
                            qpn: v.qpn.get(),
                            ev: v.ev.get(),
                            old,
                            new,
                            reason,
                        });
                    }
                }
                Ok(CsrEvent::ProbeResult(r)) => host.push(HostWrite::ProbeResult {
                    qpn: r.qpn.get(),
                    ev: r.ev.get(),
                    probe_id: r.probe_id.get(),
                    rtt_ns: (r.replied != 0).then(|| r.rtt_ns.get()),
                }),
                // (raw CQEs and event records: the simulated host has no rings)
                _ => {}
            }
        }
    }
}
