//! # lib_mrc.so
#![deny(unsafe_code)]

pub mod ctypes;
