// Icarus bench: csr_event_queue against a ring model written in the bench (the mrc-abi ring
// rules: free-running indices, full when producer - consumer == entries, a push into a full ring
// is dropped and counted, never overwrites; same-clock push and pop see the occupancy at the start
// of the clock). Register offsets come from the generated package's *_OFF constants.
// Directed: fill to full, overflow, drain, simultaneous push/pop at full and empty. Random: 20,000
// clocks of random pushes, pops (back-pressure) and register reads. Every clock checks m_valid,
// the entry at the consumer index (when valid), s_ready and the addressed register word.
// Prints "PASS tb_csr_event_queue: N checks" or stops with $fatal.
`timescale 1ns/1ps
module tb_csr_event_queue;
  localparam int LOG2 = 4;
  localparam int ENTRIES = 1 << LOG2;
  localparam logic [31:0] BASE = 32'h0004_2000;
  localparam int RANDOM_CLOCKS = 20000;

  logic clk = 0, rst_n = 0;
  logic s_valid = 0, s_ready, m_valid, m_ready = 0;
  logic [255:0] s_data = '0, m_data;
  logic [4:0] reg_addr = '0;
  logic [31:0] reg_rdata;
  csr_event_queue #(.LOG2_ENTRIES(LOG2), .BASE(BASE)) dut (.clk, .rst_n, .s_valid, .s_ready,
    .s_data, .m_valid, .m_ready, .m_data, .reg_addr, .reg_rdata);
  always #5 clk = ~clk;

  // Reference ring.
  logic [255:0] ring [ENTRIES];
  logic [31:0] prod = 0, cons = 0, ovf = 0;
  longint checks = 0;
  logic [63:0] rng = 64'h4d52_4331_0000_0007;

  function automatic logic [63:0] next_rand(input logic [63:0] x);
    x = x ^ (x >> 12);
    x = x ^ (x << 25);
    x = x ^ (x >> 27);
    return x;
  endfunction
  task automatic rand32(output logic [31:0] v);
    rng = next_rand(rng);
    v = rng[63:32];
  endtask

  function automatic logic [31:0] want_reg(input logic [4:0] a);
    logic [31:0] off;
    off = {27'd0, a[4:2], 2'b00};
    if (off == mrc_abi_pkg::CSR_QUEUE_REGS_BASE_OFF) return BASE;
    if (off == mrc_abi_pkg::CSR_QUEUE_REGS_LOG2_ENTRIES_OFF) return LOG2;
    if (off == mrc_abi_pkg::CSR_QUEUE_REGS_PRODUCER_OFF) return prod;
    if (off == mrc_abi_pkg::CSR_QUEUE_REGS_CONSUMER_OFF) return cons;
    if (off == mrc_abi_pkg::CSR_QUEUE_REGS_OVERFLOW_OFF) return ovf;
    return 32'd0;  // reserved words
  endfunction

  task automatic fail(input string what);
    $fatal(1, "tb_csr_event_queue: %s (t=%0t prod %0d cons %0d ovf %0d)", what, $time, prod, cons,
           ovf);
  endtask

  // One clock with the given inputs: check the outputs before the edge, then update the model.
  task automatic clock(input logic push, input logic [255:0] data, input logic pop,
                       input logic [4:0] addr);
    logic [31:0] used;
    @(negedge clk);
    s_valid = push;
    s_data = data;
    m_ready = pop;
    reg_addr = addr;
    #1;
    used = prod - cons;
    if (s_ready !== 1'b1) fail("s_ready low");
    if (m_valid !== (used != 0)) fail("m_valid");
    if (m_valid && m_data !== ring[cons[LOG2-1:0]]) fail("m_data");
    if (reg_rdata !== want_reg(addr)) fail($sformatf("register at %0d: %h", addr, reg_rdata));
    checks += 4;
    @(posedge clk);
    if (push) begin
      if (used >= ENTRIES) ovf = ovf + 1;
      else begin
        ring[prod[LOG2-1:0]] = data;
        prod = prod + 1;
      end
    end
    if (pop && used != 0) cons = cons + 1;
  endtask

  task automatic rand_entry(output logic [255:0] e);
    logic [31:0] w;
    for (int i = 0; i < 8; i++) begin
      rand32(w);
      e[32*i +: 32] = w;
    end
  endtask

  logic [255:0] e;
  logic [31:0] r;
  initial begin
    repeat (2) @(negedge clk);
    rst_n = 1;
    // Directed: empty, fill to full, two overflows, a push+pop at full (the push drops), drain.
    clock(0, '0, 1, 5'd8);
    for (int i = 0; i < ENTRIES; i++) begin
      rand_entry(e);
      clock(1, e, 0, 5'(4 * (i % 8)));
    end
    rand_entry(e);
    clock(1, e, 0, 5'h10);
    clock(1, e, 0, 5'h10);
    clock(1, e, 1, 5'h10);
    if (ovf != 3) fail("directed: expected 3 overflows");
    for (int i = 0; i < ENTRIES + 2; i++) clock(0, '0, 1, 5'hC);
    // Push and pop in the same clock on an empty ring: the pop sees nothing yet.
    rand_entry(e);
    clock(1, e, 1, 5'h8);
    clock(0, '0, 1, 5'hC);
    if (prod != cons || prod != ENTRIES + 1) fail("directed: indices after drain");
    // Random: push 55%, pop 60% (back-pressure 40%).
    for (int t = 0; t < RANDOM_CLOCKS; t++) begin
      rand32(r);
      rand_entry(e);
      clock(r[7:0] < 8'd140, e, r[15:8] < 8'd154, r[20:16]);
    end
    if (ovf < 10 || cons < 1000) fail("random run did not reach full and empty often enough");
    $display("PASS tb_csr_event_queue: %0d checks, %0d pushes, %0d pops, %0d overflows", checks,
             prod, cons, ovf);
    $finish;
  end
endmodule
