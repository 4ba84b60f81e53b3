/* The bootstrap arena: memory for the allocations the instance cannot serve.
 *
 * Three kinds of call land here. Allocations made while the process
 * instance is being created (the core registers the instance in a table it
 * grows with realloc), allocations made by core code that the drop-in
 * itself called on a slow path (a thread cache's table, the HTTP endpoint's
 * buffers and thread): serving them from the instance would recurse into
 * the call that is running, possibly under one of its locks. And
 * allocations made before the core's constructor ran (process.c). They are
 * few and mostly small, so the arena is a bump
 * allocator that never frees: a static area first (no system call, and it
 * costs no memory until touched), then mappings of their own, whose ranges
 * are recorded so that free() and malloc_usable_size() recognise every
 * block. No lock: a compare-and-swap on the bump offset, so a fork in the
 * middle leaves nothing locked. Blocks are never reused, so they are zero
 * (the static area is in .bss, mappings are fresh): calloc needs no memset. */
#include <string.h>
#include <sys/mman.h>

#include "dropin.h"

#define AREA_BYTES ((size_t)1 << 20)
#define HEADER 16u           /* the block's usable size, just before it */
#define MAPPINGS_MAX 256u
#define MAPPING_ROUND ((size_t)64 << 10)

static _Alignas(4096) unsigned char area[AREA_BYTES];
static _Atomic size_t area_used;

static struct {
  _Atomic uintptr_t start;   /* 0 until the range is complete */
  uintptr_t end;
} mappings[MAPPINGS_MAX];
static _Atomic uint32_t mappings_used;

static uintptr_t align_up(uintptr_t x, size_t alignment) {
  return (x + alignment - 1) & ~(uintptr_t)(alignment - 1);
}

/* The block at the first suitably aligned address past room for a header in
 * [start, end); 0 when it does not fit. */
static uintptr_t place(uintptr_t start, uintptr_t end, size_t size, size_t alignment) {
  uintptr_t user = align_up(start + HEADER, alignment);
  return user + size < user || user + size > end ? 0 : user;
}

static void* stamp(uintptr_t user, size_t size) {
  *(size_t*)(user - HEADER) = size;
  return (void*)user;
}

static void* from_area(size_t size, size_t alignment) {
  size_t used = atomic_load_explicit(&area_used, memory_order_relaxed);
  for (;;) {
    uintptr_t user = place((uintptr_t)area + used, (uintptr_t)area + AREA_BYTES, size, alignment);
    if (!user) return NULL;
    size_t next = (size_t)(align_up(user + size, HEADER) - (uintptr_t)area);
    if (atomic_compare_exchange_weak_explicit(&area_used, &used, next, memory_order_relaxed,
                                              memory_order_relaxed))
      return stamp(user, size);
  }
}

static void* from_mapping(size_t size, size_t alignment) {
  if (size > SIZE_MAX / 2 || alignment > SIZE_MAX / 4) return NULL;
  size_t span = align_up(size + HEADER + alignment, MAPPING_ROUND);
  uint32_t i = atomic_fetch_add_explicit(&mappings_used, 1, memory_order_relaxed);
  if (i >= MAPPINGS_MAX) return NULL;
  void* m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  mappings[i].end = (uintptr_t)m + span;
  atomic_store_explicit(&mappings[i].start, (uintptr_t)m, memory_order_release);
  return stamp(place((uintptr_t)m, (uintptr_t)m + span, size, alignment), size);
}

void* dropin_bootstrap_alloc(size_t size, size_t alignment) {
  if (size == 0) size = 1;
  if (alignment < HEADER) alignment = HEADER;
  void* p = from_area(size, alignment);
  if (!p) p = from_mapping(size, alignment);
  if (p) {
    DROPIN_COUNT(bootstrap_allocs);
    atomic_fetch_add_explicit(&dropin_counters.bootstrap_bytes, size, memory_order_relaxed);
  }
  return p;
}

bool dropin_bootstrap_owns(const void* p, size_t* usable) {
  uintptr_t x = (uintptr_t)p;
  bool owned = x >= (uintptr_t)area + HEADER && x < (uintptr_t)area + AREA_BYTES;
  uint32_t n = atomic_load_explicit(&mappings_used, memory_order_relaxed);
  if (n > MAPPINGS_MAX) n = MAPPINGS_MAX;
  for (uint32_t i = 0; i < n && !owned; i++) {
    uintptr_t start = atomic_load_explicit(&mappings[i].start, memory_order_acquire);
    owned = start != 0 && x >= start + HEADER && x < mappings[i].end;
  }
  if (owned && usable) *usable = *(const size_t*)(x - HEADER);
  return owned;
}
