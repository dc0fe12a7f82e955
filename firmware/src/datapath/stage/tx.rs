//! The send side of one QP in the datapath: the send queue the host posts to, segmentation, the
//! per-PSN send state, ACK and NACK application, and the retransmissions the firmware orders.
//!
//! # State
//! - The send queue of posted work requests with their PSN ranges (PSNs are assigned at post
//!   time, so packets leave in PSN order). A work request is **retired** once the cumulative
//!   PSN passes its last packet: the ACK's [`AckSummary`] counts it (`retired`), and it keeps
//!   its slot until the firmware completes it ([`CompleteSends`]), when its CQE goes to the
//!   host if it asked for one. The firmware hears nothing per work request sent.
//! - One slot per PSN of the window `[una, nxt)`: the EV and plane it last left on, its payload
//!   length, its transmission number and send time, and its state: in flight, acknowledged,
//!   reported lost (waiting for the firmware's order), or queued for retransmission.
//! - The retransmission queue (each PSN at most once, so `WIN` entries suffice) and the loss
//!   window after an ACK timeout.
//!
//! # Rules
//! - **Window**: a new PSN leaves only while `nxt - una` is below the send window, the bytes
//!   in flight are below the congestion window the firmware wrote, and (for the first packet of
//!   a Write-with-Immediate) fewer than `max_wimm` are in flight. Retransmissions go first and
//!   only need congestion window room.
//! - **ACK**: everything before the cumulative PSN and every SACK bit is acknowledged. A hole
//!   below the highest SACKed PSN whose last transmission is at least [`Reorder::tx`]
//!   transmissions and [`Reorder::ns`] nanoseconds older than the newest acknowledged one is
//!   **lost**: it leaves the bytes in flight and is reported ([`LossEntry`]) before the ACK's
//!   [`AckSummary`]. The firmware decides whether and where it is resent.
//! - **NACK**: a trim or out-of-window NACK for a PSN in flight takes it out of flight and is
//!   reported ([`NackEntry`]); so are fatal NACKs (whatever PSN they name) and too-many-WIMM ones.
//!   Any non-fatal NACK or ACK from the peer ends the loss window after a timeout.
//! - **Orders**: [`Retransmit`] queues one lost or in-flight PSN on the EV it names;
//!   [`RetransmitUnacked`] requeues every unacknowledged PSN in PSN order and opens the loss
//!   window (only the oldest leaves until the peer answers); [`TailProbe`] resends the newest PSN
//!   in flight; a plane going down requeues what was in flight on it.
//! - **ERROR**: nothing more leaves; the work requests not completed (sent or not, retired or
//!   not) come back to the firmware as [`Flushed`], in posting order.
//!
//! [`CompleteSends`]: mrc_abi::device::csr::CompleteSends
//! [`LossEntry`]: mrc_abi::device::csr::LossEntry
//! [`AckSummary`]: mrc_abi::device::csr::AckSummary
//! [`NackEntry`]: mrc_abi::device::csr::NackEntry
//! [`Retransmit`]: mrc_abi::device::csr::Retransmit
//! [`RetransmitUnacked`]: mrc_abi::device::csr::RetransmitUnacked
//! [`TailProbe`]: mrc_abi::device::csr::TailProbe
//! [`Flushed`]: mrc_abi::device::csr::Flushed

use mrc_abi::device::csr::{CsrEvent, TxStart, EV_ANY};
use mrc_abi::wire::{EvxRepr, RethRepr, Segment};
use mrc_abi::Psn;

use super::events::Events;
use super::Hdr;
use crate::datapath::ack_gen::TrimMark;
use crate::datapath::blocks::SprayerPort;
use crate::datapath::packet::{LocalBuf, Packet, PacketBody, SendWr};
use crate::datapath::segmenter::WriteRequest;
use crate::datapath::sprayer::EvPick;
use crate::ring::Ring;

mod ack;
mod orders;
mod run;

pub(crate) use ack::{Credits, ACK_EVENTS};

const F_INFLIGHT: u8 = 1;
const F_ACKED: u8 = 2;
/// Queued for retransmission.
const F_PENDING: u8 = 4;
/// With [`EV_ANY`]: away from the plane (else the EV) it last left on (`TxSide::pick`).
const F_AVOID: u8 = 8;
/// Reported lost; waits for the firmware's order.
const F_LOST: u8 = 16;
/// With [`F_INFLIGHT`]: the PSN left more than once (its transmission number is not in PSN
/// order with the first transmissions around it: `TxSide::handle_ack` compares it alone).
const F_RESENT: u8 = 32;

/// Per-PSN send state (16 bytes).
#[derive(Clone, Copy, Debug, Default)]
struct TxSlot {
    tx_seq: u32,
    /// Low 32 bits of the send time (ns); differences are taken modulo 2^32 (4.29 s).
    sent_ns: u32,
    ev: u16,
    len: u16,
    /// EV the firmware ordered the retransmission on ([`EV_ANY`]: the sprayer's pick). Read
    /// only while [`F_PENDING`] is set, and written with it (`queue_retx`).
    retx_ev: u16,
    plane: u8,
    flags: u8,
}

impl TxSlot {
    /// The PSN left (again) as transmission `tx_seq` at `sent_ns` with `len` payload bytes on
    /// `ev`: in flight. (`retx_ev` is left as it is: nothing reads it before the next order
    /// writes it; one store less per packet.)
    #[inline(always)]
    fn sent(&mut self, tx_seq: u32, sent_ns: u32, ev: EvPick, len: u16) {
        self.tx_seq = tx_seq;
        self.sent_ns = sent_ns;
        self.ev = ev.index;
        self.len = len;
        self.plane = ev.plane;
        self.flags = F_INFLIGHT;
    }
}

/// The retransmission queue's loss window after an ACK timeout (TCP's loss window of one
/// packet, RFC 5681 section 3.1): the peer's answer to the oldest PSN acknowledges what arrived
/// but could not be reported (beyond the 64-bit SACK reach of a lost `una`), so the rest of the
/// queue waits for it instead of resending PSNs that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RtoWindow {
    /// The queue is sent as the windows allow.
    Open,
    /// A timeout requeued the unacknowledged PSNs: the next retransmission may leave.
    One,
    /// That retransmission left: the queue waits for an ACK or NACK.
    Wait,
}

/// When a SACK hole counts as lost ([`Reorder::lost`]): the newest acknowledged transmission
/// left at least `tx` transmissions **and** at least `ns` nanoseconds after the hole's (the
/// time rule is RACK's, RFC 8985), or, with a window, at least [`TLP_REORDER_WINDOWS`]
/// windows after it whatever the count. Written by the firmware with the QP's RTS context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reorder {
    /// Later transmissions acknowledged (1..=63: a hole is judged only inside the ACK's
    /// 64-bit SACK bitmap).
    pub tx: u32,
    /// Send-time gap in ns (0: the count alone decides).
    pub ns: u32,
}

impl Reorder {
    /// Whether a hole is lost when the newest acknowledged transmission left `age`
    /// transmissions and `gap_ns` nanoseconds after it: both rules hold, or (with a window)
    /// the gap is [`TLP_REORDER_WINDOWS`] windows. The count guards against the reordering of
    /// spraying, which the window already bounds in time; a burst shorter than `tx` packets
    /// never meets it, and its holes would wait for the ACK timeout. Two windows is where a
    /// tail probe would have gone: a hole that old is lost by the tail probe's own reasoning.
    /// (Out of line: it runs for SACK holes only, and inlined it cost the ACK application's
    /// common path about 2 x86 instructions per packet in `just engine-cost`, in registers.)
    #[inline(never)]
    pub fn lost(self, age: i32, gap_ns: i32) -> bool {
        let gap = i64::from(gap_ns);
        (age >= self.tx as i32 && gap >= i64::from(self.ns))
            || (self.ns > 0 && gap >= i64::from(self.ns) * i64::from(TLP_REORDER_WINDOWS))
    }
}

/// A tail loss probe goes this many reorder windows (`Reorder::ns`) after the last
/// transmission or ACK.
pub const TLP_REORDER_WINDOWS: u32 = 2;

/// Why no data packet can leave now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Nothing to send (or not sending at all).
    Idle,
    /// The send window is full.
    Window,
    /// The congestion window is full (or the loss window waits for the peer).
    Cc,
    /// Too many Write-with-Immediate in flight.
    Wimm,
    /// No usable EV.
    NoEv,
}

#[derive(Clone, Copy, Debug)]
struct SendWqe {
    wr: SendWr,
    start_psn: Psn,
    npkts: u32,
    msn: u16,
}

impl SendWqe {
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

/// Send-side counters of one QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxCounters {
    pub posted: u64,
    pub post_refused: u64,
    pub data_sent: u64,
    pub retransmits: u64,
    pub acks: u64,
    /// ACKs whose cumulative PSN was behind `una` or beyond `nxt` (cumulative part ignored).
    pub acks_stale: u64,
    pub losses_inferred: u64,
    pub tail_probes: u64,
    /// Tail loss probes not sent because the QP transmitted within the probe timeout (the
    /// ACKs of that transmission re-arm the firmware's probe).
    pub tail_probes_quiet: u64,
    pub timeouts: u64,
    pub nacks_trimmed: u64,
    pub nacks_out_of_window: u64,
    pub nacks_too_many_wimm: u64,
    pub nacks_fatal: u64,
    /// NACKs for PSNs not in flight.
    pub nacks_stale: u64,
    /// Retransmission orders for PSNs no longer lost or in flight (acknowledged meanwhile).
    pub orders_stale: u64,
    /// Ordered EVs this QP does not have (sent on the sprayer's pick instead).
    pub orders_bad_ev: u64,
    pub flushed: u64,
    /// Work requests retired by ACKs and completed by the firmware's order.
    pub completed: u64,
    /// Completions ordered beyond the work requests retired (not done).
    pub completions_refused: u64,
    /// Transmit attempts that found the window, the congestion window, the immediate limit or
    /// the EV table in the way.
    pub stall_window: u64,
    pub stall_cc: u64,
    pub stall_wimm: u64,
    pub stall_no_ev: u64,
    /// Delivery credits (the gray-loss test's per-EV counts) an ACK or NACK could not count:
    /// the EV's counter was at its limit and its report had found no room.
    pub credits_saturated: u64,
}

/// Why a post was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PostError {
    /// The QP does not send (not RTS, or in ERROR).
    NotSending,
    /// The send queue is full.
    QueueFull,
    /// A work request the segmenter cannot carry (address wraps, too many packets).
    BadWorkRequest,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Before RTS (or after RESET).
    Off,
    Live,
    /// ERROR: `flush_from` is the first send queue entry still to report as flushed.
    Error,
}

/// The send side of one QP: send queue of `SQ` work requests, a window of `WIN` PSNs.
pub(crate) struct TxSide<const WIN: usize, const SQ: usize> {
    sq: Ring<SendWqe, SQ>,
    /// The first `retired` work requests of `sq` are retired (acknowledged) and wait for the
    /// firmware's completion order.
    retired: usize,
    /// Index in `sq` of the work request whose packets are being sent for the first time
    /// (at least `retired`).
    send_idx: usize,
    next_post_psn: Psn,
    next_msn: u16,
    una: Psn,
    nxt: Psn,
    slots: [TxSlot; WIN],
    retx: Ring<Psn, WIN>,
    inflight_bytes: u64,
    cwnd_bytes: u64,
    tx_seq: u32,
    max_acked_seq: u32,
    max_acked_sent_ns: u32,
    /// Low 32 bits of the newest transmission's send time (see [`Self::tail_probe`]).
    last_sent_ns: u32,
    /// The SACK bits already applied (relative to `sack_done_base`): ACKs repeat their bitmap
    /// until the hole below it is filled, so only new bits need work.
    sack_done_base: Psn,
    sack_done_bits: u64,
    rto: RtoWindow,
    mpr_psns: u32,
    max_wimm: u16,
    wimm_inflight: u16,
    reorder: Reorder,
    mtu: u32,
    mode: Mode,
    counters: TxCounters,
}

impl<const WIN: usize, const SQ: usize> TxSide<WIN, SQ> {
    /// Counts `n` delivery credits the last ACK or NACK could not count
    /// ([`TxCounters::credits_saturated`]).
    #[inline]
    pub(crate) fn credits_lost(&mut self, n: u64) {
        self.counters.credits_saturated += n;
    }

    const CAPACITY_OK: () = assert!(WIN >= 64 && SQ >= 1, "TxSide needs WIN >= 64, SQ >= 1");

    pub(crate) const OFF: Self = TxSide {
        sq: Ring::new(SendWqe::FILL),
        retired: 0,
        send_idx: 0,
        next_post_psn: Psn::new(0),
        next_msn: 0,
        una: Psn::new(0),
        nxt: Psn::new(0),
        slots: [TxSlot {
            tx_seq: 0,
            sent_ns: 0,
            ev: 0,
            len: 0,
            retx_ev: 0,
            plane: 0,
            flags: 0,
        }; WIN],
        retx: Ring::new(Psn::new(0)),
        inflight_bytes: 0,
        cwnd_bytes: 0,
        tx_seq: 0,
        max_acked_seq: 0,
        max_acked_sent_ns: 0,
        last_sent_ns: 0,
        sack_done_base: Psn::new(0),
        sack_done_bits: 0,
        rto: RtoWindow::Open,
        mpr_psns: 0,
        max_wimm: 0,
        wimm_inflight: 0,
        reorder: Reorder { tx: 1, ns: 0 },
        mtu: 1,
        mode: Mode::Off,
        counters: TxCounters {
            posted: 0,
            post_refused: 0,
            data_sent: 0,
            retransmits: 0,
            acks: 0,
            acks_stale: 0,
            losses_inferred: 0,
            tail_probes: 0,
            tail_probes_quiet: 0,
            timeouts: 0,
            nacks_trimmed: 0,
            nacks_out_of_window: 0,
            nacks_too_many_wimm: 0,
            nacks_fatal: 0,
            nacks_stale: 0,
            orders_stale: 0,
            orders_bad_ev: 0,
            flushed: 0,
            completed: 0,
            completions_refused: 0,
            stall_window: 0,
            stall_cc: 0,
            stall_wimm: 0,
            stall_no_ev: 0,
            credits_saturated: 0,
        },
    };

    /// Back to before RTS (RESET): everything forgotten.
    pub(crate) fn reset(&mut self) {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        self.sq.clear();
        self.retx.clear();
        self.retired = 0;
        self.send_idx = 0;
        self.inflight_bytes = 0;
        self.wimm_inflight = 0;
        self.mode = Mode::Off;
        self.counters = TxCounters::default();
    }

    /// RTS: sending from `sq_psn` with these windows and loss rule; `mtu` payload bytes per
    /// packet (`1..=65535`). The congestion window is 0 until the firmware writes one.
    pub(crate) fn start(
        &mut self,
        sq_psn: Psn,
        mpr_psns: u32,
        max_wimm: u16,
        reorder: Reorder,
        mtu: u32,
    ) {
        self.next_post_psn = sq_psn;
        self.next_msn = 0;
        self.una = sq_psn;
        self.nxt = sq_psn;
        self.tx_seq = 0;
        self.max_acked_seq = 0;
        self.max_acked_sent_ns = 0;
        self.last_sent_ns = 0;
        self.sack_done_base = sq_psn;
        self.sack_done_bits = 0;
        self.rto = RtoWindow::Open;
        self.mpr_psns = mpr_psns.min(WIN as u32);
        self.max_wimm = max_wimm;
        self.reorder = Reorder {
            tx: reorder.tx.clamp(1, 63),
            ns: reorder.ns,
        };
        self.mtu = mtu.clamp(1, u32::from(u16::MAX));
        self.mode = Mode::Live;
    }

    /// The congestion window the firmware wrote.
    pub(crate) fn set_cwnd(&mut self, cwnd_bytes: u64) {
        self.cwnd_bytes = cwnd_bytes;
    }

    pub(crate) fn counters(&self) -> TxCounters {
        self.counters
    }

    /// Oldest unacknowledged PSN.
    pub(crate) fn una(&self) -> Psn {
        self.una
    }

    /// Next new PSN.
    pub(crate) fn nxt(&self) -> Psn {
        self.nxt
    }

    /// Payload bytes in flight.
    pub(crate) fn inflight_bytes(&self) -> u64 {
        self.inflight_bytes
    }

    /// The congestion window in force.
    pub(crate) fn cwnd_bytes(&self) -> u64 {
        self.cwnd_bytes
    }

    /// Work requests held (not yet completed).
    pub(crate) fn queued(&self) -> usize {
        self.sq.len()
    }

    /// Work requests the send queue has room for.
    pub(crate) fn queue_room(&self) -> usize {
        self.sq.room()
    }

    /// Post a work request.
    pub(crate) fn post_send(&mut self, wr: SendWr) -> Result<(), PostError> {
        let result = if self.mode != Mode::Live {
            Err(PostError::NotSending)
        } else {
            let req = WriteRequest {
                remote_va: wr.remote_va,
                rkey: wr.rkey,
                len: wr.len,
                imm: wr.imm,
                mtu_payload: self.mtu,
                start_psn: self.next_post_psn,
            };
            match req.packet_count() {
                Err(_) => Err(PostError::BadWorkRequest),
                Ok(npkts) => {
                    let wqe = SendWqe {
                        wr,
                        start_psn: self.next_post_psn,
                        npkts,
                        msn: self.next_msn,
                    };
                    match self.sq.push_back(wqe) {
                        Ok(()) => {
                            self.next_post_psn = self.next_post_psn.add(npkts);
                            self.next_msn = self.next_msn.wrapping_add(1);
                            Ok(())
                        }
                        Err(_) => Err(PostError::QueueFull),
                    }
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
        psn.offset_from(self.una) < self.nxt.offset_from(self.una)
    }

    /// Bit `i` set when `base + i` is in `[una, nxt)`.
    #[inline]
    fn in_flight_mask(&self, base: Psn) -> u64 {
        let n = self.nxt.offset_from(self.una);
        let s = base.offset_from(self.una);
        let below = |k: u32| if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
        if s < n {
            // (the common case: `base` in flight, the bits from 0 on)
            return below(n - s);
        }
        let lo = Psn::MODULUS - s;
        below(lo + n) & !below(lo)
    }

    /// Whether anything waits to be sent.
    #[inline]
    pub(crate) fn wants_to_send(&self) -> bool {
        self.mode == Mode::Live && (!self.retx.is_empty() || self.send_idx < self.sq.len())
    }

    /// Whether a retransmission waits and may leave as far as the loss window goes.
    #[inline]
    pub(crate) fn has_retransmit(&self) -> bool {
        self.mode == Mode::Live && !self.retx.is_empty() && self.rto != RtoWindow::Wait
    }

    /// The next data packet (a retransmission first), built into `out`, on the EV the
    /// sprayer picks (or the one the firmware ordered). Emits [`TxStart`] (room for one
    /// event is the caller's to check).
    pub(crate) fn poll<const E: usize, const P: usize>(
        &mut self,
        now_ns: u64,
        hdr: &Hdr,
        sprayer: &mut SprayerPort<'_, E, P>,
        events: &mut Events,
        out: &mut Packet,
    ) -> Result<(), Stall> {
        if self.mode != Mode::Live {
            return Err(Stall::Idle);
        }
        let queued = !self.retx.is_empty() || self.send_idx < self.sq.len();
        if !queued {
            return Err(Stall::Idle);
        }
        if self.inflight_bytes >= self.cwnd_bytes {
            self.counters.stall_cc += 1;
            return Err(Stall::Cc);
        }
        if !self.retx.is_empty() {
            if self.rto == RtoWindow::Wait {
                self.counters.stall_cc += 1;
                return Err(Stall::Cc);
            }
            match self.poll_retx(now_ns, hdr, sprayer, out) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(s) => return Err(s),
            }
        }
        self.poll_new(now_ns, hdr, sprayer, events, out)
    }

    /// The sprayer's next EV; with `avoid`, the (EV, plane) a lost packet left on, the next
    /// pick on another plane within one turn of the sprayer's plane scan (a failed link, port
    /// or switch takes out the paths of a plane together, not one EV), else the next pick
    /// that is not the EV itself.
    #[inline]
    fn pick<const E: usize, const P: usize>(
        sprayer: &mut SprayerPort<'_, E, P>,
        avoid: Option<(u16, u8)>,
    ) -> Option<EvPick> {
        let mut p = sprayer.next_ev()?;
        let Some((ev, plane)) = avoid else {
            return Some(p);
        };
        for _ in 1..P {
            if p.plane != plane {
                return Some(p);
            }
            p = sprayer.next_ev().unwrap_or(p);
        }
        if p.plane != plane || p.index != ev {
            Some(p)
        } else {
            Some(sprayer.next_ev().unwrap_or(p))
        }
    }

    /// The first queued retransmission still wanted (`Ok(false)`: none; entries acknowledged
    /// meanwhile leave the queue).
    fn poll_retx<const E: usize, const P: usize>(
        &mut self,
        now_ns: u64,
        hdr: &Hdr,
        sprayer: &mut SprayerPort<'_, E, P>,
        out: &mut Packet,
    ) -> Result<bool, Stall> {
        while let Some(&psn) = self.retx.front() {
            let s = self.slot(psn);
            let wanted = self.in_flight_range(psn) && s.flags & F_PENDING != 0;
            // The work request holding `psn` (`npkts < 2^23`: the unsigned compare is
            // `0 <= d < npkts`).
            let held = wanted
                .then(|| {
                    let d = |w: &SendWqe| psn.offset_from(w.start_psn);
                    self.sq.iter().find(|w| d(w) < w.npkts).map(|w| (*w, d(w)))
                })
                .flatten();
            let Some((w, index)) = held else {
                self.retx.pop_front();
                continue;
            };
            let ev = match s.retx_ev {
                EV_ANY => {
                    let avoid = (s.flags & F_AVOID != 0).then_some((s.ev, s.plane));
                    match Self::pick(sprayer, avoid) {
                        Some(ev) => ev,
                        None => {
                            self.counters.stall_no_ev += 1;
                            return Err(Stall::NoEv);
                        }
                    }
                }
                e => match sprayer.ev(e) {
                    Some(slot) => EvPick {
                        index: e,
                        plane: slot.plane,
                    },
                    None => {
                        self.counters.orders_bad_ev += 1;
                        match Self::pick(sprayer, None) {
                            Some(ev) => ev,
                            None => {
                                self.counters.stall_no_ev += 1;
                                return Err(Stall::NoEv);
                            }
                        }
                    }
                },
            };
            let Some(()) = self.build(now_ns, hdr, &w, index, ev, true, out) else {
                self.retx.pop_front();
                continue;
            };
            self.retx.pop_front();
            self.counters.retransmits += 1;
            if self.rto == RtoWindow::One {
                self.rto = RtoWindow::Wait;
            }
            self.record_sent(psn, ev, out.payload_len, now_ns);
            if let Some(s) = self.slot_mut(psn) {
                s.flags = F_INFLIGHT | F_RESENT;
            }
            return Ok(true);
        }
        Ok(false)
    }

    fn poll_new<const E: usize, const P: usize>(
        &mut self,
        now_ns: u64,
        hdr: &Hdr,
        sprayer: &mut SprayerPort<'_, E, P>,
        events: &mut Events,
        out: &mut Packet,
    ) -> Result<(), Stall> {
        let Some(w) = self.sq.get(self.send_idx).copied() else {
            return Err(Stall::Idle);
        };
        if self.nxt.offset_from(self.una) >= self.mpr_psns {
            self.counters.stall_window += 1;
            return Err(Stall::Window);
        }
        let index = self.nxt.offset_from(w.start_psn);
        let wimm_start = index == 0 && w.wr.imm.is_some();
        if wimm_start && self.wimm_inflight >= self.max_wimm {
            self.counters.stall_wimm += 1;
            return Err(Stall::Wimm);
        }
        let Some(ev) = Self::pick(sprayer, None) else {
            self.counters.stall_no_ev += 1;
            return Err(Stall::NoEv);
        };
        if self.build(now_ns, hdr, &w, index, ev, false, out).is_none() {
            // (cannot happen for a posted work request: it passed `packet_count`)
            return Err(Stall::Idle);
        }
        let psn = self.nxt;
        if self.una == self.nxt {
            events.push(CsrEvent::TxStart(TxStart::new(hdr.qpn, psn)));
        }
        self.nxt = self.nxt.add(1);
        self.counters.data_sent += 1;
        if wimm_start {
            self.wimm_inflight = self.wimm_inflight.saturating_add(1);
        }
        self.record_sent(psn, ev, out.payload_len, now_ns);
        if index + 1 >= w.npkts {
            self.send_idx += 1;
        }
        Ok(())
    }

    /// Packet `index` of work request `w` on `ev`, into `out` (`None` when the segmenter's
    /// offset checks fail).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn build(
        &self,
        now_ns: u64,
        hdr: &Hdr,
        w: &SendWqe,
        index: u32,
        ev: EvPick,
        retransmit: bool,
        out: &mut Packet,
    ) -> Option<()> {
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
        *out = Packet {
            src_qpn: hdr.qpn,
            dest_qpn: hdr.dest_qpn,
            psn: w.start_psn.add(index),
            msn: w.msn,
            ev_format: hdr.ev_format,
            evx: EvxRepr {
                ev_index: ev.index,
                plane: ev.plane,
                ev_value: hdr.value_base.wrapping_add(u32::from(ev.index)),
            },
            tx_ts_ns: now_ns as u32,
            echo_ts_ns: 0,
            retransmit,
            ack_req: last,
            trim: TrimMark::None,
            ce: false,
            payload_len,
            body: PacketBody::Write {
                segment,
                reth: RethRepr {
                    va: remote_va,
                    rkey: w.wr.rkey,
                    dma_len: payload_len,
                },
                local: LocalBuf {
                    handle: w.wr.local.handle,
                    offset: w.wr.local.offset.wrapping_add(u64::from(offset)),
                },
            },
        };
        Some(())
    }

    /// A transmission of `psn` with `payload_len` bytes on `ev` at `now_ns`.
    #[inline]
    fn record_sent(&mut self, psn: Psn, ev: EvPick, payload_len: u32, now_ns: u64) {
        self.tx_seq = self.tx_seq.wrapping_add(1);
        let len = payload_len.min(u32::from(u16::MAX)) as u16;
        let tx_seq = self.tx_seq;
        if let Some(s) = self.slot_mut(psn) {
            s.sent(tx_seq, now_ns as u32, ev, len);
        }
        self.inflight_bytes = self.inflight_bytes.saturating_add(u64::from(len));
        self.last_sent_ns = now_ns as u32;
    }
}
