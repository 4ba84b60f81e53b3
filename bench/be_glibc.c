/* glibc malloc, plain malloc/free: it has no phase-scoped API. */
#include <gnu/libc-version.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

const char* const be_name = "glibc";
const char* const be_default_mode = "plain";

int be_init(const char* mode) { return strcmp(mode, "plain") == 0 ? 0 : -1; }
void* be_alloc(size_t size) { return malloc(size); }
void be_free(void* p) { free(p); }
be_phase_t be_phase_begin(void) { return 0; }
void* be_phase_alloc(be_phase_t ph, size_t size) {
  (void)ph;
  return malloc(size);
}
void be_phase_free(be_phase_t ph, void* p) {
  (void)ph;
  free(p);
}
void be_phase_end(be_phase_t ph) { (void)ph; }
int be_phase_free_all(be_phase_t ph) {
  (void)ph;
  return -1;
}
const char* be_version(void) { return gnu_get_libc_version(); }
void be_report(FILE* out) { (void)out; }
