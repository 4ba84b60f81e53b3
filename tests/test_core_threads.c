/* Contract lines 5 and 6 under concurrency: objects freed by other threads,
 * epochs never closed with bounded memory, a stress run mixing local and
 * cross-thread frees with concurrent advance and close, and the page heap
 * splitting and renewing runs under epochs that close while handles and
 * statistics are read. Every object carries a pattern that must survive
 * until its free. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "test_util.h"

static tslab_t* make(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 33;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

static uint64_t rng(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A mutex-protected mailbox of pointers another thread will free. */
enum { BOX = 4096 };
typedef struct mailbox {
  pthread_mutex_t mu;
  void* items[BOX];
  size_t sizes[BOX];
  int n;
} mailbox_t;

static bool post(mailbox_t* m, void* p, size_t size) {
  pthread_mutex_lock(&m->mu);
  bool ok = m->n < BOX;
  if (ok) {
    m->items[m->n] = p;
    m->sizes[m->n++] = size;
  }
  pthread_mutex_unlock(&m->mu);
  return ok;
}

static int take(mailbox_t* m, void** out, size_t* sizes, int max) {
  pthread_mutex_lock(&m->mu);
  int n = m->n < max ? m->n : max;
  for (int i = 0; i < n; i++) {
    out[i] = m->items[m->n - 1 - i];
    sizes[i] = m->sizes[m->n - 1 - i];
  }
  m->n -= n;
  pthread_mutex_unlock(&m->mu);
  return n;
}

static void fill(void* p, size_t size) {
  unsigned char v = (unsigned char)((uintptr_t)p >> 4);
  memset(p, v, size < 64 ? size : 64);
}

static bool intact(const void* p, size_t size) {
  unsigned char v = (unsigned char)((uintptr_t)p >> 4);
  const unsigned char* b = p;
  for (size_t i = 0; i < (size < 64 ? size : 64); i++)
    if (b[i] != v) return false;
  return true;
}

/* ---- bounded memory with epochs never closed ---- */

enum { CHURN_THREADS = 2, WINDOW = 2048 };

typedef struct churner {
  tslab_t* a;
  int id;
  long ops;
  mailbox_t* boxes;
  _Atomic uint64_t* max_resident;
  _Atomic int* failures;
} churner_t;

static void* churn(void* arg) {
  churner_t* c = arg;
  tslab_epoch_t e = tslab_epoch_current(c->a);
  void* window[WINDOW] = {0};
  size_t wsize[WINDOW] = {0};
  void* got[256];
  size_t gsz[256];
  uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(c->id + 1);
  mailbox_t* mine = &c->boxes[c->id];
  mailbox_t* other = &c->boxes[(c->id + 1) % CHURN_THREADS];
  for (long i = 0; i < c->ops; i++) {
    int slot = (int)(rng(&s) % WINDOW);
    if (window[slot]) {
      /* Half the frees cross to the other thread. */
      if ((rng(&s) & 1) && post(other, window[slot], wsize[slot])) {
      } else {
        if (!intact(window[slot], wsize[slot]) || !tslab_free(c->a, window[slot])) atomic_fetch_add(c->failures, 1);
      }
      window[slot] = NULL;
    } else {
      size_t size = 16 + rng(&s) % 1000;
      void* p = tslab_alloc(c->a, size, e);
      if (!p) {
        atomic_fetch_add(c->failures, 1);
        continue;
      }
      fill(p, size);
      window[slot] = p;
      wsize[slot] = size;
    }
    if ((i & 255) == 0) {
      int n = take(mine, got, gsz, 256);
      for (int k = 0; k < n; k++)
        if (!intact(got[k], gsz[k]) || !tslab_free(c->a, got[k])) atomic_fetch_add(c->failures, 1);
    }
    if ((i & 0xFFFF) == 0 && i > c->ops / 10) {
      tslab_stats_global_t g;
      tslab_stats_global(c->a, &g);
      uint64_t m = atomic_load(c->max_resident);
      while (g.resident_estimate_bytes > m && !atomic_compare_exchange_weak(c->max_resident, &m, g.resident_estimate_bytes)) {
      }
    }
  }
  for (int k = 0; k < WINDOW; k++)
    if (window[k] && !tslab_free(c->a, window[k])) atomic_fetch_add(c->failures, 1);
  return NULL;
}

static void drain(tslab_t* a, mailbox_t* boxes, int n, _Atomic int* failures) {
  void* got[256];
  size_t gsz[256];
  for (int b = 0; b < n; b++) {
    int k;
    while ((k = take(&boxes[b], got, gsz, 256)) > 0)
      for (int i = 0; i < k; i++)
        if (!intact(got[i], gsz[i]) || !tslab_free(a, got[i])) atomic_fetch_add(failures, 1);
  }
}

static void test_bounded_churn(long total_ops) {
  tslab_t* a = make();
  mailbox_t boxes[CHURN_THREADS];
  churner_t cs[CHURN_THREADS];
  pthread_t t[CHURN_THREADS];
  _Atomic uint64_t max_resident = 0;
  _Atomic int failures = 0;
  for (int i = 0; i < CHURN_THREADS; i++) {
    pthread_mutex_init(&boxes[i].mu, NULL);
    boxes[i].n = 0;
  }
  for (int i = 0; i < CHURN_THREADS; i++) {
    cs[i] = (churner_t){a, i, total_ops / CHURN_THREADS, boxes, &max_resident, &failures};
    REQUIRE(pthread_create(&t[i], NULL, churn, &cs[i]) == 0);
  }
  for (int i = 0; i < CHURN_THREADS; i++) pthread_join(t[i], NULL);
  drain(a, boxes, CHURN_THREADS, &failures);
  CHECK_EQ_U(atomic_load(&failures), 0);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_EQ_U(g.invalid_frees_total, 0);
  /* Live set: 2 x 2048 objects of at most ~1 KiB plus mailboxes (8 MiB at
   * most). Slabs partly full, one cached slab per (thread, class), and the
   * 4 MiB pool bound the rest; the bound below is far under what growth
   * with time would reach over 10^7 operations. */
  printf("bounded churn: max resident %.1f MiB, committed %.1f MiB\n",
         (double)atomic_load(&max_resident) / (1 << 20), (double)g.committed_bytes / (1 << 20));
  CHECK(atomic_load(&max_resident) < ((uint64_t)64 << 20));
  CHECK(g.committed_bytes < ((uint64_t)128 << 20));
  CHECK(g.cross_thread_frees_total > 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- stress: local and cross-thread frees with concurrent advance/close ---- */

enum { STRESS_THREADS = 4 };

typedef struct stresser {
  tslab_t* a;
  int id;
  long ops;
  mailbox_t* boxes;
  _Atomic int* failures;
  _Atomic int* done;
} stresser_t;

static void* stress(void* arg) {
  stresser_t* c = arg;
  enum { KEEP = 512 };
  void* keep[KEEP] = {0};
  size_t ksz[KEEP] = {0};
  void* got[256];
  size_t gsz[256];
  uint64_t s = 0xD1B54A32D192ED03ull * (uint64_t)(c->id + 7);
  for (long i = 0; i < c->ops; i++) {
    int slot = (int)(rng(&s) % KEEP);
    if (keep[slot]) {
      int to = (int)(rng(&s) % STRESS_THREADS);
      if (to == c->id || !post(&c->boxes[to], keep[slot], ksz[slot])) {
        if (!intact(keep[slot], ksz[slot]) || !tslab_free(c->a, keep[slot])) atomic_fetch_add(c->failures, 1);
      }
      keep[slot] = NULL;
    } else {
      uint64_t r = rng(&s);
      size_t size = r % 16 == 0 ? 33000 + r % 70000 : 8 + r % 3000;
      tslab_epoch_t e = tslab_epoch_current(c->a);
      void* p = tslab_alloc(c->a, size, e);
      if (!p) {
        int err = tslab_last_error();
        /* The closer may close or recycle e between the two calls. */
        if (err != TSLAB_ERR_EPOCH_CLOSED && err != TSLAB_ERR_EPOCH_STALE) atomic_fetch_add(c->failures, 1);
        continue;
      }
      fill(p, size);
      keep[slot] = p;
      ksz[slot] = size;
    }
    if ((i & 63) == 0) {
      int n = take(&c->boxes[c->id], got, gsz, 256);
      for (int k = 0; k < n; k++)
        if (!intact(got[k], gsz[k]) || !tslab_free(c->a, got[k])) atomic_fetch_add(c->failures, 1);
    }
  }
  for (int k = 0; k < KEEP; k++)
    if (keep[k] && (!intact(keep[k], ksz[k]) || !tslab_free(c->a, keep[k]))) atomic_fetch_add(c->failures, 1);
  atomic_fetch_add(c->done, 1);
  return NULL;
}

static void test_stress(long ops_per_thread) {
  tslab_t* a = make();
  mailbox_t boxes[STRESS_THREADS];
  stresser_t cs[STRESS_THREADS];
  pthread_t t[STRESS_THREADS];
  _Atomic int failures = 0, done = 0;
  for (int i = 0; i < STRESS_THREADS; i++) {
    pthread_mutex_init(&boxes[i].mu, NULL);
    boxes[i].n = 0;
  }
  for (int i = 0; i < STRESS_THREADS; i++) {
    cs[i] = (stresser_t){a, i, ops_per_thread, boxes, &failures, &done};
    REQUIRE(pthread_create(&t[i], NULL, stress, &cs[i]) == 0);
  }
  /* The closer: advance, and close eras two advances old (some with live
   * objects); every third era is left open, so the ring fills and advances
   * also force closes. */
  long closes = 0;
  tslab_epoch_t hist[3] = {0, 0, 0};
  for (long n = 0; atomic_load(&done) < STRESS_THREADS; n++) {
    hist[n % 3] = tslab_epoch_advance(a);
    tslab_epoch_t old = hist[(n + 1) % 3];
    if (old && n % 3 != 0) {
      int st = tslab_epoch_close(a, old);
      CHECK(st == TSLAB_OK || st == TSLAB_ERR_EPOCH_STALE); /* stale once force-closed */
      closes += st == TSLAB_OK;
    }
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < STRESS_THREADS; i++) pthread_join(t[i], NULL);
  drain(a, boxes, STRESS_THREADS, &failures);
  CHECK_EQ_U(atomic_load(&failures), 0);
  CHECK(closes > 0);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_EQ_U(g.invalid_frees_total, 0);
  CHECK(g.cross_thread_frees_total > 0);
  printf("stress: %ld closes, %llu epochs, %llu forced, %llu cross-thread frees\n", closes,
         (unsigned long long)g.epochs_opened_total, (unsigned long long)g.epochs_forced_close_total,
         (unsigned long long)g.cross_thread_frees_total);
  CHECK_CONSISTENT(a);
  /* Everything was freed: closing the open eras leaves no slab in use. */
  tslab_stats_epoch_t eps[16];
  size_t n = tslab_stats_epochs(a, eps, 16);
  for (size_t i = 0; i < n; i++) CHECK_EQ_U(tslab_epoch_close(a, eps[i].era), TSLAB_OK);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.slabs_in_use, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- the page heap under reuse: runs split, descriptors renewed ---- */

/* Threads cycle epochs through slabs and spans of many lengths, so the heap
 * keeps taking the fronts of longer pooled runs (with decay tags: no
 * untagged reserve) while other threads close epochs, look up stale handles,
 * read the statistics and empty the hot reserve. Objects keep their bytes,
 * calloc's read zero, stale handles never resolve, and the heap is
 * consistent at every barrier. */
enum { REUSE_THREADS = 4, REUSE_OBJECTS = 48, REUSE_STALE = 1024 };
static const size_t reuse_sizes[] = {128, 700, 2048, 6000, 12000, 30000, 40000, 70000, 100000};

typedef struct reuser {
  tslab_t* a;
  int id, rounds;
  pthread_barrier_t* barrier;
  _Atomic int* failures;
  _Atomic int* stop; /* the statistics reader's */
  /* The reader's pause while the main thread checks the heap: a release of
   * the hot reserve in progress leaves runs in a transient state, which the
   * check (made with the allocator quiescent) reports. */
  _Atomic int *hold, *held;
} reuser_t;

static void* reuse_worker(void* arg) {
  reuser_t* w = arg;
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
  void* p[REUSE_OBJECTS];
  size_t size[REUSE_OBJECTS];
  tslab_handle_t h[REUSE_OBJECTS];
  static _Thread_local tslab_handle_t stale[REUSE_STALE];
  size_t nstale = 0;
  const unsigned char mark = (unsigned char)(0xA0 + w->id);
  for (int round = 0; round < w->rounds; round++) {
    if (round % 10 == 0) {
      pthread_barrier_wait(w->barrier); /* the main thread checks the heap */
      pthread_barrier_wait(w->barrier);
    }
    tslab_epoch_t e = tslab_epoch_advance(w->a);
    for (int phase = 0; phase < 3; phase++) {
      size_t n = 0;
      for (; n < REUSE_OBJECTS; n++) {
        size[n] = reuse_sizes[rng(&s) % (sizeof reuse_sizes / sizeof *reuse_sizes)] - rng(&s) % 64;
        h[n] = 0;
        switch (rng(&s) % 3) {
          case 0:
            p[n] = tslab_calloc(w->a, 1, size[n], e);
            for (size_t k = 0; p[n] && k < size[n]; k += 509)
              if (((unsigned char*)p[n])[k] != 0) {
                atomic_fetch_add(w->failures, 1);
                break;
              }
            break;
          case 1:
            p[n] = tslab_alloc_handle(w->a, size[n], e, &h[n]);
            break;
          default:
            p[n] = tslab_alloc(w->a, size[n], e);
        }
        if (!p[n]) break;
        memset(p[n], mark, size[n]);
      }
      for (size_t k = 0; k < nstale; k++)
        if (tslab_handle_get(w->a, stale[k]) != NULL) atomic_fetch_add(w->failures, 1);
      for (size_t k = 0; k < n; k++) {
        const unsigned char* c = p[k];
        if (c[0] != mark || c[size[k] / 2] != mark || c[size[k] - 1] != mark) atomic_fetch_add(w->failures, 1);
      }
      /* The last phase closes its epoch with half of its objects live. */
      size_t before_close = phase == 2 ? n / 2 : n;
      for (size_t k = 0; k < n; k++) {
        if (k == before_close) CHECK_EQ_U(tslab_epoch_close(w->a, e), TSLAB_OK);
        if (h[k]) stale[nstale++ % REUSE_STALE] = h[k];
        if (!tslab_free(w->a, p[k])) atomic_fetch_add(w->failures, 1);
      }
      if (before_close == n && phase == 2) CHECK_EQ_U(tslab_epoch_close(w->a, e), TSLAB_OK);
      if (nstale > REUSE_STALE) nstale = REUSE_STALE;
    }
  }
  return NULL;
}

/* Reads the statistics until told to stop, as an exporter would, and now
 * and then empties the hot reserve while the workers take from it. */
static void* reuse_reader(void* arg) {
  reuser_t* r = arg;
  tslab_stats_epoch_t eps[16];
  for (unsigned n = 0; !atomic_load(r->stop); n++) {
    if (atomic_load(r->hold)) {
      atomic_store(r->held, 1);
      while (atomic_load(r->hold)) sched_yield();
      atomic_store(r->held, 0);
    }
    tslab_stats_global_t g;
    tslab_stats_global(r->a, &g);
    tslab_stats_epochs(r->a, eps, 16);
    if (n % 64 == 0) tslab_reserve_release(r->a);
  }
  return NULL;
}

static void test_heap_reuse(int rounds) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 33;
  c.pool_resident_max = 0;
  c.pool_decay_max = (size_t)8 << 20;
  c.pool_decay_ms = 3600 * 1000;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  pthread_barrier_t barrier;
  REQUIRE(pthread_barrier_init(&barrier, NULL, REUSE_THREADS + 1) == 0);
  _Atomic int failures = 0, stop = 0, hold = 0, held = 0;
  reuser_t w[REUSE_THREADS], reader = {a, -1, 0, NULL, &failures, &stop, &hold, &held};
  pthread_t t[REUSE_THREADS], rt;
  REQUIRE(pthread_create(&rt, NULL, reuse_reader, &reader) == 0);
  for (int i = 0; i < REUSE_THREADS; i++) {
    w[i] = (reuser_t){a, i, rounds, &barrier, &failures, &stop, NULL, NULL};
    REQUIRE(pthread_create(&t[i], NULL, reuse_worker, &w[i]) == 0);
  }
  for (int r = 0; r < rounds; r += 10) {
    pthread_barrier_wait(&barrier);
    atomic_store(&hold, 1);
    while (!atomic_load(&held)) sched_yield();
    CHECK_CONSISTENT(a);
    atomic_store(&hold, 0);
    /* Its acknowledgement cleared before the next check: a stale one would
     * let that check run beside the reader. */
    while (atomic_load(&held)) sched_yield();
    pthread_barrier_wait(&barrier);
  }
  for (int i = 0; i < REUSE_THREADS; i++) pthread_join(t[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(rt, NULL);
  pthread_barrier_destroy(&barrier);
  CHECK_EQ_U(atomic_load(&failures), 0);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_EQ_U(g.decay_bytes, 0); /* every epoch that tagged runs is closed */
  CHECK(g.slabs_recycled_total > 0);
  CHECK_CONSISTENT(a);
  tslab_reserve_release(a);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.reserve_bytes, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- per-epoch counts while eras advance ---- */

/* One thread runs requests (advance, 512 allocations and frees, close) on a
 * ring of four while this one reads every epoch's counts: for an era seen
 * twice, allocations and frees never go backwards and frees never exceed
 * allocations. (test_core_epochs holds open the case that once broke this:
 * a slot claimed by an advance, still holding the old era's counts.) */
typedef struct cycler {
  tslab_t* a;
  _Atomic int stop;
  _Atomic long requests;
} cycler_t;

static void* epoch_cycler(void* arg) {
  cycler_t* c = arg;
  void* p[16];
  while (!atomic_load(&c->stop)) {
    tslab_epoch_t e = tslab_epoch_advance(c->a);
    if (e == 0) continue;
    for (int round = 0; round < 32; round++) {
      for (int i = 0; i < 16; i++) p[i] = tslab_alloc(c->a, 16 + 24 * (size_t)i, e);
      for (int i = 0; i < 16; i++)
        if (p[i]) tslab_free(c->a, p[i]);
    }
    tslab_epoch_close(c->a, e);
    atomic_fetch_add(&c->requests, 1);
  }
  return NULL;
}

static void test_epoch_counts_monotone(long reads) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.reserve_bytes = (size_t)1 << 30;
  cfg.max_alloc_size = cfg.reserve_bytes / 4;
  cfg.epoch_ring_size = 4;
  cycler_t c = {tslab_create(&cfg), 0, 0};
  REQUIRE(c.a != NULL);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, epoch_cycler, &c) == 0);
  uint64_t seen_era[4] = {0}, seen_allocs[4] = {0}, seen_frees[4] = {0};
  long back = 0, over = 0;
  tslab_stats_epoch_t eps[4];
  for (long r = 0; r < reads; r++) {
    size_t n = tslab_stats_epochs(c.a, eps, 4);
    for (size_t i = 0; i < n; i++) {
      uint32_t s = eps[i].slot;
      REQUIRE(s < 4);
      over += eps[i].frees_total > eps[i].allocations_total;
      if (seen_era[s] == eps[i].era)
        back += eps[i].allocations_total < seen_allocs[s] || eps[i].frees_total < seen_frees[s];
      seen_era[s] = eps[i].era;
      seen_allocs[s] = eps[i].allocations_total;
      seen_frees[s] = eps[i].frees_total;
    }
  }
  atomic_store(&c.stop, 1);
  pthread_join(t, NULL);
  printf("epoch counts: %ld reads over %ld requests\n", reads, atomic_load(&c.requests));
  CHECK_EQ_U(back, 0);
  CHECK_EQ_U(over, 0);
  CHECK_CONSISTENT(c.a);
  tslab_destroy(c.a);
}

/* The allocator is not a cancellation point: a thread cancelled (deferred)
 * while it closes an epoch that releases memory finishes the close (found
 * by review: the close read the process's RSS through the C library's open,
 * a cancellation point, after it had marked its era CLOSING; the cancelled
 * thread left the era closing, and every later close of it waited for
 * good). */
struct cancelled_close {
  tslab_t* a;
  tslab_epoch_t e;
  atomic_int ready, cancelled;
  int status;
};

static void* cancelled_closer(void* arg) {
  struct cancelled_close* c = arg;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  enum { N = 4096 };
  static void* p[N];
  for (int i = 0; i < N; i++) REQUIRE((p[i] = tslab_alloc(c->a, 4000, c->e)) != NULL);
  for (int i = 0; i < N; i++) REQUIRE(tslab_free(c->a, p[i]));
  atomic_store(&c->ready, 1);
  while (!atomic_load(&c->cancelled)) sched_yield();
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  c->status = tslab_epoch_close(c->a, c->e); /* its empty slabs go back to the OS */
  pthread_testcancel();
  return NULL;
}

static void test_cancelled_close(void) {
  static struct cancelled_close c;
  c.a = make();
  c.e = tslab_epoch_advance(c.a);
  c.status = -1;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, cancelled_closer, &c) == 0);
  tu_wait_flag(&c.ready);
  REQUIRE(pthread_cancel(t) == 0);
  atomic_store(&c.cancelled, 1);
  void* res = NULL;
  pthread_join(t, &res);
  CHECK(res == PTHREAD_CANCELED);
  CHECK_EQ_U(c.status, TSLAB_OK);
  if (c.status == TSLAB_OK) CHECK_EQ_U(tslab_epoch_close(c.a, c.e), TSLAB_OK);
  CHECK_CONSISTENT(c.a);
  tslab_destroy(c.a);
}

int main(int argc, char** argv) {
  /* Scale for slow (sanitizer) builds: argv[1] divides the work. */
  long div = argc > 1 ? atol(argv[1]) : 1;
  if (div < 1) div = 1;
  test_cancelled_close();
  test_bounded_churn(10000000 / div);
  test_stress(400000 / div);
  test_heap_reuse((int)(60 / div > 10 ? 60 / div : 10));
  test_epoch_counts_monotone(400000 / div);
  TEST_DONE();
}
