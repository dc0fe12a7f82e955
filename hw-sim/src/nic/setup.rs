//! Shard setup helpers: QP attributes, counter sums, the congestion-control RTT.

use mrc_firmware::datapath::stage::{DatapathConfig, DatapathCounters, TxCounters};
use mrc_firmware::datapath::AckGenConfig;
use mrc_firmware::engine::cc::NsccParams;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{CcProfile, EngineConfig, EngineCounters, EvProfile, QpAttrs};

use super::{
    NicConfig, NicError, Transport, ACK_COALESCE_NS, ACK_COALESCE_PKTS, EVS, HEADER_BYTES,
    PUMP_BACKLOG_PKTS,
};
use crate::core::time::{Duration, PS_PER_NS, PS_PER_S};

/// `t.f += c.f` for each field `f` of the sums and `t.m = max(t.m, c.m)` for each of the
/// maxima; every field of `$T` must be named (a new counter fails the build here).
macro_rules! add_fields {
    ($T:ident, $t:expr, $c:expr; $($f:ident),* $(,)? $(; max $($m:ident),*)?) => {{
        let $T { $($f,)* $($($m,)*)? } = *$c;
        $( $t.$f = $t.$f.wrapping_add($f); )*
        $($( $t.$m = $t.$m.max($m); )*)?
    }};
}

pub(crate) fn add_engine(t: &mut EngineCounters, c: &EngineCounters) {
    add_fields!(EngineCounters, t, c; events, events_malformed, events_wrong_side,
        events_unknown_qp, backpressure, commands, commands_overflow, timer_arm_failed,
        timeouts_fired, plane_downs, plane_ups, rx_drop_reports, qp_errors);
}

pub(crate) fn add_datapath(t: &mut DatapathCounters, c: &DatapathCounters) {
    add_fields!(DatapathCounters, t, c; rx_packets, rx_unknown_qp, rx_qp_not_ready,
        rx_duplicate, rx_trimmed, rx_out_of_window, rx_remote_access, rx_length, rx_no_recv_buffer, rx_too_many_wimm,
        rx_stale, rx_unexpected, placed, data_sent, retransmits_sent, acks_sent, nacks_sent,
        probes_sent, probe_replies_sent, ctrl_dropped, commands, commands_malformed,
        commands_wrong_side, commands_unknown_qp, events, events_overflow, backpressure,
        host_writes, post_refused, plane_downs, timeouts_fired; max events_max_depth);
}

pub(crate) fn add_tx(t: &mut TxCounters, c: &TxCounters) {
    add_fields!(TxCounters, t, c; posted, post_refused, data_sent, retransmits, acks, acks_stale,
        losses_inferred, tail_probes, tail_probes_quiet, timeouts, nacks_trimmed,
        nacks_out_of_window, nacks_too_many_wimm, nacks_fatal, nacks_stale, orders_stale, orders_bad_ev, flushed,
        completed, completions_refused, stall_window, stall_cc, stall_wimm, stall_no_ev, credits_saturated);
}

/// The unloaded round trip a sample sees on an idle fabric: the fabric's
/// ([`NicConfig::base_rtt`]) plus the responder's ACK coalescing (at
/// most [`ACK_COALESCE_PKTS`] packets at NIC line rate, bounded by [`ACK_COALESCE_NS`]) and the
/// NIC's own port backlog ([`PUMP_BACKLOG_PKTS`] full packets at port rate). NSCC is told the
/// fabric's RTT only (see `Nic::new`); this figure is for diagnostics: NSCC reads the
/// difference as queueing and holds a single full-rate QP's window near the fabric's BDP.
pub fn cc_base_rtt(cfg: &NicConfig) -> Duration {
    let full_bits = u64::from(cfg.mtu_payload + HEADER_BYTES) * 8;
    let nic_bps = cfg.port_bps.saturating_mul(u64::from(cfg.planes)).max(1);
    let ps = |bits: u64, bps: u64| Duration::from_ps(bits.saturating_mul(PS_PER_S) / bps.max(1));
    let coalesce = ps(full_bits * u64::from(ACK_COALESCE_PKTS), nic_bps)
        .min(Duration::from_ns(ACK_COALESCE_NS));
    let backlog = ps(full_bits * PUMP_BACKLOG_PKTS, cfg.port_bps);
    cfg.base_rtt
        .saturating_add(coalesce)
        .saturating_add(backlog)
}

/// The stage's and the engine's configuration of every shard of a NIC with `cfg`, and the
/// NSCC parameters of a QP that has the whole NIC to itself (its initial window the NIC's
/// loaded bandwidth-delay product).
///
/// # Errors
/// [`NicError::Engine`] when the link yields no valid NSCC parameters.
pub(crate) fn shard_configs(
    cfg: &NicConfig,
) -> Result<(DatapathConfig, EngineConfig, NsccParams), NicError> {
    let ecfg = EngineConfig {
        reorder_tx: cfg.reorder_tx,
        // RACK's window: a hole is lost once a packet sent one unloaded fabric RTT after
        // it arrived. Spraying's reordering is the paths' queueing skew, a good part of an
        // RTT on a loaded fabric: a shorter window infers spurious losses by the thousand.
        reorder_ns: u32::try_from(cfg.base_rtt.as_ps() / PS_PER_NS).unwrap_or(u32::MAX),
        ..EngineConfig::default()
    };
    let dcfg = DatapathConfig {
        mtu_payload: cfg.mtu_payload,
        ack: AckGenConfig {
            coalesce_pkts: ACK_COALESCE_PKTS,
            coalesce_ns: ACK_COALESCE_NS,
            ack_on_gap: true,
        },
        planted_bug: cfg.stage_planted_bug,
    };
    let nic_bps = cfg.port_bps.saturating_mul(u64::from(cfg.planes));
    // NSCC's base RTT is the fabric's unloaded RTT: its queueing delay is the samples'
    // excess over it. See `cc_base_rtt`.
    let rtt_ns = (cfg.base_rtt.as_ps() / PS_PER_NS).max(1);
    let mut nscc = NsccParams::for_link(nic_bps, rtt_ns, cfg.mtu_payload)
        .map_err(|_| NicError::Engine("NSCC parameters"))?;
    // Each sending QP starts with its share of the NIC's bandwidth-delay product (it may
    // grow to the whole; `Nic::new` divides it): 63 QPs of an all-to-all each starting at the
    // full BDP put 63 BDPs into the fabric at once (a permutation, one sending QP, is
    // unchanged). The window must cover what an ACK really takes on an idle fabric
    // (coalescing and the NIC's port backlog on top of the fabric RTT, `cc_base_rtt`), or a
    // lone QP cannot fill its link; NSCC's delay target stays on the fabric RTT.
    fit_windows(cfg, &mut nscc);
    Ok((dcfg, ecfg, nscc))
}

/// NSCC's window bounds on a NIC with `cfg`: the initial window covers at least the NIC's
/// loaded bandwidth-delay product, the largest 1.5 times it (see [`shard_configs`]).
pub(crate) fn fit_windows(cfg: &NicConfig, nscc: &mut NsccParams) {
    let nic_bps = cfg.port_bps.saturating_mul(u64::from(cfg.planes));
    let loaded_bdp = u64::try_from(
        u128::from(nic_bps) * u128::from(cc_base_rtt(cfg).as_ps()) / 8 / u128::from(PS_PER_S),
    )
    .unwrap_or(u64::MAX);
    nscc.init_cwnd_bytes = nscc.init_cwnd_bytes.max(loaded_bdp);
    nscc.max_cwnd_bytes = nscc.max_cwnd_bytes.max(loaded_bdp.saturating_mul(3) / 2);
}

/// A sending QP's initial window in equal shares of the NIC's loaded bandwidth-delay product.
const INIT_SHARES: u64 = 8;

/// The initial window of one of `senders` sending QPs: [`INIT_SHARES`] equal shares of
/// `nscc`'s (never more than the whole, never below the smallest window). With one equal
/// share the first round trips of an all-to-all run at a few MTU per QP and leave the NICs
/// below line rate for their first ~15 us.
pub(crate) fn share_init(nscc: &mut NsccParams, senders: usize) {
    nscc.init_cwnd_bytes = (nscc.init_cwnd_bytes.saturating_mul(INIT_SHARES)
        / senders.max(1) as u64)
        .min(nscc.init_cwnd_bytes)
        .max(nscc.min_cwnd_bytes);
}

pub(crate) fn qp_attrs(cfg: &NicConfig, nscc: NsccParams, dest: u32) -> QpAttrs {
    let mut table = match cfg.transport {
        Transport::SprayOblivious => super::spray::oblivious_ev_config(EVS as u16, cfg.planes),
        _ => EvConfig::new(EVS as u16, cfg.planes),
    };
    table.probe_base_ns = 20_000;
    let ev = EvProfile {
        table,
        format: cfg.ev_format(),
        value_base: 0xC000,
    };
    QpAttrs::connect(ev, CcProfile::Nscc(nscc), dest).retry(cfg.retry_cnt, cfg.timeout_exp)
}
