//! Queue pairs: creation, the RESET -> INIT -> RTR -> RTS state machine with validated
//! attributes, and heap-free posting.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use mrc_abi::device::admin::body::{CreateQp, QpInit, QpReset, QpRtr, QpRts};
use mrc_abi::device::admin::{
    QpModify, QpState, HINT_BULK, HINT_LATENCY, MAX_ACK_TIMEOUT_EXP, RETRY_FOREVER, RTR_DYNAMIC_MPR,
};
use mrc_abi::device::wqe::{
    self, SendOpcode, SendRequest, MAX_SEND_SGE, SEND_FENCE, SEND_SIGNALED, SEND_SOLICITED,
};
use mrc_abi::device::QPN_LIMIT;
use zerocopy::FromZeros;

use super::cq::{CompletionQueue, CqShared};
use super::pd::{MrCache, PdInner, ProtectionDomain};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::queue::{QpTrack, RecvRing, SendRing};

/// One local buffer of a send request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual address (inside the MR).
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// The MR's lkey.
    pub lkey: u32,
}

/// The operation of a send request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// RDMA Write.
    Write,
    /// RDMA Write with Immediate: consumes a receive at the peer, which completes with `imm`.
    WriteImm(u32),
}

/// A send work request.
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Write or Write-with-Immediate.
    pub op: WriteOp,
    /// Local buffers (at most [`MAX_SEND_SGE`]; empty = zero-length write).
    pub sg_list: &'a [Sge],
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Produce a completion (unsignaled requests complete silently with the next signaled one).
    pub signaled: bool,
    /// Set the solicited bit (wakes a solicited-only armed CQ at the peer).
    pub solicited: bool,
    /// Wait for earlier requests to complete first.
    pub fence: bool,
}

/// A receive work request (receives carry no buffer: Write-with-Immediate places its data by
/// RETH; the receive only supplies the completion).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
}

/// QP hint: what the traffic looks like (applied at INIT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QpHint {
    /// Latency-sensitive (small messages).
    pub latency: bool,
    /// Bulk transfer.
    pub bulk: bool,
    /// Traffic class (DSCP 0..=63).
    pub dscp: u8,
}

/// QP creation attributes.
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr<'a> {
    /// CQ for send completions.
    pub send_cq: &'a CompletionQueue,
    /// CQ for receive completions.
    pub recv_cq: &'a CompletionQueue,
    /// Send ring entries (rounded up to a power of two, 2..=65536).
    pub sq_depth: u32,
    /// Receive ring entries (same rule).
    pub rq_depth: u32,
    /// Traffic hint.
    pub hint: QpHint,
}

/// RESET -> INIT attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct InitAttr {
    /// EV profile (0 = the device default).
    pub ev_profile: u32,
    /// CC profile (0 = the device default).
    pub cc_profile: u32,
}

/// INIT -> RTR attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtrAttr {
    /// The peer's QPN.
    pub dest_qpn: u32,
    /// The peer NIC's address.
    pub remote_addr: [u8; 16],
    /// First PSN expected from the peer (24 bits).
    pub rq_psn: u32,
    /// Responder window in units of 128 PSNs (>= 1).
    pub responder_mpr: u16,
    /// Most Write-with-Immediate in flight accepted (>= 1).
    pub max_wimm: u16,
    /// Let the responder resize its window.
    pub dynamic_mpr: bool,
}

/// RTR -> RTS attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsAttr {
    /// First PSN sent (24 bits).
    pub sq_psn: u32,
    /// Requester window in units of 128 PSNs (>= 1).
    pub requester_mpr: u16,
    /// Most Write-with-Immediate in flight (>= 1).
    pub max_wimm: u16,
    /// Retries (0..=25, 25 = forever).
    pub retry_count: u8,
    /// ACK timeout exponent (<= 24): 1.024 us * 2^t.
    pub ack_timeout_exp: u8,
}

/// A reliable MRC connection endpoint.
#[derive(Debug)]
pub struct QueuePair {
    dev: Arc<Device>,
    pd: Arc<PdInner>,
    qpn: u32,
    state: QpState,
    hint: QpHint,
    sq: SendRing,
    rq: RecvRing,
    track: Arc<QpTrack>,
    send_cq: Arc<CqShared>,
    recv_cq: Arc<CqShared>,
    mr_cache: MrCache,
}

fn ring_log2(depth: u32, field: &'static str) -> Result<u8> {
    if depth == 0 || depth > 1 << 16 {
        return Err(Error::InvalidAttribute {
            object: "QP".into(),
            field,
            value: u64::from(depth),
            rule: "1..=65536 entries",
        });
    }
    Ok(depth.max(2).next_power_of_two().trailing_zeros() as u8)
}

impl ProtectionDomain {
    /// Creates a QP in RESET.
    ///
    /// # Errors
    /// Bad depth or hint, CQs of another device, device errors.
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> Result<QueuePair> {
        let dev = &self.inner.dev;
        for cq in [attr.send_cq, attr.recv_cq] {
            if !Arc::ptr_eq(cq.device(), dev) {
                return Err(Error::ForeignObject {
                    what: "CQ",
                    owner: "device",
                });
            }
        }
        if attr.hint.dscp >= 64 {
            return Err(Error::InvalidAttribute {
                object: "QP".into(),
                field: "hint.dscp",
                value: attr.hint.dscp.into(),
                rule: "0..=63",
            });
        }
        let sq_log2 = ring_log2(attr.sq_depth, "sq_depth")?;
        let rq_log2 = ring_log2(attr.rq_depth, "rq_depth")?;
        let mut sq = SendRing::new(dev, sq_log2, 0)?;
        let mut rq = RecvRing::new(dev, rq_log2, 0)?;
        let qpn = dev.create_qp(CreateQp {
            pd: self.inner.pdn.into(),
            send_cq: attr.send_cq.cqn().into(),
            recv_cq: attr.recv_cq.cqn().into(),
            sq_log2,
            rq_log2,
            rsvd: 0.into(),
            sq_base: sq.iova().into(),
            rq_base: rq.iova().into(),
        })?;
        if let Err(e) = sq.set_page(dev, qpn).and_then(|()| rq.set_page(dev, qpn)) {
            let _ = dev.destroy_qp(qpn);
            return Err(e);
        }
        let track = Arc::new(QpTrack::new(qpn));
        attr.send_cq.shared.attach(&track);
        attr.recv_cq.shared.attach(&track);
        Ok(QueuePair {
            dev: dev.clone(),
            pd: self.inner.clone(),
            qpn,
            state: QpState::Reset,
            hint: attr.hint,
            sq,
            rq,
            track,
            send_cq: attr.send_cq.shared.clone(),
            recv_cq: attr.recv_cq.shared.clone(),
            mr_cache: MrCache::default(),
        })
    }
}

fn bad(qpn: u32, field: &'static str, value: u64, rule: &'static str) -> Error {
    Error::InvalidAttribute {
        object: format!("QP {qpn}"),
        field,
        value,
        rule,
    }
}

impl QueuePair {
    /// The QP number (exchanged with the peer).
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
    /// The state as the driver last set it (see [`QueuePair::query_state`] for the device's).
    pub fn state(&self) -> QpState {
        self.state
    }
    /// Send ring entries.
    pub fn sq_depth(&self) -> u32 {
        self.sq.depth()
    }
    /// Receive ring entries.
    pub fn rq_depth(&self) -> u32 {
        self.rq.depth()
    }
    /// Free send slots.
    pub fn sq_free(&self) -> u32 {
        self.sq.free(self.track.sq_tail.load(Ordering::Acquire))
    }

    /// Asks the device for the QP's state (it may have moved to ERROR on its own).
    ///
    /// # Errors
    /// Device errors.
    pub fn query_state(&mut self) -> Result<QpState> {
        let info = self.dev.query_qp(self.qpn)?;
        self.state = info.state;
        Ok(info.state)
    }

    fn transition(&mut self, to: QpState) -> Result<()> {
        self.dev.check()?;
        let ok = matches!(
            (self.state, to),
            (QpState::Reset, QpState::Init)
                | (QpState::Init, QpState::Rtr)
                | (QpState::Rtr, QpState::Rts)
                | (_, QpState::Reset)
                | (_, QpState::Error)
        );
        if ok {
            Ok(())
        } else {
            Err(Error::BadTransition {
                qpn: self.qpn,
                from: self.state,
                to,
            })
        }
    }

    /// Replaces the traffic hint the next RESET -> INIT applies (the OCP API attaches a QP
    /// hint at INIT, not at creation).
    ///
    /// # Errors
    /// [`Error::QpState`] unless the QP is in RESET; [`Error::InvalidAttribute`] for a DSCP
    /// above 63.
    pub fn set_hint(&mut self, hint: QpHint) -> Result<()> {
        if self.state != QpState::Reset {
            return Err(Error::QpState {
                qpn: self.qpn,
                op: "set_hint",
                state: self.state,
                needed: QpState::Reset,
            });
        }
        if hint.dscp >= 64 {
            return Err(bad(self.qpn, "hint.dscp", hint.dscp.into(), "0..=63"));
        }
        self.hint = hint;
        Ok(())
    }

    /// RESET -> INIT: attach the EV and CC profiles and apply the hint.
    ///
    /// # Errors
    /// [`Error::BadTransition`], device errors (unknown profile).
    pub fn modify_init(&mut self, a: &InitAttr) -> Result<()> {
        self.transition(QpState::Init)?;
        let h = self.hint;
        let flags = (if h.latency { HINT_LATENCY } else { 0 }) | if h.bulk { HINT_BULK } else { 0 };
        self.dev.modify_qp(QpModify::Init(QpInit {
            qpn: self.qpn.into(),
            to_state: QpState::Init as u8,
            dscp: h.dscp,
            hint_flags: flags.into(),
            ev_profile: a.ev_profile.into(),
            cc_profile: a.cc_profile.into(),
        }))?;
        self.state = QpState::Init;
        Ok(())
    }

    /// INIT -> RTR.
    ///
    /// # Errors
    /// [`Error::BadTransition`], [`Error::InvalidAttribute`], device errors.
    pub fn modify_rtr(&mut self, a: &RtrAttr) -> Result<()> {
        self.transition(QpState::Rtr)?;
        let q = self.qpn;
        if a.dest_qpn >= QPN_LIMIT {
            return Err(bad(q, "dest_qpn", a.dest_qpn.into(), "24 bits"));
        }
        if a.rq_psn >= QPN_LIMIT {
            return Err(bad(q, "rq_psn", a.rq_psn.into(), "24 bits"));
        }
        if a.responder_mpr == 0 {
            return Err(bad(q, "responder_mpr", 0, ">= 1 (units of 128 PSNs)"));
        }
        if a.max_wimm == 0 {
            return Err(bad(q, "max_wimm", 0, ">= 1"));
        }
        if a.dynamic_mpr
            && self.dev.attrs().capabilities & mrc_abi::device::regs::caps::DYNAMIC_MPR == 0
        {
            return Err(bad(
                q,
                "dynamic_mpr",
                1,
                "device lacks the DYNAMIC_MPR capability",
            ));
        }
        self.dev.modify_qp(QpModify::Rtr(QpRtr {
            qpn: q.into(),
            to_state: QpState::Rtr as u8,
            flags: if a.dynamic_mpr { RTR_DYNAMIC_MPR } else { 0 },
            responder_mpr: a.responder_mpr.into(),
            dest_qpn: a.dest_qpn.into(),
            max_wimm: a.max_wimm.into(),
            rsvd: 0.into(),
            rq_psn: a.rq_psn.into(),
            remote_addr: a.remote_addr,
        }))?;
        self.state = QpState::Rtr;
        Ok(())
    }

    /// RTR -> RTS.
    ///
    /// # Errors
    /// [`Error::BadTransition`], [`Error::InvalidAttribute`], device errors.
    pub fn modify_rts(&mut self, a: &RtsAttr) -> Result<()> {
        self.transition(QpState::Rts)?;
        let q = self.qpn;
        if a.sq_psn >= QPN_LIMIT {
            return Err(bad(q, "sq_psn", a.sq_psn.into(), "24 bits"));
        }
        if a.requester_mpr == 0 {
            return Err(bad(q, "requester_mpr", 0, ">= 1 (units of 128 PSNs)"));
        }
        if a.max_wimm == 0 {
            return Err(bad(q, "max_wimm", 0, ">= 1"));
        }
        if a.retry_count > RETRY_FOREVER {
            return Err(bad(
                q,
                "retry_count",
                a.retry_count.into(),
                "0..=25 (25 = forever)",
            ));
        }
        if a.ack_timeout_exp > MAX_ACK_TIMEOUT_EXP {
            return Err(bad(
                q,
                "ack_timeout_exp",
                a.ack_timeout_exp.into(),
                "0..=24",
            ));
        }
        self.dev.modify_qp(QpModify::Rts(QpRts {
            qpn: q.into(),
            to_state: QpState::Rts as u8,
            retry_count: a.retry_count,
            requester_mpr: a.requester_mpr.into(),
            max_wimm: a.max_wimm.into(),
            ack_timeout_exp: a.ack_timeout_exp,
            rsvd: 0,
            sq_psn: a.sq_psn.into(),
        }))?;
        self.state = QpState::Rts;
        Ok(())
    }

    /// Any state -> RESET or ERROR (ERROR flushes outstanding requests).
    ///
    /// # Errors
    /// [`Error::InvalidAttribute`] for another target, device errors.
    pub fn modify_reset_or_error(&mut self, to: QpState) -> Result<()> {
        if !matches!(to, QpState::Reset | QpState::Error) {
            return Err(bad(self.qpn, "to_state", to as u64, "RESET or ERROR"));
        }
        self.transition(to)?;
        self.dev.modify_qp(QpModify::Reset(QpReset {
            qpn: self.qpn.into(),
            to_state: to as u8,
            rsvd: [0; 3],
        }))?;
        self.state = to;
        Ok(())
    }

    /// Checks one request against the QP's PD and encodes its descriptor.
    #[inline]
    fn encode_wr(&mut self, wr: &SendWr<'_>) -> Result<wqe::SendWqe> {
        let qpn = self.qpn;
        let reject = |reason| Error::BadWorkRequest {
            qpn,
            wr_id: wr.wr_id,
            reason,
        };
        if wr.sg_list.len() > MAX_SEND_SGE {
            return Err(reject("more scatter-gather entries than MAX_SEND_SGE"));
        }
        // The descriptor is filled in place (the abi's layout type, no intermediate
        // `SendRequest`): this is the per-request hot path. Debug builds check it equals what
        // `SendRequest::encode` produces.
        let mut raw = wqe::SendWqe::new_zeroed();
        let mut total = 0u32;
        for (slot, s) in raw.sge.iter_mut().zip(wr.sg_list) {
            if !self
                .pd
                .covers_cached(&mut self.mr_cache, s.lkey, s.addr, s.len)
            {
                return Err(reject(
                    "SGE outside every MR of the QP's protection domain (lkey, addr, len)",
                ));
            }
            total = total
                .checked_add(s.len)
                .ok_or_else(|| reject("total length overflows 32 bits"))?;
            *slot = wqe::Sge::new(s.addr, s.len, s.lkey);
        }
        let (opcode, imm) = match wr.op {
            WriteOp::Write => (SendOpcode::Write, None),
            WriteOp::WriteImm(i) => (SendOpcode::WriteImm, Some(i)),
        };
        raw.opcode = opcode as u8;
        raw.flags = (if wr.signaled { SEND_SIGNALED } else { 0 })
            | (if wr.solicited { SEND_SOLICITED } else { 0 })
            | if wr.fence { SEND_FENCE } else { 0 };
        raw.num_sge = wr.sg_list.len() as u8;
        raw.imm = imm.unwrap_or(0).into();
        raw.wr_id = wr.wr_id.into();
        raw.remote_va = wr.remote_addr.into();
        raw.rkey = wr.rkey.into();
        raw.total_len = total.into();
        debug_assert_eq!(
            Ok(raw),
            SendRequest {
                wr_id: wr.wr_id,
                imm,
                flags: raw.flags,
                remote_va: wr.remote_addr,
                rkey: wr.rkey,
                sges: raw.sge[..wr.sg_list.len()].iter().copied().collect(),
            }
            .encode()
        );
        Ok(raw)
    }

    /// Posts a batch of send requests and rings the doorbell once. All or nothing: if any
    /// request is invalid or the batch does not fit, nothing is posted. Heap-free.
    ///
    /// # Errors
    /// [`Error::QpState`] (not RTS), [`Error::QueueFull`], [`Error::BadWorkRequest`],
    /// [`Error::DeviceGone`].
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        self.dev.check()?;
        if self.state != QpState::Rts {
            return Err(Error::QpState {
                qpn: self.qpn,
                op: "post_send",
                state: self.state,
                needed: QpState::Rts,
            });
        }
        if wrs.len() as u64 > u64::from(self.sq_free()) {
            return Err(Error::QueueFull {
                queue: "send queue",
                object: "QP",
                id: self.qpn,
                depth: self.sq.depth(),
            });
        }
        // One pass: each descriptor is checked, encoded and written past the producer index;
        // the producer moves (and the doorbell rings) only once every request was accepted,
        // so a rejected request leaves the staged slots unpublished.
        for (k, wr) in wrs.iter().enumerate() {
            let raw = self.encode_wr(wr)?;
            self.sq.stage(k as u32, &raw)?;
        }
        self.sq.commit(wrs.len() as u32);
        self.track
            .sq_producer
            .store(self.sq.producer(), Ordering::Release);
        self.sq.flush(&self.dev)
    }

    /// Posts receives (for incoming Write-with-Immediate) and rings the doorbell once.
    /// Allowed from INIT on. Heap-free.
    ///
    /// # Errors
    /// [`Error::QpState`], [`Error::QueueFull`], [`Error::DeviceGone`].
    pub fn post_recv(&mut self, wrs: &[RecvWr]) -> Result<()> {
        self.dev.check()?;
        if matches!(self.state, QpState::Reset | QpState::Error) {
            return Err(Error::QpState {
                qpn: self.qpn,
                op: "post_recv",
                state: self.state,
                needed: QpState::Init,
            });
        }
        let free = self.rq.free(self.track.rq_tail.load(Ordering::Acquire));
        if wrs.len() as u64 > u64::from(free) {
            return Err(Error::QueueFull {
                queue: "receive queue",
                object: "QP",
                id: self.qpn,
                depth: self.rq.depth(),
            });
        }
        for wr in wrs {
            self.rq.push(&wqe::RecvWqe::new(wr.wr_id))?;
        }
        self.track
            .rq_producer
            .store(self.rq.producer(), Ordering::Release);
        self.rq.flush(&self.dev)
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        self.send_cq.detach(self.qpn);
        self.recv_cq.detach(self.qpn);
        if !self.dev.is_gone() {
            if let Err(e) = self.dev.destroy_qp(self.qpn) {
                log::warn!("destroy QP {}: {e}", self.qpn);
            }
        }
    }
}
