/* Fault injection (src/fault.h): the OS refusing to reserve, commit or
 * release memory must give NULL with TSLAB_ERR_OUT_OF_MEMORY (or a create
 * that fails cleanly), never a crash, never corrupted metadata, never a
 * changed byte in a live object, and the allocator must work again once the
 * faults stop. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault.h"
#include "internal.h" /* tslab_os_release_ranges */
#include "test_util.h"

#define NOBJ 64

typedef struct {
  unsigned char* p;
  size_t size;
} obj_t;

static tslab_config_t small_config(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)64 << 20;
  c.max_alloc_size = (size_t)16 << 20;
  return c;
}

static void fill(obj_t* o, unsigned seed) {
  for (size_t k = 0; k < o->size; k++) o->p[k] = (unsigned char)(seed * 29u + k);
}

static int intact(const obj_t* o, unsigned seed) {
  for (size_t k = 0; k < o->size; k++)
    if (o->p[k] != (unsigned char)(seed * 29u + k)) return 0;
  return 1;
}

/* A set of live objects of every kind whose contents must survive. */
static void make_objects(tslab_t* a, obj_t* objs, tslab_epoch_t e) {
  for (unsigned i = 0; i < NOBJ; i++) {
    objs[i].size = i % 8 == 7 ? 40000 + i * 1000 : 8 + i * 97;
    objs[i].p = tslab_alloc(a, objs[i].size, e);
    REQUIRE(objs[i].p != NULL);
    fill(&objs[i], i);
  }
}

static void check_objects(const obj_t* objs) {
  for (unsigned i = 0; i < NOBJ; i++) CHECK(intact(&objs[i], i));
}

static void free_objects(tslab_t* a, obj_t* objs) {
  for (unsigned i = 0; i < NOBJ; i++) CHECK(tslab_free(a, objs[i].p));
}

/* Every system call of tslab_create failing in turn: NULL with the OOM
 * reason, nothing left behind that breaks the next create. */
static void test_create(void) {
  tslab_config_t c = small_config();
  /* No address space at all. */
  tslab_fault_inject(TSLAB_FAULT_RESERVE, 0, UINT64_MAX);
  tslab_clear_error();
  CHECK(tslab_create(&c) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);
  CHECK(tslab_fault_injected() >= 1);

  /* Less address space than asked for: the instance takes what it gets (a
   * smaller reservation) and works. */
  tslab_config_t big;
  tslab_config_init(&big);
  big.reserve_bytes = (size_t)64 << 30;
  tslab_fault_inject(TSLAB_FAULT_RESERVE, 0, 3);
  tslab_t* shrunk = tslab_create(&big);
  tslab_fault_clear();
  CHECK(shrunk != NULL);
  if (shrunk) {
    tslab_stats_global_t g;
    tslab_stats_global(shrunk, &g);
    CHECK(g.reserved_bytes < big.reserve_bytes);
    void* p = tslab_alloc(shrunk, 100, tslab_epoch_current(shrunk));
    CHECK(p != NULL);
    CHECK(tslab_free(shrunk, p));
    tslab_destroy(shrunk);
  }

  /* The second reservation (metadata) failing must undo the first. */
  tslab_fault_inject(TSLAB_FAULT_RESERVE, 1, 1);
  tslab_clear_error();
  CHECK(tslab_create(&c) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);
  CHECK_EQ_U(tslab_fault_injected(), 1);

  /* Each commit/map of create failing in turn, until one create gets
   * through with no fault left to hit. */
  unsigned failed = 0;
  for (uint64_t skip = 0;; skip++) {
    REQUIRE(skip < 64);
    tslab_fault_inject(TSLAB_FAULT_COMMIT, skip, 1);
    tslab_clear_error();
    tslab_t* a = tslab_create(&c);
    uint64_t hit = tslab_fault_injected();
    tslab_fault_clear();
    if (a == NULL) {
      CHECK_EQ_U(hit, 1);
      CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);
      failed++;
      continue;
    }
    /* Created: it must work, whatever fault happened during create. */
    void* p = tslab_alloc(a, 100, tslab_epoch_current(a));
    CHECK(p != NULL);
    CHECK(tslab_free(a, p));
    CHECK_CONSISTENT(a);
    tslab_destroy(a);
    if (hit == 0) break;
  }
  CHECK(failed >= 1);
  tslab_fault_clear();
  tslab_t* a = tslab_create(&c);
  CHECK(a != NULL);
  tslab_destroy(a);
}

/* Growth refused: small and large allocations fail with the OOM reason
 * once the committed memory is used up; nothing else changes. */
static void test_commit(tslab_release_policy_t policy) {
  tslab_config_t c = small_config();
  c.release_policy = policy;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_current(a);
  obj_t objs[NOBJ];
  make_objects(a, objs, e);

  tslab_stats_global_t before, after;
  tslab_stats_global(a, &before);
  tslab_fault_inject(TSLAB_FAULT_COMMIT, 0, UINT64_MAX);

  tslab_clear_error();
  CHECK(tslab_alloc(a, (size_t)8 << 20, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);

  /* Small objects: the committed prefix runs out after a bounded number. */
  enum { MAXFILL = 1 << 16 };
  static void* filler[MAXFILL];
  size_t n = 0;
  tslab_clear_error();
  while (n < MAXFILL && (filler[n] = tslab_alloc(a, 1024, e)) != NULL) n++;
  CHECK(n < MAXFILL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);
  CHECK(tslab_fault_injected() >= 2);
  tslab_clear_error();
  CHECK(tslab_aligned_alloc(a, 4096, 3 << 20, e) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);
  tslab_clear_error();
  CHECK(tslab_realloc(a, objs[7].p, (size_t)12 << 20) == NULL);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);

  tslab_stats_global(a, &after);
  CHECK(after.alloc_fail_oom_total >= before.alloc_fail_oom_total + 3);
  CHECK_CONSISTENT(a);
  check_objects(objs);

  /* Freeing works without new memory; so does closing an epoch. */
  for (size_t i = 0; i < n; i++) CHECK(tslab_free(a, filler[i]));
  tslab_epoch_t e2 = tslab_epoch_advance(a);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  CHECK_CONSISTENT(a);
  check_objects(objs);

  /* Memory is back: everything works again. */
  tslab_fault_clear();
  void* big = tslab_alloc(a, (size_t)8 << 20, e2);
  CHECK(big != NULL);
  for (size_t i = 0; i < n; i++) {
    filler[i] = tslab_alloc(a, 1024, e2);
    CHECK(filler[i] != NULL);
  }
  for (size_t i = 0; i < n; i++) CHECK(tslab_free(a, filler[i]));
  CHECK(tslab_free(a, big));
  check_objects(objs);
  free_objects(a, objs);
  CHECK_CONSISTENT(a);
  tslab_stats_global(a, &after);
  CHECK_EQ_U(after.live_objects, 0);
  tslab_destroy(a);
}

/* madvise refused: closes and eager releases keep going, the pages simply
 * stay resident; the allocator stays consistent and releases again later. */
static void test_release(tslab_release_policy_t policy) {
  tslab_config_t c = small_config();
  c.release_policy = policy;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t keep = tslab_epoch_current(a);
  obj_t objs[NOBJ];
  make_objects(a, objs, keep);

  tslab_fault_inject(TSLAB_FAULT_RELEASE, 0, UINT64_MAX);
  tslab_stats_global_t before, after;
  tslab_stats_global(a, &before);
  for (int round = 0; round < 3; round++) {
    tslab_epoch_t e = tslab_epoch_advance(a);
    void* ps[512];
    for (int i = 0; i < 512; i++) {
      ps[i] = tslab_alloc(a, 64 + (size_t)i * 61, e);
      CHECK(ps[i] != NULL);
    }
    for (int i = 0; i < 512; i++) CHECK(tslab_free(a, ps[i]));
    CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
    CHECK_CONSISTENT(a);
  }
  CHECK(tslab_fault_injected() >= 1);
  tslab_stats_global(a, &after);
  CHECK_EQ_U(after.release_calls_total, before.release_calls_total);
  /* Every refusal is counted, and nothing was counted as released. */
  CHECK_EQ_U(after.release_failures_total - before.release_failures_total, tslab_fault_injected());
  CHECK_EQ_U(after.release_bytes_total, before.release_bytes_total);
  check_objects(objs);

  tslab_fault_clear();
  tslab_epoch_t e = tslab_epoch_advance(a);
  void* ps[512];
  for (int i = 0; i < 512; i++) {
    ps[i] = tslab_alloc(a, 64 + (size_t)i * 61, e);
    CHECK(ps[i] != NULL);
  }
  for (int i = 0; i < 512; i++) CHECK(tslab_free(a, ps[i]));
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_stats_global(a, &after);
  CHECK(after.release_calls_total > before.release_calls_total);
  check_objects(objs);
  free_objects(a, objs);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* Whether this kernel releases a batch of the caller's ranges in one
 * process_madvise call, asked of it directly on a page of its own. */
static bool kernel_batches(void) {
#ifdef SYS_process_madvise
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  void* p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  struct iovec v = {p, pg};
  bool yes = syscall(SYS_process_madvise, -10000 /* PIDFD_SELF_THREAD */, &v, 1, MADV_DONTNEED, 0u) == (long)pg;
  munmap(p, pg);
  return yes;
#else
  return false;
#endif
}

/* The OS layer's batched release: every range gets its own verdict, in a
 * batch the kernel stops partway (a range that is not mapped), with ranges
 * fault injection refuses, and one by one where the kernel takes no batch.
 * Released pages read as zeros; the pages between the ranges keep their
 * bytes. */
static void test_release_ranges(void) {
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  enum { PAGES = 16 };
  unsigned char* m = mmap(NULL, PAGES * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  for (size_t i = 0; i < PAGES; i++) memset(m + i * pg, (int)(i + 1), pg);
  REQUIRE(munmap(m + 7 * pg, pg) == 0); /* a hole the kernel cannot advise */
  struct iovec r[6] = {{m, pg},          {m + 2 * pg, 2 * pg}, {m + 5 * pg, pg},
                       {m + 7 * pg, pg}, {m + 9 * pg, pg},     {m + 11 * pg, 2 * pg}};
  bool ok[6];
  size_t calls = tslab_os_release_ranges(r, 6, ok);
  const bool want[6] = {true, true, true, false, true, true};
  for (int i = 0; i < 6; i++) CHECK(ok[i] == want[i]);
  /* Batched, the kernel stops at the hole: one call for the first three,
   * then one each for the two after it. One by one: five. */
  CHECK_EQ_U(calls, kernel_batches() ? 3 : 5);
  CHECK(tslab_os_release_batches() == kernel_batches());
  for (size_t i = 0; i < PAGES; i++) {
    if (i == 7) continue;
    bool released = i == 0 || i == 2 || i == 3 || i == 5 || i == 9 || i == 11 || i == 12;
    CHECK(m[i * pg] == (released ? 0 : i + 1) && m[i * pg + pg - 1] == (released ? 0 : i + 1));
  }
  /* The second of three ranges refused by fault injection: it keeps its
   * bytes and its verdict, the others go. */
  for (size_t i = 0; i < 7; i++) memset(m + i * pg, (int)(i + 1), pg);
  struct iovec s[3] = {{m, pg}, {m + 2 * pg, pg}, {m + 4 * pg, 2 * pg}};
  tslab_fault_inject(TSLAB_FAULT_RELEASE, 1, 1);
  calls = tslab_os_release_ranges(s, 3, ok);
  CHECK_EQ_U(tslab_fault_injected(), 1);
  tslab_fault_clear();
  CHECK(ok[0] && !ok[1] && ok[2]);
  CHECK_EQ_U(calls, 2);
  CHECK(m[0] == 0 && m[2 * pg] == 3 && m[4 * pg] == 0 && m[5 * pg] == 0 && m[pg] == 2 && m[3 * pg] == 4);
  /* Nothing to release: no call. */
  CHECK_EQ_U(tslab_os_release_ranges(s, 0, ok), 0);
  munmap(m, 7 * pg);
  munmap(m + 8 * pg, (PAGES - 8) * pg);
}

/* A run whose release the OS refused stays resident and dirty: calloc,
 * which trusts a run released (or never used) to read as zeros, must still
 * clear it. A span of 64 KiB filled with a pattern, freed while releases
 * fail (the pool keeps nothing: no reserve, no decay), then calloc'd again
 * at the same address. */
static void test_refused_release_stays_dirty(void) {
  tslab_config_t c = small_config();
  c.pool_resident_max = 0;
  c.pool_decay_max = 0;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_current(a);
  const size_t size = 64 << 10;
  unsigned char* p = tslab_alloc(a, size, e);
  REQUIRE(p != NULL);
  memset(p, 0xAB, size);
  tslab_fault_inject(TSLAB_FAULT_RELEASE, 0, UINT64_MAX);
  CHECK(tslab_free(a, p));
  CHECK(tslab_fault_injected() >= 1);
  tslab_fault_clear();
  unsigned char* q = tslab_calloc(a, 1, size, e);
  REQUIRE(q != NULL);
  CHECK(q == p);
  size_t nonzero = 0;
  for (size_t i = 0; i < size; i++) nonzero += q[i] != 0;
  CHECK_EQ_U(nonzero, 0);
  CHECK(tslab_free(a, q));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A process whose first ranges keep failing on their own (an unmapped page
 * here, a locked one under mlockall) stops asking the kernel for batches
 * after eight calls that taught nothing: later releases go one madvise per
 * range, whatever the kernel. Run in a child forked before this process
 * released anything, so that the parent still knows nothing. */
static void test_unclear_cap(void) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char* m = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || munmap(m + 2 * pg, pg) != 0) _exit(2);
    struct iovec hole = {m + 2 * pg, pg};
    bool ok[2];
    for (int i = 0; i < 8; i++)
      if (tslab_os_release_ranges(&hole, 1, ok) != 0 || ok[0]) _exit(3);
    struct iovec two[2] = {{m, pg}, {m + pg, pg}};
    m[0] = m[pg] = 1;
    size_t calls = tslab_os_release_ranges(two, 2, ok);
    _exit(!tslab_os_release_batches() && calls == 2 && ok[0] && ok[1] && m[0] == 0 && m[pg] == 0 ? 0 : 4);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK_EQ_U(WEXITSTATUS(status), 0);
}

/* The process's first release, of one range, asks the kernel for a batch
 * all the same: from then on batching is on exactly where the kernel takes
 * it (before any multi-range release, and so before the pool's eviction
 * would depend on it). Called first in main. */
static void test_first_release_learns(void) {
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char* m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  REQUIRE(munmap(m + pg, pg) == 0);
  m[0] = 1;
  CHECK(!tslab_os_release_batches());
  /* A range the kernel cannot advise (not mapped) is that range's error,
   * not the call's: it teaches nothing. */
  struct iovec hole = {m + pg, pg};
  bool ok;
  CHECK_EQ_U(tslab_os_release_ranges(&hole, 1, &ok), 0);
  CHECK(!ok);
  struct iovec r = {m, pg};
  CHECK_EQ_U(tslab_os_release_ranges(&r, 1, &ok), 1);
  CHECK(ok && m[0] == 0);
  CHECK(tslab_os_release_batches() == kernel_batches());
  munmap(m, pg);
}

/* Several runs in one release batch, the second range refused: each run
 * gets its own range's verdict. The pool's three spans, kept apart by live
 * spans between them, go in one batch (tslab_reserve_release); the refused
 * one stays dirty, so calloc clears it, and the others come back clean. */
static void test_batch_verdicts(void) {
  tslab_config_t c = small_config();
  c.pool_resident_max = (size_t)4 << 20;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_current(a);
  const size_t size = 64 << 10;
  unsigned char *span[3], *gap[3];
  for (int i = 0; i < 3; i++) {
    REQUIRE((span[i] = tslab_alloc(a, size, e)) != NULL);
    REQUIRE((gap[i] = tslab_alloc(a, size, e)) != NULL);
    memset(span[i], 0xAB, size);
  }
  for (int i = 0; i < 3; i++) CHECK(tslab_free(a, span[i]));
  tslab_stats_global_t g0, g1;
  tslab_stats_global(a, &g0);
  tslab_fault_inject(TSLAB_FAULT_RELEASE, 1, 1);
  tslab_reserve_release(a);
  CHECK_EQ_U(tslab_fault_injected(), 1);
  tslab_fault_clear();
  tslab_stats_global(a, &g1);
  CHECK_EQ_U(g1.release_failures_total - g0.release_failures_total, 1);
  CHECK_EQ_U(g1.release_bytes_total - g0.release_bytes_total, 2 * size);
  for (int i = 0; i < 3; i++) {
    unsigned char* q = tslab_calloc(a, 1, size, e);
    REQUIRE(q != NULL);
    size_t nonzero = 0;
    for (size_t k = 0; k < size; k++) nonzero += q[k] != 0;
    CHECK_EQ_U(nonzero, 0);
  }
  for (int i = 0; i < 3; i++) CHECK(tslab_free(a, gap[i]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* Where the kernel takes no batch (TSLAB_FAULT_BATCH), neighbouring runs
 * still share one madvise: 32 contiguous empty slabs of the pool go in one
 * call. */
static void test_unbatched_ranges_merge(void) {
  tslab_config_t c = small_config();
  c.pool_resident_max = (size_t)4 << 20;
  c.block_budget = 0;
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_current(a);
  enum { N = 32 * 128 }; /* 32 one-granule slabs of 128 B objects */
  static void* objs[N];
  for (int i = 0; i < N; i++) REQUIRE((objs[i] = tslab_alloc(a, 128, e)) != NULL);
  for (int i = 0; i < N; i++) CHECK(tslab_free(a, objs[i]));
  tslab_stats_global_t g0, g1;
  tslab_stats_global(a, &g0);
  tslab_fault_inject(TSLAB_FAULT_BATCH, 0, UINT64_MAX);
  CHECK(!tslab_os_release_batches());
  CHECK(tslab_reserve_release(a) >= (size_t)30 << 14);
  tslab_fault_clear();
  tslab_stats_global(a, &g1);
  CHECK(g1.release_calls_total - g0.release_calls_total <= 2);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A block trim the OS refuses: counted as failures, nothing counted as
 * released, the object that outlives its epoch intact. */
static void test_refused_trim(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a != NULL);
  tslab_epoch_t e = tslab_epoch_advance(a);
  enum { N = 60, SIZE = 256 }; /* one block of 16 KiB */
  unsigned char* objs[N];
  for (int i = 0; i < N; i++) {
    REQUIRE((objs[i] = tslab_alloc(a, SIZE, e)) != NULL);
    memset(objs[i], 0x5A, SIZE);
  }
  for (int i = 1; i < N; i++) CHECK(tslab_free(a, objs[i]));
  tslab_stats_global_t g0, g1;
  tslab_stats_global(a, &g0);
  tslab_fault_inject(TSLAB_FAULT_RELEASE, 0, UINT64_MAX);
  CHECK_EQ_U(tslab_epoch_close(a, e), TSLAB_OK);
  tslab_fault_clear();
  tslab_stats_global(a, &g1);
  CHECK(g1.release_failures_total > g0.release_failures_total);
  CHECK_EQ_U(g1.release_bytes_total, g0.release_bytes_total);
  CHECK(objs[0][0] == 0x5A && objs[0][SIZE - 1] == 0x5A);
  CHECK(tslab_free(a, objs[0]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

/* A thread whose cache cannot be created: it cannot allocate (OOM), but it
 * can still free other threads' objects, and it recovers later. */
typedef struct {
  tslab_t* a;
  void* victim;
  int alloc_failed_oom, freed, alloc_after;
} thread_arg_t;

static void* no_cache_thread(void* p) {
  thread_arg_t* t = p;
  tslab_fault_inject(TSLAB_FAULT_COMMIT, 0, UINT64_MAX);
  tslab_clear_error();
  void* q = tslab_alloc(t->a, 48, tslab_epoch_current(t->a));
  t->alloc_failed_oom = q == NULL && tslab_last_error() == TSLAB_ERR_OUT_OF_MEMORY;
  t->freed = tslab_free(t->a, t->victim);
  tslab_fault_clear();
  q = tslab_alloc(t->a, 48, tslab_epoch_current(t->a));
  t->alloc_after = q != NULL && tslab_free(t->a, q);
  return NULL;
}

static void test_thread_cache(void) {
  tslab_config_t c = small_config();
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  thread_arg_t t = {a, tslab_alloc(a, 48, tslab_epoch_current(a)), 0, 0, 0};
  REQUIRE(t.victim != NULL);
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, no_cache_thread, &t) == 0);
  pthread_join(th, NULL);
  CHECK(t.alloc_failed_oom);
  CHECK(t.freed);
  CHECK(t.alloc_after);
  CHECK_CONSISTENT(a);
  tslab_stats_global_t g;
  tslab_stats_global(a, &g);
  CHECK_EQ_U(g.live_objects, 0);
  tslab_destroy(a);
}

/* A thread's reserve block reused while another thread is inside a
 * non-owner window takes a fresh descriptor (section 4); when metadata
 * cannot grow, there is none, and the block must go back to the heap, not
 * be dropped: the epoch's allocation fails with OOM, tslab_check finds every
 * reserved run in a reserve, and the allocator works again once the faults
 * stop. The other thread is held inside its free by the hook. */
/* One run of the scenario. `shift` objects of as many classes, allocated
 * first, move where in the metadata region the descriptors and bitmaps
 * land, so that across runs the region runs out at the descriptor as well
 * as at a bitmap. */
static void reserve_without_descriptor(unsigned shift) {
  tslab_config_t c = small_config();
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e1 = tslab_epoch_current(a);
  void* other = tslab_alloc(a, 64, e1);
  REQUIRE(other != NULL);
  for (unsigned i = 0; i < shift; i++) REQUIRE(tslab_alloc(a, 1024 + 128 * i, e1) != NULL);
  tslab_epoch_t e = tslab_epoch_advance(a); /* a request: a block, kept at its close */
  REQUIRE(tslab_alloc(a, 64, e) != NULL);
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  tslab_hook_set(tu_held_hook);
  tu_held_free held = {{a, other, false}, 0, 0};
  tu_held_free_start(&held);
  /* Each request reuses the reserve block under a fresh descriptor, whose
   * old one waits in limbo for the held window: metadata runs out. */
  tslab_fault_inject(TSLAB_FAULT_COMMIT, 0, UINT64_MAX);
  size_t requests = 0;
  for (; requests < 100000; requests++) {
    e = tslab_epoch_advance(a);
    REQUIRE(e != 0);
    tslab_clear_error();
    void* p = tslab_alloc(a, 64, e);
    CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
    if (!p) {
      CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_OUT_OF_MEMORY);
      break;
    }
  }
  CHECK(requests < 100000); /* the held window kept every old descriptor */
  CHECK_CONSISTENT(a);      /* no reserve block dropped on the way */
  tslab_fault_clear();
  tu_held_free_finish(&held);
  tslab_hook_set(NULL);
  CHECK(held.job.ok);
  /* The window ended: limbo gives its metadata back, allocation works. */
  e = tslab_epoch_advance(a);
  void* p = tslab_alloc(a, 64, e);
  CHECK(p != NULL);
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

static void test_reserve_without_descriptor(void) {
  for (unsigned shift = 0; shift < 12; shift++) reserve_without_descriptor(shift);
}

/* The grace clock after a seal whose table could not grow once: with a
 * window of some thread open at every moment (each held in turn, the next
 * before the last lets go), the descriptors each request leaves in limbo
 * must still come back once the windows they wait for end. Metadata may
 * grow while a window is held; it must not grow phase after phase. */
enum { PHASES = 5, PHASE_REQUESTS = 300 };

static void test_grace_after_overflow(void) {
  tslab_config_t c = small_config();
  tslab_t* a = tslab_create(&c);
  REQUIRE(a != NULL);
  tslab_epoch_t e1 = tslab_epoch_current(a);
  tu_held_free held[PHASES];
  for (int k = 0; k < PHASES; k++) {
    held[k] = (tu_held_free){{a, tslab_alloc(a, 64, e1), false}, k, 0};
    REQUIRE(held[k].job.p != NULL);
  }
  tslab_epoch_t e = tslab_epoch_advance(a);
  REQUIRE(tslab_alloc(a, 64, e) != NULL);
  CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
  tslab_hook_set(tu_held_hook);
  uint64_t meta[PHASES];
  for (int k = 0; k < PHASES; k++) {
    tu_held_free_start(&held[k]);
    if (k > 0) {
      tu_held_free_finish(&held[k - 1]);
    } else {
      /* The first seal cannot grow its table of windows. */
      tslab_fault_inject(TSLAB_FAULT_COMMIT, 0, 1);
    }
    for (int r = 0; r < PHASE_REQUESTS; r++) {
      e = tslab_epoch_advance(a);
      void* p = tslab_alloc(a, 64, e);
      CHECK(p != NULL);
      CHECK_EQ_U(tslab_epoch_free_all(a, e), TSLAB_OK);
    }
    tslab_fault_clear();
    tslab_stats_global_t g;
    tslab_stats_global(a, &g);
    meta[k] = g.metadata_bytes;
  }
  tu_held_free_finish(&held[PHASES - 1]);
  tslab_hook_set(NULL);
  for (int k = 0; k < PHASES; k++) CHECK(held[k].job.ok);
  /* Each phase's limbo comes back during the next one: no growth from the
   * second phase on beyond what one phase holds. */
  CHECK(meta[PHASES - 1] <= meta[1] + (meta[1] - meta[0]) / 2);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
}

int main(void) {
  test_unclear_cap();
  test_first_release_learns();
  test_create();
  test_commit(TSLAB_RELEASE_ON_CLOSE);
  test_commit(TSLAB_RELEASE_EAGER);
  test_release(TSLAB_RELEASE_ON_CLOSE);
  test_release(TSLAB_RELEASE_EAGER);
  test_release_ranges();
  test_refused_release_stays_dirty();
  test_batch_verdicts();
  test_unbatched_ranges_merge();
  test_refused_trim();
  test_thread_cache();
  test_reserve_without_descriptor();
  test_grace_after_overflow();
  TEST_DONE();
}
