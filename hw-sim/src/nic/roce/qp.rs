//! One RC QP per flow: the requester's go-back-N state ([`SendQp`]) and the responder's
//! ([`RecvQp`]), pure state machines (time passed in, no fabric).
//!
//! # Requester rules
//! - Packets leave in PSN order from `nxt`; `una` is the oldest unacknowledged PSN, `sent` one
//!   past the highest PSN ever sent (a packet below `sent` is a retransmission).
//! - An ACK for `psn` (the responder's expected PSN) acknowledges everything below it.
//! - A NAK (PSN sequence error) for `psn` acknowledges everything below it and rewinds `nxt`
//!   to `psn`: go-back-N, every later packet is sent again.
//! - The transport timer runs while anything is unacknowledged; it restarts when `una` moves
//!   and when it fires. Firing rewinds `nxt` to `una` and counts a retry; more than
//!   `retry_cnt` retries in a row without progress put the QP in error (IB semantics: the
//!   timeout is `4.096 us * 2^t`).
//!
//! # Responder rules
//! - Only the expected PSN is accepted (placed exactly once, in order); its payload must match
//!   the pattern the sender used for that PSN, else it is dropped and counted.
//! - A later PSN is dropped; the first one of each out-of-sequence episode gets a NAK (the
//!   episode ends when the expected PSN is accepted).
//! - An earlier PSN (duplicate) is dropped and acknowledged like an accepted one.
//! - An ACK goes out for the last packet of every message and after every `ack_every`
//!   accepted or duplicate packets.

use crate::core::time::{Duration, Time};
use crate::workload::Flow;

use super::dcqcn::{Np, Rp};

/// How a flow's bytes become packets: messages of `msg_bytes`, each cut into `mtu` payloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    bytes: u64,
    msg: u64,
    mtu: u64,
    per_msg: u64,
    pkts: u64,
}

/// One packet of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seg {
    /// Byte offset in the flow.
    pub offset: u64,
    /// Payload bytes.
    pub len: u32,
    /// First packet of its message (carries a RETH).
    pub first: bool,
    /// Last packet of its message.
    pub last: bool,
}

impl Layout {
    /// The layout of `bytes` in messages of `msg_bytes` (> 0) and packets of `mtu` (> 0).
    pub fn new(bytes: u64, msg_bytes: u32, mtu: u32) -> Layout {
        let msg = u64::from(msg_bytes.max(1));
        let mtu = u64::from(mtu.max(1));
        let per_msg = msg.div_ceil(mtu);
        let pkts = bytes / msg * per_msg + (bytes % msg).div_ceil(mtu);
        Layout {
            bytes,
            msg,
            mtu,
            per_msg,
            pkts,
        }
    }

    /// Packets in the flow.
    pub fn pkts(&self) -> u64 {
        self.pkts
    }

    /// Bytes before packet `psn` (`bytes` for `psn >= pkts`).
    pub fn offset(&self, psn: u64) -> u64 {
        if psn >= self.pkts {
            return self.bytes;
        }
        (psn / self.per_msg) * self.msg + (psn % self.per_msg) * self.mtu
    }

    /// Packet `psn` (`psn < pkts`).
    pub fn seg(&self, psn: u64) -> Seg {
        let m = psn / self.per_msg;
        let i = psn % self.per_msg;
        let msg_start = m * self.msg;
        let msg_len = self.msg.min(self.bytes.saturating_sub(msg_start));
        let off = i * self.mtu;
        let len = self.mtu.min(msg_len.saturating_sub(off));
        Seg {
            offset: msg_start + off,
            len: len as u32,
            first: i == 0,
            last: off + len >= msg_len,
        }
    }
}

/// The payload pattern of the packet at byte `offset` of flow `flow` (what the receiver checks
/// the payload against, so a misplaced packet is caught).
pub fn pattern(flow: u32, offset: u64) -> u32 {
    flow.wrapping_mul(0x9E37_79B9) ^ (offset as u32) ^ ((offset >> 32) as u32)
}

/// Where a sending QP is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendState {
    /// Waiting for its start time or for the flow it runs after.
    Waiting,
    /// Moving data.
    Active,
    /// Every byte acknowledged.
    Done,
    /// Retries exhausted: the QP is in error.
    Error,
}

/// The requester side of one flow.
#[derive(Clone, Debug)]
pub struct SendQp {
    /// The flow.
    pub flow: Flow,
    /// Its packets.
    pub layout: Layout,
    /// State.
    pub state: SendState,
    /// The flow it runs after has completed (or there is none).
    pub after_done: bool,
    /// Plane (NIC port) the QP is pinned to.
    pub plane: u8,
    /// ECMP flow hash of its data packets.
    pub hash: u64,
    /// Oldest unacknowledged PSN.
    pub una: u64,
    /// Next PSN to send.
    pub nxt: u64,
    /// One past the highest PSN sent.
    pub sent: u64,
    /// Rate limiter: earliest time of the next packet (`gap_from` plus `gap_bytes` at the
    /// current rate).
    pub next_tx: Time,
    /// Rate limiter: where the gap before the next packet starts.
    pub gap_from: Time,
    /// Rate limiter: wire bytes of the last packet (the gap is their time at the rate).
    pub gap_bytes: u32,
    /// DCQCN reaction point.
    pub rp: Rp,
    /// Transport timer start (valid while anything is unacknowledged).
    pub timer_from: Time,
    /// Timeouts in a row without progress.
    pub retries: u8,
    /// When it was released.
    pub released_at: Option<Time>,
    /// When its last byte was acknowledged.
    pub done_at: Option<Time>,
    /// When `una` last moved (or the QP was released).
    pub last_progress: Time,
    /// Longest time with data outstanding and `una` not moving.
    pub max_stall: Duration,
    /// Data packets sent (retransmissions included).
    pub data_sent: u64,
    /// Retransmitted data packets.
    pub retransmits: u64,
    /// NAKs received.
    pub naks: u64,
    /// Transport timer expiries.
    pub timeouts: u64,
}

impl SendQp {
    /// Bytes acknowledged.
    pub fn acked_bytes(&self) -> u64 {
        self.layout.offset(self.una)
    }

    /// True when a packet could leave now if the port and the rate allowed.
    pub fn has_data(&self) -> bool {
        self.state == SendState::Active && self.nxt < self.layout.pkts()
    }

    /// Anything sent and not acknowledged.
    pub fn outstanding(&self) -> bool {
        self.una < self.sent
    }

    /// The transport timer's deadline.
    pub fn deadline(&self, rto: Duration) -> Option<Time> {
        (self.state == SendState::Active && self.outstanding())
            .then(|| self.timer_from.saturating_add(rto))
    }

    /// Releases the QP at `now`.
    pub fn release(&mut self, now: Time) {
        self.state = SendState::Active;
        self.released_at = Some(now);
        self.last_progress = now;
        self.next_tx = now;
        if self.layout.pkts() == 0 {
            self.state = SendState::Done;
            self.done_at = Some(now);
        }
    }

    /// Records packet `nxt` leaving at `now`; returns whether it was a retransmission.
    pub fn on_sent(&mut self, now: Time) -> bool {
        if !self.outstanding() {
            self.timer_from = now;
        }
        let retx = self.nxt < self.sent;
        self.nxt += 1;
        self.sent = self.sent.max(self.nxt);
        self.data_sent += 1;
        if retx {
            self.retransmits += 1;
        }
        retx
    }

    /// Everything below `psn` is acknowledged at `now`. Returns true when the flow completed.
    pub fn on_ack(&mut self, now: Time, psn: u64) -> bool {
        if self.state != SendState::Active {
            return false;
        }
        // An ACK beyond what was sent is bogus: clamp.
        let psn = psn.min(self.sent);
        if psn > self.una {
            self.note_stall(now);
            self.una = psn;
            self.last_progress = now;
            self.timer_from = now;
            self.retries = 0;
            self.nxt = self.nxt.max(self.una);
            if self.una >= self.layout.pkts() {
                self.state = SendState::Done;
                self.done_at = Some(now);
                return true;
            }
        }
        false
    }

    /// A PSN sequence error NAK for `psn` at `now`: ACK below it, go back to it. Returns true
    /// when the flow completed (cannot happen for a sane NAK, kept for symmetry).
    pub fn on_nak(&mut self, now: Time, psn: u64) -> bool {
        self.naks += 1;
        if self.on_ack(now, psn) {
            return true;
        }
        if self.state == SendState::Active && psn >= self.una && psn < self.nxt {
            self.nxt = psn;
        }
        false
    }

    /// The transport timer fired at `now`: retry (go back to `una`) or give up.
    pub fn on_timeout(&mut self, now: Time, retry_cnt: u8) {
        self.timeouts += 1;
        self.note_stall(now);
        if self.retries >= retry_cnt {
            self.state = SendState::Error;
            return;
        }
        self.retries += 1;
        self.nxt = self.una;
        self.timer_from = now;
    }

    /// Folds the current stall (if data is outstanding) into `max_stall`.
    pub fn note_stall(&mut self, now: Time) {
        if self.state == SendState::Active {
            let st = now.duration_since(self.last_progress);
            if st > self.max_stall {
                self.max_stall = st;
            }
        }
    }
}

/// What the responder does with a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxAction {
    /// Accepted (placed); `ack` = send an ACK now.
    Accept {
        /// Send an ACK.
        ack: bool,
    },
    /// A duplicate, dropped; `ack` = send an ACK now.
    Duplicate {
        /// Send an ACK.
        ack: bool,
    },
    /// Out of sequence, dropped; `nak` = send a NAK now (first of the episode).
    OutOfSequence {
        /// Send a NAK.
        nak: bool,
    },
    /// The expected PSN with a payload that does not match the flow's pattern: dropped.
    BadPattern,
}

/// The responder side of one flow.
#[derive(Clone, Debug)]
pub struct RecvQp {
    /// The flow.
    pub flow: Flow,
    /// Its packets.
    pub layout: Layout,
    /// Expected PSN.
    pub epsn: u64,
    /// A NAK was sent for the current out-of-sequence episode.
    pub nak_sent: bool,
    /// Packets since the last ACK.
    pub since_ack: u32,
    /// DCQCN notification point.
    pub np: Np,
    /// Bytes placed (exactly once, in order).
    pub placed_bytes: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Out-of-sequence packets dropped.
    pub out_of_sequence: u64,
}

impl RecvQp {
    /// Data packet `psn` with payload pattern `pat` and length `len` arrived.
    pub fn on_data(
        &mut self,
        psn: u64,
        last: bool,
        pat: u32,
        len: u32,
        ack_every: u32,
    ) -> RxAction {
        if psn == self.epsn {
            let seg = self.layout.seg(psn);
            if psn >= self.layout.pkts()
                || seg.len != len
                || pattern(self.flow.id, seg.offset) != pat
            {
                return RxAction::BadPattern;
            }
            self.epsn += 1;
            self.nak_sent = false;
            self.placed_bytes += u64::from(len);
            RxAction::Accept {
                ack: self.count_for_ack(last, ack_every),
            }
        } else if psn < self.epsn {
            self.duplicates += 1;
            RxAction::Duplicate {
                ack: self.count_for_ack(last, ack_every),
            }
        } else {
            self.out_of_sequence += 1;
            let nak = !self.nak_sent;
            self.nak_sent = true;
            if nak {
                self.since_ack = 0;
            }
            RxAction::OutOfSequence { nak }
        }
    }

    fn count_for_ack(&mut self, last: bool, ack_every: u32) -> bool {
        self.since_ack += 1;
        if last || self.since_ack >= ack_every {
            self.since_ack = 0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn layout_tiles_the_flow(bytes in 0u64..200_000, msg in 1u32..50_000, mtu in 1u32..9_000) {
            let l = Layout::new(bytes, msg, mtu);
            let mut off = 0u64;
            let mut msg_bytes = 0u64;
            for p in 0..l.pkts() {
                let s = l.seg(p);
                prop_assert_eq!(s.offset, off);
                prop_assert_eq!(l.offset(p), off);
                prop_assert!(s.len > 0 && s.len <= mtu);
                prop_assert_eq!(s.first, msg_bytes == 0);
                off += u64::from(s.len);
                msg_bytes += u64::from(s.len);
                prop_assert!(msg_bytes <= u64::from(msg));
                if s.last {
                    prop_assert!(msg_bytes == u64::from(msg) || off == bytes);
                    msg_bytes = 0;
                }
            }
            prop_assert_eq!(off, bytes);
            prop_assert_eq!(l.offset(l.pkts()), bytes);
        }
    }

    fn flow(bytes: u64) -> Flow {
        Flow {
            id: 3,
            src: 0,
            dst: 1,
            bytes,
            msg_bytes: 8192,
            start: Time::ZERO,
            after: None,
        }
    }

    fn recv(bytes: u64) -> RecvQp {
        RecvQp {
            flow: flow(bytes),
            layout: Layout::new(bytes, 8192, 4096),
            epsn: 0,
            nak_sent: false,
            since_ack: 0,
            np: Np::default(),
            placed_bytes: 0,
            duplicates: 0,
            out_of_sequence: 0,
        }
    }

    #[test]
    fn responder_accepts_in_order_naks_once_per_episode() {
        let mut r = recv(5 * 4096);
        let pat = |p: u64| pattern(3, r_off(p));
        fn r_off(p: u64) -> u64 {
            Layout::new(5 * 4096, 8192, 4096).offset(p)
        }
        assert_eq!(
            r.on_data(0, false, pat(0), 4096, 8),
            RxAction::Accept { ack: false }
        );
        // PSN 1 lost: 2 and 3 arrive.
        assert_eq!(
            r.on_data(2, false, pat(2), 4096, 8),
            RxAction::OutOfSequence { nak: true }
        );
        assert_eq!(
            r.on_data(3, true, pat(3), 4096, 8),
            RxAction::OutOfSequence { nak: false }
        );
        // Go-back-N: 1 (last of message 0) is accepted and ACKed, the episode ends.
        assert_eq!(
            r.on_data(1, true, pat(1), 4096, 8),
            RxAction::Accept { ack: true }
        );
        assert_eq!(
            r.on_data(0, false, pat(0), 4096, 8),
            RxAction::Duplicate { ack: false }
        );
        // A wrong pattern at the expected PSN is refused.
        assert_eq!(r.on_data(2, false, 77, 4096, 8), RxAction::BadPattern);
        assert_eq!(r.placed_bytes, 2 * 4096);
        assert_eq!((r.duplicates, r.out_of_sequence), (1, 2));
    }

    #[test]
    fn requester_goes_back_n_and_times_out() {
        let f = flow(4 * 4096);
        let mut q = SendQp {
            flow: f,
            layout: Layout::new(f.bytes, f.msg_bytes, 4096),
            state: SendState::Waiting,
            after_done: true,
            plane: 0,
            hash: 0,
            una: 0,
            nxt: 0,
            sent: 0,
            next_tx: Time::ZERO,
            gap_from: Time::ZERO,
            gap_bytes: 0,
            rp: Rp::new(&super::super::dcqcn::DcqcnParams::paper(1_000_000_000)),
            timer_from: Time::ZERO,
            retries: 0,
            released_at: None,
            done_at: None,
            last_progress: Time::ZERO,
            max_stall: Duration::ZERO,
            data_sent: 0,
            retransmits: 0,
            naks: 0,
            timeouts: 0,
        };
        q.release(Time::ZERO);
        for _ in 0..4 {
            q.on_sent(Time::ZERO);
        }
        assert!(!q.has_data());
        // NAK 1: PSN 0 acknowledged, back to 1.
        assert!(!q.on_nak(Time::from_us(5), 1));
        assert_eq!((q.una, q.nxt, q.sent), (1, 1, 4));
        assert!(q.on_sent(Time::from_us(6)));
        assert_eq!(q.retransmits, 1);
        // Timer: back to una, twice, then error after retry_cnt = 1.
        let rto = Duration::from_us(100);
        assert_eq!(q.deadline(rto), Some(Time::from_us(105)));
        q.on_timeout(Time::from_us(105), 1);
        assert_eq!((q.nxt, q.state), (1, SendState::Active));
        assert_eq!(q.max_stall, Duration::from_us(100));
        q.on_timeout(Time::from_us(205), 1);
        assert_eq!(q.state, SendState::Error);
        assert_eq!(q.deadline(rto), None);
    }
}
