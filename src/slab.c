/* Runs of small objects: formatting class slabs, and what slabs and blocks
 * share: non-owner frees, collection of remote frees by the owner, detaching
 * at epoch close, ending every object (free-all close) and retirement. The
 * protocol and its invariants (S1-S3, C1-C2, G1-G3) are in
 * docs/ARCHITECTURE.md sections 3, 4 and 7. */
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "internal.h"

/* Padding bits of the last alloc word of a slab: slots past the capacity are
 * marked allocated forever so the bit search never returns them. */
static uint64_t padding(const tslab_run_t* s, uint32_t w) {
  if (w + 1 != s->words) return 0;
  uint32_t tail = s->capacity & 63;
  return tail ? ~0ull << tail : 0;
}

TSLAB_INTERNAL tslab_run_t* tslab_slab_new(tslab_t* a, tslab_tcache_t* tc, uint32_t cls, uint64_t era) {
  const tslab_class_info_t* ci = &tslab_classes[cls];
  tslab_run_t* s = tslab_heap_alloc(a, tc, ci->granules, 1, true);
  if (!s) return NULL;
  if (!tslab_heap_bitmaps(a, tc, s, ci->words, false)) {
    tslab_heap_retire(a, s, false);
    return NULL;
  }
  TSLAB_RSTORE(s->cls, (uint8_t)cls);
  TSLAB_RSTORE(s->words, (uint16_t)ci->words);
  TSLAB_RSTORE(s->obj_size, (uint16_t)ci->size);
  TSLAB_RSTORE(s->capacity, (uint16_t)ci->capacity);
  TSLAB_RSTORE(s->recip, ci->recip);
  TSLAB_RSTORE(s->slot_bytes, ci->capacity * ci->size);
  for (uint32_t w = 0; w < ci->words; w++) {
    atomic_store_explicit(&s->bits[2 * w], padding(s, w), memory_order_relaxed);
    atomic_store_explicit(&s->bits[2 * w + 1], 0, memory_order_relaxed);
  }
  tslab_run_set_era(a, s, era);
  atomic_store_explicit(&s->owner, tc, memory_order_relaxed);
  atomic_store_explicit(&s->creator, tc, memory_order_relaxed);
  atomic_store_explicit(&s->mode, TSLAB_ATTACHED, memory_order_relaxed);
  TSLAB_COUNT_EVENT(a, tc, slabs_created, 1);
  tslab_owner_add(&tc->cls_slabs[cls], 1);
  /* A refill's, in the owner's window with the era ACTIVE (alloc.c). */
  tslab_era_count_run_owned(a, era, 1, (int64_t)tslab_run_bytes(s));
  tslab_run_publish(a, s, TSLAB_RUN_SLAB);
  return s;
}

/* An era slot's list of runs detached with live objects (7.5), under the
 * slot's spin lock. */
TSLAB_INTERNAL void tslab_era_list_push_locked(tslab_epoch_slot_t* es, tslab_run_t* r) {
  r->era_prev = NULL;
  r->era_next = es->detached;
  if (es->detached) es->detached->era_prev = r;
  __atomic_store_n(&es->detached, r, __ATOMIC_RELAXED); /* peeked at without the lock (epoch.c) */
  __atomic_store_n(&r->in_era_list, 1, __ATOMIC_RELAXED); /* read without the mutex: runs_retire */
}

TSLAB_INTERNAL void tslab_era_list_unlink_locked(tslab_epoch_slot_t* es, tslab_run_t* r) {
  if (r->era_prev)
    r->era_prev->era_next = r->era_next;
  else
    __atomic_store_n(&es->detached, r->era_next, __ATOMIC_RELAXED);
  if (r->era_next) r->era_next->era_prev = r->era_prev;
  r->era_next = r->era_prev = NULL;
  __atomic_store_n(&r->in_era_list, 0, __ATOMIC_RELAXED);
}

/* The run left its era's detached list, if it was on it. */
static void era_list_unlink(tslab_t* a, tslab_run_t* r) {
  tslab_epoch_slot_t* es = &a->slots[atomic_load_explicit(&r->era, memory_order_relaxed) & a->ring_mask];
  tslab_spin_lock(&es->mu);
  if (r->in_era_list) tslab_era_list_unlink_locked(es, r);
  tslab_spin_unlock(&es->mu);
}

/* Empty runs (linked through heap_next, of one era) leave use: their era's
 * and class's counts drop and the heap takes them, into the dirty pool while
 * it has room, else released in as few calls as their addresses allow.
 * Called by exactly one party per run (C1); `owned`: the cache of the
 * runs' owner, when it retires them in its busy window with their era
 * ACTIVE (tslab_era_count_run_owned; its own class counts), else NULL. */
static void runs_retire(tslab_t* a, tslab_run_t* list, tslab_tcache_t* owned) {
  uint64_t era = atomic_load_explicit(&list->era, memory_order_relaxed);
  for (tslab_run_t* s = list; s; s = s->heap_next) {
    /* Seen off the list, the run stays off it (only a closer links runs,
     * and not a run being retired); seen on it, the mutex decides. */
    if (__atomic_load_n(&s->in_era_list, __ATOMIC_RELAXED)) era_list_unlink(a, s);
    /* Slabs count for their era and class from their format; a block counts
     * for its era once its closer counted it (7.5). */
    bool block = atomic_load_explicit(&s->kind, memory_order_relaxed) == TSLAB_RUN_BLOCK;
    if (!block || s->era_counted) {
      int64_t bytes = -(int64_t)tslab_run_bytes(s);
      if (owned)
        tslab_era_count_run_owned(a, era, -1, bytes);
      else
        tslab_era_count_run(a, era, -1, bytes);
    }
    if (!block) {
      if (owned)
        tslab_owner_add(&owned->cls_slabs[s->cls], (uint64_t)-1);
      else
        atomic_fetch_sub_explicit(&a->cls_slabs[s->cls], 1, memory_order_relaxed);
    }
    tslab_hook_point(TSLAB_HOOK_RETIRE_COUNTED);
    atomic_store_explicit(&s->owner, NULL, memory_order_release);
  }
  /* Runs of an era that is still active may stay in the pool beyond its
   * bound for a while (decay): the era will soon allocate again. */
  tslab_retire_era_t owner = tslab_retire_era(a, era);
  size_t released = tslab_heap_retire_list(a, list, a->config.release_policy == TSLAB_RELEASE_EAGER, &owner);
  if (released) tslab_era_count_released(a, era, released);
}

TSLAB_INTERNAL void tslab_runs_retire(tslab_t* a, tslab_run_t* list) {
  if (list) runs_retire(a, list, NULL);
}

TSLAB_INTERNAL void tslab_run_retire(tslab_t* a, tslab_run_t* s) {
  s->heap_next = NULL;
  runs_retire(a, s, NULL);
}

TSLAB_INTERNAL void tslab_slab_retire_owned(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s) {
  s->heap_next = NULL;
  runs_retire(a, s, tc);
}

/* The slots of `bits` in word w were freed through remote bits: their
 * handles stop matching. Only the party that collected them calls this. */
static void bump_gens(tslab_run_t* s, uint32_t w, uint64_t bits) {
  if (!atomic_load_explicit(&s->gens, memory_order_relaxed)) return;
  for (; bits; bits &= bits - 1) tslab_slab_bump_gen(s, (w << 6) + (uint32_t)__builtin_ctzll(bits));
}

TSLAB_INTERNAL uint32_t tslab_slab_collect(tslab_t* a, tslab_run_t* s) {
  /* Only after a remote free since the last look. The clear is an
   * exchange: a hint set after it stays set for the next look, whatever
   * this pass reads of the words. */
  if (!atomic_load_explicit(&s->remote_hint, memory_order_relaxed) ||
      !atomic_exchange_explicit(&s->remote_hint, 0, memory_order_seq_cst))
    return 0;
  uint32_t n = 0, invalid = 0;
  for (uint32_t w = 0, words = tslab_run_words(s); w < words; w++) {
    if (!atomic_load_explicit(&s->bits[2 * w + 1], memory_order_seq_cst)) continue;
    uint64_t r = atomic_exchange_explicit(&s->bits[2 * w + 1], 0, memory_order_seq_cst);
    uint64_t al = atomic_load_explicit(&s->bits[2 * w], memory_order_relaxed);
    uint64_t valid = r & al;
    /* A remote bit without its alloc bit: a local and a remote free of the
     * same slot raced; the local one won. */
    invalid += tslab_popcount(r & ~al);
    if (!valid) continue;
    atomic_store_explicit(&s->bits[2 * w], al & ~valid, memory_order_relaxed);
    n += tslab_popcount(valid);
    bump_gens(s, w, valid);
  }
  TSLAB_ASSERT(n <= tslab_slab_used(s));
  tslab_slab_used_add(s, -(int64_t)n);
  if (invalid) atomic_fetch_add_explicit(&a->invalid_frees, invalid, memory_order_relaxed);
  return n;
}

/* A slot was freed: a handle naming it must no longer match. Called by the
 * one party that owns the slot's transition: the owner (local free,
 * collection), the closer (detach) or the winner of a detached free. */
TSLAB_INTERNAL void tslab_slab_bump_gen(tslab_run_t* s, uint32_t idx) {
  _Atomic uint16_t* g = atomic_load_explicit(&s->gens, memory_order_acquire);
  if (g)
    atomic_store_explicit(&g[idx], (uint16_t)(atomic_load_explicit(&g[idx], memory_order_relaxed) + 1),
                          memory_order_relaxed);
}

TSLAB_INTERNAL bool tslab_run_live_add(tslab_run_t* s, int64_t delta) {
  return atomic_fetch_add_explicit(&s->live, delta, memory_order_acq_rel) + delta == 0;
}

/* The free of a detached run's slot: clear the alloc bit. The free that
 * brings live to zero is the run's retirer (*retire). */
static bool detached_free(tslab_run_t* s, uint32_t idx, bool* retire) {
  uint64_t bit = 1ull << (idx & 63);
  uint64_t old = atomic_fetch_and_explicit(&s->bits[2 * (idx >> 6)], ~bit, memory_order_acq_rel);
  if (!(old & bit)) return false;
  tslab_slab_bump_gen(s, idx);
  *retire = tslab_run_live_add(s, -1);
  return true;
}

/* A free by a thread that does not own the run (or no longer does), inside
 * its fenced window, on the view it validated (docs/ARCHITECTURE.md 3.1).
 * The metadata stays what the view says until the window ends (G1). Returns
 * whether the free took effect; *notify tells the caller to notify the
 * owner of an ARMED slab, *retire to retire the detached run the free
 * emptied (tslab_run_retire), once it has counted the free: the retire
 * takes the run off its era's detached list, where a free counted after it
 * could miss its era's label (7.5). */
TSLAB_INTERNAL bool tslab_run_free_nonowner(tslab_run_t* s, uint32_t idx, bool* notify, bool* retire) {
  *notify = *retire = false;
  if (atomic_load_explicit(&s->mode, memory_order_seq_cst) == TSLAB_DETACHED) return detached_free(s, idx, retire);
  uint32_t w = idx >> 6;
  uint64_t bit = 1ull << (idx & 63);
  if (!(atomic_load_explicit(&s->bits[2 * w], memory_order_relaxed) & bit) ||
      (atomic_load_explicit(&s->bits[2 * w + 1], memory_order_relaxed) & bit))
    return false;
  tslab_hook_point(TSLAB_HOOK_REMOTE_ATTACHED);
  if (atomic_fetch_or_explicit(&s->bits[2 * w + 1], bit, memory_order_seq_cst) & bit) return false;
  tslab_hook_point(TSLAB_HOOK_REMOTE_SET);
  if (atomic_load_explicit(&s->mode, memory_order_seq_cst) == TSLAB_DETACHED) {
    /* A close detached the run meanwhile. Whoever clears the remote bit
     * accounts for the free: the closer's exchange, or this take-back. */
    if (atomic_fetch_and_explicit(&s->bits[2 * w + 1], ~bit, memory_order_seq_cst) & bit)
      return detached_free(s, idx, retire);
    return true;
  }
  /* Every remote free of the run would write the hint's line, which run
   * views read too: store it only when it is clear. A 1 this load reads is
   * taken by an owner's exchange that comes after the load in the single
   * order of seq_cst operations, and that owner's word exchange then sees
   * this free's bit (3.1). The store is seq_cst too: with every hint store
   * in that order, the argument holds under C11's wording as well as
   * C++20's (where a load that reads a value an exchange overwrites comes
   * before it whatever orders the stores have). */
  if (!atomic_load_explicit(&s->remote_hint, memory_order_seq_cst))
    atomic_store_explicit(&s->remote_hint, 1, memory_order_seq_cst);
  *notify = atomic_load_explicit(&s->notify, memory_order_seq_cst) == TSLAB_NOTIFY_ARMED;
  return true;
}

TSLAB_INTERNAL int64_t tslab_run_detach(tslab_t* a, tslab_run_t* s) {
  atomic_store_explicit(&s->mode, TSLAB_DETACHED, memory_order_seq_cst);
  atomic_store_explicit(&s->owner, NULL, memory_order_release);
  atomic_store_explicit(&s->notify, TSLAB_NOTIFY_NONE, memory_order_relaxed);
  s->list = TSLAB_LIST_NONE;
  s->bin = NULL;
  __atomic_store_n(&s->bin_next, NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&s->bin_prev, NULL, __ATOMIC_RELAXED);
  int64_t collected = 0;
  uint64_t invalid = 0;
  /* Only the words the run handed slots out of can hold remote bits (a
   * block's bumped prefix). A remote bit set after this looked at its word
   * is taken back by its freer, which re-reads the mode (3.1). */
  uint32_t words = tslab_run_words(s);
  for (uint32_t w = 0; w < words; w++) {
    if (!atomic_load_explicit(&s->bits[2 * w + 1], memory_order_seq_cst)) continue;
    uint64_t r = atomic_exchange_explicit(&s->bits[2 * w + 1], 0, memory_order_seq_cst);
    if (!r) continue;
    uint64_t old = atomic_fetch_and_explicit(&s->bits[2 * w], ~r, memory_order_acq_rel);
    collected += tslab_popcount(r & old);
    bump_gens(s, w, r & old);
    invalid += (uint64_t)tslab_popcount(r & ~old);
  }
  if (invalid) atomic_fetch_add_explicit(&a->invalid_frees, invalid, memory_order_relaxed);
  return (int64_t)tslab_slab_used(s) - collected;
}

TSLAB_INTERNAL uint64_t tslab_run_kill(tslab_t* a, tslab_run_t* s, uint64_t* remote_frees) {
  uint64_t killed = 0, frees = 0, invalid = 0;
  /* A block's objects lie in its bumped prefix. */
  bool slab = atomic_load_explicit(&s->kind, memory_order_relaxed) == TSLAB_RUN_SLAB;
  for (uint32_t w = 0, words = tslab_run_words(s); w < words; w++) {
    uint64_t pad = slab ? padding(s, w) : 0;
    /* The run is DETACHED already (its close detached it first): a remote
     * bit set after this looks at its word is taken back by its freer, who
     * re-reads the mode (3.1), and then finds its alloc bit gone or clears
     * it before the exchange below. So a remote word seen empty needs no
     * exchange, and a word with no object none at all. */
    uint64_t r = atomic_load_explicit(&s->bits[2 * w + 1], memory_order_seq_cst);
    if (!r && atomic_load_explicit(&s->bits[2 * w], memory_order_seq_cst) == pad) continue;
    if (r) r = atomic_exchange_explicit(&s->bits[2 * w + 1], 0, memory_order_seq_cst);
    uint64_t old = atomic_exchange_explicit(&s->bits[2 * w], pad, memory_order_acq_rel) & ~pad;
    killed += (uint64_t)tslab_popcount(old & ~r);
    /* A remote bit taken here is a free that completed before the end:
     * counted as a free, not as an object ended (most words have none). */
    if (r) {
      frees += (uint64_t)tslab_popcount(r & old);
      invalid += (uint64_t)tslab_popcount(r & ~old);
    }
  }
  if (invalid) atomic_fetch_add_explicit(&a->invalid_frees, invalid, memory_order_relaxed);
  *remote_frees = frees;
  return killed;
}

TSLAB_INTERNAL bool tslab_slab_arm(tslab_run_t* s) {
  uint32_t expected = TSLAB_NOTIFY_NONE;
  atomic_compare_exchange_strong_explicit(&s->notify, &expected, TSLAB_NOTIFY_ARMED, memory_order_seq_cst,
                                          memory_order_seq_cst);
  for (uint32_t w = 0; w < s->words; w++)
    if (atomic_load_explicit(&s->bits[2 * w + 1], memory_order_seq_cst)) return true;
  return false;
}

/* fork child: run s, attached to a cache whose thread was inside a window
 * at the fork, may carry that thread's half-done fast path (a slot taken
 * out of the mask but not yet marked, a bit cleared before `used` followed).
 * That thread does not exist here, so nothing it was doing can be reached:
 * roll it back and recount. (The slot's bumping block was rewound with its
 * bump state, tslab_tcache_fork_relink.) */
static void repair_attached(tslab_run_t* s, bool block) {
  uint32_t used = 0;
  tslab_bin_t* bin = block ? NULL : s->bin;
  for (uint32_t w = 0; w < s->words; w++) {
    uint64_t al = atomic_load(&s->bits[2 * w]) & ~(block ? 0 : padding(s, w));
    if (bin && bin->cur == s && bin->word == &s->bits[2 * w]) {
      atomic_store(&bin->mask, atomic_load(&bin->mask) & ~atomic_load(&s->bits[2 * w]));
      bin->hot_bit = 0; /* a free cut short may have stored one of hot and hot_bit */
    }
    if (bin && bin->cur == s && bin->next_word == &s->bits[2 * w])
      atomic_store(&bin->next_mask, atomic_load(&bin->next_mask) & ~atomic_load(&s->bits[2 * w]));
    used += tslab_popcount(al);
  }
  if (bin && bin->cur == s) used += tslab_bin_aside(bin);
  atomic_store(&s->usage, (atomic_load(&s->usage) & ~TSLAB_USED_MASK) | used);
}

/* fork child: whether attached run s holds a remote bit; if so its hint is
 * set (again). A remote free cut short between its bit and its hint store
 * (3.1) left a bit that no collection would take, since collections go by
 * the hint (7.6). Every word is looked at: a block that is still bumping
 * has no `bumped` count yet (its stop sets it), and its rewind cleared the
 * bits past its top (found by review: the bumping block was skipped). */
TSLAB_INTERNAL bool tslab_run_fork_rehint(tslab_run_t* s) {
  for (uint32_t w = 0; w < s->words; w++) {
    if (!atomic_load(&s->bits[2 * w + 1])) continue;
    atomic_store(&s->remote_hint, 1);
    return true;
  }
  return false;
}

/* fork child: whether attached block s is still its owner's bumping block
 * or on its slot's full list. */
static bool block_held(tslab_t* a, tslab_run_t* s) {
  tslab_tcache_t* tc = atomic_load(&s->owner);
  uint64_t era = atomic_load(&s->era);
  tslab_slot_cache_t* sc = &tc->slots[era & a->ring_mask];
  return atomic_load(&sc->era) == era && (sc->blk == s || tslab_fork_listed(s, TSLAB_LIST_FULL, sc->full));
}

/* fork child: whether attached slab s is its bin's current slab or on one
 * of the bin's lists. */
static bool slab_held(tslab_t* a, tslab_run_t* s) {
  tslab_tcache_t* tc = atomic_load(&s->owner);
  tslab_bin_t* bin = tslab_bin(a, tc, atomic_load(&s->era), s->cls);
  return bin->cur == s || tslab_fork_listed(s, TSLAB_LIST_READY, bin->ready) ||
         tslab_fork_listed(s, TSLAB_LIST_PARKED, bin->parked);
}

/* fork child: the next slab, block (reserved ones too) or span of the heap
 * from granule *g on (NULL at its end), with *g moved past it. */
static tslab_run_t* next_run(tslab_t* a, size_t* g) {
  while (*g < a->heap.top) {
    tslab_run_t* s = atomic_load(&a->map[*g]);
    if (!s || s->start != a->base + (*g << TSLAB_GRANULE_SHIFT) || s->granules == 0) return NULL;
    *g += s->granules;
    uint8_t kind = atomic_load(&s->kind);
    if (kind == TSLAB_RUN_SLAB || kind == TSLAB_RUN_BLOCK || kind == TSLAB_RUN_LARGE || kind == TSLAB_RUN_RESERVED)
      return s;
  }
  return NULL;
}

TSLAB_INTERNAL tslab_run_t* tslab_runs_fork_reown(tslab_t* a) {
  tslab_run_t* unheld = NULL;
  size_t g = 0;
  for (tslab_run_t* s; (s = next_run(a, &g));) {
    uint8_t kind = atomic_load(&s->kind);
    tslab_tcache_t* owner = atomic_load(&s->owner);
    if ((kind != TSLAB_RUN_SLAB && kind != TSLAB_RUN_BLOCK) || atomic_load(&s->mode) == TSLAB_DETACHED || !owner ||
        !owner->forked_busy)
      continue;
    bool block = kind == TSLAB_RUN_BLOCK;
    /* Handles: the thread may have attached generations without the copy. */
    s->has_gens = atomic_load(&s->gens) != NULL;
    if (block && owner->slots[atomic_load(&s->era) & a->ring_mask].blk == s) continue;
    repair_attached(s, block);
    if (!block && !slab_held(a, s)) {
      s->heap_next = unheld;
      unheld = s;
    }
  }
  return unheld;
}

/* fork child: whether drained block b is in some cache's hot reserve. */
static bool reserve_holds(tslab_t* a, const tslab_run_t* b) {
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    if (atomic_load(&tc->hot) == b) return true;
    for (tslab_run_t* s = atomic_load(&tc->spares); s; s = atomic_load(&s->spare_next))
      if (s == b) return true;
  }
  return false;
}

/* fork child: run s counts for its era while the era holds its ring slot. */
static void recount_era(tslab_t* a, const tslab_run_t* s, uint64_t* runs, uint64_t* bytes) {
  uint64_t era = atomic_load(&s->era);
  uint32_t slot = (uint32_t)(era & a->ring_mask);
  if (TSLAB_STATE_ERA(atomic_load(&a->ring[slot].state)) != era) return;
  runs[slot]++;
  bytes[slot] += tslab_run_bytes(s);
}

/* Fork child (src/fork.c), after the closes in progress were completed:
 * detached runs get their live counts from their bits (a vanished closer may
 * not have added its delta, a vanished freer may have left a remote bit),
 * drained ones are retired, the others listed on their era. The class and
 * era run counts are recounted from the heap: a thread can vanish between
 * a run's count and the change it counts (a retire uncounts, then lets go;
 * a close lists a detached block, then counts it). A slab counts for its
 * era, a block once detached (7.5), a live span always, while the era
 * holds its ring slot; runs retired below are counted first, as their retire
 * uncounts them. */
TSLAB_INTERNAL void tslab_runs_fork_repair(tslab_t* a) {
  uint64_t counts[TSLAB_CLASSES] = {0};
  uint64_t era_runs[TSLAB_RING_MAX] = {0}, era_bytes[TSLAB_RING_MAX] = {0};
  /* Runs to give back, after the walk: a release may merge runs the walk
   * has yet to step over. */
  tslab_run_t *ownerless = NULL, *empty = NULL;
  size_t g = 0;
  for (tslab_run_t* s; (s = next_run(a, &g));) {
    uint8_t kind = atomic_load(&s->kind);
    if (kind == TSLAB_RUN_RESERVED) {
      /* A drained block no reserve holds (taken from the hot slot by a reuse
       * that waited for the heap mutex, or part way into or out of a
       * reserve): back to the heap, as the reserve's release would. */
      if (!reserve_holds(a, s)) {
        atomic_store(&s->kind, TSLAB_RUN_BLOCK);
        s->heap_next = ownerless;
        ownerless = s;
      }
      continue;
    }
    if (kind == TSLAB_RUN_LARGE) {
      /* A live span counts for its era too (src/large.c); the large repair
       * gave back those half-freed. */
      if (atomic_load(&s->large_state) == TSLAB_LARGE_LIVE) recount_era(a, s, era_runs, era_bytes);
      continue;
    }
    if (atomic_load(&s->mode) != TSLAB_DETACHED && kind == TSLAB_RUN_BLOCK && atomic_load(&s->owner) &&
        !block_held(a, s)) {
      /* A block its owner or a closer had taken off its slot's lists (to
       * detach it, keep it or give it back) when the fork came: detached
       * now, like the rest of a closed era's runs (below). */
      atomic_store(&s->mode, TSLAB_DETACHED);
      atomic_store(&s->owner, NULL);
      s->list = TSLAB_LIST_NONE;
      uint64_t live = 0;
      for (uint32_t w = 0; w < s->words; w++) live += tslab_popcount(atomic_load(&s->bits[2 * w]));
      if (!live) {
        s->heap_next = ownerless; /* never counted for its era: straight back */
        ownerless = s;
        continue;
      }
    }
    if (atomic_load(&s->mode) != TSLAB_DETACHED) {
      tslab_tcache_t* owner = atomic_load(&s->owner);
      if (!owner) {
        /* Its owner let go of it and was giving it to the heap (its counts
         * already dropped it): finish that. */
        s->heap_next = ownerless;
        ownerless = s;
        continue;
      }
    }
    if (kind == TSLAB_RUN_SLAB) counts[s->cls]++; /* a deferred retire below drops it */
    if (atomic_load(&s->mode) != TSLAB_DETACHED) {
      if (kind == TSLAB_RUN_SLAB) recount_era(a, s, era_runs, era_bytes);
      continue;
    }
    /* Detached: counted for its era from here, also a block whose closer
     * vanished before it counted it, so its retire subtracts it (7.5). */
    recount_era(a, s, era_runs, era_bytes);
    if (kind == TSLAB_RUN_BLOCK) s->era_counted = 1;
    uint64_t era = atomic_load(&s->era);
    uint32_t slot = (uint32_t)(era & a->ring_mask);
    int64_t live = 0;
    for (uint32_t w = 0; w < s->words; w++) {
      uint64_t r = atomic_exchange(&s->bits[2 * w + 1], 0);
      uint64_t al = atomic_fetch_and(&s->bits[2 * w], ~r) & ~r;
      live += tslab_popcount(al & ~(kind == TSLAB_RUN_SLAB ? padding(s, w) : 0));
    }
    atomic_store(&s->live, live);
    tslab_epoch_slot_t* es = &a->slots[slot];
    if (live == 0) {
      s->heap_next = empty;
      empty = s;
    } else if (!s->in_era_list && TSLAB_STATE_ERA(tslab_epoch_state(a, era)) == era) {
      tslab_era_list_push_locked(es, s);
    }
  }
  for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
    atomic_store(&a->cls_slabs[c], counts[c]);
    for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) atomic_store(&tc->cls_slabs[c], 0);
  }
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    atomic_store(&a->slots[slot].slabs, era_runs[slot]);
    atomic_store(&a->slots[slot].slab_bytes, era_bytes[slot]);
  }
  tslab_heap_retire_list(a, ownerless, false, NULL);
  while (empty) {
    tslab_run_t* s = empty;
    empty = s->heap_next;
    tslab_run_retire(a, s);
  }
}

#define REPORT(...)                                                      \
  do {                                                                   \
    if (bad++ == 0 && report && cap) snprintf(report, cap, __VA_ARGS__); \
  } while (0)

/* Invariants S1-S3 of one slab or block; the world is stopped by the caller. */
TSLAB_INTERNAL size_t tslab_slab_check(tslab_t* a, tslab_run_t* s, char* report, size_t cap) {
  size_t bad = 0;
  bool block = atomic_load(&s->kind) == TSLAB_RUN_BLOCK;
  if (!block) {
    const tslab_class_info_t* ci = &tslab_classes[s->cls];
    if (s->obj_size != ci->size || s->capacity != ci->capacity || s->words != ci->words ||
        s->granules != ci->granules)
      REPORT("slab %p geometry does not match class %u", (void*)s->start, s->cls);
  } else if (s->obj_size != 1u << TSLAB_UNIT_SHIFT ||
             (s->granules != TSLAB_BLOCK_GRANULES_SMALL && s->granules != TSLAB_BLOCK_GRANULES_LARGE) ||
             s->capacity != s->granules << (TSLAB_GRANULE_SHIFT - TSLAB_UNIT_SHIFT) || s->words != s->capacity / 64) {
    REPORT("block %p does not have a block's geometry", (void*)s->start);
  }
  uint32_t set = 0;
  for (uint32_t w = 0; w < s->words; w++) {
    uint64_t al = atomic_load(&s->bits[2 * w]);
    uint64_t rm = atomic_load(&s->bits[2 * w + 1]);
    uint64_t pad = block ? 0 : padding(s, w);
    if ((al & pad) != pad) REPORT("slab %p padding bits cleared in word %u", (void*)s->start, w);
    if (rm & ~al & ~pad) REPORT("run %p has a remote free of an unallocated slot", (void*)s->start);
    if (rm & pad) REPORT("slab %p has a remote bit in its padding", (void*)s->start);
    if (block && (al & ~atomic_load(&s->starts[w])))
      REPORT("block %p has a live unit that starts no object", (void*)s->start);
    set += tslab_popcount(al & ~pad);
  }
  uint64_t era = atomic_load(&s->era);
  if (era == 0 || era > atomic_load(&a->current)) REPORT("run %p has era %llu", (void*)s->start, (unsigned long long)era);
  if (!tslab_run_era_copies_ok(a, s))
    REPORT("run %p: its copies of era %llu's open state do not match", (void*)s->start, (unsigned long long)era);
  if (s->recip != (block ? (1ull << 48) >> TSLAB_UNIT_SHIFT : tslab_classes[s->cls].recip) ||
      s->slot_bytes != (uint32_t)s->capacity * s->obj_size)
    REPORT("run %p has the wrong reciprocal or slot bytes", (void*)s->start);
  if (atomic_load(&s->mode) == TSLAB_ATTACHED) {
    /* The current slab's `used` also counts the slots its bin set aside; a
     * bumping block's `used` is biased (3.4). */
    if (block && s->list == TSLAB_LIST_CUR) {
      if (tslab_slab_used(s) < set) REPORT("bumping block %p: used %u below %u live", (void*)s->start, tslab_slab_used(s), set);
    } else {
      uint32_t aside = s->list == TSLAB_LIST_CUR ? tslab_bin_aside(s->bin) : 0;
      if (set + aside != tslab_slab_used(s))
        REPORT("attached run %p: used %u but %u slots allocated, %u set aside", (void*)s->start, tslab_slab_used(s),
               set, aside);
    }
    if (tslab_slab_pending(s) && s->list != TSLAB_LIST_CUR && s->list != TSLAB_LIST_READY && s->list != TSLAB_LIST_FULL)
      REPORT("run %p has pending frees outside the lists readers walk", (void*)s->start);
    if (!atomic_load(&s->owner)) REPORT("attached run %p has no owner", (void*)s->start);
  } else {
    int64_t live = atomic_load(&s->live);
    if (live <= 0 || (uint64_t)live != (uint64_t)set)
      REPORT("detached run %p: live %lld, %u allocated", (void*)s->start, (long long)live, set);
    if (tslab_era_active(a, era)) REPORT("detached run %p belongs to an active era", (void*)s->start);
  }
  return bad;
}
