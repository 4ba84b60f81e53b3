/* Thread caches: one per (thread, instance), found through a thread-local
 * table, owning slabs per (ring slot, class) bin and a bump state per ring
 * slot. This file holds the allocation slow paths (bin refill, block refill),
 * registration as a user of an era, notification of remote frees, detaching
 * a slot at epoch close, and flushing/abandoning caches at thread exit
 * (docs/ARCHITECTURE.md sections 3, 6 and 7). It never calls the C library's
 * allocator: its tables come from mmap. */
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "internal.h"

TSLAB_INTERNAL __thread tslab_tls_entry_t tslab_tls_last;
#if !defined(__x86_64__)
TSLAB_INTERNAL __thread char tslab_thread_tag;
#endif

/* A growable array in its own mapping. */
typedef struct map_array {
  void* items;
  size_t len, cap, bytes;
} map_array_t;

static bool map_array_reserve(map_array_t* v, size_t item, size_t want) {
  if (want <= v->cap) return true;
  size_t cap = v->cap ? v->cap : 16;
  while (cap < want) cap *= 2;
  size_t bytes = cap * item;
  void* n = tslab_os_map(bytes);
  if (!n) return false;
  if (v->items) {
    memcpy(n, v->items, v->len * item);
    tslab_os_unmap(v->items, v->bytes);
  }
  v->items = n;
  v->cap = cap;
  v->bytes = bytes;
  return true;
}

/* This thread's other (instance, cache) pairs. */
static __thread map_array_t tls_extra;
/* The value of `destroyed` when this thread last dropped entries of
 * destroyed instances from tls_extra. */
static __thread uint64_t tls_pruned;
/* The thread's exit handler has run and given its caches back. The C
 * library still frees the thread's own buffers after every key destructor
 * (strerror's, dlerror's): a cache taken for such a free would never be
 * given back, since no destructor runs again. Taking a cache (an allocation
 * in a later destructor round, which runs the handler again) clears it. */
static __thread bool tls_exited;

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Live instances, so that a thread exiting after an instance was destroyed
 * never touches its memory. `destroyed` counts destructions: threads prune
 * their tables when it moved. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static map_array_t live;
static _Atomic uint64_t destroyed;

static tslab_t** live_items(void) { return (tslab_t**)live.items; }

TSLAB_INTERNAL bool tslab_instance_register(tslab_t* a) {
  pthread_mutex_lock(&live_mu);
  bool ok = map_array_reserve(&live, sizeof(tslab_t*), live.len + 1);
  if (ok) live_items()[live.len++] = a;
  pthread_mutex_unlock(&live_mu);
  return ok;
}

/* For fork handling (src/fork.c): the live instances, under live_mu. */
TSLAB_INTERNAL void tslab_live_lock(void) { pthread_mutex_lock(&live_mu); }
TSLAB_INTERNAL void tslab_live_unlock(void) { pthread_mutex_unlock(&live_mu); }
TSLAB_INTERNAL size_t tslab_live_count(void) { return live.len; }
TSLAB_INTERNAL tslab_t* tslab_live_at(size_t i) { return live_items()[i]; }

static tslab_tls_entry_t* extra_items(void) { return (tslab_tls_entry_t*)tls_extra.items; }

/* Is tc one of the calling thread's caches? An entry of a destroyed
 * instance may name memory a new instance's cache now occupies: the entry
 * counts only when its id is that of the cache's instance. */
TSLAB_INTERNAL bool tslab_tls_owns(const tslab_tcache_t* tc) {
  uint64_t id = tc->inst->id;
  if (tslab_tls_last.tc == tc && tslab_tls_last.id == id) return true;
  for (size_t i = 0; i < tls_extra.len; i++)
    if (extra_items()[i].tc == tc && extra_items()[i].id == id) return true;
  return false;
}

/* An empty entry: no instance, and an id no instance has (ids start at 1),
 * so the fast paths' id compare alone tells a hit (section 6). */
static void tls_entry_clear(tslab_tls_entry_t* e) { *e = (tslab_tls_entry_t){NULL, 0, NULL}; }

static bool instance_alive_locked(tslab_t* a, uint64_t id) {
  for (size_t i = 0; i < live.len; i++)
    if (live_items()[i] == a && a->id == id) return true;
  return false;
}

/* Drop the entries of destroyed instances from this thread's table, when an
 * instance was destroyed since the last look (defect: the table grew with
 * every short-lived instance a thread had used). */
static void tls_prune(void) {
  uint64_t d = atomic_load_explicit(&destroyed, memory_order_acquire);
  if (d == tls_pruned) return;
  pthread_mutex_lock(&live_mu);
  size_t n = 0;
  for (size_t i = 0; i < tls_extra.len; i++)
    if (instance_alive_locked(extra_items()[i].inst, extra_items()[i].id)) extra_items()[n++] = extra_items()[i];
  tls_extra.len = n;
  if (tslab_tls_last.inst && !instance_alive_locked(tslab_tls_last.inst, tslab_tls_last.id))
    tls_entry_clear(&tslab_tls_last);
  pthread_mutex_unlock(&live_mu);
  tls_pruned = d;
}

/* ---- bins ---- */

/* The bin lists and block lists are the owner's; statistics readers walk
 * them (section 9): links are stored with release and loaded with acquire,
 * so a reader that reaches a run also sees its format (plain moves on
 * x86-64). */
#define LINK_STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELEASE)
#define LINK_LOAD(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

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

/* ---- counting frees (docs/ARCHITECTURE.md section 9) ---- */

/* A write section: statistics readers retry while seq is odd or moved. */
static void write_begin(_Atomic uint64_t* seq) {
#if TSLAB_COUNTERS
  atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
#else
  (void)seq;
#endif
}

static void write_end(_Atomic uint64_t* seq) {
#if TSLAB_COUNTERS
  atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1, memory_order_release);
#else
  (void)seq;
#endif
}

/* In a write section: s's pending local frees join `frees`. */
static void run_fold(_Atomic uint64_t* frees, tslab_run_t* s) {
  uint64_t u = atomic_load_explicit(&s->usage, memory_order_relaxed);
  if (u >> TSLAB_USED_BITS) {
    atomic_store_explicit(&s->usage, u & TSLAB_USED_MASK, memory_order_relaxed);
    tslab_bump(frees, u >> TSLAB_USED_BITS);
  }
}

/* Owner, or the closer with the owner quiescent for the bin's era: make s
 * (or nobody) the current slab. The old one's pending frees join the bin's
 * count in the same section: it may be parked, where readers do not look. */
static void bin_set_cur(tslab_bin_t* bin, tslab_run_t* s) {
  write_begin(&bin->seq);
  if (bin->cur) run_fold(&bin->frees, bin->cur);
  LINK_STORE(bin->cur, s);
  write_end(&bin->seq);
}

/* In a write section of the bin, by its owner or the closer as above:
 * replace the set-aside slots of the current slab by `mask` and `next` (the
 * caller has set their words, or they are 0), with no hot slot. Set-aside
 * slots count in the slab's `used` and the bin's `taken`, so the allocation
 * fast path needs neither. */
static void bin_put_masks(tslab_bin_t* bin, uint64_t mask, uint64_t next) {
  int64_t delta = (int64_t)(tslab_popcount(mask) + tslab_popcount(next)) - (int64_t)tslab_bin_aside(bin);
  if (bin->cur) {
    run_fold(&bin->frees, bin->cur); /* bounds the pending count of a slab that stays current */
    tslab_slab_used_add(bin->cur, delta);
  }
  tslab_bump(&bin->taken, (uint64_t)delta);
  tslab_bump(&bin->refilled, (uint64_t)delta);
  atomic_store_explicit(&bin->mask, mask, memory_order_release);
  atomic_store_explicit(&bin->next_mask, next, memory_order_release);
  bin->hot_bit = 0;
  /* A dropped mask keeps no word: a refill that drops it may take none
   * (a full ready slab, then no memory for a new one), and a free into the
   * old word must not feed the mask of whatever slab is current next. */
  if (!mask) bin->word = NULL;
  if (!next) bin->next_word = NULL;
}

/* Drop the bin's set-aside words (their slots stay free in the bitmap). */
static void bin_drop_masks(tslab_bin_t* bin) {
  write_begin(&bin->seq);
  bin_put_masks(bin, 0, 0);
  write_end(&bin->seq);
}

/* In a write section of the bin: k slots left its free stack unused; like
 * a dropped mask, they leave `taken` and `refilled` both, so neither the
 * allocations (taken - masks - stack) nor the frees (taken - refilled) a
 * reader computes change. Stacked slots are free in their slabs' bitmaps
 * and `used` already. */
static void bin_unstacked(tslab_bin_t* bin, uint32_t k) {
  tslab_bump(&bin->taken, (uint64_t)-(int64_t)k);
  tslab_bump(&bin->refilled, (uint64_t)-(int64_t)k);
}

/* Owner, or the closer with the owner quiescent: empty the bin's free
 * stack (F3). The caller settles the slabs (a flush) or detaches them (a
 * close). */
static void bin_drop_stack(tslab_bin_t* bin) {
  uint32_t n = atomic_load_explicit(&bin->stack_len, memory_order_relaxed);
  if (n == 0) return;
  write_begin(&bin->seq);
  atomic_store_explicit(&bin->stack_len, 0, memory_order_relaxed);
  bin_unstacked(bin, n);
  write_end(&bin->seq);
}

/* Owner: slab s, not current, emptied; its stacked slots come off the
 * stack, the others keeping their order, before it settles (F2). */
static void bin_unstack_run(tslab_bin_t* bin, tslab_run_t* s) {
  uint32_t n = atomic_load_explicit(&bin->stack_len, memory_order_relaxed), kept = 0;
  for (uint32_t i = 0; i < n; i++)
    if (bin->stack[i].run != s) kept++;
  if (kept == n) return;
  write_begin(&bin->seq);
  for (uint32_t i = 0, j = 0; i < n; i++)
    if (bin->stack[i].run != s) bin->stack[j++] = bin->stack[i];
  atomic_store_explicit(&bin->stack_len, kept, memory_order_relaxed);
  bin_unstacked(bin, n - kept);
  write_end(&bin->seq);
}

/* Owner: move s off list `from` and/or onto list `to` (either may be NULL)
 * in one write section. A slab hands its pending frees over as it moves:
 * parked slabs are not walked, and a fold is cheap next to a list change. */
static void bin_list_move(tslab_bin_t* bin, tslab_run_t** from, tslab_run_t** to, tslab_run_t* s, uint8_t which) {
  write_begin(&bin->seq);
  run_fold(&bin->frees, s);
  if (from) list_remove(from, s);
  if (to) list_push(to, s, which);
  write_end(&bin->seq);
}

/* The pending frees of a list a reader walks, or false when the list
 * changed under the walk (seq moved) or looped. */
static bool walk_pending(tslab_run_t* s, _Atomic uint64_t* seqp, uint64_t seq, uint64_t* f) {
  /* WALK_MAX: more runs than granules in the largest reservation (1 TiB)
   * means the walk went round a list changed under it. */
  enum { CHECK_EVERY = 64, WALK_MAX = 1u << 26 };
  uint32_t n = 0;
  for (; s; s = LINK_LOAD(s->bin_next)) {
    *f += tslab_slab_pending(s);
    if (++n % CHECK_EVERY == 0 && (atomic_load_explicit(seqp, memory_order_acquire) != seq || n >= WALK_MAX))
      return false;
  }
  return true;
}

#if TSLAB_COUNTERS
/* One try at reading the bin: frees (the bin's count plus the pending frees
 * of its current and ready slabs, or of the current slab only when `walk`
 * is false) and allocations. False when the owner changed the bin meanwhile. */
static bool bin_try_read(tslab_bin_t* bin, bool walk, uint64_t* allocs, uint64_t* frees) {
  uint64_t seq = atomic_load_explicit(&bin->seq, memory_order_acquire);
  if (seq & 1) return false;
  uint64_t f = atomic_load_explicit(&bin->frees, memory_order_relaxed);
  tslab_run_t* cur = LINK_LOAD(bin->cur);
  if (cur) f += tslab_slab_pending(cur);
  if (walk && !walk_pending(LINK_LOAD(bin->ready), &bin->seq, seq, &f)) return false;
  /* Frees first, then `taken`, then the masks and stack: every free read has its
   * allocation counted (section 9), and a slot a free put back into the mask
   * or stack is never counted twice (the free writes them before `taken`). Such a
   * free counts as a free from the same read of `taken` that counts its
   * allocation; `refilled` changes only in a write section. The next word
   * before the mask: a promotion (outside a write section) writes the mask
   * first, so a reader counts its slots once, or twice (an undercount, which
   * the readers' high-water mark hides), never not at all. */
  uint64_t taken = atomic_load_explicit(&bin->taken, memory_order_acquire);
  uint64_t next = atomic_load_explicit(&bin->next_mask, memory_order_acquire);
  uint64_t mask = atomic_load_explicit(&bin->mask, memory_order_acquire);
  uint32_t stacked = atomic_load_explicit(&bin->stack_len, memory_order_relaxed);
  uint64_t refilled = atomic_load_explicit(&bin->refilled, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&bin->seq, memory_order_relaxed) != seq) return false;
  *allocs = taken - (uint64_t)tslab_popcount(mask) - (uint64_t)tslab_popcount(next) - stacked;
  *frees = f + (taken - refilled);
  return true;
}

/* Never report less than before: readers raise the high-water mark with a
 * CAS (they do not serialise). */
static uint64_t monotone(_Atomic uint64_t* reported, uint64_t v) {
  uint64_t seen = atomic_load_explicit(reported, memory_order_relaxed);
  while (v > seen &&
         !atomic_compare_exchange_weak_explicit(reported, &seen, v, memory_order_relaxed, memory_order_relaxed)) {
  }
  return v > seen ? v : seen;
}
#endif

TSLAB_INTERNAL void tslab_bin_read(tslab_bin_t* bin, uint64_t* allocs, uint64_t* frees) {
#if TSLAB_COUNTERS
  /* A walk that keeps failing (a long ready list under an owner busy in its
   * slow path) gives way to a short read, which leaves out pending frees of
   * ready slabs: a lower bound, kept monotone. */
  enum { WALKS = 8 };
  uint64_t al = 0, f = 0;
  for (unsigned tries = 0;; tries++) {
    if (bin_try_read(bin, tries < WALKS, &al, &f)) break;
    if (tries > 64) sched_yield();
  }
  *frees = monotone(&bin->frees_reported, f);
  *allocs = monotone(&bin->allocs_reported, al);
#else
  (void)bin;
  *allocs = *frees = 0;
#endif
}

TSLAB_INTERNAL void tslab_slot_blocks_read(tslab_slot_cache_t* sc, uint64_t* allocs, uint64_t* frees,
                                           uint64_t* alloc_bytes, uint64_t* free_bytes) {
  for (unsigned tries = 0;; tries++) {
    if (tries > 64) sched_yield();
    uint64_t seq = atomic_load_explicit(&sc->seq, memory_order_acquire);
    if (seq & 1) continue;
    uint64_t f = atomic_load_explicit(&sc->bfrees, memory_order_relaxed);
    uint64_t fb = atomic_load_explicit(&sc->bbytes_free, memory_order_relaxed);
    tslab_run_t* blk = LINK_LOAD(sc->blk);
    if (blk) f += tslab_slab_pending(blk);
    if (!walk_pending(LINK_LOAD(sc->full), &sc->seq, seq, &f)) continue;
    uint64_t al = atomic_load_explicit(&sc->ballocs, memory_order_relaxed);
    uint64_t ab = atomic_load_explicit(&sc->bbytes_alloc, memory_order_relaxed);
    if (blk) {
      uint8_t* top = __atomic_load_n(&sc->top, __ATOMIC_RELAXED);
      uint8_t* start = TSLAB_RLOAD(blk->start);
      al += tslab_block_objects(blk, (uint32_t)((size_t)(top - start) >> TSLAB_UNIT_SHIFT));
      ab += (uint64_t)(top - start);
    }
    for (tslab_run_t* b = LINK_LOAD(sc->full); b; b = LINK_LOAD(b->bin_next)) {
      al += TSLAB_RLOAD(b->hint);
      ab += (uint64_t)TSLAB_RLOAD(b->bumped) << TSLAB_UNIT_SHIFT;
    }
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&sc->seq, memory_order_relaxed) != seq) continue;
    *allocs = al;
    *frees = f;
    *alloc_bytes = ab;
    *free_bytes = fb;
    return;
  }
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

/* Owner: take slab s out of its bin for good (it is being retired). A
 * notifier queues a slab only by turning ARMED into QUEUED under this
 * cache's mutex, so the mutex is needed only when that may have happened. */
TSLAB_INTERNAL void tslab_tcache_unlink_run(tslab_tcache_t* tc, tslab_run_t* s) {
  tslab_bin_t* bin = s->bin;
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
      atomic_compare_exchange_strong_explicit(&s->notify, &expected, TSLAB_NOTIFY_QUEUED, memory_order_seq_cst,
                                              memory_order_relaxed)) {
    s->notify_prev = NULL;
    s->notify_next = tc->notify_head;
    if (tc->notify_head) tc->notify_head->notify_prev = s;
    tc->notify_head = s;
    atomic_store_explicit(&tc->notify_pending, 1, memory_order_release);
  }
  pthread_mutex_unlock(&tc->mu);
}

/* ---- blocks of a slot ---- */

/* Owner (or the closer, owner quiescent): the bumping block stops bumping
 * and joins the slot's full list. */
static void slot_stop_block(tslab_slot_cache_t* sc) {
  tslab_run_t* b = sc->blk;
  if (!b) return;
  write_begin(&sc->seq);
  tslab_block_stop(b, sc->top);
  tslab_hook_point(TSLAB_HOOK_BLOCK_STOPPED);
  list_push(&sc->full, b, TSLAB_LIST_FULL);
  tslab_hook_point(TSLAB_HOOK_BLOCK_LISTED);
  LINK_STORE(sc->blk, NULL);
  __atomic_store_n(&sc->top, NULL, __ATOMIC_RELAXED);
  sc->room = 0;
  sc->base = NULL;
  write_end(&sc->seq);
}

/* Owner: a block that stopped bumping drained: its counts move to the slot,
 * and it goes to the cache's hot reserve or the heap. */
static void slot_drop_block(tslab_t* a, tslab_tcache_t* tc, tslab_slot_cache_t* sc, tslab_run_t* b) {
  write_begin(&sc->seq);
  run_fold(&sc->bfrees, b);
  list_remove(&sc->full, b);
  tslab_bump(&sc->ballocs, b->hint);
  tslab_bump(&sc->bbytes_alloc, (uint64_t)b->bumped << TSLAB_UNIT_SHIFT);
  tslab_bump(&sc->bbytes_free, (uint64_t)b->bumped << TSLAB_UNIT_SHIFT);
  write_end(&sc->seq);
  if (!tslab_block_keep(a, tc, b)) tslab_run_retire(a, b);
}

/* The bin starts counting for the slot's era: its cumulative counters'
 * values now are the era's zero (section 9). */
static void bin_count_for_era(tslab_t* a, tslab_tcache_t* tc, tslab_slot_cache_t* sc, tslab_bin_t* bin) {
  /* A bin is set up the first time it is used: a cache has one per (ring
   * slot, class), most never used, and writing them all at creation would
   * make every page of them resident (hundreds of KiB per thread). */
  if (!bin->size) {
    bin->cls = (uint32_t)((size_t)(bin - tc->bins) >> a->ring_shift);
    bin->size = tslab_classes[bin->cls].size;
  }
  if (tslab_slot_counts_class(sc, bin->cls)) return;
  uint64_t bit = 1ull << (bin->cls & 63);
  uint64_t al, fr;
  tslab_bin_read(bin, &al, &fr);
  TSLAB_RSTORE(bin->base_allocs, al);
  TSLAB_RSTORE(bin->base_frees, fr);
  TSLAB_RSTORE(bin->base_xfrees, atomic_load_explicit(&bin->xfrees, memory_order_relaxed));
  TSLAB_RSTORE(bin->base_slow, atomic_load_explicit(&bin->slow, memory_order_relaxed));
  atomic_store_explicit(&sc->classes[bin->cls >> 6],
                        atomic_load_explicit(&sc->classes[bin->cls >> 6], memory_order_relaxed) | bit,
                        memory_order_release);
  if (!(atomic_load_explicit(&tc->ever_classes[bin->cls >> 6], memory_order_relaxed) & bit))
    atomic_store_explicit(&tc->ever_classes[bin->cls >> 6],
                          atomic_load_explicit(&tc->ever_classes[bin->cls >> 6], memory_order_relaxed) | bit,
                          memory_order_release);
}

TSLAB_INTERNAL uint64_t tslab_class_slabs(tslab_t* a, uint32_t cls) {
  uint64_t n = atomic_load_explicit(&a->cls_slabs[cls], memory_order_relaxed);
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
    n += atomic_load_explicit(&tc->cls_slabs[cls], memory_order_relaxed);
  return n;
}

TSLAB_INTERNAL tslab_bin_t* tslab_tcache_count_bin(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t cls) {
  tslab_bin_t* bin = tslab_bin(a, tc, era, cls);
  bin_count_for_era(a, tc, &tc->slots[era & a->ring_mask], bin);
  return bin;
}

/* The slot starts counting for era: its block counters' values now are the
 * era's zero (section 9), and its budget of block bytes is the era's. */
static void slot_count_for_era(tslab_t* a, tslab_slot_cache_t* sc, uint64_t era) {
  sc->budget = era == 1 ? 0 : a->config.block_budget;
  write_begin(&sc->seq);
  TSLAB_RSTORE(sc->base_bfrees, atomic_load_explicit(&sc->bfrees, memory_order_relaxed));
  TSLAB_RSTORE(sc->base_bxfrees, atomic_load_explicit(&sc->bxfrees, memory_order_relaxed));
  TSLAB_RSTORE(sc->base_ballocs, atomic_load_explicit(&sc->ballocs, memory_order_relaxed));
  TSLAB_RSTORE(sc->base_bslow, atomic_load_explicit(&sc->bslow, memory_order_relaxed));
  TSLAB_RSTORE(sc->base_bbytes_alloc, atomic_load_explicit(&sc->bbytes_alloc, memory_order_relaxed));
  TSLAB_RSTORE(sc->base_bbytes_free, atomic_load_explicit(&sc->bbytes_free, memory_order_relaxed));
  __atomic_store_n(&sc->ever, true, __ATOMIC_RELEASE);
  atomic_store_explicit(&sc->era, era, memory_order_release);
  write_end(&sc->seq);
}

/* Owner, in its busy window with era ACTIVE: the cache takes memory for the
 * era in this slot for the first time: register as a user of the era and
 * re-read its state (7.2). */
TSLAB_INTERNAL int tslab_tcache_claim(tslab_t* a, tslab_tcache_t* tc, uint64_t era) {
  uint32_t slot = (uint32_t)(era & a->ring_mask);
  tslab_slot_cache_t* sc = &tc->slots[slot];
  tslab_epoch_slot_t* es = &a->slots[slot];
  TSLAB_ASSERT(atomic_load_explicit(&sc->era, memory_order_relaxed) == 0);
  /* The thread that opened the era is registered already (7.1). */
  tslab_tcache_t* u = atomic_load_explicit(&es->user, memory_order_seq_cst);
  if (u != tc) {
    u = NULL;
    if (!atomic_compare_exchange_strong_explicit(&es->user, &u, tc, memory_order_seq_cst, memory_order_seq_cst) &&
        u != tc)
      atomic_store_explicit(&es->multi, 1, memory_order_seq_cst);
  }
  if (!tslab_era_active(a, era)) return TSLAB_ERR_EPOCH_CLOSED;
  slot_count_for_era(a, sc, era);
  return TSLAB_OK;
}

/* Owner: the slot's bumping block becomes b, a block formatted for the
 * slot's era. */
static void slot_attach_block(tslab_slot_cache_t* sc, tslab_run_t* b) {
  size_t bytes = tslab_run_bytes(b);
  /* A large block of the reserve may take the era past its budget. */
  sc->budget = sc->budget > bytes ? sc->budget - bytes : 0;
  write_begin(&sc->seq);
  sc->base = b->start;
  sc->room = bytes;
  sc->bits = b->bits;
  sc->starts = b->starts;
  __atomic_store_n(&sc->top, b->start, __ATOMIC_RELAXED);
  LINK_STORE(sc->blk, b);
  write_end(&sc->seq);
}

/* Owner: slot_attach_block undone for a block nothing was bumped from (one
 * readied at an advance, 7.1): it stops, holding nothing, so the walk of
 * the slot's stopped blocks gives it back with the reserve, and its bytes
 * go back to the era's budget. */
static void slot_detach_unbumped(tslab_t* a, tslab_slot_cache_t* sc) {
  size_t bytes = tslab_run_bytes(sc->blk);
  slot_stop_block(sc);
  sc->budget = sc->budget + bytes < a->config.block_budget ? sc->budget + bytes : a->config.block_budget;
}

/* In a busy window, as the refill it stands for: a fork waits for it to
 * end, or repairs what it left half-done (7.6). */
TSLAB_INTERNAL void tslab_tcache_ready_era(tslab_t* a, tslab_tcache_t* tc, uint64_t era) {
  tslab_slot_cache_t* sc = &tc->slots[era & a->ring_mask];
  if (atomic_load_explicit(&sc->era, memory_order_relaxed) != 0) return;
  /* A thread that opens eras for others to use and close (an acceptor
   * handing requests to workers) would lose a reserve block to the heap at
   * every such close: it readies without one, probing now and then. */
  bool block = !atomic_load_explicit(&tc->ready_off, memory_order_relaxed);
  if (!block && ++tc->ready_probe % TSLAB_READY_PROBE == 0) {
    atomic_store_explicit(&tc->ready_off, false, memory_order_relaxed);
    block = true;
  }
  tslab_busy_enter(tc);
  slot_count_for_era(a, sc, era);
  if (block && tslab_slot_block_room(sc, 1)) {
    tslab_run_t* b = tslab_block_take(a, tc, era, TSLAB_BLOCK_GRANULES_SMALL, true);
    if (b) slot_attach_block(sc, b);
  }
  tslab_busy_exit(tc);
}

/* Bump an object of `size` bytes out of the slot's block; NULL when it does
 * not fit. Objects in blocks are 16-byte aligned; larger alignments go to
 * class slabs, so blocks never hold alignment gaps. */
static void* bump(tslab_slot_cache_t* sc, size_t size) {
  uint8_t* top = sc->top;
  size_t sz = tslab_unit_round(size);
  if (sz > sc->room) return NULL;
  tslab_bump_mark(sc, top, sz);
  tslab_hook_point(TSLAB_HOOK_BUMP_MARKED);
  sc->room -= sz;
  __atomic_store_n(&sc->top, top + sz, __ATOMIC_RELAXED);
  return top;
}

TSLAB_INTERNAL void* tslab_bump_refill(tslab_t* a, tslab_tcache_t* tc, uint64_t era, size_t size, size_t align,
                                       int* status) {
  tslab_slot_cache_t* sc = &tc->slots[era & a->ring_mask];
  if (align > 16) return NULL;
  void* p = bump(sc, size);
  if (p) return p;
  if (!tslab_slot_block_room(sc, size)) return NULL;
  uint64_t wall = 0, cpu = 0;
  bool sampled = tslab_sample_begin(a, tc, &wall, &cpu);
  tslab_bump(&sc->bslow, 1);
  tslab_run_t* stopped = sc->blk;
  slot_stop_block(sc);
  /* Stopped blocks drained by local frees went back as they drained; the
   * one stopping now may be drained already. Remote frees are collected
   * only when some came in since the last look: walking every stopped
   * block at every refill would make a big epoch quadratic. */
  uint64_t remote = atomic_load_explicit(&tc->block_remote, memory_order_acquire);
  if (remote != sc->remote_seen) {
    sc->remote_seen = remote;
    for (tslab_run_t *b = sc->full, *next; b; b = next) {
      next = b->bin_next;
      tslab_slab_collect(a, b);
      if (tslab_slab_used(b) == 0) slot_drop_block(a, tc, sc, b);
    }
  } else if (stopped && tslab_slab_used(stopped) == 0) {
    slot_drop_block(a, tc, sc, stopped);
  }
  /* Small blocks until the era has bumped a large block's worth here (3.4). */
  bool large = a->config.block_budget - sc->budget >= TSLAB_BLOCK_BYTES_LARGE && sc->budget >= TSLAB_BLOCK_BYTES_LARGE;
  tslab_run_t* b =
      tslab_block_take(a, tc, era, large ? TSLAB_BLOCK_GRANULES_LARGE : TSLAB_BLOCK_GRANULES_SMALL, false);
  if (sampled) tslab_sample_end(a, wall, cpu);
  if (!b) {
    *status = TSLAB_ERR_OUT_OF_MEMORY;
    return NULL;
  }
  slot_attach_block(sc, b);
  return bump(sc, size);
}

/* ---- bins: refill ---- */

/* Owner, in its busy window: a slab of an ACTIVE era got remote frees or
 * emptied; put it where it belongs. */
TSLAB_INTERNAL void tslab_tcache_settle(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s) {
  if (tslab_slab_used(s) == 0 && s->list != TSLAB_LIST_CUR) {
    if (s->list == TSLAB_LIST_FULL) {
      slot_drop_block(a, tc, &tc->slots[atomic_load_explicit(&s->era, memory_order_relaxed) & a->ring_mask], s);
      return;
    }
    bin_unstack_run(s->bin, s);
    tslab_tcache_unlink_run(tc, s);
    tslab_slab_retire_owned(a, tc, s);
  } else if (s->list == TSLAB_LIST_PARKED) {
    /* Back on the ready list once an eighth of its slots are free (3.2).
     * Until then it stays parked, armed again if a drain disarmed it, or
     * remote frees to it would go unseen (arming that finds remote bits
     * pending makes it ready, as parking does). */
    if (tslab_slab_parked_ready(s) ||
        (atomic_load_explicit(&s->notify, memory_order_relaxed) == TSLAB_NOTIFY_NONE && tslab_slab_arm(s)))
      tslab_tcache_ready(s->bin, s);
  }
}

/* Owner, in its busy window: handle the slabs remote freers queued. Slabs of
 * eras that are closing are left to the closer. */
static bool drain_notifications(tslab_t* a, tslab_tcache_t* tc) {
  if (!atomic_load_explicit(&tc->notify_pending, memory_order_acquire)) return false;
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
    if (!tslab_era_active(a, atomic_load_explicit(&s->era, memory_order_relaxed))) continue;
    tslab_slab_collect(a, s);
    tslab_tcache_settle(a, tc, s);
    if (list) tslab_hook_point(TSLAB_HOOK_DRAIN_PARTWAY);
  }
  return true;
}

/* Owner: the next bitmap word of slab s with free slots, scanning round
 * from where the last one was taken; false when s is full. */
static bool find_free_word(tslab_run_t* s, uint32_t* word, uint64_t* avail) {
  for (uint32_t i = 0, w = s->hint; i < s->words; i++, w = w + 1 == s->words ? 0 : w + 1) {
    uint64_t free_slots = ~atomic_load_explicit(&s->bits[2 * w], memory_order_relaxed);
    if (free_slots) {
      s->hint = w + 1 == s->words ? 0 : w + 1;
      *word = w;
      *avail = free_slots;
      return true;
    }
  }
  return false;
}

/* Owner, in a write section of the bin: set aside the free slots of the
 * next word of the current slab that has some (the mask), and of the one
 * after it (the next word) when there is another; false, with nothing
 * changed, when the slab is full. The slots stay free in the bitmap until
 * handed out, so dropping a mask only gives back their count. Two words at
 * once: a run of allocations refills once per 128 slots, so fewer than 1%
 * of them take the refill path (section 3, "The next word"). */
static bool bin_put_words(tslab_bin_t* bin) {
  tslab_run_t* s = bin->cur;
  uint32_t w, w2;
  uint64_t avail, next;
  if (!find_free_word(s, &w, &avail)) return false;
  if (!find_free_word(s, &w2, &next) || w2 == w) next = 0;
  bin->base = s->start + (size_t)w * 64 * s->obj_size;
  bin->word = &s->bits[2 * w];
  if (next) {
    bin->next_base = s->start + (size_t)w2 * 64 * s->obj_size;
    bin->next_word = &s->bits[2 * w2];
  }
  bin_put_masks(bin, avail, next);
  return true;
}

/* Owner: set aside the next words of the current slab that have free slots.
 * A full slab leaves the bin as it was (its masks empty). */
static bool take_word(tslab_bin_t* bin) {
  write_begin(&bin->seq);
  bool ok = bin_put_words(bin);
  write_end(&bin->seq);
  return ok;
}

/* Owner, the bin's masks empty: make s current (taken off list `from`, or a
 * new slab with `from` NULL) and set aside its first two words with free
 * slots (bin_put_words).
 * The old current slab is parked, armed for notification, or goes to the
 * ready list when arming finds remote frees. A working set freed at random
 * swaps slabs every few allocations (mixed sizes: a fifth of them), so this
 * is one function and two write sections (3.2). A thread held between them
 * (the hook) has parked the old slab and not installed s: the state the
 * fork child's repair knows (7.6). */
static bool switch_current(tslab_bin_t* bin, tslab_run_t* s, tslab_run_t** from) {
  tslab_run_t* old = bin->cur;
  bool old_ready = old && tslab_slab_arm(old);
  write_begin(&bin->seq);
  if (from) {
    run_fold(&bin->frees, s);
    list_remove(from, s);
  }
  if (old) {
    run_fold(&bin->frees, old);
    if (old_ready)
      list_push(&bin->ready, old, TSLAB_LIST_READY);
    else
      list_push(&bin->parked, old, TSLAB_LIST_PARKED);
  }
  write_end(&bin->seq);
  if (old) tslab_hook_point(TSLAB_HOOK_SLAB_PARKED);
  write_begin(&bin->seq);
  s->list = TSLAB_LIST_CUR;
  LINK_STORE(bin->cur, s);
  bool ok = bin_put_words(bin);
  if (!ok) bin_put_masks(bin, 0, 0); /* no word of the old slab stays */
  write_end(&bin->seq);
  return ok;
}

/* Allocation slow path, in the busy window with `era` ACTIVE and claimed,
 * and the bin's masks empty: the current slab's further words with free
 * slots, then its remote frees, then notified slabs, then ready slabs, then
 * a new slab. */
TSLAB_INTERNAL bool tslab_bin_refill(tslab_t* a, tslab_tcache_t* tc, tslab_bin_t* bin, uint64_t era) {
  uint64_t wall = 0, cpu = 0;
  bool sampled = tslab_sample_begin(a, tc, &wall, &cpu);
  bool ok = true;
  /* F1: a refill comes only when the hot slot, the stack and the mask are
   * all empty, so no word it sets aside holds a stacked slot. */
  TSLAB_ASSERT(atomic_load_explicit(&bin->stack_len, memory_order_relaxed) == 0);
  bin_count_for_era(a, tc, &tc->slots[era & a->ring_mask], bin);
  tslab_bump(&bin->slow, 1);
  if (bin->cur && take_word(bin)) goto done;
  if (bin->cur && tslab_slab_collect(a, bin->cur) > 0 && take_word(bin)) goto done;
  if (drain_notifications(a, tc) && bin->cur && take_word(bin)) goto done;
  while (bin->ready) {
    /* A ready slab that turns out full is parked by the next switch;
     * arming puts it straight back on the ready list if frees raced in. */
    tslab_run_t* s = bin->ready;
    tslab_slab_collect(a, s);
    if (switch_current(bin, s, &bin->ready)) goto done;
  }
  tslab_run_t* s = tslab_slab_new(a, tc, bin->cls, era);
  if (s) {
    s->bin = bin;
    ok = switch_current(bin, s, NULL);
  } else {
    ok = false;
  }
done:
  if (sampled) tslab_sample_end(a, wall, cpu);
  return ok;
}

/* ---- epoch close: detach a slot ---- */

static void detach_push(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, tslab_run_t** detached) {
  notify_unlink_locked(tc, s);
  s->detach_delta = tslab_run_detach(a, s);
  LINK_STORE(s->bin_next, *detached);
  *detached = s;
}

static void detach_list(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, tslab_run_t** detached) {
  while (s) {
    tslab_run_t* next = LINK_LOAD(s->bin_next);
    detach_push(a, tc, s, detached);
    s = next;
  }
}

/* The era's counts of a bin: its cumulative counters less their values when
 * it started counting for the era. */
static void bin_era_counts(tslab_bin_t* bin, uint32_t cls, tslab_fold_t* sum) {
  uint64_t al, fr;
  tslab_bin_read(bin, &al, &fr);
  uint64_t size = tslab_classes[cls].size;
  uint64_t base_allocs = TSLAB_RLOAD(bin->base_allocs), base_frees = TSLAB_RLOAD(bin->base_frees);
  sum->allocs += al - base_allocs;
  sum->frees += fr - base_frees;
  sum->xfrees += atomic_load_explicit(&bin->xfrees, memory_order_relaxed) - TSLAB_RLOAD(bin->base_xfrees);
  sum->slow += atomic_load_explicit(&bin->slow, memory_order_relaxed) - TSLAB_RLOAD(bin->base_slow);
  sum->alloc_bytes += (al - base_allocs) * size;
  sum->free_bytes += (fr - base_frees) * size;
}

/* The era's counts in slot `slot` of cache tc, added to *sum. `settled`:
 * the closer's detach, which has moved every block of the slot off `blk`
 * and `full` into the slot's counters with the owner quiescent, reads those
 * directly; anyone else reads them in a retried section. */
static void era_counts(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, tslab_fold_t* sum, bool settled) {
  tslab_slot_cache_t* sc = &tc->slots[slot];
  for (uint32_t word = 0; word < 2; word++) {
    for (uint64_t m = atomic_load_explicit(&sc->classes[word], memory_order_acquire); m; m &= m - 1) {
      uint32_t c = word * 64 + (uint32_t)__builtin_ctzll(m);
      bin_era_counts(tslab_bin_at(a, tc, slot, c), c, sum);
    }
  }
  uint64_t al, fr, ab, fb;
  if (settled) {
    TSLAB_ASSERT(!sc->blk && !sc->full);
    al = atomic_load_explicit(&sc->ballocs, memory_order_relaxed);
    fr = atomic_load_explicit(&sc->bfrees, memory_order_relaxed);
    ab = atomic_load_explicit(&sc->bbytes_alloc, memory_order_relaxed);
    fb = atomic_load_explicit(&sc->bbytes_free, memory_order_relaxed);
  } else {
    tslab_slot_blocks_read(sc, &al, &fr, &ab, &fb);
  }
  sum->allocs += al - TSLAB_RLOAD(sc->base_ballocs);
  sum->frees += fr - TSLAB_RLOAD(sc->base_bfrees);
  sum->xfrees += atomic_load_explicit(&sc->bxfrees, memory_order_relaxed) - TSLAB_RLOAD(sc->base_bxfrees);
  sum->slow += atomic_load_explicit(&sc->bslow, memory_order_relaxed) - TSLAB_RLOAD(sc->base_bslow);
  sum->alloc_bytes += ab - TSLAB_RLOAD(sc->base_bbytes_alloc);
  sum->free_bytes += fb - TSLAB_RLOAD(sc->base_bbytes_free);
}

TSLAB_INTERNAL void tslab_tcache_era_counts(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, tslab_fold_t* sum) {
  era_counts(a, tc, slot, sum, false);
}

TSLAB_INTERNAL void tslab_tcache_detach_slot(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, uint64_t era,
                                             tslab_run_t** detached, tslab_run_t** drained, tslab_fold_t* sum,
                                             bool ending) {
  tslab_slot_cache_t* sc = &tc->slots[slot];
  if (atomic_load_explicit(&sc->era, memory_order_relaxed) != era) return;
  for (uint32_t word = 0; word < 2; word++) {
    for (uint64_t m = atomic_load_explicit(&sc->classes[word], memory_order_relaxed); m; m &= m - 1) {
      uint32_t c = word * 64 + (uint32_t)__builtin_ctzll(m);
      tslab_bin_t* bin = tslab_bin_at(a, tc, slot, c);
      bin_drop_stack(bin);
      bin_drop_masks(bin);
      tslab_run_t* cur = bin->cur;
      bin_set_cur(bin, NULL);
      write_begin(&bin->seq);
      for (tslab_run_t* s = bin->ready; s; s = s->bin_next) run_fold(&bin->frees, s);
      write_end(&bin->seq);
      if (cur) detach_push(a, tc, cur, detached);
      tslab_run_t* ready = bin->ready;
      LINK_STORE(bin->ready, NULL);
      detach_list(a, tc, ready, detached);
      detach_list(a, tc, bin->parked, detached);
      bin->parked = NULL;
    }
  }
  /* Blocks: their objects and local frees join the slot's counts. A block
   * with nothing live (its remote frees collected) is not detached: it goes
   * on `drained`, for the closer to keep hot or retire. For the others, the
   * bytes still live are read after the detach collected the remote frees,
   * so the era's byte counts hold exactly what stays live (later frees add
   * theirs). */
  slot_stop_block(sc);
  write_begin(&sc->seq);
  tslab_run_t* full = sc->full;
  LINK_STORE(sc->full, NULL);
  for (tslab_run_t *b = full, *next; b; b = next) {
    next = LINK_LOAD(b->bin_next);
    run_fold(&sc->bfrees, b);
    tslab_bump(&sc->ballocs, b->hint);
    uint64_t bytes = (uint64_t)b->bumped << TSLAB_UNIT_SHIFT;
    tslab_bump(&sc->bbytes_alloc, bytes);
    tslab_slab_collect(a, b);
    if (tslab_slab_used(b) == 0) {
      tslab_bump(&sc->bbytes_free, bytes);
      b->list = TSLAB_LIST_NONE;
      LINK_STORE(b->bin_next, *drained);
      *drained = b;
      continue;
    }
    detach_push(a, tc, b, detached);
    /* A free-all close ends the objects at once: the era's bytes are
     * settled then, without reading every object's size. */
    if (!ending) tslab_bump(&sc->bbytes_free, bytes - tslab_block_live_bytes(b, b->bumped));
  }
  write_end(&sc->seq);
  era_counts(a, tc, slot, sum, true);
  atomic_store_explicit(&sc->classes[0], 0, memory_order_relaxed);
  atomic_store_explicit(&sc->classes[1], 0, memory_order_relaxed);
  atomic_store_explicit(&sc->era, 0, memory_order_release);
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
static void end_section(_Atomic uint64_t* seq) {
  uint64_t v = atomic_load_explicit(seq, memory_order_relaxed);
  if (v & 1) atomic_store_explicit(seq, v + 1, memory_order_release);
}

TSLAB_INTERNAL void tslab_tcache_end_sections(tslab_t* a, tslab_tcache_t* tc) {
  for (size_t i = 0; i < tslab_bins_count(a); i++) end_section(&tc->bins[i].seq);
  for (uint32_t i = 0; i < a->ring_size; i++) end_section(&tc->slots[i].seq);
  end_section(&tc->busy);
}

static void thread_exit(void* arg);

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

static size_t tcache_bytes(tslab_t* a) {
  return sizeof(tslab_tcache_t) + tslab_bins_count(a) * sizeof(tslab_bin_t) +
         (size_t)a->ring_size * sizeof(tslab_slot_cache_t);
}

/* A new thread's counts start at zero: what an adopted cache counted for
 * the thread that left it stays in the instance's totals. */
static void adopt_counts(tslab_t* a, tslab_tcache_t* tc) {
  pthread_mutex_lock(&tc->mu);
  tslab_tcache_sum(a, tc, &tc->adopted);
  pthread_mutex_unlock(&tc->mu);
}

static tslab_tcache_t* tcache_acquire(tslab_t* a) {
  pthread_mutex_lock(&a->reg_mu);
  tslab_tcache_t* tc = a->abandoned;
  if (tc) {
    a->abandoned = tc->abandoned_next;
    tc->abandoned_next = NULL;
    adopt_counts(a, tc);
  } else {
    size_t bytes = tcache_bytes(a);
    tc = (tslab_tcache_t*)tslab_os_map(bytes);
    if (tc) {
      tc->bytes = bytes;
      tc->inst = a;
      tc->slots = (tslab_slot_cache_t*)(void*)&tc->bins[tslab_bins_count(a)];
      pthread_mutex_init(&tc->mu, NULL);
      /* Append-only list read without the mutex: publish with release. */
      atomic_store_explicit(&tc->reg_next, atomic_load_explicit(&a->caches, memory_order_relaxed),
                            memory_order_relaxed);
      atomic_store_explicit(&a->caches, tc, memory_order_release);
      atomic_fetch_add_explicit(&a->ncaches, 1, memory_order_relaxed);
    }
  }
  if (tc) {
    uintptr_t tid = tslab_thread_id();
    atomic_store_explicit(&tc->tid, tid, memory_order_relaxed);
    tc->sample_tick = (uint32_t)(((uint64_t)tid * 0x9e3779b97f4a7c15ull) >> 32);
    atomic_fetch_add_explicit(&a->nattached, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&a->reg_mu);
  return tc;
}

/* Make (a, tc) the thread's most recent pair, keeping the previous one in
 * the table unless its instance was destroyed. */
static bool tls_remember(tslab_t* a, tslab_tcache_t* tc) {
  tls_prune();
  tslab_tls_entry_t* e = &tslab_tls_last;
  if (e->inst) {
    if (!map_array_reserve(&tls_extra, sizeof(tslab_tls_entry_t), tls_extra.len + 1)) return false;
    extra_items()[tls_extra.len++] = *e;
  }
  *e = (tslab_tls_entry_t){a, a->id, tc};
  return true;
}

/* Tests: entries in this thread's table of other instances. */
TSLAB_INTERNAL size_t tslab_tls_table_len(void) { return tls_extra.len; }

TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_find(tslab_t* a) {
  if (!a) return NULL;
  if (tslab_tls_last.id == a->id) return tslab_tls_last.tc;
  for (size_t i = 0; i < tls_extra.len; i++) {
    tslab_tls_entry_t* x = &extra_items()[i];
    if (x->inst == a && x->id == a->id) {
      tslab_tls_entry_t hit = *x;
      if (tslab_tls_last.inst)
        *x = tslab_tls_last;
      else
        *x = extra_items()[--tls_extra.len];
      tslab_tls_last = hit;
      return hit.tc;
    }
  }
  return NULL;
}

TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_slow(tslab_t* a) {
  tslab_tcache_t* tc = tslab_tcache_find(a);
  if (tc || !a) return tc;
  pthread_once(&exit_once, make_exit_key);
  tc = tcache_acquire(a);
  if (!tc) return NULL;
  if (!tls_remember(a, tc)) {
    pthread_mutex_lock(&a->reg_mu);
    tslab_tcache_park_locked(a, tc);
    pthread_mutex_unlock(&a->reg_mu);
    return NULL;
  }
  pthread_setspecific(exit_key, (void*)1);
  tls_exited = false;
  return tc;
}

TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_for_free(tslab_t* a) {
  return tls_exited ? tslab_tcache_find(a) : tslab_tcache_get(a);
}

/* Owner: collect every owned run of active eras and give empty ones back;
 * then the hot reserve goes back to the heap, with the blocks that drained
 * here (section 6). */
static void tcache_flush(tslab_t* a, tslab_tcache_t* tc) {
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    tslab_slot_cache_t* sc = &tc->slots[slot];
    tslab_busy_enter(tc);
    uint64_t era = atomic_load_explicit(&sc->era, memory_order_relaxed);
    if (era && tslab_era_active(a, era)) {
      drain_notifications(a, tc);
      for (uint32_t word = 0; word < 2; word++) {
        for (uint64_t m = atomic_load_explicit(&sc->classes[word], memory_order_relaxed); m; m &= m - 1) {
          tslab_bin_t* bin = tslab_bin_at(a, tc, slot, word * 64 + (uint32_t)__builtin_ctzll(m));
          bin_drop_stack(bin);
          tslab_run_t* lists[2] = {bin->ready, bin->parked};
          for (int l = 0; l < 2; l++) {
            for (tslab_run_t* s = lists[l]; s;) {
              tslab_run_t* next = s->bin_next;
              tslab_slab_collect(a, s);
              tslab_tcache_settle(a, tc, s);
              s = next;
            }
          }
          bin_drop_masks(bin);
          tslab_run_t* cur = bin->cur;
          if (cur) {
            tslab_slab_collect(a, cur);
            if (tslab_slab_used(cur) == 0) {
              tslab_tcache_unlink_run(tc, cur);
              tslab_run_retire(a, cur);
            }
          }
        }
      }
      if (sc->blk && sc->top == sc->base) slot_detach_unbumped(a, sc);
      for (tslab_run_t *b = sc->full, *next; b; b = next) {
        next = b->bin_next;
        tslab_slab_collect(a, b);
        if (tslab_slab_used(b) == 0) slot_drop_block(a, tc, sc, b);
      }
    }
    tslab_busy_exit(tc);
  }
  tslab_block_release_reserve(a, tc, false);
}

/* ---- fork child (7.6) ---- */

/* Give every run reachable from *head along its forward links the back link
 * and list tag of its place: a change the thread left part way wrote the
 * forward link that makes it (list_push: the head, last; list_remove: the
 * predecessor's, first), so the forward chain is the list. A run whose
 * remote free a vanished thread cut short gets what that free had still to
 * do (7.6): the hint, and for an armed slab the notification. Whether any
 * run of the list had a remote bit. */
static bool relink(tslab_tcache_t* tc, tslab_run_t** head, uint8_t which) {
  tslab_run_t* prev = NULL;
  bool remote = false;
  for (tslab_run_t* s = *head; s; prev = s, s = s->bin_next) {
    s->bin_prev = prev;
    s->list = which;
    if (!tslab_run_fork_rehint(s)) continue;
    remote = true;
    if (atomic_load(&s->notify) == TSLAB_NOTIFY_ARMED) tslab_tcache_notify(tc, s);
  }
  return remote;
}

/* The bump state of a slot whose thread may have been part way through a
 * bump, or a block's stop or install (the owner in its window, or a thread
 * closing an era only it used, which detaches its own slot outside any
 * window). `blk` is written last by an install and cleared right after the
 * stop put the block on the full list, so: a block on the full list has
 * stopped (finish the stop); a `blk` that is not there is still bumping
 * (undo a stop begun, and a bump not published, from its bitmap); no `blk`
 * means no bump state (an install that had not published its block drops
 * it: on no list, the runs' repair detaches it). On a slot nobody was
 * changing, this leaves everything as it is. Whether a block of the slot
 * holds a remote bit (relink). */
static bool fork_repair_bump(tslab_tcache_t* tc, tslab_slot_cache_t* sc) {
  bool remote = relink(tc, &sc->full, TSLAB_LIST_FULL);
  tslab_run_t* b = sc->blk;
  if (b && tslab_fork_listed(b, TSLAB_LIST_FULL, sc->full)) {
    sc->blk = NULL;
    b = NULL;
  }
  if (!b) {
    sc->top = sc->base = NULL;
    sc->room = 0;
    return remote;
  }
  b->list = TSLAB_LIST_CUR;
  b->bin_next = b->bin_prev = NULL;
  tslab_block_fork_rewind(b, sc->top);
  /* A bump cut short between its last two stores took its size off `room`
   * and did not publish `top`: `room` first, so that a cut bump leaves the
   * block less room than it has, never more. The rewind keeps the published
   * top; `room` is computed again from it. */
  sc->room = (size_t)(b->start + tslab_run_bytes(b) - sc->top);
  return tslab_run_fork_rehint(b) || remote;
}

/* fork child, for every cache, before anything reads its lists: lists and
 * bump states as if a vanished thread's last change had finished or not
 * begun (a cache nobody was changing stays as it is). A current slab that is
 * on a list as well was being replaced (switch_current parks the old one
 * first): the bin has no current slab. A slab the change had taken off every
 * list is found by tslab_runs_fork_reown and comes back through
 * tslab_tcache_fork_adopt. */
TSLAB_INTERNAL void tslab_tcache_fork_relink(tslab_t* a, tslab_tcache_t* tc) {
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    /* Blocks: a remote free also counts in the owner's `block_remote`, which
     * tells its refill to collect the slot's stopped blocks (3.4). */
    if (fork_repair_bump(tc, &tc->slots[slot])) atomic_fetch_add(&tc->block_remote, 1);
    for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
      tslab_bin_t* bin = tslab_bin_at(a, tc, slot, c);
      if (tc->forked_busy && atomic_load(&bin->stack_len)) bin_drop_stack(bin); /* F3; `used` is repaired from the bits */
      if (tc->forked_busy && bin->next_word && bin->next_word == bin->word) {
        /* A promotion cut short (alloc.c, bin_promote): the next word was
         * made the mask's, in part or whole; its slots were counted once. */
        atomic_store(&bin->mask, atomic_load(&bin->mask) | atomic_load(&bin->next_mask));
        atomic_store(&bin->next_mask, 0);
        bin->next_word = NULL;
      }
      relink(tc, &bin->ready, TSLAB_LIST_READY);
      relink(tc, &bin->parked, TSLAB_LIST_PARKED);
      tslab_run_t* cur = bin->cur;
      if (!cur) continue;
      tslab_run_fork_rehint(cur);
      if (tslab_fork_listed(cur, TSLAB_LIST_READY, bin->ready) ||
          tslab_fork_listed(cur, TSLAB_LIST_PARKED, bin->parked)) {
        /* A switch starts with both masks empty (tslab_bin_refill), so this
         * drops nothing; were a word set aside, its slots would leave
         * `taken` and `refilled` as any dropped mask's do. */
        bin->cur = NULL;
        bin_put_masks(bin, 0, 0);
      } else {
        cur->list = TSLAB_LIST_CUR;
      }
    }
  }
}

/* A slab its owner had taken off every list (a refill between taking it
 * and making it current, a new slab not yet current, an empty one on its
 * way to the heap) goes on its bin's ready list; the flush that follows
 * settles it. */
TSLAB_INTERNAL void tslab_tcache_fork_adopt(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s) {
  tslab_bin_t* bin = tslab_bin(a, tc, atomic_load(&s->era), s->cls);
  s->bin = bin;
  list_push(&bin->ready, s, TSLAB_LIST_READY);
  tslab_run_fork_rehint(s); /* it was on no list when the relink looked (found by review) */
}

/* fork child, for a cache whose thread vanished inside a window, after the
 * `used` repair: what the thread's exit would have done. A notification
 * drain it had started disarmed every slab it took off the list and settled
 * only some; the flush settles every listed slab, which arms the parked ones
 * again (7.6). */
TSLAB_INTERNAL void tslab_tcache_fork_flush(tslab_t* a, tslab_tcache_t* tc) { tcache_flush(a, tc); }

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

/* An entry whose instance is live takes an exit reference on it (live
 * mutex held): the instance is not destroyed until the entry's cache is
 * flushed. Others are cleared. */
static void pin_entry_locked(tslab_tls_entry_t* e) {
  if (e->inst && instance_alive_locked(e->inst, e->id))
    atomic_fetch_add_explicit(&e->inst->exiting, 1, memory_order_relaxed);
  else
    tls_entry_clear(e);
}

static void abandon_entry(tslab_tls_entry_t* e) {
  if (!e->inst) return;
  tslab_t* a = e->inst;
  abandon(a, e->tc);
  tls_entry_clear(e);
  atomic_fetch_sub_explicit(&a->exiting, 1, memory_order_release);
}

/* Thread exit: flush and abandon this thread's caches of live instances.
 * The live-instance mutex is held only to pin them (exit references), not
 * across the flushes: every exiting thread of the process took it, and
 * exits queued behind one another's flushes while new threads took fresh
 * caches (found by review: Larson with 16 threads reached 1,290 caches and
 * 4 GB; exiting threads blocked on the mutex by the thousand). */
static void thread_exit(void* arg) {
  (void)arg;
  pthread_mutex_lock(&live_mu);
  pin_entry_locked(&tslab_tls_last);
  for (size_t i = 0; i < tls_extra.len; i++) pin_entry_locked(&extra_items()[i]);
  pthread_mutex_unlock(&live_mu);
  tslab_hook_point(TSLAB_HOOK_EXIT_PINNED);
  abandon_entry(&tslab_tls_last);
  for (size_t i = 0; i < tls_extra.len; i++) abandon_entry(&extra_items()[i]);
  if (tls_extra.items) tslab_os_unmap(tls_extra.items, tls_extra.bytes);
  tls_extra = (map_array_t){0};
  tls_exited = true;
}

/* tslab_destroy: the instance stops being live for exiting threads. */
TSLAB_INTERNAL void tslab_tcache_forget_instance(tslab_t* a) {
  pthread_mutex_lock(&live_mu);
  for (size_t i = 0; i < live.len; i++) {
    if (live_items()[i] == a) {
      live_items()[i] = live_items()[--live.len];
      break;
    }
  }
  atomic_fetch_add_explicit(&destroyed, 1, memory_order_release);
  pthread_mutex_unlock(&live_mu);
  if (tslab_tls_last.inst == a) tls_entry_clear(&tslab_tls_last);
  /* No exit pins it any more: wait for the flushes of those that did. */
  while (atomic_load_explicit(&a->exiting, memory_order_acquire)) sched_yield();
}

TSLAB_INTERNAL void tslab_tcache_destroy_all(tslab_t* a) {
  tslab_tcache_t* tc = tslab_cache_first(a);
  while (tc) {
    tslab_tcache_t* next = tslab_cache_next(tc);
    pthread_mutex_destroy(&tc->mu);
    tslab_os_unmap(tc, tc->bytes);
    tc = next;
  }
  atomic_store(&a->caches, NULL);
  a->abandoned = NULL;
}

TSLAB_API size_t tslab_reserve_release(tslab_t* a) {
  if (!a) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return 0;
  }
  size_t released = 0;
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
    released += tslab_block_release_reserve(a, tc, true);
  return released + tslab_heap_release_pool(a);
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
    if (s->list != which) REPORT("run %p is in list %d but says %d", (void*)s->start, which, s->list);
    /* Only a drain disarms a parked slab, and it arms it again in the same
     * window: disarmed, remote frees to it would never reach its owner. */
    if (which == TSLAB_LIST_PARKED && atomic_load(&s->notify) == TSLAB_NOTIFY_NONE)
      REPORT("parked slab %p is not armed for remote frees", (void*)s->start);
    if (atomic_load(&s->owner) != tc) REPORT("run %p in a cache is owned by another cache", (void*)s->start);
    if (atomic_load(&s->era) != era || s->cls != cls) REPORT("run %p is in the wrong bin", (void*)s->start);
    uint8_t want = cls == TSLAB_CLASSES ? TSLAB_RUN_BLOCK : TSLAB_RUN_SLAB;
    if (atomic_load(&s->kind) != want) REPORT("cache holds a run of kind %d", (int)atomic_load(&s->kind));
    if (which == TSLAB_LIST_CUR) break;
  }
  return bad;
}

/* Every bin's runs are owned by its cache and belong to its era and class;
 * every owned run is in exactly one list; reserves hold drained blocks. The
 * world is stopped. */
/* A bin's free stack (section 3, F1-F3): at most TSLAB_STACK_MAX entries,
 * each a distinct free slot of an attached slab of this bin, its era and
 * class, that is current or still holds a slot (F2), and not in the mask. */
static size_t check_stack(tslab_tcache_t* tc, tslab_bin_t* bin, uint64_t era, uint32_t c, char* report,
                          size_t cap) {
  size_t bad = 0;
  uint32_t n = atomic_load(&bin->stack_len);
  if (n > TSLAB_STACK_MAX) {
    REPORT("bin of class %u has %u stacked slots", c, n);
    return bad;
  }
  for (uint32_t i = 0; i < n; i++) {
    const tslab_stacked_t* e = &bin->stack[i];
    tslab_run_t* s = e->run;
    if (atomic_load(&s->kind) != TSLAB_RUN_SLAB || atomic_load(&s->mode) != TSLAB_ATTACHED ||
        atomic_load(&s->owner) != tc || atomic_load(&s->era) != era || s->cls != c || s->bin != bin ||
        (s->list != TSLAB_LIST_CUR && s->list != TSLAB_LIST_READY && s->list != TSLAB_LIST_PARKED)) {
      REPORT("bin of class %u stacks a slot of a run it does not hold", c);
      continue;
    }
    uint32_t w = (uint32_t)((e->word - s->bits) / 2);
    if (w >= s->words || (e->word - s->bits) % 2 || e->bit == 0 || (e->bit & (e->bit - 1)) ||
        e->p != s->start + (size_t)(w * 64 + (uint32_t)__builtin_ctzll(e->bit)) * s->obj_size) {
      REPORT("bin of class %u has a stack entry that names no slot", c);
      continue;
    }
    if (atomic_load(e->word) & e->bit) REPORT("bin of class %u stacks an allocated slot", c);
    if (s->list != TSLAB_LIST_CUR && tslab_slab_used(s) == 0)
      REPORT("bin of class %u stacks a slot of an empty slab that is not current (F2)", c);
    if (bin->cur == s && e->word == bin->word && (atomic_load(&bin->mask) & e->bit))
      REPORT("bin of class %u has a slot both stacked and in the mask (F1)", c);
    if (bin->cur == s && e->word == bin->next_word && (atomic_load(&bin->next_mask) & e->bit))
      REPORT("bin of class %u has a slot both stacked and in the next word (F1)", c);
    for (uint32_t j = 0; j < i; j++)
      if (bin->stack[j].p == e->p) REPORT("bin of class %u stacks a slot twice", c);
  }
  return bad;
}

/* A bin's set-aside words (section 3): none without a current slab; each
 * a word of the current slab's alloc bitmap, two different words, and
 * every slot they hold free in it. */
static bool mask_fits(const tslab_bin_t* bin, _Atomic uint64_t* word, const uint8_t* base, uint64_t mask) {
  const tslab_run_t* s = bin->cur;
  ptrdiff_t i = word - s->bits;
  return i >= 0 && i % 2 == 0 && (uint32_t)(i / 2) < s->words &&
         base == s->start + (size_t)(i / 2) * 64 * s->obj_size && !(atomic_load(word) & mask);
}

static size_t check_masks(const tslab_bin_t* bin, uint32_t c, char* report, size_t cap) {
  size_t bad = 0;
  uint64_t mask = atomic_load(&bin->mask), next = atomic_load(&bin->next_mask);
  if (!bin->cur) {
    if (mask || next) REPORT("bin of class %u sets slots aside with no current slab", c);
    return bad;
  }
  if (mask && !mask_fits(bin, bin->word, bin->base, mask))
    REPORT("bin of class %u sets aside slots of its mask that are not free slots of its slab", c);
  if (next && (bin->next_word == bin->word || !mask_fits(bin, bin->next_word, bin->next_base, next)))
    REPORT("bin of class %u sets aside next-word slots that are not other free slots of its slab", c);
  return bad;
}

TSLAB_INTERNAL size_t tslab_tcache_check(tslab_t* a, char* report, size_t cap) {
  size_t bad = 0;
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    for (uint32_t slot = 0; slot < a->ring_size; slot++) {
      tslab_slot_cache_t* sc = &tc->slots[slot];
      uint64_t era = atomic_load(&sc->era);
      uint64_t st = atomic_load(&a->ring[slot].state);
      if (era && st != TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE))
        REPORT("cache slot %u holds era %llu, which is not active", slot, (unsigned long long)era);
      if (!era && (sc->blk || sc->full)) REPORT("cache slot %u holds blocks of no era", slot);
      size_t n = check_list(tc, sc->blk, TSLAB_LIST_CUR, era, TSLAB_CLASSES, bad ? NULL : report, cap);
      n += check_list(tc, sc->full, TSLAB_LIST_FULL, era, TSLAB_CLASSES, bad || n ? NULL : report, cap);
      bad += n;
      for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
        tslab_bin_t* bin = tslab_bin_at(a, tc, slot, c);
        bad += check_stack(tc, bin, era, c, bad ? NULL : report, cap);
        bad += check_masks(bin, c, bad ? NULL : report, cap);
        if (!bin->cur && !bin->ready && !bin->parked) continue;
        if (!era || !tslab_slot_counts_class(sc, c))
          REPORT("bin of slot %u class %u holds slabs but does not count for an era", slot, c);
        n = check_list(tc, bin->cur, TSLAB_LIST_CUR, era, c, bad ? NULL : report, cap);
        n += check_list(tc, bin->ready, TSLAB_LIST_READY, era, c, bad || n ? NULL : report, cap);
        n += check_list(tc, bin->parked, TSLAB_LIST_PARKED, era, c, bad || n ? NULL : report, cap);
        bad += n;
      }
    }
    /* A cache whose thread left gave its reserve back (section 6). */
    if (!atomic_load(&tc->tid) && (atomic_load(&tc->hot) || atomic_load(&tc->spares)))
      REPORT("an abandoned cache keeps reserve blocks");
    /* The reserve's `depth`s are what its bound is checked with (section
     * 5): the hot block's own granules, a spare's and those below it. */
    size_t reserve = 0;
    tslab_run_t* hot = atomic_load(&tc->hot);
    for (tslab_run_t* b = hot; b; b = NULL) {
      if (atomic_load(&b->kind) != TSLAB_RUN_RESERVED) REPORT("hot block of kind %d", (int)atomic_load(&b->kind));
      uint32_t depth = TSLAB_RLOAD(b->depth);
      if (depth != b->granules) REPORT("hot block of %u granules with depth %u", b->granules, depth);
      reserve += tslab_run_bytes(b);
    }
    for (tslab_run_t* b = atomic_load(&tc->spares); b; b = atomic_load(&b->spare_next)) {
      if (atomic_load(&b->kind) != TSLAB_RUN_RESERVED) REPORT("spare block of kind %d", (int)atomic_load(&b->kind));
      tslab_run_t* below = atomic_load(&b->spare_next);
      uint32_t depth = TSLAB_RLOAD(b->depth);
      if (depth != b->granules + (below ? TSLAB_RLOAD(below->depth) : 0))
        REPORT("spare block of %u granules with depth %u", b->granules, depth);
      reserve += tslab_run_bytes(b);
    }
    if (reserve > a->config.thread_reserve_max)
      REPORT("a cache keeps %zu bytes of reserve blocks, above thread_reserve_max", reserve);
  }
  return bad;
}
