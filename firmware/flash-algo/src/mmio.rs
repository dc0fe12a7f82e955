//! The only module with `unsafe`: volatile access to the flash controller's registers at the
//! address `firmware/memory-map.toml` gives (`FLASH_CTRL_BASE`).
#![allow(unsafe_code)]

#[allow(dead_code)]
mod map {
    include!(concat!(env!("OUT_DIR"), "/memmap.rs"));
}

/// The controller's register block.
pub struct Controller;

impl mrc_nic_board::flash::Regs for Controller {
    fn read(&mut self, offset: u32) -> u32 {
        // SAFETY: FLASH_CTRL_BASE + offset is a 4-byte aligned register of the controller's
        // block in the core's CSR window (the driver only uses offsets of mrc_abi's layout).
        unsafe { core::ptr::read_volatile((map::FLASH_CTRL_BASE + offset as usize) as *const u32) }
    }

    fn write(&mut self, offset: u32, value: u32) {
        // SAFETY: as `read`.
        unsafe {
            core::ptr::write_volatile((map::FLASH_CTRL_BASE + offset as usize) as *mut u32, value)
        }
    }
}
