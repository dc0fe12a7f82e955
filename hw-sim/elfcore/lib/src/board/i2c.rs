//! The transceiver management I2C controller (`mrc_abi::device::i2c`) and the module in each
//! port's cage (`mrc_nic_board::cmis_model::CmisModule`), as the image's `hal` drives them.
//!
//! A command runs on the modules at once and keeps the controller BUSY for its bus time
//! ([`mrc_abi::device::i2c::command_bits`] bit times at [`BUS_KHZ`]) on the controller's
//! clock, which, as the flash controller's, is the iteration's time advanced
//! [`ACCESS_NS`] per register access: a driver polling BUSY sees the
//! command finish. The data buffer holds a read's bytes as soon as the command was taken
//! (a real controller fills it while BUSY; a driver reads it after BUSY clears either way).
//!
//! The cage pins ([`I2cRegs::modules`](mrc_abi::device::i2c::I2cRegs)) follow the modules:
//! presence, and `IntL` while a module holds a latched flag. The simulator changes the modules
//! ([`I2cController::module_mut`]: pull, insert, loss of signal) between iterations.

use mrc_abi::device::i2c::{cmd, command_bits, reg, status, ErrCause, DATA_BYTES};
use mrc_nic_board::cmis::MODULE_ADDR;
use mrc_nic_board::cmis_model::CmisModule;

use super::flash::ACCESS_NS;

/// The bus clock, kHz (Fast-mode Plus, which CMIS modules may support; 400 kHz is the
/// mandatory rate).
pub const BUS_KHZ: u32 = 1000;

/// Counters of the controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct I2cCounters {
    /// Commands taken (failed ones included).
    pub commands: u64,
    /// Commands that ended in an address or data NACK.
    pub nacks: u64,
    /// Commands refused (busy, malformed).
    pub refused: u64,
    /// Reads of the cage pins.
    pub pin_reads: u64,
    /// Bytes moved on the bus (address bytes included).
    pub bus_bytes: u64,
}

/// The controller and its cages.
#[derive(Clone, Debug)]
pub struct I2cController {
    modules: Vec<CmisModule>,
    addr: u32,
    status: u32,
    err_cause: u32,
    port_select: u32,
    /// The open transfer: its direction (`true`: reading) and port.
    open: Option<(bool, u32)>,
    busy_until_ns: u64,
    clock_ns: u64,
    data: [u8; DATA_BYTES as usize],
    counters: I2cCounters,
}

impl I2cController {
    /// The controller with `ports` cages, each holding a seated module (serials `MRC-P<i>`).
    pub fn new(ports: usize) -> Self {
        I2cController {
            modules: (0..ports)
                .map(|p| CmisModule::seated(&format!("MRC-P{p}")))
                .collect(),
            addr: 0,
            status: 0,
            err_cause: 0,
            port_select: 0,
            open: None,
            busy_until_ns: 0,
            clock_ns: 0,
            data: [0; DATA_BYTES as usize],
            counters: I2cCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> I2cCounters {
        self.counters
    }

    /// Ports (cages).
    pub fn ports(&self) -> usize {
        self.modules.len()
    }

    /// Port `p`'s module.
    pub fn module(&self, p: usize) -> Option<&CmisModule> {
        self.modules.get(p)
    }

    /// Port `p`'s module, to pull, seat or give loss of signal.
    pub fn module_mut(&mut self, p: usize) -> Option<&mut CmisModule> {
        self.modules.get_mut(p)
    }

    /// Carries the modules over from the controller before a core reset (they are in their
    /// cages, not in the core); the controller's own registers start over.
    pub(crate) fn keep_modules(&mut self, old: &mut I2cController) {
        self.modules = std::mem::take(&mut old.modules);
        self.clock_ns = old.clock_ns;
        self.counters = old.counters;
    }

    fn tick(&mut self, now_ns: u64) -> u64 {
        self.clock_ns = self.clock_ns.max(now_ns) + ACCESS_NS;
        self.clock_ns
    }

    fn pins(&self) -> u32 {
        let mut v = 0;
        for (p, m) in self.modules.iter().enumerate().take(8) {
            if m.present() {
                v |= 1 << p;
            }
            if m.interrupt() {
                v |= 1 << (8 + p);
            }
        }
        v
    }

    /// A guest read of the register at block offset `o`, at the iteration's time `now_ns`.
    pub fn read_reg(&mut self, now_ns: u64, o: u32) -> Option<u32> {
        let t = self.tick(now_ns);
        Some(match o {
            reg::ADDR => self.addr,
            reg::STATUS => {
                let busy = if t < self.busy_until_ns {
                    status::BUSY
                } else {
                    0
                };
                let open = if self.open.is_some() {
                    status::IN_TRANSFER
                } else {
                    0
                };
                self.status | busy | open
            }
            reg::ERR_CAUSE => self.err_cause,
            reg::PORT_SELECT => self.port_select,
            reg::MODULES => {
                self.counters.pin_reads += 1;
                self.pins()
            }
            reg::BUS_KHZ => BUS_KHZ,
            reg::COMMANDS => self.counters.commands as u32,
            reg::NACKS => self.counters.nacks as u32,
            o if (reg::DATA..reg::BLOCK_BYTES).contains(&o) && o % 4 == 0 => {
                let i = (o - reg::DATA) as usize;
                u32::from_le_bytes([
                    self.data[i],
                    self.data[i + 1],
                    self.data[i + 2],
                    self.data[i + 3],
                ])
            }
            o if o < reg::BLOCK_BYTES => 0,
            _ => return None,
        })
    }

    /// A guest write of `v` to the register at block offset `o`; `false` for an offset with
    /// no writable register (the window counts it).
    pub fn write_reg(&mut self, now_ns: u64, o: u32, v: u32) -> bool {
        let t = self.tick(now_ns);
        match o {
            reg::CMD => self.command(t, v),
            reg::ADDR => self.addr = v & 0x7F,
            reg::STATUS => {
                if v & status::ERROR != 0 {
                    self.status &= !status::ERROR;
                    self.err_cause = 0;
                }
            }
            reg::PORT_SELECT => self.port_select = v,
            o if (reg::DATA..reg::BLOCK_BYTES).contains(&o) && o % 4 == 0 => {
                let i = (o - reg::DATA) as usize;
                self.data[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => return false,
        }
        true
    }

    fn fail(&mut self, cause: ErrCause) {
        self.status |= status::ERROR;
        self.err_cause = cause as u32;
        // (the controller ends the transfer with a STOP)
        self.open = None;
    }

    fn command(&mut self, t: u64, word: u32) {
        if t < self.busy_until_ns {
            self.counters.refused += 1;
            self.status |= status::ERROR;
            self.err_cause = ErrCause::Busy as u32;
            return;
        }
        self.counters.commands += 1;
        let reading = word & cmd::OP_MASK == cmd::READ;
        let port = self.port_select;
        let open = self.open.map(|(r, _)| r);
        let bad = ErrCause::check(word, open).is_some()
            || port as usize >= self.modules.len()
            || self
                .open
                .is_some_and(|(_, p)| p != port && word & cmd::START == 0);
        if bad {
            self.counters.refused += 1;
            self.fail(ErrCause::BadCommand);
            return;
        }
        self.busy_until_ns = t + u64::from(command_bits(word)) * 1_000_000 / u64::from(BUS_KHZ);
        let len = ((word >> cmd::LEN_SHIFT) & cmd::LEN_MASK) as usize;
        let m = &mut self.modules[port as usize];
        if word & cmd::START != 0 {
            self.counters.bus_bytes += 1;
            if self.addr != u32::from(MODULE_ADDR) || !m.start() {
                self.counters.nacks += 1;
                self.fail(ErrCause::AddressNack);
                return;
            }
        }
        self.counters.bus_bytes += len as u64;
        for i in 0..len {
            if reading {
                self.data[i] = m.read_byte();
            } else if !m.write_byte(self.data[i]) {
                self.counters.nacks += 1;
                self.fail(ErrCause::DataNack);
                return;
            }
        }
        self.open = (word & cmd::STOP == 0).then_some((reading, port));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_abi::device::i2c::cmd::*;

    fn wait(c: &mut I2cController, now: u64) -> u32 {
        loop {
            let s = c.read_reg(now, reg::STATUS).unwrap();
            if s & status::BUSY == 0 {
                return s;
            }
        }
    }

    /// The CMIS driver's `write_read(0x50, [0], 4 bytes)` as the hal issues it.
    fn read_lower(c: &mut I2cController, port: u32) -> Result<[u8; 4], u32> {
        c.write_reg(0, reg::PORT_SELECT, port);
        c.write_reg(0, reg::ADDR, 0x50);
        c.write_reg(0, reg::DATA, 0);
        c.write_reg(0, reg::CMD, WRITE | START | len(1));
        if wait(c, 0) & status::ERROR != 0 {
            return Err(c.read_reg(0, reg::ERR_CAUSE).unwrap());
        }
        c.write_reg(0, reg::CMD, READ | START | STOP | len(4));
        let s = wait(c, 0);
        assert_eq!(s & status::IN_TRANSFER, 0);
        Ok(c.read_reg(0, reg::DATA).unwrap().to_le_bytes())
    }

    #[test]
    fn commands_reach_the_selected_module_and_take_bus_time() {
        let mut c = I2cController::new(4);
        assert_eq!(c.read_reg(0, reg::BUS_KHZ), Some(1000));
        assert_eq!(c.read_reg(0, reg::MODULES), Some(0x0F));
        let b = read_lower(&mut c, 2).unwrap();
        assert_eq!((b[0], b[3] >> 1 & 7), (0x18, 3), "QSFP-DD, Ready");
        assert_eq!(c.module(2).unwrap().counters().transfers, 2);
        assert_eq!(c.module(1).unwrap().counters().transfers, 0);
        // 1 + 9 + 9 and 1 + 9 + 36 + 1 bit times at 1 MHz: the clock moved at least 66 us.
        assert!(c.clock_ns >= 66_000, "{}", c.clock_ns);
        // A command while busy is refused.
        c.write_reg(0, reg::CMD, WRITE | START | len(1));
        c.write_reg(0, reg::CMD, WRITE | START | len(1));
        assert_eq!(c.read_reg(0, reg::ERR_CAUSE), Some(ErrCause::Busy as u32));
        assert_eq!(c.counters().refused, 1);
    }

    #[test]
    fn a_pulled_module_nacks_and_its_pins_show_it() {
        let mut c = I2cController::new(4);
        c.module_mut(1).unwrap().pull();
        c.module_mut(3).unwrap().set_los(1);
        assert_eq!(c.read_reg(0, reg::MODULES), Some(0b1101 | (0b1000 << 8)));
        assert_eq!(read_lower(&mut c, 1), Err(ErrCause::AddressNack as u32));
        assert_eq!(c.read_reg(0, reg::NACKS), Some(1));
        c.write_reg(0, reg::STATUS, status::ERROR);
        assert_eq!(c.read_reg(0, reg::STATUS), Some(0));
        // Another address NACKs too; a continuation outside a transfer is malformed.
        c.write_reg(0, reg::ADDR, 0x51);
        c.write_reg(0, reg::PORT_SELECT, 0);
        c.write_reg(0, reg::CMD, WRITE | START | len(1));
        wait(&mut c, 0);
        assert_eq!(
            c.read_reg(0, reg::ERR_CAUSE),
            Some(ErrCause::AddressNack as u32)
        );
        c.write_reg(0, reg::STATUS, status::ERROR);
        c.write_reg(0, reg::CMD, READ | len(1));
        assert_eq!(
            c.read_reg(0, reg::ERR_CAUSE),
            Some(ErrCause::BadCommand as u32)
        );
        // A core reset keeps the modules.
        let mut after = I2cController::new(4);
        after.keep_modules(&mut c);
        assert!(!after.module(1).unwrap().present());
    }
}
