/* Both exporters on a real workload: the snprintf contract (length, NUL,
 * nothing written past the capacity), escaping of hostile labels, values that
 * match the snapshot calls. Writes test_export.json and test_export.prom into
 * the working directory for check_export.py, which checks them against
 * docs/METRICS.md, the JSON Schema there and promtool. */
#include <pthread.h>
#include <time.h>

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
  REQUIRE(p);
  return strtoull(p + strlen(key), NULL, 10);
}

int main(void) {
  tslab_t* a = tslab_create(NULL);
  REQUIRE(a);
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
  CHECK_EQ_U(g.allocations_total, 2 * N + 1);
  CHECK_EQ_U(g.cross_thread_frees_total, n_remote);
  CHECK(g.invalid_frees_total >= 1);
  CHECK(g.alloc_failures_total >= 2);
  tslab_leak_t leaks[16];
  size_t n_leaks = tslab_leak_check(a, 1000000000u, leaks, 16);
  CHECK(n_leaks >= 2);
  CHECK_EQ_U(prom_value(prom, "tslab_leak_epochs"), n_leaks);

  free(json);
  free(prom);
  for (size_t i = 0; i < N; i++) CHECK(tslab_free(a, kept[i]));
  CHECK(tslab_free(a, leaked));
  CHECK(tslab_epoch_unref(a, e3) == TSLAB_OK);
  CHECK_CONSISTENT(a);
  tslab_destroy(a);
  TEST_DONE();
}
