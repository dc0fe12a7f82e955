//! The image's firmware-update service: `mrc_fw_update::service` (the FW_* admin commands over
//! the updater and the boot record, the one implementation the simulated device runs too) on
//! the NIC's flash (`mrc_nic_board::slots`, through the `hal`'s controller and read window)
//! with update chunks fetched by the core's host DMA engine (`mrc_nic_board::host_dma`).
//!
//! At boot the image reads the boot record the boot ROM wrote back before it started the
//! image: the ROM's choice is the record's preferred slot, and that slot's state says whether
//! the image runs on trial (`FW_STATUS` then reports `PENDING_CONFIRM` until the host sends
//! `FW_CONFIRM`; an image that never gets there is rolled back by the ROM after its trial
//! boots, the watchdog resetting an image that hangs). A blank or torn record (an image loaded
//! without the ROM, by a debugger) reads as the factory record: slot A, confirmed.
//!
//! The image trusts the **test-only** key of `mrc_fw_update::test_key`: a product build must
//! be given its own public key here.

use mrc_abi::device::admin::AdminCommand;
use mrc_firmware::admin::AdminResult;
use mrc_fw_update::service::FwService;
use mrc_fw_update::slots::{BootControl, Slot};
use mrc_fw_update::test_key;
use mrc_fw_update::update::UpdatePolicy;
use mrc_nic_board::host_dma::HostDma;
use mrc_nic_board::slots::FlashStore;
use mrc_nicloop::Firmware;

use crate::hal;

/// Trial boots the factory record allows an unconfirmed image (the boot ROM's record rules).
pub const MAX_TRIAL_BOOTS: u8 = 2;

/// Bytes of an update chunk staged per step (a flash page, the DMA engine's buffer).
const STAGE_BYTES: usize = mrc_abi::device::host_dma::BUF_BYTES as usize;

fn store() -> FlashStore<hal::FlashRegs, hal::FlashWindow> {
    FlashStore::new(hal::FlashRegs, hal::FlashWindow, hal::FLASH_LAYOUT)
}

/// The update service behind the main loop's `Firmware`.
pub struct FwPort {
    svc: FwService,
}

impl FwPort {
    /// The service of the image as booted (see the module docs).
    pub fn boot() -> FwPort {
        let policy = UpdatePolicy {
            abi_major: crate::ABI_MAJOR,
            public_key: test_key::PUBLIC_KEY,
        };
        let (record, running) = match store().load_record() {
            Ok(r) => (r, r.preferred()),
            Err(_) => (
                BootControl::factory(mrc_nicloop::FW_VERSION, MAX_TRIAL_BOOTS),
                Slot::A,
            ),
        };
        let svc = FwService::booted(record, running, policy);
        defmt::info!(
            "firmware: slot {}, version {=u32:#x}, state {}",
            running as u8,
            svc.running_version(),
            svc.state() as u8
        );
        FwPort { svc }
    }
}

impl Firmware for FwPort {
    fn execute(&mut self, cmd: &AdminCommand) -> AdminResult {
        let mut store = store();
        let mut dma = HostDma::new(hal::DmaRegs);
        let fetch = |iova: u64, out: &mut [u8]| dma.read(iova, out).is_ok();
        let mut stage = [0u8; STAGE_BYTES];
        let r = self.svc.execute(&mut store, cmd, fetch, &mut stage);
        if let Some(e) = r.err().and(self.svc.last_refusal()) {
            defmt::warn!("firmware update refused: {}", e);
        }
        r
    }

    fn running_version(&self) -> u32 {
        self.svc.running_version()
    }
}
