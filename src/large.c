/* Large spans: one object above the largest size class, in a run of its own
 * that is still owned by an epoch and counted in its statistics. Spans are
 * allocated inside the caller's busy window, so epoch close never races with
 * the creation of a span in the epoch it closes. */
#include "internal.h"

static tslab_epoch_slot_t* slot_of(tslab_t* a, uint64_t era) { return &a->ring[era & a->ring_mask]; }

TSLAB_INTERNAL void* tslab_large_alloc(tslab_t* a, tslab_tcache_t* tc, size_t size, size_t align, uint64_t era) {
  size_t granules = (size + TSLAB_GRANULE - 1) >> TSLAB_GRANULE_SHIFT;
  size_t align_granules = align > TSLAB_GRANULE ? align >> TSLAB_GRANULE_SHIFT : 1;
  tslab_run_t* r = tslab_heap_alloc(a, granules, align_granules);
  if (!r) return NULL;
  r->large_gen = atomic_load_explicit(&a->gen_base[(size_t)(r->start - a->base) >> TSLAB_GRANULE_SHIFT],
                                      memory_order_relaxed);
  r->obj_size = 0;
  r->capacity = 1;
  atomic_store_explicit(&r->creator, tc, memory_order_relaxed);
  atomic_store_explicit(&r->era, era, memory_order_relaxed);
  atomic_store_explicit(&r->large_state, TSLAB_LARGE_LIVE, memory_order_relaxed);
  atomic_store_explicit(&r->kind, TSLAB_RUN_LARGE, memory_order_release);
  size_t g0 = (size_t)(r->start - a->base) >> TSLAB_GRANULE_SHIFT;
  atomic_store_explicit(&a->map[g0], r, memory_order_release);
  atomic_store_explicit(&a->map[g0 + r->granules - 1], r, memory_order_release);

  size_t bytes = (size_t)r->granules << TSLAB_GRANULE_SHIFT;
  tslab_epoch_slot_t* es = slot_of(a, era);
  atomic_fetch_add_explicit(&es->large_allocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->large_bytes_alloc, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->slabs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->slab_bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->large_allocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->slabs_created, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->large_bytes_live, bytes, memory_order_relaxed);
  return r->start;
}

/* Exactly one free of a span wins the LIVE -> FREED transition. Called in the
 * freer's busy window and under closing_inflight (src/alloc.c). */
TSLAB_INTERNAL bool tslab_large_free(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* r, const void* p) {
  if (p != r->start) return false;
  uint32_t expected = TSLAB_LARGE_LIVE;
  if (!atomic_compare_exchange_strong_explicit(&r->large_state, &expected, TSLAB_LARGE_FREED,
                                               memory_order_acq_rel, memory_order_relaxed))
    return false;
  uint64_t era = atomic_load_explicit(&r->era, memory_order_relaxed);
  size_t bytes = (size_t)r->granules << TSLAB_GRANULE_SHIFT;
  tslab_epoch_slot_t* es = slot_of(a, era);
  uint64_t st = atomic_load_explicit(&es->state, memory_order_seq_cst);
  bool cross = atomic_load_explicit(&r->creator, memory_order_relaxed) != tc;
  if (cross) atomic_fetch_add_explicit(&a->large_xfrees, 1, memory_order_relaxed);
  if (TSLAB_STATE_ERA(st) == era) {
    if (cross) atomic_fetch_add_explicit(&es->xfrees, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&es->large_frees, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&es->large_bytes_free, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&es->slabs, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&es->slab_bytes, bytes, memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&a->large_frees, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&a->large_bytes_live, bytes, memory_order_relaxed);
  bool active = st == TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE);
  tslab_heap_retire(a, r, !active);
  return true;
}
