//! The stage alone, driven by hand-written firmware commands and packets.

extern crate std;

use mrc_abi::device::csr::{self, *};
use mrc_abi::device::EvState;
use mrc_abi::wire::{AckRepr, EvFormat, NackReason, NackRepr};
use mrc_abi::Psn;
use std::vec::Vec;

use super::*;
use crate::datapath::packet::{LocalBuf, PacketBody};
use crate::datapath::placement::Access;

mod blocks;

crate::capacity! {
    struct Small {
        qps: 2, evs: 8, planes: 2, window_psns: 128, send_queue: 8, recv_queue: 4, regions: 2,
    }
}

const MTU: u32 = 100;

fn cmd(e: CsrEvent) -> CsrEntry {
    e.encode()
}

/// A stage whose QP 0 sends to QP 1 of its peer and QP 1 receives (8 EVs over 2 planes), with
/// a 10-packet window and a region for rkey 7.
fn stage(reorder_tx: u8) -> Datapath<Small> {
    stage_reorder(reorder_tx, 0)
}

/// [`stage`] with a reorder window of `reorder_ns`.
fn stage_reorder(reorder_tx: u8, reorder_ns: u32) -> Datapath<Small> {
    stage_with(reorder_tx, reorder_ns, ModelBlocks)
}

/// [`stage_reorder`] whose blocks `blocks` answers.
fn stage_with<B: Blocks>(reorder_tx: u8, reorder_ns: u32, blocks: B) -> Datapath<Small, B> {
    let mut dp = Datapath::<Small, B>::with_blocks(
        DatapathConfig {
            mtu_payload: MTU,
            ..DatapathConfig::DEFAULT
        },
        blocks,
    );
    dp.register_region(MemRegion {
        rkey: 7,
        base_va: 0x1000,
        length: 1 << 20,
        access: Access::REMOTE_WRITE,
    })
    .unwrap();
    for q in 0..2 {
        let cmds = [
            cmd(CsrEvent::QpInit(QpInitCtx::new(
                q,
                8,
                2,
                EvFormat::Udp,
                0x40,
            ))),
            cmd(CsrEvent::QpRtr(QpRtrCtx::new(
                q,
                Psn::new(0),
                128,
                2,
                1 - q,
            ))),
            cmd(CsrEvent::QpRts(QpRtsCtx::new(
                q,
                Psn::new(0),
                128,
                2,
                reorder_tx,
                reorder_ns,
            ))),
            cmd(CsrEvent::WindowUpdate(WindowUpdate::new(q, 1000))),
        ];
        assert_eq!(dp.handle_commands(0, &cmds), 4);
    }
    dp
}

fn wr(wr_id: u64, len: u32) -> SendWr {
    SendWr {
        wr_id,
        local: LocalBuf {
            handle: 1,
            offset: 0,
        },
        remote_va: 0x1000,
        rkey: 7,
        len,
        imm: None,
        signaled: true,
    }
}

fn events(dp: &mut Datapath<Small>) -> Vec<CsrEvent> {
    let mut buf = [CsrEntry::ZERO; 64];
    let n = dp.poll_events(&mut buf);
    buf[..n].iter().map(|e| e.decode().unwrap()).collect()
}

fn send_all(dp: &mut Datapath<Small>, now: u64) -> Vec<Packet> {
    let mut out = [Packet::FILL; 64];
    let n = dp.poll_packets(now, &mut out);
    out[..n].to_vec()
}

fn ack(cum: u32, bitmap: u64, ev: u16) -> Packet {
    let mut p = Packet::FILL;
    p.dest_qpn = 0;
    p.psn = Psn::new(cum);
    p.body = PacketBody::Ack(AckRepr {
        cum_psn: Psn::new(cum),
        sack_base: Psn::new(cum),
        sack_bitmap: bitmap,
        ev_index: ev,
        plane: (ev % 2) as u8,
        ecn_plane_mask: 0,
        ce_count: 0,
        pkt_count: 1,
    });
    p
}

fn host_writes(dp: &mut Datapath<Small>) -> Vec<CsrEvent> {
    let mut buf = [CsrEntry::ZERO; HOST_CAP];
    let n = dp.poll_host_writes(&mut buf);
    buf[..n].iter().map(|e| e.decode().unwrap()).collect()
}

#[test]
fn a_message_is_segmented_sprayed_and_reported_once_sent() {
    let mut dp = stage(3);
    dp.post_send(0, wr(9, 250)).unwrap();
    let pkts = send_all(&mut dp, 5);
    assert_eq!(pkts.len(), 3);
    let lens: Vec<u32> = pkts.iter().map(|p| p.payload_len).collect();
    assert_eq!(lens, [100, 100, 50]);
    for (i, p) in pkts.iter().enumerate() {
        assert_eq!(p.psn, Psn::new(i as u32));
        assert_eq!((p.src_qpn, p.dest_qpn), (0, 1));
        assert_eq!(p.evx.plane, (p.evx.ev_index % 2) as u8);
        assert_eq!(p.evx.ev_value, 0x40 + u32::from(p.evx.ev_index));
        assert_eq!(p.ack_req, i == 2);
    }
    // Sprayed: consecutive packets alternate planes.
    assert_ne!(pkts[0].evx.plane, pkts[1].evx.plane);
    // The firmware hears of the start only: nothing per work request sent.
    let ev = events(&mut dp);
    assert!(matches!(ev[0], CsrEvent::TxStart(s) if s.psn.get() == 0));
    assert_eq!(ev.len(), 1);
}

/// A work request the cumulative PSN passes is retired (counted in the ACK's summary) and
/// keeps its slot until the firmware orders its completion; the completion goes to the host
/// only for work requests that asked for one, as a `Complete` or, on a CQ, a `PostCqe`.
#[test]
fn retired_sends_hold_their_slots_until_the_firmware_completes_them() {
    let mut dp = stage(3);
    let room = dp.send_queue_room(0);
    let mut quiet = wr(5, 100);
    quiet.signaled = false;
    for w in [wr(4, 150), quiet, wr(6, 100)] {
        dp.post_send(0, w).unwrap();
    }
    assert_eq!(send_all(&mut dp, 5).len(), 4);
    events(&mut dp);
    let mut v = [RxVerdict::Consumed];
    // PSN 0..3: the first two work requests (PSNs 0-1 and 2) retire, the third (3) not.
    assert_eq!(dp.handle_packets(10, &[ack(3, 0, 0)], &mut v), 1);
    let sums: Vec<u16> = events(&mut dp)
        .iter()
        .filter_map(|e| match e {
            CsrEvent::AckSummary(a) => Some(a.retired.get()),
            _ => None,
        })
        .collect();
    assert_eq!(sums, [2]);
    assert_eq!(
        dp.send_queue_room(0),
        room - 3,
        "retired ones hold their slots"
    );
    assert!(
        host_writes(&mut dp).is_empty(),
        "no completion before the order"
    );
    // An order for more than are retired completes those and counts the rest.
    let order = cmd(CsrEvent::CompleteSends(CompleteSends::new(0, 3)));
    assert_eq!(dp.handle_commands(20, &[order]), 1);
    let w = host_writes(&mut dp);
    assert_eq!(w.len(), 1, "the unsignaled one completes silently: {w:?}");
    let CsrEvent::Complete(c) = w[0] else {
        panic!("{w:?}")
    };
    assert_eq!(
        (c.qpn.get(), c.wr_id.get(), c.opcode, c.status),
        (0, 4, opcode::SEND, status::OK)
    );
    assert_eq!(dp.send_queue_room(0), room - 1);
    let tx = dp.qp(0).unwrap().tx;
    assert_eq!((tx.completed, tx.completions_refused), (2, 1));
    // An order for a QP the stage does not have is counted and writes nothing.
    let stray = cmd(CsrEvent::CompleteSends(CompleteSends::new(9, 1)));
    assert_eq!(dp.handle_commands(25, &[stray]), 1);
    assert_eq!(dp.counters().commands_unknown_qp, 1);
    assert!(host_writes(&mut dp).is_empty());
    // The last one, on CQ 33: a PostCqe with the work request id as its WQE index.
    assert_eq!(dp.handle_packets(30, &[ack(4, 0, 0)], &mut v), 1);
    events(&mut dp);
    let order = cmd(CsrEvent::CompleteSends(
        CompleteSends::new(0, 1).with_cq(33),
    ));
    assert_eq!(dp.handle_commands(40, &[order]), 1);
    let w = host_writes(&mut dp);
    let [CsrEvent::PostCqe(q)] = w[..] else {
        panic!("{w:?}")
    };
    assert_eq!(
        (
            q.cqn.get(),
            q.qpn.get(),
            q.wqe_index.get(),
            q.status,
            q.opcode
        ),
        (33, 0, 6, CqeStatus::Success as u8, CqeOpcode::Write as u8)
    );
    assert_eq!(dp.send_queue_room(0), room);
}

/// A completion order waits while the host-interface queue lacks room for all of its
/// completions, and goes through once the host drained it.
#[test]
fn a_completion_order_waits_for_host_queue_room() {
    let mut dp = stage(3);
    for i in 0..2 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    assert_eq!(send_all(&mut dp, 5).len(), 2);
    let mut v = [RxVerdict::Consumed];
    assert_eq!(dp.handle_packets(10, &[ack(2, 0, 0)], &mut v), 1);
    events(&mut dp);
    let fill: Vec<CsrEntry> = (0..HOST_CAP - 1)
        .map(|i| {
            cmd(CsrEvent::EvEvent(EvEventEntry::new(
                0,
                i as u16 % 8,
                EvState::Good,
                EvState::AssumedBad,
                1,
            )))
        })
        .collect();
    assert_eq!(dp.handle_commands(20, &fill), fill.len());
    let order = [cmd(CsrEvent::CompleteSends(CompleteSends::new(0, 2)))];
    assert_eq!(
        dp.handle_commands(30, &order),
        0,
        "one slot for two completions"
    );
    assert_eq!(host_writes(&mut dp).len(), HOST_CAP - 1);
    assert_eq!(dp.handle_commands(40, &order), 1);
    let ids: Vec<u64> = host_writes(&mut dp)
        .iter()
        .filter_map(|e| match e {
            CsrEvent::Complete(c) => Some(c.wr_id.get()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [0, 1]);
}

/// ERROR flushes every send not completed, retired or not, in posting order.
#[test]
fn error_flushes_retired_sends_not_yet_completed() {
    let mut dp = stage(3);
    for i in 0..3 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    // Two sent and retired, none completed; the third never sent.
    let mut out = [Packet::FILL; 2];
    assert_eq!(dp.poll_packets(5, &mut out), 2);
    let mut v = [RxVerdict::Consumed];
    assert_eq!(dp.handle_packets(10, &[ack(2, 0, 0)], &mut v), 1);
    events(&mut dp);
    let err = cmd(CsrEvent::QpState(QpStateEntry::new(0, QP_ERROR)));
    assert_eq!(dp.handle_commands(20, &[err]), 1);
    let flushed: Vec<u64> = events(&mut dp)
        .iter()
        .filter_map(|e| match e {
            CsrEvent::Flushed(f) => Some(f.wr_id.get()),
            _ => None,
        })
        .collect();
    assert_eq!(flushed, [0, 1, 2]);
    // A late order finds nothing retired.
    let order = cmd(CsrEvent::CompleteSends(CompleteSends::new(0, 2)));
    assert_eq!(dp.handle_commands(30, &[order]), 1);
    assert!(host_writes(&mut dp).is_empty());
}

#[test]
fn an_ack_reports_progress_and_a_hole_past_the_threshold_is_a_loss() {
    let mut dp = stage(2);
    for i in 0..6 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    let pkts = send_all(&mut dp, 0);
    assert_eq!(pkts.len(), 6);
    events(&mut dp);
    // PSN 0 and 1 acknowledged, 2 missing, 3, 4 and 5 SACKed: 3 later transmissions >= 2.
    let a = ack(2, 0b1110, 0);
    let mut v = [RxVerdict::Consumed];
    assert_eq!(dp.handle_packets(10, &[a], &mut v), 1);
    let ev = events(&mut dp);
    let CsrEvent::Loss(l) = ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(
        (l.psn(), l.ev.get(), l.len.get()),
        (Psn::new(2), pkts[2].evx.ev_index, 100)
    );
    let CsrEvent::AckSummary(s) = ev[1] else {
        panic!("{ev:?}")
    };
    assert_eq!(s.una(), Psn::new(2));
    assert!(s.has(csr::ACK_PROGRESS) && s.has(csr::ACK_OUTSTANDING));
    assert_eq!(
        (s.acked_bytes.get(), s.delivered.get(), s.sacked.get()),
        (500, 5, 3)
    );
    // Nothing is resent before the firmware orders it.
    assert!(send_all(&mut dp, 11).is_empty());
    let view = dp.qp(0).unwrap();
    assert_eq!(view.inflight_bytes, 0);
    // The order: on EV 5.
    let o = cmd(CsrEvent::Retransmit(Retransmit::new(0, Psn::new(2), 5, 0)));
    dp.handle_commands(12, &[o]);
    let r = send_all(&mut dp, 12);
    assert_eq!(r.len(), 1);
    assert!(r[0].retransmit);
    assert_eq!(
        (r[0].psn, r[0].evx.ev_index, r[0].evx.plane),
        (Psn::new(2), 5, 1)
    );
}

/// A plane going down leaves the sprayers at once: after the order no packet takes it, before
/// any EV table write; what was in flight on it leaves again on the other plane; the weight
/// the firmware writes once the plane is back brings it back.
#[test]
fn a_plane_down_order_takes_the_plane_out_of_the_sprayer_at_once() {
    let mut dp = stage(3);
    dp.post_send(0, wr(1, 4 * MTU)).unwrap();
    let first = send_all(&mut dp, 0);
    assert_eq!(first.len(), 4);
    let on_1: Vec<Psn> = first
        .iter()
        .filter(|p| p.evx.plane == 1)
        .map(|p| p.psn)
        .collect();
    assert_eq!(on_1.len(), 2, "sprayed over both planes");
    let down = [cmd(CsrEvent::PlaneDown(PlaneDown::new(1)))];
    assert_eq!(dp.handle_commands(10, &down), 1);
    dp.post_send(0, wr(2, 4 * MTU)).unwrap();
    let next = send_all(&mut dp, 20);
    let resent: Vec<Psn> = next
        .iter()
        .filter(|p| p.retransmit)
        .map(|p| p.psn)
        .collect();
    assert_eq!(resent, on_1);
    assert!(next.len() > on_1.len(), "new packets left too");
    assert!(
        next.iter().all(|p| p.evx.plane == 0),
        "{:?}",
        next.iter()
            .map(|p| (p.psn, p.evx.plane))
            .collect::<Vec<_>>()
    );
    assert_eq!(dp.counters().plane_downs, 1);
    // The plane back (the firmware writes its weight again): sprayed on both planes.
    let up = [cmd(CsrEvent::PlaneWeight(PlaneWeight::new(0, 1, 1)))];
    assert_eq!(dp.handle_commands(30, &up), 1);
    let mut v = [RxVerdict::Consumed];
    dp.handle_packets(40, &[ack(8, 0, 0)], &mut v);
    dp.post_send(0, wr(3, 4 * MTU)).unwrap();
    let after = send_all(&mut dp, 50);
    assert_eq!(after.len(), 4);
    assert!(after.iter().any(|p| p.evx.plane == 1));
}

/// A retransmission after an ACK timeout leaves on another plane than the one the packet was
/// lost on (a failed link or port takes a plane's paths out together).
#[test]
fn a_packet_lost_to_a_timeout_is_resent_on_another_plane() {
    let mut dp = stage(3);
    for i in 0..4 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    let sent = send_all(&mut dp, 0);
    assert_eq!(sent.len(), 4);
    let mut resent = Vec::new();
    for k in 0..4u64 {
        dp.handle_commands(
            100 * (k + 1),
            &[cmd(CsrEvent::RetransmitUnacked(RetransmitUnacked::new(0)))],
        );
        let r = send_all(&mut dp, 100 * (k + 1));
        assert_eq!(r.len(), 1);
        resent.push(r[0]);
    }
    assert_eq!(resent[0].psn, Psn::new(0));
    // Each try on the other plane than the one before, so never on the same EV twice.
    let mut last = sent[0].evx.plane;
    for p in &resent {
        assert_ne!(p.evx.plane, last, "{resent:?}");
        last = p.evx.plane;
    }
}

#[test]
fn the_loss_window_sends_only_una_until_the_peer_answers() {
    let mut dp = stage(3);
    for i in 0..4 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    assert_eq!(send_all(&mut dp, 0).len(), 4);
    events(&mut dp);
    dp.handle_commands(
        100,
        &[cmd(CsrEvent::RetransmitUnacked(RetransmitUnacked::new(0)))],
    );
    let r = send_all(&mut dp, 100);
    assert_eq!(r.iter().map(|p| p.psn.value()).collect::<Vec<_>>(), [0]);
    // The answer acknowledges 0..=2: only PSN 3 is left to resend.
    let mut v = [RxVerdict::Consumed];
    dp.handle_packets(110, &[ack(3, 0, 1)], &mut v);
    let r = send_all(&mut dp, 110);
    assert_eq!(r.iter().map(|p| p.psn.value()).collect::<Vec<_>>(), [3]);
    assert_eq!(dp.qp(0).unwrap().tx.retransmits, 2);
}

/// A tail probe while an ACK timeout's one retransmission waits for an answer resends that
/// PSN (`una`) on another plane, ahead of the rest of the queue; the window stays one packet.
#[test]
fn a_tail_probe_after_a_timeout_resends_una_on_another_plane() {
    let mut dp = stage_reorder(3, 1_000);
    for i in 0..4 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    assert_eq!(send_all(&mut dp, 0).len(), 4);
    dp.handle_commands(
        100,
        &[cmd(CsrEvent::RetransmitUnacked(RetransmitUnacked::new(0)))],
    );
    let first = send_all(&mut dp, 100);
    assert_eq!(first.iter().map(|p| p.psn.value()).collect::<Vec<_>>(), [0]);
    // Nothing more leaves while the window waits, until the probe (no quiet test).
    assert!(send_all(&mut dp, 500).is_empty());
    let probe = cmd(CsrEvent::TailProbe(TailProbe::new(0)));
    dp.handle_commands(600, &[probe]);
    let again = send_all(&mut dp, 600);
    assert_eq!(again.iter().map(|p| p.psn.value()).collect::<Vec<_>>(), [0]);
    assert!(again[0].retransmit);
    assert_ne!(again[0].evx.plane, first[0].evx.plane);
    assert!(send_all(&mut dp, 700).is_empty());
    assert_eq!(dp.qp(0).unwrap().tx.tail_probes, 1);
}

#[test]
fn a_trim_nack_is_reported_with_the_evs_delivery_credits() {
    let mut dp = stage(3);
    for i in 0..3 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    let pkts = send_all(&mut dp, 0);
    events(&mut dp);
    // PSN 0 delivered (credit to its EV), then a NACK for PSN 1.
    let mut v = [RxVerdict::Consumed; 2];
    let mut n = Packet::FILL;
    n.body = PacketBody::Nack(NackRepr {
        reason: NackReason::Trimmed,
        psn: Psn::new(1),
        cum_psn: Psn::new(1),
        ev_index: pkts[1].evx.ev_index,
        plane: pkts[1].evx.plane,
    });
    dp.handle_packets(5, &[ack(1, 0, 0), n], &mut v);
    let ev = events(&mut dp);
    let CsrEvent::Nack(x) = ev[1] else {
        panic!("{ev:?}")
    };
    assert_eq!(
        (x.psn(), x.reason(), x.flags),
        (Psn::new(1), Some(NackReason::Trimmed), NACK_IN_FLIGHT)
    );
    assert_eq!(x.ev.get(), pkts[1].evx.ev_index);
    // A stale repeat of it is counted, not reported.
    dp.handle_packets(6, &[n], &mut v[..1]);
    assert!(events(&mut dp).is_empty());
    assert_eq!(dp.qp(0).unwrap().tx.nacks_stale, 1);
}

#[test]
fn writes_are_placed_acked_and_checked_against_the_region() {
    let mut tx = stage(3);
    let mut rx = stage(3);
    tx.post_send(0, wr(1, 250)).unwrap();
    let mut pkts = send_all(&mut tx, 0);
    for p in pkts.iter_mut() {
        p.dest_qpn = 1;
    }
    let mut v = [RxVerdict::Consumed; 3];
    assert_eq!(rx.handle_packets(1, &pkts, &mut v), 3);
    assert_eq!(
        v[2],
        RxVerdict::Place {
            qpn: 1,
            slot: 0,
            offset: 200,
            len: 50
        }
    );
    // The last packet asked for an ACK.
    let out = send_all(&mut rx, 2);
    let acks: Vec<_> = out
        .iter()
        .filter(|p| matches!(p.body, PacketBody::Ack(_)))
        .collect();
    assert_eq!(acks.len(), 1);
    let PacketBody::Ack(a) = acks[0].body else {
        unreachable!()
    };
    assert_eq!(a.cum_psn, Psn::new(3));
    // A bad rkey: NACKed, never placed, fatal for the QP.
    let mut bad = pkts[0];
    bad.psn = Psn::new(3);
    if let PacketBody::Write { reth, .. } = &mut bad.body {
        reth.rkey = 8;
    }
    let mut v1 = [RxVerdict::Consumed];
    rx.handle_packets(3, &[bad], &mut v1);
    assert_eq!(v1[0], RxVerdict::Dropped(DropReason::RemoteAccess));
    let ev = events(&mut rx);
    assert!(ev
        .iter()
        .any(|e| matches!(e, CsrEvent::RxFatal(f) if f.qpn.get() == 1)));
    assert_eq!(rx.qp(1).unwrap().state, DpState::Error);
}

#[test]
fn bad_commands_are_counted_and_change_nothing() {
    let mut dp = stage(3);
    let before = dp.qp(0).unwrap();
    let mut garbage = CsrEntry::ZERO;
    garbage.0[0] = 0x7f;
    let wrong_side = cmd(CsrEvent::TxStart(TxStart::new(0, Psn::new(0))));
    let unknown = cmd(CsrEvent::WindowUpdate(WindowUpdate::new(9, 5)));
    assert_eq!(dp.handle_commands(0, &[garbage, wrong_side, unknown]), 3);
    let c = dp.counters();
    assert_eq!(
        (
            c.commands_malformed,
            c.commands_wrong_side,
            c.commands_unknown_qp
        ),
        (1, 1, 1)
    );
    assert_eq!(dp.qp(0).unwrap(), before);
}

#[test]
fn a_full_event_queue_holds_packets_back() {
    let mut dp = stage(3);
    // Messages of one packet: each reports TxStart and an ACK summary; ACK them one by one without
    // draining the events until the stage stops taking ACKs.
    let mut taken = 0;
    let mut v = [RxVerdict::Consumed];
    for round in 0..200u32 {
        dp.post_send(0, wr(u64::from(round), 10)).unwrap();
        send_all(&mut dp, u64::from(round));
        taken += dp.handle_packets(u64::from(round), &[ack(round + 1, 0, 0)], &mut v);
        if taken < round as usize + 1 {
            break;
        }
        // (the firmware's completion frees the slot)
        let order = cmd(CsrEvent::CompleteSends(CompleteSends::new(0, 1)));
        assert_eq!(dp.handle_commands(u64::from(round), &[order]), 1);
        host_writes(&mut dp);
    }
    assert!(taken < 200, "never held back");
    assert!(dp.counters().backpressure > 0);
    assert_eq!(dp.counters().events_overflow, 0);
    // Draining makes room again.
    events(&mut dp);
    events(&mut dp);
    events(&mut dp);
    events(&mut dp);
    assert_eq!(
        dp.handle_packets(9_999, &[ack(taken as u32 + 1, 0, 0)], &mut v),
        1
    );
}

/// The reports read in place ([`Datapath::events`]) are the entries `poll_events` copies out,
/// in order; consuming `n` removes exactly the `n` oldest and counts them.
#[test]
fn events_are_read_in_place_and_consumed_by_count() {
    let (mut a, mut b) = (stage(3), stage(3));
    for dp in [&mut a, &mut b] {
        for i in 0..4 {
            dp.post_send(0, wr(i, 50)).unwrap();
        }
        assert_eq!(send_all(dp, 5).len(), 4);
        let mut v = [RxVerdict::Consumed];
        for psn in 1..=4 {
            assert_eq!(dp.handle_packets(10, &[ack(psn, 0, 0)], &mut v), 1);
        }
    }
    let mut buf = [CsrEntry::ZERO; 64];
    let n = b.poll_events(&mut buf);
    let want = &buf[..n];
    // (a TxStart, then an ACK summary per work request)
    assert_eq!(n, 5);
    let (x, y) = a.events();
    assert_eq!(x.iter().chain(y).copied().collect::<Vec<_>>(), want);
    a.consume_events(2);
    let (x, y) = a.events();
    assert_eq!(x.iter().chain(y).copied().collect::<Vec<_>>(), &want[2..]);
    assert_eq!(a.counters().events, 2);
    a.consume_events(100);
    assert!(!a.has_events());
    assert_eq!(a.counters().events, n as u64);
    assert_eq!(a.counters(), b.counters());
}

/// Host-interface writes are read in place and consumed by count, as `poll_host_writes`
/// copies them.
#[test]
fn host_writes_are_read_in_place_and_consumed_by_count() {
    let mut dp = stage(3);
    let writes: Vec<CsrEntry> = (0..3)
        .map(|i| {
            cmd(CsrEvent::EvEvent(EvEventEntry::new(
                0,
                i,
                EvState::Good,
                EvState::AssumedBad,
                1,
            )))
        })
        .collect();
    assert_eq!(dp.handle_commands(0, &writes), 3);
    let (x, y) = dp.host_writes();
    assert_eq!(x.iter().chain(y).copied().collect::<Vec<_>>(), writes);
    dp.consume_host_writes(1);
    let mut buf = [CsrEntry::ZERO; 8];
    assert_eq!(dp.poll_host_writes(&mut buf), 2);
    assert_eq!(&buf[..2], &writes[1..]);
    assert!(!dp.has_host_writes());
}

/// Verdicts written nowhere ([`DiscardVerdicts`]) leave the stage exactly as verdicts
/// written to a slice do: the same counters, control packets and reports, with runs and
/// single packets (a duplicate and a bad rkey among them).
#[test]
fn discarded_verdicts_change_nothing_but_the_verdicts() {
    use crate::datapath::packet::DiscardVerdicts;
    let mut tx = stage(3);
    for i in 0..3 {
        tx.post_send(0, wr(i, 250)).unwrap();
    }
    let mut pkts = send_all(&mut tx, 0);
    for p in pkts.iter_mut() {
        p.dest_qpn = 1;
    }
    let dup = pkts[4];
    pkts.insert(6, dup);
    if let PacketBody::Write { reth, .. } = &mut pkts[8].body {
        reth.rkey = 99;
    }
    let (mut a, mut b) = (stage(3), stage(3));
    let mut v = [RxVerdict::Consumed; 16];
    let n = a.handle_packets(1, &pkts, &mut v[..pkts.len()]);
    assert_eq!(b.handle_packets(1, &pkts, &mut DiscardVerdicts), n);
    assert_eq!(n, pkts.len());
    assert!(v[..n].iter().any(|v| matches!(v, RxVerdict::Place { .. })));
    assert!(v[..n].iter().any(|v| matches!(v, RxVerdict::Dropped(_))));
    assert_eq!(a.counters(), b.counters());
    assert_eq!(send_all(&mut a, 2), send_all(&mut b, 2));
    assert_eq!(events(&mut a), events(&mut b));
}

#[test]
fn region_writes_add_and_remove_regions_in_order() {
    let mut dp = Datapath::<Small>::new(DatapathConfig::DEFAULT);
    let add = |k: u32| {
        cmd(CsrEvent::RegionWrite(RegionWrite::add(
            k,
            0x1000,
            64,
            REGION_REMOTE_WRITE,
        )))
    };
    let cmds = [
        add(7),
        add(8),
        add(9),
        cmd(CsrEvent::RegionWrite(RegionWrite::remove(7))),
    ];
    assert_eq!(dp.handle_commands(0, &cmds), 4);
    // Two slots: the third add was refused (counted by the table), the removal freed slot 0.
    assert_eq!(dp.regions().region(0), None);
    let r = dp.regions().region(1).unwrap();
    assert_eq!((r.rkey, r.base_va, r.length), (8, 0x1000, 64));
    assert_eq!(r.access, Access::REMOTE_WRITE);
    assert_eq!(dp.regions().counters().bad_registrations, 1);
    assert_eq!(dp.counters().commands, 4);
}

#[test]
fn a_tail_probe_waits_for_two_quiet_reorder_windows() {
    // A 1 us reorder window: a tail probe needs 2 us without a transmission.
    let mut dp = stage_reorder(3, 1_000);
    for i in 0..4 {
        dp.post_send(0, wr(i, 100)).unwrap();
    }
    assert_eq!(send_all(&mut dp, 500).len(), 4);
    let probe = cmd(CsrEvent::TailProbe(TailProbe::new(0)));
    dp.handle_commands(2_400, &[probe]);
    assert!(send_all(&mut dp, 2_400).is_empty());
    assert_eq!(dp.qp(0).unwrap().tx.tail_probes_quiet, 1);
    dp.handle_commands(2_500, &[probe]);
    let r = send_all(&mut dp, 2_500);
    assert_eq!(r.len(), 1);
    assert!(r[0].retransmit && r[0].psn == Psn::new(3));
    assert_eq!(dp.qp(0).unwrap().tx.tail_probes, 1);
}

/// A burst too short for the count rule: a hole is lost once a transmission two reorder
/// windows younger is acknowledged, not at one window; without a window only the count decides.
#[test]
fn a_hole_two_windows_older_than_an_acked_send_is_lost_whatever_the_count() {
    let losses = |reorder_ns: u32| {
        // At most 8 later transmissions would be needed; the burst has 3 packets.
        let mut dp = stage_reorder(8, reorder_ns);
        for (i, now) in [0, 1_000, 2_000].into_iter().enumerate() {
            dp.post_send(0, wr(i as u64, 100)).unwrap();
            assert_eq!(send_all(&mut dp, now).len(), 1);
        }
        events(&mut dp);
        let mut v = [RxVerdict::Consumed];
        let mut lost = Vec::new();
        // PSN 1 (one window after PSN 0) SACKed, then PSN 2 (two windows after) too.
        for (now, bits) in [(3_000, 0b10), (3_100, 0b110)] {
            assert_eq!(dp.handle_packets(now, &[ack(0, bits, 0)], &mut v), 1);
            let found: Vec<u32> = events(&mut dp)
                .iter()
                .filter_map(|e| match e {
                    CsrEvent::Loss(l) => Some(l.psn().value()),
                    _ => None,
                })
                .collect();
            lost.push(found);
        }
        lost
    };
    let none: &[u32] = &[];
    assert_eq!(losses(1_000), [none, &[0]]);
    assert_eq!(losses(0), [none, none]);
}
