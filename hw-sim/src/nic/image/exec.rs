//! Who runs an image shard's main loop: the NIC image's loop compiled natively
//! ([`NicLoop::step_admin`], `native`) or the `mrc-nic` ELF on an emulated core
//! (`mrc_elfcore::ElfCore::step`, `elf`, cargo feature `elf`). Both see the same
//! [`mrc_nicloop::Datapath`] (module `rings`) and so the same queues; they differ in who
//! executes the loop and in what an iteration costs.
//!
//! Both watch the ports' transceivers with the image's own code: the elf level runs the
//! image's main loop, whose port monitor (`mrc_nic_board::monitor`) drives the emulated I2C
//! controller in front of a CMIS module model per port; the native level runs the same
//! monitor and CMIS driver before each `step_admin`, over the same module model reached
//! directly (no I2C controller: the bus is the model's). Its cost is not charged at the
//! native level (the cost table has no entry for it; the monitor does nothing between its
//! 10 us pin reads).

use std::sync::{Arc, Mutex};

use embedded_hal::i2c::{ErrorKind, ErrorType, I2c, Operation};
use mrc_nic_board::cmis::{PortEvent, Transceiver};
use mrc_nic_board::cmis_model::{cage_pins, transact, CmisModule};
use mrc_nic_board::monitor::{ModulePins, PortMonitor};
use mrc_nicloop::{LoopConfig, NicAdmin, NicLoop, PORTS};

use super::rings::Rings;
use crate::nic::fw_cost;

/// The firmware of one image shard.
pub(crate) enum Executor {
    /// The image's main loop, compiled natively, with the NIC's admin tables.
    Native {
        lp: Box<NicLoop>,
        admin: Box<NicAdmin>,
        board: Box<NativeBoard>,
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
            board: Box::new(NativeBoard::new()),
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
            Executor::Native { lp, admin, board } => {
                board.poll(now_ns, lp);
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
            Executor::Native { lp, board, .. } => Some(
                lp.poll_timeout()
                    .unwrap_or(u64::MAX)
                    .min(board.monitor.next_deadline()),
            ),
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

    /// Port `port`'s module: pulled from its cage (`pull`), or raising loss of signal on its
    /// first lane. The firmware sees it at its monitor's next pin read. Returns false for a
    /// port the NIC does not have.
    pub(crate) fn transceiver(&mut self, port: usize, pull: bool) -> bool {
        let act = |m: &mut CmisModule| {
            if pull {
                m.pull();
            } else {
                m.set_los(1);
            }
        };
        match self {
            Executor::Native { board, .. } => {
                let mut cage = board.cage.lock().unwrap_or_else(|p| p.into_inner());
                cage.get_mut(port).map(act).is_some()
            }
            #[cfg(feature = "elf")]
            Executor::Elf(core) => core.device_mut().i2c.module_mut(port).map(act).is_some(),
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

/// The native level's board: a CMIS module model per port and the image's port monitor over
/// it.
pub(crate) struct NativeBoard {
    cage: Arc<Mutex<Vec<CmisModule>>>,
    monitor: PortMonitor<SimPort, PORTS>,
}

impl NativeBoard {
    fn new() -> Self {
        let cage = Arc::new(Mutex::new(
            (0..PORTS)
                .map(|p| CmisModule::seated(&format!("MRC-P{p}")))
                .collect::<Vec<_>>(),
        ));
        let monitor = PortMonitor::new(core::array::from_fn(|p| {
            let port = SimPort {
                cage: cage.clone(),
                port: p,
            };
            Transceiver::new(port, p as u8, LANES)
        }));
        NativeBoard { cage, monitor }
    }

    /// The image's main-loop step for the monitor: link changes to the loop's port path.
    fn poll(&mut self, now_ns: u64, lp: &mut NicLoop) {
        let mut pins = SimPort {
            cage: self.cage.clone(),
            port: 0,
        };
        self.monitor.poll(now_ns, &mut pins, &mut NoDelay, |e| {
            let (port, up) = match e {
                PortEvent::Up { port } => (port, true),
                PortEvent::Down { port, .. } => (port, false),
            };
            lp.set_port_link(now_ns, usize::from(port), up);
        });
    }
}

/// Lanes of each port's module the link needs (the image's `LANES`).
const LANES: u8 = 4;

/// One port of the native board's cage behind `embedded_hal::i2c::I2c`.
struct SimPort {
    cage: Arc<Mutex<Vec<CmisModule>>>,
    port: usize,
}

impl ErrorType for SimPort {
    type Error = ErrorKind;
}

impl I2c for SimPort {
    fn transaction(&mut self, address: u8, ops: &mut [Operation<'_>]) -> Result<(), ErrorKind> {
        let mut cage = self.cage.lock().unwrap_or_else(|p| p.into_inner());
        match cage.get_mut(self.port) {
            Some(m) => transact(m, address, ops),
            None => Err(ErrorKind::NoAcknowledge(
                embedded_hal::i2c::NoAcknowledgeSource::Address,
            )),
        }
    }
}

impl ModulePins for SimPort {
    fn pins(&mut self) -> mrc_nic_board::monitor::Pins {
        cage_pins(&self.cage.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The driver's retry pause takes no simulated time at the native level (a present module
/// never NACKs in the model).
struct NoDelay;

impl embedded_hal::delay::DelayNs for NoDelay {
    fn delay_ns(&mut self, _ns: u32) {}
}
