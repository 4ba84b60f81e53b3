/* Shared by the allocator benchmark programs of bench/real: a small
 * deterministic random generator, argument parsing and the result line.
 * Every program checks its own work (each block is written and read back
 * before it is freed) and exits non-zero when a check fails, so a wrong
 * allocator is caught, not just a slow one. */
#ifndef TSLAB_BENCH_REAL_COMMON_H
#define TSLAB_BENCH_REAL_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64*: per thread, seeded, the same sequence under every allocator. */
static inline uint64_t rng_next(uint64_t* s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* An integer argument by position, with a default. */
static inline long arg_long(int argc, char** argv, int i, long dflt) {
  return argc > i ? strtol(argv[i], NULL, 10) : dflt;
}

/* Stamp a block with a byte derived from its address and size, and check
 * it: the first and the last byte are enough to catch overlapping blocks. */
static inline unsigned char stamp_of(const void* p, size_t n) {
  return (unsigned char)(((uintptr_t)p >> 4) ^ n ^ 0x5a);
}
static inline void stamp(void* p, size_t n) {
  unsigned char v = stamp_of(p, n);
  ((unsigned char*)p)[0] = v;
  ((unsigned char*)p)[n - 1] = v;
}
static inline int stamped(const void* p, size_t n) {
  unsigned char v = stamp_of(p, n);
  return ((const unsigned char*)p)[0] == v && ((const unsigned char*)p)[n - 1] == v;
}

#endif
