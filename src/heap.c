/* The page heap: hands out runs of granules for slabs, blocks and large
 * spans, keeps recently emptied runs resident for reuse (the dirty pool, part
 * of the hot reserve), releases runs to the OS, and coalesces released runs.
 * It also owns the metadata region where run descriptors, bitmaps and handle
 * generation arrays live, and recycles them only after a grace period
 * (docs/ARCHITECTURE.md sections 4 and 5). All of it is guarded by heap->mu;
 * madvise runs outside the mutex. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- metadata region ---- */

/* A counter only the heap mutex's holder writes (statistics read it without
 * the mutex): a plain add, where a locked one would cost every slab's trip
 * through the heap some 20 cycles more. */
static void heap_count(_Atomic uint64_t* c, int64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)n, memory_order_relaxed);
}

static void* meta_alloc(tslab_t* a, size_t bytes) {
  tslab_heap_t* h = &a->heap;
  bytes = (bytes + 63) & ~(size_t)63;
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

/* Free lists of metadata blocks thread through their first word. A reader
 * that reached a block through a stale view (a descriptor's `start`, a
 * bitmap's first word) may read that word at any time and rejects what it
 * read by `seq` (section 4): the link is written and read as a relaxed
 * atomic, as the fields it overlays are. */
static void* pop_block(void** list) {
  void* p = *list;
  if (p) *list = __atomic_load_n((void**)p, __ATOMIC_RELAXED);
  return p;
}

static void push_block(void** list, void* p) {
  __atomic_store_n((void**)p, *list, __ATOMIC_RELAXED);
  *list = p;
}

/* ---- descriptors ---- */

/* A word that may alias any field of the descriptor it clears. */
typedef uint64_t __attribute__((may_alias)) tslab_alias_word_t;

/* Statistics readers may still load `usage` and the list links of a recycled
 * descriptor through a pointer they read before (and then discard what they
 * read, docs/ARCHITECTURE.md section 9): those fields are cleared with
 * atomic stores. `seq` keeps counting across incarnations (G2). The
 * descriptor's bitmaps stay attached (the formatter reuses or swaps them);
 * its per-slot generations go back to the free lists: a new incarnation
 * starts them from the granule's generation base when it first makes a
 * handle, with its own capacity (heap mutex held). */
static void desc_clear(tslab_heap_t* h, tslab_run_t* r) {
  _Atomic uint64_t* bits = r->bits;
  _Atomic uint64_t* starts = r->starts;
  _Atomic uint16_t* gens = atomic_load_explicit(&r->gens, memory_order_relaxed);
  if (gens) push_block(&h->free_gens[(r->gens_cap + 63) / 64], (void*)gens);
  uint16_t cap = r->bits_cap;
  /* Word by word, atomically: readers that hold a stale pointer to the
   * descriptor read it with atomic loads (statistics, validated views). The
   * word holding `seq` is skipped, so `seq` never reads as an old even value
   * in between. Two unrolled runs of stores around it are one instruction a
   * word: one loop testing every word took about 250 instructions. */
  const size_t seq_word = offsetof(tslab_run_t, seq) / sizeof(uint64_t);
  tslab_alias_word_t* words = (tslab_alias_word_t*)(void*)r;
#pragma GCC unroll 64
  for (size_t i = 0; i < seq_word; i++) __atomic_store_n(&words[i], 0, __ATOMIC_RELAXED);
#pragma GCC unroll 64
  for (size_t i = seq_word + 1; i < sizeof *r / sizeof(uint64_t); i++) __atomic_store_n(&words[i], 0, __ATOMIC_RELAXED);
  TSLAB_RSTORE(r->granules, 0);
  TSLAB_RSTORE(r->bits, bits);
  TSLAB_RSTORE(r->starts, starts);
  r->bits_cap = cap;
}

_Static_assert(sizeof(tslab_run_t) % sizeof(uint64_t) == 0 && _Alignof(tslab_run_t) >= sizeof(uint64_t) &&
                   offsetof(tslab_run_t, seq) % sizeof(uint64_t) == 0 &&
                   offsetof(tslab_run_t, granules) == offsetof(tslab_run_t, seq) + sizeof(uint32_t),
               "descriptors are cleared word by word; seq shares its word with granules only");

/* Give a descriptor's attached metadata back to the free lists (heap mutex;
 * the descriptor has passed its grace period). */
static void desc_strip(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  if (r->bits) push_block(&h->free_words[r->bits_cap], (void*)r->bits);
  _Atomic uint64_t* starts = r->starts;
  if (starts) push_block(&h->free_starts[r->bits_cap], (void*)starts);
  _Atomic uint16_t* gens = atomic_load_explicit(&r->gens, memory_order_relaxed);
  if (gens) push_block(&h->free_gens[(r->gens_cap + 63) / 64], (void*)gens);
  TSLAB_RSTORE(r->bits, NULL);
  r->bits_cap = 0;
  TSLAB_RSTORE(r->starts, NULL);
  atomic_store_explicit(&r->gens, NULL, memory_order_relaxed);
  r->has_gens = 0;
}

/* Move every descriptor of limbo whose grace period has passed to the free
 * lists. Limbo is in stamp order, so the first one still waiting stops the
 * walk. */
static void limbo_reclaim(tslab_t* a, const tslab_tcache_t* self) {
  tslab_heap_t* h = &a->heap;
  while (h->limbo_head && tslab_grace_passed(a, self, h->limbo_head->retired)) {
    tslab_run_t* r = h->limbo_head;
    h->limbo_head = r->heap_next;
    if (!h->limbo_head) h->limbo_tail = NULL;
    desc_strip(a, r);
    push_block((void**)&h->free_descs, r);
  }
}

/* A descriptor no longer in use whose readers may still be in their windows:
 * it waits in limbo, untouched, until its grace period has passed. */
static void desc_limbo(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  atomic_store_explicit(&r->kind, TSLAB_RUN_LIMBO, memory_order_release);
  r->retired = tslab_grace_stamp(a);
  r->heap_next = NULL;
  if (h->limbo_tail)
    h->limbo_tail->heap_next = r;
  else
    h->limbo_head = r;
  h->limbo_tail = r;
}

static tslab_run_t* desc_new(tslab_t* a, const tslab_tcache_t* self) {
  tslab_heap_t* h = &a->heap;
  if (!h->free_descs) limbo_reclaim(a, self);
  tslab_run_t* r = (tslab_run_t*)pop_block((void**)&h->free_descs);
  if (!r) r = (tslab_run_t*)meta_alloc(a, sizeof(tslab_run_t));
  if (!r) return NULL;
  desc_clear(h, r);
  return r;
}

/* ---- run geometry ---- */

/* A descriptor's geometry is about to change: `seq` odd (G2)... */
TSLAB_INTERNAL void tslab_run_seq_begin(tslab_run_t* r) {
  atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) | 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
}

/* ... and has changed: `seq` even again. */
static void seq_end(tslab_run_t* r) {
  atomic_store_explicit(&r->seq, (atomic_load_explicit(&r->seq, memory_order_relaxed) | 1) + 1, memory_order_release);
}

static void map_set(tslab_t* a, size_t g, tslab_run_t* r) {
  atomic_store_explicit(&a->map[g], r, memory_order_release);
}

/* Free runs and runs in flight keep their first and last granule mapped (for
 * coalescing and for the fork child's walk); readers check that a
 * descriptor covers the address they asked about. */
static void map_ends(tslab_t* a, tslab_run_t* r) {
  size_t g = tslab_run_index(a, r);
  map_set(a, g, r);
  map_set(a, g + r->granules - 1, r);
}

static uint32_t bin_of(size_t n) {
  if (n <= TSLAB_HEAP_EXACT) return (uint32_t)n - 1;
  uint32_t b = TSLAB_HEAP_EXACT + (63u - (uint32_t)__builtin_clzll(n)) - 6u;
  return b < TSLAB_HEAP_BINS ? b : TSLAB_HEAP_BINS - 1;
}

/* The first non-empty bin at or above b in a two-word bin mask, or
 * TSLAB_HEAP_BINS: a word at a time, so that a search that finds nothing (no
 * clean run, the usual case for a heap that grows at its top) costs two
 * words, not a test per bin (about 850 instructions a block, bin by bin). */
static uint32_t bin_next(const uint64_t mask[2], uint32_t b) {
  for (; b < TSLAB_HEAP_BINS; b = (b | 63) + 1) {
    uint64_t m = mask[b >> 6] >> (b & 63);
    if (m) return b + (uint32_t)__builtin_ctzll(m);
  }
  return TSLAB_HEAP_BINS;
}

/* Change a free run's extent: inside `seq`, so a reader that reaches it
 * through a stale map entry never pairs an old start with a new length. */
static void set_extent(tslab_run_t* r, uint8_t* start, size_t granules) {
  tslab_run_seq_begin(r);
  TSLAB_RSTORE(r->start, start);
  TSLAB_RSTORE(r->granules, (uint32_t)granules);
  seq_end(r);
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
  uint8_t* end = n->start + tslab_run_bytes(n);
  if (must_start && n->start != must_start) return NULL;
  if (must_end && end != must_end) return NULL;
  return n;
}

/* Insert a released run, merging it with released neighbours (merged-away
 * descriptors go to limbo) and giving the top of the used range back to the
 * bump region. */
static void clean_insert(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  size_t g = tslab_run_index(a, r);
  if (g > 0) {
    tslab_run_t* left = clean_neighbour(a, g - 1, NULL, r->start);
    if (left) {
      clean_unlink(a, left);
      set_extent(r, left->start, (size_t)r->granules + left->granules);
      desc_limbo(a, left);
      g = tslab_run_index(a, r);
    }
  }
  uint8_t* end = r->start + tslab_run_bytes(r);
  tslab_run_t* right = clean_neighbour(a, g + r->granules, end, NULL);
  if (right) {
    clean_unlink(a, right);
    set_extent(r, r->start, (size_t)r->granules + right->granules);
    desc_limbo(a, right);
  }
  if (g + r->granules == h->top) {
    h->top = g;
    desc_limbo(a, r);
    return;
  }
  clean_link(a, r);
}

/* ---- dirty runs ---- */

/* Decay's count of a dirty run's bytes for its slot (`decay_slot`, ring slot
 * + 1, 0: none) goes; the run stays where it is. */
static void decay_untag(tslab_heap_t* h, tslab_run_t* r) {
  if (!r->decay_slot) return;
  heap_count(&h->decay_bytes[r->decay_slot - 1], -(int64_t)tslab_run_bytes(r));
  r->decay_slot = 0;
}

/* Put r in the pool's age order just before `next` (NULL: as the newest). */
static void lru_insert_before(tslab_heap_t* h, tslab_run_t* r, tslab_run_t* next) {
  r->lru_next = next;
  r->lru_prev = next ? next->lru_prev : h->lru_tail;
  if (r->lru_prev)
    r->lru_prev->lru_next = r;
  else
    h->lru_head = r;
  if (next)
    next->lru_prev = r;
  else
    h->lru_tail = r;
}

/* Link r into the dirty pool, in the age order just before `next`;
 * `decay_slot` tags it with the ring slot (+ 1) of the active era whose
 * retire kept it beyond pool_resident_max (0: within the bound),
 * `pooled_ns` is its entry time (coarse clock). */
static inline void dirty_link_before(tslab_t* a, tslab_run_t* r, uint32_t decay_slot, uint64_t pooled_ns,
                                     tslab_run_t* next) {
  tslab_heap_t* h = &a->heap;
  r->pooled_ns = pooled_ns;
  r->decay_slot = decay_slot;
  if (decay_slot)
    heap_count(&h->decay_bytes[decay_slot - 1], (int64_t)tslab_run_bytes(r));
  r->heap_prev = NULL;
  uint32_t b = bin_of(r->granules);
  r->heap_next = h->dirty[b];
  if (r->heap_next) r->heap_next->heap_prev = r;
  h->dirty[b] = r;
  h->dirty_mask[b >> 6] |= 1ull << (b & 63);
  lru_insert_before(h, r, next);
  h->dirty_bytes += tslab_run_bytes(r);
  atomic_store_explicit(&r->kind, TSLAB_RUN_FREE_DIRTY, memory_order_release);
  map_ends(a, r);
}

/* Link r into the dirty pool as its newest run. A run entering at time 0
 * (one the OS refused to release, one a vanished thread left half-made)
 * counts as aged out: it is linked as the oldest, so the pool's next
 * eviction takes it first. */
static void dirty_link(tslab_t* a, tslab_run_t* r, uint32_t decay_slot, uint64_t pooled_ns) {
  dirty_link_before(a, r, decay_slot, pooled_ns, pooled_ns == 0 ? a->heap.lru_head : NULL);
}

static void dirty_unlink(tslab_t* a, tslab_run_t* r) {
  tslab_heap_t* h = &a->heap;
  uint32_t b = bin_of(r->granules);
  if (r->heap_prev)
    r->heap_prev->heap_next = r->heap_next;
  else
    h->dirty[b] = r->heap_next;
  if (r->heap_next) r->heap_next->heap_prev = r->heap_prev;
  if (!h->dirty[b]) h->dirty_mask[b >> 6] &= ~(1ull << (b & 63));
  if (r->lru_prev)
    r->lru_prev->lru_next = r->lru_next;
  else
    h->lru_head = r->lru_next;
  if (r->lru_next)
    r->lru_next->lru_prev = r->lru_prev;
  else
    h->lru_tail = r->lru_prev;
  r->heap_next = r->heap_prev = r->lru_next = r->lru_prev = NULL;
  decay_untag(h, r);
  h->dirty_bytes -= tslab_run_bytes(r);
}

/* ---- releasing ---- */

static int by_address(const void* x, const void* y) {
  const tslab_run_t* a = *(const tslab_run_t* const*)x;
  const tslab_run_t* b = *(const tslab_run_t* const*)y;
  return a->start < b->start ? -1 : a->start > b->start;
}

TSLAB_INTERNAL size_t tslab_heap_release_ranges(tslab_t* a, const struct iovec* ranges, size_t n, bool* ok) {
  atomic_fetch_add_explicit(&a->release_calls, tslab_os_release_ranges(ranges, n, ok), memory_order_relaxed);
  size_t released = 0;
  for (size_t r = 0; r < n; r++) {
    if (!ok[r]) {
      atomic_fetch_add_explicit(&a->release_failures, 1, memory_order_relaxed);
      continue;
    }
    atomic_fetch_add_explicit(&a->release_bytes, ranges[r].iov_len, memory_order_relaxed);
    released += ranges[r].iov_len;
  }
  return released;
}

/* Release a batch of runs sorted by address, one range per contiguous
 * stretch (the runs of one epoch are often neighbours), in one system call
 * where the kernel takes a batch; ok[i] tells each run's fate. Called
 * without the mutex. Returns the bytes released. */
enum { RELEASE_RUNS = 32 }; /* runs per batch: the arrays live on a free's stack */

static size_t release_batch(tslab_t* a, tslab_run_t** runs, size_t n, bool* ok) {
  qsort(runs, n, sizeof *runs, by_address);
  struct iovec ranges[RELEASE_RUNS];
  size_t nr = 0;
  for (size_t i = 0; i < n; nr++) {
    uint8_t* start = runs[i]->start;
    uint8_t* end = start + tslab_run_bytes(runs[i]);
    for (i++; i < n && runs[i]->start == end; i++) end += tslab_run_bytes(runs[i]);
    ranges[nr] = (struct iovec){start, (size_t)(end - start)};
  }
  bool done[RELEASE_RUNS];
  size_t released = tslab_heap_release_ranges(a, ranges, nr, done);
  atomic_fetch_sub_explicit(&a->resident_bytes, released, memory_order_relaxed);
  /* The runs of range r: from where range r - 1's ended to its end. */
  for (size_t r = 0, i = 0; r < nr; r++)
    for (uint8_t* end = (uint8_t*)ranges[r].iov_base + ranges[r].iov_len; i < n && runs[i]->start < end; i++)
      ok[i] = done[r];
  return released;
}

/* Release a chain of runs (linked through heap_next, marked RELEASING and out
 * of every list, their ends mapped so a fork child finds them) with the mutex
 * dropped, then insert them as clean runs; a run the OS refused to release
 * stays resident as a dirty run, to be tried again when the pool is trimmed.
 * Called and returns with the mutex held. */
static size_t release_chain(tslab_t* a, tslab_run_t* chain) {
  size_t released = 0;
  while (chain) {
    tslab_run_t* runs[RELEASE_RUNS];
    bool ok[RELEASE_RUNS];
    size_t n = 0;
    for (; chain && n < RELEASE_RUNS; chain = chain->heap_next) runs[n++] = chain;
    pthread_mutex_unlock(&a->heap.mu);
    released += release_batch(a, runs, n, ok);
    pthread_mutex_lock(&a->heap.mu);
    for (size_t i = 0; i < n; i++) {
      tslab_run_t* r = runs[i];
      r->heap_next = NULL;
      if (ok[i])
        clean_insert(a, r);
      else
        dirty_link(a, r, 0, 0); /* aged out: the next eviction tries it again */
    }
  }
  return released;
}

static void mark_releasing(tslab_t* a, tslab_run_t* r, tslab_run_t** chain) {
  atomic_store_explicit(&r->kind, TSLAB_RUN_RELEASING, memory_order_release);
  map_ends(a, r);
  r->heap_next = *chain;
  *chain = r;
}

/* Take the pool's oldest run out of it onto `chain`, to be released. */
static void evict_oldest(tslab_t* a, tslab_run_t** chain) {
  tslab_run_t* v = a->heap.lru_head;
  dirty_unlink(a, v);
  mark_releasing(a, v, chain);
}

/* The most the pool may hold: pool_resident_max + pool_decay_max, which a
 * caller may set as high as it likes ("no bound"). */
static size_t pool_bound(const tslab_t* a) {
  size_t most;
  return __builtin_add_overflow(a->config.pool_resident_max, a->config.pool_decay_max, &most) ? SIZE_MAX : most;
}

/* Pull the oldest dirty runs while the pool is above its bound: above
 * pool_resident_max + pool_decay_max always (runs whose release the OS
 * refused come back), above pool_resident_max while the oldest run has
 * stayed pool_decay_ms (decay, section 5). */
static tslab_run_t* evict_over_budget(tslab_t* a, tslab_run_t* chain, uint64_t now) {
  tslab_heap_t* h = &a->heap;
  size_t keep = a->config.pool_resident_max, most = pool_bound(a);
  uint64_t ttl = (uint64_t)a->config.pool_decay_ms * 1000000u;
  while (h->dirty_bytes > keep && h->lru_head &&
         (h->dirty_bytes > most || h->lru_head->pooled_ns + ttl <= now))
    evict_oldest(a, &chain);
  return chain;
}

/* Let the oldest dirty runs go until `bytes` more fit the pool's bound
 * (pool_resident_max + pool_decay_max; the caller's run is no longer than
 * that). Where the kernel takes a batch of releases in one call, an eighth
 * of the bound more, at most a batch of granules: the retires after it fit
 * for a while and the releases go to the OS together (section 5, "Releases
 * in batches"). Elsewhere runs scattered in memory would cost a call each,
 * all inside one free. */
static tslab_run_t* make_room(tslab_t* a, tslab_run_t* chain, size_t bytes) {
  tslab_heap_t* h = &a->heap;
  size_t most = pool_bound(a);
  if (h->dirty_bytes + bytes <= most) return chain;
  size_t slack = tslab_os_release_batches() ? most / 8 : 0;
  if (slack > (size_t)RELEASE_RUNS << TSLAB_GRANULE_SHIFT) slack = (size_t)RELEASE_RUNS << TSLAB_GRANULE_SHIFT;
  while (h->lru_head && h->dirty_bytes + bytes > most - slack) evict_oldest(a, &chain);
  return chain;
}

/* ---- allocation ---- */

/* A fresh descriptor for free run r's granules past its first n (r itself
 * is left as it is: the caller shrinks it when the order of its links
 * allows); NULL when no descriptor is left. */
static tslab_run_t* desc_past(tslab_t* a, const tslab_tcache_t* self, const tslab_run_t* r, size_t n) {
  tslab_run_t* past = desc_new(a, self);
  if (!past) return NULL;
  TSLAB_RSTORE(past->start, r->start + (n << TSLAB_GRANULE_SHIFT));
  TSLAB_RSTORE(past->granules, r->granules - (uint32_t)n);
  return past;
}

/* The dirty run to reuse for n granules: one of exactly n (the most recently
 * pooled), else one of the next larger length present. Reusing resident
 * memory first keeps a program's footprint where it was: a program whose
 * frees leave longer runs than it asks for next (a C++ program's vectors and
 * hash tables between two rounds) faulted in released memory while the pool
 * held megabytes, and then released them. */
static tslab_run_t* dirty_fit(const tslab_heap_t* h, size_t n) {
  uint32_t b = bin_next(h->dirty_mask, bin_of(n));
  return b < TSLAB_HEAP_BINS ? h->dirty[b] : NULL;
}

/* Take dirty run r out of the pool for n of its granules. A longer run
 * leaves its rest in the pool, in r's place in the age order and with its
 * decay tag. The rest is linked before r is unlinked, so the tag's
 * `decay_bytes` never drops to 0 while a run with the tag is in the pool (a
 * closer that reads 0 there skips the slot: section 5). NULL when no
 * descriptor is left for the rest (r stays in the pool). */
static tslab_run_t* dirty_take(tslab_t* a, const tslab_tcache_t* self, tslab_run_t* r, size_t n) {
  tslab_run_t* rest = NULL;
  if (r->granules > n) {
    if (!(rest = desc_past(a, self, r, n))) return NULL;
    dirty_link_before(a, rest, r->decay_slot, r->pooled_ns, r);
  }
  dirty_unlink(a, r); /* at r's whole length: its bin and counts */
  if (rest) set_extent(r, r->start, n);
  return r;
}

static tslab_run_t* split_front(tslab_t* a, const tslab_tcache_t* self, tslab_run_t* r, size_t n) {
  /* r keeps the front n granules; the rest becomes a clean run of its own. */
  if (r->granules == n) return r;
  tslab_run_t* rest = desc_past(a, self, r, n);
  if (!rest) return NULL;
  set_extent(r, r->start, n);
  clean_link(a, rest);
  return r;
}

/* Best-fit clean run that can hold n granules aligned to align granules. */
static tslab_run_t* take_clean(tslab_t* a, const tslab_tcache_t* self, size_t n, size_t align) {
  tslab_heap_t* h = &a->heap;
  for (uint32_t b = bin_next(h->clean_mask, bin_of(n)); b < TSLAB_HEAP_BINS; b = bin_next(h->clean_mask, b + 1)) {
    for (tslab_run_t* r = h->clean[b]; r; r = r->heap_next) {
      size_t g = tslab_run_index(a, r);
      size_t lead = (align - (g % align)) % align;
      if (r->granules < n + lead) continue;
      clean_unlink(a, r);
      if (lead) {
        /* Keep the unaligned lead as its own clean run. */
        tslab_run_t* body = desc_past(a, self, r, lead);
        if (!body) {
          clean_link(a, r);
          return NULL;
        }
        set_extent(r, r->start, lead);
        clean_link(a, r);
        r = body;
      }
      if (!split_front(a, self, r, n)) {
        clean_link(a, r);
        return NULL;
      }
      return r;
    }
  }
  return NULL;
}

static tslab_run_t* take_top(tslab_t* a, const tslab_tcache_t* self, size_t n, size_t align) {
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
  tslab_run_t* r = desc_new(a, self);
  if (!r) return NULL;
  if (lead) {
    tslab_run_t* gap = desc_new(a, self);
    if (!gap) {
      desc_limbo(a, r);
      return NULL;
    }
    TSLAB_RSTORE(gap->start, a->base + (h->top << TSLAB_GRANULE_SHIFT));
    TSLAB_RSTORE(gap->granules, (uint32_t)lead);
    h->top += lead;
    clean_link(a, gap);
  }
  TSLAB_RSTORE(r->start, a->base + (h->top << TSLAB_GRANULE_SHIFT));
  TSLAB_RSTORE(r->granules, (uint32_t)n);
  h->top += n;
  return r;
}

/* The part of [lo, hi) of the used range not faulted in yet, extended to a
 * whole populate step; the caller faults it in without the mutex. The step
 * grows with the range, a quarter of it up to TSLAB_POPULATE_STEP: a growing
 * phase soon faults in 64 KiB per call. Larger batches save few calls (a
 * 64 MiB phase burst makes 1,024) but the allocation that takes one waits
 * for all of it: 256 KiB batches put a server whose live memory grows by a
 * block a request at twice the p99 latency (docs/ARCHITECTURE.md section 1,
 * the server workload's 'leak' pattern). */
static size_t populate_claim(tslab_t* a, size_t lo, size_t hi, size_t* from) {
  tslab_heap_t* h = &a->heap;
  if (hi <= h->populated) return 0;
  if (hi - lo > TSLAB_POPULATE_STEP || hi <= TSLAB_POPULATE_LAZY_PREFIX) {
    /* Faulted in by the program as it touches it: a run longer than a batch
     * (a large span may never be touched in most of it, and calloc relies
     * on its pages reading zero; a slab of 128 or 256 KiB, of a class above
     * 2 KiB, may hold one object for long: glibc's thread test,
     * whose sizes spread over every class, held 1.3 MiB more when they were
     * faulted in whole), and the range's first TSLAB_POPULATE_LAZY_PREFIX
     * bytes (a small program's first slabs would be resident whole: a 4 KiB
     * stdio buffer in a 128 KiB slab). */
    h->populated = hi;
    return 0;
  }
  size_t step = TSLAB_GRANULE;
  while (step < TSLAB_POPULATE_STEP && step * 4 < hi) step *= 2;
  size_t to = (hi + step - 1) & ~(step - 1);
  if (to > h->committed) to = h->committed;
  /* A run that crosses the lazy prefix is faulted in from its end only. */
  *from = h->populated > TSLAB_POPULATE_LAZY_PREFIX ? h->populated : TSLAB_POPULATE_LAZY_PREFIX;
  h->populated = to;
  return to - *from;
}

TSLAB_INTERNAL tslab_run_t* tslab_heap_fresh_desc(tslab_t* a, const tslab_tcache_t* self, tslab_run_t* r) {
  tslab_run_t* d = desc_new(a, self);
  if (!d) return NULL;
  tslab_run_seq_begin(d);
  TSLAB_RSTORE(d->start, r->start);
  TSLAB_RSTORE(d->granules, r->granules);
  atomic_store_explicit(&d->kind, TSLAB_RUN_NONE, memory_order_relaxed);
  map_ends(a, d);
  desc_limbo(a, r);
  return d;
}

TSLAB_INTERNAL tslab_run_t* tslab_heap_alloc(tslab_t* a, const tslab_tcache_t* self, size_t n, size_t align,
                                             bool purge) {
  tslab_heap_t* h = &a->heap;
  if (align == 0) align = 1;
  if (n == 0 || n > UINT32_MAX || n > a->ngranules) return NULL;
  pthread_mutex_lock(&h->mu);
  tslab_run_t* r = NULL;
  bool was_dirty = false;
  /* Dirty bins up to TSLAB_HEAP_EXACT hold runs of exactly one length. */
  tslab_run_t* fit = align == 1 && n <= TSLAB_HEAP_EXACT ? dirty_fit(h, n) : NULL;
  if (fit) {
    r = dirty_take(a, self, fit, n);
    was_dirty = r != NULL;
  }
  if (!r) r = take_clean(a, self, n, align);
  /* Recycled: memory that served before, resident or released since
   * (released runs at the top merge back into the unused range). */
  bool recycled = r != NULL;
  if (!r) {
    r = take_top(a, self, n, align);
    recycled = r && h->top <= h->top_max;
  }
  if (h->top > h->top_max) h->top_max = h->top;
  if (!r && purge && h->lru_head) {
    /* Out of address space or commit: turn the dirty pool into clean runs
     * (which coalesce) and try once more. */
    tslab_run_t* chain = NULL;
    while (h->lru_head) evict_oldest(a, &chain);
    release_chain(a, chain);
    r = take_clean(a, self, n, align);
    if (!r) r = take_top(a, self, n, align);
  }
  size_t pop_from = 0, pop_bytes = 0;
  if (r) {
    if (recycled) heap_count(&a->slabs_recycled, 1);
    if (!was_dirty)
      atomic_fetch_add_explicit(&a->resident_bytes, (size_t)n << TSLAB_GRANULE_SHIFT, memory_order_relaxed);
    /* A descriptor that served before is formatted again only after its
     * grace period (G2); until then the run gets a fresh one. */
    if (r->retired && !tslab_grace_passed(a, self, r->retired)) {
      tslab_run_t* d = tslab_heap_fresh_desc(a, self, r);
      if (!d) {
        /* No descriptor: a clean run goes back where it came from, a dirty
         * one to the OS. Back in the pool with its decay tag it could
         * outlive its era's close: the closer may have read the slot's
         * `decay_bytes` 0 since the run left the pool (D1). */
        if (was_dirty) {
          tslab_run_t* chain = NULL;
          mark_releasing(a, r, &chain);
          release_chain(a, chain);
        } else {
          atomic_fetch_sub_explicit(&a->resident_bytes, (size_t)n << TSLAB_GRANULE_SHIFT, memory_order_relaxed);
          clean_insert(a, r);
        }
        r = NULL;
      } else {
        r = d;
      }
    }
  }
  if (r) {
    /* Odd: formatting. A reader that reaches the descriptor through a stale
     * map entry rejects it until tslab_run_publish. Then the descriptor
     * starts from scratch, its bitmaps still attached for the formatter. */
    tslab_run_seq_begin(r);
    uint8_t* start = r->start;
    uint32_t granules = r->granules;
    desc_clear(&a->heap, r);
    TSLAB_RSTORE(r->start, start);
    TSLAB_RSTORE(r->granules, granules);
    r->zeroed = !was_dirty;
    atomic_store_explicit(&r->kind, TSLAB_RUN_NONE, memory_order_release);
    map_ends(a, r);
    if (!was_dirty)
      pop_bytes = populate_claim(a, (size_t)(r->start - a->base),
                                 (size_t)(r->start - a->base) + ((size_t)n << TSLAB_GRANULE_SHIFT), &pop_from);
  }
  pthread_mutex_unlock(&h->mu);
  if (pop_bytes) tslab_os_populate(a->base + pop_from, pop_bytes);
  return r;
}

TSLAB_INTERNAL void tslab_run_publish(tslab_t* a, tslab_run_t* r, uint8_t kind) {
  size_t g0 = tslab_run_index(a, r);
  atomic_store_explicit(&r->kind, kind, memory_order_release);
  seq_end(r);
  if (kind == TSLAB_RUN_LARGE) {
    map_ends(a, r);
  } else {
    for (size_t g = g0; g < g0 + r->granules; g++) map_set(a, g, r);
  }
}

/* A metadata block from its free list, else from the region (heap mutex).
 * When the region is full, the descriptors in limbo whose grace period has
 * passed give theirs back first: their bitmaps return to the free lists
 * only with them, so a region that filled up while one thread held a window
 * open (each reuse under it took a fresh descriptor, section 4) recovers
 * once that window ends. */
static void* meta_block(tslab_t* a, const tslab_tcache_t* self, void** list, size_t bytes) {
  void* p = pop_block(list);
  if (!p) p = meta_alloc(a, bytes);
  if (!p && a->heap.limbo_head) {
    limbo_reclaim(a, self);
    p = pop_block(list);
  }
  return p;
}

TSLAB_INTERNAL bool tslab_heap_bitmaps(tslab_t* a, const tslab_tcache_t* self, tslab_run_t* r, uint32_t words,
                                       bool starts) {
  tslab_heap_t* h = &a->heap;
  if (r->bits_cap == words && (!starts || r->starts)) return true;
  pthread_mutex_lock(&h->mu);
  bool ok = true;
  if (r->bits_cap != words) {
    if (r->bits) push_block(&h->free_words[r->bits_cap], (void*)r->bits);
    /* A start bitmap is sized by the block's words, as the alloc bits. */
    _Atomic uint64_t* old_starts = r->starts;
    if (old_starts) push_block(&h->free_starts[r->bits_cap], (void*)old_starts);
    TSLAB_RSTORE(r->starts, NULL);
    _Atomic uint64_t* bits = (_Atomic uint64_t*)meta_block(a, self, &h->free_words[words], (size_t)words * 16);
    TSLAB_RSTORE(r->bits, bits);
    r->bits_cap = bits ? (uint16_t)words : 0;
    ok = bits != NULL;
  }
  if (ok && starts && !r->starts) {
    void* p = meta_block(a, self, &h->free_starts[words], (words + 1) * sizeof(uint64_t));
    TSLAB_RSTORE(r->starts, (_Atomic uint64_t*)p);
    ok = p != NULL;
  }
  pthread_mutex_unlock(&h->mu);
  return ok;
}

TSLAB_INTERNAL _Atomic uint16_t* tslab_heap_gens(tslab_t* a, const tslab_tcache_t* self, uint32_t capacity) {
  uint32_t idx = (capacity + 63) / 64;
  pthread_mutex_lock(&a->heap.mu);
  void* p = meta_block(a, self, &a->heap.free_gens[idx], (size_t)idx * 128);
  pthread_mutex_unlock(&a->heap.mu);
  return (_Atomic uint16_t*)p;
}

/* Raise the generation base of a retired run's first granule past every
 * generation a handle into it may hold, so no handle outlives the run. */
static void raise_gen_base(tslab_t* a, tslab_run_t* r, uint8_t kind) {
  _Atomic uint16_t* base = &a->gen_base[tslab_run_index(a, r)];
  uint16_t next = atomic_load_explicit(base, memory_order_relaxed);
  if (kind == TSLAB_RUN_LARGE || kind == TSLAB_RUN_BLOCK) {
    uint16_t v = (uint16_t)(r->gen + 1);
    if ((int16_t)(v - next) > 0) next = v;
  }
  _Atomic uint16_t* g = atomic_load_explicit(&r->gens, memory_order_relaxed);
  if (kind == TSLAB_RUN_SLAB && g) {
    for (uint32_t i = 0; i < r->capacity; i++) {
      uint16_t v = (uint16_t)(atomic_load_explicit(&g[i], memory_order_relaxed) + 1);
      if ((int16_t)(v - next) > 0) next = v;
    }
  }
  atomic_store_explicit(base, next, memory_order_relaxed);
}

/* Whether the retire may keep runs of `era` beyond pool_resident_max: the
 * era is still ACTIVE. The retire announces itself in the slot's
 * `decay_pending` before it reads the state, and the closer CASes the state
 * before it reads `decay_pending` (both seq_cst): either this read sees the
 * close, or the closer sees the retire and waits for the heap mutex, which
 * the retire holds until its runs are linked (tslab_heap_decay_close). The
 * caller drops its announcement once its runs are linked. */
static bool decay_allowed(tslab_t* a, const tslab_retire_era_t* era) {
  atomic_fetch_add_explicit(&a->heap.decay_pending[era->slot], 1, memory_order_seq_cst);
  return atomic_load_explicit(era->state, memory_order_seq_cst) == era->active;
}

TSLAB_INTERNAL size_t tslab_heap_retire_list(tslab_t* a, tslab_run_t* list, bool release,
                                             const tslab_retire_era_t* era) {
  tslab_heap_t* h = &a->heap;
  pthread_mutex_lock(&h->mu);
  tslab_run_t* chain = NULL;
  uint64_t now = tslab_coarse_ns();
  int decay = -1; /* not asked yet; then 0 or 1 */
  tslab_run_t* evicted = NULL; /* older runs let go to make room: other retires' bytes */
  /* The stamp is read before the runs' kinds change below. That is safe
   * because every seal runs under this mutex too (grace.c is only polled
   * from the heap): no seal can complete between the stamp and the stores. */
  uint64_t stamp = tslab_grace_stamp(a);
  while (list) {
    tslab_run_t* r = list;
    list = r->heap_next;
    r->heap_next = NULL;
    raise_gen_base(a, r, atomic_load_explicit(&r->kind, memory_order_relaxed));
    r->retired = stamp;
    /* A run given back before it was published (a formatter that ran out of
     * metadata) closes its `seq`. */
    if (atomic_load_explicit(&r->seq, memory_order_relaxed) & 1) seq_end(r);
    size_t bytes = tslab_run_bytes(r);
    if (release || a->config.release_policy == TSLAB_RELEASE_EAGER || r->granules > TSLAB_SLAB_MAX_GRANULES) {
      mark_releasing(a, r, &chain);
    } else if (h->dirty_bytes + bytes <= a->config.pool_resident_max) {
      dirty_link(a, r, 0, now);
    } else if (era && a->config.pool_decay_max && bytes <= pool_bound(a) &&
               (decay >= 0 || (decay = decay_allowed(a, era)) != 0) && decay) {
      /* Decay keeps it. A pool at its bound makes room by letting its
       * oldest runs go, not this one, the likeliest to be reused soon. */
      evicted = make_room(a, evicted, bytes);
      dirty_link(a, r, era->slot + 1, now);
    } else {
      mark_releasing(a, r, &chain);
    }
  }
  if (decay >= 0) atomic_fetch_sub_explicit(&h->decay_pending[era->slot], 1, memory_order_seq_cst);
  /* Runs the pool lets go of now belong to other retires (other eras): their
   * bytes are not this call's. */
  evicted = evict_over_budget(a, evicted, now);
  size_t released = release_chain(a, chain);
  release_chain(a, evicted);
  pthread_mutex_unlock(&h->mu);
  return released;
}

TSLAB_INTERNAL size_t tslab_heap_retire(tslab_t* a, tslab_run_t* r, bool release) {
  r->heap_next = NULL;
  return tslab_heap_retire_list(a, r, release, NULL);
}

TSLAB_INTERNAL size_t tslab_heap_decay_close(tslab_t* a, uint32_t slot) {
  tslab_heap_t* h = &a->heap;
  if (atomic_load_explicit(&h->decay_pending[slot], memory_order_seq_cst) == 0 &&
      atomic_load_explicit(&h->decay_bytes[slot], memory_order_relaxed) == 0)
    return 0;
  pthread_mutex_lock(&h->mu);
  tslab_run_t* chain = NULL;
  for (tslab_run_t *r = h->lru_head, *next; r; r = next) {
    next = r->lru_next;
    if (r->decay_slot != slot + 1) continue;
    if (h->dirty_bytes > a->config.pool_resident_max) {
      dirty_unlink(a, r);
      mark_releasing(a, r, &chain);
    } else {
      decay_untag(h, r); /* within the bound now: an ordinary part of the reserve */
    }
  }
  size_t released = release_chain(a, chain);
  pthread_mutex_unlock(&h->mu);
  return released;
}

TSLAB_INTERNAL size_t tslab_heap_release_pool(tslab_t* a) {
  tslab_heap_t* h = &a->heap;
  pthread_mutex_lock(&h->mu);
  tslab_run_t* chain = NULL;
  while (h->lru_head) evict_oldest(a, &chain);
  size_t released = release_chain(a, chain);
  pthread_mutex_unlock(&h->mu);
  return released;
}

/* ---- spans of an era (free-all, docs/ARCHITECTURE.md 7.5) ---- */

TSLAB_INTERNAL void tslab_heap_span_link(tslab_t* a, tslab_run_t* r, uint32_t slot) {
  pthread_mutex_lock(&a->heap.mu);
  r->era_prev = NULL;
  r->era_next = a->heap.spans[slot];
  if (r->era_next) r->era_next->era_prev = r;
  __atomic_store_n(&a->heap.spans[slot], r, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&a->heap.mu);
}

TSLAB_INTERNAL void tslab_heap_span_unlink(tslab_t* a, tslab_run_t* r, uint32_t slot) {
  pthread_mutex_lock(&a->heap.mu);
  if (r->era_prev)
    r->era_prev->era_next = r->era_next;
  else if (a->heap.spans[slot] == r)
    __atomic_store_n(&a->heap.spans[slot], r->era_next, __ATOMIC_RELEASE);
  if (r->era_next) r->era_next->era_prev = r->era_prev;
  r->era_next = r->era_prev = NULL;
  pthread_mutex_unlock(&a->heap.mu);
}

/* Era `era` left the ring: its spans still listed carry its label for their
 * late frees (7.5). They are the list's head: spans are linked at its head
 * when allocated, the slot's earlier eras closed before this one was
 * claimed, and the next era is not open yet; so the walk stops at the first
 * span of another era (the list may hold many of earlier eras' spans that
 * outlive them). No span of the era is linked any more (it is closed, and a
 * span linked after its close backs out, 7.2), so an empty list needs no
 * mutex. */
TSLAB_INTERNAL void tslab_heap_span_label(tslab_t* a, uint32_t slot, uint64_t era, uint16_t label) {
  if (!__atomic_load_n(&a->heap.spans[slot], __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&a->heap.mu);
  for (tslab_run_t* r = a->heap.spans[slot]; r && atomic_load_explicit(&r->era, memory_order_relaxed) == era;
       r = r->era_next)
    r->era_label = label;
  pthread_mutex_unlock(&a->heap.mu);
}

TSLAB_INTERNAL bool tslab_heap_init(tslab_t* a) {
  a->heap.spans = tslab_os_map((size_t)a->ring_size * sizeof(tslab_run_t*));
  a->heap.decay_pending = tslab_os_map((size_t)a->ring_size * sizeof(*a->heap.decay_pending));
  a->heap.decay_bytes = tslab_os_map((size_t)a->ring_size * sizeof(*a->heap.decay_bytes));
  return a->heap.spans && a->heap.decay_pending && a->heap.decay_bytes && pthread_mutex_init(&a->heap.mu, NULL) == 0;
}

TSLAB_INTERNAL void tslab_heap_destroy(tslab_t* a) {
  tslab_os_unmap(a->heap.spans, (size_t)a->ring_size * sizeof(tslab_run_t*));
  tslab_os_unmap((void*)a->heap.decay_pending, (size_t)a->ring_size * sizeof(*a->heap.decay_pending));
  tslab_os_unmap((void*)a->heap.decay_bytes, (size_t)a->ring_size * sizeof(*a->heap.decay_bytes));
  pthread_mutex_destroy(&a->heap.mu);
}

/* ---- fork ---- */

/* Child (docs/ARCHITECTURE.md 7.6): runs a vanished thread was releasing
 * (RELEASING) are released, runs it was formatting (kind NONE) go back to
 * the dirty pool as aged out, runs it was publishing (seq odd) are
 * finished; then the pool is evicted down to its bound. Single-threaded:
 * the mutex is taken only because release_chain drops and retakes it. */
TSLAB_INTERNAL void tslab_heap_fork_repair(tslab_t* a) {
  tslab_heap_t* h = &a->heap;
  tslab_run_t* releasing = NULL;
  for (size_t g = 0; g < h->top;) {
    tslab_run_t* r = atomic_load(&a->map[g]);
    if (!r || r->start != a->base + (g << TSLAB_GRANULE_SHIFT) || r->granules == 0) break;
    uint8_t kind = atomic_load(&r->kind);
    uint32_t seq = atomic_load(&r->seq);
    if (seq & 1) atomic_store(&r->seq, seq + 1);
    if (kind == TSLAB_RUN_RELEASING) {
      /* Its releaser vanished: the child releases it (below). */
      mark_releasing(a, r, &releasing);
    } else if (kind == TSLAB_RUN_NONE) {
      r->heap_next = NULL;
      dirty_link(a, r, 0, 0);
    } else if (kind == TSLAB_RUN_SLAB || kind == TSLAB_RUN_BLOCK) {
      for (size_t i = g; i < g + r->granules; i++) map_set(a, i, r);
    }
    g += r->granules;
  }
  /* The pool back within its bound: the runs just linked count as aged out
   * and go first. */
  releasing = evict_over_budget(a, releasing, tslab_coarse_ns());
  pthread_mutex_lock(&h->mu);
  release_chain(a, releasing);
  pthread_mutex_unlock(&h->mu);
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
  size_t dirty_bytes = 0, aged = 0, binned = 0;
  for (tslab_run_t* r = h->lru_head; r; r = r->lru_next) {
    if (atomic_load(&r->kind) != TSLAB_RUN_FREE_DIRTY) REPORT("dirty list holds a run of kind %d", (int)atomic_load(&r->kind));
    if (r->lru_prev ? r->lru_prev->lru_next != r : h->lru_head != r) REPORT("dirty age order is broken");
    if (!r->lru_next && h->lru_tail != r) REPORT("dirty age order ends elsewhere than its tail");
    dirty_bytes += tslab_run_bytes(r);
    aged++;
  }
  if (dirty_bytes != h->dirty_bytes) REPORT("dirty pool counts %zu bytes, lists hold %zu", h->dirty_bytes, dirty_bytes);
  for (uint32_t b = 0; b < TSLAB_HEAP_BINS; b++) {
    if ((h->dirty[b] != NULL) != ((h->dirty_mask[b >> 6] >> (b & 63)) & 1))
      REPORT("dirty bin %u mask disagrees with its list", b);
    for (tslab_run_t* r = h->dirty[b]; r; r = r->heap_next) {
      if (atomic_load(&r->kind) != TSLAB_RUN_FREE_DIRTY)
        REPORT("dirty bin holds a run of kind %d", (int)atomic_load(&r->kind));
      if (bin_of(r->granules) != b) REPORT("dirty run of %u granules in bin %u", r->granules, b);
      binned++;
    }
  }
  if (binned != aged) REPORT("dirty bins hold %zu runs, the age order %zu", binned, aged);
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    uint64_t tagged = 0;
    for (tslab_run_t* r = h->lru_head; r; r = r->lru_next)
      if (r->decay_slot == slot + 1) tagged += tslab_run_bytes(r);
    if (tagged != atomic_load(&h->decay_bytes[slot]))
      REPORT("decay of ring slot %u counts %llu bytes, the pool holds %llu", slot,
             (unsigned long long)atomic_load(&h->decay_bytes[slot]), (unsigned long long)tagged);
  }
  for (uint32_t b = 0; b < TSLAB_HEAP_BINS; b++) {
    bool nonempty = h->clean[b] != NULL;
    bool marked = (h->clean_mask[b >> 6] >> (b & 63)) & 1;
    if (nonempty != marked) REPORT("clean bin %u mask disagrees with its list", b);
    for (tslab_run_t* r = h->clean[b]; r; r = r->heap_next) {
      if (atomic_load(&r->kind) != TSLAB_RUN_FREE_CLEAN) REPORT("clean list holds a run of kind %d", (int)atomic_load(&r->kind));
      if (bin_of(r->granules) != b) REPORT("clean run of %u granules in bin %u", r->granules, b);
    }
  }
  for (tslab_run_t* r = h->limbo_head; r; r = r->heap_next)
    if (atomic_load(&r->kind) != TSLAB_RUN_LIMBO) REPORT("limbo holds a descriptor of kind %d", (int)atomic_load(&r->kind));
  for (size_t g = 0; g < h->top;) {
    tslab_run_t* r = atomic_load(&a->map[g]);
    if (!r || r->start != a->base + (g << TSLAB_GRANULE_SHIFT) || r->granules == 0) {
      REPORT("granule %zu is not the start of a run", g);
      break;
    }
    int kind = atomic_load(&r->kind);
    if (kind == TSLAB_RUN_NONE || kind == TSLAB_RUN_RELEASING || kind == TSLAB_RUN_LIMBO)
      REPORT("run at granule %zu has transient kind %d", g, kind);
    if (atomic_load(&r->seq) & 1) REPORT("run at granule %zu is half formatted", g);
    tslab_run_t* last = atomic_load(&a->map[g + r->granules - 1]);
    if (last != r) REPORT("last granule of the run at %zu maps elsewhere", g);
    if (kind == TSLAB_RUN_SLAB || kind == TSLAB_RUN_BLOCK || kind == TSLAB_RUN_RESERVED) {
      for (size_t i = g; i < g + r->granules; i++)
        if (atomic_load(&a->map[i]) != r) REPORT("granule %zu of a run in use maps elsewhere", i);
    }
    g += r->granules;
  }
  pthread_mutex_unlock(&h->mu);
  return bad;
}
