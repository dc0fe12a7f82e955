//! The fake datapath both NIC-loop test files drive: bounded CSR rings of raw entries, the
//! receive header queue, the transmit header queue, the admin command and reply queues, and the
//! wire-side conversion of a transmitted packet into the receiving datapath's entries.
#![allow(dead_code)]

use std::collections::VecDeque;

use mrc_abi::device::admin::AdminReply;
use mrc_abi::device::csr::{AckSummary, CsrEvent, NackEntry, ProbeReply, ENTRY_BYTES};
use mrc_abi::device::rxh::{
    RxhEntry, RxhVerdict, RxhVerdictCode, RXH_ENTRY_BYTES, RXH_VERDICT_BYTES, RXH_VERDICT_OFFSET,
};
use mrc_abi::device::txh::{Txh, TXH_ENTRY_BYTES};
use mrc_firmware::datapath::ack_gen::TrimMark;
use mrc_firmware::engine::{RxMeta, TxBody, TxPacket};
use mrc_nicloop::{is_csr_reported, rxh_entry, tx_packet, txh_entry, Datapath};

pub const RING: usize = 64;
pub const REGION_VA: u64 = 0x40_0000_0000;
pub const MTU: u32 = 1024;

/// One NIC's fake datapath: bounded CSR rings of raw entries, the receive header queue (raw
/// RXH entries; answered entries are kept with their verdict bytes), a transmit queue, a
/// placement log read from the verdicts.
#[derive(Default)]
pub struct FakeDp {
    pub events: VecDeque<[u8; ENTRY_BYTES]>,
    pub orders: Vec<[u8; ENTRY_BYTES]>,
    pub orders_pending: usize,
    pub rx: VecDeque<[u8; RXH_ENTRY_BYTES]>,
    pub answered: Vec<[u8; RXH_ENTRY_BYTES]>,
    /// What the datapath took off the transmit header queue, decoded.
    pub tx: Vec<TxPacket>,
    /// Transmit header queue size (0: [`RING`]); the queue is emptied once per round.
    pub tx_cap: usize,
    /// Refuse every transmit header entry despite the room reported (a broken datapath).
    pub tx_refuse: bool,
    pub placed: Vec<(u64, u32)>,
    /// Admin commands the host interface fetched, and the replies the loop returned.
    pub admin: VecDeque<[u8; 64]>,
    pub replies: Vec<AdminReply>,
    /// The datapath reports placed Write-with-Immediate messages (`WimmPlaced`).
    pub wimm_reports: bool,
}

/// The verdict a loop wrote back into an answered entry, read as the datapath reads it.
pub fn verdict_of(e: &[u8; RXH_ENTRY_BYTES]) -> (Option<RxhVerdictCode>, RxhVerdict) {
    let v: &[u8; RXH_VERDICT_BYTES] = e[RXH_VERDICT_OFFSET..].try_into().unwrap();
    RxhVerdict::decode(v)
}

impl Datapath for FakeDp {
    fn pop_event(&mut self) -> Option<[u8; ENTRY_BYTES]> {
        self.events.pop_front()
    }
    fn push_order(&mut self, e: &[u8; ENTRY_BYTES]) -> bool {
        if self.orders_pending >= RING {
            return false;
        }
        self.orders_pending += 1;
        self.orders.push(*e);
        true
    }
    fn pop_rx(&mut self) -> Option<[u8; RXH_ENTRY_BYTES]> {
        self.rx.front().copied()
    }
    fn rx_done(&mut self, verdict: &[u8; RXH_VERDICT_BYTES]) {
        let mut e = self
            .rx
            .pop_front()
            .expect("rx_done answers the entry pop_rx returned");
        e[RXH_VERDICT_OFFSET..].copy_from_slice(verdict);
        if let (Some(RxhVerdictCode::Place), v) = verdict_of(&e) {
            self.placed.push((v.place_offset.get(), v.place_len.get()));
        }
        self.answered.push(e);
    }
    fn tx_room(&mut self) -> usize {
        let cap = if self.tx_cap == 0 { RING } else { self.tx_cap };
        cap.saturating_sub(self.tx.len())
    }
    fn pop_admin(&mut self) -> Option<[u8; 64]> {
        self.admin.pop_front()
    }
    fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
        self.replies.push(*reply);
        true
    }
    fn reports_wimm_placed(&self) -> bool {
        self.wimm_reports
    }
    fn push_tx(&mut self, e: &[u8; TXH_ENTRY_BYTES]) -> bool {
        if self.tx_refuse || self.tx_room() == 0 {
            return false;
        }
        // The datapath checks the entry with the mrc-abi decoder and builds the packet from it;
        // the entry carries everything the engine's descriptor had.
        let t = Txh::decode(e).expect("the loop writes valid TXH entries");
        let p = tx_packet(&t);
        assert_eq!(txh_entry(&p), t);
        self.tx.push(p);
        true
    }
}

/// What the receiving datapath does with a packet off the wire: ACK / NACK / probe reply
/// become DP->FW CSR entries (through the mrc-abi encoder), data packets and probes RXH
/// entries (what the header parser writes; checked here with the mrc-abi decoder).
pub fn receive(dp: &mut FakeDp, p: TxPacket) {
    if !is_csr_reported(&p) {
        let meta = RxMeta {
            payload_len: p.payload_len(),
            ce: false,
        };
        let e = rxh_entry(&p, TrimMark::None, meta).expect("a data packet or probe");
        assert_eq!(RxhEntry::decode(&e.encode()), Ok(e));
        dp.rx.push_back(e.encode());
        return;
    }
    let e = match p.body {
        TxBody::Ack(a) => CsrEvent::AckSummary(AckSummary {
            kind: 0,
            plane: a.plane,
            ev_index: a.ev_index.into(),
            qpn_ecn: (p.dest_qpn | (u32::from(a.ecn_plane_mask) << 24)).into(),
            cum_psn: a.cum_psn.value().into(),
            sack_base: a.sack_base.value().into(),
            bitmap: a.sack_bitmap.into(),
            ce_count: a.ce_count.into(),
            pkt_count: a.pkt_count.into(),
            echoed_ts: p.echo_ts_ns.into(),
        }),
        TxBody::Nack(n) => CsrEvent::Nack(NackEntry {
            kind: 0,
            reason: n.reason as u8,
            ev_index: n.ev_index.into(),
            qpn: p.dest_qpn.into(),
            psn: n.psn.value().into(),
            cum_psn: n.cum_psn.value().into(),
            plane: n.plane,
            rsvd: [0; 15],
        }),
        TxBody::ProbeReply(r) => CsrEvent::ProbeReply(ProbeReply {
            kind: 0,
            plane: r.plane,
            ev_index: r.ev_index.into(),
            qpn: p.dest_qpn.into(),
            probe_id: r.probe_id.into(),
            echoed_ts: p.echo_ts_ns.into(),
            rsvd: [0; 16],
        }),
        _ => unreachable!("is_csr_reported"),
    };
    dp.events.push_back(e.encode());
}
