/* jemalloc. Plain mode calls its malloc/free (the library replaces them):
 * in 5.3 only those take the inlined fast path, and mallocx/dallocx measured
 * 1.5-1.8x slower per 128 B pair here. In "arena" mode each phase allocates from
 * an explicit arena with a thread cache of its own; at phase end that cache
 * is flushed and the arena reset, which discards everything in it. Arenas
 * are kept in a pool and reused, as a long-running program would do
 * (jemalloc cannot create arenas without bound). A private cache per arena
 * keeps overlapping phases from handing each other's cached objects out. */
#include <jemalloc/jemalloc.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

const char* const be_name = "jemalloc";
const char* const be_default_mode = "plain";

static int arena_mode;

enum { POOL_MAX = 64 };
static be_phase_t pool[POOL_MAX];
static int pool_n, created;

static void must(int err, const char* what) {
  if (err != 0) {
    fprintf(stderr, "jemalloc: %s failed (%d)\n", what, err);
    exit(2);
  }
}

int be_init(const char* mode) {
  arena_mode = strcmp(mode, "arena") == 0;
  return arena_mode || strcmp(mode, "plain") == 0 ? 0 : -1;
}
void* be_alloc(size_t size) { return malloc(size); }
void be_free(void* p) { free(p); }

/* A phase handle packs the arena index (high half) and its cache (low half). */
be_phase_t be_phase_begin(void) {
  if (!arena_mode) return 0;
  if (pool_n > 0) return pool[--pool_n];
  if (++created > POOL_MAX) must(-1, "more concurrent phases than the arena pool holds");
  unsigned arena, tcache;
  size_t len = sizeof(unsigned);
  must(mallctl("arenas.create", &arena, &len, NULL, 0), "arenas.create");
  must(mallctl("tcache.create", &tcache, &len, NULL, 0), "tcache.create");
  return (be_phase_t)arena << 32 | tcache;
}
void* be_phase_alloc(be_phase_t ph, size_t size) {
  if (!arena_mode) return malloc(size);
  return mallocx(size, MALLOCX_ARENA((unsigned)(ph >> 32)) | MALLOCX_TCACHE((unsigned)ph));
}
void be_phase_free(be_phase_t ph, void* p) {
  if (arena_mode)
    dallocx(p, MALLOCX_TCACHE((unsigned)ph));
  else
    free(p);
}
void be_phase_end(be_phase_t ph) {
  if (!arena_mode) return;
  unsigned tcache = (unsigned)ph;
  must(mallctl("tcache.flush", NULL, NULL, &tcache, sizeof tcache), "tcache.flush");
  char cmd[64];
  snprintf(cmd, sizeof cmd, "arena.%u.reset", (unsigned)(ph >> 32));
  must(mallctl(cmd, NULL, NULL, NULL, 0), "arena.reset");
  pool[pool_n++] = ph;
}
/* The reset at phase end discards whatever the arena still holds. */
int be_phase_free_all(be_phase_t ph) {
  if (!arena_mode) return -1;
  be_phase_end(ph);
  return 0;
}
const char* be_version(void) {
  const char* v = "?";
  size_t len = sizeof v;
  mallctl("version", &v, &len, NULL, 0);
  return v;
}
void be_report(FILE* out) { (void)out; }
