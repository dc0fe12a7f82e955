//! # mrc-driver: the host side of MRC NICs
//!
//! A user-space driver for MRC NICs and the application and controller APIs on top of it.
//!
//! | layer | module | contract |
//! |---|---|---|
//! | MMIO, DMA, interrupts | [`sys`] | the only unsafe code; [`sys::Backend`] is the boundary (VFIO, test twin, simulator) |
//! | device | [`device`] | discovery, ABI handshake, reset, admin + event queues, surprise removal |
//! | rings | [`queue`] | power-of-two rings, owner bits, batched doorbells after `fence(Release)`, heap-free |
//! | application API | [`api`] | contexts, PDs, MRs, CQs, QPs, posting, polling, events, connection helper |
//! | controller API | [`ctl`] | ports, EV format / EV / CC profiles, EV deny / replace / query / probe, path planner |
//!
//! Every wait is bounded; a device that disappears turns every later call into
//! [`Error::DeviceGone`]; misuse is a typed [`Error`], never undefined behaviour.
//!
//! ```no_run
//! use mrc_driver::api::{Context, Role};
//! let ctx = Context::open("0000:00:04.0".parse().unwrap(), Role::Application)?;
//! let pd = ctx.alloc_pd()?;
//! let cq = ctx.create_cq(256, None)?;
//! # Ok::<(), mrc_driver::Error>(())
//! ```
#![deny(unsafe_code)]

pub mod api;
pub mod ctl;
pub mod device;
pub mod error;
pub mod queue;
pub mod sys;

pub use error::{Error, Result};
/// The byte-view traits (`IntoBytes`, `FromBytes`) of the ABI's descriptor types, for device
/// models built on this crate.
pub use zerocopy;
