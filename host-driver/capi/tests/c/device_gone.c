/*
 * The simulator dies under a running program. Sets up a connected QP pair on mrc0 and mrc1,
 * starts a thread blocked in mrc_get_cq_event, prints "ready" and waits for a line on stdin
 * (the harness kills the server in between). Then every call that needs the device must fail
 * with EIO and a message, the blocked thread must come back with EIO, the blocking calls must
 * return, and tearing everything down must work; SIGALRM ends the program if anything hangs.
 */
#include <arpa/inet.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <mrc.h>
#include <mrc_ctl.h>

#include "check.h"

struct side {
  struct ibv_context *vctx;
  struct mrc_context *ctx;
  struct ibv_pd *pd;
  struct ibv_mr *mr;
  char *buf;
  struct mrc_cq *cq;
  struct mrc_comp_channel *ch;
  struct mrc_qp *qp;
  uint32_t qpn;
  union ibv_gid gid;
};

static struct side S[2];
static int waiter_rc;
static int waiter_errno;

static void *waiter(void *arg) {
  (void)arg;
  struct mrc_cq *cq;
  void *ctx;
  waiter_rc = mrc_get_cq_event(S[1].ch, &cq, &ctx);
  waiter_errno = errno;
  return NULL;
}

static void hang(int sig) {
  (void)sig;
  static const char m[] = "FAIL: a call hung after the device died\n";
  if (write(1, m, sizeof(m) - 1) < 0) {
  }
  _exit(3);
}

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  MUST(list && n == 2);
  for (int i = 0; i < 2; i++) {
    struct side *s = &S[i];
    s->vctx = ibv_open_device(list[i]);
    MUST(s->vctx);
    OK(ibv_query_gid(s->vctx, 1, 0, &s->gid));
    s->ctx = mrc_create_context(s->vctx, NULL);
    MUST(s->ctx);
    s->pd = ibv_alloc_pd(s->vctx);
    MUST(s->pd);
    s->buf = memalign(4096, 8192);
    MUST(s->buf);
    s->mr = ibv_reg_mr(s->pd, s->buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    MUST(s->mr);
    OK(mrc_create_comp_channel(s->ctx, &s->ch));
    s->cq = mrc_create_cq(s->ctx, 16, NULL, s->ch, 0);
    MUST(s->cq);
    struct mrc_qp_init_attr qi = {.send_cq = s->cq, .recv_cq = s->cq, .pd = s->pd,
                                  .cap = {.max_send_wr = 8, .max_recv_wr = 8,
                                          .max_send_sge = 1}};
    s->qp = mrc_create_qp(s->ctx, &qi);
    MUST(s->qp);
    OK(mrc_get_qpn(s->qp, &s->qpn));
    struct ibv_qp_attr v = {.qp_state = IBV_QPS_INIT};
    OK(mrc_modify_qp(s->qp, &v, IBV_QP_STATE, NULL, 0));
  }
  for (int i = 0; i < 2; i++) {
    struct ibv_qp_attr v = {0};
    v.qp_state = IBV_QPS_RTR;
    v.ah_attr.is_global = 1;
    v.ah_attr.grh.dgid = S[1 - i].gid;
    v.dest_qp_num = S[1 - i].qpn;
    OK(mrc_modify_qp(S[i].qp, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN, NULL, 0));
    v.qp_state = IBV_QPS_RTS;
    OK(mrc_modify_qp(S[i].qp, &v, IBV_QP_STATE, NULL, 0));
  }
  struct ibv_recv_wr rwr = {.wr_id = 1}, *rbad;
  OK(mrc_post_recv(S[1].qp, &rwr, &rbad));
  OK(mrc_req_notify_cq(S[1].cq, 0));
  pthread_t t;
  MUST(pthread_create(&t, NULL, waiter, NULL) == 0);
  if (failures)
    return report();

  printf("ready\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof(line), stdin))
    return 2;

  signal(SIGALRM, hang);
  alarm(60);
  /* The blocked thread comes back. */
  pthread_join(t, NULL);
  CHECK(waiter_rc == -1 && waiter_errno == EIO, "blocked mrc_get_cq_event: %d/%d", waiter_rc,
        waiter_errno);
  struct side *a = &S[0];
  struct ibv_wc wc[4];
  /* A poll loop learns of the death as soon as the connection's watcher notices the
   * hang-up (polling reads host memory only): it keeps returning until then. */
  int prc = 0;
  for (int i = 0; i < 10000 && prc == 0; i++) {
    prc = mrc_poll_cq(a->cq, 4, wc);
    if (prc == 0)
      usleep(1000);
  }
  CHECK(prc == -1 && errno == EIO, "a poll loop ends with EIO (%d)", prc);
  struct ibv_sge sge = {.addr = (uintptr_t)a->buf, .length = 64, .lkey = a->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
  wr.wr.rdma.remote_addr = (uintptr_t)S[1].buf;
  wr.wr.rdma.rkey = S[1].mr->rkey;
  struct ibv_send_wr *sbad = NULL;
  FAILS_WITH(mrc_post_send(a->qp, &wr, &sbad), EIO);
  CHECK(sbad == &wr, "bad_wr");
  FAILS(mrc_post_recv(a->qp, &rwr, &rbad), EIO);
  FAILS_WITH(mrc_req_notify_cq(a->cq, 0), EIO);
  struct mrc_cq *ecq;
  void *ectx;
  FAILS(mrc_get_cq_event(a->ch, &ecq, &ectx), EIO);
  struct mrc_async_event ae;
  FAILS(mrc_get_async_event(a->ctx, &ae), EIO);
  struct ibv_qp_attr v = {.qp_state = IBV_QPS_ERR};
  FAILS_WITH(mrc_modify_qp(a->qp, &v, IBV_QP_STATE, NULL, 0), EIO);
  FAILS_WITH(mrc_query_qp(a->qp, &v, IBV_QP_STATE, NULL, 0, NULL), EIO);
  struct ibv_port_attr pa;
  FAILS_WITH(ibv_query_port(a->vctx, 1, &pa), EIO);
  errno = 0;
  CHECK(ibv_alloc_pd(a->vctx) == NULL && errno == EIO, "ibv_alloc_pd");
  errno = 0;
  CHECK(mrc_create_cq(a->ctx, 8, NULL, NULL, 0) == NULL && errno == EIO, "mrc_create_cq");
  struct mrc_ctl_port_attr cpa;
  FAILS(mrc_ctl_query_port(a->ctx, 1, &cpa, MRC_CTL_PORT_ADMIN_STATE), EIO);
  struct mrc_device_attr da;
  int sup;
  FAILS(mrc_query_device(a->vctx, &da, &sup), EIO);

  /* Everything can still be torn down. */
  for (int i = 0; i < 2; i++) {
    struct side *s = &S[i];
    OK(mrc_destroy_qp(s->qp));
    OK(mrc_destroy_cq(s->cq));
    OK(mrc_destroy_comp_channel(s->ch));
    OK(mrc_destroy_context(s->ctx));
    OK(ibv_dereg_mr(s->mr));
    OK(ibv_dealloc_pd(s->pd));
    OK(ibv_close_device(s->vctx));
    free(s->buf);
  }
  ibv_free_device_list(list);
  return report();
}
