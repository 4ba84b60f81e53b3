/* temporal-slab: the seed-compatible epoch domain API.
 *
 * Link with -ltslab-compat -ltslab (slab_alloc.h says more).
 *
 * Scopes bound to an epoch slot, as in the seed, built on the native domains
 * of tslab.h (see there for the exact rules). Beyond the seed:
 *
 * - Thread confinement is checked: entering, exiting, force-closing or
 *   destroying a domain from a thread other than its creator, exiting out of
 *   LIFO order, exiting a domain that is not entered and destroying an
 *   entered domain do nothing (no assertion, no crash) and set the thread's
 *   reason, readable with tslab_last_error().
 * - Era safety: a domain remembers the era its slot held when the domain was
 *   made. Once that era is closed or its slot reused, the domain can no
 *   longer be entered and allocations in epoch_id fail; they never land in a
 *   later round of the same slot.
 * - epoch_domain_create() opens a fresh era without closing the current
 *   slot, so nested domains (a query inside a transaction) keep the outer
 *   one usable; the seed went through epoch_advance() and closed it.
 * - epoch_domain_force_close() closes the epoch but leaves the entered
 *   scopes entered; exit them as usual.
 *
 * Copyright (c) 2026 the temporal-slab developers. MIT licence.
 */
#ifndef EPOCH_DOMAIN_H
#define EPOCH_DOMAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "slab_alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read the fields; do not write them. */
typedef struct epoch_domain {
  SlabAllocator* alloc;    /* the allocator */
  EpochId epoch_id;        /* the slot: allocate with slab_malloc_epoch(alloc, n, epoch_id) */
  uint64_t epoch_era;      /* the era the slot held when the domain was made */
  uint32_t refcount;       /* entered scopes (nesting depth) */
  bool auto_close;         /* close the epoch when the last scope exits and on destroy */
  tslab_domain_t* native;  /* private: use the epoch_domain_* calls on it */
} epoch_domain_t;

/* A domain over a freshly opened epoch (it becomes the current slot) that
 * closes when its last scope exits. NULL with a reason on failure. */
TSLAB_API epoch_domain_t* epoch_domain_create(SlabAllocator* alloc);

/* A domain over the current era of slot epoch_id, which must accept
 * allocations; with auto_close it closes like a created one, else it never
 * closes the epoch. NULL with a reason on failure. */
TSLAB_API epoch_domain_t* epoch_domain_wrap(SlabAllocator* alloc, EpochId epoch_id,
                                            bool auto_close);

/* Enter a scope (nesting allowed) / exit the innermost one. */
TSLAB_API void epoch_domain_enter(epoch_domain_t* domain);
TSLAB_API void epoch_domain_exit(epoch_domain_t* domain);

/* The innermost entered domain of this thread, or NULL (also when the
 * innermost scope is a native domain). */
TSLAB_API epoch_domain_t* epoch_domain_current(void);

/* The allocator of epoch_domain_current(), or NULL. */
TSLAB_API SlabAllocator* epoch_domain_allocator(void);

/* Free a domain that is not entered (closing the epoch when auto_close).
 * An entered domain, or a call from another thread, is refused and the
 * domain stays valid. NULL is ignored. */
TSLAB_API void epoch_domain_destroy(epoch_domain_t* domain);

/* Close the domain's epoch now, whatever its scopes. */
TSLAB_API void epoch_domain_force_close(epoch_domain_t* domain);

#ifdef __cplusplus
}
#endif

#endif /* EPOCH_DOMAIN_H */
