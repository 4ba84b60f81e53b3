/* temporal-slab: an epoch-routed slab allocator.
 *
 * Every allocation belongs to an epoch: an application-defined phase such as a
 * request, a frame, a transaction or a batch. Objects of one epoch share slabs
 * and never share a slab with another epoch, so when a phase ends its slabs
 * drain together. Empty slabs are recycled continuously, and closing an epoch
 * returns its empty slabs to the operating system before the call returns.
 *
 * This is the only header a user needs. All functions are thread-safe unless
 * documented otherwise (epoch domains are confined to the thread that created
 * them). No function aborts on bad input: failures return NULL, false or a
 * status code, and tslab_last_error() tells the calling thread why.
 *
 * Copyright (c) 2026 the temporal-slab developers. MIT licence.
 */
#ifndef TSLAB_H
#define TSLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSLAB_VERSION_MAJOR 0
#define TSLAB_VERSION_MINOR 1
#define TSLAB_VERSION_PATCH 0

#if defined(__GNUC__)
#define TSLAB_API __attribute__((visibility("default")))
#define TSLAB_MALLOC_LIKE __attribute__((malloc, warn_unused_result))
#else
#define TSLAB_API
#define TSLAB_MALLOC_LIKE
#endif

/* ------------------------------------------------------------------------- */
/* Types                                                                     */
/* ------------------------------------------------------------------------- */

/* An allocator instance. Instances are independent of each other. C++
 * code sees the type under another tag, because there tslab is the
 * namespace of tslab.hpp; the type is only ever used through pointers, so
 * both views of it agree. */
#ifdef __cplusplus
typedef struct tslab_instance tslab_t;
#else
typedef struct tslab tslab_t;
#endif

/* An epoch, named by its era: a 64-bit number that only grows and is never
 * reused. Era 0 is never a valid epoch. The epoch lives in ring slot
 * era % ring_size; once a newer era takes that slot the old era is "stale"
 * and every call naming it is rejected with TSLAB_ERR_EPOCH_STALE. */
typedef uint64_t tslab_epoch_t;

/* A 64-bit name of an allocation that can be validated without trusting a
 * raw pointer: it detects reuse of its slot (a stale handle) and handles from
 * another instance. 0 is never a valid handle. */
typedef uint64_t tslab_handle_t;

/* Status codes. 0 is success; every failure has its own code. */
typedef enum tslab_status {
  TSLAB_OK = 0,
  TSLAB_ERR_INVALID_ARGUMENT = 1,  /* NULL allocator, bad config, bad flag... */
  TSLAB_ERR_BAD_SIZE = 2,          /* size 0, or above the maximum */
  TSLAB_ERR_BAD_ALIGNMENT = 3,     /* alignment not a power of two, or too large */
  TSLAB_ERR_EPOCH_CLOSED = 4,      /* the epoch is closing or closed */
  TSLAB_ERR_EPOCH_STALE = 5,       /* the era's ring slot now holds a newer era */
  TSLAB_ERR_EPOCH_UNKNOWN = 6,     /* era 0, or an era not opened yet */
  TSLAB_ERR_OUT_OF_MEMORY = 7,     /* the OS refused memory, or the reservation is full */
  TSLAB_ERR_INVALID_POINTER = 8,   /* not a live allocation of this instance */
  TSLAB_ERR_INVALID_HANDLE = 9,    /* stale, forged or foreign handle */
  TSLAB_ERR_WRONG_THREAD = 10,     /* a thread-confined object used from another thread */
  TSLAB_ERR_NOT_INNERMOST = 11,    /* domain exit out of LIFO order */
  TSLAB_ERR_DOMAIN_ENTERED = 12,   /* destroying a domain that is still entered */
  TSLAB_ERR_NOT_ENTERED = 13,      /* exiting a domain that is not entered */
  TSLAB_ERR_NO_DOMAIN = 14,        /* no domain is entered on this thread */
  TSLAB_ERR_LIMIT = 15,            /* a bounded table is full (labels, domain depth) */
  TSLAB_ERR_IO = 16,               /* a socket or file operation failed (exporters) */
  TSLAB_ERR_BUSY = 17,             /* already running (HTTP endpoint) */
  TSLAB_ERR_NOT_SUPPORTED = 18     /* not available on this platform */
} tslab_status_t;

/* How empty memory is returned to the operating system. Every policy keeps
 * a bounded **hot reserve** of empty, resident memory for the next epochs
 * (see tslab_config_t: thread_reserve_max per thread cache plus
 * pool_resident_max for the instance), so that short epochs (one per
 * request) cost no system call and no page fault; tslab_reserve_release()
 * empties it on demand. */
typedef enum tslab_release_policy {
  /* Default. An empty slab or block goes to the hot reserve while it has
   * room, where any epoch reuses it; a slab of an epoch that is still open
   * may stay beyond it, up to pool_decay_max, for pool_decay_ms (decay).
   * tslab_epoch_close() releases every empty slab of the closed epoch that
   * does not fit the reserve, decayed ones included; a slab of a closed
   * epoch that empties later goes to the reserve if it fits, else the free
   * that empties it releases it. */
  TSLAB_RELEASE_ON_CLOSE = 0,
  /* Every slab is released to the OS the moment it becomes empty; no
   * reserve (a thread's current slab of a class and its current block stay
   * cached). Lowest RSS, more system calls. */
  TSLAB_RELEASE_EAGER = 1,
  /* Version 0.1 kept a closed epoch's empty slabs under this policy; the hot
   * reserve now does that for every program, so it behaves exactly as
   * TSLAB_RELEASE_ON_CLOSE. Kept so that programs written for 0.1 compile. */
  TSLAB_RELEASE_POOLED = 2
} tslab_release_policy_t;

/* Which ring slot a new era takes. */
typedef enum tslab_advance_policy {
  /* Default. The new era takes the next slot (in ring order) that holds no
   * open era, so a long-lived epoch keeps its slot while short phases come
   * and go around it. Era numbers skip the open slots. Only when every slot
   * holds an open era is the next slot's era closed first (forced). */
  TSLAB_ADVANCE_SKIP_OPEN = 0,
  /* The new era is always current + 1 in slot (current + 1) % ring_size,
   * closing the era there first if it is still open (forced). This is the
   * seed's ring discipline; the compatibility layer uses it. */
  TSLAB_ADVANCE_NEXT_SLOT = 1
} tslab_advance_policy_t;

/* Instance configuration. Initialise with tslab_config_init(), then change
 * what you need. A NULL config means all defaults. */
typedef struct tslab_config {
  uint32_t epoch_ring_size;     /* ring slots, a power of two in [2, 256]; default 16. Every
                                   open epoch takes a slot: a server with an epoch per request
                                   needs more slots than requests in flight (plus its
                                   long-lived epochs), or advancing force-closes the oldest. */
  size_t reserve_bytes;         /* virtual address space reserved up front, 4 MiB to 1 TiB;
                                   default 64 GiB */
  size_t pool_resident_max;     /* hot reserve of the instance: empty slab bytes its shared pool
                                   keeps resident for any epoch; default 1 MiB */
  size_t thread_reserve_max;    /* hot reserve of each thread cache: drained block bytes it keeps
                                   for its own next epochs (blocks are 16 or 64 KiB; a multiple
                                   of 16 KiB counts); default 256 KiB. The whole reserve is at most
                                   pool_resident_max + threads x thread_reserve_max. */
  size_t pool_decay_max;        /* empty slab bytes of epochs that are still open that the pool
                                   may keep beyond pool_resident_max, so a program that frees a
                                   batch and allocates it again in the same epoch faults nothing
                                   back in; default 8 MiB, 0 turns decay off. Such memory is
                                   released when its epoch closes, when it has stayed
                                   pool_decay_ms, or by tslab_reserve_release(). */
  uint32_t pool_decay_ms;       /* how long memory kept by decay stays resident (checked
                                   whenever the pool is used); default 1000 ms, at most
                                   3,600,000 */
  size_t block_budget;          /* bytes each thread may bump-allocate per epoch in blocks of
                                   mixed sizes (16 KiB, then 64 KiB once it has bumped 64 KiB)
                                   before the epoch continues in class slabs (blocks make an
                                   epoch's first allocations cost no slab per size class);
                                   default 1 MiB; 0 turns blocks off. The instance's first era
                                   (era 1) never uses blocks. */
  size_t max_alloc_size;        /* largest request accepted, at most reserve_bytes / 2;
                                   default 1 GiB */
  tslab_release_policy_t release_policy; /* default TSLAB_RELEASE_ON_CLOSE */
  tslab_advance_policy_t advance_policy; /* default TSLAB_ADVANCE_SKIP_OPEN */
} tslab_config_t;

/* ------------------------------------------------------------------------- */
/* Instances                                                                 */
/* ------------------------------------------------------------------------- */

/* Fill *config with the defaults. */
TSLAB_API void tslab_config_init(tslab_config_t* config);

/* Create an instance. NULL config = defaults. Returns NULL and sets the
 * thread's last error: TSLAB_ERR_INVALID_ARGUMENT when a config field is out
 * of the ranges documented above (so a small reserve_bytes needs a smaller
 * max_alloc_size too), TSLAB_ERR_OUT_OF_MEMORY when the reservation fails. */
TSLAB_API tslab_t* tslab_create(const tslab_config_t* config);

/* Destroy an instance and unmap all of its memory, live objects included.
 * No other thread may use the instance during or after this call. Other
 * instances are unaffected. NULL is ignored. */
TSLAB_API void tslab_destroy(tslab_t* a);

/* ------------------------------------------------------------------------- */
/* Epochs                                                                    */
/* ------------------------------------------------------------------------- */

/* The current era: the one most recently opened by tslab_epoch_advance()
 * (era 1 right after creation). Returns 0 for a NULL instance. */
TSLAB_API tslab_epoch_t tslab_epoch_current(tslab_t* a);

/* Open a new era and make it current; returns it (0 on a NULL instance).
 * Other open epochs stay open: several phases may be live at once. The new
 * era's slot follows the instance's advance policy; when it still holds an
 * open era, that era is closed first exactly as by tslab_epoch_close(), and
 * the close is counted as forced. */
TSLAB_API tslab_epoch_t tslab_epoch_advance(tslab_t* a);

/* Close an epoch: it rejects new allocations from now on (its live objects
 * stay valid and may be freed from any thread), and every slab or block of
 * the epoch that is empty at this moment, including those cached by other
 * threads, busy or idle, has been returned to the OS when this call returns,
 * except what fits the bounded hot reserve (see tslab_release_policy_t). A
 * slab of the epoch that becomes empty later goes to the reserve, or is
 * returned by the free that empties it. A close of an epoch whose memory only
 * the calling thread held needs no fence, no wait and, within the reserve, no
 * system call. Closing a closed epoch again is a no-op returning TSLAB_OK; a
 * close racing another close of the same epoch returns when that one has
 * finished. Returns TSLAB_ERR_EPOCH_STALE / _UNKNOWN for eras that are not in
 * the ring. */
TSLAB_API int tslab_epoch_close(tslab_t* a, tslab_epoch_t e);

/* Free-all close (arena semantics): close e and end every object still live
 * in it at once, in time proportional to the epoch's memory blocks, not to
 * its objects. When the call returns, pointers into e are dead, handles to
 * e's objects are stale, and e's memory is reusable by other epochs (its
 * empty memory is treated as by tslab_epoch_close()). A dead pointer is
 * what any freed pointer is: until an allocation of any epoch reuses its
 * memory, which may happen before this call returns, freeing it returns
 * false (an invalid free) and tslab_usable_size() says 0; after that they
 * act on that allocation (freeing it is a double free, as with any
 * allocator). A handle tells the incarnations apart: freeing a stale one
 * fails (section "Handles" for the one exception). A free of one of e's objects that another thread
 * makes concurrently takes effect before the object ends (it succeeds and
 * counts as a free) or after (a free of a dead pointer); nothing is lost or
 * counted twice. Works on an open or an already closed era; returns
 * TSLAB_ERR_EPOCH_STALE / _UNKNOWN for eras that are not in the ring. */
TSLAB_API int tslab_epoch_free_all(tslab_t* a, tslab_epoch_t e);

/* TSLAB_OK if e accepts allocations, else the status an allocation in e
 * would fail with. */
TSLAB_API int tslab_epoch_status(tslab_t* a, tslab_epoch_t e);

/* Attach a label (at most TSLAB_LABEL_MAX - 1 bytes; longer labels are cut)
 * to an open or closing era. Labels group epochs in statistics. NULL clears. */
#define TSLAB_LABEL_MAX 32
TSLAB_API int tslab_epoch_set_label(tslab_t* a, tslab_epoch_t e, const char* label);

/* Copy e's label into buf (always NUL-terminated when cap > 0). */
TSLAB_API int tslab_epoch_get_label(tslab_t* a, tslab_epoch_t e, char* buf, size_t cap);

/* Domain reference count of an era (incremented by every entered domain
 * scope on it). Leak signals report epochs whose count stays above zero.
 * tslab_epoch_unref() below zero is refused with TSLAB_ERR_INVALID_ARGUMENT. */
TSLAB_API int tslab_epoch_ref(tslab_t* a, tslab_epoch_t e);
TSLAB_API int tslab_epoch_unref(tslab_t* a, tslab_epoch_t e);
/* The count, or -1 when e is not in the ring. */
TSLAB_API int64_t tslab_epoch_refcount(tslab_t* a, tslab_epoch_t e);

/* ------------------------------------------------------------------------- */
/* Allocation                                                                */
/* ------------------------------------------------------------------------- */

/* Allocate size bytes in epoch e. The result has natural alignment: the
 * largest power of two dividing its size class, at least 8 and at most 16
 * for small classes (16-byte multiples such as 16, 32, 48, 64, 128 give 16;
 * a 24-byte class gives 8, which is all a type of that size can need); large
 * spans are 16 KiB aligned. Use tslab_aligned_alloc for more. Returns NULL with a reason when e is closed,
 * stale or unknown, size is 0 or above max_alloc_size, or memory runs out. */
TSLAB_API TSLAB_MALLOC_LIKE void* tslab_alloc(tslab_t* a, size_t size, tslab_epoch_t e);

/* Allocate count * size zeroed bytes (overflow is TSLAB_ERR_BAD_SIZE). */
TSLAB_API TSLAB_MALLOC_LIKE void* tslab_calloc(tslab_t* a, size_t count, size_t size,
                                               tslab_epoch_t e);

/* Allocate with the given alignment (a power of two up to 1 MiB). */
TSLAB_API TSLAB_MALLOC_LIKE void* tslab_aligned_alloc(tslab_t* a, size_t alignment, size_t size,
                                                      tslab_epoch_t e);

/* Resize p, keeping it in p's epoch. realloc(NULL, n) is not allowed here
 * (there is no epoch to take): use tslab_alloc. size 0 fails with
 * TSLAB_ERR_BAD_SIZE and leaves p untouched. When p's epoch is closed the
 * object may still shrink or grow within its size class, but a move fails
 * with TSLAB_ERR_EPOCH_CLOSED. On failure p is untouched. A large object
 * (above 32 KiB) that moves to grow gets room for half as much again
 * (tslab_usable_size() shows it), so growing a buffer in small steps copies
 * a linear number of bytes in all. */
TSLAB_API void* tslab_realloc(tslab_t* a, void* p, size_t size);

/* Free p. Returns true on success and for p == NULL. Returns false (and
 * counts an invalid free) when p is not a live allocation of this instance:
 * never allocated, interior, foreign, already freed or ended by a free-all
 * (until its memory is allocated again: a pointer cannot tell one
 * incarnation of an address from the next; a handle can). */
TSLAB_API bool tslab_free(tslab_t* a, void* p);

/* The usable size of a live allocation (its size class), or 0. */
TSLAB_API size_t tslab_usable_size(tslab_t* a, const void* p);

/* The epoch a live allocation belongs to, or 0. */
TSLAB_API tslab_epoch_t tslab_epoch_of(tslab_t* a, const void* p);

/* Whether p lies in the instance's address-space reservation: a range check,
 * not a liveness test (a freed or never-allocated address inside it is
 * owned). Tells another allocator's pointers, and the loader's, from
 * invalid frees of this instance's memory. */
TSLAB_API bool tslab_owns(tslab_t* a, const void* p);

/* ------------------------------------------------------------------------- */
/* Handles                                                                   */
/* ------------------------------------------------------------------------- */

/* Allocate like tslab_alloc and also return a handle for the allocation. */
TSLAB_API void* tslab_alloc_handle(tslab_t* a, size_t size, tslab_epoch_t e, tslab_handle_t* out);

/* The pointer a live handle names, or NULL when the handle is stale, forged,
 * freed or from another instance. */
TSLAB_API void* tslab_handle_get(tslab_t* a, tslab_handle_t h);

/* Free by handle. False for stale, forged, freed or foreign handles. One
 * exception, a race inside a double free: when the handle's object is freed
 * and its slot handed out again by the thread whose slab holds it while
 * another thread's free of the now stale handle is between its check and
 * its act (a few instructions), that free frees the new object
 * (docs/ARCHITECTURE.md section 8). */
TSLAB_API bool tslab_free_handle(tslab_t* a, tslab_handle_t h);

/* ------------------------------------------------------------------------- */
/* Errors                                                                    */
/* ------------------------------------------------------------------------- */

/* This thread's reason for its last failed call (TSLAB_OK if none failed
 * since the last tslab_clear_error(), or since tslab_set_error(TSLAB_OK)).
 * Successful calls do not reset it. */
TSLAB_API int tslab_last_error(void);
TSLAB_API void tslab_clear_error(void);
/* Set this thread's last error to `status`: for layers built on this API
 * (the seed's compatibility functions, a program's own wrapper) that report
 * their failures through tslab_last_error(). */
TSLAB_API void tslab_set_error(int status);

/* A static, human-readable description of a status code. */
TSLAB_API const char* tslab_strerror(int status);

/* ------------------------------------------------------------------------- */
/* Maintenance and checking                                                  */
/* ------------------------------------------------------------------------- */

/* Return this thread's cached empty slabs and pending cross-thread frees of
 * instance a to the shared pool (what thread exit does automatically). */
TSLAB_API void tslab_thread_flush(tslab_t* a);

/* Release the whole hot reserve to the OS now: every thread cache's drained
 * blocks (idle threads' too) and the shared pool. Returns the bytes
 * released (0 for a NULL instance, with TSLAB_ERR_INVALID_ARGUMENT). */
TSLAB_API size_t tslab_reserve_release(tslab_t* a);

/* Walk every piece of metadata of the instance and check its invariants.
 * Returns the number of inconsistencies found (0 when healthy); with a
 * non-NULL report, a description of the first one is written there. Meant
 * for tests and debugging: it takes the instance's locks and stops the
 * world for its epochs, so call it while no other thread uses a. */
TSLAB_API size_t tslab_check(tslab_t* a, char* report, size_t report_cap);

/* ------------------------------------------------------------------------- */
/* Statistics (exact counters, always on)                                    */
/* ------------------------------------------------------------------------- */

typedef enum tslab_epoch_state {
  TSLAB_EPOCH_EMPTY = 0,    /* the slot never held an era */
  TSLAB_EPOCH_ACTIVE = 1,   /* accepts allocations */
  TSLAB_EPOCH_CLOSING = 2   /* closed: rejects allocations, live objects drain */
} tslab_epoch_state_t;

/* The snapshot types are untagged: their names would otherwise be shared
 * with the functions that fill them, which C++ warns about. */
typedef struct {
  uint64_t rss_bytes;              /* process resident set (from /proc) */
  uint64_t reserved_bytes;         /* virtual range reserved by the instance */
  uint64_t committed_bytes;        /* made readable/writable (high-water mark) */
  uint64_t resident_estimate_bytes;/* slab and span bytes not released to the OS */
  uint64_t metadata_bytes;         /* out-of-band metadata in use: run descriptors, slab
                                      bitmaps, handle generations, thread-cache headers
                                      and the bins that count for an era */
  uint64_t live_objects;
  uint64_t live_bytes;             /* rounded to size classes */
  uint64_t slabs_in_use;           /* formatted slabs and large spans */
  uint64_t slabs_empty;            /* empty slabs resident in the pool */
  uint64_t slabs_released;         /* 16 KiB granules of the committed range not resident:
                                      released to the OS (or not used yet) */
  uint64_t slabs_created_total;    /* slabs put in use (formatted or from spares), spans */
  uint64_t slabs_recycled_total;   /* slabs and spans placed in memory that served before
                                      (from the pool, or released and reused) */
  uint64_t blocks_in_use;          /* mixed-size blocks held by epochs */
  uint64_t blocks_created_total;   /* blocks taken from the heap */
  uint64_t blocks_reused_total;    /* blocks reused from a thread's hot reserve */
  uint64_t reserve_bytes;          /* hot reserve: empty memory kept resident (thread caches'
                                      blocks and the shared pool up to pool_resident_max) */
  uint64_t decay_bytes;            /* empty memory of open epochs the pool keeps beyond
                                      pool_resident_max until it decays (pool_decay_max) */
  uint64_t objects_ended_total;    /* objects ended by free-all closes */
  uint64_t epochs_freed_all_total; /* free-all closes */
  uint64_t release_calls_total;    /* system calls that released memory (a batch: one) */
  uint64_t release_bytes_total;
  uint64_t release_failures_total; /* release calls the OS refused (memory stays resident) */
  uint64_t allocations_total;
  uint64_t frees_total;
  uint64_t cross_thread_frees_total;
  uint64_t invalid_frees_total;    /* frees/handles refused as not live */
  uint64_t alloc_failures_total;   /* all reasons */
  uint64_t alloc_fail_closed_total;
  uint64_t alloc_fail_stale_total;
  uint64_t alloc_fail_unknown_total;
  uint64_t alloc_fail_size_total;  /* bad size or alignment */
  uint64_t alloc_fail_oom_total;
  uint64_t slow_path_total;        /* refills: a bin's next bitmap word, remote frees, a ready
                                      or new slab; a thread's next block (spans are not
                                      counted) */
  uint64_t epochs_opened_total;
  uint64_t epochs_closed_total;
  uint64_t epochs_forced_close_total;
  uint64_t threads_active;         /* thread caches attached to a thread */
  uint64_t thread_caches;          /* thread caches created (bounded by peak threads) */
  uint64_t current_epoch;
  uint32_t epoch_ring_size;
  uint32_t class_count;
} tslab_stats_global_t;

typedef struct {
  uint32_t index;
  uint32_t object_size;            /* bytes */
  uint32_t slab_bytes;             /* size of one slab of this class */
  uint32_t objects_per_slab;
  uint64_t allocations_total;
  uint64_t frees_total;
  uint64_t cross_thread_frees_total;
  uint64_t slow_path_total;
  uint64_t live_objects;
  uint64_t slabs;                  /* slabs of this class in use */
} tslab_stats_class_t;

typedef struct {
  tslab_epoch_t era;
  uint32_t slot;
  tslab_epoch_state_t state;
  char label[TSLAB_LABEL_MAX];
  uint64_t opened_ns;              /* CLOCK_MONOTONIC_COARSE when opened (ms resolution) */
  uint64_t age_ns;                 /* now - opened_ns, same clock */
  int64_t refcount;                /* domain references */
  uint64_t live_objects;
  uint64_t live_bytes;
  uint64_t allocations_total;
  uint64_t frees_total;
  uint64_t slabs;                  /* slabs and large spans held by the epoch */
  uint64_t empty_slabs;            /* empty slabs still counted for the epoch */
  uint64_t rss_estimate_bytes;     /* bytes of those slabs that are resident */
  uint64_t rss_before_close_bytes; /* process RSS right before / after its close */
  uint64_t rss_after_close_bytes;
  uint64_t released_at_close_bytes;/* bytes returned to the OS by the close */
  uint64_t released_total_bytes;   /* at close and by later frees */
  uint64_t close_ns;               /* duration of its close; 0 for the close or
                                      free-all of a request-sized epoch (blocks of
                                      the closing thread only), which is not
                                      timed: two clock reads would cost more */
  bool forced_close;
} tslab_stats_epoch_t;

/* Per-thread view, for the calling thread's cache of instance a. */
typedef struct {
  uint64_t allocations_total;
  uint64_t frees_total;            /* frees issued by this thread */
  uint64_t cross_thread_frees_total;
  uint64_t slow_path_total;
  uint64_t cached_slabs;           /* slabs owned by this thread's cache */
} tslab_stats_thread_t;

/* Slow-path sampling: one in N of each thread's slow-path calls is timed
 * (wall and thread CPU time; wait = wall - cpu, the time the thread was not
 * running), starting at a phase of its own in each thread. */
typedef struct {
  uint32_t one_in;                 /* 0 = off */
  uint64_t samples;
  uint64_t wall_ns_total;
  uint64_t cpu_ns_total;
  uint64_t wall_ns_max;
  uint64_t wait_ns_total;          /* sum of (wall - cpu) */
} tslab_stats_sampling_t;

/* Per-label attribution: all epochs that carried the label, summed. */
typedef struct tslab_stats_label {
  char label[TSLAB_LABEL_MAX];
  uint64_t epochs_total;           /* eras that carried the label */
  uint64_t allocations_total;
  uint64_t frees_total;
  uint64_t cross_thread_frees_total;
  uint64_t slow_path_total;
  uint64_t live_bytes;
  uint64_t open_epochs;
} tslab_stats_label_t;

#define TSLAB_LABELS_MAX 64

/* A leak signal: an epoch open longer than a threshold or whose domain
 * refcount stays above zero. */
typedef struct tslab_leak {
  tslab_epoch_t era;
  char label[TSLAB_LABEL_MAX];
  uint64_t age_ns;
  int64_t refcount;
  uint64_t live_bytes;
  bool too_old;                    /* age above the threshold */
  bool refcount_stuck;             /* refcount > 0 while older than the threshold */
} tslab_leak_t;

TSLAB_API int tslab_stats_global(tslab_t* a, tslab_stats_global_t* out);
TSLAB_API uint32_t tslab_class_count(tslab_t* a);
/* Largest object size served from slabs; larger requests get their own span. */
TSLAB_API size_t tslab_small_max(void);
TSLAB_API int tslab_stats_class(tslab_t* a, uint32_t index, tslab_stats_class_t* out);
/* Every class at once (one pass over the thread caches instead of one per
 * class); returns how many were written (at most tslab_class_count()). */
TSLAB_API size_t tslab_stats_classes(tslab_t* a, tslab_stats_class_t* out, size_t max);
/* Stats of one era (TSLAB_ERR_EPOCH_STALE / _UNKNOWN when not in the ring). */
TSLAB_API int tslab_stats_epoch(tslab_t* a, tslab_epoch_t e, tslab_stats_epoch_t* out);
/* All eras in the ring, oldest first; returns how many were written. An
 * era whose slot an advance takes over while this reads is left out. */
TSLAB_API size_t tslab_stats_epochs(tslab_t* a, tslab_stats_epoch_t* out, size_t max);
TSLAB_API int tslab_stats_thread(tslab_t* a, tslab_stats_thread_t* out);
/* Time one in n slow-path calls (n = 0 turns sampling off). */
TSLAB_API int tslab_sampling_set(tslab_t* a, uint32_t one_in);
TSLAB_API int tslab_stats_sampling(tslab_t* a, tslab_stats_sampling_t* out);
/* Labels seen so far (at most TSLAB_LABELS_MAX; later labels are counted
 * under "(other)"); returns how many were written. */
TSLAB_API size_t tslab_stats_labels(tslab_t* a, tslab_stats_label_t* out, size_t max);
/* Epochs open for at least older_than_ns, or whose refcount is above zero
 * while that old; returns how many were written. Epoch ages come from the
 * coarse monotonic clock (a few milliseconds of resolution). */
TSLAB_API size_t tslab_leak_check(tslab_t* a, uint64_t older_than_ns, tslab_leak_t* out,
                                  size_t max);

/* Process resident set size in bytes (0 if unknown), and a monotonic clock. */
TSLAB_API uint64_t tslab_process_rss(void);
TSLAB_API uint64_t tslab_now_ns(void);

/* ------------------------------------------------------------------------- */
/* Exporters                                                                 */
/* ------------------------------------------------------------------------- */

/* Write the full snapshot as JSON (schema in docs/METRICS.md) or as
 * Prometheus text exposition into buf. Like snprintf: returns the length the
 * whole document needs (excluding the NUL); the output is complete only when
 * that is < cap. Returns 0 on error (NULL instance). */
TSLAB_API size_t tslab_export_json(tslab_t* a, char* buf, size_t cap);
TSLAB_API size_t tslab_export_prometheus(tslab_t* a, char* buf, size_t cap);

/* Serve GET /metrics (Prometheus) and GET /stats.json from a thread of its
 * own, on a loopback address (e.g. "127.0.0.1" or "::1"). Port 0 picks a
 * free port; tslab_http_port() tells which. Off until started; one endpoint
 * per instance; never touches the allocation fast path. */
TSLAB_API int tslab_http_start(tslab_t* a, const char* address, uint16_t port);
TSLAB_API uint16_t tslab_http_port(tslab_t* a);
TSLAB_API int tslab_http_stop(tslab_t* a);

/* ------------------------------------------------------------------------- */
/* Epoch domains (thread-confined scopes bound to an epoch)                  */
/* ------------------------------------------------------------------------- */

/* A domain is a scope bound to one era. Entering pushes it on the calling
 * thread's domain stack; tslab_domain_alloc() allocates in the era of the
 * innermost entered domain. Each entered scope holds one tslab_epoch_ref() on
 * the era (released on exit), so a scope that is never exited shows up as a
 * stuck refcount in tslab_leak_check().
 *
 * Thread confinement (checked): enter, exit, force-close and destroy must be
 * called by the thread that created the domain, else they fail with
 * TSLAB_ERR_WRONG_THREAD and change nothing. tslab_domain_epoch() and
 * tslab_domain_allocator() read fields fixed at creation and may be called
 * from any thread. Objects allocated in a domain are ordinary allocations of
 * its era: any thread may use and free them.
 *
 * Era safety: a domain names its era, never a ring slot. When the era is
 * closed (tslab_epoch_close(), tslab_domain_force_close(), or a forced close
 * by tslab_epoch_advance() reusing its slot) or becomes stale, entering the
 * domain fails with that status and allocations in it return NULL with it;
 * tslab_epoch_status(tslab_domain_allocator(d), tslab_domain_epoch(d)) tells
 * the same reason at any time. Exiting always works.
 *
 * Every failing call returns (or, for pointers, sets as the thread's last
 * error) a status code and leaves the domain and the stack unchanged.
 * Domain objects are small metadata allocated with the C library's malloc. */
typedef struct tslab_domain tslab_domain_t;

/* Deepest nesting of entered scopes per thread; entering beyond it fails
 * with TSLAB_ERR_LIMIT. */
#define TSLAB_DOMAIN_DEPTH_MAX 64

/* A domain owning a fresh epoch: opens a new era with tslab_epoch_advance()
 * (so it becomes the instance's current era, and an open era still in its
 * ring slot is force-closed), labelled when label != NULL. The domain closes
 * its era with tslab_epoch_close() when its last entered scope exits (a
 * closed era cannot be entered again) and when it is destroyed. Returns NULL with
 * TSLAB_ERR_INVALID_ARGUMENT (NULL instance), TSLAB_ERR_OUT_OF_MEMORY, or
 * the status of a failed labelling (the fresh era is then closed again). */
TSLAB_API tslab_domain_t* tslab_domain_create(tslab_t* a, const char* label);
/* A domain over an existing era that accepts allocations; exiting or
 * destroying it never closes the era. Returns NULL with
 * TSLAB_ERR_INVALID_ARGUMENT, TSLAB_ERR_OUT_OF_MEMORY or the era's status
 * (TSLAB_ERR_EPOCH_CLOSED / _STALE / _UNKNOWN). */
TSLAB_API tslab_domain_t* tslab_domain_wrap(tslab_t* a, tslab_epoch_t e);
/* Enter: push d on this thread's domain stack and take a reference on its
 * era. A domain may be entered again while entered (each enter is one scope
 * to exit). Fails with TSLAB_ERR_INVALID_ARGUMENT (NULL), _WRONG_THREAD,
 * _LIMIT (stack full) or the era's status when it no longer accepts
 * allocations. */
TSLAB_API int tslab_domain_enter(tslab_domain_t* d);
/* Exit: pop d, which must be the innermost entered scope of this thread, and
 * drop its era reference; for a created domain whose last scope this was,
 * close its era. Fails with TSLAB_ERR_INVALID_ARGUMENT (NULL),
 * _WRONG_THREAD, _NOT_ENTERED (d has no entered scope) or _NOT_INNERMOST
 * (another scope was entered after d's and is still entered). */
TSLAB_API int tslab_domain_exit(tslab_domain_t* d);
/* The innermost entered domain of this thread, or NULL. */
TSLAB_API tslab_domain_t* tslab_domain_current(void);
/* The domain's era (0 for NULL) and instance (NULL for NULL). */
TSLAB_API tslab_epoch_t tslab_domain_epoch(const tslab_domain_t* d);
TSLAB_API tslab_t* tslab_domain_allocator(const tslab_domain_t* d);
/* Allocate like tslab_alloc() in the era of this thread's innermost entered
 * domain. NULL with TSLAB_ERR_NO_DOMAIN when no domain is entered, or with
 * the reason tslab_alloc() gives (closed or stale era, bad size, memory). */
TSLAB_API TSLAB_MALLOC_LIKE void* tslab_domain_alloc(size_t size);
/* Close the domain's era now (tslab_epoch_close()), whether or not scopes
 * are entered, also for wrapped eras. The scopes stay entered and must still
 * be exited; allocations in them fail with TSLAB_ERR_EPOCH_CLOSED. Returns
 * what tslab_epoch_close() returns (TSLAB_OK when already closed, _STALE
 * when the era was recycled), or _INVALID_ARGUMENT / _WRONG_THREAD. */
TSLAB_API int tslab_domain_force_close(tslab_domain_t* d);
/* Free a domain that has no entered scope; a created domain closes its era
 * first (a no-op if already closed), a wrapped one leaves it open. Fails
 * with TSLAB_ERR_INVALID_ARGUMENT (NULL), _WRONG_THREAD or _DOMAIN_ENTERED,
 * keeping the domain. */
TSLAB_API int tslab_domain_destroy(tslab_domain_t* d);

#ifdef __cplusplus
}
#endif

#endif /* TSLAB_H */
