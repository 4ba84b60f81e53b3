/* temporal-slab drop-in malloc: scoped malloc.
 *
 * libtslab-malloc replaces the C library's allocator (malloc, free, calloc,
 * realloc, the aligned calls, malloc_usable_size, C++ new and delete) with a
 * process-wide tslab instance, under LD_PRELOAD or linked before the C
 * library. Plain malloc allocates in a long-lived process epoch of that
 * instance. This header adds what no other allocator has: scoped malloc. A
 * thread that enters a scope makes its plain malloc (and every library's it
 * calls: a parser, a compressor, the C library itself) allocate in the
 * scope's epoch until it leaves the scope, so everything a request allocates
 * is accounted to the request and reclaimed when its epoch closes.
 *
 * The functions here are exported by libtslab-malloc only (docs/DROPIN.md).
 * Scopes are per thread and nest (LIFO). Memory allocated in a scope stays
 * valid after the scope ends and may be freed by any thread at any time: free()
 * handles it like any free of a live allocation of the instance. realloc()
 * keeps an object in its epoch while that epoch is open; once it is closed,
 * a move goes to the epoch the calling thread allocates in now. When a
 * scope's epoch is closed while the scope is entered, malloc in the scope
 * falls back to the process epoch rather than fail (counted).
 *
 * Copyright (c) 2026 the temporal-slab developers. MIT licence.
 */
#ifndef TSLAB_MALLOC_H
#define TSLAB_MALLOC_H

#include "tslab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deepest nesting of malloc scopes per thread. */
#define TSLAB_MALLOC_SCOPE_MAX 64

/* The process-wide instance behind malloc (created on first use; NULL only
 * when it could not be created). Create scope epochs and domains on it:
 * pointers of other instances are foreign to free(). */
TSLAB_API tslab_t* tslab_malloc_instance(void);

/* The long-lived epoch plain malloc uses outside scopes (labelled
 * "process"). 0 when the instance could not be created. */
TSLAB_API tslab_epoch_t tslab_malloc_process_epoch(void);

/* The epoch the calling thread's malloc allocates in now: the innermost
 * scope's, else the process epoch. */
TSLAB_API tslab_epoch_t tslab_malloc_epoch(void);

/* Enter a scope: the calling thread's malloc allocates in e (an epoch of
 * tslab_malloc_instance()) until the matching exit. Fails, changing nothing,
 * with the epoch's status (TSLAB_ERR_EPOCH_CLOSED / _STALE / _UNKNOWN),
 * TSLAB_ERR_LIMIT (TSLAB_MALLOC_SCOPE_MAX scopes entered) or
 * TSLAB_ERR_OUT_OF_MEMORY (no instance). */
TSLAB_API int tslab_malloc_scope_enter(tslab_epoch_t e);

/* Leave the innermost scope, which must be on e: TSLAB_ERR_NOT_ENTERED when
 * no scope is entered, TSLAB_ERR_NOT_INNERMOST when the innermost scope is
 * on another epoch or is a domain's (leave that with
 * tslab_malloc_domain_exit). Leaving never closes e. */
TSLAB_API int tslab_malloc_scope_exit(tslab_epoch_t e);

/* Enter a domain of tslab_malloc_instance() (tslab_domain_enter) and a
 * malloc scope on its epoch in one step: tslab_domain_alloc and plain malloc
 * both allocate in the domain's epoch. Fails, changing nothing, with
 * TSLAB_ERR_INVALID_ARGUMENT (NULL, or a domain of another instance),
 * TSLAB_ERR_LIMIT, or what tslab_domain_enter returns. */
TSLAB_API int tslab_malloc_domain_enter(tslab_domain_t* d);

/* Leave the scope entered by tslab_malloc_domain_enter(d) and exit the
 * domain (which closes its epoch when it owns it and this was its last
 * scope). TSLAB_ERR_NOT_INNERMOST when the innermost malloc scope is not
 * the one d's enter pushed (a plain scope on d's epoch is not), else what
 * tslab_domain_exit returns; on failure nothing changes. */
TSLAB_API int tslab_malloc_domain_exit(tslab_domain_t* d);

/* What the drop-in counts beside the instance's own statistics. */
typedef struct {
  /* Pointers passed to free, realloc or malloc_usable_size that lie outside
   * the instance's reservation and are not bootstrap blocks: memory of
   * another allocator or of the dynamic loader. They are left alone (never
   * given to the wrong allocator). Invalid frees of the instance's own
   * memory (double, interior) are the instance's `invalid_frees_total`. */
  uint64_t foreign_frees;
  uint64_t foreign_reallocs;
  uint64_t foreign_usable_size;
  /* Blocks served by the bootstrap arena: allocations made while the
   * instance was being created or while core code the drop-in called
   * allocated (never freed), and their bytes. */
  uint64_t bootstrap_allocs;
  uint64_t bootstrap_bytes;
  /* Allocations in a scope whose epoch no longer accepted them, served from
   * the process epoch instead. */
  uint64_t scope_fallbacks;
  /* Times the process epoch was replaced because it had been closed. */
  uint64_t process_epoch_renewals;
} tslab_malloc_stats_t;

TSLAB_API void tslab_malloc_stats(tslab_malloc_stats_t* out);

/* Write the statistics printed at exit under TSLAB_SHOW_STATS to fd. */
TSLAB_API void tslab_malloc_print_stats(int fd);

#ifdef __cplusplus
}
#endif

#endif /* TSLAB_MALLOC_H */
