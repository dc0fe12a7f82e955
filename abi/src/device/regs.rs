//! BAR0 register map: a chain of discoverable register blocks (Corundum style).
//!
//! Every block starts with a [`BlockHeader`] `{type u16, version u16, next u32}`; `next` is the
//! BAR0 byte offset of the following block, 0 for the last. The chain starts at offset 0 with the
//! DEVICE block. All registers are 32-bit, little-endian, 4-byte aligned; the host reads and
//! writes them one 32-bit word at a time.
//!
//! [`discover`] walks the chain through a `read32` callback (a volatile MMIO read in the driver, a
//! slice in tests and the simulator) with hard limits: at most [`MAX_BLOCKS`] blocks, every block
//! inside the BAR, `next` strictly increasing (a `next` that points back would form a cycle and is
//! reported as one). Unknown block types are skipped, so a newer device (higher ABI minor) can add
//! blocks; type 0x0000 and 0xFFFF (what a vanished device reads as) are errors.
//!
//! Offsets in the [`defaults`] module are where the reference device (RTL and simulator) puts
//! each block; a host must not assume them and discovers the chain instead.

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromZeros, IntoBytes};

le_struct! {
/// The common header of every register block.
pub struct BlockHeader {
    /// Block type ([`BlockType`]).
    pub block_type: U16,
    /// Block layout version (currently 1 for every block).
    pub version: U16,
    /// BAR0 offset of the next block; 0 = this is the last.
    pub next: U32,
}
}

impl BlockHeader {
    /// A header for a block of `block_type` with version [`BLOCK_VERSION`].
    pub fn new(block_type: BlockType, next: u32) -> Self {
        BlockHeader {
            block_type: U16::new(block_type as u16),
            version: U16::new(BLOCK_VERSION),
            next: U32::new(next),
        }
    }
}

/// Register block types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u16)]
pub enum BlockType {
    /// [`DeviceBlock`]: identity, version, status, reset, capabilities, limits.
    Device = 0x0001,
    /// [`QueueBlock`] of the admin queue.
    AdminQueue = 0x0002,
    /// [`QueueBlock`] of the event queue.
    EventQueue = 0x0003,
    /// [`DoorbellBlock`]: where the doorbell pages are.
    Doorbell = 0x0004,
    /// [`PortBlock`]: per-port state.
    Port = 0x0005,
    /// [`FwBlock`]: firmware slots, log ring, crash record.
    Firmware = 0x0006,
}

impl BlockType {
    /// Every block type, in code order.
    pub const ALL: [BlockType; 6] = [
        Self::Device,
        Self::AdminQueue,
        Self::EventQueue,
        Self::Doorbell,
        Self::Port,
        Self::Firmware,
    ];

    /// The block type with code `v`, if known.
    pub fn from_u16(v: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|t| *t as u16 == v)
    }
}

/// The version every block of this ABI carries.
pub const BLOCK_VERSION: u16 = 1;
/// The DEVICE block magic: "MRC1" in memory order.
pub const DEVICE_MAGIC: u32 = u32::from_le_bytes(*b"MRC1");
/// PCI vendor ID of the simulated MRC NIC: 0x1af4, Red Hat's vendor ID,
/// whose device IDs 0x10f0..=0x10ff QEMU's `docs/specs/pci-ids.rst` sets aside "for
/// experimental usage without registration". A device shipped as a product needs an ID of its
/// own vendor; the simulated NIC takes any through [`DeviceParams::device_id`].
pub const PCI_VENDOR_ID: u16 = 0x1af4;
/// PCI device ID of the simulated MRC NIC: the first of the experimental range 0x10f0..=0x10ff
/// of vendor [`PCI_VENDOR_ID`] (outside virtio's 0x1000..=0x107f, so `virtio-pci` declines it).
pub const PCI_DEVICE_ID: u16 = 0x10f0;
/// [`PCI_VENDOR_ID`] and [`PCI_DEVICE_ID`] as the DEVICE block's `device_id` register reads them
/// (vendor in bits 31:16, device in bits 15:0).
pub const PCI_ID: u32 = (PCI_VENDOR_ID as u32) << 16 | PCI_DEVICE_ID as u32;
/// Most blocks [`discover`] walks before giving up.
pub const MAX_BLOCKS: usize = 32;
/// Ports a [`PortBlock`] describes at most.
pub const MAX_PORTS: usize = 8;

/// DEVICE `status` bits.
pub mod status {
    /// The device finished reset and initialisation; the host may use the queues.
    pub const READY: u32 = 1 << 0;
    /// The device hit a fatal error; `fatal_code` (bits 31:16) says which. Only reset clears it.
    pub const FATAL: u32 = 1 << 1;
    /// A reset is in progress.
    pub const RESETTING: u32 = 1 << 2;
    /// Shift of the 16-bit fatal code.
    pub const FATAL_CODE_SHIFT: u32 = 16;
}

/// DEVICE `control` bits.
pub mod control {
    /// Write 1 to reset the device (self-clearing); wait for `status.READY`.
    pub const RESET: u32 = 1 << 0;
    /// Enable interrupts (MSI-X) from the device.
    pub const IRQ_ENABLE: u32 = 1 << 1;
}

/// DEVICE `capabilities` bits.
pub mod caps {
    /// EV in the UDP source port.
    pub const EV_UDP: u32 = 1 << 0;
    /// Structured EV (flow label + source port).
    pub const EV_STEV: u32 = 1 << 1;
    /// SRv6 uSID carriers.
    pub const EV_SRV6: u32 = 1 << 2;
    /// SRv6 with an SRH segment list.
    pub const SRH: u32 = 1 << 3;
    /// Timestamp extension (RTT measurement).
    pub const TSX: u32 = 1 << 4;
    /// Dynamic responder MPR.
    pub const DYNAMIC_MPR: u32 = 1 << 5;
    /// Firmware update through the admin queue.
    pub const FW_UPDATE: u32 = 1 << 6;
    /// Every capability this ABI version defines.
    pub const ALL: u32 = (1 << 7) - 1;
}

le_struct! {
/// The DEVICE register block (type 0x0001), 64 bytes, always at BAR0 offset 0.
pub struct DeviceBlock {
    /// Block header.
    pub header: BlockHeader,
    /// RO [`DEVICE_MAGIC`].
    pub magic: U32,
    /// RO PCI vendor id in bits 31:16 and device id in bits 15:0, as in config space
    /// ([`PCI_ID`] on the simulated NIC).
    pub device_id: U32,
    /// RO ABI version, major in bits 31:16, minor in 15:0 ([`crate::device::version`]).
    pub abi_version: U32,
    /// RO wire version ([`crate::device::version::WIRE_VERSION`]).
    pub wire_version: U32,
    /// RO [`status`] bits.
    pub status: U32,
    /// RW [`control`] bits.
    pub control: U32,
    /// RO [`caps`] bits.
    pub capabilities: U32,
    /// RO number of NIC ports.
    pub num_ports: U32,
    /// RO number of network planes.
    pub num_planes: U32,
    /// RO most queue pairs.
    pub max_qps: U32,
    /// RO most completion queues.
    pub max_cqs: U32,
    /// RO most EVs per QP.
    pub max_evs_per_qp: U32,
    /// RO liveness counter: the firmware increments it at least every millisecond.
    pub liveness: U32,
    /// RW scratch register, no effect (bus tests).
    pub scratch: U32,
}
}

le_struct! {
/// A queue register block: the ADMIN queue (type 0x0002) or the EVENT queue (type 0x0003), 64 B.
///
/// Admin queue: the host writes 64-byte [`crate::device::admin::AdminCmd`]s into the ring at
/// `base`, then its new producer index into `doorbell`; the device writes the 32-byte
/// [`crate::device::admin::AdminResp`] for command slot `i` into slot `i` of the response ring at
/// `resp_base` and then advances `consumer` (and raises `irq_vector` when enabled).
/// Event queue: the device writes 32-byte [`crate::device::event::EventRecord`]s at `base` and
/// advances `producer`; the host writes its consumer index into `doorbell`. `resp_base` is unused.
/// Indices are free-running 32-bit counters; the slot is `index mod 2^log2_entries`.
pub struct QueueBlock {
    /// Block header.
    pub header: BlockHeader,
    /// RW ring IOVA, low 32 bits.
    pub base_lo: U32,
    /// RW ring IOVA, high 32 bits.
    pub base_hi: U32,
    /// RW log2 of the number of entries.
    pub log2_entries: U32,
    /// Producer index (admin: RO mirror of the doorbell; event: RO, written by the device).
    pub producer: U32,
    /// Consumer index (admin: RO, written by the device; event: RO mirror of the doorbell).
    pub consumer: U32,
    /// WO doorbell (admin: new producer index; event: new consumer index).
    pub doorbell: U32,
    /// RW response ring IOVA low 32 bits (admin only).
    pub resp_base_lo: U32,
    /// RW response ring IOVA high 32 bits (admin only).
    pub resp_base_hi: U32,
    /// RW MSI-X vector raised when the device advances its index.
    pub irq_vector: U32,
    /// RW bit 0 ENABLE: set after programming base and size.
    pub control: U32,
    /// RO bit 0 ENABLED, bit 1 ERROR (bad base or size; cleared by disabling).
    pub status: U32,
    /// Reserved, reads 0.
    pub rsvd: [U32; 3],
}
}

le_struct! {
/// The DOORBELL block (type 0x0004), 32 bytes.
///
/// Doorbell page `n` (a [`crate::device::doorbell::DoorbellPage`]) is at BAR0 offset
/// `offset + n * stride`; page `n` carries the SQ/RQ doorbells of QP `n` and the CQ doorbell of
/// CQ `n`.
pub struct DoorbellBlock {
    /// Block header.
    pub header: BlockHeader,
    /// RO BAR0 offset of page 0 (4 KiB aligned).
    pub offset: U32,
    /// RO distance between pages in bytes (4096).
    pub stride: U32,
    /// RO number of pages.
    pub page_count: U32,
    /// Reserved, reads 0.
    pub rsvd: [U32; 3],
}
}

le_struct! {
/// One port's registers inside the [`PortBlock`], 16 bytes.
pub struct PortRegs {
    /// RO administrative state (0 down, 1 up); set through the admin queue.
    pub admin_state: U32,
    /// RO operational state (0 down, 1 up): link up and admin up.
    pub oper_state: U32,
    /// RO link speed in Mb/s (0 when down).
    pub speed_mbps: U32,
    /// RO network plane this port is cabled to.
    pub plane_id: U32,
}
}

le_struct! {
/// The PORT block (type 0x0005): `num_ports` valid entries of [`MAX_PORTS`], 144 bytes.
pub struct PortBlock {
    /// Block header.
    pub header: BlockHeader,
    /// RO number of valid entries in `ports`.
    pub num_ports: U32,
    /// Reserved, reads 0.
    pub rsvd: U32,
    /// Per-port registers; entries at and beyond `num_ports` read 0.
    pub ports: [PortRegs; MAX_PORTS],
}
}

le_struct! {
/// The FW block (type 0x0006), 64 bytes.
pub struct FwBlock {
    /// Block header.
    pub header: BlockHeader,
    /// RO image slot the cores booted from (0 = A, 1 = B).
    pub running_slot: U32,
    /// RO boots since power-on.
    pub boot_count: U32,
    /// RO running image version (major 31:24, minor 23:16, patch 15:0).
    pub image_version: U32,
    /// RO build id of the running image (e.g. the low 32 bits of its commit hash).
    pub build_id: U32,
    /// RO BAR0 offset of the log ring (defmt frames, bytes).
    pub log_offset: U32,
    /// RO log ring size in bytes (a power of two).
    pub log_size: U32,
    /// RO free-running byte count written to the log ring.
    pub log_producer: U32,
    /// RO BAR0 offset of the crash record.
    pub crash_offset: U32,
    /// RO crash record size in bytes.
    pub crash_size: U32,
    /// RO 0 = no crash recorded, else the crash reason of the previous boot.
    pub crash_reason: U32,
    /// RO firmware update state ([`crate::device::admin::FwUpdateState`] code).
    pub update_state: U32,
    /// Reserved, reads 0.
    pub rsvd: [U32; 3],
}
}

const _: () = {
    assert!(size_of::<BlockHeader>() == 8);
    assert!(size_of::<DeviceBlock>() == 64);
    assert!(offset_of!(DeviceBlock, magic) == 0x08);
    assert!(offset_of!(DeviceBlock, abi_version) == 0x10);
    assert!(offset_of!(DeviceBlock, status) == 0x18);
    assert!(offset_of!(DeviceBlock, control) == 0x1C);
    assert!(offset_of!(DeviceBlock, liveness) == 0x38);
    assert!(offset_of!(DeviceBlock, scratch) == 0x3C);
    assert!(size_of::<QueueBlock>() == 64);
    assert!(offset_of!(QueueBlock, doorbell) == 0x1C);
    assert!(offset_of!(QueueBlock, irq_vector) == 0x28);
    assert!(size_of::<DoorbellBlock>() == 32);
    assert!(size_of::<PortRegs>() == 16);
    assert!(size_of::<PortBlock>() == 16 + 16 * MAX_PORTS);
    assert!(offset_of!(PortBlock, ports) == 16);
    assert!(size_of::<FwBlock>() == 64);
    assert!(offset_of!(FwBlock, crash_reason) == 0x2C);
};

/// Where the reference device places each block and area in BAR0.
pub mod defaults {
    /// DEVICE block.
    pub const DEVICE: u32 = 0x0000;
    /// ADMIN queue block.
    pub const ADMIN_QUEUE: u32 = 0x0040;
    /// EVENT queue block.
    pub const EVENT_QUEUE: u32 = 0x0080;
    /// DOORBELL block.
    pub const DOORBELL: u32 = 0x00C0;
    /// PORT block.
    pub const PORT: u32 = 0x0100;
    /// FW block.
    pub const FIRMWARE: u32 = 0x0200;
    /// Firmware log ring.
    pub const LOG_RING: u32 = 0x1000;
    /// Log ring size in bytes.
    pub const LOG_RING_BYTES: u32 = 0x2000;
    /// Crash record.
    pub const CRASH_RECORD: u32 = 0x3000;
    /// Crash record size in bytes.
    pub const CRASH_RECORD_BYTES: u32 = 0x1000;
    /// First doorbell page.
    pub const DOORBELL_PAGES: u32 = 0x1_0000;
    /// Doorbell page stride.
    pub const DOORBELL_STRIDE: u32 = 0x1000;
}

/// Why the register chain could not be walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DiscoverError {
    /// The first block (offset 0) is not a DEVICE block, or its magic is wrong.
    NotMrc {
        /// The magic read (0 if the first block is not a DEVICE block).
        magic: u32,
    },
    /// A block header carries type 0x0000 or 0xFFFF (device absent or broken).
    BadType {
        /// BAR0 offset of the block.
        offset: u32,
        /// The type read.
        block_type: u16,
    },
    /// A known block has a version this ABI does not know.
    BadVersion {
        /// BAR0 offset of the block.
        offset: u32,
        /// The version read.
        version: u16,
    },
    /// A `next` offset does not lie after the current block: following it could loop.
    Cycle {
        /// BAR0 offset of the block holding the bad `next`.
        offset: u32,
        /// The `next` read.
        next: u32,
    },
    /// A block (or the area it points at) does not fit in the BAR, or is not 4-byte aligned.
    OutOfBar {
        /// The offending offset.
        offset: u32,
    },
    /// More than [`MAX_BLOCKS`] blocks.
    TooManyBlocks,
    /// The same known block type appears twice.
    Duplicate {
        /// The type that repeats.
        block_type: BlockType,
    },
    /// A required block (DEVICE, ADMIN, EVENT, DOORBELL) is missing.
    Missing {
        /// The missing type.
        block_type: BlockType,
    },
}

/// Where each block was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RegisterMap {
    /// DEVICE block offset (always 0).
    pub device: u32,
    /// ADMIN queue block offset.
    pub admin_queue: u32,
    /// EVENT queue block offset.
    pub event_queue: u32,
    /// DOORBELL block offset.
    pub doorbell: u32,
    /// PORT block offset, if present.
    pub port: Option<u32>,
    /// FW block offset, if present.
    pub firmware: Option<u32>,
    /// Blocks of unknown type that were skipped.
    pub unknown_blocks: u32,
}

/// Size in bytes of a known block type.
pub const fn block_size(t: BlockType) -> u32 {
    (match t {
        BlockType::Device => size_of::<DeviceBlock>(),
        BlockType::AdminQueue | BlockType::EventQueue => size_of::<QueueBlock>(),
        BlockType::Doorbell => size_of::<DoorbellBlock>(),
        BlockType::Port => size_of::<PortBlock>(),
        BlockType::Firmware => size_of::<FwBlock>(),
    }) as u32
}

/// Walks the register chain of a BAR of `bar_len` bytes through `read32(offset)`.
///
/// `read32` is only called with 4-byte aligned offsets below `bar_len`. At most
/// `MAX_BLOCKS * 3 + 1` reads happen.
///
/// # Errors
/// See [`DiscoverError`].
pub fn discover(
    bar_len: u32,
    mut read32: impl FnMut(u32) -> u32,
) -> Result<RegisterMap, DiscoverError> {
    let in_bar = |off: u32, len: u32| {
        off.is_multiple_of(4) && off.checked_add(len).is_some_and(|e| e <= bar_len)
    };
    let mut map = RegisterMap::default();
    let mut seen = [false; BlockType::ALL.len()];
    let mut offset = 0u32;
    for _ in 0..MAX_BLOCKS {
        if !in_bar(offset, size_of::<BlockHeader>() as u32) {
            return Err(DiscoverError::OutOfBar { offset });
        }
        let w0 = read32(offset);
        let next = read32(offset + 4);
        let (raw_type, version) = (w0 as u16, (w0 >> 16) as u16);
        if raw_type == 0 || raw_type == 0xFFFF {
            return Err(DiscoverError::BadType {
                offset,
                block_type: raw_type,
            });
        }
        let known = BlockType::from_u16(raw_type);
        if offset == 0 {
            let magic = if known == Some(BlockType::Device) {
                read32(8)
            } else {
                0
            };
            if magic != DEVICE_MAGIC || !in_bar(0, block_size(BlockType::Device)) {
                return Err(DiscoverError::NotMrc { magic });
            }
        }
        match known {
            Some(t) => {
                if version != BLOCK_VERSION {
                    return Err(DiscoverError::BadVersion { offset, version });
                }
                if !in_bar(offset, block_size(t)) {
                    return Err(DiscoverError::OutOfBar { offset });
                }
                let idx = BlockType::ALL.iter().position(|x| *x == t).unwrap_or(0);
                if seen[idx] {
                    return Err(DiscoverError::Duplicate { block_type: t });
                }
                seen[idx] = true;
                match t {
                    BlockType::Device => map.device = offset,
                    BlockType::AdminQueue => map.admin_queue = offset,
                    BlockType::EventQueue => map.event_queue = offset,
                    BlockType::Doorbell => map.doorbell = offset,
                    BlockType::Port => map.port = Some(offset),
                    BlockType::Firmware => map.firmware = Some(offset),
                }
            }
            None => map.unknown_blocks += 1,
        }
        if next == 0 {
            for (t, s) in BlockType::ALL.iter().zip(seen).take(4) {
                if !s {
                    return Err(DiscoverError::Missing { block_type: *t });
                }
            }
            return Ok(map);
        }
        if next <= offset {
            return Err(DiscoverError::Cycle { offset, next });
        }
        offset = next;
    }
    Err(DiscoverError::TooManyBlocks)
}

/// [`discover`] over a byte snapshot of the BAR (tests, simulator, crash dumps).
///
/// # Errors
/// See [`DiscoverError`].
pub fn discover_bytes(bar: &[u8]) -> Result<RegisterMap, DiscoverError> {
    let len = u32::try_from(bar.len()).unwrap_or(u32::MAX);
    discover(len, |off| {
        let o = off as usize;
        bar.get(o..o + 4).map_or(0xFFFF_FFFF, |b| {
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        })
    })
}

/// Parameters of the reference register map written by [`write_default_map`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceParams {
    /// PCI vendor id (bits 31:16) and device id (bits 15:0); [`PCI_ID`] unless the device has
    /// IDs of its own.
    pub device_id: u32,
    /// [`caps`] bits.
    pub capabilities: u32,
    /// Number of ports (at most [`MAX_PORTS`]).
    pub num_ports: u32,
    /// Number of planes.
    pub num_planes: u32,
    /// Most QPs.
    pub max_qps: u32,
    /// Most CQs.
    pub max_cqs: u32,
    /// Most EVs per QP.
    pub max_evs_per_qp: u32,
    /// Doorbell pages.
    pub doorbell_pages: u32,
}

/// BAR0 bytes the reference map of `p` needs.
pub const fn default_bar_len(p: &DeviceParams) -> usize {
    defaults::DOORBELL_PAGES as usize
        + p.doorbell_pages as usize * defaults::DOORBELL_STRIDE as usize
}

/// Writes the reference device's block chain (reset values) into `bar`.
///
/// Returns `None` when `bar` is shorter than [`default_bar_len`] or `num_ports > MAX_PORTS`.
pub fn write_default_map(bar: &mut [u8], p: &DeviceParams) -> Option<()> {
    use super::version::{ABI_VERSION, WIRE_VERSION};
    if bar.len() < default_bar_len(p) || p.num_ports as usize > MAX_PORTS {
        return None;
    }
    let put = |bar: &mut [u8], off: u32, bytes: &[u8]| {
        bar[off as usize..off as usize + bytes.len()].copy_from_slice(bytes);
    };
    let dev = DeviceBlock {
        header: BlockHeader::new(BlockType::Device, defaults::ADMIN_QUEUE),
        magic: DEVICE_MAGIC.into(),
        device_id: p.device_id.into(),
        abi_version: ABI_VERSION.to_u32().into(),
        wire_version: u32::from(WIRE_VERSION).into(),
        status: 0.into(),
        control: 0.into(),
        capabilities: p.capabilities.into(),
        num_ports: p.num_ports.into(),
        num_planes: p.num_planes.into(),
        max_qps: p.max_qps.into(),
        max_cqs: p.max_cqs.into(),
        max_evs_per_qp: p.max_evs_per_qp.into(),
        liveness: 0.into(),
        scratch: 0.into(),
    };
    put(bar, defaults::DEVICE, dev.as_bytes());
    let mut q = QueueBlock::new_zeroed();
    q.header = BlockHeader::new(BlockType::AdminQueue, defaults::EVENT_QUEUE);
    put(bar, defaults::ADMIN_QUEUE, q.as_bytes());
    q.header = BlockHeader::new(BlockType::EventQueue, defaults::DOORBELL);
    put(bar, defaults::EVENT_QUEUE, q.as_bytes());
    let db = DoorbellBlock {
        header: BlockHeader::new(BlockType::Doorbell, defaults::PORT),
        offset: defaults::DOORBELL_PAGES.into(),
        stride: defaults::DOORBELL_STRIDE.into(),
        page_count: p.doorbell_pages.into(),
        rsvd: [0.into(); 3],
    };
    put(bar, defaults::DOORBELL, db.as_bytes());
    let mut port = PortBlock::new_zeroed();
    port.header = BlockHeader::new(BlockType::Port, defaults::FIRMWARE);
    port.num_ports = p.num_ports.into();
    for (i, r) in port.ports.iter_mut().take(p.num_ports as usize).enumerate() {
        r.plane_id = (i as u32 % p.num_planes.max(1)).into();
    }
    put(bar, defaults::PORT, port.as_bytes());
    let mut fw = FwBlock::new_zeroed();
    fw.header = BlockHeader::new(BlockType::Firmware, 0);
    fw.log_offset = defaults::LOG_RING.into();
    fw.log_size = defaults::LOG_RING_BYTES.into();
    fw.crash_offset = defaults::CRASH_RECORD.into();
    fw.crash_size = defaults::CRASH_RECORD_BYTES.into();
    put(bar, defaults::FIRMWARE, fw.as_bytes());
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    extern crate std;
    use std::vec;

    const P: DeviceParams = DeviceParams {
        device_id: PCI_ID,
        capabilities: caps::ALL,
        num_ports: 4,
        num_planes: 4,
        max_qps: 64,
        max_cqs: 64,
        max_evs_per_qp: 256,
        doorbell_pages: 64,
    };

    fn bar() -> std::vec::Vec<u8> {
        let mut b = vec![0u8; default_bar_len(&P)];
        write_default_map(&mut b, &P).unwrap();
        b
    }

    #[test]
    fn default_map_is_discovered() {
        let m = discover_bytes(&bar()).unwrap();
        assert_eq!(m.admin_queue, defaults::ADMIN_QUEUE);
        assert_eq!(m.event_queue, defaults::EVENT_QUEUE);
        assert_eq!(m.doorbell, defaults::DOORBELL);
        assert_eq!(m.port, Some(defaults::PORT));
        assert_eq!(m.firmware, Some(defaults::FIRMWARE));
        let b = bar();
        // Byte-literal check of the DEVICE block head: type 1, version 1, next 0x40, "MRC1".
        assert_eq!(
            &b[..12],
            &[1, 0, 1, 0, 0x40, 0, 0, 0, b'M', b'R', b'C', b'1']
        );
    }

    #[test]
    fn errors_are_typed() {
        let mut b = bar();
        b[defaults::DOORBELL as usize + 4..][..4].copy_from_slice(&0x40u32.to_le_bytes());
        assert_eq!(
            discover_bytes(&b),
            Err(DiscoverError::Cycle {
                offset: defaults::DOORBELL,
                next: 0x40
            })
        );
        let mut b = bar();
        b[defaults::PORT as usize..][..2].copy_from_slice(&[0xFF, 0xFF]);
        assert_eq!(
            discover_bytes(&b),
            Err(DiscoverError::BadType {
                offset: defaults::PORT,
                block_type: 0xFFFF
            })
        );
        let mut b = bar();
        b[defaults::FIRMWARE as usize + 4..][..4].copy_from_slice(&0x0100_0000u32.to_le_bytes());
        assert_eq!(
            discover_bytes(&b),
            Err(DiscoverError::OutOfBar {
                offset: 0x0100_0000
            })
        );
        let mut b = bar();
        b[8] = 0;
        assert!(matches!(
            discover_bytes(&b),
            Err(DiscoverError::NotMrc { .. })
        ));
        // An unknown block type in the middle is skipped.
        let mut b = bar();
        b[defaults::PORT as usize..][..2].copy_from_slice(&0x4242u16.to_le_bytes());
        let m = discover_bytes(&b).unwrap();
        assert_eq!((m.port, m.unknown_blocks), (None, 1));
        // Dropping the doorbell block from the chain is a missing block.
        let mut b = bar();
        b[defaults::EVENT_QUEUE as usize + 4..][..4].copy_from_slice(&defaults::PORT.to_le_bytes());
        assert_eq!(
            discover_bytes(&b),
            Err(DiscoverError::Missing {
                block_type: BlockType::Doorbell
            })
        );
    }

    proptest! {
        #[test]
        fn random_bars_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
            let _ = discover_bytes(&bytes);
        }

        #[test]
        fn random_read32_terminates(seed in any::<u64>(), len in any::<u32>()) {
            let mut reads = 0u32;
            let mut x = seed;
            let _ = discover(len, |_| {
                reads += 1;
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if reads == 3 { DEVICE_MAGIC } else { (x >> 32) as u32 }
            });
            prop_assert!(reads as usize <= MAX_BLOCKS * 3 + 1);
        }
    }
}
