//! Workloads: what the hosts' applications ask the NICs to move.
//!
//! A [`Workload`] is a description (it is what a scenario file's `[workload]` table says, via
//! serde with `kind` as the tag). [`Workload::flows`] expands it into [`Flow`]s, the records
//! every NIC model consumes; [`Background`] is an optional second flow set that runs alongside
//! (its flows are excluded from the main completion and FCT figures).
//!
//! Contract for every kind: the description alone, with the host count and the seed, fixes every
//! flow (source, destination, bytes, start, dependency), so the same scenario gives the same run.
//! [`Workload::validate`] refuses a description that cannot expand (a zero size, too many
//! senders, a host that does not exist...) with a [`WorkloadError`] naming the field.
//!
//! Kinds:
//! - `permutation`: every host writes `bytes_per_host` to one partner (a random permutation
//!   without fixed points), all at t = 0.
//! - `all-to-all`: every host writes `bytes_per_pair` to every other host, all at t = 0 (one
//!   connection per pair; the NIC interleaves them).
//! - `ring-all-reduce`: ranks on a seeded ring order of the hosts; the buffer of `bytes` per rank
//!   is cut into one chunk per rank; reduce-scatter then all-gather, `2 (N - 1)` steps, each
//!   sending one chunk to the next rank. Each chunk is cut into `slices` flows (the pipeline):
//!   slice `j` of step `k` at rank `r` is released once slice `j` of step `k - 1` at rank `r - 1`
//!   has completed. The collective completes with its last flow; see [`CollectiveResult`].
//! - `incast`: `senders` hosts (seeded choice, never the receiver) each write `bytes_per_sender`
//!   to host `receiver`, all at t = 0.

use serde::{Deserialize, Serialize};

use crate::core::rng::Rng;
use crate::core::time::{Duration, Time, PS_PER_S};

/// What the hosts move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Workload {
    /// Every host writes `bytes_per_host` to one partner (a random permutation without fixed
    /// points), in messages of `msg_bytes`, all starting at t = 0.
    Permutation {
        /// Bytes each host writes.
        bytes_per_host: u64,
        /// Bytes per message (work request).
        msg_bytes: u32,
    },
    /// Every host writes `bytes_per_pair` to every other host, all starting at t = 0.
    AllToAll {
        /// Bytes each host writes to each other host.
        bytes_per_pair: u64,
        /// Bytes per message.
        msg_bytes: u32,
    },
    /// Ring all-reduce of a `bytes` buffer per rank over every host (see the module docs).
    RingAllReduce {
        /// Buffer bytes per rank (cut into one chunk per rank, each chunk into `slices`).
        bytes: u64,
        /// Flows per chunk (pipeline depth), >= 1.
        slices: u32,
        /// Bytes per message.
        msg_bytes: u32,
    },
    /// `senders` hosts each write `bytes_per_sender` to host `receiver`, all at t = 0.
    Incast {
        /// Hosts sending (1 ..= hosts - 1).
        senders: u32,
        /// The receiving host.
        receiver: u32,
        /// Bytes each sender writes.
        bytes_per_sender: u64,
        /// Bytes per message.
        msg_bytes: u32,
    },
}

/// A workload description that cannot expand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadError {
    /// The workload kind (or `background`).
    pub kind: &'static str,
    /// The field at fault.
    pub field: &'static str,
    /// Why.
    pub why: &'static str,
}

impl core::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "workload `{}`: `{}` {}", self.kind, self.field, self.why)
    }
}

impl std::error::Error for WorkloadError {}

/// Messages larger than this are refused (the engine's RETH length and work requests are
/// 32-bit; keep a message well inside one region).
pub const MAX_MSG_BYTES: u32 = 1 << 30;
/// Flows one expansion may produce (a guard against a description that would exhaust memory).
pub const MAX_FLOWS: usize = 4_000_000;

fn err(kind: &'static str, field: &'static str, why: &'static str) -> WorkloadError {
    WorkloadError { kind, field, why }
}

fn check_msg(kind: &'static str, msg_bytes: u32) -> Result<(), WorkloadError> {
    if msg_bytes == 0 {
        return Err(err(kind, "msg_bytes", "must be > 0"));
    }
    if msg_bytes > MAX_MSG_BYTES {
        return Err(err(kind, "msg_bytes", "must be <= 1 GiB"));
    }
    Ok(())
}

impl Workload {
    /// The report name of the kind.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Permutation { .. } => "permutation",
            Workload::AllToAll { .. } => "all-to-all",
            Workload::RingAllReduce { .. } => "ring-all-reduce",
            Workload::Incast { .. } => "incast",
        }
    }

    /// A one-line description for humans.
    pub fn describe(&self) -> String {
        let kib = |b: u64| format!("{} KiB", b >> 10);
        match *self {
            Workload::Permutation {
                bytes_per_host,
                msg_bytes,
            } => format!(
                "permutation: every host writes {} to one partner in {} messages",
                kib(bytes_per_host),
                kib(u64::from(msg_bytes))
            ),
            Workload::AllToAll {
                bytes_per_pair,
                msg_bytes,
            } => format!(
                "all-to-all: every host writes {} to every other host in {} messages",
                kib(bytes_per_pair),
                kib(u64::from(msg_bytes))
            ),
            Workload::RingAllReduce {
                bytes,
                slices,
                msg_bytes,
            } => format!(
                "ring all-reduce of {} per rank, {} slices per chunk, {} messages",
                kib(bytes),
                slices,
                kib(u64::from(msg_bytes))
            ),
            Workload::Incast {
                senders,
                receiver,
                bytes_per_sender,
                msg_bytes,
            } => format!(
                "incast: {senders} hosts each write {} to host {receiver} in {} messages",
                kib(bytes_per_sender),
                kib(u64::from(msg_bytes))
            ),
        }
    }

    /// Checks the description against `hosts`.
    ///
    /// # Errors
    /// [`WorkloadError`] naming the first bad field.
    pub fn validate(&self, hosts: u32) -> Result<(), WorkloadError> {
        let kind = self.name();
        if hosts < 2 {
            return Err(err(kind, "hosts", "a workload needs at least 2 hosts"));
        }
        match *self {
            Workload::Permutation {
                bytes_per_host,
                msg_bytes,
            } => {
                if bytes_per_host == 0 {
                    return Err(err(kind, "bytes_per_host", "must be > 0"));
                }
                check_msg(kind, msg_bytes)
            }
            Workload::AllToAll {
                bytes_per_pair,
                msg_bytes,
            } => {
                if bytes_per_pair == 0 {
                    return Err(err(kind, "bytes_per_pair", "must be > 0"));
                }
                check_msg(kind, msg_bytes)
            }
            Workload::RingAllReduce {
                bytes,
                slices,
                msg_bytes,
            } => {
                if slices == 0 {
                    return Err(err(kind, "slices", "must be > 0"));
                }
                if bytes < u64::from(hosts) * u64::from(slices) {
                    return Err(err(
                        kind,
                        "bytes",
                        "must be at least one byte per rank and slice (hosts * slices)",
                    ));
                }
                let flows = u64::from(hosts) * 2 * u64::from(hosts - 1) * u64::from(slices);
                if flows > MAX_FLOWS as u64 {
                    return Err(err(kind, "slices", "too many flows (hosts^2 * 2 * slices)"));
                }
                check_msg(kind, msg_bytes)
            }
            Workload::Incast {
                senders,
                receiver,
                bytes_per_sender,
                msg_bytes,
            } => {
                if senders == 0 {
                    return Err(err(kind, "senders", "must be > 0"));
                }
                if senders >= hosts {
                    return Err(err(
                        kind,
                        "senders",
                        "must be < hosts (the receiver sends not)",
                    ));
                }
                if receiver >= hosts {
                    return Err(err(
                        kind,
                        "receiver",
                        "names a host the fabric does not have",
                    ));
                }
                if bytes_per_sender == 0 {
                    return Err(err(kind, "bytes_per_sender", "must be > 0"));
                }
                check_msg(kind, msg_bytes)
            }
        }
    }

    /// Bytes the busiest NIC must send or receive (the numerator of *ideal*).
    pub fn busiest_nic_bytes(&self, hosts: u32) -> u64 {
        match *self {
            Workload::Permutation { bytes_per_host, .. } => bytes_per_host,
            Workload::AllToAll { bytes_per_pair, .. } => {
                bytes_per_pair.saturating_mul(u64::from(hosts.saturating_sub(1)))
            }
            Workload::RingAllReduce { bytes, slices, .. } => {
                // Every rank sends 2 (N - 1) chunks; the largest rank chunk bounds it.
                let n = u64::from(hosts.max(1));
                let _ = slices;
                bytes.div_ceil(n).saturating_mul(2 * (n - 1))
            }
            Workload::Incast {
                senders,
                bytes_per_sender,
                ..
            } => bytes_per_sender.saturating_mul(u64::from(senders)),
        }
    }

    /// Payload bytes every flow of the expansion moves in total.
    pub fn total_bytes(&self, hosts: u32) -> u64 {
        match *self {
            Workload::Permutation { bytes_per_host, .. } => {
                bytes_per_host.saturating_mul(u64::from(hosts))
            }
            Workload::AllToAll { bytes_per_pair, .. } => bytes_per_pair
                .saturating_mul(u64::from(hosts))
                .saturating_mul(u64::from(hosts.saturating_sub(1))),
            Workload::RingAllReduce { bytes, .. } => {
                // Every step moves every chunk once (each rank sends one): 2 (N - 1) buffers.
                bytes.saturating_mul(2 * u64::from(hosts.saturating_sub(1)))
            }
            Workload::Incast {
                senders,
                bytes_per_sender,
                ..
            } => bytes_per_sender.saturating_mul(u64::from(senders)),
        }
    }

    /// The flows of the workload over `hosts` hosts, ids `0..n` in list order. Call
    /// [`Workload::validate`] first: an invalid description expands to no flows.
    pub fn flows(&self, hosts: u32, seed: u64) -> Vec<Flow> {
        if self.validate(hosts).is_err() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut push = |src: u32, dst: u32, bytes: u64, msg_bytes: u32, after: Option<u32>| {
            let id = out.len() as u32;
            out.push(Flow {
                id,
                src,
                dst,
                bytes,
                msg_bytes,
                start: Time::ZERO,
                after,
            });
            id
        };
        match *self {
            Workload::Permutation {
                bytes_per_host,
                msg_bytes,
            } => {
                for (src, dst) in permutation(hosts, seed).into_iter().enumerate() {
                    push(src as u32, dst, bytes_per_host, msg_bytes, None);
                }
            }
            Workload::AllToAll {
                bytes_per_pair,
                msg_bytes,
            } => {
                for src in 0..hosts {
                    for k in 1..hosts {
                        // Shifted order: every host starts toward a different peer.
                        push(src, (src + k) % hosts, bytes_per_pair, msg_bytes, None);
                    }
                }
            }
            Workload::RingAllReduce {
                bytes,
                slices,
                msg_bytes,
            } => ring_flows(hosts, seed, bytes, slices, msg_bytes, &mut push),
            Workload::Incast {
                senders,
                receiver,
                bytes_per_sender,
                msg_bytes,
            } => {
                let mut others: Vec<u32> = (0..hosts).filter(|h| *h != receiver).collect();
                shuffle(&mut others, seed ^ 0x696e_6361_7374);
                others.truncate(senders as usize);
                others.sort_unstable();
                for src in others {
                    push(src, receiver, bytes_per_sender, msg_bytes, None);
                }
            }
        }
        out
    }

    /// The ring order of a ring all-reduce (rank -> host), `None` for other kinds.
    pub fn ring_order(&self, hosts: u32, seed: u64) -> Option<Vec<u32>> {
        match self {
            Workload::RingAllReduce { .. } => Some(ring_order(hosts, seed)),
            _ => None,
        }
    }
}

fn shuffle(v: &mut [u32], seed: u64) {
    let mut rng = Rng::new(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The ring order (rank -> host) of a ring all-reduce: a seeded shuffle of the hosts, so ring
/// neighbours sit on different leaves as often as chance has it.
pub fn ring_order(hosts: u32, seed: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..hosts).collect();
    shuffle(&mut order, seed ^ 0x7269_6e67);
    order
}

fn ring_flows(
    hosts: u32,
    seed: u64,
    bytes: u64,
    slices: u32,
    msg_bytes: u32,
    push: &mut impl FnMut(u32, u32, u64, u32, Option<u32>) -> u32,
) {
    let n = hosts as usize;
    let order = ring_order(hosts, seed);
    let steps = 2 * (n - 1);
    let s = slices as usize;
    // Chunk c of the buffer: bytes split as evenly as possible.
    let chunk_bytes = |c: usize| {
        let base = bytes / hosts as u64;
        base + u64::from((c as u64) < bytes % hosts as u64)
    };
    let slice_bytes = |c: usize, j: usize| {
        let cb = chunk_bytes(c);
        cb / s as u64 + u64::from((j as u64) < cb % s as u64)
    };
    // id of (rank, step, slice) = ((step * n) + rank) * s + slice: steps in order, so every
    // dependency has a smaller id.
    for step in 0..steps {
        for rank in 0..n {
            // Reduce-scatter step k sends chunk (rank - k) mod n; all-gather step k sends chunk
            // (rank + 1 - k') mod n; the chunk index only sizes the flow.
            let k = step % (n - 1);
            let chunk = if step < n - 1 {
                (rank + n - k) % n
            } else {
                (rank + 1 + n - k) % n
            };
            for j in 0..s {
                let after = if step == 0 {
                    None
                } else {
                    let prev_rank = (rank + n - 1) % n;
                    Some((((step - 1) * n + prev_rank) * s + j) as u32)
                };
                push(
                    order[rank],
                    order[(rank + 1) % n],
                    slice_bytes(chunk, j).max(1),
                    msg_bytes,
                    after,
                );
            }
        }
    }
}

/// A random permutation without fixed points (every host sends to another host).
pub fn permutation(hosts: u32, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed ^ 0x7065_726d);
    loop {
        let mut p: Vec<u32> = (0..hosts).collect();
        for i in (1..p.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        if hosts < 2 || p.iter().enumerate().all(|(i, d)| i as u32 != *d) {
            return p;
        }
    }
}

/// Background load: every host writes messages of `msg_bytes` to uniformly random other hosts,
/// one message every `msg_bytes / (load_percent % of the NIC line rate)`, from t = 0 until
/// `until_us`. Each message is its own [`Flow`]. Background flows run alongside the workload and
/// are excluded from its completion and FCT figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Background {
    /// Offered load per host, percent of the NIC line rate (1..=100).
    pub load_percent: u32,
    /// Bytes per message (one flow each).
    pub msg_bytes: u32,
    /// No background message starts at or after this time (microseconds, > 0).
    pub until_us: u64,
}

impl Background {
    /// Checks the description against `hosts`.
    ///
    /// # Errors
    /// [`WorkloadError`] naming the bad field.
    pub fn validate(&self, hosts: u32) -> Result<(), WorkloadError> {
        let kind = "background";
        if hosts < 2 {
            return Err(err(kind, "hosts", "background needs at least 2 hosts"));
        }
        if self.load_percent == 0 || self.load_percent > 100 {
            return Err(err(kind, "load_percent", "must be in 1..=100"));
        }
        if self.until_us == 0 {
            return Err(err(kind, "until_us", "must be > 0"));
        }
        check_msg(kind, self.msg_bytes)?;
        Ok(())
    }

    /// Gap between two messages of one host at `nic_bps`.
    pub fn interval(&self, nic_bps: u64) -> Duration {
        let bits = u128::from(self.msg_bytes) * 8 * 100 * u128::from(PS_PER_S);
        let rate = u128::from(nic_bps.max(1)) * u128::from(self.load_percent.max(1));
        Duration::from_ps((bits / rate).max(1) as u64)
    }

    /// The background flows over `hosts` hosts at `nic_bps`, ids from `first_id` on. Each host's
    /// first message starts at a seeded offset inside the first interval (so hosts do not burst
    /// in step).
    ///
    /// # Errors
    /// [`WorkloadError`] when the description is invalid or expands to more than [`MAX_FLOWS`].
    pub fn flows(
        &self,
        hosts: u32,
        nic_bps: u64,
        seed: u64,
        first_id: u32,
    ) -> Result<Vec<Flow>, WorkloadError> {
        self.validate(hosts)?;
        let gap = self.interval(nic_bps);
        let until = Time::from_us(self.until_us);
        let per_host = (until.as_ps() / gap.as_ps().max(1)).saturating_add(1);
        if per_host.saturating_mul(u64::from(hosts)) > MAX_FLOWS as u64 {
            return Err(err(
                "background",
                "until_us",
                "too many background messages (lower until_us or load_percent)",
            ));
        }
        let mut rng = Rng::new(seed ^ 0x6267_6c6f_6164);
        let mut out = Vec::new();
        for src in 0..hosts {
            let mut t = Time::ZERO.saturating_add(Duration::from_ps(rng.below(gap.as_ps().max(1))));
            while t < until {
                let mut dst = rng.below(u64::from(hosts) - 1) as u32;
                if dst >= src {
                    dst += 1;
                }
                out.push(Flow {
                    id: first_id + out.len() as u32,
                    src,
                    dst,
                    bytes: u64::from(self.msg_bytes),
                    msg_bytes: self.msg_bytes,
                    start: t,
                    after: None,
                });
                t = t.saturating_add(gap);
            }
        }
        Ok(out)
    }
}

/// One flow of a workload: `bytes` from `src` to `dst` in messages of `msg_bytes`.
///
/// A flow is released at `start`, or, when `after` names another flow, once that flow has
/// completed (its last byte acknowledged to its sender) and `start` has passed. A NIC model
/// keeps the flows whose `src` is its host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// Index of the flow in the workload's flow list.
    pub id: u32,
    /// Sending host.
    pub src: u32,
    /// Receiving host.
    pub dst: u32,
    /// Bytes to move (> 0).
    pub bytes: u64,
    /// Bytes per message (> 0).
    pub msg_bytes: u32,
    /// Earliest release time.
    pub start: crate::core::time::Time,
    /// A flow that must complete first.
    pub after: Option<u32>,
}

/// What became of one flow in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowResult {
    /// The flow.
    pub flow: Flow,
    /// True for a background flow.
    pub background: bool,
    /// When it was released (None: never, e.g. its dependency failed or the run stopped).
    pub released: Option<Time>,
    /// When its last byte was acknowledged to its sender.
    pub done: Option<Time>,
    /// Bytes acknowledged.
    pub acked_bytes: u64,
    /// A message of it completed in error (or a flow it depends on failed).
    pub failed: bool,
}

impl FlowResult {
    /// Flow completion time: done - released.
    pub fn fct(&self) -> Option<Duration> {
        Some(self.done?.duration_since(self.released?))
    }
}

/// A collective's completion figures (ring all-reduce).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveResult {
    /// When the collective completed (its last flow), None if it did not.
    pub completion: Option<Time>,
    /// When the median rank finished (a rank finishes with the last flow it sends or receives).
    pub median_rank: Time,
    /// The slowest rank (its host).
    pub slowest_host: u32,
    /// When it finished.
    pub slowest_rank: Time,
    /// The straggler figure: slowest rank minus median rank.
    pub straggler_lag: Duration,
}

impl CollectiveResult {
    /// Figures from the per-flow results (main flows only) of a collective over `hosts`; None
    /// when a rank never finished or there are no flows.
    pub fn from_flows(hosts: u32, flows: &[FlowResult]) -> Option<CollectiveResult> {
        let mut rank_done = vec![Time::ZERO; hosts as usize];
        let mut all_done = true;
        for f in flows.iter().filter(|f| !f.background) {
            match f.done {
                Some(t) => {
                    for h in [f.flow.src, f.flow.dst] {
                        if let Some(r) = rank_done.get_mut(h as usize) {
                            *r = (*r).max(t);
                        }
                    }
                }
                None => all_done = false,
            }
        }
        if !all_done || rank_done.is_empty() {
            return None;
        }
        let mut sorted = rank_done.clone();
        sorted.sort_unstable();
        let median = sorted[(sorted.len() - 1) / 2];
        let (slowest_host, slowest) = rank_done
            .iter()
            .enumerate()
            .max_by_key(|(h, t)| (**t, core::cmp::Reverse(*h)))
            .map(|(h, t)| (h as u32, *t))?;
        Some(CollectiveResult {
            completion: Some(slowest),
            median_rank: median,
            slowest_host,
            slowest_rank: slowest,
            straggler_lag: slowest.duration_since(median),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_names_and_fields() {
        let w = Workload::RingAllReduce {
            bytes: 1 << 20,
            slices: 2,
            msg_bytes: 4096,
        };
        assert_eq!(w.name(), "ring-all-reduce");
        let w2 = Workload::AllToAll {
            bytes_per_pair: 8,
            msg_bytes: 4,
        };
        assert_eq!(w2.name(), "all-to-all");
    }

    #[test]
    fn validation_names_the_field() {
        let e = Workload::Incast {
            senders: 8,
            receiver: 0,
            bytes_per_sender: 1,
            msg_bytes: 1,
        }
        .validate(8)
        .unwrap_err();
        assert_eq!(e.field, "senders");
        let e = Workload::Incast {
            senders: 3,
            receiver: 9,
            bytes_per_sender: 1,
            msg_bytes: 1,
        }
        .validate(8)
        .unwrap_err();
        assert_eq!(e.field, "receiver");
        let e = Workload::AllToAll {
            bytes_per_pair: 0,
            msg_bytes: 1,
        }
        .validate(8)
        .unwrap_err();
        assert_eq!(e.field, "bytes_per_pair");
        assert!(e.to_string().contains("all-to-all"));
        let e = Workload::Permutation {
            bytes_per_host: 1,
            msg_bytes: 0,
        }
        .validate(8)
        .unwrap_err();
        assert_eq!(e.field, "msg_bytes");
        let e = Workload::RingAllReduce {
            bytes: 1 << 20,
            slices: 0,
            msg_bytes: 1,
        }
        .validate(8)
        .unwrap_err();
        assert_eq!(e.field, "slices");
        let b = Background {
            load_percent: 101,
            msg_bytes: 1,
            until_us: 1,
        };
        assert_eq!(b.validate(8).unwrap_err().field, "load_percent");
    }

    #[test]
    fn expansions_move_the_bytes_they_claim() {
        let hosts = 8;
        for w in [
            Workload::Permutation {
                bytes_per_host: 1000,
                msg_bytes: 300,
            },
            Workload::AllToAll {
                bytes_per_pair: 1000,
                msg_bytes: 300,
            },
            Workload::RingAllReduce {
                bytes: 100_003,
                slices: 3,
                msg_bytes: 300,
            },
            Workload::Incast {
                senders: 5,
                receiver: 2,
                bytes_per_sender: 1000,
                msg_bytes: 300,
            },
        ] {
            let flows = w.flows(hosts, 7);
            let total: u64 = flows.iter().map(|f| f.bytes).sum();
            assert_eq!(total, w.total_bytes(hosts), "{}", w.name());
            let mut sent = vec![0u64; hosts as usize];
            let mut recv = vec![0u64; hosts as usize];
            for (i, f) in flows.iter().enumerate() {
                assert_eq!(f.id as usize, i);
                assert_ne!(f.src, f.dst);
                assert!(f.bytes > 0);
                assert!(f.after.is_none_or(|a| a < f.id), "dependencies point back");
                sent[f.src as usize] += f.bytes;
                recv[f.dst as usize] += f.bytes;
            }
            let busiest = sent.iter().chain(recv.iter()).max().copied().unwrap();
            assert!(busiest <= w.busiest_nic_bytes(hosts), "{}", w.name());
            assert_eq!(flows, w.flows(hosts, 7), "deterministic");
        }
    }

    #[test]
    fn ring_dependencies_follow_the_ring() {
        let w = Workload::RingAllReduce {
            bytes: 8 * 2 * 10,
            slices: 2,
            msg_bytes: 4,
        };
        let flows = w.flows(8, 1);
        assert_eq!(flows.len(), 8 * 14 * 2);
        for f in &flows {
            if let Some(a) = f.after {
                // The flow it waits for delivers to this flow's sender, same slice.
                assert_eq!(flows[a as usize].dst, f.src);
            }
        }
    }

    #[test]
    fn incast_senders_exclude_the_receiver() {
        let w = Workload::Incast {
            senders: 7,
            receiver: 3,
            bytes_per_sender: 10,
            msg_bytes: 4,
        };
        let flows = w.flows(8, 1);
        assert_eq!(flows.len(), 7);
        assert!(flows.iter().all(|f| f.dst == 3 && f.src != 3));
    }

    #[test]
    fn background_offers_its_load() {
        let b = Background {
            load_percent: 10,
            msg_bytes: 10_000,
            until_us: 100,
        };
        // 10% of 800 Gb/s = 80 Gb/s: 10 kB every 1 us.
        assert_eq!(b.interval(800_000_000_000), Duration::from_us(1));
        let f = b.flows(4, 800_000_000_000, 3, 100).unwrap();
        assert_eq!(f.len(), 4 * 100);
        assert_eq!(f[0].id, 100);
        assert!(f
            .iter()
            .all(|x| x.src != x.dst && x.start < Time::from_us(100)));
    }
}
