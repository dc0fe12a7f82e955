// hdr_builder: the headers of one MRC packet on a 512-bit AXI-Stream bus
// (reference: mrc_abi::wire::Frame::emit; the bytes must match emit's first hdr_len bytes).
//
// Header stacks, every layout taken from the generated package's big-endian structs:
//   UDP, STEV:        Ethernet / IPv6 (NH 17) / UDP / MRC
//   SRv6 without SRH: Ethernet / outer IPv6 (NH 41) / inner IPv6 (NH 17) / UDP / MRC
//   SRv6 with SRH:    Ethernet / outer IPv6 (NH 43) / SRH (NH 41) / inner IPv6 (NH 17) / UDP / MRC
//   MRC = BTH / MRH / [EVX] / [TSX] / body, the body chosen by d_opcode:
//     0xC0..0xC5 (writes): RETH [/ ImmDt for WRITE_LAST_IMM, WRITE_ONLY_IMM]
//     0xD0 ACK: ACKX   0xD1 NACK: NACKX   0xD2 EV_PROBE, 0xD3 EV_PROBE_REPLY: PRBX
//   (any other opcode is built like a write without ImmDt; mrc_abi never emits one).
// SRH (SRv6 format, d_srh_segs = n > 0): the header Frame::emit writes for
// SrhRepr::from_path-style routes: routing type 4, hdr_ext_len 2n, segments_left d_srh_sl,
// last_entry n-1, flags 0, tag 0, no TLVs, segment list List[0..n-1] = d_srh_list[128*i +: 128]
// (wire order: List[0] is the final segment). n is at most the parameter SEGS (larger values are
// clamped to SEGS). The outer destination is d_outer_dst (the active carrier; Frame::emit does not
// derive it, neither does this block).
// EV mapping (mrc_abi::wire::ev): UDP: source port = ev_value[15:0]; STEV: flow label =
// ev_value[19:0], source port = 0xC000 | ev_value[31:20]; SRv6: source port d_udp_sport, flow
// label d_flow_label (also the flow label of the UDP format).
// Control bodies: ACKX {d_cum_psn, d_sack_base, d_sack_bitmap, d_ref_ev_index, d_ref_plane,
// d_ecn_plane_mask, d_ce_count, d_pkt_count}; NACKX {d_nack_reason, d_nack_psn, d_cum_psn,
// d_ref_ev_index, d_ref_plane}; PRBX {d_probe_id, d_ref_ev_index, d_ref_plane}. The d_ref_* fields
// name the data packet (or probed EV) the control packet is about; d_ev_index/d_plane/d_ev_value
// are the packet's own EVX.
// Lengths (IPv6 payload lengths, UDP length) are computed from the present headers and
// d_payload_len. The UDP checksum covers the IPv6 pseudo-header of the transport (inner) header,
// the UDP/MRC headers, and the payload through d_payload_sum: the RFC 1071 one's-complement sum
// (folded to 16 bits) of the payload as big-endian 16-bit words, an odd last byte padded with
// zero (the payload always starts at an even UDP offset). A computed 0 is sent as 0xFFFF.
//
// Structure: the UDP..body part (the "tail", 32..64 bytes: always one 64-byte lane set) is built
// from a handful of fixed layouts (EVX/TSX present or not, body kind); the IP part has SEGS + 2
// layouts (plain, SRv6, SRv6 + SRH of 1..SEGS segments), each a constant concatenation; the frame
// is the one-hot OR of those candidates. No variable shifts. The checksum is an adder tree over
// the 16-bit words of the present headers (word-aligned wherever they land: every header has an
// even length).
//
// Bus: byte k of the frame is m_data[8*(k%64) +: 8] of beat k/64 (AXI-Stream byte lanes),
// m_keep marks the header bytes, m_last the last header beat (payload follows on the next
// stream stage). One beat per clock, ceil(hdr_len/64) beats per packet (86..230 bytes with
// SEGS = 4: 2 beats for UDP/STEV, 2 or 3 for SRv6, 3 or 4 with an SRH); a new descriptor is
// accepted in the clock of the last beat, so throughput is 1 packet per ceil(hdr_len/64) clocks.
//
// PLANTED_BUG (co-simulation only): ImmDt is left out of the UDP checksum.
`default_nettype none
`include "mrc_compat.svh"
module hdr_builder #(
    parameter int SEGS = 4
) (
    input  wire logic              clk,
    input  wire logic              rst_n,
    input  wire logic              d_valid,
    output logic                   d_ready,
    input  wire logic [1:0]        d_format,
    input  wire logic [47:0]       d_eth_dst,
    input  wire logic [47:0]       d_eth_src,
    input  wire logic [127:0]      d_ip_src,
    input  wire logic [127:0]      d_ip_dst,
    input  wire logic [127:0]      d_outer_src,
    input  wire logic [127:0]      d_outer_dst,
    input  wire logic [7:0]        d_srh_segs,
    input  wire logic [7:0]        d_srh_sl,
    input  wire logic [SEGS*128-1:0] d_srh_list,
    input  wire logic [7:0]        d_tclass,
    input  wire logic [19:0]       d_flow_label,
    input  wire logic [7:0]        d_hop_limit,
    input  wire logic [15:0]       d_udp_sport,
    input  wire logic [7:0]        d_opcode,
    input  wire logic              d_se,
    input  wire logic              d_fecn,
    input  wire logic              d_becn,
    input  wire logic              d_ack_req,
    input  wire logic [15:0]       d_pkey,
    input  wire logic [23:0]       d_dest_qp,
    input  wire logic [23:0]       d_psn,
    input  wire logic              d_trimmed,
    input  wire logic              d_trimmed_last_hop,
    input  wire logic              d_retransmit,
    input  wire logic [15:0]       d_msn,
    input  wire logic              d_evx,
    input  wire logic [15:0]       d_ev_index,
    input  wire logic [7:0]        d_plane,
    input  wire logic [31:0]       d_ev_value,
    input  wire logic              d_tsx,
    input  wire logic [31:0]       d_tx_ts,
    input  wire logic [31:0]       d_echo_ts,
    input  wire logic [63:0]       d_va,
    input  wire logic [31:0]       d_rkey,
    input  wire logic [31:0]       d_dma_len,
    input  wire logic [31:0]       d_imm,
    input  wire logic [23:0]       d_cum_psn,
    input  wire logic [23:0]       d_sack_base,
    input  wire logic [63:0]       d_sack_bitmap,
    input  wire logic [15:0]       d_ref_ev_index,
    input  wire logic [7:0]        d_ref_plane,
    input  wire logic [7:0]        d_ecn_plane_mask,
    input  wire logic [15:0]       d_ce_count,
    input  wire logic [15:0]       d_pkt_count,
    input  wire logic [7:0]        d_nack_reason,
    input  wire logic [23:0]       d_nack_psn,
    input  wire logic [31:0]       d_probe_id,
    input  wire logic [15:0]       d_payload_len,
    input  wire logic [15:0]       d_payload_sum,
    output logic                   m_valid,
    input  wire logic              m_ready,
    output logic [511:0]           m_data,
    output logic [63:0]            m_keep,
    output logic                   m_last,
    output logic [15:0]            m_hdr_len
);
  `MRC_TYPEDEF(ethernet_t)
  `MRC_TYPEDEF(ipv6_t)
  `MRC_TYPEDEF(srh_t)
  `MRC_TYPEDEF(udp_t)
  `MRC_TYPEDEF(bth_t)
  `MRC_TYPEDEF(mrh_t)
  `MRC_TYPEDEF(evx_t)
  `MRC_TYPEDEF(tsx_t)
  `MRC_TYPEDEF(reth_t)
  `MRC_TYPEDEF(imm_dt_t)
  `MRC_TYPEDEF(ackx_t)
  `MRC_TYPEDEF(nackx_t)
  `MRC_TYPEDEF(prbx_t)

  localparam int ETH_B = mrc_abi_pkg::ETHERNET_BYTES;
  localparam int IP_B = mrc_abi_pkg::IPV6_BYTES;
  localparam int SRH_B = mrc_abi_pkg::SRH_BYTES;
  localparam int UDP_B = mrc_abi_pkg::UDP_BYTES;
  localparam int BTH_B = mrc_abi_pkg::BTH_BYTES;
  localparam int MRH_B = mrc_abi_pkg::MRH_BYTES;
  localparam int EVX_B = mrc_abi_pkg::EVX_BYTES;
  localparam int TSX_B = mrc_abi_pkg::TSX_BYTES;
  localparam int RETH_B = mrc_abi_pkg::RETH_BYTES;
  localparam int IMM_B = mrc_abi_pkg::IMM_DT_BYTES;
  localparam int ACKX_B = mrc_abi_pkg::ACKX_BYTES;
  localparam int NACKX_B = mrc_abi_pkg::NACKX_BYTES;
  localparam int PRBX_B = mrc_abi_pkg::PRBX_BYTES;
  localparam int SEG_B = mrc_abi_pkg::WIRE_SRH_SEGMENT_BYTES;  // one SRH segment-list entry
  // Body: the largest of RETH+ImmDt, ACKX, NACKX, PRBX.
  localparam int BODY_B = (ACKX_B > RETH_B + IMM_B) ? ACKX_B : RETH_B + IMM_B;
  localparam int FIX_B = UDP_B + BTH_B + MRH_B;  // always-present start of the tail
  localparam int TAIL_B = 64;  // one beat
  localparam int PRE_MAX = ETH_B + 2 * IP_B + SRH_B + SEG_B * SEGS;
  localparam int BEATS = (PRE_MAX + TAIL_B + 63) / 64;
  localparam int BUFB = 64 * BEATS;
  localparam int LAYS = SEGS + 2;  // IP layouts: plain, SRv6, SRv6 + SRH of 1..SEGS segments
  localparam int NW = (2 * 128 + 8 * (FIX_B + EVX_B + TSX_B + BODY_B)) / 16;  // checksum words
  localparam int NWP = 64;  // adder-tree leaves (power of two >= NW + 3)
  localparam logic [7:0] OP_ACK = mrc_abi_pkg::BTH_OPCODE_ACK;
  localparam logic [7:0] OP_NACK = mrc_abi_pkg::BTH_OPCODE_NACK;
  localparam logic [7:0] OP_PROBE = mrc_abi_pkg::BTH_OPCODE_EV_PROBE;
  localparam logic [7:0] OP_PROBE_REPLY = mrc_abi_pkg::BTH_OPCODE_EV_PROBE_REPLY;
  localparam logic [7:0] OP_WRITE_LAST_IMM = mrc_abi_pkg::BTH_OPCODE_WRITE_LAST_IMM;
  localparam logic [7:0] OP_WRITE_ONLY_IMM = mrc_abi_pkg::BTH_OPCODE_WRITE_ONLY_IMM;

  `MRC_T(ethernet_t) eth;
  `MRC_T(ipv6_t) outer, inner;
  `MRC_T(srh_t) srh;
  `MRC_T(udp_t) udp;
  `MRC_T(bth_t) bth;
  `MRC_T(mrh_t) mrh;
  `MRC_T(evx_t) evx;
  `MRC_T(tsx_t) tsx;
  `MRC_T(reth_t) reth;
  `MRC_T(imm_dt_t) immdt;
  `MRC_T(ackx_t) ackx;
  `MRC_T(nackx_t) nackx;
  `MRC_T(prbx_t) prbx;

  logic          srv6, stev, has_imm, is_ack, is_nack, is_probe;
  logic [7:0]    nseg;
  logic [15:0]   body_len, mrc_len, udp_len, srh_len, pre_len, hdr_len, sport;
  logic [19:0]   flow;
  logic [LAYS-1:0] lay;  // one-hot IP layout
  logic [BODY_B*8-1:0] body, body_ck;  // body bytes, first byte at the top, zero-padded
  logic [TAIL_B*8-1:0] tail;           // UDP .. body, first byte at the top, zero-padded
  logic [SEGS*128-1:0] seg_be;         // List[0] at the top
  logic [NWP*22-1:0] tree;  // adder-tree leaves, 22 bits each
  logic [21:0]   sum;
  logic [16:0]   fold;
  logic [15:0]   csum;
  logic [NW*16-1:0] ckv;

  for (genvar i = 0; i < SEGS; i++) begin : g_seg
    assign seg_be[128*(SEGS-1-i) +: 128] = d_srh_list[128*i +: 128];
  end

  `MRC_COMB begin
    srv6 = d_format == mrc_abi_pkg::EV_FORMAT_SRV6;
    stev = d_format == mrc_abi_pkg::EV_FORMAT_STEV;
    is_ack = d_opcode == OP_ACK;
    is_nack = d_opcode == OP_NACK;
    is_probe = d_opcode == OP_PROBE || d_opcode == OP_PROBE_REPLY;
    has_imm = d_opcode == OP_WRITE_LAST_IMM || d_opcode == OP_WRITE_ONLY_IMM;
    nseg = !srv6 ? 8'd0 : (d_srh_segs > 8'(SEGS)) ? 8'(SEGS) : d_srh_segs;
    if (is_ack) body_len = 16'(ACKX_B);
    else if (is_nack) body_len = 16'(NACKX_B);
    else if (is_probe) body_len = 16'(PRBX_B);
    else body_len = 16'(RETH_B) + (has_imm ? 16'(IMM_B) : 16'd0);
    mrc_len = 16'(BTH_B + MRH_B) + (d_evx ? 16'(EVX_B) : 16'd0) + (d_tsx ? 16'(TSX_B) : 16'd0)
            + body_len;
    udp_len = 16'(UDP_B) + mrc_len + d_payload_len;
    srh_len = (nseg == 8'd0) ? 16'd0 : 16'(SRH_B) + 16'(nseg) * 16'(SEG_B);
    pre_len = 16'(ETH_B + IP_B) + (srv6 ? 16'(IP_B) : 16'd0) + srh_len;
    hdr_len = pre_len + 16'(UDP_B) + mrc_len;
    for (int l = 0; l < LAYS; l++)
      lay[l] = (l == 0) ? !srv6 : srv6 && nseg == 8'(l - 1);
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
    outer.payload_len = udp_len + 16'(IP_B) + srh_len;
    outer.next_header = (nseg != 8'd0) ? mrc_abi_pkg::WIRE_NH_ROUTING[7:0]
                                       : mrc_abi_pkg::WIRE_NH_IPV6[7:0];
    outer.src = d_outer_src;
    outer.dst = d_outer_dst;

    srh = '0;
    srh.next_header = mrc_abi_pkg::WIRE_NH_IPV6[7:0];
    srh.hdr_ext_len = {nseg[6:0], 1'b0};
    srh.routing_type = mrc_abi_pkg::WIRE_SRH_ROUTING_TYPE[7:0];
    srh.segments_left = d_srh_sl;
    srh.last_entry = nseg - 8'd1;

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

    ackx = '0;
    ackx.cum_psn = d_cum_psn;
    ackx.sack_base = d_sack_base;
    ackx.sack_bitmap = d_sack_bitmap;
    ackx.ev_index = d_ref_ev_index;
    ackx.plane = d_ref_plane;
    ackx.ecn_plane_mask = d_ecn_plane_mask;
    ackx.ce_count = d_ce_count;
    ackx.pkt_count = d_pkt_count;

    nackx = '0;
    nackx.reason = d_nack_reason;
    nackx.psn = d_nack_psn;
    nackx.cum_psn = d_cum_psn;
    nackx.ev_index = d_ref_ev_index;
    nackx.plane = d_ref_plane;

    prbx = '0;
    prbx.probe_id = d_probe_id;
    prbx.ev_index = d_ref_ev_index;
    prbx.plane = d_ref_plane;

    // Body, left-aligned and zero-padded to BODY_B bytes.
    body = '0;
    if (is_ack) body[BODY_B*8-1 -: ACKX_B*8] = ackx;
    else if (is_nack) body[BODY_B*8-1 -: NACKX_B*8] = nackx;
    else if (is_probe) body[BODY_B*8-1 -: PRBX_B*8] = prbx;
    else begin
      body[BODY_B*8-1 -: RETH_B*8] = reth;
      if (has_imm) body[BODY_B*8-1-RETH_B*8 -: IMM_B*8] = immdt;
    end
    body_ck = body;
`ifdef PLANTED_BUG
    if (has_imm) body_ck[BODY_B*8-1-RETH_B*8 -: IMM_B*8] = '0;
`endif

    // Checksum: pseudo-header addresses, then every header word (UDP checksum field still 0),
    // absent extensions as zeros; plus UDP length, next header and the payload sum.
    ckv = {inner.src, inner.dst, udp, bth, mrh, d_evx ? evx : 64'd0, d_tsx ? tsx : 64'd0, body_ck};
    tree = '0;
    for (int i = 0; i < NW; i++) tree[22*i +: 22] = {6'd0, ckv[16*i +: 16]};
    tree[22*NW +: 22] = {6'd0, udp_len};
    tree[22*(NW+1) +: 22] = 22'(mrc_abi_pkg::WIRE_NH_UDP);
    tree[22*(NW+2) +: 22] = {6'd0, d_payload_sum};
    for (int lv = 0; lv < $clog2(NWP); lv++)
      for (int i = 0; i < NWP / 2; i++)
        if (i % (1 << lv) == 0)
          tree[22*2*i +: 22] = tree[22*2*i +: 22] + tree[22*(2*i+(1<<lv)) +: 22];
    sum = tree[21:0];
    fold = {1'b0, sum[15:0]} + {11'd0, sum[21:16]};
    csum = ~(fold[15:0] + {15'd0, fold[16]});
    if (csum == 16'd0) csum = 16'hFFFF;
    udp.checksum = csum;

    // Tail: UDP, BTH, MRH, then the extensions present, then the body.
    tail = '0;
    case ({d_evx, d_tsx})
      2'b00: tail[TAIL_B*8-1 -: (FIX_B+BODY_B)*8] = {udp, bth, mrh, body};
      2'b10: tail[TAIL_B*8-1 -: (FIX_B+EVX_B+BODY_B)*8] = {udp, bth, mrh, evx, body};
      2'b01: tail[TAIL_B*8-1 -: (FIX_B+TSX_B+BODY_B)*8] = {udp, bth, mrh, tsx, body};
      default: tail[TAIL_B*8-1 -: (FIX_B+EVX_B+TSX_B+BODY_B)*8] = {udp, bth, mrh, evx, tsx, body};
    endcase
  end

  // IP layouts: each a constant concatenation, selected one-hot.
  logic [LAYS*BUFB*8-1:0] cand;  // candidate l at [BUFB*8*l +: BUFB*8]
  for (genvar l = 0; l < LAYS; l++) begin : g_lay
    localparam int PRE = (l == 0) ? ETH_B + IP_B
                       : (l == 1) ? ETH_B + 2 * IP_B
                       : ETH_B + 2 * IP_B + SRH_B + SEG_B * (l - 1);
    localparam int PAD = (BUFB - PRE - TAIL_B) * 8;
    logic [(PRE+TAIL_B)*8-1:0] hdr;
    if (l == 0) begin : g_plain
      assign hdr = {eth, inner, tail};
    end else if (l == 1) begin : g_srv6
      assign hdr = {eth, outer, inner, tail};
    end else begin : g_srh
      assign hdr = {eth, outer, srh, seg_be[SEGS*128-1 -: 128*(l-1)], inner, tail};
    end
    if (PAD > 0) begin : g_pad
      assign cand[BUFB*8*l +: BUFB*8] = {hdr, {PAD{1'b0}}};
    end else begin : g_nopad
      assign cand[BUFB*8*l +: BUFB*8] = hdr;
    end
  end

  logic [BUFB*8-1:0] frame_be, frame_n;
  `MRC_COMB begin
    frame_be = '0;
    for (int l = 0; l < LAYS; l++) frame_be = frame_be | (cand[BUFB*8*l +: BUFB*8] & {(BUFB*8){lay[l]}});
    for (int k = 0; k < BUFB; k++) frame_n[8*k +: 8] = frame_be[8*(BUFB-1-k) +: 8];
  end

  // ---- output: ceil(hdr_len/64) beats per descriptor
  localparam int BW = $clog2(BEATS + 1);
  logic [BUFB*8-1:0] frame_q;
  logic [BW-1:0]     beat_q, last_q;
  logic [15:0]       len_q;
  logic              busy_q;
  wire last_beat = beat_q == last_q;
  assign m_valid = busy_q;
  assign m_last = busy_q && last_beat;
  assign m_hdr_len = len_q;
  `MRC_COMB begin
    m_data = '0;
    for (int b = 0; b < BEATS; b++)
      if (beat_q == BW'(b)) m_data = frame_q[512*b +: 512];
    for (int k = 0; k < 64; k++) m_keep[k] = {beat_q, 6'(k)} < (BW + 6)'(len_q);
  end
  assign d_ready = !busy_q || (m_ready && last_beat);

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      busy_q <= 1'b0;
      beat_q <= '0;
      last_q <= '0;
      frame_q <= '0;
      len_q <= '0;
    end else begin
      if (busy_q && m_ready) begin
        if (last_beat) busy_q <= 1'b0;
        else beat_q <= beat_q + 1'b1;
      end
      if (d_valid && d_ready) begin
        busy_q <= 1'b1;
        beat_q <= '0;
        last_q <= BW'((hdr_len - 16'd1) >> 6);
        frame_q <= frame_n;
        len_q <= hdr_len;
      end
    end
  end
endmodule
`default_nettype wire
