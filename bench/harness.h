/* Measurement helpers shared by every benchmark binary. None of them calls
 * malloc: the harness's own memory comes straight from mmap, so it never
 * shows up in the allocator under test and never perturbs a timed region. */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
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
/* Uniform in [lo, hi] (hi - lo < 2^64 - 1). A multiply instead of a
 * division: the server workload draws several numbers per object inside
 * its timed requests, and a 64-bit division costs more than some
 * allocators' whole fast path. */
static inline uint64_t h_range(h_rng* r, uint64_t lo, uint64_t hi) {
  return lo + (uint64_t)(((unsigned __int128)h_rand(r) * (hi - lo + 1)) >> 64);
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

/* Real memory traffic. Programs write the objects they allocate and read them
 * before freeing them, so an allocator that hands out cache-cold memory, or
 * memory whose pages are not faulted in yet, pays for it as it would in a
 * program. h_obj_write fills every byte of an object (of at least 8 bytes)
 * with a pattern derived from its number; h_obj_read reads every byte back and returns their sum,
 * which the workloads fold into the checksum they print: the reads cannot be
 * dropped, and one workload prints the same checksum with every allocator
 * (the report checks that they agree).
 * With h_touch_all false (parameter touch=0) the write is the suite's former
 * one or two stores (first and last word) and the read does nothing, so the
 * untouched figures stay comparable with reports made before objects were
 * touched. */
extern bool h_touch_all;

/* Sets h_touch_all from the parameter touch= among the n strings args
 * (default 1). */
void h_touch_init(int n, char** args);

static inline void h_obj_write(void* p, size_t n, uint64_t id) {
  if (!h_touch_all) {
    *(volatile uint64_t*)p = (uint64_t)n;
    if (n > 64) *(volatile uint64_t*)((char*)p + n - 8) = (uint64_t)n;
    return;
  }
  uint64_t base = id * 0x9E3779B97F4A7C15ull;
  uint64_t* w = (uint64_t*)p;
  size_t nw = n / 8;
  for (size_t i = 0; i < nw; i++) w[i] = base + i;
  /* Bytes past the last whole word: one word ending at the object's end
   * (every object has at least 8 bytes), instead of a loop of byte stores. */
  if (n % 8) {
    uint64_t tail = ~base;
    memcpy((char*)p + n - 8, &tail, 8);
  }
}

static inline uint64_t h_obj_read(const void* p, size_t n) {
  if (!h_touch_all) return 0;
  /* The values are known from the write; make the compiler load them. */
  __asm__ volatile("" : : "r"(p) : "memory");
  const uint64_t* w = (const uint64_t*)p;
  size_t nw = n / 8;
  uint64_t s = 0;
  for (size_t i = 0; i < nw; i++) s += w[i];
  if (n % 8) {
    uint64_t tail;
    memcpy(&tail, (const char*)p + n - 8, 8);
    s += tail;
  }
  return s;
}

#endif
