//! The only module with `unsafe`: MMIO, the `NOINIT` block, the defmt transport, the exit
//! device. Addresses come from `firmware/memory-map.toml` (generated `memmap.rs`).
//!
//! Every register access is a volatile read or write of an address the memory map names for
//! the selected target; nothing else in the image touches raw memory.
#![allow(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};

use mrc_nic_board::crash::{CrashReason, EventTrace};
use mrc_nic_board::Noinit;

#[allow(dead_code)]
mod map {
    include!(concat!(env!("OUT_DIR"), "/memmap.rs"));
}
pub use map::MTIME_HZ;

fn read32(addr: usize) -> u32 {
    // SAFETY: callers pass register addresses from the generated memory map, which lie in a
    // device region of the selected target, are 4-byte aligned and have no side effect on read
    // beyond the device's own semantics.
    unsafe { core::ptr::read_volatile(addr as *const u32) }
}

fn write32(addr: usize, v: u32) {
    // SAFETY: as `read32`: a 4-byte aligned device register from the memory map.
    unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
}

/// The 64-bit timer, read as hi/lo/hi so a carry between the halves is never torn.
fn read_mtime() -> u64 {
    loop {
        let hi = read32(map::MTIME + 4);
        let lo = read32(map::MTIME);
        if read32(map::MTIME + 4) == hi {
            return (u64::from(hi) << 32) | u64::from(lo);
        }
    }
}

/// Now, in nanoseconds since reset. Read once per main-loop iteration and passed in.
pub fn now_ns() -> u64 {
    let t = read_mtime();
    // 1 GHz on the NIC (identity), 10 MHz on QEMU virt.
    t.saturating_mul(1_000_000_000 / MTIME_HZ)
}

/// Instructions retired (exact under `-icount`). Only the self-test measures today.
#[cfg_attr(not(feature = "qemu"), allow(dead_code))]
pub fn instret() -> u64 {
    riscv::register::minstret::read64()
}

// ------------------------------------------------------------------------------------------
// Watchdog.

/// The key the NIC watchdog wants on a kick.
#[cfg(not(feature = "qemu"))]
const WDT_KICK_KEY: u32 = 0x5A5A_A5A5;

/// Start the watchdog with a period of `timeout_ns`.
pub fn watchdog_start(timeout_ns: u32) {
    #[cfg(not(feature = "qemu"))]
    {
        write32(map::WDT_TIMEOUT_NS, timeout_ns);
        write32(map::WDT_KICK, WDT_KICK_KEY);
    }
    #[cfg(feature = "qemu")]
    {
        // QEMU virt has no watchdog: mtimecmp plays it. A machine-timer interrupt is the bite.
        WDT_PERIOD_TICKS.store(
            (u64::from(timeout_ns) / (1_000_000_000 / MTIME_HZ)) as u32,
            Ordering::Relaxed,
        );
        watchdog_kick();
        // SAFETY: enabling the machine timer interrupt whose handler (`watchdog_bite`) is
        // defined below; no other interrupt source is enabled.
        unsafe {
            riscv::register::mie::set_mtimer();
            riscv::interrupt::enable();
        }
    }
}

#[cfg(feature = "qemu")]
static WDT_PERIOD_TICKS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Restart the watchdog period. Called once per main-loop iteration.
pub fn watchdog_kick() {
    #[cfg(not(feature = "qemu"))]
    write32(map::WDT_KICK, WDT_KICK_KEY);
    #[cfg(feature = "qemu")]
    {
        let deadline = read_mtime() + u64::from(WDT_PERIOD_TICKS.load(Ordering::Relaxed));
        // Write high as all-ones first so no spurious compare happens between the halves.
        write32(map::MTIMECMP + 4, u32::MAX);
        write32(map::MTIMECMP, deadline as u32);
        write32(map::MTIMECMP + 4, (deadline >> 32) as u32);
    }
}

#[cfg(feature = "qemu")]
#[riscv_rt::core_interrupt(riscv::interrupt::Interrupt::MachineTimer)]
fn watchdog_bite() -> ! {
    crash(CrashReason::Watchdog, "watchdog", 0, 0);
}

// ------------------------------------------------------------------------------------------
// NOINIT: crash record and log ring, kept across reset at the NOINIT origin.

#[link_section = ".noinit"]
static mut NOINIT: core::mem::MaybeUninit<Noinit> = core::mem::MaybeUninit::uninit();

static NOINIT_TAKEN: AtomicBool = AtomicBool::new(false);

fn noinit() -> &'static mut Noinit {
    // SAFETY: `.noinit` is placed by the generated linker script at the NOINIT origin and is
    // never written by the runtime's RAM init. Every bit pattern is a valid `Noinit` (plain
    // integers and byte arrays), so reading it uninitialised-by-us is sound, and the contents are
    // validated (magic, CRC) before use. Single hart; the reference is only used inside
    // functions of this module that do not overlap (boot, logger with interrupts masked, crash).
    unsafe { (*core::ptr::addr_of_mut!(NOINIT)).assume_init_mut() }
}

/// What boot found in `NOINIT`.
pub struct BootInfo {
    /// A crash record from before this reset, copied out.
    pub crash: Option<(CrashReason, u32, u32)>,
    /// Log bytes kept from before the reset.
    pub log_kept: u32,
}

/// Recover `NOINIT`: keep an intact log ring, report and clear a crash record.
pub fn boot() -> BootInfo {
    if NOINIT_TAKEN.swap(true, Ordering::Relaxed) {
        return BootInfo {
            crash: None,
            log_kept: 0,
        };
    }
    let n = noinit();
    n.log.recover();
    let crash = n
        .crash
        .read()
        .map(|c| (c.reason, c.line_or_cause, c.boot_count));
    BootInfo {
        crash,
        log_kept: n.log.written(),
    }
}

static mut TRACE: EventTrace = EventTrace::new();

/// Record an event in the trace that a crash record keeps.
pub fn trace(code: u32) {
    riscv::interrupt::free(|| {
        // SAFETY: single hart, interrupts masked: no other reference to TRACE is live.
        unsafe { (*core::ptr::addr_of_mut!(TRACE)).push(code) }
    });
}

/// Write the crash record and stop: exit QEMU with failure, or reset the NIC core.
pub fn crash(reason: CrashReason, file: &str, line: u32, mepc: u32) -> ! {
    riscv::interrupt::disable();
    // SAFETY: interrupts are off for good; this is the last code to run before reset.
    let trace = unsafe { *core::ptr::addr_of!(TRACE) };
    noinit().crash.record(reason, 0, file, line, mepc, &trace);
    defmt::error!("crash {} at {}:{}", reason as u16, file, line);
    exit(false)
}

// ------------------------------------------------------------------------------------------
// defmt transport: every frame goes to the log ring; under QEMU also to semihosting stdout.

#[defmt::global_logger]
struct Logger;

static LOGGER_TAKEN: AtomicBool = AtomicBool::new(false);
static mut RESTORE: bool = false;
static mut ENCODER: defmt::Encoder = defmt::Encoder::new();

fn sink(bytes: &[u8]) {
    noinit().log.append(bytes);
    #[cfg(feature = "qemu")]
    {
        use semihosting::io::Write as _;
        if let Ok(mut out) = semihosting::io::stdout() {
            let _ = out.write_all(bytes);
        }
    }
}

// SAFETY: `acquire` masks interrupts and takes a flag, so frames never interleave and the
// encoder and the log ring have one user at a time; `release` undoes both in order.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        let was_on = riscv::register::mstatus::read().mie();
        riscv::interrupt::disable();
        if LOGGER_TAKEN.swap(true, Ordering::Acquire) {
            // Re-entrant log (from a crash inside the logger): drop it.
            return;
        }
        // SAFETY: interrupts are off and the flag is ours.
        unsafe {
            RESTORE = was_on;
            (*core::ptr::addr_of_mut!(ENCODER)).start_frame(sink);
        }
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: paired with `acquire`, which took the flag and masked interrupts.
        unsafe {
            (*core::ptr::addr_of_mut!(ENCODER)).end_frame(sink);
            LOGGER_TAKEN.store(false, Ordering::Release);
            if RESTORE {
                riscv::interrupt::enable();
            }
        }
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: between `acquire` and `release`.
        unsafe { (*core::ptr::addr_of_mut!(ENCODER)).write(bytes, sink) }
    }
}

// ------------------------------------------------------------------------------------------
// Exit.

/// Leave: under QEMU the sifive_test finisher ends the emulator (pass / fail code 1); on the NIC
/// a failure resets the core through the CSR window, a success parks it.
pub fn exit(success: bool) -> ! {
    #[cfg(feature = "qemu")]
    write32(
        map::FINISHER,
        if success { 0x5555 } else { (1 << 16) | 0x3333 },
    );
    #[cfg(not(feature = "qemu"))]
    if !success {
        write32(map::SW_RESET, 1);
    }
    loop {
        riscv::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let (file, line) = info.location().map_or(("?", 0), |l| (l.file(), l.line()));
    crash(CrashReason::Panic, file, line, 0)
}

/// Unexpected traps (access faults, illegal instructions) become crash records.
#[export_name = "ExceptionHandler"]
fn exception(trap: &riscv_rt::TrapFrame) -> ! {
    let _ = trap;
    crash(
        CrashReason::Exception,
        "trap",
        riscv::register::mcause::read().bits() as u32,
        riscv::register::mepc::read() as u32,
    )
}

// ------------------------------------------------------------------------------------------
// Datapath CSR event queues (NIC only): a ring of 32-bit words with producer/consumer indices.

/// A CSR event queue: `base + 0` producer index, `base + 4` consumer index, `base + 8` entry
/// count (power of two), entries from `base + 0x40`. Entry layout: mrc-abi (pending).
#[cfg(not(feature = "qemu"))]
pub struct CsrQueue {
    base: usize,
}

#[cfg(not(feature = "qemu"))]
impl CsrQueue {
    /// The datapath -> firmware queue.
    pub const RX: CsrQueue = CsrQueue {
        base: map::EVQ_RX_BASE,
    };

    /// Reset the consumer index to the producer's (drop stale entries at boot).
    pub fn init(&self) {
        write32(self.base + 4, read32(self.base));
    }

    /// The next entry, if any.
    pub fn pop(&self) -> Option<u32> {
        let prod = read32(self.base);
        let cons = read32(self.base + 4);
        if prod == cons {
            return None;
        }
        let mask = read32(self.base + 8).saturating_sub(1);
        let v = read32(self.base + 0x40 + 4 * (cons & mask) as usize);
        write32(self.base + 4, cons.wrapping_add(1));
        Some(v)
    }
}
