//! EV profiles (`mrc_ctl_modify_ev_profile` / `mrc_ctl_query_ev_profile`).
//!
//! The library keeps each profile's attributes and EV array; the device profile (and its own
//! device format) is made when the profile first goes ONLINE ([`program`]) and follows it
//! afterwards: state, min active, event mask, EV replacements and denials.

use mrc_abi::device::admin::{EVENT_MASK_EV_BAD, EVENT_MASK_EV_GOOD};
use mrc_driver::ctl::{
    Controller, EvFormatSpec, EvProfileSpec, ProfileKind, ProfileState as DevState,
};

use super::fmt::FmtProfile;
use super::{controller, no_vendor_cfg, port_of_plane, port_planes, CtlState, ProfileState};
use crate::ctypes::ctl::*;
use crate::device::OpenDevice;
use crate::error::{CapiError, Result, E2BIG, EBUSY, ENOENT, EOPNOTSUPP};
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

/// An EV as the device takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevValue {
    /// UDP / STEV value.
    Value(u32),
    /// SRv6 carrier address.
    Carrier([u8; 16]),
}

fn unpopulated(ev: &mrc_ctl_ev) -> bool {
    *ev == mrc_ctl_ev::default()
}

/// The device form of an EV of `mode`.
///
/// # Errors
/// `EINVAL` for a value the mode cannot carry on this device, or port 0.
pub fn encode(mode: u32, ev: &mrc_ctl_ev, num_ports: u32) -> Result<DevValue> {
    if ev.port == 0 || u32::from(ev.port) > num_ports {
        return Err(CapiError::inval(format!(
            "EV port {} is not a port of this device (1..={num_ports})",
            ev.port
        )));
    }
    if mode == fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6 {
        if ev.val[16..].iter().any(|&b| b != 0) {
            return Err(CapiError::new(
                EOPNOTSUPP,
                "EV value: an SRH segment (bytes 16..32) is not supported on this device",
            ));
        }
        let mut c = [0u8; 16];
        c.copy_from_slice(&ev.val[..16]);
        return Ok(DevValue::Carrier(c));
    }
    let v = u32::from_ne_bytes([ev.val[0], ev.val[1], ev.val[2], ev.val[3]]);
    if v > 0xffff || ev.val[4..].iter().any(|&b| b != 0) {
        return Err(CapiError::inval(format!(
            "EV value {v:#x}: this device's UDP and STEV EVs are 16-bit values"
        )));
    }
    Ok(DevValue::Value(v))
}

fn value_ev(v: u32, port: u8) -> mrc_ctl_ev {
    let mut ev = mrc_ctl_ev {
        port,
        ..Default::default()
    };
    ev.val[..4].copy_from_slice(&v.to_ne_bytes());
    ev
}

fn device_mask(mask: i32) -> Result<u32> {
    let m = mask as u32;
    let ok = ev_state::MRC_CTL_EV_GOOD | ev_state::MRC_CTL_EV_ASSUMED_BAD;
    if m & !ok != 0 {
        return Err(CapiError::inval(format!(
            "ev_event_mask {m:#x}: only MRC_CTL_EV_GOOD and MRC_CTL_EV_ASSUMED_BAD are \
             supported"
        )));
    }
    Ok((if m & ev_state::MRC_CTL_EV_GOOD != 0 {
        EVENT_MASK_EV_GOOD
    } else {
        0
    }) | if m & ev_state::MRC_CTL_EV_ASSUMED_BAD != 0 {
        EVENT_MASK_EV_BAD
    } else {
        0
    })
}

/// GENERATED: the device value range of one generation field.
///
/// # Errors
/// `EOPNOTSUPP` for what the device cannot generate, `EINVAL` for inconsistent fields.
pub fn gen_range(fields: &[mrc_ctl_ev_field], width: u32) -> Result<(u16, u16)> {
    let [f] = fields else {
        return Err(CapiError::new(
            EOPNOTSUPP,
            "GENERATED: this device generates one field (a value range); give exactly one",
        ));
    };
    if f.width == 0 || f.width > width {
        return Err(CapiError::inval(format!(
            "field width {} is outside 1..={width}",
            f.width
        )));
    }
    let limit = if f.width == 32 {
        u32::MAX
    } else {
        (1 << f.width) - 1
    };
    if f.init_val > limit || f.mask > limit {
        return Err(CapiError::inval(
            "field init_val and mask must fit the field width",
        ));
    }
    if f.mask == 0 || f.mask & (f.mask + 1) != 0 {
        return Err(CapiError::new(
            EOPNOTSUPP,
            format!(
                "field mask {:#x}: this device generates the low bits of a value (mask 2^k - 1)",
                f.mask
            ),
        ));
    }
    if f.max_val > f.mask || f.min_val > f.max_val {
        return Err(CapiError::inval(format!(
            "field min_val {} / max_val {}: need min <= max <= mask {:#x}",
            f.min_val, f.max_val, f.mask
        )));
    }
    let base = f.init_val & !f.mask;
    Ok(((base | f.min_val) as u16, (base | f.max_val) as u16))
}

/// The EV format the device profile of `p` gets.
fn device_format(p: &EvProfile, fmt: Option<&FmtProfile>) -> Result<EvFormatSpec> {
    let mode = p.mode.unwrap_or(ev_mode::MRC_CTL_EV_MODE_AUTO);
    let fmt_mode = fmt
        .and_then(|f| f.mode)
        .unwrap_or(fmt_mode::MRC_CTL_EV_FMT_MODE_UDP);
    let width: u32 = fmt
        .and_then(|f| f.fields.as_ref())
        .map_or(16, |w| w.iter().map(|&x| u32::from(x)).sum());
    let ports = match mode {
        ev_mode::MRC_CTL_EV_MODE_GEN => gen_range(p.fields.as_deref().unwrap_or_default(), width)?,
        ev_mode::MRC_CTL_EV_MODE_AUTO if width >= 16 => (0xc000, 0xffff),
        ev_mode::MRC_CTL_EV_MODE_AUTO => (0, ((1u32 << width) - 1) as u16),
        _ => (0, 0xffff),
    };
    match fmt_mode {
        fmt_mode::MRC_CTL_EV_FMT_MODE_UDP => Ok(EvFormatSpec::udp(ports)),
        fmt_mode::MRC_CTL_EV_FMT_MODE_STEV => Ok(EvFormatSpec::stev(ports)),
        _ => {
            if mode != ev_mode::MRC_CTL_EV_MODE_EXP {
                return Err(CapiError::new(
                    EOPNOTSUPP,
                    "SRv6 EVs must be EXPLICIT on this device (it needs the locator block, which \
                     only the EVs carry)",
                ));
            }
            let mut block = None;
            for ev in &p.evs {
                let b = u32::from_be_bytes([ev.val[0], ev.val[1], ev.val[2], ev.val[3]]);
                if block.is_some_and(|x| x != b) {
                    return Err(CapiError::inval(
                        "SRv6 EVs of one profile must share the 32-bit locator block",
                    ));
                }
                block = Some(b);
            }
            Ok(EvFormatSpec::srv6(block.unwrap_or(0)))
        }
    }
}

fn device_kind(mode: u32) -> ProfileKind {
    match mode {
        ev_mode::MRC_CTL_EV_MODE_EXP => ProfileKind::Explicit,
        ev_mode::MRC_CTL_EV_MODE_GEN => ProfileKind::Generated,
        _ => ProfileKind::Auto,
    }
}

fn replace_on_device(ctl: &Controller, d: &DeviceEv, index: usize, v: DevValue) -> Result<()> {
    match v {
        DevValue::Value(x) => ctl.replace_ev_value(d.id, index as u16, x)?,
        DevValue::Carrier(c) => ctl.replace_ev_carrier(d.id, index as u16, c.into())?,
    }
    Ok(())
}

/// Makes the device profile of `p` (id `id`) and puts it ONLINE; reads back generated EVs.
fn program(
    ctl: &Controller,
    dev: &OpenDevice,
    st: &mut CtlState,
    id: u64,
    p: &mut EvProfile,
) -> Result<()> {
    let fmt = p.fmt_id.and_then(|f| st.fmts.get(&f)).cloned();
    if let Some(f) = &fmt {
        if f.state != ProfileState::Online {
            return Err(CapiError::inval(format!(
                "EV format profile {} is not ONLINE",
                p.fmt_id.unwrap_or(0)
            )));
        }
    }
    let mode = p.mode.unwrap_or(ev_mode::MRC_CTL_EV_MODE_AUTO);
    let count = p.count.unwrap_or(0);
    let (Some(min_active), Some(mask)) = (p.min_active, p.event_mask) else {
        return Err(CapiError::inval(
            "moving to ONLINE needs MRC_CTL_EV_PROFILE_MIN_ACTIVE and \
             MRC_CTL_EV_PROFILE_EVENT_MASK",
        ));
    };
    if mode == ev_mode::MRC_CTL_EV_MODE_EXP {
        let missing = p.evs.iter().filter(|e| unpopulated(e)).count();
        if missing > 0 {
            return Err(CapiError::inval(format!(
                "{missing} of the profile's {count} EVs are unpopulated (REPLACE_EV them first)"
            )));
        }
    }
    let fmt_spec = device_format(p, fmt.as_ref())?;
    let fmt_mode_bit = fmt
        .as_ref()
        .and_then(|f| f.mode)
        .unwrap_or(fmt_mode::MRC_CTL_EV_FMT_MODE_UDP);
    let format = ctl.create_ev_format_profile(&fmt_spec)?;
    let spec = EvProfileSpec {
        format_profile: format,
        kind: device_kind(mode),
        num_evs: count as u16,
        min_active_evs: min_active as u16,
        event_mask: device_mask(mask as i32)?,
        seed: (id as u32) ^ ((id >> 32) as u32) ^ 0x6d72_6300,
    };
    let made = (|| -> Result<DeviceEv> {
        let pid = ctl.create_ev_profile(&spec)?;
        let d = DeviceEv {
            id: pid,
            format,
            spec,
            state: DevState::Init,
        };
        let num_ports = dev.dev().attrs().num_ports;
        let fill = (|| -> Result<()> {
            if mode == ev_mode::MRC_CTL_EV_MODE_EXP {
                for (i, ev) in p.evs.iter().enumerate() {
                    replace_on_device(ctl, &d, i, encode(fmt_mode_bit, ev, num_ports)?)?;
                }
            }
            for (i, _) in p.denied.iter().enumerate().filter(|(_, d)| **d) {
                ctl.deny_ev(pid, i as u16)?;
            }
            ctl.set_ev_profile_state(pid, &spec, DevState::Online)?;
            Ok(())
        })();
        if let Err(e) = fill {
            let _ = ctl.destroy_ev_profile(pid);
            return Err(e);
        }
        Ok(DeviceEv {
            state: DevState::Online,
            ..d
        })
    })();
    let d = match made {
        Ok(d) => d,
        Err(e) => {
            let _ = ctl.destroy_ev_format_profile(format);
            return Err(e);
        }
    };
    if mode != ev_mode::MRC_CTL_EV_MODE_EXP {
        let planes = port_planes(dev, st)?;
        let np = dev.dev().attrs().num_planes.max(1);
        p.evs = (0..count)
            .map(|i| {
                let info = ctl.query_ev(d.id, i as u16)?;
                let port = port_of_plane(&planes, i % np);
                Ok(value_ev(info.value as u32, port))
            })
            .collect::<Result<_>>()?;
    }
    p.device = Some(d);
    Ok(())
}

/// Destroys the device side of `p` (`EBUSY` while QPs use it).
fn unprogram(ctl: &Controller, p: &mut EvProfile) -> Result<()> {
    if let Some(d) = p.device {
        ctl.destroy_ev_profile(d.id).map_err(|e| {
            let mut c = CapiError::from(e);
            if c.errno == EBUSY || c.errno == libc::EINVAL {
                c.errno = EBUSY;
                c.message = format!("QPs still use the profile: {}", c.message);
            }
            c
        })?;
        let _ = ctl.destroy_ev_format_profile(d.format);
        p.device = None;
    }
    Ok(())
}

/// Slots of `p` whose EV is `ev` (every one, or the first), for `port` planes.
fn find(p: &EvProfile, ev: &mrc_ctl_ev) -> Vec<usize> {
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

/// Applies the entries of an EV operation to `p` (stopping at the first failure).
#[allow(clippy::too_many_arguments)]
fn ev_op(
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
    if mask & !m::ALL != 0 {
        return Err(CapiError::inval(format!(
            "attr_mask {mask:#x} has bits no enum mrc_ctl_ev_profile_attr_mask defines"
        )));
    }
    if mask & m::MRC_CTL_EV_PROFILE_EV_OP != 0 && mask & m::MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        return Err(CapiError::inval(
            "MRC_CTL_EV_PROFILE_EV_OP and MRC_CTL_EV_PROFILE_EV_FIELDS_OP exclude each other",
        ));
    }
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
    if mask & m::MRC_CTL_EV_PROFILE_CUR_STATE != 0
        && ProfileState::from_c(attr.cur_profile_state, "cur_profile_state")? != cur.state
    {
        return Err(CapiError::inval(format!(
            "cur_profile_state {} but EV profile {id} is {:?}",
            attr.cur_profile_state, cur.state
        )));
    }
    let to = if mask & m::MRC_CTL_EV_PROFILE_STATE != 0 {
        ProfileState::from_c(attr.profile_state, "profile_state")?
    } else {
        cur.state
    };
    if !cur.state.can_move(to) {
        return Err(CapiError::inval(format!(
            "EV profile {id}: no move {:?} -> {to:?} (INIT -> OFFLINE -> ONLINE -> OFFLINE -> \
             INIT)",
            cur.state
        )));
    }
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
    if mask & !m::ALL != 0 {
        return Err(CapiError::inval(format!(
            "attr_mask {mask:#x} has bits no enum mrc_ctl_ev_profile_attr_mask defines"
        )));
    }
    if mask & m::MRC_CTL_EV_PROFILE_EV_OP != 0 && mask & m::MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        return Err(CapiError::inval(
            "MRC_CTL_EV_PROFILE_EV_OP and MRC_CTL_EV_PROFILE_EV_FIELDS_OP exclude each other",
        ));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_field_is_a_value_range() {
        let f = mrc_ctl_ev_field {
            width: 16,
            init_val: 0xc000,
            min_val: 3,
            max_val: 200,
            mask: 0xff,
        };
        assert_eq!(gen_range(&[f], 16).unwrap(), (0xc003, 0xc0c8));
        let bad_mask = mrc_ctl_ev_field { mask: 0xf0, ..f };
        assert_eq!(gen_range(&[bad_mask], 16).unwrap_err().errno, EOPNOTSUPP);
        let too_big = mrc_ctl_ev_field {
            max_val: 0x100,
            ..f
        };
        assert!(gen_range(&[too_big], 16).is_err());
        assert_eq!(gen_range(&[f, f], 16).unwrap_err().errno, EOPNOTSUPP);
    }

    #[test]
    fn ev_values_are_checked_per_mode() {
        let ev = value_ev(0x1234, 2);
        assert_eq!(
            encode(fmt_mode::MRC_CTL_EV_FMT_MODE_UDP, &ev, 4).unwrap(),
            DevValue::Value(0x1234)
        );
        assert!(encode(fmt_mode::MRC_CTL_EV_FMT_MODE_UDP, &value_ev(0x10000, 1), 4).is_err());
        assert!(encode(fmt_mode::MRC_CTL_EV_FMT_MODE_UDP, &value_ev(1, 5), 4).is_err());
        let mut srv6 = mrc_ctl_ev {
            port: 1,
            ..Default::default()
        };
        srv6.val[0] = 0xfc;
        assert!(matches!(
            encode(fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6, &srv6, 4).unwrap(),
            DevValue::Carrier(c) if c[0] == 0xfc
        ));
        srv6.val[20] = 1;
        assert_eq!(
            encode(fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6, &srv6, 4)
                .unwrap_err()
                .errno,
            EOPNOTSUPP
        );
    }

    #[test]
    fn event_masks_map_to_device_bits() {
        assert_eq!(
            device_mask((ev_state::MRC_CTL_EV_GOOD | ev_state::MRC_CTL_EV_ASSUMED_BAD) as i32)
                .unwrap(),
            EVENT_MASK_EV_GOOD | EVENT_MASK_EV_BAD
        );
        assert!(device_mask(ev_state::MRC_CTL_EV_DENIED as i32).is_err());
    }
}
