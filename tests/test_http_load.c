/* The HTTP endpoint under hostile load: clients that send one byte at a
 * time, idle open connections, and more connections than the endpoint holds
 * (docs/OBSERVABILITY.md, "The HTTP endpoint"). Whatever they do, a scrape is
 * answered, completely, within a bound that a loaded machine always meets; a
 * scrape takes milliseconds, and the slowest one of each scenario is printed.
 * Clients beyond the bound are refused with 503, and every connection gets an
 * answer, not a reset. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>

#include "http.h"
#include "http_client.h"

#define SCRAPE_BOUND_MS 2000

static const char scrape_request[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";

/* One scrape, which must be answered with the whole document within the
 * bound; its latency in ms, or -1 when it failed. */
static int64_t scrape(uint16_t port) {
  int64_t start = hc_now_ms();
  reply_t r = request_within(AF_INET, port, scrape_request, sizeof scrape_request - 1,
                             SCRAPE_BOUND_MS);
  int64_t took = hc_now_ms() - start;
  int ok = r.status == 200 && content_length(&r) == (long long)r.body_len &&
           strstr(r.body, "# TYPE tslab_allocations_total counter\n") != NULL;
  if (!ok) fprintf(stderr, "scrape: status %d after %lld ms\n", r.status, (long long)took);
  CHECK(ok);
  free(r.head);
  return ok ? took : -1;
}

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* Clients that send their request one byte every 10 ms, from a thread of
 * their own: ENDLESS of them never finish theirs (the request deadline
 * answers them 408, although bytes keep coming), the patient one finishes in
 * time and gets the document. */
enum { ENDLESS = 4 };
static const char slow_head[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
static int endless[ENDLESS], patient;
static atomic_bool trickling;
static atomic_bool patient_failed;

static void* trickle(void* arg) {
  (void)arg;
  bool answered[ENDLESS] = {0};
  int64_t give_up = hc_now_ms() + HC_PATIENCE_MS;
  for (size_t k = 0; hc_now_ms() < give_up; k++) {
    int pending = 0;
    for (int i = 0; i < ENDLESS; i++) {
      if (answered[i] || (answered[i] = hc_wait(endless[i], POLLIN, hc_now_ms()))) continue;
      char byte = k < sizeof slow_head - 1 ? slow_head[k] : 'a';
      send_bytes(endless[i], &byte, 1);
      pending++;
    }
    if (k < sizeof scrape_request - 1) {
      if (send_bytes(patient, scrape_request + k, 1) != 0) atomic_store(&patient_failed, true);
      pending++;
    }
    if (!pending) break;
    nap_ms(10);
  }
  atomic_store(&trickling, false);
  return NULL;
}

static void check_byte_at_a_time(uint16_t port) {
  for (int i = 0; i < ENDLESS; i++) REQUIRE((endless[i] = connect_to(AF_INET, port)) >= 0);
  REQUIRE((patient = connect_to(AF_INET, port)) >= 0);
  atomic_store(&trickling, true);
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, trickle, NULL) == 0);
  int64_t worst = 0;
  int scrapes = 0;
  while (atomic_load(&trickling)) {
    int64_t took = scrape(port);
    if (took < 0) break; /* one failure says it; do not wait out the rest */
    if (took > worst) worst = took;
    scrapes++;
    nap_ms(20);
  }
  pthread_join(th, NULL);
  printf("byte-at-a-time clients: %d scrapes, slowest %lld ms\n", scrapes, (long long)worst);

  CHECK(!atomic_load(&patient_failed));
  reply_t r = read_reply(patient);
  CHECK(r.status == 200);
  CHECK(content_length(&r) == (long long)r.body_len);
  free(r.head);
  close(patient);
  for (int i = 0; i < ENDLESS; i++) {
    r = read_reply(endless[i]);
    if (r.status != 408) fprintf(stderr, "endless client %d: status %d\n", i, r.status);
    CHECK(r.status == 408);
    free(r.head);
    close(endless[i]);
  }
}

/* n connections that never send a byte do not delay scrapes. */
static void check_idle(uint16_t port, int n) {
  int* idle = malloc((size_t)n * sizeof *idle);
  REQUIRE(idle);
  for (int i = 0; i < n; i++) REQUIRE((idle[i] = connect_start(AF_INET, port)) >= 0);
  int64_t worst = 0;
  for (int i = 0; i < 5; i++) {
    int64_t took = scrape(port);
    if (took < 0) break;
    if (took > worst) worst = took;
  }
  printf("%d idle connections: slowest of 5 scrapes %lld ms\n", n, (long long)worst);
  for (int i = 0; i < n; i++) close(idle[i]);
  free(idle);
}

/* Beyond the bound the oldest connection is refused with 503 to make room:
 * a scrape still gets through. Every connection gets an answer. */
static void check_bound(tslab_t* a) {
  enum { EXTRA = 20, N = TSLAB_HTTP_CONNECTIONS_MAX + EXTRA };
  REQUIRE(tslab_http_start(a, "127.0.0.1", 0) == TSLAB_OK);
  uint16_t port = tslab_http_port(a);
  int64_t start = hc_now_ms();
  int idle[N];
  for (int i = 0; i < N; i++) { /* the listen backlog holds them all */
    idle[i] = connect_start(AF_INET, port);
    REQUIRE(idle[i] >= 0 && hc_wait(idle[i], POLLOUT, hc_now_ms() + SCRAPE_BOUND_MS));
  }
  int64_t opening = hc_now_ms() - start;
  int64_t took = scrape(port);
  printf("%d connections (bound %d): scrape %lld ms\n", N, TSLAB_HTTP_CONNECTIONS_MAX,
         (long long)took);
  int refused = 0;
  for (int i = 0; i < N; i++) {
    reply_t r = read_reply(idle[i]);
    if (r.status != 503 && r.status != 408) fprintf(stderr, "connection %d: status %d\n", i, r.status);
    CHECK(r.status == 503 || r.status == 408);
    /* The scrape took the place of one more: the oldest EXTRA + 1 were
     * refused, unless opening them all outlasted the request deadline. */
    if (opening < TSLAB_HTTP_REQUEST_TIMEOUT_MS / 2) CHECK(r.status == (i <= EXTRA ? 503 : 408));
    if (r.status == 503) {
      CHECK(strstr(r.head, "\r\nRetry-After: ") != NULL);
      refused++;
    }
    free(r.head);
    close(idle[i]);
  }
  printf("refused %d of them (opened in %lld ms)\n", refused, (long long)opening);
  CHECK(refused >= 1);
  CHECK(tslab_http_stop(a) == TSLAB_OK);
}

int main(void) {
  /* Both ends of every connection live in this process. */
  struct rlimit nofile;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &nofile) == 0);
  if (nofile.rlim_cur < 4 * TSLAB_HTTP_CONNECTIONS_MAX) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a);
  tslab_epoch_t e = tslab_epoch_current(a);
  void* p = tslab_alloc(a, 100, e);
  REQUIRE(p);

  REQUIRE(tslab_http_start(a, "127.0.0.1", 0) == TSLAB_OK);
  uint16_t port = tslab_http_port(a);
  check_byte_at_a_time(port);
  check_idle(port, 5);
  check_idle(port, 200);
  CHECK(tslab_http_stop(a) == TSLAB_OK);
  check_bound(a);

  CHECK(tslab_free(a, p));
  tslab_destroy(a);
  TEST_DONE();
}
