/* The drop-in's own functions, looked up at run time: a test program runs
 * the same way under LD_PRELOAD (not linked with the library) and linked
 * with it (shared or static, exporting its symbols). A program that finds
 * no drop-in fails: running on the C library's malloc would prove nothing. */
#ifndef TSLAB_DROPIN_SYM_H
#define TSLAB_DROPIN_SYM_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "tslab_malloc.h"

static void* dropin_sym_or_die(const char* name) {
  void* f = dlsym(RTLD_DEFAULT, name);
  if (!f) {
    fprintf(stderr, "no %s: run this test under LD_PRELOAD=libtslab-malloc.so or link it\n", name);
    exit(1);
  }
  return f;
}

/* SYM(tslab_free)(a, p) calls the drop-in library's tslab_free. */
#define SYM(name) ((__typeof__(&name))dropin_sym_or_die(#name))

/* The process instance's consistency checker must find nothing (call it
 * while no other thread allocates). */
#define DROPIN_CHECK_CONSISTENT()                                                     \
  do {                                                                                \
    char dc_report[256];                                                              \
    size_t dc_n = SYM(tslab_check)(SYM(tslab_malloc_instance)(), dc_report,           \
                                   sizeof dc_report);                                 \
    if (dc_n != 0) {                                                                  \
      fprintf(stderr, "%s:%d: %zu inconsistencies: %s\n", __FILE__, __LINE__, dc_n,   \
              dc_report);                                                             \
      tu_failures++;                                                                  \
    }                                                                                 \
  } while (0)

#endif
