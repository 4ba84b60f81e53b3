/* Measurement helpers shared by every benchmark binary. None of them calls
 * malloc: the harness's own memory comes straight from mmap, so it never
 * shows up in the allocator under test and never perturbs a timed region. */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static inline uint64_t h_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: cheap enough to pre-generate workloads, deterministic by seed. */
typedef struct { uint64_t s; } h_rng;
static inline uint64_t h_rand(h_rng* r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545F4914F6CDD1DULL;
}
/* Uniform in [lo, hi]. */
static inline uint64_t h_range(h_rng* r, uint64_t lo, uint64_t hi) {
  return lo + h_rand(r) % (hi - lo + 1);
}

/* Command-line parameters written key=value: the value of key among the n
 * strings args, or dflt. */
const char* h_arg_str(int n, char** args, const char* key, const char* dflt);
uint64_t h_arg_u64(int n, char** args, const char* key, uint64_t dflt);

/* Zeroed, pre-faulted memory outside every allocator; exits on failure. */
void* h_map(size_t bytes);
void h_unmap(void* p, size_t bytes);

/* Process resident set size in bytes, read from /proc/self/statm. */
uint64_t h_rss(void);

/* Sleep until the monotonic clock reaches t_ns. */
void h_sleep_until(uint64_t t_ns);

/* Percentile q (0..1) of n sorted values. */
uint64_t h_pct_sorted(const uint64_t* v, size_t n, double q);
void h_sort_u64(uint64_t* v, size_t n);

/* Timer overhead: median and p99 of back-to-back h_now_ns() readings. */
void h_timer_overhead(uint64_t* median_ns, uint64_t* p99_ns);

/* Sampled RSS series for the memory workloads. */
typedef struct {
  uint64_t* t_ms10;  /* time since start in 0.1 ms */
  uint64_t* rss;
  size_t n, cap;
  uint64_t start_ns, peak;
} h_series;
void h_series_init(h_series* s, size_t cap);
void h_series_sample(h_series* s);
/* Prints ,"NAME":{"t_ms":[...],"rss":[...]},"NAME_peak":P */
void h_series_print(FILE* out, const char* name, const h_series* s);

/* Prints ,"NAME":{"p50":..,"p90":..,"p99":..,"p999":..,"p9999":..,"max":..} of
 * n unsorted samples (sorted in place). */
void h_print_pcts(FILE* out, const char* name, uint64_t* v, size_t n);

/* Keeps the compiler from dropping a store the benchmark depends on. */
static inline void h_touch(void* p, size_t n) {
  *(volatile uint64_t*)p = (uint64_t)n;
  if (n > 64) *(volatile uint64_t*)((char*)p + n - 8) = (uint64_t)n;
}

#endif
