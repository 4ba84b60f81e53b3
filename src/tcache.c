/* Thread caches: one per (thread, instance), found through a thread-local
 * table, owning slabs per (ring slot, class) bin. This file holds the
 * allocation slow path, notification of remote frees, detaching a slot's
 * slabs at epoch close, and flushing/abandoning caches at thread exit
 * (docs/ARCHITECTURE.md sections 3.2 and 5). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

TSLAB_INTERNAL __thread tslab_tls_entry_t tslab_tls_last;
#if !defined(__x86_64__)
TSLAB_INTERNAL __thread char tslab_thread_tag;
#endif

/* This thread's other (instance, cache) pairs. */
static __thread tslab_tls_entry_t* tls_extra;
static __thread size_t tls_extra_len, tls_extra_cap;

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Live instances by id, so that a thread exiting after an instance was
 * destroyed never touches its memory. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static tslab_t** live_list;
static size_t live_len, live_cap;

TSLAB_INTERNAL bool tslab_instance_register(tslab_t* a);
TSLAB_INTERNAL bool tslab_instance_register(tslab_t* a) {
  pthread_mutex_lock(&live_mu);
  bool ok = true;
  if (live_len == live_cap) {
    size_t cap = live_cap ? live_cap * 2 : 16;
    tslab_t** n = realloc(live_list, cap * sizeof *n);
    if (n) {
      live_list = n;
      live_cap = cap;
    } else {
      ok = false;
    }
  }
  if (ok) live_list[live_len++] = a;
  pthread_mutex_unlock(&live_mu);
  return ok;
}

/* For fork handling (src/fork.c): the live instances, under live_mu. */
TSLAB_INTERNAL void tslab_live_lock(void) { pthread_mutex_lock(&live_mu); }
TSLAB_INTERNAL void tslab_live_unlock(void) { pthread_mutex_unlock(&live_mu); }
TSLAB_INTERNAL size_t tslab_live_count(void) { return live_len; }
TSLAB_INTERNAL tslab_t* tslab_live_at(size_t i) { return live_list[i]; }

/* Is tc one of the calling thread's caches? */
TSLAB_INTERNAL bool tslab_tls_owns(const tslab_tcache_t* tc) {
  if (tslab_tls_last.inst && tslab_tls_last.tc == tc) return true;
  for (size_t i = 0; i < tls_extra_len; i++)
    if (tls_extra[i].tc == tc) return true;
  return false;
}

static bool instance_alive_locked(tslab_t* a, uint64_t id) {
  for (size_t i = 0; i < live_len; i++)
    if (live_list[i] == a && a->id == id) return true;
  return false;
}

/* ---- bins ---- */

/* The bin lists are the owner's; statistics readers walk the ready list
 * (section 8), so the links are written with relaxed atomic stores. */
#define LINK_STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)
#define LINK_LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static void list_push(tslab_run_t** head, tslab_run_t* s, uint8_t which) {
  s->list = which;
  LINK_STORE(s->bin_prev, NULL);
  LINK_STORE(s->bin_next, *head);
  if (*head) LINK_STORE((*head)->bin_prev, s);
  LINK_STORE(*head, s);
}

static void list_remove(tslab_run_t** head, tslab_run_t* s) {
  if (s->bin_prev)
    LINK_STORE(s->bin_prev->bin_next, s->bin_next);
  else
    LINK_STORE(*head, s->bin_next);
  if (s->bin_next) LINK_STORE(s->bin_next->bin_prev, s->bin_prev);
  LINK_STORE(s->bin_next, NULL);
  LINK_STORE(s->bin_prev, NULL);
  s->list = TSLAB_LIST_NONE;
}

/* ---- counting frees (docs/ARCHITECTURE.md section 8) ---- */

/* A write section: statistics readers retry while seq is odd or moved. */
static void bin_write_begin(tslab_bin_t* bin) {
#if TSLAB_COUNTERS
  atomic_store_explicit(&bin->seq, atomic_load_explicit(&bin->seq, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
#else
  (void)bin;
#endif
}

static void bin_write_end(tslab_bin_t* bin) {
#if TSLAB_COUNTERS
  atomic_store_explicit(&bin->seq, atomic_load_explicit(&bin->seq, memory_order_relaxed) + 1,
                        memory_order_release);
#else
  (void)bin;
#endif
}

/* In a write section: s's pending local frees join the bin's count. */
static void slab_fold(tslab_bin_t* bin, tslab_run_t* s) {
  uint64_t u = atomic_load_explicit(&s->usage, memory_order_relaxed);
  if (u >> TSLAB_USED_BITS) {
    atomic_store_explicit(&s->usage, u & TSLAB_USED_MASK, memory_order_relaxed);
    tslab_bump(&bin->frees, u >> TSLAB_USED_BITS);
  }
}

/* Owner, or the closer with the owner quiescent for the bin's era: make s
 * (or nobody) the current slab. The old one's pending frees join the bin's
 * count in the same section: it may be parked, where readers do not look. */
static void bin_set_cur(tslab_bin_t* bin, tslab_run_t* s) {
  bin_write_begin(bin);
  if (bin->cur) slab_fold(bin, bin->cur);
  LINK_STORE(bin->cur, s);
  bin_write_end(bin);
}

/* Owner, or the closer as above: replace the set-aside slots of the current
 * slab by `mask`. Set-aside slots count in the slab's `used` and the bin's
 * `taken`, so the allocation fast path needs neither. */
static void bin_set_mask(tslab_bin_t* bin, uint64_t mask) {
  uint64_t old = atomic_load_explicit(&bin->mask, memory_order_relaxed);
  int64_t delta = (int64_t)__builtin_popcountll(mask) - (int64_t)__builtin_popcountll(old);
  bin_write_begin(bin);
  if (bin->cur) {
    slab_fold(bin, bin->cur); /* bounds the pending count of a slab that stays current */
    tslab_slab_used_add(bin->cur, delta);
  }
  tslab_bump(&bin->taken, (uint64_t)delta);
  atomic_store_explicit(&bin->mask, mask, memory_order_relaxed);
  bin_write_end(bin);
}

/* Owner: move s off list `from` and/or onto list `to` (either may be NULL)
 * in one write section. A slab hands its pending frees over as it moves:
 * parked slabs are not walked, and a fold is cheap next to a list change. */
static void bin_list_move(tslab_bin_t* bin, tslab_run_t** from, tslab_run_t** to, tslab_run_t* s, uint8_t which) {
  bin_write_begin(bin);
  slab_fold(bin, s);
  if (from) list_remove(from, s);
  if (to) list_push(to, s, which);
  bin_write_end(bin);
}

#if TSLAB_COUNTERS
/* One try at reading the bin: frees (the bin's count plus the pending frees
 * of its current and ready slabs, or of the current slab only when `walk`
 * is false) and allocations. False when the owner changed the bin meanwhile. */
static bool bin_try_read(tslab_bin_t* bin, bool walk, uint64_t* allocs, uint64_t* frees) {
  /* WALK_MAX: more slabs than granules in the largest reservation (1 TiB)
   * means the walk went round a list changed under it. */
  enum { CHECK_EVERY = 64, WALK_MAX = 1u << 26 };
  uint64_t seq = atomic_load_explicit(&bin->seq, memory_order_acquire);
  if (seq & 1) return false;
  uint64_t f = atomic_load_explicit(&bin->frees, memory_order_relaxed);
  tslab_run_t* cur = LINK_LOAD(bin->cur);
  if (cur) f += tslab_slab_pending(cur);
  if (walk) {
    uint32_t n = 0;
    for (tslab_run_t* s = LINK_LOAD(bin->ready); s; s = LINK_LOAD(s->bin_next)) {
      f += tslab_slab_pending(s);
      /* A list changed under the walk can be cut short or even loop. */
      if (++n % CHECK_EVERY == 0 && (atomic_load_explicit(&bin->seq, memory_order_acquire) != seq || n >= WALK_MAX))
        return false;
    }
  }
  /* The mask last: allocations read after the frees cover every slot freed. */
  uint64_t taken = atomic_load_explicit(&bin->taken, memory_order_relaxed);
  uint64_t mask = atomic_load_explicit(&bin->mask, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&bin->seq, memory_order_relaxed) != seq) return false;
  *allocs = taken - (uint64_t)__builtin_popcountll(mask);
  *frees = f;
  return true;
}
#endif

TSLAB_INTERNAL void tslab_bin_read(tslab_bin_t* bin, uint64_t* allocs, uint64_t* frees) {
#if TSLAB_COUNTERS
  /* A walk that keeps failing (a long ready list under an owner busy in its
   * slow path) gives way to a short read, which leaves out pending frees of
   * ready slabs: a lower bound. The bin remembers the highest count it
   * reported, so counts never go backwards. */
  enum { WALKS = 8 };
  uint64_t f = 0;
  for (unsigned tries = 0;; tries++) {
    if (bin_try_read(bin, tries < WALKS, allocs, &f)) break;
    if (tries > 64) sched_yield();
  }
  uint64_t seen = atomic_load_explicit(&bin->frees_reported, memory_order_relaxed);
  if (f < seen) f = seen;
  atomic_store_explicit(&bin->frees_reported, f, memory_order_relaxed);
  *frees = f;
#else
  /* Counters compiled out: `taken` and `frees` are not kept. */
  (void)bin;
  *allocs = *frees = 0;
#endif
}

static void notify_unlink_locked(tslab_tcache_t* tc, tslab_run_t* s) {
  if (atomic_load_explicit(&s->notify, memory_order_relaxed) != TSLAB_NOTIFY_QUEUED) return;
  if (s->notify_prev)
    s->notify_prev->notify_next = s->notify_next;
  else
    tc->notify_head = s->notify_next;
  if (s->notify_next) s->notify_next->notify_prev = s->notify_prev;
  s->notify_next = s->notify_prev = NULL;
  atomic_store_explicit(&s->notify, TSLAB_NOTIFY_NONE, memory_order_relaxed);
}

/* Owner: take s out of its bin for good (it is being retired). A notifier
 * queues a slab only by turning ARMED into QUEUED under this cache's mutex,
 * so the mutex is needed only when that may have happened. */
TSLAB_INTERNAL void tslab_tcache_unlink_run(tslab_tcache_t* tc, tslab_bin_t* bin, tslab_run_t* s) {
  if (s->list == TSLAB_LIST_CUR)
    bin_set_cur(bin, NULL);
  else if (s->list == TSLAB_LIST_READY)
    bin_list_move(bin, &bin->ready, NULL, s, TSLAB_LIST_NONE);
  else if (s->list == TSLAB_LIST_PARKED)
    bin_list_move(bin, &bin->parked, NULL, s, TSLAB_LIST_NONE);
  s->list = TSLAB_LIST_NONE;
  uint32_t st = TSLAB_NOTIFY_ARMED;
  if (!atomic_compare_exchange_strong_explicit(&s->notify, &st, TSLAB_NOTIFY_NONE, memory_order_seq_cst,
                                               memory_order_seq_cst) &&
      st == TSLAB_NOTIFY_QUEUED) {
    pthread_mutex_lock(&tc->mu);
    notify_unlink_locked(tc, s);
    pthread_mutex_unlock(&tc->mu);
  }
  atomic_store_explicit(&s->owner, NULL, memory_order_release);
}

/* Pooled policy: keep an empty slab that left its era for this cache's next
 * slab of the class, while the cache keeps at most pool_resident_max bytes
 * of them. Any thread may call it (closer, detached frees, the owner). */
TSLAB_INTERNAL bool tslab_tcache_spare_push(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s) {
  size_t bytes = (size_t)s->granules << TSLAB_GRANULE_SHIFT;
  bool kept = false;
  pthread_mutex_lock(&tc->mu);
  if (tc->spare_bytes + bytes <= a->config.pool_resident_max) {
    atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
    atomic_store_explicit(&s->mode, TSLAB_DETACHED, memory_order_relaxed);
    s->list = TSLAB_LIST_SPARE;
    s->heap_next = atomic_load_explicit(&tc->spare[s->cls], memory_order_relaxed);
    atomic_store_explicit(&tc->spare[s->cls], s, memory_order_relaxed);
    tc->spare_bytes += bytes;
    atomic_fetch_add_explicit(&a->spare_slabs, 1, memory_order_relaxed);
    kept = true;
  }
  pthread_mutex_unlock(&tc->mu);
  return kept;
}

/* Owner: an empty slab of class cls kept by this cache, or NULL. */
TSLAB_INTERNAL tslab_run_t* tslab_tcache_spare_pop(tslab_t* a, tslab_tcache_t* tc, uint32_t cls) {
  if (!atomic_load_explicit(&tc->spare[cls], memory_order_relaxed)) return NULL;
  pthread_mutex_lock(&tc->mu);
  tslab_run_t* s = atomic_load_explicit(&tc->spare[cls], memory_order_relaxed);
  if (s) {
    atomic_store_explicit(&tc->spare[cls], s->heap_next, memory_order_relaxed);
    s->heap_next = NULL;
    tc->spare_bytes -= (size_t)s->granules << TSLAB_GRANULE_SHIFT;
    atomic_fetch_sub_explicit(&a->spare_slabs, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&tc->mu);
  return s;
}

/* The cache's spares go back to the heap (thread exit, flush). */
static void spares_to_heap(tslab_t* a, tslab_tcache_t* tc) {
  tslab_run_t* list = NULL;
  pthread_mutex_lock(&tc->mu);
  for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
    tslab_run_t* s = atomic_load_explicit(&tc->spare[c], memory_order_relaxed);
    while (s) {
      tslab_run_t* next = s->heap_next;
      s->list = TSLAB_LIST_NONE;
      s->heap_next = list;
      list = s;
      atomic_fetch_sub_explicit(&a->spare_slabs, 1, memory_order_relaxed);
      s = next;
    }
    atomic_store_explicit(&tc->spare[c], NULL, memory_order_relaxed);
  }
  tc->spare_bytes = 0;
  pthread_mutex_unlock(&tc->mu);
  if (list) tslab_heap_retire_list(a, list, false);
}

/* Owner: a parked slab has free slots again. */
TSLAB_INTERNAL void tslab_tcache_ready(tslab_bin_t* bin, tslab_run_t* s) {
  bin_list_move(bin, &bin->parked, &bin->ready, s, TSLAB_LIST_READY);
}

/* Remote freer: the first remote free to an ARMED slab queues it for its
 * owner. The owner check under the mutex rejects a stale owner pointer. */
TSLAB_INTERNAL void tslab_tcache_notify(tslab_tcache_t* tc, tslab_run_t* s) {
  pthread_mutex_lock(&tc->mu);
  uint32_t expected = TSLAB_NOTIFY_ARMED;
  if (atomic_load_explicit(&s->owner, memory_order_relaxed) == tc &&
      atomic_compare_exchange_strong_explicit(&s->notify, &expected, TSLAB_NOTIFY_QUEUED,
                                              memory_order_seq_cst, memory_order_relaxed)) {
    s->notify_prev = NULL;
    s->notify_next = tc->notify_head;
    if (tc->notify_head) tc->notify_head->notify_prev = s;
    tc->notify_head = s;
    atomic_store_explicit(&tc->notify_pending, 1, memory_order_release);
  }
  pthread_mutex_unlock(&tc->mu);
}

/* Owner, in its busy window: a slab of an ACTIVE era got remote frees or
 * emptied; put it where it belongs. */
static void settle(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s) {
  tslab_bin_t* bin = s->bin;
  if (tslab_slab_used(s) == 0 && s->list != TSLAB_LIST_CUR) {
    tslab_tcache_unlink_run(tc, bin, s);
    tslab_slab_retire(a, s);
  } else if (s->list == TSLAB_LIST_PARKED && tslab_slab_used(s) < s->capacity) {
    tslab_tcache_ready(bin, s);
  }
}

/* Owner, in its busy window: handle the slabs remote freers queued. Slabs of
 * eras that are closing are left to the closer. */
static void drain_notifications(tslab_t* a, tslab_tcache_t* tc) {
  if (!atomic_load_explicit(&tc->notify_pending, memory_order_acquire)) return;
  pthread_mutex_lock(&tc->mu);
  tslab_run_t* list = tc->notify_head;
  tc->notify_head = NULL;
  atomic_store_explicit(&tc->notify_pending, 0, memory_order_relaxed);
  for (tslab_run_t* s = list; s; s = s->notify_next)
    atomic_store_explicit(&s->notify, TSLAB_NOTIFY_NONE, memory_order_relaxed);
  pthread_mutex_unlock(&tc->mu);
  while (list) {
    tslab_run_t* s = list;
    list = s->notify_next;
    s->notify_next = s->notify_prev = NULL;
    uint64_t era = atomic_load_explicit(&s->era, memory_order_relaxed);
    if (tslab_epoch_state(a, era) != TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE)) continue;
    tslab_slab_collect(s, a);
    settle(a, tc, s);
  }
}

/* Owner: a slab that is not current is full; park it armed for notification. */
static void park(tslab_bin_t* bin, tslab_run_t* s) {
  if (tslab_slab_arm(s))
    bin_list_move(bin, NULL, &bin->ready, s, TSLAB_LIST_READY);
  else
    bin_list_move(bin, NULL, &bin->parked, s, TSLAB_LIST_PARKED);
}

static void make_current(tslab_bin_t* bin, tslab_run_t* s) {
  bin_set_mask(bin, 0);
  tslab_run_t* old = bin->cur;
  if (old) park(bin, old);
  s->list = TSLAB_LIST_CUR;
  bin_set_cur(bin, s);
}

/* Owner: set aside the free slots of the next bitmap word of the current
 * slab that has any, scanning round from where the last one was taken (frees
 * do not move the cursor back: the wrap-around finds them). The slots stay
 * free in the bitmap until handed out, so dropping a mask (detach, flush)
 * only gives back their count. */
static bool take_word(tslab_bin_t* bin) {
  tslab_run_t* s = bin->cur;
  for (uint32_t i = 0, w = s->hint; i < s->words; i++, w = w + 1 == s->words ? 0 : w + 1) {
    uint64_t avail = ~atomic_load_explicit(&s->alloc[w], memory_order_relaxed);
    if (avail) {
      bin->base = s->start + (size_t)w * 64 * s->obj_size;
      bin->word = &s->alloc[w];
      bin_set_mask(bin, avail);
      s->hint = w + 1 == s->words ? 0 : w + 1;
      return true;
    }
  }
  return false;
}

/* Allocation slow path, in the busy window with `era` ACTIVE and the bin's
 * mask empty: the next word of the current slab, then its remote frees, then
 * notified slabs, then ready slabs, then a new slab from the heap. */
TSLAB_INTERNAL bool tslab_bin_refill(tslab_t* a, tslab_tcache_t* tc, tslab_bin_t* bin, uint64_t era) {
  uint64_t wall = 0, cpu = 0;
  bool sampled = tslab_sample_begin(a, &wall, &cpu);
  bool ok = true;
  tslab_bump(&bin->slow, 1);
  tslab_bin_claim(a, tc, bin, era);
  if (bin->cur && take_word(bin)) goto done;
  if (bin->cur && tslab_slab_collect(bin->cur, a) > 0 && take_word(bin)) goto done;
  drain_notifications(a, tc);
  if (bin->cur && take_word(bin)) goto done;
  while (bin->ready) {
    /* A ready slab that turns out full is parked by the next make_current;
     * arming puts it straight back on the ready list if frees raced in. */
    tslab_run_t* s = bin->ready;
    bin_list_move(bin, &bin->ready, NULL, s, TSLAB_LIST_NONE);
    tslab_slab_collect(s, a);
    make_current(bin, s);
    if (take_word(bin)) goto done;
  }
  tslab_run_t* s = tslab_slab_new(a, tc, bin->cls, era);
  if (s) {
    s->bin = bin;
    make_current(bin, s);
    ok = take_word(bin);
  } else {
    ok = false;
  }
done:
  if (sampled) tslab_sample_end(a, wall, cpu);
  return ok;
}

/* ---- epoch close: detach a slot's slabs ---- */

static void detach_list(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, tslab_run_t** detached) {
  while (s) {
    tslab_run_t* next = s->bin_next;
    notify_unlink_locked(tc, s);
    s->detach_delta = tslab_slab_detach(a, s);
    LINK_STORE(s->bin_next, *detached);
    *detached = s;
    s = next;
  }
}

/* Closer, with tc quiescent for `era` (section 6.1 step 4a): detach the
 * slot's slabs onto the closer's list. */
TSLAB_INTERNAL void tslab_tcache_detach_slot(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, uint64_t era,
                                             tslab_run_t** detached, tslab_fold_t* sum) {
  tslab_fold_t mine = {0};
  pthread_mutex_lock(&tc->mu);
  uint64_t* used = tc->slot_classes[slot];
  for (uint32_t word = 0; word < 2; word++) {
    for (uint64_t m = used[word]; m; m &= m - 1) {
      uint32_t c = word * 64 + (uint32_t)__builtin_ctzll(m);
      tslab_bin_t* bin = tslab_bin_at(a, tc, slot, c);
      if (atomic_load_explicit(&bin->era, memory_order_relaxed) != era) continue;
      bin_set_mask(bin, 0);
      tslab_run_t* cur = bin->cur;
      bin_set_cur(bin, NULL);
      for (tslab_run_t* s = bin->ready; s; s = s->bin_next) slab_fold(bin, s);
      if (cur) {
        LINK_STORE(cur->bin_next, NULL);
        detach_list(a, tc, cur, detached);
      }
      tslab_run_t* ready = bin->ready;
      LINK_STORE(bin->ready, NULL);
      detach_list(a, tc, ready, detached);
      detach_list(a, tc, bin->parked, detached);
      bin->parked = NULL;
      tslab_epoch_fold_bin(a, bin, c, &mine);
      atomic_store_explicit(&bin->era, 0, memory_order_relaxed);
    }
    used[word] = 0;
  }
  pthread_mutex_unlock(&tc->mu);
  if (!mine.allocs && !mine.frees && !mine.slow) return;
  atomic_fetch_add_explicit(&tc->folded_allocs, mine.allocs, memory_order_relaxed);
  atomic_fetch_add_explicit(&tc->folded_frees, mine.frees, memory_order_relaxed);
  atomic_fetch_add_explicit(&tc->folded_xfrees, mine.xfrees, memory_order_relaxed);
  atomic_fetch_add_explicit(&tc->folded_slow, mine.slow, memory_order_relaxed);
  sum->allocs += mine.allocs;
  sum->frees += mine.frees;
  sum->xfrees += mine.xfrees;
  sum->slow += mine.slow;
  sum->alloc_bytes += mine.alloc_bytes;
  sum->free_bytes += mine.free_bytes;
}

/* ---- creation, lookup, exit ---- */

/* Detach a cache from its thread and put it on the abandoned list, for the
 * next new thread to adopt. Registry mutex held. */
TSLAB_INTERNAL void tslab_tcache_park_locked(tslab_t* a, tslab_tcache_t* tc) {
  atomic_store_explicit(&tc->tid, 0, memory_order_relaxed);
  tc->abandoned_next = a->abandoned;
  a->abandoned = tc;
  atomic_fetch_sub_explicit(&a->nattached, 1, memory_order_relaxed);
}

/* Fork child: a thread that vanished inside a statistics write section
 * would leave readers waiting for it forever; close its sections. */
TSLAB_INTERNAL void tslab_tcache_end_sections(tslab_t* a, tslab_tcache_t* tc) {
  for (uint32_t i = 0; i < a->ring_size * TSLAB_CLASSES; i++) {
    uint64_t seq = atomic_load_explicit(&tc->bins[i].seq, memory_order_relaxed);
    if (seq & 1) atomic_store_explicit(&tc->bins[i].seq, seq + 1, memory_order_release);
  }
}

static void thread_exit(void* arg);

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

static size_t tcache_bytes(tslab_t* a) {
  return sizeof(tslab_tcache_t) + (size_t)a->ring_size * TSLAB_CLASSES * sizeof(tslab_bin_t) +
         (size_t)a->ring_size * sizeof(uint64_t[2]);
}

static tslab_tcache_t* tcache_acquire(tslab_t* a) {
  pthread_mutex_lock(&a->reg_mu);
  tslab_tcache_t* tc = a->abandoned;
  if (tc) {
    a->abandoned = tc->abandoned_next;
    tc->abandoned_next = NULL;
  } else {
    size_t bytes = tcache_bytes(a);
    tc = (tslab_tcache_t*)tslab_os_map(bytes);
    if (tc) {
      tc->bytes = bytes;
      tc->inst = a;
      tc->slot_classes = (uint64_t(*)[2])(void*)&tc->bins[(size_t)a->ring_size * TSLAB_CLASSES];
      for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
        for (uint32_t slot = 0; slot < a->ring_size; slot++) {
          tslab_bin_t* bin = tslab_bin_at(a, tc, slot, c);
          bin->cls = c;
          bin->size = tslab_classes[c].size;
        }
      }
      pthread_mutex_init(&tc->mu, NULL);
      tc->reg_next = a->caches;
      a->caches = tc;
      atomic_fetch_add_explicit(&a->ncaches, 1, memory_order_relaxed);
    }
  }
  if (tc) {
    atomic_store_explicit(&tc->tid, tslab_thread_id(), memory_order_relaxed);
    atomic_fetch_add_explicit(&a->nattached, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&a->reg_mu);
  return tc;
}

/* Make (a, tc) the thread's most recent pair, keeping the previous one in
 * the array unless its instance was destroyed. */
static bool tls_remember(tslab_t* a, tslab_tcache_t* tc) {
  tslab_tls_entry_t* e = &tslab_tls_last;
  if (e->inst) {
    pthread_mutex_lock(&live_mu);
    bool alive = instance_alive_locked(e->inst, e->id);
    pthread_mutex_unlock(&live_mu);
    if (alive) {
      if (tls_extra_len == tls_extra_cap) {
        size_t cap = tls_extra_cap ? tls_extra_cap * 2 : 8;
        tslab_tls_entry_t* n = realloc(tls_extra, cap * sizeof *n);
        if (!n) return false;
        tls_extra = n;
        tls_extra_cap = cap;
      }
      tls_extra[tls_extra_len++] = *e;
    }
  }
  *e = (tslab_tls_entry_t){a, a->id, tc};
  return true;
}

TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_slow(tslab_t* a) {
  if (!a) return NULL;
  for (size_t i = 0; i < tls_extra_len; i++) {
    if (tls_extra[i].inst == a && tls_extra[i].id == a->id) {
      tslab_tls_entry_t hit = tls_extra[i];
      if (tslab_tls_last.inst)
        tls_extra[i] = tslab_tls_last;
      else
        tls_extra[i] = tls_extra[--tls_extra_len];
      tslab_tls_last = hit;
      return hit.tc;
    }
  }
  pthread_once(&exit_once, make_exit_key);
  tslab_tcache_t* tc = tcache_acquire(a);
  if (!tc) return NULL;
  if (!tls_remember(a, tc)) {
    pthread_mutex_lock(&a->reg_mu);
    tslab_tcache_park_locked(a, tc);
    pthread_mutex_unlock(&a->reg_mu);
    return NULL;
  }
  pthread_setspecific(exit_key, (void*)1);
  return tc;
}

/* Owner: collect every owned slab of active eras and give empty ones back. */
static void tcache_flush(tslab_t* a, tslab_tcache_t* tc) {
  spares_to_heap(a, tc);
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    tslab_busy_enter(tc);
    uint64_t st = atomic_load_explicit(&a->ring[slot].state, memory_order_acquire);
    if (TSLAB_STATE_OF(st) == TSLAB_EPOCH_ACTIVE) {
      uint64_t era = TSLAB_STATE_ERA(st);
      drain_notifications(a, tc);
      for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
        tslab_bin_t* bin = tslab_bin_at(a, tc, slot, c);
        if (atomic_load_explicit(&bin->era, memory_order_relaxed) != era) continue;
        tslab_run_t* lists[2] = {bin->ready, bin->parked};
        for (int l = 0; l < 2; l++) {
          for (tslab_run_t* s = lists[l]; s;) {
            tslab_run_t* next = s->bin_next;
            tslab_slab_collect(s, a);
            settle(a, tc, s);
            s = next;
          }
        }
        bin_set_mask(bin, 0);
        tslab_run_t* cur = bin->cur;
        if (cur) {
          tslab_slab_collect(cur, a);
          if (tslab_slab_used(cur) == 0) {
            tslab_tcache_unlink_run(tc, bin, cur);
            tslab_slab_retire(a, cur);
          }
        }
      }
    }
    tslab_busy_exit(tc);
  }
}

TSLAB_API void tslab_thread_flush(tslab_t* a) {
  tslab_tcache_t* tc = a ? tslab_tcache_get(a) : NULL;
  if (tc) tcache_flush(a, tc);
}

static void abandon(tslab_t* a, tslab_tcache_t* tc) {
  tcache_flush(a, tc);
  pthread_mutex_lock(&a->reg_mu);
  tslab_tcache_park_locked(a, tc);
  pthread_mutex_unlock(&a->reg_mu);
}

static void abandon_entry(tslab_tls_entry_t* e) {
  if (e->inst && instance_alive_locked(e->inst, e->id)) abandon(e->inst, e->tc);
  e->inst = NULL;
}

/* Thread exit: flush and abandon this thread's caches of live instances. The
 * live-instance mutex is held so no instance is destroyed meanwhile. */
static void thread_exit(void* arg) {
  (void)arg;
  pthread_mutex_lock(&live_mu);
  abandon_entry(&tslab_tls_last);
  for (size_t i = 0; i < tls_extra_len; i++) abandon_entry(&tls_extra[i]);
  pthread_mutex_unlock(&live_mu);
  free(tls_extra);
  tls_extra = NULL;
  tls_extra_len = tls_extra_cap = 0;
}

/* tslab_destroy: the instance stops being live for exiting threads. */
TSLAB_INTERNAL void tslab_tcache_forget_instance(tslab_t* a) {
  pthread_mutex_lock(&live_mu);
  for (size_t i = 0; i < live_len; i++) {
    if (live_list[i] == a) {
      live_list[i] = live_list[--live_len];
      break;
    }
  }
  pthread_mutex_unlock(&live_mu);
  if (tslab_tls_last.inst == a) tslab_tls_last.inst = NULL;
}

TSLAB_INTERNAL void tslab_tcache_destroy_all(tslab_t* a) {
  tslab_tcache_t* tc = a->caches;
  while (tc) {
    tslab_tcache_t* next = tc->reg_next;
    pthread_mutex_destroy(&tc->mu);
    tslab_os_unmap(tc, tc->bytes);
    tc = next;
  }
  a->caches = a->abandoned = NULL;
}

/* ---- checking ---- */

#define REPORT(...)                                                      \
  do {                                                                   \
    if (bad++ == 0 && report && cap) snprintf(report, cap, __VA_ARGS__); \
  } while (0)

static size_t check_list(tslab_tcache_t* tc, tslab_run_t* s, uint8_t which, uint64_t era, uint32_t cls,
                         char* report, size_t cap) {
  size_t bad = 0;
  for (; s; s = s->bin_next) {
    if (s->list != which) REPORT("slab %p is in list %d but says %d", (void*)s->start, which, s->list);
    if (atomic_load(&s->owner) != tc) REPORT("slab %p in a bin is owned by another cache", (void*)s->start);
    if (atomic_load(&s->era) != era || s->cls != cls) REPORT("slab %p is in the wrong bin", (void*)s->start);
    if (atomic_load(&s->kind) != TSLAB_RUN_SLAB)
      REPORT("bin holds a run of kind %d", (int)atomic_load(&s->kind));
    if (which == TSLAB_LIST_CUR) break;
  }
  return bad;
}

/* Every bin's slabs are owned by its cache and belong to its era and class;
 * every owned slab is in exactly one list. The world is stopped. */
TSLAB_INTERNAL size_t tslab_tcache_check(tslab_t* a, char* report, size_t cap) {
  size_t bad = 0;
  pthread_mutex_lock(&a->reg_mu);
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next) {
    for (uint32_t slot = 0; slot < a->ring_size; slot++) {
      uint64_t st = atomic_load(&a->ring[slot].state);
      for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
        tslab_bin_t* bin = tslab_bin_at(a, tc, slot, c);
        if (!bin->cur && !bin->ready && !bin->parked) continue;
        uint64_t era = atomic_load(&bin->era);
        if (era == 0 || era != TSLAB_STATE_ERA(st) || TSLAB_STATE_OF(st) != TSLAB_EPOCH_ACTIVE)
          REPORT("cache bin of slot %u holds slabs of era %llu, not active", slot, (unsigned long long)era);
        size_t n = check_list(tc, bin->cur, TSLAB_LIST_CUR, era, c, bad ? NULL : report, cap);
        n += check_list(tc, bin->ready, TSLAB_LIST_READY, era, c, bad || n ? NULL : report, cap);
        n += check_list(tc, bin->parked, TSLAB_LIST_PARKED, era, c, bad || n ? NULL : report, cap);
        bad += n;
      }
    }
  }
  pthread_mutex_unlock(&a->reg_mu);
  return bad;
}
