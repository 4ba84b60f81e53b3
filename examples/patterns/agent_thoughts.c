/* Agent runtime: nested thought domains.
 *
 * A thought allocates its context, tool responses and reasoning scratch in
 * its own domain and spawns sub-thoughts, each in a nested domain of its own.
 * A sub-thought copies its conclusion into the parent's memory and ends; its
 * scratch returns to the OS right then, while the parent (and every thought
 * above it) keeps its own memory until it finishes in turn. */
#include <stdint.h>
#include <string.h>

#include "example_check.h"
#include "tslab.h"

enum { DEPTH = 4, FANOUT = 3, SCRATCH_ITEMS = 1500, CONCLUSION = 120 };

typedef struct conclusion {
  struct conclusion* next;
  char text[CONCLUSION];
} conclusion_t;

static int thoughts_run;

static tslab_stats_epoch_t epoch_stats(tslab_t* a, tslab_epoch_t e) {
  tslab_stats_epoch_t es;
  EXPECT(tslab_stats_epoch(a, e, &es) == TSLAB_OK, "epoch stats: %s",
         tslab_strerror(tslab_last_error()));
  return es;
}

/* Runs a thought; returns its conclusion, allocated in out_era (the parent
 * thought's epoch, or the agent's for a root thought). */
static conclusion_t* think(tslab_t* a, int depth, tslab_epoch_t out_era) {
  tslab_domain_t* thought = tslab_domain_create(a, depth == 0 ? "thought" : "sub-thought");
  EXPECT(thought != NULL, "create: %s", tslab_strerror(tslab_last_error()));
  EXPECT(tslab_domain_enter(thought) == TSLAB_OK, "enter: %s", tslab_strerror(tslab_last_error()));
  thoughts_run++;
  tslab_epoch_t me = tslab_domain_epoch(thought);

  /* Reasoning scratch: tool responses and intermediate tokens. */
  void* scratch[SCRATCH_ITEMS];
  for (int i = 0; i < SCRATCH_ITEMS; i++) {
    scratch[i] = tslab_domain_alloc(64 + (size_t)(i % 12) * 48);
    EXPECT(scratch[i] != NULL, "scratch: %s", tslab_strerror(tslab_last_error()));
    memset(scratch[i], depth, 64);
  }

  conclusion_t* gathered = NULL;
  if (depth + 1 < DEPTH) {
    for (int s = 0; s < FANOUT; s++) {
      conclusion_t* c = think(a, depth + 1, me);
      c->next = gathered;
      gathered = c;
      /* The sub-thought is over: its epoch is closed and fully returned,
       * ours is still open and holding our scratch. */
      EXPECT(tslab_domain_current() == thought, "back in the parent thought");
      EXPECT(epoch_stats(a, me).state == TSLAB_EPOCH_ACTIVE, "the parent thought is still open");
    }
  }

  conclusion_t* out = tslab_alloc(a, sizeof *out, out_era);
  EXPECT(out != NULL, "conclusion: %s", tslab_strerror(tslab_last_error()));
  int n = 0;
  for (conclusion_t* c = gathered; c != NULL; c = c->next) n++;
  snprintf(out->text, sizeof out->text, "depth %d concluded from %d sub-thoughts", depth, n);
  out->next = NULL;

  while (gathered != NULL) {
    conclusion_t* next = gathered->next;
    EXPECT(tslab_free(a, gathered), "free sub-conclusion");
    gathered = next;
  }
  for (int i = 0; i < SCRATCH_ITEMS; i++) EXPECT(tslab_free(a, scratch[i]), "free scratch");
  EXPECT(tslab_domain_exit(thought) == TSLAB_OK, "exit");
  EXPECT(tslab_domain_destroy(thought) == TSLAB_OK, "destroy");

  tslab_stats_epoch_t es = epoch_stats(a, me);
  EXPECT(es.state == TSLAB_EPOCH_CLOSING, "the thought's epoch closed when it finished");
  EXPECT(es.live_objects == 0 && es.rss_estimate_bytes == 0,
         "the thought's memory is returned at its end (%.2f MiB resident)",
         MIB(es.rss_estimate_bytes));
  EXPECT(es.released_total_bytes + hot_reserve(a) > 0,
         "the thought's memory went back to the OS or to the hot reserve kept for the next thought");
  return out;
}

int main(void) {
  /* Every thought opens an era, and an era stays open only until the ring
   * wraps onto its slot: a root thought sees 39 descendants opened, the
   * agent's own epoch all 120 thoughts of the run. The largest ring keeps
   * them all open. */
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = 256;
  tslab_t* a = tslab_create(&cfg);
  EXPECT(a != NULL, "create: %s", tslab_strerror(tslab_last_error()));
  /* The agent's long-lived memory (its answers) lives in its own epoch. */
  tslab_epoch_t agent = tslab_epoch_current(a);
  for (int task = 0; task < 3; task++) {
    conclusion_t* answer = think(a, 0, agent);
    printf("task %d: %s\n", task, answer->text);
    EXPECT(strstr(answer->text, "from 3 sub-thoughts") != NULL, "the root gathered its sub-thoughts");
    EXPECT(tslab_free(a, answer), "free answer");
  }
  int expected = 0;
  for (int d = 0, width = 1; d < DEPTH; d++, width *= FANOUT) expected += width;
  EXPECT(thoughts_run == 3 * expected, "every thought ran (%d)", thoughts_run);

  tslab_stats_global_t g;
  EXPECT(tslab_stats_global(a, &g) == TSLAB_OK, "stats");
  EXPECT(g.live_objects == 0, "nothing leaked");
  tslab_leak_t leaks[16];
  size_t n = tslab_leak_check(a, 0, leaks, 16);
  for (size_t i = 0; i < n; i++) EXPECT(!leaks[i].refcount_stuck, "no thought left a scope open");
  EXPECT(tslab_check(a, NULL, 0) == 0, "allocator consistent");
  tslab_destroy(a);
  printf("ok: %d thoughts\n", thoughts_run);
  return 0;
}
