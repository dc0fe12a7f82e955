//! The fabric engine: flat port, link and switch tables, a packet slab with a free list, and the
//! event handlers (arrival, transmit-complete, PFC, faults, routing updates).
//!
//! # Events
//! The fabric is one component ([`Fabric::component`]); event `kind`s are in [`ev`]. Per packet
//! and per hop there is at most one arrival event (at the next node, after serialization,
//! propagation and the next switch's switching latency) and at most one transmit-complete event
//! (only when another packet waits behind it). An idle port schedules nothing.
//!
//! # Queues
//! Each port has two FIFOs threaded through the slab (no allocation): the priority (header)
//! queue, served first, for trimmed and [`crate::fabric::flags::PRIORITY`] packets, and the data queue. A packet
//! leaves its queue when its serialization starts. Switch ports trim, mark ECN and count; host
//! NIC ports only queue (tail drop at `host_queue_bytes`). The queue and transmit path is in
//! [`queue`].

mod part;
mod queue;

pub(crate) use part::{Crossing, Owner, PartMap};

use std::collections::VecDeque;

use crate::core::rng::Rng;
use crate::core::sim::{ComponentId, Event, Scheduler};
use crate::core::time::{Duration, Time, PS_PER_S};

use super::config::{ConfigError, FabricConfig};
use super::counters::{DropCause, FabricTotals, PortCounters};
use super::packet::{flags, Ecn, Packet, Payload, Route, TransportKind};
use super::topology::{LinkId, PortId, SwitchId, Topology};

/// "None" in the u32 index fields.
pub(crate) const NIL: u32 = u32::MAX;

/// Event kinds of the fabric component.
pub mod ev {
    /// A packet reaches the far end of a link; `data` = slab slot | (the port it reaches << 32)
    /// (the port rides in the event so that its state is fetched alongside the packet's).
    pub const ARRIVE: u32 = 0;
    /// A port finished serializing and has more queued; `data` = port | (the slab slot then
    /// queued first + 1) << 32 (a hint to prefetch: the packet that leaves is the one first in
    /// line when the event is handled).
    pub const TX_DONE: u32 = 1;
    /// A PFC frame reaches a port; `data` = port | (1 << 32 for pause, 0 for resume).
    pub const PFC: u32 = 2;
    /// A scheduled fault; `data` = [`super::Fault::encode`].
    pub const FAULT: u32 = 3;
    /// The routing view follows a link; `data` = link | (1 << 32 when up).
    pub const ROUTE: u32 = 4;
    /// A staged packet enters its host port; `data` = slab slot ([`super::Fabric::stage`]).
    pub const INJECT: u32 = 5;

    /// The `data` of a [`TX_DONE`] at `port` whose queues hold `next` first (NIL for none).
    #[inline]
    pub(super) fn tx_done(port: u32, next: u32) -> u64 {
        u64::from(port) | u64::from(next.wrapping_add(1)) << 32
    }
}

/// A scheduled change of the fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The link goes down (both directions): queued and in-flight packets are lost.
    LinkDown(LinkId),
    /// The link comes back.
    LinkUp(LinkId),
    /// The switch stays up (routing still uses it) but drops every packet it receives.
    Blackhole(SwitchId),
    /// The switch forwards again.
    Restore(SwitchId),
}

impl Fault {
    /// The event `data` for this fault (kind [`ev::FAULT`]).
    pub fn encode(self) -> u64 {
        let (code, id) = match self {
            Fault::LinkDown(l) => (0u64, l.0),
            Fault::LinkUp(l) => (1, l.0),
            Fault::Blackhole(s) => (2, s.0),
            Fault::Restore(s) => (3, s.0),
        };
        (code << 32) | id as u64
    }

    /// The fault an event `data` stands for.
    pub fn decode(data: u64) -> Option<Fault> {
        let id = data as u32;
        Some(match data >> 32 {
            0 => Fault::LinkDown(LinkId(id)),
            1 => Fault::LinkUp(LinkId(id)),
            2 => Fault::Blackhole(SwitchId(id)),
            3 => Fault::Restore(SwitchId(id)),
            _ => return None,
        })
    }
}

/// A packet handed to a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// When its last bit arrived.
    pub time: Time,
    /// The receiving host.
    pub host: u32,
    /// The plane it arrived on.
    pub plane: u32,
    /// The packet (route consumed, ECN and trim state as the fabric left them).
    pub packet: Packet,
    /// The slab slot it occupied (free again; names the packet for owners that keep
    /// per-packet data by slot, such as the run's MRC headers).
    pub slot: u32,
}

/// Why [`Fabric::inject`] refused a packet (nothing was counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectError {
    /// No such host.
    NoSuchHost(u32),
    /// No such plane.
    NoSuchPlane(u32),
}

#[derive(Clone, Copy, Debug)]
struct Fifo {
    head: u32,
    tail: u32,
    bytes: u64,
}

impl Fifo {
    const EMPTY: Fifo = Fifo {
        head: NIL,
        tail: NIL,
        bytes: 0,
    };
}

impl Port {
    /// The slab slot that leaves next (priority queue first), or NIL.
    #[inline]
    fn next_out(&self) -> u32 {
        if self.hdr.head != NIL {
            self.hdr.head
        } else {
            self.data.head
        }
    }
}

/// Hot per-port state.
#[derive(Clone, Copy, Debug)]
struct Port {
    peer: u32,
    link: u32,
    /// Owning switch (global), or NIL for a host NIC port.
    switch: u32,
    /// A switch port facing a host.
    last_hop: bool,
    tx_pending: bool,
    paused: bool,
    /// As an ingress: a pause is outstanding upstream.
    pause_sent: bool,
    /// Mirror of the link's physical state (`Link::up`), kept in step by `set_link_up`: the
    /// hot path reads it here, in the port it touches anyway, instead of in the link table.
    link_up: bool,
    /// The link has random loss or corruption (its RNG must be consulted per packet).
    impaired: bool,
    /// Mirror of the link's epoch (`Link::epoch`).
    epoch: u32,
    /// Exact picoseconds per byte, or 0 when the rate needs the general formula.
    ps_per_byte: u64,
    rate_bps: u64,
    /// Serialization end to arrival: propagation (+ the peer's switching latency).
    arrive_delay: Duration,
    /// Propagation alone (PFC frames).
    wire_delay: Duration,
    busy_until: Time,
    limit: u64,
    header_limit: u64,
    /// As an ingress: bytes received here still queued in this switch.
    ingress_bytes: u64,
    data: Fifo,
    hdr: Fifo,
}

#[derive(Clone, Debug)]
struct Link {
    a: u32,
    b: u32,
    up: bool,
    rt_up: bool,
    epoch: u32,
    loss_ppm: u32,
    corrupt_ppm: u32,
    rng: Rng,
}

#[derive(Clone, Copy, Debug)]
struct SwitchState {
    blackhole: bool,
    first_port: u32,
    ports: u32,
}

/// A packet in the slab: what every hop reads and writes, in one cache line (the slab is
/// the fabric's largest table and its slots are touched in arrival order, i.e. at random:
/// a slot that straddled two lines cost two misses per hop). The rest of the [`Packet`],
/// which only its ends read, is in [`Cold`] at the same index.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    route: Route,
    /// [`Packet::size_bytes`] (a trim cuts it).
    size_bytes: u32,
    dst: u32,
    next: u32,
    /// Egress port of the current hop (host port while staged).
    port: u32,
    /// PFC: the ingress port charged for this packet, or NIL.
    ingress: u32,
    /// Link epoch when it went on the wire.
    epoch: u32,
    plane: u8,
    kind: TransportKind,
    ecn: Ecn,
    /// [`Packet::flags`].
    flags: u8,
}

const _: () = assert!(core::mem::size_of::<Slot>() == 64);

/// The fields of a slab packet that only its ends read.
#[derive(Clone, Copy, Debug, Default)]
struct Cold {
    src: u32,
    payload: Payload,
    transport_tag: u64,
}

impl Slot {
    /// [`Packet::is_priority`].
    #[inline]
    fn is_priority(&self) -> bool {
        flags::is_priority(self.flags)
    }

    /// [`Packet::is_corrupt`].
    #[inline]
    fn is_corrupt(&self) -> bool {
        flags::is_corrupt(self.flags)
    }
}

/// A multi-plane fabric: every switch, link and NIC port, driven by events.
///
/// A clone is an independent fabric in the same state (the parallel run gives each partition
/// one and lets it drive only the ports it owns).
#[derive(Clone)]
pub struct Fabric {
    pub(crate) cfg: FabricConfig,
    pub(crate) topo: Topology,
    me: ComponentId,
    ports: Vec<Port>,
    counters: Vec<PortCounters>,
    ecn_rng: Vec<Rng>,
    links: Vec<Link>,
    switches: Vec<SwitchState>,
    slab: Vec<Slot>,
    /// `slab`'s cold halves, index for index.
    cold: Vec<Cold>,
    free: u32,
    totals: FabricTotals,
    /// Links down in the routing view.
    rt_down: u32,
    deliveries: VecDeque<Delivery>,
    bad_events: u64,
    /// Packets staged since the owner last looked, as (slot, host, transport tag), when
    /// tracking is on ([`Fabric::track_staging`]).
    staged: Option<Vec<(u32, u32, u64)>>,
    /// The partition this copy drives, when the run is partitioned.
    part: Option<Box<PartMap>>,
    /// Events for other partitions scheduled since the owner last collected them.
    outbox: Vec<Crossing>,
    /// Slots of packets that left for another partition, freed when the owner collected them.
    crossed: Vec<u32>,
}

impl Fabric {
    /// Builds the fabric for `cfg`; its events are addressed to `me`.
    ///
    /// # Errors
    /// [`ConfigError`] when `cfg` is invalid.
    pub fn new(cfg: FabricConfig, me: ComponentId) -> Result<Fabric, ConfigError> {
        let topo = Topology::new(&cfg)?;
        let n_ports = topo.ports() as usize;
        let root = Rng::new(cfg.seed);
        let empty = Port {
            peer: NIL,
            link: NIL,
            switch: NIL,
            last_hop: false,
            tx_pending: false,
            paused: false,
            pause_sent: false,
            link_up: false,
            impaired: false,
            epoch: 0,
            ps_per_byte: 0,
            rate_bps: 0,
            arrive_delay: Duration::ZERO,
            wire_delay: Duration::ZERO,
            busy_until: Time::ZERO,
            limit: cfg.queue.limit_bytes,
            header_limit: cfg.queue.header_limit_bytes,
            ingress_bytes: 0,
            data: Fifo::EMPTY,
            hdr: Fifo::EMPTY,
        };
        let mut ports = vec![empty; n_ports];
        let mut switches = Vec::with_capacity(topo.switches() as usize);
        for sw in 0..topo.switches() {
            let info = topo.switch_info(SwitchId(sw));
            let first = topo.switch_port(SwitchId(sw), 0).0;
            for p in first..first + info.ports {
                ports[p as usize].switch = sw;
            }
            switches.push(SwitchState {
                blackhole: false,
                first_port: first,
                ports: info.ports,
            });
        }
        for plane in 0..topo.planes() {
            for h in 0..topo.hosts() {
                let p = &mut ports[topo.host_port(h, plane).0 as usize];
                p.limit = cfg.host_queue_bytes;
                p.header_limit = cfg.host_queue_bytes;
            }
        }
        let mut links = Vec::new();
        let link_root = root.fork(1);
        topo.for_each_link(|spec| {
            let id = links.len() as u32;
            let rate = [cfg.host_link_bps, cfg.t1_link_bps, cfg.t2_link_bps][spec.tier as usize];
            for (me_, peer) in [(spec.a.0, spec.b.0), (spec.b.0, spec.a.0)] {
                let peer_is_switch = ports[peer as usize].switch != NIL;
                let p = &mut ports[me_ as usize];
                p.peer = peer;
                p.link = id;
                p.link_up = true;
                p.impaired = cfg.loss_ppm != 0 || cfg.corrupt_ppm != 0;
                p.rate_bps = rate;
                p.ps_per_byte = if (8 * PS_PER_S).is_multiple_of(rate) {
                    8 * PS_PER_S / rate
                } else {
                    0
                };
                p.wire_delay = cfg.propagation;
                p.arrive_delay = if peer_is_switch {
                    cfg.propagation + cfg.switching_latency
                } else {
                    cfg.propagation
                };
                p.last_hop = p.switch != NIL && !peer_is_switch;
            }
            links.push(Link {
                a: spec.a.0,
                b: spec.b.0,
                up: true,
                rt_up: true,
                epoch: 0,
                loss_ppm: cfg.loss_ppm,
                corrupt_ppm: cfg.corrupt_ppm,
                rng: link_root.fork(id as u64),
            });
        });
        let ecn_root = root.fork(2);
        let ecn_rng = (0..n_ports as u64).map(|p| ecn_root.fork(p)).collect();
        Ok(Fabric {
            cfg,
            topo,
            me,
            ports,
            counters: vec![PortCounters::default(); n_ports],
            ecn_rng,
            links,
            switches,
            slab: Vec::new(),
            cold: Vec::new(),
            free: NIL,
            totals: FabricTotals::default(),
            rt_down: 0,
            deliveries: VecDeque::new(),
            bad_events: 0,
            staged: None,
            part: None,
            outbox: Vec::new(),
            crossed: Vec::new(),
        })
    }

    /// The component id events for the fabric carry.
    pub fn component(&self) -> ComponentId {
        self.me
    }
    /// The configuration.
    pub fn config(&self) -> &FabricConfig {
        &self.cfg
    }
    /// The wiring (ids, uSID routes, path counts).
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Pre-sizes the packet slab for `n` packets in flight (avoids growth during the run).
    pub fn reserve_packets(&mut self, n: usize) {
        self.slab.reserve(n.saturating_sub(self.slab.len()));
        self.cold.reserve(n.saturating_sub(self.cold.len()));
    }

    // ----- inputs -----

    /// A host's NIC hands `pkt` to its port on `plane` now: it is queued there and serialized
    /// at line rate. Sets `pkt.plane`. A full NIC queue or a down NIC link drops it (counted).
    ///
    /// # Errors
    /// [`InjectError`] for an unknown host or plane (nothing counted).
    pub fn inject(
        &mut self,
        s: &mut Scheduler<'_>,
        host: u32,
        plane: u32,
        pkt: Packet,
    ) -> Result<(), InjectError> {
        let id = self.stage(host, plane, pkt)?;
        self.on_inject(s, id as u32);
        Ok(())
    }

    /// Stores `pkt` for host `host`, `plane` without queuing it; returns the `data` of an
    /// [`ev::INJECT`] event that queues it at its time (for owners that cannot hand over a
    /// [`Scheduler`] and the fabric at once). Counts as injected (and in flight) now.
    ///
    /// # Errors
    /// [`InjectError`] for an unknown host or plane.
    pub fn stage(&mut self, host: u32, plane: u32, mut pkt: Packet) -> Result<u64, InjectError> {
        if host >= self.topo.hosts() {
            return Err(InjectError::NoSuchHost(host));
        }
        if plane >= self.topo.planes() {
            return Err(InjectError::NoSuchPlane(plane));
        }
        pkt.plane = plane as u8;
        let port = self.topo.host_port(host, plane).0;
        self.totals.injected += 1;
        let tag = pkt.transport_tag;
        let id = self.alloc(pkt, port);
        if let Some(st) = &mut self.staged {
            st.push((id, host, tag));
        }
        Ok(id as u64)
    }

    /// Handles one of the fabric's events (`ev.target` must be [`Fabric::component`]; others and
    /// unknown kinds are counted in [`Fabric::bad_events`] and ignored).
    pub fn handle(&mut self, ev: Event, s: &mut Scheduler<'_>) {
        if ev.target != self.me {
            self.bad_events += 1;
            return;
        }
        let d = ev.data;
        match ev.kind {
            ev::ARRIVE
                if ((d as u32) as usize) < self.slab.len()
                    && ((d >> 32) as usize) < self.ports.len() =>
            {
                self.on_arrive(s, d as u32, (d >> 32) as u32)
            }
            ev::TX_DONE if (d as u32 as usize) < self.ports.len() => {
                let p = &mut self.ports[d as u32 as usize];
                p.tx_pending = false;
                if !p.paused {
                    self.start_tx(s, d as u32);
                }
            }
            ev::PFC if ((d as u32) as usize) < self.ports.len() => {
                self.on_pfc(s, d as u32, d >> 32 == 1)
            }
            ev::FAULT => match Fault::decode(d) {
                Some(f) => self.apply_fault(s, f),
                None => self.bad_events += 1,
            },
            ev::ROUTE if ((d as u32) as usize) < self.links.len() => {
                let l = &mut self.links[d as u32 as usize];
                let up = d >> 32 == 1;
                if l.rt_up != up {
                    l.rt_up = up;
                    if up {
                        self.rt_down -= 1;
                    } else {
                        self.rt_down += 1;
                    }
                }
            }
            ev::INJECT if (d as usize) < self.slab.len() => self.on_inject(s, d as u32),
            _ => self.bad_events += 1,
        }
    }

    /// Reads the state an upcoming fabric event (`kind`, `data`) will need, so that its cache
    /// misses overlap with the current event's ([`crate::core::Handler::prefetch`]). Changes
    /// nothing; unknown or out-of-range events are ignored.
    #[inline]
    pub fn prefetch(&self, kind: u32, data: u64) {
        use crate::core::sys::prefetch;
        match kind {
            ev::ARRIVE => {
                let (id, ip) = (data as u32 as usize, (data >> 32) as usize);
                if let (Some(slot), Some(port), Some(c)) =
                    (self.slab.get(id), self.ports.get(ip), self.counters.get(ip))
                {
                    prefetch(slot);
                    prefetch(port);
                    prefetch(&c.rx_packets);
                }
            }
            ev::TX_DONE => {
                let ep = data as u32 as usize;
                if let (Some(port), Some(c)) = (self.ports.get(ep), self.counters.get(ep)) {
                    prefetch(port);
                    prefetch(&c.tx_packets);
                }
                let next = ((data >> 32) as u32).wrapping_sub(1);
                if let Some(slot) = self.slab.get(next as usize) {
                    prefetch(slot);
                }
            }
            _ => {}
        }
    }

    /// The host whose NIC an upcoming fabric event (`kind`, `data`) delivers to, when that is
    /// known from the event alone (an arrival at a host port); for prefetching the NIC's state.
    #[inline]
    pub fn delivery_host(&self, kind: u32, data: u64) -> Option<u32> {
        if kind != ev::ARRIVE {
            return None;
        }
        let ppp = self.topo.ports_per_plane();
        let h = ((data >> 32) as u32) % ppp.max(1);
        (h < self.topo.hosts()).then_some(h)
    }

    /// Schedules `fault` at `at` (through the handler's scheduler).
    ///
    /// # Errors
    /// When `at` is in the past.
    pub fn schedule_fault(
        &self,
        s: &mut Scheduler<'_>,
        at: Time,
        fault: Fault,
    ) -> Result<u64, crate::core::sim::ScheduleError> {
        s.at(at, self.me, ev::FAULT, fault.encode())
    }

    /// Sets random loss and corruption (parts per million) on one link.
    pub fn set_link_impairment(&mut self, link: LinkId, loss_ppm: u32, corrupt_ppm: u32) {
        if let Some(l) = self.links.get_mut(link.0 as usize) {
            l.loss_ppm = loss_ppm.min(1_000_000);
            l.corrupt_ppm = corrupt_ppm.min(1_000_000);
            let impaired = l.loss_ppm != 0 || l.corrupt_ppm != 0;
            for e in [l.a, l.b] {
                self.ports[e as usize].impaired = impaired;
            }
        }
    }

    // ----- outputs and queries -----

    /// The next packet delivered to a host, oldest first.
    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }
    /// Deliveries not yet polled.
    pub fn deliveries_pending(&self) -> usize {
        self.deliveries.len()
    }
    /// Fabric totals (conservation: [`FabricTotals::conserved`]).
    pub fn totals(&self) -> FabricTotals {
        self.totals
    }
    /// Counters of one port.
    pub fn port_counters(&self, port: PortId) -> Option<&PortCounters> {
        self.counters.get(port.0 as usize)
    }
    /// Counters of every port, indexed by [`PortId`].
    pub fn all_port_counters(&self) -> &[PortCounters] {
        &self.counters
    }
    /// Counters of both ends of a link (its lower end first: host or lower tier).
    pub fn link_counters(&self, link: LinkId) -> Option<(PortCounters, PortCounters)> {
        let l = self.links.get(link.0 as usize)?;
        Some((self.counters[l.a as usize], self.counters[l.b as usize]))
    }
    /// Every port's counters added up.
    pub fn sum_counters(&self) -> PortCounters {
        let mut t = PortCounters::default();
        for c in &self.counters {
            t.add(c);
        }
        t
    }
    /// Links.
    pub fn links(&self) -> u32 {
        self.links.len() as u32
    }
    /// Both ends of a link (lower end first).
    pub fn link_ends(&self, link: LinkId) -> Option<(PortId, PortId)> {
        let l = self.links.get(link.0 as usize)?;
        Some((PortId(l.a), PortId(l.b)))
    }
    /// The link a port is on (None for an unconnected port).
    pub fn port_link(&self, port: PortId) -> Option<LinkId> {
        let l = self.ports.get(port.0 as usize)?.link;
        (l != NIL).then_some(LinkId(l))
    }
    /// The port at the other end of `port`'s link.
    pub fn port_peer(&self, port: PortId) -> Option<PortId> {
        let p = self.ports.get(port.0 as usize)?.peer;
        (p != NIL).then_some(PortId(p))
    }
    /// Physical state of a link.
    pub fn link_up(&self, link: LinkId) -> bool {
        self.links.get(link.0 as usize).is_some_and(|l| l.up)
    }
    /// Routing-view state of a link (lags the physical state by the reconvergence delay).
    pub fn link_routed_up(&self, link: LinkId) -> bool {
        self.links.get(link.0 as usize).is_some_and(|l| l.rt_up)
    }
    /// Bytes queued at a port: (data queue, priority queue).
    pub fn queue_bytes(&self, port: PortId) -> (u64, u64) {
        self.ports
            .get(port.0 as usize)
            .map_or((0, 0), |p| (p.data.bytes, p.hdr.bytes))
    }
    /// True while a PFC pause holds the port.
    pub fn port_paused(&self, port: PortId) -> bool {
        self.ports.get(port.0 as usize).is_some_and(|p| p.paused)
    }
    /// When the port's current serialization ends (the NIC can pace on it).
    pub fn port_busy_until(&self, port: PortId) -> Time {
        self.ports
            .get(port.0 as usize)
            .map_or(Time::ZERO, |p| p.busy_until)
    }
    /// Events addressed to the fabric that it could not use.
    pub fn bad_events(&self) -> u64 {
        self.bad_events
    }

    // ----- internals -----

    #[inline]
    pub(crate) fn routes_all_up(&self) -> bool {
        self.rt_down == 0
    }

    #[inline]
    pub(crate) fn rt_up_port(&self, port: u32) -> bool {
        let l = self.ports[port as usize].link;
        l != NIL && self.links[l as usize].rt_up
    }

    /// The port's link is physically up (false for an unconnected port).
    #[inline]
    fn phys_up_port(&self, port: u32) -> bool {
        self.ports[port as usize].link_up
    }

    fn alloc(&mut self, pkt: Packet, port: u32) -> u32 {
        self.totals.in_flight += 1;
        let slot = Slot {
            route: pkt.route,
            size_bytes: pkt.size_bytes,
            dst: pkt.dst,
            next: NIL,
            port,
            ingress: NIL,
            epoch: 0,
            plane: pkt.plane,
            kind: pkt.kind,
            ecn: pkt.ecn,
            flags: pkt.flags,
        };
        let cold = Cold {
            src: pkt.src,
            payload: pkt.payload,
            transport_tag: pkt.transport_tag,
        };
        if self.free != NIL {
            let id = self.free;
            self.free = self.slab[id as usize].next;
            self.slab[id as usize] = slot;
            self.cold[id as usize] = cold;
            id
        } else {
            self.slab.push(slot);
            self.cold.push(cold);
            (self.slab.len() - 1) as u32
        }
    }

    /// The packet in slot `id`, whole.
    #[inline]
    fn packet(&self, id: u32) -> Packet {
        let (h, c) = (&self.slab[id as usize], &self.cold[id as usize]);
        Packet {
            src: c.src,
            dst: h.dst,
            size_bytes: h.size_bytes,
            payload: c.payload,
            transport_tag: c.transport_tag,
            route: h.route,
            plane: h.plane,
            kind: h.kind,
            ecn: h.ecn,
            flags: h.flags,
        }
    }

    #[inline]
    fn release(&mut self, id: u32) {
        self.totals.in_flight -= 1;
        self.slab[id as usize].next = self.free;
        self.free = id;
    }

    pub(super) fn drop_packet(&mut self, id: u32, port: u32, cause: DropCause) {
        self.counters[port as usize].drops[cause as usize] += 1;
        self.totals.drops[cause as usize] += 1;
        self.release(id);
    }

    #[inline]
    pub(super) fn lost_on_wire(&mut self, ep: u32, size: u64) {
        let c = &mut self.counters[ep as usize];
        c.wire_lost_packets += 1;
        c.wire_lost_bytes += size;
    }

    fn on_inject(&mut self, s: &mut Scheduler<'_>, id: u32) {
        let port = self.slab[id as usize].port;
        if !self.phys_up_port(port) {
            self.drop_packet(id, port, DropCause::LinkDown);
            return;
        }
        self.enqueue(s, port, id, NIL);
    }

    /// Slot `id` reaches ingress port `ip` (the peer of its egress port `slot.port`). The
    /// link's epoch is mirrored at both ends, so `ip`'s copy tells whether the link failed
    /// while the packet was on it; the egress port's state is not read.
    fn on_arrive(&mut self, s: &mut Scheduler<'_>, id: u32, ip: u32) {
        let slot = self.slab[id as usize];
        let ep = slot.port;
        if self.ports[ip as usize].epoch != slot.epoch {
            self.lost_on_wire(ep, slot.size_bytes as u64);
            self.drop_packet(id, ep, DropCause::LinkDown);
            return;
        }
        let c = &mut self.counters[ip as usize];
        c.rx_packets += 1;
        c.rx_bytes += slot.size_bytes as u64;
        if slot.is_corrupt() {
            self.drop_packet(id, ip, DropCause::Corrupt);
            return;
        }
        let sw = self.ports[ip as usize].switch;
        if sw == NIL {
            let ppp = self.topo.ports_per_plane();
            self.deliveries.push_back(Delivery {
                time: s.now(),
                host: ip % ppp,
                plane: ip / ppp,
                packet: self.packet(id),
                slot: id,
            });
            self.totals.delivered += 1;
            self.totals.delivered_bytes += slot.size_bytes as u64;
            self.release(id);
            return;
        }
        let st = self.switches[sw as usize];
        if st.blackhole {
            self.drop_packet(id, ip, DropCause::Blackhole);
            return;
        }
        let out = match slot.route {
            Route::Usid(mut r) => {
                let hop = self.topo.usid_hop(SwitchId(sw), &mut r);
                let Some(port) = hop.filter(|p| *p < st.ports) else {
                    self.drop_packet(id, ip, DropCause::NoRoute);
                    return;
                };
                self.slab[id as usize].route = Route::Usid(r);
                let ep = st.first_port + port;
                if !self.phys_up_port(ep) {
                    self.drop_packet(id, ip, DropCause::UsidPortDown);
                    return;
                }
                ep
            }
            Route::Ecmp { hash } => match self.ecmp_port(sw, slot.dst, hash) {
                Ok(p) => {
                    let ep = st.first_port + p;
                    if !self.phys_up_port(ep) {
                        // Hashed onto a failed link that routing has not removed yet.
                        self.drop_packet(id, ip, DropCause::LinkDown);
                        return;
                    }
                    ep
                }
                Err(cause) => {
                    self.drop_packet(id, ip, cause);
                    return;
                }
            },
        };
        self.enqueue(s, out, id, ip);
    }

    fn apply_fault(&mut self, s: &mut Scheduler<'_>, f: Fault) {
        let reconv = self.cfg.reconvergence;
        match f {
            Fault::LinkDown(LinkId(l)) | Fault::LinkUp(LinkId(l)) => {
                let Some(link) = self.links.get_mut(l as usize) else {
                    self.bad_events += 1;
                    return;
                };
                let up = matches!(f, Fault::LinkUp(_));
                if link.up == up {
                    return;
                }
                link.up = up;
                let ends = [link.a, link.b];
                if !up {
                    link.epoch = link.epoch.wrapping_add(1);
                }
                let epoch = link.epoch;
                for e in ends {
                    let p = &mut self.ports[e as usize];
                    p.link_up = up;
                    p.epoch = epoch;
                }
                if !up {
                    for e in ends {
                        self.flush(s, e);
                        self.ports[e as usize].paused = false;
                    }
                }
                let _ = s.after(reconv, self.me, ev::ROUTE, l as u64 | (up as u64) << 32);
            }
            Fault::Blackhole(SwitchId(sw)) | Fault::Restore(SwitchId(sw)) => {
                match self.switches.get_mut(sw as usize) {
                    Some(st) => st.blackhole = matches!(f, Fault::Blackhole(_)),
                    None => self.bad_events += 1,
                }
            }
        }
    }
}
