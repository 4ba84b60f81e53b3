/* The fork child's repair (docs/ARCHITECTURE.md 7.6) when the fork catches
 * a thread part way through a change of its cache, held there at a test
 * hook (src/fault.h): the fork's wait for busy windows times out, and the
 * child has to finish or undo what the vanished thread left.
 *
 *  1. An owner inside its window between a block's stop and its place on
 *     the full list, between that and the end of the stop, or between
 *     parking its bin's current slab and installing the next.
 *  2. A thread closing an era only it used, in the middle of stopping its
 *     own block: that detach runs outside any window and without the
 *     cache's mutex, and the child, which completes the close, must not
 *     stop the block twice.
 *  3. An owner holding a slab it took off every list (queued for a
 *     notification by a remote free) while another thread closes the era.
 *  4. An owner between a retire's era uncount and its owner clear.
 *  5. An owner part way through a block's stop, or through a bump whose
 *     bits are set but whose `top` has not moved, while the era closes.
 *  6. No thread held: the child's recount of the era's runs keeps its live
 *     spans.
 *  7. An owner that took a drained block from its hot reserve, before it
 *     formats it again: no reserve holds the block.
 *  8. An owner held in another bin while its bins hold stacked slots.
 *  9. An owner part way through promoting its bin's next word to the mask
 *     (the mask written, `next_mask` not yet cleared): the child counts
 *     those slots once and hands each out once.
 * 10. An advance readying its cache for its new era (7.1): after it took a
 *     drained block from its reserve, before it formats it; with the block
 *     attached, before the era is ACTIVE; or after the era's ACTIVE store,
 *     before `current` names it. The child finishes the open, the era's
 *     close there leaves no block in use, and the next advance returns (the
 *     last case hung it, `current` one behind the ring, before the repair
 *     moved `current` up; found by review).
 * 11. An owner between taking a ready slab off its list and installing it
 *     (its full current slab parked), while another thread's free of an
 *     object of that slab is between its remote bit and the slab's hint:
 *     the child adopts the slab onto a list with its hint set, so that the
 *     owner's next collection takes the bit (found by review).
 *
 * In every case the child passes tslab_check, its epoch statistics agree
 * with the objects handed out, and memory still live is never handed out
 * again. Cases 2 to 5 failed before the repair rebuilt lists and counts
 * ahead of completing closes. Run one case with its number as argument. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fault.h"
#include "fork_util.h"
#include "internal.h" /* the ring state (statistics would wait on the held thread), notification lists */
#include "test_util.h"

enum { DEADLINE_S = 30, OBJS = 600, SIZE = 64, SLAB = 256 /* slots of a 64 B slab */ };

/* ThreadSanitizer cannot start threads in the child of a multi-threaded
 * fork: under it the children check without starting any. */
#define CHILD_THREADS (!TU_TSAN)

static tslab_t* inst;
static tslab_epoch_t era;
static void* objs[OBJS];

/* ---- holding one thread at a hook ---- */

static int hold_point;
static _Thread_local bool hold_me;
static atomic_int hold_stage; /* 0 running, 1 held, 2 let go, -1 failed */

static void hold_hook(int point) {
  int expected = 0;
  if (point != hold_point || !hold_me || !atomic_compare_exchange_strong(&hold_stage, &expected, 1)) return;
  while (atomic_load(&hold_stage) != 2) sched_yield();
}

/* A fresh instance (blocks, or class slabs from the first object) and era,
 * and the hook armed for `point`. */
static void setup(int point, bool blocks) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  if (!blocks) cfg.block_budget = 0;
  inst = tslab_create(&cfg);
  REQUIRE(inst != NULL);
  era = tslab_epoch_advance(inst); /* the first era bumps no blocks */
  memset(objs, 0, sizeof objs);
  hold_point = point;
  atomic_store(&hold_stage, 0);
  tslab_hook_set(hold_hook);
}

static void wait_held(void) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (atomic_load(&hold_stage) == 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    REQUIRE(now.tv_sec - start.tv_sec < DEADLINE_S);
    sched_yield();
  }
  REQUIRE(atomic_load(&hold_stage) == 1);
}

/* Fork, run `child` there, let the held thread go; the child's verdict. */
static void fork_and_check(const char* what, int (*child)(void)) {
  int status = 0;
  int done = fork_run_child(child, &status, DEADLINE_S);
  atomic_store(&hold_stage, 2);
  CHECK(fork_child_passed(what, done, status));
}

/* After the held thread finished: every object it kept freed, the parent
 * consistent. */
static void teardown(void) {
  tslab_hook_set(NULL);
  for (int i = 0; i < OBJS; i++)
    if (objs[i]) CHECK(tslab_free(inst, objs[i]));
  CHECK_CONSISTENT(inst);
  tslab_destroy(inst);
}

/* The held thread: allocate objs[0..n) in `era`, holding where armed. */
static bool fill(int from, int n) {
  for (int i = from; i < n; i++) {
    if (!(objs[i] = tslab_alloc(inst, SIZE, era))) return false;
  }
  return true;
}

static void* owner_fills(void* arg) {
  hold_me = true;
  if (!fill(0, (int)(uintptr_t)arg) || atomic_load(&hold_stage) == 0) atomic_store(&hold_stage, -1);
  return NULL;
}

/* The held thread: allocate objs[0..filled), free objs[0..freed), then
 * allocate up to objs[total), holding where armed in that last part. */
static void* owner_frees_then_fills(int filled, int freed, int total) {
  if (fill(0, filled)) {
    for (int i = 0; i < freed; i++) {
      if (!tslab_free(inst, objs[i])) goto fail;
      objs[i] = NULL;
    }
    hold_me = true;
    if (fill(filled, total) && atomic_load(&hold_stage) != 0) return NULL;
  }
fail:
  atomic_store(&hold_stage, -1);
  return NULL;
}

static void* closer(void* arg) {
  (void)arg;
  return (void*)(uintptr_t)(tslab_epoch_close(inst, era) != TSLAB_OK);
}

/* With a thread held: another thread starts closing the era (a newer one
 * is current) and waits for the held one's window; fork once the era is
 * CLOSING, then let both finish. */
static void fork_while_closing(const char* what, int (*child)(void), pthread_t held) {
  pthread_t b;
  void* res = NULL;
  REQUIRE(tslab_epoch_advance(inst) != 0);
  REQUIRE(pthread_create(&b, NULL, closer, NULL) == 0);
  while (TSLAB_STATE_OF(tslab_epoch_state(inst, era)) != TSLAB_EPOCH_CLOSING) sched_yield();
  fork_and_check(what, child);
  pthread_join(held, NULL);
  pthread_join(b, &res);
  CHECK(!res);
}

/* Child: the objects handed out so far, by the held thread's record. */
static uint64_t handed_out(void) {
  uint64_t n = 0;
  for (int i = 0; i < OBJS; i++) n += objs[i] != NULL;
  return n;
}

/* Child: the era's statistics say `live` objects and, with them freed, none. */
static int era_counts(uint64_t live) {
  tslab_stats_epoch_t es;
  if (tslab_stats_epoch(inst, era, &es) != TSLAB_OK) return 20;
  if (es.live_objects != live || es.frees_total > es.allocations_total) {
    char msg[160];
    int k = snprintf(msg, sizeof msg, "era: %llu allocations, %llu frees, %llu live, %llu expected\n",
                     (unsigned long long)es.allocations_total, (unsigned long long)es.frees_total,
                     (unsigned long long)es.live_objects, (unsigned long long)live);
    (void)!write(2, msg, (size_t)k);
    return 21;
  }
  return 0;
}

/* ---- 1: an owner held inside its window ---- */

/* Child thread: allocate where the held thread left off (it adopts that
 * thread's cache); no object may overlap one of the held thread's. */
static void* adopter(void* arg) {
  (void)arg;
  void* mine[2 * SLAB];
  for (int i = 0; i < 2 * SLAB; i++) {
    if (!(mine[i] = tslab_alloc(inst, SIZE, era))) return (void*)1;
    memset(mine[i], 0xA5, SIZE);
    for (int k = 0; k < OBJS; k++)
      if (objs[k] && (char*)mine[i] < (char*)objs[k] + SIZE && (char*)objs[k] < (char*)mine[i] + SIZE)
        return (void*)2;
  }
  for (int i = 0; i < 2 * SLAB; i++)
    if (!tslab_free(inst, mine[i])) return (void*)3;
  return NULL;
}

static int owner_held_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  if (CHILD_THREADS) {
    pthread_t t;
    void* res = (void*)1;
    if (pthread_create(&t, NULL, adopter, NULL) != 0 || pthread_join(t, &res) != 0) return 2;
    if (res) return 10 + (int)(uintptr_t)res;
  }
  for (int i = 0; i < OBJS; i++)
    if (objs[i] && !tslab_free(inst, objs[i])) return 3;
  tslab_epoch_advance(inst);
  if (tslab_epoch_close(inst, era) != TSLAB_OK) return 4;
  return fork_child_consistent(inst) ? 0 : 5;
}

static void test_owner_held(int point) {
  setup(point, point != TSLAB_HOOK_SLAB_PARKED);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, owner_fills, (void*)(uintptr_t)OBJS) == 0);
  wait_held();
  fork_and_check("owner held in its window", owner_held_child);
  pthread_join(t, NULL);
  teardown();
}

/* ---- 2: a thread closing an era only it used, in blocks ---- */

static void* own_closer(void* arg) {
  (void)arg;
  if (!fill(0, OBJS)) {
    atomic_store(&hold_stage, -1);
    return NULL;
  }
  hold_me = true;
  if (tslab_epoch_close(inst, era) != TSLAB_OK || atomic_load(&hold_stage) == 0) atomic_store(&hold_stage, -1);
  hold_me = false;
  return NULL;
}

static int own_close_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  for (int i = 0; i < OBJS; i++)
    if (!tslab_free(inst, objs[i])) return 2;
  if (!fork_child_consistent(inst)) return 3;
  return era_counts(0);
}

static void test_own_close(int point) {
  setup(point, true);
  REQUIRE(tslab_epoch_advance(inst) != 0); /* the closing era is not the current one */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, own_closer, NULL) == 0);
  wait_held();
  fork_and_check("own-era close held", own_close_child);
  pthread_join(t, NULL);
  teardown();
}

/* ---- 3: a slab off every list, queued, while the era closes ---- */

/* The owner fills two slabs, frees an eighth of the first past its free
 * stack's (back on the ready list, armed for remote frees) and fills on:
 * the refill after the stack and the second slab takes the first off the
 * ready list and is held while it parks the second. A remote free then queues the first slab for the
 * owner, and another thread starts closing the era. */
static void* owner_refills(void* arg) {
  (void)arg;
  return owner_frees_then_fills(SLAB + 1, SLAB / 8 + 8 + TSLAB_STACK_MAX, 2 * SLAB + 1 + TSLAB_STACK_MAX);
}

static void* remote_free(void* p) { return (void*)(uintptr_t)!tslab_free(inst, p); }

/* Child: the close the child completed detached the queued slab with the
 * others: no cache's notification list holds it (or any run not its own,
 * which the thread adopting the cache would drain while another owns it). */
static int queued_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  for (tslab_tcache_t* tc = tslab_cache_first(inst); tc; tc = tslab_cache_next(tc))
    for (tslab_run_t* r = tc->notify_head; r; r = r->notify_next)
      if (atomic_load(&r->owner) != tc || atomic_load(&r->notify) != TSLAB_NOTIFY_QUEUED) return 6;
  uint64_t live = handed_out();
  for (int i = 0; i < OBJS; i++)
    if (objs[i] && !tslab_free(inst, objs[i])) return 2;
  if (!fork_child_consistent(inst)) return 3;
  return era_counts(0) ? 4 : live ? 0 : 5;
}

static void test_queued_while_closing(void) {
  setup(TSLAB_HOOK_SLAB_PARKED, false);
  pthread_t a, c;
  REQUIRE(pthread_create(&a, NULL, owner_refills, NULL) == 0);
  wait_held();
  void* res = NULL;
  void* p = objs[SLAB / 2];
  REQUIRE(pthread_create(&c, NULL, remote_free, p) == 0 && pthread_join(c, &res) == 0 && !res);
  objs[SLAB / 2] = NULL;
  fork_while_closing("slab off every list, queued, era closing", queued_child, a);
  teardown();
}

/* ---- 4: a retire between its era uncount and its owner clear ---- */

static void* owner_empties(void* arg) {
  (void)arg;
  if (!fill(0, SLAB + 1)) goto fail;
  for (int i = 0; i < SLAB; i++) {
    void* p = objs[i];
    objs[i] = NULL; /* before the free the hook may hold */
    hold_me = i == SLAB - 1; /* the last free empties the slab and retires it */
    if (!tslab_free(inst, p)) goto fail;
  }
  hold_me = false;
  if (atomic_load(&hold_stage) == 0) goto fail;
  return NULL;
fail:
  atomic_store(&hold_stage, -1);
  return NULL;
}

/* Child: the era counts the slabs the class counts. */
static int retire_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  tslab_stats_epoch_t es;
  tslab_stats_class_t cs;
  if (tslab_stats_epoch(inst, era, &es) != TSLAB_OK || tslab_stats_class(inst, tslab_class_of(SIZE), &cs) != TSLAB_OK)
    return 2;
  return es.slabs == cs.slabs ? era_counts(handed_out()) : 3;
}

static void test_retire_held(void) {
  setup(TSLAB_HOOK_RETIRE_COUNTED, false);
  pthread_t a;
  REQUIRE(pthread_create(&a, NULL, owner_empties, NULL) == 0);
  wait_held();
  fork_and_check("retire between uncount and owner clear", retire_child);
  pthread_join(a, NULL);
  teardown();
}

/* ---- 5: a block stop or a bump held while the era closes ---- */

static int closing_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  int err = era_counts(handed_out());
  if (err) return err;
  for (int i = 0; i < OBJS; i++)
    if (objs[i] && !tslab_free(inst, objs[i])) return 2;
  if (!fork_child_consistent(inst)) return 3;
  tslab_stats_epoch_t es;
  if (tslab_stats_epoch(inst, era, &es) != TSLAB_OK) return 4;
  return es.live_objects == 0 && es.slabs == 0 ? 0 : 5; /* nothing left: the block went back */
}

static void test_held_while_closing(int point) {
  setup(point, true);
  pthread_t a;
  REQUIRE(pthread_create(&a, NULL, owner_fills, (void*)(uintptr_t)OBJS) == 0);
  wait_held();
  fork_while_closing("held while the era closes", closing_child, a);
  teardown();
}

/* ---- 7: a drained block taken from the reserve, not yet formatted ---- */

/* The owner fills a block and one object more (the block stops), frees the
 * stopped block's objects (it drains into the cache's hot reserve), then
 * fills the next block: the refill after it takes the drained block from
 * the reserve and is held before formatting it. No reserve holds it then;
 * the child gives it back to the heap (tslab_check counts reserved runs
 * against the reserves). */
static void* owner_reuses(void* arg) {
  (void)arg;
  enum { PER_BLOCK = TSLAB_BLOCK_BYTES_SMALL / SIZE }; /* the era's first block is small */
  return owner_frees_then_fills(PER_BLOCK + 1, PER_BLOCK, 2 * PER_BLOCK + 2);
}

static int reserve_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  for (int i = 0; i < OBJS; i++)
    if (objs[i] && !tslab_free(inst, objs[i])) return 2;
  return fork_child_consistent(inst) ? 0 : 3;
}

static void test_reserve_taken(void) {
  setup(TSLAB_HOOK_RESERVE_TAKEN, true);
  pthread_t a;
  REQUIRE(pthread_create(&a, NULL, owner_reuses, NULL) == 0);
  wait_held();
  fork_and_check("drained block taken from the reserve", reserve_child);
  pthread_join(a, NULL);
  teardown();
}

/* ---- 6: the recount keeps spans ---- */

static uint64_t parent_runs;

/* Child: every fork recounts the era's runs; a live span is one of them, and
 * freeing it takes exactly one away. */
static int span_child(void) {
  tslab_stats_epoch_t es;
  if (tslab_stats_epoch(inst, era, &es) != TSLAB_OK || es.slabs != parent_runs) return 1;
  if (!tslab_free(inst, objs[0])) return 2;
  objs[0] = NULL;
  if (tslab_stats_epoch(inst, era, &es) != TSLAB_OK || es.slabs != parent_runs - 1) return 3;
  return fork_child_consistent(inst) ? 0 : 4;
}

static void test_span_recount(void) {
  setup(0, false);
  REQUIRE((objs[0] = tslab_alloc(inst, 100000, era)) != NULL); /* a span */
  REQUIRE((objs[1] = tslab_alloc(inst, SIZE, era)) != NULL);   /* a slab */
  tslab_stats_epoch_t es;
  REQUIRE(tslab_stats_epoch(inst, era, &es) == TSLAB_OK && es.slabs == 2);
  parent_runs = es.slabs;
  atomic_store(&hold_stage, 1); /* nothing to hold */
  fork_and_check("live span", span_child);
  teardown();
}

/* ---- 8: stacked slots in a bin the held thread is not changing ---- */

enum { BIG = 128, BIG_SLAB = 128 /* slots of a 128 B slab */ };
static void* bigs[BIG_SLAB + 1];

/* The held thread: fill a 64 B slab and one more, free three of the first
 * (parked: they go on the bin's free stack), then allocate 128 B objects,
 * held when their first slab is parked. */
static void* owner_stacks(void* arg) {
  (void)arg;
  if (fill(0, SLAB + 1)) {
    for (int i = 10; i < 13; i++) {
      if (!tslab_free(inst, objs[i])) goto fail;
      objs[i] = NULL;
    }
    hold_me = true;
    for (int i = 0; i < BIG_SLAB + 1; i++)
      if (!(bigs[i] = tslab_alloc(inst, BIG, era))) goto fail;
    if (atomic_load(&hold_stage) != 0) return NULL;
  }
fail:
  atomic_store(&hold_stage, -1);
  return NULL;
}

/* Child: the stacks of the held thread's cache were emptied, and the
 * counts agree with the objects handed out, in the 64 B bin too. */
static int stacked_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  uint64_t live = handed_out();
  for (int i = 0; i < BIG_SLAB + 1; i++) live += bigs[i] != NULL;
  int bad = era_counts(live);
  if (bad) return bad;
  for (int i = 0; i < BIG_SLAB + 1; i++)
    if (bigs[i] && !tslab_free(inst, bigs[i])) return 2;
  for (int i = 0; i < OBJS; i++)
    if (objs[i] && !tslab_free(inst, objs[i])) return 3;
  if (!fork_child_consistent(inst)) return 4;
  return era_counts(0);
}

static void test_stacked_held(void) {
  setup(TSLAB_HOOK_SLAB_PARKED, false);
  memset(bigs, 0, sizeof bigs);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, owner_stacks, NULL) == 0);
  wait_held();
  fork_and_check("stacked slots, owner held in another bin", stacked_child);
  pthread_join(t, NULL);
  for (int i = 0; i < BIG_SLAB + 1; i++)
    if (bigs[i]) CHECK(tslab_free(inst, bigs[i]));
  teardown();
}

/* ---- 9: a promotion of the next word cut short ---- */

/* The held thread allocates through the general path (an aligned
 * allocation), whose promotion has the hook: the 65th allocation of a
 * fresh 64 B slab promotes its second word. */
static void* owner_promotes(void* arg) {
  (void)arg;
  hold_me = true;
  for (int i = 0; i < SLAB; i++)
    if (!(objs[i] = tslab_aligned_alloc(inst, 16, SIZE, era))) break;
  if (atomic_load(&hold_stage) == 0) atomic_store(&hold_stage, -1);
  return NULL;
}

static int promoted_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  int bad = era_counts(handed_out());
  if (bad) return bad;
  return owner_held_child();
}

static void test_promotion_held(void) {
  setup(TSLAB_HOOK_PROMOTED, false);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, owner_promotes, NULL) == 0);
  wait_held();
  REQUIRE(handed_out() == 64);
  fork_and_check("owner held in a promotion", promoted_child);
  pthread_join(t, NULL);
  teardown();
}

/* ---- 10: an advance held after readying its cache, the era not ACTIVE ---- */

static tslab_epoch_t readied;

/* The held thread: one object in an era of its own, freed, the era closed
 * (its block drains into the thread's reserve); then an advance, held once
 * it has attached that block to its new era. */
static void* opener_readies(void* arg) {
  (void)arg;
  tslab_epoch_t own = tslab_epoch_advance(inst);
  void* p = tslab_alloc(inst, SIZE, own);
  if (!p || !tslab_free(inst, p) || tslab_epoch_close(inst, own) != TSLAB_OK) {
    atomic_store(&hold_stage, -1);
    return NULL;
  }
  hold_me = true;
  readied = tslab_epoch_advance(inst);
  hold_me = false;
  if (atomic_load(&hold_stage) == 0) atomic_store(&hold_stage, -1);
  return NULL;
}

/* Child: the open is finished (the era current and ACTIVE); its close
 * takes the block the vanished opener attached (held once attached: one
 * block in use), and no block stays in use. */
static int readied_child(void) {
  if (!fork_child_consistent(inst)) return 1;
  tslab_epoch_t e = tslab_epoch_current(inst);
  if (tslab_epoch_status(inst, e) != TSLAB_OK) return 2;
  tslab_stats_global_t g;
  if (tslab_stats_global(inst, &g) != TSLAB_OK || g.blocks_in_use != (hold_point != TSLAB_HOOK_RESERVE_TAKEN))
    return 3;
  if (tslab_epoch_close(inst, e) != TSLAB_OK) return 4;
  if (tslab_stats_global(inst, &g) != TSLAB_OK || g.blocks_in_use != 0) return 5;
  if (!fork_child_consistent(inst)) return 6;
  tslab_epoch_t next = tslab_epoch_advance(inst);
  if (next <= e || tslab_epoch_close(inst, next) != TSLAB_OK) return 7;
  return fork_child_consistent(inst) ? 0 : 8;
}

static void test_open_readied(int point) {
  setup(point, true);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, opener_readies, NULL) == 0);
  wait_held();
  fork_and_check("advance held after readying its cache", readied_child);
  pthread_join(t, NULL);
  CHECK_EQ_U(tslab_epoch_close(inst, readied), TSLAB_OK);
  teardown();
}

/* ---- 11: a slab between lists with a remote free cut short ---- */

static _Atomic int adopt_owner_held, adopt_freer_held, adopt_go, adopt_armed;
static _Thread_local bool adopt_is_owner;
static void* adopt_objs[4096];
static _Atomic(tslab_run_t*) adopt_slab;

static void adopt_hook(int point) {
  if (point == TSLAB_HOOK_SLAB_PARKED && atomic_load(&adopt_armed) && adopt_is_owner) {
    atomic_store(&adopt_owner_held, 1);
    while (!atomic_load(&adopt_go)) sched_yield();
  } else if (point == TSLAB_HOOK_REMOTE_SET) {
    atomic_store(&adopt_freer_held, 1);
    while (!atomic_load(&adopt_go)) sched_yield();
  }
}

/* Fills slab A, moves on to B, frees all of A but its first object, so
 * that A goes back to the ready list; then allocates until its refill,
 * taking A back, is held after parking B. */
static void* adopt_owner(void* arg) {
  (void)arg;
  adopt_is_owner = true;
  size_t n = 0;
  adopt_objs[n++] = tslab_alloc(inst, 5000, era);
  tslab_run_t* a = tslab_run_of(inst, adopt_objs[0]);
  while (n < 4096 && (adopt_objs[n] = tslab_alloc(inst, 5000, era)) && tslab_run_of(inst, adopt_objs[n]) == a) n++;
  for (size_t i = 1; i < n; i++) tslab_free(inst, adopt_objs[i]);
  atomic_store(&adopt_slab, a);
  atomic_store(&adopt_armed, 1);
  for (int i = 0; i < 100000 && !atomic_load(&adopt_go); i++)
    if (!tslab_alloc(inst, 5000, era)) break; /* the instance takes them back at its destroy */
  return NULL;
}

static void* adopt_freer(void* p) { return (void*)(uintptr_t)tslab_free(inst, p); }

/* The repair flushed the held owner's cache: with the hint, that collected
 * the remote free, and the object's slot is free. */
static int adopt_child(void) {
  tslab_run_t* a = atomic_load(&adopt_slab);
  bool remote = false;
  for (uint32_t w = 0; w < a->words; w++) remote |= atomic_load(&a->bits[2 * w + 1]) != 0;
  if (remote && !atomic_load(&a->remote_hint)) return 1;
  uint32_t idx = tslab_slab_index(a, adopt_objs[0]);
  if ((atomic_load(&a->bits[2 * (idx >> 6)]) >> (idx & 63)) & 1) return 3;
  return fork_child_consistent(inst) ? 0 : 2;
}

static void test_adopted_remote(void) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.block_budget = 0; /* class slabs only */
  inst = tslab_create(&cfg);
  REQUIRE(inst != NULL);
  era = tslab_epoch_advance(inst);
  tslab_hook_set(adopt_hook);
  pthread_t owner, freer;
  REQUIRE(pthread_create(&owner, NULL, adopt_owner, NULL) == 0);
  tu_wait_flag(&adopt_owner_held);
  REQUIRE(pthread_create(&freer, NULL, adopt_freer, adopt_objs[0]) == 0);
  tu_wait_flag(&adopt_freer_held);
  int status = 0;
  int done = fork_run_child(adopt_child, &status, DEADLINE_S);
  CHECK(fork_child_passed("slab between lists, remote free cut short", done, status));
  atomic_store(&adopt_go, 1);
  pthread_join(freer, NULL);
  pthread_join(owner, NULL);
  tslab_hook_set(NULL);
  tslab_destroy(inst);
}

int main(int argc, char** argv) {
  int which = argc > 1 ? atoi(argv[1]) : 0;
  if (!which || which == 1) {
    test_owner_held(TSLAB_HOOK_BLOCK_STOPPED);
    test_owner_held(TSLAB_HOOK_BLOCK_LISTED);
    test_owner_held(TSLAB_HOOK_SLAB_PARKED);
  }
  if (!which || which == 2) {
    test_own_close(TSLAB_HOOK_BLOCK_LISTED);
    test_own_close(TSLAB_HOOK_BLOCK_STOPPED);
  }
  if (!which || which == 3) test_queued_while_closing();
  if (!which || which == 4) test_retire_held();
  if (!which || which == 5) {
    test_held_while_closing(TSLAB_HOOK_BLOCK_STOPPED);
    test_held_while_closing(TSLAB_HOOK_BUMP_MARKED);
  }
  if (!which || which == 6) test_span_recount();
  if (!which || which == 7) test_reserve_taken();
  if (!which || which == 8) test_stacked_held();
  if (!which || which == 9) test_promotion_held();
  if (!which || which == 10) {
    test_open_readied(TSLAB_HOOK_RESERVE_TAKEN);
    test_open_readied(TSLAB_HOOK_OPEN_READIED);
    test_open_readied(TSLAB_HOOK_OPEN_CURRENT);
  }
  if (!which || which == 11) test_adopted_remote();
  TEST_DONE();
}
