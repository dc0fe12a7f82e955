//! The wire headers of `abi/WIRE.md` as bit tables (big-endian numbering).

use super::Endian::Big;
use super::{Field, Layout};

const fn f(name: &'static str, offset_bits: u32, width_bits: u32, doc: &'static str) -> Field {
    Field::new(name, offset_bits, width_bits, doc)
}

/// The wire headers of `abi/WIRE.md` (big-endian bit numbering).
pub const WIRE_LAYOUTS: &[Layout] = &[
    Layout {
        name: "Ethernet",
        size_bytes: 14,
        endian: Big,
        doc: "Ethernet II header, no VLAN tags.",
        fields: &[
            f("dst_mac", 0, 48, "Destination MAC."),
            f("src_mac", 48, 48, "Source MAC."),
            f("ethertype", 96, 16, "EtherType, 0x86DD (IPv6)."),
        ],
    },
    Layout {
        name: "Ipv6",
        size_bytes: 40,
        endian: Big,
        doc: "IPv6 header (RFC 8200).",
        fields: &[
            f("version", 0, 4, "6."),
            f("dscp", 4, 6, "Differentiated services code point."),
            f("ecn", 10, 2, "ECN (3 = CE)."),
            f(
                "flow_label",
                12,
                20,
                "Flow label (STEV: low 20 bits of the EV).",
            ),
            f("payload_len", 32, 16, "Bytes after this header."),
            f("next_header", 48, 8, "17 UDP, 41 IPv6, 43 routing (SRH)."),
            f("hop_limit", 56, 8, "Hop limit."),
            f("src", 64, 128, "Source address."),
            f(
                "dst",
                192,
                128,
                "Destination address (SRv6: the uSID carrier).",
            ),
        ],
    },
    Layout {
        name: "Srh",
        size_bytes: 8,
        endian: Big,
        doc: "SRv6 segment routing header, fixed part (RFC 8754); the segment list follows.",
        fields: &[
            f("next_header", 0, 8, "41 (inner IPv6)."),
            f(
                "hdr_ext_len",
                8,
                8,
                "Length in 8-octet units, not counting the first 8.",
            ),
            f("routing_type", 16, 8, "4."),
            f("segments_left", 24, 8, "Index of the active segment."),
            f("last_entry", 32, 8, "Index of the last segment-list entry."),
            f("flags", 40, 8, "Flags (0)."),
            f("tag", 48, 16, "Tag (0)."),
        ],
    },
    Layout {
        name: "Udp",
        size_bytes: 8,
        endian: Big,
        doc: "UDP header; checksum mandatory.",
        fields: &[
            f(
                "src_port",
                0,
                16,
                "Source port (UDP EV; STEV: 0xC000 | EV bits 31:20).",
            ),
            f("dst_port", 16, 16, "4791."),
            f("length", 32, 16, "UDP header + payload bytes."),
            f(
                "checksum",
                48,
                16,
                "Checksum over the carrying IPv6 pseudo-header; never 0.",
            ),
        ],
    },
    Layout {
        name: "Bth",
        size_bytes: 12,
        endian: Big,
        doc: "InfiniBand base transport header with MRC opcodes.",
        fields: &[
            f("opcode", 0, 8, "MRC opcode (bth_opcode)."),
            f("se", 8, 1, "Solicited event."),
            f("m", 9, 1, "Migration (0)."),
            f("pad_count", 10, 2, "Pad count (0)."),
            f("tver", 12, 4, "Transport version (0)."),
            f("pkey", 16, 16, "Partition key (0xFFFF)."),
            f("fecn", 32, 1, "FECN."),
            f("becn", 33, 1, "BECN."),
            f("rsvd0", 34, 6, "Reserved (0)."),
            f("dest_qpn", 40, 24, "Destination QP number."),
            f("ack_req", 64, 1, "Acknowledge request."),
            f("rsvd1", 65, 7, "Reserved (0)."),
            f(
                "psn",
                72,
                24,
                "Packet sequence number (24-bit wrap-around).",
            ),
        ],
    },
    Layout {
        name: "Mrh",
        size_bytes: 4,
        endian: Big,
        doc: "MRC header.",
        fields: &[
            f("version", 0, 4, "MRC wire version (1)."),
            f("ev_format", 4, 2, "EV format (ev_format)."),
            f("rsvd0", 6, 2, "Reserved (0)."),
            f("evx", 8, 1, "EVX present."),
            f("tsx", 9, 1, "TSX present."),
            f("trimmed", 10, 1, "A switch trimmed the payload."),
            f("trimmed_last_hop", 11, 1, "Trimmed at the last hop."),
            f("retransmit", 12, 1, "Retransmission."),
            f("rsvd1", 13, 3, "Reserved (0)."),
            f("msn", 16, 16, "Message sequence number."),
        ],
    },
    Layout {
        name: "Evx",
        size_bytes: 8,
        endian: Big,
        doc: "EV extension.",
        fields: &[
            f("ev_index", 0, 16, "EV index in the sender's per-QP table."),
            f("plane", 16, 8, "Plane the packet left on."),
            f("rsvd", 24, 8, "Reserved (0)."),
            f("ev_value", 32, 32, "EV value (SRv6: route index)."),
        ],
    },
    Layout {
        name: "Tsx",
        size_bytes: 8,
        endian: Big,
        doc: "Timestamp extension.",
        fields: &[
            f("tx_ts", 0, 32, "Tx timestamp, ns, low 32 bits."),
            f(
                "echo_ts",
                32,
                32,
                "Echoed tx timestamp (ACK/NACK/probe reply), else 0.",
            ),
        ],
    },
    Layout {
        name: "Reth",
        size_bytes: 16,
        endian: Big,
        doc: "RDMA extended transport header (every write packet).",
        fields: &[
            f(
                "va",
                0,
                64,
                "Remote virtual address of this packet's payload.",
            ),
            f("rkey", 64, 32, "Remote key."),
            f("dma_len", 96, 32, "This packet's payload bytes."),
        ],
    },
    Layout {
        name: "ImmDt",
        size_bytes: 4,
        endian: Big,
        doc: "Immediate data.",
        fields: &[f("imm", 0, 32, "Immediate data.")],
    },
    Layout {
        name: "Ackx",
        size_bytes: 24,
        endian: Big,
        doc: "ACK extension with 64-bit SACK.",
        fields: &[
            f("rsvd0", 0, 8, "Reserved (0)."),
            f("cum_psn", 8, 24, "Every PSN before it has been received."),
            f("rsvd1", 32, 8, "Reserved (0)."),
            f("sack_base", 40, 24, "PSN of bitmap bit 0."),
            f(
                "sack_bitmap",
                64,
                64,
                "Bit i (LSB = 0) set: PSN base+i received.",
            ),
            f(
                "ev_index",
                128,
                16,
                "EV index of the triggering data packet.",
            ),
            f("plane", 144, 8, "Plane of that packet."),
            f(
                "ecn_plane_mask",
                152,
                8,
                "Bit p: CE seen on plane p since the last ACK.",
            ),
            f("ce_count", 160, 16, "CE-marked data packets covered."),
            f("pkt_count", 176, 16, "Data packets covered."),
        ],
    },
    Layout {
        name: "Nackx",
        size_bytes: 16,
        endian: Big,
        doc: "NACK extension.",
        fields: &[
            f("reason", 0, 8, "NACK reason (nack_reason)."),
            f("psn", 8, 24, "NACKed PSN."),
            f("rsvd0", 32, 8, "Reserved (0)."),
            f("cum_psn", 40, 24, "Cumulative PSN."),
            f("ev_index", 64, 16, "EV index of the NACKed packet."),
            f("plane", 80, 8, "Plane of the NACKed packet."),
            f("rsvd1", 88, 8, "Reserved (0)."),
            f("rsvd2", 96, 32, "Reserved (0)."),
        ],
    },
    Layout {
        name: "Prbx",
        size_bytes: 8,
        endian: Big,
        doc: "EV probe / probe reply extension.",
        fields: &[
            f("probe_id", 0, 32, "Probe id."),
            f("ev_index", 32, 16, "EV index probed."),
            f("plane", 48, 8, "Plane."),
            f("rsvd", 56, 8, "Reserved (0)."),
        ],
    },
];

const _: () = {
    let mut i = 0;
    while i < WIRE_LAYOUTS.len() {
        assert!(WIRE_LAYOUTS[i].is_well_formed());
        i += 1;
    }
};

// The tables above must describe the headers the codec in `crate::wire` actually reads and writes.
const _: () = {
    use crate::wire::{bth, ethernet, ipv6, mrc, srh, udp};
    let expect: [(usize, usize); 13] = [
        (ethernet::HEADER_LEN, 0),
        (ipv6::HEADER_LEN, 1),
        (srh::FIXED_LEN, 2),
        (udp::HEADER_LEN, 3),
        (bth::HEADER_LEN, 4),
        (mrc::MRH_LEN, 5),
        (mrc::EVX_LEN, 6),
        (mrc::TSX_LEN, 7),
        (mrc::RETH_LEN, 8),
        (mrc::IMMDT_LEN, 9),
        (mrc::ACKX_LEN, 10),
        (mrc::NACKX_LEN, 11),
        (mrc::PRBX_LEN, 12),
    ];
    let mut i = 0;
    while i < expect.len() {
        assert!(
            WIRE_LAYOUTS[expect[i].1].size_bytes as usize == expect[i].0,
            "wire layout size differs from the codec"
        );
        i += 1;
    }
};
