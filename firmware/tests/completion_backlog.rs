//! The engine's send completions, when the datapath reports faster than the firmware
//! completes: the work requests a batch of ACK summaries retired, taken in one batch before
//! any command is polled (a firmware core's step takes up to a ring's worth of reports before
//! it writes its commands), come out as few `CompleteSends` orders, none lost. And completions
//! (and windows) ahead of a burst of EV changes, whichever QP has them, and every QP's EV table
//! writes ahead of the host's EV events.

use mrc_abi::device::csr::{self, AckSummary, CsrEntry, CsrEvent, COMPLETE_SENDS_MAX};
use mrc_abi::Psn;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{
    CcProfile, Completion, CompletionError, CompletionKind, Engine, EngineConfig, EvProfile,
    QpAttrs, QpState,
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

/// The ACK that makes `una` QP `qpn`'s oldest unacknowledged PSN, retiring `retired` work
/// requests.
fn ack_on(qpn: u32, una: u32, retired: u16) -> CsrEntry {
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
        retired,
    ))
    .encode()
}

/// The completion orders in the engine's commands, `(qpn, count)`, polled until none is left.
fn orders(e: &mut Engine<TestKit>) -> Vec<(u32, u16)> {
    let mut got = Vec::new();
    let mut buf = [CsrEntry::ZERO; 32];
    loop {
        let n = e.poll_commands(&mut buf);
        if n == 0 {
            return got;
        }
        for c in &buf[..n] {
            assert!(Completion::from_entry(c).is_none(), "{c:?}");
            if let Ok(CsrEvent::CompleteSends(o)) = c.decode() {
                got.push((o.qpn.get(), o.count.get()));
            }
        }
    }
}

#[test]
fn a_batch_of_retired_sends_becomes_one_order_and_loses_none() {
    let mut e = engine();
    // Three summaries, taken before any poll.
    let batch = [ack_on(0, 40, 5), ack_on(0, 41, 0), ack_on(0, 90, 20)];
    assert_eq!(e.handle_events(10_000, &batch), batch.len());
    assert_eq!(e.qp(0).unwrap().awaiting, 25);
    assert_eq!(orders(&mut e), [(0, 25)]);
    let view = e.qp(0).unwrap();
    assert_eq!(view.counters.sends_completed, 25);
    assert_eq!(view.awaiting, 0);
    // Nothing retired: nothing to order.
    assert_eq!(e.handle_events(11_000, &[ack_on(0, 91, 0)]), 1);
    assert!(orders(&mut e).is_empty());
    // A count beyond what the datapath can hold (a send queue) is taken as a send queue's
    // worth, ordered in commands of at most COMPLETE_SENDS_MAX.
    assert_eq!(e.handle_events(12_000, &[ack_on(0, 92, 1_000)]), 1);
    assert_eq!(e.qp(0).unwrap().awaiting, SQ);
    let got = orders(&mut e);
    assert!(got.iter().all(|&(q, n)| q == 0 && n <= COMPLETE_SENDS_MAX));
    assert_eq!(got.iter().map(|&(_, n)| usize::from(n)).sum::<usize>(), SQ);
}

/// Work requests retired but not ordered completed when the QP fails come back from the
/// datapath as flushed, with everything else it held: each completes once, flushed.
#[test]
fn a_failure_leaves_retired_sends_to_the_flush() {
    let mut e = engine();
    assert_eq!(e.handle_events(1_000, &[ack_on(0, 3, 2)]), 1);
    e.modify_qp(0, QpState::Error, &attrs(), 2_000).unwrap();
    let mut buf = [CsrEntry::ZERO; 32];
    let n = e.poll_commands(&mut buf);
    let kinds: Vec<_> = buf[..n].iter().map(|c| c.kind_code()).collect();
    assert!(
        !kinds.contains(&(csr::CsrKind::CompleteSends as u8)),
        "{kinds:?}"
    );
    assert!(kinds.contains(&(csr::CsrKind::QpState as u8)), "{kinds:?}");
    let flushed: Vec<CsrEntry> = (0..3)
        .map(|i| CsrEvent::Flushed(csr::Flushed::new(0, i, csr::FLUSH_SIGNALED)).encode())
        .collect();
    assert_eq!(e.handle_events(3_000, &flushed), 3);
    let mut got = Vec::new();
    loop {
        let n = e.poll_commands(&mut buf);
        if n == 0 {
            break;
        }
        got.extend(buf[..n].iter().filter_map(Completion::from_entry));
    }
    let ids: Vec<u64> = got.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [0, 1, 2]);
    assert!(got.iter().all(|c| c.kind == CompletionKind::Send));
    assert!(got
        .iter()
        .all(|c| c.status == Err(CompletionError::Flushed)));
}

#[test]
fn completions_go_before_a_burst_of_ev_changes_of_any_qp() {
    let mut e = engine_of(2);
    // QP 0: a route shared by a dozen of its EVs lost a packet elsewhere (2 commands each).
    for ev in 0..12 {
        e.handle_shared_loss(1_000, 0, ev).unwrap();
    }
    // QP 1: a work request sent and acknowledged.
    assert_eq!(e.handle_events(2_000, &[ack_on(1, 8, 1)]), 1);
    let mut buf = [CsrEntry::ZERO; 4];
    let n = e.poll_commands(&mut buf);
    assert_eq!(n, 4);
    let first: Vec<_> = buf[..n]
        .iter()
        .filter_map(|c| match c.decode() {
            Ok(CsrEvent::CompleteSends(o)) => Some((o.qpn.get(), o.count.get())),
            _ => None,
        })
        .collect();
    assert_eq!(
        first,
        [(1, 1)],
        "the completion is in the first poll: {:?}",
        &buf[..n]
    );
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
