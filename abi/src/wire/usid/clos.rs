//! The uSID addressing plan of a multi-plane Clos: what a uSID names, how a switch forwards on
//! it, and the paths between two hosts. The controller's path planner and the simulator's fabric
//! both use this module, so a route the controller plans is a route the fabric forwards.
//! `abi/WIRE.md` ("uSIDs in a Clos") is the same contract in prose.
//!
//! # What a uSID names
//! A uSID names a **node**, as an RFC 9800 uN does, not an output port. Each plane is an
//! independent Clos with its own switches, so every plane uses the same numbers; the plane is the
//! NIC port the packet leaves by.
//! - Switch uSIDs are global within a plane: `tier << 12 | (index + 1)` with tier 1 = leaf (T0),
//!   2 = spine / aggregation (T1), 3 = core (T2), and `index` the switch's number within its
//!   tier (at most [`MAX_PER_TIER`] switches per tier).
//! - Host uSIDs are **local** to a leaf (an RFC 9800 local uSID, like a uA): `0xF000 | (port +
//!   1)` where `port` is the host's downlink on its leaf (`host % hosts_per_leaf`). Only the leaf
//!   the host hangs off reads it.
//!
//! # How a switch forwards ([`Clos::forward`])
//! Its static routing table holds its own uSID, the uSIDs of its neighbours and, at a leaf, the
//! local uSIDs of its hosts:
//! 1. the active uSID is the switch's own: consume it (shift the carrier) and go on with the next;
//! 2. a neighbour's uSID: forward to that neighbour, carrier unchanged (the neighbour consumes it);
//! 3. a local uSID of one of its hosts: consume it and forward down to that host;
//! 4. anything else, or the end of the carrier: no route (the switch drops and counts it).
//!
//! A route is therefore the list of the switches it crosses, then the destination's local uSID:
//! `leaf, spine, leaf, host` (two tiers), `leaf, aggregation, core, aggregation, leaf, host`
//! (three tiers, between pods); six uSIDs at most, one carrier. The packet reaches the host with
//! its carrier used up.
//!
//! # Why nodes, not ports
//! Node uSIDs are what a uSID fabric runs (RFC 9800 uN with a static or IGP-built table), they
//! read the same on every switch (`fcbb:bb00:1001:2003:1005:f002::` says leaf 0, spine 2, leaf 4,
//! port 1), the planner derives them from the topology description alone (switch numbering,
//! not cabling order), and a route that names a switch that is not on the way is dropped by the
//! first switch that cannot reach it instead of leaving by whatever port has that number.
//!
//! # Paths
//! [`Clos::path`] maps `(src, dst, index)` to a path; indices are taken modulo
//! [`Clos::path_count`] and distinct indices below it give distinct paths:
//! - same leaf: 1 path;
//! - two tiers, or three tiers within a pod: `spines` paths, index `i` crosses spine
//!   (aggregation) `i`;
//! - three tiers between pods: `cores` paths, index `i` crosses aggregation
//!   `a = i % spines` of both pods and core `c = i / spines` of core group `a` (core index
//!   `a * (cores / spines) + c`).
//!
//! [`Clos::ev`] spreads EVs: EV `i` leaves on plane `i % planes` (planes stay equally loaded) and
//! takes path `(i / planes) % path_count`.
//!
//! ```
//! use mrc_abi::wire::usid::{self, clos::{Clos, Hop, Node}};
//! let clos = Clos::two_tier(4, 16, 8, 8, usid::DEFAULT_BLOCK);
//! let p = clos.path(0, 100, 2).unwrap();
//! assert_eq!(p.usids(), [0x1001, 0x2003, 0x100d, 0xf005]);
//! // Spine 2 holds leaf 12 as a neighbour: forward there, carrier unchanged.
//! let spine = Node { tier: 2, index: 2 };
//! let mut c = usid::carrier(clos.block, &p.usids()[2..]).unwrap();
//! assert_eq!(clos.forward(spine, &mut c), Ok(Hop::Down(12)));
//! // Leaf 12 consumes its own uSID, then its host's local uSID.
//! assert_eq!(clos.forward(Node { tier: 1, index: 12 }, &mut c), Ok(Hop::Host(4)));
//! assert!(usid::is_end_of_carrier(c));
//! ```

use core::net::Ipv6Addr;

use super::{active, carrier, shift, MAX_USIDS};

/// Tier number of leaves (T0) in a switch uSID.
pub const TIER_LEAF: u8 = 1;
/// Tier number of spines / aggregation switches (T1).
pub const TIER_SPINE: u8 = 2;
/// Tier number of core switches (T2).
pub const TIER_CORE: u8 = 3;
/// Top nibble of a local (host-facing) uSID.
pub const LOCAL_PREFIX: u16 = 0xF000;
/// Most switches per tier, and most hosts per leaf (a 12-bit `index + 1`).
pub const MAX_PER_TIER: u16 = 0x0FFF;

/// A switch of one plane: its tier ([`TIER_LEAF`]..=[`TIER_CORE`]) and index in that tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Node {
    /// 1 = leaf, 2 = spine / aggregation, 3 = core.
    pub tier: u8,
    /// Index within the tier (for three tiers: leaf `pod * leaves_per_pod + x`, aggregation
    /// `pod * spines + j`, core `j * (cores / spines) + c`).
    pub index: u16,
}

impl Node {
    /// The node's uSID, `tier << 12 | (index + 1)`; `None` for a tier outside 1..=3 or an index
    /// of [`MAX_PER_TIER`] or more.
    pub const fn usid(self) -> Option<u16> {
        if self.tier < TIER_LEAF || self.tier > TIER_CORE || self.index >= MAX_PER_TIER {
            return None;
        }
        Some((self.tier as u16) << 12 | (self.index + 1))
    }
}

/// The local uSID of the host on downlink `port` of its leaf; `None` past [`MAX_PER_TIER`].
pub const fn local_usid(port: u16) -> Option<u16> {
    if port >= MAX_PER_TIER {
        return None;
    }
    Some(LOCAL_PREFIX | (port + 1))
}

/// A list of uSIDs being consumed in travel order: the outer IPv6 destination (a carrier), or
/// a simulator's model of one.
pub trait Carrier {
    /// The active uSID; 0 at the end of the route.
    fn active(&self) -> u16;
    /// Consumes the active uSID.
    fn consume(&mut self);
}

impl Carrier for Ipv6Addr {
    fn active(&self) -> u16 {
        active(*self)
    }
    fn consume(&mut self) {
        *self = shift(*self);
    }
}

/// What a uSID names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Sid {
    /// A switch.
    Node(Node),
    /// The host on this downlink of the leaf that reads it.
    Local {
        /// Downlink (0-based).
        port: u16,
    },
}

/// Decodes a uSID; `None` for 0 (end of carrier), a tier nibble of 0 or 4..=14, or an index
/// field of 0.
pub const fn decode(usid: u16) -> Option<Sid> {
    let low = usid & 0x0FFF;
    if low == 0 {
        return None;
    }
    match (usid >> 12) as u8 {
        t @ TIER_LEAF..=TIER_CORE => Some(Sid::Node(Node {
            tier: t,
            index: low - 1,
        })),
        0xF => Some(Sid::Local { port: low - 1 }),
        _ => None,
    }
}

/// Where a switch sends a packet ([`Clos::forward`]). Indices are in the neighbour's tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Hop {
    /// Up to this switch of the next tier.
    Up(u16),
    /// Down to this switch of the tier below.
    Down(u16),
    /// Down to the host on this downlink (leaves only).
    Host(u16),
}

/// Why a description, a host pair or a forwarding step is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClosError {
    /// `planes`, `leaves`, `spines` or `hosts_per_leaf` is 0.
    Empty,
    /// A tier or `hosts_per_leaf` holds more than [`MAX_PER_TIER`].
    TooLarge,
    /// `tiers` is not 2 or 3.
    Tiers(u8),
    /// Three tiers: `pods` is 0 or does not divide `leaves`.
    Pods,
    /// Three tiers: `cores` is 0 or not a multiple of `spines`.
    Cores,
    /// A host number past the fabric.
    NoSuchHost(u32),
    /// Source and destination are the same host.
    SameHost,
    /// The node is not a switch of this fabric.
    NoSuchNode,
    /// The switch has no route for the active uSID (not its own, a neighbour's or one of its
    /// hosts'), or the carrier ended at a switch.
    NoRoute(u16),
}

impl core::fmt::Display for ClosError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ClosError::Empty => write!(f, "planes, leaves, spines and hosts_per_leaf must be >= 1"),
            ClosError::TooLarge => write!(
                f,
                "at most {MAX_PER_TIER} switches per tier and hosts per leaf (12-bit uSID index)"
            ),
            ClosError::Tiers(t) => write!(f, "{t} tiers: only 2 and 3 are supported"),
            ClosError::Pods => write!(f, "3 tiers: pods must divide leaves"),
            ClosError::Cores => write!(f, "3 tiers: cores must be a non-zero multiple of spines"),
            ClosError::NoSuchHost(h) => write!(f, "host {h} is not in the fabric"),
            ClosError::SameHost => write!(f, "source and destination are the same host"),
            ClosError::NoSuchNode => write!(f, "no such switch in the fabric"),
            ClosError::NoRoute(u) => write!(f, "no route for uSID {u:#06x}"),
        }
    }
}

/// One path: its uSIDs in travel order (switches, then the destination's local uSID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Path {
    usids: [u16; MAX_USIDS],
    len: u8,
}

impl Path {
    /// The uSIDs, in travel order.
    pub fn usids(&self) -> &[u16] {
        &self.usids[..usize::from(self.len)]
    }

    /// The carrier of this path in `block`.
    pub fn carrier(&self, block: u32) -> Ipv6Addr {
        // A path holds 2..=6 uSIDs, none zero: the carrier always exists.
        carrier(block, self.usids()).unwrap_or(Ipv6Addr::UNSPECIFIED)
    }
}

/// A switch's uSID (`0` for one outside the plan, which a checked description never names).
fn node_usid(tier: u8, index: u16) -> u16 {
    Node { tier, index }.usid().unwrap_or(0)
}

/// Which switches a pair's paths turn at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Via {
    /// Both hosts on one leaf: one path, through the leaf.
    Leaf,
    /// Two tiers, or one pod: path `i` turns at spine (aggregation) `i`.
    Spine,
    /// Three tiers between pods: path `i` turns at core `i / spines` of group `i % spines`.
    Core,
}

/// The paths between one pair of hosts of a checked [`Clos`] ([`Clos::paths`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PairPaths {
    via: Via,
    count: u32,
    leaf_s: u16,
    leaf_d: u16,
    /// The destination's local uSID.
    host: u16,
    /// Index of the source's and the destination's pod's first spine (aggregation) switch.
    spine_s: u16,
    spine_d: u16,
    spines: u16,
    /// Core switches per group.
    group: u16,
}

impl PairPaths {
    /// Distinct paths ([`Clos::path_count`]): at least 1.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Path `index`, taken modulo [`PairPaths::count`] ([`Clos::path`]).
    pub fn path(&self, index: u32) -> Path {
        // (`count` is at least 1; `max` keeps a hand-made zero from dividing)
        let i = index % self.count.max(1);
        let mut usids = [0u16; MAX_USIDS];
        let list: &[u16] = match self.via {
            Via::Leaf => &[self.leaf_s, self.host],
            // i < spines here.
            Via::Spine => &[
                self.leaf_s,
                node_usid(TIER_SPINE, self.spine_s + i as u16),
                self.leaf_d,
                self.host,
            ],
            Via::Core => {
                let spines = u32::from(self.spines);
                let (a, c) = ((i % spines) as u16, (i / spines) as u16);
                &[
                    self.leaf_s,
                    node_usid(TIER_SPINE, self.spine_s + a),
                    node_usid(TIER_CORE, a * self.group + c),
                    node_usid(TIER_SPINE, self.spine_d + a),
                    self.leaf_d,
                    self.host,
                ]
            }
        };
        usids[..list.len()].copy_from_slice(list);
        Path {
            usids,
            len: list.len() as u8,
        }
    }
}

/// A multi-plane Clos as the controller describes it (every plane the same).
///
/// Two tiers: `leaves` leaves, each cabled to all `spines` spines. Three tiers: `pods` pods of
/// `leaves / pods` leaves and `spines` aggregation switches (all leaf-aggregation pairs of a pod
/// cabled), and `cores` core switches in `spines` groups of `cores / spines`: aggregation `j`
/// of every pod is cabled to every core of group `j`. Host `h` hangs off leaf
/// `h / hosts_per_leaf`, downlink `h % hosts_per_leaf`, on every plane. A k-ary fat tree is
/// `pods = k`, `leaves = k * k / 2`, `spines = k / 2`, `cores = k * k / 4`,
/// `hosts_per_leaf = k / 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clos {
    /// Independent planes (NIC ports).
    pub planes: u8,
    /// 2 or 3.
    pub tiers: u8,
    /// Leaves per plane.
    pub leaves: u16,
    /// Spines (2 tiers) or aggregation switches per pod (3 tiers).
    pub spines: u16,
    /// 3 tiers: pods (divides `leaves`).
    pub pods: u16,
    /// 3 tiers: core switches (a multiple of `spines`).
    pub cores: u16,
    /// Hosts per leaf.
    pub hosts_per_leaf: u16,
    /// SRv6 locator block of the fabric.
    pub block: u32,
}

impl Clos {
    /// A two-tier Clos.
    pub const fn two_tier(
        planes: u8,
        leaves: u16,
        spines: u16,
        hosts_per_leaf: u16,
        block: u32,
    ) -> Clos {
        Clos {
            planes,
            tiers: 2,
            leaves,
            spines,
            pods: 0,
            cores: 0,
            hosts_per_leaf,
            block,
        }
    }

    /// A k-ary fat tree (`k` even): `k` pods, `k / 2` leaves and aggregation switches per pod,
    /// `(k / 2)^2` cores, `k / 2` hosts per leaf.
    pub const fn fat_tree(planes: u8, k: u16, block: u32) -> Clos {
        let h = k / 2;
        Clos {
            planes,
            tiers: 3,
            leaves: k.saturating_mul(h),
            spines: h,
            pods: k,
            cores: h.saturating_mul(h),
            hosts_per_leaf: h,
            block,
        }
    }

    /// Checks the description.
    ///
    /// # Errors
    /// The first [`ClosError`] that applies.
    pub fn check(&self) -> Result<(), ClosError> {
        if self.planes == 0 || self.leaves == 0 || self.spines == 0 || self.hosts_per_leaf == 0 {
            return Err(ClosError::Empty);
        }
        let tiers = [TIER_LEAF, TIER_SPINE, TIER_CORE].map(|t| self.switches(t));
        if self.spines > MAX_PER_TIER
            || self.hosts_per_leaf > MAX_PER_TIER
            || tiers.iter().any(|n| *n > u32::from(MAX_PER_TIER))
        {
            return Err(ClosError::TooLarge);
        }
        match self.tiers {
            2 => Ok(()),
            3 if self.pods == 0 || !self.leaves.is_multiple_of(self.pods) => Err(ClosError::Pods),
            3 if self.cores == 0 || !self.cores.is_multiple_of(self.spines) => {
                Err(ClosError::Cores)
            }
            3 => Ok(()),
            t => Err(ClosError::Tiers(t)),
        }
    }

    /// Hosts per plane.
    pub fn hosts(&self) -> u32 {
        u32::from(self.leaves) * u32::from(self.hosts_per_leaf)
    }

    /// Leaves per pod (all leaves for two tiers).
    fn per_pod(&self) -> u16 {
        if self.tiers == 3 && self.pods > 0 {
            self.leaves / self.pods
        } else {
            self.leaves
        }
    }

    /// Core switches per group (three tiers).
    fn group(&self) -> u16 {
        self.cores / self.spines.max(1)
    }

    /// Checks the description and the pair; returns (source leaf, destination leaf).
    fn pair(&self, src: u32, dst: u32) -> Result<(u16, u16), ClosError> {
        self.check()?;
        for h in [src, dst] {
            if h >= self.hosts() {
                return Err(ClosError::NoSuchHost(h));
            }
        }
        if src == dst {
            return Err(ClosError::SameHost);
        }
        let hpl = u32::from(self.hosts_per_leaf);
        // Below hosts() = leaves * hosts_per_leaf: the quotients fit u16.
        Ok(((src / hpl) as u16, (dst / hpl) as u16))
    }

    /// The paths from `src` to `dst`, worked out once: [`PairPaths::count`] and
    /// [`PairPaths::path`] answer as [`Clos::path_count`] and [`Clos::path`] do, without
    /// checking the description and the pair again (a sender that routes every packet of a
    /// connection keeps one per connection).
    ///
    /// # Errors
    /// [`ClosError`]: a bad description, an unknown host, `src == dst`.
    pub fn paths(&self, src: u32, dst: u32) -> Result<PairPaths, ClosError> {
        let (ls, ld) = self.pair(src, dst)?;
        // check() bounds every index below MAX_PER_TIER: the uSIDs below exist.
        let host = local_usid((dst % u32::from(self.hosts_per_leaf)) as u16).unwrap_or(0);
        let per_pod = self.per_pod();
        let (ps, pd) = (ls / per_pod, ld / per_pod);
        let (via, count) = if ls == ld {
            (Via::Leaf, 1)
        } else if self.tiers == 2 || ps == pd {
            (Via::Spine, u32::from(self.spines))
        } else {
            (Via::Core, u32::from(self.spines) * u32::from(self.group()))
        };
        Ok(PairPaths {
            via,
            count,
            leaf_s: node_usid(TIER_LEAF, ls),
            leaf_d: node_usid(TIER_LEAF, ld),
            host,
            spine_s: ps * self.spines,
            spine_d: pd * self.spines,
            spines: self.spines,
            group: self.group(),
        })
    }

    /// Distinct paths from `src` to `dst`.
    ///
    /// # Errors
    /// [`ClosError`]: a bad description, an unknown host, `src == dst`.
    pub fn path_count(&self, src: u32, dst: u32) -> Result<u32, ClosError> {
        Ok(self.paths(src, dst)?.count())
    }

    /// Path `index` (modulo [`Clos::path_count`]) from `src` to `dst` (see the module docs).
    ///
    /// # Errors
    /// [`ClosError`]: a bad description, an unknown host, `src == dst`.
    pub fn path(&self, src: u32, dst: u32, index: u32) -> Result<Path, ClosError> {
        Ok(self.paths(src, dst)?.path(index))
    }

    /// EV `ev` of a QP from `src` to `dst`: its plane and carrier (see the module docs).
    ///
    /// # Errors
    /// [`ClosError`]: a bad description, an unknown host, `src == dst`.
    pub fn ev(&self, src: u32, dst: u32, ev: u16) -> Result<(u8, Ipv6Addr), ClosError> {
        let planes = u16::from(self.planes.max(1));
        let path = self.path(src, dst, u32::from(ev / planes))?;
        Ok(((ev % planes) as u8, path.carrier(self.block)))
    }

    /// Switches in tier `tier` of a plane (0 for a tier the fabric does not have).
    pub fn switches(&self, tier: u8) -> u32 {
        match tier {
            TIER_LEAF => u32::from(self.leaves),
            TIER_SPINE if self.tiers == 2 => u32::from(self.spines),
            TIER_SPINE if self.tiers == 3 => u32::from(self.pods) * u32::from(self.spines),
            TIER_CORE if self.tiers == 3 => u32::from(self.cores),
            _ => 0,
        }
    }

    /// Switch `at` forwards a packet whose uSIDs are `carrier` (the outer destination, or a
    /// simulator's route): consumes what the rules in the module docs say and returns the
    /// neighbour to send it to. The block is not checked (a fabric routes one block). Meant for
    /// a checked description ([`Clos::check`]); an unchecked one gives wrong answers, never a
    /// panic. A switch that forwards many packets keeps its [`Clos::switch_table`] instead.
    ///
    /// # Errors
    /// [`ClosError::NoSuchNode`] when `at` is not a switch of this fabric;
    /// [`ClosError::NoRoute`] with the active uSID when the switch has no route for it (the
    /// carrier is then left as it was after consuming the switch's own uSID).
    pub fn forward<C: Carrier + ?Sized>(
        &self,
        at: Node,
        carrier: &mut C,
    ) -> Result<Hop, ClosError> {
        self.switch_table(at)?.forward(carrier)
    }

    /// The static routing table of switch `at` (module docs, "How a switch forwards"), built
    /// once: [`SwitchTable::forward`] answers as [`Clos::forward`] at `at` does.
    ///
    /// # Errors
    /// [`ClosError::NoSuchNode`] when `at` is not a switch of this fabric.
    pub fn switch_table(&self, at: Node) -> Result<SwitchTable, ClosError> {
        let own = at.usid().ok_or(ClosError::NoSuchNode)?;
        if self.spines == 0 || u32::from(at.index) >= self.switches(at.tier) {
            return Err(ClosError::NoSuchNode);
        }
        let s = u32::from(self.spines.max(1));
        let per_pod = u32::from(self.per_pod().max(1));
        let group = u32::from(self.group().max(1));
        let x = u32::from(at.index);
        // Indices `lo..hi` (a neighbour's index divided by `width` is `q`), within `below`.
        let block = |q: u32, width: u32, below: u32| Reach::Range {
            lo: clamp16(q * width),
            hi: clamp16((q * width + width).min(below)),
        };
        let mut reach = [(Reach::None, Dir::Up); 4];
        match at.tier {
            TIER_LEAF => {
                reach[KIND_LOCAL] = (
                    block(0, u32::from(self.hosts_per_leaf), u32::MAX),
                    Dir::Host,
                );
                let pod = if self.tiers == 2 { 0 } else { x / per_pod };
                reach[KIND_SPINE] = (block(pod, s, u32::MAX), Dir::Up);
            }
            TIER_SPINE => {
                let leaves = u32::from(self.leaves);
                reach[KIND_LEAF] = if self.tiers == 2 {
                    (block(0, leaves, leaves), Dir::Down)
                } else {
                    (block(x / s, per_pod, leaves), Dir::Down)
                };
                if self.tiers == 3 {
                    reach[KIND_CORE] = (block(x % s, group, u32::from(self.cores)), Dir::Up);
                }
            }
            _ => {
                reach[KIND_SPINE] = (
                    Reach::Stride {
                        below: clamp16(self.switches(TIER_SPINE)),
                        modulus: clamp16(s),
                        rem: clamp16(x / group),
                    },
                    Dir::Down,
                );
            }
        }
        Ok(SwitchTable { own, reach })
    }
}

/// `v`, or `u16::MAX` when it does not fit (indices are below [`MAX_PER_TIER`]).
fn clamp16(v: u32) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

/// [`SwitchTable`]'s row of switch uSIDs of tier 1, 2 and 3 ([`KIND_LEAF`] + tier - 1).
const KIND_LEAF: usize = 0;
/// [`SwitchTable`]'s row of spine (aggregation) uSIDs.
const KIND_SPINE: usize = 1;
/// [`SwitchTable`]'s row of core uSIDs.
const KIND_CORE: usize = 2;
/// [`SwitchTable`]'s row of local (host) uSIDs.
const KIND_LOCAL: usize = 3;

/// Which indices of one kind of uSID a switch has a route for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Reach {
    /// None.
    None,
    /// `lo..hi`.
    Range { lo: u16, hi: u16 },
    /// Those below `below` that leave `rem` modulo `modulus` (at least 1).
    Stride { below: u16, modulus: u16, rem: u16 },
}

/// Where a routed uSID sends the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Dir {
    Up,
    Down,
    Host,
}

/// One switch's static routing table ([`Clos::switch_table`]): its own uSID and, per kind of
/// uSID (switches of each tier, local host uSIDs), the indices it holds as neighbours and the
/// direction they lie in. Forwarding is then a decode and a comparison or two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwitchTable {
    own: u16,
    reach: [(Reach, Dir); 4],
}

impl SwitchTable {
    /// [`Clos::forward`] at this table's switch.
    ///
    /// # Errors
    /// [`ClosError::NoRoute`] with the active uSID when the switch has no route for it (the
    /// carrier is then left as it was after consuming the switch's own uSID).
    #[inline]
    pub fn forward<C: Carrier + ?Sized>(&self, carrier: &mut C) -> Result<Hop, ClosError> {
        if carrier.active() == self.own {
            carrier.consume();
        }
        let u = carrier.active();
        let hop = self.neighbour(u).ok_or(ClosError::NoRoute(u))?;
        if let Hop::Host(_) = hop {
            carrier.consume();
        }
        Ok(hop)
    }

    /// The neighbour uSID `u` names, if the switch holds it ([`decode`]'s reading of `u`).
    #[inline]
    fn neighbour(&self, u: u16) -> Option<Hop> {
        let low = u & 0x0FFF;
        let kind = match u >> 12 {
            t @ 1..=3 => usize::from(t) - 1 + KIND_LEAF,
            0xF => KIND_LOCAL,
            _ => return None,
        };
        // (0 is no uSID: `wrapping_sub` makes it 0xFFFF, beyond every reach)
        let i = low.wrapping_sub(1);
        let (reach, dir) = self.reach[kind];
        let held = match reach {
            Reach::None => false,
            Reach::Range { lo, hi } => lo <= i && i < hi,
            Reach::Stride {
                below,
                modulus,
                rem,
            } => i < below && i % modulus == rem,
        };
        held.then_some(match dir {
            Dir::Up => Hop::Up(i),
            Dir::Down => Hop::Down(i),
            Dir::Host => Hop::Host(i),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_BLOCK;
    use super::*;

    /// The routing rules as the module docs state them, uSID by uSID: the model
    /// [`SwitchTable`] is held to.
    fn forward_plain<C: Carrier + ?Sized>(
        c: &Clos,
        at: Node,
        carrier: &mut C,
    ) -> Result<Hop, ClosError> {
        let own = at.usid().ok_or(ClosError::NoSuchNode)?;
        if c.spines == 0 || u32::from(at.index) >= c.switches(at.tier) {
            return Err(ClosError::NoSuchNode);
        }
        if carrier.active() == own {
            carrier.consume();
        }
        let u = carrier.active();
        let hop = neighbour_plain(c, at, u).ok_or(ClosError::NoRoute(u))?;
        if let Hop::Host(_) = hop {
            carrier.consume();
        }
        Ok(hop)
    }

    /// The static routing table of switch `at` (already checked): the neighbour uSID `u`
    /// names, if any.
    fn neighbour_plain(c: &Clos, at: Node, u: u16) -> Option<Hop> {
        let s = c.spines.max(1);
        let per_pod = c.per_pod().max(1);
        let group = c.group().max(1);
        match (at.tier, decode(u)?) {
            (TIER_LEAF, Sid::Local { port }) => {
                (port < c.hosts_per_leaf).then_some(Hop::Host(port))
            }
            (TIER_LEAF, Sid::Node(n)) if n.tier == TIER_SPINE => {
                let pod = if c.tiers == 2 { 0 } else { at.index / per_pod };
                (n.index / s == pod).then_some(Hop::Up(n.index))
            }
            (TIER_SPINE, Sid::Node(n)) if n.tier == TIER_LEAF && n.index < c.leaves => {
                let pod = if c.tiers == 2 { 0 } else { at.index / s };
                (c.tiers == 2 || n.index / per_pod == pod).then_some(Hop::Down(n.index))
            }
            (TIER_SPINE, Sid::Node(n)) if n.tier == TIER_CORE && c.tiers == 3 => {
                (n.index < c.cores && n.index / group == at.index % s).then_some(Hop::Up(n.index))
            }
            (TIER_CORE, Sid::Node(n)) if n.tier == TIER_SPINE => {
                (u32::from(n.index) < c.switches(TIER_SPINE) && n.index % s == at.index / group)
                    .then_some(Hop::Down(n.index))
            }
            _ => None,
        }
    }

    /// Walks a path through [`Clos::forward`]: the switches it crosses and the host it reaches.
    fn walk(c: &Clos, src: u32, path: &Path) -> Result<([Node; 6], usize, u32), ClosError> {
        let hpl = u32::from(c.hosts_per_leaf);
        let mut at = Node {
            tier: TIER_LEAF,
            index: (src / hpl) as u16,
        };
        let mut carrier = path.carrier(c.block);
        let mut seen = [at; 6];
        for n in 1..=6 {
            let next = match c.forward(at, &mut carrier)? {
                Hop::Host(port) => {
                    assert!(super::super::is_end_of_carrier(carrier));
                    return Ok((seen, n, u32::from(at.index) * hpl + u32::from(port)));
                }
                Hop::Up(i) => Node {
                    tier: at.tier + 1,
                    index: i,
                },
                Hop::Down(i) => Node {
                    tier: at.tier - 1,
                    index: i,
                },
            };
            if n < 6 {
                seen[n] = next;
            }
            at = next;
        }
        Err(ClosError::NoRoute(0))
    }

    /// A carrier of three uSIDs for the table tests.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Three([u16; 3], usize);

    impl Carrier for Three {
        fn active(&self) -> u16 {
            self.0.get(self.1).copied().unwrap_or(0)
        }
        fn consume(&mut self) {
            self.1 += 1;
        }
    }

    /// A uSID near the plan's: a switch of some tier or a local uSID, small indices (and now
    /// and then anything at all).
    fn some_usid() -> impl proptest::strategy::Strategy<Value = u16> {
        use proptest::prelude::*;
        prop_oneof![
            (
                prop::sample::select(&[0u16, 1, 2, 3, 4, 0xE, 0xF][..]),
                0u16..40
            )
                .prop_map(|(t, low)| t << 12 | low),
            any::<u16>(),
        ]
    }

    proptest::proptest! {
        /// A switch's table forwards as the rules do, uSID by uSID: the same hop or error,
        /// the carrier consumed alike.
        #[test]
        fn switch_tables_forward_as_the_rules(
            three in proptest::bool::ANY,
            per_pod in 1u16..6,
            pods in 1u16..4,
            spines in 1u16..5,
            group in 1u16..4,
            hpl in 1u16..5,
            tier in 0u8..=4,
            index in 0u16..40,
            own_first in proptest::bool::ANY,
            usids in proptest::array::uniform3(some_usid()),
        ) {
            let c = if three {
                Clos {
                    planes: 1,
                    tiers: 3,
                    leaves: per_pod * pods,
                    spines,
                    pods,
                    cores: spines * group,
                    hosts_per_leaf: hpl,
                    block: DEFAULT_BLOCK,
                }
            } else {
                Clos::two_tier(1, per_pod * pods, spines, hpl, DEFAULT_BLOCK)
            };
            proptest::prop_assume!(c.check().is_ok());
            let at = Node { tier, index };
            let mut u = usids;
            if own_first {
                u[0] = at.usid().unwrap_or(0);
            }
            let (mut a, mut b) = (Three(u, 0), Three(u, 0));
            let table = c.switch_table(at);
            let plain = forward_plain(&c, at, &mut b);
            match table {
                Ok(t) => proptest::prop_assert_eq!(t.forward(&mut a), plain),
                Err(e) => proptest::prop_assert_eq!(Err(e), plain),
            }
            if table.is_ok() {
                proptest::prop_assert_eq!(a, b);
            }
        }
    }

    fn every_path_arrives(c: Clos) {
        for src in 0..c.hosts() {
            for dst in 0..c.hosts() {
                if src == dst {
                    continue;
                }
                let n = c.path_count(src, dst).unwrap();
                let mut seen = heapless::Vec::<([Node; 6], usize), 64>::new();
                for i in 0..n {
                    let p = c.path(src, dst, i).unwrap();
                    assert_eq!(p, c.path(src, dst, i + n).unwrap(), "indices wrap");
                    let (nodes, len, host) = walk(&c, src, &p).unwrap();
                    assert_eq!(host, dst, "{c:?} {src}->{dst} path {i}");
                    assert!(!seen.contains(&(nodes, len)), "path {i} repeats");
                    seen.push((nodes, len)).unwrap();
                }
            }
        }
    }

    #[test]
    fn every_path_of_small_fabrics_arrives_and_is_distinct() {
        every_path_arrives(Clos::two_tier(2, 4, 3, 2, DEFAULT_BLOCK));
        every_path_arrives(Clos::fat_tree(1, 4, DEFAULT_BLOCK));
        // Cores in groups of two per aggregation index.
        every_path_arrives(Clos {
            tiers: 3,
            pods: 3,
            cores: 4,
            ..Clos::two_tier(1, 6, 2, 2, DEFAULT_BLOCK)
        });
    }

    #[test]
    fn numbering_and_decoding() {
        let leaf = Node { tier: 1, index: 0 };
        assert_eq!(leaf.usid(), Some(0x1001));
        assert_eq!(
            Node {
                tier: 3,
                index: 0xFFE
            }
            .usid(),
            Some(0x3FFF)
        );
        assert_eq!(
            Node {
                tier: 3,
                index: 0xFFF
            }
            .usid(),
            None
        );
        assert_eq!(Node { tier: 4, index: 0 }.usid(), None);
        assert_eq!(local_usid(4), Some(0xF005));
        for u in [0x1001u16, 0x2abc, 0x3FFF, 0xF001, 0xFFFF] {
            let back = match decode(u).unwrap() {
                Sid::Node(n) => n.usid(),
                Sid::Local { port } => local_usid(port),
            };
            assert_eq!(back, Some(u));
        }
        for u in [0u16, 0x1000, 0x0005, 0x4001, 0xE001] {
            assert_eq!(decode(u), None, "{u:#x}");
        }
    }

    #[test]
    fn switches_drop_what_they_cannot_route() {
        let c = Clos::fat_tree(1, 4, DEFAULT_BLOCK);
        let mut x = carrier(DEFAULT_BLOCK, &[0x1001, 0x2003]).unwrap();
        // Leaf 0 (pod 0) has no uplink to aggregation 2 (pod 1).
        assert_eq!(
            c.forward(Node { tier: 1, index: 0 }, &mut x),
            Err(ClosError::NoRoute(0x2003))
        );
        // The carrier ends at a switch.
        let mut x = carrier(DEFAULT_BLOCK, &[0x1001]).unwrap();
        assert_eq!(
            c.forward(Node { tier: 1, index: 0 }, &mut x),
            Err(ClosError::NoRoute(0))
        );
        // A core only reaches its own aggregation index; a local uSID only at a leaf.
        let mut x = carrier(DEFAULT_BLOCK, &[0x2002]).unwrap();
        assert_eq!(
            c.forward(Node { tier: 3, index: 0 }, &mut x),
            Err(ClosError::NoRoute(0x2002))
        );
        let mut x = carrier(DEFAULT_BLOCK, &[0xF001]).unwrap();
        assert!(c.forward(Node { tier: 2, index: 0 }, &mut x).is_err());
        assert_eq!(
            c.forward(Node { tier: 1, index: 8 }, &mut x),
            Err(ClosError::NoSuchNode)
        );
    }

    #[test]
    fn bad_descriptions_are_errors() {
        let c = Clos::two_tier(4, 16, 32, 8, DEFAULT_BLOCK);
        assert_eq!(c.path(0, 0, 0), Err(ClosError::SameHost));
        assert_eq!(c.path(0, 999, 0), Err(ClosError::NoSuchHost(999)));
        assert_eq!(Clos { tiers: 4, ..c }.check(), Err(ClosError::Tiers(4)));
        assert_eq!(Clos { planes: 0, ..c }.check(), Err(ClosError::Empty));
        assert_eq!(Clos { leaves: 4096, ..c }.check(), Err(ClosError::TooLarge));
        let c3 = Clos {
            tiers: 3,
            pods: 3,
            ..c
        };
        assert_eq!(c3.check(), Err(ClosError::Pods));
        assert_eq!(
            Clos {
                pods: 4,
                cores: 20,
                ..c3
            }
            .check(),
            Err(ClosError::Cores)
        );
        assert_eq!(Clos::fat_tree(1, 90, 0).check(), Ok(()));
        assert_eq!(Clos::fat_tree(1, 92, 0).check(), Err(ClosError::TooLarge));
    }
}
