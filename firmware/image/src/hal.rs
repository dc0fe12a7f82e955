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

/// Instructions retired (exact under `-icount`); the self-test measures with it.
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

/// Tells the core's wake timer (`WAKE_AT`) the main loop's next timer deadline in ns
/// (`u64::MAX`: none armed), low word first. An idle core may sleep until then or until new
/// work arrives; the simulator runs the loop's next iteration then. The caller writes it only
/// when it changed.
#[cfg(not(feature = "qemu"))]
pub fn set_wake(deadline_ns: u64) {
    write32(map::WAKE_AT, deadline_ns as u32);
    write32(map::WAKE_AT + 4, (deadline_ns >> 32) as u32);
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

// ------------------------------------------------------------------------------------------
// Stack high-water mark: the stack below the caller's frame is painted with a pattern, and
// later the lowest word no longer holding it shows how deep the stack went. riscv-rt's linker
// script names the stack region [`__estack`, `__sstack`) (it grows down from `__sstack`).

#[cfg(feature = "qemu")]
const STACK_PAINT: u32 = 0x5AC3_5AC3;

#[cfg(feature = "qemu")]
extern "C" {
    static __estack: u32;
    static __sstack: u32;
}

/// Paint the unused stack (from the bottom of the stack region to 256 bytes below the
/// caller's frame) so that [`stack_used_below`] can measure the deepest use after this call.
/// Returns the caller's stack mark (an address within 256 bytes below the caller's frame).
#[cfg(feature = "qemu")]
#[inline(never)]
pub fn stack_paint() -> usize {
    let bottom = core::ptr::addr_of!(__estack) as usize;
    let here = core::ptr::addr_of!(bottom) as usize;
    let mut p = bottom;
    while p + 256 < here {
        // SAFETY: [`__estack`, caller's sp - 256) is stack memory below every live frame
        // (the stack grows down and this function's own frame is above `here - 256`), word
        // aligned (riscv-rt aligns the region); nothing reads it until it is used as stack.
        unsafe { core::ptr::write_volatile(p as *mut u32, STACK_PAINT) };
        p += 4;
    }
    here
}

/// The deepest stack use since [`stack_paint`] returned `mark`, in bytes below `mark`: the
/// stack that the calls made after it needed (a lower bound when a frame left a word equal to
/// the pattern).
#[cfg(feature = "qemu")]
pub fn stack_used_below(mark: usize) -> usize {
    let bottom = core::ptr::addr_of!(__estack) as usize;
    let top = core::ptr::addr_of!(__sstack) as usize;
    let mut p = bottom;
    // SAFETY: reads within the stack region, word aligned, below the live frames or inside
    // them (plain loads of initialised words).
    while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == STACK_PAINT {
        p += 4;
    }
    mark.saturating_sub(p)
}

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
// Datapath queues (NIC only): the two CSR rings of mrc-abi `device::csr` (DP->FW at
// EVQ_RX_BASE, FW->DP at EVQ_TX_BASE, 32-byte entries) and the host interface's admin command
// and reply rings, each a `CsrQueueRegs` block in the CSR window with entry memory in DTCM
// that the firmware provides at boot.

#[cfg(not(feature = "qemu"))]
pub use csr_rings::NicDatapath;
#[cfg(not(feature = "qemu"))]
pub use i2c::{CagePins, I2cPort, SpinDelay};

#[cfg(not(feature = "qemu"))]
pub use update_io::{DmaRegs, FlashRegs, FlashWindow, FLASH_LAYOUT};

/// The update service's devices: the flash controller and read window, the host DMA engine.
#[cfg(not(feature = "qemu"))]
mod update_io {
    use mrc_abi::device::flash::FLASH_BASE;
    use mrc_nic_board::flash::Regs;
    use mrc_nic_board::slots::{Layout, Window};

    use super::{map, read32, write32};

    /// The slots and the boot record as flash offsets (the memory map's regions).
    pub const FLASH_LAYOUT: Layout = Layout {
        slot_a: map::FLASH_SLOT_A_ORIGIN as u32 - FLASH_BASE,
        slot_b: map::FLASH_SLOT_B_ORIGIN as u32 - FLASH_BASE,
        slot_len: map::FLASH_SLOT_A_LEN as u32,
        record: map::FLASH_BOOT_CONTROL_ORIGIN as u32 - FLASH_BASE,
    };
    const _: () = assert!(map::FLASH_SLOT_A_LEN == map::FLASH_SLOT_B_LEN);

    /// The flash controller's registers (`FLASH_CTRL_BASE`). Its busy waits kick the
    /// watchdog: a slot's erase is many sectors, each tens of milliseconds of the part's time.
    pub struct FlashRegs;

    impl Regs for FlashRegs {
        fn read(&mut self, offset: u32) -> u32 {
            if offset == mrc_abi::device::flash::reg::STATUS {
                super::watchdog_kick();
            }
            read32(map::FLASH_CTRL_BASE + offset as usize)
        }
        fn write(&mut self, offset: u32, value: u32) {
            write32(map::FLASH_CTRL_BASE + offset as usize, value);
        }
    }

    /// The host DMA engine's registers (`HOST_DMA_BASE`).
    pub struct DmaRegs;

    impl Regs for DmaRegs {
        fn read(&mut self, offset: u32) -> u32 {
            read32(map::HOST_DMA_BASE + offset as usize)
        }
        fn write(&mut self, offset: u32, value: u32) {
            write32(map::HOST_DMA_BASE + offset as usize, value);
        }
    }

    /// The flash's memory-mapped read window.
    pub struct FlashWindow;

    impl Window for FlashWindow {
        fn read(&self, offset: u32, out: &mut [u8]) {
            let base = FLASH_BASE as usize + offset as usize;
            let mut i = 0;
            while i < out.len() {
                let at = base + i;
                if at.is_multiple_of(4) && out.len() - i >= 4 {
                    out[i..i + 4].copy_from_slice(&read32(at).to_le_bytes());
                    i += 4;
                } else {
                    // SAFETY: a byte of the flash's read window (FLASH_BASE + an offset the
                    // store keeps inside its slots and record), which has no read side effect.
                    out[i] = unsafe { core::ptr::read_volatile(at as *const u8) };
                    i += 1;
                }
            }
        }
    }
}

/// The loop's configuration on the NIC (checked when the loop is built at boot).
const LOOP_CONFIG: mrc_nicloop::LoopConfig = mrc_nicloop::LoopConfig::DEFAULT;

/// The loop's home: uninitialised memory (`.bss`), built in place once by [`nic_loop`] at
/// boot (`NicLoop::init_in_place`): none of the engine's initial bytes is carried in the ITCM
/// beside the code, and no loop-sized value is ever on the stack.
static mut NIC_LOOP: core::mem::MaybeUninit<mrc_nicloop::NicLoop> =
    core::mem::MaybeUninit::uninit();

/// The loop and the admin tables fit the DTCM with the two 1 KiB CSR rings, the 768 bytes of
/// admin rings, the rest of `.bss` and the stack the loop needs (`mrc_nicloop::STACK_BUDGET`,
/// which the QEMU self-test checks the boot and admin paths against). A capacity change that
/// breaks this fails the build instead of overflowing the stack into `.bss` on the NIC.
#[cfg(not(feature = "qemu"))]
const _: () = assert!(
    core::mem::size_of::<mrc_nicloop::NicLoop>()
        + core::mem::size_of::<mrc_nicloop::NicAdmin>()
        + 3 * 1024
        + 4 * 1024
        + mrc_nicloop::STACK_BUDGET
        <= map::DTCM_LEN,
    "the loop's capacities and the stack budget do not fit the DTCM"
);

/// The admin tables (PDs, MRs, CQs, QPs, profiles): all zero when empty, so in `.bss` (DTCM
/// only, nothing in the ITCM's initialised-data image).
static mut NIC_ADMIN: mrc_nicloop::NicAdmin = mrc_nicloop::NicAdmin::new();

static NIC_LOOP_TAKEN: AtomicBool = AtomicBool::new(false);

/// The main loop, built now, and the admin tables, once (for the main loop; under QEMU for
/// the self-test's admin check). A second call panics, as does a configuration the engine
/// refuses (a build defect: [`LOOP_CONFIG`] is a constant).
///
/// Never inlined: the stack it takes to build the loop (a QP's state at a time) is given back
/// before the main loop runs, and the self-test measures this same function.
#[inline(never)]
pub fn nic_loop() -> (
    &'static mut mrc_nicloop::NicLoop,
    &'static mut mrc_nicloop::NicAdmin,
) {
    if NIC_LOOP_TAKEN.swap(true, Ordering::Relaxed) {
        panic!("main loop taken twice");
    }
    // SAFETY: the flag above hands out these references at most once for the program's life,
    // so they never alias; the admin tables hold valid (empty) tables from compile time, and
    // the loop is only used once `init_in_place` initialised it.
    let (slot, admin) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(NIC_LOOP),
            &mut *core::ptr::addr_of_mut!(NIC_ADMIN),
        )
    };
    match mrc_nicloop::NicLoop::init_in_place(slot, LOOP_CONFIG) {
        Ok(lp) => (lp, admin),
        Err(_) => panic!("invalid loop configuration"),
    }
}

#[cfg(not(feature = "qemu"))]
mod csr_rings {
    use core::mem::offset_of;

    use mrc_abi::device::admin::AdminReply;
    use mrc_abi::device::csr::{CsrEntry, CsrQueueRegs, CsrRing, ENTRY_BYTES};
    use mrc_nicloop::Datapath;

    use super::{map, read32, write32};

    /// log2 of the entries of each CSR ring (32 entries, 1 KiB of DTCM per ring).
    const RING_LOG2: u8 = 5;
    const RING_ENTRIES: usize = 1 << RING_LOG2;
    // (the loop's step budget and the simulator's firmware cores assume this depth)
    const _: () = assert!(RING_ENTRIES == mrc_nicloop::RING_ENTRIES);
    const WORDS: usize = ENTRY_BYTES / 4;

    const BASE: usize = offset_of!(CsrQueueRegs, base);
    const LOG2: usize = offset_of!(CsrQueueRegs, log2_entries);
    const PRODUCER: usize = offset_of!(CsrQueueRegs, producer);
    const CONSUMER: usize = offset_of!(CsrQueueRegs, consumer);
    const OVERFLOW: usize = offset_of!(CsrQueueRegs, overflow);

    /// Ring memory shared with the datapath: only read and written with volatile accesses.
    #[repr(C, align(32))]
    struct RingMem([[u32; WORDS]; RING_ENTRIES]);

    static mut DP_FW: RingMem = RingMem([[0; WORDS]; RING_ENTRIES]);
    static mut FW_DP: RingMem = RingMem([[0; WORDS]; RING_ENTRIES]);

    /// log2 of the entries of the admin command and reply rings (8 each).
    const ADMIN_LOG2: u8 = 3;
    const ADMIN_ENTRIES: usize = 1 << ADMIN_LOG2;
    const CMD_WORDS: usize = 64 / 4;
    const RESP_WORDS: usize = 32 / 4;

    /// Admin command ring memory (64-byte mrc-abi `AdminCmd`s the host interface copies from
    /// the host's admin queue): only read with volatile accesses.
    #[repr(C, align(64))]
    struct AdminCmdMem([[u32; CMD_WORDS]; ADMIN_ENTRIES]);

    /// Admin reply ring memory (32-byte mrc-abi `AdminResp`s the host interface copies to the
    /// host's response ring, setting the owner bit): only written with volatile accesses.
    #[repr(C, align(32))]
    struct AdminRespMem([[u32; RESP_WORDS]; ADMIN_ENTRIES]);

    static mut ADMIN_CMD: AdminCmdMem = AdminCmdMem([[0; CMD_WORDS]; ADMIN_ENTRIES]);
    static mut ADMIN_RESP: AdminRespMem = AdminRespMem([[0; RESP_WORDS]; ADMIN_ENTRIES]);

    fn admin_cmd_ptr(slot: u32) -> *mut u32 {
        // `slot < ADMIN_ENTRIES` (masked by `CsrRing::slot`): in bounds of the array.
        // SAFETY: `ADMIN_CMD` is the static above; `addr_of_mut!` creates no reference.
        unsafe { core::ptr::addr_of_mut!(ADMIN_CMD.0[slot as usize]).cast::<u32>() }
    }

    fn admin_resp_ptr(slot: u32) -> *mut u32 {
        // `slot < ADMIN_ENTRIES` (masked by `CsrRing::slot`): in bounds of the array.
        // SAFETY: `ADMIN_RESP` is the static above; `addr_of_mut!` creates no reference.
        unsafe { core::ptr::addr_of_mut!(ADMIN_RESP.0[slot as usize]).cast::<u32>() }
    }

    /// The words of a reply as the host's response ring holds it (owner bit clear: the host
    /// interface sets it for the host ring's slot).
    fn reply_words(r: &AdminReply) -> [u32; RESP_WORDS] {
        let mut w = [0u32; RESP_WORDS];
        w[0] = u32::from(r.status as u8) | u32::from(r.command_id) << 16;
        w[1] = r.syndrome;
        for (i, v) in r.result.iter().enumerate() {
            w[2 + 2 * i] = *v as u32;
            w[3 + 2 * i] = (*v >> 32) as u32;
        }
        w
    }

    /// Order device-register and ring-memory accesses (the datapath is another bus master).
    fn io_fence() {
        // SAFETY: a `fence iorw, iorw` has no operands and no effect besides ordering.
        unsafe { core::arch::asm!("fence iorw, iorw", options(nostack, preserves_flags)) }
    }

    fn entry_ptr(ring: *mut RingMem, slot: u32) -> *mut u32 {
        // `slot < RING_ENTRIES` (masked by `CsrRing::slot`): in bounds of the array.
        // SAFETY: `ring` points to one of the two statics above; `addr_of_mut!` on a field of
        // a place behind a raw pointer creates no reference.
        unsafe { core::ptr::addr_of_mut!((*ring).0[slot as usize]).cast::<u32>() }
    }

    /// The NIC's datapath as the main loop sees it (`mrc_nicloop::Datapath`).
    pub struct NicDatapath {
        ring: CsrRing,
        /// Our consumer index of DP->FW, our producer index of FW->DP (we own both).
        rx_consumer: u32,
        tx_producer: u32,
        tx_overflow: u32,
        /// The admin rings' geometry, our consumer index of commands, our producer index of
        /// replies.
        admin_ring: CsrRing,
        admin_consumer: u32,
        resp_producer: u32,
    }

    impl NicDatapath {
        /// Hand the rings to the datapath and the host interface: entry memory, size,
        /// indices 0, overflow 0. Called once at boot, before the datapath is enabled.
        pub fn init() -> Self {
            let ring = match CsrRing::new(RING_LOG2) {
                Some(r) => r,
                None => panic!("ring size"),
            };
            let admin_ring = match CsrRing::new(ADMIN_LOG2) {
                Some(r) => r,
                None => panic!("admin ring size"),
            };
            let rings = [
                (
                    map::EVQ_RX_BASE,
                    core::ptr::addr_of_mut!(DP_FW) as usize,
                    RING_LOG2,
                ),
                (
                    map::EVQ_TX_BASE,
                    core::ptr::addr_of_mut!(FW_DP) as usize,
                    RING_LOG2,
                ),
                (
                    map::ADMIN_CMDQ_BASE,
                    core::ptr::addr_of_mut!(ADMIN_CMD) as usize,
                    ADMIN_LOG2,
                ),
                (
                    map::ADMIN_RESPQ_BASE,
                    core::ptr::addr_of_mut!(ADMIN_RESP) as usize,
                    ADMIN_LOG2,
                ),
            ];
            for (regs, mem, log2) in rings {
                // rv32: DTCM addresses fit the 32-bit `base` register.
                write32(regs + BASE, mem as u32);
                write32(regs + LOG2, u32::from(log2));
                write32(regs + PRODUCER, 0);
                write32(regs + CONSUMER, 0);
                write32(regs + OVERFLOW, 0);
            }
            io_fence();
            NicDatapath {
                ring,
                rx_consumer: 0,
                tx_producer: 0,
                tx_overflow: 0,
                admin_ring,
                admin_consumer: 0,
                resp_producer: 0,
            }
        }
    }

    impl Datapath for NicDatapath {
        fn peek_events(&mut self, out: &mut [CsrEntry]) -> usize {
            let producer = read32(map::EVQ_RX_BASE + PRODUCER);
            let n = (self.ring.len(producer, self.rx_consumer) as usize).min(out.len());
            if n == 0 {
                return 0;
            }
            // Entry bytes after the producer index that published them.
            io_fence();
            let dp_fw = core::ptr::addr_of_mut!(DP_FW);
            for (k, e) in out.iter_mut().take(n).enumerate() {
                let p = entry_ptr(
                    dp_fw,
                    self.ring.slot(self.rx_consumer.wrapping_add(k as u32)),
                );
                for (i, chunk) in e.0.chunks_exact_mut(4).enumerate() {
                    // SAFETY: `p` points to a 32-byte aligned entry of 8 words in DP_FW
                    // (`i < 8`) that the datapath published and will not touch until we
                    // advance our consumer index past it.
                    let w = unsafe { core::ptr::read_volatile(p.add(i)) };
                    chunk.copy_from_slice(&w.to_le_bytes());
                }
            }
            n
        }

        fn consume_events(&mut self, n: usize) {
            if n == 0 {
                return;
            }
            // Our reads of the entries before the consumer index that hands them back.
            io_fence();
            self.rx_consumer = self.rx_consumer.wrapping_add(n as u32);
            write32(map::EVQ_RX_BASE + CONSUMER, self.rx_consumer);
        }

        fn orders_room(&mut self) -> usize {
            let consumer = read32(map::EVQ_TX_BASE + CONSUMER);
            let used = self.ring.len(self.tx_producer, consumer);
            (self.ring.entries() - used) as usize
        }

        fn push_orders(&mut self, entries: &[CsrEntry]) -> usize {
            let room = self.orders_room();
            let n = entries.len().min(room);
            if n < entries.len() {
                self.tx_overflow = self.tx_overflow.wrapping_add((entries.len() - n) as u32);
                write32(map::EVQ_TX_BASE + OVERFLOW, self.tx_overflow);
            }
            if n == 0 {
                return 0;
            }
            let fw_dp = core::ptr::addr_of_mut!(FW_DP);
            for (k, e) in entries.iter().take(n).enumerate() {
                let p = entry_ptr(
                    fw_dp,
                    self.ring.slot(self.tx_producer.wrapping_add(k as u32)),
                );
                for (i, chunk) in e.0.chunks_exact(4).enumerate() {
                    let w = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                    // SAFETY: `p` points to a 32-byte aligned entry of 8 words in FW_DP
                    // (`i < 8`) that the datapath has consumed (there was room), so it is ours.
                    unsafe { core::ptr::write_volatile(p.add(i), w) };
                }
            }
            // Entry bytes before the producer index that publishes them.
            io_fence();
            self.tx_producer = self.tx_producer.wrapping_add(n as u32);
            write32(map::EVQ_TX_BASE + PRODUCER, self.tx_producer);
            n
        }

        fn orders_written(&self) -> u32 {
            self.tx_producer
        }

        fn orders_taken(&mut self) -> u32 {
            read32(map::EVQ_TX_BASE + CONSUMER)
        }

        fn pop_admin(&mut self) -> Option<[u8; 64]> {
            let producer = read32(map::ADMIN_CMDQ_BASE + PRODUCER);
            if self.admin_ring.is_empty(producer, self.admin_consumer) {
                return None;
            }
            // A command waits while its reply would find the reply ring full.
            let resp_consumer = read32(map::ADMIN_RESPQ_BASE + CONSUMER);
            if self.admin_ring.is_full(self.resp_producer, resp_consumer) {
                return None;
            }
            // Entry bytes after the producer index that published them.
            io_fence();
            let p = admin_cmd_ptr(self.admin_ring.slot(self.admin_consumer));
            let mut out = [0u8; 64];
            for (i, chunk) in out.chunks_exact_mut(4).enumerate() {
                // SAFETY: `p` points to a 64-byte aligned entry of 16 words in ADMIN_CMD
                // (`i < 16`) that the host interface published and will not touch until we
                // advance `consumer`.
                let w = unsafe { core::ptr::read_volatile(p.add(i)) };
                chunk.copy_from_slice(&w.to_le_bytes());
            }
            io_fence();
            self.admin_consumer = self.admin_consumer.wrapping_add(1);
            write32(map::ADMIN_CMDQ_BASE + CONSUMER, self.admin_consumer);
            Some(out)
        }

        fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
            let consumer = read32(map::ADMIN_RESPQ_BASE + CONSUMER);
            if self.admin_ring.is_full(self.resp_producer, consumer) {
                return false;
            }
            let p = admin_resp_ptr(self.admin_ring.slot(self.resp_producer));
            for (i, w) in reply_words(reply).into_iter().enumerate() {
                // SAFETY: `p` points to a 32-byte aligned entry of 8 words in ADMIN_RESP
                // (`i < 8`) that the host interface has consumed (the ring is not full).
                unsafe { core::ptr::write_volatile(p.add(i), w) };
            }
            // Entry bytes before the producer index that publishes them.
            io_fence();
            self.resp_producer = self.resp_producer.wrapping_add(1);
            write32(map::ADMIN_RESPQ_BASE + PRODUCER, self.resp_producer);
            true
        }
    }
}

// ------------------------------------------------------------------------------------------
// Transceiver management (NIC only): the I2C controller and cage pins of mrc-abi
// `device::i2c` at I2C_BASE, behind `embedded_hal::i2c::I2c` one port at a time.

#[cfg(not(feature = "qemu"))]
mod i2c {
    use embedded_hal::i2c::{ErrorKind, ErrorType, I2c, NoAcknowledgeSource, Operation};
    use mrc_abi::device::i2c::{cmd, reg, status, ErrCause, DATA_BYTES};
    use mrc_nic_board::monitor::{ModulePins, Pins};

    use super::{map, read32, write32};

    /// Status reads a command may take before the controller counts as wedged (a command
    /// is at most 1 + 9 + 9 * 32 + 1 bit times: under 3.2 ms at 100 kHz, far fewer reads).
    const BUSY_READS: u32 = 1 << 20;

    /// Why a transfer failed: the controller's cause, or a controller that never went idle.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct I2cError(Option<ErrCause>);

    impl embedded_hal::i2c::Error for I2cError {
        fn kind(&self) -> ErrorKind {
            match self.0 {
                Some(ErrCause::AddressNack) => {
                    ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address)
                }
                Some(ErrCause::DataNack) => ErrorKind::NoAcknowledge(NoAcknowledgeSource::Data),
                Some(ErrCause::ArbitrationLost) => ErrorKind::ArbitrationLoss,
                None => ErrorKind::Bus,
                Some(ErrCause::Busy | ErrCause::BadCommand) => ErrorKind::Other,
            }
        }
    }

    fn wait_idle() -> Result<u32, I2cError> {
        for _ in 0..BUSY_READS {
            let s = read32(map::I2C_BASE + reg::STATUS as usize);
            if s & status::BUSY == 0 {
                return Ok(s);
            }
        }
        Err(I2cError(None))
    }

    /// One command; its error (the controller closed the transfer with a STOP then).
    fn command(word: u32) -> Result<(), I2cError> {
        write32(map::I2C_BASE + reg::CMD as usize, word);
        let s = wait_idle()?;
        if s & status::ERROR != 0 {
            let cause = ErrCause::from_u32(read32(map::I2C_BASE + reg::ERR_CAUSE as usize));
            write32(map::I2C_BASE + reg::STATUS as usize, status::ERROR);
            return Err(I2cError(cause.or(Some(ErrCause::BadCommand))));
        }
        Ok(())
    }

    /// Port `port`'s module on the shared bus: every transaction selects the port first
    /// (`ModSelL`), so one handle per port drives the one controller.
    #[derive(Clone, Copy, Debug)]
    pub struct I2cPort {
        port: u8,
    }

    impl I2cPort {
        /// The handle of port `port`.
        pub const fn new(port: u8) -> Self {
            I2cPort { port }
        }
    }

    impl ErrorType for I2cPort {
        type Error = I2cError;
    }

    impl I2c for I2cPort {
        /// embedded-hal's contract: a START and the address before the first operation, a
        /// repeated START where the direction changes, adjacent operations of one direction
        /// merged, a STOP at the end; each operation goes out in commands of at most the
        /// controller's buffer. An empty operation is refused before the bus is touched (a
        /// command moves 1 to 32 bytes).
        fn transaction(
            &mut self,
            address: u8,
            operations: &mut [Operation<'_>],
        ) -> Result<(), Self::Error> {
            if operations.iter().any(|o| match o {
                Operation::Read(b) => b.is_empty(),
                Operation::Write(b) => b.is_empty(),
            }) {
                return Err(I2cError(Some(ErrCause::BadCommand)));
            }
            let s = wait_idle()?;
            if s & status::IN_TRANSFER != 0 {
                // A transfer left open (never by this driver): refused, not joined.
                return Err(I2cError(Some(ErrCause::Busy)));
            }
            write32(
                map::I2C_BASE + reg::PORT_SELECT as usize,
                u32::from(self.port),
            );
            write32(map::I2C_BASE + reg::ADDR as usize, u32::from(address));
            let n = operations.len();
            let mut last_read: Option<bool> = None;
            for i in 0..n {
                let next_read = operations
                    .get(i + 1)
                    .map(|o| matches!(o, Operation::Read(_)));
                let (reading, len) = match &operations[i] {
                    Operation::Read(b) => (true, b.len()),
                    Operation::Write(b) => (false, b.len()),
                };
                let mut start = last_read != Some(reading);
                last_read = Some(reading);
                let mut off = 0;
                loop {
                    let k = (len - off).min(DATA_BYTES as usize);
                    let end_of_op = off + k == len;
                    let stop = end_of_op && i + 1 == n;
                    let more = reading && !stop && (!end_of_op || next_read == Some(true));
                    let mut word =
                        if reading { cmd::READ } else { cmd::WRITE } | cmd::len(k as u32);
                    if start {
                        word |= cmd::START;
                    }
                    if stop {
                        word |= cmd::STOP;
                    }
                    if more {
                        word |= cmd::MORE;
                    }
                    if let Operation::Write(b) = &operations[i] {
                        for (w, chunk) in b[off..off + k].chunks(4).enumerate() {
                            let mut v = [0u8; 4];
                            v[..chunk.len()].copy_from_slice(chunk);
                            write32(
                                map::I2C_BASE + reg::DATA as usize + 4 * w,
                                u32::from_le_bytes(v),
                            );
                        }
                    }
                    command(word)?;
                    if let Operation::Read(b) = &mut operations[i] {
                        for (w, chunk) in b[off..off + k].chunks_mut(4).enumerate() {
                            let v =
                                read32(map::I2C_BASE + reg::DATA as usize + 4 * w).to_le_bytes();
                            chunk.copy_from_slice(&v[..chunk.len()]);
                        }
                    }
                    start = false;
                    off += k;
                    if end_of_op {
                        break;
                    }
                }
            }
            Ok(())
        }
    }

    /// The cage pins of every port: one register read.
    pub struct CagePins;

    impl ModulePins for CagePins {
        fn pins(&mut self) -> Pins {
            let v = read32(map::I2C_BASE + reg::MODULES as usize);
            Pins {
                present: v as u8,
                interrupt: (v >> 8) as u8,
            }
        }
    }

    /// A pause by spinning the core (the driver's retry pause): never reads the timer, which
    /// the main loop reads once per iteration.
    pub struct SpinDelay;

    impl embedded_hal::delay::DelayNs for SpinDelay {
        fn delay_ns(&mut self, ns: u32) {
            // At the timer's 1 GHz, a cycle per ns: the pause is at least `ns` on a core
            // clocked at most that fast.
            riscv::asm::delay(ns);
        }
    }
}
