//! Hosts and connections set up only through the driver's public API, the way an OCP MRC
//! controller and application do it: written once for the swarm tester, the whole-system
//! tests and the scenario applications ([`super::workload`]).
//!
//! Errors are strings that name the step that failed (`"QP: ..."`, `"RTR: ..."`), so a caller
//! can prefix the host or seed and either return or panic with them.

use crate::nic_host::SimHost;
use mrc_driver::api::connect::ConnInfo;
use mrc_driver::api::*;
use mrc_driver::ctl::plan::Clos;
use mrc_driver::ctl::{self, Controller, EvFormatSpec, NsccParams};
use mrc_driver::device::DeviceConfig;

/// The SRv6 uSID block every test fabric's planner and format profile use.
pub const USID_BLOCK: u32 = 0xfcbb_bb00;

/// The requester and responder MPR, the in-flight Write-with-Immediate limit, the retry count
/// ("forever") and the ACK timeout exponent of every test connection.
const MPR: u16 = 4;
const MAX_WIMM: u16 = 8;
const RETRIES: u8 = 25;
const ACK_TIMEOUT_EXP: u8 = 7;

/// One host: controller and application contexts on its NIC, the controller's profiles, a PD.
pub struct HostApp {
    pub ctl: Controller,
    pub ctx: Context,
    pub pd: ProtectionDomain,
    /// The EV profile every QP of the host uses.
    pub ev: u32,
    /// The NSCC profile every QP of the host uses.
    pub cc: u32,
}

/// What the controller of a host installs: EVs towards `dst` from the planner over `clos`,
/// `evs` of them with `min_active` kept active.
pub struct EvPlan<'a> {
    pub clos: &'a Clos,
    pub dst: u32,
    pub evs: u16,
    pub min_active: u16,
}

/// A two-tier Clos of `planes` planes and `spines` spines (8 leaves of 4 hosts) in
/// [`USID_BLOCK`]: the test fabrics' topology description.
pub fn test_clos(planes: u8, spines: u16) -> Clos {
    Clos {
        planes,
        tiers: 2,
        leaves: 8,
        spines,
        pods: 0,
        cores: 0,
        hosts_per_leaf: 4,
        block: USID_BLOCK,
    }
}

/// Host `i` of `host`: a controller context installs an SRv6 EXPLICIT EV profile from the path
/// planner and an NSCC profile; an application context on the same device allocates a PD.
pub fn host_app(host: &SimHost, i: usize, plan: &EvPlan) -> Result<HostApp, String> {
    let nic = host.nics().get(i).ok_or(format!("no NIC {i}"))?;
    let c = Context::from_backend(nic.backend(), &DeviceConfig::default(), Role::Controller)
        .map_err(|x| format!("controller context: {x}"))?;
    let ctx = Context::from_device(c.device(), Role::Application);
    let ctl = Controller::new(&c).map_err(|x| format!("controller: {x}"))?;
    let fmt = ctl
        .create_ev_format_profile(&EvFormatSpec::srv6(USID_BLOCK))
        .map_err(|x| format!("format profile: {x}"))?;
    let evs = mrc_driver::ctl::plan::plan(plan.clos, i as u32, plan.dst, plan.evs)
        .map_err(|x| format!("plan: {x}"))?;
    let ev = ctl::install_plan(&ctl, fmt, &evs, plan.min_active)
        .map_err(|x| format!("EV profile: {x}"))?;
    let cc = ctl
        .create_cc_profile(&NsccParams::default())
        .map_err(|x| format!("CC profile: {x}"))?;
    let pd = ctx.alloc_pd().map_err(|x| format!("PD: {x}"))?;
    Ok(HostApp {
        ctl,
        ctx,
        pd,
        ev,
        cc,
    })
}

/// A bulk QP with its own send and receive CQs (QP first: it drops before them).
pub struct Endpoint {
    pub qp: QueuePair,
    pub scq: CompletionQueue,
    pub rcq: CompletionQueue,
}

impl HostApp {
    /// A new bulk QP (64-deep queues, 256-deep CQs) in INIT with the host's profiles.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let scq = self
            .ctx
            .create_cq(256, None)
            .map_err(|e| format!("CQ: {e}"))?;
        let rcq = self
            .ctx
            .create_cq(256, None)
            .map_err(|e| format!("CQ: {e}"))?;
        let mut qp = self
            .pd
            .create_qp(&QpInitAttr {
                send_cq: &scq,
                recv_cq: &rcq,
                sq_depth: 64,
                rq_depth: 64,
                hint: QpHint {
                    bulk: true,
                    ..QpHint::default()
                },
            })
            .map_err(|e| format!("QP: {e}"))?;
        qp.modify_init(&InitAttr {
            ev_profile: self.ev,
            cc_profile: self.cc,
        })
        .map_err(|e| format!("INIT: {e}"))?;
        Ok(Endpoint { qp, scq, rcq })
    }

    /// What a peer needs to reach `qp` starting at `psn` and to write into `mr`.
    pub fn conn_info(&self, qp: &QueuePair, mr: &MemoryRegion, psn: u32) -> ConnInfo {
        ConnInfo {
            qpn: qp.qpn(),
            psn,
            rkey: mr.rkey(),
            addr: mr.addr(),
            len: mr.len() as u64,
            gid: self.ctx.gid(),
        }
    }
}

/// RTR with the peer's data (what it sent us) and RTS with our own first PSN.
pub fn connect(qp: &mut QueuePair, own_psn: u32, peer: &ConnInfo) -> Result<(), String> {
    connect_with(qp, own_psn, peer, RETRIES, ACK_TIMEOUT_EXP)
}

/// [`connect()`] with the RTS retry count and ACK timeout exponent given.
pub fn connect_with(
    qp: &mut QueuePair,
    own_psn: u32,
    peer: &ConnInfo,
    retry_count: u8,
    ack_timeout_exp: u8,
) -> Result<(), String> {
    qp.modify_rtr(&RtrAttr {
        dest_qpn: peer.qpn,
        remote_addr: peer.gid,
        rq_psn: peer.psn,
        responder_mpr: MPR,
        max_wimm: MAX_WIMM,
        dynamic_mpr: false,
    })
    .map_err(|e| format!("RTR: {e}"))?;
    qp.modify_rts(&RtsAttr {
        sq_psn: own_psn,
        requester_mpr: MPR,
        max_wimm: MAX_WIMM,
        retry_count,
        ack_timeout_exp,
    })
    .map_err(|e| format!("RTS: {e}"))
}

/// One message of a workload: local pieces (offset in the sender's region, length), offset in
/// the receiver's region, immediate, signaled.
#[derive(Clone, Debug)]
pub struct Msg {
    pub wr_id: u64,
    pub pieces: Vec<(u64, u32)>,
    pub remote_off: u64,
    pub imm: Option<u32>,
    pub signaled: bool,
}

impl Msg {
    /// Payload bytes.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.pieces.iter().map(|p| u64::from(p.1)).sum()
    }

    /// The receive `wr_id` a Write-with-Immediate message consumes (see [`pre_post_recvs`]).
    pub fn recv_wr_id(&self) -> u64 {
        self.wr_id ^ 0xdead
    }
}

/// Posts `msgs` from `mr` on `qp` to the peer described by `peer`, with one doorbell.
pub fn post(
    qp: &mut QueuePair,
    mr: &MemoryRegion,
    peer: &ConnInfo,
    msgs: &[Msg],
) -> Result<(), String> {
    let sges: Vec<Vec<Sge>> = msgs
        .iter()
        .map(|m| {
            m.pieces
                .iter()
                .map(|&(o, l)| mr.sge(o, l).map_err(|e| format!("sge: {e}")))
                .collect()
        })
        .collect::<Result<_, _>>()?;
    let wrs: Vec<SendWr> = msgs
        .iter()
        .zip(&sges)
        .map(|(m, sg)| SendWr {
            wr_id: m.wr_id,
            op: m.imm.map_or(WriteOp::Write, WriteOp::WriteImm),
            sg_list: sg,
            remote_addr: peer.addr + m.remote_off,
            rkey: peer.rkey,
            signaled: m.signaled,
            solicited: false,
            fence: false,
        })
        .collect();
    qp.post_send(&wrs).map_err(|e| format!("post_send: {e}"))
}

/// Pre-posts one receive per Write-with-Immediate of `msgs` on `qp` (MRC has no RNR, so the
/// receiver posts before the sender starts), with [`Msg::recv_wr_id`] as the `wr_id`.
pub fn pre_post_recvs(qp: &mut QueuePair, msgs: &[Msg]) -> Result<(), String> {
    let recvs: Vec<RecvWr> = msgs
        .iter()
        .filter(|m| m.imm.is_some())
        .map(|m| RecvWr {
            wr_id: m.recv_wr_id(),
        })
        .collect();
    for chunk in recvs.chunks(32) {
        qp.post_recv(chunk).map_err(|e| format!("post_recv: {e}"))?;
    }
    Ok(())
}
