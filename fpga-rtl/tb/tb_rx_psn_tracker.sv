// Icarus bench: in-order, hole-then-fill, duplicate and out-of-window cases of rx_psn_tracker
// (the same cases as the RxBitmap unit tests). Run: see fpga-rtl/README.md.
`timescale 1ns/1ps
module tb_rx_psn_tracker;
  logic clk = 0, rst_n = 0;
  logic cmd_valid = 0, cmd_ready, rsp_valid;
  logic [1:0] cmd_op = 0, rsp_outcome;
  logic [23:0] cmd_psn = 0, rsp_cum, rsp_next_max, rsp_sack_base;
  logic [63:0] rsp_sack_bitmap;
  logic [31:0] cnt_new, cnt_dup, cnt_oow;
  int errors = 0, checks = 0;
  rx_psn_tracker #(.WORDS(4)) dut (.clk, .rst_n, .cmd_valid, .cmd_ready, .cmd_op, .cmd_psn,
    .rsp_valid, .rsp_ready(1'b1), .rsp_outcome, .rsp_cum, .rsp_next_max, .rsp_sack_base,
    .rsp_sack_bitmap, .cnt_new, .cnt_dup, .cnt_oow);
  always #5 clk = ~clk;

  task automatic cmd(input logic [1:0] op, input logic [23:0] psn, input logic [1:0] want,
                     input logic [23:0] want_cum);
    @(negedge clk);
    cmd_valid = 1; cmd_op = op; cmd_psn = psn;
    @(negedge clk);
    cmd_valid = 0;
    checks += (op == 2'd0) ? 2 : 1;
    if (op == 2'd0 && rsp_outcome !== want) begin
      $display("FAIL psn %0d: outcome %0d, want %0d", psn, rsp_outcome, want); errors++;
    end
    if (rsp_cum !== want_cum) begin
      $display("FAIL psn %0d: cum %0d, want %0d", psn, rsp_cum, want_cum); errors++;
    end
  endtask

  initial begin
    repeat (2) @(negedge clk);
    rst_n = 1;
    cmd(2'd2, 24'd0, 0, 0);       // reset to 0
    cmd(2'd0, 24'd2, 0, 0);       // hole
    cmd(2'd0, 24'd3, 0, 0);
    cmd(2'd0, 24'd3, 1, 0);       // duplicate
    cmd(2'd1, 24'd0, 0, 0);       // SACK from 0
    checks++;
    if (rsp_sack_bitmap[3:0] !== 4'b1100) begin $display("FAIL sack %b", rsp_sack_bitmap[3:0]); errors++; end
    cmd(2'd0, 24'd0, 0, 1);
    cmd(2'd0, 24'd1, 0, 4);       // fills the hole: cum jumps to 4
    cmd(2'd0, 24'd260, 2, 4);     // 4 + 256: out of window
    cmd(2'd0, 24'hFFFFFF, 1, 4);  // before cum: duplicate
    cmd(2'd2, 24'hFFFFFE, 0, 24'hFFFFFE);  // wrap
    cmd(2'd0, 24'hFFFFFF, 0, 24'hFFFFFE);
    cmd(2'd0, 24'hFFFFFE, 0, 24'd0);
    if (errors == 0) $display("PASS tb_rx_psn_tracker: %0d checks", checks);
    else $fatal(1, "tb_rx_psn_tracker: %0d errors", errors);
    $finish;
  end
endmodule
