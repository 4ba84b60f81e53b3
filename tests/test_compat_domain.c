/* The seed-compatible epoch domain API (epoch_domain.h): the seed's patterns,
 * its fields, era safety, and every misuse the native layer checks. */
#include <pthread.h>

#include "epoch_domain.h"
#include "slab_stats.h"
#include "test_util.h"

static SlabAllocator* make(void) {
  SlabAllocator* a = slab_allocator_create();
  REQUIRE(a != NULL);
  return a;
}

static bool slot_accepts(SlabAllocator* a, EpochId e) {
  void* p = slab_malloc_epoch(a, 32, e);
  if (p == NULL) return false;
  slab_free(a, p);
  return true;
}

static void test_create_enter_exit(void) {
  SlabAllocator* a = make();
  EpochId before = epoch_current(a);
  epoch_domain_t* d = epoch_domain_create(a);
  REQUIRE(d != NULL);
  CHECK(d->alloc == a);
  CHECK_EQ_U(d->epoch_id, epoch_current(a));
  CHECK(d->epoch_id != before);
  CHECK_EQ_U(d->epoch_era % SLAB_EPOCH_COUNT, d->epoch_id);
  CHECK_EQ_U(d->refcount, 0);
  CHECK(d->auto_close);
  /* Creating does not close the slot that was current. */
  CHECK(slot_accepts(a, before));

  CHECK(epoch_domain_current() == NULL);
  CHECK(epoch_domain_allocator() == NULL);
  epoch_domain_enter(d);
  CHECK_EQ_U(d->refcount, 1);
  CHECK(epoch_domain_current() == d);
  CHECK(epoch_domain_allocator() == a);
  CHECK_EQ_U(slab_epoch_get_refcount(a, d->epoch_id), 1);
  void* p = slab_malloc_epoch(a, 128, d->epoch_id);
  REQUIRE(p != NULL);
  epoch_domain_exit(d);
  CHECK_EQ_U(d->refcount, 0);
  CHECK(epoch_domain_current() == NULL);
  CHECK_EQ_U(slab_epoch_get_refcount(a, d->epoch_id), 0);
  /* The last exit closed the epoch; its object is still valid. */
  CHECK(!slot_accepts(a, d->epoch_id));
  SlabEpochStats es;
  slab_stats_epoch(a, 0, d->epoch_id, &es);
  CHECK_EQ_U(es.state, EPOCH_CLOSING);
  CHECK_EQ_U(es.alloc_count, 1);
  /* A closed epoch cannot be entered again. */
  tslab_clear_error();
  epoch_domain_enter(d);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(d->refcount, 0);
  CHECK(epoch_domain_current() == NULL);
  slab_free(a, p);
  epoch_domain_destroy(d);
  slab_allocator_free(a);
}

/* The seed's transaction/query pattern: query memory goes at each query's
 * end, transaction memory at commit. */
static void test_nested_transaction(void) {
  SlabAllocator* a = make();
  epoch_domain_t* txn = epoch_domain_create(a);
  REQUIRE(txn != NULL);
  epoch_domain_enter(txn);
  void* state = slab_malloc_epoch(a, 256, txn->epoch_id);
  REQUIRE(state != NULL);
  for (int q = 0; q < 3; q++) {
    epoch_domain_t* query = epoch_domain_create(a);
    REQUIRE(query != NULL);
    epoch_domain_enter(query);
    CHECK(epoch_domain_current() == query);
    void* plan = slab_malloc_epoch(a, 512, query->epoch_id);
    CHECK(plan != NULL);
    slab_free(a, plan);
    epoch_domain_exit(query);
    CHECK(!slot_accepts(a, query->epoch_id));
    epoch_domain_destroy(query);
    /* The transaction survives its queries. */
    CHECK(epoch_domain_current() == txn);
    CHECK(slot_accepts(a, txn->epoch_id));
  }
  slab_free(a, state);
  epoch_domain_exit(txn);
  CHECK(!slot_accepts(a, txn->epoch_id));
  epoch_domain_destroy(txn);
  slab_allocator_free(a);
}

static void test_wrap(void) {
  SlabAllocator* a = make();
  /* Without auto-close: a reusable frame domain. */
  EpochId frame_epoch = epoch_current(a);
  epoch_domain_t* frame = epoch_domain_wrap(a, frame_epoch, false);
  REQUIRE(frame != NULL);
  CHECK_EQ_U(frame->epoch_id, frame_epoch);
  CHECK(!frame->auto_close);
  for (int i = 0; i < 5; i++) {
    epoch_domain_enter(frame);
    void* p = slab_malloc_epoch(a, 64, frame->epoch_id);
    CHECK(p != NULL);
    slab_free(a, p);
    epoch_domain_exit(frame);
    CHECK(slot_accepts(a, frame_epoch));
  }
  epoch_domain_force_close(frame);
  CHECK(!slot_accepts(a, frame_epoch));
  epoch_domain_destroy(frame);

  /* With auto-close: closes at the last exit, or at destroy if never entered. */
  epoch_domain_t* ac = epoch_domain_wrap(a, 9, true);
  REQUIRE(ac != NULL);
  epoch_domain_enter(ac);
  epoch_domain_enter(ac);
  CHECK_EQ_U(ac->refcount, 2);
  epoch_domain_exit(ac);
  CHECK(slot_accepts(a, 9));
  epoch_domain_exit(ac);
  CHECK(!slot_accepts(a, 9));
  epoch_domain_destroy(ac);
  epoch_domain_t* never = epoch_domain_wrap(a, 10, true);
  REQUIRE(never != NULL);
  epoch_domain_destroy(never);
  CHECK(!slot_accepts(a, 10));
  epoch_domain_t* keep = epoch_domain_wrap(a, 11, false);
  REQUIRE(keep != NULL);
  epoch_domain_destroy(keep);
  CHECK(slot_accepts(a, 11));

  /* Wrapping needs a valid slot that accepts allocations. */
  tslab_clear_error();
  CHECK(epoch_domain_wrap(a, SLAB_EPOCH_COUNT, false) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  tslab_clear_error();
  CHECK(epoch_domain_wrap(a, 9, false) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  tslab_clear_error();
  CHECK(epoch_domain_wrap(NULL, 0, false) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  tslab_clear_error();
  CHECK(epoch_domain_create(NULL) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  slab_allocator_free(a);
}

static void test_force_close_while_entered(void) {
  SlabAllocator* a = make();
  epoch_domain_t* batch = epoch_domain_wrap(a, epoch_current(a), false);
  REQUIRE(batch != NULL);
  epoch_domain_enter(batch);
  void* row = slab_malloc_epoch(a, 100, batch->epoch_id);
  REQUIRE(row != NULL);
  epoch_domain_force_close(batch);
  CHECK(!slot_accepts(a, batch->epoch_id));
  CHECK_EQ_U(batch->refcount, 1);
  CHECK(epoch_domain_current() == batch);
  epoch_domain_exit(batch);
  CHECK_EQ_U(batch->refcount, 0);
  CHECK(epoch_domain_current() == NULL);
  slab_free(a, row);
  epoch_domain_destroy(batch);
  tslab_clear_error();
  epoch_domain_force_close(NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  slab_allocator_free(a);
}

static void test_misuse(void) {
  SlabAllocator* a = make();
  tslab_clear_error();
  epoch_domain_enter(NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  tslab_clear_error();
  epoch_domain_exit(NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  epoch_domain_destroy(NULL);

  epoch_domain_t* outer = epoch_domain_create(a);
  epoch_domain_t* inner = epoch_domain_create(a);
  REQUIRE(outer != NULL && inner != NULL);
  tslab_clear_error();
  epoch_domain_exit(outer);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_NOT_ENTERED);
  CHECK_EQ_U(outer->refcount, 0);

  epoch_domain_enter(outer);
  epoch_domain_enter(inner);
  tslab_clear_error();
  epoch_domain_exit(outer);  /* out of order */
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_NOT_INNERMOST);
  CHECK_EQ_U(outer->refcount, 1);
  CHECK(epoch_domain_current() == inner);
  CHECK(slot_accepts(a, outer->epoch_id));

  tslab_clear_error();
  epoch_domain_destroy(inner);  /* entered: refused, still valid */
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_DOMAIN_ENTERED);
  CHECK_EQ_U(inner->refcount, 1);
  CHECK(epoch_domain_current() == inner);

  epoch_domain_exit(inner);
  epoch_domain_exit(outer);
  CHECK(epoch_domain_current() == NULL);
  epoch_domain_destroy(inner);
  epoch_domain_destroy(outer);

  /* A native domain entered inside a seed domain hides it. */
  tslab_t* native = tslab_create(NULL);
  REQUIRE(native != NULL);
  tslab_domain_t* nd = tslab_domain_create(native, NULL);
  REQUIRE(nd != NULL);
  epoch_domain_t* d = epoch_domain_create(a);
  REQUIRE(d != NULL);
  epoch_domain_enter(d);
  CHECK_EQ_U(tslab_domain_enter(nd), TSLAB_OK);
  CHECK(epoch_domain_current() == NULL);
  CHECK(epoch_domain_allocator() == NULL);
  tslab_clear_error();
  epoch_domain_exit(d);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_NOT_INNERMOST);
  CHECK_EQ_U(tslab_domain_exit(nd), TSLAB_OK);
  CHECK(epoch_domain_current() == d);
  epoch_domain_exit(d);
  CHECK(epoch_domain_current() == NULL);
  epoch_domain_destroy(d);
  CHECK_EQ_U(tslab_domain_destroy(nd), TSLAB_OK);
  tslab_destroy(native);
  slab_allocator_free(a);
}

static void test_era_safety(void) {
  SlabAllocator* a = make();
  epoch_domain_t* d = epoch_domain_wrap(a, 3, false);
  REQUIRE(d != NULL);
  uint64_t era = d->epoch_era;
  /* Sixteen advances bring slot 3 to a fresh era: the domain's era is gone
   * and the domain must not reach the new round. */
  for (int i = 0; i < 16; i++) epoch_advance(a);
  SlabEpochStats es;
  slab_stats_epoch(a, 0, 3, &es);
  CHECK(es.epoch_era > era);
  tslab_clear_error();
  epoch_domain_enter(d);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_STALE);
  CHECK_EQ_U(d->refcount, 0);
  CHECK(epoch_domain_current() == NULL);
  CHECK_EQ_U(slab_epoch_get_refcount(a, 3), 0);
  epoch_domain_destroy(d);
  slab_allocator_free(a);
}

typedef struct foreign {
  epoch_domain_t* d;
  int enter, exit, destroy, force_close;
  bool saw_none;
} foreign_t;

static void* foreign_thread(void* arg) {
  foreign_t* f = arg;
  f->saw_none = epoch_domain_current() == NULL;
  tslab_clear_error();
  epoch_domain_enter(f->d);
  f->enter = tslab_last_error();
  tslab_clear_error();
  epoch_domain_exit(f->d);
  f->exit = tslab_last_error();
  tslab_clear_error();
  epoch_domain_force_close(f->d);
  f->force_close = tslab_last_error();
  tslab_clear_error();
  epoch_domain_destroy(f->d);
  f->destroy = tslab_last_error();
  return NULL;
}

static void test_wrong_thread(void) {
  SlabAllocator* a = make();
  epoch_domain_t* d = epoch_domain_create(a);
  REQUIRE(d != NULL);
  epoch_domain_enter(d);
  foreign_t f = {.d = d};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, foreign_thread, &f) == 0);
  REQUIRE(pthread_join(th, NULL) == 0);
  CHECK(f.saw_none);
  CHECK_EQ_U(f.enter, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(f.exit, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(f.force_close, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(f.destroy, TSLAB_ERR_WRONG_THREAD);
  CHECK_EQ_U(d->refcount, 1);
  CHECK(epoch_domain_current() == d);
  CHECK(slot_accepts(a, d->epoch_id));
  epoch_domain_exit(d);
  epoch_domain_destroy(d);
  slab_allocator_free(a);
}

int main(void) {
  test_create_enter_exit();
  test_nested_transaction();
  test_wrap();
  test_force_close_while_entered();
  test_misuse();
  test_era_safety();
  test_wrong_thread();
  TEST_DONE();
}
