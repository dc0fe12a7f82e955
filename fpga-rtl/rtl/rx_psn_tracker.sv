// rx_psn_tracker: receive PSN bitmap of one QP (reference model: mrc_firmware::datapath::RxBitmap).
//
// State: cumulative PSN `cum` (every PSN before it received, `cum` itself not), a ring of
// W = 64*WORDS bits for PSNs cum .. cum+W-1, PSN p at bit p mod W (no rotation: the window's
// bits stay where they are as cum moves; bits behind cum are cleared as it passes them), and
// `next_max` (one past the highest PSN received). 24-bit wrap-around PSN arithmetic throughout.
// The cumulative advance is a circular find-first-zero from bit cum mod W: the lowest zero at or
// above it (v & -v, one W-bit carry chain), else the lowest zero below it.
//
// One command per clock on a valid/ready stream; one registered response per command:
//   OP_RECEIVE (RxBitmap::receive): classify req_psn New / Duplicate / OutOfWindow, set its bit,
//     advance `cum` over every consecutive received PSN (find-first-zero over the ring, one clock).
//     Response: outcome, cum and next_max after the update.
//   OP_SACK (RxBitmap::sack): the 64-bit SACK from base req_psn: bit i = PSN base+i received
//     (before cum reads 1, beyond the window 0). State unchanged.
//   OP_RESET (RxBitmap::reset): expect req_psn next, forget every bit (counters kept).
// Back-pressure: cmd_ready = !rsp_valid || rsp_ready (throughput: 1 packet per clock).
// Counters (free-running, wrapping, 32 bits here; the model's are 64): new, dup, oow.
//
// PLANTED_BUG (co-simulation only): the window check is off by one (cum+W is accepted).
// PLANTED_BUG_SACK (the simulator's instance, mrc_rtl_cosim::sim): the SACK never reports the PSN
// after its base (bit 1), so an ACK with a hole at its cumulative PSN hides the packet after it.
`default_nettype none
`include "mrc_compat.svh"
module rx_psn_tracker #(
    parameter int WORDS = 4
) (
    input  wire logic        clk,
    input  wire logic        rst_n,
    // command
    input  wire logic        cmd_valid,
    output logic             cmd_ready,
    input  wire logic [1:0]  cmd_op,
    input  wire logic [23:0] cmd_psn,
    // response
    output logic             rsp_valid,
    input  wire logic        rsp_ready,
    output logic [1:0]       rsp_outcome,
    output logic [23:0]      rsp_cum,
    output logic [23:0]      rsp_next_max,
    output logic [23:0]      rsp_sack_base,
    output logic [63:0]      rsp_sack_bitmap,
    // counters
    output logic [31:0]      cnt_new,
    output logic [31:0]      cnt_dup,
    output logic [31:0]      cnt_oow
);
  localparam int W = 64 * WORDS;
  localparam int HW = $clog2(W);
  localparam logic [1:0] OP_RECEIVE = 2'd0;
  localparam logic [1:0] OP_SACK = 2'd1;
  localparam logic [1:0] OP_RESET = 2'd2;
  localparam logic [1:0] OUT_NEW = 2'd0;
  localparam logic [1:0] OUT_DUP = 2'd1;
  localparam logic [1:0] OUT_OOW = 2'd2;
  localparam logic [24:0] WIN = 25'(W);

  logic [23:0]   cum_q, next_max_q;
  logic [W-1:0]  ring_q;  // bit p mod W: PSN p of the window cum .. cum+W-1 received

  function automatic logic [W-1:0] lowest(input logic [W-1:0] v);
    lowest = v & (~v + 1'b1);
  endfunction
  function automatic logic [HW-1:0] onehot_index(input logic [W-1:0] h);
    onehot_index = '0;
    for (int b = 0; b < HW; b++)
      for (int i = 0; i < W; i++)
        if (((i >> b) & 1) == 1) onehot_index[b] = onehot_index[b] | h[i];
  endfunction

  // ---- receive
  logic [23:0]   d;
  logic          in_win;
  logic [HW-1:0] pos, cpos;
  logic [W-1:0]  ring_set, zeros, ge_cum, z_hi, z_lo, h_hi, h_lo, clear;
  logic [HW:0]   run;  // consecutive received PSNs from cum after the set (W when all)
  logic [1:0]    outcome;
  logic [23:0]   cum_n, next_max_n;
  logic [W-1:0]  ring_n;
  // verilator lint_off UNUSEDSIGNAL
  logic [23:0]   ahead, behind;  // only the sign bits are used
  // verilator lint_on UNUSEDSIGNAL
  `MRC_COMB begin
    d = cmd_psn - cum_q;
`ifdef PLANTED_BUG
    in_win = {1'b0, d} <= WIN;
`else
    in_win = {1'b0, d} < WIN;
`endif
    pos = cmd_psn[HW-1:0];
    cpos = cum_q[HW-1:0];
    ring_set = ring_q | (W'(1) << pos);
    // Circular run of ones from cpos: the first zero at or after cpos, else the first zero
    // before it (wrapped), else all W set.
    zeros = ~ring_set;
    ge_cum = ~((W'(1) << cpos) - 1'b1);
    z_hi = zeros & ge_cum;
    z_lo = zeros & ~ge_cum;
    h_hi = lowest(z_hi);
    h_lo = lowest(z_lo);
    if (z_hi != '0) begin
      run = {1'b0, onehot_index(h_hi) - cpos};
      clear = ge_cum & (h_hi - 1'b1);
    end else if (z_lo != '0) begin
      run = (HW + 1)'(W) - {1'b0, cpos} + {1'b0, onehot_index(h_lo)};
      clear = ge_cum | (h_lo - 1'b1);
    end else begin
      run = (HW + 1)'(W);
      clear = '1;
    end
    outcome = OUT_NEW;
    cum_n = cum_q;
    next_max_n = next_max_q;
    ring_n = ring_q;
    ahead = '0;
    behind = '0;
    if (!in_win) begin
      outcome = d[23] ? OUT_DUP : OUT_OOW;
    end else if (ring_q[pos]) begin
      outcome = OUT_DUP;
    end else begin
      ring_n = ring_set;
      ahead = cmd_psn - next_max_q;
      if (!ahead[23]) next_max_n = cmd_psn + 24'd1;
      if (d == 24'd0) begin
        ring_n = ring_set & ~clear;
        cum_n = cum_q + 24'(run);
        behind = next_max_n - cum_n;
        if (behind[23]) next_max_n = cum_n;
      end
    end
  end

  // ---- SACK from base cmd_psn: bit i = PSN base+i, from the ring inside the window, 1 before it,
  // 0 beyond it.
  logic [23:0]       sd;      // base - cum
  logic [2*W-1:0]    ring2;
  logic [63:0]       window_bits, sack;
  logic [23:0]       di;
  `MRC_COMB begin
    di = '0;
    sd = cmd_psn - cum_q;
    ring2 = {ring_q, ring_q};
    window_bits = ring2[{1'b0, cmd_psn[HW-1:0]} +: 64];
    for (int i = 0; i < 64; i++) begin
      di = sd + 24'(i);
      sack[i] = ({1'b0, di} < WIN) ? window_bits[i] : di[23];
    end
`ifdef PLANTED_BUG_SACK
    sack[1] = 1'b0;
`endif
  end

  wire fire = cmd_valid && cmd_ready;
  assign cmd_ready = !rsp_valid || rsp_ready;

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      cum_q <= '0;
      next_max_q <= '0;
      ring_q <= '0;
      rsp_valid <= 1'b0;
      rsp_outcome <= '0;
      rsp_cum <= '0;
      rsp_next_max <= '0;
      rsp_sack_base <= '0;
      rsp_sack_bitmap <= '0;
      cnt_new <= '0;
      cnt_dup <= '0;
      cnt_oow <= '0;
    end else begin
      if (rsp_valid && rsp_ready) rsp_valid <= 1'b0;
      if (fire) begin
        rsp_valid <= 1'b1;
        rsp_outcome <= OUT_NEW;
        rsp_sack_base <= cmd_psn;
        rsp_sack_bitmap <= '0;
        rsp_cum <= cum_q;
        rsp_next_max <= next_max_q;
        case (cmd_op)
          OP_RECEIVE: begin
            cum_q <= cum_n;
            next_max_q <= next_max_n;
            ring_q <= ring_n;
            rsp_outcome <= outcome;
            rsp_cum <= cum_n;
            rsp_next_max <= next_max_n;
            case (outcome)
              OUT_NEW: cnt_new <= cnt_new + 32'd1;
              OUT_DUP: cnt_dup <= cnt_dup + 32'd1;
              default: cnt_oow <= cnt_oow + 32'd1;
            endcase
          end
          OP_SACK: rsp_sack_bitmap <= sack;
          OP_RESET: begin
            cum_q <= cmd_psn;
            next_max_q <= cmd_psn;
            ring_q <= '0;
            rsp_cum <= cmd_psn;
            rsp_next_max <= cmd_psn;
          end
          default: ;
        endcase
      end
    end
  end
endmodule
`default_nettype wire
