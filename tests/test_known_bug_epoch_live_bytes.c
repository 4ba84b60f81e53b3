/* KNOWN BUG (failing; registered disabled in tests/known_bugs.cmake): the
 * live bytes tslab_stats_epoch() reports for an open era count the bytes of
 * its block objects twice, and keep counting them after they are freed.
 *
 * src/stats.c fill_epoch adds the era's allocated minus freed bytes, whose
 * allocated bytes (tslab_slot_blocks_read) already include every byte
 * bumped in the thread's current and stopped blocks, and then the live bytes
 * of those same blocks read off their bitmaps; bytes freed in a block that
 * has not drained are not subtracted until it does. A closed era is right
 * (the close settles its blocks), and so is the instance's live_bytes.
 * Found by the API fuzzer (tests/fuzz/fuzz_api.c, known defect 2). */
#include "test_util.h"

static uint64_t era_live_bytes(tslab_t* a, tslab_epoch_t e, uint64_t* objects) {
  tslab_stats_epoch_t s;
  REQUIRE(tslab_stats_epoch(a, e, &s) == TSLAB_OK);
  *objects = s.live_objects;
  return s.live_bytes;
}

int main(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_advance(a);
  void* p = tslab_alloc(a, 3872, e); /* block objects: sizes rounded to 16 */
  void* q = tslab_alloc(a, 100, e);
  REQUIRE(p != NULL && q != NULL);
  CHECK_EQ_U(tslab_usable_size(a, p) + tslab_usable_size(a, q), 3872 + 112);
  uint64_t objects;
  CHECK_EQ_U(era_live_bytes(a, e, &objects), 3872 + 112); /* fails: 7968 */
  CHECK_EQ_U(objects, 2);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_bytes, 3872 + 112);
  CHECK(tslab_free(a, p));
  CHECK(tslab_free(a, q));
  CHECK_EQ_U(era_live_bytes(a, e, &objects), 0); /* fails: 3984 */
  CHECK_EQ_U(objects, 0);
  /* Closed, the era's figures are right. */
  void* r = tslab_alloc(a, 500, e);
  REQUIRE(r != NULL);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  CHECK_EQ_U(era_live_bytes(a, e, &objects), 512);
  CHECK_EQ_U(objects, 1);
  CHECK(tslab_free(a, r));
  tslab_destroy(a);
  TEST_DONE();
}
