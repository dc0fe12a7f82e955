//! Test kit (feature `testkit`): the real engines of two NICs over a simulated multipath
//! channel, with a checker, for tests, the cost example, fuzzing and the NIC image self-test.
//!
//! `no_std`, no allocation: everything lives in fixed arrays, so the QEMU self-test can run it
//! (put the [`Pair`] in a `static` there: it holds a few hundred KiB).
//!
//! - [`channel`]: seeded loss, duplication, trimming, CE marks, bounded reordering, a
//!   blackholed EV, a plane outage.
//! - [`pair`]: two NICs with real payload bytes, a seeded workload both ways, a checker for
//!   exactly-once byte-exact delivery and completion order, virtual time that jumps to the next
//!   event.
//! - [`fuzz_ops`]: engine input sequences built from raw bytes, with invariant checks, for
//!   cargo-fuzz and proptest.
//!
//! ```
//! use mrc_firmware::testkit::{run_seed, pair::PairConfig};
//! let report = run_seed(PairConfig::chaos(1)).expect("seed 1 delivers everything");
//! assert!(report.completions > 0);
//! ```

pub mod channel;
pub mod fuzz_ops;
pub mod pair;
pub mod stream;

use crate::engine::Engine;

pub use channel::{Channel, ChannelConfig, ChannelCounters};
pub use pair::{Failure, Pair, PairConfig, Report};

/// The engine the test kit runs: 2 QPs, 256 EVs over 4 planes, a 512-PSN window, 32-entry
/// send and receive queues, 4 regions, 8 timers.
pub type TkEngine = Engine<2, 256, 4, 512, 8, 32, 32, 4, 8>;

/// Payload bytes carried per packet in checked runs (the MTU of [`PairConfig::chaos`]).
pub const CHECKED_PAYLOAD: usize = 128;

/// Build a checked [`Pair`] for `cfg` and run it to completion.
///
/// # Errors
/// The first [`Failure`].
pub fn run_seed(cfg: PairConfig) -> Result<Report, Failure> {
    Pair::<CHECKED_PAYLOAD>::new(cfg)?.run()
}
