/* Request scope: a server loop that gives every request its own epoch domain.
 *
 * Each request parses a few megabytes of headers and body chunks, answers,
 * and frees what it built. When the request's last scope exits, the domain
 * closes its epoch and the request's slabs go back to the operating system
 * before the next request starts, so the process returns to its baseline
 * after every batch, however many requests it has served. */
#include <stdint.h>
#include <string.h>

#include "example_check.h"
#include "tslab.h"

/* AddressSanitizer and ThreadSanitizer keep shadow memory for every byte the
 * requests touched; pages the allocator gives back leave that shadow behind. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SHADOW_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SHADOW_SANITIZER 1
#endif
#endif
#ifndef UNDER_SHADOW_SANITIZER
#define UNDER_SHADOW_SANITIZER 0
#endif

enum { BATCHES = 8, REQUESTS_PER_BATCH = 40, CHUNKS_PER_REQUEST = 24000 };

typedef struct chunk {
  struct chunk* next;
  uint32_t len;
  unsigned char data[];
} chunk_t;

static uint64_t peak_rss;

/* Handle one request inside its own domain; returns the response checksum. */
static uint64_t handle_request(tslab_t* a, uint32_t id) {
  tslab_domain_t* req = tslab_domain_create(a, "request");
  EXPECT(req != NULL, "create: %s", tslab_strerror(tslab_last_error()));
  EXPECT(tslab_domain_enter(req) == TSLAB_OK, "enter: %s", tslab_strerror(tslab_last_error()));

  /* Parse: allocations need no epoch argument inside the domain. */
  chunk_t* head = NULL;
  for (uint32_t i = 0; i < CHUNKS_PER_REQUEST; i++) {
    uint32_t len = 24 + (i * 37 + id) % 360;
    chunk_t* c = tslab_domain_alloc(sizeof *c + len);
    EXPECT(c != NULL, "alloc: %s", tslab_strerror(tslab_last_error()));
    c->len = len;
    memset(c->data, (int)(i & 0xff), len);
    c->next = head;
    head = c;
  }
  uint64_t rss = tslab_process_rss();
  if (rss > peak_rss) peak_rss = rss;

  /* Respond, then drop the request's data. */
  uint64_t sum = 0;
  while (head != NULL) {
    chunk_t* next = head->next;
    sum += head->len + head->data[head->len - 1];
    EXPECT(tslab_free(a, head), "free of a live chunk");
    head = next;
  }
  tslab_epoch_t era = tslab_domain_epoch(req);
  EXPECT(tslab_domain_exit(req) == TSLAB_OK, "exit");
  EXPECT(tslab_epoch_status(a, era) == TSLAB_ERR_EPOCH_CLOSED, "the request's epoch is closed");
  EXPECT(tslab_domain_destroy(req) == TSLAB_OK, "destroy");
  return sum;
}

int main(void) {
  tslab_t* a = tslab_create(NULL);
  EXPECT(a != NULL, "create: %s", tslab_strerror(tslab_last_error()));

  /* One warm-up request touches the metadata every later request reuses. */
  uint64_t expected = handle_request(a, 0);
  tslab_stats_global_t base;
  EXPECT(tslab_stats_global(a, &base) == TSLAB_OK, "stats");
  uint64_t base_rss = tslab_process_rss();
  EXPECT(base_rss > 0, "process RSS is readable");
  printf("baseline: rss %.2f MiB, allocator resident %.2f MiB\n", MIB(base_rss),
         MIB(base.resident_estimate_bytes));

  peak_rss = 0;
  for (int b = 0; b < BATCHES; b++) {
    for (uint32_t r = 0; r < REQUESTS_PER_BATCH; r++)
      EXPECT(handle_request(a, 0) == expected, "the same request gives the same answer");
    tslab_stats_global_t g;
    EXPECT(tslab_stats_global(a, &g) == TSLAB_OK, "stats");
    uint64_t rss = tslab_process_rss();
    printf("batch %d: rss %.2f MiB (peak in request %.2f MiB), allocator resident %.2f MiB, "
           "live %llu objects\n",
           b, MIB(rss), MIB(peak_rss), MIB(g.resident_estimate_bytes),
           (unsigned long long)g.live_objects);
    EXPECT(g.live_objects == 0 && g.live_bytes == 0, "no request data survives its request");
    EXPECT(g.resident_estimate_bytes <= base.resident_estimate_bytes,
           "allocator memory back at its baseline (%.2f > %.2f MiB)",
           MIB(g.resident_estimate_bytes), MIB(base.resident_estimate_bytes));
    /* A sanitizer's shadow is process memory the allocator cannot give back. */
    if (!UNDER_SHADOW_SANITIZER)
      EXPECT(rss <= base_rss + (2u << 20), "process RSS back within 2 MiB of its baseline (%.2f MiB)",
             MIB(rss));
  }
  /* The requests really used memory: the baseline is not trivially met. */
  EXPECT(peak_rss >= base_rss + (2u << 20), "a request holds megabytes while it runs (peak %.2f MiB)",
         MIB(peak_rss));

  tslab_stats_global_t end;
  EXPECT(tslab_stats_global(a, &end) == TSLAB_OK, "stats");
  EXPECT(end.epochs_closed_total >= BATCHES * REQUESTS_PER_BATCH, "every request closed its epoch");
  EXPECT(tslab_check(a, NULL, 0) == 0, "allocator consistent");
  tslab_destroy(a);
  printf("ok: %d requests, memory back at baseline after every batch\n",
         BATCHES * REQUESTS_PER_BATCH + 1);
  return 0;
}
