/* A minimal HTTP/1.x client for the endpoint's tests. Every wait has a
 * deadline, so a server that does not answer fails the test instead of
 * hanging it: a reply that does not arrive in time has status 0. */
#ifndef TSLAB_TEST_HTTP_CLIENT_H
#define TSLAB_TEST_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

/* Long enough for any answer on a loaded machine; tests that assert a bound
 * pass their own. */
#define HC_PATIENCE_MS 30000

typedef struct reply {
  int status;     /* 0: no complete head before the deadline, or reset */
  char* head;     /* status line and headers, NUL-terminated; always free()d */
  char* body;     /* everything after the head, up to the server's close */
  size_t body_len;
} reply_t;

static inline int64_t hc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline (a past one: looks once); 1 when
 * ready. */
static inline int hc_wait(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - hc_now_ms();
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, left > 0 ? (int)left : 0);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

/* Starts a connection without waiting for it: a server that stopped
 * accepting cannot block the test. The socket stays non-blocking. */
static inline int connect_start(int family, uint16_t port) {
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
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
  if (rc != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A connected socket, or -1 when refused or not established in time. */
static inline int connect_to(int family, uint16_t port) {
  int fd = connect_start(family, port);
  if (fd < 0) return -1;
  int err = 0;
  socklen_t len = sizeof err;
  if (!hc_wait(fd, POLLOUT, hc_now_ms() + HC_PATIENCE_MS) ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Sends all of data; 0 when sent, -1 when the server closed or reset. */
static inline int send_bytes(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!hc_wait(fd, POLLOUT, hc_now_ms() + HC_PATIENCE_MS)) return -1;
      continue;
    }
    if (n <= 0) return -1;
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads until the server closes or the deadline passes, then splits the
 * status line, head and body. */
static inline reply_t read_reply_within(int fd, int timeout_ms) {
  int64_t deadline = hc_now_ms() + timeout_ms;
  size_t cap = 1 << 16, len = 0;
  char* buf = malloc(cap + 1);
  REQUIRE(buf);
  int closed = 0;
  while (!closed && hc_wait(fd, POLLIN, deadline)) {
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
      REQUIRE(buf);
    }
    ssize_t n = recv(fd, buf + len, cap - len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) closed = 1;
    else len += (size_t)n;
  }
  buf[len] = '\0';
  reply_t r = {.head = buf, .body = buf + len};
  char* sep = strstr(buf, "\r\n\r\n");
  if (!closed || !sep || sscanf(buf, "HTTP/1.1 %d ", &r.status) != 1) {
    r.status = 0;
    return r;
  }
  *sep = '\0';
  r.body = sep + 4;
  r.body_len = len - (size_t)(r.body - buf);
  return r;
}

static inline reply_t read_reply(int fd) { return read_reply_within(fd, HC_PATIENCE_MS); }

/* One request on a fresh connection, answered within timeout_ms. */
static inline reply_t request_within(int family, uint16_t port, const char* data, size_t len,
                              int timeout_ms) {
  int64_t start = hc_now_ms();
  reply_t r = {0};
  int fd = connect_start(family, port);
  if (fd < 0 || !hc_wait(fd, POLLOUT, start + timeout_ms) || send_bytes(fd, data, len) != 0) {
    r.head = calloc(1, 1);
    REQUIRE(r.head);
  } else {
    int64_t left = start + timeout_ms - hc_now_ms();
    r = read_reply_within(fd, left > 0 ? (int)left : 0);
  }
  if (fd >= 0) close(fd);
  return r;
}

static inline reply_t request_raw(int family, uint16_t port, const char* data, size_t len) {
  return request_within(family, port, data, len, HC_PATIENCE_MS);
}

static inline reply_t request(uint16_t port, const char* req) {
  return request_raw(AF_INET, port, req, strlen(req));
}

/* The Content-Length header's value; -1 when absent. */
static inline long long content_length(const reply_t* r) {
  const char* h = strstr(r->head, "Content-Length: ");
  return h ? strtoll(h + 16, NULL, 10) : -1;
}

#endif
