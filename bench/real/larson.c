/* larson: the server simulation of Larson and Krishnan, "Memory allocation
 * for long-running server applications" (ISMM 1998), as the allocator
 * benchmark suites run it. Each thread owns an array of blocks of random
 * sizes; it repeatedly frees a random block and allocates a new one of a
 * random size in its place. After a number of such rounds the thread starts
 * a new thread that takes over its array, and ends; so blocks are freed by
 * threads other than the one that allocated them, as in a server whose
 * worker threads come and go. The published runs use sizes 8..1000 bytes.
 *
 * Usage: larson THREADS GENERATIONS ROUNDS BLOCKS [MIN MAX]
 * (work is fixed: THREADS * GENERATIONS * ROUNDS replacements) */
#include <pthread.h>

#include "bench_common.h"

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static long lanes_running;

typedef struct {
  void** blocks;
  size_t* sizes;
  long nblocks, rounds, generations_left;
  size_t min, max;
  uint64_t seed;
  int bad;
} lane_t;

/* The random state and verdict live on the thread's stack while it runs:
 * the lanes share cache lines, and a shared line written on every
 * replacement would measure the program's false sharing, not the
 * allocator's. The next generation takes them over from the lane. */
static void* worker(void* arg) {
  lane_t* l = arg;
  uint64_t seed = l->seed;
  int bad = 0;
  for (long r = 0; r < l->rounds && !bad; r++) {
    for (long i = 0; i < l->nblocks; i++) {
      long k = (long)(rng_next(&seed) % (uint64_t)l->nblocks);
      if (l->blocks[k]) {
        bad |= !stamped(l->blocks[k], l->sizes[k]);
        free(l->blocks[k]);
      }
      size_t n = l->min + rng_next(&seed) % (l->max - l->min + 1);
      l->blocks[k] = malloc(n);
      if (!l->blocks[k]) {
        bad = 1;
        break;
      }
      l->sizes[k] = n;
      stamp(l->blocks[k], n);
    }
  }
  l->seed = seed;
  l->bad |= bad;
  /* Hand the array to a new thread: this one ends, its blocks live on. A
   * lane that went wrong stops here and is reported. */
  pthread_t t;
  if (!l->bad && --l->generations_left > 0 && pthread_create(&t, NULL, worker, l) == 0) {
    pthread_detach(t);
    return NULL;
  }
  if (l->generations_left > 0) l->bad = 1;
  pthread_mutex_lock(&done_mu);
  lanes_running--;
  pthread_cond_signal(&done_cv);
  pthread_mutex_unlock(&done_mu);
  return NULL;
}

int main(int argc, char** argv) {
  long threads = arg_long(argc, argv, 1, 2), gens = arg_long(argc, argv, 2, 20);
  long rounds = arg_long(argc, argv, 3, 10), nblocks = arg_long(argc, argv, 4, 5000);
  size_t min = (size_t)arg_long(argc, argv, 5, 8), max = (size_t)arg_long(argc, argv, 6, 1000);
  lane_t* lanes = calloc((size_t)threads, sizeof *lanes);
  lanes_running = threads;
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
    pthread_t t;
    if (pthread_create(&t, NULL, worker, l) != 0) return 1;
    pthread_detach(t);
  }
  pthread_mutex_lock(&done_mu);
  while (lanes_running > 0) pthread_cond_wait(&done_cv, &done_mu);
  pthread_mutex_unlock(&done_mu);
  int bad = 0;
  for (long i = 0; i < threads; i++) {
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
