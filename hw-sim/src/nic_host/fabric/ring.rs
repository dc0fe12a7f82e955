//! The host side of fabric mode: new ring entries handed to the stage (receive WQEs, and
//! send WQEs with their local bytes gathered and checked), and QPs moved to ERROR with their
//! ring backlog flushed.

use mrc_abi::device::admin::QpState as DevQpState;
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};
use mrc_abi::device::event::Event;
use mrc_abi::device::wqe::SEND_SIGNALED;
use mrc_firmware::datapath::packet::{LocalBuf, SendWr};
use mrc_firmware::engine::qp::{QpAttrs, QpState};

use super::super::World;
use super::{cqe, Pending};

impl World {
    /// Hands ring entries of NIC `i` to its stage. True if any moved.
    pub(super) fn feed(&mut self, i: usize) -> bool {
        let mut any = false;
        if self.stalled(i) {
            return false;
        }
        let qpns: Vec<u32> = self.nics[i].t.qps.keys().copied().collect();
        for qpn in qpns {
            any |= self.feed_recvs(i, qpn);
            if self.fetch_ready(i, qpn) {
                any |= self.feed_sends(i, qpn);
            }
        }
        any
    }

    /// Slow DMA: the send WQEs of QP `qpn` of NIC `i` are visible to the stage (a pending
    /// batch is fetched `dma_delay_ns` after it was first seen).
    fn fetch_ready(&mut self, i: usize, qpn: u32) -> bool {
        let now = self.now_ns;
        let pending = self.nics[i]
            .t
            .qps
            .get(&qpn)
            .is_some_and(|q| q.state == DevQpState::Rts && q.sq_cons != q.sq_prod);
        let Some(f) = self.fabric.as_mut() else {
            return false;
        };
        let delay = f.faults.dma_delay_ns.get(i).copied().unwrap_or(0);
        if delay == 0 || !pending {
            f.faults.fetch_due.remove(&(i, qpn));
            return true;
        }
        let due = *f.faults.fetch_due.entry((i, qpn)).or_insert(now + delay);
        if now >= due {
            f.faults.fetch_due.remove(&(i, qpn));
            return true;
        }
        false
    }

    /// NIC `i`'s firmware core is stalled.
    pub(super) fn stalled(&self, i: usize) -> bool {
        self.fabric.as_ref().is_some_and(|f| f.faults.stalled(i))
    }

    fn feed_recvs(&mut self, i: usize, qpn: u32) -> bool {
        let mut any = false;
        loop {
            let Some(q) = self.nics[i].t.qps.get(&qpn).copied() else {
                return any;
            };
            if !matches!(q.state, DevQpState::Rtr | DevQpState::Rts) || q.rq_cons == q.rq_prod {
                return any;
            }
            let Some(fab) = self.fabric.as_mut() else {
                return any;
            };
            let ne = &mut fab.engines[i];
            let Some(&e) = ne.qps.get(&qpn) else {
                return any;
            };
            if ne.nic.dp.post_recv(e, u64::from(q.rq_cons)).is_err() {
                return any;
            }
            if let Some(p) = self.nics[i].t.qps.get_mut(&qpn) {
                p.rq_cons = p.rq_cons.wrapping_add(1);
            }
            any = true;
        }
    }

    fn feed_sends(&mut self, i: usize, qpn: u32) -> bool {
        let mut any = false;
        loop {
            let Some(q) = self.nics[i].t.qps.get(&qpn).copied() else {
                return any;
            };
            if q.state != DevQpState::Rts || q.sq_cons == q.sq_prod {
                return any;
            }
            let now = self.now_ns;
            let index = q.sq_cons;
            let (wr_id, req) = self.nics[i].read_send_wqe(&q, index);
            let gathered = match &req {
                Some(r) => self.nics[i].gather(&q, r),
                None => Err((CqeStatus::LocalQpOperation, 0)),
            };
            let (r, data) = match (req, gathered) {
                (Some(r), Ok(d)) => (r, d),
                (_, res) => {
                    let (status, syndrome) = res.err().unwrap_or((CqeStatus::LocalQpOperation, 0));
                    self.nics[i].counters.send_wqes += 1;
                    if let Some(p) = self.nics[i].t.qps.get_mut(&qpn) {
                        p.sq_cons = index.wrapping_add(1);
                    }
                    self.fail_qp(i, qpn, wr_id, index, status, syndrome, now);
                    return true;
                }
            };
            let Some(fab) = self.fabric.as_mut() else {
                return any;
            };
            let ne = &mut fab.engines[i];
            let Some(&e) = ne.qps.get(&qpn) else {
                return any;
            };
            let handle = ne.next_handle;
            let wr = SendWr {
                wr_id: u64::from(handle),
                local: LocalBuf { handle, offset: 0 },
                remote_va: r.remote_va,
                rkey: r.rkey,
                len: data.len() as u32,
                imm: r.imm,
                signaled: true,
            };
            if ne.nic.dp.post_send(e, wr).is_err() {
                // The stage's send queue is full: the rest waits in the ring.
                return any;
            }
            ne.next_handle = handle.wrapping_add(1);
            ne.sends.insert(
                handle,
                Pending {
                    qpn,
                    wr_id,
                    index,
                    opcode: if r.imm.is_some() {
                        CqeOpcode::WriteImm
                    } else {
                        CqeOpcode::Write
                    },
                    byte_len: data.len() as u32,
                    signaled: r.flags & SEND_SIGNALED != 0,
                    data,
                },
            );
            self.nics[i].counters.send_wqes += 1;
            if let Some(p) = self.nics[i].t.qps.get_mut(&qpn) {
                p.sq_cons = index.wrapping_add(1);
            }
            any = true;
        }
    }

    /// An error CQE for ring entry `index`, the QP to ERROR, a QP_FATAL event, and the ring
    /// backlog flushed once the engine's own completions are drained.
    #[allow(clippy::too_many_arguments)]
    fn fail_qp(
        &mut self,
        i: usize,
        qpn: u32,
        wr_id: u64,
        index: u32,
        status: CqeStatus,
        syndrome: u32,
        now: u64,
    ) {
        let n = &mut self.nics[i];
        let Some(q) = n.t.qps.get(&qpn).copied() else {
            return;
        };
        let mut c = cqe(wr_id, status, CqeOpcode::Write, 0, qpn, index);
        c.syndrome = syndrome;
        n.post_cqe(q.send_cq, &c, now);
        self.enter_error(i, qpn, status, syndrome, now);
    }

    pub(super) fn enter_error(
        &mut self,
        i: usize,
        qpn: u32,
        status: CqeStatus,
        syndrome: u32,
        now: u64,
    ) {
        let n = &mut self.nics[i];
        match n.t.qps.get_mut(&qpn) {
            Some(p) if p.state != DevQpState::Error => p.state = DevQpState::Error,
            _ => return,
        }
        n.post_event(
            Event::QpFatal {
                qpn,
                status: status as u8,
                syndrome,
            },
            now,
        );
        if let Some(fab) = self.fabric.as_mut() {
            let ne = &mut fab.engines[i];
            if let Some(&e) = ne.qps.get(&qpn) {
                let attrs = QpAttrs::default();
                let _ = ne.nic.fw_mut().modify_qp(e, QpState::Error, &attrs, now);
            }
            ne.failed.push(qpn);
        }
    }
}
