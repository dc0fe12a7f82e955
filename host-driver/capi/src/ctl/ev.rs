//! EV profiles (`mrc_ctl_modify_ev_profile` / `mrc_ctl_query_ev_profile`).
//!
//! The library keeps each profile's attributes and EV array; the device profile (and its own
//! device format) is made when the profile first goes ONLINE ([`super::ev_device::program`])
//! and follows it afterwards: state, min active, event mask, EV replacements and denials.

use mrc_driver::ctl::{EvProfileSpec, ProfileState as DevState};

use super::ev_device::{device_mask, program, unprogram};
use super::ev_op::ev_op;
use super::{controller, known_bits, next_state, no_vendor_cfg, ProfileState};
use crate::ctypes::ctl::*;
use crate::device::OpenDevice;
use crate::error::{CapiError, Result, E2BIG, ENOENT, EOPNOTSUPP};
use crate::handle::Token;
use crate::state::lock;

/// What the device holds for a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceEv {
    /// Device EV profile id.
    pub id: u32,
    /// Its device EV format profile id.
    pub format: u32,
    /// The spec it was made with (min active and mask updated since).
    pub spec: EvProfileSpec,
    /// Its device state.
    pub state: DevState,
}

/// An OCP EV profile.
#[derive(Clone, Debug, Default)]
pub struct EvProfile {
    /// Where it is.
    pub state: ProfileState,
    /// `enum mrc_ctl_ev_mode` (one bit).
    pub mode: Option<u32>,
    /// Its EV format profile.
    pub fmt_id: Option<u64>,
    /// EVs.
    pub count: Option<u32>,
    /// Min active EVs.
    pub min_active: Option<u32>,
    /// `MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD` bits.
    pub event_mask: Option<u32>,
    /// GENERATED: the generation fields.
    pub fields: Option<Vec<mrc_ctl_ev_field>>,
    /// The EV array (EXPLICIT: as replaced; AUTO / GENERATED: read back once made).
    pub evs: Vec<mrc_ctl_ev>,
    /// EVs denied before the profile reached the device.
    pub denied: Vec<bool>,
    /// The device's profile, once made.
    pub device: Option<DeviceEv>,
}

/// The unpopulated EV (`MRC_CTL_EV_UNPOPULATED`).
pub(super) fn unpopulated(ev: &mrc_ctl_ev) -> bool {
    *ev == mrc_ctl_ev::default()
}

/// Slots of `p` whose EV is `ev`.
pub(super) fn find(p: &EvProfile, ev: &mrc_ctl_ev) -> Vec<usize> {
    p.evs
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == ev)
        .map(|(i, _)| i)
        .collect()
}

/// The index of `ev` in OCP profile `profile` on `dev`, when the profile is ONLINE and its
/// format mode is `fmt_mode_bit`.
pub fn find_in(dev: &OpenDevice, profile: u64, fmt_mode_bit: u32, ev: &mrc_ctl_ev) -> Option<u16> {
    let st = lock(&dev.ctl);
    let p = st.evs.get(&profile)?;
    let mode = p
        .fmt_id
        .and_then(|f| st.fmts.get(&f))
        .and_then(|f| f.mode)
        .unwrap_or(fmt_mode::MRC_CTL_EV_FMT_MODE_UDP);
    if p.state != ProfileState::Online || mode != fmt_mode_bit || unpopulated(ev) {
        return None;
    }
    find(p, ev).first().map(|&i| i as u16)
}

/// The EV at `index` of OCP profile `profile` on `dev`.
///
/// # Errors
/// `ENOENT` for an unknown profile or index.
pub fn ev_value_of(dev: &OpenDevice, profile: u64, index: u16) -> Result<mrc_ctl_ev> {
    lock(&dev.ctl)
        .evs
        .get(&profile)
        .and_then(|p| p.evs.get(usize::from(index)).copied())
        .ok_or_else(|| CapiError::new(ENOENT, format!("no EV {index} in EV profile {profile}")))
}

/// The mask checks both calls share: known bits, and the EV and field operations not both.
fn check_mask(mask: u32) -> Result<()> {
    use ev_mask as m;
    known_bits(mask, m::ALL, "mrc_ctl_ev_profile_attr_mask")?;
    if mask & m::MRC_CTL_EV_PROFILE_EV_OP != 0 && mask & m::MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        return Err(CapiError::inval(
            "MRC_CTL_EV_PROFILE_EV_OP and MRC_CTL_EV_PROFILE_EV_FIELDS_OP exclude each other",
        ));
    }
    Ok(())
}

/// `mrc_ctl_modify_ev_profile`. `entries`: the EV operation's array; `fields`: the field
/// operation's.
///
/// # Errors
/// See the header (`EINVAL`, `E2BIG`, `ENOENT`, `EBUSY`, `EPERM`; `EOPNOTSUPP` for what the
/// device cannot do). EV operations stop at the first failing entry.
pub fn modify_ev(
    ctx: Token,
    id: u64,
    attr: &mrc_ctl_ev_profile_attr,
    mask: u32,
    entries: &mut [mrc_ctl_ev_op_entry],
    fields: &[mrc_ctl_ev_field],
) -> Result<()> {
    use ev_mask as m;
    let c = controller(ctx)?;
    let ctl = c.controller()?;
    let dev = c.dev();
    check_mask(mask)?;
    if id == 0 {
        return Err(CapiError::inval(
            "EV profile 0 is the device's default profile; configure another id",
        ));
    }
    if mask & m::MRC_CTL_EV_PROFILE_VENDOR_CFG != 0 {
        no_vendor_cfg(&attr.vendor_cfg)?;
    }
    let mut st = lock(&dev.ctl);
    let cur = st.evs.get(&id).cloned().unwrap_or_default();
    let to = next_state(
        &format!("EV profile {id}"),
        cur.state,
        mask,
        m::MRC_CTL_EV_PROFILE_STATE,
        m::MRC_CTL_EV_PROFILE_CUR_STATE,
        attr.profile_state,
        attr.cur_profile_state,
    )?;
    let mut p = cur.clone();
    let online = cur.state == ProfileState::Online;
    let layout =
        m::MRC_CTL_EV_PROFILE_MODE | m::MRC_CTL_EV_PROFILE_FMT_ID | m::MRC_CTL_EV_PROFILE_COUNT;
    if online && mask & (layout | m::MRC_CTL_EV_PROFILE_MIN_ACTIVE) != 0 {
        return Err(CapiError::inval(
            "an ONLINE EV profile's mode, format, count and min active cannot change (move it \
             OFFLINE first)",
        ));
    }
    if mask & m::MRC_CTL_EV_PROFILE_MODE != 0 {
        match attr.ev_mode {
            ev_mode::MRC_CTL_EV_MODE_AUTO
            | ev_mode::MRC_CTL_EV_MODE_EXP
            | ev_mode::MRC_CTL_EV_MODE_GEN => p.mode = Some(attr.ev_mode),
            v => {
                return Err(CapiError::inval(format!(
                    "ev_mode {v:#x} is not one enum mrc_ctl_ev_mode value"
                )))
            }
        }
    }
    if mask & m::MRC_CTL_EV_PROFILE_FMT_ID != 0 {
        let f = st.fmts.get(&attr.ev_fmt_profile_id).ok_or_else(|| {
            CapiError::inval(format!(
                "ev_fmt_profile_id {} is not a configured EV format profile",
                attr.ev_fmt_profile_id
            ))
        })?;
        if f.state == ProfileState::Init {
            return Err(CapiError::inval("the EV format profile is in INIT"));
        }
        p.fmt_id = Some(attr.ev_fmt_profile_id);
    }
    if mask & m::MRC_CTL_EV_PROFILE_COUNT != 0 {
        let a = dev.dev().attrs();
        let max = a.table_limits.max_evs_per_profile.min(a.max_evs_per_qp);
        if attr.ev_count == 0 || attr.ev_count > max {
            return Err(CapiError::new(
                if attr.ev_count > max {
                    E2BIG
                } else {
                    libc::EINVAL
                },
                format!("ev_count {} is outside 1..={max}", attr.ev_count),
            ));
        }
        p.count = Some(attr.ev_count);
        let n = attr.ev_count as usize;
        p.evs.resize(n, mrc_ctl_ev::default());
        p.denied.resize(n, false);
    }
    if mask & m::MRC_CTL_EV_PROFILE_MIN_ACTIVE != 0 {
        p.min_active = Some(attr.ev_min_active);
    }
    if mask & m::MRC_CTL_EV_PROFILE_EVENT_MASK != 0 {
        device_mask(attr.ev_event_mask)?;
        p.event_mask = Some(attr.ev_event_mask as u32);
    }
    if let (Some(min), Some(count)) = (p.min_active, p.count) {
        if min == 0 || min > count {
            return Err(CapiError::inval(format!(
                "ev_min_active {min} is outside 1..=ev_count ({count})"
            )));
        }
    }
    if mask & m::MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        match attr.ev_fields_op.op {
            ev_fields_op::MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS => {
                if online {
                    return Err(CapiError::new(
                        EOPNOTSUPP,
                        "the device cannot regenerate the EVs of an ONLINE profile",
                    ));
                }
                p.fields = Some(fields.to_vec());
            }
            ev_fields_op::MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS => {}
            o => {
                return Err(CapiError::inval(format!(
                    "ev_fields_op.op {o} is not an enum mrc_ctl_ev_fields_op value"
                )))
            }
        }
    }
    // The layout changed after the device profile was made: it is remade at the next ONLINE.
    let relayout = mask & layout != 0
        || mask & m::MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0
            && attr.ev_fields_op.op == ev_fields_op::MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
    if relayout && p.device.is_some() {
        unprogram(ctl, &mut p)?;
    }
    if cur.state == ProfileState::Init && to == ProfileState::Offline {
        if p.mode.is_none() || p.count.is_none() {
            return Err(CapiError::inval(
                "moving to OFFLINE needs MRC_CTL_EV_PROFILE_MODE and MRC_CTL_EV_PROFILE_COUNT \
                 (and the format for EXPLICIT and GENERATED)",
            ));
        }
        if p.mode != Some(ev_mode::MRC_CTL_EV_MODE_AUTO) && p.fmt_id.is_none() {
            return Err(CapiError::inval(
                "EXPLICIT and GENERATED profiles need MRC_CTL_EV_PROFILE_FMT_ID",
            ));
        }
        if p.mode == Some(ev_mode::MRC_CTL_EV_MODE_GEN) && p.fields.is_none() {
            return Err(CapiError::inval(
                "GENERATED profiles need their fields (MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS)",
            ));
        }
    }
    if mask & m::MRC_CTL_EV_PROFILE_EV_OP != 0 {
        if cur.state == ProfileState::Init && to == ProfileState::Init {
            return Err(CapiError::inval("an EV profile in INIT has no EVs yet"));
        }
        let r = ev_op(ctl, dev, &mut st, &mut p, attr.ev_op.op, entries, false);
        // Entries before a failing one took effect (the header's per-entry semantics).
        st.evs.insert(id, p.clone());
        r?;
    }
    match (cur.state, to) {
        (ProfileState::Offline, ProfileState::Online) => match p.device {
            None => program(ctl, dev, &mut st, id, &mut p)?,
            Some(mut d) => {
                d.spec.min_active_evs = p.min_active.unwrap_or(1) as u16;
                d.spec.event_mask = device_mask(p.event_mask.unwrap_or(0) as i32)?;
                ctl.set_ev_profile_state(d.id, &d.spec, DevState::Online)?;
                d.state = DevState::Online;
                p.device = Some(d);
            }
        },
        (ProfileState::Online, ProfileState::Offline) => {
            if let Some(mut d) = p.device {
                ctl.set_ev_profile_state(d.id, &d.spec, DevState::Offline)?;
                d.state = DevState::Offline;
                p.device = Some(d);
            }
        }
        (ProfileState::Offline, ProfileState::Init) => {
            unprogram(ctl, &mut p)?;
            st.evs.remove(&id);
            return Ok(());
        }
        _ => {
            // Min active or mask on a profile the device holds.
            if let Some(mut d) = p.device {
                let mask2 = device_mask(p.event_mask.unwrap_or(0) as i32)?;
                let min2 = p.min_active.unwrap_or(1) as u16;
                if mask2 != d.spec.event_mask || min2 != d.spec.min_active_evs {
                    d.spec.event_mask = mask2;
                    d.spec.min_active_evs = min2;
                    ctl.set_ev_profile_state(d.id, &d.spec, d.state)?;
                    p.device = Some(d);
                }
            }
        }
    }
    p.state = to;
    st.evs.insert(id, p);
    Ok(())
}

/// `mrc_ctl_query_ev_profile`.
///
/// # Errors
/// See the header.
pub fn query_ev(
    ctx: Token,
    id: u64,
    attr: &mut mrc_ctl_ev_profile_attr,
    mask: u32,
    entries: &mut [mrc_ctl_ev_op_entry],
    fields_out: &mut [mrc_ctl_ev_field],
) -> Result<()> {
    use ev_mask as m;
    let c = controller(ctx)?;
    let ctl = c.controller()?;
    let dev = c.dev();
    check_mask(mask)?;
    let mut st = lock(&dev.ctl);
    let mut p = st.evs.get(&id).cloned().unwrap_or_default();
    if mask & (m::MRC_CTL_EV_PROFILE_STATE | m::MRC_CTL_EV_PROFILE_CUR_STATE) != 0 {
        attr.profile_state = p.state.to_c();
        attr.cur_profile_state = p.state.to_c();
    }
    if mask & m::MRC_CTL_EV_PROFILE_MODE != 0 {
        attr.ev_mode = p.mode.unwrap_or(0);
    }
    if mask & m::MRC_CTL_EV_PROFILE_FMT_ID != 0 {
        attr.ev_fmt_profile_id = p.fmt_id.unwrap_or(0);
    }
    if mask & m::MRC_CTL_EV_PROFILE_COUNT != 0 {
        attr.ev_count = p.count.unwrap_or(0);
    }
    if mask & m::MRC_CTL_EV_PROFILE_MIN_ACTIVE != 0 {
        attr.ev_min_active = p.min_active.unwrap_or(0);
    }
    if mask & m::MRC_CTL_EV_PROFILE_EVENT_MASK != 0 {
        attr.ev_event_mask = p.event_mask.unwrap_or(0) as i32;
    }
    if mask & m::MRC_CTL_EV_PROFILE_VENDOR_CFG != 0 {
        attr.vendor_cfg = [0; MRC_CTL_MAX_VENDOR_CFG_SIZE];
    }
    if mask & m::MRC_CTL_EV_PROFILE_EV_OP != 0 {
        if attr.ev_op.op == ev_op::MRC_CTL_EV_OP_QUERY_EV_ARRAY {
            attr.ev_op.entry_count = p.evs.len() as i32;
        }
        ev_op(ctl, dev, &mut st, &mut p, attr.ev_op.op, entries, true)?;
    }
    if mask & m::MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        if attr.ev_fields_op.op != ev_fields_op::MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS {
            return Err(CapiError::inval(
                "a query takes only MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS",
            ));
        }
        let f = p.fields.clone().unwrap_or_default();
        attr.ev_fields_op.field_count = f.len() as i32;
        if fields_out.len() < f.len() {
            return Err(CapiError::new(
                E2BIG,
                format!(
                    "field_count {} is below the profile's {} fields",
                    fields_out.len(),
                    f.len()
                ),
            ));
        }
        fields_out[..f.len()].copy_from_slice(&f);
    }
    Ok(())
}
