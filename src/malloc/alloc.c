/* The slow paths of the malloc family, and the pointers that are not ours.
 *
 * The exported functions (override.c) try the core's fast call with the
 * thread's epoch and come here only when it did not succeed: the thread has
 * no epoch yet (first allocation, or the guard is raised), the request is
 * one the core refuses but malloc must serve (size 0), the epoch no longer
 * accepts allocations, or memory ran out. Everything that may allocate
 * inside the core runs with the guard raised.
 *
 * A pointer outside the instance's reservation that is not a bootstrap
 * block is foreign: memory the dynamic loader handed out before the C
 * library's malloc was bound, or memory of another allocator (a library that
 * calls the C library's allocator under another name). Giving it to any
 * allocator could crash the program, so the drop-in leaves it alone and
 * counts it: free ignores it, realloc copies what can be read of it into a
 * new block, malloc_usable_size says 0. A pointer inside the reservation
 * that is not live (freed twice, interior) is an invalid free, which the
 * instance counts: free ignores it, realloc fails with EINVAL,
 * malloc_usable_size says 0. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dropin.h"

static void* alloc_in(tslab_t* a, size_t size, size_t alignment, bool zero, tslab_epoch_t e) {
  if (alignment) return tslab_aligned_alloc(a, alignment, size, e);
  return zero ? tslab_calloc(a, 1, size, e) : tslab_alloc(a, size, e);
}

void* dropin_alloc_slow(size_t size, size_t alignment, bool zero) {
  if (dropin_tls.guard) return dropin_bootstrap_alloc(size, alignment);
  size = dropin_request(size);
  void* p = NULL;
  dropin_guard_enter();
  if (!dropin_process_init()) {
    if (!dropin_process_failed()) p = dropin_bootstrap_alloc(size, alignment); /* core not ready */
  } else {
    tslab_t* a = dropin_heap();
    tslab_epoch_t e = dropin_thread_epoch();
    /* The scope's epoch, then the process epoch, renewed while other
     * threads' advances keep closing it (more requests in flight than the
     * ring has slots force-close the oldest epoch, the process one among
     * them): a malloc fails only when memory does (found by review: three
     * tries, then NULL with memory to spare). Past the first tries the
     * thread yields, so the advances that close the epoch finish. */
    for (int attempt = 0; attempt < 1000 && !p; attempt++) {
      p = alloc_in(a, size, alignment, zero, e);
      if (p) break;
      int st = tslab_last_error();
      if (st != TSLAB_ERR_EPOCH_CLOSED && st != TSLAB_ERR_EPOCH_STALE) break;
      if (attempt >= 3) sched_yield();
      tslab_epoch_t process = dropin_process_epoch();
      if (e != process) {
        DROPIN_COUNT(scope_fallbacks);
        e = process;
      } else {
        e = dropin_process_epoch_renew(e);
      }
    }
  }
  dropin_guard_exit();
  if (!p) errno = ENOMEM;
  return p;
}

void dropin_free_slow(void* p) {
  if (p == NULL || dropin_bootstrap_owns(p, NULL) || tslab_owns(dropin_heap(), p)) return;
  DROPIN_COUNT(foreign_frees);
}

/* Copy up to n bytes of a foreign block whose size is unknown: page by page,
 * stopping at the first page that cannot be read (process_vm_readv on the
 * own process reports an unreadable page instead of faulting). Where the
 * call is not permitted, only the rest of p's own page is copied. Bytes past
 * the old block's end are indeterminate in a realloc anyway. */
static void copy_readable(void* dst, const void* src, size_t n) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  int saved = errno;
  pid_t self = getpid();
  size_t done = 0;
  while (done < n) {
    uintptr_t at = (uintptr_t)src + done;
    size_t chunk = page - (size_t)(at & (page - 1));
    if (chunk > n - done) chunk = n - done;
    struct iovec local = {(char*)dst + done, chunk}, remote = {(void*)at, chunk};
    ssize_t got = process_vm_readv(self, &local, 1, &remote, 1, 0);
    if (got != (ssize_t)chunk) {
      if (got < 0 && done == 0 && (errno == ENOSYS || errno == EPERM)) memcpy(dst, src, chunk);
      break;
    }
    done += chunk;
  }
  errno = saved;
}

/* A new block of size bytes in the thread's epoch holding the first bytes of
 * p (copied bytes of it: up to old, or what can be read when old is 0). */
static void* move(const void* p, size_t old, size_t size) {
  void* q = malloc(size);
  if (!q) return NULL;
  if (old)
    memcpy(q, p, old < size ? old : size);
  else
    copy_readable(q, p, size);
  return q;
}

void* dropin_realloc(void* p, size_t size) {
  if (p == NULL) return malloc(size);
  if (size == 0) { /* the C library's answer: free and return NULL */
    free(p);
    return NULL;
  }
  tslab_t* a = dropin_heap();
  if (a) {
    void* q = tslab_realloc(a, p, dropin_request(size));
    if (q) return q;
    int st = tslab_last_error();
    if (st == TSLAB_ERR_EPOCH_CLOSED || st == TSLAB_ERR_EPOCH_STALE) {
      /* A block of a closed epoch cannot move within it: it moves to the
       * epoch the thread allocates in now. */
      q = move(p, tslab_usable_size(a, p), size);
      if (q) tslab_free(a, p);
      return q;
    }
    if (st != TSLAB_ERR_INVALID_POINTER) {
      errno = ENOMEM;
      return NULL;
    }
  }
  size_t old = 0;
  if (!dropin_bootstrap_owns(p, &old)) {
    /* Not a live block of ours: an invalid pointer into our memory gets the
     * C library's answer to a bad realloc (its bytes are not the caller's
     * any more); another allocator's block is copied out. */
    if (tslab_owns(a, p)) {
      errno = EINVAL;
      return NULL;
    }
    DROPIN_COUNT(foreign_reallocs);
  }
  return move(p, old, size);
}

size_t dropin_usable_size_slow(const void* p) {
  size_t n = 0;
  if (p == NULL || dropin_bootstrap_owns(p, &n) || tslab_owns(dropin_heap(), p)) return n;
  DROPIN_COUNT(foreign_usable_size);
  return 0;
}
