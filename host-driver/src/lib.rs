//! # mrc-driver: the host side of MRC NICs
#![deny(unsafe_code)]

pub mod sys;
