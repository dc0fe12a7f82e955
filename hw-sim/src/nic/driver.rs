//! The driver as the NIC's host: a [`Nic`] built by [`Nic::for_driver`] has no flow table; its
//! host is the real `mrc-driver` behind a device side (the register map, admin executor and
//! rings of `nic_host`) that turns what the driver writes into calls here and writes back what
//! the NIC reports. Everything between those two edges is the NIC model every run uses: the
//! shards (datapath stage + firmware main loop), the PCIe link, the datapath clock, the
//! firmware cores, the fabric.
//!
//! # The contract with the device side
//! - **QPs and regions**: the admin executor (`mrc_firmware::admin`, the code the NIC image
//!   runs) drives the NIC's engines through [`DriverEngine`], its `QpEngine`. CREATE_QP takes
//!   the lowest free QP position (shard `p / SHARD_QPS`, slot `p % SHARD_QPS`); the NIC QPN is
//!   the position. MODIFY_QP runs the engine's own checks and transitions with the attributes
//!   the driver set (MPR, max WIMM, retry count, timeout, EV and CC profiles); REG_MR /
//!   DEREG_MR of remotely writable regions reach every shard's stage; DENY_EV and port state
//!   reach the engines. The engine's commands (QP contexts, EV tables) reach the stages at the
//!   next [`Nic::driver_settle`], at once (the admin path costs no firmware time), unless the
//!   shard's core is in the middle of a step: then they follow its unpublished commands from
//!   its next step, so an engine's completions reach the host in the order it made them.
//! - **Binding**: packets carry the device QPN the applications exchanged (the BTH
//!   destination QP), so the device side binds each device QPN to its NIC QPN and to the peer
//!   host its remote address names ([`Nic::driver_bind`]); a delivery's device QPN is
//!   translated on receipt, and the peer picks the QP's routes.
//! - **Send doorbell**: the device side reads the new send WQEs from the ring, checks and
//!   gathers their local bytes (kept under a handle, the stage's `LocalBuf`), and hands them to
//!   [`Nic::driver_post`], at most [`Nic::driver_room`] of them (the rest wait in the ring
//!   until completions make room). The NIC's PCIe link carries the doorbell write and the WQE
//!   reads, and the stage sees the work requests when the reads completed: the flow host's
//!   path (`ring`, `fetched`). Each is posted signalled; the device side suppresses the CQE of
//!   an unsignalled one.
//! - **Receive doorbell**: receive WQEs go to the stage at once ([`Nic::driver_post_recv`]).
//! - **Payload bytes**: the fabric carries virtual payloads (length + pattern checksum); the
//!   bytes stay with the sender's device side under the send's handle until it completes. A
//!   placement at the receiver is a [`DriverEvent::Placed`] naming the sender's host and local
//!   buffer, the region slot and the offset: the device side copies the bytes into the
//!   region's memory. A send completes only once every byte was acknowledged, i.e. placed, so
//!   the bytes are there for every placement.
//! - **Completions and EV events**: the engines' host writes become [`DriverEvent`]s, due when
//!   their posted write (a CQE, an event record, a placed payload) reached host memory over the
//!   NIC's link, in the link's order ([`Nic::driver_poll`]): a Write-with-Immediate's bytes are
//!   in memory before its CQE. The NIC's DMA event wakes at the next one's time.
//! - **Time**: the NICs, their links and the fabric run in the simulator's virtual time (a
//!   `run::World` in a [`crate::core::sim::Simulator`]); the driver has no clock. The device
//!   side runs the simulator after each doorbell until every NIC is idle
//!   ([`Nic::driver_idle`]) or a step budget ran out, so an application polling its CQ sees
//!   what the NICs did by then.

use std::collections::VecDeque;

use mrc_firmware::admin::QpEngine;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::datapath::packet::{LocalBuf, PacketBody, RxVerdict, SendWr};
use mrc_firmware::datapath::placement::MemRegion;
use mrc_firmware::engine::{
    CcProfile, Completion, CompletionError, CompletionKind, QpAttrs, QpError, QpState,
};

use super::cores::Core;
use super::dp_clock::DpClock;
use super::flows::FlowTable;
use super::pair::HostWrite;
use super::shard::{Shard, WideShard};
use super::{
    ns, pcie, place, shard_configs, shard_of, Conn, Nic, NicConfig, NicError, StagePacket,
    SEND_QUEUE, SHARD_QPS, WIN,
};
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::Time;
use crate::fabric::Fabric;

/// No QP / no host.
const NONE: u32 = u32::MAX;
/// Device QPNs the binding table holds (a device numbers its QPs below its doorbell pages).
const MAX_DEVICE_QPN: u32 = 1 << 16;

/// What the NIC reports to the driver's device side, due when it reached host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverEvent {
    /// What the engine wrote for the host (QPNs the NIC's).
    Wrote(HostWrite),
    /// A payload was placed ([`Placement`]).
    Placed(Placement),
}

/// A placed payload: `len` bytes at byte `offset` of registered region `slot`, for message
/// `msn` of QP `qpn`, from offset `local.offset` of the send `local.handle` of host `src_host`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// NIC QPN of the receiving QP.
    pub qpn: u32,
    /// The sending host.
    pub src_host: u32,
    /// The sender's local buffer of the bytes.
    pub local: LocalBuf,
    /// Message sequence number.
    pub msn: u16,
    /// Region slot of the stage.
    pub slot: u16,
    /// Byte offset in the region.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
}

/// The driver-host state of a [`Nic`].
pub(crate) struct DriverPort {
    /// Per QP position: an engine QP lives there.
    open: Vec<bool>,
    /// Device QPN -> NIC QPN ([`NONE`]: unbound).
    by_dev: Vec<u32>,
    /// Reports on their way to host memory, in arrival order.
    out: VecDeque<(Time, DriverEvent)>,
    /// Per QP position: send work requests handed to the NIC and not completed (a QP
    /// destroyed or reset drops its own without completions).
    outstanding: Vec<u32>,
    /// Per QP position: host probes (PROBE_EV) started whose result has not been written (a
    /// QP destroyed or reset drops its own without results).
    probes: Vec<u32>,
    /// Shards whose engine took an admin change since the last settle.
    dirty: Vec<usize>,
    /// The NIC's component id (for loopback deliveries), as of the last input.
    me: ComponentId,
}

impl DriverPort {
    fn new(qps: usize) -> DriverPort {
        DriverPort {
            open: vec![false; qps],
            by_dev: Vec::new(),
            out: VecDeque::new(),
            outstanding: vec![0; qps],
            probes: vec![0; qps],
            dirty: Vec::new(),
            me: ComponentId(0),
        }
    }

    /// The NIC QPN bound to device QPN `dev` ([`NONE`] when unbound: the delivery counts as an
    /// unknown QP).
    pub(super) fn nic_qpn(&self, dev: u32) -> u32 {
        self.by_dev.get(dev as usize).copied().unwrap_or(NONE)
    }

    fn push(&mut self, at: Time, e: DriverEvent) {
        // One link: writes arrive in the order they were posted.
        let at = at.max(self.out.back().map_or(Time::ZERO, |b| b.0));
        self.out.push_back((at, e));
    }

    /// When the next report reaches host memory after `now` (the NIC wakes then, so that
    /// virtual time reaches it; the owner takes those due by now, [`Nic::driver_poll`]).
    pub(super) fn next_due_after(&self, now: Time) -> Option<Time> {
        self.out.iter().map(|o| o.0).find(|&t| t > now)
    }

    /// The engine wrote `w` for the host; it arrives at `seen`.
    pub(super) fn wrote(&mut self, seen: Time, w: HostWrite) {
        match w {
            HostWrite::Completion(c) if c.kind == CompletionKind::Send => {
                if let Some(o) = self.outstanding.get_mut(c.qpn as usize) {
                    *o = o.saturating_sub(1);
                }
            }
            HostWrite::ProbeResult { qpn, .. } => {
                if let Some(p) = self.probes.get_mut(qpn as usize) {
                    *p = p.saturating_sub(1);
                }
            }
            _ => {}
        }
        self.push(seen, DriverEvent::Wrote(w));
    }

    /// The stage refused a fetched work request (its QP left RTS while the WQE was on the
    /// way): it completes flushed.
    pub(super) fn refused(&mut self, now: Time, qpn: u32, wr_id: u64) {
        self.wrote(
            now,
            HostWrite::Completion(Completion {
                qpn,
                wr_id,
                kind: CompletionKind::Send,
                status: Err(CompletionError::Flushed),
            }),
        );
    }

    /// Delivery `p` for QP `qpn` from `src_host` placed `len` bytes at `offset` of region
    /// `slot`; the write arrives at `seen`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn placed(
        &mut self,
        seen: Time,
        qpn: u32,
        src_host: u32,
        p: &StagePacket,
        slot: u16,
        offset: u64,
        len: u32,
    ) {
        let local = match p.body {
            PacketBody::Write { local, .. } => local,
            _ => LocalBuf::default(),
        };
        self.push(
            seen,
            DriverEvent::Placed(Placement {
                qpn,
                src_host,
                local,
                msn: p.msn,
                slot,
                offset,
                len,
            }),
        );
    }
}

/// The NIC's engines as the admin executor drives them (see the module docs); changes reach
/// the stages at the next [`Nic::driver_settle`].
pub struct DriverEngine<'a> {
    nic: &'a mut Nic,
}

impl DriverEngine<'_> {
    fn dirty(&mut self, k: usize) {
        if let Some(d) = self.nic.driver.as_mut() {
            d.dirty.push(k);
        }
    }

    /// QP `qpn` dropped its work requests without completions (and its host probes without
    /// results).
    fn forget(&mut self, qpn: u32) {
        if let Some(d) = self.nic.driver.as_mut() {
            for v in [&mut d.outstanding, &mut d.probes] {
                if let Some(o) = v.get_mut(qpn as usize) {
                    *o = 0;
                }
            }
        }
    }

    fn every_shard(&mut self) {
        for k in 0..self.nic.shards.len() {
            self.dirty(k);
        }
    }
}

impl QpEngine for DriverEngine<'_> {
    fn create_qp(&mut self) -> Result<Option<u32>, QpError> {
        let nic = &mut *self.nic;
        let d = nic.driver.as_mut().ok_or(QpError::TableFull)?;
        let p = d.open.iter().position(|o| !o).ok_or(QpError::TableFull)?;
        let (k, slot) = shard_of(p as u32, nic.width);
        let e = nic.shards.get_mut(k).ok_or(QpError::TableFull)?;
        let got = e.create_qp()?;
        if got != slot {
            // (the lowest free position's slot is its shard's lowest free slot)
            let _ = e.destroy_qp(got);
            return Err(QpError::TableFull);
        }
        d.open[p] = true;
        self.dirty(k);
        Ok(Some(p as u32))
    }

    fn modify_qp(
        &mut self,
        qpn: u32,
        to: QpState,
        attrs: &QpAttrs,
        now_ns: u64,
    ) -> Result<(), QpError> {
        let (k, slot) = place(&self.nic.pos_of, qpn, self.nic.width);
        // The NIC's share of its link: NSCC's windows fit the NIC's loaded bandwidth-delay
        // product, a QP's initial window shared with the NIC's other open QPs (as the flow
        // hosts' QPs share it with the NIC's other sending QPs).
        let mut attrs = *attrs;
        if let Some(CcProfile::Nscc(mut p)) = attrs.cc_profile {
            let open = self
                .nic
                .driver
                .as_ref()
                .map_or(1, |d| d.open.iter().filter(|o| **o).count());
            super::setup::fit_windows(&self.nic.cfg, &mut p);
            super::setup::share_init(&mut p, open);
            attrs.cc_profile = Some(CcProfile::Nscc(p));
        }
        let e = self
            .nic
            .shards
            .get_mut(k)
            .ok_or(QpError::UnknownQp { qpn })?;
        e.modify_qp(slot, to, &attrs, now_ns)?;
        if to == QpState::Reset {
            self.forget(qpn);
        }
        self.dirty(k);
        Ok(())
    }

    fn destroy_qp(&mut self, qpn: u32) {
        let (k, slot) = place(&self.nic.pos_of, qpn, self.nic.width);
        let Some(e) = self.nic.shards.get_mut(k) else {
            return;
        };
        let _ = e.destroy_qp(slot);
        let (cfg, host) = (self.nic.cfg, self.nic.host);
        if let Some(c) = self.nic.conns.get_mut(qpn as usize) {
            *c = Conn::new(&cfg, host, NONE);
        }
        self.forget(qpn);
        if let Some(d) = self.nic.driver.as_mut() {
            if let Some(o) = d.open.get_mut(qpn as usize) {
                *o = false;
            }
            for b in d.by_dev.iter_mut().filter(|b| **b == qpn) {
                *b = NONE;
            }
        }
        self.dirty(k);
    }

    fn register_region(&mut self, region: MemRegion) -> bool {
        // Every stage places for its own QPs: each holds every region.
        for k in 0..self.nic.shards.len() {
            if self.nic.shards[k].register_region(region).is_err() {
                for e in &mut self.nic.shards[..k] {
                    e.deregister_region(region.rkey);
                }
                return false;
            }
        }
        true
    }

    fn deregister_region(&mut self, rkey: u32) {
        for e in &mut self.nic.shards {
            e.deregister_region(rkey);
        }
    }

    fn set_ev_allowed(&mut self, now_ns: u64, qpn: u32, ev: u16, allow: bool) {
        let (k, slot) = place(&self.nic.pos_of, qpn, self.nic.width);
        if let Some(e) = self.nic.shards.get_mut(k) {
            e.set_ev_allowed(now_ns, slot, ev, allow);
            self.dirty(k);
        }
    }

    fn probe_ev(&mut self, now_ns: u64, qpn: u32, ev: u16, probe_id: u32, timeout_ns: u64) -> bool {
        let (k, slot) = place(&self.nic.pos_of, qpn, self.nic.width);
        let started = self
            .nic
            .shards
            .get_mut(k)
            .is_some_and(|e| e.probe_ev(now_ns, slot, ev, probe_id, timeout_ns));
        if started {
            self.dirty(k);
            if let Some(p) = self
                .nic
                .driver
                .as_mut()
                .and_then(|d| d.probes.get_mut(qpn as usize))
            {
                *p += 1;
            }
        }
        started
    }

    fn plane(&mut self, now_ns: u64, plane: u8, up: bool) {
        for e in &mut self.nic.shards {
            e.plane(now_ns, plane, up);
        }
        self.every_shard();
    }

    fn mtu_payload(&self) -> u32 {
        self.nic.cfg.mtu_payload
    }

    fn qp_limits(&self) -> [u32; 3] {
        [WIN as u32, SEND_QUEUE as u32, WideShard::RECV_QUEUE as u32]
    }
}

impl Nic {
    /// `host`'s NIC for the driver (see the module docs): room for `qps` QPs (a multiple of
    /// [`SHARD_QPS`] at least), none open, no region registered.
    ///
    /// # Errors
    /// As [`Nic::new`].
    pub fn for_driver(host: u32, cfg: NicConfig, qps: usize) -> Result<Nic, NicError> {
        let mut nic = Nic::new(host, cfg, &[], &[], &[])?;
        let (dcfg, ecfg, _) = shard_configs(&cfg)?;
        let count = qps.div_ceil(SHARD_QPS).max(1);
        let n = count * SHARD_QPS;
        nic.width = SHARD_QPS;
        nic.shards = (0..count)
            .map(|_| Shard::new(SHARD_QPS, dcfg, ecfg))
            .collect::<Result<_, _>>()
            .map_err(|_| NicError::Engine("engine config"))?;
        for s in &mut nic.shards {
            s.set_blocks(super::blocks::SimBlocks::new(&cfg.datapath)?);
        }
        nic.pos_of = (0..n as u32).collect();
        nic.qpn_at = nic.pos_of.clone();
        nic.conns = (0..n).map(|_| Conn::new(&cfg, host, NONE)).collect();
        nic.flows = FlowTable::new(0);
        nic.shard_ready = vec![true; count];
        nic.retx_maybe = vec![true; count];
        nic.cmds_seen = vec![0; count];
        nic.shard_deadline = vec![None; count];
        nic.deadline_dirty = (0..count).collect();
        nic.input_shards = (0..count).collect();
        nic.hostq = pcie::HostQueues::new(n);
        nic.cores = if cfg.firmware.timed {
            Core::deal(usize::from(cfg.firmware.cores), count)
        } else {
            Vec::new()
        };
        nic.dp = DpClock::new(vec![0; count]);
        nic.tx_rr = super::first_turn(&cfg, host, n);
        nic.driver = Some(Box::new(DriverPort::new(n)));
        Ok(nic)
    }

    /// Whether the host is the driver ([`Nic::for_driver`]).
    pub fn is_driver(&self) -> bool {
        self.driver.is_some()
    }

    /// The engines, for the admin executor (a NIC of a scenario's workload has no QP to give:
    /// its `create_qp` fails).
    pub fn driver_engine(&mut self) -> DriverEngine<'_> {
        DriverEngine { nic: self }
    }

    /// Moves what the admin executor changed into the stages (QP contexts, EV tables) and
    /// services the NIC.
    pub fn driver_settle(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        let mut dirty = match self.driver.as_mut() {
            Some(d) => {
                d.me = me;
                std::mem::take(&mut d.dirty)
            }
            None => return,
        };
        dirty.sort_unstable();
        dirty.dedup();
        for &k in &dirty {
            if k >= self.shards.len() {
                continue;
            }
            // A core in the middle of a step may hold this engine's earlier commands
            // (completions among them) unpublished: the new ones follow them from its next
            // step, never overtake them.
            if !self.core_mid_step(k) {
                self.with_writes(k, |e, w| e.flush_commands(ns(now), w));
            }
            self.shard_ready[k] = true;
            self.retx_maybe[k] = true;
            self.input_shards.push(k);
            self.deadline_dirty.push(k);
        }
        self.service(now, fab, s, me);
    }

    /// Device QPN `dev_qpn` is NIC QP `qpn`, connected to `peer` (its routes follow).
    pub fn driver_bind(&mut self, dev_qpn: u32, qpn: u32, peer: u32) {
        let (cfg, host) = (self.cfg, self.host);
        let Some(d) = self.driver.as_mut() else {
            return;
        };
        if dev_qpn >= MAX_DEVICE_QPN || d.open.get(qpn as usize) != Some(&true) {
            return;
        }
        if d.by_dev.len() <= dev_qpn as usize {
            d.by_dev.resize(dev_qpn as usize + 1, NONE);
        }
        d.by_dev[dev_qpn as usize] = qpn;
        if let Some(c) = self.conns.get_mut(qpn as usize) {
            if c.peer != peer {
                *c = Conn::new(&cfg, host, peer);
            }
        }
    }

    /// Packet `tx` of a QP connected to this NIC goes into its own receive path (through the
    /// PSN tracker, as a delivery would; module `dp_clock`).
    pub(super) fn loop_back(&mut self, mut tx: StagePacket, s: &mut Scheduler<'_>) {
        let Some(d) = self.driver.as_ref() else {
            return;
        };
        let me = d.me;
        let qpn = d.nic_qpn(tx.dest_qpn);
        let (k, slot) = place(&self.pos_of, qpn, self.width);
        if k >= self.shards.len() {
            self.counters.unknown_qpn += 1;
            return;
        }
        self.counters.tx_packets += 1;
        self.counters.tx_payload_bytes += u64::from(tx.payload_len);
        self.counters.rx_packets += 1;
        tx.dest_qpn = slot;
        let now = s.now();
        let at = self.dp.receive(now, &tx).unwrap_or(now);
        self.hold_rx(at, k, qpn, tx, s, me);
    }

    /// A packet from outside the fabric (a raw frame the device side parsed and checked:
    /// addressed to this NIC, from the device QP's peer) for device QP `dev_qpn`: it enters
    /// the QP's stage now, past the datapath clock (hostile-input tests want the verdict, not
    /// its timing), and the NIC is serviced. A placement of its payload names `local` as its
    /// bytes. `None` when no QP is bound to `dev_qpn` or the stage refused it.
    #[allow(clippy::too_many_arguments)]
    pub fn driver_inject(
        &mut self,
        now: Time,
        dev_qpn: u32,
        mut pkt: StagePacket,
        local: LocalBuf,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) -> Option<RxVerdict> {
        let d = self.driver.as_mut()?;
        d.me = me;
        let qpn = d.nic_qpn(dev_qpn);
        let (k, slot) = place(&self.pos_of, qpn, self.width);
        if k >= self.shards.len() {
            self.counters.unknown_qpn += 1;
            return None;
        }
        self.counters.rx_packets += 1;
        pkt.dest_qpn = slot;
        if let PacketBody::Write { local: l, .. } = &mut pkt.body {
            *l = local;
        }
        let verdict = self.enter_stage(now, k, qpn, &pkt, s, me);
        if verdict.is_none() {
            self.counters.rx_refused += 1;
        }
        self.service(now, fab, s, me);
        verdict
    }

    /// Send work requests QP `qpn` takes now: what its send queue holds beyond those in the
    /// stage and those being fetched (0 unless the QP is in RTS).
    pub fn driver_room(&self, qpn: u32) -> usize {
        let (k, slot) = place(&self.pos_of, qpn, self.width);
        let Some(e) = self.shards.get(k) else {
            return 0;
        };
        if e.qp_state(slot) != Some(QpState::Rts) {
            return 0;
        }
        let held = e.qp_progress(slot).map_or(0, |q| q.sq_queued);
        SEND_QUEUE.saturating_sub(held + self.hostq.pending(qpn) as usize)
    }

    /// The host rang QP `qpn`'s send doorbell for `wrs` (in ring order; each `wr_id` the
    /// handle of its bytes): the first [`Nic::driver_room`] of them go (doorbell, WQE fetch,
    /// stage). Returns how many went.
    pub fn driver_post(
        &mut self,
        now: Time,
        qpn: u32,
        wrs: &[SendWr],
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) -> usize {
        let n = wrs.len().min(self.driver_room(qpn));
        let Some(d) = self.driver.as_mut() else {
            return 0;
        };
        d.me = me;
        if n == 0 {
            return 0;
        }
        if let Some(o) = d.outstanding.get_mut(qpn as usize) {
            *o += n as u32;
        }
        self.counters.doorbells += 1;
        if self.cfg.pcie.ideal {
            for wr in &wrs[..n] {
                self.fetched(
                    now,
                    qpn,
                    SendWr {
                        signaled: true,
                        ..*wr
                    },
                );
            }
        } else {
            let mut batch = std::mem::take(&mut self.wr_buf);
            batch.clear();
            batch.extend(wrs[..n].iter().map(|wr| SendWr {
                signaled: true,
                ..*wr
            }));
            self.ring(now, qpn, &mut batch);
            self.wr_buf = batch;
        }
        self.stall_dirty.push(qpn);
        self.service(now, fab, s, me);
        n
    }

    /// A receive work request for QP `qpn` (`wr_id` comes back in its completion). False when
    /// the stage refused it (no such QP, not yet INIT, receive queue full).
    pub fn driver_post_recv(&mut self, qpn: u32, wr_id: u64) -> bool {
        let (k, slot) = place(&self.pos_of, qpn, self.width);
        self.shards
            .get_mut(k)
            .is_some_and(|e| e.post_recv(slot, wr_id).is_ok())
    }

    /// The region in slot `slot` of QP `qpn`'s stage (what a [`DriverEvent::Placed`] names).
    pub fn driver_region(&self, qpn: u32, slot: u16) -> Option<MemRegion> {
        let (k, _) = place(&self.pos_of, qpn, self.width);
        self.shards.get(k)?.region(slot)
    }

    /// Reports on their way to host memory (due or not).
    pub fn driver_reports(&self) -> usize {
        self.driver.as_ref().map_or(0, |d| d.out.len())
    }

    /// A report reached host memory by `now` ([`Nic::driver_poll`] has one to give).
    pub fn driver_due(&self, now: Time) -> bool {
        self.driver
            .as_ref()
            .is_some_and(|d| d.out.front().is_some_and(|o| o.0 <= now))
    }

    /// The next report that reached host memory by `now`.
    pub fn driver_poll(&mut self, now: Time) -> Option<DriverEvent> {
        let d = self.driver.as_mut()?;
        if d.out.front().is_some_and(|o| o.0 <= now) {
            return d.out.pop_front().map(|o| o.1);
        }
        None
    }

    /// Nothing left to do for the host: no send outstanding, no WQE fetch or report on its
    /// way, no packet in the transmit blocks or waiting for its payload, no report waiting for
    /// or running on a firmware core (engine timers, such as EV probes, may still be armed).
    /// With the fabric empty too ([`crate::run::World::driver_quiet`]), every completion the
    /// host will get without new work is in [`Nic::driver_poll`]'s hands.
    pub fn driver_idle(&self) -> bool {
        self.driver.as_ref().is_none_or(|d| {
            d.outstanding.iter().all(|o| *o == 0)
                && d.out.is_empty()
                && d.probes.iter().all(|p| *p == 0)
        }) && self.hostq.next_ready().is_none()
            && self.dma.bytes == 0
            && self.dp.next_due().is_none()
            && self.shards.iter().all(|e| !e.has_reports())
            && self.cores.iter().all(|c| c.busy_until.is_none())
    }
}

#[cfg(test)]
mod tests;
