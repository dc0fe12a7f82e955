//! The tables of device structures and register blocks.

use super::{Layout, RegisterBlockInfo};
use crate::device::admin::{self, body};
use crate::device::regs::{self, defaults, BlockType};
use crate::device::{cqe, csr, doorbell, rxh, txh, wqe};

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
    rxh::RxhEntry::LAYOUT,
    rxh::RxhVerdict::LAYOUT,
    txh::TxhHeader::LAYOUT,
    txh::TxhWrite::LAYOUT,
    txh::TxhAck::LAYOUT,
    txh::TxhNack::LAYOUT,
    txh::TxhProbe::LAYOUT,
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
