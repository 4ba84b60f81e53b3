/* Contract lines 2 and 3: continuous recycling without epoch_close, and
 * deterministic reclamation at close, including slabs cached by a thread
 * that is blocked while the epoch is closed, except a bounded hot reserve
 * (which tslab_reserve_release empties on demand). Residency is read from
 * the kernel with mincore(2). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"
#include "internal.h" /* tslab_os_release_batches */
#include "test_util.h"

static size_t page;

static int page_order(const void* x, const void* y) {
  uintptr_t a = *(const uintptr_t*)x, b = *(const uintptr_t*)y;
  return (a > b) - (a < b);
}

/* Resident pages among those holding the given objects, each page counted
 * once whatever the objects' order (allocation hands the slot freed last
 * out first, so consecutive objects need not be in address order). */
static size_t resident_pages(void** objs, size_t n, size_t size) {
  size_t npages = 0;
  for (size_t i = 0; i < n; i++)
    npages += ((uintptr_t)objs[i] + size - 1) / page - (uintptr_t)objs[i] / page + 1;
  uintptr_t* pages = malloc(npages * sizeof *pages);
  REQUIRE(pages != NULL);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    for (uintptr_t pg = (uintptr_t)objs[i] & ~(page - 1); pg < (uintptr_t)objs[i] + size; pg += page) pages[k++] = pg;
  qsort(pages, k, sizeof *pages, page_order);
  size_t count = 0;
  for (size_t i = 0; i < k; i++) {
    if (i > 0 && pages[i] == pages[i - 1]) continue;
    unsigned char v = 0;
    REQUIRE(mincore((void*)pages[i], page, &v) == 0);
    count += v & 1;
  }
  free(pages);
  return count;
}

/* `reserve`: keep the default hot reserve, or none at all (then a close
 * releases every empty slab and block of its epoch, line 3 without the
 * reserve clause). */
static tslab_t* make(tslab_release_policy_t policy, bool reserve) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 32;
  c.release_policy = policy;
  if (!reserve) c.pool_resident_max = c.thread_reserve_max = 0;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

/* ---- an idle thread's cached slabs are released by another thread's close ---- */

enum { IDLE_OBJECTS = 40000, IDLE_SIZE = 128 };

struct idle {
  tslab_t* a;
  tslab_epoch_t e;
  void** objs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int allocated, release;
};

static void* idle_thread(void* arg) {
  struct idle* s = arg;
  for (int i = 0; i < IDLE_OBJECTS; i++) {
    s->objs[i] = tslab_alloc(s->a, IDLE_SIZE, s->e);
    REQUIRE(s->objs[i] != NULL);
    memset(s->objs[i], 0x77, IDLE_SIZE);
  }
  pthread_mutex_lock(&s->mu);
  s->allocated = 1;
  pthread_cond_broadcast(&s->cv);
  while (!s->release) pthread_cond_wait(&s->cv, &s->mu); /* blocked, owning its cache */
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void test_idle_thread_close(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, false);
  tslab_epoch_t keep = tslab_epoch_current(a);
  struct idle s = {.a = a, .e = tslab_epoch_advance(a)};
  s.objs = malloc(sizeof(void*) * IDLE_OBJECTS);
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, idle_thread, &s) == 0);
  pthread_mutex_lock(&s.mu);
  while (!s.allocated) pthread_cond_wait(&s.cv, &s.mu);
  pthread_mutex_unlock(&s.mu);

  size_t before = resident_pages(s.objs, IDLE_OBJECTS, IDLE_SIZE);
  CHECK(before >= (size_t)IDLE_OBJECTS * IDLE_SIZE / page);
  /* Thread A (this one) frees everything B allocated, then closes e while B
   * is still blocked with the slabs in its cache. */
  for (int i = 0; i < IDLE_OBJECTS; i++) CHECK(tslab_free(a, s.objs[i]));
  tslab_stats_epoch_t es;
  CHECK_EQ_U(tslab_stats_epoch(a, s.e, &es), TSLAB_OK);
  CHECK_EQ_U(es.live_objects, 0);
  CHECK_EQ_U(tslab_epoch_close(a, s.e), TSLAB_OK);
  size_t after = resident_pages(s.objs, IDLE_OBJECTS, IDLE_SIZE);
  CHECK_EQ_U(after, 0);
  CHECK_EQ_U(tslab_stats_epoch(a, s.e, &es), TSLAB_OK);
  CHECK(es.released_at_close_bytes >= (uint64_t)IDLE_OBJECTS * IDLE_SIZE);
  CHECK_EQ_U(es.slabs, 0);
  CHECK(es.state == TSLAB_EPOCH_CLOSING);

  /* B is still blocked; its memory is gone; another epoch still works. */
  void* p = tslab_alloc(a, 64, keep);
  CHECK(p != NULL);
  CHECK(tslab_free(a, p));
  CHECK_CONSISTENT(a);
  pthread_mutex_lock(&s.mu);
  s.release = 1;
  pthread_cond_broadcast(&s.cv);
  pthread_mutex_unlock(&s.mu);
  pthread_join(t, NULL);
  CHECK_CONSISTENT(a);
  free(s.objs);
  tslab_destroy(a);
}

/* ---- a slab of a closed epoch is released by the free that empties it ---- */

static void test_release_by_last_free(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, false);
  tslab_epoch_t e = tslab_epoch_advance(a);
  enum { N = 2000 };
  void* objs[N];
  for (int i = 0; i < N; i++) {
    objs[i] = tslab_alloc(a, 256, e);
    REQUIRE(objs[i] != NULL);
    memset(objs[i], 1, 256);
  }
  void* big = tslab_alloc(a, 300000, e);
  REQUIRE(big != NULL);
  memset(big, 1, 300000);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  /* Nothing was empty: everything stays resident and valid. */
  CHECK(resident_pages(objs, N, 256) >= (size_t)N * 256 / page);
  for (int i = 0; i < N; i++) CHECK(((unsigned char*)objs[i])[255] == 1);
  /* Free all but the last object of each slab: no page is released before
   * its slab is empty... */
  for (int i = 0; i < N; i++)
    if (i % 64 != 63) CHECK(tslab_free(a, objs[i]));
  /* ... and the free that empties a slab releases it at once. */
  for (int i = 63; i < N; i += 64) {
    CHECK(resident_pages(&objs[i], 1, 256) == 1);
    CHECK(tslab_free(a, objs[i]));
  }
  CHECK_EQ_U(resident_pages(objs, N, 256), 0);
  CHECK(tslab_free(a, big));
  CHECK_EQ_U(resident_pages(&big, 1, 300000), 0);
  tslab_stats_epoch_t es;
  CHECK_EQ_U(tslab_stats_epoch(a, e, &es), TSLAB_OK);
  CHECK_EQ_U(es.live_objects, 0);
  CHECK_EQ_U(es.slabs, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- an object that outlives its epoch pins a page, not its block ---- */

static void test_outliving_object_pins_a_page(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, true);
  tslab_epoch_t e = tslab_epoch_advance(a);
  tslab_stats_global_t g0;
  REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
  /* Ten blocks of 256-byte objects, all written; one object per block
   * (its first) outlives the epoch. */
  enum { N = 640, SIZE = 256, PER_BLOCK = 64 };
  static void* objs[N];
  for (int i = 0; i < N; i++) {
    REQUIRE((objs[i] = tslab_alloc(a, SIZE, e)) != NULL);
    memset(objs[i], i & 0xff, SIZE);
  }
  for (int i = 0; i < N; i++)
    if (i % PER_BLOCK) CHECK(tslab_free(a, objs[i]));
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  /* Only the pages of the ten live objects stay resident. */
  CHECK(resident_pages(objs, N, SIZE) <= N / PER_BLOCK);
  tslab_stats_epoch_t es;
  REQUIRE(tslab_stats_epoch(a, e, &es) == TSLAB_OK);
  CHECK_EQ_U(es.live_objects, N / PER_BLOCK);
  CHECK(es.released_at_close_bytes >= (uint64_t)(N / PER_BLOCK) * (PER_BLOCK * SIZE - page));
  tslab_stats_global_t g;
  REQUIRE(tslab_stats_global(a, &g) == TSLAB_OK);
  CHECK(g.release_calls_total > g0.release_calls_total);
  /* They are intact, and their frees give the blocks back. */
  for (int i = 0; i < N; i += PER_BLOCK) {
    unsigned char* p = objs[i];
    CHECK(p[0] == (i & 0xff) && p[SIZE - 1] == (i & 0xff));
    CHECK_EQ_U(tslab_usable_size(a, p), SIZE);
    CHECK(tslab_free(a, p));
  }
  REQUIRE(tslab_stats_epoch(a, e, &es) == TSLAB_OK);
  CHECK_EQ_U(es.live_objects, 0);
  CHECK_EQ_U(es.slabs, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- recycling without close; the eager policy ---- */

static void test_recycling(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, true);
  tslab_epoch_t e1 = tslab_epoch_current(a);
  tslab_epoch_t e2 = tslab_epoch_advance(a);
  enum { N = 20000 };
  static void* objs[N];
  tslab_stats_global_t g0, g1;
  /* Fill and empty slabs of e1 (never closed), then allocate in e2 and in
   * another class: the emptied slabs are reused. */
  for (int round = 0; round < 50; round++) {
    tslab_epoch_t e = round % 2 ? e2 : e1;
    size_t size = round % 3 ? 96 : 512;
    for (int i = 0; i < N; i++) REQUIRE((objs[i] = tslab_alloc(a, size, e)) != NULL);
    for (int i = 0; i < N; i++) CHECK(tslab_free(a, objs[i]));
    if (round == 0) tslab_stats_global(a, &g0);
  }
  tslab_stats_global(a, &g1);
  CHECK(g1.slabs_recycled_total > g0.slabs_recycled_total);
  /* Bounded: 49 more rounds did not take more address space than the peak. */
  CHECK(g1.committed_bytes <= g0.committed_bytes + ((size_t)N * 512) + ((size_t)8 << 20));
  CHECK_EQ_U(g1.live_objects, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);

  /* Eager: a slab is released the moment it empties, no close needed. */
  a = make(TSLAB_RELEASE_EAGER, true);
  tslab_epoch_t e = tslab_epoch_current(a);
  for (int i = 0; i < N; i++) REQUIRE((objs[i] = tslab_alloc(a, 200, e)) != NULL);
  for (int i = 0; i < N; i++) memset(objs[i], 3, 200);
  for (int i = 0; i < N; i++) CHECK(tslab_free(a, objs[i]));
  /* Only the bin's current slab may stay cached. */
  CHECK(resident_pages(objs, N, 200) <= 16384 / page);
  tslab_stats_global(a, &g1);
  CHECK(g1.release_calls_total > 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- the phase burst of DESIGN.md 5: 64 MiB allocated and freed, then close ---- */

static void test_phase_burst(void) {
  /* Default configuration: at most 4 MiB held once the close returned. */
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_advance(a);
  enum { N = (64 << 20) / 128 };
  void** objs = malloc(sizeof(void*) * N);
  for (int i = 0; i < N; i++) {
    objs[i] = tslab_alloc(a, 128, e);
    REQUIRE(objs[i] != NULL);
    memset(objs[i], 9, 128);
  }
  for (int i = 0; i < N; i++) CHECK(tslab_free(a, objs[i]));
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  size_t held = resident_pages(objs, N, 128) * page;
  CHECK(held <= ((size_t)4 << 20));
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK(g.resident_estimate_bytes <= ((uint64_t)4 << 20));
  CHECK(g.reserve_bytes <= ((uint64_t)4 << 20));
  CHECK_EQ_U(g.decay_bytes, 0); /* the close released what decay kept while the phase ran */
  /* The reserve goes on demand. */
  CHECK(tslab_reserve_release(a) > 0 || g.reserve_bytes == 0);
  CHECK_EQ_U(resident_pages(objs, N, 128), 0);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.reserve_bytes, 0);
  free(objs);
  tslab_destroy(a);
}

/* ---- decay: an open epoch's freed batch stays resident for its next one ---- */

enum { DECAY_N = 4096, DECAY_SIZE = 128 }; /* 512 KiB of objects: 32 one-granule slabs */

static tslab_t* make_decay(size_t pool, size_t decay, uint32_t ms) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 32;
  c.block_budget = 0; /* class slabs only: each empties on its own */
  c.pool_resident_max = pool;
  c.pool_decay_max = decay;
  c.pool_decay_ms = ms;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

static void fill(tslab_t* a, tslab_epoch_t e, void** objs, size_t n, size_t size) {
  for (size_t i = 0; i < n; i++) {
    objs[i] = tslab_alloc(a, size, e);
    REQUIRE(objs[i] != NULL);
    memset(objs[i], 5, size);
  }
}

static void empty_all(tslab_t* a, void** objs, size_t n) {
  for (size_t i = 0; i < n; i++) CHECK(tslab_free(a, objs[i]));
}

static void test_decay(void) {
  static void* objs[DECAY_N];
  const size_t pool = 64 << 10, batch = (size_t)DECAY_N * DECAY_SIZE;
  tslab_stats_global_t g0, g1;

  /* Within pool_decay_max: nothing is released while the era is open, the
   * next batch reuses the same resident slabs, the close releases them. */
  tslab_t* a = make_decay(pool, 1 << 20, 3600 * 1000);
  tslab_epoch_t e = tslab_epoch_advance(a);
  fill(a, e, objs, DECAY_N, DECAY_SIZE);
  tslab_stats_global(a, &g0);
  empty_all(a, objs, DECAY_N);
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.release_calls_total, g0.release_calls_total);
  CHECK(g1.reserve_bytes <= pool);
  CHECK(g1.decay_bytes >= batch - pool - 2 * 16384);
  CHECK(g1.decay_bytes <= ((uint64_t)1 << 20));
  /* Every retire withdrew its announcement (the decay handshake, D1). */
  CHECK_EQ_U(atomic_load(&a->heap.decay_pending[e & a->ring_mask]), 0);
  CHECK(resident_pages(objs, DECAY_N, DECAY_SIZE) * page >= batch - 16384);
  CHECK_CONSISTENT(a);
  fill(a, e, objs, DECAY_N, DECAY_SIZE);
  tslab_stats_global(a, &g0);
  CHECK_EQ_U(g0.release_calls_total, g1.release_calls_total);
  CHECK(g0.slabs_recycled_total >= g1.slabs_recycled_total + 30);
  CHECK_EQ_U(g0.committed_bytes, g1.committed_bytes);
  empty_all(a, objs, DECAY_N);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.decay_bytes, 0);
  CHECK(g1.reserve_bytes <= pool);
  CHECK(resident_pages(objs, DECAY_N, DECAY_SIZE) * page <= pool);
  tslab_stats_epoch_t es;
  CHECK_EQ_U(tslab_stats_epoch(a, e, &es), TSLAB_OK);
  CHECK(es.released_at_close_bytes >= batch - pool - 2 * 16384);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);

  /* Bounded by pool_decay_max: beyond it, the frees release at once. */
  a = make_decay(pool, 128 << 10, 3600 * 1000);
  e = tslab_epoch_current(a);
  fill(a, e, objs, DECAY_N, DECAY_SIZE);
  tslab_stats_global(a, &g0);
  empty_all(a, objs, DECAY_N);
  tslab_stats_global(a, &g1);
  CHECK(g1.decay_bytes <= (128 << 10));
  CHECK(g1.release_calls_total > g0.release_calls_total);
  /* tslab_reserve_release gives back what decay kept, too. */
  CHECK(tslab_reserve_release(a) >= g1.reserve_bytes + g1.decay_bytes);
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.decay_bytes + g1.reserve_bytes, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);

  /* Aged out: in an era that never closes (era 1), what decay kept is
   * released by the pool's next retire once pool_decay_ms has passed (on a
   * slow machine some of it already while the batch is freed: that only
   * releases more, and a released run may then hold the second batch). */
  a = make_decay(pool, 1 << 20, 1);
  e = tslab_epoch_current(a);
  fill(a, e, objs, DECAY_N, DECAY_SIZE);
  empty_all(a, objs, DECAY_N);
  usleep(50 * 1000);
  void* other[64];
  fill(a, e, other, 64, 2048); /* two four-granule slabs: one current, one retired */
  empty_all(a, other, 64);
  tslab_stats_global(a, &g1);
  CHECK(g1.decay_bytes <= (64 << 10));
  /* Resident: the two classes' current slabs and at most the pool's bound;
   * the first batch's 512 KiB are gone, also as the kernel sees it (but for
   * pages the second batch took over). */
  CHECK(g1.resident_estimate_bytes <= 16384 + (64 << 10) + pool);
  static void* mine[DECAY_N];
  size_t nmine = 0;
  for (size_t i = 0; i < DECAY_N; i++) {
    uintptr_t pg = (uintptr_t)objs[i] & ~(page - 1);
    bool theirs = false;
    for (size_t k = 0; k < 64 && !theirs; k++)
      theirs = pg + page > (uintptr_t)other[k] && pg < (uintptr_t)other[k] + 2048;
    if (!theirs) mine[nmine++] = (void*)pg;
  }
  CHECK(resident_pages(mine, nmine, 1) * page <= pool);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);

  /* No bound (SIZE_MAX): kept, not wrapped round to no decay at all. */
  a = make_decay(pool, SIZE_MAX, 3600 * 1000);
  e = tslab_epoch_current(a);
  fill(a, e, objs, DECAY_N, DECAY_SIZE);
  tslab_stats_global(a, &g0);
  empty_all(a, objs, DECAY_N);
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.release_calls_total, g0.release_calls_total);
  CHECK(g1.decay_bytes >= batch - pool - 2 * 16384);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);

  /* Off: the pool keeps pool_resident_max and no more, and tags nothing
   * (a close would look for tagged runs under the heap mutex). */
  a = make_decay(pool, 0, 1000);
  e = tslab_epoch_current(a);
  fill(a, e, objs, DECAY_N, DECAY_SIZE);
  empty_all(a, objs, DECAY_N);
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.decay_bytes, 0);
  CHECK_EQ_U(atomic_load(&a->heap.decay_bytes[e & a->ring_mask]), 0);
  CHECK(resident_pages(objs, DECAY_N, DECAY_SIZE) * page <= pool + 16384);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A close racing with the owner's frees: whatever decay kept for the era is
 * released by the close, or was never kept (docs/ARCHITECTURE.md 5). */
struct decay_race {
  tslab_t* a;
  tslab_epoch_t e;
  atomic_int started;
};

static void* decay_racer(void* arg) {
  struct decay_race* r = arg;
  static void* objs[DECAY_N];
  for (int round = 0;; round++) {
    size_t n = 0;
    for (; n < DECAY_N; n++) {
      objs[n] = tslab_alloc(r->a, DECAY_SIZE, r->e);
      if (!objs[n]) break;
    }
    if (round == 0) atomic_store(&r->started, 1);
    empty_all(r->a, objs, n);
    if (n < DECAY_N) return NULL; /* closed */
  }
}

static void test_decay_close_race(void) {
  for (int i = 0; i < 20; i++) {
    tslab_t* a = make_decay(64 << 10, 4 << 20, 3600 * 1000);
    struct decay_race r = {a, tslab_epoch_advance(a), 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, decay_racer, &r) == 0);
    while (!atomic_load(&r.started)) sched_yield();
    usleep((useconds_t)(i * 150));
    CHECK_EQ_U(tslab_epoch_close(a, r.e), TSLAB_OK);
    pthread_join(t, NULL);
    tslab_stats_global_t g;
    tslab_stats_global(a, &g);
    CHECK_EQ_U(g.decay_bytes, 0);
    CHECK_EQ_U(g.live_objects, 0);
    CHECK_CONSISTENT(a);
    tslab_destroy(a);
  }
}

/* A pool at its bound lets its oldest runs go an eighth of the bound at a
 * time, so a stream of retires beyond it makes a system call every few
 * retires, not one each: 2 MiB of one-granule slabs emptied in an open era
 * against a bound of 576 KiB retire 92 slabs beyond it. */
static void test_decay_batches(void) {
  enum { N = 4 * DECAY_N, SLABS = N * DECAY_SIZE / 16384 };
  static void* objs[N];
  const size_t pool = 64 << 10, decay = 512 << 10;
  tslab_t* a = make_decay(pool, decay, 3600 * 1000);
  tslab_epoch_t e = tslab_epoch_current(a);
  fill(a, e, objs, N, DECAY_SIZE);
  tslab_stats_global_t g0, g1;
  tslab_stats_global(a, &g0);
  empty_all(a, objs, N);
  tslab_stats_global(a, &g1);
  uint64_t calls = g1.release_calls_total - g0.release_calls_total;
  size_t beyond = SLABS - (pool + decay) / 16384;
  printf("%d slabs emptied, %zu beyond the pool's bound: %llu release calls\n", SLABS, beyond,
         (unsigned long long)calls);
  CHECK(calls >= 1);
  /* Where the kernel takes no batch, a retire beyond the bound lets one run
   * go (contiguous ones would share a call, scattered ones not). */
  if (tslab_os_release_batches())
    CHECK(calls * 3 <= beyond);
  else
    CHECK(calls <= beyond);
  CHECK(g1.reserve_bytes + g1.decay_bytes <= pool + decay);
  CHECK(g1.decay_bytes >= decay / 2);
  CHECK_CONSISTENT(a);
  /* Where the kernel takes no batch, the pool goes back to its bound only:
   * a retire beyond it lets one run go (an eighth at once would be a call
   * per scattered run inside one free). */
  fill(a, e, objs, N, DECAY_SIZE);
  tslab_stats_global(a, &g0);
  tslab_fault_inject(TSLAB_FAULT_BATCH, 0, UINT64_MAX);
  empty_all(a, objs, N);
  tslab_fault_clear();
  tslab_stats_global(a, &g1);
  calls = g1.release_calls_total - g0.release_calls_total;
  printf("the same without batching: %llu release calls\n", (unsigned long long)calls);
  CHECK(calls * 2 >= SLABS - (pool + decay) / 16384);
  CHECK(g1.reserve_bytes + g1.decay_bytes <= pool + decay);
  tslab_destroy(a);
}

/* A span freed while its era is open stays resident as an empty slab does
 * (decay), serves the era's next span, and goes to the OS at the close. */
static void test_span_decays(void) {
  const size_t size = 100 << 10;
  tslab_t* a = make_decay(0, 1 << 20, 3600 * 1000);
  tslab_epoch_t e = tslab_epoch_advance(a);
  tslab_stats_global_t g0, g1;
  void* p = tslab_alloc(a, size, e);
  REQUIRE(p != NULL);
  memset(p, 7, size);
  tslab_stats_global(a, &g0);
  CHECK(tslab_free(a, p));
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.release_calls_total, g0.release_calls_total);
  CHECK(g1.decay_bytes >= size);
  CHECK(resident_pages(&p, 1, size) * page >= size);
  void* q = tslab_alloc(a, size, e);
  REQUIRE(q != NULL);
  CHECK(q == p); /* the pooled run, resident */
  CHECK(tslab_free(a, q));
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.decay_bytes, 0);
  CHECK(g1.release_calls_total > g0.release_calls_total);
  CHECK(resident_pages(&p, 1, size) == 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- a large span is not faulted in ahead ---- */

static void test_large_span_lazy(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_current(a);
  const size_t big = (size_t)64 << 20;
  void* p = tslab_alloc(a, big, e);
  REQUIRE(p != NULL);
  /* Untouched: (almost) nothing resident; calloc writes nothing either. */
  CHECK(resident_pages(&p, 1, big) * page <= ((size_t)1 << 20));
  void* q = tslab_calloc(a, 1, big, e);
  REQUIRE(q != NULL);
  CHECK(resident_pages(&q, 1, big) * page <= ((size_t)1 << 20));
  CHECK(((unsigned char*)q)[0] == 0 && ((unsigned char*)q)[big / 2] == 0 && ((unsigned char*)q)[big - 1] == 0);
  /* What the program touches is what becomes resident. */
  memset(p, 1, (size_t)4 << 20);
  CHECK(resident_pages(&p, 1, big) * page >= ((size_t)4 << 20));
  CHECK(tslab_free(a, p));
  CHECK(tslab_free(a, q));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- a small program's first runs are not faulted in ahead ---- */

/* The heap faults new runs in ahead in batches, but not the first 256 KiB
 * of its range: a program that allocates one object of a class with a
 * 64 KiB slab gets the pages it touches resident, not the whole slab; a
 * run that crosses the mark is faulted in from the mark on. Where
 * transparent huge pages are on for every mapping, the kernel may back the
 * range with a huge page on the first touch, and the check does not apply. */
static void test_small_heap_lazy(void) {
  FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char mode[128] = "";
  if (f) {
    if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
    fclose(f);
  }
  if (strstr(mode, "[always]")) return;
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);
  enum { SIZE = 6000, SLAB = 4 * 16384 }; /* the 6 KiB class: 10 objects in 4 granules */
  void* p = tslab_alloc(a, SIZE, tslab_epoch_current(a));
  REQUIRE(p != NULL);
  CHECK(((uintptr_t)p & (16384 - 1)) == 0);
  memset(p, 1, SIZE);
  CHECK(resident_pages(&p, 1, SLAB) * page <= SIZE + page);
  /* A slab that crosses the 256 KiB mark (the 30 KiB class: 16 granules)
   * is faulted in ahead from the mark on only: what is below it is what
   * the program touched. */
  enum { BIG = 30000, BIG_SLAB = 16 * 16384 };
  void* q = tslab_alloc(a, BIG, tslab_epoch_current(a));
  REQUIRE(q != NULL);
  CHECK(((uintptr_t)q & (16384 - 1)) == 0);
  memset(q, 2, BIG);
  CHECK(resident_pages(&q, 1, BIG_SLAB) * page <= BIG + page + ((size_t)64 << 10));
  /* Past the mark, a slab longer than a fault-ahead batch (the 17 KiB
   * class: 16 granules) is faulted in only as it is touched. */
  enum { HUGE = 17000, HUGE_SLAB = 16 * 16384 };
  void* r = tslab_alloc(a, HUGE, tslab_epoch_current(a));
  REQUIRE(r != NULL);
  CHECK((uintptr_t)r - (uintptr_t)p >= BIG_SLAB);
  memset(r, 3, HUGE);
  CHECK(resident_pages(&r, 1, HUGE_SLAB) * page <= HUGE + page);
  CHECK(tslab_free(a, r));
  CHECK(tslab_free(a, q));
  CHECK(tslab_free(a, p));
  tslab_destroy(a);
}

/* ---- the pool's memory is reused before released memory, by any length ---- */

/* A run the pool holds serves a shorter request: its front is reused (no
 * page fault, no growth) and its rest stays pooled with its decay tag.
 * Slabs of the 2 KiB class take 4 granules (32 objects), a 48 KiB span 3,
 * a slab of the 128 B class 1. */
enum { REUSE_SLAB_OBJECTS = 32, REUSE_OBJ = 2048, REUSE_SLAB = 4 * 16384, REUSE_SPAN = 3 * 16384 };

/* In era e: fill a slab of the 2 KiB class and the next slab's first
 * object (objs[REUSE_SLAB_OBJECTS]), empty the full one (it retires to the
 * pool, tagged), then allocate a span that takes the pooled slab's front.
 * Returns the slab's start; *span gets the span. */
static uint8_t* pool_and_split(tslab_t* a, tslab_epoch_t e, void** objs, void** span) {
  fill(a, e, objs, REUSE_SLAB_OBJECTS + 1, REUSE_OBJ);
  uint8_t* slab = objs[0];
  CHECK(((uintptr_t)slab & (16384 - 1)) == 0);
  empty_all(a, objs, REUSE_SLAB_OBJECTS);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.decay_bytes, REUSE_SLAB);
  *span = tslab_alloc(a, REUSE_SPAN, e);
  REQUIRE(*span != NULL);
  CHECK(*span == (void*)slab); /* the pooled slab's front, not new memory */
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.decay_bytes, REUSE_SLAB - REUSE_SPAN); /* the rest, still tagged */
  CHECK_CONSISTENT(a);
  return slab;
}

/* Free what pool_and_split left live and close e: nothing of it stays in
 * the pool (no untagged reserve), decay's runs included. */
static void free_and_close(tslab_t* a, tslab_epoch_t e, void** objs, void* span) {
  CHECK(tslab_free(a, span));
  CHECK(tslab_free(a, objs[REUSE_SLAB_OBJECTS]));
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.decay_bytes, 0);
  CHECK_EQ_U(g.reserve_bytes, 0);
  CHECK_CONSISTENT(a);
}

static void test_pool_reuse_by_length(void) {
  /* No untagged reserve: what an active era's retire keeps is decay's. */
  tslab_t* a = make_decay(0, (size_t)8 << 20, 3600 * 1000);
  void* objs[REUSE_SLAB_OBJECTS + 1];
  void* span;
  tslab_stats_global_t g0, g1;
  tslab_epoch_t e = tslab_epoch_advance(a);
  uint8_t* slab = pool_and_split(a, e, objs, &span);
  memset(span, 5, REUSE_SPAN);
  tslab_stats_global(a, &g0);
  CHECK_EQ_U(g0.release_calls_total, 0);
  /* The rest serves the next run of its length: a slab of 128 B objects. */
  void* small = tslab_alloc(a, 128, e);
  REQUIRE(small != NULL);
  CHECK(small == (void*)(slab + REUSE_SPAN));
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.decay_bytes, 0);
  CHECK_EQ_U(g1.committed_bytes, g0.committed_bytes);
  CHECK_EQ_U(g1.release_calls_total, 0);
  CHECK(tslab_free(a, small));
  free_and_close(a, e, objs, span);

  /* A rest still pooled when its era closes goes with the era's other
   * decay: the close releases it (contract line 3). */
  e = tslab_epoch_advance(a);
  slab = pool_and_split(a, e, objs, &span);
  void* rest = slab + REUSE_SPAN;
  CHECK(resident_pages(&rest, 1, 16384) * page == 16384); /* written by fill */
  free_and_close(a, e, objs, span);
  CHECK_EQ_U(resident_pages(&rest, 1, 16384), 0);
  tslab_destroy(a);
}

/* ---- the hot reserve: bounded after any sequence, emptied on demand ---- */

enum { RESERVE_THREADS = 4, RESERVE_EPOCHS = 300 };

/* Epochs of every size, closed normally or by free-all, objects freed by
 * their thread or by the next one: whatever the sequence, the empty memory
 * kept resident stays within pool_resident_max + caches x thread_reserve_max. */
struct reserve_worker {
  tslab_t* a;
  unsigned id;
  void* _Atomic* handoff;
};

static void* reserve_worker(void* arg) {
  struct reserve_worker* w = arg;
  uint64_t rng = 0x9e3779b97f4a7c15ull * (w->id + 1);
  for (int r = 0; r < RESERVE_EPOCHS; r++) {
    tslab_epoch_t e = tslab_epoch_advance(w->a);
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    size_t n = 1 + rng % 3000, size = 16 + (rng >> 20) % 2000;
    void* objs[3000];
    for (size_t i = 0; i < n; i++) {
      objs[i] = tslab_alloc(w->a, size, e);
      CHECK(objs[i] != NULL);
      if (objs[i]) memset(objs[i], (int)i, size);
    }
    if (rng % 5 == 0) {
      CHECK_EQ_U(tslab_epoch_free_all(w->a, e), TSLAB_OK);
      continue;
    }
    /* One object goes to the neighbour, who frees it later. */
    void* theirs = atomic_exchange(&w->handoff[(w->id + 1) % RESERVE_THREADS], objs[n - 1]);
    if (theirs) CHECK(tslab_free(w->a, theirs));
    for (size_t i = 0; i + 1 < n; i++) CHECK(tslab_free(w->a, objs[i]));
    CHECK_EQ_U(tslab_epoch_close(w->a, e), TSLAB_OK);
  }
  return NULL;
}

static void test_reserve_bound(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, true);
  tslab_config_t c;
  tslab_config_init(&c);
  void* _Atomic handoff[RESERVE_THREADS];
  for (unsigned i = 0; i < RESERVE_THREADS; i++) atomic_init(&handoff[i], NULL);
  struct reserve_worker w[RESERVE_THREADS];
  pthread_t t[RESERVE_THREADS];
  for (unsigned i = 0; i < RESERVE_THREADS; i++) {
    w[i] = (struct reserve_worker){a, i, handoff};
    REQUIRE(pthread_create(&t[i], NULL, reserve_worker, &w[i]) == 0);
  }
  for (unsigned i = 0; i < RESERVE_THREADS; i++) pthread_join(t[i], NULL);
  for (unsigned i = 0; i < RESERVE_THREADS; i++) {
    void* p = atomic_exchange(&handoff[i], NULL);
    if (p) CHECK(tslab_free(a, p));
  }
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  uint64_t bound = c.pool_resident_max + g.thread_caches * c.thread_reserve_max;
  printf("reserve after %d epochs on %d threads: %.2f MiB (bound %.2f MiB)\n", RESERVE_EPOCHS, RESERVE_THREADS,
         g.reserve_bytes / 1048576.0, bound / 1048576.0);
  CHECK(g.reserve_bytes <= bound);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_CONSISTENT(a);
  tslab_reserve_release(a);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.reserve_bytes, 0);
  /* Nothing is live and nothing is kept: every granule handed out is
   * released (the metadata region is separate). */
  CHECK_EQ_U(g.resident_estimate_bytes, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- small and large blocks (docs/ARCHITECTURE.md 3.4) ---- */

enum { FRAG_ERAS_MAX = 200, FRAG_OBJ = 4000, FRAG_SPANS_MAX = 64 };

/* A heap whose free memory is single granules: eras of one small block each,
 * side by side, every other one keeping an object (the drained ones leave
 * single granules), the reserve released, and long-lived spans taking every
 * longer free run. */
struct fragments {
  int eras;
  void* kept[FRAG_ERAS_MAX];
  void* spans[FRAG_SPANS_MAX];
  size_t n_spans;
};

static void fragment(tslab_t* a, struct fragments* f, int eras) {
  REQUIRE(eras <= FRAG_ERAS_MAX);
  f->eras = eras;
  tslab_epoch_t era[FRAG_ERAS_MAX];
  for (int i = 0; i < eras; i++) {
    era[i] = tslab_epoch_advance(a);
    REQUIRE((f->kept[i] = tslab_alloc(a, FRAG_OBJ, era[i])) != NULL);
  }
  for (int i = 0; i < eras; i++) {
    if (i % 2) {
      CHECK(tslab_free(a, f->kept[i]));
      f->kept[i] = NULL;
    }
    CHECK_EQ_U(tslab_epoch_close(a, era[i]), TSLAB_OK);
  }
  tslab_reserve_release(a);
  f->n_spans = 0;
  for (size_t size = (size_t)1 << 20; size >= 65536 && f->n_spans < FRAG_SPANS_MAX; size /= 2)
    while (f->n_spans < FRAG_SPANS_MAX && (f->spans[f->n_spans] = tslab_alloc(a, size, 1)) != NULL) f->n_spans++;
}

static void unfragment(tslab_t* a, struct fragments* f) {
  for (size_t i = 0; i < f->n_spans; i++) CHECK(tslab_free(a, f->spans[i]));
  for (int i = 0; i < f->eras; i++)
    if (f->kept[i]) CHECK(tslab_free(a, f->kept[i]));
  CHECK_CONSISTENT(a);
}

static tslab_t* make_small(size_t reserve, bool keep) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = reserve;
  c.max_alloc_size = (size_t)2 << 20;
  c.epoch_ring_size = 256;
  if (!keep) c.thread_reserve_max = c.pool_resident_max = c.pool_decay_max = 0;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

/* An era past 64 KiB asks for large blocks (four granules in a row); a heap
 * left with single free granules still serves it, with small ones. */
static void test_large_block_falls_back(void) {
  tslab_t* a = make_small((size_t)4 << 20, false);
  static struct fragments f;
  fragment(a, &f, 100);
  /* An era bumps 4 KiB objects: four per small block, one granule each. */
  tslab_epoch_t e = tslab_epoch_advance(a);
  size_t n = 0;
  while (tslab_alloc(a, FRAG_OBJ, e)) n++;
  printf("large blocks falling back: %zu objects of %d B in single granules\n", n, FRAG_OBJ);
  CHECK(n >= 4 * (100 / 2) * 3 / 4); /* most of the freed granules, far past 64 KiB */
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  unfragment(a, &f);
  tslab_destroy(a);
}

/* The same heap with the default reserve and pool: an era past 64 KiB that
 * cannot have a large block takes small ones from them without making the
 * heap release its pool first, so eras of the same size make no system
 * call once the pool holds what they drain. */
static void test_large_block_keeps_pool(void) {
  tslab_t* a = make_small((size_t)8 << 20, true);
  static struct fragments f;
  fragment(a, &f, 200);
  enum { ROUND = 128 };
  void* objs[ROUND];
  uint64_t calls[4];
  for (int round = 0; round < 4; round++) {
    tslab_stats_global_t g0, g1;
    REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
    tslab_epoch_t e = tslab_epoch_advance(a);
    for (size_t i = 0; i < ROUND; i++) REQUIRE((objs[i] = tslab_alloc(a, FRAG_OBJ, e)) != NULL);
    for (size_t i = 0; i < ROUND; i++) CHECK(tslab_free(a, objs[i]));
    CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
    REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
    calls[round] = g1.release_calls_total - g0.release_calls_total;
  }
  printf("eras of %d objects in single granules: release calls %llu, %llu, %llu, %llu\n", ROUND,
         (unsigned long long)calls[0], (unsigned long long)calls[1], (unsigned long long)calls[2],
         (unsigned long long)calls[3]);
  for (int round = 1; round < 4; round++) CHECK_EQ_U(calls[round], 0);
  unfragment(a, &f);
  tslab_destroy(a);
}

/* A thread's reserve keeps drained blocks of either length up to its bound:
 * four small ones in 64 KiB, reused by the next era; after an era of large
 * blocks, no more than the bound. */
static void test_reserve_block_lengths(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 32;
  c.thread_reserve_max = (size_t)64 << 10;
  c.pool_resident_max = 0;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  enum { SIZE = 1000, SMALL_ERA = 60, BIG_ERA = 400 }; /* 16 objects per small block */
  void* objs[BIG_ERA];
  tslab_stats_global_t g0, g1, g2;
  for (int round = 0; round < 3; round++) {
    size_t n = round == 1 ? BIG_ERA : SMALL_ERA;
    REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
    tslab_epoch_t e = tslab_epoch_advance(a);
    for (size_t i = 0; i < n; i++) REQUIRE((objs[i] = tslab_alloc(a, SIZE, e)) != NULL);
    REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
    for (size_t i = 0; i < n; i++) CHECK(tslab_free(a, objs[i]));
    CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
    REQUIRE(tslab_stats_global(a, &g2) == TSLAB_OK);
    uint64_t taken = g1.blocks_created_total + g1.blocks_reused_total - g0.blocks_created_total - g0.blocks_reused_total;
    printf("reserve of 64 KiB, era of %zu objects: %llu blocks (%llu from the reserve), reserve %llu KiB after\n", n,
           (unsigned long long)taken, (unsigned long long)(g1.blocks_reused_total - g0.blocks_reused_total),
           (unsigned long long)(g2.reserve_bytes >> 10));
    CHECK(g2.reserve_bytes <= c.thread_reserve_max);
    if (round == 0) {
      CHECK_EQ_U(taken, 4);
      CHECK_EQ_U(g2.reserve_bytes, (uint64_t)64 << 10); /* all four kept */
    } else if (round == 2) {
      /* The big era left a large block (or several small ones) in the
       * reserve: the next era bumps through the reserve first. */
      CHECK(g1.blocks_reused_total > g0.blocks_reused_total);
    }
    CHECK_CONSISTENT(a);
  }
  /* The hot slot emptied by a take, the spares left: a large block that
   * drains then does not fit beside them. Era x bumps four small blocks
   * (16 objects each) and a full large one (65), then starts another; the
   * small ones drain into the reserve (hot and three spares), era y takes
   * the hot one, and the large one drains. */
  enum { PER_SMALL = 16, PER_LARGE = 65, X_OBJS = 4 * PER_SMALL + PER_LARGE + 1 };
  tslab_epoch_t x = tslab_epoch_advance(a);
  for (size_t i = 0; i < X_OBJS; i++) REQUIRE((objs[i] = tslab_alloc(a, SIZE, x)) != NULL);
  for (size_t i = 0; i < 4 * PER_SMALL; i++) CHECK(tslab_free(a, objs[i]));
  REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
  CHECK_EQ_U(g0.reserve_bytes, (uint64_t)64 << 10);
  tslab_epoch_t y = tslab_epoch_advance(a);
  void* in_y = tslab_alloc(a, SIZE, y);
  REQUIRE(in_y != NULL);
  for (size_t i = 4 * PER_SMALL; i + 1 < X_OBJS; i++) CHECK(tslab_free(a, objs[i]));
  REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
  CHECK(g1.reserve_bytes <= c.thread_reserve_max);
  CHECK_CONSISTENT(a);
  CHECK(tslab_free(a, objs[X_OBJS - 1]));
  CHECK(tslab_free(a, in_y));
  CHECK_EQ_U(tslab_epoch_close(a, x), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_close(a, y), TSLAB_OK);
  CHECK_CONSISTENT(a);
  /* The other order: the large block drains first, into the empty hot slot
   * (the bound's whole 64 KiB), then the small ones find no room beside it. */
  tslab_reserve_release(a);
  x = tslab_epoch_advance(a);
  for (size_t i = 0; i < X_OBJS; i++) REQUIRE((objs[i] = tslab_alloc(a, SIZE, x)) != NULL);
  for (size_t i = 4 * PER_SMALL; i + 1 < X_OBJS; i++) CHECK(tslab_free(a, objs[i]));
  for (size_t i = 0; i < 4 * PER_SMALL; i++) CHECK(tslab_free(a, objs[i]));
  REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
  CHECK_EQ_U(g1.reserve_bytes, (uint64_t)64 << 10);
  CHECK_CONSISTENT(a);
  CHECK(tslab_free(a, objs[X_OBJS - 1]));
  CHECK_EQ_U(tslab_epoch_close(a, x), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- the opener's block: the advance readies its cache for the new era ---- */

/* The instance's global statistics now. */
static tslab_stats_global_t global_stats(tslab_t* a) {
  tslab_stats_global_t g;
  REQUIRE(tslab_stats_global(a, &g) == TSLAB_OK);
  return g;
}

/* One object of `size` in an era of its own, freed, the era closed: its
 * block drains into the calling thread's reserve. */
static void drain_one_era(tslab_t* a, size_t size) {
  tslab_epoch_t own = tslab_epoch_advance(a);
  void* p = tslab_alloc(a, size, own);
  REQUIRE(p != NULL);
  CHECK(tslab_free(a, p));
  CHECK_EQ_U(tslab_epoch_close(a, own), TSLAB_OK);
}

enum { SMALL_BLOCK = 16384 }; /* a small block: one granule (docs/ARCHITECTURE.md 3.4) */

struct other_alloc {
  tslab_t* a;
  tslab_epoch_t e;
};

static void* alloc_and_free_in(void* arg) {
  struct other_alloc* o = arg;
  void* p = tslab_alloc(o->a, 64, o->e);
  REQUIRE(p != NULL);
  memset(p, 0x5a, 64);
  CHECK(tslab_free(o->a, p));
  tslab_thread_flush(o->a);
  return NULL;
}

/* An advance by a thread whose reserve holds a drained block makes that
 * block the new era's first one (docs/ARCHITECTURE.md 7.1): taken and
 * formatted at the advance, before any allocation, so the era's first
 * allocation bumps at its start. The block's last use stays dead: a free of
 * its old pointer and its old handle fail. An era its opener never uses,
 * or only another thread uses, gives the block back to the opener's reserve
 * at its close, and a free-all of an unused era too. */
static void test_open_readies_block(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, true);
  tslab_stats_global_t g0, g1, g2;
  tslab_handle_t h;
  tslab_epoch_t e1 = tslab_epoch_advance(a);
  void* first = tslab_alloc_handle(a, 48, e1, &h);
  REQUIRE(first != NULL);
  void* more[20];
  for (int i = 0; i < 20; i++) REQUIRE((more[i] = tslab_alloc(a, 100, e1)) != NULL);
  CHECK(tslab_free(a, first));
  for (int i = 0; i < 20; i++) CHECK(tslab_free(a, more[i]));
  CHECK_EQ_U(tslab_epoch_close(a, e1), TSLAB_OK);
  REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
  CHECK(g0.reserve_bytes >= SMALL_BLOCK);
  CHECK_EQ_U(g0.blocks_in_use, 0);

  tslab_epoch_t e2 = tslab_epoch_advance(a);
  REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
  CHECK_EQ_U(g1.blocks_reused_total, g0.blocks_reused_total + 1);
  CHECK_EQ_U(g1.blocks_in_use, 1);
  CHECK_EQ_U(g1.reserve_bytes, g0.reserve_bytes - SMALL_BLOCK);
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK(!tslab_free(a, first));
  CHECK(!tslab_free_handle(a, h));
  void* p = tslab_alloc(a, 48, e2);
  CHECK(p == first);
  CHECK_EQ_U(tslab_epoch_of(a, p), e2);
  CHECK_EQ_U(tslab_usable_size(a, p), 48);
  REQUIRE(tslab_stats_global(a, &g2) == TSLAB_OK);
  CHECK_EQ_U(g2.blocks_reused_total + g2.blocks_created_total, g1.blocks_reused_total + g1.blocks_created_total);
  CHECK(tslab_free(a, p));
  CHECK(!tslab_free(a, p));
  CHECK_EQ_U(tslab_epoch_close(a, e2), TSLAB_OK);
  REQUIRE(tslab_stats_global(a, &g2) == TSLAB_OK);
  CHECK_EQ_U(g2.reserve_bytes, g0.reserve_bytes);
  CHECK_EQ_U(g2.blocks_in_use, 0);
  CHECK_CONSISTENT(a);

  /* Opened and closed unused; freed whole unused. */
  CHECK_EQ_U(tslab_epoch_close(a, tslab_epoch_advance(a)), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_free_all(a, tslab_epoch_advance(a)), TSLAB_OK);
  REQUIRE(tslab_stats_global(a, &g2) == TSLAB_OK);
  CHECK_EQ_U(g2.reserve_bytes, g0.reserve_bytes);
  CHECK_EQ_U(g2.blocks_in_use, 0);
  CHECK_CONSISTENT(a);

  /* Opened here, used by another thread only, closed here. */
  struct other_alloc o = {a, tslab_epoch_advance(a)};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, alloc_and_free_in, &o) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
  tslab_stats_epoch_t es;
  REQUIRE(tslab_stats_epoch(a, o.e, &es) == TSLAB_OK);
  CHECK_EQ_U(es.allocations_total, 1);
  CHECK_EQ_U(tslab_epoch_close(a, o.e), TSLAB_OK);
  REQUIRE(tslab_stats_global(a, &g2) == TSLAB_OK);
  CHECK(g2.reserve_bytes >= g0.reserve_bytes);
  CHECK_EQ_U(g2.blocks_in_use, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A thread that opens eras for another to use and close (an acceptor and
 * its worker): the block it readies goes unused to the heap at the
 * worker's close, so it stops readying with a block but for a probe every
 * TSLAB_READY_PROBE eras; its own epochs between keep reusing its reserve
 * (found by review: without that, every hand-off took a block from the
 * heap). */
struct worker {
  tslab_t* a;
  _Atomic tslab_epoch_t era; /* the era to serve; 0 none; a worker's stop: 1 */
};

static void* serve_eras(void* arg) {
  struct worker* w = arg;
  for (;;) {
    tslab_epoch_t e;
    while ((e = atomic_load(&w->era)) == 0) sched_yield();
    if (e == 1) return NULL;
    void* p[10];
    for (int i = 0; i < 10; i++) REQUIRE((p[i] = tslab_alloc(w->a, 80, e)) != NULL);
    for (int i = 0; i < 10; i++) CHECK(tslab_free(w->a, p[i]));
    CHECK_EQ_U(tslab_epoch_close(w->a, e), TSLAB_OK);
    atomic_store(&w->era, 0);
  }
}

static void test_open_for_others(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, true);
  struct worker w = {.a = a};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, serve_eras, &w) == 0);
  enum { ROUNDS = 400 };
  tslab_stats_global_t g0, g1;
  REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
  for (int r = 0; r < ROUNDS; r++) {
    drain_one_era(a, 200);
    atomic_store(&w.era, tslab_epoch_advance(a));
    while (atomic_load(&w.era) != 0) sched_yield();
  }
  atomic_store(&w.era, 1);
  REQUIRE(pthread_join(t, NULL) == 0);
  REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
  uint64_t created = g1.blocks_created_total - g0.blocks_created_total;
  printf("%d requests handed to a worker: %llu blocks from the heap\n", ROUNDS, (unsigned long long)created);
  CHECK(created <= ROUNDS / 8);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A thread that exits, or flushes, with a readied block it never used gives
 * the block back with its reserve, though the era stays open (found by
 * review: it stayed attached to the abandoned cache until the era closed). */
static void* open_and_exit(void* arg) {
  struct other_alloc* o = arg;
  drain_one_era(o->a, 64);
  o->e = tslab_epoch_advance(o->a);
  return NULL;
}

static void test_readied_block_at_exit(void) {
  tslab_t* a = make(TSLAB_RELEASE_ON_CLOSE, true);
  struct other_alloc o = {a, 0};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, open_and_exit, &o) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
  CHECK_EQ_U(global_stats(a).blocks_in_use, 0);
  tslab_reserve_release(a);
  tslab_stats_global_t g = global_stats(a);
  CHECK_EQ_U(g.reserve_bytes, 0);
  CHECK_EQ_U(g.resident_estimate_bytes, 0);
  CHECK_EQ_U(tslab_epoch_status(a, o.e), TSLAB_OK);
  void* p = tslab_alloc(a, 64, o.e);
  REQUIRE(p != NULL);
  CHECK(tslab_free(a, p));
  CHECK_EQ_U(tslab_epoch_close(a, o.e), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* The unused readied block a flush gives back returns its bytes to the
 * era's block budget: with a budget of one small block, the era's first
 * object after the flush still goes into a block, not a class slab (found
 * by review). */
static void test_flush_refunds_budget(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 32;
  c.block_budget = SMALL_BLOCK;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  drain_one_era(a, 64);
  tslab_epoch_t e = tslab_epoch_advance(a);
  CHECK_EQ_U(global_stats(a).blocks_in_use, 1);
  tslab_thread_flush(a);
  CHECK_EQ_U(global_stats(a).blocks_in_use, 0);
  void* p = tslab_alloc(a, 64, e);
  REQUIRE(p != NULL);
  tslab_stats_epoch_t es;
  REQUIRE(tslab_stats_epoch(a, e, &es) == TSLAB_OK);
  CHECK_EQ_U(global_stats(a).blocks_in_use, 1);
  CHECK_EQ_U(es.slabs, 0);
  CHECK(tslab_free(a, p));
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

int main(void) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  test_idle_thread_close();
  test_release_by_last_free();
  test_outliving_object_pins_a_page();
  test_recycling();
  test_phase_burst();
  test_decay();
  test_decay_close_race();
  test_decay_batches();
  test_span_decays();
  test_large_span_lazy();
  test_pool_reuse_by_length();
  test_small_heap_lazy();
  test_reserve_bound();
  test_large_block_falls_back();
  test_large_block_keeps_pool();
  test_open_readies_block();
  test_open_for_others();
  test_readied_block_at_exit();
  test_flush_refunds_budget();
  test_reserve_block_lengths();
  TEST_DONE();
}
