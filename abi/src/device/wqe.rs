//! Work queue entries: what the host writes into its send and receive rings.
//!
//! A [`SendWqe`] (64 B) asks for one RDMA Write or Write-with-Immediate of up to
//! [`MAX_SEND_SGE`] local scatter-gather entries to one remote virtual address. A [`RecvWqe`]
//! (32 B) pre-posts a receive that a Write-with-Immediate consumes: the data lands by RETH, the
//! receive only carries the `wr_id` the completion returns (MRC has no RNR: a Write-with-Immediate
//! without a posted receive is a fatal `NO_RECV_BUFFER` error for the QP).

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::all_zero;

/// Scatter-gather entries inline in a send WQE.
pub const MAX_SEND_SGE: usize = 2;

/// Send WQE opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum SendOpcode {
    /// RDMA Write.
    Write = 1,
    /// RDMA Write with Immediate: consumes a receive at the responder.
    WriteImm = 2,
}

impl SendOpcode {
    /// The opcode with code `v`, if any.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Write),
            2 => Some(Self::WriteImm),
            _ => None,
        }
    }
}

/// Send WQE flag: write a completion when the request completes (errors always complete).
pub const SEND_SIGNALED: u8 = 1 << 0;
/// Send WQE flag: set SE in the last packet (the responder's completion is solicited).
pub const SEND_SOLICITED: u8 = 1 << 1;
/// Send WQE flag: start only after every earlier request of the QP has completed.
pub const SEND_FENCE: u8 = 1 << 2;
/// Every defined send flag.
pub const SEND_FLAGS_ALL: u8 = SEND_SIGNALED | SEND_SOLICITED | SEND_FENCE;

le_struct! {
/// One local buffer: `len` bytes at `addr` in memory region `lkey`. 16 bytes.
pub struct Sge {
    /// Virtual address (in the MR's address space).
    pub addr: U64,
    /// Length in bytes.
    pub len: U32,
    /// Local key of the memory region.
    pub lkey: U32,
}
}

impl Sge {
    /// An SGE from plain numbers.
    pub fn new(addr: u64, len: u32, lkey: u32) -> Self {
        Sge {
            addr: addr.into(),
            len: len.into(),
            lkey: lkey.into(),
        }
    }
}

le_struct! {
/// The send WQE as laid out in the ring, 64 bytes.
pub struct SendWqe {
    /// [`SendOpcode`].
    pub opcode: u8,
    /// `SEND_*` flags.
    pub flags: u8,
    /// Valid entries in `sge`.
    pub num_sge: u8,
    /// Reserved (0).
    pub rsvd: u8,
    /// Immediate data (WRITE_IMM; 0 for WRITE).
    pub imm: U32,
    /// Caller's id, returned in the completion.
    pub wr_id: U64,
    /// Remote virtual address.
    pub remote_va: U64,
    /// Remote key.
    pub rkey: U32,
    /// Total bytes: the sum of the valid SGE lengths.
    pub total_len: U32,
    /// Scatter-gather list; unused entries are 0.
    pub sge: [Sge; MAX_SEND_SGE],
}
}

le_struct! {
/// The receive WQE as laid out in the ring, 32 bytes.
pub struct RecvWqe {
    /// Caller's id, returned in the completion.
    pub wr_id: U64,
    /// Reserved (0).
    pub rsvd: [u8; 24],
}
}

const _: () = {
    assert!(size_of::<Sge>() == 16);
    assert!(size_of::<SendWqe>() == 64);
    assert!(offset_of!(SendWqe, imm) == 4);
    assert!(offset_of!(SendWqe, wr_id) == 8);
    assert!(offset_of!(SendWqe, remote_va) == 16);
    assert!(offset_of!(SendWqe, rkey) == 24);
    assert!(offset_of!(SendWqe, total_len) == 28);
    assert!(offset_of!(SendWqe, sge) == 32);
    assert!(size_of::<RecvWqe>() == 32);
};

/// Why a WQE is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WqeError {
    /// Unknown opcode.
    UnknownOpcode(u8),
    /// Undefined flag bits set (the value is the offending bits).
    BadFlags(u8),
    /// More SGEs than [`MAX_SEND_SGE`].
    TooManySges(u8),
    /// `total_len` is not the sum of the SGE lengths (or the sum overflows 32 bits).
    LengthMismatch,
    /// Immediate data in a WRITE, or a reserved byte or unused SGE is not zero.
    ReservedSet,
    /// The buffer is shorter than the WQE.
    Truncated,
}

/// A validated send request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendRequest {
    /// Caller's id.
    pub wr_id: u64,
    /// Write, or Write-with-Immediate with its immediate data.
    pub imm: Option<u32>,
    /// `SEND_*` flags.
    pub flags: u8,
    /// Remote virtual address.
    pub remote_va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Local buffers.
    pub sges: heapless::Vec<Sge, MAX_SEND_SGE>,
}

impl SendRequest {
    /// The opcode this request uses.
    pub fn opcode(&self) -> SendOpcode {
        if self.imm.is_some() {
            SendOpcode::WriteImm
        } else {
            SendOpcode::Write
        }
    }

    /// Total bytes, or `None` if the SGE lengths overflow 32 bits.
    pub fn total_len(&self) -> Option<u32> {
        self.sges
            .iter()
            .try_fold(0u32, |a, s| a.checked_add(s.len.get()))
    }

    /// The ring entry.
    ///
    /// # Errors
    /// [`WqeError::BadFlags`] or [`WqeError::LengthMismatch`] (lengths overflow).
    pub fn encode(&self) -> Result<SendWqe, WqeError> {
        if self.flags & !SEND_FLAGS_ALL != 0 {
            return Err(WqeError::BadFlags(self.flags & !SEND_FLAGS_ALL));
        }
        let total = self.total_len().ok_or(WqeError::LengthMismatch)?;
        let mut sge = [Sge::new_zeroed(); MAX_SEND_SGE];
        sge[..self.sges.len()].copy_from_slice(&self.sges);
        Ok(SendWqe {
            opcode: self.opcode() as u8,
            flags: self.flags,
            num_sge: self.sges.len() as u8,
            rsvd: 0,
            imm: self.imm.unwrap_or(0).into(),
            wr_id: self.wr_id.into(),
            remote_va: self.remote_va.into(),
            rkey: self.rkey.into(),
            total_len: total.into(),
            sge,
        })
    }
}

impl SendWqe {
    /// The WQE at the start of `bytes`.
    ///
    /// # Errors
    /// [`WqeError::Truncated`].
    pub fn ref_from(bytes: &[u8]) -> Result<&Self, WqeError> {
        Self::ref_from_prefix(bytes)
            .map(|(w, _)| w)
            .map_err(|_| WqeError::Truncated)
    }

    /// Checks every field and returns the request.
    ///
    /// # Errors
    /// See [`WqeError`].
    pub fn decode(&self) -> Result<SendRequest, WqeError> {
        let opcode =
            SendOpcode::from_u8(self.opcode).ok_or(WqeError::UnknownOpcode(self.opcode))?;
        if self.flags & !SEND_FLAGS_ALL != 0 {
            return Err(WqeError::BadFlags(self.flags & !SEND_FLAGS_ALL));
        }
        let n = self.num_sge as usize;
        if n > MAX_SEND_SGE {
            return Err(WqeError::TooManySges(self.num_sge));
        }
        if self.rsvd != 0
            || (opcode == SendOpcode::Write && self.imm.get() != 0)
            || !all_zero(self.sge[n..].as_bytes())
        {
            return Err(WqeError::ReservedSet);
        }
        let mut sges = heapless::Vec::new();
        for s in &self.sge[..n] {
            // Cannot fail: n <= MAX_SEND_SGE.
            let _ = sges.push(*s);
        }
        let req = SendRequest {
            wr_id: self.wr_id.get(),
            imm: (opcode == SendOpcode::WriteImm).then_some(self.imm.get()),
            flags: self.flags,
            remote_va: self.remote_va.get(),
            rkey: self.rkey.get(),
            sges,
        };
        if req.total_len() != Some(self.total_len.get()) {
            return Err(WqeError::LengthMismatch);
        }
        Ok(req)
    }
}

impl RecvWqe {
    /// A receive WQE.
    pub fn new(wr_id: u64) -> Self {
        RecvWqe {
            wr_id: wr_id.into(),
            rsvd: [0; 24],
        }
    }

    /// The `wr_id` of a well-formed receive WQE.
    ///
    /// # Errors
    /// [`WqeError::ReservedSet`].
    pub fn decode(&self) -> Result<u64, WqeError> {
        if !all_zero(&self.rsvd) {
            return Err(WqeError::ReservedSet);
        }
        Ok(self.wr_id.get())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn byte_literal_send() {
        let mut sges = heapless::Vec::new();
        sges.push(Sge::new(0x1000, 0x100, 7)).unwrap();
        let req = SendRequest {
            wr_id: 0x1122_3344_5566_7788,
            imm: Some(0xAABB_CCDD),
            flags: SEND_SIGNALED,
            remote_va: 0x2000,
            rkey: 9,
            sges,
        };
        let w = req.encode().unwrap();
        let b = w.as_bytes();
        assert_eq!(&b[..8], &[2, 1, 1, 0, 0xDD, 0xCC, 0xBB, 0xAA]);
        assert_eq!(&b[8..16], &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        assert_eq!(&b[24..32], &[9, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(
            &b[32..48],
            &[0, 0x10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 7, 0, 0, 0]
        );
        assert_eq!(SendWqe::ref_from(b).unwrap().decode().unwrap(), req);

        let mut bad = w;
        bad.opcode = 9;
        assert_eq!(bad.decode(), Err(WqeError::UnknownOpcode(9)));
        let mut bad = w;
        bad.num_sge = 3;
        assert_eq!(bad.decode(), Err(WqeError::TooManySges(3)));
        let mut bad = w;
        bad.flags = 0x81;
        assert_eq!(bad.decode(), Err(WqeError::BadFlags(0x80)));
        let mut bad = w;
        bad.total_len = 1.into();
        assert_eq!(bad.decode(), Err(WqeError::LengthMismatch));
        assert_eq!(SendWqe::ref_from(&b[..63]), Err(WqeError::Truncated));
    }

    fn sge() -> impl Strategy<Value = Sge> {
        (any::<u64>(), 0u32..1 << 30, any::<u32>()).prop_map(|(a, l, k)| Sge::new(a, l, k))
    }

    pub(crate) fn send_request() -> impl Strategy<Value = SendRequest> {
        (
            any::<u64>(),
            any::<Option<u32>>(),
            0..=SEND_FLAGS_ALL,
            any::<u64>(),
            any::<u32>(),
            proptest::collection::vec(sge(), 0..=MAX_SEND_SGE),
        )
            .prop_map(|(wr_id, imm, flags, remote_va, rkey, v)| SendRequest {
                wr_id,
                imm,
                flags,
                remote_va,
                rkey,
                sges: v.into_iter().collect(),
            })
    }

    proptest! {
        #[test]
        fn send_round_trip(req in send_request()) {
            prop_assert_eq!(req.encode().unwrap().decode(), Ok(req));
        }

        #[test]
        fn recv_round_trip(wr_id: u64) {
            prop_assert_eq!(RecvWqe::new(wr_id).decode(), Ok(wr_id));
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::array::uniform32(any::<u8>()), c in proptest::array::uniform32(any::<u8>())) {
            let mut all = [0u8; 64];
            all[..32].copy_from_slice(&b);
            all[32..].copy_from_slice(&c);
            if let Ok(req) = SendWqe::ref_from(&all).unwrap().decode() {
                let enc = req.encode().unwrap();
                prop_assert_eq!(enc.as_bytes(), &all[..]);
            }
            let _ = RecvWqe::read_from_bytes(&b).unwrap().decode();
        }
    }
}
