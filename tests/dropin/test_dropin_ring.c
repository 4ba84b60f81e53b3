/* More requests in flight than the epoch ring has slots: each request's
 * domain opens an epoch, and an advance that finds every slot open closes
 * the oldest, the process epoch among them, again and again. Plain malloc
 * must not fail meanwhile: it falls back and renews the process epoch as
 * often as it takes (found by review: it gave up after three tries and
 * returned NULL with ENOMEM, memory to spare). Run with a ring of 4 slots
 * (TSLAB_EPOCH_RING_SIZE, tests/dropin.cmake) and 8 request threads. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "dropin_sym.h"
#include "test_util.h"

enum { REQUEST_THREADS = 8, PLAIN_THREADS = 2, ROUNDS = 4000 };

static atomic_long null_mallocs, requests_done;
static atomic_int stop;

static void* request_thread(void* arg) {
  (void)arg;
  tslab_t* a = SYM(tslab_malloc_instance)();
  for (int r = 0; r < ROUNDS; r++) {
    tslab_domain_t* d = SYM(tslab_domain_create)(a, "request");
    if (!d) continue; /* its epoch was closed at once: the ring is over-full */
    if (SYM(tslab_malloc_domain_enter)(d) == TSLAB_OK) {
      for (int i = 0; i < 20; i++) {
        char* p = malloc(100 + (size_t)i * 50);
        if (!p) {
          atomic_fetch_add(&null_mallocs, 1);
          continue;
        }
        memset(p, i, 100);
        free(p);
      }
      struct timespec hold = {0, 20000};
      nanosleep(&hold, NULL);
      SYM(tslab_malloc_domain_exit)(d);
    }
    SYM(tslab_domain_destroy)(d);
    atomic_fetch_add(&requests_done, 1);
  }
  return NULL;
}

static void* plain_thread(void* arg) {
  (void)arg;
  void* keep[64] = {0};
  for (unsigned i = 0; !atomic_load(&stop); i++) {
    free(keep[i & 63]);
    size_t n = (i * 37u) % 5000 + 1;
    if (!(keep[i & 63] = malloc(n))) {
      atomic_fetch_add(&null_mallocs, 1);
      continue;
    }
    memset(keep[i & 63], 0x5a, n);
  }
  for (int j = 0; j < 64; j++) free(keep[j]);
  return NULL;
}

int main(void) {
  pthread_t t[REQUEST_THREADS + PLAIN_THREADS];
  for (int i = 0; i < REQUEST_THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, request_thread, NULL) == 0);
  for (int i = 0; i < PLAIN_THREADS; i++)
    REQUIRE(pthread_create(&t[REQUEST_THREADS + i], NULL, plain_thread, NULL) == 0);
  for (int i = 0; i < REQUEST_THREADS; i++) pthread_join(t[i], NULL);
  atomic_store(&stop, 1);
  for (int i = 0; i < PLAIN_THREADS; i++) pthread_join(t[REQUEST_THREADS + i], NULL);
  tslab_malloc_stats_t s;
  SYM(tslab_malloc_stats)(&s);
  printf("%ld requests, %llu process epoch renewals, %llu scope fallbacks\n", atomic_load(&requests_done),
         (unsigned long long)s.process_epoch_renewals, (unsigned long long)s.scope_fallbacks);
  CHECK_EQ_U(atomic_load(&null_mallocs), 0);
  CHECK(s.process_epoch_renewals > 0); /* the pressure the test is about */
  DROPIN_CHECK_CONSISTENT();
  TEST_DONE();
}
