//! The QP state machine and the OCP attribute rules.
//!
//! States: `Reset -> Init -> Rtr -> Rts`, any state `-> Error`, any state `-> Reset`. A
//! transition is asked for with a target state and a [`QpAttrs`] whose optional fields play the
//! role of the verbs attribute mask. Each forward step needs its attributes:
//!
//! | step | required | checks |
//! |---|---|---|
//! | `Reset -> Init` | `hint`, `ev_profile`, `cc_profile` | EV table config valid for the table capacity; NSCC parameters valid |
//! | `Init -> Rtr` | `dest_qpn`, `rq_psn`, `responder_mpr`, `responder_max_wimm` (`dynamic_mpr` optional) | `1 <= mpr`, `mpr * 128 <=` the receive window; `1 <= max_wimm <=` the receive queue |
//! | `Rtr -> Rts` | `sq_psn`, `requester_mpr`, `requester_max_wimm`, `retry_cnt`, `timeout` | as above against the send window; `retry_cnt <= 25`; `timeout <= 24` |
//!
//! A missing attribute is [`QpError::MissingAttr`], a bad one names itself; a transition not in
//! the table is [`QpError::BadTransition`]. Nothing here panics.

use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;

use crate::engine::cc::{Cc, FixedWindow, Nscc, NsccParamError, NsccParams};
use crate::engine::ev_state::{EvConfig, EvError};
use crate::engine::retry::{RetryError, RetryState};

/// PSNs per MPR unit.
pub const MPR_UNIT_PSNS: u32 = 128;

/// QP states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QpState {
    /// Freshly created or reset: no traffic.
    Reset,
    /// Profiles bound; no traffic yet.
    Init,
    /// Ready to receive (responder side live).
    Rtr,
    /// Ready to send (both sides live).
    Rts,
    /// Failed: receives are NACKed, work requests flushed with errors.
    Error,
}

/// An attribute name, for [`QpError::MissingAttr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Attr {
    /// QP hint.
    Hint,
    /// EV profile.
    EvProfile,
    /// CC profile.
    CcProfile,
    /// Remote QP number.
    DestQpn,
    /// First expected receive PSN.
    RqPsn,
    /// Responder MPR.
    ResponderMpr,
    /// Responder max in-flight Write-with-Immediate.
    ResponderMaxWimm,
    /// First send PSN.
    SqPsn,
    /// Requester MPR.
    RequesterMpr,
    /// Requester max in-flight Write-with-Immediate.
    RequesterMaxWimm,
    /// Retry count.
    RetryCnt,
    /// ACK timeout exponent.
    Timeout,
}

/// Why a QP operation was refused. The QP is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QpError {
    /// No QP with this number.
    UnknownQp { qpn: u32 },
    /// Every QP slot is in use.
    TableFull,
    /// The transition is not allowed.
    BadTransition { from: QpState, to: QpState },
    /// A required attribute is missing.
    MissingAttr(Attr),
    /// An MPR of 0.
    MprZero,
    /// `mpr * 128` exceeds the window the engine was built with.
    MprTooLarge { mpr: u16, max: u16 },
    /// A max in-flight Write-with-Immediate of 0 or above the queue capacity.
    MaxWimm { max_wimm: u16, capacity: u16 },
    /// The retry count or timeout exponent.
    Retry(RetryError),
    /// The EV profile.
    Ev(EvError),
    /// The CC profile.
    Cc(NsccParamError),
    /// A fixed CC window of 0 bytes.
    ZeroWindow,
    /// The operation needs another state (e.g. `post_send` before RTS).
    WrongState { state: QpState },
    /// A bounded queue is full.
    QueueFull,
    /// A work request the segmenter cannot carry (address wraps, too many packets).
    BadWorkRequest,
}

/// The QP hint (OCP: traffic class and the application's priority).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QpHint {
    /// DSCP / traffic class the QP's packets use.
    pub traffic_class: u8,
    /// Scheduling priority among QPs (informational).
    pub priority: u8,
}

/// The EV profile a QP sprays with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EvProfile {
    /// EV table configuration (count, planes, guard, probes, gray-loss test).
    pub table: EvConfig,
    /// How the EV is carried on the wire.
    pub format: EvFormat,
    /// EV value of EV index 0; index `i` uses `value_base + i`.
    pub value_base: u32,
}

impl EvProfile {
    /// `table`'s EVs carried in the UDP source port: EV index `i` is port `0xC000 + i` (the
    /// start of the dynamic port range).
    pub const fn udp(table: EvConfig) -> EvProfile {
        EvProfile {
            table,
            format: EvFormat::Udp,
            value_base: 0xC000,
        }
    }
}

/// The CC profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CcProfile {
    /// NSCC with these parameters.
    Nscc(NsccParams),
    /// A constant window.
    Fixed {
        /// Window in bytes.
        cwnd_bytes: u64,
    },
}

impl CcProfile {
    /// The controller, validated.
    ///
    /// # Errors
    /// [`QpError::Cc`] or [`QpError::ZeroWindow`].
    pub fn build(self) -> Result<Cc, QpError> {
        match self {
            CcProfile::Nscc(p) => Nscc::try_new(p).map(Cc::Nscc).map_err(QpError::Cc),
            CcProfile::Fixed { cwnd_bytes: 0 } => Err(QpError::ZeroWindow),
            CcProfile::Fixed { cwnd_bytes } => Ok(Cc::Fixed(FixedWindow { cwnd_bytes })),
        }
    }
}

/// Attributes of a `modify_qp` call; `None` = not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QpAttrs {
    pub hint: Option<QpHint>,
    pub ev_profile: Option<EvProfile>,
    pub cc_profile: Option<CcProfile>,
    pub dest_qpn: Option<u32>,
    pub rq_psn: Option<Psn>,
    /// Responder MPR in units of 128 PSNs.
    pub responder_mpr: Option<u16>,
    /// OCP "dynamic MPR": the responder may change its MPR while the QP runs.
    ///
    /// Accepted, validated and stored ([`RtrParams::dynamic_mpr`]) but **not acted on**: a
    /// responder can only shrink or grow the requester's window if it can tell the requester,
    /// and the MRC ACK of `mrc_abi::wire` (`AckRepr`: cumulative PSN, SACK base and bitmap, EV,
    /// plane, ECN plane mask, CE and packet counts) has no field that advertises a window.
    /// Shrinking silently would turn every PSN beyond the new edge into an `OUT_OF_WINDOW`
    /// NACK and a retransmission; growing silently gains nothing, since the requester keeps
    /// its own `requester_mpr`. With an advertised-MPR field in the ACK (an ABI change) the
    /// engine would: responder computes `mpr` in `[1, responder_mpr]` from its free receive
    /// resources and puts it in every ACK; requester takes `min(requester_mpr, advertised)`
    /// as its window from the next new PSN on (PSNs already sent stay valid).
    pub dynamic_mpr: Option<bool>,
    pub responder_max_wimm: Option<u16>,
    pub sq_psn: Option<Psn>,
    /// Requester MPR in units of 128 PSNs.
    pub requester_mpr: Option<u16>,
    pub requester_max_wimm: Option<u16>,
    /// 0..=7 linear, 8..=24 exponential, 25 forever.
    pub retry_cnt: Option<u8>,
    /// ACK timeout exponent `t`: `1.024 us * 2^t`, `t <= 24`.
    pub timeout: Option<u8>,
}

impl QpAttrs {
    /// Every attribute INIT, RTR and RTS need for a QP connected to `dest_qpn`, one set for
    /// all three transitions: the QP hint's defaults, `ev_profile` and `cc_profile`, both
    /// directions starting at PSN 0 with an MPR of 4 x 128 PSNs and 8 Write-with-Immediate in
    /// flight, dynamic MPR off, 7 linear retries (OCP's largest linear count) and an ACK
    /// timeout of 1.024 us x 2^14 (~16.8 ms). Change them with [`Self::psns`],
    /// [`Self::window`] and [`Self::retry`].
    pub fn connect(ev_profile: EvProfile, cc_profile: CcProfile, dest_qpn: u32) -> Self {
        QpAttrs {
            hint: Some(QpHint::default()),
            ev_profile: Some(ev_profile),
            cc_profile: Some(cc_profile),
            dest_qpn: Some(dest_qpn),
            rq_psn: Some(Psn::new(0)),
            responder_mpr: Some(4),
            dynamic_mpr: Some(false),
            responder_max_wimm: Some(8),
            sq_psn: Some(Psn::new(0)),
            requester_mpr: Some(4),
            requester_max_wimm: Some(8),
            retry_cnt: Some(7),
            timeout: Some(14),
        }
    }

    /// The first PSN this QP sends (`sq`) and expects to receive (`rq`).
    pub fn psns(self, sq: Psn, rq: Psn) -> Self {
        QpAttrs {
            sq_psn: Some(sq),
            rq_psn: Some(rq),
            ..self
        }
    }

    /// The PSN window (MPR, in units of 128 PSNs) and the Write-with-Immediate in flight, the
    /// same for both directions.
    pub fn window(self, mpr: u16, max_wimm: u16) -> Self {
        QpAttrs {
            responder_mpr: Some(mpr),
            requester_mpr: Some(mpr),
            responder_max_wimm: Some(max_wimm),
            requester_max_wimm: Some(max_wimm),
            ..self
        }
    }

    /// The retry count (0..=7 linear, 8..=24 exponential, 25 forever) and the ACK timeout
    /// exponent `t` (`1.024 us * 2^t`).
    pub fn retry(self, retry_cnt: u8, timeout: u8) -> Self {
        QpAttrs {
            retry_cnt: Some(retry_cnt),
            timeout: Some(timeout),
            ..self
        }
    }
}

/// Validated INIT attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitParams {
    pub hint: QpHint,
    pub ev_profile: EvProfile,
    pub cc_profile: CcProfile,
}

/// Validated RTR attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtrParams {
    pub dest_qpn: u32,
    pub rq_psn: Psn,
    pub mpr_psns: u32,
    pub dynamic_mpr: bool,
    pub max_wimm: u16,
}

/// Validated RTS attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsParams {
    pub sq_psn: Psn,
    pub mpr_psns: u32,
    pub max_wimm: u16,
    pub retry: RetryState,
}

fn need<T>(v: Option<T>, a: Attr) -> Result<T, QpError> {
    v.ok_or(QpError::MissingAttr(a))
}

fn check_mpr(mpr: u16, window_psns: usize) -> Result<u32, QpError> {
    if mpr == 0 {
        return Err(QpError::MprZero);
    }
    let max = (window_psns as u32 / MPR_UNIT_PSNS).min(u32::from(u16::MAX)) as u16;
    if mpr > max {
        return Err(QpError::MprTooLarge { mpr, max });
    }
    Ok(u32::from(mpr) * MPR_UNIT_PSNS)
}

fn check_wimm(max_wimm: u16, capacity: usize) -> Result<u16, QpError> {
    let capacity = capacity.min(usize::from(u16::MAX)) as u16;
    if max_wimm == 0 || max_wimm > capacity {
        return Err(QpError::MaxWimm { max_wimm, capacity });
    }
    Ok(max_wimm)
}

impl QpAttrs {
    /// The INIT attributes, validated against an EV table of `ev_capacity` entries.
    ///
    /// # Errors
    /// [`QpError::MissingAttr`], [`QpError::Ev`], [`QpError::Cc`], [`QpError::ZeroWindow`].
    pub fn init_params(&self, ev_capacity: usize) -> Result<InitParams, QpError> {
        let hint = need(self.hint, Attr::Hint)?;
        let ev_profile = need(self.ev_profile, Attr::EvProfile)?;
        let cc_profile = need(self.cc_profile, Attr::CcProfile)?;
        let t = ev_profile.table;
        if usize::from(t.evs) > ev_capacity {
            return Err(QpError::Ev(EvError::TooManyEvs {
                evs: t.evs,
                capacity: ev_capacity.min(usize::from(u16::MAX)) as u16,
            }));
        }
        if t.evs == 0 {
            return Err(QpError::Ev(EvError::TooManyEvs {
                evs: 0,
                capacity: ev_capacity.min(usize::from(u16::MAX)) as u16,
            }));
        }
        cc_profile.build()?;
        Ok(InitParams {
            hint,
            ev_profile,
            cc_profile,
        })
    }

    /// The RTR attributes, validated against a receive window of `window_psns` and a receive
    /// queue of `rq_capacity`.
    ///
    /// # Errors
    /// [`QpError::MissingAttr`], [`QpError::MprZero`], [`QpError::MprTooLarge`],
    /// [`QpError::MaxWimm`].
    pub fn rtr_params(&self, window_psns: usize, rq_capacity: usize) -> Result<RtrParams, QpError> {
        let dest_qpn = need(self.dest_qpn, Attr::DestQpn)?;
        let rq_psn = need(self.rq_psn, Attr::RqPsn)?;
        let mpr = need(self.responder_mpr, Attr::ResponderMpr)?;
        let wimm = need(self.responder_max_wimm, Attr::ResponderMaxWimm)?;
        Ok(RtrParams {
            dest_qpn,
            rq_psn,
            mpr_psns: check_mpr(mpr, window_psns)?,
            dynamic_mpr: self.dynamic_mpr.unwrap_or(false),
            max_wimm: check_wimm(wimm, rq_capacity)?,
        })
    }

    /// The RTS attributes, validated against a send window of `window_psns` and a send queue
    /// of `sq_capacity`.
    ///
    /// # Errors
    /// [`QpError::MissingAttr`], [`QpError::MprZero`], [`QpError::MprTooLarge`],
    /// [`QpError::MaxWimm`], [`QpError::Retry`].
    pub fn rts_params(&self, window_psns: usize, sq_capacity: usize) -> Result<RtsParams, QpError> {
        let sq_psn = need(self.sq_psn, Attr::SqPsn)?;
        let mpr = need(self.requester_mpr, Attr::RequesterMpr)?;
        let wimm = need(self.requester_max_wimm, Attr::RequesterMaxWimm)?;
        let retry_cnt = need(self.retry_cnt, Attr::RetryCnt)?;
        let timeout = need(self.timeout, Attr::Timeout)?;
        Ok(RtsParams {
            sq_psn,
            mpr_psns: check_mpr(mpr, window_psns)?,
            max_wimm: check_wimm(wimm, sq_capacity)?,
            retry: RetryState::from_attributes(timeout, retry_cnt).map_err(QpError::Retry)?,
        })
    }
}

/// Whether `from -> to` is a transition of the table (attributes aside).
pub const fn transition_allowed(from: QpState, to: QpState) -> bool {
    matches!(
        (from, to),
        (_, QpState::Reset)
            | (_, QpState::Error)
            | (QpState::Reset, QpState::Init)
            | (QpState::Init, QpState::Init)
            | (QpState::Init, QpState::Rtr)
            | (QpState::Rtr, QpState::Rts)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev() -> EvProfile {
        EvProfile::udp(EvConfig::new(16, 2))
    }

    #[test]
    fn connect_gives_every_transition_its_attributes() {
        let cc = CcProfile::Fixed { cwnd_bytes: 4096 };
        let a = QpAttrs::connect(ev(), cc, 9);
        let init = a.init_params(16).unwrap();
        assert_eq!((init.ev_profile, init.cc_profile), (ev(), cc));
        let rtr = a.rtr_params(512, 8).unwrap();
        assert_eq!(
            (
                rtr.dest_qpn,
                rtr.rq_psn,
                rtr.mpr_psns,
                rtr.max_wimm,
                rtr.dynamic_mpr
            ),
            (9, Psn::new(0), 512, 8, false)
        );
        let rts = a.rts_params(512, 8).unwrap();
        assert_eq!((rts.sq_psn, rts.mpr_psns), (Psn::new(0), 512));
        // The builders change their fields and nothing else.
        let b = a.psns(Psn::new(5), Psn::new(7)).window(2, 3).retry(25, 6);
        let rtr = b.rtr_params(512, 8).unwrap();
        let rts = b.rts_params(512, 8).unwrap();
        assert_eq!(
            (rtr.rq_psn, rtr.mpr_psns, rtr.max_wimm),
            (Psn::new(7), 256, 3)
        );
        assert_eq!(
            (rts.sq_psn, rts.mpr_psns, rts.max_wimm),
            (Psn::new(5), 256, 3)
        );
        assert_eq!((b.retry_cnt, b.timeout), (Some(25), Some(6)));
        assert_eq!(
            (b.hint, b.ev_profile, b.cc_profile),
            (a.hint, a.ev_profile, a.cc_profile)
        );
    }

    #[test]
    fn transitions() {
        use QpState::*;
        assert!(transition_allowed(Reset, Init));
        assert!(transition_allowed(Rts, Error));
        assert!(transition_allowed(Error, Reset));
        assert!(!transition_allowed(Reset, Rtr));
        assert!(!transition_allowed(Init, Rts));
        assert!(!transition_allowed(Error, Rts));
        assert!(!transition_allowed(Rts, Rtr));
    }

    #[test]
    fn init_needs_all_three() {
        let mut a = QpAttrs::default();
        assert_eq!(a.init_params(16), Err(QpError::MissingAttr(Attr::Hint)));
        a.hint = Some(QpHint::default());
        assert_eq!(
            a.init_params(16),
            Err(QpError::MissingAttr(Attr::EvProfile))
        );
        a.ev_profile = Some(ev());
        assert_eq!(
            a.init_params(16),
            Err(QpError::MissingAttr(Attr::CcProfile))
        );
        a.cc_profile = Some(CcProfile::Fixed { cwnd_bytes: 0 });
        assert_eq!(a.init_params(16), Err(QpError::ZeroWindow));
        a.cc_profile = Some(CcProfile::Fixed {
            cwnd_bytes: 1 << 20,
        });
        assert!(a.init_params(16).is_ok());
        assert!(matches!(
            a.init_params(8),
            Err(QpError::Ev(EvError::TooManyEvs { evs: 16, .. }))
        ));
    }

    #[test]
    fn rtr_and_rts_rules() {
        let mut a = QpAttrs {
            dest_qpn: Some(3),
            rq_psn: Some(Psn::new(0)),
            responder_mpr: Some(0),
            responder_max_wimm: Some(4),
            ..QpAttrs::default()
        };
        assert_eq!(a.rtr_params(512, 8), Err(QpError::MprZero));
        a.responder_mpr = Some(5);
        assert_eq!(
            a.rtr_params(512, 8),
            Err(QpError::MprTooLarge { mpr: 5, max: 4 })
        );
        a.responder_mpr = Some(4);
        assert_eq!(a.rtr_params(512, 8).map(|p| p.mpr_psns), Ok(512));
        a.responder_max_wimm = Some(9);
        assert_eq!(
            a.rtr_params(512, 8),
            Err(QpError::MaxWimm {
                max_wimm: 9,
                capacity: 8
            })
        );
        let mut r = QpAttrs {
            sq_psn: Some(Psn::new(7)),
            requester_mpr: Some(1),
            requester_max_wimm: Some(2),
            retry_cnt: Some(26),
            timeout: Some(10),
            ..QpAttrs::default()
        };
        assert_eq!(
            r.rts_params(512, 8),
            Err(QpError::Retry(RetryError::RetryCountTooLarge { count: 26 }))
        );
        r.retry_cnt = Some(25);
        r.timeout = Some(25);
        assert_eq!(
            r.rts_params(512, 8),
            Err(QpError::Retry(RetryError::TimeoutExponentTooLarge {
                exponent: 25
            }))
        );
        r.timeout = Some(24);
        assert!(r.rts_params(512, 8).is_ok());
        r.retry_cnt = None;
        assert_eq!(
            r.rts_params(512, 8),
            Err(QpError::MissingAttr(Attr::RetryCnt))
        );
    }
}
