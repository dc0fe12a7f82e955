//! Cost of the whole MRC pipeline per delivered packet.
//!
//! Delivers exactly 1,000,000 data packets from NIC A to NIC B over 256 EVs on 4 planes with 1 %
//! loss (seed 1), through the real datapath models, engines and the test kit's channel
//! (`mrc_firmware::testkit::stream`), and prints one JSON object: `delivered_packets`, the count
//! of each event kind (retransmissions, ACKs, NACKs, probes, EV events, timer expiries, control
//! packets dropped) and the RAM of one QP, one EV and the whole 2-QP test-kit engine. It exits
//! non-zero when the run fails or delivers a different count.
//!
//! `just engine-cost` runs it under callgrind (exact and deterministic) and divides the
//! program's instructions by the delivered packets; the budget is 300 instructions per packet
//! on x86-64, models, engines and channel together. `just bench` records the figure in
//! `BENCHMARKS.md`. The run is the default [`StreamConfig`]: 16-packet messages of 4 KiB
//! payloads, the send queue kept full, independent 1 % loss, 2 us latency, NSCC. Its JSON is
//! deterministic, so a change that should not alter behaviour must leave it byte for byte the
//! same; the instruction count then measures that change alone.
//!
//! An optional argument sets the packet count (default 1,000,000, the budgeted figure), for
//! quicker profiling runs.
//!
//! ```text
//! just engine-cost                            # callgrind, annotated, per-packet figure
//! cargo run --release -p mrc-firmware --features testkit --example engine_cost
//! target/release/examples/engine_cost 100000  # a shorter run
//! callgrind_annotate --inclusive=yes target/engine_cost.callgrind   # where the cost goes
//! ```

use core::mem::size_of;

use mrc_firmware::datapath::Sprayer;
use mrc_firmware::engine::ev_state::EvTable;
use mrc_firmware::engine::Qp;
use mrc_firmware::testkit::stream::{run_stream, StreamConfig};
use mrc_firmware::testkit::TkEngine;

/// RAM of one EV: its EV-table entry (state, statistics, probe state, event-queue slot) and its
/// sprayer slot, measured as the growth of the structs per EV.
fn ram_per_ev_bytes() -> usize {
    (size_of::<EvTable<256>>() - size_of::<EvTable<128>>()) / 128
        + (size_of::<Sprayer<256, 4>>() - size_of::<Sprayer<128, 4>>()) / 128
}

fn main() {
    // Optional first argument: the packet count (default 1,000,000, the budgeted figure).
    let mut cfg = StreamConfig::default();
    if let Some(n) = std::env::args().nth(1) {
        match n.parse() {
            Ok(n) => cfg.packets = n,
            Err(_) => {
                eprintln!("usage: engine_cost [PACKETS]");
                std::process::exit(2);
            }
        }
    }
    // Two engines and the channel live on the stack: give them room.
    let r = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || run_stream(cfg))
        .expect("spawn")
        .join()
        .expect("run");
    let (s, b, c) = (r.sender, r.receiver, r.channel);
    println!(
        concat!(
            "{{\"delivered_packets\":{},\"failed\":{},\"virtual_time_ns\":{},\"messages\":{},",
            "\"completions\":{},\"data_sent\":{},\"retransmits\":{},\"acks_sent\":{},",
            "\"nacks_sent\":{},\"duplicates_received\":{},\"out_of_window\":{},\"probes_sent\":{},",
            "\"probe_replies_sent\":{},\"probe_replies_ok\":{},\"ev_events\":{},\"timeouts_fired\":{},",
            "\"ctrl_dropped\":{},\"channel_sent\":{},\"channel_lost\":{},\"channel_overflow\":{},",
            "\"ram_per_qp_bytes\":{},\"ram_per_ev_bytes\":{},\"ram_engine_bytes\":{}}}"
        ),
        r.delivered_packets,
        r.failed,
        r.end_ns,
        r.messages,
        r.completions,
        s.data_sent,
        s.retransmits_sent,
        b.acks_sent,
        b.nacks_sent,
        b.rx_duplicate,
        b.rx_out_of_window,
        s.probes_sent,
        b.probe_replies_sent,
        s.probe_replies_ok,
        r.ev_events,
        s.timeouts_fired + b.timeouts_fired,
        s.ctrl_dropped + b.ctrl_dropped,
        c.sent,
        c.lost,
        c.overflow,
        // A QP of the test-kit engine: 256 EVs over 4 planes, 512-PSN windows, 32-entry queues.
        size_of::<Qp<256, 4, 512, 8, 32, 32>>(),
        ram_per_ev_bytes(),
        size_of::<TkEngine>(),
    );
    if r.failed || r.delivered_packets != cfg.packets {
        std::process::exit(1);
    }
}
