//! Wire sizes of the packets the NIC sends, from the `mrc_abi` header constants.
//!
//! A packet occupies its link for its Ethernet frame (header, IPv6 layers, UDP, the MRC headers
//! the stage's [`Packet`] carries, payload, FCS) plus the preamble, start delimiter and
//! minimum inter-frame gap every Ethernet frame costs. The IPv6 layers depend on the EV format:
//! SRv6 carries the route in an outer IPv6 header in front of the inner one (no SRH: the uSID
//! carrier holds the whole route in the fabrics simulated here); the other formats use one
//! IPv6 header. There is no ICRC (the UDP checksum covers the MRC headers, see WIRE.md).

use mrc_abi::wire::mrc::{EVX_LEN, MRH_LEN, RETH_LEN, TSX_LEN};
use mrc_abi::wire::{bth, ethernet, ipv6, udp, EvFormat};
use mrc_firmware::datapath::packet::Packet;

/// Ethernet FCS.
pub const FCS_BYTES: u32 = 4;
/// Preamble + start frame delimiter (8) and the minimum inter-frame gap (12): link time every
/// frame costs beyond its bytes.
pub const PREAMBLE_IFG_BYTES: u32 = 20;
/// Smallest Ethernet frame (FCS included).
pub const MIN_FRAME_BYTES: u32 = 64;

/// Bytes of the IPv6 layers for `format`.
pub const fn l3_bytes(format: EvFormat) -> u32 {
    match format {
        EvFormat::Srv6 => 2 * ipv6::HEADER_LEN as u32,
        EvFormat::Udp | EvFormat::Stev => ipv6::HEADER_LEN as u32,
    }
}

/// Link bytes of a data packet beyond its payload (RETH, EVX and TSX present, no immediate)
/// with EV format `format`.
pub const fn data_overhead_bytes(format: EvFormat) -> u32 {
    ethernet::HEADER_LEN as u32
        + l3_bytes(format)
        + udp::HEADER_LEN as u32
        + bth::HEADER_LEN as u32
        + MRH_LEN as u32
        + EVX_LEN as u32
        + TSX_LEN as u32
        + RETH_LEN as u32
        + FCS_BYTES
        + PREAMBLE_IFG_BYTES
}

/// Header bytes of `tx` (Ethernet to the end of the MRC headers: what the header builder
/// emits).
pub fn header_bytes(tx: &Packet) -> u32 {
    ethernet::HEADER_LEN as u32
        + l3_bytes(tx.ev_format)
        + udp::HEADER_LEN as u32
        + tx.to_repr().header_len() as u32
}

/// Link bytes of `tx` (frame + preamble and gap).
pub fn wire_bytes(tx: &Packet) -> u32 {
    let frame = header_bytes(tx) + tx.payload_len + FCS_BYTES;
    frame.max(MIN_FRAME_BYTES) + PREAMBLE_IFG_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srv6_data_overhead_is_the_header_sum() {
        // 14 Ethernet + 2 x 40 IPv6 + 8 UDP + 12 BTH + 4 MRH + 8 EVX + 8 TSX + 16 RETH + 4 FCS
        // + 20 preamble/IFG.
        assert_eq!(data_overhead_bytes(EvFormat::Srv6), 174);
        assert_eq!(data_overhead_bytes(EvFormat::Udp), 134);
    }
}
