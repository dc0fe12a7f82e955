//! Two NIC main loops driven the way a host driver drives a NIC: every object is made through
//! admin commands (the 64-byte mrc-abi commands the host interface hands the loop), executed by
//! the shared `mrc_firmware::admin` executor on the NIC's tables and its engine, with the
//! datapath model behind the loop's rings standing in for the datapath hardware. A QP pair
//! goes RESET -> INIT -> RTR -> RTS with attributes, a region is registered (a FW->DP region
//! write; the reply waits for the datapath to take it), a write and a Write-with-Immediate
//! cross the wire, and their CQEs reach the host interface on the right CQ with the device
//! QPNs. Bad attributes, bad transitions and unknown handles are refused with the status and
//! syndrome the ABI names, and change nothing.

mod common;

use common::*;
use mrc_abi::device::admin::body::*;
use mrc_abi::device::admin::{AdminCommand, AdminReply, AdminStatus, QpState, EVENT_MASK_EV_BAD};
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus, CQE_SOLICITED};
use mrc_abi::device::csr::{CsrEvent, LossEntry, PostCqe, WimmPlaced, LOSS_REORDER, QP_RESET};
use mrc_abi::device::event::Event;
use mrc_abi::device::EvState;
use mrc_abi::Psn;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::datapath::packet::{LocalBuf, SendWr};
use mrc_firmware::datapath::stage::DpState;
use mrc_firmware::engine::QpState as EngineState;
use mrc_nicloop::{LoopConfig, NicAdmin, NicCapacity, NicLoop, EVS, FW_VERSION};

struct Nic {
    lp: Box<NicLoop>,
    dp: ModelDp,
    admin: Box<NicAdmin>,
    gid: [u8; 16],
    next_id: u16,
}

impl Nic {
    fn new(last: u8) -> Nic {
        let cfg = LoopConfig {
            mtu_payload: MTU,
            ..LoopConfig::DEFAULT
        };
        let mut gid = [0u8; 16];
        gid[0] = 0xfd;
        gid[15] = last;
        Nic {
            lp: Box::new(NicLoop::new(cfg).unwrap()),
            dp: ModelDp::new(),
            admin: Box::new(NicAdmin::new()),
            gid,
            next_id: 0,
        }
    }

    /// One main-loop step with the datapath model's part before and after it.
    fn step(&mut self, now: u64) {
        self.dp.hw(now);
        self.lp.step_admin(now, &mut self.dp, &mut self.admin);
        self.dp.hw(now);
    }

    /// One admin command through the loop's admin queue; its reply (steps until it comes).
    fn raw(&mut self, raw: [u8; 64]) -> AdminReply {
        self.dp.admin.push_back(raw);
        for _ in 0..4 {
            self.step(0);
            if let Some(r) = self.dp.replies.pop() {
                assert!(self.dp.replies.is_empty());
                return r;
            }
        }
        panic!("no reply to the command");
    }

    fn cmd(&mut self, c: AdminCommand) -> AdminReply {
        self.next_id += 1;
        let r = self.raw(encode(&c, self.next_id));
        assert_eq!(r.command_id, self.next_id);
        r
    }

    fn ok(&mut self, c: AdminCommand) -> [u64; 3] {
        let r = self.cmd(c);
        assert_eq!(r.status, AdminStatus::Ok, "{c:?}: {r:?}");
        r.result
    }

    fn refused(&mut self, c: AdminCommand, status: AdminStatus, syndrome: u32) {
        let r = self.cmd(c);
        assert_eq!((r.status, r.syndrome), (status, syndrome), "{c:?}");
    }

    fn qp_state(&mut self, qpn: u32) -> u64 {
        self.ok(AdminCommand::QueryQp(id(qpn)))[0]
    }

    fn engine_state(&self, qpn: u32) -> Option<EngineState> {
        let e = self.admin.qps.get(&qpn)?.engine_qpn()?;
        self.lp.engine().qp_state(e)
    }

    /// The CQEs the host interface wrote.
    fn cqes(&self) -> Vec<PostCqe> {
        self.dp
            .host_writes()
            .into_iter()
            .filter_map(|e| match e {
                CsrEvent::PostCqe(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    /// The event records the host interface wrote.
    fn events(&self) -> Vec<Event> {
        self.dp
            .host_writes()
            .into_iter()
            .filter_map(|e| match e {
                CsrEvent::PostEvent(p) => p.event().ok(),
                _ => None,
            })
            .collect()
    }
}

/// Byte offset of a body field in the 64-byte command (the syndrome of attribute errors).
macro_rules! at {
    ($t:ty, $f:ident) => {
        8 + core::mem::offset_of!($t, $f) as u32
    };
}

/// PD, CQ and QP of one NIC: (pd, cqn, qpn).
fn objects(n: &mut Nic) -> (u32, u32, u32) {
    let pd = n.ok(AdminCommand::AllocPd)[0] as u32;
    let cq = n.ok(create_cq())[0] as u32;
    let qp = n.ok(create_qp(pd, cq))[0] as u32;
    (pd, cq, qp)
}

/// Both NICs step, then the wire carries what each sent to the other.
fn round(nics: &mut [Nic; 2], wires: &mut [Wire; 2], now: u64) {
    for n in nics.iter_mut() {
        n.step(now);
    }
    let [a, b] = nics;
    wires[0].carry(now, &mut a.dp, &mut b.dp, |_, _| false);
    wires[1].carry(now, &mut b.dp, &mut a.dp, |_, _| false);
}

fn write(wr_id: u64, off: u64, len: u32, imm: Option<u32>, rkey: u32) -> SendWr {
    SendWr {
        wr_id,
        local: LocalBuf::default(),
        remote_va: REGION_VA + off,
        rkey,
        len,
        imm,
        signaled: true,
    }
}

/// Two connected NICs (default EV and CC profiles) and B's remotely writable region: (a's
/// QP, a's CQ, b's QP, b's CQ, b's PD, b's lkey, b's rkey).
fn connected(nics: &mut [Nic; 2]) -> (u32, u32, u32, u32, u32, u32, u32) {
    let [a, b] = nics;
    let (_, cq_a, qp_a) = objects(a);
    let (pd_b, cq_b, qp_b) = objects(b);
    let (gid_a, gid_b) = (a.gid, b.gid);
    for (n, q, peer, gid) in [(&mut *a, qp_a, qp_b, gid_b), (&mut *b, qp_b, qp_a, gid_a)] {
        n.ok(init(q, 0));
        n.ok(rtr(q, peer, gid, 1, 8));
        n.ok(rts(q, 1, 7));
    }
    let mr = b.ok(reg_mr(pd_b));
    (qp_a, cq_a, qp_b, cq_b, pd_b, mr[0] as u32, mr[1] as u32)
}

#[test]
fn qp_lifecycle_through_admin_commands_moves_a_write_between_two_nics() {
    let mut nics = [Nic::new(1), Nic::new(2)];
    let [a, b] = &mut nics;
    assert_eq!(a.ok(AdminCommand::QueryDevice)[0], u64::from(FW_VERSION));
    // The engine's per-QP capacities: PSN window, send and receive work requests.
    let limits = a.ok(AdminCommand::QueryLimits);
    assert_eq!(
        limits[..2],
        [
            NicCapacity::WINDOW_PSNS as u64,
            ((NicCapacity::SEND_QUEUE as u64) << 32) | NicCapacity::RECV_QUEUE as u64
        ]
    );
    let (_, cq_a, qp_a) = objects(a);
    let (pd_b, cq_b, qp_b) = objects(b);
    // QPs and CQs share the doorbell-page number space.
    assert_eq!((cq_a, qp_a), (1, 2));
    assert_eq!(a.qp_state(qp_a), QpState::Reset as u64);
    assert_eq!(a.engine_state(qp_a), Some(EngineState::Reset));

    // RESET -> INIT with the default EV and CC profiles; the engine QP follows, and the
    // datapath's context of the device QPN (not the engine's number) with it.
    a.ok(init(qp_a, 0));
    b.ok(init(qp_b, 0));
    assert_eq!(a.engine_state(qp_a), Some(EngineState::Init));
    assert!(a
        .dp
        .stage
        .qp(qp_a)
        .is_some_and(|q| q.state == DpState::Init));
    // INIT -> RTR: the engine's window rule refuses an MPR of 3 (3 * 128 > its 256 PSNs) and
    // a max WIMM above its receive queue; nothing changes.
    a.refused(
        rtr(qp_a, qp_b, b.gid, 3, 8),
        AdminStatus::BadAttribute,
        at!(QpRtr, responder_mpr),
    );
    a.refused(
        rtr(qp_a, qp_b, b.gid, 1, 17),
        AdminStatus::BadAttribute,
        at!(QpRtr, max_wimm),
    );
    assert_eq!(a.qp_state(qp_a), QpState::Init as u64);
    assert_eq!(a.engine_state(qp_a), Some(EngineState::Init));
    a.ok(rtr(qp_a, qp_b, b.gid, 1, 8));
    b.ok(rtr(qp_b, qp_a, a.gid, 1, 8));
    // RTR -> RTS: the same rule on the send window.
    a.refused(
        rts(qp_a, 3, 7),
        AdminStatus::BadAttribute,
        at!(QpRts, requester_mpr),
    );
    assert_eq!(a.engine_state(qp_a), Some(EngineState::Rtr));
    a.ok(rts(qp_a, 1, 7));
    b.ok(rts(qp_b, 1, 7));
    assert_eq!(a.qp_state(qp_a), QpState::Rts as u64);
    assert_eq!(b.engine_state(qp_b), Some(EngineState::Rts));

    // B registers a remotely writable region: a region write to the datapath's table.
    let mr = b.ok(reg_mr(pd_b));
    let (lkey, rkey) = (mr[0] as u32, mr[1] as u32);
    assert_eq!(b.dp.stage.regions().region(0).map(|r| r.rkey), Some(rkey));
    assert_eq!(b.lp.counters().region_writes, 1);

    // A write (3 packets) and a Write-with-Immediate (1 packet, into receive WQE 0 of B),
    // posted to the datapath by the host interface, as the doorbells do.
    b.dp.stage.post_recv(qp_b, 0).unwrap();
    a.dp.stage
        .post_send(qp_a, write(0, 0, 3 * MTU, None, rkey))
        .unwrap();
    a.dp.stage
        .post_send(qp_a, write(1, 0x1_0000, MTU, Some(0xabcd), rkey))
        .unwrap();
    let mut wires = [Wire::default(), Wire::default()];
    for k in 0..200 {
        round(&mut nics, &mut wires, 1_000 * k);
        if nics[0].cqes().len() == 2 && !nics[1].cqes().is_empty() {
            break;
        }
    }
    let [a, b] = &mut nics;
    let sent = a.cqes();
    assert_eq!(sent.len(), 2, "both sends completed");
    for (i, c) in sent.iter().enumerate() {
        assert_eq!(c.status, CqeStatus::Success as u8);
        assert_eq!(c.opcode, CqeOpcode::Write as u8);
        assert_eq!((c.cqn.get(), c.qpn.get()), (cq_a, qp_a), "device numbers");
        assert_eq!(c.wqe_index.get(), i as u16);
    }
    let recv = b.cqes();
    assert_eq!(recv.len(), 1);
    let r = recv[0];
    assert_eq!(r.status, CqeStatus::Success as u8);
    assert_eq!(r.opcode, CqeOpcode::RecvWriteImm as u8);
    assert_eq!((r.cqn.get(), r.qpn.get()), (cq_b, qp_b));
    assert_eq!(r.imm.get(), 0xabcd);
    assert_eq!(r.wqe_index.get(), 0);
    // Its `WimmPlaced` report came first (the model reports no length: 0).
    assert_eq!(b.lp.counters().wimm_placed, 1);
    assert_eq!(r.byte_len.get(), 0);
    assert_eq!(wires[0].placed_bytes(), 4 * u64::from(MTU));
    // No engine completion reached the host raw: every one became a CQE.
    assert!(!a
        .dp
        .host_writes()
        .iter()
        .any(|e| matches!(e, CsrEvent::Complete(_))));

    // The ACK summaries moved the send PSN QUERY_QP reports past the 4 packets sent, and
    // the datapath wrote both send CQEs on the firmware's orders.
    let q = a.ok(AdminCommand::QueryQp(id(qp_a)));
    assert_eq!(q[1] >> 32, 4);
    let e = a.admin.qps.get(&qp_a).unwrap().engine_qpn().unwrap();
    assert_eq!(a.lp.engine().qp(e).unwrap().counters.sends_completed, 2);
    assert_eq!(a.lp.counters().cqes, 0, "no send CQE made by the loop");

    // Teardown: objects in use are refused, then everything goes in order.
    b.refused(AdminCommand::DestroyCq(id(cq_b)), AdminStatus::InUse, 0);
    b.refused(AdminCommand::DeallocPd(id(pd_b)), AdminStatus::InUse, 0);
    let e = b.admin.qps.get(&qp_b).unwrap().engine_qpn().unwrap();
    b.ok(AdminCommand::DestroyQp(id(qp_b)));
    assert_eq!(b.lp.engine().qp_state(e), None, "engine QP destroyed");
    // The engine's RESET reached the datapath context of the device QPN.
    assert!(b
        .dp
        .written()
        .iter()
        .any(|c| matches!(c, CsrEvent::QpState(s) if s.qpn.get() == qp_b && s.state == QP_RESET)));
    b.refused(
        AdminCommand::DestroyQp(id(qp_b)),
        AdminStatus::NotFound,
        at!(ObjectId, id),
    );
    b.ok(AdminCommand::DeregMr(id(lkey)));
    assert_eq!(b.dp.stage.regions().region(0), None, "region removed");
    b.ok(AdminCommand::DestroyCq(id(cq_b)));
    b.ok(AdminCommand::DeallocPd(id(pd_b)));
    let c = b.lp.counters();
    assert_eq!(c.admin_replies_lost, 0);
    assert_eq!(c.region_writes, 2);
    assert!(c.admin_errors >= 3);
}

/// The reply to REG_MR / DEREG_MR comes once the datapath took the region write, not before:
/// once the host has it, the rkey works (or no longer places anything).
#[test]
fn region_replies_wait_for_the_datapath_to_take_the_region_write() {
    let mut n = Nic::new(1);
    let pd = n.ok(AdminCommand::AllocPd)[0] as u32;
    n.dp.stalled = true;
    n.next_id += 1;
    n.dp.admin.push_back(encode(&reg_mr(pd), n.next_id));
    for now in 0..5 {
        n.step(now);
    }
    assert!(
        n.dp.replies.is_empty(),
        "no reply before the datapath took the write"
    );
    assert_eq!(n.dp.stage.regions().region(0), None);
    // Nothing else runs on the admin ring meanwhile.
    n.dp.admin.push_back(encode(&AdminCommand::QueryDevice, 99));
    n.step(5);
    assert!(n.dp.replies.is_empty());
    n.dp.stalled = false;
    n.step(6);
    n.step(7);
    let replies: Vec<u16> = n.dp.replies.iter().map(|r| r.command_id).collect();
    assert_eq!(
        replies,
        [n.next_id, 99],
        "in order, once the write was taken"
    );
    assert!(n.dp.stage.regions().region(0).is_some());
}

#[test]
fn bad_commands_are_refused_with_status_and_syndrome_and_change_nothing() {
    let mut n = Nic::new(1);
    let (pd, cq, qp) = objects(&mut n);
    let before = *n.admin;
    let engine_before = n.engine_state(qp);
    // Unknown handles name the field.
    n.refused(
        create_qp(pd, 9),
        AdminStatus::NotFound,
        at!(CreateQp, send_cq),
    );
    n.refused(create_qp(7, cq), AdminStatus::NotFound, at!(CreateQp, pd));
    n.refused(init(9, 0), AdminStatus::NotFound, at!(QpInit, qpn));
    n.refused(init(qp, 5), AdminStatus::NotFound, at!(QpInit, ev_profile));
    n.refused(
        AdminCommand::DeallocPd(id(99)),
        AdminStatus::NotFound,
        at!(ObjectId, id),
    );
    // A bad transition: RESET -> RTR, RESET -> RTS.
    n.refused(rtr(qp, 1, [1; 16], 1, 8), AdminStatus::BadState, 0);
    n.refused(rts(qp, 1, 7), AdminStatus::BadState, 0);
    // Device attribute rules: an interrupt vector the function lacks, an EV profile larger
    // than the NIC's per-QP EV table.
    n.refused(
        AdminCommand::CreateCq(CreateCq {
            log2_entries: 4,
            rsvd: 0,
            irq_vector: 9.into(),
            rsvd2: 0.into(),
            base: 0x1_0000.into(),
        }),
        AdminStatus::BadAttribute,
        at!(CreateCq, irq_vector),
    );
    let fmt = udp_format(&mut n);
    n.refused(
        ev_profile(fmt, 200, 0),
        AdminStatus::BadAttribute,
        at!(EvProfile, num_evs),
    );
    // A profile still in INIT cannot be used by a QP.
    let p = n.ok(ev_profile(fmt, 64, 0))[0] as u32;
    n.refused(init(qp, p), AdminStatus::BadState, 0);
    // Malformed commands: the mrc-abi decoder's status and syndrome (a retry count above 25,
    // a reserved byte set, an unknown opcode).
    n.refused(
        rts(qp, 1, 26),
        AdminStatus::BadAttribute,
        at!(QpRts, retry_count),
    );
    let mut raw = encode(&AdminCommand::AllocPd, 77);
    raw[63] = 1;
    let r = n.raw(raw);
    assert_eq!(
        (r.status, r.syndrome, r.command_id),
        (AdminStatus::ReservedSet, 63, 77)
    );
    let mut raw = [0u8; 64];
    raw[0] = 0x7f;
    assert_eq!(n.raw(raw).status, AdminStatus::UnknownOpcode);
    // FW_* is not on the image's admin ring.
    n.refused(AdminCommand::FwStatus, AdminStatus::UnknownOpcode, 0x40);
    // Nothing changed but the two profiles made on purpose.
    assert_eq!(n.admin.qps.get(&qp), before.qps.get(&qp));
    assert_eq!(n.admin.qps.len(), 1);
    assert_eq!(n.admin.cqs.len(), 1);
    assert_eq!(n.admin.pds.len(), 1);
    assert_eq!(n.engine_state(qp), engine_before);
    assert_eq!(n.lp.engine().qp_state(1), None, "no second engine QP");
    assert_eq!(n.lp.counters().admin_commands, n.next_id as u64 + 2);
}

fn udp_format(n: &mut Nic) -> u32 {
    n.ok(AdminCommand::CreateEvFormatProfile(EvFormatProfile {
        id: 0.into(),
        encoding: mrc_abi::wire::EvFormat::Udp as u8,
        flags: 0,
        dscp: 0,
        hop_limit: 64,
        locator_block: 0.into(),
        src_port_min: 49152.into(),
        src_port_max: 65535.into(),
    }))[0] as u32
}

fn ev_profile(fmt: u32, num: u16, mask: u32) -> AdminCommand {
    AdminCommand::CreateEvProfile(EvProfile {
        id: 0.into(),
        format_profile: fmt.into(),
        kind: 0,
        state: 0,
        min_active_evs: 1.into(),
        num_evs: num.into(),
        rsvd: 0.into(),
        event_mask: mask.into(),
        seed: 0.into(),
    })
}

#[test]
fn port_admin_state_reaches_host_and_engine_and_a_failed_write_fails_the_qp() {
    let mut nics = [Nic::new(1), Nic::new(2)];
    let (qp_a, cq_a, ..) = connected(&mut nics);
    let a = &mut nics[0];
    // Port 1 admin down: a PORT_DOWN event for the host, plane 1 down in the engine.
    a.ok(AdminCommand::SetPortAdminState(PortAdmin {
        port: 1,
        up: 0,
        rsvd: 0.into(),
    }));
    assert!(a.events().contains(&Event::PortDown { port: 1, plane: 1 }));
    assert_eq!(a.lp.engine().counters().plane_downs, 1);
    assert_eq!(a.ok(AdminCommand::QueryPort(id(1)))[0], 0);
    assert_eq!(a.ok(AdminCommand::QueryPort(id(2)))[0], 1 << 32 | 1);
    // A write to an rkey B never registered: B NACKs, A's CQE says REMOTE_ACCESS, the device
    // QP moves to ERROR and the host gets QP_FATAL after the CQE.
    a.dp.stage
        .post_send(qp_a, write(0, 0, MTU, None, 0x8000_0bad))
        .unwrap();
    let mut wires = [Wire::default(), Wire::default()];
    for k in 0..100 {
        round(&mut nics, &mut wires, 1_000 * k);
        if !nics[0].cqes().is_empty() && !nics[0].events().is_empty() {
            break;
        }
    }
    let a = &mut nics[0];
    let c = a.cqes();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, CqeStatus::RemoteAccess as u8);
    assert_eq!(c[0].cqn.get(), cq_a);
    assert_eq!(a.qp_state(qp_a), QpState::Error as u64);
    let writes = a.dp.host_writes();
    let cqe_at = writes
        .iter()
        .position(|e| matches!(e, CsrEvent::PostCqe(_)))
        .unwrap();
    let fatal_at = writes
        .iter()
        .position(|e| matches!(e, CsrEvent::PostEvent(p) if matches!(p.event(), Ok(Event::QpFatal { qpn, .. }) if qpn == qp_a)))
        .expect("QP_FATAL");
    assert!(fatal_at > cqe_at, "QP_FATAL after the CQE");
    assert_eq!(a.lp.counters().qp_fatal, 1);
}

/// A link change the firmware learns itself (its transceiver monitor) takes the admin state's
/// path: PORT_DOWN for the host, the plane down in the engine (its EVs retired, a `PlaneDown`
/// for the datapath), QUERY_PORT's link bit; and back up. An admin-down port's link changes
/// tell the host nothing (its operational state stays down).
#[test]
fn a_link_change_from_the_transceiver_monitor_takes_the_admin_port_path() {
    let mut nics = [Nic::new(1), Nic::new(2)];
    let _ = connected(&mut nics);
    let a = &mut nics[0];
    assert!(a.lp.set_port_link(5_000, 2, false));
    assert!(!a.lp.set_port_link(5_000, 2, false), "no change, no event");
    a.step(5_000);
    assert!(a.events().contains(&Event::PortDown { port: 2, plane: 2 }));
    assert_eq!(a.lp.engine().counters().plane_downs, 1);
    assert!(a
        .dp
        .written()
        .iter()
        .any(|e| matches!(e, CsrEvent::PlaneDown(p) if p.plane == 2)));
    let evs: Vec<_> = (0..EVS as u16)
        .filter_map(|ev| a.lp.engine().ev_stats(0, ev))
        .map(|s| (s.plane, s.state))
        .collect();
    let on_plane = |p: u8| evs.iter().filter(move |(pl, _)| *pl == p);
    assert!(on_plane(2).count() > 0 && on_plane(1).count() > 0);
    assert!(on_plane(2).all(|(_, s)| *s == EvState::AssumedBad));
    assert!(on_plane(1).all(|(_, s)| *s != EvState::AssumedBad));
    assert_eq!(a.ok(AdminCommand::QueryPort(id(2)))[0], 1 << 32);
    // Back up: PORT_UP with the speed, the plane up in the engine.
    assert!(a.lp.set_port_link(9_000, 2, true));
    a.step(9_000);
    assert!(a.events().iter().any(|e| matches!(
        e,
        Event::PortUp {
            port: 2,
            plane: 2,
            ..
        }
    )));
    assert_eq!(a.lp.engine().counters().plane_ups, 1);
    // Admin down, then the link goes: no second PORT_DOWN.
    a.ok(AdminCommand::SetPortAdminState(PortAdmin {
        port: 3,
        up: 0,
        rsvd: 0.into(),
    }));
    let downs = |a: &Nic| {
        a.events()
            .iter()
            .filter(|e| matches!(e, Event::PortDown { .. }))
            .count()
    };
    let before = downs(a);
    assert!(a.lp.set_port_link(10_000, 3, false));
    a.step(10_000);
    assert_eq!(downs(a), before);
    // A port the NIC does not have: counted, nothing changes.
    assert!(!a.lp.set_port_link(10_000, 9, false));
    let c = a.lp.counters();
    assert_eq!((c.link_changes, c.bad_link_ports), (3, 1));
}

/// Entries on the DP->FW ring carry device QPNs: one for a QP the tables do not have is
/// dropped and counted; an EV the engine retires on a loss report reaches the host as an
/// EV_STATE_CHANGE event of the device QP when its EV profile asks for it.
#[test]
fn device_qpns_on_the_rings_and_ev_events_by_profile() {
    let mut n = Nic::new(1);
    let (_, cq, qp) = objects(&mut n);
    let fmt = udp_format(&mut n);
    let p = n.ok(ev_profile(fmt, 64, EVENT_MASK_EV_BAD))[0] as u32;
    n.ok(AdminCommand::ModifyEvProfile(EvProfile {
        id: p.into(),
        format_profile: fmt.into(),
        kind: 0,
        state: mrc_abi::device::admin::EvProfileState::Online as u8,
        min_active_evs: 1.into(),
        num_evs: 64.into(),
        rsvd: 0.into(),
        event_mask: EVENT_MASK_EV_BAD.into(),
        seed: 0.into(),
    }));
    n.ok(init(qp, p));
    n.ok(rtr(qp, 9, [7; 16], 1, 8));
    n.ok(rts(qp, 1, 7));
    // A loss on EV 5 of the device QP, and one for a device QPN nobody has.
    let loss = |q: u32| {
        CsrEvent::Loss(LossEntry::new(q, Psn::new(0), 5, 1, 100, 0, LOSS_REORDER)).encode()
    };
    n.dp.events.push_back(loss(qp));
    n.dp.events.push_back(loss(qp + 5));
    for now in 0..4 {
        n.step(1_000 + now);
    }
    assert_eq!(n.lp.counters().unknown_qpn, 1);
    let e = n.admin.qps.get(&qp).unwrap().engine_qpn().unwrap();
    assert_eq!(
        n.lp.engine().ev_stats(e, 5).map(|s| s.state),
        Some(mrc_firmware::engine::ev_state::EvState::AssumedBad)
    );
    assert!(n.events().contains(&Event::EvStateChange {
        qpn: qp,
        ev_index: 5,
        old: EvState::Good,
        new: EvState::AssumedBad,
    }));
    // The retransmission order went to the datapath context of the device QPN.
    assert!(n
        .dp
        .written()
        .iter()
        .any(|c| matches!(c, CsrEvent::Retransmit(r) if r.qpn.get() == qp)));
    // A placed Write-with-Immediate of the device QP: its CQE carries the message length and
    // the solicited bit the report gave, on the QP's receive CQ.
    n.dp.stage.post_recv(qp, 4).unwrap();
    let w = WimmPlaced::new(qp, 0, Psn::new(3), 0x77, 777, true, 4);
    n.dp.events.push_back(CsrEvent::WimmPlaced(w).encode());
    for now in 0..3 {
        n.step(2_000 + now);
    }
    let c = *n.cqes().last().expect("a receive CQE");
    assert_eq!(c.opcode, CqeOpcode::RecvWriteImm as u8);
    assert_eq!((c.qpn.get(), c.cqn.get(), c.wqe_index.get()), (qp, cq, 4));
    assert_eq!((c.byte_len.get(), c.imm.get()), (777, 0x77));
    assert_eq!(c.flags & CQE_SOLICITED, CQE_SOLICITED);
}
