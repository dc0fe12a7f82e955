//! The RTL blocks as the simulator's datapath: [`RtlBlocks`] answers the datapath stage's block
//! transactions (`mrc_firmware::datapath::blocks`) with the Verilator-built blocks, so the
//! packets and reports of a simulated run are decided by the RTL (`mrc-sim`'s `rtl` datapath
//! level).
//!
//! | block | instance | parameters |
//! |---|---|---|
//! | `ev_sprayer` | one per QP context of the stage (the RTL block holds one QP's EV table; a NIC swaps contexts in and out of it, which costs no time here) | N = 256, P = 8 (the simulated NIC's 8 planes at most) |
//! | `rx_psn_tracker` | one per QP context, as the sprayer | WORDS = 8 (a 512-PSN window, the simulator's; a stage with a smaller window never hands it a PSN beyond its own) |
//! | `hdr_builder` | one per stage: every packet the stage sends | SEGS = 4 (the co-simulation's instance) |
//! | `csr_event_queue` | one per stage: the DP->FW reports | LOG2_ENTRIES = 8 (the stage's 256-entry event queue) |
//!
//! A sprayer or tracker transaction is one clock of the block: its command accepted at the
//! edge (the previous response taken in the same clock) and its registered response read
//! after the edge (the blocks' latency is one clock). A header takes the clocks of its beats
//! (the descriptor accepted at one edge, one 64-byte beat per clock after it); the header
//! bytes are compared with `Frame::emit`'s and parsed back (`Frame::parse`) into the packet
//! the stage sends. An event queue push or pop is one clock (the push with the producer index
//! read after the edge, the pop with the entry and the consumer index read before it). The
//! simulator's timing of every block is `dp_clock`'s.
//!
//! The model runs beside each block as the stage's shadow; every response is compared with
//! the model's and a difference is counted per block ([`BlockStats::differ`], with the first
//! one described) while the run goes on with the RTL's answer.
//!
//! Planted bugs of the simulator's instances: the sprayer is built with `-DPLANTED_BUG_PLANE`
//! (the plane cursor skips plane 1 after a pick on plane 0), not the co-simulation's
//! `-DPLANTED_BUG` (skip-once flags never cleared), which the small differential scenario
//! would leave unexercised (skip-once flags come only from persistent ECN); the tracker with
//! `-DPLANTED_BUG_SACK` (the SACK bitmap never reports the PSN after its base), not the
//! co-simulation's window-edge bug, which the stage's own window check keeps from it.
//!
//! Without Verilator at build time, [`RtlBlocks::new`] returns [`Unavailable`].

use std::fmt;

#[cfg(no_verilator)]
use mrc_firmware::datapath::blocks::Blocks;

use crate::Block;
#[cfg(not(no_verilator))]
use crate::Rtl;

/// The shim's ids of the simulator's instances (`csrc/shim.cpp`).
#[cfg(not(no_verilator))]
const SPRAYER_P8: i32 = 4;
#[cfg(not(no_verilator))]
const TRACKER_W8: i32 = 5;
#[cfg(not(no_verilator))]
const QUEUE_256: i32 = 6;

/// Planes of the simulator's sprayer instance.
pub const SIM_PLANES: usize = 8;

/// Window words of the simulator's tracker instance.
pub const SIM_WORDS: usize = 8;

/// log2 entries of the simulator's event queue instance (the stage's `EVENT_CAP`).
pub const SIM_QUEUE_LOG2: u8 = 8;

const _: () = assert!(1 << SIM_QUEUE_LOG2 == mrc_firmware::datapath::stage::EVENT_CAP);

/// Why the RTL level cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable(pub &'static str);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Unavailable {}

/// What one RTL block did over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Transactions (commands with their responses; headers built; queue pushes and pops).
    pub transactions: u64,
    /// Clocks its instances were stepped.
    pub cycles: u64,
    /// Instances made.
    pub instances: u64,
    /// Responses that differed from the model's.
    pub differ: u64,
}

/// What the RTL blocks did over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RtlStats {
    /// `ev_sprayer` (one instance per QP context, again after each reset).
    pub sprayer: BlockStats,
    /// `rx_psn_tracker` (one instance per QP context, again after each reset).
    pub rx_tracker: BlockStats,
    /// `hdr_builder`.
    pub hdr_builder: BlockStats,
    /// `csr_event_queue`.
    pub event_queue: BlockStats,
    /// The first difference of any block.
    pub first_difference: Option<String>,
}

impl RtlStats {
    /// Responses of every block that differed from the model's.
    pub fn differ(&self) -> u64 {
        self.sprayer.differ
            + self.rx_tracker.differ
            + self.hdr_builder.differ
            + self.event_queue.differ
    }
}

/// The stage's blocks answered by the RTL. See the module docs.
pub struct RtlBlocks {
    /// The planted-bug variant of this block is instantiated.
    bug: Option<Block>,
    #[cfg(not(no_verilator))]
    sprayers: Vec<Option<Rtl>>,
    #[cfg(not(no_verilator))]
    trackers: Vec<Option<Rtl>>,
    #[cfg(not(no_verilator))]
    hdr: Option<Rtl>,
    #[cfg(not(no_verilator))]
    queue: Option<Rtl>,
    /// Entries pushed into and popped from the event queue (the model's free-running
    /// producer and consumer indices).
    #[cfg(not(no_verilator))]
    queue_pushed: u32,
    #[cfg(not(no_verilator))]
    queue_popped: u32,
    stats: RtlStats,
}

impl fmt::Debug for RtlBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RtlBlocks")
            .field("bug", &self.bug)
            .field("stats", &self.stats)
            .finish()
    }
}

impl RtlBlocks {
    /// RTL blocks, the planted-bug variant of `bug` among them.
    ///
    /// # Errors
    /// [`Unavailable`] when Verilator was not found when this crate was built, or `bug` is
    /// the event queue (whose simulator instance has no planted-bug variant).
    pub fn new(bug: Option<Block>) -> Result<RtlBlocks, Unavailable> {
        if !crate::HAVE_VERILATOR {
            return Err(Unavailable(
                "the rtl datapath level needs Verilator when mrc-rtl-cosim is built \
                 (apt-get install verilator, then rebuild)",
            ));
        }
        if bug == Some(Block::CsrQueue) {
            return Err(Unavailable(
                "the simulator's csr_event_queue has no planted-bug variant (the \
                 co-simulation's, a full ring, never happens in the stage)",
            ));
        }
        Ok(RtlBlocks {
            bug,
            #[cfg(not(no_verilator))]
            sprayers: Vec::new(),
            #[cfg(not(no_verilator))]
            trackers: Vec::new(),
            #[cfg(not(no_verilator))]
            hdr: None,
            #[cfg(not(no_verilator))]
            queue: None,
            #[cfg(not(no_verilator))]
            queue_pushed: 0,
            #[cfg(not(no_verilator))]
            queue_popped: 0,
            stats: RtlStats::default(),
        })
    }

    /// What the blocks did so far.
    pub fn stats(&self) -> &RtlStats {
        &self.stats
    }
}

#[cfg(not(no_verilator))]
mod verilated;

/// Without Verilator no [`RtlBlocks`] is ever made ([`RtlBlocks::new`] fails); the models
/// answer.
#[cfg(no_verilator)]
impl Blocks for RtlBlocks {}
