//! The hosts of a seed, set up and driven only through the driver's public API: per host a
//! controller (EV format, EV and CC profiles) and an application context; per connection a
//! QP, its CQs and a registered region on each side.

use mrc_driver::api::connect::ConnInfo;
use mrc_driver::api::*;
use mrc_driver::ctl::plan::Clos;
use mrc_driver::ctl::{self, Controller, EvFormatSpec, NsccParams};
use mrc_driver::device::DeviceConfig;
use mrc_sim::nic_host::{SimHost, SimNicConfig};

use super::plan::{ConnPlan, Msg, Plan};

/// One host: controller and application contexts, the controller's profiles, a PD.
pub struct App {
    pub ctl: Controller,
    pub ctx: Context,
    pub pd: ProtectionDomain,
    /// The EV profile every QP of the host uses.
    pub ev: u32,
    pub cc: u32,
}

/// One side of a connection (QP first: it drops before its CQs).
pub struct Side {
    pub qp: QueuePair,
    pub scq: CompletionQueue,
    pub rcq: CompletionQueue,
    pub mr: MemoryRegion,
}

/// A connection: the requester on host `from`, the responder on host `to`.
pub struct Conn {
    pub req: Side,
    pub resp: Side,
    /// What the requester learnt of the responder.
    pub peer: ConnInfo,
    /// The requester's source bytes.
    pub src: Vec<u8>,
    /// The requester's first PSN (the responder expects it).
    pub req_psn: u32,
}

/// The NIC configurations of a plan: planes ports on planes planes.
pub fn nic_configs(plan: &Plan) -> Vec<SimNicConfig> {
    (0..plan.hosts)
        .map(|i| {
            let mut c = SimNicConfig::numbered(4 + i as u8);
            c.params.num_ports = u32::from(plan.planes);
            c.params.num_planes = u32::from(plan.planes);
            c
        })
        .collect()
}

/// Host `i`'s controller installs an SRv6 EXPLICIT EV profile from the path planner (a
/// two-tier Clos of the plan's planes and spines) and an NSCC profile.
pub fn host_app(plan: &Plan, host: &SimHost, i: usize) -> Result<App, String> {
    let e = |what: &str| format!("host {i}: {what}");
    let nic = &host.nics()[i];
    let c = Context::from_backend(nic.backend(), &DeviceConfig::default(), Role::Controller)
        .map_err(|x| e(&format!("controller context: {x}")))?;
    let ctx = Context::from_device(c.device(), Role::Application);
    let ctl = Controller::new(&c).map_err(|x| e(&format!("controller: {x}")))?;
    let fmt = ctl
        .create_ev_format_profile(&EvFormatSpec::srv6(0xfcbb_bb00))
        .map_err(|x| e(&format!("format profile: {x}")))?;
    let clos = Clos {
        planes: plan.planes,
        tiers: 2,
        leaves: 8,
        spines: plan.spines,
        pods: 0,
        cores: 0,
        hosts_per_leaf: 4,
        block: 0xfcbb_bb00,
    };
    let dst = (i as u32 + 1) % plan.hosts as u32;
    let evs = clos
        .plan(i as u32, dst, plan.evs)
        .map_err(|x| e(&format!("plan: {x}")))?;
    let ev = ctl::install_plan(&ctl, fmt, &evs, (plan.evs / 4).max(1))
        .map_err(|x| e(&format!("EV profile: {x}")))?;
    let cc = ctl
        .create_cc_profile(&NsccParams::default())
        .map_err(|x| e(&format!("CC profile: {x}")))?;
    let pd = ctx.alloc_pd().map_err(|x| e(&format!("PD: {x}")))?;
    Ok(App {
        ctl,
        ctx,
        pd,
        ev,
        cc,
    })
}

fn side(a: &App, region: u64) -> Result<Side, String> {
    let scq = a.ctx.create_cq(256, None).map_err(|e| format!("CQ: {e}"))?;
    let rcq = a.ctx.create_cq(256, None).map_err(|e| format!("CQ: {e}"))?;
    let mut qp =
        a.pd.create_qp(&QpInitAttr {
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
        ev_profile: a.ev,
        cc_profile: a.cc,
    })
    .map_err(|e| format!("INIT: {e}"))?;
    let mr =
        a.pd.reg_mr(region as usize, Access::ALL)
            .map_err(|e| format!("MR: {e}"))?;
    Ok(Side { qp, scq, rcq, mr })
}

fn info(a: &App, s: &Side, psn: u32) -> ConnInfo {
    ConnInfo {
        qpn: s.qp.qpn(),
        psn,
        rkey: s.mr.rkey(),
        addr: s.mr.addr(),
        len: s.mr.len() as u64,
        gid: a.ctx.gid(),
    }
}

/// RTR with the peer's data and RTS with our own first PSN.
fn connect(s: &mut Side, own_psn: u32, peer: &ConnInfo) -> Result<(), String> {
    s.qp.modify_rtr(&RtrAttr {
        dest_qpn: peer.qpn,
        remote_addr: peer.gid,
        rq_psn: peer.psn,
        responder_mpr: 4,
        max_wimm: 8,
        dynamic_mpr: false,
    })
    .map_err(|e| format!("RTR: {e}"))?;
    s.qp.modify_rts(&RtsAttr {
        sq_psn: own_psn,
        requester_mpr: 4,
        max_wimm: 8,
        retry_count: 25,
        ack_timeout_exp: 7,
    })
    .map_err(|e| format!("RTS: {e}"))
}

/// Connection `k` of the plan: both sides created, connected (the connection data is what
/// the OCP examples exchange out of band), the source filled, the receives pre-posted.
pub fn open(apps: &[App], k: usize, c: &ConnPlan, seed: u64) -> Result<Conn, String> {
    let (a, b) = (&apps[c.from], &apps[c.to]);
    let mut req = side(a, c.region)?;
    let mut resp = side(b, c.region)?;
    // PSNs near the 24-bit wrap.
    let psn = |x: u64| (0x00ff_ff00 + (seed.wrapping_mul(31) + x) as u32 % 0x200) & 0xff_ffff;
    let (req_psn, resp_psn) = (psn(2 * k as u64), psn(2 * k as u64 + 1));
    let of_req = info(a, &req, req_psn);
    let peer = info(b, &resp, resp_psn);
    connect(&mut resp, resp_psn, &of_req)?;
    connect(&mut req, req_psn, &peer)?;
    let mut r = super::rng::Rng::new(seed ^ (k as u64) << 40);
    let src: Vec<u8> = (0..c.region).map(|_| r.next_u64() as u8).collect();
    req.mr.write(0, &src).map_err(|e| format!("fill: {e}"))?;
    let recvs: Vec<RecvWr> = c
        .msgs
        .iter()
        .filter(|m| m.imm.is_some())
        .map(|m| RecvWr {
            wr_id: m.wr_id ^ 0xdead,
        })
        .collect();
    for chunk in recvs.chunks(32) {
        resp.qp
            .post_recv(chunk)
            .map_err(|e| format!("post_recv: {e}"))?;
    }
    Ok(Conn {
        req,
        resp,
        peer,
        src,
        req_psn,
    })
}

/// Posts `msgs` on `conn` (one doorbell).
pub fn post(conn: &mut Conn, msgs: &[Msg]) -> Result<(), String> {
    let mr = &conn.req.mr;
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
            remote_addr: conn.peer.addr + m.remote_off,
            rkey: conn.peer.rkey,
            signaled: m.signaled,
            solicited: false,
            fence: false,
        })
        .collect();
    conn.req
        .qp
        .post_send(&wrs)
        .map_err(|e| format!("post_send: {e}"))
}
