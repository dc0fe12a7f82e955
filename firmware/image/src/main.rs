//! # mrc-nic: the MRC image for the NIC's embedded RISC-V cores
//!
//! Boot (riscv-rt), recover the `NOINIT` block (crash record, log ring), start the watchdog,
//! build the main loop and hand the datapath and the host interface their rings
//! (`hal::NicDatapath::init`), then loop: read the timer once, kick the watchdog, look at the
//! ports' transceivers when their period is due (`mrc_nic_board::monitor`: the cage pins every
//! 10 us, a module over I2C only when its pins changed; a link change takes the loop's port
//! path, `NicLoop::set_port_link`), and run one
//! [`mrc_nicloop::NicLoop::step_admin`] at that `now` (admin commands into the shared admin
//! executor, DP->FW CSR entries into the MRC engine, its timeouts, its commands and the loop's
//! host writes out through the FW->DP ring), then tell the wake timer (`WAKE_AT`) the loop's
//! next timer deadline (the engine's or the port monitor's) when it changed. The `FW_*` admin
//! commands reach the update service ([`update`]: flash slots, boot record, host DMA of the
//! image's chunks). Packets never reach the core: the datapath does
//! every packet's work. With the `qemu` feature the image runs the [`selftest`] instead (or,
//! given the semihosting argument `fw-cost`, only the firmware cost measurement, [`fwcost`])
//! and exits QEMU with its verdict.
//!
//! All unsafe code is in [`hal`]; the rest of the image is `#![deny(unsafe_code)]`.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

#[cfg(feature = "qemu")]
mod fwcost;
mod hal;
#[cfg(feature = "qemu")]
mod runtime;
#[cfg(feature = "qemu")]
mod selftest;
#[cfg(feature = "qemu")]
mod twonic;
#[cfg(not(feature = "qemu"))]
mod update;

#[cfg(not(feature = "qemu"))]
use mrc_nic_board::cmis::{PortEvent, Transceiver};
use mrc_nic_board::crash::{event, EventKind};
#[cfg(not(feature = "qemu"))]
use mrc_nic_board::monitor::PortMonitor;

/// The ABI major this image speaks: the device contract's, from mrc-abi.
pub const ABI_MAJOR: u16 = mrc_abi::device::version::ABI_VERSION.major;
/// Watchdog period.
pub const WATCHDOG_NS: u32 = 50_000_000;
/// Lanes of each port's module the link needs (flags on other lanes are ignored).
#[cfg(not(feature = "qemu"))]
const LANES: u8 = 4;

#[riscv_rt::entry]
fn main() -> ! {
    let boot = hal::boot();
    defmt::info!(
        "mrc-nic boot: abi {}, log bytes kept {}",
        ABI_MAJOR,
        boot.log_kept
    );
    if let Some((reason, line, _)) = boot.crash {
        defmt::warn!(
            "previous run crashed: reason {} line/cause {}",
            reason as u16,
            line
        );
    }
    hal::trace(event(EventKind::Boot, 0));
    hal::watchdog_start(WATCHDOG_NS);

    #[cfg(feature = "qemu")]
    {
        let passed = if selftest::fw_cost_requested() {
            selftest::fw_cost()
        } else {
            selftest::run()
        };
        hal::exit(passed)
    }
    #[cfg(not(feature = "qemu"))]
    {
        let (lp, admin) = hal::nic_loop();
        let mut dp = hal::NicDatapath::init();
        let mut modules =
            PortMonitor::new(core::array::from_fn::<_, { mrc_nicloop::PORTS }, _>(|p| {
                Transceiver::new(hal::I2cPort::new(p as u8), p as u8, LANES)
            }));
        let mut fw = update::FwPort::boot();
        // (what `WAKE_AT` holds; 0 until the first write, which no deadline equals at boot)
        let mut wake = 0;
        loop {
            let now_ns = hal::now_ns();
            if cfg!(feature = "planted-hang") {
                // (an image that hangs: its main loop never runs, never kicks the watchdog)
                hang();
            }
            hal::watchdog_kick();
            modules.poll(now_ns, &mut hal::CagePins, &mut hal::SpinDelay, |e| {
                let (port, up) = match e {
                    PortEvent::Up { port } => {
                        hal::trace(event(EventKind::PortUp, u32::from(port)));
                        (port, true)
                    }
                    PortEvent::Down { port, reason } => {
                        let code = reason.code();
                        defmt::warn!("port {} down: reason {}", port, code);
                        let detail = u32::from(port) << 8 | u32::from(code);
                        hal::trace(event(EventKind::PortDown, detail));
                        (port, false)
                    }
                };
                lp.set_port_link(now_ns, usize::from(port), up);
            });
            lp.step_admin_fw(now_ns, &mut dp, admin, &mut fw);
            let next = lp
                .poll_timeout()
                .unwrap_or(u64::MAX)
                .min(modules.next_deadline());
            if next != wake {
                wake = next;
                hal::set_wake(next);
            }
        }
    }
}

/// The `planted-hang` build's main loop: spin without kicking the watchdog, which resets the
/// core; the boot ROM rolls such an image back once its trial boots are used.
#[cfg(not(feature = "qemu"))]
fn hang() -> ! {
    loop {
        core::hint::spin_loop();
    }
}
