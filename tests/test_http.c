/* The loopback HTTP endpoint: serves both documents, answers bad requests
 * to GET and HEAD, in origin and absolute form, answers bad requests with
 * HTTP errors, refuses non-loopback addresses, stops cleanly (also from
 * tslab_destroy and while a client is connected). */
#include "http_client.h"

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

/* HEAD gets the head of the GET response and no body, errors included. */
static void check_head(uint16_t port, const char* target, int status, const char* type) {
  char req[128];
  snprintf(req, sizeof req, "HEAD %s HTTP/1.1\r\nHost: localhost\r\n\r\n", target);
  reply_t r = request(port, req);
  if (r.status != status) fprintf(stderr, "HEAD %s: got %d\n", target, r.status);
  CHECK(r.status == status);
  CHECK(strstr(r.head, type) != NULL);
  CHECK(content_length(&r) > 0); /* the length of the body a GET gets */
  CHECK_EQ_U(r.body_len, 0);
  free(r.head);
}

/* A target in absolute form (what proxies send) names the same resource as
 * its path. */
static void check_absolute_form(uint16_t port) {
  char req[160];
  snprintf(req, sizeof req, "GET http://127.0.0.1:%u/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
           port);
  reply_t r = request(port, req);
  CHECK(r.status == 200);
  CHECK(strstr(r.head, "Content-Type: text/plain; version=0.0.4") != NULL);
  CHECK(strstr(r.body, "# TYPE tslab_allocations_total counter\n") != NULL);
  free(r.head);
  snprintf(req, sizeof req, "HEAD HTTP://LOCALHOST:%u/stats.json?pretty HTTP/1.0\r\n\r\n", port);
  r = request(port, req);
  CHECK(r.status == 200);
  CHECK(strstr(r.head, "Content-Type: application/json") != NULL);
  CHECK_EQ_U(r.body_len, 0);
  free(r.head);
  check_status(port, "GET http://localhost/stats.json HTTP/1.1\r\n\r\n", 200);
  check_status(port, "GET http://localhost HTTP/1.1\r\n\r\n", 404); /* path "/" */
  check_status(port, "GET http://localhost/ HTTP/1.1\r\n\r\n", 404);
  check_status(port, "GET http://localhost/nope HTTP/1.1\r\n\r\n", 404);
  check_status(port, "POST http://localhost/metrics HTTP/1.1\r\n\r\n", 405);
  check_status(port, "GET ftp://localhost/metrics HTTP/1.1\r\n\r\n", 400);
  check_status(port, "GET http:/metrics HTTP/1.1\r\n\r\n", 400);
  check_status(port, "GET http:///metrics HTTP/1.1\r\n\r\n", 400); /* no host */
  check_status(port, "GET //localhost/metrics HTTP/1.1\r\n\r\n", 404);
}

static void check_methods(uint16_t port) {
  check_head(port, "/metrics", 200, "Content-Type: text/plain; version=0.0.4");
  check_head(port, "/stats.json", 200, "Content-Type: application/json");
  check_head(port, "/metrics?x=1", 200, "Content-Type: text/plain; version=0.0.4");
  check_head(port, "/nope", 404, "Content-Type: text/plain");
  reply_t r = request(port, "DELETE /metrics HTTP/1.1\r\n\r\n");
  CHECK(r.status == 405);
  const char* allow = strstr(r.head, "\r\nAllow: ");
  CHECK(allow && strncmp(allow + 9, "GET, HEAD", 9) == 0 && (allow[18] == '\r' || allow[18] == '\0'));
  free(r.head);
  check_absolute_form(port);
}

static void check_bad_requests(uint16_t port) {
  check_status(port, "GET /metrics?name[]=x HTTP/1.1\r\n\r\n", 200);
  check_status(port, "GET /metrics HTTP/1.1\n\n", 200);
  check_status(port, "GET / HTTP/1.1\r\n\r\n", 404);
  check_status(port, "GET /metricsx HTTP/1.1\r\n\r\n", 404);
  check_status(port, "GET /stats.json/ HTTP/1.1\r\n\r\n", 404);
  check_status(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405);
  check_status(port, "OPTIONS /metrics HTTP/1.1\r\n\r\n", 405);
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
  CHECK(send_bytes(fd, "GET /met", 8) == 0);
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
  check_methods(port);
  check_bad_requests(port);
  check_documents(AF_INET, port); /* still serving after all that */

  /* Stop while a client is connected mid-request: must not wait for it. */
  int idle = connect_to(AF_INET, port);
  REQUIRE(idle >= 0);
  CHECK(send_bytes(idle, "GET", 3) == 0);
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
