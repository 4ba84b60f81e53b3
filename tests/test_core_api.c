/* Contract line 4 and the allocation API: every size range, calloc, realloc,
 * aligned allocation, usable size, handles, and every kind of bad input,
 * each returning NULL/false with its reason and leaving the allocator
 * consistent. */
#include <pthread.h>
#include <stdint.h>

#include "internal.h" /* TSLAB_STACK_MAX */
#include "test_util.h"

static tslab_t* make(size_t reserve) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = reserve;
  c.max_alloc_size = reserve / 4;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

static void test_sizes(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_epoch_t e = tslab_epoch_current(a);
  CHECK_EQ_U(e, 1);
  static const size_t sizes[] = {1, 7, 8, 9, 15, 16, 17, 24, 63, 64, 65, 100, 128, 129, 255, 256, 1000,
                                 1024, 4095, 4096, 8191, 16384, 32767, 32768, 32769, 65536, 100000,
                                 1 << 20, (1 << 22) + 3};
  enum { N = sizeof sizes / sizeof sizes[0] };
  unsigned char* p[N];
  for (int i = 0; i < N; i++) {
    p[i] = tslab_alloc(a, sizes[i], e);
    REQUIRE(p[i] != NULL);
    size_t us = tslab_usable_size(a, p[i]);
    CHECK(us >= sizes[i]);
    if (sizes[i] >= 64 && sizes[i] <= 32768) CHECK(us - sizes[i] < us / 8); /* rounding waste < 12.5% */
    CHECK(((uintptr_t)p[i] & 7) == 0);
    if (us % 16 == 0) CHECK(((uintptr_t)p[i] & 15) == 0);
    CHECK_EQ_U(tslab_epoch_of(a, p[i]), e);
    memset(p[i], (int)(i + 1), sizes[i]);
  }
  for (int i = 0; i < N; i++) {
    for (size_t j = 0; j < sizes[i]; j += 97) CHECK(p[i][j] == (unsigned char)(i + 1));
    CHECK(tslab_free(a, p[i]));
    CHECK_EQ_U(tslab_usable_size(a, p[i]), 0);
  }
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* Every size up to the largest class gets the smallest class that holds it
 * (the usable size: the class size, in the first epoch, which has no
 * blocks). The classes step by 8 up to 64 bytes and above by an eighth of
 * the power of two at most, with one class a sixteenth above each power of
 * two from 256 B to 16 KiB, so that a power plus a small header (1,032
 * bytes: 1,088) wastes under 6.25%. */
static void test_class_boundaries(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_epoch_t e = tslab_epoch_current(a);
  uint32_t n = tslab_class_count(a);
  size_t classes[128];
  REQUIRE(n <= 128);
  for (uint32_t c = 0; c < n; c++) {
    tslab_stats_class_t cs;
    REQUIRE(tslab_stats_class(a, c, &cs) == TSLAB_OK);
    classes[c] = cs.object_size;
    CHECK(c == 0 || classes[c] > classes[c - 1]);
    size_t power = classes[c] <= 64 ? 8 : (size_t)1 << (63 - __builtin_clzll(classes[c] - 1));
    CHECK(classes[c] <= 64 ? classes[c] % 8 == 0 : (classes[c] - power) % (power / 16) == 0);
  }
  CHECK_EQ_U(classes[n - 1], tslab_small_max());
  for (size_t power = 256; power <= 16384; power *= 2) {
    size_t want = power + power / 16;
    bool found = false;
    for (uint32_t c = 0; c < n; c++) found |= classes[c] == want;
    CHECK(found);
  }
  uint32_t c = 0;
  for (size_t size = 1; size <= tslab_small_max(); size++) {
    while (classes[c] < size) c++;
    void* p = tslab_alloc(a, size, e);
    REQUIRE(p != NULL);
    size_t us = tslab_usable_size(a, p);
    if (us != classes[c] || (size > 64 && us - size >= us / 8)) {
      fprintf(stderr, "size %zu: usable %zu, class %zu\n", size, us, classes[c]);
      CHECK(false);
      break;
    }
    CHECK(tslab_free(a, p));
  }
  void* p = tslab_alloc(a, 1032, e);
  CHECK_EQ_U(tslab_usable_size(a, p), 1088);
  CHECK(tslab_free(a, p));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* The slot index of every offset of every class's slab, and of a block's
 * units: the offset divided by the size when it is a multiple inside the
 * slots (capacity * size bytes), UINT32_MAX for every other pointer: an
 * interior one, one in a slab's tail past its last slot (a size that does
 * not divide the slab's length leaves one), one beyond the run or below its
 * start (a stale map entry can lead a free to any of those). */
static uint64_t slot_index_wrong(uint32_t c, uint32_t size, uint32_t capacity, uint64_t recip, size_t bytes) {
  const uint8_t* base = (const uint8_t*)(uintptr_t)((size_t)1 << 40); /* only offsets matter */
  uint32_t slot_bytes = capacity * size;
  uint64_t wrong = 0;
  for (int64_t off = -(int64_t)bytes; off < 4 * (int64_t)bytes + (1 << 20); off += off < 2 * (int64_t)bytes ? 1 : 97) {
    uint32_t want = off >= 0 && off < slot_bytes && off % size == 0 ? (uint32_t)(off / size) : UINT32_MAX;
    uint32_t got = tslab_slot_index(base, recip, slot_bytes, base + off);
    if (got != want && wrong++ < 5)
      fprintf(stderr, "class %u (size %u), offset %lld: slot %u, want %u\n", c, size, (long long)off, got, want);
  }
  return wrong;
}

static void test_slot_index_exact(void) {
  tslab_t* a = make((size_t)1 << 30); /* the class table is built */
  uint64_t wrong = 0;
  bool tail = false;
  for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
    const tslab_class_info_t* ci = &tslab_classes[c];
    size_t bytes = (size_t)ci->granules << TSLAB_GRANULE_SHIFT;
    tail |= (size_t)ci->capacity * ci->size < bytes;
    wrong += slot_index_wrong(c, ci->size, ci->capacity, ci->recip, bytes);
  }
  /* Blocks, small and large. */
  for (size_t bytes = TSLAB_BLOCK_BYTES_SMALL; bytes <= TSLAB_BLOCK_BYTES_LARGE; bytes *= 4)
    wrong += slot_index_wrong(TSLAB_CLASSES, 1u << TSLAB_UNIT_SHIFT, (uint32_t)(bytes >> TSLAB_UNIT_SHIFT),
                              (1ull << 48) >> TSLAB_UNIT_SHIFT, bytes);
  CHECK(tail); /* the test covers tails */
  CHECK_EQ_U(wrong, 0);
  tslab_destroy(a);
}

/* Pointers into a run that start no slot of it, or that reach a run only
 * through a stale entry of the run map (section 1 of docs/ARCHITECTURE.md:
 * a free run keeps only its end granules mapped, a merged run's descriptor
 * waits in limbo and is formatted again elsewhere): every query and free
 * refuses them, from the owner and from another thread. A review found each
 * of these accepted by a version whose slot index had no bound. */
typedef struct {
  tslab_t* a;
  void* p;
  size_t usable;
  uint64_t era;
  bool freed;
} foreign_query_job;

static void* foreign_query(void* arg) {
  foreign_query_job* j = arg;
  j->usable = tslab_usable_size(j->a, j->p);
  j->era = tslab_epoch_of(j->a, j->p);
  j->freed = tslab_free(j->a, j->p);
  return NULL;
}

static void test_pointers_outside_slots(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_epoch_t e = tslab_epoch_current(a); /* class slabs, no blocks */
  /* A slab's tail: 682 slots of 24 bytes end 16 bytes before the granule's
   * end, where the next run begins. */
  uint8_t* first = tslab_alloc(a, 24, e);
  REQUIRE(first != NULL);
  uint8_t* tail = first + 682 * 24;
  REQUIRE(tslab_alloc(a, 512, e) != NULL);
  CHECK_EQ_U(tslab_usable_size(a, tail), 0);
  CHECK(!tslab_free(a, tail));
  for (int i = 0; i < 700; i++) CHECK(tslab_alloc(a, 24, e) != tail);
  /* The same from another thread, and a realloc: 60 slots of 1,088 bytes
   * in four granules leave 256 bytes. */
  uint8_t* big = tslab_alloc(a, 1088, e);
  REQUIRE(big != NULL);
  foreign_query_job j = {a, big + 60 * 1088, 1, 1, true};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, foreign_query, &j) == 0);
  pthread_join(t, NULL);
  CHECK_EQ_U(j.usable, 0);
  CHECK_EQ_U(j.era, 0);
  CHECK(!j.freed);
  CHECK(tslab_realloc(a, big + 60 * 1088, 1000) == NULL);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);

  /* A stale map entry of a free run: two slabs of four granules; the
   * first retires, and a one-granule slab takes its front granule with its
   * descriptor, whose other three granules stay mapped to it. */
  a = make((size_t)1 << 30);
  e = tslab_epoch_current(a);
  void* p[64];
  for (int i = 0; i < 64; i++) REQUIRE((p[i] = tslab_alloc(a, 2048, e)) != NULL);
  uint8_t* s1 = p[0];
  for (int i = 0; i < 32; i++) CHECK(tslab_free(a, p[i]));
  REQUIRE(tslab_alloc(a, 64, e) != NULL);
  for (int i = 0; i < 32; i++) REQUIRE(tslab_alloc(a, 4096, e) != NULL);
  int accepted = 0;
  for (size_t off = 32768; off < 49152; off += 64)
    accepted += tslab_usable_size(a, s1 + off) != 0 || tslab_free(a, s1 + off);
  CHECK_EQ_U(accepted, 0);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);

  /* A descriptor merged away and formatted again: slabs A and B of 1 KiB
   * objects release at once (eager policy) and merge, A's descriptor waits
   * in limbo with granule 1 still mapped to it and then serves a slab of
   * 16-byte slots further up, while a span takes granules 0-3. The span's
   * interior, reached through granule 1's entry, lies below that slab. */
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 30;
  c.max_alloc_size = c.reserve_bytes / 4;
  c.release_policy = TSLAB_RELEASE_EAGER;
  a = tslab_create(&c);
  REQUIRE(a != NULL);
  e = tslab_epoch_current(a);
  static void* q[1024];
  for (int i = 0; i < 96; i++) REQUIRE((q[i] = tslab_alloc(a, 1024, e)) != NULL); /* A, B, C: 2 granules each */
  REQUIRE(tslab_alloc(a, 59 * 16384, e) != NULL);
  for (int i = 0; i < 64; i++) CHECK(tslab_free(a, q[i]));
  uint8_t* span = tslab_alloc(a, 4 * 16384, e);
  REQUIRE(span != NULL);
  for (int i = 0; i < 1024; i++) REQUIRE((q[i] = tslab_alloc(a, 16, e)) != NULL);
  uint8_t* interior = span + 16384 + 5 * 16;
  CHECK_EQ_U(tslab_usable_size(a, interior), 0);
  CHECK(!tslab_free(a, interior));
  CHECK_EQ_U(tslab_usable_size(a, q[5]), 16);
  void* again = tslab_alloc(a, 16, e);
  CHECK(again != q[5] && (again < (void*)span || again >= (void*)(span + 4 * 16384)));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_calloc_realloc_aligned(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_epoch_t e = tslab_epoch_current(a);
  /* calloc zeroes, even memory that was dirty before. */
  unsigned char* d = tslab_alloc(a, 4000, e);
  memset(d, 0xAB, 4000);
  CHECK(tslab_free(a, d));
  unsigned char* z = tslab_calloc(a, 1000, 4, e);
  REQUIRE(z != NULL);
  for (int i = 0; i < 4000; i++) CHECK(z[i] == 0);
  CHECK(tslab_calloc(a, SIZE_MAX / 2, 4, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_SIZE);
  /* Spans too: one the heap keeps resident after its free (it skips no
   * zeroing), one it released (already zero: calloc writes nothing), one
   * from memory never used. */
  static const size_t span_sizes[] = {100000, 3 << 20, 5 << 20};
  for (size_t k = 0; k < sizeof span_sizes / sizeof span_sizes[0]; k++) {
    size_t n = span_sizes[k];
    unsigned char* big = tslab_alloc(a, n, e);
    REQUIRE(big != NULL);
    memset(big, 0xCD, n);
    CHECK(tslab_free(a, big));
    for (int round = 0; round < 2; round++) {
      unsigned char* zz = tslab_calloc(a, n, 1, e);
      REQUIRE(zz != NULL);
      size_t nonzero = 0;
      for (size_t i = 0; i < n; i++) nonzero += zz[i] != 0;
      CHECK_EQ_U(nonzero, 0);
      memset(zz, 0xEF, n);
      CHECK(tslab_free(a, zz));
    }
  }

  /* realloc keeps contents and the epoch, moves between classes and spans. */
  tslab_epoch_t e2 = tslab_epoch_advance(a);
  char* r = tslab_alloc(a, 10, e);
  memcpy(r, "abcdefghi", 10);
  r = tslab_realloc(a, r, 5000);
  REQUIRE(r != NULL);
  CHECK(strcmp(r, "abcdefghi") == 0);
  CHECK_EQ_U(tslab_epoch_of(a, r), e);
  r = tslab_realloc(a, r, 200000);
  REQUIRE(r != NULL);
  CHECK(strcmp(r, "abcdefghi") == 0);
  r = tslab_realloc(a, r, 16);
  REQUIRE(r != NULL);
  CHECK(strcmp(r, "abcdefghi") == 0);
  CHECK_EQ_U(tslab_epoch_of(a, r), e);
  /* Shrinking within the class stays in place. */
  void* same = tslab_realloc(a, r, 12);
  CHECK(same == r);
  CHECK(tslab_realloc(a, r, 0) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_SIZE);
  CHECK(tslab_realloc(a, NULL, 10) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_POINTER);
  /* A buffer grown in 4 KiB steps to 16 MiB moves a logarithmic number of
   * times (found by review: once per step past 32 KiB, a quadratic number
   * of bytes copied), its contents kept. */
  {
    size_t n = 4096, moves = 0;
    unsigned char* g = tslab_alloc(a, n, e);
    REQUIRE(g != NULL);
    memset(g, 0x3c, n);
    for (; n < ((size_t)16 << 20); n += 4096) {
      unsigned char* h = tslab_realloc(a, g, n + 4096);
      REQUIRE(h != NULL);
      moves += h != g;
      CHECK(h[0] == 0x3c && h[n - 1] == 0x3c);
      memset(h + n, 0x3c, 4096);
      g = h;
    }
    CHECK(moves <= 40);
    CHECK(tslab_usable_size(a, g) >= n);
    CHECK(tslab_free(a, g));
  }
  /* A move out of a closed epoch fails and leaves p alone. */
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  CHECK(tslab_realloc(a, r, 4000) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  CHECK(strcmp(r, "abcdefghi") == 0);
  CHECK(tslab_free(a, r));

  static const size_t aligns[] = {1, 8, 16, 32, 64, 256, 4096, 16384, 65536, 1 << 20};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    for (size_t size = 1; size < 300000; size = size * 3 + 5) {
      void* p = tslab_aligned_alloc(a, aligns[i], size, e2);
      REQUIRE(p != NULL);
      CHECK(((uintptr_t)p & (aligns[i] - 1)) == 0);
      CHECK(tslab_usable_size(a, p) >= size);
      memset(p, 1, size);
      CHECK(tslab_free(a, p));
    }
  }
  CHECK(tslab_aligned_alloc(a, 3, 10, e2) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_ALIGNMENT);
  CHECK(tslab_aligned_alloc(a, (size_t)1 << 21, 10, e2) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_ALIGNMENT);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_bad_input(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_t* b = make((size_t)1 << 30);
  tslab_epoch_t e = tslab_epoch_current(a);
  tslab_stats_global_t g0, g1;
  tslab_stats_global(a, &g0);

  /* Allocation failures and their reasons. */
  CHECK(tslab_alloc(a, 0, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_SIZE);
  CHECK(tslab_alloc(a, ((size_t)1 << 30) / 4 + 1, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_BAD_SIZE);
  CHECK(tslab_alloc(a, 10, 0) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  CHECK(tslab_alloc(a, 10, e + 5) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_UNKNOWN);
  CHECK(tslab_alloc(NULL, 10, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK(strcmp(tslab_strerror(TSLAB_ERR_EPOCH_STALE), tslab_strerror(TSLAB_ERR_EPOCH_CLOSED)) != 0);
  /* A layer's own failure, recorded through the setter; a success does not reset it. */
  tslab_set_error(TSLAB_ERR_LIMIT);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_LIMIT);
  void* ok = tslab_alloc(a, 10, e);
  CHECK(ok != NULL && tslab_free(a, ok));
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_LIMIT);
  tslab_clear_error();
  CHECK_EQ_U(tslab_last_error(), TSLAB_OK);

  /* Frees of things that are not live allocations. */
  char* p = tslab_alloc(a, 100, e);
  char* big = tslab_alloc(a, 100000, e);
  REQUIRE(p && big);
  int on_stack;
  void* foreign = malloc(64);
  void* other = tslab_alloc(b, 100, tslab_epoch_current(b));
  CHECK(tslab_free(a, NULL));
  CHECK(!tslab_free(a, p + 1));
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_POINTER);
  CHECK(!tslab_free(a, p + 112));                   /* the next slot, never allocated */
  CHECK(!tslab_free(a, big + 16384));               /* interior of a span */
  CHECK(!tslab_free(a, &on_stack));
  CHECK(!tslab_free(a, foreign));
  CHECK(!tslab_free(a, other));                     /* another instance's */
  CHECK(!tslab_free(NULL, p));
  CHECK(tslab_free(a, p));
  CHECK(!tslab_free(a, p));                         /* double free */
  CHECK(tslab_free(a, big));
  CHECK(!tslab_free(a, big));
  CHECK_EQ_U(tslab_usable_size(a, foreign), 0);
  CHECK_EQ_U(tslab_usable_size(a, p), 0);
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.invalid_frees_total - g0.invalid_frees_total, 8); /* the NULL instance has no counter */
  CHECK_EQ_U(g1.alloc_fail_size_total - g0.alloc_fail_size_total, 2);
  CHECK_EQ_U(g1.alloc_fail_unknown_total - g0.alloc_fail_unknown_total, 2);
  CHECK(tslab_free(b, other));
  free(foreign);

  /* Handles: stale after free and after reuse, foreign, forged. */
  tslab_handle_t h = 0, h2 = 0, hb = 0;
  void* hp = tslab_alloc_handle(a, 48, e, &h);
  REQUIRE(hp != NULL && h != 0);
  CHECK(tslab_handle_get(a, h) == hp);
  CHECK(tslab_handle_get(b, h) == NULL);
  CHECK(tslab_handle_get(a, h ^ 1) == NULL);
  CHECK(tslab_handle_get(a, h + ((uint64_t)1 << 40)) == NULL);
  CHECK(tslab_free_handle(a, h));
  CHECK(!tslab_free_handle(a, h));
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_HANDLE);
  CHECK(tslab_handle_get(a, h) == NULL);
  /* Allocate until the slot is reused; it is, under a new generation. */
  enum { MAXTRY = 4096 };
  static void* tries[MAXTRY];
  void* again = NULL;
  int n = 0;
  while (n < MAXTRY && (tries[n] = tslab_alloc_handle(a, 48, e, &h2)) != hp) n++;
  REQUIRE(n < MAXTRY);
  again = tries[n];
  for (int i = 0; i < n; i++) CHECK(tslab_free(a, tries[i]));
  CHECK(h2 != h);
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK(!tslab_free_handle(a, h));
  CHECK(tslab_handle_get(a, h2) == again);
  /* A plain free also invalidates the handle. */
  CHECK(tslab_free(a, again));
  CHECK(tslab_handle_get(a, h2) == NULL);
  CHECK(!tslab_free_handle(a, 0));
  CHECK(!tslab_free_handle(a, ~(tslab_handle_t)0));
  void* hl = tslab_alloc_handle(a, 200000, e, &hb);
  REQUIRE(hl != NULL);
  CHECK(tslab_handle_get(a, hb) == hl);
  CHECK(tslab_free_handle(a, hb));
  CHECK(tslab_handle_get(a, hb) == NULL);
  CHECK(tslab_alloc_handle(a, 10, e, NULL) == NULL);

  CHECK_CONSISTENT(a);
  CHECK_CONSISTENT(b);
  tslab_destroy(a);
  tslab_destroy(b);
}

/* The class that serves `size`: the smallest whose objects hold it. */
static void class_for(tslab_t* a, uint32_t size, tslab_stats_class_t* out) {
  for (uint32_t c = 0; c < tslab_class_count(a); c++) {
    REQUIRE(tslab_stats_class(a, c, out) == TSLAB_OK);
    if (out->object_size >= size) return;
  }
  REQUIRE(!"no class holds the size");
}

/* A slab that made handles, emptied and was formatted again for a class
 * with more slots: the new incarnation's slot generations cover its own
 * capacity, so its frees leave other slabs' handles alone. */
static void test_handles_across_reuse(void) {
  tslab_t* a = make((size_t)256 << 20);
  tslab_epoch_t e = tslab_epoch_current(a);
  enum { BIG = 512, SMALL = 16, MAXC = 64 };
  tslab_stats_class_t big, small;
  class_for(a, BIG, &big);
  class_for(a, SMALL, &small);
  REQUIRE(big.slab_bytes == small.slab_bytes && big.object_size * 2 <= big.slab_bytes);
  uint32_t cap = big.slab_bytes / big.object_size;
  REQUIRE(cap <= MAXC);
  /* Two slabs of the big class, every object with a handle. */
  void* p[2][MAXC];
  tslab_handle_t h[2][MAXC];
  for (int s = 0; s < 2; s++)
    for (uint32_t i = 0; i < cap; i++) REQUIRE((p[s][i] = tslab_alloc_handle(a, BIG, e, &h[s][i])) != NULL);
  /* The first empties and goes back to the heap. */
  for (uint32_t i = 0; i < cap; i++) CHECK(tslab_free_handle(a, h[0][i]));
  /* Small objects with handles take its memory again, and are freed. */
  enum { N = 4096 };
  static void* q[N];
  static tslab_handle_t hq[N];
  for (int i = 0; i < N; i++) REQUIRE((q[i] = tslab_alloc_handle(a, SMALL, e, &hq[i])) != NULL);
  for (int i = 0; i < N; i++) CHECK(tslab_handle_get(a, hq[i]) == q[i]);
  for (int i = 0; i < N; i++) CHECK(tslab_free_handle(a, hq[i]));
  /* The second big slab's handles are untouched. */
  size_t good = 0;
  for (uint32_t i = 0; i < cap; i++) good += tslab_handle_get(a, h[1][i]) == p[1][i];
  CHECK_EQ_U(good, cap);
  for (uint32_t i = 0; i < cap; i++) CHECK(tslab_free_handle(a, h[1][i]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A slot freed by pointer outside the bin's set-aside word goes onto the
 * bin's free stack, and the next allocation of its class takes it back
 * from there: the handle it had is stale from the free on, also once the
 * slot is handed out again. */
static void test_handle_stale_after_stack_reuse(void) {
  tslab_t* a = make((size_t)256 << 20);
  tslab_epoch_t e = tslab_epoch_current(a); /* no block budget: class slabs from the start */
  enum { SIZE = 48, N = 200, VICTIM = 5 };
  static void* p[N];
  static tslab_handle_t h[N];
  for (int i = 0; i < N; i++) REQUIRE((p[i] = tslab_alloc_handle(a, SIZE, e, &h[i])) != NULL);
  /* The first 200 slots of one slab: the bin has set aside words past the
   * victim's (the first). */
  CHECK(tslab_free(a, p[VICTIM]));
  CHECK(tslab_handle_get(a, h[VICTIM]) == NULL);
  void* q = tslab_alloc(a, SIZE, e);
  CHECK(q == p[VICTIM]);
  CHECK(tslab_handle_get(a, h[VICTIM]) == NULL);
  CHECK(!tslab_free_handle(a, h[VICTIM]));
  CHECK(tslab_free(a, q));
  for (int i = 0; i < N; i++)
    if (i != VICTIM) CHECK(tslab_free_handle(a, h[i]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* Frees by handle settle their slab like frees by pointer: a slab that is
 * not the bin's current one goes back to the heap the moment its last
 * object is freed, whether it was parked full or on the ready list. */
static void test_handle_free_settles(void) {
  tslab_t* a = make((size_t)256 << 20);
  tslab_epoch_t e = tslab_epoch_current(a);
  enum { SIZE = 512, MAXC = 64 };
  tslab_stats_class_t c;
  class_for(a, SIZE, &c);
  uint32_t cap = c.slab_bytes / c.object_size, cls = 0;
  REQUIRE(cap <= MAXC);
  for (; cls < tslab_class_count(a); cls++) {
    REQUIRE(tslab_stats_class(a, cls, &c) == TSLAB_OK);
    if (c.object_size >= SIZE) break;
  }
  /* Three slabs' worth: the first two are full (parked), the third current. */
  tslab_handle_t h[3][MAXC];
  for (int s = 0; s < 3; s++)
    for (uint32_t i = 0; i < cap; i++) REQUIRE(tslab_alloc_handle(a, SIZE, e, &h[s][i]) != NULL);
  REQUIRE(tslab_stats_class(a, cls, &c) == TSLAB_OK);
  CHECK_EQ_U(c.slabs, 3);
  /* The first slab by handle, to its last object: parked, then ready once
   * an eighth is free, then empty and gone. */
  for (uint32_t i = 0; i < cap; i++) CHECK(tslab_free_handle(a, h[0][i]));
  REQUIRE(tslab_stats_class(a, cls, &c) == TSLAB_OK);
  CHECK_EQ_U(c.slabs, 2);
  /* The second one freed by pointer and by handle in turns. */
  for (uint32_t i = 0; i < cap; i++) {
    if (i & 1)
      CHECK(tslab_free_handle(a, h[1][i]));
    else
      CHECK(tslab_free(a, tslab_handle_get(a, h[1][i])));
  }
  REQUIRE(tslab_stats_class(a, cls, &c) == TSLAB_OK);
  CHECK_EQ_U(c.slabs, 1);
  for (uint32_t i = 0; i < cap; i++) CHECK(tslab_free_handle(a, h[2][i]));
  CHECK(!tslab_free_handle(a, h[0][0]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A lookup from another thread (the general path, in a fenced window). */
typedef struct {
  tslab_t* a;
  tslab_handle_t h;
  void* p;
} handle_get_job;

static void* handle_get_job_run(void* arg) {
  handle_get_job* j = arg;
  j->p = tslab_handle_get(j->a, j->h);
  return NULL;
}

static void* handle_get_elsewhere(tslab_t* a, tslab_handle_t h) {
  handle_get_job j = {a, h, NULL};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, handle_get_job_run, &j) == 0);
  pthread_join(t, NULL);
  return j.p;
}

/* The owner's lookup of a handle into its own slab or block (no fence) and
 * the general one give the same answers in every state: live, freed,
 * freed with the remote bit pending, the slot handed out again, a forged
 * granule inside a longer slab, a span, an era closed and then freed whole. */
static void test_handle_lookup_paths(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_epoch_t e1 = tslab_epoch_current(a);
  tslab_handle_t h, h2;
  /* A slab slot: live, then freed by its handle, then the slot again. */
  void* p = tslab_alloc_handle(a, 200, e1, &h);
  REQUIRE(p != NULL);
  CHECK(tslab_handle_get(a, h) == p);
  CHECK(handle_get_elsewhere(a, h) == p);
  CHECK(tslab_free_handle(a, h));
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_HANDLE);
  CHECK(handle_get_elsewhere(a, h) == NULL);
  void* p2 = tslab_alloc_handle(a, 200, e1, &h2);
  CHECK(p2 == p); /* the hot slot */
  CHECK(h2 != h);
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK(tslab_handle_get(a, h2) == p2);
  /* Freed by another thread: the remote bit is set, the owner has not
   * collected it; neither lookup finds the object. */
  tu_free_job r = {a, p2, false};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, tu_free_job_run, &r) == 0);
  pthread_join(t, NULL);
  CHECK(r.ok);
  CHECK(tslab_handle_get(a, h2) == NULL);
  CHECK(handle_get_elsewhere(a, h2) == NULL);
  /* A slab of several granules: a handle naming its second granule is no
   * handle of it (the slot field is the low 12 bits, the granule above). */
  void* q = tslab_alloc_handle(a, 20000, e1, &h); /* 16-granule slabs */
  REQUIRE(q != NULL);
  CHECK(tslab_handle_get(a, h) == q);
  tslab_handle_t forged = h + ((tslab_handle_t)1 << 12);
  CHECK(tslab_handle_get(a, forged) == NULL);
  CHECK(handle_get_elsewhere(a, forged) == NULL);
  CHECK(tslab_free_handle(a, h));
  /* A span. */
  void* sp = tslab_alloc_handle(a, 1 << 20, e1, &h);
  REQUIRE(sp != NULL);
  CHECK(tslab_handle_get(a, h) == sp);
  CHECK(tslab_free_handle(a, h));
  CHECK(tslab_handle_get(a, h) == NULL);
  /* A block of a request-sized epoch: live, freed, and after the close. */
  tslab_epoch_t e = tslab_epoch_advance(a);
  void* b1 = tslab_alloc_handle(a, 48, e, &h);
  void* b2 = tslab_alloc_handle(a, 48, e, &h2);
  REQUIRE(b1 != NULL && b2 != NULL);
  CHECK(tslab_handle_get(a, h) == b1);
  CHECK(tslab_handle_get(a, h2) == b2);
  CHECK(handle_get_elsewhere(a, h2) == b2);
  CHECK(tslab_free(a, b1));
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK(handle_get_elsewhere(a, h) == NULL);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  CHECK(tslab_handle_get(a, h2) == b2); /* live in a closed era */
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  CHECK(tslab_handle_get(a, h2) == NULL);
  CHECK(tslab_handle_get(a, 0) == NULL);
  CHECK(tslab_handle_get(NULL, h2) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_config(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.epoch_ring_size = 12;
  CHECK(tslab_create(&c) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  tslab_config_init(&c);
  c.reserve_bytes = 1024;
  CHECK(tslab_create(&c) == NULL);
  tslab_config_init(&c);
  c.release_policy = (tslab_release_policy_t)7;
  CHECK(tslab_create(&c) == NULL);
  /* Many instances at once, each independent. */
  tslab_t* many[8];
  for (int i = 0; i < 8; i++) {
    many[i] = make((size_t)256 << 20);
    void* p = tslab_alloc(many[i], 64, 1);
    REQUIRE(p != NULL);
    for (int j = 0; j < i; j++) CHECK(!tslab_free(many[j], p));
    CHECK(tslab_free(many[i], p));
  }
  for (int i = 0; i < 8; i++) tslab_destroy(many[i]);
  tslab_destroy(NULL);
}

static uint64_t invalid_frees(tslab_t* a) {
  tslab_stats_global_t g;
  REQUIRE(tslab_stats_global(a, &g) == TSLAB_OK);
  return g.invalid_frees_total;
}

/* Frees of pointers into the thread's own block, in every state the block
 * and the thread's cache entry go through: NULL before and after the first
 * block, foreign, interior and double frees, another instance, another
 * thread, a closed era, a released block, the next era's reuse. A fast path
 * that finds the run another way than the run map (a per-thread hint of the
 * last block, tried and measured: docs/BENCHMARKS.md) must keep all of these. */
static void test_own_block_frees(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_t* b = make((size_t)1 << 30);
  /* The thread's cache exists (a slab of the long-lived era, which takes
   * no blocks) but no block yet: NULL and a foreign pointer. */
  void* slab_obj = tslab_alloc(a, 48, tslab_epoch_current(a));
  REQUIRE(slab_obj != NULL);
  CHECK(tslab_free(a, NULL));
  int local = 0;
  uint64_t inv0 = invalid_frees(a);
  CHECK(!tslab_free(a, &local));
  CHECK_EQ_U(invalid_frees(a) - inv0, 1);
  CHECK(tslab_free(a, slab_obj));

  tslab_epoch_t e = tslab_epoch_advance(a);
  char* p[8];
  for (int i = 0; i < 8; i++) {
    p[i] = tslab_alloc(a, 48, e);
    REQUIRE(p[i] != NULL);
    memset(p[i], i, 48);
  }
  CHECK(tslab_free(a, NULL));                 /* still NULL after a block */
  inv0 = invalid_frees(a);
  CHECK(!tslab_free(a, p[0] + 16));           /* interior: a unit that starts no object */
  CHECK(!tslab_free(a, p[0] + 1));            /* not even a unit start */
  CHECK(tslab_free(a, p[0]));
  CHECK(!tslab_free(a, p[0]));                /* double free */
  CHECK_EQ_U(invalid_frees(a) - inv0, 3);
  /* Another instance's free never takes a's block for its own. */
  CHECK(!tslab_free(b, p[1]));
  CHECK(tslab_free(a, p[1]));
  /* A free from another thread, then the owner's second free of it. */
  tu_free_job r = {a, p[2], false};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, tu_free_job_run, &r) == 0);
  pthread_join(t, NULL);
  CHECK(r.ok);
  CHECK(!tslab_free(a, p[2]));
  /* The thread switches to b and back: a's entry keeps its block. */
  tslab_epoch_t eb = tslab_epoch_advance(b);
  void* q = tslab_alloc(b, 48, eb);
  REQUIRE(q != NULL);
  CHECK(!tslab_free(a, q));
  CHECK(tslab_free(a, p[3]));
  CHECK(tslab_free(b, q));
  /* The era closes with objects live: their frees leave the fast path. */
  CHECK(tslab_epoch_close(a, e) == TSLAB_OK);
  CHECK(tslab_free(a, p[4]));
  CHECK(!tslab_free(a, p[4]));
  for (int i = 5; i < 8; i++) CHECK(tslab_free(a, p[i]));
  /* The block went back to the reserve and then to the OS: a stale pointer
   * that still matches the thread's entry is refused, not freed. */
  tslab_reserve_release(a);
  inv0 = invalid_frees(a);
  CHECK(!tslab_free(a, p[5]));
  CHECK(!tslab_free(a, p[0]));
  CHECK_EQ_U(invalid_frees(a) - inv0, 2);
  /* The next era's block may reuse the memory and the descriptor: its
   * objects free as usual, a pointer freed in the old era is no object. */
  tslab_epoch_t e2 = tslab_epoch_advance(a);
  char* n = tslab_alloc(a, 200, e2);
  REQUIRE(n != NULL);
  if (n != p[1]) CHECK(!tslab_free(a, p[1]));
  CHECK(tslab_free(a, n));
  CHECK(!tslab_free(a, n));
  CHECK(tslab_epoch_close(a, e2) == TSLAB_OK);
  CHECK(tslab_epoch_close(b, eb) == TSLAB_OK);
  CHECK_CONSISTENT(a);
  CHECK_CONSISTENT(b);
  tslab_destroy(a);
  tslab_destroy(b);
}

/* A bin refills from the next bitmap word of its current slab before it
 * looks elsewhere (docs/ARCHITECTURE.md section 3). Slabs of 128 B hold two
 * words: every slot handed out once, frees into the second word while the
 * bin moves on, double frees, a thread flush that retires the current slab
 * between two words, and exact counts throughout. A refill path that keeps
 * state about the slab's words (tried: docs/BENCHMARKS.md) must reset it
 * when a flush retires the slab, or this test crashes. */
/* An instance of class slabs only (no blocks) with a ring of SLAB_RING
 * epoch slots, so that a few advances bring an era's ring slot round. */
enum { SLAB_RING = 4 };
static tslab_t* make_slabs_ring(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 30;
  c.max_alloc_size = c.reserve_bytes / 4;
  c.epoch_ring_size = SLAB_RING;
  c.block_budget = 0;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  return a;
}

/* The next era to take closed era r's ring slot (and so its bins), the
 * eras opened on the way closed. */
static tslab_epoch_t next_in_slot(tslab_t* a, tslab_epoch_t r) {
  tslab_epoch_t r3 = 0;
  for (int i = 0; i < 2 * SLAB_RING && r3 == 0; i++) {
    tslab_epoch_t x = tslab_epoch_advance(a);
    REQUIRE(x != 0);
    if (x % SLAB_RING == r % SLAB_RING)
      r3 = x;
    else
      CHECK_EQ_U(tslab_epoch_close(a, x), TSLAB_OK);
  }
  REQUIRE(r3 != 0);
  return r3;
}

/* A slot freed while its bitmap word is set aside is the next one handed
 * out (the bin's hot slot), by plain allocation and with a handle, and the
 * bitmap stays exact around it: the second free of a freed slot fails, and
 * so does a free of the old pointer once its slot was handed out and freed
 * again. A closed era's hot slot is never handed out to the era that takes
 * its ring slot (and so its bins) next, while the slot's slab is kept for a
 * live object. */
static void test_hot_slot(void) {
  tslab_t* a = make_slabs_ring();
  tslab_epoch_t e = tslab_epoch_current(a);
  tslab_stats_class_t st0, st;
  class_for(a, 128, &st0);
  char* p[3];
  for (int i = 0; i < 3; i++) REQUIRE((p[i] = tslab_alloc(a, 128, e)) != NULL);
  for (int i = 1; i < 3; i++) CHECK(p[i] == p[0] + 128 * i); /* the first slots of a word */
  uint64_t inv0 = invalid_frees(a);
  CHECK(tslab_free(a, p[1]));
  CHECK(!tslab_free(a, p[1]));
  char* q = tslab_alloc(a, 128, e);
  CHECK(q == p[1]); /* the slot freed last, not the word's lowest free one */
  CHECK(tslab_free(a, p[0]));
  CHECK(tslab_free(a, p[2]));
  CHECK(tslab_alloc(a, 128, e) == p[2]);
  CHECK(tslab_alloc(a, 128, e) == p[0]); /* then the lowest */
  CHECK(tslab_free(a, q));
  CHECK(!tslab_free(a, p[1]));
  tslab_handle_t h;
  CHECK(tslab_alloc_handle(a, 128, e, &h) == q);
  CHECK(tslab_handle_get(a, h) == q);
  CHECK(tslab_free_handle(a, h));
  CHECK(tslab_handle_get(a, h) == NULL);
  CHECK(!tslab_free(a, q));
  CHECK_EQ_U(invalid_frees(a) - inv0, 3);
  class_for(a, 128, &st);
  CHECK_EQ_U(st.allocations_total - st0.allocations_total, 7);
  CHECK_EQ_U(st.frees_total - st0.frees_total, 5);
  CHECK_EQ_U(st.live_objects - st0.live_objects, 2);
  CHECK(tslab_free(a, p[0]));
  CHECK(tslab_free(a, p[2]));

  /* A request era: one object stays live, the other is the hot slot when
   * the era closes; the next era of the same ring slot starts afresh. */
  tslab_epoch_t r = tslab_epoch_advance(a);
  REQUIRE(r != 0);
  char* keep = tslab_alloc(a, 128, r);
  char* gone = tslab_alloc(a, 128, r);
  REQUIRE(keep != NULL && gone != NULL);
  CHECK(tslab_free(a, gone));
  CHECK_EQ_U(tslab_epoch_close(a, r), TSLAB_OK);
  tslab_epoch_t r3 = next_in_slot(a, r);
  char* next = tslab_alloc(a, 128, r3);
  REQUIRE(next != NULL);
  CHECK(next != gone);
  CHECK_EQ_U(tslab_epoch_of(a, next), r3);
  CHECK_EQ_U(tslab_epoch_of(a, keep), r);
  CHECK(tslab_free(a, next));
  CHECK(tslab_free(a, keep));
  CHECK_EQ_U(tslab_epoch_close(a, r3), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}
/* The bin's free stack (docs/ARCHITECTURE.md section 3, F1-F3): slots freed
 * outside the word the bin has set aside, from any of its slabs, come back
 * last in, first out; a stacked slot is free for every check (a second
 * free fails, its usable size is 0, its handle is stale); the stack holds
 * TSLAB_STACK_MAX and frees past it count in their slabs; a slab whose
 * objects are all freed retires at once, stacked slots and all; a flush and
 * a close empty the stack, and the era that takes a closed era's ring slot
 * never gets one of its slots; the counts stay exact throughout. */
static bool in_range(const void* p, const void* lo, size_t bytes) {
  return (uintptr_t)p - (uintptr_t)lo < bytes;
}

static void test_free_stack(void) {
  tslab_t* a = make_slabs_ring();
  tslab_epoch_t e = tslab_epoch_current(a);
  tslab_stats_class_t st0, st;
  class_for(a, 128, &st0);
  enum { CAP = 128, N = 2 * CAP + 1, STACK = TSLAB_STACK_MAX };
  REQUIRE(st0.objects_per_slab == CAP);
  static char* o[N];
  for (int i = 0; i < N; i++) REQUIRE((o[i] = tslab_alloc(a, 128, e)) != NULL);
  char* cur = o[2 * CAP]; /* the current slab's first slot; the two before it are full */
  uint64_t live = N, inv0 = invalid_frees(a);

  /* Two slabs' slots, last in first out; a stacked slot is free. */
  CHECK(tslab_free(a, o[5]));
  CHECK(tslab_free(a, o[CAP + 7]));
  CHECK(tslab_free(a, o[9]));
  CHECK(!tslab_free(a, o[9]));
  CHECK_EQ_U(tslab_usable_size(a, o[9]), 0);
  CHECK(tslab_alloc(a, 128, e) == o[9]);
  CHECK(tslab_alloc(a, 128, e) == o[CAP + 7]);
  CHECK(tslab_alloc(a, 128, e) == o[5]);
  CHECK_EQ_U(tslab_usable_size(a, o[5]), 128);

  /* At most STACK: the frees past it count in their slab, which stays
   * parked (far from an eighth free), so the allocation after the stack's
   * comes from the current slab. */
  for (int i = 0; i < STACK + 2; i++) CHECK(tslab_free(a, o[20 + i]));
  for (int i = STACK - 1; i >= 0; i--) CHECK(tslab_alloc(a, 128, e) == o[20 + i]);
  char* x = tslab_alloc(a, 128, e);
  CHECK(in_range(x, cur, CAP * 128));
  CHECK(tslab_free(a, x));
  CHECK(!tslab_free(a, o[20 + STACK]));
  live -= 2;
  CHECK_CONSISTENT(a);

  /* A slab whose objects are all freed retires at once: the last free
   * takes its slots off the stack. */
  tslab_stats_global_t g0, g1;
  REQUIRE(tslab_stats_global(a, &g0) == TSLAB_OK);
  for (int i = CAP; i < 2 * CAP; i++) CHECK(tslab_free(a, o[i]));
  live -= CAP;
  REQUIRE(tslab_stats_global(a, &g1) == TSLAB_OK);
  CHECK_EQ_U(g1.slabs_in_use, g0.slabs_in_use - 1);
  char* y[STACK + 1];
  for (int i = 0; i <= STACK; i++) {
    y[i] = tslab_alloc(a, 128, e);
    CHECK(in_range(y[i], cur, CAP * 128));
  }
  for (int i = 0; i <= STACK; i++) CHECK(tslab_free(a, y[i]));
  CHECK_CONSISTENT(a);

  /* Handles: a slot freed by its handle is stacked, and the handle stays
   * stale when the slot is handed out again. */
  enum { HN = 65, HCAP = 64 }; /* 256-byte slots: one slab and the next's first */
  tslab_handle_t hs[HN], h2;
  char* hp[HN];
  for (int i = 0; i < HN; i++) REQUIRE((hp[i] = tslab_alloc_handle(a, 256, e, &hs[i])) != NULL);
  CHECK(in_range(hp[HCAP - 1], hp[0], HCAP * 256) && !in_range(hp[HCAP], hp[0], HCAP * 256));
  CHECK(tslab_free_handle(a, hs[3]));
  CHECK(tslab_handle_get(a, hs[3]) == NULL);
  CHECK(!tslab_free_handle(a, hs[3]));
  CHECK(tslab_alloc_handle(a, 256, e, &h2) == hp[3]);
  CHECK(h2 != hs[3]);
  CHECK(tslab_handle_get(a, hs[3]) == NULL);
  CHECK(tslab_handle_get(a, h2) == hp[3]);
  hs[3] = h2;
  for (int i = 0; i < HN; i++) CHECK(tslab_free_handle(a, hs[i]));

  /* A flush empties the stack: the slots are free, the counts exact. */
  CHECK(tslab_free(a, o[30]));
  CHECK(tslab_free(a, o[31]));
  live -= 2;
  tslab_thread_flush(a);
  CHECK_CONSISTENT(a);
  CHECK(!tslab_free(a, o[31]));
  class_for(a, 128, &st);
  CHECK_EQ_U(st.live_objects - st0.live_objects, live);
  CHECK_EQ_U(invalid_frees(a) - inv0, 4);

  /* A request era closes with a slot on its stack; the next era of its
   * ring slot starts afresh. */
  tslab_epoch_t r = tslab_epoch_advance(a);
  REQUIRE(r != 0);
  static char* q[CAP + 1];
  for (int i = 0; i < CAP + 1; i++) REQUIRE((q[i] = tslab_alloc(a, 128, r)) != NULL);
  CHECK(tslab_free(a, q[3])); /* its slab is parked: stacked */
  CHECK_EQ_U(tslab_epoch_close(a, r), TSLAB_OK);
  tslab_epoch_t r3 = next_in_slot(a, r);
  char* fresh = tslab_alloc(a, 128, r3);
  REQUIRE(fresh != NULL);
  CHECK(fresh != q[3]);
  CHECK_EQ_U(tslab_epoch_of(a, fresh), r3);
  CHECK(!tslab_free(a, q[3]));
  for (int i = 0; i < CAP + 1; i++)
    if (i != 3) CHECK(tslab_free(a, q[i]));
  CHECK(tslab_free(a, fresh));
  CHECK_EQ_U(tslab_epoch_close(a, r3), TSLAB_OK);
  for (int i = 0; i < N; i++)
    if (tslab_usable_size(a, o[i]) != 0) CHECK(tslab_free(a, o[i]));
  class_for(a, 128, &st);
  CHECK_EQ_U(st.live_objects, st0.live_objects);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}


static void test_word_refill(void) {
  tslab_t* a = make((size_t)1 << 30);
  tslab_epoch_t e = tslab_epoch_current(a); /* class slabs only, no blocks */
  tslab_stats_class_t st0;
  class_for(a, 128, &st0);
  REQUIRE(st0.objects_per_slab == 128);
  enum { N = 3 * 128 + 40 };
  static char* p[N];
  for (int i = 0; i < N; i++) {
    p[i] = tslab_alloc(a, 128, e);
    REQUIRE(p[i] != NULL);
    memset(p[i], i & 0xff, 128);
  }
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++) CHECK(p[i] != p[j]);
  for (int i = 0; i < N; i++) CHECK((unsigned char)p[i][127] == (unsigned char)(i & 0xff));
  tslab_stats_class_t st;
  class_for(a, 128, &st);
  CHECK_EQ_U(st.allocations_total - st0.allocations_total, N);
  CHECK_EQ_U(st.live_objects - st0.live_objects, N);
  /* Free the second word of the first slab and the first of the last full
   * one, refuse their second frees, and hand them out again. */
  uint64_t inv0 = invalid_frees(a);
  for (int i = 64; i < 128; i++) CHECK(tslab_free(a, p[i]));
  for (int i = 256; i < 320; i++) CHECK(tslab_free(a, p[i]));
  CHECK(!tslab_free(a, p[64]));
  CHECK(!tslab_free(a, p[319]));
  CHECK_EQ_U(invalid_frees(a) - inv0, 2);
  static char* q[128];
  for (int i = 0; i < 128; i++) {
    q[i] = tslab_alloc(a, 128, e);
    REQUIRE(q[i] != NULL);
    memset(q[i], 0x5a, 128);
  }
  for (int i = 0; i < 128; i++) {
    for (int j = i + 1; j < 128; j++) CHECK(q[i] != q[j]);
    for (int j = 0; j < N; j++)
      if (j < 64 || (j >= 128 && j < 256) || j >= 320) CHECK(q[i] != p[j]);
  }
  for (int i = 0; i < 64; i++) CHECK((unsigned char)p[i][0] == (unsigned char)(i & 0xff));
  class_for(a, 128, &st);
  CHECK_EQ_U(st.allocations_total - st0.allocations_total, N + 128);
  CHECK_EQ_U(st.frees_total - st0.frees_total, 128);
  CHECK_EQ_U(st.live_objects - st0.live_objects, N);
  for (int i = 0; i < N; i++)
    if (i < 64 || (i >= 128 && i < 256) || i >= 320) CHECK(tslab_free(a, p[i]));
  for (int i = 0; i < 128; i++) CHECK(tslab_free(a, q[i]));
  class_for(a, 128, &st);
  CHECK_EQ_U(st.live_objects, st0.live_objects);
  CHECK_EQ_U(st.allocations_total - st.frees_total, st0.allocations_total - st0.frees_total);

  /* A slab current with its second word not taken yet, emptied and retired
   * by a flush: the next allocations start a slab of their own. */
  tslab_thread_flush(a);
  void* one = tslab_alloc(a, 128, e);
  REQUIRE(one != NULL);
  CHECK(tslab_free(a, one));
  tslab_thread_flush(a);
  for (int i = 0; i < 130; i++) {
    p[i] = tslab_alloc(a, 128, e);
    REQUIRE(p[i] != NULL);
    memset(p[i], 1, 128);
  }
  for (int i = 0; i < 130; i++) CHECK(tslab_free(a, p[i]));
  class_for(a, 128, &st);
  CHECK_EQ_U(st.live_objects, st0.live_objects);
  CHECK_EQ_U(st.allocations_total - st.frees_total, st0.allocations_total - st0.frees_total);
  char report[256];
  CHECK_EQ_U(tslab_check(a, report, sizeof report), 0);
  tslab_destroy(a);
}

/* The next word (section 3): a refill sets aside two bitmap words of the
 * current slab, and an allocation that empties the first takes the second
 * without refilling. Its slots are free until handed out (a free of one is
 * refused), counted once, handed out lowest first with no stale hot slot,
 * and dropped with the mask when a close detaches the slab. */
static void test_next_word(void) {
  tslab_t* a = make_slabs_ring();
  tslab_epoch_t e = tslab_epoch_current(a);
  tslab_stats_class_t st0, st;
  class_for(a, 128, &st0);
  REQUIRE(st0.objects_per_slab == 128); /* two words */
  static char* p[66];
  p[0] = tslab_alloc(a, 128, e);
  REQUIRE(p[0] != NULL);
  char* second = p[0] + 64 * 128; /* the first slot of the next word */
  CHECK_EQ_U(tslab_usable_size(a, second), 0);
  uint64_t inv0 = invalid_frees(a);
  CHECK(!tslab_free(a, second));
  CHECK_EQ_U(invalid_frees(a) - inv0, 1);
  for (int i = 1; i < 64; i++) {
    p[i] = tslab_alloc(a, 128, e);
    REQUIRE(p[i] != NULL);
    CHECK(p[i] < second);
  }
  /* The mask empty, the next word whole: counts exact, the check clean. */
  class_for(a, 128, &st);
  CHECK_EQ_U(st.allocations_total - st0.allocations_total, 64);
  CHECK_EQ_U(st.live_objects - st0.live_objects, 64);
  CHECK_CONSISTENT(a);
  /* A hot slot of the first word, handed out again: its bit stays recorded
   * while the mask is empty, and must not pick the slot of the same bit in
   * the next word's mask as if it were the hot one. */
  CHECK(tslab_free(a, p[5]));
  CHECK(tslab_alloc(a, 128, e) == p[5]);
  p[64] = tslab_alloc(a, 128, e);
  CHECK(p[64] == second);
  p[65] = tslab_alloc(a, 128, e);
  CHECK(p[65] == second + 128);
  /* The promoted word feeds the hot slot as the first did. */
  CHECK(tslab_free(a, p[65]));
  CHECK(!tslab_free(a, p[65]));
  CHECK(tslab_alloc(a, 128, e) == p[65]);
  for (int i = 0; i < 66; i++) memset(p[i], i, 128);
  for (int i = 0; i < 66; i++) CHECK((unsigned char)p[i][127] == (unsigned char)i);
  class_for(a, 128, &st);
  CHECK_EQ_U(st.allocations_total - st0.allocations_total, 68);
  CHECK_EQ_U(st.frees_total - st0.frees_total, 2);
  CHECK_EQ_U(st.live_objects - st0.live_objects, 66);
  CHECK_CONSISTENT(a);
  for (int i = 0; i < 66; i++) CHECK(tslab_free(a, p[i]));
  class_for(a, 128, &st);
  CHECK_EQ_U(st.live_objects, st0.live_objects);

  /* A close detaches a slab whose next word is set aside: the era that
   * takes the ring slot next starts slabs of its own, and the old one keeps
   * its live object. */
  tslab_epoch_t r = tslab_epoch_advance(a);
  char* kept = tslab_alloc(a, 128, r);
  REQUIRE(kept != NULL);
  memset(kept, 7, 128);
  REQUIRE(tslab_epoch_close(a, r) == TSLAB_OK);
  tslab_epoch_t r2 = next_in_slot(a, r);
  uintptr_t old_slab = (uintptr_t)kept & ~(uintptr_t)((16 << 10) - 1); /* a one-granule slab */
  for (int i = 0; i < 66; i++) {
    p[i] = tslab_alloc(a, 128, r2);
    REQUIRE(p[i] != NULL);
    CHECK((uintptr_t)p[i] - old_slab >= (16 << 10));
  }
  CHECK(kept[127] == 7);
  CHECK_CONSISTENT(a);
  for (int i = 0; i < 66; i++) CHECK(tslab_free(a, p[i]));
  CHECK(tslab_free(a, kept));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

int main(void) {
  test_sizes();
  test_class_boundaries();
  test_slot_index_exact();
  test_pointers_outside_slots();
  test_handle_lookup_paths();
  test_handle_stale_after_stack_reuse();
  test_handle_free_settles();
  test_own_block_frees();
  test_word_refill();
  test_next_word();
  test_hot_slot();
  test_free_stack();
  test_calloc_realloc_aligned();
  test_bad_input();
  test_handles_across_reuse();
  test_config();
  TEST_DONE();
}
