//! The firmware's cost on the core: the test kit's one-way stream (`mrc_firmware::testkit::
//! stream`: 16-packet messages over 256 EVs on 4 planes, 1 % loss) with the image's main loop
//! as each NIC's firmware, the datapath models standing in for the hardware.
//!
//! `minstret` is read around every call into the firmware (the loop's event intake, its
//! command output, its timers and timer polls) and summed; everything else (the datapath
//! models, the channel, the stream's driver) is not the firmware's. Under `qemu -icount
//! shift=0` `minstret` counts every retired instruction exactly, so the figures are
//! deterministic; the cost of reading it is measured once and taken off every reading.
//!
//! Two runs of the same stream: the first hands each batch of events over as the loop gets
//! them (the per-packet figure), the second one event at a time (what each kind of event
//! costs; per-call overhead included, so these are upper bounds). [`json`] writes both as
//! one JSON object (`just fw-cost`).

use core::cell::RefCell;
use core::fmt::Write;

use mrc_abi::device::csr::{CsrEntry, CsrKind};
use mrc_firmware::engine::Engine;
use mrc_firmware::testkit::nic::Firmware;
use mrc_firmware::testkit::stream::{run_stream_with, StreamConfig, StreamReport};
use mrc_firmware::testkit::TestKit;
use mrc_nicloop::{LoopConfig, NicLoop};

use crate::hal;

/// Data packets of the stream.
pub const PACKETS: u64 = 50_000;
/// The budget: guest instructions of firmware (both NICs) per delivered data packet.
pub const BUDGET_PER_PACKET: u64 = 120;

/// Instructions and calls of one kind of work.
#[derive(Clone, Copy, Default)]
pub struct Cost {
    pub calls: u64,
    pub items: u64,
    pub instructions: u64,
}

impl Cost {
    fn add(&mut self, items: u64, instructions: u64) {
        self.calls += 1;
        self.items += items;
        self.instructions += instructions;
    }

    /// Instructions per item (0 when none).
    pub fn per_item(&self) -> u64 {
        self.instructions / self.items.max(1)
    }

    /// Instructions per call (0 when none).
    pub fn per_call(&self) -> u64 {
        self.instructions / self.calls.max(1)
    }
}

/// DP->FW kind codes are `1..=MAX_EVENT_KIND`.
const MAX_EVENT_KIND: usize = 0x0D;

/// One NIC's firmware cost.
#[derive(Clone, Copy, Default)]
pub struct Tally {
    /// Event intake (items: entries taken).
    pub events: Cost,
    /// Event intake by DP->FW kind code (one-at-a-time runs only).
    pub by_kind: [Cost; MAX_EVENT_KIND + 1],
    /// Command output (items: entries written), and the polls that found none.
    pub commands: Cost,
    pub commands_none: Cost,
    /// Timer runs that acted, and those that found nothing to do.
    pub timers: Cost,
    pub timers_idle: Cost,
    /// Timer polls and pending-command checks.
    pub polls: Cost,
}

impl Tally {
    /// Every instruction of the firmware.
    pub fn total(&self) -> u64 {
        self.events.instructions
            + self.commands.instructions
            + self.commands_none.instructions
            + self.timers.instructions
            + self.timers_idle.instructions
            + self.polls.instructions
    }
}

/// The cost of one `minstret` reading pair (taken off every measured span).
fn overhead() -> u64 {
    (0..4)
        .map(|_| {
            let a = hal::instret();
            hal::instret() - a
        })
        .min()
        .unwrap_or(0)
}

/// The main loop with `minstret` read around every call.
struct Metered<'a> {
    lp: NicLoop<TestKit>,
    tally: &'a RefCell<Tally>,
    one_by_one: bool,
    overhead: u64,
}

impl Metered<'_> {
    fn since(&self, start: u64) -> u64 {
        (hal::instret() - start).saturating_sub(self.overhead)
    }
}

impl Firmware<TestKit> for Metered<'_> {
    fn engine(&self) -> &Engine<TestKit> {
        self.lp.engine()
    }
    fn engine_mut(&mut self) -> &mut Engine<TestKit> {
        self.lp.engine_mut()
    }
    fn handle_events(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize {
        if !self.one_by_one {
            let start = hal::instret();
            let k = self.lp.handle_events(now_ns, events);
            let t = self.since(start);
            self.tally.borrow_mut().events.add(k as u64, t);
            return k;
        }
        for (i, e) in events.iter().enumerate() {
            let start = hal::instret();
            let k = self.lp.handle_events(now_ns, core::slice::from_ref(e));
            let t = self.since(start);
            let mut tally = self.tally.borrow_mut();
            tally.events.add(k as u64, t);
            if let Some(c) = tally.by_kind.get_mut(usize::from(e.kind_code())) {
                c.add(k as u64, t);
            }
            if k == 0 {
                return i;
            }
        }
        events.len()
    }
    fn poll_commands(&mut self, out: &mut [CsrEntry]) -> usize {
        let start = hal::instret();
        let n = self.lp.poll_commands(out);
        let t = self.since(start);
        let mut tally = self.tally.borrow_mut();
        if n == 0 {
            tally.commands_none.add(0, t);
        } else {
            tally.commands.add(n as u64, t);
        }
        n
    }
    fn commands_pending(&self) -> bool {
        let start = hal::instret();
        let pending = self.lp.commands_pending();
        let t = self.since(start);
        self.tally.borrow_mut().polls.add(1, t);
        pending
    }
    fn handle_timeout(&mut self, now_ns: u64) -> bool {
        let start = hal::instret();
        let acted = self.lp.handle_timeout(now_ns);
        let t = self.since(start);
        let mut tally = self.tally.borrow_mut();
        if acted {
            tally.timers.add(1, t);
        } else {
            tally.timers_idle.add(1, t);
        }
        acted
    }
    fn poll_timeout(&self) -> Option<u64> {
        let start = hal::instret();
        let d = self.lp.poll_timeout();
        let t = self.since(start);
        self.tally.borrow_mut().polls.add(1, t);
        d
    }
}

/// One run's result: the stream's report, each NIC's firmware tally (sender, receiver), all
/// guest instructions of the run.
pub struct Run {
    pub report: StreamReport,
    pub nics: [Tally; 2],
    pub instructions: u64,
}

impl Run {
    /// Firmware instructions of both NICs per delivered packet.
    pub fn per_packet(&self) -> u64 {
        (self.nics[0].total() + self.nics[1].total()) / self.report.delivered_packets.max(1)
    }
}

/// The stream with the metered main loop as each NIC's firmware.
pub fn run(one_by_one: bool) -> Run {
    let cfg = StreamConfig {
        packets: PACKETS,
        ..StreamConfig::default()
    };
    let tallies = [
        RefCell::new(Tally::default()),
        RefCell::new(Tally::default()),
    ];
    let overhead = overhead();
    let mut made = 0;
    crate::hal::watchdog_start(crate::twonic::LONG_RUN_WATCHDOG_NS);
    let start = hal::instret();
    let report = run_stream_with(cfg, || {
        let tally = tallies.get(made)?;
        made += 1;
        let lp = NicLoop::new(LoopConfig {
            mtu_payload: cfg.mtu_payload,
            ..LoopConfig::DEFAULT
        })
        .ok()?;
        Some(Metered {
            lp,
            tally,
            one_by_one,
            overhead,
        })
    });
    let instructions = hal::instret() - start;
    crate::hal::watchdog_start(crate::WATCHDOG_NS);
    Run {
        report,
        nics: [tallies[0].take(), tallies[1].take()],
        instructions,
    }
}

/// A fixed buffer for one line of JSON.
struct Line {
    buf: [u8; 4096],
    len: usize,
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let b = s.as_bytes();
        let dst = self
            .buf
            .get_mut(self.len..self.len + b.len())
            .ok_or(core::fmt::Error)?;
        dst.copy_from_slice(b);
        self.len += b.len();
        Ok(())
    }
}

fn cost(w: &mut Line, name: &str, c: &Cost, unit: &str) -> core::fmt::Result {
    write!(
        w,
        "\"{name}\":{{\"count\":{},\"instructions_per_{unit}\":{}}}",
        c.items,
        c.per_item()
    )
}

/// Both runs as one JSON object (see the module docs), on one line.
fn write_json(w: &mut Line, batched: &Run, single: &Run) -> core::fmt::Result {
    let r = &batched.report;
    let fw = batched.nics[0].total() + batched.nics[1].total();
    let delivered = r.delivered_packets.max(1);
    write!(
        w,
        "{{\"workload\":\"one-way stream: {} data packets, 16 per message, 256 EVs over 4 planes, 1% loss, seed 1\",",
        PACKETS
    )?;
    write!(
        w,
        "\"delivered_packets\":{},\"failed\":{},\"guest_instructions_per_delivered_packet\":{},\"budget_per_packet\":{},",
        r.delivered_packets,
        r.failed,
        fw / delivered,
        BUDGET_PER_PACKET
    )?;
    write!(
        w,
        "\"sender_per_packet\":{},\"receiver_per_packet\":{},\"firmware_instructions\":{},\"run_instructions\":{},\"datapath_models_channel_and_driver_per_packet\":{},",
        batched.nics[0].total() / delivered,
        batched.nics[1].total() / delivered,
        fw,
        batched.instructions,
        batched.instructions.saturating_sub(fw) / delivered
    )?;
    write!(
        w,
        "\"dp_to_fw_entries\":{},\"fw_to_dp_entries\":{},\"retransmits\":{},\"channel_lost\":{},",
        r.events, r.commands, r.sender.retransmits_sent, r.channel.lost
    )?;
    // Per event kind, from the one-at-a-time run (both NICs).
    let kinds: [(&str, CsrKind); 8] = [
        ("ack_summary", CsrKind::AckSummary),
        ("loss", CsrKind::Loss),
        ("nack", CsrKind::Nack),
        ("probe_reply", CsrKind::ProbeReply),
        ("tx_start", CsrKind::TxStart),
        ("ev_deliveries", CsrKind::EvDeliveries),
        ("skip_served", CsrKind::SkipServed),
        ("wimm_placed", CsrKind::WimmPlaced),
    ];
    w.write_str("\"events\":{")?;
    for (i, (name, k)) in kinds.iter().enumerate() {
        let mut c = Cost::default();
        for n in &single.nics {
            let x = n.by_kind.get(*k as usize).copied().unwrap_or_default();
            c.calls += x.calls;
            c.items += x.items;
            c.instructions += x.instructions;
        }
        if i > 0 {
            w.write_str(",")?;
        }
        cost(w, name, &c, "event")?;
    }
    w.write_str("},")?;
    let both = |f: fn(&Tally) -> Cost| {
        let (a, b) = (f(&batched.nics[0]), f(&batched.nics[1]));
        Cost {
            calls: a.calls + b.calls,
            items: a.items + b.items,
            instructions: a.instructions + b.instructions,
        }
    };
    let (timers, idle, commands, none, polls) = (
        both(|t| t.timers),
        both(|t| t.timers_idle),
        both(|t| t.commands),
        both(|t| t.commands_none),
        both(|t| t.polls),
    );
    write!(
        w,
        "\"timer\":{{\"fired\":{},\"instructions_per_timer\":{},\"idle_calls\":{},\"instructions_per_idle_call\":{}}},",
        timers.calls,
        timers.per_call(),
        idle.calls,
        idle.per_call()
    )?;
    write!(
        w,
        "\"commands\":{{\"count\":{},\"instructions_per_command\":{},\"polls\":{},\"empty_polls\":{},\"instructions_per_empty_poll\":{}}},",
        commands.items,
        commands.per_item(),
        commands.calls,
        none.calls,
        none.per_call()
    )?;
    write!(
        w,
        "\"polls_timer_and_pending\":{{\"count\":{},\"instructions_per_poll\":{}}}}}",
        polls.calls,
        polls.per_call()
    )
}

/// Run both streams; the JSON goes to semihosting stderr (one line). Returns the batched
/// run's firmware instructions per delivered packet, or `None` when a run failed.
pub fn json() -> Option<u64> {
    let batched = run(false);
    let single = run(true);
    let ok = |r: &Run| !r.report.failed && r.report.delivered_packets == PACKETS;
    let mut line = Line {
        buf: [0; 4096],
        len: 0,
    };
    if write_json(&mut line, &batched, &single).is_err() {
        defmt::error!("fw-cost: the JSON line does not fit its buffer");
        return None;
    }
    let text = core::str::from_utf8(line.buf.get(..line.len).unwrap_or_default()).unwrap_or("");
    semihosting::eprintln!("{}", text);
    (ok(&batched) && ok(&single)).then(|| batched.per_packet())
}
