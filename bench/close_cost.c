/* Workload 8: the cost of tslab_epoch_close against the number of slabs it
 * releases. An epoch fills a given number of slabs of the 128 B class, frees
 * every object, and is closed; the close is timed on its own.
 * Usage: bench_close_cost [max_slabs=4096] [reps=5] [mode=epoch|pooled]
 * mode=pooled (as in bench_tslab) runs the instance with TSLAB_RELEASE_POOLED:
 * the close hands the empty slabs to the pool, which keeps pool_resident_max
 * bytes resident and releases the rest.
 * Prints one JSON object; the report takes medians over reps and repeats. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tslab.h"

int main(int argc, char** argv) {
  uint64_t max_slabs = h_arg_u64(argc - 1, argv + 1, "max_slabs", 4096);
  uint64_t reps = h_arg_u64(argc - 1, argv + 1, "reps", 5);
  const char* mode = h_arg_str(argc - 1, argv + 1, "mode", "epoch");
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  if (strcmp(mode, "pooled") == 0) {
    cfg.release_policy = TSLAB_RELEASE_POOLED;
  } else if (strcmp(mode, "epoch") != 0) {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 1;
  }
  tslab_t* a = tslab_create(&cfg);
  if (a == NULL) {
    fprintf(stderr, "tslab_create: %s\n", tslab_strerror(tslab_last_error()));
    return 2;
  }
  tslab_stats_class_t cls = {0};
  for (uint32_t i = 0; i < tslab_class_count(a); i++)
    if (tslab_stats_class(a, i, &cls) == TSLAB_OK && cls.object_size >= 128) break;
  if (cls.object_size < 128 || cls.objects_per_slab == 0) {
    fprintf(stderr, "no size class for 128 B objects\n");
    return 2;
  }
  size_t cap = (size_t)(max_slabs * cls.objects_per_slab);
  void** p = h_map(cap * sizeof *p);
  printf("{\"workload\":\"close_cost\",\"allocator\":\"tslab\",\"mode\":\"%s\","
         "\"pool_resident_max\":%zu,\"object_size\":%u,\"slab_bytes\":%u,\"objects_per_slab\":%u,"
         "\"points\":[",
         mode, cfg.pool_resident_max, cls.object_size, cls.slab_bytes, cls.objects_per_slab);
  for (uint64_t slabs = 1; slabs <= max_slabs; slabs *= 4) {
    printf("%s{\"slabs_filled\":%llu,\"runs\":[", slabs > 1 ? "," : "", (unsigned long long)slabs);
    for (uint64_t r = 0; r < reps; r++) {
      size_t n = (size_t)(slabs * cls.objects_per_slab);
      tslab_epoch_t e = tslab_epoch_advance(a);
      for (size_t i = 0; i < n; i++) {
        p[i] = tslab_alloc(a, 128, e);
        if (p[i] == NULL) {
          fprintf(stderr, "tslab_alloc: %s\n", tslab_strerror(tslab_last_error()));
          return 2;
        }
        h_touch(p[i], 128);
      }
      for (size_t i = 0; i < n; i++) tslab_free(a, p[i]);
      uint64_t t0 = h_now_ns();
      tslab_epoch_close(a, e);
      uint64_t t1 = h_now_ns();
      tslab_stats_epoch_t es;
      uint64_t released = tslab_stats_epoch(a, e, &es) == TSLAB_OK ? es.released_at_close_bytes : 0;
      /* Empty slab bytes the instance still keeps resident after the close. */
      tslab_stats_global_t g;
      uint64_t pooled = tslab_stats_global(a, &g) == TSLAB_OK ? g.slabs_empty : 0;
      printf("%s{\"close_ns\":%llu,\"slabs_released\":%llu,\"slabs_empty_after\":%llu}", r ? "," : "",
             (unsigned long long)(t1 - t0), (unsigned long long)(released / cls.slab_bytes),
             (unsigned long long)pooled);
    }
    printf("]}");
  }
  printf("]}\n");
  tslab_destroy(a);
  return 0;
}
