//! A CMIS 5 module as its I2C target and cage pins behave, for simulators and host tests
//! (feature `model`): what [`crate::cmis`] reads, served from the module's memory map.
//!
//! Memory map (the bytes [`crate::cmis`] reads, plus what a real module would show there):
//!
//! | where | byte(s) | value |
//! |---|---|---|
//! | lower page | 0 | identifier (0x18, QSPF-DD) |
//! | lower page | 1 | CMIS revision 5.0 (0x50) |
//! | lower page | 3 | module state (bits 3..1: Ready once seated) and bit 0 = 1 while `IntL` is not asserted |
//! | lower page | 127 | page select |
//! | page 00h | 129.., 148.., 166.. | vendor name, part number, serial number |
//! | page 11h | 128..=131 | data path state per lane, 4 bits each (4 = DPActivated; 1 = DPDeactivated under LOS) |
//! | page 11h | 135 | Tx fault, latched |
//! | page 11h | 147 | Rx LOS, latched |
//! | page 11h | 148 | Rx CDR LOL, latched |
//!
//! Latched flags are set when their condition appears, cleared when read, and set again by the
//! read when the condition is still there (CMIS's clear-on-read). Any latched flag asserts the
//! cage's `IntL` pin. A write's first byte sets the address pointer; reads and further written
//! bytes move it on, wrapping within the lower page or the selected upper page. Only the page
//! select byte is writable; writes elsewhere are acknowledged and ignored (counted).
//!
//! [`ModelPort`] puts a cage of modules behind `embedded_hal::i2c::I2c` for one port (as the
//! image's `hal` puts the controller), so [`crate::monitor::PortMonitor`] runs over it on the
//! host.

use core::cell::RefCell;

use embedded_hal::i2c::{ErrorKind, ErrorType, I2c, NoAcknowledgeSource, Operation};

use crate::cmis::MODULE_ADDR;
use crate::monitor::{ModulePins, Pins};

const PAGE_SELECT: usize = 127;
const TX_FAULT: usize = 135;
const RX_LOS: usize = 147;
const RX_LOL: usize = 148;

/// Counters of one module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelCounters {
    /// Transfers addressed to the module (START + its address) while it was seated.
    pub transfers: u32,
    /// Bytes it sent.
    pub bytes_read: u32,
    /// Bytes it was written (offsets included).
    pub bytes_written: u32,
    /// Written bytes it ignored (read-only locations).
    pub ignored_writes: u32,
    /// Transfers addressed to the cage while no module was seated (NACKed).
    pub absent_nacks: u32,
}

/// One pluggable module (or an empty cage).
#[derive(Clone, Debug)]
pub struct CmisModule {
    present: bool,
    lower: [u8; 128],
    page00: [u8; 128],
    page11: [u8; 128],
    /// Conditions now (bit per lane).
    los: u8,
    lol: u8,
    tx_fault: u8,
    /// The address pointer and whether the next written byte sets it.
    pointer: u8,
    first_write: bool,
    counters: ModelCounters,
}

fn ascii16(s: &str) -> [u8; 16] {
    let mut a = [b' '; 16];
    for (d, c) in a.iter_mut().zip(s.bytes()) {
        *d = c;
    }
    a
}

impl CmisModule {
    /// A seated QSFP-DD module, Ready, every lane activated, no flag; `serial` names it.
    pub fn seated(serial: &str) -> Self {
        let mut m = CmisModule {
            present: true,
            lower: [0; 128],
            page00: [0; 128],
            page11: [0; 128],
            los: 0,
            lol: 0,
            tx_fault: 0,
            pointer: 0,
            first_write: true,
            counters: ModelCounters::default(),
        };
        m.lower[0] = 0x18;
        m.lower[1] = 0x50;
        m.page00[129 - 128..145 - 128].copy_from_slice(&ascii16("MRC-SIM OPTICS"));
        m.page00[148 - 128..164 - 128].copy_from_slice(&ascii16("QDD-800G-DR8"));
        m.page00[166 - 128..182 - 128].copy_from_slice(&ascii16(serial));
        m.settle();
        m
    }

    /// Whether a module is seated.
    pub fn present(&self) -> bool {
        self.present
    }

    /// Whether the module asserts `IntL` (some latched flag is set).
    pub fn interrupt(&self) -> bool {
        self.present && self.lower[3] & 1 == 0
    }

    /// Counters.
    pub fn counters(&self) -> ModelCounters {
        self.counters
    }

    /// Pull the module out of its cage: it stops answering and its presence pin goes.
    pub fn pull(&mut self) {
        self.present = false;
    }

    /// Seat it again: Ready at once, its conditions and flags cleared, page 00h selected. (A
    /// real module powers up through ModuleLowPwr and latches a state-changed flag; the model
    /// skips both: the cage's presence pin already tells the host.)
    pub fn insert(&mut self) {
        self.present = true;
        self.los = 0;
        self.lol = 0;
        self.tx_fault = 0;
        self.lower[PAGE_SELECT] = 0;
        self.page11[RX_LOS - 128] = 0;
        self.page11[RX_LOL - 128] = 0;
        self.page11[TX_FAULT - 128] = 0;
        self.settle();
    }

    /// Loss of signal on `lanes` (bit per lane) from now on; 0 clears the condition (the
    /// latched flag stays until read).
    pub fn set_los(&mut self, lanes: u8) {
        self.los = lanes;
        self.page11[RX_LOS - 128] |= lanes;
        self.settle();
    }

    /// The derived bytes: module state Ready, data path states, `IntL`.
    fn settle(&mut self) {
        let latched =
            self.page11[RX_LOS - 128] | self.page11[RX_LOL - 128] | self.page11[TX_FAULT - 128]
                != 0;
        self.lower[3] = (3 << 1) | u8::from(!latched);
        for lane in 0..8u8 {
            let st = if self.los & (1 << lane) != 0 { 1 } else { 4 };
            let b = &mut self.page11[usize::from(lane / 2)];
            let shift = 4 * (lane % 2);
            *b = (*b & !(0xF << shift)) | (st << shift);
        }
    }

    fn byte(&mut self, at: u8) -> &mut u8 {
        let i = usize::from(at & 0x7F);
        if at < 128 {
            return &mut self.lower[i];
        }
        match self.lower[PAGE_SELECT] {
            0x00 => &mut self.page00[i],
            0x11 => &mut self.page11[i],
            // Pages the model does not have read as 0 (a real module would NACK or return
            // its own content): served from a scratch byte of page 00h's reserved range.
            _ => &mut self.page00[127],
        }
    }

    fn advance(&mut self) {
        self.pointer = if self.pointer == 127 {
            0
        } else if self.pointer == 255 {
            128
        } else {
            self.pointer + 1
        };
    }

    /// A START with the module's address: whether it acknowledges (a seated module does).
    pub fn start(&mut self) -> bool {
        if !self.present {
            self.counters.absent_nacks += 1;
            return false;
        }
        self.counters.transfers += 1;
        self.first_write = true;
        true
    }

    /// A written byte (the first of a write sets the pointer): always acknowledged.
    pub fn write_byte(&mut self, b: u8) -> bool {
        if !self.present {
            return false;
        }
        self.counters.bytes_written += 1;
        if self.first_write {
            self.first_write = false;
            self.pointer = b;
            return true;
        }
        if usize::from(self.pointer) == PAGE_SELECT {
            self.lower[PAGE_SELECT] = b;
        } else {
            self.counters.ignored_writes += 1;
        }
        self.advance();
        true
    }

    /// The byte at the pointer (latched flags clear on read, re-latching a standing
    /// condition); an absent module's lines float high.
    pub fn read_byte(&mut self) -> u8 {
        if !self.present {
            return 0xFF;
        }
        self.counters.bytes_read += 1;
        let at = self.pointer;
        let v = *self.byte(at);
        let page = self.lower[PAGE_SELECT];
        let clear = match (at, page) {
            (a, 0x11) if usize::from(a) == RX_LOS => Some(self.los),
            (a, 0x11) if usize::from(a) == RX_LOL => Some(self.lol),
            (a, 0x11) if usize::from(a) == TX_FAULT => Some(self.tx_fault),
            _ => None,
        };
        if let Some(standing) = clear {
            *self.byte(at) = standing;
            self.settle();
        }
        self.advance();
        v
    }
}

/// Port `port` of a cage of modules behind `embedded_hal::i2c::I2c` (the module answers at
/// [`MODULE_ADDR`]), and the cage's pins.
#[derive(Clone, Copy, Debug)]
pub struct ModelPort<'a> {
    /// The modules, one per port.
    pub cage: &'a RefCell<[CmisModule]>,
    /// This handle's port.
    pub port: usize,
}

impl ErrorType for ModelPort<'_> {
    type Error = ErrorKind;
}

impl I2c for ModelPort<'_> {
    fn transaction(
        &mut self,
        address: u8,
        operations: &mut [Operation<'_>],
    ) -> Result<(), Self::Error> {
        match self.cage.borrow_mut().get_mut(self.port) {
            Some(m) => transact(m, address, operations),
            None => Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address)),
        }
    }
}

/// An embedded-hal transaction with module `m` in its cage (it answers at [`MODULE_ADDR`]):
/// what [`ModelPort`] does, for handles that hold their cage otherwise.
///
/// # Errors
/// An address NACK (no module, another address) or a data NACK.
pub fn transact(
    m: &mut CmisModule,
    address: u8,
    operations: &mut [Operation<'_>],
) -> Result<(), ErrorKind> {
    for op in operations {
        if address != MODULE_ADDR || !m.start() {
            return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address));
        }
        match op {
            Operation::Write(bytes) => {
                for b in bytes.iter() {
                    if !m.write_byte(*b) {
                        return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Data));
                    }
                }
            }
            Operation::Read(buf) => {
                for b in buf.iter_mut() {
                    *b = m.read_byte();
                }
            }
        }
    }
    Ok(())
}

/// The cage pins of `modules` (port `i` = index `i`, at most 8).
pub fn cage_pins(modules: &[CmisModule]) -> Pins {
    let mut p = Pins::default();
    for (i, m) in modules.iter().enumerate().take(8) {
        if m.present() {
            p.present |= 1 << i;
        }
        if m.interrupt() {
            p.interrupt |= 1 << i;
        }
    }
    p
}

impl ModulePins for ModelPort<'_> {
    fn pins(&mut self) -> Pins {
        cage_pins(&self.cage.borrow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmis::{DownReason, PortEvent, Transceiver};
    use embedded_hal_mock::eh1::delay::NoopDelay;

    #[test]
    fn the_transceiver_driver_reads_the_model() {
        let cage = RefCell::new([CmisModule::seated("SN-A")]);
        let port = ModelPort {
            cage: &cage,
            port: 0,
        };
        let mut t = Transceiver::new(port, 0, 8);
        let d = &mut NoopDelay;
        let id = t.identify(d).unwrap();
        assert_eq!(id.vendor_sn.as_str(), "SN-A");
        assert_eq!(id.vendor_pn.as_str(), "QDD-800G-DR8");
        assert_eq!(t.poll(d), Some(PortEvent::Up { port: 0 }));
        // LOS on lane 5: IntL asserts; the poll reads the latched flag and goes down; while
        // the condition stands, the re-latched flag keeps it down.
        cage.borrow_mut()[0].set_los(1 << 5);
        assert!(cage.borrow()[0].interrupt());
        let down = PortEvent::Down {
            port: 0,
            reason: DownReason::RxLos { lanes: 1 << 5 },
        };
        assert_eq!(t.poll(d), Some(down));
        assert_eq!(t.poll(d), None);
        assert_eq!(cage.borrow()[0].page11[0] >> 4, 4, "lane 1 activated");
        assert_eq!(cage.borrow()[0].page11[2] >> 4, 1, "lane 5 deactivated");
        // Cleared: the flag latched at the last read is read once more (still down), then
        // the link is up and IntL goes.
        cage.borrow_mut()[0].set_los(0);
        assert_eq!(t.poll(d), None);
        assert_eq!(t.poll(d), Some(PortEvent::Up { port: 0 }));
        assert!(!cage.borrow()[0].interrupt());
        // Pulled: every transfer NACKs; the driver retries and calls the module lost.
        cage.borrow_mut()[0].pull();
        assert_eq!(
            t.poll(d),
            Some(PortEvent::Down {
                port: 0,
                reason: DownReason::ModuleLost
            })
        );
        assert_eq!(cage.borrow()[0].counters().absent_nacks, 3);
        cage.borrow_mut()[0].insert();
        assert!(!cage.borrow()[0].interrupt());
        assert_eq!(t.poll(d), Some(PortEvent::Up { port: 0 }));
    }
}
