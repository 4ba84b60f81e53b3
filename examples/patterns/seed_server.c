/* A program written for the seed's API only (slab_alloc.h, epoch_domain.h,
 * slab_stats.h), as a server of the first temporal-slab release would be: a
 * context object in epoch 0, request data in the current epoch, the epoch
 * rotated every 1000 requests, one request domain per admin request, handles
 * for a session table, and the seed's statistics. It compiles unchanged
 * against the compatibility headers and checks that it behaves as the seed
 * documented. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "epoch_domain.h"
#include "slab_alloc.h"
#include "slab_stats.h"

static int failures;

static void expect(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "seed_server: FAILED: %s\n", what);
    failures++;
  }
}

enum { REQUESTS = 100000, ROTATE_EVERY = 1000, SESSIONS = 256 };

int main(void) {
  SlabAllocator* alloc = slab_allocator_create();
  if (alloc == NULL) {
    fprintf(stderr, "seed_server: slab_allocator_create failed\n");
    return 1;
  }

  /* Long-lived server state in epoch 0. */
  char* server_ctx = slab_malloc_epoch(alloc, 256, 0);
  expect(server_ctx != NULL, "server context allocated in epoch 0");
  if (server_ctx == NULL) return 1;
  strcpy(server_ctx, "server-context");

  /* A session table addressed by handles. */
  SlabHandle sessions[SESSIONS];
  for (int i = 0; i < SESSIONS; i++) {
    expect(alloc_obj_epoch(alloc, 192, 0, &sessions[i]) != NULL, "session allocated");
  }

  uint64_t t0 = now_ns();
  int served = 0;
  for (int i = 0; i < REQUESTS; i++) {
    if (i % ROTATE_EVERY == 0) epoch_advance(alloc);
    EpochId e = epoch_current(alloc);
    void* req_data = slab_malloc_epoch(alloc, 128, e);
    void* req_buffer = slab_malloc_epoch(alloc, 256, e);
    if (req_data == NULL || req_buffer == NULL) {
      expect(false, "request allocations in the current epoch");
      break;
    }
    memset(req_data, i & 0xff, 128);
    memset(req_buffer, i & 0xff, 256);
    slab_free(alloc, req_data);
    slab_free(alloc, req_buffer);
    served++;
  }
  uint64_t elapsed = now_ns() - t0;
  expect(served == REQUESTS, "every request served");
  expect(epoch_current(alloc) == (REQUESTS / ROTATE_EVERY) % 16, "the epoch ring wrapped");
  expect(strcmp(server_ctx, "server-context") == 0, "the server context survived every rotation");

  /* Admin requests in scoped domains. */
  for (int r = 0; r < 20; r++) {
    epoch_domain_t* req = epoch_domain_create(alloc);
    expect(req != NULL, "request domain");
    if (req == NULL) break;
    epoch_domain_enter(req);
    expect(epoch_domain_current() == req, "the domain is current");
    expect(epoch_domain_allocator() == alloc, "the domain's allocator");
    slab_epoch_set_label(alloc, req->epoch_id, "admin");
    void* report = slab_malloc_epoch(alloc, 512, req->epoch_id);
    expect(report != NULL, "allocation in the request domain");
    slab_free(alloc, report);
    epoch_domain_exit(req);
    expect(slab_malloc_epoch(alloc, 64, req->epoch_id) == NULL,
           "a domain's epoch rejects allocations after its last exit");
    epoch_domain_destroy(req);
  }
  slab_free(alloc, NULL);

  for (int i = 0; i < SESSIONS; i++) expect(free_obj(alloc, sessions[i]), "session freed");
  expect(!free_obj(alloc, sessions[0]), "a stale handle is refused");

  SlabGlobalStats gs;
  slab_stats_global(alloc, &gs);
  PerfCounters pc;
  get_perf_counters(alloc, 2, &pc);
  SlabClassStats cs;
  slab_stats_class(alloc, 2, &cs);
  printf("served %d requests in %.1f ms; %llu slabs live, rss %.2f MiB, "
         "128-byte class: %llu allocations, %llu slow-path hits, %u objects per slab\n",
         served, (double)elapsed / 1e6, (unsigned long long)gs.net_slabs,
         (double)read_rss_bytes_linux() / (1024.0 * 1024.0),
         (unsigned long long)cs.bitmap_alloc_attempts, (unsigned long long)pc.slow_path_hits,
         slab_object_count(128));
  expect(gs.version == SLAB_STATS_VERSION, "stats version");
  expect(gs.current_epoch == epoch_current(alloc), "stats name the current epoch");
  expect(cs.bitmap_alloc_attempts >= REQUESTS, "the 128-byte class served every request");
  expect(pc.slow_path_hits > 0, "slow path counted");
  expect(slab_object_count(128) > 0, "objects per slab");

  slab_free(alloc, server_ctx);
  slab_allocator_free(alloc);
  if (failures) return 1;
  printf("ok\n");
  return 0;
}
