/* cache-scratch: the passive false-sharing test of the Hoard benchmarks
 * (Berger et al., ASPLOS 2000). The main thread allocates one small object
 * per thread and hands it over; each thread frees it, then repeatedly
 * allocates an object of the same size, writes it many times and frees it.
 * An allocator that gives a thread memory on a cache line another thread
 * writes (the freed objects came from one thread) makes the threads fight
 * over the line. The published runs: object size 8, 1000 iterations,
 * repetitions in the millions, 1 and N threads.
 *
 * Usage: cache_scratch THREADS ITERATIONS OBJSIZE REPETITIONS */
#include <pthread.h>

#include "bench_common.h"

typedef struct {
  char* given;
  long iterations, repetitions;
  size_t size;
  int bad;
} work_t;

static void* worker(void* arg) {
  work_t* w = arg;
  free(w->given);
  for (long i = 0; i < w->iterations; i++) {
    volatile char* p = malloc(w->size);
    if (!p) {
      w->bad = 1;
      return NULL;
    }
    for (long r = 0; r < w->repetitions; r++)
      for (size_t k = 0; k < w->size; k++) p[k] = (char)(p[k] + (char)r);
    free((void*)p);
  }
  return NULL;
}

int main(int argc, char** argv) {
  long threads = arg_long(argc, argv, 1, 2), iterations = arg_long(argc, argv, 2, 1000);
  size_t size = (size_t)arg_long(argc, argv, 3, 8);
  long repetitions = arg_long(argc, argv, 4, 2000);
  work_t* w = calloc((size_t)threads, sizeof *w);
  pthread_t* t = calloc((size_t)threads, sizeof *t);
  for (long i = 0; i < threads; i++) {
    w[i] = (work_t){malloc(size), iterations, repetitions, size, 0};
    if (pthread_create(&t[i], NULL, worker, &w[i]) != 0) {
      fprintf(stderr, "cache-scratch: cannot start a thread\n");
      return 1;
    }
  }
  int bad = 0;
  for (long i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    bad |= w[i].bad;
  }
  printf("cache-scratch: %ld threads: %s\n", threads, bad ? "WRONG" : "ok");
  return bad;
}
