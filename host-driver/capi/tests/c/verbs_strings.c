/*
 * Prints what the verbs string and device-list calls return, one per line. Built twice by
 * tests/c_api.rs: against lib_mrc.so (as OCP's makefile links) and against the system's
 * libibverbs; the string lines must agree.
 */
#include <stdio.h>

#include <infiniband/verbs.h>

int main(void) {
  for (int s = 0; s <= IBV_WC_TM_RNDV_INCOMPLETE + 1; s++)
    printf("wc_status %d %s\n", s, ibv_wc_status_str((enum ibv_wc_status)s));
  for (int s = 0; s <= IBV_PORT_ACTIVE_DEFER + 1; s++)
    printf("port_state %d %s\n", s, ibv_port_state_str((enum ibv_port_state)s));
  for (int t = -1; t <= IBV_NODE_UNSPECIFIED + 1; t++)
    printf("node_type %d %s\n", t, ibv_node_type_str((enum ibv_node_type)t));
  for (int e = 0; e <= IBV_EVENT_WQ_FATAL + 1; e++)
    printf("event_type %d %s\n", e, ibv_event_type_str((enum ibv_event_type)e));
  int n = -1;
  struct ibv_device **list = ibv_get_device_list(&n);
  printf("devices %d list %s\n", n, list ? "non-null" : "null");
  for (int i = 0; list && i < n; i++)
    printf("device %d %s index %d\n", i, ibv_get_device_name(list[i]),
           ibv_get_device_index(list[i]));
  if (list)
    ibv_free_device_list(list);
  return 0;
}
