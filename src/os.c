/* Operating-system interface: address-space reservation, commit, release,
 * the heavy side of the asymmetric fence, clocks and RSS. Every call that
 * can fail is routed through the fault injector of src/fault.h. */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "internal.h"

static bool tslab_membarrier_ok;
#if !defined(__POPCNT__) && defined(__x86_64__)
TSLAB_INTERNAL bool tslab_cpu_popcnt;
#endif
#if !(defined(__x86_64__) || defined(__i386__))
TSLAB_INTERNAL bool tslab_fast_path_fences;
#endif

/* ---- fault injection ---- */

static _Atomic unsigned fault_ops;
static _Atomic uint64_t fault_skip, fault_count, fault_injected;

TSLAB_INTERNAL void tslab_fault_inject(unsigned ops, uint64_t skip, uint64_t count) {
  atomic_store(&fault_skip, skip);
  atomic_store(&fault_count, count);
  atomic_store(&fault_injected, 0);
  atomic_store(&fault_ops, ops);
}

TSLAB_INTERNAL void tslab_fault_clear(void) { atomic_store(&fault_ops, 0); }

TSLAB_INTERNAL uint64_t tslab_fault_injected(void) { return atomic_load(&fault_injected); }

TSLAB_INTERNAL void tslab_fault_use_popcnt(bool use) {
#if !defined(__POPCNT__) && defined(__x86_64__)
  tslab_global_init();
  tslab_cpu_popcnt = use && __builtin_cpu_supports("popcnt");
#else
  (void)use;
#endif
}

TSLAB_INTERNAL void (*_Atomic tslab_hook)(int point);

TSLAB_INTERNAL void tslab_hook_set(void (*hook)(int point)) { atomic_store(&tslab_hook, hook); }

static bool fault_fires(unsigned op) {
  if (likely(!(atomic_load_explicit(&fault_ops, memory_order_relaxed) & op))) return false;
  uint64_t skip = atomic_load(&fault_skip);
  while (skip > 0) {
    if (atomic_compare_exchange_weak(&fault_skip, &skip, skip - 1)) return false;
  }
  uint64_t count = atomic_load(&fault_count);
  while (count > 0) {
    if (count == UINT64_MAX || atomic_compare_exchange_weak(&fault_count, &count, count - 1)) {
      atomic_fetch_add(&fault_injected, 1);
      return true;
    }
  }
  return false;
}

/* ---- memory ---- */

TSLAB_INTERNAL void* tslab_os_reserve(size_t bytes) {
  if (fault_fires(TSLAB_FAULT_RESERVE)) return NULL;
  void* p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* A reservation whose start is aligned to `align` (a power of two), so every
 * alignment the allocator derives from granule indexes holds whatever
 * address the kernel picks: over-reserve by the alignment and give the slack
 * back. Where the larger range cannot be had (some sandboxes and tools
 * limit one mapping), the range itself is aligned inside and *bytes shrinks
 * by at most the alignment. *mapping and *mapping_bytes describe what to
 * unmap at the end. */
TSLAB_INTERNAL void* tslab_os_reserve_aligned(size_t* bytes, size_t align, void** mapping, size_t* mapping_bytes) {
  size_t total = *bytes + align;
  uint8_t* p = tslab_os_reserve(total);
  if (!p) {
    total = *bytes;
    p = tslab_os_reserve(total);
    if (!p) return NULL;
  }
  uint8_t* aligned = (uint8_t*)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
  size_t lead = (size_t)(aligned - p);
  size_t usable = total - lead < *bytes ? (total - lead) & ~(align - 1) : *bytes;
  size_t tail = total - lead - usable;
  if (lead) munmap(p, lead);
  if (tail) munmap(aligned + usable, tail);
  *mapping = aligned;
  *mapping_bytes = usable;
  *bytes = usable;
  return aligned;
}

TSLAB_INTERNAL bool tslab_os_commit(void* p, size_t bytes) {
  if (fault_fires(TSLAB_FAULT_COMMIT)) return false;
  return mprotect(p, bytes, PROT_READ | PROT_WRITE) == 0;
}

TSLAB_INTERNAL size_t tslab_os_page_size(void) {
  static _Atomic size_t page;
  size_t p = atomic_load_explicit(&page, memory_order_relaxed);
  if (!p) {
    long v = sysconf(_SC_PAGESIZE);
    p = v > 0 ? (size_t)v : 4096;
    atomic_store_explicit(&page, p, memory_order_relaxed);
  }
  return p;
}

/* Releases go to the kernel in batches where it takes them: Linux 6.13 and
 * later apply MADV_DONTNEED to the caller's own memory through
 * process_madvise(2), which names it by PIDFD_SELF_THREAD from 6.15 on (a
 * thread's memory is its process's), and since 6.16 one call flushes the
 * TLB once for all its ranges. A madvise per range interrupts every other
 * CPU that runs the process once per range: 16 us a range against 0.4 us
 * batched with a second thread busy, 1.5 us against 0.5 us without, on the
 * development machine. Whether the kernel takes batches is learnt once: the
 * first call it takes (the first release tries even one range) switches
 * batching on for good; a first refusal of the call itself (EBADF for the
 * negative pidfd, ENOSYS, ESRCH, or another error while the first range
 * alone can be released: EINVAL for an unknown advice, EPERM from a filter)
 * switches it off for good. An error that the first range earns on its own
 * (EINVAL for a locked page, ENOMEM for an unmapped one) decides nothing,
 * up to UNCLEAR_MAX times (a program under mlockall would otherwise pay a
 * failed call on every release), and once batching is on, a refused call
 * only sends its ranges one by one. The pseudo-descriptor is the kernel's
 * value, spelled out because C libraries do not all have it. */
#define TSLAB_PIDFD_SELF_THREAD (-10000)
enum { RELEASE_BATCH = 64, UNCLEAR_MAX = 8 }; /* ranges per call (the kernel takes up to 1024) */
static _Atomic int batching;  /* 0: not known yet, 1: the kernel takes batches, -1: it does not */
static _Atomic unsigned unclear; /* calls that taught nothing while batching was not known */

TSLAB_INTERNAL bool tslab_os_release_batches(void) {
  return atomic_load_explicit(&batching, memory_order_relaxed) > 0 &&
         !(atomic_load_explicit(&fault_ops, memory_order_relaxed) & TSLAB_FAULT_BATCH);
}

static void batching_learnt(int mode) {
  int unknown = 0;
  atomic_compare_exchange_strong_explicit(&batching, &unknown, mode, memory_order_relaxed, memory_order_relaxed);
}

/* What one process_madvise call over v[0..k) did. */
enum batch_result {
  BATCH_TAKEN,    /* *done: the ranges released whole, in order (the kernel stops at the first it cannot advise) */
  BATCH_REFUSED,  /* the call itself (EBADF, ENOSYS, ESRCH): no batching here */
  BATCH_UNCLEAR,  /* any other error (EINVAL, EPERM, ENOMEM...): the call, or the first range */
  BATCH_FAULTED   /* refused by fault injection (TSLAB_FAULT_BATCH): nothing learnt */
};

static enum batch_result release_batched(const struct iovec* v, size_t k, size_t* done) {
#ifdef SYS_process_madvise
  if (atomic_load_explicit(&fault_ops, memory_order_relaxed) & TSLAB_FAULT_BATCH) return BATCH_FAULTED;
  long got = syscall(SYS_process_madvise, TSLAB_PIDFD_SELF_THREAD, v, k, MADV_DONTNEED, 0u);
  if (got < 0) return errno == EBADF || errno == ENOSYS || errno == ESRCH ? BATCH_REFUSED : BATCH_UNCLEAR;
  batching_learnt(1);
  size_t n = 0;
  for (size_t left = (size_t)got; n < k && left >= v[n].iov_len; n++) left -= v[n].iov_len;
  *done = n;
  return BATCH_TAKEN;
#else
  (void)v;
  (void)k;
  (void)done;
  return BATCH_REFUSED;
#endif
}

TSLAB_INTERNAL size_t tslab_os_release_ranges(const struct iovec* ranges, size_t n, bool* ok) {
  size_t calls = 0;
  for (size_t i = 0; i < n;) {
    /* The next stretch [i, j) of ranges fault injection lets through; it
     * stops at a refused one (j, then skipped). */
    size_t j = i, done = 0;
    bool refused = false;
    for (; j < n && j - i < RELEASE_BATCH; j++) {
      ok[j] = false;
      if ((refused = fault_fires(TSLAB_FAULT_RELEASE))) break;
    }
    int mode = atomic_load_explicit(&batching, memory_order_relaxed);
    enum batch_result tried = BATCH_REFUSED;
    if (j > i && (mode > 0 ? j - i > 1 : mode == 0)) {
      tried = release_batched(ranges + i, j - i, &done);
      if (tried == BATCH_TAKEN) {
        calls += done != 0;
        for (size_t k = i; k < i + done; k++) ok[k] = true;
      }
    }
    /* The rest one by one: all of them without batching, else those from
     * the range the batch stopped at (which gets its own verdict). */
    for (size_t k = i + done; k < j; k++) {
      ok[k] = madvise(ranges[k].iov_base, ranges[k].iov_len, MADV_DONTNEED) == 0;
      calls += ok[k];
    }
    if (mode == 0 && j > i &&
        (tried == BATCH_REFUSED ||
         (tried == BATCH_UNCLEAR &&
          (ok[i] || atomic_fetch_add_explicit(&unclear, 1, memory_order_relaxed) + 1 >= UNCLEAR_MAX))))
      batching_learnt(-1);
    i = refused ? j + 1 : j;
  }
  return calls;
}

/* Fault a committed range in ahead of use: one system call instead of a
 * page fault per 4 KiB for a phase that grows fast. Best effort: kernels
 * without MADV_POPULATE_WRITE (before 5.14) fault the pages in on first
 * touch as usual. */
TSLAB_INTERNAL void tslab_os_populate(void* p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  static _Atomic bool unsupported;
  if (atomic_load_explicit(&unsupported, memory_order_relaxed)) return;
  if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
    atomic_store_explicit(&unsupported, true, memory_order_relaxed);
#else
  (void)p;
  (void)bytes;
#endif
}

TSLAB_INTERNAL void tslab_os_unmap(void* p, size_t bytes) {
  if (p) munmap(p, bytes);
}

TSLAB_INTERNAL void* tslab_os_map(size_t bytes) {
  if (fault_fires(TSLAB_FAULT_COMMIT)) return NULL;
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* ---- asymmetric fence ---- */

/* The heavy side of the asymmetric fence must make every running thread of
 * the process execute a full barrier. membarrier(PRIVATE_EXPEDITED) does
 * exactly that. Where it is missing (kernels before 4.14, some sandboxes), a
 * permission downgrade of a touched page does too: the kernel must shoot the
 * page's translation down on every CPU that runs this process, and the
 * interrupt serialises each of them. The fast path stays a compiler barrier
 * either way. */

static void global_init(void) {
  long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
      syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
    tslab_membarrier_ok = true;
#if !(defined(__x86_64__) || defined(__i386__))
  tslab_fast_path_fences = !tslab_membarrier_ok;
#endif
#if !defined(__POPCNT__) && defined(__x86_64__)
  __builtin_cpu_init();
  tslab_cpu_popcnt = __builtin_cpu_supports("popcnt");
#endif
  tslab_classes_init();
  tslab_fork_init();
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

/* The process-wide set-up, once: at load time, or by the first
 * tslab_create when that comes first (another library's constructor, or a
 * malloc built on the library linked statically, can run before ours). */
TSLAB_INTERNAL void tslab_global_init(void) { pthread_once(&global_once, global_init); }

__attribute__((constructor)) static void tslab_os_init(void) { tslab_global_init(); }

#if defined(__x86_64__) || defined(__i386__)
static pthread_mutex_t fence_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile char* fence_page;

static void tlb_shootdown_fence(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  pthread_mutex_lock(&fence_mu);
  if (!fence_page) {
    void* p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) fence_page = p;
  }
  if (fence_page) {
    *fence_page = 1; /* present and writable, so the downgrade must flush */
    mprotect((void*)fence_page, page, PROT_READ);
    mprotect((void*)fence_page, page, PROT_READ | PROT_WRITE);
  }
  pthread_mutex_unlock(&fence_mu);
  atomic_thread_fence(memory_order_seq_cst);
}
#endif

TSLAB_INTERNAL void tslab_os_heavy_fence(void) {
  if (tslab_membarrier_ok && syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
    return;
#if defined(__x86_64__) || defined(__i386__)
  tlb_shootdown_fence();
#else
  atomic_thread_fence(memory_order_seq_cst); /* the fast path fences itself */
#endif
}

/* A random 64-bit number for per-instance seeds (handle generations). */
TSLAB_INTERNAL uint64_t tslab_os_random(void) {
  uint64_t r = 0;
  if (syscall(SYS_getrandom, &r, sizeof r, 0) == (long)sizeof r) return r;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
}

/* ---- clocks and RSS ---- */

TSLAB_API uint64_t tslab_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The coarse monotonic clock: a few nanoseconds to read (the fine one costs
 * tens here), a few milliseconds of resolution. Epoch ages use it. */
TSLAB_INTERNAL uint64_t tslab_coarse_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

TSLAB_INTERNAL uint64_t tslab_os_thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The process's resident bytes, from /proc/self/statm. The file is opened
 * for each reading: a descriptor kept open belongs to the program's table,
 * where a fork child or a program that closes every descriptor (a daemon's
 * closefrom) would find its number taken by a file of its own, which the
 * allocator would then read from and close (found by review). And the calls
 * go straight to the kernel: the C library's open, pread and close are
 * cancellation points, and an epoch close reads RSS after it has marked its
 * era CLOSING, so a thread cancelled there left the era closing for good and
 * every later close of it waiting (found by review). Epoch closes read RSS
 * only when they release memory, with system calls of their own. */
TSLAB_API uint64_t tslab_process_rss(void) {
  long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  long n = syscall(SYS_pread64, (int)fd, buf, sizeof buf - 1, (off_t)0);
  syscall(SYS_close, (int)fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  /* "size resident shared ...": the second field, in pages. */
  const char* c = buf;
  while (*c && *c != ' ') c++;
  if (*c != ' ') return 0;
  uint64_t resident = 0;
  for (c++; *c >= '0' && *c <= '9'; c++) resident = resident * 10 + (uint64_t)(*c - '0');
  return resident * tslab_os_page_size();
}
