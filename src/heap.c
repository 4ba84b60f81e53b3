/* The page heap: hands out runs of granules for slabs and large spans, keeps
 * recently emptied runs resident for reuse (the dirty pool), releases runs to
 * the OS by policy and at epoch close, and coalesces released runs. It also
 * owns the metadata region where run descriptors, slab bitmaps and handle
 * generation arrays live (docs/ARCHITECTURE.md section 4). All of it is
 * guarded by heap->mu; madvise runs outside the mutex. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static size_t run_index(tslab_t* a, const tslab_run_t* r);

/* ---- metadata region ---- */

static void* meta_alloc(tslab_t* a, size_t bytes) {
  tslab_heap_t* h = &a->heap;
  bytes = (bytes + 31) & ~(size_t)31;
  if (h->meta_top + bytes > a->meta_reserve) return NULL;
  if (h->meta_top + bytes > h->meta_committed) {
    size_t want = (h->meta_top + bytes + TSLAB_COMMIT_STEP - 1) & ~(TSLAB_COMMIT_STEP - 1);
    if (want > a->meta_reserve) want = a->meta_reserve;
    if (!tslab_os_commit(a->meta + h->meta_committed, want - h->meta_committed)) return NULL;
    h->meta_committed = want;
  }
  void* p = a->meta + h->meta_top;
  h->meta_top += bytes;
  atomic_fetch_add_explicit(&a->meta_bytes, bytes, memory_order_relaxed);
  return p;
}

/* Free lists of metadata blocks thread through their first word. */
static void* pop_block(void** list) {
  void* p = *list;
  if (p) *list = *(void**)p;
  return p;
}

static void push_block(void** list, void* p) {
  *(void**)p = *list;
  *list = p;
}

/* A statistics reader may still load `usage` and the bin links of a
 * recycled descriptor through a pointer it read before (and then discards
 * what it read, docs/ARCHITECTURE.md section 8): those fields are cleared
 * with atomic stores, the rest with memset. */
_Static_assert(offsetof(tslab_run_t, bin_prev) == offsetof(tslab_run_t, bin_next) + sizeof(tslab_run_t*) &&
                   offsetof(tslab_run_t, notify_next) == offsetof(tslab_run_t, bin_prev) + sizeof(tslab_run_t*) &&
                   offsetof(tslab_run_t, usage) < offsetof(tslab_run_t, bin_next),
               "desc_new clears the fields around usage and the bin links");

static tslab_run_t* desc_new(tslab_t* a) {
  tslab_run_t* r = (tslab_run_t*)pop_block((void**)&a->heap.free_descs);
  if (!r) r = (tslab_run_t*)meta_alloc(a, sizeof(tslab_run_t));
  if (!r) return NULL;
  size_t usage = offsetof(tslab_run_t, usage), after_usage = usage + sizeof r->usage;
  size_t links = offsetof(tslab_run_t, bin_next), after_links = offsetof(tslab_run_t, notify_next);
  memset(r, 0, usage);
  memset((char*)r + after_usage, 0, links - after_usage);
  memset((char*)r + after_links, 0, sizeof *r - after_links);
  atomic_store_explicit(&r->usage, 0, memory_order_relaxed);
  __atomic_store_n(&r->bin_next, NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&r->bin_prev, NULL, __ATOMIC_RELAXED);
  return r;
}

static void desc_free(tslab_t* a, tslab_run_t* r) {
  atomic_store_explicit(&r->kind, TSLAB_RUN_NONE, memory_order_release);
  push_block((void**)&a->heap.free_descs, r);
}

/* Bitmaps of a slab: `words` alloc words followed by `words` remote words. */
static _Atomic uint64_t* bitmap_new(tslab_t* a, uint32_t words) {
  void* p = pop_block(&a->heap.free_words[words]);
  if (!p) p = meta_alloc(a, (size_t)words * 16);
  return (_Atomic uint64_t*)p;
}

TSLAB_INTERNAL _Atomic uint16_t* tslab_heap_gens(tslab_t* a, uint32_t capacity) {
  uint32_t idx = (capacity + 63) / 64;
  pthread_mutex_lock(&a->heap.mu);
  void* p = pop_block(&a->heap.free_gens[idx]);
  if (!p) p = meta_alloc(a, (size_t)idx * 128);
  pthread_mutex_unlock(&a->heap.mu);
  return (_Atomic uint16_t*)p;
}

/* Give a retired run's bitmaps and generations back (heap mutex held), and
 * raise the generation base of its first granule past every generation a
 * handle into the run may hold, so no handle outlives the run. The bitmap
 * pointers stay: only a free racing with another free of the same pointer
 * (a data race in the program) can still reach them, and the blocks stay
 * mapped (their free-list link is in the alloc words, which no free
 * writes). */
static void run_free_meta(tslab_t* a, tslab_run_t* r) {
  _Atomic uint16_t* base = &a->gen_base[run_index(a, r)];
  int kind = atomic_load_explicit(&r->kind, memory_order_relaxed);
  if (kind == TSLAB_RUN_LARGE) atomic_store_explicit(base, (uint16_t)(r->large_gen + 1), memory_order_relaxed);
  if (kind != TSLAB_RUN_SLAB) return;
  push_block(&a->heap.free_words[r->words], (void*)r->alloc);
  _Atomic uint16_t* g = atomic_load_explicit(&r->gens, memory_order_relaxed);
  if (g) {
    uint16_t next = atomic_load_explicit(base, memory_order_relaxed);
    for (uint32_t i = 0; i < r->capacity; i++) {
      uint16_t v = (uint16_t)(atomic_load_explicit(&g[i], memory_order_relaxed) + 1);
      if ((int16_t)(v - next) > 0) next = v;
    }
    atomic_store_explicit(base, next, memory_order_relaxed);
    push_block(&a->heap.free_gens[(r->capacity + 63) / 64], (void*)g);
    atomic_store_explicit(&r->gens, NULL, memory_order_relaxed);
  }
}

/* ---- run geometry ---- */

static size_t run_index(tslab_t* a, const tslab_run_t* r) {
  return (size_t)(r->start - a->base) >> TSLAB_GRANULE_SHIFT;
}

static void map_set(tslab_t* a, size_t g, tslab_run_t* r) {
  atomic_store_explicit(&a->map[g], r, memory_order_release);
}

/* Free runs only keep their first and last granule mapped (for coalescing);
 * readers check that a descriptor covers the address they asked about. */
static void map_ends(tslab_t* a, tslab_run_t* r) {
  size_t g = run_index(a, r);
  map_set(a, g, r);
  map_set(a, g + r->granules - 1, r);
}

static uint32_t bin_of(size_t n) {
  if (n <= TSLAB_HEAP_EXACT) return (uint32_t)n - 1;
  uint32_t b = TSLAB_HEAP_EXACT + (63u - (uint32_t)__builtin_clzll(n)) - 6u;
  return b < TSLAB_HEAP_BINS ? b : TSLAB_HEAP_BINS - 1;
}

/* ---- clean runs ---- */

static void clean_link(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  uint32_t b = bin_of(r->granules);
  r->heap_prev = NULL;
  r->heap_next = h->clean[b];
  if (r->heap_next) r->heap_next->heap_prev = r;
  h->clean[b] = r;
  h->clean_mask[b >> 6] |= 1ull << (b & 63);
  atomic_store_explicit(&r->kind, TSLAB_RUN_FREE_CLEAN, memory_order_release);
  map_ends(a, r);
}

static void clean_unlink(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  uint32_t b = bin_of(r->granules);
  if (r->heap_prev)
    r->heap_prev->heap_next = r->heap_next;
  else
    h->clean[b] = r->heap_next;
  if (r->heap_next) r->heap_next->heap_prev = r->heap_prev;
  if (!h->clean[b]) h->clean_mask[b >> 6] &= ~(1ull << (b & 63));
  r->heap_next = r->heap_prev = NULL;
}

static tslab_run_t* clean_neighbour(tslab_t* a, size_t g, const uint8_t* must_start,
                                    const uint8_t* must_end) {
  if (g >= a->heap.top) return NULL;
  tslab_run_t* n = atomic_load_explicit(&a->map[g], memory_order_relaxed);
  if (!n || atomic_load_explicit(&n->kind, memory_order_relaxed) != TSLAB_RUN_FREE_CLEAN) return NULL;
  uint8_t* end = n->start + ((size_t)n->granules << TSLAB_GRANULE_SHIFT);
  if (must_start && n->start != must_start) return NULL;
  if (must_end && end != must_end) return NULL;
  return n;
}

/* Insert a released run, merging it with released neighbours and giving the
 * top of the used range back to the bump region. */
static void clean_insert(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  size_t g = run_index(a, r);
  if (g > 0) {
    tslab_run_t* left = clean_neighbour(a, g - 1, NULL, r->start);
    if (left) {
      clean_unlink(a, left);
      r->start = left->start;
      r->granules += left->granules;
      desc_free(a, left);
      g = run_index(a, r);
    }
  }
  uint8_t* end = r->start + ((size_t)r->granules << TSLAB_GRANULE_SHIFT);
  tslab_run_t* right = clean_neighbour(a, g + r->granules, end, NULL);
  if (right) {
    clean_unlink(a, right);
    r->granules += right->granules;
    desc_free(a, right);
  }
  if (g + r->granules == h->top) {
    h->top = g;
    desc_free(a, r);
    return;
  }
  clean_link(a, r);
}

/* ---- dirty runs ---- */

static tslab_epoch_slot_t* era_slot(tslab_t* a, uint64_t era) {
  return &a->ring[era & a->ring_mask];
}

/* Dirty-run counts are charged to the era's slot while it still holds it
 * (heap mutex held; advance changes a slot's era under it). */
static void dirty_account(tslab_t* a, tslab_run_t* r, int sign) {
  tslab_epoch_slot_t* es = era_slot(a, r->last_era);
  if (TSLAB_STATE_ERA(atomic_load_explicit(&es->state, memory_order_relaxed)) != r->last_era) return;
  size_t bytes = (size_t)r->granules << TSLAB_GRANULE_SHIFT;
  if (sign > 0) {
    atomic_fetch_add_explicit(&es->empty_runs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&es->empty_bytes, bytes, memory_order_relaxed);
  } else {
    atomic_fetch_sub_explicit(&es->empty_runs, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&es->empty_bytes, bytes, memory_order_relaxed);
  }
}

static void dirty_link(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  r->heap_prev = NULL;
  uint32_t b = bin_of(r->granules);
  r->heap_next = h->dirty[b];
  if (r->heap_next) r->heap_next->heap_prev = r;
  h->dirty[b] = r;
  r->lru_next = NULL;
  r->lru_prev = h->lru_tail;
  if (h->lru_tail)
    h->lru_tail->lru_next = r;
  else
    h->lru_head = r;
  h->lru_tail = r;
  h->dirty_bytes += (size_t)r->granules << TSLAB_GRANULE_SHIFT;
  atomic_store_explicit(&r->kind, TSLAB_RUN_FREE_DIRTY, memory_order_release);
  dirty_account(a, r, +1);
}

static void dirty_unlink(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  if (r->heap_prev)
    r->heap_prev->heap_next = r->heap_next;
  else
    h->dirty[bin_of(r->granules)] = r->heap_next;
  if (r->heap_next) r->heap_next->heap_prev = r->heap_prev;
  if (r->lru_prev)
    r->lru_prev->lru_next = r->lru_next;
  else
    h->lru_head = r->lru_next;
  if (r->lru_next)
    r->lru_next->lru_prev = r->lru_prev;
  else
    h->lru_tail = r->lru_prev;
  r->heap_next = r->heap_prev = r->lru_next = r->lru_prev = NULL;
  h->dirty_bytes -= (size_t)r->granules << TSLAB_GRANULE_SHIFT;
  dirty_account(a, r, -1);
}

/* ---- releasing ---- */

static int by_address(const void* x, const void* y) {
  const tslab_run_t* a = *(const tslab_run_t* const*)x;
  const tslab_run_t* b = *(const tslab_run_t* const*)y;
  return a->start < b->start ? -1 : a->start > b->start;
}

/* madvise a batch of runs sorted by address, one call per contiguous range
 * (the slabs of one epoch are often neighbours); ok[i] tells each run's
 * fate. Called without the mutex. */
static void release_batch(tslab_t* a, tslab_run_t** runs, size_t n, bool* ok) {
  qsort(runs, n, sizeof *runs, by_address);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    uint8_t* end = runs[i]->start + ((size_t)runs[i]->granules << TSLAB_GRANULE_SHIFT);
    while (j < n && runs[j]->start == end) {
      end += (size_t)runs[j]->granules << TSLAB_GRANULE_SHIFT;
      j++;
    }
    size_t bytes = (size_t)(end - runs[i]->start);
    bool done = tslab_os_release(runs[i]->start, bytes);
    if (done) {
      atomic_fetch_add_explicit(&a->release_calls, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&a->release_bytes, bytes, memory_order_relaxed);
      atomic_fetch_sub_explicit(&a->resident_bytes, bytes, memory_order_relaxed);
    } else {
      atomic_fetch_add_explicit(&a->release_failures, 1, memory_order_relaxed);
    }
    for (; i < j; i++) ok[i] = done;
  }
}

/* Release a chain of runs (linked through heap_next, already marked
 * RELEASING and out of every list) with the mutex dropped, then insert them
 * as clean runs; a run the OS refused to release stays resident as a dirty
 * run, to be tried again when the pool is trimmed. Called and returns with
 * the mutex held. */
static void release_chain(tslab_t* a, tslab_run_t* chain) {
  enum { BATCH = 64 };
  while (chain) {
    tslab_run_t* runs[BATCH];
    bool ok[BATCH];
    size_t n = 0;
    for (; chain && n < BATCH; chain = chain->heap_next) runs[n++] = chain;
    pthread_mutex_unlock(&a->heap.mu);
    release_batch(a, runs, n, ok);
    pthread_mutex_lock(&a->heap.mu);
    for (size_t i = 0; i < n; i++) {
      tslab_run_t* r = runs[i];
      r->heap_next = NULL;
      if (ok[i]) {
        /* Under the mutex: advance swaps a slot's era under it too. */
        tslab_epoch_slot_t* es = era_slot(a, r->last_era);
        if (TSLAB_STATE_ERA(atomic_load_explicit(&es->state, memory_order_relaxed)) == r->last_era)
          atomic_fetch_add_explicit(&es->released_bytes, (size_t)r->granules << TSLAB_GRANULE_SHIFT,
                                    memory_order_relaxed);
        clean_insert(a, r);
      } else {
        dirty_link(a, r);
      }
    }
  }
}

static void mark_releasing(tslab_run_t* r, tslab_run_t** chain) {
  atomic_store_explicit(&r->kind, TSLAB_RUN_RELEASING, memory_order_release);
  r->heap_next = *chain;
  *chain = r;
}

/* Pull the oldest dirty runs until the pool is within its budget. */
static tslab_run_t* evict_over_budget(tslab_t* a, tslab_run_t* chain) {
  tslab_heap_t* h = &a->heap;
  while (h->dirty_bytes > a->config.pool_resident_max && h->lru_head) {
    tslab_run_t* v = h->lru_head;
    dirty_unlink(a, v);
    mark_releasing(v, &chain);
  }
  return chain;
}

/* ---- allocation ---- */

static tslab_run_t* split_front(tslab_t* a, tslab_run_t* r, size_t n) {
  /* r keeps the front n granules; the rest becomes a clean run of its own. */
  if (r->granules == n) return r;
  tslab_run_t* rest = desc_new(a);
  if (!rest) return NULL;
  rest->start = r->start + (n << TSLAB_GRANULE_SHIFT);
  rest->granules = r->granules - (uint32_t)n;
  r->granules = (uint32_t)n;
  clean_link(a, rest);
  return r;
}

/* Best-fit clean run that can hold n granules aligned to align granules. */
static tslab_run_t* take_clean(tslab_t* a, size_t n, size_t align) {
  tslab_heap_t* h = &a->heap;
  for (uint32_t b = bin_of(n); b < TSLAB_HEAP_BINS; b++) {
    if (!(h->clean_mask[b >> 6] & (1ull << (b & 63)))) {
      continue;
    }
    for (tslab_run_t* r = h->clean[b]; r; r = r->heap_next) {
      size_t g = run_index(a, r);
      size_t lead = (align - (g % align)) % align;
      if (r->granules < n + lead) continue;
      clean_unlink(a, r);
      if (lead) {
        /* Keep the unaligned lead as its own clean run. */
        tslab_run_t* body = desc_new(a);
        if (!body) {
          clean_link(a, r);
          return NULL;
        }
        body->start = r->start + (lead << TSLAB_GRANULE_SHIFT);
        body->granules = r->granules - (uint32_t)lead;
        r->granules = (uint32_t)lead;
        clean_link(a, r);
        r = body;
      }
      if (!split_front(a, r, n)) {
        clean_link(a, r);
        return NULL;
      }
      return r;
    }
  }
  return NULL;
}

static tslab_run_t* take_top(tslab_t* a, size_t n, size_t align) {
  tslab_heap_t* h = &a->heap;
  size_t lead = (align - (h->top % align)) % align;
  if (h->top + lead + n > a->ngranules) return NULL;
  size_t end_bytes = (h->top + lead + n) << TSLAB_GRANULE_SHIFT;
  if (end_bytes > h->committed) {
    size_t want = (end_bytes + TSLAB_COMMIT_STEP - 1) & ~(TSLAB_COMMIT_STEP - 1);
    if (want > a->reserve) want = a->reserve;
    if (!tslab_os_commit(a->base + h->committed, want - h->committed)) return NULL;
    h->committed = want;
  }
  tslab_run_t* r = desc_new(a);
  if (!r) return NULL;
  if (lead) {
    tslab_run_t* gap = desc_new(a);
    if (!gap) {
      desc_free(a, r);
      return NULL;
    }
    gap->start = a->base + (h->top << TSLAB_GRANULE_SHIFT);
    gap->granules = (uint32_t)lead;
    h->top += lead;
    clean_link(a, gap);
  }
  r->start = a->base + (h->top << TSLAB_GRANULE_SHIFT);
  r->granules = (uint32_t)n;
  h->top += n;
  return r;
}

/* A run of n granules aligned to align granules, not yet published: the
 * caller formats it and maps it. NULL when memory runs out. */
TSLAB_INTERNAL tslab_run_t* tslab_heap_alloc(tslab_t* a, size_t n, size_t align) {
  tslab_heap_t* h = &a->heap;
  if (align == 0) align = 1;
  if (n == 0 || n > UINT32_MAX || n > a->ngranules) return NULL;
  pthread_mutex_lock(&h->mu);
  tslab_run_t* r = NULL;
  /* Dirty bins up to TSLAB_HEAP_EXACT hold runs of exactly one length. */
  if (align == 1 && n <= TSLAB_HEAP_EXACT && h->dirty[n - 1]) {
    r = h->dirty[n - 1];
    dirty_unlink(a, r);
  }
  if (!r) r = take_clean(a, n, align);
  /* Recycled: memory that served before, resident or released since
   * (released runs at the top merge back into the unused range). */
  bool recycled = r != NULL;
  if (!r) {
    r = take_top(a, n, align);
    recycled = r && h->top <= h->top_max;
  }
  if (h->top > h->top_max) h->top_max = h->top;
  if (recycled) atomic_fetch_add_explicit(&a->slabs_recycled, 1, memory_order_relaxed);
  if (!r && h->lru_head) {
    /* Out of address space or commit: turn the dirty pool into clean runs
     * (which coalesce) and try once more. */
    tslab_run_t* chain = NULL;
    while (h->lru_head) {
      tslab_run_t* v = h->lru_head;
      dirty_unlink(a, v);
      mark_releasing(v, &chain);
    }
    release_chain(a, chain);
    r = take_clean(a, n, align);
    if (!r) r = take_top(a, n, align);
  }
  if (r && atomic_load_explicit(&r->kind, memory_order_relaxed) != TSLAB_RUN_FREE_DIRTY) {
    atomic_fetch_add_explicit(&a->resident_bytes, (size_t)n << TSLAB_GRANULE_SHIFT,
                              memory_order_relaxed);
  }
  if (r) atomic_store_explicit(&r->kind, TSLAB_RUN_NONE, memory_order_release);
  pthread_mutex_unlock(&h->mu);
  return r;
}

/* Give a run being formatted as a slab its two bitmaps. */
TSLAB_INTERNAL bool tslab_heap_bitmaps(tslab_t* a, tslab_run_t* r, uint32_t words) {
  pthread_mutex_lock(&a->heap.mu);
  _Atomic uint64_t* bits = bitmap_new(a, words);
  pthread_mutex_unlock(&a->heap.mu);
  if (!bits) return false;
  r->alloc = bits;
  r->remote = bits + words;
  return true;
}

/* Take back a list of runs no longer in use (linked through heap_next). With
 * release (or when a run cannot stay in the dirty pool) their memory goes back
 * to the OS now, in as few calls as their addresses allow. */
TSLAB_INTERNAL void tslab_heap_retire_list(tslab_t* a, tslab_run_t* list, bool release) {
  tslab_heap_t* h = &a->heap;
  pthread_mutex_lock(&h->mu);
  tslab_run_t* chain = NULL;
  while (list) {
    tslab_run_t* r = list;
    list = r->heap_next;
    r->heap_next = NULL;
    run_free_meta(a, r);
    r->last_era = atomic_load_explicit(&r->era, memory_order_relaxed);
    if (!release && a->config.release_policy != TSLAB_RELEASE_EAGER && r->granules <= TSLAB_SLAB_MAX_GRANULES &&
        a->config.pool_resident_max > 0)
      dirty_link(a, r);
    else
      mark_releasing(r, &chain);
  }
  chain = evict_over_budget(a, chain);
  release_chain(a, chain);
  pthread_mutex_unlock(&h->mu);
}

TSLAB_INTERNAL void tslab_heap_retire(tslab_t* a, tslab_run_t* r, bool release) {
  r->heap_next = NULL;
  tslab_heap_retire_list(a, r, release);
}

/* Release every dirty run that last served `era` (epoch close). */
TSLAB_INTERNAL void tslab_heap_release_era(tslab_t* a, uint64_t era) {
  tslab_heap_t* h = &a->heap;
  pthread_mutex_lock(&h->mu);
  tslab_run_t* chain = NULL;
  for (tslab_run_t* r = h->lru_head; r;) {
    tslab_run_t* next = r->lru_next;
    if (r->last_era == era) {
      dirty_unlink(a, r);
      mark_releasing(r, &chain);
    }
    r = next;
  }
  release_chain(a, chain);
  pthread_mutex_unlock(&h->mu);
}

TSLAB_INTERNAL bool tslab_heap_init(tslab_t* a) {
  return pthread_mutex_init(&a->heap.mu, NULL) == 0;
}

/* ---- checking ---- */

#define REPORT(...)                                                    \
  do {                                                                 \
    if (bad++ == 0 && report && cap) snprintf(report, cap, __VA_ARGS__); \
  } while (0)

/* Walk the used range run by run: every granule below top belongs to exactly
 * one run whose first granule maps to it, and the lists agree with kinds. */
TSLAB_INTERNAL size_t tslab_heap_check(tslab_t* a, char* report, size_t cap) {
  tslab_heap_t* h = &a->heap;
  size_t bad = 0;
  pthread_mutex_lock(&h->mu);
  size_t dirty_bytes = 0;
  for (tslab_run_t* r = h->lru_head; r; r = r->lru_next) {
    if (atomic_load(&r->kind) != TSLAB_RUN_FREE_DIRTY) REPORT("dirty list holds a run of kind %d", (int)atomic_load(&r->kind));
    dirty_bytes += (size_t)r->granules << TSLAB_GRANULE_SHIFT;
  }
  if (dirty_bytes != h->dirty_bytes) REPORT("dirty pool counts %zu bytes, lists hold %zu", h->dirty_bytes, dirty_bytes);
  for (uint32_t b = 0; b < TSLAB_HEAP_BINS; b++) {
    bool nonempty = h->clean[b] != NULL;
    bool marked = (h->clean_mask[b >> 6] >> (b & 63)) & 1;
    if (nonempty != marked) REPORT("clean bin %u mask disagrees with its list", b);
    for (tslab_run_t* r = h->clean[b]; r; r = r->heap_next) {
      if (atomic_load(&r->kind) != TSLAB_RUN_FREE_CLEAN) REPORT("clean list holds a run of kind %d", (int)atomic_load(&r->kind));
      if (bin_of(r->granules) != b) REPORT("clean run of %u granules in bin %u", r->granules, b);
    }
  }
  for (size_t g = 0; g < h->top;) {
    tslab_run_t* r = atomic_load(&a->map[g]);
    if (!r || r->start != a->base + (g << TSLAB_GRANULE_SHIFT) || r->granules == 0) {
      REPORT("granule %zu is not the start of a run", g);
      break;
    }
    int kind = atomic_load(&r->kind);
    if (kind == TSLAB_RUN_NONE || kind == TSLAB_RUN_RELEASING) REPORT("run at granule %zu has transient kind %d", g, kind);
    tslab_run_t* last = atomic_load(&a->map[g + r->granules - 1]);
    if (last != r) REPORT("last granule of the run at %zu maps elsewhere", g);
    if (kind == TSLAB_RUN_SLAB) {
      for (size_t i = g; i < g + r->granules; i++)
        if (atomic_load(&a->map[i]) != r) REPORT("slab granule %zu maps elsewhere", i);
    }
    g += r->granules;
  }
  pthread_mutex_unlock(&h->mu);
  return bad;
}
