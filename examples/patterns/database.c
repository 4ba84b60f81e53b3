/* Database: nested transaction and query domains.
 *
 * A transaction holds its lock table and write-ahead log entries until
 * commit; each query inside it builds a parse tree, a plan and scratch rows
 * that are dead as soon as the query ends. Giving the query its own domain,
 * nested inside the transaction's, puts the two lifetimes on different slabs:
 * query memory returns to the OS when each query ends while the transaction
 * keeps allocating, and the transaction's memory goes at commit. One query
 * hands its result set to the caller, which frees it after the query's
 * domain has closed: the slabs of a closed epoch are returned by the free
 * that empties them. */
#include <stdint.h>
#include <string.h>

#include "example_check.h"
#include "tslab.h"

enum { QUERIES = 6, PLAN_NODES = 6000, WAL_PER_QUERY = 800, RESULT_ROWS = 3000 };

typedef struct node {
  struct node* left;
  struct node* right;
  uint32_t op;
  unsigned char payload[140];
} node_t;

typedef struct wal_entry {
  uint64_t lsn;
  uint32_t table, len;
  unsigned char image[96];
} wal_entry_t;

static wal_entry_t* wal[QUERIES * WAL_PER_QUERY];
static size_t wal_len;
static void* results[RESULT_ROWS];

static tslab_stats_epoch_t epoch_stats(tslab_t* a, tslab_epoch_t e) {
  tslab_stats_epoch_t es;
  EXPECT(tslab_stats_epoch(a, e, &es) == TSLAB_OK, "epoch stats: %s",
         tslab_strerror(tslab_last_error()));
  return es;
}

/* Runs one query; when keep_results, its result rows outlive the query. */
static void run_query(tslab_t* a, int q, bool keep_results) {
  tslab_domain_t* txn = tslab_domain_current();
  tslab_domain_t* query = tslab_domain_create(a, "query");
  EXPECT(query != NULL, "create query: %s", tslab_strerror(tslab_last_error()));
  EXPECT(tslab_domain_enter(query) == TSLAB_OK, "enter query");

  /* Parse and plan: a tree of nodes, all query-scoped. */
  node_t* nodes[PLAN_NODES];
  for (int i = 0; i < PLAN_NODES; i++) {
    nodes[i] = tslab_domain_alloc(sizeof(node_t));
    EXPECT(nodes[i] != NULL, "plan node: %s", tslab_strerror(tslab_last_error()));
    nodes[i]->op = (uint32_t)i;
    nodes[i]->left = i > 0 ? nodes[(i - 1) / 2] : NULL;
    nodes[i]->right = NULL;
  }
  /* Writes go to the transaction's log: allocated in the enclosing domain's
   * epoch by naming it, while the query domain stays innermost. */
  for (int i = 0; i < WAL_PER_QUERY; i++) {
    wal_entry_t* w = tslab_alloc(a, sizeof *w, tslab_domain_epoch(txn));
    EXPECT(w != NULL, "wal entry: %s", tslab_strerror(tslab_last_error()));
    w->lsn = (uint64_t)(q * WAL_PER_QUERY + i);
    wal[wal_len++] = w;
  }
  if (keep_results)
    for (int i = 0; i < RESULT_ROWS; i++) {
      results[i] = tslab_domain_alloc(200);
      EXPECT(results[i] != NULL, "result row");
    }
  for (int i = 0; i < PLAN_NODES; i++) EXPECT(tslab_free(a, nodes[i]), "free plan node");

  tslab_epoch_t qe = tslab_domain_epoch(query);
  EXPECT(tslab_domain_exit(query) == TSLAB_OK, "exit query");
  EXPECT(tslab_domain_destroy(query) == TSLAB_OK, "destroy query");
  tslab_stats_epoch_t es = epoch_stats(a, qe);
  EXPECT(es.state == TSLAB_EPOCH_CLOSING, "the query's epoch closed when the query ended");
  EXPECT(es.released_at_close_bytes + hot_reserve(a) >= (uint64_t)PLAN_NODES * sizeof(node_t) / 2,
         "the query's memory went back to the OS at its end, or to the hot reserve kept for the next "
         "query (%.2f MiB released, %.2f MiB kept)",
         MIB(es.released_at_close_bytes), MIB(hot_reserve(a)));
  if (keep_results) {
    EXPECT(es.live_objects == RESULT_ROWS && es.rss_estimate_bytes > 0,
           "the result set is still live and resident");
    for (int i = 0; i < RESULT_ROWS; i++) EXPECT(tslab_free(a, results[i]), "free result row");
    es = epoch_stats(a, qe);
  }
  EXPECT(es.live_objects == 0 && es.rss_estimate_bytes == 0,
         "nothing of query %d stays resident (%.2f MiB)", q, MIB(es.rss_estimate_bytes));
  printf("query %d: released %.2f MiB at its end, %.2f MiB in total\n", q,
         MIB(es.released_at_close_bytes), MIB(es.released_total_bytes));

  /* The transaction is untouched: still current, open, holding its log. */
  EXPECT(tslab_domain_current() == txn, "back in the transaction");
  es = epoch_stats(a, tslab_domain_epoch(txn));
  EXPECT(es.state == TSLAB_EPOCH_ACTIVE && es.live_objects >= wal_len, "transaction state kept");
}

int main(void) {
  tslab_t* a = tslab_create(NULL);
  EXPECT(a != NULL, "create: %s", tslab_strerror(tslab_last_error()));

  tslab_domain_t* txn = tslab_domain_create(a, "txn");
  EXPECT(txn != NULL && tslab_domain_enter(txn) == TSLAB_OK, "begin transaction");
  void* lock_table = tslab_domain_alloc(16 * 1024);
  EXPECT(lock_table != NULL, "lock table: %s", tslab_strerror(tslab_last_error()));
  memset(lock_table, 0, 16 * 1024);

  for (int q = 0; q < QUERIES; q++) run_query(a, q, q == 2);

  /* Commit: the log is flushed and the transaction's memory goes. */
  tslab_epoch_t te = tslab_domain_epoch(txn);
  for (size_t i = 0; i < wal_len; i++) EXPECT(tslab_free(a, wal[i]), "free wal entry");
  EXPECT(tslab_free(a, lock_table), "free lock table");
  EXPECT(tslab_domain_exit(txn) == TSLAB_OK, "commit");
  EXPECT(tslab_domain_destroy(txn) == TSLAB_OK, "destroy transaction");
  tslab_stats_epoch_t es = epoch_stats(a, te);
  printf("commit: released %.2f MiB\n", MIB(es.released_total_bytes));
  EXPECT(es.state == TSLAB_EPOCH_CLOSING, "the transaction's epoch closed at commit");
  EXPECT(es.live_objects == 0 && es.rss_estimate_bytes == 0, "transaction memory returned");
  EXPECT(es.released_at_close_bytes > 0, "commit returned memory to the OS");

  tslab_stats_global_t g;
  EXPECT(tslab_stats_global(a, &g) == TSLAB_OK, "stats");
  EXPECT(g.live_objects == 0, "nothing leaked");
  EXPECT(tslab_check(a, NULL, 0) == 0, "allocator consistent");
  tslab_destroy(a);
  printf("ok\n");
  return 0;
}
