/* Statistics snapshots. Counters are exact: per-thread counters live in the
 * thread caches' bins and slot states (owner-only writes), counts of closed
 * eras in each cache's folded totals and in the era slots, counts of threads
 * without a cache in the instance. Readers read every free count of a scope
 * before any allocation count, so no snapshot shows a free without its
 * allocation, and take each cache's mutex only while they read that cache,
 * never a lock an epoch operation waits on for long (docs/ARCHITECTURE.md
 * section 9). */
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "internal.h"

static uint64_t ld(_Atomic uint64_t* p) { return atomic_load_explicit(p, memory_order_acquire); }

/* What is still live: in - out, never below zero. */
static uint64_t live_of(uint64_t in, uint64_t out) { return in > out ? in - out : 0; }

/* Counts per class, index TSLAB_CLASSES for blocks. */
typedef struct class_totals {
  uint64_t allocs[TSLAB_CLASSES + 1], frees[TSLAB_CLASSES + 1];
  uint64_t xfrees[TSLAB_CLASSES + 1], slow[TSLAB_CLASSES + 1];
  uint64_t bins_in_use;
} class_totals_t;

/* One cache's cumulative counts; `frees_pass` says which half this pass reads
 * (frees, or allocations and the rest). Counters are never moved between
 * places (section 9), so no lock is needed: bins and blocks are read under
 * their sequence counts. Every walk over a cache's runs is done inside a
 * non-owner window of the reader, so no descriptor it reaches is cleared or
 * formatted again under it (section 4). */
static void sum_cache(tslab_t* a, tslab_tcache_t* tc, bool frees_pass, class_totals_t* t) {
  for (uint32_t c = 0; c <= TSLAB_CLASSES; c++) {
    if (frees_pass) {
      t->frees[c] += ld(&tc->late[c].frees);
    } else {
      t->xfrees[c] += ld(&tc->late[c].xfrees);
    }
  }
  uint64_t classes[2] = {ld(&tc->ever_classes[0]), ld(&tc->ever_classes[1])};
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    tslab_slot_cache_t* sc = &tc->slots[slot];
    if (!__atomic_load_n(&sc->ever, __ATOMIC_ACQUIRE)) continue;
    for (uint32_t word = 0; word < 2; word++) {
      for (uint64_t m = classes[word]; m; m &= m - 1) {
        uint32_t c = word * 64 + (uint32_t)__builtin_ctzll(m);
        tslab_bin_t* b = tslab_bin_at(a, tc, slot, c);
        uint64_t al, fr;
        tslab_bin_read(b, &al, &fr);
        if (frees_pass) {
          t->frees[c] += fr;
        } else {
          t->allocs[c] += al;
          t->xfrees[c] += ld(&b->xfrees);
          t->slow[c] += ld(&b->slow);
        }
      }
    }
    if (!frees_pass) t->bins_in_use += (uint64_t)tslab_popcount(ld(&sc->classes[0]) | 0) +
                                       (uint64_t)tslab_popcount(ld(&sc->classes[1]));
    uint64_t al, fr, ab, fb;
    tslab_slot_blocks_read(sc, &al, &fr, &ab, &fb);
    if (frees_pass) {
      t->frees[TSLAB_CLASSES] += fr;
    } else {
      t->allocs[TSLAB_CLASSES] += al;
      t->xfrees[TSLAB_CLASSES] += ld(&sc->bxfrees);
      t->slow[TSLAB_CLASSES] += ld(&sc->bslow);
    }
  }
}

/* Per-class totals over every cache and the instance: all frees, then all
 * allocations (section 9). */
static void sum_classes(tslab_t* a, class_totals_t* t) {
  tslab_tcache_t* self = tslab_tcache_find(a);
  memset(t, 0, sizeof *t);
  for (int pass = 0; pass < 2; pass++) {
    bool frees_pass = pass == 0;
    for (uint32_t c = 0; c <= TSLAB_CLASSES; c++) {
      if (frees_pass) {
        t->frees[c] += ld(&a->ext[c].frees);
      } else {
        t->allocs[c] += ld(&a->ext[c].allocs);
        t->xfrees[c] += ld(&a->ext[c].xfrees);
        t->slow[c] += ld(&a->ext[c].slow);
      }
    }
    for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
      tslab_window_enter(a, self);
      sum_cache(a, tc, frees_pass, t);
      tslab_window_exit(a, self);
    }
  }
}

/* Slabs of a class in use as statistics report them: a sum that a read
 * racing with slabs coming and going took below zero reads as none. */
static uint64_t class_slabs_read(tslab_t* a, uint32_t cls) {
  uint64_t n = tslab_class_slabs(a, cls);
  return (int64_t)n < 0 ? 0 : n;
}

TSLAB_API uint32_t tslab_class_count(tslab_t* a) { return a ? TSLAB_CLASSES : 0; }

/* Add one cache's (or the instance's) event counts to the totals. */
static void events_add(tslab_stats_global_t* out, tslab_events_t* e) {
  out->epochs_opened_total += ld(&e->epochs_opened);
  out->epochs_closed_total += ld(&e->epochs_closed);
  out->epochs_freed_all_total += ld(&e->epochs_freed_all);
  out->objects_ended_total += ld(&e->objects_ended);
  out->blocks_created_total += ld(&e->blocks_created);
  out->blocks_reused_total += ld(&e->blocks_reused);
  out->slabs_created_total += ld(&e->slabs_created);
}

TSLAB_API int tslab_stats_global(tslab_t* a, tslab_stats_global_t* out) {
  if (!a || !out) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  memset(out, 0, sizeof *out);
  /* Spans' frees before their allocations, like everything else. */
  uint64_t large_frees = ld(&a->large_frees), large_bytes_live = ld(&a->large_bytes_live);
  class_totals_t t;
  sum_classes(a, &t);
  uint64_t large_allocs = ld(&a->large_allocs);
  uint64_t large_live = live_of(large_allocs, large_frees);
  for (uint32_t c = 0; c <= TSLAB_CLASSES; c++) {
    out->allocations_total += t.allocs[c];
    out->frees_total += t.frees[c];
    out->cross_thread_frees_total += t.xfrees[c];
    out->slow_path_total += t.slow[c];
    out->live_objects += live_of(t.allocs[c], t.frees[c]);
    if (c < TSLAB_CLASSES) {
      out->live_bytes += live_of(t.allocs[c], t.frees[c]) * tslab_classes[c].size;
      out->slabs_in_use += class_slabs_read(a, c);
    }
  }
  out->allocations_total += large_allocs;
  out->frees_total += large_frees;
  out->cross_thread_frees_total += ld(&a->large_xfrees);
  out->live_objects += large_live;
  out->live_bytes += large_bytes_live;
  out->slabs_in_use += large_live;

  pthread_mutex_lock(&a->heap.mu);
  for (tslab_run_t* r = a->heap.lru_head; r; r = r->lru_next) out->slabs_empty++;
  uint64_t clean = 0;
  for (uint32_t b = 0; b < TSLAB_HEAP_BINS; b++)
    for (tslab_run_t* r = a->heap.clean[b]; r; r = r->heap_next) clean += r->granules;
  /* Above the top of the used range everything committed was released. */
  out->slabs_released = clean + (a->heap.committed >> TSLAB_GRANULE_SHIFT) - a->heap.top;
  out->committed_bytes = a->heap.committed + a->heap.meta_committed;
  out->reserve_bytes = a->heap.dirty_bytes < a->config.pool_resident_max ? a->heap.dirty_bytes : a->config.pool_resident_max;
  out->decay_bytes = a->heap.dirty_bytes - out->reserve_bytes;
  pthread_mutex_unlock(&a->heap.mu);
  /* Blocks: the caches' bumping and full blocks, and the detached ones;
   * their live bytes are read off their bitmaps. */
  events_add(out, &a->events);
  tslab_tcache_t* self = tslab_tcache_find(a);
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    events_add(out, &tc->events);
    out->reserve_bytes += tslab_block_reserve_bytes(tc);
    tslab_window_enter(a, self);
    for (uint32_t slot = 0; slot < a->ring_size; slot++) {
      tslab_slot_cache_t* sc = &tc->slots[slot];
      if (!ld(&sc->era)) continue;
      tslab_run_t* blk = __atomic_load_n(&sc->blk, __ATOMIC_ACQUIRE);
      if (blk) {
        out->blocks_in_use++;
        out->live_bytes += tslab_block_live_bytes(blk, TSLAB_RLOAD(blk->capacity));
      }
      for (tslab_run_t* b = __atomic_load_n(&sc->full, __ATOMIC_ACQUIRE); b; b = __atomic_load_n(&b->bin_next, __ATOMIC_ACQUIRE)) {
        out->blocks_in_use++;
        out->live_bytes += tslab_block_live_bytes(b, TSLAB_RLOAD(b->bumped));
      }
    }
    tslab_window_exit(a, self);
  }
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    tslab_epoch_slot_t* es = &a->slots[slot];
    tslab_spin_lock(&es->mu);
    for (tslab_run_t* r = es->detached; r; r = r->era_next) {
      if (atomic_load_explicit(&r->kind, memory_order_relaxed) != TSLAB_RUN_BLOCK) continue;
      out->blocks_in_use++;
      out->live_bytes += tslab_block_live_bytes(r, TSLAB_RLOAD(r->bumped));
    }
    tslab_spin_unlock(&es->mu);
  }

  out->rss_bytes = tslab_process_rss();
  out->reserved_bytes = a->reserve + a->meta_reserve;
  out->resident_estimate_bytes = ld(&a->resident_bytes);
  out->metadata_bytes = ld(&a->meta_bytes) + t.bins_in_use * sizeof(tslab_bin_t) +
                        ld(&a->ncaches) * (sizeof(tslab_tcache_t) + a->ring_size * sizeof(tslab_slot_cache_t));
  out->slabs_recycled_total = ld(&a->slabs_recycled);
  out->release_calls_total = ld(&a->release_calls);
  out->release_bytes_total = ld(&a->release_bytes);
  out->release_failures_total = ld(&a->release_failures);
  out->invalid_frees_total = ld(&a->invalid_frees);
  out->alloc_fail_closed_total = ld(&a->fail_closed);
  out->alloc_fail_stale_total = ld(&a->fail_stale);
  out->alloc_fail_unknown_total = ld(&a->fail_unknown);
  out->alloc_fail_size_total = ld(&a->fail_size);
  out->alloc_fail_oom_total = ld(&a->fail_oom);
  out->alloc_failures_total = out->alloc_fail_closed_total + out->alloc_fail_stale_total +
                              out->alloc_fail_unknown_total + out->alloc_fail_size_total +
                              out->alloc_fail_oom_total;
  out->epochs_forced_close_total = ld(&a->epochs_forced);
  out->threads_active = ld(&a->nattached);
  out->thread_caches = ld(&a->ncaches);
  out->current_epoch = ld(&a->current);
  out->epoch_ring_size = a->ring_size;
  out->class_count = TSLAB_CLASSES;
  return TSLAB_OK;
}

static void fill_class(const class_totals_t* t, tslab_t* a, uint32_t index, tslab_stats_class_t* out) {
  const tslab_class_info_t* ci = &tslab_classes[index];
  memset(out, 0, sizeof *out);
  out->index = index;
  out->object_size = ci->size;
  out->slab_bytes = ci->granules << TSLAB_GRANULE_SHIFT;
  out->objects_per_slab = ci->capacity;
  out->allocations_total = t->allocs[index];
  out->frees_total = t->frees[index];
  out->cross_thread_frees_total = t->xfrees[index];
  out->slow_path_total = t->slow[index];
  out->live_objects = live_of(t->allocs[index], t->frees[index]);
  out->slabs = class_slabs_read(a, index);
}

TSLAB_API int tslab_stats_class(tslab_t* a, uint32_t index, tslab_stats_class_t* out) {
  if (!a || !out || index >= TSLAB_CLASSES) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  class_totals_t t;
  sum_classes(a, &t);
  fill_class(&t, a, index, out);
  return TSLAB_OK;
}

TSLAB_API size_t tslab_stats_classes(tslab_t* a, tslab_stats_class_t* out, size_t max) {
  if (!a || (!out && max)) return 0;
  class_totals_t t;
  sum_classes(a, &t);
  size_t n = max < TSLAB_CLASSES ? max : TSLAB_CLASSES;
  for (size_t i = 0; i < n; i++) fill_class(&t, a, (uint32_t)i, &out[i]);
  return n;
}

/* ---- epochs ---- */

typedef struct era_counts {
  uint64_t allocs, frees, xfrees, slow, alloc_bytes, free_bytes, live_bytes_blocks, held_block_bytes, empty;
} era_counts_t;

/* The counts of `era` held by caches (current less base, section 9), and the
 * live bytes of their blocks. */
static void era_cache_counts(tslab_t* a, uint32_t slot, uint64_t era, era_counts_t* c) {
  tslab_tcache_t* self = tslab_tcache_find(a);
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    tslab_slot_cache_t* sc = &tc->slots[slot];
    if (ld(&sc->era) != era) continue;
    tslab_window_enter(a, self);
    tslab_fold_t sum = {0};
    tslab_tcache_era_counts(a, tc, slot, &sum);
    c->allocs += sum.allocs;
    c->frees += sum.frees;
    c->xfrees += sum.xfrees;
    c->slow += sum.slow;
    c->alloc_bytes += sum.alloc_bytes;
    c->free_bytes += sum.free_bytes;
    for (uint32_t word = 0; word < 2; word++) {
      for (uint64_t m = ld(&sc->classes[word]); m; m &= m - 1) {
        tslab_bin_t* b = tslab_bin_at(a, tc, slot, word * 64 + (uint32_t)__builtin_ctzll(m));
        tslab_run_t* cur = __atomic_load_n(&b->cur, __ATOMIC_ACQUIRE);
        c->empty += cur && tslab_slab_used(cur) == tslab_bin_aside(b);
      }
    }
    /* The live bytes of the blocks the cache holds are read off their
     * bitmaps; the bytes they handed out, which the counts include, are
     * set against them (the counts have their frees only once a block left
     * the cache). */
    tslab_run_t* blk = __atomic_load_n(&sc->blk, __ATOMIC_ACQUIRE);
    if (blk) {
      uint8_t* top = __atomic_load_n(&sc->top, __ATOMIC_RELAXED);
      uint8_t* start = TSLAB_RLOAD(blk->start);
      if (top > start) c->held_block_bytes += (uint64_t)(top - start);
      c->live_bytes_blocks += tslab_block_live_bytes(blk, TSLAB_RLOAD(blk->capacity));
    }
    for (tslab_run_t* b = __atomic_load_n(&sc->full, __ATOMIC_ACQUIRE); b; b = __atomic_load_n(&b->bin_next, __ATOMIC_ACQUIRE)) {
      uint32_t bumped = TSLAB_RLOAD(b->bumped);
      c->held_block_bytes += (uint64_t)bumped << TSLAB_UNIT_SHIFT;
      c->live_bytes_blocks += tslab_block_live_bytes(b, bumped);
    }
    tslab_window_exit(a, self);
  }
}

/* Fill the stats of the era held by ring slot `slot`, and its cross-thread
 * frees and slow paths (for label attribution). Retries while a closer
 * folds the era's counts from the caches into its slot. False when the slot
 * no longer held era `expect` (0: any era) or was being claimed by a newer
 * one (EMPTY: an advance that has not reset the slot's counts yet, which
 * are still the old era's). */
static bool fill_epoch(tslab_t* a, uint32_t slot, uint64_t expect, tslab_stats_epoch_t* out, uint64_t* xfrees,
                       uint64_t* slow) {
  tslab_epoch_slot_t* es = &a->slots[slot];
  era_counts_t c;
  uint64_t st;
  for (unsigned tries = 0;; tries++) {
    uint64_t seq = ld(&es->stat_seq);
    st = atomic_load(&a->ring[slot].state);
    uint64_t era = TSLAB_STATE_ERA(st);
    memset(&c, 0, sizeof c);
    /* Frees first (section 9): the slot's own, then the caches'. */
    c.frees = ld(&es->frees) + ld(&es->large_frees) + ld(&es->f_frees);
    c.free_bytes = ld(&es->free_bytes) + ld(&es->large_bytes_free) + ld(&es->f_free_bytes);
    era_cache_counts(a, slot, era, &c);
    c.allocs += ld(&es->allocs) + ld(&es->large_allocs) + ld(&es->f_allocs);
    c.alloc_bytes += ld(&es->alloc_bytes) + ld(&es->large_bytes_alloc) + ld(&es->f_alloc_bytes);
    c.xfrees += ld(&es->xfrees) + ld(&es->f_xfrees);
    c.slow += ld(&es->slow) + ld(&es->f_slow);
    atomic_thread_fence(memory_order_acquire);
    if (!(seq & 1) && ld(&es->stat_seq) == seq) break;
    if (tries > 64) sched_yield();
  }
  uint64_t era = TSLAB_STATE_ERA(st);
  memset(out, 0, sizeof *out);
  out->era = era;
  out->slot = slot;
  uint32_t state = TSLAB_STATE_OF(st);
  out->state = state == TSLAB_EPOCH_CLOSED ? TSLAB_EPOCH_CLOSING : (tslab_epoch_state_t)state;
  tslab_spin_lock(&es->mu);
  memcpy(out->label, es->label, TSLAB_LABEL_MAX);
  out->opened_ns = TSLAB_RLOAD(es->opened_ns);
  out->refcount = es->refcount;
  tslab_spin_unlock(&es->mu);
  uint64_t now = tslab_coarse_ns();
  out->age_ns = now > out->opened_ns ? now - out->opened_ns : 0;
  if (c.allocs < c.frees) c.allocs = c.frees;
  out->allocations_total = c.allocs;
  out->frees_total = c.frees;
  out->live_objects = live_of(c.allocs, c.frees);
  out->live_bytes = live_of(c.alloc_bytes, c.free_bytes + c.held_block_bytes) + c.live_bytes_blocks;
  out->slabs = ld(&es->slabs);
  out->empty_slabs = c.empty;
  out->rss_estimate_bytes = ld(&es->slab_bytes);
  out->rss_before_close_bytes = TSLAB_RLOAD(es->rss_before_close);
  out->rss_after_close_bytes = TSLAB_RLOAD(es->rss_after_close);
  out->released_at_close_bytes = TSLAB_RLOAD(es->released_at_close);
  out->released_total_bytes = ld(&es->released_bytes);
  out->close_ns = TSLAB_RLOAD(es->close_ns);
  out->forced_close = TSLAB_RLOAD(es->forced);
  if (xfrees) *xfrees = c.xfrees;
  if (slow) *slow = c.slow;
  return era != 0 && state != TSLAB_EPOCH_EMPTY && (expect == 0 || era == expect);
}

TSLAB_API int tslab_stats_epoch(tslab_t* a, tslab_epoch_t e, tslab_stats_epoch_t* out) {
  if (!a || !out) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  int st = tslab_epoch_reject_status(a, e);
  if (st == TSLAB_ERR_EPOCH_CLOSED) st = TSLAB_OK;
  if (st != TSLAB_OK) return tslab_fail(st);
  /* The slot moved on to a newer era while we read it. */
  if (!fill_epoch(a, (uint32_t)(e & a->ring_mask), e, out, NULL, NULL)) return tslab_fail(TSLAB_ERR_EPOCH_STALE);
  return TSLAB_OK;
}

TSLAB_API size_t tslab_stats_epochs(tslab_t* a, tslab_stats_epoch_t* out, size_t max) {
  if (!a || (!out && max)) return 0;
  /* Slots that hold an era, oldest era first (eras need not be contiguous). */
  uint32_t order[TSLAB_RING_MAX];
  uint64_t eras[TSLAB_RING_MAX];
  size_t held = 0;
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    uint64_t st = atomic_load(&a->ring[slot].state);
    uint64_t era = TSLAB_STATE_ERA(st);
    if (era == 0 || TSLAB_STATE_OF(st) == TSLAB_EPOCH_EMPTY) continue;
    size_t i = held++;
    for (; i > 0 && eras[i - 1] > era; i--) {
      eras[i] = eras[i - 1];
      order[i] = order[i - 1];
    }
    eras[i] = era;
    order[i] = slot;
  }
  tslab_hook_point(TSLAB_HOOK_EPOCHS_LISTED);
  /* A slot that moved on meanwhile is left out: its counts are the old
   * era's, under the new one's number. */
  size_t n = 0;
  for (size_t i = 0; i < held && n < max; i++) n += fill_epoch(a, order[i], eras[i], &out[n], NULL, NULL);
  return n;
}

/* A cache's cumulative counts (section 9). */
TSLAB_INTERNAL void tslab_tcache_sum(tslab_t* a, tslab_tcache_t* tc, tslab_stats_thread_t* out) {
  class_totals_t t;
  memset(&t, 0, sizeof t);
  sum_cache(a, tc, true, &t);
  sum_cache(a, tc, false, &t);
  memset(out, 0, sizeof *out);
  for (uint32_t c = 0; c <= TSLAB_CLASSES; c++) {
    out->allocations_total += t.allocs[c];
    out->frees_total += t.frees[c];
    out->cross_thread_frees_total += t.xfrees[c];
    out->slow_path_total += t.slow[c];
  }
  /* The lists are the caller's own (its thread's cache, or one it adopts):
   * walked in the cache's busy window, a slot's only while its era is
   * ACTIVE, since a closer detaches them after the windows that saw the era
   * ACTIVE and not before (7.3). */
  tslab_busy_enter(tc);
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    tslab_slot_cache_t* sc = &tc->slots[slot];
    uint64_t era = ld(&sc->era);
    if (!era || !tslab_era_active(a, era)) continue;
    out->cached_slabs += (__atomic_load_n(&sc->blk, __ATOMIC_RELAXED) != NULL);
    for (tslab_run_t* b = __atomic_load_n(&sc->full, __ATOMIC_RELAXED); b; b = __atomic_load_n(&b->bin_next, __ATOMIC_ACQUIRE))
      out->cached_slabs++;
    for (uint32_t word = 0; word < 2; word++) {
      for (uint64_t m = ld(&sc->classes[word]); m; m &= m - 1) {
        tslab_bin_t* b = tslab_bin_at(a, tc, slot, word * 64 + (uint32_t)__builtin_ctzll(m));
        out->cached_slabs += (__atomic_load_n(&b->cur, __ATOMIC_RELAXED) != NULL);
        for (tslab_run_t* s = __atomic_load_n(&b->ready, __ATOMIC_RELAXED); s; s = __atomic_load_n(&s->bin_next, __ATOMIC_RELAXED))
          out->cached_slabs++;
        for (tslab_run_t* s = b->parked; s; s = s->bin_next) out->cached_slabs++;
      }
    }
  }
  tslab_busy_exit(tc);
}

TSLAB_API int tslab_stats_thread(tslab_t* a, tslab_stats_thread_t* out) {
  if (!a || !out) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  memset(out, 0, sizeof *out);
  tslab_tcache_t* tc = tslab_tcache_get(a);
  if (!tc) return TSLAB_OK;
  tslab_tcache_sum(a, tc, out);
  out->allocations_total -= tc->adopted.allocations_total;
  out->frees_total -= tc->adopted.frees_total;
  out->cross_thread_frees_total -= tc->adopted.cross_thread_frees_total;
  out->slow_path_total -= tc->adopted.slow_path_total;
  return TSLAB_OK;
}

/* ---- sampling ---- */

TSLAB_API int tslab_sampling_set(tslab_t* a, uint32_t one_in) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  atomic_store(&a->sample_one_in, one_in);
  return TSLAB_OK;
}

TSLAB_INTERNAL void tslab_sample_clocks(uint64_t* wall, uint64_t* cpu) {
  *wall = tslab_now_ns();
  *cpu = tslab_os_thread_cpu_ns();
}

TSLAB_INTERNAL void tslab_sample_end(tslab_t* a, uint64_t wall, uint64_t cpu) {
  uint64_t w = tslab_now_ns() - wall;
  uint64_t c = tslab_os_thread_cpu_ns() - cpu;
  if (c > w) c = w;
  atomic_fetch_add_explicit(&a->samples, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->sample_wall, w, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->sample_cpu, c, memory_order_relaxed);
  uint64_t max = atomic_load_explicit(&a->sample_wall_max, memory_order_relaxed);
  while (w > max && !atomic_compare_exchange_weak(&a->sample_wall_max, &max, w)) {
  }
}

TSLAB_API int tslab_stats_sampling(tslab_t* a, tslab_stats_sampling_t* out) {
  if (!a || !out) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  out->one_in = atomic_load(&a->sample_one_in);
  out->samples = ld(&a->samples);
  out->wall_ns_total = ld(&a->sample_wall);
  out->cpu_ns_total = ld(&a->sample_cpu);
  out->wall_ns_max = ld(&a->sample_wall_max);
  out->wait_ns_total = out->wall_ns_total - out->cpu_ns_total;
  return TSLAB_OK;
}

/* ---- labels and leaks ---- */

TSLAB_API size_t tslab_stats_labels(tslab_t* a, tslab_stats_label_t* out, size_t max) {
  if (!a || (!out && max)) return 0;
  /* label_mu keeps advance from moving an era's counts into its label while
   * we add the label's totals to its open eras' counts. */
  pthread_mutex_lock(&a->label_mu);
  uint32_t nlabels = atomic_load(&a->nlabels);
  size_t n = 0;
  for (uint32_t i = 0; i <= TSLAB_LABELS_MAX && n < max; i++) {
    if (i == nlabels && i < TSLAB_LABELS_MAX) i = TSLAB_LABELS_MAX;
    tslab_label_entry_t* l = &a->labels[i];
    tslab_stats_label_t* o = &out[n];
    memset(o, 0, sizeof *o);
    memcpy(o->label, l->name, TSLAB_LABEL_MAX);
    o->epochs_total = ld(&l->epochs);
    o->allocations_total = ld(&l->allocs);
    o->frees_total = ld(&l->frees);
    o->cross_thread_frees_total = ld(&l->xfrees);
    o->slow_path_total = ld(&l->slow);
    uint64_t abytes = ld(&l->alloc_bytes), fbytes = ld(&l->free_bytes), live_extra = 0;
    for (uint32_t slot = 0; slot < a->ring_size; slot++) {
      tslab_epoch_slot_t* es = &a->slots[slot];
      tslab_spin_lock(&es->mu);
      bool mine = es->label_id == (int)i;
      tslab_spin_unlock(&es->mu);
      uint64_t st = atomic_load(&a->ring[slot].state);
      if (!mine || TSLAB_STATE_ERA(st) == 0) continue;
      /* Whatever era the slot names now, its counts are the labelled era's:
       * a slot an advance has claimed (EMPTY) keeps them until the open
       * moves them into the label, which waits for label_mu. */
      tslab_stats_epoch_t e;
      uint64_t xf, sl;
      fill_epoch(a, slot, 0, &e, &xf, &sl);
      o->epochs_total++;
      o->allocations_total += e.allocations_total;
      o->frees_total += e.frees_total;
      o->cross_thread_frees_total += xf;
      o->slow_path_total += sl;
      live_extra += e.live_bytes;
      if (e.state == TSLAB_EPOCH_ACTIVE) o->open_epochs++;
    }
    o->live_bytes = live_of(abytes, fbytes) + live_extra;
    if (i < TSLAB_LABELS_MAX || o->epochs_total) n++;
  }
  pthread_mutex_unlock(&a->label_mu);
  return n;
}

TSLAB_API size_t tslab_leak_check(tslab_t* a, uint64_t older_than_ns, tslab_leak_t* out, size_t max) {
  if (!a || (!out && max)) return 0;
  tslab_stats_epoch_t eps[TSLAB_RING_MAX];
  size_t n = tslab_stats_epochs(a, eps, TSLAB_RING_MAX);
  size_t k = 0;
  for (size_t i = 0; i < n && k < max; i++) {
    tslab_stats_epoch_t* e = &eps[i];
    bool old = e->age_ns >= older_than_ns;
    bool too_old = old && e->state == TSLAB_EPOCH_ACTIVE;
    bool stuck = old && e->refcount > 0;
    if (!too_old && !stuck) continue;
    tslab_leak_t* l = &out[k++];
    memset(l, 0, sizeof *l);
    l->era = e->era;
    memcpy(l->label, e->label, TSLAB_LABEL_MAX);
    l->age_ns = e->age_ns;
    l->refcount = e->refcount;
    l->live_bytes = e->live_bytes;
    l->too_old = too_old;
    l->refcount_stuck = stuck;
  }
  return k;
}
