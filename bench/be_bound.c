/* The bound: what a phase workload costs with an allocator that does no work
 * per object. Each phase bumps a pointer through an arena of its own and
 * frees nothing; its end gives the arena back whole, and the next phase to
 * begin takes the arena given back last (its lines are the likeliest in the
 * cache, as an allocator's recently freed memory is). It is a reference for
 * the report, not a peer: it keeps none of an allocator's promises (a freed
 * object's memory is not reused within its phase, nothing is validated, a
 * phase that outgrows its arena fails). Where the allocator's calls cost
 * time, an allocator cannot run the workload faster than this; where the
 * workload's own reads and writes dominate, the order in which an allocator
 * hands out memory can make them run faster or slower than in ascending
 * addresses (docs/BENCHMARKS.md, "The bound"). Objects that belong to no
 * phase go to glibc malloc.
 *
 * The suite's workloads keep a few phases open at once at most (the 'steady'
 * server pattern two), far below ARENAS. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"

const char* const be_name = "bound";
const char* const be_default_mode = "arena";

enum { ARENAS = 16 };
#define ARENA_BYTES ((size_t)256 << 20)

static unsigned char* arenas;
static size_t top[ARENAS];
static unsigned spare[ARENAS], spares; /* arenas no phase holds, the one given back last on top */

int be_init(const char* mode) {
  if (strcmp(mode, "arena") != 0) return -1;
  /* Address space only: a phase's pages become resident as it writes them. */
  void* p = mmap(NULL, ARENAS * ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return -1;
  arenas = p;
  for (unsigned i = 0; i < ARENAS; i++) spare[spares++] = ARENAS - 1 - i;
  return 0;
}

void* be_alloc(size_t size) { return malloc(size); }
void be_free(void* p) { free(p); }

/* More phases open than arenas: the workload's allocations fail, and it
 * says so. */
be_phase_t be_phase_begin(void) {
  if (spares == 0) return ARENAS;
  unsigned i = spare[--spares];
  top[i] = 0;
  return i;
}

/* 16-byte aligned, as malloc's objects are. */
void* be_phase_alloc(be_phase_t ph, size_t size) {
  if (ph >= ARENAS) return NULL;
  size_t sz = (size + 15) & ~(size_t)15;
  if (sz > ARENA_BYTES - top[ph]) return NULL;
  void* p = arenas + ph * ARENA_BYTES + top[ph];
  top[ph] += sz;
  return p;
}

void be_phase_free(be_phase_t ph, void* p) {
  (void)ph;
  (void)p;
}

void be_phase_end(be_phase_t ph) {
  if (ph < ARENAS) spare[spares++] = (unsigned)ph;
}

int be_phase_free_all(be_phase_t ph) {
  be_phase_end(ph);
  return 0;
}

const char* be_version(void) { return "reference (bench/be_bound.c), not a peer"; }
void be_report(FILE* out) { (void)out; }
