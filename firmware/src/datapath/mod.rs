//! The datapath: per-packet reference models of the RTL blocks, and the stage built from them.
//!
//! [`stage::Datapath`] is the NIC's whole datapath (every QP, both directions, the firmware
//! queues); the blocks below are its parts, each the functional reference of one RTL block.
//!
//! At 800 Gb/s a NIC sees ~24 M packets/s, so everything per packet is hardware. Each block here is
//! the *functional* reference for one RTL block: the simulator wraps it with cycle costs, the
//! Verilator benches compare the RTL against it, and the QEMU self-test uses it in place of
//! hardware. So every model is
//!
//! - **pure and deterministic**: no clock (time, where needed, is an input `now_ns`), no
//!   randomness, no I/O; the same inputs give the same outputs bit for bit;
//! - **bounded**: fixed-size state sized by const generics, no allocation, no recursion, every
//!   loop bounded by a capacity;
//! - **one decision per call**: a call is one hardware transaction (one packet in, one decision
//!   out), documented like a hardware block (inputs, outputs, state, capacity);
//! - **panic-free on any input**: bad values give a typed error or an outcome and a counter.
//!
//! Counters are free-running `u64`s that wrap, like hardware counters.
//!
//! | block | model | decides | counters |
//! |---|---|---|---|
//! | EV sprayer | [`Sprayer`] | the EV (and so the path and plane) of each outgoing packet | [`SprayerCounters`] |
//! | receive PSN tracker | [`RxBitmap`] | New / Duplicate / OutOfWindow per received PSN; cumulative PSN; SACK bitmap | [`RxCounters`] |
//! | ACK generator | [`AckGen`] | when to emit a coalesced ACK or a NACK, and its contents | [`AckGenCounters`] |
//! | placement check | [`PlacementTable`] | where a received write's payload goes, or which NACK | [`PlacementCounters`] |
//! | segmenter | [`Segmenter`] | the per-packet descriptors of a write message | [`SegmenterCounters`] |
//!
//! The transmit side runs segmenter -> sprayer -> header builder (`mrc_abi::wire`); the receive
//! side runs parser -> [`AckGen`] (which owns the [`RxBitmap`]) -> [`PlacementTable`] for packets
//! whose outcome is [`RxOutcome::New`]. The stage applies the [`AckSummary`] / [`NackSummary`]
//! records the remote side's generator produced to its per-PSN send state and reports what
//! changed to the firmware, which writes the sprayer's EV table (usable bits, weights,
//! skip-once flags).
//!
//! # Example: one message through the blocks
//!
//! ```
//! use mrc_abi::Psn;
//! use mrc_firmware::datapath::*;
//!
//! // Sender: segment a 2500-byte write-with-immediate, give each packet an EV.
//! let mut sprayer: Sprayer<16, 2> = Sprayer::new();
//! sprayer.set_ev(0, EvSlot { usable: true, weight: 1, plane: 0, skip_once: false }).unwrap();
//! sprayer.set_ev(1, EvSlot { usable: true, weight: 1, plane: 1, skip_once: false }).unwrap();
//! let req = WriteRequest {
//!     remote_va: 0x1000,
//!     rkey: 7,
//!     len: 2500,
//!     imm: Some(0xfeed),
//!     mtu_payload: 1024,
//!     start_psn: Psn::new(0),
//! };
//! let mut seg = Segmenter::new();
//! assert_eq!(seg.start(req), Ok(3));
//!
//! // Receiver: one registered region, an ACK generator for the QP.
//! let mut regions: PlacementTable<4> = PlacementTable::new();
//! regions
//!     .register(MemRegion { rkey: 7, base_va: 0x1000, length: 4096, access: Access::REMOTE_WRITE })
//!     .unwrap();
//! let mut acks: AckGen<4> = AckGen::new(0x11, Psn::new(0), AckGenConfig::default());
//!
//! let mut last = None;
//! while let Some(pkt) = seg.next_packet() {
//!     let ev = sprayer.next_ev().unwrap();
//!     let rx = RxPacket {
//!         psn: pkt.psn,
//!         ev_index: ev.index,
//!         plane: ev.plane,
//!         has_imm: pkt.opcode.has_imm(),
//!         ..RxPacket::default()
//!     };
//!     let decision = acks.handle_packet(0, &rx);
//!     assert!(decision.place);
//!     let placed = regions.check_write(pkt.rkey, pkt.remote_va, pkt.payload_len, pkt.payload_len);
//!     assert!(matches!(placed, Ok(Placement::Write { slot: 0, .. })));
//!     last = decision.event;
//! }
//! // The immediate on the last packet makes the generator ACK at once.
//! let Some(AckEvent::Ack(ack)) = last else { panic!("no ACK") };
//! assert_eq!((ack.cum_psn, ack.pkt_count, ack.plane), (Psn::new(3), 3, 0));
//! ```

pub mod ack_gen;
pub mod blocks;
pub mod packet;
pub mod placement;
pub mod rx_bitmap;
pub mod segmenter;
pub mod sprayer;
pub mod stage;

pub use ack_gen::{
    AckDecision, AckEvent, AckGen, AckGenConfig, AckGenCounters, AckSummary, NackReason,
    NackSummary, RxPacket, TrimMark,
};
pub use placement::{
    Access, MemRegion, Placement, PlacementCounters, PlacementError, PlacementTable, RegisterError,
};
pub use rx_bitmap::{RxBitmap, RxCounters, RxOutcome, Sack};
pub use segmenter::{Opcode, PacketDesc, SegmentError, Segmenter, SegmenterCounters, WriteRequest};
pub use sprayer::{EvPick, EvSlot, Sprayer, SprayerCounters, SprayerError};
