//! What answers each shard's datapath blocks: the models (`model` level) or the Verilator-built
//! RTL (`rtl` level, `[nic.datapath] level = "rtl"`, `mrc-sim run --datapath rtl`).
//!
//! At the `rtl` level each shard's stage hands its block transactions to
//! `mrc_rtl_cosim::sim::RtlBlocks`, which runs the four Verilator-built blocks of
//! `fpga-rtl/rtl`: an `ev_sprayer` and an `rx_psn_tracker` per QP context of the shard, an
//! `hdr_builder` and a `csr_event_queue` per shard. Every EV decision of every packet (data,
//! retransmissions, ACKs and NACKs) and every EV table write the firmware makes is the RTL's;
//! so are the cumulative PSN and SACK of every ACK and NACK, the headers of every packet sent
//! (built, then parsed back into the packet that goes on the wire), and every report the
//! firmware takes from the stage. The timing is the same at both levels (the datapath clock of
//! `dp_clock`, from the table the RTL is measured against), so a correct RTL gives the model
//! level's run bit for bit. The report counts, per block, the transactions, the clocks and the
//! answers that differed from the model's (`RtlReport`).
//!
//! The RTL is linked only into a build with the `rtl` cargo feature (it verilates and compiles
//! the blocks, minutes of C++): `cargo build --release --features rtl`. Other builds refuse the
//! level with an error naming the feature.

use mrc_abi::device::csr::CsrEntry;
use mrc_firmware::datapath::blocks::{Blocks, RxTrackerCmd, RxTrackerRsp, SprayerCmd, SprayerRsp};
use mrc_firmware::datapath::packet::Packet;

#[cfg(feature = "rtl")]
use super::config::RtlBlock;
use super::config::{DatapathLevel, DatapathLevelConfig, NicError};
use super::shard::Shard;

/// What one RTL block of a NIC did over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RtlBlockReport {
    /// Transactions the RTL answered (commands; headers built; event queue pushes and pops).
    pub transactions: u64,
    /// Clocks its instances were stepped.
    pub cycles: u64,
    /// Instances made.
    pub instances: u64,
    /// Answers that differed from the model's shadow (0 for a correct RTL).
    pub differ: u64,
}

impl RtlBlockReport {
    fn add(&mut self, o: &RtlBlockReport) {
        self.transactions += o.transactions;
        self.cycles += o.cycles;
        self.instances += o.instances;
        self.differ += o.differ;
    }
}

/// What the RTL blocks of a NIC did over a run (all zero at the model level).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RtlReport {
    /// `ev_sprayer`.
    pub ev_sprayer: RtlBlockReport,
    /// `rx_psn_tracker`.
    pub rx_psn_tracker: RtlBlockReport,
    /// `hdr_builder`.
    pub hdr_builder: RtlBlockReport,
    /// `csr_event_queue`.
    pub csr_event_queue: RtlBlockReport,
    /// Answers of every block that differed from the model's (0 for a correct RTL).
    pub differ: u64,
    /// The first of them.
    pub first_difference: Option<String>,
}

impl RtlReport {
    /// Adds `o` (the first difference kept is the first one of `self`, else `o`'s).
    pub fn add(&mut self, o: &RtlReport) {
        self.ev_sprayer.add(&o.ev_sprayer);
        self.rx_psn_tracker.add(&o.rx_psn_tracker);
        self.hdr_builder.add(&o.hdr_builder);
        self.csr_event_queue.add(&o.csr_event_queue);
        self.differ += o.differ;
        if self.first_difference.is_none() {
            self.first_difference.clone_from(&o.first_difference);
        }
    }

    /// Each block's report with its module name.
    pub fn blocks(&self) -> [(&'static str, &RtlBlockReport); 4] {
        [
            ("ev_sprayer", &self.ev_sprayer),
            ("rx_psn_tracker", &self.rx_psn_tracker),
            ("hdr_builder", &self.hdr_builder),
            ("csr_event_queue", &self.csr_event_queue),
        ]
    }
}

/// A shard's datapath blocks.
pub(crate) enum SimBlocks {
    /// Every block is its model.
    Model,
    /// The RTL answers.
    #[cfg(feature = "rtl")]
    Rtl(Box<mrc_rtl_cosim::sim::RtlBlocks>),
}

impl SimBlocks {
    /// The blocks of one shard at `cfg`'s level.
    ///
    /// # Errors
    /// [`NicError::Config`] when the level is `rtl` and this build has no RTL (no `rtl`
    /// feature, or Verilator was missing when it was built).
    pub(crate) fn new(cfg: &DatapathLevelConfig) -> Result<SimBlocks, NicError> {
        match cfg.level {
            DatapathLevel::Model => Ok(SimBlocks::Model),
            DatapathLevel::Rtl => Self::rtl(cfg),
        }
    }

    #[cfg(feature = "rtl")]
    fn rtl(cfg: &DatapathLevelConfig) -> Result<SimBlocks, NicError> {
        use mrc_rtl_cosim::Block;
        let bug = cfg.planted_bug.map(|b| match b {
            RtlBlock::EvSprayer => Block::Sprayer,
            RtlBlock::RxPsnTracker => Block::RxTracker,
            RtlBlock::HdrBuilder => Block::HdrBuilder,
        });
        mrc_rtl_cosim::sim::RtlBlocks::new(bug)
            .map(|b| SimBlocks::Rtl(Box::new(b)))
            .map_err(|e| NicError::Config(e.0))
    }

    #[cfg(not(feature = "rtl"))]
    fn rtl(_cfg: &DatapathLevelConfig) -> Result<SimBlocks, NicError> {
        Err(NicError::Config(
            "the rtl datapath level needs mrc-sim built with the `rtl` cargo feature \
             (cargo run --release --features rtl -- ...; Verilator must be installed when it \
             builds)",
        ))
    }

    /// What the RTL did (zero at the model level).
    pub(crate) fn report(&self) -> RtlReport {
        match self {
            SimBlocks::Model => RtlReport::default(),
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => {
                let s = b.stats();
                let block = |x: &mrc_rtl_cosim::sim::BlockStats| RtlBlockReport {
                    transactions: x.transactions,
                    cycles: x.cycles,
                    instances: x.instances,
                    differ: x.differ,
                };
                RtlReport {
                    ev_sprayer: block(&s.sprayer),
                    rx_psn_tracker: block(&s.rx_tracker),
                    hdr_builder: block(&s.hdr_builder),
                    csr_event_queue: block(&s.event_queue),
                    differ: s.differ(),
                    first_difference: s.first_difference.clone(),
                }
            }
        }
    }
}

impl Blocks for SimBlocks {
    fn models_only(&self) -> bool {
        match self {
            SimBlocks::Model => true,
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.models_only(),
        }
    }

    fn sprayer_reset(&mut self, qp: u32) {
        match self {
            SimBlocks::Model => {}
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.sprayer_reset(qp),
        }
        let _ = qp;
    }

    fn sprayer(&mut self, qp: u32, cmd: SprayerCmd, model: &SprayerRsp) -> SprayerRsp {
        match self {
            SimBlocks::Model => {
                let _ = (qp, cmd);
                *model
            }
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.sprayer(qp, cmd, model),
        }
    }

    fn rx_tracker_reset(&mut self, qp: u32) {
        match self {
            SimBlocks::Model => {}
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.rx_tracker_reset(qp),
        }
        let _ = qp;
    }

    fn rx_tracker(&mut self, qp: u32, cmd: RxTrackerCmd, model: &RxTrackerRsp) -> RxTrackerRsp {
        match self {
            SimBlocks::Model => {
                let _ = (qp, cmd);
                *model
            }
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.rx_tracker(qp, cmd, model),
        }
    }

    fn header(&mut self, model: &Packet) -> Packet {
        match self {
            SimBlocks::Model => *model,
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.header(model),
        }
    }

    fn event_push(&mut self, entry: &CsrEntry) {
        match self {
            SimBlocks::Model => {}
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.event_push(entry),
        }
        let _ = entry;
    }

    fn event_pop(&mut self, model: &CsrEntry) -> CsrEntry {
        match self {
            SimBlocks::Model => *model,
            #[cfg(feature = "rtl")]
            SimBlocks::Rtl(b) => b.event_pop(model),
        }
    }
}

impl Shard {
    /// The shard's blocks become `b` (before its first QP command: a stand-in takes the
    /// blocks from their reset state).
    pub(crate) fn set_blocks(&mut self, b: SimBlocks) {
        match self {
            Shard::Wide(p) => p.dp.set_blocks(b),
            Shard::Narrow(p) => p.dp.set_blocks(b),
            Shard::Image(i) => i.dp.set_blocks(b),
        }
    }

    /// What the shard's RTL blocks did.
    pub(crate) fn rtl_report(&self) -> RtlReport {
        match self {
            Shard::Wide(p) => p.dp.blocks().report(),
            Shard::Narrow(p) => p.dp.blocks().report(),
            Shard::Image(i) => i.dp.blocks().report(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_level_answers_as_the_model() {
        let b = SimBlocks::new(&DatapathLevelConfig::default()).unwrap();
        assert!(b.models_only());
        assert_eq!(b.report(), RtlReport::default());
    }

    #[cfg(not(feature = "rtl"))]
    #[test]
    fn rtl_without_the_feature_names_it() {
        let cfg = DatapathLevelConfig::at(DatapathLevel::Rtl);
        let Err(NicError::Config(why)) = SimBlocks::new(&cfg) else {
            panic!("rtl built without the rtl feature");
        };
        assert!(why.contains("`rtl` cargo feature"), "{why}");
    }
}
