//! A one-way bulk stream for cost measurement: NIC A writes a fixed number of data packets to
//! NIC B over a lossy [`Channel`] with virtual payloads (lengths only), keeping its send queue
//! full, until every packet is placed exactly once. Used by `examples/engine_cost.rs` (x86
//! instructions per delivered packet, datapath + firmware + channel) and by the NIC image's
//! firmware cost measurement.

use mrc_abi::wire::EvFormat;

use super::channel::{Channel, ChannelConfig, ChannelCounters};
use super::nic::{Firmware, HostWrite, Nic};
use super::TestKit;
use crate::datapath::ack_gen::AckGenConfig;
use crate::datapath::packet::{DiscardVerdicts, LocalBuf, Packet, SendWr};
use crate::datapath::placement::{Access, MemRegion};
use crate::datapath::stage::{DatapathConfig, DatapathCounters, QpView};
use crate::engine::cc::NsccParams;
use crate::engine::ev_state::EvConfig;
use crate::engine::qp::{CcProfile, EvProfile, QpAttrs, QpState};
use crate::engine::{Engine, EngineConfig, EngineCounters, FwQpView};

const CAP: usize = 2048;
const REGION_VA: u64 = 0x40_0000_0000;
const REGION_LEN: u64 = 1 << 30;

/// Stream setup.
#[derive(Clone, Copy, Debug)]
pub struct StreamConfig {
    pub seed: u64,
    /// Data packets to deliver.
    pub packets: u64,
    /// Packets per message.
    pub msg_packets: u32,
    pub mtu_payload: u32,
    pub loss_ppm: u32,
    pub evs: u16,
    pub planes: u8,
    pub latency_ns: u64,
    /// Every packet crosses the wire codec's representation on its way ([`Packet::to_repr`]
    /// then [`Packet::from_repr`]): the run must be the same as without.
    pub via_repr: bool,
    /// The stages' fast paths (`Datapath::set_fast_paths`): the run must be the same
    /// without.
    pub fast_paths: bool,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            seed: 1,
            packets: 1_000_000,
            msg_packets: 16,
            mtu_payload: 4096,
            loss_ppm: 10_000,
            evs: 256,
            planes: 4,
            latency_ns: 2_000,
            via_repr: false,
            fast_paths: true,
        }
    }
}

/// What happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamReport {
    /// Data packets placed at B (each PSN once).
    pub delivered_packets: u64,
    pub messages: u64,
    pub completions: u64,
    pub ev_events: u64,
    pub end_ns: u64,
    pub sender: DatapathCounters,
    pub receiver: DatapathCounters,
    pub sender_fw: EngineCounters,
    pub receiver_fw: EngineCounters,
    /// CSR entries between the stages and the engines (both NICs): DP->FW, FW->DP.
    pub events: u64,
    pub commands: u64,
    pub channel: ChannelCounters,
    /// The QP of each side as its stage and its engine see it at the end.
    pub sender_qp: Option<QpView>,
    pub receiver_qp: Option<QpView>,
    pub sender_fw_qp: Option<FwQpView>,
    pub receiver_fw_qp: Option<FwQpView>,
    /// Something went wrong (a completion error, a stall): the run stopped early.
    pub failed: bool,
}

fn attrs(cfg: &StreamConfig, dest: u32) -> Option<QpAttrs> {
    let nscc =
        NsccParams::for_link(400_000_000_000, 2 * cfg.latency_ns + 1_000, cfg.mtu_payload).ok()?;
    let mut table = EvConfig::new(cfg.evs, cfg.planes);
    table.probe_base_ns = 20_000;
    let ev = EvProfile {
        table,
        format: EvFormat::Udp,
        value_base: 0xC000,
    };
    Some(QpAttrs::connect(ev, CcProfile::Nscc(nscc), dest).retry(25, 6))
}

/// The two NICs of a stream (A sends, B has the region), unconnected.
fn nics<F: Firmware<TestKit>>(
    cfg: &StreamConfig,
    firmware: &mut impl FnMut() -> Option<F>,
) -> Option<[Nic<TestKit, F>; 2]> {
    let dcfg = DatapathConfig {
        mtu_payload: cfg.mtu_payload,
        ack: AckGenConfig::DEFAULT,
        ..DatapathConfig::DEFAULT
    };
    Some([
        Nic::with_firmware(dcfg, firmware()?),
        Nic::with_firmware(dcfg, firmware()?),
    ])
}

/// Connect the stream's NICs: a QP each, B's region; returns the QPs.
fn connect<F: Firmware<TestKit>>(
    cfg: &StreamConfig,
    a: &mut Nic<TestKit, F>,
    b: &mut Nic<TestKit, F>,
) -> Option<(u32, u32)> {
    let (qa, qb) = (a.create_qp().ok()?, b.create_qp().ok()?);
    let (aa, ab) = (attrs(cfg, qb)?, attrs(cfg, qa)?);
    b.register_region(MemRegion {
        rkey: 0x200,
        base_va: REGION_VA,
        length: REGION_LEN,
        access: Access::REMOTE_WRITE,
    })
    .ok()?;
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        a.modify_qp(qa, s, &aa, 0).ok()?;
        b.modify_qp(qb, s, &ab, 0).ok()?;
    }
    // The stages' QP contexts follow before anything is posted.
    a.pump(0, &mut |_| {});
    b.pump(0, &mut |_| {});
    Some((qa, qb))
}

/// Run the stream with the engine as each NIC's firmware. Stack use is a few hundred KiB (two
/// NICs and the channel).
pub fn run_stream(cfg: StreamConfig) -> StreamReport {
    run_stream_with(cfg, || Engine::new(EngineConfig::default()).ok())
}

/// Run the stream with each NIC's firmware made by `firmware` (called once per NIC, for A
/// then B; `None` fails the run), e.g. a NIC main loop around the engine.
pub fn run_stream_with<F: Firmware<TestKit>>(
    cfg: StreamConfig,
    mut firmware: impl FnMut() -> Option<F>,
) -> StreamReport {
    let mut rep = StreamReport::default();
    // (connected where they live: a NIC is some 50 KB)
    let Some([mut a, mut b]) = nics(&cfg, &mut firmware) else {
        rep.failed = true;
        return rep;
    };
    let Some((qa, qb)) = connect(&cfg, &mut a, &mut b) else {
        rep.failed = true;
        return rep;
    };
    a.dp.set_fast_paths(cfg.fast_paths);
    b.dp.set_fast_paths(cfg.fast_paths);
    let ch_cfg = ChannelConfig {
        latency_ns: cfg.latency_ns,
        loss_ppm: cfg.loss_ppm,
        ..ChannelConfig::default()
    };
    let mut ch: Channel<CAP, 0> = Channel::new(ch_cfg, cfg.seed);
    let msg_len = cfg.msg_packets.saturating_mul(cfg.mtu_payload);
    let total_msgs = cfg.packets.div_ceil(u64::from(cfg.msg_packets.max(1)));
    let last_len = {
        let rem = cfg.packets % u64::from(cfg.msg_packets.max(1));
        if rem == 0 {
            msg_len
        } else {
            rem as u32 * cfg.mtu_payload
        }
    };
    let mut now = 0u64;
    let mut posted = 0u64;
    // The send queue was found full and no completion has freed a slot since.
    let mut sq_full = false;
    let mut t = Tally::default();
    let mut seen_completions = 0;
    // A NIC changes only on an input (a posted work request, a received packet, a timer that
    // acted, entries moved between its stage and engine): after a transmit found nothing
    // more, another before the next input would find nothing either, so it is not tried (as
    // a NIC's main loop polls on a doorbell, a packet or a timer). `tx_a`, `tx_b`: an input
    // since the NIC's last transmit, or that transmit stopped on a full channel.
    let (mut tx_a, mut tx_b) = (true, true);
    // `in_a`, `in_b`: an input or a transmit since the NIC's last pump (a pump leaves both
    // sides quiet, so another before the next input would move nothing).
    let (mut in_a, mut in_b) = (true, true);
    loop {
        if t.completions != seen_completions {
            seen_completions = t.completions;
            sq_full = false;
        }
        // Keep the send queue full (as many as it has room for, as a host driver knows its
        // queue's room: no post to be refused).
        let mut room = if sq_full || posted >= total_msgs {
            0
        } else {
            a.dp.send_queue_room(qa)
        };
        sq_full |= room == 0;
        while posted < total_msgs && room > 0 {
            let len = if posted + 1 == total_msgs {
                last_len
            } else {
                msg_len
            };
            let wr = SendWr {
                wr_id: posted,
                local: LocalBuf::default(),
                remote_va: REGION_VA + (posted % 256) * u64::from(msg_len),
                rkey: 0x200,
                len,
                imm: None,
                signaled: true,
            };
            if a.post_send(qa, wr).is_err() {
                sq_full = true;
                break;
            }
            posted += 1;
            room -= 1;
            sq_full |= room == 0;
            (tx_a, in_a) = (true, true);
        }
        let mut progress = false;
        if core::mem::take(&mut in_a) {
            let (moved, cmds) = pump(&mut a, now, &mut |w| t.on(w));
            progress |= moved;
            tx_a |= cmds;
        }
        if core::mem::take(&mut in_b) {
            let (moved, cmds) = pump(&mut b, now, &mut |w| t.on(w));
            progress |= moved;
            tx_b |= cmds;
        }
        // Packets are built in place in the channel's free FIFO slots.
        if core::mem::take(&mut tx_a) {
            let (sent, more) = transmit(&mut ch, now, 1, &mut a, &mut |w| t.on(w));
            (progress, tx_a, in_a) = (progress | sent, more, true);
        }
        if core::mem::take(&mut tx_b) {
            let (sent, more) = transmit(&mut ch, now, 0, &mut b, &mut |w| t.on(w));
            (progress, tx_b, in_b) = (progress | sent, more, true);
        }
        loop {
            if !cfg.via_repr {
                if let Some((to, pkts)) = ch.pop_due_run(now) {
                    progress = true;
                    // (virtual payloads: nothing to place; the stage counts its placements.
                    // Each NIC's call on its own branch: no NIC chosen at run time.)
                    if to == 1 {
                        (tx_b, in_b) = (true, true);
                        b.receive(now, pkts, &mut DiscardVerdicts, &mut |w| t.on(w));
                    } else {
                        (tx_a, in_a) = (true, true);
                        a.receive(now, pkts, &mut DiscardVerdicts, &mut |w| t.on(w));
                    }
                    continue;
                }
                if ch.is_simple() {
                    break;
                }
            }
            // (one packet at a time: out of line, off the cost stream's path)
            let Some(to) = receive_one(&mut ch, now, cfg.via_repr, [&mut a, &mut b], &mut t) else {
                break;
            };
            progress = true;
            if to == 1 {
                (tx_b, in_b) = (true, true);
            } else {
                (tx_a, in_a) = (true, true);
            }
        }
        if core::mem::take(&mut in_a) {
            let (moved, cmds) = pump(&mut a, now, &mut |w| t.on(w));
            progress |= moved;
            tx_a |= cmds;
        }
        if core::mem::take(&mut in_b) {
            let (moved, cmds) = pump(&mut b, now, &mut |w| t.on(w));
            progress |= moved;
            tx_b |= cmds;
        }
        if t.failed || t.completions >= total_msgs {
            break;
        }
        if a.handle_timeout(now) {
            (progress, tx_a, in_a) = (true, true, true);
        }
        if b.handle_timeout(now) {
            (progress, tx_b, in_b) = (true, true, true);
        }
        // (another pass at `now` only when it has something to do: a NIC with an input since
        // its last pump or transmit, a completion that may let a post in, a packet due)
        if progress
            && (tx_a
                || tx_b
                || in_a
                || in_b
                || t.completions != seen_completions
                || ch.next_due().is_some_and(|d| d <= now))
        {
            continue;
        }
        let next = earliest(earliest(ch.next_due(), a.poll_timeout()), b.poll_timeout());
        match next {
            Some(t) if t > now => now = t,
            // (a deadline not after now that did nothing: a stale early deadline of the
            // stage's coalescing timer, recomputed by the timeout call above)
            Some(_) if a.poll_timeout() != b.poll_timeout() || ch.next_due().is_some() => {
                now += 1;
            }
            _ => {
                t.failed = true;
                break;
            }
        }
    }
    rep.completions = t.completions;
    rep.ev_events = t.ev_events;
    rep.failed = t.failed;
    rep.messages = posted;
    rep.end_ns = now;
    rep.sender = a.dp.counters();
    rep.receiver = b.dp.counters();
    // Every write B placed (each PSN once: duplicates and refusals are dropped, never placed).
    rep.delivered_packets = rep.receiver.placed;
    rep.sender_fw = a.fw.engine().counters();
    rep.receiver_fw = b.fw.engine().counters();
    rep.events = a.events_moved + b.events_moved;
    rep.commands = a.commands_moved + b.commands_moved;
    rep.channel = ch.counters();
    rep.sender_qp = a.dp.qp(qa);
    rep.receiver_qp = b.dp.qp(qb);
    rep.sender_fw_qp = a.fw.engine().qp(qa);
    rep.receiver_fw_qp = b.fw.engine().qp(qb);
    rep
}

/// What the hosts heard.
#[derive(Default)]
struct Tally {
    completions: u64,
    ev_events: u64,
    failed: bool,
}

impl Tally {
    fn on(&mut self, w: HostWrite) {
        match w {
            HostWrite::Completion(c) => {
                self.completions += 1;
                if c.status.is_err() {
                    self.failed = true;
                }
            }
            HostWrite::EvEvent { .. } => self.ev_events += 1,
            HostWrite::Other(_) => {}
        }
    }
}

/// The next packet due at `now` to its NIC (`nics`: A, B), through the wire representation
/// when `via_repr`. Returns the NIC it went to (0: A, 1: B); `None` when none is due.
#[inline(never)]
fn receive_one<F: Firmware<TestKit>>(
    ch: &mut Channel<CAP, 0>,
    now: u64,
    via_repr: bool,
    nics: [&mut Nic<TestKit, F>; 2],
    t: &mut Tally,
) -> Option<u8> {
    let f = ch.pop_due_ref(now)?;
    let pkt = if via_repr {
        Packet::from_repr(&f.pkt.to_repr(), f.pkt.payload_len, f.pkt.ce)
    } else {
        *f.pkt
    };
    let to = f.to();
    let [a, b] = nics;
    let nic = if to == 1 { b } else { a };
    nic.receive(
        now,
        core::slice::from_ref(&pkt),
        &mut DiscardVerdicts,
        &mut |w| t.on(w),
    );
    Some(to)
}

/// The earlier of two instants (`None`: never).
#[inline]
fn earliest(x: Option<u64>, y: Option<u64>) -> Option<u64> {
    match (x, y) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Pump `nic` (see [`Nic::pump`]): whether anything moved, and whether the engine's commands
/// reached the stage (the one way a pump lets the stage send what it could not before: the
/// events it moves change only the engine, the host writes only the host).
#[inline]
fn pump<F: Firmware<TestKit>>(
    nic: &mut Nic<TestKit, F>,
    now: u64,
    host: &mut impl FnMut(HostWrite),
) -> (bool, bool) {
    let before = nic.commands_moved;
    let moved = nic.pump(now, host);
    (moved, nic.commands_moved != before)
}

/// Transmit from `nic` to NIC `to` (1: B, 0: A): packets are built in place in the channel's
/// free FIFO slots, a batch at a time, until the NIC fills fewer slots than it was given.
/// Returns whether it sent anything, and whether it stopped on a full channel (more may
/// wait).
fn transmit<F: Firmware<TestKit>>(
    ch: &mut Channel<CAP, 0>,
    now: u64,
    to: u8,
    nic: &mut Nic<TestKit, F>,
    host: &mut impl FnMut(HostWrite),
) -> (bool, bool) {
    let mut sent = false;
    loop {
        let mut room = 0;
        let n = ch.send_batch_with(now, to, |slots| {
            room = slots.len();
            nic.transmit(now, slots, host)
        });
        sent |= n > 0;
        if room == 0 {
            return (sent, true);
        }
        if n < room {
            return (sent, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptor path and the wire representation path give the same run, packet for
    /// packet (every counter of both NICs and the channel).
    extern crate std;

    #[test]
    fn descriptor_and_repr_paths_agree() {
        std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(paths_agree)
            .unwrap()
            .join()
            .unwrap();
    }

    fn paths_agree() {
        for seed in [1, 2] {
            let cfg = StreamConfig {
                seed,
                packets: 20_000,
                loss_ppm: 20_000,
                ..StreamConfig::default()
            };
            let direct = run_stream(cfg);
            let parsed = run_stream(StreamConfig {
                via_repr: true,
                ..cfg
            });
            assert!(!direct.failed);
            assert_eq!(direct.delivered_packets, 20_000);
            assert_eq!(direct, parsed);
        }
    }

    /// The stages' fast paths (transmit and receive runs) give the same run as the general
    /// paths alone, packet for packet: every counter of both NICs, their QPs and the channel,
    /// on the descriptor and the wire representation paths, with loss heavy enough to
    /// stall the windows and retire EVs.
    #[test]
    fn fast_paths_match_the_general_paths() {
        std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(fast_and_general_agree)
            .unwrap()
            .join()
            .unwrap();
    }

    fn fast_and_general_agree() {
        for (seed, loss_ppm, via_repr) in [(3, 20_000, false), (4, 50_000, true), (5, 1_000, false)]
        {
            let cfg = StreamConfig {
                seed,
                packets: 20_000,
                loss_ppm,
                via_repr,
                ..StreamConfig::default()
            };
            let fast = run_stream(cfg);
            let general = run_stream(StreamConfig {
                fast_paths: false,
                ..cfg
            });
            assert!(!fast.failed);
            assert_eq!(fast.delivered_packets, 20_000);
            assert!(fast.sender_qp.is_some() && fast.receiver_fw_qp.is_some());
            assert_eq!(fast, general);
        }
    }
}
