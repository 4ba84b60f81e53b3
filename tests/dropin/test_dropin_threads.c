/* Threads that come and go: waves of short-lived threads allocate, free
 * their own and each other's blocks, and leave blocks behind for the next
 * wave to free. Every block is accounted for at the end, and the number of
 * thread caches stays bounded by the peak number of threads (caches of
 * exited threads are reused), not by the number of threads created; also
 * when the C library frees a thread's buffers after every key destructor
 * has run (strerror's for an unknown error number, dlerror's message), a
 * free that comes after the core's own thread-exit handler. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "test_util.h"
#include "dropin_sym.h"

#define WAVES 40
#define THREADS 8
#define BLOCKS 500

static char* handoff[THREADS][BLOCKS];

static void* worker(void* arg) {
  size_t id = (size_t)arg;
  /* Free what the previous wave's thread left (allocated by a thread that
   * has exited since). */
  for (int i = 0; i < BLOCKS; i++) {
    if (handoff[id][i] && handoff[id][i][0] != (char)('a' + id)) return (void*)1;
    free(handoff[id][i]);
  }
  char* local[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    local[i] = malloc(8 + (size_t)(i * 13) % 2000);
    if (!local[i]) return (void*)1;
    local[i][0] = 'x';
  }
  for (int i = 0; i < BLOCKS; i += 2) free(local[i]);
  for (int i = 0; i < BLOCKS; i++) {
    handoff[id][i] = malloc(32 + (size_t)i);
    if (!handoff[id][i]) return (void*)1;
    handoff[id][i][0] = (char)('a' + id);
  }
  for (int i = 1; i < BLOCKS; i += 2) free(local[i]);
  /* Buffers the C library frees at this thread's exit, after the key
   * destructors. */
  if (strerror(99999 + (int)id) == NULL) return (void*)1;
  if (dlopen("libtslab-test-no-such-library.so", RTLD_NOW) != NULL || dlerror() == NULL) return (void*)1;
  return NULL;
}

int main(void) {
  tslab_t* a = SYM(tslab_malloc_instance)();
  REQUIRE(a != NULL);
  tslab_stats_global_t g0, g1;
  REQUIRE(SYM(tslab_stats_global)(a, &g0) == TSLAB_OK);
  for (int w = 0; w < WAVES; w++) {
    pthread_t t[THREADS];
    for (size_t i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, worker, (void*)i) == 0);
    for (size_t i = 0; i < THREADS; i++) {
      void* r;
      pthread_join(t[i], &r);
      CHECK(r == NULL);
    }
  }
  for (int i = 0; i < THREADS; i++)
    for (int k = 0; k < BLOCKS; k++) free(handoff[i][k]);
  REQUIRE(SYM(tslab_stats_global)(a, &g1) == TSLAB_OK);
  /* The test's own blocks are all freed: what is still live is what the
   * C library and the process keep (thread stacks' TLS, stdio). */
  CHECK(g1.live_objects <= g0.live_objects + 4 * THREADS);
  /* 320 threads were created; at most THREADS run at once (plus this one
   * and the caches the C library's thread teardown may touch). */
  CHECK(g1.thread_caches <= 2 * THREADS + 2);
  DROPIN_CHECK_CONSISTENT();
  TEST_DONE();
}
