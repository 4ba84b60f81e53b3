/* Large spans: one object above the largest size class, in a run of its own
 * that is still owned by an epoch and counted in its statistics. Spans are
 * allocated inside the caller's busy window by a registered user of the era
 * (docs/ARCHITECTURE.md 7.2), so an epoch close never races with the
 * creation of a span in the epoch it closes; the heap keeps each ring slot's
 * spans listed for free-all (7.5). */
#include "fault.h"
#include "internal.h"

TSLAB_INTERNAL void* tslab_large_alloc(tslab_t* a, tslab_tcache_t* tc, size_t size, size_t align, uint64_t era) {
  size_t granules = (size + TSLAB_GRANULE - 1) >> TSLAB_GRANULE_SHIFT;
  size_t align_granules = align > TSLAB_GRANULE ? align >> TSLAB_GRANULE_SHIFT : 1;
  tslab_run_t* r = tslab_heap_alloc(a, tc, granules, align_granules, true);
  if (!r) return NULL;
  TSLAB_RSTORE(r->gen, atomic_load_explicit(&a->gen_base[tslab_run_index(a, r)], memory_order_relaxed));
  TSLAB_RSTORE(r->capacity, (uint16_t)1);
  /* One slot, at the start: its recip stays 0, so tslab_slot_index gives
   * slot 0 for the start and refuses every other offset. */
  TSLAB_RSTORE(r->slot_bytes, 1u);
  atomic_store_explicit(&r->creator, tc, memory_order_relaxed);
  tslab_run_set_era(a, r, era);
  atomic_store_explicit(&r->large_state, TSLAB_LARGE_LIVE, memory_order_relaxed);
  uint32_t slot = (uint32_t)(era & a->ring_mask);
  tslab_heap_span_link(a, r, slot);
  size_t bytes = tslab_run_bytes(r);
  tslab_epoch_slot_t* es = &a->slots[slot];
  atomic_fetch_add_explicit(&es->large_allocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->large_bytes_alloc, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->slabs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->slab_bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->large_allocs, 1, memory_order_relaxed);
  TSLAB_COUNT_EVENT(a, tc, slabs_created, 1);
  atomic_fetch_add_explicit(&a->large_bytes_live, bytes, memory_order_relaxed);
  tslab_run_publish(a, r, TSLAB_RUN_LARGE);
  return r->start;
}

/* The party that won the span's LIVE -> FREED exchange counts it (then marks
 * it COUNTED), while the span is still on its slot's span list: an era's
 * open marks the era's listed spans with its label before it folds the
 * slot's counts, so a late free counted after an unlink could miss both
 * (7.5). `cross`: freed by another cache than the creator. `es`: the era's
 * slot, in an inflight bracket the caller opened (7.4) and this ends, or
 * NULL when the era has left the ring. */
static void span_count(tslab_t* a, tslab_run_t* r, bool cross, tslab_epoch_slot_t* es) {
  uint64_t era = atomic_load_explicit(&r->era, memory_order_relaxed);
  size_t bytes = tslab_run_bytes(r);
  if (cross) atomic_fetch_add_explicit(&a->large_xfrees, 1, memory_order_relaxed);
  if (es) {
    if (cross) atomic_fetch_add_explicit(&es->xfrees, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&es->large_frees, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&es->large_bytes_free, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&es->slabs, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&es->slab_bytes, bytes, memory_order_relaxed);
    tslab_era_count_exit(es);
  } else {
    tslab_era_count_left_ring(a, r, era, bytes, cross);
  }
  atomic_fetch_add_explicit(&a->large_frees, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&a->large_bytes_live, bytes, memory_order_relaxed);
  atomic_store_explicit(&r->large_state, TSLAB_LARGE_COUNTED, memory_order_relaxed);
}

/* Then it takes the span off the list and gives the run back. */
static void span_give_back(tslab_t* a, tslab_run_t* r) {
  uint64_t era = atomic_load_explicit(&r->era, memory_order_relaxed);
  tslab_heap_span_unlink(a, r, (uint32_t)(era & a->ring_mask));
  /* A span of an era still active may stay in the pool beyond its bound for
   * a while, as an empty slab does (decay, section 5): a program that frees
   * a buffer allocates the next one soon. */
  tslab_retire_era_t owner = tslab_retire_era(a, era);
  r->heap_next = NULL;
  size_t released = tslab_heap_retire_list(a, r, !tslab_era_active(a, era), &owner);
  if (released) tslab_era_count_released(a, era, released);
}

static void span_retire(tslab_t* a, tslab_run_t* r, bool cross, tslab_epoch_slot_t* es) {
  span_count(a, r, cross, es);
  span_give_back(a, r);
}

/* The era's slot, bracketed, for a span's count (NULL: the era left the ring). */
static tslab_epoch_slot_t* span_count_enter(tslab_t* a, const tslab_run_t* r) {
  return tslab_era_count_enter(a, atomic_load_explicit(&r->era, memory_order_relaxed));
}

/* Exactly one free of a span wins the LIVE -> FREED transition. Called in the
 * freer's fenced window (src/alloc.c). The count's bracket opens before the
 * exchange, as a run's free opens it before it acts (7.4): a free-all that
 * finds the span FREED waits for the count before it folds its ends. */
TSLAB_INTERNAL bool tslab_large_free(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* r) {
  tslab_epoch_slot_t* es = span_count_enter(a, r);
  uint32_t expected = TSLAB_LARGE_LIVE;
  if (!atomic_compare_exchange_strong_explicit(&r->large_state, &expected, TSLAB_LARGE_FREED, memory_order_acq_rel,
                                               memory_order_relaxed)) {
    if (es) tslab_era_count_exit(es);
    return false;
  }
  tslab_hook_point(TSLAB_HOOK_SPAN_FREED);
  span_retire(a, r, atomic_load_explicit(&r->creator, memory_order_relaxed) != tc, es);
  return true;
}

/* Free-all: every live span of the era ends (counted as a free of the span,
 * like any span free). Returns how many. */
TSLAB_INTERNAL uint64_t tslab_large_kill_era(tslab_t* a, uint32_t slot, uint64_t era) {
  tslab_run_t* won = NULL;
  uint64_t n = 0;
  /* The era is closing: a span linked after this look backs out of the era
   * (7.2), so an empty list needs no mutex. */
  if (!__atomic_load_n(&a->heap.spans[slot], __ATOMIC_ACQUIRE)) return 0;
  pthread_mutex_lock(&a->heap.mu);
  for (tslab_run_t* r = a->heap.spans[slot]; r; r = r->era_next) {
    /* A span found FREED (acquire): its freer's inflight bracket, opened
     * before the freer's exchange, is then seen by the free-all's wait
     * before its fold (7.3 step 5). */
    uint32_t expected = TSLAB_LARGE_LIVE;
    if (atomic_load_explicit(&r->era, memory_order_relaxed) == era &&
        atomic_compare_exchange_strong_explicit(&r->large_state, &expected, TSLAB_LARGE_FREED, memory_order_acq_rel,
                                                memory_order_acquire)) {
      r->heap_next = won;
      won = r;
      n++;
    }
  }
  pthread_mutex_unlock(&a->heap.mu);
  while (won) {
    tslab_run_t* r = won;
    won = r->heap_next;
    span_retire(a, r, false, span_count_enter(a, r));
  }
  return n;
}

/* fork child: spans a vanished thread left half-made or half-freed (7.6).
 * Called before the heap's repair, which gives runs that were being
 * formatted back to the heap: the span lists let go of those first. */
TSLAB_INTERNAL void tslab_large_fork_repair(tslab_t* a) {
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    for (tslab_run_t *r = a->heap.spans[slot], *next; r; r = next) {
      next = r->era_next;
      if (atomic_load(&r->kind) != TSLAB_RUN_LARGE) tslab_heap_span_unlink(a, r, slot);
    }
  }
  /* Freed spans not yet given back are finished after the walk: a release
   * may merge runs the walk has yet to step over. */
  uint64_t live = 0, bytes = 0;
  tslab_run_t* freed = NULL;
  for (size_t g = 0; g < a->heap.top;) {
    tslab_run_t* r = atomic_load(&a->map[g]);
    if (!r || r->start != a->base + (g << TSLAB_GRANULE_SHIFT) || r->granules == 0) break;
    g += r->granules;
    if (atomic_load(&r->kind) != TSLAB_RUN_LARGE) continue;
    if (atomic_load(&r->large_state) == TSLAB_LARGE_LIVE) {
      live++;
      bytes += tslab_run_bytes(r);
    } else {
      r->heap_next = freed;
      freed = r;
    }
  }
  while (freed) {
    tslab_run_t* r = freed;
    freed = r->heap_next;
    /* Still listed: its free has counted it (COUNTED) or done nothing but
     * the exchange (FREED). */
    uint32_t slot = (uint32_t)(atomic_load(&r->era) & a->ring_mask);
    if (!r->era_prev && a->heap.spans[slot] != r)
      tslab_heap_retire(a, r, false);
    else if (atomic_load(&r->large_state) == TSLAB_LARGE_FREED)
      span_retire(a, r, false, span_count_enter(a, r));
    else
      span_give_back(a, r);
  }
  /* The instance's span counts agree with the spans (the vanished thread's
   * own counts may have been half done). */
  atomic_store(&a->large_frees, atomic_load(&a->large_allocs) - live);
  atomic_store(&a->large_bytes_live, bytes);
}
