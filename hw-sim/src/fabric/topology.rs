//! Deterministic ids and wiring of a multi-plane Clos, and uSID source routes through it.
//!
//! # Ids
//! Everything is numbered plane-major so that a plane is one contiguous block (a natural unit
//! for partitioning):
//! - hosts `0..hosts`; host `h` has one NIC port on every plane;
//! - per plane, ports are `[host ports (hosts)] [switch ports]`; global
//!   `PortId = plane * ports_per_plane + local`; host `h`'s port on plane `p` is
//!   `p * ports_per_plane + h`;
//! - per plane, switches are numbered tier by tier (T0 first); global
//!   `SwitchId = plane * switches_per_plane + local`;
//! - links are numbered in build order (host links first, then T0-T1, then T1-T2), plane by
//!   plane.
//!
//! # Port numbering
//! - leaf-spine: leaf `l` ports `0..H` go to hosts `l*H..`, ports `H..H+S` to spines `0..S`
//!   (`H = S = radix/2`); spine port `l` goes to leaf `l`;
//! - fat tree (`h = k/2`): edge `(pod, x)` ports `0..h` to its hosts, `h..k` to aggregation
//!   switches `(pod, 0..h)`; aggregation `(pod, j)` ports `0..h` to edges `(pod, 0..h)`, `h..k` to
//!   cores `(j, 0..h)`; core `(j, i)` port `p` to aggregation `(p, j)`.
//!
//! # uSIDs and paths
//! Every plane is the [`Clos`] of [`Topology::clos`] (a leaf-spine is a two-tier Clos of
//! `radix/2` hosts per leaf, a fat tree the k-ary three-tier one), and uSIDs mean what
//! `mrc_abi::wire::usid::clos` says: a uSID names a switch (`tier << 12 | index + 1`, the index
//! of this module's `SwitchInfo::index`) or, at a leaf, one of its hosts (`0xF000 | downlink +
//! 1`). A switch forwards by [`Clos::forward`] ([`Topology::usid_hop`] maps the neighbour it
//! names to the port cabled to it), so the routes the controller's planner makes for this
//! description are the routes this fabric forwards. [`Topology::usid_route`] maps
//! `(src, dst, path index)` to [`Clos::path`]: indices are taken modulo
//! [`Topology::path_count`], and distinct indices below it give distinct paths:
//! - leaf-spine: `S = radix/2` paths between leaves (index -> spine), 1 within a leaf;
//! - fat tree: `(k/2)^2` paths between pods (index -> aggregation `j = i mod k/2`, core
//!   `i / (k/2) mod k/2`; k = 16 has 64), `k/2` within a pod, 1 within an edge switch.
//!
//! So an MRC QP with 256 EVs on a k = 16 fat tree reuses each inter-pod path four times. A
//! fabric with more than 4095 switches in a tier has no uSID plan (a fat tree past k = 90): its
//! uSID routes are [`RouteError::NoUsidPlan`] (ECMP still routes it).

use mrc_abi::wire::usid::clos::{Carrier, Clos, ClosError, Hop, Node, PairPaths, SwitchTable};
use mrc_abi::wire::usid::DEFAULT_BLOCK;

use super::config::{ConfigError, FabricConfig, Shape};
use super::packet::UsidRoute;

/// A global port id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortId(pub u32);
/// A global link id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);
/// A global switch id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SwitchId(pub u32);

/// Who owns a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortOwner {
    /// A host NIC port.
    Host {
        /// The host.
        host: u32,
        /// Its plane.
        plane: u32,
    },
    /// A switch port.
    Switch {
        /// The switch.
        switch: SwitchId,
        /// Its port number on the switch.
        port: u32,
    },
}

/// Where a switch sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchInfo {
    /// Plane.
    pub plane: u32,
    /// Tier: 0 = leaf/edge (T0), 1 = spine/aggregation (T1), 2 = core (T2).
    pub tier: u8,
    /// Index within its tier and plane.
    pub index: u32,
    /// Number of ports.
    pub ports: u32,
}

/// One link to build (both ends, tier of the upper end: 0 = host link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkSpec {
    /// Lower end (host or lower-tier switch).
    pub a: PortId,
    /// Upper end.
    pub b: PortId,
    /// 0: host - T0, 1: T0 - T1, 2: T1 - T2.
    pub tier: u8,
}

/// Why no route exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteError {
    /// A host id is out of range.
    NoSuchHost {
        /// The host.
        host: u32,
    },
    /// Source and destination are the same host.
    SameHost,
    /// The fabric is too large for 16-bit uSIDs (see the module docs).
    NoUsidPlan,
}

/// Shape-specific dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dims {
    LeafSpine { hpl: u32, leaves: u32, spines: u32 },
    FatTree { k: u32, h: u32 },
}

/// The wiring of a fabric; pure arithmetic plus small per-switch tables.
#[derive(Clone, Debug)]
pub struct Topology {
    pub(crate) dims: Dims,
    planes: u32,
    hosts: u32,
    switches_per_plane: u32,
    ports_per_plane: u32,
    /// Per plane-local switch: first port (plane-local, after the host ports), ports, tier, index.
    sw_base: Vec<u32>,
    sw_ports: Vec<u32>,
    sw_tier: Vec<u8>,
    sw_index: Vec<u32>,
    /// Per plane-local switch: its uSID routing table ([`Clos::switch_table`]); `None` without
    /// a uSID plan.
    sw_usid: Vec<Option<SwitchTable>>,
    /// The uSID plan of one plane, when the fabric has one.
    clos: Result<Clos, ClosError>,
}

impl Topology {
    /// Builds the wiring for `cfg` (validated first).
    ///
    /// # Errors
    /// [`ConfigError`] when the configuration is invalid.
    pub fn new(cfg: &FabricConfig) -> Result<Topology, ConfigError> {
        cfg.validate()?;
        let (dims, hosts, tiers): (Dims, u32, Vec<(u8, u32, u32)>) = match cfg.shape {
            Shape::LeafSpine { hosts, radix } => {
                let hpl = radix / 2;
                let spines = radix / 2;
                let leaves = hosts.div_ceil(hpl);
                (
                    Dims::LeafSpine {
                        hpl,
                        leaves,
                        spines,
                    },
                    hosts,
                    vec![(0, leaves, hpl + spines), (1, spines, leaves)],
                )
            }
            Shape::FatTree { k } => {
                let h = k / 2;
                (
                    Dims::FatTree { k, h },
                    k * k * k / 4,
                    vec![(0, k * h, k), (1, k * h, k), (2, h * h, k)],
                )
            }
        };
        let clos = match dims {
            Dims::LeafSpine {
                hpl,
                leaves,
                spines,
            } => {
                let n = |x: u32| u16::try_from(x).unwrap_or(u16::MAX);
                Clos::two_tier(1, n(leaves), n(spines), n(hpl), DEFAULT_BLOCK)
            }
            Dims::FatTree { k, .. } => {
                Clos::fat_tree(1, u16::try_from(k).unwrap_or(u16::MAX), DEFAULT_BLOCK)
            }
        };
        let mut t = Topology {
            clos: clos.check().map(|()| clos),
            dims,
            planes: cfg.planes,
            hosts,
            switches_per_plane: 0,
            ports_per_plane: hosts,
            sw_base: Vec::new(),
            sw_ports: Vec::new(),
            sw_tier: Vec::new(),
            sw_index: Vec::new(),
            sw_usid: Vec::new(),
        };
        let mut next = 0u32;
        for (tier, count, ports) in tiers {
            for i in 0..count {
                t.sw_base.push(next);
                t.sw_ports.push(ports);
                t.sw_tier.push(tier);
                t.sw_index.push(i);
                next += ports;
            }
        }
        t.switches_per_plane = t.sw_base.len() as u32;
        t.ports_per_plane = hosts + next;
        t.sw_usid = (t.sw_tier.iter().zip(&t.sw_index))
            .map(|(&tier, &index)| {
                let node = Node {
                    tier: tier + 1,
                    index: u16::try_from(index).ok()?,
                };
                t.clos.as_ref().ok()?.switch_table(node).ok()
            })
            .collect();
        Ok(t)
    }

    /// Hosts.
    pub fn hosts(&self) -> u32 {
        self.hosts
    }
    /// Planes.
    pub fn planes(&self) -> u32 {
        self.planes
    }
    /// Switches per plane.
    pub fn switches_per_plane(&self) -> u32 {
        self.switches_per_plane
    }
    /// Switches in all planes.
    pub fn switches(&self) -> u32 {
        self.switches_per_plane * self.planes
    }
    /// Ports per plane (host ports included).
    pub fn ports_per_plane(&self) -> u32 {
        self.ports_per_plane
    }
    /// Ports in all planes.
    pub fn ports(&self) -> u32 {
        self.ports_per_plane * self.planes
    }

    /// Host `host`'s NIC port on `plane`.
    #[inline]
    pub fn host_port(&self, host: u32, plane: u32) -> PortId {
        PortId(plane * self.ports_per_plane + host)
    }

    /// The switch at `(plane, tier, index)`, if it exists.
    pub fn switch(&self, plane: u32, tier: u8, index: u32) -> Option<SwitchId> {
        if plane >= self.planes {
            return None;
        }
        let first = self.sw_tier.iter().position(|t| *t == tier)? as u32;
        let local = first + index;
        (local < self.switches_per_plane && self.sw_tier[local as usize] == tier)
            .then_some(SwitchId(plane * self.switches_per_plane + local))
    }

    /// Where a switch sits.
    pub fn switch_info(&self, sw: SwitchId) -> SwitchInfo {
        let l = (sw.0 % self.switches_per_plane) as usize;
        SwitchInfo {
            plane: sw.0 / self.switches_per_plane,
            tier: self.sw_tier[l],
            index: self.sw_index[l],
            ports: self.sw_ports[l],
        }
    }

    /// Port `port` (0-based; uSID `port + 1`) of switch `sw`.
    #[inline]
    pub fn switch_port(&self, sw: SwitchId, port: u32) -> PortId {
        let plane = sw.0 / self.switches_per_plane;
        let l = (sw.0 % self.switches_per_plane) as usize;
        PortId(plane * self.ports_per_plane + self.hosts + self.sw_base[l] + port)
    }

    /// Who owns `port`.
    pub fn port_owner(&self, port: PortId) -> PortOwner {
        let plane = port.0 / self.ports_per_plane;
        let local = port.0 % self.ports_per_plane;
        if local < self.hosts {
            return PortOwner::Host { host: local, plane };
        }
        let off = local - self.hosts;
        // Switch bases are sorted: the owner is the last base <= off.
        let l = self.sw_base.partition_point(|b| *b <= off) - 1;
        PortOwner::Switch {
            switch: SwitchId(plane * self.switches_per_plane + l as u32),
            port: off - self.sw_base[l],
        }
    }

    /// Plane-local switch number of a switch at `tier`, `index`.
    #[inline]
    pub(crate) fn local_switch(&self, tier: u8, index: u32) -> u32 {
        match (self.dims, tier) {
            (_, 0) => index,
            (Dims::LeafSpine { leaves, .. }, _) => leaves + index,
            (Dims::FatTree { k, h }, 1) => k * h + index,
            (Dims::FatTree { k, h }, _) => 2 * k * h + index,
        }
    }

    /// Plane-local port of port `port` of plane-local switch `local`.
    #[inline]
    pub(crate) fn local_port(&self, local: u32, port: u32) -> u32 {
        self.hosts + self.sw_base[local as usize] + port
    }

    /// Calls `f` for every link, in link-id order.
    pub fn for_each_link(&self, mut f: impl FnMut(LinkSpec)) {
        for plane in 0..self.planes {
            let base = plane * self.ports_per_plane;
            let mut emit = |a: u32, b: u32, tier: u8| {
                f(LinkSpec {
                    a: PortId(base + a),
                    b: PortId(base + b),
                    tier,
                })
            };
            match self.dims {
                Dims::LeafSpine {
                    hpl,
                    leaves,
                    spines,
                } => {
                    for host in 0..self.hosts {
                        emit(host, self.local_port(host / hpl, host % hpl), 0);
                    }
                    for l in 0..leaves {
                        for s in 0..spines {
                            let sp = self.local_switch(1, s);
                            emit(self.local_port(l, hpl + s), self.local_port(sp, l), 1);
                        }
                    }
                }
                Dims::FatTree { k, h } => {
                    for host in 0..self.hosts {
                        emit(host, self.local_port(host / h, host % h), 0);
                    }
                    for pod in 0..k {
                        for x in 0..h {
                            for j in 0..h {
                                let agg = self.local_switch(1, pod * h + j);
                                emit(
                                    self.local_port(pod * h + x, h + j),
                                    self.local_port(agg, x),
                                    1,
                                );
                            }
                        }
                    }
                    for pod in 0..k {
                        for j in 0..h {
                            let agg = self.local_switch(1, pod * h + j);
                            for i in 0..h {
                                let core = self.local_switch(2, j * h + i);
                                emit(self.local_port(agg, h + i), self.local_port(core, pod), 2);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The uSID plan of one plane (every plane is the same), or why the fabric has none.
    ///
    /// # Errors
    /// [`ClosError::TooLarge`] for a fabric with more than 4095 switches in a tier.
    pub fn clos(&self) -> Result<&Clos, ClosError> {
        self.clos.as_ref().map_err(|e| *e)
    }

    /// Distinct source-routed paths from `src` to `dst` (0 for the same host, an unknown host or
    /// a fabric without a uSID plan).
    pub fn path_count(&self, src: u32, dst: u32) -> u32 {
        if src >= self.hosts || dst >= self.hosts {
            return 0;
        }
        self.clos()
            .map_or(0, |c| c.path_count(src, dst).unwrap_or(0))
    }

    /// Most distinct paths between any two hosts.
    pub fn max_paths(&self) -> u32 {
        match self.dims {
            Dims::LeafSpine { spines, .. } => spines,
            Dims::FatTree { h, .. } => h * h,
        }
    }

    /// The uSID route from `src` to `dst` on path `path` (taken modulo
    /// [`Topology::path_count`]): [`Clos::path`]. Same on every plane.
    ///
    /// # Errors
    /// [`RouteError`] for an unknown host, `src == dst` or a fabric without a uSID plan.
    pub fn usid_route(&self, src: u32, dst: u32, path: u32) -> Result<UsidRoute, RouteError> {
        usid_route_of(&self.usid_paths(src, dst)?, path)
    }

    /// The uSID paths from `src` to `dst` ([`Clos::paths`]), for a sender that routes many
    /// packets of the pair: [`usid_route_of`] of them and a path index is
    /// [`Topology::usid_route`], and their [`PairPaths::count`] is [`Topology::path_count`].
    ///
    /// # Errors
    /// [`RouteError`] for an unknown host, `src == dst` or a fabric without a uSID plan.
    pub fn usid_paths(&self, src: u32, dst: u32) -> Result<PairPaths, RouteError> {
        for host in [src, dst] {
            if host >= self.hosts {
                return Err(RouteError::NoSuchHost { host });
            }
        }
        if src == dst {
            return Err(RouteError::SameHost);
        }
        let clos = self.clos().map_err(|_| RouteError::NoUsidPlan)?;
        clos.paths(src, dst).map_err(|e| match e {
            ClosError::SameHost => RouteError::SameHost,
            ClosError::NoSuchHost(host) => RouteError::NoSuchHost { host },
            _ => RouteError::NoUsidPlan,
        })
    }

    /// Switch `sw` (global id) forwards a packet carrying `route` ([`Clos::forward`]): consumes
    /// what the uSID rules say and returns the switch-local output port cabled to the neighbour
    /// the route names, or `None` when the switch has no route for it.
    #[inline]
    pub fn usid_hop<C: Carrier>(&self, sw: SwitchId, route: &mut C) -> Option<u32> {
        let l = (sw.0 % self.switches_per_plane) as usize;
        let (table, tier) = (self.sw_usid.get(l)?.as_ref()?, *self.sw_tier.get(l)?);
        let hop = table.forward(route).ok()?;
        Some(match (self.dims, tier, hop) {
            (_, 0, Hop::Host(port)) => u32::from(port),
            (Dims::LeafSpine { hpl, .. }, 0, Hop::Up(s)) => hpl + u32::from(s),
            (Dims::LeafSpine { .. }, _, Hop::Down(l)) => u32::from(l),
            (Dims::FatTree { h, .. }, 0, Hop::Up(a)) => h + u32::from(a) % h,
            (Dims::FatTree { h, .. }, 1, Hop::Down(e)) => u32::from(e) % h,
            (Dims::FatTree { h, .. }, 1, Hop::Up(c)) => h + u32::from(c) % h,
            (Dims::FatTree { h, .. }, _, Hop::Down(a)) => u32::from(a) / h,
            _ => return None,
        })
    }
}

/// The uSID route of path `path` (taken modulo their count) of a pair's `paths`
/// ([`Topology::usid_paths`]).
///
/// # Errors
/// [`RouteError::NoUsidPlan`] for a route that does not fit a [`UsidRoute`] (a checked plan's
/// never: at most six uSIDs, none zero).
pub fn usid_route_of(paths: &PairPaths, path: u32) -> Result<UsidRoute, RouteError> {
    UsidRoute::new(paths.path(path).usids()).map_err(|_| RouteError::NoUsidPlan)
}
