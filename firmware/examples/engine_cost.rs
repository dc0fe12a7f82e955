//! Cost of the NIC model per delivered packet: the datapath stage, the firmware engine and the
//! test kit's channel together, on the test kit's one-way stream (1,000,000 data packets, 16
//! per message, 256 EVs over 4 planes, 1 % loss, seed 1).
//!
//! It prints one JSON line: what the run did (delivered packets, retransmissions, ACKs, CSR
//! entries each way, ...) and the RAM of the structures. The instruction count comes from
//! callgrind, which counts exactly (`just engine-cost` runs it and prints instructions per
//! delivered packet against the budget):
//!
//! ```text
//! cargo build --release -p mrc-firmware --features testkit --example engine_cost
//! valgrind --tool=callgrind target/release/examples/engine_cost   # total / delivered_packets
//! target/release/examples/engine_cost 100000                      # a shorter run
//! target/release/examples/engine_cost 1000000 32                  # 32 packets per message
//! ```
//!
//! `just engine-cost` runs the stream a second time with 32 packets per message: the
//! difference between the two runs is the cost of a message (the work request's post, its
//! first packet, its completion order and CQE: half the messages for the same
//! packets), and what is left of the first figure without it is the cost of a packet.
//!
//! The JSON is deterministic: a change that should not alter behaviour must leave it byte for
//! byte the same, and the instruction count then measures that change alone. `just bench`
//! records the figure in `BENCHMARKS.md`. A run that does not deliver every packet exactly once
//! exits non-zero.

use core::mem::size_of;

use mrc_firmware::capacity::{Capacity, DpQpOf};
use mrc_firmware::datapath::stage::Datapath;
use mrc_firmware::engine::ev_state::EvTable;
use mrc_firmware::engine::Engine;
use mrc_firmware::testkit::stream::{run_stream, StreamConfig};
use mrc_firmware::testkit::TestKit;

/// RAM of one EV: its firmware EV-table entry and its datapath state (sprayer slot, delivery
/// counter, place in the list of skip marks), measured as the growth of the structs per EV.
fn ram_per_ev_bytes() -> usize {
    (size_of::<EvTable<256>>() - size_of::<EvTable<128>>()) / 128
        + (size_of::<DpQpOf<256, 4, 512, 8, 32, 32>>()
            - size_of::<DpQpOf<128, 4, 512, 8, 32, 32>>())
            / 128
}

fn main() {
    // Optional arguments: the packet count (default 1,000,000, the budgeted figure) and the
    // packets per message (default 16; `just engine-cost` also runs 32 to split the cost into
    // its per-packet and per-message parts).
    let mut cfg = StreamConfig::default();
    let args: Option<Vec<u64>> = std::env::args().skip(1).map(|a| a.parse().ok()).collect();
    match args.as_deref() {
        Some([]) => {}
        Some(&[n]) => cfg.packets = n,
        Some(&[n, m]) if (1..=u64::from(u16::MAX)).contains(&m) => {
            cfg.packets = n;
            cfg.msg_packets = m as u32;
        }
        _ => {
            eprintln!("usage: engine_cost [PACKETS [PACKETS_PER_MESSAGE (1..=65535)]]");
            std::process::exit(2);
        }
    }
    let r = run_stream(cfg);
    let (s, b, c) = (r.sender, r.receiver, r.channel);
    println!(
        concat!(
            "{{\"delivered_packets\":{},\"failed\":{},\"virtual_time_ns\":{},\"messages\":{},",
            "\"completions\":{},\"data_sent\":{},\"retransmits\":{},\"acks_sent\":{},",
            "\"nacks_sent\":{},\"duplicates_received\":{},\"out_of_window\":{},\"probes_sent\":{},",
            "\"probe_replies_sent\":{},\"ev_events\":{},\"fw_timeouts_fired\":{},",
            "\"dp_timeouts_fired\":{},\"ctrl_dropped\":{},\"dp_to_fw_entries\":{},",
            "\"fw_to_dp_entries\":{},\"events_max_depth\":{},\"backpressure\":{},",
            "\"channel_sent\":{},\"channel_lost\":{},\"channel_overflow\":{},",
            "\"ram_per_qp_bytes\":{},\"ram_per_ev_bytes\":{},\"ram_nic_bytes\":{}}}"
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
        r.ev_events,
        r.sender_fw.timeouts_fired + r.receiver_fw.timeouts_fired,
        s.timeouts_fired + b.timeouts_fired,
        s.ctrl_dropped + b.ctrl_dropped,
        r.events,
        r.commands,
        s.events_max_depth.max(b.events_max_depth),
        s.backpressure + b.backpressure + r.sender_fw.backpressure + r.receiver_fw.backpressure,
        c.sent,
        c.lost,
        c.overflow,
        // A QP of the test-kit NIC (256 EVs over 4 planes, 512-PSN windows, 32-entry queues):
        // its datapath context and its firmware state.
        size_of::<<TestKit as Capacity>::DpQp>() + size_of::<<TestKit as Capacity>::FwQp>(),
        ram_per_ev_bytes(),
        size_of::<Datapath<TestKit>>() + size_of::<Engine<TestKit>>(),
    );
    if r.failed || r.delivered_packets != cfg.packets {
        std::process::exit(1);
    }
}
