//! What answers each shard's datapath blocks: the models (`model` level) or the Verilator-built
//! RTL (`rtl` level, `[nic.datapath] level = "rtl"`, `mrc-sim run --datapath rtl`).
//!
//! At the `rtl` level each shard's stage hands its block transactions to
//! `mrc_rtl_cosim::sim::RtlBlocks`, which runs one `ev_sprayer` instance per QP context of the
//! shard: every EV decision of every packet (data, retransmissions, ACKs and NACKs) and every
//! EV table write the firmware makes is the RTL's. The timing is the same at both levels (the
//! datapath clock of `dp_clock`, from the table the RTL is measured against), so a correct RTL
//! gives the model level's run bit for bit.
//!
//! The RTL is linked only into a build with the `rtl` cargo feature (it verilates and compiles
//! the blocks, minutes of C++): `cargo build --release --features rtl`. Other builds refuse the
//! level with an error naming the feature.

use mrc_firmware::datapath::blocks::{Blocks, SprayerCmd, SprayerRsp};

#[cfg(feature = "rtl")]
use super::config::RtlBlock;
use super::config::{DatapathLevel, DatapathLevelConfig, NicError};
use super::shard::Shard;

/// What the RTL blocks of a NIC did over a run (all zero at the model level).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RtlReport {
    /// Sprayer transactions the RTL answered.
    pub sprayer_transactions: u64,
    /// Clocks the sprayer instances were stepped.
    pub sprayer_cycles: u64,
    /// Sprayer instances made.
    pub sprayer_instances: u64,
    /// RTL responses that differed from the model's shadow (0 for a correct RTL).
    pub differ: u64,
    /// The first of them.
    pub first_difference: Option<String>,
}

impl RtlReport {
    /// Adds `o` (the first difference kept is the first one of `self`, else `o`'s).
    pub fn add(&mut self, o: &RtlReport) {
        self.sprayer_transactions += o.sprayer_transactions;
        self.sprayer_cycles += o.sprayer_cycles;
        self.sprayer_instances += o.sprayer_instances;
        self.differ += o.differ;
        if self.first_difference.is_none() {
            self.first_difference.clone_from(&o.first_difference);
        }
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
                RtlReport {
                    sprayer_transactions: s.sprayer_transactions,
                    sprayer_cycles: s.sprayer_cycles,
                    sprayer_instances: s.sprayer_instances,
                    differ: s.differ,
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
