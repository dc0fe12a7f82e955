//! Fault knobs of fabric mode beyond the channel's own (loss, duplication, trimming,
//! reordering, a blackholed EV): scheduled windows in virtual time (a plane lost, a cable
//! pulled, a switch that stays up but silently drops the EVs routed through it, a stalled
//! firmware core), slow DMA, bit corruption on the wire, and raw frames injected from outside
//! (hostile input).
//!
//! Contracts:
//! - A window `[from_ns, to_ns)` starts and ends at its edges; edges are applied at the first
//!   pump step at or after them, and the pump jumps virtual time to the next edge.
//! - A stalled firmware core stops its whole NIC in this model (the datapath stage waits with
//!   it): no transmit, no receive processing, no timers, no completions, no WQE hand-off.
//!   Packets that arrive for it wait in a bounded receive backlog ([`STALL_BACKLOG`] packets,
//!   as a CSR event queue would) and are processed in arrival order when the stall ends;
//!   overflow is dropped and counted.
//! - Slow DMA: each batch of send WQEs is handed to the stage `dma_delay_ns` after the
//!   doorbell that made it visible, and each completion reaches the CQ `dma_delay_ns` after the
//!   engine produced it (order kept).
//! - Corruption flips one random bit of the frame (every byte after the Ethernet header) as it
//!   crosses the wire; the receiver parses the frame with `mrc_abi::wire::Frame::parse` (UDP
//!   checksum included) and drops what fails, counted. A flip the checksum does not cover
//!   (IPv6 traffic class, flow label, hop limit) is delivered and counted as undetected.
//! - An injected frame is parsed like a received one, must be addressed to the NIC, and its
//!   source address must be the QP's peer; anything else is dropped and counted.

use std::collections::VecDeque;
use std::net::Ipv6Addr;

use mrc_abi::wire::{
    EthernetAddress, EthernetRepr, Frame, Ipv6Repr, MrcRepr, UdpRepr, IP_PROTO_UDP,
};
use mrc_firmware::engine::rng::Rng;
use mrc_firmware::engine::Completion;

/// Packets a stalled core's receive backlog holds.
pub const STALL_BACKLOG: usize = 2048;

/// What became of a received frame.
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
    Engine(mrc_firmware::datapath::packet::RxVerdict),
    /// The host is not in fabric mode.
    NoFabric,
    /// The stage would not take it even after its reports moved on (a model bug; counted).
    Refused,
}

/// What a scheduled window does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// Every NIC's port on the plane goes down and the plane drops everything.
    Plane(u8),
    /// One NIC's port loses its link (a cable pull).
    Port { nic: usize, port: u8 },
    /// A switch of `plane` that stays up but silently drops every packet of the EVs routed
    /// through it: EV index `e` with `(e / planes) % spines == spine`. Nobody is told.
    SwitchBlackhole { plane: u8, spines: u16, spine: u16 },
    /// NIC `nic`'s firmware core runs nothing.
    Stall { nic: usize },
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub kind: WindowKind,
    pub from_ns: u64,
    pub to_ns: u64,
    /// 0 pending, 1 active, 2 over.
    pub state: u8,
}

/// A received packet ready for the stage (or waiting for a stalled core).
#[derive(Clone, Debug)]
pub(crate) struct RxPacket {
    pub src_gid: [u8; 16],
    pub repr: MrcRepr,
    pub payload: Vec<u8>,
    pub ce: bool,
}

/// Fault state of a fabric.
pub(crate) struct Faults {
    pub windows: Vec<Window>,
    pub dma_delay_ns: Vec<u64>,
    /// Per NIC: packets waiting for a stalled core.
    pub backlog: Vec<VecDeque<RxPacket>>,
    /// Per NIC: engine completions on their way to the CQ `(due_ns, completion)`.
    pub cqe_q: Vec<VecDeque<(u64, Completion)>>,
    /// Per NIC and QP: when the pending WQE batch reaches the stage.
    pub fetch_due: std::collections::BTreeMap<(usize, u32), u64>,
    pub rng: Rng,
    pub corrupt_ppm: u32,
}

impl Faults {
    pub fn new(nics: usize, seed: u64, corrupt_ppm: u32) -> Faults {
        Faults {
            windows: Vec::new(),
            dma_delay_ns: vec![0; nics],
            backlog: (0..nics).map(|_| VecDeque::new()).collect(),
            cqe_q: (0..nics).map(|_| VecDeque::new()).collect(),
            fetch_due: std::collections::BTreeMap::new(),
            rng: Rng::new(seed ^ 0xc0ff_ee00_dead_beef),
            corrupt_ppm,
        }
    }

    pub fn schedule(&mut self, kind: WindowKind, from_ns: u64, to_ns: u64) {
        self.windows.push(Window {
            kind,
            from_ns,
            to_ns: to_ns.max(from_ns),
            state: 0,
        });
    }

    fn active(&self, f: impl Fn(&WindowKind) -> bool) -> bool {
        self.windows.iter().any(|w| w.state == 1 && f(&w.kind))
    }

    pub fn plane_dead(&self, plane: u8) -> bool {
        self.active(|k| *k == WindowKind::Plane(plane))
    }

    pub fn stalled(&self, nic: usize) -> bool {
        self.active(|k| *k == WindowKind::Stall { nic })
    }

    /// A switch blackholes EV `ev` on `plane` of a NIC with `planes` planes.
    pub fn switch_drops(&self, plane: u8, ev: u16, planes: u16) -> bool {
        self.active(|k| match *k {
            WindowKind::SwitchBlackhole {
                plane: p,
                spines,
                spine,
            } => p == plane && (ev / planes.max(1)) % spines.max(1) == spine,
            _ => false,
        })
    }

    /// The next pending edge.
    pub fn next_edge(&self) -> Option<u64> {
        self.windows
            .iter()
            .filter_map(|w| match w.state {
                0 => Some(w.from_ns),
                1 => Some(w.to_ns),
                _ => None,
            })
            .min()
    }

    /// Edges due at `now_ns`, in schedule order: `(kind, starts)`.
    pub fn take_edges(&mut self, now_ns: u64) -> Vec<(WindowKind, bool)> {
        let mut out = Vec::new();
        for w in self.windows.iter_mut() {
            if w.state == 0 && now_ns >= w.from_ns {
                w.state = 1;
                out.push((w.kind, true));
            }
            if w.state == 1 && now_ns >= w.to_ns {
                w.state = 2;
                out.push((w.kind, false));
            }
        }
        out
    }

    /// Nothing waits in a backlog or on its way to a CQ.
    pub fn idle(&self) -> bool {
        self.backlog.iter().all(VecDeque::is_empty) && self.cqe_q.iter().all(VecDeque::is_empty)
    }

    /// The earliest time something queued here becomes due.
    pub fn next_due(&self) -> Option<u64> {
        self.cqe_q
            .iter()
            .filter_map(|q| q.front().map(|c| c.0))
            .chain(self.fetch_due.values().copied())
            .min()
    }

    /// The packet as it arrives after crossing a wire that may flip one bit: `None` when the
    /// receiver's parse rejects it, `Some(undetected)` with the parsed packet otherwise.
    pub fn maybe_corrupt(&mut self, p: &mut RxPacket, dst_gid: [u8; 16]) -> Option<bool> {
        if self.corrupt_ppm == 0 || !self.rng.chance_ppm(self.corrupt_ppm) {
            return Some(false);
        }
        let mut buf = vec![0u8; 256 + p.payload.len()];
        let Ok(len) = build_frame(p, dst_gid).emit(&mut buf) else {
            return None;
        };
        let bits = (len - 14) as u64 * 8;
        let bit = 14 * 8 + self.rng.below(bits) as usize;
        buf[bit / 8] ^= 1 << (bit % 8);
        let f = Frame::parse(&buf[..len]).ok()?;
        p.src_gid = f.encap.transport().src.octets();
        p.repr = f.mrc;
        p.payload = f.payload.to_vec();
        Some(true)
    }
}

/// The frame of `p` from its source to `dst_gid` (UDP EV format, plain IPv6).
pub(crate) fn build_frame(p: &RxPacket, dst_gid: [u8; 16]) -> Frame<'_> {
    let src_port = p
        .repr
        .evx
        .map_or(0xC000, |e| 0xC000 | (e.ev_index & 0x3fff));
    Frame {
        eth: EthernetRepr {
            dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src: EthernetAddress([2, 0, 0, 0, 0, 1]),
        },
        encap: mrc_abi::wire::Encap::Plain(Ipv6Repr {
            src: Ipv6Addr::from(p.src_gid),
            dst: Ipv6Addr::from(dst_gid),
            next_header: IP_PROTO_UDP,
            hop_limit: 64,
            traffic_class: if p.ce { 3 } else { 2 },
            flow_label: 0,
        }),
        udp: UdpRepr { src_port },
        mrc: p.repr,
        payload: &p.payload,
    }
}
