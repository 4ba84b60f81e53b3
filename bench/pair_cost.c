/* The cost of one 128 B alloc+free pair, tslab against glibc malloc, in the
 * same run: the median of several interleaved repeats of each.
 * Usage: pair_cost [repeats=7] [pairs=10000000] */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "tslab.h"

/* Makes p escape so the compiler cannot drop a malloc/free pair. */
#define ESCAPE(p) __asm__ volatile("" : : "r"(p) : "memory")

static double tslab_pairs(tslab_t* a, tslab_epoch_t e, long pairs) {
  uint64_t t0 = h_now_ns();
  for (long i = 0; i < pairs; i++) {
    void* p = tslab_alloc(a, 128, e);
    ESCAPE(p);
    tslab_free(a, p);
  }
  return (double)(h_now_ns() - t0) / (double)pairs;
}

static double malloc_pairs(long pairs) {
  uint64_t t0 = h_now_ns();
  for (long i = 0; i < pairs; i++) {
    void* p = malloc(128);
    ESCAPE(p);
    free(p);
  }
  return (double)(h_now_ns() - t0) / (double)pairs;
}

static int cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

int main(int argc, char** argv) {
  enum { MAX_REPEATS = 101 };
  int repeats = argc > 1 ? atoi(argv[1]) : 7;
  long pairs = argc > 2 ? atol(argv[2]) : 10000000;
  if (repeats < 1 || repeats > MAX_REPEATS || pairs < 1) {
    fprintf(stderr, "usage: pair_cost [repeats 1..%d] [pairs]\n", MAX_REPEATS);
    return 1;
  }
  tslab_t* a = tslab_create(NULL);
  if (a == NULL) {
    fprintf(stderr, "tslab_create: %s\n", tslab_strerror(tslab_last_error()));
    return 2;
  }
  tslab_epoch_t e = tslab_epoch_current(a);
  double ts[MAX_REPEATS], ms[MAX_REPEATS];
  tslab_pairs(a, e, pairs / 10 + 1);
  malloc_pairs(pairs / 10 + 1);
  for (int r = 0; r < repeats; r++) {
    ts[r] = tslab_pairs(a, e, pairs);
    ms[r] = malloc_pairs(pairs);
  }
  qsort(ts, (size_t)repeats, sizeof *ts, cmp_double);
  qsort(ms, (size_t)repeats, sizeof *ms, cmp_double);
  double t = ts[repeats / 2], m = ms[repeats / 2];
  printf("128 B alloc+free pair, median of %d x %ld pairs\n", repeats, pairs);
  printf("  tslab         %6.2f ns/pair\n", t);
  printf("  glibc malloc  %6.2f ns/pair\n", m);
  printf("  tslab / glibc %6.2f\n", t / m);
  tslab_destroy(a);
  return 0;
}
