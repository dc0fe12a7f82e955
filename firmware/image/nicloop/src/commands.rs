//! Step 3: FW->DP entries out: the loop's own, then the engine's, translated for the host
//! interface with the admin tables.

use mrc_abi::device::admin::QpState;
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus, CQE_SOLICITED};
use mrc_abi::device::csr::{
    CompleteSends, CsrEntry, CsrEvent, CsrKind, PostCqe, PostEvent, ProbeResult,
};
use mrc_abi::device::event::Event;
use mrc_abi::wire::NackReason;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::csr_queue::CsrQueue;
use mrc_firmware::engine::{Completion, CompletionError, CompletionKind};

use crate::{Fw, LoopCounters, NicAdmin, LOOP_QUEUE};

const COMPLETE: u8 = CsrKind::Complete as u8;
const COMPLETE_SENDS: u8 = CsrKind::CompleteSends as u8;
const EV_EVENT: u8 = CsrKind::EvEvent as u8;
const PROBE_RESULT: u8 = CsrKind::ProbeResult as u8;

impl<C: Capacity> Fw<C> {
    /// FW->DP entries into the front of `out`: the loop's queue first, then the engine's
    /// commands (translated with `admin`, see the crate docs). Returns how many.
    #[inline]
    pub(crate) fn commands(&mut self, out: &mut [CsrEntry], admin: Option<&mut NicAdmin>) -> usize {
        // (polled far more often than there is something: answer that inline)
        if !self.commands_pending() {
            return 0;
        }
        self.some_commands(out, admin)
    }

    #[inline(never)]
    fn some_commands(&mut self, out: &mut [CsrEntry], admin: Option<&mut NicAdmin>) -> usize {
        let n = self.out.drain_into(out);
        let Some(rest) = out.get_mut(n..).filter(|r| !r.is_empty()) else {
            return n;
        };
        let Some(admin) = admin else {
            return n + self.engine.poll_commands(rest);
        };
        // (an engine entry the host interface does not take, e.g. an EV event the QP's profile
        // masks, leaves nothing: polled again until something is left or nothing waits, so
        // that 0 means no command waits and the step does not stop short)
        loop {
            let k = self.engine.poll_commands(rest);
            let mut w = 0;
            for r in 0..k {
                if let Some(e) = self.for_host(rest[r], admin) {
                    rest[w] = e;
                    w += 1;
                }
            }
            if n + w > 0 || k == 0 {
                return n + w;
            }
        }
    }

    /// An engine command as the datapath and the host interface take it with the admin
    /// tables (`None`: nothing to write).
    fn for_host(&mut self, mut e: CsrEntry, admin: &mut NicAdmin) -> Option<CsrEntry> {
        let kind = e.kind_code();
        if kind == COMPLETE {
            return self.cqe(&e, admin);
        }
        if kind == EV_EVENT {
            return self.ev_event(&e, admin);
        }
        if kind == PROBE_RESULT {
            return self.probe_result(&e, admin);
        }
        if kind == COMPLETE_SENDS {
            return self.complete_sends(&e, admin);
        }
        if CsrKind::has_qpn_word(kind) {
            match self.map.device(e.qpn_word()) {
                Some(d) => e.set_qpn_word(d),
                None => {
                    self.counters.unknown_qpn += 1;
                    return None;
                }
            }
        }
        Some(e)
    }

    /// The `PostCqe` for an engine completion: device QPN, the QP's CQ, the `WimmPlaced`
    /// length and solicited bit; a failed work request (not a flush) moves the device QP to
    /// ERROR and queues `QP_FATAL` behind the CQE.
    fn cqe(&mut self, e: &CsrEntry, admin: &mut NicAdmin) -> Option<CsrEntry> {
        let c = Completion::from_entry(e)?;
        let Some((qpn, q)) = self
            .map
            .device(c.qpn)
            .and_then(|d| Some((d, admin.qps.get_mut(&d)?)))
        else {
            self.counters.unknown_qpn += 1;
            return None;
        };
        let recv = !matches!(c.kind, CompletionKind::Send);
        let mut cqe = post_cqe(&c, qpn, if recv { q.recv_cq } else { q.send_cq });
        let fatal = matches!(c.status, Err(x) if x != CompletionError::Flushed);
        if fatal && q.state != QpState::Error {
            q.state = QpState::Error;
            self.counters.qp_fatal += 1;
            let fatal = Event::QpFatal {
                qpn,
                status: cqe.status,
                syndrome: 0,
            };
            post_event(&mut self.out, &mut self.counters, fatal);
        }
        if let CompletionKind::RecvImm { msn, .. } = c.kind {
            if let Some(w) = self.take_wimm(c.qpn, msn) {
                cqe.byte_len = w.byte_len.into();
                if w.solicited {
                    cqe.flags |= CQE_SOLICITED;
                }
            }
        }
        self.counters.cqes += 1;
        Some(CsrEvent::PostCqe(cqe).encode())
    }

    /// An order to complete retired sends, for the device QP and with its send CQ: the
    /// datapath writes their CQEs.
    fn complete_sends(&mut self, e: &CsrEntry, admin: &NicAdmin) -> Option<CsrEntry> {
        let c = e.view::<CompleteSends>();
        let Some((qpn, q)) = self
            .map
            .device(c.qpn.get())
            .and_then(|d| Some((d, admin.qps.get(&d)?)))
        else {
            self.counters.unknown_qpn += 1;
            return None;
        };
        let order = CompleteSends::new(qpn, c.count.get()).with_cq(q.send_cq);
        Some(CsrEvent::CompleteSends(order).encode())
    }

    /// The `EV_PROBE_RESULT` event of a host probe the engine finished.
    fn probe_result(&mut self, e: &CsrEntry, admin: &mut NicAdmin) -> Option<CsrEntry> {
        let r = e.view::<ProbeResult>();
        let Some(qpn) = self.map.device(r.qpn.get()) else {
            self.counters.unknown_qpn += 1;
            return None;
        };
        let rtt = (r.replied != 0).then(|| r.rtt_ns.get());
        let event = admin.probe_result_event(qpn, r.ev.get(), r.probe_id.get(), rtt);
        self.counters.host_events += 1;
        Some(CsrEvent::PostEvent(PostEvent::new(&event)).encode())
    }

    /// The `EV_STATE_CHANGE` event for an engine EV event, when the QP's EV profile reports
    /// it.
    fn ev_event(&mut self, e: &CsrEntry, admin: &NicAdmin) -> Option<CsrEntry> {
        let Ok(CsrEvent::EvEvent(v)) = e.decode() else {
            return None;
        };
        let Some(qpn) = self.map.device(v.qpn.get()) else {
            self.counters.unknown_qpn += 1;
            return None;
        };
        match admin.ev_state_event(qpn, v.ev.get(), v.old, v.new, v.reason) {
            Some(event) => {
                self.counters.host_events += 1;
                Some(CsrEvent::PostEvent(PostEvent::new(&event)).encode())
            }
            None => {
                self.counters.ev_events_masked += 1;
                None
            }
        }
    }
}

/// Queue a host event in the loop's queue (counted; lost when it is full).
pub(crate) fn post_event(
    out: &mut CsrQueue<LOOP_QUEUE>,
    counters: &mut LoopCounters,
    event: Event,
) {
    if out.room() == 0 {
        counters.host_events_lost += 1;
        return;
    }
    out.push(CsrEvent::PostEvent(PostEvent::new(&event)));
    counters.host_events += 1;
}

fn cqe_status(s: Result<(), CompletionError>) -> CqeStatus {
    match s {
        Ok(()) => CqeStatus::Success,
        Err(CompletionError::RetryExceeded) => CqeStatus::RetryExceeded,
        Err(CompletionError::Flushed) => CqeStatus::WrFlushed,
        Err(CompletionError::RemoteNack(r)) => match r {
            NackReason::RemoteAccess => CqeStatus::RemoteAccess,
            NackReason::Length => CqeStatus::RemoteLength,
            NackReason::NoRecvBuffer => CqeStatus::RemoteNoRecvBuffer,
            _ => CqeStatus::RemoteInvalidRequest,
        },
        Err(CompletionError::LocalQpError(r)) => match r {
            NackReason::Length => CqeStatus::LocalLength,
            NackReason::RemoteAccess => CqeStatus::LocalProtection,
            NackReason::NoRecvBuffer => CqeStatus::RecvQueueOverflow,
            _ => CqeStatus::LocalQpOperation,
        },
    }
}

/// The `PostCqe` for completion `c` of device QP `qpn` on CQ `cqn` (see the crate docs for
/// `wqe_index` and `byte_len`).
pub fn post_cqe(c: &Completion, qpn: u32, cqn: u32) -> PostCqe {
    let (opcode, imm) = match c.kind {
        CompletionKind::Send => (CqeOpcode::Write, 0),
        CompletionKind::RecvImm { imm, .. } if c.status.is_ok() => (CqeOpcode::RecvWriteImm, imm),
        CompletionKind::RecvImm { .. } | CompletionKind::Recv => (CqeOpcode::RecvWriteImm, 0),
    };
    PostCqe::new(
        cqe_status(c.status) as u8,
        opcode as u8,
        cqn,
        qpn,
        c.wr_id as u16,
        imm,
    )
}
