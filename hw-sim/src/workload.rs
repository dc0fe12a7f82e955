//! Workloads: what the hosts' applications ask the NICs to move.
//!
//! A [`Workload`] is a description (it is what a scenario file's `[workload]` table says, via
//! serde with `kind` as the tag). The run turns it into flows for the NICs.
//!
//! Contract for every kind: the description alone, with the host count and the seed, fixes every
//! flow (source, destination, bytes, start), so the same scenario gives the same run.

use serde::{Deserialize, Serialize};

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
}

impl Workload {
    /// The report name of the kind.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Permutation { .. } => "permutation",
        }
    }

    /// Bytes the busiest NIC must send (the numerator of *ideal*).
    pub fn busiest_nic_bytes(&self, _hosts: u32) -> u64 {
        match *self {
            Workload::Permutation { bytes_per_host, .. } => bytes_per_host,
        }
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
