/* The public allocation and free paths: the fast paths (thread cache, busy
 * window, bump or bitmap pop, local free) and everything around them:
 * calloc, aligned allocation, realloc, usable size, handles.
 * docs/ARCHITECTURE.md sections 3, 6 and 8. */
#include <string.h>

#include "fault.h"
#include "internal.h"

static void* fail_alloc(tslab_t* a, int status) {
  if (a) tslab_epoch_count_failure(a, status);
  tslab_set_error(status);
  return NULL;
}

/* ---- handles (section 8) ---- */

#define HANDLE_GRANULE_BITS 36
#define HANDLE_SLOT_MASK ((1ull << TSLAB_HANDLE_SLOT_BITS) - 1)
#define HANDLE_GRANULE_MASK ((1ull << HANDLE_GRANULE_BITS) - 1)

/* generation (16) | address of the run's first granule >> 14 (36) | slot
 * (12). The granule is absolute: a live instance's reservation holds no
 * address of another's, so a foreign handle fails the range check. */
static tslab_handle_t handle_pack(tslab_t* a, uint16_t gen, const uint8_t* start, uint32_t idx) {
  uint64_t g = ((uintptr_t)start >> TSLAB_GRANULE_SHIFT) & HANDLE_GRANULE_MASK;
  gen = (uint16_t)(gen + a->gen_seed);
  return ((uint64_t)gen << (HANDLE_GRANULE_BITS + TSLAB_HANDLE_SLOT_BITS)) | (g << TSLAB_HANDLE_SLOT_BITS) | idx;
}

/* The generation a handle to slot idx of slab s carries. The slab gets its
 * per-slot generations on its first handle allocation (owner, in its busy
 * window); every free bumps the slot's generation so older handles stop
 * matching. False when there is no memory for the generations. */
static bool slot_generation(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, uint32_t idx, uint16_t* gen) {
  _Atomic uint16_t* g = atomic_load_explicit(&s->gens, memory_order_relaxed);
  if (!g) {
    g = tslab_heap_gens(a, tc, s->capacity);
    if (!g) return false;
    uint16_t base = atomic_load_explicit(&a->gen_base[tslab_run_index(a, s)], memory_order_relaxed);
    for (uint32_t i = 0; i < s->capacity; i++) atomic_store_explicit(&g[i], base, memory_order_relaxed);
    s->gens_cap = s->capacity;
    atomic_store_explicit(&s->gens, g, memory_order_release);
    s->has_gens = 1;
  }
  *gen = atomic_load_explicit(&g[idx], memory_order_relaxed);
  return true;
}

/* Owner, in its window: a handle for the object p just allocated. */
static bool make_handle(tslab_t* a, tslab_tcache_t* tc, void* p, tslab_handle_t* h) {
  tslab_run_t* s = tslab_run_of(a, p);
  uint32_t idx = tslab_slab_index(s, p);
  uint16_t gen = s->gen;
  if (atomic_load_explicit(&s->kind, memory_order_relaxed) == TSLAB_RUN_SLAB && !slot_generation(a, tc, s, idx, &gen))
    return false;
  *h = handle_pack(a, gen, s->start, idx);
  return true;
}

/* ---- allocation ---- */

/* Hand out one slot from the bin's set-aside word `m` (owner, busy window,
 * m != 0): the one freed last while set aside (`hot`, while the mask still
 * holds its bit), else the lowest. The slot was counted when it was set
 * aside (src/tcache.c, bin_put_masks). */
static inline __attribute__((always_inline)) void* bin_pop_mask(tslab_bin_t* bin, uint64_t m) {
  uint64_t bit = bin->hot_bit;
  uint8_t* p;
  if (m & bit) {
    p = bin->hot;
  } else {
    size_t b = (unsigned)__builtin_ctzll(m);
    bit = 1ull << b;
    p = bin->base + b * bin->size;
  }
  /* bit is one of m's: an exclusive or clears it in one instruction where
   * `& ~bit` takes three. */
  atomic_store_explicit(&bin->mask, m ^ bit, memory_order_relaxed);
  atomic_store_explicit(bin->word, atomic_load_explicit(bin->word, memory_order_relaxed) | bit,
                        memory_order_relaxed);
  TSLAB_ASSUME(p != NULL); /* the allocation paths then test only the promotion's NULL */
  return p;
}

/* The mask and the stack are empty: the next set-aside word becomes the
 * mask, and its lowest slot is handed out; NULL when there is none. Its
 * slots were counted when a refill set them aside, so no count changes.
 * Stores in the order the statistics and the fork child's repair rely on:
 * the mask (of a new word, so with no hot slot) before `next_mask` is
 * cleared (section 3, "The next word"). The general path's copy has a test
 * hook between the two (`hooked`, a constant): the fast path's would cost
 * it a call, and with it a stack frame on every allocation. */
static inline __attribute__((always_inline)) void* bin_promote(tslab_bin_t* bin, bool hooked) {
  uint64_t m = atomic_load_explicit(&bin->next_mask, memory_order_relaxed);
  if (m == 0) return NULL;
  bin->hot_bit = 0;
  bin->base = bin->next_base;
  bin->word = bin->next_word;
  atomic_store_explicit(&bin->mask, m, memory_order_release);
  if (hooked) tslab_hook_point(TSLAB_HOOK_PROMOTED);
  atomic_store_explicit(&bin->next_mask, 0, memory_order_release);
  return bin_pop_mask(bin, m);
}

/* Hand out a set-aside slot of the bin (owner, busy window): the hot slot,
 * else the top of the free stack, the slot freed last outside the mask's
 * word (section 3, F1), which joins its slab's `used` again, else the
 * lowest of the mask, else the lowest of the next word; NULL when there is
 * none. Each was counted in `taken` when set aside. `hooked`: bin_promote. */
static inline __attribute__((always_inline)) void* bin_take(tslab_bin_t* bin, bool hooked) {
  uint64_t m = atomic_load_explicit(&bin->mask, memory_order_relaxed);
  if (m & bin->hot_bit) return bin_pop_mask(bin, m);
  uint32_t n = atomic_load_explicit(&bin->stack_len, memory_order_relaxed);
  if (n != 0) {
    tslab_stacked_t* e = &bin->stack[n - 1];
    atomic_store_explicit(&bin->stack_len, n - 1, memory_order_relaxed);
    tslab_slab_used_add(e->run, 1);
    atomic_store_explicit(e->word, atomic_load_explicit(e->word, memory_order_relaxed) | e->bit,
                          memory_order_relaxed);
    TSLAB_ASSUME(e->p != NULL);
    return e->p;
  }
  return m != 0 ? bin_pop_mask(bin, m) : bin_promote(bin, hooked);
}

/* Smallest class that can hold size bytes at the given alignment, or
 * TSLAB_CLASSES when only a span can. Slab starts are granule-aligned, so a
 * class whose size is a multiple of the alignment aligns every object, for
 * alignments up to the granule. */
static uint32_t class_for(size_t size, size_t align) {
  if (size > TSLAB_SMALL_MAX || align > TSLAB_GRANULE) return TSLAB_CLASSES;
  uint32_t c = tslab_class_of(size);
  if (align <= 8) return c;
  for (; c < TSLAB_CLASSES; c++)
    if (tslab_classes[c].size % align == 0) return c;
  return TSLAB_CLASSES;
}

/* In the owner's window with era e ACTIVE and claimed: a block object (while
 * the era has block budget), else a slot of its class. A slot with no block
 * and no budget for one (the process epoch's, an era past its budget) skips
 * the block's refill, which could only fail: every class refill of a
 * long-lived epoch went through it (50 instructions). */
static void* alloc_small(tslab_t* a, tslab_tcache_t* tc, size_t size, size_t align, uint64_t e, int* status) {
  const tslab_slot_cache_t* sc = &tc->slots[e & a->ring_mask];
  void* p;
  if (align <= 16 && (sc->blk != NULL || tslab_slot_block_room(sc, size))) {
    p = tslab_bump_refill(a, tc, e, size, align, status);
    if (p || *status != TSLAB_OK) return p;
  }
  uint32_t cls = class_for(size, align);
  tslab_bin_t* bin = tslab_bin(a, tc, e, cls);
  p = bin_take(bin, true);
  if (p == NULL && tslab_bin_refill(a, tc, bin, e)) p = bin_take(bin, true);
  if (p == NULL) *status = TSLAB_ERR_OUT_OF_MEMORY;
  return p;
}

/* Everything that is not the fast path: argument checks, registration as a
 * user of the era, blocks, refills, alignment, spans, handles. NULL with
 * *status on failure, which the caller reports (fail_alloc). */
static void* alloc_try(tslab_t* a, size_t size, size_t align, uint64_t e, tslab_handle_t* h, int* status) {
  if (size == 0 || size > a->config.max_alloc_size) {
    *status = TSLAB_ERR_BAD_SIZE;
    return NULL;
  }
  tslab_tcache_t* tc = tslab_tcache_get(a);
  if (!tc) {
    *status = TSLAB_ERR_OUT_OF_MEMORY;
    return NULL;
  }
  void* p = NULL;
  tslab_busy_enter(tc);
  if (!tslab_era_active(a, e)) {
    *status = tslab_epoch_reject_status(a, e);
    if (*status == TSLAB_OK) *status = TSLAB_ERR_EPOCH_CLOSED; /* closed and reopened meanwhile */
  } else if (atomic_load_explicit(&tc->slots[e & a->ring_mask].era, memory_order_relaxed) != e &&
             (*status = tslab_tcache_claim(a, tc, e)) != TSLAB_OK) {
  } else if (size <= TSLAB_SMALL_MAX && align <= TSLAB_GRANULE) {
    p = alloc_small(a, tc, size, align, e, status);
  } else {
    p = tslab_large_alloc(a, tc, size, align, e);
    if (!p) *status = TSLAB_ERR_OUT_OF_MEMORY;
  }
  if (p && h && !make_handle(a, tc, p, h)) {
    /* No metadata for generations: undo; the caller reports OOM. */
    tslab_busy_exit(tc);
    tslab_free(a, p);
    *status = TSLAB_ERR_OUT_OF_MEMORY;
    return NULL;
  }
  tslab_busy_exit(tc);
  return p;
}

static __attribute__((noinline)) void* alloc_general(tslab_t* a, size_t size, size_t align, uint64_t e,
                                                    tslab_handle_t* h) {
  if (!a) return fail_alloc(NULL, TSLAB_ERR_INVALID_ARGUMENT);
  int status = TSLAB_OK;
  void* p = alloc_try(a, size, align, e, h, &status);
  return p ? p : fail_alloc(a, status);
}

/* The fast path: a thread-cache hit, an open era, and room in the era's
 * block or a slot set aside in the bin. Everything else goes through
 * alloc_general, out of line, so that the fast path needs no stack frame.
 * fast_max folds max_alloc_size into the size check. */
TSLAB_API TSLAB_HOT void* tslab_alloc(tslab_t* a, size_t size, tslab_epoch_t e) {
  if (likely(a != NULL && size - 1 < a->fast_max)) {
    if (likely(tslab_tls_last.id == a->id)) {
      tslab_tcache_t* tc = tslab_tls_last.tc;
      /* Addresses first: the busy store could alias them for the compiler. */
      uint32_t slot = (uint32_t)(e & a->ring_mask);
      _Atomic uint64_t* state = &a->ring[slot].state;
      tslab_slot_cache_t* sc = &tc->slots[slot];
      tslab_busy_enter(tc);
      if (likely(atomic_load_explicit(state, memory_order_seq_cst) == TSLAB_STATE(e, TSLAB_EPOCH_ACTIVE))) {
        size_t sz = tslab_unit_round(size);
        if (likely(sz <= sc->room)) {
          uint8_t* top = sc->top;
          tslab_bump_mark(sc, top, sz);
          sc->room -= sz;
          __atomic_store_n(&sc->top, top + sz, __ATOMIC_RELAXED);
          tslab_busy_exit(tc);
          return top;
        }
        /* The size anew: reusing the check's size - 1 for the class would keep
         * it in a callee-saved register, saved and restored on every call. */
        __asm__("" : "+r"(size));
        tslab_bin_t* bin = tslab_bin_of_size(a, tc, slot, size);
        /* One register for the bin: left to itself the compiler derives its
         * fields from two differently offset bases. */
        __asm__("" : "+r"(bin));
        void* p = bin_take(bin, false);
        if (likely(p != NULL)) {
          tslab_busy_exit(tc);
          return p;
        }
      }
      tslab_busy_exit(tc);
    }
  }
  return alloc_general(a, size, 0, e, NULL);
}

TSLAB_API void* tslab_calloc(tslab_t* a, size_t count, size_t size, tslab_epoch_t e) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) return fail_alloc(a, TSLAB_ERR_BAD_SIZE);
  void* p = tslab_alloc(a, bytes, e);
  if (!p) return NULL;
  /* A span the heap took from released or never-used memory reads as
   * zeros already: writing them would make every page resident. */
  if (bytes > TSLAB_SMALL_MAX) {
    tslab_run_t* r = atomic_load_explicit(&a->map[((uintptr_t)p - (uintptr_t)a->base) >> TSLAB_GRANULE_SHIFT],
                                          memory_order_relaxed);
    if (r->zeroed) return p;
  }
  memset(p, 0, bytes);
  return p;
}

TSLAB_API void* tslab_aligned_alloc(tslab_t* a, size_t alignment, size_t size, tslab_epoch_t e) {
  if (alignment == 0 || (alignment & (alignment - 1)) || alignment > TSLAB_MAX_ALIGNMENT)
    return fail_alloc(a, TSLAB_ERR_BAD_ALIGNMENT);
  return alloc_general(a, size, alignment, e, NULL);
}

TSLAB_API void* tslab_alloc_handle(tslab_t* a, size_t size, tslab_epoch_t e, tslab_handle_t* out) {
  if (!out) return fail_alloc(a, TSLAB_ERR_INVALID_ARGUMENT);
  *out = 0;
  /* Fast path: a set-aside slot of the bin (its hot slot, its free stack's
   * top or its mask's lowest) in a slab that has its generations already, when the
   * slot's block would not serve the size (typed pools in long-lived
   * epochs). */
  if (likely(a != NULL && size - 1 < a->fast_max && tslab_tls_last.id == a->id)) {
    tslab_tcache_t* tc = tslab_tls_last.tc;
    uint32_t slot = (uint32_t)(e & a->ring_mask);
    tslab_slot_cache_t* sc = &tc->slots[slot];
    tslab_busy_enter(tc);
    if (atomic_load_explicit(&a->ring[slot].state, memory_order_seq_cst) == TSLAB_STATE(e, TSLAB_EPOCH_ACTIVE) &&
        tslab_unit_round(size) > sc->room) {
      tslab_bin_t* bin = tslab_bin_of_size(a, tc, slot, size);
      uint64_t m = atomic_load_explicit(&bin->mask, memory_order_relaxed);
      uint32_t n = atomic_load_explicit(&bin->stack_len, memory_order_relaxed);
      /* The run bin_take takes from. */
      tslab_run_t* s = n == 0 || (m & bin->hot_bit) ? bin->cur : bin->stack[n - 1].run;
      _Atomic uint16_t* g = s ? atomic_load_explicit(&s->gens, memory_order_relaxed) : NULL;
      if ((m != 0 || n != 0) && g != NULL) {
        void* p = bin_take(bin, false);
        uint32_t idx = tslab_slab_index(s, p);
        *out = handle_pack(a, atomic_load_explicit(&g[idx], memory_order_relaxed), s->start, idx);
        tslab_busy_exit(tc);
        return p;
      }
    }
    tslab_busy_exit(tc);
  }
  return alloc_general(a, size, 0, e, out);
}

/* ---- free ---- */

/* The run at offset off of the reservation when the calling thread owns it
 * and its era is active, with the thread's busy window open (end it with
 * tslab_busy_exit(*tc)). Otherwise NULL, and *tc says whether the window
 * is open all the same: it is when the offset maps to a run of another
 * owner or of an era that is not active, which the free goes on with in the
 * same window (free_in_owner_window); NULL there when no window was opened.
 * The cache is the thread's most recently used one, as for the allocation
 * fast path; a thread that used another instance since goes through the
 * general path. The era's ring word is compared with the run's copy of its
 * open state (`ring_slot`, `active`: tslab_run_set_era), inside the window,
 * and the owner read after it (section 3.1: a descriptor retired and
 * formatted again for another cache in an active era fails the owner test,
 * whatever the window's timing). The caller still validates the slot. */
static inline __attribute__((always_inline)) tslab_run_t* own_run_open(tslab_t* a, uintptr_t off,
                                                                       tslab_tcache_t** tc_out) {
  *tc_out = NULL;
  if (unlikely(off >= a->reserve || tslab_tls_last.id != a->id)) return NULL;
  tslab_run_t* s = atomic_load_explicit(&a->map[off >> TSLAB_GRANULE_SHIFT], memory_order_acquire);
  if (unlikely(s == NULL)) return NULL;
  tslab_tcache_t* tc = tslab_tls_last.tc;
  tslab_busy_enter(tc);
  *tc_out = tc;
  if (likely(atomic_load_explicit(&a->ring[TSLAB_RLOAD(s->ring_slot)].state, memory_order_seq_cst) ==
                 TSLAB_RLOAD(s->active) &&
             atomic_load_explicit(&s->owner, memory_order_relaxed) == tc))
    return s;
  return NULL;
}

/* own_run_open for the paths that have nothing to do in the window when
 * the run is not the thread's: NULL, with no window open, then. */
static inline __attribute__((always_inline)) tslab_run_t* own_run_enter(tslab_t* a, uintptr_t off,
                                                                        tslab_tcache_t** tc_out) {
  tslab_run_t* s = own_run_open(a, off, tc_out);
  if (unlikely(s == NULL) && *tc_out) tslab_busy_exit(*tc_out);
  return s;
}

static bool fail_free(tslab_t* a, int status) {
  if (a) atomic_fetch_add_explicit(&a->invalid_frees, 1, memory_order_relaxed);
  tslab_set_error(status);
  return false;
}

/* What a local free did: nothing (not a live slot), set the slot aside in
 * its bin (on the free stack, or back into the set-aside word of the
 * current slab, which never settles), cleared its bit, or cleared the bit
 * of a slot for free_local_push to put on the free stack. */
enum { FREE_REJECTED = 0, FREE_SET_ASIDE, FREE_CLEARED, FREE_TO_STACK };

/* Owner free of slot idx of s (at p), in the busy window with s's era
 * active: plain loads and stores only (invariant S1). A slot of the word
 * the bin has set aside goes back into the mask as its hot slot, the next
 * one handed out (section 3); it counts once, in `taken`, written after
 * the mask (a release; readers read `taken` first, an acquire), so a read
 * can miss the slot's return (an undercount the readers' high-water mark
 * hides) but never count it twice. Another slot of a slab goes on the
 * bin's free stack while the stack has room and the slab keeps a slot
 * allocated or in the mask (F2): left to free_local_push, which the fast
 * path calls out of line (its registers would cost every free a stack
 * frame). Else the slot counts in its slab (a parked slab's free in the
 * bin's `frees` at once: readers do not walk the parked list, 3.2). */
static inline __attribute__((always_inline)) int free_local_bits(tslab_run_t* s, uint32_t idx, void* p) {
  _Atomic uint64_t* word = &s->bits[2 * (idx >> 6)];
  uint64_t bit = 1ull << (idx & 63);
  uint64_t al = atomic_load_explicit(word, memory_order_relaxed);
  if (unlikely(!(al & bit) || (atomic_load_explicit(word + 1, memory_order_relaxed) & bit))) return FREE_REJECTED;
  atomic_store_explicit(word, al ^ bit, memory_order_relaxed); /* bit is set in al */
  tslab_bin_t* bin = s->bin;
  if (bin) {
    if (bin->word == word) {
      atomic_store_explicit(&bin->mask, atomic_load_explicit(&bin->mask, memory_order_relaxed) | bit,
                            memory_order_release);
      bin->hot = p;
      bin->hot_bit = bit;
      tslab_bump_release(&bin->taken, 1); /* also the free's count (taken - refilled) */
      return FREE_SET_ASIDE;
    }
    if (atomic_load_explicit(&bin->stack_len, memory_order_relaxed) < TSLAB_STACK_MAX && tslab_slab_used(s) > 1)
      return FREE_TO_STACK;
    if (s->list == TSLAB_LIST_PARKED) {
      tslab_slab_used_add(s, -1);
      tslab_bump(&bin->frees, 1);
      return FREE_CLEARED;
    }
  }
#if TSLAB_COUNTERS
  tslab_owner_add(&s->usage, (1ull << TSLAB_USED_BITS) - 1);
#else
  tslab_slab_used_add(s, -1);
#endif
  return FREE_CLEARED;
}

/* A FREE_TO_STACK free of the slot of slab s at p, whose bit (`bit` of
 * alloc word `word`) it cleared: onto the bin's free stack, counted once in
 * `taken` after the stack, as a free into the mask is. Bit and entry before
 * the length: a fork child whose thread was cut short here finds the slot
 * free and the stack without it (7.6). The caller has word and bit at hand:
 * a slot's index would take five instructions to turn into them again. */
static inline __attribute__((always_inline)) void free_local_push(tslab_run_t* s, _Atomic uint64_t* word,
                                                                  uint64_t bit, void* p) {
  tslab_bin_t* bin = s->bin;
  uint32_t n = atomic_load_explicit(&bin->stack_len, memory_order_relaxed);
  bin->stack[n] = (tslab_stacked_t){(uint8_t*)p, s, word, bit};
  tslab_slab_used_add(s, -1);
  atomic_store_explicit(&bin->stack_len, n + 1, memory_order_relaxed);
  tslab_bump_release(&bin->taken, 1);
}

/* Both steps of a local free, for the paths that are not the fast one. */
static int free_local_slot(tslab_run_t* s, uint32_t idx, void* p) {
  int done = free_local_bits(s, idx, p);
  if (done != FREE_TO_STACK) return done;
  free_local_push(s, &s->bits[2 * (idx >> 6)], 1ull << (idx & 63), p);
  return FREE_SET_ASIDE;
}

/* Whether a run a local free left needs its cache to settle it: it emptied
 * (the current slab never retires; its stacked slots come off the stack in
 * the settle, F2), or it is parked and has the free slots to go back to the
 * ready list. */
static inline bool free_local_settles(const tslab_run_t* s) {
  if (s->list == TSLAB_LIST_CUR) return false;
  return tslab_slab_used(s) == 0 || (s->list == TSLAB_LIST_PARKED && tslab_slab_parked_ready(s));
}

/* Whether a local free (`done` by free_local_bits) left work beyond the
 * bitmap: a handle generation to bump, or a run to settle. A slot set aside
 * again needs no look at `used`, which the free has just added to. */
static inline bool free_local_rare(const tslab_run_t* s, int done) {
  return (done == FREE_CLEARED && free_local_settles(s)) || s->has_gens;
}

static void free_local_rest(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, uint32_t idx) {
  if (s->has_gens) tslab_slab_bump_gen(s, idx);
  if (free_local_settles(s)) tslab_tcache_settle(a, tc, s);
}

/* The rare part of a local free of p (slab or block s) and the end of its
 * busy window: out of line and called last, so the fast path keeps no
 * registers across calls. It takes what the fast path keeps live to its end
 * anyway (the cache, whose instance it reads, and the pointer, whose slot it
 * finds again), so that the fast path keeps neither the instance nor the
 * slot's index or bit live for it. */
static __attribute__((noinline)) bool free_local_finish(tslab_tcache_t* tc, tslab_run_t* s, void* p) {
  free_local_rest(tc->inst, tc, s, tslab_slab_index(s, p));
  tslab_busy_exit(tc);
  return true;
}

/* A local free's run needs settling (free_local_settles): out of line, and
 * the end of the busy window. */
static __attribute__((noinline)) bool free_local_settle(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s) {
  tslab_tcache_settle(a, tc, s);
  tslab_busy_exit(tc);
  return true;
}

/* A local free that free_local_bits left to free_local_push, and the rest
 * of it (free_local_rest's, whose rare cases it reaches by tail calls, so
 * that the common one saves no registers): out of line, and the end of its
 * busy window. A parked slab may reach the mark (3.2). Five arguments, the
 * instance taken from the cache: a sixth would keep one more register live
 * across the fast path, which then needs a stack frame. */
static __attribute__((noinline)) bool free_local_to_stack(tslab_tcache_t* tc, tslab_run_t* s, _Atomic uint64_t* word,
                                                          uint64_t bit, void* p) {
  free_local_push(s, word, bit, p);
  if (unlikely(s->has_gens)) return free_local_finish(tc, s, p);
  if (unlikely(free_local_settles(s))) return free_local_settle(tc->inst, tc, s);
  tslab_busy_exit(tc);
  return true;
}

/* Where a free of run s by a thread that does not own it counts, chosen
 * before the free takes effect and held until it is counted (7.4): once its
 * remote bit is set, the owner may collect it, the run drain and leave the
 * era's lists, the era close and its slot open again, and a count made
 * after that fold would reach neither the slot nor the label. While the era
 * is active, the count goes to this thread's cache, registered as a user of
 * the era (7.2), so a close of the era waits for this window and folds the
 * cache after it; otherwise to the era's slot, under an `inflight` bracket
 * that keeps the slot from being opened again until the count is in (and
 * a free-all's fold of the era's ends waits for, 7.3 step 5); once the era
 * has left the ring, under the slot's mutex, which the next era's open
 * holds while it labels the era's runs and folds the slot's counters: the
 * free counts in those counters before the fold, or in the label its run
 * got from the fold, having held its object then (the run could drain and
 * leave the era's list between the free and a count made after it, 7.5). */
typedef struct {
  tslab_slot_cache_t* cache; /* the era's slot in this thread's cache */
  tslab_epoch_slot_t* slot;  /* the era's slot, bracketed */
  tslab_epoch_slot_t* late;  /* the slot whose mutex is held */
} nonowner_count_t;

static nonowner_count_t nonowner_count_begin(tslab_t* a, tslab_tcache_t* tc, uint64_t era) {
  nonowner_count_t c = {NULL, NULL, NULL};
  if (tc && tslab_era_active(a, era) &&
      (atomic_load_explicit(&tc->slots[era & a->ring_mask].era, memory_order_relaxed) == era ||
       tslab_tcache_claim(a, tc, era) == TSLAB_OK)) {
    c.cache = &tc->slots[era & a->ring_mask];
  } else if (!(c.slot = tslab_era_count_enter(a, era))) {
    c.late = &a->slots[era & a->ring_mask];
    tslab_spin_lock(&c.late->mu);
  }
  return c;
}

/* The free took effect (`counted`) or was refused: count it where begin
 * chose, and end the bracket. */
static void nonowner_count_end(tslab_t* a, tslab_tcache_t* tc, const nonowner_count_t* c, const tslab_run_t* s,
                               uint64_t era, uint32_t cls, size_t size, bool cross, bool counted) {
  tslab_epoch_slot_t* es = c->slot;
  if (!counted) {
    if (es) tslab_era_count_exit(es);
    if (c->late) tslab_spin_unlock(&c->late->mu);
    return;
  }
  if (c->cache) {
    if (cls == TSLAB_CLASSES) {
      /* Bytes of block objects are read off the blocks (section 9). */
      tslab_bump(&c->cache->bfrees, 1);
      tslab_bump(&c->cache->bxfrees, cross);
    } else {
      tslab_bin_t* bin = tslab_counting_bin(a, tc, era, cls);
      tslab_bump(&bin->frees, 1);
      tslab_bump(&bin->xfrees, cross);
    }
    return;
  }
  if (es) {
    atomic_fetch_add_explicit(&es->frees, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&es->free_bytes, size, memory_order_relaxed);
    if (cross) atomic_fetch_add_explicit(&es->xfrees, 1, memory_order_relaxed);
    tslab_era_count_exit(es);
  } else {
    tslab_era_count_left_ring_locked(a, s, era, size, cross);
    tslab_spin_unlock(&c->late->mu);
  }
  if (tc) {
    tslab_bump(&tc->late[cls].frees, 1);
    tslab_bump(&tc->late[cls].xfrees, cross);
  } else {
    atomic_fetch_add_explicit(&a->ext[cls].frees, 1, memory_order_relaxed);
    if (cross) atomic_fetch_add_explicit(&a->ext[cls].xfrees, 1, memory_order_relaxed);
  }
}

/* The free of p in the run a view of it validated, inside the caller's
 * fenced window: the view's descriptor stays the run's until the window
 * ends (G1), while the memory may meanwhile be the run of another
 * descriptor (a free-all or a retire gave it back), which a second lookup
 * would act on. */
static bool free_view_in_window(tslab_t* a, tslab_tcache_t* tc, const tslab_run_view_t* view, void* p) {
  const tslab_run_view_t v = *view;
  if (v.kind == TSLAB_RUN_LARGE) return p == v.start && tslab_large_free(a, tc, v.r);
  uint32_t idx = tslab_slot_index(v.start, v.recip, v.slot_bytes, p);
  if (idx == UINT32_MAX) return false;
  tslab_run_t* s = v.r;
  if (tc && atomic_load_explicit(&s->owner, memory_order_relaxed) == tc && tslab_era_active(a, v.era)) {
    if (free_local_slot(s, idx, p) == FREE_REJECTED) return false;
    free_local_rest(a, tc, s, idx);
    return true;
  }
  /* What the counts need is read before the free takes effect: afterwards
   * the run may drain and be recycled (its metadata stays valid for this
   * window only, G1). */
  size_t size = v.kind == TSLAB_RUN_BLOCK ? tslab_block_object_size(v.starts, v.capacity, idx) : v.obj_size;
  bool cross = atomic_load_explicit(&s->creator, memory_order_relaxed) != tc;
  tslab_tcache_t* owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  bool notify, retire;
  /* Not a live slot (a relaxed look; the free itself decides with its
   * atomic operations): refused before it registers anywhere (a refused
   * free that made its cache a user of an ACTIVE era would cost the era's
   * close the fence and the wait of a shared one). */
  if (!tslab_bits_live(s->bits, idx)) return false;
  nonowner_count_t count = nonowner_count_begin(a, tc, v.era);
  bool freed = tslab_run_free_nonowner(s, idx, &notify, &retire);
  tslab_hook_point(TSLAB_HOOK_NONOWNER_FREED);
  nonowner_count_end(a, tc, &count, s, v.era, v.kind == TSLAB_RUN_BLOCK ? TSLAB_CLASSES : v.cls, size, cross, freed);
  if (!freed) return false;
  if (retire) tslab_run_retire(a, s);
  if (owner) {
    if (v.kind == TSLAB_RUN_BLOCK) atomic_fetch_add_explicit(&owner->block_remote, 1, memory_order_release);
    if (notify) tslab_tcache_notify(owner, s);
  }
  return true;
}

/* A free inside the caller's fenced window. */
static bool free_in_window(tslab_t* a, tslab_tcache_t* tc, void* p) {
  tslab_run_view_t v;
  if (!tslab_run_view(a, p, &v)) return false;
  tslab_hook_point(TSLAB_HOOK_NONOWNER_VIEWED);
  return free_view_in_window(a, tc, &v, p);
}

/* Every free that is not the fast path's: invalid pointers, spans, frees by
 * threads that do not own the run, eras that are not active. */
static __attribute__((noinline)) bool free_general(tslab_t* a, void* p) {
  if (!p) return true;
  if (unlikely(!a)) return fail_free(NULL, TSLAB_ERR_INVALID_ARGUMENT);
  if ((uintptr_t)p - (uintptr_t)a->base >= a->reserve) return fail_free(a, TSLAB_ERR_INVALID_POINTER);
  tslab_tcache_t* tc = tslab_tcache_for_free(a);
  tslab_window_enter(a, tc);
  bool ok = free_in_window(a, tc, p);
  tslab_window_exit(a, tc);
  return ok ? true : fail_free(a, TSLAB_ERR_INVALID_POINTER);
}

/* The fast path found p in a run of another owner, or of an era that is
 * not active, with its owner window open (own_run_open): the fence makes
 * that window a non-owner one (section 4: the busy store visible before
 * any load that follows), and the free goes on in it. Everything the fast
 * path read is read again after the fence. Out of line, and the end of the
 * window: cross-thread frees come here without free_general's checks and
 * thread cache lookup, which the fast path has made already. */
static __attribute__((noinline)) bool free_in_owner_window(tslab_t* a, tslab_tcache_t* tc, void* p) {
  atomic_thread_fence(memory_order_seq_cst);
  bool ok = free_in_window(a, tc, p);
  tslab_busy_exit(tc);
  return ok ? true : fail_free(a, TSLAB_ERR_INVALID_POINTER);
}

/* The fast path: a live slot of a run this thread owns, in an open era
 * (own_run_open); slab_index rejects a pointer outside the run's slots. */
TSLAB_API TSLAB_HOT bool tslab_free(tslab_t* a, void* p) {
  if (likely(a != NULL)) {
    tslab_tcache_t* tc;
    tslab_run_t* s = own_run_open(a, (uintptr_t)p - (uintptr_t)a->base, &tc);
    if (likely(s != NULL)) {
      uint32_t idx = tslab_slab_index(s, p);
      int done;
      if (likely(idx != UINT32_MAX && (done = free_local_bits(s, idx, p)) != FREE_REJECTED)) {
        if (done == FREE_TO_STACK) /* the word and bit free_local_bits computed */
          return free_local_to_stack(tc, s, &s->bits[2 * (idx >> 6)], 1ull << (idx & 63), p);
        if (unlikely(free_local_rare(s, done))) return free_local_finish(tc, s, p);
        tslab_busy_exit(tc);
        return true;
      }
      tslab_busy_exit(tc);
    } else if (tc != NULL) {
      return free_in_owner_window(a, tc, p);
    }
  }
  return free_general(a, p);
}

/* ---- queries ---- */

/* For a live allocation p: its usable size (and era), read in a fenced
 * window. 0 when p is not live. */
static size_t live_size(tslab_t* a, const void* p, uint64_t* era) {
  if (!a || !p || (uintptr_t)p - (uintptr_t)a->base >= a->reserve) return 0;
  tslab_tcache_t* tc = tslab_tcache_find(a);
  tslab_window_enter(a, tc);
  size_t size = 0;
  tslab_run_view_t v;
  if (tslab_run_view(a, p, &v)) {
    if (v.kind == TSLAB_RUN_LARGE) {
      if (p == v.start && atomic_load_explicit(&v.r->large_state, memory_order_acquire) == TSLAB_LARGE_LIVE)
        size = (size_t)v.granules << TSLAB_GRANULE_SHIFT;
    } else {
      uint32_t idx = tslab_slot_index(v.start, v.recip, v.slot_bytes, p);
      if (idx != UINT32_MAX && tslab_bits_live(v.bits, idx))
        size = v.kind == TSLAB_RUN_BLOCK ? tslab_block_object_size(v.starts, v.capacity, idx) : v.obj_size;
    }
    if (era) *era = v.era;
  }
  tslab_window_exit(a, tc);
  return size;
}

/* For an object of a run this thread owns, in an active era: the free fast
 * path's checks in a light window, no fence (programs ask for the size of
 * what they just allocated, as C++ and some servers do per object, and
 * realloc asks it of every block). True when it could tell: then *size is
 * the usable size, 0 when p is not live, and *era, when asked for, the
 * run's era (tslab_usable_size does not ask: one load less for programs
 * that size every block they allocate and free, as redis does). */
static inline __attribute__((always_inline)) bool owned_live_size(tslab_t* a, const void* p, size_t* size,
                                                                  uint64_t* era) {
  if (unlikely(a == NULL)) return false;
  tslab_tcache_t* tc;
  tslab_run_t* s = own_run_enter(a, (uintptr_t)p - (uintptr_t)a->base, &tc);
  if (s == NULL) return false;
  if (era) *era = atomic_load_explicit(&s->era, memory_order_relaxed);
  uint32_t idx = tslab_slab_index(s, p);
  bool known = idx != UINT32_MAX;
  *size = 0;
  if (known && tslab_bits_live(s->bits, idx))
    *size = s->cls == TSLAB_CLASSES ? tslab_block_object_size(s->starts, s->capacity, idx) : s->obj_size;
  tslab_busy_exit(tc);
  return known;
}

TSLAB_API size_t tslab_usable_size(tslab_t* a, const void* p) {
  size_t size;
  if (likely(owned_live_size(a, p, &size, NULL))) return size;
  return live_size(a, p, NULL);
}

TSLAB_API bool tslab_owns(tslab_t* a, const void* p) {
  return a && (uintptr_t)p - (uintptr_t)a->base < a->reserve;
}

TSLAB_API tslab_epoch_t tslab_epoch_of(tslab_t* a, const void* p) {
  uint64_t era = 0;
  return live_size(a, p, &era) ? era : 0;
}

TSLAB_API void* tslab_realloc(tslab_t* a, void* p, size_t size) {
  uint64_t era = 0;
  size_t usable;
  if (!owned_live_size(a, p, &usable, &era)) usable = live_size(a, p, &era);
  if (!usable) {
    if (a) atomic_fetch_add_explicit(&a->invalid_frees, 1, memory_order_relaxed);
    tslab_set_error(a ? TSLAB_ERR_INVALID_POINTER : TSLAB_ERR_INVALID_ARGUMENT);
    return NULL;
  }
  if (size == 0 || size > a->config.max_alloc_size) return fail_alloc(a, TSLAB_ERR_BAD_SIZE);
  /* Stay in place when the size still fits and at most half would go to
   * waste; an object of an epoch that accepts no allocations any more
   * shrinks in place whatever the waste (the header's promise). */
  if (size <= usable && (size > usable / 2 || usable <= 16)) return p;
  int status = tslab_epoch_reject_status(a, era);
  if (status != TSLAB_OK) return size <= usable ? p : fail_alloc(a, status);
  /* A span that must move to grow gets room for half as much again: a
   * buffer grown in small steps (a reader appending chunks) then moves a
   * logarithmic number of times, not once per step, which copied a
   * quadratic number of bytes (found by review: 32 MB grown in 4 KiB steps
   * took 12.9 s). Classes below spans grow geometrically by themselves.
   * Near the memory limit there may be no such room: then the exact size
   * below, and only its failure is counted. */
  void* q = NULL;
  if (size > usable && size > TSLAB_SMALL_MAX) {
    size_t roomy = usable + usable / 2;
    if (roomy > a->config.max_alloc_size) roomy = a->config.max_alloc_size;
    if (roomy > size) q = alloc_try(a, roomy, 0, era, NULL, &status);
  }
  if (!q) q = tslab_alloc(a, size, era);
  if (!q) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  tslab_free(a, p);
  return q;
}

/* ---- handles ---- */

/* A handle's fields: generation (without the instance's seed), the address
 * of its run's first granule, slot. */
typedef struct {
  uint16_t gen;
  uintptr_t start;
  uint32_t idx;
} handle_fields_t;

static handle_fields_t handle_unpack(const tslab_t* a, tslab_handle_t h) {
  return (handle_fields_t){
      .gen = (uint16_t)((h >> (HANDLE_GRANULE_BITS + TSLAB_HANDLE_SLOT_BITS)) - a->gen_seed),
      .start = (uintptr_t)((h >> TSLAB_HANDLE_SLOT_BITS) & HANDLE_GRANULE_MASK) << TSLAB_GRANULE_SHIFT,
      .idx = (uint32_t)(h & HANDLE_SLOT_MASK)};
}

/* Whether slot f.idx of run r (a slab or block, with alloc and remote words
 * `bits`) holds a live object of the generation the handle carries: blocks
 * have one generation, slabs one per slot. */
static inline __attribute__((always_inline)) bool handle_names_live(uint32_t kind, tslab_run_t* r,
                                                                    _Atomic uint64_t* bits, handle_fields_t f) {
  bool match;
  if (kind == TSLAB_RUN_BLOCK) {
    match = TSLAB_RLOAD(r->gen) == f.gen;
  } else {
    _Atomic uint16_t* gens = atomic_load_explicit(&r->gens, memory_order_acquire);
    match = gens && atomic_load_explicit(&gens[f.idx], memory_order_relaxed) == f.gen;
  }
  return match && tslab_bits_live(bits, f.idx);
}

/* The object handle h names, if it is live and the generation matches; in
 * the caller's fenced window, with the view of its run in *v. */
static void* handle_target_in_window(tslab_t* a, tslab_handle_t h, tslab_run_view_t* v) {
  if (h == 0) return NULL;
  handle_fields_t f = handle_unpack(a, h);
  if (f.start - (uintptr_t)a->base >= a->reserve) return NULL;
  void* p = NULL;
  if (tslab_run_view(a, (void*)f.start, v) && (uintptr_t)v->start == f.start) {
    if (v->kind == TSLAB_RUN_LARGE) {
      if (f.idx == 0 && TSLAB_RLOAD(v->r->gen) == f.gen &&
          atomic_load_explicit(&v->r->large_state, memory_order_acquire) == TSLAB_LARGE_LIVE)
        p = v->start;
    } else if (f.idx < v->capacity && handle_names_live(v->kind, v->r, v->bits, f)) {
      p = v->start + (size_t)f.idx * v->obj_size;
    }
  }
  return p;
}

/* What an owner window makes of a handle into run s (own_run_enter: the
 * calling thread owns s, its era is active): nobody else writes s's alloc
 * bits, its generations or its geometry until the window ends (S1; a remote
 * free only sets a remote bit, and the owner collects it). */
enum { HANDLE_NOT_OWNED = -1, HANDLE_STALE = 0, HANDLE_LIVE = 1 };

static int owned_handle_target(tslab_run_t* s, handle_fields_t f, void** p) {
  if ((uintptr_t)s->start != f.start || f.idx >= s->capacity) return HANDLE_NOT_OWNED;
  uint32_t kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
  if (kind != TSLAB_RUN_BLOCK && kind != TSLAB_RUN_SLAB) return HANDLE_NOT_OWNED;
  if (!handle_names_live(kind, s, s->bits, f)) return HANDLE_STALE;
  *p = s->start + (size_t)f.idx * s->obj_size;
  return HANDLE_LIVE;
}

static void* handle_target(tslab_t* a, tslab_handle_t h) {
  if (!a) return NULL;
  tslab_tcache_t* tc = tslab_tcache_find(a);
  tslab_window_enter(a, tc);
  tslab_run_view_t v;
  void* p = handle_target_in_window(a, h, &v);
  tslab_window_exit(a, tc);
  return p;
}

static __attribute__((noinline)) void* handle_stale(void) {
  tslab_set_error(TSLAB_ERR_INVALID_HANDLE);
  return NULL;
}

/* A lookup that is not the owner's: out of line, so that the fast path
 * needs no stack frame. */
static __attribute__((noinline)) void* handle_get_general(tslab_t* a, tslab_handle_t h) {
  void* p = handle_target(a, h);
  if (!p) tslab_set_error(a ? TSLAB_ERR_INVALID_HANDLE : TSLAB_ERR_INVALID_ARGUMENT);
  return p;
}

/* Fast path: a handle into a slab or block this thread owns, in an active
 * era, checked in one owner window without a fence (every access through a
 * C++ pool slot is one of these). Otherwise checked in a fenced window. */
TSLAB_API void* tslab_handle_get(tslab_t* a, tslab_handle_t h) {
  if (likely(a != NULL && h != 0)) {
    handle_fields_t f = handle_unpack(a, h);
    tslab_tcache_t* tc;
    tslab_run_t* s = own_run_enter(a, f.start - (uintptr_t)a->base, &tc);
    if (s != NULL) {
      void* p = NULL;
      int found = owned_handle_target(s, f, &p);
      tslab_busy_exit(tc);
      if (found == HANDLE_LIVE) return p;
      if (found == HANDLE_STALE) return handle_stale();
    }
  }
  return handle_get_general(a, h);
}

TSLAB_API bool tslab_free_handle(tslab_t* a, tslab_handle_t h) {
  if (!a) return fail_free(NULL, TSLAB_ERR_INVALID_ARGUMENT);
  /* Fast path: a slab slot of a run this thread owns, in an active era:
   * the generation is checked and the slot freed in one owner window. */
  handle_fields_t f = handle_unpack(a, h);
  tslab_tcache_t* tc;
  tslab_run_t* s = h != 0 ? own_run_enter(a, f.start - (uintptr_t)a->base, &tc) : NULL;
  if (s != NULL) {
    _Atomic uint16_t* g = atomic_load_explicit(&s->gens, memory_order_relaxed);
    if ((uintptr_t)s->start == f.start && s->cls != TSLAB_CLASSES && f.idx < s->capacity && g != NULL) {
      /* The run is this thread's: nobody else frees its slots' local
       * bits or moves their generations meanwhile. */
      if (atomic_load_explicit(&g[f.idx], memory_order_relaxed) == f.gen &&
          free_local_slot(s, f.idx, s->start + (size_t)f.idx * s->obj_size) != FREE_REJECTED) {
        /* The slot's generation moves on: the handle and its copies stop
         * matching (what free_local_rest does, with the value at hand). A
         * slot pushed onto the stack may bring a parked slab to its mark
         * (3.2) as one cleared may: the settle test is a free by pointer's. */
        atomic_store_explicit(&g[f.idx], (uint16_t)(f.gen + 1), memory_order_relaxed);
        if (unlikely(free_local_settles(s))) return free_local_settle(a, tc, s);
        tslab_busy_exit(tc);
        return true;
      }
      tslab_busy_exit(tc);
      return fail_free(a, TSLAB_ERR_INVALID_HANDLE);
    }
    tslab_busy_exit(tc);
  }
  /* Otherwise the handle is checked and its object freed in one fenced
   * window, in the run the check found (section 8). */
  tc = tslab_tcache_for_free(a);
  tslab_window_enter(a, tc);
  tslab_run_view_t v;
  void* p = handle_target_in_window(a, h, &v);
  tslab_hook_point(TSLAB_HOOK_NONOWNER_VIEWED);
  bool ok = p && free_view_in_window(a, tc, &v, p);
  tslab_window_exit(a, tc);
  if (!ok) return fail_free(a, TSLAB_ERR_INVALID_HANDLE);
  return true;
}
