/* fork() while other threads are inside the allocator: the child (one thread,
 * a copy of the parent's memory taken at an arbitrary point of the other
 * threads' work) must be able to allocate, free and close epochs at once.
 * A lock held by another parent thread at the moment of fork, or a busy flag
 * left raised in the child's copy, would make the child hang: the parent
 * waits with a deadline and kills it. The child must also pass tslab_check
 * before and after its work. It reports through its exit status only (no
 * stdio: another thread may have held its lock at fork). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "fault.h"
#include "fork_util.h"
#include "test_util.h"

#define HAMMERS 3
#define FORKS 24
#define CHILD_DEADLINE_S 30
#define NOBJ 32

static tslab_t* a;
static atomic_bool stop;

/* Allocation, local and cross-thread frees, advancing and closing epochs:
 * every lock and every busy window of the allocator is taken all the time. */
static void* hammer(void* arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  static void* _Atomic handoff[HAMMERS];
  void* keep[64] = {0};
  unsigned n = 0;
  tslab_epoch_t older = 0, newer = tslab_epoch_current(a);
  while (!atomic_load(&stop)) {
    tslab_epoch_t e = tslab_epoch_current(a);
    size_t size = 16 + (n * 37u + id * 1000u) % 3000;
    void* p = n % 97 == 0 ? tslab_alloc(a, 100000, e) : tslab_alloc(a, size, e);
    void* old = keep[n % 64];
    keep[n % 64] = p;
    if (old) tslab_free(a, old);
    /* Hand one object to the next thread, free the one handed to us. */
    if (n % 8 == 0 && p) {
      keep[n % 64] = NULL;
      void* theirs = atomic_exchange(&handoff[(id + 1) % HAMMERS], p);
      if (theirs) tslab_free(a, theirs);
    }
    if (id == 0 && n % 500 == 0) { /* keep two epochs open, close the one before */
      tslab_epoch_t next = tslab_epoch_advance(a);
      if (older) tslab_epoch_close(a, older);
      older = newer;
      newer = next;
    }
    n++;
  }
  for (unsigned i = 0; i < 64; i++) tslab_free(a, keep[i]);
  void* mine = atomic_exchange(&handoff[id], NULL);
  if (mine) tslab_free(a, mine);
  return NULL;
}

static unsigned char pattern(unsigned i, size_t k) { return (unsigned char)(i * 13u + k); }

/* The child's work. Exit codes name the step that failed. */
static int child(void** objs, size_t* sizes) {
  /* What the other threads left half-done was finished or rolled back. */
  if (tslab_check(a, NULL, 0) != 0) return 8;
  for (unsigned i = 0; i < NOBJ; i++)
    for (size_t k = 0; k < sizes[i]; k++)
      if (((unsigned char*)objs[i])[k] != pattern(i, k)) return 2;
  tslab_epoch_t e = tslab_epoch_current(a);
  void* ps[256];
  for (unsigned i = 0; i < 256; i++) {
    ps[i] = tslab_alloc(a, 8 + i * 131u, e);
    if (!ps[i]) return 3;
    ((unsigned char*)ps[i])[0] = (unsigned char)i;
  }
  void* big = tslab_alloc(a, (size_t)1 << 20, e);
  if (!big) return 3;
  for (unsigned i = 0; i < 256; i++)
    if (!tslab_free(a, ps[i])) return 4;
  if (!tslab_free(a, big)) return 4;
  for (unsigned i = 0; i < NOBJ; i++)
    if (!tslab_free(a, objs[i])) return 4;
  tslab_epoch_t next = tslab_epoch_advance(a);
  if (tslab_epoch_close(a, e) != TSLAB_OK) return 5;
  void* p = tslab_alloc(a, 64, next);
  if (!p || !tslab_free(a, p)) return 6;
  tslab_t* b = tslab_create(NULL);
  if (!b) return 7;
  p = tslab_alloc(b, 64, 1);
  if (!p || !tslab_free(b, p)) return 7;
  tslab_destroy(b);
  if (tslab_check(a, NULL, 0) != 0) return 9;
  return 0;
}

/* ---- fork while a close releases what decay kept ---- */

enum { DECAY_OBJS = 4096, DECAY_FORKS = 60 };
static tslab_t* decay_inst;

/* An epoch after another: a batch allocated, freed (its slabs empty while
 * the epoch is open, so decay keeps them) and closed (which releases them). */
static void* decay_closer(void* arg) {
  (void)arg;
  static void* objs[DECAY_OBJS];
  while (!atomic_load(&stop)) {
    tslab_epoch_t e = tslab_epoch_advance(decay_inst);
    for (int i = 0; i < DECAY_OBJS; i++) objs[i] = tslab_alloc(decay_inst, 128, e);
    for (int i = 0; i < DECAY_OBJS; i++) tslab_free(decay_inst, objs[i]);
    tslab_epoch_close(decay_inst, e);
  }
  return NULL;
}

/* Child: consistent (no closed era keeps decay, D1), and once the current
 * era is closed nothing is kept beyond the pool's bound. */
static int decay_child(void) {
  if (tslab_check(decay_inst, NULL, 0) != 0) return 1;
  if (tslab_epoch_close(decay_inst, tslab_epoch_current(decay_inst)) != TSLAB_OK) return 2;
  tslab_stats_global_t g;
  if (tslab_stats_global(decay_inst, &g) != TSLAB_OK || g.decay_bytes != 0) return 3;
  return tslab_check(decay_inst, NULL, 0) != 0 ? 4 : 0;
}

static void test_fork_decay(void) {
  tslab_config_t c;
  tslab_config_init(&c);
  c.reserve_bytes = (size_t)1 << 32;
  c.block_budget = 0;
  c.pool_resident_max = 64 << 10;
  c.pool_decay_max = 4 << 20;
  c.pool_decay_ms = 3600 * 1000;
  decay_inst = tslab_create(&c);
  REQUIRE(decay_inst != NULL);
  atomic_store(&stop, false);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, decay_closer, NULL) == 0);
  for (int f = 0; f < DECAY_FORKS; f++) {
    struct timespec nap = {0, 700000 + (f % 7) * 137000};
    nanosleep(&nap, NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(decay_child());
    int status = 0;
    if (!fork_wait_child(pid, &status, CHILD_DEADLINE_S) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "decay fork %d: child failed (status %d)\n", f, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      tu_failures++;
      break;
    }
  }
  atomic_store(&stop, true);
  pthread_join(t, NULL);
  CHECK_CONSISTENT(decay_inst);
  tslab_destroy(decay_inst);
}

/* ---- fork after an instance was destroyed under a thread's entry ---- */

/* The main thread keeps an entry for instance A; another thread destroys A
 * and creates B, whose first cache (a third thread's) the system often
 * places at the destroyed cache's address. In a child forked then, the
 * third thread is gone: its cache must be parked for adoption, not taken
 * for the forking thread's own by the stale entry. */
static tslab_t* stale_b;
static pthread_mutex_t stale_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stale_cv = PTHREAD_COND_INITIALIZER;
static int stale_stage;

static void* stale_replace(void* arg) {
  tslab_destroy((tslab_t*)arg);
  stale_b = tslab_create(NULL);
  return NULL;
}

static void* stale_user(void* arg) {
  (void)arg;
  void* p = tslab_alloc(stale_b, 64, tslab_epoch_current(stale_b));
  pthread_mutex_lock(&stale_mu);
  stale_stage = 1;
  pthread_cond_broadcast(&stale_cv);
  while (stale_stage != 2) pthread_cond_wait(&stale_cv, &stale_mu);
  pthread_mutex_unlock(&stale_mu);
  tslab_free(stale_b, p);
  return NULL;
}

static void test_fork_stale_entry(void) {
  tslab_t* old = tslab_create(NULL);
  REQUIRE(old != NULL);
  REQUIRE(tslab_alloc(old, 64, tslab_epoch_current(old)) != NULL);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, stale_replace, old) == 0);
  pthread_join(t, NULL);
  REQUIRE(stale_b != NULL);
  REQUIRE(pthread_create(&t, NULL, stale_user, NULL) == 0);
  pthread_mutex_lock(&stale_mu);
  while (stale_stage != 1) pthread_cond_wait(&stale_cv, &stale_mu);
  pthread_mutex_unlock(&stale_mu);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    tslab_stats_global_t g;
    _exit(tslab_stats_global(stale_b, &g) != TSLAB_OK ? 1 : g.threads_active != 0 ? 2 : 0);
  }
  int status = 0;
  CHECK(fork_wait_child(pid, &status, CHILD_DEADLINE_S) && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  pthread_mutex_lock(&stale_mu);
  stale_stage = 2;
  pthread_cond_broadcast(&stale_cv);
  pthread_mutex_unlock(&stale_mu);
  pthread_join(t, NULL);
  tslab_destroy(stale_b);
}

/* ---- fork while an owner is part way through a notification drain ---- */

/* A drain disarms every slab it takes off its cache's notification list,
 * then collects and settles them one by one, arming again those that stay
 * parked. A child forked while the owner is held between two of them (the
 * fork's wait for busy windows times out) must finish the drain itself
 * (7.6): a parked slab left disarmed is never queued by a remote free again.
 * tslab_check reports one; and in the child, the slots freed into a slab the
 * drain had not reached must reach the thread that adopts the owner's
 * cache. */
enum { DRAIN_CAP = 256, DRAIN_SLABS = 4, DRAIN_DEADLINE_S = 60 };

/* ThreadSanitizer cannot start threads in the child of a multi-threaded
 * fork: under it the child checks the structure only. */
#define DRAIN_CHILD_THREADS (!TU_TSAN)
static tslab_t* drain_inst;
static tslab_epoch_t drain_era;
static void* drain_objs[DRAIN_CAP * DRAIN_SLABS + 1];
/* 1: filled, 2: allocate again, 3: held at the hook, 4: let go; -1: failed */
static atomic_int drain_stage;

static void drain_hook(int point) {
  int expected = 2;
  if (point != TSLAB_HOOK_DRAIN_PARTWAY || !atomic_compare_exchange_strong(&drain_stage, &expected, 3)) return;
  while (atomic_load(&drain_stage) != 4) sched_yield();
}

/* Whether drain_stage reached `want` before the deadline (false: the other
 * side failed or hangs). */
static bool drain_wait(int want) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int st; (st = atomic_load(&drain_stage)) != want;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (st < 0 || now.tv_sec - start.tv_sec > DRAIN_DEADLINE_S) return false;
    sched_yield();
  }
  return true;
}

static void* drain_owner(void* arg) {
  (void)arg;
  for (int i = 0; i < DRAIN_CAP * DRAIN_SLABS; i++) {
    if (!(drain_objs[i] = tslab_alloc(drain_inst, 64, drain_era))) {
      atomic_store(&drain_stage, -1);
      return NULL;
    }
  }
  atomic_store(&drain_stage, 1);
  if (!drain_wait(2)) return NULL;
  /* Every slab is full: the refill drains the slabs other threads queued. */
  drain_objs[DRAIN_CAP * DRAIN_SLABS] = tslab_alloc(drain_inst, 64, drain_era);
  return NULL;
}

/* Child: the thread that adopts the owner's cache allocates; how many of its
 * objects are slots of slab `s`. */
static void* drain_adopter(void* arg) {
  uintptr_t lo = (uintptr_t)drain_objs[(uintptr_t)arg * DRAIN_CAP], hi = lo + DRAIN_CAP * 64;
  uintptr_t reused = 0;
  for (int i = 0; i < 2 * DRAIN_CAP; i++) {
    uintptr_t p = (uintptr_t)tslab_alloc(drain_inst, 64, drain_era);
    reused += p >= lo && p < hi;
  }
  return (void*)reused;
}

static int drain_child(void) {
  if (!fork_child_consistent(drain_inst)) return 1;
  if (!DRAIN_CHILD_THREADS) return 0;
  /* The drain settled the last slab queued (slab 2) before the hook held
   * it; slab 1 it had not reached. Free all but one more of its slots from
   * here (a remote free: the owner's thread is gone). */
  const uintptr_t slab = 1;
  for (int i = 1; i < DRAIN_CAP - 1; i++)
    if (!tslab_free(drain_inst, drain_objs[slab * DRAIN_CAP + i])) return 2;
  pthread_t t;
  void* reused = NULL;
  if (pthread_create(&t, NULL, drain_adopter, (void*)slab) != 0 || pthread_join(t, &reused) != 0) return 3;
  if ((uintptr_t)reused != DRAIN_CAP - 1) {
    char msg[64];
    int n = snprintf(msg, sizeof msg, "adopter reused %u of %u slots\n", (unsigned)(uintptr_t)reused, DRAIN_CAP - 1);
    (void)!write(2, msg, (size_t)n);
    return 4;
  }
  return fork_child_consistent(drain_inst) ? 0 : 5;
}

static void test_fork_drain(void) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.block_budget = 0; /* class slabs from the first object */
  drain_inst = tslab_create(&cfg);
  REQUIRE(drain_inst != NULL);
  drain_era = tslab_epoch_current(drain_inst);
  tslab_hook_set(drain_hook);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, drain_owner, NULL) == 0);
  REQUIRE(drain_wait(1));
  /* Slabs of DRAIN_CAP slots, filled in order. */
  for (int s = 0; s < DRAIN_SLABS; s++)
    REQUIRE((uintptr_t)drain_objs[s * DRAIN_CAP + DRAIN_CAP - 1] - (uintptr_t)drain_objs[s * DRAIN_CAP] ==
            (DRAIN_CAP - 1) * 64);
  /* One remote free into each parked slab queues it for the owner. */
  for (int s = 0; s < DRAIN_SLABS - 1; s++) CHECK(tslab_free(drain_inst, drain_objs[s * DRAIN_CAP]));
  atomic_store(&drain_stage, 2);
  REQUIRE(drain_wait(3));
  int status = 0;
  int done = fork_run_child(drain_child, &status, CHILD_DEADLINE_S);
  atomic_store(&drain_stage, 4);
  pthread_join(t, NULL);
  tslab_hook_set(NULL);
  CHECK(fork_child_passed("drain fork", done, status));
  CHECK(drain_objs[DRAIN_CAP * DRAIN_SLABS] != NULL);
  CHECK_CONSISTENT(drain_inst);
  tslab_destroy(drain_inst);
}

/* The allocator keeps no descriptor of its own: a child that closes every
 * descriptor and opens a file of its own (a daemon's closefrom) keeps that
 * file through the allocator's readings of the process's RSS (found by
 * review: the descriptor of /proc/self/statm stayed open, and the child's
 * first reading closed it by number: the child's file). */
static void test_fork_descriptors(void) {
  (void)tslab_process_rss(); /* the parent reads RSS first */
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (int fd = 3; fd < 256; fd++) close(fd);
    int fds[2];
    if (pipe(fds) != 0) _exit(2);
    int reads = tslab_process_rss() > 0;
    reads += tslab_process_rss() > 0;
    char c = 'x';
    _exit(reads == 2 && write(fds[1], &c, 1) == 1 && read(fds[0], &c, 1) == 1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(fork_wait_child(pid, &status, CHILD_DEADLINE_S));
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A fork while a thread is between pinning its instance at exit and
 * flushing its cache: the child, whose copy of that thread is gone, can
 * destroy the instance (its exit reference would make tslab_destroy wait
 * for good). */
static _Atomic int exit_held, exit_go;

static void hold_exit(int point) {
  if (point != TSLAB_HOOK_EXIT_PINNED) return;
  atomic_store(&exit_held, 1);
  while (!atomic_load(&exit_go)) sched_yield();
}

static void* exiting_thread(void* arg) {
  void* p = tslab_alloc((tslab_t*)arg, 100, 1);
  return p && tslab_free((tslab_t*)arg, p) ? NULL : arg;
}

static void test_fork_pinned_exit(void) {
  tslab_t* b = tslab_create(NULL);
  REQUIRE(b != NULL);
  tslab_hook_set(hold_exit);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, exiting_thread, b) == 0);
  tu_wait_flag(&exit_held);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    tslab_destroy(b);
    _exit(0);
  }
  int status = 0;
  bool ended = fork_wait_child(pid, &status, CHILD_DEADLINE_S);
  CHECK(ended && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  atomic_store(&exit_go, 1);
  void* res = NULL;
  pthread_join(t, &res);
  CHECK(res == NULL);
  tslab_hook_set(NULL);
  tslab_destroy(b);
}

/* A fork while another thread's free of an owned slab's only object has set
 * its remote bit and not yet the run's hint: in the child, whose copy of
 * that thread is gone, the owner's next collection takes the bit, and the
 * slot is allocated again (it stayed taken until the era closed, since
 * collections go by the hint; a known gap until a later session). */
static _Atomic int remote_held, remote_go;

static void hold_remote(int point) {
  if (point != TSLAB_HOOK_REMOTE_SET) return;
  atomic_store(&remote_held, 1);
  while (!atomic_load(&remote_go)) sched_yield();
}

static tslab_t* remote_inst;
static tslab_epoch_t remote_era;

static void* remote_freer(void* p) { return (void*)(uintptr_t)tslab_free(remote_inst, p); }

static void* remote_obj;
static bool remote_blocks;

/* Child: the era's next allocations of 64 bytes reach the freed object's
 * address again: a slab's slot comes back to its bin (the allocations are
 * kept, or the bin would hand out the last one freed again and again), a
 * block's unit once the block drains and is bumped again (the allocations
 * are freed at once, so that it drains). */
static int remote_child(void) {
  tslab_thread_flush(remote_inst); /* collects the remote frees of the owner's runs */
  for (int i = 0; i < 100000; i++) {
    void* q = tslab_alloc(remote_inst, 64, remote_era);
    if (!q) return 1;
    if (q == remote_obj) return fork_child_consistent(remote_inst) ? 0 : 3;
    if (remote_blocks && !tslab_free(remote_inst, q)) return 4;
  }
  return 2;
}

/* blocks: the object is in its era's bumping block (the default), or in a
 * class slab (block_budget 0). */
static void fork_remote_cut_short(bool blocks) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  if (!blocks) cfg.block_budget = 0;
  remote_blocks = blocks;
  remote_inst = tslab_create(&cfg);
  REQUIRE(remote_inst != NULL);
  remote_era = tslab_epoch_advance(remote_inst);
  void* p = remote_obj = tslab_alloc(remote_inst, 64, remote_era);
  REQUIRE(p != NULL);
  atomic_store(&remote_held, 0);
  atomic_store(&remote_go, 0);
  tslab_hook_set(hold_remote);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, remote_freer, p) == 0);
  tu_wait_flag(&remote_held);
  int status = 0;
  int done = fork_run_child(remote_child, &status, CHILD_DEADLINE_S);
  CHECK(fork_child_passed(blocks ? "remote free cut short, block" : "remote free cut short, slab", done, status));
  atomic_store(&remote_go, 1);
  void* ok = NULL;
  pthread_join(t, &ok);
  CHECK(ok != NULL);
  tslab_hook_set(NULL);
  tslab_destroy(remote_inst);
}

static void test_fork_remote_cut_short(void) {
  fork_remote_cut_short(false);
  fork_remote_cut_short(true);
}

int main(void) {
  test_fork_remote_cut_short();
  test_fork_pinned_exit();
  test_fork_descriptors();
  test_fork_drain();
  test_fork_stale_entry();
  a = tslab_create(NULL);
  REQUIRE(a != NULL);
  void* objs[NOBJ];
  size_t sizes[NOBJ];
  for (unsigned i = 0; i < NOBJ; i++) {
    sizes[i] = 24 + i * 211u;
    objs[i] = tslab_alloc(a, sizes[i], tslab_epoch_current(a));
    REQUIRE(objs[i] != NULL);
    for (size_t k = 0; k < sizes[i]; k++) ((unsigned char*)objs[i])[k] = pattern(i, k);
  }
  pthread_t th[HAMMERS];
  for (unsigned i = 0; i < HAMMERS; i++)
    REQUIRE(pthread_create(&th[i], NULL, hammer, (void*)(uintptr_t)i) == 0);

  struct timespec nap = {0, 3000000};
  for (int f = 0; f < FORKS; f++) {
    nanosleep(&nap, NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(child(objs, sizes));
    int status = 0;
    if (!fork_wait_child(pid, &status, CHILD_DEADLINE_S)) {
      fprintf(stderr, "fork %d: child hung (killed after %d s)\n", f, CHILD_DEADLINE_S);
      tu_failures++;
      break;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "fork %d: child %s %d\n", f, WIFEXITED(status) ? "exited with" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      tu_failures++;
      break;
    }
  }
  atomic_store(&stop, true);
  for (unsigned i = 0; i < HAMMERS; i++) pthread_join(th[i], NULL);
  for (unsigned i = 0; i < NOBJ; i++) CHECK(tslab_free(a, objs[i]));
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
  test_fork_decay();
  TEST_DONE();
}
