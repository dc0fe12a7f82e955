//! The protocol as a [`stateright::Model`]: the requester's rules, the responder (built on the
//! firmware's receive tracker) and a network that drops, duplicates, trims, reorders and
//! blackholes.
//!
//! # Rules modelled (the engine's, see `mrc_firmware::engine::requester`)
//! - **Window**: a new PSN goes out only while `nxt - una < window` (the MPR bound).
//! - **Spraying**: each transmission picks any usable (GOOD) EV: the checker tries every choice,
//!   which covers every sprayer policy. A retransmission avoids the EV its PSN was lost on when
//!   another GOOD EV exists.
//! - **Loss inference**: an in-flight PSN is lost once `reorder` later PSNs are selectively
//!   acknowledged; a NACK (trimmed payload) marks its PSN lost; an ACK timeout marks every
//!   in-flight PSN lost. SACK inference applies to first transmissions only (the engine counts
//!   transmissions sent after the hole; a retransmission is repaired by NACK or timeout).
//! - **EV retirement**: the EV of a PSN lost by SACK inference or timeout is retired unless
//!   that would leave fewer than `min_active` GOOD EVs (the min-active guard). Trims are
//!   congestion, not path failure: no retirement.
//! - **Probes**: when the ACK timer fires, every retired EV is probed; a live one returns to
//!   GOOD (the probe timer never outlasts the ACK timeout: the fairness assumption that makes
//!   liveness provable).
//! - **Timeout**: fires only when the network is quiet (nothing in flight, nothing owed by the
//!   responder, no retransmission waiting: the engine retransmits as soon as it marks a loss),
//!   the latest a real timer could fire; `retry_cnt` timeouts without progress move the QP to ERROR.
//! - **Responder**: the real [`RxBitmap`](mrc_firmware::datapath::rx_bitmap::RxBitmap) decides
//!   new / duplicate; only a new PSN's payload is written; a trimmed packet owes a NACK; any
//!   data packet owes an ACK (cumulative PSN + selective bits), sent at any later step
//!   (coalescing).
//! - **Completions**: message `m` completes when `una` passes its last PSN, in posting order.
//!
//! # Faults
//! Bounded by [`Budget`]: drop or duplicate any packet, trim a data packet, turn an EV into a
//! blackhole (every later packet on it vanishes; it never comes back). Reordering is free: any
//! packet in the network may be delivered next.

use mrc_abi::Psn;
use mrc_firmware::datapath::rx_bitmap::RxOutcome;
use stateright::{Model, Property};

use crate::state::{Budget, EvState, Pkt, PsnState, State, MAX_EVS, MAX_PSNS};

/// A deliberately broken variant, to show the checker finds protocol bugs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// The responder writes a payload without asking the receive tracker (no duplicate check).
    NoDuplicateCheck,
    /// The requester treats the highest selectively acknowledged PSN as cumulative.
    SackAsCumulative,
    /// A retransmission goes out on the EV its PSN was lost on, even when that EV is retired.
    RetransmitOnLostEv,
}

/// One model instance: sizes, thresholds, fault budget, optional planted bug.
#[derive(Clone, Copy, Debug)]
pub struct Protocol {
    /// PSNs to move (<= [`MAX_PSNS`]).
    pub psns: u8,
    /// PSNs per message (divides `psns`).
    pub msg_psns: u8,
    /// Most PSNs outstanding (MPR window).
    pub window: u8,
    /// EVs (<= [`MAX_EVS`]).
    pub evs: u8,
    /// Min-active guard.
    pub min_active: u8,
    /// Later PSNs SACKed before a hole counts as lost.
    pub reorder: u8,
    /// Timeouts without progress before ERROR.
    pub retry_cnt: u8,
    /// Most packets the network holds (back-pressure).
    pub net_cap: u8,
    /// Faults.
    pub budget: Budget,
    /// A planted bug, or none.
    pub bug: Option<PlantedBug>,
}

impl Protocol {
    /// Messages to complete.
    pub fn messages(&self) -> u8 {
        self.psns / self.msg_psns.max(1)
    }

    /// True when every parameter is in range.
    pub fn is_valid(&self) -> bool {
        usize::from(self.psns) <= MAX_PSNS
            && self.msg_psns > 0
            && self.psns.is_multiple_of(self.msg_psns)
            && self.window > 0
            && usize::from(self.evs) <= MAX_EVS
            && self.min_active >= 1
            && self.min_active <= self.evs
            && self.reorder >= 1
            && self.net_cap > 0
    }

    fn good(&self, s: &State) -> impl Iterator<Item = u8> + '_ {
        let evs = s.req.evs;
        (0..self.evs).filter(move |e| evs[usize::from(*e)] == EvState::Good)
    }

    fn good_count(&self, s: &State) -> u8 {
        self.good(s).count() as u8
    }

    fn retire(&self, s: &mut State, ev: u8) {
        let e = usize::from(ev);
        if s.req.evs[e] == EvState::Good && self.good_count(s) > self.min_active {
            s.req.evs[e] = EvState::Retired;
        }
    }

    /// EVs a transmission of `psn` may use.
    fn tx_evs(&self, s: &State, psn: u8) -> Vec<u8> {
        let good: Vec<u8> = self.good(s).collect();
        match s.req.psns[usize::from(psn)] {
            PsnState::Lost { ev } => {
                if self.bug == Some(PlantedBug::RetransmitOnLostEv) {
                    return vec![ev];
                }
                let other: Vec<u8> = good.iter().copied().filter(|g| *g != ev).collect();
                if other.is_empty() {
                    good
                } else {
                    other
                }
            }
            _ => good,
        }
    }

    /// Nothing in the network, nothing owed by the responder and nothing waiting to be
    /// retransmitted: the only state in which the ACK timer must fire.
    fn quiet(&self, s: &State) -> bool {
        s.net.is_empty()
            && !s.resp.ack_owed
            && s.resp.nack_owed == 0
            && !s.req.psns[..usize::from(s.req.nxt)]
                .iter()
                .any(|p| matches!(p, PsnState::Lost { .. }))
    }

    /// The requester takes a cumulative PSN (and selective bits above it).
    fn on_ack(&self, s: &mut State, cum: u8, sack: u8) {
        let r = &mut s.req;
        for p in r.una..cum.min(r.nxt) {
            r.psns[usize::from(p)] = PsnState::Sacked;
        }
        for i in 0..8u8 {
            let p = cum.saturating_add(i);
            if sack & (1 << i) != 0 && p < r.nxt {
                r.psns[usize::from(p)] = PsnState::Sacked;
            }
        }
        let mut una = r.una.max(cum.min(r.nxt));
        if self.bug == Some(PlantedBug::SackAsCumulative) {
            if let Some(top) = (una..r.nxt)
                .rev()
                .find(|p| r.psns[usize::from(*p)] == PsnState::Sacked)
            {
                una = top + 1;
            }
        }
        if una > r.una {
            r.una = una;
            r.retries = 0;
        }
        // Loss inference on first transmissions.
        let mut lost = Vec::new();
        for p in r.una..r.nxt {
            if let PsnState::InFlight { ev } = r.psns[usize::from(p)] {
                let later = (p + 1..r.nxt)
                    .filter(|q| r.psns[usize::from(*q)] == PsnState::Sacked)
                    .count();
                if later >= usize::from(self.reorder) && ev & RETX == 0 {
                    lost.push((p, ev));
                }
            }
        }
        for (p, ev) in lost {
            s.req.psns[usize::from(p)] = PsnState::Lost { ev };
            self.retire(s, ev);
        }
        let r = &mut s.req;
        while r.completed < self.messages() && r.una >= (r.completed + 1) * self.msg_psns {
            r.completed += 1;
        }
    }

    fn deliver(&self, s: &mut State, p: Pkt) {
        match p {
            Pkt::Data { ev, .. } if s.dead & (1 << ev) != 0 => {}
            Pkt::Data {
                psn, trimmed: true, ..
            } => s.resp.nack_owed |= 1 << psn,
            Pkt::Data { psn, .. } => {
                let outcome = s.resp.rx.receive(Psn::new(u32::from(psn)));
                let write = match self.bug {
                    Some(PlantedBug::NoDuplicateCheck) => outcome != RxOutcome::OutOfWindow,
                    _ => outcome == RxOutcome::New,
                };
                if write {
                    let n = &mut s.resp.placed[usize::from(psn)];
                    *n = n.saturating_add(1);
                }
                s.resp.ack_owed = true;
            }
            Pkt::Ack { cum, sack } => self.on_ack(s, cum, sack),
            Pkt::Nack { cum, psn } => {
                self.on_ack(s, cum, 0);
                if let PsnState::InFlight { ev } = s.req.psns[usize::from(psn)] {
                    s.req.psns[usize::from(psn)] = PsnState::Lost { ev: ev & !RETX };
                }
            }
        }
    }
}

/// Marks an `InFlight` EV index as a retransmission (SACK inference skips it).
const RETX: u8 = 0x80;

/// One step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The requester transmits `psn` (new or lost) on `ev`.
    Send {
        /// PSN.
        psn: u8,
        /// EV.
        ev: u8,
    },
    /// The network delivers a packet.
    Deliver(Pkt),
    /// The network drops a packet (fault).
    Drop(Pkt),
    /// The network duplicates a packet (fault).
    Duplicate(Pkt),
    /// A switch trims a data packet (fault).
    Trim(Pkt),
    /// An EV turns into a blackhole (fault).
    Blackhole(u8),
    /// The responder sends the ACK it owes.
    SendAck,
    /// The responder sends a NACK for a trimmed PSN.
    SendNack(u8),
    /// The requester's ACK timer fires (the network is quiet).
    Timeout,
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State::initial(self.budget)]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let r = &s.req;
        if r.failed {
            return;
        }
        let room = s.net.len() < usize::from(self.net_cap);
        if room {
            if r.nxt < self.psns && r.nxt - r.una < self.window {
                for ev in self.tx_evs(s, r.nxt) {
                    out.push(Action::Send { psn: r.nxt, ev });
                }
            }
            for psn in r.una..r.nxt {
                if matches!(r.psns[usize::from(psn)], PsnState::Lost { .. }) {
                    for ev in self.tx_evs(s, psn) {
                        out.push(Action::Send { psn, ev });
                    }
                }
            }
            if s.resp.ack_owed {
                out.push(Action::SendAck);
            }
            for psn in 0..self.psns {
                if s.resp.nack_owed & (1 << psn) != 0 {
                    out.push(Action::SendNack(psn));
                }
            }
        }
        let mut prev = None;
        for p in &s.net {
            if prev == Some(*p) {
                continue; // identical copies: one action each
            }
            prev = Some(*p);
            out.push(Action::Deliver(*p));
            if s.budget.losses > 0 {
                out.push(Action::Drop(*p));
            }
            if s.budget.dups > 0 && room {
                out.push(Action::Duplicate(*p));
            }
            if s.budget.trims > 0 && matches!(p, Pkt::Data { trimmed: false, .. }) {
                out.push(Action::Trim(*p));
            }
        }
        if s.budget.blackholes > 0 {
            for ev in 0..self.evs {
                if s.dead & (1 << ev) == 0 {
                    out.push(Action::Blackhole(ev));
                }
            }
        }
        if r.una < r.nxt && self.quiet(s) {
            out.push(Action::Timeout);
        }
    }

    fn next_state(&self, last: &State, a: Action) -> Option<State> {
        let mut s = last.clone();
        let take = |s: &mut State, p: Pkt| {
            if let Ok(i) = s.net.binary_search(&p) {
                s.net.remove(i);
            }
        };
        match a {
            Action::Send { psn, ev } => {
                let retx = matches!(s.req.psns[usize::from(psn)], PsnState::Lost { .. });
                s.req.psns[usize::from(psn)] = PsnState::InFlight {
                    ev: if retx { ev | RETX } else { ev },
                };
                if psn == s.req.nxt {
                    s.req.nxt += 1;
                }
                s.push(Pkt::Data {
                    psn,
                    ev,
                    trimmed: false,
                });
            }
            Action::Deliver(p) => {
                take(&mut s, p);
                self.deliver(&mut s, p);
            }
            Action::Drop(p) => {
                take(&mut s, p);
                s.budget.losses -= 1;
            }
            Action::Duplicate(p) => {
                s.push(p);
                s.budget.dups -= 1;
            }
            Action::Trim(p) => {
                take(&mut s, p);
                if let Pkt::Data { psn, ev, .. } = p {
                    s.push(Pkt::Data {
                        psn,
                        ev,
                        trimmed: true,
                    });
                }
                s.budget.trims -= 1;
            }
            Action::Blackhole(ev) => {
                s.dead |= 1 << ev;
                s.budget.blackholes -= 1;
            }
            Action::SendAck => {
                let cum = s.resp.rx.cum_psn();
                let sack = s.resp.rx.sack(cum).bitmap as u8;
                s.resp.ack_owed = false;
                s.push(Pkt::Ack {
                    cum: cum.value() as u8,
                    sack,
                });
            }
            Action::SendNack(psn) => {
                s.resp.nack_owed &= !(1 << psn);
                let cum = s.resp_cum();
                s.push(Pkt::Nack { cum, psn });
            }
            Action::Timeout => {
                s.req.retries += 1;
                if s.req.retries > self.retry_cnt {
                    s.req.failed = true;
                    return Some(s);
                }
                for ev in 0..self.evs {
                    if s.req.evs[usize::from(ev)] == EvState::Retired && s.dead & (1 << ev) == 0 {
                        s.req.evs[usize::from(ev)] = EvState::Good;
                    }
                }
                let mut lost = Vec::new();
                for p in s.req.una..s.req.nxt {
                    if let PsnState::InFlight { ev } = s.req.psns[usize::from(p)] {
                        lost.push((p, ev & !RETX));
                    }
                }
                for (p, ev) in lost {
                    s.req.psns[usize::from(p)] = PsnState::Lost { ev };
                    self.retire(&mut s, ev);
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("exactly once", |_, s: &State| {
                s.resp.placed.iter().all(|n| *n <= 1)
            }),
            Property::always("acknowledged data was placed", |_, s: &State| {
                (0..s.req.nxt).all(|p| {
                    let acked = p < s.req.una || s.req.psns[usize::from(p)] == PsnState::Sacked;
                    !acked || s.resp.placed[usize::from(p)] >= 1
                })
            }),
            Property::always(
                "completions only of acknowledged messages",
                |m, s: &State| {
                    s.req.completed <= m.messages()
                        && u16::from(s.req.completed) * u16::from(m.msg_psns)
                            <= u16::from(s.req.una)
                },
            ),
            Property::always("min-active guard holds", |m, s: &State| {
                m.good_count(s) >= m.min_active
            }),
            Property::eventually("every message completes", |m, s: &State| {
                s.req.completed == m.messages() && !s.req.failed
            }),
            Property::sometimes("completes across a blackholed EV", |m, s: &State| {
                s.dead != 0 && s.req.completed == m.messages()
            }),
            Property::sometimes("completes after a trim", |m, s: &State| {
                s.budget.trims < m.budget.trims && s.req.completed == m.messages()
            }),
        ]
    }
}
