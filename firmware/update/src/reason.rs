//! Refusal reasons on the wire: the code a device puts in the admin response's syndrome when it
//! answers `FW_IMAGE_INVALID`, and the words a host tool prints for it.
//!
//! Syndrome layout: bits 7:0 the [`Reason`] code, bits 31:8 a detail (the image's ABI major for
//! [`Reason::WrongAbi`], the header bytes received for [`Reason::Header`], else 0). Codes are
//! stable: new reasons get new numbers, old numbers are never reused.

use crate::header::HeaderError;
use crate::update::UpdateError;

/// Why a device refused an image or a step of an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Reason {
    /// A chunk or commit without a session.
    NotStarted = 1,
    /// A session is already open.
    Busy = 2,
    /// A chunk not at the next offset.
    OutOfOrder = 3,
    /// More bytes than a slot holds.
    TooLarge = 4,
    /// The header is malformed (magic, layout version, reserved bytes, too short).
    Header = 5,
    /// Built for another ABI major.
    WrongAbi = 6,
    /// Fewer bytes than the header calls for.
    Truncated = 7,
    /// More bytes than the header calls for.
    TrailingBytes = 8,
    /// The body CRC-32 does not match the header.
    BadCrc = 9,
    /// The Ed25519 signature does not verify with the device key.
    BadSignature = 10,
    /// The device's public key is not valid.
    BadPublicKey = 11,
    /// The flash failed.
    Storage = 12,
    /// The boot record refused (e.g. writing the running slot).
    Control = 13,
    /// The bytes received do not match the CRC-32 the host announced for the transfer
    /// (`FW_BEGIN` / `FW_COMMIT`): damaged in transit.
    TransferCrc = 14,
    /// The host sent more or fewer bytes than it announced in `FW_BEGIN`.
    TransferSize = 15,
}

impl Reason {
    /// Every reason, in code order.
    pub const ALL: [Reason; 15] = [
        Reason::NotStarted,
        Reason::Busy,
        Reason::OutOfOrder,
        Reason::TooLarge,
        Reason::Header,
        Reason::WrongAbi,
        Reason::Truncated,
        Reason::TrailingBytes,
        Reason::BadCrc,
        Reason::BadSignature,
        Reason::BadPublicKey,
        Reason::Storage,
        Reason::Control,
        Reason::TransferCrc,
        Reason::TransferSize,
    ];

    /// The reason of an [`UpdateError`].
    pub const fn of(e: &UpdateError) -> Reason {
        match e {
            UpdateError::NotStarted => Reason::NotStarted,
            UpdateError::Busy => Reason::Busy,
            UpdateError::OutOfOrder { .. } => Reason::OutOfOrder,
            UpdateError::TooLarge { .. } => Reason::TooLarge,
            UpdateError::Header(_) => Reason::Header,
            UpdateError::WrongAbi { .. } => Reason::WrongAbi,
            UpdateError::Truncated { .. } => Reason::Truncated,
            UpdateError::TrailingBytes { .. } => Reason::TrailingBytes,
            UpdateError::BadCrc { .. } => Reason::BadCrc,
            UpdateError::BadSignature => Reason::BadSignature,
            UpdateError::BadPublicKey => Reason::BadPublicKey,
            UpdateError::Storage(_) => Reason::Storage,
            UpdateError::Control(_) => Reason::Control,
        }
    }

    /// The syndrome word for `e` (see the module docs).
    pub fn syndrome(e: &UpdateError) -> u32 {
        let detail = match e {
            UpdateError::WrongAbi { image, .. } => u32::from(*image),
            UpdateError::Header(HeaderError::Short { len }) => *len,
            _ => 0,
        };
        (detail.min(0x00ff_ffff) << 8) | Reason::of(e) as u32
    }

    /// The reason in a syndrome word, if the code is known.
    pub fn from_syndrome(syndrome: u32) -> Option<Reason> {
        let code = (syndrome & 0xff) as u8;
        Reason::ALL.iter().copied().find(|r| *r as u8 == code)
    }

    /// A short lower-case phrase, for messages.
    pub const fn describe(self) -> &'static str {
        match self {
            Reason::NotStarted => "no update in progress",
            Reason::Busy => "another update is in progress",
            Reason::OutOfOrder => "a chunk arrived out of order",
            Reason::TooLarge => "the image is larger than a firmware slot",
            Reason::Header => "malformed image header",
            Reason::WrongAbi => "the image is built for another ABI version",
            Reason::Truncated => "truncated image (fewer bytes than its header says)",
            Reason::TrailingBytes => "trailing bytes after the image body",
            Reason::BadCrc => "bad CRC (the body does not match the CRC-32 in its header)",
            Reason::BadSignature => "bad signature (not signed with the device's key)",
            Reason::BadPublicKey => "the device's public key is invalid",
            Reason::Storage => "flash write or read failed",
            Reason::Control => "the boot record refused the update",
            Reason::TransferCrc => "the image was damaged in transfer (CRC-32 mismatch)",
            Reason::TransferSize => "the host sent a different number of bytes than announced",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i + 1);
            assert_eq!(Reason::from_syndrome(*r as u32 | 0x1200), Some(*r));
        }
        assert_eq!(Reason::from_syndrome(0), None);
        assert_eq!(Reason::from_syndrome(200), None);
    }

    #[test]
    fn syndrome_carries_the_image_abi() {
        let e = UpdateError::WrongAbi {
            image: 7,
            device: 1,
        };
        let s = Reason::syndrome(&e);
        assert_eq!(Reason::from_syndrome(s), Some(Reason::WrongAbi));
        assert_eq!(s >> 8, 7);
        assert_eq!(Reason::of(&UpdateError::BadSignature), Reason::BadSignature);
    }
}
