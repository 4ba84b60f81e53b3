/* Blocks: runs of mixed-size objects of one era, small (one granule, 16 KiB)
 * or large (four), filled by bumping a pointer (docs/ARCHITECTURE.md 3.4),
 * and the per-thread hot reserve of drained blocks (section 5).
 *
 * A block is a run whose slots are 16-byte units. Each object has its alloc
 * bit at its first unit, so the slab free path, double-free detection and
 * handles work unchanged. `starts` marks object boundaries: unit 0 and the
 * unit after every object, so an object's size is the distance to the next
 * boundary, for any thread, at any time, and the number of objects ever
 * allocated is popcount(starts) - 1. The bitmap has one word more than the
 * units need, so the boundary after an object that ends the block needs no
 * branch on the fast path. */
#include <string.h>

#include "fault.h"
#include "internal.h"

static uint32_t block_words(uint32_t granules) {
  return granules << (TSLAB_GRANULE_SHIFT - TSLAB_UNIT_SHIFT - 6);
}

/* Give run b (of a block's length) the block geometry, for era, owned by
 * tc; its bitmaps need clearing up to `used_words` (a fresh bitmap: all of
 * them). */
static void block_format(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* b, uint64_t era, uint32_t used_words) {
  uint32_t words = block_words(b->granules), units = words * 64;
  TSLAB_RSTORE(b->cls, TSLAB_CLASSES);
  TSLAB_RSTORE(b->words, (uint16_t)words);
  TSLAB_RSTORE(b->obj_size, (uint16_t)(1u << TSLAB_UNIT_SHIFT));
  TSLAB_RSTORE(b->capacity, (uint16_t)units);
  TSLAB_RSTORE(b->recip, (1ull << 48) >> TSLAB_UNIT_SHIFT);
  TSLAB_RSTORE(b->slot_bytes, units << TSLAB_UNIT_SHIFT);
  /* A drained block's alloc and remote words are clear, except for a remote
   * bit a racing double free may have left (outside the guarantee, but it
   * must not free an object of the block's next use): cleared with the
   * boundaries. */
  _Atomic uint64_t* starts = b->starts;
  _Atomic uint64_t* bits = b->bits;
  if (used_words > words + 1) used_words = words + 1;
  uint32_t bit_words = 2 * (used_words < words ? used_words : words);
  /* Two runs of stores, unrolled by four (a request's block uses a few
   * words, a full small one all 17): with the test for the bitmap's extra word
   * inside one loop, formatting a used block took about 250 instructions
   * (a 'kernel' request formats some 40). */
#pragma GCC unroll 4
  for (uint32_t w = 0; w < used_words; w++) atomic_store_explicit(&starts[w], 0, memory_order_relaxed);
#pragma GCC unroll 4
  for (uint32_t w = 0; w < bit_words; w++) atomic_store_explicit(&bits[w], 0, memory_order_relaxed);
  atomic_store_explicit(&starts[0], 1, memory_order_relaxed);
  TSLAB_RSTORE(b->gen, atomic_load_explicit(&a->gen_base[tslab_run_index(a, b)], memory_order_relaxed));
  TSLAB_RSTORE(b->bumped, 0);
  TSLAB_RSTORE(b->hint, 0);
  b->list = TSLAB_LIST_CUR;
  b->bin = NULL;
  atomic_store_explicit(&b->live, 0, memory_order_relaxed);
  b->era_counted = 0;
  atomic_store_explicit(&b->notify, TSLAB_NOTIFY_NONE, memory_order_relaxed);
  /* Biased: every unit counts as set aside while the block bumps (3.4). */
  atomic_store_explicit(&b->usage, units, memory_order_relaxed);
  tslab_run_set_era(a, b, era);
  atomic_store_explicit(&b->owner, tc, memory_order_relaxed);
  atomic_store_explicit(&b->creator, tc, memory_order_relaxed);
  atomic_store_explicit(&b->mode, TSLAB_ATTACHED, memory_order_relaxed);
}

/* A new block of `granules` from the heap. A heap with no four free
 * granules in a row gives a small block for a large one, without giving up
 * its dirty pool to coalesce them (3.4); a small one's request may. */
static tslab_run_t* block_new(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t granules) {
  tslab_run_t* b = tslab_heap_alloc(a, tc, granules, 1, granules == TSLAB_BLOCK_GRANULES_SMALL);
  if (!b && granules != TSLAB_BLOCK_GRANULES_SMALL) b = tslab_heap_alloc(a, tc, TSLAB_BLOCK_GRANULES_SMALL, 1, true);
  if (!b) return NULL;
  uint32_t words = block_words(b->granules);
  if (!tslab_heap_bitmaps(a, tc, b, words, true)) {
    tslab_heap_retire(a, b, false);
    return NULL;
  }
  block_format(a, tc, b, era, words + 1);
  TSLAB_COUNT_EVENT(a, tc, blocks_created, 1);
  return b;
}

/* A drained block of this cache's reserve, formatted again in place: its
 * alloc and remote bits are clear (it drained, and every remote bit was
 * taken), so only the boundaries it used need clearing. When another thread
 * is inside a non-owner window right now, it may be validating a stale free
 * against the block's metadata (section 4): then the memory gets a fresh
 * descriptor and the old one waits in limbo. */
static tslab_run_t* block_reuse(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* b, uint64_t era) {
  uint32_t used_words = (b->bumped >> 6) + 1;
  /* Handles into the block's last use must stop matching: its granule's
   * generation base moves past the generation they carry (section 8), and
   * the next use takes it (block_format). */
  _Atomic uint16_t* base = &a->gen_base[tslab_run_index(a, b)];
  uint16_t next = (uint16_t)(b->gen + 1);
  if ((int16_t)(next - atomic_load_explicit(base, memory_order_relaxed)) > 0)
    atomic_store_explicit(base, next, memory_order_relaxed);
  if (!tslab_grace_quiet(a, tc)) {
    pthread_mutex_lock(&a->heap.mu);
    tslab_run_t* d = tslab_heap_fresh_desc(a, tc, b);
    pthread_mutex_unlock(&a->heap.mu);
    if (!d) {
      /* No descriptor (metadata exhausted): the block, off its reserve,
       * goes back to the heap, which formats it again only after its
       * grace period (G2). */
      atomic_store_explicit(&b->kind, TSLAB_RUN_BLOCK, memory_order_relaxed);
      tslab_heap_retire(a, b, false);
      return NULL;
    }
    if (!tslab_heap_bitmaps(a, tc, d, block_words(d->granules), true)) {
      tslab_heap_retire(a, d, false);
      return NULL;
    }
    b = d;
    used_words = block_words(d->granules) + 1;
  } else {
    tslab_run_seq_begin(b);
  }
  b->retired = 0;
  block_format(a, tc, b, era, used_words);
  TSLAB_COUNT_EVENT(a, tc, blocks_reused, 1);
  return b;
}

/* A drained block of the cache's reserve, formatted for era; NULL when the
 * reserve is empty (or its block had to go back to the heap). */
static tslab_run_t* block_reserved(tslab_t* a, tslab_tcache_t* tc, uint64_t era) {
  tslab_run_t* b = atomic_load_explicit(&tc->hot, memory_order_relaxed)
                       ? atomic_exchange_explicit(&tc->hot, NULL, memory_order_acquire)
                       : NULL;
  if (!b) {
    /* The spare stack: only this cache pushes and pops; a releaser may
     * take it all (head to NULL) at any time, which makes this CAS fail. */
    b = atomic_load_explicit(&tc->spares, memory_order_acquire);
    while (b && !atomic_compare_exchange_weak_explicit(
                    &tc->spares, &b, atomic_load_explicit(&b->spare_next, memory_order_relaxed),
                    memory_order_acquire, memory_order_acquire)) {
    }
  }
  if (!b) return NULL;
  tslab_hook_point(TSLAB_HOOK_RESERVE_TAKEN);
  return block_reuse(a, tc, b, era);
}

TSLAB_INTERNAL tslab_run_t* tslab_block_take(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t granules,
                                             bool reserve_only) {
  tslab_run_t* b = block_reserved(a, tc, era);
  if (!b && !reserve_only) b = block_new(a, tc, era, granules);
  if (!b) return NULL;
  tslab_run_publish(a, b, TSLAB_RUN_BLOCK);
  return b;
}

TSLAB_INTERNAL uint32_t tslab_block_objects(const tslab_run_t* b, uint32_t units) {
  _Atomic uint64_t* starts = TSLAB_RLOAD(b->starts);
  uint32_t n = 0;
  if (!starts) return 0;
  uint32_t words = (units >> 6) + 1, max = TSLAB_RLOAD(b->capacity) / 64 + 1;
  if (words > max) words = max;
  for (uint32_t w = 0; w < words; w++) n += tslab_popcount(atomic_load_explicit(&starts[w], memory_order_relaxed));
  return n ? n - 1 : 0;
}

TSLAB_INTERNAL void tslab_block_stop(tslab_run_t* b, uint8_t* top) {
  uint32_t units = (uint32_t)((size_t)(top - b->start) >> TSLAB_UNIT_SHIFT);
  uint32_t objects = tslab_block_objects(b, units);
  TSLAB_RSTORE(b->bumped, units);
  TSLAB_RSTORE(b->hint, objects);
  tslab_slab_used_add(b, -(int64_t)(b->capacity - objects));
}

/* fork child: bumping block b of a cache whose thread may have been part way
 * through a bump or through stopping b. `top` is the last object published:
 * later boundaries and bits go (that object is unreachable in the child),
 * and `used` gets its bias back (3.4): every unit, less the objects freed. */
TSLAB_INTERNAL void tslab_block_fork_rewind(tslab_run_t* b, uint8_t* top) {
  uint32_t units = (uint32_t)((size_t)(top - b->start) >> TSLAB_UNIT_SHIFT);
  uint32_t objects = 0, live = 0, words = b->words;
  for (uint32_t w = 0; w <= words; w++) {
    uint64_t keep_start = w < (units >> 6) ? ~0ull : w == (units >> 6) ? (2ull << (units & 63)) - 1 : 0;
    uint64_t st = atomic_load(&b->starts[w]) & keep_start;
    atomic_store(&b->starts[w], st);
    objects += tslab_popcount(st);
    if (w == words) break;
    uint64_t keep = w < (units >> 6) ? ~0ull : w == (units >> 6) ? (1ull << (units & 63)) - 1 : 0;
    uint64_t al = atomic_load(&b->bits[2 * w]) & keep;
    atomic_store(&b->bits[2 * w], al);
    atomic_store(&b->bits[2 * w + 1], atomic_load(&b->bits[2 * w + 1]) & al);
    live += tslab_popcount(al);
  }
  TSLAB_RSTORE(b->bumped, 0);
  TSLAB_RSTORE(b->hint, 0);
  atomic_store(&b->usage, (atomic_load(&b->usage) & ~TSLAB_USED_MASK) | (b->capacity - ((objects - 1) - live)));
}

/* Size of the object starting at `unit`, among a block's first `units`: up
 * to the next boundary; 0 past the last one (not an object). */
TSLAB_INTERNAL size_t tslab_block_object_size(_Atomic uint64_t* starts, uint32_t units, uint32_t unit) {
  uint32_t w = unit >> 6;
  uint64_t above = atomic_load_explicit(&starts[w], memory_order_acquire) & (~1ull << (unit & 63));
  while (!above) {
    if (++w > units / 64) return 0;
    above = atomic_load_explicit(&starts[w], memory_order_acquire);
  }
  uint32_t next = (w << 6) + (uint32_t)__builtin_ctzll(above);
  return (size_t)(next - unit) << TSLAB_UNIT_SHIFT;
}

TSLAB_INTERNAL uint64_t tslab_block_live_bytes(const tslab_run_t* b, uint32_t units) {
  _Atomic uint64_t* starts = TSLAB_RLOAD(b->starts);
  _Atomic uint64_t* bits = TSLAB_RLOAD(b->bits);
  uint64_t bytes = 0;
  if (!starts || !bits) return 0;
  for (uint32_t w = 0, words = (units + 63) >> 6; w < words; w++) {
    /* Live: allocated and not freed by another thread (a remote bit not
     * collected yet is a completed free). */
    uint64_t live = atomic_load_explicit(&bits[2 * w], memory_order_relaxed) &
                    ~atomic_load_explicit(&bits[2 * w + 1], memory_order_relaxed);
    for (uint64_t al = live; al; al &= al - 1)
      bytes += tslab_block_object_size(starts, units, (w << 6) + (uint32_t)__builtin_ctzll(al));
  }
  return bytes;
}

/* The ranges a block trim gives back, released in one batch: the pages
 * kept cut them apart, so a block of P pages (of 4 KiB or more) has at most
 * P / 2 + 1. */
enum { TRIM_RANGES = (TSLAB_BLOCK_BYTES_LARGE / 4096) / 2 + 1 };
typedef struct {
  struct iovec r[TRIM_RANGES];
  size_t n;
} trim_batch_t;

static void trim_range(trim_batch_t* t, uint8_t* from, uint8_t* to) {
  if (to > from) t->r[t->n++] = (struct iovec){from, (size_t)(to - from)};
}

/* A block detached with live objects keeps only the pages they touch: the
 * rest, resident from this use of the block or an earlier one, goes back to
 * the OS, so an object that outlives its epoch pins a page or two, not the
 * block (3.4). The closer calls this before it adds the block's live count,
 * so no free can retire the block meanwhile. A concurrent free only clears
 * bits (the allocator never writes into an object), so reading an alloc bit
 * that is being cleared at worst keeps a page that is no longer needed. The
 * heap's resident estimate keeps counting the block whole until it is
 * released as a run. */
TSLAB_INTERNAL size_t tslab_block_trim(tslab_t* a, tslab_run_t* b) {
  size_t page = tslab_os_page_size(), bytes = tslab_run_bytes(b);
  if (page >= bytes) return 0;
  uint8_t* start = b->start;
  uint8_t* kept = start; /* pages below are kept or gathered already */
  trim_batch_t t = {.n = 0};
  for (uint32_t w = 0; w < b->words; w++) {
    for (uint64_t al = atomic_load_explicit(&b->bits[2 * w], memory_order_acquire); al; al &= al - 1) {
      uint32_t unit = (w << 6) + (uint32_t)__builtin_ctzll(al);
      uint8_t* lo = start + ((size_t)unit << TSLAB_UNIT_SHIFT);
      uint8_t* hi = lo + tslab_block_object_size(b->starts, b->capacity, unit);
      lo = (uint8_t*)((uintptr_t)lo & ~(uintptr_t)(page - 1));
      hi = (uint8_t*)(((uintptr_t)hi + page - 1) & ~(uintptr_t)(page - 1));
      if (lo > kept) trim_range(&t, kept, lo);
      if (hi > kept) kept = hi;
    }
  }
  trim_range(&t, kept, start + bytes);
  bool ok[TRIM_RANGES];
  return t.n ? tslab_heap_release_ranges(a, t.r, t.n, ok) : 0;
}

/* A drained block goes to its cache's hot reserve when there is room: the
 * hot slot first (only this cache puts there, so a plain store does when it
 * is empty), then the spare stack. `depth` holds the hot block's granules,
 * and a spare's those of the stack from it down. Hot slot and stack together
 * keep at most thread_reserve_max: only the owner adds to or takes from
 * them, a releaser only takes, so checking the sum at each addition holds
 * the bound. What a releaser took meanwhile only makes the check stricter,
 * and a descriptor it gave away (and the heap reused) has a `depth` of 0 or
 * one a later keep bounded. The caller is the cache's owner, or a closer of
 * an era only this cache used, on the owner's thread. */
TSLAB_INTERNAL bool tslab_block_keep(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* b) {
  size_t max_granules = a->config.thread_reserve_max >> TSLAB_GRANULE_SHIFT;
  if (a->config.release_policy == TSLAB_RELEASE_EAGER) return false;
  tslab_run_t* head = atomic_load_explicit(&tc->spares, memory_order_relaxed);
  tslab_run_t* hot = atomic_load_explicit(&tc->hot, memory_order_relaxed);
  /* The room the hot block leaves (all of it when the hot slot is empty),
   * against the spares below and this block. A failed CAS below means a
   * releaser took the stack: the sum only shrank, so it is checked once. */
  uint32_t hot_granules = hot ? TSLAB_RLOAD(hot->depth) : 0;
  size_t room = hot_granules < max_granules ? max_granules - hot_granules : 0;
  if ((head ? TSLAB_RLOAD(head->depth) : 0) + b->granules > room) return false;
  atomic_store_explicit(&b->owner, NULL, memory_order_relaxed);
  atomic_store_explicit(&b->kind, TSLAB_RUN_RESERVED, memory_order_release);
  if (!hot) {
    TSLAB_RSTORE(b->depth, b->granules);
    atomic_store_explicit(&tc->hot, b, memory_order_release);
    return true;
  }
  do {
    TSLAB_RSTORE(b->depth, (head ? TSLAB_RLOAD(head->depth) : 0) + b->granules);
    atomic_store_explicit(&b->spare_next, head, memory_order_relaxed);
  } while (!atomic_compare_exchange_weak_explicit(&tc->spares, &head, b, memory_order_release, memory_order_relaxed));
  return true;
}

/* Statistics, from any thread: the hot block and the head spare may be
 * taken (and their descriptors used again) meanwhile, so their `depth` is
 * read as the relaxed atomic it is written as: 0 or a value a keep bounded.
 * The two reads are not one snapshot: a reader racing the owner may count
 * a block twice or miss one. */
TSLAB_INTERNAL size_t tslab_block_reserve_bytes(tslab_tcache_t* tc) {
  tslab_run_t* spares = atomic_load_explicit(&tc->spares, memory_order_acquire);
  tslab_run_t* hot = atomic_load_explicit(&tc->hot, memory_order_acquire);
  size_t granules = hot ? TSLAB_RLOAD(hot->depth) : 0;
  if (spares) granules += TSLAB_RLOAD(spares->depth);
  return granules << TSLAB_GRANULE_SHIFT;
}

TSLAB_INTERNAL size_t tslab_block_release_reserve(tslab_t* a, tslab_tcache_t* tc, bool release) {
  tslab_run_t* b = atomic_exchange_explicit(&tc->spares, NULL, memory_order_acquire);
  tslab_run_t* list = atomic_exchange_explicit(&tc->hot, NULL, memory_order_acquire);
  if (list) {
    list->heap_next = NULL;
    atomic_store_explicit(&list->kind, TSLAB_RUN_BLOCK, memory_order_relaxed);
  }
  /* The stack is this call's now: its spare links become the heap's chain
   * (the owner may still read a spare link for a pop that will fail). */
  for (tslab_run_t* next; b; b = next) {
    next = atomic_load_explicit(&b->spare_next, memory_order_relaxed);
    atomic_store_explicit(&b->kind, TSLAB_RUN_BLOCK, memory_order_relaxed);
    b->heap_next = list;
    list = b;
  }
  return list ? tslab_heap_retire_list(a, list, release, NULL) : 0;
}
