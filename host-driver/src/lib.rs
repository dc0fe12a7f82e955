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
//! use mrc_driver::api::*;
//!
//! let ctx = Context::open("0000:3b:00.0".parse()?, Role::Application)?;
//! let pd = ctx.alloc_pd()?;
//! let mr = pd.reg_mr(1 << 20, Access::ALL)?;
//! let mut cq = ctx.create_cq(256, None)?;
//! let attr = QpInitAttr { send_cq: &cq, recv_cq: &cq, sq_depth: 256, rq_depth: 64, hint: QpHint::default() };
//! let mut qp = pd.create_qp(&attr)?;
//! qp.modify_init(&InitAttr::default())?; // the device's default EV and CC profiles
//! // Learn the peer's QPN, address (its `ctx.gid()`), rkey and buffer out of band
//! // (`api::connect` does it over TCP), then:
//! let (peer_qpn, peer_gid, peer_rkey, peer_addr) = (7, [0u8; 16], 0x1234, 0x10_0000);
//! qp.modify_rtr(&RtrAttr {
//!     dest_qpn: peer_qpn, remote_addr: peer_gid, rq_psn: 0,
//!     responder_mpr: 4, max_wimm: 16, dynamic_mpr: false,
//! })?;
//! qp.modify_rts(&RtsAttr { sq_psn: 0, requester_mpr: 4, max_wimm: 16, retry_count: 7, ack_timeout_exp: 7 })?;
//! let sge = [mr.sge(0, 4096)?];
//! qp.post_send(&[SendWr {
//!     wr_id: 1, op: WriteOp::Write, sg_list: &sge, remote_addr: peer_addr, rkey: peer_rkey,
//!     signaled: true, solicited: false, fence: false,
//! }])?;
//! let mut wcs = [WorkCompletion::default(); 32];
//! let done = cq.poll(&mut wcs)?;
//! # let _ = done;
//! # Ok::<(), Box<dyn std::error::Error>>(())
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
