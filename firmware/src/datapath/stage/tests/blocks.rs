//! The stage with a stand-in for its blocks (`crate::datapath::blocks`): every transaction of
//! each block goes through the port, and the stand-in's answers are the ones the stage goes on
//! with.

use std::collections::VecDeque;

use super::*;
use crate::datapath::blocks::{Blocks, RxTrackerCmd, RxTrackerRsp};
use crate::datapath::rx_bitmap::RxBitmap;

/// Transactions a stand-in saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Seen {
    tracker_resets: usize,
    receives: usize,
    sacks: usize,
    resets: usize,
    headers: usize,
    pushes: usize,
    pops: usize,
}

/// A stand-in that answers from models of its own (the trackers, the queue) or by a round
/// trip through the wire representation (the header), counts what it saw and the answers
/// that differ from the stage's models, and with `sack_bug` loses bit 1 of every SACK.
#[derive(Default)]
struct Mirror {
    trackers: Vec<RxBitmap<2>>,
    queue: VecDeque<CsrEntry>,
    seen: Seen,
    differ: usize,
    sack_bug: bool,
}

impl Mirror {
    fn tracker(&mut self, qp: u32) -> &mut RxBitmap<2> {
        let i = qp as usize;
        if self.trackers.len() <= i {
            self.trackers.resize(i + 1, RxBitmap::new(Psn::new(0)));
        }
        &mut self.trackers[i]
    }
}

impl Blocks for Mirror {
    fn models_only(&self) -> bool {
        false
    }

    fn rx_tracker_reset(&mut self, qp: u32) {
        self.seen.tracker_resets += 1;
        *self.tracker(qp) = RxBitmap::new(Psn::new(0));
    }

    fn rx_tracker(&mut self, qp: u32, cmd: RxTrackerCmd, model: &RxTrackerRsp) -> RxTrackerRsp {
        match cmd {
            RxTrackerCmd::Receive(_) => self.seen.receives += 1,
            RxTrackerCmd::Sack(_) => self.seen.sacks += 1,
            RxTrackerCmd::Reset(_) => self.seen.resets += 1,
        }
        let mut r = self.tracker(qp).apply(cmd);
        if r != *model {
            self.differ += 1;
        }
        if self.sack_bug && matches!(cmd, RxTrackerCmd::Sack(_)) {
            r.sack_bitmap &= !2;
        }
        r
    }

    fn header(&mut self, model: &Packet) -> Packet {
        self.seen.headers += 1;
        let mut p = Packet::from_repr(&model.to_repr(), model.payload_len, model.ce);
        p.src_qpn = model.src_qpn;
        if let (PacketBody::Write { local, .. }, PacketBody::Write { local: l, .. }) =
            (&mut p.body, &model.body)
        {
            *local = *l;
        }
        if p != *model {
            self.differ += 1;
        }
        p
    }

    fn event_push(&mut self, entry: &CsrEntry) {
        self.seen.pushes += 1;
        self.queue.push_back(*entry);
    }

    fn event_pop(&mut self, model: &CsrEntry) -> CsrEntry {
        self.seen.pops += 1;
        let e = self.queue.pop_front().unwrap_or(CsrEntry::ZERO);
        if e != *model {
            self.differ += 1;
        }
        e
    }
}

/// Everything that left two stages (packets of each, reports of each) over a message from
/// QP 0 of one to QP 1 of the other with PSN 2 lost and PSNs 5 and 6 swapped, then the ACKs
/// back.
#[derive(Debug, PartialEq)]
struct Trace {
    packets: Vec<Packet>,
    events: Vec<CsrEntry>,
}

fn exchange<B: Blocks>(tx: &mut Datapath<Small, B>, rx: &mut Datapath<Small, B>) -> Trace {
    let mut t = Trace {
        packets: Vec::new(),
        events: Vec::new(),
    };
    let poll = |dp: &mut Datapath<Small, B>, now: u64, t: &mut Trace| {
        let mut out = [Packet::FILL; 64];
        let n = dp.poll_packets(now, &mut out);
        t.packets.extend_from_slice(&out[..n]);
        let mut ev = [CsrEntry::ZERO; 64];
        let k = dp.poll_events(&mut ev);
        t.events.extend_from_slice(&ev[..k]);
        out[..n].to_vec()
    };
    tx.post_send(0, wr(1, 900)).unwrap();
    let mut data = poll(tx, 0, &mut t);
    data.retain(|p| p.psn != Psn::new(2));
    data.swap(4, 5);
    for p in data.iter_mut() {
        p.dest_qpn = 1;
    }
    let mut v = [RxVerdict::Consumed; 64];
    for (i, p) in data.iter().enumerate() {
        assert_eq!(
            rx.handle_packets(10 + i as u64, core::slice::from_ref(p), &mut v),
            1
        );
    }
    // (the coalescing timer sends the last ACK)
    rx.handle_timeout(1_000_000);
    let mut acks = poll(rx, 1_000_000, &mut t);
    for p in acks.iter_mut() {
        p.dest_qpn = 0;
    }
    assert_eq!(tx.handle_packets(1_000_010, &acks, &mut v), acks.len());
    poll(tx, 1_000_020, &mut t);
    t
}

#[test]
fn every_block_transaction_goes_through_the_stand_in() {
    let (mut tx, mut rx) = (stage(3), stage(3));
    let want = exchange(&mut tx, &mut rx);
    let mirror = || stage_with(3, 0, Mirror::default());
    let (mut mtx, mut mrx) = (mirror(), mirror());
    let got = exchange(&mut mtx, &mut mrx);
    assert_eq!(got, want);
    // The ACKs saw the hole the lost packet left.
    let holes = want.packets.iter().any(
        |p| matches!(p.body, PacketBody::Ack(a) if a.sack_bitmap != 0 && a.cum_psn == Psn::new(2)),
    );
    assert!(holes, "{:?}", want.packets);
    let acks = want
        .packets
        .iter()
        .filter(|p| matches!(p.body, PacketBody::Ack(_) | PacketBody::Nack(_)))
        .count();
    let (s, r) = (mtx.blocks().seen, mrx.blocks().seen);
    // Both QPs of each stage went to RTR: a fresh tracker and a reset each.
    assert_eq!((r.tracker_resets, r.resets), (2, 2));
    // The receiver's tracker took the 8 writes that arrived and a SACK per ACK.
    assert_eq!((r.receives, r.sacks), (8, acks));
    // Every packet sent went through a header builder, every report through an event queue.
    assert_eq!(s.headers + r.headers, want.packets.len());
    assert_eq!(s.pushes + r.pushes, want.events.len());
    assert_eq!((s.pops, r.pops), (s.pushes, r.pushes));
    assert_eq!(mtx.blocks().differ + mrx.blocks().differ, 0);
}

#[test]
fn the_stage_goes_on_with_the_stand_ins_answer() {
    let (mut tx, mut rx) = (stage(3), stage(3));
    let want = exchange(&mut tx, &mut rx);
    let bad = || {
        stage_with(
            3,
            0,
            Mirror {
                sack_bug: true,
                ..Mirror::default()
            },
        )
    };
    let (mut btx, mut brx) = (bad(), bad());
    let got = exchange(&mut btx, &mut brx);
    let sacks = |t: &Trace| {
        t.packets
            .iter()
            .filter_map(|p| match p.body {
                PacketBody::Ack(a) => Some(a.sack_bitmap),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // The ACK with the hole reports PSN 3 received at the model level, not with the bug.
    assert!(
        sacks(&want).iter().any(|b| b & 2 != 0),
        "{:?}",
        sacks(&want)
    );
    assert!(sacks(&got).iter().all(|b| b & 2 == 0), "{:?}", sacks(&got));
    assert_eq!(brx.blocks().differ, 0, "the stand-in's own model agrees");
}
