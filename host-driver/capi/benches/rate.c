/*
 * Message rate of lib_mrc.so: 64-byte RDMA writes from mrc0 to mrc1 in one process, posted
 * one request per mrc_post_send with at most 128 outstanding and every 64th signaled, polled
 * 16 completions at a time (the loop of OCP's benchmark). The Rust twin of this loop is
 * examples/bench_capi.rs, which runs both and compares.
 *
 *   rate MESSAGES   (devices from $MRC_VFIO_USER_DIR)
 * Prints "messages N seconds S rate R" (R in messages per second).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <mrc.h>

#define DEPTH 128
#define SIGNAL_EVERY 64
#define POLL 16
#define SIZE 64

#define DIE(...)                                                               \
  do {                                                                         \
    fprintf(stderr, "rate: " __VA_ARGS__);                                     \
    fprintf(stderr, "\n");                                                     \
    exit(1);                                                                   \
  } while (0)

struct side {
  struct ibv_context *vctx;
  struct mrc_context *ctx;
  struct ibv_pd *pd;
  struct ibv_mr *mr;
  char *buf;
  struct mrc_cq *cq;
  struct mrc_qp *qp;
  uint32_t qpn;
  union ibv_gid gid;
};

int main(int argc, char **argv) {
  long messages = argc > 1 ? atol(argv[1]) : 100000;
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 2)
    DIE("need two devices (MRC_VFIO_USER_DIR)");
  struct side s[2];
  memset(s, 0, sizeof(s));
  for (int i = 0; i < 2; i++) {
    if (!(s[i].vctx = ibv_open_device(list[i])) ||
        ibv_query_gid(s[i].vctx, 1, 3, &s[i].gid) ||
        !(s[i].ctx = mrc_create_context(s[i].vctx, NULL)) ||
        !(s[i].pd = ibv_alloc_pd(s[i].vctx)) || !(s[i].buf = memalign(4096, 4096)) ||
        !(s[i].mr = ibv_reg_mr(s[i].pd, s[i].buf, 4096,
                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) ||
        !(s[i].cq = mrc_create_cq(s[i].ctx, 256, NULL, NULL, 0)))
      DIE("setup of device %d failed", i);
    struct mrc_qp_init_attr qi = {.send_cq = s[i].cq, .recv_cq = s[i].cq, .pd = s[i].pd,
                                  .cap = {.max_send_wr = DEPTH, .max_recv_wr = 1,
                                          .max_send_sge = 1}};
    if (!(s[i].qp = mrc_create_qp(s[i].ctx, &qi)) || mrc_get_qpn(s[i].qp, &s[i].qpn))
      DIE("QP of device %d", i);
    struct ibv_qp_attr v = {.qp_state = IBV_QPS_INIT};
    if (mrc_modify_qp(s[i].qp, &v, IBV_QP_STATE, NULL, 0))
      DIE("INIT");
  }
  for (int i = 0; i < 2; i++) {
    struct ibv_qp_attr v = {0};
    v.qp_state = IBV_QPS_RTR;
    v.ah_attr.is_global = 1;
    v.ah_attr.grh.dgid = s[1 - i].gid;
    v.dest_qp_num = s[1 - i].qpn;
    if (mrc_modify_qp(s[i].qp, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN, NULL, 0))
      DIE("RTR");
    v.qp_state = IBV_QPS_RTS;
    if (mrc_modify_qp(s[i].qp, &v, IBV_QP_STATE, NULL, 0))
      DIE("RTS");
  }
  struct ibv_sge sge = {.addr = (uintptr_t)s[0].buf, .length = SIZE, .lkey = s[0].mr->lkey};
  struct ibv_send_wr wr = {0}, *bad;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = (uintptr_t)s[1].buf;
  wr.wr.rdma.rkey = s[1].mr->rkey;
  struct ibv_wc wc[POLL];
  long posted = 0, completed = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (completed < messages) {
    while (posted < messages && posted - completed < DEPTH) {
      int last = posted == messages - 1;
      wr.wr_id = (uint64_t)posted;
      wr.send_flags = (posted % SIGNAL_EVERY == SIGNAL_EVERY - 1 || last) ? IBV_SEND_SIGNALED : 0;
      if (mrc_post_send(s[0].qp, &wr, &bad))
        DIE("post at %ld", posted);
      posted++;
    }
    int got = mrc_poll_cq(s[0].cq, POLL, wc);
    if (got < 0)
      DIE("poll");
    for (int i = 0; i < got; i++) {
      if (wc[i].status != IBV_WC_SUCCESS)
        DIE("completion %s", ibv_wc_status_str(wc[i].status));
      completed = (long)wc[i].wr_id + 1;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("messages %ld seconds %.6f rate %.1f\n", messages, secs, messages / secs);
  for (int i = 0; i < 2; i++) {
    mrc_destroy_qp(s[i].qp);
    mrc_destroy_cq(s[i].cq);
    ibv_dereg_mr(s[i].mr);
    ibv_dealloc_pd(s[i].pd);
    mrc_destroy_context(s[i].ctx);
    ibv_close_device(s[i].vctx);
    free(s[i].buf);
  }
  ibv_free_device_list(list);
  return 0;
}
