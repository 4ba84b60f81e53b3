/* tslab through its native API: phases are epochs.
 *
 * One mode, "epoch": the library's defaults (release policy
 * TSLAB_RELEASE_ON_CLOSE with its bounded hot reserve; TSLAB_RELEASE_POOLED
 * now behaves the same, so it is not measured apart). A phase ends with
 * tslab_epoch_close, or with tslab_epoch_free_all when the workload frees
 * none of the phase's objects (free=all). The default ring (16 slots) and
 * advance policy (TSLAB_ADVANCE_SKIP_OPEN): a new phase skips ring slots
 * whose era is still open, so the long-lived epoch below keeps its slot as
 * long as fewer than ring_size phases are open at once, which every workload
 * guarantees (at most two phases are open at a time). A forced close of it
 * would make be_alloc fail and the workload exit; epochs_forced_close_total
 * in the report shows it never happened. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "tslab.h"

const char* const be_name = "tslab";
const char* const be_default_mode = "epoch";

static tslab_t* a;
/* The epoch of objects that belong to no phase. */
static tslab_epoch_t long_era;

int be_init(const char* mode) {
  if (strcmp(mode, "epoch") != 0) return -1;
  tslab_config_t cfg;
  tslab_config_init(&cfg);
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
  const struct {
    const char* name;
    uint64_t value;
  } fields[] = {
      {"epoch_ring_size", g.epoch_ring_size},
      {"slabs_created_total", g.slabs_created_total},
      {"slabs_recycled_total", g.slabs_recycled_total},
      {"slabs_in_use", g.slabs_in_use},
      {"slabs_empty", g.slabs_empty},
      {"slabs_released", g.slabs_released},
      {"blocks_in_use", g.blocks_in_use},
      {"blocks_created_total", g.blocks_created_total},
      {"blocks_reused_total", g.blocks_reused_total},
      {"reserve_bytes", g.reserve_bytes},
      {"release_calls_total", g.release_calls_total},
      {"release_bytes_total", g.release_bytes_total},
      {"release_failures_total", g.release_failures_total},
      {"live_bytes", g.live_bytes},
      {"metadata_bytes", g.metadata_bytes},
      {"resident_estimate_bytes", g.resident_estimate_bytes},
      {"slow_path_total", g.slow_path_total},
      {"allocations_total", g.allocations_total},
      {"epochs_opened_total", g.epochs_opened_total},
      {"epochs_closed_total", g.epochs_closed_total},
      {"epochs_forced_close_total", g.epochs_forced_close_total},
      {"epochs_freed_all_total", g.epochs_freed_all_total},
      {"objects_ended_total", g.objects_ended_total},
      {"invalid_frees_total", g.invalid_frees_total},
      {"alloc_failures_total", g.alloc_failures_total},
      {"thread_caches", g.thread_caches},
      {"threads_active", g.threads_active},
  };
  fprintf(out, ",\"tslab\":{");
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    fprintf(out, "%s\"%s\":%llu", i ? "," : "", fields[i].name, (unsigned long long)fields[i].value);
  fprintf(out, "}");
}
