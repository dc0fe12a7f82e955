//! One served NIC as rust-vmm's `vfio_user::ServerBackend`: BAR0 and config-space accesses go
//! to the NIC's [`Twin`] (whose MMIO hooks are the device model), `DMA_MAP`ped client memory is
//! attached to the twin so device-side DMA reaches it, and interrupt vectors are routed to the
//! client's eventfds.
//!
//! Every request runs under the host lock (see the module docs of [`super`]): requests of all
//! clients are applied one at a time, and the state-changing ones are folded into the host's
//! request digest in the order they were applied.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mrc_abi::device::regs::{control, DeviceBlock};
use mrc_driver::sys::{Backend, DmaRegion, EventFd, Iova};
use vfio_bindings::bindings::vfio as vb;
use vfio_user::{DmaMapFlags, DmaUnmapFlags, ServerBackend};

use super::{NicCtx, Request};

/// BAR0 offset of the DEVICE block's control register (the block is at offset 0).
const DEVICE_CONTROL: u64 = core::mem::offset_of!(DeviceBlock, control) as u64;

/// Most bytes one client may map for DMA in a single DMA_MAP (a sanity bound, not a quota).
const MAX_DMA_MAP_BYTES: u64 = 1 << 40;

/// The per-session state of a served NIC.
pub(super) struct NicSession {
    nic: Arc<NicCtx>,
    /// The client's DMA mappings by IOVA.
    maps: BTreeMap<u64, DmaRegion>,
    /// Whether the client sent anything the backend saw (a session that did is "active").
    started: bool,
}

/// A refused request: counted, logged, answered with `errno`.
fn refuse(nic: &NicCtx, errno: i32, what: std::fmt::Arguments<'_>) -> io::Error {
    nic.counters.refused.fetch_add(1, Ordering::Relaxed);
    log::warn!("{}: refused: {what}", nic.name);
    io::Error::from_raw_os_error(errno)
}

impl NicSession {
    pub fn new(nic: Arc<NicCtx>) -> NicSession {
        NicSession {
            nic,
            maps: BTreeMap::new(),
            started: false,
        }
    }

    /// Whether the client sent anything the device saw.
    pub fn started(&self) -> bool {
        self.started
    }

    fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.nic.counters.sessions.fetch_add(1, Ordering::Relaxed);
            self.nic.active.store(true, Ordering::SeqCst);
            log::info!("{}: client attached", self.nic.name);
        }
    }

    /// The client left (or was dropped): interrupts go back to the twin, the NIC is reset (as
    /// closing a VFIO device resets it), then the client's memory is unmapped.
    pub fn end(&mut self) {
        let nic = &self.nic;
        let dev = nic.twin.device();
        let mut host = nic.host.lock();
        for v in 0..nic.twin.interrupt_vectors() {
            let _ = dev.route_interrupt(v, None);
        }
        if self.started {
            host.apply(Request::Reset { nic: nic.index });
            nic.retire_counters();
            if let Err(e) = nic.twin.mmio_write32(DEVICE_CONTROL, control::RESET) {
                log::error!("{}: reset after the client left: {e}", nic.name);
            }
        }
        self.maps.clear();
        nic.active.store(false, Ordering::SeqCst);
    }

    fn bar_or_config(&self, region: u32) -> Option<bool> {
        match region {
            vb::VFIO_PCI_BAR0_REGION_INDEX => Some(true),
            vb::VFIO_PCI_CONFIG_REGION_INDEX => Some(false),
            _ => None,
        }
    }
}

impl ServerBackend for NicSession {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        self.start();
        let nic = self.nic.clone();
        nic.counters.reads.fetch_add(1, Ordering::Relaxed);
        let Some(bar) = self.bar_or_config(region) else {
            return Err(refuse(
                &nic,
                libc::EINVAL,
                format_args!("read of region {region}"),
            ));
        };
        let _host = nic.host.lock();
        let r = match (bar, data.len()) {
            (true, 4) => nic
                .twin
                .mmio_read32(offset)
                .map(|v| data.copy_from_slice(&v.to_le_bytes())),
            (true, 8) => nic
                .twin
                .mmio_read64(offset)
                .map(|v| data.copy_from_slice(&v.to_le_bytes())),
            (true, n) => {
                return Err(refuse(
                    &nic,
                    libc::EINVAL,
                    format_args!("BAR0 read of {n} bytes (4 or 8)"),
                ))
            }
            (false, _) => nic.twin.config_read(offset, data),
        };
        r.map_err(|e| refuse(&nic, libc::EINVAL, format_args!("{e}")))
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        self.start();
        let nic = self.nic.clone();
        nic.counters.writes.fetch_add(1, Ordering::Relaxed);
        let Some(bar) = self.bar_or_config(region) else {
            return Err(refuse(
                &nic,
                libc::EINVAL,
                format_args!("write of region {region}"),
            ));
        };
        let mut le = [0u8; 8];
        let value = match data.len() {
            4 | 8 => {
                le[..data.len()].copy_from_slice(data);
                u64::from_le_bytes(le)
            }
            _ if !bar => 0,
            n => {
                return Err(refuse(
                    &nic,
                    libc::EINVAL,
                    format_args!("BAR0 write of {n} bytes (4 or 8)"),
                ))
            }
        };
        let n = data.len() as u64;
        if bar {
            let len = nic.twin.bar0_len();
            if offset.checked_add(n).is_none_or(|e| e > len) || !offset.is_multiple_of(n) {
                return Err(refuse(&nic, libc::EINVAL, format_args!(
                    "BAR0 write of {n} bytes at {offset:#x} (BAR0 is {len:#x} bytes, accesses aligned)"
                )));
            }
        }
        let mut host = nic.host.lock();
        let r = if bar {
            if offset == DEVICE_CONTROL && value & u64::from(control::RESET) != 0 {
                nic.retire_counters();
            }
            let digested = (!nic.address_regs.contains(&offset)).then_some(value);
            host.apply(Request::Write {
                nic: nic.index,
                offset,
                size: n as u8,
                value: digested,
            });
            if n == 4 {
                // Truncation intended: a 4-byte write carries 4 bytes.
                nic.twin.mmio_write32(offset, value as u32)
            } else {
                nic.twin.mmio_write64(offset, value)
            }
        } else {
            host.apply(Request::Config {
                nic: nic.index,
                offset,
                data,
            });
            nic.twin.config_write(offset, data)
        };
        drop(host);
        r.map_err(|e| refuse(&nic, libc::EINVAL, format_args!("{e}")))
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        self.start();
        let nic = self.nic.clone();
        let Some(fd) = fd else {
            return Err(refuse(
                &nic,
                libc::EINVAL,
                format_args!("DMA_MAP without a file descriptor (DMA by message is not supported)"),
            ));
        };
        if !flags.contains(DmaMapFlags::READ_WRITE) {
            return Err(refuse(
                &nic,
                libc::EINVAL,
                format_args!("DMA_MAP flags {flags:?}: the NIC reads and writes"),
            ));
        }
        if size == 0 || size > MAX_DMA_MAP_BYTES || address.checked_add(size).is_none() {
            return Err(refuse(
                &nic,
                libc::EINVAL,
                format_args!("DMA_MAP of {size:#x} bytes at {address:#x}"),
            ));
        }
        let region = DmaRegion::map_shared_file(&fd, offset, size as usize, Iova(address))
            .map_err(|e| {
                refuse(
                    &nic,
                    libc::EINVAL,
                    format_args!("DMA_MAP at {address:#x}: {e}"),
                )
            })?;
        let mut host = nic.host.lock();
        nic.twin
            .device()
            .attach_dma(&region)
            .map_err(|e| refuse(&nic, libc::EEXIST, format_args!("DMA_MAP: {e}")))?;
        host.apply(Request::Map {
            nic: nic.index,
            size,
        });
        self.maps.insert(address, region);
        nic.counters.dma_maps.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        self.start();
        let nic = self.nic.clone();
        let mut host = nic.host.lock();
        if flags.contains(DmaUnmapFlags::UNMAP_ALL) {
            host.apply(Request::Unmap {
                nic: nic.index,
                size: u64::MAX,
            });
            self.maps.clear();
            return Ok(());
        }
        match self.maps.get(&address) {
            Some(r) if r.len() as u64 == size => {
                host.apply(Request::Unmap {
                    nic: nic.index,
                    size,
                });
                self.maps.remove(&address);
                Ok(())
            }
            _ => {
                drop(host);
                Err(refuse(
                    &nic,
                    libc::ENOENT,
                    format_args!(
                    "DMA_UNMAP of {size:#x} bytes at {address:#x}: not a mapping of this client"
                ),
                ))
            }
        }
    }

    fn reset(&mut self) -> io::Result<()> {
        self.start();
        let nic = self.nic.clone();
        let mut host = nic.host.lock();
        host.apply(Request::Reset { nic: nic.index });
        nic.retire_counters();
        nic.twin
            .mmio_write32(DEVICE_CONTROL, control::RESET)
            .map_err(|e| refuse(&nic, libc::EIO, format_args!("reset: {e}")))
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        self.start();
        let nic = self.nic.clone();
        let dev = nic.twin.device();
        let vectors = nic.twin.interrupt_vectors();
        let action = flags & vb::VFIO_IRQ_SET_ACTION_TYPE_MASK;
        let data = flags & vb::VFIO_IRQ_SET_DATA_TYPE_MASK;
        if index != vb::VFIO_PCI_MSIX_IRQ_INDEX || action != vb::VFIO_IRQ_SET_ACTION_TRIGGER {
            return Err(refuse(
                &nic,
                libc::EINVAL,
                format_args!("SET_IRQS index {index} flags {flags:#x} (only MSI-X triggers)"),
            ));
        }
        let _host = nic.host.lock();
        match data {
            vb::VFIO_IRQ_SET_DATA_NONE if count == 0 => {
                for v in 0..vectors {
                    let _ = dev.route_interrupt(v, None);
                }
                Ok(())
            }
            vb::VFIO_IRQ_SET_DATA_EVENTFD
                if fds.len() == count as usize
                    && start.checked_add(count).is_some_and(|e| e <= vectors) =>
            {
                for (k, f) in fds.into_iter().enumerate() {
                    let e = EventFd::adopt(f.into()).map_err(|e| {
                        refuse(&nic, libc::EINVAL, format_args!("SET_IRQS vector {}: {e}", start + k as u32))
                    })?;
                    let _ = dev.route_interrupt(start + k as u32, Some(e));
                }
                Ok(())
            }
            _ => Err(refuse(&nic, libc::EINVAL, format_args!(
                "SET_IRQS flags {flags:#x} start {start} count {count} with {} fds ({vectors} vectors)",
                fds.len()
            ))),
        }
    }
}
