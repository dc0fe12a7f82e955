//! The controller API (`mrc_ctl.h`) over the driver's [`mrc_driver::ctl::Controller`].
//!
//! # Profiles
//! OCP profiles are named by ids the controller picks and move INIT -> OFFLINE -> ONLINE; the
//! device's are created with device-picked ids and hold their configuration once made. So the
//! library keeps each OCP profile (its state and attributes: the answer to every query) and
//! programs the device when the profile first goes ONLINE, when everything it needs is known
//! (an EXPLICIT profile's EVs, hence its value range or SRv6 locator block). Each EV profile
//! gets its own device EV format profile, made from the OCP format profile it names. A QP's
//! `MRC_QP_EV_PROFILE_ID` / `MRC_QP_CC_PROFILE_ID` name OCP profiles of its device (ONLINE);
//! id 0 is the device's default profile. One process owns a device (its controller and its
//! applications share it), so the table of a device is the process's.
//!
//! # What the device can represent
//! - EV formats: UDP and STEV (at most 16 bits: the device's UDP and STEV EVs are 16-bit
//!   values), SRv6 (a 32-bit locator and 16-bit uSIDs, at most 128 bits; no SRH
//!   segment: `E2BIG`).
//! - EV modes: EXPLICIT (any format); AUTO (UDP and STEV: source ports 0xC000..=0xFFFF, or
//!   the format's width); GENERATED (UDP and STEV, one field whose mask is its low bits: the
//!   device draws values in `(init & ~mask) | [min, max]` from a seed).
//! - An EV's port is the port of its plane: EV `i` sprays on plane `i % planes`. Replacing an
//!   unpopulated EV fills the first unpopulated slot on the new EV's port.
//! - EV events for ASSUMED_BAD and GOOD; the drop count is exact.
//! - NSCC only (`"uet-1.0-nscc"`), with the device's parameters: eta, fi, fi_scale, gamma,
//!   max_md_jump, base_rtt and target_delay; QA and the adjustment thresholds must be off
//!   (`disable_qa` set or the QA fields 0; thresholds and `max_cwnd` 0).

mod cc;
mod ev;
mod ev_device;
mod ev_op;
mod fmt;
mod probe;

pub use cc::{modify_cc, query_cc};
pub use ev::{ev_value_of, modify_ev, query_ev};
pub use fmt::{modify_fmt, query_fmt};
pub use probe::batch_send_wait;

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::context::{context, MrcContext};
use crate::ctypes::ctl::*;
use crate::device::OpenDevice;
use crate::error::{CapiError, Result};
use crate::handle::Token;
use crate::state::lock;

/// The library side of an OCP profile's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProfileState {
    /// Created; nothing configured.
    #[default]
    Init,
    /// Configured, not usable.
    Offline,
    /// Usable.
    Online,
}

impl ProfileState {
    /// The state of `enum mrc_ctl_profile_state` value `v`.
    ///
    /// # Errors
    /// `EINVAL` for another value.
    pub fn from_c(v: u32, field: &str) -> Result<ProfileState> {
        match v {
            profile_state::MRC_CTL_PROFILE_INIT => Ok(ProfileState::Init),
            profile_state::MRC_CTL_PROFILE_OFFLINE => Ok(ProfileState::Offline),
            profile_state::MRC_CTL_PROFILE_ONLINE => Ok(ProfileState::Online),
            _ => Err(CapiError::inval(format!(
                "{field} {v} is not an enum mrc_ctl_profile_state value"
            ))),
        }
    }
    /// The C value.
    pub fn to_c(self) -> u32 {
        match self {
            ProfileState::Init => profile_state::MRC_CTL_PROFILE_INIT,
            ProfileState::Offline => profile_state::MRC_CTL_PROFILE_OFFLINE,
            ProfileState::Online => profile_state::MRC_CTL_PROFILE_ONLINE,
        }
    }
    /// A move the OCP state machine has (INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT, or
    /// staying).
    pub fn can_move(self, to: ProfileState) -> bool {
        use ProfileState as S;
        self == to
            || matches!(
                (self, to),
                (S::Init, S::Offline) | (S::Offline, S::Online | S::Init) | (S::Online, S::Offline)
            )
    }
}

/// The state a profile modify moves `what` (e.g. "EV profile 20") to: checks the asserted
/// current state (`cur_bit` in `mask`) and the move (`state_bit`).
///
/// # Errors
/// `EINVAL` for a state value no enum has, a wrong asserted state, or a move the state machine
/// lacks.
#[allow(clippy::too_many_arguments)]
pub fn next_state(
    what: &str,
    cur: ProfileState,
    mask: u32,
    state_bit: u32,
    cur_bit: u32,
    profile_state: u32,
    cur_profile_state: u32,
) -> Result<ProfileState> {
    if mask & cur_bit != 0 && ProfileState::from_c(cur_profile_state, "cur_profile_state")? != cur {
        return Err(CapiError::inval(format!(
            "cur_profile_state {cur_profile_state} but {what} is {cur:?}"
        )));
    }
    let to = if mask & state_bit != 0 {
        ProfileState::from_c(profile_state, "profile_state")?
    } else {
        cur
    };
    if !cur.can_move(to) {
        return Err(CapiError::inval(format!(
            "{what}: no move {cur:?} -> {to:?} (INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT)"
        )));
    }
    Ok(to)
}

/// `EINVAL` for `mask` bits outside `all` (the mask of `enum_name`).
pub fn known_bits(mask: u32, all: u32, enum_name: &str) -> Result<()> {
    if mask & !all != 0 {
        return Err(CapiError::inval(format!(
            "attr_mask {mask:#x} has bits {:#x} no enum {enum_name} value defines",
            mask & !all
        )));
    }
    Ok(())
}

/// The controller's profiles on one device.
#[derive(Default)]
pub struct CtlState {
    fmts: BTreeMap<u64, fmt::FmtProfile>,
    evs: BTreeMap<u64, ev::EvProfile>,
    ccs: BTreeMap<u64, cc::CcProfile>,
    /// Plane of each port (index = port - 1), learnt once.
    port_planes: Option<Vec<u32>>,
}

/// Most OCP EV format profiles (they are library templates; each EV profile that goes ONLINE
/// takes one of the device's format profiles).
pub const MAX_FMT_PROFILES: u32 = 1024;

/// `EINVAL` for a vendor configuration other than all zero (none is defined).
fn no_vendor_cfg(cfg: &[u8; MRC_CTL_MAX_VENDOR_CFG_SIZE]) -> Result<()> {
    if cfg.iter().any(|&b| b != 0) {
        return Err(CapiError::inval(
            "vendor_cfg: this provider defines no vendor configuration (it must be all zero)",
        ));
    }
    Ok(())
}

/// The controller context named by `ctx`, and its device's profiles.
fn controller(ctx: Token) -> Result<std::sync::Arc<MrcContext>> {
    let c = context(ctx, "mrc_ctx")?;
    c.controller()?;
    c.dev().dev().check()?;
    Ok(c)
}

/// The port (1-based) that plane `plane` leaves by: the lowest-numbered port on it.
fn port_of_plane(planes: &[u32], plane: u32) -> u8 {
    planes
        .iter()
        .position(|&p| p == plane)
        .map_or(0, |i| (i + 1) as u8)
}

/// The planes of the device's ports, asked once.
fn port_planes(dev: &OpenDevice, st: &mut CtlState) -> Result<Vec<u32>> {
    if let Some(p) = &st.port_planes {
        return Ok(p.clone());
    }
    let d = dev.dev();
    let n = d.attrs().num_ports.min(255);
    let mut v = Vec::with_capacity(n as usize);
    for p in 0..n {
        v.push(d.query_port(p as u8)?.plane);
    }
    st.port_planes = Some(v.clone());
    Ok(v)
}

/// Device EV profile and CC profile ids for a QP's OCP profile ids (0: the device default).
///
/// # Errors
/// `EINVAL` for a profile the controller has not put ONLINE.
pub fn device_profiles(dev: &OpenDevice, ev_profile: u64, cc_profile: u64) -> Result<(u32, u32)> {
    let st = lock(&dev.ctl);
    let ev = match ev_profile {
        0 => 0,
        id => st
            .evs
            .get(&id)
            .and_then(|p| {
                (p.state == ProfileState::Online)
                    .then_some(p.device.as_ref())
                    .flatten()
            })
            .map(|d| d.id)
            .ok_or_else(|| {
                CapiError::inval(format!(
                    "EV profile {id} is not ONLINE on this device (a controller puts it ONLINE \
                     with mrc_ctl_modify_ev_profile)"
                ))
            })?,
    };
    let cc = match cc_profile {
        0 => 0,
        id => st
            .ccs
            .get(&id)
            .filter(|p| p.state == ProfileState::Online)
            .and_then(|p| p.device_id)
            .ok_or_else(|| {
                CapiError::inval(format!(
                    "CC profile {id} is not ONLINE on this device (a controller puts it ONLINE \
                     with mrc_ctl_modify_cc_profile)"
                ))
            })?,
    };
    Ok((ev, cc))
}

/// The EV at `index` of OCP EV profile `profile` (for EV events; `None` for a profile the
/// controller did not configure).
pub fn ev_at(dev: &OpenDevice, profile: u64, index: u16) -> Option<mrc_ctl_ev> {
    ev_value_of(dev, profile, index).ok()
}

/// A context is being destroyed (its profiles stay: they belong to the device).
pub fn forget_context(c: &MrcContext, token: Token) {
    for cq in c.dev().events.ev_cqs_of(token) {
        c.dev().events.remove_ev_cq(cq);
    }
}

/// `mrc_ctl_query_version`.
pub fn versions() -> [u32; 4] {
    [
        MRC_CTL_API_CURRENT_VERSION,
        MRC_CTL_API_LAST_SUPPORTED_VERSION,
        MRC_CTL_VENDOR_API_CURRENT_VERSION,
        MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION,
    ]
}

/// The NSCC name the API defines (the one algorithm of this device).
pub const NSCC: &std::ffi::CStr = c"uet-1.0-nscc";

/// `mrc_ctl_query_device` (`mcontext` 0: no context was given).
///
/// # Errors
/// A bad context, the device is gone.
pub fn query_device(vctx: usize, mctx: Token) -> Result<mrc_ctl_device_attr> {
    let v = crate::verbs::vctx(vctx)?;
    if mctx != 0 {
        let c = context(mctx, "mcontext")?;
        if c.vctx.c.addr() != vctx {
            return Err(CapiError::inval(
                "mcontext was made from another ibv_context",
            ));
        }
    }
    let d = v.dev.dev();
    d.check()?;
    let a = d.attrs();
    let l = a.table_limits;
    let caps = a.capabilities;
    use mrc_abi::device::regs::caps as c;
    let fmt_modes = if caps & c::EV_UDP != 0 {
        fmt_mode::MRC_CTL_EV_FMT_MODE_UDP
    } else {
        0
    } | if caps & c::EV_STEV != 0 {
        fmt_mode::MRC_CTL_EV_FMT_MODE_STEV
    } else {
        0
    } | if caps & c::EV_SRV6 != 0 {
        fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6
    } else {
        0
    };
    let per_profile = l.max_evs_per_profile.min(a.max_evs_per_qp);
    let profiles = l.max_ev_profiles.min(l.max_ev_format_profiles);
    let used = lock(&v.dev.ctl)
        .evs
        .values()
        .filter(|p| p.device.is_some())
        .count() as u32;
    let ports = a.num_ports.min(31);
    Ok(mrc_ctl_device_attr {
        mrc_ctl_protocol_version: MRC_CTL_PROTOCOL_VERSION_1,
        ev: mrc_ctl_device_attr_ev {
            ev_max_fmt_profiles: MAX_FMT_PROFILES,
            ev_max_profiles: profiles,
            ev_max_count: profiles.saturating_mul(per_profile),
            ev_free_count: profiles.saturating_sub(used).saturating_mul(per_profile),
            ev_max_count_profile: per_profile,
            ev_count_align: 1,
            ev_max_width: if fmt_modes & fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6 != 0 {
                128
            } else {
                16
            },
            ev_fmt_mode_mask: fmt_modes,
            ev_mode_mask: ev_mode::MRC_CTL_EV_MODE_AUTO
                | ev_mode::MRC_CTL_EV_MODE_EXP
                | ev_mode::MRC_CTL_EV_MODE_GEN,
            ev_op_max_entries: 0,
        },
        cc: mrc_ctl_device_attr_cc {
            cc_max_profiles: l.max_cc_profiles,
            algorithms: crate::ffi::ctl::algorithms(),
        },
        phy_port_mask: ((1u64 << (ports + 1)) - 2) as u32,
        opt_attr: attr_opt::MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE
            | attr_opt::MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE
            | attr_opt::MRC_CTL_OPT_CAP_EV_EVENT
            | attr_opt::MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT
            | attr_opt::MRC_CTL_OPT_CAP_EP_OP_EV_PROBE,
    })
}

fn port_mask(mask: u32) -> Result<()> {
    if mask & !MRC_CTL_PORT_ADMIN_STATE != 0 {
        return Err(CapiError::inval(format!(
            "attr_mask {mask:#x} has bits that are no enum mrc_ctl_port_attr_mask value"
        )));
    }
    Ok(())
}

/// `mrc_ctl_query_port`.
///
/// # Errors
/// A bad context, port or mask; `EPERM` without the controller.
pub fn query_port(ctx: Token, port: u8, mask: u32) -> Result<Option<mrc_ctl_port_attr>> {
    port_mask(mask)?;
    let c = controller(ctx)?;
    let p = crate::device::port_info(c.dev().dev(), port.into())?;
    Ok((mask != 0).then_some(mrc_ctl_port_attr {
        port_admin_state: if p.admin_up {
            port_admin::MRC_CTL_PORT_ADMIN_ENABLED
        } else {
            port_admin::MRC_CTL_PORT_ADMIN_DISABLED
        },
    }))
}

/// `mrc_ctl_modify_port`.
///
/// # Errors
/// A bad context, port, mask or state; `EPERM` without the controller; device errors.
pub fn modify_port(ctx: Token, port: u8, attr: mrc_ctl_port_attr, mask: u32) -> Result<()> {
    port_mask(mask)?;
    let c = controller(ctx)?;
    let p = crate::device::check_port(c.dev().dev(), port.into())?;
    if mask & MRC_CTL_PORT_ADMIN_STATE == 0 {
        return Ok(());
    }
    let up = match attr.port_admin_state {
        port_admin::MRC_CTL_PORT_ADMIN_ENABLED => true,
        port_admin::MRC_CTL_PORT_ADMIN_DISABLED => false,
        v => {
            return Err(CapiError::inval(format!(
                "port_admin_state {v} is not an enum mrc_ctl_port_admin_state value"
            )))
        }
    };
    c.controller()?.set_port_admin_state(p - 1, up)?;
    Ok(())
}

/// Pumps the device's events into the router (for EV event CQs and probes).
///
/// # Errors
/// The device is gone.
pub fn pump(dev: &OpenDevice) -> Result<()> {
    dev.events.pump(dev.dev(), |p, i| ev_at(dev, p, i))
}

/// `mrc_ctl_poll_ev_event`: up to `max` events of EV event CQ `cq`.
///
/// # Errors
/// A bad or non-EV CQ, the device is gone.
pub fn poll_ev_event(cq: Token, max: usize) -> Result<Vec<mrc_ctl_ev_event>> {
    let q = crate::cq::cq(cq)?;
    if !matches!(q.kind, crate::cq::CqKind::EvEvent) {
        return Err(CapiError::inval(
            "ev_cq is a completion CQ: EV events come on CQs from mrc_ctl_create_ev_event_cq",
        ));
    }
    pump(&q.dev)?;
    Ok(q.dev.events.pop_ev(cq, max))
}

/// Whether EV events of context `ctx` use the control API 1.0.0 layout (no `state`).
pub fn ev_event_v100(ctx: Token) -> bool {
    context(ctx, "mrc_ctx").is_ok_and(|c| {
        let v = c.effective_api_version();
        v < crate::ctypes::mrc::mrc_api_ver(1, 0, 1)
    })
}

/// Keeps the state type reachable for [`OpenDevice`].
pub type DeviceCtl = Mutex<CtlState>;
