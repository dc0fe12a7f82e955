//! Faults beyond the scenario's own (random loss and corruption on every link,
//! `ClosConfig::scenario.fabric`): windows in virtual time on the fabric and the NICs (a
//! plane lost, a cable pulled, a spine or a leaf-spine link that stays up but silently drops
//! everything), slow DMA, and raw frames injected from outside (hostile input).
//!
//! Contracts:
//! - A window `[from_ns, to_ns)` starts and ends exactly at its edges: the pump stops the
//!   simulator at each edge and applies it before anything later happens. Edges at the same
//!   time apply in the order they were scheduled (a window's start before its end).
//! - A lost plane takes every host's link to it down (packets queued or on the wire are
//!   lost, later ones die at the first hop that is down) and every NIC's port on it
//!   (PORT_DOWN events; the engines retire the plane's EVs). A cable pull does the same for
//!   one port. A window's end brings the port back even if another window on it is still
//!   open.
//! - A blackholing spine or link is up for routing and for its neighbours; it drops every
//!   packet it receives, and nobody is told (the fabric counts them).
//! - A stalled NIC's firmware cores run nothing: reports wait in their CSR rings, a full ring
//!   stops the datapath stage taking packets and sending (back-pressure, counted).
//! - Slow DMA: host memory answers the NIC's reads later ([`crate::nic::Nic::set_host_delay`]).
//! - [`super::SimHost::stop_faults`] ends every open window now, cancels pending ones, makes
//!   DMA fast and every link clean.
//! - An injected frame is parsed as the NIC's parser does (`mrc_abi::wire::Frame::parse`,
//!   UDP checksum included), must be addressed to the NIC, name a device QP it has, and come
//!   from that QP's peer; anything else is dropped and counted ([`InjectCounters`]). A frame
//!   that passes enters the QP's datapath stage; a placement writes the frame's own payload.

use std::collections::BTreeMap;

use mrc_abi::wire::Frame;
use mrc_firmware::datapath::packet::{LocalBuf, Packet, RxVerdict};

use super::World;
use crate::core::time::Time;
use crate::fabric::{Fault, LinkId, PortOwner};

/// What became of a frame injected from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxOutcome {
    /// Not a valid MRC frame (length, next header, checksum, MRC headers): dropped, counted.
    Malformed,
    /// Not addressed to this NIC: dropped, counted.
    Misaddressed,
    /// No QP with the BTH destination QPN: dropped, counted.
    UnknownQp,
    /// The source address is not the destination QP's peer: dropped, counted.
    Spoofed,
    /// The datapath stage's verdict (its own drops are in its counters).
    Engine(RxVerdict),
    /// No such NIC on the fabric.
    NotOnFabric,
    /// The stage would not take it even after its reports moved on (counted by the NIC
    /// model as `rx_refused`).
    Refused,
}

/// Injected frames dropped before the datapath, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InjectCounters {
    /// [`RxOutcome::Malformed`].
    pub malformed: u64,
    /// [`RxOutcome::Misaddressed`].
    pub misaddressed: u64,
    /// [`RxOutcome::UnknownQp`].
    pub unknown_qp: u64,
    /// [`RxOutcome::Spoofed`].
    pub spoofed: u64,
    /// Frames that reached a datapath stage.
    pub to_stage: u64,
}

/// What a scheduled window does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// Plane `p` lost: every host's link to it and every NIC's port on it down.
    Plane(u8),
    /// NIC `nic`'s port `port` loses its link (a cable pull).
    Port {
        /// The host's NIC (index in the [`super::SimHost`]).
        nic: usize,
        /// Its port.
        port: u8,
    },
    /// Spine `spine` (tier-1 switch index) of `plane` stays up but drops everything.
    SwitchBlackhole {
        /// Plane.
        plane: u8,
        /// Spine index in the plane.
        spine: u16,
    },
    /// NIC `nic`'s firmware cores stop (each finishes its step and starts no other): their
    /// CSR rings fill and back-pressure the datapath, as a hung core does
    /// ([`crate::nic::Nic::stall_firmware`]).
    Stall {
        /// The host's NIC.
        nic: usize,
    },
    /// The link between leaf `leaf` and spine `spine` of `plane` stays up but drops every
    /// packet in both directions (a gray link at 100 %).
    LinkBlackhole {
        /// Plane.
        plane: u8,
        /// Leaf (tier-0 switch) index in the plane.
        leaf: u16,
        /// Spine index in the plane.
        spine: u16,
    },
}

/// Scheduled window edges.
#[derive(Debug, Default)]
pub(crate) struct Windows {
    /// `(time ns, window number, 0 start / 1 end)` -> the window.
    edges: BTreeMap<(u64, u64, u8), WindowKind>,
    /// Windows started and not ended, by number.
    open: BTreeMap<u64, WindowKind>,
    next: u64,
}

impl Windows {
    pub fn schedule(&mut self, kind: WindowKind, from_ns: u64, to_ns: u64) {
        let n = self.next;
        self.next += 1;
        self.edges.insert((from_ns, n, 0), kind);
        self.edges.insert((to_ns.max(from_ns), n, 1), kind);
    }

    /// The next edge's time.
    pub fn next_edge(&self) -> Option<u64> {
        self.edges.keys().next().map(|k| k.0)
    }

    /// The next edge due at `now_ns`: `(kind, starts)`.
    fn take_due(&mut self, now_ns: u64) -> Option<(WindowKind, bool)> {
        let (&(at, n, end), _) = self.edges.iter().next()?;
        if at > now_ns {
            return None;
        }
        let kind = self.edges.remove(&(at, n, end))?;
        if end == 0 {
            self.open.insert(n, kind);
        } else {
            self.open.remove(&n);
        }
        Some((kind, end == 0))
    }

    /// Cancels every pending edge; returns the open windows (to be ended).
    fn stop(&mut self) -> Vec<WindowKind> {
        self.edges.clear();
        std::mem::take(&mut self.open).into_values().collect()
    }
}

/// Bit of a [`LocalBuf`] handle that names an injected frame's payload rather than a send.
pub(crate) const INJECTED: u32 = 1 << 31;
/// Injected payloads kept for their placements (oldest forgotten first).
const INJECTED_KEPT: usize = 4096;

impl World {
    /// Schedules a window.
    pub(crate) fn schedule_window(&mut self, kind: WindowKind, from_ns: u64, to_ns: u64) {
        self.clos.windows.schedule(kind, from_ns, to_ns);
    }

    /// Applies every window edge due at `now_ns`.
    pub(crate) fn apply_edges(&mut self, now_ns: u64) {
        while let Some((kind, starts)) = self.clos.windows.take_due(now_ns) {
            self.apply_window(kind, starts);
        }
    }

    fn apply_window(&mut self, kind: WindowKind, starts: bool) {
        let up = !starts;
        match kind {
            WindowKind::Port { nic, port } => {
                if nic < self.nics.len() {
                    self.set_link(nic, port, up);
                }
            }
            WindowKind::Plane(plane) => {
                for i in 0..self.nics.len() {
                    let ports: Vec<u8> = (0..self.nics[i].port_link.len())
                        .filter(|&p| self.nics[i].port_plane(p) == plane)
                        .map(|p| p as u8)
                        .collect();
                    for p in ports {
                        self.set_link(i, p, up);
                    }
                }
                self.clos.plane_hosts(plane, up);
            }
            WindowKind::Stall { nic } => self.clos.stall(nic, starts),
            WindowKind::SwitchBlackhole { plane, spine } => {
                self.clos.blackhole_spine(plane, spine, starts)
            }
            WindowKind::LinkBlackhole { plane, leaf, spine } => {
                self.clos.blackhole_link(plane, leaf, spine, starts)
            }
        }
    }

    /// Every fault stops now (see the module docs).
    pub(crate) fn stop_faults(&mut self) {
        let c = &mut *self.clos;
        let open = c.windows.stop();
        c.clean_links();
        for i in 0..self.nics.len() {
            c.set_host_delay(i, 0);
        }
        for kind in open {
            self.apply_window(kind, false);
        }
    }

    /// A raw frame for NIC `to` from outside the fabric (see the module docs); the fabric
    /// then runs until quiet.
    pub(crate) fn inject(&mut self, to: usize, bytes: &[u8]) -> RxOutcome {
        if to >= self.nics.len() {
            return RxOutcome::NotOnFabric;
        }
        let out = self.inject_checked(to, bytes);
        self.clos_pump();
        out
    }

    fn inject_checked(&mut self, to: usize, bytes: &[u8]) -> RxOutcome {
        let n = &self.nics[to];
        let c = &mut *self.clos;
        let k = &mut c.injected_counters;
        let Ok(f) = Frame::parse(bytes) else {
            k.malformed += 1;
            return RxOutcome::Malformed;
        };
        let t = f.encap.transport();
        if n.gid != t.dst.octets() {
            k.misaddressed += 1;
            return RxOutcome::Misaddressed;
        }
        let dev_qpn = f.mrc.bth.dest_qp;
        let Some(q) = n.t.qps.get(&dev_qpn) else {
            k.unknown_qp += 1;
            return RxOutcome::UnknownQp;
        };
        if q.remote_addr != t.src.octets() {
            k.spoofed += 1;
            return RxOutcome::Spoofed;
        }
        k.to_stage += 1;
        let pkt = Packet::from_repr(&f.mrc, f.payload.len() as u32, t.traffic_class & 3 == 3);
        match c.inject(to, dev_qpn, pkt, f.payload.to_vec()) {
            Some(v) => RxOutcome::Engine(v),
            None => RxOutcome::Refused,
        }
    }
}

impl super::clos::Clos {
    /// Every fabric host that is not one of the driver's NICs loses (or gets back) its link
    /// to `plane`.
    fn plane_hosts(&mut self, plane: u8, up: bool) {
        let all = self.sim.handler().fabric.topology().hosts();
        let others: Vec<u32> = (0..all).filter(|h| !self.hosts.contains(h)).collect();
        for h in others {
            self.cable_host(h, plane, up);
        }
    }

    /// NIC `i`'s firmware cores stop (`stalled`) or run again, now.
    fn stall(&mut self, i: usize, stalled: bool) {
        let Some(&h) = self.hosts.get(i) else { return };
        let (w, mut s) = self.sim.handler_and_scheduler();
        w.host_input(h, &mut s, |nic, fab, s, me| {
            nic.stall_firmware(stalled, s.now(), fab, s, me)
        });
    }

    /// Spine `spine` of `plane` starts (`on`) or stops blackholing, now.
    fn blackhole_spine(&mut self, plane: u8, spine: u16, on: bool) {
        let (w, mut s) = self.sim.handler_and_scheduler();
        let Some(sw) = w
            .fabric
            .topology()
            .switch(u32::from(plane), 1, u32::from(spine))
        else {
            return;
        };
        let f = if on {
            Fault::Blackhole(sw)
        } else {
            Fault::Restore(sw)
        };
        let now = s.now();
        let _ = w.fabric.schedule_fault(&mut s, now, f);
    }

    /// The link between leaf `leaf` and spine `spine` of `plane` starts (`on`) or stops
    /// dropping everything.
    fn blackhole_link(&mut self, plane: u8, leaf: u16, spine: u16, on: bool) {
        let (loss, corrupt) = self.impairment;
        let fab = &mut self.sim.handler_mut().fabric;
        let topo = fab.topology();
        let (Some(l), Some(sp)) = (
            topo.switch(u32::from(plane), 0, u32::from(leaf)),
            topo.switch(u32::from(plane), 1, u32::from(spine)),
        ) else {
            return;
        };
        let owner = |p| match topo.port_owner(p) {
            PortOwner::Switch { switch, .. } => Some(switch),
            PortOwner::Host { .. } => None,
        };
        let mut found = None;
        let mut id = 0u32;
        topo.for_each_link(|spec| {
            if spec.tier == 1 && owner(spec.a) == Some(l) && owner(spec.b) == Some(sp) {
                found = Some(LinkId(id));
            }
            id += 1;
        });
        if let Some(link) = found {
            if on {
                fab.set_link_impairment(link, 1_000_000, 0);
            } else {
                fab.set_link_impairment(link, loss, corrupt);
            }
        }
    }

    /// No more random loss or corruption on any link.
    fn clean_links(&mut self) {
        self.impairment = (0, 0);
        let fab = &mut self.sim.handler_mut().fabric;
        for l in 0..fab.links() {
            fab.set_link_impairment(LinkId(l), 0, 0);
        }
    }

    /// A packet from outside for device QP `dev_qpn` of NIC `i` with its payload bytes.
    fn inject(
        &mut self,
        i: usize,
        dev_qpn: u32,
        pkt: Packet,
        payload: Vec<u8>,
    ) -> Option<RxVerdict> {
        let handle = INJECTED | (self.next_injected & !INJECTED);
        self.next_injected = self.next_injected.wrapping_add(1);
        self.injected.insert(handle, payload);
        if self.injected.len() > INJECTED_KEPT {
            self.injected.pop_first();
        }
        let h = self.hosts[i];
        let local = LocalBuf { handle, offset: 0 };
        let (w, mut s) = self.sim.handler_and_scheduler();
        w.host_input(h, &mut s, |nic, fab, s, me| {
            let now: Time = s.now();
            nic.driver_inject(now, dev_qpn, pkt, local, fab, s, me)
        })
        .flatten()
    }
}
