//! Two NIC main loops exchange a stream of writes through fake datapath queues in memory: the
//! DP->FW and FW->DP CSR rings carry 32-byte mrc-abi entries (ACK summaries, NACKs, port
//! events in; CQEs and EV updates out), the mrc-abi receive header queue carries data packets
//! and probes in (64-byte entries, the verdict written back into each), the mrc-abi transmit
//! header queue the engine's packets out (64-byte entries, decoded by the fake datapath and
//! turned into the peer's RXH or CSR entries). The
//! wire between the fake datapaths drops some data packets, so delivery needs the engine's
//! loss recovery driven through the loop.

mod common;

use common::*;
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};
use mrc_abi::device::csr::{CsrEvent, CsrKind, PortEventEntry, ENTRY_BYTES};
use mrc_abi::device::rxh::{RxhDropReason, RxhEntry, RxhVerdictCode, RXH_VERDICT_OFFSET};
use mrc_abi::device::txh::Txh;
use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;
use mrc_firmware::datapath::ack_gen::TrimMark;
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::engine::cc::NsccParams;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{
    CcProfile, EngineConfig, EvProfile, LocalBuf, QpAttrs, QpState, RxMeta, SendWr, TxBody,
    TxPacket,
};
use mrc_nicloop::{rxh_entry, tx_packet, txh_entry, NicLoop, BUDGET, EVS, PLANES};

fn attrs(dest: u32) -> QpAttrs {
    let nscc = NsccParams::for_link(100_000_000_000, 10_000, MTU).expect("nscc");
    let mut table = EvConfig::new(EVS as u16, PLANES as u8);
    table.probe_base_ns = 20_000;
    let ev = EvProfile {
        table,
        format: EvFormat::Udp,
        value_base: 0xC000,
    };
    QpAttrs::connect(ev, CcProfile::Nscc(nscc), dest)
        .window(1, 8)
        .retry(25, 6)
}

struct Run {
    loops: [Box<NicLoop>; 2],
    dps: [FakeDp; 2],
    qpn: [u32; 2],
    now: u64,
    sent_data: u64,
}

impl Run {
    fn new() -> Run {
        Run::with(|cfg| Box::new(NicLoop::new(cfg).unwrap()))
    }

    /// Two loops from `make` (the constructor under test), connected and in RTS.
    fn with(make: fn(EngineConfig) -> Box<NicLoop>) -> Run {
        let cfg = EngineConfig {
            mtu_payload: MTU,
            ..EngineConfig::default()
        };
        let mut loops = [make(cfg), make(cfg)];
        let qa = loops[0].engine_mut().create_qp().unwrap();
        let qb = loops[1].engine_mut().create_qp().unwrap();
        loops[1]
            .engine_mut()
            .register_region(MemRegion {
                rkey: 0x200,
                base_va: REGION_VA,
                length: 1 << 24,
                access: Access::REMOTE_WRITE,
            })
            .unwrap();
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            loops[0]
                .engine_mut()
                .modify_qp(qa, s, &attrs(qb), 0)
                .unwrap();
            loops[1]
                .engine_mut()
                .modify_qp(qb, s, &attrs(qa), 0)
                .unwrap();
        }
        Run {
            loops,
            dps: [FakeDp::default(), FakeDp::default()],
            qpn: [qa, qb],
            now: 0,
            sent_data: 0,
        }
    }

    /// Post `len`-byte writes from A to consecutive destination offsets (message `i` at
    /// `REGION_VA + i * len`, local buffer `local(i)`) until `msgs` are posted or the send
    /// queue is full; `posted` counts across calls.
    fn post_writes(
        &mut self,
        posted: &mut u64,
        msgs: u64,
        len: u32,
        local: impl Fn(u64) -> LocalBuf,
    ) {
        while *posted < msgs {
            let wr = SendWr {
                wr_id: *posted,
                local: local(*posted),
                remote_va: REGION_VA + *posted * u64::from(len),
                rkey: 0x200,
                len,
                imm: None,
                signaled: true,
            };
            if self.loops[0]
                .engine_mut()
                .post_send(self.qpn[0], wr)
                .is_err()
            {
                break;
            }
            *posted += 1;
        }
    }

    /// One round: both loops step, then the wire moves every transmitted packet to the other
    /// NIC, dropping every `drop_every`-th new data packet (never a retransmission).
    fn round(&mut self, drop_every: u64) {
        for i in 0..2 {
            self.loops[i].step(self.now, &mut self.dps[i]);
        }
        for i in 0..2 {
            let tx = std::mem::take(&mut self.dps[i].tx);
            for p in tx {
                if let TxBody::Write { .. } = p.body {
                    if !p.retransmit {
                        self.sent_data += 1;
                        if drop_every != 0 && self.sent_data.is_multiple_of(drop_every) {
                            continue;
                        }
                    }
                }
                receive(&mut self.dps[1 - i], p);
            }
            self.dps[i].orders_pending = 0;
        }
        self.now += 1_000;
    }
}

fn decoded(orders: &[[u8; ENTRY_BYTES]]) -> Vec<CsrEvent> {
    orders
        .iter()
        .map(|e| CsrEvent::decode(e).expect("loop writes valid CSR entries"))
        .collect()
}

#[test]
fn two_loops_deliver_every_message_over_a_lossy_wire() {
    lossy_exchange(Run::new());
}

/// A loop built in place over garbage memory (how the NIC image builds its loop in `.bss`).
fn in_place_over_garbage(cfg: EngineConfig) -> Box<NicLoop> {
    let mut slot = Box::<NicLoop>::new_uninit();
    // SAFETY: any bytes may be written into an uninitialised block of its own size; garbage
    // first, so nothing can depend on the memory starting zeroed.
    unsafe {
        slot.as_mut_ptr()
            .cast::<u8>()
            .write_bytes(0x5A, std::mem::size_of::<NicLoop>())
    };
    NicLoop::init_in_place(&mut slot, mrc_nicloop::NicEngine::check(cfg).unwrap());
    // SAFETY: `init_in_place` initialises every field (its contract).
    unsafe { slot.assume_init() }
}

#[test]
fn a_loop_built_in_place_runs_exactly_as_one_built_by_value() {
    let by_value = lossy_exchange(Run::new());
    let in_place = lossy_exchange(Run::with(in_place_over_garbage));
    assert_eq!(by_value, in_place);
}

/// Every message of 40 over a wire losing every 17th new data packet; checks delivery and
/// returns what the sender ordered and the receiver placed, in order.
fn lossy_exchange(mut r: Run) -> (Vec<[u8; ENTRY_BYTES]>, Vec<(u64, u32)>) {
    const MSGS: u64 = 40;
    const LEN: u32 = 4 * MTU;
    let mut posted = 0u64;
    for _ in 0..20_000 {
        r.post_writes(&mut posted, MSGS, LEN, |_| LocalBuf::default());
        r.round(17);
        let done = decoded(&r.dps[0].orders)
            .iter()
            .filter(|e| matches!(e, CsrEvent::PostCqe(_)))
            .count() as u64;
        if done == MSGS {
            break;
        }
    }
    // The sender got one successful CQE per message, in order, through the FW->DP ring.
    let cqes: Vec<_> = decoded(&r.dps[0].orders)
        .into_iter()
        .filter_map(|e| match e {
            CsrEvent::PostCqe(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(cqes.len() as u64, MSGS);
    for (i, c) in cqes.iter().enumerate() {
        assert_eq!(c.status, CqeStatus::Success as u8);
        assert_eq!(c.opcode, CqeOpcode::Write as u8);
        assert_eq!(c.qpn.get(), r.qpn[0]);
        assert_eq!(u64::from(c.wqe_index.get()), i as u64);
    }
    // Every destination byte was placed, each exactly once.
    let total = MSGS * u64::from(LEN);
    assert_placed_once(&r.dps[1].placed, total);
    // Losses happened and were repaired through ACK summaries / NACKs on the CSR ring.
    let a = r.loops[0].counters();
    let ea = r.loops[0].engine().counters();
    assert!(r.sent_data / 17 > 0);
    assert!(ea.retransmits_sent > 0, "{ea:?}");
    assert!(a.csr_events > 0);
    assert_eq!(a.csr_bad, 0);
    assert_eq!(a.tx_refused + a.orders_dropped, 0);
    let b = r.loops[1].counters();
    assert_eq!(b.rx_placed, total / u64::from(MTU));
    (r.dps[0].orders.clone(), r.dps[1].placed.clone())
}

#[test]
fn port_events_and_bad_entries_from_the_csr_ring() {
    let mut r = Run::new();
    let down = CsrEvent::PortEvent(PortEventEntry {
        kind: 0,
        port: 2,
        up: 0,
        plane: 2,
        speed_mbps: 0.into(),
        rsvd: [0; 24],
    })
    .encode();
    let mut bad = down;
    bad[2] = 7; // `up` must be 0 or 1
    let mut unknown = [0u8; ENTRY_BYTES];
    unknown[0] = 0x7f;
    let mut fw_kind = [0u8; ENTRY_BYTES];
    fw_kind[0] = CsrKind::Retransmit as u8;
    for e in [down, bad, unknown, fw_kind] {
        r.dps[0].events.push_back(e);
    }
    r.round(0);
    let c = r.loops[0].counters();
    assert_eq!(c.csr_events, 4);
    assert_eq!(c.port_events, 1);
    assert_eq!(c.csr_bad, 3);
    assert_eq!(r.loops[0].engine().counters().plane_downs, 1);
    // The plane's EVs were retired: EV updates went out on the FW->DP ring.
    let updates = decoded(&r.dps[0].orders)
        .into_iter()
        .filter(|e| matches!(e, CsrEvent::EvUpdate(_)))
        .count();
    assert!(updates > 0);
}

#[test]
fn a_full_order_ring_is_counted_not_blocking() {
    let mut r = Run::new();
    let down = |plane: u8| {
        CsrEvent::PortEvent(PortEventEntry {
            kind: 0,
            port: plane,
            up: 0,
            plane,
            speed_mbps: 0.into(),
            rsvd: [0; 24],
        })
        .encode()
    };
    r.dps[0].orders_pending = RING; // the datapath has not consumed anything
    r.dps[0].events.push_back(down(1));
    r.loops[0].step(0, &mut r.dps[0]);
    let c = r.loops[0].counters();
    assert_eq!(c.orders, 0);
    assert!(c.orders_dropped > 0);
}

/// The engine at the NIC capacities stays well inside the 124 KiB DTCM (x86-64 layout, no
/// smaller than riscv32's; the image's `hal` asserts the riscv32 fit at compile time).
#[test]
fn nic_engine_fits_the_dtcm_budget() {
    let size = std::mem::size_of::<NicLoop>();
    eprintln!("NicLoop: {size} bytes");
    assert!(size <= 96 * 1024, "NicLoop is {size} bytes");
}

/// A message's packets arrive through the receive header queue only: each entry is answered
/// with the place it goes (region slot, offset, length) written back into the entry, the
/// responder acknowledges them, and the ACK (through the DP->FW ring) completes the send.
#[test]
fn packets_received_through_the_rxh_queue_are_placed_and_acked() {
    let mut r = Run::new();
    let wr = SendWr {
        wr_id: 9,
        local: LocalBuf::default(),
        remote_va: REGION_VA + 0x1000,
        rkey: 0x200,
        len: 3 * MTU,
        imm: None,
        signaled: true,
    };
    r.loops[0].engine_mut().post_send(r.qpn[0], wr).unwrap();
    r.loops[0].step(0, &mut r.dps[0]);
    let data = std::mem::take(&mut r.dps[0].tx);
    assert_eq!(data.len(), 3);
    for p in data {
        receive(&mut r.dps[1], p);
    }
    assert_eq!(r.dps[1].rx.len(), 3);
    // B takes the entries, answers each in place; coalescing or the ACK request sends an ACK.
    let mut now = 1_000;
    let mut acks = Vec::new();
    while acks.is_empty() && now < 1_000_000 {
        r.loops[1].step(now, &mut r.dps[1]);
        acks.extend(std::mem::take(&mut r.dps[1].tx));
        now += 1_000;
    }
    assert!(r.dps[1].rx.is_empty());
    assert_eq!(r.dps[1].answered.len(), 3);
    for (i, e) in r.dps[1].answered.iter().enumerate() {
        let (code, v) = verdict_of(e);
        assert_eq!(code, Some(RxhVerdictCode::Place), "entry {i}");
        assert_eq!(v.slot.get(), 0);
        assert_eq!(v.place_offset.get(), 0x1000 + i as u64 * u64::from(MTU));
        assert_eq!(v.place_len.get(), MTU);
        // The header half is what the datapath wrote.
        assert_eq!(
            RxhEntry::decode(&{
                let mut h = *e;
                h[RXH_VERDICT_OFFSET..].fill(0);
                h
            })
            .map(|x| x.psn.get()),
            Ok(i as u32)
        );
    }
    let c = r.loops[1].counters();
    assert_eq!((c.rx_headers, c.rx_placed, c.rxh_bad), (3, 3, 0));
    assert_eq!(r.loops[1].engine().counters().placed, 3);
    let ack = acks
        .iter()
        .find_map(|p| match p.body {
            TxBody::Ack(a) => Some(a),
            _ => None,
        })
        .expect("B acknowledged");
    assert_eq!(ack.cum_psn.value(), 3);
    // The ACK, through A's DP->FW ring, completes the work request.
    for p in acks {
        receive(&mut r.dps[0], p);
    }
    r.loops[0].step(now, &mut r.dps[0]);
    let cqe = decoded(&r.dps[0].orders)
        .into_iter()
        .find_map(|e| match e {
            CsrEvent::PostCqe(c) => Some(c),
            _ => None,
        })
        .expect("a CQE");
    assert_eq!(
        (cqe.status, cqe.wqe_index.get()),
        (CqeStatus::Success as u8, 9)
    );
}

/// Entries the engine refuses are answered too: malformed ones (counted), an unknown QP, a
/// duplicate; nothing is left unanswered in the queue.
#[test]
fn refused_rxh_entries_get_drop_verdicts() {
    let mut r = Run::new();
    let wr = SendWr {
        wr_id: 1,
        local: LocalBuf::default(),
        remote_va: REGION_VA,
        rkey: 0x200,
        len: MTU,
        imm: None,
        signaled: true,
    };
    r.loops[0].engine_mut().post_send(r.qpn[0], wr).unwrap();
    r.loops[0].step(0, &mut r.dps[0]);
    let p = r.dps[0].tx[0];
    let meta = RxMeta {
        payload_len: MTU,
        ce: false,
    };
    let good = rxh_entry(&p, TrimMark::None, meta).unwrap().encode();
    let mut garbage = good;
    garbage[0] = 0x01; // no such opcode
    let mut pending_not_zero = good;
    pending_not_zero[RXH_VERDICT_OFFSET] = 1;
    let mut other_qp = good;
    other_qp[4] = 2; // QP 2 was never created
    for e in [garbage, pending_not_zero, other_qp, good, good] {
        r.dps[1].rx.push_back(e);
    }
    r.loops[1].step(1_000, &mut r.dps[1]);
    let got: Vec<_> = r.dps[1]
        .answered
        .iter()
        .map(|e| {
            let (c, v) = verdict_of(e);
            (c, RxhDropReason::from_u8(v.drop_reason))
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                Some(RxhVerdictCode::Dropped),
                Some(RxhDropReason::Malformed)
            ),
            (
                Some(RxhVerdictCode::Dropped),
                Some(RxhDropReason::Malformed)
            ),
            (
                Some(RxhVerdictCode::Dropped),
                Some(RxhDropReason::UnknownQp)
            ),
            (Some(RxhVerdictCode::Place), None),
            (
                Some(RxhVerdictCode::Dropped),
                Some(RxhDropReason::Duplicate)
            ),
        ]
    );
    let c = r.loops[1].counters();
    assert_eq!((c.rx_headers, c.rxh_bad, c.rx_placed), (5, 2, 1));
    assert_eq!(r.dps[1].placed, [(0, MTU)]);
}

#[test]
fn retransmissions_and_probes_map_to_abi_orders() {
    use mrc_firmware::engine::TxBody;
    // Collect what engine A sends over a lossy run, then map each packet.
    let mut r = Run::new();
    for i in 0..4u64 {
        let wr = SendWr {
            wr_id: i,
            local: LocalBuf::default(),
            remote_va: REGION_VA + i * u64::from(4 * MTU),
            rkey: 0x200,
            len: 4 * MTU,
            imm: None,
            signaled: true,
        };
        r.loops[0].engine_mut().post_send(r.qpn[0], wr).unwrap();
    }
    let mut seen_rtx = 0;
    let mut seen_new = 0;
    for _ in 0..2_000 {
        r.loops[0].step(r.now, &mut r.dps[0]);
        r.loops[1].step(r.now, &mut r.dps[1]);
        for p in std::mem::take(&mut r.dps[0].tx) {
            let order = mrc_nicloop::abi_order(&p);
            match (p.body, order) {
                (TxBody::Write { .. }, Some(CsrEvent::Retransmit(o))) => {
                    assert!(p.retransmit);
                    let d = CsrEvent::decode(&CsrEvent::Retransmit(o).encode()).unwrap();
                    let CsrEvent::Retransmit(o) = d else { panic!() };
                    assert_eq!((o.qpn.get(), o.psn.get()), (r.qpn[0], p.psn.value()));
                    assert_eq!(o.ev_index.get(), p.evx.ev_index);
                    seen_rtx += 1;
                    receive(&mut r.dps[1], p);
                }
                (TxBody::Write { .. }, None) => {
                    assert!(!p.retransmit);
                    seen_new += 1;
                    // The first transmission of PSN 3 is lost.
                    if p.psn.value() != 3 {
                        receive(&mut r.dps[1], p);
                    }
                }
                (TxBody::Probe(_), Some(CsrEvent::SendProbe(_))) => receive(&mut r.dps[1], p),
                (_, None) => receive(&mut r.dps[1], p),
                (b, o) => panic!("{b:?} mapped to {o:?}"),
            }
        }
        for p in std::mem::take(&mut r.dps[1].tx) {
            assert!(mrc_nicloop::abi_order(&p).is_none(), "B only answers");
            receive(&mut r.dps[0], p);
        }
        r.dps[0].orders_pending = 0;
        r.dps[1].orders_pending = 0;
        r.now += 1_000;
    }
    assert_eq!(seen_new, 16);
    assert!(seen_rtx >= 1);
}

/// The NIC image's compile-time engine (`check` + `from_checked` in a `static`) starts like
/// the run-time one (`Engine::new`), and both refuse the same bad configurations.
#[test]
fn compile_time_and_run_time_engines_agree() {
    use mrc_firmware::engine::EngineError;
    use mrc_nicloop::NicEngine;
    static BUILT: std::sync::Mutex<NicLoop> = std::sync::Mutex::new(NicLoop::from_checked(
        match NicEngine::check(EngineConfig::DEFAULT) {
            Ok(c) => c,
            Err(_) => panic!("bad config"),
        },
    ));
    let fresh = NicLoop::new(EngineConfig::default()).unwrap();
    let built = BUILT.lock().unwrap();
    assert_eq!(built.engine().config(), fresh.engine().config());
    assert_eq!(built.engine().counters(), fresh.engine().counters());
    assert_eq!(built.engine().poll_timeout(), fresh.engine().poll_timeout());
    assert_eq!(built.counters(), fresh.counters());
    assert!(built.engine().qp(0).is_none());
    for bad in [
        EngineConfig {
            tick_ns: 0,
            ..EngineConfig::DEFAULT
        },
        EngineConfig {
            mtu_payload: 70_000,
            ..EngineConfig::DEFAULT
        },
    ] {
        let want = match bad.tick_ns {
            0 => EngineError::ZeroTick,
            _ => EngineError::Mtu(70_000),
        };
        assert_eq!(NicEngine::check(bad).err(), Some(want));
        assert_eq!(NicLoop::new(bad).err(), Some(want));
    }
}

/// Delivers `msgs` messages of `len` bytes from A to B over a loss-free wire; returns the
/// rounds it took.
fn deliver(r: &mut Run, msgs: u64, len: u32) -> u32 {
    let mut posted = 0u64;
    for round in 0..20_000 {
        r.post_writes(&mut posted, msgs, len, |i| LocalBuf {
            handle: 1,
            offset: i * u64::from(len),
        });
        r.round(0);
        let done = decoded(&r.dps[0].orders)
            .iter()
            .filter(|e| matches!(e, CsrEvent::PostCqe(c) if c.status == CqeStatus::Success as u8))
            .count() as u64;
        if done == msgs {
            return round;
        }
    }
    panic!("not delivered");
}

/// A transmit header queue of 2 entries (emptied once per round) holds the engine back instead
/// of losing its packets: the stream completes without a single retransmission, every byte
/// placed exactly once, and the full queue is counted.
#[test]
fn a_full_transmit_queue_loses_nothing() {
    const MSGS: u64 = 24;
    const LEN: u32 = 3 * MTU;
    let mut wide = Run::new();
    let wide_rounds = deliver(&mut wide, MSGS, LEN);
    let mut r = Run::new();
    r.dps[0].tx_cap = 2;
    r.dps[1].tx_cap = 2;
    let rounds = deliver(&mut r, MSGS, LEN);
    assert!(rounds > wide_rounds, "{rounds} vs {wide_rounds}");
    let a = r.loops[0].counters();
    assert!(a.tx_full > 0, "{a:?}");
    assert_eq!(a.tx_refused, 0);
    assert_eq!(wide.loops[0].counters().tx_full, 0);
    let ea = r.loops[0].engine().counters();
    assert_eq!(ea.retransmits_sent, 0, "{ea:?}");
    assert_placed_once(&r.dps[1].placed, MSGS * u64::from(LEN));
}

/// The placed `(offset, len)` ranges cover `0..total` exactly once: no gap, no overlap.
fn assert_placed_once(placed: &[(u64, u32)], total: u64) {
    let mut placed = placed.to_vec();
    placed.sort_unstable();
    let mut next = 0u64;
    for (off, len) in placed {
        assert_eq!(off, next, "a gap or an overlap in the placed bytes");
        next += u64::from(len);
    }
    assert_eq!(next, total);
}

/// A datapath that refuses entries it said had room loses those packets, and each is counted.
#[test]
fn refused_transmit_entries_are_counted() {
    let mut r = Run::new();
    let wr = SendWr {
        wr_id: 1,
        local: LocalBuf::default(),
        remote_va: REGION_VA,
        rkey: 0x200,
        len: 5 * MTU,
        imm: None,
        signaled: true,
    };
    r.loops[0].engine_mut().post_send(r.qpn[0], wr).unwrap();
    r.dps[0].tx_refuse = true;
    r.loops[0].step(0, &mut r.dps[0]);
    let c = r.loops[0].counters();
    assert_eq!((c.tx_packets, c.tx_refused), (0, 5));
    assert!(r.dps[0].tx.is_empty());
}

/// Work per step is bounded: with more than [`BUDGET`] packets ready and room for all of them,
/// one step writes [`BUDGET`] entries and the next step the rest.
#[test]
fn transmit_work_per_step_is_bounded() {
    let mut r = Run::new();
    r.dps[0].tx_cap = 4 * BUDGET;
    for i in 0..2u64 {
        let wr = SendWr {
            wr_id: i,
            local: LocalBuf::default(),
            remote_va: REGION_VA + i * u64::from(40 * MTU),
            rkey: 0x200,
            len: 40 * MTU,
            imm: None,
            signaled: true,
        };
        r.loops[0].engine_mut().post_send(r.qpn[0], wr).unwrap();
    }
    r.loops[0].step(0, &mut r.dps[0]);
    let first = r.dps[0].tx.len();
    r.loops[0].step(0, &mut r.dps[0]);
    let second = r.dps[0].tx.len() - first;
    let c = r.loops[0].counters();
    assert_eq!(c.tx_full, 0);
    assert_eq!(first, BUDGET);
    assert!(second > 0, "{first} then {second}");
}

/// Every kind of packet the engine builds crosses the transmit header queue unchanged:
/// descriptor -> entry bytes -> checked entry -> descriptor.
#[test]
fn every_packet_kind_round_trips_through_a_txh_entry() {
    use mrc_abi::wire::{AckRepr, EvxRepr, NackReason, NackRepr, ProbeRepr, RethRepr, Segment};
    let base = TxPacket {
        src_qpn: 2,
        dest_qpn: 0xAB_CDEF,
        psn: Psn::new(0xFF_FFFE),
        msn: 513,
        ev_format: EvFormat::Udp,
        evx: EvxRepr {
            ev_index: 127,
            plane: 3,
            ev_value: 0xC07F,
        },
        tx_ts_ns: 0xDEAD_BEEF,
        echo_ts_ns: 17,
        retransmit: true,
        ack_req: true,
        body: TxBody::Probe(ProbeRepr::default()),
    };
    let reth = RethRepr {
        va: REGION_VA + 0x1234,
        rkey: 0x200,
        dma_len: 700,
    };
    let local = LocalBuf {
        handle: 5,
        offset: 0x1_0000_0010,
    };
    let probe = ProbeRepr {
        probe_id: 0x8000_0001,
        ev_index: 9,
        plane: 1,
    };
    let mut bodies = vec![
        TxBody::Ack(AckRepr {
            cum_psn: Psn::new(100),
            sack_base: Psn::new(101),
            sack_bitmap: u64::MAX - 4,
            ev_index: 3,
            plane: 2,
            ecn_plane_mask: 0b1010,
            ce_count: 4,
            pkt_count: 60,
        }),
        TxBody::Nack(NackRepr {
            reason: NackReason::Trimmed,
            psn: Psn::new(7),
            cum_psn: Psn::new(5),
            ev_index: 11,
            plane: 0,
        }),
        TxBody::Probe(probe),
        TxBody::ProbeReply(probe),
    ];
    for segment in [
        Segment::First,
        Segment::Middle,
        Segment::Last { imm: None },
        Segment::Last { imm: Some(0xFEED) },
        Segment::Only { imm: None },
        Segment::Only { imm: Some(1) },
    ] {
        bodies.push(TxBody::Write {
            segment,
            reth,
            local,
        });
    }
    for body in bodies {
        let p = TxPacket { body, ..base };
        let bytes = txh_entry(&p).encode();
        let t = Txh::decode(&bytes).expect("valid entry");
        assert_eq!(t.hdr.opcode, p.opcode() as u8);
        assert_eq!(tx_packet(&t), p, "{body:?}");
    }
}
