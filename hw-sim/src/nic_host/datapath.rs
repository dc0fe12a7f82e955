//! MMIO write dispatch and doorbells (a send or receive doorbell hands the QP's new WQEs to
//! the NIC model on the fabric: the `clos` module), flushing a QP in ERROR, cable events.

use mrc_abi::device::admin::QpState;
use mrc_abi::device::cqe::{Completion, CqeOpcode, CqeStatus};
use mrc_abi::device::doorbell::{
    CqDoorbell, CQ_CONSUMER_MASK, CQ_DOORBELL_OFFSET, RQ_PRODUCER_OFFSET, SQ_PRODUCER_OFFSET,
};
use mrc_abi::device::event::Event;
use mrc_abi::device::regs::{control, defaults};
use mrc_driver::sys::twin::MmioWrite;
use mrc_driver::sys::Iova;

use super::state::*;
use super::World;

impl World {
    /// Every driver MMIO write of NIC `i` lands here (after it reached BAR0).
    pub(crate) fn on_write(&mut self, i: usize, w: MmioWrite) {
        let value = w.value as u32;
        let off = w.offset;
        let db_base = u64::from(defaults::DOORBELL_PAGES);
        let pages = u64::from(self.nics[i].params.doorbell_pages);
        if off == u64::from(defaults::DEVICE) + DEV_CONTROL {
            if value & control::RESET != 0 {
                self.nics[i].reset();
            }
        } else if (ADMIN..ADMIN + 64).contains(&off) || (EVENTQ..EVENTQ + 64).contains(&off) {
            let block = off & !63;
            match off - block {
                Q_CONTROL => self.enable_queue(i, block, value),
                Q_DOORBELL if block == ADMIN => self.run_admin(i, value),
                Q_DOORBELL => self.nics[i].reg_w(EVENTQ + Q_CONSUMER, value),
                _ => {}
            }
        } else if off >= db_base && off < db_base + pages * 4096 {
            let page = ((off - db_base) / 4096) as u32;
            match (off - db_base) % 4096 {
                o if o == SQ_PRODUCER_OFFSET as u64 => self.sq_doorbell(i, page, value),
                o if o == RQ_PRODUCER_OFFSET as u64 => {
                    if let Some(q) = self.nics[i].t.qps.get_mut(&page) {
                        q.rq_prod = value;
                        if !self.nics[i].hold_doorbells {
                            self.clos_doorbell(i, Some(page));
                        }
                    }
                }
                o if o == CQ_DOORBELL_OFFSET as u64 => self.cq_doorbell(i, page, value),
                _ => {}
            }
        }
    }

    fn enable_queue(&mut self, i: usize, block: u64, value: u32) {
        let n = &self.nics[i];
        if value & 1 == 0 {
            n.reg_w(block + Q_STATUS, 0);
            return;
        }
        let log2 = n.reg(block + Q_LOG2);
        let base = n.reg64(block + Q_BASE_LO, block + Q_BASE_HI);
        let entry = if block == ADMIN { 64 } else { 32 };
        let mut ok = (1..=12).contains(&log2) && base != 0 && base.is_multiple_of(64);
        let mut probe = [0u8; 1];
        ok = ok
            && n.dev
                .dma_read(Iova(base + (entry << log2) - 1), &mut probe)
                .is_ok();
        if block == ADMIN {
            let resp = n.reg64(ADMIN + Q_RESP_LO, ADMIN + Q_RESP_HI);
            ok = ok
                && resp != 0
                && n.dev
                    .dma_read(Iova(resp + (32 << log2) - 1), &mut probe)
                    .is_ok();
        }
        n.reg_w(block + Q_STATUS, if ok { 1 } else { 2 });
    }

    fn cq_doorbell(&mut self, i: usize, cqn: u32, value: u32) {
        let Ok(db) = CqDoorbell::decode(value) else {
            return;
        };
        let n = &mut self.nics[i];
        let Some(cq) = n.t.cqs.get_mut(&cqn) else {
            return;
        };
        let back = cq.producer.wrapping_sub(db.consumer) & CQ_CONSUMER_MASK;
        cq.consumer = cq.producer.wrapping_sub(back);
        if db.arm {
            cq.armed = true;
            cq.solicited_only = db.solicited_only;
            // Completions already waiting fire an armed CQ at once (no lost wake-up).
            if cq.producer != cq.consumer && !db.solicited_only {
                cq.armed = false;
                let v = cq.vector;
                n.raise(v);
            }
        }
    }

    fn sq_doorbell(&mut self, i: usize, qpn: u32, producer: u32) {
        let Some(q) = self.nics[i].t.qps.get_mut(&qpn) else {
            return;
        };
        q.sq_prod = producer;
        let state = q.state;
        if self.nics[i].hold_doorbells {
            return;
        }
        match state {
            QpState::Rts => self.clos_doorbell(i, Some(qpn)),
            QpState::Error => self.flush(i, qpn, self.now_ns),
            // Other states keep the WQEs until the QP reaches RTS (or is reset).
            _ => {}
        }
    }

    /// Holds (`true`) or releases the send doorbells of every NIC; released together.
    pub(crate) fn hold_all_doorbells(&mut self, hold: bool) {
        for n in self.nics.iter_mut() {
            n.hold_doorbells = hold;
        }
        if !hold {
            self.clos_pump();
        }
    }

    /// Holds (`true`) or releases send doorbells of NIC `i`; releasing hands the NIC every
    /// WQE that arrived while held.
    pub(crate) fn hold_doorbells(&mut self, i: usize, hold: bool) {
        self.nics[i].hold_doorbells = hold;
        if !hold {
            self.clos_pump();
        }
    }

    /// A QP in ERROR: every pending send and receive completes with WR_FLUSHED.
    pub(crate) fn flush(&mut self, i: usize, qpn: u32, now: u64) {
        let n = &mut self.nics[i];
        let Some(q) = n.t.qps.get(&qpn).copied() else {
            return;
        };
        let mut raw = [0u8; 64];
        let mut idx = q.sq_cons;
        while idx != q.sq_prod {
            let slot = u64::from(idx & ((1 << q.sq_log2) - 1));
            let wr_id = n
                .dev
                .dma_read(Iova(q.sq_base + slot * 64), &mut raw)
                .map_or(0, |()| {
                    u64::from_le_bytes(raw[8..16].try_into().unwrap_or([0; 8]))
                });
            let c = completion(wr_id, CqeStatus::WrFlushed, CqeOpcode::Write, 0, qpn, idx);
            n.post_cqe(q.send_cq, &c, now);
            idx = idx.wrapping_add(1);
        }
        let mut idx = q.rq_cons;
        while idx != q.rq_prod {
            let slot = u64::from(idx & ((1 << q.rq_log2) - 1));
            let wr_id = n
                .dev
                .dma_read(Iova(q.rq_base + slot * 32), &mut raw[..32])
                .map_or(0, |()| {
                    u64::from_le_bytes(raw[0..8].try_into().unwrap_or([0; 8]))
                });
            let mut c = completion(
                wr_id,
                CqeStatus::WrFlushed,
                CqeOpcode::RecvWriteImm,
                0,
                qpn,
                idx,
            );
            c.imm = Some(0);
            n.post_cqe(q.recv_cq, &c, now);
            idx = idx.wrapping_add(1);
        }
        if let Some(qp) = n.t.qps.get_mut(&qpn) {
            qp.sq_cons = q.sq_prod;
            qp.rq_cons = q.rq_prod;
        }
    }

    /// A cable event on port `port` of NIC `i`.
    pub(crate) fn set_link(&mut self, i: usize, port: u8, up: bool) {
        let now = self.now_ns;
        let n = &mut self.nics[i];
        let p = usize::from(port);
        if p >= n.port_link.len() || n.port_link[p] == up {
            return;
        }
        let was = n.port_admin[p] && n.port_link[p];
        n.port_link[p] = up;
        n.publish_port(p);
        let plane = self.nics[i].port_plane(p);
        self.clos_cable(i, plane, up);
        let n = &mut self.nics[i];
        let oper = n.port_admin[p] && up;
        if oper != was {
            let plane = n.port_plane(p);
            let ev = if oper {
                Event::PortUp {
                    port,
                    plane,
                    speed_mbps: PORT_SPEED_MBPS,
                }
            } else {
                Event::PortDown { port, plane }
            };
            n.post_event(ev, now);
            self.clos_plane(i, plane, oper);
        }
    }
}

/// A CQE with no immediate and no syndrome.
pub(super) fn completion(
    wr_id: u64,
    status: CqeStatus,
    opcode: CqeOpcode,
    byte_len: u32,
    qpn: u32,
    index: u32,
) -> Completion {
    Completion {
        wr_id,
        status,
        opcode,
        byte_len,
        imm: None,
        qpn,
        wqe_index: index as u16,
        solicited: false,
        syndrome: 0,
    }
}
