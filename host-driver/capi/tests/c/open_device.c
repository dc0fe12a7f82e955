/*
 * Opens every device of $MRC_VFIO_USER_DIR and prints, per device, "open <name> ok" or
 * "open <name> failed errno <n>". Exit status 0 unless listing the devices failed.
 */
#include <errno.h>
#include <stdio.h>

#include <infiniband/verbs.h>
#include <mrc.h>

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list)
    return 1;
  for (int i = 0; i < n; i++) {
    errno = 0;
    struct ibv_context *c = ibv_open_device(list[i]);
    if (c) {
      printf("open %s ok\n", ibv_get_device_name(list[i]));
      ibv_close_device(c);
    } else {
      printf("open %s failed errno %d\n", ibv_get_device_name(list[i]), errno);
    }
  }
  ibv_free_device_list(list);
  return 0;
}
