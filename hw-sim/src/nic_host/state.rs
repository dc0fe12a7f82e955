//! Device-side tables of one simulated NIC, register helpers, event and CQE posting.

use std::sync::Arc;

use mrc_abi::device::cqe::{expected_owner, Completion, CqeStatus};
use mrc_abi::device::event::{CqErrorReason, Event};
use mrc_abi::device::regs::{control, defaults, DeviceParams};
use mrc_abi::device::wqe::{SendRequest, SendWqe};
use mrc_driver::sys::twin::TwinDevice;
use mrc_driver::sys::Iova;
use mrc_driver::zerocopy::{FromBytes, IntoBytes};

/// A send's local bytes as DMA pieces (IOVA, length), in message order.
#[derive(Clone, Debug, Default)]
pub(crate) struct GatherList {
    pieces: Vec<(u64, u32)>,
}

impl GatherList {
    /// The message's length in bytes (it fits: [`NicState::gather_list`] refuses longer).
    pub fn len(&self) -> u32 {
        self.pieces.iter().fold(0u32, |n, p| n.saturating_add(p.1))
    }

    /// Reads `out.len()` bytes from byte `offset` of the message by DMA through `dev`.
    /// False when the range passes the message's end or a piece is no longer mapped (the
    /// application unregistered or freed it while the send was outstanding).
    pub fn read(&self, dev: &TwinDevice, offset: u64, out: &mut [u8]) -> bool {
        let mut skip = offset;
        let mut done = 0usize;
        for &(iova, len) in &self.pieces {
            if done == out.len() {
                break;
            }
            let len = u64::from(len);
            if skip >= len {
                skip -= len;
                continue;
            }
            let n = ((len - skip) as usize).min(out.len() - done);
            if dev
                .dma_read(Iova(iova + skip), &mut out[done..done + n])
                .is_err()
            {
                return false;
            }
            done += n;
            skip = 0;
        }
        done == out.len()
    }
}

/// Device-side counters of one NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicCounters {
    /// Admin commands executed.
    pub admin_commands: u64,
    /// Admin commands answered with an error.
    pub admin_errors: u64,
    /// Send WQEs executed.
    pub send_wqes: u64,
    /// Payload bytes written into peers' memory.
    pub bytes_placed: u64,
    /// CQEs written.
    pub cqes: u64,
    /// Events written.
    pub events: u64,
    /// Events dropped (event ring full or disabled).
    pub events_dropped: u64,
    /// CQEs dropped (CQ overflow).
    pub cqes_dropped: u64,
    /// Interrupts raised.
    pub interrupts: u64,
}

/// The admin tables of a simulated NIC (the executor of `mrc_firmware::admin`): 256 PDs,
/// 1024 MRs, 64 CQs, 64 QPs, 16 EV format, 16 EV (of up to 256 EVs) and 16 CC profiles.
pub(crate) type SimAdmin = Admin<256, 1024, 64, 64, 16, 16, 256, 16>;

/// One NIC's device-side state.
pub(crate) struct NicState {
    pub dev: Arc<TwinDevice>,
    pub vectors: u32,
    pub params: DeviceParams,
    pub gid: [u8; 16],
    pub counters: NicCounters,
    /// PDs, MRs, CQs, QPs and profiles (boxed: ~170 KB).
    pub t: Box<SimAdmin>,
    pub port_admin: Vec<bool>,
    pub port_link: Vec<bool>,
    /// Send doorbells only record the producer until released (see `SimNic::hold_doorbells`);
    /// survives a device reset.
    pub hold_doorbells: bool,
}

use mrc_firmware::admin::Admin;
pub(crate) use mrc_firmware::admin::{Qp, RKEY_BIT};
/// Port speed in the simulator.
pub(crate) const PORT_SPEED_MBPS: u32 = 200_000;

pub(crate) const ADMIN: u64 = defaults::ADMIN_QUEUE as u64;
pub(crate) const EVENTQ: u64 = defaults::EVENT_QUEUE as u64;
pub(crate) const Q_BASE_LO: u64 = 0x08;
pub(crate) const Q_BASE_HI: u64 = 0x0C;
pub(crate) const Q_LOG2: u64 = 0x10;
pub(crate) const Q_PRODUCER: u64 = 0x14;
pub(crate) const Q_CONSUMER: u64 = 0x18;
pub(crate) const Q_DOORBELL: u64 = 0x1C;
pub(crate) const Q_RESP_LO: u64 = 0x20;
pub(crate) const Q_RESP_HI: u64 = 0x24;
pub(crate) const Q_IRQ: u64 = 0x28;
pub(crate) const Q_CONTROL: u64 = 0x2C;
pub(crate) const Q_STATUS: u64 = 0x30;
pub(crate) const DEV_STATUS: u64 = 0x18;
pub(crate) const DEV_CONTROL: u64 = 0x1C;

impl NicState {
    pub fn new(
        dev: Arc<TwinDevice>,
        vectors: u32,
        params: DeviceParams,
        gid: [u8; 16],
    ) -> NicState {
        let n = params.num_ports as usize;
        NicState {
            dev,
            vectors,
            params,
            gid,
            counters: NicCounters::default(),
            t: Box::new(SimAdmin::new()),
            port_admin: vec![true; n],
            port_link: vec![true; n],
            hold_doorbells: false,
        }
    }

    /// Clears every table (device reset) and publishes the port registers.
    pub fn reset(&mut self) {
        let mut fresh = NicState::new(self.dev.clone(), self.vectors, self.params, self.gid);
        fresh.hold_doorbells = self.hold_doorbells;
        *self = fresh;
        for q in [ADMIN, EVENTQ] {
            for off in [Q_PRODUCER, Q_CONSUMER, Q_CONTROL, Q_STATUS] {
                self.reg_w(q + off, 0);
            }
        }
        for p in 0..self.port_admin.len() {
            self.publish_port(p);
        }
        self.reg_w(DEV_STATUS, mrc_abi::device::regs::status::READY);
        let c = self.reg(DEV_CONTROL);
        self.reg_w(DEV_CONTROL, c & !control::RESET);
    }

    /// The send WQE at ring position `index` of QP `q`, read by DMA: its `wr_id` (0 if the read
    /// failed) and the request, `None` when the read failed or the WQE does not decode (the
    /// requester's CQE then says LOCAL_QP_OPERATION).
    pub fn read_send_wqe(&self, q: &Qp, index: u32) -> (u64, Option<SendRequest>) {
        let slot = u64::from(index & ((1 << q.sq_log2) - 1));
        let mut raw = [0u8; 64];
        let req = self
            .dev
            .dma_read(Iova(q.sq_base + slot * 64), &mut raw)
            .ok()
            .and_then(|()| SendWqe::read_from_bytes(&raw).ok())
            .and_then(|w| w.decode().ok());
        let wr_id = u64::from_le_bytes(raw[8..16].try_into().unwrap_or([0; 8]));
        (wr_id, req)
    }

    /// Where the local bytes of send request `r` of QP `q` are: its SGEs checked against the
    /// NIC's MRs (key, protection domain, range) and their IOVAs mapped for DMA, without
    /// reading them (the NIC reads a message's bytes as it sends them: [`GatherList::read`]).
    /// On a fault the requester's CQE status and syndrome (the lkey).
    pub(crate) fn gather_list(
        &self,
        q: &Qp,
        r: &SendRequest,
    ) -> Result<GatherList, (CqeStatus, u32)> {
        let mut pieces = Vec::with_capacity(r.sges.len());
        let mut total = 0u32;
        for s in &r.sges {
            let mr = self
                .t
                .mrs
                .get(&s.lkey.get())
                .filter(|m| m.pd == q.pd)
                .ok_or((CqeStatus::LocalProtection, s.lkey.get()))?;
            let len = s.len.get();
            let iova = mr
                .translate(s.addr.get(), u64::from(len))
                .ok_or((CqeStatus::LocalLength, s.lkey.get()))?;
            self.dev
                .dma_check(Iova(iova), len as usize)
                .map_err(|_| (CqeStatus::LocalAccess, s.lkey.get()))?;
            // (a message is at most 4 GiB - 1: the length a CQE and a RETH carry)
            total = total
                .checked_add(len)
                .ok_or((CqeStatus::LocalLength, s.lkey.get()))?;
            pieces.push((iova, len));
        }
        Ok(GatherList { pieces })
    }

    pub fn reg(&self, off: u64) -> u32 {
        self.dev.reg_read32(off).unwrap_or(0)
    }
    pub fn reg_w(&self, off: u64, v: u32) {
        // Offsets are the reference map's: always inside BAR0.
        let _ = self.dev.reg_write32(off, v);
    }
    pub fn reg64(&self, lo: u64, hi: u64) -> u64 {
        u64::from(self.reg(lo)) | (u64::from(self.reg(hi)) << 32)
    }

    pub fn publish_port(&self, p: usize) {
        publish_port(
            &self.dev,
            &self.params,
            &self.port_admin,
            &self.port_link,
            p,
        );
    }

    pub fn port_plane(&self, p: usize) -> u8 {
        (p as u32 % self.params.num_planes.max(1)) as u8
    }

    pub fn raise(&mut self, vector: u32) {
        raise(&self.dev, &mut self.counters, vector);
    }

    /// Writes an event record, or counts a drop when the ring is full or disabled.
    pub fn post_event(&mut self, event: Event, now_ns: u64) {
        post_event(&self.dev, &mut self.counters, event, now_ns);
    }

    /// Device QP `qpn` enters ERROR for `status` (a QP_FATAL event names it and `syndrome`).
    /// False (nothing done) when there is no such QP or it already is in ERROR; the caller
    /// flushes its pending work.
    pub fn enter_error(&mut self, qpn: u32, status: CqeStatus, syndrome: u32, now_ns: u64) -> bool {
        match self.t.qps.get_mut(&qpn) {
            Some(p) if p.state != mrc_abi::device::admin::QpState::Error => {
                p.state = mrc_abi::device::admin::QpState::Error;
            }
            _ => return false,
        }
        self.post_event(
            Event::QpFatal {
                qpn,
                status: status as u8,
                syndrome,
            },
            now_ns,
        );
        true
    }

    /// Writes a CQE to `cqn`, raising its vector when armed; a full CQ drops it and posts a
    /// CQ error event.
    pub fn post_cqe(&mut self, cqn: u32, c: &Completion, now_ns: u64) {
        let Some(cq) = self.t.cqs.get(&cqn).copied() else {
            self.counters.cqes_dropped += 1;
            return;
        };
        if cq.producer.wrapping_sub(cq.consumer) >= 1 << cq.log2 {
            self.counters.cqes_dropped += 1;
            self.post_event(
                Event::CqError {
                    cqn,
                    reason: CqErrorReason::Overflow,
                },
                now_ns,
            );
            return;
        }
        let Ok(raw) = c.encode(expected_owner(cq.producer, cq.log2)) else {
            self.counters.cqes_dropped += 1;
            return;
        };
        let slot = u64::from(cq.producer & ((1 << cq.log2) - 1));
        if self
            .dev
            .dma_write(Iova(cq.base + slot * 32), raw.as_bytes())
            .is_err()
        {
            self.counters.cqes_dropped += 1;
            self.post_event(
                Event::CqError {
                    cqn,
                    reason: CqErrorReason::AccessError,
                },
                now_ns,
            );
            return;
        }
        self.counters.cqes += 1;
        let fire = cq.armed
            && (!cq.solicited_only
                || c.solicited
                || c.status != mrc_abi::device::cqe::CqeStatus::Success);
        if let Some(q) = self.t.cqs.get_mut(&cqn) {
            q.producer = q.producer.wrapping_add(1);
            if fire {
                q.armed = false;
            }
        }
        if fire {
            self.raise(cq.vector);
        }
    }
}

fn reg(dev: &TwinDevice, off: u64) -> u32 {
    dev.reg_read32(off).unwrap_or(0)
}

/// Raises `vector` when the device's interrupts are enabled (counted).
pub(crate) fn raise(dev: &TwinDevice, counters: &mut NicCounters, vector: u32) {
    if reg(dev, DEV_CONTROL) & control::IRQ_ENABLE != 0 && dev.raise_interrupt(vector).is_ok() {
        counters.interrupts += 1;
    }
}

/// Writes an event record into the event queue of `dev`, or counts a drop when the ring is
/// full or disabled ([`NicState::post_event`] for callers holding parts of a [`NicState`]).
pub(crate) fn post_event(dev: &TwinDevice, counters: &mut NicCounters, event: Event, now_ns: u64) {
    if reg(dev, EVENTQ + Q_STATUS) & 1 == 0 {
        counters.events_dropped += 1;
        return;
    }
    let log2 = reg(dev, EVENTQ + Q_LOG2) as u8;
    let prod = reg(dev, EVENTQ + Q_PRODUCER);
    let cons = reg(dev, EVENTQ + Q_CONSUMER);
    if prod.wrapping_sub(cons) >= 1 << log2 {
        counters.events_dropped += 1;
        return;
    }
    let base =
        u64::from(reg(dev, EVENTQ + Q_BASE_LO)) | (u64::from(reg(dev, EVENTQ + Q_BASE_HI)) << 32);
    let slot = u64::from(prod & ((1 << log2) - 1));
    let rec = event.encode(expected_owner(prod, log2), now_ns);
    if dev
        .dma_write(Iova(base + slot * 32), rec.as_bytes())
        .is_err()
    {
        counters.events_dropped += 1;
        return;
    }
    let _ = dev.reg_write32(EVENTQ + Q_PRODUCER, prod.wrapping_add(1));
    counters.events += 1;
    let v = reg(dev, EVENTQ + Q_IRQ);
    raise(dev, counters, v);
}

/// Writes port `p`'s registers (admin, operational state, speed, plane).
pub(crate) fn publish_port(
    dev: &TwinDevice,
    params: &DeviceParams,
    admin: &[bool],
    link: &[bool],
    p: usize,
) {
    let (Some(&a), Some(&l)) = (admin.get(p), link.get(p)) else {
        return;
    };
    let base = u64::from(defaults::PORT) + 0x10 + p as u64 * 16;
    let oper = a && l;
    let w = |off: u64, v: u32| {
        let _ = dev.reg_write32(off, v);
    };
    w(base, u32::from(a));
    w(base + 4, u32::from(oper));
    w(base + 8, if oper { PORT_SPEED_MBPS } else { 0 });
    w(base + 12, p as u32 % params.num_planes.max(1));
}
