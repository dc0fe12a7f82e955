//! The controller API: privileged, one per node. Only a [`Context`] opened with
//! [`Role::Controller`] can make a [`Controller`]; an application context gets
//! [`Error::NotController`].
//!
//! It covers device attributes, port admin state, EV format profiles (UDP, STEV, SRv6), EV
//! profiles (AUTO, EXPLICIT, GENERATED; deny / allow / replace / query; min active EVs; event
//! mask), CC profiles (NSCC, given in floats here and sent in Q16.16), EV probes (results come as
//! `EvProbeResult` events) and EV state events ([`Controller::poll_event`]). [`plan`] computes the
//! SRv6 uSID carriers of a Clos topology.

pub mod plan;

use std::sync::Arc;

use mrc_abi::device::admin::body::{CcProfile, EvFormatProfile, EvProfile, ProbeEv, ReplaceEv};
use mrc_abi::device::admin::{EvProfileKind, EvProfileState, FMT_TSX, FMT_USE_SRH};
use mrc_abi::wire::EvFormat;

use crate::api::{AsyncEvent, Context, Role};
use crate::device::{Device, DeviceAttrs, EvInfo, PortInfo};
use crate::error::{Error, Result};

pub use mrc_abi::device::admin::{EvProfileKind as ProfileKind, EvProfileState as ProfileState};
pub use mrc_abi::device::admin::{
    EVENT_MASK_ALL, EVENT_MASK_EV_BAD, EVENT_MASK_EV_DENIED, EVENT_MASK_EV_GOOD,
    EVENT_MASK_MIN_ACTIVE, EVENT_MASK_PROBE,
};

/// How EVs are carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvFormatSpec {
    /// UDP, STEV or SRv6.
    pub format: EvFormat,
    /// SRv6: use an SRH for routes longer than one carrier.
    pub use_srh: bool,
    /// Send timestamps (RTT).
    pub tsx: bool,
    /// DSCP of data packets.
    pub dscp: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// SRv6 locator block.
    pub locator_block: u32,
    /// UDP / STEV source port range.
    pub src_ports: (u16, u16),
}

impl EvFormatSpec {
    /// UDP source-port EVs over `ports`.
    pub fn udp(ports: (u16, u16)) -> Self {
        EvFormatSpec {
            format: EvFormat::Udp,
            use_srh: false,
            tsx: false,
            dscp: 26,
            hop_limit: 64,
            locator_block: 0,
            src_ports: ports,
        }
    }
    /// SRv6 uSID EVs under `block`.
    pub fn srv6(block: u32) -> Self {
        EvFormatSpec {
            format: EvFormat::Srv6,
            locator_block: block,
            src_ports: (0, 0),
            ..Self::udp((0, 0))
        }
    }
    /// STEV over `ports`.
    pub fn stev(ports: (u16, u16)) -> Self {
        EvFormatSpec {
            format: EvFormat::Stev,
            ..Self::udp(ports)
        }
    }
    fn body(&self, id: u32) -> EvFormatProfile {
        EvFormatProfile {
            id: id.into(),
            encoding: self.format as u8,
            flags: (if self.use_srh { FMT_USE_SRH } else { 0 })
                | if self.tsx { FMT_TSX } else { 0 },
            dscp: self.dscp,
            hop_limit: self.hop_limit,
            locator_block: self.locator_block.into(),
            src_port_min: self.src_ports.0.into(),
            src_port_max: self.src_ports.1.into(),
        }
    }
}

/// An EV profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvProfileSpec {
    /// EV format profile id.
    pub format_profile: u32,
    /// AUTO, EXPLICIT or GENERATED.
    pub kind: EvProfileKind,
    /// EVs (1..=4096, at most the device's `max_evs_per_qp` for QPs to use it).
    pub num_evs: u16,
    /// Fewest usable EVs before an event.
    pub min_active_evs: u16,
    /// `EVENT_MASK_*` bits.
    pub event_mask: u32,
    /// GENERATED: generator seed.
    pub seed: u32,
}

/// NSCC parameters (floats at the API, Q16.16 on the device).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NsccParams {
    /// Additive increase, bytes per ACK.
    pub eta: f64,
    /// Fair increase, bytes.
    pub fi: f64,
    /// fi scale.
    pub fi_scale: f64,
    /// Multiplicative decrease factor in (0, 1].
    pub gamma: f64,
    /// Largest single decrease, fraction of cwnd in (0, 1].
    pub max_md_jump: f64,
    /// Target queueing delay, ns.
    pub target_qdelay_ns: u32,
    /// Base RTT, ns.
    pub base_rtt_ns: u32,
}

impl Default for NsccParams {
    fn default() -> Self {
        NsccParams {
            eta: 0.15,
            fi: 5.0,
            fi_scale: 0.25,
            gamma: 0.8,
            max_md_jump: 0.5,
            target_qdelay_ns: 5_000,
            base_rtt_ns: 10_000,
        }
    }
}

fn q16(field: &'static str, v: f64, max: f64) -> Result<u32> {
    if !(v.is_finite() && v >= 0.0 && v <= max) {
        return Err(Error::InvalidAttribute {
            object: "CC profile".into(),
            field,
            value: v.max(0.0).min(u64::MAX as f64) as u64,
            rule: "finite, >= 0 and within the Q16.16 range of the field",
        });
    }
    Ok((v * 65536.0).round() as u32)
}

impl NsccParams {
    fn body(&self, id: u32) -> Result<CcProfile> {
        let gamma = q16("gamma", self.gamma, 1.0)?;
        let jump = q16("max_md_jump", self.max_md_jump, 1.0)?;
        if gamma == 0 || jump == 0 {
            return Err(Error::InvalidAttribute {
                object: "CC profile".into(),
                field: if gamma == 0 { "gamma" } else { "max_md_jump" },
                value: 0,
                rule: "in (0, 1]",
            });
        }
        Ok(CcProfile {
            id: id.into(),
            eta_q16: q16("eta", self.eta, 65535.0)?.into(),
            fi_q16: q16("fi", self.fi, 65535.0)?.into(),
            fi_scale_q16: q16("fi_scale", self.fi_scale, 65535.0)?.into(),
            gamma_q16: gamma.into(),
            max_md_jump_q16: jump.into(),
            target_qdelay_ns: self.target_qdelay_ns.into(),
            base_rtt_ns: self.base_rtt_ns.into(),
        })
    }
}

/// The controller of one device.
#[derive(Clone, Debug)]
pub struct Controller {
    dev: Arc<Device>,
}

impl Controller {
    /// The controller API of a controller context.
    ///
    /// # Errors
    /// [`Error::NotController`] for an application context.
    pub fn new(ctx: &Context) -> Result<Controller> {
        if ctx.role() != Role::Controller {
            return Err(Error::NotController {
                bdf: ctx.device().bdf(),
                op: "the controller API",
            });
        }
        ctx.device().check()?;
        Ok(Controller {
            dev: ctx.device().clone(),
        })
    }
    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }
    /// Device attributes.
    pub fn attrs(&self) -> &DeviceAttrs {
        self.dev.attrs()
    }
    /// Port state.
    ///
    /// # Errors
    /// Device errors.
    pub fn query_port(&self, port: u8) -> Result<PortInfo> {
        self.dev.query_port(port)
    }
    /// Port admin state.
    ///
    /// # Errors
    /// Device errors.
    pub fn set_port_admin_state(&self, port: u8, up: bool) -> Result<()> {
        self.dev.set_port_admin_state(port, up)
    }
    /// Creates an EV format profile.
    ///
    /// # Errors
    /// Device errors (e.g. a format the device lacks).
    pub fn create_ev_format_profile(&self, spec: &EvFormatSpec) -> Result<u32> {
        self.dev.create_ev_format_profile(spec.body(0))
    }
    /// Modifies an EV format profile.
    ///
    /// # Errors
    /// Device errors.
    pub fn modify_ev_format_profile(&self, id: u32, spec: &EvFormatSpec) -> Result<()> {
        self.dev.modify_ev_format_profile(spec.body(id))
    }
    /// Destroys an EV format profile.
    ///
    /// # Errors
    /// Device errors (in use).
    pub fn destroy_ev_format_profile(&self, id: u32) -> Result<()> {
        self.dev.destroy_ev_format_profile(id)
    }
    fn ev_body(id: u32, s: &EvProfileSpec, state: EvProfileState) -> EvProfile {
        EvProfile {
            id: id.into(),
            format_profile: s.format_profile.into(),
            kind: s.kind as u8,
            state: state as u8,
            min_active_evs: s.min_active_evs.into(),
            num_evs: s.num_evs.into(),
            rsvd: 0.into(),
            event_mask: s.event_mask.into(),
            seed: s.seed.into(),
        }
    }
    /// Creates an EV profile (in INIT; [`Controller::set_ev_profile_state`] puts it online).
    ///
    /// # Errors
    /// Device errors.
    pub fn create_ev_profile(&self, spec: &EvProfileSpec) -> Result<u32> {
        self.dev
            .create_ev_profile(Self::ev_body(0, spec, EvProfileState::Init))
    }
    /// Moves an EV profile (INIT -> ONLINE <-> OFFLINE) and updates min active EVs and mask.
    ///
    /// # Errors
    /// Device errors (bad transition).
    pub fn set_ev_profile_state(
        &self,
        id: u32,
        spec: &EvProfileSpec,
        state: EvProfileState,
    ) -> Result<()> {
        self.dev.modify_ev_profile(Self::ev_body(id, spec, state))
    }
    /// Destroys an EV profile.
    ///
    /// # Errors
    /// Device errors (in use).
    pub fn destroy_ev_profile(&self, id: u32) -> Result<()> {
        self.dev.destroy_ev_profile(id)
    }
    /// Denies an EV (no QP sends on it until allowed).
    ///
    /// # Errors
    /// Device errors.
    pub fn deny_ev(&self, profile: u32, ev_index: u16) -> Result<()> {
        self.dev.deny_ev(profile, ev_index, true)
    }
    /// Allows a denied EV again.
    ///
    /// # Errors
    /// Device errors.
    pub fn allow_ev(&self, profile: u32, ev_index: u16) -> Result<()> {
        self.dev.deny_ev(profile, ev_index, false)
    }
    /// Sets a UDP / STEV EV of an EXPLICIT profile.
    ///
    /// # Errors
    /// Device errors.
    pub fn replace_ev_value(&self, profile: u32, ev_index: u16, value: u32) -> Result<()> {
        self.dev.replace_ev(ReplaceEv {
            profile: profile.into(),
            ev_index: ev_index.into(),
            rsvd: 0.into(),
            value: value.into(),
            carrier: [0; 16],
        })
    }
    /// Sets an SRv6 EV (its uSID carrier) of an EXPLICIT profile.
    ///
    /// # Errors
    /// Device errors.
    pub fn replace_ev_carrier(
        &self,
        profile: u32,
        ev_index: u16,
        carrier: std::net::Ipv6Addr,
    ) -> Result<()> {
        self.dev.replace_ev(ReplaceEv {
            profile: profile.into(),
            ev_index: ev_index.into(),
            rsvd: 0.into(),
            value: 0.into(),
            carrier: carrier.octets(),
        })
    }
    /// Queries an EV.
    ///
    /// # Errors
    /// Device errors.
    pub fn query_ev(&self, profile: u32, ev_index: u16) -> Result<EvInfo> {
        self.dev.query_ev(profile, ev_index)
    }
    /// Probes EV `ev_index` of QP `qpn`; the RTT arrives as an `EvProbeResult` event.
    ///
    /// # Errors
    /// Device errors.
    pub fn probe_ev(&self, qpn: u32, ev_index: u16, probe_id: u32, timeout_us: u32) -> Result<()> {
        self.dev.probe_ev(ProbeEv {
            qpn: qpn.into(),
            ev_index: ev_index.into(),
            rsvd: 0.into(),
            probe_id: probe_id.into(),
            timeout_us: timeout_us.max(1).into(),
        })
    }
    /// Creates an NSCC profile.
    ///
    /// # Errors
    /// Out-of-range parameters, device errors.
    pub fn create_cc_profile(&self, p: &NsccParams) -> Result<u32> {
        self.dev.create_cc_profile(p.body(0)?)
    }
    /// Modifies an NSCC profile.
    ///
    /// # Errors
    /// Out-of-range parameters, device errors.
    pub fn modify_cc_profile(&self, id: u32, p: &NsccParams) -> Result<()> {
        self.dev.modify_cc_profile(p.body(id)?)
    }
    /// Destroys a CC profile.
    ///
    /// # Errors
    /// Device errors (in use).
    pub fn destroy_cc_profile(&self, id: u32) -> Result<()> {
        self.dev.destroy_cc_profile(id)
    }
    /// The next event (EV state changes, probe results, ports, ...).
    ///
    /// # Errors
    /// Device errors.
    pub fn poll_event(&self) -> Result<Option<AsyncEvent>> {
        self.dev.poll_event()
    }
}

/// An EXPLICIT SRv6 profile filled with the carriers of a plan: creates it, replaces every EV
/// and puts it online. Returns its id.
///
/// # Errors
/// Device errors.
pub fn install_plan(
    ctl: &Controller,
    format_profile: u32,
    evs: &[plan::PlannedEv],
    min_active_evs: u16,
) -> Result<u32> {
    let spec = EvProfileSpec {
        format_profile,
        kind: EvProfileKind::Explicit,
        num_evs: evs.len() as u16,
        min_active_evs,
        event_mask: EVENT_MASK_ALL,
        seed: 0,
    };
    let id = ctl.create_ev_profile(&spec)?;
    for (i, ev) in evs.iter().enumerate() {
        ctl.replace_ev_carrier(id, i as u16, ev.carrier)?;
    }
    ctl.set_ev_profile_state(id, &spec, EvProfileState::Online)?;
    Ok(id)
}
