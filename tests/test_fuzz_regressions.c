/* Regression tests for defects the API fuzzer (tests/fuzz/fuzz_api.c)
 * found in the epoch blocks; each test failed before its fix. */
#include "test_util.h"

/* A stale handle of a block object must not name, or free, the object that
 * later takes its place: a drained block kept in the thread's hot reserve
 * and taken again raises its handle generation (docs/ARCHITECTURE.md 8),
 * as a block retired to the page heap does. */
static void test_block_handle_after_reuse(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);

  /* Across eras: the block drains at the close and is the next era's block. */
  tslab_epoch_t e = tslab_epoch_advance(a);
  tslab_handle_t h = 0;
  void* p = tslab_alloc_handle(a, 64, e, &h);
  REQUIRE(p != NULL && h != 0);
  CHECK(tslab_free_handle(a, h));
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_epoch_t e2 = tslab_epoch_advance(a);
  void* q = tslab_alloc(a, 64, e2);
  REQUIRE(q != NULL);
  CHECK(q == p); /* the same unit of the same block: the case that matters */
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK(!tslab_free_handle(a, h));
  CHECK_EQ_U(tslab_usable_size(a, q), 64);

  /* Within one era: a drained block stops, goes to the hot reserve and is
   * started again at once. */
  tslab_epoch_t e3 = tslab_epoch_advance(a);
  void* full[4];
  tslab_handle_t hs[4];
  for (int i = 0; i < 4; i++) REQUIRE((full[i] = tslab_alloc_handle(a, 4096, e3, &hs[i])) != NULL);
  for (int i = 0; i < 4; i++) CHECK(tslab_free(a, full[i]));
  void* r = tslab_alloc(a, 4096, e3);
  REQUIRE(r != NULL);
  for (int i = 0; i < 4; i++) CHECK(tslab_handle_get(a, hs[i]) == NULL);
  CHECK_EQ_U(tslab_usable_size(a, r), 4096);
  CHECK_EQ_U(tslab_check(a, NULL, 0), 0);
  tslab_destroy(a);
}

static uint64_t era_live_bytes(tslab_t* a, tslab_epoch_t e, uint64_t* objects) {
  tslab_stats_epoch_t s;
  REQUIRE(tslab_stats_epoch(a, e, &s) == TSLAB_OK);
  *objects = s.live_objects;
  return s.live_bytes;
}

/* An open era's live bytes count each block object once, and not after
 * its free (they were counted twice: bumped bytes plus the blocks' live
 * bytes). */
static void test_open_era_live_bytes(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_advance(a);
  void* p = tslab_alloc(a, 3872, e); /* block objects: sizes rounded to 16 */
  void* q = tslab_alloc(a, 100, e);
  REQUIRE(p != NULL && q != NULL);
  CHECK_EQ_U(tslab_usable_size(a, p) + tslab_usable_size(a, q), 3872 + 112);
  uint64_t objects;
  CHECK_EQ_U(era_live_bytes(a, e, &objects), 3872 + 112);
  CHECK_EQ_U(objects, 2);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_bytes, 3872 + 112);
  CHECK(tslab_free(a, p));
  CHECK(tslab_free(a, q));
  CHECK_EQ_U(era_live_bytes(a, e, &objects), 0);
  CHECK_EQ_U(objects, 0);
  /* Closed, the era's figures stay right. */
  void* r = tslab_alloc(a, 500, e);
  REQUIRE(r != NULL);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  CHECK_EQ_U(era_live_bytes(a, e, &objects), 512);
  CHECK_EQ_U(objects, 1);
  CHECK(tslab_free(a, r));
  tslab_destroy(a);
}

static void check_era_holds_nothing(tslab_t* a, tslab_epoch_t e) {
  tslab_stats_epoch_t s;
  REQUIRE(tslab_stats_epoch(a, e, &s) == TSLAB_OK);
  CHECK_EQ_U(s.live_objects, 0);
  CHECK_EQ_U(s.slabs, 0);
  CHECK_EQ_U(s.rss_estimate_bytes, 0);
}

/* A free-all of an open era leaves it no run: the blocks it detached with
 * objects count as the era's runs until they are retired or kept hot (they
 * were uncounted without having been counted, wrapping below zero). */
static void test_free_all_open_era_runs(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.thread_reserve_max = 0; /* no hot reserve: the ended blocks are retired */
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_advance(a);
  REQUIRE(tslab_alloc(a, 100, e) != NULL);
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  check_era_holds_nothing(a, e);

  /* With the default reserve: one block is kept hot, the rest retired. */
  tslab_t* b = tslab_create(NULL);
  REQUIRE(b != NULL);
  tslab_epoch_t f = tslab_epoch_advance(b);
  for (int i = 0; i < 200; i++) REQUIRE(tslab_alloc(b, 4000, f) != NULL); /* 50 blocks */
  CHECK_EQ_U(tslab_epoch_free_all(b, f), TSLAB_OK);
  check_era_holds_nothing(b, f);

  /* A free-all of a closed era: the close counted its blocks. */
  tslab_epoch_t g = tslab_epoch_advance(a);
  REQUIRE(tslab_alloc(a, 100, g) != NULL);
  CHECK_EQ_U(tslab_epoch_close(a, g), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_free_all(a, g), TSLAB_OK);
  check_era_holds_nothing(a, g);
  CHECK_EQ_U(tslab_check(a, NULL, 0), 0);
  CHECK_EQ_U(tslab_check(b, NULL, 0), 0);
  tslab_destroy(a);
  tslab_destroy(b);
}

int main(void) {
  test_block_handle_after_reuse();
  test_open_era_live_bytes();
  test_free_all_open_era_runs();
  TEST_DONE();
}
