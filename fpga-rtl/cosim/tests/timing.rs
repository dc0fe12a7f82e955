//! The datapath timing table (`mrc_abi::device::datapath_timing`, which clocks the simulator's
//! NIC) against the RTL: each Verilator-built block takes back-to-back inputs with its output
//! always ready, and every input's latency, interval and last output beat must be the table's.

use mrc_abi::device::datapath_timing::{BlockTiming, DATAPATH_BLOCKS};
use mrc_rtl_cosim::{skip_missing, Block, HAVE_VERILATOR};

/// Inputs per measurement.
const INPUTS: usize = 64;

fn skip() -> bool {
    skip_missing("verilator", HAVE_VERILATOR)
}

#[cfg(not(no_verilator))]
fn samples(block: Block) -> Vec<Vec<mrc_rtl_cosim::timing::Sample>> {
    use mrc_rtl_cosim::timing::{hdr_shapes, measure};
    let shapes: Vec<_> = if block == Block::HdrBuilder {
        hdr_shapes().into_iter().map(Some).collect()
    } else {
        vec![None]
    };
    shapes
        .into_iter()
        .map(|s| measure(block, s, INPUTS).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

#[cfg(not(no_verilator))]
fn matches_table(block: Block) {
    use mrc_rtl_cosim::timing::{check, table};
    let t = table(block);
    for run in samples(block) {
        match check(&run, &t) {
            Ok(s) => println!(
                "{}: {} inputs, latency {:?}, interval {:?}, beats {:?} clocks (table: latency {}, ii {} per beat, {}-byte beats)",
                t.block, s.inputs, s.latency, s.interval, s.beats, t.latency_cycles, t.ii_cycles, t.beat_bytes
            ),
            Err(e) => panic!("the RTL and mrc_abi::device::datapath_timing disagree: {e}"),
        }
    }
}

/// A table entry off by one clock in latency or interval must be refused (the comparison
/// can fail).
#[cfg(not(no_verilator))]
fn off_by_one_is_caught(block: Block) {
    use mrc_rtl_cosim::timing::{check, table};
    let t = table(block);
    let wrong = [
        BlockTiming {
            latency_cycles: t.latency_cycles + 1,
            ..t
        },
        BlockTiming {
            ii_cycles: t.ii_cycles + 1,
            ..t
        },
    ];
    let run = &samples(block)[0];
    for w in wrong {
        let e = check(run, &w).expect_err("a wrong table entry went unnoticed");
        println!("{}: wrong entry caught: {e}", t.block);
    }
}

macro_rules! block_tests {
    ($($name:ident, $bad:ident: $block:expr;)*) => {$(
        #[test]
        fn $name() {
            if skip() {
                return;
            }
            #[cfg(not(no_verilator))]
            matches_table($block);
        }
        #[test]
        fn $bad() {
            if skip() {
                return;
            }
            #[cfg(not(no_verilator))]
            off_by_one_is_caught($block);
        }
    )*};
}

block_tests! {
    ev_sprayer_timing_is_the_tables, ev_sprayer_wrong_entry_is_caught: Block::Sprayer;
    hdr_builder_timing_is_the_tables, hdr_builder_wrong_entry_is_caught: Block::HdrBuilder;
    rx_psn_tracker_timing_is_the_tables, rx_psn_tracker_wrong_entry_is_caught: Block::RxTracker;
    csr_event_queue_timing_is_the_tables, csr_event_queue_wrong_entry_is_caught: Block::CsrQueue;
}

#[test]
fn every_block_of_the_table_is_measured() {
    let measured = [
        Block::Sprayer,
        Block::HdrBuilder,
        Block::RxTracker,
        Block::CsrQueue,
    ];
    let names = [
        "ev_sprayer",
        "hdr_builder",
        "rx_psn_tracker",
        "csr_event_queue",
    ];
    assert_eq!(measured.len(), DATAPATH_BLOCKS.len());
    for (b, n) in DATAPATH_BLOCKS.iter().zip(names) {
        assert_eq!(b.block, n, "table order / names");
    }
    #[cfg(not(no_verilator))]
    for (b, t) in measured.iter().zip(DATAPATH_BLOCKS) {
        assert_eq!(mrc_rtl_cosim::timing::table(*b), t);
    }
}
