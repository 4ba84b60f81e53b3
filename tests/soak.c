/* Soak: worker threads churn objects of random sizes and lifetimes while an
 * epoch thread keeps advancing and closing epochs under them; some objects
 * are freed by another thread than their allocator. After a warm-up the
 * memory must be flat, and at the end (threads stopped) the allocator must be
 * consistent, with no object lost and no unexpected failure.
 *
 *   soak [--seconds N | --hours N] [--threads N]     (default: 20 seconds, 4)
 *
 * Flatness: the resident estimate of the allocator and the process RSS are
 * sampled every 250 ms after the warm-up (the first quarter of the run, at
 * least 5 s). A least-squares line through each series must not rise, over
 * the sampled window, by more than 20% of the series' mean plus 8 MiB. The
 * series swing by about +-25% within seconds (slabs of closed epochs wait
 * for their last long-lived object), which the tolerance absorbs on a busy
 * 2-core machine; a leak of one slab per epoch (hundreds of epochs a second)
 * exceeds it within seconds, and slower leaks accumulate past it in long
 * runs, where the same growth per second adds up over hours.
 *
 * Expected failures: an allocation in the era a worker read as current can
 * fail with TSLAB_ERR_EPOCH_CLOSED or _STALE when the epoch thread closed or
 * recycled it meanwhile; those are counted, every other failure is not
 * expected. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "test_util.h"

#define MAX_THREADS 16
#define HELD 4096          /* objects each worker keeps */
#define MAILBOX 256        /* cross-thread hand-off slots */
#define OPEN_EPOCHS 3
#define SAMPLE_NS 250000000ull
#define MAX_SAMPLES 200000

typedef struct {
  unsigned char* p;
  uint32_t size;
  uint32_t seed;
} obj_t;

static tslab_t* a;
static atomic_bool stop;
static atomic_ullong ops, cross_frees, expected_fails, unexpected, corrupt, epochs;
static _Atomic(obj_t*) mailbox[MAILBOX];

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* 90% small, 9% medium, 1% large spans. */
static uint32_t pick_size(uint64_t r) {
  unsigned k = (unsigned)(r % 100);
  r >>= 8;
  if (k < 90) return 16 + (uint32_t)(r % 497);
  if (k < 99) return 512 + (uint32_t)(r % 7681);
  return 8192 + (uint32_t)(r % 122880);
}

static void stamp(const obj_t* o) {
  o->p[0] = (unsigned char)o->seed;
  o->p[o->size / 2] = (unsigned char)(o->seed >> 8);
  o->p[o->size - 1] = (unsigned char)(o->seed >> 16);
}

static void release(obj_t* o) {
  if (o->p[0] != (unsigned char)o->seed || o->p[o->size / 2] != (unsigned char)(o->seed >> 8) ||
      o->p[o->size - 1] != (unsigned char)(o->seed >> 16))
    atomic_fetch_add(&corrupt, 1);
  if (!tslab_free(a, o->p)) atomic_fetch_add(&unexpected, 1);
  o->p = NULL;
}

static void* worker(void* arg) {
  uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
  obj_t* held = calloc(HELD, sizeof *held);
  obj_t* spare = calloc(1, sizeof *spare);
  REQUIRE(held && spare);
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    uint64_t r = rng_next(&rng);
    obj_t* o = &held[r % HELD];
    if (o->p) release(o);
    o->size = pick_size(r >> 16);
    o->seed = (uint32_t)(r >> 32);
    tslab_clear_error();
    o->p = tslab_alloc(a, o->size, tslab_epoch_current(a));
    if (!o->p) {
      int st = tslab_last_error();
      atomic_fetch_add(st == TSLAB_ERR_EPOCH_CLOSED || st == TSLAB_ERR_EPOCH_STALE ? &expected_fails
                                                                                   : &unexpected, 1);
      continue;
    }
    stamp(o);
    /* One object in 16 changes hands: ours goes to the mailbox, whatever
     * was there is freed here, by a thread that did not allocate it. */
    if ((r >> 40) % 16 == 0) {
      *spare = *o;
      o->p = NULL;
      obj_t* theirs = atomic_exchange(&mailbox[(r >> 44) % MAILBOX], spare);
      if (theirs) {
        release(theirs);
        atomic_fetch_add(&cross_frees, 1);
      }
      spare = theirs ? theirs : calloc(1, sizeof *spare);
      REQUIRE(spare);
    }
    atomic_fetch_add_explicit(&ops, 1, memory_order_relaxed);
  }
  for (unsigned i = 0; i < HELD; i++)
    if (held[i].p) release(&held[i]);
  free(held);
  free(spare);
  return NULL;
}

/* Opens a new epoch every few milliseconds and closes the one that falls
 * out of the last OPEN_EPOCHS: objects outlive their epoch's close. */
static void* epoch_thread(void* arg) {
  (void)arg;
  struct timespec nap = {0, 3000000};
  tslab_epoch_t open[OPEN_EPOCHS] = {0}; /* era numbers may skip: remember them */
  for (unsigned n = 0; !atomic_load(&stop); n = (n + 1) % OPEN_EPOCHS) {
    if (open[n] && tslab_epoch_close(a, open[n]) != TSLAB_OK) atomic_fetch_add(&unexpected, 1);
    open[n] = tslab_epoch_advance(a);
    atomic_fetch_add(&epochs, 1);
    nanosleep(&nap, NULL);
  }
  return NULL;
}

/* Least-squares slope of y against x. */
static double slope(const double* x, const double* y, size_t n) {
  double mx = 0, my = 0, sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
  mx /= (double)n, my /= (double)n;
  for (size_t i = 0; i < n; i++) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  return sxx > 0 ? sxy / sxx : 0;
}

static double mean(const double* y, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += y[i];
  return n ? s / (double)n : 0;
}

/* Growth of the fitted line over the window, against the tolerance. */
static int flat(const char* what, const double* t, const double* y, size_t n) {
  double growth = slope(t, y, n) * (t[n - 1] - t[0]);
  double tolerance = 0.20 * mean(y, n) + 8.0 * (1 << 20);
  printf("%s: mean %.1f MiB, fitted growth %+.2f MiB over %.0f s (tolerance %.2f MiB)\n", what,
         mean(y, n) / (1 << 20), growth / (1 << 20), t[n - 1] - t[0], tolerance / (1 << 20));
  return growth <= tolerance;
}

int main(int argc, char** argv) {
  double seconds = 20;
  unsigned threads = 4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--hours") && i + 1 < argc) {
      seconds = atof(argv[++i]) * 3600;
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = (unsigned)atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--seconds N | --hours N] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  REQUIRE(seconds >= 8 && threads >= 2 && threads <= MAX_THREADS);
  double warmup = seconds / 4 > 5 ? seconds / 4 : 5;

  a = tslab_create(NULL);
  REQUIRE(a != NULL);
  pthread_t th[MAX_THREADS + 1];
  for (unsigned i = 0; i < threads; i++)
    REQUIRE(pthread_create(&th[i], NULL, worker, (void*)(uintptr_t)i) == 0);
  REQUIRE(pthread_create(&th[threads], NULL, epoch_thread, NULL) == 0);

  size_t cap = (size_t)(seconds * 1e9 / SAMPLE_NS) + 2;
  if (cap > MAX_SAMPLES) cap = MAX_SAMPLES;
  double* t = calloc(cap, sizeof *t);
  double* resident = calloc(cap, sizeof *resident);
  double* rss = calloc(cap, sizeof *rss);
  REQUIRE(t && resident && rss);
  size_t n = 0, ticks = 0, stride = 1;
  uint64_t t0 = tslab_now_ns(), last_print = 0;
  struct timespec nap = {0, SAMPLE_NS};
  for (;;) {
    nanosleep(&nap, NULL);
    double now = (double)(tslab_now_ns() - t0) / 1e9;
    if (now >= seconds) break;
    tslab_stats_global_t g;
    tslab_stats_global(a, &g);
    if (now >= warmup && ticks++ % stride == 0) {
      if (n == cap) { /* hours-long runs: halve the sampling rate */
        for (size_t i = 0; i < n / 2; i++)
          t[i] = t[2 * i], resident[i] = resident[2 * i], rss[i] = rss[2 * i];
        n /= 2;
        stride *= 2;
      }
      t[n] = now;
      resident[n] = (double)g.resident_estimate_bytes;
      rss[n] = (double)tslab_process_rss();
      n++;
    }
    if (now - (double)last_print >= 5) {
      last_print = (uint64_t)now;
      printf("%6.0f s: %llu ops, %llu cross-thread frees, %llu epochs, live %llu, resident %llu MiB, "
             "rss %llu MiB\n",
             now, (unsigned long long)atomic_load(&ops), (unsigned long long)atomic_load(&cross_frees),
             (unsigned long long)atomic_load(&epochs), (unsigned long long)g.live_objects,
             (unsigned long long)g.resident_estimate_bytes >> 20,
             (unsigned long long)tslab_process_rss() >> 20);
      fflush(stdout);
    }
  }
  atomic_store(&stop, true);
  for (unsigned i = 0; i <= threads; i++) pthread_join(th[i], NULL);
  for (unsigned i = 0; i < MAILBOX; i++) {
    obj_t* o = atomic_exchange(&mailbox[i], NULL);
    if (o) {
      release(o);
      free(o);
    }
  }

  REQUIRE(n >= 8);
  CHECK(flat("resident estimate", t, resident, n));
  CHECK(flat("process rss", t, rss, n));
  printf("%llu ops, %llu expected failures (closed/stale epochs)\n", (unsigned long long)ops,
         (unsigned long long)expected_fails);
  CHECK_EQ_U(atomic_load(&unexpected), 0);
  CHECK_EQ_U(atomic_load(&corrupt), 0);
  CHECK(atomic_load(&ops) > 0 && atomic_load(&cross_frees) > 0);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_CONSISTENT(a);
  free(t);
  free(resident);
  free(rss);
  tslab_destroy(a);
  TEST_DONE();
}
