/* A request server instrumented by temporal-slab, with its statistics served
 * on a loopback HTTP endpoint for Prometheus (/metrics) and jq (/stats.json).
 *
 * Every request runs in an epoch of its own, labelled with its route. Workers
 * hand each request's access-log record to a logger thread that frees it
 * (cross-thread frees), and the "POST /api/upload" route keeps one object per
 * request: the deliberate leak that the label statistics expose. The modes reproduce the
 * three incidents walked through in docs/OBSERVABILITY.md:
 *
 *   requests   the workload above (the baseline)
 *   scheduler  the same with CPU-bound handlers, squeezed onto one CPU with
 *              busy threads: slow-path samples show wall time made of
 *              waiting for the CPU, not of allocator work
 *   leak       the upload route also forgets to leave its epoch (a reference
 *              held, never closed) at a request rate low enough for the
 *              leaked eras to outlive the 1 s leak threshold
 *   reclaim    batch phases of 16 MiB each, freed and closed: a close that
 *              returns runs to the OS reports RSS before and after (one that
 *              stays within the hot reserve makes no system call and reports
 *              none); with -L the process memory is locked, so the kernel
 *              refuses to take the pages back
 *
 * The program counts its own allocations and frees, checks them against the
 * allocator's counters at the end, and writes them as JSON (-c) so a test can
 * compare them with what Prometheus scraped.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tslab.h"

enum mode { MODE_REQUESTS, MODE_SCHEDULER, MODE_LEAK, MODE_RECLAIM };
static const char* const mode_names[] = {"requests", "scheduler", "leak", "reclaim"};

typedef struct route {
  const char* label;
  unsigned min_objs, max_objs;
  size_t max_size;
  bool leaks; /* keeps one object per request */
} route_t;

/* The upload route is one request in eight. */
static const route_t routes[] = {
    {"GET /api/users", 8, 24, 512, false},    {"POST /api/orders", 16, 48, 2048, false},
    {"GET /api/users", 8, 24, 512, false},    {"GET /static", 2, 6, 64 * 1024, false},
    {"GET /api/users", 8, 24, 512, false},    {"POST /api/orders", 16, 48, 2048, false},
    {"GET /api/search", 4, 32, 1024, false},  {"POST /api/upload", 4, 12, 4096, true},
};
#define NROUTES (sizeof routes / sizeof routes[0])
#define MAX_OBJS 48
#define RECLAIM_BATCH_BYTES (16u << 20)
#define RECLAIM_OBJECT 4096

typedef struct options {
  enum mode mode;
  double seconds;
  unsigned threads;
  unsigned rate; /* requests per second per worker */
  uint16_t port;
  bool lock_memory;
  const char* port_file;
  const char* counts_file;
  const char* json_file;
} options_t;

static tslab_t* A;
static options_t opt;
static atomic_bool stopping;
static _Atomic uint64_t n_requests, n_allocs, n_frees, n_remote_frees, n_alloc_failures, n_leaked;

/* Responses waiting for the logger thread, which frees them. */
#define HANDOFF_CAP 4096
static pthread_mutex_t handoff_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handoff_cv = PTHREAD_COND_INITIALIZER;
static void* handoff[HANDOFF_CAP];
static size_t handoff_len;
static bool handoff_closed;

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void sleep_ns(long ns) {
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static bool free_counted(void* p) {
  if (!tslab_free(A, p)) {
    fprintf(stderr, "request_server: free refused: %s\n", tslab_strerror(tslab_last_error()));
    return false;
  }
  atomic_fetch_add(&n_frees, 1);
  return true;
}

/* False when the queue is full: the caller frees the object itself. */
static bool hand_off(void* p) {
  pthread_mutex_lock(&handoff_mu);
  bool queued = handoff_len < HANDOFF_CAP;
  if (queued) handoff[handoff_len++] = p;
  pthread_cond_signal(&handoff_cv);
  pthread_mutex_unlock(&handoff_mu);
  return queued;
}

static void* logger_main(void* arg) {
  (void)arg;
  void* batch[256];
  for (;;) {
    pthread_mutex_lock(&handoff_mu);
    while (handoff_len == 0 && !handoff_closed) pthread_cond_wait(&handoff_cv, &handoff_mu);
    size_t n = handoff_len < 256 ? handoff_len : 256;
    handoff_len -= n;
    memcpy(batch, handoff + handoff_len, n * sizeof batch[0]);
    bool done = handoff_closed && handoff_len == 0 && n == 0;
    pthread_mutex_unlock(&handoff_mu);
    if (done) return NULL;
    for (size_t i = 0; i < n; i++) {
      if (free_counted(batch[i])) atomic_fetch_add(&n_remote_frees, 1);
    }
  }
}

static void serve_one(uint64_t* rng) {
  const route_t* r = &routes[rng_next(rng) % NROUTES];
  tslab_epoch_t e = tslab_epoch_advance(A);
  tslab_epoch_set_label(A, e, r->label);
  bool forgotten = opt.mode == MODE_LEAK && r->leaks;
  /* What an entered domain scope does; the leaking handler never exits it. */
  if (forgotten) tslab_epoch_ref(A, e);

  void* objs[MAX_OBJS];
  unsigned want = r->min_objs + (unsigned)(rng_next(rng) % (r->max_objs - r->min_objs + 1));
  unsigned n = 0;
  for (unsigned i = 0; i < want; i++) {
    size_t size = 16 + rng_next(rng) % r->max_size;
    void* p = tslab_alloc(A, size, e);
    if (!p) {
      atomic_fetch_add(&n_alloc_failures, 1);
      continue;
    }
    memset(p, (int)i, size < 256 ? size : 256); /* the handler builds its response */
    atomic_fetch_add(&n_allocs, 1);
    objs[n++] = p;
  }

  unsigned first = 0;
  if (r->leaks && n > 0) {
    atomic_fetch_add(&n_leaked, 1);
    first = 1;
  }
  for (unsigned i = first; i < n; i++) free_counted(objs[i]);

  /* The access-log record goes to the logger thread, which frees it. */
  size_t record_size = 64 + rng_next(rng) % 192;
  void* record = tslab_alloc(A, record_size, e);
  if (!record) {
    atomic_fetch_add(&n_alloc_failures, 1);
  } else {
    snprintf(record, record_size, "%s %u objects", r->label, n);
    atomic_fetch_add(&n_allocs, 1);
    if (!hand_off(record)) free_counted(record);
  }
  if (!forgotten) tslab_epoch_close(A, e);
  atomic_fetch_add(&n_requests, 1);
}

/* Busy for ns: the CPU-bound part of a request (parsing, rendering). */
static void compute_ns(uint64_t ns) {
  uint64_t end = tslab_now_ns() + ns;
  while (tslab_now_ns() < end) {
  }
}

static void* worker_main(void* arg) {
  uint64_t rng = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
  long pause = 1000000000L / (long)opt.rate;
  while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
    serve_one(&rng);
    /* A thread that sleeps between requests wakes with the scheduler's
     * favour and finishes a short request before it can be preempted; a
     * CPU-bound one runs out its time slices and is preempted anywhere,
     * slow-path allocations included. */
    if (opt.mode == MODE_SCHEDULER) {
      compute_ns((uint64_t)pause);
    } else {
      sleep_ns(pause); /* waiting on the network between requests */
    }
  }
  tslab_thread_flush(A);
  return NULL;
}

static void* hog_main(void* arg) {
  (void)arg;
  volatile uint64_t spin = 0;
  while (!atomic_load_explicit(&stopping, memory_order_relaxed)) spin++;
  return NULL;
}

/* One batch phase: fill an epoch, free everything, close it. */
static void reclaim_batch(unsigned index) {
  tslab_epoch_t e = tslab_epoch_advance(A);
  char label[TSLAB_LABEL_MAX];
  snprintf(label, sizeof label, "batch-%u", index);
  tslab_epoch_set_label(A, e, label);
  enum { N = RECLAIM_BATCH_BYTES / RECLAIM_OBJECT };
  static void* objs[N];
  unsigned n = 0;
  for (unsigned i = 0; i < N; i++) {
    void* p = tslab_alloc(A, RECLAIM_OBJECT, e);
    if (!p) {
      atomic_fetch_add(&n_alloc_failures, 1);
      continue;
    }
    memset(p, 1, RECLAIM_OBJECT);
    atomic_fetch_add(&n_allocs, 1);
    objs[n++] = p;
  }
  for (unsigned i = 0; i < n; i++) free_counted(objs[i]);
  tslab_epoch_close(A, e);
  atomic_fetch_add(&n_requests, 1);
}

static int write_text_file(const char* path, const char* text, size_t len) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  if (!f) return -1;
  size_t w = fwrite(text, 1, len, f);
  if (fclose(f) != 0 || w != len) return -1;
  return rename(tmp, path); /* readers never see half a file */
}

static int write_json_snapshot(const char* path) {
  size_t need = tslab_export_json(A, NULL, 0);
  size_t cap = need + need / 8 + 4096;
  char* buf = malloc(cap);
  if (!buf) return -1;
  size_t len = tslab_export_json(A, buf, cap);
  int rc = len > 0 && len < cap ? write_text_file(path, buf, len) : -1;
  free(buf);
  return rc;
}

static int write_counts(const char* path, const tslab_stats_global_t* g) {
  char text[1024];
  int n = snprintf(text, sizeof text,
                   "{\"mode\":\"%s\",\"requests\":%llu,\"allocations\":%llu,\"frees\":%llu,"
                   "\"cross_thread_frees\":%llu,\"alloc_failures\":%llu,\"leaked_objects\":%llu,"
                   "\"epochs_opened\":%llu,\"live_objects\":%llu}\n",
                   mode_names[opt.mode], (unsigned long long)n_requests,
                   (unsigned long long)n_allocs, (unsigned long long)n_frees,
                   (unsigned long long)n_remote_frees, (unsigned long long)n_alloc_failures,
                   (unsigned long long)n_leaked, (unsigned long long)g->epochs_opened_total,
                   (unsigned long long)g->live_objects);
  return write_text_file(path, text, (size_t)n);
}

/* The allocator's exact counters must agree with the program's own. */
static int check_counts(const tslab_stats_global_t* g) {
  int bad = 0;
#define AGREE(ours, theirs)                                                                  \
  if ((uint64_t)(ours) != (theirs)) {                                                        \
    fprintf(stderr, "request_server: %s = %llu but the allocator says %llu\n", #ours,         \
            (unsigned long long)(ours), (unsigned long long)(theirs));                        \
    bad = 1;                                                                                  \
  }
  AGREE(n_allocs, g->allocations_total);
  AGREE(n_frees, g->frees_total);
  AGREE(n_remote_frees, g->cross_thread_frees_total);
  AGREE(n_alloc_failures, g->alloc_failures_total);
  AGREE(n_allocs - n_frees, g->live_objects);
#undef AGREE
  return bad;
}

/* The outcome each mode exists to show, checked on the final snapshot. */
static int check_mode(void) {
  if (opt.mode == MODE_LEAK) {
    tslab_leak_t leaks[256];
    size_t n = tslab_leak_check(A, 1000000000u, leaks, 256);
    size_t upload = 0;
    for (size_t i = 0; i < n; i++) upload += strcmp(leaks[i].label, "POST /api/upload") == 0;
    if (upload == 0) {
      fprintf(stderr, "request_server: leak mode ended without a leaked upload era\n");
      return 1;
    }
  }
  if (opt.mode == MODE_RECLAIM && n_requests == 0) {
    fprintf(stderr, "request_server: no batch completed\n");
    return 1;
  }
  return 0;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: request_server [-m requests|scheduler|leak|reclaim] [-d SECONDS] [-t THREADS]\n"
          "                      [-r REQUESTS_PER_SECOND_PER_THREAD] [-p PORT] [-P PORT_FILE]\n"
          "                      [-c COUNTS_FILE] [-j JSON_FILE] [-L]\n");
}

static int parse_options(int argc, char** argv) {
  opt = (options_t){.mode = MODE_REQUESTS, .seconds = 5, .threads = 4, .rate = 0};
  int c;
  while ((c = getopt(argc, argv, "m:d:t:r:p:P:c:j:Lh")) != -1) {
    switch (c) {
      case 'm': {
        size_t i = 0;
        while (i < 4 && strcmp(optarg, mode_names[i]) != 0) i++;
        if (i == 4) return -1;
        opt.mode = (enum mode)i;
        break;
      }
      case 'd':
        opt.seconds = atof(optarg);
        break;
      case 't':
        opt.threads = (unsigned)atoi(optarg);
        break;
      case 'r':
        opt.rate = (unsigned)atoi(optarg);
        break;
      case 'p':
        opt.port = (uint16_t)atoi(optarg);
        break;
      case 'P':
        opt.port_file = optarg;
        break;
      case 'c':
        opt.counts_file = optarg;
        break;
      case 'j':
        opt.json_file = optarg;
        break;
      case 'L':
        opt.lock_memory = true;
        break;
      case 'h':
        return 1;
      default:
        return -1;
    }
  }
  /* The leak mode's rate keeps 256 ring slots busy for more than the 1 s
   * leak threshold, so forgotten eras are reported before a new era forces
   * their close. */
  if (opt.rate == 0) opt.rate = opt.mode == MODE_LEAK ? 20 : 1000;
  if (optind != argc || opt.seconds <= 0 || opt.threads == 0 || opt.threads > 64) return -1;
  return 0;
}

int main(int argc, char** argv) {
  int parsed = parse_options(argc, argv);
  if (parsed != 0) {
    usage(parsed > 0 ? stdout : stderr);
    return parsed > 0 ? 0 : 2;
  }
  if (opt.lock_memory && mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0) {
    perror("request_server: mlockall");
    return 2;
  }
  if (opt.mode == MODE_SCHEDULER) {
    /* Threads inherit the mask: workers and hogs share one CPU. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
  }

  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = 256; /* every in-flight request holds an era */
  cfg.reserve_bytes = (size_t)4 << 30;
  A = tslab_create(&cfg);
  if (!A) {
    fprintf(stderr, "request_server: tslab_create: %s\n", tslab_strerror(tslab_last_error()));
    return 1;
  }
  tslab_sampling_set(A, 1); /* time every slow-path allocation */
  int rc = tslab_http_start(A, "127.0.0.1", opt.port);
  if (rc != TSLAB_OK) {
    fprintf(stderr, "request_server: tslab_http_start: %s\n", tslab_strerror(rc));
    tslab_destroy(A);
    return 1;
  }
  char port_text[16];
  int port_len = snprintf(port_text, sizeof port_text, "%u\n", (unsigned)tslab_http_port(A));
  printf("request_server: mode %s, serving http://127.0.0.1:%s", mode_names[opt.mode], port_text);
  fflush(stdout);
  if (opt.port_file && write_text_file(opt.port_file, port_text, (size_t)port_len) != 0) {
    perror("request_server: port file");
  }

  pthread_t logger, workers[64], hogs[64];
  unsigned n_workers = opt.mode == MODE_RECLAIM ? 0 : opt.threads;
  unsigned n_hogs = opt.mode == MODE_SCHEDULER ? 2 * opt.threads : 0;
  bool started = pthread_create(&logger, NULL, logger_main, NULL) == 0;
  for (unsigned i = 0; started && i < n_workers; i++) {
    started = pthread_create(&workers[i], NULL, worker_main, (void*)(uintptr_t)i) == 0;
  }
  for (unsigned i = 0; started && i < n_hogs; i++) {
    started = pthread_create(&hogs[i], NULL, hog_main, NULL) == 0;
  }
  if (!started) {
    perror("request_server: pthread_create");
    _exit(1); /* threads already running would use the instance during destroy */
  }

  uint64_t deadline = tslab_now_ns() + (uint64_t)(opt.seconds * 1e9);
  for (unsigned batch = 0; tslab_now_ns() < deadline; batch++) {
    if (opt.mode == MODE_RECLAIM) reclaim_batch(batch);
    sleep_ns(200 * 1000 * 1000);
  }
  atomic_store(&stopping, true);
  for (unsigned i = 0; i < n_workers; i++) pthread_join(workers[i], NULL);
  for (unsigned i = 0; i < n_hogs; i++) pthread_join(hogs[i], NULL);
  pthread_mutex_lock(&handoff_mu);
  handoff_closed = true;
  pthread_cond_signal(&handoff_cv);
  pthread_mutex_unlock(&handoff_mu);
  pthread_join(logger, NULL);

  tslab_stats_global_t g;
  tslab_stats_global(A, &g);
  int bad = check_counts(&g) | check_mode();
  if (opt.counts_file && write_counts(opt.counts_file, &g) != 0) {
    perror("request_server: counts file");
    bad = 1;
  }
  if (opt.json_file && write_json_snapshot(opt.json_file) != 0) {
    perror("request_server: JSON file");
    bad = 1;
  }
  printf("request_server: %llu requests, %llu allocations, %llu frees (%llu cross-thread), "
         "%llu leaked, %llu failed allocations\n",
         (unsigned long long)n_requests, (unsigned long long)n_allocs,
         (unsigned long long)n_frees, (unsigned long long)n_remote_frees,
         (unsigned long long)n_leaked, (unsigned long long)n_alloc_failures);
  tslab_destroy(A); /* also stops the endpoint */
  return bad;
}
