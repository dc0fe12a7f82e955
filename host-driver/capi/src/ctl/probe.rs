//! Endpoint operations (`mrc_ctl_ep_batch_send_wait`): EV probes.
//!
//! The device probes an EV of a connection: a request is sent on a QP of this device in RTS
//! whose peer is the request's destination GID and whose EV profile holds the request's EV
//! (value and port); the RTT comes back as a device event. A request no such QP serves is
//! `ENOENT` before anything is sent. Port status updates are not an operation of this device
//! (`ENOTSUP`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mrc_driver::api::QpState;

use super::{controller, ev::find_in};
use crate::ctypes::ctl::*;
use crate::error::{CapiError, Result, ENOENT, ENOTSUP, EOPNOTSUPP};
use crate::handle::Token;
use crate::state::{lock, TABLES};

/// Probe ids handed to the device (unique per process).
static NEXT_PROBE: AtomicU32 = AtomicU32::new(1);

/// The responses of a batch, and whether every request got one.
pub struct Batch {
    /// Responses in arrival order.
    pub rsps: Vec<mrc_ctl_ep_rsp>,
    /// Every request was answered before the timeout.
    pub complete: bool,
}

/// `mrc_ctl_ep_batch_send_wait`.
///
/// # Errors
/// A bad context or request (`EINVAL`), no QP to probe over (`ENOENT`), port status updates
/// (`ENOTSUP`), a traffic class other than the QP's (`EOPNOTSUPP`), `EPERM`, device errors.
/// A timeout is not an error here: `Batch::complete` is false.
pub fn batch_send_wait(
    ctx: Token,
    req_tc: u8,
    op_type: u32,
    reqs: &[mrc_ctl_ep_req],
    rsp_timeout_ns: u32,
) -> Result<Batch> {
    let c = controller(ctx)?;
    let ctl = c.controller()?;
    match op_type {
        ep_op::MRC_CTL_EP_OP_EV_PROBE => {}
        ep_op::MRC_CTL_EP_OP_PORT_STATUS_UPDATE => {
            return Err(CapiError::new(
                ENOTSUP,
                "MRC_CTL_EP_OP_PORT_STATUS_UPDATE is not an operation of this device",
            ))
        }
        o => {
            return Err(CapiError::inval(format!(
                "op_type {o} is not an enum mrc_ctl_ep_op_type value"
            )))
        }
    }
    if req_tc != 0 {
        return Err(CapiError::new(
            EOPNOTSUPP,
            format!(
                "req_tc {req_tc}: probes travel in the traffic class of the QP they use (pass 0)"
            ),
        ));
    }
    let dev = c.dev();
    let gid = dev.dev().attrs().gid;
    // Resolve every request before sending any.
    let mut plan = Vec::with_capacity(reqs.len());
    for (k, r) in reqs.iter().enumerate() {
        if r.sgid.raw != gid {
            return Err(CapiError::inval(format!(
                "request {k}: sgid is not this device's GID"
            )));
        }
        let mut found = None;
        for (_, q) in lock(&TABLES.qps).iter() {
            if !std::sync::Arc::ptr_eq(&q.pd.vctx.dev, dev) {
                continue;
            }
            let inner = lock(&q.inner);
            let a = &inner.attrs;
            if a.state != QpState::Rts || a.ah.grh.dgid.raw != r.dgid.raw {
                continue;
            }
            if let Some(i) = find_in(dev, a.mrc.profile.ev_profile_id, r.ev_fmt_mode, &r.req_ev) {
                found = Some((q.qpn, i));
                break;
            }
        }
        let (qpn, index) = found.ok_or_else(|| {
            CapiError::new(
                ENOENT,
                format!(
                    "request {k} (req_id {}): no QP of this device in RTS to that dgid has the EV \
                     in its profile",
                    r.req_id
                ),
            )
        })?;
        plan.push((r, qpn, index));
    }
    let timeout = Duration::from_nanos(rsp_timeout_ns.into());
    let timeout_us = (rsp_timeout_ns / 1000).max(1);
    let mut waiting = Vec::with_capacity(plan.len());
    let sent = (|| -> Result<()> {
        for (r, qpn, index) in &plan {
            let id = NEXT_PROBE.fetch_add(1, Ordering::Relaxed);
            dev.events.expect_probe(id);
            waiting.push((id, *r));
            ctl.probe_ev(*qpn, *index, id, timeout_us)?;
        }
        Ok(())
    })();
    let forget = |w: &[(u32, &mrc_ctl_ep_req)]| {
        for (id, _) in w {
            dev.events.forget_probe(*id);
        }
    };
    if let Err(e) = sent {
        forget(&waiting);
        return Err(e);
    }
    let start = Instant::now();
    let mut rsps = Vec::with_capacity(waiting.len());
    let mut spins = 0u32;
    while !waiting.is_empty() {
        if let Err(e) = super::pump(dev) {
            forget(&waiting);
            return Err(e);
        }
        waiting.retain(|(id, r)| match dev.events.take_probe(*id) {
            Some(o) => {
                if o.replied {
                    rsps.push(mrc_ctl_ep_rsp {
                        req_id: r.req_id,
                        port: r.req_ev.port,
                        rtt: o.rtt_ns,
                        adj_svc_time: 0,
                    });
                }
                false
            }
            None => true,
        });
        if start.elapsed() >= timeout {
            break;
        }
        mrc_driver::device::backoff(&mut spins);
    }
    let complete = waiting.is_empty() && rsps.len() == reqs.len();
    forget(&waiting);
    Ok(Batch { rsps, complete })
}
