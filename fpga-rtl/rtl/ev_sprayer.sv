// ev_sprayer: the EV table of one QP and its per-packet EV decision
// (reference model: mrc_firmware::datapath::Sprayer<N, P>, same algorithm bit for bit).
//
// State: N EV slots {usable, weight 1..15, plane 0..P-1, skip_once}, P plane weights (reset 1),
// plane cursor/round, and per plane an EV cursor (0..N) and IWRR round.
// Two-level interleaved weighted round robin: pick a plane (round robin weighted by plane weight,
// over planes with a usable EV), then an EV of that plane (IWRR by EV weight); skip-once EVs are
// passed over once and their flag cleared.
//
// One command per clock (cmd_ready = !rsp_valid || rsp_ready), one registered response each:
//   OP_NEXT         Sprayer::next_ev          rsp_found, rsp_index, rsp_plane
//   OP_SET_EV       Sprayer::set_ev           rsp_err
//   OP_SET_USABLE   Sprayer::set_usable       rsp_err
//   OP_MARK_SKIP    Sprayer::mark_skip        rsp_err
//   OP_PLANE_WEIGHT Sprayer::set_plane_weight rsp_err (cmd_plane, cmd_weight)
// Firmware writes and packet requests share the command stream (an upstream arbiter orders them).
//
// One decision per clock at N = 256: the model's sequential scan needs at most 4 passes over the
// table (pass 0 from the cursor to the end in the current round, then full passes in the next
// rounds: a failing full pass clears every skip flag it met, so the next pass in a lower-or-equal
// eligibility set succeeds). The RTL evaluates the 4 passes in parallel; the first set bit of the
// chosen pass is isolated with v & -v (an N-bit carry chain), its index is IW OR-reductions, and
// the skip flags it passed over are the bits below it (pick - 1).
//
// Storage: the usable/skip bits, weights and planes of all N slots are flip-flops because every
// decision reads all of them at once. The per-plane maximum EV weight is kept like the model
// does, as a histogram of usable slots per (plane, weight) updated on each write, so no clock
// scans the table for it. The only indexed table read (the old weight and plane of a slot being
// written, for the histogram and the SET_USABLE check) comes from a write-through shadow copy in a
// single-port memory (one write port, asynchronous read: LUT RAM), qualified by a per-slot
// written bit (memories have no reset).
//
// PLANTED_BUG (co-simulation only): skip-once flags are never cleared.
// PLANTED_BUG_PLANE (the simulator's differential test only): after a pick on plane 0 the plane
// cursor moves two planes on, so plane 1 is passed over once per plane round (a load-balance
// bug every run exercises; skip-once flags need persistent ECN, which a small run never has).
`default_nettype none
`include "mrc_compat.svh"
module ev_sprayer #(
    parameter int N = 256,
    parameter int P = 4
) (
    input  wire logic        clk,
    input  wire logic        rst_n,
    input  wire logic        cmd_valid,
    output logic             cmd_ready,
    input  wire logic [2:0]  cmd_op,
    input  wire logic [15:0] cmd_index,
    input  wire logic        cmd_usable,
    input  wire logic [7:0]  cmd_weight,
    input  wire logic [7:0]  cmd_plane,
    input  wire logic        cmd_skip,
    output logic             rsp_valid,
    input  wire logic        rsp_ready,
    output logic             rsp_found,
    output logic [15:0]      rsp_index,
    output logic [7:0]       rsp_plane,
    output logic [1:0]       rsp_err,
    output logic [31:0]      cnt_picks,
    output logic [31:0]      cnt_no_usable,
    output logic [31:0]      cnt_skips,
    output logic [31:0]      cnt_bad_writes
);
  localparam int IW = $clog2(N);
  localparam int PW = (P > 1) ? $clog2(P) : 1;
  localparam int HB = IW + 1;  // histogram counter width (0..N)
  localparam int NWT = 16;     // weights 0..15
  localparam logic [2:0] OP_NEXT = 3'd0;
  localparam logic [2:0] OP_SET_EV = 3'd1;
  localparam logic [2:0] OP_SET_USABLE = 3'd2;
  localparam logic [2:0] OP_MARK_SKIP = 3'd3;
  localparam logic [2:0] OP_PLANE_WEIGHT = 3'd4;
  localparam logic [1:0] ERR_NONE = 2'd0;
  localparam logic [1:0] ERR_INDEX = 2'd1;
  localparam logic [1:0] ERR_WEIGHT = 2'd2;
  localparam logic [1:0] ERR_PLANE = 2'd3;
  localparam logic [3:0] WEIGHT_MAX = 4'd15;

  // Lowest set bit of v, isolated: v & -v (one N-bit carry chain).
  function automatic logic [N-1:0] lowest(input logic [N-1:0] v);
    lowest = v & (~v + 1'b1);
  endfunction

  // Index of the set bit of a one-hot (or zero) vector: IW OR-reductions.
  function automatic logic [IW-1:0] onehot_index(input logic [N-1:0] h);
    onehot_index = '0;
    for (int b = 0; b < IW; b++)
      for (int i = 0; i < N; i++)
        if (((i >> b) & 1) == 1) onehot_index[b] = onehot_index[b] | h[i];
  endfunction

  // Number of set bits of v, as an adder tree.
  function automatic logic [IW:0] popcount(input logic [N-1:0] v);
    logic [N*(IW+1)-1:0] t;
    for (int i = 0; i < N; i++) t[(IW+1)*i +: IW+1] = (IW + 1)'(v[i]);
    for (int lv = 0; lv < IW; lv++)
      for (int i = 0; i < N / 2; i++)
        if (i % (1 << lv) == 0)
          t[(IW+1)*2*i +: IW+1] = t[(IW+1)*2*i +: IW+1] + t[(IW+1)*(2*i+(1<<lv)) +: IW+1];
    popcount = t[IW:0];
  endfunction

  function automatic logic [3:0] next_round(input logic [3:0] r, input logic [3:0] m);
    next_round = (r >= m) ? 4'd1 : r + 4'd1;
  endfunction

  // ---- state (flat vectors: slot i at [W*i +: W])
  logic [N-1:0]      usable_q, skip_q;
  logic [N*4-1:0]    weight_q;
  logic [N*PW-1:0]   plane_q;
  logic [P*4-1:0]    pweight_q;
  logic [P*(IW+1)-1:0] ev_cursor_q;
  logic [P*4-1:0]    ev_round_q;
  logic [PW:0]       plane_cursor_q;
  logic [3:0]        plane_round_q;
  logic [P*NWT*HB-1:0] hist_q;  // usable slots per (plane, weight): [HB*(NWT*p + w) +: HB]

  // Shadow copy of {weight, plane} per slot: one write port, asynchronous read at cmd_index.
  logic [4+PW-1:0] shadow [N];
  logic [N-1:0]    written_q;  // slot written by a good SET_EV since reset (shadow valid)
  logic [3:0]      old_w;
  logic [PW-1:0]   old_p;
  logic            old_u;

  // ---- per-plane summaries from the histogram
  logic [P*4-1:0] plane_max_w;
  logic [P*4-1:0] elig_w;
  logic [3:0]     max_pw;
  `MRC_COMB begin
    max_pw = '0;
    for (int p = 0; p < P; p++) begin
      plane_max_w[4*p +: 4] = '0;
      for (int w = 1; w < NWT; w++)
        if (hist_q[HB*(NWT*p+w) +: HB] != '0) plane_max_w[4*p +: 4] = 4'(w);
      elig_w[4*p +: 4] = (plane_max_w[4*p +: 4] != 4'd0) ? pweight_q[4*p +: 4] : 4'd0;
      if (elig_w[4*p +: 4] > max_pw) max_pw = elig_w[4*p +: 4];
    end
  end

  // ---- plane pick: pass 0 from the cursor in the current round, pass 1 over all planes
  logic          plane_ok;
  logic [PW-1:0] psel;
  logic [PW:0]   pcursor_n;
  logic [3:0]    pround_n;
  logic          p0_found;
  logic [PW-1:0] p0, p1;
  logic [3:0]    pr1;
  `MRC_COMB begin
    pr1 = next_round(plane_round_q, max_pw);
    p0_found = 1'b0;
    p0 = '0;
    for (int p = P - 1; p >= 0; p--)
      if ((PW + 1)'(p) >= plane_cursor_q && elig_w[4*p +: 4] >= plane_round_q
          && elig_w[4*p +: 4] != 4'd0) begin
        p0_found = 1'b1;
        p0 = PW'(p);
      end
    p1 = '0;
    for (int p = P - 1; p >= 0; p--)
      if (elig_w[4*p +: 4] >= pr1 && elig_w[4*p +: 4] != 4'd0) p1 = PW'(p);
    plane_ok = max_pw != 4'd0;
    psel = p0_found ? p0 : p1;
    pround_n = p0_found ? plane_round_q : pr1;
`ifdef PLANTED_BUG_PLANE
    pcursor_n = (PW + 1)'(psel) + (PW + 1)'(psel == '0 ? 2 : 1);
`else
    pcursor_n = (PW + 1)'(psel) + 1'b1;
`endif
  end

  // ---- EV pick on plane psel: 4 passes in parallel
  logic [N-1:0] base, ge_c, e0, e1, e2, e3, c0, s1, s2, s3, below, cleared;
  logic [N-1:0] v0, v1, v2, v3, hsel;  // candidates of each pass; the pick, one-hot
  logic [3:0]   m, r0, r1, r2, r3, ev_round_n;
  logic [IW:0]  c;
  logic [3:0]   found;
  logic [IW-1:0] ksel;
  logic         ev_ok;
  logic [IW:0]  nskips;
  `MRC_COMB begin
    m = plane_max_w[4*psel +: 4];
    c = ev_cursor_q[(IW+1)*psel +: IW+1];
    r0 = ev_round_q[4*psel +: 4];
    r1 = next_round(r0, m);
    r2 = next_round(r1, m);
    r3 = next_round(r2, m);
    for (int i = 0; i < N; i++) begin
      base[i] = usable_q[i] && plane_q[PW*i +: PW] == psel;
      ge_c[i] = (IW + 1)'(i) >= c;
      e0[i] = base[i] && weight_q[4*i +: 4] >= r0;
      e1[i] = base[i] && weight_q[4*i +: 4] >= r1;
      e2[i] = base[i] && weight_q[4*i +: 4] >= r2;
      e3[i] = base[i] && weight_q[4*i +: 4] >= r3;
    end
    c0 = ge_c & e0;
    s1 = skip_q & ~c0;
    s2 = s1 & ~e1;
    s3 = s2 & ~e2;
    v0 = c0 & ~skip_q;
    v1 = e1 & ~s1;
    v2 = e2 & ~s2;
    v3 = e3 & ~s3;
    found = {|v3, |v2, |v1, |v0};
    ev_ok = found != 4'd0;
    if (found[0]) begin
      hsel = lowest(v0);
      ev_round_n = r0;
    end else if (found[1]) begin
      hsel = lowest(v1);
      ev_round_n = r1;
    end else if (found[2]) begin
      hsel = lowest(v2);
      ev_round_n = r2;
    end else begin
      hsel = lowest(v3);
      ev_round_n = r3;
    end
    ksel = onehot_index(hsel);
    below = hsel - 1'b1;  // the slots before the pick (all ones when nothing is picked: unused)
    if (found[0]) cleared = c0 & skip_q & below;
    else if (found[1]) cleared = (c0 & skip_q) | (e1 & s1 & below);
    else if (found[2]) cleared = (c0 & skip_q) | (e1 & s1) | (e2 & s2 & below);
    else cleared = (c0 & skip_q) | (e1 & s1) | (e2 & s2) | (e3 & s3 & below);
    nskips = popcount(cleared);
  end

  // ---- firmware write checks (same order as the model)
  wire [IW-1:0] widx = cmd_index[IW-1:0];
  logic       idx_ok;
  logic [1:0] err;
  logic [4+PW-1:0] shadow_rd;
  assign shadow_rd = shadow[widx];
  assign old_w = written_q[widx] ? shadow_rd[4+PW-1:PW] : 4'd0;
  assign old_p = written_q[widx] ? shadow_rd[PW-1:0] : '0;
  assign old_u = usable_q[widx];
  `MRC_COMB begin
    idx_ok = cmd_index < 16'(N);
    err = ERR_NONE;
    case (cmd_op)
      OP_SET_EV:
        if (cmd_weight == 8'd0 || cmd_weight > 8'(WEIGHT_MAX)) err = ERR_WEIGHT;
        else if (cmd_plane >= 8'(P)) err = ERR_PLANE;
        else if (!idx_ok) err = ERR_INDEX;
      OP_SET_USABLE:
        if (!idx_ok) err = ERR_INDEX;
        else if (cmd_usable && old_w == 4'd0) err = ERR_WEIGHT;
      OP_MARK_SKIP:
        if (!idx_ok) err = ERR_INDEX;
      OP_PLANE_WEIGHT:
        if (cmd_weight > 8'(WEIGHT_MAX)) err = ERR_WEIGHT;
        else if (cmd_plane >= 8'(P)) err = ERR_PLANE;
      default: ;
    endcase
  end

  wire fire = cmd_valid && cmd_ready;
  assign cmd_ready = !rsp_valid || rsp_ready;

  // Histogram update of an accepted SET_EV / SET_USABLE: remove the old slot if it was usable,
  // add the new one if it is.
  logic          h_del, h_add;
  logic [PW-1:0] add_p;
  logic [3:0]    add_w;
  logic [P*NWT*HB-1:0] hist_n;
  `MRC_COMB begin
    h_del = 1'b0;
    h_add = 1'b0;
    add_p = old_p;
    add_w = old_w;
    if (fire && err == ERR_NONE) begin
      if (cmd_op == OP_SET_EV) begin
        h_del = old_u;
        h_add = cmd_usable;
        add_p = cmd_plane[PW-1:0];
        add_w = cmd_weight[3:0];
      end else if (cmd_op == OP_SET_USABLE) begin
        h_del = old_u;
        h_add = cmd_usable;
      end
    end
    hist_n = hist_q;
    for (int p = 0; p < P; p++)
      for (int w = 0; w < NWT; w++)
        hist_n[HB*(NWT*p+w) +: HB] = hist_q[HB*(NWT*p+w) +: HB]
            + ((h_add && add_p == PW'(p) && add_w == 4'(w)) ? HB'(1) : HB'(0))
            - ((h_del && old_p == PW'(p) && old_w == 4'(w)) ? HB'(1) : HB'(0));
  end

  always_ff @(posedge clk) begin
    if (fire && cmd_op == OP_SET_EV && err == ERR_NONE)
      shadow[widx] <= {cmd_weight[3:0], cmd_plane[PW-1:0]};
  end

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      usable_q <= '0;
      written_q <= '0;
      skip_q <= '0;
      weight_q <= '0;
      plane_q <= '0;
      pweight_q <= {P{4'd1}};
      ev_cursor_q <= '0;
      ev_round_q <= {P{4'd1}};
      plane_cursor_q <= '0;
      plane_round_q <= 4'd1;
      hist_q <= '0;
      rsp_valid <= 1'b0;
      rsp_found <= 1'b0;
      rsp_index <= '0;
      rsp_plane <= '0;
      rsp_err <= '0;
      cnt_picks <= '0;
      cnt_no_usable <= '0;
      cnt_skips <= '0;
      cnt_bad_writes <= '0;
    end else begin
      hist_q <= hist_n;
      if (rsp_valid && rsp_ready) rsp_valid <= 1'b0;
      if (fire) begin
        rsp_valid <= 1'b1;
        rsp_found <= 1'b0;
        rsp_index <= '0;
        rsp_plane <= '0;
        rsp_err <= err;
        if (err != ERR_NONE) cnt_bad_writes <= cnt_bad_writes + 32'd1;
        case (cmd_op)
          OP_NEXT:
            if (plane_ok && ev_ok) begin
              rsp_found <= 1'b1;
              rsp_index <= 16'(ksel);
              rsp_plane <= 8'(psel);
              plane_cursor_q <= pcursor_n;
              plane_round_q <= pround_n;
              ev_cursor_q[(IW+1)*psel +: IW+1] <= (IW + 1)'(ksel) + 1'b1;
              ev_round_q[4*psel +: 4] <= ev_round_n;
`ifndef PLANTED_BUG
              skip_q <= skip_q & ~cleared;
`endif
              cnt_picks <= cnt_picks + 32'd1;
              cnt_skips <= cnt_skips + 32'(nskips);
            end else begin
              cnt_no_usable <= cnt_no_usable + 32'd1;
            end
          OP_SET_EV:
            if (err == ERR_NONE) begin
              usable_q[widx] <= cmd_usable;
              written_q[widx] <= 1'b1;
              weight_q[4*widx +: 4] <= cmd_weight[3:0];
              plane_q[PW*widx +: PW] <= cmd_plane[PW-1:0];
              skip_q[widx] <= cmd_skip;
            end
          OP_SET_USABLE:
            if (err == ERR_NONE) usable_q[widx] <= cmd_usable;
          OP_MARK_SKIP:
            if (err == ERR_NONE) skip_q[widx] <= 1'b1;
          OP_PLANE_WEIGHT:
            if (err == ERR_NONE) pweight_q[4*cmd_plane[PW-1:0] +: 4] <= cmd_weight[3:0];
          default: ;
        endcase
      end
    end
  end
endmodule
`default_nettype wire
