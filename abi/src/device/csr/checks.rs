//! The checks [`CsrEvent::decode`](super::CsrEvent::decode) makes on each entry kind, one
//! [`CsrEntryKind`] implementation per kind: every field in range, reserved bytes 0.

use zerocopy::IntoBytes;

use super::entries::*;
use super::{check24, ev_state, nack_reason, zero, CsrEntryKind, CsrError, CsrKind};

impl CsrEntryKind for AckSummary {
    const KIND: CsrKind = CsrKind::AckSummary;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        zero(&[e.flags & !ACK_FLAGS])?;
        check24(e.qpn, 4)?;
        check24(e.una, 8)?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for LossEntry {
    const KIND: CsrKind = CsrKind::Loss;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        check24(e.psn, 8)?;
        if e.cause != LOSS_REORDER {
            return Err(CsrError::BadValue(16));
        }
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for NackEntry {
    const KIND: CsrKind = CsrKind::Nack;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        nack_reason(e.reason, 1)?;
        check24(e.qpn, 4)?;
        check24(e.psn, 8)?;
        zero(&[e.flags & !NACK_IN_FLIGHT])?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for TxStart {
    const KIND: CsrKind = CsrKind::TxStart;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        check24(e.psn, 8)?;
        zero(&e.rsvd)?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for TxDone {
    const KIND: CsrKind = CsrKind::TxDone;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        zero(&[e.flags & !(TXD_SIGNALED | TXD_IMM)])?;
        check24(e.qpn, 4)?;
        check24(e.end_psn, 8)?;
        zero(e.rsvd.as_bytes())?;
        zero(e.rsvd2.as_bytes())?;
        zero(&e.rsvd3)?;
        Ok(())
    }
}

impl CsrEntryKind for WimmPlaced {
    const KIND: CsrKind = CsrKind::WimmPlaced;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        check24(e.last_psn, 8)?;
        zero(&[e.flags & !1])?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for ProbeReply {
    const KIND: CsrKind = CsrKind::ProbeReply;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for PortEventEntry {
    const KIND: CsrKind = CsrKind::PortEvent;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        if e.up > 1 {
            return Err(CsrError::BadValue(2));
        }
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for RxDrops {
    const KIND: CsrKind = CsrKind::RxDrops;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for RxFatal {
    const KIND: CsrKind = CsrKind::RxFatal;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        let r = nack_reason(e.reason, 1)?;
        if !r.is_fatal() {
            return Err(CsrError::BadValue(1));
        }
        check24(e.qpn, 4)?;
        check24(e.psn, 8)?;
        zero(e.rsvd.as_bytes())?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for Flushed {
    const KIND: CsrKind = CsrKind::Flushed;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        zero(&[e.flags & !(FLUSH_SIGNALED | FLUSH_RECV)])?;
        check24(e.qpn, 4)?;
        zero(e.rsvd.as_bytes())?;
        zero(&e.rsvd2)?;
        zero(&e.rsvd3)?;
        Ok(())
    }
}

impl CsrEntryKind for EvDeliveries {
    const KIND: CsrKind = CsrKind::EvDeliveries;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        zero(&[e.rsvd])?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for SkipServed {
    const KIND: CsrKind = CsrKind::SkipServed;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        zero(&[e.rsvd])?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for Retransmit {
    const KIND: CsrKind = CsrKind::Retransmit;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        zero(&[e.flags & !RETX_AVOID_LAST])?;
        check24(e.qpn, 4)?;
        check24(e.psn, 8)?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for EvUpdate {
    const KIND: CsrKind = CsrKind::EvUpdate;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        ev_state(e.state, 1)?;
        check24(e.qpn, 4)?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for PlaneWeight {
    const KIND: CsrKind = CsrKind::PlaneWeight;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        if !(1..=15).contains(&e.weight) {
            return Err(CsrError::BadValue(2));
        }
        check24(e.qpn, 4)?;
        zero(&[e.rsvd])?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for SendProbe {
    const KIND: CsrKind = CsrKind::SendProbe;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for WindowUpdate {
    const KIND: CsrKind = CsrKind::WindowUpdate;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        zero(&e.rsvd)?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for PostCqe {
    const KIND: CsrKind = CsrKind::PostCqe;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        crate::device::cqe::CqeStatus::from_u8(e.status).ok_or(CsrError::BadValue(1))?;
        let op = crate::device::cqe::CqeOpcode::from_u8(e.opcode).ok_or(CsrError::BadValue(2))?;
        check24(e.qpn, 8)?;
        if op != crate::device::cqe::CqeOpcode::RecvWriteImm && e.imm.get() != 0 {
            return Err(CsrError::ReservedSet);
        }
        zero(&[e.flags & !crate::device::cqe::CQE_SOLICITED])?;
        zero(e.rsvd.as_bytes())?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for PostEvent {
    const KIND: CsrKind = CsrKind::PostEvent;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        zero(&e.rsvd)?;
        zero(&e.rsvd2)?;
        crate::device::event::Event::from_words(
            e.event_kind,
            e.object.get(),
            e.arg.map(|w| w.get()),
        )
        .map_err(|_| CsrError::BadValue(1))?;
        Ok(())
    }
}

impl CsrEntryKind for Complete {
    const KIND: CsrKind = CsrKind::Complete;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        if e.status > status::FLUSHED {
            return Err(CsrError::BadValue(1));
        }
        if e.opcode > opcode::RECV {
            return Err(CsrError::BadValue(2));
        }
        let with_reason = matches!(e.status, status::REMOTE_NACK | status::LOCAL_QP_ERROR);
        if with_reason {
            nack_reason(e.reason, 3)?;
        } else if e.reason != 0 {
            return Err(CsrError::ReservedSet);
        }
        check24(e.qpn, 4)?;
        if e.opcode != opcode::RECV_IMM && (e.imm.get() != 0 || e.msn.get() != 0) {
            return Err(CsrError::ReservedSet);
        }
        zero(e.rsvd.as_bytes())?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for EvEventEntry {
    const KIND: CsrKind = CsrKind::EvEvent;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        ev_state(e.old, 1)?;
        ev_state(e.new, 8)?;
        check24(e.qpn, 4)?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for RetransmitUnacked {
    const KIND: CsrKind = CsrKind::RetransmitUnacked;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        zero(&e.rsvd)?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for TailProbe {
    const KIND: CsrKind = CsrKind::TailProbe;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        zero(&e.rsvd)?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for PlaneDown {
    const KIND: CsrKind = CsrKind::PlaneDown;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for QpInitCtx {
    const KIND: CsrKind = CsrKind::QpInit;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        if e.planes == 0 {
            return Err(CsrError::BadValue(1));
        }
        check24(e.qpn, 4)?;
        crate::wire::EvFormat::from_code(e.ev_format).map_err(|_| CsrError::BadValue(12))?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for QpRtrCtx {
    const KIND: CsrKind = CsrKind::QpRtr;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        check24(e.qpn, 4)?;
        check24(e.rq_psn, 8)?;
        check24(e.dest_qpn, 16)?;
        zero(&[e.rsvd])?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}

impl CsrEntryKind for QpRtsCtx {
    const KIND: CsrKind = CsrKind::QpRts;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        if !(1..=63).contains(&e.reorder_tx) {
            return Err(CsrError::BadValue(1));
        }
        check24(e.qpn, 4)?;
        check24(e.sq_psn, 8)?;
        zero(&e.rsvd)?;
        Ok(())
    }
}

impl CsrEntryKind for QpStateEntry {
    const KIND: CsrKind = CsrKind::QpState;
    #[inline(always)]
    fn check(&self) -> Result<(), CsrError> {
        let e = self;
        if e.state > QP_ERROR {
            return Err(CsrError::BadValue(1));
        }
        check24(e.qpn, 4)?;
        zero(e.rsvd.as_bytes())?;
        zero(&e.rsvd2)?;
        Ok(())
    }
}
