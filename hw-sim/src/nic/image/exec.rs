//! Who runs an image shard's main loop: the NIC image's loop compiled natively
//! ([`NicLoop::step_admin`], `native`) or the `mrc-nic` ELF on an emulated core
//! (`mrc_elfcore::ElfCore::step`, `elf`, cargo feature `elf`). Both see the same
//! [`mrc_nicloop::Datapath`] (module `rings`) and so the same queues; they differ in who
//! executes the loop and in what an iteration costs.

use mrc_nicloop::{LoopConfig, NicAdmin, NicLoop};

use super::rings::Rings;
use crate::nic::fw_cost;

/// The firmware of one image shard.
pub(crate) enum Executor {
    /// The image's main loop, compiled natively, with the NIC's admin tables.
    Native {
        lp: Box<NicLoop>,
        admin: Box<NicAdmin>,
    },
    /// The image itself on an emulated riscv32imac core.
    #[cfg(feature = "elf")]
    Elf(Box<mrc_elfcore::ElfCore>),
}

/// What one main-loop iteration did, in instructions from its start.
#[derive(Clone, Debug, Default)]
pub(crate) struct Iteration {
    /// Instructions the iteration retired (native: the cost table's charge).
    pub instructions: u64,
    /// When it had taken its DP->FW entries (they leave the ring then).
    pub consumed_at: u64,
    /// Per FW->DP publication: (entries published in the iteration so far, instructions
    /// then).
    pub published: Vec<(u32, u64)>,
}

/// Why an image shard's firmware could not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirmwareFault(pub String);

impl Executor {
    /// The native loop with the image's configuration (`LoopConfig::DEFAULT`: the image has
    /// no input that changes it).
    pub(crate) fn native() -> Result<Executor, FirmwareFault> {
        let lp = NicLoop::new(LoopConfig::DEFAULT)
            .map_err(|e| FirmwareFault(format!("the image's loop configuration: {e:?}")))?;
        Ok(Executor::Native {
            lp: Box::new(lp),
            admin: Box::new(NicAdmin::new()),
        })
    }

    /// The ELF `image` booted on an emulated core retiring `instructions_per_s`.
    #[cfg(feature = "elf")]
    pub(crate) fn elf(image: &[u8], instructions_per_s: u64) -> Result<Executor, FirmwareFault> {
        let cfg = mrc_elfcore::CoreConfig {
            instructions_per_s,
            ..mrc_elfcore::CoreConfig::DEFAULT
        };
        let core = mrc_elfcore::ElfCore::boot(image, cfg)
            .map_err(|e| FirmwareFault(format!("the NIC image did not boot: {e}")))?;
        Ok(Executor::Elf(Box::new(core)))
    }

    /// One iteration at `now_ns` with `dp` behind the queues, into `it`.
    ///
    /// Native cost: the cost table's charges in the loop's order: each DP->FW entry taken
    /// (by kind), one timer check, each timer that fired, each FW->DP entry written; an
    /// iteration that did nothing costs nothing (a polling core's idle iterations are not
    /// busy time). Elf cost: the instructions the core retired.
    pub(crate) fn step(
        &mut self,
        now_ns: u64,
        dp: &mut Rings<'_>,
        it: &mut Iteration,
    ) -> Result<(), FirmwareFault> {
        it.published.clear();
        match self {
            Executor::Native { lp, admin } => {
                let fired = lp.engine().counters().timeouts_fired;
                let moved = lp.step_admin(now_ns, dp, admin);
                let fired = lp.engine().counters().timeouts_fired - fired;
                let events: u64 = dp
                    .consumed()
                    .iter()
                    .map(|e| u64::from(fw_cost::event(e.kind_code())))
                    .sum();
                let base = events
                    + u64::from(fw_cost::TIMER_CHECK)
                    + fired * u64::from(fw_cost::TIMER_FIRED);
                it.consumed_at = events;
                it.published.extend(
                    dp.groups()
                        .iter()
                        .map(|&n| (n, base + u64::from(n) * u64::from(fw_cost::COMMAND))),
                );
                it.instructions = if moved || fired > 0 {
                    base + u64::from(dp.written_now()) * u64::from(fw_cost::COMMAND)
                } else {
                    0
                };
                Ok(())
            }
            #[cfg(feature = "elf")]
            Executor::Elf(core) => {
                let run = core
                    .step(now_ns, dp)
                    .map_err(|e| FirmwareFault(format!("the NIC core at {now_ns} ns: {e}")))?;
                let t = core.step_timing();
                it.consumed_at = t.consumed_at.unwrap_or(0);
                it.published.extend_from_slice(&t.published);
                it.instructions = run.instructions + run.boot;
                Ok(())
            }
        }
    }

    /// The loop's next timer deadline: the native loop's own, or what the image last told
    /// its wake timer.
    pub(crate) fn deadline(&self) -> Option<u64> {
        match self {
            Executor::Native { lp, .. } => lp.poll_timeout(),
            #[cfg(feature = "elf")]
            Executor::Elf(core) => core.wake_at_ns(),
        }
    }

    /// The engine's counters, where the simulator can read them (native).
    pub(crate) fn engine_counters(&self) -> Option<mrc_firmware::engine::EngineCounters> {
        match self {
            Executor::Native { lp, .. } => Some(lp.engine().counters()),
            #[cfg(feature = "elf")]
            Executor::Elf(_) => None,
        }
    }

    /// Instructions the emulated core retired since power-on (`None` at the native level).
    pub(crate) fn guest_instructions(&self) -> Option<u64> {
        match self {
            Executor::Native { .. } => None,
            #[cfg(feature = "elf")]
            Executor::Elf(core) => Some(core.retired()),
        }
    }
}
