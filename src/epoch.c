/* Epochs: the ring of eras, advance and close (the close protocol of
 * docs/ARCHITECTURE.md section 6.1), labels, domain reference counts and the
 * per-epoch counters folded in at close. */
#include <sched.h>
#include <string.h>

#include "internal.h"

TSLAB_INTERNAL bool tslab_epochs_init(tslab_t* a) {
  a->ring_bytes = (size_t)a->ring_size * sizeof(tslab_epoch_slot_t);
  a->ring = (tslab_epoch_slot_t*)tslab_os_map(a->ring_bytes);
  if (!a->ring) return false;
  for (uint32_t i = 0; i < a->ring_size; i++) a->ring[i].label_id = -1;
  if (pthread_mutex_init(&a->epoch_mu, NULL) != 0) return false;
  tslab_epoch_slot_t* es = &a->ring[1 & a->ring_mask];
  es->opened_ns = tslab_now_ns();
  atomic_store(&es->state, TSLAB_STATE(1, TSLAB_EPOCH_ACTIVE));
  atomic_store(&a->current, 1);
  atomic_store(&a->epochs_opened, 1);
  return true;
}

TSLAB_INTERNAL uint64_t tslab_epoch_state(tslab_t* a, uint64_t era) {
  return atomic_load_explicit(&a->ring[era & a->ring_mask].state, memory_order_acquire);
}

/* Why an allocation in `era` is refused (TSLAB_OK if it is not). */
TSLAB_INTERNAL int tslab_epoch_reject_status(tslab_t* a, uint64_t era) {
  if (era == 0 || era > atomic_load_explicit(&a->current, memory_order_acquire))
    return TSLAB_ERR_EPOCH_UNKNOWN;
  uint64_t st = tslab_epoch_state(a, era);
  uint64_t held = TSLAB_STATE_ERA(st);
  if (held > era) return TSLAB_ERR_EPOCH_STALE;
  if (held < era) return TSLAB_ERR_EPOCH_UNKNOWN;
  return TSLAB_STATE_OF(st) == TSLAB_EPOCH_ACTIVE ? TSLAB_OK : TSLAB_ERR_EPOCH_CLOSED;
}

TSLAB_INTERNAL void tslab_epoch_count_failure(tslab_t* a, int status) {
  _Atomic uint64_t* c;
  switch (status) {
    case TSLAB_ERR_EPOCH_CLOSED: c = &a->fail_closed; break;
    case TSLAB_ERR_EPOCH_STALE: c = &a->fail_stale; break;
    case TSLAB_ERR_EPOCH_UNKNOWN: c = &a->fail_unknown; break;
    case TSLAB_ERR_OUT_OF_MEMORY: c = &a->fail_oom; break;
    default: c = &a->fail_size; break;
  }
  atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Closer: move a detached bin's counters into the instance's per-class
 * totals, and add them to the era's and the cache's sums, which the closer
 * applies once per close and once per cache. */
TSLAB_INTERNAL void tslab_epoch_fold_bin(tslab_t* a, tslab_bin_t* bin, uint32_t cls, tslab_fold_t* sum) {
  uint64_t al, fr;
  tslab_bin_read(bin, &al, &fr);
  uint64_t xf = atomic_load_explicit(&bin->xfrees, memory_order_relaxed);
  uint64_t sl = atomic_load_explicit(&bin->slow, memory_order_relaxed);
  uint64_t size = tslab_classes[cls].size;
  sum->allocs += al;
  sum->frees += fr;
  sum->xfrees += xf;
  sum->slow += sl;
  sum->alloc_bytes += al * size;
  sum->free_bytes += fr * size;
  atomic_fetch_add_explicit(&a->ext_allocs[cls], al, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->ext_frees[cls], fr, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->ext_xfrees[cls], xf, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->ext_slow[cls], sl, memory_order_relaxed);
  atomic_store_explicit(&bin->taken, 0, memory_order_relaxed);
  atomic_store_explicit(&bin->frees_reported, 0, memory_order_relaxed);
  atomic_store_explicit(&bin->frees, 0, memory_order_relaxed);
  atomic_store_explicit(&bin->xfrees, 0, memory_order_relaxed);
  atomic_store_explicit(&bin->slow, 0, memory_order_relaxed);
}

/* ---- labels ---- */

static int label_find_or_add(tslab_t* a, const char* name) {
  for (uint32_t i = 0; i < a->nlabels; i++)
    if (strcmp(a->labels[i].name, name) == 0) return (int)i;
  if (a->nlabels < TSLAB_LABELS_MAX) {
    tslab_label_entry_t* l = &a->labels[a->nlabels];
    memcpy(l->name, name, strlen(name) + 1); /* name fits: it is a slot's label */
    return (int)a->nlabels++;
  }
  return TSLAB_LABELS_MAX; /* "(other)" */
}

/* An era leaves the ring: its counts go to its label's totals. Epoch mutex. */
static void retire_label(tslab_t* a, tslab_epoch_slot_t* es) {
  if (es->label_id < 0) return;
  tslab_label_entry_t* l = &a->labels[es->label_id];
  l->epochs++;
  l->allocs += atomic_load(&es->allocs) + atomic_load(&es->large_allocs);
  l->frees += atomic_load(&es->frees) + atomic_load(&es->large_frees);
  l->xfrees += atomic_load(&es->xfrees);
  l->slow += atomic_load(&es->slow);
  l->alloc_bytes += atomic_load(&es->alloc_bytes) + atomic_load(&es->large_bytes_alloc);
  l->free_bytes += atomic_load(&es->free_bytes) + atomic_load(&es->large_bytes_free);
}

static void slot_reset(tslab_epoch_slot_t* es) {
  es->label[0] = 0;
  es->label_id = -1;
  es->rss_before_close = es->rss_after_close = es->released_at_close = es->close_ns = 0;
  es->forced = false;
  atomic_store(&es->refcount, 0);
  atomic_store(&es->allocs, 0);
  atomic_store(&es->frees, 0);
  atomic_store(&es->xfrees, 0);
  atomic_store(&es->slow, 0);
  atomic_store(&es->alloc_bytes, 0);
  atomic_store(&es->free_bytes, 0);
  atomic_store(&es->slabs, 0);
  atomic_store(&es->slab_bytes, 0);
  atomic_store(&es->empty_runs, 0);
  atomic_store(&es->empty_bytes, 0);
  atomic_store(&es->released_bytes, 0);
  atomic_store(&es->large_allocs, 0);
  atomic_store(&es->large_frees, 0);
  atomic_store(&es->large_bytes_alloc, 0);
  atomic_store(&es->large_bytes_free, 0);
}

/* ---- close ---- */

/* Wait until a busy flag or counter is zero (section 6.1 step 3). */
static void wait_quiescent(_Atomic uint64_t* busy) {
  for (unsigned spins = 0; atomic_load_explicit(busy, memory_order_seq_cst); spins++) {
    if (spins > 64) sched_yield();
  }
}

/* Wait until no cache, and no cacheless thread, is in a busy window.
 * Registry mutex held. */
static void wait_windows(tslab_t* a) {
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next) wait_quiescent(&tc->busy);
  wait_quiescent(&a->cacheless_busy);
}

/* Close `era`, whose slot currently holds it open. Epoch mutex held. */
static void close_locked(tslab_t* a, uint64_t era, bool forced) {
  uint32_t slot = (uint32_t)(era & a->ring_mask);
  tslab_epoch_slot_t* es = &a->ring[slot];
  uint64_t t0 = tslab_now_ns();
  uint64_t released0 = atomic_load(&es->released_bytes);
  es->rss_before_close = tslab_process_rss();
  es->forced = forced;
  atomic_store_explicit(&es->state, TSLAB_STATE(era, TSLAB_EPOCH_CLOSING), memory_order_seq_cst);
  tslab_os_heavy_fence();
  pthread_mutex_lock(&a->reg_mu);
  wait_windows(a);
  tslab_run_t* detached = NULL;
  tslab_fold_t sum = {0};
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next)
    tslab_tcache_detach_slot(a, tc, slot, era, &detached, &sum);
  atomic_fetch_add_explicit(&es->allocs, sum.allocs, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->frees, sum.frees, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->xfrees, sum.xfrees, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->slow, sum.slow, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->alloc_bytes, sum.alloc_bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->free_bytes, sum.free_bytes, memory_order_relaxed);
  /* Step 4b: frees that began after CLOSING may still be setting remote bits
   * on these slabs; no slab is retired before their windows end. Such a free
   * fences before reading the mode, so a plain fence suffices here. */
  atomic_thread_fence(memory_order_seq_cst);
  wait_windows(a);
  pthread_mutex_unlock(&a->reg_mu);
  tslab_run_t* empty = NULL;
  bool release = true;
  while (detached) {
    tslab_run_t* s = detached;
    detached = s->bin_next;
    __atomic_store_n(&s->bin_next, NULL, __ATOMIC_RELAXED); /* links are read by statistics (section 8) */
    tslab_slab_detach_finish(a, s, s->detach_delta, &empty, &release);
  }
  if (empty) tslab_heap_retire_list(a, empty, release);
  if (a->config.release_policy != TSLAB_RELEASE_POOLED) tslab_heap_release_era(a, era);
  es->rss_after_close = tslab_process_rss();
  es->released_at_close = atomic_load(&es->released_bytes) - released0;
  es->close_ns = tslab_now_ns() - t0;
  atomic_fetch_add_explicit(&a->epochs_closed, 1, memory_order_relaxed);
  if (forced) atomic_fetch_add_explicit(&a->epochs_forced, 1, memory_order_relaxed);
}

TSLAB_API int tslab_epoch_close(tslab_t* a, tslab_epoch_t e) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_mutex_lock(&a->epoch_mu);
  int status = tslab_epoch_reject_status(a, e);
  if (status == TSLAB_OK) close_locked(a, e, false);
  pthread_mutex_unlock(&a->epoch_mu);
  return status == TSLAB_ERR_EPOCH_CLOSED ? TSLAB_OK : tslab_fail(status);
}

TSLAB_API tslab_epoch_t tslab_epoch_advance(tslab_t* a) {
  if (!a) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return 0;
  }
  pthread_mutex_lock(&a->epoch_mu);
  uint64_t era = atomic_load(&a->current) + 1;
  if (a->config.advance_policy == TSLAB_ADVANCE_SKIP_OPEN) {
    /* The first slot after the current one that holds no open era. */
    for (uint32_t i = 0; i < a->ring_size; i++) {
      if (TSLAB_STATE_OF(atomic_load(&a->ring[(era + i) & a->ring_mask].state)) != TSLAB_EPOCH_ACTIVE) {
        era += i;
        break;
      }
    }
  }
  tslab_epoch_slot_t* es = &a->ring[era & a->ring_mask];
  uint64_t st = atomic_load(&es->state);
  uint64_t old = TSLAB_STATE_ERA(st);
  if (TSLAB_STATE_OF(st) == TSLAB_EPOCH_ACTIVE) close_locked(a, old, true);
  /* Hand the slot over in two steps. First it names the new era, not open
   * yet, so no free counts into it for the old era any more (the heap
   * checks the state under its mutex); then, once frees that saw the old
   * era are done, its counters start from zero and the era opens. */
  pthread_mutex_lock(&a->heap.mu);
  atomic_store_explicit(&es->state, TSLAB_STATE(era, TSLAB_EPOCH_EMPTY), memory_order_seq_cst);
  pthread_mutex_unlock(&a->heap.mu);
  wait_quiescent(&a->closing_inflight);
  if (old) retire_label(a, es);
  slot_reset(es);
  es->opened_ns = tslab_now_ns();
  atomic_store_explicit(&es->state, TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE), memory_order_seq_cst);
  atomic_store_explicit(&a->current, era, memory_order_seq_cst);
  atomic_fetch_add_explicit(&a->epochs_opened, 1, memory_order_relaxed);
  pthread_mutex_unlock(&a->epoch_mu);
  return era;
}

TSLAB_API tslab_epoch_t tslab_epoch_current(tslab_t* a) {
  return a ? atomic_load_explicit(&a->current, memory_order_acquire) : 0;
}

TSLAB_API int tslab_epoch_status(tslab_t* a, tslab_epoch_t e) {
  return a ? tslab_epoch_reject_status(a, e) : TSLAB_ERR_INVALID_ARGUMENT;
}

/* Status of an era that must still be in the ring (open or closing). */
static int ring_status(tslab_t* a, uint64_t e) {
  int st = tslab_epoch_reject_status(a, e);
  return st == TSLAB_ERR_EPOCH_CLOSED ? TSLAB_OK : st;
}

TSLAB_API int tslab_epoch_set_label(tslab_t* a, tslab_epoch_t e, const char* label) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_mutex_lock(&a->epoch_mu);
  int st = ring_status(a, e);
  if (st == TSLAB_OK) {
    tslab_epoch_slot_t* es = &a->ring[e & a->ring_mask];
    if (label && label[0]) {
      strncpy(es->label, label, TSLAB_LABEL_MAX - 1);
      es->label[TSLAB_LABEL_MAX - 1] = 0;
      es->label_id = label_find_or_add(a, es->label);
    } else {
      es->label[0] = 0;
      es->label_id = -1;
    }
  }
  pthread_mutex_unlock(&a->epoch_mu);
  return tslab_fail(st);
}

TSLAB_API int tslab_epoch_get_label(tslab_t* a, tslab_epoch_t e, char* buf, size_t cap) {
  if (!a || (!buf && cap)) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_mutex_lock(&a->epoch_mu);
  int st = ring_status(a, e);
  if (st == TSLAB_OK && cap) {
    strncpy(buf, a->ring[e & a->ring_mask].label, cap - 1);
    buf[cap - 1] = 0;
  }
  pthread_mutex_unlock(&a->epoch_mu);
  return tslab_fail(st);
}

/* Refcounts are changed under the epoch mutex so an era cannot leave the
 * ring between the check and the update. */
TSLAB_API int tslab_epoch_ref(tslab_t* a, tslab_epoch_t e) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_mutex_lock(&a->epoch_mu);
  int st = ring_status(a, e);
  if (st == TSLAB_OK) atomic_fetch_add(&a->ring[e & a->ring_mask].refcount, 1);
  pthread_mutex_unlock(&a->epoch_mu);
  return tslab_fail(st);
}

TSLAB_API int tslab_epoch_unref(tslab_t* a, tslab_epoch_t e) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_mutex_lock(&a->epoch_mu);
  int st = ring_status(a, e);
  if (st == TSLAB_OK) {
    _Atomic int64_t* rc = &a->ring[e & a->ring_mask].refcount;
    if (atomic_load(rc) <= 0)
      st = TSLAB_ERR_INVALID_ARGUMENT;
    else
      atomic_fetch_sub(rc, 1);
  }
  pthread_mutex_unlock(&a->epoch_mu);
  return tslab_fail(st);
}

TSLAB_API int64_t tslab_epoch_refcount(tslab_t* a, tslab_epoch_t e) {
  if (!a) return -1;
  pthread_mutex_lock(&a->epoch_mu);
  int64_t rc = ring_status(a, e) == TSLAB_OK ? atomic_load(&a->ring[e & a->ring_mask].refcount) : -1;
  pthread_mutex_unlock(&a->epoch_mu);
  return rc;
}
