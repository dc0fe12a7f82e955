//! The real VFIO path against QEMU's `edu` teaching device (PCI 1234:11e8), run inside a Linux
//! guest by `tests/vfio_qemu.rs`; the device must already be bound to `vfio-pci`.
//!
//! ```text
//! vfio_edu <BDF> <NONCE-hex>
//! ```
//!
//! Through `mrc_driver::sys` only: open the device (container, group, device fd, BAR0 mmap,
//! bus mastering, one MSI vector on an eventfd), check edu's ID and liveness registers and its
//! factorial unit, raise and acknowledge an interrupt, then an IOMMU-mapped DMA round trip: a
//! nonce-derived pattern goes RAM -> edu's buffer -> a second, zeroed RAM buffer, and must come
//! back byte for byte. Then both buffers are freed (IOMMU unmap) and edu DMAs to the freed
//! IOVA, which must fault in the IOMMU (`UNMAPPED_DMA_IOVA=<iova>`; the host checks the kernel's
//! DMAR fault report). On success it prints `NONCE=<nonce> HASH=<FNV-1a of the DMA'd bytes>`
//! (see `guest/edu_pattern.rs`) and exits 0; on any failure `VFIO_EDU_FAIL: <error chain>` and
//! exit code 1. Every wait is bounded.
//!
//! edu facts this relies on (QEMU `hw/misc/edu.c`): MSI only, no reset, DMA addresses are
//! 28 bits (so the IOVA window is below 2^28), its DMA buffer is 4 KiB at device address
//! 0x40000, and each DMA completes on a 100 ms virtual-time timer.

#[path = "../guest/edu_pattern.rs"]
mod edu_pattern;

use std::error::Error as StdError;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use edu_pattern::{fnv1a64, pattern, result_line, EDU_DMA_BYTES};
use mrc_driver::sys::vfio::{VfioBackend, VfioConfig};
use mrc_driver::sys::{Backend, Bdf, DmaRegion, Iova, PCI_COMMAND, PCI_COMMAND_MASTER};

/// edu's identification register and its value (major 1, minor 0, 0xed).
const REG_ID: u64 = 0x00;
const EDU_ID: u32 = 0x0100_00ed;
/// Liveness: reads back the bitwise inverse of what was written.
const REG_LIVENESS: u64 = 0x04;
/// Factorial: write n, read n! once status bit 0 clears.
const REG_FACTORIAL: u64 = 0x08;
const REG_STATUS: u64 = 0x20;
const STATUS_COMPUTING: u32 = 1 << 0;
/// Interrupt status, raise (ORs the value in and signals), acknowledge (clears the bits).
const REG_IRQ_STATUS: u64 = 0x24;
const REG_IRQ_RAISE: u64 = 0x60;
const REG_IRQ_ACK: u64 = 0x64;
/// DMA engine: source, destination, byte count, command.
const REG_DMA_SRC: u64 = 0x80;
const REG_DMA_DST: u64 = 0x88;
const REG_DMA_COUNT: u64 = 0x90;
const REG_DMA_CMD: u64 = 0x98;
const DMA_CMD_START: u64 = 1 << 0;
const DMA_CMD_TO_RAM: u64 = 1 << 1;
const DMA_CMD_IRQ: u64 = 1 << 2;
/// The interrupt status bit edu sets when a DMA with [`DMA_CMD_IRQ`] completes.
const IRQ_DMA_DONE: u32 = 0x100;
/// edu's internal DMA buffer, in the device's own address space.
const EDU_BUF: u64 = 0x40000;
/// edu masks DMA addresses to 28 bits: keep every IOVA below that.
const EDU_DMA_LIMIT: u64 = 1 << 28;
/// Bound on every wait for the device.
const DEVICE_TIMEOUT: Duration = Duration::from_secs(20);

type Res<T> = Result<T, Box<dyn StdError>>;

fn main() -> ExitCode {
    log::set_logger(&CONSOLE).ok();
    log::set_max_level(log::LevelFilter::Info);
    let args: Vec<String> = std::env::args().collect();
    let outcome = match args.as_slice() {
        [_, bdf, nonce] => parse_args(bdf, nonce).and_then(|(bdf, nonce)| run(bdf, nonce)),
        _ => Err("usage: vfio_edu <BDF> <NONCE-hex>".into()),
    };
    match outcome {
        Ok(line) => {
            println!("{line}");
            std::io::stdout().flush().ok();
            ExitCode::SUCCESS
        }
        Err(e) => {
            let mut msg = e.to_string();
            let mut source = e.source();
            while let Some(s) = source {
                msg.push_str(&format!(": {s}"));
                source = s.source();
            }
            println!("VFIO_EDU_FAIL: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(bdf: &str, nonce: &str) -> Res<(Bdf, u64)> {
    let bdf: Bdf = bdf.parse()?;
    let nonce = u64::from_str_radix(nonce.trim_start_matches("0x"), 16)
        .map_err(|e| format!("nonce {nonce:?} is not hex: {e}"))?;
    Ok((bdf, nonce))
}

fn step(what: &str) {
    println!("vfio_edu: {what}");
}

fn run(bdf: Bdf, nonce: u64) -> Res<String> {
    let cfg = VfioConfig {
        // edu has no reset; the backend skips it when VFIO_DEVICE_RESET is not offered.
        reset: true,
        max_vectors: 1,
        hugepages: true,
        iova_base: Iova(1 << 20),
        iova_span: EDU_DMA_LIMIT - (1 << 20),
        ..VfioConfig::default()
    };
    let dev = VfioBackend::open_device(bdf, &cfg)?;
    step(&format!(
        "opened {bdf}: BAR0 {:#x} bytes, {} regions, {:?} with {} vector(s)",
        dev.bar0_len(),
        dev.device_info().num_regions,
        dev.irq_kind(),
        dev.interrupt_vectors()
    ));

    let id = dev.mmio_read32(REG_ID)?;
    if id != EDU_ID {
        return Err(format!("ID register {id:#010x}, expected {EDU_ID:#010x}").into());
    }
    step(&format!("ID register {id:#010x}"));
    for probe in [nonce as u32, !(nonce as u32), 0x5a5a_a5a5] {
        dev.mmio_write32(REG_LIVENESS, probe)?;
        let back = dev.mmio_read32(REG_LIVENESS)?;
        if back != !probe {
            return Err(format!("liveness: wrote {probe:#010x}, read {back:#010x}").into());
        }
    }
    step("liveness register inverts");
    check_factorial(&dev)?;

    let cmd = dev.config_read_u16(PCI_COMMAND)?;
    if cmd & PCI_COMMAND_MASTER == 0 {
        return Err(format!("bus mastering is off after open (command {cmd:#06x})").into());
    }
    step(&format!("bus master enabled (command {cmd:#06x})"));
    check_interrupt(&dev)?;

    let want = pattern(nonce);
    let src = dev.alloc_dma(EDU_DMA_BYTES)?;
    let dst = dev.alloc_dma(EDU_DMA_BYTES)?;
    step(&format!(
        "DMA buffers at {} and {} ({} hugepage fallbacks)",
        src.iova(),
        dst.iova(),
        dev.stats().hugepage_fallbacks.load(Ordering::Relaxed)
    ));
    for r in [&src, &dst] {
        if r.iova().0 + r.len() as u64 > EDU_DMA_LIMIT {
            return Err(format!("{} lies beyond edu's 28-bit DMA reach", r.iova()).into());
        }
    }
    src.write_slice(0, &want)?;

    dma(&dev, src.iova().0, EDU_BUF, 0)?;
    step("DMA RAM -> edu done");
    dma(&dev, EDU_BUF, dst.iova().0, DMA_CMD_TO_RAM | DMA_CMD_IRQ)?;
    wait_irq(&dev, IRQ_DMA_DONE)?;
    step("DMA edu -> RAM done, completion interrupt received");

    let got = read_all(&dst)?;
    if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
        return Err(format!(
            "DMA round trip differs at byte {i}: {:#04x}, expected {:#04x}",
            got[i], want[i]
        )
        .into());
    }
    step("DMA round trip matches byte for byte");

    // Freeing unmaps the IOVA (VFIO_IOMMU_UNMAP_DMA); a DMA there must now fault in the
    // IOMMU instead of reaching memory. The host finds the kernel's DMAR fault report for
    // this address on the console (init.sh prints the DMAR lines of the kernel log).
    let stale = dst.iova().0;
    src.free()?;
    dst.free()?;
    dma(&dev, EDU_BUF, stale, DMA_CMD_TO_RAM)?;
    println!("UNMAPPED_DMA_IOVA={stale:#x}");
    Ok(result_line(nonce, fnv1a64(&got)))
}

fn read_all(r: &DmaRegion) -> Res<Vec<u8>> {
    let mut buf = vec![0u8; EDU_DMA_BYTES];
    r.read_slice(0, &mut buf)?;
    Ok(buf)
}

/// Polls until `done` returns true, at most [`DEVICE_TIMEOUT`].
fn poll_until(what: &str, mut done: impl FnMut() -> Res<bool>) -> Res<()> {
    let start = Instant::now();
    while !done()? {
        if start.elapsed() > DEVICE_TIMEOUT {
            return Err(format!("timed out after {DEVICE_TIMEOUT:?} waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn check_factorial(dev: &impl Backend) -> Res<()> {
    dev.mmio_write32(REG_FACTORIAL, 10)?;
    poll_until("the factorial unit", || {
        Ok(dev.mmio_read32(REG_STATUS)? & STATUS_COMPUTING == 0)
    })?;
    let f = dev.mmio_read32(REG_FACTORIAL)?;
    if f != 3_628_800 {
        return Err(format!("10! read as {f}").into());
    }
    step("factorial unit: 10! = 3628800");
    Ok(())
}

/// Raises interrupt bit 0 by register, waits for the MSI on the eventfd, acknowledges it.
fn check_interrupt(dev: &impl Backend) -> Res<()> {
    dev.mmio_write32(REG_IRQ_RAISE, 1)?;
    wait_irq(dev, 1)?;
    step("MSI raised by register arrived on the eventfd");
    Ok(())
}

/// Waits for the MSI, checks `bits` are set in the interrupt status, acknowledges them.
fn wait_irq(dev: &impl Backend, bits: u32) -> Res<()> {
    let fired = dev.wait_interrupt(0, DEVICE_TIMEOUT)?;
    if fired == 0 {
        return Err(
            format!("no interrupt within {DEVICE_TIMEOUT:?} (status bits {bits:#x})").into(),
        );
    }
    let status = dev.mmio_read32(REG_IRQ_STATUS)?;
    if status & bits != bits {
        return Err(format!("interrupt status {status:#x}, expected bits {bits:#x}").into());
    }
    dev.mmio_write32(REG_IRQ_ACK, status)?;
    let after = dev.mmio_read32(REG_IRQ_STATUS)?;
    if after != 0 {
        return Err(format!("interrupt status {after:#x} after acknowledging {status:#x}").into());
    }
    Ok(())
}

/// One edu DMA of [`EDU_DMA_BYTES`] from `src` to `dst`, polled to completion.
fn dma(dev: &impl Backend, src: u64, dst: u64, flags: u64) -> Res<()> {
    dev.mmio_write64(REG_DMA_SRC, src)?;
    dev.mmio_write64(REG_DMA_DST, dst)?;
    dev.mmio_write64(REG_DMA_COUNT, EDU_DMA_BYTES as u64)?;
    dev.mmio_write64(REG_DMA_CMD, DMA_CMD_START | flags)?;
    poll_until("the DMA engine", || {
        Ok(dev.mmio_read64(REG_DMA_CMD)? & DMA_CMD_START == 0)
    })
}

/// Log records from `mrc_driver` (e.g. the hugepage fallback warning) on the console.
struct ConsoleLog;
static CONSOLE: ConsoleLog = ConsoleLog;

impl log::Log for ConsoleLog {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        println!("vfio_edu: [{}] {}", record.level(), record.args());
    }
    fn flush(&self) {}
}
