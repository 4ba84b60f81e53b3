/* Both exporters on a real workload: the snprintf contract (length, NUL,
 * nothing written past the capacity), escaping of hostile labels, values that
 * match the snapshot calls. The workload makes every figure of the blocks,
 * the hot reserve and free-all non-zero (request-sized epochs: one drained
 * into the reserve, one reusing it and freed all at once, one closed with
 * live objects in trimmed blocks), and both documents must report them as
 * the library's own statistics do, with the instance's configuration.
 * Writes test_export.json and test_export.prom into the working directory
 * for check_export.py, which checks them against docs/METRICS.md, the JSON
 * Schema there and promtool. */
#include <inttypes.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#define CANARY 0x5A
#define CANARY_BYTES 64

typedef size_t (*exporter_fn)(tslab_t*, char*, size_t);

typedef struct remote_free {
  tslab_t* a;
  void** objs;
  size_t n;
} remote_free_t;

static void* free_elsewhere(void* arg) {
  remote_free_t* r = arg;
  for (size_t i = 0; i < r->n; i++) CHECK(tslab_free(r->a, r->objs[i]));
  return NULL;
}

static char* export_all(exporter_fn fn, tslab_t* a, size_t* len) {
  size_t need = fn(a, NULL, 0);
  REQUIRE(need > 0);
  /* Slack: ages and the clock may gain a digit between the two calls. */
  size_t cap = need + 4096;
  char* buf = malloc(cap);
  REQUIRE(buf);
  *len = fn(a, buf, cap);
  REQUIRE(*len < cap);
  CHECK(strlen(buf) == *len);
  return buf;
}

static void check_truncation(exporter_fn fn, tslab_t* a) {
  size_t full = fn(a, NULL, 0);
  REQUIRE(full > 100);
  size_t caps[] = {1, 2, 3, 17, 64, full / 2, full - 1, full, full + 1, full + 4096};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    size_t cap = caps[i];
    unsigned char* buf = malloc(cap + CANARY_BYTES);
    REQUIRE(buf);
    memset(buf, CANARY, cap + CANARY_BYTES);
    size_t need = fn(a, (char*)buf, cap);
    CHECK(need > 0);
    size_t written = strnlen((char*)buf, cap);
    CHECK(written < cap); /* always NUL-terminated inside the buffer */
    CHECK_EQ_U(written, need < cap ? need : cap - 1);
    if (need < cap) CHECK(buf[need - 1] == '\n');
    size_t spoiled = 0;
    for (size_t j = cap; j < cap + CANARY_BYTES; j++) spoiled += buf[j] != CANARY;
    CHECK_EQ_U(spoiled, 0);
    free(buf);
  }
  char untouched = CANARY;
  CHECK(fn(a, &untouched, 0) > 0);
  CHECK(untouched == CANARY);
  CHECK(fn(NULL, NULL, 0) == 0);
}

static void write_file(const char* path, const char* data, size_t len) {
  FILE* f = fopen(path, "wb");
  REQUIRE(f);
  REQUIRE(fwrite(data, 1, len, f) == len);
  REQUIRE(fclose(f) == 0);
}

/* The line `name value` for a metric without labels, as an integer. */
static unsigned long long prom_value(const char* text, const char* name) {
  char key[128];
  snprintf(key, sizeof key, "\n%s ", name);
  const char* p = strstr(text, key);
  if (!p) fprintf(stderr, "no sample %s\n", name);
  REQUIRE(p);
  return strtoull(p + strlen(key), NULL, 10);
}

/* The value of a series whose label set starts with `labels`, as an
 * integer; seconds (printed with nine decimals) come back as nanoseconds. */
static unsigned long long prom_series(const char* text, const char* name, const char* labels,
                                      int seconds) {
  char key[256];
  snprintf(key, sizeof key, "\n%s{%s", name, labels);
  const char* p = strstr(text, key);
  if (!p) fprintf(stderr, "no series %s{%s...}\n", name, labels);
  REQUIRE(p);
  p = strchr(p + 1, '}');
  REQUIRE(p && p[1] == ' ');
  char* end;
  unsigned long long v = strtoull(p + 2, &end, 10);
  if (seconds) {
    REQUIRE(*end == '.' && strlen(end) > 9);
    v = v * 1000000000ull + strtoull(end + 1, NULL, 10);
  }
  return v;
}

/* The series of one era, by its `epoch` label (the first one). */
static unsigned long long prom_epoch(const char* text, const char* name, tslab_epoch_t e,
                                     int seconds) {
  char labels[64];
  snprintf(labels, sizeof labels, "epoch=\"%" PRIu64 "\",", e);
  return prom_series(text, name, labels, seconds);
}

/* A number field of a JSON object: the first `"name":` after `"section":{`. */
static unsigned long long json_value(const char* text, const char* section, const char* name) {
  char key[128];
  snprintf(key, sizeof key, "\"%s\":{", section);
  const char* p = strstr(text, key);
  REQUIRE(p);
  snprintf(key, sizeof key, "\"%s\":", name);
  p = strstr(p, key);
  if (!p) fprintf(stderr, "no JSON field %s.%s\n", section, name);
  REQUIRE(p);
  return strtoull(p + strlen(key), NULL, 10);
}

/* The JSON object of one era in `epochs`, cut out into buf. */
static void json_epoch(const char* text, tslab_epoch_t e, char* buf, size_t cap) {
  char key[64];
  snprintf(key, sizeof key, "{\"era\":%" PRIu64 ",", e);
  const char* p = strstr(text, key);
  REQUIRE(p);
  const char* end = strchr(p, '}');
  REQUIRE(end && (size_t)(end - p) + 2 < cap);
  memcpy(buf, p, (size_t)(end - p) + 1);
  buf[end - p + 1] = '\0';
}

/* A number field of an object cut out by json_epoch. */
static unsigned long long json_field(const char* obj, const char* name) {
  char key[64];
  snprintf(key, sizeof key, "\"%s\":", name);
  const char* p = strstr(obj, key);
  REQUIRE(p);
  return strtoull(p + strlen(key), NULL, 10);
}

int main(void) {
  /* Not the defaults, so that the configuration shown is this instance's. */
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.pool_resident_max = (size_t)2 << 20;
  cfg.thread_reserve_max = (size_t)512 << 10;
  cfg.block_budget = (size_t)768 << 10;
  cfg.max_alloc_size = (size_t)256 << 20;
  tslab_t* a = tslab_create(&cfg);
  REQUIRE(a);
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  /* Blocks: small (one granule) or large (four): ARCHITECTURE 3.4. */
  const uint64_t small_block = 16384, large_block = 65536;
  CHECK(tslab_sampling_set(a, 1) == TSLAB_OK);
  enum { NSIZES = 7, N = 50 * NSIZES };
  const size_t sizes[NSIZES] = {8, 24, 64, 100, 1000, 5000, tslab_small_max() + 1};

  tslab_epoch_t e1 = tslab_epoch_current(a);
  CHECK(tslab_epoch_set_label(a, e1, "request:GET /a") == TSLAB_OK);
  void* kept[N];
  for (size_t i = 0; i < N; i++) REQUIRE((kept[i] = tslab_alloc(a, sizes[i % NSIZES], e1)));

  /* Labels that need escaping in both formats: quote, backslash, newline,
   * a control character and bytes that are not UTF-8. */
  tslab_epoch_t e2 = tslab_epoch_advance(a);
  CHECK(tslab_epoch_set_label(a, e2, "q\"uo\\te\nnl\x01") == TSLAB_OK);
  void* moved[N];
  for (size_t i = 0; i < N; i++) REQUIRE((moved[i] = tslab_alloc(a, sizes[i % NSIZES], e2)));
  /* The other thread frees the small objects of the second half. */
  void* remote[N];
  size_t n_remote = 0;
  for (size_t i = 0; i < N; i++) {
    if (i >= N / 2 && sizes[i % NSIZES] <= tslab_small_max()) {
      remote[n_remote++] = moved[i];
    } else {
      CHECK(tslab_free(a, moved[i]));
    }
  }
  remote_free_t rf = {a, remote, n_remote};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_elsewhere, &rf) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
  CHECK(tslab_epoch_close(a, e2) == TSLAB_OK);

  tslab_epoch_t e3 = tslab_epoch_advance(a);
  CHECK(tslab_epoch_set_label(a, e3, "bad\xff-utf8\xc3") == TSLAB_OK);
  CHECK(tslab_epoch_ref(a, e3) == TSLAB_OK);
  void* leaked = tslab_alloc(a, 200, e3);
  CHECK(leaked != NULL);

  int local;
  CHECK(!tslab_free(a, &local));
  CHECK(tslab_alloc(a, 0, e1) == NULL);
  CHECK(tslab_alloc(a, 16, e2) == NULL);

  /* Request-sized epochs, all on this thread and in blocks. e4 drains and
   * closes: an untimed close that keeps its block in the hot reserve. */
  enum { REQ = 32, ENDED = 40, TRIM_SIZE = 256, TRIM_MAX = 2 * 65536 / TRIM_SIZE + 1, TRIMMED = 2 };
  tslab_epoch_t e4 = tslab_epoch_advance(a);
  CHECK(tslab_epoch_set_label(a, e4, "request:drained") == TSLAB_OK);
  void* req[REQ];
  for (size_t i = 0; i < REQ; i++) REQUIRE((req[i] = tslab_alloc(a, 64, e4)));
  for (size_t i = 0; i < REQ; i++) CHECK(tslab_free(a, req[i]));
  CHECK(tslab_epoch_close(a, e4) == TSLAB_OK);
  tslab_stats_global_t g4;
  REQUIRE(tslab_stats_global(a, &g4) == TSLAB_OK);
  CHECK(g4.reserve_bytes >= small_block);

  /* e5 bumps through the reserve's block again, then ends ENDED live
   * objects (one of them a large span) with a free-all. */
  tslab_epoch_t e5 = tslab_epoch_advance(a);
  CHECK(tslab_epoch_set_label(a, e5, "request:free-all") == TSLAB_OK);
  void* ended[ENDED];
  for (size_t i = 0; i + 1 < ENDED; i++) REQUIRE((ended[i] = tslab_alloc(a, 48, e5)));
  REQUIRE((ended[ENDED - 1] = tslab_alloc(a, tslab_small_max() + 1, e5)));
  tslab_stats_global_t g5;
  REQUIRE(tslab_stats_global(a, &g5) == TSLAB_OK);
  CHECK(g5.blocks_reused_total > g4.blocks_reused_total);
  CHECK_EQ_U(g5.objects_ended_total, 0);
  CHECK_EQ_U(g5.epochs_freed_all_total, 0);
  CHECK(tslab_epoch_free_all(a, e5) == TSLAB_OK);
  CHECK(!tslab_free(a, ended[0])); /* dead */

  /* e6 fills TRIMMED blocks with written objects and keeps the first of
   * each alive across its close: the close trims every other page of those
   * blocks (ARCHITECTURE 3.4) and, returning no run, reads no RSS. Its
   * blocks may be small or large (the reserve's, or new ones): a block
   * starts where an object is not next to the one before. The first object
   * of a block after the TRIMMED is freed at once: that block drains into
   * the reserve at the close. */
  tslab_epoch_t e6 = tslab_epoch_advance(a);
  CHECK(tslab_epoch_set_label(a, e6, "request:trimmed") == TSLAB_OK);
  void* trim[TRIM_MAX];
  size_t n_trim = 0, first[TRIMMED + 1], n_blocks = 0;
  while (n_blocks <= TRIMMED) {
    REQUIRE(n_trim < TRIM_MAX);
    void* p = tslab_alloc(a, TRIM_SIZE, e6);
    REQUIRE(p);
    memset(p, 0x5a, TRIM_SIZE);
    if (n_trim == 0 || (uint8_t*)p != (uint8_t*)trim[n_trim - 1] + TRIM_SIZE) first[n_blocks++] = n_trim;
    trim[n_trim++] = p;
  }
  /* Objects freed in each kept block, less a page for the kept one (and a
   * page boundary inside a freed object): what its trim releases at least. */
  uint64_t trim_least = 0;
  for (size_t b = 0; b < TRIMMED; b++) {
    uint64_t freed = (uint64_t)(first[b + 1] - first[b] - 1) * TRIM_SIZE;
    if (freed > 2 * page) trim_least += (freed - 2 * page) / page * page;
  }
  for (size_t i = 0; i < n_trim; i++)
    if (i != first[0] && i != first[1]) CHECK(tslab_free(a, trim[i]));
  CHECK(tslab_epoch_close(a, e6) == TSLAB_OK);

  /* Age e1 and e3 past the exporters' 1 s leak threshold. */
  struct timespec pause = {1, 100 * 1000 * 1000};
  while (nanosleep(&pause, &pause) != 0) {
  }

  check_truncation(tslab_export_json, a);
  check_truncation(tslab_export_prometheus, a);

  size_t json_len, prom_len;
  char* json = export_all(tslab_export_json, a, &json_len);
  char* prom = export_all(tslab_export_prometheus, a, &prom_len);
  write_file("test_export.json", json, json_len);
  write_file("test_export.prom", prom, prom_len);

  CHECK(strstr(json, "\"label\":\"q\\\"uo\\\\te\\nnl\\u0001\"") != NULL);
  CHECK(strstr(json, "\"label\":\"bad\\ufffd-utf8\\ufffd\"") != NULL);
  CHECK(strstr(json, "\"label\":\"request:GET /a\"") != NULL);
  CHECK(strstr(prom, "label=\"q\\\"uo\\\\te\\nnl\x01\"") != NULL);
  CHECK(strstr(prom, "label=\"bad\xEF\xBF\xBD-utf8\xEF\xBF\xBD\"") != NULL);
  CHECK(strstr(json, "\"refcount_stuck\":true") != NULL);

  tslab_stats_global_t g;
  REQUIRE(tslab_stats_global(a, &g) == TSLAB_OK);
  CHECK_EQ_U(prom_value(prom, "tslab_allocations_total"), g.allocations_total);
  CHECK_EQ_U(prom_value(prom, "tslab_cross_thread_frees_total"), g.cross_thread_frees_total);
  CHECK_EQ_U(prom_value(prom, "tslab_invalid_frees_total"), g.invalid_frees_total);
  CHECK_EQ_U(prom_value(prom, "tslab_allocation_failures_total"), g.alloc_failures_total);
  CHECK_EQ_U(g.allocations_total, 2 * N + 1 + REQ + ENDED + n_trim);
  CHECK_EQ_U(g.cross_thread_frees_total, n_remote);
  CHECK(g.invalid_frees_total >= 2);
  CHECK(g.alloc_failures_total >= 2);

  /* Blocks, the hot reserve and free-all: both documents say what the
   * library says, and the workload made each of them non-zero. */
  struct {
    const char *prom, *json;
    uint64_t lib;
  } global_new[] = {
      {"tslab_blocks_in_use", "blocks_in_use", g.blocks_in_use},
      {"tslab_blocks_created_total", "blocks_created_total", g.blocks_created_total},
      {"tslab_blocks_reused_total", "blocks_reused_total", g.blocks_reused_total},
      {"tslab_hot_reserve_bytes", "reserve_bytes", g.reserve_bytes},
      {"tslab_objects_ended_total", "objects_ended_total", g.objects_ended_total},
      {"tslab_epochs_freed_all_total", "epochs_freed_all_total", g.epochs_freed_all_total},
  };
  for (size_t i = 0; i < sizeof global_new / sizeof global_new[0]; i++) {
    CHECK_EQ_U(prom_value(prom, global_new[i].prom), global_new[i].lib);
    CHECK_EQ_U(json_value(json, "global", global_new[i].json), global_new[i].lib);
    if (global_new[i].lib == 0) fprintf(stderr, "%s is 0\n", global_new[i].prom);
    CHECK(global_new[i].lib > 0);
  }
  CHECK_EQ_U(g.objects_ended_total, ENDED);
  CHECK_EQ_U(g.epochs_freed_all_total, 1);
  /* e3's bumping block and e6's two kept blocks at least. */
  CHECK(g.blocks_in_use >= 1 + TRIMMED);
  CHECK(g.blocks_reused_total >= 1);
  /* Its bound holds while the OS accepts every release. */
  if (g.release_failures_total == 0)
    CHECK(g.reserve_bytes <= cfg.pool_resident_max + g.thread_caches * cfg.thread_reserve_max);
  /* Ended objects count as frees: the live counts lost them. */
  CHECK_EQ_U(prom_value(prom, "tslab_live_objects"), g.live_objects);
  CHECK_EQ_U(g.live_objects, N + 1 + TRIMMED);

  /* The configuration, in both formats. */
  struct {
    const char *prom, *json;
    uint64_t want;
  } config[] = {
      {"tslab_config_reserve_bytes", "reserve_bytes", cfg.reserve_bytes},
      {"tslab_config_pool_resident_max_bytes", "pool_resident_max", cfg.pool_resident_max},
      {"tslab_config_thread_reserve_max_bytes", "thread_reserve_max", cfg.thread_reserve_max},
      {"tslab_config_block_budget_bytes", "block_budget", cfg.block_budget},
      {"tslab_config_max_alloc_size_bytes", "max_alloc_size", cfg.max_alloc_size},
  };
  for (size_t i = 0; i < sizeof config / sizeof config[0]; i++) {
    CHECK_EQ_U(prom_value(prom, config[i].prom), config[i].want);
    CHECK_EQ_U(json_value(json, "config", config[i].json), config[i].want);
  }
  CHECK_EQ_U(json_value(json, "config", "epoch_ring_size"), cfg.epoch_ring_size);
  CHECK(strstr(json, "\"release_policy\":\"on_close\",\"advance_policy\":\"skip_open\"") != NULL);
  CHECK(strstr(prom, "\ntslab_config_info{release_policy=\"on_close\",advance_policy=\"skip_open\"} 1\n") !=
        NULL);

  /* Size classes, all from one pass: the 8-byte class holds e1's. */
  tslab_stats_class_t classes[128];
  size_t n_classes = tslab_stats_classes(a, classes, 128);
  REQUIRE(n_classes > 0 && classes[0].object_size == 8);
  CHECK_EQ_U(prom_series(prom, "tslab_class_allocations_total", "class=\"8\"", 0),
             classes[0].allocations_total);
  CHECK_EQ_U(classes[0].allocations_total, N / NSIZES);

  /* Close figures of the three request epochs, against tslab_stats_epoch. */
  tslab_stats_epoch_t s4, s5, s6;
  REQUIRE(tslab_stats_epoch(a, e4, &s4) == TSLAB_OK);
  REQUIRE(tslab_stats_epoch(a, e5, &s5) == TSLAB_OK);
  REQUIRE(tslab_stats_epoch(a, e6, &s6) == TSLAB_OK);
  const tslab_stats_epoch_t* eps[] = {&s4, &s5, &s6};
  char obj[2048];
  for (size_t i = 0; i < 3; i++) {
    const tslab_stats_epoch_t* s = eps[i];
    CHECK(s->state == TSLAB_EPOCH_CLOSING);
    json_epoch(json, s->era, obj, sizeof obj);
    CHECK_EQ_U(prom_epoch(prom, "tslab_epoch_close_duration_seconds", s->era, 1), s->close_ns);
    CHECK_EQ_U(json_field(obj, "close_ns"), s->close_ns);
    CHECK_EQ_U(prom_epoch(prom, "tslab_epoch_released_at_close_bytes", s->era, 0),
               s->released_at_close_bytes);
    CHECK_EQ_U(json_field(obj, "released_at_close_bytes"), s->released_at_close_bytes);
    CHECK_EQ_U(prom_epoch(prom, "tslab_epoch_rss_before_close_bytes", s->era, 0),
               s->rss_before_close_bytes);
    CHECK_EQ_U(prom_epoch(prom, "tslab_epoch_rss_after_close_bytes", s->era, 0),
               s->rss_after_close_bytes);
    CHECK_EQ_U(prom_epoch(prom, "tslab_epoch_released_bytes_total", s->era, 0),
               s->released_total_bytes);
    CHECK_EQ_U(prom_epoch(prom, "tslab_epoch_live_objects", s->era, 0), s->live_objects);
  }
  /* e4: request-sized, so its close is not timed; within the reserve it
   * released nothing and read no RSS. */
  CHECK_EQ_U(s4.close_ns, 0);
  CHECK_EQ_U(s4.released_at_close_bytes, 0);
  CHECK_EQ_U(s4.rss_before_close_bytes, 0);
  CHECK_EQ_U(s4.live_objects, 0);
  /* e5: it held a span, so its free-all is timed; every object ended
   * counts as a free. */
  CHECK(s5.close_ns > 0);
  CHECK_EQ_U(s5.live_objects, 0);
  CHECK_EQ_U(s5.allocations_total, ENDED);
  CHECK_EQ_U(s5.frees_total, ENDED);
  /* e6: untimed too, yet it released the trimmed pages (all but the one
   * page each live object touches), and only those: no RSS read. */
  CHECK_EQ_U(s6.close_ns, 0);
  CHECK_EQ_U(s6.live_objects, TRIMMED);
  CHECK(trim_least > 0);
  CHECK(s6.released_at_close_bytes >= trim_least);
  CHECK(s6.released_at_close_bytes <= TRIMMED * large_block);
  CHECK(s6.released_total_bytes >= s6.released_at_close_bytes);
  CHECK_EQ_U(s6.rss_before_close_bytes, 0);
  CHECK_EQ_U(s6.rss_after_close_bytes, 0);
  tslab_leak_t leaks[16];
  size_t n_leaks = tslab_leak_check(a, 1000000000u, leaks, 16);
  CHECK(n_leaks >= 2);
  CHECK_EQ_U(prom_value(prom, "tslab_leak_epochs"), n_leaks);

  free(json);
  free(prom);
  for (size_t i = 0; i < N; i++) CHECK(tslab_free(a, kept[i]));
  CHECK(tslab_free(a, leaked));
  for (size_t b = 0; b < TRIMMED; b++) {
    CHECK(((unsigned char*)trim[first[b]])[TRIM_SIZE - 1] == 0x5a); /* intact */
    CHECK(tslab_free(a, trim[first[b]]));
  }
  CHECK(tslab_epoch_unref(a, e3) == TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
  TEST_DONE();
}
