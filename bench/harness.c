#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void* h_map(size_t bytes) {
  void* p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    perror("bench: mmap");
    exit(2);
  }
  return p;
}

void h_unmap(void* p, size_t bytes) { munmap(p, bytes ? bytes : 1); }

const char* h_arg_str(int n, char** args, const char* key, const char* dflt) {
  size_t kl = strlen(key);
  for (int i = 0; i < n; i++)
    if (strncmp(args[i], key, kl) == 0 && args[i][kl] == '=') return args[i] + kl + 1;
  return dflt;
}

uint64_t h_arg_u64(int n, char** args, const char* key, uint64_t dflt) {
  const char* s = h_arg_str(n, args, key, NULL);
  return s ? strtoull(s, NULL, 10) : dflt;
}

bool h_touch_all = true;

void h_touch_init(int n, char** args) { h_touch_all = h_arg_u64(n, args, "touch", 1) != 0; }

uint64_t h_rss(void) {
  static int fd = -1;
  static long page;
  if (fd < 0) {
    fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    page = sysconf(_SC_PAGESIZE);
    if (fd < 0) return 0;
  }
  char buf[128];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = 0;
  char* s = buf;
  strtoull(s, &s, 10); /* size; resident is the second field */
  return strtoull(s, NULL, 10) * (uint64_t)page;
}

void h_sleep_until(uint64_t t_ns) {
  struct timespec ts = {(time_t)(t_ns / 1000000000u), (long)(t_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* Heap sort: in place, because glibc's qsort may call malloc. */
static void sift_down(uint64_t* v, size_t root, size_t n) {
  for (;;) {
    size_t c = 2 * root + 1;
    if (c >= n) return;
    if (c + 1 < n && v[c + 1] > v[c]) c++;
    if (v[root] >= v[c]) return;
    uint64_t t = v[root];
    v[root] = v[c];
    v[c] = t;
    root = c;
  }
}

void h_sort_u64(uint64_t* v, size_t n) {
  for (size_t i = n / 2; i-- > 0;) sift_down(v, i, n);
  for (size_t end = n; end-- > 1;) {
    uint64_t t = v[0];
    v[0] = v[end];
    v[end] = t;
    sift_down(v, 0, end);
  }
}

uint64_t h_pct_sorted(const uint64_t* v, size_t n, double q) {
  if (n == 0) return 0;
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

void h_timer_overhead(uint64_t* median_ns, uint64_t* p99_ns) {
  enum { N = 200000 };
  uint64_t* d = h_map(N * sizeof *d);
  for (size_t i = 0; i < N; i++) {
    uint64_t t0 = h_now_ns();
    d[i] = h_now_ns() - t0;
  }
  h_sort_u64(d, N);
  *median_ns = h_pct_sorted(d, N, 0.5);
  *p99_ns = h_pct_sorted(d, N, 0.99);
  h_unmap(d, N * sizeof *d);
}

void h_series_init(h_series* s, size_t cap) {
  s->t_ms10 = h_map(cap * sizeof *s->t_ms10);
  s->rss = h_map(cap * sizeof *s->rss);
  s->n = 0;
  s->cap = cap;
  s->start_ns = h_now_ns();
  s->peak = 0;
}

void h_series_sample(h_series* s) {
  uint64_t r = h_rss();
  if (r > s->peak) s->peak = r;
  if (s->n == s->cap) return;
  s->t_ms10[s->n] = (h_now_ns() - s->start_ns) / 100000u;
  s->rss[s->n++] = r;
}

void h_series_print(FILE* out, const char* name, const h_series* s) {
  fprintf(out, ",\"%s\":{\"t_ms\":[", name);
  for (size_t i = 0; i < s->n; i++) fprintf(out, "%s%.1f", i ? "," : "", s->t_ms10[i] / 10.0);
  fprintf(out, "],\"rss\":[");
  for (size_t i = 0; i < s->n; i++) fprintf(out, "%s%llu", i ? "," : "", (unsigned long long)s->rss[i]);
  fprintf(out, "]},\"%s_peak\":%llu", name, (unsigned long long)s->peak);
}

void h_print_pcts(FILE* out, const char* name, uint64_t* v, size_t n) {
  h_sort_u64(v, n);
  fprintf(out, ",\"%s\":{\"samples\":%zu,\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p999\":%llu,"
          "\"p9999\":%llu,\"max\":%llu}",
          name, n, (unsigned long long)h_pct_sorted(v, n, 0.5),
          (unsigned long long)h_pct_sorted(v, n, 0.9), (unsigned long long)h_pct_sorted(v, n, 0.99),
          (unsigned long long)h_pct_sorted(v, n, 0.999),
          (unsigned long long)h_pct_sorted(v, n, 0.9999),
          (unsigned long long)(n ? v[n - 1] : 0));
}
