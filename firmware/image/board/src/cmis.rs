//! Transceiver management over I2C per CMIS 5 (QSFP-DD / OSFP modules), two-wire address 0x50.
//!
//! What is read (all through `embedded_hal::i2c::I2c::write_read` with a one-byte offset; the
//! upper half 128..=255 is paged by writing the page number to byte 127):
//!
//! | where | byte(s) | meaning |
//! |---|---|---|
//! | lower page | 0 | SFF-8024 identifier (0x18 QSFP-DD, 0x19 OSFP, 0x1E QSFP+ CMIS, ...) |
//! | lower page | 1 | CMIS revision (major.minor nibbles) |
//! | lower page | 3 | module state in bits 3..1: 1 LowPwr, 2 PwrUp, 3 Ready, 4 PwrDn, 5 Fault |
//! | page 00h | 129..=144 | vendor name (ASCII, space padded) |
//! | page 00h | 148..=163 | vendor part number |
//! | page 00h | 166..=181 | vendor serial number |
//! | page 11h | 135 | Tx fault flags, bit per lane (latched) |
//! | page 11h | 147 | Rx LOS flags, bit per lane (latched) |
//! | page 11h | 148 | Rx CDR LOL flags, bit per lane (latched) |
//!
//! [`Transceiver::poll`] turns these into port events: a module that stops answering (NACK),
//! is not `Ready`, reports a fault, or has a lane with LOS / LOL / Tx fault is **down**; the
//! first poll where everything is fine again is **up**. Only transitions are events. I2C errors
//! are retried `RETRIES` times with a `DelayNs` pause before the module counts as lost.

use embedded_hal::delay::DelayNs;
use embedded_hal::i2c::I2c;

/// Two-wire address of the module management interface.
pub const MODULE_ADDR: u8 = 0x50;
const PAGE_SELECT: u8 = 127;
const RETRIES: u32 = 3;
const RETRY_DELAY_US: u32 = 100;

/// CMIS module state (lower page byte 3, bits 3..1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ModuleState {
    /// ModuleLowPwr.
    LowPower,
    /// ModulePwrUp.
    PowerUp,
    /// ModuleReady.
    Ready,
    /// ModulePwrDn.
    PowerDown,
    /// ModuleFault.
    Fault,
    /// A reserved encoding.
    Reserved(u8),
}

impl ModuleState {
    /// Decode byte 3.
    pub const fn from_byte(b: u8) -> Self {
        match (b >> 1) & 0x7 {
            1 => ModuleState::LowPower,
            2 => ModuleState::PowerUp,
            3 => ModuleState::Ready,
            4 => ModuleState::PowerDown,
            5 => ModuleState::Fault,
            x => ModuleState::Reserved(x),
        }
    }
}

/// A 16-byte ASCII field, space padded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ascii16(pub [u8; 16]);

impl Ascii16 {
    /// The text without padding; non-ASCII bytes make it `"?"`.
    pub fn as_str(&self) -> &str {
        let end = self
            .0
            .iter()
            .rposition(|&c| c != b' ' && c != 0)
            .map_or(0, |i| i + 1);
        match core::str::from_utf8(&self.0[..end]) {
            Ok(s) if s.is_ascii() => s,
            _ => "?",
        }
    }
}

/// Who the module is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ModuleIdentity {
    /// SFF-8024 identifier (byte 0).
    pub identifier: u8,
    /// CMIS revision (byte 1).
    pub cmis_revision: u8,
    /// Vendor name.
    pub vendor_name: Ascii16,
    /// Vendor part number.
    pub vendor_pn: Ascii16,
    /// Vendor serial number.
    pub vendor_sn: Ascii16,
}

/// Why a port is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DownReason {
    /// The module does not answer on I2C (removed or dead).
    ModuleLost,
    /// The identifier is not a CMIS module type this NIC drives.
    NotCmis {
        /// Byte 0.
        identifier: u8,
    },
    /// The module is not in `Ready`.
    NotReady(ModuleState),
    /// Lanes with Tx fault.
    TxFault {
        /// Bit per lane.
        lanes: u8,
    },
    /// Lanes with Rx loss of signal.
    RxLos {
        /// Bit per lane.
        lanes: u8,
    },
    /// Lanes with Rx CDR loss of lock.
    RxLol {
        /// Bit per lane.
        lanes: u8,
    },
}

impl DownReason {
    /// A one-byte code for event traces.
    pub const fn code(self) -> u8 {
        match self {
            DownReason::ModuleLost => 1,
            DownReason::NotCmis { .. } => 2,
            DownReason::NotReady(_) => 3,
            DownReason::TxFault { .. } => 4,
            DownReason::RxLos { .. } => 5,
            DownReason::RxLol { .. } => 6,
        }
    }
}

/// A port state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PortEvent {
    /// The link came up.
    Up {
        /// Port (= plane).
        port: u8,
    },
    /// The link went down: the engine retires every EV on this plane.
    Down {
        /// Port (= plane).
        port: u8,
        /// Why.
        reason: DownReason,
    },
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CmisCounters {
    /// Polls made.
    pub polls: u32,
    /// I2C transfers that failed (each retry counted).
    pub i2c_errors: u32,
    /// Down events.
    pub downs: u32,
    /// Up events.
    pub ups: u32,
}

/// SFF-8024 identifiers of CMIS modules.
pub const fn is_cmis_identifier(id: u8) -> bool {
    matches!(id, 0x18 | 0x19 | 0x1E | 0x1F | 0x20 | 0x21)
}

/// One port's module.
pub struct Transceiver<I2C> {
    i2c: I2C,
    port: u8,
    up: Option<bool>,
    lanes_mask: u8,
    counters: CmisCounters,
}

impl<I2C: I2c> Transceiver<I2C> {
    /// The module of `port` on `i2c` using `lanes` lanes (1..=8); state unknown until the first
    /// poll.
    pub fn new(i2c: I2C, port: u8, lanes: u8) -> Self {
        let lanes_mask = if lanes >= 8 {
            0xFF
        } else {
            (1u8 << lanes).wrapping_sub(1)
        };
        Transceiver {
            i2c,
            port,
            up: None,
            lanes_mask,
            counters: CmisCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> CmisCounters {
        self.counters
    }

    /// The bus back.
    pub fn release(self) -> I2C {
        self.i2c
    }

    fn read(&mut self, delay: &mut impl DelayNs, offset: u8, buf: &mut [u8]) -> Result<(), ()> {
        for attempt in 0..RETRIES {
            if self.i2c.write_read(MODULE_ADDR, &[offset], buf).is_ok() {
                return Ok(());
            }
            self.counters.i2c_errors = self.counters.i2c_errors.saturating_add(1);
            if attempt + 1 < RETRIES {
                delay.delay_us(RETRY_DELAY_US);
            }
        }
        Err(())
    }

    fn select_page(&mut self, delay: &mut impl DelayNs, page: u8) -> Result<(), ()> {
        for attempt in 0..RETRIES {
            if self.i2c.write(MODULE_ADDR, &[PAGE_SELECT, page]).is_ok() {
                return Ok(());
            }
            self.counters.i2c_errors = self.counters.i2c_errors.saturating_add(1);
            if attempt + 1 < RETRIES {
                delay.delay_us(RETRY_DELAY_US);
            }
        }
        Err(())
    }

    /// Read the module identity (lower page bytes 0..2, page 00h vendor fields).
    ///
    /// # Errors
    /// [`DownReason::ModuleLost`] when the module does not answer,
    /// [`DownReason::NotCmis`] for another module type.
    pub fn identify(&mut self, delay: &mut impl DelayNs) -> Result<ModuleIdentity, DownReason> {
        let mut id = [0u8; 2];
        self.read(delay, 0, &mut id)
            .map_err(|()| DownReason::ModuleLost)?;
        if !is_cmis_identifier(id[0]) {
            return Err(DownReason::NotCmis { identifier: id[0] });
        }
        self.select_page(delay, 0x00)
            .map_err(|()| DownReason::ModuleLost)?;
        let mut name = [0u8; 16];
        let mut pn = [0u8; 16];
        let mut sn = [0u8; 16];
        self.read(delay, 129, &mut name)
            .and_then(|()| self.read(delay, 148, &mut pn))
            .and_then(|()| self.read(delay, 166, &mut sn))
            .map_err(|()| DownReason::ModuleLost)?;
        Ok(ModuleIdentity {
            identifier: id[0],
            cmis_revision: id[1],
            vendor_name: Ascii16(name),
            vendor_pn: Ascii16(pn),
            vendor_sn: Ascii16(sn),
        })
    }

    /// The link state now: `Ok(())` when up, else why it is down.
    pub fn link_state(&mut self, delay: &mut impl DelayNs) -> Result<(), DownReason> {
        let mut lower = [0u8; 4];
        self.read(delay, 0, &mut lower)
            .map_err(|()| DownReason::ModuleLost)?;
        if !is_cmis_identifier(lower[0]) {
            return Err(DownReason::NotCmis {
                identifier: lower[0],
            });
        }
        match ModuleState::from_byte(lower[3]) {
            ModuleState::Ready => {}
            s => return Err(DownReason::NotReady(s)),
        }
        self.select_page(delay, 0x11)
            .map_err(|()| DownReason::ModuleLost)?;
        let mut tx_fault = [0u8; 1];
        let mut rx = [0u8; 2];
        self.read(delay, 135, &mut tx_fault)
            .and_then(|()| self.read(delay, 147, &mut rx))
            .map_err(|()| DownReason::ModuleLost)?;
        let m = self.lanes_mask;
        if tx_fault[0] & m != 0 {
            return Err(DownReason::TxFault {
                lanes: tx_fault[0] & m,
            });
        }
        if rx[0] & m != 0 {
            return Err(DownReason::RxLos { lanes: rx[0] & m });
        }
        if rx[1] & m != 0 {
            return Err(DownReason::RxLol { lanes: rx[1] & m });
        }
        Ok(())
    }

    /// The cage says no module is seated (its presence pin): the link is down for
    /// [`DownReason::ModuleLost`] without a transfer on the bus. An event when the link was
    /// not already down (or its state was unknown).
    pub fn lost(&mut self) -> Option<PortEvent> {
        if self.up == Some(false) {
            return None;
        }
        self.up = Some(false);
        self.counters.downs = self.counters.downs.saturating_add(1);
        Some(PortEvent::Down {
            port: self.port,
            reason: DownReason::ModuleLost,
        })
    }

    /// Poll the module; an event when the link changed since the last poll (the first poll
    /// always reports).
    pub fn poll(&mut self, delay: &mut impl DelayNs) -> Option<PortEvent> {
        self.counters.polls = self.counters.polls.saturating_add(1);
        let state = self.link_state(delay);
        let up = state.is_ok();
        if self.up == Some(up) {
            return None;
        }
        self.up = Some(up);
        Some(match state {
            Ok(()) => {
                self.counters.ups = self.counters.ups.saturating_add(1);
                PortEvent::Up { port: self.port }
            }
            Err(reason) => {
                self.counters.downs = self.counters.downs.saturating_add(1);
                PortEvent::Down {
                    port: self.port,
                    reason,
                }
            }
        })
    }
}

#[cfg(test)]
#[path = "cmis_tests.rs"]
mod tests;
