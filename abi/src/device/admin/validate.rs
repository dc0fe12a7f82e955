//! Body decoding and attribute validation of admin commands.

use core::mem::{offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::*;

/// Offset of the body in the command.
const BODY: usize = 8;

macro_rules! bad {
    ($t:ty, $f:ident) => {
        AdminError::BadAttribute((BODY + offset_of!($t, $f)) as u8)
    };
}
macro_rules! rsv {
    ($t:ty, $f:ident) => {
        AdminError::ReservedSet((BODY + offset_of!($t, $f)) as u8)
    };
}
macro_rules! ensure {
    ($cond:expr, $err:expr) => {
        if !$cond {
            return Err($err);
        }
    };
}

/// The body struct at the start of `body`; every byte after it must be 0.
fn take<T: FromBytes + IntoBytes + KnownLayout + Immutable>(
    body: &[u8; BODY_BYTES],
) -> Result<T, AdminError> {
    zero_from(body, size_of::<T>())?;
    T::read_from_prefix(body)
        .map(|(t, _)| t)
        .map_err(|_| AdminError::Truncated)
}

/// Every body byte from `n` on is 0 (one copy of the loop for every body type: the decoder
/// runs on the NIC core too, where code is counted in bytes).
#[inline(never)]
fn zero_from(body: &[u8; BODY_BYTES], n: usize) -> Result<(), AdminError> {
    match body.get(n..).and_then(|t| t.iter().position(|b| *b != 0)) {
        Some(i) => Err(AdminError::ReservedSet((BODY + n + i) as u8)),
        None => Ok(()),
    }
}

fn empty(body: &[u8; BODY_BYTES]) -> Result<(), AdminError> {
    zero_from(body, 0)
}

fn psn_ok(v: u32) -> bool {
    v < QPN_LIMIT
}

pub(super) fn decode_body(op: Opcode, body: &[u8; BODY_BYTES]) -> Result<AdminCommand, AdminError> {
    use AdminCommand as C;
    Ok(match op {
        Opcode::QueryDevice => empty(body).map(|_| C::QueryDevice)?,
        Opcode::QueryLimits => empty(body).map(|_| C::QueryLimits)?,
        Opcode::AllocPd => empty(body).map(|_| C::AllocPd)?,
        Opcode::FwStatus => empty(body).map(|_| C::FwStatus)?,
        Opcode::FwConfirm => empty(body).map(|_| C::FwConfirm)?,
        Opcode::FwRollback => empty(body).map(|_| C::FwRollback)?,
        Opcode::DeallocPd => C::DeallocPd(take(body)?),
        Opcode::DeregMr => C::DeregMr(take(body)?),
        Opcode::DestroyCq => C::DestroyCq(take(body)?),
        Opcode::QueryQp => C::QueryQp(qpn_id(take(body)?)?),
        Opcode::DestroyQp => C::DestroyQp(qpn_id(take(body)?)?),
        Opcode::QueryPort => {
            let b: ObjectId = take(body)?;
            ensure!(b.id.get() < 256, bad!(ObjectId, id));
            C::QueryPort(b)
        }
        Opcode::DestroyEvFormatProfile => C::DestroyEvFormatProfile(take(body)?),
        Opcode::DestroyEvProfile => C::DestroyEvProfile(take(body)?),
        Opcode::DestroyCcProfile => C::DestroyCcProfile(take(body)?),
        Opcode::FwCommit => C::FwCommit(take(body)?),
        Opcode::RegMr => {
            let b: RegMr = take(body)?;
            ensure!(b.access.get() & !ACCESS_ALL == 0, rsv!(RegMr, access));
            ensure!(b.length.get() > 0, bad!(RegMr, length));
            ensure!(
                b.va.get().checked_add(b.length.get()).is_some(),
                bad!(RegMr, length)
            );
            ensure!(
                b.iova.get().checked_add(b.length.get()).is_some(),
                bad!(RegMr, length)
            );
            C::RegMr(b)
        }
        Opcode::CreateCq => {
            let b: CreateCq = take(body)?;
            ensure!(
                (1..=24).contains(&b.log2_entries),
                bad!(CreateCq, log2_entries)
            );
            ensure!(b.rsvd == 0, rsv!(CreateCq, rsvd));
            ensure!(b.rsvd2.get() == 0, rsv!(CreateCq, rsvd2));
            ensure!(b.base.get().is_multiple_of(32), bad!(CreateCq, base));
            C::CreateCq(b)
        }
        Opcode::CreateQp => {
            let b: CreateQp = take(body)?;
            ensure!((1..=16).contains(&b.sq_log2), bad!(CreateQp, sq_log2));
            ensure!((1..=16).contains(&b.rq_log2), bad!(CreateQp, rq_log2));
            ensure!(b.rsvd.get() == 0, rsv!(CreateQp, rsvd));
            ensure!(b.sq_base.get().is_multiple_of(64), bad!(CreateQp, sq_base));
            ensure!(b.rq_base.get().is_multiple_of(32), bad!(CreateQp, rq_base));
            C::CreateQp(b)
        }
        Opcode::ModifyQp => C::ModifyQp(modify_qp(body)?),
        Opcode::SetPortAdminState => {
            let b: PortAdmin = take(body)?;
            ensure!(b.up <= 1, bad!(PortAdmin, up));
            ensure!(b.rsvd.get() == 0, rsv!(PortAdmin, rsvd));
            C::SetPortAdminState(b)
        }
        Opcode::CreateEvFormatProfile | Opcode::ModifyEvFormatProfile => {
            let b = ev_format(take(body)?, op == Opcode::CreateEvFormatProfile)?;
            if op == Opcode::CreateEvFormatProfile {
                C::CreateEvFormatProfile(b)
            } else {
                C::ModifyEvFormatProfile(b)
            }
        }
        Opcode::CreateEvProfile | Opcode::ModifyEvProfile => {
            let b = ev_profile(take(body)?, op == Opcode::CreateEvProfile)?;
            if op == Opcode::CreateEvProfile {
                C::CreateEvProfile(b)
            } else {
                C::ModifyEvProfile(b)
            }
        }
        Opcode::DenyEv | Opcode::QueryEv => {
            let b: EvRef = take(body)?;
            ensure!(
                b.ev_index.get() < MAX_EVS_PER_PROFILE,
                bad!(EvRef, ev_index)
            );
            ensure!(b.rsvd == 0, rsv!(EvRef, rsvd));
            if op == Opcode::DenyEv {
                ensure!(b.deny <= 1, bad!(EvRef, deny));
                C::DenyEv(b)
            } else {
                ensure!(b.deny == 0, rsv!(EvRef, deny));
                C::QueryEv(b)
            }
        }
        Opcode::ReplaceEv => {
            let b: ReplaceEv = take(body)?;
            ensure!(
                b.ev_index.get() < MAX_EVS_PER_PROFILE,
                bad!(ReplaceEv, ev_index)
            );
            ensure!(b.rsvd.get() == 0, rsv!(ReplaceEv, rsvd));
            // Exactly one of value (UDP/STEV) and carrier (SRv6) is used.
            ensure!(
                b.value.get() == 0 || all_zero(&b.carrier),
                bad!(ReplaceEv, carrier)
            );
            C::ReplaceEv(b)
        }
        Opcode::ProbeEv => {
            let b: ProbeEv = take(body)?;
            ensure!(psn_ok(b.qpn.get()), bad!(ProbeEv, qpn));
            ensure!(b.rsvd.get() == 0, rsv!(ProbeEv, rsvd));
            ensure!(b.timeout_us.get() > 0, bad!(ProbeEv, timeout_us));
            C::ProbeEv(b)
        }
        Opcode::CreateCcProfile | Opcode::ModifyCcProfile => {
            let b: CcProfile = take(body)?;
            if op == Opcode::CreateCcProfile {
                ensure!(b.id.get() == 0, rsv!(CcProfile, id));
            }
            let one = 1 << 16;
            ensure!(
                (1..=one).contains(&b.gamma_q16.get()),
                bad!(CcProfile, gamma_q16)
            );
            ensure!(
                (1..=one).contains(&b.max_md_jump_q16.get()),
                bad!(CcProfile, max_md_jump_q16)
            );
            ensure!(
                b.target_qdelay_ns.get() > 0,
                bad!(CcProfile, target_qdelay_ns)
            );
            ensure!(b.base_rtt_ns.get() > 0, bad!(CcProfile, base_rtt_ns));
            if op == Opcode::CreateCcProfile {
                C::CreateCcProfile(b)
            } else {
                C::ModifyCcProfile(b)
            }
        }
        Opcode::FwBegin => {
            let b: FwBegin = take(body)?;
            ensure!(b.magic.get() == FW_IMAGE_MAGIC, bad!(FwBegin, magic));
            ensure!(b.size.get() > 0, bad!(FwBegin, size));
            C::FwBegin(b)
        }
        Opcode::FwChunk => {
            let b: FwChunk = take(body)?;
            ensure!((1..=65536).contains(&b.len.get()), bad!(FwChunk, len));
            ensure!(
                b.offset.get().checked_add(b.len.get()).is_some(),
                bad!(FwChunk, offset)
            );
            C::FwChunk(b)
        }
    })
}

fn qpn_id(b: ObjectId) -> Result<ObjectId, AdminError> {
    ensure!(psn_ok(b.id.get()), bad!(ObjectId, id));
    Ok(b)
}

fn modify_qp(body: &[u8; BODY_BYTES]) -> Result<QpModify, AdminError> {
    // Every MODIFY_QP body starts with qpn (u32) and to_state (u8).
    let to = QpState::from_code(body[4]).ok_or(AdminError::BadAttribute((BODY + 4) as u8))?;
    let qpn = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
    ensure!(psn_ok(qpn), AdminError::BadAttribute(BODY as u8));
    Ok(match to {
        QpState::Init => {
            let b: QpInit = take(body)?;
            ensure!(b.dscp < 64, bad!(QpInit, dscp));
            ensure!(
                b.hint_flags.get() & !(HINT_LATENCY | HINT_BULK) == 0,
                rsv!(QpInit, hint_flags)
            );
            QpModify::Init(b)
        }
        QpState::Rtr => {
            let b: QpRtr = take(body)?;
            ensure!(b.flags & !RTR_DYNAMIC_MPR == 0, rsv!(QpRtr, flags));
            ensure!(b.responder_mpr.get() >= 1, bad!(QpRtr, responder_mpr));
            ensure!(psn_ok(b.dest_qpn.get()), bad!(QpRtr, dest_qpn));
            ensure!(b.max_wimm.get() >= 1, bad!(QpRtr, max_wimm));
            ensure!(b.rsvd.get() == 0, rsv!(QpRtr, rsvd));
            ensure!(psn_ok(b.rq_psn.get()), bad!(QpRtr, rq_psn));
            QpModify::Rtr(b)
        }
        QpState::Rts => {
            let b: QpRts = take(body)?;
            ensure!(b.retry_count <= RETRY_FOREVER, bad!(QpRts, retry_count));
            ensure!(b.requester_mpr.get() >= 1, bad!(QpRts, requester_mpr));
            ensure!(b.max_wimm.get() >= 1, bad!(QpRts, max_wimm));
            ensure!(
                b.ack_timeout_exp <= MAX_ACK_TIMEOUT_EXP,
                bad!(QpRts, ack_timeout_exp)
            );
            ensure!(b.rsvd == 0, rsv!(QpRts, rsvd));
            ensure!(psn_ok(b.sq_psn.get()), bad!(QpRts, sq_psn));
            QpModify::Rts(b)
        }
        QpState::Reset | QpState::Error => {
            let b: QpReset = take(body)?;
            ensure!(b.rsvd == [0; 3], rsv!(QpReset, rsvd));
            QpModify::Reset(b)
        }
    })
}

fn ev_format(b: EvFormatProfile, create: bool) -> Result<EvFormatProfile, AdminError> {
    if create {
        ensure!(b.id.get() == 0, rsv!(EvFormatProfile, id));
    }
    ensure!(
        EvFormat::from_code(b.encoding).ok().is_some(),
        bad!(EvFormatProfile, encoding)
    );
    ensure!(
        b.flags & !(FMT_USE_SRH | FMT_TSX) == 0,
        rsv!(EvFormatProfile, flags)
    );
    ensure!(b.dscp < 64, bad!(EvFormatProfile, dscp));
    ensure!(b.hop_limit > 0, bad!(EvFormatProfile, hop_limit));
    ensure!(
        b.src_port_min.get() <= b.src_port_max.get(),
        bad!(EvFormatProfile, src_port_max)
    );
    Ok(b)
}

fn ev_profile(b: EvProfile, create: bool) -> Result<EvProfile, AdminError> {
    if create {
        ensure!(b.id.get() == 0, rsv!(EvProfile, id));
        ensure!(
            b.state == EvProfileState::Init as u8,
            bad!(EvProfile, state)
        );
    }
    ensure!(
        EvProfileKind::from_code(b.kind).is_some(),
        bad!(EvProfile, kind)
    );
    ensure!(
        EvProfileState::from_code(b.state).is_some(),
        bad!(EvProfile, state)
    );
    let n = b.num_evs.get();
    ensure!(
        (1..=MAX_EVS_PER_PROFILE).contains(&n),
        bad!(EvProfile, num_evs)
    );
    ensure!(
        (1..=n).contains(&b.min_active_evs.get()),
        bad!(EvProfile, min_active_evs)
    );
    ensure!(b.rsvd.get() == 0, rsv!(EvProfile, rsvd));
    ensure!(
        b.event_mask.get() & !EVENT_MASK_ALL == 0,
        rsv!(EvProfile, event_mask)
    );
    Ok(b)
}
