//! # mrc-abi: the one source of truth for the MRC device contract
//!
//! Everything two parts of mrc must agree on lives here and nowhere else:
//!
//! - [`wire`]: the packet formats on the fabric (Ethernet II, IPv6, SRv6 SRH and uSID carriers,
//!   UDP, and the MRC headers: BTH, MRH, EV and timestamp extensions, RETH, ImmDt, ACK with SACK,
//!   NACK, EV probes), as smoltcp-style `Packet<T>` views plus `Repr` values with `parse`/`emit`.
//!   `abi/WIRE.md` is the byte-level specification.
//! - [`device`]: what the host and the NIC share: BAR register blocks, doorbell pages, work queue
//!   entries, completions, events, admin commands, the CSR event queues between the datapath and
//!   the firmware cores, and the ABI version handshake.
//! - [`layout`]: tables describing those layouts, from which `fpga-rtl/generated/mrc_abi_pkg.sv`
//!   and `abi/REGISTERS.md` are generated (`just regs`, through `gen`).
//! - With `std`: `pcap` (read and write capture files Wireshark opens) and `json` (one JSON
//!   object per decoded frame, the field names of the Wireshark dissector `abi/wireshark/mrc.lua`).
//!
//! ## Contract
//! - `#![no_std]`, no allocation, no unsafe code. The `std` feature adds pcap files, JSON
//!   rendering and the generators.
//! - **Panics**: no function in this crate panics on any input bytes. `Packet::new_checked`
//!   validates lengths once; after it succeeds, every accessor of that packet is in bounds. The
//!   only panicking functions are the `emit` methods, which panic when the caller hands them a
//!   buffer shorter than the `buffer_len()` the same `Repr` reported: that is a bug in the caller,
//!   never in the data.
//! - Wire values are network byte order; descriptors shared with the host are little-endian (as
//!   PCIe devices and x86/RISC-V hosts are), and every layout's size and offsets are asserted at
//!   compile time.
//!
//! ## Example
//! ```
//! use mrc_abi::wire::{self, Frame};
//!
//! let frame = wire::samples::write_only_imm(wire::EvFormat::Srv6, true);
//! let mut buf = [0u8; 512];
//! let len = frame.emit(&mut buf).unwrap();
//! let back = Frame::parse(&buf[..len]).unwrap();
//! assert_eq!(back, frame);
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod device;
pub mod layout;
pub mod psn;
pub mod wire;

#[cfg(feature = "std")]
pub mod gen;
#[cfg(feature = "std")]
pub mod json;
#[cfg(feature = "std")]
pub mod pcap;

pub use psn::Psn;
