/* Internal data structures of temporal-slab. See docs/ARCHITECTURE.md for the
 * ownership and memory order of every shared field; the comments here only
 * name the owner. Nothing declared here is exported from the library. */
#ifndef TSLAB_INTERNAL_H
#define TSLAB_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tslab.h"

#define TSLAB_INTERNAL __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#ifndef TSLAB_COUNTERS
#define TSLAB_COUNTERS 1
#endif
#if TSLAB_COUNTERS
#define TSLAB_COUNT(field, n) ((field) += (n))
#else
#define TSLAB_COUNT(field, n) ((void)0)
#endif

#ifdef TSLAB_DEBUG
#include <assert.h>
#define TSLAB_ASSERT(x) assert(x)
#else
#define TSLAB_ASSERT(x) ((void)0)
#endif

/* ------------------------------------------------------------------------- */
/* Geometry                                                                  */
/* ------------------------------------------------------------------------- */

#define TSLAB_GRANULE_SHIFT 14
#define TSLAB_GRANULE ((size_t)1 << TSLAB_GRANULE_SHIFT) /* 16 KiB */
#define TSLAB_COMMIT_STEP ((size_t)4 << 20)
#define TSLAB_SMALL_MAX 32768u
#define TSLAB_CLASSES 80u            /* 8..64 step 8, then 8 per power of two to 32 KiB */
#define TSLAB_SLAB_MAX_GRANULES 16u
#define TSLAB_MAX_SLOTS 2048u        /* objects per slab, at most */
#define TSLAB_MAX_WORDS (TSLAB_MAX_SLOTS / 64u)
#define TSLAB_RING_MAX 256u
#define TSLAB_MAX_ALIGNMENT ((size_t)1 << 20)

typedef struct tslab_class_info {
  uint32_t size;      /* object size */
  uint32_t granules;  /* slab length */
  uint32_t capacity;  /* objects per slab */
  uint32_t words;     /* bitmap words */
  uint64_t recip;     /* ceil(2^40 / size): slot = (offset * recip) >> 40 */
} tslab_class_info_t;

TSLAB_INTERNAL extern tslab_class_info_t tslab_classes[TSLAB_CLASSES];
/* Class of sizes up to 1024 by (size + 7) / 8: one load on the fast path. */
TSLAB_INTERNAL extern uint8_t tslab_class_small[129];
TSLAB_INTERNAL void tslab_classes_init(void);

/* Class of a request of 1..TSLAB_SMALL_MAX bytes. */
static inline uint32_t tslab_class_of(size_t size) {
  if (likely(size <= 1024)) return tslab_class_small[(size + 7) >> 3];
  size_t s = size - 1;
  uint32_t k = 63u - (uint32_t)__builtin_clzll(s); /* 2^k <= s < 2^(k+1), k >= 6 */
  return 8u + (k - 6u) * 8u + (uint32_t)((s >> (k - 3u)) & 7u);
}

/* ------------------------------------------------------------------------- */
/* Runs: slabs, large spans, free runs                                       */
/* ------------------------------------------------------------------------- */

enum tslab_run_kind {
  TSLAB_RUN_NONE = 0,
  TSLAB_RUN_FREE_DIRTY = 1, /* free, pages may be resident */
  TSLAB_RUN_FREE_CLEAN = 2, /* free, released to the OS */
  TSLAB_RUN_RELEASING = 3,  /* leaving the heap mutex to be madvised */
  TSLAB_RUN_SLAB = 4,
  TSLAB_RUN_LARGE = 5
};

enum tslab_slab_mode { TSLAB_ATTACHED = 0, TSLAB_DETACHED = 1 };
enum tslab_notify { TSLAB_NOTIFY_NONE = 0, TSLAB_NOTIFY_ARMED = 1, TSLAB_NOTIFY_QUEUED = 2 };
enum tslab_bin_list { TSLAB_LIST_NONE = 0, TSLAB_LIST_CUR, TSLAB_LIST_READY, TSLAB_LIST_PARKED, TSLAB_LIST_SPARE };
enum tslab_large_state { TSLAB_LARGE_LIVE = 1, TSLAB_LARGE_FREED = 2 };

typedef struct tslab_tcache tslab_tcache_t;
typedef struct tslab_run tslab_run_t;

struct tslab_run {
  /* Written by the formatter before the run is published in map[]. */
  uint8_t* start;
  uint32_t granules;
  _Atomic uint8_t kind;       /* enum tslab_run_kind; heap mutex writes */
  uint8_t cls;
  uint16_t words;
  uint32_t obj_size;
  uint32_t capacity;
  uint64_t recip;
  _Atomic uint64_t era;

  /* Slab ownership (docs/ARCHITECTURE.md section 3). */
  _Atomic(tslab_tcache_t*) owner;
  _Atomic uint32_t mode;
  _Atomic uint32_t notify;
  /* Bits 0-15: used, the slots handed out or set aside less those freed.
   * Bits 16-63: local frees not yet added to the bin's `frees` (section 8).
   * The owner writes it (one add per local free), the closer at detach;
   * statistics read it. */
  _Atomic uint64_t usage;
  uint32_t hint;              /* owner only: where the next word scan starts */
  uint8_t list;               /* owner only: enum tslab_bin_list */
  struct tslab_bin* bin;      /* owner only: the bin holding the slab */
  _Atomic int64_t live;       /* detached accounting */
  int64_t detach_delta;       /* the closer's, between steps 4a and 4b */
  _Atomic uint64_t* alloc;    /* words bitmap words each */
  _Atomic uint64_t* remote;
  _Atomic(_Atomic uint16_t*) gens;
  /* Ready / parked list: the owner writes (relaxed atomic stores), the
   * closer at detach; statistics walk the ready list. */
  tslab_run_t* bin_next;
  tslab_run_t* bin_prev;
  tslab_run_t* notify_next;   /* owner cache's mutex */
  tslab_run_t* notify_prev;

  /* The cache that formatted the slab or created the span; kept after a
   * detach, to tell cross-thread frees apart. */
  _Atomic(tslab_tcache_t*) creator;
  /* Large spans. */
  _Atomic uint32_t large_state;
  uint16_t large_gen;

  /* Heap links (heap mutex). */
  tslab_run_t* heap_next;
  tslab_run_t* heap_prev;
  tslab_run_t* lru_next;
  tslab_run_t* lru_prev;
  uint64_t last_era;          /* dirty runs: the era they last served */
};

/* ------------------------------------------------------------------------- */
/* Thread caches                                                             */
/* ------------------------------------------------------------------------- */

typedef struct tslab_bin {
  /* Hot: the allocation fast path touches only these. `mask` holds the
   * free slots of one bitmap word of the current slab that the owner has
   * set aside for itself; allocating one sets its bit in `*word`. Set-aside
   * slots count as taken (`taken`, the slab's `used`) from the moment they
   * are set aside, so allocating needs no counter: allocations = taken -
   * popcount(mask). Owner writes, relaxed; statistics read it. */
  _Atomic uint64_t mask;
  uint8_t* base;              /* address of the first slot of that word */
  _Atomic uint64_t* word;     /* the alloc bitmap word */
  uint32_t size;              /* object size of the class */
  uint32_t cls;
  tslab_run_t* cur;           /* owner writes (relaxed atomic); statistics read */
  /* Counters of this (slot, class) for `era`: the owner writes them, the
   * closer when it folds the bin. */
  _Atomic uint64_t frees;
  /* Cold. */
  _Atomic uint64_t taken;     /* slots set aside, less those dropped unused */
  /* Odd while the owner changes `taken`, `mask`, `cur` or the ready list,
   * or moves pending frees into `frees`, so that a reader never pairs one's
   * old value with another's new one. */
  _Atomic uint64_t seq;
  /* The highest frees count a reader reported (readers hold the registry mutex). */
  _Atomic uint64_t frees_reported;
  tslab_run_t* ready;         /* links: owner writes (relaxed atomic); statistics walk */
  tslab_run_t* parked;
  _Atomic uint64_t era;       /* era of the slabs and counters, 0 = none; owner and closer write */
  _Atomic uint64_t xfrees;
  _Atomic uint64_t slow;
} __attribute__((aligned(128))) tslab_bin_t;

struct tslab_tcache {
  _Atomic uint64_t busy;      /* owner writes; closers read (section 5) */
  /* The attached thread's id (tslab_thread_id), 0 while abandoned; written
   * under the registry mutex, read by the free fast path. */
  _Atomic uintptr_t tid;
  tslab_t* inst;
  pthread_mutex_t mu;         /* notify list, detach */
  tslab_run_t* notify_head;   /* mu */
  _Atomic uint32_t notify_pending;
  tslab_tcache_t* reg_next;   /* registry mutex */
  tslab_tcache_t* abandoned_next;
  size_t bytes;               /* size of this mapping */
  /* Per ring slot, the classes whose bins count for the slot's era: the
   * owner sets bits when a bin takes an era; the closer (owner quiescent)
   * visits and clears only those. Lives after the bins in the mapping. */
  uint64_t (*slot_classes)[2];
  /* Pooled policy: empty slabs by class, reused by this cache without the
   * heap (mutex; heads also read without it as a hint). */
  _Atomic(tslab_run_t*) spare[TSLAB_CLASSES];
  size_t spare_bytes;         /* mu */
  /* This thread's counts of closed eras, folded in by closers (atomic add,
   * closers are serialised by the epoch mutex; the owner only reads). */
  _Atomic uint64_t folded_allocs, folded_frees, folded_xfrees, folded_slow;
  tslab_bin_t bins[];         /* ring_size * TSLAB_CLASSES */
};

/* Counters of detached bins, summed by a closer before it adds them to the
 * era's slot and the caches' totals. */
typedef struct tslab_fold {
  uint64_t allocs, frees, xfrees, slow, alloc_bytes, free_bytes;
} tslab_fold_t;

/* ------------------------------------------------------------------------- */
/* Epoch ring                                                                */
/* ------------------------------------------------------------------------- */

enum { TSLAB_STATE_BITS = 2 };
#define TSLAB_STATE(era, st) (((uint64_t)(era) << TSLAB_STATE_BITS) | (uint64_t)(st))
#define TSLAB_STATE_ERA(w) ((w) >> TSLAB_STATE_BITS)
#define TSLAB_STATE_OF(w) ((uint32_t)((w) & 3u))

/* 256-byte slots: the fast path indexes the ring with a shift. */
typedef struct __attribute__((aligned(256))) tslab_epoch_slot {
  _Atomic uint64_t state;             /* epoch mutex writes (seq_cst); lock-free reads */
  _Atomic int64_t refcount;
  /* Below: epoch mutex, except the atomics. */
  char label[TSLAB_LABEL_MAX];
  int label_id;                       /* index in the label registry, -1 = none */
  uint64_t opened_ns;
  uint64_t rss_before_close, rss_after_close, released_at_close, close_ns;
  bool forced;
  /* Counts folded from thread caches at close, and frees after detach. */
  _Atomic uint64_t allocs, frees, xfrees, slow;
  _Atomic uint64_t alloc_bytes, free_bytes;
  _Atomic uint64_t slabs;             /* slabs and spans of the era in use */
  _Atomic uint64_t slab_bytes;
  _Atomic uint64_t empty_runs;        /* dirty pool runs last used by the era */
  _Atomic uint64_t empty_bytes;
  _Atomic uint64_t released_bytes;    /* total released for the era */
  _Atomic uint64_t large_allocs, large_frees, large_bytes_alloc, large_bytes_free;
} tslab_epoch_slot_t;

typedef struct tslab_label_entry {
  char name[TSLAB_LABEL_MAX];
  /* Totals of eras that left the ring (epoch mutex). */
  uint64_t epochs, allocs, frees, xfrees, slow, alloc_bytes, free_bytes;
} tslab_label_entry_t;

/* ------------------------------------------------------------------------- */
/* Page heap                                                                 */
/* ------------------------------------------------------------------------- */

#define TSLAB_HEAP_EXACT 64u          /* exact-size bins for 1..64 granules */
#define TSLAB_HEAP_BINS (TSLAB_HEAP_EXACT + 40u)

typedef struct tslab_heap {
  pthread_mutex_t mu;
  tslab_run_t* clean[TSLAB_HEAP_BINS];
  uint64_t clean_mask[2];
  tslab_run_t* dirty[TSLAB_HEAP_BINS]; /* by bin_of(length), newest first */
  tslab_run_t* lru_head;              /* dirty runs, oldest first */
  tslab_run_t* lru_tail;
  size_t dirty_bytes;
  size_t top;                         /* granules handed out from the start */
  size_t top_max;                     /* highest top so far */
  size_t committed;                   /* bytes made usable */
  /* Descriptor and bitmap storage (metadata region). */
  tslab_run_t* free_descs;
  void* free_words[TSLAB_MAX_WORDS * 2 + 1]; /* by word count */
  void* free_gens[TSLAB_MAX_SLOTS / 64 + 1]; /* by slot count / 64 */
  size_t meta_top;
  size_t meta_committed;
} tslab_heap_t;

/* ------------------------------------------------------------------------- */
/* The instance                                                              */
/* ------------------------------------------------------------------------- */

struct tslab {
  uint64_t id;                        /* unique per process, never reused */
  uint8_t tag;                        /* id's low byte, stamped in handles */
  uint32_t ring_size, ring_mask, ring_shift;
  tslab_config_t config;
  uint8_t* base;                      /* reservation */
  size_t reserve;
  size_t ngranules;
  _Atomic(tslab_run_t*)* map;         /* per granule */
  _Atomic uint16_t* gen_base;         /* per granule: first handle generation of a run
                                         starting there (heap mutex writes) */
  size_t map_bytes;
  uint8_t* meta;                      /* metadata region */
  size_t meta_reserve;

  tslab_heap_t heap;

  pthread_mutex_t epoch_mu;           /* advance, close, labels */
  _Atomic uint64_t current;
  tslab_epoch_slot_t* ring;
  size_t ring_bytes;
  tslab_label_entry_t labels[TSLAB_LABELS_MAX + 1]; /* last: "(other)" */
  uint32_t nlabels;

  pthread_mutex_t reg_mu;             /* cache registry */
  tslab_tcache_t* caches;
  tslab_tcache_t* abandoned;
  _Atomic uint64_t ncaches, nattached;

  /* Instance-wide counters for what no thread cache can count. */
  _Atomic uint64_t invalid_frees;
  _Atomic uint64_t fail_closed, fail_stale, fail_unknown, fail_size, fail_oom;
  _Atomic uint64_t ext_allocs[TSLAB_CLASSES], ext_frees[TSLAB_CLASSES],
      ext_xfrees[TSLAB_CLASSES], ext_slow[TSLAB_CLASSES];
  _Atomic uint64_t large_allocs, large_frees, large_xfrees, large_bytes_live;
  /* Frees by threads without a cache: the closer waits for this to be 0
   * like for a cache's busy flag (read-modify-writes give the fence). */
  _Atomic uint64_t cacheless_busy;
  /* Frees writing to an era's slot while the era is not active: advance
   * waits for zero before it resets a slot for a newer era. */
  _Atomic uint64_t closing_inflight;
  _Atomic uint64_t slabs_created, slabs_recycled, release_calls, release_bytes, release_failures;
  _Atomic uint64_t cls_slabs[TSLAB_CLASSES];
  _Atomic uint64_t epochs_opened, epochs_closed, epochs_forced;
  _Atomic uint64_t resident_bytes;    /* runs handed out or dirty, not released */
  _Atomic uint64_t spare_slabs;       /* empty slabs kept by caches (pooled policy) */
  _Atomic uint64_t clean_bytes;
  _Atomic uint64_t meta_bytes;

  /* Slow-path sampling. */
  _Atomic uint32_t sample_one_in;
  _Atomic uint64_t sample_tick, samples, sample_wall, sample_cpu, sample_wall_max;

  void* http;                         /* owned by src/http.c */
};

/* ------------------------------------------------------------------------- */
/* Cross-file internal functions                                             */
/* ------------------------------------------------------------------------- */

/* errors.c */
TSLAB_INTERNAL void tslab_set_error(int status);
/* Record status as the thread's last error unless it is TSLAB_OK; return it. */
TSLAB_INTERNAL int tslab_fail(int status);

/* os.c */
TSLAB_INTERNAL void* tslab_os_reserve(size_t bytes);
TSLAB_INTERNAL bool tslab_os_commit(void* p, size_t bytes);
TSLAB_INTERNAL bool tslab_os_release(void* p, size_t bytes);
TSLAB_INTERNAL void tslab_os_unmap(void* p, size_t bytes);
TSLAB_INTERNAL void* tslab_os_map(size_t bytes); /* readable zeroed memory */
TSLAB_INTERNAL void tslab_os_heavy_fence(void);
TSLAB_INTERNAL uint64_t tslab_os_thread_cpu_ns(void);

/* Light side of the asymmetric fence (docs/ARCHITECTURE.md section 5): a
 * compiler barrier; the heavy side makes every running thread fence. Without
 * membarrier, x86 still gets that from a TLB shootdown (an interrupt on each
 * CPU); other architectures invalidate TLBs without interrupting, so there
 * the fast path pays a full fence instead. */
#if defined(__x86_64__) || defined(__i386__)
static inline void tslab_light_fence(void) { atomic_signal_fence(memory_order_seq_cst); }
#else
TSLAB_INTERNAL extern bool tslab_fast_path_fences;
static inline void tslab_light_fence(void) {
  if (unlikely(tslab_fast_path_fences))
    atomic_thread_fence(memory_order_seq_cst);
  else
    atomic_signal_fence(memory_order_seq_cst);
}
#endif

/* A number unique to each live thread: the thread pointer, which the x86-64
 * TLS ABI keeps at %fs:0 (one load on the free fast path), elsewhere the
 * address of a thread-local. */
#if defined(__x86_64__)
static inline uintptr_t tslab_thread_id(void) {
  uintptr_t tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp));
  return tp;
}
#else
TSLAB_INTERNAL extern __thread char tslab_thread_tag;
static inline uintptr_t tslab_thread_id(void) { return (uintptr_t)&tslab_thread_tag; }
#endif

/* heap.c */
TSLAB_INTERNAL bool tslab_heap_init(tslab_t* a);
TSLAB_INTERNAL tslab_run_t* tslab_heap_alloc(tslab_t* a, size_t granules, size_t align_granules);
TSLAB_INTERNAL void tslab_heap_retire(tslab_t* a, tslab_run_t* r, bool release);
TSLAB_INTERNAL void tslab_heap_retire_list(tslab_t* a, tslab_run_t* list, bool release);
TSLAB_INTERNAL void tslab_heap_release_era(tslab_t* a, uint64_t era);
TSLAB_INTERNAL bool tslab_heap_bitmaps(tslab_t* a, tslab_run_t* r, uint32_t words);
TSLAB_INTERNAL _Atomic uint16_t* tslab_heap_gens(tslab_t* a, uint32_t capacity);
TSLAB_INTERNAL size_t tslab_heap_check(tslab_t* a, char* report, size_t cap);

static inline tslab_run_t* tslab_run_of(tslab_t* a, const void* p) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
  if (unlikely(off >= a->reserve)) return NULL;
  tslab_run_t* r = atomic_load_explicit(&a->map[off >> TSLAB_GRANULE_SHIFT], memory_order_acquire);
  /* A stale map entry may name a recycled descriptor: the range check decides. */
  if (!r || (uintptr_t)p - (uintptr_t)r->start >= ((uintptr_t)r->granules << TSLAB_GRANULE_SHIFT))
    return NULL;
  return r;
}

/* slab.c */
TSLAB_INTERNAL tslab_run_t* tslab_slab_new(tslab_t* a, tslab_tcache_t* tc, uint32_t cls, uint64_t era);
TSLAB_INTERNAL uint32_t tslab_slab_collect(tslab_run_t* s, tslab_t* a);
TSLAB_INTERNAL void tslab_slab_bump_gen(tslab_run_t* s, uint32_t idx);
TSLAB_INTERNAL bool tslab_slab_free_remote(tslab_run_t* s, uint32_t idx);
TSLAB_INTERNAL bool tslab_slab_free_closing(tslab_t* a, tslab_run_t* s, uint32_t idx);
TSLAB_INTERNAL int64_t tslab_slab_detach(tslab_t* a, tslab_run_t* s);
TSLAB_INTERNAL void tslab_slab_detach_finish(tslab_t* a, tslab_run_t* s, int64_t delta, tslab_run_t** empty,
                                             bool* release);
TSLAB_INTERNAL void tslab_slab_retire(tslab_t* a, tslab_run_t* s);
TSLAB_INTERNAL bool tslab_slab_arm(tslab_run_t* s);
TSLAB_INTERNAL size_t tslab_slab_check(tslab_t* a, tslab_run_t* s, char* report, size_t cap);

/* Slot of p in slab s, or UINT32_MAX when p is not the start of a slot. */
static inline uint32_t tslab_slab_index(const tslab_run_t* s, const void* p) {
  uint64_t off = (uint64_t)((const uint8_t*)p - s->start);
  uint32_t idx = (uint32_t)((off * s->recip) >> 40);
  if (unlikely((uint64_t)idx * s->obj_size != off || idx >= s->capacity)) return UINT32_MAX;
  return idx;
}

static inline bool tslab_slab_is_live(const tslab_run_t* s, uint32_t idx) {
  uint64_t bit = 1ull << (idx & 63);
  return (atomic_load_explicit(&s->alloc[idx >> 6], memory_order_relaxed) & bit) &&
         !(atomic_load_explicit(&s->remote[idx >> 6], memory_order_relaxed) & bit);
}

/* tcache.c */
TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_slow(tslab_t* a);
TSLAB_INTERNAL bool tslab_bin_refill(tslab_t* a, tslab_tcache_t* tc, tslab_bin_t* bin, uint64_t era);
/* The bin's allocations and frees for its era, read consistently from any
 * thread (section 8). */
TSLAB_INTERNAL void tslab_bin_read(tslab_bin_t* bin, uint64_t* allocs, uint64_t* frees);
TSLAB_INTERNAL void tslab_tcache_unlink_run(tslab_tcache_t* tc, tslab_bin_t* bin, tslab_run_t* s);
TSLAB_INTERNAL void tslab_tcache_ready(tslab_bin_t* bin, tslab_run_t* s);
TSLAB_INTERNAL bool tslab_tcache_spare_push(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s);
TSLAB_INTERNAL tslab_run_t* tslab_tcache_spare_pop(tslab_t* a, tslab_tcache_t* tc, uint32_t cls);
TSLAB_INTERNAL void tslab_tcache_detach_slot(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, uint64_t era,
                                             tslab_run_t** detached, tslab_fold_t* sum);
TSLAB_INTERNAL void tslab_tcache_notify(tslab_tcache_t* tc, tslab_run_t* s);
TSLAB_INTERNAL void tslab_tcache_destroy_all(tslab_t* a);
TSLAB_INTERNAL void tslab_tcache_forget_instance(tslab_t* a);
TSLAB_INTERNAL size_t tslab_tcache_check(tslab_t* a, char* report, size_t cap);

TSLAB_INTERNAL void tslab_live_lock(void);
TSLAB_INTERNAL void tslab_live_unlock(void);
TSLAB_INTERNAL size_t tslab_live_count(void);
TSLAB_INTERNAL tslab_t* tslab_live_at(size_t i);
TSLAB_INTERNAL bool tslab_tls_owns(const tslab_tcache_t* tc);
TSLAB_INTERNAL void tslab_fork_init(void);
TSLAB_INTERNAL void tslab_tcache_end_sections(tslab_t* a, tslab_tcache_t* tc);
TSLAB_INTERNAL void tslab_tcache_park_locked(tslab_t* a, tslab_tcache_t* tc);

typedef struct tslab_tls_entry {
  tslab_t* inst;
  uint64_t id;
  tslab_tcache_t* tc;
} tslab_tls_entry_t;

/* The thread's most recently used (instance, cache) pair; the others wait in
 * a per-thread array searched on a miss (src/tcache.c). */
TSLAB_INTERNAL extern __thread tslab_tls_entry_t tslab_tls_last;

/* This thread's cache for instance a (created on first use), or NULL. */
static inline tslab_tcache_t* tslab_tcache_get(tslab_t* a) {
  if (likely(tslab_tls_last.inst == a && tslab_tls_last.id == a->id)) return tslab_tls_last.tc;
  return tslab_tcache_slow(a);
}

/* Bins are laid out class-major so that the index is two shifts and an or. */
static inline tslab_bin_t* tslab_bin_at(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, uint32_t cls) {
  return &tc->bins[((size_t)cls << a->ring_shift) | slot];
}

static inline tslab_bin_t* tslab_bin(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t cls) {
  return tslab_bin_at(a, tc, (uint32_t)(era & a->ring_mask), cls);
}

/* Owner, in its busy window with `era` active: the bin starts counting for
 * `era` (it held nothing of an older one: closes reset bins). */
static inline void tslab_bin_claim(tslab_t* a, tslab_tcache_t* tc, tslab_bin_t* bin, uint64_t era) {
  if (likely(atomic_load_explicit(&bin->era, memory_order_relaxed) == era)) return;
  TSLAB_ASSERT(atomic_load_explicit(&bin->era, memory_order_relaxed) == 0);
  atomic_store_explicit(&bin->era, era, memory_order_relaxed);
  tc->slot_classes[era & a->ring_mask][bin->cls >> 6] |= 1ull << (bin->cls & 63);
}

static inline void tslab_busy_enter(tslab_tcache_t* tc) {
  atomic_store_explicit(&tc->busy, 1, memory_order_relaxed);
  tslab_light_fence();
}

static inline void tslab_busy_exit(tslab_tcache_t* tc) {
  atomic_store_explicit(&tc->busy, 0, memory_order_release);
}

/* The fast paths start on a cache line, so their speed does not depend on
 * where the linker happens to place them (a few percent either way). */
#define TSLAB_HOT __attribute__((aligned(64)))

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSLAB_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(TSLAB_TSAN)
#define TSLAB_TSAN 1
#endif

/* Owner-only add, no read-modify-write: other threads only read the word.
 * Compilers do not fuse an atomic load and store into one instruction, so
 * on x86-64 (where an aligned 8-byte store is single-copy atomic) it is one
 * add to memory without a lock prefix. ThreadSanitizer builds keep the
 * atomic form it can see. */
static inline void tslab_owner_add(_Atomic uint64_t* c, uint64_t n) {
#if defined(__x86_64__) && !defined(TSLAB_TSAN)
  __asm__("addq %1, %0" : "+m"(*(uint64_t*)c) : "er"(n));
#else
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
#endif
}

/* An owner-only statistics counter. */
static inline void tslab_bump(_Atomic uint64_t* c, uint64_t n) {
#if TSLAB_COUNTERS
  tslab_owner_add(c, n);
#else
  (void)c;
  (void)n;
#endif
}

#define TSLAB_USED_BITS 16
#define TSLAB_USED_MASK ((1ull << TSLAB_USED_BITS) - 1)
/* used counts slots, allocated or set aside: at most the capacity. */
_Static_assert(TSLAB_MAX_SLOTS <= TSLAB_USED_MASK, "used must fit its bits of usage");

static inline uint32_t tslab_slab_used(const tslab_run_t* s) {
  return (uint32_t)(atomic_load_explicit(&s->usage, memory_order_relaxed) & TSLAB_USED_MASK);
}

static inline uint64_t tslab_slab_pending(const tslab_run_t* s) {
  return atomic_load_explicit(&s->usage, memory_order_relaxed) >> TSLAB_USED_BITS;
}

/* Owner: used += n (n may be negative); pending frees are untouched. */
static inline void tslab_slab_used_add(tslab_run_t* s, int64_t n) { tslab_owner_add(&s->usage, (uint64_t)n); }

/* Owner, local free of a valid slot (used >= 1, so `used` cannot borrow
 * from the pending count): one add of an immediate takes the slot off
 * `used` and counts a pending free. */
static inline void tslab_slab_count_free(tslab_run_t* s) {
#if TSLAB_COUNTERS
  tslab_owner_add(&s->usage, (1ull << TSLAB_USED_BITS) - 1);
#else
  tslab_slab_used_add(s, -1);
#endif
}

/* epoch.c */
TSLAB_INTERNAL bool tslab_epochs_init(tslab_t* a);
TSLAB_INTERNAL int tslab_epoch_reject_status(tslab_t* a, uint64_t era);
TSLAB_INTERNAL void tslab_epoch_count_failure(tslab_t* a, int status);
TSLAB_INTERNAL void tslab_epoch_fold_bin(tslab_t* a, tslab_bin_t* bin, uint32_t cls, tslab_fold_t* sum);
TSLAB_INTERNAL uint64_t tslab_epoch_state(tslab_t* a, uint64_t era);

/* large.c */
TSLAB_INTERNAL bool tslab_large_free(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* r, const void* p);
TSLAB_INTERNAL void* tslab_large_alloc(tslab_t* a, tslab_tcache_t* tc, size_t size, size_t align, uint64_t era);

/* stats.c: slow-path sampling */
TSLAB_INTERNAL bool tslab_sample_begin(tslab_t* a, uint64_t* wall, uint64_t* cpu);
TSLAB_INTERNAL void tslab_sample_end(tslab_t* a, uint64_t wall, uint64_t cpu);

#endif
