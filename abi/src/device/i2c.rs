//! The NIC's transceiver management I2C controller, as the firmware core sees it.
//!
//! One two-wire bus reaches the management interface of every port's pluggable module (CMIS 5:
//! QSFP-DD / OSFP, target address 0x50). As on a QSFP cage, each module answers only while its
//! port is selected (the cage's `ModSelL`, [`I2cRegs::port_select`]); its two status pins,
//! `ModPrsL` (a module is seated) and `IntL` (the module latched a flag: loss of signal, a fault,
//! a state change), are read in [`I2cRegs::modules`] without touching the bus, so the firmware
//! can watch every port with one register read and talk I2C only when something changed.
//!
//! The controller sits in the core's CSR window (`I2C_BASE` in `firmware/memory-map.toml`);
//! its registers are [`I2cRegs`], all 32-bit, little-endian. The NIC image's `hal`
//! (`embedded_hal::i2c::I2c` over this block) and the simulated controller (`mrc-elfcore`)
//! both follow this one description.
//!
//! # Programming model
//! A transfer is a sequence of commands, each one operation of up to [`DATA_BYTES`] bytes in
//! one direction:
//! 1. Wait until [`status::BUSY`] is clear. Select the port ([`I2cRegs::port_select`]) and
//!    write the 7-bit target address to [`I2cRegs::addr`].
//! 2. For a write, put the bytes in [`I2cRegs::data`] (byte 0 in the low byte of word 0).
//! 3. Write [`I2cRegs::cmd`]: [`cmd::WRITE`] or [`cmd::READ`], the byte count in bits 23:16
//!    ([`cmd::len`]), and the flags: [`cmd::START`] sends a (repeated) START and the address
//!    with the operation's direction first (required on the first command of a transfer and
//!    when the direction changes); [`cmd::STOP`] ends the transfer with a STOP; a read without
//!    [`cmd::STOP`] acknowledges its last byte only with [`cmd::MORE`] (the next command reads
//!    on), otherwise it NACKs it, as a read before a repeated START must.
//! 4. Wait until [`status::BUSY`] is clear, then read [`status::ERROR`]; when set,
//!    [`I2cRegs::err_cause`] says why ([`ErrCause`]) and the controller has already ended the
//!    transfer with a STOP. Writing [`status::ERROR`] to [`I2cRegs::status`] clears it. After a
//!    read, [`I2cRegs::data`] holds the bytes.
//!
//! The bus runs at [`I2cRegs::bus_khz`] kHz; a command takes one bit time per START and STOP
//! and nine per byte (eight data bits and the acknowledge), address byte included.

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::U32;

/// Bytes one command moves at most (the data buffer).
pub const DATA_BYTES: u32 = 32;
/// Ports the controller reaches ([`I2cRegs::port_select`] values `0..MAX_PORTS`).
pub const MAX_PORTS: u32 = 8;

le_struct! {
/// The I2C controller's registers (`I2C_BASE` in the NIC memory map), 96 bytes.
pub struct I2cRegs {
    /// WO: start a command: op in bits 1:0 ([`cmd::WRITE`], [`cmd::READ`]), flags
    /// ([`cmd::START`], [`cmd::STOP`], [`cmd::MORE`]), byte count in bits 23:16.
    pub cmd: U32,
    /// RW: 7-bit target address of the transfer.
    pub addr: U32,
    /// RW: [`status`] bits; write [`status::ERROR`] to clear the error.
    pub status: U32,
    /// RO: why the last command failed ([`ErrCause`] code; 0 = none).
    pub err_cause: U32,
    /// RW: the port whose module is on the bus (`ModSelL`); changing it between the commands
    /// of a transfer is refused.
    pub port_select: U32,
    /// RO: module pins: bit p = a module is seated in port p (`ModPrsL` low), bit 8 + p = port
    /// p's module asserts its interrupt (`IntL` low).
    pub modules: U32,
    /// RO: bus clock, kHz.
    pub bus_khz: U32,
    /// RO: commands completed since reset (failed ones included).
    pub commands: U32,
    /// RO: commands that ended in an address or data NACK since reset.
    pub nacks: U32,
    /// Reserved: writes ignored, reads 0.
    pub rsvd: [U32; 7],
    /// RW: the data buffer, [`DATA_BYTES`] bytes (byte 0 in the low byte of word 0).
    pub data: [U32; 8],
}
}

/// Register offsets from the controller's base (the fields of [`I2cRegs`]).
pub mod reg {
    use super::*;
    /// [`I2cRegs::cmd`].
    pub const CMD: u32 = offset_of!(I2cRegs, cmd) as u32;
    /// [`I2cRegs::addr`].
    pub const ADDR: u32 = offset_of!(I2cRegs, addr) as u32;
    /// [`I2cRegs::status`].
    pub const STATUS: u32 = offset_of!(I2cRegs, status) as u32;
    /// [`I2cRegs::err_cause`].
    pub const ERR_CAUSE: u32 = offset_of!(I2cRegs, err_cause) as u32;
    /// [`I2cRegs::port_select`].
    pub const PORT_SELECT: u32 = offset_of!(I2cRegs, port_select) as u32;
    /// [`I2cRegs::modules`].
    pub const MODULES: u32 = offset_of!(I2cRegs, modules) as u32;
    /// [`I2cRegs::bus_khz`].
    pub const BUS_KHZ: u32 = offset_of!(I2cRegs, bus_khz) as u32;
    /// [`I2cRegs::commands`].
    pub const COMMANDS: u32 = offset_of!(I2cRegs, commands) as u32;
    /// [`I2cRegs::nacks`].
    pub const NACKS: u32 = offset_of!(I2cRegs, nacks) as u32;
    /// [`I2cRegs::data`].
    pub const DATA: u32 = offset_of!(I2cRegs, data) as u32;
    /// Size of the register block.
    pub const BLOCK_BYTES: u32 = size_of::<I2cRegs>() as u32;
}

const _: () = assert!(reg::BLOCK_BYTES == 96 && reg::DATA + DATA_BYTES == reg::BLOCK_BYTES);

/// The command word.
pub mod cmd {
    /// Op: write the buffer's first `len` bytes.
    pub const WRITE: u32 = 1;
    /// Op: read `len` bytes into the buffer.
    pub const READ: u32 = 2;
    /// The op field.
    pub const OP_MASK: u32 = 0x3;
    /// Send a (repeated) START and the address byte first.
    pub const START: u32 = 1 << 8;
    /// End the transfer with a STOP after the bytes.
    pub const STOP: u32 = 1 << 9;
    /// Read: acknowledge the last byte (the next command reads on).
    pub const MORE: u32 = 1 << 10;
    /// Bit position of the byte count.
    pub const LEN_SHIFT: u32 = 16;
    /// The byte count field (after the shift).
    pub const LEN_MASK: u32 = 0xff;

    /// The byte count field of a command moving `n` bytes.
    pub const fn len(n: u32) -> u32 {
        (n & LEN_MASK) << LEN_SHIFT
    }
}

/// Bits of [`I2cRegs::status`].
pub mod status {
    /// A command is running.
    pub const BUSY: u32 = 1 << 0;
    /// The last command failed; [`super::I2cRegs::err_cause`] says why.
    pub const ERROR: u32 = 1 << 1;
    /// A transfer is open (a START went out, no STOP yet).
    pub const IN_TRANSFER: u32 = 1 << 2;
}

/// Bits of [`I2cRegs::modules`].
pub mod modules {
    /// Bit of "a module is seated in port `p`".
    pub const fn present(p: u32) -> u32 {
        1 << p
    }
    /// Bit of "port `p`'s module asserts its interrupt".
    pub const fn interrupt(p: u32) -> u32 {
        1 << (8 + p)
    }
}

/// Why a command failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum ErrCause {
    /// No target acknowledged the address byte (no module, or none at that address).
    AddressNack = 1,
    /// The target did not acknowledge a data byte it was written.
    DataNack = 2,
    /// Another master drove the bus (or a stuck line).
    ArbitrationLost = 3,
    /// A command arrived while another was running.
    Busy = 4,
    /// Not an op code, a byte count of 0 or over [`DATA_BYTES`], a command without
    /// [`cmd::START`] outside a transfer or in the other direction, or a port select out of
    /// range or changed within a transfer.
    BadCommand = 5,
}

impl ErrCause {
    /// Every cause, in code order.
    pub const ALL: [ErrCause; 5] = [
        Self::AddressNack,
        Self::DataNack,
        Self::ArbitrationLost,
        Self::Busy,
        Self::BadCommand,
    ];

    /// The cause with code `v` (0 and unknown codes: `None`).
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| *c as u32 == v)
    }

    /// What a user reads.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::AddressNack => "address not acknowledged",
            Self::DataNack => "data byte not acknowledged",
            Self::ArbitrationLost => "arbitration lost",
            Self::Busy => "command while busy",
            Self::BadCommand => "malformed command",
        }
    }

    /// Whether command word `c` is refused before it touches the bus, given whether a transfer
    /// is open and in which direction (`Some(true)`: reading): the one check the controller
    /// applies and drivers mirror.
    pub const fn check(c: u32, open: Option<bool>) -> Option<Self> {
        let op = c & cmd::OP_MASK;
        let len = (c >> cmd::LEN_SHIFT) & cmd::LEN_MASK;
        if (op != cmd::WRITE && op != cmd::READ) || len == 0 || len > DATA_BYTES {
            return Some(Self::BadCommand);
        }
        if c & cmd::START == 0 {
            match open {
                Some(reading) if reading == (op == cmd::READ) => {}
                _ => return Some(Self::BadCommand),
            }
        }
        None
    }
}

/// Bus bit times a command takes: one per START and STOP, nine per byte (the address byte
/// after a START included).
pub const fn command_bits(c: u32) -> u32 {
    let len = (c >> cmd::LEN_SHIFT) & cmd::LEN_MASK;
    let mut bits = 9 * len;
    if c & cmd::START != 0 {
        bits += 1 + 9;
    }
    if c & cmd::STOP != 0 {
        bits += 1;
    }
    bits
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
        assert_eq!(ErrCause::from_u32(6), None);
    }

    #[test]
    fn checks() {
        use cmd::*;
        let w4 = WRITE | len(4);
        let r2 = READ | len(2);
        assert_eq!(ErrCause::check(w4 | START, None), None);
        assert_eq!(ErrCause::check(r2 | START | STOP, Some(false)), None);
        // Continuing a transfer: only in its direction.
        assert_eq!(ErrCause::check(r2, Some(true)), None);
        assert_eq!(ErrCause::check(r2, Some(false)), Some(ErrCause::BadCommand));
        assert_eq!(ErrCause::check(w4, None), Some(ErrCause::BadCommand));
        // Lengths and op codes.
        assert_eq!(
            ErrCause::check(WRITE | START, None),
            Some(ErrCause::BadCommand)
        );
        assert_eq!(ErrCause::check(WRITE | START | len(32), None), None);
        assert_eq!(
            ErrCause::check(WRITE | START | len(33), None),
            Some(ErrCause::BadCommand)
        );
        assert_eq!(
            ErrCause::check(3 | START | len(1), None),
            Some(ErrCause::BadCommand)
        );
    }

    #[test]
    fn bit_times() {
        use cmd::*;
        // START, address, one offset byte.
        assert_eq!(command_bits(WRITE | START | len(1)), 1 + 9 + 9);
        // Repeated START, address, four bytes, STOP.
        assert_eq!(command_bits(READ | START | STOP | len(4)), 1 + 9 + 36 + 1);
        assert_eq!(command_bits(READ | MORE | len(2)), 18);
    }
}
