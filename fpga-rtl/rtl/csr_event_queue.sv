// csr_event_queue: one CSR queue between the datapath and a firmware core, in the mrc-abi layout
// (mrc_abi::device::csr: 32-byte entries, 2^log2_entries ring, free-running 32-bit producer and
// consumer indices, full when producer - consumer == 2^log2_entries, a full producer drops the
// entry and increments `overflow`: never blocks, never overwrites).
//
// Producer side: AXI-Stream-like entry input `s_*` (no back-pressure: s_ready is always 1; a
// push into a full ring is dropped and counted). Entry bytes are little-endian on the bus:
// byte 0 (the `CsrKind` code) is s_data[7:0], as the package's little-endian structs lay out.
// Consumer side: AXI-Stream `m_*`, one entry per clock, in order; each handshake advances
// `consumer`. Register side: a read port returning the 32-bit words of the queue's
// `csr_queue_regs_t` block (base, log2_entries, producer, consumer, overflow, rsvd) at byte
// offset reg_addr.
//
// Same-cycle push and pop: the push sees the occupancy at the start of the clock (so a push into a
// full ring drops even when an entry leaves in the same clock).
// Storage: 2^LOG2_ENTRIES x 256-bit memory with a combinational read (LUT RAM).
//
// PLANTED_BUG (co-simulation only): the full test is off by one, so a full ring overwrites.
`default_nettype none
`include "mrc_compat.svh"
module csr_event_queue #(
    parameter int LOG2_ENTRIES = 4,
    parameter logic [31:0] BASE = 32'h0
) (
    input  wire logic         clk,
    input  wire logic         rst_n,
    // producer
    input  wire logic         s_valid,
    output logic              s_ready,
    input  wire logic [255:0] s_data,
    // consumer
    output logic              m_valid,
    input  wire logic         m_ready,
    output logic [255:0]      m_data,
    // register read port (byte offset in the CsrQueueRegs block)
    input  wire logic [4:0]   reg_addr,
    output logic [31:0]       reg_rdata
);
  `MRC_TYPEDEF(csr_queue_regs_t)
  localparam int ENTRIES = 1 << LOG2_ENTRIES;
  localparam int EBITS = mrc_abi_pkg::ABI_CSR_ENTRY_BYTES * 8;

  logic [EBITS-1:0] mem [ENTRIES];
  logic [31:0] producer_q, consumer_q, overflow_q;
  logic [31:0] used;
  logic full;

  `MRC_COMB begin
    used = producer_q - consumer_q;
`ifdef PLANTED_BUG
    full = used > 32'(ENTRIES);
`else
    full = used >= 32'(ENTRIES);
`endif
  end

  assign s_ready = 1'b1;
  assign m_valid = producer_q != consumer_q;
  assign m_data = mem[consumer_q[LOG2_ENTRIES-1:0]];

  // Registers, laid out by the generated package.
  `MRC_T(csr_queue_regs_t) regs;
  logic [$bits(regs)-1:0] regs_bits;
  `MRC_COMB begin
    regs = '0;
    regs.base = BASE;
    regs.log2_entries = 32'(LOG2_ENTRIES);
    regs.producer = producer_q;
    regs.consumer = consumer_q;
    regs.overflow = overflow_q;
    regs_bits = regs;
    reg_rdata = regs_bits[{reg_addr[4:2], 5'd0} +: 32];
  end

  always_ff @(posedge clk) begin
    if (s_valid && !full) mem[producer_q[LOG2_ENTRIES-1:0]] <= s_data;
  end

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      producer_q <= '0;
      consumer_q <= '0;
      overflow_q <= '0;
    end else begin
      if (s_valid) begin
        if (full) overflow_q <= overflow_q + 32'd1;
        else producer_q <= producer_q + 32'd1;
      end
      if (m_valid && m_ready) consumer_q <= consumer_q + 32'd1;
    end
  end

  // verilator lint_off UNUSEDSIGNAL
  wire unused_addr = reg_addr[0] | reg_addr[1];
  // verilator lint_on UNUSEDSIGNAL
endmodule
`default_nettype wire
