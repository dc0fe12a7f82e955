//! CC profiles (`mrc_ctl_modify_cc_profile` / `mrc_ctl_query_cc_profile`): NSCC, made on the
//! device when the profile first goes ONLINE with its configuration.

use std::ffi::CStr;

use mrc_driver::ctl::NsccParams;

use super::{controller, known_bits, next_state, no_vendor_cfg, ProfileState, NSCC};
use crate::ctypes::ctl::*;
use crate::error::{CapiError, Result, EBUSY, EOPNOTSUPP};
use crate::handle::Token;
use crate::state::lock;

/// An OCP CC profile.
#[derive(Clone, Debug, Default)]
pub struct CcProfile {
    /// Where it is.
    pub state: ProfileState,
    /// The algorithm was set (always NSCC).
    pub algorithm: bool,
    /// Its configuration, once given (boxed: queries hand out its address).
    pub config: Option<Box<mrc_ctl_cc_nscc_cfg>>,
    /// The device profile, once made.
    pub device_id: Option<u32>,
}

/// The device's NSCC parameters of an OCP NSCC configuration.
///
/// # Errors
/// `EOPNOTSUPP` naming a setting the device's NSCC does not have; `EINVAL` for values out of
/// range.
pub fn nscc_params(c: &mrc_ctl_cc_nscc_cfg) -> Result<NsccParams> {
    let qa_off = c.disable_qa != 0 || (c.qa_gate == 0 && c.qa_threshold == 0);
    for (name, unset) in [
        (
            "quick adapt (QA: set disable_qa, or qa_gate and qa_threshold 0)",
            qa_off,
        ),
        (
            "adjust_bytes_threshold (0: per ACK)",
            c.adjust_bytes_threshold == 0,
        ),
        (
            "adjust_period_threshold (0: per ACK)",
            c.adjust_period_threshold == 0,
        ),
        ("max_cwnd (0: no cap)", c.max_cwnd == 0),
    ] {
        if !unset {
            return Err(CapiError::new(
                EOPNOTSUPP,
                format!("NSCC {name}: this device's NSCC has no such setting"),
            ));
        }
    }
    for (name, v) in [
        ("eta", c.eta),
        ("fi", c.fi),
        ("fi_scale", c.fi_scale),
        ("gamma", c.gamma),
        ("max_md_jump", c.max_md_jump),
    ] {
        if !v.is_finite() || v < 0.0 {
            return Err(CapiError::inval(format!(
                "NSCC {name} {v} must be finite and >= 0"
            )));
        }
    }
    Ok(NsccParams {
        eta: c.eta.into(),
        fi: c.fi.into(),
        fi_scale: c.fi_scale.into(),
        gamma: c.gamma.into(),
        max_md_jump: c.max_md_jump.into(),
        target_qdelay_ns: c.target_delay,
        base_rtt_ns: c.base_rtt,
    })
}

/// `mrc_ctl_modify_cc_profile`. `algorithm` and `config` are the caller's (already read).
///
/// # Errors
/// See the header; `EOPNOTSUPP` for a NULL algorithm (CC cannot be disabled) or NSCC settings
/// the device lacks.
pub fn modify_cc(
    ctx: Token,
    id: u64,
    attr: &mrc_ctl_cc_profile_attr,
    mask: u32,
    algorithm: Option<&CStr>,
    config: Option<mrc_ctl_cc_nscc_cfg>,
) -> Result<()> {
    use cc_mask as m;
    let c = controller(ctx)?;
    let ctl = c.controller()?;
    known_bits(mask, m::ALL, "mrc_ctl_cc_profile_attr_mask")?;
    if id == 0 {
        return Err(CapiError::inval(
            "CC profile 0 is the device's default profile; configure another id",
        ));
    }
    if mask & m::MRC_CTL_CC_PROFILE_VENDOR_CFG != 0 {
        no_vendor_cfg(&attr.vendor_cfg)?;
    }
    let mut st = lock(&c.dev().ctl);
    let cur = st.ccs.get(&id).cloned().unwrap_or_default();
    let to = next_state(
        &format!("CC profile {id}"),
        cur.state,
        mask,
        m::MRC_CTL_CC_PROFILE_STATE,
        m::MRC_CTL_CC_PROFILE_CUR_STATE,
        attr.profile_state,
        attr.cur_profile_state,
    )?;
    let mut p = cur.clone();
    if mask & m::MRC_CTL_CC_PROFILE_ALGORITHM != 0 {
        if cur.state == ProfileState::Online {
            return Err(CapiError::inval(
                "an ONLINE CC profile's algorithm cannot change",
            ));
        }
        match algorithm {
            None => {
                return Err(CapiError::new(
                    EOPNOTSUPP,
                    "algorithm NULL (no CC): this device always runs NSCC",
                ))
            }
            Some(a) if a == NSCC => p.algorithm = true,
            Some(a) => {
                return Err(CapiError::inval(format!(
                    "algorithm {a:?}: this device offers only \"uet-1.0-nscc\""
                )))
            }
        }
    }
    let mut params = None;
    if mask & m::MRC_CTL_CC_PROFILE_CONFIG != 0 {
        let cfg = config.ok_or_else(|| CapiError::inval("cc_config is NULL"))?;
        params = Some(nscc_params(&cfg)?);
        match &mut p.config {
            Some(b) => **b = cfg,
            None => p.config = Some(Box::new(cfg)),
        }
    }
    match (cur.state, to) {
        (ProfileState::Init, ProfileState::Offline) if !p.algorithm => {
            return Err(CapiError::inval(
                "moving to OFFLINE needs MRC_CTL_CC_PROFILE_ALGORITHM",
            ))
        }
        (ProfileState::Offline, ProfileState::Online) => {
            let cfg = p.config.as_deref().ok_or_else(|| {
                CapiError::inval("moving to ONLINE needs MRC_CTL_CC_PROFILE_CONFIG")
            })?;
            let nscc = nscc_params(cfg)?;
            match p.device_id {
                None => p.device_id = Some(ctl.create_cc_profile(&nscc)?),
                Some(d) => ctl.modify_cc_profile(d, &nscc)?,
            }
        }
        (ProfileState::Offline, ProfileState::Init) => {
            if let Some(d) = p.device_id {
                ctl.destroy_cc_profile(d).map_err(|e| {
                    let mut c = CapiError::from(e);
                    c.errno = EBUSY;
                    c.message = format!("QPs still use CC profile {id}: {}", c.message);
                    c
                })?;
            }
            st.ccs.remove(&id);
            return Ok(());
        }
        _ => {
            if let (Some(d), Some(nscc)) = (p.device_id, params) {
                ctl.modify_cc_profile(d, &nscc)?;
            }
        }
    }
    p.state = to;
    st.ccs.insert(id, p);
    Ok(())
}

/// `mrc_ctl_query_cc_profile`: `algorithm` points at a static string, `cc_config` at the
/// library's copy of the configuration (valid until the profile returns to INIT).
///
/// # Errors
/// A bad context or mask.
pub fn query_cc(ctx: Token, id: u64, attr: &mut mrc_ctl_cc_profile_attr, mask: u32) -> Result<()> {
    use cc_mask as m;
    let c = controller(ctx)?;
    known_bits(mask, m::ALL, "mrc_ctl_cc_profile_attr_mask")?;
    let st = lock(&c.dev().ctl);
    let p = st.ccs.get(&id);
    let state = p.map_or(ProfileState::Init, |p| p.state);
    if mask & (m::MRC_CTL_CC_PROFILE_STATE | m::MRC_CTL_CC_PROFILE_CUR_STATE) != 0 {
        attr.profile_state = state.to_c();
        attr.cur_profile_state = state.to_c();
    }
    if mask & m::MRC_CTL_CC_PROFILE_ALGORITHM != 0 {
        attr.algorithm = if p.is_some_and(|p| p.algorithm) {
            NSCC.as_ptr()
        } else {
            std::ptr::null()
        };
    }
    if mask & m::MRC_CTL_CC_PROFILE_CONFIG != 0 {
        attr.cc_config = p
            .and_then(|p| p.config.as_deref())
            .map_or(std::ptr::null(), |c| {
                (c as *const mrc_ctl_cc_nscc_cfg).cast()
            });
    }
    if mask & m::MRC_CTL_CC_PROFILE_VENDOR_CFG != 0 {
        attr.vendor_cfg = [0; MRC_CTL_MAX_VENDOR_CFG_SIZE];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nscc_settings_the_device_lacks_are_refused() {
        let base = mrc_ctl_cc_nscc_cfg {
            disable_qa: 1,
            eta: 0.15,
            fi: 5.0,
            fi_scale: 0.25,
            gamma: 0.8,
            max_md_jump: 0.5,
            base_rtt: 10_000,
            target_delay: 5_000,
            ..Default::default()
        };
        let p = nscc_params(&base).unwrap();
        assert_eq!((p.base_rtt_ns, p.target_qdelay_ns), (10_000, 5_000));
        assert!((p.gamma - 0.8).abs() < 1e-6);
        let e = nscc_params(&mrc_ctl_cc_nscc_cfg {
            max_cwnd: 1 << 20,
            ..base
        })
        .unwrap_err();
        assert_eq!(e.errno, EOPNOTSUPP);
        assert!(e.message.contains("max_cwnd"));
        let e = nscc_params(&mrc_ctl_cc_nscc_cfg {
            disable_qa: 0,
            qa_threshold: 100,
            ..base
        })
        .unwrap_err();
        assert!(e.message.contains("QA"));
        assert!(nscc_params(&mrc_ctl_cc_nscc_cfg {
            eta: f32::NAN,
            ..base
        })
        .is_err());
    }
}
