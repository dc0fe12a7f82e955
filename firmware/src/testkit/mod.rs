//! Test kit (feature `testkit`): two NICs — each the datapath stage and the firmware engine,
//! joined by their CSR queues — over a simulated multipath channel, with a checker, for tests,
//! the cost example, fuzzing and the NIC image self-test.
//!
//! `no_std`, no allocation: everything lives in fixed arrays, so the QEMU self-test can run it
//! (put the [`Pair`] in a `static` there: it holds a few hundred KiB).
//!
//! - [`nic`]: one NIC: stage + engine + the queues between them.
//! - [`channel`]: seeded loss, duplication, trimming, CE marks, bounded reordering, a
//!   blackholed EV, a plane outage.
//! - [`pair`]: two NICs with real payload bytes, a seeded workload both ways, a checker for
//!   exactly-once byte-exact delivery and completion order, virtual time that jumps to the next
//!   event.
//! - [`stream`]: a one-way bulk stream for cost measurement.
//! - [`fuzz_ops`]: NIC input sequences built from raw bytes, with invariant checks, for
//!   cargo-fuzz and proptest.
//!
//! ```
//! use mrc_firmware::testkit::{run_seed, pair::PairConfig};
//! let report = run_seed(PairConfig::chaos(1)).expect("seed 1 delivers everything");
//! assert!(report.completions > 0);
//! ```

pub mod channel;
pub mod fuzz_ops;
pub mod nic;
pub mod pair;
pub mod stream;

pub use channel::{Channel, ChannelConfig, ChannelCounters};
pub use nic::{HostWrite, Nic};
pub use pair::{Failure, Pair, PairConfig, Report};

crate::capacity! {
    /// The test kit's NIC: 2 QPs, 256 EVs over 4 planes, a 512-PSN window, 32-entry send and
    /// receive queues, 4 regions.
    pub struct TestKit {
        qps: 2, evs: 256, planes: 4, window_psns: 512, send_queue: 32, recv_queue: 32,
        regions: 4,
    }
}

/// Payload bytes carried per packet in checked runs (the MTU of [`PairConfig::chaos`]).
pub const CHECKED_PAYLOAD: usize = 128;

/// Build a checked [`Pair`] for `cfg` and run it to completion.
///
/// # Errors
/// The first [`Failure`].
pub fn run_seed(cfg: PairConfig) -> Result<Report, Failure> {
    Pair::<CHECKED_PAYLOAD>::new(cfg)?.run()
}
