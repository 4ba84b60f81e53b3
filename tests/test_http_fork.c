/* fork() and the HTTP endpoint. A child inherits the parent's endpoint in
 * memory, but not its thread, and shares its descriptors. The child drops it:
 * stopping it or destroying the instance in the child neither stops the
 * parent's server nor hangs, and the child can start an endpoint of its own.
 * Children forked while the parent scrapes, and starts and stops endpoints,
 * never hang, and a child holds none of the parent's sockets. Children report
 * through their exit status only, and the parent kills a child that outlives
 * its deadline. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "http_client.h"

#define CHILD_DEADLINE_MS 10000
#define SCRAPE_BOUND_MS 2000 /* generous: a scrape takes milliseconds */
#define FORKS 30

/* ThreadSanitizer lets the child of a multi-threaded process start threads
 * (the child's own endpoint) only when told to. */
const char* __tsan_default_options(void);
const char* __tsan_default_options(void) { return "die_after_fork=0"; }

/* AddressSanitizer's allocator takes no lock around fork in the runtimes
 * the sanitizer builds use (clang 14): a child that allocates may wait
 * forever for a lock another parent thread held at the fork.
 * ThreadSanitizer's runtime may likewise hang now and then, or report a
 * thread id still in use, in a child that starts a thread after a fork
 * among busy threads. Under either, the children forked among busy threads
 * skip their own endpoint, which allocates and starts a thread; the
 * children of a quiet parent still start one, and the plain build runs all
 * of it. */
#define CHILD_MAY_ALLOCATE (!TU_ASAN && !TU_TSAN)

static const char scrape_request[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";

static bool scrape_ok(uint16_t port) {
  reply_t r = request_within(AF_INET, port, scrape_request, sizeof scrape_request - 1,
                             SCRAPE_BOUND_MS);
  bool ok = r.status == 200 && content_length(&r) == (long long)r.body_len;
  free(r.head);
  return ok;
}

/* Exit status of pid, or -1 when it outlived the deadline (then killed). */
static int wait_child(pid_t pid) {
  int64_t deadline = hc_now_ms() + CHILD_DEADLINE_MS;
  int status;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    REQUIRE(r == 0 || errno == EINTR);
    if (hc_now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
  }
}

/* A child's own endpoint works: on a port of its own, serving its scrape. */
static int own_endpoint(tslab_t* a, uint16_t parent_port) {
  if (tslab_http_start(a, "127.0.0.1", 0) != TSLAB_OK) return 20;
  uint16_t port = tslab_http_port(a);
  if (port == 0 || port == parent_port) return 21;
  if (!scrape_ok(port)) return 22;
  if (tslab_http_stop(a) != TSLAB_OK || tslab_http_port(a) != 0) return 23;
  return 0;
}

enum child_kind { CHILD_STOPS, CHILD_DESTROYS, CHILD_STARTS_ITS_OWN, CHILD_KINDS };
static const char* const kind_name[] = {"stops the endpoint", "destroys the instance",
                                        "starts its own endpoint"};

static int child(tslab_t* a, uint16_t parent_port, enum child_kind kind) {
  switch (kind) {
    case CHILD_STOPS:
      if (tslab_http_stop(a) != TSLAB_OK) return 10;
      return tslab_http_port(a) == 0 ? 0 : 11;
    case CHILD_DESTROYS:
      tslab_destroy(a);
      return 0;
    case CHILD_STARTS_ITS_OWN:
      if (tslab_http_port(a) != 0) return 12; /* the inherited endpoint is gone */
      return own_endpoint(a, parent_port);
    default:
      return 99;
  }
}

/* One child of each kind, forked from a quiet parent: afterwards the parent
 * still serves, on the same port. */
static void check_children(tslab_t* a, uint16_t port) {
  for (int kind = 0; kind < CHILD_KINDS; kind++) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(child(a, port, (enum child_kind)kind));
    int status = wait_child(pid);
    if (status != 0) fprintf(stderr, "child that %s: status %d\n", kind_name[kind], status);
    CHECK(status == 0);
    bool serves = scrape_ok(port);
    if (!serves) fprintf(stderr, "after a child that %s, the parent does not serve\n", kind_name[kind]);
    CHECK(serves);
    CHECK(tslab_http_port(a) == port);
    CHECK(tslab_http_start(a, "127.0.0.1", 0) == TSLAB_ERR_BUSY);
  }
}

/* Forks while one thread scrapes an endpoint and another starts and stops
 * one of another instance, so children are born with the endpoint lock taken, in the middle of a
 * scrape, of a start or of a stop. */
static tslab_t *served, *cycled;
static uint16_t served_port;
static atomic_bool stop;
static atomic_int scrapes, failed_scrapes, cycles;

static void* scraper(void* arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    atomic_fetch_add(&scrapes, 1);
    if (!scrape_ok(served_port)) atomic_fetch_add(&failed_scrapes, 1);
  }
  return NULL;
}

static void* cycler(void* arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    if (tslab_http_start(cycled, "127.0.0.1", 0) == TSLAB_OK) atomic_fetch_add(&cycles, 1);
    tslab_http_stop(cycled);
  }
  return NULL;
}

static int stressed_child(void) {
  if (tslab_http_port(served) != 0 || tslab_http_port(cycled) != 0) return 30;
  if (CHILD_MAY_ALLOCATE) {
    int rc = own_endpoint(cycled, served_port);
    if (rc) return rc;
  }
  tslab_destroy(served);
  tslab_destroy(cycled);
  return 0;
}

static void check_forks_under_load(void) {
  pthread_t th[2];
  REQUIRE(pthread_create(&th[0], NULL, scraper, NULL) == 0);
  REQUIRE(pthread_create(&th[1], NULL, cycler, NULL) == 0);
  int hung = 0, failed = 0;
  for (int f = 0; f < FORKS; f++) {
    struct timespec nap = {0, 1000000 + (f % 7) * 700000};
    nanosleep(&nap, NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(stressed_child());
    int status = wait_child(pid);
    if (status < 0) hung++;
    else if (status != 0) failed++;
    if (status != 0) fprintf(stderr, "fork %d: child status %d\n", f, status);
    if (status < 0) break; /* one hang says it; do not wait out the rest */
  }
  atomic_store(&stop, true);
  pthread_join(th[0], NULL);
  pthread_join(th[1], NULL);
  printf("%d forks: %d children hung, %d failed; parent: %d of %d scrapes failed, %d "
         "start-stop cycles\n",
         FORKS, hung, failed, atomic_load(&failed_scrapes), atomic_load(&scrapes),
         atomic_load(&cycles));
  CHECK(hung == 0);
  CHECK(failed == 0);
  CHECK(atomic_load(&failed_scrapes) == 0);
  CHECK(scrape_ok(served_port));
}

/* A child that outlives the parent's endpoint holds none of its sockets:
 * once the parent stops the endpoint, its port refuses connections. (Until
 * the child has returned from fork, its copies are still open: the parent
 * waits for its word.) */
static void check_port_released(void) {
  int ready[2], gate[2];
  REQUIRE(pipe(ready) == 0 && pipe(gate) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) { /* lives until the parent closes the gate */
    char byte = 1;
    close(ready[0]);
    close(gate[1]);
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    _exit(read(gate[0], &byte, 1) == 0 ? 0 : 1);
  }
  close(ready[1]);
  close(gate[0]);
  char byte;
  CHECK(read(ready[0], &byte, 1) == 1);
  CHECK(tslab_http_stop(served) == TSLAB_OK);
  int fd = connect_to(AF_INET, served_port);
  if (fd >= 0) fprintf(stderr, "the port of a stopped endpoint still accepts connections\n");
  CHECK(fd < 0);
  if (fd >= 0) close(fd);
  close(gate[1]);
  close(ready[0]);
  CHECK(wait_child(pid) == 0);
}

int main(void) {
  served = tslab_create(NULL);
  cycled = tslab_create(NULL);
  REQUIRE(served && cycled);
  REQUIRE(tslab_http_start(served, "127.0.0.1", 0) == TSLAB_OK);
  served_port = tslab_http_port(served);
  REQUIRE(scrape_ok(served_port));

  check_children(served, served_port);
  check_forks_under_load();
  check_port_released();

  tslab_destroy(cycled);
  tslab_destroy(served);
  TEST_DONE();
}
