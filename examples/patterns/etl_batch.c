/* ETL: one batch domain across the parse, filter and write stages.
 *
 * Rows must survive from the parse stage to the write stage, so the batch
 * wraps one epoch that no stage exit closes; each stage enters the same
 * domain. The write stage frees each row once it is written (a free costs
 * no system call: the row's slab stays resident for the next rows), and when
 * the batch commits, force-closing the domain returns the whole batch's
 * memory to the OS in one call. Closing does not free live objects: a row
 * still referenced after the commit would stay valid and keep its slab. */
#include <stdint.h>
#include <string.h>

#include "example_check.h"
#include "tslab.h"

enum { BATCHES = 5, ROWS = 40000 };

typedef struct row {
  uint64_t id;
  uint32_t ncols;
  char text[84];
} row_t;

static row_t* parsed[ROWS];
static row_t** kept;
static size_t nkept;

static void stage_parse(tslab_domain_t* batch, int b) {
  EXPECT(tslab_domain_enter(batch) == TSLAB_OK, "enter parse");
  for (int i = 0; i < ROWS; i++) {
    row_t* r = tslab_domain_alloc(sizeof *r);
    EXPECT(r != NULL, "row: %s", tslab_strerror(tslab_last_error()));
    r->id = (uint64_t)b * ROWS + (uint64_t)i;
    r->ncols = (uint32_t)(i % 9);
    snprintf(r->text, sizeof r->text, "row-%d-%d", b, i);
    parsed[i] = r;
  }
  EXPECT(tslab_domain_exit(batch) == TSLAB_OK, "exit parse");
}

static void stage_filter(tslab_t* a, tslab_domain_t* batch) {
  EXPECT(tslab_domain_enter(batch) == TSLAB_OK, "enter filter");
  kept = tslab_domain_alloc(ROWS * sizeof *kept);
  EXPECT(kept != NULL, "index: %s", tslab_strerror(tslab_last_error()));
  nkept = 0;
  for (int i = 0; i < ROWS; i++) {
    if (parsed[i]->ncols >= 3) kept[nkept++] = parsed[i];
    else EXPECT(tslab_free(a, parsed[i]), "free filtered-out row");
  }
  EXPECT(tslab_domain_exit(batch) == TSLAB_OK, "exit filter");
}

static uint64_t stage_write(tslab_t* a) {
  uint64_t checksum = 0;
  for (size_t i = 0; i < nkept; i++) {
    checksum += kept[i]->id * 31 + strlen(kept[i]->text);
    EXPECT(tslab_free(a, kept[i]), "free written row");
  }
  EXPECT(tslab_free(a, kept), "free index");
  return checksum;
}

int main(void) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  /* A hot reserve large enough to hold a batch's emptied slabs while it
   * runs; the commit closes the batch and hands the reserve back. */
  cfg.pool_resident_max = 64u << 20;
  tslab_t* a = tslab_create(&cfg);
  EXPECT(a != NULL, "create: %s", tslab_strerror(tslab_last_error()));
  /* Measured after the first commit, once the allocator's metadata (and a
   * sanitizer's shadow memory) for one batch has been touched. */
  uint64_t base_rss = 0;

  for (int b = 0; b < BATCHES; b++) {
    tslab_epoch_t era = tslab_epoch_advance(a);
    EXPECT(tslab_epoch_set_label(a, era, "etl-batch") == TSLAB_OK, "label");
    tslab_domain_t* batch = tslab_domain_wrap(a, era);
    EXPECT(batch != NULL, "wrap: %s", tslab_strerror(tslab_last_error()));

    stage_parse(batch, b);
    EXPECT(tslab_epoch_status(a, era) == TSLAB_OK, "the batch survives its stages");
    stage_filter(a, batch);
    uint64_t checksum = stage_write(a);

    tslab_stats_global_t g0;
    EXPECT(tslab_stats_global(a, &g0) == TSLAB_OK, "stats");
    uint64_t rss_before = tslab_process_rss();
    EXPECT(tslab_domain_force_close(batch) == TSLAB_OK, "commit");
    size_t reserved = (size_t)hot_reserve(a);
    EXPECT(tslab_reserve_release(a) == reserved, "the reserve goes back on demand");
    uint64_t rss_after = tslab_process_rss();
    tslab_stats_global_t g1;
    EXPECT(tslab_stats_global(a, &g1) == TSLAB_OK, "stats");
    tslab_stats_epoch_t es;
    EXPECT(tslab_stats_epoch(a, era, &es) == TSLAB_OK, "epoch stats");
    printf("batch %d: %zu rows written (checksum %llu), commit released %.2f MiB in %llu us, "
           "rss %.2f -> %.2f MiB\n",
           b, nkept, (unsigned long long)checksum, MIB(es.released_at_close_bytes),
           (unsigned long long)(es.close_ns / 1000), MIB(rss_before), MIB(rss_after));
    EXPECT(nkept > ROWS / 2, "the filter kept most rows");
    EXPECT(es.live_objects == 0 && es.rss_estimate_bytes == 0, "nothing of the batch resident");
    EXPECT(es.released_at_close_bytes + reserved >= (uint64_t)ROWS * sizeof(row_t) / 2,
           "the commit returned the batch's memory (%.2f MiB at the close, %.2f MiB from the reserve)",
           MIB(es.released_at_close_bytes), MIB(reserved));
    EXPECT(g1.reserve_bytes == 0, "nothing kept after the commit");
    EXPECT(g1.release_calls_total > g0.release_calls_total, "release happened at the commit");
    if (b == 0) base_rss = rss_after;
    EXPECT(rss_after <= base_rss + (2u << 20), "process RSS back within 2 MiB of its baseline");
    EXPECT(tslab_domain_destroy(batch) == TSLAB_OK, "destroy");
  }
  EXPECT(tslab_check(a, NULL, 0) == 0, "allocator consistent");
  tslab_destroy(a);
  printf("ok\n");
  return 0;
}
