//! Cost of the whole MRC pipeline per delivered packet.
//!
//! Delivers exactly 1,000,000 data packets from NIC A to NIC B over 256 EVs on 4 planes with 1 %
//! loss (seed 1), through the real datapath models, engines and the test-kit channel, and prints
//! one JSON object: `delivered_packets` and the count of each event kind.
//!
//! Measured (seed 1, x86-64 release, callgrind): 1,227,415,452 instructions for the whole
//! program, i.e. **~1,227 instructions per delivered packet** (was ~1,905), against a budget of
//! 300. Where they go (inclusive, per delivered packet): sender `poll_transmit` ~436 (sprayer
//! ~88, requester peek/commit ~90, packet build and queue bookkeeping the rest), receiver
//! `handle_packet` ~465 (responder `handle_write` ~237 with the ACK generator and RX bitmap
//! ~93 and placement ~22; the sender's ACK processing ~78), channel `send` ~113 and delivery
//! ~25, `to_repr` ~48, timers ~38, completions ~28. RAM: one test-kit QP (256 EVs, 512-PSN
//! windows, 32-entry queues) is 34,408 bytes, one EV 84 bytes (EV table entry + sprayer slot
//! and its plane link), the whole 2-QP test-kit engine 77,184 bytes.
//!
//! ```text
//! cargo run --release -p mrc-firmware --features testkit --example engine_cost
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/engine_cost     # total instructions / delivered_packets
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
    // Two engines and the channel live on the stack: give them room.
    let r = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| run_stream(StreamConfig::default()))
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
    if r.failed || r.delivered_packets != 1_000_000 {
        std::process::exit(1);
    }
}
