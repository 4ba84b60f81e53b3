/* The loopback HTTP endpoint: serves both documents, answers bad requests
 * with HTTP errors, refuses non-loopback addresses, stops cleanly (also from
 * tslab_destroy and while a client is connected). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_util.h"

typedef struct reply {
  int status;
  char* head; /* status line and headers, NUL-terminated */
  char* body;
  size_t body_len;
} reply_t;

static int connect_to(int family, uint16_t port) {
  int fd = socket(family, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  int rc;
  if (family == AF_INET6) {
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    sa.sin6_addr = in6addr_loopback;
    rc = connect(fd, (struct sockaddr*)&sa, sizeof sa);
  } else {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, (struct sockaddr*)&sa, sizeof sa);
  }
  if (rc != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void send_bytes(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    REQUIRE(n > 0);
    data += n;
    len -= (size_t)n;
  }
}

/* Reads until the server closes, then splits status, head and body. */
static reply_t read_reply(int fd) {
  size_t cap = 1 << 16, len = 0;
  char* buf = malloc(cap + 1);
  REQUIRE(buf);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
      REQUIRE(buf);
    }
    ssize_t n = recv(fd, buf + len, cap - len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  buf[len] = '\0';
  reply_t r = {0};
  char* sep = strstr(buf, "\r\n\r\n");
  REQUIRE(sep);
  *sep = '\0';
  r.head = buf;
  r.body = sep + 4;
  r.body_len = len - (size_t)(r.body - buf);
  REQUIRE(sscanf(buf, "HTTP/1.1 %d ", &r.status) == 1);
  return r;
}

static reply_t request_raw(int family, uint16_t port, const char* data, size_t len) {
  int fd = connect_to(family, port);
  REQUIRE(fd >= 0);
  send_bytes(fd, data, len);
  reply_t r = read_reply(fd);
  close(fd);
  return r;
}

static reply_t request(uint16_t port, const char* req) {
  return request_raw(AF_INET, port, req, strlen(req));
}

static size_t content_length(const reply_t* r) {
  const char* h = strstr(r->head, "Content-Length: ");
  REQUIRE(h);
  return (size_t)strtoull(h + 16, NULL, 10);
}

static void check_status(uint16_t port, const char* req, int status) {
  reply_t r = request(port, req);
  if (r.status != status) fprintf(stderr, "request %.40s...: got %d\n", req, r.status);
  CHECK(r.status == status);
  CHECK_EQ_U(content_length(&r), r.body_len);
  free(r.head);
}

static void check_documents(int family, uint16_t port) {
  const char* get_metrics = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  reply_t r = request_raw(family, port, get_metrics, strlen(get_metrics));
  CHECK(r.status == 200);
  CHECK(strstr(r.head, "Content-Type: text/plain; version=0.0.4") != NULL);
  CHECK_EQ_U(content_length(&r), r.body_len);
  CHECK(strstr(r.body, "# TYPE tslab_allocations_total counter\n") != NULL);
  CHECK(strstr(r.body, "label=\"http-test\"") != NULL);
  free(r.head);

  const char* get_json = "GET /stats.json HTTP/1.0\r\n\r\n";
  r = request_raw(family, port, get_json, strlen(get_json));
  CHECK(r.status == 200);
  CHECK(strstr(r.head, "Content-Type: application/json") != NULL);
  CHECK_EQ_U(content_length(&r), r.body_len);
  CHECK(strncmp(r.body, "{\"schema_version\":1,", 20) == 0);
  CHECK(strstr(r.body, "\"label\":\"http-test\"") != NULL);
  free(r.head);
}

static void check_bad_requests(uint16_t port) {
  check_status(port, "GET /metrics?name[]=x HTTP/1.1\r\n\r\n", 200);
  check_status(port, "GET /metrics HTTP/1.1\n\n", 200);
  check_status(port, "GET / HTTP/1.1\r\n\r\n", 404);
  check_status(port, "GET /metricsx HTTP/1.1\r\n\r\n", 404);
  check_status(port, "GET /stats.json/ HTTP/1.1\r\n\r\n", 404);
  check_status(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405);
  check_status(port, "HEAD /metrics HTTP/1.1\r\n\r\n", 405);
  check_status(port, "hello\r\n\r\n", 400);
  check_status(port, "GET /metrics\r\n\r\n", 400);
  check_status(port, "GET metrics HTTP/1.1\r\n\r\n", 400);
  check_status(port, "GET /metrics HTTP/2.0\r\n\r\n", 400);
  check_status(port, "GET  /metrics HTTP/1.1\r\n\r\n", 400);
  check_status(port, "G(T /metrics HTTP/1.1\r\n\r\n", 400);
  check_status(port, "\r\n\r\n", 400);

  const char nul[] = "GET /metrics\0 HTTP/1.1\r\n\r\n";
  reply_t r = request_raw(AF_INET, port, nul, sizeof nul - 1);
  CHECK(r.status == 400);
  free(r.head);

  /* A head that never ends within the request buffer. */
  size_t big = 20000;
  char* huge = malloc(big);
  REQUIRE(huge);
  memcpy(huge, "GET /metrics HTTP/1.1\r\nX: ", 26);
  memset(huge + 26, 'a', big - 26);
  r = request_raw(AF_INET, port, huge, big);
  CHECK(r.status == 400);
  free(r.head);
  free(huge);

  /* A client that connects and leaves without a word must not disturb it. */
  int fd = connect_to(AF_INET, port);
  REQUIRE(fd >= 0);
  close(fd);

  /* A client that stops in the middle of its request gets a timeout. */
  fd = connect_to(AF_INET, port);
  REQUIRE(fd >= 0);
  send_bytes(fd, "GET /met", 8);
  r = read_reply(fd);
  CHECK(r.status == 408);
  free(r.head);
  close(fd);
}

static void check_refused_addresses(tslab_t* a) {
  const char* refused[] = {"0.0.0.0",  "10.1.2.3",         "192.168.0.1", "8.8.8.8",
                           "::",       "::ffff:127.0.0.1", "fe80::1",     "localhost",
                           "127.0.0.1:80", "",             "127.1",       " 127.0.0.1"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    tslab_clear_error();
    int rc = tslab_http_start(a, refused[i], 0);
    if (rc != TSLAB_ERR_INVALID_ARGUMENT) fprintf(stderr, "address '%s': %d\n", refused[i], rc);
    CHECK(rc == TSLAB_ERR_INVALID_ARGUMENT);
    CHECK(tslab_last_error() == TSLAB_ERR_INVALID_ARGUMENT);
    CHECK(tslab_http_port(a) == 0);
  }
  CHECK(tslab_http_start(a, NULL, 0) == TSLAB_ERR_INVALID_ARGUMENT);
  CHECK(tslab_http_start(NULL, "127.0.0.1", 0) == TSLAB_ERR_INVALID_ARGUMENT);
  CHECK(tslab_http_stop(NULL) == TSLAB_ERR_INVALID_ARGUMENT);
  CHECK(tslab_http_port(NULL) == 0);
}

int main(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a);
  tslab_epoch_t e = tslab_epoch_current(a);
  CHECK(tslab_epoch_set_label(a, e, "http-test") == TSLAB_OK);
  void* p = tslab_alloc(a, 100, e);
  CHECK(p != NULL);

  check_refused_addresses(a);
  CHECK(tslab_http_stop(a) == TSLAB_OK); /* not running: nothing to do */

  REQUIRE(tslab_http_start(a, "127.0.0.1", 0) == TSLAB_OK);
  uint16_t port = tslab_http_port(a);
  CHECK(port != 0);
  CHECK(tslab_http_start(a, "127.0.0.1", 0) == TSLAB_ERR_BUSY);
  CHECK(tslab_last_error() == TSLAB_ERR_BUSY);
  CHECK(tslab_http_port(a) == port);

  check_documents(AF_INET, port);
  check_bad_requests(port);
  check_documents(AF_INET, port); /* still serving after all that */

  /* Stop while a client is connected mid-request: must not wait for it. */
  int idle = connect_to(AF_INET, port);
  REQUIRE(idle >= 0);
  send_bytes(idle, "GET", 3);
  CHECK(tslab_http_stop(a) == TSLAB_OK);
  close(idle);
  CHECK(tslab_http_port(a) == 0);
  CHECK(connect_to(AF_INET, port) < 0);
  CHECK(tslab_http_stop(a) == TSLAB_OK);

  /* Another instance may serve at the same time, here on another loopback
   * address, and over IPv6 when the machine has it. */
  tslab_t* b = tslab_create(NULL);
  REQUIRE(b);
  tslab_epoch_set_label(b, tslab_epoch_current(b), "http-test");
  REQUIRE(tslab_http_start(a, "127.0.0.2", 0) == TSLAB_OK);
  int rc6 = tslab_http_start(b, "::1", 0);
  if (rc6 == TSLAB_OK) {
    check_documents(AF_INET6, tslab_http_port(b));
    CHECK(tslab_http_stop(b) == TSLAB_OK);
  } else {
    CHECK(rc6 == TSLAB_ERR_IO);
    printf("IPv6 loopback unavailable here; skipped the ::1 part\n");
  }
  tslab_destroy(b);

  /* tslab_destroy stops a running endpoint. */
  CHECK(tslab_http_port(a) != 0);
  CHECK(tslab_free(a, p));
  tslab_destroy(a);
  TEST_DONE();
}
