//! The stage's hardware blocks as pluggable ports: which implementation answers each block's
//! transactions.
//!
//! The stage ([`super::stage::Datapath`]) always runs the reference models of this crate. A
//! [`Blocks`] implementation may stand in for a block: the stage hands it every transaction
//! of that block together with the model's answer, and goes on with the answer it returns.
//! [`ModelBlocks`] returns the model's answer (the default, and what the NIC image and every
//! test of this crate use); the RTL co-simulation crate (`mrc-rtl-cosim`) returns the answer of
//! the Verilator-built RTL block, so a simulated NIC's packets are decided by the RTL.
//!
//! The model keeps running beside a stand-in as the block's *shadow*: the stage reads state
//! the RTL has no read port for (an EV slot's skip flag, whether any EV is usable) from it.
//! With a correct stand-in the two never differ; a stand-in whose answer differs steers the
//! run (that is what a differential test between the levels catches).
//!
//! One transaction here is one transaction of the RTL block's command stream (the conventions
//! of each block in `fpga-rtl/README.md`).
//!
//! | block | transaction | model | what the stage goes on with |
//! |---|---|---|---|
//! | EV sprayer | [`SprayerCmd`] -> [`SprayerRsp`], per QP | [`Sprayer::apply`] | every EV pick (data, retransmissions, ACKs and NACKs) and the refusal of every EV table write |
//! | receive PSN tracker | [`RxTrackerCmd`] -> [`RxTrackerRsp`], per QP | [`RxBitmap::apply`] | the cumulative PSN and SACK bitmap of every ACK and NACK sent |
//! | header builder | a [`Packet`] -> its headers, parsed back into the packet sent | `mrc_abi::wire::Frame::emit` of [`Packet::to_repr`] | every packet the stage sends |
//! | DP->FW CSR event queue | one push of a [`CsrEntry`]; one pop -> the entry | the stage's event queue | every report [`super::stage::Datapath::poll_events`] hands the firmware |
//!
//! Where a block's answer is not taken: the receive path classifies a packet (new, duplicate,
//! outside the window) and runs its placement checks before it marks the PSN received, and
//! the tracker's one receive transaction classifies and marks at once; so the stage decides
//! placement with the model and sends the tracker a receive for each PSN the model marked
//! (its outcome compared with the model's). The tracker's state reaches the wire through the
//! ACKs and NACKs, which carry its answer. Reports the firmware reads in place
//! ([`super::stage::Datapath::events`]) are the model's entries; consuming them pops the block.

use mrc_abi::device::csr::CsrEntry;
use mrc_abi::Psn;

use super::packet::Packet;
use super::rx_bitmap::{RxBitmap, RxCounters, RxOutcome};
use super::sprayer::{EvPick, EvSlot, Sprayer, SprayerCounters, SprayerError};

/// One command of the EV sprayer's command stream (`ev_sprayer.sv`'s `cmd_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SprayerCmd {
    /// `OP_NEXT`: the EV of the next packet ([`Sprayer::next_ev`]).
    Next,
    /// `OP_SET_EV`: write a slot ([`Sprayer::set_ev`]).
    SetEv(u16, EvSlot),
    /// `OP_SET_USABLE` ([`Sprayer::set_usable`]).
    SetUsable(u16, bool),
    /// `OP_MARK_SKIP` ([`Sprayer::mark_skip`]).
    MarkSkip(u16),
    /// `OP_PLANE_WEIGHT`: plane, weight ([`Sprayer::set_plane_weight`]).
    PlaneWeight(u8, u8),
}

/// The sprayer's response to one [`SprayerCmd`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SprayerRsp {
    /// The pick of a [`SprayerCmd::Next`] (`None` for writes, and when no EV is usable).
    pub pick: Option<EvPick>,
    /// The refusal of a write.
    pub err: Option<SprayerError>,
    /// The counters after the command.
    pub counters: SprayerCounters,
}

impl<const N: usize, const P: usize> Sprayer<N, P> {
    /// One transaction of the sprayer's command stream: the model's answer to `cmd`.
    pub fn apply(&mut self, cmd: SprayerCmd) -> SprayerRsp {
        let (pick, r) = self.take(cmd);
        SprayerRsp {
            pick,
            err: r.err(),
            counters: self.counters(),
        }
    }

    /// `cmd` taken by the model: its pick and its refusal (what [`Self::apply`] answers but
    /// the counters).
    #[inline(always)]
    fn take(&mut self, cmd: SprayerCmd) -> (Option<EvPick>, Result<(), SprayerError>) {
        match cmd {
            SprayerCmd::Next => (self.next_ev(), Ok(())),
            SprayerCmd::SetEv(i, s) => (None, self.set_ev(i, s)),
            SprayerCmd::SetUsable(i, u) => (None, self.set_usable(i, u)),
            SprayerCmd::MarkSkip(i) => (None, self.mark_skip(i)),
            SprayerCmd::PlaneWeight(p, w) => (None, self.set_plane_weight(p, w)),
        }
    }
}

/// One command of the receive PSN tracker's command stream (`rx_psn_tracker.sv`'s `cmd_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxTrackerCmd {
    /// `OP_RECEIVE`: a PSN arrived ([`RxBitmap::receive`]).
    Receive(Psn),
    /// `OP_SACK`: the SACK from a base PSN ([`RxBitmap::sack`]).
    Sack(Psn),
    /// `OP_RESET`: expect this PSN next ([`RxBitmap::reset`]).
    Reset(Psn),
}

impl RxTrackerCmd {
    /// The command's PSN (`cmd_psn`).
    pub fn psn(self) -> Psn {
        match self {
            RxTrackerCmd::Receive(p) | RxTrackerCmd::Sack(p) | RxTrackerCmd::Reset(p) => p,
        }
    }
}

/// The tracker's response to one [`RxTrackerCmd`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxTrackerRsp {
    /// The classification of a [`RxTrackerCmd::Receive`] (`New` for the other commands).
    pub outcome: RxOutcome,
    /// The cumulative PSN after the command.
    pub cum_psn: Psn,
    /// One past the highest PSN received, after the command.
    pub next_max_psn: Psn,
    /// The SACK bitmap of a [`RxTrackerCmd::Sack`] from the command's PSN (0 for the others).
    pub sack_bitmap: u64,
    /// The counters after the command.
    pub counters: RxCounters,
}

impl<const W: usize> RxBitmap<W> {
    /// One transaction of the tracker's command stream: the model's answer to `cmd`.
    pub fn apply(&mut self, cmd: RxTrackerCmd) -> RxTrackerRsp {
        let outcome = match cmd {
            RxTrackerCmd::Receive(p) => self.receive(p),
            RxTrackerCmd::Sack(_) => RxOutcome::New,
            RxTrackerCmd::Reset(p) => {
                self.reset(p);
                RxOutcome::New
            }
        };
        self.answer(cmd, outcome)
    }

    /// The response to `cmd` read from the state after it (the model took it already, with
    /// `outcome`).
    pub fn answer(&self, cmd: RxTrackerCmd, outcome: RxOutcome) -> RxTrackerRsp {
        RxTrackerRsp {
            outcome,
            cum_psn: self.cum_psn(),
            next_max_psn: self.next_max_psn(),
            sack_bitmap: match cmd {
                RxTrackerCmd::Sack(b) => self.sack(b).bitmap,
                _ => 0,
            },
            counters: self.counters(),
        }
    }
}

/// Which implementation answers the stage's block transactions. Every method has the model's
/// behaviour as its default. See the module docs.
pub trait Blocks {
    /// Whether every answer is the model's (no stand-in). Only then may the stage take runs of
    /// packets at once (`Datapath::set_fast_paths`): a run's picks bypass the transaction
    /// interface. The sprayer's other transactions then bypass it too ([`Self::sprayer`] is
    /// not called).
    fn models_only(&self) -> bool {
        true
    }

    /// QP context `qp`'s sprayer was reset (a new EV table): a stand-in resets its block.
    fn sprayer_reset(&mut self, qp: u32) {
        let _ = qp;
    }

    /// QP context `qp`'s sprayer took `cmd`, to which the model answered `model`: the answer
    /// the stage goes on with. Called only when [`Self::models_only`] is `false`.
    fn sprayer(&mut self, qp: u32, cmd: SprayerCmd, model: &SprayerRsp) -> SprayerRsp {
        let _ = (qp, cmd);
        *model
    }

    /// QP context `qp`'s receive tracker was made anew (QP reset, RTR): a stand-in resets its
    /// block (counters included, as the model's are).
    fn rx_tracker_reset(&mut self, qp: u32) {
        let _ = qp;
    }

    /// QP context `qp`'s receive tracker took `cmd`, to which the model answered `model`: the
    /// answer the stage goes on with.
    fn rx_tracker(&mut self, qp: u32, cmd: RxTrackerCmd, model: &RxTrackerRsp) -> RxTrackerRsp {
        let _ = (qp, cmd);
        *model
    }

    /// The header builder took `model`, a packet leaving the stage: the packet sent (a
    /// stand-in builds its headers and parses them back; the fields not on the wire, the
    /// sending QP and a write's local buffer, are the model's).
    fn header(&mut self, model: &Packet) -> Packet {
        *model
    }

    /// The DP->FW event queue took `entry` (pushed in the order the stage queued its
    /// reports).
    fn event_push(&mut self, entry: &CsrEntry) {
        let _ = entry;
    }

    /// The DP->FW event queue gave up its oldest entry, which in the model is `model`: the
    /// entry the firmware reads.
    fn event_pop(&mut self, model: &CsrEntry) -> CsrEntry {
        *model
    }
}

/// Every block is its model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelBlocks;

impl Blocks for ModelBlocks {}

/// One QP's sprayer as the stage drives it: every transaction through the model and then the
/// [`Blocks`] port; reads from the model (the shadow, see the module docs). With models only
/// ([`Blocks::models_only`]: every answer is the model's) a transaction is the model's alone,
/// with no response built for the port.
pub(crate) struct SprayerPort<'a, const N: usize, const P: usize> {
    pub model: &'a mut Sprayer<N, P>,
    pub blocks: &'a mut dyn Blocks,
    pub qp: u32,
}

impl<const N: usize, const P: usize> SprayerPort<'_, N, P> {
    /// `cmd` through the model and then the port (a stand-in's transaction).
    #[inline(never)]
    fn transact(&mut self, cmd: SprayerCmd) -> SprayerRsp {
        let model = self.model.apply(cmd);
        self.blocks.sprayer(self.qp, cmd, &model)
    }

    /// A fresh, empty table (the block's reset).
    pub fn reset(&mut self) {
        *self.model = Sprayer::new();
        self.blocks.sprayer_reset(self.qp);
    }

    /// [`Sprayer::next_ev`] through the port.
    pub fn next_ev(&mut self) -> Option<EvPick> {
        if self.blocks.models_only() {
            return self.model.next_ev();
        }
        self.transact(SprayerCmd::Next).pick
    }

    /// A write through the port.
    #[inline(always)]
    pub fn write(&mut self, cmd: SprayerCmd) -> Result<(), SprayerError> {
        if self.blocks.models_only() {
            return self.model.take(cmd).1;
        }
        self.transact(cmd).err.map_or(Ok(()), Err)
    }

    /// [`Sprayer::ev`] (the shadow's slot).
    pub fn ev(&self, index: u16) -> Option<EvSlot> {
        self.model.ev(index)
    }

    /// [`Sprayer::has_usable`] (the shadow's).
    pub fn has_usable(&self) -> bool {
        self.model.has_usable()
    }
}

/// One QP's receive tracker as the stage drives it: the model ([`crate::datapath::AckGen`]'s
/// bitmap) took each command already; the port hands it to the [`Blocks`] with the model's
/// answer.
pub(crate) struct RxTrackerPort<'a, const W: usize> {
    pub model: &'a RxBitmap<W>,
    pub blocks: &'a mut dyn Blocks,
    pub qp: u32,
}

impl<const W: usize> RxTrackerPort<'_, W> {
    /// `cmd`, which the model took with `outcome` (`New` but for a receive), through the port.
    pub fn took(&mut self, cmd: RxTrackerCmd, outcome: RxOutcome) -> RxTrackerRsp {
        let model = self.model.answer(cmd, outcome);
        self.blocks.rx_tracker(self.qp, cmd, &model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in that answers every pick with EV 1 and counts what it saw.
    #[derive(Default)]
    struct AlwaysOne {
        seen: usize,
        resets: usize,
    }

    impl Blocks for AlwaysOne {
        fn models_only(&self) -> bool {
            false
        }
        fn sprayer_reset(&mut self, _qp: u32) {
            self.resets += 1;
        }
        fn sprayer(&mut self, _qp: u32, cmd: SprayerCmd, model: &SprayerRsp) -> SprayerRsp {
            self.seen += 1;
            let mut r = *model;
            if cmd == SprayerCmd::Next {
                r.pick = Some(EvPick { index: 1, plane: 1 });
            }
            r
        }
    }

    fn slot(plane: u8) -> EvSlot {
        EvSlot {
            usable: true,
            weight: 1,
            plane,
            skip_once: false,
        }
    }

    #[test]
    fn the_port_answers_with_the_stand_in_and_the_model_shadows() {
        let mut model: Sprayer<4, 2> = Sprayer::new();
        let mut b = AlwaysOne::default();
        let mut port = SprayerPort {
            model: &mut model,
            blocks: &mut b,
            qp: 0,
        };
        port.reset();
        port.write(SprayerCmd::SetEv(0, slot(0))).unwrap();
        port.write(SprayerCmd::SetEv(1, slot(1))).unwrap();
        assert_eq!(
            port.write(SprayerCmd::SetEv(9, slot(0))),
            Err(SprayerError::IndexOutOfRange { index: 9 })
        );
        // The model would pick EV 0 first; the stand-in's answer wins.
        assert_eq!(port.next_ev(), Some(EvPick { index: 1, plane: 1 }));
        assert!(port.has_usable() && port.ev(0).is_some());
        assert_eq!((b.seen, b.resets), (4, 1));
        assert_eq!(model.counters().picks, 1);
    }

    #[test]
    fn model_blocks_answer_as_the_model() {
        let mut a: Sprayer<4, 2> = Sprayer::new();
        let mut b: Sprayer<4, 2> = Sprayer::new();
        let mut m = ModelBlocks;
        let mut port = SprayerPort {
            model: &mut a,
            blocks: &mut m,
            qp: 3,
        };
        for (i, p) in [(0, 0), (1, 1), (2, 0)] {
            port.write(SprayerCmd::SetEv(i, slot(p))).unwrap();
            b.set_ev(i, slot(p)).unwrap();
        }
        for _ in 0..10 {
            assert_eq!(port.next_ev(), b.next_ev());
        }
        assert!(ModelBlocks.models_only());
    }
}
