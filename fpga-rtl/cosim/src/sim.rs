//! The RTL blocks as the simulator's datapath: [`RtlBlocks`] answers the datapath stage's block
//! transactions (`mrc_firmware::datapath::blocks`) with the Verilator-built blocks, so every
//! packet of a simulated run is decided by the RTL (`mrc-sim`'s `rtl` datapath level).
//!
//! | block | instance | parameters |
//! |---|---|---|
//! | `ev_sprayer` | one per QP context of the stage (the RTL block holds one QP's EV table; a NIC swaps contexts in and out of it, which costs no time here) | N = 256, P = 8 (the simulated NIC's 8 planes at most) |
//!
//! One stage transaction is one clock of the block: its command accepted at the edge (the
//! previous response taken in the same clock) and its registered response read after the edge
//! (the block's latency is one clock; the simulator's timing of it is `dp_clock`'s). The model runs beside the block as the stage's
//! shadow; every response is compared with the model's and a difference is counted
//! ([`RtlStats::differ`], with the first one described) while the run goes on with the RTL's
//! answer.
//!
//! The planted-bug variant of the simulator's sprayer is built with `-DPLANTED_BUG_PLANE` (the
//! plane cursor skips plane 1 after a pick on plane 0), not the co-simulation's
//! `-DPLANTED_BUG` (skip-once flags never cleared): skip-once flags come only from persistent
//! ECN, which the small differential scenario never has, so that bug would go unexercised.
//!
//! Without Verilator at build time, [`RtlBlocks::new`] returns [`Unavailable`].

use std::fmt;

use mrc_firmware::datapath::blocks::{Blocks, SprayerCmd, SprayerRsp};
#[cfg(not(no_verilator))]
use mrc_firmware::datapath::SprayerError;

use crate::Block;
#[cfg(not(no_verilator))]
use crate::Rtl;

/// The shim's id of the sprayer at the simulator's parameters (`csrc/shim.cpp`).
#[cfg(not(no_verilator))]
const SPRAYER_P8: i32 = 4;

/// Planes of the simulator's sprayer instance.
pub const SIM_PLANES: usize = 8;

/// Why the RTL level cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable(pub &'static str);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Unavailable {}

/// What the RTL blocks did over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RtlStats {
    /// Sprayer transactions (commands with their responses).
    pub sprayer_transactions: u64,
    /// Clocks the sprayer instances were stepped.
    pub sprayer_cycles: u64,
    /// Sprayer instances made (one per QP context, again after each reset).
    pub sprayer_instances: u64,
    /// Responses that differed from the model's.
    pub differ: u64,
    /// The first difference.
    pub first_difference: Option<String>,
}

/// The stage's blocks answered by the RTL. See the module docs.
pub struct RtlBlocks {
    /// The planted-bug variant of this block is instantiated (co-simulation's `-DPLANTED_BUG`).
    bug: Option<Block>,
    #[cfg(not(no_verilator))]
    sprayers: Vec<Option<Rtl>>,
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
    /// [`Unavailable`] when Verilator was not found when this crate was built.
    pub fn new(bug: Option<Block>) -> Result<RtlBlocks, Unavailable> {
        if !crate::HAVE_VERILATOR {
            return Err(Unavailable(
                "the rtl datapath level needs Verilator when mrc-rtl-cosim is built \
                 (apt-get install verilator, then rebuild)",
            ));
        }
        Ok(RtlBlocks {
            bug,
            #[cfg(not(no_verilator))]
            sprayers: Vec::new(),
            stats: RtlStats::default(),
        })
    }

    /// What the blocks did so far.
    pub fn stats(&self) -> &RtlStats {
        &self.stats
    }

    #[cfg(not(no_verilator))]
    fn note_difference(&mut self, what: impl FnOnce() -> String) {
        self.stats.differ += 1;
        if self.stats.first_difference.is_none() {
            self.stats.first_difference = Some(what());
        }
    }

    /// QP `qp`'s sprayer instance, made fresh (reset) when there is none.
    #[cfg(not(no_verilator))]
    fn sprayer_rtl(&mut self, qp: u32) -> &mut Rtl {
        let i = qp as usize;
        if self.sprayers.len() <= i {
            self.sprayers.resize_with(i + 1, || None);
        }
        let bug = self.bug == Some(Block::Sprayer);
        let made = &mut self.stats.sprayer_instances;
        self.sprayers[i].get_or_insert_with(|| {
            *made += 1;
            Rtl::with_id(SPRAYER_P8, bug, None)
        })
    }

    /// One command through QP `qp`'s block: offered with the response port ready (so the
    /// block, `cmd_ready = !rsp_valid || rsp_ready`, takes it at the edge); the response is the
    /// registered one after that edge.
    #[cfg(not(no_verilator))]
    fn sprayer_transact(&mut self, qp: u32, cmd: SprayerCmd) -> Option<crate::sprayer::Rsp> {
        use crate::sprayer::{decode, encode};
        // (a block whose response port is ready takes a command in every clock: a few clocks
        // more mean a broken block, reported as no response)
        const CLOCKS_MAX: u64 = 4;
        let rtl = self.sprayer_rtl(qp);
        let input = encode(Some(cmd), true);
        let mut clocks = 0;
        let mut rsp = None;
        while clocks < CLOCKS_MAX && rsp.is_none() {
            // (`rsp_ready` high at the edge takes any earlier response, so a valid response
            // after the edge is this command's)
            let (_, rsp_valid, r) = decode(rtl.step_after(&input));
            clocks += 1;
            if rsp_valid {
                rsp = Some(r);
            }
        }
        self.stats.sprayer_cycles += clocks;
        self.stats.sprayer_transactions += 1;
        rsp
    }
}

#[cfg(not(no_verilator))]
impl Blocks for RtlBlocks {
    fn models_only(&self) -> bool {
        false
    }

    fn sprayer_reset(&mut self, qp: u32) {
        if let Some(s) = self.sprayers.get_mut(qp as usize) {
            *s = None;
        }
    }

    fn sprayer(&mut self, qp: u32, cmd: SprayerCmd, model: &SprayerRsp) -> SprayerRsp {
        use crate::sprayer::{counters, err_code};
        let Some(got) = self.sprayer_transact(qp, cmd) else {
            self.note_difference(|| format!("QP {qp} sprayer {cmd:?}: no response"));
            return SprayerRsp {
                pick: None,
                ..*model
            };
        };
        let want_err = err_code(model.err);
        if got.pick != model.pick || got.err != want_err || got.counters != counters(model.counters)
        {
            self.note_difference(|| {
                format!(
                    "QP {qp} sprayer {cmd:?}: rtl {got:?}, model pick {:?} err {want_err} counters {:?}",
                    model.pick,
                    counters(model.counters)
                )
            });
        }
        // The refusal the RTL's error code names, with the command's own fields.
        let err = match (got.err, cmd) {
            (0, _) => None,
            (1, c) => Some(SprayerError::IndexOutOfRange {
                index: match c {
                    SprayerCmd::SetEv(i, _)
                    | SprayerCmd::SetUsable(i, _)
                    | SprayerCmd::MarkSkip(i) => i,
                    _ => 0,
                },
            }),
            (2, c) => Some(SprayerError::BadWeight {
                weight: match c {
                    SprayerCmd::SetEv(_, s) => s.weight,
                    SprayerCmd::PlaneWeight(_, w) => w,
                    _ => 0,
                },
            }),
            (_, c) => Some(SprayerError::BadPlane {
                plane: match c {
                    SprayerCmd::SetEv(_, s) => s.plane,
                    SprayerCmd::PlaneWeight(p, _) => p,
                    _ => 0,
                },
            }),
        };
        // (the stage reads no counters from responses; the model's 64-bit ones are kept)
        SprayerRsp {
            pick: got.pick,
            err,
            counters: model.counters,
        }
    }
}

/// Without Verilator no [`RtlBlocks`] is ever made ([`RtlBlocks::new`] fails); the models
/// answer.
#[cfg(no_verilator)]
impl Blocks for RtlBlocks {}

#[cfg(all(test, not(no_verilator)))]
mod tests {
    use super::*;
    use mrc_firmware::datapath::{EvSlot, Sprayer};

    fn drive(
        blocks: &mut RtlBlocks,
        model: &mut Sprayer<256, SIM_PLANES>,
        cmd: SprayerCmd,
    ) -> SprayerRsp {
        let m = model.apply(cmd);
        blocks.sprayer(0, cmd, &m)
    }

    /// The sprayer instance answers as the model over a table of 8 planes, skip flags
    /// included; its planted-bug variant (plane cursor) differs.
    #[test]
    fn the_sim_sprayer_answers_as_the_model_and_its_planted_bug_differs() {
        for bug in [false, true] {
            let mut b = RtlBlocks::new(bug.then_some(Block::Sprayer)).unwrap();
            let mut m: Sprayer<256, SIM_PLANES> = Sprayer::new();
            for i in 0..64u16 {
                let slot = EvSlot {
                    usable: true,
                    weight: 1 + (i % 3) as u8,
                    plane: (i % 8) as u8,
                    skip_once: false,
                };
                drive(&mut b, &mut m, SprayerCmd::SetEv(i, slot));
            }
            drive(&mut b, &mut m, SprayerCmd::SetEv(300, EvSlot::default()));
            drive(&mut b, &mut m, SprayerCmd::PlaneWeight(9, 1));
            for k in 0..2000u16 {
                if k % 50 == 0 {
                    drive(&mut b, &mut m, SprayerCmd::MarkSkip(k % 64));
                }
                drive(&mut b, &mut m, SprayerCmd::Next);
            }
            let s = b.stats();
            assert_eq!(s.sprayer_instances, 1);
            assert_eq!(s.sprayer_transactions, 64 + 2 + 2000 + 40);
            if bug {
                assert!(s.differ > 0, "the planted bug went unseen");
            } else {
                assert_eq!(s.differ, 0, "{:?}", s.first_difference);
            }
        }
    }
}
