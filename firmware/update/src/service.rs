//! The update service of a NIC as the host's admin commands reach it: `FW_STATUS`, `FW_BEGIN`,
//! `FW_CHUNK`, `FW_COMMIT`, `FW_CONFIRM`, `FW_ROLLBACK` (mrc-abi opcodes) over the
//! [`Updater`], the A/B boot record and a check of the transfer. One implementation for every
//! device that takes updates: the NIC image (flash through its controller, chunks fetched by
//! its host DMA engine) and the simulated device of `mrc-sim`'s `nic_host`.
//!
//! Contract (what the host sees):
//! - `FW_BEGIN` erases the slot not running and opens a session for `size` bytes whose CRC-32 is
//!   `crc32`. Refused with `BUSY` while a session is open and `BAD_STATE` while the running image
//!   still waits for `FW_CONFIRM`; larger than a slot: `FW_IMAGE_INVALID`, [`Reason::TooLarge`].
//! - `FW_CHUNK` fetches `len` bytes from the host at `iova` into the slot at `offset`; chunks come
//!   in order (`FW_IMAGE_INVALID`, reason `OutOfOrder`, keeps the session open). A fetch the
//!   host memory refuses is `BAD_ATTRIBUTE` naming the `iova` field; it keeps the session open
//!   when nothing of the chunk was written yet and closes it otherwise.
//! - `FW_COMMIT` checks the transfer (byte count and CRC-32 as announced), then verifies the
//!   image as the boot ROM does ([`crate::update::verify_slot`]: header, ABI major, length, body
//!   CRC-32, Ed25519 signature with the device key). Success: state `COMMITTED`, the image boots
//!   on trial at the next reset. Refusal: `FW_IMAGE_INVALID` with the [`Reason`] in the syndrome,
//!   state `IDLE`, the staged slot `Invalid`; **the running image and the next boot never change
//!   on a refusal**.
//! - After a reset the boot ROM (or the device playing it) picks the slot with the record; a
//!   trial boot shows state `PENDING_CONFIRM` ([`FwService::booted`]).
//! - `FW_CONFIRM` makes the running trial image permanent; `FW_ROLLBACK` marks the trial (or
//!   committed, not yet booted) image invalid so the next reset boots the confirmed one.
//! - Every change of the boot record is saved through [`FwStorage::save_record`] before the
//!   command is answered; a save that fails is `FW_IMAGE_INVALID`, [`Reason::Storage`].

use mrc_abi::device::admin::body::{FwBegin, FwChunk};
use mrc_abi::device::admin::{AdminCommand, AdminStatus, FwUpdateState};

use crate::crc32::Crc32;
use crate::reason::Reason;
use crate::slots::{BootControl, Slot, SlotState};
use crate::update::{SlotStorage, StorageError, UpdateError, UpdatePolicy, Updater};

/// A refused command: admin status and syndrome.
pub type Refusal = (AdminStatus, u32);
/// A command's three result words, or its refusal.
pub type FwResult = Result<[u64; 3], Refusal>;

/// Byte offset of `FwChunk.iova` in the 64-byte command (8-byte header, then the body): the
/// syndrome of a fetch the host memory refused.
pub const CHUNK_IOVA_SYNDROME: u32 = 8 + core::mem::offset_of!(FwChunk, iova) as u32;

/// The slots and the boot record's home.
pub trait FwStorage: SlotStorage {
    /// Persist `record` (the NIC: its flash sector; a simulated device may keep it in memory
    /// that survives its resets).
    ///
    /// # Errors
    /// The device's failure.
    fn save_record(&mut self, record: &BootControl) -> Result<(), StorageError>;
}

/// A transfer announced by `FW_BEGIN`.
#[derive(Clone, Copy, Debug)]
struct Transfer {
    size: u32,
    crc32: u32,
    received: u32,
    crc: Crc32,
}

/// One NIC's update service: the boot record as booted, the running slot, the session.
#[derive(Clone, Copy, Debug)]
pub struct FwService {
    control: BootControl,
    running: Slot,
    updater: Updater,
    transfer: Option<Transfer>,
    state: FwUpdateState,
    policy: UpdatePolicy,
    last_refusal: Option<UpdateError>,
}

impl FwService {
    /// The service of an image booted from `running` with `control` the record as the boot
    /// ROM wrote it back (after its `select_boot`). The state is `PENDING_CONFIRM` when the
    /// running slot is on trial, else `IDLE`.
    pub fn booted(control: BootControl, running: Slot, policy: UpdatePolicy) -> FwService {
        let trial = matches!(control.slot(running).state, SlotState::Trial { .. });
        FwService {
            control,
            running,
            updater: Updater::new(running),
            transfer: None,
            state: if trial {
                FwUpdateState::PendingConfirm
            } else {
                FwUpdateState::Idle
            },
            policy,
            last_refusal: None,
        }
    }

    /// The boot record as the service last changed it.
    pub fn record(&self) -> BootControl {
        self.control
    }

    /// The slot running.
    pub fn running(&self) -> Slot {
        self.running
    }

    /// The running image's version (from the boot record).
    pub fn running_version(&self) -> u32 {
        self.control.slot(self.running).image_version
    }

    /// The update state.
    pub fn state(&self) -> FwUpdateState {
        self.state
    }

    /// The version committed to boot next (0 unless `COMMITTED`).
    pub fn staged_version(&self) -> u32 {
        match self.state {
            FwUpdateState::Committed => self.control.slot(self.running.other()).image_version,
            _ => 0,
        }
    }

    /// The last image or step refused, for diagnostics.
    pub fn last_refusal(&self) -> Option<UpdateError> {
        self.last_refusal
    }

    /// `FW_STATUS`'s result words: (running slot << 32 | update state, running version,
    /// staged version).
    pub fn status(&self) -> [u64; 3] {
        [
            (u64::from(self.running as u32) << 32) | self.state as u64,
            self.running_version().into(),
            self.staged_version().into(),
        ]
    }

    /// Execute a firmware command; `fetch(iova, out)` reads host memory (false: refused),
    /// `buf` is the staging buffer chunks pass through (any size; a page of the flash is
    /// plenty). Commands that are not `FW_*` are `INTERNAL` (the caller routes them).
    pub fn execute<S, F>(
        &mut self,
        storage: &mut S,
        cmd: &AdminCommand,
        fetch: F,
        buf: &mut [u8],
    ) -> FwResult
    where
        S: FwStorage,
        F: FnMut(u64, &mut [u8]) -> bool,
    {
        match cmd {
            AdminCommand::FwStatus => Ok(self.status()),
            AdminCommand::FwBegin(b) => self.begin(storage, b),
            AdminCommand::FwChunk(b) => self.chunk(storage, b, fetch, buf),
            AdminCommand::FwCommit(b) => self.commit(storage, b.id.get()),
            AdminCommand::FwConfirm => self.confirm(storage),
            AdminCommand::FwRollback => self.rollback(storage),
            _ => Err((AdminStatus::Internal, 0)),
        }
    }

    fn refuse(&mut self, e: UpdateError) -> Refusal {
        self.last_refusal = Some(e);
        (AdminStatus::FwImageInvalid, Reason::syndrome(&e))
    }

    fn save(&mut self, storage: &mut impl FwStorage) -> Result<(), Refusal> {
        storage
            .save_record(&self.control)
            .map_err(|e| self.refuse(UpdateError::Storage(e)))
    }

    /// Close the session for `r`: the staged slot is invalid, nothing else changes.
    fn refuse_transfer(&mut self, storage: &mut impl FwStorage, r: Reason) -> Refusal {
        self.updater.abort();
        self.control.mark_invalid(self.running.other());
        self.transfer = None;
        self.state = FwUpdateState::Idle;
        if let Err(e) = self.save(storage) {
            return e;
        }
        (AdminStatus::FwImageInvalid, r as u32)
    }

    fn begin(&mut self, storage: &mut impl FwStorage, b: &FwBegin) -> FwResult {
        match self.state {
            FwUpdateState::Receiving => return Err((AdminStatus::Busy, 0)),
            FwUpdateState::PendingConfirm => return Err((AdminStatus::BadState, 0)),
            FwUpdateState::Idle | FwUpdateState::Committed => {}
        }
        if b.size.get() > storage.capacity() {
            let e = UpdateError::TooLarge {
                len: b.size.get(),
                capacity: storage.capacity(),
            };
            return Err(self.refuse(e));
        }
        self.updater.abort();
        let begun = self.updater.begin(&mut self.control, storage);
        // (begin changed the record even when the erase then failed: the slot is Empty)
        self.save(storage)?;
        if let Err(e) = begun {
            self.state = FwUpdateState::Idle;
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

    fn chunk<S, F>(
        &mut self,
        storage: &mut S,
        b: &FwChunk,
        mut fetch: F,
        buf: &mut [u8],
    ) -> FwResult
    where
        S: FwStorage,
        F: FnMut(u64, &mut [u8]) -> bool,
    {
        let Some(mut t) = self.transfer else {
            return Err((AdminStatus::FwNoUpdate, 0));
        };
        let (offset, len) = (b.offset.get(), b.len.get());
        if u64::from(offset) + u64::from(len) > u64::from(t.size) {
            return Err(self.refuse_transfer(storage, Reason::TransferSize));
        }
        if buf.is_empty() {
            return Err((AdminStatus::Internal, 0));
        }
        let mut done = 0u32;
        while done < len {
            let n = (len - done).min(u32::try_from(buf.len()).unwrap_or(u32::MAX));
            let piece = &mut buf[..n as usize];
            if !fetch(b.iova.get().wrapping_add(u64::from(done)), piece) {
                if done > 0 {
                    // Part of the chunk is in the slot: the session cannot resume.
                    let _ = self.refuse_transfer(storage, Reason::TransferSize);
                }
                return Err((AdminStatus::BadAttribute, CHUNK_IOVA_SYNDROME));
            }
            if let Err(e) = self.updater.write(storage, offset + done, piece) {
                let r = self.refuse(e);
                if !matches!(e, UpdateError::OutOfOrder { .. }) {
                    let _ = self.refuse_transfer(storage, Reason::of(&e));
                }
                return Err(r);
            }
            t.crc.update(piece);
            done += n;
        }
        t.received = offset + len;
        self.transfer = Some(t);
        Ok([0; 3])
    }

    fn commit(&mut self, storage: &mut impl FwStorage, crc32: u32) -> FwResult {
        let Some(t) = self.transfer else {
            return Err((AdminStatus::FwNoUpdate, 0));
        };
        if t.received != t.size {
            return Err(self.refuse_transfer(storage, Reason::TransferSize));
        }
        let got = t.crc.finish();
        if got != t.crc32 || got != crc32 {
            return Err(self.refuse_transfer(storage, Reason::TransferCrc));
        }
        self.transfer = None;
        let policy = self.policy;
        let r = self.updater.finish(&mut self.control, storage, &policy);
        self.state = match r {
            Ok(_) => FwUpdateState::Committed,
            Err(_) => FwUpdateState::Idle,
        };
        self.save(storage)?;
        match r {
            Ok(i) => Ok([u64::from(i.header.image_version), 0, 0]),
            Err(e) => Err(self.refuse(e)),
        }
    }

    fn confirm(&mut self, storage: &mut impl FwStorage) -> FwResult {
        if self.state != FwUpdateState::PendingConfirm {
            return Err((AdminStatus::FwNoUpdate, 0));
        }
        if self.control.confirm(self.running).is_err() {
            return Err((AdminStatus::Internal, 0));
        }
        self.save(storage)?;
        self.state = FwUpdateState::Idle;
        Ok([0; 3])
    }

    fn rollback(&mut self, storage: &mut impl FwStorage) -> FwResult {
        match self.state {
            // The running trial image gives up: the confirmed one boots next.
            FwUpdateState::PendingConfirm => self.control.mark_invalid(self.running),
            // Committed, not yet booted: the staged image never boots.
            FwUpdateState::Committed => self.control.mark_invalid(self.running.other()),
            _ => return Err((AdminStatus::FwNoUpdate, 0)),
        }
        self.save(storage)?;
        self.state = FwUpdateState::Idle;
        Ok([0; 3])
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::pack::{pack_image, ImageMeta};
    use crate::test_key;
    use crate::update::RamSlots;
    use mrc_abi::device::admin::body::ObjectId;
    use mrc_abi::device::admin::FW_IMAGE_MAGIC;

    /// RAM slots that count record saves and can fail them.
    struct Store {
        slots: RamSlots<65536>,
        saved: Option<BootControl>,
        fail_saves: bool,
    }

    impl SlotStorage for Store {
        fn capacity(&self) -> u32 {
            self.slots.capacity()
        }
        fn erase(&mut self, slot: Slot) -> Result<(), StorageError> {
            self.slots.erase(slot)
        }
        fn write(&mut self, slot: Slot, offset: u32, data: &[u8]) -> Result<(), StorageError> {
            self.slots.write(slot, offset, data)
        }
        fn read(&self, slot: Slot, offset: u32, buf: &mut [u8]) -> Result<(), StorageError> {
            self.slots.read(slot, offset, buf)
        }
    }

    impl FwStorage for Store {
        fn save_record(&mut self, record: &BootControl) -> Result<(), StorageError> {
            if self.fail_saves {
                return Err(StorageError::Device { code: 7 });
            }
            self.saved = Some(*record);
            Ok(())
        }
    }

    fn service() -> (FwService, Store) {
        let policy = UpdatePolicy {
            abi_major: 1,
            public_key: test_key::PUBLIC_KEY,
        };
        let svc = FwService::booted(BootControl::factory(1, 2), Slot::A, policy);
        let store = Store {
            slots: RamSlots::new(),
            saved: None,
            fail_saves: false,
        };
        (svc, store)
    }

    fn begin(size: usize, crc32: u32) -> AdminCommand {
        AdminCommand::FwBegin(FwBegin {
            magic: FW_IMAGE_MAGIC.into(),
            version: 0.into(),
            size: (size as u32).into(),
            crc32: crc32.into(),
            sha256: [0; 32],
        })
    }

    fn chunk(offset: u32, len: u32) -> AdminCommand {
        AdminCommand::FwChunk(FwChunk {
            offset: offset.into(),
            len: len.into(),
            iova: u64::from(offset).into(),
        })
    }

    fn commit(crc: u32) -> AdminCommand {
        AdminCommand::FwCommit(ObjectId { id: crc.into() })
    }

    #[test]
    fn a_good_image_through_a_small_buffer_commits_and_the_record_is_saved() {
        let (mut svc, mut st) = service();
        let img = pack_image(&[0x5a; 5000], &ImageMeta::new(2, 1), &test_key::SEED);
        let crc = crate::crc32::crc32(&img);
        let host = img.clone();
        let fetch = |iova: u64, out: &mut [u8]| {
            let at = iova as usize;
            out.copy_from_slice(&host[at..at + out.len()]);
            true
        };
        let mut buf = [0u8; 100];
        svc.execute(&mut st, &begin(img.len(), crc), fetch, &mut buf)
            .unwrap();
        assert_eq!(svc.state(), FwUpdateState::Receiving);
        for off in (0..img.len()).step_by(3000) {
            let n = (img.len() - off).min(3000) as u32;
            svc.execute(&mut st, &chunk(off as u32, n), fetch, &mut buf)
                .unwrap();
        }
        assert_eq!(
            svc.execute(&mut st, &commit(crc), fetch, &mut buf),
            Ok([2, 0, 0])
        );
        assert_eq!(svc.status(), [FwUpdateState::Committed as u64, 1, 2]);
        assert_eq!(st.saved, Some(svc.record()));
        assert_eq!(
            svc.record().slot(Slot::B).state,
            SlotState::Trial { boots: 0 }
        );
    }

    #[test]
    fn a_refused_fetch_and_a_failed_record_save_are_reported() {
        let (mut svc, mut st) = service();
        let mut buf = [0u8; 64];
        let refuse = |_: u64, _: &mut [u8]| false;
        svc.execute(&mut st, &begin(1000, 0), refuse, &mut buf)
            .unwrap();
        // Nothing written: the session stays open.
        assert_eq!(
            svc.execute(&mut st, &chunk(0, 500), refuse, &mut buf),
            Err((AdminStatus::BadAttribute, CHUNK_IOVA_SYNDROME))
        );
        assert_eq!(svc.state(), FwUpdateState::Receiving);
        // Refused after the first piece: the session closes, the staged slot is invalid.
        let mut calls = 0;
        let once = |_: u64, _: &mut [u8]| {
            calls += 1;
            calls == 1
        };
        assert_eq!(
            svc.execute(&mut st, &chunk(0, 500), once, &mut buf),
            Err((AdminStatus::BadAttribute, CHUNK_IOVA_SYNDROME))
        );
        assert_eq!(svc.state(), FwUpdateState::Idle);
        assert_eq!(svc.record().slot(Slot::B).state, SlotState::Invalid);
        assert_eq!(st.saved, Some(svc.record()));
        // A record that cannot be saved: the reason says the flash failed.
        st.fail_saves = true;
        let e = svc
            .execute(&mut st, &begin(1000, 0), refuse, &mut buf)
            .unwrap_err();
        assert_eq!(e.0, AdminStatus::FwImageInvalid);
        assert_eq!(Reason::from_syndrome(e.1), Some(Reason::Storage));
    }
}
