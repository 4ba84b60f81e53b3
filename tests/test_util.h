/* Shared helpers for the test programs: every check prints where it failed
 * and makes the program exit non-zero, so a test can never pass silently. */
#ifndef TSLAB_TEST_UTIL_H
#define TSLAB_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tslab.h"

/* Sanitizer builds: 1 when the program is built with that sanitizer (some of
 * them cannot start threads, or allocate, in the child of a busy fork). */
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif

static int tu_failures;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);        \
      tu_failures++;                                                                  \
    }                                                                                 \
  } while (0)

#define CHECK_EQ_U(a, b)                                                              \
  do {                                                                                \
    unsigned long long tu_a = (unsigned long long)(a), tu_b = (unsigned long long)(b); \
    if (tu_a != tu_b) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu vs %llu)\n", __FILE__,     \
              __LINE__, #a, #b, tu_a, tu_b);                                          \
      tu_failures++;                                                                  \
    }                                                                                 \
  } while (0)

/* Fatal: stop the test at once (use when continuing would crash). */
#define REQUIRE(cond)                                                                 \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);      \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

/* The allocator's own consistency checker must find nothing. */
#define CHECK_CONSISTENT(a)                                                           \
  do {                                                                                \
    char tu_report[256];                                                              \
    size_t tu_n = tslab_check((a), tu_report, sizeof tu_report);                      \
    if (tu_n != 0) {                                                                  \
      fprintf(stderr, "%s:%d: %zu inconsistencies: %s\n", __FILE__, __LINE__, tu_n,   \
              tu_report);                                                             \
      tu_failures++;                                                                  \
    }                                                                                 \
  } while (0)

/* A free made on another thread: a pthread start routine that stores
 * tslab_free(a, p) in ok. */
typedef struct tu_free_job {
  tslab_t* a;
  void* p;
  bool ok;
} tu_free_job;

static inline void* tu_free_job_run(void* arg) {
  tu_free_job* j = (tu_free_job*)arg;
  j->ok = tslab_free(j->a, j->p);
  return NULL;
}

#ifndef __cplusplus
#include <sched.h>
#include <stdatomic.h>

/* Wait until another thread sets *flag (a thread held at a test hook, for
 * example); a test that never gets there fails instead of hanging. */
static inline void tu_wait_flag(_Atomic int* flag) {
  for (long spins = 0; !atomic_load(flag); spins++) {
    REQUIRE(spins < 100000000);
    sched_yield();
  }
}
#endif

/* End of main: report and return the exit code. */
#define TEST_DONE()                                                                   \
  do {                                                                                \
    if (tu_failures) {                                                                \
      fprintf(stderr, "FAILED: %d check(s)\n", tu_failures);                          \
      return 1;                                                                       \
    }                                                                                 \
    printf("ok\n");                                                                   \
    return 0;                                                                         \
  } while (0)

#endif
