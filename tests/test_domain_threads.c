/* Epoch domains under concurrency: every thread runs its own nested domains
 * while handing objects allocated in them to other threads, which free them
 * (often after the owning domain has closed its era). Domain stacks must stay
 * per-thread, and the allocator must end empty and consistent. */
#include <pthread.h>

#include "test_util.h"

enum { THREADS = 4, ROUNDS = 300, PER_ROUND = 16, QUEUE = 4096 };

static tslab_t* g_alloc;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void* g_queue[QUEUE];
static size_t g_queued;
static int g_bad;  /* failures seen by workers, checked by main */

/* Count a worker failure and say where it happened and why. */
#define BAD()                                                                      \
  do {                                                                             \
    fprintf(stderr, "%s:%d: worker check failed (last error: %s)\n", __FILE__,     \
            __LINE__, tslab_strerror(tslab_last_error()));                         \
    __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);                               \
  } while (0)

static void hand_over(void* p) {
  pthread_mutex_lock(&g_lock);
  if (g_queued < QUEUE) {
    g_queue[g_queued++] = p;
    p = NULL;
  }
  pthread_mutex_unlock(&g_lock);
  if (p != NULL && !tslab_free(g_alloc, p)) BAD();
}

/* Takes fewer objects than a round hands over, so the queue fills with
 * objects of every thread and the frees at the end are the main thread's. */
static void free_some_foreign(void) {
  void* batch[PER_ROUND];
  size_t n = 0;
  pthread_mutex_lock(&g_lock);
  while (n < PER_ROUND / 2 && g_queued > 0) batch[n++] = g_queue[--g_queued];
  pthread_mutex_unlock(&g_lock);
  for (size_t i = 0; i < n; i++)
    if (!tslab_free(g_alloc, batch[i])) BAD();
}

/* A failure is acceptable only when the domain's era was recycled: with
 * other threads advancing, a thread descheduled long enough sees its era
 * force-closed by a later era taking its ring slot (even between opening
 * and labelling it, which fails the create), and then the domain must
 * refuse. Call right after the failing call (d NULL: a failed create). */
static bool recycled(const tslab_domain_t* d) {
  if (d == NULL) return tslab_last_error() == TSLAB_ERR_EPOCH_STALE;
  return tslab_epoch_status(g_alloc, tslab_domain_epoch(d)) != TSLAB_OK;
}

static void* worker(void* arg) {
  (void)arg;
  for (int r = 0; r < ROUNDS; r++) {
    tslab_domain_t* outer = tslab_domain_create(g_alloc, "outer");
    if (outer == NULL) {
      if (!recycled(NULL)) BAD();
      continue;
    }
    if (tslab_domain_enter(outer) != TSLAB_OK) {
      if (!recycled(outer)) BAD();
      if (tslab_domain_destroy(outer) != TSLAB_OK) BAD();
      continue;
    }
    tslab_domain_t* inner = tslab_domain_create(g_alloc, "inner");
    bool inner_entered = inner != NULL && tslab_domain_enter(inner) == TSLAB_OK;
    if (!inner_entered && !recycled(inner)) BAD();
    for (int i = 0; inner_entered && i < PER_ROUND; i++) {
      void* p = tslab_domain_alloc(16 + (size_t)(i * 24));
      if (p == NULL) {
        if (!recycled(inner)) BAD();
        continue;
      }
      if (tslab_epoch_of(g_alloc, p) != tslab_domain_epoch(inner)) BAD();
      memset(p, i, 16);
      if (i % 2) hand_over(p);
      else if (!tslab_free(g_alloc, p)) BAD();
    }
    if (inner_entered && (tslab_domain_current() != inner || tslab_domain_exit(inner) != TSLAB_OK))
      BAD();
    if (inner != NULL && tslab_domain_destroy(inner) != TSLAB_OK) BAD();
    if (tslab_domain_current() != outer) BAD();
    void* o = tslab_domain_alloc(64);
    if (o == NULL) {
      if (!recycled(outer)) BAD();
    } else {
      if (tslab_epoch_of(g_alloc, o) != tslab_domain_epoch(outer)) BAD();
      hand_over(o);
    }
    if (tslab_domain_exit(outer) != TSLAB_OK || tslab_domain_destroy(outer) != TSLAB_OK) BAD();
    if (tslab_domain_current() != NULL) BAD();
    free_some_foreign();
  }
  return NULL;
}

int main(void) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  /* A large ring makes recycling of a live domain's era rare (the workers
   * tolerate it, see recycled()). */
  cfg.epoch_ring_size = 256;
  g_alloc = tslab_create(&cfg);
  REQUIRE(g_alloc != NULL);
  /* The main thread's own cache, before the workers exist: the objects it
   * frees at the end are all another thread's. */
  void* mine = tslab_alloc(g_alloc, 8, tslab_epoch_current(g_alloc));
  REQUIRE(mine != NULL);
  CHECK(tslab_free(g_alloc, mine));
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&th[i], NULL, worker, NULL) == 0);
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_join(th[i], NULL) == 0);
  CHECK_EQ_U(g_bad, 0);
  while (g_queued > 0) CHECK(tslab_free(g_alloc, g_queue[--g_queued]));

  tslab_stats_global_t g;
  CHECK_EQ_U(tslab_stats_global(g_alloc, &g), TSLAB_OK);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_EQ_U(g.invalid_frees_total, 0);
  CHECK(g.cross_thread_frees_total > 0);
  /* Every created era was closed by its domain: nothing is left open except
   * the instance's first era. */
  static tslab_stats_epoch_t eps[256];
  size_t n = tslab_stats_epochs(g_alloc, eps, 256);
  for (size_t i = 0; i < n; i++) {
    CHECK(eps[i].refcount == 0);
    CHECK(eps[i].state != TSLAB_EPOCH_ACTIVE || eps[i].label[0] == '\0');
  }
  CHECK_CONSISTENT(g_alloc);
  tslab_destroy(g_alloc);
  TEST_DONE();
}
