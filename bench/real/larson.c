/* larson: the server simulation of Larson and Krishnan, "Memory allocation
 * for long-running server applications" (ISMM 1998), as the allocator
 * benchmark suites run it. Each thread owns an array of blocks of random
 * sizes; it repeatedly frees a random block and allocates a new one of a
 * random size in its place. After a number of such rounds the thread ends
 * and a new thread takes over its array, so blocks are freed by threads
 * other than the one that allocated them, as in a server whose worker
 * threads come and go. The published runs use sizes 8..1000 bytes.
 *
 * Usage: larson THREADS GENERATIONS ROUNDS BLOCKS [MIN MAX]
 * (work is fixed: THREADS * GENERATIONS * ROUNDS replacements) */
#include <pthread.h>

#include "bench_common.h"

typedef struct {
  void** blocks;
  size_t* sizes;
  long nblocks, rounds, generations_left;
  size_t min, max;
  uint64_t seed;
  int bad;
} lane_t;

static void* worker(void* arg) {
  lane_t* l = arg;
  for (long r = 0; r < l->rounds; r++) {
    for (long i = 0; i < l->nblocks; i++) {
      long k = (long)(rng_next(&l->seed) % (uint64_t)l->nblocks);
      if (l->blocks[k]) {
        l->bad |= !stamped(l->blocks[k], l->sizes[k]);
        free(l->blocks[k]);
      }
      size_t n = l->min + rng_next(&l->seed) % (l->max - l->min + 1);
      l->blocks[k] = malloc(n);
      if (!l->blocks[k]) {
        l->bad = 1;
        return NULL;
      }
      l->sizes[k] = n;
      stamp(l->blocks[k], n);
    }
  }
  /* Hand the array to a new thread: this one ends, its blocks live on. */
  if (--l->generations_left > 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, l) != 0) {
      l->bad = 1;
      return NULL;
    }
    pthread_join(t, NULL);
  }
  return NULL;
}

int main(int argc, char** argv) {
  long threads = arg_long(argc, argv, 1, 2), gens = arg_long(argc, argv, 2, 20);
  long rounds = arg_long(argc, argv, 3, 10), nblocks = arg_long(argc, argv, 4, 5000);
  size_t min = (size_t)arg_long(argc, argv, 5, 8), max = (size_t)arg_long(argc, argv, 6, 1000);
  lane_t* lanes = calloc((size_t)threads, sizeof *lanes);
  pthread_t* t = calloc((size_t)threads, sizeof *t);
  for (long i = 0; i < threads; i++) {
    lane_t* l = &lanes[i];
    l->blocks = calloc((size_t)nblocks, sizeof *l->blocks);
    l->sizes = calloc((size_t)nblocks, sizeof *l->sizes);
    l->nblocks = nblocks;
    l->rounds = rounds;
    l->generations_left = gens;
    l->min = min;
    l->max = max;
    l->seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
    pthread_create(&t[i], NULL, worker, l);
  }
  int bad = 0;
  for (long i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    lane_t* l = &lanes[i];
    for (long k = 0; k < nblocks; k++) {
      if (l->blocks[k]) bad |= !stamped(l->blocks[k], l->sizes[k]);
      free(l->blocks[k]);
    }
    bad |= l->bad;
    free(l->blocks);
    free(l->sizes);
  }
  printf("larson: %ld threads x %ld generations x %ld rounds of %ld blocks: %s\n", threads, gens,
         rounds, nblocks, bad ? "WRONG" : "ok");
  return bad;
}
