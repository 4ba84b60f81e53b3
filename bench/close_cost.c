/* Workload 8: what tslab_epoch_close costs.
 *
 * Request epochs: an epoch used by one thread with a few objects (a request),
 * closed once its objects are freed, many times over; every close is timed
 * on its own and the instance's release calls (madvise) are counted across
 * them. The same with the free-all close (tslab_epoch_free_all), which ends
 * the epoch with its objects still live. Each runs on a fresh instance.
 *
 * Big epochs: an epoch fills a given number of slabs of the 128 B class and
 * either frees every object and is closed, or is freed whole with every
 * object live; the close is timed on its own. The frees already release
 * most of an epoch's empty slabs (what the hot reserve cannot keep), so the
 * close after them releases little; the free-all close releases the whole
 * epoch, and gives the cost per released slab.
 *
 * The instances use the library's defaults, hot reserve included.
 * Usage: bench_close_cost [max_slabs=4096] [reps=5] [closes=2000] [objs=16]
 *                         [touch=1]
 * Prints one JSON object; the report takes medians over runs and repeats. */
#include <stdlib.h>

#include "harness.h"
#include "tslab.h"

static uint64_t checksum;

static tslab_t* must_create(const tslab_config_t* cfg) {
  tslab_t* a = tslab_create(cfg);
  if (a == NULL) {
    fprintf(stderr, "tslab_create: %s\n", tslab_strerror(tslab_last_error()));
    exit(2);
  }
  return a;
}

static void* must_alloc(tslab_t* a, size_t size, tslab_epoch_t e, uint64_t id) {
  void* p = tslab_alloc(a, size, e);
  if (p == NULL) {
    fprintf(stderr, "tslab_alloc: %s\n", tslab_strerror(tslab_last_error()));
    exit(2);
  }
  h_obj_write(p, size, id);
  return p;
}

static uint64_t release_calls(tslab_t* a) {
  tslab_stats_global_t g;
  return tslab_stats_global(a, &g) == TSLAB_OK ? g.release_calls_total : 0;
}

/* `closes` request epochs of `objs` objects of 16..256 B each: allocated and
 * written, read back, then either freed one by one and the epoch closed, or
 * left live and the epoch freed whole. One tenth more epochs run first as a
 * warm-up (the first ones set up the thread cache and the reserve). Prints
 * ,"NAME":{...} with the closes' percentiles and release calls per close. */
static void request_epochs(const char* name, bool free_all, uint64_t closes, uint64_t objs) {
  tslab_t* a = must_create(NULL);
  void** p = h_map(objs * sizeof *p);
  uint32_t* size = h_map(objs * sizeof *size);
  uint64_t* ns = h_map(closes * sizeof *ns);
  h_rng rng = {5};
  uint64_t warm = closes / 10, calls0 = 0, id = 0;
  int status = TSLAB_OK;
  for (uint64_t c = 0; c < warm + closes && status == TSLAB_OK; c++) {
    if (c == warm) calls0 = release_calls(a);
    tslab_epoch_t e = tslab_epoch_advance(a);
    for (uint64_t i = 0; i < objs; i++) {
      size[i] = (uint32_t)h_range(&rng, 16, 256);
      p[i] = must_alloc(a, size[i], e, id++);
    }
    for (uint64_t i = 0; i < objs; i++) {
      checksum += h_obj_read(p[i], size[i]);
      if (!free_all) tslab_free(a, p[i]);
    }
    uint64_t t0 = h_now_ns();
    status = free_all ? tslab_epoch_free_all(a, e) : tslab_epoch_close(a, e);
    uint64_t t1 = h_now_ns();
    if (c >= warm) ns[c - warm] = t1 - t0;
  }
  if (status != TSLAB_OK) {
    printf(",\"%s\":{\"error\":\"%s\"}", name, tslab_strerror(status));
  } else {
    printf(",\"%s\":{\"objects\":%llu,\"closes\":%llu,\"release_calls_per_close\":%.4f", name,
           (unsigned long long)objs, (unsigned long long)closes,
           (double)(release_calls(a) - calls0) / (double)closes);
    h_print_pcts(stdout, "close_ns", ns, closes);
    printf("}");
  }
  h_unmap(ns, closes * sizeof *ns);
  h_unmap(size, objs * sizeof *size);
  h_unmap(p, objs * sizeof *p);
  tslab_destroy(a);
}

/* Epochs that fill 1, 4, 16 ... max_slabs slabs, reps times each, closed
 * after their objects are freed or freed whole. Prints ,"NAME":[points]. */
static void big_epochs(const char* name, bool free_all, const tslab_stats_class_t* cls, uint64_t max_slabs,
                       uint64_t reps, void** p) {
  tslab_t* a = must_create(NULL);
  printf(",\"%s\":[", name);
  for (uint64_t slabs = 1; slabs <= max_slabs; slabs *= 4) {
    printf("%s{\"slabs_filled\":%llu,\"runs\":[", slabs > 1 ? "," : "", (unsigned long long)slabs);
    for (uint64_t r = 0; r < reps; r++) {
      size_t n = (size_t)(slabs * cls->objects_per_slab);
      tslab_epoch_t e = tslab_epoch_advance(a);
      for (size_t i = 0; i < n; i++) p[i] = must_alloc(a, cls->object_size, e, i);
      for (size_t i = 0; i < n; i++) {
        checksum += h_obj_read(p[i], cls->object_size);
        if (!free_all) tslab_free(a, p[i]);
      }
      uint64_t t0 = h_now_ns();
      int status = free_all ? tslab_epoch_free_all(a, e) : tslab_epoch_close(a, e);
      uint64_t t1 = h_now_ns();
      if (status != TSLAB_OK) {
        printf("{\"error\":\"%s\"}", tslab_strerror(status));
        break;
      }
      tslab_stats_epoch_t es;
      uint64_t released = tslab_stats_epoch(a, e, &es) == TSLAB_OK ? es.released_at_close_bytes : 0;
      /* Empty memory the instance still keeps resident after the close. */
      tslab_stats_global_t g;
      uint64_t reserve = tslab_stats_global(a, &g) == TSLAB_OK ? g.reserve_bytes : 0;
      printf("%s{\"close_ns\":%llu,\"slabs_released\":%llu,\"reserve_bytes_after\":%llu}", r ? "," : "",
             (unsigned long long)(t1 - t0), (unsigned long long)(released / cls->slab_bytes),
             (unsigned long long)reserve);
    }
    printf("]}");
  }
  printf("]");
  tslab_destroy(a);
}

/* The class of 128 B objects, whose slabs the big epochs fill. */
static tslab_stats_class_t class_128(void) {
  tslab_t* a = must_create(NULL);
  tslab_stats_class_t cls = {0};
  for (uint32_t i = 0; i < tslab_class_count(a); i++)
    if (tslab_stats_class(a, i, &cls) == TSLAB_OK && cls.object_size >= 128) break;
  tslab_destroy(a);
  if (cls.object_size < 128 || cls.objects_per_slab == 0) {
    fprintf(stderr, "no size class for 128 B objects\n");
    exit(2);
  }
  return cls;
}

int main(int argc, char** argv) {
  int na = argc - 1;
  char** args = argv + 1;
  uint64_t max_slabs = h_arg_u64(na, args, "max_slabs", 4096);
  uint64_t reps = h_arg_u64(na, args, "reps", 5);
  uint64_t closes = h_arg_u64(na, args, "closes", 2000), objs = h_arg_u64(na, args, "objs", 16);
  h_touch_init(na, args);
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  if (closes < 1 || objs < 1) {
    fprintf(stderr, "closes and objs must be at least 1\n");
    return 1;
  }
  printf("{\"workload\":\"close_cost\",\"allocator\":\"tslab\",\"touch\":%d,"
         "\"pool_resident_max\":%zu,\"thread_reserve_max\":%zu",
         h_touch_all, cfg.pool_resident_max, cfg.thread_reserve_max);
  request_epochs("request_close", false, closes, objs);
  request_epochs("request_free_all", true, closes, objs);
  tslab_stats_class_t cls = class_128();
  size_t cap = (size_t)(max_slabs * cls.objects_per_slab);
  void** p = h_map(cap * sizeof *p);
  printf(",\"object_size\":%u,\"slab_bytes\":%u,\"objects_per_slab\":%u", cls.object_size, cls.slab_bytes,
         cls.objects_per_slab);
  big_epochs("points", false, &cls, max_slabs, reps, p);
  big_epochs("points_free_all", true, &cls, max_slabs, reps, p);
  h_unmap(p, cap * sizeof *p);
  printf(",\"checksum\":%llu}\n", (unsigned long long)checksum);
  return 0;
}
