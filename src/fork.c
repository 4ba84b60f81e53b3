/* fork(): the child gets one thread, and every mutex and cache as they were
 * at the fork (docs/ARCHITECTURE.md 7.6). Before forking, the forking thread
 * takes every instance's locks in the documented order (live instances,
 * labels, grace clock, registry, each cache's mutex, each era slot's lock,
 * heap) so no structure they guard is half-updated, and waits a little for
 * other threads to leave their busy windows. In the child, caches of threads
 * that do not exist there are abandoned (the next thread adopts them), and
 * what vanished threads left half-done is finished or rolled back, in this
 * order: every cache's lists are rebuilt from their forward links and its
 * half-made list change, bump, block stop or slab change finished or undone
 * (a thread closing its own era changes its cache outside any window);
 * spans and heap runs half-made or half-given-back are settled; the runs of
 * a cache whose thread was inside a window (the wait above timed out) get
 * their `used` counts from their bits, and its slabs no list holds go back
 * on their bins' ready lists; closes in progress are completed and eras
 * being opened opened; detached runs get their live counts from their
 * bits, and run counts are recounted; then a cache whose thread was inside
 * a window is flushed as the thread's exit would have (which finishes a
 * notification drain it had started). The child passes tslab_check. */
#include <sched.h>

#include "internal.h"

static void lock_instance(tslab_t* a) {
  pthread_mutex_lock(&a->label_mu);
  pthread_mutex_lock(&a->grace.mu);
  pthread_mutex_lock(&a->reg_mu);
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) pthread_mutex_lock(&tc->mu);
  for (uint32_t i = 0; i < a->ring_size; i++) tslab_spin_lock(&a->slots[i].mu);
  pthread_mutex_lock(&a->heap.mu);
  /* A thread still busy is either about to finish (a few instructions) or
   * blocked on one of the locks held here, at a point where its cache's
   * lists are consistent. Give the first kind a moment. */
  uint64_t deadline = tslab_now_ns() + 20 * 1000 * 1000; /* for all caches together: fork stays fast */
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
    while ((atomic_load_explicit(&tc->busy, memory_order_acquire) & 1) && !tslab_tls_owns(tc) &&
           tslab_now_ns() < deadline)
      sched_yield();
}

static void unlock_instance(tslab_t* a) {
  pthread_mutex_unlock(&a->heap.mu);
  for (uint32_t i = a->ring_size; i-- > 0;) tslab_spin_unlock(&a->slots[i].mu);
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) pthread_mutex_unlock(&tc->mu);
  pthread_mutex_unlock(&a->reg_mu);
  pthread_mutex_unlock(&a->grace.mu);
  pthread_mutex_unlock(&a->label_mu);
}

static void prepare(void) {
  tslab_live_lock();
  for (size_t i = 0; i < tslab_live_count(); i++) lock_instance(tslab_live_at(i));
}

static void parent(void) {
  for (size_t i = tslab_live_count(); i-- > 0;) unlock_instance(tslab_live_at(i));
  tslab_live_unlock();
}

/* Child, single-threaded: finish or undo what vanished threads left. */
static void repair(tslab_t* a) {
  atomic_store(&a->cacheless_busy, 0);
  /* Exits pinned it in the parent; their threads are gone (their caches
   * are finished below), and tslab_destroy must not wait for them. */
  atomic_store(&a->exiting, 0);
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    tc->forked_busy = (atomic_load(&tc->busy) & 1) && !tslab_tls_owns(tc);
    tslab_tcache_end_sections(a, tc);
    if (atomic_load(&tc->tid) && !tslab_tls_owns(tc)) tslab_tcache_park_locked(a, tc);
  }
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) tslab_tcache_fork_relink(a, tc);
  tslab_large_fork_repair(a);
  tslab_heap_fork_repair(a);
  /* Counts and lists whole before a close in progress is completed: its
   * detach folds `used` and walks the lists. */
  for (tslab_run_t *s = tslab_runs_fork_reown(a), *next; s; s = next) {
    next = s->heap_next;
    s->heap_next = NULL;
    tslab_tcache_fork_adopt(a, atomic_load(&s->owner), s);
  }
  tslab_epoch_fork_repair(a);
  tslab_runs_fork_repair(a);
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
    if (tc->forked_busy) tslab_tcache_fork_flush(a, tc);
  /* A cache whose thread is gone gives its hot reserve back (section 5). */
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc))
    if (!atomic_load(&tc->tid)) tslab_block_release_reserve(a, tc, false);
}

static void child(void) {
  for (size_t i = tslab_live_count(); i-- > 0;) {
    tslab_t* a = tslab_live_at(i);
    unlock_instance(a);
    repair(a);
  }
  tslab_live_unlock();
}

TSLAB_INTERNAL void tslab_fork_init(void) { pthread_atfork(prepare, parent, child); }
