//! Wire formats: the packets MRC NICs put on the fabric. `abi/WIRE.md` is the byte-level spec.
//!
//! Each header has a zero-copy view `XxxPacket<T: AsRef<[u8]>>` (field accessors over a byte
//! buffer, setters when `T: AsMut<[u8]>`) and a `XxxRepr` value (the header's meaning, with
//! lengths and checksums left out) with `parse` and `emit`. [`Frame`] parses and emits a whole
//! Ethernet frame across all layers.
//!
//! # Panic contract
//! - `XxxPacket::new_checked(buf)` checks that `buf` holds the whole header (and, for variable
//!   headers, the length its own fields announce). After it returns `Ok`, no accessor or setter of
//!   that packet panics. `new_unchecked` skips the check; accessors may then panic on a short
//!   buffer, so only use it on buffers you sized yourself.
//! - `XxxRepr::parse` never panics. `XxxRepr::emit` panics only when the packet's buffer is
//!   shorter than the `buffer_len()` / `HEADER_LEN` that repr reported (and
//!   `SrhRepr::emit` on an empty segment list, which `Frame::emit` refuses with an error).
//! - [`Frame::parse`] and [`Frame::emit`] never panic: a short buffer is [`Error::BufferTooSmall`].
//!
//! Nothing here allocates; variable parts (SRH segment lists and TLVs) live in bounded
//! `heapless` vectors with the capacities [`srh::MAX_SEGMENTS`] and [`srh::MAX_TLV_BYTES`].

mod checksum;
mod error;
mod field;

pub mod bth;
pub mod ethernet;
pub mod ev;
pub mod frame;
pub mod ipv6;
pub mod mrc;
pub mod samples;
pub mod srh;
pub mod udp;
pub mod usid;

pub use bth::{BthPacket, BthRepr, Opcode};
pub use checksum::{pseudo_header_sum, udp_checksum};
pub use error::{Error, Header};
pub use ethernet::{EthernetAddress, EthernetPacket, EthernetRepr};
pub use ev::EvFormat;
pub use frame::{Encap, Frame};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use mrc::{
    AckRepr, Body, EvxRepr, MrcRepr, MrhRepr, NackReason, NackRepr, ProbeRepr, RethRepr, Segment,
    TsxRepr,
};
pub use srh::{SrhPacket, SrhRepr};
pub use udp::{UdpPacket, UdpRepr};

/// UDP destination port of MRC (the RoCEv2 port).
pub const MRC_UDP_PORT: u16 = 4791;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// IPv6 next-header value of UDP.
pub const IP_PROTO_UDP: u8 = 17;
/// IPv6 next-header value of an encapsulated IPv6 packet.
pub const IP_PROTO_IPV6: u8 = 41;
/// IPv6 next-header value of a routing header (the SRH).
pub const IP_PROTO_ROUTING: u8 = 43;
/// The wire version carried in the MRH.
pub const MRC_VERSION: u8 = 1;
