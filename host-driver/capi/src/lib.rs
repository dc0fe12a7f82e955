//! # lib_mrc.so: the OCP MRC C API on mrc-driver
//!
//! This crate builds `lib_mrc.so`, the C library OCP's MRC headers (`mrc.h`, `mrc_ctl.h`, API
//! 1.0.1) describe, ABI-exact, implemented on [`mrc_driver`]'s application and controller APIs;
//! and the libibverbs calls those programs make for device discovery, contexts, protection
//! domains and memory registration, exported with rdma-core's symbol versions so a program
//! built against Debian's libibverbs-dev runs on MRC devices unchanged. The devices are the
//! vfio-user sockets of `$MRC_VFIO_USER_DIR` (`mrc-sim serve ... --socket-dir DIR`).
//!
//! # Contract
//! - **Layouts** are the headers': every struct, enum and constant is declared in [`ctypes`]
//!   and checked against the real headers by a test compiling C against them.
//! - **Errors** follow each function's header: `-1` with `errno`, `NULL` with `errno`, the
//!   errno value itself ("errors like ibv_post_send()"), or minus it
//!   (`mrc_ctl_poll_ev_event`); the message goes to stderr (`MRC_CAPI_LOG=off` silences it)
//!   and to `mrc_capi_last_error()`.
//! - **Handles** are checked before use: NULL, foreign, freed and wrong-kind handles are
//!   `EINVAL`, never a dereference ([`handle`]). A dead device makes calls fail with `EIO`;
//!   every wait is bounded or checks the device.
//! - **Unsafe code** lives in [`ffi`] only, one `// SAFETY:` per block.
//!
//! # Layers
//! | module | role |
//! |---|---|
//! | [`ffi`] | the exported C functions: pointer checks, copies, conventions |
//! | [`verbs`], [`device`] | libibverbs objects, discovery, port / GID / device attributes |
//! | [`context`], [`cq`], [`qp`], [`qp_attr`] | the application API (`mrc.h`) |
//! | [`ctl`] | the controller API (`mrc_ctl.h`) |
//! | [`events`] | one device event queue routed to async events, EV event CQs and probes |
//! | [`handle`], [`state`], [`error`] | handles, the object tables, errno and messages |
//!
//! ```
//! // The library's own Rust view of a C call (the rlib exports the same functions).
//! let mut v = [0u32; 4];
//! let [a, b, c, d] = &mut v;
//! _mrc::ffi::app::mrc_query_version(a, b, c, d);
//! assert_eq!(v[0], _mrc::ctypes::mrc::MRC_API_CURRENT_VERSION);
//! ```
#![deny(unsafe_code)]

pub mod context;
pub mod cq;
pub mod ctl;
pub mod ctypes;
pub mod device;
pub mod error;
pub mod events;
pub mod ffi;
pub mod handle;
pub mod qp;
pub mod qp_attr;
pub mod state;
pub mod verbs;
