//! # mrc-rtl-cosim: RTL blocks checked against `mrc_firmware::datapath`
//!
//! The build script verilates each block of `fpga-rtl/rtl/` twice (as is, and with
//! `-DPLANTED_BUG`) and links them through `csrc/shim.cpp`. Each harness here drives one block
//! clock by clock with random stimulus and random back-pressure, applies every accepted command
//! to the matching Rust model at the same time (one model call = one RTL transaction), and
//! compares every response (and the block's counters) with the model's. The first difference
//! is returned as a [`Mismatch`]; the caller reruns the same seed with a VCD path to get a
//! waveform.
//!
//! | block | model | transaction |
//! |---|---|---|
//! | `ev_sprayer` | `Sprayer<256, 4>` | one command (next_ev or a firmware write) -> one response |
//! | `rx_psn_tracker` | `RxBitmap<4>` | one receive / sack / reset -> one response |
//! | `csr_event_queue` | [`queue::RingModel`] (ABI ring arithmetic) | one push or pop |
//! | `hdr_builder` | `mrc_abi::wire::Frame::emit` | one descriptor -> the header beats |
//!
//! Without Verilator (`cfg(no_verilator)`) only [`Rng`], the report types, [`hdr::vectors`],
//! [`skip_missing`] and [`sim`] (whose constructor then says why it cannot run) exist.
//!
//! [`sim`] puts the blocks into the simulator's datapath stage (`mrc-sim --datapath rtl`).
//!
//! [`timing`] measures each block's latency and initiation interval and holds them to
//! `mrc_abi::device::datapath_timing`, the table the simulator's NIC is clocked with.
//!
//! The tests: `tests/cosim.rs` (the co-simulations and planted bugs), `tests/timing.rs` (the
//! timing table against the RTL), `tests/icarus.rs` (the plain
//! SystemVerilog benches of `fpga-rtl/tb/` under Icarus, each also against its planted bug, and
//! the freshness of `tb/vectors/`), `tests/lint.rs` (Verilator `-Wall`, Yosys read, Icarus compile
//! of every block).
//!
//! The only unsafe code is the C ABI of the Verilated models, in `ffi` ([`Rtl`]).
#![deny(unsafe_code)]

use std::fmt;
use std::path::Path;

pub mod hdr;
#[cfg(not(no_verilator))]
pub mod queue;
#[cfg(not(no_verilator))]
pub mod rx;
pub mod sim;
#[cfg(not(no_verilator))]
pub mod sprayer;
#[cfg(not(no_verilator))]
pub mod timing;

/// True when the build script found Verilator and linked the models.
pub const HAVE_VERILATOR: bool = cfg!(not(no_verilator));

/// For tests that need an external `tool`: true (skip) when it is missing, after printing
/// `SKIPPED: <tool> not found`; false when `present`.
///
/// # Panics
/// When the tool is missing and the `CI` environment variable is set: CI must run every test.
pub fn skip_missing(tool: &str, present: bool) -> bool {
    if present {
        return false;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{tool} not found, and it is required in CI"
    );
    println!("SKIPPED: {tool} not found");
    true
}

/// The RTL blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// `ev_sprayer.sv`.
    Sprayer = 0,
    /// `rx_psn_tracker.sv`.
    RxTracker = 1,
    /// `csr_event_queue.sv`.
    CsrQueue = 2,
    /// `hdr_builder.sv`.
    HdrBuilder = 3,
}

/// Outcome of a clean run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Clocks simulated.
    pub cycles: u64,
    /// Transactions compared against the model.
    pub transactions: u64,
}

/// The first difference between the RTL and the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Clock of the difference.
    pub cycle: u64,
    /// Transactions compared before it.
    pub transaction: u64,
    /// What differed.
    pub what: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cycle {} (transaction {}): {}",
            self.cycle, self.transaction, self.what
        )
    }
}

/// Run `block` for `cycles` clocks from `seed`; `bug` selects the planted-bug model, `vcd` writes
/// a waveform.
#[cfg(not(no_verilator))]
pub fn run(
    block: Block,
    seed: u64,
    cycles: u64,
    bug: bool,
    vcd: Option<&Path>,
) -> Result<Report, Mismatch> {
    let rtl = Rtl::new(block, bug, vcd);
    match block {
        Block::Sprayer => sprayer::run(rtl, seed, cycles),
        Block::RxTracker => rx::run(rtl, seed, cycles),
        Block::CsrQueue => queue::run(rtl, seed, cycles),
        Block::HdrBuilder => hdr::run(rtl, seed, cycles),
    }
}

/// Without Verilator there is nothing to run.
#[cfg(no_verilator)]
pub fn run(
    _block: Block,
    _seed: u64,
    _cycles: u64,
    _bug: bool,
    _vcd: Option<&Path>,
) -> Result<Report, Mismatch> {
    Err(Mismatch {
        cycle: 0,
        transaction: 0,
        what: "verilator not found at build time".into(),
    })
}

/// Deterministic xorshift64* generator (the same seed gives the same run).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// A random bool.
    pub fn bit(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
}

#[cfg(not(no_verilator))]
mod ffi;
#[cfg(not(no_verilator))]
pub use ffi::Rtl;

/// Input port values, packed in the shim's order: one word per port up to 32 bits, two up to
/// 64, `bits/32` words (LSW first) above.
#[derive(Debug, Default, Clone)]
pub struct Words(pub Vec<u32>);

impl Words {
    /// A port of up to 64 bits.
    pub fn u(&mut self, v: u64, bits: u32) -> &mut Self {
        self.0.push(v as u32);
        if bits > 32 {
            self.0.push((v >> 32) as u32);
        }
        self
    }
    /// A one-bit port.
    pub fn b(&mut self, v: bool) -> &mut Self {
        self.u(u64::from(v), 1)
    }
    /// A wide port from its bytes, byte 0 = bits 7:0.
    pub fn bytes_le(&mut self, bytes: &[u8]) -> &mut Self {
        for c in bytes.chunks(4) {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            self.0.push(u32::from_le_bytes(w));
        }
        self
    }
}

/// Output port values, read in the shim's order.
#[derive(Debug, Clone)]
pub struct Out {
    w: [u32; 128],
    pos: usize,
}

impl Out {
    /// The next port of up to 64 bits.
    pub fn u(&mut self, bits: u32) -> u64 {
        let mut v = u64::from(self.w[self.pos]);
        self.pos += 1;
        if bits > 32 {
            v |= u64::from(self.w[self.pos]) << 32;
            self.pos += 1;
        }
        v
    }
    /// The next one-bit port.
    pub fn b(&mut self) -> bool {
        self.u(1) != 0
    }
    /// The next wide port as bytes (byte 0 = bits 7:0).
    pub fn bytes_le(&mut self, bits: usize) -> Vec<u8> {
        let words = bits / 32;
        let mut v = Vec::with_capacity(bits / 8);
        for i in 0..words {
            v.extend_from_slice(&self.w[self.pos + i].to_le_bytes());
        }
        self.pos += words;
        v
    }
}

/// Shorthand for a mismatch.
#[cfg(not(no_verilator))]
pub(crate) fn mismatch(cycle: u64, transaction: u64, what: String) -> Mismatch {
    Mismatch {
        cycle,
        transaction,
        what,
    }
}
