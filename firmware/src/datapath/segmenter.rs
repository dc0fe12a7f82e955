//! Message segmentation: the per-packet descriptors of an RDMA WRITE (with or without
//! immediate).
//!
//! # Hardware block
//!
//! - **State**: the work request in progress ([`WriteRequest`]), its packet count and the index
//!   of the next packet; idle when none. One message at a time.
//! - **Inputs**: [`Segmenter::start`] with a send work request; then one
//!   [`Segmenter::next_packet`] per packet slot.
//! - **Output**: one [`PacketDesc`] per call, in PSN order: PSN, opcode (FIRST / MIDDLE / LAST /
//!   ONLY, with IMM on the last or only packet of a write-with-immediate), this packet's remote
//!   address, its payload offset and length. The header builder (`mrc_abi::wire`) turns it into
//!   bytes; the sprayer picks its EV.
//! - **Capacity**: messages of up to `u32::MAX` bytes and up to [`MAX_PACKETS`] packets.
//!
//! Every packet but the last carries exactly `mtu_payload` bytes; the last carries the rest. A
//! zero-length write is one ONLY (or ONLY_IMM) packet with no payload. Retransmissions rebuild a
//! single packet's descriptor with [`WriteRequest::descriptor`] (or
//! [`WriteRequest::descriptor_for_psn`]), which is the same pure function the block uses.

use mrc_abi::Psn;

/// Most packets in one message: a quarter of the PSN space, so a message's PSNs always compare
/// unambiguously with wrap-around arithmetic and fit a receive window bound.
pub const MAX_PACKETS: u32 = 1 << 22;

/// Write opcodes are [`Opcode`]'s write variants (BTH byte 0): one definition, in the wire codec.
pub use mrc_abi::wire::Opcode;

/// A send work request for an RDMA WRITE, as the segmenter needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WriteRequest {
    /// Remote virtual address of the first byte.
    pub remote_va: u64,
    pub rkey: u32,
    /// Message length in bytes.
    pub len: u32,
    /// Immediate data: makes it a write-with-immediate.
    pub imm: Option<u32>,
    /// Payload bytes per full packet (path MTU minus headers), `>= 1`.
    pub mtu_payload: u32,
    /// PSN of the first packet.
    pub start_psn: Psn,
}

/// One packet's segmentation decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PacketDesc {
    pub psn: Psn,
    /// One of the six write opcodes.
    pub opcode: Opcode,
    /// Index of the packet in its message, from 0.
    pub index: u32,
    /// RETH virtual address: where this packet's payload goes.
    pub remote_va: u64,
    /// RETH rkey.
    pub rkey: u32,
    /// Offset of the payload in the message (in the local buffer).
    pub payload_offset: u32,
    /// Payload bytes (RETH DMA length).
    pub payload_len: u32,
    /// ImmDt, on the last / only packet of a write-with-immediate.
    pub imm: Option<u32>,
}

/// A work request the segmenter refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SegmentError {
    /// `mtu_payload` is 0.
    ZeroMtu,
    /// `remote_va + len` overflows the 64-bit address space.
    AddressWraps { remote_va: u64, len: u32 },
    /// More than [`MAX_PACKETS`] packets.
    TooManyPackets { packets: u32 },
    /// [`Segmenter::start`] while a message is still being segmented.
    Busy,
}

impl WriteRequest {
    /// Number of packets of the message.
    ///
    /// # Errors
    /// [`SegmentError::ZeroMtu`], [`SegmentError::AddressWraps`],
    /// [`SegmentError::TooManyPackets`].
    pub fn packet_count(&self) -> Result<u32, SegmentError> {
        if self.mtu_payload == 0 {
            return Err(SegmentError::ZeroMtu);
        }
        if self.remote_va.checked_add(u64::from(self.len)).is_none() {
            return Err(SegmentError::AddressWraps {
                remote_va: self.remote_va,
                len: self.len,
            });
        }
        let packets = self.len.div_ceil(self.mtu_payload).max(1);
        if packets > MAX_PACKETS {
            return Err(SegmentError::TooManyPackets { packets });
        }
        Ok(packets)
    }

    /// The descriptor of packet `index`, `None` when the request is invalid or `index` is not
    /// below [`Self::packet_count`].
    pub fn descriptor(&self, index: u32) -> Option<PacketDesc> {
        let packets = self.packet_count().ok()?;
        self.descriptor_in(index, packets)
    }

    /// [`Self::descriptor`] when the caller already knows `packets == self.packet_count()`
    /// (the engine stores it per work request, so the per-packet path skips the division).
    /// `None` when `index >= packets` or the offsets overflow.
    #[inline]
    pub fn descriptor_in(&self, index: u32, packets: u32) -> Option<PacketDesc> {
        if index >= packets || self.mtu_payload == 0 {
            return None;
        }
        // index < packets <= len / mtu rounded up, so offset < len (or 0 for len 0).
        let offset = index.checked_mul(self.mtu_payload)?;
        let payload_len = self.len.checked_sub(offset)?.min(self.mtu_payload);
        let last = index + 1 == packets;
        let opcode = match (packets == 1, index == 0, last, self.imm.is_some()) {
            (true, _, _, false) => Opcode::WriteOnly,
            (true, _, _, true) => Opcode::WriteOnlyImm,
            (false, true, _, _) => Opcode::WriteFirst,
            (false, false, false, _) => Opcode::WriteMiddle,
            (false, false, true, false) => Opcode::WriteLast,
            (false, false, true, true) => Opcode::WriteLastImm,
        };
        Some(PacketDesc {
            psn: self.start_psn.add(index),
            opcode,
            index,
            remote_va: self.remote_va.checked_add(u64::from(offset))?,
            rkey: self.rkey,
            payload_offset: offset,
            payload_len,
            imm: if opcode.has_imm() { self.imm } else { None },
        })
    }

    /// The descriptor of the packet with `psn`, `None` when no packet of the message has it.
    pub fn descriptor_for_psn(&self, psn: Psn) -> Option<PacketDesc> {
        let index = u32::try_from(psn.distance_from(self.start_psn)).ok()?;
        self.descriptor(index)
    }
}

/// Segmenter counters (free-running, wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SegmenterCounters {
    /// Messages accepted.
    pub messages: u64,
    /// Packet descriptors produced.
    pub packets: u64,
    /// Work requests refused.
    pub rejected: u64,
    /// Messages abandoned with [`Segmenter::abort`] before their last packet.
    pub aborted: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InProgress {
    req: WriteRequest,
    packets: u32,
    next: u32,
}

/// The segmentation block: one message at a time. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segmenter {
    current: Option<InProgress>,
    counters: SegmenterCounters,
}

impl Segmenter {
    /// An idle segmenter.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters.
    pub fn counters(&self) -> SegmenterCounters {
        self.counters
    }

    /// A message is being segmented.
    pub fn is_busy(&self) -> bool {
        self.current.is_some()
    }

    /// Packets of the current message not yet produced (0 when idle).
    pub fn remaining(&self) -> u32 {
        self.current.map_or(0, |c| c.packets.saturating_sub(c.next))
    }

    /// Accept a work request; returns its packet count.
    ///
    /// # Errors
    /// [`SegmentError::Busy`] while a message is in progress, else as
    /// [`WriteRequest::packet_count`].
    pub fn start(&mut self, req: WriteRequest) -> Result<u32, SegmentError> {
        let result = if self.current.is_some() {
            Err(SegmentError::Busy)
        } else {
            req.packet_count()
        };
        match result {
            Ok(packets) => {
                self.current = Some(InProgress {
                    req,
                    packets,
                    next: 0,
                });
                self.counters.messages = self.counters.messages.wrapping_add(1);
            }
            Err(_) => self.counters.rejected = self.counters.rejected.wrapping_add(1),
        }
        result
    }

    /// The next packet of the current message (`None` when idle). After the last packet the
    /// segmenter is idle again.
    pub fn next_packet(&mut self) -> Option<PacketDesc> {
        let cur = self.current.as_mut()?;
        let desc = cur.req.descriptor(cur.next);
        cur.next = cur.next.saturating_add(1);
        if desc.is_none() || cur.next >= cur.packets {
            self.current = None;
        }
        if desc.is_some() {
            self.counters.packets = self.counters.packets.wrapping_add(1);
        }
        desc
    }

    /// Abandon the current message (QP error or flush).
    pub fn abort(&mut self) {
        if self.current.take().is_some() {
            self.counters.aborted = self.counters.aborted.wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    extern crate std;

    fn req(len: u32, mtu: u32, imm: Option<u32>) -> WriteRequest {
        WriteRequest {
            remote_va: 0x10_0000,
            rkey: 0xabc,
            len,
            imm,
            mtu_payload: mtu,
            start_psn: Psn::new(100),
        }
    }

    fn all(r: WriteRequest) -> Vec<PacketDesc> {
        let mut s = Segmenter::new();
        s.start(r).unwrap();
        let mut out = Vec::new();
        while let Some(d) = s.next_packet() {
            out.push(d);
        }
        assert!(!s.is_busy());
        out
    }

    #[test]
    fn three_packets_with_immediate() {
        let got = all(req(2500, 1000, Some(0xfeed)));
        let ops: Vec<u8> = got.iter().map(|d| d.opcode as u8).collect();
        assert_eq!(ops, [0xC0, 0xC1, 0xC3]);
        assert_eq!(got[2].psn, Psn::new(102));
        assert_eq!(got[2].remote_va, 0x10_0000 + 2000);
        assert_eq!((got[2].payload_offset, got[2].payload_len), (2000, 500));
        assert_eq!(got[2].imm, Some(0xfeed));
        assert_eq!(got[0].imm, None);
        assert_eq!(got[1].payload_len, 1000);
    }

    #[test]
    fn only_packets() {
        let got = all(req(0, 1000, None));
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].opcode, got[0].payload_len), (Opcode::WriteOnly, 0));
        let got = all(req(1000, 1000, Some(1)));
        assert_eq!(
            (got[0].opcode, got[0].payload_len, got[0].imm),
            (Opcode::WriteOnlyImm, 1000, Some(1))
        );
        let got = all(req(1001, 1000, None));
        let ops: Vec<Opcode> = got.iter().map(|d| d.opcode).collect();
        assert_eq!(ops, [Opcode::WriteFirst, Opcode::WriteLast]);
    }

    #[test]
    fn refusals() {
        let mut s = Segmenter::new();
        assert_eq!(s.start(req(1, 0, None)), Err(SegmentError::ZeroMtu));
        let r = WriteRequest {
            remote_va: u64::MAX,
            ..req(2, 1, None)
        };
        assert_eq!(
            s.start(r),
            Err(SegmentError::AddressWraps {
                remote_va: u64::MAX,
                len: 2
            })
        );
        assert_eq!(
            s.start(req(u32::MAX, 1, None)),
            Err(SegmentError::TooManyPackets { packets: u32::MAX })
        );
        assert_eq!(s.start(req(10, 4, None)), Ok(3));
        assert_eq!(s.start(req(10, 4, None)), Err(SegmentError::Busy));
        assert_eq!(s.remaining(), 3);
        s.next_packet();
        s.abort();
        assert_eq!(s.next_packet(), None);
        let c = s.counters();
        assert_eq!((c.messages, c.packets, c.rejected, c.aborted), (1, 1, 4, 1));
    }

    #[test]
    fn psns_wrap_and_lookup_by_psn() {
        let r = WriteRequest {
            start_psn: Psn::new(Psn::MASK),
            ..req(3000, 1000, None)
        };
        let got = all(r);
        assert_eq!(got[1].psn, Psn::new(0));
        assert_eq!(r.descriptor_for_psn(Psn::new(1)), Some(got[2]));
        assert_eq!(r.descriptor_for_psn(Psn::new(2)), None);
        assert_eq!(r.descriptor_for_psn(Psn::new(Psn::MASK - 1)), None);
    }

    fn is_first(op: Opcode) -> bool {
        matches!(
            op,
            Opcode::WriteFirst | Opcode::WriteOnly | Opcode::WriteOnlyImm
        )
    }

    fn is_last(op: Opcode) -> bool {
        matches!(
            op,
            Opcode::WriteLast | Opcode::WriteLastImm | Opcode::WriteOnly | Opcode::WriteOnlyImm
        )
    }

    proptest! {
        #[test]
        fn packets_tile_the_message(
            len in prop_oneof![0u32..5000, 0u32..200_000],
            mtu in prop_oneof![1u32..64, 64u32..9000],
            imm in proptest::option::of(any::<u32>()),
            start in any::<u32>(),
            va in any::<u64>(),
        ) {
            // At most ~5000 packets per case keeps the test fast.
            let mtu = mtu.max(len / 5000 + 1);
            let r = WriteRequest {
                remote_va: va.min(u64::MAX - u64::from(len)),
                rkey: 5,
                len,
                imm,
                mtu_payload: mtu,
                start_psn: Psn::new(start),
            };
            let Ok(count) = r.packet_count() else {
                prop_assert!(u64::from(len) > u64::from(MAX_PACKETS) * u64::from(mtu));
                return Ok(());
            };
            let got = all(r);
            prop_assert_eq!(got.len() as u32, count);
            prop_assert_eq!(count, len.div_ceil(mtu).max(1));
            let mut offset = 0u32;
            for (i, d) in got.iter().enumerate() {
                let i = i as u32;
                prop_assert_eq!(d.index, i);
                prop_assert_eq!(d.psn, Psn::new(start).add(i));
                prop_assert_eq!(d.payload_offset, offset);
                prop_assert_eq!(d.remote_va, r.remote_va + u64::from(offset));
                prop_assert!(d.payload_len <= mtu);
                prop_assert!(d.payload_len > 0 || len == 0);
                if i + 1 < count {
                    prop_assert_eq!(d.payload_len, mtu);
                }
                prop_assert_eq!(is_first(d.opcode), i == 0);
                prop_assert_eq!(is_last(d.opcode), i + 1 == count);
                prop_assert_eq!(d.opcode.has_imm(), i + 1 == count && imm.is_some());
                prop_assert_eq!(d.imm, if d.opcode.has_imm() { imm } else { None });
                prop_assert_eq!(r.descriptor_for_psn(d.psn), Some(*d));
                offset += d.payload_len;
            }
            prop_assert_eq!(offset, len);
            prop_assert_eq!(r.descriptor(count), None);
        }
    }
}
