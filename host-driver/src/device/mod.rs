//! The device layer: register discovery, reset and bring-up, the ABI handshake, the admin and
//! event queues, doorbell pages and surprise-removal detection, over any [`Backend`].
//!
//! # Bring-up ([`Device::open`])
//! 1. Walk the BAR0 register chain ([`mrc_abi::device::regs::discover`]).
//! 2. Handshake: the DEVICE block's `abi_version` must pass
//!    [`mrc_abi::device::version::check_compat`] against the driver's version, before anything
//!    else is written ([`Error::AbiMismatch`] names both versions).
//! 3. Reset (`control.RESET`) and wait, bounded, for `status.READY` ([`Error::NotReady`]).
//! 4. Enable memory decoding and bus mastering, program and enable the admin and event queues.
//! 5. QUERY_DEVICE and QUERY_LIMITS for the limits ([`DeviceAttrs`]).
//!
//! # Surprise removal
//! A PCIe read from a device that is gone returns all ones. Every MMIO read goes through
//! [`Device::read32`]; an all-ones value is confirmed by reading the DEVICE magic, and if that is
//! all ones too the device is marked gone. From then on every call on the device and on every
//! object made from it (contexts, CQs, QPs, MRs, controllers) returns [`Error::DeviceGone`].
//! Every wait in this crate is bounded by a timeout, so a dead device is never a hang.

mod admin;
mod events;

pub use admin::{
    ev_profile_transition_ok, EvInfo, FwStatus, Limits, PortInfo, QpInfo, QueryDevice,
};
pub use events::TimedEvent;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mrc_abi::device::regs::{self, control, status, RegisterMap};
use mrc_abi::device::version::{check_compat, AbiVersion, ABI_VERSION};

use crate::error::{Error, Result};
use crate::sys::{self, Backend, Bdf, DmaRegion};

use admin::AdminQueue;
use events::EventQueue;

/// A backend shared by every object of a device.
pub type SharedBackend = Arc<dyn Backend + Send + Sync>;

/// Offsets inside a QUEUE register block.
pub(crate) mod qreg {
    pub const BASE_LO: u64 = 0x08;
    pub const BASE_HI: u64 = 0x0C;
    pub const LOG2: u64 = 0x10;
    pub const CONSUMER: u64 = 0x18;
    pub const DOORBELL: u64 = 0x1C;
    pub const RESP_LO: u64 = 0x20;
    pub const RESP_HI: u64 = 0x24;
    pub const IRQ: u64 = 0x28;
    pub const CONTROL: u64 = 0x2C;
    pub const STATUS: u64 = 0x30;
}

/// Offsets inside the DEVICE block.
mod dreg {
    pub const MAGIC: u64 = 0x08;
    pub const DEVICE_ID: u64 = 0x0C;
    pub const ABI: u64 = 0x10;
    pub const WIRE: u64 = 0x14;
    pub const STATUS: u64 = 0x18;
    pub const CONTROL: u64 = 0x1C;
    pub const CAPS: u64 = 0x20;
    pub const PORTS: u64 = 0x24;
    pub const PLANES: u64 = 0x28;
    pub const MAX_QPS: u64 = 0x2C;
    pub const MAX_CQS: u64 = 0x30;
    pub const MAX_EVS: u64 = 0x34;
    pub const LIVENESS: u64 = 0x38;
}

/// Bring-up knobs.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// Longest wait for READY after reset.
    pub ready_timeout: Duration,
    /// Longest wait for one admin response.
    pub admin_timeout: Duration,
    /// log2 entries of the admin rings (1..=12).
    pub admin_log2: u8,
    /// log2 entries of the event ring (1..=12).
    pub event_log2: u8,
    /// Reset the device during bring-up.
    pub reset: bool,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            ready_timeout: Duration::from_secs(2),
            admin_timeout: Duration::from_secs(2),
            admin_log2: 6,
            event_log2: 8,
            reset: true,
        }
    }
}

/// What the device is and what it can do (registers + QUERY_DEVICE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceAttrs {
    /// PCI address.
    pub bdf: Bdf,
    /// PCI vendor id (31:16) and device id (15:0).
    pub device_id: u32,
    /// The device's ABI version.
    pub abi_version: AbiVersion,
    /// Wire version.
    pub wire_version: u32,
    /// `caps` bits.
    pub capabilities: u32,
    /// Ports.
    pub num_ports: u32,
    /// Planes.
    pub num_planes: u32,
    /// Most QPs.
    pub max_qps: u32,
    /// Most CQs.
    pub max_cqs: u32,
    /// Most EVs per QP.
    pub max_evs_per_qp: u32,
    /// Doorbell pages.
    pub doorbell_pages: u32,
    /// QUERY_DEVICE answers.
    pub limits: QueryDevice,
    /// QUERY_LIMITS answers.
    pub table_limits: Limits,
    /// The NIC's IPv6 address ([`default_gid`]).
    pub gid: [u8; 16],
}

/// The NIC address the driver uses for a device: `fd00::<domain>:<bus>:<device>:<function>`.
///
/// The ABI carries no port addresses, so driver and simulator agree on this rule (the simulator
/// routes loopback traffic by it).
pub fn default_gid(bdf: Bdf) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfd;
    g[8..10].copy_from_slice(&bdf.domain.to_be_bytes());
    g[11] = bdf.bus;
    g[13] = bdf.device;
    g[15] = bdf.function;
    g
}

/// Counters of driver activity on one device.
#[derive(Debug, Default)]
pub struct DriverCounters {
    /// Admin commands completed.
    pub admin_commands: AtomicU64,
    /// Admin commands the device rejected.
    pub admin_errors: AtomicU64,
    /// Doorbell writes.
    pub doorbells: AtomicU64,
    /// Events consumed.
    pub events: AtomicU64,
    /// Malformed records skipped.
    pub bad_records: AtomicU64,
}

/// An opened, ready MRC device. Shared (`Arc`) by every object made from it.
pub struct Device {
    backend: SharedBackend,
    bdf: Bdf,
    map: RegisterMap,
    /// Shared with the backend when it can learn of removal on its own (`Backend::gone_flag`).
    gone: Arc<AtomicBool>,
    attrs: DeviceAttrs,
    admin: Mutex<AdminQueue>,
    events: Mutex<EventQueue>,
    doorbell_base: u64,
    doorbell_stride: u64,
    admin_timeout: Duration,
    next_vector: AtomicU32,
    counters: DriverCounters,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("bdf", &self.bdf)
            .field("gone", &self.is_gone())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads through the backend, turning an all-ones value into [`Error::DeviceGone`] when the
/// DEVICE magic confirms it (used before the [`Device`] exists).
fn probe_read(b: &dyn Backend, off: u64) -> Result<u32> {
    let v = b.mmio_read32(off)?;
    if v == u32::MAX && b.mmio_read32(dreg::MAGIC).unwrap_or(u32::MAX) == u32::MAX {
        return Err(Error::DeviceGone { bdf: b.bdf() });
    }
    Ok(v)
}

impl Device {
    /// Brings the device behind `backend` up (see the module docs).
    ///
    /// # Errors
    /// Discovery, ABI mismatch, not ready, queue setup, DMA, or the device is gone.
    pub fn open(backend: SharedBackend, cfg: &DeviceConfig) -> Result<Arc<Device>> {
        let bdf = backend.bdf();
        let b: &dyn Backend = &*backend;
        let bar_len = u32::try_from(b.bar0_len()).unwrap_or(u32::MAX);
        let mut first_err = None;
        let walk = regs::discover(bar_len, |off| match probe_read(b, u64::from(off)) {
            Ok(v) => v,
            Err(e) => {
                first_err.get_or_insert(e);
                u32::MAX
            }
        });
        if let Some(e) = first_err {
            return Err(e);
        }
        let map = walk.map_err(|reason| Error::Discover { bdf, reason })?;
        let dev = u64::from(map.device);
        let device_abi = AbiVersion::from_u32(probe_read(b, dev + dreg::ABI)?);
        if let Err(e) = check_compat(ABI_VERSION, device_abi) {
            return Err(Error::AbiMismatch {
                bdf,
                host: ABI_VERSION,
                device: device_abi,
                reason: e.to_string(),
            });
        }
        if cfg.reset {
            b.mmio_write32(dev + dreg::CONTROL, control::RESET)?;
        }
        wait_ready(b, dev, cfg.ready_timeout)?;
        sys::enable_bus_master(b)?;
        let db = u64::from(map.doorbell);
        let doorbell_base = u64::from(probe_read(b, db + 8)?);
        let doorbell_stride = u64::from(probe_read(b, db + 12)?);
        let doorbell_pages = probe_read(b, db + 16)?;
        let admin = AdminQueue::setup(b, u64::from(map.admin_queue), cfg.admin_log2)?;
        let events = EventQueue::setup(b, u64::from(map.event_queue), cfg.event_log2)?;
        b.mmio_write32(dev + dreg::CONTROL, control::IRQ_ENABLE)?;
        let r = |o| probe_read(b, dev + o);
        let attrs = DeviceAttrs {
            bdf,
            device_id: r(dreg::DEVICE_ID)?,
            abi_version: device_abi,
            wire_version: r(dreg::WIRE)?,
            capabilities: r(dreg::CAPS)?,
            num_ports: r(dreg::PORTS)?,
            num_planes: r(dreg::PLANES)?,
            max_qps: r(dreg::MAX_QPS)?,
            max_cqs: r(dreg::MAX_CQS)?,
            max_evs_per_qp: r(dreg::MAX_EVS)?,
            doorbell_pages,
            limits: QueryDevice::default(),
            table_limits: Limits::default(),
            gid: default_gid(bdf),
        };
        let gone = b.gone_flag().unwrap_or_default();
        let mut device = Device {
            backend,
            bdf,
            map,
            gone,
            attrs,
            admin: Mutex::new(admin),
            events: Mutex::new(events),
            doorbell_base,
            doorbell_stride,
            admin_timeout: cfg.admin_timeout,
            // Vector 0 serves the admin and event queues; completion channels take the rest.
            next_vector: AtomicU32::new(1),
            counters: DriverCounters::default(),
        };
        device.attrs.limits = device.query_device()?;
        device.attrs.table_limits = device.query_limits()?;
        Ok(Arc::new(device))
    }

    /// The device's PCI address.
    pub fn bdf(&self) -> Bdf {
        self.bdf
    }
    /// Attributes read at bring-up.
    pub fn attrs(&self) -> &DeviceAttrs {
        &self.attrs
    }
    /// Where each register block is.
    pub fn register_map(&self) -> &RegisterMap {
        &self.map
    }
    /// Driver counters.
    pub fn counters(&self) -> &DriverCounters {
        &self.counters
    }
    /// The backend (for DMA allocation and interrupt fds).
    pub fn backend(&self) -> &SharedBackend {
        &self.backend
    }

    /// True once the device was found gone.
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    /// `Err(DeviceGone)` once the device was found gone. Cheap: one relaxed load.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if self.gone.load(Ordering::Relaxed) {
            Err(Error::DeviceGone { bdf: self.bdf })
        } else {
            Ok(())
        }
    }

    fn mark_gone(&self) -> Error {
        if !self.gone.swap(true, Ordering::Relaxed) {
            log::error!("{}: device gone (all-ones MMIO reads)", self.bdf);
        }
        Error::DeviceGone { bdf: self.bdf }
    }

    /// Reads a register; an all-ones value confirmed by the DEVICE magic marks the device gone.
    ///
    /// # Errors
    /// [`Error::DeviceGone`], or a bad offset.
    pub fn read32(&self, off: u64) -> Result<u32> {
        self.check()?;
        let v = self.backend.mmio_read32(off)?;
        if v == u32::MAX {
            let magic = self
                .backend
                .mmio_read32(u64::from(self.map.device) + dreg::MAGIC)
                .unwrap_or(u32::MAX);
            if magic == u32::MAX {
                return Err(self.mark_gone());
            }
        }
        Ok(v)
    }

    /// Writes a register.
    ///
    /// # Errors
    /// [`Error::DeviceGone`], or a bad offset.
    pub fn write32(&self, off: u64, value: u32) -> Result<()> {
        self.check()?;
        Ok(self.backend.mmio_write32(off, value)?)
    }

    /// Writes a doorbell register. The caller must have issued `fence(Release)` after its
    /// descriptor writes.
    ///
    /// # Errors
    /// [`Error::DeviceGone`], or a bad offset.
    #[inline]
    pub fn ring_doorbell(&self, off: u64, value: u32) -> Result<()> {
        self.check()?;
        self.counters.doorbells.fetch_add(1, Ordering::Relaxed);
        Ok(self.backend.mmio_write32(off, value)?)
    }

    /// BAR0 offset of doorbell page `n`.
    ///
    /// # Errors
    /// [`Error::InvalidAttribute`] when the device has no page `n`.
    pub fn doorbell_page(&self, n: u32) -> Result<u64> {
        if n >= self.attrs.doorbell_pages {
            return Err(Error::InvalidAttribute {
                object: format!("device {}", self.bdf),
                field: "doorbell page",
                value: u64::from(n),
                rule: "below the DOORBELL block's page_count",
            });
        }
        Ok(self.doorbell_base + u64::from(n) * self.doorbell_stride)
    }

    /// Reads the status register: `Ok(())` when READY and not FATAL.
    ///
    /// # Errors
    /// [`Error::DeviceGone`] or [`Error::DeviceFatal`].
    pub fn check_alive(&self) -> Result<()> {
        let s = self.read32(u64::from(self.map.device) + dreg::STATUS)?;
        if s & status::FATAL != 0 {
            return Err(Error::DeviceFatal {
                bdf: self.bdf,
                code: (s >> status::FATAL_CODE_SHIFT) as u16,
            });
        }
        Ok(())
    }

    /// The firmware liveness counter.
    ///
    /// # Errors
    /// [`Error::DeviceGone`].
    pub fn liveness(&self) -> Result<u32> {
        self.read32(u64::from(self.map.device) + dreg::LIVENESS)
    }

    /// Allocates DMA memory.
    ///
    /// # Errors
    /// [`Error::DeviceGone`] or the allocation failed.
    pub fn alloc_dma(&self, size: usize) -> Result<DmaRegion> {
        self.check()?;
        Ok(self.backend.alloc_dma(size)?)
    }

    /// An interrupt vector for a completion channel (round robin over vectors 1..n; vector 0
    /// when the device has only one).
    pub fn alloc_vector(&self) -> u32 {
        let n = self.backend.interrupt_vectors();
        if n <= 1 {
            return 0;
        }
        let v = self.next_vector.fetch_add(1, Ordering::Relaxed);
        1 + (v - 1) % (n - 1)
    }

    /// Waits up to `timeout` on interrupt `vector`; returns how often it fired (0 = timeout).
    /// Checks the device is alive afterwards.
    ///
    /// # Errors
    /// [`Error::DeviceGone`], or the wait failed.
    pub fn wait_interrupt(&self, vector: u32, timeout: Duration) -> Result<u64> {
        self.check()?;
        let n = self.backend.wait_interrupt(vector, timeout)?;
        self.check_alive()?;
        Ok(n)
    }
}

fn wait_ready(b: &dyn Backend, dev: u64, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let s = probe_read(b, dev + dreg::STATUS)?;
        if s & status::FATAL != 0 {
            return Err(Error::DeviceFatal {
                bdf: b.bdf(),
                code: (s >> status::FATAL_CODE_SHIFT) as u16,
            });
        }
        if s & status::READY != 0 && s & status::RESETTING == 0 {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(Error::NotReady {
                bdf: b.bdf(),
                waited_ms: start.elapsed().as_millis() as u64,
                status: s,
            });
        }
        backoff(&mut spins);
    }
}

/// Spin briefly, then yield, then sleep: the pause of a bounded wait loop.
pub fn backoff(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 256 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}
