//! The receive path of fabric mode: packets due on the channels (or waiting for a stalled
//! core, or injected from outside) are checked, handed to the datapath stage, and their payload
//! placed in registered memory through the region's translation.

use mrc_driver::sys::Iova;
use mrc_firmware::datapath::packet::{Packet, RxVerdict};
use mrc_firmware::testkit::channel::Trim;

use super::super::faults::{RxOutcome, RxPacket, STALL_BACKLOG};
use super::super::state::RKEY_BIT;
use super::super::World;
use super::{port_up, Frame, MSG_BYTES_CAP};

impl World {
    /// Delivers every due packet (first what waited for a core whose stall ended). True if
    /// any.
    pub(super) fn deliver(&mut self) -> bool {
        let now = self.now_ns;
        let mut any = false;
        for to in 0..self.nics.len() {
            while !self.stalled(to) {
                let Some(p) = self
                    .fabric
                    .as_mut()
                    .and_then(|f| f.faults.backlog.get_mut(to))
                    .and_then(|q| q.pop_front())
                else {
                    break;
                };
                any = true;
                self.rx(to, p);
            }
        }
        let keys: Vec<(usize, usize)> = match self.fabric.as_ref() {
            Some(f) => f.links.keys().copied().collect(),
            None => return false,
        };
        for (a, b) in keys {
            for _ in 0..8192 {
                let Some(fab) = self.fabric.as_mut() else {
                    return any;
                };
                let Some(f) = fab.links.get_mut(&(a, b)).and_then(|l| l.pop_due(now)) else {
                    break;
                };
                any = true;
                let (to, from) = if f.to == 0 { (a, b) } else { (b, a) };
                let plane = f.pkt.evx.plane;
                if !port_up(&self.nics, to, plane) || fab.faults.plane_dead(plane) {
                    fab.counters.plane_dropped += 1;
                    continue;
                }
                let mut repr = f.pkt.to_repr();
                repr.mrh.trimmed = f.trim != Trim::None;
                repr.mrh.trimmed_last_hop = f.trim == Trim::LastHop;
                let payload_len = if f.trim == Trim::None {
                    f.pkt.payload_len as usize
                } else {
                    0
                };
                let mut p = RxPacket {
                    src_gid: self.nics[from].gid,
                    repr,
                    payload: f.payload.get(..payload_len).unwrap_or(&[]).to_vec(),
                    ce: f.ce,
                };
                match fab.faults.maybe_corrupt(&mut p, self.nics[to].gid) {
                    None => {
                        fab.counters.corrupt_dropped += 1;
                        continue;
                    }
                    Some(true) => fab.counters.corrupt_undetected += 1,
                    Some(false) => {}
                }
                if fab.faults.stalled(to) {
                    fab.counters.stall_backlogged += 1;
                    match fab.faults.backlog.get_mut(to) {
                        Some(q) if q.len() < STALL_BACKLOG => q.push_back(p),
                        _ => fab.counters.stall_backlog_dropped += 1,
                    }
                    continue;
                }
                self.rx(to, p);
            }
        }
        any
    }

    /// Hands a received packet to NIC `to`'s stage and places its payload. The source address
    /// must be the destination QP's peer.
    pub(crate) fn rx(&mut self, to: usize, p: RxPacket) -> RxOutcome {
        let now = self.now_ns;
        let Some(fab) = self.fabric.as_mut() else {
            return RxOutcome::NoFabric;
        };
        let ne = &mut fab.engines[to];
        let dev_qpn = p.repr.bth.dest_qp;
        let Some(&e) = ne.qps.get(&dev_qpn) else {
            fab.counters.unknown_qp += 1;
            return RxOutcome::UnknownQp;
        };
        if self.nics[to]
            .t
            .qps
            .get(&dev_qpn)
            .is_none_or(|q| q.remote_addr != p.src_gid)
        {
            fab.counters.spoofed += 1;
            return RxOutcome::Spoofed;
        }
        let mut pkt = Packet::from_repr(&p.repr, p.payload.len() as u32, p.ce);
        pkt.dest_qpn = e;
        fab.counters.to_engine += 1;
        let verdict = loop {
            if let Some(v) = ne.nic.receive(now, &pkt) {
                break v;
            }
            // Short of event room: the reports move on, then the stage takes the packet.
            if !ne.pump(now) {
                fab.counters.rx_refused += 1;
                return RxOutcome::Refused;
            }
        };
        let repr = p.repr;
        if let RxVerdict::Place {
            qpn,
            slot,
            offset,
            len,
        } = verdict
        {
            *ne.msg_bytes.entry((qpn, repr.mrh.msn)).or_default() += len;
            if ne.msg_bytes.len() > MSG_BYTES_CAP {
                ne.msg_bytes.pop_first();
            }
            let Some(region) = ne.nic.dp.regions().region(slot) else {
                return RxOutcome::Engine(verdict);
            };
            let n = &mut self.nics[to];
            let target =
                n.t.mrs
                    .get(&(region.rkey & !RKEY_BIT))
                    .and_then(|m| m.translate(region.base_va.wrapping_add(offset), u64::from(len)));
            let bytes = p.payload.get(..len as usize);
            if let (Some(iova), Some(bytes)) = (target, bytes) {
                if n.dev.dma_write(Iova(iova), bytes).is_ok() {
                    n.counters.bytes_placed += u64::from(len);
                    fab.counters.bytes_placed += u64::from(len);
                }
            }
        }
        RxOutcome::Engine(verdict)
    }

    /// A raw frame arrives at NIC `to` from outside the simulated fabric: parsed and checked
    /// like any received frame, handed to the stage, then the fabric runs until idle.
    pub(crate) fn inject(&mut self, to: usize, bytes: &[u8]) -> RxOutcome {
        // The stages and engines know every QP and region the host set up so far.
        self.pump();
        let Some(fab) = self.fabric.as_mut() else {
            return RxOutcome::NoFabric;
        };
        let Ok(f) = Frame::parse(bytes) else {
            fab.counters.malformed += 1;
            return RxOutcome::Malformed;
        };
        let t = f.encap.transport();
        if self.nics.get(to).is_none_or(|n| n.gid != t.dst.octets()) {
            fab.counters.misaddressed += 1;
            return RxOutcome::Misaddressed;
        }
        let p = RxPacket {
            src_gid: t.src.octets(),
            repr: f.mrc,
            payload: f.payload.to_vec(),
            ce: t.traffic_class & 3 == 3,
        };
        let out = self.rx(to, p);
        self.pump();
        out
    }
}
