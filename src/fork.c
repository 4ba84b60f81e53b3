/* fork(): the child gets one thread, and every mutex and cache as they were
 * at the fork. Before forking, the forking thread takes every instance's
 * mutexes (in the documented order: live instances, epoch, registry, cache
 * mutexes, heap) so no structure they guard is half-updated, and waits a
 * little for other threads to leave their busy windows. In the child, caches
 * of threads that do not exist there are abandoned (the next thread adopts
 * them) and their busy flags cleared, so an epoch close cannot wait for a
 * thread that is gone. */
#include <sched.h>

#include "internal.h"

static void lock_instance(tslab_t* a) {
  pthread_mutex_lock(&a->epoch_mu);
  pthread_mutex_lock(&a->reg_mu);
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next) pthread_mutex_lock(&tc->mu);
  pthread_mutex_lock(&a->heap.mu);
  /* A thread still busy is either about to finish (a few instructions) or
   * blocked on one of the mutexes held here, at a point where its cache's
   * lists are consistent. Give the first kind a moment. */
  int budget = 100; /* yields for all caches together: fork stays fast */
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next)
    while (budget > 0 && atomic_load_explicit(&tc->busy, memory_order_acquire)) {
      sched_yield();
      budget--;
    }
}

static void unlock_instance(tslab_t* a) {
  pthread_mutex_unlock(&a->heap.mu);
  for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next) pthread_mutex_unlock(&tc->mu);
  pthread_mutex_unlock(&a->reg_mu);
  pthread_mutex_unlock(&a->epoch_mu);
}

static void prepare(void) {
  tslab_live_lock();
  for (size_t i = 0; i < tslab_live_count(); i++) lock_instance(tslab_live_at(i));
}

static void parent(void) {
  for (size_t i = tslab_live_count(); i-- > 0;) unlock_instance(tslab_live_at(i));
  tslab_live_unlock();
}

static void child(void) {
  for (size_t i = tslab_live_count(); i-- > 0;) {
    tslab_t* a = tslab_live_at(i);
    atomic_store(&a->cacheless_busy, 0);
    atomic_store(&a->closing_inflight, 0);
    for (tslab_tcache_t* tc = a->caches; tc; tc = tc->reg_next) {
      atomic_store(&tc->busy, 0);
      if (atomic_load(&tc->tid) && !tslab_tls_owns(tc)) {
        tslab_tcache_end_sections(a, tc);
        tslab_tcache_park_locked(a, tc);
      }
    }
    unlock_instance(a);
  }
  tslab_live_unlock();
}

TSLAB_INTERNAL void tslab_fork_init(void) { pthread_atfork(prepare, parent, child); }
