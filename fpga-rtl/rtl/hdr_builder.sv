// hdr_builder: the headers of one MRC write packet on a 512-bit AXI-Stream bus
// (reference: mrc_abi::wire::Frame::emit; the bytes must match emit's first hdr_len bytes).
//
// Layers, every layout taken from the generated package's big-endian structs:
//   Ethernet / IPv6 / UDP / BTH / MRH / [EVX] / [TSX] / RETH / [ImmDt]        (EV formats UDP, STEV)
//   Ethernet / outer IPv6 / inner IPv6 / UDP / BTH / MRH / [EVX] / [TSX] / RETH / [ImmDt]  (SRv6)
// The SRv6 outer destination is the active uSID carrier (d_outer_dst, resolved from the EV
// profile upstream); the SRH form (more than one carrier) is not built by this block.
// EV mapping (mrc_abi::wire::ev): UDP: source port = ev_value[15:0]; STEV: flow label =
// ev_value[19:0], source port = 0xC000 | ev_value[31:20]; SRv6: source port d_udp_sport, flow
// label d_flow_label (also the flow label of the UDP format).
// Lengths (IPv6 payload lengths, UDP length) are computed from the present headers and
// d_payload_len. The UDP checksum covers the IPv6 pseudo-header of the transport (inner) header,
// the UDP/MRC headers, and the payload through d_payload_sum: the RFC 1071 one's-complement sum
// (folded to 16 bits) of the payload as big-endian 16-bit words, an odd last byte padded with
// zero (the payload always starts at an even UDP offset). A computed 0 is sent as 0xFFFF.
//
// Bus: byte k of the frame is m_data[8*(k%64) +: 8] of beat k/64 (AXI-Stream byte lanes),
// m_keep marks the header bytes, m_last the last header beat (payload follows on the next
// stream stage). Headers are 114..154 bytes: 2 or 3 beats; a new descriptor is accepted in the
// clock of the last beat, so throughput is 1 packet per 2 clocks (UDP/STEV) or 3 (SRv6).
//
// PLANTED_BUG (co-simulation only): ImmDt is left out of the UDP checksum.
`default_nettype none
`include "mrc_compat.svh"
module hdr_builder (
    input  wire logic         clk,
    input  wire logic         rst_n,
    input  wire logic         d_valid,
    output logic              d_ready,
    input  wire logic [1:0]   d_format,
    input  wire logic [47:0]  d_eth_dst,
    input  wire logic [47:0]  d_eth_src,
    input  wire logic [127:0] d_ip_src,
    input  wire logic [127:0] d_ip_dst,
    input  wire logic [127:0] d_outer_src,
    input  wire logic [127:0] d_outer_dst,
    input  wire logic [7:0]   d_tclass,
    input  wire logic [19:0]  d_flow_label,
    input  wire logic [7:0]   d_hop_limit,
    input  wire logic [15:0]  d_udp_sport,
    input  wire logic [7:0]   d_opcode,
    input  wire logic         d_se,
    input  wire logic         d_fecn,
    input  wire logic         d_becn,
    input  wire logic         d_ack_req,
    input  wire logic [15:0]  d_pkey,
    input  wire logic [23:0]  d_dest_qp,
    input  wire logic [23:0]  d_psn,
    input  wire logic         d_trimmed,
    input  wire logic         d_trimmed_last_hop,
    input  wire logic         d_retransmit,
    input  wire logic [15:0]  d_msn,
    input  wire logic         d_evx,
    input  wire logic [15:0]  d_ev_index,
    input  wire logic [7:0]   d_plane,
    input  wire logic [31:0]  d_ev_value,
    input  wire logic         d_tsx,
    input  wire logic [31:0]  d_tx_ts,
    input  wire logic [31:0]  d_echo_ts,
    input  wire logic [63:0]  d_va,
    input  wire logic [31:0]  d_rkey,
    input  wire logic [31:0]  d_dma_len,
    input  wire logic [31:0]  d_imm,
    input  wire logic [15:0]  d_payload_len,
    input  wire logic [15:0]  d_payload_sum,
    output logic              m_valid,
    input  wire logic         m_ready,
    output logic [511:0]      m_data,
    output logic [63:0]       m_keep,
    output logic              m_last,
    output logic [7:0]        m_hdr_len
);
  `MRC_TYPEDEF(ethernet_t)
  `MRC_TYPEDEF(ipv6_t)
  `MRC_TYPEDEF(udp_t)
  `MRC_TYPEDEF(bth_t)
  `MRC_TYPEDEF(mrh_t)
  `MRC_TYPEDEF(evx_t)
  `MRC_TYPEDEF(tsx_t)
  `MRC_TYPEDEF(reth_t)
  `MRC_TYPEDEF(imm_dt_t)

  localparam int ETH_B = mrc_abi_pkg::ETHERNET_BYTES;
  localparam int IP_B = mrc_abi_pkg::IPV6_BYTES;
  localparam int UDP_B = mrc_abi_pkg::UDP_BYTES;
  localparam int BTH_B = mrc_abi_pkg::BTH_BYTES;
  localparam int MRH_B = mrc_abi_pkg::MRH_BYTES;
  localparam int EVX_B = mrc_abi_pkg::EVX_BYTES;
  localparam int TSX_B = mrc_abi_pkg::TSX_BYTES;
  localparam int RETH_B = mrc_abi_pkg::RETH_BYTES;
  localparam int IMM_B = mrc_abi_pkg::IMM_DT_BYTES;
  localparam int MAXB = ETH_B + 2 * IP_B + UDP_B + BTH_B + MRH_B + EVX_B + TSX_B + RETH_B + IMM_B;
  localparam int CKB = UDP_B + BTH_B + MRH_B + EVX_B + TSX_B + RETH_B + IMM_B;
  localparam int BUFB = 192;  // three 64-byte beats
  localparam int AW = MAXB * 8;
  localparam int CW = CKB * 8;

  `MRC_T(ethernet_t) eth;
  `MRC_T(ipv6_t) outer, inner;
  `MRC_T(udp_t) udp;
  `MRC_T(bth_t) bth;
  `MRC_T(mrh_t) mrh;
  `MRC_T(evx_t) evx;
  `MRC_T(tsx_t) tsx;
  `MRC_T(reth_t) reth;
  `MRC_T(imm_dt_t) immdt;

  logic          srv6, stev, has_imm;
  logic [15:0]   mrc_len, udp_len, sport;
  logic [19:0]   flow;
  logic [7:0]    hdr_len;
  logic [MAXB*8-1:0] acc, aligned;
  logic [CKB*8-1:0]  ck;
  logic [31:0]   sum;
  logic [15:0]   csum;
  logic [BUFB*8-1:0] frame_n;
  logic [BUFB-1:0]   keep_n;

  function automatic logic [31:0] sum_words(input logic [AW-1:0] v);
    sum_words = 32'd0;
    for (int i = 0; i < MAXB / 2; i++) sum_words = sum_words + {16'd0, v[16*i +: 16]};
  endfunction

  always_comb begin
    srv6 = d_format == mrc_abi_pkg::EV_FORMAT_SRV6;
    stev = d_format == mrc_abi_pkg::EV_FORMAT_STEV;
    has_imm = d_opcode == mrc_abi_pkg::BTH_OPCODE_WRITE_LAST_IMM
           || d_opcode == mrc_abi_pkg::BTH_OPCODE_WRITE_ONLY_IMM;
    mrc_len = 16'(BTH_B + MRH_B + RETH_B) + (d_evx ? 16'(EVX_B) : 16'd0)
            + (d_tsx ? 16'(TSX_B) : 16'd0) + (has_imm ? 16'(IMM_B) : 16'd0);
    udp_len = 16'(UDP_B) + mrc_len + d_payload_len;
    hdr_len = 8'(ETH_B + IP_B + UDP_B) + (srv6 ? 8'(IP_B) : 8'd0) + mrc_len[7:0];
    if (stev) begin
      flow = d_ev_value[19:0];
      sport = mrc_abi_pkg::WIRE_STEV_PORT_PREFIX[15:0] | {4'd0, d_ev_value[31:20]};
    end else if (srv6) begin
      flow = d_flow_label;
      sport = d_udp_sport;
    end else begin
      flow = d_flow_label;
      sport = d_ev_value[15:0];
    end

    eth = '0;
    eth.dst_mac = d_eth_dst;
    eth.src_mac = d_eth_src;
    eth.ethertype = mrc_abi_pkg::WIRE_ETHERTYPE_IPV6[15:0];

    inner = '0;
    inner.version = 4'd6;
    inner.dscp = d_tclass[7:2];
    inner.ecn = d_tclass[1:0];
    inner.flow_label = flow;
    inner.payload_len = udp_len;
    inner.next_header = mrc_abi_pkg::WIRE_NH_UDP[7:0];
    inner.hop_limit = d_hop_limit;
    inner.src = d_ip_src;
    inner.dst = d_ip_dst;

    outer = inner;
    outer.payload_len = udp_len + 16'(IP_B);
    outer.next_header = mrc_abi_pkg::WIRE_NH_IPV6[7:0];
    outer.src = d_outer_src;
    outer.dst = d_outer_dst;

    udp = '0;
    udp.src_port = sport;
    udp.dst_port = mrc_abi_pkg::WIRE_UDP_PORT[15:0];
    udp.length = udp_len;

    bth = '0;
    bth.opcode = d_opcode;
    bth.se = d_se;
    bth.pkey = d_pkey;
    bth.fecn = d_fecn;
    bth.becn = d_becn;
    bth.dest_qpn = d_dest_qp;
    bth.ack_req = d_ack_req;
    bth.psn = d_psn;

    mrh = '0;
    mrh.version = mrc_abi_pkg::WIRE_WIRE_VERSION[3:0];
    mrh.ev_format = d_format;
    mrh.evx = d_evx;
    mrh.tsx = d_tsx;
    mrh.trimmed = d_trimmed;
    mrh.trimmed_last_hop = d_trimmed_last_hop;
    mrh.retransmit = d_retransmit;
    mrh.msn = d_msn;

    evx = '0;
    evx.ev_index = d_ev_index;
    evx.plane = d_plane;
    evx.ev_value = d_ev_value;

    tsx = '0;
    tsx.tx_ts = d_tx_ts;
    tsx.echo_ts = d_echo_ts;

    reth = '0;
    reth.va = d_va;
    reth.rkey = d_rkey;
    reth.dma_len = d_dma_len;

    immdt = '0;
    immdt.imm = d_imm;

    // Checksum-covered headers (UDP with a zero checksum field, then MRC), right-aligned; every
    // piece has an even length, so 16-bit word boundaries line up from the low end.
    ck = CW'({udp, bth, mrh});
    if (d_evx) ck = (ck << (EVX_B * 8)) | CW'(evx);
    if (d_tsx) ck = (ck << (TSX_B * 8)) | CW'(tsx);
    ck = (ck << (RETH_B * 8)) | CW'(reth);
`ifdef PLANTED_BUG
    if (has_imm) ck = ck << (IMM_B * 8);
`else
    if (has_imm) ck = (ck << (IMM_B * 8)) | CW'(immdt);
`endif
    sum = sum_words(AW'(ck)) + sum_words(AW'(inner.src)) + sum_words(AW'(inner.dst))
        + 32'(udp_len) + mrc_abi_pkg::WIRE_NH_UDP + 32'(d_payload_sum);
    sum = {16'd0, sum[15:0]} + {16'd0, sum[31:16]};
    sum = {16'd0, sum[15:0]} + {16'd0, sum[31:16]};
    csum = ~sum[15:0];
    if (csum == 16'd0) csum = 16'hFFFF;
    udp.checksum = csum;

    // Whole header, right-aligned, then left-aligned so frame byte 0 is the top byte.
    acc = AW'({eth, srv6 ? outer : inner});
    if (srv6) acc = (acc << (IP_B * 8)) | AW'(inner);
    acc = (acc << ((UDP_B + BTH_B + MRH_B) * 8)) | AW'({udp, bth, mrh});
    if (d_evx) acc = (acc << (EVX_B * 8)) | AW'(evx);
    if (d_tsx) acc = (acc << (TSX_B * 8)) | AW'(tsx);
    acc = (acc << (RETH_B * 8)) | AW'(reth);
    if (has_imm) acc = (acc << (IMM_B * 8)) | AW'(immdt);
    aligned = acc << ({3'd0, 8'(MAXB) - hdr_len} * 11'd8);
    frame_n = '0;
    keep_n = '0;
    for (int k = 0; k < MAXB; k++) begin
      frame_n[8*k +: 8] = aligned[8*(MAXB-1-k) +: 8];
      keep_n[k] = 8'(k) < hdr_len;
    end
  end

  // ---- output: 2 or 3 beats per descriptor
  logic [BUFB*8-1:0] frame_q;
  logic [BUFB-1:0]   keep_q;
  logic [1:0]        beat_q, beats_q;
  logic              busy_q;
  wire last_beat = beat_q == beats_q - 2'd1;
  assign m_valid = busy_q;
  assign m_last = busy_q && last_beat;
  assign m_data = frame_q[512*beat_q +: 512];
  assign m_keep = keep_q[64*beat_q +: 64];
  assign d_ready = !busy_q || (m_ready && last_beat);

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      busy_q <= 1'b0;
      beat_q <= '0;
      beats_q <= 2'd2;
      frame_q <= '0;
      keep_q <= '0;
      m_hdr_len <= '0;
    end else begin
      if (busy_q && m_ready) begin
        if (last_beat) busy_q <= 1'b0;
        else beat_q <= beat_q + 2'd1;
      end
      if (d_valid && d_ready) begin
        busy_q <= 1'b1;
        beat_q <= '0;
        beats_q <= (hdr_len > 8'd128) ? 2'd3 : 2'd2;
        frame_q <= frame_n;
        keep_q <= keep_n;
        m_hdr_len <= hdr_len;
      end
    end
  end
endmodule
`default_nettype wire
