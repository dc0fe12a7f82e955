//! The application API, after the OCP MRC application API's concepts, in Rust.
//!
//! | concept | type |
//! |---|---|
//! | device context | [`Context`] (application or controller role) |
//! | protection domain | [`ProtectionDomain`] |
//! | memory registration (lkey/rkey) | [`MemoryRegion`] |
//! | completion channel (fd for epoll) | [`CompletionChannel`] |
//! | completion queue | [`CompletionQueue`] ([`CompletionQueue::poll`], [`CompletionQueue::req_notify`]) |
//! | QP hint | [`QpHint`] |
//! | queue pair | [`QueuePair`] (RESET -> INIT -> RTR -> RTS, [`QueuePair::post_send`], [`QueuePair::post_recv`]) |
//! | async events | [`Context::poll_async_event`] |
//! | out-of-band connection setup | [`connect`] |
//!
//! Objects hold the device alive (`Arc`); dropping one destroys it on the device (errors on a
//! device that is gone are ignored: there is nothing left to free). Misuse is a typed
//! [`Error`](crate::Error), never undefined behaviour.

pub mod connect;
mod cq;
mod pd;
mod qp;

pub use cq::{CompletionChannel, CompletionQueue, WorkCompletion};
pub use pd::{Access, MemoryRegion, ProtectionDomain};
pub use qp::{
    InitAttr, QpHint, QpInitAttr, QueuePair, RecvWr, RtrAttr, RtsAttr, SendWr, Sge, WriteOp,
};

pub use crate::device::TimedEvent as AsyncEvent;
pub use mrc_abi::device::admin::QpState;
pub use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};
pub use mrc_abi::device::event::Event;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::device::{backoff, Device, DeviceAttrs, DeviceConfig, SharedBackend};
use crate::error::Result;
use crate::sys::{
    vfio::{VfioBackend, VfioConfig},
    vfio_user::VfioUserBackend,
    Bdf,
};

/// Which API a context may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Applications: PDs, MRs, CQs, QPs.
    Application,
    /// The node's controller: everything an application may, plus [`crate::ctl`].
    Controller,
}

/// An open device, as an application or the controller sees it.
#[derive(Clone, Debug)]
pub struct Context {
    dev: Arc<Device>,
    role: Role,
}

impl Context {
    /// Opens `bdf` through VFIO (the device must be bound to vfio-pci; see `mrcctl bind`).
    ///
    /// # Errors
    /// Every VFIO and bring-up step, with the device named.
    pub fn open(bdf: Bdf, role: Role) -> Result<Context> {
        let backend = VfioBackend::open_device(
            bdf,
            &VfioConfig {
                max_vectors: 8,
                ..VfioConfig::default()
            },
        )?;
        Self::from_backend(Arc::new(backend), &DeviceConfig::default(), role)
    }

    /// Opens the device a vfio-user server serves on the unix socket `path` (e.g. a NIC of
    /// `mrc-sim serve SCENARIO --socket-dir DIR`, at `DIR/nicNN.sock`; see
    /// [`crate::sys::vfio_user::list_devices`]).
    ///
    /// # Errors
    /// As [`VfioUserBackend::connect`] (no socket, nobody listening, a busy or silent server),
    /// then as [`Device::open`].
    pub fn open_vfio_user(path: &Path, role: Role) -> Result<Context> {
        let backend = VfioUserBackend::connect(path)?;
        Self::from_backend(Arc::new(backend), &DeviceConfig::default(), role)
    }

    /// Brings up the device behind any backend (simulator, test twin) and opens a context.
    ///
    /// # Errors
    /// As [`Device::open`].
    pub fn from_backend(backend: SharedBackend, cfg: &DeviceConfig, role: Role) -> Result<Context> {
        Ok(Context {
            dev: Device::open(backend, cfg)?,
            role,
        })
    }

    /// Another context on an already open device (one process owns a device; its controller
    /// and applications share it).
    pub fn from_device(dev: &Arc<Device>, role: Role) -> Context {
        Context {
            dev: dev.clone(),
            role,
        }
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }
    /// This context's role.
    pub fn role(&self) -> Role {
        self.role
    }
    /// Device attributes.
    pub fn attrs(&self) -> &DeviceAttrs {
        self.dev.attrs()
    }
    /// The NIC's address, exchanged with peers.
    pub fn gid(&self) -> [u8; 16] {
        self.dev.attrs().gid
    }

    /// Allocates a protection domain.
    ///
    /// # Errors
    /// Device errors.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        ProtectionDomain::new(&self.dev)
    }

    /// A completion channel: an interrupt vector with an fd for epoll.
    ///
    /// # Errors
    /// [`crate::Error::DeviceGone`].
    pub fn create_comp_channel(&self) -> Result<CompletionChannel> {
        CompletionChannel::new(&self.dev)
    }

    /// A CQ of at least `depth` entries (rounded up to a power of two), reporting to `channel`.
    ///
    /// # Errors
    /// Bad depth, device errors.
    pub fn create_cq(
        &self,
        depth: u32,
        channel: Option<&CompletionChannel>,
    ) -> Result<CompletionQueue> {
        CompletionQueue::new(&self.dev, depth, channel)
    }

    /// The next asynchronous event (QP fatal, CQ error, port, EV state, probe result), if any.
    ///
    /// # Errors
    /// [`crate::Error::DeviceGone`], malformed records.
    pub fn poll_async_event(&self) -> Result<Option<AsyncEvent>> {
        self.dev.poll_event()
    }

    /// Waits up to `timeout` for an asynchronous event.
    ///
    /// # Errors
    /// As [`Context::poll_async_event`].
    pub fn wait_async_event(&self, timeout: Duration) -> Result<Option<AsyncEvent>> {
        let start = Instant::now();
        let mut spins = 0;
        loop {
            if let Some(e) = self.dev.poll_event()? {
                return Ok(Some(e));
            }
            if start.elapsed() >= timeout {
                return Ok(None);
            }
            backoff(&mut spins);
        }
    }
}
