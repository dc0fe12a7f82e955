//! Engine setup helpers: QP attributes, counter sums, the congestion-control RTT.

use mrc_firmware::engine::cc::NsccParams;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{CcProfile, EngineCounters, EvProfile, QpAttrs, RequesterCounters};

use super::{
    NicConfig, Transport, ACK_COALESCE_NS, ACK_COALESCE_PKTS, EVS, HEADER_BYTES, PUMP_BACKLOG_PKTS,
};
use crate::core::time::{Duration, PS_PER_S};

pub(crate) fn add_engine(t: &mut EngineCounters, c: &EngineCounters) {
    t.rx_packets += c.rx_packets;
    t.rx_unknown_qp += c.rx_unknown_qp;
    t.rx_qp_not_ready += c.rx_qp_not_ready;
    t.rx_duplicate += c.rx_duplicate;
    t.rx_trimmed += c.rx_trimmed;
    t.rx_out_of_window += c.rx_out_of_window;
    t.rx_remote_access += c.rx_remote_access;
    t.rx_length += c.rx_length;
    t.rx_no_recv_buffer += c.rx_no_recv_buffer;
    t.rx_too_many_wimm += c.rx_too_many_wimm;
    t.rx_stale += c.rx_stale;
    t.rx_missing_evx += c.rx_missing_evx;
    t.rx_unexpected += c.rx_unexpected;
    t.placed += c.placed;
    t.data_sent += c.data_sent;
    t.retransmits_sent += c.retransmits_sent;
    t.acks_sent += c.acks_sent;
    t.nacks_sent += c.nacks_sent;
    t.probes_sent += c.probes_sent;
    t.probe_replies_sent += c.probe_replies_sent;
    t.probe_replies_ok += c.probe_replies_ok;
    t.ctrl_dropped += c.ctrl_dropped;
    t.ev_events_dropped += c.ev_events_dropped;
    t.ev_events += c.ev_events;
    t.timer_arm_failed += c.timer_arm_failed;
    t.timeouts_fired += c.timeouts_fired;
    t.qp_errors += c.qp_errors;
    t.completions += c.completions;
    t.plane_downs += c.plane_downs;
    t.plane_ups += c.plane_ups;
}

pub(crate) fn add_requester(t: &mut RequesterCounters, c: &RequesterCounters) {
    t.posted += c.posted;
    t.post_refused += c.post_refused;
    t.data_sent += c.data_sent;
    t.retransmits += c.retransmits;
    t.acks += c.acks;
    t.acks_stale += c.acks_stale;
    t.losses_inferred += c.losses_inferred;
    t.tail_probes += c.tail_probes;
    t.nacks_trimmed += c.nacks_trimmed;
    t.nacks_out_of_window += c.nacks_out_of_window;
    t.nacks_too_many_wimm += c.nacks_too_many_wimm;
    t.nacks_fatal += c.nacks_fatal;
    t.nacks_stale += c.nacks_stale;
    t.timeouts += c.timeouts;
    t.give_ups += c.give_ups;
    t.completions += c.completions;
    t.flushed += c.flushed;
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

pub(crate) fn qp_attrs(cfg: &NicConfig, nscc: NsccParams, dest: u32) -> QpAttrs {
    let mut table = match cfg.transport {
        Transport::SprayOblivious => super::spray::oblivious_ev_config(EVS as u16, cfg.planes),
        _ => EvConfig::new(EVS as u16, cfg.planes),
    };
    table.probe_base_ns = 20_000;
    let ev = EvProfile {
        table,
        format: cfg.transport.ev_format(),
        value_base: 0xC000,
    };
    QpAttrs::connect(ev, CcProfile::Nscc(nscc), dest).retry(cfg.retry_cnt, cfg.timeout_exp)
}
