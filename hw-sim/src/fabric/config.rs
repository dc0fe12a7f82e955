//! Fabric configuration: shape, rates, delays, queues, ECN, trimming, PFC and per-transport
//! policy. [`FabricConfig::validate`] names the first bad field.

use crate::core::time::Duration;

use super::packet::{TransportKind, DEFAULT_TRIM_BYTES};

/// The shape of one plane (every plane is a copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Two tiers: leaves (T0) with `radix / 2` host ports and `radix / 2` uplinks, one to each of
    /// `radix / 2` spines (T1); `ceil(hosts / (radix / 2))` leaves, at most `radix` (a spine has
    /// one port per leaf). Non-blocking.
    LeafSpine {
        /// Hosts (the last leaf may be partly filled).
        hosts: u32,
        /// Switch radix (even, >= 2).
        radix: u32,
    },
    /// Three tiers: a k-ary fat tree, `k` pods of `k/2` edge (T0) and `k/2` aggregation (T1)
    /// switches, `(k/2)^2` cores (T2), `k^3/4` hosts.
    FatTree {
        /// Switch radix (even, >= 2).
        k: u32,
    },
}

impl Shape {
    /// Hosts per plane: `hosts` for a leaf-spine, `k^3 / 4` for a fat tree (saturating).
    pub fn hosts(&self) -> u32 {
        match *self {
            Shape::LeafSpine { hosts, .. } => hosts,
            Shape::FatTree { k } => k.saturating_mul(k).saturating_mul(k) / 4,
        }
    }
}

/// RED-style ECN marking on an output queue: no mark below `kmin_bytes`, always at or above
/// `kmax_bytes`, linear probability in between (integer parts per million).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcnConfig {
    /// Queue bytes where marking starts.
    pub kmin_bytes: u64,
    /// Queue bytes where every ECN-capable packet is marked.
    pub kmax_bytes: u64,
}

/// Priority flow control, per switch ingress port: pause the upstream port when the bytes that
/// arrived through this port and still sit in the switch's queues reach `xoff_bytes`, resume
/// when they fall to `xon_bytes`. One priority: a pause stops the whole upstream port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcConfig {
    /// Pause threshold.
    pub xoff_bytes: u64,
    /// Resume threshold (< `xoff_bytes`).
    pub xon_bytes: u64,
}

/// What switches do for one transport kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassPolicy {
    /// Mark ECN on the last hop (the switch port toward the destination host).
    pub ecn_last_hop: bool,
    /// Trim instead of dropping when the queue is full (needs [`QueueConfig::trim_bytes`]).
    pub trim: bool,
}

impl ClassPolicy {
    /// MRC: no ECN at the last hop (the receiver sees the incast itself), trimmed when full.
    pub const MRC: ClassPolicy = ClassPolicy {
        ecn_last_hop: false,
        trim: true,
    };
    /// RoCE: ECN everywhere (DCQCN), never trimmed.
    pub const ROCE: ClassPolicy = ClassPolicy {
        ecn_last_hop: true,
        trim: false,
    };
}

/// Output queue of every switch port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Data queue limit (bytes); a packet that would exceed it is trimmed or dropped.
    pub limit_bytes: u64,
    /// Priority (header) queue limit (bytes).
    pub header_limit_bytes: u64,
    /// ECN marking, or `None` for no marking.
    pub ecn: Option<EcnConfig>,
    /// Trim to this many bytes (headers) when the data queue is full, for transports whose
    /// policy allows it; `None` disables trimming.
    pub trim_bytes: Option<u32>,
}

/// A whole multi-plane fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FabricConfig {
    /// Shape of each plane.
    pub shape: Shape,
    /// Planes (each host has one NIC port per plane).
    pub planes: u32,
    /// Host <-> T0 link rate (bits per second).
    pub host_link_bps: u64,
    /// T0 <-> T1 link rate.
    pub t1_link_bps: u64,
    /// T1 <-> T2 link rate (fat tree only).
    pub t2_link_bps: u64,
    /// Propagation delay of every link (one hop).
    pub propagation: Duration,
    /// Switching latency added at every switch (ingress to output queue).
    pub switching_latency: Duration,
    /// Switch output queues.
    pub queue: QueueConfig,
    /// Host NIC port output queue limit (bytes); the NIC should keep below it.
    pub host_queue_bytes: u64,
    /// PFC, or `None` (lossy).
    pub pfc: Option<PfcConfig>,
    /// Per-transport policy, indexed by [`TransportKind::index`].
    pub policy: [ClassPolicy; TransportKind::COUNT],
    /// Delay between a link changing state and ECMP routing in every switch following it.
    pub reconvergence: Duration,
    /// Random loss on every link, parts per million (per-link override:
    /// [`crate::fabric::Fabric::set_link_impairment`]).
    pub loss_ppm: u32,
    /// Random corruption on every link, parts per million.
    pub corrupt_ppm: u32,
    /// Seed for every random decision of the fabric.
    pub seed: u64,
}

impl FabricConfig {
    /// The htsim reference settings (ANCHORS.md) on `shape`: one plane, 100 Gb/s, 1 us per hop,
    /// no switching latency, 178,450 B queues, ECN from 37,350 B to 145,250 B (also on the last
    /// hop), trimming to 64 B, no PFC, 150 ms reconvergence.
    pub fn htsim_reference(shape: Shape) -> FabricConfig {
        FabricConfig {
            shape,
            planes: 1,
            host_link_bps: 100_000_000_000,
            t1_link_bps: 100_000_000_000,
            t2_link_bps: 100_000_000_000,
            propagation: Duration::from_us(1),
            switching_latency: Duration::ZERO,
            queue: QueueConfig {
                limit_bytes: 178_450,
                header_limit_bytes: 178_450,
                ecn: Some(EcnConfig {
                    kmin_bytes: 37_350,
                    kmax_bytes: 145_250,
                }),
                trim_bytes: Some(DEFAULT_TRIM_BYTES),
            },
            host_queue_bytes: 64 << 20,
            pfc: None,
            // htsim marks on the ToR downlink too.
            policy: [
                ClassPolicy {
                    ecn_last_hop: true,
                    ..ClassPolicy::MRC
                },
                ClassPolicy::ROCE,
            ],
            reconvergence: Duration::from_ms(150),
            loss_ppm: 0,
            corrupt_ppm: 0,
            seed: 1,
        }
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first field that is out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &'static str, why: &'static str| Err(ConfigError { field, why });
        match self.shape {
            Shape::LeafSpine { hosts, radix } => {
                if radix < 2 || radix % 2 != 0 || radix > 4096 {
                    return bad("shape.radix", "must be even, 2..=4096");
                }
                if hosts == 0 {
                    return bad("shape.hosts", "must be at least 1");
                }
                if hosts.div_ceil(radix / 2) > radix {
                    return bad("shape.hosts", "more leaves than a spine has ports");
                }
            }
            Shape::FatTree { k } => {
                if !(2..=256).contains(&k) || k % 2 != 0 {
                    return bad("shape.k", "must be even, 2..=256");
                }
            }
        }
        if self.planes == 0 || self.planes > 64 {
            return bad("planes", "must be 1..=64");
        }
        for (f, r) in [
            ("host_link_bps", self.host_link_bps),
            ("t1_link_bps", self.t1_link_bps),
            ("t2_link_bps", self.t2_link_bps),
        ] {
            if r == 0 {
                return bad(f, "must be > 0");
            }
        }
        let q = &self.queue;
        if q.limit_bytes == 0 {
            return bad("queue.limit_bytes", "must be > 0");
        }
        if let Some(e) = q.ecn {
            if e.kmin_bytes >= e.kmax_bytes {
                return bad("queue.ecn", "kmin_bytes must be below kmax_bytes");
            }
        }
        if q.trim_bytes == Some(0) {
            return bad("queue.trim_bytes", "must be > 0");
        }
        if let Some(p) = self.pfc {
            if p.xon_bytes >= p.xoff_bytes {
                return bad("pfc", "xon_bytes must be below xoff_bytes");
            }
        }
        if self.loss_ppm > 1_000_000 || self.corrupt_ppm > 1_000_000 {
            return bad("loss_ppm/corrupt_ppm", "must be <= 1,000,000");
        }
        Ok(())
    }
}

/// A configuration field out of range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The field.
    pub field: &'static str,
    /// Why.
    pub why: &'static str,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fabric config: {}: {}", self.field, self.why)
    }
}

impl std::error::Error for ConfigError {}
