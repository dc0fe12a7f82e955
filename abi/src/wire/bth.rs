//! The Base Transport Header (InfiniBand layout) with the MRC opcodes.

use super::field::{need, set_u16, set_u24, u16_at, u24_at};
use super::{Error, Header};
use crate::Psn;

/// Length of the BTH.
pub const HEADER_LEN: usize = 12;
/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// MRC opcodes (InfiniBand manufacturer-specific range).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Opcode {
    /// First packet of a multi-packet write.
    WriteFirst = 0xc0,
    /// Middle packet of a write.
    WriteMiddle = 0xc1,
    /// Last packet of a write.
    WriteLast = 0xc2,
    /// Last packet of a write with immediate.
    WriteLastImm = 0xc3,
    /// Single-packet write.
    WriteOnly = 0xc4,
    /// Single-packet write with immediate.
    WriteOnlyImm = 0xc5,
    /// Acknowledgement with SACK.
    Ack = 0xd0,
    /// Negative acknowledgement.
    Nack = 0xd1,
    /// EV probe.
    EvProbe = 0xd2,
    /// EV probe reply.
    EvProbeReply = 0xd3,
}

impl Opcode {
    /// Every opcode, in code order.
    pub const ALL: [Opcode; 10] = [
        Opcode::WriteFirst,
        Opcode::WriteMiddle,
        Opcode::WriteLast,
        Opcode::WriteLastImm,
        Opcode::WriteOnly,
        Opcode::WriteOnlyImm,
        Opcode::Ack,
        Opcode::Nack,
        Opcode::EvProbe,
        Opcode::EvProbeReply,
    ];

    /// Decode an opcode byte.
    pub fn from_u8(v: u8) -> Result<Self, Error> {
        Opcode::ALL
            .iter()
            .copied()
            .find(|o| *o as u8 == v)
            .ok_or(Error::UnknownOpcode(v))
    }

    /// True for the write opcodes (which carry a RETH).
    pub const fn is_write(self) -> bool {
        (self as u8) <= Opcode::WriteOnlyImm as u8
    }

    /// True for the opcodes that carry ImmDt.
    pub const fn has_imm(self) -> bool {
        matches!(self, Opcode::WriteLastImm | Opcode::WriteOnlyImm)
    }

    /// Upper-case name as WIRE.md spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::WriteFirst => "WRITE_FIRST",
            Opcode::WriteMiddle => "WRITE_MIDDLE",
            Opcode::WriteLast => "WRITE_LAST",
            Opcode::WriteLastImm => "WRITE_LAST_IMM",
            Opcode::WriteOnly => "WRITE_ONLY",
            Opcode::WriteOnlyImm => "WRITE_ONLY_IMM",
            Opcode::Ack => "ACK",
            Opcode::Nack => "NACK",
            Opcode::EvProbe => "EV_PROBE",
            Opcode::EvProbeReply => "EV_PROBE_REPLY",
        }
    }
}

/// A view of a BTH at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct BthPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> BthPacket<T> {
    /// Wrap without checking (see the module's panic contract).
    pub const fn new_unchecked(buffer: T) -> Self {
        BthPacket { buffer }
    }
    /// Wrap after checking the length.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        need(buffer.as_ref(), HEADER_LEN, Header::Bth)?;
        Ok(BthPacket { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Opcode byte.
    pub fn opcode(&self) -> u8 {
        self.b()[0]
    }
    /// Solicited event.
    pub fn se(&self) -> bool {
        self.b()[1] & 0x80 != 0
    }
    /// Migration request bit.
    pub fn m(&self) -> bool {
        self.b()[1] & 0x40 != 0
    }
    /// Pad count.
    pub fn pad_count(&self) -> u8 {
        (self.b()[1] >> 4) & 0x3
    }
    /// Transport header version.
    pub fn tver(&self) -> u8 {
        self.b()[1] & 0xf
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        u16_at(self.b(), 2)
    }
    /// Forward ECN notification.
    pub fn fecn(&self) -> bool {
        self.b()[4] & 0x80 != 0
    }
    /// Backward ECN notification.
    pub fn becn(&self) -> bool {
        self.b()[4] & 0x40 != 0
    }
    /// Destination QP number (24 bits).
    pub fn dest_qp(&self) -> u32 {
        u24_at(self.b(), 5)
    }
    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.b()[8] & 0x80 != 0
    }
    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(u24_at(self.b(), 9))
    }
}

/// The meaning of a BTH. M, pad count and transport version are always 0 in MRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BthRepr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub se: bool,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN notification.
    pub fecn: bool,
    /// Backward ECN notification.
    pub becn: bool,
    /// Destination QP number (24 bits; higher bits are dropped on emit).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl BthRepr {
    /// Parse: the opcode must be an MRC opcode, pad count and version 0.
    pub fn parse<T: AsRef<[u8]>>(p: &BthPacket<T>) -> Result<Self, Error> {
        if p.tver() != 0 || p.pad_count() != 0 {
            return Err(Error::BadBth {
                tver: p.tver(),
                pad_count: p.pad_count(),
            });
        }
        Ok(BthRepr {
            opcode: Opcode::from_u8(p.opcode())?,
            se: p.se(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        })
    }
    /// Write the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut BthPacket<T>) {
        let b = &mut p.buffer.as_mut()[..HEADER_LEN];
        b[0] = self.opcode as u8;
        b[1] = if self.se { 0x80 } else { 0 };
        set_u16(b, 2, self.pkey);
        b[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        set_u24(b, 5, self.dest_qp & 0x00ff_ffff);
        b[8] = u8::from(self.ack_req) << 7;
        set_u24(b, 9, self.psn.value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_literal() {
        let b = [
            0xc5, 0x80, 0xff, 0xff, 0x40, 0x00, 0x00, 0x12, 0x80, 0x00, 0x00, 0x64,
        ];
        let r = BthRepr::parse(&BthPacket::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.opcode, Opcode::WriteOnlyImm);
        assert!(r.se && r.becn && !r.fecn && r.ack_req);
        assert_eq!((r.dest_qp, r.psn.value()), (0x12, 100));
        let mut out = [0u8; 12];
        r.emit(&mut BthPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn rejects_unknown_opcode_and_version() {
        let mut b = [0u8; 12];
        b[0] = 0x04; // RC SEND_ONLY: not MRC
        assert_eq!(
            BthRepr::parse(&BthPacket::new_checked(&b[..]).unwrap()),
            Err(Error::UnknownOpcode(4))
        );
        b[0] = 0xc0;
        b[1] = 0x01;
        assert_eq!(
            BthRepr::parse(&BthPacket::new_checked(&b[..]).unwrap()),
            Err(Error::BadBth {
                tver: 1,
                pad_count: 0
            })
        );
    }
}
