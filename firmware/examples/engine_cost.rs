//! Cost of the whole MRC pipeline per delivered packet.
//!
//! Delivers exactly 1,000,000 data packets from NIC A to NIC B over 256 EVs on 4 planes with 1 %
//! loss (seed 1), through the real datapath models, engines and the test-kit channel, and prints
//! one JSON object: `delivered_packets` and the count of each event kind.
//!
//! Measured (seed 1, x86-64 release, callgrind, this machine): 892,004,376 instructions for the
//! whole program, i.e. **~892 instructions per delivered packet**, against a budget of 300 (not
//! met). The last row of the table below is 857; the send time per PSN, the RACK time rule and
//! the tail loss probe the simulator's sprayed runs need (off here: `reorder_ns = 0`, but the
//! bookkeeping runs) added 33. History: ~1,905, then 1,227 (before the stuck-PSN fix); the fix and the per-PSN EV
//! delivery credit added work (and finish the run in 65.9 ms of virtual time instead of
//! 90.1 ms: tail losses now repair from `una` first), skip-once bookkeeping without a 256-EV
//! scan, a timer wheel that returns at once when nothing is due, ACKs that apply only new
//! SACK bits and a leaner responder return took it to 1,244. Then, each step re-measured on
//! the same machine with the same JSON output (the run itself is unchanged, only its cost):
//!
//! | step | instructions / packet |
//! |---|---|
//! | baseline | 1,244 |
//! | sprayer chains only usable EVs per plane (about 2/3 of the 256 EVs are retired at any time in this run) and picks without the general scan | 1,221 |
//! | `Engine::handle_tx_packet` (receive the sender's descriptor, no `MrcRepr`), word-wise RX bitmap advance, ACK timer re-armed only when a coalescing interval opens, channel short path when only loss is configured | 1,153 |
//! | fast paths for the common packet: `Responder::handle_write_fast` (then only for packets that trigger no ACK), `Requester::send_new_fast` | 1,024 |
//! | `Ring` (head + length FIFO) instead of `heapless::Deque` for the send, retransmission and control queues; in-order arrivals step `cum` directly; engine-level transmit fast path | 976 |
//! | `Engine::poll_transmit_into` builds the packet in the channel's FIFO slot (`Channel::send_with`); one pass for the cumulative ACK | 927 |
//! | the receive fast path also takes the packets that trigger an ACK | 911 |
//! | the receive fast path locates the PSN in the RX bitmap once; completion polls inlined | 889 |
//! | `handle_tx_packet`, `handle_timeout` (`TimerWheel::is_quiet`) and the channel's `pop_due_ref`: an inline fast check, the general part out of line | 857 |
//! | per-PSN send time (16-byte TX slots), newest delivered send time, tail-loss-probe arming (RACK loss inference for sprayed traffic) | 890 |
//! | one timer-bookkeeping helper for both send paths (was written twice) | 892 |
//!
//! Tried and dropped (measured worse or no better): `lto = "fat"` + `codegen-units = 1` in the
//! release profile (1,206 -> 1,125 before the fast paths, but 972 -> 973 after them), a
//! branch-free `Psn::distance_from` (+18), a sprayer pick that wraps the EV chain without the
//! general scan (+3), forced inlining of the receive fast path (+3) and of `poll_completion`
//! (+2).
//!
//! Where the 857 go (inclusive, per delivered packet, from `callgrind_annotate --inclusive=yes`):
//! transmit ~350 (both NICs: the requester's fast path ~80, the sprayer ~70 of which ~25 in
//! its general scan, building the 88-byte `TxPacket` ~30, the general path for ACKs, stalls
//! and retransmissions ~30, engine glue), receive of data ~230 (RX bitmap ~34, ACK generator
//! ~36, placement check ~35, the ACKs it emits), the sender's ACK processing ~118 (per-PSN
//! delivery credit with the EV's gray-loss test ~40, SACK bits, loss inference, EV and CC
//! feedback, EV-event sync), channel ~65 (loss draw ~15, FIFO), completions ~24, timers ~20,
//! posting ~9. RAM: one test-kit QP (256 EVs, 512-PSN windows, 32-entry queues) is 36,536
//! bytes, one EV 84 bytes (EV table entry + sprayer slot and its plane link), the whole 2-QP
//! test-kit engine 81,448 bytes (all printed by this example).
//!
//! An optional argument sets the packet count (default 1,000,000, the budgeted figure), for
//! quicker profiling runs.
//!
//! ```text
//! cargo run --release -p mrc-firmware --features testkit --example engine_cost
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/engine_cost     # total instructions / delivered_packets
//! target/release/examples/engine_cost 100000  # a shorter run
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
