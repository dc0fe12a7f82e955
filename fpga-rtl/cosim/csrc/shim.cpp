// C ABI over the Verilated models: one handle per model instance; `*_step` sets the inputs from a
// word array, evaluates the clock-low phase, reads the outputs (this cycle's valid/ready/data)
// into a word array, then applies the rising edge. A non-null VCD path enables tracing.
#include <cstdint>
#include <memory>
#include "verilated.h"
#include "verilated_vcd_c.h"
#include "Vev_sprayer.h"
#include "Vev_sprayer_bug.h"
#include "Vev_sprayer_p8.h"
#include "Vev_sprayer_p8_bug.h"
#include "Vrx_psn_tracker_w8.h"
#include "Vrx_psn_tracker_w8_bug.h"
#include "Vcsr_event_queue_e256.h"
#include "Vrx_psn_tracker.h"
#include "Vrx_psn_tracker_bug.h"
#include "Vcsr_event_queue.h"
#include "Vcsr_event_queue_bug.h"
#include "Vhdr_builder.h"
#include "Vhdr_builder_bug.h"

namespace {

// Word-array readers/writers: scalars take one word (two above 32 bits), wide values N words.
template <class T> void get(T& dst, const uint32_t*& p, int bits) {
  if (bits > 32) { dst = (T)((uint64_t)p[0] | ((uint64_t)p[1] << 32)); p += 2; }
  else { dst = (T)p[0]; p += 1; }
}
template <std::size_t N> void get(VlWide<N>& dst, const uint32_t*& p, int) {
  for (std::size_t i = 0; i < N; i++) dst[i] = *p++;
}
template <class T> void put(const T& src, uint32_t*& p, int bits) {
  uint64_t v = (uint64_t)src;
  *p++ = (uint32_t)v;
  if (bits > 32) *p++ = (uint32_t)(v >> 32);
}
template <std::size_t N> void put(const VlWide<N>& src, uint32_t*& p, int) {
  for (std::size_t i = 0; i < N; i++) *p++ = src[i];
}

struct Base {
  virtual ~Base() {}
  virtual void step(const uint32_t* in, uint32_t* out) = 0;
  virtual void step_after(const uint32_t* in, uint32_t* out) = 0;
};

template <class M, class IO> struct Model : Base {
  std::unique_ptr<VerilatedContext> ctx;
  std::unique_ptr<M> top;
  std::unique_ptr<VerilatedVcdC> vcd;
  uint64_t t = 0;
  explicit Model(const char* vcd_path) : ctx(new VerilatedContext) {
    if (vcd_path) ctx->traceEverOn(true);
    top.reset(new M(ctx.get(), "top"));
    if (vcd_path) {
      vcd.reset(new VerilatedVcdC);
      top->trace(vcd.get(), 99);
      vcd->open(vcd_path);
    }
    top->rst_n = 0;
    for (int i = 0; i < 2; i++) tick();
    top->rst_n = 1;
  }
  ~Model() override {
    if (vcd) vcd->close();
    top->final();
  }
  void tick() {
    top->clk = 0;
    top->eval();
    if (vcd) vcd->dump(t);
    top->clk = 1;
    top->eval();
    if (vcd) vcd->dump(t + 1);
    t += 2;
  }
  // The outputs settled on `in` before the rising edge, then the edge.
  void step(const uint32_t* in, uint32_t* out) override {
    IO::inputs(*top, in);
    top->clk = 0;
    top->eval();
    IO::outputs(*top, out);
    tick();
  }
  // As step, but the outputs are read after the rising edge (a registered response to the
  // input taken at that edge is already there).
  void step_after(const uint32_t* in, uint32_t* out) override {
    IO::inputs(*top, in);
    tick();
    IO::outputs(*top, out);
  }
};

struct SprayerIO {
  template <class M> static void inputs(M& m, const uint32_t* p) {
    get(m.cmd_valid, p, 1); get(m.cmd_op, p, 3); get(m.cmd_index, p, 16); get(m.cmd_usable, p, 1);
    get(m.cmd_weight, p, 8); get(m.cmd_plane, p, 8); get(m.cmd_skip, p, 1); get(m.rsp_ready, p, 1);
  }
  template <class M> static void outputs(M& m, uint32_t* p) {
    put(m.cmd_ready, p, 1); put(m.rsp_valid, p, 1); put(m.rsp_found, p, 1); put(m.rsp_index, p, 16);
    put(m.rsp_plane, p, 8); put(m.rsp_err, p, 2); put(m.cnt_picks, p, 32); put(m.cnt_no_usable, p, 32);
    put(m.cnt_skips, p, 32); put(m.cnt_bad_writes, p, 32);
  }
};

struct RxIO {
  template <class M> static void inputs(M& m, const uint32_t* p) {
    get(m.cmd_valid, p, 1); get(m.cmd_op, p, 2); get(m.cmd_psn, p, 24); get(m.rsp_ready, p, 1);
  }
  template <class M> static void outputs(M& m, uint32_t* p) {
    put(m.cmd_ready, p, 1); put(m.rsp_valid, p, 1); put(m.rsp_outcome, p, 2); put(m.rsp_cum, p, 24);
    put(m.rsp_next_max, p, 24); put(m.rsp_sack_base, p, 24); put(m.rsp_sack_bitmap, p, 64);
    put(m.cnt_new, p, 32); put(m.cnt_dup, p, 32); put(m.cnt_oow, p, 32);
  }
};

struct QueueIO {
  template <class M> static void inputs(M& m, const uint32_t* p) {
    get(m.s_valid, p, 1); get(m.s_data, p, 256); get(m.m_ready, p, 1); get(m.reg_addr, p, 5);
  }
  template <class M> static void outputs(M& m, uint32_t* p) {
    put(m.s_ready, p, 1); put(m.m_valid, p, 1); put(m.m_data, p, 256); put(m.reg_rdata, p, 32);
  }
};

struct HdrIO {
  template <class M> static void inputs(M& m, const uint32_t* p) {
    get(m.d_valid, p, 1); get(m.d_format, p, 2); get(m.d_eth_dst, p, 48); get(m.d_eth_src, p, 48);
    get(m.d_ip_src, p, 128); get(m.d_ip_dst, p, 128); get(m.d_outer_src, p, 128);
    get(m.d_outer_dst, p, 128); get(m.d_srh_segs, p, 8); get(m.d_srh_sl, p, 8);
    get(m.d_srh_list, p, 512); get(m.d_tclass, p, 8); get(m.d_flow_label, p, 20);
    get(m.d_hop_limit, p, 8); get(m.d_udp_sport, p, 16); get(m.d_opcode, p, 8); get(m.d_se, p, 1);
    get(m.d_fecn, p, 1); get(m.d_becn, p, 1); get(m.d_ack_req, p, 1); get(m.d_pkey, p, 16);
    get(m.d_dest_qp, p, 24); get(m.d_psn, p, 24); get(m.d_trimmed, p, 1);
    get(m.d_trimmed_last_hop, p, 1); get(m.d_retransmit, p, 1); get(m.d_msn, p, 16);
    get(m.d_evx, p, 1); get(m.d_ev_index, p, 16); get(m.d_plane, p, 8); get(m.d_ev_value, p, 32);
    get(m.d_tsx, p, 1); get(m.d_tx_ts, p, 32); get(m.d_echo_ts, p, 32); get(m.d_va, p, 64);
    get(m.d_rkey, p, 32); get(m.d_dma_len, p, 32); get(m.d_imm, p, 32);
    get(m.d_cum_psn, p, 24); get(m.d_sack_base, p, 24); get(m.d_sack_bitmap, p, 64);
    get(m.d_ref_ev_index, p, 16); get(m.d_ref_plane, p, 8); get(m.d_ecn_plane_mask, p, 8);
    get(m.d_ce_count, p, 16); get(m.d_pkt_count, p, 16); get(m.d_nack_reason, p, 8);
    get(m.d_nack_psn, p, 24); get(m.d_probe_id, p, 32);
    get(m.d_payload_len, p, 16); get(m.d_payload_sum, p, 16); get(m.m_ready, p, 1);
  }
  template <class M> static void outputs(M& m, uint32_t* p) {
    put(m.d_ready, p, 1); put(m.m_valid, p, 1); put(m.m_data, p, 512); put(m.m_keep, p, 64);
    put(m.m_last, p, 1); put(m.m_hdr_len, p, 16);
  }
};

template <class M, class IO> Base* make(const char* vcd) { return new Model<M, IO>(vcd); }

}  // namespace

extern "C" {
// block: 0 sprayer, 1 rx tracker, 2 CSR queue, 3 header builder (co-simulation parameters),
// the simulator's instances: 4 sprayer with P = 8, 5 rx tracker with WORDS = 8, 6 CSR queue with
// LOG2_ENTRIES = 8 (no planted-bug variant); bug: planted-bug variant.
void* mrc_rtl_new(int block, int bug, const char* vcd_path) {
  switch (block * 2 + (bug ? 1 : 0)) {
    case 0: return make<Vev_sprayer, SprayerIO>(vcd_path);
    case 1: return make<Vev_sprayer_bug, SprayerIO>(vcd_path);
    case 2: return make<Vrx_psn_tracker, RxIO>(vcd_path);
    case 3: return make<Vrx_psn_tracker_bug, RxIO>(vcd_path);
    case 4: return make<Vcsr_event_queue, QueueIO>(vcd_path);
    case 5: return make<Vcsr_event_queue_bug, QueueIO>(vcd_path);
    case 6: return make<Vhdr_builder, HdrIO>(vcd_path);
    case 7: return make<Vhdr_builder_bug, HdrIO>(vcd_path);
    case 8: return make<Vev_sprayer_p8, SprayerIO>(vcd_path);
    case 9: return make<Vev_sprayer_p8_bug, SprayerIO>(vcd_path);
    case 10: return make<Vrx_psn_tracker_w8, RxIO>(vcd_path);
    case 11: return make<Vrx_psn_tracker_w8_bug, RxIO>(vcd_path);
    case 12: return make<Vcsr_event_queue_e256, QueueIO>(vcd_path);
    default: return nullptr;
  }
}
void mrc_rtl_step(void* h, const uint32_t* in, uint32_t* out) { static_cast<Base*>(h)->step(in, out); }
void mrc_rtl_step_after(void* h, const uint32_t* in, uint32_t* out) { static_cast<Base*>(h)->step_after(in, out); }
void mrc_rtl_free(void* h) { delete static_cast<Base*>(h); }
}

// Verilator runtime hook (no $time use in the RTL).
double sc_time_stamp() { return 0; }
