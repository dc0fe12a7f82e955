//! The engine's queue of sent work requests awaiting completion, when the datapath reports
//! faster than the firmware completes: a send queue's worth of `TxDone`s, the ACK that
//! covers them and the `TxDone` of a work request posted into a slot that ACK freed, all
//! taken in one batch before any command is polled (a firmware core's step takes up to a
//! ring's worth of reports before it writes its commands). And completions (and windows)
//! ahead of a burst of EV changes, whichever QP has them, and every QP's EV table writes
//! ahead of the host's EV events.

use mrc_abi::device::csr::{self, AckSummary, CsrEntry, CsrEvent, TxDone};
use mrc_abi::Psn;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{
    CcProfile, Completion, CompletionKind, Engine, EngineConfig, EvProfile, QpAttrs, QpState,
};
use mrc_firmware::testkit::TestKit;

const SQ: usize = TestKit::SEND_QUEUE;

fn attrs() -> QpAttrs {
    QpAttrs::connect(
        EvProfile::udp(EvConfig::new(16, 2)),
        CcProfile::Fixed {
            cwnd_bytes: 1 << 20,
        },
        1,
    )
    .window(2, 2)
    .retry(7, 10)
}

/// An engine with QPs `0..qps` in RTS and its setup commands polled.
fn engine_of(qps: usize) -> Box<Engine<TestKit>> {
    let mut e = Box::new(Engine::<TestKit>::new(EngineConfig::default()).unwrap());
    for _ in 0..qps {
        let q = e.create_qp().unwrap();
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            e.modify_qp(q, s, &attrs(), 0).unwrap();
        }
    }
    let mut buf = [CsrEntry::ZERO; 64];
    while e.poll_commands(&mut buf) > 0 {}
    e
}

fn engine() -> Box<Engine<TestKit>> {
    engine_of(1)
}

/// Work request `i` of QP `qpn` (one packet, PSN `i`) sent.
fn tx_done_on(qpn: u32, i: u64) -> CsrEntry {
    CsrEvent::TxDone(TxDone::new(
        qpn,
        i,
        Psn::new(i as u32 + 1),
        csr::TXD_SIGNALED,
    ))
    .encode()
}

fn tx_done(i: u64) -> CsrEntry {
    tx_done_on(0, i)
}

/// The ACK that makes `una` QP `qpn`'s oldest unacknowledged PSN.
fn ack_on(qpn: u32, una: u32) -> CsrEntry {
    CsrEvent::AckSummary(AckSummary::new(
        qpn,
        Psn::new(una),
        csr::ACK_PROGRESS,
        una * 256,
        2_000,
        0,
        0,
        0,
        0,
    ))
    .encode()
}

fn ack(una: u32) -> CsrEntry {
    ack_on(0, una)
}

/// The send completions in the engine's commands, polled until none is left.
fn completions(e: &mut Engine<TestKit>) -> Vec<u64> {
    let mut got = Vec::new();
    let mut buf = [CsrEntry::ZERO; 32];
    loop {
        let n = e.poll_commands(&mut buf);
        if n == 0 {
            return got;
        }
        for c in buf[..n].iter().filter_map(Completion::from_entry) {
            assert_eq!(c.kind, CompletionKind::Send);
            assert!(c.status.is_ok());
            got.push(c.wr_id);
        }
    }
}

#[test]
fn a_send_queue_of_reports_past_the_acknowledged_ones_loses_no_completion() {
    let mut e = engine();
    let mut batch: Vec<CsrEntry> = (0..SQ as u64).map(tx_done).collect();
    // All of them acknowledged: the datapath frees their slots, the host posts one more.
    batch.push(ack(SQ as u32));
    batch.push(tx_done(SQ as u64));
    assert_eq!(e.handle_events(10_000, &batch), batch.len());
    let view = e.qp(0).unwrap();
    assert_eq!(view.counters.awaiting_overflow, 0, "a TxDone found no room");
    assert!(view.awaiting <= SQ);
    let mut got = completions(&mut e);
    // The last one completes when its own ACK comes.
    assert_eq!(e.handle_events(12_000, &[ack(SQ as u32 + 1)]), 1);
    got.extend(completions(&mut e));
    assert_eq!(
        got,
        (0..=SQ as u64).collect::<Vec<_>>(),
        "in posting order, each once"
    );
    assert_eq!(e.qp(0).unwrap().counters.completions, SQ as u64 + 1);
}

#[test]
fn completions_go_before_a_burst_of_ev_changes_of_any_qp() {
    let mut e = engine_of(2);
    // QP 0: a route shared by a dozen of its EVs lost a packet elsewhere (2 commands each).
    for ev in 0..12 {
        e.handle_shared_loss(1_000, 0, ev).unwrap();
    }
    // QP 1: a work request sent and acknowledged.
    assert_eq!(e.handle_events(2_000, &[tx_done_on(1, 7), ack_on(1, 8)]), 2);
    let mut buf = [CsrEntry::ZERO; 4];
    let n = e.poll_commands(&mut buf);
    assert_eq!(n, 4);
    let first: Vec<_> = buf[..n].iter().filter_map(Completion::from_entry).collect();
    assert_eq!(
        first.len(),
        1,
        "the completion is in the first poll: {:?}",
        &buf[..n]
    );
    assert_eq!((first[0].qpn, first[0].wr_id), (1, 7));
    // The EV changes all follow, none lost.
    let mut updates = buf[..n]
        .iter()
        .filter(|c| c.kind_code() == csr::CsrKind::EvUpdate as u8)
        .count();
    loop {
        let m = e.poll_commands(&mut buf);
        if m == 0 {
            break;
        }
        updates += buf[..m]
            .iter()
            .filter(|c| c.kind_code() == csr::CsrKind::EvUpdate as u8)
            .count();
    }
    assert_eq!(updates, 12);
}

#[test]
fn every_qps_ev_table_writes_go_before_the_host_hears_of_any_change() {
    let mut e = engine_of(2);
    // A route both QPs' EVs name lost a packet: 12 EVs of each retire at once.
    for qpn in 0..2 {
        for ev in 0..12 {
            e.handle_shared_loss(1_000, qpn, ev).unwrap();
        }
    }
    // Polled a few entries at a time, as a loop short of ring room does.
    let mut all = Vec::new();
    let mut buf = [CsrEntry::ZERO; 5];
    loop {
        let m = e.poll_commands(&mut buf);
        if m == 0 {
            break;
        }
        all.extend(buf[..m].iter().map(|c| c.decode().unwrap()));
    }
    let updates: Vec<(u32, u16)> = all
        .iter()
        .filter_map(|c| match c {
            CsrEvent::EvUpdate(u) => Some((u.qpn.get(), u.ev.get())),
            _ => None,
        })
        .collect();
    let events: Vec<(u32, u16)> = all
        .iter()
        .filter_map(|c| match c {
            CsrEvent::EvEvent(v) => Some((v.qpn.get(), v.ev.get())),
            _ => None,
        })
        .collect();
    let expected: Vec<(u32, u16)> = (0..2)
        .flat_map(|q| (0..12).map(move |ev| (q, ev)))
        .collect();
    assert_eq!(
        updates, expected,
        "each change written to the sprayer once, in order"
    );
    assert_eq!(events, expected, "each change reported once, in order");
    let last_update = all
        .iter()
        .rposition(|c| matches!(c, CsrEvent::EvUpdate(_) | CsrEvent::PlaneWeight(_)))
        .unwrap();
    let first_event = all
        .iter()
        .position(|c| matches!(c, CsrEvent::EvEvent(_)))
        .unwrap();
    assert!(
        last_update < first_event,
        "every sprayer write before the first host event: {:?}",
        all.iter().map(|c| c.kind()).collect::<Vec<_>>()
    );
    assert!(!e.commands_pending());
}
