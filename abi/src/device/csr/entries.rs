//! The 32-byte CSR entry of every kind: its layout (the source of the SystemVerilog package and
//! REGISTERS.md), a constructor that fills the kind byte and clears the reserved bytes, and typed
//! getters. [`super::CsrEvent::decode`] checks every field of an entry read from a queue.

use core::mem::size_of;
use zerocopy::little_endian::{U16, U32, U64};

use super::{CsrEntry, CsrKind, ENTRY_BYTES};
use crate::device::EvState;
use crate::layout::le_struct;
use crate::wire::NackReason;
use crate::Psn;

/// A 24-bit QPN or PSN in a 32-bit field (the top byte cleared).
#[inline]
pub(crate) fn w24(v: u32) -> U32 {
    U32::new(v & 0x00FF_FFFF)
}

macro_rules! csr_entry {
    ($(#[doc = $sd:literal])* $name:ident { $($(#[doc = $d:literal])* $f:ident : $t:ty),* $(,)? }) => {
        impl sealed::Sealed for $name {}

        le_struct! {
            #[align(4)]
            $(#[doc = $sd])*
            pub struct $name {
                /// [`CsrKind`] code.
                pub kind: u8,
                $($(#[doc = $d])* pub $f: $t,)*
            }
        }
        const _: () = assert!(size_of::<$name>() == ENTRY_BYTES);

        impl CsrStruct for $name {
            const RESERVED: [u32; ENTRY_BYTES / 4] = reserved_words(&$name::LAYOUT);
            #[inline]
            fn of(e: &CsrEntry) -> &Self {
                zerocopy::transmute_ref!(e)
            }
        }
    };
}

/// The struct of one entry kind ([`AckSummary`], ...): the 32 bytes of a [`CsrEntry`] under
/// that kind's field names ([`CsrEntry::view`]).
pub trait CsrStruct: Copy + sealed::Sealed {
    /// Its reserved bytes (the fields named `rsvd*`) as a mask per little-endian 32-bit word
    /// of the entry.
    const RESERVED: [u32; ENTRY_BYTES / 4];
    /// The entry `e` as this struct, in place (no check).
    fn of(e: &CsrEntry) -> &Self;
}

/// The reserved bytes of `l` (fields named `rsvd*`) as a mask per little-endian word.
const fn reserved_words(l: &crate::layout::Layout) -> [u32; ENTRY_BYTES / 4] {
    let mut m = [0u32; ENTRY_BYTES / 4];
    let mut f = 0;
    while f < l.fields.len() {
        let field = &l.fields[f];
        let name = field.name.as_bytes();
        if name.len() >= 4
            && name[0] == b'r'
            && name[1] == b's'
            && name[2] == b'v'
            && name[3] == b'd'
        {
            let mut b = field.offset_bits / 8;
            while b < (field.offset_bits + field.width_bits) / 8 {
                m[(b / 4) as usize] |= 0xFF << ((b % 4) * 8);
                b += 1;
            }
        }
        f += 1;
    }
    m
}

mod sealed {
    /// Only the entry structs of this module are [`super::CsrStruct`]s.
    pub trait Sealed {}
}

// ---------------------------------------------------------------------------------------------
// DP -> FW
// ---------------------------------------------------------------------------------------------

/// [`AckSummary::flags`]: the ACK moved the oldest unacknowledged PSN (`una`).
pub const ACK_PROGRESS: u8 = 1 << 0;
/// [`AckSummary::flags`]: PSNs are still outstanding after the ACK.
pub const ACK_OUTSTANDING: u8 = 1 << 1;
/// [`AckSummary::flags`]: the ACK's own plane saw a CE mark in its interval (per-EV ECN).
pub const ACK_ECN_EV: u8 = 1 << 2;
/// [`AckSummary::flags`]: some packet the ACK covers was CE-marked (the QP's CC signal).
pub const ACK_ECN: u8 = 1 << 3;
/// [`AckSummary::flags`]: the cumulative PSN was stale (behind `una` or beyond the next PSN) and
/// was ignored; the SACK bits were applied.
pub const ACK_STALE: u8 = 1 << 4;
/// Every [`AckSummary::flags`] bit.
pub const ACK_FLAGS: u8 = ACK_PROGRESS | ACK_OUTSTANDING | ACK_ECN_EV | ACK_ECN | ACK_STALE;

csr_entry!(
    /// DP->FW: what one received ACK changed at the sender, after the datapath applied its
    /// cumulative PSN and SACK bits to the per-PSN send state.
    AckSummary {
        /// `ACK_*` flags.
        flags: u8,
        /// EV of the data packet that triggered the ACK (the RTT and ECN samples are its).
        ack_ev: U16,
        /// QPN.
        qpn: U32,
        /// Oldest unacknowledged PSN after the ACK.
        una: U32,
        /// Payload bytes newly acknowledged.
        acked_bytes: U32,
        /// Round trip of the triggering packet from its echoed timestamp, ns (0 = no sample).
        rtt_ns: U32,
        /// PSNs newly acknowledged that were in flight (deliveries credited to their EVs).
        delivered: U16,
        /// Of the PSNs newly acknowledged, those acknowledged by SACK bits past the cumulative PSN.
        sacked: U16,
        /// Plane of the data packet that triggered the ACK.
        ack_plane: u8,
        /// Send work requests the ACK retired: the cumulative PSN passed their last packet.
        /// They hold their send queue slots until the firmware completes them
        /// ([`CompleteSends`]).
        retired: U16,
        /// Reserved (0).
        rsvd: [u8; 5],
    }
);

/// [`LossEntry::cause`]: a SACK hole older than the reordering thresholds.
pub const LOSS_REORDER: u8 = 1;

csr_entry!(
    /// DP->FW: a PSN inferred lost (not trimmed). It no longer counts in flight; the datapath
    /// resends it when the firmware orders it ([`Retransmit`]).
    LossEntry {
        /// Plane the PSN last left on.
        plane: u8,
        /// EV the PSN last left on.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// The lost PSN.
        psn: U32,
        /// Its payload bytes.
        len: U16,
        /// Deliveries credited to `ev` since its last report (for the gray-loss test), then
        /// cleared.
        ev_delivered: U16,
        /// `LOSS_*` cause.
        cause: u8,
        /// Reserved (0).
        rsvd: [u8; 15],
    }
);

/// [`NackEntry::flags`]: the NACKed PSN was in flight (it no longer is; a fatal NACK may name
/// any PSN).
pub const NACK_IN_FLIGHT: u8 = 1 << 0;

csr_entry!(
    /// DP->FW: a NACK arrived for a PSN in flight, or with a fatal reason.
    NackEntry {
        /// NACK reason (wire NACKX reason code, 1..=8).
        reason: u8,
        /// EV the NACKed PSN last left on.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// NACKed PSN.
        psn: U32,
        /// Its payload bytes.
        len: U16,
        /// Deliveries credited to `ev` since its last report, then cleared.
        ev_delivered: U16,
        /// Plane the NACKed PSN last left on.
        plane: u8,
        /// `NACK_*` flags.
        flags: u8,
        /// Reserved (0).
        rsvd: [u8; 14],
    }
);

csr_entry!(
    /// DP->FW: a QP with nothing outstanding sent a packet (the firmware starts its ACK timer).
    TxStart {
        /// Reserved (0).
        rsvd: [u8; 3],
        /// QPN.
        qpn: U32,
        /// PSN of that packet.
        psn: U32,
        /// Reserved (0).
        rsvd2: [u8; 20],
    }
);

csr_entry!(
    /// DP->FW: a Write-with-Immediate is placed and every PSN before its last packet too (they
    /// come in message order): it consumed the oldest posted receive, `wr_id`.
    WimmPlaced {
        /// Bit 0: solicited (SE set).
        flags: u8,
        /// Message sequence number.
        msn: U16,
        /// QPN.
        qpn: U32,
        /// PSN of the last packet.
        last_psn: U32,
        /// Immediate data.
        imm: U32,
        /// Message length in bytes (0: not tracked by this datapath).
        byte_len: U32,
        /// The receive work request it consumed.
        wr_id: U64,
        /// Reserved (0).
        rsvd: [u8; 4],
    }
);

csr_entry!(
    /// DP->FW: an EV probe reply arrived.
    ProbeReply {
        /// Plane it arrived on.
        plane: u8,
        /// EV index probed.
        ev_index: U16,
        /// QPN.
        qpn: U32,
        /// Probe id.
        probe_id: U32,
        /// Round trip from the probe's echoed timestamp, ns.
        rtt_ns: U32,
        /// Reserved (0).
        rsvd: [u8; 16],
    }
);

csr_entry!(
    /// DP->FW: a port's link changed.
    PortEventEntry {
        /// Port.
        port: u8,
        /// 1 = up, 0 = down.
        up: u8,
        /// Plane of the port.
        plane: u8,
        /// Speed in Mb/s (0 when down).
        speed_mbps: U32,
        /// Reserved (0).
        rsvd: [u8; 24],
    }
);

csr_entry!(
    /// DP->FW: receive drop counters of a port since its last report (saturating).
    RxDrops {
        /// Port.
        port: u8,
        /// Reserved (0).
        rsvd: [u8; 2],
        /// Bad UDP checksum.
        bad_checksum: U32,
        /// Malformed headers.
        bad_header: U32,
        /// Unknown or not-ready QP.
        unknown_qp: U32,
        /// PSN outside the window.
        out_of_window: U32,
        /// No buffer (receive queue empty, resources).
        no_buffer: U32,
        /// Trimmed packets received.
        trimmed: U32,
        /// Anything else.
        other: U32,
    }
);

csr_entry!(
    /// DP->FW: a received packet hit a fatal error for its QP (the datapath NACKed it and
    /// placed nothing); the firmware moves the QP to ERROR.
    RxFatal {
        /// NACK reason it was answered with (REMOTE_ACCESS, LENGTH or NO_RECV_BUFFER).
        reason: u8,
        /// Reserved (0).
        rsvd: U16,
        /// QPN.
        qpn: U32,
        /// PSN of the packet.
        psn: U32,
        /// Reserved (0).
        rsvd2: [u8; 20],
    }
);

/// [`Flushed::flags`]: the work request asked for a completion.
pub const FLUSH_SIGNALED: u8 = 1 << 0;
/// [`Flushed::flags`]: a receive work request (else a send).
pub const FLUSH_RECV: u8 = 1 << 1;

csr_entry!(
    /// DP->FW: after the QP moved to ERROR, a work request the datapath held: a send not
    /// completed ([`CompleteSends`] had not ordered it, whether or not it was sent or
    /// acknowledged), or a receive no immediate consumed; in posting order.
    Flushed {
        /// `FLUSH_*` flags.
        flags: u8,
        /// Reserved (0).
        rsvd: U16,
        /// QPN.
        qpn: U32,
        /// Reserved (0).
        rsvd2: [u8; 8],
        /// Work request id.
        wr_id: U64,
        /// Reserved (0).
        rsvd3: [u8; 8],
    }
);

csr_entry!(
    /// DP->FW: deliveries credited to an EV since its last report, reported before the
    /// datapath's per-EV counter would saturate (then cleared).
    EvDeliveries {
        /// Reserved (0).
        rsvd: u8,
        /// EV.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// Deliveries.
        count: U32,
        /// Reserved (0).
        rsvd2: [u8; 20],
    }
);

csr_entry!(
    /// DP->FW: the sprayer passed over an EV whose skip-once flag was set (the EV is usable
    /// again).
    SkipServed {
        /// Reserved (0).
        rsvd: u8,
        /// EV.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// Reserved (0).
        rsvd2: [u8; 24],
    }
);

// ---------------------------------------------------------------------------------------------
// FW -> DP
// ---------------------------------------------------------------------------------------------

/// [`Retransmit::ev`]: the sprayer picks the EV.
pub const EV_ANY: u16 = u16::MAX;
/// [`Retransmit::flags`]: with [`EV_ANY`], away from where the PSN last left: on another
/// plane (the sprayer's next pick on one within a turn of its plane scan: a failed link, port
/// or switch takes out a plane's paths together, not one EV), else on another EV.
pub const RETX_AVOID_LAST: u8 = 1 << 0;

csr_entry!(
    /// FW->DP: resend one PSN of a QP (if it is still unacknowledged) on an EV, ahead of new
    /// data.
    Retransmit {
        /// `RETX_*` flags.
        flags: u8,
        /// EV to send on ([`EV_ANY`]: the sprayer picks).
        ev: U16,
        /// QPN.
        qpn: U32,
        /// PSN.
        psn: U32,
        /// Reserved (0).
        rsvd: [u8; 20],
    }
);

csr_entry!(
    /// FW->DP: one entry of a QP's EV table (the sprayer's): GOOD is usable, SKIP usable and
    /// passed over once, ASSUMED_BAD and DENIED not usable.
    EvUpdate {
        /// [`EvState`] code.
        state: u8,
        /// EV index.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// Plane (NIC port) the EV leaves on.
        plane: u8,
        /// Reserved (0).
        rsvd: [u8; 23],
    }
);

csr_entry!(
    /// FW->DP: the weight of a plane in a QP's sprayer (`1..=15`).
    PlaneWeight {
        /// Plane.
        plane: u8,
        /// Weight.
        weight: u8,
        /// Reserved (0).
        rsvd: u8,
        /// QPN.
        qpn: U32,
        /// Reserved (0).
        rsvd2: [u8; 24],
    }
);

csr_entry!(
    /// FW->DP: send an EV probe.
    SendProbe {
        /// Plane of the EV.
        plane: u8,
        /// EV index.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// Probe id (echoed by the reply).
        probe_id: U32,
        /// Reserved (0).
        rsvd: [u8; 20],
    }
);

csr_entry!(
    /// FW->DP: the congestion window of a QP (new packets leave while the bytes in flight are
    /// below it).
    WindowUpdate {
        /// Reserved (0).
        rsvd: [u8; 3],
        /// QPN.
        qpn: U32,
        /// Congestion window in bytes (saturated at 2^32 - 1).
        cwnd_bytes: U32,
        /// Reserved (0).
        rsvd2: [u8; 20],
    }
);

csr_entry!(
    /// FW->DP: write a CQE (the host interface fills `wr_id` from the WQE at `wqe_index`).
    PostCqe {
        /// [`crate::device::cqe::CqeStatus`] code.
        status: u8,
        /// [`crate::device::cqe::CqeOpcode`] code.
        opcode: u8,
        /// Bit 1: solicited (`CQE_SOLICITED`).
        flags: u8,
        /// CQ number.
        cqn: U32,
        /// QPN.
        qpn: U32,
        /// WQE index in its ring.
        wqe_index: U16,
        /// Reserved (0).
        rsvd: U16,
        /// Bytes.
        byte_len: U32,
        /// Immediate data.
        imm: U32,
        /// Error detail.
        syndrome: U32,
        /// Reserved (0).
        rsvd2: [u8; 4],
    }
);

csr_entry!(
    /// FW->DP: write an event record (the host interface adds owner bit and timestamp).
    PostEvent {
        /// [`crate::device::event::EventKind`] code.
        event_kind: u8,
        /// Reserved (0).
        rsvd: [u8; 2],
        /// Event object word.
        object: U32,
        /// Event argument words.
        arg: [U32; 4],
        /// Reserved (0).
        rsvd2: [u8; 8],
    }
);

/// [`Complete::status`] codes.
pub mod status {
    /// Success.
    pub const OK: u8 = 0;
    /// The retry budget ran out.
    pub const RETRY_EXCEEDED: u8 = 1;
    /// The peer NACKed with a fatal reason (in `reason`).
    pub const REMOTE_NACK: u8 = 2;
    /// This QP detected a fatal error on a received packet (reason in `reason`).
    pub const LOCAL_QP_ERROR: u8 = 3;
    /// Flushed: the QP entered ERROR.
    pub const FLUSHED: u8 = 4;
}

/// [`Complete::opcode`] codes.
pub mod opcode {
    /// A send work request (RDMA Write or Write-with-Immediate).
    pub const SEND: u8 = 0;
    /// A receive consumed by an incoming Write-with-Immediate.
    pub const RECV_IMM: u8 = 1;
    /// A receive flushed (status is an error).
    pub const RECV: u8 = 2;
}

csr_entry!(
    /// FW->DP: complete the `count` oldest send work requests of QP `qpn` that ACKs retired
    /// ([`AckSummary::retired`]) and no earlier `CompleteSends` completed. The datapath frees
    /// their send queue slots and, for each one that asked for a completion, in posting order,
    /// writes for the host a [`Complete`] (status OK, opcode SEND), or with [`CS_POST_CQE`] a
    /// [`PostCqe`] (success, WRITE) on CQ `cqn` whose `wqe_index` is the low 16 bits of the
    /// work request id. `count` is at most [`COMPLETE_SENDS_MAX`], so the host-interface queue
    /// always has room for one command's completions once it drains; the datapath completes
    /// no more than are retired and counts the rest as refused.
    CompleteSends {
        /// `CS_*` flags.
        flags: u8,
        /// Work requests to complete (`1..=COMPLETE_SENDS_MAX`).
        count: U16,
        /// QPN.
        qpn: U32,
        /// The send CQ (with [`CS_POST_CQE`]; else 0).
        cqn: U32,
        /// Reserved (0).
        rsvd: [u8; 20],
    }
);

/// [`CompleteSends::flags`]: write `PostCqe`s on CQ `cqn` (the NIC firmware's host interface
/// fills this in from its QP table); without it, `Complete`s.
pub const CS_POST_CQE: u8 = 1 << 0;

/// Most work requests one [`CompleteSends`] completes.
pub const COMPLETE_SENDS_MAX: u16 = 32;

csr_entry!(
    /// FW->DP: a work request completed (the host interface writes its CQE to the QP's CQ).
    Complete {
        /// `status::*` code.
        status: u8,
        /// `opcode::*` code.
        opcode: u8,
        /// NACK reason of a REMOTE_NACK or LOCAL_QP_ERROR status, else 0.
        reason: u8,
        /// QPN.
        qpn: U32,
        /// Immediate data (RECV_IMM), else 0.
        imm: U32,
        /// Message sequence number (RECV_IMM), else 0.
        msn: U16,
        /// Reserved (0).
        rsvd: U16,
        /// Work request id.
        wr_id: U64,
        /// Reserved (0).
        rsvd2: [u8; 8],
    }
);

csr_entry!(
    /// FW->DP, for the host: an EV probe the host asked for (admin `PROBE_EV`) finished, with
    /// a reply after `rtt_ns` or with none by its timeout (`replied` 0, `rtt_ns` 0).
    ProbeResult {
        /// 1: a reply arrived; 0: the probe timed out.
        replied: u8,
        /// EV index probed.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// The host's probe id (from the `PROBE_EV` command).
        probe_id: U32,
        /// Round trip, ns (0 when no reply came).
        rtt_ns: U32,
        /// Reserved (0).
        rsvd: [u8; 16],
    }
);

csr_entry!(
    /// FW->DP: an EV of a QP changed state (for the host's EV events and the operator).
    EvEventEntry {
        /// [`EvState`] code before.
        old: u8,
        /// EV index.
        ev: U16,
        /// QPN.
        qpn: U32,
        /// [`EvState`] code after.
        new: u8,
        /// Why (the firmware's reason code).
        reason: u8,
        /// Reserved (0).
        rsvd: [u8; 22],
    }
);

csr_entry!(
    /// FW->DP: after an ACK timeout, queue every unacknowledged PSN of the QP for
    /// retransmission in PSN order (on EVs the sprayer picks, each away from where it last
    /// left, as with [`RETX_AVOID_LAST`]), but send only the oldest until the peer answers (an
    /// ACK or NACK).
    RetransmitUnacked {
        /// Reserved (0).
        rsvd: [u8; 3],
        /// QPN.
        qpn: U32,
        /// Reserved (0).
        rsvd2: [u8; 24],
    }
);

csr_entry!(
    /// FW->DP: a tail loss probe: resend the newest PSN in flight (on an EV the sprayer picks,
    /// away from where it last left, as with [`RETX_AVOID_LAST`]), unless the QP transmitted
    /// within two reorder windows (its RTS `reorder_ns`): that transmission's ACK answers
    /// sooner. After a [`RetransmitUnacked`], while its one retransmission of the oldest
    /// PSN waits for an answer, resend that PSN again (the same way), whatever the time.
    TailProbe {
        /// Reserved (0).
        rsvd: [u8; 3],
        /// QPN.
        qpn: U32,
        /// Reserved (0).
        rsvd2: [u8; 24],
    }
);

csr_entry!(
    /// FW->DP: a plane (port) went down: the plane's weight becomes 0 in the sprayer of every
    /// QP past RESET (no packet is sprayed on it from this entry on, before any EV table
    /// write; the firmware writes the weight again after the plane comes back), and every PSN
    /// of every QP in flight on it is queued for retransmission, on EVs the sprayer picks
    /// (on the other planes).
    PlaneDown {
        /// Plane.
        plane: u8,
        /// Reserved (0).
        rsvd: [u8; 30],
    }
);

csr_entry!(
    /// FW->DP: a QP moved to INIT: its EV table holds `evs` EVs, EV `i` on plane `i % planes`,
    /// all usable; headers carry `ev_format` and EV value `value_base + i`.
    QpInitCtx {
        /// Planes.
        planes: u8,
        /// EVs.
        evs: U16,
        /// QPN.
        qpn: U32,
        /// EV value of EV 0.
        value_base: U32,
        /// [`crate::wire::EvFormat`] code.
        ev_format: u8,
        /// Reserved (0).
        rsvd: [u8; 19],
    }
);

csr_entry!(
    /// FW->DP: a QP moved to RTR: it receives from `dest_qpn` from `rq_psn`.
    QpRtrCtx {
        /// Reserved (0).
        rsvd: u8,
        /// Write-with-Immediate messages that may wait for completion.
        max_wimm: U16,
        /// QPN.
        qpn: U32,
        /// First expected PSN.
        rq_psn: U32,
        /// Receive window in PSNs.
        mpr_psns: U32,
        /// The peer QP (headers of ACKs, NACKs and data).
        dest_qpn: U32,
        /// Reserved (0).
        rsvd2: [u8; 12],
    }
);

csr_entry!(
    /// FW->DP: a QP moved to RTS: it sends from `sq_psn`; a SACK hole is lost once at least
    /// `reorder_tx` later transmissions were acknowledged and the newest left at least
    /// `reorder_ns` after it, or (`reorder_ns` not 0) once the newest left at least two
    /// `reorder_ns` after it, whatever the count (where a tail probe would have gone).
    QpRtsCtx {
        /// Later transmissions acknowledged before a hole is lost (1..=63).
        reorder_tx: u8,
        /// Write-with-Immediate messages in flight at most.
        max_wimm: U16,
        /// QPN.
        qpn: U32,
        /// First PSN to send.
        sq_psn: U32,
        /// Send window in PSNs.
        mpr_psns: U32,
        /// Send-time gap in ns (0: the count alone decides).
        reorder_ns: U32,
        /// Reserved (0).
        rsvd: [u8; 12],
    }
);

/// [`QpStateEntry::state`]: back to RESET (everything of the QP forgotten, nothing reported).
pub const QP_RESET: u8 = 0;
/// [`QpStateEntry::state`]: ERROR (nothing more sent or placed; unsent send work requests
/// come back as [`Flushed`]).
pub const QP_ERROR: u8 = 1;

csr_entry!(
    /// FW->DP: a QP moved to RESET or ERROR.
    QpStateEntry {
        /// `QP_*` state.
        state: u8,
        /// Reserved (0).
        rsvd: U16,
        /// QPN.
        qpn: U32,
        /// Reserved (0).
        rsvd2: [u8; 24],
    }
);

/// [`RegionWrite::op`]: remove the region of `rkey` (the other fields are 0).
pub const REGION_REMOVE: u8 = 0;
/// [`RegionWrite::op`]: add a region.
pub const REGION_ADD: u8 = 1;
/// [`RegionWrite::access`]: remote peers may write the region.
pub const REGION_REMOTE_WRITE: u8 = 1 << 0;
/// [`RegionWrite::access`]: remote peers may read the region (reserved: MRC has no reads).
pub const REGION_REMOTE_READ: u8 = 1 << 1;

csr_entry!(
    /// FW->DP: write the datapath's registered-region table (the memory regions received
    /// writes are placed into, by rkey): add a region, or remove the region of `rkey`.
    RegionWrite {
        /// `REGION_ADD` or `REGION_REMOVE`.
        op: u8,
        /// `REGION_REMOTE_*` bits (0 for a removal).
        access: u8,
        /// Reserved (0).
        rsvd: u8,
        /// The region's rkey.
        rkey: U32,
        /// Virtual address of its first byte (RETHs name it by), 0 for a removal.
        base_va: U64,
        /// Its length in bytes (`base_va + length` must not pass 2^64), 0 for a removal.
        length: U64,
        /// Reserved (0).
        rsvd2: [u8; 8],
    }
);

// ---------------------------------------------------------------------------------------------
// Constructors and getters
// ---------------------------------------------------------------------------------------------

impl AckSummary {
    /// An ACK summary.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn new(
        qpn: u32,
        una: Psn,
        flags: u8,
        acked_bytes: u32,
        rtt_ns: u32,
        delivered: u16,
        sacked: u16,
        ack_ev: u16,
        ack_plane: u8,
        retired: u16,
    ) -> Self {
        AckSummary {
            kind: CsrKind::AckSummary as u8,
            flags,
            ack_ev: U16::new(ack_ev),
            qpn: w24(qpn),
            una: w24(una.value()),
            acked_bytes: U32::new(acked_bytes),
            rtt_ns: U32::new(rtt_ns),
            delivered: U16::new(delivered),
            sacked: U16::new(sacked),
            ack_plane,
            retired: U16::new(retired),
            rsvd: [0; 5],
        }
    }
    /// Oldest unacknowledged PSN after the ACK.
    pub fn una(&self) -> Psn {
        Psn::new(self.una.get())
    }
    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

impl LossEntry {
    /// A loss report.
    #[inline]
    pub fn new(
        qpn: u32,
        psn: Psn,
        ev: u16,
        plane: u8,
        len: u16,
        ev_delivered: u16,
        cause: u8,
    ) -> Self {
        LossEntry {
            kind: CsrKind::Loss as u8,
            plane,
            ev: U16::new(ev),
            qpn: w24(qpn),
            psn: w24(psn.value()),
            len: U16::new(len),
            ev_delivered: U16::new(ev_delivered),
            cause,
            rsvd: [0; 15],
        }
    }
    /// The lost PSN.
    pub fn psn(&self) -> Psn {
        Psn::new(self.psn.get())
    }
}

impl NackEntry {
    /// A NACK report.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn new(
        qpn: u32,
        psn: Psn,
        reason: NackReason,
        ev: u16,
        plane: u8,
        len: u16,
        ev_delivered: u16,
        flags: u8,
    ) -> Self {
        NackEntry {
            kind: CsrKind::Nack as u8,
            reason: reason as u8,
            ev: U16::new(ev),
            qpn: w24(qpn),
            psn: w24(psn.value()),
            len: U16::new(len),
            ev_delivered: U16::new(ev_delivered),
            plane,
            flags,
            rsvd: [0; 14],
        }
    }
    /// The NACKed PSN.
    pub fn psn(&self) -> Psn {
        Psn::new(self.psn.get())
    }
    /// The reason (checked by decode).
    pub fn reason(&self) -> Option<NackReason> {
        NackReason::from_u8(self.reason).ok()
    }
}

impl TxStart {
    /// A QP started sending with nothing outstanding.
    pub fn new(qpn: u32, psn: Psn) -> Self {
        TxStart {
            kind: CsrKind::TxStart as u8,
            rsvd: [0; 3],
            qpn: w24(qpn),
            psn: w24(psn.value()),
            rsvd2: [0; 20],
        }
    }
}

impl WimmPlaced {
    /// A placed Write-with-Immediate that consumed receive `wr_id`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        qpn: u32,
        msn: u16,
        last_psn: Psn,
        imm: u32,
        byte_len: u32,
        solicited: bool,
        wr_id: u64,
    ) -> Self {
        WimmPlaced {
            kind: CsrKind::WimmPlaced as u8,
            flags: u8::from(solicited),
            msn: U16::new(msn),
            qpn: w24(qpn),
            last_psn: w24(last_psn.value()),
            imm: U32::new(imm),
            byte_len: U32::new(byte_len),
            wr_id: U64::new(wr_id),
            rsvd: [0; 4],
        }
    }
}

impl ProbeReply {
    /// A probe reply.
    pub fn new(qpn: u32, ev_index: u16, plane: u8, probe_id: u32, rtt_ns: u32) -> Self {
        ProbeReply {
            kind: CsrKind::ProbeReply as u8,
            plane,
            ev_index: U16::new(ev_index),
            qpn: w24(qpn),
            probe_id: U32::new(probe_id),
            rtt_ns: U32::new(rtt_ns),
            rsvd: [0; 16],
        }
    }
}

impl PortEventEntry {
    /// A port went up or down.
    pub fn new(port: u8, plane: u8, up: bool, speed_mbps: u32) -> Self {
        PortEventEntry {
            kind: CsrKind::PortEvent as u8,
            port,
            up: u8::from(up),
            plane,
            speed_mbps: U32::new(if up { speed_mbps } else { 0 }),
            rsvd: [0; 24],
        }
    }
}

impl RxFatal {
    /// A fatal receive error.
    pub fn new(qpn: u32, psn: Psn, reason: NackReason) -> Self {
        RxFatal {
            kind: CsrKind::RxFatal as u8,
            reason: reason as u8,
            rsvd: U16::new(0),
            qpn: w24(qpn),
            psn: w24(psn.value()),
            rsvd2: [0; 20],
        }
    }
}

impl Flushed {
    /// A flushed work request (`FLUSH_*` flags).
    pub fn new(qpn: u32, wr_id: u64, flags: u8) -> Self {
        Flushed {
            kind: CsrKind::Flushed as u8,
            flags,
            rsvd: U16::new(0),
            qpn: w24(qpn),
            rsvd2: [0; 8],
            wr_id: U64::new(wr_id),
            rsvd3: [0; 8],
        }
    }
}

impl EvDeliveries {
    /// Deliveries of an EV.
    pub fn new(qpn: u32, ev: u16, count: u32) -> Self {
        EvDeliveries {
            kind: CsrKind::EvDeliveries as u8,
            rsvd: 0,
            ev: U16::new(ev),
            qpn: w24(qpn),
            count: U32::new(count),
            rsvd2: [0; 20],
        }
    }
}

impl SkipServed {
    /// The skip-once flag of `ev` was served.
    pub fn new(qpn: u32, ev: u16) -> Self {
        SkipServed {
            kind: CsrKind::SkipServed as u8,
            rsvd: 0,
            ev: U16::new(ev),
            qpn: w24(qpn),
            rsvd2: [0; 24],
        }
    }
}

impl Retransmit {
    /// A retransmission order (`ev` may be [`EV_ANY`]).
    pub fn new(qpn: u32, psn: Psn, ev: u16, flags: u8) -> Self {
        Retransmit {
            kind: CsrKind::Retransmit as u8,
            flags,
            ev: U16::new(ev),
            qpn: w24(qpn),
            psn: w24(psn.value()),
            rsvd: [0; 20],
        }
    }
    /// The PSN.
    pub fn psn(&self) -> Psn {
        Psn::new(self.psn.get())
    }
}

impl EvUpdate {
    /// An EV table write.
    pub fn new(qpn: u32, ev: u16, state: EvState, plane: u8) -> Self {
        EvUpdate {
            kind: CsrKind::EvUpdate as u8,
            state: state as u8,
            ev: U16::new(ev),
            qpn: w24(qpn),
            plane,
            rsvd: [0; 23],
        }
    }
}

impl PlaneWeight {
    /// A plane weight.
    pub fn new(qpn: u32, plane: u8, weight: u8) -> Self {
        PlaneWeight {
            kind: CsrKind::PlaneWeight as u8,
            plane,
            weight,
            rsvd: 0,
            qpn: w24(qpn),
            rsvd2: [0; 24],
        }
    }
}

impl SendProbe {
    /// A probe order.
    pub fn new(qpn: u32, ev: u16, plane: u8, probe_id: u32) -> Self {
        SendProbe {
            kind: CsrKind::SendProbe as u8,
            plane,
            ev: U16::new(ev),
            qpn: w24(qpn),
            probe_id: U32::new(probe_id),
            rsvd: [0; 20],
        }
    }
}

impl CompleteSends {
    /// Complete the `count` oldest retired sends of `qpn` (as `Complete`s).
    pub fn new(qpn: u32, count: u16) -> Self {
        CompleteSends {
            kind: CsrKind::CompleteSends as u8,
            flags: 0,
            count: U16::new(count),
            qpn: w24(qpn),
            cqn: U32::new(0),
            rsvd: [0; 20],
        }
    }

    /// The same order with its completions as `PostCqe`s on CQ `cqn`.
    pub fn with_cq(mut self, cqn: u32) -> Self {
        self.flags |= CS_POST_CQE;
        self.cqn = U32::new(cqn);
        self
    }
}

impl PostCqe {
    /// A CQE of `status` and `opcode` (their `cqe` codes) for the WQE at `wqe_index` of QP
    /// `qpn` (its low 24 bits) on CQ `cqn`: no flags, no length, no syndrome.
    pub fn new(status: u8, opcode: u8, cqn: u32, qpn: u32, wqe_index: u16, imm: u32) -> Self {
        PostCqe {
            kind: CsrKind::PostCqe as u8,
            status,
            opcode,
            flags: 0,
            cqn: U32::new(cqn),
            qpn: w24(qpn),
            wqe_index: U16::new(wqe_index),
            rsvd: U16::new(0),
            byte_len: U32::new(0),
            imm: U32::new(imm),
            syndrome: U32::new(0),
            rsvd2: [0; 4],
        }
    }
}

impl WindowUpdate {
    /// A window (saturated to 32 bits).
    pub fn new(qpn: u32, cwnd_bytes: u64) -> Self {
        WindowUpdate {
            kind: CsrKind::WindowUpdate as u8,
            rsvd: [0; 3],
            qpn: w24(qpn),
            cwnd_bytes: U32::new(u32::try_from(cwnd_bytes).unwrap_or(u32::MAX)),
            rsvd2: [0; 20],
        }
    }
}

impl PostEvent {
    /// The CSR entry that posts `ev`.
    pub fn new(ev: &crate::device::event::Event) -> Self {
        let (object, arg) = ev.words();
        PostEvent {
            kind: CsrKind::PostEvent as u8,
            event_kind: ev.kind() as u8,
            rsvd: [0; 2],
            object: object.into(),
            arg: arg.map(U32::new),
            rsvd2: [0; 8],
        }
    }

    /// The event to post (already validated by [`super::CsrEvent::decode`]).
    ///
    /// # Errors
    /// The words do not form an event.
    pub fn event(&self) -> Result<crate::device::event::Event, crate::device::event::EventError> {
        crate::device::event::Event::from_words(
            self.event_kind,
            self.object.get(),
            self.arg.map(|w| w.get()),
        )
    }
}

impl Complete {
    /// A completion.
    pub fn new(
        qpn: u32,
        wr_id: u64,
        opcode: u8,
        status: u8,
        reason: u8,
        imm: u32,
        msn: u16,
    ) -> Self {
        Complete {
            kind: CsrKind::Complete as u8,
            status,
            opcode,
            reason,
            qpn: w24(qpn),
            imm: U32::new(imm),
            msn: U16::new(msn),
            rsvd: U16::new(0),
            wr_id: U64::new(wr_id),
            rsvd2: [0; 8],
        }
    }
}

impl ProbeResult {
    /// The result of host probe `probe_id` on EV `ev` of `qpn`: the reply's round trip, or
    /// `None` when it timed out.
    pub fn new(qpn: u32, ev: u16, probe_id: u32, rtt_ns: Option<u32>) -> Self {
        ProbeResult {
            kind: CsrKind::ProbeResult as u8,
            replied: u8::from(rtt_ns.is_some()),
            ev: U16::new(ev),
            qpn: w24(qpn),
            probe_id: U32::new(probe_id),
            rtt_ns: U32::new(rtt_ns.unwrap_or(0)),
            rsvd: [0; 16],
        }
    }
}

impl EvEventEntry {
    /// An EV state change.
    pub fn new(qpn: u32, ev: u16, old: EvState, new: EvState, reason: u8) -> Self {
        EvEventEntry {
            kind: CsrKind::EvEvent as u8,
            old: old as u8,
            ev: U16::new(ev),
            qpn: w24(qpn),
            new: new as u8,
            reason,
            rsvd: [0; 22],
        }
    }
}

impl RetransmitUnacked {
    /// Requeue every unacknowledged PSN of `qpn`.
    pub fn new(qpn: u32) -> Self {
        RetransmitUnacked {
            kind: CsrKind::RetransmitUnacked as u8,
            rsvd: [0; 3],
            qpn: w24(qpn),
            rsvd2: [0; 24],
        }
    }
}

impl TailProbe {
    /// A tail loss probe for `qpn`.
    pub fn new(qpn: u32) -> Self {
        TailProbe {
            kind: CsrKind::TailProbe as u8,
            rsvd: [0; 3],
            qpn: w24(qpn),
            rsvd2: [0; 24],
        }
    }
}

impl PlaneDown {
    /// Plane `plane` went down.
    pub fn new(plane: u8) -> Self {
        PlaneDown {
            kind: CsrKind::PlaneDown as u8,
            plane,
            rsvd: [0; 30],
        }
    }
}

impl QpInitCtx {
    /// A QP's EV table at INIT.
    pub fn new(
        qpn: u32,
        evs: u16,
        planes: u8,
        ev_format: crate::wire::EvFormat,
        value_base: u32,
    ) -> Self {
        QpInitCtx {
            kind: CsrKind::QpInit as u8,
            planes,
            evs: U16::new(evs),
            qpn: w24(qpn),
            value_base: U32::new(value_base),
            ev_format: ev_format as u8,
            rsvd: [0; 19],
        }
    }
}

impl QpRtrCtx {
    /// A QP's receive side at RTR.
    pub fn new(qpn: u32, rq_psn: Psn, mpr_psns: u32, max_wimm: u16, dest_qpn: u32) -> Self {
        QpRtrCtx {
            kind: CsrKind::QpRtr as u8,
            rsvd: 0,
            max_wimm: U16::new(max_wimm),
            qpn: w24(qpn),
            rq_psn: w24(rq_psn.value()),
            mpr_psns: U32::new(mpr_psns),
            dest_qpn: w24(dest_qpn),
            rsvd2: [0; 12],
        }
    }
}

impl QpRtsCtx {
    /// A QP's send side at RTS.
    pub fn new(
        qpn: u32,
        sq_psn: Psn,
        mpr_psns: u32,
        max_wimm: u16,
        reorder_tx: u8,
        reorder_ns: u32,
    ) -> Self {
        QpRtsCtx {
            kind: CsrKind::QpRts as u8,
            reorder_tx,
            max_wimm: U16::new(max_wimm),
            qpn: w24(qpn),
            sq_psn: w24(sq_psn.value()),
            mpr_psns: U32::new(mpr_psns),
            reorder_ns: U32::new(reorder_ns),
            rsvd: [0; 12],
        }
    }
}

impl QpStateEntry {
    /// A QP moved to `state` (`QP_RESET` or `QP_ERROR`).
    pub fn new(qpn: u32, state: u8) -> Self {
        QpStateEntry {
            kind: CsrKind::QpState as u8,
            state,
            rsvd: U16::new(0),
            qpn: w24(qpn),
            rsvd2: [0; 24],
        }
    }
}

impl RegionWrite {
    /// Add the region `rkey` at `[base_va, base_va + length)` with `REGION_REMOTE_*` `access`.
    pub fn add(rkey: u32, base_va: u64, length: u64, access: u8) -> Self {
        RegionWrite {
            kind: CsrKind::RegionWrite as u8,
            op: REGION_ADD,
            access,
            rsvd: 0,
            rkey: U32::new(rkey),
            base_va: U64::new(base_va),
            length: U64::new(length),
            rsvd2: [0; 8],
        }
    }

    /// Remove the region of `rkey`.
    pub fn remove(rkey: u32) -> Self {
        RegionWrite {
            kind: CsrKind::RegionWrite as u8,
            op: REGION_REMOVE,
            access: 0,
            rsvd: 0,
            rkey: U32::new(rkey),
            base_va: U64::new(0),
            length: U64::new(0),
            rsvd2: [0; 8],
        }
    }
}
