//! What crosses the datapath stage's wire and host boundaries: send work requests in, packet
//! descriptors out and in, placement verdicts out.
//!
//! The stage never touches payload bytes. A transmitted write carries a [`LocalBuf`] (where the
//! payload is in host memory); a received write is answered with [`RxVerdict::Place`] (where the
//! payload goes). The caller (the host interface model, the simulator, the test kit) moves the
//! bytes. A [`Packet`] is everything the header builder needs; it becomes a wire [`MrcRepr`] with
//! [`Packet::to_repr`] and comes back from one with [`Packet::from_repr`].

use mrc_abi::wire::{
    AckRepr, Body, BthRepr, EvFormat, EvxRepr, MrcRepr, MrhRepr, NackRepr, Opcode, ProbeRepr,
    RethRepr, Segment, TsxRepr,
};
use mrc_abi::Psn;

use crate::datapath::ack_gen::TrimMark;

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

/// Body of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PacketBody {
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

/// One packet: the headers the header builder writes, and the marks the fabric may set on the
/// way (trim, CE) with the payload bytes that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Packet {
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
    /// TSX tx timestamp (low 32 bits of the send time in ns).
    pub tx_ts_ns: u32,
    /// TSX echo (ACK/NACK/probe reply), 0 otherwise.
    pub echo_ts_ns: u32,
    /// MRH RETRANSMIT.
    pub retransmit: bool,
    /// BTH A (ack request).
    pub ack_req: bool,
    /// MRH trim flags (set by a switch that cut the payload).
    pub trim: TrimMark,
    /// IPv6 ECN was CE (set by a congested switch).
    pub ce: bool,
    /// Payload bytes carried (the RETH length as sent; 0 once trimmed).
    pub payload_len: u32,
    pub body: PacketBody,
}

impl Packet {
    /// Filler for unused queue slots (a probe to QP 0).
    pub const FILL: Packet = Packet {
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
        trim: TrimMark::None,
        ce: false,
        payload_len: 0,
        body: PacketBody::Probe(ProbeRepr {
            probe_id: 0,
            ev_index: 0,
            plane: 0,
        }),
    };

    /// The wire opcode.
    pub fn opcode(&self) -> Opcode {
        self.wire_body().opcode()
    }

    /// The RETH DMA length of a write, 0 otherwise (what was sent; see `payload_len` for
    /// what arrived).
    #[inline]
    pub fn dma_len(&self) -> u32 {
        match self.body {
            PacketBody::Write { reth, .. } => reth.dma_len,
            _ => 0,
        }
    }

    /// Where a write's payload comes from.
    #[inline]
    pub fn local(&self) -> Option<LocalBuf> {
        match self.body {
            PacketBody::Write { local, .. } => Some(local),
            _ => None,
        }
    }

    /// The switch cut the payload: trim marks set, no payload left.
    #[inline]
    pub fn trim_to(&mut self, mark: TrimMark) {
        self.trim = mark;
        if mark != TrimMark::None {
            self.payload_len = 0;
        }
    }

    #[inline]
    fn wire_body(&self) -> Body {
        match self.body {
            PacketBody::Write { segment, reth, .. } => Body::Write { segment, reth },
            PacketBody::Ack(a) => Body::Ack(a),
            PacketBody::Nack(n) => Body::Nack(n),
            PacketBody::Probe(p) => Body::Probe(p),
            PacketBody::ProbeReply(p) => Body::ProbeReply(p),
        }
    }

    /// The MRC headers of this packet (with EVX and TSX and its trim marks), ready for
    /// `MrcRepr::emit`.
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
                trimmed: self.trim != TrimMark::None,
                trimmed_last_hop: self.trim == TrimMark::TrimmedLastHop,
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

    /// The packet a parsed header set describes, with the payload bytes that followed it and
    /// the IPv6 CE mark. A header without EVX gets EV 0 on plane 0 (the receive path counts
    /// it); a write's `local` is unknown at the receiver (zero); `src_qpn` is not on the wire
    /// (zero).
    pub fn from_repr(repr: &MrcRepr, payload_len: u32, ce: bool) -> Packet {
        let body = match repr.body {
            Body::Write { segment, reth } => PacketBody::Write {
                segment,
                reth,
                local: LocalBuf::default(),
            },
            Body::Ack(a) => PacketBody::Ack(a),
            Body::Nack(n) => PacketBody::Nack(n),
            Body::Probe(p) => PacketBody::Probe(p),
            Body::ProbeReply(p) => PacketBody::ProbeReply(p),
        };
        let tsx = repr.tsx.unwrap_or(TsxRepr {
            tx_ts_ns: 0,
            echo_ts_ns: 0,
        });
        Packet {
            src_qpn: 0,
            dest_qpn: repr.bth.dest_qp,
            psn: repr.bth.psn,
            msn: repr.mrh.msn,
            ev_format: repr.mrh.ev_format,
            evx: repr.evx.unwrap_or_default(),
            tx_ts_ns: tsx.tx_ts_ns,
            echo_ts_ns: tsx.echo_ts_ns,
            retransmit: repr.mrh.retransmit,
            ack_req: repr.bth.ack_req,
            trim: match (repr.mrh.trimmed, repr.mrh.trimmed_last_hop) {
                (false, _) => TrimMark::None,
                (true, false) => TrimMark::Trimmed,
                (true, true) => TrimMark::TrimmedLastHop,
            },
            ce,
            payload_len,
            body,
        }
    }
}

/// Why a received packet was dropped (each has a counter in the stage's counters).
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
    /// A packet type a QP does not take here (e.g. a probe to an unready QP).
    Unexpected,
}

/// What the stage made of a received packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RxVerdict {
    /// Write the payload (`len` bytes) at byte `offset` of registered region `slot`. Do it
    /// before delivering the completions the firmware posts next: an immediate completion
    /// may depend on these bytes.
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

/// Where the stage's receive verdicts go ([`crate::datapath::stage::Datapath::handle_packets`]):
/// a slice of [`RxVerdict`]s the caller acts on (it places the payloads), or
/// [`DiscardVerdicts`] for a caller with no payload bytes to place.
pub trait VerdictSink {
    /// Verdicts it takes: the stage takes at most this many packets.
    fn capacity(&self) -> usize;
    /// The verdict for the `i`-th packet (`i < capacity()`).
    fn set(&mut self, i: usize, v: RxVerdict);
    /// The verdicts for packets `i..i + pkts.len()`: their payloads placed one after the
    /// other from byte `offset` of region slot `slot` (QP `qpn`), each its `payload_len`.
    #[inline]
    fn set_placed_run(&mut self, i: usize, qpn: u32, slot: u16, offset: u64, pkts: &[Packet]) {
        let mut at = offset;
        for (k, p) in pkts.iter().enumerate() {
            self.set(
                i + k,
                RxVerdict::Place {
                    qpn,
                    slot,
                    offset: at,
                    len: p.payload_len,
                },
            );
            at = at.wrapping_add(u64::from(p.payload_len));
        }
    }
}

impl VerdictSink for [RxVerdict] {
    #[inline]
    fn capacity(&self) -> usize {
        self.len()
    }

    #[inline]
    fn set(&mut self, i: usize, v: RxVerdict) {
        if let Some(s) = self.get_mut(i) {
            *s = v;
        }
    }

    #[inline]
    fn set_placed_run(&mut self, i: usize, qpn: u32, slot: u16, offset: u64, pkts: &[Packet]) {
        let mut at = offset;
        let out = self.get_mut(i..).unwrap_or_default();
        for (p, v) in pkts.iter().zip(out.iter_mut()) {
            *v = RxVerdict::Place {
                qpn,
                slot,
                offset: at,
                len: p.payload_len,
            };
            at = at.wrapping_add(u64::from(p.payload_len));
        }
    }
}

impl<const N: usize> VerdictSink for [RxVerdict; N] {
    #[inline]
    fn capacity(&self) -> usize {
        N
    }

    #[inline]
    fn set(&mut self, i: usize, v: RxVerdict) {
        self.as_mut_slice().set(i, v);
    }

    #[inline]
    fn set_placed_run(&mut self, i: usize, qpn: u32, slot: u16, offset: u64, pkts: &[Packet]) {
        self.as_mut_slice()
            .set_placed_run(i, qpn, slot, offset, pkts);
    }
}

/// Verdicts nobody acts on: for a caller whose payloads are virtual (lengths only, as the
/// test kit's cost stream carries them), so there is nothing to place. The stage checks,
/// places (in its state) and counts every packet as it does for a slice
/// (`DatapathCounters::placed`, the drop counters); only the verdict values are not written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiscardVerdicts;

impl VerdictSink for DiscardVerdicts {
    #[inline]
    fn capacity(&self) -> usize {
        usize::MAX
    }

    #[inline]
    fn set(&mut self, _i: usize, _v: RxVerdict) {}

    #[inline]
    fn set_placed_run(&mut self, _: usize, _: u32, _: u16, _: u64, _: &[Packet]) {}
}
