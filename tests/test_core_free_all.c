/* Contract line 8: free-all close. tslab_epoch_free_all ends an epoch
 * together with every object still live in it: their frees fail as not live
 * (until the memory is allocated again: a double free), their handles are
 * stale (also after reuse), their memory is reusable, also while other
 * threads hold cached memory of the epoch or free into it concurrently. And
 * an epoch that moves from blocks to class slabs keeps isolation,
 * double-free detection and usable sizes exact. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "fault.h"
#include "internal.h" /* the era slot's byte counters */
#include "test_util.h"

/* Objects of every kind an epoch holds: block objects (its first
 * allocations), class-slab objects (past the block budget), spans. */
enum { SMALL = 3000, SPANS = 4 };

typedef struct {
  void* small[SMALL];
  size_t small_size[SMALL];
  tslab_handle_t handle[SMALL];
  void* span[SPANS];
} objects_t;

static void fill(tslab_t* a, tslab_epoch_t e, objects_t* o) {
  for (int i = 0; i < SMALL; i++) {
    o->small_size[i] = 16 + (size_t)(i * 53) % 1500;
    o->small[i] = tslab_alloc_handle(a, o->small_size[i], e, &o->handle[i]);
    REQUIRE(o->small[i] != NULL);
    memset(o->small[i], 0x5a, o->small_size[i]);
  }
  for (int i = 0; i < SPANS; i++) {
    o->span[i] = tslab_alloc(a, 100000 + (size_t)i * 4096, e);
    REQUIRE(o->span[i] != NULL);
  }
}

/* Every object of o is dead: not live for any query, its free refused. */
static void check_all_dead(tslab_t* a, objects_t* o) {
  tslab_stats_global_t g0, g1;
  tslab_stats_global(a, &g0);
  for (int i = 0; i < SMALL; i++) {
    CHECK_EQ_U(tslab_usable_size(a, o->small[i]), 0);
    CHECK_EQ_U(tslab_epoch_of(a, o->small[i]), 0);
    CHECK(tslab_handle_get(a, o->handle[i]) == NULL);
    CHECK(!tslab_free_handle(a, o->handle[i]));
    CHECK(!tslab_free(a, o->small[i]));
    CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_POINTER);
  }
  for (int i = 0; i < SPANS; i++) {
    CHECK_EQ_U(tslab_usable_size(a, o->span[i]), 0);
    CHECK(!tslab_free(a, o->span[i]));
  }
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.invalid_frees_total - g0.invalid_frees_total, 2 * SMALL + SPANS);
}

static tslab_t* make(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 32;
  /* A small budget: the epoch moves on to class slabs early. */
  c.block_budget = (size_t)128 << 10;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

/* ---- an open epoch, ended with its objects ---- */

static void test_open_epoch(void) {
  tslab_t* a = make();
  static objects_t o;
  tslab_epoch_t e = tslab_epoch_advance(a);
  fill(a, e, &o);
  /* Some objects are freed before: they are frees, not ends. */
  for (int i = 0; i < SMALL; i += 3) CHECK(tslab_free(a, o.small[i]));
  tslab_stats_global_t before;
  tslab_stats_global(a, &before);
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_ERR_EPOCH_CLOSED);
  CHECK(tslab_alloc(a, 64, e) == NULL);
  check_all_dead(a, &o);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.objects_ended_total, SMALL - (SMALL + 2) / 3 + SPANS);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_EQ_U(g.live_bytes, 0);
  CHECK_EQ_U(g.allocations_total, g.frees_total);
  tslab_stats_epoch_t es;
  CHECK_EQ_U(tslab_stats_epoch(a, e, &es), TSLAB_OK);
  CHECK_EQ_U(es.live_objects, 0);
  CHECK_EQ_U(es.live_bytes, 0);
  CHECK_EQ_U(es.slabs, 0);
  /* The memory is reusable: another epoch fills the same amount without
   * the reservation growing. */
  tslab_epoch_t f = tslab_epoch_advance(a);
  static objects_t o2;
  fill(a, f, &o2);
  tslab_stats_global_t after;
  tslab_stats_global(a, &after);
  CHECK(after.committed_bytes <= before.committed_bytes + ((size_t)4 << 20));
  CHECK(after.slabs_recycled_total > before.slabs_recycled_total);
  /* A second free-all of a closed epoch is fine too, and ends f's objects. */
  CHECK_EQ_U(tslab_epoch_close(a, f), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_free_all(a, f), TSLAB_OK);
  check_all_dead(a, &o2);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- another thread holds the epoch's memory in its cache ---- */

struct holder {
  tslab_t* a;
  tslab_epoch_t e;
  objects_t* o;
  atomic_int step; /* 1: filled; 2: may go on; 3: done */
};

static void* holder_thread(void* arg) {
  struct holder* h = arg;
  fill(h->a, h->e, h->o);
  atomic_store(&h->step, 1);
  while (atomic_load(&h->step) != 2) sched_yield(); /* idle, its cache holding e's memory */
  /* Back to work after the free-all: its cache forgot e, and allocating in
   * e fails as it must. */
  CHECK(tslab_alloc(h->a, 100, h->e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  atomic_store(&h->step, 3);
  return NULL;
}

static void test_idle_holder(void) {
  tslab_t* a = make();
  static objects_t o;
  struct holder h = {a, tslab_epoch_advance(a), &o, 0};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, holder_thread, &h) == 0);
  while (atomic_load(&h.step) != 1) sched_yield();
  CHECK_EQ_U(tslab_epoch_free_all(a, h.e), TSLAB_OK);
  check_all_dead(a, &o);
  atomic_store(&h.step, 2);
  pthread_join(t, NULL);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_objects, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- frees racing the free-all ---- */

enum { RACERS = 3 };

struct racer {
  tslab_t* a;
  objects_t* o;
  int id;
  atomic_int* go;
  uint64_t freed;
};

static void* racer_thread(void* arg) {
  struct racer* r = arg;
  while (!atomic_load(r->go)) sched_yield();
  for (int i = r->id; i < SMALL; i += RACERS) r->freed += tslab_free(r->a, r->o->small[i]);
  return NULL;
}

static void test_racing_frees(void) {
  for (int round = 0; round < 20; round++) {
    tslab_t* a = make();
    static objects_t o;
    tslab_epoch_t e = tslab_epoch_advance(a);
    fill(a, e, &o);
    atomic_int go = 0;
    struct racer r[RACERS];
    pthread_t t[RACERS];
    for (int i = 0; i < RACERS; i++) {
      r[i] = (struct racer){a, &o, i, &go, 0};
      REQUIRE(pthread_create(&t[i], NULL, racer_thread, &r[i]) == 0);
    }
    atomic_store(&go, 1);
    CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
    uint64_t freed = 0;
    for (int i = 0; i < RACERS; i++) {
      pthread_join(t[i], NULL);
      freed += r[i].freed;
    }
    /* Every object was either freed (before the end) or ended: exactly one
     * of the two, and the counters agree. */
    tslab_stats_global_t g;
    tslab_stats_global(a, &g);
    CHECK_EQ_U(freed + g.objects_ended_total, SMALL + SPANS);
    CHECK_EQ_U(g.invalid_frees_total, SMALL - freed);
    CHECK_EQ_U(g.live_objects, 0);
    CHECK_EQ_U(g.allocations_total, g.frees_total);
    check_all_dead(a, &o);
    CHECK_CONSISTENT(a);
    tslab_destroy(a);
  }
}

/* ---- a closed epoch's free-all racing frees of its runs ---- */

/* After a close, an epoch's runs with live objects wait on its detached
 * list; a free that empties one retires it. A free-all of the closed epoch
 * must not end, unlink or retire a run that such a free is retiring, nor
 * let a free retire one it is killing (found by review: runs retired twice,
 * a corrupted heap, hangs). One object per slab (one class each, no block
 * budget), so every run is one free away from empty, and a freer races
 * every free-all. */
enum { CLOSED_OBJECTS = 48, CLOSED_ROUNDS = 1500 };

struct closed_race {
  tslab_t* a;
  void* p[CLOSED_OBJECTS];
  pthread_barrier_t start, done;
  uint64_t freed;
};

static void* closed_freer(void* arg) {
  struct closed_race* r = arg;
  for (int round = 0; round < CLOSED_ROUNDS; round++) {
    pthread_barrier_wait(&r->start);
    for (int i = 0; i < CLOSED_OBJECTS; i++) r->freed += tslab_free(r->a, r->p[i]);
    pthread_barrier_wait(&r->done);
  }
  return NULL;
}

static void test_racing_frees_closed(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.block_budget = 0;
  static struct closed_race r;
  r.a = tslab_create(&c);
  REQUIRE(r.a != NULL);
  r.freed = 0;
  pthread_barrier_init(&r.start, NULL, 2);
  pthread_barrier_init(&r.done, NULL, 2);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, closed_freer, &r) == 0);
  for (int round = 0; round < CLOSED_ROUNDS; round++) {
    tslab_epoch_t e = tslab_epoch_advance(r.a);
    for (int i = 0; i < CLOSED_OBJECTS; i++) REQUIRE((r.p[i] = tslab_alloc(r.a, 8 + 64 * (size_t)i, e)) != NULL);
    CHECK_EQ_U(tslab_epoch_close(r.a, e), TSLAB_OK);
    pthread_barrier_wait(&r.start);
    CHECK_EQ_U(tslab_epoch_free_all(r.a, e), TSLAB_OK);
    pthread_barrier_wait(&r.done);
    tslab_stats_global_t g;
    tslab_stats_global(r.a, &g);
    REQUIRE(g.live_objects == 0);
    if (round % 100 == 0) CHECK_CONSISTENT(r.a);
  }
  pthread_join(t, NULL);
  /* Each object was freed or ended, never both, never neither. */
  tslab_stats_global_t g;
  tslab_stats_global(r.a, &g);
  CHECK_EQ_U(r.freed + g.objects_ended_total, (uint64_t)CLOSED_OBJECTS * CLOSED_ROUNDS);
  CHECK_EQ_U(g.allocations_total, g.frees_total);
  CHECK_CONSISTENT(r.a);
  pthread_barrier_destroy(&r.start);
  pthread_barrier_destroy(&r.done);
  tslab_destroy(r.a);
}

/* ---- blocks then class slabs: one epoch, exact all the way ---- */

static void test_blocks_then_slabs(void) {
  tslab_t* a = make();
  tslab_epoch_t e = tslab_epoch_advance(a), other = tslab_epoch_advance(a);
  static objects_t o;
  fill(a, e, &o);
  void* neighbour = tslab_alloc(a, 100, other);
  REQUIRE(neighbour != NULL);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK(g.blocks_in_use > 0);       /* the first 128 KiB went to blocks */
  CHECK(g.slabs_in_use > SPANS);    /* and the rest to class slabs */
  for (int i = 0; i < SMALL; i++) {
    /* Isolation: every object is its epoch's, in memory no other epoch's
     * object shares (the neighbour is in another run). */
    CHECK_EQ_U(tslab_epoch_of(a, o.small[i]), e);
    size_t u = tslab_usable_size(a, o.small[i]);
    CHECK(u >= o.small_size[i] && u <= o.small_size[i] + o.small_size[i] / 8 + 16);
  }
  CHECK_EQ_U(tslab_epoch_of(a, neighbour), other);
  /* Double frees are refused exactly, in blocks and in slabs. */
  for (int i = 0; i < SMALL; i += 2) CHECK(tslab_free(a, o.small[i]));
  for (int i = 0; i < SMALL; i += 2) CHECK(!tslab_free(a, o.small[i]));
  /* Interior pointers too. */
  for (int i = 1; i < SMALL; i += 2) CHECK(!tslab_free(a, (char*)o.small[i] + 16));
  for (int i = 1; i < SMALL; i += 2) CHECK(tslab_free(a, o.small[i]));
  for (int i = 0; i < SPANS; i++) CHECK(tslab_free(a, o.span[i]));
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.invalid_frees_total, SMALL);
  CHECK_EQ_U(g.live_objects, 1);
  CHECK(tslab_free(a, neighbour));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* Nothing of era e is live after its free-all: its free bytes are its
 * allocated bytes (read off its slot: the epoch's snapshot clamps live bytes
 * at zero, which would hide free bytes counted twice). */
static void check_era_bytes_settled(tslab_t* a, tslab_epoch_t e) {
  tslab_epoch_slot_t* slot = &a->slots[e & a->ring_mask];
  CHECK_EQ_U(atomic_load(&slot->f_free_bytes) + atomic_load(&slot->free_bytes) + atomic_load(&slot->large_bytes_free),
             atomic_load(&slot->f_alloc_bytes) + atomic_load(&slot->alloc_bytes) +
                 atomic_load(&slot->large_bytes_alloc));
}

/* ---- a remote free the kill completes ---- */

/* A free from another thread finds the run ATTACHED, and sets its remote bit
 * only after the free-all's detach looked at the word; the kill takes the
 * bit before the freer can take it back. The freer's free succeeded and is
 * counted by the freer; the kill counts it only in the run's live count
 * (found by review: it was counted twice, once as an ended object's
 * neighbour in the era's and the instance's frees; and, by a later review,
 * its bytes twice, when the freer counted them after the free-all had
 * brought the era's free bytes up to its allocated bytes). The freer starts once
 * the era is CLOSING (a freer that found it ACTIVE would be a user of the
 * era, whose window the close waits out, 7.2), and hooks hold it before and
 * after its bit, and the close after its detach, so the three meet in that
 * order every time. */
static _Atomic int hook_armed[TSLAB_HOOK_OBJECTS_ENDED + 1], hook_held[TSLAB_HOOK_OBJECTS_ENDED + 1],
    hook_released[TSLAB_HOOK_OBJECTS_ENDED + 1];

static void hold_in_order(int point) {
  if (point != TSLAB_HOOK_REMOTE_ATTACHED && point != TSLAB_HOOK_REMOTE_SET && point != TSLAB_HOOK_CLOSE_DETACHED &&
      point != TSLAB_HOOK_CLOSE_CLOSING && point != TSLAB_HOOK_OBJECTS_ENDED)
    return;
  int one = 1;
  if (!atomic_compare_exchange_strong(&hook_armed[point], &one, 0)) return;
  atomic_store(&hook_held[point], 1);
  if (point == TSLAB_HOOK_OBJECTS_ENDED) {
    /* The kill took the freer's bit: it goes on, and counts its free while
     * the free-all waits for its bracket before folding the ends. */
    atomic_store(&hook_released[TSLAB_HOOK_REMOTE_SET], 1);
    return;
  }
  if (point == TSLAB_HOOK_CLOSE_CLOSING) {
    /* The era is CLOSING: the freer starts, and stops before its bit. */
    tu_wait_flag(&hook_held[TSLAB_HOOK_REMOTE_ATTACHED]);
    return;
  }
  if (point == TSLAB_HOOK_CLOSE_DETACHED) {
    /* The detach is done: the freer sets its bit now, and waits again. */
    atomic_store(&hook_released[TSLAB_HOOK_REMOTE_ATTACHED], 1);
    tu_wait_flag(&hook_held[TSLAB_HOOK_REMOTE_SET]);
    return;
  }
  tu_wait_flag(&hook_released[point]);
}

typedef struct {
  tu_free_job job;
  tslab_epoch_t warm; /* an epoch the freer allocates in first, for a cache of its own */
} late_free_job;

static void* free_job(void* arg) {
  late_free_job* j = arg;
  void* x = tslab_alloc(j->job.a, 64, j->warm);
  tslab_free(j->job.a, x);
  tu_wait_flag(&hook_held[TSLAB_HOOK_CLOSE_CLOSING]);
  j->job.ok = tslab_free(j->job.a, j->job.p);
  return NULL;
}

static void test_remote_free_killed(void) {
  tslab_t* a = make();
  tslab_epoch_t warm = tslab_epoch_advance(a);
  tslab_epoch_t e = tslab_epoch_advance(a);
  void* p = tslab_alloc(a, 64, e);
  void* q = tslab_alloc(a, 64, e);
  REQUIRE(p && q);
  tslab_stats_global_t g0, g1;
  REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
  tslab_hook_set(hold_in_order);
  atomic_store(&hook_armed[TSLAB_HOOK_REMOTE_ATTACHED], 1);
  atomic_store(&hook_armed[TSLAB_HOOK_REMOTE_SET], 1);
  atomic_store(&hook_armed[TSLAB_HOOK_CLOSE_CLOSING], 1);
  atomic_store(&hook_armed[TSLAB_HOOK_CLOSE_DETACHED], 1);
  atomic_store(&hook_armed[TSLAB_HOOK_OBJECTS_ENDED], 1);
  late_free_job r = {{a, p, false}, warm};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_job, &r) == 0);
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK); /* its kill takes p's remote bit */
  pthread_join(t, NULL);
  tslab_hook_set(NULL);
  CHECK(r.job.ok); /* the free took effect before the end */
  CHECK(!tslab_free(a, q));
  REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
  CHECK_EQ_U(g1.frees_total - g0.frees_total, 3); /* the freer's warm-up, p freed, q ended */
  CHECK_EQ_U(g1.allocations_total - g0.allocations_total, 1);
  CHECK_EQ_U(g1.objects_ended_total - g0.objects_ended_total, 1);
  tslab_stats_epoch_t es;
  if (tslab_stats_epoch(a, e, &es) == TSLAB_OK) {
    CHECK_EQ_U(es.allocations_total, 2);
    CHECK_EQ_U(es.frees_total, 2);
    CHECK_EQ_U(es.live_objects, 0);
    CHECK_EQ_U(es.slabs, 0);
  }
  check_era_bytes_settled(a, e);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- a span's free racing a free-all ---- */

/* A span freed by another thread just before a free-all of its era: the
 * free won the span's exchange (the kill skips the span) and counts after
 * it. Found by review: the free-all's fold, which brings the era's free
 * bytes up to its allocated bytes, came first, and the free's count then
 * added the span's bytes a second time. The free's bracket now opens before
 * its exchange, and the free-all waits for it before its fold. */
static _Atomic int span_held, span_go;

static void hold_span_free(int point) {
  if (point != TSLAB_HOOK_SPAN_FREED || atomic_exchange(&span_held, 1)) return;
  tu_wait_flag(&span_go);
}

static void* release_span_later(void* unused) {
  (void)unused;
  usleep(20000); /* the free-all reaches its fold, or its wait for the free */
  atomic_store(&span_go, 1);
  return NULL;
}

static void test_span_free_racing_free_all(void) {
  tslab_t* a = make();
  tslab_epoch_t e = tslab_epoch_advance(a);
  void* span = tslab_alloc(a, 200000, e);
  void* other = tslab_alloc(a, 64, e);
  REQUIRE(span && other);
  tslab_hook_set(hold_span_free);
  tu_free_job r = {a, span, false};
  pthread_t freer, releaser;
  REQUIRE(pthread_create(&freer, NULL, tu_free_job_run, &r) == 0);
  tu_wait_flag(&span_held);
  REQUIRE(pthread_create(&releaser, NULL, release_span_later, NULL) == 0);
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  pthread_join(freer, NULL);
  pthread_join(releaser, NULL);
  tslab_hook_set(NULL);
  CHECK(r.ok);
  check_era_bytes_settled(a, e);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- handle frees racing a free-all while another epoch reuses its memory ---- */

/* A raw pointer cannot tell one incarnation of an address from the next: a
 * free of a dead pointer whose memory another epoch already allocated again
 * frees that allocation (a double free, as with any allocator; the header
 * says so). A handle can tell them apart. Here handle frees of a third of
 * E's objects race E's free-all while another thread allocates in its own
 * epoch F throughout, so E's ended runs are formatted again for F during
 * the call. Every handle free must take effect before its object's end or
 * fail; F's objects must stay intact and live until F's owner frees them. */
enum { REUSE_ROUNDS = 60, REUSE_BATCH = 64 };

struct reuse_race {
  tslab_t* a;
  objects_t* o;
  tslab_epoch_t f;
  pthread_barrier_t start;
  atomic_int racer_done;
  uint64_t freed, churned, churn_failures;
};

static void* handle_racer(void* arg) {
  struct reuse_race* r = arg;
  pthread_barrier_wait(&r->start);
  for (int i = 0; i < SMALL; i += 3) r->freed += tslab_free_handle(r->a, r->o->handle[i]);
  atomic_store(&r->racer_done, 1);
  return NULL;
}

/* Allocates, writes, checks and frees objects of F in batches until the
 * racer is done (and at least a few batches), sizes like E's. */
static void* reuse_churner(void* arg) {
  struct reuse_race* r = arg;
  void* p[REUSE_BATCH];
  tslab_handle_t h[REUSE_BATCH];
  size_t n[REUSE_BATCH];
  pthread_barrier_wait(&r->start);
  for (int batch = 0; batch < 16 || !atomic_load(&r->racer_done); batch++) {
    for (int i = 0; i < REUSE_BATCH; i++) {
      n[i] = 16 + (size_t)((batch * REUSE_BATCH + i) * 53) % 1500;
      p[i] = tslab_alloc_handle(r->a, n[i], r->f, &h[i]);
      if (!p[i]) {
        r->churn_failures++;
        continue;
      }
      memset(p[i], (int)(i + 1), n[i]);
    }
    for (int i = 0; i < REUSE_BATCH; i++) {
      if (!p[i]) continue;
      const unsigned char* b = p[i];
      bool intact = tslab_epoch_of(r->a, p[i]) == r->f && tslab_handle_get(r->a, h[i]) == p[i];
      for (size_t k = 0; k < n[i]; k++) intact = intact && b[k] == (unsigned char)(i + 1);
      if (!intact || !tslab_free_handle(r->a, h[i])) r->churn_failures++;
      r->churned++;
    }
  }
  return NULL;
}

static void test_handles_across_reuse(void) {
  tslab_t* a = make();
  static objects_t o;
  static struct reuse_race r;
  uint64_t freed = 0, ended = 0;
  for (int round = 0; round < REUSE_ROUNDS; round++) {
    tslab_epoch_t f = tslab_epoch_advance(a), e = tslab_epoch_advance(a);
    fill(a, e, &o);
    if (round % 2) CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK); /* open and closed eras */
    r = (struct reuse_race){.a = a, .o = &o, .f = f};
    pthread_barrier_init(&r.start, NULL, 3);
    pthread_t racer, churner;
    REQUIRE(pthread_create(&racer, NULL, handle_racer, &r) == 0);
    REQUIRE(pthread_create(&churner, NULL, reuse_churner, &r) == 0);
    tslab_stats_global_t g0, g1;
    REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
    pthread_barrier_wait(&r.start);
    CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
    pthread_join(racer, NULL);
    pthread_join(churner, NULL);
    REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
    pthread_barrier_destroy(&r.start);
    /* Each racing handle free took effect before its object's end, or failed. */
    CHECK_EQ_U(r.freed + (g1.objects_ended_total - g0.objects_ended_total), SMALL + SPANS);
    CHECK_EQ_U(r.churn_failures, 0);
    CHECK(r.churned >= 16 * REUSE_BATCH);
    for (int i = 0; i < SMALL; i += 3) CHECK(!tslab_free_handle(a, o.handle[i]));
    CHECK_EQ_U(tslab_epoch_close(a, f), TSLAB_OK);
    CHECK_EQ_U(g1.live_objects, 0);
    freed += r.freed;
    ended += g1.objects_ended_total - g0.objects_ended_total;
    if (round % 10 == 0) CHECK_CONSISTENT(a);
  }
  /* Not vacuous: both outcomes occurred. */
  CHECK(freed > 0);
  CHECK(ended > (uint64_t)REUSE_ROUNDS * SPANS);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- a handle free held between its check and its act ---- */

/* A handle free checks the handle on the run it finds, then frees in that
 * run. Held between the two (a preemption there), the free-all ends the
 * object and gives the run back, and an allocation of another epoch formats
 * the memory again (a fresh descriptor: the held window keeps the old one
 * from reuse) and gets the same address. The held free must act on the run
 * it checked, where the object is dead, and fail (found by review: it
 * looked the pointer up again and freed the new epoch's object). */
struct held_handle_free {
  tslab_t* a;
  tslab_handle_t h;
  int slot;
  bool ok;
};

static void* held_handle_run(void* arg) {
  struct held_handle_free* j = arg;
  atomic_store(&tu_held.thread[j->slot], (uintptr_t)pthread_self());
  j->ok = tslab_free_handle(j->a, j->h);
  return NULL;
}

static void test_handle_free_held_across_reuse(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.block_budget = 0; /* class slabs: the run given back is a slab */
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_advance(a);
  tslab_handle_t hx;
  void* x = tslab_alloc_handle(a, 5000, e, &hx);
  REQUIRE(x != NULL);
  struct held_handle_free j = {a, hx, 0, true};
  tslab_hook_set(tu_held_hook);
  atomic_store(&tu_held.held[0], 0);
  atomic_store(&tu_held.go[0], 0);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, held_handle_run, &j) == 0);
  tu_wait_flag(&tu_held.held[0]); /* the handle is checked: x is live */
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  tslab_epoch_t f = tslab_epoch_advance(a);
  enum { TRIES = 64 };
  void* y[TRIES];
  tslab_handle_t hy[TRIES];
  int n = 0;
  do {
    REQUIRE((y[n] = tslab_alloc_handle(a, 5000, f, &hy[n])) != NULL);
  } while (y[n++] != x && n < TRIES);
  REQUIRE(y[n - 1] == x); /* the memory was formatted again for f */
  atomic_store(&tu_held.go[0], 1);
  pthread_join(t, NULL);
  tslab_hook_set(NULL);
  atomic_store(&tu_held.thread[0], 0);
  CHECK(!j.ok);
  CHECK(tslab_handle_get(a, hy[n - 1]) == x);
  CHECK(tslab_usable_size(a, x) >= 5000);
  for (int i = 0; i < n; i++) CHECK(tslab_free_handle(a, hy[i]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

int main(void) {
  test_open_epoch();
  test_idle_holder();
  test_racing_frees();
  test_racing_frees_closed();
  test_blocks_then_slabs();
  test_remote_free_killed();
  test_span_free_racing_free_all();
  test_handles_across_reuse();
  test_handle_free_held_across_reuse();
  TEST_DONE();
}
