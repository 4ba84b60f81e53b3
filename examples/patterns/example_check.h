/* Shared by the pattern examples: each example checks the outcome it
 * demonstrates and stops with a non-zero exit status when it is wrong, so the
 * test suite notices. */
#ifndef TSLAB_EXAMPLE_CHECK_H
#define TSLAB_EXAMPLE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "tslab.h"

#define EXPECT(cond, ...)                                                         \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);         \
      fprintf(stderr, __VA_ARGS__);                                               \
      fputc('\n', stderr);                                                        \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

/* The empty memory the allocator keeps resident for the next epochs (its
 * bounded hot reserve): an epoch's memory that is not returned to the OS at
 * its close is kept there, never lost. */
static inline uint64_t hot_reserve(tslab_t* a) {
  tslab_stats_global_t g;
  return tslab_stats_global(a, &g) == TSLAB_OK ? g.reserve_bytes : 0;
}

#endif
