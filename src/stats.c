/* Statistics snapshots. Counters are exact: per-thread counters live in the
 * thread caches' bins (owner-only writes), counts of closed eras and of
 * threads without a cache live in atomics of the instance and the ring.
 * Snapshots sum them; at quiescence the sums are exact. See section 8 of
 * docs/ARCHITECTURE.md. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static uint64_t ld(_Atomic uint64_t* p) { return atomic_load_explicit(p, memory_order_relaxed); }

/* What is still live: in - out. Counts summed over threads are read one
 * after another, so a free counted in one thread's bin may be newer than
 * the allocation count read from another's: never wrap below zero. */
static uint64_t live_of(uint64_t in, uint64_t out) { return in > out ? in - out : 0; }

typedef struct class_totals {
  uint64_t allocs[TSLAB_CLASSES], frees[TSLAB_CLASSES], xfrees[TSLAB_CLASSES], slow[TSLAB_CLASSES];
  uint64_t bins_in_use; /* bins counting for an era */
} class_totals_t;

/* Per-class totals over every cache and the instance. The registry mutex
 * keeps closers out, so no count is in flight between a bin and the
 * instance's totals: sums never go backwards. */
static void sum_classes(tslab_t* a, class_totals_t* t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_lock(&a->reg_mu);
  for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
    t->allocs[c] = ld(&a->ext_allocs[c]);
    t->frees[c] = ld(&a->ext_frees[c]);
    t->xfrees[c] = ld(&a->ext_xfrees[c]);
    t->slow[c] = ld(&a->ext_slow[c]);
  }
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next) {
    for (uint32_t slot = 0; slot < a->ring_size; slot++) {
      for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
        tslab_bin_t* b = tslab_bin_at(a, tc, slot, c);
        uint64_t al, fr;
        tslab_bin_read(b, &al, &fr);
        t->allocs[c] += al;
        t->frees[c] += fr;
        t->xfrees[c] += ld(&b->xfrees);
        t->slow[c] += ld(&b->slow);
        t->bins_in_use += ld(&b->era) != 0;
      }
    }
  }
  pthread_mutex_unlock(&a->reg_mu);
}

TSLAB_API uint32_t tslab_class_count(tslab_t* a) { return a ? TSLAB_CLASSES : 0; }

TSLAB_API int tslab_stats_global(tslab_t* a, tslab_stats_global_t* out) {
  if (!a || !out) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  memset(out, 0, sizeof *out);
  class_totals_t t;
  sum_classes(a, &t);
  uint64_t large_live = ld(&a->large_allocs) - ld(&a->large_frees);
  for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
    out->allocations_total += t.allocs[c];
    out->frees_total += t.frees[c];
    out->cross_thread_frees_total += t.xfrees[c];
    out->slow_path_total += t.slow[c];
    out->live_objects += live_of(t.allocs[c], t.frees[c]);
    out->live_bytes += live_of(t.allocs[c], t.frees[c]) * tslab_classes[c].size;
    out->slabs_in_use += ld(&a->cls_slabs[c]);
  }
  out->allocations_total += ld(&a->large_allocs);
  out->frees_total += ld(&a->large_frees);
  out->cross_thread_frees_total += ld(&a->large_xfrees);
  out->live_objects += large_live;
  out->live_bytes += ld(&a->large_bytes_live);
  out->slabs_in_use += large_live;

  pthread_mutex_lock(&a->heap.mu);
  out->slabs_empty = ld(&a->spare_slabs);
  for (tslab_run_t* r = a->heap.lru_head; r; r = r->lru_next) out->slabs_empty++;
  uint64_t clean = 0;
  for (uint32_t b = 0; b < TSLAB_HEAP_BINS; b++)
    for (tslab_run_t* r = a->heap.clean[b]; r; r = r->heap_next) clean += r->granules;
  /* Above the top of the used range everything committed was released. */
  out->slabs_released = clean + (a->heap.committed >> TSLAB_GRANULE_SHIFT) - a->heap.top;
  out->committed_bytes = a->heap.committed + a->heap.meta_committed;
  pthread_mutex_unlock(&a->heap.mu);

  out->rss_bytes = tslab_process_rss();
  out->reserved_bytes = a->reserve + a->meta_reserve;
  out->resident_estimate_bytes = ld(&a->resident_bytes);
  out->metadata_bytes = ld(&a->meta_bytes) + t.bins_in_use * sizeof(tslab_bin_t) +
                        ld(&a->ncaches) * sizeof(tslab_tcache_t);
  out->slabs_created_total = ld(&a->slabs_created);
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
  out->epochs_opened_total = ld(&a->epochs_opened);
  out->epochs_closed_total = ld(&a->epochs_closed);
  out->epochs_forced_close_total = ld(&a->epochs_forced);
  out->threads_active = ld(&a->nattached);
  out->thread_caches = ld(&a->ncaches);
  out->current_epoch = ld(&a->current);
  out->epoch_ring_size = a->ring_size;
  out->class_count = TSLAB_CLASSES;
  return TSLAB_OK;
}

TSLAB_API int tslab_stats_class(tslab_t* a, uint32_t index, tslab_stats_class_t* out) {
  if (!a || !out || index >= TSLAB_CLASSES) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  class_totals_t t;
  sum_classes(a, &t);
  const tslab_class_info_t* ci = &tslab_classes[index];
  memset(out, 0, sizeof *out);
  out->index = index;
  out->object_size = ci->size;
  out->slab_bytes = ci->granules << TSLAB_GRANULE_SHIFT;
  out->objects_per_slab = ci->capacity;
  out->allocations_total = t.allocs[index];
  out->frees_total = t.frees[index];
  out->cross_thread_frees_total = t.xfrees[index];
  out->slow_path_total = t.slow[index];
  out->live_objects = live_of(t.allocs[index], t.frees[index]);
  out->slabs = ld(&a->cls_slabs[index]);
  return TSLAB_OK;
}

/* ---- epochs ---- */

/* Fill the stats of the era held by ring slot `slot`, and its cross-thread
 * frees and slow paths (for label attribution). Epoch mutex held. */
static void fill_epoch(tslab_t* a, uint32_t slot, tslab_stats_epoch_t* out, uint64_t* xfrees, uint64_t* slow) {
  tslab_epoch_slot_t* es = &a->ring[slot];
  uint64_t st = atomic_load(&es->state);
  uint64_t era = TSLAB_STATE_ERA(st);
  memset(out, 0, sizeof *out);
  out->era = era;
  out->slot = slot;
  out->state = (tslab_epoch_state_t)TSLAB_STATE_OF(st);
  memcpy(out->label, es->label, TSLAB_LABEL_MAX);
  out->opened_ns = es->opened_ns;
  uint64_t now = tslab_now_ns();
  out->age_ns = now > es->opened_ns ? now - es->opened_ns : 0;
  out->refcount = atomic_load(&es->refcount);
  uint64_t allocs = ld(&es->allocs) + ld(&es->large_allocs);
  uint64_t frees = ld(&es->frees) + ld(&es->large_frees);
  uint64_t abytes = ld(&es->alloc_bytes) + ld(&es->large_bytes_alloc);
  uint64_t fbytes = ld(&es->free_bytes) + ld(&es->large_bytes_free);
  uint64_t xf = ld(&es->xfrees), sl = ld(&es->slow);
  pthread_mutex_lock(&a->reg_mu);
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next) {
    for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
      tslab_bin_t* b = tslab_bin_at(a, tc, slot, c);
      if (atomic_load_explicit(&b->era, memory_order_relaxed) != era) continue;
      uint64_t al, fr;
      tslab_bin_read(b, &al, &fr);
      xf += ld(&b->xfrees);
      sl += ld(&b->slow);
      allocs += al;
      frees += fr;
      abytes += al * tslab_classes[c].size;
      fbytes += fr * tslab_classes[c].size;
    }
  }
  pthread_mutex_unlock(&a->reg_mu);
  out->allocations_total = allocs;
  out->frees_total = frees;
  out->live_objects = live_of(allocs, frees);
  out->live_bytes = live_of(abytes, fbytes);
  out->slabs = ld(&es->slabs);
  out->empty_slabs = ld(&es->empty_runs);
  out->rss_estimate_bytes = ld(&es->slab_bytes) + ld(&es->empty_bytes);
  out->rss_before_close_bytes = es->rss_before_close;
  out->rss_after_close_bytes = es->rss_after_close;
  out->released_at_close_bytes = es->released_at_close;
  out->released_total_bytes = ld(&es->released_bytes);
  out->close_ns = es->close_ns;
  out->forced_close = es->forced;
  if (xfrees) *xfrees = xf;
  if (slow) *slow = sl;
}

TSLAB_API int tslab_stats_epoch(tslab_t* a, tslab_epoch_t e, tslab_stats_epoch_t* out) {
  if (!a || !out) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_mutex_lock(&a->epoch_mu);
  int st = tslab_epoch_reject_status(a, e);
  if (st == TSLAB_ERR_EPOCH_CLOSED) st = TSLAB_OK;
  if (st == TSLAB_OK) fill_epoch(a, (uint32_t)(e & a->ring_mask), out, NULL, NULL);
  pthread_mutex_unlock(&a->epoch_mu);
  return tslab_fail(st);
}

TSLAB_API size_t tslab_stats_epochs(tslab_t* a, tslab_stats_epoch_t* out, size_t max) {
  if (!a || (!out && max)) return 0;
  /* Slots that hold an era, oldest era first (eras need not be contiguous). */
  uint32_t order[TSLAB_RING_MAX];
  uint64_t eras[TSLAB_RING_MAX];
  size_t held = 0;
  pthread_mutex_lock(&a->epoch_mu);
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    uint64_t era = TSLAB_STATE_ERA(atomic_load(&a->ring[slot].state));
    if (era == 0) continue;
    size_t i = held++;
    for (; i > 0 && eras[i - 1] > era; i--) {
      eras[i] = eras[i - 1];
      order[i] = order[i - 1];
    }
    eras[i] = era;
    order[i] = slot;
  }
  size_t n = held < max ? held : max;
  for (size_t i = 0; i < n; i++) fill_epoch(a, order[i], &out[i], NULL, NULL);
  pthread_mutex_unlock(&a->epoch_mu);
  return n;
}

TSLAB_API int tslab_stats_thread(tslab_t* a, tslab_stats_thread_t* out) {
  if (!a || !out) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  memset(out, 0, sizeof *out);
  tslab_tcache_t* tc = tslab_tcache_get(a);
  if (!tc) return TSLAB_OK;
  pthread_mutex_lock(&a->reg_mu); /* closers fold this cache's bins under it */
  for (uint32_t i = 0; i < a->ring_size * TSLAB_CLASSES; i++) {
    tslab_bin_t* b = &tc->bins[i];
    uint64_t al, fr;
    tslab_bin_read(b, &al, &fr);
    out->allocations_total += al;
    out->frees_total += fr;
    out->cross_thread_frees_total += ld(&b->xfrees);
    out->slow_path_total += ld(&b->slow);
    out->cached_slabs += (b->cur != NULL);
    for (tslab_run_t* s = b->ready; s; s = s->bin_next) out->cached_slabs++;
    for (tslab_run_t* s = b->parked; s; s = s->bin_next) out->cached_slabs++;
  }
  out->allocations_total += ld(&tc->folded_allocs);
  out->frees_total += ld(&tc->folded_frees);
  out->cross_thread_frees_total += ld(&tc->folded_xfrees);
  out->slow_path_total += ld(&tc->folded_slow);
  pthread_mutex_unlock(&a->reg_mu);
  return TSLAB_OK;
}

/* ---- sampling ---- */

TSLAB_API int tslab_sampling_set(tslab_t* a, uint32_t one_in) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  atomic_store(&a->sample_one_in, one_in);
  return TSLAB_OK;
}

TSLAB_INTERNAL bool tslab_sample_begin(tslab_t* a, uint64_t* wall, uint64_t* cpu) {
  uint32_t n = atomic_load_explicit(&a->sample_one_in, memory_order_relaxed);
  if (n == 0) return false;
  if (atomic_fetch_add_explicit(&a->sample_tick, 1, memory_order_relaxed) % n != 0) return false;
  *wall = tslab_now_ns();
  *cpu = tslab_os_thread_cpu_ns();
  return true;
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
  pthread_mutex_lock(&a->epoch_mu);
  size_t n = 0;
  for (uint32_t i = 0; i <= TSLAB_LABELS_MAX && n < max; i++) {
    if (i == a->nlabels && i < TSLAB_LABELS_MAX) i = TSLAB_LABELS_MAX;
    tslab_label_entry_t* l = &a->labels[i];
    tslab_stats_label_t* o = &out[n];
    memset(o, 0, sizeof *o);
    memcpy(o->label, l->name, TSLAB_LABEL_MAX);
    o->epochs_total = l->epochs;
    o->allocations_total = l->allocs;
    o->frees_total = l->frees;
    o->cross_thread_frees_total = l->xfrees;
    o->slow_path_total = l->slow;
    uint64_t abytes = l->alloc_bytes, fbytes = l->free_bytes;
    for (uint32_t slot = 0; slot < a->ring_size; slot++) {
      tslab_epoch_slot_t* es = &a->ring[slot];
      if (es->label_id != (int)i || TSLAB_STATE_ERA(atomic_load(&es->state)) == 0) continue;
      tslab_stats_epoch_t e;
      uint64_t xf, sl;
      fill_epoch(a, slot, &e, &xf, &sl);
      o->epochs_total++;
      o->allocations_total += e.allocations_total;
      o->frees_total += e.frees_total;
      o->cross_thread_frees_total += xf;
      o->slow_path_total += sl;
      abytes += e.live_bytes;
      if (e.state == TSLAB_EPOCH_ACTIVE) o->open_epochs++;
    }
    o->live_bytes = live_of(abytes, fbytes);
    if (i < TSLAB_LABELS_MAX || o->epochs_total) n++;
  }
  pthread_mutex_unlock(&a->epoch_mu);
  return n;
}

TSLAB_API size_t tslab_leak_check(tslab_t* a, uint64_t older_than_ns, tslab_leak_t* out, size_t max) {
  if (!a || (!out && max)) return 0;
  tslab_stats_epoch_t eps[TSLAB_RING_MAX];
  size_t n = tslab_stats_epochs(a, eps, TSLAB_RING_MAX);
  size_t k = 0;
  for (size_t i = 0; i < n && k < max; i++) {
    tslab_stats_epoch_t* e = &eps[i];
    bool old = e->age_ns > older_than_ns;
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
