//! The NIC's QSPI NOR flash and its controller, as the firmware core sees them.
//!
//! The flash is mapped for reads at [`FLASH_BASE`] (the A/B image slots and the boot record of
//! `firmware/memory-map.toml` lie in it). Erasing and programming go through a small controller
//! in the core's CSR window (`FLASH_CTRL_BASE` in the memory map) with the registers below, all
//! 32-bit, little-endian. The NIC image (firmware updates), the probe-rs flash algorithm and the
//! simulated flash device (`mrc-sim`) all follow this one description.
//!
//! # Programming model
//! 1. Wait until [`status::BUSY`] is clear.
//! 2. Erase: write the sector's flash offset to [`reg::ADDR`], then [`cmd::ERASE_SECTOR`] to
//!    [`reg::CMD`]. Every byte of the sector reads [`ERASED`] afterwards.
//!    Program: write up to [`PAGE_BYTES`] bytes into the page buffer ([`reg::BUF`], word
//!    writes, byte 0 of the page in the low byte of the first word), the flash offset to
//!    [`reg::ADDR`], the byte count to [`reg::LEN`], then [`cmd::PROGRAM`] to [`reg::CMD`].
//!    Programming can only clear bits (NOR): each byte becomes `old & new`.
//! 3. Wait until [`status::BUSY`] is clear, then read [`status::ERROR`]; when set,
//!    [`reg::ERR_CAUSE`] says why ([`ErrCause`]) and nothing was changed. Writing
//!    [`status::ERROR`] to [`reg::STATUS`] clears it.
//!
//! A command written while the controller is busy is refused ([`ErrCause::Busy`]); so is an
//! unknown command, an offset outside the device, an erase offset not on a sector boundary, a
//! program of 0 or more than [`PAGE_BYTES`] bytes, or one crossing a page boundary.

/// Where the flash is mapped for reads in the core's address space.
pub const FLASH_BASE: u32 = 0x6000_0000;
/// Size of the flash device in bytes (4 MiB).
pub const FLASH_BYTES: u32 = 4 << 20;
/// The erase unit, in bytes.
pub const SECTOR_BYTES: u32 = 4096;
/// The program unit, in bytes: one program command writes at most this many, inside one page.
pub const PAGE_BYTES: u32 = 256;
/// The value of an erased byte.
pub const ERASED: u8 = 0xff;
/// Worst-case time of a sector erase, in microseconds (datasheet maximum of a typical QSPI NOR
/// part; the simulated device takes [`SECTOR_ERASE_TYPICAL_US`]).
pub const SECTOR_ERASE_MAX_US: u32 = 400_000;
/// Typical time of a sector erase, in microseconds.
pub const SECTOR_ERASE_TYPICAL_US: u32 = 45_000;
/// Worst-case time of a page program, in microseconds.
pub const PAGE_PROGRAM_MAX_US: u32 = 3_000;
/// Typical time of a page program, in microseconds.
pub const PAGE_PROGRAM_TYPICAL_US: u32 = 700;

/// Register offsets from the controller's base.
pub mod reg {
    /// Write a command ([`super::cmd`]) to start it.
    pub const CMD: u32 = 0x00;
    /// The flash offset (from [`super::FLASH_BASE`]) a command works on.
    pub const ADDR: u32 = 0x04;
    /// Bytes to program (1..=[`super::PAGE_BYTES`]).
    pub const LEN: u32 = 0x08;
    /// [`super::status`] bits; write [`super::status::ERROR`] to clear the error.
    pub const STATUS: u32 = 0x0c;
    /// Why the last command was refused ([`super::ErrCause`] code; 0 = none).
    pub const ERR_CAUSE: u32 = 0x10;
    /// Sector erases completed since reset (read-only).
    pub const ERASES: u32 = 0x14;
    /// Page programs completed since reset (read-only).
    pub const PROGRAMS: u32 = 0x18;
    /// The page buffer, [`super::PAGE_BYTES`] bytes of 32-bit words.
    pub const BUF: u32 = 0x100;
    /// Size of the controller's register block.
    pub const BLOCK_BYTES: u32 = BUF + super::PAGE_BYTES;
}

/// Commands written to [`reg::CMD`].
pub mod cmd {
    /// Erase the sector at [`super::reg::ADDR`].
    pub const ERASE_SECTOR: u32 = 1;
    /// Program [`super::reg::LEN`] bytes of the page buffer at [`super::reg::ADDR`].
    pub const PROGRAM: u32 = 2;
}

/// Bits of [`reg::STATUS`].
pub mod status {
    /// A command is running.
    pub const BUSY: u32 = 1 << 0;
    /// The last command was refused; [`super::reg::ERR_CAUSE`] says why.
    pub const ERROR: u32 = 1 << 1;
}

/// Why the controller refused a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum ErrCause {
    /// A command arrived while another was running.
    Busy = 1,
    /// Not a [`cmd`] code.
    UnknownCommand = 2,
    /// The offset (or its end) lies outside the device.
    OutOfRange = 3,
    /// An erase offset not on a sector boundary.
    Unaligned = 4,
    /// A program length of 0 or over [`PAGE_BYTES`].
    BadLength = 5,
    /// A program crossing a page boundary.
    CrossesPage = 6,
}

impl ErrCause {
    /// Every cause, in code order.
    pub const ALL: [ErrCause; 6] = [
        Self::Busy,
        Self::UnknownCommand,
        Self::OutOfRange,
        Self::Unaligned,
        Self::BadLength,
        Self::CrossesPage,
    ];

    /// The cause with code `v` (0 and unknown codes: `None`).
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| *c as u32 == v)
    }

    /// What a user reads.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::Busy => "command while busy",
            Self::UnknownCommand => "unknown command",
            Self::OutOfRange => "offset outside the flash",
            Self::Unaligned => "erase offset not on a sector boundary",
            Self::BadLength => "program length 0 or over a page",
            Self::CrossesPage => "program crosses a page boundary",
        }
    }

    /// The cause a command with these operands is refused for, if any (busy aside): the one
    /// check the device applies and the drivers mirror.
    pub const fn check(command: u32, offset: u32, len: u32) -> Option<Self> {
        match command {
            cmd::ERASE_SECTOR => {
                if offset >= FLASH_BYTES {
                    Some(Self::OutOfRange)
                } else if !offset.is_multiple_of(SECTOR_BYTES) {
                    Some(Self::Unaligned)
                } else {
                    None
                }
            }
            cmd::PROGRAM => {
                if len == 0 || len > PAGE_BYTES {
                    Some(Self::BadLength)
                } else if offset >= FLASH_BYTES || FLASH_BYTES - offset < len {
                    Some(Self::OutOfRange)
                } else if offset % PAGE_BYTES + len > PAGE_BYTES {
                    Some(Self::CrossesPage)
                } else {
                    None
                }
            }
            _ => Some(Self::UnknownCommand),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_codes_round_trip() {
        for c in ErrCause::ALL {
            assert_eq!(ErrCause::from_u32(c as u32), Some(c));
        }
        assert_eq!(ErrCause::from_u32(0), None);
        assert_eq!(ErrCause::from_u32(7), None);
    }

    #[test]
    fn checks() {
        use ErrCause::*;
        assert_eq!(ErrCause::check(cmd::ERASE_SECTOR, 0, 0), None);
        assert_eq!(ErrCause::check(cmd::ERASE_SECTOR, 4096 * 3, 0), None);
        assert_eq!(ErrCause::check(cmd::ERASE_SECTOR, 4095, 0), Some(Unaligned));
        assert_eq!(
            ErrCause::check(cmd::ERASE_SECTOR, FLASH_BYTES, 0),
            Some(OutOfRange)
        );
        assert_eq!(ErrCause::check(cmd::PROGRAM, 0, 256), None);
        assert_eq!(ErrCause::check(cmd::PROGRAM, 255, 1), None);
        assert_eq!(ErrCause::check(cmd::PROGRAM, 255, 2), Some(CrossesPage));
        assert_eq!(ErrCause::check(cmd::PROGRAM, 0, 0), Some(BadLength));
        assert_eq!(ErrCause::check(cmd::PROGRAM, 0, 257), Some(BadLength));
        assert_eq!(
            ErrCause::check(cmd::PROGRAM, FLASH_BYTES - 1, 2),
            Some(OutOfRange)
        );
        assert_eq!(ErrCause::check(cmd::PROGRAM, FLASH_BYTES - 1, 1), None);
        assert_eq!(ErrCause::check(3, 0, 0), Some(UnknownCommand));
    }
}
