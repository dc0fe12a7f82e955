//! The simulated device's update path at the `elf` firmware level (cargo feature `elf`,
//! [`super::SimHost::with_elf_firmware`]): the `FW_*` admin commands of a NIC go into the
//! admin rings of the `mrc-nic` ELF on an emulated core (`mrc_elfcore`), powered on through
//! its boot ROM from a flash whose slot A holds the image itself, packed and signed (test-only
//! key) as version [`super::firmware::FACTORY_VERSION`]. The image runs its own update service
//! (flash driver, verifier, boot record) and fetches each `FW_CHUNK` with its host DMA engine
//! from the driver's DMA memory (the twin's IOVA space); a device reset resets the core, and
//! the boot ROM picks the slot.
//!
//! Only the firmware commands reach the core: the NIC's other admin commands, its datapath and
//! its fabric stay with the simulated device (`admin`, `clos`). The core's main loop runs one
//! iteration per microsecond of its own time, only while a command waits for its reply.

use std::sync::Arc;

use mrc_abi::device::admin::{AdminCommand, AdminStatus};
use mrc_driver::sys::twin::TwinDevice;
use mrc_driver::sys::Iova;
use mrc_elfcore::board::flash::{FlashDevice, FlashSlots, FlashTiming};
use mrc_elfcore::board::host_dma::HostMemory;
use mrc_elfcore::{AdminPort, BootRom, CoreConfig, ElfCore, NicMap, NoReply};
use mrc_fw_update::pack::{flatten_elf, pack_image, ImageMeta};
use mrc_fw_update::slots::Slot;
use mrc_fw_update::test_key;
use mrc_fw_update::update::{SlotStorage, UpdatePolicy};

use super::firmware::{FACTORY_VERSION, MAX_TRIAL_BOOTS};

/// A fast part (erase 200 µs a sector, 20 µs a page): the image still polls every command.
const TIMING: FlashTiming = FlashTiming {
    erase_sector_ns: 200_000,
    program_page_ns: 20_000,
};

/// Iterations a command may take before it is answered `INTERNAL`.
const COMMAND_ITERATIONS: usize = 16;

type Res = Result<[u64; 3], (AdminStatus, u32)>;

/// The driver's DMA memory as the core's host DMA engine reads it.
struct TwinMemory(Arc<TwinDevice>);

impl HostMemory for TwinMemory {
    fn read(&mut self, iova: u64, out: &mut [u8]) -> bool {
        self.0.dma_read(Iova(iova), out).is_ok()
    }
}

/// One NIC's update path on the emulated core.
pub(crate) struct ElfFw {
    core: Box<ElfCore>,
    port: AdminPort,
    now_ns: u64,
    /// Why the core stopped for good, if it did.
    dead: Option<String>,
}

impl ElfFw {
    /// The core powered on with `elf` in slot A, the driver's DMA memory behind `dev`.
    pub fn power_on(elf: &[u8], dev: Arc<TwinDevice>) -> Result<ElfFw, String> {
        let map = NicMap::nic().map_err(|e| e.to_string())?;
        let (load, entry, body) = flatten_elf(elf)?;
        let mut meta = ImageMeta::new(FACTORY_VERSION, mrc_abi::device::version::ABI_VERSION.major);
        meta.load_addr = load;
        meta.entry = entry;
        let image = pack_image(&body, &meta, &test_key::SEED);
        let mut flash = FlashDevice::new(TIMING);
        FlashSlots::new(&mut flash, &map)
            .write(Slot::A, 0, &image)
            .map_err(|e| format!("flashing the factory image: {e:?}"))?;
        let rom = BootRom {
            policy: UpdatePolicy {
                abi_major: meta.abi_major,
                public_key: test_key::PUBLIC_KEY,
            },
            factory_version: FACTORY_VERSION,
            max_trial_boots: MAX_TRIAL_BOOTS,
        };
        let mut core = ElfCore::power_on(flash, rom, CoreConfig::DEFAULT)
            .map_err(|e| format!("the NIC image did not boot: {e}"))?;
        core.device_mut().host_dma.host = Some(Box::new(TwinMemory(dev)));
        Ok(ElfFw {
            core: Box::new(core),
            port: AdminPort::default(),
            now_ns: 0,
            dead: None,
        })
    }

    /// A device reset: the core resets and its boot ROM boots the slot the record picks.
    pub fn reset(&mut self) {
        if self.dead.is_none() {
            self.now_ns += 1_000;
            if let Err(e) = self.core.reset_now(self.now_ns) {
                self.dead = Some(e.to_string());
            }
        }
    }

    /// Run `cmd` on the core: its reply's result, or its refusal (`INTERNAL` when the core
    /// could not answer).
    pub fn execute(&mut self, cmd: &AdminCommand) -> Res {
        if self.dead.is_some() {
            return Err((AdminStatus::Internal, 0));
        }
        match self
            .port
            .execute(&mut self.core, &mut self.now_ns, cmd, COMMAND_ITERATIONS)
        {
            Ok(r) if r.status == AdminStatus::Ok => Ok(r.result),
            Ok(r) => Err((r.status, r.syndrome)),
            Err(NoReply::Core(e)) => {
                self.dead = Some(e.to_string());
                Err((AdminStatus::Internal, 0))
            }
            // The image reset itself (a watchdog bite, a crash), or never answered.
            Err(_) => Err((AdminStatus::Internal, 0)),
        }
    }

    /// FW_STATUS as the image answers it: (running slot, running version, update state).
    pub fn status(&mut self) -> Option<(u32, u32, u32)> {
        let r = self.execute(&AdminCommand::FwStatus).ok()?;
        Some(((r[0] >> 32) as u32, r[1] as u32, (r[0] & 0xff) as u32))
    }
}
