/* Slabs: formatting, cross-thread frees, collection of remote frees by the
 * owner, detaching at epoch close and retirement. The protocol and its
 * invariants (S1-S3, C1-C2) are in docs/ARCHITECTURE.md sections 3 and 6. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static tslab_epoch_slot_t* slot_of_era(tslab_t* a, uint64_t era) { return &a->ring[era & a->ring_mask]; }

static bool era_holds_slot(tslab_t* a, uint64_t era) {
  return TSLAB_STATE_ERA(atomic_load_explicit(&slot_of_era(a, era)->state, memory_order_acquire)) == era;
}

/* Give an empty, formatted slab to cache tc for `era`: owner-private state
 * from scratch, and the slab counts for the era again. */
static void slab_attach(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s, uint64_t era) {
  atomic_store_explicit(&s->usage, 0, memory_order_relaxed);
  s->hint = 0;
  s->list = TSLAB_LIST_NONE;
  s->bin = NULL;
  __atomic_store_n(&s->bin_next, NULL, __ATOMIC_RELAXED); /* statistics may walk a stale list */
  __atomic_store_n(&s->bin_prev, NULL, __ATOMIC_RELAXED);
  s->notify_next = s->notify_prev = NULL;
  atomic_store_explicit(&s->era, era, memory_order_relaxed);
  atomic_store_explicit(&s->owner, tc, memory_order_relaxed);
  atomic_store_explicit(&s->creator, tc, memory_order_relaxed);
  atomic_store_explicit(&s->mode, TSLAB_ATTACHED, memory_order_relaxed);
  atomic_store_explicit(&s->notify, TSLAB_NOTIFY_NONE, memory_order_relaxed);
  atomic_store_explicit(&s->live, 0, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->slabs_created, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->cls_slabs[s->cls], 1, memory_order_relaxed);
  tslab_epoch_slot_t* es = slot_of_era(a, era);
  atomic_fetch_add_explicit(&es->slabs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->slab_bytes, (size_t)s->granules << TSLAB_GRANULE_SHIFT, memory_order_relaxed);
}

TSLAB_INTERNAL tslab_run_t* tslab_slab_new(tslab_t* a, tslab_tcache_t* tc, uint32_t cls, uint64_t era) {
  tslab_run_t* s = tslab_tcache_spare_pop(a, tc, cls);
  if (s) {
    /* An empty slab of this class kept by the pooled policy: already
     * formatted, bitmaps clear. */
    atomic_fetch_add_explicit(&a->slabs_recycled, 1, memory_order_relaxed);
    slab_attach(a, tc, s, era);
    return s;
  }
  const tslab_class_info_t* ci = &tslab_classes[cls];
  s = tslab_heap_alloc(a, ci->granules, 1);
  if (!s) return NULL;
  if (!tslab_heap_bitmaps(a, s, ci->words)) {
    atomic_store_explicit(&s->era, era, memory_order_relaxed);
    tslab_heap_retire(a, s, false);
    return NULL;
  }
  s->cls = (uint8_t)cls;
  s->words = (uint16_t)ci->words;
  s->obj_size = ci->size;
  s->capacity = ci->capacity;
  s->recip = ci->recip;
  atomic_store_explicit(&s->gens, NULL, memory_order_relaxed);
  for (uint32_t w = 0; w < ci->words; w++) {
    atomic_store_explicit(&s->alloc[w], 0, memory_order_relaxed);
    atomic_store_explicit(&s->remote[w], 0, memory_order_relaxed);
  }
  /* Slots past the capacity are marked allocated forever so the bit search
   * never returns them; used does not count them. */
  uint32_t tail = ci->capacity & 63;
  if (tail) atomic_store_explicit(&s->alloc[ci->words - 1], ~0ull << tail, memory_order_relaxed);
  slab_attach(a, tc, s, era);
  atomic_store_explicit(&s->kind, TSLAB_RUN_SLAB, memory_order_release);
  size_t g0 = (size_t)(s->start - a->base) >> TSLAB_GRANULE_SHIFT;
  for (size_t g = g0; g < g0 + s->granules; g++)
    atomic_store_explicit(&a->map[g], s, memory_order_release);
  return s;
}

/* A slab leaves use: its era's and class's slab counts drop. Returns
 * whether the slab's memory goes back to the OS now: a slab of an era that
 * is no longer active is released at once (contract line 3), unless the
 * instance pools them. */
static bool slab_unaccount(tslab_t* a, tslab_run_t* s) {
  uint64_t era = atomic_load_explicit(&s->era, memory_order_relaxed);
  tslab_epoch_slot_t* es = slot_of_era(a, era);
  uint64_t st = atomic_load_explicit(&es->state, memory_order_seq_cst);
  if (TSLAB_STATE_ERA(st) == era) {
    atomic_fetch_sub_explicit(&es->slabs, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&es->slab_bytes, (size_t)s->granules << TSLAB_GRANULE_SHIFT,
                              memory_order_relaxed);
  }
  atomic_fetch_sub_explicit(&a->cls_slabs[s->cls], 1, memory_order_relaxed);
  return st != TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE) && a->config.release_policy != TSLAB_RELEASE_POOLED;
}

/* Pooled policy: offer an empty slab to its creating cache's spares. */
static bool to_spares(tslab_t* a, tslab_run_t* s) {
  tslab_tcache_t* creator = atomic_load_explicit(&s->creator, memory_order_relaxed);
  return a->config.release_policy == TSLAB_RELEASE_POOLED && creator && tslab_tcache_spare_push(a, creator, s);
}

/* Hand an empty slab that left use back: under the pooled policy to its
 * creating cache's spares, else (or over that cache's budget) to the heap,
 * which releases it when its era is no longer active. */
TSLAB_INTERNAL void tslab_slab_retire(tslab_t* a, tslab_run_t* s) {
  bool release = slab_unaccount(a, s);
  if (!to_spares(a, s)) tslab_heap_retire(a, s, release);
}

/* The slots of `bits` in word w were freed through remote bits: their
 * handles stop matching. Only the party that collected them calls this. */
static void bump_gens(tslab_run_t* s, uint32_t w, uint64_t bits) {
  if (!atomic_load_explicit(&s->gens, memory_order_relaxed)) return;
  for (; bits; bits &= bits - 1) tslab_slab_bump_gen(s, (w << 6) + (uint32_t)__builtin_ctzll(bits));
}

/* Owner: fold the slab's remote frees into its alloc bitmap. */
TSLAB_INTERNAL uint32_t tslab_slab_collect(tslab_run_t* s, tslab_t* a) {
  uint32_t n = 0, invalid = 0;
  for (uint32_t w = 0; w < s->words; w++) {
    if (!atomic_load_explicit(&s->remote[w], memory_order_relaxed)) continue;
    uint64_t r = atomic_exchange_explicit(&s->remote[w], 0, memory_order_acq_rel);
    uint64_t al = atomic_load_explicit(&s->alloc[w], memory_order_relaxed);
    uint64_t valid = r & al;
    /* A remote bit without its alloc bit: a local and a remote free of the
     * same slot raced; the local one won. */
    invalid += (uint32_t)__builtin_popcountll(r & ~al);
    if (!valid) continue;
    atomic_store_explicit(&s->alloc[w], al & ~valid, memory_order_relaxed);
    n += (uint32_t)__builtin_popcountll(valid);
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

/* The free of a detached slab's slot: clear the alloc bit; the free that
 * brings live to zero releases the slab. */
static bool detached_account(tslab_t* a, tslab_run_t* s, uint32_t idx) {
  uint64_t bit = 1ull << (idx & 63);
  uint64_t old = atomic_fetch_and_explicit(&s->alloc[idx >> 6], ~bit, memory_order_acq_rel);
  if (!(old & bit)) return false;
  tslab_slab_bump_gen(s, idx);
  if (atomic_fetch_sub_explicit(&s->live, 1, memory_order_acq_rel) == 1) tslab_slab_retire(a, s);
  return true;
}

/* Set the slot's remote bit: one atomic read-modify-write. */
static bool set_remote(tslab_run_t* s, uint32_t idx) {
  uint32_t w = idx >> 6;
  uint64_t bit = 1ull << (idx & 63);
  if (!(atomic_load_explicit(&s->alloc[w], memory_order_relaxed) & bit) ||
      (atomic_load_explicit(&s->remote[w], memory_order_relaxed) & bit))
    return false;
  return !(atomic_fetch_or_explicit(&s->remote[w], bit, memory_order_seq_cst) & bit);
}

/* Free of a slot by a thread that does not own the slab, while its era is
 * ACTIVE and the caller is in its busy window (so no closer detaches the
 * slab meanwhile). After the remote bit is set the owner may collect it and
 * retire the slab at any time, so only atomic fields of the descriptor are
 * read afterwards, never the bitmaps. */
TSLAB_INTERNAL bool tslab_slab_free_remote(tslab_run_t* s, uint32_t idx) {
  if (!set_remote(s, idx)) return false;
  if (atomic_load_explicit(&s->notify, memory_order_seq_cst) == TSLAB_NOTIFY_ARMED) {
    tslab_tcache_t* owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (owner) tslab_tcache_notify(owner, s);
  }
  return true;
}

/* Free of a slot whose era is closing or gone, in the caller's busy window.
 * A detached slab is freed through its live count. A slab the closer has
 * not detached yet gets a remote bit, which the closer collects; if the
 * closer detached it meanwhile, whoever clears the bit accounts for the free
 * (section 6.1). The closer retires no slab before every busy window that
 * may still be here has ended, so the bitmaps stay valid. */
TSLAB_INTERNAL bool tslab_slab_free_closing(tslab_t* a, tslab_run_t* s, uint32_t idx) {
  /* Make this window's busy flag visible before reading the mode: against
   * the closer's mode store and second wait (section 6.1 step 4b). */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&s->mode, memory_order_seq_cst) == TSLAB_DETACHED) return detached_account(a, s, idx);
  if (!set_remote(s, idx)) return false;
  if (atomic_load_explicit(&s->mode, memory_order_seq_cst) == TSLAB_DETACHED) {
    uint64_t bit = 1ull << (idx & 63);
    if (atomic_fetch_and_explicit(&s->remote[idx >> 6], ~bit, memory_order_seq_cst) & bit)
      detached_account(a, s, idx);
  }
  return true;
}

/* Closer, step 4a: with the owner quiescent and its mutex held, take the slab
 * out of the owner's hands and collect the remote frees that made it in.
 * Returns the live count the closer adds in step 4b. */
TSLAB_INTERNAL int64_t tslab_slab_detach(tslab_t* a, tslab_run_t* s) {
  atomic_store_explicit(&s->mode, TSLAB_DETACHED, memory_order_seq_cst);
  atomic_store_explicit(&s->owner, NULL, memory_order_release);
  atomic_store_explicit(&s->notify, TSLAB_NOTIFY_NONE, memory_order_relaxed);
  s->list = TSLAB_LIST_NONE;
  s->bin = NULL;
  __atomic_store_n(&s->bin_next, NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&s->bin_prev, NULL, __ATOMIC_RELAXED);
  int64_t collected = 0;
  uint64_t invalid = 0;
  for (uint32_t w = 0; w < s->words; w++) {
    uint64_t r = atomic_exchange_explicit(&s->remote[w], 0, memory_order_seq_cst);
    if (!r) continue;
    uint64_t old = atomic_fetch_and_explicit(&s->alloc[w], ~r, memory_order_acq_rel);
    collected += __builtin_popcountll(r & old);
    bump_gens(s, w, r & old);
    invalid += (uint64_t)__builtin_popcountll(r & ~old);
  }
  if (invalid) atomic_fetch_add_explicit(&a->invalid_frees, invalid, memory_order_relaxed);
  return (int64_t)tslab_slab_used(s) - collected;
}

/* Closer, step 4b, once no busy window can still see the slab attached:
 * hand over the live count. A slab that is empty goes on the closer's list,
 * released in one batch (neighbouring slabs in one call). */
TSLAB_INTERNAL void tslab_slab_detach_finish(tslab_t* a, tslab_run_t* s, int64_t delta, tslab_run_t** empty,
                                             bool* release) {
  if (atomic_fetch_add_explicit(&s->live, delta, memory_order_acq_rel) + delta != 0) return;
  *release = slab_unaccount(a, s);
  if (to_spares(a, s)) return;
  s->heap_next = *empty;
  *empty = s;
}

/* Owner: ask for a notification on the next remote free. Returns true when
 * remote frees are already pending (the caller treats the slab as ready). */
TSLAB_INTERNAL bool tslab_slab_arm(tslab_run_t* s) {
  uint32_t expected = TSLAB_NOTIFY_NONE;
  atomic_compare_exchange_strong_explicit(&s->notify, &expected, TSLAB_NOTIFY_ARMED,
                                          memory_order_seq_cst, memory_order_seq_cst);
  for (uint32_t w = 0; w < s->words; w++)
    if (atomic_load_explicit(&s->remote[w], memory_order_seq_cst)) return true;
  return false;
}

#define REPORT(...)                                                      \
  do {                                                                   \
    if (bad++ == 0 && report && cap) snprintf(report, cap, __VA_ARGS__); \
  } while (0)

/* Invariants S1-S3 of one slab; the world is stopped by the caller. */
TSLAB_INTERNAL size_t tslab_slab_check(tslab_t* a, tslab_run_t* s, char* report, size_t cap) {
  size_t bad = 0;
  const tslab_class_info_t* ci = &tslab_classes[s->cls];
  if (s->obj_size != ci->size || s->capacity != ci->capacity || s->words != ci->words ||
      s->granules != ci->granules)
    REPORT("slab %p geometry does not match class %u", (void*)s->start, s->cls);
  uint32_t set = 0;
  for (uint32_t w = 0; w < s->words; w++) {
    uint64_t al = atomic_load(&s->alloc[w]);
    uint64_t rm = atomic_load(&s->remote[w]);
    uint32_t lo = w * 64, hi = lo + 64 > s->capacity ? s->capacity : lo + 64;
    uint64_t pad = hi - lo == 64 ? 0 : ~0ull << (hi - lo);
    if ((al & pad) != pad) REPORT("slab %p padding bits cleared in word %u", (void*)s->start, w);
    if (rm & ~al & ~pad) REPORT("slab %p has a remote free of an unallocated slot", (void*)s->start);
    if (rm & pad) REPORT("slab %p has a remote bit in its padding", (void*)s->start);
    set += (uint32_t)__builtin_popcountll(al & ~pad);
  }
  uint64_t era = atomic_load(&s->era);
  if (era == 0 || era > atomic_load(&a->current)) REPORT("slab %p has era %llu", (void*)s->start, (unsigned long long)era);
  if (s->list == TSLAB_LIST_SPARE) {
    uint64_t pending = 0;
    for (uint32_t w = 0; w < s->words; w++) pending |= atomic_load(&s->remote[w]);
    if (set != 0 || pending) REPORT("spare slab %p is not empty", (void*)s->start);
    if (atomic_load(&s->owner)) REPORT("spare slab %p has an owner", (void*)s->start);
  } else if (atomic_load(&s->mode) == TSLAB_ATTACHED) {
    /* The current slab's `used` also counts the slots its bin set aside. */
    uint32_t aside = s->list == TSLAB_LIST_CUR
                         ? (uint32_t)__builtin_popcountll(atomic_load(&s->bin->mask))
                         : 0;
    if (set + aside != tslab_slab_used(s))
      REPORT("attached slab %p: used %u but %u slots allocated, %u set aside", (void*)s->start,
             tslab_slab_used(s), set, aside);
    if (tslab_slab_pending(s) && s->list != TSLAB_LIST_CUR && s->list != TSLAB_LIST_READY)
      REPORT("slab %p has pending frees outside the current slab and the ready list", (void*)s->start);
    if (!atomic_load(&s->owner)) REPORT("attached slab %p has no owner", (void*)s->start);
  } else {
    uint32_t pending = 0;
    for (uint32_t w = 0; w < s->words; w++) pending += (uint32_t)__builtin_popcountll(atomic_load(&s->remote[w]));
    int64_t live = atomic_load(&s->live);
    if (live <= 0 || (uint64_t)live != (uint64_t)set)
      REPORT("detached slab %p: live %lld, %u allocated, %u pending", (void*)s->start, (long long)live, set, pending);
    if (era_holds_slot(a, era) &&
        TSLAB_STATE_OF(atomic_load(&slot_of_era(a, era)->state)) == TSLAB_EPOCH_ACTIVE)
      REPORT("detached slab %p belongs to an active era", (void*)s->start);
  }
  return bad;
}
