/* Shared by the pattern examples: each example checks the outcome it
 * demonstrates and stops with a non-zero exit status when it is wrong, so the
 * test suite notices. */
#ifndef TSLAB_EXAMPLE_CHECK_H
#define TSLAB_EXAMPLE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
