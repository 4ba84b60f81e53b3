/* The seed-compatible API (slab_alloc.h, epoch_domain.h, slab_stats.h) as
 * thin wrappers over the native API.
 *
 * Slot model: the native instance runs a ring of exactly SLAB_EPOCH_COUNT
 * slots, so a seed EpochId is the native slot era % 16. Creation opens eras
 * 1..16, one per slot, and every later era comes from tslab_epoch_advance()
 * on this private instance, which opens current + 1. Hence the eras of the
 * ring are always current - 15 .. current and the newest era of slot s is
 * current - ((current - s) mod 16): no slot table to keep in sync.
 *
 * These functions are a library of their own, libtslab-compat, over
 * libtslab (which, like the drop-in, exports only tslab_ names: see
 * src/malloc/exports.map), and they use nothing but exported functions, the
 * error setter included: in a program linked with libtslab-compat and run
 * with libtslab-malloc preloaded, the exported names bind to the drop-in's
 * copy of the core, and an error recorded in libtslab's own copy would be
 * one tslab_last_error() never reads. */
#include <stdlib.h>
#include <string.h>

#include "epoch_domain.h"
#include "slab_alloc.h"
#include "slab_stats.h"
#include "tslab.h"

struct SlabAllocator {
  tslab_t* t;
};

/* The seed's size classes; seed class i covers (size[i-1], size[i]]. */
static const uint32_t seed_class_size[SLAB_STATS_CLASS_COUNT] = {64,  96,  128, 192,
                                                                 256, 384, 512, 768};

static bool valid(const SlabAllocator* a) {
  if (a != NULL) return true;
  tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
  return false;
}

static bool valid_slot(const SlabAllocator* a, EpochId slot) {
  if (!valid(a)) return false;
  if (slot < SLAB_EPOCH_COUNT) return true;
  tslab_set_error(TSLAB_ERR_EPOCH_UNKNOWN);
  return false;
}

static tslab_epoch_t slot_era(const SlabAllocator* a, EpochId slot) {
  tslab_epoch_t cur = tslab_epoch_current(a->t);
  return cur - ((cur - slot) % SLAB_EPOCH_COUNT);
}

static EpochId era_slot(tslab_epoch_t era) {
  return (EpochId)(era % SLAB_EPOCH_COUNT);
}

/* ---- Lifetime ------------------------------------------------------------ */

SlabAllocator* slab_allocator_create(void) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = SLAB_EPOCH_COUNT;
  cfg.advance_policy = TSLAB_ADVANCE_NEXT_SLOT;
  /* The seed's statistics describe slabs per size class (no blocks), and
   * its epoch_close returns every empty slab to the OS (no hot reserve). */
  cfg.block_budget = 0;
  cfg.pool_resident_max = cfg.thread_reserve_max = 0;
  SlabAllocator* a = malloc(sizeof *a);
  if (a == NULL) {
    tslab_set_error(TSLAB_ERR_OUT_OF_MEMORY);
    return NULL;
  }
  a->t = tslab_create(&cfg);
  if (a->t == NULL) {
    free(a);
    return NULL;
  }
  /* Era 1 is open from creation; eras 2..16 open the other slots, leaving
   * era 16 (slot 0) current, as the seed starts in epoch 0. */
  for (uint32_t i = 1; i < SLAB_EPOCH_COUNT; i++) (void)tslab_epoch_advance(a->t);
  return a;
}

void slab_allocator_free(SlabAllocator* a) {
  if (a == NULL) return;
  tslab_destroy(a->t);
  free(a);
}

/* ---- Allocation -------------------------------------------------------- */

static void* alloc_in_slot(SlabAllocator* a, size_t size, EpochId slot, SlabHandle* out) {
  if (out != NULL) *out = 0;
  if (!valid_slot(a, slot)) return NULL;
  /* An epoch_advance() on another thread may give the slot a newer era
   * between reading the current era and allocating; the allocation then
   * belongs in that newer era, so look again once. */
  for (int attempt = 0; attempt < 2; attempt++) {
    tslab_epoch_t era = slot_era(a, slot);
    void* p = out != NULL ? tslab_alloc_handle(a->t, size, era, out) : tslab_alloc(a->t, size, era);
    if (p != NULL || tslab_last_error() != TSLAB_ERR_EPOCH_STALE) return p;
  }
  return NULL;
}

void* alloc_obj_epoch(SlabAllocator* a, uint32_t size, EpochId epoch, SlabHandle* out_handle) {
  SlabHandle h;
  void* p = alloc_in_slot(a, size, epoch, &h);
  if (out_handle != NULL) *out_handle = h;
  return p;
}

bool free_obj(SlabAllocator* a, SlabHandle handle) {
  return valid(a) && tslab_free_handle(a->t, handle);
}

void* slab_malloc_epoch(SlabAllocator* a, size_t size, EpochId epoch) {
  return alloc_in_slot(a, size, epoch, NULL);
}

void slab_free(SlabAllocator* a, void* ptr) {
  if (ptr != NULL && valid(a)) (void)tslab_free(a->t, ptr);
}

/* ---- Epochs -------------------------------------------------------------- */

EpochId epoch_current(SlabAllocator* a) {
  return a != NULL ? era_slot(tslab_epoch_current(a->t)) : 0;
}

void epoch_advance(SlabAllocator* a) {
  if (!valid(a)) return;
  (void)tslab_epoch_close(a->t, tslab_epoch_current(a->t));
  (void)tslab_epoch_advance(a->t);
}

void epoch_close(SlabAllocator* a, EpochId epoch) {
  if (valid_slot(a, epoch)) (void)tslab_epoch_close(a->t, slot_era(a, epoch));
}

void slab_epoch_set_label(SlabAllocator* a, EpochId epoch, const char* label) {
  if (valid_slot(a, epoch)) (void)tslab_epoch_set_label(a->t, slot_era(a, epoch), label);
}

void slab_epoch_inc_refcount(SlabAllocator* a, EpochId epoch) {
  if (valid_slot(a, epoch)) (void)tslab_epoch_ref(a->t, slot_era(a, epoch));
}

void slab_epoch_dec_refcount(SlabAllocator* a, EpochId epoch) {
  if (valid_slot(a, epoch)) (void)tslab_epoch_unref(a->t, slot_era(a, epoch));
}

uint64_t slab_epoch_get_refcount(SlabAllocator* a, EpochId epoch) {
  if (!valid_slot(a, epoch)) return 0;
  int64_t n = tslab_epoch_refcount(a->t, slot_era(a, epoch));
  return n > 0 ? (uint64_t)n : 0;
}

/* ---- Size classes -------------------------------------------------------- */

/* Sum of the native class counters of seed class cls (see seed_class_size). */
typedef struct class_sum {
  uint64_t allocations, frees, slow_path, live_objects, slabs, slab_bytes;
} class_sum_t;

static bool seed_class_sum(SlabAllocator* a, uint32_t cls, class_sum_t* sum) {
  memset(sum, 0, sizeof *sum);
  if (!valid(a)) return false;
  if (cls >= SLAB_STATS_CLASS_COUNT) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return false;
  }
  uint32_t lo = cls == 0 ? 0 : seed_class_size[cls - 1];
  uint32_t hi = seed_class_size[cls];
  uint32_t n = tslab_class_count(a->t);
  for (uint32_t i = 0; i < n; i++) {
    tslab_stats_class_t cs;
    if (tslab_stats_class(a->t, i, &cs) != TSLAB_OK) return false;
    if (cs.object_size <= lo || cs.object_size > hi) continue;
    sum->allocations += cs.allocations_total;
    sum->frees += cs.frees_total;
    sum->slow_path += cs.slow_path_total;
    sum->live_objects += cs.live_objects;
    sum->slabs += cs.slabs;
    sum->slab_bytes += cs.slabs * cs.slab_bytes;
  }
  return true;
}

void get_perf_counters(SlabAllocator* a, uint32_t size_class, PerfCounters* out) {
  if (out == NULL) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  memset(out, 0, sizeof *out);
  class_sum_t sum;
  if (seed_class_sum(a, size_class, &sum)) out->slow_path_hits = sum.slow_path;
}

uint32_t slab_object_count(uint32_t obj_size) {
  if (obj_size == 0 || obj_size > tslab_small_max()) return 0;
  /* The class table can only be read through an instance; a short-lived
   * one (address space only, nothing committed) answers. */
  tslab_t* t = tslab_create(NULL);
  if (t == NULL) return 0;
  uint32_t count = 0;
  uint32_t n = tslab_class_count(t);
  for (uint32_t i = 0; i < n; i++) {
    tslab_stats_class_t cs;
    if (tslab_stats_class(t, i, &cs) == TSLAB_OK && cs.object_size >= obj_size) {
      count = cs.objects_per_slab;
      break;
    }
  }
  tslab_destroy(t);
  return count;
}

uint64_t read_rss_bytes_linux(void) {
  return tslab_process_rss();
}

uint64_t now_ns(void) {
  return tslab_now_ns();
}

/* ---- Statistics ------------------------------------------------------ */

void slab_stats_global(SlabAllocator* a, SlabGlobalStats* out) {
  if (out == NULL) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  memset(out, 0, sizeof *out);
  tslab_stats_global_t g;
  if (!valid(a) || tslab_stats_global(a->t, &g) != TSLAB_OK) return;
  tslab_stats_epoch_t ring[SLAB_EPOCH_COUNT];
  size_t n = tslab_stats_epochs(a->t, ring, SLAB_EPOCH_COUNT);
  out->version = SLAB_STATS_VERSION;
  out->current_epoch = era_slot(g.current_epoch);
  for (size_t i = 0; i < n; i++) {
    if (ring[i].state == TSLAB_EPOCH_ACTIVE) out->active_epoch_count++;
    if (ring[i].state == TSLAB_EPOCH_CLOSING) out->closing_epoch_count++;
  }
  out->total_slabs_allocated = g.slabs_created_total;
  out->total_slabs_recycled = g.slabs_recycled_total;
  out->net_slabs = g.slabs_in_use;
  out->rss_bytes_current = g.rss_bytes;
  out->estimated_slab_rss_bytes = g.resident_estimate_bytes;
  out->total_slow_path_hits = g.slow_path_total;
  out->total_slow_cache_miss = g.slabs_created_total - g.slabs_recycled_total;
  out->total_slow_epoch_closed = g.alloc_fail_closed_total;
  out->total_madvise_calls = g.release_calls_total;
  out->total_madvise_bytes = g.release_bytes_total;
  out->total_madvise_failures = g.release_failures_total;
  out->total_bitmap_alloc_attempts = g.allocations_total;
  out->total_bitmap_free_attempts = g.frees_total;
}

void slab_stats_class(SlabAllocator* a, uint32_t size_class, SlabClassStats* out) {
  if (out == NULL) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  memset(out, 0, sizeof *out);
  class_sum_t sum;
  if (!seed_class_sum(a, size_class, &sum)) return;
  out->version = SLAB_STATS_VERSION;
  out->class_index = size_class;
  out->object_size = seed_class_size[size_class];
  out->slow_path_hits = sum.slow_path;
  out->bitmap_alloc_attempts = sum.allocations;
  out->bitmap_free_attempts = sum.frees;
  out->live_objects = sum.live_objects;
  out->net_slabs = sum.slabs;
  out->estimated_rss_bytes = sum.slab_bytes;
}

void slab_stats_epoch(SlabAllocator* a, uint32_t size_class, EpochId epoch,
                      SlabEpochStats* out) {
  if (out == NULL) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  memset(out, 0, sizeof *out);
  if (!valid_slot(a, epoch)) return;
  if (size_class >= SLAB_STATS_CLASS_COUNT) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  tslab_stats_epoch_t es;
  if (tslab_stats_epoch(a->t, slot_era(a, epoch), &es) != TSLAB_OK) return;
  out->version = SLAB_STATS_VERSION;
  out->class_index = size_class;
  out->object_size = seed_class_size[size_class];
  out->epoch_id = epoch;
  out->epoch_era = es.era;
  out->state = es.state == TSLAB_EPOCH_ACTIVE ? EPOCH_ACTIVE : EPOCH_CLOSING;
  out->open_since_ns = es.opened_ns;
  out->alloc_count = es.live_objects;
  memcpy(out->label, es.label, sizeof out->label);
  out->refcount = es.refcount > 0 ? (uint64_t)es.refcount : 0;
  out->rss_before_close = es.rss_before_close_bytes;
  out->rss_after_close = es.rss_after_close_bytes;
  out->partial_slab_count = (uint32_t)(es.slabs - es.empty_slabs);
  out->estimated_rss_bytes = es.rss_estimate_bytes;
  out->reclaimable_slab_count = (uint32_t)es.empty_slabs;
}

/* ---- Domains ------------------------------------------------------------- */

/* This thread's entered seed domains, innermost last: the native stack holds
 * the native domains, and this mirror maps them back to their wrappers. It
 * changes only after the native stack accepted the same change, so it cannot
 * overflow, and it names only entered (hence undestroyed) domains as long as
 * the private native member is used through these calls alone. */
static _Thread_local epoch_domain_t* compat_stack[TSLAB_DOMAIN_DEPTH_MAX];
static _Thread_local uint32_t compat_depth;

static epoch_domain_t* domain_over(SlabAllocator* a, tslab_epoch_t era, bool auto_close) {
  epoch_domain_t* d = malloc(sizeof *d);
  if (d == NULL) {
    tslab_set_error(TSLAB_ERR_OUT_OF_MEMORY);
    return NULL;
  }
  d->native = tslab_domain_wrap(a->t, era);
  if (d->native == NULL) {
    free(d);
    return NULL;
  }
  d->alloc = a;
  d->epoch_id = era_slot(era);
  d->epoch_era = era;
  d->refcount = 0;
  d->auto_close = auto_close;
  return d;
}

epoch_domain_t* epoch_domain_create(SlabAllocator* a) {
  if (!valid(a)) return NULL;
  tslab_epoch_t era = tslab_epoch_advance(a->t);
  epoch_domain_t* d = domain_over(a, era, true);
  if (d == NULL) (void)tslab_epoch_close(a->t, era);
  return d;
}

epoch_domain_t* epoch_domain_wrap(SlabAllocator* a, EpochId epoch_id, bool auto_close) {
  return valid_slot(a, epoch_id) ? domain_over(a, slot_era(a, epoch_id), auto_close) : NULL;
}

void epoch_domain_enter(epoch_domain_t* d) {
  if (d == NULL) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  if (tslab_domain_enter(d->native) != TSLAB_OK) return;
  compat_stack[compat_depth++] = d;
  d->refcount++;
}

void epoch_domain_exit(epoch_domain_t* d) {
  if (d == NULL) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  if (tslab_domain_exit(d->native) != TSLAB_OK) return;
  /* Checked rather than assumed: a caller entering d->native directly would
   * otherwise make this pop run below the bottom of the mirror. */
  if (compat_depth > 0 && compat_stack[compat_depth - 1] == d) compat_stack[--compat_depth] = NULL;
  if (--d->refcount == 0 && d->auto_close) (void)tslab_epoch_close(d->alloc->t, d->epoch_era);
}

epoch_domain_t* epoch_domain_current(void) {
  if (compat_depth == 0) return NULL;
  epoch_domain_t* d = compat_stack[compat_depth - 1];
  return d->native == tslab_domain_current() ? d : NULL;
}

SlabAllocator* epoch_domain_allocator(void) {
  epoch_domain_t* d = epoch_domain_current();
  return d != NULL ? d->alloc : NULL;
}

void epoch_domain_destroy(epoch_domain_t* d) {
  if (d == NULL || tslab_domain_destroy(d->native) != TSLAB_OK) return;
  if (d->auto_close) (void)tslab_epoch_close(d->alloc->t, d->epoch_era);
  free(d);
}

void epoch_domain_force_close(epoch_domain_t* d) {
  if (d == NULL) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return;
  }
  (void)tslab_domain_force_close(d->native);
}
