/* A request server on the drop-in malloc: every request runs in a domain of
 * its own, entered with tslab_malloc_domain_enter, so that everything it
 * allocates lands in the request's epoch, including what zlib (a library
 * this program did not write, calling plain malloc) allocates inside it.
 *
 * The server listens on a loopback port; client threads of the same program
 * send requests (a payload to compress, or a compressed payload to expand)
 * and check every answer. For each request the server checks what the
 * allocator saw: the request's epoch held zlib's state while it ran (live
 * bytes far above the payload the server allocated), and when the domain's
 * last scope exited the epoch was closed with nothing live and its memory
 * returned to the OS. The instance's metrics endpoint runs meanwhile, and
 * the program scrapes it once: the request labels ("compress", "expand")
 * appear with their allocations. Exits non-zero when any check fails.
 *
 * Usage: scoped_server [-n REQUESTS_PER_CLIENT] [-c CLIENTS] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <tslab_malloc.h>

#define PAYLOAD_MAX (256 << 10)

enum { OP_COMPRESS = 'C', OP_EXPAND = 'E' };

static atomic_int failures;
static uint16_t server_port;

#define FAIL(...)                        \
  do {                                   \
    fprintf(stderr, __VA_ARGS__);        \
    atomic_fetch_add(&failures, 1);      \
  } while (0)

/* ---- framing: op (1 byte), length (4 bytes, network order), bytes ---- */

static bool read_full(int fd, void* buf, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t r = read(fd, (char*)buf + done, n - done);
    if (r <= 0) return false;
    done += (size_t)r;
  }
  return true;
}

static bool write_full(int fd, const void* buf, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, (const char*)buf + done, n - done);
    if (w <= 0) return false;
    done += (size_t)w;
  }
  return true;
}

static bool send_msg(int fd, char op, const void* data, uint32_t len) {
  unsigned char head[5] = {(unsigned char)op};
  uint32_t be = htonl(len);
  memcpy(head + 1, &be, 4);
  /* One segment with the body (no Nagle wait between header and body). */
  return send(fd, head, 5, MSG_MORE) == 5 && write_full(fd, data, len);
}

/* The body is malloc'd: inside a request, in the request's epoch. */
static unsigned char* recv_msg(int fd, char* op, uint32_t* len) {
  unsigned char head[5];
  if (!read_full(fd, head, 5)) return NULL;
  uint32_t be;
  memcpy(&be, head + 1, 4);
  *op = (char)head[0];
  *len = ntohl(be);
  if (*len > PAYLOAD_MAX) return NULL;
  unsigned char* body = malloc(*len ? *len : 1);
  if (body && !read_full(fd, body, *len)) {
    free(body);
    return NULL;
  }
  return body;
}

/* ---- the work of a request, done by zlib ---- */

/* Bytes live in epoch e now. */
static uint64_t live_in(tslab_t* a, tslab_epoch_t e) {
  tslab_stats_epoch_t st;
  return tslab_stats_epoch(a, e, &st) == TSLAB_OK ? st.live_bytes : 0;
}

/* deflateInit allocates zlib's state (about 256 KiB at the default
 * settings) with plain malloc; *during is what the request's epoch e holds
 * while it works. */
static unsigned char* compress_payload(const unsigned char* in, uint32_t n, uint32_t* out_n,
                                       tslab_t* a, tslab_epoch_t e, uint64_t* during) {
  z_stream zs = {0};
  if (deflateInit(&zs, 6) != Z_OK) return NULL;
  *during = live_in(a, e);
  uLong cap = deflateBound(&zs, n);
  unsigned char* out = malloc(cap);
  zs.next_in = (Bytef*)in;
  zs.avail_in = n;
  zs.next_out = out;
  zs.avail_out = (uInt)cap;
  int rc = out ? deflate(&zs, Z_FINISH) : Z_MEM_ERROR;
  *out_n = (uint32_t)zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    free(out);
    return NULL;
  }
  return out;
}

static unsigned char* expand_payload(const unsigned char* in, uint32_t n, uint32_t* out_n) {
  z_stream zs = {0};
  if (inflateInit(&zs) != Z_OK) return NULL;
  unsigned char* out = malloc(PAYLOAD_MAX);
  zs.next_in = (Bytef*)in;
  zs.avail_in = n;
  zs.next_out = out;
  zs.avail_out = PAYLOAD_MAX;
  int rc = out ? inflate(&zs, Z_FINISH) : Z_MEM_ERROR;
  *out_n = (uint32_t)zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    free(out);
    return NULL;
  }
  return out;
}

/* ---- the server ---- */

static atomic_ulong zlib_peak_total, requests_served, requests_checked;

/* One request in its own domain; the answer goes out after the domain's
 * memory was checked and returned. */
static bool serve_request(tslab_t* a, int fd) {
  unsigned char head;
  if (recv(fd, &head, 1, MSG_PEEK) != 1) return false;
  tslab_domain_t* d = tslab_domain_create(a, head == OP_COMPRESS ? "compress" : "expand");
  if (!d) {
    FAIL("domain: %s\n", tslab_strerror(tslab_last_error()));
    return false;
  }
  tslab_epoch_t e = tslab_domain_epoch(d);
  if (tslab_malloc_domain_enter(d) != TSLAB_OK) {
    FAIL("enter failed\n");
    tslab_domain_destroy(d);
    return false;
  }
  char op;
  uint32_t n = 0, out_n = 0;
  unsigned char* body = recv_msg(fd, &op, &n);
  unsigned char* out = NULL;
  uint64_t during = 0;
  if (body)
    out = op == OP_COMPRESS ? compress_payload(body, n, &out_n, a, e, &during)
                            : expand_payload(body, n, &out_n);
  free(body);
  /* What the request still holds is its answer, in its epoch. */
  bool answer_in_epoch = out == NULL || tslab_epoch_of(a, out) == e;
  /* The answer leaves before the scope ends. */
  bool sent = out && send_msg(fd, op, out, out_n);
  free(out);
  tslab_malloc_domain_exit(d); /* last scope: the epoch is closed */
  if (!answer_in_epoch) FAIL("the answer is not in the request's epoch\n");
  if (op == OP_COMPRESS && body && during < n + (200u << 10))
    FAIL("zlib's deflate state is not in the request's epoch (%llu bytes live)\n",
         (unsigned long long)during);
  /* Another connection's new request may take the closed era's ring slot
   * at once (its era is then stale: closed, but no longer readable). */
  tslab_stats_epoch_t st;
  int rc = tslab_stats_epoch(a, e, &st);
  if (rc == TSLAB_OK) {
    atomic_fetch_add(&requests_checked, 1);
    if (st.state != TSLAB_EPOCH_CLOSING || st.live_objects != 0)
      FAIL("request epoch %llu: state %d, %llu objects live after its end\n", (unsigned long long)e,
           (int)st.state, (unsigned long long)st.live_objects);
    if (st.rss_estimate_bytes != 0)
      FAIL("request epoch %llu keeps %llu bytes resident after its close\n", (unsigned long long)e,
           (unsigned long long)st.rss_estimate_bytes);
  } else if (rc != TSLAB_ERR_EPOCH_STALE) {
    FAIL("request epoch %llu: %s\n", (unsigned long long)e, tslab_strerror(rc));
  }
  atomic_fetch_add(&zlib_peak_total, during);
  atomic_fetch_add(&requests_served, 1);
  tslab_domain_destroy(d);
  return sent;
}

static void* connection(void* arg) {
  int fd = (int)(intptr_t)arg;
  tslab_t* a = tslab_malloc_instance();
  while (serve_request(a, fd)) {
  }
  close(fd);
  return NULL;
}

static void* acceptor(void* arg) {
  int ls = (int)(intptr_t)arg;
  for (;;) {
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) return NULL;
    pthread_t t;
    if (pthread_create(&t, NULL, connection, (void*)(intptr_t)fd) == 0)
      pthread_detach(t);
    else
      close(fd);
  }
}

/* ---- clients ---- */

static int connect_loopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int requests_per_client = 200;

static void* client(void* arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  int fd = connect_loopback(server_port);
  if (fd < 0) {
    FAIL("client: cannot connect\n");
    return NULL;
  }
  unsigned char* text = malloc(PAYLOAD_MAX / 2);
  for (int i = 0; text && i < requests_per_client; i++) {
    uint32_t n = 1000 + (uint32_t)((seed + (unsigned)i * 7919u) % (PAYLOAD_MAX / 2 - 1000));
    for (uint32_t k = 0; k < n; k++) text[k] = (unsigned char)("tslab scoped malloc "[(k + seed) % 20]);
    char op;
    uint32_t zn, back_n;
    unsigned char* z = NULL;
    unsigned char* back = NULL;
    if (send_msg(fd, OP_COMPRESS, text, n) && (z = recv_msg(fd, &op, &zn)) &&
        send_msg(fd, OP_EXPAND, z, zn) && (back = recv_msg(fd, &op, &back_n))) {
      if (back_n != n || memcmp(back, text, n) != 0) FAIL("client: round trip changed the payload\n");
    } else {
      FAIL("client: request %d failed\n", i);
    }
    free(z);
    free(back);
    if (!z || !back) break;
  }
  free(text);
  close(fd);
  return NULL;
}

/* ---- metrics ---- */

static void check_metrics(uint16_t port) {
  int fd = connect_loopback(port);
  const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  size_t cap = 1 << 20, len = 0;
  char* doc = malloc(cap);
  if (fd < 0 || !doc || !write_full(fd, req, sizeof req - 1)) {
    FAIL("metrics: cannot scrape port %u\n", port);
  } else {
    ssize_t r;
    while (len < cap - 1 && (r = read(fd, doc + len, cap - 1 - len)) > 0) len += (size_t)r;
    doc[len] = '\0';
    const char* want[] = {"tslab_label_allocations_total{label=\"compress\"}",
                          "tslab_label_allocations_total{label=\"expand\"}",
                          "tslab_label_epochs_total{label=\"expand\"}"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
      const char* at = strstr(doc, want[i]);
      if (!at || atof(at + strlen(want[i])) <= 0) FAIL("metrics: no %s\n", want[i]);
      else printf("%.*s\n", (int)(strchr(at, '\n') ? strchr(at, '\n') - at : 80), at);
    }
  }
  free(doc);
  if (fd >= 0) close(fd);
}

int main(int argc, char** argv) {
  int clients = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-n")) requests_per_client = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-c")) clients = atoi(argv[i + 1]);
  }
  tslab_t* a = tslab_malloc_instance();
  if (!a) {
    fprintf(stderr, "the drop-in is not active\n");
    return 1;
  }
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t sl = sizeof sa;
  if (ls < 0 || bind(ls, (struct sockaddr*)&sa, sizeof sa) != 0 || listen(ls, 64) != 0 ||
      getsockname(ls, (struct sockaddr*)&sa, &sl) != 0) {
    perror("listen");
    return 1;
  }
  server_port = ntohs(sa.sin_port);
  if (tslab_http_start(a, "127.0.0.1", 0) != TSLAB_OK) {
    fprintf(stderr, "metrics endpoint: %s\n", tslab_strerror(tslab_last_error()));
    return 1;
  }
  pthread_t acc;
  pthread_create(&acc, NULL, acceptor, (void*)(intptr_t)ls);
  pthread_t* ct = malloc(sizeof *ct * (size_t)clients);
  for (int i = 0; i < clients; i++) pthread_create(&ct[i], NULL, client, (void*)(uintptr_t)(i * 977));
  for (int i = 0; i < clients; i++) pthread_join(ct[i], NULL);
  free(ct);
  check_metrics(tslab_http_port(a));
  unsigned long served = atomic_load(&requests_served);
  printf("%lu requests served, each in its own epoch; a compress request's epoch held %lu bytes "
         "on average inside zlib\n",
         served, served ? atomic_load(&zlib_peak_total) / (served / 2 ? served / 2 : 1) : 0);
  if (served != (unsigned long)clients * (unsigned long)requests_per_client * 2)
    FAIL("served %lu requests, expected %d\n", served, clients * requests_per_client * 2);
  /* Nearly all are checked after their end; the ring recycles a slot only
   * after the 250 eras opened after it (TSLAB_EPOCH_RING_SIZE=256 in CTest). */
  if (atomic_load(&requests_checked) < served / 2)
    FAIL("only %lu of %lu requests could be checked after their end\n", atomic_load(&requests_checked),
         served);
  int f = atomic_load(&failures);
  if (f) fprintf(stderr, "FAILED: %d check(s)\n", f);
  return f ? 1 : 0;
}
