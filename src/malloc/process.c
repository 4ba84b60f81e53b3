/* The process-wide instance behind malloc, created on first use.
 *
 * The first allocation of the process can come from anywhere: the C
 * library's start-up, a constructor of another library, the dynamic loader
 * on behalf of dlopen. The instance is created then, by whichever thread
 * gets there first, with the guard raised (so that whatever the creation
 * allocates comes from the bootstrap arena instead of recursing); threads
 * that arrive meanwhile wait for it. Once published, the instance never
 * changes and is never destroyed: memory may be freed until the very last
 * destructor of the process runs.
 *
 * Plain malloc allocates in the process epoch, the era current at creation,
 * labelled "process". It is long-lived by design, but a program may close it
 * (or advance the ring until it is force-closed); then the first allocation
 * that finds it closed opens a fresh one, so malloc never fails for a reason
 * a malloc caller could not understand.
 *
 * The constructor starts what needs a running C library (the metrics
 * endpoint's thread); the destructor prints the statistics. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dropin.h"

tslab_t* _Atomic dropin_heap_ptr;
dropin_counters_t dropin_counters;

enum { INIT_NONE, INIT_CREATING, INIT_CREATED, INIT_PUBLISHING, INIT_DONE, INIT_FAILED };
static _Atomic int init_state;
static tslab_t* created;  /* the instance, before it is published */
static _Atomic tslab_epoch_t process_epoch;
static pthread_mutex_t renew_mu = PTHREAD_MUTEX_INITIALIZER;
static dropin_options_t options;

/* A reservation the system refuses (a limit on address space) shrinks
 * until it fits, down to the smallest the core takes (tslab.h, 4 MiB): a
 * smaller instance is better than no malloc. */
#define RESERVE_MIN ((size_t)4 << 20)
static tslab_t* create_instance(tslab_config_t* c) {
  for (;;) {
    tslab_t* a = tslab_create(c);
    if (a || tslab_last_error() != TSLAB_ERR_OUT_OF_MEMORY || c->reserve_bytes / 2 < RESERVE_MIN) return a;
    c->reserve_bytes /= 2;
    if (c->max_alloc_size > c->reserve_bytes / 2) c->max_alloc_size = c->reserve_bytes / 2;
  }
}

static void publish(tslab_t* a) {
  tslab_epoch_t e = tslab_epoch_current(a);
  (void)tslab_epoch_set_label(a, e, "process");
  atomic_store_explicit(&process_epoch, e, memory_order_relaxed);
  atomic_store_explicit(&dropin_heap_ptr, a, memory_order_release);
  if (options.verbose)
    dropin_message("pid %d: instance of %zu bytes reserved, release policy %d, process epoch %llu\n",
                   (int)getpid(), options.config.reserve_bytes, (int)options.config.release_policy,
                   (unsigned long long)e);
}

bool dropin_process_init(void) {
  int s = atomic_load_explicit(&init_state, memory_order_acquire);
  if (dropin_likely(s == INIT_DONE)) return true;
  if (s == INIT_NONE &&
      atomic_compare_exchange_strong_explicit(&init_state, &s, INIT_CREATING, memory_order_acq_rel,
                                              memory_order_acquire)) {
    dropin_options_read(&options);
    created = create_instance(&options.config);
    if (!created)
      dropin_message("cannot create the process instance: %s\n", tslab_strerror(tslab_last_error()));
    s = created ? INIT_CREATED : INIT_FAILED;
    atomic_store_explicit(&init_state, s, memory_order_release);
  }
  while (s == INIT_CREATING || s == INIT_PUBLISHING) {
    sched_yield();
    s = atomic_load_explicit(&init_state, memory_order_acquire);
  }
  if (s == INIT_CREATED &&
      atomic_compare_exchange_strong_explicit(&init_state, &s, INIT_PUBLISHING, memory_order_acq_rel,
                                              memory_order_acquire)) {
    publish(created);
    atomic_store_explicit(&init_state, INIT_DONE, memory_order_release);
    return true;
  }
  while (s == INIT_PUBLISHING) {
    sched_yield();
    s = atomic_load_explicit(&init_state, memory_order_acquire);
  }
  return s == INIT_DONE;
}

bool dropin_process_failed(void) {
  return atomic_load_explicit(&init_state, memory_order_relaxed) == INIT_FAILED;
}

tslab_epoch_t dropin_process_epoch(void) {
  return atomic_load_explicit(&process_epoch, memory_order_relaxed);
}

tslab_epoch_t dropin_process_epoch_renew(tslab_epoch_t closed) {
  tslab_t* a = dropin_heap();
  if (!a) return 0;
  pthread_mutex_lock(&renew_mu);
  if (atomic_load_explicit(&process_epoch, memory_order_relaxed) == closed) {
    tslab_epoch_t e = tslab_epoch_advance(a);
    (void)tslab_epoch_set_label(a, e, "process");
    atomic_store_explicit(&process_epoch, e, memory_order_relaxed);
    DROPIN_COUNT(process_epoch_renewals);
  }
  pthread_mutex_unlock(&renew_mu);
  return dropin_process_epoch();
}

bool dropin_ensure(void) {
  if (dropin_likely(dropin_heap() != NULL)) return true;
  dropin_guard_enter();
  bool ok = dropin_process_init();
  dropin_guard_exit();
  return ok;
}

/* ---- the public side ---- */

tslab_t* tslab_malloc_instance(void) {
  return dropin_ensure() ? dropin_heap() : NULL;
}

tslab_epoch_t tslab_malloc_process_epoch(void) {
  return dropin_ensure() ? dropin_process_epoch() : 0;
}

void tslab_malloc_stats(tslab_malloc_stats_t* out) {
  if (!out) return;
  const dropin_counters_t* c = &dropin_counters;
  out->foreign_frees = atomic_load(&c->foreign_frees);
  out->foreign_reallocs = atomic_load(&c->foreign_reallocs);
  out->foreign_usable_size = atomic_load(&c->foreign_usable_size);
  out->bootstrap_allocs = atomic_load(&c->bootstrap_allocs);
  out->bootstrap_bytes = atomic_load(&c->bootstrap_bytes);
  out->scope_fallbacks = atomic_load(&c->scope_fallbacks);
  out->process_epoch_renewals = atomic_load(&c->process_epoch_renewals);
}

static void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0 && errno != EINTR) return;
    if (w > 0) {
      s += w;
      n -= (size_t)w;
    }
  }
}

/* The instance's JSON document with the drop-in's counters beside it. The
 * buffer is mapped, not allocated, so the printout does not change what it
 * reports. */
static void print_json(int fd, tslab_t* a, const tslab_malloc_stats_t* m) {
  char head[512];
  int n = snprintf(head, sizeof head,
                   "{\"pid\":%d,\"dropin\":{\"foreign_frees\":%llu,\"foreign_reallocs\":%llu,"
                   "\"foreign_usable_size\":%llu,\"bootstrap_allocs\":%llu,\"bootstrap_bytes\":%llu,"
                   "\"scope_fallbacks\":%llu,\"process_epoch_renewals\":%llu},\"instance\":",
                   (int)getpid(), (unsigned long long)m->foreign_frees,
                   (unsigned long long)m->foreign_reallocs, (unsigned long long)m->foreign_usable_size,
                   (unsigned long long)m->bootstrap_allocs, (unsigned long long)m->bootstrap_bytes,
                   (unsigned long long)m->scope_fallbacks, (unsigned long long)m->process_epoch_renewals);
  write_all(fd, head, (size_t)n);
  size_t need = tslab_export_json(a, NULL, 0);
  size_t cap = need + need / 4 + 4096;
  char* buf = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf != MAP_FAILED) {
    size_t len = tslab_export_json(a, buf, cap);
    if (len > 0 && len < cap) {
      while (len > 0 && buf[len - 1] == '\n') len--;
      write_all(fd, buf, len);
    } else {
      write_all(fd, "null", 4);
    }
    munmap(buf, cap);
  } else {
    write_all(fd, "null", 4);
  }
  write_all(fd, "}\n", 2);
}

static void print_text(int fd, tslab_t* a, const tslab_malloc_stats_t* m) {
  tslab_stats_global_t g;
  if (tslab_stats_global(a, &g) != TSLAB_OK) return;
  char buf[2048];
  int n = snprintf(
      buf, sizeof buf,
      "tslab-malloc: pid %d statistics\n"
      "  allocations       %llu\n  frees             %llu\n  cross-thread frees %llu\n"
      "  live objects      %llu\n  live bytes        %llu\n  resident estimate %llu bytes\n"
      "  committed         %llu bytes (high-water mark)\n  process RSS       %llu bytes\n"
      "  slabs in use      %llu, empty %llu, released granules %llu\n"
      "  release calls     %llu (%llu bytes)\n  invalid frees     %llu (core count, foreign included)\n"
      "  alloc failures    %llu\n  epochs opened     %llu, closed %llu\n"
      "  thread caches     %llu (%llu attached)\n"
      "  foreign frees     %llu\n  foreign reallocs  %llu\n  foreign usable_size %llu\n"
      "  bootstrap blocks  %llu (%llu bytes)\n  scope fallbacks   %llu\n"
      "  process epoch renewals %llu\n",
      (int)getpid(), (unsigned long long)g.allocations_total, (unsigned long long)g.frees_total,
      (unsigned long long)g.cross_thread_frees_total, (unsigned long long)g.live_objects,
      (unsigned long long)g.live_bytes, (unsigned long long)g.resident_estimate_bytes,
      (unsigned long long)g.committed_bytes, (unsigned long long)g.rss_bytes,
      (unsigned long long)g.slabs_in_use, (unsigned long long)g.slabs_empty,
      (unsigned long long)g.slabs_released, (unsigned long long)g.release_calls_total,
      (unsigned long long)g.release_bytes_total, (unsigned long long)g.invalid_frees_total,
      (unsigned long long)g.alloc_failures_total, (unsigned long long)g.epochs_opened_total,
      (unsigned long long)g.epochs_closed_total, (unsigned long long)g.thread_caches,
      (unsigned long long)g.threads_active, (unsigned long long)m->foreign_frees,
      (unsigned long long)m->foreign_reallocs, (unsigned long long)m->foreign_usable_size,
      (unsigned long long)m->bootstrap_allocs, (unsigned long long)m->bootstrap_bytes,
      (unsigned long long)m->scope_fallbacks, (unsigned long long)m->process_epoch_renewals);
  if (n > 0) write_all(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void print_stats(int fd, int format) {
  tslab_t* a = dropin_heap();
  if (!a) return;
  tslab_malloc_stats_t m;
  tslab_malloc_stats(&m);
  dropin_guard_enter();
  if (format == DROPIN_STATS_JSON)
    print_json(fd, a, &m);
  else
    print_text(fd, a, &m);
  dropin_guard_exit();
}

void tslab_malloc_print_stats(int fd) {
  print_stats(fd, DROPIN_STATS_TEXT);
}

/* After the C library's constructors (it is a dependency of this library):
 * creating the instance here at the latest keeps its cost out of the first
 * request, and the endpoint's thread can start safely. */
__attribute__((constructor)) static void dropin_start(void) {
  if (!dropin_ensure() || !options.http) return;
  dropin_guard_enter();
  int st = tslab_http_start(dropin_heap(), options.http_address, options.http_port);
  uint16_t port = st == TSLAB_OK ? tslab_http_port(dropin_heap()) : 0;
  dropin_guard_exit();
  if (st != TSLAB_OK)
    dropin_message("TSLAB_HTTP: cannot serve metrics on %s port %u: %s\n", options.http_address,
                   (unsigned)options.http_port, tslab_strerror(st));
  else if (options.verbose)
    dropin_message("pid %d serves /metrics and /stats.json on %s port %u\n", (int)getpid(),
                   options.http_address, (unsigned)port);
}

__attribute__((destructor)) static void dropin_finish(void) {
  if (options.show_stats != DROPIN_STATS_OFF) print_stats(STDERR_FILENO, options.show_stats);
}
