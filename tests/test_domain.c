/* Epoch domains: creation, nesting, auto-close, wrapping, force-close,
 * destruction, era safety, refcounts, and every misuse the API checks. */
#include <pthread.h>

#include "test_util.h"

/* The seed's ring discipline makes "recycled behind the domain's back"
 * reachable with a few advances; the era checks are the same either way. */
static tslab_t* make_instance(uint32_t ring) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = ring;
  cfg.advance_policy = TSLAB_ADVANCE_NEXT_SLOT;
  tslab_t* a = tslab_create(&cfg);
  REQUIRE(a != NULL);
  return a;
}

/* The status a failing call returned must also be the thread's last error. */
#define CHECK_FAILS(expr, status)        \
  do {                                   \
    tslab_clear_error();                 \
    CHECK_EQ_U((expr), (status));        \
    CHECK_EQ_U(tslab_last_error(), (status)); \
  } while (0)

static void test_create_and_label(void) {
  tslab_t* a = make_instance(16);
  tslab_clear_error();
  CHECK(tslab_domain_create(NULL, "x") == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);

  tslab_epoch_t before = tslab_epoch_current(a);
  tslab_domain_t* d = tslab_domain_create(a, "request");
  REQUIRE(d != NULL);
  tslab_epoch_t e = tslab_domain_epoch(d);
  CHECK(e > before);
  CHECK_EQ_U(tslab_epoch_current(a), e);
  CHECK(tslab_domain_allocator(d) == a);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_OK);
  char label[TSLAB_LABEL_MAX];
  CHECK_EQ_U(tslab_epoch_get_label(a, e, label, sizeof label), TSLAB_OK);
  CHECK(strcmp(label, "request") == 0);
  /* The era the domain left current stays open: creating did not close it. */
  CHECK_EQ_U(tslab_epoch_status(a, before), TSLAB_OK);

  tslab_domain_t* unlabelled = tslab_domain_create(a, NULL);
  REQUIRE(unlabelled != NULL);
  CHECK_EQ_U(tslab_epoch_get_label(a, tslab_domain_epoch(unlabelled), label, sizeof label),
             TSLAB_OK);
  CHECK_EQ_U(label[0], '\0');

  /* Destroying a created domain that was never entered closes its era. */
  CHECK_EQ_U(tslab_domain_destroy(d), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(tslab_domain_destroy(unlabelled), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_enter_alloc_exit_autoclose(void) {
  tslab_t* a = make_instance(16);
  CHECK(tslab_domain_current() == NULL);
  tslab_domain_t* d = tslab_domain_create(a, "scope");
  REQUIRE(d != NULL);
  tslab_epoch_t e = tslab_domain_epoch(d);
  CHECK_EQ_U(tslab_domain_enter(d), TSLAB_OK);
  CHECK(tslab_domain_current() == d);
  CHECK_EQ_U(tslab_epoch_refcount(a, e), 1);

  void* objs[500];
  for (int i = 0; i < 500; i++) {
    objs[i] = tslab_domain_alloc(48);
    REQUIRE(objs[i] != NULL);
    CHECK_EQ_U(tslab_epoch_of(a, objs[i]), e);
    memset(objs[i], 0xab, 48);
  }
  /* Free most objects while the scope is open; one survives the close. */
  for (int i = 1; i < 500; i++) CHECK(tslab_free(a, objs[i]));

  CHECK_EQ_U(tslab_domain_exit(d), TSLAB_OK);
  CHECK(tslab_domain_current() == NULL);
  CHECK_EQ_U(tslab_epoch_refcount(a, e), 0);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_ERR_EPOCH_CLOSED);
  /* The survivor stays valid after the close and frees normally. */
  CHECK_EQ_U(((unsigned char*)objs[0])[47], 0xab);
  tslab_stats_epoch_t es;
  CHECK_EQ_U(tslab_stats_epoch(a, e, &es), TSLAB_OK);
  CHECK_EQ_U(es.state, TSLAB_EPOCH_CLOSING);
  CHECK_EQ_U(es.live_objects, 1);
  CHECK(tslab_free(a, objs[0]));
  CHECK_EQ_U(tslab_stats_epoch(a, e, &es), TSLAB_OK);
  CHECK_EQ_U(es.live_objects, 0);
  CHECK_EQ_U(es.rss_estimate_bytes, 0);

  /* A closed era cannot be entered again; the domain still destroys. */
  CHECK_FAILS(tslab_domain_enter(d), TSLAB_ERR_EPOCH_CLOSED);
  CHECK(tslab_domain_current() == NULL);
  CHECK_EQ_U(tslab_domain_destroy(d), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_nesting(void) {
  tslab_t* a = make_instance(16);
  tslab_domain_t* txn = tslab_domain_create(a, "txn");
  REQUIRE(txn != NULL);
  CHECK_EQ_U(tslab_domain_enter(txn), TSLAB_OK);
  void* t1 = tslab_domain_alloc(200);
  REQUIRE(t1 != NULL);

  tslab_domain_t* query = tslab_domain_create(a, "query");
  REQUIRE(query != NULL);
  CHECK(tslab_domain_epoch(query) != tslab_domain_epoch(txn));
  CHECK_EQ_U(tslab_domain_enter(query), TSLAB_OK);
  CHECK(tslab_domain_current() == query);
  void* q1 = tslab_domain_alloc(64);
  REQUIRE(q1 != NULL);
  CHECK_EQ_U(tslab_epoch_of(a, q1), tslab_domain_epoch(query));
  CHECK(tslab_free(a, q1));
  CHECK_EQ_U(tslab_domain_exit(query), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, tslab_domain_epoch(query)), TSLAB_ERR_EPOCH_CLOSED);

  /* Back in the transaction: its era is untouched by the inner close. */
  CHECK(tslab_domain_current() == txn);
  CHECK_EQ_U(tslab_epoch_status(a, tslab_domain_epoch(txn)), TSLAB_OK);
  void* t2 = tslab_domain_alloc(200);
  REQUIRE(t2 != NULL);
  CHECK_EQ_U(tslab_epoch_of(a, t2), tslab_domain_epoch(txn));

  /* Entering the same domain again nests: only the last exit closes. */
  CHECK_EQ_U(tslab_domain_enter(txn), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_refcount(a, tslab_domain_epoch(txn)), 2);
  CHECK_EQ_U(tslab_domain_exit(txn), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, tslab_domain_epoch(txn)), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_exit(txn), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, tslab_domain_epoch(txn)), TSLAB_ERR_EPOCH_CLOSED);
  CHECK(tslab_domain_current() == NULL);

  CHECK(tslab_free(a, t1));
  CHECK(tslab_free(a, t2));
  CHECK_EQ_U(tslab_domain_destroy(query), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_destroy(txn), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_wrap(void) {
  tslab_t* a = make_instance(16);
  tslab_epoch_t e = tslab_epoch_advance(a);
  tslab_domain_t* w = tslab_domain_wrap(a, e);
  REQUIRE(w != NULL);
  CHECK_EQ_U(tslab_domain_epoch(w), e);
  for (int round = 0; round < 3; round++) {
    CHECK_EQ_U(tslab_domain_enter(w), TSLAB_OK);
    void* p = tslab_domain_alloc(100);
    REQUIRE(p != NULL);
    CHECK_EQ_U(tslab_epoch_of(a, p), e);
    CHECK(tslab_free(a, p));
    CHECK_EQ_U(tslab_domain_exit(w), TSLAB_OK);
    /* A wrapped era survives its scopes. */
    CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_OK);
  }
  CHECK_EQ_U(tslab_domain_destroy(w), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_OK);

  /* Two domains over one era: the wrap does not close what the creator owns
   * and the creator's close reaches the wrap's allocations. */
  tslab_domain_t* owner = tslab_domain_create(a, NULL);
  REQUIRE(owner != NULL);
  tslab_domain_t* view = tslab_domain_wrap(a, tslab_domain_epoch(owner));
  REQUIRE(view != NULL);
  CHECK_EQ_U(tslab_domain_enter(view), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_exit(view), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, tslab_domain_epoch(owner)), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_enter(view), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_destroy(owner), TSLAB_OK);
  tslab_clear_error();
  CHECK(tslab_domain_alloc(16) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(tslab_domain_exit(view), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_destroy(view), TSLAB_OK);

  /* Wrapping needs an era that accepts allocations. */
  tslab_clear_error();
  CHECK(tslab_domain_wrap(NULL, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  tslab_clear_error();
  CHECK(tslab_domain_wrap(a, 0) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  tslab_clear_error();
  CHECK(tslab_domain_wrap(a, tslab_epoch_current(a) + 5) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_clear_error();
  CHECK(tslab_domain_wrap(a, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  for (int i = 0; i < 16; i++) (void)tslab_epoch_advance(a);
  tslab_clear_error();
  CHECK(tslab_domain_wrap(a, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_STALE);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_force_close(void) {
  tslab_t* a = make_instance(16);
  tslab_domain_t* d = tslab_domain_create(a, "batch");
  REQUIRE(d != NULL);
  tslab_epoch_t e = tslab_domain_epoch(d);
  CHECK_EQ_U(tslab_domain_enter(d), TSLAB_OK);
  void* p = tslab_domain_alloc(300);
  REQUIRE(p != NULL);
  CHECK_EQ_U(tslab_domain_force_close(d), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_ERR_EPOCH_CLOSED);
  /* The scope stays entered and must still be exited. */
  CHECK(tslab_domain_current() == d);
  tslab_clear_error();
  CHECK(tslab_domain_alloc(300) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(tslab_domain_force_close(d), TSLAB_OK); /* closing again: no-op */
  CHECK_EQ_U(tslab_domain_exit(d), TSLAB_OK);
  CHECK(tslab_free(a, p));
  CHECK_EQ_U(tslab_domain_destroy(d), TSLAB_OK);

  /* Force-close also closes a wrapped era. */
  tslab_epoch_t w_era = tslab_epoch_advance(a);
  tslab_domain_t* w = tslab_domain_wrap(a, w_era);
  REQUIRE(w != NULL);
  CHECK_EQ_U(tslab_domain_force_close(w), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, w_era), TSLAB_ERR_EPOCH_CLOSED);
  /* Once the slot is recycled, force-close reports the stale era. */
  for (int i = 0; i < 16; i++) (void)tslab_epoch_advance(a);
  CHECK_EQ_U(tslab_domain_force_close(w), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(tslab_domain_destroy(w), TSLAB_OK);
  CHECK_FAILS(tslab_domain_force_close(NULL), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_era_safety(void) {
  tslab_t* a = make_instance(4);
  /* Closed behind the domain's back while entered. */
  tslab_domain_t* d = tslab_domain_create(a, NULL);
  REQUIRE(d != NULL);
  tslab_epoch_t e = tslab_domain_epoch(d);
  CHECK_EQ_U(tslab_domain_enter(d), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_clear_error();
  CHECK(tslab_domain_alloc(32) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(tslab_domain_exit(d), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_destroy(d), TSLAB_OK);

  /* Recycled behind its back: advancing around the ring force-closes the
   * era and gives its slot to a newer one. Allocation must never land in
   * the newer era. */
  d = tslab_domain_create(a, NULL);
  REQUIRE(d != NULL);
  e = tslab_domain_epoch(d);
  CHECK_EQ_U(tslab_domain_enter(d), TSLAB_OK);
  void* kept = tslab_domain_alloc(64);
  REQUIRE(kept != NULL);
  for (int i = 0; i < 4; i++) (void)tslab_epoch_advance(a);
  tslab_epoch_t newer = tslab_epoch_current(a);
  CHECK_EQ_U(newer % 4, e % 4);
  tslab_clear_error();
  CHECK(tslab_domain_alloc(64) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(tslab_epoch_status(a, e), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(tslab_domain_exit(d), TSLAB_OK);
  CHECK(tslab_domain_current() == NULL);
  CHECK_FAILS(tslab_domain_enter(d), TSLAB_ERR_EPOCH_STALE);
  /* The newer era's refcount was never touched by the stale domain. */
  CHECK_EQ_U(tslab_epoch_refcount(a, newer), 0);
  CHECK(tslab_free(a, kept));
  CHECK_EQ_U(tslab_domain_destroy(d), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_status(a, newer), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_misuse(void) {
  tslab_t* a = make_instance(16);
  CHECK_FAILS(tslab_domain_enter(NULL), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(tslab_domain_exit(NULL), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(tslab_domain_destroy(NULL), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_U(tslab_domain_epoch(NULL), 0);
  CHECK(tslab_domain_allocator(NULL) == NULL);

  tslab_clear_error();
  CHECK(tslab_domain_alloc(16) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_NO_DOMAIN);

  tslab_domain_t* outer = tslab_domain_create(a, "outer");
  tslab_domain_t* inner = tslab_domain_create(a, "inner");
  REQUIRE(outer != NULL && inner != NULL);
  CHECK_FAILS(tslab_domain_exit(outer), TSLAB_ERR_NOT_ENTERED);
  CHECK_EQ_U(tslab_domain_enter(outer), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_enter(inner), TSLAB_OK);

  /* Out of order: refused, nothing changes. */
  CHECK_FAILS(tslab_domain_exit(outer), TSLAB_ERR_NOT_INNERMOST);
  CHECK(tslab_domain_current() == inner);
  CHECK_EQ_U(tslab_epoch_refcount(a, tslab_domain_epoch(outer)), 1);
  CHECK_EQ_U(tslab_epoch_status(a, tslab_domain_epoch(outer)), TSLAB_OK);

  /* Destroying an entered domain: refused, the domain stays usable. */
  CHECK_FAILS(tslab_domain_destroy(inner), TSLAB_ERR_DOMAIN_ENTERED);
  CHECK_FAILS(tslab_domain_destroy(outer), TSLAB_ERR_DOMAIN_ENTERED);
  void* p = tslab_domain_alloc(16);
  REQUIRE(p != NULL);
  CHECK_EQ_U(tslab_epoch_of(a, p), tslab_domain_epoch(inner));
  CHECK(tslab_free(a, p));

  CHECK_EQ_U(tslab_domain_exit(inner), TSLAB_OK);
  CHECK_FAILS(tslab_domain_exit(inner), TSLAB_ERR_NOT_ENTERED);
  CHECK_EQ_U(tslab_domain_exit(outer), TSLAB_OK);
  CHECK(tslab_domain_current() == NULL);
  CHECK_EQ_U(tslab_domain_destroy(inner), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_destroy(outer), TSLAB_OK);

  /* The stack is bounded: the entry past the limit is refused. */
  tslab_domain_t* deep = tslab_domain_wrap(a, tslab_epoch_advance(a));
  REQUIRE(deep != NULL);
  for (int i = 0; i < TSLAB_DOMAIN_DEPTH_MAX; i++) CHECK_EQ_U(tslab_domain_enter(deep), TSLAB_OK);
  CHECK_FAILS(tslab_domain_enter(deep), TSLAB_ERR_LIMIT);
  CHECK_EQ_U(tslab_epoch_refcount(a, tslab_domain_epoch(deep)), TSLAB_DOMAIN_DEPTH_MAX);
  for (int i = 0; i < TSLAB_DOMAIN_DEPTH_MAX; i++) CHECK_EQ_U(tslab_domain_exit(deep), TSLAB_OK);
  CHECK_FAILS(tslab_domain_exit(deep), TSLAB_ERR_NOT_ENTERED);
  CHECK_EQ_U(tslab_epoch_refcount(a, tslab_domain_epoch(deep)), 0);
  CHECK_EQ_U(tslab_domain_destroy(deep), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- Thread confinement -------------------------------------------------- */

typedef struct foreign_args {
  tslab_domain_t* d;
  tslab_t* a;
  int enter, exit, force_close, destroy, last_error;
  bool sees_no_domain, getters_ok, own_domain_ok;
} foreign_args_t;

static void* foreign_thread(void* arg) {
  foreign_args_t* f = arg;
  f->sees_no_domain = tslab_domain_current() == NULL;
  tslab_clear_error();
  f->enter = tslab_domain_enter(f->d);
  f->exit = tslab_domain_exit(f->d);
  f->force_close = tslab_domain_force_close(f->d);
  f->destroy = tslab_domain_destroy(f->d);
  f->last_error = tslab_last_error();
  f->getters_ok = tslab_domain_allocator(f->d) == f->a && tslab_domain_epoch(f->d) != 0;
  /* This thread's own stack is independent of the creator's. */
  tslab_domain_t* mine = tslab_domain_create(f->a, "worker");
  f->own_domain_ok = mine != NULL && tslab_domain_enter(mine) == TSLAB_OK &&
                     tslab_domain_current() == mine && tslab_domain_alloc(8) != NULL &&
                     tslab_domain_exit(mine) == TSLAB_OK && tslab_domain_destroy(mine) == TSLAB_OK;
  return NULL;
}

static void test_wrong_thread(void) {
  tslab_t* a = make_instance(16);
  tslab_domain_t* d = tslab_domain_create(a, "owned");
  REQUIRE(d != NULL);
  CHECK_EQ_U(tslab_domain_enter(d), TSLAB_OK);
  foreign_args_t f = {.d = d, .a = a};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, foreign_thread, &f) == 0);
  REQUIRE(pthread_join(th, NULL) == 0);
  CHECK(f.sees_no_domain);
  CHECK_EQ_U(f.enter, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(f.exit, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(f.force_close, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(f.destroy, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(f.last_error, TSLAB_ERR_WRONG_THREAD);
  CHECK(f.getters_ok);
  CHECK(f.own_domain_ok);
  /* None of the foreign calls changed anything. */
  CHECK(tslab_domain_current() == d);
  CHECK_EQ_U(tslab_epoch_refcount(a, tslab_domain_epoch(d)), 1);
  CHECK_EQ_U(tslab_epoch_status(a, tslab_domain_epoch(d)), TSLAB_OK);
  void* p = tslab_domain_alloc(24);
  REQUIRE(p != NULL);
  CHECK(tslab_free(a, p));
  CHECK_EQ_U(tslab_domain_exit(d), TSLAB_OK);
  CHECK_EQ_U(tslab_domain_destroy(d), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* ---- Leak signals ---------------------------------------------------------- */

static void test_refcount_feeds_leak_check(void) {
  tslab_t* a = make_instance(16);
  tslab_domain_t* d = tslab_domain_create(a, "forgotten");
  REQUIRE(d != NULL);
  tslab_epoch_t e = tslab_domain_epoch(d);
  CHECK_EQ_U(tslab_domain_enter(d), TSLAB_OK);
  tslab_leak_t leaks[32];
  size_t n = tslab_leak_check(a, 0, leaks, 32);
  bool found = false;
  for (size_t i = 0; i < n; i++) {
    if (leaks[i].era != e) continue;
    found = true;
    CHECK_EQ_U(leaks[i].refcount, 1);
    CHECK(leaks[i].refcount_stuck);
    CHECK(strcmp(leaks[i].label, "forgotten") == 0);
  }
  CHECK(found);
  tslab_stats_epoch_t es;
  CHECK_EQ_U(tslab_stats_epoch(a, e, &es), TSLAB_OK);
  CHECK_EQ_U(es.refcount, 1);
  CHECK_EQ_U(tslab_domain_exit(d), TSLAB_OK);
  CHECK_EQ_U(tslab_stats_epoch(a, e, &es), TSLAB_OK);
  CHECK_EQ_U(es.refcount, 0);
  n = tslab_leak_check(a, 0, leaks, 32);
  for (size_t i = 0; i < n; i++) CHECK(leaks[i].era != e || !leaks[i].refcount_stuck);
  CHECK_EQ_U(tslab_domain_destroy(d), TSLAB_OK);
  tslab_destroy(a);
}

int main(void) {
  test_create_and_label();
  test_enter_alloc_exit_autoclose();
  test_nesting();
  test_wrap();
  test_force_close();
  test_era_safety();
  test_misuse();
  test_wrong_thread();
  test_refcount_feeds_leak_check();
  TEST_DONE();
}
