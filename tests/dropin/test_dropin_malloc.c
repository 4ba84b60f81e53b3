/* The malloc family under the drop-in: results, alignment, usable sizes,
 * errno, and pointers the drop-in did not allocate (the C library's own
 * allocator, static and mapped memory), which must never crash free,
 * realloc or malloc_usable_size and must be counted. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_util.h"
#include "dropin_sym.h"

/* Sizes the compiler cannot see, so the overflow checks below reach the
 * library instead of a compile-time warning. */
static volatile size_t huge = SIZE_MAX / 2, near_max = SIZE_MAX - 4096;

static bool aligned(const void* p, size_t al) {
  return ((uintptr_t)p & (al - 1)) == 0;
}

/* The block is ours: a live allocation of the process instance. */
static bool ours(const void* p) {
  return SYM(tslab_usable_size)(SYM(tslab_malloc_instance)(), p) > 0;
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31u + seed);
}

static bool filled(const unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 31u + seed)) return false;
  return true;
}

static void test_family(void) {
  void* z1 = malloc(0);
  void* z2 = malloc(0);
  CHECK(z1 && z2 && z1 != z2 && ours(z1));
  free(z1);
  free(z2);

  /* Every size up to 64 KiB and some large ones: usable size covers the
   * request, the whole usable size can be written, and the alignment C
   * requires: 16 bytes (max_align_t) for every size from 9 on, since a
   * 16-byte-aligned type fits in it, 8 below. Two blocks of each size are
   * live at once, so that the second is not the first's slot again: with
   * 24-byte slots one of them would be 8 off. calloc and realloc alike. */
  for (size_t n = 1; n < (1u << 22); n = n < 4096 ? n + 1 : n * 2 + 7) {
    size_t al = n > 8 ? 16 : 8;
    unsigned char* p = malloc(n);
    unsigned char* q = malloc(n);
    unsigned char* z = calloc(1, n);
    REQUIRE(p != NULL && q != NULL && z != NULL);
    CHECK(aligned(p, al) && aligned(q, al) && aligned(z, al));
    size_t u = malloc_usable_size(p);
    CHECK(u >= n);
    fill(p, u, (unsigned)n);
    CHECK(filled(p, u, (unsigned)n));
    q = realloc(q, n + 24);
    REQUIRE(q != NULL);
    CHECK(aligned(q, 16));
    free(p);
    free(q);
    free(z);
  }

  unsigned char* c = calloc(1000, 37);
  REQUIRE(c != NULL);
  size_t zeros = 0;
  for (size_t i = 0; i < 37000; i++) zeros += c[i] == 0;
  CHECK_EQ_U(zeros, 37000);
  free(c);
  errno = 0;
  CHECK(calloc(huge, 3) == NULL && errno == ENOMEM);
  void* c0 = calloc(0, 8);
  CHECK(c0 != NULL);
  free(c0);

  /* realloc keeps the contents through growth and shrinking. */
  unsigned char* r = malloc(10);
  fill(r, 10, 7);
  for (size_t n = 16; n < (1u << 21); n *= 3) {
    r = realloc(r, n);
    REQUIRE(r != NULL);
    CHECK(filled(r, 10, 7));
  }
  r = realloc(r, 5);
  CHECK(r && filled(r, 5, 7));
  errno = 0;
  CHECK(realloc(r, 0) == NULL); /* frees, as the C library does */
  void* ra = reallocarray(NULL, 10, 10);
  CHECK(ra != NULL);
  errno = 0;
  void* same = reallocarray(ra, huge, 4);
  CHECK(same == NULL && errno == ENOMEM);
  if (!same) free(ra); /* a failed reallocarray leaves the block */
  void* rn = realloc(NULL, 33);
  CHECK(rn && ours(rn));
  free(rn);

  errno = 0;
  CHECK(malloc(near_max) == NULL && errno == ENOMEM);

  /* Alignment calls. */
  for (size_t al = sizeof(void*); al <= ((size_t)1 << 20); al *= 2) {
    void* p = NULL;
    CHECK_EQ_U(posix_memalign(&p, al, 100), 0);
    CHECK(p && aligned(p, al) && malloc_usable_size(p) >= 100);
    free(p);
    p = aligned_alloc(al, al * 2);
    CHECK(p && aligned(p, al));
    free(p);
    p = memalign(al, 3);
    CHECK(p && aligned(p, al));
    free(p);
  }
  void* bad = (void*)1;
  CHECK_EQ_U(posix_memalign(&bad, 24, 10), EINVAL);
  CHECK(bad == (void*)1);
  CHECK_EQ_U(posix_memalign(&bad, 4, 10), EINVAL);
  void* m = memalign(24, 10); /* glibc rounds the alignment up to 32 */
  CHECK(m && aligned(m, 32));
  free(m);
  errno = 0;
  CHECK(memalign(SIZE_MAX, 10) == NULL && errno == EINVAL); /* as glibc: no such alignment */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* v = valloc(10);
  CHECK(v && aligned(v, page));
  free(v);
  void* pv = pvalloc(page + 1);
  CHECK(pv && aligned(pv, page) && malloc_usable_size(pv) >= 2 * page);
  free(pv);

  /* glibc's extra entry points give harmless answers. */
  CHECK(mallopt(M_ARENA_MAX, 1) == 1);
  void* live = malloc(1000);
  struct mallinfo2 mi = mallinfo2();
  CHECK(mi.arena > 0 && mi.uordblks >= 1000);
  free(live);
  CHECK_EQ_U(malloc_usable_size(NULL), 0);
  free(NULL);
}

/* malloc_trim gives the hot reserve back: after a phase of small blocks is
 * freed, their emptied slabs (the calling thread's current ones included)
 * are released, the reserve is empty, and the call says so; with nothing
 * left to release it answers 0. The blocks' memory serves again after. */
static void test_trim(void) {
  enum { N = 4000 };
  static void* p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(200 + (size_t)(i % 5) * 100);
    REQUIRE(p[i] != NULL);
    memset(p[i], 0x5a, 200);
  }
  for (int i = 0; i < N; i++) free(p[i]);
  tslab_stats_global_t g;
  REQUIRE(SYM(tslab_stats_global)(SYM(tslab_malloc_instance)(), &g) == TSLAB_OK);
  uint64_t released = g.release_bytes_total;
  CHECK_EQ_U(malloc_trim(0), 1);
  REQUIRE(SYM(tslab_stats_global)(SYM(tslab_malloc_instance)(), &g) == TSLAB_OK);
  CHECK_EQ_U(g.reserve_bytes, 0);
  CHECK(g.release_bytes_total > released);
  CHECK_EQ_U(malloc_trim(0), 0);
  void* again = malloc(300);
  CHECK(again && ours(again));
  free(again);
  DROPIN_CHECK_CONSISTENT();
}

/* Zero-size requests of every form succeed with a unique block, and are not
 * failures: the instance counts no failed allocation and the thread's error
 * stays clear (each once went to the core as size 0, which refuses it). */
static void test_zero_sizes(void) {
  tslab_stats_global_t g_before, g_after;
  REQUIRE(SYM(tslab_stats_global)(SYM(tslab_malloc_instance)(), &g_before) == TSLAB_OK);
  SYM(tslab_clear_error)();
  void* p[7] = {malloc(0), calloc(0, 8), calloc(8, 0), aligned_alloc(64, 0), memalign(32, 0), realloc(NULL, 0),
                NULL};
  CHECK(posix_memalign(&p[6], 128, 0) == 0);
  for (int i = 0; i < 7; i++) {
    CHECK(p[i] != NULL && ours(p[i]));
    for (int j = 0; j < i; j++) CHECK(p[i] != p[j]);
  }
  CHECK(aligned(p[3], 64) && aligned(p[4], 32) && aligned(p[6], 128));
  REQUIRE(SYM(tslab_stats_global)(SYM(tslab_malloc_instance)(), &g_after) == TSLAB_OK);
  CHECK_EQ_U(g_after.alloc_failures_total - g_before.alloc_failures_total, 0);
  CHECK_EQ_U(g_after.alloc_fail_size_total - g_before.alloc_fail_size_total, 0);
  CHECK_EQ_U(SYM(tslab_last_error)(), TSLAB_OK);
  for (int i = 0; i < 7; i++) free(p[i]);
}

static void test_foreign(void) {
  tslab_malloc_stats_t before, after;
  SYM(tslab_malloc_stats)(&before);
  tslab_stats_global_t g_before, g_after;
  REQUIRE(SYM(tslab_stats_global)(SYM(tslab_malloc_instance)(), &g_before) == TSLAB_OK);

  /* The C library's own allocator, reached past the interposition. */
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  REQUIRE(libc != NULL);
  void* (*libc_malloc)(size_t) = (void* (*)(size_t))dlsym(libc, "malloc");
  REQUIRE(libc_malloc != NULL && libc_malloc != (void*)malloc);
  unsigned char* g = libc_malloc(200);
  REQUIRE(g != NULL);
  CHECK(!ours(g));
  fill(g, 200, 3);
  CHECK_EQ_U(malloc_usable_size(g), 0);
  unsigned char* moved = realloc(g, 5000);
  CHECK(moved && moved != g && ours(moved) && filled(moved, 200, 3));
  free(moved);
  unsigned char* g2 = libc_malloc(64);
  free(g2); /* left to its allocator: no crash */
  dlclose(libc);

  /* Static and stack memory. */
  static unsigned char area[256];
  unsigned char stack[64];
  free(area + 16);
  free(stack);
  CHECK_EQ_U(malloc_usable_size(area), 0);

  /* A foreign block at the very end of a mapping, realloc'd larger than what
   * can be read: the readable part is copied, nothing faults. */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char* map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(map != MAP_FAILED);
  munmap(map + page, page);
  unsigned char* tail = map + page - 100;
  fill(tail, 100, 9);
  unsigned char* grown = realloc(tail, 10000);
  CHECK(grown && filled(grown, 100, 9));
  free(grown);
  munmap(map, page);

  /* A double free of our own block is refused, counted by the instance as an
   * invalid free, not as foreign, and leaves the allocator consistent; a
   * realloc of it fails. */
  void* twice = malloc(48);
  CHECK(SYM(tslab_owns)(SYM(tslab_malloc_instance)(), twice));
  CHECK(!SYM(tslab_owns)(SYM(tslab_malloc_instance)(), area));
  free(twice);
  free(twice);
  errno = 0;
  CHECK(realloc(twice, 100) == NULL && errno == EINVAL);
  CHECK_EQ_U(malloc_usable_size(twice), 0);
  DROPIN_CHECK_CONSISTENT();

  SYM(tslab_malloc_stats)(&after);
  REQUIRE(SYM(tslab_stats_global)(SYM(tslab_malloc_instance)(), &g_after) == TSLAB_OK);
  CHECK_EQ_U(after.foreign_frees - before.foreign_frees, 3); /* g2, area, stack */
  CHECK(g_after.invalid_frees_total - g_before.invalid_frees_total >= 4); /* and twice */
  CHECK_EQ_U(after.foreign_reallocs - before.foreign_reallocs, 2);
  CHECK_EQ_U(after.foreign_usable_size - before.foreign_usable_size, 2);
}

int main(void) {
  REQUIRE(SYM(tslab_malloc_instance)() != NULL);
  test_family();
  test_zero_sizes();
  test_trim();
  test_foreign();
  DROPIN_CHECK_CONSISTENT();
  TEST_DONE();
}
