/* The loopback HTTP endpoint: GET /metrics and GET /stats.json.
 *
 * One thread per endpoint serves one connection at a time with bounded
 * buffers and deadlines, so a slow or hostile client can delay a scrape but
 * never exhaust memory or wedge the thread. The thread only calls the public
 * exporters, which read snapshots: it never touches the allocation fast path.
 * Every wait polls a self-pipe as well, which is how tslab_http_stop wakes the
 * thread wherever it is blocked and joins it promptly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "internal.h"

#define REQUEST_MAX 8192          /* request line and headers */
#define CLIENT_TIMEOUT_MS 2000    /* whole request, and whole response */
#define DRAIN_TIMEOUT_MS 200      /* reading what a refused client still sends */
#define DRAIN_MAX (64 * 1024)
#define ACCEPT_BACKOFF_MS 100     /* after accept fails for lack of resources */
#define RENDER_ATTEMPTS 4         /* the document may grow between sizing and writing */

typedef struct http_ep {
  tslab_t* a;
  int listen_fd;
  int wake[2]; /* self-pipe: [0] polled by the thread, [1] written by stop */
  uint16_t port;
  pthread_t thread;
  char* body; /* reused across requests, grown as the document grows */
  size_t body_cap;
} http_ep_t;

/* The endpoint hangs off its instance (a->http, owned by this file). The
 * mutex serialises start, stop and port queries of all instances; none of
 * them is on a hot path. */
static pthread_mutex_t http_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------------- */
/* Bounded I/O                                                               */
/* ------------------------------------------------------------------------- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum wait_result { WAIT_READY, WAIT_TIMEOUT, WAIT_STOP };

/* Waits until fd is ready for `events`, the deadline passes or stop is asked. */
static enum wait_result wait_fd(const http_ep_t* ep, int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return WAIT_TIMEOUT;
    struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = ep->wake[0], .events = POLLIN}};
    int r = poll(p, 2, (int)left);
    if (r < 0) {
      if (errno == EINTR) continue;
      return WAIT_STOP;
    }
    if (p[1].revents) return WAIT_STOP;
    if (p[0].revents) return WAIT_READY;
  }
}

/* 0 when everything was sent, -1 when the client is gone, slow or we stop. */
static int send_all(const http_ep_t* ep, int fd, const char* data, size_t len, int64_t deadline) {
  while (len > 0) {
    ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(ep, fd, POLLOUT, deadline) != WAIT_READY) return -1;
    } else {
      return -1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------------------- */
/* Requests                                                                  */
/* ------------------------------------------------------------------------- */

static void respond(const http_ep_t* ep, int fd, int code, const char* reason,
                    const char* type, const char* extra_headers, const char* body,
                    size_t body_len) {
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                   "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
                   code, reason, type, body_len, extra_headers);
  if (n < 0 || (size_t)n >= sizeof head) return;
  int64_t deadline = now_ms() + CLIENT_TIMEOUT_MS;
  if (send_all(ep, fd, head, (size_t)n, deadline) == 0) send_all(ep, fd, body, body_len, deadline);
}

static void respond_error(const http_ep_t* ep, int fd, int code, const char* reason,
                          const char* extra_headers) {
  char body[64];
  int n = snprintf(body, sizeof body, "%d %s\n", code, reason);
  respond(ep, fd, code, reason, "text/plain; charset=utf-8", extra_headers, body, (size_t)n);
}

/* Renders a document into ep->body; its length, or -1. Sizes the buffer from
 * the exporter's answer and retries, because the snapshot can grow (a new
 * label, a new era) between two calls. */
static long render(http_ep_t* ep, size_t (*exporter)(tslab_t*, char*, size_t)) {
  for (int attempt = 0; attempt < RENDER_ATTEMPTS; attempt++) {
    size_t need = exporter(ep->a, ep->body, ep->body_cap);
    if (need == 0) return -1;
    if (need < ep->body_cap) return (long)need;
    size_t cap = need + need / 8 + 4096;
    char* grown = realloc(ep->body, cap);
    if (!grown) return -1;
    ep->body = grown;
    ep->body_cap = cap;
  }
  return -1;
}

/* Finds the end of the header block; the request line and headers are all we
 * read (bodies are neither expected nor read). */
static const char* header_end(const char* buf, size_t n) {
  for (size_t i = 1; i < n; i++) {
    if (buf[i] != '\n') continue;
    if (buf[i - 1] == '\n') return buf + i + 1;
    if (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n') return buf + i + 1;
  }
  return NULL;
}

static int is_tchar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Splits "METHOD SP TARGET SP HTTP/1.x" in place; 0 when well formed. */
static int parse_request_line(char* line, char** method, char** target) {
  char* sp1 = strchr(line, ' ');
  if (!sp1 || sp1 == line) return -1;
  char* sp2 = strchr(sp1 + 1, ' ');
  if (!sp2) return -1;
  *sp1 = *sp2 = '\0';
  for (char* c = line; *c; c++) {
    if (!is_tchar(*c)) return -1;
  }
  if (sp1[1] != '/') return -1;
  for (char* c = sp1 + 1; *c; c++) {
    if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7F) return -1;
  }
  if (strcmp(sp2 + 1, "HTTP/1.0") != 0 && strcmp(sp2 + 1, "HTTP/1.1") != 0) return -1;
  *method = line;
  *target = sp1 + 1;
  return 0;
}

static void serve_request(http_ep_t* ep, int fd, char* req) {
  char* eol = strchr(req, '\n');
  *eol = '\0';
  if (eol > req && eol[-1] == '\r') eol[-1] = '\0';
  char *method, *target;
  if (parse_request_line(req, &method, &target) != 0) {
    respond_error(ep, fd, 400, "Bad Request", "");
    return;
  }
  if (strcmp(method, "GET") != 0) {
    respond_error(ep, fd, 405, "Method Not Allowed", "Allow: GET\r\n");
    return;
  }
  target[strcspn(target, "?")] = '\0';
  size_t (*exporter)(tslab_t*, char*, size_t);
  const char* type;
  if (strcmp(target, "/metrics") == 0) {
    exporter = tslab_export_prometheus;
    type = "text/plain; version=0.0.4; charset=utf-8";
  } else if (strcmp(target, "/stats.json") == 0) {
    exporter = tslab_export_json;
    type = "application/json";
  } else {
    respond_error(ep, fd, 404, "Not Found", "");
    return;
  }
  long len = render(ep, exporter);
  if (len < 0) {
    respond_error(ep, fd, 500, "Internal Server Error", "");
    return;
  }
  respond(ep, fd, 200, "OK", type, "", ep->body, (size_t)len);
}

/* Reads what the client still sends, bounded, so that closing the socket does
 * not reset the connection before the client has read our error response. */
static void drain(const http_ep_t* ep, int fd) {
  char sink[4096];
  size_t total = 0;
  int64_t deadline = now_ms() + DRAIN_TIMEOUT_MS;
  while (total < DRAIN_MAX && wait_fd(ep, fd, POLLIN, deadline) == WAIT_READY) {
    ssize_t n = recv(fd, sink, sizeof sink, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    total += (size_t)n;
  }
}

static void serve_connection(http_ep_t* ep, int fd) {
  char req[REQUEST_MAX + 1];
  size_t n = 0;
  int64_t deadline = now_ms() + CLIENT_TIMEOUT_MS;
  for (;;) {
    if (header_end(req, n)) break;
    if (n == REQUEST_MAX) {
      respond_error(ep, fd, 400, "Bad Request", "");
      shutdown(fd, SHUT_WR);
      drain(ep, fd);
      return;
    }
    enum wait_result w = wait_fd(ep, fd, POLLIN, deadline);
    if (w == WAIT_STOP) return;
    if (w == WAIT_TIMEOUT) {
      respond_error(ep, fd, 408, "Request Timeout", "");
      return;
    }
    ssize_t got = recv(fd, req + n, REQUEST_MAX - n, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (got <= 0) return;
    n += (size_t)got;
  }
  req[n] = '\0';
  if (strlen(req) != n) {
    respond_error(ep, fd, 400, "Bad Request", "");
    return;
  }
  serve_request(ep, fd, req);
  shutdown(fd, SHUT_WR);
}

static void* server_main(void* arg) {
  http_ep_t* ep = arg;
  for (;;) {
    struct pollfd p[2] = {{.fd = ep->listen_fd, .events = POLLIN},
                          {.fd = ep->wake[0], .events = POLLIN}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents) break;
    if (!p[0].revents) continue;
    int fd = accept4(ep->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* The pending connection stays readable; wait instead of spinning. */
        struct pollfd w = {.fd = ep->wake[0], .events = POLLIN};
        if (poll(&w, 1, ACCEPT_BACKOFF_MS) > 0) break;
      }
      continue;
    }
    serve_connection(ep, fd);
    close(fd);
  }
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Start and stop                                                            */
/* ------------------------------------------------------------------------- */

/* Only numeric loopback addresses: the endpoint has no authentication, so
 * it must never be reachable from another host. */
static int loopback_address(const char* address, uint16_t port, struct sockaddr_storage* ss,
                            socklen_t* len) {
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in* v4 = (struct sockaddr_in*)ss;
  struct sockaddr_in6* v6 = (struct sockaddr_in6*)ss;
  if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
    if ((ntohl(v4->sin_addr.s_addr) >> 24) != 127) return -1;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof *v4;
    return 0;
  }
  if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
    if (!IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) return -1;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof *v6;
    return 0;
  }
  return -1;
}

static void ep_close(http_ep_t* ep) {
  if (ep->listen_fd >= 0) close(ep->listen_fd);
  if (ep->wake[0] >= 0) close(ep->wake[0]);
  if (ep->wake[1] >= 0) close(ep->wake[1]);
  free(ep->body);
  free(ep);
}

static int ep_open(http_ep_t* ep, const struct sockaddr_storage* ss, socklen_t len) {
  if (pipe2(ep->wake, O_CLOEXEC | O_NONBLOCK) != 0) return TSLAB_ERR_IO;
  ep->listen_fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ep->listen_fd < 0) return TSLAB_ERR_IO;
  int one = 1;
  setsockopt(ep->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss->ss_family == AF_INET6) {
    setsockopt(ep->listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (bind(ep->listen_fd, (const struct sockaddr*)ss, len) != 0) return TSLAB_ERR_IO;
  if (listen(ep->listen_fd, 16) != 0) return TSLAB_ERR_IO;
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  if (getsockname(ep->listen_fd, (struct sockaddr*)&bound, &blen) != 0) return TSLAB_ERR_IO;
  ep->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&bound)->sin6_port
                                               : ((struct sockaddr_in*)&bound)->sin_port);
  /* The thread must not run the application's signal handlers. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&ep->thread, NULL, server_main, ep);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc == 0 ? TSLAB_OK : TSLAB_ERR_OUT_OF_MEMORY;
}

static void ep_stop(http_ep_t* ep) {
  char byte = 1;
  while (write(ep->wake[1], &byte, 1) < 0 && errno == EINTR) {
  }
  pthread_join(ep->thread, NULL);
  ep_close(ep);
}

static int fail(int status) {
  tslab_set_error(status);
  return status;
}

int tslab_http_start(tslab_t* a, const char* address, uint16_t port) {
  if (!a || !address) return fail(TSLAB_ERR_INVALID_ARGUMENT);
  struct sockaddr_storage ss;
  socklen_t len;
  if (loopback_address(address, port, &ss, &len) != 0) return fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_mutex_lock(&http_lock);
  int rc;
  http_ep_t* ep = NULL;
  if (a->http) {
    rc = TSLAB_ERR_BUSY;
  } else if (!(ep = calloc(1, sizeof *ep))) {
    rc = TSLAB_ERR_OUT_OF_MEMORY;
  } else {
    ep->a = a;
    ep->listen_fd = ep->wake[0] = ep->wake[1] = -1;
    rc = ep_open(ep, &ss, len);
    if (rc == TSLAB_OK) {
      a->http = ep;
    } else {
      ep_close(ep);
    }
  }
  pthread_mutex_unlock(&http_lock);
  return rc == TSLAB_OK ? rc : fail(rc);
}

uint16_t tslab_http_port(tslab_t* a) {
  if (!a) return 0;
  pthread_mutex_lock(&http_lock);
  const http_ep_t* ep = a->http;
  uint16_t port = ep ? ep->port : 0;
  pthread_mutex_unlock(&http_lock);
  return port;
}

/* Detaches a's endpoint first, so a concurrent start or stop sees it gone
 * while this thread joins the server thread. */
static http_ep_t* take_endpoint(tslab_t* a) {
  pthread_mutex_lock(&http_lock);
  http_ep_t* ep = a->http;
  a->http = NULL;
  pthread_mutex_unlock(&http_lock);
  return ep;
}

void tslab_http_shutdown(tslab_t* a) {
  http_ep_t* ep = take_endpoint(a);
  if (ep) ep_stop(ep);
}

int tslab_http_stop(tslab_t* a) {
  if (!a) return fail(TSLAB_ERR_INVALID_ARGUMENT);
  tslab_http_shutdown(a);
  return TSLAB_OK;
}
