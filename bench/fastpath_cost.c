/* The fast path's cost in one process: tslab with its statistics counters
 * (the shipped library), the same sources built with TSLAB_COUNTERS=0, and
 * glibc malloc, on the churn and batch loops of the suite (128 B objects),
 * plus the batch freed in a random order.
 *
 * Separate processes measured minutes apart differ by more than the 2% this
 * has to resolve on a shared machine, so the contestants take turns within
 * one process: every round runs one short block of each, in an order rotated
 * from round to round, and the ratios are taken per round between blocks that
 * ran a few milliseconds apart. The two tslab builds are loaded with dlopen,
 * each with its own symbols, and called through the same function pointers.
 * Each build comes in several code placements (bench/CMakeLists.txt: the
 * same code shifted by a few bytes), and every round compares the two
 * builds in one placement, so the layout luck of one compilation does not
 * pass for the counters' cost.
 *
 * Usage: bench_fastpath_cost [--json] [rounds=61] [churn_pairs=200000]
 *                            [batch_n=10000] [batch_rounds=5] [touch=1]
 *                            [with=PATHS] [without=PATHS] [control=PATHS]
 * PATHS: one library per code placement, separated by ':', as many for
 * each; they default to the ones built with this program. */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "tslab.h"

/* One allocator as the loops see it. */
typedef struct contestant {
  const char* name;
  void* (*alloc)(void* ctx, size_t size);
  void (*free)(void* ctx, void* p);
  void* ctx;
} contestant_t;

/* Where an instance's structures land relative to each other changes its
 * speed by a few percent (cache set and 4 KiB aliasing between the thread
 * cache, descriptors, bitmaps and objects), and it changes from process to
 * process. Each build gets several instances, created behind mappings of
 * random length, and the rounds cycle through them, so one unlucky layout
 * does not decide a comparison. */
enum { PLACEMENTS = 8 };

/* A tslab build loaded with dlopen: its entry points and its instances. */
typedef struct tslab_lib {
  tslab_t* (*create)(const tslab_config_t*);
  void* (*alloc)(tslab_t*, size_t, tslab_epoch_t);
  bool (*free)(tslab_t*, void*);
  tslab_t* a[PLACEMENTS];
  tslab_epoch_t e[PLACEMENTS];
  int cur; /* the placement of this round */
} tslab_lib_t;

static void* lib_alloc(void* ctx, size_t size) {
  tslab_lib_t* l = ctx;
  return l->alloc(l->a[l->cur], size, l->e[l->cur]);
}

static void lib_free(void* ctx, void* p) {
  tslab_lib_t* l = ctx;
  l->free(l->a[l->cur], p);
}

static void* glibc_alloc(void* ctx, size_t size) {
  (void)ctx;
  return malloc(size);
}

static void glibc_free(void* ctx, void* p) {
  (void)ctx;
  free(p);
}

static bool lib_load(const char* path, tslab_lib_t* l, h_rng* rng) {
  /* RTLD_LOCAL: both builds define the same names; each keeps its own. */
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return false;
  }
  tslab_epoch_t (*current)(tslab_t*);
  *(void**)&l->create = dlsym(h, "tslab_create");
  *(void**)&l->alloc = dlsym(h, "tslab_alloc");
  *(void**)&l->free = dlsym(h, "tslab_free");
  *(void**)&current = dlsym(h, "tslab_epoch_current");
  if (!l->create || !l->alloc || !l->free || !current) {
    fprintf(stderr, "%s: missing tslab symbols\n", path);
    return false;
  }
  for (int i = 0; i < PLACEMENTS; i++) {
    if (mmap(NULL, (size_t)h_range(rng, 1, 64) << 12, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
        MAP_FAILED)
      return false;
    l->a[i] = l->create(NULL);
    if (!l->a[i]) {
      fprintf(stderr, "%s: tslab_create failed\n", path);
      return false;
    }
    l->e[i] = current(l->a[i]);
  }
  l->cur = 0;
  return true;
}

enum { OBJ = 128 };

/* Every build does the same with its objects: writes each one (all of its
 * bytes, harness.h) when allocated and reads it back before freeing it. */
static uint64_t checksum, next_id;

static void* must_alloc(const contestant_t* c) {
  void* p = c->alloc(c->ctx, OBJ);
  if (!p) {
    fprintf(stderr, "%s: allocation failed\n", c->name);
    exit(2);
  }
  h_obj_write(p, OBJ, next_id++);
  return p;
}

static void release(const contestant_t* c, void* p) {
  checksum += h_obj_read(p, OBJ);
  c->free(c->ctx, p);
}

/* The figures: each times one block and returns ns per operation. */
typedef struct params {
  long churn_pairs, batch_n, batch_rounds;
  void** slots;
  uint32_t* order; /* a fixed random permutation of the batch, for random frees */
} params_t;

static double churn_block(const contestant_t* c, const params_t* pm) {
  uint64_t t0 = h_now_ns();
  for (long i = 0; i < pm->churn_pairs; i++) release(c, must_alloc(c));
  return (double)(h_now_ns() - t0) / (double)pm->churn_pairs;
}

/* Frees in allocation order (FIFO), in reverse (LIFO) or in a random order:
 * the first two free slab after slab, the last all over the live set. */
enum free_order { FREE_FIFO, FREE_LIFO, FREE_RANDOM };

static double batch_block(const contestant_t* c, const params_t* pm, enum free_order order) {
  uint64_t t0 = h_now_ns();
  for (long r = 0; r < pm->batch_rounds; r++) {
    for (long i = 0; i < pm->batch_n; i++) pm->slots[i] = must_alloc(c);
    if (order == FREE_LIFO)
      for (long i = pm->batch_n; i-- > 0;) release(c, pm->slots[i]);
    else if (order == FREE_FIFO)
      for (long i = 0; i < pm->batch_n; i++) release(c, pm->slots[i]);
    else
      for (long i = 0; i < pm->batch_n; i++) release(c, pm->slots[pm->order[i]]);
  }
  return (double)(h_now_ns() - t0) / (double)(2 * pm->batch_n * pm->batch_rounds);
}

enum { FIG_CHURN, FIG_FIFO, FIG_LIFO, FIG_RANDOM, NFIGS };
static const char* const fig_names[NFIGS] = {"churn", "batch_fifo", "batch_lifo", "batch_random"};

static double run_block(int fig, const contestant_t* c, const params_t* pm) {
  switch (fig) {
    case FIG_CHURN: return churn_block(c, pm);
    case FIG_FIFO: return batch_block(c, pm, FREE_FIFO);
    case FIG_LIFO: return batch_block(c, pm, FREE_LIFO);
    default: return batch_block(c, pm, FREE_RANDOM);
  }
}

static int cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

/* Median of v[0..n) and a distribution-free ~95% confidence interval for it
 * (the order statistics n/2 -+ 0.98 sqrt(n)); sorts v. */
typedef struct summary {
  double median, lo, hi;
} summary_t;

static summary_t summarize(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int half = (int)ceil(0.98 * sqrt((double)n));
  int lo = n / 2 - half, hi = (n - 1) / 2 + half;
  summary_t s = {(v[(n - 1) / 2] + v[n / 2]) / 2, v[lo < 0 ? 0 : lo], v[hi >= n ? n - 1 : hi]};
  return s;
}

/* The contestants. CONTROL is a second copy of the build with counters
 * (another file, so another load): its ratio to WITH shows how far two
 * identical builds differ in this measurement, the floor under any other
 * ratio. */
enum { WITH, WITHOUT, CONTROL, GLIBC, NCONT, MAX_ROUNDS = 1001, MAX_CODE = 8 };

/* Split a ':'-separated list of paths in place; how many (at most max). */
static int split_paths(char* list, char** out, int max) {
  int n = 0;
  for (char* save = NULL; n < max && (out[n] = strtok_r(n ? NULL : list, ":", &save)) != NULL;) n++;
  return n;
}

/* Each tslab build keeps its thread cache pointer in initial-exec TLS (the
 * fast path reads it with one instruction), which a dlopen'ed library must
 * take from glibc's static TLS surplus; a dozen builds need more than the
 * default surplus, so the program re-executes itself once with a larger one. */
static void ensure_static_tls(char** argv) {
  static const char tunable[] = "glibc.rtld.optional_static_tls=65536";
  const char* cur = getenv("GLIBC_TUNABLES");
  if (cur && strstr(cur, "glibc.rtld.optional_static_tls=")) return;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s%s%s", cur ? cur : "", cur ? ":" : "", tunable);
  setenv("GLIBC_TUNABLES", buf, 1);
  execv("/proc/self/exe", argv);
  perror("bench_fastpath_cost: re-exec"); /* go on: dlopen will say what failed */
}

int main(int argc, char** argv) {
  ensure_static_tls(argv);
  bool json = false;
  for (int i = 1; i < argc; i++) json |= strcmp(argv[i], "--json") == 0;
  int na = argc - 1;
  char** args = argv + 1;
  int rounds = (int)h_arg_u64(na, args, "rounds", 61);
  h_touch_init(na, args);
  params_t pm = {(long)h_arg_u64(na, args, "churn_pairs", 200000), (long)h_arg_u64(na, args, "batch_n", 10000),
                 (long)h_arg_u64(na, args, "batch_rounds", 5), NULL, NULL};
  if (rounds < 3 || rounds > MAX_ROUNDS || pm.churn_pairs < 1 || pm.batch_n < 1 || pm.batch_rounds < 1) {
    fprintf(stderr, "usage: bench_fastpath_cost [--json] [rounds=3..%d] [churn_pairs=N] [batch_n=N] "
                    "[batch_rounds=N] [with=PATH] [without=PATH] [control=PATH]\n", MAX_ROUNDS);
    return 1;
  }
  h_rng rng = {h_now_ns() | 1};
  /* libs[build][code placement] */
  static tslab_lib_t libs[3][MAX_CODE];
  static char lists[3][4096];
  const char* defaults[3] = {TSLAB_WITH_COUNTERS, TSLAB_WITHOUT_COUNTERS, TSLAB_CONTROL};
  const char* keys[3] = {"with", "without", "control"};
  int ncode = 0;
  for (int i = 0; i < 3; i++) {
    snprintf(lists[i], sizeof lists[i], "%s", h_arg_str(na, args, keys[i], defaults[i]));
    char* paths[MAX_CODE];
    int n = split_paths(lists[i], paths, MAX_CODE);
    if (n == 0 || (i > 0 && n != ncode)) {
      fprintf(stderr, "bench_fastpath_cost: with, without and control need as many libraries each\n");
      return 1;
    }
    ncode = n;
    for (int k = 0; k < n; k++)
      if (!lib_load(paths[k], &libs[i][k], &rng)) return 2;
  }
  contestant_t cs[NCONT] = {{"tslab", lib_alloc, lib_free, NULL},
                            {"tslab, counters off", lib_alloc, lib_free, NULL},
                            {"tslab, second copy", lib_alloc, lib_free, NULL},
                            {"glibc", glibc_alloc, glibc_free, NULL}};
  pm.slots = h_map((size_t)pm.batch_n * sizeof *pm.slots);
  pm.order = h_map((size_t)pm.batch_n * sizeof *pm.order);
  h_rng shuffle = {42};
  for (long i = 0; i < pm.batch_n; i++) pm.order[i] = (uint32_t)i;
  for (long i = pm.batch_n - 1; i > 0; i--) {
    long j = (long)h_range(&shuffle, 0, (uint64_t)i);
    uint32_t t = pm.order[i];
    pm.order[i] = pm.order[j];
    pm.order[j] = t;
  }

  /* ratio[f][q][r]: the round's WITH time over WITHOUT, CONTROL, GLIBC. */
  static double ns[NFIGS][NCONT][MAX_ROUNDS], ratio[NFIGS][3][MAX_ROUNDS];
  /* Round r runs code placement r % ncode and, in each build of it, the
   * instance (r / ncode) % PLACEMENTS; the first pass over every pair warms
   * up. The contestants' order rotates with r / ncode, so every placement
   * sees every order (rotating with r would tie each placement to one order
   * when ncode divides NCONT). */
  int warm = ncode * PLACEMENTS;
  for (int f = 0; f < NFIGS; f++) {
    for (int r = -warm; r < rounds; r++) {
      int code = (r + warm) % ncode, placement = (r + warm) / ncode % PLACEMENTS;
      for (int i = 0; i < 3; i++) {
        libs[i][code].cur = placement;
        cs[i].ctx = &libs[i][code];
      }
      for (int k = 0; k < NCONT; k++) {
        int c = ((r + warm) / ncode + k) % NCONT;
        double t = run_block(f, &cs[c], &pm);
        if (r >= 0) ns[f][c][r] = t;
      }
      if (r < 0) continue;
      for (int q = 0; q < 3; q++) ratio[f][q][r] = ns[f][WITH][r] / ns[f][WITHOUT + q][r];
    }
  }

  if (json)
    printf("{\"workload\":\"fastpath_cost\",\"rounds\":%d,\"placements\":%d,\"code_placements\":%d,"
           "\"touch\":%d,\"figures\":{",
           rounds, PLACEMENTS, ncode, h_touch_all);
  else
    printf("128 B objects, %d rounds over %d code placements of each build and %d instance placements; "
           "ns per operation (churn: per pair), median [95%% CI]\n",
           rounds, ncode, PLACEMENTS);
  static const char* const ratio_keys[3] = {"on_off", "control", "glibc"};
  static const char* const ratio_names[3] = {"counters on/off", "copy/copy", "tslab/glibc"};
  for (int f = 0; f < NFIGS; f++) {
    /* The on/off ratio of each code placement alone: how far layout moves it. */
    double by_code[MAX_CODE];
    for (int k = 0; k < ncode; k++) {
      static double v[MAX_ROUNDS];
      int n = 0;
      for (int r = k; r < rounds; r += ncode) v[n++] = ratio[f][0][r];
      by_code[k] = summarize(v, n).median;
    }
    summary_t t[NCONT], q[3];
    for (int c = 0; c < NCONT; c++) t[c] = summarize(ns[f][c], rounds);
    for (int i = 0; i < 3; i++) q[i] = summarize(ratio[f][i], rounds);
    if (json) {
      printf("%s\"%s\":{\"ns_counters_on\":%.3f,\"ns_counters_off\":%.3f,\"ns_control\":%.3f,\"ns_glibc\":%.3f",
             f ? "," : "", fig_names[f], t[WITH].median, t[WITHOUT].median, t[CONTROL].median, t[GLIBC].median);
      for (int i = 0; i < 3; i++)
        printf(",\"%s_ratio\":%.4f,\"%s_ratio_lo\":%.4f,\"%s_ratio_hi\":%.4f", ratio_keys[i], q[i].median,
               ratio_keys[i], q[i].lo, ratio_keys[i], q[i].hi);
      printf(",\"on_off_ratio_by_code\":[");
      for (int k = 0; k < ncode; k++) printf("%s%.4f", k ? "," : "", by_code[k]);
      printf("]}");
    } else {
      printf("%-11s", fig_names[f]);
      for (int c = 0; c < NCONT; c++) printf("  %s %.2f", cs[c].name, t[c].median);
      printf("\n%-11s", "");
      for (int i = 0; i < 3; i++) printf("  %s %.3f [%.3f, %.3f]", ratio_names[i], q[i].median, q[i].lo, q[i].hi);
      printf("\n%-11s  counters on/off by code placement:", "");
      for (int k = 0; k < ncode; k++) printf(" %.3f", by_code[k]);
      printf("\n");
    }
  }
  if (json)
    printf("},\"checksum\":%llu}\n", (unsigned long long)checksum);
  else
    printf("checksum %llu\n", (unsigned long long)checksum);
  return 0;
}
