/* The benchmark workloads, written once against backend.h.
 *
 * Usage: bench_<allocator> WORKLOAD [key=value...]
 * Prints one JSON object on stdout with the parameters and the measured
 * figures. Every workload keeps the harness's memory (pointer arrays, sample
 * buffers) in mmap'd memory set up before its timed region, so timed regions
 * contain only allocator calls and one store per object.
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

static const char* param_str(const char* key, const char* dflt) { return h_arg_str(n_params, params, key, dflt); }

static uint64_t param_u64(const char* key, uint64_t dflt) { return h_arg_u64(n_params, params, key, dflt); }

static void print_header(const char* workload) {
  printf("{\"workload\":\"%s\",\"allocator\":\"%s\",\"version\":\"%s\",\"mode\":\"%s\"", workload,
         be_name, be_version(), param_str("mode", be_default_mode));
  printf(",\"params\":{");
  for (int i = 0; i < n_params; i++) {
    const char* eq = strchr(params[i], '=');
    if (eq) printf("%s\"%.*s\":\"%s\"", i ? "," : "", (int)(eq - params[i]), params[i], eq + 1);
  }
  printf("}");
}

static void print_footer(void) {
  be_report(stdout);
  printf("}\n");
}

static void* must_alloc(size_t size) {
  void* p = be_alloc(size);
  if (p == NULL) {
    fprintf(stderr, "%s: allocation of %zu bytes failed\n", be_name, size);
    exit(2);
  }
  h_touch(p, size);
  return p;
}

static void* must_phase_alloc(be_phase_t ph, size_t size) {
  void* p = be_phase_alloc(ph, size);
  if (p == NULL) {
    fprintf(stderr, "%s: phase allocation of %zu bytes failed\n", be_name, size);
    exit(2);
  }
  h_touch(p, size);
  return p;
}

enum { OBJ = 128 };

/* ---- 1: churn ----------------------------------------------------------- */

static void churn_loop(uint64_t pairs) {
  for (uint64_t i = 0; i < pairs; i++) be_free(must_alloc(OBJ));
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
  for (uint64_t i = 0; i < n; i++) p[i] = must_alloc(OBJ);
  if (lifo)
    for (uint64_t i = n; i-- > 0;) be_free(p[i]);
  else
    for (uint64_t i = 0; i < n; i++) be_free(p[i]);
}

static double batch_ns_per_op(void** p, uint64_t n, uint64_t rounds, bool lifo) {
  batch_round(p, n, lifo);
  uint64_t t0 = h_now_ns();
  for (uint64_t r = 0; r < rounds; r++) batch_round(p, n, lifo);
  return (double)(h_now_ns() - t0) / (double)(2 * n * rounds);
}

static int wl_batch(void) {
  uint64_t n = param_u64("n", 10000), rounds = param_u64("rounds", 200);
  uint64_t lat_rounds = param_u64("lat_rounds", 50);
  void** p = h_map(n * sizeof *p);
  double fifo = batch_ns_per_op(p, n, rounds, false);
  double lifo = batch_ns_per_op(p, n, rounds, true);

  /* Per-call latency: each allocation and each free timed on its own. */
  size_t ns = (size_t)(n * lat_rounds);
  uint64_t* la = h_map(ns * sizeof *la);
  uint64_t* lf = h_map(ns * sizeof *lf);
  size_t k = 0;
  for (uint64_t r = 0; r < lat_rounds; r++) {
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t0 = h_now_ns();
      void* q = be_alloc(OBJ);
      uint64_t t1 = h_now_ns();
      if (q == NULL) exit(2);
      h_touch(q, OBJ);
      p[i] = q;
      la[k + i] = t1 - t0;
    }
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t0 = h_now_ns();
      be_free(p[i]);
      lf[k + i] = h_now_ns() - t0;
    }
    k += n;
  }
  uint64_t tmed, tp99;
  h_timer_overhead(&tmed, &tp99);
  print_header("batch");
  printf(",\"fifo_ns_per_op\":%.3f,\"lifo_ns_per_op\":%.3f", fifo, lifo);
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
  uint32_t* slot = h_map(ops * sizeof *slot);
  uint32_t* size = h_map(ops * sizeof *size);
  for (uint64_t i = 0; i < ops; i++) {
    slot[i] = (uint32_t)(h_rand(&rng) % live);
    size[i] = mixed_size(&rng, max);
  }
  uint64_t live_req = 0;
  for (uint64_t i = 0; i < live; i++) {
    uint32_t s = mixed_size(&rng, max);
    live_req += s;
    p[i] = must_alloc(s);
  }
  uint64_t t0 = h_now_ns();
  for (uint64_t i = 0; i < ops; i++) {
    be_free(p[slot[i]]);
    p[slot[i]] = must_alloc(size[i]);
  }
  uint64_t t1 = h_now_ns();
  print_header("mixed");
  printf(",\"ns_per_op\":%.3f,\"rss_bytes\":%llu,\"initial_live_requested_bytes\":%llu",
         (double)(t1 - t0) / (double)ops, (unsigned long long)h_rss(),
         (unsigned long long)live_req);
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
  uint64_t t0, t1;
} worker;

static void* thread_body(void* arg) {
  worker* w = arg;
  void* p[TBATCH];
  pthread_barrier_wait(&start_line);
  w->t0 = h_now_ns();
  for (uint64_t r = 0; r < w->rounds; r++) {
    for (int i = 0; i < TBATCH; i++) p[i] = must_alloc(OBJ);
    for (int i = 0; i < TBATCH; i++) be_free(p[i]);
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

static int wl_threads(void) {
  uint64_t nt = param_u64("threads", 1), ops = param_u64("ops", 10000000);
  uint64_t rounds = ops / (2 * TBATCH);
  pthread_t* th = h_map(nt * sizeof *th);
  worker* w = h_map(nt * sizeof *w);
  pthread_barrier_init(&start_line, NULL, (unsigned)nt);
  for (uint64_t i = 0; i < nt; i++) {
    w[i].rounds = rounds;
    pthread_create(&th[i], NULL, thread_body, &w[i]);
  }
  for (uint64_t i = 0; i < nt; i++) pthread_join(th[i], NULL);
  print_header("threads");
  printf(",\"threads\":%llu,\"ops_per_s\":%.0f", (unsigned long long)nt,
         (double)(nt * rounds * 2 * TBATCH) * 1e9 / (double)span_ns(w, nt));
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
    void* p = must_alloc(OBJ);
    unsigned n = 0;
    while (i - atomic_load_explicit(&q.tail, memory_order_acquire) >= RING) spin(&n);
    q.slot[i % RING] = p;
    atomic_store_explicit(&q.head, i + 1, memory_order_release);
  }
  w->t1 = h_now_ns();
  return NULL;
}

static void* consumer(void* arg) {
  worker* w = arg;
  pthread_barrier_wait(&start_line);
  w->t0 = h_now_ns();
  for (uint64_t i = 0; i < q.items; i++) {
    unsigned n = 0;
    while (atomic_load_explicit(&q.head, memory_order_acquire) <= i) spin(&n);
    be_free(q.slot[i % RING]);
    atomic_store_explicit(&q.tail, i + 1, memory_order_release);
  }
  w->t1 = h_now_ns();
  return NULL;
}

static int wl_prodcons(void) {
  q.items = param_u64("items", 5000000);
  q.slot = h_map(RING * sizeof *q.slot);
  pthread_t pt, ct;
  worker* w = h_map(2 * sizeof *w);
  pthread_barrier_init(&start_line, NULL, 2);
  pthread_create(&pt, NULL, producer, &w[0]);
  pthread_create(&ct, NULL, consumer, &w[1]);
  pthread_join(pt, NULL);
  pthread_join(ct, NULL);
  print_header("prodcons");
  printf(",\"ops_per_s\":%.0f", (double)q.items * 1e9 / (double)span_ns(w, 2));
  print_footer();
  return 0;
}

/* ---- 6: request server simulation ---------------------------------------- */

/* The seed's workload patterns (seeds/002). The seed paced them at fixed
 * request rates; here they run closed-loop, as fast as the allocator allows,
 * and keep the per-request shape: objects per request, sizes, requests per
 * phase, how many requests later a request's objects die, leak rate. */
typedef struct {
  const char* name;
  unsigned objs_min, objs_max;
  unsigned size_min, size_max;
  unsigned hot_pct; /* share of objects of the hot sizes 128 and 256 B */
  unsigned per_phase, lag;
  unsigned leak_per_10k;
} pattern;

static const pattern patterns[] = {
    {"burst", 80, 200, 64, 768, 0, 1, 0, 0},
    {"steady", 50, 50, 64, 768, 0, 8, 8, 0},
    {"leak", 100, 100, 64, 768, 0, 1, 0, 100},
    {"hotspot", 120, 120, 64, 768, 90, 1, 0, 0},
    {"kernel", 300, 300, 256, 4096, 0, 1, 0, 0},
};

typedef struct {
  void** p;
  unsigned n;
  be_phase_t phase;
} request;

static unsigned request_size(const pattern* pt, h_rng* r) {
  if (h_range(r, 1, 100) <= pt->hot_pct) return h_rand(r) & 1 ? 128 : 256;
  return (unsigned)h_range(r, pt->size_min, pt->size_max);
}

/* Frees a finished request's objects and ends its phase after the phase's
 * last request. */
static void request_retire(const pattern* pt, request* rq, uint64_t index) {
  for (unsigned i = 0; i < rq->n; i++) be_phase_free(rq->phase, rq->p[i]);
  rq->n = 0;
  if (index % pt->per_phase == pt->per_phase - 1) be_phase_end(rq->phase);
}

static int wl_server(void) {
  const char* name = param_str("pattern", "burst");
  const pattern* pt = NULL;
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++)
    if (strcmp(patterns[i].name, name) == 0) pt = &patterns[i];
  if (pt == NULL) {
    fprintf(stderr, "unknown pattern %s\n", name);
    return 1;
  }
  uint64_t nreq = param_u64("requests", 20000);
  h_rng rng = {param_u64("seed", 7)};
  unsigned depth = pt->lag + 1;
  request* rq = h_map(depth * sizeof *rq);
  for (unsigned i = 0; i < depth; i++) rq[i].p = h_map(pt->objs_max * sizeof(void*));
  uint64_t* lat = h_map(nreq * sizeof *lat);
  h_series rss;
  h_series_init(&rss, 512);
  uint64_t every = nreq / 200 + 1, objects = 0, leaked = 0;
  uint64_t base = h_rss();
  be_phase_t phase = 0;
  uint64_t t_start = h_now_ns();
  for (uint64_t r = 0; r < nreq + pt->lag; r++) {
    uint64_t t0 = h_now_ns();
    if (r < nreq) {
      if (r % pt->per_phase == 0) phase = be_phase_begin();
      request* cur = &rq[r % depth];
      cur->phase = phase;
      unsigned n = (unsigned)h_range(&rng, pt->objs_min, pt->objs_max);
      for (unsigned i = 0; i < n; i++) {
        void* p = must_phase_alloc(phase, request_size(pt, &rng));
        if (h_range(&rng, 1, 10000) <= pt->leak_per_10k)
          leaked++;
        else
          cur->p[cur->n++] = p;
      }
      objects += n;
    }
    if (r >= pt->lag) request_retire(pt, &rq[(r - pt->lag) % depth], r - pt->lag);
    if (r < nreq) lat[r] = h_now_ns() - t0;
    if (r % every == 0) h_series_sample(&rss);
  }
  uint64_t t_end = h_now_ns();
  h_series_sample(&rss);
  print_header("server");
  printf(",\"pattern\":\"%s\",\"requests\":%llu,\"objects\":%llu,\"leaked\":%llu", pt->name,
         (unsigned long long)nreq, (unsigned long long)objects, (unsigned long long)leaked);
  printf(",\"req_per_s\":%.0f,\"rss_base\":%llu,\"rss_final\":%llu",
         (double)nreq * 1e9 / (double)(t_end - t_start), (unsigned long long)base,
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
  bool mixed = strcmp(param_str("routing", "aligned"), "mixed") == 0;
  h_rng rng = {param_u64("seed", 11)};
  void** p = h_map(objs * sizeof *p);
  void** keep = h_map(window * sizeof *keep);
  h_series rss;
  h_series_init(&rss, 512);
  uint64_t every = nreq / 200 + 1, base = h_rss(), rss_10 = 0;
  uint64_t t0 = h_now_ns();
  for (uint64_t r = 0; r < nreq; r++) {
    void** k = &keep[r % window];
    if (*k) be_free(*k);
    *k = NULL;
    be_phase_t ph = be_phase_begin();
    for (uint64_t i = 0; i < objs; i++) p[i] = must_phase_alloc(ph, OBJ);
    if (h_rand(&rng) % long_every == 0) *k = mixed ? must_phase_alloc(ph, OBJ) : must_alloc(OBJ);
    for (uint64_t i = 0; i < objs; i++) be_phase_free(ph, p[i]);
    be_phase_end(ph);
    if (r % every == 0) h_series_sample(&rss);
    if (r == nreq / 10) rss_10 = h_rss();
  }
  uint64_t t1 = h_now_ns();
  h_series_sample(&rss);
  print_header("lifemix");
  printf(",\"routing\":\"%s\",\"requests\":%llu,\"req_per_s\":%.0f,\"rss_base\":%llu,"
         "\"rss_at_10pct\":%llu,\"rss_final\":%llu",
         mixed ? "mixed" : "aligned", (unsigned long long)nreq,
         (double)nreq * 1e9 / (double)(t1 - t0), (unsigned long long)base,
         (unsigned long long)rss_10, (unsigned long long)rss.rss[rss.n - 1]);
  h_series_print(stdout, "rss", &rss);
  print_footer();
  for (uint64_t i = 0; i < window; i++)
    if (keep[i]) be_free(keep[i]);
  return 0;
}

/* ---- 7b: phase burst ----------------------------------------------------- */

/* A phase allocates `mib` MiB of 128 B objects, frees them and ends; RSS is
 * then sampled at fixed delays to see when the memory leaves the process. */
static int wl_phase_burst(void) {
  uint64_t n = (param_u64("mib", 64) << 20) / OBJ;
  static const unsigned delays_ms[] = {0, 10, 100, 1000};
  void** p = h_map(n * sizeof *p);
  uint64_t base = h_rss();
  be_phase_t ph = be_phase_begin();
  for (uint64_t i = 0; i < n; i++) p[i] = must_phase_alloc(ph, OBJ);
  uint64_t peak = h_rss();
  for (uint64_t i = 0; i < n; i++) be_phase_free(ph, p[i]);
  uint64_t t0 = h_now_ns();
  be_phase_end(ph);
  uint64_t t_end = h_now_ns();
  int64_t held[4];
  for (int i = 0; i < 4; i++) {
    h_sleep_until(t_end + delays_ms[i] * 1000000ull);
    held[i] = (int64_t)h_rss() - (int64_t)base;
  }
  print_header("phase_burst");
  printf(",\"rss_base\":%llu,\"rss_peak\":%llu,\"phase_end_ns\":%llu,\"held_after_ms\":{",
         (unsigned long long)base, (unsigned long long)peak, (unsigned long long)(t_end - t0));
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
  const char* mode = param_str("mode", be_default_mode);
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
