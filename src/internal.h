/* Internal data structures of temporal-slab. See docs/ARCHITECTURE.md for the
 * ownership and memory order of every shared field; the comments here only
 * name the owner. Nothing declared here is exported from the library. */
#ifndef TSLAB_INTERNAL_H
#define TSLAB_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tslab.h"

#define TSLAB_INTERNAL __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#ifndef TSLAB_COUNTERS
#define TSLAB_COUNTERS 1
#endif

/* Plain fields that other threads read while their writer may change them
 * (a descriptor's geometry, which readers validate with `seq`; statistics'
 * views of owner-private fields): single-copy atomic, relaxed, loads and
 * stores, so readers never see a torn value and ThreadSanitizer sees the
 * protocol. */
#define TSLAB_RLOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define TSLAB_RSTORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)

#ifdef TSLAB_DEBUG
#include <assert.h>
#define TSLAB_ASSERT(x) assert(x)
/* An invariant the optimiser may build on (a release build drops the tests
 * it makes redundant); debug builds check it. */
#define TSLAB_ASSUME(x) assert(x)
#else
#define TSLAB_ASSERT(x) ((void)0)
#define TSLAB_ASSUME(x) (likely(x) ? (void)0 : __builtin_unreachable())
#endif

/* ------------------------------------------------------------------------- */
/* Geometry                                                                  */
/* ------------------------------------------------------------------------- */

#define TSLAB_GRANULE_SHIFT 14
#define TSLAB_GRANULE ((size_t)1 << TSLAB_GRANULE_SHIFT) /* 16 KiB */
#define TSLAB_COMMIT_STEP ((size_t)4 << 20)
/* Fault-ahead batches (src/heap.c, populate_claim): the largest batch, which
 * is also the longest run faulted in ahead, and the range's first bytes,
 * never faulted in ahead. */
#define TSLAB_POPULATE_STEP ((size_t)64 << 10)
#define TSLAB_POPULATE_LAZY_PREFIX ((size_t)256 << 10)
#define TSLAB_RESERVE_ALIGN ((size_t)2 << 20)
#define TSLAB_SMALL_MAX 32768u
#define TSLAB_CLASSES 87u            /* size_class.c: 8..64 step 8, then 8 per power of two to 32 KiB,
                                      * and one just above each power from 256 B to 16 KiB */
#define TSLAB_SLAB_MAX_GRANULES 16u
#define TSLAB_MAX_SLOTS 2048u        /* objects per slab, at most */
#define TSLAB_RING_MAX 256u
#define TSLAB_MAX_ALIGNMENT ((size_t)1 << 20)

/* Blocks (docs/ARCHITECTURE.md 3.4): mixed-size objects of one era, in
 * 16-byte units. A cache's era bumps through small blocks (one granule) until
 * it has bumped a large block's worth, then through large ones (four
 * granules: as many units as a handle's slot field can name). A block's own
 * geometry is in its descriptor (`granules`, `capacity` in units, `words`). */
#define TSLAB_BLOCK_GRANULES_SMALL 1u
#define TSLAB_BLOCK_GRANULES_LARGE 4u
#define TSLAB_BLOCK_BYTES_SMALL ((size_t)TSLAB_BLOCK_GRANULES_SMALL << TSLAB_GRANULE_SHIFT)
#define TSLAB_BLOCK_BYTES_LARGE ((size_t)TSLAB_BLOCK_GRANULES_LARGE << TSLAB_GRANULE_SHIFT)
#define TSLAB_UNIT_SHIFT 4
#define TSLAB_BLOCK_UNITS_MAX ((uint32_t)(TSLAB_BLOCK_BYTES_LARGE >> TSLAB_UNIT_SHIFT))
#define TSLAB_BLOCK_WORDS_MAX (TSLAB_BLOCK_UNITS_MAX / 64u)
#define TSLAB_BLOCK_OBJ_MAX ((size_t)4 << 10) /* larger objects go to slabs and spans */
/* A run's bitmap words, at most: a slab's or a block's. */
#define TSLAB_SLAB_MAX_WORDS (TSLAB_MAX_SLOTS / 64u)
#define TSLAB_MAX_WORDS (TSLAB_SLAB_MAX_WORDS > TSLAB_BLOCK_WORDS_MAX ? TSLAB_SLAB_MAX_WORDS : TSLAB_BLOCK_WORDS_MAX)
/* Handles: slot (unit) index bits. */
#define TSLAB_HANDLE_SLOT_BITS 12

typedef struct tslab_class_info {
  uint32_t size;      /* object size */
  uint32_t granules;  /* slab length */
  uint32_t capacity;  /* objects per slab */
  uint32_t words;     /* bitmap words */
  uint64_t recip;     /* ceil(2^48 / size): tslab_slot_index */
} tslab_class_info_t;

TSLAB_INTERNAL extern tslab_class_info_t tslab_classes[TSLAB_CLASSES];
/* Fills tslab_classes (src/size_class.c). */
TSLAB_INTERNAL void tslab_classes_init(void);

/* Population count: one instruction where the target has it. The library
 * is built for baseline x86-64, which has none, so there it asks whether the
 * CPU has one (src/os.c sets tslab_cpu_popcnt once, before any instance
 * exists) and uses it then; else the bit-parallel sum (the compiler's
 * fallback is an out-of-line call). A block's close counts its objects
 * with up to 17 of these, so this is measurable per request. */
#if !defined(__POPCNT__) && defined(__x86_64__)
TSLAB_INTERNAL extern bool tslab_cpu_popcnt;
#endif
static inline uint32_t tslab_popcount(uint64_t x) {
#if defined(__POPCNT__) || !defined(__x86_64__)
  return (uint32_t)__builtin_popcountll(x);
#else
  if (likely(tslab_cpu_popcnt)) {
    uint64_t n;
    __asm__("popcnt %1, %0" : "=r"(n) : "r"(x));
    return (uint32_t)n;
  }
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return (uint32_t)((x * 0x0101010101010101ull) >> 56);
#endif
}

/* Class of a request of 1..TSLAB_SMALL_MAX bytes: one table entry per 8
 * bytes (4 KiB in all; src/size_class.c), so that the lookup is an add, a
 * shift and a load, with no branch (docs/ARCHITECTURE.md section 2). */
#define TSLAB_CLASS_INDEX_ENTRIES (TSLAB_SMALL_MAX / 8u + 1u)
TSLAB_INTERNAL extern uint8_t tslab_class_index[TSLAB_CLASS_INDEX_ENTRIES];

static inline uint32_t tslab_class_of(size_t size) {
  TSLAB_ASSERT(size >= 1 && size <= TSLAB_SMALL_MAX);
  return tslab_class_index[(size + 7) >> 3];
}

/* ------------------------------------------------------------------------- */
/* Runs: slabs, blocks, large spans, free runs                               */
/* ------------------------------------------------------------------------- */

enum tslab_run_kind {
  TSLAB_RUN_NONE = 0,       /* in the hands of the heap or a formatter */
  TSLAB_RUN_FREE_DIRTY = 1, /* free, pages may be resident */
  TSLAB_RUN_FREE_CLEAN = 2, /* free, released to the OS */
  TSLAB_RUN_RELEASING = 3,  /* out of the heap's lists to be madvised */
  TSLAB_RUN_SLAB = 4,
  TSLAB_RUN_LARGE = 5,
  TSLAB_RUN_BLOCK = 6,
  TSLAB_RUN_RESERVED = 7,   /* a drained block in a thread's hot reserve */
  TSLAB_RUN_LIMBO = 8       /* a descriptor waiting for a grace period */
};

enum tslab_slab_mode { TSLAB_ATTACHED = 0, TSLAB_DETACHED = 1 };
enum tslab_notify { TSLAB_NOTIFY_NONE = 0, TSLAB_NOTIFY_ARMED = 1, TSLAB_NOTIFY_QUEUED = 2 };
enum tslab_bin_list {
  TSLAB_LIST_NONE = 0,
  TSLAB_LIST_CUR,     /* a bin's current slab, a slot's bumping block */
  TSLAB_LIST_READY,
  TSLAB_LIST_PARKED,
  TSLAB_LIST_FULL     /* a block that stopped bumping, still attached */
};
/* A span's life: LIVE, then FREED by the one free (or free-all) that wins
 * the exchange, COUNTED once that party has counted it, still listed (a
 * fork child finishes either, src/large.c). */
enum tslab_large_state { TSLAB_LARGE_LIVE = 1, TSLAB_LARGE_FREED = 2, TSLAB_LARGE_COUNTED = 3 };

typedef struct tslab_tcache tslab_tcache_t;
typedef struct tslab_run tslab_run_t;
struct tslab_bin;

struct tslab_run {
  /* Line 0: everything the free fast path reads. The geometry is written by
   * the formatter inside `seq` (docs/ARCHITECTURE.md section 4). */
  uint8_t* start;
  uint64_t recip;             /* ceil(2^48 / obj_size): tslab_slot_index */
  /* What the ring word of the run's era (slot `ring_slot`) holds while the
   * era is open, TSLAB_STATE(era, ACTIVE): the free fast path compares the
   * two without computing either from `era` (tslab_run_set_era). */
  uint64_t active;
  _Atomic(tslab_tcache_t*) owner;
  _Atomic uint64_t* bits;     /* word pairs: [2w] alloc, [2w + 1] remote */
  /* Bits 0-15: used, the slots handed out or set aside less those freed
   * (blocks: biased, 3.4). Bits 16-63: local frees not yet added to the
   * bin's `frees` (section 9). Owner writes (one add per local free), the
   * closer at detach; statistics read it. */
  _Atomic uint64_t usage;
  struct tslab_bin* bin;      /* owner only: the bin holding a slab; NULL for blocks */
  /* capacity * obj_size: the bytes from `start` that hold slots (a slab's
   * tail past them holds none); 1 for a span, whose one object starts it.
   * tslab_slot_index bounds the offset by it. */
  uint32_t slot_bytes;
  uint8_t list;               /* owner only: enum tslab_bin_list */
  uint8_t ring_slot;          /* era & ring_mask (a ring has at most 256 slots) */
  uint8_t cls;                /* blocks: TSLAB_CLASSES */
  /* Owner only: `gens` is attached, so a local free bumps a generation; a
   * copy in this line because `gens` is in the next, which a local free
   * would otherwise read every time. */
  uint8_t has_gens;

  /* Line 1 on (`seq` shares its word with `granules` only: section 4). */
  _Atomic uint32_t seq __attribute__((aligned(8))); /* odd while the geometry is written */
  uint32_t granules;
  _Atomic uint64_t era;
  uint16_t obj_size;          /* blocks: the 16-byte unit */
  uint16_t capacity;          /* slots (blocks: units) */
  _Atomic(_Atomic uint16_t*) gens; /* slabs: per-slot handle generations */
  _Atomic uint8_t kind;       /* enum tslab_run_kind */
  uint8_t in_era_list;        /* on its era slot's detached list (slot mutex; relaxed atomic) */
  /* Its era's label index + 1 once the era left the ring (its slot's next
   * advance, slot mutex), 0 else: late frees count for the label (7.5). */
  uint16_t era_label;
  uint8_t zeroed;             /* formatter: the heap gave memory that was released or never used */
  uint8_t era_counted;        /* blocks: its closer added it to its era's runs (7.5); block_format resets */
  uint16_t words;
  uint16_t gen;               /* blocks and spans: handle generation (relaxed: read through views) */
  uint16_t bits_cap;          /* word pairs of the attached bitmap block */
  uint32_t gens_cap;          /* slots of the attached generation array */
  _Atomic uint32_t mode;
  _Atomic uint32_t notify;
  /* Set by a remote free after its bit (release), cleared by the owner's
   * collection before it reads the remote words: the owner skips runs no
   * remote free touched since it last looked. */
  _Atomic uint32_t remote_hint;
  uint32_t hint;              /* owner only: slabs: where the next word scan starts;
                                 blocks: objects allocated, once bumping stopped */
  uint32_t bumped;            /* blocks: units handed out, once bumping stopped */
  _Atomic int64_t live;       /* detached accounting */
  _Atomic uint64_t* starts;   /* blocks: object start bits */
  /* The cache that formatted the run; kept after a detach, to tell
   * cross-thread frees apart. */
  _Atomic(tslab_tcache_t*) creator;
  _Atomic uint32_t large_state;
  uint32_t depth;             /* hot reserve: granules of the spare stack from this block down, or
                                 the hot block's own (relaxed: statistics read it) */
  /* Hot reserve: the next spare block down the stack. Its own link (not
   * `heap_next`, which a releaser rewrites once it took the stack) because
   * the owner reads it for its pop while a releaser may take the stack. */
  _Atomic(tslab_run_t*) spare_next;
  int64_t detach_delta;       /* the closer's, between detach and live */

  /* Ready / parked / full lists: the owner writes (relaxed atomic stores),
   * the closer at detach; statistics walk them. */
  tslab_run_t* bin_next;
  tslab_run_t* bin_prev;
  tslab_run_t* notify_next;   /* owner cache's mutex */
  tslab_run_t* notify_prev;
  tslab_run_t* era_next;      /* era slot's detached list, or the heap's span list */
  tslab_run_t* era_prev;

  /* Heap links (heap mutex). */
  tslab_run_t* heap_next;
  tslab_run_t* heap_prev;
  tslab_run_t* lru_next;
  tslab_run_t* lru_prev;
  uint64_t retired;           /* grace stamp of the retirement (section 4) */
  uint64_t pooled_ns;         /* dirty pool: when it entered (coarse clock), for decay */
  uint32_t decay_slot;        /* dirty pool: ring slot + 1 of the active era whose retire put
                                 it beyond pool_resident_max, 0 when it did not (section 5) */
};

/* ------------------------------------------------------------------------- */
/* Grace periods (src/grace.c, docs/ARCHITECTURE.md section 4)               */
/* ------------------------------------------------------------------------- */

typedef struct tslab_grace_wait {
  _Atomic uint64_t* busy;
  uint64_t seen;              /* the odd value read at the seal */
} tslab_grace_wait_t;

typedef struct tslab_grace {
  pthread_mutex_t mu;         /* seals and polls */
  _Atomic uint64_t gen;       /* stamp of what is retired now */
  _Atomic uint64_t done;      /* every stamp below this has passed */
  uint64_t sealed;            /* the generation a pending seal waits for, 0 = none */
  bool cacheless_seen;        /* the pending seal saw non-owner windows without a cache */
  /* The pending seal found an open window its table had no room for (the
   * table could not grow): it completes only at a moment when no window of
   * a cache but the sealer's is open (grace.c). */
  bool overflow;
  const struct tslab_tcache* sealer; /* the cache the pending seal was made for (mu) */
  tslab_grace_wait_t* waits;  /* windows the pending seal waits for (mu) */
  size_t nwaits, cap;
  size_t waits_bytes;
} tslab_grace_t;

/* ------------------------------------------------------------------------- */
/* Thread caches                                                             */
/* ------------------------------------------------------------------------- */

/* A slot a local free gave back to its bin (the free stack, section 3). */
typedef struct tslab_stacked {
  uint8_t* p;
  tslab_run_t* run;
  _Atomic uint64_t* word;     /* its alloc word in run's bitmap */
  uint64_t bit;
} tslab_stacked_t;

#define TSLAB_STACK_MAX 8u

typedef struct tslab_bin {
  /* Hot: the allocation fast path touches only these and the stack's top.
   * `mask` holds the free slots of one bitmap word of the current slab that
   * the owner has set aside for itself; allocating one sets its bit in
   * `*word`. The free stack holds slots local frees outside that word gave
   * back, from any slab of the bin (section 3, F1-F3). Set-aside slots,
   * the mask's and the stack's, count as taken (`taken`) from the moment
   * they are set aside, so allocating needs no counter: allocations = taken
   * - popcount(mask) - popcount(next_mask) - stack_len. A free onto the stack or back into the
   * mask counts once, in `taken`: such frees = taken - refilled. Owner
   * writes, relaxed; statistics read them. */
  _Atomic uint64_t mask;
  uint8_t* base;              /* address of the first slot of that word */
  _Atomic uint64_t* word;     /* the alloc bitmap word */
  /* The slot a local free put back into the mask last and its bit,
   * meaningful while the mask holds that bit: handing the slot out or
   * trimming the mask takes the bit away, and a new mask (another word)
   * comes with hot_bit 0. The next allocation takes it: its lines are the
   * likeliest in the core's cache, and its address comes from this load
   * instead of the free's slot-index arithmetic and the bit scan. Owner
   * only, like `mask`. */
  uint8_t* hot;
  uint64_t hot_bit;
  uint32_t size;              /* object size of the class */
  _Atomic uint32_t stack_len; /* on this line: an allocation that finds no hot slot reads it */
  /* Counters of this (slot, class) for the slot's era: the owner writes
   * them, the closer when it folds the bin. Both on this line: a local free
   * adds to one of them (`taken` for a slot set aside again, on the stack
   * or in the mask; `frees` for one of a parked slab), and a counter on a
   * line of its own cost every free of a mixed-size program a cache miss. */
  _Atomic uint64_t frees;
  _Atomic uint64_t taken;     /* slots set aside (by refills and frees), less those dropped unused */
  tslab_run_t* cur;           /* owner writes (relaxed atomic); statistics read */
  tslab_stacked_t stack[TSLAB_STACK_MAX]; /* owner only, below stack_len */
  /* Cold. */
  uint32_t cls;
  /* The next set-aside word (section 3): the free slots of a second word of
   * the current slab that a refill set aside with the first, counted like
   * the mask's, the address of its first slot and its alloc word. An
   * allocation that finds the mask and the stack empty makes it the mask
   * instead of refilling. Owner only, like `mask`; statistics read
   * `next_mask` before `mask`, which a promotion writes first. */
  _Atomic uint64_t next_mask;
  uint8_t* next_base;
  _Atomic uint64_t* next_word;
  _Atomic uint64_t refilled;  /* the refills' part of `taken` */
  /* Odd while the owner changes `cur` or the ready list, or moves pending
   * frees into `frees`, so that a reader never pairs one's old value with
   * another's new one. */
  _Atomic uint64_t seq;
  tslab_run_t* ready;         /* links: owner writes (relaxed atomic); statistics walk */
  tslab_run_t* parked;
  _Atomic uint64_t xfrees;
  _Atomic uint64_t slow;
  /* The highest counts a reader reported (raised with CAS), so counts never
   * go backwards. */
  _Atomic uint64_t frees_reported, allocs_reported;
  /* The counters are cumulative, never moved or reset (section 9); these
   * are their values when the bin started counting for the slot's era. */
  uint64_t base_allocs, base_frees, base_xfrees, base_slow;
} __attribute__((aligned(128))) tslab_bin_t;
_Static_assert(offsetof(tslab_bin_t, taken) + sizeof(uint64_t) <= 64, /* the last of them */
               "what the allocation and free fast paths read of a bin is on its first line");

/* Slots the bin has set aside in its mask and its next word (the current
 * slab's `used` counts them). Statistics that must not miss a promotion read
 * the two words in their own order (tcache.c, bin_try_read). */
static inline uint32_t tslab_bin_aside(tslab_bin_t* bin) {
  return tslab_popcount(atomic_load_explicit(&bin->mask, memory_order_relaxed)) +
         tslab_popcount(atomic_load_explicit(&bin->next_mask, memory_order_relaxed));
}

/* Per ring slot state of a thread cache: the bump state of the slot's era
 * (3.4) and which bins count for it. */
typedef struct tslab_slot_cache {
  /* Hot: the bump fast path (owner only). `room`, the bytes from `top` to
   * the block's end, is 0 when there is no block: the fast path's compare
   * fails without a special case, and a class allocation pays one compare
   * with memory to learn that there is no block, not two loads and a
   * subtraction. */
  uint8_t* top;
  size_t room;
  uint8_t* base;
  _Atomic uint64_t* bits;
  _Atomic uint64_t* starts;
  tslab_run_t* blk;           /* the bumping block, or NULL */
  /* Cold. The era the slot's bins and blocks count for, 0 = none: the
   * owner sets it (registering as a user of the era, 7.2), the closer
   * resets it. */
  _Atomic uint64_t era;
  size_t budget;              /* block bytes this cache may still bump for era */
  tslab_run_t* full;          /* blocks that stopped bumping (links: bin_next) */
  _Atomic uint64_t classes[2]; /* bins that count for era (owner sets, closer clears) */
  /* Block counters, cumulative like a bin's: frees folded from blocks'
   * pending counts, objects and bytes of blocks that left `blk` and `full`,
   * cross-thread frees, slow paths; and their values when the slot started
   * counting for its era. */
  _Atomic uint64_t bfrees, bxfrees, ballocs, bslow;
  _Atomic uint64_t bbytes_alloc, bbytes_free;
  uint64_t base_bfrees, base_bxfrees, base_ballocs, base_bslow, base_bbytes_alloc, base_bbytes_free;
  _Atomic uint64_t seq;       /* like a bin's */
  uint64_t remote_seen;       /* owner: the cache's block_remote when `full` was last collected */
  bool ever;                  /* counted for some era: statistics read it */
} __attribute__((aligned(64))) tslab_slot_cache_t;

/* The bytes an object of `size` takes in a block: whole 16-byte units. */
static inline size_t tslab_unit_round(size_t size) {
  return (size + ((size_t)1 << TSLAB_UNIT_SHIFT) - 1) & ~(((size_t)1 << TSLAB_UNIT_SHIFT) - 1);
}

/* Mark an object of sz bytes (a multiple of the unit) bumped at top of the
 * slot's block (3.4): its alloc bit at its first unit, a boundary after its
 * last. The caller then takes the size off `room` and publishes the new
 * top; the allocation fast path (src/alloc.c) and the refill's bump
 * (src/tcache.c) share this. The whole step as one helper, the refill's
 * test hook chosen by an argument, cost the churn pair 6 instructions and
 * the tiny request 114: the fast path then tested the returned pointer
 * instead of branching on the room. */
static inline __attribute__((always_inline)) void tslab_bump_mark(tslab_slot_cache_t* sc, uint8_t* top, size_t sz) {
  size_t u = (size_t)(top - sc->base) >> TSLAB_UNIT_SHIFT, end = u + (sz >> TSLAB_UNIT_SHIFT);
  _Atomic uint64_t* w = &sc->bits[2 * (u >> 6)];
  atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) | (1ull << (u & 63)), memory_order_relaxed);
  _Atomic uint64_t* b = &sc->starts[end >> 6];
  atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) | (1ull << (end & 63)), memory_order_relaxed);
}

/* Whether the slot's era may take a new block for an object of `size` (3.4):
 * block-sized, and budget left for one more block. */
static inline bool tslab_slot_block_room(const tslab_slot_cache_t* sc, size_t size) {
  return size <= TSLAB_BLOCK_OBJ_MAX && sc->budget >= TSLAB_BLOCK_BYTES_SMALL;
}

/* Cumulative counters of a cache (or of the instance, for threads without a
 * cache). Owner adds on slow paths and closers fold into them, under the
 * cache's stat lock and `stat_seq`. */
typedef struct tslab_counts {
  _Atomic uint64_t allocs, frees, xfrees, slow;
} tslab_counts_t;

/* Events a request causes (section 9), counted where they happen: in the
 * cache of the thread that caused them (an owner add: an instance-wide
 * atomic would cost every request a locked instruction), or in the
 * instance's copy for a thread without a cache (atomic adds). Readers sum
 * the instance's and every cache's. */
typedef struct tslab_events {
  _Atomic uint64_t epochs_opened, epochs_closed, epochs_freed_all, objects_ended, blocks_created, blocks_reused;
  _Atomic uint64_t slabs_created; /* slabs formatted and spans created */
} tslab_events_t;

struct tslab_tcache {
  /* The attached thread's id (tslab_thread_id), 0 while abandoned; written
   * under the registry mutex. */
  _Atomic uintptr_t tid;
  tslab_t* inst;
  /* The line of the fast paths: the owner writes `busy` on every call
   * (odd inside a window, section 6) and closers read it. */
  _Atomic uint64_t busy __attribute__((aligned(64)));
  tslab_slot_cache_t* slots;  /* ring_size entries, after the bins in the mapping */
  pthread_mutex_t mu __attribute__((aligned(64))); /* notify list, detach, folds (and their stat_seq) */
  tslab_run_t* notify_head;   /* mu */
  _Atomic uint32_t notify_pending;
  /* Remote frees into this cache's blocks (non-owners add, relaxed): the
   * owner collects its stopped blocks only when it moved (3.4). */
  _Atomic uint64_t block_remote __attribute__((aligned(64)));
  _Atomic(tslab_tcache_t*) reg_next __attribute__((aligned(64))); /* registry: append-only, walked lock-free */
  tslab_tcache_t* abandoned_next;    /* registry mutex */
  size_t bytes;               /* size of this mapping */
  /* Hot reserve (section 5): one drained block and a stack of spares. The
   * owner takes and gives with atomic exchanges / CAS; any thread may steal
   * all with an exchange (tslab_reserve_release). */
  _Atomic(tslab_run_t*) hot;
  _Atomic(tslab_run_t*) spares;
  /* Statistics (section 9): classes any bin of this cache ever counted for
   * (owner sets bits); frees this thread made in closed eras, per class and
   * for blocks (index TSLAB_CLASSES), owner adds; the events this thread
   * caused (TSLAB_COUNT_EVENT). */
  _Atomic uint64_t ever_classes[2];
  tslab_counts_t late[TSLAB_CLASSES + 1];
  tslab_events_t events;
  /* Slabs in use per class, as far as this cache's thread formatted them
   * or, as their owner, retired them (owner adds, modulo 2^64: a slab one
   * thread formats and another party retires leaves +1 here and -1 in the
   * instance's cls_slabs). tslab_class_slabs sums them. */
  _Atomic uint64_t cls_slabs[TSLAB_CLASSES];
  /* Readying (7.1): set (relaxed) by a closer that sent a block this cache
   * readied, never bumped, to the heap instead of this cache's reserve (the
   * era was closed by another thread); while set, the owner readies without
   * a block but for one era in TSLAB_READY_PROBE (`ready_probe`, owner
   * only), which clears it. */
  _Atomic bool ready_off;
  uint32_t ready_probe;
  /* Slow-path sampling: this thread's slow-path calls, owner only (an
   * instance-wide tick would be a locked instruction on one line for every
   * thread's every refill while sampling is on). It starts at a phase drawn
   * from the thread's id when a thread takes the cache (registry mutex):
   * from zero, every thread's first slow path would be timed, and a program
   * of short-lived threads would sample mostly first refills. */
  uint32_t sample_tick;
  /* fork child only: the cache's thread was inside a window at the fork, so
   * its runs' `used` counts are recomputed from their bitmaps (7.6). */
  bool forked_busy;
  /* Counts at adoption: a thread's own counts start there (registry mutex). */
  tslab_stats_thread_t adopted;
  tslab_bin_t bins[];         /* tslab_bins_count: ring_size * TSLAB_CLASSES */
};

/* Counters of detached bins, summed by a closer before it adds them to the
 * era's slot. */
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
/* Internal states beyond the public EMPTY / ACTIVE / CLOSING: CLOSING is a
 * close in progress, CLOSED a finished one (both public CLOSING). */
#define TSLAB_EPOCH_CLOSED 3u

/* The ring's state words, one cache line each: the fast paths index it with
 * a shift. */
typedef struct __attribute__((aligned(64))) tslab_epoch_state_word {
  _Atomic uint64_t state;     /* CAS only (section 7) */
} tslab_epoch_word_t;

typedef struct tslab_epoch_slot {
  /* Users of the era (7.2). */
  _Atomic(tslab_tcache_t*) user;
  _Atomic uint32_t multi;
  /* Non-owner frees of a non-active era writing its counters (7.4). */
  _Atomic uint32_t inflight;
  /* Refcount, label, detached list, and the reset when the slot takes a new
   * era: under `mu` (a spin lock; held for a handful of stores). */
  _Atomic uint32_t mu;
  int64_t refcount;
  char label[TSLAB_LABEL_MAX];
  int label_id;               /* index in the label registry, -1 = none */
  tslab_run_t* detached;      /* runs detached with live objects */
  uint64_t counts_era;        /* the era whose counts the counters below hold (set at its open) */
  uint64_t opened_ns;
  uint64_t rss_before_close, rss_after_close, released_at_close, close_ns;
  bool forced;
  /* Odd while a closer folds the caches' counts of the era into the f_
   * counters or advance retires them into a label (readers of the era
   * retry). Written by the era's one closer, or its advance. */
  _Atomic uint64_t stat_seq;
  _Atomic uint64_t f_allocs, f_frees, f_xfrees, f_slow, f_alloc_bytes, f_free_bytes;
  /* Non-owner frees outside an active era, threads without a cache, spans
   * (atomic adds). */
  _Atomic uint64_t allocs, frees, xfrees, slow;
  _Atomic uint64_t alloc_bytes, free_bytes;
  _Atomic uint64_t slabs;             /* slabs, blocks and spans of the era in use */
  _Atomic uint64_t slab_bytes;
  _Atomic uint64_t released_bytes;    /* total released for the era */
  _Atomic uint64_t large_allocs, large_frees, large_bytes_alloc, large_bytes_free;
} tslab_epoch_slot_t;

typedef struct tslab_label_entry {
  char name[TSLAB_LABEL_MAX];
  /* Totals of eras that left the ring (atomic adds by advance). */
  _Atomic uint64_t epochs, allocs, frees, xfrees, slow, alloc_bytes, free_bytes;
} tslab_label_entry_t;

/* ------------------------------------------------------------------------- */
/* Page heap                                                                 */
/* ------------------------------------------------------------------------- */

#define TSLAB_HEAP_EXACT 64u          /* exact-size bins for 1..64 granules */
#define TSLAB_HEAP_BINS (TSLAB_HEAP_EXACT + 40u)
_Static_assert(TSLAB_HEAP_BINS <= 128, "the heap's bin masks are two words");

typedef struct tslab_heap {
  pthread_mutex_t mu;
  tslab_run_t* clean[TSLAB_HEAP_BINS];
  uint64_t clean_mask[2];
  tslab_run_t* dirty[TSLAB_HEAP_BINS]; /* by bin_of(length), newest (or a split's rest) first */
  uint64_t dirty_mask[2];               /* bins whose dirty list is not empty */
  tslab_run_t* lru_head;              /* dirty runs, oldest first */
  tslab_run_t* lru_tail;
  size_t dirty_bytes;
  size_t top;                         /* granules handed out from the start */
  size_t top_max;                     /* highest top so far */
  size_t committed;                   /* bytes made usable */
  size_t populated;                   /* bytes below which the range was faulted in */
  /* Descriptor and bitmap storage (metadata region). Free lists hold only
   * what has passed a grace period; limbo holds the rest, oldest first. */
  tslab_run_t* free_descs;
  void* free_words[TSLAB_MAX_WORDS + 1]; /* bitmap blocks by word count */
  /* Block start bitmaps by their block's word count: a descriptor's start
   * bitmap, when it has one, holds bits_cap + 1 words. */
  void* free_starts[TSLAB_BLOCK_WORDS_MAX + 1];
  void* free_gens[TSLAB_MAX_SLOTS / 64 + 1]; /* by slot count / 64 */
  tslab_run_t* limbo_head;
  tslab_run_t* limbo_tail;
  size_t meta_top;
  size_t meta_committed;
  tslab_run_t** spans;                /* per ring slot: live spans of its era (era links) */
  /* Decay (section 5), per ring slot: retires that may still put runs of
   * the slot's active era beyond pool_resident_max (seq_cst, against the
   * closer's CAS), and the bytes of dirty runs such retires tagged with the
   * slot (written under mu, read by closers without it). */
  _Atomic uint32_t* decay_pending;
  _Atomic uint64_t* decay_bytes;
} tslab_heap_t;

/* What a retire tells the heap about the era of its runs, so that empty
 * runs of an active era may stay in the pool beyond pool_resident_max
 * (decay, section 5): the era's state word and its ACTIVE value. */
typedef struct tslab_retire_era {
  _Atomic uint64_t* state;
  uint64_t active;
  uint32_t slot;
} tslab_retire_era_t;

/* ------------------------------------------------------------------------- */
/* The instance                                                              */
/* ------------------------------------------------------------------------- */

struct tslab {
  /* What the fast paths read, in the first line (the instance is mapped,
   * so page-aligned): written once by tslab_create. */
  uint64_t id;                        /* unique per process, never reused */
  uint32_t ring_size, ring_mask, ring_shift;
  /* Requests the allocation fast path may serve: 1..fast_max bytes
   * (TSLAB_SMALL_MAX, or max_alloc_size when that is smaller). */
  size_t fast_max;
  uint8_t* base;                      /* reservation, 2 MiB aligned */
  size_t reserve;
  _Atomic(tslab_run_t*)* map;         /* per granule */
  tslab_epoch_word_t* ring;           /* state words */

  tslab_config_t config;
  size_t ngranules;
  _Atomic uint16_t* gen_base;         /* per granule: first handle generation of a run
                                         starting there (heap mutex writes) */
  uint16_t gen_seed;                  /* added to every handle generation (section 8) */
  size_t map_bytes;
  uint8_t* meta;                      /* metadata region */
  size_t meta_reserve;
  void* mapping;                      /* what tslab_os_reserve returned for the range */
  size_t mapping_bytes;

  tslab_heap_t heap;
  tslab_grace_t grace;

  tslab_epoch_slot_t* slots;          /* the rest of each ring slot */
  size_t ring_bytes;
  _Atomic uint64_t current;
  pthread_mutex_t label_mu;           /* the label registry */
  tslab_label_entry_t labels[TSLAB_LABELS_MAX + 1]; /* last: "(other)" */
  _Atomic uint32_t nlabels;

  pthread_mutex_t reg_mu;             /* cache registry: creation, adoption */
  _Atomic(tslab_tcache_t*) caches;    /* append-only list, read lock-free */
  tslab_tcache_t* abandoned;
  _Atomic uint64_t ncaches, nattached;
  /* Exiting threads flushing a cache of this instance now (taken under the
   * live-instance mutex while the instance is live; destroy waits for 0). */
  _Atomic uint32_t exiting;

  /* Instance-wide counters for what no thread cache can count. */
  _Atomic uint64_t invalid_frees;
  _Atomic uint64_t fail_closed, fail_stale, fail_unknown, fail_size, fail_oom;
  tslab_counts_t ext[TSLAB_CLASSES + 1];
  _Atomic uint64_t large_allocs, large_frees, large_xfrees, large_bytes_live;
  /* Non-owner windows of threads without a cache (sections 4, 6): the
   * closer and the grace clock wait for zero (read-modify-writes give the
   * fence). */
  _Atomic uint64_t cacheless_busy;
  _Atomic uint64_t slabs_recycled; /* heap mutex holder writes (plain adds); statistics read */
  _Atomic uint64_t release_calls, release_bytes, release_failures;
  /* Slabs in use per class (blocks are counted by walks): the retires of
   * parties other than a slab's owner (atomic subs, modulo 2^64), to which
   * tslab_class_slabs adds the caches' own counts. */
  _Atomic uint64_t cls_slabs[TSLAB_CLASSES];
  tslab_events_t events;              /* of threads without a cache */
  _Atomic uint64_t epochs_forced;
  _Atomic uint64_t resident_bytes;    /* runs handed out, in a reserve or dirty, not released */
  _Atomic uint64_t meta_bytes;

  /* Slow-path sampling: the sampled calls' sums (the ticks are the caches'). */
  _Atomic uint32_t sample_one_in;
  _Atomic uint64_t samples, sample_wall, sample_cpu, sample_wall_max;

  void* http;                         /* owned by src/http.c */

  /* Per entry of tslab_class_index: the index in a cache's bins of the bin
   * of that class in ring slot 0 (tslab_bin_at; the bin of slot s is at
   * this index ^ s). Written by tslab_create; the allocation fast path's
   * one load for its bin. On lines of its own: the sampled calls' sums
   * above are written by any thread's slow path. */
  uint16_t bin_of_size[TSLAB_CLASS_INDEX_ENTRIES] __attribute__((aligned(64)));
};
_Static_assert(offsetof(struct tslab, ring) + sizeof(void*) <= 64, "the fast paths' fields share one line");

/* The retire of runs of `era` that may decay while it is ACTIVE. */
static inline tslab_retire_era_t tslab_retire_era(const tslab_t* a, uint64_t era) {
  uint32_t slot = (uint32_t)(era & a->ring_mask);
  return (tslab_retire_era_t){&a->ring[slot].state, TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE), slot};
}

/* ------------------------------------------------------------------------- */
/* Counting into an era's slot                                               */
/* ------------------------------------------------------------------------- */

static inline uint64_t tslab_epoch_state(tslab_t* a, uint64_t era) {
  return atomic_load_explicit(&a->ring[era & a->ring_mask].state, memory_order_seq_cst);
}
static inline bool tslab_era_active(tslab_t* a, uint64_t era) {
  return tslab_epoch_state(a, era) == TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE);
}

/* Counting into the slot of an era that may no longer be active (7.4): the
 * slot's inflight count keeps advance from resetting it meanwhile. Returns
 * the slot while it still names the era (then call ..._exit), else NULL. */
static inline tslab_epoch_slot_t* tslab_era_count_enter(tslab_t* a, uint64_t era) {
  tslab_epoch_slot_t* es = &a->slots[era & a->ring_mask];
  atomic_fetch_add_explicit(&es->inflight, 1, memory_order_seq_cst);
  if (TSLAB_STATE_ERA(tslab_epoch_state(a, era)) == era) return es;
  atomic_fetch_sub_explicit(&es->inflight, 1, memory_order_release);
  return NULL;
}
static inline void tslab_era_count_exit(tslab_epoch_slot_t* es) {
  atomic_fetch_sub_explicit(&es->inflight, 1, memory_order_release);
}
/* Runs and bytes of runs the era holds. */
/* An era's run count, by its closer (its slot is CLOSING, which no advance
 * claims): no inflight bracket is needed. */
static inline void tslab_era_count_run_closing(tslab_epoch_slot_t* es, int64_t runs, int64_t bytes) {
  atomic_fetch_add_explicit(&es->slabs, (uint64_t)runs, memory_order_relaxed);
  atomic_fetch_add_explicit(&es->slab_bytes, (uint64_t)bytes, memory_order_relaxed);
}
/* The same by the owner of a run of `era`, inside its busy window with the
 * era ACTIVE and its cache registered as a user (a refill's new slab, a
 * free's empty one): a close of the era waits for that window (7.3), so the
 * slot cannot be opened again meanwhile and no bracket is needed: four
 * locked instructions less per slab round trip (the bracket's add and
 * subtract at its format and at its retire; the counts' own adds stay). */
static inline void tslab_era_count_run_owned(tslab_t* a, uint64_t era, int64_t runs, int64_t bytes) {
  tslab_era_count_run_closing(&a->slots[era & a->ring_mask], runs, bytes);
}
/* The same by anyone else, bracketed. */
static inline void tslab_era_count_run(tslab_t* a, uint64_t era, int64_t runs, int64_t bytes) {
  tslab_epoch_slot_t* es = tslab_era_count_enter(a, era);
  if (!es) return;
  tslab_era_count_run_closing(es, runs, bytes);
  tslab_era_count_exit(es);
}
static inline void tslab_era_count_released(tslab_t* a, uint64_t era, size_t bytes) {
  tslab_epoch_slot_t* es = tslab_era_count_enter(a, era);
  if (!es) return;
  atomic_fetch_add_explicit(&es->released_bytes, bytes, memory_order_relaxed);
  tslab_era_count_exit(es);
}

/* ------------------------------------------------------------------------- */
/* Cross-file internal functions                                             */
/* ------------------------------------------------------------------------- */

/* errors.c */
/* Record status as the thread's last error unless it is TSLAB_OK; return it. */
TSLAB_INTERNAL int tslab_fail(int status);

/* os.c */
TSLAB_INTERNAL void* tslab_os_reserve(size_t bytes);
TSLAB_INTERNAL void* tslab_os_reserve_aligned(size_t* bytes, size_t align, void** mapping, size_t* mapping_bytes);
TSLAB_INTERNAL bool tslab_os_commit(void* p, size_t bytes);
/* Give n page-aligned, committed ranges back to the OS (their pages read
 * as zeros on the next touch): ok[i] says whether range i went. Returns the
 * system calls that released memory: one per batch of ranges where the
 * kernel takes a batch (process_madvise), one per range elsewhere. */
TSLAB_INTERNAL size_t tslab_os_release_ranges(const struct iovec* ranges, size_t n, bool* ok);
/* Whether the kernel has taken a batch of releases in one call (false until
 * the first release, and for good once it refused one). */
TSLAB_INTERNAL bool tslab_os_release_batches(void);
TSLAB_INTERNAL size_t tslab_os_page_size(void);
TSLAB_INTERNAL void tslab_global_init(void);
TSLAB_INTERNAL void tslab_os_populate(void* p, size_t bytes);
TSLAB_INTERNAL void tslab_os_unmap(void* p, size_t bytes);
TSLAB_INTERNAL void* tslab_os_map(size_t bytes); /* readable zeroed memory */
TSLAB_INTERNAL void tslab_os_heavy_fence(void);
TSLAB_INTERNAL uint64_t tslab_os_thread_cpu_ns(void);
TSLAB_INTERNAL uint64_t tslab_coarse_ns(void);
TSLAB_INTERNAL uint64_t tslab_os_random(void);

/* Light side of the asymmetric fence (docs/ARCHITECTURE.md section 7.3): a
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

/* A small spin lock for sections of a few stores (era slots). */
static inline void tslab_spin_lock(_Atomic uint32_t* l) {
  for (unsigned spins = 0;; spins++) {
    uint32_t expected = 0;
    if (atomic_compare_exchange_weak_explicit(l, &expected, 1, memory_order_acquire, memory_order_relaxed))
      return;
    if (spins > 64) sched_yield();
  }
}
static inline void tslab_spin_unlock(_Atomic uint32_t* l) { atomic_store_explicit(l, 0, memory_order_release); }

/* A free of run r (a slab, a block or a span) of an era that has left the
 * ring (its slot claimed by a newer era), counted for the era's label (7.5,
 * "Late frees"), under the slot's mutex (held by the caller), which the
 * next era's open holds while it folds the slot's counters into the label:
 * before that fold, in the slot's counters (the fold takes them), after it,
 * in the label the run carries (none: the era had no label). */
static inline void tslab_era_count_left_ring_locked(tslab_t* a, const tslab_run_t* r, uint64_t era, size_t size,
                                                    bool cross) {
  tslab_epoch_slot_t* es = &a->slots[era & a->ring_mask];
  bool span = atomic_load_explicit(&r->kind, memory_order_relaxed) == TSLAB_RUN_LARGE;
  _Atomic uint64_t *frees = NULL, *bytes = NULL, *xfrees = NULL;
  if (es->counts_era == era) {
    frees = span ? &es->large_frees : &es->frees;
    bytes = span ? &es->large_bytes_free : &es->free_bytes;
    xfrees = &es->xfrees;
  } else if (r->era_label) {
    tslab_label_entry_t* l = &a->labels[r->era_label - 1];
    frees = &l->frees, bytes = &l->free_bytes, xfrees = &l->xfrees;
  }
  if (frees) {
    atomic_fetch_add_explicit(frees, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(bytes, size, memory_order_relaxed);
    if (cross) atomic_fetch_add_explicit(xfrees, 1, memory_order_relaxed);
  }
}
/* The same, taking the slot's mutex: for a free that stays counted in its
 * run until then (a span stays on its slot's list until it is counted). */
static inline void tslab_era_count_left_ring(tslab_t* a, const tslab_run_t* r, uint64_t era, size_t size,
                                             bool cross) {
  tslab_epoch_slot_t* es = &a->slots[era & a->ring_mask];
  tslab_spin_lock(&es->mu);
  tslab_era_count_left_ring_locked(a, r, era, size, cross);
  tslab_spin_unlock(&es->mu);
}

/* grace.c */
TSLAB_INTERNAL bool tslab_grace_init(tslab_t* a);
TSLAB_INTERNAL void tslab_grace_destroy(tslab_t* a);
/* The stamp of metadata retired now; the retirement's stores come first
 * (the fence orders them before the seal that will cover the stamp). */
static inline uint64_t tslab_grace_stamp(tslab_t* a) {
  atomic_thread_fence(memory_order_seq_cst);
  return atomic_load_explicit(&a->grace.gen, memory_order_seq_cst);
}

/* No other cache is inside a window now (a fence, then one load per cache):
 * metadata the caller retired before the call may be reused at once. */
TSLAB_INTERNAL bool tslab_grace_quiet(tslab_t* a, const tslab_tcache_t* self);
/* Whether everything stamped `stamp` may be reused now; polls (without
 * blocking) when it is not yet known to be. */
TSLAB_INTERNAL bool tslab_grace_passed(tslab_t* a, const tslab_tcache_t* self, uint64_t stamp);

/* heap.c */
TSLAB_INTERNAL bool tslab_heap_init(tslab_t* a);
TSLAB_INTERNAL void tslab_heap_destroy(tslab_t* a);
/* A run of n granules aligned to `align` granules, kind NONE, its
 * descriptor fresh or past its grace period and its `seq` odd: the caller
 * formats it and publishes it with tslab_run_publish. When no free run fits,
 * `purge` lets the heap release its dirty pool to coalesce one; without it
 * the caller has a fallback (a large block's is a small one). */
TSLAB_INTERNAL tslab_run_t* tslab_heap_alloc(tslab_t* a, const tslab_tcache_t* self, size_t granules,
                                             size_t align_granules, bool purge);
/* Release ranges of the reservation (tslab_os_release_ranges, ok[i] each
 * range's fate), counted in the instance's release statistics; returns the
 * bytes released. Without the heap mutex. */
TSLAB_INTERNAL size_t tslab_heap_release_ranges(tslab_t* a, const struct iovec* ranges, size_t n, bool* ok);
/* Give the run bitmaps for `words` words (and start bits), keeping the
 * ones it has when they fit; false when metadata runs out. */
TSLAB_INTERNAL bool tslab_heap_bitmaps(tslab_t* a, const tslab_tcache_t* self, tslab_run_t* r, uint32_t words,
                                       bool starts);
TSLAB_INTERNAL _Atomic uint16_t* tslab_heap_gens(tslab_t* a, const tslab_tcache_t* self, uint32_t capacity);
/* Swap r's descriptor for a fresh one (heap mutex; r goes to limbo): the
 * caller is about to format a run whose descriptor has not passed its grace
 * period. */
TSLAB_INTERNAL tslab_run_t* tslab_heap_fresh_desc(tslab_t* a, const tslab_tcache_t* self, tslab_run_t* r);
/* The descriptor's geometry is about to change (odd `seq`, G2); publish
 * makes it even again. */
TSLAB_INTERNAL void tslab_run_seq_begin(tslab_run_t* r);
TSLAB_INTERNAL void tslab_run_publish(tslab_t* a, tslab_run_t* r, uint8_t kind);
/* Take back empty runs (linked through heap_next, of one era): into the
 * dirty pool while it has room and `release` is false, else released to the
 * OS in as few calls as their addresses allow. With `era` (NULL: none) and
 * that era still ACTIVE, runs that do not fit pool_resident_max may stay in
 * the pool up to pool_decay_max beyond it, tagged with the era's slot
 * (decay, section 5). Returns the bytes released. */
TSLAB_INTERNAL size_t tslab_heap_retire_list(tslab_t* a, tslab_run_t* list, bool release,
                                             const tslab_retire_era_t* era);
TSLAB_INTERNAL size_t tslab_heap_retire(tslab_t* a, tslab_run_t* r, bool release);
/* Release the dirty pool (tslab_reserve_release). */
TSLAB_INTERNAL size_t tslab_heap_release_pool(tslab_t* a);
/* The closer of the era in `slot`, after its CAS to CLOSING: release the
 * runs decay kept for that slot while the pool is above pool_resident_max
 * (contract line 3). No lock and no system call when it kept none. Returns
 * the bytes released. */
TSLAB_INTERNAL size_t tslab_heap_decay_close(tslab_t* a, uint32_t slot);
TSLAB_INTERNAL void tslab_heap_span_link(tslab_t* a, tslab_run_t* r, uint32_t slot);
TSLAB_INTERNAL void tslab_heap_span_unlink(tslab_t* a, tslab_run_t* r, uint32_t slot);
TSLAB_INTERNAL void tslab_heap_span_label(tslab_t* a, uint32_t slot, uint64_t era, uint16_t label);
TSLAB_INTERNAL size_t tslab_heap_check(tslab_t* a, char* report, size_t cap);

static inline size_t tslab_run_index(tslab_t* a, const tslab_run_t* r) {
  return (size_t)(r->start - a->base) >> TSLAB_GRANULE_SHIFT;
}

/* The run holding p according to map[], for the run's owner: the owner's
 * runs never change under it (docs/ARCHITECTURE.md G3), so no validation
 * beyond the range check. */
static inline tslab_run_t* tslab_run_of(tslab_t* a, const void* p) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
  if (unlikely(off >= a->reserve)) return NULL;
  tslab_run_t* r = atomic_load_explicit(&a->map[off >> TSLAB_GRANULE_SHIFT], memory_order_acquire);
  if (!r || (uintptr_t)p - (uintptr_t)r->start >= ((uintptr_t)r->granules << TSLAB_GRANULE_SHIFT))
    return NULL;
  return r;
}

/* A consistent view of the run of p for a non-owner, in a fenced window
 * (section 4): the descriptor is read under its `seq`, and the copy below is
 * what the caller acts on. Inline: the non-owner free keeps the fields in
 * registers instead of a copy in memory it reads back. */
typedef struct tslab_run_view {
  tslab_run_t* r;
  uint8_t kind;
  uint8_t cls;
  uint32_t obj_size, capacity, granules, slot_bytes;
  uint64_t recip;
  uint8_t* start;
  uint64_t era;
  _Atomic uint64_t* bits;
  _Atomic uint64_t* starts;
} tslab_run_view_t;
static inline bool tslab_run_view(tslab_t* a, const void* p, tslab_run_view_t* v) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
  if (off >= a->reserve) return false;
  tslab_run_t* r = atomic_load_explicit(&a->map[off >> TSLAB_GRANULE_SHIFT], memory_order_acquire);
  if (!r) return false;
  uint32_t seq = atomic_load_explicit(&r->seq, memory_order_acquire);
  if (seq & 1) return false;
  v->r = r;
  v->kind = atomic_load_explicit(&r->kind, memory_order_acquire);
  v->start = TSLAB_RLOAD(r->start);
  v->granules = TSLAB_RLOAD(r->granules);
  v->cls = TSLAB_RLOAD(r->cls);
  v->obj_size = TSLAB_RLOAD(r->obj_size);
  v->capacity = TSLAB_RLOAD(r->capacity);
  v->recip = TSLAB_RLOAD(r->recip);
  v->slot_bytes = TSLAB_RLOAD(r->slot_bytes);
  v->bits = TSLAB_RLOAD(r->bits);
  v->starts = TSLAB_RLOAD(r->starts);
  v->era = atomic_load_explicit(&r->era, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&r->seq, memory_order_relaxed) != seq) return false;
  if ((uintptr_t)p - (uintptr_t)v->start >= ((uintptr_t)v->granules << TSLAB_GRANULE_SHIFT)) return false;
  return v->kind == TSLAB_RUN_SLAB || v->kind == TSLAB_RUN_BLOCK || v->kind == TSLAB_RUN_LARGE;
}

/* slab.c */
TSLAB_INTERNAL tslab_run_t* tslab_slab_new(tslab_t* a, tslab_tcache_t* tc, uint32_t cls, uint64_t era);
TSLAB_INTERNAL uint32_t tslab_slab_collect(tslab_t* a, tslab_run_t* s);
TSLAB_INTERNAL void tslab_slab_bump_gen(tslab_run_t* s, uint32_t idx);
TSLAB_INTERNAL bool tslab_run_free_nonowner(tslab_run_t* s, uint32_t idx, bool* notify, bool* retire);
TSLAB_INTERNAL int64_t tslab_run_detach(tslab_t* a, tslab_run_t* s);
TSLAB_INTERNAL uint64_t tslab_run_kill(tslab_t* a, tslab_run_t* s, uint64_t* remote_frees);
TSLAB_INTERNAL bool tslab_run_live_add(tslab_run_t* s, int64_t delta);
TSLAB_INTERNAL void tslab_era_list_push_locked(tslab_epoch_slot_t* es, tslab_run_t* r);
TSLAB_INTERNAL void tslab_era_list_unlink_locked(tslab_epoch_slot_t* es, tslab_run_t* r);
TSLAB_INTERNAL void tslab_run_retire(tslab_t* a, tslab_run_t* s);
TSLAB_INTERNAL void tslab_runs_retire(tslab_t* a, tslab_run_t* list);
/* tslab_run_retire by the slab's owner tc, in its busy window with the
 * slab's era ACTIVE (tslab_tcache_settle): its counts need no locked
 * instruction. */
TSLAB_INTERNAL void tslab_slab_retire_owned(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s);
TSLAB_INTERNAL bool tslab_slab_arm(tslab_run_t* s);
TSLAB_INTERNAL size_t tslab_slab_check(tslab_t* a, tslab_run_t* s, char* report, size_t cap);

/* Slot of p in a run (slab or block) starting at `start`, with reciprocal
 * `recip` (ceil(2^48 / size)) and `slot_bytes` bytes of slots (capacity *
 * size), or UINT32_MAX when p is not the start of a slot. The bound comes
 * first: it turns away the slab's tail and any pointer outside the run
 * (below `start`, the offset wraps above it), which the callers cannot
 * rule out, since the run map may hold stale entries (section 1); and it
 * keeps the offset below 2^18, where the reciprocal is exact. For an
 * offset q * size + r there, offset * recip is q * 2^48 plus a fraction:
 * below 2^18 when r is 0 (offset times recip's excess over 2^48 / size,
 * which is under 1), at least 2^48 / size >= 2^33 otherwise (sizes are at
 * most 2^15), and below 2^48 either way. So the slot is the product's top
 * 16 bits, and p starts it exactly when bits 32-47 are 0: a compare and one
 * multiplication, where a 32-bit reciprocal needed a second multiplication
 * to check the quotient and a compare with the capacity. */
static inline uint32_t tslab_slot_index(const uint8_t* start, uint64_t recip, uint32_t slot_bytes,
                                        const void* p) {
  uint64_t off = (uint64_t)((const uint8_t*)p - start);
  if (unlikely(off >= slot_bytes)) return UINT32_MAX;
  uint64_t q = off * recip;
  if (unlikely((q & 0xffff00000000ull) != 0)) return UINT32_MAX;
  return (uint32_t)(q >> 48);
}

static inline uint32_t tslab_slab_index(const tslab_run_t* s, const void* p) {
  return tslab_slot_index(s->start, s->recip, s->slot_bytes, p);
}

/* The formatter gives run r its era (and the era's copies the free fast path
 * reads on the descriptor's first line). */
static inline void tslab_run_set_era(const tslab_t* a, tslab_run_t* r, uint64_t era) {
  atomic_store_explicit(&r->era, era, memory_order_relaxed);
  TSLAB_RSTORE(r->active, TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE));
  TSLAB_RSTORE(r->ring_slot, (uint8_t)(era & a->ring_mask));
  r->era_label = 0;
}

/* Whether run r's copies agree with its era (tslab_check, world stopped). */
static inline bool tslab_run_era_copies_ok(const tslab_t* a, const tslab_run_t* r) {
  uint64_t era = atomic_load_explicit(&r->era, memory_order_relaxed);
  return r->active == TSLAB_STATE(era, TSLAB_EPOCH_ACTIVE) && r->ring_slot == (era & a->ring_mask);
}

/* A run's length in bytes. */
static inline size_t tslab_run_bytes(const tslab_run_t* r) { return (size_t)r->granules << TSLAB_GRANULE_SHIFT; }

/* Bitmap words that can hold set bits: a block's bumped prefix (bumped is
 * set once it stops bumping), a slab's whole bitmap. */
static inline uint32_t tslab_run_words(const tslab_run_t* s) {
  return s->cls == TSLAB_CLASSES ? (s->bumped + 63) >> 6 : s->words;
}

static inline bool tslab_bits_live(_Atomic uint64_t* bits, uint32_t idx) {
  uint64_t bit = 1ull << (idx & 63);
  return (atomic_load_explicit(&bits[2 * (idx >> 6)], memory_order_relaxed) & bit) &&
         !(atomic_load_explicit(&bits[2 * (idx >> 6) + 1], memory_order_relaxed) & bit);
}

/* block.c */
/* A block for era: a drained one of the cache's reserve (any length), else
 * (unless reserve_only) a new one of `granules` from the heap, or a small one
 * when the heap has no four free granules in a row for a large one. */
TSLAB_INTERNAL tslab_run_t* tslab_block_take(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t granules,
                                             bool reserve_only);
TSLAB_INTERNAL void tslab_block_stop(tslab_run_t* b, uint8_t* top);
TSLAB_INTERNAL uint32_t tslab_block_objects(const tslab_run_t* b, uint32_t units);
TSLAB_INTERNAL size_t tslab_block_object_size(_Atomic uint64_t* starts, uint32_t units, uint32_t unit);
TSLAB_INTERNAL bool tslab_block_keep(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* b);
TSLAB_INTERNAL size_t tslab_block_release_reserve(tslab_t* a, tslab_tcache_t* tc, bool release);
TSLAB_INTERNAL size_t tslab_block_reserve_bytes(tslab_tcache_t* tc);
/* Bytes of the block's live objects, among its first `units` units. */
TSLAB_INTERNAL uint64_t tslab_block_live_bytes(const tslab_run_t* b, uint32_t units);
/* Give back the pages of a block detached with live objects that none of
 * them touches; the bytes released (3.4). */
TSLAB_INTERNAL size_t tslab_block_trim(tslab_t* a, tslab_run_t* b);

/* tcache.c */
TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_slow(tslab_t* a);
TSLAB_INTERNAL bool tslab_bin_refill(tslab_t* a, tslab_tcache_t* tc, tslab_bin_t* bin, uint64_t era);
TSLAB_INTERNAL void* tslab_bump_refill(tslab_t* a, tslab_tcache_t* tc, uint64_t era, size_t size, size_t align,
                                       int* status);
TSLAB_INTERNAL int tslab_tcache_claim(tslab_t* a, tslab_tcache_t* tc, uint64_t era);
/* A cache whose readied blocks go to the heap (`ready_off`) readies one era
 * in this many with a block all the same, and with it clears the flag. */
#define TSLAB_READY_PROBE 64
/* The opener of era, its registered user, before the era is ACTIVE (7.1):
 * the cache's slot counts for the era, and a drained block of its reserve,
 * if it has one, is the slot's bumping block already, so the era's first
 * allocation takes the fast path. */
TSLAB_INTERNAL void tslab_tcache_ready_era(tslab_t* a, tslab_tcache_t* tc, uint64_t era);
/* The bin's allocations and frees for its era, read consistently from any
 * thread (section 9). */
TSLAB_INTERNAL void tslab_bin_read(tslab_bin_t* bin, uint64_t* allocs, uint64_t* frees);
TSLAB_INTERNAL void tslab_slot_blocks_read(tslab_slot_cache_t* sc, uint64_t* allocs, uint64_t* frees,
                                           uint64_t* alloc_bytes, uint64_t* free_bytes);
TSLAB_INTERNAL void tslab_tcache_unlink_run(tslab_tcache_t* tc, tslab_run_t* s);
/* Owner, in its window: a run got frees (emptied, or left the parked list). */
TSLAB_INTERNAL void tslab_tcache_settle(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s);
/* A cache's counts for its thread's statistics: what it folded plus its
 * live bins and blocks (cache mutex held). */
TSLAB_INTERNAL void tslab_tcache_sum(tslab_t* a, tslab_tcache_t* tc, tslab_stats_thread_t* out);
TSLAB_INTERNAL void tslab_tcache_ready(tslab_bin_t* bin, tslab_run_t* s);
/* Closer, the cache quiescent for `era`: take the slot's runs. Runs with
 * live objects are detached onto `detached` (their delta in detach_delta),
 * drained blocks go on `drained`; the era's counts are added to `sum`. */
TSLAB_INTERNAL void tslab_tcache_detach_slot(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, uint64_t era,
                                             tslab_run_t** detached, tslab_run_t** drained, tslab_fold_t* sum,
                                             bool ending);
/* The counts of the slot's era held by this cache (current less base). */
TSLAB_INTERNAL void tslab_tcache_era_counts(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, tslab_fold_t* sum);
/* Slabs of class cls in use: the instance's count and every cache's,
 * modulo 2^64 (exact at quiescence, which tslab_check compares; a reader
 * while slabs come and go may meet a retire by another party but not the
 * slab's format in its owner's cache, and sum below zero). */
TSLAB_INTERNAL uint64_t tslab_class_slabs(tslab_t* a, uint32_t cls);
/* The bin of (era, cls), counting for the era (owner, era active, claimed). */
TSLAB_INTERNAL tslab_bin_t* tslab_tcache_count_bin(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t cls);
TSLAB_INTERNAL void tslab_tcache_notify(tslab_tcache_t* tc, tslab_run_t* s);
TSLAB_INTERNAL void tslab_tcache_destroy_all(tslab_t* a);
TSLAB_INTERNAL void tslab_tcache_forget_instance(tslab_t* a);
TSLAB_INTERNAL size_t tslab_tcache_check(tslab_t* a, char* report, size_t cap);
TSLAB_INTERNAL bool tslab_instance_register(tslab_t* a);

TSLAB_INTERNAL void tslab_live_lock(void);
TSLAB_INTERNAL void tslab_live_unlock(void);
TSLAB_INTERNAL size_t tslab_live_count(void);
TSLAB_INTERNAL tslab_t* tslab_live_at(size_t i);
TSLAB_INTERNAL bool tslab_tls_owns(const tslab_tcache_t* tc);
TSLAB_INTERNAL void tslab_fork_init(void);
/* Fork child repairs (src/fork.c), single-threaded, locks free. */
TSLAB_INTERNAL void tslab_heap_fork_repair(tslab_t* a);
TSLAB_INTERNAL void tslab_epoch_fork_repair(tslab_t* a);
/* Recounts the runs of caches whose thread vanished inside a window;
 * returns their slabs no list holds (linked by heap_next), for
 * tslab_tcache_fork_adopt. */
TSLAB_INTERNAL tslab_run_t* tslab_runs_fork_reown(tslab_t* a);
TSLAB_INTERNAL bool tslab_run_fork_rehint(tslab_run_t* s);
TSLAB_INTERNAL void tslab_runs_fork_repair(tslab_t* a);
TSLAB_INTERNAL void tslab_block_fork_rewind(tslab_run_t* b, uint8_t* top);
TSLAB_INTERNAL void tslab_large_fork_repair(tslab_t* a);
TSLAB_INTERNAL void tslab_tcache_end_sections(tslab_t* a, tslab_tcache_t* tc);
TSLAB_INTERNAL void tslab_tcache_park_locked(tslab_t* a, tslab_tcache_t* tc);
TSLAB_INTERNAL void tslab_tcache_fork_relink(tslab_t* a, tslab_tcache_t* tc);
/* fork child, once a list was relinked (tslab_tcache_fork_relink): whether
 * run s is on list `which` that `head` heads, in constant time. Relinking
 * gave every run the list reaches its tag and a back link to a run whose
 * forward link is it (or, first, none, and the head naming it); a run no
 * list reaches never has both: a removal rewrites its predecessor's forward
 * link first, a push clears the run's back link and makes it the head last. */
static inline bool tslab_fork_listed(const tslab_run_t* s, uint8_t which, const tslab_run_t* head) {
  return s->list == which && (s->bin_prev ? s->bin_prev->bin_next == s : head == s);
}
TSLAB_INTERNAL void tslab_tcache_fork_adopt(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* s);
TSLAB_INTERNAL void tslab_tcache_fork_flush(tslab_t* a, tslab_tcache_t* tc);

/* A thread's (instance, cache) pair. `id` is the instance's unique id, or 0
 * when the entry is empty: instance ids are never reused, so comparing it
 * alone finds the cache (a new instance at a destroyed one's address has a
 * new id). */
typedef struct tslab_tls_entry {
  tslab_t* inst;
  uint64_t id;
  tslab_tcache_t* tc;
} tslab_tls_entry_t;

/* The thread's most recently used (instance, cache) pair; the others wait in
 * a per-thread table searched on a miss (src/tcache.c). */
TSLAB_INTERNAL extern __thread tslab_tls_entry_t tslab_tls_last;

/* This thread's cache for instance a (created on first use), or NULL. */
static inline tslab_tcache_t* tslab_tcache_get(tslab_t* a) {
  if (likely(tslab_tls_last.id == a->id)) return tslab_tls_last.tc;
  return tslab_tcache_slow(a);
}

/* The thread's cache for a if it has one already, without creating it. */
TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_find(tslab_t* a);
/* The cache a free goes through: tslab_tcache_get's, except for a thread
 * past its exit handler, which frees without one (NULL when it has none)
 * rather than take a cache nobody would give back. */
TSLAB_INTERNAL tslab_tcache_t* tslab_tcache_for_free(tslab_t* a);

static inline tslab_tcache_t* tslab_cache_next(tslab_tcache_t* tc) {
  return atomic_load_explicit(&tc->reg_next, memory_order_acquire);
}
static inline tslab_tcache_t* tslab_cache_first(tslab_t* a) {
  return atomic_load_explicit(&a->caches, memory_order_acquire);
}

/* Bins are laid out class-major: the bins of one class in every ring slot
 * share a page or two, so a thread whose epochs cycle through the ring
 * touches a page or two per class it uses. (Slot-major, a slot's 80 bins in
 * 20 KiB, was 3-9% faster on mixed sizes, fewer pages to translate, but
 * touched up to five pages per ring slot a thread uses: docs/BENCHMARKS.md.)
 * Within a class the slots are skewed, slot s of class c at position
 * s ^ (c & ring_mask): one epoch's bins of consecutive classes lie 8 KiB
 * apart (16 bins of 512 bytes), so without the skew the first line of every
 * bin of one epoch, the line the fast paths read, falls in the same L1 set
 * (a set holds 8 lines: a program of many sizes missed on most allocations
 * and frees). The skew spreads them over 8 sets and costs no instruction:
 * the fast path reads the index of slot 0 from the instance's table
 * (bin_of_size) and takes it ^ s. */
static inline size_t tslab_bins_count(const tslab_t* a) { return (size_t)a->ring_size * TSLAB_CLASSES; }

static inline size_t tslab_bin_index(const tslab_t* a, uint32_t slot, uint32_t cls) {
  return ((size_t)cls << a->ring_shift) | ((cls & a->ring_mask) ^ slot);
}

static inline tslab_bin_t* tslab_bin_at(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, uint32_t cls) {
  return &tc->bins[tslab_bin_index(a, slot, cls)];
}

/* The bin of the class of `size` (1..TSLAB_SMALL_MAX) in ring slot `slot`. */
_Static_assert((size_t)TSLAB_RING_MAX * TSLAB_CLASSES <= UINT16_MAX + 1u, "bin_of_size holds any bin index");
static inline tslab_bin_t* tslab_bin_of_size(tslab_t* a, tslab_tcache_t* tc, uint32_t slot, size_t size) {
  return &tc->bins[a->bin_of_size[(size + 7) >> 3] ^ slot];
}

static inline tslab_bin_t* tslab_bin(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t cls) {
  return tslab_bin_at(a, tc, (uint32_t)(era & a->ring_mask), cls);
}

/* Whether the slot's bin of class cls counts for the slot's era: its class
 * bit, which only the bin's set-up for the era sets (tcache.c,
 * bin_count_for_era) and the era's detach clears. */
static inline bool tslab_slot_counts_class(const tslab_slot_cache_t* sc, uint32_t cls) {
  return atomic_load_explicit(&sc->classes[cls >> 6], memory_order_relaxed) & (1ull << (cls & 63));
}

/* tslab_tcache_count_bin, inline when the bin counts for the era already:
 * a thread that frees other threads' objects counts each free in its own
 * bin. */
static inline tslab_bin_t* tslab_counting_bin(tslab_t* a, tslab_tcache_t* tc, uint64_t era, uint32_t cls) {
  if (likely(tslab_slot_counts_class(&tc->slots[era & a->ring_mask], cls))) return tslab_bin(a, tc, era, cls);
  return tslab_tcache_count_bin(a, tc, era, cls);
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

/* Count n events of one kind (a field of tslab_events_t) for the calling
 * thread: in its cache tc when it has one, else in the instance. */
#define TSLAB_COUNT_EVENT(a, tc, field, n) \
  tslab_count_event_at((tc) ? &(tc)->events.field : &(a)->events.field, (tc) != NULL, (n))
static inline void tslab_count_event_at(_Atomic uint64_t* c, bool owner, uint64_t n) {
  if (owner)
    tslab_owner_add(c, n);
  else if (n)
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* The busy window (section 6): `busy` is odd inside. Owner-only adds (one
 * unlocked add to memory on x86-64). */
static inline void tslab_busy_enter(tslab_tcache_t* tc) {
  tslab_owner_add(&tc->busy, 1);
  tslab_light_fence();
}

/* A non-owner window: the busy store is made visible before any load
 * (section 4). */
static inline void tslab_busy_enter_fenced(tslab_tcache_t* tc) {
  tslab_owner_add(&tc->busy, 1);
  atomic_thread_fence(memory_order_seq_cst);
}

/* Leaving: everything the window wrote is visible before `busy` is even
 * again (a release; on x86-64 stores are not reordered with stores). */
static inline void tslab_busy_exit(tslab_tcache_t* tc) {
#if defined(__x86_64__) && !defined(TSLAB_TSAN)
  atomic_signal_fence(memory_order_release);
  __asm__("addq $1, %0" : "+m"(*(uint64_t*)&tc->busy));
#else
  atomic_store_explicit(&tc->busy, atomic_load_explicit(&tc->busy, memory_order_relaxed) + 1, memory_order_release);
#endif
}

/* A non-owner window of the calling thread (sections 4 and 6): its cache's
 * busy word with a full fence, or for a thread without a cache the
 * instance's counter, whose read-modify-writes are the fence. Inside one, no
 * descriptor the thread can reach is cleared or formatted again in place. */
static inline void tslab_window_enter(tslab_t* a, tslab_tcache_t* tc) {
  if (tc)
    tslab_busy_enter_fenced(tc);
  else
    atomic_fetch_add_explicit(&a->cacheless_busy, 1, memory_order_seq_cst);
}

static inline void tslab_window_exit(tslab_t* a, tslab_tcache_t* tc) {
  if (tc)
    tslab_busy_exit(tc);
  else
    atomic_fetch_sub_explicit(&a->cacheless_busy, 1, memory_order_release);
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

/* tslab_bump as a release: a reader whose acquire load sees the new count
 * sees every store the owner made before it (on x86-64 every store is one;
 * the compiler barrier keeps the add after them). */
static inline void tslab_bump_release(_Atomic uint64_t* c, uint64_t n) {
#if TSLAB_COUNTERS && defined(__x86_64__) && !defined(TSLAB_TSAN)
  atomic_signal_fence(memory_order_release);
  tslab_owner_add(c, n);
#elif TSLAB_COUNTERS
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_release);
#else
  (void)c;
  (void)n;
#endif
}

#define TSLAB_USED_BITS 16
#define TSLAB_USED_MASK ((1ull << TSLAB_USED_BITS) - 1)
/* used counts slots (block units), allocated or set aside: at most the
 * capacity. */
_Static_assert(TSLAB_SMALL_MAX <= UINT16_MAX && TSLAB_MAX_SLOTS <= UINT16_MAX && TSLAB_BLOCK_UNITS_MAX <= UINT16_MAX &&
                   ((size_t)TSLAB_SLAB_MAX_GRANULES << TSLAB_GRANULE_SHIFT) <= ((size_t)1 << 18) &&
                   offsetof(tslab_run_t, has_gens) < 64 && offsetof(tslab_run_t, ring_slot) < 64 &&
                   offsetof(tslab_run_t, slot_bytes) < 64 &&
                   TSLAB_RING_MAX <= 256,
               "a run's geometry fits its 16-bit fields, its slot bytes stay below 2^18, and what a "
               "local free reads is on the descriptor's first line");
_Static_assert(TSLAB_BLOCK_UNITS_MAX <= TSLAB_USED_MASK && TSLAB_MAX_SLOTS <= TSLAB_USED_MASK,
               "used must fit its bits of usage");
_Static_assert(TSLAB_BLOCK_UNITS_MAX <= (1u << TSLAB_HANDLE_SLOT_BITS) && TSLAB_MAX_SLOTS <= (1u << TSLAB_HANDLE_SLOT_BITS),
               "handles name every slot");

static inline uint32_t tslab_slab_used(const tslab_run_t* s) {
  return (uint32_t)(atomic_load_explicit(&s->usage, memory_order_relaxed) & TSLAB_USED_MASK);
}

/* Whether a parked slab has the free slots that send it back to its bin's
 * ready list (section 3.2): an eighth of its capacity, at least one since
 * every slab holds at least eight slots. A slab that came back after a
 * single free would be current for one allocation and be parked again, a
 * refill for every allocation of a program that frees at random in a
 * working set it keeps full. */
#define TSLAB_READY_SHIFT 3
_Static_assert(((size_t)TSLAB_SLAB_MAX_GRANULES << TSLAB_GRANULE_SHIFT) / TSLAB_SMALL_MAX >= (1u << TSLAB_READY_SHIFT),
               "the largest class's slab holds at least eight slots (src/size_class.c)");
static inline bool tslab_slab_parked_ready(const tslab_run_t* s) {
  return tslab_slab_used(s) <= (uint32_t)s->capacity - (s->capacity >> TSLAB_READY_SHIFT);
}

static inline uint64_t tslab_slab_pending(const tslab_run_t* s) {
  return atomic_load_explicit(&s->usage, memory_order_relaxed) >> TSLAB_USED_BITS;
}

/* Owner: used += n (n may be negative); pending frees are untouched. */
static inline void tslab_slab_used_add(tslab_run_t* s, int64_t n) { tslab_owner_add(&s->usage, (uint64_t)n); }

/* epoch.c */
TSLAB_INTERNAL bool tslab_epochs_init(tslab_t* a);
TSLAB_INTERNAL int tslab_epoch_reject_status(tslab_t* a, uint64_t era);
TSLAB_INTERNAL void tslab_epoch_count_failure(tslab_t* a, int status);

/* large.c */
TSLAB_INTERNAL bool tslab_large_free(tslab_t* a, tslab_tcache_t* tc, tslab_run_t* r);
TSLAB_INTERNAL void* tslab_large_alloc(tslab_t* a, tslab_tcache_t* tc, size_t size, size_t align, uint64_t era);
TSLAB_INTERNAL uint64_t tslab_large_kill_era(tslab_t* a, uint32_t slot, uint64_t era);

/* stats.c: slow-path sampling */
TSLAB_INTERNAL void tslab_sample_clocks(uint64_t* wall, uint64_t* cpu);
TSLAB_INTERNAL void tslab_sample_end(tslab_t* a, uint64_t wall, uint64_t cpu);

/* Whether this slow-path call of the cache's owner is one the sampling
 * times (one in `sample_one_in` of each thread's), reading the clocks if
 * so. Inline: with sampling off (the default) a refill pays a load and a
 * branch, not a call. */
static inline bool tslab_sample_begin(tslab_t* a, tslab_tcache_t* tc, uint64_t* wall, uint64_t* cpu) {
  uint32_t n = atomic_load_explicit(&a->sample_one_in, memory_order_relaxed);
  if (likely(n == 0) || tc->sample_tick++ % n != 0) return false;
  tslab_sample_clocks(wall, cpu);
  return true;
}

/* Test hooks (src/fault.h): points where a test may pause a thread. */
TSLAB_INTERNAL extern void (*_Atomic tslab_hook)(int point);
static inline void tslab_hook_point(int point) {
  void (*fn)(int) = atomic_load_explicit(&tslab_hook, memory_order_relaxed);
  if (unlikely(fn != NULL)) fn(point);
}

#endif
