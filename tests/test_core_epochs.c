/* Epochs as eras (contract lines 1 and 4): lifetime isolation, stale and
 * unknown eras rejected, forced close when the ring wraps, close semantics,
 * labels and reference counts. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fault.h"
#include "test_util.h"

#define GRANULE ((uintptr_t)16384)

static tslab_t* make_policy(uint32_t ring, tslab_advance_policy_t policy) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.epoch_ring_size = ring;
  c.advance_policy = policy;
  c.reserve_bytes = (size_t)1 << 30;
  c.max_alloc_size = (size_t)1 << 26;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

static tslab_t* make(uint32_t ring) { return make_policy(ring, TSLAB_ADVANCE_SKIP_OPEN); }

/* Contract 1: a slab holds objects of one era only. Objects of different
 * eras never share a granule (slabs are whole granules). */
static void test_isolation(void) {
  tslab_t* a = make(16);
  enum { EPOCHS = 6, PER = 300 };
  tslab_epoch_t eras[EPOCHS];
  void* p[EPOCHS][PER];
  eras[0] = tslab_epoch_current(a);
  for (int i = 1; i < EPOCHS; i++) eras[i] = tslab_epoch_advance(a);
  /* Interleave allocations of all eras and several sizes. */
  for (int j = 0; j < PER; j++)
    for (int i = 0; i < EPOCHS; i++) {
      p[i][j] = tslab_alloc(a, (size_t)(16 + (j % 5) * 40), eras[i]);
      REQUIRE(p[i][j] != NULL);
      CHECK_EQ_U(tslab_epoch_of(a, p[i][j]), eras[i]);
    }
  for (int i = 0; i < EPOCHS; i++)
    for (int j = 0; j < PER; j++)
      for (int k = i + 1; k < EPOCHS; k++)
        for (int m = 0; m < PER; m += 7) CHECK((uintptr_t)p[i][j] / GRANULE != (uintptr_t)p[k][m] / GRANULE);
  for (int i = 0; i < EPOCHS; i++)
    for (int j = 0; j < PER; j++) CHECK(tslab_free(a, p[i][j]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* The seed's ring discipline: every advance takes the next slot. */
static void test_eras(void) {
  tslab_t* a = make_policy(4, TSLAB_ADVANCE_NEXT_SLOT);
  tslab_epoch_t e1 = tslab_epoch_current(a);
  CHECK_EQ_U(e1, 1);
  CHECK_EQ_U(tslab_epoch_status(a, e1), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, 0), TSLAB_ERR_EPOCH_UNKNOWN);
  CHECK_EQ_U(tslab_epoch_status(a, 2), TSLAB_ERR_EPOCH_UNKNOWN);
  void* live1 = tslab_alloc(a, 64, e1);
  REQUIRE(live1 != NULL);
  memset(live1, 0x5A, 64);

  tslab_epoch_t e[8];
  e[1] = e1;
  for (int i = 2; i <= 4; i++) e[i] = tslab_epoch_advance(a);
  CHECK_EQ_U(e[4], 4);
  /* Older eras stay open after an advance. */
  CHECK_EQ_U(tslab_epoch_status(a, e1), TSLAB_OK);
  void* q = tslab_alloc(a, 64, e[2]);
  CHECK(q != NULL);
  CHECK(tslab_free(a, q));

  /* Advancing onto e1's slot (4 slots) closes e1 first, counted as forced. */
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  uint64_t forced0 = g.epochs_forced_close_total;
  e[5] = tslab_epoch_advance(a);
  CHECK_EQ_U(e[5], 5);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.epochs_forced_close_total - forced0, 1);
  /* e1 is now stale: rejected, never mapped onto era 5. */
  CHECK(tslab_alloc(a, 64, e1) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(tslab_epoch_status(a, e1), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(tslab_epoch_close(a, e1), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(tslab_epoch_set_label(a, e1, "x"), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(tslab_epoch_refcount(a, e1), (uint64_t)-1);
  /* Its live object stays valid and can still be freed. */
  CHECK(((unsigned char*)live1)[63] == 0x5A);
  CHECK_EQ_U(tslab_epoch_of(a, live1), e1);
  CHECK(tslab_free(a, live1));
  CHECK(!tslab_free(a, live1));
  void* p5 = tslab_alloc(a, 64, e[5]);
  CHECK(p5 != NULL);
  CHECK_EQ_U(tslab_epoch_of(a, p5), 5);
  CHECK(tslab_free(a, p5));

  /* Close: rejects allocations, idempotent, objects stay valid. */
  void* keep = tslab_alloc(a, 200, e[3]);
  REQUIRE(keep != NULL);
  CHECK_EQ_U(tslab_epoch_close(a, e[3]), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_close(a, e[3]), TSLAB_OK);
  CHECK(tslab_alloc(a, 200, e[3]) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  CHECK(tslab_alloc(a, 100000, e[3]) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(tslab_epoch_status(a, e[3]), TSLAB_ERR_EPOCH_CLOSED);
  CHECK(tslab_usable_size(a, keep) >= 200);
  CHECK(tslab_free(a, keep));
  CHECK_EQ_U(tslab_epoch_close(NULL, 1), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_U(tslab_epoch_close(a, 99), TSLAB_ERR_EPOCH_UNKNOWN);
  /* Era 6 lands on open era 2's slot (forced close); era 7 on closed era
   * 3's slot (no forced close). */
  tslab_stats_global(a, &g);
  forced0 = g.epochs_forced_close_total;
  e[6] = tslab_epoch_advance(a);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.epochs_forced_close_total - forced0, 1);
  e[7] = tslab_epoch_advance(a);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.epochs_forced_close_total - forced0, 1);
  CHECK_EQ_U(tslab_epoch_status(a, e[2]), TSLAB_ERR_EPOCH_STALE);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* The default discipline: a long-lived era keeps its slot while short
 * phases open and close around it; eras skip the open slots. */
static void test_skip_open(void) {
  tslab_t* a = make(4);
  tslab_epoch_t forever = tslab_epoch_current(a);
  char* p = tslab_alloc(a, 100, forever);
  REQUIRE(p != NULL);
  strcpy(p, "long-lived");
  tslab_stats_global_t g;
  tslab_epoch_t prev = forever;
  for (int i = 0; i < 200; i++) {
    tslab_epoch_t e = tslab_epoch_advance(a);
    CHECK(e > prev);
    CHECK((e & 3) != (forever & 3));
    prev = e;
    void* q = tslab_alloc(a, 64, e);
    CHECK(q != NULL);
    CHECK(tslab_free(a, q));
    CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  }
  CHECK_EQ_U(tslab_epoch_status(a, forever), TSLAB_OK);
  void* q = tslab_alloc(a, 64, forever);
  CHECK(q != NULL);
  CHECK(tslab_free(a, q));
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.epochs_forced_close_total, 0);
  /* The ring lists the long-lived era first. */
  tslab_stats_epoch_t eps[4];
  size_t n = tslab_stats_epochs(a, eps, 4);
  CHECK(n >= 2);
  CHECK_EQ_U(eps[0].era, forever);
  CHECK(eps[0].state == TSLAB_EPOCH_ACTIVE);
  /* With every slot open, the next advance must force a close. */
  tslab_epoch_t o[3];
  for (int i = 0; i < 3; i++) o[i] = tslab_epoch_advance(a);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.epochs_forced_close_total, 0);
  tslab_epoch_t next = tslab_epoch_advance(a);
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.epochs_forced_close_total, 1);
  CHECK(next == o[2] + 1);
  CHECK(strcmp(p, "long-lived") == 0);
  CHECK(tslab_free(a, p));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_labels_refcounts(void) {
  tslab_t* a = make(16);
  tslab_epoch_t e = tslab_epoch_current(a);
  char buf[TSLAB_LABEL_MAX];
  CHECK_EQ_U(tslab_epoch_set_label(a, e, "request"), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_get_label(a, e, buf, sizeof buf), TSLAB_OK);
  CHECK(strcmp(buf, "request") == 0);
  CHECK_EQ_U(tslab_epoch_set_label(a, e, "a-label-that-is-much-longer-than-thirty-two-bytes"), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_get_label(a, e, buf, sizeof buf), TSLAB_OK);
  CHECK_EQ_U(strlen(buf), TSLAB_LABEL_MAX - 1);
  CHECK_EQ_U(tslab_epoch_set_label(a, e, NULL), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_get_label(a, e, buf, sizeof buf), TSLAB_OK);
  CHECK(buf[0] == 0);

  CHECK_EQ_U(tslab_epoch_refcount(a, e), 0);
  CHECK_EQ_U(tslab_epoch_ref(a, e), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_ref(a, e), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_refcount(a, e), 2);
  CHECK_EQ_U(tslab_epoch_unref(a, e), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_unref(a, e), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_unref(a, e), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_U(tslab_epoch_refcount(a, e), 0);
  CHECK_EQ_U(tslab_epoch_ref(a, 77), TSLAB_ERR_EPOCH_UNKNOWN);
  tslab_destroy(a);
}

/* ---- statistics of a slot an advance is claiming ---- */

/* A reader that listed a slot holding a closed era and reads it after an
 * advance claimed the slot for a newer era, before the open reset the
 * slot's counts, finds the old era's counts there: it reports neither them
 * under the new era's number nor the old era, which the slot no longer
 * holds. Hooks hold the reader after its listing and the advance after its
 * claim, so the two meet there every time. */
static _Atomic int armed[TSLAB_HOOK_EPOCHS_LISTED + 1], held[TSLAB_HOOK_EPOCHS_LISTED + 1],
    released[TSLAB_HOOK_EPOCHS_LISTED + 1];

static void hold_once(int point) {
  if (point != TSLAB_HOOK_ADVANCE_CLAIMED && point != TSLAB_HOOK_EPOCHS_LISTED) return;
  int one = 1;
  if (!atomic_compare_exchange_strong(&armed[point], &one, 0)) return;
  atomic_store(&held[point], 1);
  while (!atomic_load(&released[point])) sched_yield();
}

static void wait_held(int point) { tu_wait_flag(&held[point]); }

typedef struct {
  tslab_t* a;
  tslab_stats_epoch_t eps[4];
  size_t n;
  tslab_epoch_t era;
} reader_t;

static void* read_epochs(void* arg) {
  reader_t* r = arg;
  r->n = tslab_stats_epochs(r->a, r->eps, 4);
  return NULL;
}

static void* advance_one(void* arg) {
  reader_t* r = arg;
  r->era = tslab_epoch_advance(r->a);
  return NULL;
}

static void test_stats_of_claimed_slot(void) {
  tslab_t* a = make_policy(2, TSLAB_ADVANCE_SKIP_OPEN);
  tslab_epoch_t first = tslab_epoch_current(a);
  tslab_epoch_t done = tslab_epoch_advance(a);
  REQUIRE(done != 0);
  void* p[10];
  for (int i = 0; i < 10; i++) REQUIRE((p[i] = tslab_alloc(a, 64, done)) != NULL);
  for (int i = 0; i < 10; i++) CHECK(tslab_free(a, p[i]));
  CHECK_EQ_U(tslab_epoch_set_label(a, done, "claimed"), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_close(a, done), TSLAB_OK);
  tslab_hook_set(hold_once);
  reader_t rd = {.a = a}, adv = {.a = a};
  pthread_t rt, at;
  atomic_store(&armed[TSLAB_HOOK_EPOCHS_LISTED], 1);
  REQUIRE(pthread_create(&rt, NULL, read_epochs, &rd) == 0);
  wait_held(TSLAB_HOOK_EPOCHS_LISTED); /* listed: `first` open, `done` closed */
  atomic_store(&armed[TSLAB_HOOK_ADVANCE_CLAIMED], 1);
  REQUIRE(pthread_create(&at, NULL, advance_one, &adv) == 0);
  wait_held(TSLAB_HOOK_ADVANCE_CLAIMED); /* `done`'s slot claimed for a newer era */
  /* The label still counts its era, whose counts the slot still holds. */
  tslab_stats_label_t labels[TSLAB_LABELS_MAX + 1];
  size_t nl = tslab_stats_labels(a, labels, TSLAB_LABELS_MAX + 1);
  size_t found = 0;
  for (size_t i = 0; i < nl; i++)
    if (strcmp(labels[i].label, "claimed") == 0) {
      found++;
      CHECK_EQ_U(labels[i].allocations_total, 10);
      CHECK_EQ_U(labels[i].frees_total, 10);
    }
  CHECK_EQ_U(found, 1);
  atomic_store(&released[TSLAB_HOOK_EPOCHS_LISTED], 1);
  pthread_join(rt, NULL);
  atomic_store(&released[TSLAB_HOOK_ADVANCE_CLAIMED], 1);
  pthread_join(at, NULL);
  tslab_hook_set(NULL);
  REQUIRE(adv.era > done && (adv.era & 1) == (done & 1));
  CHECK_EQ_U(rd.n, 1);
  for (size_t i = 0; i < rd.n; i++) {
    CHECK_EQ_U(rd.eps[i].era, first);
    CHECK(rd.eps[i].era != adv.era && rd.eps[i].state != TSLAB_EPOCH_EMPTY);
  }
  tslab_stats_epoch_t st;
  CHECK_EQ_U(tslab_stats_epoch(a, adv.era, &st), TSLAB_OK);
  CHECK_EQ_U(st.allocations_total, 0);
  CHECK_EQ_U(st.frees_total, 0);
  nl = tslab_stats_labels(a, labels, TSLAB_LABELS_MAX + 1);
  for (size_t i = 0; i < nl; i++)
    if (strcmp(labels[i].label, "claimed") == 0) CHECK_EQ_U(labels[i].allocations_total, 10);
  CHECK_EQ_U(tslab_epoch_close(a, adv.era), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- a label set or cleared while an advance takes the slot over ---- */

/* One thread labels and unlabels the closed era in the slot the next
 * advance takes, until the advance has claimed it and the label is refused,
 * while this thread advances. The open must read the label the way its last
 * successful change left it: it once read it before taking any lock, and a
 * label cleared in between sent the label fold to labels[-1], the instance
 * fields just before the table (the label mutex, `current`), and a label set
 * in between was dropped without its counts. */
static tslab_t* race_inst;
static _Atomic tslab_epoch_t race_target;
static _Atomic int race_go, race_stop;

static void* toggle_label(void* arg) {
  (void)arg;
  while (!atomic_load(&race_stop)) {
    if (!atomic_load(&race_go)) {
      sched_yield();
      continue;
    }
    tslab_epoch_t e = atomic_load(&race_target);
    for (unsigned k = 0; tslab_epoch_set_label(race_inst, e, (k & 1) ? NULL : "toggled") == TSLAB_OK; k++) {
    }
    atomic_store(&race_go, 0);
  }
  return NULL;
}

static void test_label_during_claim(long rounds) {
  race_inst = make_policy(2, TSLAB_ADVANCE_SKIP_OPEN);
  tslab_epoch_t cur = tslab_epoch_advance(race_inst);
  REQUIRE(cur != 0);
  CHECK_EQ_U(tslab_epoch_close(race_inst, cur - 1), TSLAB_OK);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, toggle_label, NULL) == 0);
  long bad = 0;
  for (long i = 0; i < rounds && !bad; i++) {
    for (int k = 0; k < 3; k++) CHECK(tslab_alloc(race_inst, 64, cur) != NULL);
    atomic_store(&race_target, cur - 1); /* closed, in the slot the next advance takes */
    atomic_store(&race_go, 1);
    for (volatile long s = 0; s < i % 256; s++) {
    }
    tslab_epoch_t n = tslab_epoch_advance(race_inst);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&race_go)) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      REQUIRE(now.tv_sec - t0.tv_sec < 20); /* the toggler is stuck: a lock was corrupted */
      sched_yield();
    }
    bad += n != cur + 1 || tslab_epoch_current(race_inst) != n;
    CHECK_EQ_U(tslab_epoch_close(race_inst, cur), TSLAB_OK);
    cur = n;
  }
  atomic_store(&race_stop, 1);
  pthread_join(t, NULL);
  CHECK_EQ_U(bad, 0);
  CHECK_CONSISTENT(race_inst);
  tslab_destroy(race_inst);
}

int main(void) {
  test_isolation();
  test_eras();
  test_skip_open();
  test_labels_refcounts();
  test_stats_of_claimed_slot();
  test_label_during_claim(20000);
  TEST_DONE();
}
