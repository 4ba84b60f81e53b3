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

#ifdef TSLAB_FAULT_H
/* Frees held inside their non-owner window: tu_held_free_start frees the
 * job's pointer on a thread of its own that stops at
 * TSLAB_HOOK_NONOWNER_VIEWED (src/fault.h: it has read the run, its window
 * open) and returns once it is there; tu_held_free_finish lets it go and
 * joins it. Up to TU_HELD_MAX at once, in slots the caller numbers; the
 * caller installs tu_held_hook with tslab_hook_set. (With src/fault.h
 * included first, as the hooks need.) */
#include <pthread.h>

enum { TU_HELD_MAX = 8 };
typedef struct tu_held_free {
  tu_free_job job;
  int slot;
  pthread_t thread;
} tu_held_free;

static struct {
  _Atomic uintptr_t thread[TU_HELD_MAX];
  _Atomic int held[TU_HELD_MAX], go[TU_HELD_MAX];
} tu_held __attribute__((unused));

static inline void tu_held_hook(int point) {
  if (point != TSLAB_HOOK_NONOWNER_VIEWED) return;
  for (int k = 0; k < TU_HELD_MAX; k++) {
    if ((uintptr_t)pthread_self() != atomic_load(&tu_held.thread[k])) continue;
    atomic_store(&tu_held.held[k], 1);
    while (!atomic_load(&tu_held.go[k])) sched_yield();
  }
}

static inline void* tu_held_run(void* arg) {
  tu_held_free* h = (tu_held_free*)arg;
  atomic_store(&tu_held.thread[h->slot], (uintptr_t)pthread_self());
  return tu_free_job_run(&h->job);
}

static inline void tu_held_free_start(tu_held_free* h) {
  atomic_store(&tu_held.held[h->slot], 0);
  atomic_store(&tu_held.go[h->slot], 0);
  REQUIRE(pthread_create(&h->thread, NULL, tu_held_run, h) == 0);
  tu_wait_flag(&tu_held.held[h->slot]);
}

static inline void tu_held_free_finish(tu_held_free* h) {
  atomic_store(&tu_held.go[h->slot], 1);
  pthread_join(h->thread, NULL);
  atomic_store(&tu_held.thread[h->slot], 0);
}
#endif /* TSLAB_FAULT_H */
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
