//! EV operations of an EV profile (`ev_op` of `mrc_ctl_modify_ev_profile` and
//! `mrc_ctl_query_ev_profile`): replace, modify and query EV states, query the EV array. Each
//! applies to every entry in order and stops at the first that fails (earlier ones took
//! effect, as the header says).

use mrc_driver::ctl::Controller;

use super::ev::{find, unpopulated, EvProfile};
use super::ev_device::{encode, replace_on_device};
use super::{port_planes, CtlState};
use crate::ctypes::ctl::*;
use crate::device::OpenDevice;
use crate::error::{CapiError, Result, E2BIG, ENOENT};

/// Applies the entries of an EV operation to `p` (stopping at the first failure).
#[allow(clippy::too_many_arguments)]
pub(super) fn ev_op(
    ctl: &Controller,
    dev: &OpenDevice,
    st: &mut CtlState,
    p: &mut EvProfile,
    op: u32,
    entries: &mut [mrc_ctl_ev_op_entry],
    query: bool,
) -> Result<()> {
    let fmt_mode_bit = p
        .fmt_id
        .and_then(|f| st.fmts.get(&f))
        .and_then(|f| f.mode)
        .unwrap_or(fmt_mode::MRC_CTL_EV_FMT_MODE_UDP);
    let num_ports = dev.dev().attrs().num_ports;
    let np = dev.dev().attrs().num_planes.max(1);
    match (op, query) {
        (ev_op::MRC_CTL_EV_OP_REPLACE_EV, false) => {
            if p.mode != Some(ev_mode::MRC_CTL_EV_MODE_EXP) {
                return Err(CapiError::inval("REPLACE_EV applies to EXPLICIT profiles"));
            }
            let planes = port_planes(dev, st)?;
            for e in entries.iter() {
                let v = encode(fmt_mode_bit, &e.ev_new, num_ports)?;
                let want_plane = planes[usize::from(e.ev_new.port) - 1];
                let mut slots: Vec<usize> = if unpopulated(&e.ev) {
                    p.evs
                        .iter()
                        .enumerate()
                        .filter(|(i, x)| unpopulated(x) && *i as u32 % np == want_plane % np)
                        .map(|(i, _)| i)
                        .collect()
                } else {
                    find(p, &e.ev)
                };
                if slots.is_empty() {
                    return Err(CapiError::new(
                        ENOENT,
                        if unpopulated(&e.ev) {
                            format!(
                                "no unpopulated EV slot sprays on port {} (EV i uses plane i % {np})",
                                e.ev_new.port
                            )
                        } else {
                            "REPLACE_EV: the subject EV is not in the profile".to_string()
                        },
                    ));
                }
                if e.flags & MRC_CTL_EV_OP_F_ALL_COPIES == 0 {
                    slots.truncate(1);
                }
                for i in slots {
                    if i as u32 % np != want_plane % np {
                        return Err(CapiError::inval(format!(
                            "EV slot {i} sprays on plane {}; an EV of port {} cannot take its place",
                            i as u32 % np,
                            e.ev_new.port
                        )));
                    }
                    if let Some(d) = &p.device {
                        replace_on_device(ctl, d, i, v)?;
                    }
                    p.evs[i] = e.ev_new;
                }
            }
            Ok(())
        }
        (ev_op::MRC_CTL_EV_OP_MODIFY_EV_STATE, false) => {
            for e in entries.iter() {
                let deny = match e.state {
                    ev_state::MRC_CTL_EV_DENIED => true,
                    ev_state::MRC_CTL_EV_GOOD => false,
                    s => {
                        return Err(CapiError::inval(format!(
                            "state {s:#x}: a controller sets DENIED or GOOD (allow again)"
                        )))
                    }
                };
                let slots = find(p, &e.ev);
                if slots.is_empty() || unpopulated(&e.ev) {
                    return Err(CapiError::new(
                        ENOENT,
                        "MODIFY_EV_STATE: EV not in the profile",
                    ));
                }
                let slots = if e.flags & MRC_CTL_EV_OP_F_ALL_COPIES != 0 {
                    slots
                } else {
                    slots[..1].to_vec()
                };
                for i in slots {
                    match &p.device {
                        Some(d) if deny => ctl.deny_ev(d.id, i as u16)?,
                        Some(d) => ctl.allow_ev(d.id, i as u16)?,
                        None => p.denied[i] = deny,
                    }
                }
            }
            Ok(())
        }
        (ev_op::MRC_CTL_EV_OP_QUERY_EV_STATE, true) => {
            for e in entries.iter_mut() {
                let Some(&i) = find(p, &e.ev).first().filter(|_| !unpopulated(&e.ev)) else {
                    return Err(CapiError::new(
                        ENOENT,
                        "QUERY_EV_STATE: EV not in the profile",
                    ));
                };
                e.state = match &p.device {
                    Some(d) => crate::events::ctl_ev_state(ctl.query_ev(d.id, i as u16)?.state),
                    None if p.denied[i] => ev_state::MRC_CTL_EV_DENIED,
                    None => ev_state::MRC_CTL_EV_UNKNOWN,
                };
            }
            Ok(())
        }
        (ev_op::MRC_CTL_EV_OP_QUERY_EV_ARRAY, true) => {
            if entries.len() < p.evs.len() {
                return Err(CapiError::new(
                    E2BIG,
                    format!(
                        "entry_count {} is below the profile's {} EVs",
                        entries.len(),
                        p.evs.len()
                    ),
                ));
            }
            for (o, ev) in entries.iter_mut().zip(&p.evs) {
                o.ev = *ev;
            }
            Ok(())
        }
        (o, q) => Err(CapiError::inval(format!(
            "ev_op.op {o} is not an operation of mrc_ctl_{}_ev_profile",
            if q { "query" } else { "modify" }
        ))),
    }
}
