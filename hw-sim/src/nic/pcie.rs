//! Host interface timing: the doorbell, the WQE fetch and the payload DMA reads a packet needs
//! before it can leave.
//!
//! Model: a released flow's work requests reach the stage after the doorbell MMIO write and
//! the WQE fetch ([`PcieConfig::post_delay`]). A data packet the stage emits at `t` has its
//! payload read from host memory: the read engine moves bytes at [`PcieConfig::dma_bytes_per_s`]
//! one read after another, and each read completes [`PcieConfig::dma_read_ns`] after its bytes
//! were requested, so the packet is ready at
//! `max(t, read engine free) + len / bandwidth + latency`. Reads are pipelined (the NIC keeps
//! enough outstanding to cover the latency at line rate), so the latency lengthens each
//! packet's trip but not the throughput, which is capped by the bandwidth. Control packets
//! (ACK, NACK, probes) are built on the NIC and need no read.

use std::collections::VecDeque;

use crate::core::time::{Duration, Time, PS_PER_S};
use mrc_firmware::datapath::packet::Packet;

/// PCIe / DMA timing of a NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieConfig {
    /// Doorbell MMIO write, host to NIC (ns).
    pub doorbell_ns: u64,
    /// DMA read latency, request to completion (ns); also the WQE fetch after a doorbell.
    pub dma_read_ns: u64,
    /// DMA read bandwidth (bytes per second, > 0).
    pub dma_bytes_per_s: u64,
}

impl PcieConfig {
    /// PCIe Gen6 x16, what an 800G NIC needs: ~110 GB/s of reads after protocol overhead,
    /// 400 ns doorbell, 1 us read latency. The default.
    pub const GEN6_X16: PcieConfig = PcieConfig {
        doorbell_ns: 400,
        dma_read_ns: 1_000,
        dma_bytes_per_s: 110_000_000_000,
    };
    /// PCIe Gen5 x16: ~50 GB/s of reads (caps a NIC near 400 Gb/s).
    pub const GEN5_X16: PcieConfig = PcieConfig {
        doorbell_ns: 400,
        dma_read_ns: 1_000,
        dma_bytes_per_s: 50_000_000_000,
    };
    /// No host interface time at all (payload pulled instantly: the transport alone).
    pub const IDEAL: PcieConfig = PcieConfig {
        doorbell_ns: 0,
        dma_read_ns: 0,
        dma_bytes_per_s: u64::MAX,
    };

    /// Time from a host posting work requests to the stage seeing them.
    pub fn post_delay(&self) -> Duration {
        Duration::from_ns(self.doorbell_ns.saturating_add(self.dma_read_ns))
    }

    /// Time to move `bytes` at the read bandwidth.
    pub fn transfer(&self, bytes: u64) -> Duration {
        Duration::from_ps(
            (u128::from(bytes) * u128::from(PS_PER_S) / u128::from(self.dma_bytes_per_s.max(1)))
                as u64,
        )
    }

    /// What a full packet's payload adds to its trip on an idle NIC.
    pub fn packet_delay(&self, payload: u32) -> Duration {
        self.transfer(u64::from(payload))
            .saturating_add(Duration::from_ns(self.dma_read_ns))
    }

    /// True when packets need no read time at all.
    pub fn is_ideal(&self) -> bool {
        self.dma_read_ns == 0 && self.dma_bytes_per_s == u64::MAX
    }
}

impl Default for PcieConfig {
    fn default() -> Self {
        PcieConfig::GEN6_X16
    }
}

/// Packets waiting for their payload reads, in read order (their ready times never decrease).
#[derive(Default)]
pub(crate) struct DmaQueue {
    q: VecDeque<(Time, usize, Packet)>,
    /// When the read engine is free.
    free_at: Time,
    /// Payload bytes of the queued packets.
    pub bytes: u64,
    /// Payload bytes read so far.
    pub moved: u64,
    /// Time the read engine spent moving them.
    pub busy: Duration,
}

impl DmaQueue {
    /// Starts the read of `tx` (from shard `shard`) at `now`; returns when it is ready.
    pub fn push(&mut self, cfg: &PcieConfig, now: Time, shard: usize, tx: Packet) -> Time {
        let len = tx.payload_len;
        let start = self.free_at.max(now);
        let transfer = cfg.transfer(u64::from(len));
        self.free_at = start.saturating_add(transfer);
        self.busy = self.busy.saturating_add(transfer);
        self.moved += u64::from(len);
        let ready = self
            .free_at
            .saturating_add(Duration::from_ns(cfg.dma_read_ns))
            .max(self.q.back().map_or(Time::ZERO, |b| b.0));
        self.q.push_back((ready, shard, tx));
        self.bytes += u64::from(len);
        ready
    }

    /// The next packet ready at or before `now`.
    pub fn pop_ready(&mut self, now: Time) -> Option<(usize, Packet)> {
        if self.q.front().is_some_and(|f| f.0 <= now) {
            let (_, shard, tx) = self.q.pop_front()?;
            self.bytes = self.bytes.saturating_sub(u64::from(tx.payload_len));
            return Some((shard, tx));
        }
        None
    }

    /// When the head packet is ready.
    pub fn next_ready(&self) -> Option<Time> {
        self.q.front().map(|f| f.0)
    }
}
