//! The model's state: requester, responder and the network between them.
//!
//! Everything is small and `Copy`-ish so the checker can hash and store millions of states:
//! PSNs are `u8` (the model never has more than [`MAX_PSNS`] of them), EVs are `u8` indices
//! below [`MAX_EVS`], and the network is a sorted vector (a multiset: the checker may deliver
//! any packet next, which is every possible reordering).

use mrc_abi::Psn;
use mrc_firmware::datapath::rx_bitmap::RxBitmap;

/// Most PSNs a model instance may send.
pub const MAX_PSNS: usize = 8;
/// Most EVs a model instance may use.
pub const MAX_EVS: usize = 4;

/// A packet in the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pkt {
    /// A data packet of `psn` sent on EV `ev`; `trimmed` once a switch cut its payload.
    Data {
        /// Its PSN.
        psn: u8,
        /// The EV it travels on.
        ev: u8,
        /// A switch trimmed it (header only).
        trimmed: bool,
    },
    /// A selective ACK: every PSN below `cum` placed; bit `i` of `sack` = PSN `cum + i` placed.
    Ack {
        /// Cumulative PSN.
        cum: u8,
        /// Selective bits from `cum`.
        sack: u8,
    },
    /// A NACK for a trimmed `psn` (retransmit it), carrying the cumulative PSN too.
    Nack {
        /// Cumulative PSN.
        cum: u8,
        /// The PSN whose payload was lost.
        psn: u8,
    },
}

/// What the requester knows about one PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PsnState {
    /// Not sent yet.
    Unsent,
    /// Sent (last) on EV `ev`, not acknowledged.
    InFlight {
        /// The EV of its latest transmission.
        ev: u8,
    },
    /// Selectively acknowledged (placed at the responder).
    Sacked,
    /// Declared lost (SACK reorder threshold, NACK or timeout): to be retransmitted, on an EV
    /// other than `ev` when one is usable.
    Lost {
        /// The EV it was lost on.
        ev: u8,
    },
}

/// The requester's view of one EV.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EvState {
    /// Usable by the sprayer.
    Good,
    /// Retired after a loss on it; a probe may bring it back.
    Retired,
}

/// The requester (sender) of the connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requester {
    /// Every PSN below it is acknowledged cumulatively.
    pub una: u8,
    /// Next new PSN.
    pub nxt: u8,
    /// Per PSN.
    pub psns: [PsnState; MAX_PSNS],
    /// Per EV.
    pub evs: [EvState; MAX_EVS],
    /// Consecutive timeouts without progress.
    pub retries: u8,
    /// Messages completed, in posting order (a message completes when `una` passes its last
    /// PSN).
    pub completed: u8,
    /// Set when retries ran out: the QP moved to ERROR.
    pub failed: bool,
}

/// The responder (receiver): the real datapath receive tracker plus how often each PSN's payload
/// was written to memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Responder {
    /// The firmware's receive PSN tracker (the hardware block's reference model).
    pub rx: RxBitmap<1>,
    /// Payload writes per PSN (exactly-once: never above 1).
    pub placed: [u8; MAX_PSNS],
    /// An ACK is owed (coalescing: the ACK generator may send it at any later step).
    pub ack_owed: bool,
    /// NACKs owed for trimmed PSNs (bit per PSN).
    pub nack_owed: u8,
}

impl core::hash::Hash for Responder {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        // The tracker's observable state: its cumulative PSN and the bits above it.
        let cum = self.rx.cum_psn();
        cum.value().hash(h);
        self.rx.sack(cum).bitmap.hash(h);
        self.placed.hash(h);
        self.ack_owed.hash(h);
        self.nack_owed.hash(h);
    }
}

/// The fault budget left (faults are bounded so every path is finite and liveness is
/// meaningful: once the budget is spent, the network is reliable and fair).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Packets the network may still drop.
    pub losses: u8,
    /// Packets the network may still duplicate.
    pub dups: u8,
    /// Data packets switches may still trim.
    pub trims: u8,
    /// EVs that may still turn into blackholes.
    pub blackholes: u8,
}

/// One state of the whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Sender.
    pub req: Requester,
    /// Receiver.
    pub resp: Responder,
    /// Packets in flight, sorted (a multiset).
    pub net: Vec<Pkt>,
    /// EVs that silently drop every packet (a dead path); bit per EV.
    pub dead: u8,
    /// Faults left.
    pub budget: Budget,
}

impl State {
    /// The initial state: nothing sent, every EV good.
    pub fn initial(budget: Budget) -> State {
        State {
            req: Requester {
                una: 0,
                nxt: 0,
                psns: [PsnState::Unsent; MAX_PSNS],
                evs: [EvState::Good; MAX_EVS],
                retries: 0,
                completed: 0,
                failed: false,
            },
            resp: Responder {
                rx: RxBitmap::new(Psn::new(0)),
                placed: [0; MAX_PSNS],
                ack_owed: false,
                nack_owed: 0,
            },
            net: Vec::new(),
            dead: 0,
            budget,
        }
    }

    /// Puts `p` in the network, keeping it sorted.
    pub fn push(&mut self, p: Pkt) {
        let at = self.net.partition_point(|q| *q <= p);
        self.net.insert(at, p);
    }

    /// The responder's cumulative PSN.
    pub fn resp_cum(&self) -> u8 {
        self.resp.rx.cum_psn().value() as u8
    }
}
