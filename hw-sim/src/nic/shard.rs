//! A NIC's engine shard: the real engine with [`SHARD_QPS`] QP slots, or [`NARROW_QPS`] for a
//! NIC that opens at most that many connections (a permutation, a ring), so that a NIC's
//! memory follows its workload (the engine's capacities are const generics: two widths are
//! two engine types). Both widths run the same engine code with the same per-QP capacities,
//! and a narrow NIC's QPs sit in the same slots of its one shard as in a wide shard, so the
//! width changes memory only, never behaviour (the timer wheel holds the same 3 timers per
//! QP; only its unused capacity differs).

use mrc_firmware::datapath::placement::{MemRegion, RegisterError};
use mrc_firmware::datapath::TrimMark;
use mrc_firmware::engine::{
    Completion, Engine, EngineConfig, EngineCounters, EngineError, QpAttrs, QpError, QpEvEvent,
    QpState, RxMeta, RxVerdict, SendWr, TxPacket, TIMERS_PER_QP,
};

use super::{SimQp, EVS, MAX_PLANES, WIN};

/// QPs per shard of a NIC with more than [`NARROW_QPS`] connections.
pub const SHARD_QPS: usize = 4;
/// QPs per shard of a NIC with at most this many connections.
pub const NARROW_QPS: usize = 2;

/// The wide engine shard: [`SHARD_QPS`] QPs, 256 EVs over up to 8 planes, a 512-PSN window,
/// 32-entry send and receive queues, 4 regions, 3 timers per QP.
pub type SimEngine =
    Engine<SHARD_QPS, EVS, MAX_PLANES, WIN, 8, 32, 32, 4, { TIMERS_PER_QP * SHARD_QPS }>;
/// The narrow engine shard: [`NARROW_QPS`] QPs, otherwise as [`SimEngine`].
pub type NarrowEngine =
    Engine<NARROW_QPS, EVS, MAX_PLANES, WIN, 8, 32, 32, 4, { TIMERS_PER_QP * NARROW_QPS }>;

/// One shard of a NIC (all shards of a NIC have the same width).
pub(crate) enum Shard {
    Wide(Box<SimEngine>),
    Narrow(Box<NarrowEngine>),
}

/// `$body` with `$e` bound to the shard's engine, whichever its width.
macro_rules! on {
    ($s:expr, $e:ident => $body:expr) => {
        match $s {
            Shard::Wide($e) => $body,
            Shard::Narrow($e) => $body,
        }
    };
}

impl Shard {
    /// A new shard of `width` QPs ([`NARROW_QPS`] or [`SHARD_QPS`]).
    pub(crate) fn new(width: usize, cfg: EngineConfig) -> Result<Shard, EngineError> {
        // One function per width: an unoptimized build would otherwise hold both engines'
        // temporaries in one stack frame.
        #[inline(never)]
        fn narrow(cfg: EngineConfig) -> Result<Shard, EngineError> {
            Ok(Shard::Narrow(Box::new(NarrowEngine::new(cfg)?)))
        }
        #[inline(never)]
        fn wide(cfg: EngineConfig) -> Result<Shard, EngineError> {
            Ok(Shard::Wide(Box::new(SimEngine::new(cfg)?)))
        }
        if width == NARROW_QPS {
            narrow(cfg)
        } else {
            wide(cfg)
        }
    }
    #[inline]
    pub(crate) fn qp(&self, slot: u32) -> Option<&SimQp> {
        on!(self, e => e.qp(slot))
    }
    pub(crate) fn counters(&self) -> EngineCounters {
        on!(self, e => e.counters())
    }
    pub(crate) fn register_region(&mut self, r: MemRegion) -> Result<u16, RegisterError> {
        on!(self, e => e.register_region(r))
    }
    pub(crate) fn create_qp(&mut self) -> Result<u32, QpError> {
        on!(self, e => e.create_qp())
    }
    pub(crate) fn modify_qp(
        &mut self,
        slot: u32,
        state: QpState,
        attrs: &QpAttrs,
        now_ns: u64,
    ) -> Result<(), QpError> {
        on!(self, e => e.modify_qp(slot, state, attrs, now_ns))
    }
    #[inline]
    pub(crate) fn qp_state(&self, slot: u32) -> Option<QpState> {
        on!(self, e => e.qp_state(slot))
    }
    #[inline]
    pub(crate) fn post_send(&mut self, slot: u32, wr: SendWr) -> Result<(), QpError> {
        on!(self, e => e.post_send(slot, wr))
    }
    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        on!(self, e => e.poll_timeout())
    }
    #[inline]
    pub(crate) fn handle_timeout(&mut self, now_ns: u64) {
        on!(self, e => {
            e.handle_timeout(now_ns);
        })
    }
    #[inline]
    pub(crate) fn handle_tx_packet(
        &mut self,
        now_ns: u64,
        pkt: &TxPacket,
        trim: TrimMark,
        meta: RxMeta,
    ) -> RxVerdict {
        on!(self, e => e.handle_tx_packet(now_ns, pkt, trim, meta))
    }
    #[inline]
    pub(crate) fn poll_transmit(&mut self, now_ns: u64) -> Option<TxPacket> {
        on!(self, e => e.poll_transmit(now_ns))
    }
    #[inline]
    pub(crate) fn has_retransmit(&self) -> bool {
        on!(self, e => e.has_retransmit())
    }
    #[inline]
    pub(crate) fn poll_completion(&mut self) -> Option<Completion> {
        on!(self, e => e.poll_completion())
    }
    pub(crate) fn handle_shared_loss(
        &mut self,
        now_ns: u64,
        slot: u32,
        ev: u16,
    ) -> Result<(), QpError> {
        on!(self, e => e.handle_shared_loss(now_ns, slot, ev))
    }
    pub(crate) fn handle_shared_recovery(&mut self, slot: u32, ev: u16) -> Result<(), QpError> {
        on!(self, e => e.handle_shared_recovery(slot, ev))
    }
    #[inline]
    pub(crate) fn poll_ev_event(&mut self) -> Option<QpEvEvent> {
        on!(self, e => e.poll_ev_event())
    }
}
