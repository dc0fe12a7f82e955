//! Two NIC main loops driven the way a host driver drives a NIC: every object is made through
//! admin commands (the 64-byte mrc-abi commands the host interface hands the loop), executed by
//! the shared `mrc_firmware::admin` executor on the NIC's tables and its engine. A QP pair goes
//! RESET -> INIT -> RTR -> RTS with attributes, a region is registered, a write and a
//! Write-with-Immediate cross the fake wire, and their CQEs reach the host through the FW->DP
//! ring on the right CQ with the device QPNs. Bad attributes, bad transitions and unknown
//! handles are refused with the status and syndrome the ABI names, and change nothing.

mod common;

use common::*;
use mrc_abi::device::admin::body::*;
use mrc_abi::device::admin::{
    AdminCommand, AdminReply, AdminStatus, QpModify, QpState, ACCESS_LOCAL_WRITE,
    ACCESS_REMOTE_WRITE,
};
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus, CQE_SOLICITED};
use mrc_abi::device::csr::{CsrEvent, PostCqe, TxDone, WimmPlaced};
use mrc_abi::device::event::Event;
use mrc_abi::device::rxh::{RxhEntry, RxhVerdictCode, RXH_VERDICT_OFFSET};
use mrc_abi::wire::Opcode;
use mrc_firmware::engine::{EngineConfig, LocalBuf, QpState as EngineState, SendWr};
use mrc_nicloop::{NicAdmin, NicLoop, FW_VERSION};

struct Nic {
    lp: NicLoop,
    dp: FakeDp,
    admin: Box<NicAdmin>,
    gid: [u8; 16],
    next_id: u16,
}

impl Nic {
    fn new(last: u8) -> Nic {
        let cfg = EngineConfig {
            mtu_payload: MTU,
            ..EngineConfig::default()
        };
        let mut gid = [0u8; 16];
        gid[0] = 0xfd;
        gid[15] = last;
        Nic {
            lp: NicLoop::new(cfg).unwrap(),
            dp: FakeDp::default(),
            admin: Box::new(NicAdmin::new()),
            gid,
            next_id: 0,
        }
    }

    fn step(&mut self, now: u64) {
        self.lp.step_admin(now, &mut self.dp, &mut self.admin);
    }

    /// One admin command through the loop's admin queue; its reply.
    fn raw(&mut self, raw: [u8; 64]) -> AdminReply {
        self.dp.admin.push_back(raw);
        self.step(0);
        let r = self.dp.replies.pop().expect("a reply per command");
        assert!(self.dp.replies.is_empty());
        r
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

    fn cqes(&self) -> Vec<PostCqe> {
        self.dp
            .orders
            .iter()
            .filter_map(|e| match CsrEvent::decode(e) {
                Ok(CsrEvent::PostCqe(c)) => Some(c),
                _ => None,
            })
            .collect()
    }

    fn events(&self) -> Vec<Event> {
        self.dp
            .orders
            .iter()
            .filter_map(|e| match CsrEvent::decode(e) {
                Ok(CsrEvent::PostEvent(p)) => {
                    Event::from_words(p.event_kind, p.object.get(), p.arg.map(|w| w.get())).ok()
                }
                _ => None,
            })
            .collect()
    }
}

/// The 64 bytes of command `c` (as the driver writes them into the admin ring).
fn encode(c: &AdminCommand, id: u16) -> [u8; 64] {
    let cmd = c.encode(id, 0);
    let mut out = [0u8; 64];
    out[0] = cmd.opcode;
    out[1] = cmd.flags;
    out[2..4].copy_from_slice(&cmd.command_id.get().to_le_bytes());
    out[8..].copy_from_slice(&cmd.body);
    out
}

fn id(v: u32) -> ObjectId {
    ObjectId { id: v.into() }
}

fn create_qp(pd: u32, cq: u32) -> AdminCommand {
    AdminCommand::CreateQp(CreateQp {
        pd: pd.into(),
        send_cq: cq.into(),
        recv_cq: cq.into(),
        sq_log2: 4,
        rq_log2: 4,
        rsvd: 0.into(),
        sq_base: 0x2_0000.into(),
        rq_base: 0x3_0000.into(),
    })
}

fn init(qpn: u32, ev_profile: u32) -> AdminCommand {
    AdminCommand::ModifyQp(QpModify::Init(QpInit {
        qpn: qpn.into(),
        to_state: QpState::Init as u8,
        dscp: 26,
        hint_flags: 0.into(),
        ev_profile: ev_profile.into(),
        cc_profile: 0.into(),
    }))
}

fn rtr(qpn: u32, dest: u32, remote: [u8; 16], mpr: u16, wimm: u16) -> AdminCommand {
    AdminCommand::ModifyQp(QpModify::Rtr(QpRtr {
        qpn: qpn.into(),
        to_state: QpState::Rtr as u8,
        flags: 0,
        responder_mpr: mpr.into(),
        dest_qpn: dest.into(),
        max_wimm: wimm.into(),
        rsvd: 0.into(),
        rq_psn: 0.into(),
        remote_addr: remote,
    }))
}

fn rts(qpn: u32, mpr: u16, retry: u8) -> AdminCommand {
    AdminCommand::ModifyQp(QpModify::Rts(QpRts {
        qpn: qpn.into(),
        to_state: QpState::Rts as u8,
        retry_count: retry,
        requester_mpr: mpr.into(),
        max_wimm: 8.into(),
        ack_timeout_exp: 6,
        rsvd: 0,
        sq_psn: 0.into(),
    }))
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
    let cq = n.ok(AdminCommand::CreateCq(CreateCq {
        log2_entries: 6,
        rsvd: 0,
        irq_vector: 1.into(),
        rsvd2: 0.into(),
        base: 0x1_0000.into(),
    }))[0] as u32;
    let qp = n.ok(create_qp(pd, cq))[0] as u32;
    (pd, cq, qp)
}

/// Both loops step, then the wire carries every transmitted packet to the other NIC; the
/// receiving datapath reports each placed Write-with-Immediate (`WimmPlaced`) after its
/// verdict, as a placing datapath would.
fn round(nics: &mut [Nic; 2], now: u64) {
    for n in nics.iter_mut() {
        let answered = n.dp.answered.len();
        n.step(now);
        let placed: Vec<[u8; 64]> = n.dp.answered[answered..].to_vec();
        for e in placed {
            let (code, _) = verdict_of(&e);
            // The header as the parser wrote it (before the verdict).
            let mut hdr = e;
            hdr[RXH_VERDICT_OFFSET..].fill(0);
            let Ok(h) = RxhEntry::decode(&hdr) else {
                continue;
            };
            let last_imm = [Opcode::WriteOnlyImm as u8, Opcode::WriteLastImm as u8];
            if code == Some(RxhVerdictCode::Place) && last_imm.contains(&h.opcode) {
                let w = WimmPlaced {
                    kind: 0,
                    flags: 1,
                    msn: h.msn.get().into(),
                    qpn: h.dest_qpn,
                    last_psn: h.psn,
                    imm: h.imm,
                    byte_len: h.payload_len.get().into(),
                    rsvd: [0; 12],
                };
                n.dp.events.push_back(CsrEvent::WimmPlaced(w).encode());
            }
        }
    }
    for i in 0..2 {
        let tx = std::mem::take(&mut nics[i].dp.tx);
        for p in tx {
            receive(&mut nics[1 - i].dp, p);
        }
        nics[i].dp.orders_pending = 0;
    }
}

#[test]
fn qp_lifecycle_through_admin_commands_moves_a_write_between_two_nics() {
    let mut nics = [Nic::new(1), Nic::new(2)];
    let [a, b] = &mut nics;
    assert_eq!(a.ok(AdminCommand::QueryDevice)[0], u64::from(FW_VERSION));
    let (pd_a, cq_a, qp_a) = objects(a);
    let (pd_b, cq_b, qp_b) = objects(b);
    // QPs and CQs share the doorbell-page number space.
    assert_eq!((cq_a, qp_a), (1, 2));
    assert_eq!(a.qp_state(qp_a), QpState::Reset as u64);
    assert_eq!(a.engine_state(qp_a), Some(EngineState::Reset));

    // RESET -> INIT with the default EV and CC profiles; the engine QP follows.
    a.ok(init(qp_a, 0));
    b.ok(init(qp_b, 0));
    assert_eq!(a.engine_state(qp_a), Some(EngineState::Init));
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

    // B registers a remotely writable region: the engine places into it by rkey.
    let mr = b.ok(AdminCommand::RegMr(RegMr {
        pd: pd_b.into(),
        access: (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).into(),
        va: REGION_VA.into(),
        iova: 0x5000_0000.into(),
        length: (1u64 << 20).into(),
    }));
    let (lkey, rkey) = (mr[0] as u32, mr[1] as u32);
    assert_eq!(
        b.lp.engine().regions().region(0).map(|r| r.rkey),
        Some(rkey)
    );

    // A write (3 packets) and a Write-with-Immediate (1 packet, into receive WQE 0 of B).
    b.dp.wimm_reports = true;
    b.lp.post_recv(&b.admin, qp_b, 0).unwrap();
    let write = |wr_id: u64, off: u64, len: u32, imm: Option<u32>| SendWr {
        wr_id,
        local: LocalBuf::default(),
        remote_va: REGION_VA + off,
        rkey,
        len,
        imm,
        signaled: true,
    };
    a.lp.post_send(&a.admin, qp_a, write(0, 0, 3 * MTU, None))
        .unwrap();
    a.lp.post_send(&a.admin, qp_a, write(1, 0x1_0000, MTU, Some(0xabcd)))
        .unwrap();
    for k in 0..200 {
        round(&mut nics, 1_000 * k);
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
    // The length and solicited bit came from the datapath's WimmPlaced report.
    assert_eq!(r.byte_len.get(), MTU);
    assert_eq!(r.flags & CQE_SOLICITED, CQE_SOLICITED);
    assert_eq!(b.lp.counters().wimm_placed, 1);
    let placed: u32 = b.dp.placed.iter().map(|p| p.1).sum();
    assert_eq!(placed, 4 * MTU);

    // TxDone moves the send PSN QUERY_QP reports.
    let t = TxDone {
        kind: 0,
        rsvd: 0,
        wqe_index: 1.into(),
        qpn: qp_a.into(),
        first_psn: 3.into(),
        num_packets: 1.into(),
        tx_ts: 0.into(),
        rsvd2: [0; 12],
    };
    a.dp.events.push_back(CsrEvent::TxDone(t).encode());
    a.step(1_000_000);
    let q = a.ok(AdminCommand::QueryQp(id(qp_a)));
    assert_eq!(q[1] >> 32, 4);
    assert_eq!(a.lp.counters().tx_done, 1);

    // Teardown: objects in use are refused, then everything goes in order.
    b.refused(AdminCommand::DestroyCq(id(cq_b)), AdminStatus::InUse, 0);
    b.refused(AdminCommand::DeallocPd(id(pd_b)), AdminStatus::InUse, 0);
    let e = b.admin.qps.get(&qp_b).unwrap().engine_qpn().unwrap();
    b.ok(AdminCommand::DestroyQp(id(qp_b)));
    assert_eq!(b.lp.engine().qp_state(e), None, "engine QP destroyed");
    b.refused(
        AdminCommand::DestroyQp(id(qp_b)),
        AdminStatus::NotFound,
        at!(ObjectId, id),
    );
    b.ok(AdminCommand::DeregMr(id(lkey)));
    assert_eq!(b.lp.engine().regions().region(0), None, "region removed");
    b.ok(AdminCommand::DestroyCq(id(cq_b)));
    b.ok(AdminCommand::DeallocPd(id(pd_b)));
    let c = b.lp.counters();
    assert_eq!(c.admin_replies_lost, 0);
    assert!(c.admin_errors >= 3);
    let _ = pd_a;
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
    let fmt = n.ok(AdminCommand::CreateEvFormatProfile(EvFormatProfile {
        id: 0.into(),
        encoding: mrc_abi::wire::EvFormat::Udp as u8,
        flags: 0,
        dscp: 0,
        hop_limit: 64,
        locator_block: 0.into(),
        src_port_min: 49152.into(),
        src_port_max: 65535.into(),
    }))[0] as u32;
    let evp = |num: u16| {
        AdminCommand::CreateEvProfile(EvProfile {
            id: 0.into(),
            format_profile: fmt.into(),
            kind: 0,
            state: 0,
            min_active_evs: 1.into(),
            num_evs: num.into(),
            rsvd: 0.into(),
            event_mask: 0.into(),
            seed: 0.into(),
        })
    };
    n.refused(evp(200), AdminStatus::BadAttribute, at!(EvProfile, num_evs));
    // A profile still in INIT cannot be used by a QP.
    let p = n.ok(evp(64))[0] as u32;
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
    // FW_* is not on the image's admin ring; PROBE_EV needs RTS (and is BUSY on the NIC).
    n.refused(AdminCommand::FwStatus, AdminStatus::UnknownOpcode, 0x40);
    // Nothing changed but the two profiles made on purpose.
    assert_eq!(n.admin.qps.get(&qp), before.qps.get(&qp));
    assert_eq!(n.admin.qps.len(), 1);
    assert_eq!(n.admin.cqs.len(), 1);
    assert_eq!(n.admin.pds.len(), 1);
    assert_eq!(n.engine_state(qp), engine_before);
    assert_eq!(n.lp.engine().qp_state(1), None, "no second engine QP");
}

#[test]
fn port_admin_state_reaches_host_and_engine_and_a_failed_write_fails_the_qp() {
    let mut nics = [Nic::new(1), Nic::new(2)];
    let [a, b] = &mut nics;
    let (_, _, qp_a) = objects(a);
    let (_, _, qp_b) = objects(b);
    let (gid_a, gid_b) = (a.gid, b.gid);
    for (n, q, peer, gid) in [(&mut *a, qp_a, qp_b, gid_b), (&mut *b, qp_b, qp_a, gid_a)] {
        n.ok(init(q, 0));
        n.ok(rtr(q, peer, gid, 1, 8));
        n.ok(rts(q, 1, 7));
    }
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
    // QP moves to ERROR and the host gets QP_FATAL.
    a.lp.post_send(
        &a.admin,
        qp_a,
        SendWr {
            wr_id: 0,
            local: LocalBuf::default(),
            remote_va: REGION_VA,
            rkey: 0x8000_0bad,
            len: MTU,
            imm: None,
            signaled: true,
        },
    )
    .unwrap();
    for k in 0..100 {
        round(&mut nics, 1_000 * k);
        if !nics[0].cqes().is_empty() {
            break;
        }
    }
    let a = &mut nics[0];
    let c = a.cqes();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, CqeStatus::RemoteAccess as u8);
    assert_eq!(a.qp_state(qp_a), QpState::Error as u64);
    assert!(a.events().iter().any(|e| matches!(
        e,
        Event::QpFatal { qpn, .. } if *qpn == qp_a
    )));
    assert_eq!(a.lp.counters().qp_fatal, 1);
}
