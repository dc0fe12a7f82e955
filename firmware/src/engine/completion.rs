//! Completions: what the firmware tells the host about its work requests, as values and as the
//! `Complete` CSR entries the host interface turns into CQEs. The firmware writes these for
//! errors (flushes, fatal NACKs, retry exhaustion) and received immediates; a successful send
//! is completed by the datapath from its send queue on the firmware's `CompleteSends` order,
//! as the same entry (or as a `PostCqe`, when the NIC loop gave the order the QP's CQ).

use mrc_abi::device::csr::{self, Complete, CsrEntry, CsrEvent};
use mrc_abi::wire::NackReason;

/// Why a work request completed in error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CompletionError {
    /// The retry budget ran out.
    RetryExceeded,
    /// The peer NACKed with a fatal reason.
    RemoteNack(NackReason),
    /// This QP detected a fatal error on a received packet.
    LocalQpError(NackReason),
    /// Flushed because the QP entered ERROR.
    Flushed,
}

/// What completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CompletionKind {
    /// A send work request (Write or Write-with-Immediate).
    Send,
    /// A receive buffer consumed by an incoming Write-with-Immediate.
    RecvImm {
        /// The immediate data.
        imm: u32,
        /// The message's MSN.
        msn: u16,
    },
    /// A receive buffer flushed (status is an error).
    Recv,
}

/// A completion queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Completion {
    pub qpn: u32,
    pub wr_id: u64,
    pub kind: CompletionKind,
    pub status: Result<(), CompletionError>,
}

impl Completion {
    /// The `Complete` entry for this completion.
    pub fn to_entry(&self) -> CsrEntry {
        let (opcode, imm, msn) = match self.kind {
            CompletionKind::Send => (csr::opcode::SEND, 0, 0),
            CompletionKind::RecvImm { imm, msn } => (csr::opcode::RECV_IMM, imm, msn),
            CompletionKind::Recv => (csr::opcode::RECV, 0, 0),
        };
        let (status, reason) = match self.status {
            Ok(()) => (csr::status::OK, 0),
            Err(CompletionError::RetryExceeded) => (csr::status::RETRY_EXCEEDED, 0),
            Err(CompletionError::RemoteNack(r)) => (csr::status::REMOTE_NACK, r as u8),
            Err(CompletionError::LocalQpError(r)) => (csr::status::LOCAL_QP_ERROR, r as u8),
            Err(CompletionError::Flushed) => (csr::status::FLUSHED, 0),
        };
        // An error completion carries no immediate.
        let (imm, msn) = if self.status.is_ok() {
            (imm, msn)
        } else {
            (0, 0)
        };
        let opcode = if self.status.is_err() && opcode == csr::opcode::RECV_IMM {
            csr::opcode::RECV
        } else {
            opcode
        };
        CsrEvent::Complete(Complete::new(
            self.qpn, self.wr_id, opcode, status, reason, imm, msn,
        ))
        .encode()
    }

    /// The completion a `Complete` entry carries (`None` for other kinds or malformed ones).
    pub fn from_entry(e: &CsrEntry) -> Option<Completion> {
        let Ok(CsrEvent::Complete(c)) = e.decode() else {
            return None;
        };
        Self::from_complete(&c)
    }

    /// The completion of a decoded `Complete` entry.
    pub fn from_complete(c: &Complete) -> Option<Completion> {
        let reason = || NackReason::from_u8(c.reason).ok();
        let status = match c.status {
            csr::status::OK => Ok(()),
            csr::status::RETRY_EXCEEDED => Err(CompletionError::RetryExceeded),
            csr::status::REMOTE_NACK => Err(CompletionError::RemoteNack(reason()?)),
            csr::status::LOCAL_QP_ERROR => Err(CompletionError::LocalQpError(reason()?)),
            csr::status::FLUSHED => Err(CompletionError::Flushed),
            _ => return None,
        };
        let kind = match c.opcode {
            csr::opcode::SEND => CompletionKind::Send,
            csr::opcode::RECV_IMM => CompletionKind::RecvImm {
                imm: c.imm.get(),
                msn: c.msn.get(),
            },
            csr::opcode::RECV => CompletionKind::Recv,
            _ => return None,
        };
        Some(Completion {
            qpn: c.qpn.get(),
            wr_id: c.wr_id.get(),
            kind,
            status,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_completion_survives_its_entry() {
        let cases = [
            (CompletionKind::Send, Ok(())),
            (
                CompletionKind::RecvImm {
                    imm: 0xfeed,
                    msn: 7,
                },
                Ok(()),
            ),
            (CompletionKind::Send, Err(CompletionError::RetryExceeded)),
            (
                CompletionKind::Send,
                Err(CompletionError::RemoteNack(NackReason::RemoteAccess)),
            ),
            (
                CompletionKind::Recv,
                Err(CompletionError::LocalQpError(NackReason::NoRecvBuffer)),
            ),
            (CompletionKind::Recv, Err(CompletionError::Flushed)),
        ];
        for (kind, status) in cases {
            let c = Completion {
                qpn: 0x12_3456,
                wr_id: u64::MAX - 3,
                kind,
                status,
            };
            assert_eq!(Completion::from_entry(&c.to_entry()), Some(c));
        }
    }
}
