//! [`RtlBlocks`] with the Verilated models: each block's transactions clock by clock.

use mrc_abi::device::csr::{CsrEntry, CsrQueueRegs};
use mrc_abi::wire::Frame;
use mrc_firmware::datapath::blocks::{Blocks, RxTrackerCmd, RxTrackerRsp, SprayerCmd, SprayerRsp};
use mrc_firmware::datapath::packet::{Packet, PacketBody};
use mrc_firmware::datapath::SprayerError;

use super::{BlockStats, RtlBlocks, QUEUE_256, SPRAYER_P8, TRACKER_W8};
use crate::{hdr, queue, rx, sprayer, Block, Rtl};

/// Clocks a transaction may take before the block counts as not answering: a block whose
/// response port is ready takes a command in every clock and answers in the next; a header
/// of at most 4 beats leaves after 5.
const CLOCKS_MAX: u64 = 8;

/// QP `qp`'s instance in `v`, made fresh (reset) when there is none.
fn instance<'a>(
    v: &'a mut Vec<Option<Rtl>>,
    qp: u32,
    id: i32,
    bug: bool,
    stats: &mut BlockStats,
) -> &'a mut Rtl {
    let i = qp as usize;
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i].get_or_insert_with(|| {
        stats.instances += 1;
        Rtl::with_id(id, bug, None)
    })
}

/// One command through a one-clock block: offered with the response port ready (so the
/// block, `cmd_ready = !rsp_valid || rsp_ready`, takes it at the edge); the response is the
/// registered one after that edge. `rsp_valid` of the outputs as `decode` reads them.
fn transact<R>(
    rtl: &mut Rtl,
    input: &crate::Words,
    decode: impl Fn(crate::Out) -> (bool, bool, R),
    stats: &mut BlockStats,
) -> Option<R> {
    let mut clocks = 0;
    let mut rsp = None;
    while clocks < CLOCKS_MAX && rsp.is_none() {
        // (`rsp_ready` high at the edge takes any earlier response, so a valid response
        // after the edge is this command's)
        let (_, rsp_valid, r) = decode(rtl.step_after(input));
        clocks += 1;
        if rsp_valid {
            rsp = Some(r);
        }
    }
    stats.cycles += clocks;
    stats.transactions += 1;
    rsp
}

impl RtlBlocks {
    /// Counts a difference of `block`; `what` describes the first of the run.
    fn note_difference(&mut self, block: Block, what: impl FnOnce() -> String) {
        let s = match block {
            Block::Sprayer => &mut self.stats.sprayer,
            Block::RxTracker => &mut self.stats.rx_tracker,
            Block::HdrBuilder => &mut self.stats.hdr_builder,
            Block::CsrQueue => &mut self.stats.event_queue,
        };
        s.differ += 1;
        if self.stats.first_difference.is_none() {
            self.stats.first_difference = Some(what());
        }
    }

    fn bug(&self, block: Block) -> bool {
        self.bug == Some(block)
    }

    /// The header builder, made on first use.
    fn hdr_rtl(&mut self) -> &mut Rtl {
        let bug = self.bug(Block::HdrBuilder);
        let made = &mut self.stats.hdr_builder.instances;
        self.hdr.get_or_insert_with(|| {
            *made += 1;
            Rtl::new(Block::HdrBuilder, bug, None)
        })
    }

    /// The event queue, made on first use.
    fn queue_rtl(&mut self) -> &mut Rtl {
        let bug = self.bug(Block::CsrQueue);
        let made = &mut self.stats.event_queue.instances;
        self.queue.get_or_insert_with(|| {
            *made += 1;
            Rtl::with_id(QUEUE_256, bug, None)
        })
    }

    /// The header bytes the builder makes of `d`, with its `m_hdr_len`: the descriptor
    /// offered until taken, the output always ready, the beats up to `m_last`. `None` when
    /// no last beat came.
    fn build_header(&mut self, d: &hdr::Desc) -> Option<(Vec<u8>, usize)> {
        let offer = hdr::encode(d, true, true);
        let idle = hdr::encode(d, false, true);
        let rtl = self.hdr_rtl();
        let mut taken = false;
        let mut bytes = Vec::with_capacity(256);
        let mut clocks = 0;
        let mut done = None;
        while clocks < CLOCKS_MAX && done.is_none() {
            let beat = hdr::Beat::read(&mut rtl.step(if taken { &idle } else { &offer }));
            clocks += 1;
            if beat.m_valid && taken {
                beat.keep_into(&mut bytes);
                if beat.last {
                    done = Some(beat.hdr_len);
                }
            }
            taken |= beat.d_ready;
        }
        let s = &mut self.stats.hdr_builder;
        s.cycles += clocks;
        s.transactions += 1;
        done.map(|len| (bytes, len))
    }
}

impl Blocks for RtlBlocks {
    fn models_only(&self) -> bool {
        false
    }

    fn sprayer_reset(&mut self, qp: u32) {
        if let Some(s) = self.sprayers.get_mut(qp as usize) {
            *s = None;
        }
    }

    fn sprayer(&mut self, qp: u32, cmd: SprayerCmd, model: &SprayerRsp) -> SprayerRsp {
        use sprayer::{counters, decode, encode, err_code};
        let bug = self.bug(Block::Sprayer);
        let stats = &mut self.stats.sprayer;
        let rtl = instance(&mut self.sprayers, qp, SPRAYER_P8, bug, stats);
        let Some(got) = transact(rtl, &encode(Some(cmd), true), decode, stats) else {
            self.note_difference(Block::Sprayer, || {
                format!("QP {qp} ev_sprayer {cmd:?}: no response")
            });
            return SprayerRsp {
                pick: None,
                ..*model
            };
        };
        let want_err = err_code(model.err);
        if got.pick != model.pick || got.err != want_err || got.counters != counters(model.counters)
        {
            self.note_difference(Block::Sprayer, || {
                format!(
                    "QP {qp} ev_sprayer {cmd:?}: rtl {got:?}, model pick {:?} err {want_err} counters {:?}",
                    model.pick,
                    counters(model.counters)
                )
            });
        }
        // The refusal the RTL's error code names, with the command's own fields.
        let err = match (got.err, cmd) {
            (0, _) => None,
            (1, c) => Some(SprayerError::IndexOutOfRange {
                index: match c {
                    SprayerCmd::SetEv(i, _)
                    | SprayerCmd::SetUsable(i, _)
                    | SprayerCmd::MarkSkip(i) => i,
                    _ => 0,
                },
            }),
            (2, c) => Some(SprayerError::BadWeight {
                weight: match c {
                    SprayerCmd::SetEv(_, s) => s.weight,
                    SprayerCmd::PlaneWeight(_, w) => w,
                    _ => 0,
                },
            }),
            (_, c) => Some(SprayerError::BadPlane {
                plane: match c {
                    SprayerCmd::SetEv(_, s) => s.plane,
                    SprayerCmd::PlaneWeight(p, _) => p,
                    _ => 0,
                },
            }),
        };
        // (the stage reads no counters from responses; the model's 64-bit ones are kept)
        SprayerRsp {
            pick: got.pick,
            err,
            counters: model.counters,
        }
    }

    fn rx_tracker_reset(&mut self, qp: u32) {
        if let Some(t) = self.trackers.get_mut(qp as usize) {
            *t = None;
        }
    }

    fn rx_tracker(&mut self, qp: u32, cmd: RxTrackerCmd, model: &RxTrackerRsp) -> RxTrackerRsp {
        let bug = self.bug(Block::RxTracker);
        let stats = &mut self.stats.rx_tracker;
        let rtl = instance(&mut self.trackers, qp, TRACKER_W8, bug, stats);
        let got = transact(rtl, &rx::encode(Some(cmd), true), rx::decode, stats);
        let want = rx::rsp(cmd, model);
        let Some(got) = got else {
            self.note_difference(Block::RxTracker, || {
                format!("QP {qp} rx_psn_tracker {cmd:?}: no response")
            });
            return *model;
        };
        if got != want {
            self.note_difference(Block::RxTracker, || {
                format!("QP {qp} rx_psn_tracker {cmd:?}: rtl {got:x?}, model {want:x?}")
            });
        }
        // (the stage reads no counters from responses; the model's 64-bit ones are kept)
        RxTrackerRsp {
            outcome: rx::outcome_of(got.outcome),
            cum_psn: mrc_abi::Psn::new(got.cum),
            next_max_psn: mrc_abi::Psn::new(got.next_max),
            sack_bitmap: got.bitmap,
            counters: model.counters,
        }
    }

    fn header(&mut self, model: &Packet) -> Packet {
        let d = hdr::packet_desc(model);
        let want = hdr::frame(&d);
        let Some((got, hdr_len)) = self.build_header(&d) else {
            self.note_difference(Block::HdrBuilder, || {
                format!("hdr_builder {model:?}: no last beat")
            });
            return *model;
        };
        if got != want || hdr_len != want.len() {
            self.note_difference(Block::HdrBuilder, || {
                let at = got.iter().zip(&want).position(|(a, b)| a != b);
                format!(
                    "hdr_builder {model:?}: {} header bytes (hdr_len {hdr_len}), model {}; first difference at byte {at:?}",
                    got.len(),
                    want.len()
                )
            });
        }
        // The headers the builder made, with the packet's payload behind them, as the
        // receiver parses them.
        let mut frame = got;
        frame.resize(frame.len() + model.payload_len as usize, 0);
        let parsed = match Frame::parse(&frame) {
            Ok(f) => f,
            Err(e) => {
                self.note_difference(Block::HdrBuilder, || {
                    format!("hdr_builder {model:?}: the header does not parse: {e:?}")
                });
                return *model;
            }
        };
        let mut p = Packet::from_repr(&parsed.mrc, model.payload_len, model.ce);
        // (not on the wire)
        p.src_qpn = model.src_qpn;
        if let (
            PacketBody::Write { local, .. },
            PacketBody::Write {
                local: sent_from, ..
            },
        ) = (&mut p.body, &model.body)
        {
            *local = *sent_from;
        }
        p
    }

    fn event_push(&mut self, entry: &CsrEntry) {
        use core::mem::offset_of;
        self.queue_pushed = self.queue_pushed.wrapping_add(1);
        let want = self.queue_pushed;
        let rtl = self.queue_rtl();
        // (the producer index after the edge that took the entry)
        let input = queue::encode(Some(&entry.0), false, offset_of!(CsrQueueRegs, producer));
        let (_, _, _, producer) = queue::decode(rtl.step_after(&input));
        let s = &mut self.stats.event_queue;
        s.cycles += 1;
        s.transactions += 1;
        if producer != want {
            self.note_difference(Block::CsrQueue, || {
                format!("csr_event_queue push {want}: producer index rtl {producer}, model {want}")
            });
        }
    }

    fn event_pop(&mut self, model: &CsrEntry) -> CsrEntry {
        use core::mem::offset_of;
        let want_consumer = self.queue_popped;
        self.queue_popped = self.queue_popped.wrapping_add(1);
        let rtl = self.queue_rtl();
        // (the head entry and the consumer index before the edge that pops it)
        let input = queue::encode(None, true, offset_of!(CsrQueueRegs, consumer));
        let (_, m_valid, data, consumer) = queue::decode(rtl.step(&input));
        let s = &mut self.stats.event_queue;
        s.cycles += 1;
        s.transactions += 1;
        if !m_valid || data != model.0 || consumer != want_consumer {
            self.note_difference(Block::CsrQueue, || {
                format!(
                    "csr_event_queue pop {want_consumer}: rtl valid {m_valid} consumer {consumer} {data:02x?}, model {:02x?}",
                    model.0
                )
            });
        }
        if m_valid {
            CsrEntry(data)
        } else {
            *model
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SIM_PLANES, SIM_WORDS};
    use mrc_abi::Psn;
    use mrc_firmware::datapath::{EvSlot, RxBitmap, Sprayer};

    fn drive(
        blocks: &mut RtlBlocks,
        model: &mut Sprayer<256, SIM_PLANES>,
        cmd: SprayerCmd,
    ) -> SprayerRsp {
        let m = model.apply(cmd);
        blocks.sprayer(0, cmd, &m)
    }

    /// The sprayer instance answers as the model over a table of 8 planes, skip flags
    /// included; its planted-bug variant (plane cursor) differs.
    #[test]
    fn the_sim_sprayer_answers_as_the_model_and_its_planted_bug_differs() {
        for bug in [false, true] {
            let mut b = RtlBlocks::new(bug.then_some(Block::Sprayer)).unwrap();
            let mut m: Sprayer<256, SIM_PLANES> = Sprayer::new();
            for i in 0..64u16 {
                let slot = EvSlot {
                    usable: true,
                    weight: 1 + (i % 3) as u8,
                    plane: (i % 8) as u8,
                    skip_once: false,
                };
                drive(&mut b, &mut m, SprayerCmd::SetEv(i, slot));
            }
            drive(&mut b, &mut m, SprayerCmd::SetEv(300, EvSlot::default()));
            drive(&mut b, &mut m, SprayerCmd::PlaneWeight(9, 1));
            for k in 0..2000u16 {
                if k % 50 == 0 {
                    drive(&mut b, &mut m, SprayerCmd::MarkSkip(k % 64));
                }
                drive(&mut b, &mut m, SprayerCmd::Next);
            }
            let s = b.stats().sprayer;
            assert_eq!(s.instances, 1);
            assert_eq!(s.transactions, 64 + 2 + 2000 + 40);
            if bug {
                assert!(s.differ > 0, "the planted bug went unseen");
            } else {
                assert_eq!(s.differ, 0, "{:?}", b.stats().first_difference);
            }
        }
    }

    /// The tracker instance answers as a 512-PSN model over reordered arrivals with SACKs
    /// and a reset near the PSN wrap; its planted-bug variant (a SACK bit lost) differs.
    #[test]
    fn the_sim_tracker_answers_as_the_model_and_its_planted_bug_differs() {
        for bug in [false, true] {
            let mut b = RtlBlocks::new(bug.then_some(Block::RxTracker)).unwrap();
            let mut m: RxBitmap<SIM_WORDS> = RxBitmap::new(Psn::new(0));
            let mut rng = crate::Rng::new(7);
            let mut drive = |b: &mut RtlBlocks, cmd| {
                let want = m.apply(cmd);
                let got = b.rx_tracker(3, cmd, &want);
                (want, got)
            };
            drive(&mut b, RxTrackerCmd::Reset(Psn::new((1 << 24) - 100)));
            for k in 0..3000u32 {
                let cum = (1 << 24) - 100 + k / 2;
                let psn = Psn::new(cum + rng.below(40) as u32);
                drive(&mut b, RxTrackerCmd::Receive(psn));
                if k % 5 == 0 {
                    let (want, got) = drive(&mut b, RxTrackerCmd::Sack(Psn::new(cum)));
                    if !bug {
                        assert_eq!(got, want);
                    }
                }
            }
            let s = b.stats().rx_tracker;
            assert_eq!((s.instances, s.transactions), (1, 1 + 3000 + 600));
            if bug {
                assert!(s.differ > 0, "the planted bug went unseen");
            } else {
                assert_eq!(s.differ, 0, "{:?}", b.stats().first_difference);
            }
        }
    }

    /// Every kind of packet the stage sends, in every EV format, comes back from the header
    /// builder as it went in.
    #[test]
    fn the_header_builder_gives_back_the_packet() {
        use mrc_abi::wire::{
            AckRepr, EvFormat, EvxRepr, NackReason, NackRepr, ProbeRepr, RethRepr, Segment,
        };
        use mrc_firmware::datapath::packet::LocalBuf;
        let mut b = RtlBlocks::new(None).unwrap();
        let mut n = 0;
        for format in EvFormat::ALL {
            let base = Packet {
                src_qpn: 3,
                dest_qpn: 0x0012_3456,
                psn: Psn::new(0xff_fff0),
                msn: 7,
                ev_format: format,
                evx: EvxRepr {
                    ev_index: 300,
                    plane: 5,
                    ev_value: 0xC000 + 300,
                },
                tx_ts_ns: 123_456,
                echo_ts_ns: 99,
                retransmit: true,
                ack_req: true,
                payload_len: 0,
                ..Packet::FILL
            };
            let reth = RethRepr {
                va: 0x1000_2000,
                rkey: 0x55,
                dma_len: 4096,
            };
            let write = |segment| PacketBody::Write {
                segment,
                reth,
                local: LocalBuf {
                    handle: 9,
                    offset: 8192,
                },
            };
            let bodies = [
                write(Segment::First),
                write(Segment::Middle),
                write(Segment::Last { imm: Some(0xabcd) }),
                write(Segment::Only { imm: None }),
                PacketBody::Ack(AckRepr {
                    cum_psn: Psn::new(5),
                    sack_base: Psn::new(5),
                    sack_bitmap: 0b1010,
                    ev_index: 4,
                    plane: 1,
                    ecn_plane_mask: 2,
                    ce_count: 3,
                    pkt_count: 9,
                }),
                PacketBody::Nack(NackRepr {
                    reason: NackReason::OutOfWindow,
                    psn: Psn::new(77),
                    cum_psn: Psn::new(70),
                    ev_index: 2,
                    plane: 0,
                }),
                PacketBody::Probe(ProbeRepr {
                    probe_id: 42,
                    ev_index: 1,
                    plane: 3,
                }),
                PacketBody::ProbeReply(ProbeRepr {
                    probe_id: 43,
                    ev_index: 1,
                    plane: 3,
                }),
            ];
            for body in bodies {
                let payload_len = if matches!(body, PacketBody::Write { .. }) {
                    reth.dma_len
                } else {
                    0
                };
                let p = Packet {
                    body,
                    payload_len,
                    ..base
                };
                assert_eq!(b.header(&p), p);
                n += 1;
            }
        }
        let s = b.stats().hdr_builder;
        assert_eq!((s.instances, s.transactions, s.differ), (1, n, 0));
        assert!(s.cycles >= 2 * n, "{s:?}");
    }

    /// Entries come out of the event queue as they went in, across the ring's wrap.
    #[test]
    fn the_event_queue_gives_back_the_entries() {
        let mut b = RtlBlocks::new(None).unwrap();
        let entry = |i: u32| {
            let mut e = CsrEntry::ZERO;
            e.0[0] = 1 + (i % 7) as u8;
            e.0[4..8].copy_from_slice(&i.to_le_bytes());
            e
        };
        let mut next = 0u32;
        for burst in [10u32, 256, 3, 200, 256] {
            for i in 0..burst {
                b.event_push(&entry(next + i));
            }
            for i in 0..burst {
                let e = entry(next + i);
                assert_eq!(b.event_pop(&e), e);
            }
            next += burst;
        }
        let s = b.stats().event_queue;
        assert_eq!(
            (s.instances, s.transactions, s.differ),
            (1, 2 * u64::from(next), 0)
        );
    }
}
