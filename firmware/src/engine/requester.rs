//! The requester half of a QP: send queue, PSN window, SACK/NACK processing, retransmission,
//! ACK timeout, completions in posting order.
//!
//! # State
//! - A bounded send queue of posted work requests ([`SendWr`]) with their PSN ranges; PSNs are
//!   assigned at post time, so packets leave in PSN order and a WQE is done once the
//!   cumulative ACK passes its last PSN.
//! - One slot per PSN of the window `[una, nxt)` (`WIN` slots, a ring): the EV and plane it
//!   last left on, its payload length, its transmission sequence number, and a state
//!   (in flight / acknowledged / waiting for retransmission).
//! - A retransmission queue (each PSN at most once, so `WIN` entries suffice).
//!
//! # Rules
//! - **Window**: a new PSN leaves only while `nxt - una < MPR * 128`, the CC window has room
//!   and (for the first packet of a Write-with-Immediate) fewer than `max_wimm` are in flight.
//!   Retransmissions go first and only need CC room.
//! - **ACK**: everything before `cum_psn` and every SACK bit is acknowledged. A hole below the
//!   highest SACKed PSN whose last transmission is at least [`Reorder::tx`] transmissions and
//!   [`Reorder::ns`] nanoseconds older than the newest acknowledged one is an **untrimmed loss**: its EV is retired
//!   (`EvTable::handle_loss`) and it is retransmitted on a different EV.
//! - **NACK** by reason: `TRIMMED` / `TRIMMED_LAST_HOP` retransmit and keep the EV (counted as
//!   a trim); `OUT_OF_WINDOW` retransmits; `TOO_MANY_WIMM` waits for the timeout; fatal
//!   reasons (`REMOTE_ACCESS`, `LENGTH`, `NO_RECV_BUFFER`, `INVALID_QP`) put the QP in ERROR.
//! - **Timeout**: the retry policy decides; a retry retransmits every unacknowledged PSN, a
//!   give-up puts the QP in ERROR with [`CompletionError::RetryExceeded`].
//! - **Completions** come from the head of the send queue only, so they are in posting order;
//!   in ERROR every remaining WQE completes with an error (the first with the cause).

use mrc_abi::wire::{AckRepr, EvFormat, EvxRepr, NackReason, NackRepr, RethRepr, Segment};
use mrc_abi::Psn;

use crate::datapath::segmenter::{PacketDesc, WriteRequest};
use crate::datapath::sprayer::{EvPick, Sprayer};
use crate::engine::cc::{Cc, Controller};
use crate::engine::ev_state::{AckFeedback, DeliveryCredits, EvTable};
use crate::engine::packet::{
    Completion, CompletionError, CompletionKind, LocalBuf, SendWr, TxBody, TxPacket,
};
use crate::engine::qp::{QpError, RtsParams};
use crate::engine::retry::{RetryDecision, RetryState};
use crate::engine::ring::Ring;

const F_INFLIGHT: u8 = 1;
const F_ACKED: u8 = 2;
const F_PENDING: u8 = 4;
/// Retransmit on a different EV than the last one.
const F_AVOID: u8 = 8;

/// Per-PSN transmit state (16 bytes).
#[derive(Clone, Copy, Debug, Default)]
struct TxSlot {
    tx_seq: u32,
    /// Low 32 bits of the send time (ns); differences are taken modulo 2^32 (4.29 s).
    sent_ns: u32,
    ev: u16,
    len: u16,
    plane: u8,
    flags: u8,
}

/// The retransmission queue's loss window after an ACK timeout.
///
/// An ACK timeout means no ACK has moved `una` for the timeout: the requester cannot tell the
/// PSNs that were lost from those that arrived but that no ACK could report (an ACK's SACK
/// bitmap reaches 64 PSNs past the cumulative PSN, so with `una` lost again every later PSN
/// is invisible). All are requeued, `una` first, but only `una`'s retransmission leaves
/// before the peer answers: its ACK moves the cumulative PSN past everything that arrived,
/// and the queue drops those entries unsent. Sending the whole queue at once instead
/// retransmitted every PSN that had arrived (on the engine-cost run, 5,367 of the 5,598 PSNs
/// 154 timeouts requeued). This is TCP's loss window of one packet after a retransmission
/// timeout (RFC 5681, section 3.1), for the retransmission queue only: new data waits behind
/// a non-empty queue anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum RtoWindow {
    /// No timeout since the last ACK or NACK: the queue is sent as the windows allow.
    Open,
    /// A timeout requeued the unacknowledged PSNs: the next retransmission may leave.
    One,
    /// That retransmission left: the queue waits for an ACK or NACK.
    Wait,
}

/// When a SACK hole counts as an untrimmed loss: the newest acknowledged transmission left at
/// least `tx` transmissions **and** at least `ns` nanoseconds after the hole's (the time rule
/// is RACK's, RFC 8985: a packet sent `ns` before one that already arrived is lost, whatever
/// the RTT). Spraying reorders by the paths' delay skew, which is a time; the count alone
/// must then be set to the packets sent during that skew, which depends on the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reorder {
    /// Later transmissions acknowledged (1..=63: a hole is judged only inside the ACK's
    /// 64-bit SACK bitmap).
    pub tx: u32,
    /// Send-time gap in ns (0: the count alone decides).
    pub ns: u32,
}

/// What acknowledging slots changes, summed over a loop (in registers) and applied once
/// (`Requester::apply_tally`).
#[derive(Clone, Copy, Debug)]
struct AckTally {
    /// The newest acknowledged transmission's sequence number and the latest send time known
    /// delivered (`Requester::max_acked_seq` / `max_acked_sent_ns`).
    max_seq: u32,
    max_sent: u32,
    /// Bytes newly acknowledged.
    acked: u64,
    /// Of those, the bytes that were in flight (no longer counted in flight).
    freed: u64,
    /// Deliveries credited to EVs (for `EvTable::note_qp_deliveries`).
    credited: u64,
}

impl AckTally {
    /// Slot `s` is acknowledged (nothing when it already was): a PSN that was in flight
    /// credits the delivery to the EV it last left on.
    #[inline]
    fn take(&mut self, s: &mut TxSlot, evs: &mut DeliveryCredits<'_>) {
        let flags = s.flags;
        let len = u64::from(s.len);
        if flags == F_INFLIGHT {
            // The common slot: in flight and nothing else (one compare).
            s.flags = F_ACKED;
            self.acked += len;
            evs.credit(s.ev);
            self.freed += len;
            self.credited += 1;
        } else {
            if flags & F_ACKED != 0 {
                return;
            }
            s.flags = F_ACKED;
            self.acked += len;
            if flags & F_INFLIGHT != 0 {
                evs.credit(s.ev);
                self.freed += len;
                self.credited += 1;
            }
        }
        // A newer transmission: `>= 0` is `> 0` here (one sign flag). A slot taken here is not
        // yet acknowledged, so its transmission is none of the acknowledged ones whose numbers
        // the running maximum holds, nor the initial 0 (transmissions are numbered from 1):
        // equal numbers would be 2^32 transmissions apart, beyond what the modulo-2^32
        // comparison orders anyway.
        debug_assert_ne!(s.tx_seq, self.max_seq);
        if (s.tx_seq.wrapping_sub(self.max_seq) as i32) >= 0 {
            self.max_seq = s.tx_seq;
            self.max_sent = later_ns(self.max_sent, s.sent_ns);
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct SendWqe {
    wr: SendWr,
    start_psn: Psn,
    npkts: u32,
    msn: u16,
}

impl SendWqe {
    /// Filler for the unused slots of the send queue.
    const FILL: SendWqe = SendWqe {
        wr: SendWr {
            wr_id: 0,
            local: LocalBuf {
                handle: 0,
                offset: 0,
            },
            remote_va: 0,
            rkey: 0,
            len: 0,
            imm: None,
            signaled: false,
        },
        start_psn: Psn::new(0),
        npkts: 0,
        msn: 0,
    };
}

/// Requester counters (saturating where they could matter, else wrapping).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RequesterCounters {
    pub posted: u64,
    pub post_refused: u64,
    pub data_sent: u64,
    pub retransmits: u64,
    pub acks: u64,
    /// ACKs whose cumulative PSN was behind `una` or beyond `nxt` (cumulative part ignored).
    pub acks_stale: u64,
    pub losses_inferred: u64,
    /// Tail loss probes sent (the newest unacknowledged PSN again, no ACK for two RTTs).
    pub tail_probes: u64,
    pub nacks_trimmed: u64,
    pub nacks_out_of_window: u64,
    pub nacks_too_many_wimm: u64,
    pub nacks_fatal: u64,
    /// NACKs for PSNs not in flight.
    pub nacks_stale: u64,
    pub timeouts: u64,
    pub give_ups: u64,
    pub completions: u64,
    pub flushed: u64,
}

/// What a NACK did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NackEffect {
    None,
    Fatal(NackReason),
}

/// The next packet the requester would send.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate {
    pub desc: PacketDesc,
    pub segment: Segment,
    pub local: LocalBuf,
    pub msn: u16,
    pub retransmit: bool,
    /// EV to avoid (the one the lost copy took).
    pub avoid_ev: Option<u16>,
    pub ack_req: bool,
    /// Last packet of its work request (a new transmission of it moves on to the next one).
    pub last: bool,
    /// First packet of a Write-with-Immediate (counts against `max_wimm`).
    pub wimm_start: bool,
}

/// A new packet the fast path sent: what its descriptor needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewTx {
    pub psn: Psn,
    pub msn: u16,
    pub segment: Segment,
    pub remote_va: u64,
    pub rkey: u32,
    pub payload_len: u32,
    pub local: LocalBuf,
    pub ack_req: bool,
    pub ev: EvPick,
}

/// The header fields of a QP's data packets that come from the QP, not the requester.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DataHdr {
    pub src_qpn: u32,
    pub dest_qpn: u32,
    pub ev_format: EvFormat,
    pub value_base: u32,
}

/// What [`Requester::send_new_fast`] did.
pub(crate) enum FastTx {
    /// Sent (committed) a new packet.
    Sent(NewTx),
    /// A new packet could leave but no EV is usable: nothing changed.
    NoEv,
    /// Not the common case: nothing changed; take [`Requester::peek`] / [`Requester::commit`].
    Fallback,
}

/// What [`Requester::send_retx`] did.
pub(crate) enum RetxTx {
    /// Sent (committed) the first retransmission still wanted.
    Sent(NewTx),
    /// One is wanted but no EV is usable: nothing committed (acknowledged entries ahead of it
    /// left the queue).
    NoEv,
    /// Every queued entry was acknowledged meanwhile: the queue is now empty.
    Drained,
}

/// Why no packet can leave now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stall {
    Idle,
    Window,
    Cc,
    Wimm,
}

/// The requester of one QP: send queue of `SQ`, window of `WIN` PSNs.
pub struct Requester<const WIN: usize, const SQ: usize> {
    sq: Ring<SendWqe, SQ>,
    /// Index in `sq` of the WQE whose packets are being sent for the first time.
    send_idx: usize,
    next_post_psn: Psn,
    next_msn: u16,
    una: Psn,
    nxt: Psn,
    slots: [TxSlot; WIN],
    retx: Ring<Psn, WIN>,
    inflight_bytes: u64,
    tx_seq: u32,
    max_acked_seq: u32,
    /// The latest send time (low 32 bits, ns) of a transmission known delivered: the one with
    /// `max_acked_seq`, or an ACK's echoed timestamp.
    max_acked_sent_ns: u32,
    /// The SACK bits already applied (`sack_done_bits` relative to `sack_done_base`): ACKs
    /// repeat their 64-bit bitmap until the hole below it is filled, so only the bits not seen
    /// before need work. Purely an optimisation: acknowledging twice is harmless.
    sack_done_base: Psn,
    sack_done_bits: u64,
    retry: RetryState,
    /// Tail loss probe (RFC 8985): when this passes with data outstanding and no ACK since,
    /// the newest unacknowledged PSN is sent again (on another EV) so that its ACK lets the
    /// time rule judge the holes before it. Only with a time rule (`reorder.ns > 0`).
    tlp_deadline_ns: Option<u64>,
    /// A probe is out: no other until an ACK arrives.
    tlp_out: bool,
    /// Loss window after an ACK timeout (RFC 5681's one packet): the timeout requeued every
    /// unacknowledged PSN, `una` first; once one retransmission has left, the rest of the
    /// queue waits for an ACK or NACK (see [`RtoWindow`]).
    rto: RtoWindow,
    mpr_psns: u32,
    max_wimm: u16,
    wimm_inflight: u16,
    reorder: Reorder,
    mtu: u32,
    error: Option<CompletionError>,
    in_error: bool,
    planted_bug: bool,
    counters: RequesterCounters,
}

#[cfg(debug_assertions)]
fn segment_of(desc: &PacketDesc) -> Segment {
    use mrc_abi::wire::Opcode::*;
    match desc.opcode {
        WriteFirst => Segment::First,
        WriteLast | WriteLastImm => Segment::Last { imm: desc.imm },
        WriteOnly | WriteOnlyImm => Segment::Only { imm: desc.imm },
        _ => Segment::Middle,
    }
}

/// The later of two send times kept as the low 32 bits of ns (compared modulo 2^32).
#[inline]
fn later_ns(a: u32, b: u32) -> u32 {
    // (`>= 0`, not `> 0`: the same value when `b == a`, and the sign of one subtraction is
    // one flag)
    if (b.wrapping_sub(a) as i32) >= 0 {
        b
    } else {
        a
    }
}

impl<const WIN: usize, const SQ: usize> Requester<WIN, SQ> {
    const CAPACITY_OK: () = assert!(WIN >= 64 && SQ >= 1, "Requester needs WIN >= 64, SQ >= 1");

    /// A requester from validated RTS attributes; `mtu` payload bytes per packet (`1..=65535`),
    /// loss inferred by the `reorder` rule.
    pub fn new(p: &RtsParams, mtu: u32, reorder: Reorder, planted_bug: bool) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        Requester {
            sq: Ring::new(SendWqe::FILL),
            send_idx: 0,
            next_post_psn: p.sq_psn,
            next_msn: 0,
            una: p.sq_psn,
            nxt: p.sq_psn,
            slots: [TxSlot::default(); WIN],
            retx: Ring::new(Psn::new(0)),
            inflight_bytes: 0,
            tx_seq: 0,
            max_acked_seq: 0,
            max_acked_sent_ns: 0,
            sack_done_base: p.sq_psn,
            sack_done_bits: 0,
            retry: p.retry,
            tlp_deadline_ns: None,
            tlp_out: false,
            rto: RtoWindow::Open,
            mpr_psns: p.mpr_psns.min(WIN as u32),
            max_wimm: p.max_wimm,
            wimm_inflight: 0,
            reorder: Reorder {
                tx: reorder.tx.max(1),
                ns: reorder.ns,
            },
            mtu: mtu.clamp(1, u32::from(u16::MAX)),
            error: None,
            in_error: false,
            planted_bug,
            counters: RequesterCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> RequesterCounters {
        self.counters
    }

    /// Oldest unacknowledged PSN.
    pub fn una(&self) -> Psn {
        self.una
    }

    /// Next new PSN.
    pub fn nxt(&self) -> Psn {
        self.nxt
    }

    /// Payload bytes in flight (sent, not acknowledged, not declared lost).
    pub fn inflight_bytes(&self) -> u64 {
        self.inflight_bytes
    }

    /// Work requests not yet completed.
    pub fn queued(&self) -> usize {
        self.sq.len()
    }

    /// When the ACK timer or the tail loss probe fires, if armed.
    pub fn deadline_ns(&self) -> Option<u64> {
        match (self.retry.deadline_ns(), self.tlp_deadline_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Tail loss probe timeout: two time-rule windows (the time rule's window is about one
    /// unloaded RTT).
    fn arm_tlp(&mut self, now_ns: u64) {
        if self.reorder.ns == 0 || self.tlp_out || self.una == self.nxt {
            self.tlp_deadline_ns = None;
            return;
        }
        self.tlp_deadline_ns = Some(now_ns.saturating_add(2 * u64::from(self.reorder.ns)));
    }

    /// Post a work request.
    ///
    /// # Errors
    /// [`QpError::QueueFull`], [`QpError::BadWorkRequest`] (counted).
    pub fn post_send(&mut self, wr: SendWr) -> Result<(), QpError> {
        let req = WriteRequest {
            remote_va: wr.remote_va,
            rkey: wr.rkey,
            len: wr.len,
            imm: wr.imm,
            mtu_payload: self.mtu,
            start_psn: self.next_post_psn,
        };
        let result = match req.packet_count() {
            Err(_) => Err(QpError::BadWorkRequest),
            Ok(npkts) => {
                let wqe = SendWqe {
                    wr,
                    start_psn: self.next_post_psn,
                    npkts,
                    msn: self.next_msn,
                };
                // (no `?`: a full queue is a refusal, counted below like the others)
                match self.sq.push_back(wqe) {
                    Ok(()) => {
                        self.next_post_psn = self.next_post_psn.add(npkts);
                        self.next_msn = self.next_msn.wrapping_add(1);
                        Ok(())
                    }
                    Err(_) => Err(QpError::QueueFull),
                }
            }
        };
        match result {
            Ok(()) => self.counters.posted += 1,
            Err(_) => self.counters.post_refused += 1,
        }
        result
    }

    #[inline]
    fn slot(&self, psn: Psn) -> TxSlot {
        self.slots
            .get(psn.value() as usize % WIN)
            .copied()
            .unwrap_or_default()
    }

    #[inline]
    fn slot_mut(&mut self, psn: Psn) -> Option<&mut TxSlot> {
        self.slots.get_mut(psn.value() as usize % WIN)
    }

    #[inline]
    fn in_flight_range(&self, psn: Psn) -> bool {
        psn.distance_from(self.una) >= 0 && psn.distance_from(self.nxt) < 0
    }

    /// The bits `i` of a 64-PSN bitmap based at `base` whose PSN `base + i` is in flight:
    /// [`Self::in_flight_range`] of each, in one step. That range is the `nxt - una` PSNs
    /// from `una` on (`nxt - una` is at most the window, far below 2^23), so bit `i` is set
    /// exactly when `base + i - una` (mod 2^24) is below `nxt - una`.
    #[inline]
    fn in_flight_mask(&self, base: Psn) -> u64 {
        let n = self.nxt.offset_from(self.una);
        let s = base.offset_from(self.una);
        // Bits [lo, hi): from `base` when it is in flight, else from where the PSN wraps to
        // `una` (lo <= 2^24, n < 2^24: no overflow).
        let (lo, hi) = if s < n {
            (0, n - s)
        } else {
            let lo = Psn::MODULUS - s;
            (lo, lo + n)
        };
        let below = |k: u32| if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
        below(hi) & !below(lo)
    }

    #[inline]
    fn request(&self, w: &SendWqe) -> WriteRequest {
        WriteRequest {
            remote_va: w.wr.remote_va,
            rkey: w.wr.rkey,
            len: w.wr.len,
            imm: w.wr.imm,
            mtu_payload: self.mtu,
            start_psn: w.start_psn,
        }
    }

    #[inline]
    fn candidate_for(&self, w: &SendWqe, desc: PacketDesc, retransmit: bool) -> Candidate {
        // The segment straight from the packet's place in its message (the same rule as the
        // segmenter's opcode choice, without the opcode round trip).
        let segment = if w.npkts <= 1 {
            Segment::Only { imm: w.wr.imm }
        } else if desc.index == 0 {
            Segment::First
        } else if desc.index + 1 >= w.npkts {
            Segment::Last { imm: w.wr.imm }
        } else {
            Segment::Middle
        };
        #[cfg(debug_assertions)]
        assert_eq!(segment, segment_of(&desc));
        Candidate {
            segment,
            local: LocalBuf {
                handle: w.wr.local.handle,
                offset: w
                    .wr
                    .local
                    .offset
                    .wrapping_add(u64::from(desc.payload_offset)),
            },
            msn: w.msn,
            retransmit,
            avoid_ev: None,
            // Ask for an immediate ACK at the end of a message and at the window edge.
            ack_req: desc.imm.is_some() || desc.index + 1 == w.npkts,
            wimm_start: desc.index == 0 && w.wr.imm.is_some(),
            last: desc.index + 1 >= w.npkts,
            desc,
        }
    }

    /// Whether anything waits to be sent (a retransmission or an unsent packet of a queued
    /// request). When not, [`Self::peek`] says [`Stall::Idle`] and [`Self::send_new_fast`]
    /// falls back, both having changed nothing.
    #[inline]
    pub(crate) fn has_send_work(&self) -> bool {
        !self.in_error && (!self.retx.is_empty() || self.send_idx < self.sq.len())
    }

    /// Whether a retransmission is queued (it may turn out acknowledged meanwhile).
    #[inline]
    pub(crate) fn has_retransmit(&self) -> bool {
        !self.in_error && !self.retx.is_empty() && self.rto != RtoWindow::Wait
    }

    /// The stall [`Self::peek`] reports, with nothing else done, when it is one of the
    /// common ones: in ERROR (`Idle`), the CC window closed (`Cc`, or `Idle` with nothing to
    /// send), nothing to send (`Idle`), or only new data with the send window full (`Window`).
    /// `None` when `peek` would look further.
    #[inline]
    pub(crate) fn idle_stall(&self, cc: &Cc) -> Option<Stall> {
        if self.in_error {
            return Some(Stall::Idle);
        }
        let retx = !self.retx.is_empty();
        let queued = retx || self.send_idx < self.sq.len();
        if !queued {
            return Some(Stall::Idle);
        }
        if !cc.can_send(self.inflight_bytes) {
            return Some(Stall::Cc);
        }
        if retx {
            return (self.rto == RtoWindow::Wait).then_some(Stall::Cc);
        }
        if self.nxt.distance_from(self.una) as u32 >= self.mpr_psns {
            return Some(Stall::Window);
        }
        None
    }

    /// The next packet to send (not yet committed), or why none can leave.
    #[inline]
    pub(crate) fn peek(&mut self, cc: &Cc) -> Result<Candidate, Stall> {
        if self.in_error {
            return Err(Stall::Idle);
        }
        if !cc.can_send(self.inflight_bytes) {
            return Err(if self.retx.is_empty() && self.send_idx >= self.sq.len() {
                Stall::Idle
            } else {
                Stall::Cc
            });
        }
        // Retransmissions first (out of line: the common path has none queued), within the
        // loss window after a timeout.
        if !self.retx.is_empty() {
            if self.rto == RtoWindow::Wait {
                return Err(Stall::Cc);
            }
            if let Some(c) = self.peek_retx() {
                return Ok(c);
            }
        }
        let w = self.sq.get(self.send_idx).copied().ok_or(Stall::Idle)?;
        if self.nxt.distance_from(self.una) as u32 >= self.mpr_psns {
            return Err(Stall::Window);
        }
        let index = u32::try_from(self.nxt.distance_from(w.start_psn)).unwrap_or(0);
        if index == 0 && w.wr.imm.is_some() && self.wimm_inflight >= self.max_wimm {
            return Err(Stall::Wimm);
        }
        let desc = self
            .request(&w)
            .descriptor_in(index, w.npkts)
            .ok_or(Stall::Idle)?;
        Ok(self.candidate_for(&w, desc, false))
    }

    /// [`Self::peek`] + [`Self::commit`] for the common packet: the next new packet of the
    /// work request being sent, with nothing waiting for retransmission, window, CC and
    /// immediate room, on the EV `pick` gives. Same effect as that pair, without building
    /// the candidate.
    #[inline(always)]
    pub(crate) fn send_new_fast(
        &mut self,
        cc: &Cc,
        now_ns: u64,
        pick: impl FnOnce() -> Option<EvPick>,
    ) -> FastTx {
        if self.in_error || !self.retx.is_empty() || !cc.can_send(self.inflight_bytes) {
            return FastTx::Fallback;
        }
        let Some(w) = self.sq.get(self.send_idx) else {
            return FastTx::Fallback;
        };
        if self.nxt.distance_from(self.una) as u32 >= self.mpr_psns {
            return FastTx::Fallback;
        }
        let Ok(index) = u32::try_from(self.nxt.distance_from(w.start_psn)) else {
            return FastTx::Fallback;
        };
        if index >= w.npkts || (index == 0 && w.wr.imm.is_some()) {
            // (a new Write-with-Immediate checks `max_wimm` in `peek`)
            return FastTx::Fallback;
        }
        // (`index < npkts`: packet `index` is the one at `nxt`)
        let Some(mut tx) = self.packet_of(w, index) else {
            return FastTx::Fallback;
        };
        let Some(ev) = pick() else {
            return FastTx::NoEv;
        };
        tx.ev = ev;
        let (last, payload_len) = (tx.ack_req, tx.payload_len);
        // `commit` for a new transmission that is not the start of a Write-with-Immediate.
        self.nxt = self.nxt.add(1);
        self.counters.data_sent += 1;
        if last {
            self.send_idx += 1;
        }
        self.record_sent(tx.psn, ev.index, ev.plane, payload_len, now_ns);
        FastTx::Sent(tx)
    }

    /// Whether [`Self::send_new_run`] may send: not in ERROR, no retransmission queued, the
    /// CC window open and a work request waiting. When not, it returns `(0, false)` having
    /// changed nothing (given a non-empty `out`).
    #[inline(always)]
    pub(crate) fn new_run_may_send(&self, cc: &Cc) -> bool {
        !self.in_error
            && self.retx.is_empty()
            && self.inflight_bytes < cc.cwnd_bytes()
            && self.send_idx < self.sq.len()
    }

    /// [`Self::send_new_fast`] repeated: up to `out.len()` new packets, written straight into
    /// `out` as descriptors with the header `hdr`, one run per work request (the next work
    /// request's run follows at once when one ends its work request with room left). The
    /// error state and the retransmission queue are checked once, each work request once per
    /// run (nothing in a run changes them); the send window's and the CC window's room are
    /// turned into a packet count once per run (each packet of a run but the work request's
    /// last is full-sized); the EV is picked per packet; the retry and tail-probe timers are
    /// armed once at the end (with the same `now_ns` that gives what arming per packet
    /// gives). `sprayer` picks each packet's EV; the runs end after a pick that served a
    /// skip-once flag (the sprayer's skip count is no longer `skips_seen`). Returns the
    /// packets sent and whether the last run ended for a reason other than the fast path
    /// having nothing (`out` full, the work request done, `pick` said so): then another
    /// call may follow. The packets and every effect are those of as many `send_new_fast`
    /// calls. `out[returned]` is scratch: a run lays out its first packet before the pick.
    #[inline(always)]
    pub(crate) fn send_new_run<const E: usize, const P: usize>(
        &mut self,
        cc: &Cc,
        now_ns: u64,
        hdr: &DataHdr,
        out: &mut [TxPacket],
        sprayer: &mut Sprayer<E, P>,
        skips_seen: u64,
    ) -> (usize, bool) {
        if self.in_error || !self.retx.is_empty() {
            return (0, false);
        }
        // The first run's first checks, before anything else: most calls that send nothing
        // end here (the CC window closed, no work request waiting).
        if !out.is_empty() && !self.new_run_may_send(cc) {
            return (0, false);
        }
        // The CC window only changes on an ACK.
        let cwnd = cc.cwnd_bytes();
        // A run that ends its work request with room left in `out` goes on with the next
        // work request's at once, as another call would (nothing checked above changes in a
        // run); not after a pick that served a skip-once flag (the caller syncs the EV states
        // first) nor after a run that sent nothing.
        // The send window's room, in PSNs: each run takes one per packet (`nxt` advances, `una`
        // does not; the room is below 2^23, so the distance only grows).
        let mut psn_room = self
            .mpr_psns
            .saturating_sub(self.nxt.distance_from(self.una) as u32);
        let (mut n, mut more) = (0, true);
        while let Some(rest) = out.get_mut(n..).filter(|r| more && !r.is_empty()) {
            let cc_room = cwnd.saturating_sub(self.inflight_bytes);
            let (k, go_on) =
                self.send_wr_run(cc_room, psn_room, now_ns, hdr, rest, sprayer, skips_seen);
            // (`k` <= `psn_room`)
            psn_room = psn_room.wrapping_sub(k as u32);
            n += k;
            more = go_on;
            if k == 0 || sprayer.counters().skips != skips_seen {
                break;
            }
        }
        if n > 0 {
            self.counters.data_sent += n as u64;
            self.retry.arm(now_ns);
            self.arm_tlp(now_ns);
        }
        (n, more)
    }

    /// [`Self::send_new_run`]'s run on the work request being sent, with `cc_room` bytes left
    /// in the CC window (`cwnd - inflight_bytes`, 0 when closed) and `psn_room` PSNs in the
    /// send window (`mpr_psns - (nxt - una)`, saturating): the packets and every effect of as
    /// many `send_new_fast` calls but the data counter and the timers (the caller's, once for
    /// its runs). Returns the packets sent and whether the run ended for a reason other than
    /// the fast path having nothing.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn send_wr_run<const E: usize, const P: usize>(
        &mut self,
        cc_room: u64,
        room: u32,
        now_ns: u64,
        hdr: &DataHdr,
        out: &mut [TxPacket],
        sprayer: &mut Sprayer<E, P>,
        skips_seen: u64,
    ) -> (usize, bool) {
        // The CC window first: a run after one that filled it ends here.
        if !out.is_empty() && cc_room == 0 {
            return (0, false);
        }
        let Some(w) = self.sq.get(self.send_idx) else {
            return (0, false);
        };
        // `nxt.distance_from(start_psn)`, which must not be negative (below 2^23).
        let index0 = self.nxt.offset_from(w.start_psn);
        if index0 >= Psn::HALF {
            return (0, false);
        }
        if index0 == 0 && w.wr.imm.is_some() {
            // (a new Write-with-Immediate checks `max_wimm` in `peek`)
            return (0, false);
        }
        // The per-packet checks of `send_new_fast` that the run itself cannot change, decided
        // once: the packets left in the work request and the window's room (`nxt` advances one
        // per packet, `una` not at all). Its offset checks pass for every packet of a queued
        // work request: each passed `packet_count` with this `mtu` (fixed in `new`, at least
        // 1), so `npkts = max(ceil(len / mtu), 1)` and `remote_va + len` fits, and a packet's
        // offset `index * mtu` (`index < npkts`) is below `len` or 0.
        let mtu = self.mtu;
        let left = w.npkts.saturating_sub(index0);
        if !out.is_empty() && (room == 0 || left == 0) {
            return (0, false);
        }
        let limit = u64::from(left.min(room));
        // Packet `j` of the run may leave while `inflight + j * mtu < cwnd` (`can_send`), every
        // packet before it being full-sized (each carries the `min(len - offset, mtu)` of
        // `send_new_fast`: `mtu` bytes but the work request's last, `len - (npkts - 1) * mtu`).
        // (`mtu` <= u16::MAX: `new` clamps it)
        let step = u64::from(mtu);
        let by_cc = match cc_room {
            0 => 0,
            room => match room.checked_div(step) {
                Some(q) => q + u64::from(room % step != 0),
                None => u64::MAX,
            },
        };
        let limit = usize::try_from(limit.min(by_cc))
            .unwrap_or(usize::MAX)
            .min(out.len());
        // The header fields every packet of the run shares.
        let tmpl = TxPacket {
            src_qpn: hdr.src_qpn,
            dest_qpn: hdr.dest_qpn,
            msn: w.msn,
            ev_format: hdr.ev_format,
            tx_ts_ns: now_ns as u32,
            echo_ts_ns: 0,
            retransmit: false,
            ..TxPacket::FILL
        };
        let offset0 = index0.wrapping_mul(mtu);
        // The run's first packet's (each next one's addresses are `mtu` further on).
        let cur = TxPacket {
            body: TxBody::Write {
                segment: Segment::Middle,
                reth: RethRepr {
                    va: w.wr.remote_va.wrapping_add(u64::from(offset0)),
                    rkey: w.wr.rkey,
                    dma_len: mtu,
                },
                local: LocalBuf {
                    handle: w.wr.local.handle,
                    offset: w.wr.local.offset.wrapping_add(u64::from(offset0)),
                },
            },
            ..tmpl
        };
        // Packet `k` of the run has PSN `nxt + k` and transmission number `tx_seq + 1 + k`.
        let (psn0, tx_seq1) = (self.nxt, self.tx_seq.wrapping_add(1));
        let (mut k, mut more) = (0usize, limit == out.len());
        // Packet `k_last` of the run (if it gets there) is the work request's last (with
        // `left` 0 the run is empty).
        let k_last = left.wrapping_sub(1) as usize;
        // Each packet's TX slot: this one with its transmission number and EV (mtu <=
        // u16::MAX: `new` clamps it).
        let slot0 = TxSlot {
            tx_seq: 0,
            sent_ns: now_ns as u32,
            ev: 0,
            len: mtu as u16,
            plane: 0,
            flags: F_INFLIGHT,
        };
        // The run stops after packet `k_stop`: the work request's last, or one whose pick
        // served a skip-once flag (the sprayer's skip count is no longer `skips_seen`). Only
        // the general pick serves one: the count is checked after it, and here for picks made
        // before the run.
        let mut k_stop = k_last;
        if sprayer.counters().skips != skips_seen {
            k_stop = 0;
        }
        // (`left` > 0: no overflow)
        let mut k_end = limit.min(k_stop + 1);
        // Packet `k` of the run (PSN `i`, unmasked) on `ev`, written into `out[k]`: the packet
        // before (the template for the run's first) copied slot to slot, with the fields that
        // differ changed (the fields all packets of the run share are not kept in registers),
        // and its TX slot. `false` (nothing written) when `out` has no slot `k`.
        let value_base = hdr.value_base;
        // (packet `k`'s transmission number is its PSN `psn0 + k`, unmasked, plus `d`)
        let d = tx_seq1.wrapping_sub(psn0.value());
        let put =
            |out: &mut [TxPacket], slots: &mut [TxSlot; WIN], k: usize, i: u32, ev: EvPick| {
                let p = match k.checked_sub(1) {
                    None => match out.first_mut() {
                        // (`cur`, written before the run's first pick)
                        Some(p) => p,
                        None => return false,
                    },
                    Some(j) => match out.get_mut(j..=k) {
                        Some([prev, p]) => {
                            *p = *prev;
                            // The offset moves on by `mtu` (neither it nor the remote address
                            // wraps, see above, so this is the sum with the work request's
                            // addresses)
                            match &mut p.body {
                                TxBody::Write { reth, local, .. } => {
                                    reth.va = reth.va.wrapping_add(u64::from(mtu));
                                    local.offset = local.offset.wrapping_add(u64::from(mtu));
                                }
                                // (every packet of the run is a write)
                                _ => core::hint::cold_path(),
                            }
                            p
                        }
                        _ => return false,
                    },
                };
                // (`i` = `psn0 + k` modulo 2^32, unmasked: enough for both wrapping sums)
                let (psn, tx_seq) = (Psn::new(i), i.wrapping_add(d));
                p.psn = psn;
                p.evx = EvxRepr {
                    ev_index: ev.index,
                    plane: ev.plane,
                    ev_value: value_base.wrapping_add(u32::from(ev.index)),
                };
                // (the segment, ACK request and payload length are the template's and the
                // packet before's, `Middle`, none and `mtu`: the message's last and first
                // packets are marked after the loop)
                // `commit` for a new transmission that is not the start of a
                // Write-with-Immediate.
                if let Some(s) = slots.get_mut(psn.value() as usize % WIN) {
                    *s = TxSlot {
                        tx_seq,
                        ev: ev.index,
                        plane: ev.plane,
                        ..slot0
                    };
                }
                true
            };
        let slots = &mut self.slots;
        // The run's first packet's shared fields, before its pick (the slot is scratch when
        // the pick fails: see `Engine::poll_transmit_batch`).
        if let Some(p) = out.first_mut().filter(|_| k_end > 0) {
            *p = cur;
        }
        while k < k_end {
            // One packet the general way: the run's first (its pick the common one if it
            // can), or one after a common pick failed (the general pick).
            let fast = if k == 0 { sprayer.next_ev_fast() } else { None };
            let ev = match fast {
                Some(ev) => ev,
                None => {
                    let Some(ev) = sprayer.next_ev_slow() else {
                        more = false;
                        break;
                    };
                    if sprayer.counters().skips != skips_seen {
                        k_stop = k_stop.min(k);
                        k_end = k_end.min(k + 1);
                    }
                    ev
                }
            };
            if !put(out, slots, k, psn0.value().wrapping_add(k as u32), ev) {
                break;
            }
            k += 1;
            // Then the common picks, in a loop with no call (its values stay in registers),
            // each packet from the one before (`k` >= 1, `k_end <= out.len()`).
            let Some(run) = out.get_mut(..k_end) else {
                break;
            };
            let mut i = psn0.value().wrapping_add(k as u32);
            while k < run.len() {
                let Some(ev) = sprayer.next_ev_fast() else {
                    break;
                };
                if !put(run, slots, k, i, ev) {
                    break;
                }
                k += 1;
                i = i.wrapping_add(1);
            }
        }
        // (a failed pick ends the run before `k_stop`)
        if k > k_stop {
            more = true;
        }
        // The message's last packet (the run's last), which asks for an immediate ACK and
        // carries the rest of the message, `short` bytes fewer than `mtu` (at most `mtu` <=
        // u16::MAX: exact as `u16`).
        let mut short = 0;
        if k > k_last {
            let last_len =
                w.wr.len
                    .wrapping_sub(w.npkts.wrapping_sub(1).wrapping_mul(mtu))
                    .min(mtu);
            short = mtu - last_len;
            if let Some(p) = out.get_mut(k_last) {
                p.ack_req = true;
                if let TxBody::Write { segment, reth, .. } = &mut p.body {
                    *segment = Segment::Last { imm: w.wr.imm };
                    reth.dma_len = last_len;
                }
            }
            if let Some(s) = self
                .slots
                .get_mut(psn0.add(k_last as u32).value() as usize % WIN)
            {
                s.len = last_len as u16;
            }
            self.send_idx += 1;
        }
        // The message's first packet (`Only` when it is also its last).
        if let Some(TxBody::Write { segment, .. }) = out
            .first_mut()
            .filter(|_| index0 == 0 && k > 0)
            .map(|p| &mut p.body)
        {
            *segment = if w.npkts <= 1 {
                Segment::Only { imm: w.wr.imm }
            } else {
                Segment::First
            };
        }
        self.nxt = psn0.add(k as u32);
        self.tx_seq = self.tx_seq.wrapping_add(k as u32);
        // Every packet of the run carries `mtu` bytes but the short one, `short` fewer.
        // (Saturating once for the run is saturating per packet: the lengths are not negative;
        // the sum cannot overflow: at most `out.len()` packets of at most 65,535 bytes.)
        let run_bytes = k as u64 * u64::from(mtu) - u64::from(short);
        self.inflight_bytes = self.inflight_bytes.saturating_add(run_bytes);
        (k, more)
    }

    /// The first retransmission still wanted; entries acknowledged meanwhile are dropped.
    #[inline(never)]
    fn peek_retx(&mut self) -> Option<Candidate> {
        loop {
            let (s, w, index) = self.front_retx()?;
            // (its descriptor exists: the request passed `packet_count`, so no offset
            // overflows)
            if let Some(desc) = self.request(&w).descriptor_in(index, w.npkts) {
                let mut c = self.candidate_for(&w, desc, true);
                c.avoid_ev = (s.flags & F_AVOID != 0).then_some(s.ev);
                return Some(c);
            }
            self.retx.pop_front();
        }
    }

    /// The queue's first retransmission still wanted (entries acknowledged meanwhile, or
    /// held by no queued work request, are dropped): its TX slot, the work request holding it
    /// and its packet index there. It stays queued.
    #[inline(always)]
    fn front_retx(&mut self) -> Option<(TxSlot, SendWqe, u32)> {
        while let Some(&psn) = self.retx.front() {
            let s = self.slot(psn);
            if self.in_flight_range(psn) && s.flags & F_PENDING != 0 {
                // The first work request holding `psn` (`npkts < 2^23`, so the unsigned
                // compare is `0 <= d < npkts`).
                let d = |w: &SendWqe| psn.distance_from(w.start_psn) as u32;
                if let Some(w) = self.sq.iter().find(|w| d(w) < w.npkts) {
                    return Some((s, *w, d(w)));
                }
            }
            self.retx.pop_front();
        }
        None
    }

    /// Whether the retransmission queue holds an entry (it may turn out acknowledged).
    #[inline(always)]
    pub(crate) fn retx_queued(&self) -> bool {
        !self.retx.is_empty()
    }

    /// [`Self::peek`] + [`Self::commit`] when `peek` would return [`Self::peek_retx`]'s
    /// candidate: the caller checked that the requester is not in ERROR, the CC window is open
    /// and the loss window does not wait (what [`Self::idle_stall`] returning `None` says
    /// with a retransmission queued). The first retransmission still wanted leaves on the EV
    /// `pick` gives (picked again once when that is the EV its lost copy took and it was to be
    /// avoided), the same packet and the same effects as that pair, without building the
    /// candidate. [`RetxTx::Drained`] when the queue held only acknowledged entries: then
    /// `peek` goes on to new data.
    #[inline]
    pub(crate) fn send_retx(
        &mut self,
        now_ns: u64,
        mut pick: impl FnMut() -> Option<EvPick>,
    ) -> RetxTx {
        loop {
            let Some((s, w, index)) = self.front_retx() else {
                return RetxTx::Drained;
            };
            let Some(mut tx) = self.packet_of(&w, index) else {
                self.retx.pop_front();
                continue;
            };
            let Some(mut ev) = pick() else {
                return RetxTx::NoEv;
            };
            if s.flags & F_AVOID != 0 && ev.index == s.ev {
                if let Some(e2) = pick() {
                    ev = e2;
                }
            }
            tx.ev = ev;
            // `commit` for a retransmission.
            self.retransmitted();
            self.record_sent(tx.psn, ev.index, ev.plane, tx.payload_len, now_ns);
            return RetxTx::Sent(tx);
        }
    }

    /// Packet `index` of work request `w` (the checks of `descriptor_in`; `None` when they
    /// fail), on a placeholder EV (index 0, plane 0) for the caller to set. The last packet
    /// of a message asks for an immediate ACK (see `candidate_for`: the immediate is on the
    /// last packet only).
    #[inline(always)]
    fn packet_of(&self, w: &SendWqe, index: u32) -> Option<NewTx> {
        if self.mtu == 0 {
            return None;
        }
        let offset = index.checked_mul(self.mtu)?;
        let payload_len = w.wr.len.checked_sub(offset)?.min(self.mtu);
        let remote_va = w.wr.remote_va.checked_add(u64::from(offset))?;
        let last = index + 1 >= w.npkts;
        let segment = if w.npkts <= 1 {
            Segment::Only { imm: w.wr.imm }
        } else if index == 0 {
            Segment::First
        } else if last {
            Segment::Last { imm: w.wr.imm }
        } else {
            Segment::Middle
        };
        Some(NewTx {
            psn: w.start_psn.add(index),
            msn: w.msn,
            segment,
            remote_va,
            rkey: w.wr.rkey,
            payload_len,
            local: LocalBuf {
                handle: w.wr.local.handle,
                offset: w.wr.local.offset.wrapping_add(u64::from(offset)),
            },
            ack_req: last,
            ev: EvPick { index: 0, plane: 0 },
        })
    }

    /// The candidate from [`Self::peek`] left on `ev` / `plane` at `now_ns`.
    #[inline]
    pub(crate) fn commit(&mut self, c: &Candidate, ev: u16, plane: u8, now_ns: u64) {
        if c.retransmit {
            self.retransmitted();
        } else {
            self.nxt = self.nxt.add(1);
            self.counters.data_sent += 1;
            if c.wimm_start {
                self.wimm_inflight = self.wimm_inflight.saturating_add(1);
            }
            // A new transmission comes from the work request at `send_idx` with
            // `desc.index == old nxt - start_psn`: after it, nxt - start_psn >= npkts exactly
            // when it was the last packet.
            if c.last {
                self.send_idx += 1;
            }
        }
        self.record_sent(c.desc.psn, ev, plane, c.desc.payload_len, now_ns);
    }

    /// The retransmission at the queue's front left: off the queue, counted, and the loss
    /// window after a timeout closes behind it.
    #[inline(always)]
    fn retransmitted(&mut self) {
        self.retx.pop_front();
        self.counters.retransmits += 1;
        if self.rto == RtoWindow::One {
            self.rto = RtoWindow::Wait;
        }
    }

    /// A transmission of `psn` with `payload_len` bytes on EV `ev` / `plane` at `now_ns`: the
    /// next transmission number, its TX slot in flight, the bytes in flight, the retry and
    /// tail-probe timers.
    #[inline(always)]
    fn record_sent(&mut self, psn: Psn, ev: u16, plane: u8, payload_len: u32, now_ns: u64) {
        self.tx_seq = self.tx_seq.wrapping_add(1);
        // (payload_len <= mtu <= u16::MAX)
        let len = payload_len.min(u32::from(u16::MAX)) as u16;
        let tx_seq = self.tx_seq;
        if let Some(s) = self.slot_mut(psn) {
            *s = TxSlot {
                tx_seq,
                sent_ns: now_ns as u32,
                ev,
                len,
                plane,
                flags: F_INFLIGHT,
            };
        }
        self.inflight_bytes = self.inflight_bytes.saturating_add(u64::from(len));
        self.retry.arm(now_ns);
        self.arm_tlp(now_ns);
    }

    /// A tally of acknowledged slots from the requester's current state.
    #[inline]
    fn ack_tally(&self) -> AckTally {
        AckTally {
            max_seq: self.max_acked_seq,
            max_sent: self.max_acked_sent_ns,
            acked: 0,
            freed: 0,
            credited: 0,
        }
    }

    /// The slots `t` took are acknowledged: the newest acknowledged transmission and the bytes
    /// in flight follow.
    #[inline]
    fn apply_tally(&mut self, t: &AckTally) {
        self.max_acked_seq = t.max_seq;
        self.max_acked_sent_ns = t.max_sent;
        self.inflight_bytes = self.inflight_bytes.saturating_sub(t.freed);
    }

    /// `psn` is acknowledged, into `t` ([`AckTally::take`]; [`Self::apply_tally`] applies it).
    fn mark_acked(&mut self, psn: Psn, evs: &mut DeliveryCredits<'_>, t: &mut AckTally) {
        if let Some(s) = self.slots.get_mut(psn.value() as usize % WIN) {
            t.take(s, evs);
        }
    }

    /// [`Self::mark_acked`] for every PSN of `[una, cum)`, then `una = cum` (`cum` is within
    /// `[una, nxt]`): one pass, tallied in `t`.
    fn ack_through(&mut self, cum: Psn, evs: &mut DeliveryCredits<'_>, t: &mut AckTally) {
        let n = cum.distance_from(self.una).max(0) as usize;
        let i = self.una.value() as usize % WIN;
        if (1usize << 24).is_multiple_of(WIN) {
            // The slots of `una, una + 1, ..` are the ring from `i` on, wrapping at WIN (the
            // PSN's own wrap when WIN divides the PSN space); past WIN PSNs they repeat,
            // already acknowledged.
            let n = n.min(WIN);
            let (below, from_i) = self.slots.split_at_mut(i.min(WIN));
            let k = n.min(from_i.len());
            // (a sub-slice, not `take`: one bound per loop; `k` is within the slice)
            let walk = from_i
                .split_at_mut_checked(k)
                .map(|(w, _)| w)
                .unwrap_or_default();
            for s in walk {
                t.take(s, evs);
            }
            for s in below.iter_mut().take(n - k) {
                t.take(s, evs);
            }
        } else {
            let mut psn = self.una;
            for _ in 0..n {
                if let Some(s) = self.slots.get_mut(psn.value() as usize % WIN) {
                    t.take(s, evs);
                }
                psn = psn.add(1);
            }
        }
        self.una = cum;
    }

    /// Declare `psn` lost (it is in flight): queue its retransmission.
    fn mark_pending(&mut self, psn: Psn, avoid: bool) -> Option<TxSlot> {
        let s = self.slots.get_mut(psn.value() as usize % WIN)?;
        if s.flags & F_INFLIGHT == 0 {
            return None;
        }
        let before = *s;
        s.flags = F_PENDING | if avoid { F_AVOID } else { 0 };
        self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(before.len));
        // Cannot overflow: each PSN of the window is queued at most once.
        let _ = self.retx.push_back(psn);
        Some(before)
    }

    /// Queues the newest in-flight PSN for retransmission on another EV (a tail loss probe).
    fn send_tail_probe(&mut self) {
        let mut psn = self.nxt;
        while psn != self.una {
            psn = psn.sub(1);
            if self.mark_pending(psn, true).is_some() {
                self.counters.tail_probes += 1;
                self.tlp_out = true;
                return;
            }
        }
    }

    /// After an ACK timeout: every unacknowledged PSN of `[una, nxt)` is queued for
    /// retransmission **in PSN order**, the oldest (`una`) first, each once.
    ///
    /// The queue is rebuilt rather than appended to: PSNs already waiting from an earlier loss
    /// or timeout would otherwise keep their old place while the ones just sent (and lost
    /// again) go behind them, so with a window that halves at every timeout the queue only
    /// rotates a few entries per (doubling) backoff period and `una` can wait behind dozens of
    /// PSNs the peer cannot acknowledge (beyond its 64-bit SACK bitmap) for seconds after the
    /// path came back. That was the `mrc-1ev` stuck-PSN bug.
    fn requeue_all_unacked(&mut self) {
        self.retx.clear();
        let mut psn = self.una;
        while psn != self.nxt {
            if let Some(s) = self.slots.get_mut(psn.value() as usize % WIN) {
                if s.flags & F_INFLIGHT != 0 {
                    self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(s.len));
                }
                if s.flags & (F_INFLIGHT | F_PENDING) != 0 {
                    s.flags = F_PENDING | F_AVOID;
                    // Cannot overflow: at most `nxt - una <= WIN` entries after the clear.
                    let _ = self.retx.push_back(psn);
                }
            }
            psn = psn.add(1);
        }
    }

    /// A coalesced ACK. Returns whether `una` advanced.
    pub(crate) fn handle_ack<const E: usize>(
        &mut self,
        now_ns: u64,
        a: &AckRepr,
        rtt_ns: u64,
        ev: &mut EvTable<E>,
        cc: &mut Cc,
    ) -> bool {
        self.counters.acks += 1;
        // Both loops below tally in registers; applied once after them.
        let mut t = self.ack_tally();
        let mut credits = ev.credits();
        let start = self.una;
        let cum_ok =
            a.cum_psn.distance_from(self.una) >= 0 && a.cum_psn.distance_from(self.nxt) <= 0;
        if cum_ok {
            self.ack_through(a.cum_psn, &mut credits, &mut t);
        } else {
            self.counters.acks_stale += 1;
        }
        // SACK bits, skipping those an earlier ACK already applied.
        // (a signed distance in `0..64` is a 24-bit difference below 64)
        let shift = a.sack_base.offset_from(self.sack_done_base);
        let seen = if shift < 64 {
            self.sack_done_bits >> shift
        } else {
            0
        };
        // Bits below `nxt` are applied below (or are before `una`, hence acknowledged); the
        // in-flight bits (neither loop below moves `una` or `nxt`: one mask for both).
        let (below_nxt, in_flight) = if a.sack_base == self.una {
            // The common ACK: its SACK starts at its cumulative PSN, now `una`. Both masks are
            // then the `nxt - una` bits from bit 0 (`nxt - una` is at most the window, far
            // below 2^23: its 24-bit distance is that count).
            let n = self.nxt.offset_from(self.una);
            let m = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
            (m, m)
        } else {
            let below_nxt = match self.nxt.distance_from(a.sack_base) {
                d if d >= 64 => u64::MAX,
                d if d <= 0 => 0,
                d => (1u64 << d) - 1,
            };
            (below_nxt, self.in_flight_mask(a.sack_base))
        };
        self.sack_done_base = a.sack_base;
        self.sack_done_bits = a.sack_bitmap & below_nxt;
        let mut bits = a.sack_bitmap & !seen & in_flight;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            self.mark_acked(a.sack_base.add(i), &mut credits, &mut t);
        }
        self.apply_tally(&t);
        // The packet that triggered this ACK arrived: its send time (echoed, `rtt_ns` ago) is
        // a delivered transmission too, even when its PSN lies beyond the SACK bitmap.
        if rtt_ns > 0 {
            let echoed = (now_ns as u32).wrapping_sub(rtt_ns as u32);
            self.max_acked_sent_ns = later_ns(self.max_acked_sent_ns, echoed);
        }
        // The deliveries count for the QP-wide loss rate before any loss this ACK reveals.
        ev.note_qp_deliveries(t.credited);
        // Loss inference: holes below the highest SACKed PSN, old enough.
        if a.sack_bitmap != 0 {
            let hi = 63 - a.sack_bitmap.leading_zeros();
            let mut holes = !a.sack_bitmap & ((1u64 << hi) - 1) & in_flight;
            while holes != 0 {
                let i = holes.trailing_zeros();
                holes &= holes - 1;
                let psn = a.sack_base.add(i);
                let s = self.slot(psn);
                let age = self.max_acked_seq.wrapping_sub(s.tx_seq) as i32;
                let gap_ns = self.max_acked_sent_ns.wrapping_sub(s.sent_ns) as i32;
                if s.flags & F_INFLIGHT != 0
                    && age >= self.reorder.tx as i32
                    && i64::from(gap_ns) >= i64::from(self.reorder.ns)
                {
                    if let Some(lost) = self.mark_pending(psn, true) {
                        self.counters.losses_inferred += 1;
                        let _ = ev.handle_loss(lost.ev, now_ns);
                        cc.on_nack(now_ns, u64::from(lost.len));
                    }
                }
            }
        }
        // Per-EV feedback. Deliveries were credited above, PSN by PSN, to the EV each one
        // took. The RTT sample (the echoed timestamp) is the triggering packet's, so it goes
        // to the ACK's EV. ECN: the ACK carries CE marks only per plane (`ecn_plane_mask`),
        // not per EV, so the ACK's EV gets a CE sample when its own plane saw a mark in the
        // interval — never for a mark on another plane.
        // (a plane beyond the mask's 8 bits saw no mark)
        let ecn_marked = a.ce_count > 0 && a.plane < 8 && (a.ecn_plane_mask >> a.plane) & 1 != 0;
        let fb = AckFeedback {
            delivered: 0,
            ecn_marked,
            rtt_ns,
        };
        let _ = ev.handle_ack(a.ev_index, now_ns, fb);
        cc.on_ack(now_ns, t.acked, a.ce_count > 0, rtt_ns);
        let progress = self.una != start;
        if progress {
            self.retry.on_progress(now_ns, self.una != self.nxt);
        }
        self.tlp_out = false;
        self.rto = RtoWindow::Open;
        self.arm_tlp(now_ns);
        progress
    }

    /// A NACK from the responder.
    pub(crate) fn handle_nack<const E: usize>(
        &mut self,
        now_ns: u64,
        n: &NackRepr,
        ev: &mut EvTable<E>,
        cc: &mut Cc,
    ) -> NackEffect {
        if n.reason.is_fatal() || n.reason == NackReason::InvalidQp {
            self.counters.nacks_fatal += 1;
            return NackEffect::Fatal(n.reason);
        }
        // The peer answered: the loss window after a timeout opens.
        self.rto = RtoWindow::Open;
        let s = self.slot(n.psn);
        if !self.in_flight_range(n.psn) || s.flags & F_INFLIGHT == 0 {
            self.counters.nacks_stale += 1;
            return NackEffect::None;
        }
        match n.reason {
            NackReason::Trimmed | NackReason::TrimmedLastHop => {
                self.counters.nacks_trimmed += 1;
                let _ = ev.handle_trim(s.ev);
                cc.on_trim(now_ns, u64::from(s.len));
                if self.planted_bug && n.reason == NackReason::TrimmedLastHop {
                    // Planted bug (tests only): the NACK is taken as the packet's ACK.
                    let mut t = self.ack_tally();
                    self.mark_acked(n.psn, &mut ev.credits(), &mut t);
                    self.apply_tally(&t);
                    ev.note_qp_deliveries(t.credited);
                } else {
                    let _ = self.mark_pending(n.psn, false);
                }
            }
            NackReason::OutOfWindow => {
                self.counters.nacks_out_of_window += 1;
                let _ = self.mark_pending(n.psn, false);
            }
            _ => {
                // TOO_MANY_WIMM: the ACK timeout resends it once the responder has room.
                self.counters.nacks_too_many_wimm += 1;
            }
        }
        NackEffect::None
    }

    /// The ACK timer fired at `now_ns`. Returns `Err` when the retry budget is spent.
    pub(crate) fn handle_timeout(&mut self, now_ns: u64, cc: &mut Cc) -> Result<(), ()> {
        if self.tlp_deadline_ns.is_some_and(|d| d <= now_ns) {
            self.tlp_deadline_ns = None;
            self.send_tail_probe();
        }
        match self.retry.deadline_ns() {
            Some(d) if d <= now_ns => {}
            _ => return Ok(()),
        }
        if self.una == self.nxt {
            self.retry.on_progress(now_ns, false);
            return Ok(());
        }
        self.counters.timeouts += 1;
        match self.retry.on_timeout(now_ns) {
            RetryDecision::Retry { .. } => {
                cc.on_timeout(now_ns);
                self.requeue_all_unacked();
                self.rto = RtoWindow::One;
                Ok(())
            }
            RetryDecision::GiveUp { .. } => {
                self.counters.give_ups += 1;
                Err(())
            }
        }
    }

    /// Enter ERROR: nothing more is sent; the head WQE will complete with `cause`, the rest
    /// with [`CompletionError::Flushed`].
    pub(crate) fn enter_error(&mut self, cause: CompletionError) {
        if !self.in_error {
            self.in_error = true;
            self.error = Some(cause);
        }
        self.retx.clear();
    }

    /// Whether [`Self::poll_completion`] would do anything (return a completion or retire an
    /// unsignaled work request): the head work request is done or the QP is in ERROR.
    #[inline]
    pub(crate) fn completion_waits(&self) -> bool {
        self.sq
            .front()
            .is_some_and(|h| self.in_error || self.una.distance_from(h.start_psn.add(h.npkts)) >= 0)
    }

    /// The next completion of this requester, in posting order.
    #[inline(always)]
    pub(crate) fn poll_completion(&mut self, qpn: u32) -> Option<Completion> {
        for _ in 0..SQ {
            let head = self.sq.front()?;
            let end = head.start_psn.add(head.npkts);
            let done = self.una.distance_from(end) >= 0;
            if !done && !self.in_error {
                return None;
            }
            // (what the completion needs, read in place: the popped request is not copied out)
            let (wr_id, signaled, imm, start_psn) = (
                head.wr.wr_id,
                head.wr.signaled,
                head.wr.imm.is_some(),
                head.start_psn,
            );
            let _ = self.sq.pop_front();
            let status = if done {
                Ok(())
            } else {
                Err(self.error.take().unwrap_or(CompletionError::Flushed))
            };
            self.send_idx = self.send_idx.saturating_sub(1);
            if imm && (done || self.nxt.distance_from(start_psn) > 0) {
                self.wimm_inflight = self.wimm_inflight.saturating_sub(1);
            }
            if status.is_err() {
                self.counters.flushed += 1;
            }
            if signaled || status.is_err() {
                self.counters.completions += 1;
                return Some(Completion {
                    qpn,
                    wr_id,
                    kind: CompletionKind::Send,
                    status,
                });
            }
        }
        None
    }

    /// Mark every in-flight packet that left on `plane` lost (the port went down).
    pub(crate) fn plane_down(&mut self, plane: u8) {
        let mut psn = self.una;
        while psn != self.nxt {
            let s = self.slot(psn);
            if s.plane == plane && s.flags & F_INFLIGHT != 0 {
                let _ = self.mark_pending(psn, true);
            }
            psn = psn.add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::retry::{AckTimeout, RetryPolicy};

    fn requester() -> Requester<512, 4> {
        let p = RtsParams {
            sq_psn: Psn::new(0),
            mpr_psns: 512,
            max_wimm: 1,
            retry: RetryState::new(RetryPolicy::Forever, AckTimeout::MAX),
        };
        Requester::new(&p, 4096, Reorder { tx: 3, ns: 0 }, false)
    }

    /// Every refused post is counted, a full send queue included, and changes nothing.
    #[test]
    fn refused_posts_are_counted() {
        let mut r = requester();
        let wr = |len| SendWr {
            wr_id: 1,
            local: LocalBuf::default(),
            remote_va: 0x1000,
            rkey: 7,
            len,
            imm: None,
            signaled: true,
        };
        let mut posted = 0;
        while r.post_send(wr(100)).is_ok() {
            posted += 1;
        }
        assert_eq!(r.post_send(wr(100)), Err(QpError::QueueFull));
        assert_eq!(r.counters.posted, posted);
        assert_eq!(r.counters.post_refused, 2);
        let next = r.next_post_psn;
        assert_eq!(r.post_send(wr(100)), Err(QpError::QueueFull));
        assert_eq!((r.counters.post_refused, r.next_post_psn), (3, next));
    }

    /// `later_ns` is the later of the two modulo 2^32 (the first when they tie or are
    /// 2^31 apart), for pairs around 0, 2^31 and at random.
    #[test]
    fn later_ns_is_the_later_modulo_2_32() {
        let old = |a: u32, b: u32| if (b.wrapping_sub(a) as i32) > 0 { b } else { a };
        let mut r = crate::engine::rng::Rng::new(3);
        for k in 0..10_000u32 {
            let a = r.next_u32();
            let d = match k % 4 {
                0 => 0,
                1 => (1 << 31) ^ (k & 3),
                2 => k.wrapping_sub(5_000),
                _ => r.next_u32(),
            };
            let b = a.wrapping_add(d);
            assert_eq!(later_ns(a, b), old(a, b), "{a} {b}");
            assert_eq!(later_ns(b, a), old(b, a), "{b} {a}");
        }
        assert_eq!(later_ns(5, 7), 7);
        assert_eq!(later_ns(7, 5), 7);
        assert_eq!(later_ns(u32::MAX, 1), 1);
    }

    /// `in_flight_mask` is `in_flight_range` bit by bit, across the PSN wrap, for bases
    /// before, inside and after the in-flight range (and far from it).
    #[test]
    fn in_flight_mask_is_in_flight_range_per_bit() {
        let mut r = requester();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut nonempty = 0;
        for _ in 0..20_000 {
            let una = Psn::new(next() as u32);
            let n = (next() % 520) as u32;
            let off = match next() % 4 {
                0 => (next() % 700) as u32,
                1 => Psn::MODULUS - (next() % 100) as u32,
                2 => n.wrapping_sub((next() % 100) as u32),
                _ => next() as u32,
            };
            r.una = una;
            r.nxt = una.add(n);
            let base = una.add(off);
            let mask = r.in_flight_mask(base);
            nonempty += usize::from(mask != 0);
            for i in 0..64 {
                assert_eq!(
                    mask >> i & 1 == 1,
                    r.in_flight_range(base.add(i)),
                    "una {una:?} n {n} base {base:?} bit {i}"
                );
            }
        }
        assert!(nonempty > 5_000, "{nonempty}");
    }
}
