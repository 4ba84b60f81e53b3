/* temporal-slab: the seed-compatible statistics snapshots.
 *
 * Link with -ltslab-compat -ltslab (slab_alloc.h says more).
 *
 * The seed's three snapshot levels (global, per size class, per epoch) with
 * its field names, filled from the native snapshots of tslab.h, which carry
 * more (per-era history, labels, leak signals, JSON and Prometheus output).
 * Fields that describe mechanisms this allocator does not have (bitmap CAS
 * loops, slab lists, bounded slab caches, class locks) read 0; each is
 * marked "no equivalent" below. Size class indexes are the seed's eight
 * classes (0..7 = 64, 96, 128, 192, 256, 384, 512, 768 bytes); each sums the
 * native classes whose object size falls in (previous seed size, its size].
 *
 * Copyright (c) 2026 the temporal-slab developers. MIT licence.
 */
#ifndef SLAB_STATS_H
#define SLAB_STATS_H

#include <stdint.h>

#include "slab_alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLAB_STATS_VERSION 1
#define SLAB_STATS_CLASS_COUNT 8u

typedef enum EpochLifecycleState {
  EPOCH_ACTIVE = 0,  /* accepts allocations */
  EPOCH_CLOSING = 1  /* rejects allocations; live objects drain */
} EpochLifecycleState;

typedef struct SlabGlobalStats {
  uint32_t version;                 /* SLAB_STATS_VERSION */
  uint32_t current_epoch;           /* current slot */
  uint32_t active_epoch_count;      /* slots accepting allocations */
  uint32_t closing_epoch_count;     /* slots rejecting them */
  uint64_t total_slabs_allocated;   /* slabs formatted */
  uint64_t total_slabs_recycled;    /* formats that reused an empty slab */
  uint64_t net_slabs;               /* slabs and large spans in use */
  uint64_t rss_bytes_current;       /* process RSS */
  uint64_t estimated_slab_rss_bytes;/* slab bytes not released to the OS */
  uint64_t total_slow_path_hits;
  uint64_t total_cache_overflows;   /* no equivalent: 0 */
  uint64_t total_slow_cache_miss;   /* formats that needed fresh memory */
  uint64_t total_slow_epoch_closed; /* allocations refused: slot closed */
  uint64_t total_madvise_calls;     /* releases to the OS */
  uint64_t total_madvise_bytes;
  uint64_t total_madvise_failures;  /* release calls the OS refused */
  uint64_t total_bitmap_alloc_cas_retries;     /* no equivalent: 0 */
  uint64_t total_bitmap_free_cas_retries;      /* no equivalent: 0 */
  uint64_t total_current_partial_cas_failures; /* no equivalent: 0 */
  uint64_t total_bitmap_alloc_attempts;        /* allocations */
  uint64_t total_bitmap_free_attempts;         /* frees */
  uint64_t total_current_partial_cas_attempts; /* no equivalent: 0 */
} SlabGlobalStats;

typedef struct SlabClassStats {
  uint32_t version;                 /* SLAB_STATS_VERSION */
  uint32_t class_index;             /* seed class 0..7 */
  uint32_t object_size;             /* seed size of the class */
  uint64_t slow_path_hits;
  uint64_t new_slab_count;             /* no per-class equivalent: 0 */
  uint64_t list_move_partial_to_full;  /* no equivalent: 0 */
  uint64_t list_move_full_to_partial;  /* no equivalent: 0 */
  uint64_t current_partial_null;       /* no equivalent: 0 */
  uint64_t current_partial_full;       /* no equivalent: 0 */
  uint64_t empty_slab_recycled;        /* no per-class equivalent: 0 */
  uint64_t empty_slab_overflowed;      /* no equivalent: 0 */
  uint64_t bitmap_alloc_cas_retries;   /* no equivalent: 0 */
  uint64_t bitmap_free_cas_retries;    /* no equivalent: 0 */
  uint64_t current_partial_cas_failures; /* no equivalent: 0 */
  uint64_t bitmap_alloc_attempts;      /* allocations */
  uint64_t bitmap_free_attempts;       /* frees */
  uint64_t lock_fast_acquire;          /* no equivalent (no class lock): 0 */
  uint64_t lock_contended;             /* no equivalent: 0 */
  double avg_alloc_cas_retries_per_attempt; /* 0 */
  double lock_contention_rate;              /* 0 */
  uint32_t scan_mode;                  /* no equivalent: 0 (sequential) */
  uint32_t scan_adapt_checks;          /* no equivalent: 0 */
  uint32_t scan_adapt_switches;        /* no equivalent: 0 */
  uint64_t live_objects;               /* beyond the seed */
  uint64_t net_slabs;                  /* slabs in use */
  uint64_t estimated_rss_bytes;        /* bytes of those slabs */
} SlabClassStats;

typedef struct SlabEpochStats {
  uint32_t version;                 /* SLAB_STATS_VERSION */
  uint32_t class_index;             /* as passed (the figures cover all classes) */
  uint32_t object_size;             /* seed size of that class */
  EpochId epoch_id;                 /* slot */
  uint64_t epoch_era;               /* the slot's current era */
  EpochLifecycleState state;
  uint64_t open_since_ns;           /* monotonic time the era opened */
  uint64_t alloc_count;             /* live objects */
  char label[32];
  uint64_t refcount;                /* domain references (beyond the seed) */
  uint64_t rss_before_close;        /* process RSS around the era's close; */
  uint64_t rss_after_close;         /* 0 until closed */
  uint32_t partial_slab_count;      /* slabs holding live objects (full ones too) */
  uint32_t full_slab_count;         /* no equivalent (counted as partial): 0 */
  uint64_t estimated_rss_bytes;     /* resident bytes of the era's slabs */
  uint32_t reclaimable_slab_count;  /* empty slabs still held by the era */
  uint64_t reclaimable_bytes;       /* no equivalent: 0 */
} SlabEpochStats;

/* Snapshots. Invalid arguments (NULL, class >= 8, slot >= 16) leave *out
 * zeroed (when out is not NULL) and set the thread's reason. */
TSLAB_API void slab_stats_global(SlabAllocator* alloc, SlabGlobalStats* out);
TSLAB_API void slab_stats_class(SlabAllocator* alloc, uint32_t size_class, SlabClassStats* out);
/* Per-era figures cover every size class: the native allocator keeps no
 * per-(epoch, class) counters. */
TSLAB_API void slab_stats_epoch(SlabAllocator* alloc, uint32_t size_class, EpochId epoch,
                                SlabEpochStats* out);

#ifdef __cplusplus
}
#endif

#endif /* SLAB_STATS_H */
