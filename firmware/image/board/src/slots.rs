//! The image's A/B slots and boot record on the QSPI flash, as the update service stores them
//! (`mrc_fw_update::service::FwStorage`): erases and programs through the controller's driver
//! ([`crate::flash::Flash`]), reads through the mapped window ([`Window`]).
//!
//! Erasing a slot erases only the sectors that are not blank already (read through the
//! window): a slot is up to hundreds of sectors, each tens of milliseconds of the part's time,
//! and an update usually follows an image much smaller than its slot. Every byte of the slot
//! reads back erased afterwards, as the contract says.

use mrc_abi::device::flash::{ERASED, SECTOR_BYTES};
use mrc_fw_update::service::FwStorage;
use mrc_fw_update::slots::{BootControl, ControlError, Slot, CONTROL_LEN};
use mrc_fw_update::update::{SlotStorage, StorageError};

use crate::flash::{Flash, Regs};

/// Reads of the flash's memory-mapped window.
pub trait Window {
    /// Fills `out` with the flash bytes at flash offset `offset` (the caller keeps the range
    /// inside the device).
    fn read(&self, offset: u32, out: &mut [u8]);
}

/// Where the slots and the record are: flash offsets (from the flash's base) and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of slot A.
    pub slot_a: u32,
    /// Offset of slot B.
    pub slot_b: u32,
    /// Bytes per slot (a multiple of the sector size).
    pub slot_len: u32,
    /// Offset of the boot record (in a sector of its own).
    pub record: u32,
}

/// The slots and the record on the flash behind `R` (controller) and `W` (window).
pub struct FlashStore<R: Regs, W: Window> {
    flash: Flash<R>,
    window: W,
    layout: Layout,
    /// Sectors erased so far (blank ones skipped are not counted).
    pub erased_sectors: u32,
}

fn device(e: crate::flash::Error) -> StorageError {
    StorageError::Device { code: e.code() }
}

impl<R: Regs, W: Window> FlashStore<R, W> {
    /// The store over `regs` and `window` with `layout`.
    pub fn new(regs: R, window: W, layout: Layout) -> Self {
        FlashStore {
            flash: Flash::new(regs),
            window,
            layout,
            erased_sectors: 0,
        }
    }

    /// The register access back.
    pub fn release(self) -> R {
        self.flash.release()
    }

    /// The boot record as stored.
    ///
    /// # Errors
    /// Blank or torn ([`BootControl::from_bytes`]).
    pub fn load_record(&self) -> Result<BootControl, ControlError> {
        let mut b = [0u8; CONTROL_LEN];
        self.window.read(self.layout.record, &mut b);
        BootControl::from_bytes(&b)
    }

    fn span(&self, slot: Slot, offset: u32, len: usize) -> Result<u32, StorageError> {
        let len32 = u32::try_from(len).unwrap_or(u32::MAX);
        if u64::from(offset) + u64::from(len32) > u64::from(self.layout.slot_len) {
            return Err(StorageError::OutOfBounds { offset, len: len32 });
        }
        let base = match slot {
            Slot::A => self.layout.slot_a,
            Slot::B => self.layout.slot_b,
        };
        Ok(base + offset)
    }

    fn blank(&self, at: u32) -> bool {
        let mut buf = [0u8; 64];
        (0..SECTOR_BYTES).step_by(buf.len()).all(|o| {
            self.window.read(at + o, &mut buf);
            buf.iter().all(|&b| b == ERASED)
        })
    }
}

impl<R: Regs, W: Window> SlotStorage for FlashStore<R, W> {
    fn capacity(&self) -> u32 {
        self.layout.slot_len
    }
    fn erase(&mut self, slot: Slot) -> Result<(), StorageError> {
        let base = self.span(slot, 0, self.layout.slot_len as usize)?;
        for s in (0..self.layout.slot_len).step_by(SECTOR_BYTES as usize) {
            if !self.blank(base + s) {
                self.flash.erase_sector(base + s).map_err(device)?;
                self.erased_sectors += 1;
            }
        }
        Ok(())
    }
    fn write(&mut self, slot: Slot, offset: u32, data: &[u8]) -> Result<(), StorageError> {
        let at = self.span(slot, offset, data.len())?;
        self.flash.program(at, data).map_err(device)
    }
    fn read(&self, slot: Slot, offset: u32, buf: &mut [u8]) -> Result<(), StorageError> {
        let at = self.span(slot, offset, buf.len())?;
        self.window.read(at, buf);
        Ok(())
    }
}

impl<R: Regs, W: Window> FwStorage for FlashStore<R, W> {
    fn save_record(&mut self, record: &BootControl) -> Result<(), StorageError> {
        self.flash
            .rewrite(self.layout.record, &record.to_bytes())
            .map_err(device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_abi::device::flash::{cmd, reg, status, PAGE_BYTES};
    use std::cell::RefCell;

    /// A functional flash: erase and program at once; the window reads the same array.
    struct Part<'a> {
        mem: &'a RefCell<Vec<u8>>,
        addr: u32,
        len: u32,
        buf: [u8; PAGE_BYTES as usize],
        erases: u32,
    }

    impl Regs for &mut Part<'_> {
        fn read(&mut self, _offset: u32) -> u32 {
            0
        }
        fn write(&mut self, offset: u32, value: u32) {
            match offset {
                reg::ADDR => self.addr = value,
                reg::LEN => self.len = value,
                reg::STATUS => assert_eq!(value, status::ERROR),
                reg::CMD if value == cmd::ERASE_SECTOR => {
                    let a = self.addr as usize;
                    self.mem.borrow_mut()[a..a + SECTOR_BYTES as usize].fill(ERASED);
                    self.erases += 1;
                }
                reg::CMD => {
                    let (a, n) = (self.addr as usize, self.len as usize);
                    for (m, b) in self.mem.borrow_mut()[a..a + n].iter_mut().zip(&self.buf) {
                        *m &= b;
                    }
                }
                o => {
                    let i = (o - reg::BUF) as usize;
                    self.buf[i..i + 4].copy_from_slice(&value.to_le_bytes());
                }
            }
        }
    }

    struct View<'a>(&'a RefCell<Vec<u8>>);

    impl Window for View<'_> {
        fn read(&self, offset: u32, out: &mut [u8]) {
            let o = offset as usize;
            out.copy_from_slice(&self.0.borrow()[o..o + out.len()]);
        }
    }

    const LAYOUT: Layout = Layout {
        slot_a: 0,
        slot_b: 4 * SECTOR_BYTES,
        slot_len: 4 * SECTOR_BYTES,
        record: 8 * SECTOR_BYTES,
    };

    #[test]
    fn slots_erase_only_written_sectors_and_the_record_round_trips() {
        let mem = RefCell::new(vec![ERASED; 9 * SECTOR_BYTES as usize]);
        let mut part = Part {
            mem: &mem,
            addr: 0,
            len: 0,
            buf: [0; PAGE_BYTES as usize],
            erases: 0,
        };
        let mut store = FlashStore::new(&mut part, View(&mem), LAYOUT);
        assert_eq!(store.load_record(), Err(ControlError::BadMagic), "blank");
        store.erase(Slot::B).unwrap();
        assert_eq!(store.erased_sectors, 0, "a blank slot needs no erase");
        store.write(Slot::B, SECTOR_BYTES + 5, &[0]).unwrap();
        store.erase(Slot::B).unwrap();
        assert_eq!(store.erased_sectors, 1, "only the written sector");
        assert!(
            mem.borrow()[LAYOUT.slot_b as usize..][..LAYOUT.slot_len as usize]
                .iter()
                .all(|&b| b == ERASED)
        );
        store.write(Slot::B, 10, &[1, 2, 3]).unwrap();
        let mut b = [0u8; 3];
        store.read(Slot::B, 10, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3]);
        assert!(matches!(
            store.write(Slot::B, LAYOUT.slot_len - 1, &[0, 0]),
            Err(StorageError::OutOfBounds { .. })
        ));
        let record = BootControl::factory(7, 2);
        store.save_record(&record).unwrap();
        assert_eq!(store.load_record(), Ok(record));
        let _ = store.release();
        assert_eq!(part.erases, 2, "one slot sector, the record sector");
    }
}
