//! The crate's only unsafe code: the Verilated blocks behind the C ABI of `csrc/shim.cpp`.
//!
//! [`Rtl`] owns one model instance; every call passes arrays of [`PORT_WORDS`] words, more than
//! any block reads or writes.
#![allow(unsafe_code)]

use std::path::Path;

use crate::{Block, Out, Words};

mod c {
    use std::os::raw::{c_char, c_int, c_void};
    extern "C" {
        pub fn mrc_rtl_new(block: c_int, bug: c_int, vcd: *const c_char) -> *mut c_void;
        pub fn mrc_rtl_step(h: *mut c_void, input: *const u32, output: *mut u32);
        pub fn mrc_rtl_step_after(h: *mut c_void, input: *const u32, output: *mut u32);
        pub fn mrc_rtl_free(h: *mut c_void);
    }
}

/// Words per port array (the widest block, hdr_builder, needs 82 input and 22 output words).
pub(crate) const PORT_WORDS: usize = 128;

/// One Verilated model instance.
pub struct Rtl {
    handle: *mut std::os::raw::c_void,
}

impl Rtl {
    /// Instantiate and reset a model.
    pub fn new(block: Block, bug: bool, vcd: Option<&Path>) -> Self {
        Self::with_id(block as i32, bug, vcd)
    }

    /// Instantiate and reset model `id` of the shim (`Block as i32`, or a simulator instance:
    /// [`crate::sim`]).
    pub(crate) fn with_id(id: i32, bug: bool, vcd: Option<&Path>) -> Self {
        let path = vcd.map(|p| {
            std::ffi::CString::new(p.to_string_lossy().as_bytes()).expect("VCD path without NUL")
        });
        let ptr = path.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        // SAFETY: the shim copies nothing from `ptr` beyond the call; an unknown id gives null.
        let handle = unsafe { c::mrc_rtl_new(id, i32::from(bug), ptr) };
        assert!(!handle.is_null(), "no model {id}");
        Rtl { handle }
    }

    /// One clock: drive `input`, return the outputs seen before the rising edge.
    pub fn step(&mut self, input: &Words) -> Out {
        self.clock(input, false)
    }

    /// One clock: drive `input`, return the outputs after the rising edge (what the next
    /// clock starts from: a registered response to the input taken at this edge).
    pub fn step_after(&mut self, input: &Words) -> Out {
        self.clock(input, true)
    }

    fn clock(&mut self, input: &Words, after: bool) -> Out {
        let mut out = [0u32; PORT_WORDS];
        assert!(input.0.len() <= PORT_WORDS);
        let mut buf = [0u32; PORT_WORDS];
        buf[..input.0.len()].copy_from_slice(&input.0);
        let step = if after {
            c::mrc_rtl_step_after
        } else {
            c::mrc_rtl_step
        };
        // SAFETY: both arrays hold PORT_WORDS words, more than any block reads or writes.
        unsafe { step(self.handle, buf.as_ptr(), out.as_mut_ptr()) };
        Out { w: out, pos: 0 }
    }
}

// SAFETY: an `Rtl` owns its model instance alone (made in `new`, freed once in `drop`) and every
// call into it takes `&mut self`, so it is never used from two threads at once; the instance
// has its own `VerilatedContext` and keeps no pointer to the thread that made it, so it may
// move to another thread (the simulator builds its NICs on worker threads).
unsafe impl Send for Rtl {}

impl Drop for Rtl {
    fn drop(&mut self) {
        // SAFETY: the handle came from mrc_rtl_new and is freed once.
        unsafe { c::mrc_rtl_free(self.handle) };
    }
}
