/* temporal-slab: the seed-compatible allocator API.
 *
 * Programs written against the first temporal-slab release compile against
 * this header unchanged and keep its documented behaviour. Every function is
 * a thin wrapper over the native API in tslab.h, which new code should use.
 * The wrappers are in libtslab-compat: link with -ltslab-compat -ltslab
 * (pkg-config tslab-compat; CMake tslab::tslab_compat), for this header,
 * epoch_domain.h and slab_stats.h alike.
 *
 * Epoch IDs are ring slots 0..15, as in the seed. Each slot names the newest
 * era (see tslab.h) opened in it; all 16 slots accept allocations from
 * slab_allocator_create() on. Where this layer goes beyond the seed:
 *
 * - Sizes: alloc_obj_epoch() and slab_malloc_epoch() accept any size from 1
 *   up to the native maximum (1 GiB by default), not only up to 768 / 760
 *   bytes, and slab_malloc_epoch() puts no header in front of the object.
 * - Era safety: an object belongs to the era its slot held when it was
 *   allocated. When epoch_advance() reaches a slot again it opens a fresh
 *   era there, closing the old one if it was still open (the seed kept the
 *   slot open and silently mixed the lifetimes of both rounds in it). Objects
 *   of the old era stay valid and can be freed as usual.
 * - Errors: calls that fail (NULL, false, or nothing for void functions) set
 *   the calling thread's reason, readable with tslab_last_error().
 *
 * Thread safety as in tslab.h: every function may be called from any thread.
 *
 * Copyright (c) 2026 the temporal-slab developers. MIT licence.
 */
#ifndef SLAB_ALLOC_H
#define SLAB_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tslab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of epoch ring slots (EpochId 0 .. SLAB_EPOCH_COUNT - 1). */
#define SLAB_EPOCH_COUNT 16u

/* An allocator instance (opaque). */
typedef struct SlabAllocator SlabAllocator;

/* A 64-bit handle naming one allocation; 0 is never valid. Handles of freed
 * objects, or of slots reused since, are detected: free_obj() returns false. */
typedef uint64_t SlabHandle;

/* An epoch ring slot, 0 .. SLAB_EPOCH_COUNT - 1. */
typedef uint32_t EpochId;

/* Counters of one seed size class (see get_perf_counters()). */
typedef struct PerfCounters {
  uint64_t slow_path_hits;            /* allocations that left the fast path */
  uint64_t new_slab_count;            /* no per-class equivalent: reads 0 */
  uint64_t list_move_partial_to_full; /* no equivalent (no slab lists): 0 */
  uint64_t list_move_full_to_partial; /* no equivalent (no slab lists): 0 */
  uint64_t current_partial_null;      /* no equivalent (thread caches): 0 */
  uint64_t current_partial_full;      /* no equivalent (thread caches): 0 */
  uint64_t empty_slab_recycled;       /* no per-class equivalent: reads 0 */
  uint64_t empty_slab_overflowed;     /* no equivalent (no bounded cache): 0 */
} PerfCounters;

/* ---- Lifetime ---------------------------------------------------------- */

/* A new allocator with all 16 slots open; the current slot is 0. NULL (with
 * a reason) when the native instance cannot be created. */
TSLAB_API SlabAllocator* slab_allocator_create(void);

/* Destroy the allocator and all of its memory. NULL is ignored. */
TSLAB_API void slab_allocator_free(SlabAllocator* alloc);

/* ---- Handle API -------------------------------------------------------- */

/* Allocate size bytes in slot epoch; *out_handle (when not NULL) receives
 * the handle, or 0 on failure. NULL when the slot is closed or out of range,
 * the size is 0 or too large, or memory runs out. */
TSLAB_API void* alloc_obj_epoch(SlabAllocator* alloc, uint32_t size, EpochId epoch,
                                SlabHandle* out_handle);

/* Free by handle. False for 0, stale, forged, already freed or another
 * allocator's handles (never a crash). */
TSLAB_API bool free_obj(SlabAllocator* alloc, SlabHandle handle);

/* ---- Malloc-style API ---------------------------------------------------- */

/* Allocate size bytes in slot epoch (no per-object header). */
TSLAB_API void* slab_malloc_epoch(SlabAllocator* alloc, size_t size, EpochId epoch);

/* Free a pointer from slab_malloc_epoch() or alloc_obj_epoch(). NULL is a
 * no-op; pointers that are not live allocations of alloc are ignored and
 * counted as invalid frees. */
TSLAB_API void slab_free(SlabAllocator* alloc, void* ptr);

/* ---- Epochs -------------------------------------------------------------- */

/* The current slot (0 for a NULL allocator). */
TSLAB_API EpochId epoch_current(SlabAllocator* alloc);

/* Close the current slot (it rejects new allocations; its empty slabs are
 * returned to the OS as by epoch_close()) and make the next slot current,
 * opening a fresh era there (closing the era it held if still open). */
TSLAB_API void epoch_advance(SlabAllocator* alloc);

/* Close slot epoch: it rejects new allocations until epoch_advance() reaches
 * it again, and its empty slabs are returned to the OS before the call
 * returns. Live objects stay valid. Out-of-range slots are ignored. */
TSLAB_API void epoch_close(SlabAllocator* alloc, EpochId epoch);

/* Label the slot's current era (at most 31 bytes kept). NULL clears. */
TSLAB_API void slab_epoch_set_label(SlabAllocator* alloc, EpochId epoch, const char* label);

/* Domain reference count of the slot's current era (leak signals report
 * eras whose count stays above zero). Decrementing below zero is refused. */
TSLAB_API void slab_epoch_inc_refcount(SlabAllocator* alloc, EpochId epoch);
TSLAB_API void slab_epoch_dec_refcount(SlabAllocator* alloc, EpochId epoch);
TSLAB_API uint64_t slab_epoch_get_refcount(SlabAllocator* alloc, EpochId epoch);

/* ---- Instrumentation and utilities ------------------------------------- */

/* Counters of seed size class size_class (0..7 = 64, 96, 128, 192, 256, 384,
 * 512, 768 bytes), summed over the native classes whose object size falls
 * in (previous seed size, this seed size]. Out-of-range classes give zeros. */
TSLAB_API void get_perf_counters(SlabAllocator* alloc, uint32_t size_class, PerfCounters* out);

/* Objects per slab of the size class that serves obj_size (0 when none). */
TSLAB_API uint32_t slab_object_count(uint32_t obj_size);

/* Process resident set size in bytes (0 if unknown). */
TSLAB_API uint64_t read_rss_bytes_linux(void);

/* Monotonic clock in nanoseconds. */
TSLAB_API uint64_t now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* SLAB_ALLOC_H */
