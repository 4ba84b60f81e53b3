/* The benchmark workloads, written once against backend.h.
 *
 * Usage: bench_<allocator> WORKLOAD [key=value...]
 * Prints one JSON object on stdout with the parameters and the measured
 * figures. Every workload keeps the harness's memory (pointer arrays, sample
 * buffers) in mmap'd memory set up before its timed region, so timed regions
 * contain only allocator calls and the program's own use of the objects:
 * every object is written when allocated and read back before it is freed
 * (harness.h; touch=0 for the former one or two stores and no read).
 * The workloads and their parameters are described in docs/BENCHMARKS.md.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "harness.h"

/* ---- parameters --------------------------------------------------------- */

static int n_params;
static char** params;

const char* bench_param(const char* key, const char* dflt) { return h_arg_str(n_params, params, key, dflt); }

static uint64_t param_u64(const char* key, uint64_t dflt) { return h_arg_u64(n_params, params, key, dflt); }

/* Sum of every object read back: printed, so no read is optimised away, and
 * equal across allocators for one workload and its parameters. Threaded
 * workloads add their threads' sums once the threads are joined. */
static uint64_t checksum;

static void print_header(const char* workload) {
  printf("{\"workload\":\"%s\",\"allocator\":\"%s\",\"version\":\"%s\",\"mode\":\"%s\"", workload,
         be_name, be_version(), bench_param("mode", be_default_mode));
  printf(",\"params\":{");
  for (int i = 0; i < n_params; i++) {
    const char* eq = strchr(params[i], '=');
    if (eq) printf("%s\"%.*s\":\"%s\"", i ? "," : "", (int)(eq - params[i]), params[i], eq + 1);
  }
  printf("},\"touch\":%d", h_touch_all);
}

static void print_footer(void) {
  printf(",\"checksum\":%llu", (unsigned long long)checksum);
  be_report(stdout);
  printf("}\n");
}

static void* checked(void* p, size_t size) {
  if (p == NULL) {
    fprintf(stderr, "%s: allocation of %zu bytes failed\n", be_name, size);
    exit(2);
  }
  return p;
}

/* Allocate object number id and write it. */
static void* must_alloc(size_t size, uint64_t id) {
  void* p = checked(be_alloc(size), size);
  h_obj_write(p, size, id);
  return p;
}

static void* must_phase_alloc(be_phase_t ph, size_t size, uint64_t id) {
  void* p = checked(be_phase_alloc(ph, size), size);
  h_obj_write(p, size, id);
  return p;
}

/* Read an object back into *sum, then free it. */
static void release(void* p, size_t size, uint64_t* sum) {
  *sum += h_obj_read(p, size);
  be_free(p);
}

static void phase_release(be_phase_t ph, void* p, size_t size, uint64_t* sum) {
  *sum += h_obj_read(p, size);
  be_phase_free(ph, p);
}

enum { OBJ = 128 };

/* ---- 1: churn ----------------------------------------------------------- */

static void churn_loop(uint64_t pairs) {
  for (uint64_t i = 0; i < pairs; i++) release(must_alloc(OBJ, i), OBJ, &checksum);
}

static int wl_churn(void) {
  uint64_t pairs = param_u64("pairs", 20000000);
  churn_loop(pairs / 100 + 1);
  uint64_t t0 = h_now_ns();
  churn_loop(pairs);
  uint64_t t1 = h_now_ns();
  print_header("churn");
  printf(",\"ns_per_pair\":%.3f", (double)(t1 - t0) / (double)pairs);
  print_footer();
  return 0;
}

/* ---- 2: batch ----------------------------------------------------------- */

static void batch_round(void** p, uint64_t n, bool lifo) {
  for (uint64_t i = 0; i < n; i++) p[i] = must_alloc(OBJ, i);
  if (lifo)
    for (uint64_t i = n; i-- > 0;) release(p[i], OBJ, &checksum);
  else
    for (uint64_t i = 0; i < n; i++) release(p[i], OBJ, &checksum);
}

static double batch_ns_per_op(void** p, uint64_t n, uint64_t rounds, bool lifo) {
  batch_round(p, n, lifo);
  uint64_t t0 = h_now_ns();
  for (uint64_t r = 0; r < rounds; r++) batch_round(p, n, lifo);
  return (double)(h_now_ns() - t0) / (double)(2 * n * rounds);
}

/* order=fifo or lifo measures one free order only (bench/callgrind_counts.sh
 * counts them apart); by default both. */
static int wl_batch(void) {
  uint64_t n = param_u64("n", 10000), rounds = param_u64("rounds", 200);
  uint64_t lat_rounds = param_u64("lat_rounds", 50);
  const char* order = bench_param("order", "both");
  bool do_fifo = strcmp(order, "lifo") != 0, do_lifo = strcmp(order, "fifo") != 0;
  void** p = h_map(n * sizeof *p);
  double fifo = do_fifo ? batch_ns_per_op(p, n, rounds, false) : 0;
  double lifo = do_lifo ? batch_ns_per_op(p, n, rounds, true) : 0;

  /* Per-call latency: each allocation and each free timed on its own; the
   * object's write and read are the program's, outside the timed call. */
  size_t ns = (size_t)(n * lat_rounds);
  uint64_t* la = h_map(ns * sizeof *la);
  uint64_t* lf = h_map(ns * sizeof *lf);
  size_t k = 0;
  for (uint64_t r = 0; r < lat_rounds; r++) {
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t0 = h_now_ns();
      void* q = be_alloc(OBJ);
      uint64_t t1 = h_now_ns();
      h_obj_write(checked(q, OBJ), OBJ, i);
      p[i] = q;
      la[k + i] = t1 - t0;
    }
    for (uint64_t i = 0; i < n; i++) {
      checksum += h_obj_read(p[i], OBJ);
      uint64_t t0 = h_now_ns();
      be_free(p[i]);
      lf[k + i] = h_now_ns() - t0;
    }
    k += n;
  }
  uint64_t tmed, tp99;
  h_timer_overhead(&tmed, &tp99);
  print_header("batch");
  if (do_fifo) printf(",\"fifo_ns_per_op\":%.3f", fifo);
  if (do_lifo) printf(",\"lifo_ns_per_op\":%.3f", lifo);
  printf(",\"timer_overhead_ns\":{\"p50\":%llu,\"p99\":%llu}", (unsigned long long)tmed,
         (unsigned long long)tp99);
  h_print_pcts(stdout, "alloc_latency_ns", la, ns);
  h_print_pcts(stdout, "free_latency_ns", lf, ns);
  print_footer();
  return 0;
}

/* ---- 3: mixed sizes ----------------------------------------------------- */

/* Log-uniform in [16, max]: as many small as large power-of-two ranges. */
static uint32_t mixed_size(h_rng* r, uint64_t max) {
  unsigned top = 63 - (unsigned)__builtin_clzll(max);
  unsigned e = (unsigned)h_range(r, 4, top - 1);
  uint64_t s = h_range(r, (uint64_t)1 << e, ((uint64_t)2 << e) - 1);
  return (uint32_t)(s > max ? max : s);
}

static int wl_mixed(void) {
  uint64_t live = param_u64("live", 10000), ops = param_u64("ops", 2000000);
  uint64_t max = param_u64("max", 4096);
  h_rng rng = {param_u64("seed", 42)};
  void** p = h_map(live * sizeof *p);
  uint32_t* psize = h_map(live * sizeof *psize);
  uint32_t* slot = h_map(ops * sizeof *slot);
  uint32_t* size = h_map(ops * sizeof *size);
  for (uint64_t i = 0; i < ops; i++) {
    slot[i] = (uint32_t)(h_rand(&rng) % live);
    size[i] = mixed_size(&rng, max);
  }
  uint64_t live_req = 0;
  for (uint64_t i = 0; i < live; i++) {
    psize[i] = mixed_size(&rng, max);
    live_req += psize[i];
    p[i] = must_alloc(psize[i], i);
  }
  uint64_t t0 = h_now_ns();
  for (uint64_t i = 0; i < ops; i++) {
    uint32_t s = slot[i];
    release(p[s], psize[s], &checksum);
    p[s] = must_alloc(size[i], live + i);
    psize[s] = size[i];
  }
  uint64_t t1 = h_now_ns();
  uint64_t rss = h_rss();
  for (uint64_t i = 0; i < live; i++) checksum += h_obj_read(p[i], psize[i]);
  print_header("mixed");
  printf(",\"ns_per_op\":%.3f,\"rss_bytes\":%llu,\"initial_live_requested_bytes\":%llu",
         (double)(t1 - t0) / (double)ops, (unsigned long long)rss, (unsigned long long)live_req);
  /* Before the live set is freed: the library's figures are for it. */
  print_footer();
  for (uint64_t i = 0; i < live; i++) be_free(p[i]);
  return 0;
}

/* ---- 4: threads --------------------------------------------------------- */

enum { TBATCH = 100 };
static pthread_barrier_t start_line;

/* Each worker times itself from the barrier to its last call; the measured
 * span runs from the earliest start to the latest end. Timing from the main
 * thread instead would miss work done while it was descheduled after the
 * barrier, which on a loaded machine can be most of a short run. */
typedef struct {
  uint64_t rounds;
  uint64_t id;  /* numbers the worker's objects */
  int cpu;      /* pinned to this CPU, or -1 */
  uint64_t sum; /* its objects' checksum */
  uint64_t t0, t1;
} __attribute__((aligned(64))) worker; /* a line each: `sum` is written on every release */

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) perror("sched_setaffinity");
}

static void* thread_body(void* arg) {
  worker* w = arg;
  if (w->cpu >= 0) pin(w->cpu);
  void* p[TBATCH];
  uint64_t id = w->id << 40;
  pthread_barrier_wait(&start_line);
  w->t0 = h_now_ns();
  for (uint64_t r = 0; r < w->rounds; r++) {
    for (int i = 0; i < TBATCH; i++) p[i] = must_alloc(OBJ, id++);
    for (int i = 0; i < TBATCH; i++) release(p[i], OBJ, &w->sum);
  }
  w->t1 = h_now_ns();
  return NULL;
}

static uint64_t span_ns(const worker* w, uint64_t n) {
  uint64_t t0 = UINT64_MAX, t1 = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (w[i].t0 < t0) t0 = w[i].t0;
    if (w[i].t1 > t1) t1 = w[i].t1;
  }
  return t1 > t0 ? t1 - t0 : 1;
}

/* Starts one thread per worker on body, waits for them and folds their
 * checksums; returns the measured span. */
static uint64_t run_workers(void* (*body)(void*), worker* w, uint64_t n) {
  pthread_t th[64];
  pthread_barrier_init(&start_line, NULL, (unsigned)n);
  for (uint64_t i = 0; i < n; i++) pthread_create(&th[i], NULL, body, &w[i]);
  for (uint64_t i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    checksum += w[i].sum;
  }
  pthread_barrier_destroy(&start_line);
  return span_ns(w, n);
}

/* spawn=once: the threads are created once and run all their work in one
 * window. spawn=window: the work is cut into `windows` windows, each run by
 * threads created for it and pinned, thread i to the i-th CPU (mod the CPUs
 * this process may use), as a server's worker pool is: every window meets
 * the allocator with threads it has never seen, whose caches are created on
 * their first call (inside the window) and torn down when they exit.
 * Throughput is all calls over the sum of the windows' spans. */
static int wl_threads(void) {
  uint64_t nt = param_u64("threads", 1), ops = param_u64("ops", 10000000);
  bool per_window = strcmp(bench_param("spawn", "once"), "window") == 0;
  uint64_t windows = per_window ? param_u64("windows", 20) : 1;
  if (nt < 1 || nt > 64 || windows < 1) {
    fprintf(stderr, "threads: 1..64 threads, at least one window\n");
    return 1;
  }
  uint64_t rounds = ops / (2 * TBATCH * windows);
  int cpus[CPU_SETSIZE], ncpu = 0;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) cpus[ncpu++] = c;
  worker* w = h_map(nt * sizeof *w);
  uint64_t spans = 0;
  for (uint64_t win = 0; win < windows; win++) {
    for (uint64_t i = 0; i < nt; i++)
      w[i] = (worker){rounds, win * nt + i, per_window && ncpu ? cpus[i % (uint64_t)ncpu] : -1, 0, 0, 0};
    spans += run_workers(thread_body, w, nt);
  }
  print_header("threads");
  printf(",\"threads\":%llu,\"spawn\":\"%s\",\"windows\":%llu,\"ops_per_s\":%.0f", (unsigned long long)nt,
         per_window ? "window" : "once", (unsigned long long)windows,
         (double)(windows * nt * rounds * 2 * TBATCH) * 1e9 / (double)spans);
  print_footer();
  return 0;
}

/* ---- 5: producer/consumer ------------------------------------------------ */

enum { RING = 4096 };
static struct {
  void** slot;
  uint64_t items;
  _Alignas(64) _Atomic uint64_t head;
  _Alignas(64) _Atomic uint64_t tail;
} q;

/* Both sides spin, yielding now and then so a shared core still progresses. */
static void spin(unsigned* n) {
  if (++*n % 256 == 0) sched_yield();
}

static void* producer(void* arg) {
  worker* w = arg;
  pthread_barrier_wait(&start_line);
  w->t0 = h_now_ns();
  for (uint64_t i = 0; i < q.items; i++) {
    void* p = must_alloc(OBJ, i);
    unsigned n = 0;
    while (i - atomic_load_explicit(&q.tail, memory_order_acquire) >= RING) spin(&n);
    q.slot[i % RING] = p;
    atomic_store_explicit(&q.head, i + 1, memory_order_release);
  }
  w->t1 = h_now_ns();
  return NULL;
}

/* Reads each object, as the consumer of a message does, then frees it. */
static void* consumer(void* arg) {
  worker* w = arg;
  pthread_barrier_wait(&start_line);
  w->t0 = h_now_ns();
  for (uint64_t i = 0; i < q.items; i++) {
    unsigned n = 0;
    while (atomic_load_explicit(&q.head, memory_order_acquire) <= i) spin(&n);
    release(q.slot[i % RING], OBJ, &w->sum);
    atomic_store_explicit(&q.tail, i + 1, memory_order_release);
  }
  w->t1 = h_now_ns();
  return NULL;
}

static void* prodcons_body(void* arg) {
  worker* w = arg;
  return w->id == 0 ? producer(w) : consumer(w);
}

static int wl_prodcons(void) {
  q.items = param_u64("items", 5000000);
  q.slot = h_map(RING * sizeof *q.slot);
  worker* w = h_map(2 * sizeof *w);
  w[0].id = 0;
  w[1].id = 1;
  uint64_t span = run_workers(prodcons_body, w, 2);
  print_header("prodcons");
  printf(",\"ops_per_s\":%.0f", (double)q.items * 1e9 / (double)span);
  print_footer();
  return 0;
}

/* ---- 6: request server simulation ---------------------------------------- */

/* The seed's workload patterns (seeds/002) and a tiny request. The seed paced
 * them at fixed request rates; here they run closed-loop, as fast as the
 * allocator allows, and keep the per-request shape: objects per request,
 * sizes, requests per phase, how many requests later a request's objects die,
 * leak rate. */
typedef struct {
  const char* name;
  unsigned objs_min, objs_max;
  unsigned size_min, size_max;
  unsigned hot_pct; /* share of objects of the hot sizes 128 and 256 B */
  unsigned per_phase, lag;
  unsigned leak_per_10k;
} pattern;

static const pattern patterns[] = {
    {"tiny", 16, 16, 16, 256, 0, 1, 0, 0},
    {"burst", 80, 200, 64, 768, 0, 1, 0, 0},
    {"steady", 50, 50, 64, 768, 0, 8, 8, 0},
    {"leak", 100, 100, 64, 768, 0, 1, 0, 100},
    {"hotspot", 120, 120, 64, 768, 90, 1, 0, 0},
    {"kernel", 300, 300, 256, 4096, 0, 1, 0, 0},
};

typedef struct {
  void** p;
  uint32_t* size;
  unsigned n;
  be_phase_t phase;
} request;

static unsigned request_size(const pattern* pt, h_rng* r) {
  /* Patterns without hot sizes or leaks draw no number for them: the draws
   * are inside the timed request. */
  if (pt->hot_pct && h_range(r, 1, 100) <= pt->hot_pct) return h_rand(r) & 1 ? 128 : 256;
  return (unsigned)h_range(r, pt->size_min, pt->size_max);
}

/* A finished request reads its objects back (its last use of them) and frees
 * them, unless the phase's end frees them all (free=all); the phase's last
 * request ends the phase. */
static void request_retire(const pattern* pt, request* rq, uint64_t index, bool free_all) {
  for (unsigned i = 0; i < rq->n; i++) {
    if (free_all)
      checksum += h_obj_read(rq->p[i], rq->size[i]);
    else
      phase_release(rq->phase, rq->p[i], rq->size[i], &checksum);
  }
  rq->n = 0;
  if (index % pt->per_phase != pt->per_phase - 1) return;
  if (!free_all) {
    be_phase_end(rq->phase);
  } else if (be_phase_free_all(rq->phase) != 0) {
    fprintf(stderr, "%s: mode %s cannot free a phase whole (free=all)\n", be_name,
            bench_param("mode", be_default_mode));
    exit(2);
  }
}

/* free=each (default): a request frees each of its objects and the phase end
 * closes the phase; free=all: no object is freed, the phase end frees them
 * all (be_phase_free_all). */
static int wl_server(void) {
  const char* name = bench_param("pattern", "burst");
  const pattern* pt = NULL;
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++)
    if (strcmp(patterns[i].name, name) == 0) pt = &patterns[i];
  if (pt == NULL) {
    fprintf(stderr, "unknown pattern %s\n", name);
    return 1;
  }
  bool free_all = strcmp(bench_param("free", "each"), "all") == 0;
  uint64_t nreq = param_u64("requests", 20000);
  h_rng rng = {param_u64("seed", 7)};
  unsigned depth = pt->lag + 1;
  request* rq = h_map(depth * sizeof *rq);
  for (unsigned i = 0; i < depth; i++) {
    rq[i].p = h_map(pt->objs_max * sizeof *rq[i].p);
    rq[i].size = h_map(pt->objs_max * sizeof *rq[i].size);
  }
  uint64_t* lat = h_map(nreq * sizeof *lat);
  h_series rss;
  h_series_init(&rss, 512);
  uint64_t every = nreq / 200 + 1, objects = 0, leaked = 0;
  uint64_t base = h_rss();
  be_phase_t phase = 0;
  /* busy: the time spent in requests, without the RSS sampling between
   * them. One clock reading per request: a request starts when the one
   * before it ended, unless RSS was sampled in between. */
  uint64_t busy = 0, t0 = h_now_ns();
  for (uint64_t r = 0; r < nreq + pt->lag; r++) {
    if (r < nreq) {
      if (r % pt->per_phase == 0) phase = be_phase_begin();
      request* cur = &rq[r % depth];
      cur->phase = phase;
      unsigned n = (unsigned)h_range(&rng, pt->objs_min, pt->objs_max);
      for (unsigned i = 0; i < n; i++) {
        unsigned size = request_size(pt, &rng);
        void* p = must_phase_alloc(phase, size, objects + i);
        if (pt->leak_per_10k && h_range(&rng, 1, 10000) <= pt->leak_per_10k) {
          leaked++;
        } else {
          cur->p[cur->n] = p;
          cur->size[cur->n++] = size;
        }
      }
      objects += n;
    }
    if (r >= pt->lag) request_retire(pt, &rq[(r - pt->lag) % depth], r - pt->lag, free_all);
    uint64_t t1 = h_now_ns();
    busy += t1 - t0;
    if (r < nreq) lat[r] = t1 - t0;
    t0 = t1;
    if (r % every == 0) {
      h_series_sample(&rss);
      t0 = h_now_ns();
    }
  }
  h_series_sample(&rss);
  print_header("server");
  printf(",\"pattern\":\"%s\",\"free\":\"%s\",\"requests\":%llu,\"objects\":%llu,\"leaked\":%llu", pt->name,
         free_all ? "all" : "each", (unsigned long long)nreq, (unsigned long long)objects,
         (unsigned long long)leaked);
  printf(",\"req_per_s\":%.0f,\"rss_base\":%llu,\"rss_final\":%llu",
         (double)nreq * 1e9 / (double)busy, (unsigned long long)base,
         (unsigned long long)rss.rss[rss.n - 1]);
  h_print_pcts(stdout, "request_latency_ns", lat, nreq);
  h_series_print(stdout, "rss", &rss);
  print_footer();
  return 0;
}

/* ---- 7: lifetime-mixed memory run ---------------------------------------- */

/* Each request allocates short-lived objects that die with it; one request
 * in long_every also keeps one object alive for `window` requests (a
 * session, a cache entry). routing=aligned puts those long-lived objects in
 * long-lived memory (be_alloc), routing=mixed in the request's phase, as a
 * program that ignores lifetimes would. Mixed routing is only meaningful for
 * backends whose phase end keeps live objects valid (tslab, plain peers). */
static int wl_lifemix(void) {
  uint64_t nreq = param_u64("requests", 200000), objs = param_u64("objs", 64);
  uint64_t long_every = param_u64("long_every", 8);
  uint64_t window = param_u64("window", nreq / 10 + 1);
  bool mixed = strcmp(bench_param("routing", "aligned"), "mixed") == 0;
  h_rng rng = {param_u64("seed", 11)};
  void** p = h_map(objs * sizeof *p);
  void** keep = h_map(window * sizeof *keep);
  h_series rss;
  h_series_init(&rss, 512);
  uint64_t every = nreq / 200 + 1, base = h_rss(), rss_10 = 0, id = 0;
  uint64_t t0 = h_now_ns();
  for (uint64_t r = 0; r < nreq; r++) {
    void** k = &keep[r % window];
    if (*k) release(*k, OBJ, &checksum);
    *k = NULL;
    be_phase_t ph = be_phase_begin();
    for (uint64_t i = 0; i < objs; i++) p[i] = must_phase_alloc(ph, OBJ, id++);
    if (h_rand(&rng) % long_every == 0) *k = mixed ? must_phase_alloc(ph, OBJ, id++) : must_alloc(OBJ, id++);
    for (uint64_t i = 0; i < objs; i++) phase_release(ph, p[i], OBJ, &checksum);
    be_phase_end(ph);
    if (r % every == 0) h_series_sample(&rss);
    if (r == nreq / 10) rss_10 = h_rss();
  }
  uint64_t t1 = h_now_ns();
  h_series_sample(&rss);
  for (uint64_t i = 0; i < window; i++)
    if (keep[i]) checksum += h_obj_read(keep[i], OBJ);
  print_header("lifemix");
  printf(",\"routing\":\"%s\",\"requests\":%llu,\"req_per_s\":%.0f,\"rss_base\":%llu,"
         "\"rss_at_10pct\":%llu,\"rss_final\":%llu",
         mixed ? "mixed" : "aligned", (unsigned long long)nreq,
         (double)nreq * 1e9 / (double)(t1 - t0), (unsigned long long)base,
         (unsigned long long)rss_10, (unsigned long long)rss.rss[rss.n - 1]);
  h_series_print(stdout, "rss", &rss);
  /* Before the long-lived objects are freed: slabs_in_use counts them. */
  print_footer();
  for (uint64_t i = 0; i < window; i++)
    if (keep[i]) be_free(keep[i]);
  return 0;
}

/* ---- 7b: phase burst ----------------------------------------------------- */

/* A phase allocates `mib` MiB of 128 B objects, frees them and ends; RSS is
 * then sampled at fixed delays to see when the memory leaves the process.
 * The allocation is timed with each object's write: an allocator that faults
 * its pages in lazily pays the fault at the first write. */
static int wl_phase_burst(void) {
  uint64_t n = (param_u64("mib", 64) << 20) / OBJ;
  static const unsigned delays_ms[] = {0, 10, 100, 1000};
  void** p = h_map(n * sizeof *p);
  uint64_t base = h_rss();
  be_phase_t ph = be_phase_begin();
  uint64_t ta = h_now_ns();
  for (uint64_t i = 0; i < n; i++) p[i] = must_phase_alloc(ph, OBJ, i);
  uint64_t tb = h_now_ns();
  uint64_t peak = h_rss();
  for (uint64_t i = 0; i < n; i++) phase_release(ph, p[i], OBJ, &checksum);
  uint64_t t0 = h_now_ns();
  be_phase_end(ph);
  uint64_t t_end = h_now_ns();
  int64_t held[4];
  for (int i = 0; i < 4; i++) {
    h_sleep_until(t_end + delays_ms[i] * 1000000ull);
    held[i] = (int64_t)h_rss() - (int64_t)base;
  }
  print_header("phase_burst");
  printf(",\"rss_base\":%llu,\"rss_peak\":%llu,\"alloc_ns_per_object\":%.3f,\"phase_end_ns\":%llu,"
         "\"held_after_ms\":{",
         (unsigned long long)base, (unsigned long long)peak, (double)(tb - ta) / (double)n,
         (unsigned long long)(t_end - t0));
  for (int i = 0; i < 4; i++) printf("%s\"%u\":%lld", i ? "," : "", delays_ms[i], (long long)held[i]);
  printf("}");
  print_footer();
  return 0;
}

/* ------------------------------------------------------------------------ */

static const struct {
  const char* name;
  int (*run)(void);
} workloads[] = {
    {"churn", wl_churn},     {"batch", wl_batch},     {"mixed", wl_mixed},
    {"threads", wl_threads}, {"prodcons", wl_prodcons}, {"server", wl_server},
    {"lifemix", wl_lifemix}, {"phase_burst", wl_phase_burst},
};

int main(int argc, char** argv) {
  static char outbuf[1 << 16];
  setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
  if (argc < 2) {
    fprintf(stderr, "usage: %s WORKLOAD [mode=M] [key=value...]\n", argv[0]);
    return 1;
  }
  n_params = argc - 2;
  params = argv + 2;
  h_touch_init(n_params, params);
  const char* mode = bench_param("mode", be_default_mode);
  for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++) {
    if (strcmp(workloads[i].name, argv[1]) != 0) continue;
    if (be_init(mode) != 0) {
      fprintf(stderr, "%s: mode %s not supported\n", be_name, mode);
      return 3;
    }
    return workloads[i].run();
  }
  fprintf(stderr, "unknown workload %s\n", argv[1]);
  return 1;
}
