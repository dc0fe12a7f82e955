//! The NIC's rules one at a time, on two connected NICs (datapath stage and firmware engine
//! each, through the test kit's `Nic`) with a hand-driven wire.

use mrc_abi::wire::NackReason;
use mrc_abi::Psn;
use mrc_firmware::datapath::packet::{DropReason, LocalBuf, Packet, PacketBody, RxVerdict, SendWr};
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::datapath::stage::{DatapathConfig, PostError, TX_BURST_PKTS};
use mrc_firmware::engine::ev_state::{EvConfig, EvState};
use mrc_firmware::engine::{
    Attr, CcProfile, Completion, CompletionError, CompletionKind, EngineConfig, EvProfile, QpAttrs,
    QpError, QpState,
};
use mrc_firmware::testkit::{HostWrite, Nic, TestKit};

const VA: u64 = 0x8000_0000;
const RKEY: u32 = 0x55;

fn attrs(dest: u32, retry_cnt: u8) -> QpAttrs {
    QpAttrs::connect(
        EvProfile::udp(EvConfig::new(16, 2)),
        CcProfile::Fixed {
            cwnd_bytes: 1 << 20,
        },
        dest,
    )
    .psns(Psn::new(100), Psn::new(100))
    .window(2, 2)
    .retry(retry_cnt, 3)
}

fn nic() -> Box<Nic<TestKit>> {
    let dp = DatapathConfig {
        mtu_payload: 256,
        ..DatapathConfig::DEFAULT
    };
    // A short reorder threshold, so a dozen packets show loss inference.
    let fw = EngineConfig {
        reorder_tx: 8,
        ..EngineConfig::default()
    };
    Box::new(Nic::new(dp, fw).unwrap())
}

struct Two {
    n: [Box<Nic<TestKit>>; 2],
    now: u64,
    host: [Vec<HostWrite>; 2],
}

impl Two {
    /// Two NICs, QP 0 of each connected to the other's and in RTS.
    fn new(retry_cnt: u8) -> Self {
        let mut t = Two {
            n: [nic(), nic()],
            now: 0,
            host: [Vec::new(), Vec::new()],
        };
        for n in 0..2 {
            assert_eq!(t.n[n].create_qp(), Ok(0));
            t.n[n]
                .register_region(MemRegion {
                    rkey: RKEY,
                    base_va: VA,
                    length: 4096,
                    access: Access::REMOTE_WRITE,
                })
                .unwrap();
            t.modify(n, 0, attrs(0, retry_cnt));
        }
        t
    }

    /// QP `q` of NIC `n` to RTS with `a`.
    fn modify(&mut self, n: usize, q: u32, a: QpAttrs) {
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            self.n[n].modify_qp(q, s, &a, self.now).unwrap();
        }
        self.pump(n);
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

    fn post(&mut self, n: usize, q: u32, wr: SendWr) -> Result<(), PostError> {
        self.n[n].post_send(q, wr)
    }

    fn pump(&mut self, n: usize) {
        let host = &mut self.host[n];
        self.n[n].pump(self.now, &mut |w| host.push(w));
    }

    /// Everything NIC `n` sends now, `batch` packets per call.
    fn out_by(&mut self, n: usize, batch: usize) -> Vec<Packet> {
        self.pump(n);
        let mut all = Vec::new();
        let mut buf = vec![Packet::FILL; batch];
        loop {
            let host = &mut self.host[n];
            let k = self.n[n].transmit(self.now, &mut buf, &mut |w| host.push(w));
            all.extend_from_slice(&buf[..k]);
            self.pump(n);
            if k == 0 {
                return all;
            }
        }
    }

    fn out(&mut self, n: usize) -> Vec<Packet> {
        self.out_by(n, 64)
    }

    fn deliver(&mut self, to: usize, p: &Packet, trimmed: bool) -> RxVerdict {
        let mut p = *p;
        if trimmed {
            p.trim_to(mrc_firmware::datapath::ack_gen::TrimMark::Trimmed);
        }
        let mut v = [RxVerdict::Consumed];
        let host = &mut self.host[to];
        self.n[to].receive(self.now, &[p], &mut v, &mut |w| host.push(w));
        self.pump(to);
        v[0]
    }

    fn completions(&mut self, n: usize) -> Vec<Completion> {
        self.pump(n);
        let mut c = Vec::new();
        self.host[n].retain(|w| match w {
            HostWrite::Completion(x) => {
                c.push(*x);
                false
            }
            _ => true,
        });
        c
    }

    fn ev_events(&mut self, n: usize) -> Vec<u16> {
        self.pump(n);
        let mut v = Vec::new();
        self.host[n].retain(|w| match w {
            HostWrite::EvEvent { ev, .. } => {
                v.push(*ev);
                false
            }
            _ => true,
        });
        v
    }

    /// NIC `n`'s next timer, then its timers at that time.
    fn next_timeout(&mut self, n: usize) {
        self.now = self.n[n].poll_timeout().expect("a timer is armed");
        self.n[n].handle_timeout(self.now);
        self.pump(n);
    }

    fn state(&self, n: usize) -> Option<QpState> {
        self.n[n].fw.qp_state(0)
    }

    fn ev_state(&self, n: usize, ev: u16) -> EvState {
        self.n[n].fw.ev_stats(0, ev).unwrap().state
    }
}

#[test]
fn qp_attribute_rules_are_errors() {
    let mut n = nic();
    let q = n.create_qp().unwrap();
    assert_eq!(
        n.modify_qp(q, QpState::Rts, &attrs(0, 3), 0),
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
        n.modify_qp(q, QpState::Init, &no_cc, 0),
        Err(QpError::MissingAttr(Attr::CcProfile))
    );
    assert_eq!(n.fw.qp_state(q), Some(QpState::Reset));
    n.modify_qp(q, QpState::Init, &attrs(0, 3), 0).unwrap();
    let big = QpAttrs {
        responder_mpr: Some(5),
        ..attrs(0, 3)
    };
    assert_eq!(
        n.modify_qp(q, QpState::Rtr, &big, 0),
        Err(QpError::MprTooLarge { mpr: 5, max: 4 })
    );
    n.pump(0, &mut |_| {});
    assert_eq!(
        n.post_send(q, Two::wr(1, 10, RKEY, None)),
        Err(PostError::NotSending)
    );
    n.modify_qp(q, QpState::Error, &QpAttrs::default(), 0)
        .unwrap();
    n.modify_qp(q, QpState::Reset, &QpAttrs::default(), 0)
        .unwrap();
    assert_eq!(n.fw.qp_state(q), Some(QpState::Reset));
    assert_eq!(
        n.modify_qp(7, QpState::Init, &attrs(0, 3), 0),
        Err(QpError::UnknownQp { qpn: 7 })
    );
}

#[test]
fn a_bad_rkey_is_nacked_fatal_and_never_written() {
    let mut t = Two::new(3);
    t.post(0, 0, Two::wr(1, 100, RKEY + 1, None)).unwrap();
    t.post(0, 0, Two::wr(2, 100, RKEY, None)).unwrap();
    let pkts = t.out(0);
    assert_eq!(pkts.len(), 2);
    assert_eq!(
        t.deliver(1, &pkts[0], false),
        RxVerdict::Dropped(DropReason::RemoteAccess)
    );
    assert_eq!(t.state(1), Some(QpState::Error));
    // The QP in ERROR NACKs the next write instead of placing it.
    assert_eq!(
        t.deliver(1, &pkts[1], false),
        RxVerdict::Dropped(DropReason::QpNotReady)
    );
    assert_eq!(t.n[1].dp.counters().placed, 0);
    let back = t.out(1);
    let PacketBody::Nack(n) = back[0].body else {
        panic!("{back:?}")
    };
    assert_eq!(n.reason, NackReason::RemoteAccess);
    for p in &back {
        t.deliver(0, p, false);
    }
    assert_eq!(t.state(0), Some(QpState::Error));
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
    // The responder flushes its receives too: none was posted, none completes.
    assert!(t.completions(1).is_empty());
}

#[test]
fn write_with_immediate_without_a_receive_buffer_is_fatal() {
    let mut t = Two::new(3);
    t.post(0, 0, Two::wr(1, 10, RKEY, Some(9))).unwrap();
    let p = t.out(0);
    assert_eq!(
        t.deliver(1, &p[0], false),
        RxVerdict::Dropped(DropReason::NoRecvBuffer)
    );
    let back = t.out(1);
    assert!(matches!(back[0].body, PacketBody::Nack(n) if n.reason == NackReason::NoRecvBuffer));
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
    t.n[1].post_recv(0, 77).unwrap();
    t.post(0, 0, Two::wr(1, 600, RKEY, None)).unwrap(); // 3 packets
    t.post(0, 0, Two::wr(2, 8, RKEY, Some(0xabc))).unwrap(); // 1 packet
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
    t.post(0, 0, Two::wr(1, 100, RKEY, None)).unwrap();
    let p = t.out(0);
    let ev = p[0].evx.ev_index;
    assert_eq!(
        t.deliver(1, &p[0], true),
        RxVerdict::Dropped(DropReason::Trimmed)
    );
    let back = t.out(1);
    assert!(matches!(back[0].body, PacketBody::Nack(n) if n.reason == NackReason::Trimmed));
    t.deliver(0, &back[0], false);
    let again = t.out(0);
    assert_eq!(again.len(), 1);
    assert!(again[0].retransmit);
    assert_eq!(again[0].psn, p[0].psn);
    assert_eq!(t.ev_state(0, ev), EvState::Good);
}

#[test]
fn an_untrimmed_loss_retires_its_ev_and_resends_elsewhere() {
    let mut t = Two::new(3);
    for i in 0..12 {
        t.post(0, 0, Two::wr(i, 256, RKEY, None)).unwrap();
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
    assert_eq!(t.ev_state(0, lost_ev), EvState::AssumedBad);
    let again = t.out(0);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].psn, p[0].psn);
    assert_ne!(again[0].evx.ev_index, lost_ev);
    assert!(t.ev_events(0).contains(&lost_ev));
}

#[test]
fn retries_run_out_into_an_error_completion_and_a_flush() {
    let mut t = Two::new(2);
    t.post(0, 0, Two::wr(1, 10, RKEY, None)).unwrap();
    t.post(0, 0, Two::wr(2, 10, RKEY, None)).unwrap();
    let _ = t.out(0); // lost
    let mut sent = 0;
    for _ in 0..20 {
        if t.n[0].poll_timeout().is_none() {
            break;
        }
        t.next_timeout(0);
        sent += t.out(0).len();
        if t.state(0) == Some(QpState::Error) {
            break;
        }
    }
    // Each timeout requeues both PSNs but sends only the oldest: the rest waits for an answer
    // that never comes (the loss window after a timeout).
    assert_eq!(sent, 2, "two retries of the oldest packet");
    assert_eq!(t.state(0), Some(QpState::Error));
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
    t.post(0, 0, Two::wr(1, 6 * 256, RKEY, None)).unwrap();
    let p = t.out(0);
    assert_eq!(p.len(), 6);
    // The first packet is lost; the others arrive, but every ACK for them is lost.
    for pkt in &p[1..] {
        t.deliver(1, pkt, false);
    }
    assert!(!t.out(1).is_empty());
    t.next_timeout(0);
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
    assert_eq!(t.n[1].dp.counters().rx_duplicate, 0);
    assert_eq!(t.n[0].dp.counters().retransmits_sent, 1);
    let c = t.completions(0);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, Ok(()));
}

/// After an ACK timeout, once the peer answers, the PSNs it did not acknowledge all leave.
#[test]
fn an_answer_after_a_timeout_sends_the_rest_of_the_queue() {
    let mut t = Two::new(3);
    t.post(0, 0, Two::wr(1, 6 * 256, RKEY, None)).unwrap();
    let p = t.out(0);
    assert_eq!(p.len(), 6);
    // Everything is lost (an outage).
    t.next_timeout(0);
    let again = t.out(0);
    assert_eq!(again.len(), 1);
    t.deliver(1, &again[0], false);
    // (the first packet of a message: its ACK waits for the coalescing timer)
    let ack_at = t.n[1].poll_timeout().unwrap();
    assert!(ack_at < t.n[0].poll_timeout().unwrap());
    t.next_timeout(1);
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

/// Each acknowledged PSN is a delivery for the EV it left on (the stage counts them per EV and
/// hands them to the firmware with the EV's next loss): an EV that delivered packets and then
/// loses one shows those deliveries, however few ACKs covered them.
#[test]
fn every_acked_packet_credits_its_own_ev() {
    let mut t = Two::new(3);
    // 16 EVs over 2 planes: 16 packets take each EV once, 48 three times.
    for i in 0..3 {
        t.post(0, 0, Two::wr(i, 16 * 256, RKEY, None)).unwrap();
    }
    let p = t.out(0);
    assert_eq!(p.len(), 48);
    // The first 32 arrive; of the last 16, the one on EV `lose` is lost.
    let lose = p[32].evx.ev_index;
    for pkt in &p {
        if pkt.psn != p[32].psn {
            t.deliver(1, pkt, false);
        }
    }
    for a in t.out(1) {
        t.deliver(0, &a, false);
    }
    let s = t.n[0].fw.ev_stats(0, lose).unwrap();
    assert_eq!(s.lost, 1);
    // Its two earlier packets (PSN offsets 0..32) were delivered.
    let before = p[..32].iter().filter(|q| q.evx.ev_index == lose).count() as u64;
    assert_eq!(before, 2);
    assert_eq!(s.delivered, before);
}

#[test]
fn qps_of_one_nic_take_turns_in_bursts() {
    let mut t = Two::new(3);
    assert_eq!(t.n[0].create_qp(), Ok(1));
    t.modify(0, 1, attrs(1, 3));
    // Both QPs have far more work than one burst and a window that never closes.
    let burst = usize::from(TX_BURST_PKTS);
    let len = 256 * 4 * burst as u32;
    t.post(0, 0, Two::wr(1, len, RKEY, None)).unwrap();
    t.post(0, 1, Two::wr(2, len, RKEY, None)).unwrap();
    let order: Vec<u32> = t
        .out(0)
        .iter()
        .filter(|p| matches!(p.body, PacketBody::Write { .. }))
        .map(|p| p.src_qpn)
        .collect();
    assert_eq!(order.len(), 8 * burst);
    for (i, q) in order.iter().enumerate() {
        assert_eq!(*q, ((i / burst) % 2) as u32, "packet {i}: {order:?}");
    }
}

/// Transmit batches of any size give the packets, in the order and with the contents, of
/// single polls.
#[test]
fn batched_transmit_keeps_the_burst_turns() {
    let burst = usize::from(TX_BURST_PKTS);
    let setup = || {
        let mut t = Two::new(3);
        assert_eq!(t.n[0].create_qp(), Ok(1));
        t.modify(0, 1, attrs(1, 3));
        let len = 256 * 4 * burst as u32;
        t.post(0, 0, Two::wr(1, len, RKEY, None)).unwrap();
        t.post(0, 1, Two::wr(2, len, RKEY, None)).unwrap();
        t
    };
    let one = setup().out_by(0, 1);
    let many = setup().out_by(0, 7);
    assert!(one.len() >= 8 * burst, "{} packets", one.len());
    assert_eq!(many, one);
}

/// A loss inferred on one QP is resent ahead of the turn of another QP with new data.
#[test]
fn a_retransmission_goes_ahead_of_another_qps_turn() {
    let mut t = Two::new(3);
    assert_eq!(t.n[0].create_qp(), Ok(1));
    t.modify(0, 1, attrs(1, 3));
    for i in 0..12 {
        t.post(0, 0, Two::wr(i, 256, RKEY, None)).unwrap();
    }
    let p = t.out(0);
    assert_eq!(p.len(), 12);
    // QP 1 gets work.
    let burst = usize::from(TX_BURST_PKTS);
    t.post(0, 1, Two::wr(100, 256 * 4 * burst as u32, RKEY, None))
        .unwrap();
    // QP 0's first packet was lost: the ACKs of the others make the NIC infer it.
    for pkt in &p[1..] {
        t.deliver(1, pkt, false);
    }
    for a in t.out(1) {
        t.deliver(0, &a, false);
    }
    let next: Vec<Packet> = t
        .out(0)
        .into_iter()
        .filter(|p| matches!(p.body, PacketBody::Write { .. }))
        .collect();
    assert_eq!((next[0].src_qpn, next[0].psn), (0, p[0].psn));
    assert!(next[0].retransmit);
    assert!(next[1..].iter().all(|p| p.src_qpn == 1));
}

/// Received packets handed over in one batch have exactly the effects of the packets
/// received one at a time: placements, counters, QP state and the packets sent back, for
/// runs inside the region, crossing its end, jumping past it, changing rkey and wrapping the
/// address space.
#[test]
fn a_receive_batch_places_as_one_packet_at_a_time() {
    fn set_va(p: &mut Packet, va: u64) {
        if let PacketBody::Write { reth, .. } = &mut p.body {
            reth.va = va;
        }
    }
    type Variant = (&'static str, fn(usize, &mut Packet));
    const TOP_RKEY: u32 = RKEY + 7;
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
            if let (2, PacketBody::Write { reth, .. }) = (k, &mut p.body) {
                reth.rkey = RKEY + 1;
            }
        }),
        ("wrapping", |k, p| {
            if let PacketBody::Write { reth, .. } = &mut p.body {
                reth.rkey = TOP_RKEY;
            }
            set_va(p, (u64::MAX - 511).wrapping_add(256 * k as u64))
        }),
    ];
    let top = MemRegion {
        rkey: TOP_RKEY,
        base_va: u64::MAX - 4095,
        length: 4095,
        access: Access::REMOTE_WRITE,
    };
    let mut partial = 0;
    for (name, edit) in variants {
        let (mut batch, mut single) = (Two::new(3), Two::new(3));
        batch.n[1].register_region(top).unwrap();
        single.n[1].register_region(top).unwrap();
        batch.post(0, 0, Two::wr(1, 2048, RKEY, None)).unwrap();
        let mut pkts = batch.out(0);
        assert_eq!(pkts.len(), 8, "{name}");
        for (k, p) in pkts.iter_mut().enumerate() {
            edit(k, p);
        }
        let mut v = [RxVerdict::Consumed; 8];
        let host = &mut batch.host[1];
        batch.n[1].receive(0, &pkts, &mut v, &mut |w| host.push(w));
        let placed = v
            .iter()
            .filter(|v| matches!(v, RxVerdict::Place { .. }))
            .count();
        let mut one_by_one = 0;
        for p in &pkts {
            if let RxVerdict::Place { .. } = single.deliver(1, p, false) {
                one_by_one += 1;
            }
        }
        assert_eq!(placed, one_by_one, "{name}");
        partial += usize::from(placed > 0 && placed < 8);
        batch.pump(1);
        assert_eq!(
            batch.n[1].dp.counters(),
            single.n[1].dp.counters(),
            "{name}"
        );
        assert_eq!(batch.state(1), single.state(1), "{name}");
        assert_eq!(batch.out(1), single.out(1), "{name}");
    }
    // All but the first stop part way: the first failing packet is fatal for the QP.
    assert_eq!(partial, 4);
}
