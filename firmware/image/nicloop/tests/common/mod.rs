//! The datapath model (`mrc_firmware::datapath::stage::Datapath`) standing in for the NIC's
//! datapath hardware behind the rings the loop sees (the loop's `Datapath` trait), a wire
//! between two of them, and the admin commands a host driver sends to set a NIC up.
#![allow(dead_code)]

use std::collections::VecDeque;

use mrc_abi::device::admin::body::{CreateCq, CreateQp, ObjectId, QpInit, QpRtr, QpRts, RegMr};
use mrc_abi::device::admin::{
    AdminCommand, AdminReply, QpModify, QpState, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_WRITE,
};
use mrc_abi::device::csr::{CsrEntry, CsrEvent};
use mrc_firmware::datapath::packet::{Packet, PacketBody, RxVerdict};
use mrc_firmware::datapath::stage::{Datapath as Stage, DatapathConfig};
use mrc_nicloop::Datapath;

/// Ring entries each way (the NIC's CSR rings hold 32).
pub const RING: usize = 32;
/// Payload bytes per packet.
pub const MTU: u32 = 1024;
/// Where the receiving NIC's region starts.
pub const REGION_VA: u64 = 0x40_0000_0000;

mrc_firmware::capacity! {
    /// The NIC's datapath as the model holds it: a QP context per device QPN (`1..16`, the
    /// doorbell pages), the NIC's per-QP sizes.
    pub struct DevCap {
        qps: 16, evs: 128, planes: 4, window_psns: 256, send_queue: 16, recv_queue: 16,
        regions: 8,
    }
}

/// The datapath model behind bounded rings: the DP->FW ring holds what the model reported and
/// the loop has not consumed, the FW->DP ring what the loop wrote and the model has not taken.
pub struct ModelDp {
    pub stage: Box<Stage<DevCap>>,
    pub events: VecDeque<CsrEntry>,
    pub orders: VecDeque<CsrEntry>,
    /// FW->DP ring size.
    pub orders_cap: usize,
    written: u32,
    taken: u32,
    /// Every FW->DP entry the loop wrote, in order.
    pub log: Vec<CsrEntry>,
    /// What the model passed on to the host interface (PostCqe, PostEvent, Complete,
    /// EvEvent), in order.
    pub host: Vec<CsrEntry>,
    /// Admin commands the host interface fetched, replies the loop returned.
    pub admin: VecDeque<[u8; 64]>,
    pub replies: Vec<AdminReply>,
    /// The model takes no FW->DP entry (a datapath that fell behind).
    pub stalled: bool,
}

impl ModelDp {
    pub fn new() -> ModelDp {
        let cfg = DatapathConfig {
            mtu_payload: MTU,
            ..DatapathConfig::DEFAULT
        };
        ModelDp {
            stage: Box::new(Stage::new(cfg)),
            events: VecDeque::new(),
            orders: VecDeque::new(),
            orders_cap: RING,
            written: 0,
            taken: 0,
            log: Vec::new(),
            host: Vec::new(),
            admin: VecDeque::new(),
            replies: Vec::new(),
            stalled: false,
        }
    }

    /// The hardware's part of a step at `now`: take the FW->DP entries, run the coalescing
    /// timers, report into the DP->FW ring as far as it has room.
    pub fn hw(&mut self, now: u64) {
        while !self.stalled && !self.orders.is_empty() {
            let batch: Vec<CsrEntry> = self.orders.iter().copied().collect();
            let n = self.stage.handle_commands(now, &batch);
            self.orders.drain(..n);
            self.taken = self.taken.wrapping_add(n as u32);
            self.drain_host();
            if n == 0 {
                break;
            }
        }
        self.drain_host();
        self.stage.handle_timeout(now);
        let room = RING.saturating_sub(self.events.len());
        let mut buf = vec![CsrEntry::ZERO; room];
        let n = self.stage.poll_events(&mut buf);
        self.events.extend(&buf[..n]);
    }

    fn drain_host(&mut self) {
        let mut buf = [CsrEntry::ZERO; 32];
        loop {
            let n = self.stage.poll_host_writes(&mut buf);
            if n == 0 {
                return;
            }
            self.host.extend(&buf[..n]);
        }
    }

    /// The host-interface writes, decoded.
    pub fn host_writes(&self) -> Vec<CsrEvent> {
        self.host
            .iter()
            .map(|e| e.decode().expect("the loop writes valid entries"))
            .collect()
    }

    /// Every FW->DP entry the loop wrote, decoded.
    pub fn written(&self) -> Vec<CsrEvent> {
        self.log
            .iter()
            .map(|e| e.decode().expect("the loop writes valid entries"))
            .collect()
    }
}

impl Datapath for ModelDp {
    fn peek_events(&mut self, out: &mut [CsrEntry]) -> usize {
        let n = out.len().min(self.events.len());
        for (o, e) in out.iter_mut().zip(self.events.iter()) {
            *o = *e;
        }
        n
    }
    fn consume_events(&mut self, n: usize) {
        self.events.drain(..n.min(self.events.len()));
    }
    fn orders_room(&mut self) -> usize {
        self.orders_cap.saturating_sub(self.orders.len())
    }
    fn push_orders(&mut self, entries: &[CsrEntry]) -> usize {
        let n = entries.len().min(self.orders_room());
        self.orders.extend(&entries[..n]);
        self.log.extend(&entries[..n]);
        self.written = self.written.wrapping_add(n as u32);
        n
    }
    fn orders_written(&self) -> u32 {
        self.written
    }
    fn orders_taken(&mut self) -> u32 {
        self.taken
    }
    fn pop_admin(&mut self) -> Option<[u8; 64]> {
        self.admin.pop_front()
    }
    fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
        self.replies.push(*reply);
        true
    }
}

/// The packets on the wire one way, and what the receiving model made of them.
#[derive(Default)]
pub struct Wire {
    /// Packets sent, not yet taken by the receiving model (it may hold back under
    /// back-pressure).
    pub in_flight: VecDeque<Packet>,
    /// Data packets sent (first transmissions and retransmissions).
    pub data_sent: u64,
    /// Packets the wire dropped.
    pub dropped: u64,
    /// Payloads placed at the receiver: (region slot, offset, bytes).
    pub placed: Vec<(u16, u64, u32)>,
}

impl Wire {
    /// Move what `from` sends to `to` at `now`; `drop` decides which packets the wire loses.
    pub fn carry(
        &mut self,
        now: u64,
        from: &mut ModelDp,
        to: &mut ModelDp,
        mut drop: impl FnMut(&Packet, u64) -> bool,
    ) {
        let mut out = vec![Packet::FILL; 64];
        loop {
            let n = from.stage.poll_packets(now, &mut out);
            for p in &out[..n] {
                if matches!(p.body, PacketBody::Write { .. }) {
                    self.data_sent += 1;
                }
                if drop(p, self.data_sent) {
                    self.dropped += 1;
                } else {
                    self.in_flight.push_back(*p);
                }
            }
            if n < out.len() {
                break;
            }
        }
        let pkts: Vec<Packet> = self.in_flight.iter().copied().collect();
        let mut verdicts = vec![RxVerdict::Consumed; pkts.len()];
        let taken = to.stage.handle_packets(now, &pkts, &mut verdicts[..]);
        for v in &verdicts[..taken] {
            if let RxVerdict::Place {
                slot, offset, len, ..
            } = *v
            {
                self.placed.push((slot, offset, len));
            }
        }
        self.in_flight.drain(..taken);
    }

    /// Bytes placed.
    pub fn placed_bytes(&self) -> u64 {
        self.placed.iter().map(|p| u64::from(p.2)).sum()
    }
}

/// The 64 bytes of command `c` (as the driver writes them into the admin ring).
pub fn encode(c: &AdminCommand, id: u16) -> [u8; 64] {
    let cmd = c.encode(id, 0);
    let mut out = [0u8; 64];
    out[0] = cmd.opcode;
    out[1] = cmd.flags;
    out[2..4].copy_from_slice(&cmd.command_id.get().to_le_bytes());
    out[8..].copy_from_slice(&cmd.body);
    out
}

/// An object id body.
pub fn id(v: u32) -> ObjectId {
    ObjectId { id: v.into() }
}

/// A 64-entry CQ.
pub fn create_cq() -> AdminCommand {
    AdminCommand::CreateCq(CreateCq {
        log2_entries: 6,
        rsvd: 0,
        irq_vector: 1.into(),
        rsvd2: 0.into(),
        base: 0x1_0000.into(),
    })
}

/// A QP of 16-entry queues on PD `pd`, both queues completing on CQ `cq`.
pub fn create_qp(pd: u32, cq: u32) -> AdminCommand {
    AdminCommand::CreateQp(CreateQp {
        pd: pd.into(),
        send_cq: cq.into(),
        recv_cq: cq.into(),
        sq_log2: 4,
        rq_log2: 4,
        rsvd: 0.into(),
        sq_base: 0x2_0000.into(),
        rq_base: 0x3_0000.into(),
    })
}

/// RESET -> INIT with EV profile `ev_profile` and the default CC profile.
pub fn init(qpn: u32, ev_profile: u32) -> AdminCommand {
    AdminCommand::ModifyQp(QpModify::Init(QpInit {
        qpn: qpn.into(),
        to_state: QpState::Init as u8,
        dscp: 26,
        hint_flags: 0.into(),
        ev_profile: ev_profile.into(),
        cc_profile: 0.into(),
    }))
}

/// INIT -> RTR towards QP `dest` at GID `remote`.
pub fn rtr(qpn: u32, dest: u32, remote: [u8; 16], mpr: u16, wimm: u16) -> AdminCommand {
    AdminCommand::ModifyQp(QpModify::Rtr(QpRtr {
        qpn: qpn.into(),
        to_state: QpState::Rtr as u8,
        flags: 0,
        responder_mpr: mpr.into(),
        dest_qpn: dest.into(),
        max_wimm: wimm.into(),
        rsvd: 0.into(),
        rq_psn: 0.into(),
        remote_addr: remote,
    }))
}

/// RTR -> RTS.
pub fn rts(qpn: u32, mpr: u16, retry: u8) -> AdminCommand {
    AdminCommand::ModifyQp(QpModify::Rts(QpRts {
        qpn: qpn.into(),
        to_state: QpState::Rts as u8,
        retry_count: retry,
        requester_mpr: mpr.into(),
        max_wimm: 8.into(),
        ack_timeout_exp: 6,
        rsvd: 0,
        sq_psn: 0.into(),
    }))
}

/// A 1 MiB region at [`REGION_VA`], locally and remotely writable.
pub fn reg_mr(pd: u32) -> AdminCommand {
    AdminCommand::RegMr(RegMr {
        pd: pd.into(),
        access: (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).into(),
        va: REGION_VA.into(),
        iova: 0x5000_0000.into(),
        length: (1u64 << 20).into(),
    })
}
