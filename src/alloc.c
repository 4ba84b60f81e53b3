/* The public allocation and free paths: the fast path (thread cache, busy
 * window, bitmap pop) and everything around it: calloc, aligned allocation,
 * realloc, usable size, handles. docs/ARCHITECTURE.md sections 3.1 and 5. */
#include <string.h>

#include "internal.h"

static void* fail_alloc(tslab_t* a, int status) {
  if (a) tslab_epoch_count_failure(a, status);
  tslab_set_error(status);
  return NULL;
}

static tslab_handle_t handle_pack(tslab_t* a, uint16_t gen, const tslab_run_t* r, uint32_t idx) {
  uint64_t g = (uint64_t)(r->start - a->base) >> TSLAB_GRANULE_SHIFT;
  return ((uint64_t)a->tag << 56) | ((uint64_t)gen << 40) | (g << 14) | idx;
}

/* The generation a handle to slot idx carries. The slab gets its per-slot
 * generations on its first handle allocation (owner, in its busy window);
 * every free bumps the slot's generation so older handles stop matching.
 * Returns false when there is no memory for the generations. */
static bool slot_generation(tslab_t* a, tslab_run_t* s, uint32_t idx, uint16_t* gen) {
  _Atomic uint16_t* g = atomic_load_explicit(&s->gens, memory_order_relaxed);
  if (!g) {
    g = tslab_heap_gens(a, s->capacity);
    if (!g) return false;
    uint16_t base = atomic_load_explicit(&a->gen_base[(size_t)(s->start - a->base) >> TSLAB_GRANULE_SHIFT],
                                         memory_order_relaxed);
    for (uint32_t i = 0; i < s->capacity; i++) atomic_store_explicit(&g[i], base, memory_order_relaxed);
    atomic_store_explicit(&s->gens, g, memory_order_release);
  }
  *gen = atomic_load_explicit(&g[idx], memory_order_relaxed);
  return true;
}

/* Hand out one slot from the bin's set-aside word (owner, busy window). The
 * slot was counted when it was set aside (tcache.c, bin_set_mask). */
static inline __attribute__((always_inline)) void* bin_pop(tslab_bin_t* bin, uint64_t m) {
  size_t b = (unsigned)__builtin_ctzll(m);
  atomic_store_explicit(&bin->mask, m & (m - 1), memory_order_relaxed);
  atomic_store_explicit(bin->word, atomic_load_explicit(bin->word, memory_order_relaxed) | (1ull << b),
                        memory_order_relaxed);
  return bin->base + b * bin->size;
}

/* seq_cst (a plain load on x86 and arm64, like acquire) so that the loads
 * after a read-modify-write fence (threads without a cache, closing frees)
 * take part in the single total order the protocol's arguments use. */
static inline bool era_active(tslab_t* a, uint64_t e) {
  return atomic_load_explicit(&a->ring[e & a->ring_mask].state, memory_order_seq_cst) ==
         TSLAB_STATE(e, TSLAB_EPOCH_ACTIVE);
}

/* Allocate from class cls in era e, refilling the bin when needed, or fail
 * with a status. `h` asks for a handle too. */
static void* alloc_small(tslab_t* a, tslab_tcache_t* tc, uint32_t cls, uint64_t e, tslab_handle_t* h,
                         int* status) {
  tslab_bin_t* bin = tslab_bin(a, tc, e, cls);
  void* p = NULL;
  tslab_busy_enter(tc);
  if (era_active(a, e)) {
    if (atomic_load_explicit(&bin->mask, memory_order_relaxed) != 0 || tslab_bin_refill(a, tc, bin, e)) {
      p = bin_pop(bin, atomic_load_explicit(&bin->mask, memory_order_relaxed));
      if (unlikely(h != NULL)) {
        uint16_t gen;
        tslab_run_t* s = bin->cur;
        uint32_t idx = tslab_slab_index(s, p);
        if (!slot_generation(a, s, idx, &gen)) {
          /* No metadata for generations: undo; the caller reports OOM. */
          tslab_busy_exit(tc);
          tslab_free(a, p);
          *status = TSLAB_ERR_OUT_OF_MEMORY;
          return NULL;
        }
        *h = handle_pack(a, gen, s, idx);
      }
    } else {
      *status = TSLAB_ERR_OUT_OF_MEMORY;
    }
  } else {
    *status = tslab_epoch_reject_status(a, e);
    if (*status == TSLAB_OK) *status = TSLAB_ERR_EPOCH_CLOSED; /* closed and reopened meanwhile */
  }
  tslab_busy_exit(tc);
  return p;
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

/* Everything that is not the fast path: argument checks, alignment, spans. */
static __attribute__((noinline)) void* alloc_general(tslab_t* a, size_t size, size_t align, uint64_t e,
                                                    tslab_handle_t* h) {
  if (!a) return fail_alloc(NULL, TSLAB_ERR_INVALID_ARGUMENT);
  if (size == 0 || size > a->config.max_alloc_size) return fail_alloc(a, TSLAB_ERR_BAD_SIZE);
  tslab_tcache_t* tc = tslab_tcache_get(a);
  if (!tc) return fail_alloc(a, TSLAB_ERR_OUT_OF_MEMORY);
  int status = TSLAB_OK;
  uint32_t cls = class_for(size, align);
  void* p;
  if (cls < TSLAB_CLASSES) {
    p = alloc_small(a, tc, cls, e, h, &status);
  } else {
    tslab_busy_enter(tc);
    status = tslab_epoch_reject_status(a, e);
    p = status == TSLAB_OK ? tslab_large_alloc(a, tc, size, align, e) : NULL;
    tslab_busy_exit(tc);
    if (!p && status == TSLAB_OK) status = TSLAB_ERR_OUT_OF_MEMORY;
    if (p && h) {
      tslab_run_t* r = tslab_run_of(a, p);
      *h = handle_pack(a, r->large_gen, r, 0);
    }
  }
  return p ? p : fail_alloc(a, status);
}

/* The fast path: a thread-cache hit, an open era and a slot set aside in the
 * bin. Everything else goes through alloc_general, out of line, so that the
 * fast path needs no stack frame. */
TSLAB_API TSLAB_HOT void* tslab_alloc(tslab_t* a, size_t size, tslab_epoch_t e) {
  if (likely(a != NULL && size - 1 < TSLAB_SMALL_MAX)) {
    if (likely(tslab_tls_last.inst == a && tslab_tls_last.id == a->id)) {
      tslab_tcache_t* tc = tslab_tls_last.tc;
      /* Addresses first: the busy store could alias them for the compiler. */
      uint32_t slot = (uint32_t)(e & a->ring_mask);
      _Atomic uint64_t* state = &a->ring[slot].state;
      tslab_bin_t* bin = tslab_bin_at(a, tc, slot, tslab_class_of(size));
      /* One register for the bin: left to itself the compiler derives its
       * fields from two differently offset bases. */
      __asm__("" : "+r"(bin));
      tslab_busy_enter(tc);
      uint64_t m;
      if (likely(atomic_load_explicit(state, memory_order_seq_cst) == TSLAB_STATE(e, TSLAB_EPOCH_ACTIVE) &&
                 (m = atomic_load_explicit(&bin->mask, memory_order_relaxed)) != 0)) {
        void* p = bin_pop(bin, m);
        tslab_busy_exit(tc);
        return p;
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
  if (p) memset(p, 0, bytes);
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
  return alloc_general(a, size, 0, e, out);
}

/* ---- free ---- */

static bool fail_free(tslab_t* a, int status) {
  if (a) atomic_fetch_add_explicit(&a->invalid_frees, 1, memory_order_relaxed);
  tslab_set_error(status);
  return false;
}

/* Owner: the slab became empty (retire it unless it is current) or was full
 * and parked (it can serve again: ready list). Ready slabs keep their
 * notification armed; a spurious notification only costs a collect. */
static void after_local_free(tslab_t* a, tslab_tcache_t* tc, tslab_bin_t* bin, tslab_run_t* s) {
  if (tslab_slab_used(s) == 0) {
    if (s->list == TSLAB_LIST_CUR) return;
    tslab_tcache_unlink_run(tc, bin, s);
    tslab_slab_retire(a, s);
  } else {
    tslab_tcache_ready(bin, s);
  }
}

/* Count a free by a thread that does not own the slab, in an active era: in
 * this thread's bin, or in the era's slot for a thread without a cache. */
static void count_remote_free(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t cls, uint32_t size) {
  if (tc) {
    tslab_bin_t* bin = tslab_bin(a, tc, era, cls);
    tslab_bin_claim(a, tc, bin, era);
    tslab_bump(&bin->frees, 1);
    tslab_bump(&bin->xfrees, 1);
    return;
  }
  tslab_epoch_slot_t* es = &a->ring[era & a->ring_mask];
  atomic_fetch_add_explicit(&es->frees, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->xfrees, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->free_bytes, size, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->ext_frees[cls], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->ext_xfrees[cls], 1, memory_order_relaxed);
}

/* The caller's busy window: its cache's flag, or for a thread without a
 * cache the instance's counter, whose read-modify-writes are the fence. */
static inline void window_enter(tslab_t* a, tslab_tcache_t* tc) {
  if (tc)
    tslab_busy_enter(tc);
  else
    atomic_fetch_add_explicit(&a->cacheless_busy, 1, memory_order_seq_cst);
}

static inline void window_exit(tslab_t* a, tslab_tcache_t* tc) {
  if (tc)
    tslab_busy_exit(tc);
  else
    atomic_fetch_sub_explicit(&a->cacheless_busy, 1, memory_order_release);
}

/* A free in an era that is not active (closing, closed, gone). The slab
 * protocol is in slab.c; the era's slot counts it while it still holds the
 * era. closing_inflight keeps tslab_epoch_advance from resetting the slot
 * for a newer era while this free may still write to it. `cross`: the freer
 * is not the cache that formatted the slab. */
static bool free_closing(tslab_t* a, tslab_run_t* s, uint32_t idx, uint64_t era, uint32_t cls, uint32_t size,
                         bool cross) {
  atomic_fetch_add_explicit(&a->closing_inflight, 1, memory_order_seq_cst);
  bool ok = tslab_slab_free_closing(a, s, idx);
  if (ok) {
    tslab_epoch_slot_t* es = &a->ring[era & a->ring_mask];
    if (TSLAB_STATE_ERA(atomic_load_explicit(&es->state, memory_order_seq_cst)) == era) {
      atomic_fetch_add_explicit(&es->frees, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&es->free_bytes, size, memory_order_relaxed);
      if (cross) atomic_fetch_add_explicit(&es->xfrees, 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&a->ext_frees[cls], 1, memory_order_relaxed);
    if (cross) atomic_fetch_add_explicit(&a->ext_xfrees[cls], 1, memory_order_relaxed);
  }
  atomic_fetch_sub_explicit(&a->closing_inflight, 1, memory_order_release);
  return ok;
}

/* Owner free of slot idx of s, in the busy window with s's era active.
 * Plain loads and stores only (invariant S1). */
static inline __attribute__((always_inline)) bool free_local_bits(tslab_run_t* s, uint32_t idx) {
  uint32_t w = idx >> 6;
  uint64_t bit = 1ull << (idx & 63);
  uint64_t al = atomic_load_explicit(&s->alloc[w], memory_order_relaxed);
  if (unlikely(!(al & bit) || (atomic_load_explicit(&s->remote[w], memory_order_relaxed) & bit)))
    return false;
  atomic_store_explicit(&s->alloc[w], al & ~bit, memory_order_relaxed);
  tslab_slab_count_free(s);
  return true;
}

/* Whether a local free left work beyond the bitmap: a handle generation to
 * bump, a slab that emptied or leaves the parked list. */
static inline bool free_local_rare(const tslab_run_t* s) {
  return (s->list != TSLAB_LIST_CUR && (tslab_slab_used(s) == 0 || s->list == TSLAB_LIST_PARKED)) ||
         atomic_load_explicit(&s->gens, memory_order_relaxed);
}

/* The rare part of a local free. */
static void free_local_rest(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, uint32_t idx) {
  if (atomic_load_explicit(&s->gens, memory_order_relaxed)) tslab_slab_bump_gen(s, idx);
  if (tslab_slab_used(s) == 0 || s->list == TSLAB_LIST_PARKED) after_local_free(a, tc, s->bin, s);
}

/* The rare part of a local free and the end of its busy window: out of line
 * and called last, so the fast path keeps no registers across calls. */
static __attribute__((noinline)) bool free_local_finish(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s,
                                                        uint32_t idx) {
  free_local_rest(a, tc, s, idx);
  tslab_busy_exit(tc);
  return true;
}

/* Owner free of slot idx of s, in the busy window with s's era active.
 * Plain loads and stores only (invariant S1). */
static bool free_local(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, uint32_t idx) {
  if (!free_local_bits(s, idx)) return false;
  free_local_rest(a, tc, s, idx);
  return true;
}

/* Every free that is not the fast path's: invalid pointers, spans, frees by
 * threads that do not own the slab, eras that are not active. All of it runs
 * in the caller's busy window, so a close waits for it (section 6.1). The
 * slab's class and size are read before the free is visible: afterwards the
 * owner may retire the slab and the descriptor may describe another run. */
static __attribute__((noinline)) bool free_general(tslab_t* a, void* p) {
  if (!p) return true;
  if (unlikely(!a)) return fail_free(NULL, TSLAB_ERR_INVALID_ARGUMENT);
  tslab_run_t* s = tslab_run_of(a, p);
  if (unlikely(!s)) return fail_free(a, TSLAB_ERR_INVALID_POINTER);
  tslab_tcache_t* tc = tslab_tcache_get(a);
  uint8_t kind = atomic_load_explicit(&s->kind, memory_order_acquire);
  bool ok = false;
  if (kind == TSLAB_RUN_LARGE) {
    window_enter(a, tc);
    atomic_fetch_add_explicit(&a->closing_inflight, 1, memory_order_seq_cst);
    ok = tslab_large_free(a, tc, s, p);
    atomic_fetch_sub_explicit(&a->closing_inflight, 1, memory_order_release);
    window_exit(a, tc);
    return ok ? true : fail_free(a, TSLAB_ERR_INVALID_POINTER);
  }
  uint32_t idx = kind == TSLAB_RUN_SLAB ? tslab_slab_index(s, p) : UINT32_MAX;
  if (unlikely(idx == UINT32_MAX)) return fail_free(a, TSLAB_ERR_INVALID_POINTER);
  uint64_t era = atomic_load_explicit(&s->era, memory_order_relaxed);
  uint32_t cls = s->cls, size = s->obj_size;
  bool cross = atomic_load_explicit(&s->creator, memory_order_relaxed) != tc;

  window_enter(a, tc);
  if (era_active(a, era)) {
    if (tc && atomic_load_explicit(&s->owner, memory_order_relaxed) == tc) {
      ok = free_local(a, tc, s, idx);
    } else {
      ok = tslab_slab_free_remote(s, idx);
      if (ok) count_remote_free(a, tc, era, cls, size);
    }
  } else {
    ok = free_closing(a, s, idx, era, cls, size, cross);
  }
  window_exit(a, tc);
  return ok ? true : fail_free(a, TSLAB_ERR_INVALID_POINTER);
}

/* The fast path: a slot of a slab this thread owns, in an open era. The
 * owner check needs no thread-cache lookup: a slab's owner is a cache, and a
 * cache knows the thread attached to it. Only attached slabs have an owner,
 * and slab_index rejects a pointer outside the slab, so a stale map entry
 * cannot pass. */
TSLAB_API TSLAB_HOT bool tslab_free(tslab_t* a, void* p) {
  if (likely(a != NULL)) {
    uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
    if (likely(off < a->reserve)) {
      tslab_run_t* s = atomic_load_explicit(&a->map[off >> TSLAB_GRANULE_SHIFT], memory_order_acquire);
      tslab_tcache_t* tc = s ? atomic_load_explicit(&s->owner, memory_order_relaxed) : NULL;
      if (likely(tc != NULL && atomic_load_explicit(&tc->tid, memory_order_relaxed) == tslab_thread_id())) {
        uint32_t idx = tslab_slab_index(s, p);
        if (likely(idx != UINT32_MAX)) {
          tslab_busy_enter(tc);
          if (likely(era_active(a, atomic_load_explicit(&s->era, memory_order_relaxed)) &&
                     free_local_bits(s, idx))) {
            if (unlikely(free_local_rare(s))) return free_local_finish(a, tc, s, idx);
            tslab_busy_exit(tc);
            return true;
          }
          tslab_busy_exit(tc);
        }
      }
    }
  }
  return free_general(a, p);
}

/* ---- queries ---- */

/* The run of a live allocation p, or NULL. */
static tslab_run_t* live_run(tslab_t* a, const void* p) {
  if (!a || !p) return NULL;
  tslab_run_t* r = tslab_run_of(a, p);
  if (!r) return NULL;
  uint8_t kind = atomic_load_explicit(&r->kind, memory_order_acquire);
  if (kind == TSLAB_RUN_LARGE)
    return p == r->start && atomic_load_explicit(&r->large_state, memory_order_acquire) == TSLAB_LARGE_LIVE
               ? r
               : NULL;
  if (kind != TSLAB_RUN_SLAB) return NULL;
  uint32_t idx = tslab_slab_index(r, p);
  return idx != UINT32_MAX && tslab_slab_is_live(r, idx) ? r : NULL;
}

static size_t run_usable(const tslab_run_t* r) {
  if (atomic_load_explicit(&r->kind, memory_order_relaxed) == TSLAB_RUN_LARGE)
    return (size_t)r->granules << TSLAB_GRANULE_SHIFT;
  return r->obj_size;
}

TSLAB_API size_t tslab_usable_size(tslab_t* a, const void* p) {
  tslab_run_t* r = live_run(a, p);
  return r ? run_usable(r) : 0;
}

TSLAB_API tslab_epoch_t tslab_epoch_of(tslab_t* a, const void* p) {
  tslab_run_t* r = live_run(a, p);
  return r ? atomic_load_explicit(&r->era, memory_order_relaxed) : 0;
}

TSLAB_API void* tslab_realloc(tslab_t* a, void* p, size_t size) {
  tslab_run_t* r = live_run(a, p);
  if (!r) {
    if (a) atomic_fetch_add_explicit(&a->invalid_frees, 1, memory_order_relaxed);
    tslab_set_error(a ? TSLAB_ERR_INVALID_POINTER : TSLAB_ERR_INVALID_ARGUMENT);
    return NULL;
  }
  if (size == 0 || size > a->config.max_alloc_size) return fail_alloc(a, TSLAB_ERR_BAD_SIZE);
  size_t usable = run_usable(r);
  /* Stay in place when the size still fits and at most half would go to waste. */
  if (size <= usable && (size > usable / 2 || usable <= 16)) return p;
  void* q = tslab_alloc(a, size, atomic_load_explicit(&r->era, memory_order_relaxed));
  if (!q) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  tslab_free(a, p);
  return q;
}

/* ---- handles ---- */

static void* handle_target(tslab_t* a, tslab_handle_t h) {
  if (!a || h == 0 || (uint8_t)(h >> 56) != a->tag) return NULL;
  uint16_t gen = (uint16_t)(h >> 40);
  uint64_t g = (h >> 14) & ((1ull << 26) - 1);
  uint32_t idx = (uint32_t)(h & ((1u << 14) - 1));
  if (g >= a->ngranules) return NULL;
  tslab_run_t* r = atomic_load_explicit(&a->map[g], memory_order_acquire);
  if (!r || r->start != a->base + (g << TSLAB_GRANULE_SHIFT)) return NULL;
  uint8_t kind = atomic_load_explicit(&r->kind, memory_order_acquire);
  if (kind == TSLAB_RUN_LARGE) {
    return idx == 0 && r->large_gen == gen &&
                   atomic_load_explicit(&r->large_state, memory_order_acquire) == TSLAB_LARGE_LIVE
               ? r->start
               : NULL;
  }
  if (kind != TSLAB_RUN_SLAB || idx >= r->capacity) return NULL;
  _Atomic uint16_t* gens = atomic_load_explicit(&r->gens, memory_order_acquire);
  if (!gens || atomic_load_explicit(&gens[idx], memory_order_relaxed) != gen) return NULL;
  if (!tslab_slab_is_live(r, idx)) return NULL;
  return r->start + (size_t)idx * r->obj_size;
}

TSLAB_API void* tslab_handle_get(tslab_t* a, tslab_handle_t h) {
  void* p = handle_target(a, h);
  if (!p) tslab_set_error(a ? TSLAB_ERR_INVALID_HANDLE : TSLAB_ERR_INVALID_ARGUMENT);
  return p;
}

TSLAB_API bool tslab_free_handle(tslab_t* a, tslab_handle_t h) {
  void* p = handle_target(a, h);
  if (!p) return fail_free(a, a ? TSLAB_ERR_INVALID_HANDLE : TSLAB_ERR_INVALID_ARGUMENT);
  return tslab_free(a, p);
}
