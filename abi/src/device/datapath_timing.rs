//! Cycle timing of the datapath's RTL blocks (`fpga-rtl/rtl/`), and the clock they run at.
//!
//! One table, read by the RTL co-simulation (`mrc-rtl-cosim`'s `timing` test measures every
//! block under Verilator and fails when a figure here differs) and by the simulator's NIC
//! (`mrc-sim`'s `nic::dp_clock`, which times each packet through the blocks with it).
//!
//! # What the figures mean
//! Cycles are clocks of the datapath clock ([`DATAPATH_CLOCK_HZ`]). An input is *accepted* in
//! the clock whose rising edge samples `valid && ready` on the block's input stream.
//! - **Latency** ([`BlockTiming::latency_cycles`]): clocks from that edge to the first clock in
//!   which the block's output stream shows `valid` for it (with the output never stalled). A
//!   registered response one clock later is a latency of 1.
//! - **Initiation interval** ([`BlockTiming::ii_cycles`]): clocks between two accepted inputs
//!   when inputs are offered back to back and the output is never stalled.
//! - **Beats** ([`BlockTiming::beat_bytes`]): a block whose output for one input is a stream of
//!   `ceil(len / beat_bytes)` beats, one per clock (the header builder: `len` = the header
//!   length), holds each input for `ii_cycles` per beat, and its last beat is valid
//!   `beats - 1` clocks after the first. `beat_bytes == 0`: one output per input.
//!
//! # Provenance
//! Every latency and interval is what the RTL does, measured: `fpga-rtl/cosim/tests/timing.rs`
//! drives each Verilator-built block with back-to-back inputs and an always-ready output and
//! counts the clocks (the header builder for every header length class it emits: 2, 3 and 4
//! beats). They follow from the RTL's structure: the sprayer and PSN tracker register one
//! response per command (`cmd_ready = !rsp_valid || rsp_ready`), the CSR queue's `m_valid` is
//! `producer != consumer` of registers written at the push, the header builder registers the
//! frame and sends one 512-bit beat per clock, taking the next descriptor in the clock of the
//! last beat.
//!
//! The clock is a choice, not a timing-closure result: Yosys 0.23 does no timing analysis and no
//! vendor place and route has been run (`fpga-rtl/README.md`, "Synthesis"). 322.265625 MHz is
//! the clock of the 512-bit AXI-Stream interface of the Ethernet MACs a 512-bit streaming
//! datapath attaches to (UltraScale+ CMAC: 64 bytes x 322.265625 MHz = 165 Gb/s of bus for
//! 100GbE; the same 10.3125 GBd / 32 reference multiple), so the datapath needs no clock-domain
//! crossing to the MAC. At that clock a 1-clock block takes 3.1 ns per packet, against the
//! ~40 ns between packets of one 200G plane at MTU size.

/// The datapath clock (Hz): see the module docs for why this value.
pub const DATAPATH_CLOCK_HZ: u64 = 322_265_625;

/// Timing of one RTL block (see the module docs for the exact definitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockTiming {
    /// The RTL module's name.
    pub block: &'static str,
    /// Clocks from an accepted input to its first output valid.
    pub latency_cycles: u32,
    /// Clocks between accepted inputs (per output beat when `beat_bytes > 0`).
    pub ii_cycles: u32,
    /// Bytes per output beat for blocks that stream a variable-length output (0: one output
    /// per input).
    pub beat_bytes: u32,
}

impl BlockTiming {
    /// Output beats for an input whose output is `len` bytes (1 for a one-output block; at
    /// least 1).
    pub const fn beats(&self, len: u32) -> u32 {
        if self.beat_bytes == 0 {
            1
        } else {
            let b = len.div_ceil(self.beat_bytes);
            if b == 0 {
                1
            } else {
                b
            }
        }
    }

    /// Clocks the block holds an input of `len` output bytes before it accepts the next.
    pub const fn interval(&self, len: u32) -> u32 {
        self.ii_cycles.saturating_mul(self.beats(len))
    }

    /// Clocks from accepting an input of `len` output bytes to its last output beat valid.
    pub const fn last_output(&self, len: u32) -> u32 {
        self.latency_cycles.saturating_add(self.beats(len) - 1)
    }
}

/// `ev_sprayer`: one EV decision (or EV table write) per command.
pub const EV_SPRAYER: BlockTiming = BlockTiming {
    block: "ev_sprayer",
    latency_cycles: 1,
    ii_cycles: 1,
    beat_bytes: 0,
};

/// `hdr_builder`: one packet's headers per descriptor, as 64-byte beats.
pub const HDR_BUILDER: BlockTiming = BlockTiming {
    block: "hdr_builder",
    latency_cycles: 1,
    ii_cycles: 1,
    beat_bytes: 64,
};

/// `rx_psn_tracker`: one receive (or SACK, reset) per command.
pub const RX_PSN_TRACKER: BlockTiming = BlockTiming {
    block: "rx_psn_tracker",
    latency_cycles: 1,
    ii_cycles: 1,
    beat_bytes: 0,
};

/// `csr_event_queue`: one DP->FW entry pushed per clock, at the consumer the next clock when
/// the queue was empty.
pub const CSR_EVENT_QUEUE: BlockTiming = BlockTiming {
    block: "csr_event_queue",
    latency_cycles: 1,
    ii_cycles: 1,
    beat_bytes: 0,
};

/// Every block, in pipeline order: transmit (EV pick, header build), receive (PSN tracking),
/// then the DP->FW event queue.
pub const DATAPATH_BLOCKS: [BlockTiming; 4] =
    [EV_SPRAYER, HDR_BUILDER, RX_PSN_TRACKER, CSR_EVENT_QUEUE];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beats_and_intervals() {
        assert_eq!(EV_SPRAYER.beats(1500), 1);
        assert_eq!(EV_SPRAYER.interval(0), 1);
        // 86-byte UDP header: 2 beats; 230-byte SRv6 with a 4-segment SRH: 4 beats.
        assert_eq!(HDR_BUILDER.beats(86), 2);
        assert_eq!(HDR_BUILDER.beats(128), 2);
        assert_eq!(HDR_BUILDER.beats(129), 3);
        assert_eq!(HDR_BUILDER.interval(230), 4);
        assert_eq!(HDR_BUILDER.last_output(230), 4);
        assert_eq!(HDR_BUILDER.beats(0), 1);
    }

    #[test]
    fn table_is_in_pipeline_order_and_named_once() {
        let names = DATAPATH_BLOCKS.map(|b| b.block);
        assert_eq!(
            names,
            [
                "ev_sprayer",
                "hdr_builder",
                "rx_psn_tracker",
                "csr_event_queue"
            ]
        );
        assert!(DATAPATH_BLOCKS
            .iter()
            .all(|b| b.latency_cycles >= 1 && b.ii_cycles >= 1));
    }
}
