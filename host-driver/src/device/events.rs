//! The event queue: the device writes 32-byte [`EventRecord`]s with an owner bit; the host
//! consumes them and writes its consumer index into the doorbell.

use std::sync::atomic::{fence, Ordering};

use mrc_abi::device::cqe::expected_owner;
use mrc_abi::device::event::{Event, EventRecord};
use zerocopy::FromBytes;

use super::admin::enable_queue;
use super::{lock, qreg, Device};
use crate::error::{Error, Result};
use crate::sys::{Backend, DmaRegion};

const REC_BYTES: u64 = 32;

pub(super) struct EventQueue {
    block: u64,
    ring: DmaRegion,
    log2: u8,
    consumer: u32,
}

impl EventQueue {
    pub(super) fn setup(b: &dyn Backend, block: u64, log2: u8) -> Result<EventQueue> {
        if !(1..=12).contains(&log2) {
            return Err(Error::InvalidAttribute {
                object: format!("device {}", b.bdf()),
                field: "event_log2",
                value: u64::from(log2),
                rule: "log2 entries in 1..=12",
            });
        }
        let ring = b.alloc_dma((REC_BYTES as usize) << log2)?;
        enable_queue(b, block, &ring, None, log2, "event")?;
        Ok(EventQueue {
            block,
            ring,
            log2,
            consumer: 0,
        })
    }
}

/// An event with the device's timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedEvent {
    /// What happened.
    pub event: Event,
    /// Device time, ns.
    pub timestamp_ns: u64,
}

impl Device {
    /// The next asynchronous event, if one is pending. Malformed records are counted and
    /// skipped (reported as [`Error::BadRecord`] once each).
    ///
    /// # Errors
    /// [`Error::DeviceGone`], [`Error::BadRecord`].
    pub fn poll_event(&self) -> Result<Option<TimedEvent>> {
        self.check()?;
        let mut q = lock(&self.events);
        let index = q.consumer;
        let slot = u64::from(index & ((1u32 << q.log2) - 1));
        let flags = q.ring.read_u8(slot * REC_BYTES + 1)?;
        if (flags & 1 != 0) != expected_owner(index, q.log2) {
            // Nothing new; the status read notices a removed device.
            drop(q);
            self.check_alive()?;
            return Ok(None);
        }
        // Acquire: the record body is read only after its owner bit was seen.
        fence(Ordering::Acquire);
        let mut buf = [0u8; REC_BYTES as usize];
        q.ring.read_slice(slot * REC_BYTES, &mut buf)?;
        q.consumer = index.wrapping_add(1);
        let consumer = q.consumer;
        let block = q.block;
        drop(q);
        self.write32(block + qreg::DOORBELL, consumer)?;
        self.counters.events.fetch_add(1, Ordering::Relaxed);
        let rec = EventRecord::read_from_bytes(&buf).map_err(|_| self.protocol("short event"))?;
        match rec.decode() {
            Ok(event) => Ok(Some(TimedEvent {
                event,
                timestamp_ns: rec.timestamp_ns.get(),
            })),
            Err(e) => {
                self.counters.bad_records.fetch_add(1, Ordering::Relaxed);
                Err(Error::BadRecord {
                    bdf: self.bdf,
                    what: "event record",
                    index,
                    detail: format!("{e:?}"),
                })
            }
        }
    }
}
