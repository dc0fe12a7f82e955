//! The NIC's CSR window as the emulated core sees it: timer, watchdog, reset, the four
//! queue register blocks (mrc-abi `CsrQueueRegs`: DP->FW events, FW->DP commands, admin
//! commands, admin replies), the flash controller and the transceivers' I2C controller. Plain state: the core's MMIO callbacks and the simulated NIC's
//! side both go through it.
//!
//! # The timer and the main loop's iterations
//! The image reads the timer once per main-loop iteration, as the 32-bit halves hi, lo, hi
//! (again while the two hi reads differ). The device serves one iteration per
//! [`ElfCore::run`](crate::ElfCore::run) at the time `now` the simulator gives: once the
//! guest completed one consistent read in the run (a hi, a lo and a hi read in that order),
//! its next hi read is the top of the next iteration. That read asks the core to stop and
//! returns `u32::MAX`, which no later hi read of the run returns (a time of 2^64 - 2^32 ns is
//! out of reach), so the guest finds the halves torn and reads the timer again after the
//! core resumed, at the next run's `now`. The core stops where the instructions it has
//! already translated end, before the guest's next read.

use mrc_abi::device::csr::CsrQueueRegs;

use crate::board::flash::{FlashDevice, FlashTiming, ACCESS_NS};
use crate::board::host_dma::HostDmaEngine;
use crate::board::i2c::I2cController;
use crate::map::Regs;

/// The key a watchdog kick must write (the image's `WDT_KICK_KEY`).
pub const WDT_KICK_KEY: u32 = 0x5A5A_A5A5;
/// `RESET_CAUSE` bits.
pub const RESET_CAUSE_WATCHDOG: u32 = 1 << 0;
/// Software reset (`SW_RESET`).
pub const RESET_CAUSE_SOFTWARE: u32 = 1 << 1;
/// Power-on.
pub const RESET_CAUSE_POWER_ON: u32 = 1 << 2;
/// A device reset by the host (the driver's `DEVICE.control.RESET`).
pub const RESET_CAUSE_HOST: u32 = 1 << 3;

/// What the hi read the guest returns when it asks the core to stop.
pub const TORN_HI: u32 = u32::MAX;

/// One queue's registers (`CsrQueueRegs`: base, log2_entries, producer, consumer,
/// overflow).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueRegs {
    /// NIC-local address of entry 0.
    pub base: u32,
    /// log2 of the number of entries.
    pub log2_entries: u32,
    /// Free-running producer index.
    pub producer: u32,
    /// Free-running consumer index.
    pub consumer: u32,
    /// Entries the producer dropped.
    pub overflow: u32,
}

impl QueueRegs {
    fn read(&self, off: u32) -> Option<u32> {
        Some(match off as usize {
            o if o == core::mem::offset_of!(CsrQueueRegs, base) => self.base,
            o if o == core::mem::offset_of!(CsrQueueRegs, log2_entries) => self.log2_entries,
            o if o == core::mem::offset_of!(CsrQueueRegs, producer) => self.producer,
            o if o == core::mem::offset_of!(CsrQueueRegs, consumer) => self.consumer,
            o if o == core::mem::offset_of!(CsrQueueRegs, overflow) => self.overflow,
            _ => return None,
        })
    }

    fn write(&mut self, off: u32, v: u32) -> bool {
        let f = match off as usize {
            o if o == core::mem::offset_of!(CsrQueueRegs, base) => &mut self.base,
            o if o == core::mem::offset_of!(CsrQueueRegs, log2_entries) => &mut self.log2_entries,
            o if o == core::mem::offset_of!(CsrQueueRegs, producer) => &mut self.producer,
            o if o == core::mem::offset_of!(CsrQueueRegs, consumer) => &mut self.consumer,
            o if o == core::mem::offset_of!(CsrQueueRegs, overflow) => &mut self.overflow,
            _ => return false,
        };
        *f = v;
        true
    }

    /// Entries held (producer - consumer).
    pub fn used(&self) -> u32 {
        self.producer.wrapping_sub(self.consumer)
    }
}

/// Which queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queue {
    /// DP->FW events (the device produces).
    Events,
    /// FW->DP commands (the device consumes).
    Orders,
    /// Admin commands (the device produces).
    AdminCmd,
    /// Admin replies (the device consumes).
    AdminResp,
}

impl Queue {
    /// Bytes per entry.
    pub fn entry_bytes(self) -> u32 {
        match self {
            Queue::AdminCmd => 64,
            _ => 32,
        }
    }
}

/// Why the core stopped at the end of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// At the top of the main loop's next iteration (its timer read).
    Iteration,
    /// The guest wrote `SW_RESET` (its crash path: a panic or a trap).
    SoftwareReset,
    /// The iteration ran longer than the watchdog's period without a kick: the watchdog bit
    /// (the core resets).
    Watchdog,
    /// The run reached its instruction limit without reaching the next iteration and with no
    /// watchdog to bite (a hung core, stopped for good).
    InstructionLimit,
}

/// Counters of the window: every access the device did not understand is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Reads of offsets with no register (answered 0).
    pub unknown_reads: u64,
    /// Writes to offsets with no register or to read-only ones (ignored).
    pub unknown_writes: u64,
    /// Accesses not 4 bytes wide (served as far as they fit a register, counted).
    pub odd_width: u64,
    /// Watchdog kicks with the wrong key (ignored).
    pub bad_kicks: u64,
    /// Watchdog kicks.
    pub kicks: u64,
}

/// The CSR window's state.
#[derive(Debug)]
pub struct Device {
    regs: Regs,
    /// The time the running iteration reads.
    pub now_ns: u64,
    /// The watchdog period the guest set.
    pub wdt_timeout_ns: u32,
    /// Why the core last reset.
    pub reset_cause: u32,
    /// The queues.
    pub events: QueueRegs,
    /// FW->DP.
    pub orders: QueueRegs,
    /// Admin commands.
    pub admin_cmd: QueueRegs,
    /// Admin replies.
    pub admin_resp: QueueRegs,
    /// The QSPI flash behind its controller (`FLASH_CTRL_BASE`) and the mapped read window;
    /// kept across core resets.
    pub flash: FlashDevice,
    /// The flash's time: the iteration's time, advanced [`ACCESS_NS`] per controller access
    /// (a driver polling BUSY within one iteration sees the command finish).
    flash_clock_ns: u64,
    /// The host DMA engine (`HOST_DMA_BASE`) and the host memory it reads; kept across core
    /// resets.
    pub host_dma: HostDmaEngine,
    /// The transceiver management I2C controller and the module in each port's cage
    /// (`I2C_BASE`); the modules are kept across core resets.
    pub i2c: I2cController,
    /// Counters.
    pub counters: DeviceCounters,
    /// Read-pattern state of the timer (see the module docs).
    time: TimeRead,
    /// The run must stop (set by an access; the core stops at its next block).
    pub(crate) stop: Option<Stop>,
    /// `WAKE_AT`: the main loop's next timer deadline, ns (`u64::MAX`: none).
    pub wake_at_ns: u64,
    /// The low word of `WAKE_AT` written, waiting for its high word.
    wake_lo: u32,
    /// The running iteration's queue index writes, in order: (queue, the index written, the
    /// instructions the core had retired then since the run began), so the simulator can
    /// time each publication (FW->DP producer) and consumption (DP->FW consumer) within the
    /// iteration.
    pub marks: Vec<(Queue, u32, u64)>,
    /// Instructions retired when the run began (the MMIO hook's base for `marks`).
    pub(crate) run_base: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimeRead {
    /// No read in progress.
    Idle,
    /// A hi read came.
    Hi,
    /// A hi then a lo read came.
    HiLo,
    /// The run's consistent read is done: the next hi read is the next iteration.
    Served,
}

impl Device {
    /// The window after power-on, waiting for the boot's first timer read, with an erased
    /// flash of the part's typical timing.
    pub fn new(regs: Regs) -> Device {
        Self::with_flash(regs, FlashDevice::new(FlashTiming::TYPICAL))
    }

    /// [`Device::new`] with `flash` behind the controller.
    pub fn with_flash(regs: Regs, flash: FlashDevice) -> Device {
        Device {
            regs,
            now_ns: 0,
            wdt_timeout_ns: 0,
            reset_cause: RESET_CAUSE_POWER_ON,
            events: QueueRegs::default(),
            orders: QueueRegs::default(),
            admin_cmd: QueueRegs::default(),
            admin_resp: QueueRegs::default(),
            flash,
            flash_clock_ns: 0,
            host_dma: HostDmaEngine::default(),
            i2c: I2cController::new(mrc_nicloop::PORTS),
            counters: DeviceCounters::default(),
            // (the boot's first timer read is the top of the first iteration)
            time: TimeRead::Served,
            stop: None,
            wake_at_ns: u64::MAX,
            wake_lo: 0,
            marks: Vec::new(),
            run_base: 0,
        }
    }

    /// A run at `now_ns` begins.
    pub(crate) fn begin_run(&mut self, now_ns: u64, from_boot: bool) {
        self.now_ns = now_ns;
        self.stop = None;
        self.marks.clear();
        self.time = if from_boot {
            TimeRead::Served
        } else {
            TimeRead::Idle
        };
    }

    /// The queue `q`'s registers.
    pub fn queue(&self, q: Queue) -> &QueueRegs {
        match q {
            Queue::Events => &self.events,
            Queue::Orders => &self.orders,
            Queue::AdminCmd => &self.admin_cmd,
            Queue::AdminResp => &self.admin_resp,
        }
    }

    /// The queue `q`'s registers, mutably (the device side moving its index).
    pub fn queue_mut(&mut self, q: Queue) -> &mut QueueRegs {
        match q {
            Queue::Events => &mut self.events,
            Queue::Orders => &mut self.orders,
            Queue::AdminCmd => &mut self.admin_cmd,
            Queue::AdminResp => &mut self.admin_resp,
        }
    }

    /// The flash controller's register at window offset `off`, with the flash's time for an
    /// access to it now.
    fn flash_at(&mut self, off: u32) -> Option<(u32, u64)> {
        let o = off.checked_sub(self.regs.flash_ctrl)?;
        if o >= mrc_abi::device::flash::reg::BLOCK_BYTES {
            return None;
        }
        self.flash_clock_ns = self.flash_clock_ns.max(self.now_ns) + ACCESS_NS;
        Some((o, self.flash_clock_ns))
    }

    /// The flash's time now: the controller accesses so far, at [`ACCESS_NS`] each, on top of
    /// the iterations' times.
    pub fn flash_time_ns(&self) -> u64 {
        self.flash_clock_ns
    }

    /// Carries the board's devices over from the device before a core reset: the flash (and
    /// its time), the host DMA engine with its host memory, and the transceiver modules.
    pub(crate) fn keep_board(&mut self, old: &mut Device) {
        self.flash = std::mem::replace(&mut old.flash, FlashDevice::new(FlashTiming::INSTANT));
        self.flash_clock_ns = old.flash_clock_ns;
        self.host_dma = std::mem::take(&mut old.host_dma);
        self.i2c.keep_modules(&mut old.i2c);
    }

    /// The host DMA engine's register at window offset `off`.
    fn host_dma_at(&self, off: u32) -> Option<u32> {
        let o = off.checked_sub(self.regs.host_dma)?;
        (o < mrc_abi::device::host_dma::reg::BLOCK_BYTES).then_some(o)
    }

    /// The I2C controller's block offset of window offset `off`.
    fn i2c_at(&self, off: u32) -> Option<u32> {
        let o = off.checked_sub(self.regs.i2c)?;
        (o < mrc_abi::device::i2c::reg::BLOCK_BYTES).then_some(o)
    }

    fn queue_at(&mut self, off: u32) -> Option<(&mut QueueRegs, u32)> {
        const BLOCK: u32 = core::mem::size_of::<CsrQueueRegs>() as u32;
        let r = self.regs;
        for (base, q) in [
            (r.evq_rx, Queue::Events),
            (r.evq_tx, Queue::Orders),
            (r.admin_cmdq, Queue::AdminCmd),
            (r.admin_respq, Queue::AdminResp),
        ] {
            if (base..base + BLOCK).contains(&off) {
                return Some((self.queue_mut(q), off - base));
            }
        }
        None
    }

    /// A guest read of `size` bytes at window offset `off`.
    pub fn read(&mut self, off: u32, size: usize) -> u32 {
        if size != 4 {
            self.counters.odd_width += 1;
        }
        let r = self.regs;
        if off == r.mtime + 4 {
            return self.read_time_hi();
        }
        if off == r.mtime {
            if self.stop.is_none() {
                self.time = match self.time {
                    TimeRead::Hi => TimeRead::HiLo,
                    TimeRead::Served => TimeRead::Served,
                    _ => TimeRead::Idle,
                };
            }
            return self.now_ns as u32;
        }
        if off == r.wdt_timeout_ns {
            return self.wdt_timeout_ns;
        }
        if off == r.reset_cause {
            return self.reset_cause;
        }
        if off == r.wake_at {
            return self.wake_at_ns as u32;
        }
        if off == r.wake_at + 4 {
            return (self.wake_at_ns >> 32) as u32;
        }
        if let Some((q, o)) = self.queue_at(off) {
            if let Some(v) = q.read(o) {
                return v;
            }
        }
        if let Some((o, t)) = self.flash_at(off) {
            return self.flash.read_reg(t, o);
        }
        if let Some(o) = self.host_dma_at(off) {
            return self.host_dma.read_reg(o);
        }
        if let Some(v) = self
            .i2c_at(off)
            .and_then(|o| self.i2c.read_reg(self.now_ns, o))
        {
            return v;
        }
        self.counters.unknown_reads += 1;
        0
    }

    fn read_time_hi(&mut self) -> u32 {
        let hi = (self.now_ns >> 32) as u32;
        if self.stop.is_some() {
            return hi;
        }
        match self.time {
            TimeRead::Served => {
                self.stop = Some(Stop::Iteration);
                TORN_HI
            }
            TimeRead::HiLo => {
                self.time = TimeRead::Served;
                hi
            }
            TimeRead::Idle | TimeRead::Hi => {
                self.time = TimeRead::Hi;
                hi
            }
        }
    }

    /// A guest write of `size` bytes of `v` at window offset `off`.
    pub fn write(&mut self, off: u32, size: usize, v: u32) {
        self.write_at(off, size, v, 0);
    }

    /// [`Device::write`] with the instructions the core retired so far (for [`Device::marks`]).
    pub(crate) fn write_at(&mut self, off: u32, size: usize, v: u32, retired: u64) {
        if size != 4 {
            self.counters.odd_width += 1;
        }
        let r = self.regs;
        if off == r.wake_at {
            self.wake_lo = v;
            return;
        }
        if off == r.wake_at + 4 {
            self.wake_at_ns = (u64::from(v) << 32) | u64::from(self.wake_lo);
            return;
        }
        const PRODUCER: u32 = core::mem::offset_of!(CsrQueueRegs, producer) as u32;
        const CONSUMER: u32 = core::mem::offset_of!(CsrQueueRegs, consumer) as u32;
        if off == r.evq_tx + PRODUCER {
            let at = retired.saturating_sub(self.run_base);
            self.marks.push((Queue::Orders, v, at));
        } else if off == r.evq_rx + CONSUMER {
            let at = retired.saturating_sub(self.run_base);
            self.marks.push((Queue::Events, v, at));
        }
        if off == r.wdt_kick {
            if v == WDT_KICK_KEY {
                self.counters.kicks += 1;
            } else {
                self.counters.bad_kicks += 1;
            }
            return;
        }
        if off == r.wdt_timeout_ns {
            self.wdt_timeout_ns = v;
            return;
        }
        if off == r.sw_reset {
            if v & 1 != 0 && self.stop.is_none() {
                self.stop = Some(Stop::SoftwareReset);
            }
            return;
        }
        if let Some((q, o)) = self.queue_at(off) {
            if q.write(o, v) {
                return;
            }
        }
        if let Some((o, t)) = self.flash_at(off) {
            self.flash.write_reg(t, o, v);
            return;
        }
        if let Some(o) = self.host_dma_at(off) {
            self.host_dma.write_reg(o, v);
            return;
        }
        if let Some(o) = self.i2c_at(off) {
            if self.i2c.write_reg(self.now_ns, o, v) {
                return;
            }
        }
        self.counters.unknown_writes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::NicMap;

    fn dev() -> Device {
        Device::new(NicMap::nic().unwrap().regs)
    }

    /// The image's read: hi, lo, hi until the two hi reads agree.
    fn read_time(d: &mut Device) -> Option<u64> {
        let t = d.regs.mtime;
        for _ in 0..4 {
            let hi = d.read(t + 4, 4);
            let lo = d.read(t, 4);
            if d.read(t + 4, 4) == hi {
                return Some((u64::from(hi) << 32) | u64::from(lo));
            }
        }
        None
    }

    #[test]
    fn one_timer_read_per_run_then_the_next_iteration_stops_the_core() {
        let mut d = dev();
        // Boot: the first read is the first iteration's top: it stops the core, torn.
        d.begin_run(0, true);
        let t = d.regs.mtime;
        assert_eq!(d.read(t + 4, 4), TORN_HI);
        assert_eq!(d.stop, Some(Stop::Iteration));
        // The rest of the read before the core stopped: not torn again, so the guest reads
        // once more after it resumed.
        let lo = d.read(t, 4);
        let hi = d.read(t + 4, 4);
        assert_ne!(hi, TORN_HI);
        let _ = lo;
        // A run at 5 s: the guest reads 5 s (the halves carry), then its next read stops it.
        let now = 5_000_000_000;
        d.begin_run(now, false);
        assert_eq!(read_time(&mut d), Some(now));
        assert_eq!(d.stop, None);
        assert_eq!(d.read(t + 4, 4), TORN_HI);
        assert_eq!(d.stop, Some(Stop::Iteration));
    }

    #[test]
    fn a_run_resuming_mid_read_serves_the_retry() {
        let mut d = dev();
        let t = d.regs.mtime;
        d.begin_run(0, true);
        assert_eq!(d.read(t + 4, 4), TORN_HI);
        // The core stopped right after the torn hi read: lo and hi come in the next run and
        // do not match the torn hi, so the guest reads again, and gets the run's time.
        d.begin_run(7, false);
        assert_eq!(d.read(t, 4), 7);
        assert_eq!(d.read(t + 4, 4), 0);
        assert_eq!(read_time(&mut d), Some(7));
        assert_eq!(d.stop, None);
    }

    #[test]
    fn queues_watchdog_reset_and_unknown_registers() {
        let mut d = dev();
        let r = d.regs;
        d.write(r.evq_tx, 4, 0x1000_0400);
        d.write(r.evq_tx + 4, 4, 5);
        d.write(r.evq_tx + 8, 4, 3);
        assert_eq!(d.orders.base, 0x1000_0400);
        assert_eq!(d.orders.used(), 3);
        assert_eq!(d.read(r.evq_tx + 8, 4), 3);
        d.write(r.wdt_kick, 4, 1);
        d.write(r.wdt_kick, 4, WDT_KICK_KEY);
        assert_eq!((d.counters.kicks, d.counters.bad_kicks), (1, 1));
        assert_eq!(d.read(r.reset_cause, 4), RESET_CAUSE_POWER_ON);
        assert_eq!(d.read(0x0ff0, 4), 0);
        d.write(0x0ff0, 4, 9);
        assert_eq!(
            (d.counters.unknown_reads, d.counters.unknown_writes),
            (1, 1)
        );
        d.write(r.sw_reset, 4, 1);
        assert_eq!(d.stop, Some(Stop::SoftwareReset));
    }

    #[test]
    fn the_flash_controller_answers_in_its_block_and_time_passes_per_access() {
        use mrc_abi::device::flash::{cmd, reg, status};
        let mut d = dev();
        let base = d.regs.flash_ctrl;
        d.write(base + reg::ADDR, 4, 0);
        d.write(base + reg::CMD, 4, cmd::ERASE_SECTOR);
        // The iteration's time stands still; the driver's polls move the flash's time on.
        let mut polls = 0u64;
        while d.read(base + reg::STATUS, 4) & status::BUSY != 0 {
            polls += 1;
        }
        let erase = FlashTiming::TYPICAL.erase_sector_ns;
        assert!(polls * ACCESS_NS >= erase - ACCESS_NS && polls * ACCESS_NS <= erase + ACCESS_NS);
        assert_eq!(d.read(base + reg::ERASES, 4), 1);
        assert_eq!(d.read(base + reg::STATUS, 4), 0);
        // Past the controller's block the flash answers nothing (the map puts the host DMA
        // engine there); past that engine's block is no register.
        let dma_end = d.regs.host_dma + mrc_abi::device::host_dma::reg::BLOCK_BYTES;
        assert!(d.regs.host_dma >= base + reg::BLOCK_BYTES);
        assert_eq!(d.read(base + reg::BLOCK_BYTES, 4), 0);
        assert_eq!(d.flash.counters().bad_accesses, 0);
        assert_eq!(d.read(dma_end, 4), 0);
        assert_eq!(d.counters.unknown_reads, 1);
        // A core reset keeps the flash.
        let mut after = dev();
        after.keep_board(&mut d);
        assert_eq!(after.flash.counters().erases, 1);
    }
}
