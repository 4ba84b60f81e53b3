/* mimalloc through mi_malloc/mi_free; in "heap" mode each phase gets its own
 * heap (mi_heap_new) that is destroyed with everything in it at phase end,
 * which is also its free-all. */
#include <mimalloc.h>
#include <string.h>

#include "backend.h"

const char* const be_name = "mimalloc";
const char* const be_default_mode = "plain";

static int heap_mode;

int be_init(const char* mode) {
  heap_mode = strcmp(mode, "heap") == 0;
  return heap_mode || strcmp(mode, "plain") == 0 ? 0 : -1;
}
void* be_alloc(size_t size) { return mi_malloc(size); }
void be_free(void* p) { mi_free(p); }
be_phase_t be_phase_begin(void) { return heap_mode ? (be_phase_t)(uintptr_t)mi_heap_new() : 0; }
void* be_phase_alloc(be_phase_t ph, size_t size) {
  return heap_mode ? mi_heap_malloc((mi_heap_t*)(uintptr_t)ph, size) : mi_malloc(size);
}
void be_phase_free(be_phase_t ph, void* p) {
  (void)ph;
  mi_free(p);
}
void be_phase_end(be_phase_t ph) {
  if (heap_mode) mi_heap_destroy((mi_heap_t*)(uintptr_t)ph);
}
/* mi_heap_destroy frees whatever the heap still holds. */
int be_phase_free_all(be_phase_t ph) {
  if (!heap_mode) return -1;
  be_phase_end(ph);
  return 0;
}
const char* be_version(void) {
  static char v[16];
  int n = mi_version();
  snprintf(v, sizeof v, "%d.%d.%d", n / 100, n / 10 % 10, n % 10);
  return v;
}
void be_report(FILE* out) { (void)out; }
