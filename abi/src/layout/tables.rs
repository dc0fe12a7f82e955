//! The tables themselves.

use super::Endian::Big;
use super::{Constant, EnumGroup, Field, Layout, RegisterBlockInfo};
use crate::device::admin::{
    self, body, AdminStatus, EvProfileKind, EvProfileState, FwUpdateState, Opcode, QpState,
};
use crate::device::cqe::{self, CqeOpcode, CqeStatus};
use crate::device::event::{CqErrorReason, EventKind, FwEventCode};
use crate::device::regs::{self, defaults, BlockType};
use crate::device::{csr, doorbell, version, wqe, EvEncoding, EvState};

const fn f(name: &'static str, offset_bits: u32, width_bits: u32, doc: &'static str) -> Field {
    Field::new(name, offset_bits, width_bits, doc)
}

/// Every little-endian device structure.
pub const LAYOUTS: &[Layout] = &[
    regs::BlockHeader::LAYOUT,
    regs::DeviceBlock::LAYOUT,
    regs::QueueBlock::LAYOUT,
    regs::DoorbellBlock::LAYOUT,
    regs::PortRegs::LAYOUT,
    regs::PortBlock::LAYOUT,
    regs::FwBlock::LAYOUT,
    doorbell::DoorbellPage::LAYOUT,
    wqe::Sge::LAYOUT,
    wqe::SendWqe::LAYOUT,
    wqe::RecvWqe::LAYOUT,
    cqe::Cqe::LAYOUT,
    crate::device::event::EventRecord::LAYOUT,
    admin::AdminCmd::LAYOUT,
    admin::AdminResp::LAYOUT,
    body::ObjectId::LAYOUT,
    body::RegMr::LAYOUT,
    body::CreateCq::LAYOUT,
    body::CreateQp::LAYOUT,
    body::QpInit::LAYOUT,
    body::QpRtr::LAYOUT,
    body::QpRts::LAYOUT,
    body::QpReset::LAYOUT,
    body::PortAdmin::LAYOUT,
    body::EvFormatProfile::LAYOUT,
    body::EvProfile::LAYOUT,
    body::EvRef::LAYOUT,
    body::ReplaceEv::LAYOUT,
    body::ProbeEv::LAYOUT,
    body::CcProfile::LAYOUT,
    body::FwBegin::LAYOUT,
    body::FwChunk::LAYOUT,
    csr::CsrQueueRegs::LAYOUT,
    csr::AckSummary::LAYOUT,
    csr::NackEntry::LAYOUT,
    csr::TxDone::LAYOUT,
    csr::WimmPlaced::LAYOUT,
    csr::ProbeReply::LAYOUT,
    csr::PortEventEntry::LAYOUT,
    csr::RxDrops::LAYOUT,
    csr::Retransmit::LAYOUT,
    csr::EvUpdate::LAYOUT,
    csr::SendProbe::LAYOUT,
    csr::WindowUpdate::LAYOUT,
    csr::PostCqe::LAYOUT,
    csr::PostEvent::LAYOUT,
];

/// The register blocks of BAR0.
pub const REGISTER_BLOCKS: &[RegisterBlockInfo] = &[
    RegisterBlockInfo {
        block_type: BlockType::Device as u16,
        name: "DEVICE",
        layout: &regs::DeviceBlock::LAYOUT,
        default_offset: defaults::DEVICE,
    },
    RegisterBlockInfo {
        block_type: BlockType::AdminQueue as u16,
        name: "ADMIN_QUEUE",
        layout: &regs::QueueBlock::LAYOUT,
        default_offset: defaults::ADMIN_QUEUE,
    },
    RegisterBlockInfo {
        block_type: BlockType::EventQueue as u16,
        name: "EVENT_QUEUE",
        layout: &regs::QueueBlock::LAYOUT,
        default_offset: defaults::EVENT_QUEUE,
    },
    RegisterBlockInfo {
        block_type: BlockType::Doorbell as u16,
        name: "DOORBELL",
        layout: &regs::DoorbellBlock::LAYOUT,
        default_offset: defaults::DOORBELL,
    },
    RegisterBlockInfo {
        block_type: BlockType::Port as u16,
        name: "PORT",
        layout: &regs::PortBlock::LAYOUT,
        default_offset: defaults::PORT,
    },
    RegisterBlockInfo {
        block_type: BlockType::Firmware as u16,
        name: "FIRMWARE",
        layout: &regs::FwBlock::LAYOUT,
        default_offset: defaults::FIRMWARE,
    },
];

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

macro_rules! c {
    ($g:literal, $n:literal, $v:expr, $d:literal) => {
        Constant {
            group: $g,
            name: $n,
            value: $v as u64,
            doc: $d,
        }
    };
}

/// Constant groups generated as enumerations.
pub const ENUMS: &[EnumGroup] = &[
    EnumGroup {
        group: "bth_opcode",
        width_bits: 8,
        doc: "BTH opcodes of MRC packets.",
    },
    EnumGroup {
        group: "nack_reason",
        width_bits: 8,
        doc: "NACKX reasons.",
    },
    EnumGroup {
        group: "ev_format",
        width_bits: 2,
        doc: "EV formats (MRH field, EV format profiles).",
    },
    EnumGroup {
        group: "ev_state",
        width_bits: 8,
        doc: "Per-EV states.",
    },
    EnumGroup {
        group: "block_type",
        width_bits: 16,
        doc: "Register block types.",
    },
    EnumGroup {
        group: "send_opcode",
        width_bits: 8,
        doc: "Send WQE opcodes.",
    },
    EnumGroup {
        group: "cqe_status",
        width_bits: 8,
        doc: "Completion status.",
    },
    EnumGroup {
        group: "cqe_opcode",
        width_bits: 8,
        doc: "Completion opcodes.",
    },
    EnumGroup {
        group: "event_kind",
        width_bits: 8,
        doc: "Async event kinds.",
    },
    EnumGroup {
        group: "cq_error_reason",
        width_bits: 8,
        doc: "CQ error reasons.",
    },
    EnumGroup {
        group: "fw_event",
        width_bits: 8,
        doc: "Firmware event codes.",
    },
    EnumGroup {
        group: "admin_opcode",
        width_bits: 8,
        doc: "Admin command opcodes.",
    },
    EnumGroup {
        group: "admin_status",
        width_bits: 8,
        doc: "Admin response status.",
    },
    EnumGroup {
        group: "qp_state",
        width_bits: 8,
        doc: "QP states.",
    },
    EnumGroup {
        group: "ev_profile_kind",
        width_bits: 8,
        doc: "EV profile kinds.",
    },
    EnumGroup {
        group: "ev_profile_state",
        width_bits: 8,
        doc: "EV profile states.",
    },
    EnumGroup {
        group: "fw_update_state",
        width_bits: 8,
        doc: "Firmware update states.",
    },
    EnumGroup {
        group: "csr_kind",
        width_bits: 8,
        doc: "CSR queue entry kinds.",
    },
];

/// Every named constant.
pub const CONSTANTS: &[Constant] = &[
    c!("wire", "UDP_PORT", 4791, "UDP destination port of MRC."),
    c!("wire", "ETHERTYPE_IPV6", 0x86DD, "EtherType of IPv6."),
    c!(
        "wire",
        "WIRE_VERSION",
        version::WIRE_VERSION,
        "MRH version."
    ),
    c!("wire", "NH_UDP", 17, "IPv6 next header: UDP."),
    c!(
        "wire",
        "NH_IPV6",
        41,
        "IPv6 next header: IPv6 (SRv6 inner header)."
    ),
    c!(
        "wire",
        "NH_ROUTING",
        43,
        "IPv6 next header: routing header (SRH)."
    ),
    c!("wire", "SRH_ROUTING_TYPE", 4, "SRH routing type."),
    c!("wire", "DEFAULT_PKEY", 0xFFFF, "BTH P_Key."),
    c!(
        "wire",
        "USID_BLOCK",
        0xFCBB_BB00u32,
        "Default SRv6 uSID locator block (fcbb:bb00::/32)."
    ),
    c!(
        "wire",
        "STEV_PORT_PREFIX",
        0xC000,
        "STEV source port prefix (top 4 bits 0xC)."
    ),
    c!("bth_opcode", "WRITE_FIRST", 0xC0, "RETH, payload."),
    c!("bth_opcode", "WRITE_MIDDLE", 0xC1, "RETH, payload."),
    c!("bth_opcode", "WRITE_LAST", 0xC2, "RETH, payload."),
    c!(
        "bth_opcode",
        "WRITE_LAST_IMM",
        0xC3,
        "RETH, ImmDt, payload."
    ),
    c!("bth_opcode", "WRITE_ONLY", 0xC4, "RETH, payload."),
    c!(
        "bth_opcode",
        "WRITE_ONLY_IMM",
        0xC5,
        "RETH, ImmDt, payload."
    ),
    c!("bth_opcode", "ACK", 0xD0, "ACKX."),
    c!("bth_opcode", "NACK", 0xD1, "NACKX."),
    c!("bth_opcode", "EV_PROBE", 0xD2, "PRBX."),
    c!("bth_opcode", "EV_PROBE_REPLY", 0xD3, "PRBX."),
    c!(
        "nack_reason",
        "TRIMMED",
        1,
        "Payload trimmed in the fabric: retransmit, keep the EV."
    ),
    c!(
        "nack_reason",
        "TRIMMED_LAST_HOP",
        2,
        "Trimmed at the last hop (incast): retransmit, keep the EV."
    ),
    c!(
        "nack_reason",
        "OUT_OF_WINDOW",
        3,
        "PSN outside the responder's window."
    ),
    c!(
        "nack_reason",
        "REMOTE_ACCESS",
        4,
        "Bad rkey or range: fatal for the QP."
    ),
    c!(
        "nack_reason",
        "LENGTH",
        5,
        "RETH length does not match the payload: fatal for the QP."
    ),
    c!(
        "nack_reason",
        "NO_RECV_BUFFER",
        6,
        "Write-with-Immediate without a posted receive: fatal."
    ),
    c!(
        "nack_reason",
        "INVALID_QP",
        7,
        "QP unknown or not in RTR/RTS."
    ),
    c!(
        "nack_reason",
        "TOO_MANY_WIMM",
        8,
        "More Write-with-Immediate in flight than negotiated."
    ),
    c!(
        "ev_format",
        "UDP",
        EvEncoding::Udp,
        "EV in the UDP source port."
    ),
    c!(
        "ev_format",
        "STEV",
        EvEncoding::Stev,
        "Structured EV: flow label + source port."
    ),
    c!("ev_format", "SRV6", EvEncoding::Srv6, "SRv6 uSID carrier."),
    c!("ev_state", "GOOD", EvState::Good, "Usable."),
    c!("ev_state", "SKIP", EvState::Skip, "Skipped once."),
    c!(
        "ev_state",
        "ASSUMED_BAD",
        EvState::AssumedBad,
        "Retired after a loss."
    ),
    c!(
        "ev_state",
        "DENIED",
        EvState::Denied,
        "Denied by the controller."
    ),
    c!(
        "abi",
        "ABI_VERSION_MAJOR",
        version::ABI_VERSION.major,
        "ABI major version."
    ),
    c!(
        "abi",
        "ABI_VERSION_MINOR",
        version::ABI_VERSION.minor,
        "ABI minor version."
    ),
    c!(
        "abi",
        "ABI_VERSION",
        version::ABI_VERSION.to_u32(),
        "DEVICE abi_version register value."
    ),
    c!(
        "abi",
        "DEVICE_MAGIC",
        regs::DEVICE_MAGIC,
        "DEVICE magic (\"MRC1\")."
    ),
    c!(
        "abi",
        "BLOCK_VERSION",
        regs::BLOCK_VERSION,
        "Version of every register block."
    ),
    c!(
        "abi",
        "MAX_PORTS",
        regs::MAX_PORTS,
        "Ports in the PORT block."
    ),
    c!(
        "abi",
        "MAX_SEND_SGE",
        wqe::MAX_SEND_SGE,
        "SGEs in a send WQE."
    ),
    c!(
        "abi",
        "DOORBELL_PAGE_BYTES",
        doorbell::PAGE_BYTES,
        "Doorbell page size."
    ),
    c!(
        "abi",
        "CSR_ENTRY_BYTES",
        csr::ENTRY_BYTES,
        "CSR queue entry size."
    ),
    c!(
        "abi",
        "ADMIN_BODY_BYTES",
        admin::BODY_BYTES,
        "Admin command body size."
    ),
    c!(
        "abi",
        "FW_IMAGE_MAGIC",
        admin::FW_IMAGE_MAGIC,
        "Firmware image magic (\"MRCF\")."
    ),
    c!(
        "abi",
        "RETRY_FOREVER",
        admin::RETRY_FOREVER,
        "Retry count meaning retry forever."
    ),
    c!(
        "abi",
        "MAX_ACK_TIMEOUT_EXP",
        admin::MAX_ACK_TIMEOUT_EXP,
        "Largest ACK timeout exponent."
    ),
    c!(
        "abi",
        "MAX_EVS_PER_PROFILE",
        admin::MAX_EVS_PER_PROFILE,
        "EVs in one EV profile at most."
    ),
    c!("block_type", "DEVICE", BlockType::Device, "DEVICE block."),
    c!(
        "block_type",
        "ADMIN_QUEUE",
        BlockType::AdminQueue,
        "ADMIN queue block."
    ),
    c!(
        "block_type",
        "EVENT_QUEUE",
        BlockType::EventQueue,
        "EVENT queue block."
    ),
    c!(
        "block_type",
        "DOORBELL",
        BlockType::Doorbell,
        "DOORBELL block."
    ),
    c!("block_type", "PORT", BlockType::Port, "PORT block."),
    c!("block_type", "FIRMWARE", BlockType::Firmware, "FW block."),
    c!(
        "bar0",
        "DEVICE",
        defaults::DEVICE,
        "Reference offset of the DEVICE block."
    ),
    c!(
        "bar0",
        "ADMIN_QUEUE",
        defaults::ADMIN_QUEUE,
        "Reference offset of the ADMIN queue block."
    ),
    c!(
        "bar0",
        "EVENT_QUEUE",
        defaults::EVENT_QUEUE,
        "Reference offset of the EVENT queue block."
    ),
    c!(
        "bar0",
        "DOORBELL",
        defaults::DOORBELL,
        "Reference offset of the DOORBELL block."
    ),
    c!(
        "bar0",
        "PORT",
        defaults::PORT,
        "Reference offset of the PORT block."
    ),
    c!(
        "bar0",
        "FIRMWARE",
        defaults::FIRMWARE,
        "Reference offset of the FW block."
    ),
    c!(
        "bar0",
        "LOG_RING",
        defaults::LOG_RING,
        "Reference offset of the firmware log ring."
    ),
    c!(
        "bar0",
        "LOG_RING_BYTES",
        defaults::LOG_RING_BYTES,
        "Log ring size."
    ),
    c!(
        "bar0",
        "CRASH_RECORD",
        defaults::CRASH_RECORD,
        "Reference offset of the crash record."
    ),
    c!(
        "bar0",
        "CRASH_RECORD_BYTES",
        defaults::CRASH_RECORD_BYTES,
        "Crash record size."
    ),
    c!(
        "bar0",
        "DOORBELL_PAGES",
        defaults::DOORBELL_PAGES,
        "Reference offset of doorbell page 0."
    ),
    c!(
        "bar0",
        "DOORBELL_STRIDE",
        defaults::DOORBELL_STRIDE,
        "Doorbell page stride."
    ),
    c!("dev_status", "READY", regs::status::READY, "Device ready."),
    c!(
        "dev_status",
        "FATAL",
        regs::status::FATAL,
        "Fatal error (code in bits 31:16)."
    ),
    c!(
        "dev_status",
        "RESETTING",
        regs::status::RESETTING,
        "Reset in progress."
    ),
    c!(
        "dev_control",
        "RESET",
        regs::control::RESET,
        "Write 1 to reset (self-clearing)."
    ),
    c!(
        "dev_control",
        "IRQ_ENABLE",
        regs::control::IRQ_ENABLE,
        "Enable interrupts."
    ),
    c!("dev_caps", "EV_UDP", regs::caps::EV_UDP, "UDP EVs."),
    c!(
        "dev_caps",
        "EV_STEV",
        regs::caps::EV_STEV,
        "Structured EVs."
    ),
    c!("dev_caps", "EV_SRV6", regs::caps::EV_SRV6, "SRv6 uSID EVs."),
    c!("dev_caps", "SRH", regs::caps::SRH, "SRv6 with SRH."),
    c!("dev_caps", "TSX", regs::caps::TSX, "Timestamp extension."),
    c!(
        "dev_caps",
        "DYNAMIC_MPR",
        regs::caps::DYNAMIC_MPR,
        "Dynamic responder MPR."
    ),
    c!(
        "dev_caps",
        "FW_UPDATE",
        regs::caps::FW_UPDATE,
        "Firmware update."
    ),
    c!(
        "doorbell",
        "SQ_PRODUCER_OFFSET",
        doorbell::SQ_PRODUCER_OFFSET,
        "SQ producer doorbell offset in the page."
    ),
    c!(
        "doorbell",
        "RQ_PRODUCER_OFFSET",
        doorbell::RQ_PRODUCER_OFFSET,
        "RQ producer doorbell offset in the page."
    ),
    c!(
        "doorbell",
        "CQ_DOORBELL_OFFSET",
        doorbell::CQ_DOORBELL_OFFSET,
        "CQ doorbell offset in the page."
    ),
    c!("doorbell", "CQ_ARM", doorbell::CQ_ARM, "CQ doorbell: arm."),
    c!(
        "doorbell",
        "CQ_ARM_SOLICITED",
        doorbell::CQ_ARM_SOLICITED,
        "CQ doorbell: solicited only."
    ),
    c!(
        "doorbell",
        "CQ_CONSUMER_MASK",
        doorbell::CQ_CONSUMER_MASK,
        "CQ doorbell: consumer index bits."
    ),
    c!(
        "send_opcode",
        "WRITE",
        wqe::SendOpcode::Write,
        "RDMA Write."
    ),
    c!(
        "send_opcode",
        "WRITE_IMM",
        wqe::SendOpcode::WriteImm,
        "RDMA Write with Immediate."
    ),
    c!(
        "send_flag",
        "SIGNALED",
        wqe::SEND_SIGNALED,
        "Complete with a CQE."
    ),
    c!(
        "send_flag",
        "SOLICITED",
        wqe::SEND_SOLICITED,
        "Set SE on the last packet."
    ),
    c!(
        "send_flag",
        "FENCE",
        wqe::SEND_FENCE,
        "Wait for earlier requests."
    ),
    c!("cqe_status", "SUCCESS", CqeStatus::Success, "Completed."),
    c!(
        "cqe_status",
        "LOCAL_LENGTH",
        CqeStatus::LocalLength,
        "Local length error."
    ),
    c!(
        "cqe_status",
        "LOCAL_QP_OPERATION",
        CqeStatus::LocalQpOperation,
        "Local QP operation error."
    ),
    c!(
        "cqe_status",
        "LOCAL_PROTECTION",
        CqeStatus::LocalProtection,
        "Local protection error."
    ),
    c!(
        "cqe_status",
        "WR_FLUSHED",
        CqeStatus::WrFlushed,
        "Flushed (QP in ERROR)."
    ),
    c!(
        "cqe_status",
        "LOCAL_ACCESS",
        CqeStatus::LocalAccess,
        "Local access error."
    ),
    c!(
        "cqe_status",
        "REMOTE_ACCESS",
        CqeStatus::RemoteAccess,
        "Remote access error."
    ),
    c!(
        "cqe_status",
        "REMOTE_LENGTH",
        CqeStatus::RemoteLength,
        "Remote length error."
    ),
    c!(
        "cqe_status",
        "REMOTE_NO_RECV_BUFFER",
        CqeStatus::RemoteNoRecvBuffer,
        "No receive posted at the responder."
    ),
    c!(
        "cqe_status",
        "REMOTE_INVALID_REQUEST",
        CqeStatus::RemoteInvalidRequest,
        "Responder rejected the request."
    ),
    c!(
        "cqe_status",
        "RETRY_EXCEEDED",
        CqeStatus::RetryExceeded,
        "Retry count exceeded."
    ),
    c!(
        "cqe_status",
        "RECV_QUEUE_OVERFLOW",
        CqeStatus::RecvQueueOverflow,
        "Receive queue overflow."
    ),
    c!(
        "cqe_status",
        "FATAL",
        CqeStatus::Fatal,
        "Fatal device error."
    ),
    c!("cqe_opcode", "WRITE", CqeOpcode::Write, "Send-side Write."),
    c!(
        "cqe_opcode",
        "WRITE_IMM",
        CqeOpcode::WriteImm,
        "Send-side Write with Immediate."
    ),
    c!(
        "cqe_opcode",
        "RECV_WRITE_IMM",
        CqeOpcode::RecvWriteImm,
        "Receive consumed by a Write with Immediate."
    ),
    c!("cqe_flag", "OWNER", cqe::CQE_OWNER, "Owner (phase) bit."),
    c!("cqe_flag", "SOLICITED", cqe::CQE_SOLICITED, "Solicited."),
    c!(
        "event_kind",
        "QP_FATAL",
        EventKind::QpFatal,
        "QP entered ERROR."
    ),
    c!("event_kind", "CQ_ERROR", EventKind::CqError, "CQ failed."),
    c!("event_kind", "PORT_UP", EventKind::PortUp, "Port up."),
    c!("event_kind", "PORT_DOWN", EventKind::PortDown, "Port down."),
    c!(
        "event_kind",
        "EV_STATE_CHANGE",
        EventKind::EvStateChange,
        "EV state changed."
    ),
    c!(
        "event_kind",
        "EV_PROBE_RESULT",
        EventKind::EvProbeResult,
        "EV probe finished."
    ),
    c!(
        "event_kind",
        "DEVICE_FATAL",
        EventKind::DeviceFatal,
        "Device fatal error."
    ),
    c!(
        "event_kind",
        "FIRMWARE",
        EventKind::Firmware,
        "Firmware event."
    ),
    c!(
        "cq_error_reason",
        "OVERFLOW",
        CqErrorReason::Overflow,
        "CQ overflow."
    ),
    c!(
        "cq_error_reason",
        "ACCESS_ERROR",
        CqErrorReason::AccessError,
        "CQ DMA error."
    ),
    c!(
        "fw_event",
        "UPDATE_COMMITTED",
        FwEventCode::UpdateCommitted,
        "Update committed."
    ),
    c!(
        "fw_event",
        "UPDATE_PENDING_CONFIRM",
        FwEventCode::UpdatePendingConfirm,
        "New image awaits confirmation."
    ),
    c!(
        "fw_event",
        "ROLLED_BACK",
        FwEventCode::RolledBack,
        "Rolled back."
    ),
    c!(
        "fw_event",
        "CRASH_RECORDED",
        FwEventCode::CrashRecorded,
        "Crash record available."
    ),
    c!(
        "fw_event",
        "LOG_OVERFLOW",
        FwEventCode::LogOverflow,
        "Log ring overflowed."
    ),
    c!(
        "admin_opcode",
        "QUERY_DEVICE",
        Opcode::QueryDevice,
        "Query device limits."
    ),
    c!(
        "admin_opcode",
        "ALLOC_PD",
        Opcode::AllocPd,
        "Allocate a PD."
    ),
    c!(
        "admin_opcode",
        "DEALLOC_PD",
        Opcode::DeallocPd,
        "Free a PD."
    ),
    c!(
        "admin_opcode",
        "REG_MR",
        Opcode::RegMr,
        "Register a memory region."
    ),
    c!(
        "admin_opcode",
        "DEREG_MR",
        Opcode::DeregMr,
        "Deregister a memory region."
    ),
    c!(
        "admin_opcode",
        "CREATE_CQ",
        Opcode::CreateCq,
        "Create a CQ."
    ),
    c!(
        "admin_opcode",
        "DESTROY_CQ",
        Opcode::DestroyCq,
        "Destroy a CQ."
    ),
    c!(
        "admin_opcode",
        "CREATE_QP",
        Opcode::CreateQp,
        "Create a QP."
    ),
    c!(
        "admin_opcode",
        "MODIFY_QP",
        Opcode::ModifyQp,
        "Move a QP to another state."
    ),
    c!("admin_opcode", "QUERY_QP", Opcode::QueryQp, "Query a QP."),
    c!(
        "admin_opcode",
        "DESTROY_QP",
        Opcode::DestroyQp,
        "Destroy a QP."
    ),
    c!(
        "admin_opcode",
        "SET_PORT_ADMIN_STATE",
        Opcode::SetPortAdminState,
        "Port admin up/down."
    ),
    c!(
        "admin_opcode",
        "QUERY_PORT",
        Opcode::QueryPort,
        "Query a port."
    ),
    c!(
        "admin_opcode",
        "CREATE_EV_FORMAT_PROFILE",
        Opcode::CreateEvFormatProfile,
        "Create an EV format profile."
    ),
    c!(
        "admin_opcode",
        "MODIFY_EV_FORMAT_PROFILE",
        Opcode::ModifyEvFormatProfile,
        "Modify an EV format profile."
    ),
    c!(
        "admin_opcode",
        "DESTROY_EV_FORMAT_PROFILE",
        Opcode::DestroyEvFormatProfile,
        "Destroy an EV format profile."
    ),
    c!(
        "admin_opcode",
        "CREATE_EV_PROFILE",
        Opcode::CreateEvProfile,
        "Create an EV profile."
    ),
    c!(
        "admin_opcode",
        "MODIFY_EV_PROFILE",
        Opcode::ModifyEvProfile,
        "Modify an EV profile."
    ),
    c!(
        "admin_opcode",
        "DESTROY_EV_PROFILE",
        Opcode::DestroyEvProfile,
        "Destroy an EV profile."
    ),
    c!(
        "admin_opcode",
        "DENY_EV",
        Opcode::DenyEv,
        "Deny or allow an EV."
    ),
    c!(
        "admin_opcode",
        "REPLACE_EV",
        Opcode::ReplaceEv,
        "Set an EV of an EXPLICIT profile."
    ),
    c!("admin_opcode", "QUERY_EV", Opcode::QueryEv, "Query an EV."),
    c!("admin_opcode", "PROBE_EV", Opcode::ProbeEv, "Probe an EV."),
    c!(
        "admin_opcode",
        "CREATE_CC_PROFILE",
        Opcode::CreateCcProfile,
        "Create a CC profile."
    ),
    c!(
        "admin_opcode",
        "MODIFY_CC_PROFILE",
        Opcode::ModifyCcProfile,
        "Modify a CC profile."
    ),
    c!(
        "admin_opcode",
        "DESTROY_CC_PROFILE",
        Opcode::DestroyCcProfile,
        "Destroy a CC profile."
    ),
    c!(
        "admin_opcode",
        "FW_STATUS",
        Opcode::FwStatus,
        "Firmware status."
    ),
    c!(
        "admin_opcode",
        "FW_BEGIN",
        Opcode::FwBegin,
        "Begin a firmware update."
    ),
    c!(
        "admin_opcode",
        "FW_CHUNK",
        Opcode::FwChunk,
        "Transfer an image chunk."
    ),
    c!(
        "admin_opcode",
        "FW_COMMIT",
        Opcode::FwCommit,
        "Verify and commit the image."
    ),
    c!(
        "admin_opcode",
        "FW_CONFIRM",
        Opcode::FwConfirm,
        "Confirm the running image."
    ),
    c!(
        "admin_opcode",
        "FW_ROLLBACK",
        Opcode::FwRollback,
        "Roll back to the previous image."
    ),
    c!("admin_status", "OK", AdminStatus::Ok, "Done."),
    c!(
        "admin_status",
        "UNKNOWN_OPCODE",
        AdminStatus::UnknownOpcode,
        "Unknown opcode."
    ),
    c!(
        "admin_status",
        "RESERVED_SET",
        AdminStatus::ReservedSet,
        "Reserved field set (syndrome: byte offset)."
    ),
    c!(
        "admin_status",
        "BAD_ATTRIBUTE",
        AdminStatus::BadAttribute,
        "Bad attribute (syndrome: byte offset)."
    ),
    c!(
        "admin_status",
        "NO_RESOURCES",
        AdminStatus::NoResources,
        "Out of resources."
    ),
    c!(
        "admin_status",
        "NOT_FOUND",
        AdminStatus::NotFound,
        "No such object."
    ),
    c!(
        "admin_status",
        "BAD_STATE",
        AdminStatus::BadState,
        "Wrong state."
    ),
    c!(
        "admin_status",
        "IN_USE",
        AdminStatus::InUse,
        "Object in use."
    ),
    c!("admin_status", "BUSY", AdminStatus::Busy, "Busy, retry."),
    c!(
        "admin_status",
        "PERMISSION",
        AdminStatus::Permission,
        "Not permitted."
    ),
    c!(
        "admin_status",
        "FW_IMAGE_INVALID",
        AdminStatus::FwImageInvalid,
        "Image failed verification."
    ),
    c!(
        "admin_status",
        "FW_NO_UPDATE",
        AdminStatus::FwNoUpdate,
        "No update in progress."
    ),
    c!(
        "admin_status",
        "INTERNAL",
        AdminStatus::Internal,
        "Internal error."
    ),
    c!(
        "admin_flag",
        "CMD_IRQ",
        admin::CMD_IRQ,
        "Command: interrupt on completion."
    ),
    c!(
        "admin_flag",
        "RESP_OWNER",
        admin::RESP_OWNER,
        "Response: owner bit."
    ),
    c!(
        "admin_flag",
        "ACCESS_LOCAL_WRITE",
        admin::ACCESS_LOCAL_WRITE,
        "MR: local write."
    ),
    c!(
        "admin_flag",
        "ACCESS_REMOTE_WRITE",
        admin::ACCESS_REMOTE_WRITE,
        "MR: remote write."
    ),
    c!(
        "admin_flag",
        "HINT_LATENCY",
        admin::HINT_LATENCY,
        "QP hint: latency sensitive."
    ),
    c!(
        "admin_flag",
        "HINT_BULK",
        admin::HINT_BULK,
        "QP hint: bulk."
    ),
    c!(
        "admin_flag",
        "RTR_DYNAMIC_MPR",
        admin::RTR_DYNAMIC_MPR,
        "RTR: dynamic MPR."
    ),
    c!(
        "admin_flag",
        "FMT_USE_SRH",
        admin::FMT_USE_SRH,
        "EV format: use an SRH."
    ),
    c!(
        "admin_flag",
        "FMT_TSX",
        admin::FMT_TSX,
        "EV format: send TSX."
    ),
    c!(
        "admin_flag",
        "EVENT_MASK_EV_BAD",
        admin::EVENT_MASK_EV_BAD,
        "Report EVs going bad."
    ),
    c!(
        "admin_flag",
        "EVENT_MASK_EV_GOOD",
        admin::EVENT_MASK_EV_GOOD,
        "Report EVs recovering."
    ),
    c!(
        "admin_flag",
        "EVENT_MASK_EV_DENIED",
        admin::EVENT_MASK_EV_DENIED,
        "Report denied EVs."
    ),
    c!(
        "admin_flag",
        "EVENT_MASK_MIN_ACTIVE",
        admin::EVENT_MASK_MIN_ACTIVE,
        "Report too few usable EVs."
    ),
    c!(
        "admin_flag",
        "EVENT_MASK_PROBE",
        admin::EVENT_MASK_PROBE,
        "Report probe results."
    ),
    c!("qp_state", "RESET", QpState::Reset, "Reset."),
    c!("qp_state", "INIT", QpState::Init, "Initialised."),
    c!("qp_state", "RTR", QpState::Rtr, "Ready to receive."),
    c!("qp_state", "RTS", QpState::Rts, "Ready to send."),
    c!("qp_state", "ERROR", QpState::Error, "Error."),
    c!(
        "ev_profile_kind",
        "AUTO",
        EvProfileKind::Auto,
        "Device-chosen EVs."
    ),
    c!(
        "ev_profile_kind",
        "EXPLICIT",
        EvProfileKind::Explicit,
        "Controller-supplied EVs."
    ),
    c!(
        "ev_profile_kind",
        "GENERATED",
        EvProfileKind::Generated,
        "Seed-generated EVs."
    ),
    c!(
        "ev_profile_state",
        "INIT",
        EvProfileState::Init,
        "Being configured."
    ),
    c!(
        "ev_profile_state",
        "OFFLINE",
        EvProfileState::Offline,
        "Temporarily unusable."
    ),
    c!(
        "ev_profile_state",
        "ONLINE",
        EvProfileState::Online,
        "In use."
    ),
    c!("fw_update_state", "IDLE", FwUpdateState::Idle, "No update."),
    c!(
        "fw_update_state",
        "RECEIVING",
        FwUpdateState::Receiving,
        "Receiving chunks."
    ),
    c!(
        "fw_update_state",
        "COMMITTED",
        FwUpdateState::Committed,
        "Boots at next reset."
    ),
    c!(
        "fw_update_state",
        "PENDING_CONFIRM",
        FwUpdateState::PendingConfirm,
        "Awaiting confirmation."
    ),
    c!(
        "csr_kind",
        "ACK_SUMMARY",
        csr::CsrKind::AckSummary,
        "DP->FW ACK summary."
    ),
    c!("csr_kind", "NACK", csr::CsrKind::Nack, "DP->FW NACK."),
    c!(
        "csr_kind",
        "TX_DONE",
        csr::CsrKind::TxDone,
        "DP->FW WQE transmitted."
    ),
    c!(
        "csr_kind",
        "WIMM_PLACED",
        csr::CsrKind::WimmPlaced,
        "DP->FW Write-with-Immediate placed."
    ),
    c!(
        "csr_kind",
        "PROBE_REPLY",
        csr::CsrKind::ProbeReply,
        "DP->FW probe reply."
    ),
    c!(
        "csr_kind",
        "PORT_EVENT",
        csr::CsrKind::PortEvent,
        "DP->FW port event."
    ),
    c!(
        "csr_kind",
        "RX_DROPS",
        csr::CsrKind::RxDrops,
        "DP->FW receive drop counters."
    ),
    c!(
        "csr_kind",
        "RETRANSMIT",
        csr::CsrKind::Retransmit,
        "FW->DP retransmit."
    ),
    c!(
        "csr_kind",
        "EV_UPDATE",
        csr::CsrKind::EvUpdate,
        "FW->DP EV table update."
    ),
    c!(
        "csr_kind",
        "SEND_PROBE",
        csr::CsrKind::SendProbe,
        "FW->DP send probe."
    ),
    c!(
        "csr_kind",
        "WINDOW_UPDATE",
        csr::CsrKind::WindowUpdate,
        "FW->DP window update."
    ),
    c!(
        "csr_kind",
        "POST_CQE",
        csr::CsrKind::PostCqe,
        "FW->DP post a CQE."
    ),
    c!(
        "csr_kind",
        "POST_EVENT",
        csr::CsrKind::PostEvent,
        "FW->DP post an event."
    ),
];
