//! MRC contexts (`mrc_create_context`): the parent of an application's CQs, QPs, QP hints and
//! completion channels, and (for a privileged process) the controller's handle.
//!
//! Destroying a context destroys what is left of its children (QPs first), as the header's
//! "tracks the objects and cleans up" asks. A context is a controller context when the process
//! has `CAP_NET_ADMIN` (the header's requirement for the controller API); `mrc_ctl_*` calls on
//! another context are `EPERM`.

use std::sync::{Arc, Mutex};

use mrc_driver::api::{Context, Role};
use mrc_driver::ctl::Controller;

use crate::ctypes::mrc::*;
use crate::device::OpenDevice;
use crate::error::{CapiError, Result, ENOTSUP, EPERM};
use crate::handle::Token;
use crate::qp_attr::QpLimits;
use crate::state::{lock, TABLES};
use crate::verbs::VerbsContext;

/// The handles an MRC context made, destroyed with it.
#[derive(Debug, Default)]
pub struct Children {
    /// QPs.
    pub qps: Vec<Token>,
    /// CQs (completion and EV event).
    pub cqs: Vec<Token>,
    /// QP hints.
    pub hints: Vec<Token>,
    /// Completion channels.
    pub channels: Vec<Token>,
}

/// An MRC context.
pub struct MrcContext {
    /// The verbs context it was made from.
    pub vctx: Arc<VerbsContext>,
    /// The application context on the device.
    pub app: Context,
    /// The controller, for a process with `CAP_NET_ADMIN`.
    pub ctl: Option<Controller>,
    /// `mrc_api_version_used` (0: the current version).
    pub api_version: u32,
    /// `mrc_vendor_api_version_used` (0: the current version).
    pub vendor_version: u32,
    /// Its children.
    pub children: Mutex<Children>,
}

impl MrcContext {
    /// The device.
    pub fn dev(&self) -> &Arc<OpenDevice> {
        &self.vctx.dev
    }
    /// The controller API.
    ///
    /// # Errors
    /// `EPERM` without `CAP_NET_ADMIN`.
    pub fn controller(&self) -> Result<&Controller> {
        self.ctl.as_ref().ok_or_else(|| {
            CapiError::new(
                EPERM,
                "the controller API needs CAP_NET_ADMIN (this process does not have it)",
            )
        })
    }
    /// The API version the program was built for (0 = the current).
    pub fn effective_api_version(&self) -> u32 {
        match self.api_version {
            0 => MRC_API_CURRENT_VERSION,
            v => v,
        }
    }
}

/// `mrc_query_version` / `mrc_ctl_query_version`'s four values.
pub fn versions() -> [u32; 4] {
    [
        MRC_API_CURRENT_VERSION,
        MRC_API_LAST_SUPPORTED_VERSION,
        MRC_VENDOR_API_CURRENT_VERSION,
        MRC_VENDOR_API_LAST_SUPPORTED_VERSION,
    ]
}

/// `CAP_NET_ADMIN` is in the process's effective capabilities (`/proc/self/status`).
pub fn has_cap_net_admin() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

/// What the device allows a QP (see [`crate::qp_attr`]).
pub fn qp_limits(dev: &OpenDevice) -> QpLimits {
    let a = dev.dev().attrs();
    QpLimits {
        num_ports: a.num_ports.min(255) as u8,
        gid_tbl_len: crate::device::GID_TBL_LEN,
        max_mpr: a.table_limits.max_mpr.min(255) as u8,
        max_wimm: a.table_limits.max_wimm.min(u32::from(u16::MAX)) as u16,
        max_wimm_dest: a.table_limits.max_wimm_dest.min(u32::from(u16::MAX)) as u16,
        dynamic_mpr: a.capabilities & mrc_abi::device::regs::caps::DYNAMIC_MPR != 0,
        trim_nack: true,
    }
}

/// Most QP hints per context.
pub const MAX_QP_HINTS: u32 = 4096;

/// `mrc_query_device`: the device's MRC attributes (`supported` is always true for an MRC
/// device).
///
/// # Errors
/// A bad context, the device is gone.
pub fn query_device(vctx: usize) -> Result<mrc_device_attr> {
    let v = crate::verbs::vctx(vctx)?;
    v.dev.dev().check()?;
    let l = qp_limits(&v.dev);
    Ok(mrc_device_attr {
        mrc_protocol_version: MRC_PROTOCOL_VERSION_1,
        wimm_attr: mrc_wimm_attr {
            max_wimm: l.max_wimm,
            max_wimm_dest: l.max_wimm_dest,
        },
        mpr_attr: mrc_mpr_attr {
            max_mpr: l.max_mpr,
            mpr_resolution: 1,
        },
        qp_attr: mrc_dev_qp_attr {
            max_qp_hint: MAX_QP_HINTS,
        },
        cap: device_cap::MRC_DEVICE_CAP_TRIM_NACK
            | if l.dynamic_mpr {
                device_cap::MRC_DEVICE_CAP_DYNAMIC_MPR
            } else {
                0
            },
    })
}

/// `mrc_query_device_ex`: as [`query_device`], and `mcontext` (when given) must be a context of
/// the same device.
///
/// # Errors
/// As [`query_device`]; a bad or foreign `mcontext`.
pub fn query_device_ex(vctx: usize, mctx: Token) -> Result<mrc_device_attr> {
    if mctx != 0 {
        let c = crate::state::get(&TABLES.contexts, mctx, "mcontext")?;
        if c.vctx.c.addr() != vctx {
            return Err(CapiError::inval(
                "mcontext was made from another ibv_context",
            ));
        }
    }
    query_device(vctx)
}

fn check_version(field: &str, v: u32, current: u32, oldest: u32) -> Result<()> {
    if v != 0 && (v > current || v < oldest) {
        let show = |v: u32| format!("{}.{}.{}", v >> 24, (v >> 16) & 0xff, v & 0xffff);
        return Err(CapiError::new(
            ENOTSUP,
            format!(
                "{field} {} is outside what this library supports ({} to {})",
                show(v),
                show(oldest),
                show(current)
            ),
        ));
    }
    Ok(())
}

/// `mrc_create_context`.
///
/// # Errors
/// A bad verbs context, an API version this library does not support (`ENOTSUP`).
pub fn create_context(vctx: usize, attr: Option<mrc_context_attr>) -> Result<Token> {
    let attr = attr.unwrap_or_default();
    check_version(
        "mrc_api_version_used",
        attr.mrc_api_version_used,
        MRC_API_CURRENT_VERSION,
        MRC_API_LAST_SUPPORTED_VERSION,
    )?;
    check_version(
        "mrc_vendor_api_version_used",
        attr.mrc_vendor_api_version_used,
        MRC_VENDOR_API_CURRENT_VERSION,
        MRC_VENDOR_API_LAST_SUPPORTED_VERSION,
    )?;
    let v = {
        let t = lock(&TABLES.vctxs);
        let v = t.get(vctx, "vcontext")?;
        v.users.add();
        v
    };
    let dev = v.dev.dev().clone();
    let made = (|| -> Result<MrcContext> {
        dev.check()?;
        let ctl = if has_cap_net_admin() {
            Some(Controller::new(&Context::from_device(
                &dev,
                Role::Controller,
            ))?)
        } else {
            None
        };
        Ok(MrcContext {
            app: Context::from_device(&dev, Role::Application),
            vctx: v.clone(),
            ctl,
            api_version: attr.mrc_api_version_used,
            vendor_version: attr.mrc_vendor_api_version_used,
            children: Mutex::default(),
        })
    })();
    let c = match made {
        Ok(c) => Arc::new(c),
        Err(e) => {
            v.users.sub();
            return Err(e);
        }
    };
    let token = lock(&TABLES.contexts).insert(c)?;
    v.dev.events.add_context(token);
    Ok(token)
}

/// `mrc_destroy_context`: destroys its remaining QPs, CQs, hints and channels, then itself.
///
/// # Errors
/// A bad context.
pub fn destroy_context(token: Token) -> Result<()> {
    let c = crate::state::get(&TABLES.contexts, token, "mrc_ctx")?;
    let children = std::mem::take(&mut *lock(&c.children));
    for q in children.qps {
        let _ = crate::qp::destroy_qp(q);
    }
    for cq in children.cqs {
        let _ = crate::cq::destroy_cq_forced(cq);
    }
    for h in children.hints {
        let _ = crate::qp::destroy_hint(h);
    }
    for ch in children.channels {
        let _ = crate::cq::destroy_channel(ch);
    }
    crate::ctl::forget_context(&c, token);
    lock(&TABLES.contexts).remove(token, "mrc_ctx")?;
    c.dev().events.remove_context(token);
    c.vctx.users.sub();
    Ok(())
}

/// Waits for the next async event of context `token`: pumps the device's events, and between
/// tries checks the device (a device that is gone ends the wait with `EIO`).
///
/// # Errors
/// A bad context, the device is gone.
pub fn wait_async(token: Token) -> Result<crate::events::AsyncRecord> {
    let c = context(token, "mrc_ctx")?;
    let dev = c.dev().clone();
    let mut spins = 0u32;
    loop {
        crate::ctl::pump(&dev)?;
        if let Some(r) = dev.events.pop_async(token) {
            return Ok(r);
        }
        // A destroyed context ends the wait too.
        context(token, "mrc_ctx")?;
        dev.dev().check_alive()?;
        mrc_driver::device::backoff(&mut spins);
    }
}

/// The context named by `token`.
///
/// # Errors
/// `EINVAL` naming `what` for a bad handle.
pub fn context(token: Token, what: &str) -> Result<Arc<MrcContext>> {
    crate::state::get(&TABLES.contexts, token, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_outside_the_range_are_refused() {
        assert!(check_version("v", 0, MRC_API_CURRENT_VERSION, 0).is_ok());
        assert!(check_version("v", 1, MRC_API_CURRENT_VERSION, 0).is_ok());
        let e = check_version("v", mrc_api_ver(2, 0, 0), MRC_API_CURRENT_VERSION, 0).unwrap_err();
        assert_eq!(e.errno, ENOTSUP);
        assert!(e.message.contains("2.0.0"), "{}", e.message);
    }

    #[test]
    fn capability_parse_reads_proc() {
        // Whatever the answer, it must not panic and must agree with a second read.
        assert_eq!(has_cap_net_admin(), has_cap_net_admin());
    }
}
