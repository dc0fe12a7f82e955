//! The NIC's send side: work requests posted to the stages, packets pulled from them at the
//! ports' pace, payload reads, and the packets handed to the fabric.

use mrc_abi::wire::ev::stev_encode;
use mrc_abi::wire::EvFormat;
use mrc_firmware::datapath::packet::{LocalBuf, PacketBody, SendWr};
use mrc_firmware::engine::QpState;

use super::flows::{wr_id, wr_parts};
use super::{
    ev, ev_path, ns, pcie, place, qpn_in, wire, Nic, StagePacket, Transport, HEADER_BYTES,
    PUMP_BACKLOG_PKTS, REGION_LEN, REGION_VA, SEND_QUEUE,
};
use crate::core::rng::splitmix64;
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::{Duration, Time, PS_PER_S};
use crate::fabric::{flags, usid_route_of, Ecn, Fabric, Packet, Payload, Route, TransportKind};

impl Nic {
    /// Posts the released messages of QP `qpn` while its send queue takes them. The host
    /// writes them into the send queue and rings one doorbell for the batch; the stage sees
    /// them once the NIC fetched their WQEs ([`Nic::fetched`]). The host's send queue holds
    /// what the stage holds and what is being fetched.
    pub(super) fn post(&mut self, now: Time, qpn: u32) {
        let send_queue = self.send_queue();
        let (shard, slot) = place(&self.pos_of, qpn, self.width);
        let (Some(e), Some(conn), Some(queue)) = (
            self.shards.get_mut(shard),
            self.conns.get_mut(qpn as usize),
            self.flows.queues.get_mut(qpn as usize),
        ) else {
            return;
        };
        if e.qp_state(slot) != Some(QpState::Rts) {
            // The QP is in error: its queued flows can never be posted.
            let dead: Vec<u32> = queue.drain(..).collect();
            for fi in dead {
                self.flows.on_completion(fi, 0, false, Time::ZERO);
            }
            return;
        }
        let ideal = self.cfg.pcie.ideal;
        let mut room = if ideal {
            usize::MAX
        } else {
            let held = e.qp_progress(slot).map_or(0, |q| q.sq_queued);
            send_queue.saturating_sub(held + self.hostq.pending(qpn) as usize)
        };
        let mut batch = std::mem::take(&mut self.wr_buf);
        batch.clear();
        // One doorbell write covers the work requests posted together.
        let mut rung = false;
        while let Some(&fi) = queue.front() {
            let Some(f) = self.flows.flows.get_mut(fi as usize) else {
                queue.pop_front();
                continue;
            };
            if f.posted >= f.flow.bytes || f.failed {
                queue.pop_front();
                continue;
            }
            if room == 0 {
                break;
            }
            let len = f.msg_len(f.next_msg);
            let wr = SendWr {
                wr_id: wr_id(fi, f.next_msg),
                local: LocalBuf::default(),
                remote_va: conn.next_va,
                rkey: self.rkey,
                len,
                imm: None,
                signaled: true,
            };
            if ideal {
                if e.post_send(slot, wr).is_err() {
                    break; // send queue full: retried after the next completion
                }
                if let Some(r) = self.shard_ready.get_mut(shard) {
                    *r = true;
                }
                self.deadline_dirty.push(shard);
            } else {
                room -= 1;
                batch.push(wr);
            }
            if !rung {
                rung = true;
                self.counters.doorbells += 1;
            }
            f.posted += u64::from(len);
            f.next_msg += 1;
            let off = conn.next_va - REGION_VA + u64::from(len);
            conn.next_va = REGION_VA + off % (REGION_LEN / 2);
        }
        if !batch.is_empty() {
            self.ring(now, qpn, &mut batch);
        }
        self.wr_buf = batch;
    }

    /// The host rang QP `qpn`'s send doorbell for `batch` (its new WQEs in ring order, taken
    /// out): the doorbell write (the SQ producer index), then the WQEs read from the ring (two
    /// reads when the batch wraps); the stage sees them when the reads completed
    /// ([`Nic::fetched`]).
    pub(super) fn ring(&mut self, now: Time, qpn: u32, batch: &mut Vec<SendWr>) {
        let host_at = self.hostq.host_time(qpn, now);
        let at = self.link.doorbell(host_at, pcie::DOORBELL_BYTES);
        let n = batch.len() as u32;
        let (addr, first) = self.hostq.ring_slot(qpn, n, SEND_QUEUE as u32);
        let mut done = self.link.read(at, addr, first * pcie::WQE_BYTES);
        if first < n {
            let wrapped = addr - addr % (SEND_QUEUE as u64 * u64::from(pcie::WQE_BYTES));
            done = done.max(self.link.read(at, wrapped, (n - first) * pcie::WQE_BYTES));
        }
        self.hostq.push(done, qpn, batch.drain(..));
    }

    /// A work request of `qpn` whose WQE the NIC fetched at `now`: into its stage.
    pub(super) fn fetched(&mut self, now: Time, qpn: u32, wr: SendWr) {
        let (shard, slot) = place(&self.pos_of, qpn, self.width);
        let Some(e) = self.shards.get_mut(shard) else {
            return;
        };
        if e.post_send(slot, wr).is_err() {
            if let Some(d) = self.driver.as_mut() {
                // (the driver's host posts only what the send queue has room for)
                d.refused(now, qpn, wr.wr_id);
                return;
            }
            // The QP left RTS while its WQE was on the way (the host's queue had room for
            // it, so nothing else refuses it): its flow fails, as `post` fails a dead QP's.
            let (flow, _) = wr_parts(wr.wr_id);
            self.flows.on_completion(flow, 0, false, now);
            return;
        }
        if let Some(r) = self.shard_ready.get_mut(shard) {
            *r = true;
        }
        self.deadline_dirty.push(shard);
        self.stall_dirty.push(qpn);
    }

    /// Pulls packets from the stages while the ports' backlog allows (see the module docs of
    /// `nic`); the shards that sent report to their firmware at the next service.
    pub(super) fn pump(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        let planes = usize::from(self.cfg.planes);
        let full = u64::from(self.cfg.mtu_payload + HEADER_BYTES);
        // Reads in flight count as backlog beyond what covers the read latency at line rate.
        let read_cover = self.read_cover;
        let limit = PUMP_BACKLOG_PKTS * full * planes as u64;
        for (p, port) in self.ports.iter_mut().enumerate().take(planes) {
            *port = fab.topology().host_port(self.host, p as u32);
        }
        let n = self.shards.len();
        'pull: loop {
            // A total, not per plane: the stage picks each packet's plane, and a deep queue on
            // one plane delays its packets behind the others' (reordering the stage would
            // read as loss).
            let total: u64 = self.ports[..planes]
                .iter()
                .map(|p| {
                    let (d, h) = fab.queue_bytes(*p);
                    d + h
                })
                .sum::<u64>()
                + self.dp.tx_waiting_bytes();
            if self.dma.bytes > read_cover {
                return; // the next read completion (ev::DMA) pulls again
            }
            // Reads in flight are packets on their way to the ports: the ports and the read
            // pipeline together hold at most the backlog plus what covers the read latency
            // (gating on the ports alone starves them for a read latency whenever they fill).
            if total.saturating_add(self.dma.bytes) >= limit.saturating_add(read_cover) {
                if !self.pump_armed {
                    let wake = self.ports[..planes]
                        .iter()
                        .map(|p| fab.port_busy_until(*p))
                        .filter(|t| *t > now)
                        .min()
                        .unwrap_or(now.saturating_add(Duration::from_ns(1)));
                    if s.at(wake, me, ev::PUMP, u64::from(self.host)).is_ok() {
                        self.pump_armed = true;
                    }
                }
                return;
            }
            // A shard with a retransmission waiting goes first, outside the turns (the stage
            // sends it ahead of its own turn too): a lost packet holds its message's
            // completion, new data can wait (in its QP's turn a marked loss would wait
            // ~10 us for the next burst).
            if let Some(k) = (0..n).find(|&k| self.retx_maybe[k] && self.retransmit_waits(k)) {
                if let Some(tx) = self.poll_shard(now, k, s, me) {
                    self.dispatch(now, k, tx, s, me);
                    continue 'pull;
                }
            }
            // Turns go round the QP positions, not the shards: a shard gets one turn per QP it
            // holds (a last shard of 3 QPs got as many turns as a full one of 4, so its QPs
            // sent 4/3 of the others' share and their receivers saw an incast).
            let m = self.conns.len().max(1);
            for i in 0..m {
                let pos = (self.tx_rr + i) % m;
                let k = pos / self.width;
                if k >= n || !self.shard_ready[k] {
                    continue;
                }
                if let Some(tx) = self.poll_shard(now, k, s, me) {
                    // Turns count data packets: a control packet (ACK, NACK, probe) leaves
                    // the turn where it is (a shard whose QPs answered more, e.g. the
                    // receivers of flows with holes, sent less data: on the default run the
                    // flows into the failed link's leaf sent 7-10 % slower than the others).
                    self.tx_rr = if matches!(tx.body, PacketBody::Write { .. }) {
                        (pos + 1) % m
                    } else {
                        pos
                    };
                    self.dispatch(now, k, tx, s, me);
                    continue 'pull;
                }
                self.shard_ready[k] = false;
            }
            return;
        }
    }

    /// Whether shard `k` has a retransmission waiting (clears its `retx_maybe` when not).
    fn retransmit_waits(&mut self, k: usize) -> bool {
        let r = self.shard_ready[k] && self.shards[k].has_retransmit();
        if !r {
            self.retx_maybe[k] = false;
        }
        r
    }

    /// The next packet of shard `k`'s stage. A stage short of event room sends nothing: its
    /// reports move on (to the engine, or the firmware cores' queue) and it is asked again.
    /// The shard's reports of what it sent move on at the next service.
    fn poll_shard(
        &mut self,
        now: Time,
        k: usize,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) -> Option<StagePacket> {
        let mut tx = self.shards[k].transmit(ns(now));
        if tx.is_none() && self.shards[k].events_pending() > 0 && self.drain_shard(now, k, s, me) {
            tx = self.shards[k].transmit(ns(now));
        }
        if tx.is_some() {
            self.input_shards.push(k);
            self.deadline_dirty.push(k);
        }
        tx
    }

    /// A packet shard `k` gave: through the transmit blocks (`dp_clock`), then to the DMA read
    /// queue when it has a payload to read, else to its port.
    fn dispatch(
        &mut self,
        now: Time,
        k: usize,
        tx: StagePacket,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        let headers_out = self.dp.transmit(now, &tx);
        if tx.payload_len > 0 && !self.cfg.pcie.ideal {
            self.dma.push(&mut self.link, headers_out, k, tx);
            self.arm_dma(s, me);
        } else {
            self.hold_tx(headers_out, k, tx, s, me);
        }
    }

    /// Hands a packet of shard `shard` to the fabric at the port of its plane.
    pub(super) fn send(
        &mut self,
        shard: usize,
        mut tx: StagePacket,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
    ) {
        let qpn = qpn_in(&self.qpn_at, shard, self.width, tx.src_qpn);
        let Some(conn) = self.conns.get_mut(qpn as usize) else {
            self.counters.inject_errors += 1;
            return;
        };
        let dst = conn.peer;
        tx.src_qpn = qpn;
        if dst == self.host {
            // A QP connected to its own NIC (the driver's host only): the NIC loops it back
            // into its receive path (never onto the fabric, which has no route to itself).
            self.loop_back(tx, s);
            return;
        }
        let len = tx.payload_len;
        let (plane, route) = match self.cfg.transport {
            Transport::Mrc if self.cfg.mrc_ev_format != EvFormat::Srv6 => (
                u32::from(tx.evx.plane),
                Route::Ecmp {
                    hash: ev_flow_hash(conn.flow_hash, self.cfg.mrc_ev_format, tx.evx.ev_value),
                },
            ),
            Transport::Mrc => {
                let paths = match conn.paths {
                    Some(p) => Ok(p),
                    None => fab.topology().usid_paths(self.host, dst),
                };
                let Ok(paths) = paths else {
                    self.counters.inject_errors += 1;
                    return;
                };
                conn.paths = Some(paths);
                let path = ev_path(
                    u32::from(tx.evx.ev_index),
                    u32::from(self.cfg.planes),
                    paths.count(),
                    conn.path_base,
                );
                match usid_route_of(&paths, path) {
                    Ok(r) => (u32::from(tx.evx.plane), Route::Usid(r)),
                    Err(_) => {
                        self.counters.inject_errors += 1;
                        return;
                    }
                }
            }
            Transport::SprayOblivious => {
                let pick = match self.spray.as_mut() {
                    Some(sel) => {
                        sel.pick_within(fab.topology(), self.host, dst, u32::from(self.cfg.planes))
                    }
                    None => {
                        self.counters.inject_errors += 1;
                        return;
                    }
                };
                match pick {
                    Ok(p) => (p.plane, p.route),
                    Err(_) => {
                        self.counters.inject_errors += 1;
                        return;
                    }
                }
            }
            Transport::Mrc1Ev | Transport::RoceEcmp => {
                // One flow hash per direction of the connection.
                let h = conn.flow_hash;
                (
                    (h >> 56) as u32 % u32::from(self.cfg.planes),
                    Route::Ecmp { hash: h },
                )
            }
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        self.side.put(tag, tx);
        let size = wire::wire_bytes(&tx);
        let control = !matches!(tx.body, PacketBody::Write { .. });
        let pkt = Packet {
            src: self.host,
            dst,
            size_bytes: size,
            payload: Payload::new(len, tx.psn.value()),
            transport_tag: tag,
            route,
            plane: plane as u8,
            kind: TransportKind::Mrc,
            ecn: Ecn::Ect,
            flags: if control { flags::PRIORITY } else { 0 },
        };
        match fab.inject(s, self.host, plane, pkt) {
            Ok(()) => {
                if !control {
                    self.stall_dirty.push(qpn);
                }
                self.counters.tx_packets += 1;
                self.counters.tx_bytes += u64::from(size);
                self.counters.tx_payload_bytes += u64::from(len);
            }
            Err(_) => self.counters.inject_errors += 1,
        }
    }
}

/// The payload reads in flight (bytes) that [`Nic::pump`] does not count as backlog: what
/// covers an idle link's full-packet read latency at the NIC's line rate, in whole packets,
/// plus one (0 without host interface time). Fixed by the configuration: worked out once.
pub(super) fn read_cover_bytes(cfg: &super::NicConfig) -> u64 {
    if cfg.pcie.ideal {
        return 0;
    }
    let full = u64::from(cfg.mtu_payload + HEADER_BYTES);
    let nic_bps = cfg.port_bps.saturating_mul(u64::from(cfg.planes));
    let latency = cfg.pcie.packet_delay(cfg.mtu_payload);
    let bytes = u128::from(nic_bps) * u128::from(latency.as_ps()) / (8 * u128::from(PS_PER_S));
    (bytes as u64).div_ceil(full).saturating_add(1) * full
}

/// The flow hash ECMP switches compute for a packet of the connection whose fixed fields
/// (addresses, protocol, destination port) hash to `conn_hash`, carrying EV value `ev_value`
/// in `format`: the UDP source port (`Udp`), or the flow label and source port (`Stev`).
fn ev_flow_hash(conn_hash: u64, format: EvFormat, ev_value: u32) -> u64 {
    let (flow_label, src_port) = match format {
        EvFormat::Stev => stev_encode(ev_value),
        EvFormat::Udp | EvFormat::Srv6 => (0, ev_value as u16),
    };
    let mut h = conn_hash ^ (u64::from(src_port) << 20 | u64::from(flow_label));
    splitmix64(&mut h)
}
