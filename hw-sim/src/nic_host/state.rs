//! Device-side tables of one simulated NIC, register helpers, event and CQE posting.

use std::collections::BTreeMap;
use std::sync::Arc;

use mrc_abi::device::admin::body::{CcProfile, EvFormatProfile};
use mrc_abi::device::admin::{EvProfileKind, EvProfileState, QpState};
use mrc_abi::device::cqe::{expected_owner, Completion, CqeStatus};
use mrc_abi::device::event::{CqErrorReason, Event};
use mrc_abi::device::regs::{control, defaults, DeviceParams};
use mrc_abi::device::wqe::{SendRequest, SendWqe};
use mrc_abi::device::EvState;
use mrc_abi::wire::EvFormat;
use mrc_driver::sys::twin::TwinDevice;
use mrc_driver::sys::Iova;
use mrc_driver::zerocopy::{FromBytes, IntoBytes};

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

#[derive(Clone, Copy, Debug)]
pub(crate) struct Mr {
    pub pd: u32,
    pub access: u32,
    pub va: u64,
    pub iova: u64,
    pub len: u64,
}

impl Mr {
    /// IOVA of `len` bytes at virtual address `va`, if inside.
    pub fn translate(&self, va: u64, len: u64) -> Option<u64> {
        let end = va.checked_add(len)?;
        (va >= self.va && end <= self.va + self.len).then(|| self.iova + (va - self.va))
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Cq {
    pub base: u64,
    pub log2: u8,
    pub vector: u32,
    pub producer: u32,
    pub consumer: u32,
    /// `Some(solicited_only)` when armed.
    pub armed: Option<bool>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Qp {
    pub pd: u32,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub sq_base: u64,
    pub sq_log2: u8,
    pub rq_base: u64,
    pub rq_log2: u8,
    pub state: QpState,
    pub sq_prod: u32,
    pub sq_cons: u32,
    pub rq_prod: u32,
    pub rq_cons: u32,
    pub dest_qpn: u32,
    pub remote_addr: [u8; 16],
    pub ev_profile: u32,
    pub cc_profile: u32,
    pub sq_psn: u32,
    pub rq_psn: u32,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Ev {
    pub value: u32,
    pub carrier: [u8; 16],
    pub state: EvState,
    pub rtt_ns: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct EvProf {
    pub format: u32,
    pub kind: EvProfileKind,
    pub state: EvProfileState,
    pub min_active: u16,
    pub event_mask: u32,
    pub evs: Vec<Ev>,
}

/// One NIC's device-side state.
pub(crate) struct NicState {
    pub dev: Arc<TwinDevice>,
    pub vectors: u32,
    pub params: DeviceParams,
    pub gid: [u8; 16],
    pub counters: NicCounters,
    pub pds: BTreeMap<u32, ()>,
    pub next_pd: u32,
    pub mrs: BTreeMap<u32, Mr>,
    pub next_mr: u32,
    pub cqs: BTreeMap<u32, Cq>,
    pub qps: BTreeMap<u32, Qp>,
    pub formats: BTreeMap<u32, EvFormatProfile>,
    pub ev_profiles: BTreeMap<u32, EvProf>,
    pub cc_profiles: BTreeMap<u32, CcProfile>,
    pub next_profile: u32,
    pub port_admin: Vec<bool>,
    pub port_link: Vec<bool>,
    /// Send doorbells only record the producer until released (see `SimNic::hold_doorbells`);
    /// survives a device reset.
    pub hold_doorbells: bool,
}

/// Bit 31 of an rkey: distinguishes it from the lkey of the same region.
pub(crate) const RKEY_BIT: u32 = 1 << 31;
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
            pds: BTreeMap::new(),
            next_pd: 1,
            mrs: BTreeMap::new(),
            next_mr: 1,
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            formats: BTreeMap::new(),
            ev_profiles: BTreeMap::new(),
            cc_profiles: BTreeMap::new(),
            next_profile: 1,
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

    /// The local bytes of send request `r` of QP `q`, gathered from its SGEs by DMA after
    /// checking each against the NIC's MRs; on a fault the requester's CQE status and syndrome
    /// (the lkey).
    pub fn gather(&self, q: &Qp, r: &SendRequest) -> Result<Vec<u8>, (CqeStatus, u32)> {
        let mut data = Vec::new();
        for s in &r.sges {
            let mr = self
                .mrs
                .get(&s.lkey.get())
                .filter(|m| m.pd == q.pd)
                .ok_or((CqeStatus::LocalProtection, s.lkey.get()))?;
            let len = s.len.get();
            let iova = mr
                .translate(s.addr.get(), u64::from(len))
                .ok_or((CqeStatus::LocalLength, s.lkey.get()))?;
            let at = data.len();
            data.resize(at + len as usize, 0);
            self.dev
                .dma_read(Iova(iova), &mut data[at..])
                .map_err(|_| (CqeStatus::LocalAccess, s.lkey.get()))?;
        }
        Ok(data)
    }

    pub fn dev_vectors(&self) -> u32 {
        self.vectors
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
        let base = u64::from(defaults::PORT) + 0x10 + p as u64 * 16;
        let oper = self.port_admin[p] && self.port_link[p];
        self.reg_w(base, u32::from(self.port_admin[p]));
        self.reg_w(base + 4, u32::from(oper));
        self.reg_w(base + 8, if oper { PORT_SPEED_MBPS } else { 0 });
        self.reg_w(base + 12, p as u32 % self.params.num_planes.max(1));
    }

    pub fn port_plane(&self, p: usize) -> u8 {
        (p as u32 % self.params.num_planes.max(1)) as u8
    }

    pub fn raise(&mut self, vector: u32) {
        if self.reg(DEV_CONTROL) & control::IRQ_ENABLE != 0
            && self.dev.raise_interrupt(vector).is_ok()
        {
            self.counters.interrupts += 1;
        }
    }

    /// Writes an event record, or counts a drop when the ring is full or disabled.
    pub fn post_event(&mut self, event: Event, now_ns: u64) {
        if self.reg(EVENTQ + Q_STATUS) & 1 == 0 {
            self.counters.events_dropped += 1;
            return;
        }
        let log2 = self.reg(EVENTQ + Q_LOG2) as u8;
        let prod = self.reg(EVENTQ + Q_PRODUCER);
        let cons = self.reg(EVENTQ + Q_CONSUMER);
        if prod.wrapping_sub(cons) >= 1 << log2 {
            self.counters.events_dropped += 1;
            return;
        }
        let base = self.reg64(EVENTQ + Q_BASE_LO, EVENTQ + Q_BASE_HI);
        let slot = u64::from(prod & ((1 << log2) - 1));
        let rec = event.encode(expected_owner(prod, log2), now_ns);
        if self
            .dev
            .dma_write(Iova(base + slot * 32), rec.as_bytes())
            .is_err()
        {
            self.counters.events_dropped += 1;
            return;
        }
        self.reg_w(EVENTQ + Q_PRODUCER, prod.wrapping_add(1));
        self.counters.events += 1;
        let v = self.reg(EVENTQ + Q_IRQ);
        self.raise(v);
    }

    /// Writes a CQE to `cqn`, raising its vector when armed; a full CQ drops it and posts a
    /// CQ error event.
    pub fn post_cqe(&mut self, cqn: u32, c: &Completion, now_ns: u64) {
        let Some(cq) = self.cqs.get(&cqn).copied() else {
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
        let fire = match cq.armed {
            Some(solicited_only) => {
                !solicited_only
                    || c.solicited
                    || c.status != mrc_abi::device::cqe::CqeStatus::Success
            }
            None => false,
        };
        if let Some(q) = self.cqs.get_mut(&cqn) {
            q.producer = q.producer.wrapping_add(1);
            if fire {
                q.armed = None;
            }
        }
        if fire {
            self.raise(cq.vector);
        }
    }

    /// Usable (GOOD or SKIP) EVs of a profile.
    pub fn usable_evs(&self, profile: u32) -> u32 {
        if profile == 0 {
            return self.params.max_evs_per_qp;
        }
        self.ev_profiles.get(&profile).map_or(0, |p| {
            p.evs
                .iter()
                .filter(|e| matches!(e.state, EvState::Good | EvState::Skip))
                .count() as u32
        })
    }

    /// EV values of a new profile: AUTO spreads over the format's port range (SRv6: one uSID
    /// per EV), GENERATED draws them from the seed, EXPLICIT starts empty (zero) until
    /// REPLACE_EV.
    pub fn make_evs(fmt: &EvFormatProfile, kind: EvProfileKind, n: u16, seed: u32) -> Vec<Ev> {
        let lo = u32::from(fmt.src_port_min.get());
        let span = u32::from(fmt.src_port_max.get()) - lo + 1;
        let mut x = u64::from(seed) | 1;
        (0..n)
            .map(|i| {
                let pick = match kind {
                    EvProfileKind::Auto => u32::from(i),
                    EvProfileKind::Generated => {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u32
                    }
                    EvProfileKind::Explicit => 0,
                };
                let mut ev = Ev {
                    value: 0,
                    carrier: [0; 16],
                    state: EvState::Good,
                    rtt_ns: 0,
                };
                if kind == EvProfileKind::Explicit {
                    return ev;
                }
                match fmt.encoding() {
                    Some(EvFormat::Srv6) => {
                        let usid = (pick % 0xfffe) as u16 + 1;
                        if let Ok(a) =
                            mrc_abi::wire::usid::carrier(fmt.locator_block.get(), &[usid])
                        {
                            ev.carrier = a.octets();
                        }
                    }
                    _ => ev.value = lo + pick % span,
                }
                ev
            })
            .collect()
    }
}
