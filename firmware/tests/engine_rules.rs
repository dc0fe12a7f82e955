//! The engine's rules one at a time, on two connected engines with a hand-driven wire.

use mrc_abi::wire::{EvFormat, NackReason};
use mrc_abi::Psn;
use mrc_firmware::datapath::{Access, MemRegion};
use mrc_firmware::engine::ev_state::{EvConfig, EvState};
use mrc_firmware::engine::{
    Attr, CcProfile, Completion, CompletionError, CompletionKind, DropReason, EvProfile, LocalBuf,
    QpAttrs, QpError, QpHint, QpState, RxMeta, RxVerdict, SendWr, TxBody, TxPacket,
};
use mrc_firmware::testkit::TkEngine;

const VA: u64 = 0x8000_0000;
const RKEY: u32 = 0x55;

fn attrs(dest: u32, retry_cnt: u8) -> QpAttrs {
    QpAttrs {
        hint: Some(QpHint::default()),
        ev_profile: Some(EvProfile {
            table: EvConfig::new(16, 2),
            format: EvFormat::Udp,
            value_base: 0xC000,
        }),
        cc_profile: Some(CcProfile::Fixed {
            cwnd_bytes: 1 << 20,
        }),
        dest_qpn: Some(dest),
        rq_psn: Some(Psn::new(100)),
        responder_mpr: Some(2),
        dynamic_mpr: None,
        responder_max_wimm: Some(2),
        sq_psn: Some(Psn::new(100)),
        requester_mpr: Some(2),
        requester_max_wimm: Some(2),
        retry_cnt: Some(retry_cnt),
        timeout: Some(3),
    }
}

struct Two {
    e: [Box<TkEngine>; 2],
    now: u64,
}

impl Two {
    fn new(retry_cnt: u8) -> Self {
        Self::new_with(retry_cnt, |cfg| Box::new(TkEngine::new(cfg).unwrap()))
    }

    /// Two engines from `make` (a constructor under test), connected and in RTS.
    #[allow(clippy::needless_range_loop)]
    fn new_with(
        retry_cnt: u8,
        make: impl Fn(mrc_firmware::engine::EngineConfig) -> Box<TkEngine>,
    ) -> Self {
        let cfg = mrc_firmware::engine::EngineConfig {
            mtu_payload: 256,
            // A short reorder threshold, so a dozen packets show loss inference.
            reorder_tx: 8,
            ..Default::default()
        };
        let mut e = [make(cfg), make(cfg)];
        for n in 0..2 {
            assert_eq!(e[n].create_qp(), Ok(0));
            e[n].register_region(MemRegion {
                rkey: RKEY,
                base_va: VA,
                length: 4096,
                access: Access::REMOTE_WRITE,
            })
            .unwrap();
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                e[n].modify_qp(0, s, &attrs(0, retry_cnt), 0).unwrap();
            }
        }
        Two { e, now: 0 }
    }

    fn wr(id: u64, len: u32, rkey: u32, imm: Option<u32>) -> SendWr {
        SendWr {
            wr_id: id,
            local: LocalBuf::default(),
            remote_va: VA,
            rkey,
            len,
            imm,
            signaled: true,
        }
    }

    fn out(&mut self, n: usize) -> Vec<TxPacket> {
        std::iter::from_fn(|| self.e[n].poll_transmit(self.now)).collect()
    }

    fn deliver(&mut self, to: usize, p: &TxPacket, trimmed: bool) -> RxVerdict {
        let mut r = p.to_repr();
        r.mrh.trimmed = trimmed;
        let payload_len = if trimmed { 0 } else { p.payload_len() };
        self.e[to].handle_packet(
            self.now,
            &r,
            RxMeta {
                payload_len,
                ce: false,
            },
        )
    }

    fn completions(&mut self, n: usize) -> Vec<Completion> {
        std::iter::from_fn(|| self.e[n].poll_completion()).collect()
    }
}

#[test]
fn qp_attribute_rules_are_errors() {
    let mut e = TkEngine::new(Default::default()).unwrap();
    let q = e.create_qp().unwrap();
    assert_eq!(
        e.modify_qp(q, QpState::Rts, &attrs(0, 3), 0),
        Err(QpError::BadTransition {
            from: QpState::Reset,
            to: QpState::Rts
        })
    );
    let no_cc = QpAttrs {
        cc_profile: None,
        ..attrs(0, 3)
    };
    assert_eq!(
        e.modify_qp(q, QpState::Init, &no_cc, 0),
        Err(QpError::MissingAttr(Attr::CcProfile))
    );
    assert_eq!(e.qp_state(q), Some(QpState::Reset));
    e.modify_qp(q, QpState::Init, &attrs(0, 3), 0).unwrap();
    let big = QpAttrs {
        responder_mpr: Some(5),
        ..attrs(0, 3)
    };
    assert_eq!(
        e.modify_qp(q, QpState::Rtr, &big, 0),
        Err(QpError::MprTooLarge { mpr: 5, max: 4 })
    );
    assert!(matches!(
        e.post_send(q, Two::wr(1, 10, RKEY, None)),
        Err(QpError::WrongState { .. })
    ));
    e.modify_qp(q, QpState::Error, &QpAttrs::default(), 0)
        .unwrap();
    e.modify_qp(q, QpState::Reset, &QpAttrs::default(), 0)
        .unwrap();
    assert_eq!(e.qp_state(q), Some(QpState::Reset));
    assert_eq!(
        e.modify_qp(7, QpState::Init, &attrs(0, 3), 0),
        Err(QpError::UnknownQp { qpn: 7 })
    );
}

#[test]
fn a_bad_rkey_is_nacked_fatal_and_never_written() {
    let mut t = Two::new(3);
    t.e[0]
        .post_send(0, Two::wr(1, 100, RKEY + 1, None))
        .unwrap();
    t.e[0].post_send(0, Two::wr(2, 100, RKEY, None)).unwrap();
    let pkts = t.out(0);
    assert_eq!(pkts.len(), 2);
    assert_eq!(
        t.deliver(1, &pkts[0], false),
        RxVerdict::Dropped(DropReason::RemoteAccess)
    );
    assert_eq!(t.e[1].qp_state(0), Some(QpState::Error));
    // The QP in ERROR NACKs the next write instead of placing it.
    assert_eq!(
        t.deliver(1, &pkts[1], false),
        RxVerdict::Dropped(DropReason::QpNotReady)
    );
    assert_eq!(t.e[1].counters().placed, 0);
    let back = t.out(1);
    let TxBody::Nack(n) = back[0].body else {
        panic!("{back:?}")
    };
    assert_eq!(n.reason, NackReason::RemoteAccess);
    for p in &back {
        t.deliver(0, p, false);
    }
    assert_eq!(t.e[0].qp_state(0), Some(QpState::Error));
    let c = t.completions(0);
    assert_eq!(c.len(), 2);
    assert_eq!(
        c[0].status,
        Err(CompletionError::RemoteNack(NackReason::RemoteAccess))
    );
    assert_eq!(
        (c[1].wr_id, c[1].status),
        (2, Err(CompletionError::Flushed))
    );
}

#[test]
fn write_with_immediate_without_a_receive_buffer_is_fatal() {
    let mut t = Two::new(3);
    t.e[0].post_send(0, Two::wr(1, 10, RKEY, Some(9))).unwrap();
    let p = t.out(0);
    assert_eq!(
        t.deliver(1, &p[0], false),
        RxVerdict::Dropped(DropReason::NoRecvBuffer)
    );
    let back = t.out(1);
    assert!(matches!(back[0].body, TxBody::Nack(n) if n.reason == NackReason::NoRecvBuffer));
    t.deliver(0, &back[0], false);
    let c = t.completions(0);
    assert_eq!(
        c[0].status,
        Err(CompletionError::RemoteNack(NackReason::NoRecvBuffer))
    );
}

#[test]
fn immediate_completes_only_when_every_earlier_psn_is_placed() {
    let mut t = Two::new(3);
    t.e[1].post_recv(0, 77).unwrap();
    t.e[0].post_send(0, Two::wr(1, 600, RKEY, None)).unwrap(); // 3 packets
    t.e[0]
        .post_send(0, Two::wr(2, 8, RKEY, Some(0xabc)))
        .unwrap(); // 1 packet
    let p = t.out(0);
    assert_eq!(p.len(), 4);
    for i in [3, 2, 0] {
        assert!(matches!(
            t.deliver(1, &p[i], false),
            RxVerdict::Place { .. }
        ));
    }
    assert!(t.completions(1).is_empty(), "PSN of packet 1 still missing");
    assert!(matches!(
        t.deliver(1, &p[1], false),
        RxVerdict::Place { .. }
    ));
    let c = t.completions(1);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].wr_id, 77);
    assert!(matches!(
        c[0].kind,
        CompletionKind::RecvImm { imm: 0xabc, msn: 1 }
    ));
    // A duplicate is re-ACKed, not placed again.
    assert_eq!(
        t.deliver(1, &p[1], false),
        RxVerdict::Dropped(DropReason::Duplicate)
    );
}

#[test]
fn trimmed_packets_are_resent_and_keep_their_ev() {
    let mut t = Two::new(3);
    t.e[0].post_send(0, Two::wr(1, 100, RKEY, None)).unwrap();
    let p = t.out(0);
    let ev = p[0].evx.ev_index;
    assert_eq!(
        t.deliver(1, &p[0], true),
        RxVerdict::Dropped(DropReason::Trimmed)
    );
    let back = t.out(1);
    assert!(matches!(back[0].body, TxBody::Nack(n) if n.reason == NackReason::Trimmed));
    t.deliver(0, &back[0], false);
    let again = t.out(0);
    assert_eq!(again.len(), 1);
    assert!(again[0].retransmit);
    assert_eq!(again[0].psn, p[0].psn);
    let st = t.e[0].qp(0).unwrap().ev_table().state(ev).unwrap();
    assert_eq!(st, EvState::Good);
}

#[test]
fn an_untrimmed_loss_retires_its_ev_and_resends_elsewhere() {
    let mut t = Two::new(3);
    for i in 0..12 {
        t.e[0].post_send(0, Two::wr(i, 256, RKEY, None)).unwrap();
    }
    let p = t.out(0);
    assert_eq!(p.len(), 12);
    let lost_ev = p[0].evx.ev_index;
    for pkt in &p[1..] {
        t.deliver(1, pkt, false);
    }
    for a in t.out(1) {
        t.deliver(0, &a, false);
    }
    let st = t.e[0].qp(0).unwrap().ev_table().state(lost_ev).unwrap();
    assert_eq!(st, EvState::AssumedBad);
    let again = t.out(0);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].psn, p[0].psn);
    assert_ne!(again[0].evx.ev_index, lost_ev);
    assert!(std::iter::from_fn(|| t.e[0].poll_ev_event()).any(|e| e.event.ev == lost_ev));
}

#[test]
fn retries_run_out_into_an_error_completion_and_a_flush() {
    let mut t = Two::new(2);
    t.e[0].post_send(0, Two::wr(1, 10, RKEY, None)).unwrap();
    t.e[0].post_send(0, Two::wr(2, 10, RKEY, None)).unwrap();
    let _ = t.out(0); // lost
    let mut sent = 0;
    for _ in 0..20 {
        let Some(at) = t.e[0].poll_timeout() else {
            break;
        };
        t.now = at;
        t.e[0].handle_timeout(t.now);
        sent += t.out(0).len();
        if t.e[0].qp_state(0) == Some(QpState::Error) {
            break;
        }
    }
    // Each timeout requeues both PSNs but sends only the oldest: the rest waits for an answer
    // that never comes (the loss window after a timeout).
    assert_eq!(sent, 2, "two retries of the oldest packet");
    assert_eq!(t.e[0].qp_state(0), Some(QpState::Error));
    let c = t.completions(0);
    assert_eq!(c[0].status, Err(CompletionError::RetryExceeded));
    assert_eq!(c[1].status, Err(CompletionError::Flushed));
}

/// After an ACK timeout only the oldest PSN is resent until the peer answers: the PSNs that
/// arrived but that no ACK reported (their ACKs were lost) are acknowledged by the answer to
/// that one retransmission and never sent twice.
#[test]
fn a_timeout_resends_the_oldest_psn_and_waits_for_the_answer() {
    let mut t = Two::new(3);
    t.e[0]
        .post_send(0, Two::wr(1, 6 * 256, RKEY, None))
        .unwrap();
    let p = t.out(0);
    assert_eq!(p.len(), 6);
    // The first packet is lost; the others arrive, but every ACK for them is lost.
    for pkt in &p[1..] {
        t.deliver(1, pkt, false);
    }
    assert!(!t.out(1).is_empty());
    t.now = t.e[0].poll_timeout().unwrap();
    t.e[0].handle_timeout(t.now);
    let again = t.out(0);
    assert_eq!(again.len(), 1, "only the oldest PSN before an answer");
    assert_eq!(again[0].psn, p[0].psn);
    assert!(again[0].retransmit);
    // Nothing more leaves while the answer is on its way.
    assert!(t.out(0).is_empty());
    t.deliver(1, &again[0], false);
    for a in t.out(1) {
        t.deliver(0, &a, false);
    }
    // The answer acknowledged all six: the five requeued PSNs that arrived are not resent.
    assert!(t.out(0).is_empty());
    assert_eq!(t.e[1].counters().rx_duplicate, 0);
    assert_eq!(t.e[0].counters().retransmits_sent, 1);
    let c = t.completions(0);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, Ok(()));
}

/// After an ACK timeout, once the peer answers, the PSNs it did not acknowledge all leave.
#[test]
fn an_answer_after_a_timeout_sends_the_rest_of_the_queue() {
    let mut t = Two::new(3);
    t.e[0]
        .post_send(0, Two::wr(1, 6 * 256, RKEY, None))
        .unwrap();
    let p = t.out(0);
    assert_eq!(p.len(), 6);
    // Everything is lost (an outage).
    t.now = t.e[0].poll_timeout().unwrap();
    t.e[0].handle_timeout(t.now);
    let again = t.out(0);
    assert_eq!(again.len(), 1);
    t.deliver(1, &again[0], false);
    // (the first packet of a message: its ACK waits for the coalescing timer)
    t.now = t.e[1].poll_timeout().unwrap();
    assert!(t.now < t.e[0].poll_timeout().unwrap());
    t.e[1].handle_timeout(t.now);
    for a in t.out(1) {
        t.deliver(0, &a, false);
    }
    // The answer acknowledged the first PSN only: the other five leave now, in PSN order.
    let rest = t.out(0);
    let psns: Vec<_> = rest.iter().map(|r| r.psn).collect();
    let want: Vec<_> = p[1..].iter().map(|r| r.psn).collect();
    assert_eq!(psns, want);
    assert!(rest.iter().all(|r| r.retransmit));
}

#[test]
fn every_acked_packet_credits_its_own_ev() {
    let mut t = Two::new(3);
    for i in 0..6 {
        t.e[0].post_send(0, Two::wr(i, 256, RKEY, None)).unwrap();
    }
    let p = t.out(0);
    assert_eq!(p.len(), 6);
    for pkt in &p {
        t.deliver(1, pkt, false);
    }
    let acks = t.out(1);
    assert!(!acks.is_empty());
    for a in &acks {
        t.deliver(0, a, false);
    }
    let table = t.e[0].qp(0).unwrap().ev_table();
    // Each packet went out on its own EV; each of those EVs saw exactly one delivery, however
    // few ACKs covered them (the ACK names only the EV of the packet that triggered it).
    for pkt in &p {
        let s = table.stats(pkt.evx.ev_index).unwrap();
        assert_eq!(s.delivered, 1, "EV {}", pkt.evx.ev_index);
    }
    let total: u64 = (0..table.config().evs)
        .map(|e| table.stats(e).unwrap().delivered)
        .sum();
    assert_eq!(total, 6);
}

#[test]
fn qps_of_one_engine_take_turns_in_bursts() {
    use mrc_firmware::engine::TX_BURST_PKTS;
    let mut t = Two::new(3);
    assert_eq!(t.e[0].create_qp(), Ok(1));
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        t.e[0].modify_qp(1, s, &attrs(1, 3), 0).unwrap();
    }
    // Both QPs have far more work than one burst and a window that never closes.
    let burst = usize::from(TX_BURST_PKTS);
    let len = 256 * 4 * burst as u32;
    t.e[0].post_send(0, Two::wr(1, len, RKEY, None)).unwrap();
    t.e[0].post_send(1, Two::wr(2, len, RKEY, None)).unwrap();
    let order: Vec<u32> = t
        .out(0)
        .iter()
        .filter(|p| matches!(p.body, TxBody::Write { .. }))
        .map(|p| p.src_qpn)
        .collect();
    assert_eq!(order.len(), 8 * burst);
    for (i, q) in order.iter().enumerate() {
        assert_eq!(*q, ((i / burst) % 2) as u32, "packet {i}: {order:?}");
    }
}

/// `poll_transmit_batch` keeps the turns: two busy QPs drained in batches of 7 (not a multiple
/// of the burst) give the packets, in the order and with the contents, of single polls.
#[test]
fn batched_transmit_keeps_the_burst_turns() {
    use mrc_firmware::engine::TX_BURST_PKTS;
    let burst = usize::from(TX_BURST_PKTS);
    let setup = || {
        let mut t = Two::new(3);
        assert_eq!(t.e[0].create_qp(), Ok(1));
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            t.e[0].modify_qp(1, s, &attrs(1, 3), 0).unwrap();
        }
        let len = 256 * 4 * burst as u32;
        t.e[0].post_send(0, Two::wr(1, len, RKEY, None)).unwrap();
        t.e[0].post_send(1, Two::wr(2, len, RKEY, None)).unwrap();
        t
    };
    let mut single = setup();
    let one = single.out(0);
    let mut batched = setup();
    let mut many = Vec::new();
    let mut buf = [TxPacket::FILL; 7];
    loop {
        let k = batched.e[0].poll_transmit_batch(batched.now, &mut buf);
        many.extend_from_slice(&buf[..k]);
        if k == 0 {
            break;
        }
    }
    assert!(one.len() >= 8 * burst, "{} packets", one.len());
    assert_eq!(many.len(), one.len());
    for (i, (a, b)) in one.iter().zip(&many).enumerate() {
        assert_eq!(a, b, "packet {i}");
    }
}

/// An engine built over garbage memory with `Engine::init_in_place` (how the NIC image builds
/// its engine in `.bss`).
fn in_place_over_garbage(cfg: mrc_firmware::engine::EngineConfig) -> Box<TkEngine> {
    let mut slot = Box::<TkEngine>::new_uninit();
    // SAFETY: any bytes may be written into an uninitialised block of its own size; garbage
    // first, so nothing can depend on the memory starting zeroed.
    unsafe {
        slot.as_mut_ptr()
            .cast::<u8>()
            .write_bytes(0xA5, core::mem::size_of::<TkEngine>())
    };
    TkEngine::init_in_place(&mut slot, TkEngine::check(cfg).unwrap());
    // SAFETY: `init_in_place` initialises every field (its contract).
    unsafe { slot.assume_init() }
}

/// Everything two connected engines send and complete over a lossy exchange: two writes, a
/// write with immediate, one packet lost (retransmitted after the ACK timeout), one trimmed.
fn exchange_trace(mut t: Two) -> Vec<String> {
    let mut trace = Vec::new();
    t.e[1].post_recv(0, 77).unwrap();
    t.e[0].post_send(0, Two::wr(1, 700, RKEY, None)).unwrap();
    t.e[0].post_send(0, Two::wr(2, 300, RKEY, None)).unwrap();
    t.e[0].post_send(0, Two::wr(3, 200, RKEY, Some(5))).unwrap();
    for round in 0..40 {
        t.now += 2_000;
        for n in 0..2 {
            if t.e[n].poll_timeout().is_some_and(|at| at <= t.now) {
                t.e[n].handle_timeout(t.now);
            }
        }
        let out = t.out(0);
        for (i, p) in out.iter().enumerate() {
            trace.push(format!("0> {p:?}"));
            if round == 0 && i == 1 {
                continue; // lost
            }
            let v = t.deliver(1, p, round == 0 && i == 2);
            trace.push(format!("1< {v:?}"));
        }
        for p in t.out(1) {
            trace.push(format!("1> {p:?}"));
            let v = t.deliver(0, &p, false);
            trace.push(format!("0< {v:?}"));
        }
        for n in 0..2 {
            for c in t.completions(n) {
                trace.push(format!("{n}c {c:?}"));
            }
        }
    }
    trace.push(format!("{:?} {:?}", t.e[0].counters(), t.e[1].counters()));
    trace
}

#[test]
fn an_engine_built_in_place_behaves_as_one_built_by_value() {
    let by_value = exchange_trace(Two::new(3));
    let in_place = exchange_trace(Two::new_with(3, in_place_over_garbage));
    // The exchange did what it is for: a retransmission and all three completions.
    let all = by_value.join("\n");
    assert!(all.contains("wr_id: 3"), "{all}");
    assert!(
        by_value.iter().filter(|l| l.starts_with("0c")).count() == 3,
        "{all}"
    );
    assert_eq!(by_value, in_place);
}

/// A loss inferred on one QP is resent ahead of the turn of another QP with new data, and the
/// turn stays where it was (that QP's burst goes on after the retransmission).
#[test]
fn a_retransmission_goes_ahead_of_another_qps_turn() {
    use mrc_firmware::engine::TX_BURST_PKTS;
    let burst = usize::from(TX_BURST_PKTS);
    let mut t = Two::new(3);
    assert_eq!(t.e[0].create_qp(), Ok(1));
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        t.e[0].modify_qp(1, s, &attrs(1, 3), 0).unwrap();
    }
    for i in 0..12 {
        t.e[0].post_send(0, Two::wr(i, 256, RKEY, None)).unwrap();
    }
    let p = t.out(0);
    assert_eq!(p.len(), 12);
    // QP 1 gets work and starts its burst.
    t.e[0]
        .post_send(1, Two::wr(100, 256 * 4 * burst as u32, RKEY, None))
        .unwrap();
    let first = t.e[0].poll_transmit(t.now).unwrap();
    assert_eq!((first.src_qpn, first.retransmit), (1, false));
    // QP 0's first packet was lost: the ACKs of the others make the engine infer it.
    for pkt in &p[1..] {
        t.deliver(1, pkt, false);
    }
    for a in t.out(1) {
        t.deliver(0, &a, false);
    }
    let next: Vec<TxPacket> = t
        .out(0)
        .into_iter()
        .filter(|p| matches!(p.body, TxBody::Write { .. }))
        .collect();
    assert_eq!((next[0].src_qpn, next[0].psn), (0, p[0].psn));
    assert!(next[0].retransmit);
    // Then QP 1's burst goes on where it was.
    for (i, pkt) in next[1..burst].iter().enumerate() {
        assert_eq!(pkt.src_qpn, 1, "packet {i} after the retransmission");
    }
}

/// A receive batch (runs of writes whose placement is checked once for the run when their
/// payloads follow one another in one region) has exactly the effects of the packets
/// received one at a time: placed count, counters, QP state and the packets sent back, for
/// a run inside the region, one crossing its end, one whose last packet jumps past the end,
/// one with another rkey in the middle and one whose addresses wrap.
#[test]
fn a_receive_batch_places_as_one_packet_at_a_time() {
    use mrc_firmware::datapath::ack_gen::TrimMark;
    fn set_va(p: &mut TxPacket, va: u64) {
        if let TxBody::Write { reth, .. } = &mut p.body {
            reth.va = va;
        }
    }
    /// A variant: its name, and the edit of packet `k` of the run.
    type Variant = (&'static str, fn(usize, &mut TxPacket));
    let variants: [Variant; 5] = [
        ("inside", |_, _| {}),
        ("crossing the end", |k, p| {
            set_va(p, VA + 3584 + 256 * k as u64)
        }),
        ("jumping past the end", |k, p| {
            if k == 7 {
                set_va(p, VA + 4096)
            }
        }),
        ("another rkey", |k, p| {
            if let (2, TxBody::Write { reth, .. }) = (k, &mut p.body) {
                reth.rkey = RKEY + 1;
            }
        }),
        ("wrapping", |k, p| {
            if let TxBody::Write { reth, .. } = &mut p.body {
                reth.rkey = TOP_RKEY;
            }
            set_va(p, (u64::MAX - 511).wrapping_add(256 * k as u64))
        }),
    ];
    // A region ending at the top of the address space (its last byte is not placeable:
    // regions do not wrap).
    const TOP_RKEY: u32 = RKEY + 7;
    let top = MemRegion {
        rkey: TOP_RKEY,
        base_va: u64::MAX - 4095,
        length: 4095,
        access: Access::REMOTE_WRITE,
    };
    let mut partial = 0;
    for (name, edit) in variants {
        let (mut batch, mut single) = (Two::new(3), Two::new(3));
        batch.e[1].register_region(top).unwrap();
        single.e[1].register_region(top).unwrap();
        batch.e[0]
            .post_send(0, Two::wr(1, 2048, RKEY, None))
            .unwrap();
        let mut pkts = batch.out(0);
        assert_eq!(pkts.len(), 8, "{name}");
        for (k, p) in pkts.iter_mut().enumerate() {
            edit(k, p);
        }
        let placed = batch.e[1].handle_tx_batch(0, &pkts);
        let mut one_by_one = 0;
        for p in &pkts {
            let meta = RxMeta {
                payload_len: p.payload_len(),
                ce: false,
            };
            if let RxVerdict::Place { .. } =
                single.e[1].handle_tx_packet(0, p, TrimMark::None, meta)
            {
                one_by_one += 1;
            }
        }
        assert_eq!(placed, one_by_one, "{name}");
        partial += usize::from(placed > 0 && placed < 8);
        assert_eq!(batch.e[1].counters(), single.e[1].counters(), "{name}");
        assert_eq!(batch.e[1].qp_state(0), single.e[1].qp_state(0), "{name}");
        assert_eq!(batch.out(1), single.out(1), "{name}");
    }
    // All but the first stop part way (the wrap after one packet).
    assert_eq!(partial, 4);
}
