/* tslab through its native API: phases are epochs. */
#include <string.h>

#include "backend.h"
#include "tslab.h"

const char* const be_name = "tslab";
const char* const be_default_mode = "epoch";

static tslab_t* a;
/* The epoch of objects that belong to no phase. Only the single-threaded
 * phase workloads rotate it, so plain loads and stores are enough. */
static tslab_epoch_t long_era;

int be_init(const char* mode) {
  if (strcmp(mode, "epoch") != 0) return -1;
  /* The largest ring: advancing wraps onto the long-lived epoch's slot (and
   * closes it) every ring_size phases, so a bigger ring keeps long-lived
   * objects of more phases together, as a program with per-request epochs
   * and long-lived state would configure it. */
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = 256;
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
  if (p != NULL) return p;
  /* Every ring_size advances the ring wraps onto the long-lived epoch's slot
   * and closes it; its objects stay valid, and newer long-lived objects go
   * to a fresh epoch. */
  int err = tslab_last_error();
  if (err != TSLAB_ERR_EPOCH_CLOSED && err != TSLAB_ERR_EPOCH_STALE) return NULL;
  long_era = tslab_epoch_advance(a);
  return tslab_alloc(a, size, long_era);
}

void be_free(void* p) { tslab_free(a, p); }

be_phase_t be_phase_begin(void) { return tslab_epoch_advance(a); }

void* be_phase_alloc(be_phase_t ph, size_t size) { return tslab_alloc(a, size, ph); }

void be_phase_free(be_phase_t ph, void* p) {
  (void)ph;
  tslab_free(a, p);
}

void be_phase_end(be_phase_t ph) { tslab_epoch_close(a, ph); }

const char* be_version(void) {
#define STR2(x) #x
#define STR(x) STR2(x)
  return STR(TSLAB_VERSION_MAJOR) "." STR(TSLAB_VERSION_MINOR) "." STR(TSLAB_VERSION_PATCH);
}

void be_report(FILE* out) {
  tslab_stats_global_t g;
  if (tslab_stats_global(a, &g) != TSLAB_OK) return;
  fprintf(out,
          ",\"tslab\":{\"slabs_created_total\":%llu,\"slabs_recycled_total\":%llu,"
          "\"slabs_in_use\":%llu,\"slabs_empty\":%llu,\"slabs_released\":%llu,"
          "\"release_calls_total\":%llu,\"release_bytes_total\":%llu,\"live_bytes\":%llu,"
          "\"metadata_bytes\":%llu,\"resident_estimate_bytes\":%llu,\"slow_path_total\":%llu,"
          "\"allocations_total\":%llu,\"epochs_closed_total\":%llu,"
          "\"epochs_forced_close_total\":%llu,\"invalid_frees_total\":%llu,"
          "\"alloc_failures_total\":%llu}",
          (unsigned long long)g.slabs_created_total, (unsigned long long)g.slabs_recycled_total,
          (unsigned long long)g.slabs_in_use, (unsigned long long)g.slabs_empty,
          (unsigned long long)g.slabs_released, (unsigned long long)g.release_calls_total,
          (unsigned long long)g.release_bytes_total, (unsigned long long)g.live_bytes,
          (unsigned long long)g.metadata_bytes, (unsigned long long)g.resident_estimate_bytes,
          (unsigned long long)g.slow_path_total, (unsigned long long)g.allocations_total,
          (unsigned long long)g.epochs_closed_total, (unsigned long long)g.epochs_forced_close_total,
          (unsigned long long)g.invalid_frees_total, (unsigned long long)g.alloc_failures_total);
}
