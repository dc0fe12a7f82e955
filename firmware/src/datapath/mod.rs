//! Per-packet datapath reference models: what the RTL implements, cycle for cycle in function.
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
//! whose outcome is [`RxOutcome::New`]. The firmware engine consumes the [`AckSummary`] /
//! [`NackSummary`] records the remote side's generator produced, and writes the sprayer's EV
//! table (usable bits, weights, skip-once flags).

pub mod ack_gen;
pub mod placement;
pub mod rx_bitmap;
pub mod segmenter;
pub mod sprayer;

pub use ack_gen::{
    AckDecision, AckEvent, AckGen, AckGenConfig, AckGenCounters, AckSummary, NackReason,
    NackSummary, RxPacket, TrimMark,
};
pub use placement::{
    Access, MemRegion, Placement, PlacementCounters, PlacementError, PlacementTable, RegisterError,
};
pub use rx_bitmap::{RxBitmap, RxCounters, RxOutcome, Sack};
pub use segmenter::{
    PacketDesc, SegmentError, Segmenter, SegmenterCounters, WriteOpcode, WriteRequest,
};
pub use sprayer::{EvPick, EvSlot, Sprayer, SprayerCounters, SprayerError};
