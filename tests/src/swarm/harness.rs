//! The hosts of a seed, set up and driven only through the driver's public API (with
//! [`crate::hosts`]): per host a controller (EV format, EV and CC profiles) and an application
//! context; per connection a QP, its CQs and a registered region on each side.

use mrc_driver::api::connect::ConnInfo;
use mrc_driver::api::*;
use mrc_sim::nic_host::{SimHost, SimNicConfig};

use super::plan::{ConnPlan, Msg, Plan};
use crate::hosts::{self, Endpoint, EvPlan, HostApp};

/// One host: controller and application contexts, the controller's profiles, a PD.
pub type App = HostApp;

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
    let clos = hosts::test_clos(plan.planes, plan.spines);
    let evs = EvPlan {
        clos: &clos,
        dst: (i as u32 + 1) % plan.hosts as u32,
        evs: plan.evs,
        min_active: (plan.evs / 4).max(1),
    };
    hosts::host_app(host, i, &evs).map_err(|x| format!("host {i}: {x}"))
}

fn side(a: &App, region: u64) -> Result<Side, String> {
    let Endpoint { qp, scq, rcq } = a.endpoint()?;
    let mr =
        a.pd.reg_mr(region as usize, Access::ALL)
            .map_err(|e| format!("MR: {e}"))?;
    Ok(Side { qp, scq, rcq, mr })
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
    let of_req = a.conn_info(&req.qp, &req.mr, req_psn);
    let peer = b.conn_info(&resp.qp, &resp.mr, resp_psn);
    hosts::connect(&mut resp.qp, resp_psn, &of_req)?;
    hosts::connect(&mut req.qp, req_psn, &peer)?;
    let mut r = super::rng::Rng::new(seed ^ (k as u64) << 40);
    let src: Vec<u8> = (0..c.region).map(|_| r.next_u64() as u8).collect();
    req.mr.write(0, &src).map_err(|e| format!("fill: {e}"))?;
    hosts::pre_post_recvs(&mut resp.qp, &c.msgs)?;
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
    hosts::post(&mut conn.req.qp, &conn.req.mr, &conn.peer, msgs)
}
