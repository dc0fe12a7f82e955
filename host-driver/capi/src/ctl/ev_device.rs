//! The device side of an EV profile: the device format and profile an OCP profile becomes when
//! it first goes ONLINE ([`program`]), and how EVs and masks are written to the device.

use mrc_abi::device::admin::{EVENT_MASK_EV_BAD, EVENT_MASK_EV_GOOD};
use mrc_driver::ctl::{
    Controller, EvFormatSpec, EvProfileSpec, ProfileKind, ProfileState as DevState,
};

use super::ev::{unpopulated, DeviceEv, EvProfile};
use super::fmt::FmtProfile;
use super::{port_of_plane, port_planes, CtlState, ProfileState};
use crate::ctypes::ctl::*;
use crate::device::OpenDevice;
use crate::error::{CapiError, Result, EBUSY, EOPNOTSUPP};

/// An EV as the device takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevValue {
    /// UDP / STEV value.
    Value(u32),
    /// SRv6 carrier address.
    Carrier([u8; 16]),
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

pub(super) fn value_ev(v: u32, port: u8) -> mrc_ctl_ev {
    let mut ev = mrc_ctl_ev {
        port,
        ..Default::default()
    };
    ev.val[..4].copy_from_slice(&v.to_ne_bytes());
    ev
}

pub(super) fn device_mask(mask: i32) -> Result<u32> {
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

pub(super) fn replace_on_device(
    ctl: &Controller,
    d: &DeviceEv,
    index: usize,
    v: DevValue,
) -> Result<()> {
    match v {
        DevValue::Value(x) => ctl.replace_ev_value(d.id, index as u16, x)?,
        DevValue::Carrier(c) => ctl.replace_ev_carrier(d.id, index as u16, c.into())?,
    }
    Ok(())
}

/// Makes the device profile of `p` (id `id`) and puts it ONLINE; reads back generated EVs.
pub(super) fn program(
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
pub(super) fn unprogram(ctl: &Controller, p: &mut EvProfile) -> Result<()> {
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
