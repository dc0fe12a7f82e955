//! Partitioning for the parallel run ([`crate::run::parallel`]): which ports a fabric copy
//! drives, the events that leave it for another partition, and merging the copies' counters.
//!
//! Every copy holds the whole fabric's tables but drives only the ports its partition owns.
//! An event for a port another partition owns (a packet's arrival over a link, a PFC frame)
//! is not scheduled: it becomes a [`Crossing`] in the copy's outbox, with the key the event
//! would have had ([`Scheduler::reserve_key`]), and the packet's slot is freed once the owner
//! collected it ([`Fabric::drain_crossings`]). The receiving copy re-creates the packet in its
//! own slab ([`Fabric::import`]). Both kinds of crossing events travel over a link, so they are
//! at least one propagation delay in the future: the lookahead of the partitions.

use crate::core::sim::Scheduler;
use crate::core::time::{Duration, Time};
use crate::fabric::packet::Packet;

use super::{ev, Fabric, Fault, NIL};

/// Which partition owns each port, and which one this copy is.
#[derive(Clone, Debug)]
pub(crate) struct PartMap {
    me: u16,
    /// Per global port: its partition.
    port_owner: Vec<u16>,
}

impl PartMap {
    /// Partition `me` of a fabric whose port `p` belongs to `port_owner[p]`.
    pub(crate) fn new(me: u16, port_owner: Vec<u16>) -> PartMap {
        PartMap { me, port_owner }
    }

    /// The partition of port `p` (0 for an unknown port).
    #[inline]
    pub(crate) fn owner(&self, p: u32) -> u16 {
        self.port_owner.get(p as usize).copied().unwrap_or(0)
    }

    /// True when this copy drives port `p`.
    #[inline]
    pub(crate) fn owns_port(&self, p: u32) -> bool {
        self.owner(p) == self.me
    }
}

/// An event scheduled by one partition for a port of another.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crossing {
    /// The partition it goes to.
    pub(crate) to: u16,
    /// When it fires.
    pub(crate) time: Time,
    /// Its event key (reserved in the sending partition).
    pub(crate) key: u64,
    /// [`ev::ARRIVE`] or [`ev::PFC`].
    pub(crate) kind: u32,
    /// [`ev::PFC`]: the event data; [`ev::ARRIVE`]: the port the packet reaches.
    pub(crate) data: u64,
    /// [`ev::ARRIVE`]: the packet, the port that sent it and the link epoch it left under.
    pub(crate) pkt: Packet,
    pub(crate) egress: u32,
    pub(crate) epoch: u32,
    /// [`ev::ARRIVE`]: its slot in the sending copy (valid until the crossings are drained).
    pub(crate) from_slot: u32,
}

/// Who handles an event of the fabric: the host or the switch owning the port (or link end) it
/// concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A host (its NIC ports).
    Host(u32),
    /// A switch (global id).
    Switch(u32),
}

impl Fabric {
    /// Makes this copy drive only the ports `map` gives it (see the module docs).
    pub(crate) fn set_partition(&mut self, map: PartMap) {
        self.part = Some(Box::new(map));
    }

    /// Turns on recording of staged packets ([`Fabric::drain_staged`]).
    pub(crate) fn track_staging(&mut self) {
        self.staged.get_or_insert_with(Vec::new);
    }

    /// True when packets were staged since the last [`Fabric::drain_staged`] (and staging is
    /// tracked).
    #[inline]
    pub(crate) fn has_staged(&self) -> bool {
        self.staged.as_ref().is_some_and(|st| !st.is_empty())
    }

    /// Hands every packet staged since the last call to `f` as (slot, host, transport tag), in
    /// staging order. A slot may appear twice (the first packet was dropped at once and its slot
    /// reused); the last entry is the packet now there.
    #[inline]
    pub(crate) fn drain_staged(&mut self, mut f: impl FnMut(u32, u32, u64)) {
        if let Some(st) = &mut self.staged {
            if st.is_empty() {
                return;
            }
            for (slot, host, tag) in st.drain(..) {
                f(slot, host, tag);
            }
        }
    }

    /// True when events for other partitions wait in the outbox.
    #[inline]
    pub(crate) fn has_crossings(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Hands every event for another partition to `f`, then frees the slots of the packets that
    /// left.
    pub(crate) fn drain_crossings(&mut self, mut f: impl FnMut(&Crossing)) {
        for c in &self.outbox {
            f(c);
        }
        self.outbox.clear();
        for i in 0..self.crossed.len() {
            let id = self.crossed[i];
            self.release(id);
        }
        self.crossed.clear();
    }

    /// Takes in an event another partition sent here: returns the `(kind, data)` of the event to
    /// schedule at `c.time` with key `c.key`, and for an arrival the slot the packet now has.
    pub(crate) fn import(&mut self, c: &Crossing) -> (u32, u64, Option<u32>) {
        if c.kind != ev::ARRIVE {
            return (c.kind, c.data, None);
        }
        let id = self.alloc(c.pkt, c.egress);
        self.slab[id as usize].epoch = c.epoch;
        (
            ev::ARRIVE,
            id as u64 | (c.data & 0xffff_ffff) << 32,
            Some(id),
        )
    }

    /// Packet in slot `id` goes on the wire toward `peer`, which another partition drives.
    pub(super) fn cross_arrival(&mut self, s: &mut Scheduler<'_>, at: Time, id: u32, peer: u32) {
        let key = s.reserve_key();
        let slot = self.slab[id as usize];
        let pkt = self.packet(id);
        let to = self.part.as_ref().map_or(0, |m| m.owner(peer));
        self.outbox.push(Crossing {
            to,
            time: at,
            key,
            kind: ev::ARRIVE,
            data: peer as u64,
            pkt,
            egress: slot.port,
            epoch: slot.epoch,
            from_slot: id,
        });
        self.crossed.push(id);
    }

    /// A PFC frame (`data`) to port `to`, `d` from now.
    pub(super) fn send_pfc(&mut self, s: &mut Scheduler<'_>, d: Duration, to: u32, data: u64) {
        match &self.part {
            Some(m) if !m.owns_port(to) => {
                let Some(at) = s.now().checked_add(d) else {
                    return;
                };
                let key = s.reserve_key();
                self.outbox.push(Crossing {
                    to: m.owner(to),
                    time: at,
                    key,
                    kind: ev::PFC,
                    data,
                    pkt: Packet::default(),
                    egress: NIL,
                    epoch: 0,
                    from_slot: NIL,
                });
            }
            _ => {
                let _ = s.after(d, self.me, ev::PFC, data);
            }
        }
    }

    /// Who owns port `p`.
    #[inline]
    pub(crate) fn port_owner(&self, p: u32) -> Option<Owner> {
        let port = self.ports.get(p as usize)?;
        Some(if port.switch == NIL {
            Owner::Host(p % self.topo.ports_per_plane())
        } else {
            Owner::Switch(port.switch)
        })
    }

    /// Who handles the fabric event (`kind`, `data`): the owner of the port it concerns; for a
    /// link fault or routing change, of the link's lower end. `None` for an event the fabric
    /// would refuse.
    #[inline]
    pub(crate) fn event_owner(&self, kind: u32, data: u64) -> Option<Owner> {
        let port = match kind {
            ev::ARRIVE => (data >> 32) as u32,
            ev::TX_DONE => data as u32,
            ev::PFC => data as u32,
            ev::INJECT => self.slab.get(data as usize)?.port,
            ev::ROUTE => self.links.get(data as u32 as usize)?.a,
            ev::FAULT => match Fault::decode(data)? {
                Fault::LinkDown(l) | Fault::LinkUp(l) => self.links.get(l.0 as usize)?.a,
                Fault::Blackhole(sw) | Fault::Restore(sw) => {
                    return (sw.0 < self.topo.switches()).then_some(Owner::Switch(sw.0))
                }
            },
            _ => return None,
        };
        self.port_owner(port)
    }

    /// Adds the counters of the ports `other` drove (its partition's) and its totals into this
    /// copy: after a partitioned run, one fabric that reports what the partitions did together.
    pub(crate) fn absorb(&mut self, other: &Fabric) {
        if let Some(m) = &other.part {
            for (p, c) in other.counters.iter().enumerate() {
                if m.owns_port(p as u32) {
                    self.counters[p] = *c;
                }
            }
        }
        let (t, o) = (&mut self.totals, &other.totals);
        t.injected += o.injected;
        t.delivered += o.delivered;
        t.delivered_bytes += o.delivered_bytes;
        for (a, b) in t.drops.iter_mut().zip(o.drops) {
            *a += b;
        }
        t.in_flight += o.in_flight;
        self.bad_events += other.bad_events;
    }
}
