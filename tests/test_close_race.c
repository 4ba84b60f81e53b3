/* The close of an era used by one thread, racing with another thread's
 * free of the era's last live object in a block (the freer is no user of
 * the era: its free is remote, and lands while the era is CLOSING). When the
 * closer's collection, which goes by the run's remote hint, misses the bit
 * and its detach takes it, the block is detached with nothing live. Such a
 * block counts as the era's run like any detached block, and is uncounted
 * when given back: the era's run count and resident estimate end at zero
 * after every close. Before that was so, the count wrapped below zero in
 * about 1 close in 450. Every other iteration frees the era whole instead:
 * the free then lands before the detach, between the detach and the kill
 * (the block is counted and its live count settled by the freer), or after
 * the kill (an invalid free), and either way the era ends with no run, no
 * live object and as many frees as allocations. Iterations: the argument. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "test_util.h"

static tslab_t* inst;
static void* _Atomic handoff;
static atomic_int go, done_iter;

static void* freer(void* arg) {
  (void)arg;
  for (;;) {
    int g;
    while ((g = atomic_load(&go)) == 0) sched_yield();
    if (g < 0) return NULL;
    void* p = atomic_exchange(&handoff, NULL);
    for (volatile int k = 0; k < (int)(rand() % 200); k++) {
    }
    if (p) tslab_free(inst, p);
    atomic_store(&go, 0);
    atomic_fetch_add(&done_iter, 1);
  }
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : TU_TSAN ? 5000 : 50000;
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = 4;
  inst = tslab_create(&cfg);
  REQUIRE(inst);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, freer, NULL) == 0);
  int wraps = 0, bad = 0;
  for (int i = 0; i < iters; i++) {
    tslab_epoch_t e = tslab_epoch_advance(inst);
    void* p = tslab_alloc(inst, 64, e);
    void* q = tslab_alloc(inst, 64, e);
    REQUIRE(p && q);
    tslab_free(inst, q);
    atomic_store(&handoff, p);
    int before = atomic_load(&done_iter);
    atomic_store(&go, 1);
    for (volatile int k = 0; k < (int)(rand() % 200); k++) {
    }
    bool whole = i & 1;
    if (whole)
      tslab_epoch_free_all(inst, e);
    else
      tslab_epoch_close(inst, e);
    while (atomic_load(&done_iter) == before) sched_yield();
    tslab_stats_epoch_t es;
    if (tslab_stats_epoch(inst, e, &es) == TSLAB_OK && whole &&
        (es.live_objects != 0 || es.frees_total != es.allocations_total || es.live_bytes != 0)) {
      if (bad++ < 3)
        fprintf(stderr, "iteration %d: era %llu freed whole: live %llu, %llu frees of %llu allocations\n", i,
                (unsigned long long)e, (unsigned long long)es.live_objects, (unsigned long long)es.frees_total,
                (unsigned long long)es.allocations_total);
    }
    if (tslab_stats_epoch(inst, e, &es) == TSLAB_OK && (es.slabs != 0 || es.rss_estimate_bytes != 0)) {
      if (bad++ < 3)
        fprintf(stderr, "iteration %d: era %llu slabs %llu rss_estimate %llu\n", i, (unsigned long long)e,
                (unsigned long long)es.slabs, (unsigned long long)es.rss_estimate_bytes);
      if (es.slabs > (1ull << 63)) wraps++;
    }
  }
  atomic_store(&go, -1);
  pthread_join(t, NULL);
  fprintf(stderr, "%d of %d closes left the era's run count off (%d wrapped)\n", bad, iters, wraps);
  CHECK(bad == 0);
  CHECK(tslab_check(inst, NULL, 0) == 0);
  tslab_destroy(inst);
  TEST_DONE();
}
