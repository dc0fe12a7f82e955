//! What crosses the engine boundary: work requests in, packet descriptors out, completions out.
//!
//! The engine never touches payload bytes. A transmitted write carries a [`LocalBuf`] (where the
//! payload is in host memory); a received write is answered with [`RxVerdict::Place`] (where the
//! payload goes). The caller (the datapath, the simulator, the test kit) moves the bytes. A
//! [`TxPacket`] becomes a wire [`MrcRepr`] with [`TxPacket::to_repr`] when real bytes are wanted.

use mrc_abi::wire::{
    AckRepr, Body, BthRepr, EvFormat, EvxRepr, MrcRepr, MrhRepr, NackReason, NackRepr, Opcode,
    ProbeRepr, RethRepr, Segment, TsxRepr,
};
use mrc_abi::Psn;

/// Where a message's payload is in local memory: an opaque buffer handle (what the host
/// registered, e.g. a DMA region id) and a byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LocalBuf {
    pub handle: u32,
    pub offset: u64,
}

/// A send work request: an RDMA Write, or a Write-with-Immediate when `imm` is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Source of the payload.
    pub local: LocalBuf,
    /// Remote virtual address of the first byte.
    pub remote_va: u64,
    pub rkey: u32,
    /// Message length in bytes.
    pub len: u32,
    /// Immediate data.
    pub imm: Option<u32>,
    /// Report a completion on success (errors are always reported).
    pub signaled: bool,
}

/// Body of an outgoing packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TxBody {
    /// A write packet: where its payload comes from (`local`) and goes (`reth`).
    Write {
        segment: Segment,
        reth: RethRepr,
        local: LocalBuf,
    },
    Ack(AckRepr),
    Nack(NackRepr),
    Probe(ProbeRepr),
    ProbeReply(ProbeRepr),
}

/// One packet the engine wants sent: everything the header builder needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxPacket {
    /// Local QP that sent it.
    pub src_qpn: u32,
    /// BTH destination QP.
    pub dest_qpn: u32,
    /// BTH PSN (data: the packet's PSN; ACK/NACK: the cumulative PSN; probes: 0).
    pub psn: Psn,
    /// MRH message sequence number.
    pub msn: u16,
    pub ev_format: EvFormat,
    /// EV index, plane, EV value.
    pub evx: EvxRepr,
    /// TSX tx timestamp (low 32 bits of `now_ns`).
    pub tx_ts_ns: u32,
    /// TSX echo (ACK/NACK/probe reply), 0 otherwise.
    pub echo_ts_ns: u32,
    /// MRH RETRANSMIT.
    pub retransmit: bool,
    /// BTH A (ack request).
    pub ack_req: bool,
    pub body: TxBody,
}

impl TxPacket {
    /// Filler for unused queue slots and for the packet `Engine::poll_transmit_into` writes
    /// over (a probe to QP 0).
    pub const FILL: TxPacket = TxPacket {
        src_qpn: 0,
        dest_qpn: 0,
        psn: Psn::new(0),
        msn: 0,
        ev_format: EvFormat::Udp,
        evx: EvxRepr {
            ev_index: 0,
            plane: 0,
            ev_value: 0,
        },
        tx_ts_ns: 0,
        echo_ts_ns: 0,
        retransmit: false,
        ack_req: false,
        body: TxBody::Probe(ProbeRepr {
            probe_id: 0,
            ev_index: 0,
            plane: 0,
        }),
    };

    /// The wire opcode.
    pub fn opcode(&self) -> Opcode {
        self.wire_body().opcode()
    }

    /// Payload bytes (RETH DMA length for writes, 0 otherwise).
    #[inline]
    pub fn payload_len(&self) -> u32 {
        match self.body {
            TxBody::Write { reth, .. } => reth.dma_len,
            _ => 0,
        }
    }

    #[inline]
    fn wire_body(&self) -> Body {
        match self.body {
            TxBody::Write { segment, reth, .. } => Body::Write { segment, reth },
            TxBody::Ack(a) => Body::Ack(a),
            TxBody::Nack(n) => Body::Nack(n),
            TxBody::Probe(p) => Body::Probe(p),
            TxBody::ProbeReply(p) => Body::ProbeReply(p),
        }
    }

    /// The MRC headers of this packet (with EVX and TSX), ready for `MrcRepr::emit`.
    #[inline]
    pub fn to_repr(&self) -> MrcRepr {
        let body = self.wire_body();
        MrcRepr {
            bth: BthRepr {
                opcode: body.opcode(),
                se: false,
                pkey: 0xffff,
                fecn: false,
                becn: false,
                dest_qp: self.dest_qpn,
                ack_req: self.ack_req,
                psn: self.psn,
            },
            mrh: MrhRepr {
                ev_format: self.ev_format,
                trimmed: false,
                trimmed_last_hop: false,
                retransmit: self.retransmit,
                msn: self.msn,
            },
            evx: Some(self.evx),
            tsx: Some(TsxRepr {
                tx_ts_ns: self.tx_ts_ns,
                echo_ts_ns: self.echo_ts_ns,
            }),
            body,
        }
    }
}

/// Facts about a received packet that are not in its MRC headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxMeta {
    /// Payload bytes after the MRC headers.
    pub payload_len: u32,
    /// The IPv6 ECN field was CE.
    pub ce: bool,
}

/// Why a received packet was dropped (each has a counter in [`super::EngineCounters`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DropReason {
    /// BTH destination QP unknown.
    UnknownQp,
    /// The QP is not in a state that takes this packet.
    QpNotReady,
    /// Already received (re-ACKed).
    Duplicate,
    /// Trimmed (NACKed).
    Trimmed,
    /// Outside the receive window (NACKed).
    OutOfWindow,
    /// RETH failed the region check (NACKed, QP to ERROR).
    RemoteAccess,
    /// RETH length differs from the payload (NACKed, QP to ERROR).
    Length,
    /// Write-with-Immediate with no receive buffer (NACKed, QP to ERROR).
    NoRecvBuffer,
    /// Too many Write-with-Immediate in flight (NACKed).
    TooManyWimm,
    /// An ACK/NACK/probe reply that did not match anything outstanding.
    Stale,
    /// A packet without the EVX the engine needs.
    MissingEvx,
    /// A packet type a responder/requester does not take (e.g. a probe to an unready QP).
    Unexpected,
}

/// What the engine made of a received packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RxVerdict {
    /// Write the payload (`len` bytes) at byte `offset` of registered region `slot`. Do it
    /// before polling completions: an immediate completion may depend on these bytes.
    Place {
        qpn: u32,
        slot: u16,
        offset: u64,
        len: u32,
    },
    /// Taken (an ACK, NACK, probe or probe reply; or a zero-length write).
    Consumed,
    /// Dropped, counted.
    Dropped(DropReason),
}

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
