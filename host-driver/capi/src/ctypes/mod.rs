//! The C types of the three headers this library implements, in Rust: `verbs.h` (rdma-core 44),
//! `mrc.h` and `mrc_ctl.h` (OCP MRC API 1.0.1). Plain data: raw pointer fields are handles or
//! caller memory that only [`crate::ffi`] dereferences.
#![allow(non_camel_case_types, missing_docs)]

pub mod ctl;
pub mod mrc;
pub mod verbs;
