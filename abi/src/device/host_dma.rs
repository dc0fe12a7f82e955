//! The NIC core's host DMA engine: reads host memory by IOVA (through the host interface and
//! the host's IOMMU) into a buffer the core reads word by word. The NIC image fetches the bytes
//! of an update (`FW_CHUNK` names them by IOVA) with it; the simulated NIC (`mrc-sim`'s `elf`
//! level) serves the same registers.
//!
//! The engine sits in the core's CSR window (`HOST_DMA_BASE` in `firmware/memory-map.toml`);
//! every register is 32-bit, little-endian.
//!
//! # Programming model
//! 1. Wait until [`status::BUSY`] is clear.
//! 2. Write the IOVA to [`reg::IOVA_LO`] and [`reg::IOVA_HI`], the byte count (1..=
//!    [`BUF_BYTES`]) to [`reg::LEN`], then [`cmd::READ`] to [`reg::CMD`].
//! 3. Wait until [`status::BUSY`] is clear, then read [`status::ERROR`]: when set,
//!    [`reg::ERR_CAUSE`] says why ([`ErrCause`]) and the buffer holds nothing new; writing
//!    [`status::ERROR`] to [`reg::STATUS`] clears it. Otherwise the bytes are in [`reg::BUF`]
//!    (byte 0 in the low byte of the first word).
//!
//! A read the host refuses (an IOVA its IOMMU does not map for the device) is
//! [`ErrCause::Fault`]; no host memory is touched by a refused command.

/// Bytes one read moves (the buffer's size).
pub const BUF_BYTES: u32 = 256;

/// Register offsets from the engine's base.
pub mod reg {
    /// Host address, low word.
    pub const IOVA_LO: u32 = 0x00;
    /// Host address, high word.
    pub const IOVA_HI: u32 = 0x04;
    /// Bytes to read.
    pub const LEN: u32 = 0x08;
    /// Command ([`super::cmd`]); writing starts it.
    pub const CMD: u32 = 0x0c;
    /// [`super::status`] bits; write [`super::status::ERROR`] to clear an error.
    pub const STATUS: u32 = 0x10;
    /// Why the last command was refused ([`super::ErrCause`] code; 0 when none).
    pub const ERR_CAUSE: u32 = 0x14;
    /// Reads done (wrapping counter).
    pub const READS: u32 = 0x18;
    /// The buffer, [`super::BUF_BYTES`] bytes of 32-bit words.
    pub const BUF: u32 = 0x100;
    /// Size of the engine's register block.
    pub const BLOCK_BYTES: u32 = BUF + super::BUF_BYTES;
}

/// Commands written to [`reg::CMD`].
pub mod cmd {
    /// Read [`super::reg::LEN`] bytes at the IOVA into the buffer.
    pub const READ: u32 = 1;
}

/// Bits of [`reg::STATUS`].
pub mod status {
    /// A command is running.
    pub const BUSY: u32 = 1 << 0;
    /// The last command was refused; [`super::reg::ERR_CAUSE`] says why.
    pub const ERROR: u32 = 1 << 1;
}

/// Why the engine refused a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum ErrCause {
    /// A command arrived while another was running.
    Busy = 1,
    /// Not a [`cmd`] code.
    UnknownCommand = 2,
    /// A length of 0 or over [`BUF_BYTES`].
    BadLength = 3,
    /// The host refused the read (the IOVA is not mapped for the device).
    Fault = 4,
}

impl ErrCause {
    /// Every cause, in code order.
    pub const ALL: [ErrCause; 4] = [
        Self::Busy,
        Self::UnknownCommand,
        Self::BadLength,
        Self::Fault,
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
            Self::BadLength => "length 0 or over the buffer",
            Self::Fault => "the host refused the read (IOVA not mapped)",
        }
    }

    /// The cause a command with these operands is refused for before the host is asked, if
    /// any (busy aside): the one check the device applies and the drivers mirror.
    pub const fn check(command: u32, len: u32) -> Option<Self> {
        match command {
            cmd::READ if len == 0 || len > BUF_BYTES => Some(Self::BadLength),
            cmd::READ => None,
            _ => Some(Self::UnknownCommand),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_codes_round_trip_and_checks() {
        for c in ErrCause::ALL {
            assert_eq!(ErrCause::from_u32(c as u32), Some(c));
        }
        assert_eq!(ErrCause::from_u32(0), None);
        assert_eq!(ErrCause::check(cmd::READ, 1), None);
        assert_eq!(ErrCause::check(cmd::READ, BUF_BYTES), None);
        assert_eq!(ErrCause::check(cmd::READ, 0), Some(ErrCause::BadLength));
        assert_eq!(
            ErrCause::check(cmd::READ, BUF_BYTES + 1),
            Some(ErrCause::BadLength)
        );
        assert_eq!(ErrCause::check(9, 4), Some(ErrCause::UnknownCommand));
    }
}
