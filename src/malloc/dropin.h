/* Internals of the drop-in malloc (libtslab-malloc). docs/DROPIN.md tells
 * the design; the drop-in uses only the public API of include/tslab.h, so it
 * stays independent of the core's internals. Nothing declared here is
 * exported. */
#ifndef TSLAB_DROPIN_H
#define TSLAB_DROPIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tslab.h"
#include "tslab_malloc.h"

#define DROPIN_HIDDEN __attribute__((visibility("hidden")))
#define dropin_likely(x) __builtin_expect(!!(x), 1)
#define dropin_unlikely(x) __builtin_expect(!!(x), 0)

/* ---- the calling thread (thread.c) ---- */

typedef struct dropin_thread {
  /* The epoch plain malloc allocates in: the innermost scope's, else the
   * process epoch. 0 until the thread's first allocation sets it, and while
   * the thread runs drop-in code that may allocate (guard): the fast path
   * tests only this word. */
  tslab_epoch_t epoch;
  /* Nonzero while the drop-in runs core code that may call malloc; such
   * calls are served by the bootstrap arena instead of recursing. */
  uint32_t guard;
  uint32_t depth;
  tslab_epoch_t scopes[TSLAB_MALLOC_SCOPE_MAX];
  /* Bit k: scope k was pushed by tslab_malloc_domain_enter (its exit is
   * tslab_malloc_domain_exit's, which also exits the domain). */
  uint64_t domain_scopes;
} dropin_thread_t;

/* Initial-exec TLS: reading it never allocates (libtslab-malloc is loaded
 * at start-up, never with dlopen). */
DROPIN_HIDDEN extern __thread dropin_thread_t dropin_tls __attribute__((tls_model("initial-exec")));

/* The epoch the thread allocates in when it is not guarded: the innermost
 * scope's or the process epoch. */
DROPIN_HIDDEN tslab_epoch_t dropin_thread_epoch(void);
/* Recompute dropin_tls.epoch after a scope or process epoch change (no
 * effect while the guard is raised: lowering it recomputes). */
DROPIN_HIDDEN void dropin_thread_refresh(void);

/* Raise and lower the guard around drop-in code that may allocate. Raising
 * clears the epoch word, so the fast paths divert to the slow path, which
 * sees the guard and serves the bootstrap arena. */
static inline void dropin_guard_enter(void) {
  dropin_tls.guard++;
  dropin_tls.epoch = 0;
}
static inline void dropin_guard_exit(void) {
  dropin_tls.guard--;
  dropin_thread_refresh();
}

/* ---- the request ---- */

/* The size the drop-in asks the core for: C's malloc must align a block for
 * every type with a fundamental alignment that fits in it (max_align_t, 16
 * bytes here: a long double fits in 24 bytes), where the core aligns a
 * 24-byte class to 8. Sizes above 8 go up to a multiple of 16, whose class
 * is one (every class of a 16-byte multiple size starts its slots on 16);
 * a size so large that rounding would wrap is left alone (the core refuses
 * it). A size of 0 asks for 1 byte: malloc(0) returns a unique pointer,
 * and the core refuses 0 as a bad size, counting a failure in the
 * instance's statistics and setting the thread's error (the slow path once
 * served it that way: a successful malloc(0) counted as a failed call). */
static inline size_t dropin_request(size_t size) {
  size_t up = (size + 15) & ~(size_t)15;
  if (size <= 8) return size | (size == 0);
  return up < size ? size : up;
}

/* ---- the process-wide instance (process.c) ---- */

/* NULL until created. Read on every malloc and free. */
DROPIN_HIDDEN extern tslab_t* _Atomic dropin_heap_ptr;
static inline tslab_t* dropin_heap(void) {
  return atomic_load_explicit(&dropin_heap_ptr, memory_order_relaxed);
}
/* Create the instance once (concurrent callers wait) and publish it once
 * the core is initialised; false until then, or when it could not be
 * created (dropin_process_failed). Call with the guard raised. */
DROPIN_HIDDEN bool dropin_process_init(void);
DROPIN_HIDDEN bool dropin_process_failed(void);
/* dropin_process_init with the guard raised around it; true when the
 * instance exists. */
DROPIN_HIDDEN bool dropin_ensure(void);
/* The process epoch; when `closed` names it, a fresh one replaces it first. */
DROPIN_HIDDEN tslab_epoch_t dropin_process_epoch(void);
DROPIN_HIDDEN tslab_epoch_t dropin_process_epoch_renew(tslab_epoch_t closed);

/* ---- counters of the drop-in (process.c) ---- */

typedef struct dropin_counters {
  _Atomic uint64_t foreign_frees, foreign_reallocs, foreign_usable_size;
  _Atomic uint64_t bootstrap_allocs, bootstrap_bytes;
  _Atomic uint64_t scope_fallbacks, process_epoch_renewals;
} dropin_counters_t;
DROPIN_HIDDEN extern dropin_counters_t dropin_counters;
#define DROPIN_COUNT(field) atomic_fetch_add_explicit(&dropin_counters.field, 1, memory_order_relaxed)

/* ---- options from the environment (options.c) ---- */

enum dropin_show_stats { DROPIN_STATS_OFF = 0, DROPIN_STATS_TEXT = 1, DROPIN_STATS_JSON = 2 };

typedef struct dropin_options {
  tslab_config_t config;
  int show_stats;            /* enum dropin_show_stats */
  bool verbose;
  bool http;                 /* TSLAB_HTTP given */
  char http_address[64];
  uint16_t http_port;
} dropin_options_t;

/* Read the TSLAB_* variables once; invalid values keep the default and are
 * reported on stderr. Never allocates. */
DROPIN_HIDDEN void dropin_options_read(dropin_options_t* out);

/* Write a message to stderr without allocating ("tslab-malloc: " prefix). */
DROPIN_HIDDEN void dropin_message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the bootstrap arena (bootstrap.c) ---- */

/* A zeroed block (never reused, so always zero); NULL when exhausted. */
DROPIN_HIDDEN void* dropin_bootstrap_alloc(size_t size, size_t alignment);
/* Is p a block of the bootstrap arena? Then *usable (if not NULL) is its size. */
DROPIN_HIDDEN bool dropin_bootstrap_owns(const void* p, size_t* usable);

/* ---- the malloc family (alloc.c) ---- */

/* The slow paths behind the exported names in override.c: the rest of the
 * family is written in terms of these. */
DROPIN_HIDDEN void* dropin_alloc_slow(size_t size, size_t alignment, bool zero);
DROPIN_HIDDEN void dropin_free_slow(void* p);
DROPIN_HIDDEN void* dropin_realloc(void* p, size_t size);
/* malloc_usable_size of a pointer that is not a live block of the instance. */
DROPIN_HIDDEN size_t dropin_usable_size_slow(const void* p);

#endif /* TSLAB_DROPIN_H */
