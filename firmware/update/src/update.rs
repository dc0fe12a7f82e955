//! A host-driven update session: the host streams an image into the slot the core is not
//! running from, then asks to verify and activate it.
//!
//! ```text
//!   Idle --begin--> Receiving --write(offset, chunk)*--> Receiving --finish--> Idle
//!                        \--abort / any error--> Idle (target slot Empty or Invalid)
//! ```
//! `finish` re-reads the slot from storage (what was written, not what was sent) and checks, in
//! this order: header (magic, layout version, reserved bytes), ABI major, length (too large,
//! truncated, trailing bytes), body CRC-32, Ed25519 signature. The first failure is the typed
//! [`UpdateError`] returned; the running slot and the boot record's preferred slot never change
//! on failure. Success marks the slot `Trial` (see [`crate::slots`]).

use ed25519_compact::{PublicKey, Signature};

use crate::crc32::Crc32;
use crate::header::{HeaderError, ImageHeader, HEADER_LEN, SIGNED_HEADER_LEN};
use crate::slots::{BootControl, ControlError, Slot};

/// Flash (or RAM) holding the two slots. Implementations report their own failures as
/// [`StorageError`].
pub trait SlotStorage {
    /// Bytes per slot.
    fn capacity(&self) -> u32;
    /// Erase `slot` (all bytes read back as `0xFF`).
    ///
    /// # Errors
    /// The device's failure.
    fn erase(&mut self, slot: Slot) -> Result<(), StorageError>;
    /// Write `data` at `offset` of `slot`.
    ///
    /// # Errors
    /// The device's failure, or [`StorageError::OutOfBounds`].
    fn write(&mut self, slot: Slot, offset: u32, data: &[u8]) -> Result<(), StorageError>;
    /// Read `buf.len()` bytes at `offset` of `slot`.
    ///
    /// # Errors
    /// The device's failure, or [`StorageError::OutOfBounds`].
    fn read(&self, slot: Slot, offset: u32, buf: &mut [u8]) -> Result<(), StorageError>;
}

/// A storage failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StorageError {
    /// Access beyond the slot.
    OutOfBounds {
        /// Offset asked.
        offset: u32,
        /// Length asked.
        len: u32,
    },
    /// The device reported an error (program/erase failure, timeout).
    Device {
        /// Device-specific code.
        code: u32,
    },
}

/// What the device accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdatePolicy {
    /// The ABI major version the device (and its host driver) speaks.
    pub abi_major: u16,
    /// The key images must be signed with.
    pub public_key: [u8; 32],
}

/// Why an update was refused. The running image stays in every case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UpdateError {
    /// `write` or `finish` without `begin`.
    NotStarted,
    /// `begin` while a session is open.
    Busy,
    /// A chunk not at the next expected offset.
    OutOfOrder {
        /// Offset expected.
        expected: u32,
        /// Offset given.
        got: u32,
    },
    /// More bytes than a slot holds, or a header claiming so.
    TooLarge {
        /// Bytes claimed or sent.
        len: u32,
        /// Slot capacity.
        capacity: u32,
    },
    /// The header is malformed.
    Header(HeaderError),
    /// The image is built for another ABI major.
    WrongAbi {
        /// The image's ABI major.
        image: u16,
        /// The device's ABI major.
        device: u16,
    },
    /// Fewer bytes than header + body.
    Truncated {
        /// Bytes the header calls for.
        expected: u32,
        /// Bytes received.
        got: u32,
    },
    /// More bytes than header + body.
    TrailingBytes {
        /// Bytes the header calls for.
        expected: u32,
        /// Bytes received.
        got: u32,
    },
    /// The body CRC does not match the header.
    BadCrc {
        /// CRC in the header.
        expected: u32,
        /// CRC of the body as stored.
        computed: u32,
    },
    /// The Ed25519 signature does not verify with the device key.
    BadSignature,
    /// The configured public key is not a valid Ed25519 point.
    BadPublicKey,
    /// The storage failed.
    Storage(StorageError),
    /// The boot record refused the operation.
    Control(ControlError),
}

impl From<StorageError> for UpdateError {
    fn from(e: StorageError) -> Self {
        UpdateError::Storage(e)
    }
}

/// A verified image, now on trial in `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Installed {
    /// The slot written.
    pub slot: Slot,
    /// Its header.
    pub header: ImageHeader,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Session {
    Idle,
    Receiving { slot: Slot, written: u32 },
}

/// Counters for `fw status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UpdateCounters {
    /// Sessions begun.
    pub begun: u32,
    /// Images accepted.
    pub accepted: u32,
    /// Images or chunks refused.
    pub refused: u32,
}

/// The update session of one NIC core.
#[derive(Clone, Copy, Debug)]
pub struct Updater {
    running: Slot,
    session: Session,
    counters: UpdateCounters,
}

/// Bytes read from storage per step while verifying.
const CHUNK: usize = 256;

impl Updater {
    /// A session manager for a core running from `running`.
    pub const fn new(running: Slot) -> Self {
        Updater {
            running,
            session: Session::Idle,
            counters: UpdateCounters {
                begun: 0,
                accepted: 0,
                refused: 0,
            },
        }
    }

    /// The slot running.
    pub const fn running(&self) -> Slot {
        self.running
    }

    /// Counters.
    pub const fn counters(&self) -> UpdateCounters {
        self.counters
    }

    fn refuse(&mut self, e: UpdateError) -> UpdateError {
        self.counters.refused = self.counters.refused.saturating_add(1);
        e
    }

    /// Start writing the slot not running: erase it and mark it `Empty`.
    ///
    /// # Errors
    /// [`UpdateError::Busy`] or the storage failure.
    pub fn begin(
        &mut self,
        control: &mut BootControl,
        storage: &mut impl SlotStorage,
    ) -> Result<Slot, UpdateError> {
        if self.session != Session::Idle {
            return Err(self.refuse(UpdateError::Busy));
        }
        let slot = BootControl::update_target(self.running);
        control
            .begin_write(slot, self.running)
            .map_err(|e| self.refuse(UpdateError::Control(e)))?;
        storage.erase(slot).map_err(|e| self.refuse(e.into()))?;
        self.counters.begun = self.counters.begun.saturating_add(1);
        self.session = Session::Receiving { slot, written: 0 };
        Ok(slot)
    }

    /// Write the next chunk; chunks come in order.
    ///
    /// # Errors
    /// [`UpdateError::NotStarted`], [`UpdateError::OutOfOrder`], [`UpdateError::TooLarge`] or
    /// the storage failure. An out-of-order chunk leaves the session open; the others close it.
    pub fn write(
        &mut self,
        storage: &mut impl SlotStorage,
        offset: u32,
        data: &[u8],
    ) -> Result<(), UpdateError> {
        let Session::Receiving { slot, written } = self.session else {
            return Err(self.refuse(UpdateError::NotStarted));
        };
        if offset != written {
            return Err(self.refuse(UpdateError::OutOfOrder {
                expected: written,
                got: offset,
            }));
        }
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let end = written.saturating_add(len);
        if end > storage.capacity() {
            self.session = Session::Idle;
            return Err(self.refuse(UpdateError::TooLarge {
                len: end,
                capacity: storage.capacity(),
            }));
        }
        if let Err(e) = storage.write(slot, offset, data) {
            self.session = Session::Idle;
            return Err(self.refuse(e.into()));
        }
        self.session = Session::Receiving { slot, written: end };
        Ok(())
    }

    /// Drop the session; the target slot stays `Empty`.
    pub fn abort(&mut self) {
        self.session = Session::Idle;
    }

    /// Verify what was written and, if it passes, put it on trial.
    ///
    /// # Errors
    /// The first check that failed; the slot is then `Invalid` and the session closed.
    pub fn finish(
        &mut self,
        control: &mut BootControl,
        storage: &impl SlotStorage,
        policy: &UpdatePolicy,
    ) -> Result<Installed, UpdateError> {
        let Session::Receiving { slot, written } = self.session else {
            return Err(self.refuse(UpdateError::NotStarted));
        };
        self.session = Session::Idle;
        match verify_slot(storage, slot, written, policy) {
            Ok(header) => {
                control.mark_trial(slot, header.image_version);
                self.counters.accepted = self.counters.accepted.saturating_add(1);
                Ok(Installed { slot, header })
            }
            Err(e) => {
                control.mark_invalid(slot);
                Err(self.refuse(e))
            }
        }
    }
}

/// Check the `len` bytes at the start of `slot` as an image (see the module docs for the order).
///
/// # Errors
/// The first check that failed.
pub fn verify_slot(
    storage: &impl SlotStorage,
    slot: Slot,
    len: u32,
    policy: &UpdatePolicy,
) -> Result<ImageHeader, UpdateError> {
    let mut hbuf = [0u8; HEADER_LEN];
    let have = (len as usize).min(HEADER_LEN);
    storage.read(slot, 0, &mut hbuf[..have])?;
    let header = ImageHeader::parse(&hbuf[..have]).map_err(UpdateError::Header)?;
    if header.abi_major != policy.abi_major {
        return Err(UpdateError::WrongAbi {
            image: header.abi_major,
            device: policy.abi_major,
        });
    }
    let expected = header.image_len();
    if u64::from(header.body_len) + HEADER_LEN as u64 > u64::from(storage.capacity()) {
        return Err(UpdateError::TooLarge {
            len: expected,
            capacity: storage.capacity(),
        });
    }
    if len < expected {
        return Err(UpdateError::Truncated { expected, got: len });
    }
    if len > expected {
        return Err(UpdateError::TrailingBytes { expected, got: len });
    }
    let pk = PublicKey::new(policy.public_key);
    pk.validate().map_err(|_| UpdateError::BadPublicKey)?;
    let sig = Signature::new(header.signature);
    let mut crc = Crc32::new();
    let mut sig_state = pk
        .verify_incremental(&sig)
        .map_err(|_| UpdateError::BadSignature)?;
    sig_state.absorb(&hbuf[..SIGNED_HEADER_LEN]);
    let mut buf = [0u8; CHUNK];
    let mut off = HEADER_LEN as u32;
    while off < expected {
        let n = ((expected - off) as usize).min(CHUNK);
        storage.read(slot, off, &mut buf[..n])?;
        crc.update(&buf[..n]);
        sig_state.absorb(&buf[..n]);
        off += n as u32;
    }
    if crc.finish() != header.body_crc32 {
        return Err(UpdateError::BadCrc {
            expected: header.body_crc32,
            computed: crc.finish(),
        });
    }
    sig_state.verify().map_err(|_| UpdateError::BadSignature)?;
    Ok(header)
}

/// Two slots in RAM, for tests and the QEMU self-test.
#[derive(Clone, Debug)]
pub struct RamSlots<const CAP: usize> {
    slots: [[u8; CAP]; 2],
}

impl<const CAP: usize> RamSlots<CAP> {
    /// Both slots erased.
    pub const fn new() -> Self {
        RamSlots {
            slots: [[0xFF; CAP]; 2],
        }
    }
}

impl<const CAP: usize> Default for RamSlots<CAP> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const CAP: usize> RamSlots<CAP> {
    fn range(offset: u32, len: usize) -> Result<core::ops::Range<usize>, StorageError> {
        let start = offset as usize;
        match start.checked_add(len) {
            Some(end) if end <= CAP => Ok(start..end),
            _ => Err(StorageError::OutOfBounds {
                offset,
                len: u32::try_from(len).unwrap_or(u32::MAX),
            }),
        }
    }
}

impl<const CAP: usize> SlotStorage for RamSlots<CAP> {
    fn capacity(&self) -> u32 {
        u32::try_from(CAP).unwrap_or(u32::MAX)
    }
    fn erase(&mut self, slot: Slot) -> Result<(), StorageError> {
        self.slots[slot as usize].fill(0xFF);
        Ok(())
    }
    fn write(&mut self, slot: Slot, offset: u32, data: &[u8]) -> Result<(), StorageError> {
        let r = Self::range(offset, data.len())?;
        self.slots[slot as usize][r].copy_from_slice(data);
        Ok(())
    }
    fn read(&self, slot: Slot, offset: u32, buf: &mut [u8]) -> Result<(), StorageError> {
        let r = Self::range(offset, buf.len())?;
        buf.copy_from_slice(&self.slots[slot as usize][r]);
        Ok(())
    }
}
