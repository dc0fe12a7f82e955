//! QP hints and QPs: `mrc_create_qp_hint` ... `mrc_post_send`.
//!
//! # Hints
//! OCP's hint attributes (QPs per peer, send peers, remote receivers) are kept and reported
//! back; the device's own hint (latency / bulk, DSCP) comes from the hint's vendor
//! configuration: `vendor_cfg[0]` bit 0 latency, bit 1 bulk; `vendor_cfg[1]` the DSCP (0..=63);
//! every other byte 0. A QP takes its hint at INIT (`MRC_QP_HINT`); a hint in use cannot be
//! destroyed (`EBUSY`).
//!
//! # Work requests
//! Only RDMA Write and RDMA Write with Immediate (`EINVAL` otherwise, as the header says);
//! `IBV_SEND_SIGNALED` (or `sq_sig_all`), `IBV_SEND_SOLICITED` and `IBV_SEND_FENCE` are
//! honoured, `IBV_SEND_INLINE` is `EINVAL` (no inline data). A receive carries no buffer (a
//! Write with Immediate places its data by its remote address); its scatter list is checked for
//! size and otherwise ignored. As with verbs, the requests before the first bad one are posted
//! and `bad_wr` names it.

use std::sync::{Arc, Mutex};

use mrc_abi::device::wqe::MAX_SEND_SGE;
use mrc_driver::api::{QpHint, QpInitAttr, QpState, QueuePair, RecvWr, SendWr, Sge, WriteOp};

use crate::context::{context, qp_limits};
use crate::cq::{Cq, CqKind};
use crate::ctypes::mrc::*;
use crate::ctypes::verbs::{
    ibv_qp_attr, ibv_qp_cap, ibv_send_wr, ibv_sge, qp_attr_mask as m, send_flags as sf, send_ops,
    wr_opcode,
};
use crate::error::{CapiError, Result};
use crate::events::{Element, QpRoute};
use crate::ffi::CData;
use crate::handle::Token;
use crate::qp_attr::{ibv_state, ocp_retry, plan_modify, QpAttrs, Transition};
use crate::state::{get, lock, TABLES};
use crate::verbs::{Pd, Users};

/// Most scatter entries of a receive (accepted and ignored).
pub const MAX_RECV_SGE: u32 = 16;

/// A QP hint.
pub struct Hint {
    /// Its MRC context.
    pub ctx: Token,
    /// Its attributes.
    pub attr: Mutex<mrc_qp_hint_attr>,
    /// QPs that were given it.
    pub users: Users,
}

/// The device hint of a hint's vendor configuration (see the module docs).
///
/// # Errors
/// `EINVAL` for undefined bits or bytes, or a DSCP above 63.
pub fn device_hint(cfg: &[u8; MRC_MAX_VENDOR_CFG_SIZE]) -> Result<QpHint> {
    let flags = cfg[0];
    if flags & !3 != 0 || cfg[1] > 63 || cfg[2..].iter().any(|&b| b != 0) {
        return Err(CapiError::inval(
            "vendor_cfg: byte 0 holds the latency (bit 0) and bulk (bit 1) flags, byte 1 the \
             DSCP (0..=63), every other byte must be 0",
        ));
    }
    Ok(QpHint {
        latency: flags & 1 != 0,
        bulk: flags & 2 != 0,
        dscp: cfg[1],
    })
}

fn check_hint_attr(a: &mrc_qp_hint_attr, mask: u32) -> Result<()> {
    let bad = mask & !hint_mask::ALL;
    if bad != 0 {
        return Err(CapiError::inval(format!(
            "qp_hint_attr_mask has bits {bad:#x} that are no enum mrc_qp_hint_attr_mask value"
        )));
    }
    for (bit, name, v) in [
        (
            hint_mask::MRC_QP_HINT_NUM_QPS_PER_PEER,
            "num_qps_per_peer",
            a.num_qps_per_peer,
        ),
        (
            hint_mask::MRC_QP_HINT_NUM_SEND_PEERS,
            "num_send_peers",
            a.num_send_peers,
        ),
        (
            hint_mask::MRC_QP_HINT_NUM_REMOTE_RECV_PEERS,
            "num_remote_recv_peers",
            a.num_remote_recv_peers,
        ),
    ] {
        if mask & bit != 0 && v < 0 {
            return Err(CapiError::inval(format!("{name} {v} is negative")));
        }
    }
    if mask & hint_mask::MRC_QP_HINT_VENDOR_CFG != 0 {
        device_hint(&a.vendor_cfg)?;
    }
    Ok(())
}

/// `mrc_create_qp_hint`.
///
/// # Errors
/// A bad context or attribute, too many hints.
pub fn create_hint(ctx: Token, init: mrc_qp_hint_init_attr) -> Result<Token> {
    let c = context(ctx, "mrc_ctx")?;
    check_hint_attr(&init.attr, hint_mask::ALL)?;
    if lock(&c.children).hints.len() as u32 >= crate::context::MAX_QP_HINTS {
        return Err(CapiError::new(
            crate::error::ENOMEM,
            format!(
                "the context has {} QP hints (max_qp_hint)",
                crate::context::MAX_QP_HINTS
            ),
        ));
    }
    let h = Arc::new(Hint {
        ctx,
        attr: Mutex::new(init.attr),
        users: Users::default(),
    });
    let token = lock(&TABLES.hints).insert(h)?;
    lock(&c.children).hints.push(token);
    Ok(token)
}

/// The hint named by `token`.
///
/// # Errors
/// A bad handle.
pub fn hint(token: Token) -> Result<Arc<Hint>> {
    get(&TABLES.hints, token, "qp_hint")
}

/// `mrc_destroy_qp_hint`.
///
/// # Errors
/// A bad hint (`EINVAL`), in use by a QP (`EBUSY`).
pub fn destroy_hint(token: Token) -> Result<()> {
    let mut t = lock(&TABLES.hints);
    let h = t.get(token, "qp_hint")?;
    h.users.check_idle("the QP hint", "QPs")?;
    t.remove(token, "qp_hint")?;
    drop(t);
    if let Ok(c) = context(h.ctx, "mrc_ctx") {
        lock(&c.children).hints.retain(|&x| x != token);
    }
    Ok(())
}

/// Copies the fields of `mask` from `src` into `dst` (the rest of `dst` untouched).
fn masked_hint_attr(dst: &mut mrc_qp_hint_attr, src: &mrc_qp_hint_attr, mask: u32) {
    use hint_mask as m;
    if mask & m::MRC_QP_HINT_NUM_QPS_PER_PEER != 0 {
        dst.num_qps_per_peer = src.num_qps_per_peer;
    }
    if mask & m::MRC_QP_HINT_NUM_SEND_PEERS != 0 {
        dst.num_send_peers = src.num_send_peers;
    }
    if mask & m::MRC_QP_HINT_NUM_REMOTE_RECV_PEERS != 0 {
        dst.num_remote_recv_peers = src.num_remote_recv_peers;
    }
    if mask & m::MRC_QP_HINT_VENDOR_CFG != 0 {
        dst.vendor_cfg = src.vendor_cfg;
    }
}

/// `mrc_query_qp_hint`: the attributes in `mask` (others of `out` untouched).
///
/// # Errors
/// A bad hint or mask.
pub fn query_hint(token: Token, out: &mut mrc_qp_hint_attr, mask: u32) -> Result<()> {
    let h = hint(token)?;
    check_hint_attr(&mrc_qp_hint_attr::default(), mask)?;
    masked_hint_attr(out, &lock(&h.attr), mask);
    Ok(())
}

/// `mrc_modify_qp_hint`: QPs already in INIT keep the device hint they were given.
///
/// # Errors
/// A bad hint, mask or value.
pub fn modify_hint(token: Token, new: &mrc_qp_hint_attr, mask: u32) -> Result<()> {
    let h = hint(token)?;
    check_hint_attr(new, mask)?;
    masked_hint_attr(&mut lock(&h.attr), new, mask);
    Ok(())
}

/// A QP's mutable part.
pub struct QpInner {
    /// The driver's QP.
    pub qp: QueuePair,
    /// Its attributes.
    pub attrs: QpAttrs,
    /// The hint it was given (counted in the hint's users).
    pub hint: Option<Arc<Hint>>,
}

/// A QP.
pub struct Qp {
    /// Its MRC context.
    pub ctx: Token,
    /// Its QPN.
    pub qpn: u32,
    /// Its PD.
    pub pd: Arc<Pd>,
    /// Its send CQ.
    pub send_cq: Arc<Cq>,
    /// Its receive CQ.
    pub recv_cq: Arc<Cq>,
    /// The creation attributes, with the capacities the QP got.
    pub init: CData<mrc_qp_init_attr>,
    /// Every send request is signaled.
    pub sq_sig_all: bool,
    /// The rest.
    pub inner: Mutex<QpInner>,
}

fn completion_cq(token: Token, ctx: Token, what: &str) -> Result<Arc<Cq>> {
    let t = lock(&TABLES.cqs);
    let cq = t.get(token, what)?;
    if cq.ctx != ctx {
        return Err(CapiError::inval(format!(
            "{what} belongs to another MRC context"
        )));
    }
    if matches!(cq.kind, CqKind::EvEvent) {
        return Err(CapiError::inval(format!(
            "{what} is an EV event CQ; QPs complete on CQs from mrc_create_cq"
        )));
    }
    cq.users.add();
    Ok(cq)
}

fn check_caps(cap: &ibv_qp_cap, max_entries: u32) -> Result<()> {
    for (name, v) in [
        ("cap.max_send_wr", cap.max_send_wr),
        ("cap.max_recv_wr", cap.max_recv_wr),
    ] {
        if v > max_entries.min(1 << 16) {
            return Err(CapiError::inval(format!(
                "{name} {v} is above the device's {} entries",
                max_entries.min(1 << 16)
            )));
        }
    }
    if cap.max_send_sge > MAX_SEND_SGE as u32 {
        return Err(CapiError::inval(format!(
            "cap.max_send_sge {} is above the device's {MAX_SEND_SGE}",
            cap.max_send_sge
        )));
    }
    if cap.max_recv_sge > MAX_RECV_SGE {
        return Err(CapiError::inval(format!(
            "cap.max_recv_sge {} is above {MAX_RECV_SGE} (receives carry no buffer on MRC)",
            cap.max_recv_sge
        )));
    }
    if cap.max_inline_data != 0 {
        return Err(CapiError::inval(format!(
            "cap.max_inline_data {}: this device has no inline data",
            cap.max_inline_data
        )));
    }
    Ok(())
}

/// `mrc_create_qp`; returns the handle and the attributes with the capacities granted.
///
/// # Errors
/// Bad handles (context, CQs of another context or EV event CQs, a PD of another device),
/// capacities, operations (only RDMA Write and Write with Immediate) or protocol version;
/// device errors.
pub fn create_qp(ctx: Token, a: mrc_qp_init_attr) -> Result<(Token, mrc_qp_init_attr)> {
    let c = context(ctx, "mrc_ctx")?;
    let allowed =
        send_ops::IBV_QP_EX_WITH_RDMA_WRITE | send_ops::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    if a.send_ops_flags & !allowed != 0 {
        return Err(CapiError::inval(format!(
            "send_ops_flags {:#x}: MRC QPs only RDMA Write and Write with Immediate",
            a.send_ops_flags
        )));
    }
    if a.protocol_version != MRC_PROTOCOL_VERSION_0 && a.protocol_version != MRC_PROTOCOL_VERSION_1
    {
        return Err(CapiError::inval(format!(
            "protocol_version {:#x}: this device speaks MRC_PROTOCOL_VERSION_1 (or 0 for the \
             default)",
            a.protocol_version
        )));
    }
    check_caps(&a.cap, c.dev().dev().attrs().limits.max_qp_entries)?;
    let pd = {
        let t = lock(&TABLES.pds);
        let pd = t.get(a.pd as usize, "pd")?;
        if !Arc::ptr_eq(&pd.vctx, &c.vctx) {
            return Err(CapiError::inval(
                "pd was allocated on another ibv_context than the MRC context's",
            ));
        }
        pd.users.add();
        pd
    };
    let undo_pd = |e: CapiError| {
        pd.users.sub();
        e
    };
    let send_cq = completion_cq(a.send_cq as Token, ctx, "send_cq").map_err(undo_pd)?;
    let recv_cq = match completion_cq(a.recv_cq as Token, ctx, "recv_cq") {
        Ok(cq) => cq,
        Err(e) => {
            send_cq.users.sub();
            return Err(undo_pd(e));
        }
    };
    let undo = |e: CapiError| {
        send_cq.users.sub();
        recv_cq.users.sub();
        pd.users.sub();
        e
    };
    let (CqKind::Completion(sq), CqKind::Completion(rq)) = (&send_cq.kind, &recv_cq.kind) else {
        return Err(undo(CapiError::inval("EV event CQ")));
    };
    fn attr<'a>(
        send_cq: &'a mrc_driver::api::CompletionQueue,
        recv_cq: &'a mrc_driver::api::CompletionQueue,
        cap: &ibv_qp_cap,
    ) -> QpInitAttr<'a> {
        QpInitAttr {
            send_cq,
            recv_cq,
            sq_depth: cap.max_send_wr.max(1),
            rq_depth: cap.max_recv_wr.max(1),
            hint: QpHint::default(),
        }
    }
    let made = {
        let s = lock(sq);
        if Arc::ptr_eq(&send_cq, &recv_cq) {
            pd.pd.create_qp(&attr(&s, &s, &a.cap))
        } else {
            let r = lock(rq);
            pd.pd.create_qp(&attr(&s, &r, &a.cap))
        }
    };
    let qp = made.map_err(|e| undo(e.into()))?;
    let qpn = qp.qpn();
    let mut init = a;
    init.cap = ibv_qp_cap {
        max_send_wr: qp.sq_depth(),
        max_recv_wr: qp.rq_depth(),
        max_send_sge: a.cap.max_send_sge.max(1),
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: 0,
    };
    let limits = qp_limits(c.dev());
    let obj = Arc::new(Qp {
        ctx,
        qpn,
        pd: pd.clone(),
        send_cq: send_cq.clone(),
        recv_cq: recv_cq.clone(),
        init: CData(init),
        sq_sig_all: a.sq_sig_all != 0,
        inner: Mutex::new(QpInner {
            qp,
            attrs: QpAttrs::new(&limits),
            hint: None,
        }),
    });
    let token = lock(&TABLES.qps).insert(obj).map_err(undo)?;
    lock(&c.children).qps.push(token);
    c.dev().events.add_qp(
        qpn,
        QpRoute {
            ctx,
            qp: token,
            ev_profile: 0,
        },
    );
    Ok((token, init))
}

/// The QP named by `token`.
///
/// # Errors
/// A bad handle.
pub fn qp(token: Token) -> Result<Arc<Qp>> {
    get(&TABLES.qps, token, "qp")
}

/// `mrc_destroy_qp`.
///
/// # Errors
/// A bad QP.
pub fn destroy_qp(token: Token) -> Result<()> {
    let q = lock(&TABLES.qps).remove(token, "qp")?;
    let c = context(q.ctx, "mrc_ctx");
    if let Ok(c) = &c {
        lock(&c.children).qps.retain(|&x| x != token);
        c.dev().events.remove_qp(q.qpn);
        c.dev().events.forget_element(q.ctx, Element::Qp(token));
    }
    if let Some(h) = lock(&q.inner).hint.take() {
        h.users.sub();
    }
    q.send_cq.users.sub();
    q.recv_cq.users.sub();
    q.pd.users.sub();
    Ok(())
}

/// `mrc_get_qpn`.
///
/// # Errors
/// A bad QP.
pub fn qpn(token: Token) -> Result<u32> {
    Ok(qp(token)?.qpn)
}

/// `mrc_modify_qp`.
///
/// # Errors
/// See [`crate::qp_attr::plan_modify`]; a bad hint; device errors.
pub fn modify_qp(
    token: Token,
    v: Option<&ibv_qp_attr>,
    vmask: u32,
    mr: Option<&mrc_qp_attr>,
    mmask: u32,
) -> Result<()> {
    let q = qp(token)?;
    let c = context(q.ctx, "mrc_ctx")?;
    let limits = qp_limits(c.dev());
    let mut inner = lock(&q.inner);
    let (next, t) = plan_modify(&inner.attrs, v, vmask, mr, mmask, &limits)?;
    // A hint given in this call must be a live hint of the same context.
    let new_hint = if mmask & qp_mask::MRC_QP_HINT != 0 && next.mrc.qp_hint as Token != 0 {
        let h = hint(next.mrc.qp_hint as Token)?;
        if h.ctx != q.ctx {
            return Err(CapiError::inval("qp_hint belongs to another MRC context"));
        }
        Some(h)
    } else {
        None
    };
    match t {
        Transition::None => {}
        Transition::Init(ev, cc, hint_token) => {
            let (ev_profile, cc_profile) = crate::ctl::device_profiles(c.dev(), ev, cc)?;
            let init = mrc_driver::api::InitAttr {
                ev_profile,
                cc_profile,
            };
            let device_hint = match (&new_hint, hint_token) {
                (Some(h), _) => device_hint(&lock(&h.attr).vendor_cfg)?,
                (None, 0) => QpHint::default(),
                (None, t) => device_hint(&lock(&hint(t)?.attr).vendor_cfg)?,
            };
            inner.qp.set_hint(device_hint)?;
            inner.qp.modify_init(&init)?;
            c.dev().events.add_qp(
                q.qpn,
                QpRoute {
                    ctx: q.ctx,
                    qp: token,
                    ev_profile: next.mrc.profile.ev_profile_id,
                },
            );
        }
        Transition::Rtr(a) => inner.qp.modify_rtr(&a)?,
        Transition::Rts(a) => inner.qp.modify_rts(&a)?,
        Transition::Reset => inner.qp.modify_reset_or_error(QpState::Reset)?,
        Transition::Error => inner.qp.modify_reset_or_error(QpState::Error)?,
    }
    // The hint bookkeeping follows the attributes: given, replaced, or forgotten at RESET.
    let keep = next.mrc.qp_hint as Token;
    if let Some(h) = new_hint {
        h.users.add();
        if let Some(old) = inner.hint.replace(h) {
            old.users.sub();
        }
    } else if keep == 0 {
        if let Some(old) = inner.hint.take() {
            old.users.sub();
        }
    }
    inner.attrs = next;
    Ok(())
}

/// `mrc_query_qp`: `(verbs attributes, MRC attributes, creation attributes)`. The verbs state
/// is the device's (a QP the device moved to ERROR reports ERROR).
///
/// # Errors
/// A bad QP, unknown mask bits, device errors.
pub fn query_qp(
    token: Token,
    vmask: u32,
    mmask: u32,
) -> Result<(ibv_qp_attr, mrc_qp_attr, mrc_qp_init_attr)> {
    let q = qp(token)?;
    if vmask & !m::ALL != 0 || mmask & !qp_mask::ALL != 0 {
        return Err(CapiError::inval(format!(
            "attr_mask {vmask:#x} / mrc_attr_mask {mmask:#x} have bits no enum defines"
        )));
    }
    let mut inner = lock(&q.inner);
    if vmask & (m::IBV_QP_STATE | m::IBV_QP_CUR_STATE) != 0 {
        let s = inner.qp.query_state()?;
        inner.attrs.state = s;
    }
    let a = &inner.attrs;
    let state = ibv_state(a.state);
    let v = ibv_qp_attr {
        qp_state: state,
        cur_qp_state: state,
        path_mtu: a.path_mtu,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qpn,
        qp_access_flags: a.access_flags,
        cap: q.init.cap,
        ah_attr: a.ah,
        pkey_index: a.pkey_index,
        port_num: a.port_num,
        timeout: a.mrc.timeout,
        retry_cnt: 7,
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        ..Default::default()
    };
    let mut mr = a.mrc;
    let count = crate::qp_attr::device_retry(mr.retry.linear_cnt, mr.retry.exp_cnt).unwrap_or(0);
    let (l, e) = ocp_retry(count);
    mr.retry.linear_cnt = l;
    mr.retry.exp_cnt = e;
    Ok((v, *mr, *q.init))
}

/// Writes the fields of `mask` from `src` into `dst` (the rest of `dst` untouched).
pub fn masked_mrc_attr(dst: &mut mrc_qp_attr, src: &mrc_qp_attr, mask: u32) {
    if mask & qp_mask::MRC_QP_MAX_WIMM != 0 {
        dst.wimm.max_wimm = src.wimm.max_wimm;
    }
    if mask & qp_mask::MRC_QP_MAX_WIMM_DEST != 0 {
        dst.wimm.max_wimm_dest = src.wimm.max_wimm_dest;
    }
    if mask & qp_mask::MRC_QP_MPR != 0 {
        dst.mpr.mpr = src.mpr.mpr;
    }
    if mask & qp_mask::MRC_QP_MPR_DEST != 0 {
        dst.mpr.mpr_dest = src.mpr.mpr_dest;
    }
    if mask & qp_mask::MRC_QP_TIMEOUT != 0 {
        dst.timeout = src.timeout;
    }
    if mask & qp_mask::MRC_QP_EV_PROFILE_ID != 0 {
        dst.profile.ev_profile_id = src.profile.ev_profile_id;
    }
    if mask & qp_mask::MRC_QP_CC_PROFILE_ID != 0 {
        dst.profile.cc_profile_id = src.profile.cc_profile_id;
    }
    if mask & qp_mask::MRC_QP_HINT != 0 {
        dst.qp_hint = src.qp_hint;
    }
    if mask & qp_mask::MRC_QP_RETRY_CNT != 0 {
        dst.retry = src.retry;
    }
    if mask & qp_mask::MRC_QP_CAP != 0 {
        dst.cap = src.cap;
    }
    if mask & qp_mask::MRC_QP_VENDOR_CFG != 0 {
        dst.vendor_cfg = src.vendor_cfg;
    }
}

/// Scatter entries of one converted send request.
pub type SgeStore = [Sge; MAX_SEND_SGE];

/// Checks one send request and converts it (its SGEs into `store`).
///
/// # Errors
/// `EINVAL` naming the request's problem.
pub fn convert_send<'a>(
    q: &Qp,
    wr: &ibv_send_wr,
    sges: &[ibv_sge],
    store: &'a mut SgeStore,
) -> Result<SendWr<'a>> {
    let op = match wr.opcode {
        wr_opcode::IBV_WR_RDMA_WRITE => WriteOp::Write,
        wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM => WriteOp::WriteImm(u32::from_be(wr.imm_data)),
        o => {
            return Err(CapiError::inval(format!(
                "wr_id {:#x}: opcode {o}: MRC QPs only RDMA Write and RDMA Write with Immediate",
                wr.wr_id
            )))
        }
    };
    let bad_flags =
        wr.send_flags & !(sf::IBV_SEND_SIGNALED | sf::IBV_SEND_SOLICITED | sf::IBV_SEND_FENCE);
    if bad_flags != 0 {
        return Err(CapiError::inval(format!(
            "wr_id {:#x}: send_flags {bad_flags:#x} (inline data, checksum offload) are not \
             supported",
            wr.wr_id
        )));
    }
    if sges.len() > q.init.cap.max_send_sge.max(1) as usize {
        return Err(CapiError::inval(format!(
            "wr_id {:#x}: {} scatter entries, the QP was created for {}",
            wr.wr_id,
            sges.len(),
            q.init.cap.max_send_sge.max(1)
        )));
    }
    for (s, g) in store.iter_mut().zip(sges) {
        *s = Sge {
            addr: g.addr,
            len: g.length,
            lkey: g.lkey,
        };
    }
    Ok(SendWr {
        wr_id: wr.wr_id,
        op,
        sg_list: &store[..sges.len()],
        remote_addr: wr.wr.rdma.remote_addr,
        rkey: wr.wr.rdma.rkey,
        signaled: q.sq_sig_all || wr.send_flags & sf::IBV_SEND_SIGNALED != 0,
        solicited: wr.send_flags & sf::IBV_SEND_SOLICITED != 0,
        fence: wr.send_flags & sf::IBV_SEND_FENCE != 0,
    })
}

/// Posts `wrs` with `post` (all or nothing per call, as the driver posts); on failure, the
/// index of the first request not posted (every earlier one was) and why. A failed batch is
/// retried one request at a time to find that index.
fn post_each<W>(
    wrs: &[W],
    mut post: impl FnMut(&[W]) -> mrc_driver::Result<()>,
) -> Result<(), (usize, CapiError)> {
    match post(wrs) {
        Ok(()) => Ok(()),
        Err(e) if wrs.len() == 1 => Err((0, e.into())),
        Err(_) => {
            for (i, w) in wrs.iter().enumerate() {
                post(std::slice::from_ref(w)).map_err(|e| (i, CapiError::from(e)))?;
            }
            Ok(())
        }
    }
}

impl Qp {
    /// Posts send requests; on failure, the index of the first one not posted (every earlier
    /// one was) and why.
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<(), (usize, CapiError)> {
        let mut inner = lock(&self.inner);
        post_each(wrs, |w| inner.qp.post_send(w))
    }

    /// Posts receives; on failure, as [`Qp::post_send`].
    pub fn post_recv(&self, wrs: &[RecvWr]) -> Result<(), (usize, CapiError)> {
        let mut inner = lock(&self.inner);
        post_each(wrs, |w| inner.qp.post_recv(w))
    }

    /// Checks a receive's scatter list size.
    ///
    /// # Errors
    /// `EINVAL` beyond the QP's `max_recv_sge`.
    pub fn check_recv_sge(&self, wr_id: u64, num_sge: i32) -> Result<()> {
        if num_sge < 0 || num_sge as u32 > self.init.cap.max_recv_sge.max(MAX_RECV_SGE) {
            return Err(CapiError::inval(format!(
                "receive wr_id {wr_id:#x}: num_sge {num_sge} is out of range"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_vendor_cfg_maps_to_the_device_hint() {
        let mut cfg = [0u8; MRC_MAX_VENDOR_CFG_SIZE];
        assert_eq!(device_hint(&cfg).unwrap(), QpHint::default());
        cfg[0] = 3;
        cfg[1] = 46;
        assert_eq!(
            device_hint(&cfg).unwrap(),
            QpHint {
                latency: true,
                bulk: true,
                dscp: 46
            }
        );
        cfg[1] = 64;
        assert!(device_hint(&cfg).is_err());
        cfg[1] = 0;
        cfg[9] = 1;
        assert!(device_hint(&cfg).is_err());
    }

    #[test]
    fn hint_masks_and_values_are_checked() {
        let a = mrc_qp_hint_attr {
            num_send_peers: -1,
            ..Default::default()
        };
        assert!(check_hint_attr(&a, hint_mask::MRC_QP_HINT_NUM_SEND_PEERS).is_err());
        assert!(check_hint_attr(&a, hint_mask::MRC_QP_HINT_NUM_QPS_PER_PEER).is_ok());
        assert!(check_hint_attr(&a, 1 << 5)
            .unwrap_err()
            .message
            .contains("no enum"));
    }
}
