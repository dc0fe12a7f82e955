//! Completion queue entries, 32 bytes, written by the device into a CQ ring.
//!
//! Ownership uses a phase bit: the host zeroes the ring; on pass `p` over the ring (`p = index >>
//! log2_entries`) the device writes entries with `OWNER` = [`expected_owner`]`(index)`, so an
//! entry is new exactly when its owner bit equals the value expected for the host's consumer
//! index. The host reads the rest of the entry only after it saw the owner bit (acquire order).

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U16, U32, U64};

use super::QPN_LIMIT;

/// Completion status. 0 is success; every other value is an error and the QP (or, for
/// `WrFlushed`, the flushed request) failed for the reason named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum CqeStatus {
    /// The request completed.
    Success = 0,
    /// Local length error (SGE lengths or a message larger than the device supports).
    LocalLength = 1,
    /// Local QP operation error (internal consistency of the QP).
    LocalQpOperation = 2,
    /// Local protection error: an SGE's lkey or range is not valid for this PD.
    LocalProtection = 3,
    /// The request was flushed because the QP entered ERROR.
    WrFlushed = 4,
    /// Local access error (a DMA read of a source buffer failed).
    LocalAccess = 5,
    /// The responder reported a bad rkey or an access outside its region (NACK REMOTE_ACCESS).
    RemoteAccess = 6,
    /// The responder reported a length mismatch (NACK LENGTH).
    RemoteLength = 7,
    /// The responder had no posted receive for a Write-with-Immediate (NACK NO_RECV_BUFFER).
    RemoteNoRecvBuffer = 8,
    /// The responder rejected the request (NACK INVALID_QP or TOO_MANY_WIMM).
    RemoteInvalidRequest = 9,
    /// The retry count was exceeded without an acknowledgement.
    RetryExceeded = 10,
    /// The responder's receive queue overflowed or a receive could not be matched.
    RecvQueueOverflow = 11,
    /// A fatal device error.
    Fatal = 12,
}

impl CqeStatus {
    /// Every status, in code order.
    pub const ALL: [CqeStatus; 13] = [
        Self::Success,
        Self::LocalLength,
        Self::LocalQpOperation,
        Self::LocalProtection,
        Self::WrFlushed,
        Self::LocalAccess,
        Self::RemoteAccess,
        Self::RemoteLength,
        Self::RemoteNoRecvBuffer,
        Self::RemoteInvalidRequest,
        Self::RetryExceeded,
        Self::RecvQueueOverflow,
        Self::Fatal,
    ];

    /// The status with code `v`, if any.
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.get(v as usize).copied()
    }
}

/// What completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum CqeOpcode {
    /// A send-side RDMA Write.
    Write = 1,
    /// A send-side RDMA Write with Immediate.
    WriteImm = 2,
    /// A receive consumed by an incoming Write with Immediate (`imm` valid).
    RecvWriteImm = 3,
}

impl CqeOpcode {
    /// The opcode with code `v`, if any.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Write),
            2 => Some(Self::WriteImm),
            3 => Some(Self::RecvWriteImm),
            _ => None,
        }
    }
}

/// CQE flag: owner (phase) bit.
pub const CQE_OWNER: u8 = 1 << 0;
/// CQE flag: the incoming Write-with-Immediate had SE set.
pub const CQE_SOLICITED: u8 = 1 << 1;

le_struct! {
/// The CQE as laid out in the ring, 32 bytes.
pub struct Cqe {
    /// The `wr_id` of the completed WQE.
    pub wr_id: U64,
    /// Bytes transferred (send: total length; receive: bytes of the message placed).
    pub byte_len: U32,
    /// Immediate data (RECV_WRITE_IMM only, else 0).
    pub imm: U32,
    /// Local QP number (24 bits; bits 31:24 are 0).
    pub qpn: U32,
    /// [`CqeStatus`].
    pub status: u8,
    /// [`CqeOpcode`].
    pub opcode: u8,
    /// `CQE_*` flags.
    pub flags: u8,
    /// Reserved (0).
    pub rsvd: u8,
    /// Index of the completed WQE in its ring (low 16 bits).
    pub wqe_index: U16,
    /// Reserved (0).
    pub rsvd2: U16,
    /// Vendor syndrome: more detail for errors (e.g. the NACK reason), 0 on success.
    pub syndrome: U32,
}
}

const _: () = {
    assert!(size_of::<Cqe>() == 32);
    assert!(offset_of!(Cqe, byte_len) == 8);
    assert!(offset_of!(Cqe, imm) == 12);
    assert!(offset_of!(Cqe, qpn) == 16);
    assert!(offset_of!(Cqe, status) == 20);
    assert!(offset_of!(Cqe, flags) == 22);
    assert!(offset_of!(Cqe, wqe_index) == 24);
    assert!(offset_of!(Cqe, syndrome) == 28);
};

/// The owner bit the device writes (and the host expects) at free-running ring index `index`.
pub const fn expected_owner(index: u32, log2_entries: u8) -> bool {
    let pass = if log2_entries >= 32 {
        0
    } else {
        index >> log2_entries
    };
    pass & 1 == 0
}

/// Why a CQE is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CqeError {
    /// Unknown status code.
    UnknownStatus(u8),
    /// Unknown opcode.
    UnknownOpcode(u8),
    /// QPN does not fit in 24 bits.
    BadQpn(u32),
    /// Undefined flag bits, a reserved field, or immediate data on a non-receive completion.
    ReservedSet,
}

/// A validated completion (without the owner bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Completion {
    /// The `wr_id` of the completed WQE.
    pub wr_id: u64,
    /// Status.
    pub status: CqeStatus,
    /// What completed.
    pub opcode: CqeOpcode,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate data (only for [`CqeOpcode::RecvWriteImm`]).
    pub imm: Option<u32>,
    /// Local QP number (< 2^24).
    pub qpn: u32,
    /// Index of the WQE in its ring (low 16 bits).
    pub wqe_index: u16,
    /// The incoming Write-with-Immediate was solicited.
    pub solicited: bool,
    /// Error detail.
    pub syndrome: u32,
}

impl Completion {
    /// The ring entry with owner bit `owner`.
    ///
    /// # Errors
    /// [`CqeError::BadQpn`], or [`CqeError::ReservedSet`] when `imm` is set on a send completion.
    pub fn encode(&self, owner: bool) -> Result<Cqe, CqeError> {
        if self.qpn >= QPN_LIMIT {
            return Err(CqeError::BadQpn(self.qpn));
        }
        if self.imm.is_some() != (self.opcode == CqeOpcode::RecvWriteImm) {
            return Err(CqeError::ReservedSet);
        }
        let flags =
            if owner { CQE_OWNER } else { 0 } | if self.solicited { CQE_SOLICITED } else { 0 };
        Ok(Cqe {
            wr_id: self.wr_id.into(),
            byte_len: self.byte_len.into(),
            imm: self.imm.unwrap_or(0).into(),
            qpn: self.qpn.into(),
            status: self.status as u8,
            opcode: self.opcode as u8,
            flags,
            rsvd: 0,
            wqe_index: self.wqe_index.into(),
            rsvd2: 0.into(),
            syndrome: self.syndrome.into(),
        })
    }
}

impl Cqe {
    /// The owner (phase) bit.
    pub const fn owner(&self) -> bool {
        self.flags & CQE_OWNER != 0
    }

    /// Checks every field and returns the completion.
    ///
    /// # Errors
    /// See [`CqeError`].
    pub fn decode(&self) -> Result<Completion, CqeError> {
        let status = CqeStatus::from_u8(self.status).ok_or(CqeError::UnknownStatus(self.status))?;
        let opcode = CqeOpcode::from_u8(self.opcode).ok_or(CqeError::UnknownOpcode(self.opcode))?;
        if self.qpn.get() >= QPN_LIMIT {
            return Err(CqeError::BadQpn(self.qpn.get()));
        }
        let is_recv = opcode == CqeOpcode::RecvWriteImm;
        if self.flags & !(CQE_OWNER | CQE_SOLICITED) != 0
            || self.rsvd != 0
            || self.rsvd2.get() != 0
            || (!is_recv && self.imm.get() != 0)
        {
            return Err(CqeError::ReservedSet);
        }
        Ok(Completion {
            wr_id: self.wr_id.get(),
            status,
            opcode,
            byte_len: self.byte_len.get(),
            imm: is_recv.then_some(self.imm.get()),
            qpn: self.qpn.get(),
            wqe_index: self.wqe_index.get(),
            solicited: self.flags & CQE_SOLICITED != 0,
            syndrome: self.syndrome.get(),
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use zerocopy::{FromBytes, IntoBytes};

    #[test]
    fn byte_literal() {
        let c = Completion {
            wr_id: 5,
            status: CqeStatus::RetryExceeded,
            opcode: CqeOpcode::WriteImm,
            byte_len: 4096,
            imm: None,
            qpn: 0x12_3456,
            wqe_index: 3,
            solicited: false,
            syndrome: 0,
        };
        let e = c.encode(true).unwrap();
        assert_eq!(
            e.as_bytes(),
            &[
                5, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0x56, 0x34, 0x12, 0, 10, 2, 1,
                0, 3, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        assert!(e.owner());
        assert_eq!(e.decode(), Ok(c));
        let mut bad = e;
        bad.status = 200;
        assert_eq!(bad.decode(), Err(CqeError::UnknownStatus(200)));
        assert!(expected_owner(0, 4) && !expected_owner(16, 4) && expected_owner(32, 4));
    }

    pub(crate) fn completion() -> impl Strategy<Value = Completion> {
        (
            any::<u64>(),
            proptest::sample::select(&CqeStatus::ALL[..]),
            1u8..=3,
            any::<u32>(),
            any::<u32>(),
            0..QPN_LIMIT,
            any::<u16>(),
            any::<bool>(),
            any::<u32>(),
        )
            .prop_map(
                |(wr_id, status, op, byte_len, imm, qpn, wqe_index, solicited, syndrome)| {
                    let opcode = CqeOpcode::from_u8(op).unwrap();
                    Completion {
                        wr_id,
                        status,
                        opcode,
                        byte_len,
                        imm: (opcode == CqeOpcode::RecvWriteImm).then_some(imm),
                        qpn,
                        wqe_index,
                        solicited,
                        syndrome,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn round_trip(c in completion(), owner: bool) {
            let e = c.encode(owner).unwrap();
            prop_assert_eq!(e.owner(), owner);
            prop_assert_eq!(e.decode(), Ok(c));
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::array::uniform32(any::<u8>())) {
            let e = Cqe::read_from_bytes(&b).unwrap();
            if let Ok(c) = e.decode() {
                let enc = c.encode(e.owner()).unwrap();
                prop_assert_eq!(enc.as_bytes(), &b[..]);
            }
        }
    }
}
