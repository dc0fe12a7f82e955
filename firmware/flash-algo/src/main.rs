//! The probe-rs flash algorithm for the MRC NIC's QSPI NOR flash.
//!
//! probe-rs (or any CMSIS-Pack flash loader) loads this code into the core's DTCM at the
//! load address the chip description names, then calls `Init`, `EraseSector`, `ProgramPage`
//! and `UnInit` with the absolute flash addresses of the memory map (A/B image slots and the
//! boot record); a return value of 0 is success, anything else the driver's error code
//! (`mrc_nic_board::flash::Error::code`: the `mrc_abi::device::flash::ErrCause`, plus 0x100 when
//! the device refused). The controller is driven by the same driver the NIC image uses.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

use flash_algorithm::{ErrorCode, FlashAlgorithm, Function};
use mrc_abi::device::flash::{
    ERASED, FLASH_BASE, FLASH_BYTES, PAGE_BYTES, PAGE_PROGRAM_MAX_US, SECTOR_BYTES,
    SECTOR_ERASE_MAX_US,
};
use mrc_nic_board::flash::{Error, Flash};

mod mmio;

struct Algorithm {
    flash: Flash<mmio::Controller>,
}

/// The CMSIS-Pack entry points (`Init`, `UnInit`, `EraseSector`, `ProgramPage`) and the
/// `FlashDevice` description, as the flash-algorithm crate lays them out (its macro expands to
/// `unsafe extern "C"` functions over a static instance, hence this module's `allow`).
mod entry {
    #![allow(unsafe_code)]
    use super::*;

    flash_algorithm::algorithm!(Algorithm, {
        device_name: "MRC-NIC QSPI NOR",
        device_type: DeviceType::ExtSpi,
        flash_address: FLASH_BASE,
        flash_size: FLASH_BYTES,
        page_size: PAGE_BYTES,
        empty_value: ERASED,
        program_time_out: PAGE_PROGRAM_MAX_US / 1000,
        erase_time_out: SECTOR_ERASE_MAX_US / 1000,
        sectors: [{
            size: SECTOR_BYTES,
            address: 0x0,
        }]
    });
}

/// The flash offset of absolute address `addr`, or the error code of an address outside it.
fn offset(addr: u32) -> Result<u32, ErrorCode> {
    addr.checked_sub(FLASH_BASE)
        .filter(|o| *o < FLASH_BYTES)
        .ok_or_else(|| code(Error::Refused(mrc_abi::device::flash::ErrCause::OutOfRange)))
}

fn code(e: Error) -> ErrorCode {
    // Every code is nonzero (cause codes start at 1).
    ErrorCode::new(e.code()).unwrap_or(ErrorCode::MAX)
}

impl FlashAlgorithm for Algorithm {
    fn new(_address: u32, _clock: u32, _function: Function) -> Result<Self, ErrorCode> {
        Ok(Algorithm {
            flash: Flash::new(mmio::Controller),
        })
    }

    fn erase_sector(&mut self, address: u32) -> Result<(), ErrorCode> {
        self.flash.erase_sector(offset(address)?).map_err(code)
    }

    fn program_page(&mut self, address: u32, data: &[u8]) -> Result<(), ErrorCode> {
        self.flash.program(offset(address)?, data).map_err(code)
    }
}
