//! The two-NIC part of the QEMU self-test: the test kit (`mrc_firmware::testkit`) on the
//! emulated core, each NIC the datapath model (standing in for the datapath hardware) with the
//! image's main loop ([`mrc_nicloop::NicLoop`], around the engine) as its firmware.
//!
//! - [`checked_pair`]: real payload bytes, a few thousand messages both ways (Write and
//!   Write-with-Immediate, signaled and not) over lossy, duplicating, trimming, CE-marking,
//!   reordering in-memory planes with a blackholed EV and one plane down in the middle of the
//!   run. The test kit checks every destination byte (each written exactly once inside a
//!   message, never outside, equal to its source), completion order, immediates after their
//!   data, and liveness.
//! - [`planted_bug`]: the same checker must catch the test kit's planted datapath bug (a
//!   `TRIMMED_LAST_HOP` NACK taken as the packet's ACK, so it is never resent), so a checker
//!   that cannot fail is itself caught.
//!
//! Capacities are the test kit's (`TestKit`: 2 QPs, 256 EVs, 4 planes, 512-PSN window; 16 KiB
//! of memory per NIC, a 512-packet channel): they fit the 4 MiB QEMU `virt` RAM map (the pair
//! lives on the stack, a few hundred KiB), so nothing is sized down.

use mrc_firmware::datapath::stage::DatapathCounters;
use mrc_firmware::engine::EngineCounters;
use mrc_firmware::testkit::channel::ChannelConfig;
use mrc_firmware::testkit::pair::{PairConfig, MEM};
use mrc_firmware::testkit::{Failure, Pair, Report, TestKit, CHECKED_PAYLOAD};
use mrc_nic_board::crash::{event, EventKind};
use mrc_nicloop::{LoopConfig, NicLoop};

use crate::hal;
use crate::selftest::Check;

/// Seed of the checked run (same seed, same run, same instruction count).
const SEED: u64 = 0x4d52_4331;
/// Waves of up to 32 messages per direction each.
const WAVES: u32 = 48;
/// The plane that fails, from when (virtual ns) and for how long: it goes down at the first
/// moment at or after 3 ms (about a third into the run) when a packet is in flight on it
/// (`PairConfig::outage_under_traffic`; the run has idle gaps waiting on tail-loss timeouts,
/// and the engines send nothing on a plane they know is down), and comes back 2 ms later.
const OUTAGE: (u8, u64, u64) = (2, 3_000_000, 5_000_000);
/// Watchdog period while one long test-kit run is in progress (the run cannot kick it): the
/// longest the NIC watchdog takes, ~4.3 s, i.e. ~4.3 G guest instructions under `-icount 0`.
pub const LONG_RUN_WATCHDOG_NS: u32 = u32::MAX;

/// The checked run's configuration: chaos everywhere, one plane down in the middle.
fn config() -> PairConfig {
    let mut cfg = PairConfig::chaos(SEED);
    cfg.channel = ChannelConfig {
        latency_ns: 8_000,
        loss_ppm: 20_000,
        dup_ppm: 5_000,
        trim_ppm: 10_000,
        trim_last_hop_ppm: 500_000,
        ce_ppm: 20_000,
        reorder_ppm: 50_000,
        reorder_extra_ns: 2_000,
        blackhole_ev: Some(17),
        plane_outage: Some(OUTAGE),
        path_outage: None,
    };
    cfg.outage_under_traffic = true;
    cfg.messages = 32;
    cfg.waves = WAVES;
    cfg.max_len = 480;
    cfg
}

/// Two NICs of `cfg`, each the datapath model with the main loop as its firmware, run to the
/// end; the guest instructions it took.
fn run_pair(cfg: PairConfig) -> (Result<Report, Failure>, u64) {
    let lp = LoopConfig {
        engine: cfg.engine,
        mtu_payload: cfg.datapath.mtu_payload,
    };
    hal::watchdog_start(LONG_RUN_WATCHDOG_NS);
    let start = hal::instret();
    let result =
        Pair::<CHECKED_PAYLOAD, NicLoop<TestKit>>::with_firmware(cfg, || NicLoop::new(lp).ok())
            .and_then(|mut p| p.run());
    let instr = hal::instret() - start;
    hal::watchdog_start(crate::WATCHDOG_NS);
    (result, instr)
}

fn failure_name(f: &Failure) -> &'static str {
    match f {
        Failure::ErrorCompletion { .. } => "error completion",
        Failure::SendOrder { .. } => "send completion out of order",
        Failure::ImmOrder { .. } => "immediate out of order or wrong",
        Failure::ImmBeforeData { .. } => "immediate before its data",
        Failure::Bytes { .. } => "destination byte differs from source",
        Failure::WriteCount { .. } => "destination byte not written exactly once",
        Failure::Wire { .. } => "wire codec round trip",
        Failure::Stuck { .. } => "stuck",
        Failure::Liveness { .. } => "liveness (time limit)",
        Failure::Setup => "setup refused",
    }
}

fn sum_dp(d: &[DatapathCounters; 2], f: fn(&DatapathCounters) -> u64) -> u64 {
    f(&d[0]) + f(&d[1])
}

fn sum_fw(e: &[EngineCounters; 2], f: fn(&EngineCounters) -> u64) -> u64 {
    f(&e[0]) + f(&e[1])
}

/// Two NICs, a few thousand checked messages, a plane failure in the middle.
pub fn checked_pair(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 10));
    let (result, instr) = run_pair(config());
    let r: Report = match result {
        Ok(r) => r,
        Err(f) => {
            defmt::error!("two-NIC run failed: {=str}", failure_name(&f));
            return c.that(false, "two NICs deliver every byte exactly once");
        }
    };
    let (d, e) = (&r.datapaths, &r.engines);
    let placed = sum_dp(d, |k| k.placed);
    let ch = r.channel;
    let bytes_checked = u64::from(WAVES) * 2 * (MEM / 2) as u64;
    c.that(r.messages >= 2_000, "a few thousand messages");
    c.that(
        e.iter().all(|k| k.plane_downs == 1 && k.plane_ups == 1),
        "both NICs saw the plane go down and come back",
    );
    let (plane, down, up) = r.plane_outage.unwrap_or((OUTAGE.0, u64::MAX, u64::MAX));
    c.that(
        down >= OUTAGE.1 && up < r.end_ns && ch.plane_dropped > 0,
        "the plane failed in the middle of traffic",
    );
    c.that(
        ch.lost > 0 && ch.reordered > 0 && ch.duplicated > 0 && ch.trimmed > 0,
        "the planes lost, reordered, duplicated and trimmed packets",
    );
    c.that(
        sum_dp(d, |k| k.retransmits_sent) > 0,
        "losses were repaired by retransmission",
    );
    c.that(
        sum_fw(e, |k| {
            k.events_malformed + k.events_wrong_side + k.commands_overflow
        }) == 0,
        "every CSR entry between datapath and firmware was well formed",
    );
    defmt::info!(
        "two NICs: {} messages, {} completions, {} destination bytes checked, end {} ns (plane {} down {}..{} ns)",
        r.messages,
        r.completions,
        bytes_checked,
        r.end_ns,
        plane,
        down,
        up
    );
    defmt::info!(
        "channel: sent {} delivered {} lost {} dup {} trimmed {} reordered {} ce {} blackholed {} plane-dropped {} overflow {}",
        ch.sent,
        ch.delivered,
        ch.lost,
        ch.duplicated,
        ch.trimmed,
        ch.reordered,
        ch.ce_marked,
        ch.blackholed,
        ch.plane_dropped,
        ch.overflow
    );
    defmt::info!(
        "datapaths: placed {} data-sent {} retransmits {} acks {} nacks {} probes {}; firmware: events {} commands {} timeouts {} ev-events {}",
        placed,
        sum_dp(d, |k| k.data_sent),
        sum_dp(d, |k| k.retransmits_sent),
        sum_dp(d, |k| k.acks_sent),
        sum_dp(d, |k| k.nacks_sent),
        sum_dp(d, |k| k.probes_sent),
        sum_fw(e, |k| k.events),
        sum_fw(e, |k| k.commands),
        sum_fw(e, |k| k.timeouts_fired),
        r.ev_events
    );
    defmt::info!(
        "two NICs: {} guest instr, {} instr per delivered data packet (datapath models, checker, byte copies and wire codec included)",
        instr,
        instr / placed.max(1)
    );
}

/// The checker catches the planted bug (a trimmed-at-last-hop packet never retransmitted).
pub fn planted_bug(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 11));
    let mut cfg = config();
    cfg.datapath.planted_bug = true;
    cfg.waves = 2;
    cfg.max_time_ns = 50_000_000;
    // Enough last-hop trims that the bug bites within two waves.
    cfg.channel.trim_ppm = 100_000;
    let (result, _) = run_pair(cfg);
    let name = match &result {
        Ok(_) => "nothing",
        Err(f) => failure_name(f),
    };
    c.that(result.is_err(), "the checker catches the planted bug");
    defmt::info!("planted bug: the checker reported {=str}", name);
}
