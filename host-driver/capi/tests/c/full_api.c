/*
 * Every function of mrc.h and mrc_ctl.h, and the verbs calls lib_mrc.so provides, on two MRC
 * devices (mrc0 and mrc1 of $MRC_VFIO_USER_DIR) in one process: devices and attributes,
 * contexts, PDs and MRs, channels and CQs with completion events, QP hints, QPs through every
 * state with writes and writes with immediate between the two devices, the controller's
 * ports, EV format / EV / CC profiles, EV event CQs and probes, async events, and the refusals
 * of objects in use and of stale handles.
 *
 * `full_api nopriv` first drops CAP_NET_ADMIN and checks the controller API refuses (EPERM).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <malloc.h>
#include <poll.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <mrc.h>
#include <mrc_ctl.h>

#include "check.h"

#define BUF 65536
#define PORTS 4

struct side {
  struct ibv_context *vctx;
  struct mrc_context *ctx;
  struct ibv_pd *pd;
  struct ibv_mr *mr;
  char *buf;
  struct mrc_cq *scq, *rcq;
  struct mrc_comp_channel *ch;
  struct mrc_qp *qp;
  uint32_t qpn;
  union ibv_gid gid;
};

static void drop_net_admin(void) {
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) != 0) {
    perror("capget");
    exit(2);
  }
  d[0].effective &= ~(1u << CAP_NET_ADMIN);
  d[0].permitted &= ~(1u << CAP_NET_ADMIN);
  d[0].inheritable &= ~(1u << CAP_NET_ADMIN);
  if (syscall(SYS_capset, &h, d) != 0) {
    perror("capset");
    exit(2);
  }
}

static void move_qp(struct side *me, struct side *peer, struct mrc_qp_attr *m, int mmask) {
  struct ibv_qp_attr v = {0};
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_4096;
  v.ah_attr.is_global = 1;
  v.ah_attr.grh.dgid = peer->gid;
  v.ah_attr.grh.sgid_index = 3;
  v.ah_attr.port_num = 1;
  v.dest_qp_num = peer->qpn;
  v.rq_psn = 0x100;
  OK(mrc_modify_qp(me->qp, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_PATH_MTU,
                   m, mmask));
  memset(&v, 0, sizeof(v));
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = 0x100;
  OK(mrc_modify_qp(me->qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, NULL, 0));
}

static int poll_n(struct mrc_cq *cq, int n, struct ibv_wc *wc) {
  int got = 0;
  for (long spins = 0; got < n && spins < 20000000; spins++) {
    int r = mrc_poll_cq(cq, n - got, wc + got);
    if (r < 0)
      return r;
    got += r;
  }
  return got;
}

static int write_to(struct side *a, struct side *b, size_t off, size_t len, int imm,
                    uint32_t immv, uint64_t wr_id) {
  struct ibv_sge sge = {.addr = (uintptr_t)a->buf + off, .length = (uint32_t)len,
                        .lkey = a->mr->lkey};
  struct ibv_send_wr wr = {0}, *bad = NULL;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(immv);
  wr.wr.rdma.remote_addr = (uintptr_t)b->buf + off;
  wr.wr.rdma.rkey = b->mr->rkey;
  return mrc_post_send(a->qp, &wr, &bad);
}

static void controller(struct side *a, struct side *b, struct mrc_ctl_ev *evs) {
  /* Device attributes. */
  struct mrc_ctl_device_attr da;
  int supported = 0;
  OK(mrc_ctl_query_device_ex(a->vctx, a->ctx, &da, &supported));
  CHECK(supported, "mrc_ctl_query_device_ex: supported");
  OK(mrc_ctl_query_device(a->vctx, &da));
  CHECK(da.phy_port_mask == 0x1e, "phy_port_mask %#x (ports 1..4)", da.phy_port_mask);
  CHECK(da.cc.algorithms && da.cc.algorithms[0] &&
            !strcmp(da.cc.algorithms[0], "uet-1.0-nscc") && !da.cc.algorithms[1],
        "cc algorithms");
  CHECK(da.ev.ev_fmt_mode_mask & MRC_CTL_EV_FMT_MODE_UDP, "UDP EV format");
  CHECK((da.opt_attr & MRC_CTL_OPT_CAP_EV_EVENT) && da.ev.ev_max_profiles > 0 &&
            da.ev.ev_max_count_profile >= 8 && da.cc.cc_max_profiles > 0,
        "ev/cc limits %u %u %u", da.ev.ev_max_profiles, da.ev.ev_max_count_profile,
        da.cc.cc_max_profiles);
  uint32_t v[4];
  mrc_ctl_query_version(&v[0], &v[1], &v[2], &v[3]);
  CHECK(v[0] == MRC_CTL_API_CURRENT_VERSION, "ctl version");

  /* Ports. */
  struct mrc_ctl_port_attr pa = {0};
  OK(mrc_ctl_query_port(a->ctx, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
  CHECK(pa.port_admin_state == MRC_CTL_PORT_ADMIN_ENABLED, "port 2 enabled");
  FAILS(mrc_ctl_query_port(a->ctx, 9, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL);
  FAILS(mrc_ctl_modify_port(a->ctx, 2, &pa, 1 << 4), EINVAL);

  /* EV format profile 10: UDP, one 16-bit field. */
  struct mrc_ctl_ev_fmt_field ff[2] = {{.width = 16}, {.width = 0}};
  struct mrc_ctl_ev_fmt_profile_attr fa;
  memset(&fa, 0, sizeof(fa));
  fa.profile_state = MRC_CTL_PROFILE_ONLINE;
  FAILS(mrc_ctl_modify_ev_fmt_profile(a->ctx, 10, &fa, MRC_CTL_EV_FMT_PROFILE_STATE), EINVAL);
  fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
  fa.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
  fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  fa.ev_fmt_op.fmt_fields = ff;
  fa.ev_fmt_op.fmt_field_count = 1;
  OK(mrc_ctl_modify_ev_fmt_profile(a->ctx, 10, &fa,
                                   MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
                                       MRC_CTL_EV_FMT_PROFILE_OP));
  memset(&fa, 0, sizeof(fa));
  fa.profile_state = MRC_CTL_PROFILE_ONLINE;
  OK(mrc_ctl_modify_ev_fmt_profile(a->ctx, 10, &fa, MRC_CTL_EV_FMT_PROFILE_STATE));
  memset(&fa, 0, sizeof(fa));
  fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
  FAILS(mrc_ctl_query_ev_fmt_profile(a->ctx, 10, &fa,
                                     MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_OP),
        E2BIG);
  CHECK(fa.ev_fmt_op.fmt_field_count == 1, "E2BIG reports the field count");
  fa.ev_fmt_op.fmt_fields = ff;
  fa.ev_fmt_op.fmt_field_count = 2;
  OK(mrc_ctl_query_ev_fmt_profile(a->ctx, 10, &fa,
                                  MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
                                      MRC_CTL_EV_FMT_PROFILE_OP));
  CHECK(fa.cur_profile_state == MRC_CTL_PROFILE_ONLINE &&
            fa.ev_fmt_mode == MRC_CTL_EV_FMT_MODE_UDP && ff[0].width == 16,
        "format query");
  /* A 224-bit SRv6+SRH format is beyond this device. */
  struct mrc_ctl_ev_fmt_field srh[12];
  for (int i = 0; i < 12; i++)
    srh[i].width = (i == 0 || i == 7) ? 32 : 16;
  memset(&fa, 0, sizeof(fa));
  fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
  fa.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_SRV6;
  fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  fa.ev_fmt_op.fmt_fields = srh;
  fa.ev_fmt_op.fmt_field_count = 12;
  FAILS(mrc_ctl_modify_ev_fmt_profile(a->ctx, 11, &fa,
                                      MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
                                          MRC_CTL_EV_FMT_PROFILE_OP),
        E2BIG);

  /* EV profile 20: 8 explicit EVs over format 10. */
  struct mrc_ctl_ev_profile_attr ea;
  memset(&ea, 0, sizeof(ea));
  ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ea.ev_mode = MRC_CTL_EV_MODE_EXP;
  ea.ev_fmt_profile_id = 10;
  ea.ev_count = 8;
  ea.ev_min_active = 2;
  ea.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  OK(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea,
                               MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                   MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                   MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                                   MRC_CTL_EV_PROFILE_EVENT_MASK));
  memset(&ea, 0, sizeof(ea));
  ea.profile_state = MRC_CTL_PROFILE_ONLINE;
  FAILS(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_STATE), EINVAL);
  for (int i = 0; i < 8; i++) {
    struct mrc_ctl_ev_op_entry e;
    memset(&e, 0, sizeof(e));
    uint32_t val = 0xc100 + i;
    memcpy(e.ev_new.val, &val, sizeof(val));
    e.ev_new.port = (uint8_t)(i % PORTS + 1);
    evs[i] = e.ev_new;
    memset(&ea, 0, sizeof(ea));
    ea.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
    ea.ev_op.entries = &e;
    ea.ev_op.entry_count = 1;
    OK(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP));
  }
  memset(&ea, 0, sizeof(ea));
  ea.profile_state = MRC_CTL_PROFILE_ONLINE;
  OK(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_STATE));
  memset(&ea, 0, sizeof(ea));
  OK(mrc_ctl_query_ev_profile(a->ctx, 20, &ea,
                              MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                  MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                  MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                                  MRC_CTL_EV_PROFILE_EVENT_MASK));
  CHECK(ea.cur_profile_state == MRC_CTL_PROFILE_ONLINE && ea.ev_mode == MRC_CTL_EV_MODE_EXP &&
            ea.ev_fmt_profile_id == 10 && ea.ev_count == 8 && ea.ev_min_active == 2,
        "EV profile query");
  struct mrc_ctl_ev_op_entry arr[8];
  memset(arr, 0, sizeof(arr));
  ea.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  ea.ev_op.entries = arr;
  ea.ev_op.entry_count = 4;
  FAILS(mrc_ctl_query_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP), E2BIG);
  CHECK(ea.ev_op.entry_count == 8, "E2BIG reports the EV count");
  OK(mrc_ctl_query_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP));
  int found = 0;
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 8; k++)
      found += !memcmp(&arr[i].ev, &evs[k], sizeof(evs[k]));
  CHECK(found == 8, "the EV array holds the 8 EVs (%d found)", found);
  /* Deny one, query its state, allow it again. */
  struct mrc_ctl_ev_op_entry one;
  memset(&one, 0, sizeof(one));
  one.ev = evs[5];
  one.state = MRC_CTL_EV_DENIED;
  memset(&ea, 0, sizeof(ea));
  ea.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  ea.ev_op.entries = &one;
  ea.ev_op.entry_count = 1;
  OK(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP));
  ea.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
  one.state = 0;
  OK(mrc_ctl_query_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP));
  CHECK(one.state == MRC_CTL_EV_DENIED, "EV state DENIED (%#x)", one.state);
  ea.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  one.state = MRC_CTL_EV_GOOD;
  OK(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP));
  ea.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
  one.state = 0;
  OK(mrc_ctl_query_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP));
  CHECK(one.state == MRC_CTL_EV_GOOD, "EV state GOOD again (%#x)", one.state);
  /* An EV that is not in the profile. */
  one.ev.val[0] ^= 0xff;
  FAILS(mrc_ctl_query_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_EV_OP), ENOENT);
  /* Both operations at once. */
  FAILS(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea,
                                  MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP),
        EINVAL);

  /* CC profile 30: NSCC. */
  struct mrc_ctl_cc_nscc_cfg nscc = {.disable_qa = 1, .base_rtt = 10000, .eta = 0.15f,
                                     .fi = 5.0f, .fi_scale = 0.25f, .gamma = 0.8f,
                                     .max_md_jump = 0.5f, .target_delay = 5000};
  struct mrc_ctl_cc_profile_attr ca;
  memset(&ca, 0, sizeof(ca));
  ca.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ca.algorithm = "uet-1.0-nscc";
  OK(mrc_ctl_modify_cc_profile(a->ctx, 30, &ca,
                               MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM));
  memset(&ca, 0, sizeof(ca));
  ca.profile_state = MRC_CTL_PROFILE_ONLINE;
  ca.cc_config = &nscc;
  OK(mrc_ctl_modify_cc_profile(a->ctx, 30, &ca,
                               MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG));
  memset(&ca, 0, sizeof(ca));
  OK(mrc_ctl_query_cc_profile(a->ctx, 30, &ca,
                              MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM |
                                  MRC_CTL_CC_PROFILE_CONFIG));
  CHECK(ca.cur_profile_state == MRC_CTL_PROFILE_ONLINE && ca.algorithm &&
            !strcmp(ca.algorithm, "uet-1.0-nscc") && ca.cc_config &&
            ((const struct mrc_ctl_cc_nscc_cfg *)ca.cc_config)->base_rtt == 10000,
        "CC profile query");
  struct mrc_ctl_cc_nscc_cfg capped = nscc;
  capped.max_cwnd = 1 << 20;
  ca.cc_config = &capped;
  FAILS(mrc_ctl_modify_cc_profile(a->ctx, 31, &ca, MRC_CTL_CC_PROFILE_CONFIG), EOPNOTSUPP);
  (void)b;
}

static void teardown_profiles(struct side *a) {
  struct mrc_ctl_ev_profile_attr ea;
  memset(&ea, 0, sizeof(ea));
  ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
  OK(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_STATE));
  ea.profile_state = MRC_CTL_PROFILE_INIT;
  OK(mrc_ctl_modify_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_STATE));
  struct mrc_ctl_ev_fmt_profile_attr fa;
  memset(&fa, 0, sizeof(fa));
  fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
  OK(mrc_ctl_modify_ev_fmt_profile(a->ctx, 10, &fa, MRC_CTL_EV_FMT_PROFILE_STATE));
  fa.profile_state = MRC_CTL_PROFILE_INIT;
  OK(mrc_ctl_modify_ev_fmt_profile(a->ctx, 10, &fa, MRC_CTL_EV_FMT_PROFILE_STATE));
  struct mrc_ctl_cc_profile_attr ca;
  memset(&ca, 0, sizeof(ca));
  ca.profile_state = MRC_CTL_PROFILE_OFFLINE;
  OK(mrc_ctl_modify_cc_profile(a->ctx, 30, &ca, MRC_CTL_CC_PROFILE_STATE));
  ca.profile_state = MRC_CTL_PROFILE_INIT;
  OK(mrc_ctl_modify_cc_profile(a->ctx, 30, &ca, MRC_CTL_CC_PROFILE_STATE));
  memset(&ea, 0, sizeof(ea));
  OK(mrc_ctl_query_ev_profile(a->ctx, 20, &ea, MRC_CTL_EV_PROFILE_STATE));
  CHECK(ea.cur_profile_state == MRC_CTL_PROFILE_INIT, "EV profile back in INIT");
}

int main(int argc, char **argv) {
  int nopriv = argc > 1 && !strcmp(argv[1], "nopriv");
  if (nopriv)
    drop_net_admin();

  /* Devices. */
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  MUST(list);
  CHECK(n == 2, "two devices, got %d", n);
  if (n < 2)
    return report();
  CHECK(!strcmp(ibv_get_device_name(list[0]), "mrc0") &&
            !strcmp(ibv_get_device_name(list[1]), "mrc1"),
        "names");
  CHECK(ibv_get_device_index(list[1]) == 1, "index");
  CHECK(list[2] == NULL, "NULL-terminated");
  struct side A = {0}, B = {0};
  struct side *S[2] = {&A, &B};
  for (int i = 0; i < 2; i++) {
    S[i]->vctx = ibv_open_device(list[i]);
    MUST(S[i]->vctx);
    CHECK(S[i]->vctx->device == list[i], "context->device");
  }
  CHECK(ibv_get_device_guid(list[0]) != 0, "guid of an open device");
  struct ibv_device_attr dattr;
  OK(ibv_query_device(A.vctx, &dattr));
  CHECK(dattr.phys_port_cnt == PORTS && dattr.max_qp > 0 && dattr.max_cqe > 0 &&
            dattr.max_sge == 2,
        "device attr ports %d qp %d", dattr.phys_port_cnt, dattr.max_qp);
  struct ibv_port_attr pattr;
  OK(ibv_query_port(A.vctx, 1, &pattr));
  CHECK(pattr.state == IBV_PORT_ACTIVE && pattr.link_layer == IBV_LINK_LAYER_ETHERNET &&
            pattr.gid_tbl_len == 4 && pattr.active_mtu == IBV_MTU_4096,
        "port attr state %d", pattr.state);
  FAILS_WITH(ibv_query_port(A.vctx, 5, &pattr), EINVAL);
  for (int i = 0; i < 2; i++)
    OK(ibv_query_gid(S[i]->vctx, 1, 3, &S[i]->gid));
  union ibv_gid g0;
  OK(ibv_query_gid(A.vctx, 1, 0, &g0));
  CHECK(!memcmp(&g0, &A.gid, sizeof(g0)) && memcmp(&A.gid, &B.gid, sizeof(g0)),
        "every GID index names the NIC; the NICs differ");
  FAILS(ibv_query_gid(A.vctx, 1, 4, &g0), EINVAL);
  struct ibv_gid_entry ge;
  OK(ibv_query_gid_ex(A.vctx, 1, 3, &ge, 0));
  CHECK(ge.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(&ge.gid, &A.gid, 16), "gid_ex");
  __be16 pkey;
  OK(ibv_query_pkey(A.vctx, 1, 0, &pkey));
  CHECK(pkey == htons(0xffff), "pkey");

  /* MRC device attributes and contexts. */
  struct mrc_device_attr mda;
  int supported = 0;
  OK(mrc_query_device(A.vctx, &mda, &supported));
  CHECK(supported && mda.mrc_protocol_version == MRC_PROTOCOL_VERSION_1 &&
            mda.mpr_attr.max_mpr >= 1 && mda.wimm_attr.max_wimm >= 1 &&
            (mda.cap & MRC_DEVICE_CAP_TRIM_NACK),
        "mrc device attr mpr %u wimm %u", mda.mpr_attr.max_mpr, mda.wimm_attr.max_wimm);
  struct mrc_context_attr too_new = {.mrc_api_version_used = MRC_API_VER(2, 0, 0)};
  errno = 0;
  CHECK(mrc_create_context(A.vctx, &too_new) == NULL && errno == ENOTSUP,
        "a newer API version is refused");
  struct mrc_context_attr cattr = {.mrc_api_version_used = MRC_API_CURRENT_VERSION};
  for (int i = 0; i < 2; i++) {
    S[i]->ctx = mrc_create_context(S[i]->vctx, &cattr);
    MUST(S[i]->ctx);
  }
  OK(mrc_query_device_ex(A.vctx, A.ctx, &mda, &supported));
  FAILS(mrc_query_device_ex(A.vctx, B.ctx, &mda, &supported), EINVAL);

  if (nopriv) {
    struct mrc_ctl_port_attr pa = {0};
    FAILS(mrc_ctl_query_port(A.ctx, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), EPERM);
    struct mrc_ctl_ev_profile_attr ea;
    memset(&ea, 0, sizeof(ea));
    FAILS(mrc_ctl_modify_ev_profile(A.ctx, 20, &ea, MRC_CTL_EV_PROFILE_STATE), EPERM);
    errno = 0;
    CHECK(mrc_ctl_create_ev_event_cq(A.ctx, 16, NULL, NULL, 0) == NULL && errno == EPERM,
          "EV event CQ needs the controller");
    OK(mrc_destroy_context(A.ctx));
    OK(mrc_destroy_context(B.ctx));
    OK(ibv_close_device(A.vctx));
    OK(ibv_close_device(B.vctx));
    ibv_free_device_list(list);
    return report();
  }

  /* PDs, MRs. */
  for (int i = 0; i < 2; i++) {
    S[i]->pd = ibv_alloc_pd(S[i]->vctx);
    MUST(S[i]->pd);
    S[i]->buf = memalign(4096, BUF);
    MUST(S[i]->buf);
    memset(S[i]->buf, 0, BUF);
    S[i]->mr = ibv_reg_mr(S[i]->pd, S[i]->buf, BUF,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_RELAXED_ORDERING);
    MUST(S[i]->mr);
    CHECK(S[i]->mr->addr == S[i]->buf && S[i]->mr->length == BUF && S[i]->mr->pd == S[i]->pd,
          "ibv_mr fields");
  }
  errno = 0;
  CHECK(ibv_reg_mr_iova(A.pd, A.buf, 4096, 0x1000, IBV_ACCESS_LOCAL_WRITE) == NULL &&
            errno == EOPNOTSUPP,
        "an iova other than the address");
  errno = 0;
  CHECK(ibv_reg_mr(A.pd, A.buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC) ==
                NULL &&
            errno == EINVAL,
        "atomic access");

  /* Channel and CQs: B's receive CQ reports to a channel. */
  OK(mrc_create_comp_channel(B.ctx, &B.ch));
  int chfd = -1;
  OK(mrc_get_comp_channel_fd(B.ch, &chfd));
  CHECK(chfd >= 0, "channel fd");
  A.scq = mrc_create_cq(A.ctx, 64, NULL, NULL, 0);
  A.rcq = mrc_create_cq(A.ctx, 64, NULL, NULL, 0);
  B.scq = mrc_create_cq(B.ctx, 64, NULL, NULL, 0);
  B.rcq = mrc_create_cq(B.ctx, 64, (void *)0xb0b, B.ch, 0);
  MUST(A.scq && A.rcq && B.scq && B.rcq);
  errno = 0;
  CHECK(mrc_create_cq(A.ctx, 0, NULL, NULL, 0) == NULL && errno == EINVAL, "cqe 0");
  errno = 0;
  CHECK(mrc_create_cq(A.ctx, 8, NULL, B.ch, 0) == NULL && errno == EINVAL,
        "a channel of another device");

  /* Controller: ports, profiles. */
  struct mrc_ctl_ev evs[8];
  controller(&A, &B, evs);
  struct mrc_cq *evcq = mrc_ctl_create_ev_event_cq(A.ctx, 32, NULL, NULL, 0);
  MUST(evcq);
  struct mrc_ctl_ev_event events[8];
  int nev = mrc_ctl_poll_ev_event(evcq, 8, events);
  CHECK(nev >= 0, "poll EV events: %d", nev);
  struct ibv_wc wc[8];
  FAILS(mrc_poll_cq(evcq, 1, wc), EINVAL);

  /* QP hint. */
  struct mrc_qp_hint_init_attr hinit;
  memset(&hinit, 0, sizeof(hinit));
  hinit.attr.num_qps_per_peer = 1;
  hinit.attr.num_send_peers = 1;
  hinit.attr.num_remote_recv_peers = 1;
  hinit.attr.vendor_cfg[0] = 1; /* latency */
  hinit.attr.vendor_cfg[1] = 26;
  struct mrc_qp_hint *hint = mrc_create_qp_hint(A.ctx, &hinit);
  MUST(hint);
  struct mrc_qp_hint_attr ha;
  memset(&ha, 0, sizeof(ha));
  ha.num_send_peers = 4;
  OK(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_NUM_SEND_PEERS));
  memset(&ha, 0, sizeof(ha));
  OK(mrc_query_qp_hint(hint, &ha, MRC_QP_HINT_NUM_SEND_PEERS | MRC_QP_HINT_VENDOR_CFG));
  CHECK(ha.num_send_peers == 4 && ha.vendor_cfg[1] == 26, "hint query");
  ha.vendor_cfg[9] = 1;
  FAILS(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_VENDOR_CFG), EINVAL);

  /* QPs. */
  struct mrc_qp_init_attr qi;
  memset(&qi, 0, sizeof(qi));
  qi.send_cq = A.scq;
  qi.recv_cq = A.rcq;
  qi.pd = A.pd;
  qi.cap.max_send_wr = 32;
  qi.cap.max_recv_wr = 8;
  qi.cap.max_send_sge = 2;
  qi.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  qi.qp_context = (void *)0xa11;
  struct mrc_qp_init_attr bad = qi;
  bad.send_ops_flags |= IBV_QP_EX_WITH_SEND;
  errno = 0;
  CHECK(mrc_create_qp(A.ctx, &bad) == NULL && errno == EINVAL, "SEND ops refused");
  bad = qi;
  bad.pd = B.pd;
  errno = 0;
  CHECK(mrc_create_qp(A.ctx, &bad) == NULL && errno == EINVAL, "a PD of another context");
  A.qp = mrc_create_qp(A.ctx, &qi);
  MUST(A.qp);
  CHECK(qi.cap.max_send_wr >= 32 && qi.cap.max_recv_wr >= 8, "granted capacities");
  memset(&qi, 0, sizeof(qi));
  qi.send_cq = B.scq;
  qi.recv_cq = B.rcq;
  qi.pd = B.pd;
  qi.cap.max_send_wr = 8;
  qi.cap.max_recv_wr = 8;
  qi.cap.max_send_sge = 1;
  B.qp = mrc_create_qp(B.ctx, &qi);
  MUST(B.qp);
  OK(mrc_get_qpn(A.qp, &A.qpn));
  OK(mrc_get_qpn(B.qp, &B.qpn));
  CHECK(A.qpn != 0 && B.qpn != 0, "qpns");

  /* INIT: A with the controller's profiles and the hint, B with the defaults. */
  struct ibv_qp_attr v = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  struct mrc_qp_attr m;
  memset(&m, 0, sizeof(m));
  m.profile.ev_profile_id = 99;
  FAILS_WITH(mrc_modify_qp(A.qp, &v, IBV_QP_STATE, &m, MRC_QP_EV_PROFILE_ID), EINVAL);
  m.profile.ev_profile_id = 20;
  m.profile.cc_profile_id = 30;
  m.qp_hint = hint;
  OK(mrc_modify_qp(A.qp, &v, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &m,
                   MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_HINT));
  OK(mrc_modify_qp(B.qp, &v, IBV_QP_STATE, NULL, 0));
  struct ibv_qp_attr qa;
  struct mrc_qp_attr mq;
  struct mrc_qp_init_attr got_init;
  memset(&mq, 0, sizeof(mq));
  OK(mrc_query_qp(A.qp, &qa, IBV_QP_STATE, &mq,
                  MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_HINT, &got_init));
  CHECK(qa.qp_state == IBV_QPS_INIT && mq.profile.ev_profile_id == 20 &&
            mq.profile.cc_profile_id == 30 && mq.qp_hint == hint &&
            got_init.qp_context == (void *)0xa11,
        "query after INIT");
  FAILS(mrc_destroy_qp_hint(hint), EBUSY);

  /* RTR (with the requester's MPR given early, kept for RTS) and RTS. */
  memset(&m, 0, sizeof(m));
  m.mpr.mpr = 1;
  m.wimm.max_wimm_dest = 4;
  move_qp(&A, &B, &m, MRC_QP_MPR | MRC_QP_MAX_WIMM_DEST);
  move_qp(&B, &A, NULL, 0);
  memset(&mq, 0, sizeof(mq));
  OK(mrc_query_qp(A.qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_AV, &mq,
                  MRC_QP_MPR | MRC_QP_MAX_WIMM_DEST | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT, NULL));
  CHECK(qa.qp_state == IBV_QPS_RTS && qa.dest_qp_num == B.qpn && mq.mpr.mpr == 1 &&
            mq.wimm.max_wimm_dest == 4 && mq.retry.linear_cnt == 7 &&
            mq.retry.exp_cnt == 25 && mq.timeout == 8,
        "query in RTS: state %d mpr %u wimm_dest %u retry %u/%u timeout %u", qa.qp_state,
        mq.mpr.mpr, mq.wimm.max_wimm_dest, mq.retry.linear_cnt, mq.retry.exp_cnt, mq.timeout);
  memset(&m, 0, sizeof(m));
  m.mpr.mpr = 2;
  FAILS_WITH(mrc_modify_qp(A.qp, NULL, 0, &m, MRC_QP_MPR), EINVAL);

  /* A writes into B: a write, then a write with immediate B gets a completion event for. */
  for (int i = 0; i < 4096; i++)
    A.buf[i] = (char)(i * 7);
  struct ibv_recv_wr rwr = {.wr_id = 0x77}, *rbad = NULL;
  OK(mrc_post_recv(B.qp, &rwr, &rbad));
  OK(mrc_req_notify_cq(B.rcq, 0));
  OK(write_to(&A, &B, 0, 2048, 0, 0, 1));
  OK(write_to(&A, &B, 2048, 2048, 1, 0xfeed, 2));
  CHECK(poll_n(A.scq, 2, wc) == 2 && wc[0].status == IBV_WC_SUCCESS &&
            wc[1].status == IBV_WC_SUCCESS && wc[0].wr_id == 1 && wc[1].wr_id == 2 &&
            wc[0].opcode == IBV_WC_RDMA_WRITE && wc[0].qp_num == A.qpn,
        "send completions");
  struct pollfd pfd = {.fd = chfd, .events = POLLIN};
  CHECK(poll(&pfd, 1, 10000) == 1, "the channel's fd became readable");
  struct mrc_cq *ev_cq = NULL;
  void *ev_ctx = NULL;
  OK(mrc_get_cq_event(B.ch, &ev_cq, &ev_ctx));
  CHECK(ev_cq == B.rcq && ev_ctx == (void *)0xb0b, "the event names B's receive CQ");
  FAILS_WITH(mrc_destroy_cq(B.rcq), EBUSY);
  mrc_ack_cq_events(B.rcq, 1);
  CHECK(poll_n(B.rcq, 1, wc) == 1 && wc[0].status == IBV_WC_SUCCESS &&
            wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc[0].wc_flags & IBV_WC_WITH_IMM) &&
            ntohl(wc[0].imm_data) == 0xfeed && wc[0].wr_id == 0x77 && wc[0].qp_num == B.qpn,
        "receive completion imm %#x", ntohl(wc[0].imm_data));
  CHECK(!memcmp(A.buf, B.buf, 4096), "the bytes landed in B's buffer");
  /* Non-blocking channel: nothing pending is EAGAIN. */
  int fl = fcntl(chfd, F_GETFL);
  fcntl(chfd, F_SETFL, fl | O_NONBLOCK);
  FAILS(mrc_get_cq_event(B.ch, &ev_cq, &ev_ctx), EAGAIN);

  /* A chain with a bad request: the one before it is posted, bad_wr names it. */
  struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 64, .lkey = A.mr->lkey};
  struct ibv_send_wr w2 = {.wr_id = 11, .sg_list = &sge, .num_sge = 1,
                           .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
  struct ibv_send_wr w1 = {.wr_id = 10, .next = &w2, .sg_list = &sge, .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
  w1.wr.rdma.remote_addr = (uintptr_t)B.buf;
  w1.wr.rdma.rkey = B.mr->rkey;
  struct ibv_send_wr *sbad = NULL;
  FAILS_WITH(mrc_post_send(A.qp, &w1, &sbad), EINVAL);
  CHECK(sbad == &w2, "bad_wr names the SEND");
  CHECK(poll_n(A.scq, 1, wc) == 1 && wc[0].wr_id == 10, "the write before it was posted");
  sge.lkey ^= 0x100;
  FAILS_WITH(mrc_post_send(A.qp, &w1, &sbad), EINVAL);
  CHECK(sbad == &w1, "an SGE outside every MR");

  /* Probe an EV of profile 20 over A's QP. */
  struct mrc_ctl_ep_req req;
  memset(&req, 0, sizeof(req));
  req.req_id = 5;
  req.sgid = A.gid;
  req.dgid = B.gid;
  req.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
  req.req_ev = evs[2];
  struct mrc_ctl_ep_rsp rsp;
  int nrsp = -1;
  int prc = mrc_ctl_ep_batch_send_wait(A.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 500000000,
                                       &rsp, &nrsp);
  CHECK((prc == 0 && nrsp == 1 && rsp.req_id == 5 && rsp.port == evs[2].port && rsp.rtt > 0) ||
            (prc == -1 && errno == ETIMEDOUT && nrsp == 0),
        "probe rc %d n %d", prc, nrsp);
  req.req_ev.val[0] ^= 0x55;
  FAILS(mrc_ctl_ep_batch_send_wait(A.ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1000000, &rsp,
                                   &nrsp),
        ENOENT);
  FAILS(mrc_ctl_ep_batch_send_wait(A.ctx, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &req, 1, 1000,
                                   &rsp, &nrsp),
        ENOTSUP);
  /* Enough writes to run past the pair scenario's link failure (1 ms of virtual time), with
   * A's QP spraying over profile 20's EVs: every write completes. Events of EVs the engine
   * retires would reach the EV event CQ if the device posted them (the served simulator counts
   * its engines' EV events but does not post them yet); whatever comes must be well formed. */
  for (int i = 0; i < 3000; i++) {
    struct ibv_sge s1 = {.addr = (uintptr_t)A.buf, .length = 256, .lkey = A.mr->lkey};
    struct ibv_send_wr w = {.wr_id = 1000 + i, .sg_list = &s1, .num_sge = 1,
                            .opcode = IBV_WR_RDMA_WRITE,
                            .send_flags = (i % 16 == 15) ? IBV_SEND_SIGNALED : 0};
    w.wr.rdma.remote_addr = (uintptr_t)B.buf + 16384;
    w.wr.rdma.rkey = B.mr->rkey;
    struct ibv_send_wr *wb;
    if (mrc_post_send(A.qp, &w, &wb)) {
      CHECK(0, "bulk write %d", i);
      break;
    }
    if (i % 16 == 15)
      CHECK(poll_n(A.scq, 1, wc) == 1 && wc[0].status == IBV_WC_SUCCESS, "bulk completion %d",
            i);
  }
  nev = mrc_ctl_poll_ev_event(evcq, 8, events);
  CHECK(nev >= 0, "EV events after the link failure: %d", nev);
  for (int i = 0; i < nev; i++) {
    int known = 0;
    for (int k = 0; k < 8; k++)
      known |= !memcmp(&events[i].ev, &evs[k], sizeof(evs[k]));
    CHECK(events[i].profile_id == 20 && known &&
              (events[i].state == MRC_CTL_EV_GOOD || events[i].state == MRC_CTL_EV_ASSUMED_BAD),
          "EV event %d: profile %llu port %u state %#x", i,
          (unsigned long long)events[i].profile_id, events[i].ev.port, events[i].state);
  }

  /* Port 2 of A disabled and enabled: async events, port state. */
  struct mrc_ctl_port_attr pa = {.port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED};
  OK(mrc_ctl_modify_port(A.ctx, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
  struct mrc_async_event ae;
  OK(mrc_get_async_event(A.ctx, &ae));
  CHECK(ae.event_type == IBV_EVENT_PORT_ERR && ae.element.port_num == 2, "PORT_ERR on 2");
  mrc_ack_async_event(&ae);
  OK(ibv_query_port(A.vctx, 2, &pattr));
  CHECK(pattr.state == IBV_PORT_DOWN, "a disabled port is DOWN");
  OK(mrc_ctl_query_port(A.ctx, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
  CHECK(pa.port_admin_state == MRC_CTL_PORT_ADMIN_DISABLED, "admin disabled");
  pa.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
  OK(mrc_ctl_modify_port(A.ctx, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
  OK(mrc_get_async_event(A.ctx, &ae));
  CHECK(ae.event_type == IBV_EVENT_PORT_ACTIVE && ae.element.port_num == 2, "PORT_ACTIVE");
  mrc_ack_async_event(&ae);
  /* Traffic still flows after the port came back. */
  OK(write_to(&A, &B, 8192, 4096, 0, 0, 3));
  CHECK(poll_n(A.scq, 1, wc) == 1 && wc[0].status == IBV_WC_SUCCESS, "write after the port");

  /* Objects in use. */
  FAILS_WITH(mrc_destroy_cq(A.scq), EBUSY);
  FAILS_WITH(ibv_dealloc_pd(A.pd), EBUSY);
  FAILS_WITH(ibv_close_device(A.vctx), EBUSY);
  FAILS_WITH(mrc_destroy_comp_channel(B.ch), EBUSY);

  /* QP to ERROR, then RESET forgets its attributes. */
  struct ibv_qp_attr e = {.qp_state = IBV_QPS_ERR};
  OK(mrc_modify_qp(A.qp, &e, IBV_QP_STATE, NULL, 0));
  OK(mrc_query_qp(A.qp, &qa, IBV_QP_STATE, NULL, 0, NULL));
  CHECK(qa.qp_state == IBV_QPS_ERR, "ERROR");
  e.qp_state = IBV_QPS_RESET;
  OK(mrc_modify_qp(A.qp, &e, IBV_QP_STATE, NULL, 0));
  OK(mrc_destroy_qp_hint(hint));

  /* Stale handles: destroyed objects are refused, not touched. */
  OK(mrc_destroy_qp(A.qp));
  FAILS(mrc_get_qpn(A.qp, &A.qpn), EINVAL);
  FAILS_WITH(mrc_post_send(A.qp, &w1, &sbad), EINVAL);
  FAILS(mrc_query_qp_hint(hint, &ha, MRC_QP_HINT_NUM_SEND_PEERS), EINVAL);
  OK(mrc_destroy_cq(A.scq));
  FAILS(mrc_poll_cq(A.scq, 1, wc), EINVAL);
  OK(mrc_destroy_cq(evcq));
  errno = 0;
  CHECK(mrc_ctl_poll_ev_event(evcq, 1, events) == -EINVAL, "stale EV CQ");
  OK(mrc_destroy_cq(A.rcq));

  teardown_profiles(&A);

  /* Destroying a context cleans up what is left of it (B's QP, CQs, channel). */
  OK(mrc_destroy_context(B.ctx));
  FAILS(mrc_get_qpn(B.qp, &B.qpn), EINVAL);
  FAILS(mrc_poll_cq(B.rcq, 1, wc), EINVAL);
  FAILS(mrc_get_comp_channel_fd(B.ch, &chfd), EINVAL);
  OK(mrc_destroy_context(A.ctx));
  FAILS(mrc_destroy_context(A.ctx), EINVAL);
  for (int i = 0; i < 2; i++) {
    OK(ibv_dereg_mr(S[i]->mr));
    FAILS_WITH(ibv_dereg_mr(S[i]->mr), EINVAL);
    OK(ibv_dealloc_pd(S[i]->pd));
    OK(ibv_close_device(S[i]->vctx));
    free(S[i]->buf);
  }
  ibv_free_device_list(list);
  return report();
}
