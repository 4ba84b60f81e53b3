/* Thread churn: thousands of short-lived threads, a few at a time, each
 * allocating, freeing its own objects and objects other threads left for it,
 * handing some of its own to the next thread, and exiting. Thread caches are
 * abandoned at exit and adopted by new threads, so their number stays
 * bounded by the peak of concurrent threads, and nothing a thread held at
 * exit may stay pinned: the statistics must show no leaked object, slab or
 * cache, and resident memory must not grow with the number of threads. */
#include <pthread.h>
#include <stdatomic.h>

#include "test_util.h"

#define THREADS 2000
#define WAVE 4       /* threads alive at once */
#define PER_THREAD 300
#define HANDOFF 64   /* objects each thread leaves for the next wave */
#define LONG_LIVED 16

typedef struct {
  void* p[HANDOFF];
  size_t size[HANDOFF];
} mailbox_t;

static tslab_t* a;
static mailbox_t boxes[WAVE];
static atomic_uint bad;

static unsigned char pattern(size_t size, size_t k) { return (unsigned char)(size * 7u + k); }

static void stamp(void* p, size_t size) {
  unsigned char* c = p;
  c[0] = pattern(size, 0);
  c[size - 1] = pattern(size, size - 1);
}

static int stamped(const void* p, size_t size) {
  const unsigned char* c = p;
  return c[0] == pattern(size, 0) && c[size - 1] == pattern(size, size - 1);
}

static void* worker(void* arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  mailbox_t* box = &boxes[id % WAVE];
  tslab_epoch_t e = tslab_epoch_current(a);
  /* Objects the previous thread of this lane left: cross-thread frees,
   * from slabs owned by a cache that has been abandoned meanwhile. */
  for (unsigned i = 0; i < HANDOFF; i++) {
    if (!box->p[i]) continue;
    if (!stamped(box->p[i], box->size[i]) || !tslab_free(a, box->p[i])) atomic_fetch_add(&bad, 1);
    box->p[i] = NULL;
  }
  void* mine[PER_THREAD];
  size_t sizes[PER_THREAD];
  for (unsigned i = 0; i < PER_THREAD; i++) {
    sizes[i] = i % 50 == 0 ? 40000 + id % 7 * 1000 : 8 + (i * 53u + id * 11u) % 2000;
    mine[i] = tslab_alloc(a, sizes[i], e);
    if (!mine[i]) {
      atomic_fetch_add(&bad, 1);
      return NULL;
    }
    stamp(mine[i], sizes[i]);
  }
  for (unsigned i = 0; i < PER_THREAD; i++) {
    if (i < HANDOFF) {
      box->p[i] = mine[i];
      box->size[i] = sizes[i];
    } else if (!stamped(mine[i], sizes[i]) || !tslab_free(a, mine[i])) {
      atomic_fetch_add(&bad, 1);
    }
  }
  return NULL;
}

static tslab_stats_global_t stats(void) {
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  return g;
}

/* Lanes of detached threads, each starting its successor and ending, as a
 * server's pool replaces its workers: exits must not queue behind one
 * another, or exiting threads pile up and each new thread takes a fresh
 * cache (found by review: every exit flushed its cache under one
 * process-wide mutex; 16 such lanes reached 931 threads alive and 931
 * caches, 284 MB resident for 32 MB live). The caches stay bounded by the
 * threads alive at once, a few per lane. */
enum { LANES = 16, LANE_GENERATIONS = 150, LANE_OBJECTS = 500 };

typedef struct {
  void* p[LANE_OBJECTS];
  int left;
} lane_t;

static atomic_int lanes_running;

static void* lane_worker(void* arg) {
  lane_t* l = arg;
  for (unsigned i = 0; i < LANE_OBJECTS; i++) {
    size_t size = 8 + (i * 37u) % 4000;
    if (l->p[i] && !tslab_free(a, l->p[i])) atomic_fetch_add(&bad, 1);
    if (!(l->p[i] = tslab_alloc(a, size, tslab_epoch_current(a)))) atomic_fetch_add(&bad, 1);
    else stamp(l->p[i], size);
  }
  if (--l->left > 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, lane_worker, l) == 0 && pthread_detach(t) == 0) return NULL;
    atomic_fetch_add(&bad, 1);
  }
  atomic_fetch_sub(&lanes_running, 1);
  return NULL;
}

static void test_detached_lanes(void) {
  a = tslab_create(NULL);
  REQUIRE(a != NULL);
  static lane_t lanes[LANES];
  atomic_store(&lanes_running, LANES);
  for (unsigned i = 0; i < LANES; i++) {
    lanes[i].left = LANE_GENERATIONS;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, lane_worker, &lanes[i]) == 0 && pthread_detach(t) == 0);
  }
  while (atomic_load(&lanes_running)) sched_yield();
  tslab_stats_global_t g = stats();
  printf("detached lanes: %u threads, %llu caches\n", LANES * LANE_GENERATIONS,
         (unsigned long long)g.thread_caches);
  CHECK(g.thread_caches <= 8 * LANES);
  CHECK_EQ_U(atomic_load(&bad), 0);
  for (unsigned i = 0; i < LANES; i++)
    for (unsigned k = 0; k < LANE_OBJECTS; k++) CHECK(tslab_free(a, lanes[i].p[k]));
  CHECK_EQ_U(stats().live_objects, 0);
  tslab_destroy(a); /* waits for the last exits' flushes */
  a = NULL;
}

int main(void) {
  test_detached_lanes();
  a = tslab_create(NULL);
  REQUIRE(a != NULL);
  /* Long-lived objects of the main thread, one per size, must survive. */
  void* keep[LONG_LIVED];
  for (unsigned i = 0; i < LONG_LIVED; i++) {
    keep[i] = tslab_alloc(a, 16 + i * 100, tslab_epoch_current(a));
    REQUIRE(keep[i] != NULL);
    stamp(keep[i], 16 + i * 100);
  }
  tslab_stats_global_t warm = {0};
  uint64_t peak_caches = 0, peak_resident = 0, peak_slabs = 0, peak_live = 0;
  for (unsigned base = 0; base < THREADS; base += WAVE) {
    pthread_t th[WAVE];
    for (unsigned i = 0; i < WAVE; i++)
      REQUIRE(pthread_create(&th[i], NULL, worker, (void*)(uintptr_t)(base + i)) == 0);
    for (unsigned i = 0; i < WAVE; i++) pthread_join(th[i], NULL);
    tslab_stats_global_t g = stats();
    if (g.thread_caches > peak_caches) peak_caches = g.thread_caches;
    if (g.live_objects > peak_live) peak_live = g.live_objects;
    if (base < 40 * WAVE) { /* warm-up: the highest values seen */
      if (g.slabs_in_use > warm.slabs_in_use) warm.slabs_in_use = g.slabs_in_use;
    } else {
      if (g.resident_estimate_bytes > peak_resident) peak_resident = g.resident_estimate_bytes;
      if (g.slabs_in_use > peak_slabs) peak_slabs = g.slabs_in_use;
    }
    if (base % 400 == 0)
      printf("threads %u: caches %llu, live %llu, slabs %llu, resident %llu KiB\n", base + WAVE,
             (unsigned long long)g.thread_caches, (unsigned long long)g.live_objects,
             (unsigned long long)g.slabs_in_use, (unsigned long long)g.resident_estimate_bytes >> 10);
  }
  CHECK_EQ_U(atomic_load(&bad), 0);

  /* The last wave's hand-offs are freed by the main thread. */
  for (unsigned l = 0; l < WAVE; l++)
    for (unsigned i = 0; i < HANDOFF; i++)
      if (boxes[l].p[i]) CHECK(tslab_free(a, boxes[l].p[i]));
  tslab_thread_flush(a);

  tslab_stats_global_t end = stats();
  /* One cache per concurrent thread plus the main thread's. */
  CHECK(peak_caches <= WAVE + 1);
  CHECK_EQ_U(end.threads_active, 1);
  CHECK_EQ_U(end.live_objects, LONG_LIVED);
  /* No growth with the number of threads. Contract 6 bounds slabs in use by
   * the live objects (each pins at most one slab) plus one cached slab per
   * (cache, class); how many caches exist depends on how the waves overlap
   * on a loaded machine, so the bound uses the peak seen. A leak of one slab
   * per thread would add about 2000; resident bytes get the same bound in
   * slabs of at most 64 KiB (the largest slab or span used here) plus the
   * empty-slab pool. */
  uint32_t classes_used = 0;
  for (uint32_t c = 0; c < tslab_class_count(a); c++) {
    tslab_stats_class_t sc;
    tslab_stats_class(a, c, &sc);
    classes_used += sc.allocations_total > 0;
  }
  uint64_t slab_bound = peak_live + peak_caches * classes_used;
  tslab_config_t defaults;
  tslab_config_init(&defaults);
  printf("caches peak %llu, classes %u; slabs in use: warm-up peak %llu, later peak %llu (bound %llu), "
         "%llu at the end\n",
         (unsigned long long)peak_caches, classes_used, (unsigned long long)warm.slabs_in_use,
         (unsigned long long)peak_slabs, (unsigned long long)slab_bound, (unsigned long long)end.slabs_in_use);
  CHECK(peak_slabs <= slab_bound);
  CHECK(peak_resident <= slab_bound * (64u << 10) + defaults.pool_resident_max);
  CHECK_CONSISTENT(a);

  /* Once the long-lived objects go, every slab can go: closing the epoch
   * releases what the abandoned caches still hold for it. */
  for (unsigned i = 0; i < LONG_LIVED; i++) {
    CHECK(stamped(keep[i], 16 + i * 100));
    CHECK(tslab_free(a, keep[i]));
  }
  tslab_epoch_t e = tslab_epoch_current(a);
  tslab_epoch_advance(a);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  end = stats();
  CHECK_EQ_U(end.live_objects, 0);
  CHECK_EQ_U(end.slabs_in_use, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
  TEST_DONE();
}
