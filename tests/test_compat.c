/* The seed-compatible allocator, epoch and statistics API (slab_alloc.h,
 * slab_stats.h): seed semantics, the documented extensions, and bad input. */
#include "slab_alloc.h"
#include "slab_stats.h"
#include "test_util.h"

static SlabAllocator* make(void) {
  SlabAllocator* a = slab_allocator_create();
  REQUIRE(a != NULL);
  return a;
}

static void test_create_all_slots_open(void) {
  SlabAllocator* a = make();
  CHECK_EQ_U(epoch_current(a), 0);
  void* p[SLAB_EPOCH_COUNT];
  for (EpochId e = 0; e < SLAB_EPOCH_COUNT; e++) {
    p[e] = slab_malloc_epoch(a, 64, e);
    CHECK(p[e] != NULL);
  }
  SlabGlobalStats g;
  slab_stats_global(a, &g);
  CHECK_EQ_U(g.version, SLAB_STATS_VERSION);
  CHECK_EQ_U(g.active_epoch_count, SLAB_EPOCH_COUNT);
  CHECK_EQ_U(g.closing_epoch_count, 0);
  CHECK_EQ_U(g.current_epoch, 0);
  /* Each slot is its own era: no two objects of different slots share one. */
  for (EpochId e = 0; e < SLAB_EPOCH_COUNT; e++) {
    SlabEpochStats es;
    slab_stats_epoch(a, 0, e, &es);
    CHECK_EQ_U(es.epoch_id, e);
    CHECK_EQ_U(es.epoch_era % SLAB_EPOCH_COUNT, e);
    CHECK_EQ_U(es.state, EPOCH_ACTIVE);
    CHECK_EQ_U(es.alloc_count, 1);
  }
  for (EpochId e = 0; e < SLAB_EPOCH_COUNT; e++) slab_free(a, p[e]);
  slab_allocator_free(a);
  slab_allocator_free(NULL);
}

static void test_handles(void) {
  SlabAllocator* a = make();
  SlabAllocator* b = make();
  SlabHandle h = 0;
  void* p = alloc_obj_epoch(a, 128, 0, &h);
  REQUIRE(p != NULL);
  CHECK(h != 0);
  memset(p, 0x5a, 128);
  CHECK(free_obj(a, h));
  CHECK(!free_obj(a, h));   /* double free: stale */
  CHECK(!free_obj(a, 0));   /* never issued */

  SlabHandle h2 = 0;
  REQUIRE(alloc_obj_epoch(a, 96, 3, &h2) != NULL);
  CHECK(!free_obj(a, h2 ^ ((SlabHandle)1 << 40)));  /* forged */
  CHECK(!free_obj(b, h2));                          /* another allocator's */
  CHECK(!free_obj(NULL, h2));
  CHECK(free_obj(a, h2));

  /* Sizes: up to the seed's 768 and beyond; 0 and bad slots fail. */
  SlabHandle hs[3];
  uint32_t sizes[3] = {1, 768, 100000};
  for (int i = 0; i < 3; i++) {
    void* q = alloc_obj_epoch(a, sizes[i], 1, &hs[i]);
    CHECK(q != NULL && hs[i] != 0);
    if (q != NULL) memset(q, 1, sizes[i]);
  }
  for (int i = 0; i < 3; i++) CHECK(free_obj(a, hs[i]));

  h = 42;
  tslab_clear_error();
  CHECK(alloc_obj_epoch(a, 0, 1, &h) == NULL);
  CHECK_EQ_U(h, 0);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_SIZE);
  h = 42;
  tslab_clear_error();
  CHECK(alloc_obj_epoch(a, 64, SLAB_EPOCH_COUNT, &h) == NULL);
  CHECK_EQ_U(h, 0);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  tslab_clear_error();
  CHECK(alloc_obj_epoch(NULL, 64, 0, &h) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  /* Without an out-handle the object is still allocated and freeable. */
  void* nohandle = alloc_obj_epoch(a, 64, 0, NULL);
  REQUIRE(nohandle != NULL);
  slab_free(a, nohandle);
  slab_allocator_free(b);
  slab_allocator_free(a);
}

static void test_malloc_style(void) {
  SlabAllocator* a = make();
  void* small = slab_malloc_epoch(a, 1, 0);
  void* seedmax = slab_malloc_epoch(a, 760, 0);
  void* big = slab_malloc_epoch(a, 64 * 1024, 0);
  REQUIRE(small != NULL && seedmax != NULL && big != NULL);
  memset(seedmax, 7, 760);
  memset(big, 7, 64 * 1024);
  SlabEpochStats es;
  slab_stats_epoch(a, 0, 0, &es);
  CHECK_EQ_U(es.alloc_count, 3);

  tslab_clear_error();
  slab_free(a, NULL);  /* no-op */
  CHECK_EQ_U(tslab_last_error(), TSLAB_OK);
  slab_free(a, small);
  slab_free(a, seedmax);
  slab_free(a, big);
  slab_stats_epoch(a, 0, 0, &es);
  CHECK_EQ_U(es.alloc_count, 0);

  /* Bad frees are refused with a reason and change nothing. */
  int local;
  tslab_clear_error();
  slab_free(a, &local);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_POINTER);
  tslab_clear_error();
  slab_free(a, small);  /* double free */
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_POINTER);
  tslab_clear_error();
  slab_free(NULL, &local);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);

  tslab_clear_error();
  CHECK(slab_malloc_epoch(a, 0, 0) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_SIZE);
  tslab_clear_error();
  CHECK(slab_malloc_epoch(a, 64, 99) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  tslab_clear_error();
  CHECK(slab_malloc_epoch(NULL, 64, 0) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  slab_allocator_free(a);
}

static void test_advance(void) {
  SlabAllocator* a = make();
  void* old = slab_malloc_epoch(a, 128, 0);
  REQUIRE(old != NULL);
  memset(old, 0x11, 128);
  epoch_advance(a);
  CHECK_EQ_U(epoch_current(a), 1);
  /* The previous slot is CLOSING: it rejects allocations, its objects live. */
  tslab_clear_error();
  CHECK(slab_malloc_epoch(a, 128, 0) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  SlabEpochStats es;
  slab_stats_epoch(a, 0, 0, &es);
  CHECK_EQ_U(es.state, EPOCH_CLOSING);
  CHECK_EQ_U(es.alloc_count, 1);
  CHECK_EQ_U(((unsigned char*)old)[127], 0x11);
  void* cur = slab_malloc_epoch(a, 128, 1);
  CHECK(cur != NULL);

  /* A slot the advance reaches again gets a fresh era. An object allocated
   * there before stays in its old era (force-closed, not mixed with the new
   * round), stays valid and frees normally. */
  void* early = slab_malloc_epoch(a, 64, 5);
  REQUIRE(early != NULL);
  SlabEpochStats before5;
  slab_stats_epoch(a, 0, 5, &before5);
  for (int i = 0; i < 4; i++) epoch_advance(a);
  CHECK_EQ_U(epoch_current(a), 5);
  SlabEpochStats after5;
  slab_stats_epoch(a, 0, 5, &after5);
  CHECK(after5.epoch_era > before5.epoch_era);
  CHECK_EQ_U(after5.state, EPOCH_ACTIVE);
  CHECK_EQ_U(after5.alloc_count, 0);
  void* fresh = slab_malloc_epoch(a, 64, 5);
  CHECK(fresh != NULL);

  /* Wrapping the whole ring reopens slot 0. */
  for (int i = 0; i < 11; i++) epoch_advance(a);
  CHECK_EQ_U(epoch_current(a), 0);
  void* again = slab_malloc_epoch(a, 128, 0);
  CHECK(again != NULL);
  SlabGlobalStats g;
  slab_stats_global(a, &g);
  CHECK_EQ_U(g.current_epoch, 0);
  CHECK_EQ_U(g.active_epoch_count + g.closing_epoch_count, SLAB_EPOCH_COUNT);

  slab_free(a, old);
  slab_free(a, cur);
  slab_free(a, early);
  slab_free(a, fresh);
  slab_free(a, again);
  epoch_advance(NULL);
  CHECK_EQ_U(epoch_current(NULL), 0);
  slab_allocator_free(a);
}

static void test_close_reclaims(void) {
  SlabAllocator* a = make();
  enum { N = 20000 };
  static void* objs[N];
  for (int i = 0; i < N; i++) {
    objs[i] = slab_malloc_epoch(a, 256, 7);
    REQUIRE(objs[i] != NULL);
    memset(objs[i], 1, 256);
  }
  SlabEpochStats es;
  slab_stats_epoch(a, 0, 7, &es);
  CHECK(es.estimated_rss_bytes >= (uint64_t)N * 256);
  /* Measured before the frees: the pool's policy may release some of the
   * emptied slabs before the close does. */
  SlabGlobalStats before;
  slab_stats_global(a, &before);
  for (int i = 0; i < N; i++) slab_free(a, objs[i]);
  epoch_close(a, 7);
  slab_stats_epoch(a, 0, 7, &es);
  CHECK_EQ_U(es.state, EPOCH_CLOSING);
  CHECK_EQ_U(es.estimated_rss_bytes, 0);
  CHECK_EQ_U(es.reclaimable_slab_count, 0);
  CHECK(es.rss_before_close > 0);
  CHECK(es.rss_after_close > 0);
  SlabGlobalStats after;
  slab_stats_global(a, &after);
  CHECK(after.total_madvise_calls > before.total_madvise_calls);
  CHECK(after.total_madvise_bytes >= before.total_madvise_bytes + (uint64_t)N * 256);
  CHECK(after.estimated_slab_rss_bytes < before.estimated_slab_rss_bytes);
  CHECK_EQ_U(after.closing_epoch_count, 1);

  /* Closed slot rejects; the others do not. */
  tslab_clear_error();
  CHECK(slab_malloc_epoch(a, 256, 7) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  slab_stats_global(a, &after);
  CHECK_EQ_U(after.total_slow_epoch_closed, before.total_slow_epoch_closed + 1);
  void* other = slab_malloc_epoch(a, 256, 8);
  CHECK(other != NULL);
  slab_free(a, other);

  tslab_clear_error();
  epoch_close(a, SLAB_EPOCH_COUNT);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  tslab_clear_error();
  epoch_close(NULL, 0);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  slab_allocator_free(a);
}

static void test_labels_and_refcounts(void) {
  SlabAllocator* a = make();
  slab_epoch_set_label(a, 2, "request:abc123");
  SlabEpochStats es;
  slab_stats_epoch(a, 0, 2, &es);
  CHECK(strcmp(es.label, "request:abc123") == 0);
  slab_epoch_set_label(a, 2, NULL);
  slab_stats_epoch(a, 0, 2, &es);
  CHECK_EQ_U(es.label[0], '\0');
  tslab_clear_error();
  slab_epoch_set_label(a, 16, "x");
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);

  CHECK_EQ_U(slab_epoch_get_refcount(a, 4), 0);
  slab_epoch_inc_refcount(a, 4);
  slab_epoch_inc_refcount(a, 4);
  CHECK_EQ_U(slab_epoch_get_refcount(a, 4), 2);
  slab_stats_epoch(a, 0, 4, &es);
  CHECK_EQ_U(es.refcount, 2);
  CHECK_EQ_U(slab_epoch_get_refcount(a, 5), 0);
  slab_epoch_dec_refcount(a, 4);
  slab_epoch_dec_refcount(a, 4);
  CHECK_EQ_U(slab_epoch_get_refcount(a, 4), 0);
  tslab_clear_error();
  slab_epoch_dec_refcount(a, 4);  /* below zero: refused */
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_U(slab_epoch_get_refcount(a, 4), 0);
  tslab_clear_error();
  slab_epoch_inc_refcount(a, 16);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  tslab_clear_error();
  slab_epoch_dec_refcount(NULL, 0);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_U(slab_epoch_get_refcount(a, 16), 0);
  CHECK_EQ_U(slab_epoch_get_refcount(NULL, 0), 0);
  slab_allocator_free(a);
}

static void test_class_stats_and_counters(void) {
  SlabAllocator* a = make();
  void* p[110];
  for (int i = 0; i < 100; i++) REQUIRE((p[i] = slab_malloc_epoch(a, 128, 0)) != NULL);
  for (int i = 100; i < 110; i++) REQUIRE((p[i] = slab_malloc_epoch(a, 100, 0)) != NULL);
  void* other = slab_malloc_epoch(a, 700, 0);  /* seed class 7 */
  REQUIRE(other != NULL);
  for (int i = 0; i < 50; i++) slab_free(a, p[i]);

  SlabClassStats cs;
  slab_stats_class(a, 2, &cs);
  CHECK_EQ_U(cs.version, SLAB_STATS_VERSION);
  CHECK_EQ_U(cs.class_index, 2);
  CHECK_EQ_U(cs.object_size, 128);
  CHECK_EQ_U(cs.bitmap_alloc_attempts, 110);
  CHECK_EQ_U(cs.bitmap_free_attempts, 50);
  CHECK_EQ_U(cs.live_objects, 60);
  CHECK(cs.net_slabs >= 1);
  CHECK(cs.estimated_rss_bytes >= 60 * 128);
  CHECK(cs.slow_path_hits >= 1);
  CHECK_EQ_U(cs.lock_contended, 0);

  SlabClassStats c7;
  slab_stats_class(a, 7, &c7);
  CHECK_EQ_U(c7.object_size, 768);
  CHECK_EQ_U(c7.live_objects, 1);
  SlabClassStats c0;
  slab_stats_class(a, 0, &c0);
  CHECK_EQ_U(c0.object_size, 64);
  CHECK_EQ_U(c0.bitmap_alloc_attempts, 0);

  PerfCounters pc;
  get_perf_counters(a, 2, &pc);
  CHECK_EQ_U(pc.slow_path_hits, cs.slow_path_hits);
  CHECK_EQ_U(pc.new_slab_count, 0);
  CHECK_EQ_U(pc.empty_slab_overflowed, 0);
  get_perf_counters(a, 0, &pc);
  CHECK_EQ_U(pc.slow_path_hits, 0);

  /* Out-of-range classes and NULLs: zeroed output and a reason. */
  memset(&pc, 0xff, sizeof pc);
  tslab_clear_error();
  get_perf_counters(a, 8, &pc);
  CHECK_EQ_U(pc.slow_path_hits, 0);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  memset(&cs, 0xff, sizeof cs);
  slab_stats_class(a, 8, &cs);
  CHECK_EQ_U(cs.version, 0);
  CHECK_EQ_U(cs.bitmap_alloc_attempts, 0);
  memset(&pc, 0xff, sizeof pc);
  tslab_clear_error();
  get_perf_counters(NULL, 2, &pc);
  CHECK_EQ_U(pc.slow_path_hits, 0);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  get_perf_counters(a, 2, NULL);
  slab_stats_class(a, 2, NULL);

  SlabGlobalStats g;
  slab_stats_global(a, &g);
  CHECK_EQ_U(g.total_bitmap_alloc_attempts, 111);
  CHECK_EQ_U(g.total_bitmap_free_attempts, 50);
  CHECK(g.total_slabs_allocated >= 2);
  CHECK(g.net_slabs >= 2);
  CHECK(g.rss_bytes_current > 0);
  CHECK(g.estimated_slab_rss_bytes > 0);
  CHECK(g.total_slow_path_hits >= 2);
  CHECK_EQ_U(g.total_slow_cache_miss, g.total_slabs_allocated - g.total_slabs_recycled);
  memset(&g, 0xff, sizeof g);
  slab_stats_global(NULL, &g);
  CHECK_EQ_U(g.version, 0);
  CHECK_EQ_U(g.net_slabs, 0);
  slab_stats_global(a, NULL);

  SlabEpochStats es;
  slab_stats_epoch(a, 2, 0, &es);
  CHECK_EQ_U(es.class_index, 2);
  CHECK_EQ_U(es.object_size, 128);
  CHECK_EQ_U(es.alloc_count, 61);
  CHECK(es.partial_slab_count >= 2);
  CHECK(es.open_since_ns > 0 && es.open_since_ns <= now_ns());
  memset(&es, 0xff, sizeof es);
  slab_stats_epoch(a, 8, 0, &es);
  CHECK_EQ_U(es.version, 0);
  memset(&es, 0xff, sizeof es);
  slab_stats_epoch(a, 0, 16, &es);
  CHECK_EQ_U(es.version, 0);
  CHECK_EQ_U(es.alloc_count, 0);
  slab_stats_epoch(a, 0, 0, NULL);

  for (int i = 50; i < 110; i++) slab_free(a, p[i]);
  slab_free(a, other);
  slab_allocator_free(a);
}

static void test_utilities(void) {
  uint32_t n64 = slab_object_count(64);
  uint32_t n768 = slab_object_count(768);
  CHECK(n64 > 0);
  CHECK(n768 > 0);
  CHECK(n64 > n768);
  CHECK_EQ_U(slab_object_count(0), 0);
  CHECK_EQ_U(slab_object_count(UINT32_MAX), 0);
  CHECK(read_rss_bytes_linux() > 0);
  uint64_t t0 = now_ns();
  uint64_t t1 = now_ns();
  CHECK(t0 > 0);
  CHECK(t1 >= t0);
}

int main(void) {
  test_create_all_slots_open();
  test_handles();
  test_malloc_style();
  test_advance();
  test_close_reclaims();
  test_labels_and_refcounts();
  test_class_stats_and_counters();
  test_utilities();
  TEST_DONE();
}
