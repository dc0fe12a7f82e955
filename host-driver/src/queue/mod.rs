//! Work and completion rings in DMA memory.
//!
//! - Rings have a power-of-two number of entries; indices are free-running `u32` counters and
//!   the slot is `index & (entries - 1)`.
//! - Send (64-byte [`SendWqe`]) and receive (32-byte [`RecvWqe`]) rings are produced by the host;
//!   the doorbell carries the new producer index. Posting writes descriptors and rings the
//!   doorbell once per batch ([`SendRing::flush`]).
//! - Completion rings (32-byte [`Cqe`]) are produced by the device with an owner (phase) bit
//!   that flips every pass ([`expected_owner`]); the host consumes entries whose owner bit
//!   matches the pass and reports its consumer index through the CQ doorbell.
//! - A ring's free space is tracked through a [`QpTrack`] shared between the QP (producer) and
//!   the CQs that complete its requests (tail).
//!
//! Nothing here allocates after construction: posting and polling are heap-free.

use std::sync::atomic::{fence, AtomicU32, Ordering};

use mrc_abi::device::cqe::{expected_owner, Cqe};
use mrc_abi::device::doorbell::{
    CqDoorbell, CQ_DOORBELL_OFFSET, RQ_PRODUCER_OFFSET, SQ_PRODUCER_OFFSET,
};
use mrc_abi::device::wqe::{RecvWqe, SendWqe};
use zerocopy::{FromBytes, IntoBytes};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::sys::DmaRegion;

/// Bytes of a send WQE.
pub const SEND_WQE_BYTES: u64 = 64;
/// Bytes of a receive WQE.
pub const RECV_WQE_BYTES: u64 = 32;
/// Bytes of a CQE.
pub const CQE_BYTES: u64 = 32;

/// Producer and tail counters of one QP's two rings, shared with its CQs.
#[derive(Debug, Default)]
pub struct QpTrack {
    /// QP number.
    pub qpn: u32,
    /// Send WQEs posted (free-running).
    pub sq_producer: AtomicU32,
    /// Send WQEs completed (free-running).
    pub sq_tail: AtomicU32,
    /// Receive WQEs posted.
    pub rq_producer: AtomicU32,
    /// Receive WQEs consumed.
    pub rq_tail: AtomicU32,
}

/// The free-running index whose low 16 bits are `wqe_index`, at most `producer`: the tail after
/// the WQE at `wqe_index` completed is that index plus one. Rings hold at most 2^16 entries, so
/// the answer is unique.
pub fn tail_after(producer: u32, wqe_index: u16) -> u32 {
    let back = (producer as u16).wrapping_sub(wqe_index.wrapping_add(1));
    producer.wrapping_sub(u32::from(back))
}

impl QpTrack {
    /// A tracker for QP `qpn`.
    pub fn new(qpn: u32) -> QpTrack {
        QpTrack {
            qpn,
            ..QpTrack::default()
        }
    }
    /// A send completion for the WQE at ring index `wqe_index` (low 16 bits) retires it and
    /// every earlier (unsignaled) one.
    pub fn on_send_completion(&self, wqe_index: u16) {
        let p = self.sq_producer.load(Ordering::Acquire);
        self.sq_tail
            .store(tail_after(p, wqe_index), Ordering::Release);
    }
    /// A receive completion retires the receive WQE at `wqe_index`.
    pub fn on_recv_completion(&self, wqe_index: u16) {
        let p = self.rq_producer.load(Ordering::Acquire);
        self.rq_tail
            .store(tail_after(p, wqe_index), Ordering::Release);
    }
}

/// A host-produced ring of fixed-size entries with a doorbell.
#[derive(Debug)]
struct WorkRing {
    mem: DmaRegion,
    log2: u8,
    entry: u64,
    producer: u32,
    rung: u32,
    doorbell: u64,
}

impl WorkRing {
    fn new(dev: &Device, log2: u8, entry: u64, doorbell: u64) -> Result<WorkRing> {
        Ok(WorkRing {
            mem: dev.alloc_dma((entry as usize) << log2)?,
            log2,
            entry,
            producer: 0,
            rung: 0,
            doorbell,
        })
    }
    fn depth(&self) -> u32 {
        1 << self.log2
    }
    fn free(&self, tail: u32) -> u32 {
        self.depth() - self.producer.wrapping_sub(tail).min(self.depth())
    }
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let slot = u64::from(self.producer & (self.depth() - 1));
        self.mem.write_slice(slot * self.entry, bytes)?;
        self.producer = self.producer.wrapping_add(1);
        Ok(())
    }
    fn flush(&mut self, dev: &Device) -> Result<()> {
        if self.rung == self.producer {
            return Ok(());
        }
        // Release: every descriptor written above must be visible to the device before the
        // doorbell tells it they exist; otherwise it could DMA a stale or half-written WQE.
        fence(Ordering::Release);
        dev.ring_doorbell(self.doorbell, self.producer)?;
        self.rung = self.producer;
        Ok(())
    }
}

/// A send ring.
#[derive(Debug)]
pub struct SendRing(WorkRing);

impl SendRing {
    /// Moves the doorbell to page `page` (once the QPN is known).
    ///
    /// # Errors
    /// No such page.
    pub fn set_page(&mut self, dev: &Device, page: u32) -> Result<()> {
        self.0.doorbell = dev.doorbell_page(page)? + SQ_PRODUCER_OFFSET as u64;
        Ok(())
    }
    /// A ring of `2^log2` send WQEs whose doorbell is in page `page`.
    ///
    /// # Errors
    /// DMA allocation failed or no such page.
    pub fn new(dev: &Device, log2: u8, page: u32) -> Result<SendRing> {
        let db = dev.doorbell_page(page)? + SQ_PRODUCER_OFFSET as u64;
        WorkRing::new(dev, log2, SEND_WQE_BYTES, db).map(SendRing)
    }
    /// Ring IOVA.
    pub fn iova(&self) -> u64 {
        self.0.mem.iova().0
    }
    /// Entries.
    pub fn depth(&self) -> u32 {
        self.0.depth()
    }
    /// Posted, not yet doorbelled or completed WQEs leave this many free slots.
    pub fn free(&self, tail: u32) -> u32 {
        self.0.free(tail)
    }
    /// Producer index (WQEs written).
    pub fn producer(&self) -> u32 {
        self.0.producer
    }
    /// Writes one WQE (no doorbell). The caller checked [`SendRing::free`].
    ///
    /// # Errors
    /// DMA access failed.
    pub fn push(&mut self, wqe: &SendWqe) -> Result<()> {
        self.0.write(wqe.as_bytes())
    }
    /// Rings the doorbell once for everything pushed since the last flush.
    ///
    /// # Errors
    /// [`Error::DeviceGone`].
    pub fn flush(&mut self, dev: &Device) -> Result<()> {
        self.0.flush(dev)
    }
}

/// A receive ring.
#[derive(Debug)]
pub struct RecvRing(WorkRing);

impl RecvRing {
    /// Moves the doorbell to page `page` (once the QPN is known).
    ///
    /// # Errors
    /// No such page.
    pub fn set_page(&mut self, dev: &Device, page: u32) -> Result<()> {
        self.0.doorbell = dev.doorbell_page(page)? + RQ_PRODUCER_OFFSET as u64;
        Ok(())
    }
    /// A ring of `2^log2` receive WQEs whose doorbell is in page `page`.
    ///
    /// # Errors
    /// DMA allocation failed or no such page.
    pub fn new(dev: &Device, log2: u8, page: u32) -> Result<RecvRing> {
        let db = dev.doorbell_page(page)? + RQ_PRODUCER_OFFSET as u64;
        WorkRing::new(dev, log2, RECV_WQE_BYTES, db).map(RecvRing)
    }
    /// Ring IOVA.
    pub fn iova(&self) -> u64 {
        self.0.mem.iova().0
    }
    /// Entries.
    pub fn depth(&self) -> u32 {
        self.0.depth()
    }
    /// Free slots given the consumed count `tail`.
    pub fn free(&self, tail: u32) -> u32 {
        self.0.free(tail)
    }
    /// Producer index.
    pub fn producer(&self) -> u32 {
        self.0.producer
    }
    /// Writes one receive WQE (no doorbell).
    ///
    /// # Errors
    /// DMA access failed.
    pub fn push(&mut self, wqe: &RecvWqe) -> Result<()> {
        self.0.write(wqe.as_bytes())
    }
    /// Rings the doorbell once for the batch.
    ///
    /// # Errors
    /// [`Error::DeviceGone`].
    pub fn flush(&mut self, dev: &Device) -> Result<()> {
        self.0.flush(dev)
    }
}

/// A completion ring.
#[derive(Debug)]
pub struct CqRing {
    mem: DmaRegion,
    log2: u8,
    consumer: u32,
    reported: u32,
    doorbell: u64,
}

impl CqRing {
    /// A ring of `2^log2` CQEs whose doorbell is in page `page`.
    ///
    /// # Errors
    /// DMA allocation failed or no such page.
    pub fn new(dev: &Device, log2: u8, page: u32) -> Result<CqRing> {
        let db = dev.doorbell_page(page)? + CQ_DOORBELL_OFFSET as u64;
        Ok(CqRing {
            mem: dev.alloc_dma((CQE_BYTES as usize) << log2)?,
            log2,
            consumer: 0,
            reported: 0,
            doorbell: db,
        })
    }
    /// Moves the doorbell to another page (once the CQN is known).
    ///
    /// # Errors
    /// No such page.
    pub fn set_page(&mut self, dev: &Device, page: u32) -> Result<()> {
        self.doorbell = dev.doorbell_page(page)? + CQ_DOORBELL_OFFSET as u64;
        Ok(())
    }
    /// Ring IOVA.
    pub fn iova(&self) -> u64 {
        self.mem.iova().0
    }
    /// Entries.
    pub fn depth(&self) -> u32 {
        1 << self.log2
    }
    /// Consumer index.
    pub fn consumer(&self) -> u32 {
        self.consumer
    }

    /// The next CQE if the device has written it (owner bit matches this pass).
    ///
    /// # Errors
    /// DMA access failed.
    #[inline]
    pub fn next_cqe(&mut self) -> Result<Option<Cqe>> {
        let slot = u64::from(self.consumer & (self.depth() - 1));
        let flags = self.mem.read_u8(slot * CQE_BYTES + 22)?;
        if (flags & 1 != 0) != expected_owner(self.consumer, self.log2) {
            return Ok(None);
        }
        // Acquire: the rest of the entry is read only after its owner bit was seen set.
        fence(Ordering::Acquire);
        let mut buf = [0u8; CQE_BYTES as usize];
        self.mem.read_slice(slot * CQE_BYTES, &mut buf)?;
        self.consumer = self.consumer.wrapping_add(1);
        Cqe::read_from_bytes(&buf)
            .map(Some)
            .map_err(|_| Error::InvalidAttribute {
                object: "CQ".into(),
                field: "cqe",
                value: 0,
                rule: "32 bytes",
            })
    }

    /// Tells the device how far the host consumed (once per poll batch), optionally arming
    /// the CQ for the next (solicited) completion.
    ///
    /// # Errors
    /// [`Error::DeviceGone`].
    pub fn update(&mut self, dev: &Device, arm: Option<bool>) -> Result<()> {
        if arm.is_none() && self.reported == self.consumer {
            return Ok(());
        }
        let v = CqDoorbell {
            arm: arm.is_some(),
            solicited_only: arm == Some(true),
            consumer: self.consumer & mrc_abi::device::doorbell::CQ_CONSUMER_MASK,
        }
        .encode();
        // Release: orders our reads of the consumed entries before the device may reuse them.
        fence(Ordering::Release);
        dev.ring_doorbell(self.doorbell, v)?;
        self.reported = self.consumer;
        Ok(())
    }
}
