//! The datapath stage's skip-served reports (`SkipServed`, DP->FW) with many EVs marked SKIP
//! at once: each skip flag the sprayer serves is reported exactly once, after it was served,
//! and an EV whose flag was never set (or was cleared unserved) is never reported, however
//! many EVs are marked.

use std::collections::BTreeMap;

use mrc_abi::device::csr::{
    CsrEntry, CsrEvent, EvUpdate, QpInitCtx, QpRtrCtx, QpRtsCtx, WindowUpdate,
};
use mrc_abi::device::EvState;
use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;
use mrc_firmware::datapath::packet::{LocalBuf, Packet, SendWr};
use mrc_firmware::datapath::stage::{Datapath, DatapathConfig};

mrc_firmware::capacity! {
    struct Nic {
        qps: 1, evs: 64, planes: 2, window_psns: 512, send_queue: 8, recv_queue: 4, regions: 1,
    }
}

const EVS: u16 = 64;
const MTU: u32 = 100;

/// A stage whose QP 0 sends on 64 EVs over `planes` planes (EV `i` on plane `i % planes`).
fn stage(planes: u8) -> Datapath<Nic> {
    let mut dp = Datapath::<Nic>::new(DatapathConfig {
        mtu_payload: MTU,
        ..DatapathConfig::DEFAULT
    });
    let cmds = [
        CsrEvent::QpInit(QpInitCtx::new(0, EVS, planes, EvFormat::Udp, 0x40)),
        CsrEvent::QpRtr(QpRtrCtx::new(0, Psn::new(0), 512, 2, 1)),
        CsrEvent::QpRts(QpRtsCtx::new(0, Psn::new(0), 512, 2, 3, 0)),
        CsrEvent::WindowUpdate(WindowUpdate::new(0, 1 << 20)),
    ]
    .map(|c| c.encode());
    assert_eq!(dp.handle_commands(0, &cmds), cmds.len());
    dp
}

fn command(dp: &mut Datapath<Nic>, e: CsrEvent) {
    assert_eq!(dp.handle_commands(0, &[e.encode()]), 1);
}

fn mark(dp: &mut Datapath<Nic>, ev: u16, state: EvState, plane: u8) {
    command(dp, CsrEvent::EvUpdate(EvUpdate::new(0, ev, state, plane)));
}

/// One `len`-byte message queued on QP 0 (`len / MTU` packets).
fn post(dp: &mut Datapath<Nic>, wr_id: u64, len: u32) {
    dp.post_send(
        0,
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
            signaled: false,
        },
    )
    .unwrap();
}

/// What the stage did while sending everything queued: the EV of each data packet in order,
/// and the EVs of the skip-served reports in order.
#[derive(Default)]
struct Log {
    evs: Vec<u16>,
    skips: Vec<u16>,
}

/// Poll packets a few at a time (the firmware takes every report after each poll) until
/// nothing more leaves.
fn send_all(dp: &mut Datapath<Nic>, now: u64, log: &mut Log) {
    let mut out = [Packet::FILL; 4];
    let mut buf = [CsrEntry::ZERO; 64];
    loop {
        let n = dp.poll_packets(now, &mut out);
        log.evs.extend(out[..n].iter().map(|p| p.evx.ev_index));
        loop {
            let k = dp.poll_events(&mut buf);
            for e in &buf[..k] {
                if let CsrEvent::SkipServed(s) = e.decode().unwrap() {
                    assert_eq!(s.qpn.get(), 0);
                    log.skips.push(s.ev.get());
                }
            }
            if k == 0 {
                break;
            }
        }
        if n == 0 {
            return;
        }
    }
}

fn counts(evs: &[u16]) -> BTreeMap<u16, usize> {
    let mut m = BTreeMap::new();
    for &e in evs {
        *m.entry(e).or_insert(0) += 1;
    }
    m
}

/// 40 of 64 EVs (on one plane) marked SKIP in a scrambled order, more than one look reports:
/// the first pick serves every flag up to the EV it picks, the rest are served as the scan
/// reaches them; each is reported once, in the order served, and no other EV is reported.
#[test]
fn many_marks_each_served_skip_reported_once() {
    let mut dp = stage(1);
    // EVs 0..40 in the order 0, 7, 14, ... (7 is coprime with 40)
    let marked: Vec<u16> = (0..40).map(|k| (k * 7) % 40).collect();
    for &ev in &marked {
        mark(&mut dp, ev, EvState::Skip, 0);
    }
    post(&mut dp, 1, 100 * MTU);
    let mut log = Log::default();
    send_all(&mut dp, 1_000, &mut log);
    assert_eq!(log.evs.len(), 100);
    // The first packet goes on the first unmarked EV: the pick passed over all 40 flags.
    assert_eq!(log.evs[0], 40);
    assert_eq!(counts(&log.evs[..24]), (40..64).map(|e| (e, 1)).collect());
    // One pick served them all: reported in marking order, each once, nothing else.
    assert_eq!(log.skips, marked);
    let c = dp.qp(0).unwrap().sprayer;
    assert_eq!(c.skips, 40);

    // Marked again (after the firmware took its reports, as it does: SKIP -> GOOD -> SKIP):
    // every flag is served once more and reported once more; no flood in between.
    for &ev in &marked {
        mark(&mut dp, ev, EvState::Good, 0);
        mark(&mut dp, ev, EvState::Skip, 0);
    }
    post(&mut dp, 2, 200 * MTU);
    let mut log = Log::default();
    send_all(&mut dp, 2_000, &mut log);
    assert_eq!(log.evs.len(), 200);
    assert_eq!(counts(&log.skips), marked.iter().map(|&e| (e, 1)).collect());
    assert_eq!(dp.qp(0).unwrap().sprayer.skips, 80);
}

/// Marks spread over two planes and served pick by pick as the scans reach them, with marks
/// set again on EVs served earlier and flags cleared unserved by a plane change: every served
/// flag is reported once, and an EV whose flag left unserved is not reported.
#[test]
fn marks_served_over_time_and_cleared_marks() {
    let mut dp = stage(2);
    // 30 EVs from the middle of both planes' scans: served one pick at a time, not at once.
    let marked: Vec<u16> = (20..50).rev().collect();
    for &ev in &marked {
        mark(&mut dp, ev, EvState::Skip, ev as u8 % 2);
    }
    // Flags cleared unserved: EV 30 moves to the other plane as GOOD, EV 31 becomes DENIED
    // and moves (the flag goes with the old slot).
    mark(&mut dp, 30, EvState::Good, 1);
    mark(&mut dp, 31, EvState::Denied, 0);
    post(&mut dp, 1, 10 * MTU);
    let mut log = Log::default();
    send_all(&mut dp, 1_000, &mut log);
    // 10 packets on EVs 0..10: no skip reached yet.
    assert_eq!(log.evs, (0..10).collect::<Vec<_>>());
    assert!(log.skips.is_empty(), "{:?}", log.skips);

    post(&mut dp, 2, 200 * MTU);
    send_all(&mut dp, 2_000, &mut log);
    let served: Vec<u16> = marked
        .iter()
        .copied()
        .filter(|&e| e != 30 && e != 31)
        .collect();
    assert_eq!(counts(&log.skips), served.iter().map(|&e| (e, 1)).collect());
    assert_eq!(dp.qp(0).unwrap().sprayer.skips, served.len() as u64);
    // In the order served, a pick's flags in marking order (descending): plane 0's first
    // pick past EV 18 passes over its 14 flags (EV 30 left the plane) and picks EV 50; plane
    // 1's passes over 21..=29 and picks EV 30 (now on plane 1, unmarked); its next passes over
    // 33..=49 and picks EV 51.
    let even: Vec<u16> = (20..50).rev().filter(|e| e % 2 == 0 && *e != 30).collect();
    let odd_low: Vec<u16> = (21..30).rev().filter(|e| e % 2 == 1).collect();
    let odd_high: Vec<u16> = (33..50).rev().filter(|e| e % 2 == 1).collect();
    assert_eq!(log.skips, [even, odd_low, odd_high].concat());
    assert_eq!(
        log.evs[..24],
        [(0..20).collect(), vec![50, 30, 52, 51]].concat()
    );
    // A skipped EV misses one pick: the first round after the skips has no marked EV.
    for &e in &served {
        let first = log.evs[20..].iter().position(|&x| x == e).unwrap();
        assert!(
            first > 20,
            "EV {e} sent at {first}: its skip was not served"
        );
    }
}
