// Icarus bench: rx_psn_tracker. Directed: the RxBitmap unit-test cases (in order, hole then fill,
// duplicate, SACK, out of window, wrap). Random: RANDOM_CMDS commands (receives around the window,
// SACKs from bases around cum, occasional resets, some near the 24-bit wrap) with random response
// back-pressure, against a window model written in the bench (a 256-bit vector aligned to cum,
// shifted as cum advances: RxBitmap's rules, not the RTL's fixed-position ring). Every response
// (outcome, cum, next_max, SACK base and bitmap) and the three counters are compared.
// Prints "PASS tb_rx_psn_tracker: N checks ..." or stops with $fatal.
`timescale 1ns/1ps
module tb_rx_psn_tracker;
  localparam int W = 256;
  localparam int RANDOM_CMDS = 5000;
  logic clk = 0, rst_n = 0;
  logic cmd_valid = 0, cmd_ready, rsp_valid, rsp_ready = 1;
  logic [1:0] cmd_op = 0, rsp_outcome;
  logic [23:0] cmd_psn = 0, rsp_cum, rsp_next_max, rsp_sack_base;
  logic [63:0] rsp_sack_bitmap;
  logic [31:0] cnt_new, cnt_dup, cnt_oow;
  longint checks = 0;
  rx_psn_tracker #(.WORDS(4)) dut (.clk, .rst_n, .cmd_valid, .cmd_ready, .cmd_op, .cmd_psn,
    .rsp_valid, .rsp_ready, .rsp_outcome, .rsp_cum, .rsp_next_max, .rsp_sack_base,
    .rsp_sack_bitmap, .cnt_new, .cnt_dup, .cnt_oow);
  always #5 clk = ~clk;

  // ---- model
  logic [W-1:0] win = '0;  // bit k: PSN cum+k received
  logic [23:0] cum = 0, next_max = 0;
  logic [31:0] n_new = 0, n_dup = 0, n_oow = 0;

  function automatic logic received(input logic [23:0] p);
    logic [23:0] d;
    d = p - cum;
    if (d < W) return win[d[7:0]];
    return d[23];
  endfunction

  // Apply a command; returns {outcome, cum, next_max, sack_base, sack_bitmap}.
  task automatic model(input logic [1:0] op, input logic [23:0] psn, output logic [137:0] r);
    logic [23:0] d, ahead, behind;
    logic [1:0] outcome;
    logic [63:0] sack;
    outcome = 0;
    sack = 0;
    d = psn - cum;
    case (op)
      2'd0:
        if (d >= W) outcome = d[23] ? 2'd1 : 2'd2;
        else if (win[d[7:0]]) outcome = 2'd1;
        else begin
          win[d[7:0]] = 1'b1;
          ahead = psn - next_max;
          if (!ahead[23]) next_max = psn + 1;
          if (d == 0) begin
            while (win[0]) begin
              win = win >> 1;
              cum = cum + 1;
            end
            behind = next_max - cum;
            if (behind[23]) next_max = cum;
          end
        end
      2'd1: for (int i = 0; i < 64; i++) sack[i] = received(psn + 24'(i));
      default: begin
        cum = psn;
        next_max = psn;
        win = '0;
      end
    endcase
    if (op == 2'd0)
      case (outcome)
        2'd0: n_new = n_new + 1;
        2'd1: n_dup = n_dup + 1;
        default: n_oow = n_oow + 1;
      endcase
    r = {outcome, cum, next_max, psn, sack};
  endtask

  logic [137:0] exp_q [4];
  int head = 0, tail = 0;
  task automatic fail(input string what);
    $fatal(1, "tb_rx_psn_tracker: %s (t=%0t)", what, $time);
  endtask

  // One clock: offer a command (valid = 0: none) with rsp_ready = rr.
  task automatic clock(input logic valid, input logic [1:0] op, input logic [23:0] psn,
                       input logic rr, output logic accepted);
    logic [137:0] r;
    @(negedge clk);
    cmd_valid = valid;
    cmd_op = op;
    cmd_psn = psn;
    rsp_ready = rr;
    #1;
    if (rsp_valid && rsp_ready) begin
      if (head == tail) fail("response without a command");
      r = exp_q[head % 4];
      if ({rsp_outcome, rsp_cum, rsp_next_max, rsp_sack_base, rsp_sack_bitmap} !== r)
        fail($sformatf("response %0d cum %h next_max %h base %h sack %h; model %0d %h %h %h %h",
                       rsp_outcome, rsp_cum, rsp_next_max, rsp_sack_base, rsp_sack_bitmap,
                       r[137:136], r[135:112], r[111:88], r[87:64], r[63:0]));
      head++;
      checks++;
    end
    accepted = valid && cmd_ready;
    if (accepted) begin
      model(op, psn, r);
      exp_q[tail % 4] = r;
      tail++;
    end
    @(posedge clk);
    #1;
    if ({cnt_new, cnt_dup, cnt_oow} !== {n_new, n_dup, n_oow}) fail("counters");
    checks++;
  endtask

  // Directed: issue one command, wait for its response, check outcome (receives) and cum.
  task automatic cmd(input logic [1:0] op, input logic [23:0] psn, input logic [1:0] want,
                     input logic [23:0] want_cum);
    logic acc = 0;
    while (!acc) clock(1, op, psn, 1, acc);
    while (head != tail) clock(0, 0, 0, 1, acc);
    if (op == 2'd0 && exp_q[(head - 1) % 4][137:136] !== want) fail("directed outcome");
    if (exp_q[(head - 1) % 4][135:112] !== want_cum) fail("directed cum");
  endtask

  logic [63:0] rng = 64'h4d52_4331_5258_5054;
  task automatic rand32(output logic [31:0] v);
    rng = rng ^ (rng >> 12);
    rng = rng ^ (rng << 25);
    rng = rng ^ (rng >> 27);
    v = rng[63:32];
  endtask

  logic [31:0] r, r2;
  logic acc;
  int sent = 0;
  initial begin
    repeat (2) @(negedge clk);
    rst_n = 1;
    cmd(2'd2, 24'd0, 0, 0);       // reset to 0
    cmd(2'd0, 24'd2, 0, 0);       // hole
    cmd(2'd0, 24'd3, 0, 0);
    cmd(2'd0, 24'd3, 1, 0);       // duplicate
    cmd(2'd1, 24'd0, 0, 0);       // SACK from 0
    if (exp_q[(head - 1) % 4][3:0] !== 4'b1100) fail("directed SACK");
    cmd(2'd0, 24'd0, 0, 1);
    cmd(2'd0, 24'd1, 0, 4);       // fills the hole: cum jumps to 4
    cmd(2'd0, 24'd260, 2, 4);     // 4 + 256: out of window
    cmd(2'd0, 24'hFFFFFF, 1, 4);  // before cum: duplicate
    cmd(2'd2, 24'hFFFFFE, 0, 24'hFFFFFE);  // wrap
    cmd(2'd0, 24'hFFFFFF, 0, 24'hFFFFFE);
    cmd(2'd0, 24'hFFFFFE, 0, 24'd0);
    // Random: receives 85% (mostly just ahead of cum, some behind or far ahead), SACKs 14%,
    // resets 1% (a quarter of them just before the 24-bit wrap).
    while (sent < RANDOM_CMDS) begin
      rand32(r);
      rand32(r2);
      if (r[7:0] < 8'd217) begin
        if (r[15:8] < 8'd200) clock(1, 2'd0, cum + 24'(r2[5:0]), r[16] | r[17], acc);
        else clock(1, 2'd0, cum + 24'(r2[9:0]) - 24'd300, r[16] | r[17], acc);
      end else if (r[7:0] < 8'd253) clock(1, 2'd1, cum + 24'(r2[8:0]) - 24'd128, r[16] | r[17], acc);
      else clock(1, 2'd2, r2[1:0] == 0 ? 24'hFFFFFF - 24'(r2[7:2]) : r2[23:0], r[16] | r[17], acc);
      if (acc) sent++;
    end
    while (head != tail) clock(0, 0, 0, 1, acc);
    if (n_new < 1000 || n_dup < 100 || n_oow < 10) fail("random run too weak");
    $display("PASS tb_rx_psn_tracker: %0d checks, %0d commands, %0d new, %0d duplicate, %0d out of window",
             checks, tail, n_new, n_dup, n_oow);
    $finish;
  end
endmodule
