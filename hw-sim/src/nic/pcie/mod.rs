//! The NIC's host interface: one PCIe link, at TLP granularity.
//!
//! # The link ([`PcieConfig`])
//! Two directions, from the NIC's view "rx" (host -> NIC) and "tx" (NIC -> host), each a wire
//! that serialises TLPs at the link's rate: `generation` x `lanes` after the line encoding
//! (8b/10b for Gen1/2, 128b/130b for Gen3-5, and from Gen6 256-byte FLITs of which 236 bytes
//! carry TLPs, the rest DLLP bytes, CRC and FEC), less `dllp_ppm` for the ACK/NAK and
//! UpdateFC DLLPs and ordered sets of the non-FLIT generations. Each TLP adds its header to
//! its payload (4 DW for memory requests with 64-bit addresses, 3 DW for completions) and,
//! before FLIT mode, 8 bytes of framing token, sequence number and LCRC. A TLP reaches the
//! other end `latency_ns` after its last byte left.
//!
//! Flow control: each receiver advertises credits (posted, non-posted, completion; header
//! credits count TLPs, data credits 16-byte units; 0 = infinite, which an endpoint must
//! advertise for completions). A TLP takes its credits when it is sent and they come back
//! one latency after it arrived (the receiver drains it on arrival; its UpdateFC DLLP takes a
//! latency back). A sender out of credit waits.
//!
//! # The transactions
//! - **Doorbell**: the host writes the SQ producer index (one 4-byte posted MWr, host -> NIC)
//!   for each batch of work requests it posts.
//! - **WQE fetch**: on the doorbell, the NIC reads the batch's send WQEs (64 bytes each) from
//!   host memory; the stage sees the work requests when the last completion arrived.
//! - **Payload read**: each data packet's payload is a DMA read, cut into read requests of at
//!   most MRRS bytes (never across 4 KiB), each holding one of `read_tags` tags until its last
//!   completion; the host answers `completer_ns` after a request arrived with completions of
//!   at most MPS bytes ending on RCB boundaries. The packet may leave when its last
//!   completion arrived.
//! - **Placement**: each payload the stage places is posted MWr TLPs of at most MPS bytes to
//!   host memory.
//! - **CQEs and events**: each completion and EV event the engine writes for the host is one
//!   posted write of a 32-byte CQE or event record; the host sees the completion when it has
//!   arrived.
//!
//! Times are computed when a transaction starts ([`link`]); a packet waiting for its payload
//! costs one event for the queue head ([`DmaQueue`]), never one per TLP. Host memory is a
//! fixed latency with unlimited parallelism (its bandwidth and the IOMMU are not modelled);
//! MMIO reads and interrupts are not used (the host polls its completion queue).
//!
//! # Defaults
//! Gen6 x16 ([`PcieConfig::GEN6_X16`]): 64 GT/s x 16 in FLIT mode, ~118 GB/s of TLP bytes each
//! way. MPS 256 and RCB 64 are what server root ports commonly run; MRRS 512 is the PCIe
//! default; 512 tags are 10-bit tag territory (Gen4 and later) and cover the read round trip
//! at link rate. Latency 200 ns one way and 400 ns of host memory put an idle 64-byte read at
//! ~0.8 us, in the range pcie-bench (Neugebauer et al., SIGCOMM 2018) measured on servers.
//! The root port's credits (256 posted headers, 64 KiB of posted data, 256 non-posted
//! headers) cover its credit loop at link rate; a smaller pool stalls the NIC. Gen5
//! ([`PcieConfig::GEN5_X16`]) takes 1% for DLLPs: an ACK and an UpdateFC of 8 bytes each at
//! the spec's recommended interval for x16 with 256-byte MPS (168 symbol times) are ~0.6%, SKP
//! ordered sets the rest.

mod config;
mod link;
#[cfg(test)]
mod tests;

pub use config::{FcCredits, PcieConfig};
pub(crate) use link::PcieLink;

use std::collections::VecDeque;

use crate::core::time::Time;
use mrc_abi::device::cqe::Cqe;
use mrc_abi::device::event::EventRecord;
use mrc_abi::device::wqe::SendWqe;
use mrc_firmware::datapath::packet::{Packet, PacketBody, SendWr};

/// Bytes of one send WQE in host memory.
pub(crate) const WQE_BYTES: u32 = std::mem::size_of::<SendWqe>() as u32;
/// Bytes of one CQE.
pub(crate) const CQE_BYTES: u32 = std::mem::size_of::<Cqe>() as u32;
/// Bytes of one event record.
pub(crate) const EVENT_BYTES: u32 = std::mem::size_of::<EventRecord>() as u32;
/// Bytes of a doorbell write (one 32-bit store of the SQ producer index).
pub(crate) const DOORBELL_BYTES: u32 = 4;

/// Where a packet's payload sits in host memory (the local buffer mirrors the remote
/// layout, so alignment follows the packet's offset in its message).
pub(crate) fn payload_addr(p: &Packet) -> u64 {
    match p.body {
        PacketBody::Write { reth, .. } => reth.va,
        _ => 0,
    }
}

/// Packets waiting for their payload reads, in read order (their ready times never decrease).
#[derive(Default)]
pub(crate) struct DmaQueue {
    q: VecDeque<(Time, usize, Packet)>,
    /// Payload bytes of the queued packets.
    pub bytes: u64,
}

impl DmaQueue {
    /// Starts the read of `tx` (from shard `shard`) at `now` on `link`; returns when it is
    /// ready.
    pub fn push(&mut self, link: &mut PcieLink, now: Time, shard: usize, tx: Packet) -> Time {
        let len = tx.payload_len;
        let ready = link
            .read(now, payload_addr(&tx), len)
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

impl PcieConfig {
    /// What a full packet's payload read adds to its trip on an idle link.
    pub fn packet_delay(&self, payload: u32) -> crate::core::time::Duration {
        if self.ideal {
            return crate::core::time::Duration::ZERO;
        }
        PcieLink::idle_read(self, payload)
    }
}

/// The host's side of the send queues: work requests the host posted whose WQEs the NIC is
/// fetching (in doorbell order: one fetch engine), and when the host saw each QP's last
/// completion (it posts again from then).
#[derive(Default)]
pub(crate) struct HostQueues {
    /// (fetched at, QPN, work request).
    fetch: VecDeque<(Time, u32, SendWr)>,
    /// Per QPN: work requests being fetched.
    pending: Vec<u32>,
    /// Per QPN: when the host saw its last completion.
    seen: Vec<Time>,
    /// Per QPN: send WQEs written so far (the producer index).
    produced: Vec<u32>,
}

impl HostQueues {
    pub fn new(qps: usize) -> HostQueues {
        HostQueues {
            fetch: VecDeque::new(),
            pending: vec![0; qps],
            seen: vec![Time::ZERO; qps],
            produced: vec![0; qps],
        }
    }

    /// Work requests of `qpn` posted but not on the NIC yet.
    pub fn pending(&self, qpn: u32) -> u32 {
        self.pending.get(qpn as usize).copied().unwrap_or(0)
    }

    /// When the host can act on `qpn` at `now` (it saw the completions written so far).
    pub fn host_time(&self, qpn: u32, now: Time) -> Time {
        self.seen.get(qpn as usize).map_or(now, |s| now.max(*s))
    }

    /// The host writes `n` WQEs into the send queue ring of `qpn` (`slots` WQEs, one 4 KiB
    /// page per QP): the address of the first and how many fit before the ring wraps.
    pub fn ring_slot(&mut self, qpn: u32, n: u32, slots: u32) -> (u64, u32) {
        let Some(p) = self.produced.get_mut(qpn as usize) else {
            return (0, n);
        };
        let i = *p % slots.max(1);
        *p = p.wrapping_add(n);
        let base = u64::from(qpn) * 4096;
        (base + u64::from(i * WQE_BYTES), n.min(slots - i))
    }

    /// The host sees a completion of `qpn` at `at`.
    pub fn saw(&mut self, qpn: u32, at: Time) {
        if let Some(s) = self.seen.get_mut(qpn as usize) {
            *s = (*s).max(at);
        }
    }

    /// A batch of work requests of `qpn` whose WQEs arrive at `at`.
    pub fn push(&mut self, at: Time, qpn: u32, wrs: impl Iterator<Item = SendWr>) {
        let at = at.max(self.fetch.back().map_or(Time::ZERO, |b| b.0));
        for wr in wrs {
            self.fetch.push_back((at, qpn, wr));
            if let Some(p) = self.pending.get_mut(qpn as usize) {
                *p += 1;
            }
        }
    }

    /// The next work request fetched at or before `now`.
    pub fn pop_ready(&mut self, now: Time) -> Option<(u32, SendWr)> {
        if self.fetch.front().is_some_and(|f| f.0 <= now) {
            let (_, qpn, wr) = self.fetch.pop_front()?;
            if let Some(p) = self.pending.get_mut(qpn as usize) {
                *p = p.saturating_sub(1);
            }
            return Some((qpn, wr));
        }
        None
    }

    /// When the next fetch completes.
    pub fn next_ready(&self) -> Option<Time> {
        self.fetch.front().map(|f| f.0)
    }
}
