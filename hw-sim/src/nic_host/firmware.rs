//! Firmware update of a simulated NIC: the admin commands `FW_STATUS`, `FW_BEGIN`, `FW_CHUNK`,
//! `FW_COMMIT`, `FW_CONFIRM`, `FW_ROLLBACK` run the NIC core's own update service
//! (`mrc_fw_update::service`: session, transfer check, verifier, A/B boot record; its docs are
//! the contract the host sees) against two RAM-backed flash slots, with `FW_CHUNK`'s bytes
//! DMA'd from the host by IOVA.
//!
//! Here the device plays the boot ROM: a device reset (`DEVICE.control.RESET`) reboots the
//! cores and the boot record picks the slot (a trial image is booted at most
//! [`MAX_TRIAL_BOOTS`] times without `FW_CONFIRM`, then rolled back); an open session is
//! dropped. The record lives in memory that survives device resets. The FW register block
//! (running slot, boot count, image version, update state) follows every command.
//!
//! The simulated device trusts the **test-only** key of `mrc_fw_update::test_key` and speaks
//! ABI major [`mrc_abi::device::version::ABI_VERSION`]. Its factory image is slot A,
//! version [`FACTORY_VERSION`]. Without the `FW_UPDATE` capability `FW_BEGIN` is refused
//! `PERMISSION`.

use core::mem::offset_of;

use mrc_abi::device::admin::{AdminCommand, AdminStatus};
use mrc_abi::device::regs::{caps, defaults, FwBlock};
use mrc_driver::sys::Iova;
use mrc_fw_update::service::{FwService, FwStorage};
use mrc_fw_update::slots::{BootControl, BootDecision, Slot};
use mrc_fw_update::test_key;
use mrc_fw_update::update::{SlotStorage, StorageError, UpdatePolicy};

use super::state::{NicState, DEV_CONTROL};
use super::World;

/// Version of the image a simulated NIC ships with (1.0.0).
pub const FACTORY_VERSION: u32 = 0x0100_0000;
/// Trial boots an unconfirmed image gets before it is rolled back.
pub const MAX_TRIAL_BOOTS: u8 = 2;
/// Bytes per flash slot (as the NIC's QSPI slots).
pub const SLOT_BYTES: u32 = 1 << 20;

type Res = Result<[u64; 3], (AdminStatus, u32)>;

/// Two flash slots in host memory, allocated on first write (an erased slot reads `0xFF`).
#[derive(Default)]
struct VecSlots {
    slots: [Vec<u8>; 2],
}

impl VecSlots {
    fn check(offset: u32, len: usize) -> Result<usize, StorageError> {
        let end = u64::from(offset) + len as u64;
        if end > u64::from(SLOT_BYTES) {
            return Err(StorageError::OutOfBounds {
                offset,
                len: u32::try_from(len).unwrap_or(u32::MAX),
            });
        }
        Ok(end as usize)
    }
}

impl SlotStorage for VecSlots {
    fn capacity(&self) -> u32 {
        SLOT_BYTES
    }
    fn erase(&mut self, slot: Slot) -> Result<(), StorageError> {
        self.slots[slot as usize] = Vec::new();
        Ok(())
    }
    fn write(&mut self, slot: Slot, offset: u32, data: &[u8]) -> Result<(), StorageError> {
        let end = Self::check(offset, data.len())?;
        let s = &mut self.slots[slot as usize];
        if s.len() < end {
            s.resize(end, 0xFF);
        }
        s[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
    fn read(&self, slot: Slot, offset: u32, buf: &mut [u8]) -> Result<(), StorageError> {
        Self::check(offset, buf.len())?;
        let s = &self.slots[slot as usize];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = s.get(offset as usize + i).copied().unwrap_or(0xFF);
        }
        Ok(())
    }
}

impl FwStorage for VecSlots {
    fn save_record(&mut self, _record: &BootControl) -> Result<(), StorageError> {
        // The record is the service's own (`FwNic::svc`), kept across device resets.
        Ok(())
    }
}

/// What the device trusts: the test-only key, its ABI major.
fn policy() -> UpdatePolicy {
    UpdatePolicy {
        abi_major: mrc_abi::device::version::ABI_VERSION.major,
        public_key: test_key::PUBLIC_KEY,
    }
}

/// One NIC's firmware: flash, the update service (with the boot record). Survives device
/// resets.
pub(crate) struct FwNic {
    flash: VecSlots,
    svc: FwService,
    boot_count: u32,
    /// The `elf` level: the commands go to the NIC image on an emulated core instead.
    #[cfg(feature = "elf")]
    pub(crate) elf: Option<super::firmware_elf::ElfFw>,
}

impl FwNic {
    pub fn new() -> FwNic {
        FwNic {
            flash: VecSlots::default(),
            svc: FwService::booted(
                BootControl::factory(FACTORY_VERSION, MAX_TRIAL_BOOTS),
                Slot::A,
                policy(),
            ),
            boot_count: 0,
            #[cfg(feature = "elf")]
            elf: None,
        }
    }

    /// The cores (re)boot: the boot record picks the slot.
    fn boot(&mut self) {
        self.boot_count = self.boot_count.saturating_add(1);
        #[cfg(feature = "elf")]
        if let Some(e) = self.elf.as_mut() {
            e.reset();
            return;
        }
        let mut record = self.svc.record();
        let slot = match record.select_boot() {
            BootDecision::Boot { slot, .. } => slot,
            BootDecision::RolledBack { to, .. } => to,
            // Cannot happen from the factory record (slot A stays confirmed until a newer
            // image is); keep running what ran.
            BootDecision::NoBootableImage => self.svc.running(),
        };
        self.svc = FwService::booted(record, slot, policy());
    }

    /// The running slot, version and update state.
    fn status(&mut self) -> (u32, u32, u32) {
        #[cfg(feature = "elf")]
        if let Some(e) = self.elf.as_mut() {
            return e.status().unwrap_or((0, 0, 0));
        }
        (
            self.svc.running() as u32,
            self.svc.running_version(),
            self.svc.state() as u32,
        )
    }

    /// Publish the FW register block.
    pub(crate) fn publish(&mut self, n: &NicState) {
        let (slot, version, state) = self.status();
        let base = u64::from(defaults::FIRMWARE);
        let w = |off: usize, v: u32| n.reg_w(base + off as u64, v);
        w(offset_of!(FwBlock, running_slot), slot);
        w(offset_of!(FwBlock, boot_count), self.boot_count);
        w(offset_of!(FwBlock, image_version), version);
        w(offset_of!(FwBlock, update_state), state);
    }
}

impl World {
    /// Power on NIC `i`'s cores (its firmware state is created here).
    pub(crate) fn fw_power_on(&mut self, i: usize) {
        while self.fw.len() <= i {
            self.fw.push(FwNic::new());
        }
        self.fw_reboot(i);
    }

    /// A driver MMIO write of NIC `i`: a device reset reboots the cores.
    pub(crate) fn fw_on_write(&mut self, i: usize, offset: u64, value: u64) {
        let reset = mrc_abi::device::regs::control::RESET;
        if offset == u64::from(defaults::DEVICE) + DEV_CONTROL && value as u32 & reset != 0 {
            self.fw_reboot(i);
        }
    }

    fn fw_reboot(&mut self, i: usize) {
        if let (Some(fw), Some(n)) = (self.fw.get_mut(i), self.nics.get(i)) {
            fw.boot();
            fw.publish(n);
        }
    }

    /// The running image version of NIC `i` (QUERY_DEVICE).
    pub(crate) fn fw_version(&mut self, i: usize) -> u32 {
        self.fw.get_mut(i).map_or(FACTORY_VERSION, |f| f.status().1)
    }

    /// Execute a firmware admin command on NIC `i`.
    pub(crate) fn fw_execute(&mut self, i: usize, cmd: AdminCommand) -> Res {
        let (Some(fw), Some(n)) = (self.fw.get_mut(i), self.nics.get(i)) else {
            return Err((AdminStatus::Internal, 0));
        };
        let can_update = n.params.capabilities & caps::FW_UPDATE != 0;
        let r = match cmd {
            // Without the FW_UPDATE capability an update cannot start.
            AdminCommand::FwBegin(_) if !can_update => Err((AdminStatus::Permission, 0)),
            #[cfg(feature = "elf")]
            cmd if fw.elf.is_some() => fw
                .elf
                .as_mut()
                .map_or(Err((AdminStatus::Internal, 0)), |e| e.execute(&cmd)),
            cmd => {
                let mut buf = vec![0u8; 4096];
                let fetch = |iova: u64, out: &mut [u8]| n.dev.dma_read(Iova(iova), out).is_ok();
                fw.svc.execute(&mut fw.flash, &cmd, fetch, &mut buf)
            }
        };
        fw.publish(n);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::super::SimHost;
    use super::*;
    use mrc_abi::device::admin::body::{FwBegin, FwChunk};
    use mrc_abi::device::admin::FwUpdateState;
    use mrc_driver::device::{Device, DeviceConfig};
    use mrc_fw_update::pack::{pack_image, ImageMeta};
    use mrc_fw_update::reason::Reason;
    use std::sync::Arc;

    const V2: u32 = 0x0200_0000;

    fn open(host: &SimHost) -> Arc<Device> {
        Device::open(host.nic(0).unwrap().backend(), &DeviceConfig::default()).unwrap()
    }

    fn image(version: u32, abi: u16) -> Vec<u8> {
        let body: Vec<u8> = (0..40_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        pack_image(&body, &ImageMeta::new(version, abi), &test_key::SEED)
    }

    /// Begin, stream in 4 KiB chunks, commit with the CRC of what was sent.
    fn send(dev: &Device, img: &[u8]) -> Result<(), mrc_driver::Error> {
        let crc = mrc_fw_update::crc32::crc32(img);
        dev.fw_begin(FwBegin {
            magic: mrc_abi::device::admin::FW_IMAGE_MAGIC.into(),
            version: 0.into(),
            size: (img.len() as u32).into(),
            crc32: crc.into(),
            sha256: [0; 32],
        })?;
        let buf = dev.alloc_dma(4096)?;
        for (i, c) in img.chunks(4096).enumerate() {
            buf.write_slice(0, c)?;
            dev.fw_chunk(FwChunk {
                offset: ((i * 4096) as u32).into(),
                len: (c.len() as u32).into(),
                iova: buf.iova().0.into(),
            })?;
        }
        dev.fw_commit(crc)
    }

    fn reason(e: mrc_driver::Error) -> Option<Reason> {
        match e {
            mrc_driver::Error::Admin {
                status: AdminStatus::FwImageInvalid,
                syndrome,
                ..
            } => Reason::from_syndrome(syndrome),
            _ => None,
        }
    }

    fn state(dev: &Device) -> (u32, u32, FwUpdateState) {
        let s = dev.fw_status().unwrap();
        (s.running_slot, s.running_version, s.update_state)
    }

    const FACTORY: (u32, u32, FwUpdateState) = (0, FACTORY_VERSION, FwUpdateState::Idle);

    #[test]
    fn each_bad_image_is_refused_with_its_reason_and_the_running_image_stays() {
        let host = SimHost::clos_pair().unwrap();
        let good = image(V2, 1);
        let mut bad_crc = good.clone();
        bad_crc[5_000] ^= 1;
        let mut bad_sig = good.clone();
        bad_sig[100] ^= 1;
        let truncated = good[..good.len() - 1].to_vec();
        let mut trailing = good.clone();
        trailing.push(0);
        let mut bad_magic = good.clone();
        bad_magic[0] = b'X';
        let cases = [
            (bad_crc, Reason::BadCrc),
            (bad_sig, Reason::BadSignature),
            (image(V2, 2), Reason::WrongAbi),
            (truncated, Reason::Truncated),
            (trailing, Reason::TrailingBytes),
            (bad_magic, Reason::Header),
        ];
        for (img, want) in cases {
            let dev = open(&host);
            let e = send(&dev, &img).unwrap_err();
            assert_eq!(reason(e), Some(want));
            assert_eq!(state(&dev), FACTORY, "{want:?}");
            // The next boot still runs the factory image.
            let dev = open(&host);
            assert_eq!(state(&dev), FACTORY, "{want:?} after reset");
        }
    }

    #[test]
    fn transfer_damage_and_protocol_errors_are_refused() {
        let host = SimHost::clos_pair().unwrap();
        let dev = open(&host);
        let img = image(V2, 1);
        // A commit CRC that does not match the bytes received.
        let crc = mrc_fw_update::crc32::crc32(&img);
        dev.fw_begin(FwBegin {
            magic: mrc_abi::device::admin::FW_IMAGE_MAGIC.into(),
            version: 0.into(),
            size: (img.len() as u32).into(),
            crc32: (crc ^ 1).into(),
            sha256: [0; 32],
        })
        .unwrap();
        let e = dev.fw_begin(FwBegin {
            magic: mrc_abi::device::admin::FW_IMAGE_MAGIC.into(),
            version: 0.into(),
            size: 1.into(),
            crc32: 0.into(),
            sha256: [0; 32],
        });
        assert!(
            matches!(
                e,
                Err(mrc_driver::Error::Admin {
                    status: AdminStatus::Busy,
                    ..
                })
            ),
            "{e:?}"
        );
        let buf = dev.alloc_dma(img.len()).unwrap();
        buf.write_slice(0, &img).unwrap();
        let chunk = |off: u32, len: u32| FwChunk {
            offset: off.into(),
            len: len.into(),
            iova: (buf.iova().0 + u64::from(off)).into(),
        };
        // Out of order: refused, the session stays open.
        let e = dev.fw_chunk(chunk(100, 100)).unwrap_err();
        assert_eq!(reason(e), Some(Reason::OutOfOrder));
        dev.fw_chunk(chunk(0, img.len() as u32)).unwrap();
        let e = dev.fw_commit(crc).unwrap_err();
        assert_eq!(reason(e), Some(Reason::TransferCrc));
        assert_eq!(state(&dev), FACTORY);
        // Commands without a session.
        for r in [dev.fw_commit(crc), dev.fw_confirm(), dev.fw_rollback()] {
            assert!(
                matches!(
                    r,
                    Err(mrc_driver::Error::Admin {
                        status: AdminStatus::FwNoUpdate,
                        ..
                    })
                ),
                "{r:?}"
            );
        }
        // Larger than a slot.
        let e = dev
            .fw_begin(FwBegin {
                magic: mrc_abi::device::admin::FW_IMAGE_MAGIC.into(),
                version: 0.into(),
                size: (SLOT_BYTES + 1).into(),
                crc32: 0.into(),
                sha256: [0; 32],
            })
            .unwrap_err();
        assert_eq!(reason(e), Some(Reason::TooLarge));
        assert_eq!(state(&dev), FACTORY);
    }

    #[test]
    fn good_update_boots_on_trial_and_stays_once_confirmed() {
        let host = SimHost::clos_pair().unwrap();
        let dev = open(&host);
        send(&dev, &image(V2, 1)).unwrap();
        let s = dev.fw_status().unwrap();
        assert_eq!(
            (s.update_state, s.staged_version),
            (FwUpdateState::Committed, V2)
        );
        assert_eq!(dev.query_device().unwrap().fw_version, FACTORY_VERSION);
        let dev = open(&host);
        assert_eq!(state(&dev), (1, V2, FwUpdateState::PendingConfirm));
        // No new update while the trial image is unconfirmed.
        let e = send(&dev, &image(V2 + 1, 1)).unwrap_err();
        assert!(
            matches!(
                e,
                mrc_driver::Error::Admin {
                    status: AdminStatus::BadState,
                    ..
                }
            ),
            "{e:?}"
        );
        dev.fw_confirm().unwrap();
        assert_eq!(state(&dev), (1, V2, FwUpdateState::Idle));
        for _ in 0..4 {
            let dev = open(&host);
            assert_eq!(state(&dev), (1, V2, FwUpdateState::Idle));
        }
        let dev = open(&host);
        assert_eq!(dev.query_device().unwrap().fw_version, V2);
        // The FW register block follows: running slot B, image version.
        let fw = u64::from(defaults::FIRMWARE);
        let rd = |f: usize| dev.backend().mmio_read32(fw + f as u64).unwrap();
        assert_eq!(rd(offset_of!(FwBlock, running_slot)), 1);
        assert_eq!(rd(offset_of!(FwBlock, image_version)), V2);
        assert_eq!(
            rd(offset_of!(FwBlock, update_state)),
            FwUpdateState::Idle as u32
        );
        // The next update goes to slot A (the one not running).
        send(&dev, &image(V2 + 1, 1)).unwrap();
        let dev = open(&host);
        assert_eq!(state(&dev), (0, V2 + 1, FwUpdateState::PendingConfirm));
    }

    #[test]
    fn unconfirmed_image_rolls_back_after_its_trial_boots() {
        let host = SimHost::clos_pair().unwrap();
        send(&open(&host), &image(V2, 1)).unwrap();
        for _ in 0..MAX_TRIAL_BOOTS {
            let dev = open(&host);
            assert_eq!(state(&dev), (1, V2, FwUpdateState::PendingConfirm));
        }
        let dev = open(&host);
        assert_eq!(state(&dev), FACTORY, "rolled back");
        assert!(dev.fw_confirm().is_err(), "nothing left to confirm");
        assert_eq!(state(&open(&host)), FACTORY);
    }

    #[test]
    fn explicit_rollback_of_a_trial_or_committed_image() {
        let host = SimHost::clos_pair().unwrap();
        send(&open(&host), &image(V2, 1)).unwrap();
        let dev = open(&host);
        assert_eq!(state(&dev), (1, V2, FwUpdateState::PendingConfirm));
        dev.fw_rollback().unwrap();
        assert_eq!(state(&open(&host)), FACTORY);
        // Committed, never booted: the staged image never runs.
        let dev = open(&host);
        send(&dev, &image(V2, 1)).unwrap();
        dev.fw_rollback().unwrap();
        assert_eq!(state(&dev), FACTORY);
        assert_eq!(state(&open(&host)), FACTORY);
    }

    #[test]
    fn vec_slots_read_erased_as_ff_and_bound_writes() {
        let mut s = VecSlots::default();
        s.write(Slot::B, 4, &[1, 2]).unwrap();
        let mut b = [0u8; 8];
        s.read(Slot::B, 0, &mut b).unwrap();
        assert_eq!(b, [0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 0xFF, 0xFF]);
        assert!(s.write(Slot::A, SLOT_BYTES - 1, &[0, 0]).is_err());
        s.erase(Slot::B).unwrap();
        s.read(Slot::B, 0, &mut b).unwrap();
        assert_eq!(b, [0xFF; 8]);
    }
}
