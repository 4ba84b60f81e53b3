/* pair_cost: what the drop-in adds to the core's fast paths. Run under
 * LD_PRELOAD of libtslab-malloc.so and callgrind, N allocation/free pairs of
 * SIZE bytes, either through malloc/free ("malloc") or through the same
 * library's tslab_alloc/tslab_free on the process epoch ("core"). The
 * difference of two runs with different N, divided by the difference of N,
 * is the instructions per pair without start-up (docs/DROPIN.md).
 *
 * Usage: pair_cost malloc|core N [SIZE] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void* (*alloc_fn)(void*, size_t, uint64_t);
typedef bool (*free_fn)(void*, void*);

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long n = strtol(argv[2], NULL, 10);
  size_t size = argc > 3 ? (size_t)strtol(argv[3], NULL, 10) : 64;
  void* volatile sink;
  if (!strcmp(argv[1], "malloc")) {
    for (long i = 0; i < n; i++) {
      void* p = malloc(size);
      sink = p;
      free(p);
    }
  } else {
    void* (*instance)(void) = (void* (*)(void))dlsym(RTLD_DEFAULT, "tslab_malloc_instance");
    uint64_t (*epoch)(void) = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "tslab_malloc_process_epoch");
    alloc_fn a_alloc = (alloc_fn)dlsym(RTLD_DEFAULT, "tslab_alloc");
    free_fn a_free = (free_fn)dlsym(RTLD_DEFAULT, "tslab_free");
    if (!instance || !epoch || !a_alloc || !a_free) return 2;
    void* a = instance();
    uint64_t e = epoch();
    for (long i = 0; i < n; i++) {
      void* p = a_alloc(a, size, e);
      sink = p;
      a_free(a, p);
    }
  }
  (void)sink;
  return 0;
}
