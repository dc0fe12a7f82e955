//! Two NIC main loops without admin tables (QPs set up on the engine directly, device QPN =
//! engine QPN), each with the datapath model behind its rings standing in for the datapath
//! hardware: the loops move only CSR entries (reports in, commands out), the models do every
//! packet's work, and a lossy wire between them makes delivery depend on the firmware's loss
//! recovery driven through the loops. Also: malformed entries, port events, a full FW->DP
//! ring, the work per step, and the test kit's checked two-NIC runs with the loop as each NIC's
//! firmware.

mod common;

use std::mem::MaybeUninit;

use common::*;
use mrc_abi::device::csr::{CsrEntry, CsrEvent, CsrKind, PortEventEntry, TxStart, ENTRY_BYTES};
use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;
use mrc_firmware::datapath::packet::{LocalBuf, PacketBody, SendWr};
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::engine::cc::NsccParams;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{CcProfile, EvProfile, QpAttrs, QpState};
use mrc_firmware::testkit::pair::PairConfig;
use mrc_firmware::testkit::{Pair, TestKit, CHECKED_PAYLOAD};
use mrc_nicloop::{LoopConfig, NicAdmin, NicLoop, BUDGET, EVS, PLANES};

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

const RKEY: u32 = 0x200;

struct Run {
    loops: [Box<NicLoop>; 2],
    dps: [ModelDp; 2],
    wires: [Wire; 2],
    qpn: [u32; 2],
    now: u64,
}

/// A loop by value.
fn by_value(cfg: LoopConfig) -> Box<NicLoop> {
    Box::new(NicLoop::new(cfg).unwrap())
}

/// A loop built in place over memory full of garbage, as the NIC image builds it in `.bss`.
fn in_place_over_garbage(cfg: LoopConfig) -> Box<NicLoop> {
    let mut slot: Box<MaybeUninit<NicLoop>> = Box::new(MaybeUninit::uninit());
    // Garbage where the loop goes: nothing of it may survive.
    let bytes = slot.as_mut_ptr().cast::<u8>();
    for i in 0..std::mem::size_of::<NicLoop>() {
        // SAFETY (test): in bounds of the allocation; any byte may be written to `MaybeUninit`.
        unsafe { bytes.add(i).write(0xA5 ^ i as u8) };
    }
    NicLoop::init_in_place(&mut slot, cfg).unwrap();
    // SAFETY (test): `init_in_place` initialised it; `MaybeUninit<T>` has `T`'s layout.
    unsafe { Box::from_raw(Box::into_raw(slot).cast::<NicLoop>()) }
}

impl Run {
    /// Two loops, their QPs connected and in RTS (the engines' context writes reach the
    /// models through the loops), B's region registered.
    fn new() -> Run {
        Run::with(by_value)
    }

    /// As [`Run::new`], the loops made by `make` (the constructor under test).
    fn with(make: fn(LoopConfig) -> Box<NicLoop>) -> Run {
        let cfg = LoopConfig {
            mtu_payload: MTU,
            ..LoopConfig::DEFAULT
        };
        let mut loops = [make(cfg), make(cfg)];
        let qa = loops[0].engine_mut().create_qp().unwrap();
        let qb = loops[1].engine_mut().create_qp().unwrap();
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            let e = loops[0].engine_mut();
            e.modify_qp(qa, s, &attrs(qb), 0).unwrap();
            loops[1]
                .engine_mut()
                .modify_qp(qb, s, &attrs(qa), 0)
                .unwrap();
        }
        let mut dps = [ModelDp::new(), ModelDp::new()];
        dps[1]
            .stage
            .register_region(MemRegion {
                rkey: RKEY,
                base_va: REGION_VA,
                length: 1 << 24,
                access: Access::REMOTE_WRITE,
            })
            .unwrap();
        let mut r = Run {
            loops,
            dps,
            wires: [Wire::default(), Wire::default()],
            qpn: [qa, qb],
            now: 0,
        };
        r.round(|_, _| false);
        r
    }

    /// Post `len`-byte writes from A to consecutive offsets until `msgs` are posted or the
    /// send queue is full; `posted` counts across calls.
    fn post_writes(&mut self, posted: &mut u64, msgs: u64, len: u32) {
        while *posted < msgs {
            let wr = SendWr {
                wr_id: *posted,
                local: LocalBuf::default(),
                remote_va: REGION_VA + *posted * u64::from(len),
                rkey: RKEY,
                len,
                imm: None,
                signaled: true,
            };
            if self.dps[0].stage.post_send(self.qpn[0], wr).is_err() {
                break;
            }
            *posted += 1;
        }
    }

    /// One round: both NICs step (models, loops, models), then the wire carries each way;
    /// `drop` decides which packets the wire loses.
    fn round(
        &mut self,
        mut drop: impl FnMut(&mrc_firmware::datapath::packet::Packet, u64) -> bool,
    ) {
        for i in 0..2 {
            self.dps[i].hw(self.now);
            self.loops[i].step(self.now, &mut self.dps[i]);
            self.dps[i].hw(self.now);
        }
        let [a, b] = &mut self.dps;
        self.wires[0].carry(self.now, a, b, &mut drop);
        self.wires[1].carry(self.now, b, a, &mut drop);
        self.now += 1_000;
    }

    /// Send completions A's host interface got.
    fn completions(&self) -> usize {
        self.dps[0]
            .host_writes()
            .iter()
            .filter(|e| matches!(e, CsrEvent::Complete(_)))
            .count()
    }
}

#[test]
fn two_loops_deliver_every_message_over_a_lossy_wire() {
    lossy_exchange(Run::new());
}

/// A loop built in place over garbage runs exactly as one built by value: the same commands
/// out, the same bytes placed, the same host writes.
#[test]
fn a_loop_built_in_place_runs_exactly_as_one_built_by_value() {
    let a = lossy_exchange(Run::with(by_value));
    let b = lossy_exchange(Run::with(in_place_over_garbage));
    assert_eq!(a, b);
}

/// Every FW->DP entry of A, the host writes of A, the placements at B.
type Transcript = (Vec<CsrEntry>, Vec<CsrEntry>, Vec<(u16, u64, u32)>);

fn lossy_exchange(mut r: Run) -> Transcript {
    let (msgs, len) = (64u64, 4 * MTU);
    let mut posted = 0;
    for _ in 0..20_000 {
        r.post_writes(&mut posted, msgs, len);
        // Every 7th first transmission of a data packet is lost.
        r.round(|p, n| matches!(p.body, PacketBody::Write { .. }) && !p.retransmit && n % 7 == 0);
        if r.completions() as u64 == msgs {
            break;
        }
    }
    assert_eq!(r.completions() as u64, msgs, "every write completed");
    for c in r.dps[0].host_writes() {
        if let CsrEvent::Complete(c) = c {
            assert_eq!(c.status, mrc_abi::device::csr::status::OK);
        }
    }
    // Every byte placed once (retransmissions of placed packets are duplicates, not placed).
    assert!(r.wires[0].dropped > 0, "the wire lost packets");
    assert_eq!(r.wires[0].placed_bytes(), msgs * u64::from(len));
    let mut offsets: Vec<u64> = r.wires[0].placed.iter().map(|p| p.1).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len() as u64, msgs * 4);
    // The firmware repaired the losses: retransmission orders went out through the loop.
    let orders = r.dps[0].written();
    assert!(orders
        .iter()
        .any(|e| matches!(e, CsrEvent::Retransmit(_) | CsrEvent::RetransmitUnacked(_))));
    for l in &r.loops {
        let c = l.counters();
        assert_eq!(c.commands_lost, 0);
        let e = l.engine().counters();
        assert_eq!(
            e.events_malformed + e.events_wrong_side + e.events_unknown_qp,
            0
        );
    }
    (
        r.dps[0].log.clone(),
        r.dps[0].host.clone(),
        r.wires[0].placed.clone(),
    )
}

#[test]
fn port_events_and_bad_entries_from_the_csr_ring() {
    let mut r = Run::new();
    let down = CsrEvent::PortEvent(PortEventEntry::new(2, 2, false, 0)).encode();
    let mut bad = down;
    bad.0[2] = 7; // `up` must be 0 or 1
    let mut unknown = CsrEntry::ZERO;
    unknown.0[0] = 0x7f;
    let fw_kind = CsrEvent::TailProbe(mrc_abi::device::csr::TailProbe::new(0)).encode();
    let before = r.dps[0].log.len();
    for e in [down, bad, unknown, fw_kind] {
        r.dps[0].events.push_back(e);
    }
    r.loops[0].step(r.now, &mut r.dps[0]);
    let e = r.loops[0].engine().counters();
    assert_eq!((e.events_malformed, e.events_wrong_side), (2, 1));
    assert_eq!(e.plane_downs, 1);
    assert_eq!(r.loops[0].counters().events, 4, "all four handed over");
    assert!(r.dps[0].events.is_empty(), "and consumed");
    // The plane went down in the datapath and its EVs were retired there.
    let out: Vec<CsrEvent> = r.dps[0].written().split_off(before);
    assert!(out
        .iter()
        .any(|e| matches!(e, CsrEvent::PlaneDown(p) if p.plane == 2)));
    assert!(out.iter().any(|e| matches!(e, CsrEvent::EvUpdate(_))));
}

/// A datapath that takes nothing: the loop writes what the FW->DP ring has room for, the
/// engine keeps the rest (counted as waits, nothing lost), and once the datapath takes
/// entries again every command arrives, in order, as without the stall.
#[test]
fn a_full_order_ring_waits_and_loses_nothing() {
    let run = |stall: bool| {
        let mut r = Run::new();
        r.dps[0].orders_cap = 4;
        r.dps[0].stalled = stall;
        let before = r.dps[0].log.len();
        // Two planes down: an EV table write, an EV event and plane weights per EV.
        for p in [1u8, 3] {
            let e = CsrEvent::PortEvent(PortEventEntry::new(p, p, false, 0)).encode();
            r.dps[0].events.push_back(e);
        }
        for _ in 0..8 {
            r.loops[0].step(r.now, &mut r.dps[0]);
        }
        let stalled_at = r.dps[0].log.len() - before;
        r.dps[0].stalled = false;
        for _ in 0..400 {
            r.dps[0].hw(r.now);
            r.loops[0].step(r.now, &mut r.dps[0]);
        }
        (
            r.dps[0].log.split_off(before),
            stalled_at,
            r.loops[0].counters(),
        )
    };
    let (free, _, _) = run(false);
    let (waited, at_stall, c) = run(true);
    assert_eq!(at_stall, 4, "the ring's room, no more");
    assert!(c.commands_held > 0);
    assert_eq!(c.commands_lost, 0);
    assert!(free.len() > 4);
    assert_eq!(waited, free, "every command, in order");
}

/// A step moves at most [`BUDGET`] entries each way, so one busy ring cannot starve the
/// timers or the other ring (the watchdog is kicked between steps).
#[test]
fn work_per_step_is_bounded() {
    let mut r = Run::new();
    let q = r.qpn[0];
    for _ in 0..3 * BUDGET {
        let e = CsrEvent::TxStart(TxStart::new(q, Psn::new(0))).encode();
        r.dps[0].events.push_back(e);
    }
    let taken = r.loops[0].counters().events;
    r.loops[0].step(r.now, &mut r.dps[0]);
    assert_eq!(r.loops[0].counters().events - taken, BUDGET as u64);
    assert_eq!(r.dps[0].events.len(), 2 * BUDGET);
}

/// The loop and the admin tables at the NIC capacities stay well inside the 124 KiB DTCM
/// (x86-64 layout, no smaller than riscv32's; the image's `hal` asserts the riscv32 fit at
/// compile time).
#[test]
fn nic_loop_fits_the_dtcm() {
    let size = std::mem::size_of::<NicLoop>() + std::mem::size_of::<NicAdmin>();
    eprintln!("NicLoop + NicAdmin: {size} bytes");
    assert!(size <= 72 * 1024, "NicLoop + NicAdmin are {size} bytes");
    assert_eq!(ENTRY_BYTES, 32);
    let _ = CsrKind::ALL;
}

/// The test kit's checked two-NIC runs (every destination byte written once and equal to its
/// source, completion order, immediates after their data, liveness) with the loop as each
/// NIC's firmware; and its planted datapath bug is caught through the loop too.
#[test]
fn checked_pairs_through_the_loop() {
    std::thread::Builder::new()
        .stack_size(32 << 20)
        .spawn(|| {
            let firmware = |cfg: &PairConfig| {
                let lp = LoopConfig {
                    engine: cfg.engine,
                    mtu_payload: cfg.datapath.mtu_payload,
                };
                move || NicLoop::<TestKit>::new(lp).ok()
            };
            for seed in 1..=3 {
                let cfg = PairConfig::chaos(seed);
                let r =
                    Pair::<CHECKED_PAYLOAD, NicLoop<TestKit>>::with_firmware(cfg, firmware(&cfg))
                        .and_then(|mut p| p.run());
                let r = r.unwrap_or_else(|f| panic!("seed {seed}: {f:?}"));
                assert!(r.completions > 0);
            }
            let mut cfg = PairConfig::chaos(7);
            cfg.datapath.planted_bug = true;
            cfg.channel.trim_ppm = 100_000;
            cfg.channel.trim_last_hop_ppm = 1_000_000;
            cfg.max_time_ns = 50_000_000;
            let r = Pair::<CHECKED_PAYLOAD, NicLoop<TestKit>>::with_firmware(cfg, firmware(&cfg))
                .and_then(|mut p| p.run());
            assert!(r.is_err(), "the planted bug is caught");
        })
        .unwrap()
        .join()
        .unwrap();
}
