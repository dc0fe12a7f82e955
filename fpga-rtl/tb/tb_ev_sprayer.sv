// Icarus bench: ev_sprayer against a sequential model written in the bench, a line-by-line
// transliteration of mrc_firmware::datapath::Sprayer (a loop over the table, one slot per step,
// where the RTL evaluates four passes in parallel).
// Directed: equal plane load and per-EV round robin over 8 EVs on 4 planes, skip-once, weighted
// round robin (weight 3 vs 1), every error code. Random: RANDOM_CLOCKS clocks of commands (70%
// next_ev, firmware writes otherwise, some invalid) with random response back-pressure, and a
// stretch of back-to-back next_ev commands that must be accepted one per clock. Every response
// (found, index, plane, err) and the four counters are compared with the model.
// Prints "PASS tb_ev_sprayer: N checks ..." or stops with $fatal.
`timescale 1ns/1ps
module tb_ev_sprayer;
  localparam int N = 256;
  localparam int P = 4;
  int RANDOM_CLOCKS = 3000;  // +clocks=N overrides
  localparam logic [2:0] OP_NEXT = 3'd0, OP_SET_EV = 3'd1, OP_SET_USABLE = 3'd2,
                         OP_MARK_SKIP = 3'd3, OP_PLANE_WEIGHT = 3'd4;

  logic clk = 0, rst_n = 0;
  logic cmd_valid = 0, cmd_ready, cmd_usable = 0, cmd_skip = 0, rsp_valid, rsp_ready = 1;
  logic [2:0] cmd_op = 0;
  logic [15:0] cmd_index = 0, rsp_index;
  logic [7:0] cmd_weight = 0, cmd_plane = 0, rsp_plane;
  logic rsp_found;
  logic [1:0] rsp_err;
  logic [31:0] cnt_picks, cnt_no_usable, cnt_skips, cnt_bad_writes;
  ev_sprayer #(.N(N), .P(P)) dut (.clk, .rst_n, .cmd_valid, .cmd_ready, .cmd_op, .cmd_index,
    .cmd_usable, .cmd_weight, .cmd_plane, .cmd_skip, .rsp_valid, .rsp_ready, .rsp_found,
    .rsp_index, .rsp_plane, .rsp_err, .cnt_picks, .cnt_no_usable, .cnt_skips, .cnt_bad_writes);
  always #5 clk = ~clk;

  // ---- the model (Sprayer<N, P>)
  logic m_usable [N], m_skip [N];
  logic [7:0] m_weight [N], m_plane [N];
  logic [7:0] m_pweight [P], m_round [P];
  int m_cursor [P];
  int m_pcursor = 0;
  logic [7:0] m_pround = 1;
  logic [31:0] m_picks = 0, m_no_usable = 0, m_skips = 0, m_bad = 0;

  function automatic logic [7:0] next_round(input logic [7:0] r, input logic [7:0] mx);
    return (r >= mx) ? 8'd1 : r + 8'd1;
  endfunction
  function automatic logic [7:0] max_ev_weight(input int p);
    logic [7:0] mx = 0;
    for (int i = 0; i < N; i++)
      if (m_usable[i] && m_plane[i] == p && m_weight[i] > mx) mx = m_weight[i];
    return mx;
  endfunction
  function automatic logic [7:0] elig(input int p);
    return (max_ev_weight(p) == 0) ? 8'd0 : m_pweight[p];
  endfunction
  function automatic int find_on_plane(input int cursor, input int p, input logic [7:0] round);
    for (int i = cursor; i < N; i++)
      if (m_plane[i] == p && m_usable[i] && m_weight[i] >= round) return i;
    return -1;
  endfunction
  task automatic pick_plane(output int plane);
    logic [7:0] mx, el [P];
    mx = 0;
    plane = -1;
    for (int p = 0; p < P; p++) begin
      el[p] = elig(p);
      if (el[p] > mx) mx = el[p];
    end
    if (mx != 0)
      for (int step = 0; step < P * 18 + 1 && plane < 0; step++) begin
        if (m_pcursor >= P) begin
          m_pcursor = 0;
          m_pround = next_round(m_pround, mx);
        end
        if (el[m_pcursor] >= m_pround) plane = m_pcursor;
        m_pcursor = m_pcursor + 1;
      end
  endtask
  task automatic pick_ev(input int p, output int index);
    logic [7:0] mx = max_ev_weight(p);
    int cursor = m_cursor[p];
    logic [7:0] round = m_round[p];
    int i;
    index = -1;
    if (mx > 0)
      for (int step = 0; step < 15 + 3 + N + 1 && index < 0; step++) begin
        if (cursor >= N) begin
          cursor = 0;
          round = next_round(round, mx);
        end
        i = find_on_plane(cursor, p, round);
        if (i < 0) cursor = N;
        else begin
          cursor = i + 1;
          if (m_skip[i]) begin
            m_skip[i] = 0;
            m_skips = m_skips + 1;
          end else index = i;
        end
      end
    m_cursor[p] = cursor;
    m_round[p] = round;
  endtask
  // Apply one command to the model; returns {found, index, plane, err}.
  task automatic model(input logic [2:0] op, input logic [15:0] idx, input logic usable,
                       input logic [7:0] weight, input logic [7:0] plane, input logic skip,
                       output logic found, output logic [15:0] r_index, output logic [7:0] r_plane,
                       output logic [1:0] err);
    int pl, ix;
    found = 0;
    r_index = 0;
    r_plane = 0;
    err = 0;
    case (op)
      OP_NEXT: begin
        pick_plane(pl);
        ix = -1;
        if (pl >= 0) pick_ev(pl, ix);
        if (pl >= 0 && ix >= 0) begin
          found = 1;
          r_index = 16'(ix);
          r_plane = 8'(pl);
          m_picks = m_picks + 1;
        end else m_no_usable = m_no_usable + 1;
      end
      OP_SET_EV:
        if (weight == 0 || weight > 15) err = 2;
        else if (plane >= P) err = 3;
        else if (idx >= N) err = 1;
        else begin
          m_usable[idx] = usable;
          m_weight[idx] = weight;
          m_plane[idx] = plane;
          m_skip[idx] = skip;
        end
      OP_SET_USABLE:
        if (idx >= N) err = 1;
        else if (usable && m_weight[idx] == 0) err = 2;
        else m_usable[idx] = usable;
      OP_MARK_SKIP:
        if (idx >= N) err = 1;
        else m_skip[idx] = 1;
      OP_PLANE_WEIGHT:
        if (weight > 15) err = 2;
        else if (plane >= P) err = 3;
        else m_pweight[plane] = weight;
      default: ;
    endcase
    if (err != 0) m_bad = m_bad + 1;
  endtask

  // ---- expected responses in flight (in order)
  logic [26:0] exp_q [8];  // {found, index, plane, err}
  int exp_head = 0, exp_tail = 0;
  longint checks = 0, picks_seen = 0;
  int plane_hits [P];
  int ev_hits [N];

  task automatic fail(input string what);
    $fatal(1, "tb_ev_sprayer: %s (t=%0t)", what, $time);
  endtask

  logic [63:0] rng = 64'h4d52_4331_5350_5259;
  task automatic rand32(output logic [31:0] v);
    rng = rng ^ (rng >> 12);
    rng = rng ^ (rng << 25);
    rng = rng ^ (rng >> 27);
    v = rng[63:32];
  endtask

  // One clock: offer the command (valid = 0: none), with rsp_ready = rr; returns accepted.
  task automatic clock(input logic valid, input logic [2:0] op, input logic [15:0] idx,
                       input logic usable, input logic [7:0] weight, input logic [7:0] plane,
                       input logic skip, input logic rr, output logic accepted);
    logic f;
    logic [15:0] ri;
    logic [7:0] rp;
    logic [1:0] re;
    @(negedge clk);
    cmd_valid = valid;
    cmd_op = op;
    cmd_index = idx;
    cmd_usable = usable;
    cmd_weight = weight;
    cmd_plane = plane;
    cmd_skip = skip;
    rsp_ready = rr;
    #1;
    if (cmd_ready !== (!rsp_valid || rsp_ready)) fail("cmd_ready");
    if (rsp_valid && rsp_ready) begin
      if (exp_head == exp_tail) fail("response without a command");
      if ({rsp_found, rsp_index, rsp_plane, rsp_err} !== exp_q[exp_head % 8])
        fail($sformatf("response %b/%0d/%0d/%0d, model %b/%0d/%0d/%0d", rsp_found, rsp_index,
                       rsp_plane, rsp_err, exp_q[exp_head % 8][26], exp_q[exp_head % 8][25:10],
                       exp_q[exp_head % 8][9:2], exp_q[exp_head % 8][1:0]));
      if (rsp_found) begin
        picks_seen++;
        plane_hits[rsp_plane]++;
        ev_hits[rsp_index]++;
      end
      exp_head++;
      checks++;
    end
    accepted = valid && cmd_ready;
    if (accepted) begin
      model(op, idx, usable, weight, plane, skip, f, ri, rp, re);
      exp_q[exp_tail % 8] = {f, ri, rp, re};
      exp_tail++;
    end
    @(posedge clk);
    #1;
    // Counters change at the edge that accepts the command.
    if ({cnt_picks, cnt_no_usable, cnt_skips, cnt_bad_writes} !== {m_picks, m_no_usable, m_skips,
                                                                     m_bad})
      fail($sformatf("counters %0d/%0d/%0d/%0d, model %0d/%0d/%0d/%0d", cnt_picks, cnt_no_usable,
                     cnt_skips, cnt_bad_writes, m_picks, m_no_usable, m_skips, m_bad));
    checks++;
  endtask

  // Issue one command and wait for its response (directed part).
  task automatic cmd(input logic [2:0] op, input logic [15:0] idx, input logic usable,
                     input logic [7:0] weight, input logic [7:0] plane, input logic skip);
    logic acc = 0;
    while (!acc) clock(1, op, idx, usable, weight, plane, skip, 1, acc);
    while (exp_head != exp_tail) clock(0, 0, 0, 0, 0, 0, 0, 1, acc);
  endtask
  task automatic expect_pick(input logic [15:0] idx, input logic [7:0] plane);
    cmd(OP_NEXT, 0, 0, 0, 0, 0);
    if (exp_q[(exp_head - 1) % 8][26] !== 1'b1) fail("directed: no pick");
    if (exp_q[(exp_head - 1) % 8][25:2] !== {idx, plane})
      fail($sformatf("directed: picked %0d on %0d, want %0d on %0d",
                     exp_q[(exp_head - 1) % 8][25:10], exp_q[(exp_head - 1) % 8][9:2], idx, plane));
  endtask
  task automatic expect_err(input logic [2:0] op, input logic [15:0] idx, input logic [7:0] weight,
                            input logic [7:0] plane, input logic [1:0] want);
    cmd(op, idx, 1, weight, plane, 0);
    if (exp_q[(exp_head - 1) % 8][1:0] !== want) fail($sformatf("directed: err, want %0d", want));
  endtask

  logic [31:0] r, r2;
  logic acc;
  initial begin
    for (int i = 0; i < N; i++) begin
      m_usable[i] = 0;
      m_skip[i] = 0;
      m_weight[i] = 0;
      m_plane[i] = 0;
      ev_hits[i] = 0;
    end
    for (int p = 0; p < P; p++) begin
      m_pweight[p] = 1;
      m_round[p] = 1;
      m_cursor[p] = 0;
      plane_hits[p] = 0;
    end
    if ($value$plusargs("clocks=%d", RANDOM_CLOCKS)) $display("random clocks: %0d", RANDOM_CLOCKS);
    repeat (2) @(negedge clk);
    rst_n = 1;
    // Directed 1: no usable EV.
    cmd(OP_NEXT, 0, 0, 0, 0, 0);
    if (exp_q[0][26] !== 1'b0 || m_no_usable != 1) fail("directed: pick from an empty table");
    // Directed 2: 8 EVs, 2 per plane, weight 1: planes round robin, EVs round robin per plane.
    for (int i = 0; i < 8; i++) cmd(OP_SET_EV, 16'(10 * i), 1, 1, 8'(i % 4), 0);
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < 8; i++) expect_pick(16'(10 * i), 8'(i % 4));
    // Directed 3: skip-once: EV 0 (next on plane 0) is passed over once.
    cmd(OP_MARK_SKIP, 0, 0, 0, 0, 0);
    expect_pick(16'd40, 8'd0);
    if (m_skips != 1) fail("directed: skip not counted");
    // Directed 4: plane 0 weight 3: plane 0 three times per round.
    cmd(OP_PLANE_WEIGHT, 0, 0, 3, 0, 0);
    for (int p = 0; p < P; p++) plane_hits[p] = 0;
    for (int i = 0; i < 12; i++) cmd(OP_NEXT, 0, 0, 0, 0, 0);
    if (plane_hits[0] != 6 || plane_hits[1] != 2 || plane_hits[2] != 2 || plane_hits[3] != 2)
      fail($sformatf("directed: weighted plane load %0d %0d %0d %0d", plane_hits[0],
                     plane_hits[1], plane_hits[2], plane_hits[3]));
    // Directed 5: error codes (index 1, weight 2, plane 3).
    expect_err(OP_SET_EV, 16'd300, 8'd1, 8'd0, 2'd1);
    expect_err(OP_SET_EV, 16'd1, 8'd0, 8'd0, 2'd2);
    expect_err(OP_SET_EV, 16'd1, 8'd16, 8'd0, 2'd2);
    expect_err(OP_SET_EV, 16'd1, 8'd1, 8'd4, 2'd3);
    expect_err(OP_SET_USABLE, 16'd1, 8'd0, 8'd0, 2'd2);  // never written: weight 0
    expect_err(OP_SET_USABLE, 16'd256, 8'd0, 8'd0, 2'd1);
    expect_err(OP_MARK_SKIP, 16'd999, 8'd0, 8'd0, 2'd1);
    expect_err(OP_PLANE_WEIGHT, 0, 8'd16, 8'd0, 2'd2);
    expect_err(OP_PLANE_WEIGHT, 0, 8'd1, 8'd4, 2'd3);
    if (m_bad != 9) fail("directed: bad writes not counted");
    // Back-to-back: 64 next_ev accepted in 64 consecutive clocks (one decision per clock).
    for (int i = 0; i < 64; i++) begin
      clock(1, OP_NEXT, 0, 0, 0, 0, 0, 1, acc);
      if (!acc) fail("back-to-back next_ev not accepted every clock");
    end
    // Random: fill the table, then mixed commands with back-pressure.
    for (int t = 0; t < RANDOM_CLOCKS; t++) begin
      rand32(r);
      rand32(r2);
      if (t < 2 * N && r[7:0] < 8'd160)
        clock(1, OP_SET_EV, 16'(t / 2), r2[0] | r2[1], 8'(1 + r2[7:4] % 15), 8'(r2[9:8]),
              r2[15:12] == 0, r[8] | r[9], acc);
      else if (r[7:0] < 8'd179)
        clock(1, OP_NEXT, 0, 0, 0, 0, 0, r[10:8] != 0, acc);
      else if (r[7:0] < 8'd199)
        clock(1, OP_SET_EV, 16'(r2[8:0] % 264), r2[9] | r2[10], 8'(r2[15:12] + (r2[16] ? 1 : 0)),
              8'(r2[19:17] % 6), r2[23:20] == 0, r[10:8] != 0, acc);
      else if (r[7:0] < 8'd222)
        clock(1, OP_SET_USABLE, 16'(r2[8:0] % 264), r2[9], 0, 0, 0, r[10:8] != 0, acc);
      else if (r[7:0] < 8'd247)
        clock(1, OP_MARK_SKIP, 16'(r2[8:0] % 264), 0, 0, 0, 0, r[10:8] != 0, acc);
      else
        clock(1, OP_PLANE_WEIGHT, 0, 0, 8'(r2[4:0] % 17), 8'(r2[7:5] % 5), 0, r[10:8] != 0, acc);
    end
    while (exp_head != exp_tail) clock(0, 0, 0, 0, 0, 0, 0, 1, acc);
    if (m_picks < 1000 || m_skips < 10) fail("random run too weak");
    $display("PASS tb_ev_sprayer: %0d checks, %0d commands, %0d picks, %0d skips, %0d bad writes",
             checks, exp_tail, m_picks, m_skips, m_bad);
    $finish;
  end
endmodule
