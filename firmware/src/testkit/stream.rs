//! A one-way bulk stream for cost measurement: NIC A writes a fixed number of data packets to
//! NIC B over a lossy [`Channel`] with virtual payloads (lengths only), keeping its send queue
//! full, until every packet is placed exactly once. Used by `examples/engine_cost.rs`.

use mrc_abi::wire::EvFormat;

use super::channel::{Channel, ChannelConfig, ChannelCounters, Trim};
use super::TkEngine;
use crate::datapath::ack_gen::TrimMark;
use crate::datapath::placement::{Access, MemRegion};
use crate::engine::cc::NsccParams;
use crate::engine::ev_state::EvConfig;
use crate::engine::packet::{LocalBuf, RxMeta, RxVerdict, SendWr};
use crate::engine::qp::{CcProfile, EvProfile, QpAttrs, QpState};
use crate::engine::{EngineConfig, EngineCounters};

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
    /// Transmit with `Engine::poll_transmit` + `Channel::send` (by value) instead of
    /// `Channel::send_batch_with` + `Engine::poll_transmit_batch` (in place), and receive through
    /// [`TxPacket::to_repr`] and `Engine::handle_packet` (the parsed-header path) instead of
    /// `Engine::handle_tx_packet`; both must give the same run.
    ///
    /// [`TxPacket::to_repr`]: crate::engine::TxPacket::to_repr
    pub via_repr: bool,
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
    pub sender: EngineCounters,
    pub receiver: EngineCounters,
    pub channel: ChannelCounters,
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

/// Run the stream. Stack use is a few hundred KiB (two engines and the channel).
pub fn run_stream(cfg: StreamConfig) -> StreamReport {
    if cfg.via_repr {
        run::<true>(cfg)
    } else {
        run::<false>(cfg)
    }
}

fn run<const VIA_REPR: bool>(cfg: StreamConfig) -> StreamReport {
    let mut rep = StreamReport::default();
    let ecfg = EngineConfig {
        mtu_payload: cfg.mtu_payload,
        ..EngineConfig::default()
    };
    let (Ok(mut a), Ok(mut b)) = (TkEngine::new(ecfg), TkEngine::new(ecfg)) else {
        rep.failed = true;
        return rep;
    };
    let (Ok(qa), Ok(qb)) = (a.create_qp(), b.create_qp()) else {
        rep.failed = true;
        return rep;
    };
    let (Some(aa), Some(ab)) = (attrs(&cfg, qb), attrs(&cfg, qa)) else {
        rep.failed = true;
        return rep;
    };
    let region = MemRegion {
        rkey: 0x200,
        base_va: REGION_VA,
        length: REGION_LEN,
        access: Access::REMOTE_WRITE,
    };
    if b.register_region(region).is_err() {
        rep.failed = true;
        return rep;
    }
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        if a.modify_qp(qa, s, &aa, 0).is_err() || b.modify_qp(qb, s, &ab, 0).is_err() {
            rep.failed = true;
            return rep;
        }
    }
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
    // The send queue was found full and no completion has freed a slot since: posting would
    // fail again (only a completion frees one), so it is not tried.
    let mut sq_full = false;
    // An engine changes only on an input (a packet, a due timer, a posted work request): after
    // a poll found nothing, polling again before the next input would find nothing too, so it
    // is not done (as a NIC's main loop polls its engine on a doorbell, a packet or a timer).
    // `tx_*`: an input since its transmit found nothing more to send; `ev_*`: an input or a
    // transmit since its events and completions were drained.
    let (mut tx_a, mut tx_b, mut ev_a, mut ev_b) = (true, true, true, true);
    loop {
        // Keep the send queue full.
        while posted < total_msgs && !sq_full {
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
            tx_a = true;
        }
        let mut progress = false;
        if VIA_REPR {
            if core::mem::take(&mut tx_a) {
                while let Some(p) = a.poll_transmit(now) {
                    ch.send(now, 1, p, &[]);
                    progress = true;
                    ev_a = true;
                }
            }
            if core::mem::take(&mut tx_b) {
                while let Some(p) = b.poll_transmit(now) {
                    ch.send(now, 0, p, &[]);
                    progress = true;
                    ev_b = true;
                }
            }
        } else {
            // Packets are built in place in the channel's free FIFO slots.
            if core::mem::take(&mut tx_a) && transmit(&mut ch, now, 1, &mut a) {
                progress = true;
                ev_a = true;
            }
            if core::mem::take(&mut tx_b) && transmit(&mut ch, now, 0, &mut b) {
                progress = true;
                ev_b = true;
            }
        }
        loop {
            // Runs of plain packets for one NIC, handed over at once (the short path).
            if !VIA_REPR {
                if let Some((to, pkts)) = ch.pop_due_run(now) {
                    progress = true;
                    if to == 1 {
                        rep.delivered_packets += b.handle_tx_batch(now, pkts) as u64;
                        (tx_b, ev_b) = (true, true);
                    } else {
                        let _ = a.handle_tx_batch(now, pkts);
                        (tx_a, ev_a) = (true, true);
                    }
                    continue;
                }
                if ch.is_simple() {
                    // (nothing is due: `pop_due_ref` would say `None` too)
                    break;
                }
            }
            let Some(f) = ch.pop_due_ref(now) else {
                break;
            };
            progress = true;
            // The descriptor as received: no header representation is built.
            let trim = match f.trim() {
                Trim::None => TrimMark::None,
                Trim::Trimmed => TrimMark::Trimmed,
                Trim::LastHop => TrimMark::TrimmedLastHop,
            };
            let meta = RxMeta {
                payload_len: f.pkt.payload_len(),
                ce: f.ce(),
            };
            let rx = |e: &mut TkEngine| {
                let mut repr = f.pkt.to_repr();
                repr.mrh.trimmed = trim != TrimMark::None;
                repr.mrh.trimmed_last_hop = trim == TrimMark::TrimmedLastHop;
                e.handle_packet(now, &repr, meta)
            };
            // (the descriptor path is called directly, not through a closure shared by both
            // NICs: that call's register saves cost ~25 instructions a packet)
            if f.to() == 1 {
                (tx_b, ev_b) = (true, true);
                let v = if VIA_REPR {
                    rx(&mut b)
                } else {
                    b.handle_tx_packet(now, f.pkt, trim, meta)
                };
                if let RxVerdict::Place { .. } = v {
                    rep.delivered_packets += 1;
                }
            } else if VIA_REPR {
                (tx_a, ev_a) = (true, true);
                let _ = rx(&mut a);
            } else {
                (tx_a, ev_a) = (true, true);
                let _ = a.handle_tx_packet(now, f.pkt, trim, meta);
            }
        }
        if core::mem::take(&mut ev_a) {
            drain_events(&mut a, &mut rep, &mut sq_full);
        }
        if core::mem::take(&mut ev_b) {
            drain_events(&mut b, &mut rep, &mut sq_full);
        }
        if rep.failed || rep.completions >= total_msgs {
            break;
        }
        // What a timer queued (an ACK, a probe, retransmissions) leaves now, as on a NIC, not
        // at the next unrelated event.
        if a.handle_timeout(now) {
            (tx_a, ev_a, progress) = (true, true, true);
        }
        if b.handle_timeout(now) {
            (tx_b, ev_b, progress) = (true, true, true);
        }
        if progress {
            continue;
        }
        let next = earliest(earliest(ch.next_due(), a.poll_timeout()), b.poll_timeout());
        match next {
            Some(t) => now = now.max(t),
            None => {
                rep.failed = true;
                break;
            }
        }
    }
    rep.messages = posted;
    rep.end_ns = now;
    rep.sender = a.counters();
    rep.receiver = b.counters();
    rep.channel = ch.counters();
    rep
}

/// The earlier of two instants (`None`: never).
#[inline]
fn earliest(x: Option<u64>, y: Option<u64>) -> Option<u64> {
    match (x, y) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Transmit from `e` to NIC `to` (1: B, 0: A): packets are built in place in the channel's free
/// FIFO slots, a run at a time, until the engine fills fewer slots than it was given. Returns
/// whether it sent anything.
#[inline(always)]
fn transmit(ch: &mut Channel<CAP, 0>, now: u64, to: u8, e: &mut TkEngine) -> bool {
    let mut sent = false;
    loop {
        let mut room = 0;
        let n = ch.send_batch_with(now, to, |slots| {
            room = slots.len();
            e.poll_transmit_batch(now, slots)
        });
        sent |= n > 0;
        if n < room {
            return sent;
        }
    }
}

/// Take `e`'s EV events and completions into `rep` (a completion frees a send-queue slot:
/// `sq_full` is cleared). Called once per NIC, not in a loop over both: measured 2M
/// instructions fewer in `engine_cost`.
#[inline(always)]
fn drain_events(e: &mut TkEngine, rep: &mut StreamReport, sq_full: &mut bool) {
    while e.poll_ev_event().is_some() {
        rep.ev_events += 1;
    }
    while let Some(c) = e.poll_completion() {
        rep.completions += 1;
        *sq_full = false;
        if c.status.is_err() {
            rep.failed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place / descriptor paths and the by-value / parsed-header paths give the same
    /// run, packet for packet (every counter of both engines and the channel).
    #[test]
    fn descriptor_and_repr_paths_agree() {
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

    /// The engine's fast paths (next new packet, common write) give the same run as the
    /// general paths alone, on both the descriptor and the parsed-header paths.
    #[test]
    fn fast_paths_match_the_general_paths() {
        for (seed, via_repr) in [(3, false), (4, true)] {
            let cfg = StreamConfig {
                seed,
                packets: 20_000,
                loss_ppm: 20_000,
                via_repr,
                ..StreamConfig::default()
            };
            let fast = run_stream(cfg);
            crate::engine::fast_paths::set_off(true);
            let general = run_stream(cfg);
            crate::engine::fast_paths::set_off(false);
            assert!(!fast.failed);
            assert_eq!(fast.delivered_packets, 20_000);
            assert_eq!(fast, general);
        }
    }
}
