//! Whole-system tests: several simulated hosts whose NICs are the simulator's NIC model (the
//! datapath stage and the NIC image's main loop on timed cores, PCIe) on a seeded lossy
//! 4-plane Clos fabric (`SimHost::on_clos`), driven only through the driver's public
//! API the way an OCP MRC application and controller would: the controller installs EV and CC
//! profiles, applications create CQs and QPs, exchange connection data over TCP, pre-post
//! receives and move data with Write and Write-with-Immediate while links and planes fail.
//!
//! Every test checks every destination byte, that signaled send completions arrive in posting
//! order and succeed, and that immediate completions arrive in posting order with the right
//! immediate and receive `wr_id`. A failing run prints its seed.

use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use mrc_abi::device::EvState;
use mrc_driver::api::connect::{exchange_client, exchange_server, ConnInfo};
use mrc_driver::api::*;
use mrc_sim::fabric::DropCause;
use mrc_sim::nic_host::{ClosConfig, ClosCounters, SimHost, SimNicConfig, WindowKind};
use mrc_tests::hosts::{self, Endpoint, EvPlan, HostApp, Msg};

const BUF: usize = 256 * 1024;
const T: Duration = Duration::from_secs(5);

/// One host: the controller's and application's objects ([`HostApp`]), one MR (source area
/// first half, destination area second half) and its connections.
struct App {
    conns: Vec<Endpoint>,
    host: HostApp,
    mr: MemoryRegion,
}

/// A new connection of `a` in INIT with the controller's profiles.
fn add_conn(a: &mut App) -> usize {
    a.conns.push(a.host.endpoint().expect("endpoint"));
    a.conns.len() - 1
}

/// Host `i` with one connection: EVs from the planner towards host `i + 1` of a 4-plane test
/// Clos, 128 of them with 16 kept active.
fn host_app(host: &SimHost, i: usize) -> App {
    let clos = hosts::test_clos(4, 32);
    let plan = EvPlan {
        clos: &clos,
        dst: (i as u32 + 1) % 32,
        evs: 128,
        min_active: 16,
    };
    let h = hosts::host_app(host, i, &plan).unwrap_or_else(|e| panic!("host {i}: {e}"));
    let mr = h.pd.reg_mr(BUF, Access::ALL).expect("MR");
    let mut a = App {
        conns: Vec::new(),
        host: h,
        mr,
    };
    add_conn(&mut a);
    a
}

fn info(a: &App, c: usize) -> ConnInfo {
    let qp = &a.conns[c].qp;
    a.host.conn_info(qp, &a.mr, 0x00ff_ff00 + qp.qpn())
}

/// Exchanges connection data between `server` and `client` over loopback TCP, as the OCP
/// examples do out of band; returns (what the server learnt, what the client learnt).
fn exchange(server: (&App, usize), client: (&App, usize)) -> (ConnInfo, ConnInfo) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let si = info(server.0, server.1);
    let t = thread::spawn(move || exchange_server(&listener, &si, T).expect("server exchange"));
    let of_client = exchange_client(addr, &info(client.0, client.1), T).expect("client exchange");
    (t.join().expect("server thread"), of_client)
}

/// RTR with the peer's data (what it sends us) and RTS with our own first PSN.
fn connect(a: &mut App, c: usize, peer: &ConnInfo) {
    let own = info(a, c).psn;
    hosts::connect(&mut a.conns[c].qp, own, peer).expect("connect");
}

/// Hosts 0 and 1 of `host`, connection 0 of each connected to the other's: (host 0's
/// application, host 1's, what host 0 learnt of host 1).
fn connected_pair(host: &SimHost) -> (App, App, ConnInfo) {
    let mut a = host_app(host, 0);
    let mut b = host_app(host, 1);
    let (of_a, of_b) = exchange((&b, 0), (&a, 0));
    connect(&mut a, 0, &of_b);
    connect(&mut b, 0, &of_a);
    (a, b, of_b)
}

/// A seeded stream of 64-bit values.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `count` messages from source area `[0, BUF/2)` to destination area `[BUF/2, BUF)`: sizes up
/// to `max_len`, a third with two scatter-gather pieces, half with an immediate, a fifth of the
/// plain writes unsignaled (the last message is always signaled).
fn workload(rng: &mut Rng, tag: u64, count: usize, max_len: u64) -> Vec<Msg> {
    let half = BUF as u64 / 2;
    let (mut src, mut dst) = (0u64, half);
    let mut out = Vec::new();
    for k in 0..count {
        let len = 1 + rng.below(max_len);
        if src + len + 64 > half || dst + len > BUF as u64 {
            break;
        }
        let pieces = if len > 1 && rng.below(3) == 0 {
            let a = 1 + rng.below(len - 1);
            // A gap between the pieces: they must still land contiguously.
            vec![(src, a as u32), (src + a + 64, (len - a) as u32)]
        } else {
            vec![(src, len as u32)]
        };
        src += len + 64;
        let imm = (rng.below(2) == 0).then(|| rng.next() as u32);
        let signaled = imm.is_some() || k + 1 == count || rng.below(5) != 0;
        out.push(Msg {
            wr_id: tag << 32 | k as u64,
            pieces,
            remote_off: dst,
            imm,
            signaled,
        });
        dst += len;
    }
    if let Some(m) = out.last_mut() {
        m.signaled = true;
    }
    out
}

fn fill(mr: &MemoryRegion, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    let bytes: Vec<u8> = (0..BUF / 2).map(|_| r.next() as u8).collect();
    mr.write(0, &bytes).expect("fill");
    bytes
}

/// Posts `msgs` on connection `c` of `a` to `peer` in batches of `batch` (one doorbell each).
fn post(a: &mut App, c: usize, peer: &ConnInfo, msgs: &[Msg], batch: usize) {
    for chunk in msgs.chunks(batch) {
        hosts::post(&mut a.conns[c].qp, &a.mr, peer, chunk).expect("post");
    }
}

fn pre_post_recvs(b: &mut App, c: usize, msgs: &[Msg]) {
    hosts::pre_post_recvs(&mut b.conns[c].qp, msgs).expect("pre-post receives");
}

fn poll_all(cq: &mut CompletionQueue, want: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut buf = [WorkCompletion::default(); 16];
    for _ in 0..10_000 {
        let k = cq.poll(&mut buf).expect("poll");
        out.extend_from_slice(&buf[..k]);
        if out.len() >= want && k == 0 {
            break;
        }
    }
    out
}

/// Checks what connection `fc` of `from` sent to connection `tc` of `to`: completions on both
/// sides and every byte of the destination area.
fn check(seed: u64, from: (&mut App, usize), to: (&mut App, usize), msgs: &[Msg], src: &[u8]) {
    check_area(seed, from, to, msgs, src, BUF / 2..BUF);
}

/// [`check`] when the messages' destination is `area` of `to`'s region (zeros wherever they
/// did not write).
fn check_area(
    seed: u64,
    from: (&mut App, usize),
    to: (&mut App, usize),
    msgs: &[Msg],
    src: &[u8],
    area: std::ops::Range<usize>,
) {
    let ((from, fc), (to, tc)) = (from, to);
    let signaled: Vec<u64> = msgs
        .iter()
        .filter(|m| m.signaled)
        .map(|m| m.wr_id)
        .collect();
    let sc = poll_all(&mut from.conns[fc].scq, signaled.len());
    for c in &sc {
        assert_eq!(
            c.status,
            CqeStatus::Success,
            "seed {seed}: send completion {c:?}"
        );
    }
    let got: Vec<u64> = sc.iter().map(|c| c.wr_id).collect();
    assert_eq!(
        got, signaled,
        "seed {seed}: signaled send completions in posting order"
    );
    let imms: Vec<(u64, Option<u32>, u32)> = msgs
        .iter()
        .filter_map(|m| m.imm.map(|i| (m.recv_wr_id(), Some(i), m.len() as u32)))
        .collect();
    let rc = poll_all(&mut to.conns[tc].rcq, imms.len());
    let got: Vec<(u64, Option<u32>, u32)> = rc
        .iter()
        .map(|c| {
            assert_eq!(c.status, CqeStatus::Success, "seed {seed}: {c:?}");
            assert_eq!(c.opcode, CqeOpcode::RecvWriteImm);
            (c.wr_id, c.imm, c.byte_len)
        })
        .collect();
    assert_eq!(
        got, imms,
        "seed {seed}: immediates in posting order, right receive, value and length"
    );
    // Every byte of every message, and nothing outside them.
    let mut dst = vec![0u8; BUF];
    to.mr.read(0, &mut dst).expect("read");
    let mut expect = dst.clone();
    expect[area.clone()].fill(0);
    let mut end = area.start;
    for m in msgs {
        let mut at = m.remote_off as usize;
        for &(o, l) in &m.pieces {
            let (o, l) = (o as usize, l as usize);
            expect[at..at + l].copy_from_slice(&src[o..o + l]);
            at += l;
        }
        end = end.max(m.remote_off as usize + m.len() as usize);
    }
    if let Some(i) = area.clone().find(|&i| dst[i] != expect[i]) {
        panic!(
            "seed {seed}: destination byte {i} is {:#x}, expected {:#x} (messages end at {end})",
            dst[i], expect[i]
        );
    }
    let qp = &from.conns[fc].qp;
    assert_eq!(
        qp.sq_free(),
        qp.sq_depth(),
        "seed {seed}: every WQE retired"
    );
}

/// The default Clos of the simulated host ([`ClosConfig::default`]: the tiny leaf-spine, 4
/// planes of 200 Gb/s) with `seed`, every link losing `loss_ppm` of its packets at random.
fn lossy(seed: u64, loss_ppm: u32) -> ClosConfig {
    let mut c = ClosConfig::default();
    c.scenario.seed = seed;
    c.scenario.fabric.loss_ppm = loss_ppm;
    c
}

/// Retransmissions the NICs' datapath stages sent.
fn retransmits(host: &SimHost) -> u64 {
    (0..host.nics().len())
        .filter_map(|i| host.datapath_counters(i))
        .map(|d| d.retransmits_sent)
        .sum()
}

/// The host events `a`'s controller got: (PORT_DOWN, PORT_UP, EV_STATE_CHANGE to
/// ASSUMED_BAD).
fn host_events(a: &App) -> (usize, usize, usize) {
    let (mut down, mut up, mut ev_bad) = (0, 0, 0);
    while let Some(e) = a.host.ctl.poll_event().expect("event") {
        match e.event {
            Event::PortDown { .. } => down += 1,
            Event::PortUp { .. } => up += 1,
            Event::EvStateChange {
                qpn,
                old,
                new: EvState::AssumedBad,
                ..
            } => {
                assert_ne!(old, EvState::AssumedBad, "a change, on QP {qpn}");
                assert!(
                    a.conns.iter().any(|c| c.qp.qpn() == qpn),
                    "EV event on a QP of this host: {qpn}"
                );
                ev_bad += 1;
            }
            _ => {}
        }
    }
    (down, up, ev_bad)
}

/// Three hosts in a ring (0 -> 1 -> 2 -> 0) on three leaves, 0.5 % loss on every link, and
/// plane 1 lost shortly after the first doorbell and back later. Each host has two connections:
/// 0 sends to the next host, 1 receives from the previous one.
fn ring_with_plane_failure(seed: u64) {
    let cfgs = [4, 5, 6].map(SimNicConfig::numbered);
    let host = SimHost::on_clos(&cfgs, lossy(seed, 5_000)).expect("host");
    let mut apps: Vec<App> = (0..3).map(|i| host_app(&host, i)).collect();
    for a in apps.iter_mut() {
        assert_eq!(add_conn(a), 1);
    }
    // Host i's sending connection 0 pairs with host i+1's receiving connection 1.
    let mut peer_of_sender = Vec::new();
    for i in 0..3 {
        let j = (i + 1) % 3;
        let (of_sender, of_receiver) = exchange((&apps[j], 1), (&apps[i], 0));
        assert_eq!(of_receiver.qpn, apps[j].conns[1].qp.qpn());
        connect(&mut apps[j], 1, &of_sender);
        peer_of_sender.push(of_receiver);
    }
    for i in 0..3 {
        let peer = peer_of_sender[i];
        connect(&mut apps[i], 0, &peer);
    }
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let sources: Vec<Vec<u8>> = apps
        .iter()
        .enumerate()
        .map(|(i, a)| fill(&a.mr, seed + i as u64))
        .collect();
    let loads: Vec<Vec<Msg>> = (0..3)
        .map(|i| workload(&mut rng, i as u64 + 1, 40, 12_000))
        .collect();
    // Receivers pre-post (MRC has no RNR).
    for (i, load) in loads.iter().enumerate() {
        pre_post_recvs(&mut apps[(i + 1) % 3], 1, load);
    }
    let t0 = host.now_ns();
    host.schedule_plane_outage(1, t0 + 1_500, t0 + 400_000);
    // All three hosts transmit at once: the NICs hold their doorbells while the applications
    // post, and run together once released.
    host.hold_doorbells(true);
    for (i, load) in loads.iter().enumerate() {
        let peer = peer_of_sender[i];
        post(&mut apps[i], 0, &peer, load, 8);
    }
    host.hold_doorbells(false);
    host.advance_to(t0 + 400_001);
    for (i, load) in loads.iter().enumerate() {
        let to = (i + 1) % 3;
        let (a, b) = if i < to {
            let (x, y) = apps.split_at_mut(to);
            (&mut x[i], &mut y[0])
        } else {
            let (x, y) = apps.split_at_mut(i);
            (&mut y[0], &mut x[to])
        };
        check(seed, (a, 0), (b, 1), load, &sources[i]);
    }
    let c = host.clos_counters();
    eprintln!("seed {seed}: {c:?} end {} ns", host.now_ns());
    assert!(
        c.fabric.dropped(DropCause::LinkDown) + c.fabric.dropped(DropCause::UsidPortDown) > 0,
        "seed {seed}: the outage hit traffic: {c:?}"
    );
    assert!(
        c.fabric.dropped(DropCause::RandomLoss) > 0 && retransmits(&host) > 0,
        "seed {seed}: {c:?}"
    );
    assert!(c.fabric.conserved() && c.place_failed == 0, "{c:?}");
    for a in &apps {
        // The senders' engines retired the lost plane's EVs, and the EV profile's event mask
        // (all events) reports each retirement to the controller.
        let (down, up, ev_bad) = host_events(a);
        assert!(
            down >= 1 && up >= 1 && ev_bad >= 1,
            "seed {seed}: PORT_DOWN, PORT_UP and EV_BAD seen ({down}, {up}, {ev_bad})"
        );
    }
}

#[test]
fn three_hosts_ring_survives_plane_failure_and_loss() {
    for seed in [1, 2] {
        ring_with_plane_failure(seed);
    }
}

#[test]
#[ignore = "campaign: cargo test -p mrc-tests -- --ignored"]
fn ring_campaign() {
    for seed in 3..40 {
        ring_with_plane_failure(seed);
    }
}

/// Probes EVs 0..16 of host 0's QP (PROBE_EV with ids from `first_id`, a 50 us timeout):
/// per EV, whether its probe was answered and the round trip.
fn probe_evs(a: &App, first_id: u32) -> Vec<(bool, u32)> {
    let qpn = a.conns[0].qp.qpn();
    let mut out = vec![None; 16];
    for ev in 0..16u16 {
        a.host
            .ctl
            .probe_ev(qpn, ev, first_id + u32::from(ev), 50)
            .expect("PROBE_EV");
    }
    while let Some(e) = a.host.ctl.poll_event().expect("event") {
        if let Event::EvProbeResult {
            qpn: q,
            ev_index,
            probe_id,
            rtt_ns,
            replied,
        } = e.event
        {
            assert_eq!((q, probe_id), (qpn, first_id + u32::from(ev_index)));
            let slot = &mut out[usize::from(ev_index)];
            assert!(slot.is_none(), "one result per probe (EV {ev_index})");
            assert!(replied || rtt_ns == 0, "a lost probe has no RTT");
            *slot = Some((replied, rtt_ns));
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(ev, r)| r.unwrap_or_else(|| panic!("no result for EV {ev}")))
        .collect()
}

/// PROBE_EV crosses the fabric: host 0's probes of its QP's EVs toward host 1 come back with
/// the fabric's round trip; with host 0's cable to plane 2 pulled, the probes of the EVs on
/// that plane are lost (each reported once, as not answered, at its timeout) and the others
/// still come back.
#[test]
fn ev_probes_cross_the_fabric_and_time_out_on_a_pulled_cable() {
    let host = SimHost::clos_pair().expect("host");
    let (a, _b, _) = connected_pair(&host);
    let up = probe_evs(&a, 100);
    let rtts: Vec<u32> = up
        .iter()
        .map(|&(ok, rtt)| {
            assert!(ok, "every plane is up: {up:?}");
            rtt
        })
        .collect();
    // Host, leaf, spine, leaf, host and back: eight links, well above a loopback's few ns
    // and well below the timeout.
    assert!(rtts.iter().all(|r| (500..50_000).contains(r)), "{rtts:?}");
    host.nics()[0].set_link(2, false);
    let t0 = host.now_ns();
    let pulled = probe_evs(&a, 200);
    let lost = pulled.iter().filter(|p| !p.0).count();
    eprintln!("RTTs {rtts:?}; with plane 2 pulled {pulled:?}");
    assert!(
        lost > 0 && lost < pulled.len(),
        "the EVs on plane 2 and only those are lost: {pulled:?}"
    );
    assert!(
        host.now_ns() >= t0 + 50_000,
        "a lost probe reports at its timeout"
    );
    host.nics()[0].set_link(2, true);
    let back = probe_evs(&a, 300);
    assert!(back.iter().all(|p| p.0), "the cable is back: {back:?}");
}

/// Two hosts on the Clos of `cfg`, with host 0's leaf-spine link to spine 0 on plane 0
/// dropping everything for the whole run; a cable of host 0 is pulled between two batches and
/// plugged back in before the third. Returns the totals.
fn cable_pull(cfg: ClosConfig) -> ClosCounters {
    let host = SimHost::on_clos(&[4, 5].map(SimNicConfig::numbered), cfg).expect("host");
    host.schedule_window(
        WindowKind::LinkBlackhole {
            plane: 0,
            leaf: 0,
            spine: 0,
        },
        0,
        u64::MAX,
    );
    pull_a_cable_between_batches(&host, cfg.scenario.seed);
    let c = host.clos_counters();
    assert!(c.fabric.conserved() && c.place_failed == 0, "{c:?}");
    c
}

/// 60 messages from host 0 to host 1 in three batches; host 0's cable to plane 2 is pulled
/// after the first and plugged back before the third. Every message arrives once, with
/// every byte; one PORT_DOWN and one PORT_UP.
fn pull_a_cable_between_batches(host: &SimHost, seed: u64) {
    let (mut a, mut b, of_b) = connected_pair(host);
    let src = fill(&a.mr, 99);
    let mut rng = Rng(seed);
    let msgs = workload(&mut rng, 9, 60, 4_000);
    pre_post_recvs(&mut b, 0, &msgs);
    let third = msgs.len() / 3;
    post(&mut a, 0, &of_b, &msgs[..third], 4);
    host.nics()[0].set_link(2, false);
    post(&mut a, 0, &of_b, &msgs[third..2 * third], 4);
    host.nics()[0].set_link(2, true);
    post(&mut a, 0, &of_b, &msgs[2 * third..], 4);
    host.run();
    check(seed, (&mut a, 0), (&mut b, 0), &msgs, &src);
    let (down, up, _) = host_events(&a);
    assert_eq!((down, up), (1, 1), "one cable pull, one plug");
}

/// The cable pull on the Clos fabric (`SimHost::clos_pair`: the simulator's NIC model on two
/// leaves of a 4-plane leaf-spine). Host 0's engines retire the plane's EVs at PORT_DOWN, so it
/// sends nothing into the pulled cable; host 1 learns of it only by losses, so its packets
/// toward host 0 on that plane die at the last leaf (the uSID route's port is down), and
/// every message still arrives.
#[test]
fn cable_pull_on_the_clos_fabric() {
    let host = SimHost::clos_pair().expect("host");
    pull_a_cable_between_batches(&host, 5);
    let c = host.clos_counters();
    assert_eq!(c.place_failed, 0);
    assert!(c.fabric.delivered > 0 && c.fabric.conserved(), "{c:?}");
    assert_eq!(c.fabric.dropped(DropCause::LinkDown), 0, "{c:?}");
    assert!(
        c.fabric.dropped(DropCause::UsidPortDown) > 0,
        "the pull reached the fabric"
    );
    assert_eq!(
        c.fabric.dropped_total(),
        c.fabric.dropped(DropCause::UsidPortDown),
        "{c:?}"
    );
}

#[test]
fn cable_pull_and_blackholed_link_between_batches() {
    let c = cable_pull(lossy(7, 5_000));
    assert!(
        c.fabric.dropped(DropCause::RandomLoss) > 0,
        "the blackholed link and the loss dropped packets: {c:?}"
    );
}

/// Two hosts sending to a third at once over the Clos with small switch queues (8 KiB of
/// data: an incast that trims at the receiver's leaf, the last hop), with or without the
/// datapath's planted bug. Checks every byte and completion.
fn incast_with_last_hop_trims(planted_bug: bool) -> ClosCounters {
    let seed = 11;
    let mut cfg = lossy(seed, 0);
    cfg.scenario.fabric.queue.limit_bytes = 8_192;
    cfg.planted_bug = planted_bug;
    let host = SimHost::on_clos(&[4, 5, 6].map(SimNicConfig::numbered), cfg).expect("host");
    let mut apps: Vec<App> = (0..3).map(|i| host_app(&host, i)).collect();
    assert_eq!(add_conn(&mut apps[1]), 1);
    // Host 0 -> host 1 (connection 0), host 2 -> host 1 (connection 1).
    let (of_a, of_b0) = exchange((&apps[1], 0), (&apps[0], 0));
    let (of_c, of_b1) = exchange((&apps[1], 1), (&apps[2], 0));
    connect(&mut apps[0], 0, &of_b0);
    connect(&mut apps[1], 0, &of_a);
    connect(&mut apps[2], 0, &of_b1);
    connect(&mut apps[1], 1, &of_c);
    let src: Vec<Vec<u8>> = [0, 2]
        .iter()
        .map(|&i| fill(&apps[i].mr, 40 + i as u64))
        .collect();
    let mut rng = Rng(seed);
    // Host 0's messages land in the first half of host 1's destination area, host 2's (the
    // same messages) in the second.
    let quarter = BUF / 4;
    let early = workload(&mut rng, 3, 16, 7_000);
    assert!(early
        .iter()
        .all(|m| (m.remote_off + m.len()) as usize <= 3 * quarter));
    let late: Vec<Msg> = early
        .iter()
        .map(|m| Msg {
            remote_off: m.remote_off + quarter as u64,
            ..m.clone()
        })
        .collect();
    pre_post_recvs(&mut apps[1], 0, &early);
    pre_post_recvs(&mut apps[1], 1, &late);
    host.hold_doorbells(true);
    post(&mut apps[0], 0, &of_b0, &early, 6);
    post(&mut apps[2], 0, &of_b1, &late, 6);
    host.hold_doorbells(false);
    host.run();
    let (x, y) = apps.split_at_mut(1);
    let (b, c) = y.split_at_mut(1);
    let half = BUF / 2;
    check_area(
        seed,
        (&mut x[0], 0),
        (&mut b[0], 0),
        &early,
        &src[0],
        half..3 * quarter,
    );
    check_area(
        seed,
        (&mut c[0], 0),
        (&mut b[0], 1),
        &late,
        &src[1],
        3 * quarter..BUF,
    );
    let k = host.clos_counters();
    assert!(k.fabric.conserved(), "{k:?}");
    k
}

/// The checker above is not vacuous: with the datapath's planted bug (a last-hop trim NACK
/// taken as an ACK) the incast's trims make it fail; the same run without the bug passes, and
/// its trims happened at the last hop.
#[test]
fn planted_datapath_bug_is_caught() {
    let caught = std::panic::catch_unwind(|| incast_with_last_hop_trims(true));
    assert!(caught.is_err(), "the planted bug went unnoticed");
    let c = incast_with_last_hop_trims(false);
    assert!(
        c.last_hop_trims > 0,
        "the incast trimmed at the last hop: {c:?}"
    );
}

/// A stalled firmware core (`WindowKind::Stall`) holds the sender's completions until the
/// stall ends: the datapath sends and the peer places and ACKs, but the sender's firmware takes
/// no report, so no completion is written; when its cores run again every completion arrives,
/// in order, with every byte in place.
#[test]
fn a_stalled_firmware_core_holds_completions_until_it_runs_again() {
    let mut cfg = lossy(3, 0);
    cfg.step_budget_ns = 20_000;
    let host = SimHost::on_clos(&[4, 5].map(SimNicConfig::numbered), cfg).expect("host");
    let (mut a, mut b, of_b) = connected_pair(&host);
    let src = fill(&a.mr, 31);
    let mut rng = Rng(31);
    let msgs = workload(&mut rng, 4, 10, 3_000);
    pre_post_recvs(&mut b, 0, &msgs);
    let t0 = host.now_ns();
    host.schedule_window(WindowKind::Stall { nic: 0 }, t0, t0 + 200_000);
    post(&mut a, 0, &of_b, &msgs, 10);
    host.advance_to(t0 + 150_000);
    let mut wc = [WorkCompletion::default(); 16];
    assert_eq!(
        a.conns[0].scq.poll(&mut wc).expect("poll"),
        0,
        "no send completion while the sender's cores are stalled"
    );
    let placed = host.clos_counters().bytes_placed;
    assert!(placed > 0, "the datapath still sent and the peer placed");
    host.advance_to(t0 + 200_001);
    host.run();
    check(3, (&mut a, 0), (&mut b, 0), &msgs, &src);
}

/// A write with a wrong rkey is NACKed by the peer's engine: the requester sees a
/// REMOTE_ACCESS completion, its QP goes to ERROR, and the next request is flushed.
#[test]
fn bad_rkey_is_a_remote_access_error_through_the_engine() {
    let host = SimHost::clos_pair().expect("host");
    let (mut a, b, of_b) = connected_pair(&host);
    let sg = [a.mr.sge(0, 100).expect("sge")];
    let wr = SendWr {
        wr_id: 1,
        op: WriteOp::Write,
        sg_list: &sg,
        remote_addr: of_b.addr,
        rkey: of_b.rkey ^ 0x40,
        signaled: true,
        solicited: false,
        fence: false,
    };
    let conn = &mut a.conns[0];
    conn.qp.post_send(&[wr]).expect("post");
    let c = poll_all(&mut conn.scq, 1);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].status, CqeStatus::RemoteAccess, "{c:?}");
    assert_eq!(conn.qp.query_state().expect("query"), QpState::Error);
    let mut z = vec![0u8; 100];
    b.mr.read(0, &mut z).expect("read");
    assert!(z.iter().all(|x| *x == 0), "nothing placed");
}

/// A write posted before the peer's QP is ready (the OCP benchmark's server writes right after
/// its own RTS, while its client may still be in INIT): the requester retransmits into the
/// peer until its doorbell's step budget of virtual time is spent, and the fabric is left
/// waiting on a retransmission timer. The peer's RTR and RTS are admin commands: they let
/// virtual time move on, the next retransmission is placed and the write completes (nothing
/// else would ever drive the fabric when both programs only spin on memory).
#[test]
fn write_posted_before_the_peer_is_ready_completes_once_it_is() {
    let host = SimHost::clos_pair().expect("host");
    let mut a = host_app(&host, 0);
    let mut b = host_app(&host, 1);
    let (of_a, of_b) = exchange((&b, 0), (&a, 0));
    connect(&mut a, 0, &of_b);
    let src = fill(&a.mr, 19);
    let sg = [a.mr.sge(0, 100).expect("sge")];
    let wr = SendWr {
        wr_id: 7,
        op: WriteOp::Write,
        sg_list: &sg,
        remote_addr: of_b.addr,
        rkey: of_b.rkey,
        signaled: true,
        solicited: false,
        fence: false,
    };
    a.conns[0].qp.post_send(&[wr]).expect("post");
    assert!(!host.idle(), "the write waits for a peer still in INIT");
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(a.conns[0].scq.poll(&mut wc).expect("poll"), 0);
    connect(&mut b, 0, &of_a);
    let c = poll_all(&mut a.conns[0].scq, 1);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!((c[0].wr_id, c[0].status), (7, CqeStatus::Success), "{c:?}");
    let mut got = vec![0u8; 100];
    b.mr.read(0, &mut got).expect("read");
    assert_eq!(got, src[..100], "the write's bytes are placed");
    assert!(host.idle());
}

/// The same with a peer that takes many more steps to get ready: each step (here
/// `SimHost::run`) moves virtual time by at most the step budget, and the requester's
/// exponential backoff (retry count 25: forever) soon waits longer than one budget between
/// retransmissions. A step still reaches the next retransmission (the budget counts from the
/// first thing due), so once the peer is ready the write completes.
#[test]
fn write_waiting_on_a_backoff_longer_than_the_step_budget_completes() {
    let host = SimHost::clos_pair().expect("host");
    let mut a = host_app(&host, 0);
    let mut b = host_app(&host, 1);
    let (of_a, of_b) = exchange((&b, 0), (&a, 0));
    connect(&mut a, 0, &of_b);
    let src = fill(&a.mr, 23);
    let sg = [a.mr.sge(0, 64).expect("sge")];
    let wr = SendWr {
        wr_id: 9,
        op: WriteOp::Write,
        sg_list: &sg,
        remote_addr: of_b.addr,
        rkey: of_b.rkey,
        signaled: true,
        solicited: false,
        fence: false,
    };
    a.conns[0].qp.post_send(&[wr]).expect("post");
    // 131 us * 2^k between retransmissions: past 2 s (the default budget) from k = 14 on.
    for _ in 0..20 {
        host.run();
    }
    assert!(!host.idle(), "still retransmitting into a QP in INIT");
    connect(&mut b, 0, &of_a);
    let c = poll_all(&mut a.conns[0].scq, 1);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!((c[0].wr_id, c[0].status), (9, CqeStatus::Success), "{c:?}");
    let mut got = vec![0u8; 64];
    b.mr.read(0, &mut got).expect("read");
    assert_eq!(got, src[..64], "the write's bytes are placed");
}
