/* The loopback HTTP endpoint: GET and HEAD of /metrics and /stats.json.
 *
 * One thread per endpoint runs an event loop over poll(): it accepts
 * connections, reads requests, renders documents and sends responses without
 * ever blocking on a client, so no client can hold up another one's scrape.
 * Every connection has a deadline for its whole request and another for its
 * whole response, and at most TSLAB_HTTP_CONNECTIONS_MAX are open: beyond that
 * the oldest is refused to make room for the newest (docs/OBSERVABILITY.md
 * gives the bounds). Buffers are bounded too. The thread only calls the public
 * exporters, which read snapshots: it never touches the allocation fast path.
 * A self-pipe in the poll set is how tslab_http_stop wakes the thread.
 *
 * fork: a child has no server threads, yet copies of every endpoint and of
 * their descriptors. Handlers around fork take the endpoint locks, so the
 * child sees each endpoint between two steps of its event loop, and the child
 * drops them all: it closes its copies of the descriptors (the parent's stay
 * open and served) and frees the memory. Stopping, destroying or starting in
 * the child then never touches the parent's server.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "internal.h"

#define REQUEST_MAX 8192          /* request line and headers */
#define RESPONSE_TIMEOUT_MS 2000  /* whole response, from the end of the request */
#define LINGER_TIMEOUT_MS 200     /* reading what a client still sends after its answer */
#define LINGER_MAX (64 * 1024)
#define LISTEN_BACKLOG (2 * TSLAB_HTTP_CONNECTIONS_MAX) /* the kernel caps it at somaxconn */
#define ACCEPT_BATCH 32           /* connections accepted per round of the event loop */
#define ACCEPT_BACKOFF_MS 100     /* after accept fails for lack of resources */
#define RENDER_ATTEMPTS 4         /* the document may grow between sizing and writing */

enum conn_state {
  CONN_FREE,    /* slot unused, fd is -1 */
  CONN_READING, /* reading the request head into buf */
  CONN_WRITING, /* sending buf[sent..len) */
  CONN_CLOSING, /* answered and write side shut: reading until the client closes */
};

typedef struct conn {
  int fd;
  enum conn_state state;
  int64_t deadline; /* monotonic ms: the state's time is up */
  uint64_t seq;     /* accept order: at the bound, the lowest is refused */
  char* buf;        /* request head while reading, response while writing */
  size_t len;       /* bytes in buf; bytes discarded while closing */
  size_t sent;
} conn_t;

typedef struct http_ep {
  /* Set by start before the thread exists, constant until stop joins it. */
  tslab_t* a;
  int listen_fd;
  int wake[2]; /* self-pipe: [0] polled by the thread, [1] written by stop */
  uint16_t port;
  pthread_t thread;
  struct http_ep* next; /* the list of endpoints, guarded by http_lock */

  /* Held by the thread whenever it changes the fields below, i.e. always but
   * during its wait in poll(), and by the fork handlers: a child sees them
   * between two steps of the event loop, never half-changed. */
  pthread_mutex_t mu;
  char* body; /* rendering buffer, reused across requests */
  size_t body_cap;
  uint64_t accepted;     /* connections accepted so far */
  int64_t accept_resume; /* no accept before this monotonic ms */
  conn_t conns[TSLAB_HTTP_CONNECTIONS_MAX];
} http_ep_t;

/* Guards every instance's a->http, the list of endpoints (from start until
 * stop has joined the thread and closed the descriptors) and, around fork,
 * the endpoints themselves (taken before their mutexes). Start, stop and port
 * queries are rare: one lock for all instances is enough. */
static pthread_mutex_t http_lock = PTHREAD_MUTEX_INITIALIZER;
static http_ep_t* endpoints;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------- */
/* Connections                                                               */
/* ------------------------------------------------------------------------- */

static void conn_close(conn_t* c) {
  close(c->fd);
  free(c->buf);
  *c = (conn_t){.fd = -1};
}

static void conn_write(conn_t* c, int64_t now);

/* Replaces whatever c holds by the response and starts sending it. HEAD
 * gets the same head with no body. */
static void respond(conn_t* c, int code, const char* reason, const char* type,
                    const char* extra_headers, const char* body, size_t body_len, bool head_only,
                    int64_t now) {
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                   "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
                   code, reason, type, body_len, extra_headers);
  size_t len = (size_t)n + (head_only ? 0 : body_len);
  char* out = n > 0 && (size_t)n < sizeof head ? malloc(len) : NULL;
  if (!out) {
    conn_close(c);
    return;
  }
  memcpy(out, head, (size_t)n);
  if (!head_only) memcpy(out + (size_t)n, body, body_len);
  free(c->buf);
  c->buf = out;
  c->len = len;
  c->sent = 0;
  c->state = CONN_WRITING;
  c->deadline = now + RESPONSE_TIMEOUT_MS;
  conn_write(c, now);
}

static void respond_error(conn_t* c, int code, const char* reason, const char* extra_headers,
                          bool head_only, int64_t now) {
  char body[64];
  int n = snprintf(body, sizeof body, "%d %s\n", code, reason);
  respond(c, code, reason, "text/plain; charset=utf-8", extra_headers, body, (size_t)n,
          head_only, now);
}

static void conn_write(conn_t* c, int64_t now) {
  while (c->sent < c->len) {
    ssize_t n = send(c->fd, c->buf + c->sent, c->len - c->sent, MSG_NOSIGNAL);
    if (n > 0) {
      c->sent += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return; /* poll says when there is room */
    } else {
      conn_close(c);
      return;
    }
  }
  /* Closing now would reset the connection if the client is still sending
   * (a body, the rest of an oversized head), and a reset can destroy the
   * answer before the client reads it: shut the write side, which also tells
   * the client the answer is complete, and read until it closes. */
  free(c->buf);
  c->buf = NULL;
  c->len = 0;
  shutdown(c->fd, SHUT_WR);
  c->state = CONN_CLOSING;
  c->deadline = now + LINGER_TIMEOUT_MS;
}

static void conn_linger(conn_t* c) {
  char sink[4096];
  ssize_t n = recv(c->fd, sink, sizeof sink, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0 || (c->len += (size_t)n) >= LINGER_MAX) conn_close(c);
}

/* ------------------------------------------------------------------------- */
/* Requests                                                                  */
/* ------------------------------------------------------------------------- */

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
  if (!sp2 || sp2 == sp1 + 1) return -1;
  *sp1 = *sp2 = '\0';
  for (char* c = line; *c; c++) {
    if (!is_tchar(*c)) return -1;
  }
  for (char* c = sp1 + 1; *c; c++) {
    if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7F) return -1;
  }
  if (strcmp(sp2 + 1, "HTTP/1.0") != 0 && strcmp(sp2 + 1, "HTTP/1.1") != 0) return -1;
  *method = line;
  *target = sp1 + 1;
  return 0;
}

/* The path of a target in origin form ("/metrics?x") or in absolute form
 * ("http://host:port/metrics?x", which proxies send; RFC 9112 section 3.2.2,
 * where an empty path means "/"); NULL when it is neither. */
static const char* target_path(const char* target) {
  if (target[0] == '/') return target;
  if (strncasecmp(target, "http://", 7) != 0) return NULL;
  const char* authority = target + 7;
  size_t n = strcspn(authority, "/?");
  if (n == 0) return NULL; /* an http URI names a host */
  return authority[n] == '/' ? authority + n : "/";
}

static const struct route {
  const char* path;
  size_t (*exporter)(tslab_t*, char*, size_t);
  const char* type;
} routes[] = {
    {"/metrics", tslab_export_prometheus, "text/plain; version=0.0.4; charset=utf-8"},
    {"/stats.json", tslab_export_json, "application/json"},
};

static const struct route* find_route(const char* path) {
  size_t len = strcspn(path, "?");
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
    if (strlen(routes[i].path) == len && memcmp(routes[i].path, path, len) == 0) return &routes[i];
  }
  return NULL;
}

/* Answers the request head in c->buf (NUL-terminated, one line at least). */
static void serve_request(http_ep_t* ep, conn_t* c, int64_t now) {
  char* req = c->buf;
  char* eol = strchr(req, '\n');
  *eol = '\0';
  if (eol > req && eol[-1] == '\r') eol[-1] = '\0';
  char *method, *target;
  if (parse_request_line(req, &method, &target) != 0) {
    respond_error(c, 400, "Bad Request", "", false, now);
    return;
  }
  bool head_only = strcmp(method, "HEAD") == 0;
  if (!head_only && strcmp(method, "GET") != 0) {
    respond_error(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", false, now);
    return;
  }
  const char* path = target_path(target);
  if (!path) {
    respond_error(c, 400, "Bad Request", "", head_only, now);
    return;
  }
  const struct route* route = find_route(path);
  if (!route) {
    respond_error(c, 404, "Not Found", "", head_only, now);
    return;
  }
  long len = render(ep, route->exporter);
  if (len < 0) {
    respond_error(c, 500, "Internal Server Error", "", head_only, now);
    return;
  }
  respond(c, 200, "OK", route->type, "", ep->body, (size_t)len, head_only, now);
}

static void conn_read(http_ep_t* ep, conn_t* c, int64_t now) {
  if (!c->buf && !(c->buf = malloc(REQUEST_MAX + 1))) {
    conn_close(c);
    return;
  }
  ssize_t got = recv(c->fd, c->buf + c->len, REQUEST_MAX - c->len, 0);
  if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (got <= 0) { /* gone before the end of its request */
    conn_close(c);
    return;
  }
  c->len += (size_t)got;
  if (header_end(c->buf, c->len)) {
    c->buf[c->len] = '\0';
    if (strlen(c->buf) != c->len)
      respond_error(c, 400, "Bad Request", "", false, now);
    else
      serve_request(ep, c, now);
  } else if (c->len == REQUEST_MAX) {
    respond_error(c, 400, "Bad Request", "", false, now);
  }
}

/* ------------------------------------------------------------------------- */
/* The event loop                                                            */
/* ------------------------------------------------------------------------- */

/* At the bound, the oldest connection makes room for the newest: a scrape
 * sends its request at once, so it is the newest that is most likely to be
 * served, and the oldest is the nearest to its deadline anyway. A client that
 * has not been answered is told so, as far as the socket takes it at once. */
static void refuse(conn_t* c, int64_t now) {
  if (c->state == CONN_READING)
    respond_error(c, 503, "Service Unavailable", "Retry-After: 1\r\n", false, now);
  if (c->fd >= 0) conn_close(c);
}

/* Accepts pending connections, a batch per round so that accepting never
 * starves the connections already open. At the bound only the first of the
 * round, the one poll reported: the refusal that makes room for it is then
 * not in vain. */
static void accept_pending(http_ep_t* ep, int64_t now) {
  for (int accepted = 0; accepted < ACCEPT_BATCH; accepted++) {
    conn_t* slot = NULL;
    for (size_t i = 0; i < TSLAB_HTTP_CONNECTIONS_MAX && !(slot && slot->fd < 0); i++) {
      conn_t* c = &ep->conns[i];
      if (!slot || c->fd < 0 || c->seq < slot->seq) slot = c;
    }
    if (slot->fd >= 0) {
      if (accepted > 0) return;
      refuse(slot, now);
    }
    int fd = accept4(ep->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      /* The pending connection stays readable: wait instead of spinning. */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        ep->accept_resume = now + ACCEPT_BACKOFF_MS;
      return;
    }
    *slot = (conn_t){.fd = fd,
                     .state = CONN_READING,
                     .deadline = now + TSLAB_HTTP_REQUEST_TIMEOUT_MS,
                     .seq = ep->accepted++};
    conn_read(ep, slot, now); /* the request has often arrived with the connection */
  }
}

/* A connection whose time is up: a request that did not arrive in time is
 * answered 408; a response or a linger that did not end is cut. */
static void expire(conn_t* c, int64_t now) {
  if (c->state == CONN_READING)
    respond_error(c, 408, "Request Timeout", "", false, now);
  else
    conn_close(c);
}

/* Fills the poll set (wake pipe, listening socket, one entry per slot: poll
 * skips negative descriptors) and returns poll's timeout. */
static int poll_set(const http_ep_t* ep, struct pollfd* p, int64_t now) {
  bool accepting = ep->accept_resume <= now;
  int64_t until = accepting ? INT64_MAX : ep->accept_resume;
  p[0] = (struct pollfd){.fd = ep->wake[0], .events = POLLIN};
  p[1] = (struct pollfd){.fd = ep->listen_fd, .events = accepting ? POLLIN : 0};
  for (size_t i = 0; i < TSLAB_HTTP_CONNECTIONS_MAX; i++) {
    const conn_t* c = &ep->conns[i];
    p[2 + i] = (struct pollfd){.fd = c->fd, .events = c->state == CONN_WRITING ? POLLOUT : POLLIN};
    if (c->fd >= 0 && c->deadline < until) until = c->deadline;
  }
  if (until == INT64_MAX) return -1;
  return until <= now ? 0 : (int)(until - now);
}

static void* server_main(void* arg) {
  http_ep_t* ep = arg;
  struct pollfd p[2 + TSLAB_HTTP_CONNECTIONS_MAX];
  pthread_mutex_lock(&ep->mu);
  for (;;) {
    int timeout = poll_set(ep, p, now_ms());
    pthread_mutex_unlock(&ep->mu);
    int ready = poll(p, 2 + TSLAB_HTTP_CONNECTIONS_MAX, timeout);
    pthread_mutex_lock(&ep->mu);
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0 && p[0].revents) break;
    int64_t now = now_ms();
    for (size_t i = 0; ready > 0 && i < TSLAB_HTTP_CONNECTIONS_MAX; i++) {
      conn_t* c = &ep->conns[i];
      if (c->fd < 0 || !p[2 + i].revents) continue;
      if (c->state == CONN_READING)
        conn_read(ep, c, now);
      else if (c->state == CONN_WRITING)
        conn_write(c, now);
      else
        conn_linger(c);
    }
    for (size_t i = 0; i < TSLAB_HTTP_CONNECTIONS_MAX; i++) {
      conn_t* c = &ep->conns[i];
      if (c->fd >= 0 && c->deadline <= now) expire(c, now);
    }
    if (ready > 0 && p[1].revents) accept_pending(ep, now);
  }
  pthread_mutex_unlock(&ep->mu);
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

/* Closes ep's descriptors and frees it, its thread gone (joined, or absent
 * in a fork child). Called under http_lock, so that a child forked meanwhile
 * finds the endpoint either whole in the list or gone. */
static void ep_close(http_ep_t* ep) {
  for (http_ep_t** at = &endpoints; *at; at = &(*at)->next) {
    if (*at == ep) {
      *at = ep->next;
      break;
    }
  }
  for (size_t i = 0; i < TSLAB_HTTP_CONNECTIONS_MAX; i++) {
    if (ep->conns[i].fd >= 0) conn_close(&ep->conns[i]);
  }
  if (ep->listen_fd >= 0) close(ep->listen_fd);
  if (ep->wake[0] >= 0) close(ep->wake[0]);
  if (ep->wake[1] >= 0) close(ep->wake[1]);
  pthread_mutex_destroy(&ep->mu);
  free(ep->body);
  free(ep);
}

/* Opens the socket and starts the thread; under http_lock. */
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
  if (listen(ep->listen_fd, LISTEN_BACKLOG) != 0) return TSLAB_ERR_IO;
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

/* ------------------------------------------------------------------------- */
/* fork                                                                      */
/* ------------------------------------------------------------------------- */

/* Runs before the instances' handlers (src/fork.c; registered later, so run
 * earlier): no server thread holds an instance lock outside its endpoint's
 * mutex, which is the order every path takes. */
static void fork_prepare(void) {
  pthread_mutex_lock(&http_lock);
  for (http_ep_t* ep = endpoints; ep; ep = ep->next) pthread_mutex_lock(&ep->mu);
}

static void fork_parent(void) {
  for (http_ep_t* ep = endpoints; ep; ep = ep->next) pthread_mutex_unlock(&ep->mu);
  pthread_mutex_unlock(&http_lock);
}

/* The child drops every endpoint it inherited, running or being stopped. */
static void fork_child(void) {
  while (endpoints) {
    http_ep_t* ep = endpoints;
    if (ep->a->http == ep) ep->a->http = NULL;
    pthread_mutex_unlock(&ep->mu);
    ep_close(ep);
  }
  pthread_mutex_unlock(&http_lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static int fork_registered; /* pthread_atfork's result, published by pthread_once */

static void register_fork_handlers(void) {
  fork_registered = pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ------------------------------------------------------------------------- */
/* Public interface                                                          */
/* ------------------------------------------------------------------------- */

int tslab_http_start(tslab_t* a, const char* address, uint16_t port) {
  if (!a || !address) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  struct sockaddr_storage ss;
  socklen_t len;
  if (loopback_address(address, port, &ss, &len) != 0)
    return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  pthread_once(&fork_once, register_fork_handlers);
  if (fork_registered != 0) return tslab_fail(TSLAB_ERR_OUT_OF_MEMORY);
  pthread_mutex_lock(&http_lock);
  int rc;
  http_ep_t* ep = NULL;
  if (a->http) {
    rc = TSLAB_ERR_BUSY;
  } else if (!(ep = calloc(1, sizeof *ep))) {
    rc = TSLAB_ERR_OUT_OF_MEMORY;
  } else if (pthread_mutex_init(&ep->mu, NULL) != 0) {
    free(ep);
    rc = TSLAB_ERR_OUT_OF_MEMORY;
  } else {
    ep->a = a;
    ep->listen_fd = ep->wake[0] = ep->wake[1] = -1;
    for (size_t i = 0; i < TSLAB_HTTP_CONNECTIONS_MAX; i++) ep->conns[i].fd = -1;
    ep->next = endpoints;
    endpoints = ep;
    rc = ep_open(ep, &ss, len);
    if (rc == TSLAB_OK)
      a->http = ep;
    else
      ep_close(ep);
  }
  pthread_mutex_unlock(&http_lock);
  return tslab_fail(rc);
}

uint16_t tslab_http_port(tslab_t* a) {
  if (!a) return 0;
  pthread_mutex_lock(&http_lock);
  const http_ep_t* ep = a->http;
  uint16_t port = ep ? ep->port : 0;
  pthread_mutex_unlock(&http_lock);
  return port;
}

void tslab_http_shutdown(tslab_t* a) {
  /* Detach first, so a concurrent start or stop sees it gone while this
   * thread joins the server thread. */
  pthread_mutex_lock(&http_lock);
  http_ep_t* ep = a->http;
  a->http = NULL;
  pthread_mutex_unlock(&http_lock);
  if (!ep) return;
  char byte = 1;
  while (write(ep->wake[1], &byte, 1) < 0 && errno == EINTR) {
  }
  pthread_join(ep->thread, NULL);
  pthread_mutex_lock(&http_lock);
  ep_close(ep);
  pthread_mutex_unlock(&http_lock);
}

int tslab_http_stop(tslab_t* a) {
  if (!a) return tslab_fail(TSLAB_ERR_INVALID_ARGUMENT);
  tslab_http_shutdown(a);
  return TSLAB_OK;
}
