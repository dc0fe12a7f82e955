//! Output queues and the transmit path: enqueue (trim, ECN, tail drop, PFC charging), start
//! of serialization, PFC pause/resume, and flushing a port whose link failed.

use crate::core::sim::Scheduler;
use crate::core::time::{serialization_time, Duration};

use super::super::counters::DropCause;
use super::super::packet::{flags, Ecn};
use super::{ev, Fabric, Fifo, NIL};

impl Fabric {
    /// Queues slot `id` at port `ep` (trim, mark, tail-drop), charging PFC `ingress`.
    pub(super) fn enqueue(&mut self, s: &mut Scheduler<'_>, ep: u32, id: u32, ingress: u32) {
        let port = self.ports[ep as usize];
        let is_switch = port.switch != NIL;
        let pkt = &mut self.slab[id as usize];
        let mut prio = pkt.is_priority();
        if !prio && port.data.bytes + pkt.size_bytes as u64 > port.limit {
            let policy = self.cfg.policy[pkt.kind.index()];
            match self.cfg.queue.trim_bytes {
                Some(t) if is_switch && policy.trim => {
                    pkt.size_bytes = pkt.size_bytes.min(t);
                    pkt.flags |= flags::TRIMMED;
                    if port.last_hop {
                        pkt.flags |= flags::TRIMMED_LAST_HOP;
                    }
                    prio = true;
                    self.counters[ep as usize].trims += 1;
                }
                _ => {
                    self.drop_packet(id, ep, DropCause::QueueFull);
                    return;
                }
            }
        } else if !prio && is_switch && pkt.ecn == Ecn::Ect {
            if let Some(e) = self.cfg.queue.ecn {
                let q = port.data.bytes;
                let eligible = !port.last_hop || self.cfg.policy[pkt.kind.index()].ecn_last_hop;
                let mark = eligible
                    && q > e.kmin_bytes
                    && (q >= e.kmax_bytes || {
                        let ppm = (q - e.kmin_bytes) * 1_000_000 / (e.kmax_bytes - e.kmin_bytes);
                        self.ecn_rng[ep as usize].chance(ppm as u32)
                    });
                if mark {
                    pkt.ecn = Ecn::Ce;
                    self.counters[ep as usize].ecn_marks += 1;
                }
            }
        }
        let size = pkt.size_bytes as u64;
        let p = &mut self.ports[ep as usize];
        let fifo = if prio {
            if p.hdr.bytes + size > p.header_limit {
                self.drop_packet(id, ep, DropCause::HeaderQueueFull);
                return;
            }
            &mut p.hdr
        } else {
            &mut p.data
        };
        let tail = fifo.tail;
        fifo.tail = id;
        if tail == NIL {
            fifo.head = id;
        }
        fifo.bytes += size;
        let data_bytes = p.data.bytes;
        if tail != NIL {
            self.slab[tail as usize].next = id;
        }
        let slot = &mut self.slab[id as usize];
        slot.next = NIL;
        slot.port = ep;
        let c = &mut self.counters[ep as usize];
        c.max_queue_bytes = c.max_queue_bytes.max(data_bytes);
        if ingress != NIL {
            if let Some(pfc) = self.cfg.pfc {
                slot.ingress = ingress;
                let ip = &mut self.ports[ingress as usize];
                ip.ingress_bytes += size;
                if !ip.pause_sent && ip.ingress_bytes >= pfc.xoff_bytes {
                    ip.pause_sent = true;
                    self.counters[ingress as usize].pauses_sent += 1;
                    let (to, d) = (ip.peer, ip.wire_delay);
                    self.send_pfc(s, d, to, to as u64 | 1 << 32);
                }
            }
        }
        self.kick(s, ep);
    }

    /// Starts serializing at an idle port, or books its transmit-complete event.
    #[inline]
    pub(super) fn kick(&mut self, s: &mut Scheduler<'_>, ep: u32) {
        let p = &mut self.ports[ep as usize];
        if p.tx_pending || p.paused || (p.data.head == NIL && p.hdr.head == NIL) {
            return;
        }
        if s.now() >= p.busy_until {
            self.start_tx(s, ep);
        } else {
            p.tx_pending = true;
            let data = ev::tx_done(ep, p.next_out());
            let _ = s.at(p.busy_until, self.me, ev::TX_DONE, data);
        }
    }

    /// Takes the next packet off `ep`'s queues and puts it on the wire (the port is free).
    pub(super) fn start_tx(&mut self, s: &mut Scheduler<'_>, ep: u32) {
        let now = s.now();
        let p = &mut self.ports[ep as usize];
        let fifo = if p.hdr.head != NIL {
            &mut p.hdr
        } else if p.data.head != NIL {
            &mut p.data
        } else {
            return;
        };
        let id = fifo.head;
        let slot = self.slab[id as usize];
        let size = slot.size_bytes as u64;
        fifo.head = slot.next;
        if fifo.head == NIL {
            fifo.tail = NIL;
        }
        fifo.bytes -= size;
        let ser = if p.ps_per_byte != 0 {
            Duration::from_ps(size * p.ps_per_byte)
        } else {
            serialization_time(size, p.rate_bps)
        };
        p.busy_until = now + ser;
        let (busy_until, arrive, link, peer, next) =
            (p.busy_until, p.arrive_delay, p.link, p.peer, p.next_out());
        let (link_up, impaired, epoch) = (p.link_up, p.impaired, p.epoch);
        if next != NIL {
            p.tx_pending = true;
            let _ = s.at(busy_until, self.me, ev::TX_DONE, ev::tx_done(ep, next));
        }
        if slot.ingress != NIL {
            self.slab[id as usize].ingress = NIL;
            self.release_ingress(s, slot.ingress, size);
        }
        let c = &mut self.counters[ep as usize];
        c.tx_packets += 1;
        c.tx_bytes += size;
        if !link_up {
            self.lost_on_wire(ep, size);
            self.drop_packet(id, ep, DropCause::LinkDown);
            return;
        }
        let mut corrupt = false;
        if impaired {
            // Only an impaired link's RNG is drawn from (as before: a zero rate draws nothing).
            let l = &mut self.links[link as usize];
            if l.loss_ppm != 0 && l.rng.chance(l.loss_ppm) {
                self.lost_on_wire(ep, size);
                self.drop_packet(id, ep, DropCause::RandomLoss);
                return;
            }
            corrupt = l.corrupt_ppm != 0 && l.rng.chance(l.corrupt_ppm);
        }
        let slot = &mut self.slab[id as usize];
        slot.epoch = epoch;
        if corrupt {
            slot.flags |= flags::CORRUPT;
        }
        if self.part.as_ref().is_some_and(|m| !m.owns_port(peer)) {
            self.cross_arrival(s, busy_until + arrive, id, peer);
            return;
        }
        let _ = s.at(
            busy_until + arrive,
            self.me,
            ev::ARRIVE,
            id as u64 | (peer as u64) << 32,
        );
    }

    pub(super) fn release_ingress(&mut self, s: &mut Scheduler<'_>, ingress: u32, size: u64) {
        let Some(pfc) = self.cfg.pfc else { return };
        let ip = &mut self.ports[ingress as usize];
        ip.ingress_bytes -= size;
        if ip.pause_sent && ip.ingress_bytes <= pfc.xon_bytes {
            ip.pause_sent = false;
            let (to, d) = (ip.peer, ip.wire_delay);
            self.send_pfc(s, d, to, to as u64);
        }
    }

    pub(super) fn on_pfc(&mut self, s: &mut Scheduler<'_>, port: u32, pause: bool) {
        let p = &mut self.ports[port as usize];
        if pause {
            if !p.paused {
                p.paused = true;
                self.counters[port as usize].pauses_received += 1;
            }
        } else if p.paused {
            p.paused = false;
            self.kick(s, port);
        }
    }

    /// Drops everything queued at `ep` (its link went down).
    pub(super) fn flush(&mut self, s: &mut Scheduler<'_>, ep: u32) {
        for prio in [true, false] {
            let p = &mut self.ports[ep as usize];
            let fifo = if prio { &mut p.hdr } else { &mut p.data };
            let mut id = fifo.head;
            *fifo = Fifo::EMPTY;
            while id != NIL {
                let slot = self.slab[id as usize];
                if slot.ingress != NIL {
                    self.release_ingress(s, slot.ingress, slot.size_bytes as u64);
                }
                self.drop_packet(id, ep, DropCause::LinkDown);
                id = slot.next;
            }
        }
    }
}
