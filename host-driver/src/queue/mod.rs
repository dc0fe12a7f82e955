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

use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicU32, Ordering};

use mrc_abi::device::cqe::{expected_owner, Cqe};
use mrc_abi::device::doorbell::{
    CqDoorbell, CQ_DOORBELL_OFFSET, RQ_PRODUCER_OFFSET, SQ_PRODUCER_OFFSET,
};
use mrc_abi::device::wqe::{RecvWqe, SendWqe};
use zerocopy::{FromZeros, Immutable, IntoBytes};

use crate::device::Device;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
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
        self.stage(0, bytes)?;
        self.commit(1);
        Ok(())
    }
    /// Writes entry `k` past the producer index without publishing it.
    #[inline]
    fn stage(&mut self, k: u32, bytes: &[u8]) -> Result<()> {
        let slot = u64::from(self.producer.wrapping_add(k) & (self.depth() - 1));
        self.mem.write_slice(slot * self.entry, bytes)?;
        Ok(())
    }
    /// Publishes `n` staged entries (the doorbell still waits for [`WorkRing::flush`]).
    #[inline]
    fn commit(&mut self, n: u32) {
        self.producer = self.producer.wrapping_add(n);
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

/// What distinguishes the send ring from the receive ring: entry type and size, and where
/// the producer doorbell sits in a QP's doorbell page.
pub trait RingKind {
    /// The descriptor.
    type Wqe: IntoBytes + Immutable;
    /// Bytes per entry.
    const ENTRY_BYTES: u64;
    /// Offset of the producer doorbell inside the doorbell page.
    const DOORBELL_OFFSET: u64;
}

/// Send rings: 64-byte [`SendWqe`]s, doorbell at [`SQ_PRODUCER_OFFSET`].
#[derive(Debug)]
pub enum SendKind {}
impl RingKind for SendKind {
    type Wqe = SendWqe;
    const ENTRY_BYTES: u64 = SEND_WQE_BYTES;
    const DOORBELL_OFFSET: u64 = SQ_PRODUCER_OFFSET as u64;
}

/// Receive rings: 32-byte [`RecvWqe`]s, doorbell at [`RQ_PRODUCER_OFFSET`].
#[derive(Debug)]
pub enum RecvKind {}
impl RingKind for RecvKind {
    type Wqe = RecvWqe;
    const ENTRY_BYTES: u64 = RECV_WQE_BYTES;
    const DOORBELL_OFFSET: u64 = RQ_PRODUCER_OFFSET as u64;
}

/// A host-produced work ring of one [`RingKind`].
#[derive(Debug)]
pub struct Ring<K: RingKind> {
    ring: WorkRing,
    kind: PhantomData<K>,
}

/// A send ring.
pub type SendRing = Ring<SendKind>;
/// A receive ring.
pub type RecvRing = Ring<RecvKind>;

impl<K: RingKind> Ring<K> {
    /// A ring of `2^log2` entries whose doorbell is in page `page`.
    ///
    /// # Errors
    /// DMA allocation failed or no such page.
    pub fn new(dev: &Device, log2: u8, page: u32) -> Result<Self> {
        let db = dev.doorbell_page(page)? + K::DOORBELL_OFFSET;
        Ok(Ring {
            ring: WorkRing::new(dev, log2, K::ENTRY_BYTES, db)?,
            kind: PhantomData,
        })
    }
    /// Moves the doorbell to page `page` (once the QPN is known).
    ///
    /// # Errors
    /// No such page.
    pub fn set_page(&mut self, dev: &Device, page: u32) -> Result<()> {
        self.ring.doorbell = dev.doorbell_page(page)? + K::DOORBELL_OFFSET;
        Ok(())
    }
    /// Ring IOVA.
    pub fn iova(&self) -> u64 {
        self.ring.mem.iova().0
    }
    /// Entries.
    pub fn depth(&self) -> u32 {
        self.ring.depth()
    }
    /// Free slots given the completed (consumed) count `tail`.
    pub fn free(&self, tail: u32) -> u32 {
        self.ring.free(tail)
    }
    /// Producer index (entries published).
    pub fn producer(&self) -> u32 {
        self.ring.producer
    }
    /// Writes and publishes one entry (no doorbell). The caller checked [`Ring::free`].
    ///
    /// # Errors
    /// DMA access failed.
    pub fn push(&mut self, wqe: &K::Wqe) -> Result<()> {
        self.ring.write(wqe.as_bytes())
    }
    /// Writes entry `k` past the producer index without publishing it (a batch is staged,
    /// then [`Ring::commit`]ted all at once). The caller checked that `k` is below
    /// [`Ring::free`].
    ///
    /// # Errors
    /// DMA access failed.
    #[inline]
    pub fn stage(&mut self, k: u32, wqe: &K::Wqe) -> Result<()> {
        self.ring.stage(k, wqe.as_bytes())
    }
    /// Publishes `n` staged entries.
    #[inline]
    pub fn commit(&mut self, n: u32) {
        self.ring.commit(n);
    }
    /// Rings the doorbell once for everything published since the last flush.
    ///
    /// # Errors
    /// [`Error::DeviceGone`].
    pub fn flush(&mut self, dev: &Device) -> Result<()> {
        self.ring.flush(dev)
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
        let at = u64::from(self.consumer & (self.depth() - 1)) * CQE_BYTES;
        // Word 2 (bytes 16..24: QPN, status, opcode, flags) holds the owner bit (byte 22): one
        // aligned 8-byte read sees the device's write of that word whole or not at all.
        let w2 = self.mem.read_u64(at + 16)?;
        if (w2 >> 48) & 1 != u64::from(expected_owner(self.consumer, self.log2)) {
            return Ok(None);
        }
        // Acquire: the rest of the entry is read only after its owner bit was seen set.
        fence(Ordering::Acquire);
        // The whole entry in one access (word 2 again: the device does not touch an entry
        // between writing it and seeing the consumer index pass it).
        let mut cqe = Cqe::new_zeroed();
        self.mem.read_slice(at, cqe.as_mut_bytes())?;
        self.consumer = self.consumer.wrapping_add(1);
        Ok(Some(cqe))
    }

    /// Whether the next entry is ready (its owner bit matches), without consuming it.
    ///
    /// # Errors
    /// The ring read failed.
    pub fn is_ready(&self) -> Result<bool> {
        let at = u64::from(self.consumer & (self.depth() - 1)) * CQE_BYTES;
        let w2 = self.mem.read_u64(at + 16)?;
        Ok((w2 >> 48) & 1 == u64::from(expected_owner(self.consumer, self.log2)))
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
