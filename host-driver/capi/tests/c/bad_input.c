/*
 * Bad input to every function of mrc.h, mrc_ctl.h and the verbs calls lib_mrc.so provides:
 * NULL handles, handles the library never made, NULL out pointers. Each call must fail the way
 * its header says (return value and errno), leave a message, and never crash.
 * Needs no device. Exit status 0 when every check passed; each failure is printed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <mrc.h>
#include <mrc_ctl.h>

#include "check.h"

/* An int-returning call that must fail with -1 and errno EINVAL. */
#define MINUS_ONE(call)                                                        \
  do {                                                                         \
    errno = 0;                                                                 \
    int rc_ = (call);                                                          \
    CHECK(rc_ == -1 && errno == EINVAL, "%s returned %d", #call, rc_);         \
    CHECK(strlen(mrc_capi_last_error()) > 0, "%s left no message", #call);     \
  } while (0)

/* An int-returning call that must return EINVAL itself (and set errno). */
#define ERRNO(call)                                                            \
  do {                                                                         \
    errno = 0;                                                                 \
    int rc_ = (call);                                                          \
    CHECK(rc_ == EINVAL && errno == EINVAL, "%s returned %d", #call, rc_);     \
  } while (0)

/* A pointer-returning call that must return NULL with errno EINVAL. */
#define NULL_EINVAL(call)                                                      \
  do {                                                                         \
    errno = 0;                                                                 \
    void *p_ = (void *)(call);                                                 \
    CHECK(p_ == NULL && errno == EINVAL, "%s returned %p", #call, p_);         \
  } while (0)

int main(void) {
  /* Handles this library never made: a stack address and a made-up token. */
  char junk[4096];
  memset(junk, 0, sizeof(junk));
  struct ibv_context *bad_vctx = (struct ibv_context *)junk;
  struct ibv_pd *bad_pd = (struct ibv_pd *)junk;
  struct ibv_mr *bad_mr = (struct ibv_mr *)junk;
  struct ibv_device *bad_dev = (struct ibv_device *)junk;
  struct mrc_context *bad_ctx = (struct mrc_context *)(uintptr_t)0xc1000000010000ffULL;
  struct mrc_cq *bad_cq = (struct mrc_cq *)(uintptr_t)0xc2000000010000ffULL;
  struct mrc_qp *bad_qp = (struct mrc_qp *)(uintptr_t)0xc3000000010000ffULL;
  struct mrc_qp_hint *bad_hint = (struct mrc_qp_hint *)(uintptr_t)0xc4000000010000ffULL;
  struct mrc_comp_channel *bad_ch =
      (struct mrc_comp_channel *)(uintptr_t)0xc5000000010000ffULL;
  /* A CQ handle passed where a QP is expected (kind check). */
  struct mrc_qp *cq_as_qp = (struct mrc_qp *)bad_cq;

  /* ---- verbs ---- */
  NULL_EINVAL(ibv_open_device(NULL));
  NULL_EINVAL(ibv_open_device(bad_dev));
  ERRNO(ibv_close_device(NULL));
  ERRNO(ibv_close_device(bad_vctx));
  NULL_EINVAL(ibv_get_device_name(NULL));
  NULL_EINVAL(ibv_get_device_name(bad_dev));
  errno = 0;
  CHECK(ibv_get_device_index(bad_dev) == -1 && errno == EINVAL, "ibv_get_device_index");
  errno = 0;
  CHECK(ibv_get_device_guid(bad_dev) == 0 && errno == EINVAL, "ibv_get_device_guid");
  ibv_free_device_list(NULL);
  ibv_free_device_list((struct ibv_device **)junk);
  CHECK(errno == EINVAL, "ibv_free_device_list of a foreign list sets EINVAL");
  struct ibv_device_attr dattr;
  ERRNO(ibv_query_device(NULL, &dattr));
  ERRNO(ibv_query_device(bad_vctx, &dattr));
  union ibv_gid gid;
  MINUS_ONE(ibv_query_gid(NULL, 1, 0, &gid));
  MINUS_ONE(ibv_query_gid(bad_vctx, 1, 3, &gid));
  __be16 pkey;
  MINUS_ONE(ibv_query_pkey(bad_vctx, 1, 0, &pkey));
  NULL_EINVAL(ibv_alloc_pd(NULL));
  NULL_EINVAL(ibv_alloc_pd(bad_vctx));
  ERRNO(ibv_dealloc_pd(NULL));
  ERRNO(ibv_dealloc_pd(bad_pd));
  /* The header's macro: RELAXED_ORDERING makes it ibv_reg_mr_iova2, plain flags ibv_reg_mr. */
  NULL_EINVAL(ibv_reg_mr(bad_pd, junk, sizeof(junk),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING));
  NULL_EINVAL(ibv_reg_mr(NULL, junk, sizeof(junk), IBV_ACCESS_LOCAL_WRITE));
  NULL_EINVAL(ibv_reg_mr_iova(bad_pd, junk, sizeof(junk), 0, IBV_ACCESS_LOCAL_WRITE));
  ERRNO(ibv_dereg_mr(NULL));
  ERRNO(ibv_dereg_mr(bad_mr));

  /* ---- mrc.h ---- */
  struct mrc_device_attr mattr;
  int supported = 7;
  MINUS_ONE(mrc_query_device(NULL, &mattr, &supported));
  MINUS_ONE(mrc_query_device(bad_vctx, &mattr, &supported));
  MINUS_ONE(mrc_query_device_ex(bad_vctx, bad_ctx, &mattr, &supported));
  uint32_t v[4] = {0};
  mrc_query_version(&v[0], &v[1], &v[2], &v[3]);
  CHECK(v[0] == MRC_API_CURRENT_VERSION && v[1] == MRC_API_LAST_SUPPORTED_VERSION &&
            v[2] == MRC_VENDOR_API_CURRENT_VERSION &&
            v[3] == MRC_VENDOR_API_LAST_SUPPORTED_VERSION,
        "mrc_query_version %x %x %x %x", v[0], v[1], v[2], v[3]);
  mrc_query_version(NULL, NULL, NULL, NULL);
  struct mrc_context_attr cattr = {.mrc_api_version_used = MRC_API_CURRENT_VERSION};
  NULL_EINVAL(mrc_create_context(NULL, &cattr));
  NULL_EINVAL(mrc_create_context(bad_vctx, NULL));
  MINUS_ONE(mrc_destroy_context(NULL));
  MINUS_ONE(mrc_destroy_context(bad_ctx));
  struct mrc_comp_channel *ch = NULL;
  ERRNO(mrc_create_comp_channel(bad_ctx, &ch));
  ERRNO(mrc_create_comp_channel(NULL, NULL));
  int fd;
  MINUS_ONE(mrc_get_comp_channel_fd(bad_ch, &fd));
  ERRNO(mrc_destroy_comp_channel(bad_ch));
  NULL_EINVAL(mrc_create_cq(bad_ctx, 16, NULL, NULL, 0));
  NULL_EINVAL(mrc_create_cq(NULL, 16, NULL, NULL, 0));
  struct ibv_wc wc[4];
  MINUS_ONE(mrc_poll_cq(bad_cq, 4, wc));
  MINUS_ONE(mrc_poll_cq(NULL, 4, wc));
  MINUS_ONE(mrc_poll_cq(bad_cq, -1, wc));
  ERRNO(mrc_destroy_cq(bad_cq));
  ERRNO(mrc_destroy_cq(NULL));
  struct mrc_qp_hint_init_attr hinit = {0};
  NULL_EINVAL(mrc_create_qp_hint(bad_ctx, &hinit));
  NULL_EINVAL(mrc_create_qp_hint(bad_ctx, NULL));
  MINUS_ONE(mrc_destroy_qp_hint(bad_hint));
  struct mrc_qp_hint_attr hattr = {0};
  MINUS_ONE(mrc_query_qp_hint(bad_hint, &hattr, MRC_QP_HINT_NUM_SEND_PEERS));
  MINUS_ONE(mrc_modify_qp_hint(bad_hint, &hattr, MRC_QP_HINT_NUM_SEND_PEERS));
  struct mrc_qp_init_attr qinit = {0};
  NULL_EINVAL(mrc_create_qp(bad_ctx, &qinit));
  NULL_EINVAL(mrc_create_qp(NULL, NULL));
  ERRNO(mrc_destroy_qp(bad_qp));
  ERRNO(mrc_destroy_qp(cq_as_qp));
  struct ibv_qp_attr qattr = {0};
  struct mrc_qp_attr mqattr = {0};
  ERRNO(mrc_query_qp(bad_qp, &qattr, IBV_QP_STATE, &mqattr, 0, NULL));
  ERRNO(mrc_modify_qp(bad_qp, &qattr, IBV_QP_STATE, &mqattr, 0));
  uint32_t qpn;
  MINUS_ONE(mrc_get_qpn(bad_qp, &qpn));
  MINUS_ONE(mrc_get_qpn(NULL, &qpn));
  struct ibv_sge sge = {.addr = (uintptr_t)junk, .length = 8, .lkey = 1};
  struct ibv_send_wr swr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
                            .opcode = IBV_WR_RDMA_WRITE};
  struct ibv_send_wr *bad_swr = NULL;
  ERRNO(mrc_post_send(bad_qp, &swr, &bad_swr));
  CHECK(bad_swr == &swr, "mrc_post_send names the failing request");
  struct ibv_recv_wr rwr = {.wr_id = 2};
  struct ibv_recv_wr *bad_rwr = NULL;
  MINUS_ONE(mrc_post_recv(bad_qp, &rwr, &bad_rwr));
  CHECK(bad_rwr == &rwr, "mrc_post_recv names the failing request");
  struct mrc_async_event aev;
  MINUS_ONE(mrc_get_async_event(bad_ctx, &aev));
  MINUS_ONE(mrc_get_async_event(NULL, NULL));
  mrc_ack_async_event(NULL);
  ERRNO(mrc_req_notify_cq(bad_cq, 0));
  struct mrc_cq *ecq;
  void *ectx;
  MINUS_ONE(mrc_get_cq_event(bad_ch, &ecq, &ectx));
  MINUS_ONE(mrc_get_cq_event(bad_ch, NULL, NULL));
  mrc_ack_cq_events(bad_cq, 1);
  mrc_ack_cq_events(NULL, 1);

  /* ---- mrc_ctl.h ---- */
  struct mrc_ctl_device_attr ctl_attr;
  MINUS_ONE(mrc_ctl_query_device(bad_vctx, &ctl_attr));
  MINUS_ONE(mrc_ctl_query_device_ex(NULL, NULL, &ctl_attr, &supported));
  mrc_ctl_query_version(&v[0], &v[1], &v[2], &v[3]);
  CHECK(v[0] == MRC_CTL_API_CURRENT_VERSION && v[2] == MRC_CTL_VENDOR_API_CURRENT_VERSION,
        "mrc_ctl_query_version");
  struct mrc_ctl_port_attr pattr = {0};
  MINUS_ONE(mrc_ctl_query_port(bad_ctx, 1, &pattr, MRC_CTL_PORT_ADMIN_STATE));
  MINUS_ONE(mrc_ctl_modify_port(bad_ctx, 1, &pattr, MRC_CTL_PORT_ADMIN_STATE));
  MINUS_ONE(mrc_ctl_query_port(bad_ctx, 1, &pattr, 1 << 5));
  struct mrc_ctl_ev_fmt_profile_attr fattr;
  memset(&fattr, 0, sizeof(fattr));
  MINUS_ONE(mrc_ctl_modify_ev_fmt_profile(bad_ctx, 1, &fattr, MRC_CTL_EV_FMT_PROFILE_STATE));
  MINUS_ONE(mrc_ctl_query_ev_fmt_profile(bad_ctx, 1, &fattr, MRC_CTL_EV_FMT_PROFILE_STATE));
  MINUS_ONE(mrc_ctl_modify_ev_fmt_profile(NULL, 1, NULL, 0));
  struct mrc_ctl_ev_profile_attr eattr;
  memset(&eattr, 0, sizeof(eattr));
  MINUS_ONE(mrc_ctl_modify_ev_profile(bad_ctx, 1, &eattr, MRC_CTL_EV_PROFILE_STATE));
  MINUS_ONE(mrc_ctl_query_ev_profile(bad_ctx, 1, &eattr, MRC_CTL_EV_PROFILE_STATE));
  /* A negative array length is refused before any handle is used. */
  eattr.ev_op.entry_count = -1;
  MINUS_ONE(mrc_ctl_query_ev_profile(bad_ctx, 1, &eattr, MRC_CTL_EV_PROFILE_EV_OP));
  struct mrc_ctl_cc_profile_attr ccattr;
  memset(&ccattr, 0, sizeof(ccattr));
  MINUS_ONE(mrc_ctl_modify_cc_profile(bad_ctx, 1, &ccattr, MRC_CTL_CC_PROFILE_STATE));
  MINUS_ONE(mrc_ctl_query_cc_profile(bad_ctx, 1, &ccattr, MRC_CTL_CC_PROFILE_STATE));
  NULL_EINVAL(mrc_ctl_create_ev_event_cq(bad_ctx, 16, NULL, NULL, 0));
  struct mrc_ctl_ev_event evs[2];
  errno = 0;
  CHECK(mrc_ctl_poll_ev_event(bad_cq, 2, evs) == -EINVAL && errno == EINVAL,
        "mrc_ctl_poll_ev_event returns -errno");
  struct mrc_ctl_ep_req req;
  memset(&req, 0, sizeof(req));
  struct mrc_ctl_ep_rsp rsp;
  int nrsp = -1;
  MINUS_ONE(mrc_ctl_ep_batch_send_wait(bad_ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1000,
                                       &rsp, &nrsp));
  MINUS_ONE(mrc_ctl_ep_batch_send_wait(bad_ctx, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1000,
                                       &rsp, NULL));

  return report();
}
