//! [`Nic`]: one NIC of the test kit: the datapath stage and the firmware engine, with the two
//! CSR queues between them, as a NIC's hardware and cores share them.
//!
//! [`Nic::pump`] moves entries until neither side has anything for the other: the stage's
//! reports into the engine, the engine's commands into the stage, and what the engine writes
//! for the host (completions, EV events) out to the caller. Time does not pass while it moves
//! them (the test kit has no firmware latency; the simulator charges cycles for each step).

use mrc_abi::device::csr::{Complete, CsrEntry, CsrKind, EvEventEntry};

use crate::capacity::Capacity;
use crate::datapath::packet::{Packet, RxVerdict, SendWr, VerdictSink};
use crate::datapath::placement::{MemRegion, RegisterError};
use crate::datapath::stage::{Datapath, DatapathConfig, PostError};
use crate::engine::{Completion, Engine, EngineConfig, EngineError, QpAttrs, QpError, QpState};

/// Commands moved from the firmware to the stage at a time.
const BATCH: usize = 32;

/// What [`Nic::pump`] hands the host: a completion or an EV state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostWrite {
    /// A work request completed.
    Completion(Completion),
    /// An EV changed state (`qpn`, `ev`, reason code).
    EvEvent { qpn: u32, ev: u16, reason: u8 },
    /// Another host-interface write (a raw CQE or event record).
    Other(CsrEntry),
}

/// The firmware half of a test-kit NIC: it takes the stage's reports and answers with
/// commands, as [`Engine`] does (the default), or as a NIC main loop around the engine does
/// (the NIC image's, so its self-test and its cost figure run the loop that ships).
pub trait Firmware<C: Capacity> {
    /// The engine behind it.
    fn engine(&self) -> &Engine<C>;
    /// The engine behind it, mutably (QP setup, plane events).
    fn engine_mut(&mut self) -> &mut Engine<C>;
    /// As [`Engine::handle_events`].
    fn handle_events(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize;
    /// As [`Engine::poll_commands`].
    fn poll_commands(&mut self, out: &mut [CsrEntry]) -> usize;
    /// As [`Engine::commands_pending`].
    fn commands_pending(&self) -> bool;
    /// As [`Engine::handle_timeout`].
    fn handle_timeout(&mut self, now_ns: u64) -> bool;
    /// As [`Engine::poll_timeout`].
    fn poll_timeout(&self) -> Option<u64>;
}

impl<C: Capacity> Firmware<C> for Engine<C> {
    fn engine(&self) -> &Engine<C> {
        self
    }
    fn engine_mut(&mut self) -> &mut Engine<C> {
        self
    }
    #[inline]
    fn handle_events(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize {
        Engine::handle_events(self, now_ns, events)
    }
    #[inline]
    fn poll_commands(&mut self, out: &mut [CsrEntry]) -> usize {
        Engine::poll_commands(self, out)
    }
    #[inline]
    fn commands_pending(&self) -> bool {
        Engine::commands_pending(self)
    }
    #[inline]
    fn handle_timeout(&mut self, now_ns: u64) -> bool {
        Engine::handle_timeout(self, now_ns)
    }
    #[inline]
    fn poll_timeout(&self) -> Option<u64> {
        Engine::poll_timeout(self)
    }
}

/// One NIC: the stage, the firmware (the engine unless said otherwise) and the queues between
/// them. See the module docs.
pub struct Nic<C: Capacity, F: Firmware<C> = Engine<C>> {
    pub dp: Datapath<C>,
    pub fw: F,
    /// Entries moved each way, and host writes.
    pub events_moved: u64,
    pub commands_moved: u64,
    pub host_writes: u64,
    /// Where the firmware's commands are copied out to (the FW->DP ring's slots), kept so
    /// that no pump clears a buffer first.
    cmd_buf: [CsrEntry; BATCH],
}

impl<C: Capacity> Nic<C> {
    /// A NIC with no QP.
    ///
    /// # Errors
    /// The engine's configuration.
    pub fn new(dp: DatapathConfig, fw: EngineConfig) -> Result<Self, EngineError> {
        Ok(Self::with_firmware(dp, Engine::new(fw)?))
    }
}

impl<C: Capacity, F: Firmware<C>> Nic<C, F> {
    /// A NIC with no QP around firmware `fw` (whose engine has none).
    pub fn with_firmware(dp: DatapathConfig, fw: F) -> Self {
        Nic {
            dp: Datapath::new(dp),
            fw,
            events_moved: 0,
            commands_moved: 0,
            host_writes: 0,
            cmd_buf: [CsrEntry::ZERO; BATCH],
        }
    }

    /// Create a QP (the engine's; the stage's context follows at INIT).
    ///
    /// # Errors
    /// [`QpError::TableFull`].
    pub fn create_qp(&mut self) -> Result<u32, QpError> {
        self.fw.engine_mut().create_qp()
    }

    /// Move QP `qpn` to `to`; the stage's context follows at the next [`Self::pump`].
    ///
    /// # Errors
    /// The engine's refusal.
    pub fn modify_qp(
        &mut self,
        qpn: u32,
        to: QpState,
        a: &QpAttrs,
        now_ns: u64,
    ) -> Result<(), QpError> {
        self.fw.engine_mut().modify_qp(qpn, to, a, now_ns)
    }

    /// Register a region remote peers may write.
    ///
    /// # Errors
    /// The stage's table refused it.
    pub fn register_region(&mut self, r: MemRegion) -> Result<u16, RegisterError> {
        self.dp.register_region(r)
    }

    /// Post a send work request (to the stage, as the host interface does).
    ///
    /// # Errors
    /// [`PostError`].
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), PostError> {
        self.dp.post_send(qpn, wr)
    }

    /// Post a receive work request (to the stage, as the host interface does).
    ///
    /// # Errors
    /// [`PostError`].
    pub fn post_recv(&mut self, qpn: u32, wr_id: u64) -> Result<(), PostError> {
        self.dp.post_recv(qpn, wr_id)
    }

    /// Received packets into the stage, verdicts out (see `Datapath::handle_packets`; a
    /// slice of [`RxVerdict`], or `DiscardVerdicts`): the stage's reports are pumped to the
    /// engine whenever its queue runs short, so every packet is taken (as many as `verdicts`
    /// holds). Host writes go to `host`.
    pub fn receive<V: VerdictSink + ?Sized>(
        &mut self,
        now_ns: u64,
        pkts: &[Packet],
        verdicts: &mut V,
        host: &mut impl FnMut(HostWrite),
    ) {
        let n = pkts.len().min(verdicts.capacity());
        let mut done = 0;
        while done < n {
            let p = pkts.get(done..n).unwrap_or_default();
            let k = self
                .dp
                .handle_packets(now_ns, p, &mut Offset(verdicts, done));
            done += k;
            // (short of event room: move the reports on; the engine always takes some after
            // its commands went out, so this ends)
            if done < n && !self.pump_short_of_room(now_ns, host) && k == 0 {
                return;
            }
        }
    }

    /// Packets to send (see `Datapath::poll_packets`), with the stage's reports pumped when
    /// its queue runs short. Returns how many were written to `out`.
    pub fn transmit(
        &mut self,
        now_ns: u64,
        out: &mut [Packet],
        host: &mut impl FnMut(HostWrite),
    ) -> usize {
        let mut n = 0;
        loop {
            let k = self.dp.poll_packets(now_ns, &mut out[n..]);
            n += k;
            if n >= out.len() || self.dp.events_pending() < crate::datapath::stage::EVENT_CAP / 2 {
                return n;
            }
            // (short of event room: move the reports on and go on)
            if !self.pump_short_of_room(now_ns, host) && k == 0 {
                return n;
            }
        }
    }

    /// [`Self::pump`] for a stage short of event room mid-way through its packets: out of
    /// line, so the common path sets nothing up for it.
    #[cold]
    #[inline(never)]
    fn pump_short_of_room(&mut self, now_ns: u64, host: &mut impl FnMut(HostWrite)) -> bool {
        self.pump(now_ns, host)
    }

    /// Both halves' timers due at `now_ns`. Returns whether any acted.
    #[inline]
    pub fn handle_timeout(&mut self, now_ns: u64) -> bool {
        let a = self.dp.handle_timeout(now_ns);
        let b = self.fw.handle_timeout(now_ns);
        a | b
    }

    /// The earlier of both halves' next deadlines.
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        match (self.dp.poll_timeout(), self.fw.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Move entries between the stage and the engine until both are quiet; host writes go to
    /// `host`. Returns whether anything moved.
    ///
    /// The stage's rings are read in place ([`Datapath::events`], [`Datapath::host_writes`]),
    /// moving only their consumer index; the firmware's commands are copied out, as a NIC
    /// core writes them to the FW->DP ring.
    pub fn pump(&mut self, now_ns: u64, host: &mut impl FnMut(HostWrite)) -> bool {
        // (nothing waits either way: nothing would move)
        if !self.fw.commands_pending() && !self.dp.has_events() && !self.dp.has_host_writes() {
            return false;
        }
        let mut any = false;
        loop {
            let mut moved = false;
            // Firmware -> stage first: it makes room in the firmware's command queue. (Each
            // side is asked only when it says something waits: an empty look moves nothing.)
            while self.fw.commands_pending() {
                let n = self.fw.poll_commands(&mut self.cmd_buf);
                if n == 0 {
                    break;
                }
                let mut done = 0;
                while done < n {
                    let rest = self.cmd_buf.get(done..n).unwrap_or_default();
                    done += self.dp.handle_commands(now_ns, rest);
                    // (the host-interface queue filled: drained, the rest goes on)
                    self.drain_host(host);
                }
                self.commands_moved += n as u64;
                moved |= n > 0;
            }
            // Stage -> engine.
            if self.dp.has_events() {
                let (a, b) = self.dp.events();
                let mut k = self.fw.handle_events(now_ns, a);
                if k == a.len() && !b.is_empty() {
                    k += self.fw.handle_events(now_ns, b);
                }
                self.dp.consume_events(k);
                self.events_moved += k as u64;
                moved |= k > 0;
            }
            self.drain_host(host);
            if !moved {
                return any;
            }
            any = true;
        }
    }

    /// The stage's host-interface writes to `host`; returns whether there were any.
    #[inline]
    fn drain_host(&mut self, host: &mut impl FnMut(HostWrite)) -> bool {
        // (most pumps find none: the look inline, the writes out of line)
        if !self.dp.has_host_writes() {
            return false;
        }
        self.drain_host_some(host);
        true
    }

    /// [`Self::drain_host`] when there are host writes.
    #[inline(never)]
    fn drain_host_some(&mut self, host: &mut impl FnMut(HostWrite)) {
        let (a, b) = self.dp.host_writes();
        // (the two runs one after the other: no chained iterator's state per entry)
        for e in a {
            host(Self::host_write(e));
        }
        for e in b {
            host(Self::host_write(e));
        }
        let n = a.len() + b.len();
        self.dp.consume_host_writes(n);
        self.host_writes += n as u64;
    }

    /// What a host-interface entry tells the host. The stage passes on only entries it
    /// decoded (checked) already, so the two kinds the host acts on are read as they are.
    #[inline]
    fn host_write(e: &CsrEntry) -> HostWrite {
        let k = e.kind_code();
        if k == CsrKind::Complete as u8 {
            if let Some(c) = Completion::from_complete(e.view::<Complete>()) {
                return HostWrite::Completion(c);
            }
        } else if k == CsrKind::EvEvent as u8 {
            let v = e.view::<EvEventEntry>();
            return HostWrite::EvEvent {
                qpn: v.qpn.get(),
                ev: v.ev.get(),
                reason: v.reason,
            };
        }
        HostWrite::Other(*e)
    }
}

/// The verdicts of `.0` from index `.1` on (what the packets after the first `.1` answer
/// into).
struct Offset<'a, V: ?Sized>(&'a mut V, usize);

impl<V: VerdictSink + ?Sized> VerdictSink for Offset<'_, V> {
    #[inline]
    fn capacity(&self) -> usize {
        self.0.capacity().saturating_sub(self.1)
    }

    #[inline]
    fn set(&mut self, i: usize, v: RxVerdict) {
        self.0.set(self.1 + i, v);
    }

    #[inline]
    fn set_placed_run(&mut self, i: usize, qpn: u32, slot: u16, offset: u64, pkts: &[Packet]) {
        self.0.set_placed_run(self.1 + i, qpn, slot, offset, pkts);
    }
}
