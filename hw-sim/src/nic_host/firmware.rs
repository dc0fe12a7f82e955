//! Firmware update of a simulated NIC: the admin commands `FW_STATUS`, `FW_BEGIN`, `FW_CHUNK`,
//! `FW_COMMIT`, `FW_CONFIRM`, `FW_ROLLBACK` run the NIC core's own update code
//! (`mrc_fw_update`: session, verifier, A/B boot record) against two RAM-backed flash slots.
//!
//! Contract (what the host sees):
//! - `FW_BEGIN` erases the slot not running and opens a session for `size` bytes whose CRC-32 is
//!   `crc32`. Refused with `BUSY` while a session is open and `BAD_STATE` while the running image
//!   still waits for `FW_CONFIRM`.
//! - `FW_CHUNK` DMAs `len` bytes from the host at `iova` into the slot at `offset`; chunks come
//!   in order (`FW_IMAGE_INVALID`, reason `OutOfOrder`, keeps the session open).
//! - `FW_COMMIT` checks the transfer (byte count and CRC-32 as announced), then verifies the
//!   image as the core does (header, ABI major, length, body CRC-32, Ed25519 signature with the
//!   device key). Success: state `COMMITTED`, the image boots on trial at the next reset.
//!   Refusal: `FW_IMAGE_INVALID` with the [`Reason`] in the syndrome, state `IDLE`, the staged
//!   slot `Invalid`; **the running image and the next boot never change on a refusal**.
//! - A device reset (`DEVICE.control.RESET`) reboots the cores: the boot record picks the slot
//!   (a trial image is booted at most [`MAX_TRIAL_BOOTS`] times without `FW_CONFIRM`, then rolled
//!   back). A trial boot shows state `PENDING_CONFIRM`; an open session is dropped.
//! - `FW_CONFIRM` makes the running trial image permanent; `FW_ROLLBACK` marks the trial (or
//!   committed, not yet booted) image invalid so the next reset boots the confirmed one.
//! - The FW register block (running slot, boot count, image version, update state) follows.
//!
//! The simulated device trusts the **test-only** key of `mrc_fw_update::test_key` and speaks
//! ABI major [`mrc_abi::device::version::ABI_VERSION`]. Its factory image is slot A,
//! version [`FACTORY_VERSION`].

use core::mem::offset_of;

use mrc_abi::device::admin::body::{FwBegin, FwChunk};
use mrc_abi::device::admin::{AdminCommand, AdminStatus, FwUpdateState};
use mrc_abi::device::regs::{caps, defaults, FwBlock};
use mrc_driver::sys::Iova;
use mrc_fw_update::crc32::Crc32;
use mrc_fw_update::reason::Reason;
use mrc_fw_update::slots::{BootControl, BootDecision, Slot};
use mrc_fw_update::test_key;
use mrc_fw_update::update::{SlotStorage, StorageError, UpdateError, UpdatePolicy, Updater};

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

/// A transfer announced by `FW_BEGIN`.
#[derive(Clone, Copy)]
struct Transfer {
    size: u32,
    crc32: u32,
    received: u32,
    crc: Crc32,
}

/// One NIC's firmware: flash, boot record, update session. Survives device resets.
pub(crate) struct FwNic {
    flash: VecSlots,
    control: BootControl,
    running: Slot,
    running_version: u32,
    updater: Updater,
    transfer: Option<Transfer>,
    state: FwUpdateState,
    boot_count: u32,
    /// The last refusal, for diagnostics.
    pub last_refusal: Option<UpdateError>,
}

impl FwNic {
    pub fn new() -> FwNic {
        FwNic {
            flash: VecSlots::default(),
            control: BootControl::factory(FACTORY_VERSION, MAX_TRIAL_BOOTS),
            running: Slot::A,
            running_version: FACTORY_VERSION,
            updater: Updater::new(Slot::A),
            transfer: None,
            state: FwUpdateState::Idle,
            boot_count: 0,
            last_refusal: None,
        }
    }

    /// The cores (re)boot: the boot record picks the slot.
    fn boot(&mut self) {
        self.boot_count = self.boot_count.saturating_add(1);
        self.transfer = None;
        let (slot, trial) = match self.control.select_boot() {
            BootDecision::Boot { slot, trial } => (slot, trial),
            BootDecision::RolledBack { to, .. } => (to, false),
            // Cannot happen from the factory record (slot A stays confirmed until a newer
            // image is); keep running what ran.
            BootDecision::NoBootableImage => (self.running, false),
        };
        self.running = slot;
        self.running_version = self.control.slot(slot).image_version;
        self.updater = Updater::new(slot);
        self.state = if trial {
            FwUpdateState::PendingConfirm
        } else {
            FwUpdateState::Idle
        };
    }

    fn staged_version(&self) -> u32 {
        match self.state {
            FwUpdateState::Committed => self.control.slot(self.running.other()).image_version,
            _ => 0,
        }
    }

    fn refuse(&mut self, e: UpdateError) -> (AdminStatus, u32) {
        self.last_refusal = Some(e);
        (AdminStatus::FwImageInvalid, Reason::syndrome(&e))
    }

    fn refuse_transfer(&mut self, r: Reason) -> (AdminStatus, u32) {
        self.updater.abort();
        self.control.mark_invalid(self.running.other());
        self.transfer = None;
        self.state = FwUpdateState::Idle;
        (AdminStatus::FwImageInvalid, r as u32)
    }

    fn begin(&mut self, b: FwBegin) -> Res {
        match self.state {
            FwUpdateState::Receiving => return Err((AdminStatus::Busy, 0)),
            FwUpdateState::PendingConfirm => return Err((AdminStatus::BadState, 0)),
            FwUpdateState::Idle | FwUpdateState::Committed => {}
        }
        if b.size.get() > SLOT_BYTES {
            let e = UpdateError::TooLarge {
                len: b.size.get(),
                capacity: SLOT_BYTES,
            };
            return Err(self.refuse(e));
        }
        self.updater.abort();
        if let Err(e) = self.updater.begin(&mut self.control, &mut self.flash) {
            return Err(self.refuse(e));
        }
        self.transfer = Some(Transfer {
            size: b.size.get(),
            crc32: b.crc32.get(),
            received: 0,
            crc: Crc32::new(),
        });
        self.state = FwUpdateState::Receiving;
        Ok([0; 3])
    }

    fn chunk(&mut self, n: &NicState, b: FwChunk) -> Res {
        let Some(mut t) = self.transfer else {
            return Err((AdminStatus::FwNoUpdate, 0));
        };
        let (offset, len) = (b.offset.get(), b.len.get());
        if u64::from(offset) + u64::from(len) > u64::from(t.size) {
            return Err(self.refuse_transfer(Reason::TransferSize));
        }
        let mut data = vec![0u8; len as usize];
        if n.dev.dma_read(Iova(b.iova.get()), &mut data).is_err() {
            // FwChunk.iova is at byte 8 of the body (+8 for the command header).
            return Err((AdminStatus::BadAttribute, 16));
        }
        if let Err(e) = self.updater.write(&mut self.flash, offset, &data) {
            let r = self.refuse(e);
            if !matches!(e, UpdateError::OutOfOrder { .. }) {
                let _ = self.refuse_transfer(Reason::of(&e));
            }
            return Err(r);
        }
        t.received = offset + len;
        t.crc.update(&data);
        self.transfer = Some(t);
        Ok([0; 3])
    }

    fn commit(&mut self, crc32: u32, abi_major: u16) -> Res {
        let Some(t) = self.transfer else {
            return Err((AdminStatus::FwNoUpdate, 0));
        };
        if t.received != t.size {
            return Err(self.refuse_transfer(Reason::TransferSize));
        }
        let got = t.crc.finish();
        if got != t.crc32 || got != crc32 {
            return Err(self.refuse_transfer(Reason::TransferCrc));
        }
        self.transfer = None;
        let policy = UpdatePolicy {
            abi_major,
            public_key: test_key::PUBLIC_KEY,
        };
        match self.updater.finish(&mut self.control, &self.flash, &policy) {
            Ok(i) => {
                self.state = FwUpdateState::Committed;
                Ok([u64::from(i.header.image_version), 0, 0])
            }
            Err(e) => {
                self.state = FwUpdateState::Idle;
                Err(self.refuse(e))
            }
        }
    }

    fn confirm(&mut self) -> Res {
        if self.state != FwUpdateState::PendingConfirm {
            return Err((AdminStatus::FwNoUpdate, 0));
        }
        match self.control.confirm(self.running) {
            Ok(()) => {
                self.state = FwUpdateState::Idle;
                Ok([0; 3])
            }
            Err(_) => Err((AdminStatus::Internal, 0)),
        }
    }

    fn rollback(&mut self) -> Res {
        match self.state {
            // The running trial image gives up: the confirmed one boots next.
            FwUpdateState::PendingConfirm => self.control.mark_invalid(self.running),
            // Committed, not yet booted: the staged image never boots.
            FwUpdateState::Committed => self.control.mark_invalid(self.running.other()),
            _ => return Err((AdminStatus::FwNoUpdate, 0)),
        }
        self.state = FwUpdateState::Idle;
        Ok([0; 3])
    }

    /// Publish the FW register block.
    fn publish(&self, n: &NicState) {
        let base = u64::from(defaults::FIRMWARE);
        let w = |off: usize, v: u32| n.reg_w(base + off as u64, v);
        w(offset_of!(FwBlock, running_slot), self.running as u32);
        w(offset_of!(FwBlock, boot_count), self.boot_count);
        w(offset_of!(FwBlock, image_version), self.running_version);
        w(offset_of!(FwBlock, update_state), self.state as u32);
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
    pub(crate) fn fw_version(&self, i: usize) -> u32 {
        self.fw
            .get(i)
            .map_or(FACTORY_VERSION, |f| f.running_version)
    }

    /// Execute a firmware admin command on NIC `i`.
    pub(crate) fn fw_execute(&mut self, i: usize, cmd: AdminCommand) -> Res {
        let (Some(fw), Some(n)) = (self.fw.get_mut(i), self.nics.get(i)) else {
            return Err((AdminStatus::Internal, 0));
        };
        let abi_major = mrc_abi::device::version::ABI_VERSION.major;
        let can_update = n.params.capabilities & caps::FW_UPDATE != 0;
        let r = match cmd {
            AdminCommand::FwStatus => Ok([
                (u64::from(fw.running as u32) << 32) | fw.state as u64,
                fw.running_version.into(),
                fw.staged_version().into(),
            ]),
            // Without the FW_UPDATE capability an update cannot start.
            AdminCommand::FwBegin(_) if !can_update => Err((AdminStatus::Permission, 0)),
            AdminCommand::FwBegin(b) => fw.begin(b),
            AdminCommand::FwChunk(b) => fw.chunk(n, b),
            AdminCommand::FwCommit(b) => fw.commit(b.id.get(), abi_major),
            AdminCommand::FwConfirm => fw.confirm(),
            AdminCommand::FwRollback => fw.rollback(),
            _ => Err((AdminStatus::Internal, 0)),
        };
        fw.publish(n);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::super::SimHost;
    use super::*;
    use mrc_driver::device::{Device, DeviceConfig};
    use mrc_fw_update::pack::{pack_image, ImageMeta};
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
        let host = SimHost::loopback_pair().unwrap();
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
        let host = SimHost::loopback_pair().unwrap();
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
        let host = SimHost::loopback_pair().unwrap();
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
        let host = SimHost::loopback_pair().unwrap();
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
        let host = SimHost::loopback_pair().unwrap();
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
