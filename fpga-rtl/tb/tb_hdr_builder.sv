// Icarus bench: hdr_builder against known-good headers from the Rust model
// (mrc_abi::wire::Frame::emit), in tb/vectors/ (written by `MRC_BLESS=1 cargo test -p
// mrc-rtl-cosim --test icarus`; the test `hdr_vectors_are_fresh` fails when they are stale):
//   hdr_builder_desc.hex: one descriptor per line, the concatenation of the d_* ports
//   (d_format in the top bits, d_payload_sum in the bottom 16);
//   hdr_builder_hdr.hex: per packet the header length (two bytes, big-endian) and the bytes.
// The first vectors are directed (every EV format x SRH segment count x body kind: the six write
// opcodes, ACK, NACK, EV probe, probe reply; EVX/TSX cycling), the rest random. The bench streams
// them with random d_valid gaps and m_ready back-pressure and checks every beat: m_data bytes under
// m_keep, m_keep = the header bytes of the beat, m_last on the last beat, m_hdr_len.
// Plusarg +vectors=DIR (default tb/vectors). Prints "PASS tb_hdr_builder: N packets ..." or
// stops with $fatal.
`timescale 1ns/1ps
module tb_hdr_builder;
  localparam int SEGS = 4;
  localparam int DESC_BITS = 1839;
  localparam int MAXV = 1024;            // descriptors at most
  localparam int MAXB = MAXV * 258;      // expected bytes at most

  logic clk = 0, rst_n = 0;
  logic d_valid = 0, d_ready, m_valid, m_ready = 0, m_last;
  logic [DESC_BITS-1:0] d = '0;
  logic [511:0] m_data;
  logic [63:0] m_keep;
  logic [15:0] m_hdr_len;

  // Descriptor fields, in the vector order.
  logic [1:0] d_format;
  logic [47:0] d_eth_dst, d_eth_src;
  logic [127:0] d_ip_src, d_ip_dst, d_outer_src, d_outer_dst;
  logic [7:0] d_srh_segs, d_srh_sl;
  logic [SEGS*128-1:0] d_srh_list;
  logic [7:0] d_tclass, d_hop_limit, d_opcode, d_plane, d_ref_plane, d_ecn_plane_mask;
  logic [7:0] d_nack_reason;
  logic [19:0] d_flow_label;
  logic [15:0] d_udp_sport, d_pkey, d_msn, d_ev_index, d_ref_ev_index, d_ce_count, d_pkt_count;
  logic [15:0] d_payload_len, d_payload_sum;
  logic d_se, d_fecn, d_becn, d_ack_req, d_trimmed, d_trimmed_last_hop, d_retransmit, d_evx;
  logic d_tsx;
  logic [23:0] d_dest_qp, d_psn, d_cum_psn, d_sack_base, d_nack_psn;
  logic [31:0] d_ev_value, d_tx_ts, d_echo_ts, d_rkey, d_dma_len, d_imm, d_probe_id;
  logic [63:0] d_va, d_sack_bitmap;
  assign {d_format, d_eth_dst, d_eth_src, d_ip_src, d_ip_dst, d_outer_src, d_outer_dst,
          d_srh_segs, d_srh_sl, d_srh_list, d_tclass, d_flow_label, d_hop_limit, d_udp_sport,
          d_opcode, d_se, d_fecn, d_becn, d_ack_req, d_pkey, d_dest_qp, d_psn, d_trimmed,
          d_trimmed_last_hop, d_retransmit, d_msn, d_evx, d_ev_index, d_plane, d_ev_value, d_tsx,
          d_tx_ts, d_echo_ts, d_va, d_rkey, d_dma_len, d_imm, d_cum_psn, d_sack_base,
          d_sack_bitmap, d_ref_ev_index, d_ref_plane, d_ecn_plane_mask, d_ce_count, d_pkt_count,
          d_nack_reason, d_nack_psn, d_probe_id, d_payload_len, d_payload_sum} = d;

  hdr_builder #(.SEGS(SEGS)) dut (.clk, .rst_n, .d_valid, .d_ready, .d_format, .d_eth_dst,
    .d_eth_src, .d_ip_src, .d_ip_dst, .d_outer_src, .d_outer_dst, .d_srh_segs, .d_srh_sl,
    .d_srh_list, .d_tclass, .d_flow_label, .d_hop_limit, .d_udp_sport, .d_opcode, .d_se, .d_fecn,
    .d_becn, .d_ack_req, .d_pkey, .d_dest_qp, .d_psn, .d_trimmed, .d_trimmed_last_hop,
    .d_retransmit, .d_msn, .d_evx, .d_ev_index, .d_plane, .d_ev_value, .d_tsx, .d_tx_ts,
    .d_echo_ts, .d_va, .d_rkey, .d_dma_len, .d_imm, .d_cum_psn, .d_sack_base, .d_sack_bitmap,
    .d_ref_ev_index, .d_ref_plane, .d_ecn_plane_mask, .d_ce_count, .d_pkt_count, .d_nack_reason,
    .d_nack_psn, .d_probe_id, .d_payload_len, .d_payload_sum, .m_valid, .m_ready, .m_data,
    .m_keep, .m_last, .m_hdr_len);
  always #5 clk = ~clk;

  logic [DESC_BITS-1:0] descs [MAXV];
  logic [7:0] want [MAXB];
  int nv = 0, sent = 0, done = 0, exp_at = 0, beat = 0, beats = 0, bytes = 0;
  int len_now;
  string dir;

  logic [63:0] rng = 64'h4d52_4331_4844_5242;
  task automatic rand32(output logic [31:0] v);
    rng = rng ^ (rng >> 12);
    rng = rng ^ (rng << 25);
    rng = rng ^ (rng >> 27);
    v = rng[63:32];
  endtask

  task automatic fail(input string what);
    $fatal(1, "tb_hdr_builder: packet %0d beat %0d: %s", done, beat, what);
  endtask

  logic [31:0] r;
  initial begin
    if (!$value$plusargs("vectors=%s", dir)) dir = "tb/vectors";
    for (int i = 0; i < MAXV; i++) descs[i] = 'x;
    $readmemh({dir, "/hdr_builder_desc.hex"}, descs);
    $readmemh({dir, "/hdr_builder_hdr.hex"}, want);
    while (nv < MAXV && ^descs[nv] !== 1'bx) nv++;
    if (nv < 100) $fatal(1, "tb_hdr_builder: only %0d vectors in %s", nv, dir);
    repeat (2) @(negedge clk);
    rst_n = 1;
    while (done < nv) begin
      @(negedge clk);
      rand32(r);
      // Offer the next descriptor 85% of the clocks; accept beats 80% of the clocks.
      d_valid = sent < nv && r[7:0] < 8'd218;
      d = d_valid ? descs[sent] : '0;
      m_ready = r[15:8] < 8'd205;
      #1;
      if (m_valid && m_ready) begin
        if (beat == 0) begin
          len_now = {want[exp_at], want[exp_at+1]};
          beats = (len_now + 63) / 64;
          if (m_hdr_len !== 16'(len_now))
            fail($sformatf("m_hdr_len %0d, model %0d", m_hdr_len, len_now));
        end
        for (int k = 0; k < 64; k++) begin
          if (m_keep[k] !== (64 * beat + k < len_now)) fail($sformatf("m_keep[%0d]", k));
          if (m_keep[k] && m_data[8*k +: 8] !== want[exp_at + 2 + 64 * beat + k])
            fail($sformatf("byte %0d: %h, model %h", 64 * beat + k, m_data[8*k +: 8],
                           want[exp_at + 2 + 64 * beat + k]));
        end
        if (m_last !== (beat == beats - 1)) fail("m_last");
        if (beat == beats - 1) begin
          exp_at = exp_at + 2 + len_now;
          bytes = bytes + len_now;
          beat = 0;
          done++;
        end else beat++;
      end
      if (d_valid && d_ready) sent++;
      @(posedge clk);
    end
    $display("PASS tb_hdr_builder: %0d packets (%0d directed shapes first), %0d header bytes checked",
             done, 70, bytes);
    $finish;
  end
endmodule
