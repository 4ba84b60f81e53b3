/* Fuzz target: the input bytes pick an instance configuration and drive a
 * random sequence of public API calls on it, with invalid, foreign, interior,
 * stale, double-freed and free-all-ended pointers and handles mixed in. A
 * model of the live set, of the epoch ring and of this thread's bump blocks
 * predicts the result of every call: the status, and for an allocation
 * whether it is bumped out of the era's block (at which address), starts a
 * new block, or comes from a class slab or a span, and so its exact usable
 * size. Every live object must still hold the pattern written when it was
 * allocated (also after its epoch closed and its block was trimmed), the
 * statistics must match the model and the allocator's own checker must find
 * nothing (after every step or every few, see check_all). Any divergence
 * aborts, which both libFuzzer and the corpus replay test (replay_main.c)
 * report as a failure.
 *
 * The driver is sequential: a second thread makes some frees and queries,
 * one at a time while the driver waits (see call), so that they take the
 * paths of a thread that does not own the memory; races are the business of
 * the concurrency tests and the model check. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_api.h"
#include "internal.h" /* a new block's length */
#include "tslab.h"

#define MAX_OBJS 64
#define MAX_OPS 400
#define MAX_DOMAINS 4
#define MAX_DEPTH 6
#define STALE_KEEP 16
#define MAX_CLASSES 128
/* A small instance: every run the fuzzer makes is faulted in by the page
 * heap, so the memory an input touches is what its run time is made of. */
#define RESERVE ((size_t)32 << 20)
#define RESERVE_SMALL ((size_t)4 << 20)  /* the smallest: allocations run out of memory */
#define MAX_ALLOC ((size_t)68 << 14)     /* max_alloc_size: spans past the heap's exact bins */
#define SPAN_SMALL ((size_t)128 << 10)   /* most spans stay below this */
#define GRANULE ((size_t)16 << 10)
/* An era's blocks on a thread are small until it has bumped a large one's
 * worth, then large when its budget has room (docs/ARCHITECTURE.md 3.4); a
 * drained block from the thread's reserve may be of either length. */
#define BLOCK_SMALL GRANULE
#define BLOCK_LARGE (4 * GRANULE)
#define BLOCK_OBJ_MAX ((size_t)4 << 10)  /* larger objects never start a block */
#define PATTERN_WHOLE ((size_t)64 << 10) /* larger objects: head and tail only */
#define PATTERN_EDGE ((size_t)4 << 10)
#define QUICK_EDGE 32

/* The pattern loops touch every byte of every object: under libFuzzer they
 * would trace each comparison, which is no coverage of the allocator. */
#if defined(__clang__)
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

/* -DTSLAB_FUZZ_TRACE prints every step, for reading a reproducer. */
#ifdef TSLAB_FUZZ_TRACE
#define TRACE(...) fprintf(stderr, __VA_ARGS__)
#else
#define TRACE(...) ((void)0)
#endif

#define FAIL(...)                                   \
  do {                                              \
    fprintf(stderr, "fuzz_api: step %u: ", step);   \
    fprintf(stderr, __VA_ARGS__);                   \
    fputc('\n', stderr);                            \
    abort();                                        \
  } while (0)

/* Where an object lives, which fixes its usable size. */
enum { K_BLOCK, K_CLASS, K_SPAN };

typedef struct {
  unsigned char* p;
  size_t size;   /* bytes that carry the pattern */
  size_t usable; /* what tslab_usable_size must say */
  uint64_t era;
  uint64_t id;
  tslab_handle_t h; /* 0 when allocated without a handle */
  uint8_t kind, cls;
} obj_t;

/* This thread's bump state for the era a ring slot holds: the block it
 * bumps (none when top is 0), the block budget left, and the classes the
 * era has slab objects of (the allocation fast path may hand out a slot of
 * such a class's slab instead of starting a new block). */
typedef struct {
  uintptr_t base, top, end;
  size_t budget;
  uint64_t class_bins[MAX_CLASSES / 64];
} bump_t;

/* The predicted placement of an allocation. */
typedef struct {
  uint8_t kind, cls;
  bool new_block; /* K_BLOCK: the object starts a new block */
  bool either;    /* a new block, or a slot of class cls (fast path) */
  size_t usable;
  size_t need;    /* fresh memory it may take, for the out-of-memory rule */
  bool top_full;  /* a new large block: the heap's unused range has no room for one */
} plan_t;

typedef struct {
  tslab_domain_t* d;
  uint64_t era;
  unsigned scopes;
  bool owns;
} dom_t;

typedef struct {
  const uint8_t* data;
  size_t len, pos;
} input_t;

/* The size-class table, read once through the statistics API. */
static struct {
  unsigned n;
  size_t size[MAX_CLASSES];
  size_t slab[MAX_CLASSES];
} classes;

/* All state of one run; static so a crash leaves it inspectable. */
static struct {
  tslab_t *a, *b;
  tslab_config_t cfg;
  uint32_t ring;
  bool skip_open;            /* TSLAB_ADVANCE_SKIP_OPEN */
  uint64_t cur;              /* current era */
  uint64_t slot_era[256];    /* era held by each ring slot (0: none) */
  bool slot_closed[256];
  bump_t bump[256];
  obj_t objs[MAX_OBJS];
  unsigned nobjs;
  uint64_t next_id;
  void* stale_ptrs[STALE_KEEP];
  tslab_handle_t stale_handles[STALE_KEEP];
  unsigned stale_n;
  dom_t doms[MAX_DOMAINS];
  unsigned ndoms;
  unsigned stack[MAX_DEPTH]; /* indices into doms, innermost last */
  unsigned depth;
  size_t max;                /* max_alloc_size */
  bool thorough;             /* check everything after every step */
  uint64_t invalid_frees;    /* refusals the instance must have counted */
  uint64_t blocks_taken;     /* blocks started (created or reused) */
  uint64_t blocks_reused;    /* of them, taken from a thread's reserve, as last seen */
  uint64_t ended;            /* objects ended by free-all closes */
  uint64_t freed_all;        /* free-all closes */
  uint64_t allocs, frees;    /* successful allocations and frees (free-all ends count) */
  uint64_t slot_allocs[256], slot_frees[256]; /* of the era each slot holds */
  uint64_t fails[TSLAB_ERR_NOT_SUPPORTED + 1]; /* failed allocations by status */
  uint64_t xfrees;           /* frees by the other thread */
  void* foreign;
  void* other;               /* a live object of instance b */
  tslab_handle_t other_h;
} m;
static unsigned step;

static uint8_t u8(input_t* in) { return in->pos < in->len ? in->data[in->pos++] : 0; }

static uint32_t u32(input_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = v << 8 | u8(in);
  return v;
}

NO_COVERAGE static unsigned char pattern(uint64_t id, size_t k) {
  return (unsigned char)(id * 131u + k * 7u + (k >> 8));
}

/* The byte ranges of an object that carry its pattern. */
NO_COVERAGE static void pattern_ranges(size_t size, size_t edge, size_t r[2][2]) {
  if (size <= 2 * edge) {
    r[0][0] = 0, r[0][1] = size, r[1][0] = r[1][1] = size;
  } else {
    r[0][0] = 0, r[0][1] = edge, r[1][0] = size - edge, r[1][1] = size;
  }
}

NO_COVERAGE static void fill(const obj_t* o) {
  size_t r[2][2];
  pattern_ranges(o->size, o->size <= PATTERN_WHOLE ? o->size : PATTERN_EDGE, r);
  for (int i = 0; i < 2; i++)
    for (size_t k = r[i][0]; k < r[i][1]; k++) o->p[k] = pattern(o->id, k);
}

NO_COVERAGE static void verify(const obj_t* o, size_t edge) {
  size_t r[2][2];
  size_t full = o->size <= PATTERN_WHOLE ? o->size : PATTERN_EDGE;
  pattern_ranges(o->size, edge < full ? edge : full, r);
  for (int i = 0; i < 2; i++)
    for (size_t k = r[i][0]; k < r[i][1]; k++)
      if (o->p[k] != pattern(o->id, k))
        FAIL("object %llu (%zu bytes at %p, era %llu) corrupted at offset %zu",
             (unsigned long long)o->id, o->size, (void*)o->p, (unsigned long long)o->era, k);
}

/* ---- size classes -------------------------------------------------------- */

static void load_classes(tslab_t* a) {
  if (classes.n) return;
  static tslab_stats_class_t all[MAX_CLASSES];
  uint32_t n = tslab_class_count(a);
  if (n == 0 || n > MAX_CLASSES || tslab_stats_classes(a, all, MAX_CLASSES) != n)
    FAIL("class table: %u classes", n);
  for (uint32_t c = 0; c < n; c++) {
    tslab_stats_class_t one;
    if (tslab_stats_class(a, c, &one) != TSLAB_OK || one.object_size != all[c].object_size ||
        all[c].index != c || (c && all[c].object_size <= all[c - 1].object_size))
      FAIL("class %u: tslab_stats_class and tslab_stats_classes disagree", c);
    classes.size[c] = all[c].object_size;
    classes.slab[c] = all[c].slab_bytes;
  }
  if (classes.size[n - 1] != tslab_small_max()) FAIL("the largest class is not tslab_small_max()");
  classes.n = n;
}

/* The smallest class holding size bytes at the alignment (a multiple of
 * it: class slabs start granule-aligned). */
static unsigned class_for(size_t size, size_t align) {
  unsigned c = 0;
  while (classes.size[c] < size) c++;
  while (align > 8 && classes.size[c] % align) c++;
  return c;
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }
static size_t round_granule(size_t n) { return (n + GRANULE - 1) & ~(GRANULE - 1); }

/* ---- the epoch model ---------------------------------------------------- */

/* Eras skipped by the skip-open policy were never opened: their slot holds
 * an older era (unknown) until a newer one takes it (stale). */
static int epoch_status(uint64_t e) {
  if (e == 0 || e > m.cur) return TSLAB_ERR_EPOCH_UNKNOWN;
  uint64_t held = m.slot_era[e % m.ring];
  if (held != e) return held > e ? TSLAB_ERR_EPOCH_STALE : TSLAB_ERR_EPOCH_UNKNOWN;
  return m.slot_closed[e % m.ring] ? TSLAB_ERR_EPOCH_CLOSED : TSLAB_OK;
}

static bool slot_open(uint64_t e) {
  return m.slot_era[e % m.ring] != 0 && !m.slot_closed[e % m.ring];
}

/* A newly opened era: no block yet, the whole budget (the first era never
 * uses blocks). */
static void bump_reset(uint64_t e) {
  bump_t* b = &m.bump[e % m.ring];
  memset(b, 0, sizeof *b);
  b->budget = e == 1 ? 0 : m.cfg.block_budget;
}

/* The era tslab_epoch_advance will open, per the advance policy (its slot
 * still open: the advance closes that era first, by force). */
static uint64_t model_next_era(void) {
  uint64_t e = m.cur + 1;
  if (m.skip_open)
    for (uint32_t i = 0; i < m.ring; i++)
      if (!slot_open(e + i)) {
        e += i;
        break;
      }
  return e;
}

/* The era tslab_epoch_advance opens. */
static void model_advance(void) {
  uint64_t e = model_next_era();
  m.cur = e;
  m.slot_era[e % m.ring] = e;
  m.slot_closed[e % m.ring] = false;
  m.slot_allocs[e % m.ring] = m.slot_frees[e % m.ring] = 0;
  bump_reset(e);
}

/* Counts of allocations, frees and failures the instance must show. An
 * era's own counts go to its slot only while the slot holds it. */
static void count_alloc(uint64_t e) {
  m.allocs++;
  if (m.slot_era[e % m.ring] == e) m.slot_allocs[e % m.ring]++;
}

static void count_free(uint64_t e) {
  m.frees++;
  if (m.slot_era[e % m.ring] == e) m.slot_frees[e % m.ring]++;
}

static void count_fail(int status) { m.fails[status]++; }

static int model_close(uint64_t e) {
  int st = epoch_status(e);
  if (st == TSLAB_ERR_EPOCH_CLOSED) return TSLAB_OK;
  if (st == TSLAB_OK) m.slot_closed[e % m.ring] = true;
  return st;
}

static uint64_t pick_era(input_t* in) {
  uint8_t s = u8(in);
  switch (s % 8) {
    case 0: return 0;
    case 1: return m.cur + 1 + s / 8;
    case 2: return UINT64_MAX - s / 8;
    case 3: return m.cur > (uint64_t)s / 8 ? m.cur - s / 8 : 1;       /* near the current */
    case 4: return m.cur > m.ring ? m.cur - m.ring - s / 8 % m.ring : 1; /* likely stale */
    default: return m.cur;
  }
}

/* ---- sizes -------------------------------------------------------------- */

static size_t pick_size(input_t* in) {
  uint8_t s = u8(in);
  uint32_t v = u32(in);
  size_t small_max = tslab_small_max();
  switch (s % 12) {
    case 0: return s / 12 % 4 == 0 ? 0 : 1 + v % 16;
    case 1:
    case 2: return classes.size[v % classes.n] + (s & 1); /* a class boundary, or one past it */
    case 3:
    case 4:
    case 5: return 1 + v % BLOCK_OBJ_MAX;                 /* block objects */
    case 6: return BLOCK_OBJ_MAX + (s / 12 & 1);          /* the largest block object, one past */
    case 7: return BLOCK_OBJ_MAX + 1 + v % (small_max - BLOCK_OBJ_MAX); /* class slabs only */
    case 8: return small_max + (s / 12 & 1);
    case 9: /* spans, mostly small ones */
      return small_max + 1 + v % ((v >> 28) ? SPAN_SMALL : m.max - small_max);
    case 10: return 1 + v % 256;
    default: {
      const size_t huge[] = {SIZE_MAX, m.max + 1, m.max, SIZE_MAX / 2 + 1 + v};
      return huge[v % 4];
    }
  }
}

/* May an allocation that takes `need` bytes of fresh memory run out of
 * memory? Only when the reservation cannot hold it past the committed
 * high-water mark (the page heap always extends that mark before it gives
 * up). */
static bool oom_allowed(size_t need) {
  tslab_stats_global_t g;
  tslab_stats_global(m.a, &g);
  return g.committed_bytes + need > m.cfg.reserve_bytes;
}

/* Where an allocation of size bytes at the alignment (0: none) in era e
 * goes (docs/ARCHITECTURE.md 3.4): objects of any size at an alignment up
 * to 16 are bumped out of the era's block while it has room; for an object up to 4 KiB a new block is started while the
 * era's budget has one more; everything else takes a slot of its class, or a
 * span. `fast`: the call may take the allocation fast path (tslab_alloc),
 * which hands out a set-aside slot of the size's class when the block is
 * full, before the slow path would start a new block. */
static plan_t plan_alloc(uint64_t e, size_t size, size_t align, bool fast) {
  plan_t pl = {0};
  if (size > tslab_small_max() || align > GRANULE) {
    pl.kind = K_SPAN;
    pl.usable = round_granule(size);
    pl.need = pl.usable + (align > GRANULE ? align : 0);
    return pl;
  }
  bump_t* b = &m.bump[e % m.ring];
  if (align <= 16) {
    size_t sz = round16(size);
    if (b->top && sz <= b->end - b->top) {
      pl.kind = K_BLOCK;
      pl.usable = sz;
      return pl;
    }
    if (size <= BLOCK_OBJ_MAX && b->budget >= BLOCK_SMALL) {
      pl.kind = K_BLOCK;
      pl.new_block = true;
      pl.usable = sz;
      pl.need = m.cfg.block_budget - b->budget >= BLOCK_LARGE && b->budget >= BLOCK_LARGE ? BLOCK_LARGE : BLOCK_SMALL;
      /* The heap gives a small block for a large one only when it has no
       * four free granules in a row, which it then cannot cut from its
       * unused range either. */
      pthread_mutex_lock(&m.a->heap.mu);
      pl.top_full = m.a->heap.top + BLOCK_LARGE / GRANULE > m.a->ngranules;
      pthread_mutex_unlock(&m.a->heap.mu);
      pl.cls = (uint8_t)class_for(size, 0);
      pl.either = fast && (b->class_bins[pl.cls / 64] >> (pl.cls % 64) & 1);
      return pl;
    }
  }
  pl.kind = K_CLASS;
  pl.cls = (uint8_t)class_for(size, align);
  pl.usable = classes.size[pl.cls];
  pl.need = classes.slab[pl.cls];
  return pl;
}

static uint64_t blocks_taken_now(uint64_t* reused) {
  tslab_stats_global_t g;
  tslab_stats_global(m.a, &g);
  if (reused) *reused = g.blocks_reused_total;
  return g.blocks_created_total + g.blocks_reused_total;
}

/* What the advance about to run does to this thread's cache
 * (docs/ARCHITECTURE.md 7.1): READY_YES, it readies it with a block (the
 * thread has a cache with a drained block in its reserve, the new era has
 * block budget, and the cache readies with a block: not `ready_off`, or this
 * readying is the probe that clears it); READY_MAYBE when the advance first
 * closes an open era by force, whose drained block may fill the reserve. */
enum { READY_NO, READY_YES, READY_MAYBE };
static int ready_expected(void) {
  tslab_tcache_t* tc = tslab_tcache_find(m.a);
  if (!tc || m.cfg.block_budget < BLOCK_SMALL) return READY_NO;
  if (atomic_load(&tc->ready_off) && (tc->ready_probe + 1) % TSLAB_READY_PROBE != 0) return READY_NO;
  if (slot_open(model_next_era())) return READY_MAYBE;
  return atomic_load(&tc->hot) || atomic_load(&tc->spares) ? READY_YES : READY_NO;
}

/* The advance that opened e readied this thread's cache with a reserve
 * block as `expected` (ready_expected before it) says: the era's bump state
 * starts at that block's start. A reserve block that had to go back to the
 * heap for want of metadata (section 4) readies none. */
static void model_readied(uint64_t e, int expected) {
  uint64_t reused, taken = blocks_taken_now(&reused);
  if (taken == m.blocks_taken) return;
  tslab_tcache_t* tc = tslab_tcache_find(m.a);
  tslab_slot_cache_t* sc = tc ? &tc->slots[e % m.ring] : NULL;
  if (expected == READY_NO || taken != m.blocks_taken + 1 || reused != m.blocks_reused + 1 || !sc || !sc->blk ||
      sc->top != sc->base)
    FAIL("advance to era %llu took %llu blocks (%llu from a reserve), the model expected %s",
         (unsigned long long)e, (unsigned long long)(taken - m.blocks_taken),
         (unsigned long long)(reused - m.blocks_reused), expected == READY_NO ? "none" : "one readied");
  bump_t* b = &m.bump[e % m.ring];
  size_t bytes = tslab_run_bytes(sc->blk);
  uintptr_t q = (uintptr_t)sc->base;
  if (q % GRANULE || (bytes != BLOCK_SMALL && bytes != BLOCK_LARGE))
    FAIL("advance to era %llu readied a block of %zu bytes at %p", (unsigned long long)e, bytes, (void*)q);
  b->budget = b->budget > bytes ? b->budget - bytes : 0;
  b->base = b->top = q;
  b->end = q + bytes;
  m.blocks_taken++;
  m.blocks_reused = reused;
}

/* tslab_thread_flush (or an exit): a readied block of an open era that was
 * never bumped goes back to the reserve, its bytes to the era's budget. */
static void model_flushed(void) {
  for (uint32_t i = 0; i < m.ring; i++) {
    bump_t* b = &m.bump[i];
    if (!m.slot_era[i] || m.slot_closed[i] || !b->top || b->top != b->base) continue;
    b->budget += b->end - b->base;
    if (b->budget > m.cfg.block_budget) b->budget = m.cfg.block_budget;
    b->base = b->top = b->end = 0;
  }
}

/* The allocation planned by pl succeeded with p: check where it went and
 * follow it in the bump model. */
static void plan_placed(plan_t* pl, void* p, size_t size, uint64_t e) {
  bump_t* b = &m.bump[e % m.ring];
  uint64_t reused;
  if (pl->either && blocks_taken_now(&reused) == m.blocks_taken) {
    pl->kind = K_CLASS;
    pl->new_block = false;
    pl->usable = classes.size[pl->cls];
  }
  uintptr_t q = (uintptr_t)p;
  if (pl->kind == K_BLOCK && pl->new_block) {
    /* (The old block itself when all its objects were freed: it drained
     * as it stopped and is the thread's hot block.) */
    if (q % GRANULE)
      FAIL("alloc(%zu, era %llu) = %p: expected the start of a new block", size,
           (unsigned long long)e, p);
    /* Its length: a new block's is the one planned, or small where a large
     * one was and the heap had no four free granules in a row (its unused
     * range had no room for them); a reused one's either. */
    blocks_taken_now(&reused);
    size_t bytes = tslab_run_bytes(tslab_run_of(m.a, p));
    bool fresh = reused == m.blocks_reused;
    if (fresh ? bytes != pl->need && !(bytes == BLOCK_SMALL && pl->top_full)
              : bytes != BLOCK_SMALL && bytes != BLOCK_LARGE)
      FAIL("alloc(%zu, era %llu) = %p: a %s block of %zu bytes, expected %zu", size, (unsigned long long)e, p,
           fresh ? "new" : "reused", bytes, pl->need);
    m.blocks_reused = reused;
    b->budget = b->budget > bytes ? b->budget - bytes : 0;
    b->base = q;
    b->end = q + bytes;
    b->top = q + pl->usable;
    m.blocks_taken++;
  } else if (pl->kind == K_BLOCK) {
    if (q != b->top)
      FAIL("alloc(%zu, era %llu) = %p: expected %p, bumped out of the era's block", size,
           (unsigned long long)e, p, (void*)b->top);
    b->top += pl->usable;
  } else if (pl->kind == K_CLASS) {
    b->class_bins[pl->cls / 64] |= 1ull << (pl->cls % 64);
  }
}

/* The allocation planned by pl failed for want of memory: a refill that
 * could not start a new block has stopped the old one. */
static void plan_failed(const plan_t* pl, uint64_t e) {
  bump_t* b = &m.bump[e % m.ring];
  if (pl->new_block) b->base = b->top = b->end = 0;
}

/* The outcome of an allocation of size in era e: p must be NULL exactly when
 * the model predicts a failure, with the predicted reason; an allocation
 * that may succeed is planned (pl) before the call and placed after it. */
static bool check_alloc_result(void* p, size_t size, uint64_t e, plan_t* pl, const char* what) {
  int want = size == 0 || size > m.max ? TSLAB_ERR_BAD_SIZE : epoch_status(e);
  int got = tslab_last_error();
  if (want != TSLAB_OK) {
    if (p) FAIL("%s(%zu, era %llu) succeeded, expected status %d", what, size,
                (unsigned long long)e, want);
    if (got != want) FAIL("%s(%zu, era %llu): status %d, expected %d", what, size,
                          (unsigned long long)e, got, want);
    count_fail(want);
    return false;
  }
  if (!p) {
    if (got != TSLAB_ERR_OUT_OF_MEMORY || (pl->kind == K_BLOCK && !pl->new_block) ||
        !oom_allowed(pl->need))
      FAIL("%s(%zu, era %llu) failed with status %d", what, size, (unsigned long long)e, got);
    plan_failed(pl, e);
    count_fail(TSLAB_ERR_OUT_OF_MEMORY);
    return false;
  }
  plan_placed(pl, p, size, e);
  count_alloc(e);
  return true;
}

static plan_t plan_for(size_t size, uint64_t e, size_t align, bool fast) {
  plan_t pl = {0};
  if (size != 0 && size <= m.max && epoch_status(e) == TSLAB_OK) pl = plan_alloc(e, size, align, fast);
  return pl;
}

static obj_t* find_obj(const void* p) {
  for (unsigned i = 0; i < m.nobjs; i++)
    if (m.objs[i].p == p) return &m.objs[i];
  return NULL;
}

static obj_t* find_handle(tslab_handle_t h) {
  for (unsigned i = 0; i < m.nobjs; i++)
    if (h != 0 && m.objs[i].h == h) return &m.objs[i];
  return NULL;
}

static void check_usable(const obj_t* o, const char* what) {
  size_t usable = tslab_usable_size(m.a, o->p);
  if (usable != o->usable)
    FAIL("%s: usable size of %p (%zu bytes, %s) is %zu, expected %zu", what, (void*)o->p, o->size,
         o->kind == K_BLOCK ? "block object" : o->kind == K_CLASS ? "class object" : "span", usable,
         o->usable);
  if (tslab_epoch_of(m.a, o->p) != o->era)
    FAIL("%s: epoch_of %p is %llu, expected %llu", what, (void*)o->p,
         (unsigned long long)tslab_epoch_of(m.a, o->p), (unsigned long long)o->era);
}

static void add_obj(void* p, size_t size, uint64_t e, tslab_handle_t h, bool zeroed, const plan_t* pl) {
  if (find_obj(p)) FAIL("%p handed out twice", p);
  obj_t o = {(unsigned char*)p, size, pl->usable, e, ++m.next_id, h, pl->kind, pl->cls};
  check_usable(&o, "new object");
  /* Natural alignment (tslab.h): the largest power of two dividing the
   * class, between 8 and 16 (block objects: 16); spans are 16 KiB aligned. */
  uintptr_t align = o.kind == K_SPAN ? GRANULE : o.usable % 16 == 0 ? 16 : 8;
  if ((uintptr_t)p % align != 0) FAIL("%p misaligned for %zu bytes", p, size);
  if (zeroed) {
    size_t r[2][2];
    pattern_ranges(size, size <= PATTERN_WHOLE ? size : PATTERN_EDGE, r);
    for (int i = 0; i < 2; i++)
      for (size_t k = r[i][0]; k < r[i][1]; k++)
        if (((unsigned char*)p)[k]) FAIL("calloc memory not zero at %zu", k);
  }
  if (m.nobjs == MAX_OBJS) {
    /* Model full: free it again at once, it has served its purpose. */
    if (!tslab_free(m.a, p)) FAIL("free of a fresh allocation failed");
    count_free(e);
    return;
  }
  m.objs[m.nobjs] = o;
  fill(&m.objs[m.nobjs++]);
}

static void remember_stale(void* p, tslab_handle_t h) {
  m.stale_ptrs[m.stale_n % STALE_KEEP] = p;
  m.stale_handles[m.stale_n % STALE_KEEP] = h;
  m.stale_n++;
}

/* o was freed (or ended by a free-all): out of the model. */
static void forget(obj_t* o) {
  count_free(o->era);
  remember_stale(o->p, o->h);
  *o = m.objs[--m.nobjs];
}

/* ---- the other thread ---------------------------------------------------- */

/* A call the driver makes from its own thread or from the other one. */
typedef struct {
  enum { C_FREE, C_FREE_HANDLE, C_HANDLE_GET, C_QUERY } what;
  void* p;
  tslab_handle_t h;
  bool ok;
  void* got;
  size_t usable;
  uint64_t era;
} call_t;

static void call_run(call_t* c) {
  switch (c->what) {
    case C_FREE: c->ok = tslab_free(m.a, c->p); break;
    case C_FREE_HANDLE: c->ok = tslab_free_handle(m.a, c->h); break;
    case C_HANDLE_GET: c->got = tslab_handle_get(m.a, c->h); break;
    default:
      c->usable = tslab_usable_size(m.a, c->p);
      c->era = tslab_epoch_of(m.a, c->p);
      break;
  }
}

/* The other thread: started by an input's first call from it, it runs one
 * call at a time and ends with the input (its exit abandons its cache). */
static struct {
  pthread_t t;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  call_t* req;
  bool quit, running;
} other_thread = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void* other_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&other_thread.mu);
  for (;;) {
    while (!other_thread.req && !other_thread.quit) pthread_cond_wait(&other_thread.cv, &other_thread.mu);
    if (!other_thread.req) break;
    call_run(other_thread.req);
    other_thread.req = NULL;
    pthread_cond_broadcast(&other_thread.cv);
  }
  pthread_mutex_unlock(&other_thread.mu);
  return NULL;
}

static void call(call_t* c, bool remote) {
  if (!remote) {
    call_run(c);
    return;
  }
  if (!other_thread.running) {
    other_thread.quit = false;
    if (pthread_create(&other_thread.t, NULL, other_main, NULL) != 0) FAIL("pthread_create failed");
    other_thread.running = true;
  }
  pthread_mutex_lock(&other_thread.mu);
  other_thread.req = c;
  pthread_cond_broadcast(&other_thread.cv);
  while (other_thread.req) pthread_cond_wait(&other_thread.cv, &other_thread.mu);
  pthread_mutex_unlock(&other_thread.mu);
}

static void other_thread_stop(void) {
  if (!other_thread.running) return;
  pthread_mutex_lock(&other_thread.mu);
  other_thread.quit = true;
  pthread_cond_broadcast(&other_thread.cv);
  pthread_mutex_unlock(&other_thread.mu);
  pthread_join(other_thread.t, NULL);
  other_thread.running = false;
}

static bool call_free(void* p, tslab_handle_t h, bool remote) {
  call_t c = {.what = h ? C_FREE_HANDLE : C_FREE, .p = p, .h = h};
  call(&c, remote);
  if (c.ok && remote && (p || h)) m.xfrees++; /* (free(NULL) frees nothing) */
  return c.ok;
}

/* ---- operations --------------------------------------------------------- */

static void alloc_one(size_t size, uint64_t e, int kind, size_t count) {
  tslab_handle_t h = 0;
  void* p;
  tslab_clear_error();
  plan_t pl = plan_for(kind == 2 ? size * count : size, e, 0, kind != 1);
  switch (kind) {
    case 0: p = tslab_alloc(m.a, size, e); break;
    case 1: p = tslab_alloc_handle(m.a, size, e, &h); break;
    default:
      p = tslab_calloc(m.a, count, size, e);
      size *= count;
      break;
  }
  TRACE("  %s(%zu, era %llu) = %p, %s%s\n", kind == 0 ? "alloc" : kind == 1 ? "alloc_handle" : "calloc",
        size, (unsigned long long)e, p, pl.kind == K_BLOCK ? "block" : pl.kind == K_CLASS ? "class" : "span",
        pl.either ? " (new block or class)" : pl.new_block ? " (new block)" : "");
  if (!check_alloc_result(p, size, e, &pl, kind == 0 ? "alloc" : kind == 1 ? "alloc_handle" : "calloc"))
    return;
  if (kind == 1 && (h == 0 || tslab_handle_get(m.a, h) != p)) FAIL("handle does not name %p", p);
  add_obj(p, size, e, h, kind == 2, &pl);
}

static void op_alloc(input_t* in, int kind) {
  size_t size = pick_size(in);
  uint64_t e = pick_era(in);
  size_t count = 1;
  if (kind == 2) {
    count = 1 + u8(in) % 8;
    if (u8(in) == 0xff) { /* count * size overflows */
      void* p = tslab_calloc(m.a, SIZE_MAX / 2 + 1, 2 + size, e);
      if (p || tslab_last_error() != TSLAB_ERR_BAD_SIZE) FAIL("calloc overflow accepted");
      count_fail(TSLAB_ERR_BAD_SIZE);
      return;
    }
    /* Zeroing is the allocator's work, paid per byte: keep it bounded. */
    size = (size <= m.max && size > SPAN_SMALL ? SPAN_SMALL : size) / count;
  }
  alloc_one(size, e, kind, count);
}

/* Many small allocations in one era: enough to fill blocks, use up a small
 * block budget and go on in class slabs within one input. Sizes stay near
 * one base size: past the budget every class takes a slab of its own. */
static void op_burst(input_t* in) {
  uint8_t s = u8(in);
  uint64_t e = pick_era(in);
  uint32_t v = u32(in);
  unsigned n = 4 + s % 29;
  size_t base = s & 0x80 ? 1 + v % BLOCK_OBJ_MAX : 1 + v % 256;
  for (unsigned i = 0; i < n; i++)
    alloc_one(base + (v >> 12) % 64 * i % 97, e, (s >> 5 & 3) == 3 ? 1 : 0, 1);
}

static void op_aligned(input_t* in) {
  uint8_t s = u8(in);
  size_t align = s % 4 == 0 ? (size_t)(s | 1) * 3 : (size_t)1 << (s % 23); /* bad ones too */
  size_t size = pick_size(in);
  uint64_t e = pick_era(in);
  tslab_clear_error();
  bool bad = (align & (align - 1)) || align > ((size_t)1 << 20);
  plan_t pl = bad ? (plan_t){0} : plan_for(size, e, align, false);
  void* p = tslab_aligned_alloc(m.a, align, size, e);
  if (bad) {
    if (p || tslab_last_error() != TSLAB_ERR_BAD_ALIGNMENT)
      FAIL("alignment %zu accepted (status %d)", align, tslab_last_error());
    count_fail(TSLAB_ERR_BAD_ALIGNMENT);
    return;
  }
  if (!check_alloc_result(p, size, e, &pl, "aligned_alloc")) return;
  if ((uintptr_t)p % align) FAIL("aligned_alloc(%zu, %zu) = %p: misaligned", align, size, p);
  add_obj(p, size, e, 0, false, &pl);
}

/* remote: from the other thread. */
static void op_free_live(input_t* in, bool remote) {
  if (!m.nobjs) return;
  obj_t* o = &m.objs[u8(in) % m.nobjs];
  bool by_handle = o->h && (u8(in) & 1);
  verify(o, SIZE_MAX);
  void* p = o->p;
  tslab_handle_t h = by_handle ? o->h : 0;
  if (!call_free(p, h, remote)) FAIL("valid free of object %llu refused", (unsigned long long)o->id);
  forget(o);
  uint8_t again = u8(in);
  if (again & 1) { /* double free, at once, from either thread */
    if (call_free(p, h, remote != ((again & 2) != 0))) FAIL("double free of %p accepted", p);
    m.invalid_frees++;
  }
}

/* A pointer that is not a live allocation of m.a, unless the model says it
 * is (a stale pointer whose slot was handed out again). */
static void* bad_pointer(input_t* in, unsigned char* stack_byte) {
  uint8_t s = u8(in);
  uint32_t v = u32(in);
  switch (s % 8) {
    case 0: return m.foreign;
    case 1: return stack_byte;
    case 2: return m.other;
    case 3:
    case 4:
      if (m.nobjs) { /* interior */
        obj_t* o = &m.objs[v % m.nobjs];
        return o->p + 1 + (o->usable > 1 ? v / 7 % (o->usable - 1) : 0);
      }
      return NULL;
    case 5: return m.stale_n ? m.stale_ptrs[v % (m.stale_n < STALE_KEEP ? m.stale_n : STALE_KEEP)] : NULL;
    case 6: /* somewhere in or near the reservation */
      return m.nobjs ? (void*)((uintptr_t)m.objs[0].p + (uintptr_t)((int64_t)(int32_t)v * 16)) : NULL;
    default: return (void*)(uintptr_t)(v | 1);
  }
}

static void op_free_bad(input_t* in, bool remote) {
  unsigned char stack_byte = 0;
  void* p = bad_pointer(in, &stack_byte);
  obj_t* o = find_obj(p);
  call_t q = {.what = C_QUERY, .p = p};
  call(&q, remote);
  if (q.usable != (o ? o->usable : 0) || q.era != (o ? o->era : 0))
    FAIL("usable_size/epoch_of(%p) = %zu/%llu, expected %zu/%llu", p, q.usable, (unsigned long long)q.era,
         o ? o->usable : 0, (unsigned long long)(o ? o->era : 0));
  bool ok = call_free(p, 0, remote);
  if (p == NULL || o) {
    if (!ok) FAIL("free(%p) refused, the model says it is live or NULL", p);
    if (o) forget(o);
    return;
  }
  if (ok) FAIL("free of a bad pointer %p accepted", p);
  m.invalid_frees++;
}

/* tslab_realloc keeps an object in place when the new size fits its usable
 * size and wastes at most half of it; an object of an era that accepts no
 * allocations (closed, stale) shrinks in place whatever the waste and cannot
 * grow past its usable size; otherwise it moves to a new allocation of its
 * era (planned like tslab_alloc, fast path included). */
static void op_realloc(input_t* in) {
  if (!m.nobjs || (u8(in) & 7) == 0) {
    unsigned char stack_byte = 0;
    void* p = bad_pointer(in, &stack_byte);
    if (p == NULL || find_obj(p)) return;
    tslab_clear_error();
    if (tslab_realloc(m.a, p, 64) != NULL || tslab_last_error() != TSLAB_ERR_INVALID_POINTER)
      FAIL("realloc of the bad pointer %p accepted", p);
    m.invalid_frees++;
    return;
  }
  obj_t* o = &m.objs[u8(in) % m.nobjs];
  size_t size = pick_size(in);
  size_t head = o->size <= PATTERN_WHOLE ? o->size : PATTERN_EDGE;
  int st = epoch_status(o->era);
  int want = TSLAB_OK;
  bool in_place = false;
  if (size == 0 || size > m.max)
    want = TSLAB_ERR_BAD_SIZE;
  else if (size <= o->usable && (size > o->usable / 2 || o->usable <= 16))
    in_place = true;
  else if (st != TSLAB_OK && size <= o->usable)
    in_place = true;
  else if (st != TSLAB_OK)
    want = st;
  /* A span that moves to grow gets room for half as much again (capped by
   * max_alloc_size), or, where memory cannot hold that, the exact size. */
  size_t roomy = size;
  if (want == TSLAB_OK && !in_place && size > o->usable && size > tslab_small_max()) {
    roomy = o->usable + o->usable / 2 < m.max ? o->usable + o->usable / 2 : m.max;
    if (roomy < size) roomy = size;
  }
  plan_t pl = want == TSLAB_OK && !in_place ? plan_alloc(o->era, roomy, 0, true) : (plan_t){0};
  tslab_clear_error();
  unsigned char* q = tslab_realloc(m.a, o->p, size);
  int got = tslab_last_error();
  if (q && roomy > size && tslab_usable_size(m.a, q) == round_granule(size) && oom_allowed(pl.need))
    pl = plan_alloc(o->era, size, 0, true);
  if (!q) {
    if (want == TSLAB_OK && !in_place && got == TSLAB_ERR_OUT_OF_MEMORY &&
        !(pl.kind == K_BLOCK && !pl.new_block) && oom_allowed(pl.need)) {
      plan_failed(&pl, o->era);
    } else if (want == TSLAB_OK || got != want) {
      FAIL("realloc(%zu -> %zu, era %llu) failed with status %d, expected %d%s", o->size, size,
           (unsigned long long)o->era, got, want, in_place ? " (in place)" : "");
    }
    count_fail(got);
    verify(o, SIZE_MAX);
    return;
  }
  if (want != TSLAB_OK) FAIL("realloc(%zu -> %zu) succeeded, expected status %d", o->size, size, want);
  if (in_place != (q == o->p))
    FAIL("realloc(%zu -> %zu, usable %zu, era status %d) %s", o->size, size, o->usable, st,
         in_place ? "moved" : "stayed in place");
  if (!in_place) {
    if (find_obj(q)) FAIL("%p handed out twice", (void*)q);
    plan_placed(&pl, q, size, o->era);
    count_alloc(o->era);
    count_free(o->era);
    remember_stale(o->p, o->h);
    o->p = q;
    o->h = 0;
    o->usable = pl.usable;
    o->kind = pl.kind;
    o->cls = pl.cls;
  }
  for (size_t k = 0; k < head && k < size; k++)
    if (q[k] != pattern(o->id, k)) FAIL("realloc lost byte %zu of object %llu", k, (unsigned long long)o->id);
  o->size = size;
  check_usable(o, "realloc");
  fill(o);
}

static void op_handles(input_t* in, bool remote) {
  uint8_t s = u8(in);
  uint32_t v = u32(in);
  tslab_handle_t h;
  bool forged = s % 5 >= 3;
  switch (s % 5) {
    case 0: h = m.nobjs ? m.objs[v % m.nobjs].h : 0; break;
    case 1: h = m.stale_n ? m.stale_handles[v % (m.stale_n < STALE_KEEP ? m.stale_n : STALE_KEEP)] : 0; break;
    case 2: h = m.other_h; break;
    case 3: h = ((uint64_t)v << 32) | u32(in); break;
    default: /* a live handle with its generation or slot changed */
      h = m.nobjs ? m.objs[v % m.nobjs].h ^ ((uint64_t)1 << (s / 5 % 64)) : 0;
      break;
  }
  obj_t* o = find_handle(h);
  call_t c = {.what = C_HANDLE_GET, .h = h};
  call(&c, remote);
  void* p = c.got;
  /* A forged handle may happen to name a live slot with its current
   * generation: then it is a valid name of that object. */
  if (!o && p && forged) o = find_obj(p);
  if (p != (o ? o->p : NULL))
    FAIL("handle_get(%#llx) = %p, expected %p", (unsigned long long)h, p, o ? (void*)o->p : NULL);
  if (!(s & 0x80)) return;
  c = (call_t){.what = C_FREE_HANDLE, .h = h};
  call(&c, remote);
  bool ok = c.ok;
  if (ok && remote) m.xfrees++;
  if (ok != (o != NULL)) FAIL("free_handle(%#llx) = %d", (unsigned long long)h, ok);
  if (o) {
    forget(o);
  } else {
    m.invalid_frees++;
  }
}

/* The statistics of era e against the model: its status, state and live
 * objects and bytes. */
static void check_epoch_stats(uint64_t e) {
  int st = epoch_status(e);
  tslab_stats_epoch_t es;
  int got = tslab_stats_epoch(m.a, e, &es);
  if (got != (st == TSLAB_ERR_EPOCH_CLOSED ? TSLAB_OK : st))
    FAIL("stats_epoch(%llu) = %d, era status %d", (unsigned long long)e, got, st);
  if (got != TSLAB_OK) return;
  uint64_t live = 0, bytes = 0;
  for (unsigned i = 0; i < m.nobjs; i++)
    if (m.objs[i].era == e) live++, bytes += m.objs[i].usable;
  if (es.allocations_total != m.slot_allocs[e % m.ring] || es.frees_total != m.slot_frees[e % m.ring])
    FAIL("stats_epoch(%llu): %llu allocations and %llu frees, the model has %llu and %llu",
         (unsigned long long)e, (unsigned long long)es.allocations_total, (unsigned long long)es.frees_total,
         (unsigned long long)m.slot_allocs[e % m.ring], (unsigned long long)m.slot_frees[e % m.ring]);
  if (es.era != e || es.live_objects != live || es.live_bytes != bytes ||
      es.state != (st == TSLAB_OK ? TSLAB_EPOCH_ACTIVE : TSLAB_EPOCH_CLOSING))
    FAIL("stats_epoch(%llu): era %llu, state %d, %llu live objects of %llu bytes; the model has "
         "%llu of %llu bytes, status %d",
         (unsigned long long)e, (unsigned long long)es.era, (int)es.state,
         (unsigned long long)es.live_objects, (unsigned long long)es.live_bytes,
         (unsigned long long)live, (unsigned long long)bytes, st);
}

static void op_epochs(input_t* in) {
  uint8_t s = u8(in);
  switch (s % 5) {
    case 0: {
      int ready = ready_expected();
      tslab_epoch_t e = tslab_epoch_advance(m.a);
      model_advance();
      if (e != m.cur) FAIL("advance opened %llu, expected %llu", (unsigned long long)e,
                           (unsigned long long)m.cur);
      model_readied(e, ready);
      break;
    }
    case 1: {
      uint64_t e = pick_era(in);
      int got = tslab_epoch_close(m.a, e);
      int want = model_close(e);
      if (got != want) FAIL("close(%llu) = %d, expected %d", (unsigned long long)e, got, want);
      break;
    }
    case 2: {
      uint64_t e = pick_era(in);
      if (tslab_epoch_status(m.a, e) != epoch_status(e))
        FAIL("status(%llu) = %d, expected %d", (unsigned long long)e, tslab_epoch_status(m.a, e),
             epoch_status(e));
      break;
    }
    case 3: check_epoch_stats(pick_era(in)); break;
    default:
      tslab_thread_flush(m.a);
      model_flushed();
      break;
  }
  if (tslab_epoch_current(m.a) != m.cur) FAIL("current era diverged");
}

/* A free-all close of an open or closed era: afterwards every object of the
 * era is dead for every call (free, free_handle, usable_size, epoch_of,
 * handle_get, realloc) and the era counts no live object. */
static void op_free_all(input_t* in) {
  uint64_t e = pick_era(in);
  int st = epoch_status(e);
  int want = st == TSLAB_ERR_EPOCH_CLOSED ? TSLAB_OK : st;
  tslab_clear_error();
  int got = tslab_epoch_free_all(m.a, e);
  TRACE("  free_all(%llu) = %d\n", (unsigned long long)e, got);
  if (got != want) FAIL("free_all(%llu) = %d, expected %d", (unsigned long long)e, got, want);
  if (got != TSLAB_OK) {
    if (tslab_last_error() != got) FAIL("free_all(%llu): last error %d", (unsigned long long)e, tslab_last_error());
    return;
  }
  m.slot_closed[e % m.ring] = true;
  m.freed_all++;
  obj_t dead[MAX_OBJS];
  unsigned n = 0;
  for (unsigned i = 0; i < m.nobjs;) {
    if (m.objs[i].era == e) {
      dead[n++] = m.objs[i];
      forget(&m.objs[i]);
    } else {
      i++;
    }
  }
  m.ended += n;
  for (unsigned i = 0; i < n; i++) {
    obj_t* o = &dead[i];
    if (tslab_usable_size(m.a, o->p) != 0 || tslab_epoch_of(m.a, o->p) != 0)
      FAIL("object %p of era %llu still live after its free-all", (void*)o->p, (unsigned long long)e);
    if (o->h && tslab_handle_get(m.a, o->h) != NULL) FAIL("handle of %p names it after its free-all", (void*)o->p);
    tslab_clear_error();
    bool freed = o->h && (o->id & 1) ? tslab_free_handle(m.a, o->h) : tslab_free(m.a, o->p);
    if (freed) FAIL("free of %p accepted after its era's free-all", (void*)o->p);
    m.invalid_frees++;
    if (tslab_last_error() != (o->h && (o->id & 1) ? TSLAB_ERR_INVALID_HANDLE : TSLAB_ERR_INVALID_POINTER))
      FAIL("free after free-all: status %d", tslab_last_error());
    if (o->id % 3 == 0) {
      if (tslab_realloc(m.a, o->p, 32) != NULL || tslab_last_error() != TSLAB_ERR_INVALID_POINTER)
        FAIL("realloc of %p accepted after its era's free-all", (void*)o->p);
      m.invalid_frees++;
    }
  }
  check_epoch_stats(e);
  /* Its memory went back: the era holds no slab, block or span. */
  tslab_stats_epoch_t es;
  if (tslab_stats_epoch(m.a, e, &es) != TSLAB_OK) FAIL("stats_epoch(%llu) after its free-all", (unsigned long long)e);
  if (es.slabs != 0 || es.rss_estimate_bytes != 0)
    FAIL("free_all(%llu): the era still holds %llu runs of %llu bytes", (unsigned long long)e,
         (unsigned long long)es.slabs, (unsigned long long)es.rss_estimate_bytes);
}

/* Maintenance: the hot reserve released on demand, thread flush, and the
 * whole ring's statistics. */
static void op_maintain(input_t* in) {
  uint8_t s = u8(in);
  switch (s % 4) {
    case 0:
    case 1: {
      tslab_stats_global_t g0, g1;
      tslab_stats_global(m.a, &g0);
      size_t released = tslab_reserve_release(m.a);
      tslab_stats_global(m.a, &g1);
      if (g1.reserve_bytes != 0 || g1.decay_bytes != 0)
        FAIL("reserve_release left %llu bytes of reserve and %llu decaying", (unsigned long long)g1.reserve_bytes,
             (unsigned long long)g1.decay_bytes);
      if (released != g0.reserve_bytes + g0.decay_bytes && g1.release_failures_total == g0.release_failures_total)
        FAIL("reserve_release released %zu bytes of a reserve of %llu and %llu decaying", released,
             (unsigned long long)g0.reserve_bytes, (unsigned long long)g0.decay_bytes);
      if (s & 0x80) {
        tslab_clear_error();
        if (tslab_reserve_release(NULL) != 0 || tslab_last_error() != TSLAB_ERR_INVALID_ARGUMENT)
          FAIL("reserve_release(NULL)");
      }
      break;
    }
    case 2:
      tslab_thread_flush(m.a);
      model_flushed();
      break;
    default: {
      static tslab_stats_epoch_t all[256];
      size_t n = tslab_stats_epochs(m.a, all, 256);
      size_t held = 0;
      for (uint32_t i = 0; i < m.ring; i++) held += m.slot_era[i] != 0;
      if (n != held) FAIL("stats_epochs: %zu eras, the ring holds %zu", n, held);
      for (size_t i = 0; i < n; i++) {
        if (i && all[i].era <= all[i - 1].era) FAIL("stats_epochs not oldest first");
        check_epoch_stats(all[i].era);
      }
      break;
    }
  }
}

/* Read an object back in full (an object of a closed era lives in a
 * detached, trimmed block or slab) and maybe give it a new pattern. */
static void op_touch(input_t* in) {
  if (!m.nobjs) return;
  uint8_t s = u8(in);
  obj_t* o = &m.objs[s % m.nobjs];
  verify(o, SIZE_MAX);
  check_usable(o, "touch");
  if (s & 0x80) {
    o->id = ++m.next_id;
    fill(o);
  }
}

/* ---- domains ------------------------------------------------------------ */

static void dom_remove(unsigned k) { m.doms[k] = m.doms[--m.ndoms]; }

static void dom_exit_model(dom_t* d) {
  m.depth--;
  if (--d->scopes == 0 && d->owns) model_close(d->era);
}

static void op_domains(input_t* in) {
  uint8_t s = u8(in);
  unsigned k = m.ndoms ? u8(in) % m.ndoms : 0;
  dom_t* d = m.ndoms ? &m.doms[k] : NULL;
  tslab_clear_error();
  switch (s % 7) {
    case 0:
    case 1: {
      if (m.ndoms == MAX_DOMAINS) return;
      bool create = s % 7 == 0;
      uint64_t e = create ? 0 : pick_era(in);
      int ready = create ? ready_expected() : READY_NO;
      tslab_domain_t* nd = create ? tslab_domain_create(m.a, (s & 0x80) ? "fuzz" : NULL)
                                  : tslab_domain_wrap(m.a, e);
      int want = TSLAB_OK;
      if (create) {
        model_advance();
        e = m.cur;
        model_readied(e, ready);
      } else {
        want = epoch_status(e);
      }
      if ((nd != NULL) != (want == TSLAB_OK) || (!nd && tslab_last_error() != want))
        FAIL("domain create/wrap(%llu): %p, status %d, expected %d", (unsigned long long)e,
             (void*)nd, tslab_last_error(), want);
      if (nd) {
        if (tslab_domain_epoch(nd) != e || tslab_domain_allocator(nd) != m.a)
          FAIL("domain bound to era %llu", (unsigned long long)tslab_domain_epoch(nd));
        m.doms[m.ndoms++] = (dom_t){nd, e, 0, create};
      }
      return;
    }
    case 2: {
      if (!d || m.depth == MAX_DEPTH) return;
      int want = epoch_status(d->era);
      int got = tslab_domain_enter(d->d);
      if (got != want) FAIL("domain_enter: %d, expected %d", got, want);
      if (got == TSLAB_OK) {
        m.stack[m.depth++] = k;
        d->scopes++;
      }
      return;
    }
    case 3: {
      if (!d) return;
      int want = d->scopes == 0 ? TSLAB_ERR_NOT_ENTERED
                 : m.stack[m.depth - 1] != k ? TSLAB_ERR_NOT_INNERMOST
                                             : TSLAB_OK;
      int got = tslab_domain_exit(d->d);
      if (got != want) FAIL("domain_exit: %d, expected %d", got, want);
      if (got == TSLAB_OK) dom_exit_model(d);
      return;
    }
    case 4: {
      size_t size = pick_size(in);
      uint64_t e = m.depth ? m.doms[m.stack[m.depth - 1]].era : 0;
      plan_t pl = m.depth ? plan_for(size, e, 0, true) : (plan_t){0};
      void* p = tslab_domain_alloc(size);
      if (m.depth == 0) {
        if (p || tslab_last_error() != TSLAB_ERR_NO_DOMAIN) FAIL("domain_alloc without a domain");
        return;
      }
      if (tslab_domain_current() != m.doms[m.stack[m.depth - 1]].d) FAIL("domain_current diverged");
      if (check_alloc_result(p, size, e, &pl, "domain_alloc")) add_obj(p, size, e, 0, false, &pl);
      return;
    }
    case 5: {
      if (!d) return;
      int want = model_close(d->era);
      int got = tslab_domain_force_close(d->d);
      if (got != want) FAIL("domain_force_close: %d, expected %d", got, want);
      return;
    }
    default: {
      if (!d) return;
      int got = tslab_domain_destroy(d->d);
      if (got != (d->scopes ? TSLAB_ERR_DOMAIN_ENTERED : TSLAB_OK))
        FAIL("domain_destroy with %u scopes: %d", d->scopes, got);
      if (got == TSLAB_OK) {
        if (d->owns) model_close(d->era);
        for (unsigned i = 0; i < m.depth; i++)
          if (m.stack[i] == m.ndoms - 1) m.stack[i] = k;
        dom_remove(k);
      }
      return;
    }
  }
}

/* ---- after every step --------------------------------------------------- */

/* After a step: the quick pattern check of every live object (level 0),
 * the global statistics (1), and the consistency checker, every class's
 * live count and the current era's statistics (2). The checker walks every
 * bin of the thread cache (ring slots x classes) and the statistics every
 * class of it, which under the fuzzer's instrumentation costs more than the
 * step itself, so the driver chooses the level per step (see
 * LLVMFuzzerTestOneInput); some inputs (with a small ring) check
 * everything after every step. */
static void check_all(int level) {
  if (level >= 2) {
    char report[256] = "";
    size_t n = tslab_check(m.a, report, sizeof report);
    if (n) FAIL("tslab_check: %zu inconsistencies: %s", n, report);
  }
  uint64_t class_live[MAX_CLASSES] = {0};
  uint64_t bytes = 0;
  for (unsigned i = 0; i < m.nobjs; i++) {
    verify(&m.objs[i], QUICK_EDGE);
    if (m.objs[i].kind == K_CLASS) class_live[m.objs[i].cls]++;
    bytes += m.objs[i].usable;
  }
  if (level < 1) return;
  tslab_stats_global_t g;
  tslab_stats_global(m.a, &g);
  if (g.live_objects != m.nobjs)
    FAIL("stats: %llu live objects, the model has %u", (unsigned long long)g.live_objects, m.nobjs);
  if (g.live_bytes != bytes)
    FAIL("stats: %llu live bytes, the model has %llu", (unsigned long long)g.live_bytes, (unsigned long long)bytes);
  if (g.invalid_frees_total != m.invalid_frees)
    FAIL("stats: %llu invalid frees counted, %llu made", (unsigned long long)g.invalid_frees_total,
         (unsigned long long)m.invalid_frees);
  if (g.cross_thread_frees_total != m.xfrees)
    FAIL("stats: %llu cross-thread frees, the model has %llu", (unsigned long long)g.cross_thread_frees_total,
         (unsigned long long)m.xfrees);
  if (g.allocations_total != m.allocs || g.frees_total != m.frees)
    FAIL("stats: %llu allocations and %llu frees, the model has %llu and %llu",
         (unsigned long long)g.allocations_total, (unsigned long long)g.frees_total,
         (unsigned long long)m.allocs, (unsigned long long)m.frees);
  if (g.alloc_fail_closed_total != m.fails[TSLAB_ERR_EPOCH_CLOSED] ||
      g.alloc_fail_stale_total != m.fails[TSLAB_ERR_EPOCH_STALE] ||
      g.alloc_fail_unknown_total != m.fails[TSLAB_ERR_EPOCH_UNKNOWN] ||
      g.alloc_fail_size_total != m.fails[TSLAB_ERR_BAD_SIZE] + m.fails[TSLAB_ERR_BAD_ALIGNMENT] ||
      g.alloc_fail_oom_total != m.fails[TSLAB_ERR_OUT_OF_MEMORY])
    FAIL("stats: failed allocations (closed, stale, unknown, size, memory) %llu %llu %llu %llu %llu, "
         "the model has %llu %llu %llu %llu %llu",
         (unsigned long long)g.alloc_fail_closed_total, (unsigned long long)g.alloc_fail_stale_total,
         (unsigned long long)g.alloc_fail_unknown_total, (unsigned long long)g.alloc_fail_size_total,
         (unsigned long long)g.alloc_fail_oom_total, (unsigned long long)m.fails[TSLAB_ERR_EPOCH_CLOSED],
         (unsigned long long)m.fails[TSLAB_ERR_EPOCH_STALE], (unsigned long long)m.fails[TSLAB_ERR_EPOCH_UNKNOWN],
         (unsigned long long)(m.fails[TSLAB_ERR_BAD_SIZE] + m.fails[TSLAB_ERR_BAD_ALIGNMENT]),
         (unsigned long long)m.fails[TSLAB_ERR_OUT_OF_MEMORY]);
  if (g.blocks_created_total + g.blocks_reused_total != m.blocks_taken)
    FAIL("stats: %llu blocks started, the model has %llu",
         (unsigned long long)(g.blocks_created_total + g.blocks_reused_total), (unsigned long long)m.blocks_taken);
  if (g.objects_ended_total != m.ended || g.epochs_freed_all_total != m.freed_all)
    FAIL("stats: %llu objects ended by %llu free-alls, the model has %llu by %llu",
         (unsigned long long)g.objects_ended_total, (unsigned long long)g.epochs_freed_all_total,
         (unsigned long long)m.ended, (unsigned long long)m.freed_all);
  /* The hot reserve is bounded: the pool, plus whole blocks per cache. */
  uint64_t bound = m.cfg.release_policy == TSLAB_RELEASE_EAGER
                       ? 0
                       : m.cfg.pool_resident_max + g.thread_caches * (m.cfg.thread_reserve_max / GRANULE * GRANULE);
  if (g.reserve_bytes > bound)
    FAIL("stats: a reserve of %llu bytes, above its bound %llu", (unsigned long long)g.reserve_bytes,
         (unsigned long long)bound);
  /* Decay keeps at most pool_decay_max beyond the pool's bound (more only
   * while the OS refuses releases), and only for open eras. */
  if (g.decay_bytes > (m.cfg.release_policy == TSLAB_RELEASE_EAGER ? 0 : m.cfg.pool_decay_max) &&
      g.release_failures_total == 0)
    FAIL("stats: %llu bytes decaying, above pool_decay_max %zu", (unsigned long long)g.decay_bytes,
         m.cfg.pool_decay_max);
  if (level < 2) return;
  check_epoch_stats(m.cur);
  static tslab_stats_class_t cs[MAX_CLASSES];
  if (tslab_stats_classes(m.a, cs, MAX_CLASSES) != classes.n) FAIL("stats_classes: wrong count");
  for (unsigned c = 0; c < classes.n; c++)
    if (cs[c].live_objects != class_live[c])
      FAIL("stats: class %u (%zu bytes) has %llu live objects, the model has %llu", c, classes.size[c],
           (unsigned long long)cs[c].live_objects, (unsigned long long)class_live[c]);
}

/* The configuration byte: block budget, per-thread and pool reserves, decay
 * beyond the pool (off, small or the default) and (one input in eight) the
 * smallest reservation, which a few spans fill. Small budgets make an era
 * move from blocks to class slabs within one input. */
static void config_from(uint8_t c, tslab_config_t* cfg) {
  static const size_t budget[] = {(size_t)1 << 20, 0, 16 << 10, 64 << 10,
                                  20 << 10, 32 << 10, 48 << 10, 256 << 10};
  static const size_t thread_reserve[] = {256 << 10, 0, 16 << 10, 40 << 10};
  static const size_t pool[] = {(size_t)1 << 20, 0, 64 << 10, 16 << 10};
  cfg->block_budget = budget[c & 7];
  cfg->thread_reserve_max = thread_reserve[c >> 3 & 3];
  cfg->pool_resident_max = pool[c >> 5 & 3];
  static const size_t decay[] = {(size_t)8 << 20, 0, 48 << 10, (size_t)8 << 20};
  cfg->pool_decay_max = decay[(c >> 2 ^ c >> 5) & 3];
  cfg->reserve_bytes = (c & 0x80) && (c & 3) == 3 ? RESERVE_SMALL : RESERVE;
}

static void setup(input_t* in) {
  memset(&m, 0, sizeof m);
  step = 0;
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  /* 2 .. 128 slots, mostly few: a thread cache has bins for every slot and
   * class, which its creation and every tslab_check touch. */
  static const uint8_t ring_shift[16] = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5, 0, 6};
  uint8_t first = u8(in);
  cfg.epoch_ring_size = 2u << ring_shift[first % 16];
#ifdef TSLAB_FUZZ_THOROUGH /* for replaying a failure: find its first step */
  m.thorough = true;
#else
  m.thorough = first >= 0xc0 && cfg.epoch_ring_size <= 8;
#endif
  cfg.max_alloc_size = MAX_ALLOC;
  uint8_t policy = u8(in);
  static const tslab_release_policy_t release[] = {TSLAB_RELEASE_ON_CLOSE, TSLAB_RELEASE_EAGER,
                                                   TSLAB_RELEASE_POOLED, TSLAB_RELEASE_ON_CLOSE};
  cfg.release_policy = release[(policy & 1) | (policy >> 1 & 2)];
  cfg.advance_policy = (policy & 2) ? TSLAB_ADVANCE_NEXT_SLOT : TSLAB_ADVANCE_SKIP_OPEN;
  config_from(u8(in), &cfg);
  m.cfg = cfg;
  m.skip_open = cfg.advance_policy == TSLAB_ADVANCE_SKIP_OPEN;
  m.ring = cfg.epoch_ring_size;
  m.max = cfg.max_alloc_size;
  m.a = tslab_create(&cfg);
  if (!m.a) FAIL("tslab_create failed");
  load_classes(m.a);
  m.cur = 1;
  m.slot_era[1 % m.ring] = 1;
  bump_reset(1);
  m.foreign = malloc(64);
  if (!m.foreign) FAIL("setup allocation failed");
  /* The other instance and its object are made once and never change: no
   * call of the driver reaches it, and creating it for every input would
   * cost as much as a short input. */
  static tslab_t* other;
  static void* other_obj;
  static tslab_handle_t other_h;
  if (!other) {
    tslab_config_t oc;
    tslab_config_init(&oc);
    oc.epoch_ring_size = 4;
    oc.reserve_bytes = RESERVE;
    oc.max_alloc_size = MAX_ALLOC;
    other = tslab_create(&oc);
    other_obj = other ? tslab_alloc_handle(other, 64, 1, &other_h) : NULL;
    if (!other_obj) FAIL("setup of the other instance failed");
    memset(other_obj, 0x5a, 64);
  }
  m.b = other;
  m.other = other_obj;
  m.other_h = other_h;
}

static void teardown(void) {
  step = MAX_OPS + 1;
  other_thread_stop();
  for (unsigned i = 0; i < m.nobjs; i++) verify(&m.objs[i], SIZE_MAX);
  while (m.depth) {
    dom_t* d = &m.doms[m.stack[m.depth - 1]];
    if (tslab_domain_exit(d->d) != TSLAB_OK) FAIL("teardown: domain_exit");
    dom_exit_model(d);
  }
  while (m.ndoms) {
    if (tslab_domain_destroy(m.doms[0].d) != TSLAB_OK) FAIL("teardown: domain_destroy");
    if (m.doms[0].owns) model_close(m.doms[0].era);
    dom_remove(0);
  }
  check_all(2);
  while (m.nobjs)
    if (!tslab_free(m.a, m.objs[0].p)) FAIL("teardown: free refused");
    else forget(&m.objs[0]);
  check_all(2);
  for (int i = 0; i < 64; i++)
    if (((unsigned char*)m.other)[i] != 0x5a) FAIL("the other instance's object changed");
  if (tslab_usable_size(m.b, m.other) != 64 || tslab_handle_get(m.b, m.other_h) != m.other ||
      tslab_check(m.b, NULL, 0))
    FAIL("the other instance diverged");
  tslab_destroy(m.a);
  free(m.foreign);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  input_t in = {data, len, 0};
  setup(&in);
  for (step = 1; step <= MAX_OPS && in.pos < in.len; step++) {
    uint8_t byte = u8(&in), op = byte % 16;
    bool remote = (byte & 0xc0) == 0xc0; /* frees, handles: from the other thread */
    TRACE("step %u: op %u%s at byte %zu, %u objects, era %llu\n", step, op, remote ? " (other thread)" : "",
          in.pos - 1, m.nobjs, (unsigned long long)m.cur);
    switch (op) {
      case 0:
      case 1: op_alloc(&in, 0); break;
      case 2: op_alloc(&in, 1); break;
      case 3: op_alloc(&in, 2); break;
      case 4: op_aligned(&in); break;
      case 5:
      case 6: op_free_live(&in, remote); break;
      case 7: op_free_bad(&in, remote); break;
      case 8: op_realloc(&in); break;
      case 9: op_handles(&in, remote); break;
      case 10: op_epochs(&in); break;
      case 11: op_domains(&in); break;
      case 12: op_free_all(&in); break;
      case 13: op_burst(&in); break;
      case 14: op_touch(&in); break;
      default: op_maintain(&in); break;
    }
    /* Everything every 16th step (64th with a ring of 32 slots or more,
     * whose bins make the checker slow), and after free-all and maintenance
     * steps with a smaller ring; the statistics after epoch and domain
     * steps and every 8th step. */
    bool big = m.ring >= 32;
    int level = step % (big ? 64 : 16) == 0 || (!big && (op == 12 || op == 15)) ? 2
                : op == 10 || op == 11 || step % 8 == 0                      ? 1
                                                                             : 0;
    check_all(m.thorough ? 2 : level);
  }
  teardown();
  return 0;
}
