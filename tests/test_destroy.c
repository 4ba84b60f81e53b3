/* tslab_destroy of an instance with live objects (small and large, several
 * epochs, closed ones, handles, slabs held by the cache of a thread that has
 * exited) while other instances are in use by other threads: the destroyed
 * instance's whole reservation is unmapped and its RSS goes away, and the
 * other instances lose nothing (their objects keep their contents, their
 * checkers find nothing). Threads that used the destroyed instance can use
 * a new instance afterwards, even one created at the same address. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_util.h"

#define USERS 2
#define KEEP 200
#define FILL_BYTES ((size_t)64 << 20)

typedef struct {
  tslab_t* inst;
  atomic_bool stop;
  atomic_bool ready;
  atomic_uint bad;
  atomic_ulong rounds;
} user_t;

static unsigned char pattern(uintptr_t seed, size_t k) { return (unsigned char)(seed * 31u + k); }

/* Keeps KEEP objects live and replaces them one by one, checking each one's
 * contents before freeing it. */
static void* user(void* arg) {
  user_t* u = arg;
  void* keep[KEEP];
  size_t size[KEEP];
  tslab_epoch_t e = tslab_epoch_current(u->inst);
  for (unsigned i = 0; i < KEEP; i++) {
    size[i] = 16 + i * 37u % 5000;
    keep[i] = tslab_alloc(u->inst, size[i], e);
    if (!keep[i]) {
      u->bad++;
      return NULL;
    }
    memset(keep[i], pattern(i, 0), size[i]);
  }
  atomic_store(&u->ready, true);
  for (unsigned long n = 0; !atomic_load(&u->stop); n++) {
    unsigned i = (unsigned)(n % KEEP);
    const unsigned char* c = keep[i];
    if (c[0] != pattern(i, 0) || c[size[i] - 1] != pattern(i, 0)) u->bad++;
    if (!tslab_free(u->inst, keep[i])) u->bad++;
    keep[i] = tslab_alloc(u->inst, size[i], e);
    if (!keep[i]) {
      u->bad++;
      return NULL;
    }
    memset(keep[i], pattern(i, 0), size[i]);
    if (n % 4096 == 4095) { /* epochs come and go under the objects */
      tslab_epoch_t next = tslab_epoch_advance(u->inst);
      if (tslab_epoch_close(u->inst, e) != TSLAB_OK) u->bad++;
      e = next;
    }
    atomic_store(&u->rounds, n);
  }
  for (unsigned i = 0; i < KEEP; i++)
    if (!tslab_free(u->inst, keep[i])) u->bad++;
  return NULL;
}

static void* exiting_user(void* arg) {
  tslab_t* a = arg;
  for (unsigned i = 0; i < 1000; i++) {
    void* p = tslab_alloc(a, 32 + i % 700, tslab_epoch_current(a));
    if (p) memset(p, 1, 32);
  }
  return NULL;
}

/* Is the page of p mapped at all? mincore fails with ENOMEM where nothing is. */
static int mapped(const void* p) {
  long page = sysconf(_SC_PAGESIZE);
  unsigned char vec;
  return mincore((void*)((uintptr_t)p & ~(uintptr_t)(page - 1)), (size_t)page, &vec) == 0;
}

int main(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);
  user_t users[USERS];
  pthread_t th[USERS];
  for (unsigned i = 0; i < USERS; i++) {
    users[i] = (user_t){.inst = tslab_create(NULL)};
    REQUIRE(users[i].inst != NULL);
    REQUIRE(pthread_create(&th[i], NULL, user, &users[i]) == 0);
  }

  /* Fill a: a thread that exits (its cache is abandoned, still holding
   * slabs), then objects of every kind in three epochs. */
  pthread_t ex;
  REQUIRE(pthread_create(&ex, NULL, exiting_user, a) == 0);
  pthread_join(ex, NULL);
  enum { PROBES = 5 };
  void* probe[PROBES];
  tslab_handle_t h = 0;
  probe[0] = tslab_alloc(a, 24, 1);
  probe[1] = tslab_alloc_handle(a, 3000, 1, &h);
  probe[2] = tslab_alloc(a, (size_t)8 << 20, 1);
  tslab_epoch_t e2 = tslab_epoch_advance(a);
  probe[3] = tslab_alloc(a, 20000, e2);
  tslab_epoch_t e3 = tslab_epoch_advance(a);
  size_t filled = 0;
  while (filled < FILL_BYTES) {
    size_t n = filled % (3 << 20) == 0 ? (size_t)1 << 20 : 4000;
    void* p = tslab_alloc(a, n, filled % 2 ? e2 : e3);
    REQUIRE(p != NULL);
    memset(p, 0x77, n);
    filled += n;
  }
  probe[4] = tslab_alloc(a, 100, e3);
  CHECK_EQ_U(tslab_epoch_close(a, e2), TSLAB_OK);
  for (unsigned i = 0; i < PROBES; i++) {
    REQUIRE(probe[i] != NULL);
    CHECK(mapped(probe[i]));
    /* Another instance does not take a's objects. */
    CHECK(!tslab_free(users[0].inst, probe[i]));
  }
  CHECK(tslab_handle_get(users[1].inst, h) == NULL);
  CHECK_CONSISTENT(a);

  for (unsigned i = 0; i < USERS; i++)
    while (!atomic_load(&users[i].ready)) sched_yield();
  uint64_t rss_before = tslab_process_rss();
  tslab_destroy(a);
  uint64_t rss_after = tslab_process_rss();

  for (unsigned i = 0; i < PROBES; i++) CHECK(!mapped(probe[i]));
  /* The fill alone was 64 MiB; the users' working sets are a few MiB. */
  printf("rss %llu MiB -> %llu MiB\n", (unsigned long long)rss_before >> 20,
         (unsigned long long)rss_after >> 20);
  CHECK(rss_before > rss_after + (FILL_BYTES / 2));

  /* A new instance, perhaps at a's address: the main thread's stale
   * thread-local cache entry for a must not be taken for the new one. */
  tslab_t* d = tslab_create(NULL);
  REQUIRE(d != NULL);
  void* p = tslab_alloc(d, 24, 1);
  CHECK(p != NULL);
  CHECK(tslab_free(d, p));
  CHECK_CONSISTENT(d);
  tslab_destroy(d);

  /* The others kept working throughout. */
  unsigned long rounds[USERS];
  for (unsigned i = 0; i < USERS; i++) rounds[i] = atomic_load(&users[i].rounds);
  for (unsigned i = 0; i < USERS; i++)
    while (atomic_load(&users[i].rounds) == rounds[i] && !atomic_load(&users[i].bad)) sched_yield();
  for (unsigned i = 0; i < USERS; i++) {
    atomic_store(&users[i].stop, true);
    pthread_join(th[i], NULL);
    CHECK_EQ_U(atomic_load(&users[i].bad), 0);
    CHECK_CONSISTENT(users[i].inst);
    tslab_stats_global_t g;
    tslab_stats_global(users[i].inst, &g);
    CHECK_EQ_U(g.live_objects, 0);
    tslab_destroy(users[i].inst);
  }
  TEST_DONE();
}
