//! `mrc_modify_qp` / `mrc_query_qp` attributes: what each mask bit means on this device, when
//! it may be given, and which device transition a call makes. Pure: no device, no C memory.
//!
//! # Rules
//! - Each attribute takes effect at one transition (the header's table): EV/CC profile and
//!   hint at INIT; the peer (`IBV_QP_AV`, `IBV_QP_DEST_QPN`), `IBV_QP_RQ_PSN`,
//!   `IBV_QP_PATH_MTU`, the responder MPR / max WIMM and `MRC_QP_CAP` at RTR; `IBV_QP_SQ_PSN`,
//!   the requester MPR / max WIMM, retry counts and timeout at RTS. It may be given in any call
//!   before that transition (it is kept until then) or in the transition's own call; after it,
//!   the device has fixed it and a new value is `EINVAL`.
//! - An attribute never given takes [`QpDefaults`]: OCP's `mrc_qp.md` example values (MPR 8,
//!   max WIMM 128, timeout 8, 7 linear + 25 (forever) exponential retries), capped at what the
//!   device allows.
//! - RTR needs the peer: `IBV_QP_AV` (with `is_global` and the peer's GID) and
//!   `IBV_QP_DEST_QPN`.
//! - The verbs attributes the header calls unsupported (`IBV_QP_PORT`, `IBV_QP_TIMEOUT`,
//!   `IBV_QP_RETRY_CNT`, `IBV_QP_RNR_RETRY`, `IBV_QP_MIN_RNR_TIMER`,
//!   `IBV_QP_MAX_QP_RD_ATOMIC`, `IBV_QP_MAX_DEST_RD_ATOMIC`, `IBV_QP_ALT_PATH`,
//!   `IBV_QP_PATH_MIG_STATE`) are accepted and have no effect: an MRC QP sprays over every port
//!   and its timeout and retries are the `MRC_QP_*` ones. Programs written for RC QPs (OCP's
//!   benchmark among them) pass them. A port number is still checked.
//! - `IBV_QP_QKEY`, `IBV_QP_CAP`, `IBV_QP_EN_SQD_ASYNC_NOTIFY`, `IBV_QP_RATE_LIMIT`, unknown
//!   bits, SQD/SQE states and vendor configuration (none is defined) are `EINVAL`.

use mrc_abi::device::admin::{MAX_ACK_TIMEOUT_EXP, RETRY_FOREVER};
use mrc_abi::device::QPN_LIMIT;
use mrc_driver::api::{QpState, RtrAttr, RtsAttr};

use crate::ctypes::mrc::{mrc_qp_attr, qp_cap, qp_mask, MRC_MAX_VENDOR_CFG_SIZE};
use crate::ctypes::verbs::{access, ibv_ah_attr, ibv_qp_attr, mtu, qp_attr_mask as m, qp_state};
use crate::error::{CapiError, Result, EINVAL, EOPNOTSUPP};
use crate::ffi::CData;
use crate::handle::Token;

/// What the device accepts for a QP (from the device's attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpLimits {
    /// Ports (1-based numbers `1..=num_ports`).
    pub num_ports: u8,
    /// GID table entries per port.
    pub gid_tbl_len: u8,
    /// Largest MPR, units of 128 PSNs.
    pub max_mpr: u8,
    /// Largest max WIMM as requester.
    pub max_wimm: u16,
    /// Largest max WIMM as responder.
    pub max_wimm_dest: u16,
    /// The device has dynamic MPR.
    pub dynamic_mpr: bool,
    /// The device generates TRIM NACKs (and cannot stop per QP).
    pub trim_nack: bool,
}

/// Attribute values used when a program never gives them (OCP's `mrc_qp.md` example).
pub struct QpDefaults;

impl QpDefaults {
    /// MPR, both directions (capped at the device's).
    pub const MPR: u8 = 8;
    /// Max WIMM, both directions (capped at the device's).
    pub const MAX_WIMM: u16 = 128;
    /// ACK timeout exponent: 1.024 us * 2^8 = 262 us.
    pub const TIMEOUT: u8 = 8;
    /// Linear retries.
    pub const RETRY_LINEAR: u8 = 7;
    /// Exponential retries (25 = forever).
    pub const RETRY_EXP: u8 = 25;
}

/// Everything a QP was given, kept for its later transitions and for `mrc_query_qp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttrs {
    /// State as this library last moved it.
    pub state: QpState,
    /// `qp_access_flags`.
    pub access_flags: u32,
    /// `pkey_index` (always 0).
    pub pkey_index: u16,
    /// `port_num` (informational).
    pub port_num: u8,
    /// `path_mtu` (`enum ibv_mtu`).
    pub path_mtu: u32,
    /// Peer QPN.
    pub dest_qpn: u32,
    /// First expected PSN.
    pub rq_psn: u32,
    /// First PSN sent.
    pub sq_psn: u32,
    /// The peer's address vector.
    pub ah: ibv_ah_attr,
    /// `IBV_QP_AV` was given.
    pub have_av: bool,
    /// `IBV_QP_DEST_QPN` was given.
    pub have_dest_qpn: bool,
    /// The MRC attributes (its `qp_hint` is the hint's token, or NULL).
    pub mrc: CData<mrc_qp_attr>,
}

/// The device transition a modify makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Attributes kept for a later transition; the device is not touched.
    None,
    /// RESET -> INIT with these OCP profile ids (EV, CC; 0: the device's default) and this
    /// hint (token).
    Init(u64, u64, Token),
    /// INIT -> RTR.
    Rtr(RtrAttr),
    /// RTR -> RTS.
    Rts(RtsAttr),
    /// Any -> RESET.
    Reset,
    /// Any -> ERROR.
    Error,
}

/// `enum ibv_qp_state` of a device state.
pub fn ibv_state(s: QpState) -> u32 {
    match s {
        QpState::Reset => qp_state::IBV_QPS_RESET,
        QpState::Init => qp_state::IBV_QPS_INIT,
        QpState::Rtr => qp_state::IBV_QPS_RTR,
        QpState::Rts => qp_state::IBV_QPS_RTS,
        QpState::Error => qp_state::IBV_QPS_ERR,
    }
}

fn device_state(s: u32) -> Result<QpState> {
    Ok(match s {
        qp_state::IBV_QPS_RESET => QpState::Reset,
        qp_state::IBV_QPS_INIT => QpState::Init,
        qp_state::IBV_QPS_RTR => QpState::Rtr,
        qp_state::IBV_QPS_RTS => QpState::Rts,
        qp_state::IBV_QPS_ERR => QpState::Error,
        qp_state::IBV_QPS_SQD | qp_state::IBV_QPS_SQE => {
            return Err(CapiError::inval(format!(
                "qp_state {s} (SQD/SQE) is not supported by MRC QPs"
            )))
        }
        _ => return Err(CapiError::inval(format!("qp_state {s} is not a QP state"))),
    })
}

fn order(s: QpState) -> u8 {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Error => 4,
    }
}

/// The device's retry count for OCP's linear + exponential counts.
///
/// The device retries up to 7 times at a fixed interval, then doubles it; 25 retries forever.
/// So a count of `n <= 7` is `(n, 0)`, `7 + e` is `(7, e)` for `e <= 17`, and 25 is `(7, 25)`.
///
/// # Errors
/// `EINVAL` for counts out of range or a split the device cannot do.
pub fn device_retry(linear: u8, exp: u8) -> Result<u8> {
    if linear > 7 {
        return Err(CapiError::inval(format!(
            "retry.linear_cnt {linear} is above the maximum 7"
        )));
    }
    if exp > RETRY_FOREVER {
        return Err(CapiError::inval(format!(
            "retry.exp_cnt {exp} is above the maximum 25 (25 = retry forever)"
        )));
    }
    match exp {
        0 => Ok(linear),
        _ if linear != 7 => Err(CapiError::inval(format!(
            "retry.linear_cnt {linear} with exp_cnt {exp}: this device backs off linearly for \
             exactly 7 retries before backing off exponentially (linear_cnt must be 7, or \
             exp_cnt 0)"
        ))),
        RETRY_FOREVER => Ok(RETRY_FOREVER),
        e if 7 + e < RETRY_FOREVER => Ok(7 + e),
        e => Err(CapiError::inval(format!(
            "retry.exp_cnt {e}: this device allows at most 17 exponential retries after 7 \
             linear ones (or 25 = retry forever)"
        ))),
    }
}

/// OCP's `(linear_cnt, exp_cnt)` of a device retry count (inverse of [`device_retry`]).
pub fn ocp_retry(count: u8) -> (u8, u8) {
    match count {
        0..=7 => (count, 0),
        RETRY_FOREVER => (7, RETRY_FOREVER),
        n => (7, n - 7),
    }
}

const IGNORED: u32 = m::IBV_QP_PORT
    | m::IBV_QP_TIMEOUT
    | m::IBV_QP_RETRY_CNT
    | m::IBV_QP_RNR_RETRY
    | m::IBV_QP_MIN_RNR_TIMER
    | m::IBV_QP_MAX_QP_RD_ATOMIC
    | m::IBV_QP_MAX_DEST_RD_ATOMIC
    | m::IBV_QP_ALT_PATH
    | m::IBV_QP_PATH_MIG_STATE;

const REJECTED: [(u32, &str); 4] = [
    (m::IBV_QP_QKEY, "IBV_QP_QKEY (a UD attribute)"),
    (m::IBV_QP_CAP, "IBV_QP_CAP (resizing a QP)"),
    (
        m::IBV_QP_EN_SQD_ASYNC_NOTIFY,
        "IBV_QP_EN_SQD_ASYNC_NOTIFY (SQD)",
    ),
    (
        m::IBV_QP_RATE_LIMIT,
        "IBV_QP_RATE_LIMIT (CC profiles pace MRC QPs)",
    ),
];

/// QP access flags an MRC QP accepts (`IBV_ACCESS_REMOTE_READ` has no effect: no read
/// reaches an MRC QP).
const QP_ACCESS: u32 = access::IBV_ACCESS_LOCAL_WRITE
    | access::IBV_ACCESS_REMOTE_WRITE
    | access::IBV_ACCESS_REMOTE_READ;

fn psn(field: &str, v: u32) -> Result<u32> {
    if v >= QPN_LIMIT {
        return Err(CapiError::inval(format!(
            "{field} {v:#x} does not fit in 24 bits"
        )));
    }
    Ok(v)
}

fn in_range<T: PartialOrd + Copy + std::fmt::Display>(
    field: &str,
    v: T,
    lo: T,
    hi: T,
) -> Result<T> {
    if v < lo || v > hi {
        return Err(CapiError::inval(format!(
            "{field} {v} is outside {lo}..={hi} on this device"
        )));
    }
    Ok(v)
}

impl QpAttrs {
    /// A new QP's attributes (RESET, defaults).
    pub fn new(l: &QpLimits) -> QpAttrs {
        let mut mrc = mrc_qp_attr::default();
        mrc.mpr.mpr = QpDefaults::MPR.min(l.max_mpr);
        mrc.mpr.mpr_dest = QpDefaults::MPR.min(l.max_mpr);
        mrc.wimm.max_wimm = QpDefaults::MAX_WIMM.min(l.max_wimm);
        mrc.wimm.max_wimm_dest = QpDefaults::MAX_WIMM.min(l.max_wimm_dest);
        mrc.timeout = QpDefaults::TIMEOUT;
        mrc.retry.linear_cnt = QpDefaults::RETRY_LINEAR;
        mrc.retry.exp_cnt = QpDefaults::RETRY_EXP;
        QpAttrs {
            state: QpState::Reset,
            access_flags: 0,
            pkey_index: 0,
            port_num: 1,
            path_mtu: mtu::IBV_MTU_4096,
            dest_qpn: 0,
            rq_psn: 0,
            sq_psn: 0,
            ah: ibv_ah_attr::default(),
            have_av: false,
            have_dest_qpn: false,
            mrc: CData(mrc),
        }
    }
}

/// Checks that an attribute taking effect at `at` may still be given when the QP is in `cur`
/// and this call moves it to `to`.
fn settable(name: &str, at: QpState, cur: QpState, to: QpState) -> Result<()> {
    if order(cur) < order(at) && order(to) <= order(at) {
        return Ok(());
    }
    if order(cur) < order(at) {
        return Err(CapiError::inval(format!(
            "{name} takes effect at the move to {at:?}; this call moves the QP from {cur:?} \
             past it to {to:?}"
        )));
    }
    Err(CapiError::inval(format!(
        "{name} took effect at the move to {at:?}; a QP in {cur:?} cannot change it"
    )))
}

/// Plans one `mrc_modify_qp`: checks every attribute against the QP's state and the device,
/// and returns the attributes after the call and the device transition to make. Nothing
/// changes until the caller has made the transition.
///
/// # Errors
/// `EINVAL` (or `EOPNOTSUPP` for a capability the device lacks) naming the attribute.
pub fn plan_modify(
    cur: &QpAttrs,
    v: Option<&ibv_qp_attr>,
    vmask: u32,
    mr: Option<&mrc_qp_attr>,
    mmask: u32,
    l: &QpLimits,
) -> Result<(QpAttrs, Transition)> {
    let unknown = vmask & !m::ALL;
    if unknown != 0 {
        return Err(CapiError::inval(format!(
            "attr_mask has bits {unknown:#x} that are no enum ibv_qp_attr_mask value"
        )));
    }
    for (bit, name) in REJECTED {
        if vmask & bit != 0 {
            return Err(CapiError::inval(format!(
                "{name} is not supported by MRC QPs"
            )));
        }
    }
    let unknown = mmask & !qp_mask::ALL;
    if unknown != 0 {
        return Err(CapiError::inval(format!(
            "mrc_attr_mask has bits {unknown:#x} that are no enum mrc_qp_attr_mask value"
        )));
    }
    let v = match (v, vmask) {
        (Some(v), _) => *v,
        (None, 0) => ibv_qp_attr::default(),
        (None, _) => return Err(CapiError::inval("attr is NULL but attr_mask is not 0")),
    };
    let mr = match (mr, mmask) {
        (Some(a), _) => *a,
        (None, 0) => mrc_qp_attr::default(),
        (None, _) => {
            return Err(CapiError::inval(
                "mrc_attr is NULL but mrc_attr_mask is not 0",
            ))
        }
    };
    let has = |bit: u32| vmask & bit != 0;
    let mhas = |bit: u32| mmask & bit != 0;
    let cur_state = cur.state;
    if has(m::IBV_QP_CUR_STATE) && device_state(v.cur_qp_state)? != cur_state {
        return Err(CapiError::inval(format!(
            "cur_qp_state {} but the QP is in {cur_state:?}",
            v.cur_qp_state
        )));
    }
    let to = if has(m::IBV_QP_STATE) {
        device_state(v.qp_state)?
    } else {
        cur_state
    };
    let legal = to == cur_state
        || matches!(
            (cur_state, to),
            (QpState::Reset, QpState::Init)
                | (QpState::Init, QpState::Rtr)
                | (QpState::Rtr, QpState::Rts)
                | (_, QpState::Reset)
                | (_, QpState::Error)
        );
    if !legal {
        return Err(CapiError::inval(format!(
            "no QP transition {cur_state:?} -> {to:?} (RESET -> INIT -> RTR -> RTS; any -> \
             RESET or ERROR)"
        )));
    }
    match to {
        QpState::Reset if cur_state != QpState::Reset => {
            let mut fresh = QpAttrs::new(l);
            fresh.state = QpState::Reset;
            return Ok((fresh, Transition::Reset));
        }
        QpState::Error if cur_state != QpState::Error => {
            let mut next = *cur;
            next.state = QpState::Error;
            return Ok((next, Transition::Error));
        }
        _ => {}
    }
    if cur_state == QpState::Error
        && (vmask & !(m::IBV_QP_STATE | m::IBV_QP_CUR_STATE)) | mmask != 0
    {
        return Err(CapiError::inval(
            "a QP in ERROR takes no attributes; move it to RESET first",
        ));
    }

    let mut n = *cur;
    let set = |name: &str, at: QpState| settable(name, at, cur_state, to);

    // Verbs attributes.
    if has(m::IBV_QP_PORT) && (v.port_num == 0 || v.port_num > l.num_ports) {
        return Err(CapiError::inval(format!(
            "port_num {} is not a port of this device (1..={})",
            v.port_num, l.num_ports
        )));
    }
    if has(m::IBV_QP_PORT) {
        n.port_num = v.port_num;
    }
    if vmask & IGNORED != 0 {
        log::debug!(
            "attr_mask bits {:#x} have no effect on an MRC QP",
            vmask & IGNORED
        );
    }
    if has(m::IBV_QP_ACCESS_FLAGS) {
        let bad = v.qp_access_flags & !QP_ACCESS;
        if bad != 0 {
            return Err(CapiError::inval(format!(
                "qp_access_flags {:#x}: bits {bad:#x} are not allowed on an MRC QP (only local \
                 and remote write, and remote read, which no MRC operation uses)",
                v.qp_access_flags
            )));
        }
        n.access_flags = v.qp_access_flags;
    }
    if has(m::IBV_QP_PKEY_INDEX) {
        if v.pkey_index != 0 {
            return Err(CapiError::inval(format!(
                "pkey_index {}: an MRC port has one P_Key, index 0",
                v.pkey_index
            )));
        }
        n.pkey_index = 0;
    }
    if has(m::IBV_QP_AV) {
        set("IBV_QP_AV", QpState::Rtr)?;
        let a = v.ah_attr;
        if a.is_global == 0 {
            return Err(CapiError::inval(
                "ah_attr.is_global is 0: RoCE v2 addresses the peer by GID (set is_global = 1 \
                 and grh.dgid)",
            ));
        }
        if a.grh.dgid.raw == [0; 16] {
            return Err(CapiError::inval("ah_attr.grh.dgid is all zero"));
        }
        if a.grh.sgid_index >= l.gid_tbl_len {
            return Err(CapiError::inval(format!(
                "ah_attr.grh.sgid_index {} is outside the GID table (0..{})",
                a.grh.sgid_index, l.gid_tbl_len
            )));
        }
        if a.port_num > l.num_ports {
            return Err(CapiError::inval(format!(
                "ah_attr.port_num {} is not a port of this device (1..={})",
                a.port_num, l.num_ports
            )));
        }
        n.ah = a;
        n.have_av = true;
    }
    if has(m::IBV_QP_PATH_MTU) {
        set("IBV_QP_PATH_MTU", QpState::Rtr)?;
        n.path_mtu = in_range("path_mtu", v.path_mtu, mtu::IBV_MTU_256, mtu::IBV_MTU_4096)?;
    }
    if has(m::IBV_QP_DEST_QPN) {
        set("IBV_QP_DEST_QPN", QpState::Rtr)?;
        n.dest_qpn = psn("dest_qp_num", v.dest_qp_num)?;
        n.have_dest_qpn = true;
    }
    if has(m::IBV_QP_RQ_PSN) {
        set("IBV_QP_RQ_PSN", QpState::Rtr)?;
        n.rq_psn = psn("rq_psn", v.rq_psn)?;
    }
    if has(m::IBV_QP_SQ_PSN) {
        set("IBV_QP_SQ_PSN", QpState::Rts)?;
        n.sq_psn = psn("sq_psn", v.sq_psn)?;
    }

    // MRC attributes.
    if mhas(qp_mask::MRC_QP_EV_PROFILE_ID) {
        set("MRC_QP_EV_PROFILE_ID", QpState::Init)?;
        n.mrc.profile.ev_profile_id = mr.profile.ev_profile_id;
    }
    if mhas(qp_mask::MRC_QP_CC_PROFILE_ID) {
        set("MRC_QP_CC_PROFILE_ID", QpState::Init)?;
        n.mrc.profile.cc_profile_id = mr.profile.cc_profile_id;
    }
    if mhas(qp_mask::MRC_QP_HINT) {
        set("MRC_QP_HINT", QpState::Init)?;
        n.mrc.qp_hint = mr.qp_hint;
    }
    if mhas(qp_mask::MRC_QP_MAX_WIMM_DEST) {
        set("MRC_QP_MAX_WIMM_DEST", QpState::Rtr)?;
        n.mrc.wimm.max_wimm_dest = in_range(
            "wimm.max_wimm_dest",
            mr.wimm.max_wimm_dest,
            1,
            l.max_wimm_dest,
        )?;
    }
    if mhas(qp_mask::MRC_QP_MPR_DEST) {
        set("MRC_QP_MPR_DEST", QpState::Rtr)?;
        n.mrc.mpr.mpr_dest = in_range("mpr.mpr_dest", mr.mpr.mpr_dest, 1, l.max_mpr)?;
    }
    if mhas(qp_mask::MRC_QP_CAP) {
        set("MRC_QP_CAP", QpState::Rtr)?;
        let bad = mr.cap & !qp_cap::ALL;
        if bad != 0 {
            return Err(CapiError::inval(format!(
                "cap has bits {bad:#x} that are no enum mrc_qp_cap value"
            )));
        }
        if mr.cap & qp_cap::MRC_QP_CAP_DYNAMIC_MPR != 0 && !l.dynamic_mpr {
            return Err(CapiError::new(
                EOPNOTSUPP,
                "MRC_QP_CAP_DYNAMIC_MPR: the device does not advertise MRC_DEVICE_CAP_DYNAMIC_MPR",
            ));
        }
        if mr.cap & qp_cap::MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED != 0 && l.trim_nack {
            return Err(CapiError::new(
                EOPNOTSUPP,
                "MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED: this device always answers trimmed \
                 packets with TRIM NACKs and cannot stop for one QP",
            ));
        }
        n.mrc.cap = mr.cap;
    }
    if mhas(qp_mask::MRC_QP_MAX_WIMM) {
        set("MRC_QP_MAX_WIMM", QpState::Rts)?;
        n.mrc.wimm.max_wimm = in_range("wimm.max_wimm", mr.wimm.max_wimm, 1, l.max_wimm)?;
    }
    if mhas(qp_mask::MRC_QP_MPR) {
        set("MRC_QP_MPR", QpState::Rts)?;
        n.mrc.mpr.mpr = in_range("mpr.mpr", mr.mpr.mpr, 1, l.max_mpr)?;
    }
    if mhas(qp_mask::MRC_QP_TIMEOUT) {
        set("MRC_QP_TIMEOUT", QpState::Rts)?;
        n.mrc.timeout = in_range("timeout", mr.timeout, 0, MAX_ACK_TIMEOUT_EXP)?;
    }
    if mhas(qp_mask::MRC_QP_RETRY_CNT) {
        set("MRC_QP_RETRY_CNT", QpState::Rts)?;
        device_retry(mr.retry.linear_cnt, mr.retry.exp_cnt)?;
        n.mrc.retry = mr.retry;
    }
    if mhas(qp_mask::MRC_QP_VENDOR_CFG) && mr.vendor_cfg != [0; MRC_MAX_VENDOR_CFG_SIZE] {
        return Err(CapiError::new(
            EINVAL,
            "vendor_cfg: this provider defines no vendor QP configuration (it must be all zero)",
        ));
    }

    n.state = to;
    let t = match (cur_state, to) {
        (QpState::Reset, QpState::Init) => Transition::Init(
            n.mrc.profile.ev_profile_id,
            n.mrc.profile.cc_profile_id,
            n.mrc.qp_hint as Token,
        ),
        (QpState::Init, QpState::Rtr) => {
            if !(n.have_av && n.have_dest_qpn) {
                return Err(CapiError::inval(
                    "moving to RTR needs the peer: IBV_QP_AV (is_global = 1, grh.dgid = the \
                     peer's GID) and IBV_QP_DEST_QPN",
                ));
            }
            Transition::Rtr(RtrAttr {
                dest_qpn: n.dest_qpn,
                remote_addr: n.ah.grh.dgid.raw,
                rq_psn: n.rq_psn,
                responder_mpr: n.mrc.mpr.mpr_dest.into(),
                max_wimm: n.mrc.wimm.max_wimm_dest,
                dynamic_mpr: n.mrc.cap & qp_cap::MRC_QP_CAP_DYNAMIC_MPR != 0,
            })
        }
        (QpState::Rtr, QpState::Rts) => Transition::Rts(RtsAttr {
            sq_psn: n.sq_psn,
            requester_mpr: n.mrc.mpr.mpr.into(),
            max_wimm: n.mrc.wimm.max_wimm,
            retry_count: device_retry(n.mrc.retry.linear_cnt, n.mrc.retry.exp_cnt)?,
            ack_timeout_exp: n.mrc.timeout,
        }),
        _ => Transition::None,
    };
    Ok((n, t))
}

#[cfg(test)]
mod tests;
