/*
 * Checks shared by the device-backed C tests of lib_mrc.so: count every check, print each
 * failure with errno and the library's last message, exit non-zero when any failed.
 */
#ifndef MRC_CAPI_TEST_CHECK_H
#define MRC_CAPI_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mrc_capi_last_error(void);

static int failures;
static int checks;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                              \
      printf(__VA_ARGS__);                                                     \
      printf(" (errno %d, last error \"%s\")\n", errno, mrc_capi_last_error());\
      fflush(stdout);                                                          \
    }                                                                          \
  } while (0)

/* A call that must succeed with 0. */
#define OK(call)                                                               \
  do {                                                                         \
    errno = 0;                                                                 \
    int rc_ = (call);                                                          \
    CHECK(rc_ == 0, "%s returned %d", #call, rc_);                             \
  } while (0)

/* A call that must return -1 with errno `e`. */
#define FAILS(call, e)                                                         \
  do {                                                                         \
    errno = 0;                                                                 \
    int rc_ = (call);                                                          \
    CHECK(rc_ == -1 && errno == (e), "%s returned %d, want -1/%s", #call, rc_, \
          #e);                                                                 \
  } while (0)

/* A call that must return the errno value `e` itself (and set errno). */
#define FAILS_WITH(call, e)                                                    \
  do {                                                                         \
    errno = 0;                                                                 \
    int rc_ = (call);                                                          \
    CHECK(rc_ == (e) && errno == (e), "%s returned %d, want %s", #call, rc_,   \
          #e);                                                                 \
  } while (0)

/* A pointer that must be non-NULL (stops the program otherwise: later steps need it). */
#define MUST(p)                                                                \
  do {                                                                         \
    if (!(p)) {                                                                \
      printf("FATAL %s:%d: %s is NULL (errno %d, \"%s\")\n", __FILE__,         \
             __LINE__, #p, errno, mrc_capi_last_error());                      \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

static int report(void) {
  printf("%d checks, %d failed\n", checks, failures);
  return failures != 0;
}

#endif
