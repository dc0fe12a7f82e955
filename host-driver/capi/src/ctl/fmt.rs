//! EV format profiles (`mrc_ctl_modify_ev_fmt_profile` / `mrc_ctl_query_ev_fmt_profile`): kept
//! by the library as templates of the device formats its EV profiles get.

use super::{controller, known_bits, next_state, no_vendor_cfg, ProfileState, MAX_FMT_PROFILES};
use crate::ctypes::ctl::*;
use crate::error::{CapiError, Result, E2BIG, EBUSY};
use crate::handle::Token;
use crate::state::lock;

/// An OCP EV format profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FmtProfile {
    /// Where it is.
    pub state: ProfileState,
    /// `enum mrc_ctl_ev_fmt_mode` (one bit), once set.
    pub mode: Option<u32>,
    /// Field widths, once set.
    pub fields: Option<Vec<u8>>,
}

impl Default for FmtProfile {
    fn default() -> Self {
        FmtProfile {
            state: ProfileState::Init,
            mode: None,
            fields: None,
        }
    }
}

/// The widest EV a format mode carries on this device, in bits: the device's UDP and STEV EVs
/// are 16-bit values (its format profiles give them as a source port range), SRv6 EVs one
/// address.
pub fn mode_width(mode: u32) -> u32 {
    match mode {
        fmt_mode::MRC_CTL_EV_FMT_MODE_UDP | fmt_mode::MRC_CTL_EV_FMT_MODE_STEV => 16,
        _ => 128,
    }
}

fn check_mode(mode: u32, caps: u32) -> Result<u32> {
    use mrc_abi::device::regs::caps as c;
    let need = match mode {
        fmt_mode::MRC_CTL_EV_FMT_MODE_UDP => c::EV_UDP,
        fmt_mode::MRC_CTL_EV_FMT_MODE_STEV => c::EV_STEV,
        fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6 => c::EV_SRV6,
        _ => {
            return Err(CapiError::inval(format!(
                "ev_fmt_mode {mode:#x} is not one enum mrc_ctl_ev_fmt_mode value"
            )))
        }
    };
    if caps & need == 0 {
        return Err(CapiError::new(
            crate::error::EOPNOTSUPP,
            format!("ev_fmt_mode {mode:#x}: the device does not carry this EV format"),
        ));
    }
    Ok(mode)
}

/// Checks a field list against a mode.
///
/// # Errors
/// `EINVAL` for an empty list or a zero width, `E2BIG` beyond what the device carries.
pub fn check_fields(mode: u32, widths: &[u8]) -> Result<()> {
    if widths.is_empty() || widths.contains(&0) {
        return Err(CapiError::inval(
            "fmt_fields: at least one field, each at least 1 bit wide",
        ));
    }
    let total: u32 = widths.iter().map(|&w| u32::from(w)).sum();
    if total > mode_width(mode) {
        return Err(CapiError::new(
            E2BIG,
            format!(
                "fmt_fields total {total} bits: this device carries at most {} in this mode{}",
                mode_width(mode),
                if mode == fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6 {
                    " (one SRv6 address; no SRH segment)"
                } else {
                    ""
                }
            ),
        ));
    }
    if mode == fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6
        && (widths[0] != 32 || widths[1..].iter().any(|&w| w != 16))
    {
        return Err(CapiError::new(
            E2BIG,
            "SRv6 fmt_fields: a 32-bit locator block, then 16-bit uSIDs (RFC 9800)",
        ));
    }
    Ok(())
}

/// `mrc_ctl_modify_ev_fmt_profile`. `fields`: the array of a MODIFY_FIELDS operation.
///
/// # Errors
/// See the header: `EINVAL`, `E2BIG`, `EBUSY` (an ONLINE EV profile uses it), `EPERM`.
pub fn modify_fmt(
    ctx: Token,
    id: u64,
    attr: &mrc_ctl_ev_fmt_profile_attr,
    mask: u32,
    fields: Option<&[mrc_ctl_ev_fmt_field]>,
) -> Result<()> {
    use fmt_mask as m;
    let c = controller(ctx)?;
    known_bits(mask, m::ALL, "mrc_ctl_ev_fmt_profile_attr_mask")?;
    if mask & m::MRC_CTL_EV_FMT_VENDOR_CFG != 0 {
        no_vendor_cfg(&attr.vendor_cfg)?;
    }
    let caps = c.dev().dev().attrs().capabilities;
    let mut st = lock(&c.dev().ctl);
    if !st.fmts.contains_key(&id) && st.fmts.len() as u32 >= MAX_FMT_PROFILES {
        return Err(CapiError::new(
            crate::error::ENOMEM,
            format!("{MAX_FMT_PROFILES} EV format profiles are configured"),
        ));
    }
    let cur = st.fmts.get(&id).cloned().unwrap_or_default();
    let to = next_state(
        &format!("EV format profile {id}"),
        cur.state,
        mask,
        m::MRC_CTL_EV_FMT_PROFILE_STATE,
        m::MRC_CTL_EV_FMT_PROFILE_CUR_STATE,
        attr.profile_state,
        attr.cur_profile_state,
    )?;
    let in_use = st
        .evs
        .values()
        .any(|p| p.fmt_id == Some(id) && p.state == ProfileState::Online);
    let mut n = cur.clone();
    // MODE: in OFFLINE, or in the INIT -> OFFLINE call.
    if mask & m::MRC_CTL_EV_FMT_PROFILE_MODE != 0 {
        if cur.state == ProfileState::Online {
            return Err(CapiError::inval(
                "an ONLINE EV format profile's mode cannot change (move it OFFLINE first)",
            ));
        }
        n.mode = Some(check_mode(attr.ev_fmt_mode, caps)?);
    }
    if mask & m::MRC_CTL_EV_FMT_PROFILE_OP != 0 {
        match attr.ev_fmt_op.op {
            fmt_op::MRC_CTL_EV_FMT_OP_MODIFY_FIELDS => {
                if cur.state == ProfileState::Online {
                    return Err(CapiError::inval(
                        "an ONLINE EV format profile's fields cannot change",
                    ));
                }
                let mode = n.mode.ok_or_else(|| {
                    CapiError::inval("MODIFY_FIELDS needs the mode (MRC_CTL_EV_FMT_PROFILE_MODE)")
                })?;
                let widths: Vec<u8> = fields.unwrap_or_default().iter().map(|f| f.width).collect();
                check_fields(mode, &widths)?;
                n.fields = Some(widths);
            }
            fmt_op::MRC_CTL_EV_FMT_OP_QUERY_FIELDS => {}
            op => {
                return Err(CapiError::inval(format!(
                    "ev_fmt_op.op {op} is not an enum mrc_ctl_ev_fmt_op value"
                )))
            }
        }
    }
    match (cur.state, to) {
        (ProfileState::Init, ProfileState::Offline) if n.mode.is_none() => {
            return Err(CapiError::inval(
                "moving to OFFLINE needs the mode (MRC_CTL_EV_FMT_PROFILE_MODE)",
            ))
        }
        (ProfileState::Offline, ProfileState::Online) if n.fields.is_none() => {
            return Err(CapiError::inval(
                "moving to ONLINE needs the fields (MRC_CTL_EV_FMT_OP_MODIFY_FIELDS)",
            ))
        }
        (ProfileState::Online, ProfileState::Offline) | (_, ProfileState::Init) if in_use => {
            return Err(CapiError::new(
                EBUSY,
                format!("EV format profile {id} is used by an ONLINE EV profile"),
            ))
        }
        _ => {}
    }
    if mode_changed(&cur, &n) && in_use {
        return Err(CapiError::new(
            EBUSY,
            format!("EV format profile {id} is used by an ONLINE EV profile"),
        ));
    }
    n.state = to;
    if to == ProfileState::Init {
        st.fmts.remove(&id);
    } else {
        st.fmts.insert(id, n);
    }
    Ok(())
}

fn mode_changed(a: &FmtProfile, b: &FmtProfile) -> bool {
    a.mode != b.mode || a.fields != b.fields
}

/// `mrc_ctl_query_ev_fmt_profile`. `fields_out`: the array of a QUERY_FIELDS operation;
/// returns the field count to report.
///
/// # Errors
/// `EINVAL` (bad mask, MODIFY_FIELDS asked), `E2BIG` (the array is too short; the count
/// says how long it must be), `EPERM`.
pub fn query_fmt(
    ctx: Token,
    id: u64,
    attr: &mut mrc_ctl_ev_fmt_profile_attr,
    mask: u32,
    fields_out: Option<&mut [mrc_ctl_ev_fmt_field]>,
) -> Result<()> {
    use fmt_mask as m;
    let c = controller(ctx)?;
    known_bits(mask, m::ALL, "mrc_ctl_ev_fmt_profile_attr_mask")?;
    let p = lock(&c.dev().ctl)
        .fmts
        .get(&id)
        .cloned()
        .unwrap_or_default();
    if mask & (m::MRC_CTL_EV_FMT_PROFILE_STATE | m::MRC_CTL_EV_FMT_PROFILE_CUR_STATE) != 0 {
        attr.profile_state = p.state.to_c();
        attr.cur_profile_state = p.state.to_c();
    }
    if mask & m::MRC_CTL_EV_FMT_PROFILE_MODE != 0 {
        attr.ev_fmt_mode = p.mode.unwrap_or(0);
    }
    if mask & m::MRC_CTL_EV_FMT_VENDOR_CFG != 0 {
        attr.vendor_cfg = [0; MRC_CTL_MAX_VENDOR_CFG_SIZE];
    }
    if mask & m::MRC_CTL_EV_FMT_PROFILE_OP != 0 {
        if attr.ev_fmt_op.op != fmt_op::MRC_CTL_EV_FMT_OP_QUERY_FIELDS {
            return Err(CapiError::inval(
                "a query takes only MRC_CTL_EV_FMT_OP_QUERY_FIELDS",
            ));
        }
        let widths = p.fields.unwrap_or_default();
        let out = fields_out.unwrap_or_default();
        attr.ev_fmt_op.fmt_field_count = widths.len() as i32;
        if out.len() < widths.len() {
            return Err(CapiError::new(
                E2BIG,
                format!(
                    "fmt_field_count {} is below the profile's {} fields",
                    out.len(),
                    widths.len()
                ),
            ));
        }
        for (o, w) in out.iter_mut().zip(&widths) {
            o.width = *w;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_fit_the_mode() {
        use fmt_mode::*;
        assert!(check_fields(MRC_CTL_EV_FMT_MODE_STEV, &[8, 8]).is_ok());
        // OCP's STEV example (2 x 16 bits) is wider than this device's 16-bit STEV values.
        assert_eq!(
            check_fields(MRC_CTL_EV_FMT_MODE_STEV, &[16, 16])
                .unwrap_err()
                .errno,
            E2BIG
        );
        assert_eq!(
            check_fields(MRC_CTL_EV_FMT_MODE_UDP, &[16, 1])
                .unwrap_err()
                .errno,
            E2BIG
        );
        assert!(check_fields(MRC_CTL_EV_FMT_MODE_SRV6, &[32, 16, 16, 16, 16]).is_ok());
        // OCP's SRv6+SRH example: 224 bits, two addresses.
        let srh = [32, 16, 16, 16, 16, 16, 16, 32, 16, 16, 16, 16];
        assert_eq!(
            check_fields(MRC_CTL_EV_FMT_MODE_SRV6, &srh)
                .unwrap_err()
                .errno,
            E2BIG
        );
        assert!(check_fields(MRC_CTL_EV_FMT_MODE_UDP, &[]).is_err());
        assert!(check_fields(MRC_CTL_EV_FMT_MODE_UDP, &[0]).is_err());
    }

    #[test]
    fn state_machine_moves() {
        use ProfileState as S;
        assert!(S::Init.can_move(S::Offline));
        assert!(!S::Init.can_move(S::Online));
        assert!(S::Offline.can_move(S::Init));
        assert!(!S::Online.can_move(S::Init));
    }
}
