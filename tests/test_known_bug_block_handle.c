/* KNOWN BUG (failing; registered disabled in tests/known_bugs.cmake): a
 * stale handle of a block object names, and frees, the object that later
 * takes its place in the same block.
 *
 * tslab.h promises that tslab_handle_get() returns NULL and
 * tslab_free_handle() false for a stale handle, and docs/ARCHITECTURE.md 8
 * that a handle to a freed or reused slot no longer matches. A block holds
 * one handle generation, raised when the block is recycled; but only runs
 * retired to the page heap have their generation base raised. A drained
 * block kept in the thread's hot reserve and taken again by the same thread
 * is formatted with the generation it had, so every stale handle into its
 * last use is valid again for the new object at the same unit. Found by the
 * API fuzzer (tests/fuzz/fuzz_api.c, known defect 1). */
#include "test_util.h"

int main(void) {
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
  CHECK(tslab_handle_get(a, h) == NULL); /* fails: names q (when q == p) */
  CHECK(!tslab_free_handle(a, h));       /* fails: frees q */
  CHECK_EQ_U(tslab_usable_size(a, q), 64); /* fails: q was freed through h */

  /* Within one era: a drained block stops, goes to the hot reserve and is
   * started again at once. */
  tslab_epoch_t e3 = tslab_epoch_advance(a);
  void* full[4];
  tslab_handle_t hs[4];
  for (int i = 0; i < 4; i++) REQUIRE((full[i] = tslab_alloc_handle(a, 4096, e3, &hs[i])) != NULL);
  for (int i = 0; i < 4; i++) CHECK(tslab_free(a, full[i]));
  void* r = tslab_alloc(a, 4096, e3);
  REQUIRE(r != NULL);
  for (int i = 0; i < 4; i++) CHECK(tslab_handle_get(a, hs[i]) == NULL); /* fails for hs[0] */
  CHECK_EQ_U(tslab_usable_size(a, r), 4096);
  CHECK_EQ_U(tslab_check(a, NULL, 0), 0);
  tslab_destroy(a);
  TEST_DONE();
}
