/* tslab through its native API: phases are epochs.
 *
 * Two modes, one instance configuration each:
 *   "epoch"  (the default) the library's defaults: release policy
 *            TSLAB_RELEASE_ON_CLOSE, so a close returns the epoch's empty
 *            slabs to the OS before it returns;
 *   "pooled" TSLAB_RELEASE_POOLED: a close hands the epoch's empty slabs to
 *            the shared pool (resident up to pool_resident_max), so the next
 *            short epoch reuses them without page faults.
 * Either mode ends a phase with tslab_epoch_close, or with
 * tslab_epoch_free_all when the workload frees none of the phase's objects
 * (free=all). Both use the default ring (16 slots) and advance policy
 * (TSLAB_ADVANCE_SKIP_OPEN): a new phase skips ring slots whose era is still
 * open, so the long-lived epoch below keeps its slot as long as fewer than
 * ring_size phases are open at once, which every workload guarantees (at
 * most two phases are open at a time). A forced close of it would make
 * be_alloc fail and the workload exit; epochs_forced_close_total in the
 * report shows it never happened. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "tslab.h"

const char* const be_name = "tslab";
const char* const be_default_mode = "epoch";

static tslab_t* a;
/* The epoch of objects that belong to no phase. */
static tslab_epoch_t long_era;
static const char* policy = "on_close";

int be_init(const char* mode) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  if (strcmp(mode, "pooled") == 0) {
    cfg.release_policy = TSLAB_RELEASE_POOLED;
    policy = "pooled";
  } else if (strcmp(mode, "epoch") != 0)
    return -1;
  /* A smaller address-space reservation than the default, for valgrind,
   * which cannot map 64 GiB (bench/callgrind_counts.sh). */
  const char* reserve = bench_param("reserve_mib", NULL);
  if (reserve) {
    cfg.reserve_bytes = (size_t)strtoull(reserve, NULL, 10) << 20;
    if (cfg.max_alloc_size > cfg.reserve_bytes / 2) cfg.max_alloc_size = cfg.reserve_bytes / 2;
  }
  a = tslab_create(&cfg);
  if (a == NULL) {
    fprintf(stderr, "tslab_create: %s\n", tslab_strerror(tslab_last_error()));
    return -1;
  }
  long_era = tslab_epoch_current(a);
  return 0;
}

void* be_alloc(size_t size) {
  void* p = tslab_alloc(a, size, long_era);
  if (p == NULL)
    fprintf(stderr, "tslab_alloc in the long-lived epoch: %s\n", tslab_strerror(tslab_last_error()));
  return p;
}

void be_free(void* p) { tslab_free(a, p); }

be_phase_t be_phase_begin(void) { return tslab_epoch_advance(a); }

void* be_phase_alloc(be_phase_t ph, size_t size) {
  void* p = tslab_alloc(a, size, ph);
  if (p == NULL) fprintf(stderr, "tslab_alloc in a phase: %s\n", tslab_strerror(tslab_last_error()));
  return p;
}

void be_phase_free(be_phase_t ph, void* p) {
  (void)ph;
  tslab_free(a, p);
}

void be_phase_end(be_phase_t ph) { tslab_epoch_close(a, ph); }

int be_phase_free_all(be_phase_t ph) {
  int st = tslab_epoch_free_all(a, ph);
  if (st == TSLAB_OK) return 0;
  fprintf(stderr, "tslab_epoch_free_all: %s\n", tslab_strerror(st));
  return -1;
}

const char* be_version(void) {
#define STR2(x) #x
#define STR(x) STR2(x)
  return STR(TSLAB_VERSION_MAJOR) "." STR(TSLAB_VERSION_MINOR) "." STR(TSLAB_VERSION_PATCH);
}

void be_report(FILE* out) {
  tslab_stats_global_t g;
  if (tslab_stats_global(a, &g) != TSLAB_OK) return;
  fprintf(out,
          ",\"tslab\":{\"release_policy\":\"%s\",\"epoch_ring_size\":%u,"
          "\"slabs_created_total\":%llu,\"slabs_recycled_total\":%llu,"
          "\"slabs_in_use\":%llu,\"slabs_empty\":%llu,\"slabs_released\":%llu,"
          "\"release_calls_total\":%llu,\"release_bytes_total\":%llu,"
          "\"release_failures_total\":%llu,\"live_bytes\":%llu,"
          "\"metadata_bytes\":%llu,\"resident_estimate_bytes\":%llu,\"slow_path_total\":%llu,"
          "\"allocations_total\":%llu,\"epochs_opened_total\":%llu,\"epochs_closed_total\":%llu,"
          "\"epochs_forced_close_total\":%llu,\"invalid_frees_total\":%llu,"
          "\"alloc_failures_total\":%llu,\"thread_caches\":%llu,\"threads_active\":%llu}",
          policy, g.epoch_ring_size, (unsigned long long)g.slabs_created_total,
          (unsigned long long)g.slabs_recycled_total, (unsigned long long)g.slabs_in_use,
          (unsigned long long)g.slabs_empty, (unsigned long long)g.slabs_released,
          (unsigned long long)g.release_calls_total, (unsigned long long)g.release_bytes_total,
          (unsigned long long)g.release_failures_total, (unsigned long long)g.live_bytes,
          (unsigned long long)g.metadata_bytes, (unsigned long long)g.resident_estimate_bytes,
          (unsigned long long)g.slow_path_total, (unsigned long long)g.allocations_total,
          (unsigned long long)g.epochs_opened_total, (unsigned long long)g.epochs_closed_total,
          (unsigned long long)g.epochs_forced_close_total, (unsigned long long)g.invalid_frees_total,
          (unsigned long long)g.alloc_failures_total, (unsigned long long)g.thread_caches,
          (unsigned long long)g.threads_active);
}
