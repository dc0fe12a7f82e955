//! A NIC's shard: one datapath stage and one firmware engine joined by their CSR queues, for
//! [`SHARD_QPS`] QPs, or [`NARROW_QPS`] for a NIC that opens at most that many connections (a
//! permutation, a ring), so that a NIC's memory follows its workload (the capacities are a
//! [`Capacity`](mrc_firmware::capacity::Capacity) profile: two widths are two types). Both
//! widths run the same code with the same per-QP capacities, and a narrow NIC's QPs sit in the
//! same slots of its one shard as in a wide shard, so the width changes memory only, never
//! behaviour.
//!
//! A shard stands for one datapath pipeline and the firmware main loop that owns its QPs: a
//! `Pair` (module `pair`); its loop runs on one of the NIC's firmware cores (module
//! `cores`). A NIC of the image's shape has shards of a third kind, `ImageShard` (module
//! `image`): the image's capacities, set up through the admin ring, the loop run natively or
//! as the ELF; the calls into an engine below (QP setup, route sharing, driver operations)
//! have no form there and answer as refused (the NIC never makes them for that shape).

use mrc_abi::device::csr::CsrEntry;
use mrc_firmware::datapath::packet::{Packet, RxVerdict, SendWr};
use mrc_firmware::datapath::placement::{MemRegion, RegisterError};
use mrc_firmware::datapath::stage::{
    DatapathConfig, DatapathCounters, PostError, QpProgress, QpView,
};
use mrc_firmware::engine::ev_state::EvStats;
use mrc_firmware::engine::{
    EngineConfig, EngineCounters, EngineError, FwQpView, QpAttrs, QpError, QpState,
};

use super::image::ImageShard;
use super::pair::{HostWrite, Pair};

/// QPs per shard of a NIC with more than [`NARROW_QPS`] connections.
pub const SHARD_QPS: usize = 4;
/// QPs per shard of a NIC with at most this many connections.
pub const NARROW_QPS: usize = 2;
/// EVs per QP.
pub const EVS: usize = 256;
/// Most planes (NIC ports) a NIC has: the MRC paper's fabric has 8.
pub const MAX_PLANES: usize = 8;
/// PSN window of a QP.
pub const WIN: usize = 512;

mrc_firmware::capacity! {
    /// The wide shard: [`SHARD_QPS`] QPs, 256 EVs over up to 8 planes, a 512-PSN window,
    /// 32-entry send and receive queues, 16 regions.
    pub struct WideShard {
        qps: 4, evs: 256, planes: 8, window_psns: 512, send_queue: 32, recv_queue: 32,
        regions: 16,
    }
}

mrc_firmware::capacity! {
    /// The narrow shard: [`NARROW_QPS`] QPs, otherwise as [`WideShard`].
    pub struct NarrowShard {
        qps: 2, evs: 256, planes: 8, window_psns: 512, send_queue: 32, recv_queue: 32,
        regions: 16,
    }
}

const _: () = {
    use mrc_firmware::capacity::Capacity as C;
    assert!(WideShard::QPS == SHARD_QPS && NarrowShard::QPS == NARROW_QPS);
    assert!(<WideShard as C>::EVS == EVS && <WideShard as C>::PLANES == MAX_PLANES);
    assert!(<WideShard as C>::WINDOW_PSNS == WIN);
};

/// One shard of a NIC (all shards of a NIC have the same width).
pub(crate) enum Shard {
    Wide(Pair<WideShard>),
    Narrow(Pair<NarrowShard>),
    Image(Box<ImageShard>),
}

/// `$body` with `$e` bound to the shard's pair, whichever its width; `$img` for an image
/// shard `$i`.
macro_rules! on {
    ($s:expr, $e:ident => $body:expr, $i:ident => $img:expr) => {
        match $s {
            Shard::Wide($e) => $body,
            Shard::Narrow($e) => $body,
            Shard::Image($i) => $img,
        }
    };
}

/// What an engine call answers for an image shard (no such input reaches an image).
const NO_ENGINE: QpError = QpError::UnknownQp { qpn: u32::MAX };

impl Shard {
    /// A new shard of `width` QPs ([`NARROW_QPS`] or [`SHARD_QPS`]).
    pub(crate) fn new(
        width: usize,
        dp: DatapathConfig,
        fw: EngineConfig,
    ) -> Result<Shard, EngineError> {
        // One function per width: an unoptimized build would otherwise hold both pairs'
        // temporaries in one stack frame.
        #[inline(never)]
        fn narrow(dp: DatapathConfig, fw: EngineConfig) -> Result<Shard, EngineError> {
            Ok(Shard::Narrow(Pair::new(dp, fw)?))
        }
        #[inline(never)]
        fn wide(dp: DatapathConfig, fw: EngineConfig) -> Result<Shard, EngineError> {
            Ok(Shard::Wide(Pair::new(dp, fw)?))
        }
        if width == NARROW_QPS {
            narrow(dp, fw)
        } else {
            wide(dp, fw)
        }
    }

    /// The datapath's view of QP `slot`.
    #[inline]
    pub(crate) fn qp(&self, slot: u32) -> Option<QpView> {
        on!(self, e => e.dp.qp(slot), i => i.qp(slot))
    }
    /// The part of [`Shard::qp`] polled on every input (stall watch, send-queue room).
    #[inline]
    pub(crate) fn qp_progress(&self, slot: u32) -> Option<QpProgress> {
        on!(self, e => e.dp.qp_progress(slot), i => i.qp_progress(slot))
    }
    /// The firmware's view of QP `slot`.
    pub(crate) fn fw_qp(&self, slot: u32) -> Option<FwQpView> {
        on!(self, e => e.fw().qp(slot), _i => None)
    }
    /// EV `ev` of QP `slot`, as the firmware keeps it.
    pub(crate) fn ev_stats(&self, slot: u32, ev: u16) -> Option<EvStats> {
        on!(self, e => e.fw().ev_stats(slot, ev), _i => None)
    }
    pub(crate) fn counters(&self) -> (DatapathCounters, EngineCounters) {
        on!(self, e => (e.dp.counters(), e.fw().counters()),
            i => (i.dp.counters(), i.engine_counters().unwrap_or_default()))
    }
    /// QPs the engine moved to ERROR so far (cheaper than [`Shard::counters`]).
    pub(crate) fn qp_errors(&self) -> u64 {
        on!(self, e => e.fw().counters().qp_errors,
            i => i.engine_counters().map_or(0, |c| c.qp_errors))
    }
    /// CSR entries moved: (DP->FW events, FW->DP commands).
    pub(crate) fn moved(&self) -> (u64, u64) {
        on!(self, e => (e.events_moved, e.commands_moved), i => (i.events_moved, i.commands_moved))
    }
    pub(crate) fn register_region(&mut self, r: MemRegion) -> Result<u16, RegisterError> {
        on!(self, e => e.dp.register_region(r),
            _i => Err(RegisterError::TableFull))
    }
    pub(crate) fn create_qp(&mut self) -> Result<u32, QpError> {
        on!(self, e => e.fw_mut().create_qp(), _i => Err(NO_ENGINE))
    }
    /// Moves QP `slot` to `state` (the stage's context follows at the next pump).
    pub(crate) fn modify_qp(
        &mut self,
        slot: u32,
        state: QpState,
        attrs: &QpAttrs,
        now_ns: u64,
    ) -> Result<(), QpError> {
        on!(self, e => e.fw_mut().modify_qp(slot, state, attrs, now_ns), _i => Err(NO_ENGINE))
    }
    #[inline]
    pub(crate) fn qp_state(&self, slot: u32) -> Option<QpState> {
        on!(self, e => e.fw().qp_state(slot), i => i.qp_state(slot))
    }
    #[inline]
    pub(crate) fn post_send(&mut self, slot: u32, wr: SendWr) -> Result<(), PostError> {
        on!(self, e => e.dp.post_send(slot, wr), i => i.post_send(slot, wr))
    }
    /// A receive work request for QP `slot` (its `wr_id` comes back in the completion).
    pub(crate) fn post_recv(&mut self, slot: u32, wr_id: u64) -> Result<(), PostError> {
        on!(self, e => e.dp.post_recv(slot, wr_id), _i => Err(PostError::NotSending))
    }
    /// The region in the stage's slot `slot`.
    pub(crate) fn region(&self, slot: u16) -> Option<MemRegion> {
        on!(self, e => e.dp.regions().region(slot), i => i.dp.regions().region(slot))
    }
    pub(crate) fn destroy_qp(&mut self, slot: u32) -> Result<(), QpError> {
        on!(self, e => e.fw_mut().destroy_qp(slot), _i => Err(NO_ENGINE))
    }
    pub(crate) fn deregister_region(&mut self, rkey: u32) {
        on!(self, e => { let _ = e.dp.deregister_region(rkey); }, _i => {})
    }
    /// Denies (`allow == false`) or allows EV `ev` of QP `slot` (the engine's min-active guard
    /// may refuse a denial).
    pub(crate) fn set_ev_allowed(&mut self, now_ns: u64, slot: u32, ev: u16, allow: bool) {
        on!(self, e => { let _ = e.fw_mut().set_ev_allowed(now_ns, slot, ev, allow); }, _i => {})
    }
    /// The host's probe `probe_id` of EV `ev` of the QP in `slot` (admin PROBE_EV); `false`
    /// when the engine refuses it or the shard has no engine of its own.
    pub(crate) fn probe_ev(
        &mut self,
        now_ns: u64,
        slot: u32,
        ev: u16,
        probe_id: u32,
        timeout_ns: u64,
    ) -> bool {
        on!(self, e => e.fw_mut().probe_ev(now_ns, slot, ev, probe_id, timeout_ns).is_ok(), _i => false)
    }
    /// The NIC's port on `plane` became (non-)operational.
    pub(crate) fn plane(&mut self, now_ns: u64, plane: u8, up: bool) {
        on!(self, e => if up {
            e.fw_mut().handle_plane_up(now_ns, plane);
        } else {
            e.fw_mut().handle_plane_down(now_ns, plane);
        }, _i => {})
    }
    /// Moves the engine's pending commands into the stage at once (no firmware time: the
    /// admin path's QP contexts and region writes); host writes go to `host`.
    pub(crate) fn flush_commands(&mut self, now_ns: u64, host: &mut Vec<HostWrite>) {
        let mut buf = [CsrEntry::ZERO; 16];
        loop {
            let n = self.fw_commands(&mut buf);
            if n == 0 {
                return;
            }
            self.dp_commands(now_ns, &buf[..n], host);
        }
    }
    #[inline]
    pub(crate) fn poll_timeout(&mut self) -> Option<u64> {
        on!(self, e => e.poll_timeout(), i => {
            crate::core::time::earliest(i.dp.poll_timeout(), i.fw_deadline())
        })
    }
    /// Both halves' timers due at `now_ns` (the engine's commands reach the stage).
    #[inline]
    pub(crate) fn handle_timeout(&mut self, now_ns: u64, host: &mut Vec<HostWrite>) {
        on!(self, e => e.handle_timeout(now_ns, host), i => { i.dp.handle_timeout(now_ns); })
    }
    /// A received packet (its `dest_qpn` the slot) into the stage; `None` when the stage's
    /// event queue is short of room (move its reports on, then try again).
    #[inline]
    pub(crate) fn receive(&mut self, now_ns: u64, pkt: &Packet) -> Option<RxVerdict> {
        on!(self, e => e.receive(now_ns, pkt), i => i.receive(now_ns, pkt))
    }
    /// The next packet the stage sends (its `src_qpn` the slot); `None` when nothing can
    /// leave, or the stage's event queue is short of room ([`Shard::events_pending`]).
    #[inline]
    pub(crate) fn transmit(&mut self, now_ns: u64) -> Option<Packet> {
        on!(self, e => e.transmit(now_ns), i => i.transmit(now_ns))
    }
    /// Reports waiting in the stage.
    #[inline]
    pub(crate) fn events_pending(&self) -> usize {
        on!(self, e => e.dp.events_pending(), i => i.dp.events_pending())
    }
    /// Whether the stage has reports for the firmware.
    #[inline]
    pub(crate) fn has_reports(&self) -> bool {
        on!(self, e => e.has_reports(), i => i.dp.has_events())
    }
    #[inline]
    pub(crate) fn has_retransmit(&self) -> bool {
        on!(self, e => e.dp.has_retransmit(), i => i.dp.has_retransmit())
    }
    /// Moves entries both ways until both halves are quiet (no firmware time). Returns whether
    /// any moved.
    #[inline]
    pub(crate) fn pump(&mut self, now_ns: u64, host: &mut Vec<HostWrite>) -> bool {
        on!(self, e => e.pump(now_ns, host), _i => false)
    }
    /// The stage's reports, for the firmware cores' queue. Returns how many.
    #[inline]
    pub(crate) fn take_events(&mut self, out: &mut [CsrEntry]) -> usize {
        on!(self, e => e.take_events(out), i => i.dp.poll_events(out))
    }
    /// Core step, 1: entries into the loop. Returns how many it took.
    #[inline]
    pub(crate) fn fw_take(&mut self, now_ns: u64, ev: &[CsrEntry]) -> usize {
        on!(self, e => e.fw_take(now_ns, ev), _i => 0)
    }
    /// Core step, 2: the loop's due timers. Returns how many fired.
    #[inline]
    pub(crate) fn fw_timers(&mut self, now_ns: u64) -> u64 {
        on!(self, e => e.fw_timers(now_ns), _i => 0)
    }
    /// Core step, 3: the loop's commands into `out`. Returns how many.
    #[inline]
    pub(crate) fn fw_commands(&mut self, out: &mut [CsrEntry]) -> usize {
        on!(self, e => e.fw_commands(out), _i => 0)
    }
    /// A core step's commands into the stage (host writes to `host`).
    pub(crate) fn dp_commands(
        &mut self,
        now_ns: u64,
        cmds: &[CsrEntry],
        host: &mut Vec<HostWrite>,
    ) {
        on!(self, e => e.dp_commands(now_ns, cmds, host), i => i.deliver(now_ns, cmds, host))
    }
    /// The loop's next timer deadline.
    #[inline]
    pub(crate) fn poll_fw_deadline(&mut self) -> Option<u64> {
        on!(self, e => e.poll_fw_deadline(), i => i.fw_deadline())
    }
    /// The stage's next timer deadline.
    #[inline]
    pub(crate) fn dp_deadline(&self) -> Option<u64> {
        on!(self, e => e.dp.poll_timeout(), i => i.dp.poll_timeout())
    }
    /// The stage's timers due at `now_ns` (not the loop's).
    #[inline]
    pub(crate) fn dp_timeout(&mut self, now_ns: u64) {
        on!(self, e => e.dp_timeout(now_ns), i => { i.dp.handle_timeout(now_ns); })
    }
    pub(crate) fn handle_shared_loss(
        &mut self,
        now_ns: u64,
        slot: u32,
        ev: u16,
    ) -> Result<(), QpError> {
        on!(self, e => e.fw_mut().handle_shared_loss(now_ns, slot, ev), _i => Err(NO_ENGINE))
    }
    pub(crate) fn handle_shared_recovery(
        &mut self,
        now_ns: u64,
        slot: u32,
        ev: u16,
    ) -> Result<(), QpError> {
        on!(self, e => e.fw_mut().handle_shared_recovery(now_ns, slot, ev), _i => Err(NO_ENGINE))
    }
}
