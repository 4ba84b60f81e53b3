/* xmalloc-test: the producer/consumer test of Lever and Boreham ("malloc()
 * performance in a multithreaded Linux environment", USENIX 2000) as the
 * allocator benchmark suites run it: writer threads allocate blocks of
 * random sizes and pass them in batches to reader threads, which check and
 * free them. Every block is freed by a thread other than the one that
 * allocated it.
 *
 * Usage: xmalloc_test WRITERS READERS BATCHES MAXSIZE   (batches of 1000) */
#include <pthread.h>

#include "bench_common.h"

#define BATCH 1000

typedef struct batch {
  struct batch* next;
  void* blocks[BATCH];
  size_t sizes[BATCH];
} batch_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static batch_t* queue;
static long queued, writers_left;
static long batches_per_writer;
static size_t max_size;
static int bad;

static void* writer(void* arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
  for (long b = 0; b < batches_per_writer; b++) {
    batch_t* bt = malloc(sizeof *bt);
    for (int i = 0; i < BATCH; i++) {
      size_t n = 1 + rng_next(&seed) % max_size;
      bt->blocks[i] = malloc(n);
      bt->sizes[i] = n;
      if (bt->blocks[i]) stamp(bt->blocks[i], n);
    }
    pthread_mutex_lock(&mu);
    /* Bound the queue so memory stays proportional to the threads. */
    while (queued >= 64) pthread_cond_wait(&cv, &mu);
    bt->next = queue;
    queue = bt;
    queued++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_lock(&mu);
  writers_left--;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void* reader(void* arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (!queue && writers_left > 0) pthread_cond_wait(&cv, &mu);
    batch_t* bt = queue;
    if (bt) {
      queue = bt->next;
      queued--;
      pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (!bt) return NULL;
    int wrong = 0;
    for (int i = 0; i < BATCH; i++) {
      wrong |= !bt->blocks[i] || !stamped(bt->blocks[i], bt->sizes[i]);
      free(bt->blocks[i]);
    }
    free(bt);
    if (wrong) {
      pthread_mutex_lock(&mu);
      bad = 1;
      pthread_mutex_unlock(&mu);
    }
  }
}

int main(int argc, char** argv) {
  long writers = arg_long(argc, argv, 1, 2), readers = arg_long(argc, argv, 2, 2);
  batches_per_writer = arg_long(argc, argv, 3, 2000);
  max_size = (size_t)arg_long(argc, argv, 4, 128);
  writers_left = writers;
  pthread_t t[64];
  long n = 0;
  /* A thread that cannot start would leave the others waiting on the queue. */
  for (long i = 0; i < writers + readers && n < 64; i++) {
    if (pthread_create(&t[n++], NULL, i < writers ? writer : reader, i < writers ? (void*)(uintptr_t)i : NULL) != 0) {
      fprintf(stderr, "xmalloc-test: cannot start a thread\n");
      return 1;
    }
  }
  for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("xmalloc-test: %ld writers, %ld readers, %ld batches each: %s\n", writers, readers,
         batches_per_writer, bad ? "WRONG" : "ok");
  return bad;
}
