//! The firmware's retransmission orders and the send side's recovery: ordered PSNs, the
//! requeue after an ACK timeout, tail loss probes, a plane going down, ERROR and its flush
//! reports.

use mrc_abi::device::csr::{self, CsrEvent, Flushed, EV_ANY};
use mrc_abi::Psn;

use super::{Mode, RtoWindow, TxSide, F_AVOID, F_INFLIGHT, F_LOST, F_PENDING, TLP_REORDER_WINDOWS};
use crate::datapath::stage::events::Events;

impl<const WIN: usize, const SQ: usize> TxSide<WIN, SQ> {
    /// The firmware orders `psn` resent on `ev` ([`EV_ANY`]: the sprayer's pick, `avoid`ing
    /// the plane, else the EV, it last left on).
    pub(crate) fn order_retransmit(&mut self, psn: Psn, ev: u16, avoid: bool) {
        let s = self.slot(psn);
        if self.mode != Mode::Live
            || !self.in_flight_range(psn)
            || s.flags & (F_LOST | F_INFLIGHT) == 0
        {
            self.counters.orders_stale += 1;
            return;
        }
        if s.flags & F_INFLIGHT != 0 {
            self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(s.len));
        }
        self.queue_retx(psn, ev, avoid);
    }

    fn queue_retx(&mut self, psn: Psn, ev: u16, avoid: bool) {
        if self.mark_pending(psn, ev, avoid) {
            // Cannot overflow: each PSN of the window is queued at most once.
            let _ = self.retx.push_back(psn);
        }
    }

    /// Slot `psn` waits to be resent on `ev` (with `avoid`, away from where it last left);
    /// `false` when the PSN has no slot. The caller queues it.
    #[inline]
    fn mark_pending(&mut self, psn: Psn, ev: u16, avoid: bool) -> bool {
        let Some(s) = self.slot_mut(psn) else {
            return false;
        };
        s.flags = F_PENDING | if avoid { F_AVOID } else { 0 };
        s.retx_ev = ev;
        true
    }

    /// After an ACK timeout: every unacknowledged PSN of `[una, nxt)` is queued for
    /// retransmission in PSN order, the oldest first, each once, away from the plane (else
    /// the EV) it last took; only the oldest leaves until the peer answers.
    ///
    /// The queue is rebuilt rather than appended to: PSNs already waiting would otherwise keep
    /// their old place while the ones just lost again go behind them, and `una` could wait
    /// behind dozens of PSNs the peer cannot acknowledge (beyond its 64-bit SACK bitmap).
    pub(crate) fn requeue_unacked(&mut self) {
        if self.mode != Mode::Live {
            return;
        }
        self.counters.timeouts += 1;
        self.retx.clear();
        let mut psn = self.una;
        while psn != self.nxt {
            let s = self.slot(psn);
            if s.flags & F_INFLIGHT != 0 {
                self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(s.len));
            }
            if s.flags & (F_INFLIGHT | F_PENDING | F_LOST) != 0 {
                self.queue_retx(psn, EV_ANY, true);
            }
            psn = psn.add(1);
        }
        self.rto = RtoWindow::One;
    }

    /// A tail loss probe: the newest PSN in flight is resent away from the plane (else the
    /// EV) it last took, unless the QP transmitted within the probe timeout
    /// ([`TLP_REORDER_WINDOWS`] reorder windows): the firmware times the probe from the last
    /// send or ACK it heard of, and hears of a burst's first packet and of each work request's
    /// last, not of every packet (RACK-TLP times it from every transmission; a transmission
    /// that recent will draw an ACK, which re-arms the firmware's probe). After an ACK
    /// timeout, while its one retransmission waits for an answer, the probe resends `una`
    /// ahead of the rebuilt queue instead.
    pub(crate) fn tail_probe(&mut self, now_ns: u64) {
        if self.mode != Mode::Live {
            return;
        }
        if self.rto == RtoWindow::Wait {
            // The ACK timeout's one retransmission (of `una`) drew no answer: it or its ACK
            // was lost on its path. `una` leaves again, away from where it last left, ahead
            // of the queue the timeout rebuilt (the window stays one packet). (No quiet
            // test: the firmware timed this probe from its timeout order, and that
            // retransmission left right after the order.)
            let una = self.una;
            let s = self.slot(una);
            if s.flags & F_INFLIGHT == 0 || self.retx.is_full() {
                return;
            }
            self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(s.len));
            if self.mark_pending(una, EV_ANY, true) {
                let _ = self.retx.push_front(una);
            }
            self.rto = RtoWindow::One;
            self.counters.tail_probes += 1;
            return;
        }
        let quiet = (now_ns as u32).wrapping_sub(self.last_sent_ns);
        if self.una != self.nxt && quiet < TLP_REORDER_WINDOWS.saturating_mul(self.reorder.ns) {
            self.counters.tail_probes_quiet += 1;
            return;
        }
        let mut psn = self.nxt;
        while psn != self.una {
            psn = psn.sub(1);
            let s = self.slot(psn);
            if s.flags & F_INFLIGHT != 0 {
                self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(s.len));
                self.queue_retx(psn, EV_ANY, true);
                self.counters.tail_probes += 1;
                return;
            }
        }
    }

    /// Plane `plane` went down: what was in flight on it is resent on other EVs.
    pub(crate) fn plane_down(&mut self, plane: u8) {
        if self.mode != Mode::Live {
            return;
        }
        let mut psn = self.una;
        while psn != self.nxt {
            let s = self.slot(psn);
            if s.plane == plane && s.flags & F_INFLIGHT != 0 {
                self.inflight_bytes = self.inflight_bytes.saturating_sub(u64::from(s.len));
                self.queue_retx(psn, EV_ANY, true);
            }
            psn = psn.add(1);
        }
    }

    /// The firmware's order to complete the `count` oldest retired work requests: their
    /// slots are freed, and `signaled` gets the id of each that asked for a completion, in
    /// posting order. Orders beyond the retired work requests are counted and not done.
    pub(crate) fn complete_sends(&mut self, count: u16, mut signaled: impl FnMut(u64)) {
        let n = usize::from(count).min(self.retired);
        for _ in 0..n {
            let Some(w) = self.sq.pop_front() else {
                break;
            };
            if w.wr.signaled {
                signaled(w.wr.wr_id);
            }
        }
        self.retired -= n;
        self.send_idx -= n;
        self.counters.completed += n as u64;
        self.counters.completions_refused += u64::from(count) - n as u64;
    }

    /// ERROR: nothing more leaves; [`Self::poll_flush`] reports every work request not
    /// completed.
    pub(crate) fn enter_error(&mut self) {
        if self.mode == Mode::Live {
            self.mode = Mode::Error;
            self.retx.clear();
            self.retired = 0;
            self.send_idx = 0;
        } else if self.mode == Mode::Off {
            self.mode = Mode::Error;
        }
    }

    /// Reports flushed work requests while `events` has room; `true` when none is left.
    pub(crate) fn poll_flush(&mut self, qpn: u32, events: &mut Events) -> bool {
        if self.mode != Mode::Error {
            return true;
        }
        while let Some(w) = self.sq.front() {
            if events.room() == 0 {
                return false;
            }
            let flags = if w.wr.signaled {
                csr::FLUSH_SIGNALED
            } else {
                0
            };
            events.push(CsrEvent::Flushed(Flushed::new(qpn, w.wr.wr_id, flags)));
            self.counters.flushed += 1;
            self.sq.pop_front();
        }
        true
    }

    /// Whether flushed work requests wait to be reported.
    pub(crate) fn flush_pending(&self) -> bool {
        self.mode == Mode::Error && !self.sq.is_empty()
    }
}
