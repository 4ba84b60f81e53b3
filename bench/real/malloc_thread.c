/* malloc-thread: the thread test of glibc's benchtests (bench-malloc-thread):
 * each thread keeps a working set of 1024 blocks and, for a fixed number of
 * iterations, frees a random one and allocates a new one in its place, with
 * sizes drawn from a distribution weighted towards small blocks (most under
 * a few hundred bytes, a tail up to 32 KiB), as glibc's benchmark draws them.
 *
 * Usage: malloc_thread THREADS ITERATIONS */
#include <pthread.h>

#include "bench_common.h"

#define WORKING_SET 1024
#define MAX_SIZE 32768

typedef struct {
  long iterations;
  uint64_t seed;
  int bad;
} lane_t;

/* Mostly small: the size's bit length is uniform, so each power-of-two band
 * from 16 B to 32 KiB is drawn about as often (an inverse distribution). */
static size_t draw_size(uint64_t* seed) {
  unsigned bits = 4 + (unsigned)(rng_next(seed) % 12); /* 16 .. 32768 */
  size_t lo = (size_t)1 << (bits - 1);
  return lo + rng_next(seed) % lo;
}

/* The lane's random state and verdict live on the thread's stack while it
 * runs: the lanes share cache lines, and a shared line written on every
 * iteration would measure the program's false sharing, not the allocator
 * (glibc's benchmark draws from read-only tables). */
static void* worker(void* arg) {
  lane_t* l = arg;
  uint64_t seed = l->seed;
  int bad = 0;
  void* ws[WORKING_SET] = {0};
  size_t sz[WORKING_SET] = {0};
  for (long i = 0; i < l->iterations; i++) {
    size_t k = rng_next(&seed) % WORKING_SET;
    if (ws[k]) {
      bad |= !stamped(ws[k], sz[k]);
      free(ws[k]);
    }
    sz[k] = draw_size(&seed);
    ws[k] = malloc(sz[k]);
    if (!ws[k]) {
      bad = 1;
      break;
    }
    stamp(ws[k], sz[k]);
  }
  for (size_t k = 0; k < WORKING_SET; k++) {
    if (ws[k]) bad |= !stamped(ws[k], sz[k]);
    free(ws[k]);
  }
  l->bad = bad;
  return NULL;
}

int main(int argc, char** argv) {
  long threads = arg_long(argc, argv, 1, 1), iterations = arg_long(argc, argv, 2, 2000000);
  lane_t* l = calloc((size_t)threads, sizeof *l);
  pthread_t* t = calloc((size_t)threads, sizeof *t);
  for (long i = 0; i < threads; i++) {
    l[i] = (lane_t){iterations, 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 7), 0};
    if (pthread_create(&t[i], NULL, worker, &l[i]) != 0) {
      fprintf(stderr, "malloc-thread: cannot start a thread\n");
      return 1;
    }
  }
  int bad = 0;
  for (long i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    bad |= l[i].bad;
  }
  printf("malloc-thread: %ld threads x %ld iterations: %s\n", threads, iterations, bad ? "WRONG" : "ok");
  return bad;
}
