/* Epochs: the ring of eras, lock-free advance, close and free-all close
 * (docs/ARCHITECTURE.md section 7), labels, domain reference counts and the
 * per-epoch counters folded in at close. */
#include <string.h>

#include "fault.h"
#include "internal.h"

#define LINK_STORE_RUN(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)

TSLAB_INTERNAL bool tslab_epochs_init(tslab_t* a) {
  a->ring_bytes = (size_t)a->ring_size * (sizeof(tslab_epoch_word_t) + sizeof(tslab_epoch_slot_t));
  a->ring = (tslab_epoch_word_t*)tslab_os_map(a->ring_bytes);
  if (!a->ring) return false;
  a->slots = (tslab_epoch_slot_t*)(void*)(a->ring + a->ring_size);
  for (uint32_t i = 0; i < a->ring_size; i++) a->slots[i].label_id = -1;
  if (pthread_mutex_init(&a->label_mu, NULL) != 0) return false;
  tslab_epoch_slot_t* es = &a->slots[1 & a->ring_mask];
  TSLAB_RSTORE(es->opened_ns, tslab_coarse_ns());
  atomic_store(&a->ring[1 & a->ring_mask].state, TSLAB_STATE(1, TSLAB_EPOCH_ACTIVE));
  atomic_store(&a->current, 1);
  atomic_store(&a->events.epochs_opened, 1);
  return true;
}

/* Why an allocation in `era` is refused (TSLAB_OK if it is not). */
TSLAB_INTERNAL int tslab_epoch_reject_status(tslab_t* a, uint64_t era) {
  if (era == 0 || era > atomic_load_explicit(&a->current, memory_order_acquire)) return TSLAB_ERR_EPOCH_UNKNOWN;
  uint64_t st = tslab_epoch_state(a, era);
  uint64_t held = TSLAB_STATE_ERA(st);
  if (held > era) return TSLAB_ERR_EPOCH_STALE;
  if (held < era || TSLAB_STATE_OF(st) == TSLAB_EPOCH_EMPTY) return TSLAB_ERR_EPOCH_UNKNOWN;
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

/* ---- labels ---- */

static int label_find_or_add(tslab_t* a, const char* name) {
  pthread_mutex_lock(&a->label_mu);
  uint32_t n = atomic_load_explicit(&a->nlabels, memory_order_relaxed);
  int id = TSLAB_LABELS_MAX; /* "(other)" */
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(a->labels[i].name, name) == 0) id = (int)i;
  if (id == TSLAB_LABELS_MAX && n < TSLAB_LABELS_MAX) {
    memcpy(a->labels[n].name, name, strlen(name) + 1); /* fits: it is a slot's label */
    atomic_store_explicit(&a->nlabels, n + 1, memory_order_release);
    id = (int)n;
  }
  pthread_mutex_unlock(&a->label_mu);
  return id;
}

/* An era leaves the ring: its counts go to its label's totals, and its runs
 * still on the slot's detached list learn the label, for the frees that
 * come later (7.5, "Late frees"). They are the list's head: a closer links
 * its runs first, and the slot's earlier eras closed before this one was
 * claimed. label_mu and the slot's mutex held. */
static void retire_label(tslab_t* a, tslab_epoch_slot_t* es) {
  for (tslab_run_t* s = es->detached; s && atomic_load_explicit(&s->era, memory_order_relaxed) == es->counts_era;
       s = s->era_next)
    s->era_label = (uint16_t)(es->label_id + 1);
  tslab_label_entry_t* l = &a->labels[es->label_id];
  atomic_fetch_add(&l->epochs, 1);
  atomic_fetch_add(&l->allocs, atomic_load(&es->f_allocs) + atomic_load(&es->allocs) + atomic_load(&es->large_allocs));
  atomic_fetch_add(&l->frees, atomic_load(&es->f_frees) + atomic_load(&es->frees) + atomic_load(&es->large_frees));
  atomic_fetch_add(&l->xfrees, atomic_load(&es->f_xfrees) + atomic_load(&es->xfrees));
  atomic_fetch_add(&l->slow, atomic_load(&es->f_slow) + atomic_load(&es->slow));
  atomic_fetch_add(&l->alloc_bytes, atomic_load(&es->f_alloc_bytes) + atomic_load(&es->alloc_bytes) +
                                        atomic_load(&es->large_bytes_alloc));
  atomic_fetch_add(&l->free_bytes, atomic_load(&es->f_free_bytes) + atomic_load(&es->free_bytes) +
                                       atomic_load(&es->large_bytes_free));
}

/* The slot starts over for a new era (its mutex held, inflight zero, and
 * nobody else can write its counters: relaxed stores). */
static void slot_reset(tslab_epoch_slot_t* es) {
  es->label[0] = 0;
  es->label_id = -1;
  TSLAB_RSTORE(es->rss_before_close, 0);
  TSLAB_RSTORE(es->rss_after_close, 0);
  TSLAB_RSTORE(es->released_at_close, 0);
  TSLAB_RSTORE(es->close_ns, 0);
  TSLAB_RSTORE(es->forced, false);
  es->refcount = 0;
#define ZERO(f) atomic_store_explicit(&es->f, 0, memory_order_relaxed)
  ZERO(f_allocs);
  ZERO(f_frees);
  ZERO(f_xfrees);
  ZERO(f_slow);
  ZERO(f_alloc_bytes);
  ZERO(f_free_bytes);
  ZERO(allocs);
  ZERO(frees);
  ZERO(xfrees);
  ZERO(slow);
  ZERO(alloc_bytes);
  ZERO(free_bytes);
  ZERO(slabs);
  ZERO(slab_bytes);
  ZERO(released_bytes);
  ZERO(large_allocs);
  ZERO(large_frees);
  ZERO(large_bytes_alloc);
  ZERO(large_bytes_free);
#undef ZERO
  atomic_store_explicit(&es->multi, 0, memory_order_relaxed);
}

/* ---- close ---- */

/* Wait until no non-owner free is inside the slot's inflight bracket (7.4):
 * brackets hold no lock and no wait, so this ends. */
static void wait_counting_frees(tslab_epoch_slot_t* es) {
  for (unsigned spins = 0; atomic_load_explicit(&es->inflight, memory_order_seq_cst); spins++)
    if (spins > 64) sched_yield();
}

/* Wait until a cache's window that was open when we looked has ended
 * (7.3 step 3). */
static void wait_window(_Atomic uint64_t* busy) {
  uint64_t v = atomic_load_explicit(busy, memory_order_seq_cst);
  if (!(v & 1)) return;
  for (unsigned spins = 0; atomic_load_explicit(busy, memory_order_seq_cst) == v; spins++)
    if (spins > 64) sched_yield();
}

static void detach_cache(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, uint64_t era, tslab_run_t** detached,
                         tslab_run_t** drained, tslab_fold_t* sum, bool ending) {
  pthread_mutex_lock(&tc->mu);
  tslab_tcache_detach_slot(a, tc, slot, era, detached, drained, sum, ending);
  pthread_mutex_unlock(&tc->mu);
}

/* Step 2 or 3: take the era's runs from every cache that may hold them. */
static void detach_users(tslab_t* a, uint64_t era, tslab_tcache_t* me, tslab_run_t** detached,
                         tslab_run_t** drained, tslab_fold_t* sum, bool ending) {
  uint32_t slot = (uint32_t)(era & a->ring_mask);
  tslab_epoch_slot_t* es = &a->slots[slot];
  tslab_tcache_t* user = atomic_load_explicit(&es->user, memory_order_seq_cst);
  bool multi = atomic_load_explicit(&es->multi, memory_order_seq_cst) != 0;
  if (!multi && (!user || user == me)) {
    if (!user) return;
    /* The caller's own cache, with no window open: nothing to wait for. Its
     * mutex keeps remote notifiers off its lists while slabs are detached;
     * a slot that holds only blocks has nothing they could touch. */
    tslab_slot_cache_t* sc = &user->slots[slot];
    if (atomic_load_explicit(&sc->classes[0], memory_order_relaxed) |
        atomic_load_explicit(&sc->classes[1], memory_order_relaxed))
      detach_cache(a, user, slot, era, detached, drained, sum, ending);
    else
      tslab_tcache_detach_slot(a, user, slot, era, detached, drained, sum, ending);
    return;
  }
  tslab_os_heavy_fence();
  if (multi) {
    for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) wait_window(&tc->busy);
    for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
      detach_cache(a, tc, slot, era, detached, drained, sum, ending);
  } else {
    wait_window(&user->busy);
    detach_cache(a, user, slot, era, detached, drained, sum, ending);
  }
}

/* What a free-all ended: objects, those of them in blocks, and the bytes
 * of those in slabs. */
typedef struct {
  uint64_t objects, block_objects, bytes;
} tslab_ended_t;

/* Free-all: end every object of a detached run. Returns the objects ended
 * (added to *sum) and, in *remote, the remote bits the kill took: frees that
 * completed, which their freers count (3.1), so only `live` takes them into
 * account. The caller applies -(ended + remote) to `live`. The instance's
 * totals count the ended objects by class: at once for slabs, once per
 * free-all for blocks (fold_ended). */
static uint64_t end_run(tslab_t* a, tslab_run_t* s, tslab_ended_t* sum, uint64_t* remote) {
  bool block = atomic_load_explicit(&s->kind, memory_order_relaxed) == TSLAB_RUN_BLOCK;
  uint64_t ended = tslab_run_kill(a, s, remote);
  sum->objects += ended;
  if (block) {
    /* Block objects' sizes are not read one by one: the era's bytes are
     * settled as a whole after a free-all (fold_ended). */
    sum->block_objects += ended;
  } else if (ended) {
    sum->bytes += ended * s->obj_size;
    atomic_fetch_add_explicit(&a->ext[s->cls].frees, ended, memory_order_relaxed);
  }
  return ended;
}

/* A detached block starts counting for its era (7.5), before anyone else
 * may retire it. */
static void count_block(tslab_epoch_slot_t* es, tslab_run_t* b) {
  tslab_era_count_run_closing(es, 1, (int64_t)tslab_run_bytes(b));
  b->era_counted = 1;
}

/* Runs detached with live objects join the era's detached list, linked
 * before their live count is set, so a free that drains one finds it there;
 * with free_all they are ended first. Runs that are (or end) empty, and
 * drained blocks, are given back: a drained block of the closer's own cache
 * becomes its hot block, the rest goes to the heap in one batch. Free-all's
 * ends are added to *ended. */
static size_t settle_detached(tslab_t* a, uint64_t era, tslab_tcache_t* me, tslab_run_t* detached,
                              tslab_run_t* drained, bool free_all, tslab_ended_t* ended) {
  tslab_epoch_slot_t* es = &a->slots[era & a->ring_mask];
  tslab_run_t* empty = NULL;
  size_t trimmed = 0;
  while (detached) {
    tslab_run_t* s = detached;
    detached = s->bin_next;
    __atomic_store_n(&s->bin_next, NULL, __ATOMIC_RELAXED); /* links are read by statistics */
    bool block = atomic_load_explicit(&s->kind, memory_order_relaxed) == TSLAB_RUN_BLOCK;
    int64_t delta = s->detach_delta;
    if (free_all) {
      /* Frees that took a bit between the detach and the kill are counted
       * in `live` (or will be, by their freers): `rest` of them. None: no
       * other party holds a claim on the run (C2), it is empty for good and
       * needs neither a count nor a `live` update. Else whoever brings
       * `live` to zero gives the run back. */
      uint64_t remote, e = end_run(a, s, ended, &remote);
      int64_t rest = delta - (int64_t)(e + remote);
      if (rest != 0) {
        if (block) count_block(es, s);
        if (!tslab_run_live_add(s, rest)) continue;
      }
    } else if (delta != 0) {
      if (block) count_block(es, s);
      tslab_spin_lock(&es->mu);
      tslab_era_list_push_locked(es, s);
      tslab_spin_unlock(&es->mu);
      /* A detached block holding objects keeps only the pages its objects
       * touch (3.4). */
      if (block) trimmed += tslab_block_trim(a, s);
      if (!tslab_run_live_add(s, delta)) continue;
      if (block) {
        /* It emptied at once: the list and the era count let go of it. */
        tslab_run_retire(a, s);
        continue;
      }
    } /* else nothing live: nobody can free into it any more */
    if (block) {
      LINK_STORE_RUN(s->bin_next, drained);
      drained = s;
    } else {
      s->heap_next = empty;
      empty = s;
    }
  }
  while (drained) {
    tslab_run_t* b = drained;
    drained = b->bin_next;
    __atomic_store_n(&b->bin_next, NULL, __ATOMIC_RELAXED);
    /* Read before the keep: once kept, a releaser may give the block back
     * and another cache format it again (found by review). */
    bool counted = b->era_counted;
    int64_t bytes = (int64_t)tslab_run_bytes(b);
    tslab_tcache_t* creator = atomic_load_explicit(&b->creator, memory_order_relaxed);
    if (me && creator == me && tslab_block_keep(a, me, b)) {
      if (counted) tslab_era_count_run_closing(es, -1, -bytes);
      continue;
    }
    /* A block its creator readied for the era (7.1) and nobody bumped goes
     * to the heap when another thread closes the era: the creator stops
     * readying with a block. */
    if (creator != me && b->bumped == 0)
      atomic_store_explicit(&creator->ready_off, true, memory_order_relaxed);
    b->heap_next = empty;
    empty = b;
  }
  tslab_runs_retire(a, empty);
  if (trimmed) atomic_fetch_add_explicit(&es->released_bytes, trimmed, memory_order_relaxed);
  return trimmed;
}

/* Free-all: claim a run of the era's detached list for the kill (slot
 * mutex held): its `live` goes one above its count, so no free can bring it
 * to zero and retire the run while the kill reads its bits; the free-all
 * takes that one back with the objects it ended (7.5, "Free-all of a closed
 * era"). False when frees have emptied the run: its last freer retires it,
 * and unlinks it from the list itself. A closed era's runs hold their true
 * count (its close set it before the era read CLOSED), never below zero. */
static bool claim_detached(tslab_run_t* s) {
  int64_t live = atomic_load_explicit(&s->live, memory_order_acquire);
  while (live > 0 && !atomic_compare_exchange_weak_explicit(&s->live, &live, live + 1, memory_order_acq_rel,
                                                            memory_order_acquire)) {
  }
  return live > 0;
}

/* Free-all: end every object of the era's runs detached by earlier closes,
 * and of its spans; added to *ended. The runs taken off the list are linked
 * through `era_next`, which nobody else touches once they are off it: their
 * `heap_next` belongs to whoever retires them. */
static void end_objects(tslab_t* a, tslab_tcache_t* me, uint64_t era, tslab_ended_t* ended) {
  uint32_t slot = (uint32_t)(era & a->ring_mask);
  tslab_epoch_slot_t* es = &a->slots[slot];
  tslab_run_t* list = NULL;
  /* Only closers add to the list (this one, and those of the slot's earlier
   * eras, whose CLOSED states came before this era's claim), so a list seen
   * empty stays empty: no lock then. */
  if (__atomic_load_n(&es->detached, __ATOMIC_RELAXED)) {
    tslab_spin_lock(&es->mu);
    for (tslab_run_t *s = es->detached, *next; s; s = next) {
      next = s->era_next;
      if (atomic_load_explicit(&s->era, memory_order_relaxed) != era || !claim_detached(s)) continue;
      tslab_era_list_unlink_locked(es, s);
      s->era_next = list;
      list = s;
    }
    tslab_spin_unlock(&es->mu);
  }
  while (list) {
    tslab_run_t* s = list;
    list = s->era_next;
    s->era_next = NULL;
    uint64_t remote, e = end_run(a, s, ended, &remote);
    if (tslab_run_live_add(s, -(int64_t)(e + remote + 1))) tslab_run_retire(a, s);
  }
  TSLAB_COUNT_EVENT(a, me, objects_ended, tslab_large_kill_era(a, slot, era));
}

/* Free-all's ends join the era's folded totals (section 9; the caller is
 * the closer, the only writer of `f_*`), in a section of `stat_seq`, with
 * the bytes that bring its free bytes up to its allocated bytes: nothing
 * of the era is live any more, and the blocks' objects were not sized one
 * by one. */
static void fold_ended(tslab_t* a, tslab_tcache_t* me, tslab_epoch_slot_t* es, const tslab_ended_t* ended) {
  uint64_t seq = atomic_load_explicit(&es->stat_seq, memory_order_relaxed);
  atomic_store_explicit(&es->stat_seq, seq + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  uint64_t f_frees = atomic_load_explicit(&es->f_frees, memory_order_relaxed);
  uint64_t f_bytes = atomic_load_explicit(&es->f_free_bytes, memory_order_relaxed) + ended->bytes;
  uint64_t in = atomic_load(&es->f_alloc_bytes) + atomic_load(&es->alloc_bytes) + atomic_load(&es->large_bytes_alloc);
  uint64_t out = f_bytes + atomic_load(&es->free_bytes) + atomic_load(&es->large_bytes_free);
  if (in > out) f_bytes += in - out;
  atomic_store_explicit(&es->f_frees, f_frees + ended->objects, memory_order_relaxed);
  atomic_store_explicit(&es->f_free_bytes, f_bytes, memory_order_relaxed);
  atomic_store_explicit(&es->stat_seq, seq + 2, memory_order_release);
  if (ended->block_objects)
    atomic_fetch_add_explicit(&a->ext[TSLAB_CLASSES].frees, ended->block_objects, memory_order_relaxed);
  TSLAB_COUNT_EVENT(a, me, objects_ended, ended->objects);
}

/* Close era e (and with free_all, end its objects). Returns the status of
 * the call. */
static int close_era(tslab_t* a, uint64_t e, bool free_all, bool forced) {
  _Atomic uint64_t* word = &a->ring[e & a->ring_mask].state;
  tslab_epoch_slot_t* es = &a->slots[e & a->ring_mask];
  bool was_closed;
  for (unsigned spins = 0;; spins++) {
    uint64_t st = atomic_load_explicit(word, memory_order_seq_cst);
    if (TSLAB_STATE_ERA(st) != e || TSLAB_STATE_OF(st) == TSLAB_EPOCH_EMPTY) return tslab_epoch_reject_status(a, e);
    uint32_t state = TSLAB_STATE_OF(st);
    if (state == TSLAB_EPOCH_CLOSED && !free_all) return TSLAB_OK;
    if (state == TSLAB_EPOCH_ACTIVE || state == TSLAB_EPOCH_CLOSED) {
      if (atomic_compare_exchange_strong_explicit(word, &st, TSLAB_STATE(e, TSLAB_EPOCH_CLOSING),
                                                  memory_order_seq_cst, memory_order_seq_cst)) {
        was_closed = state == TSLAB_EPOCH_CLOSED;
        break;
      }
      continue;
    }
    /* A close in progress: wait for it to finish (C3). */
    if (spins > 64) sched_yield();
  }
  tslab_hook_point(TSLAB_HOOK_CLOSE_CLOSING);
  tslab_tcache_t* me = tslab_tcache_find(a);
  uint64_t released0 = atomic_load_explicit(&es->released_bytes, memory_order_relaxed);
  /* The close or free-all of a request-sized epoch (only the caller's cache
   * held it, in blocks only) is not timed: reading the clock twice would cost more than
   * the close (7.3 step 6). Every other close is. */
  tslab_tcache_t* user = atomic_load_explicit(&es->user, memory_order_seq_cst);
  bool sole = !atomic_load_explicit(&es->multi, memory_order_seq_cst) && (!user || user == me);
  bool blocks_only = (!user || !(atomic_load_explicit(&user->slots[e & a->ring_mask].classes[0], memory_order_relaxed) |
                                 atomic_load_explicit(&user->slots[e & a->ring_mask].classes[1], memory_order_relaxed))) &&
                     !__atomic_load_n(&a->heap.spans[e & a->ring_mask], __ATOMIC_ACQUIRE);
  bool timed = forced || was_closed || !sole || !blocks_only;
  uint64_t t0 = timed ? tslab_now_ns() : 0;
  size_t trimmed = 0;
  tslab_ended_t ended = {0, 0, 0};
  if (!was_closed) {
    tslab_run_t *detached = NULL, *drained = NULL;
    tslab_fold_t sum = {0};
    /* The era's counts, read off the caches, become its slot's (one writer:
     * this closer); readers of the era retry meanwhile. The section opens
     * before the detach: a cache detached is no longer read as the era's,
     * and until the fold its counts would be missing. */
    uint64_t seq = atomic_load_explicit(&es->stat_seq, memory_order_relaxed);
    atomic_store_explicit(&es->stat_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    detach_users(a, e, me, &detached, &drained, &sum, free_all);
    tslab_hook_point(TSLAB_HOOK_CLOSE_DETACHED);
    atomic_store_explicit(&es->f_allocs, atomic_load_explicit(&es->f_allocs, memory_order_relaxed) + sum.allocs, memory_order_relaxed);
    atomic_store_explicit(&es->f_frees, atomic_load_explicit(&es->f_frees, memory_order_relaxed) + sum.frees, memory_order_relaxed);
    atomic_store_explicit(&es->f_xfrees, atomic_load_explicit(&es->f_xfrees, memory_order_relaxed) + sum.xfrees, memory_order_relaxed);
    atomic_store_explicit(&es->f_slow, atomic_load_explicit(&es->f_slow, memory_order_relaxed) + sum.slow, memory_order_relaxed);
    atomic_store_explicit(&es->f_alloc_bytes, atomic_load_explicit(&es->f_alloc_bytes, memory_order_relaxed) + sum.alloc_bytes, memory_order_relaxed);
    atomic_store_explicit(&es->f_free_bytes, atomic_load_explicit(&es->f_free_bytes, memory_order_relaxed) + sum.free_bytes, memory_order_relaxed);
    atomic_store_explicit(&es->stat_seq, seq + 2, memory_order_release);
    trimmed = settle_detached(a, e, me, detached, drained, free_all, &ended);
    /* Empty runs the era's active life left in the pool beyond its bound
     * (decay, section 5) go back to the OS now (contract line 3). */
    size_t decayed = tslab_heap_decay_close(a, (uint32_t)(e & a->ring_mask));
    if (decayed) tslab_era_count_released(a, e, decayed);
    TSLAB_COUNT_EVENT(a, me, epochs_closed, 1);
    if (forced) {
      TSLAB_RSTORE(es->forced, true);
      atomic_fetch_add_explicit(&a->epochs_forced, 1, memory_order_relaxed);
    }
  }
  if (free_all) {
    end_objects(a, me, e, &ended);
    tslab_hook_point(TSLAB_HOOK_OBJECTS_ENDED);
    /* A free the kill completed (it took the free's remote bit) is counted
     * by its freer, inside the slot's inflight bracket (7.4): the fold
     * below brings the era's free bytes up to its allocated bytes, and would
     * count the object's bytes a second time if the freer counted after it. */
    wait_counting_frees(es);
    fold_ended(a, me, es, &ended);
    TSLAB_COUNT_EVENT(a, me, epochs_freed_all, 1);
  }
  uint64_t released = atomic_load_explicit(&es->released_bytes, memory_order_relaxed) - released0;
  if (released) {
    TSLAB_RSTORE(es->released_at_close, es->released_at_close + released);
    /* RSS is read only when the close returned runs: a close within the
     * reserve makes no system call (7.3 step 6), and one that only trimmed
     * blocks kept by live objects makes just those. */
    if (released > trimmed) {
      uint64_t rss = tslab_process_rss();
      TSLAB_RSTORE(es->rss_after_close, rss);
      TSLAB_RSTORE(es->rss_before_close, rss + released);
    }
  }
  if (timed) TSLAB_RSTORE(es->close_ns, tslab_now_ns() - t0);
  atomic_store_explicit(word, TSLAB_STATE(e, TSLAB_EPOCH_CLOSED), memory_order_release);
  return TSLAB_OK;
}

static int close_checked(tslab_t* a, tslab_epoch_t e, bool free_all) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  int status = tslab_epoch_reject_status(a, e);
  if (status != TSLAB_OK && status != TSLAB_ERR_EPOCH_CLOSED) return tslab_fail(status);
  return tslab_fail(close_era(a, e, free_all, false));
}

TSLAB_API int tslab_epoch_close(tslab_t* a, tslab_epoch_t e) { return close_checked(a, e, false); }

TSLAB_API int tslab_epoch_free_all(tslab_t* a, tslab_epoch_t e) { return close_checked(a, e, true); }

static void open_era(tslab_t* a, uint64_t era, bool opener);

/* Fork child (7.6): a close in progress in a vanished thread is completed,
 * so is an era a vanished thread was opening, and non-owner frees of
 * vanished threads no longer hold slots. */
TSLAB_INTERNAL void tslab_epoch_fork_repair(tslab_t* a) {
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    tslab_epoch_slot_t* es = &a->slots[slot];
    atomic_store(&es->inflight, 0);
    uint64_t st = atomic_load(&a->ring[slot].state);
    uint64_t era = TSLAB_STATE_ERA(st);
    if (TSLAB_STATE_OF(st) == TSLAB_EPOCH_EMPTY && era) {
      /* Its opener vanished half-way: the open is finished here, as the
       * advance would have finished it (`current` names it; leaving it
       * unopened would stall every later advance). The opener may have
       * readied its cache for the era (7.1): then the era has a second
       * user, and its close detaches every cache. */
      open_era(a, era, false);
      for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
        if (tc != atomic_load(&es->user) && atomic_load(&tc->slots[slot].era) == era) atomic_store(&es->multi, 1);
    } else if (TSLAB_STATE_OF(st) == TSLAB_EPOCH_CLOSING) {
      tslab_run_t *detached = NULL, *drained = NULL;
      tslab_fold_t sum = {0};
      for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
        tslab_tcache_detach_slot(a, tc, slot, era, &detached, &drained, &sum, false);
      atomic_fetch_add(&es->f_allocs, sum.allocs);
      atomic_fetch_add(&es->f_frees, sum.frees);
      atomic_fetch_add(&es->f_xfrees, sum.xfrees);
      atomic_fetch_add(&es->f_slow, sum.slow);
      atomic_fetch_add(&es->f_alloc_bytes, sum.alloc_bytes);
      atomic_fetch_add(&es->f_free_bytes, sum.free_bytes);
      settle_detached(a, era, NULL, detached, drained, false, NULL);
      atomic_store(&a->ring[slot].state, TSLAB_STATE(era, TSLAB_EPOCH_CLOSED));
    }
    /* A close the fork caught before its decay step finishes it here (D1). */
    if (TSLAB_STATE_OF(atomic_load(&a->ring[slot].state)) != TSLAB_EPOCH_ACTIVE) tslab_heap_decay_close(a, slot);
    uint64_t seq = atomic_load(&es->stat_seq);
    if (seq & 1) atomic_store(&es->stat_seq, seq + 1);
  }
  /* An opener that vanished after its era's ACTIVE store but before it
   * moved `current` left every later advance retrying (each finds a slot at
   * or above its candidate): `current` names the newest era in the ring. */
  uint64_t newest = atomic_load(&a->current);
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    uint64_t era = TSLAB_STATE_ERA(atomic_load(&a->ring[slot].state));
    if (era > newest) newest = era;
  }
  atomic_store(&a->current, newest);
}

/* ---- advance ---- */

/* Whether a slot may take a new era: never used, or its era's close ended. */
static bool claimable(uint64_t st) {
  return TSLAB_STATE_OF(st) == TSLAB_EPOCH_CLOSED ||
         (TSLAB_STATE_OF(st) == TSLAB_EPOCH_EMPTY && TSLAB_STATE_ERA(st) == 0);
}

/* The slot of era (claimed: its state is (era, EMPTY)) starts over and
 * opens (7.1); `opener`: the calling thread opens it for itself (not a fork
 * child finishing a vanished thread's open), and readies its cache. */
static void open_era(tslab_t* a, uint64_t era, bool opener) {
  tslab_epoch_slot_t* es = &a->slots[era & a->ring_mask];
  /* Non-owner frees of the old era still writing its counters finish
   * first; later ones see the new era and count elsewhere. */
  wait_counting_frees(es);
  /* The old era's label id is read under the slot's lock: set_label checks
   * the era and writes the id in one section of that lock, so a label set
   * or cleared by a check that came before the claim is seen here, and any
   * later one finds the slot claimed and is refused (an unlocked read could
   * miss the write, fold nothing and reset the label, or fold a label that
   * is gone). A labelled slot needs label_mu first, in lock order; the slot
   * is claimed, so its id cannot change while the lock is let go. */
  tslab_spin_lock(&es->mu);
  int label_id = es->label_id;
  bool labelled = label_id >= 0;
  if (labelled) {
    tslab_spin_unlock(&es->mu);
    pthread_mutex_lock(&a->label_mu);
    /* The old era's spans learn its label before the fold below, so a late
     * free of one counts in the slot's counters until the fold and in the
     * label after it (7.5); the heap's mutex is not taken under the slot's. */
    tslab_heap_span_label(a, (uint32_t)(era & a->ring_mask), es->counts_era, (uint16_t)(label_id + 1));
    tslab_spin_lock(&es->mu);
  }
  uint64_t seq = atomic_load_explicit(&es->stat_seq, memory_order_relaxed);
  atomic_store_explicit(&es->stat_seq, seq + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  if (labelled) retire_label(a, es);
  slot_reset(es);
  es->counts_era = era;
  TSLAB_RSTORE(es->opened_ns, tslab_coarse_ns());
  /* The thread that opens an era is most likely its user: registering it
   * now spares its first allocation a compare-and-swap (7.2), and readying
   * its cache below the allocation's slow path (7.1). Registering a cache
   * that never uses the era only costs a close by another thread the fence
   * it would otherwise skip. */
  tslab_tcache_t* me = tslab_tcache_find(a);
  atomic_store_explicit(&es->user, me, memory_order_relaxed);
  atomic_store_explicit(&es->stat_seq, seq + 2, memory_order_release);
  tslab_spin_unlock(&es->mu);
  if (labelled) pthread_mutex_unlock(&a->label_mu);
  if (opener && me) tslab_tcache_ready_era(a, me, era);
  tslab_hook_point(TSLAB_HOOK_OPEN_READIED);
  /* A release store: what the open wrote is visible to whoever reads the
   * era ACTIVE (an allocation, the closer's CAS); nothing here needs a
   * store-load order, and a locked instruction per request is measurable. */
  atomic_store_explicit(&a->ring[era & a->ring_mask].state, TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE),
                        memory_order_release);
  /* `current` only grows: two openers can be here at once (an advance that
   * skipped an open slot, and one that claimed that slot once it closed,
   * with the smaller era), so a plain store could move it back (7.1). */
  uint64_t cur = atomic_load_explicit(&a->current, memory_order_relaxed);
  tslab_hook_point(TSLAB_HOOK_OPEN_CURRENT);
  while (cur < era && !atomic_compare_exchange_weak_explicit(&a->current, &cur, era, memory_order_seq_cst,
                                                             memory_order_relaxed)) {
  }
  TSLAB_COUNT_EVENT(a, me, epochs_opened, 1);
}

TSLAB_API tslab_epoch_t tslab_epoch_advance(tslab_t* a) {
  if (!a) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return 0;
  }
  bool next_slot = a->config.advance_policy == TSLAB_ADVANCE_NEXT_SLOT;
  for (unsigned spins = 0;; spins++) {
    uint64_t cur = atomic_load_explicit(&a->current, memory_order_acquire);
    uint64_t force = 0;
    bool retry = false;
    for (uint32_t i = 1; i <= a->ring_size && !retry; i++) {
      uint64_t era = cur + i;
      _Atomic uint64_t* word = &a->ring[era & a->ring_mask].state;
      uint64_t st = atomic_load_explicit(word, memory_order_seq_cst);
      if (TSLAB_STATE_ERA(st) >= era) {
        retry = true; /* another advance got there first: read current again */
        break;
      }
      if (claimable(st)) {
        if (atomic_compare_exchange_strong_explicit(word, &st, TSLAB_STATE(era, TSLAB_EPOCH_EMPTY),
                                                    memory_order_seq_cst, memory_order_seq_cst)) {
          tslab_hook_point(TSLAB_HOOK_ADVANCE_CLAIMED);
          open_era(a, era, true);
          return era;
        }
        retry = true;
        break;
      }
      /* An open era (or one being opened or closed) holds the slot. */
      if (i == 1) force = TSLAB_STATE_OF(st) == TSLAB_EPOCH_ACTIVE ? TSLAB_STATE_ERA(st) : 0;
      if (next_slot) break;
    }
    if (retry) {
      /* Another advance is opening the era after `current` (its open
       * readies a cache, 7.1): let it run. */
      if (spins > 64) sched_yield();
      continue;
    }
    /* Every slot is open (or the next-slot policy found its slot open):
     * close the era in the next slot first, counted as forced. A slot
     * being opened or closed by someone else is waited for by trying
     * again. */
    if (force)
      close_era(a, force, false, true);
    else
      sched_yield();
  }
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

/* Run fn on e's slot under its mutex if e is still in the ring: the check
 * and the change are one step against a concurrent advance. */
static int with_slot(tslab_t* a, tslab_epoch_t e, int (*fn)(tslab_epoch_slot_t*, void*), void* arg) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  tslab_epoch_slot_t* es = &a->slots[e & a->ring_mask];
  tslab_spin_lock(&es->mu);
  int st = ring_status(a, e);
  if (st == TSLAB_OK) st = fn(es, arg);
  tslab_spin_unlock(&es->mu);
  return tslab_fail(st);
}

struct label_arg {
  const char* label;
  int id;
  char* buf;
  size_t cap;
};

static int set_label(tslab_epoch_slot_t* es, void* arg) {
  struct label_arg* l = arg;
  if (l->label && l->label[0]) {
    strncpy(es->label, l->label, TSLAB_LABEL_MAX - 1);
    es->label[TSLAB_LABEL_MAX - 1] = 0;
    es->label_id = l->id;
  } else {
    es->label[0] = 0;
    es->label_id = -1;
  }
  return TSLAB_OK;
}

TSLAB_API int tslab_epoch_set_label(tslab_t* a, tslab_epoch_t e, const char* label) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  struct label_arg l = {.label = label, .id = -1};
  if (label && label[0]) {
    char cut[TSLAB_LABEL_MAX];
    strncpy(cut, label, TSLAB_LABEL_MAX - 1);
    cut[TSLAB_LABEL_MAX - 1] = 0;
    l.id = label_find_or_add(a, cut);
  }
  return with_slot(a, e, set_label, &l);
}

static int get_label(tslab_epoch_slot_t* es, void* arg) {
  struct label_arg* l = arg;
  if (l->cap) {
    strncpy(l->buf, es->label, l->cap - 1);
    l->buf[l->cap - 1] = 0;
  }
  return TSLAB_OK;
}

TSLAB_API int tslab_epoch_get_label(tslab_t* a, tslab_epoch_t e, char* buf, size_t cap) {
  if (!a || (!buf && cap)) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  struct label_arg l = {.buf = buf, .cap = cap};
  return with_slot(a, e, get_label, &l);
}

static int ref(tslab_epoch_slot_t* es, void* arg) {
  (void)arg;
  es->refcount++;
  return TSLAB_OK;
}

static int unref(tslab_epoch_slot_t* es, void* arg) {
  (void)arg;
  if (es->refcount <= 0) return TSLAB_ERR_INVALID_ARGUMENT;
  es->refcount--;
  return TSLAB_OK;
}

TSLAB_API int tslab_epoch_ref(tslab_t* a, tslab_epoch_t e) { return with_slot(a, e, ref, NULL); }
TSLAB_API int tslab_epoch_unref(tslab_t* a, tslab_epoch_t e) { return with_slot(a, e, unref, NULL); }

static int read_refcount(tslab_epoch_slot_t* es, void* arg) {
  *(int64_t*)arg = es->refcount;
  return TSLAB_OK;
}

TSLAB_API int64_t tslab_epoch_refcount(tslab_t* a, tslab_epoch_t e) {
  int64_t rc = -1;
  if (!a) return -1;
  tslab_epoch_slot_t* es = &a->slots[e & a->ring_mask];
  tslab_spin_lock(&es->mu);
  if (ring_status(a, e) == TSLAB_OK) read_refcount(es, &rc);
  tslab_spin_unlock(&es->mu);
  return rc;
}
