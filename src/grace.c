/* Grace periods: when a retired descriptor, its bitmaps or a drained block
 * may be used again (docs/ARCHITECTURE.md section 4).
 *
 * A thread that is not a run's owner validates the run's metadata and then
 * acts on it, inside a busy window that it opened with a full fence. Metadata
 * retired while such a window may still act on it must not be reused until
 * the window ends. The clock has a generation `gen`: retiring stamps with it.
 * A seal increments `gen`, fences and records the caches whose `busy` word is
 * odd (in a window) with the value read; the sealed generation completes when
 * each of them has moved on. Everything stamped at or below a completed
 * generation may be reused. Nothing here blocks: a caller whose stamp has
 * not completed takes fresh metadata instead.
 *
 * The caller's own cache is never waited for: a thread asking whether it may
 * reuse metadata is not, at that moment, acting on metadata it validated
 * earlier (non-owner paths read what they need before they act, and act
 * last). A seal made for one caller may thus skip that caller's window;
 * windows are waited for only on behalf of other threads' views, which is
 * what G1 needs. */
#include <string.h>

#include "internal.h"

TSLAB_INTERNAL bool tslab_grace_init(tslab_t* a) {
  tslab_grace_t* g = &a->grace;
  if (pthread_mutex_init(&g->mu, NULL) != 0) return false;
  atomic_store(&g->gen, 1);
  atomic_store(&g->done, 1);
  g->sealed = 0;
  return true;
}

TSLAB_INTERNAL void tslab_grace_destroy(tslab_t* a) {
  tslab_grace_t* g = &a->grace;
  if (g->waits) tslab_os_unmap(g->waits, g->waits_bytes);
  pthread_mutex_destroy(&g->mu);
}

/* Room for one more recorded window; the table grows with the number of
 * caches (mmap'd: the core never calls the C library's allocator). */
static bool waits_reserve(tslab_grace_t* g) {
  if (g->nwaits < g->cap) return true;
  size_t cap = g->cap ? g->cap * 2 : 64;
  size_t bytes = cap * sizeof *g->waits;
  tslab_grace_wait_t* w = tslab_os_map(bytes);
  if (!w) return false;
  if (g->waits) {
    memcpy(w, g->waits, g->nwaits * sizeof *w);
    tslab_os_unmap(g->waits, g->waits_bytes);
  }
  g->waits = w;
  g->cap = cap;
  g->waits_bytes = bytes;
  return true;
}

/* No window of another cache is open now: then none can act on metadata
 * retired before this call (the store-buffering argument of G1, with the
 * fence here on the retirer's side). The common case of a thread reusing
 * its own drained block while the other threads are outside the allocator
 * costs a fence and one load per cache, and no write. */
static bool all_quiet(tslab_t* a, const tslab_tcache_t* self) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&a->cacheless_busy, memory_order_seq_cst)) return false;
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
    if (tc != self && (atomic_load_explicit(&tc->busy, memory_order_seq_cst) & 1)) return false;
  return true;
}

/* Start a grace period for every stamp up to the current generation. A
 * window the table has no room for (the table could not grow) makes the
 * seal wait for a moment when no window of any cache but the sealer's is
 * open (`overflow`): each window open at the seal has ended by then. Only
 * the caches the table holds are waited for one by one. */
static void seal_locked(tslab_t* a, const tslab_tcache_t* self) {
  tslab_grace_t* g = &a->grace;
  uint64_t sealed = atomic_fetch_add_explicit(&g->gen, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
  g->nwaits = 0;
  g->overflow = false;
  g->sealer = self;
  g->cacheless_seen = atomic_load_explicit(&a->cacheless_busy, memory_order_seq_cst) != 0;
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    uint64_t v = atomic_load_explicit(&tc->busy, memory_order_seq_cst);
    if (!(v & 1) || tc == self) continue;
    if (!waits_reserve(g)) {
      g->overflow = true;
      continue;
    }
    g->waits[g->nwaits++] = (tslab_grace_wait_t){&tc->busy, v};
  }
  g->sealed = sealed;
}

/* Drop the recorded windows that have ended; complete the seal when none is
 * left. */
static void check_locked(tslab_t* a) {
  tslab_grace_t* g = &a->grace;
  if (!g->sealed) return;
  size_t n = 0;
  for (size_t i = 0; i < g->nwaits; i++)
    if (atomic_load_explicit(g->waits[i].busy, memory_order_acquire) == g->waits[i].seen) g->waits[n++] = g->waits[i];
  g->nwaits = n;
  if (g->cacheless_seen && atomic_load_explicit(&a->cacheless_busy, memory_order_acquire) == 0)
    g->cacheless_seen = false;
  if (g->overflow && all_quiet(a, g->sealer)) g->overflow = false;
  if (n == 0 && !g->cacheless_seen && !g->overflow) {
    atomic_store_explicit(&g->done, g->sealed + 1, memory_order_release);
    g->sealed = 0;
  }
}

TSLAB_INTERNAL bool tslab_grace_quiet(tslab_t* a, const tslab_tcache_t* self) { return all_quiet(a, self); }

TSLAB_INTERNAL bool tslab_grace_passed(tslab_t* a, const tslab_tcache_t* self, uint64_t stamp) {
  tslab_grace_t* g = &a->grace;
  if (stamp < atomic_load_explicit(&g->done, memory_order_acquire)) return true;
  if (all_quiet(a, self)) return true;
  /* Somebody else is polling: they will move the clock; do not wait. */
  if (pthread_mutex_trylock(&g->mu) != 0) return false;
  check_locked(a);
  /* A seal that overflowed its table waits for a quiet moment, which polls
   * (made because a window is open) rarely see: a new seal replaces it. It
   * covers every stamp the old one did, waits for the windows still open
   * (those it recorded are among them), and tries to grow the table again. */
  if (stamp >= atomic_load_explicit(&g->done, memory_order_relaxed) && (!g->sealed || g->overflow)) {
    seal_locked(a, self);
    check_locked(a);
  }
  bool passed = stamp < atomic_load_explicit(&g->done, memory_order_relaxed);
  pthread_mutex_unlock(&g->mu);
  return passed;
}
