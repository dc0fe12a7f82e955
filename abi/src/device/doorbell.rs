//! The doorbell page of a queue: one 4 KiB page per queue number, so a queue's page can be mapped
//! into exactly one process.
//!
//! Page `n` (BAR0 offset `DoorbellBlock.offset + n * DoorbellBlock.stride`) holds the send and
//! receive queue doorbells of QP `n` and the completion queue doorbell of CQ `n`. The host writes
//! each doorbell as one 32-bit little-endian store, after a `fence(Release)` that orders its
//! descriptor writes before it. Reads return the last value written.

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::U32;

/// Size of a doorbell page.
pub const PAGE_BYTES: usize = 4096;

le_struct! {
/// The register layout of one doorbell page.
pub struct DoorbellPage {
    /// WO send queue producer index (free-running 32-bit count of posted send WQEs).
    pub sq_producer: U32,
    /// WO receive queue producer index (free-running 32-bit count of posted receive WQEs).
    pub rq_producer: U32,
    /// WO completion queue doorbell: a [`CqDoorbell`] value.
    pub cq_doorbell: U32,
    /// Reserved: writes ignored, reads 0.
    pub rsvd: [u8; PAGE_BYTES - 12],
}
}

const _: () = {
    assert!(size_of::<DoorbellPage>() == PAGE_BYTES);
    assert!(offset_of!(DoorbellPage, sq_producer) == SQ_PRODUCER_OFFSET);
    assert!(offset_of!(DoorbellPage, rq_producer) == RQ_PRODUCER_OFFSET);
    assert!(offset_of!(DoorbellPage, cq_doorbell) == CQ_DOORBELL_OFFSET);
};

/// Byte offset of the SQ producer doorbell in the page.
pub const SQ_PRODUCER_OFFSET: usize = 0x0;
/// Byte offset of the RQ producer doorbell in the page.
pub const RQ_PRODUCER_OFFSET: usize = 0x4;
/// Byte offset of the CQ doorbell in the page.
pub const CQ_DOORBELL_OFFSET: usize = 0x8;
/// CQ doorbell bit 31: arm the CQ (raise its interrupt at the next completion).
pub const CQ_ARM: u32 = 1 << 31;
/// CQ doorbell bit 30: when armed, only a solicited completion (or an error) raises it.
pub const CQ_ARM_SOLICITED: u32 = 1 << 30;
/// CQ doorbell bits 23:0: the consumer index, modulo 2^24.
pub const CQ_CONSUMER_MASK: u32 = (1 << 24) - 1;

/// The value written to the CQ doorbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CqDoorbell {
    /// Consumer index modulo 2^24 (the device frees entries before it).
    pub consumer: u32,
    /// Arm the completion interrupt.
    pub arm: bool,
    /// Armed for solicited completions only.
    pub solicited_only: bool,
}

/// A CQ doorbell value with reserved bits (29:24) set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CqDoorbellError {
    /// The value written.
    pub value: u32,
}

impl CqDoorbell {
    /// The register value (the consumer index is truncated to 24 bits).
    pub const fn encode(self) -> u32 {
        (self.consumer & CQ_CONSUMER_MASK)
            | if self.arm { CQ_ARM } else { 0 }
            | if self.solicited_only {
                CQ_ARM_SOLICITED
            } else {
                0
            }
    }

    /// The doorbell in a register value.
    ///
    /// # Errors
    /// Reserved bits 29:24 set.
    pub const fn decode(v: u32) -> Result<Self, CqDoorbellError> {
        if v & !(CQ_CONSUMER_MASK | CQ_ARM | CQ_ARM_SOLICITED) != 0 {
            return Err(CqDoorbellError { value: v });
        }
        Ok(CqDoorbell {
            consumer: v & CQ_CONSUMER_MASK,
            arm: v & CQ_ARM != 0,
            solicited_only: v & CQ_ARM_SOLICITED != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn byte_literal() {
        let v = CqDoorbell {
            consumer: 0x12_3456,
            arm: true,
            solicited_only: false,
        }
        .encode();
        assert_eq!(v.to_le_bytes(), [0x56, 0x34, 0x12, 0x80]);
        assert_eq!(
            CqDoorbell::decode(0x0100_0000),
            Err(CqDoorbellError { value: 0x0100_0000 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(consumer in 0u32..1 << 24, arm: bool, solicited_only: bool) {
            let d = CqDoorbell { consumer, arm, solicited_only };
            prop_assert_eq!(CqDoorbell::decode(d.encode()), Ok(d));
        }

        #[test]
        fn decode_any(v: u32) {
            if let Ok(d) = CqDoorbell::decode(v) {
                prop_assert_eq!(d.encode(), v);
            }
        }
    }
}
